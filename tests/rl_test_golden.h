// rl_test_golden — readers of the JSON golden files that tests/reference/ scripts write (PyTorch
// answers): a number, a list of numbers as doubles or floats (null = NaN), an enum by name. A
// malformed golden is a test failure naming the key. For suites that include rl_test.h and link
// jansson.
#ifndef RL_TEST_GOLDEN_H
#define RL_TEST_GOLDEN_H

#include "rl_test.h"

#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

// The number at o[key]; NaN (and a failure) when it is not one.
static inline double rl_golden_num(json_t *o, const char *key) {
    json_t *v = json_object_get(o, key);
    CHECK_MSG(json_is_number(v), "golden: no number '%s'", key);
    return json_is_number(v) ? json_number_value(v) : NAN;
}

// The list of n numbers at o[key] (null items = NaN) as a new array of doubles; NULL when the key
// is missing or null. caller owns result; free with free().
static inline double *rl_golden_list(json_t *o, const char *key, size_t n) {
    json_t *a = json_object_get(o, key);
    if (!a || json_is_null(a)) {
        return NULL;
    }
    CHECK_MSG(json_is_array(a) && json_array_size(a) == n, "golden: '%s' is not %zu numbers", key,
              n);
    double *x = calloc(n ? n : 1, sizeof(double));
    for (size_t i = 0; x && json_is_array(a) && i < n && i < json_array_size(a); i++) {
        json_t *v = json_array_get(a, i);
        x[i] = json_is_number(v) ? json_number_value(v) : NAN;
    }
    return x;
}

// As rl_golden_list, as floats (exact: the scripts store float32 values); where mask (may be
// NULL) is 0 the value is replaced by NaN, so that reading a masked position shows.
// caller owns result; free with free().
static inline float *rl_golden_listf(json_t *o, const char *key, size_t n, const float *mask) {
    double *d = rl_golden_list(o, key, n);
    if (!d) {
        return NULL;
    }
    float *f = malloc(n ? n * sizeof(float) : 1);
    for (size_t i = 0; f && i < n; i++) {
        f[i] = mask && mask[i] == 0.0f ? NAN : (float)d[i];
    }
    free(d);
    return f;
}

// The index of the string o[key] in names[0..n); 0 (and a failure) when it is none of them.
static inline int rl_golden_enum(json_t *o, const char *key, const char *const *names, int n) {
    const char *s = json_string_value(json_object_get(o, key));
    for (int i = 0; s && i < n; i++) {
        if (strcmp(s, names[i]) == 0) {
            return i;
        }
    }
    CHECK_MSG(0, "golden: bad %s '%s'", key, s ? s : "(missing)");
    return 0;
}

// A gradient got (n floats) against the golden want (n doubles): returns the largest |got - want|
// over max |want| (over the largest error itself when want is all 0), a NaN or infinity in got
// counting as the worst (the result is then NaN or infinite, which fails any <= bound);
// *max_want_p gets max |want|. Where mask (0/1) is 0 both must be exactly 0: checked, each
// failure naming `what` and the index. Then checks the result <= tol, printing the worst element.
static inline double rl_golden_grad_err(const char *name, const char *what, const float *got,
                                        const double *want, const float *mask, size_t n, double tol,
                                        double *max_want_p) {
    double max_want = 0.0, max_err = 0.0;
    size_t worst = 0;
    for (size_t i = 0; i < n; i++) {
        max_want = fmax(max_want, fabs(want[i]));
        double e = fabs((double)got[i] - want[i]);
        if (!(e <= max_err)) { // NaN too
            max_err = e;
            worst = i;
        }
        if (mask[i] == 0.0f) {
            CHECK_MSG(got[i] == 0.0f && want[i] == 0.0, "%s: masked %s[%zu] %g / %g", name, what, i,
                      got[i], want[i]);
        }
    }
    double rel = max_want > 0 ? max_err / max_want : max_err;
    CHECK_MSG(rel <= tol, "%s: %s[%zu] %.9g want %.9g (max|want| %.3g)", name, what, worst,
              n ? got[worst] : 0.0f, n ? want[worst] : 0.0, max_want);
    if (max_want_p) {
        *max_want_p = max_want;
    }
    return rel;
}

#endif
