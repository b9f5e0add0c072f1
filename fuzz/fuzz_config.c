// fuzz_config — libFuzzer target for the recipe loader (rl_yaml + rl_config). The input is the
// recipe text under a fixed fake path, so referenced files do not exist and every stage up to
// the file checks runs. Bytes after the first NUL are command-line overrides, NUL-separated
// (a recipe cannot hold NUL, so nothing is lost). On the half of inputs whose first byte is odd the file checks are
// skipped; a recipe that then loads must print as YAML that loads again to the same text (the
// fixed point `rlctl validate` promises), or the target aborts.
#include "rl_config.h"
#include "rl_algos.h"
#include "rl_err.h"

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static char s_err[1 << 14];

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > (1u << 20)) {
        return 0;
    }
    unsigned flags = size && (data[0] & 1) ? RL_RECIPE_NO_FILE_CHECKS : 0;
    const uint8_t *nul = memchr(data, 0, size);
    size_t text_len = nul ? (size_t)(nul - data) : size;
    char *tail = NULL;
    const char *ovr[8];
    int n_ovr = 0;
    if (nul) {
        size_t n = size - text_len - 1;
        tail = malloc(n + 1);
        RL_ASSERT(tail);
        memcpy(tail, nul + 1, n);
        tail[n] = '\0';
        for (char *p = tail; n_ovr < 8 && p <= tail + n; p += strlen(p) + 1) {
            ovr[n_ovr++] = p;
        }
    }
    rl_recipe_t *r = NULL;
    int rc = rl_recipe_load_string(rl_algos(), (const char *)data, text_len, "fuzz/recipe.yaml",
                                   ovr, n_ovr, flags, &r, s_err, sizeof s_err);
    free(tail);
    RL_ASSERT(rc == 0 || rc == RL_EINVAL || rc == RL_ENOMEM);
    RL_ASSERT((rc == 0) == (r != NULL));
    if (rc != 0) {
        RL_ASSERT(s_err[0] != '\0');
        return 0;
    }
    char *y1 = NULL, *y2 = NULL;
    rl_recipe_t *r2 = NULL;
    RL_ASSERT(rl_recipe_to_yaml(r, &y1) == 0);
    rc = rl_recipe_load_string(rl_algos(), y1, strlen(y1), "fuzz/resolved.yaml", NULL, 0, flags,
                               &r2, s_err, sizeof s_err);
    RL_ASSERT(rc == 0);
    RL_ASSERT(rl_recipe_to_yaml(r2, &y2) == 0);
    RL_ASSERT(strcmp(y1, y2) == 0);
    free(y1);
    free(y2);
    rl_recipe_destroy(&r2);
    rl_recipe_destroy(&r);
    return 0;
}
