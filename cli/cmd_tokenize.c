// cmd_tokenize — `rlctl tokenize` (text -> ids) and `rlctl detokenize` (ids -> text) with a
// Hugging Face tokenizer.json (text/rl_tokenizer). Not a chat renderer: text goes in as is.
#include "rl_cli.h"

#include "rl_err.h"
#include "rl_tokenizer.h"

#include <errno.h>
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// ------------------------------------------------------------------------------------------
// shared: options, loading, reading input

typedef struct {
    const char *model, *tokenizer, *text, *file, *ids, *json_ids;
    int json, add_special, skip_special;
} s_opts_t;

static const char s_tokenize_help[] =
    "usage: rlctl tokenize (--model DIR | --tokenizer FILE) (--text T | --file F) [--json]\n"
    "                      [--add-special-tokens]\n\n"
    "Prints the token ids of a text, space-separated on one line.\n\n"
    "  --model DIR            a Hugging Face model folder (DIR/tokenizer.json)\n"
    "  --tokenizer FILE       a tokenizer.json file\n"
    "  --text T               the text to encode\n"
    "  --file F               encode the whole content of F ('-' reads stdin)\n"
    "  --json                 print {\"ids\": [...]} instead\n"
    "  --add-special-tokens   apply the post-processor (e.g. a BOS token); off by default,\n"
    "                         like encode(text, add_special_tokens=False)\n"
    "  -h, --help             this help\n";

static const char s_detokenize_help[] =
    "usage: rlctl detokenize (--model DIR | --tokenizer FILE) [--ids \"1 2 3\" |\n"
    "                        --json '{\"ids\": [...]}'] [--skip-special-tokens]\n\n"
    "Prints the text of token ids exactly (no newline is added). With neither --ids nor --json\n"
    "the ids are read from stdin, as whitespace-separated numbers or as JSON.\n"
    "Bytes that do not form valid UTF-8 print as U+FFFD.\n\n"
    "  --model DIR             a Hugging Face model folder (DIR/tokenizer.json)\n"
    "  --tokenizer FILE        a tokenizer.json file\n"
    "  --ids \"1 2 3\"           the ids, separated by spaces or commas\n"
    "  --json JSON             {\"ids\": [...]} or a bare [...] list\n"
    "  --skip-special-tokens   drop special added tokens (<|im_end|>, ...)\n"
    "  -h, --help              this help\n";

static int s_parse(int argc, char **argv, int detok, s_opts_t *o) {
    memset(o, 0, sizeof(*o));
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char **slot = NULL;
        if (strcmp(a, "--model") == 0) {
            slot = &o->model;
        } else if (strcmp(a, "--tokenizer") == 0) {
            slot = &o->tokenizer;
        } else if (!detok && strcmp(a, "--text") == 0) {
            slot = &o->text;
        } else if (!detok && strcmp(a, "--file") == 0) {
            slot = &o->file;
        } else if (detok && strcmp(a, "--ids") == 0) {
            slot = &o->ids;
        } else if (detok && strcmp(a, "--json") == 0) {
            slot = &o->json_ids;
        } else if (!detok && strcmp(a, "--json") == 0) {
            o->json = 1;
            continue;
        } else if (!detok && strcmp(a, "--add-special-tokens") == 0) {
            o->add_special = 1;
            continue;
        } else if (detok && strcmp(a, "--skip-special-tokens") == 0) {
            o->skip_special = 1;
            continue;
        } else {
            fprintf(stderr, "rlctl %s: unknown option '%s' (see --help)\n", argv[0], a);
            return RL_EXIT_USAGE;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "rlctl %s: %s needs a value\n", argv[0], a);
            return RL_EXIT_USAGE;
        }
        *slot = argv[++i];
    }
    if (!o->model == !o->tokenizer) {
        fprintf(stderr, "rlctl %s: give exactly one of --model DIR or --tokenizer FILE\n",
                argv[0]);
        return RL_EXIT_USAGE;
    }
    if (!detok && !o->text == !o->file) {
        fprintf(stderr, "rlctl %s: give exactly one of --text T or --file F\n", argv[0]);
        return RL_EXIT_USAGE;
    }
    if (detok && o->ids && o->json_ids) {
        fprintf(stderr, "rlctl %s: give at most one of --ids or --json\n", argv[0]);
        return RL_EXIT_USAGE;
    }
    return RL_EXIT_OK;
}

static rl_tokenizer_t *s_load(const char *cmd, const s_opts_t *o) {
    char err[1024];
    rl_tokenizer_t *tok = o->model ? rl_tokenizer_new_dir(o->model, err, sizeof(err))
                                   : rl_tokenizer_new(o->tokenizer, err, sizeof(err));
    if (!tok) {
        fprintf(stderr, "rlctl %s: %s\n", cmd, err);
    }
    return tok;
}

// Reads all of f into a malloc'd buffer; returns NULL on failure.
static char *s_slurp(FILE *f, size_t *len_p) {
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    while (buf) {
        n += fread(buf + n, 1, cap - n - 1, f);
        if (ferror(f)) {
            free(buf);
            return NULL;
        }
        if (feof(f)) {
            break;
        }
        if (cap - n - 1 == 0) {
            char *nb = realloc(buf, cap * 2);
            if (!nb) {
                free(buf);
                return NULL;
            }
            buf = nb;
            cap *= 2;
        }
    }
    if (buf) {
        buf[n] = '\0';
        *len_p = n;
    }
    return buf;
}

// Exit code for a library error: the user's input (2) unless the machine failed (1).
static int s_exit_for(int rc) {
    return rc == RL_ENOMEM || rc == RL_EIO ? RL_EXIT_FAIL : RL_EXIT_USAGE;
}

// ------------------------------------------------------------------------------------------
// tokenize

int rl_cmd_tokenize(int argc, char **argv) {
    if (rl_cli_wants_help(argc, argv)) {
        fputs(s_tokenize_help, stdout);
        return RL_EXIT_OK;
    }
    s_opts_t o;
    int rc = s_parse(argc, argv, 0, &o);
    if (rc) {
        return rc;
    }
    char *buf = NULL;
    size_t len = 0;
    if (o.file) {
        FILE *f = strcmp(o.file, "-") == 0 ? stdin : fopen(o.file, "rb");
        if (!f) {
            fprintf(stderr, "rlctl tokenize: %s: %s\n", o.file, strerror(errno));
            return RL_EXIT_USAGE;
        }
        buf = s_slurp(f, &len);
        if (f != stdin) {
            fclose(f);
        }
        if (!buf) {
            fprintf(stderr, "rlctl tokenize: %s: read failed\n", o.file);
            return RL_EXIT_FAIL;
        }
    }
    rl_tokenizer_t *tok = s_load("tokenize", &o);
    if (!tok) {
        free(buf);
        return RL_EXIT_USAGE;
    }
    int32_t *ids = NULL;
    size_t n = 0;
    int r = rl_tokenizer_encode(tok, buf ? buf : o.text, buf ? len : strlen(o.text),
                                o.add_special ? RL_TOKENIZER_ADD_SPECIAL : 0, &ids, &n);
    if (r) {
        fprintf(stderr, "rlctl tokenize: %s\n", rl_tokenizer_errmsg(tok));
        rc = s_exit_for(r);
    } else {
        fputs(o.json ? "{\"ids\": [" : "", stdout);
        for (size_t i = 0; i < n; i++) {
            printf("%s%d", i ? (o.json ? ", " : " ") : "", (int)ids[i]);
        }
        fputs(o.json ? "]}\n" : "\n", stdout);
    }
    free(ids);
    free(buf);
    rl_tokenizer_destroy(&tok);
    return rc;
}

// ------------------------------------------------------------------------------------------
// detokenize

// Parses "1 2 3" / "1,2,3" or JSON ({"ids": [...]} or [...]) into *ids_p.
static int s_parse_ids(const char *s, int32_t **ids_p, size_t *n_p) {
    const char *p = s;
    while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r') {
        p++;
    }
    size_t n = 0, cap = 64;
    int32_t *ids = malloc(cap * sizeof(int32_t));
    if (!ids) {
        return RL_ENOMEM;
    }
    if (*p == '{' || *p == '[') {
        json_error_t jerr;
        json_t *root = json_loads(p, 0, &jerr), *arr = root;
        if (json_is_object(root)) {
            arr = json_object_get(root, "ids");
        }
        if (!json_is_array(arr)) {
            fprintf(stderr, "rlctl detokenize: expected {\"ids\": [...]} or [...]%s%s\n",
                    root ? "" : ": ", root ? "" : jerr.text);
            json_decref(root);
            free(ids);
            return RL_EINVAL;
        }
        size_t i;
        json_t *v;
        json_array_foreach(arr, i, v) {
            json_int_t x = json_integer_value(v);
            if (!json_is_integer(v) || x < 0 || x > INT32_MAX) {
                fprintf(stderr, "rlctl detokenize: ids[%zu] is not a token id\n", i);
                json_decref(root);
                free(ids);
                return RL_EINVAL;
            }
            if (n == cap) {
                int32_t *q = realloc(ids, (cap *= 2) * sizeof(int32_t));
                if (!q) {
                    json_decref(root);
                    free(ids);
                    return RL_ENOMEM;
                }
                ids = q;
            }
            ids[n++] = (int32_t)x;
        }
        json_decref(root);
    } else {
        while (*p) {
            if (*p == ' ' || *p == ',' || *p == '\t' || *p == '\n' || *p == '\r') {
                p++;
                continue;
            }
            char *end;
            errno = 0;
            long long x = strtoll(p, &end, 10);
            if (end == p || errno || x < 0 || x > INT32_MAX ||
                (*end && !strchr(" ,\t\r\n", *end))) {
                fprintf(stderr, "rlctl detokenize: '%.20s' is not a token id\n", p);
                free(ids);
                return RL_EINVAL;
            }
            if (n == cap) {
                int32_t *q = realloc(ids, (cap *= 2) * sizeof(int32_t));
                if (!q) {
                    free(ids);
                    return RL_ENOMEM;
                }
                ids = q;
            }
            ids[n++] = (int32_t)x;
            p = end;
        }
    }
    *ids_p = ids;
    *n_p = n;
    return 0;
}

int rl_cmd_detokenize(int argc, char **argv) {
    if (rl_cli_wants_help(argc, argv)) {
        fputs(s_detokenize_help, stdout);
        return RL_EXIT_OK;
    }
    s_opts_t o;
    int rc = s_parse(argc, argv, 1, &o);
    if (rc) {
        return rc;
    }
    char *input = NULL;
    if (!o.ids && !o.json_ids) {
        size_t len;
        input = s_slurp(stdin, &len);
        if (!input) {
            fprintf(stderr, "rlctl detokenize: cannot read stdin\n");
            return RL_EXIT_FAIL;
        }
    }
    int32_t *ids = NULL;
    size_t n = 0;
    int r = s_parse_ids(input ? input : o.ids ? o.ids : o.json_ids, &ids, &n);
    free(input);
    if (r) {
        return s_exit_for(r);
    }
    rl_tokenizer_t *tok = s_load("detokenize", &o);
    if (!tok) {
        free(ids);
        return RL_EXIT_USAGE;
    }
    char *text = NULL;
    size_t len = 0;
    r = rl_tokenizer_decode(tok, ids, n, o.skip_special ? RL_TOKENIZER_SKIP_SPECIAL : 0, &text,
                            &len);
    if (r) {
        fprintf(stderr, "rlctl detokenize: %s\n", rl_tokenizer_errmsg(tok));
        rc = s_exit_for(r);
    } else if (fwrite(text, 1, len, stdout) != len || fflush(stdout) != 0) {
        rc = RL_EXIT_FAIL;
    }
    free(text);
    free(ids);
    rl_tokenizer_destroy(&tok);
    return rc;
}
