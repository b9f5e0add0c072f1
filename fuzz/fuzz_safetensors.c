// fuzz_safetensors — libFuzzer target for the safetensors header parser (rl_st_parse): any
// input must give either a valid handle whose tensors all lie inside the input, or an error
// with a message; never a crash, a leak or an out-of-bounds read; and rl_st_nonfinite names the
// first NaN or inf the conversion gives.
#include "rl_safetensors.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    // A private copy, so ASan flags any read past the end of exactly `size` bytes.
    uint8_t *buf = malloc(size ? size : 1);
    if (!buf) {
        return 0;
    }
    memcpy(buf, data, size);
    char err[512];
    err[0] = '\0';
    rl_st_file_t *f = NULL;
    int rc = rl_st_parse(buf, size, &f, err, sizeof err);
    if (rc != 0) {
        if (f != NULL || err[0] == '\0') {
            abort(); // a failure must come with a message and no handle
        }
    } else {
        float tmp[64];
        for (int i = 0; i < rl_st_file_count(f); i++) {
            const rl_st_tensor_t *t = rl_st_file_tensor(f, i);
            const uint8_t *p = t->data;
            if (p < buf || p + t->nbytes > buf + size ||
                t->nbytes != (size_t)t->numel * rl_dtype_size(t->dtype) ||
                rl_st_file_find(f, t->name) != t) {
                abort();
            }
            if (t->numel <= 64) {
                rl_st_to_f32(tmp, t); // touches every byte of the tensor
                // the non-finite scan reads the same bytes and agrees with the conversion: the
                // first element whose x - x is not 0 (NaN or inf) is the one it names
                int64_t first = -1, at = rl_st_nonfinite(t);
                for (int64_t k = t->numel; k-- > 0;) {
                    first = tmp[k] - tmp[k] != 0.0f ? k : first;
                }
                if (at != first ||
                    (at >= 0) != (rl_st_check_finite(t, "fuzz", err, sizeof err) != 0)) {
                    abort();
                }
            }
        }
        rl_st_file_metadata(f, "format");
        rl_st_file_destroy(&f);
    }
    free(buf);
    return 0;
}
