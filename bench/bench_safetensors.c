// bench_safetensors — load + convert throughput of a 256 MiB BF16 safetensors file (open: mmap
// and validate; rl_st_to_f32 into a float buffer), beside memcpy bandwidth measured in the same
// run as the ceiling. Memory traffic is counted the same way for both: bytes read + bytes
// written (BF16 -> F32 reads 2 and writes 4 bytes per element; memcpy reads and writes n).
// Not a test: it prints figures and ratios.
#include "rl_bench.h"
#include "rl_safetensors.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv) {
    size_t mib = argc > 1 ? (size_t)atol(argv[1]) : 256; // BF16 file size in MiB
    int reps = argc > 2 ? atoi(argv[2]) : 5;
    size_t n = mib * 1024 * 1024 / 2; // BF16 elements
    char path[] = "/tmp/rl_bench_st.XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0) {
        perror("mkstemp");
        return 1;
    }
    close(fd);
    uint16_t *bf = malloc(n * 2);
    float *out = malloc(n * 4);
    float *copy = malloc(n * 4);
    if (!bf || !out || !copy) {
        fprintf(stderr, "out of memory\n");
        return 1;
    }
    for (size_t i = 0; i < n; i++) {
        bf[i] = (uint16_t)(0x3f80 + (i % 127));
    }
    memset(out, 1, n * 4);
    memset(copy, 2, n * 4);
    char err[512];
    rl_st_writer_t *w = rl_st_writer_new();
    const int64_t shape[] = {(int64_t)n / 1024, 1024};
    if (rl_st_writer_add(w, "w", RL_DTYPE_BF16, 2, shape, bf) != 0 ||
        rl_st_writer_write(w, path, err, sizeof err) != 0) {
        fprintf(stderr, "write failed: %s\n", err);
        return 1;
    }
    rl_st_writer_destroy(&w);

    // memcpy ceiling: copy the F32-sized buffer (n*4 bytes read + n*4 written)
    double best_copy = 1e30;
    for (int r = 0; r < reps; r++) {
        double t0 = rl_bench_now();
        memcpy(copy, out, n * 4);
        double dt = rl_bench_now() - t0;
        best_copy = dt < best_copy ? dt : best_copy;
    }
    double copy_gbs = (double)(n * 8) / best_copy / 1e9;

    // load + convert: open (mmap + header validation; file is in the page cache), convert
    double best_load = 1e30;
    for (int r = 0; r < reps; r++) {
        double t0 = rl_bench_now();
        rl_st_file_t *f = rl_st_file_open(path, err, sizeof err);
        if (!f) {
            fprintf(stderr, "open failed: %s\n", err);
            return 1;
        }
        rl_st_to_f32(out, rl_st_file_find(f, "w"));
        rl_st_file_destroy(&f);
        double dt = rl_bench_now() - t0;
        best_load = dt < best_load ? dt : best_load;
    }
    double load_gbs = (double)(n * 6) / best_load / 1e9;
    if (out[n - 1] != rl_bf16_to_f32(bf[n - 1])) {
        fprintf(stderr, "conversion mismatch\n");
        return 1;
    }
    unlink(path);
    printf("| safetensors load+convert BF16->F32 (%zu MiB file) | %.2f GB/s traffic "
           "(%.2f GB/s of file) | memcpy %.2f GB/s | %.0f%% of memcpy |\n",
           mib, load_gbs, (double)(n * 2) / best_load / 1e9, copy_gbs,
           100.0 * load_gbs / copy_gbs);
    free(bf);
    free(out);
    free(copy);
    return 0;
}
