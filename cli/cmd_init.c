// rlctl init — writes a randomly initialised Hugging Face model folder from a config.json and a
// tokenizer.json: config.json (normalised by rl_hf), tokenizer.json (copied, with the files beside
// it that carry its special tokens and chat template: tokenizer_config.json,
// special_tokens_map.json, chat_template*), generation_config.json (bos and eos ids) and
// model.safetensors. The init scheme is transformers'
// _init_weights: every Linear weight and the embedding ~ Normal(0, initializer_range), biases 0,
// RMSNorm weights 1. Draws come from one rl_rng stream seeded by --seed and consumed tensor by
// tensor in rl_hf_tensor_specs order, so a seed gives the same bytes on every machine. This command
// does not train or evaluate anything.
#include "rl_cli.h"
#include "rl_err.h"
#include "rl_hf.h"
#include "rl_rng.h"
#include "rl_safetensors.h"

#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

static void s_usage(FILE *out) {
    fprintf(out,
            "usage: rlctl init --config FILE --tokenizer FILE --out DIR [--seed S]\n"
            "                  [--dtype fp32|bf16] [--force]\n\n"
            "Write a randomly initialised Hugging Face model folder: DIR/config.json (the\n"
            "config, checked and normalised), DIR/tokenizer.json (copied, with the\n"
            "tokenizer_config.json, special_tokens_map.json and chat_template* files beside\n"
            "it, so the model's chat template comes along), DIR/generation_config.json\n"
            "(bos/eos ids) and DIR/model.safetensors.\n\n"
            "Init (as transformers does): Linear weights and the embedding ~ Normal(0, std) with\n"
            "std = the config's initializer_range (default 0.02); biases 0; RMSNorm weights 1.\n"
            "The same seed gives the same file on every machine.\n\n"
            "options:\n"
            "  --config FILE     config.json (llama, qwen2 or qwen3)\n"
            "  --tokenizer FILE  tokenizer.json; its ids must fit the config's vocab_size\n"
            "  --out DIR         output folder; created if absent, refused if not empty\n"
            "  --seed S          RNG seed, an unsigned integer (default 0)\n"
            "  --dtype D         fp32 (default) or bf16\n"
            "  --force           write into a non-empty DIR (files of the same name are replaced)\n"
            "  -h, --help        this help\n");
}

// ---------------------------------------------------------------------------------------------
// files

static int s_read_all(const char *path, char **out, size_t *len, char *err, size_t err_len) {
    FILE *f = fopen(path, "rb");
    *out = NULL;
    if (!f) {
        return rl_errf(err, err_len, errno, "%s: %s", path, strerror(errno));
    }
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    while (buf) {
        if (n == cap) {
            char *nb = realloc(buf, cap * 2);
            if (!nb) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = nb;
            cap *= 2;
        }
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (got == 0) {
            break;
        }
    }
    int bad = ferror(f);
    fclose(f);
    if (!buf) {
        return rl_errf(err, err_len, RL_ENOMEM, "%s: out of memory", path);
    }
    if (bad) {
        free(buf);
        return rl_errf(err, err_len, RL_EIO, "%s: read error", path);
    }
    *out = buf;
    *len = n;
    return 0;
}

// The files beside the tokenizer that say how it is used (tokenizer_config.json: special tokens
// and the chat template; special_tokens_map.json; chat_template.jinja and the other
// chat_template* files): read whole, so that DIR renders conversations as the source folder does.
enum { S_MAX_EXTRA = 16 };
typedef struct {
    char name[256];
    char *data;
    size_t len;
} s_extra_t;

static int s_read_extras(const char *tokenizer, s_extra_t *x, int *n_p, char *err, size_t err_len) {
    char dir[4096];
    const char *slash = strrchr(tokenizer, '/');
    snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash - tokenizer) : 1,
             slash ? tokenizer : ".");
    *n_p = 0;
    DIR *d = opendir(dir);
    if (!d) {
        return 0; // the tokenizer alone
    }
    int rc = 0;
    for (struct dirent *e; rc == 0 && (e = readdir(d)) != NULL;) {
        const char *nm = e->d_name;
        int want = !strcmp(nm, "tokenizer_config.json") || !strcmp(nm, "special_tokens_map.json") ||
                   !strncmp(nm, "chat_template", 13);
        char path[4400];
        snprintf(path, sizeof path, "%s/%s", dir, nm);
        struct stat st;
        if (!want || stat(path, &st) != 0 || !S_ISREG(st.st_mode) || strlen(nm) >= 200) {
            continue;
        }
        if (*n_p == S_MAX_EXTRA) {
            rc = rl_errf(err, err_len, RL_EINVAL, "%s: more than %d chat template files", dir,
                         S_MAX_EXTRA);
            break;
        }
        s_extra_t *x1 = &x[*n_p];
        snprintf(x1->name, sizeof x1->name, "%s", nm);
        rc = s_read_all(path, &x1->data, &x1->len, err, err_len);
        *n_p += rc == 0;
    }
    closedir(d);
    return rc;
}

// Writes data (and a final newline when `newline`, for the JSON we generate).
static int s_write_all(const char *path, const char *data, size_t len, int newline, char *err,
                       size_t err_len) {
    FILE *f = fopen(path, "wb");
    if (!f) {
        return rl_errf(err, err_len, errno, "%s: %s", path, strerror(errno));
    }
    size_t put = fwrite(data, 1, len, f);
    int bad = put != len || (newline && fputc('\n', f) == EOF);
    bad |= fclose(f) != 0;
    if (bad) {
        return rl_errf(err, err_len, RL_EIO, "%s: write failed", path);
    }
    return 0;
}

// mkdir -p; made (cap 4096) gets the first (outermost) folder it created, or "" when every
// folder was there, so that a failed init can remove what it made.
static int s_mkdirs(const char *dir, char *made, char *err, size_t err_len) {
    char buf[4096];
    made[0] = '\0';
    if (snprintf(buf, sizeof buf, "%s", dir) >= (int)sizeof buf) {
        return rl_errf(err, err_len, RL_EINVAL, "%s: path too long", dir);
    }
    for (char *p = buf + 1;; p++) {
        if (*p == '/' || *p == '\0') {
            char c = *p;
            *p = '\0';
            if (mkdir(buf, 0755) == 0) {
                if (!made[0]) {
                    snprintf(made, 4096, "%s", buf);
                }
            } else if (errno != EEXIST) {
                return rl_errf(err, err_len, errno, "%s: %s", buf, strerror(errno));
            }
            *p = c;
            if (c == '\0') {
                break;
            }
        }
    }
    struct stat st;
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
        return rl_errf(err, err_len, RL_EINVAL, "%s: not a directory", dir);
    }
    return 0;
}

// Removes the folders s_mkdirs made for dir: dir and its parents up to and including made
// (nothing when made is ""). Only empty folders go (rmdir).
static void s_unmake(const char *dir, const char *made) {
    if (!made[0]) {
        return;
    }
    char buf[4096];
    snprintf(buf, sizeof buf, "%s", dir);
    size_t n = strlen(made);
    for (;;) {
        rmdir(buf);
        char *slash = strrchr(buf, '/');
        if (strlen(buf) <= n || !slash || slash == buf) {
            break;
        }
        *slash = '\0';
    }
}

// 1 when `dir` exists and holds anything besides . and ..; 0 when empty or absent.
static int s_dir_nonempty(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) {
        return errno == ENOTDIR; // a file of that name counts as "in the way"
    }
    int found = 0;
    struct dirent *e;
    while (!found && (e = readdir(d)) != NULL) {
        found = strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
    }
    closedir(d);
    return found;
}

// The largest token id a tokenizer.json defines (model.vocab values and added_tokens ids), so
// that a config whose vocab_size is too small is caught now rather than at the first lookup.
static int s_tokenizer_max_id(const char *path, const char *text, size_t len, long long *max_id,
                              char *err, size_t err_len) {
    json_error_t je;
    json_t *root = json_loadb(text, len, 0, &je);
    if (!root) {
        return rl_errf(err, err_len, RL_EINVAL, "%s:%d:%d: %s", path, je.line, je.column, je.text);
    }
    int rc = 0;
    long long mx = -1;
    json_t *vocab = json_object_get(json_object_get(root, "model"), "vocab");
    if (!json_is_object(vocab)) {
        rc = rl_errf(err, err_len, RL_EINVAL, "%s: 'model.vocab' must be an object", path);
        goto fail;
    }
    const char *key;
    json_t *v;
    json_object_foreach(vocab, key, v) {
        if (!json_is_integer(v)) {
            rc = rl_errf(err, err_len, RL_EINVAL, "%s: vocab entry '%s' is not an integer", path,
                         key);
            goto fail;
        }
        mx = json_integer_value(v) > mx ? json_integer_value(v) : mx;
    }
    json_t *added = json_object_get(root, "added_tokens");
    size_t i;
    json_array_foreach(added, i, v) {
        json_t *id = json_object_get(v, "id");
        if (json_is_integer(id) && json_integer_value(id) > mx) {
            mx = json_integer_value(id);
        }
    }
    *max_id = mx;
fail:
    json_decref(root);
    return rc;
}

static char *s_generation_config_json(const rl_hf_config_t *cfg) {
    json_t *o = json_object();
    if (!o) {
        return NULL;
    }
    json_object_set_new(o, "_from_model_config", json_true());
    if (cfg->bos_token_id >= 0) {
        json_object_set_new(o, "bos_token_id", json_integer(cfg->bos_token_id));
    }
    if (cfg->n_eos == 1) {
        json_object_set_new(o, "eos_token_id", json_integer(cfg->eos_token_ids[0]));
    } else if (cfg->n_eos > 1) {
        json_t *a = json_array();
        for (int i = 0; a && i < cfg->n_eos; i++) {
            json_array_append_new(a, json_integer(cfg->eos_token_ids[i]));
        }
        json_object_set_new(o, "eos_token_id", a);
    }
    char *text = json_dumps(o, JSON_INDENT(2));
    json_decref(o);
    return text;
}

// ---------------------------------------------------------------------------------------------
// weights

static int s_ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

// Fills every tensor of `cfg` into one contiguous buffer (llm.c) and writes model.safetensors.
static int s_write_weights(const rl_hf_config_t *cfg, uint64_t seed, rl_dtype_t dtype,
                           const char *path, int64_t *n_params, int *n_tensors, char *err,
                           size_t err_len) {
    int n = rl_hf_tensor_specs(cfg, NULL, 0);
    rl_hf_tensor_spec_t *specs = calloc((size_t)n, sizeof *specs);
    int64_t total = rl_hf_param_count(cfg);
    float *params = malloc((size_t)total * sizeof *params);
    rl_st_writer_t *w = rl_st_writer_new();
    int rc = 0;
    if (!specs || !params || !w) {
        rc =
            rl_errf(err, err_len, RL_ENOMEM, "out of memory for %lld parameters", (long long)total);
        goto fail;
    }
    rl_hf_tensor_specs(cfg, specs, n);

    rl_rng_t rng;
    rl_rng_seed(&rng, seed);
    const float std = (float)cfg->initializer_range;
    float *p = params;
    for (int i = 0; i < n; i++) {
        const rl_hf_tensor_spec_t *t = &specs[i];
        int64_t numel = t->ndim == 1 ? t->shape[0] : t->shape[0] * t->shape[1];
        RL_ASSERT(p + numel <= params + total); // specs and param_count agree (tested)
        if (s_ends_with(t->name, ".bias")) {
            memset(p, 0, (size_t)numel * sizeof *p);
        } else if (s_ends_with(t->name, "norm.weight")) { // RMSNorm: layernorms, q/k norms
            for (int64_t k = 0; k < numel; k++) {
                p[k] = 1.0f;
            }
        } else { // Linear weights and the embedding
            rl_rng_fill_normal(&rng, p, (size_t)numel, 0.0f, std);
        }
        rc = rl_st_writer_add_f32(w, t->name, dtype, t->ndim, t->shape, p);
        if (rc) {
            rl_errf(err, err_len, rc, "adding tensor '%s': %s", t->name, rl_strerror(rc));
            goto fail;
        }
        p += numel;
    }
    char seed_s[32];
    snprintf(seed_s, sizeof seed_s, "%llu", (unsigned long long)seed);
    if ((rc = rl_st_writer_set_metadata(w, "rlctl_init_seed", seed_s)) != 0) {
        rl_errf(err, err_len, rc, "%s", rl_strerror(rc));
        goto fail;
    }
    rc = rl_st_writer_write(w, path, err, err_len);
    *n_params = total;
    *n_tensors = n;
fail:
    rl_st_writer_destroy(&w);
    free(params);
    free(specs);
    return rc;
}

// ---------------------------------------------------------------------------------------------

int rl_cmd_init(int argc, char **argv) {
    if (rl_cli_wants_help(argc, argv)) {
        s_usage(stdout);
        return RL_EXIT_OK;
    }
    const char *config = NULL, *tokenizer = NULL, *out = NULL, *dtype_s = "fp32";
    unsigned long long seed = 0;
    int force = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char **slot = NULL;
        if (strcmp(a, "--force") == 0) {
            force = 1;
            continue;
        }
        if (strcmp(a, "--config") == 0) {
            slot = &config;
        } else if (strcmp(a, "--tokenizer") == 0) {
            slot = &tokenizer;
        } else if (strcmp(a, "--out") == 0) {
            slot = &out;
        } else if (strcmp(a, "--dtype") == 0) {
            slot = &dtype_s;
        } else if (strcmp(a, "--seed") != 0) {
            fprintf(stderr, "rlctl init: unknown argument '%s' (rlctl init --help)\n", a);
            return RL_EXIT_USAGE;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "rlctl init: %s needs a value\n", a);
            return RL_EXIT_USAGE;
        }
        const char *v = argv[++i];
        if (slot) {
            *slot = v;
            continue;
        }
        char *end = NULL;
        errno = 0;
        seed = strtoull(v, &end, 10);
        if (v[0] == '-' || !*v || *end || errno) {
            fprintf(stderr, "rlctl init: --seed '%s' is not an unsigned integer\n", v);
            return RL_EXIT_USAGE;
        }
    }
    if (!config || !tokenizer || !out) {
        fprintf(stderr, "rlctl init: --config, --tokenizer and --out are required "
                        "(rlctl init --help)\n");
        return RL_EXIT_USAGE;
    }
    rl_dtype_t dtype;
    if (strcmp(dtype_s, "fp32") == 0) {
        dtype = RL_DTYPE_F32;
    } else if (strcmp(dtype_s, "bf16") == 0) {
        dtype = RL_DTYPE_BF16;
    } else {
        fprintf(stderr, "rlctl init: --dtype '%s' is not supported (fp32, bf16)\n", dtype_s);
        return RL_EXIT_USAGE;
    }

    char err[1024] = "";
    rl_hf_config_t cfg;
    int rc = rl_hf_config_load_file(config, &cfg, err, sizeof err);
    if (rc) {
        fprintf(stderr, "rlctl init: %s\n", err);
        return rc == RL_EINVAL || rc == RL_EUNSUPPORTED ? RL_EXIT_USAGE : RL_EXIT_FAIL;
    }
    char *tok = NULL;
    size_t tok_len = 0;
    long long max_id = -1;
    if ((rc = s_read_all(tokenizer, &tok, &tok_len, err, sizeof err)) != 0 ||
        (rc = s_tokenizer_max_id(tokenizer, tok, tok_len, &max_id, err, sizeof err)) != 0) {
        fprintf(stderr, "rlctl init: %s\n", err);
        free(tok);
        return RL_EXIT_USAGE;
    }
    if (max_id >= cfg.vocab_size) {
        fprintf(stderr,
                "rlctl init: %s defines token id %lld but %s has vocab_size %d (must exceed "
                "every id)\n",
                tokenizer, max_id, config, cfg.vocab_size);
        free(tok);
        return RL_EXIT_USAGE;
    }
    if (!force && s_dir_nonempty(out)) {
        fprintf(stderr, "rlctl init: %s exists and is not empty (use --force to write into it)\n",
                out);
        free(tok);
        return RL_EXIT_USAGE;
    }

    s_extra_t extra[S_MAX_EXTRA];
    int n_extra = 0;
    if ((rc = s_read_extras(tokenizer, extra, &n_extra, err, sizeof err)) != 0) {
        fprintf(stderr, "rlctl init: %s\n", err);
        for (int i = 0; i < n_extra; i++) {
            free(extra[i].data);
        }
        free(tok);
        return RL_EXIT_USAGE;
    }

    // the folder's config says what the file holds
    snprintf(cfg.torch_dtype, sizeof cfg.torch_dtype, "%s",
             dtype == RL_DTYPE_F32 ? "float32" : "bfloat16");
    char *cfg_json = rl_hf_config_to_json(&cfg);
    char *gen_json = s_generation_config_json(&cfg);
    int64_t n_params = 0;
    int n_tensors = 0;
    // Every file is written under a temporary name and renamed into place once all are written,
    // so a failure (out of memory for the weights, a full disk) leaves no partial folder: the
    // temporary files are removed, and so are the folders this run made (--force into a folder
    // keeps its old files).
    const char *names[4 + S_MAX_EXTRA] = {"config.json", "generation_config.json", "tokenizer.json",
                                          "model.safetensors"};
    const int N_FILES = 4 + n_extra;
    for (int i = 0; i < n_extra; i++) {
        names[4 + i] = extra[i].name;
    }
    char tmp[4 + S_MAX_EXTRA][4200], made[4096] = "";
    int written = 0;
    rc = cfg_json && gen_json ? 0 : rl_errf(err, sizeof err, RL_ENOMEM, "out of memory");
    if (rc == 0) {
        rc = s_mkdirs(out, made, err, sizeof err);
    }
    for (int i = 0; rc == 0 && i < N_FILES; i++) {
        snprintf(tmp[i], sizeof tmp[i], "%s/.%s.init-%ld", out, names[i], (long)getpid());
        if (i == 0) {
            rc = s_write_all(tmp[i], cfg_json, strlen(cfg_json), 1, err, sizeof err);
        } else if (i == 1) {
            rc = s_write_all(tmp[i], gen_json, strlen(gen_json), 1, err, sizeof err);
        } else if (i == 2) {
            rc = s_write_all(tmp[i], tok, tok_len, 0, err, sizeof err);
        } else if (i > 3) {
            rc = s_write_all(tmp[i], extra[i - 4].data, extra[i - 4].len, 0, err, sizeof err);
        } else {
            rc = s_write_weights(&cfg, (uint64_t)seed, dtype, tmp[i], &n_params, &n_tensors, err,
                                 sizeof err);
        }
        written = i + 1; // a failed write may have left part of its file
    }
    for (int i = 0; rc == 0 && i < N_FILES; i++) {
        char path[4200];
        snprintf(path, sizeof path, "%s/%s", out, names[i]);
        if (rename(tmp[i], path) != 0) {
            rc = rl_errf(err, sizeof err, errno, "%s: %s", path, strerror(errno));
        }
    }
    free(cfg_json);
    free(gen_json);
    free(tok);
    for (int i = 0; i < n_extra; i++) {
        free(extra[i].data);
    }
    if (rc) {
        for (int i = 0; i < written; i++) {
            unlink(tmp[i]);
        }
        s_unmake(out, made);
        fprintf(stderr, "rlctl init: %s (nothing written to %s)\n", err, out);
        return RL_EXIT_FAIL;
    }
    printf("wrote %s: %s, %lld parameters in %d tensors, %s, seed %llu, init std %g\n", out,
           rl_hf_arch_name(cfg.arch), (long long)n_params, n_tensors, dtype_s, seed,
           cfg.initializer_range);
    return RL_EXIT_OK;
}
