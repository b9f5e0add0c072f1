// rlctl env serve — one environment worker: an environment of the ABI (a plugin's .so, or a
// built-in) answering the protocol's request lines on stdin with reply lines on stdout
// (docs/envs.md). `rlctl run` starts env.workers of these for `env: {plugin: ...}`; a user can
// run one by hand to try a plugin (echo '{"op": "reset", ...}' | rlctl env serve --plugin x.so).
#include "rl_cli.h"
#include "rl_env_module.h"
#include "rl_err.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define S_MAX_LINE (64u << 20) // the longest request line read

static void s_usage(FILE *out) {
    fprintf(out,
            "usage: rlctl env serve (--plugin FILE.so | --builtin NAME) [--config JSON]\n\n"
            "Answer the environment protocol (docs/envs.md) on standard input and output: one\n"
            "JSON request line in, one JSON reply line out, until end of input. The\n"
            "environment is a plugin built against include/rlctl/env.h, or a built-in\n"
            "(calc). rlctl run starts these as env.workers of a recipe's env: {plugin: ...}.\n"
            "A request the environment cannot answer gets {\"error\": \"...\"}.\n\n"
            "options:\n"
            "  --plugin FILE.so   the plugin\n"
            "  --builtin NAME     a built-in environment: calc\n"
            "  --config JSON      its create() configuration (default {})\n"
            "  -h, --help         this help\n");
}

// One line of stdin into *buf (without its newline); 0 at the end of input, -1 when too long.
static long s_line(char **buf, size_t *cap) {
    size_t n = 0;
    int c;
    while ((c = getchar()) != EOF && c != '\n') {
        if (n + 2 > *cap) {
            size_t nc = *cap ? *cap * 2 : 4096;
            char *b = nc <= S_MAX_LINE ? realloc(*buf, nc) : NULL;
            if (!b) {
                return -1;
            }
            *buf = b;
            *cap = nc;
        }
        (*buf)[n++] = (char)c;
    }
    if (c == EOF && n == 0) {
        return 0;
    }
    if (!*buf && !(*buf = malloc(*cap = 16))) {
        return -1;
    }
    (*buf)[n] = '\0';
    return (long)n + 1; // + 1: an empty line is not the end
}

static int s_serve(int argc, char **argv) {
    const char *plugin = NULL, *builtin = NULL, *config = "{}";
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], **slot = !strcmp(a, "--plugin")    ? &plugin
                                          : !strcmp(a, "--builtin") ? &builtin
                                          : !strcmp(a, "--config")  ? &config
                                                                    : NULL;
        if (!slot || i + 1 >= argc) {
            fprintf(stderr, "rlctl env serve: %s: %s\n", a, slot ? "needs a value" : "unknown");
            return RL_EXIT_USAGE;
        }
        *slot = argv[++i];
    }
    if (!plugin == !builtin) {
        fprintf(stderr, "rlctl env serve: give one of --plugin FILE.so and --builtin NAME\n");
        return RL_EXIT_USAGE;
    }
    char err[2048];
    rl_env_module_t *m = NULL;
    if (rl_env_module_open(plugin, builtin, config, &m, err, sizeof err) != 0) {
        fprintf(stderr, "rlctl env serve: %s\n", err);
        return RL_EXIT_USAGE;
    }
    char *buf = NULL;
    size_t cap = 0;
    int rc = RL_EXIT_OK;
    for (;;) {
        long got = s_line(&buf, &cap);
        if (got == 0) {
            break;
        }
        if (got < 0) {
            fprintf(stderr, "rlctl env serve: a request line longer than %u bytes\n", S_MAX_LINE);
            rc = RL_EXIT_FAIL;
            break;
        }
        char *reply = NULL;
        size_t rl = 0;
        if (rl_env_module_answer(m, buf, (size_t)got - 1, &reply, &rl, err, sizeof err) != 0) {
            // the request fails, named; the worker goes on
            fputs("{\"error\": \"", stdout);
            for (const char *p = err; *p; p++) {
                if (*p == '"' || *p == '\\') {
                    putchar('\\');
                }
                putchar((unsigned char)*p < 0x20 ? ' ' : *p);
            }
            fputs("\"}\n", stdout);
        } else {
            for (size_t i = 0; i < rl; i++) { // one line: a newline inside would break framing
                putchar(reply[i] == '\n' || reply[i] == '\r' ? ' ' : reply[i]);
            }
            putchar('\n');
        }
        free(reply);
        if (fflush(stdout) != 0) {
            rc = RL_EXIT_FAIL; // the reader is gone
            break;
        }
    }
    free(buf);
    rl_env_module_close(&m);
    return rc;
}

int rl_cmd_env(int argc, char **argv) {
    if (argc < 2 || rl_cli_wants_help(argc, argv)) {
        s_usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? RL_EXIT_USAGE : RL_EXIT_OK;
    }
    if (strcmp(argv[1], "serve") == 0) {
        return s_serve(argc - 1, argv + 1);
    }
    fprintf(stderr, "rlctl env: unknown subcommand '%s' (serve)\n", argv[1]);
    return RL_EXIT_USAGE;
}
