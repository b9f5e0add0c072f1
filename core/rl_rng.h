// rl_rng — a small seeded random number generator: xoshiro256** seeded through splitmix64,
// uniforms, unbiased bounded integers and standard normals (Marsaglia's polar method).
// The state is a plain struct (llama2.c) so it can be embedded, copied and saved in a
// checkpoint's state.json (4 words + the cached normal). Every stream is bit-identical on any
// IEEE-754 machine for a given seed: the normal path uses only +, -, *, /, sqrt and an
// in-file logarithm (no libm transcendental whose last bit may differ between libms), and no
// product is fused into an addition whatever the compiler flags (checked with gcc and clang,
// -O0 to -O3 -march=native -ffp-contract=fast).
// Not cryptographic; not thread-safe (one state per thread or per role).
#ifndef RL_RNG_H
#define RL_RNG_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    uint64_t s[4];     // xoshiro256** state; never all zero
    int has_spare;     // 1 when `spare` holds the second normal of the last polar pair
    double spare;
} rl_rng_t;

// Seeds the state from one 64-bit seed (4 splitmix64 outputs), clearing the cached normal.
void rl_rng_seed(rl_rng_t *rng, uint64_t seed);

// Next raw 64-bit output of xoshiro256**.
uint64_t rl_rng_u64(rl_rng_t *rng);

// Uniform integer in [0, n) without modulo bias (Lemire's multiply-and-reject); n > 0.
uint64_t rl_rng_below(rl_rng_t *rng, uint64_t n);

// Uniform double in [0, 1) with 53 random bits.
double rl_rng_uniform(rl_rng_t *rng);

// Standard normal N(0, 1) (polar method; pairs are cached, so calls alternate cost).
double rl_rng_normal(rl_rng_t *rng);

// Fills out[0..n) with mean + std * N(0, 1), rounded to float.
void rl_rng_fill_normal(rl_rng_t *rng, float *out, size_t n, float mean, float std);

// Fills out[0..n) with uniforms in [lo, hi).
void rl_rng_fill_uniform(rl_rng_t *rng, float *out, size_t n, float lo, float hi);

#ifdef __cplusplus
}
#endif
#endif
