// rl_rng — xoshiro256** (Blackman & Vigna) seeded by splitmix64, with uniforms, bounded
// integers and normals. See rl_rng.h for the determinism contract.
#include "rl_rng.h"

#include "rl_err.h"

#include <math.h>

// The build passes -ffp-contract=fast, and a fused multiply-add rounds once where a*b + c rounds
// twice, so on a machine with FMA a*b + c could differ in its last bit from one without. Pragmas
// do not help (clang ignores them under -ffp-contract=fast), so every product that meets an
// addition goes through s_mul, whose volatile store forces the product to be rounded on its own.
static inline double s_mul(double a, double b) {
    volatile double p = a * b;
    return p;
}

// ---------------------------------------------------------------------------------------------
// core generator

static uint64_t s_splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

static inline uint64_t s_rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

void rl_rng_seed(rl_rng_t *rng, uint64_t seed) {
    RL_ASSERT(rng);
    uint64_t x = seed;
    for (int i = 0; i < 4; i++) {
        rng->s[i] = s_splitmix64(&x);
    }
    // splitmix64 is a bijection of a counter, so four consecutive outputs cannot all be zero;
    // the check documents the invariant xoshiro needs.
    RL_ASSERT(rng->s[0] | rng->s[1] | rng->s[2] | rng->s[3]);
    rng->has_spare = 0;
    rng->spare = 0.0;
}

uint64_t rl_rng_u64(rl_rng_t *rng) {
    uint64_t *s = rng->s;
    uint64_t result = s_rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = s_rotl(s[3], 45);
    return result;
}

uint64_t rl_rng_below(rl_rng_t *rng, uint64_t n) {
    RL_ASSERT(n > 0);
    // Lemire: the high word of x*n is uniform in [0,n) once the low word is outside the
    // 2^64 mod n values that would over-represent some results.
    unsigned __int128 m = (unsigned __int128)rl_rng_u64(rng) * n;
    uint64_t lo = (uint64_t)m;
    if (lo < n) {
        uint64_t threshold = (0 - n) % n;
        while (lo < threshold) {
            m = (unsigned __int128)rl_rng_u64(rng) * n;
            lo = (uint64_t)m;
        }
    }
    return (uint64_t)(m >> 64);
}

double rl_rng_uniform(rl_rng_t *rng) {
    // top 53 bits scaled by 2^-53: exact, every value a multiple of 2^-53
    return (double)(rl_rng_u64(rng) >> 11) * 0x1.0p-53;
}

// ---------------------------------------------------------------------------------------------
// normals

// Natural log of x > 0 from IEEE basic operations only. x = m * 2^e with m in [sqrt(1/2),
// sqrt(2)); ln m = 2 atanh(z), z = (m-1)/(m+1), |z| <= 0.1716, so z^2 <= 0.0295 and 14 odd
// terms leave a truncation error below 1e-21: the result is within a few ulp of ln x, and,
// more to the point, the same on every machine.
static double s_log(double x) {
    int e = 0;
    double m = frexp(x, &e); // exact: m in [0.5, 1)
    if (m < 0.70710678118654752440) {
        m *= 2.0; // exact
        e -= 1;
    }
    double z = (m - 1.0) / (m + 1.0);
    double z2 = z * z;
    double sum = 0.0;
    for (int k = 27; k >= 3; k -= 2) {
        sum = s_mul(sum + 1.0 / k, z2);
    }
    double ln_m = s_mul(2.0 * z, 1.0 + sum);
    // ln 2 split as in fdlibm: ln2_hi has trailing zero bits, so e * ln2_hi is exact
    const double ln2_hi = 6.93147180369123816490e-01;
    const double ln2_lo = 1.90821492927058770002e-10;
    return s_mul((double)e, ln2_hi) + (s_mul((double)e, ln2_lo) + ln_m);
}

double rl_rng_normal(rl_rng_t *rng) {
    if (rng->has_spare) {
        rng->has_spare = 0;
        return rng->spare;
    }
    // Marsaglia's polar method: (u, v) uniform in the unit disc (minus the origin) gives two
    // independent normals u*f, v*f with f = sqrt(-2 ln s / s). It needs no sin/cos, whose
    // libm results are not bit-reproducible across libraries; it accepts pi/4 of the draws.
    double u, v, s;
    do {
        u = 2.0 * rl_rng_uniform(rng) - 1.0;
        v = 2.0 * rl_rng_uniform(rng) - 1.0;
        s = s_mul(u, u) + s_mul(v, v);
    } while (s >= 1.0 || s == 0.0);
    double f = sqrt(-2.0 * s_log(s) / s); // sqrt is correctly rounded by IEEE-754
    rng->spare = v * f;
    rng->has_spare = 1;
    return u * f;
}

void rl_rng_fill_normal(rl_rng_t *rng, float *out, size_t n, float mean, float std) {
    for (size_t i = 0; i < n; i++) {
        out[i] = (float)((double)mean + s_mul((double)std, rl_rng_normal(rng)));
    }
}

void rl_rng_fill_uniform(rl_rng_t *rng, float *out, size_t n, float lo, float hi) {
    double w = (double)hi - (double)lo;
    for (size_t i = 0; i < n; i++) {
        float x = (float)((double)lo + s_mul(w, rl_rng_uniform(rng)));
        // rounding to float can land on hi itself; keep the interval half-open
        out[i] = x < hi ? x : lo;
    }
}
