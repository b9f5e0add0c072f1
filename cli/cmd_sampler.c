// rlctl sampler serve — a sampler on another host (serving/rl_serve.h, docs/remote.md); rlctl
// keygen — the CURVE key pair it and the controller authenticate with (transport/rl_curve.h).
#include "rl_cli.h"
#include "rl_algos.h"
#include "rl_curve.h"
#include "rl_serve.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void s_serve_help(FILE *out) {
    fprintf(out,
            "usage: rlctl sampler serve --bind tcp://HOST:PORT --key FILE --allow FILE|DIR\n"
            "                           [--model DIR | --cache DIR] [--threads N] [--samplers N]\n"
            "                           [--heartbeat SECONDS]\n"
            "                           [--sessions N] [--http HOST:PORT [--http-token FILE]\n"
            "                           [--http-max-work N]]\n\n"
            "Serves the runs of controllers whose public key is allowed, one run at a time, as\n"
            "a sampler of the model in DIR (a run's model.path must be the same model: its\n"
            "fingerprint is checked) or, without --model, of each run's own model, which the\n"
            "controller sends and the sampler checks by fingerprint. Traffic is encrypted and\n"
            "authenticated with CURVE keys.\n\n"
            "  --bind EP        where to listen, tcp://HOST:PORT (port 0: any; the endpoint is\n"
            "                   printed as \"listening on EP\")\n"
            "  --key FILE       this sampler's secret key (rlctl keygen; mode 0600)\n"
            "  --allow PATH     controllers' public keys: a file (one per line) or a folder of\n"
            "                   *.pub files; reloaded on SIGHUP (a removed key is disconnected)\n"
            "  --model DIR      the Hugging Face model folder to sample from\n"
            "  --cache DIR      without --model: keep the models runs send here (reused by\n"
            "                   later runs of the same model; default: a folder removed at exit)\n"
            "  --threads N      compute threads (default 0: every core), of each sampler\n"
            "  --samplers N     N sampler processes of its own (default 1: this one samples),\n"
            "                   splitting each request; the weights cross the network once\n"
            "  --logs DIR       where those processes' logs go (default: a new folder in\n"
            "                   $TMPDIR, printed)\n"
            "  --heartbeat S    seconds between transport heartbeats (default 1; a peer silent\n"
            "                   for 10 is gone)\n"
            "  --sessions N     exit after N runs (default 0: serve until SIGINT/SIGTERM)\n"
            "  --http HOST:PORT also answer OpenAI-compatible /v1/completions with the policy\n"
            "                   of the run being served (503 between runs); HOST must be a\n"
            "                   loopback address unless --http-token is given\n"
            "  --http-token F   a file holding the bearer token HTTP requests must carry\n"
            "                   (ours, mode 0600)\n"
            "  --http-max-work N  the most tokens one HTTP request may ask for: n x the sum\n"
            "                   over its prompts of prompt tokens + max_tokens (default 65536)\n\n"
            "Keys are only ever read from files: an argument that is a key is refused.\n");
}

static int s_serve(int argc, char **argv) {
    if (rl_cli_wants_help(argc, argv)) {
        s_serve_help(stdout);
        return RL_EXIT_OK;
    }
    int ka = rl_curve_argv_key(argc, argv);
    if (ka >= 0) {
        fprintf(stderr,
                "rlctl sampler serve: argument %d%s%s is a CURVE key itself (40 characters of "
                "Z85, and no such file or folder); keys are read from files only (--key FILE): "
                "anyone on this host can read a process's arguments\n",
                ka, ka > 1 ? ", after " : "", ka > 1 ? argv[ka - 1] : "");
        return RL_EXIT_USAGE;
    }
    rl_serve_opts_t o;
    memset(&o, 0, sizeof o);
    o.algos = rl_algos();
    o.heartbeat = 1.0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v) {
            fprintf(stderr, "rlctl sampler serve: %s needs a value\n", a);
            return RL_EXIT_USAGE;
        }
        int bad = 0;
        float hb;
        if (!strcmp(a, "--bind")) {
            o.bind = v;
        } else if (!strcmp(a, "--key")) {
            o.key = v;
        } else if (!strcmp(a, "--allow")) {
            o.allow = v;
        } else if (!strcmp(a, "--model")) {
            o.model = v;
        } else if (!strcmp(a, "--cache")) {
            o.cache = v;
        } else if (!strcmp(a, "--http")) {
            o.http = v;
        } else if (!strcmp(a, "--http-token")) {
            o.http_token = v;
        } else if (!strcmp(a, "--http-max-work")) {
            bad = rl_cli_int("sampler serve", a, v, 1, 1 << 30, &o.http_max_work);
        } else if (!strcmp(a, "--threads")) {
            bad = rl_cli_int("sampler serve", a, v, 0, 4096, &o.threads);
        } else if (!strcmp(a, "--logs")) {
            o.logs = v;
        } else if (!strcmp(a, "--samplers")) {
            bad = rl_cli_int("sampler serve", a, v, 1, 64, &o.samplers);
        } else if (!strcmp(a, "--sessions")) {
            bad = rl_cli_int("sampler serve", a, v, 0, 1 << 30, &o.sessions);
        } else if (!strcmp(a, "--heartbeat")) {
            bad = rl_cli_float("sampler serve", a, v, 1e-3, 3600, &hb);
            o.heartbeat = hb;
        } else {
            fprintf(stderr, "rlctl sampler serve: unknown option '%s' (--help)\n", a);
            return RL_EXIT_USAGE;
        }
        if (bad) {
            return bad;
        }
        i++;
    }
    if (!o.bind || !o.key || !o.allow || (o.model && o.cache)) {
        s_serve_help(stderr);
        return RL_EXIT_USAGE;
    }
    return rl_serve_main(&o) == 0 ? RL_EXIT_OK : RL_EXIT_FAIL;
}

int rl_cmd_sampler(int argc, char **argv) {
    if (argc >= 2 && !strcmp(argv[1], "serve")) {
        return s_serve(argc - 1, argv + 1);
    }
    if (rl_cli_wants_help(argc, argv)) {
        s_serve_help(stdout);
        return RL_EXIT_OK;
    }
    fprintf(stderr, "usage: rlctl sampler serve ... (rlctl sampler serve --help)\n");
    return RL_EXIT_USAGE;
}

static void s_keygen_help(FILE *out) {
    fprintf(out,
            "usage: rlctl keygen --out DIR [--force]\n\n"
            "Writes a CURVE key pair as Z85 text: DIR/key (the secret key, mode 0600) and\n"
            "DIR/key.pub (the public key, to give to the other side: a sampler's --allow list\n"
            "holds controllers' keys, a recipe's roles.remote_samplers[].server_key a\n"
            "sampler's). An existing key is never overwritten unless --force.\n");
}

int rl_cmd_keygen(int argc, char **argv) {
    if (rl_cli_wants_help(argc, argv)) {
        s_keygen_help(stdout);
        return RL_EXIT_OK;
    }
    const char *dir = NULL;
    int force = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--out") && i + 1 < argc) {
            dir = argv[++i];
        } else if (!strcmp(argv[i], "--force")) {
            force = 1;
        } else {
            fprintf(stderr, "rlctl keygen: unknown option '%s' (--help)\n", argv[i]);
            return RL_EXIT_USAGE;
        }
    }
    if (!dir) {
        s_keygen_help(stderr);
        return RL_EXIT_USAGE;
    }
    char err[1024];
    rl_curve_key_t k;
    if (rl_curve_keygen(dir, force, &k, err, sizeof err) != 0) {
        fprintf(stderr, "rlctl keygen: %s\n", err);
        return RL_EXIT_FAIL;
    }
    printf("wrote %s/key (secret, 0600) and %s/key.pub (public: %s)\n", dir, dir, k.pub);
    memset(&k, 0, sizeof k);
    return RL_EXIT_OK;
}
