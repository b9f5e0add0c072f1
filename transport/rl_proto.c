// rl_proto — typed role messages (see rl_proto.h). Each message is described once, by a table
// of its fields (key, kind, dtype, rank, where it sits in the struct, which struct fields hold
// its dimensions); one generic encoder and one generic decoder walk the tables, and a verb's own
// consistency checks run after decoding. The typed functions of the header are thin wrappers.
#include "rl_proto.h"

#include "rl_err.h"

#include <stdio.h>
#include <string.h>

// ---- verbs ------------------------------------------------------------------------------------

static const char *const s_ops[RL_PROTO_N_VERBS] = {
    [RL_PROTO_HELLO] = "hello",
    [RL_PROTO_HB] = "hb",
    [RL_PROTO_CONFIGURE] = "configure",
    [RL_PROTO_SHUTDOWN] = "shutdown",
    [RL_PROTO_LOAD_WEIGHTS] = "load_weights",
    [RL_PROTO_GENERATE] = "generate",
    [RL_PROTO_LOGPROBS] = "logprobs",
    [RL_PROTO_TRAIN] = "train",
    [RL_PROTO_EXPORT_WEIGHTS] = "export_weights",
    [RL_PROTO_SAVE] = "save",
    [RL_PROTO_LOAD] = "load",
    [RL_PROTO_SAVE_FINAL] = "save_final",
    [RL_PROTO_SCORE] = "score",
    [RL_PROTO_VALUES] = "values",
    [RL_PROTO_ATTACH] = "attach",
    [RL_PROTO_MODEL_FILE] = "model_file",
};

const char *rl_proto_verb_name(rl_proto_verb_t verb) {
    return (unsigned)verb < RL_PROTO_N_VERBS ? s_ops[verb] : "?";
}

int rl_proto_verb_of(const char *op) {
    for (int v = 0; op && v < RL_PROTO_N_VERBS; v++) {
        if (strcmp(op, s_ops[v]) == 0) {
            return v;
        }
    }
    return -1;
}

// ---- field tables -----------------------------------------------------------------------------

typedef enum { S_INT, S_FLOAT, S_BOOL, S_STR, S_STRS, S_TENSOR } s_kind_t;

#define S_NONE ((size_t)-1)

typedef struct {
    const char *key;
    s_kind_t kind;
    int optional;       // may be absent: tensors and strings NULL, scalars their default
    double def;         // the default of an optional scalar
    size_t off;         // the value: int64_t, double, int, const char *, const void *
    size_t len_off;     // S_STR: size_t length (or S_NONE); S_STRS: const size_t * lengths
    size_t count_off;   // S_STRS: int count; S_TENSOR: the int count that is its dimension
                        // when dim_off[0] is S_NONE
    rl_wire_dtype_t dtype;
    int ndim;
    size_t dim_off[2];  // S_TENSOR: the int64_t struct fields that hold its dimensions
} s_field_t;

typedef struct {
    const char *what;           // "generate", "generate reply": the prefix of messages
    const s_field_t *fields;
    int n;
    // the verb's own checks after decoding; returns 0 or RL_EPROTO with err filled
    int (*check)(const void *st, char *err, size_t err_len);
} s_spec_t;

#define F_INT(T, k, f) {.key = k, .kind = S_INT, .off = offsetof(T, f)}
#define F_INT_OPT(T, k, f, d) {.key = k, .kind = S_INT, .optional = 1, .def = d, .off = offsetof(T, f)}
#define F_FLOAT(T, k, f) {.key = k, .kind = S_FLOAT, .off = offsetof(T, f)}
#define F_FLOAT_OPT(T, k, f, d)                                                                \
    {.key = k, .kind = S_FLOAT, .optional = 1, .def = d, .off = offsetof(T, f)}
#define F_BOOL_OPT(T, k, f, d) {.key = k, .kind = S_BOOL, .optional = 1, .def = d, .off = offsetof(T, f)}
#define F_STR(T, k, f) {.key = k, .kind = S_STR, .off = offsetof(T, f), .len_off = S_NONE}
#define F_STR_OPT(T, k, f)                                                                     \
    {.key = k, .kind = S_STR, .optional = 1, .off = offsetof(T, f), .len_off = S_NONE}
#define F_STRN(T, k, f, l) {.key = k, .kind = S_STR, .off = offsetof(T, f), .len_off = offsetof(T, l)}
#define F_STRS(T, k, f, l, c)                                                                  \
    {.key = k, .kind = S_STRS, .off = offsetof(T, f), .len_off = offsetof(T, l),               \
     .count_off = offsetof(T, c)}
#define F_T1(T, k, f, dt, d0)                                                                  \
    {.key = k, .kind = S_TENSOR, .off = offsetof(T, f), .dtype = dt, .ndim = 1,                \
     .dim_off = {offsetof(T, d0), S_NONE}}
#define F_T1_OPT(T, k, f, dt, d0)                                                              \
    {.key = k, .kind = S_TENSOR, .optional = 1, .off = offsetof(T, f), .dtype = dt, .ndim = 1, \
     .dim_off = {offsetof(T, d0), S_NONE}}
#define F_T2(T, k, f, dt, d0, d1)                                                              \
    {.key = k, .kind = S_TENSOR, .off = offsetof(T, f), .dtype = dt, .ndim = 2,                \
     .dim_off = {offsetof(T, d0), offsetof(T, d1)}}
#define F_T2_OPT(T, k, f, dt, d0, d1)                                                          \
    {.key = k, .kind = S_TENSOR, .optional = 1, .off = offsetof(T, f), .dtype = dt, .ndim = 2, \
     .dim_off = {offsetof(T, d0), offsetof(T, d1)}}
#define S_N(a) ((int)(sizeof(a) / sizeof((a)[0])))

// -- hello, hb, configure
static const s_field_t s_hello[] = {
    F_STR(rl_proto_hello_t, "role", role),
    F_INT(rl_proto_hello_t, "rank", rank),
    F_INT(rl_proto_hello_t, "pid", pid),
    F_STR(rl_proto_hello_t, "token", token),
    {.key = "caps",
     .kind = S_STRS,
     .off = offsetof(rl_proto_hello_t, caps),
     .len_off = S_NONE,
     .count_off = offsetof(rl_proto_hello_t, n_caps)},
    F_STR_OPT(rl_proto_hello_t, "error", error),
    F_STR_OPT(rl_proto_hello_t, "host", host),
};
static const s_field_t s_hb[] = {F_STR(rl_proto_hb_t, "token", token)};
static const s_field_t s_configure[] = {
    F_STRN(rl_proto_configure_t, "recipe", recipe, recipe_len),
    F_INT(rl_proto_configure_t, "threads", threads),
};

// -- remote samplers
static const s_field_t s_attach[] = {
    F_STR(rl_proto_attach_t, "session", session),
    F_STR(rl_proto_attach_t, "model_hash", model_hash),
    F_STR(rl_proto_attach_t, "run", run),
};
static const s_field_t s_attach_reply[] = {
    F_STR(rl_proto_attach_reply_t, "session", session),
    F_INT(rl_proto_attach_reply_t, "pid", pid),
    F_STR(rl_proto_attach_reply_t, "host", host),
    F_INT(rl_proto_attach_reply_t, "threads", threads),
    F_BOOL_OPT(rl_proto_attach_reply_t, "needs_model", needs_model, 0),
};
static const s_field_t s_model_file[] = {
    F_STR(rl_proto_model_file_t, "name", name),
    F_INT(rl_proto_model_file_t, "offset", offset),
    F_INT(rl_proto_model_file_t, "total", total),
    F_T1(rl_proto_model_file_t, "data", data, RL_DT_U8, n),
    F_BOOL_OPT(rl_proto_model_file_t, "last", last, 0),
};

// -- sampler
static const s_field_t s_load_weights[] = {
    F_INT(rl_proto_load_weights_t, "version", version),
    F_STR(rl_proto_load_weights_t, "kind", kind),
    F_T1(rl_proto_load_weights_t, "weights", weights, RL_DT_F32, n),
    F_INT_OPT(rl_proto_load_weights_t, "offset", offset, 0),
    F_INT_OPT(rl_proto_load_weights_t, "total", total, -1),
};
static const s_field_t s_load_weights_reply[] = {
    F_INT(rl_proto_load_weights_reply_t, "version", version),
};
static const s_field_t s_generate[] = {
    F_INT(rl_proto_generate_t, "version", version),
    F_T1(rl_proto_generate_t, "prompts", prompts, RL_DT_I32, n_prompt_ids),
    F_T1(rl_proto_generate_t, "prompt_lens", prompt_lens, RL_DT_I32, P),
    F_T1(rl_proto_generate_t, "prompt_index", prompt_index, RL_DT_I64, P),
    F_INT(rl_proto_generate_t, "n", n),
    F_INT(rl_proto_generate_t, "max_new_tokens", max_new_tokens),
    F_FLOAT(rl_proto_generate_t, "temperature", temperature),
    F_FLOAT(rl_proto_generate_t, "top_p", top_p),
    F_INT(rl_proto_generate_t, "top_k", top_k),
    F_INT(rl_proto_generate_t, "seed", seed),
    F_T1_OPT(rl_proto_generate_t, "stop_ids", stop_ids, RL_DT_I32, n_stop),
};
static const s_field_t s_generate_reply[] = {
    F_T1(rl_proto_generate_reply_t, "lens", lens, RL_DT_I32, n_res),
    F_T1(rl_proto_generate_reply_t, "ids", ids, RL_DT_I32, n_ids),
    F_T1(rl_proto_generate_reply_t, "logprobs", logprobs, RL_DT_F32, n_ids),
    F_T1(rl_proto_generate_reply_t, "finish", finish, RL_DT_U8, n_res),
    F_INT(rl_proto_generate_reply_t, "prefill_tokens", prefill_tokens),
    F_INT(rl_proto_generate_reply_t, "decode_tokens", decode_tokens),
};

// -- actor and reference
static const s_field_t s_logprobs[] = {
    F_T2(rl_proto_logprobs_t, "tokens", tokens, RL_DT_I32, B, T),
    F_T1(rl_proto_logprobs_t, "lengths", lengths, RL_DT_I32, B),
    F_BOOL_OPT(rl_proto_logprobs_t, "adapter", adapter, 1),
    F_FLOAT(rl_proto_logprobs_t, "temperature", temperature),
};
static const s_field_t s_logprobs_reply[] = {
    F_T2(rl_proto_logprobs_reply_t, "logp", logp, RL_DT_F32, B, T),
};
static const s_field_t s_train[] = {
    F_STR(rl_proto_train_t, "loss", loss),
    F_INT_OPT(rl_proto_train_t, "step", step, 0),
    F_FLOAT(rl_proto_train_t, "lr", lr),
    F_FLOAT(rl_proto_train_t, "temperature", temperature),
    F_T2(rl_proto_train_t, "tokens", tokens, RL_DT_I32, B, T),
    F_T1(rl_proto_train_t, "lengths", lengths, RL_DT_I32, B),
    F_T2(rl_proto_train_t, "mask", mask, RL_DT_U8, B, T),
    F_T1_OPT(rl_proto_train_t, "adv", adv, RL_DT_F64, B),
    F_T2_OPT(rl_proto_train_t, "token_adv", token_adv, RL_DT_F32, B, T),
    F_T2_OPT(rl_proto_train_t, "mu_logp", mu_logp, RL_DT_F32, B, T),
    F_T2_OPT(rl_proto_train_t, "ref_logp", ref_logp, RL_DT_F32, B, T),
    F_T2_OPT(rl_proto_train_t, "old_logp", old_logp, RL_DT_F32, B, T),
    F_T2_OPT(rl_proto_train_t, "values", values, RL_DT_F32, B, T),
    F_T2_OPT(rl_proto_train_t, "returns", returns, RL_DT_F32, B, T),
    F_T1_OPT(rl_proto_train_t, "ref_sum", ref_sum, RL_DT_F64, B),
    F_T1_OPT(rl_proto_train_t, "margin", margin, RL_DT_F64, B),
    F_FLOAT(rl_proto_train_t, "denom", denom),
    F_INT(rl_proto_train_t, "micro_batch", micro_batch),
    F_INT(rl_proto_train_t, "iterations", iterations),
    F_BOOL_OPT(rl_proto_train_t, "want_weights", want_weights, 1),
};
static const s_field_t s_train_reply[] = {
    F_T2(rl_proto_train_reply_t, "old_logp", old_logp, RL_DT_F32, B, T),
    F_STRS(rl_proto_train_reply_t, "stat_names", stat_names, stat_lens, n_stats),
    // [n_stats]: a dimension held by the names' int count
    {.key = "stats", .kind = S_TENSOR, .off = offsetof(rl_proto_train_reply_t, stats),
     .count_off = offsetof(rl_proto_train_reply_t, n_stats), .dtype = RL_DT_F64, .ndim = 1,
     .dim_off = {S_NONE, S_NONE}},
    F_INT(rl_proto_train_reply_t, "iterations", iterations),
    F_T1_OPT(rl_proto_train_reply_t, "weights", weights, RL_DT_F32, n),
};
static const s_field_t s_export_reply[] = {
    F_STR(rl_proto_export_weights_reply_t, "kind", kind),
    F_T1(rl_proto_export_weights_reply_t, "weights", weights, RL_DT_F32, n),
};
static const s_field_t s_save[] = {
    F_STR(rl_proto_save_t, "dir", dir),
    F_STR_OPT(rl_proto_save_t, "part", part),
};
static const s_field_t s_load[] = {
    F_STR(rl_proto_save_t, "dir", dir),
    F_INT_OPT(rl_proto_save_t, "model_train_step", model_train_step, 0),
    F_STR_OPT(rl_proto_save_t, "part", part),
};
static const s_field_t s_save_reply[] = {
    F_INT(rl_proto_save_reply_t, "model_train_step", model_train_step),
    F_INT(rl_proto_save_reply_t, "n_trainable", n_trainable),
};
static const s_field_t s_save_final[] = {
    F_STR(rl_proto_save_final_t, "dir", dir),
    F_BOOL_OPT(rl_proto_save_final_t, "bf16", bf16, 0),
    F_STR_OPT(rl_proto_save_final_t, "part", part),
    F_INT_OPT(rl_proto_save_final_t, "pad_token_id", pad_token_id, -1),
};

// -- critic
static const s_field_t s_values[] = {
    F_T2(rl_proto_values_t, "tokens", tokens, RL_DT_I32, B, T),
    F_T1(rl_proto_values_t, "lengths", lengths, RL_DT_I32, B),
    F_BOOL_OPT(rl_proto_values_t, "scores", scores, 0),
};
static const s_field_t s_values_reply[] = {
    F_T2(rl_proto_values_reply_t, "values", values, RL_DT_F32, B, T),
};

// -- reward
static const s_field_t s_score[] = {
    F_INT(rl_proto_score_t, "reward", reward),
    F_STRS(rl_proto_score_t, "prompts", prompts, prompt_lens, n),
    F_STRS(rl_proto_score_t, "completions", completions, completion_lens, n),
    F_STRS(rl_proto_score_t, "rows", rows, row_lens, n),
    F_T1(rl_proto_score_t, "ids", ids, RL_DT_I32, n_ids),
    // [n]: a dimension held by the string lists' int count
    {.key = "lens", .kind = S_TENSOR, .off = offsetof(rl_proto_score_t, lens),
     .count_off = offsetof(rl_proto_score_t, n), .dtype = RL_DT_I32, .ndim = 1,
     .dim_off = {S_NONE, S_NONE}},
};
static const s_field_t s_score_reply[] = {
    F_T1(rl_proto_score_reply_t, "scores", scores, RL_DT_F64, n),
};

// ---- the verbs' own checks --------------------------------------------------------------------

static int s_check_generate(const void *st, char *err, size_t err_len) {
    const rl_proto_generate_t *g = st;
    if (g->n < 1 || g->n > 4096 || g->max_new_tokens < 1 || g->max_new_tokens > (1 << 20) ||
        g->P > (1 << 20)) {
        return rl_errf(err, err_len, RL_EPROTO, "generate: inconsistent request");
    }
    int64_t off = 0;
    for (int64_t i = 0; i < g->P; i++) {
        if (g->prompt_lens[i] < 1 || off + g->prompt_lens[i] > g->n_prompt_ids) {
            return rl_errf(err, err_len, RL_EPROTO, "generate: prompt_lens exceed prompts");
        }
        off += g->prompt_lens[i];
    }
    return 0;
}

static int s_check_generate_reply(const void *st, char *err, size_t err_len) {
    const rl_proto_generate_reply_t *g = st;
    int64_t sum = 0;
    for (int64_t i = 0; i < g->n_res; i++) {
        if (g->lens[i] < 0) {
            return rl_errf(err, err_len, RL_EPROTO, "generate reply: a negative length");
        }
        sum += g->lens[i];
    }
    if (sum != g->n_ids) {
        return rl_errf(err, err_len, RL_EPROTO,
                       "generate reply sizes do not add up (%lld ids, lengths sum to %lld)",
                       (long long)g->n_ids, (long long)sum);
    }
    return 0;
}

// tokens [B,T] and lengths [B] (logprobs, train): sizes that fit, every length in 1..T.
static int s_check_batch(const char *what, int64_t B, int64_t T, const int32_t *len, char *err,
                         size_t err_len) {
    // B = 0: a rank of a mesh with no rows of this batch (it still takes part)
    if (B < 0 || T < 2 || B > (1 << 24) || T > (1 << 24)) {
        return rl_errf(err, err_len, RL_EPROTO, "%s: tokens [%lld,%lld] do not fit", what,
                       (long long)B, (long long)T);
    }
    for (int64_t i = 0; i < B; i++) {
        if (len[i] < 1 || len[i] > T) {
            return rl_errf(err, err_len, RL_EPROTO, "%s: a length outside [1, T]", what);
        }
    }
    return 0;
}

static int s_check_logprobs(const void *st, char *err, size_t err_len) {
    const rl_proto_logprobs_t *l = st;
    return s_check_batch("logprobs", l->B, l->T, l->lengths, err, err_len);
}

static int s_check_values(const void *st, char *err, size_t err_len) {
    const rl_proto_values_t *v = st;
    return s_check_batch("values", v->B, v->T, v->lengths, err, err_len);
}

// a part of a worker that holds two models (the actor with its critic): absent, policy, critic
static int s_check_part(const char *what, const char *part, char *err, size_t err_len) {
    if (part && strcmp(part, "policy") != 0 && strcmp(part, "critic") != 0) {
        return rl_errf(err, err_len, RL_EPROTO, "%s: unknown part '%s' (policy, critic)", what,
                       part);
    }
    return 0;
}

static int s_check_save(const void *st, char *err, size_t err_len) {
    return s_check_part("save", ((const rl_proto_save_t *)st)->part, err, err_len);
}

static int s_check_load(const void *st, char *err, size_t err_len) {
    return s_check_part("load", ((const rl_proto_save_t *)st)->part, err, err_len);
}

static int s_check_save_final(const void *st, char *err, size_t err_len) {
    return s_check_part("save_final", ((const rl_proto_save_final_t *)st)->part, err, err_len);
}

static int s_check_train(const void *st, char *err, size_t err_len) {
    const rl_proto_train_t *t = st;
    const rl_loss_t *L = rl_loss_find(t->loss);
    if (!L) {
        char names[256];
        return rl_errf(err, err_len, RL_EPROTO, "train: unknown loss '%.64s' (%s)", t->loss,
                       rl_loss_names(0, names, sizeof names));
    }
    // what the loss's definition says a request carries
    const char *need = NULL;
    if ((L->needs & RL_LOSS_NEEDS_ADV) && !t->adv && !t->token_adv) {
        need = "'adv' or 'token_adv'";
    } else if ((L->needs & (RL_LOSS_NEEDS_TOKEN_ADV | RL_LOSS_NEEDS_OLD)) ==
                   (RL_LOSS_NEEDS_TOKEN_ADV | RL_LOSS_NEEDS_OLD) &&
               (!t->token_adv || !t->old_logp)) {
        need = "'token_adv' and 'old_logp'";
    } else if ((L->needs & RL_LOSS_NEEDS_TOKEN_ADV) && !t->token_adv) {
        need = "'token_adv'";
    } else if ((L->needs & RL_LOSS_NEEDS_OLD) && !t->old_logp) {
        need = "'old_logp'";
    } else if ((L->needs & RL_LOSS_NEEDS_VALUES) && (!t->values || !t->returns)) {
        need = "'values' and 'returns'";
    } else if ((L->needs & RL_LOSS_NEEDS_REF_SUM) && (!t->ref_sum || t->B % L->rows != 0)) {
        need = L->rows == 2 ? "'ref_sum' and rows in pairs" : "'ref_sum'";
    } else if (L->rows > 1 && t->B % L->rows != 0) {
        need = L->rows == 2 ? "rows in pairs" : "whole groups of rows";
    }
    if (need) {
        return rl_errf(err, err_len, RL_EPROTO, "train: the %s loss needs %s", L->name, need);
    }
    return s_check_batch("train", t->B, t->T, t->lengths, err, err_len);
}

// the statistics list: bounded, names of [a-z0-9_], no name twice
static int s_check_train_reply(const void *st, char *err, size_t err_len) {
    const rl_proto_train_reply_t *x = st;
    if (x->n_stats > RL_LOSS_MAX_STATS) {
        return rl_errf(err, err_len, RL_EPROTO, "train reply: %d statistics, at most %d",
                       x->n_stats, RL_LOSS_MAX_STATS);
    }
    for (int i = 0; i < x->n_stats; i++) {
        size_t n = x->stat_lens[i];
        int bad = n < 1 || n > RL_LOSS_MAX_STAT_NAME;
        for (size_t k = 0; !bad && k < n; k++) {
            char c = x->stat_names[i][k];
            bad = !((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_');
        }
        if (bad) {
            return rl_errf(err, err_len, RL_EPROTO,
                           "train reply: statistic %d is not a name of 1..%d bytes of [a-z0-9_]",
                           i, RL_LOSS_MAX_STAT_NAME);
        }
        for (int j = 0; j < i; j++) {
            if (x->stat_lens[j] == n && memcmp(x->stat_names[j], x->stat_names[i], n) == 0) {
                return rl_errf(err, err_len, RL_EPROTO, "train reply: statistic '%s' twice",
                               x->stat_names[i]);
            }
        }
    }
    return 0;
}

void rl_proto_train_reply_stats(const rl_proto_train_reply_t *x, rl_loss_stats_t *out) {
    memset(out, 0, sizeof *out);
    for (int i = 0; i < x->n_stats && i < RL_LOSS_MAX_STATS; i++) {
        out->name[i] = x->stat_names[i];
        out->value[i] = x->stats[i];
    }
    out->n = x->n_stats < RL_LOSS_MAX_STATS ? x->n_stats : RL_LOSS_MAX_STATS;
    out->updates = 1;
}

void rl_proto_train_reply_set_stats(rl_proto_train_reply_t *x, const rl_loss_stats_t *st) {
    x->stat_names = st->name;
    x->stat_lens = NULL;
    x->n_stats = st->n;
    x->stats = st->value;
}

static int s_check_score(const void *st, char *err, size_t err_len) {
    const rl_proto_score_t *s = st;
    int64_t off = 0;
    for (int i = 0; i < s->n; i++) {
        if (s->lens[i] < 0 || off + s->lens[i] > s->n_ids) {
            return rl_errf(err, err_len, RL_EPROTO, "score: lens exceed ids");
        }
        off += s->lens[i];
    }
    return 0;
}

// ---- generic encode ---------------------------------------------------------------------------

#define S_AT(st, off, type) (*(type *)((char *)(st) + (off)))
#define S_CAT(st, off, type) (*(const type *)((const char *)(st) + (off)))

static int s_encode(const s_spec_t *spec, const void *st, const char *op, int reply, uint64_t id,
                    rl_msg_t **out, char *err, size_t err_len) {
    *out = NULL;
    rl_msg_t *m = rl_msg_new(op, id);
    if (!m) {
        return rl_errf(err, err_len, RL_ENOMEM, "out of memory");
    }
    int rc = reply ? rl_msg_set_bool(m, "ok", 1) : 0;
    for (int i = 0; !rc && i < spec->n; i++) {
        const s_field_t *f = &spec->fields[i];
        switch (f->kind) {
        case S_INT:
            rc = rl_msg_set_int(m, f->key, S_CAT(st, f->off, int64_t));
            break;
        case S_FLOAT:
            rc = rl_msg_set_float(m, f->key, S_CAT(st, f->off, double));
            break;
        case S_BOOL:
            rc = rl_msg_set_bool(m, f->key, S_CAT(st, f->off, int));
            break;
        case S_STR: {
            const char *s = S_CAT(st, f->off, const char *);
            if (!s && f->optional) {
                break;
            }
            size_t n = f->len_off != S_NONE ? S_CAT(st, f->len_off, size_t) : 0;
            rc = s ? rl_msg_set_strn(m, f->key, s, n ? n : strlen(s))
                   : rl_errf(err, err_len, RL_EINVAL, "%s: no value for '%s'", spec->what,
                             f->key);
            break;
        }
        case S_STRS:
            rc = rl_msg_set_strs(m, f->key, S_CAT(st, f->off, const char *const *),
                                 f->len_off != S_NONE ? S_CAT(st, f->len_off, const size_t *)
                                                      : NULL,
                                 S_CAT(st, f->count_off, int));
            break;
        case S_TENSOR: {
            const void *data = S_CAT(st, f->off, const void *);
            if (!data && f->optional) {
                break;
            }
            int64_t shape[2];
            for (int d = 0; d < f->ndim; d++) {
                shape[d] = f->dim_off[d] != S_NONE ? S_CAT(st, f->dim_off[d], int64_t)
                                                   : (int64_t)S_CAT(st, f->count_off, int);
            }
            rc = rl_msg_set_tensor(m, f->key, f->dtype, f->ndim, shape, data);
            break;
        }
        }
    }
    if (rc) {
        if (err && !err[0]) {
            rl_errf(err, err_len, rc, "%s: %s", spec->what, rl_msg_errmsg(m));
        }
        rl_msg_free(&m);
        return rc;
    }
    *out = m;
    return 0;
}

// ---- generic decode ---------------------------------------------------------------------------

static const char *s_kind_name(s_kind_t k) {
    switch (k) {
    case S_INT:
        return "integer";
    case S_FLOAT:
        return "number";
    case S_BOOL:
        return "bool";
    case S_STR:
        return "string";
    case S_STRS:
        return "string list";
    default:
        return "tensor";
    }
}

static int s_decode(const s_spec_t *spec, const rl_msg_t *msg, void *st, size_t size, char *err,
                    size_t err_len) {
    memset(st, 0, size);
    // every dimension field starts unknown (-1): the first tensor sets it, the others must agree
    for (int i = 0; i < spec->n; i++) {
        for (int d = 0; d < spec->fields[i].ndim; d++) {
            if (spec->fields[i].dim_off[d] != S_NONE) {
                S_AT(st, spec->fields[i].dim_off[d], int64_t) = -1;
            }
        }
        if (spec->fields[i].kind == S_STRS) {
            S_AT(st, spec->fields[i].count_off, int) = -1; // string lists share their count
        }
    }
    for (int i = 0; i < spec->n; i++) {
        const s_field_t *f = &spec->fields[i];
        int rc = 0;
        switch (f->kind) {
        case S_INT: {
            int64_t v = (int64_t)f->def;
            rc = rl_msg_get_int(msg, f->key, &v);
            S_AT(st, f->off, int64_t) = v;
            break;
        }
        case S_FLOAT: {
            double v = f->def;
            rc = rl_msg_get_float(msg, f->key, &v);
            S_AT(st, f->off, double) = v;
            break;
        }
        case S_BOOL: {
            int v = (int)f->def;
            rc = rl_msg_get_bool(msg, f->key, &v);
            S_AT(st, f->off, int) = v;
            break;
        }
        case S_STR: {
            const char *s = NULL;
            size_t n = 0;
            rc = rl_msg_get_str(msg, f->key, &s, &n);
            S_AT(st, f->off, const char *) = s;
            if (f->len_off != S_NONE) {
                S_AT(st, f->len_off, size_t) = n;
            }
            break;
        }
        case S_STRS: {
            const char *const *s = NULL;
            const size_t *lens = NULL;
            int n = 0;
            rc = rl_msg_get_strs(msg, f->key, &s, &lens, &n);
            if (rc == 0 && S_AT(st, f->count_off, int) >= 0 &&
                S_AT(st, f->count_off, int) != n) {
                return rl_errf(err, err_len, RL_EPROTO, "%s: '%s' holds %d strings, %d expected",
                               spec->what, f->key, n, S_AT(st, f->count_off, int));
            }
            S_AT(st, f->off, const char *const *) = s;
            if (f->len_off != S_NONE) {
                S_AT(st, f->len_off, const size_t *) = lens;
            }
            if (rc == 0) {
                S_AT(st, f->count_off, int) = n;
            }
            break;
        }
        case S_TENSOR: {
            int64_t shape[2] = {0, 0};
            const void *data = NULL;
            rc = rl_msg_get_tensor(msg, f->key, f->dtype, f->ndim, shape, &data);
            if (rc) {
                break;
            }
            for (int d = 0; d < f->ndim; d++) {
                int64_t want = f->dim_off[d] != S_NONE ? S_AT(st, f->dim_off[d], int64_t)
                                                       : (int64_t)S_AT(st, f->count_off, int);
                if (want >= 0 && shape[d] != want) {
                    return rl_errf(err, err_len, RL_EPROTO,
                                   "%s: '%s' has %lld in dimension %d, %lld expected", spec->what,
                                   f->key, (long long)shape[d], d, (long long)want);
                }
                if (f->dim_off[d] != S_NONE) {
                    S_AT(st, f->dim_off[d], int64_t) = shape[d];
                }
            }
            S_AT(st, f->off, const void *) = data;
            break;
        }
        }
        if (rc == RL_ENOTFOUND && f->optional) {
            continue;
        }
        if (rc == RL_ENOTFOUND) {
            return rl_errf(err, err_len, RL_EPROTO, "%s: missing %s '%s'", spec->what,
                           s_kind_name(f->kind), f->key);
        }
        if (rc) {
            return rl_errf(err, err_len, RL_EPROTO, "%s: %s", spec->what, rl_msg_errmsg(msg));
        }
    }
    // optional tensors that were absent: their dimensions are 0, not unknown
    for (int i = 0; i < spec->n; i++) {
        for (int d = 0; d < spec->fields[i].ndim; d++) {
            size_t o = spec->fields[i].dim_off[d];
            if (o != S_NONE && S_AT(st, o, int64_t) < 0) {
                S_AT(st, o, int64_t) = 0;
            }
        }
        if (spec->fields[i].kind == S_STRS && S_AT(st, spec->fields[i].count_off, int) < 0) {
            S_AT(st, spec->fields[i].count_off, int) = 0;
        }
    }
    return spec->check ? spec->check(st, err, err_len) : 0;
}

// ---- the typed functions ----------------------------------------------------------------------

// model_file: a plain file name (no path), a piece inside its file.
static int s_check_model_file(const void *st, char *err, size_t err_len) {
    const rl_proto_model_file_t *q = st;
    size_t l = strlen(q->name);
    int bad = l == 0 || l > 255 || strchr(q->name, '/') || !strcmp(q->name, ".") ||
              !strcmp(q->name, "..") || q->name[0] == '.';
    for (size_t i = 0; !bad && i < l; i++) {
        bad = (unsigned char)q->name[i] < 0x20 || q->name[i] == 0x7f;
    }
    if (bad) {
        return rl_errf(err, err_len, RL_EPROTO, "model_file: '%.64s' is not a plain file name",
                       q->name);
    }
    if (q->offset < 0 || q->total < 0 || q->n > q->total || q->offset > q->total - q->n) {
        return rl_errf(err, err_len, RL_EPROTO, "model_file: %lld bytes at %lld of %lld",
                       (long long)q->n, (long long)q->offset, (long long)q->total);
    }
    return 0;
}

#define S_SPEC(name, what, check) static const s_spec_t s_spec_##name = {what, s_##name, S_N(s_##name), check}

S_SPEC(hello, "hello", NULL);
S_SPEC(hb, "hb", NULL);
S_SPEC(configure, "configure", NULL);
S_SPEC(load_weights, "load_weights", NULL);
S_SPEC(load_weights_reply, "load_weights reply", NULL);
S_SPEC(generate, "generate", s_check_generate);
S_SPEC(generate_reply, "generate reply", s_check_generate_reply);
S_SPEC(logprobs, "logprobs", s_check_logprobs);
S_SPEC(logprobs_reply, "logprobs reply", NULL);
S_SPEC(train, "train", s_check_train);
S_SPEC(train_reply, "train reply", s_check_train_reply);
static const s_spec_t s_spec_export_weights_reply = {"export_weights reply", s_export_reply,
                                                     S_N(s_export_reply), NULL};
S_SPEC(save, "save", s_check_save);
S_SPEC(save_reply, "save reply", NULL);
S_SPEC(load, "load", s_check_load);
static const s_spec_t s_spec_load_reply = {"load reply", s_save_reply, S_N(s_save_reply), NULL};
S_SPEC(save_final, "save_final", s_check_save_final);
S_SPEC(score, "score", s_check_score);
S_SPEC(score_reply, "score reply", NULL);
S_SPEC(values, "values", s_check_values);
S_SPEC(values_reply, "values reply", NULL);
S_SPEC(attach, "attach", NULL);
S_SPEC(attach_reply, "attach reply", NULL);
S_SPEC(model_file, "model_file", s_check_model_file);

#define S_CODEC(name, type, op, reply)                                                         \
    int rl_proto_##name##_encode(const type *m, uint64_t id, rl_msg_t **out, char *err,         \
                                 size_t err_len) {                                             \
        return s_encode(&s_spec_##name, m, op, reply, id, out, err, err_len);                  \
    }                                                                                          \
    int rl_proto_##name##_decode(const rl_msg_t *msg, type *out, char *err, size_t err_len) {   \
        return s_decode(&s_spec_##name, msg, out, sizeof(*out), err, err_len);                 \
    }

S_CODEC(hello, rl_proto_hello_t, "hello", 0)
S_CODEC(hb, rl_proto_hb_t, "hb", 0)
S_CODEC(configure, rl_proto_configure_t, "configure", 0)
S_CODEC(load_weights, rl_proto_load_weights_t, "load_weights", 0)
S_CODEC(load_weights_reply, rl_proto_load_weights_reply_t, "reply", 1)
S_CODEC(generate, rl_proto_generate_t, "generate", 0)
S_CODEC(generate_reply, rl_proto_generate_reply_t, "reply", 1)
S_CODEC(logprobs, rl_proto_logprobs_t, "logprobs", 0)
S_CODEC(logprobs_reply, rl_proto_logprobs_reply_t, "reply", 1)
S_CODEC(train, rl_proto_train_t, "train", 0)
S_CODEC(train_reply, rl_proto_train_reply_t, "reply", 1)
S_CODEC(export_weights_reply, rl_proto_export_weights_reply_t, "reply", 1)
S_CODEC(save, rl_proto_save_t, "save", 0)
S_CODEC(save_reply, rl_proto_save_reply_t, "reply", 1)
S_CODEC(load, rl_proto_save_t, "load", 0)
S_CODEC(load_reply, rl_proto_save_reply_t, "reply", 1)
S_CODEC(save_final, rl_proto_save_final_t, "save_final", 0)
S_CODEC(score, rl_proto_score_t, "score", 0)
S_CODEC(score_reply, rl_proto_score_reply_t, "reply", 1)
S_CODEC(values, rl_proto_values_t, "values", 0)
S_CODEC(values_reply, rl_proto_values_reply_t, "reply", 1)
S_CODEC(attach, rl_proto_attach_t, "attach", 0)
S_CODEC(attach_reply, rl_proto_attach_reply_t, "reply", 1)
S_CODEC(model_file, rl_proto_model_file_t, "model_file", 0)

// ---- envelopes --------------------------------------------------------------------------------

int rl_proto_request(rl_proto_verb_t verb, uint64_t id, rl_msg_t **out) {
    *out = rl_msg_new(rl_proto_verb_name(verb), id);
    return *out ? 0 : RL_ENOMEM;
}

int rl_proto_welcome(uint64_t id, rl_msg_t **out) {
    *out = rl_msg_new("welcome", id);
    return *out ? 0 : RL_ENOMEM;
}

int rl_proto_ok(uint64_t id, rl_msg_t **out) {
    *out = rl_msg_new("reply", id);
    if (*out && rl_msg_set_bool(*out, "ok", 1) != 0) {
        rl_msg_free(out);
    }
    return *out ? 0 : RL_ENOMEM;
}

int rl_proto_fail(uint64_t id, const char *error, rl_msg_t **out) {
    *out = rl_msg_new("reply", id);
    if (*out && (rl_msg_set_bool(*out, "ok", 0) != 0 ||
                 rl_msg_set_str(*out, "error", error ? error : "failed") != 0)) {
        rl_msg_free(out);
    }
    return *out ? 0 : RL_ENOMEM;
}

int rl_proto_reply_status(const rl_msg_t *msg, int *ok, const char **error) {
    *ok = 0;
    *error = "no reason given";
    if (strcmp(rl_msg_op(msg), "reply") != 0 || rl_msg_get_bool(msg, "ok", ok) != 0) {
        return RL_EPROTO;
    }
    if (!*ok) {
        rl_msg_get_str(msg, "error", error, NULL);
    }
    return 0;
}

int rl_proto_session_set(rl_msg_t *m, const char *session) {
    return rl_msg_set_str(m, "session", session) == 0 ? 0 : RL_ENOMEM;
}

int rl_proto_session_is(const rl_msg_t *m, const char *session) {
    const char *s = NULL;
    size_t n = 0, k = session ? strlen(session) : 0;
    if (!session || rl_msg_get_str(m, "session", &s, &n) != 0 || n != k) {
        return 0;
    }
    unsigned char d = 0;
    for (size_t i = 0; i < n; i++) {
        d |= (unsigned char)(s[i] ^ session[i]);
    }
    return d == 0;
}
