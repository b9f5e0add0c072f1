// rl_cli_flags — one parse of every subcommand's flags through glibc's getopt_long before the
// subcommand reads them: `--flag=value` and `--flag value` alike, unambiguous abbreviations
// (`--thr` for `--threads`), and a clear message for a flag the command does not have (with
// the nearest one), a missing value, a value given to a flag that takes none, or an ambiguous
// abbreviation. The subcommand then sees its flags spelled out in full, in their original order
// among the positional arguments. A command that takes recipe overrides (run, validate) answers
// a flag that is a recipe setting's name, TRL's `--learning_rate 1e-5` or `--optim.lr 1e-5`,
// with the override to write instead (`optim.lr=1e-5`).
#include "rl_cli.h"
#include "rl_algos.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define S_MAX_FLAGS 48

typedef struct {
    char name[40];
    int has_arg; // no_argument, required_argument, optional_argument
} s_flag_t;

// Parses spec ("force stop-at= resume?") into flags; returns their count.
static int s_parse_spec(const char *spec, s_flag_t *flags) {
    int n = 0;
    for (const char *p = spec; *p && n < S_MAX_FLAGS;) {
        while (*p == ' ') {
            p++;
        }
        size_t len = strcspn(p, " ");
        if (len == 0) {
            break;
        }
        s_flag_t *f = &flags[n++];
        f->has_arg = p[len - 1] == '='   ? required_argument
                     : p[len - 1] == '?' ? optional_argument
                                         : no_argument;
        size_t nl = len - (f->has_arg != no_argument);
        nl = nl < sizeof f->name - 1 ? nl : sizeof f->name - 1;
        memcpy(f->name, p, nl);
        f->name[nl] = '\0';
        p += len;
    }
    return n;
}

// Edit distance of two short strings (the nearest flag to a typo).
static size_t s_distance(const char *a, const char *b) {
    size_t la = strlen(a), lb = strlen(b);
    if (la > 60 || lb > 60) {
        return (size_t)-1;
    }
    size_t d[61];
    for (size_t j = 0; j <= lb; j++) {
        d[j] = j;
    }
    for (size_t i = 1; i <= la; i++) {
        size_t prev = d[0];
        d[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t cur = d[j];
            size_t sub = prev + (a[i - 1] != b[j - 1]);
            size_t del = d[j] + 1, ins = d[j - 1] + 1;
            d[j] = sub < del ? (sub < ins ? sub : ins) : (del < ins ? del : ins);
            prev = cur;
        }
    }
    return d[lb];
}

// The commands whose arguments after the recipe are KEY=VALUE overrides.
static int s_takes_overrides(const char *cmd) {
    return strcmp(cmd, "run") == 0 || strcmp(cmd, "validate") == 0;
}

// `--want[=value]` (next: the argument after it, or NULL) given to a command that takes recipe
// overrides, when want is a recipe key (optim.lr) or a name TRL, verl ... users write for one
// (learning_rate, learning-rate): prints the override to write instead and returns 1; else 0.
static int s_setting_flag(const char *cmd, const char *want, const char *arg, const char *next) {
    char name[64];
    snprintf(name, sizeof name, "%s", want);
    for (char *p = name; *p; p++) {
        *p = *p == '-' ? '_' : *p; // HfArgumentParser takes --learning-rate too
    }
    const char *eq = strchr(arg, '=');
    const char *value = eq ? eq + 1 : next && strncmp(next, "--", 2) != 0 ? next : "VALUE";
    char hint[768];
    const char *key = NULL;
    if (strchr(name, '.') && rl_recipe_key_find(rl_algos(), name)) {
        fprintf(stderr,
                "rlctl %s: unknown option '--%s'; recipe settings are given after the recipe "
                "as KEY=VALUE: %s=%s\n",
                cmd, want, name, value);
        return 1;
    }
    if (!rl_recipe_foreign(rl_algos(), NULL, name, hint, sizeof hint, &key)) {
        return 0;
    }
    if (key) {
        size_t kl = strcspn(key, ": [");
        fprintf(stderr,
                "rlctl %s: unknown option '--%s'; %s; give it after the recipe as %.*s=%s\n", cmd,
                want, hint, (int)kl, key, value);
    } else {
        fprintf(stderr, "rlctl %s: unknown option '--%s'; %s\n", cmd, want, hint);
    }
    return 1;
}

// Why getopt_long refused `arg` ("--name[=value]"; next: the argument after it, or NULL), on
// stderr.
static void s_refused(const char *cmd, const char *arg, const char *next, const s_flag_t *flags,
                      int n) {
    const char *name = arg + 2;
    size_t nl = strcspn(name, "=");
    char want[64];
    snprintf(want, sizeof want, "%.*s", (int)(nl < 60 ? nl : 60), name);
    if (s_takes_overrides(cmd) && s_setting_flag(cmd, want, arg, next)) {
        return;
    }
    int prefix = 0, exact = -1, only = -1;
    char all[512] = "";
    for (int i = 0; i < n; i++) {
        if (strcmp(flags[i].name, want) == 0) {
            exact = i;
        } else if (strncmp(flags[i].name, want, nl) == 0) {
            prefix++;
            only = i;
            size_t l = strlen(all);
            snprintf(all + l, sizeof all - l, "%s--%.39s", l ? ", " : "", flags[i].name);
        }
    }
    int hit = exact >= 0 ? exact : prefix == 1 ? only : -1; // the flag it names
    if (hit >= 0 && flags[hit].has_arg == no_argument && name[nl] == '=') {
        fprintf(stderr, "rlctl %s: option '--%s' takes no value\n", cmd, flags[hit].name);
    } else if (exact < 0 && prefix > 1) {
        fprintf(stderr, "rlctl %s: option '--%s' is ambiguous: %s\n", cmd, want, all);
    } else {
        int best = -1;
        size_t bd = (size_t)-1;
        for (int i = 0; i < n; i++) {
            size_t d = s_distance(want, flags[i].name);
            if (d < bd) {
                bd = d;
                best = i;
            }
        }
        if (best >= 0 && bd <= 2 + strlen(want) / 4) {
            fprintf(stderr,
                    "rlctl %s: unknown option '--%s'; did you mean '--%s'? (rlctl %s "
                    "--help)\n",
                    cmd, want, flags[best].name, cmd);
        } else {
            fprintf(stderr, "rlctl %s: unknown option '--%s' (rlctl %s --help)\n", cmd, want, cmd);
        }
    }
}

int rl_cli_flags(const char *cmd, const char *spec, int *argc_p, char ***argv_p) {
    static char **out = NULL; // the rewritten argv: lives until exit (reachable, not a leak)
    static char names[S_MAX_FLAGS + 1][44];
    s_flag_t flags[S_MAX_FLAGS];
    int n = s_parse_spec(spec, flags);
    struct option lo[S_MAX_FLAGS + 2];
    for (int i = 0; i < n; i++) {
        lo[i] = (struct option){flags[i].name, flags[i].has_arg, NULL, 1000 + i};
        snprintf(names[i], sizeof names[i], "--%s", flags[i].name);
    }
    lo[n] = (struct option){"help", no_argument, NULL, 'h'};
    lo[n + 1] = (struct option){NULL, 0, NULL, 0};
    int argc = *argc_p;
    char **argv = *argv_p;
    free(out);
    out = calloc((size_t)argc * 2 + 2, sizeof *out);
    if (!out) {
        fprintf(stderr, "rlctl %s: out of memory\n", cmd);
        return RL_EXIT_FAIL;
    }
    int k = 0;
    out[k++] = argv[0];
    opterr = 0;
    optind = 0; // glibc: a full reinitialisation
    int c, li = -1;
    // "-": positional arguments come back in order (code 1); ":": a missing value is ':'
    while ((c = getopt_long(argc, argv, "-:h", lo, &li)) != -1) {
        if (c == 1) {
            out[k++] = optarg;
        } else if (c == 'h') {
            out[k++] = "--help";
        } else if (c >= 1000 && c < 1000 + n) {
            out[k++] = names[c - 1000];
            if (optarg) {
                out[k++] = optarg;
            }
        } else if (c == ':') {
            fprintf(stderr, "rlctl %s: option '%s' needs a value\n", cmd, argv[optind - 1]);
            return RL_EXIT_USAGE;
        } else {
            const char *bad = argv[optind - 1];
            if (strncmp(bad, "--", 2) == 0) {
                s_refused(cmd, bad, optind < argc ? argv[optind] : NULL, flags, n);
            } else {
                fprintf(stderr, "rlctl %s: unknown option '%s' (rlctl %s --help)\n", cmd, bad, cmd);
            }
            return RL_EXIT_USAGE;
        }
    }
    if (optind < argc) { // after "--": everything as given
        out[k++] = "--";
        while (optind < argc) {
            out[k++] = argv[optind++];
        }
    }
    out[k] = NULL;
    *argc_p = k;
    *argv_p = out;
    return 0;
}
