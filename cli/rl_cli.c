// rl_cli — helpers shared by the rlctl subcommands: --help detection and option-value parsing
// with one message format.
#include "rl_cli.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int rl_cli_wants_help(int argc, char **argv) {
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            return 1;
        }
        if (strcmp(argv[i], "--") == 0) {
            break;
        }
    }
    return 0;
}

int rl_cli_int(const char *cmd, const char *flag, const char *v, long lo, long hi, int *out) {
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (end == v || *end || errno || x < lo || x > hi) {
        fprintf(stderr, "rlctl %s: %s '%s': expected an integer in [%ld, %ld]\n", cmd, flag, v,
                lo, hi);
        return RL_EXIT_USAGE;
    }
    *out = (int)x;
    return 0;
}

int rl_cli_float(const char *cmd, const char *flag, const char *v, double lo, double hi,
                 float *out) {
    char *end;
    errno = 0;
    double x = strtod(v, &end);
    if (end == v || *end || errno || !(x >= lo && x <= hi)) {
        fprintf(stderr, "rlctl %s: %s '%s': expected a number in [%g, %g]\n", cmd, flag, v, lo,
                hi);
        return RL_EXIT_USAGE;
    }
    *out = (float)x;
    return 0;
}

int rl_cli_u64(const char *cmd, const char *flag, const char *v, uint64_t *out) {
    char *end;
    errno = 0;
    unsigned long long x = strtoull(v, &end, 10);
    if (end == v || *end || errno || v[0] == '-') {
        fprintf(stderr, "rlctl %s: %s '%s': expected an unsigned integer\n", cmd, flag, v);
        return RL_EXIT_USAGE;
    }
    *out = (uint64_t)x;
    return 0;
}
