// rlctl template — renders a conversation with a model's chat template exactly as transformers'
// apply_chat_template would (text/rl_chat over the Jinja engine), printing the text as it is (no
// newline added), so anyone can compare the two byte for byte.
#include "rl_chat.h"
#include "rl_cli.h"
#include "rl_err.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void s_usage(FILE *out) {
    fprintf(out,
            "usage: rlctl template (--model DIR | --tokenizer-config FILE | --template NAME)\n"
            "                      --messages FILE.json [--add-generation-prompt]\n"
            "                      [--kwargs JSON]\n\n"
            "Render a conversation with a model's chat template as transformers'\n"
            "apply_chat_template does and print the text exactly (no newline added). The\n"
            "template is tokenizer_config.json's chat_template (DIR/tokenizer_config.json, or\n"
            "FILE), else DIR/chat_template.jinja; it sees bos_token and eos_token from the same\n"
            "tokenizer_config.json (a recipe's model.chat_template: auto finds it the same\n"
            "way). --template chatml|llama3 renders a built-in instead, as that recipe key\n"
            "does. FILE.json holds a list of messages, or an object\n"
            "{\"messages\": [...], \"tools\": [...]} as apply_chat_template takes them.\n\n"
            "options:\n"
            "  --model DIR                a Hugging Face model (or tokenizer) folder\n"
            "  --tokenizer-config FILE    a tokenizer_config.json\n"
            "  --template NAME            a built-in template: chatml or llama3\n"
            "  --messages FILE.json       the conversation (- reads standard input)\n"
            "  --add-generation-prompt    end with the assistant's header\n"
            "  --kwargs JSON              the template's keyword arguments, e.g.\n"
            "                             '{\"enable_thinking\": false}'\n"
            "  -h, --help                 this help\n");
}

// The whole of a file (or stdin for "-"), NUL-terminated; NULL with err filled.
static char *s_slurp(const char *path, size_t *len_p, char *err, size_t err_len) {
    FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "rb");
    if (!f) {
        rl_errf(err, err_len, RL_EIO, "%s: cannot open", path);
        return NULL;
    }
    size_t n = 0, cap = 1 << 16;
    char *buf = malloc(cap + 1);
    size_t got;
    while (buf && (got = fread(buf + n, 1, cap - n, f)) > 0) {
        n += got;
        if (n == cap) {
            char *b = cap < ((size_t)256 << 20) ? realloc(buf, 2 * cap + 1) : NULL;
            if (!b) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = b;
            cap *= 2;
        }
    }
    if (f != stdin) {
        fclose(f);
    }
    if (!buf) {
        rl_errf(err, err_len, RL_ENOMEM, "%s: too large or out of memory", path);
        return NULL;
    }
    buf[n] = '\0';
    *len_p = n;
    return buf;
}

int rl_cmd_template(int argc, char **argv) {
    if (rl_cli_wants_help(argc, argv)) {
        s_usage(stdout);
        return RL_EXIT_OK;
    }
    const char *model = NULL, *config = NULL, *messages = NULL, *kwargs = NULL, *builtin = NULL;
    int gen = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], **slot = NULL;
        if (strcmp(a, "--add-generation-prompt") == 0) {
            gen = 1;
            continue;
        }
        slot = !strcmp(a, "--model")              ? &model
               : !strcmp(a, "--tokenizer-config") ? &config
               : !strcmp(a, "--template")         ? &builtin
               : !strcmp(a, "--messages")         ? &messages
               : !strcmp(a, "--kwargs")           ? &kwargs
                                                  : NULL;
        if (!slot || i + 1 >= argc) {
            fprintf(stderr, "rlctl template: %s '%s' (rlctl template --help)\n",
                    slot ? "missing value for" : "unexpected argument", a);
            return RL_EXIT_USAGE;
        }
        *slot = argv[++i];
    }
    if ((!!model + !!config + !!builtin) != 1 || !messages) {
        fprintf(stderr, "rlctl template: one of --model, --tokenizer-config and --template, and "
                        "--messages, are required (rlctl template --help)\n");
        return RL_EXIT_USAGE;
    }
    char err[4608] = "";
    rl_chat_format_t fmt = RL_CHAT_NONE;
    int rc;
    if (builtin) { // as model.chat_template: chatml|llama3
        rc = rl_chat_builtin_text(builtin)
                 ? rl_chat_template(rl_chat_builtin_text(builtin), builtin, NULL, NULL, kwargs,
                                    &fmt, err, sizeof err)
                 : rl_errf(err, sizeof err, RL_EINVAL,
                           "--template '%s': not a built-in (chatml, llama3)", builtin);
    } else { // as model.chat_template: auto
        rc = rl_chat_model_format(model, config, kwargs, &fmt, err, sizeof err);
    }
    if (rc) {
        fprintf(stderr, "rlctl template: %s%s\n", err,
                builtin ? "" : " (--template chatml|llama3 renders a built-in)");
        return rc == RL_ENOMEM ? RL_EXIT_FAIL : RL_EXIT_USAGE;
    }
    size_t mlen = 0;
    char *msgs = s_slurp(messages, &mlen, err, sizeof err);
    if (!msgs) {
        fprintf(stderr, "rlctl template: %s\n", err);
        return RL_EXIT_USAGE;
    }
    char *out = NULL;
    size_t olen = 0;
    rc = rl_chat_render_json(fmt, msgs, mlen, gen, &out, &olen, err, sizeof err);
    free(msgs);
    if (rc) {
        fprintf(stderr, "rlctl template: %s\n", err);
        return rc == RL_ENOMEM ? RL_EXIT_FAIL : RL_EXIT_USAGE;
    }
    int bad = fwrite(out, 1, olen, stdout) != olen || fflush(stdout) != 0;
    free(out);
    return bad ? RL_EXIT_FAIL : RL_EXIT_OK;
}
