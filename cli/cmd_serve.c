// rlctl serve — a finished model (+ a PEFT adapter) behind the OpenAI-compatible completions
// endpoint (serving/rl_http.h), so the tools users already have (curl, the openai client) can query
// it.
#include "rl_chat.h"
#include "rl_cli.h"
#include "rl_http.h"
#include "rl_model.h"
#include "rl_tokenizer.h"

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void s_help(FILE *out) {
    fprintf(out,
            "usage: rlctl serve --model DIR [--adapter DIR] [--http HOST:PORT]\n"
            "                   [--http-token FILE] [--http-max-work N] [--threads N]\n"
            "                   [--name NAME] [--chat-template chatml|llama3]\n"
            "                   [--tool-parser hermes|llama3_json] [--device D]\n\n"
            "Serves the model (with a PEFT LoRA adapter, e.g. a run's final/) as an\n"
            "OpenAI-compatible endpoint: POST /v1/completions (prompt, max_tokens, temperature,\n"
            "top_p, n, stop, seed, logprobs 0..5), POST /v1/chat/completions (messages and\n"
            "tools through the model's chat template, tool_calls parsed back, stream,\n"
            "logprobs/top_logprobs; return_token_ids gives the token ids) and GET /v1/models.\n"
            "Logprobs are `rlctl logprobs`' numbers for the same text. Completions are generated\n"
            "one at a time, in order; a client has at most 4 waiting or running (429 beyond),\n"
            "16 connections, and 10 s to send a request's head. Runs until SIGINT/SIGTERM.\n"
            "docs/remote.md has examples and every limit.\n\n"
            "  --model DIR        Hugging Face model folder (config.json, weights,\n"
            "                     tokenizer.json)\n"
            "  --adapter DIR      PEFT LoRA adapter folder to apply\n"
            "  --http HOST:PORT   where to listen (default 127.0.0.1:8000; port 0: any, printed\n"
            "                     as \"http on http://HOST:PORT/v1\"); HOST must be a loopback\n"
            "                     address unless --http-token is given\n"
            "  --http-token FILE  a file holding the bearer token every request must carry\n"
            "                     (Authorization: Bearer ...); ours, mode 0600\n"
            "  --http-max-work N  the most tokens one request may ask for: n x the sum over\n"
            "                     its prompts of prompt tokens + max_tokens (default 65536;\n"
            "                     more: 400)\n"
            "  --threads N        compute threads (default 0 = every core)\n"
            "  --name NAME        the model id /v1/models lists (default: the folder's name)\n"
            "  --chat-template T  chat completions' template: a built-in (chatml, llama3)\n"
            "                     instead of the model's own (tokenizer_config.json's)\n"
            "  --tool-parser P    how tool calls are read from the text: hermes (default;\n"
            "                     Qwen's <tool_call> blocks) or llama3_json\n"
            "  --device D         cpu (the default), cuda or cuda:N: the model on that GPU\n"
            "                     (as `rlctl generate --device`); with no usable GPU, exit 2\n"
            "                     saying what was found\n");
}

typedef struct {
    pthread_mutex_t mu;
    rl_model_t *model;
    rl_tokenizer_t *tok;
} s_backend_t;

static int s_acquire(void *ctx, rl_model_t **model, rl_tokenizer_t **tok, char *why,
                     size_t why_len) {
    (void)why;
    (void)why_len;
    s_backend_t *b = ctx;
    pthread_mutex_lock(&b->mu);
    *model = b->model;
    *tok = b->tok;
    return 0;
}

static void s_release(void *ctx) {
    s_backend_t *b = ctx;
    pthread_mutex_unlock(&b->mu);
}

int rl_cmd_serve(int argc, char **argv) {
    if (rl_cli_wants_help(argc, argv)) {
        s_help(stdout);
        return RL_EXIT_OK;
    }
    const char *model = NULL, *adapter = NULL, *http = "127.0.0.1:8000", *token = NULL,
               *name = NULL, *chat_template = NULL, *tool_parser = NULL, *device = NULL;
    int threads = 0, max_work = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v) {
            fprintf(stderr, "rlctl serve: %s needs a value\n", a);
            return RL_EXIT_USAGE;
        }
        int bad = 0;
        if (!strcmp(a, "--model")) {
            model = v;
        } else if (!strcmp(a, "--adapter")) {
            adapter = v;
        } else if (!strcmp(a, "--http")) {
            http = v;
        } else if (!strcmp(a, "--http-token")) {
            token = v;
        } else if (!strcmp(a, "--name")) {
            name = v;
        } else if (!strcmp(a, "--chat-template")) {
            chat_template = v;
        } else if (!strcmp(a, "--tool-parser")) {
            tool_parser = v;
        } else if (!strcmp(a, "--device")) {
            device = v;
        } else if (!strcmp(a, "--threads")) {
            bad = rl_cli_int("serve", a, v, 0, 4096, &threads);
        } else if (!strcmp(a, "--http-max-work")) {
            bad = rl_cli_int("serve", a, v, 1, 1 << 30, &max_work);
        } else {
            fprintf(stderr, "rlctl serve: unknown option '%s' (--help)\n", a);
            return RL_EXIT_USAGE;
        }
        if (bad) {
            return bad;
        }
        i++;
    }
    if (!model) {
        s_help(stderr);
        return RL_EXIT_USAGE;
    }
    rl_device_t dev;
    int drc = rl_cli_device("serve", device, NULL, &dev);
    if (drc) {
        return drc;
    }
    // SIGINT/SIGTERM are waited for below: blocked before the HTTP thread starts
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    s_backend_t b;
    memset(&b, 0, sizeof b);
    pthread_mutex_init(&b.mu, NULL);
    int rc = rl_cli_load_model_on("serve", model, adapter, threads, &dev, 0, &b.model, &b.tok);
    if (rc) {
        return rc;
    }
    char nm[256];
    if (!name) {
        const char *base = strrchr(model, '/');
        snprintf(nm, sizeof nm, "%s", base && base[1] ? base + 1 : model);
        name = nm;
    }
    // the model's own chat template, found as every command finds it (chat completions)
    rl_chat_source_t src;
    char serr[1024];
    if (rl_chat_model_source(model, NULL, &src, serr, sizeof serr) != 0) {
        fprintf(stderr, "rlctl serve: %s\n", serr);
        rl_chat_source_free(&src);
        rl_model_destroy(&b.model);
        rl_tokenizer_destroy(&b.tok);
        return RL_EXIT_USAGE;
    }
    rl_http_backend_t be = {&b, s_acquire, s_release, name, src.text};
    rl_http_opts_t ho = {http, token, max_work, chat_template, tool_parser};
    rl_http_t *h = NULL;
    char err[1024];
    if (rl_http_start(&ho, &be, &h, err, sizeof err) != 0) {
        fprintf(stderr, "rlctl serve: %s\n", err);
        rl_chat_source_free(&src);
        rl_model_destroy(&b.model);
        rl_tokenizer_destroy(&b.tok);
        return RL_EXIT_USAGE;
    }
    printf("http on http://%.*s:%d/v1 (model %s)\n", (int)(strrchr(http, ':') - http), http,
           rl_http_port(h), name);
    fflush(stdout);
    int sig = 0;
    sigwait(&set, &sig);
    rl_http_stop(&h);
    rl_chat_source_free(&src);
    rl_model_destroy(&b.model);
    rl_tokenizer_destroy(&b.tok);
    pthread_mutex_destroy(&b.mu);
    return RL_EXIT_OK;
}
