// rl_reward_model — see rl_reward_model.h.
#include "rl_reward_model.h"

#include "rl_head.h"
#include "rl_model.h"
#include "rl_safetensors.h"
#include "rl_tokenizer.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const rl_reward_host_t *host;
    rl_model_t *model;
    rl_tokenizer_t *tok;
    float *w; // (C) the score head
    int C, max_len, batch;
    // a batch's scratch
    int32_t *tok_buf;
    int *len;
    float *score;
    size_t cap;
} s_rm_t;

static void s_destroy(void *state) {
    s_rm_t *s = state;
    if (!s) {
        return;
    }
    rl_model_destroy(&s->model);
    rl_tokenizer_destroy(&s->tok);
    free(s->w);
    free(s->tok_buf);
    free(s->len);
    free(s->score);
    free(s);
}

// An integer config value of `cfg` (absent or null: def) in [lo, hi]; -1 with err filled.
static int s_int(const json_t *cfg, const char *key, int def, int lo, int hi, int *out, char *err,
                 size_t err_len) {
    json_t *v = json_object_get(cfg, key);
    if (!v || json_is_null(v)) {
        *out = def;
        return 0;
    }
    if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > hi) {
        snprintf(err, err_len, "config '%s': expected an integer in [%d, %d]", key, lo, hi);
        return -1;
    }
    *out = (int)json_integer_value(v);
    return 0;
}

static int s_create(const rl_reward_host_t *host, const char *config_json, void **state, char *err,
                    size_t err_len) {
    json_error_t je;
    json_t *cfg = json_loads(config_json ? config_json : "{}", 0, &je);
    const char *key;
    json_t *val;
    if (!json_is_object(cfg)) {
        snprintf(err, err_len, "config: not a JSON object");
        json_decref(cfg);
        return -1;
    }
    json_object_foreach(cfg, key, val) {
        if (strcmp(key, "path") && strcmp(key, "threads") && strcmp(key, "batch_size")) {
            snprintf(err, err_len, "config: unknown key '%s' (batch_size)", key);
            json_decref(cfg);
            return -1;
        }
    }
    const char *path = json_string_value(json_object_get(cfg, "path"));
    s_rm_t *s = calloc(1, sizeof *s);
    int threads = 1, rc = 0;
    if (!s) {
        snprintf(err, err_len, "out of memory");
        rc = -1;
    } else if (!path) {
        snprintf(err, err_len, "config: no 'path' (the reward model's folder)");
        rc = -1;
    } else if (s_int(cfg, "threads", 1, 0, 4096, &threads, err, err_len) ||
               s_int(cfg, "batch_size", 16, 1, 4096, &s->batch, err, err_len)) {
        rc = -1;
    }
    char msg[2048];
    if (!rc) {
        rl_model_opts_t mo;
        rl_model_opts_default(&mo);
        mo.threads = threads;
        mo.seq_cls = 1;
        s->model = rl_model_load(path, &mo, msg, sizeof msg);
        if (!s->model) {
            snprintf(err, err_len, "%s", msg);
            rc = -1;
        }
    }
    if (!rc) {
        s->tok = rl_tokenizer_new_dir(path, msg, sizeof msg);
        if (!s->tok) {
            snprintf(err, err_len, "%s", msg);
            rc = -1;
        }
    }
    if (!rc) { // the head: score.weight [1, C]
        s->C = rl_model_config(s->model)->hidden_size;
        s->max_len = rl_model_config(s->model)->max_position_embeddings;
        rl_st_model_t *st = rl_st_model_open(path, msg, sizeof msg);
        const rl_st_tensor_t *t = st ? rl_st_model_find(st, "score.weight") : NULL;
        s->w = malloc((size_t)s->C * sizeof(float));
        if (!t || t->ndim != 2 || t->shape[0] != 1 || t->shape[1] != s->C) {
            snprintf(err, err_len,
                     "%s has no score.weight [1, %d]: not a reward model (an HF sequence "
                     "classifier with one label, e.g. the final/ of an rm run)",
                     path, s->C);
            rc = -1;
        } else if (!s->w) {
            snprintf(err, err_len, "out of memory");
            rc = -1;
        } else if (rl_st_check_finite(t, path, msg, sizeof msg) != 0) {
            snprintf(err, err_len, "%s", msg);
            rc = -1;
        } else {
            rl_st_to_f32(s->w, t);
        }
        rl_st_model_destroy(&st);
    }
    if (rc) {
        json_decref(cfg);
        s_destroy(s);
        return rc;
    }
    s->host = host;
    host->log(host->ctx, RL_REWARD_LOG_INFO, "reward model %s: %d layers, hidden %d", path,
              rl_model_config(s->model)->num_hidden_layers, s->C);
    json_decref(cfg); // path points into it
    *state = s;
    return 0;
}

// Grows the batch scratch to B rows of T tokens.
static int s_reserve(s_rm_t *s, int B, int T) {
    size_t need = (size_t)B * (size_t)T;
    if (need > s->cap) {
        int32_t *t = realloc(s->tok_buf, need * sizeof(int32_t));
        if (!t) {
            return -1;
        }
        s->tok_buf = t;
        s->cap = need;
    }
    if (!s->len) {
        s->len = malloc((size_t)s->batch * sizeof(int));
        s->score = malloc((size_t)s->batch * sizeof(float));
    }
    return s->len && s->score ? 0 : -1;
}

static int s_score(void *state, const rl_reward_item_t *items, size_t n, double *out, char *err,
                   size_t err_len) {
    s_rm_t *s = state;
    int32_t **ids = calloc(n + 1, sizeof(int32_t *));
    size_t *len = calloc(n + 1, sizeof(size_t));
    int rc = ids && len ? 0 : -1, too_long = 0;
    if (rc) {
        snprintf(err, err_len, "out of memory");
    }
    // each item's sequence: prompt ids then completion ids, encoded apart (no merge across)
    for (size_t i = 0; !rc && i < n; i++) {
        int32_t *a = NULL, *b = NULL;
        size_t na = 0, nb = 0;
        if (rl_tokenizer_encode(s->tok, items[i].prompt, items[i].prompt_len, 0, &a, &na) ||
            rl_tokenizer_encode(s->tok, items[i].completion, items[i].completion_len, 0, &b, &nb)) {
            snprintf(err, err_len, "item %zu: cannot tokenize: %s", i, rl_tokenizer_errmsg(s->tok));
            rc = -1;
        } else if ((ids[i] = malloc((na + nb + 1) * sizeof(int32_t))) == NULL) {
            snprintf(err, err_len, "out of memory");
            rc = -1;
        } else {
            memcpy(ids[i], a, na * sizeof(int32_t));
            memcpy(ids[i] + na, b, nb * sizeof(int32_t));
            len[i] = na + nb;
        }
        free(a);
        free(b);
    }
    // batches of up to batch_size scorable sequences, in order
    size_t i = 0;
    while (!rc && i < n) {
        size_t take[4096];
        int B = 0, T = 1;
        for (; i < n && B < s->batch; i++) {
            if (len[i] == 0 || len[i] > (size_t)s->max_len) {
                too_long += len[i] > 0;
                continue; // NaN: unscorable
            }
            take[B++] = i;
            T = (int)len[i] > T ? (int)len[i] : T;
        }
        if (B == 0) {
            continue;
        }
        if (s_reserve(s, B, T)) {
            snprintf(err, err_len, "out of memory");
            rc = -1;
            break;
        }
        memset(s->tok_buf, 0, (size_t)B * (size_t)T * sizeof(int32_t));
        for (int b = 0; b < B; b++) {
            memcpy(s->tok_buf + (size_t)b * T, ids[take[b]], len[take[b]] * sizeof(int32_t));
            s->len[b] = (int)len[take[b]];
        }
        if (rl_model_forward(s->model, s->tok_buf, s->len, B, T, 1.0f, 0, NULL, NULL) != 0) {
            snprintf(err, err_len, "forward: %s", rl_model_errmsg(s->model));
            rc = -1;
            break;
        }
        rl_head_score_forward(s->score, rl_model_hidden(s->model), s->w, s->len, B, T, s->C);
        for (int b = 0; b < B; b++) {
            out[take[b]] = isfinite(s->score[b]) ? (double)s->score[b] : NAN;
        }
    }
    if (!rc && too_long) {
        s->host->log(s->host->ctx, RL_REWARD_LOG_WARN,
                     "%d sequences longer than the model's %d positions left unscored", too_long,
                     s->max_len);
    }
    for (size_t k = 0; ids && k < n; k++) {
        free(ids[k]);
    }
    free(ids);
    free(len);
    return rc;
}

static const rl_reward_table_t s_table = {
    .abi_version = RL_REWARD_ABI_VERSION,
    .struct_size = sizeof(rl_reward_table_t),
    .name = "model",
    .create = s_create,
    .score = s_score,
    .destroy = s_destroy,
};

const rl_reward_table_t *rl_reward_model_table(void) {
    return &s_table;
}
