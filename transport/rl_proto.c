// rl_proto — typed role messages (see rl_proto.h). The messages are defined once, in
// rl_proto_def.h; from its lists this file makes one table of fields per message (key, kind,
// dtype, rank, where each value and each dimension sits in the struct, presence, meaning), and
// one generic encoder and one generic decoder walk the tables; a verb's own consistency checks
// run after decoding. The typed functions of the header are thin wrappers, and rl_proto_doc
// prints the same tables as docs/protocol.md shows them.
#include "rl_proto.h"

#include "rl_err.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>

// ---- verbs ------------------------------------------------------------------------------------

static const struct {
    const char *op, *served_by, *answer; // answer: what answers it when it has no reply message
} s_verbs[RL_PROTO_N_VERBS] = {
#define S_VERB(VERB, op, served_by, answer) [RL_PROTO_##VERB] = {#op, served_by, answer},
    RL_PROTO_VERBS(S_VERB)
#undef S_VERB
};

const char *rl_proto_verb_name(rl_proto_verb_t verb) {
    return (unsigned)verb < RL_PROTO_N_VERBS ? s_verbs[verb].op : "?";
}

int rl_proto_verb_of(const char *op) {
    for (int v = 0; op && v < RL_PROTO_N_VERBS; v++) {
        if (strcmp(op, s_verbs[v].op) == 0) {
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
    int has_def;        // an optional scalar with a default (DEF(v)): for the doc
    double def;         // the default of an optional scalar
    size_t off;         // the value: int64_t, double, int, const char *, const void *
    size_t len_off;     // S_STR: size_t length; S_STRS: const size_t * lengths (or S_NONE)
    rl_wire_dtype_t dtype;
    int ndim;           // S_TENSOR: 1 or 2; S_STRS: 1 (its count is a dimension)
    size_t dim_off[2];  // the struct members that hold the dimensions: int64_t (DIM) or int
    size_t dim_size[2]; // (COUNT), told apart by their sizes
    const char *dim_name[2];
    const char *doc;    // the field's meaning
} s_field_t;

// presence: REQ, OPT, DEF(v)
#define S_P_REQ .optional = 0
#define S_P_OPT .optional = 1
#define S_P_DEF(v) .optional = 1, .has_def = 1, .def = (v)
#define S_DIM0(S, d)                                                                           \
    .dim_off = {offsetof(S, d)}, .dim_size = {sizeof(((S *)0)->d)}, .dim_name = {#d}
#define S_DIM01(S, d0, d1)                                                                     \
    .dim_off = {offsetof(S, d0), offsetof(S, d1)},                                             \
    .dim_size = {sizeof(((S *)0)->d0), sizeof(((S *)0)->d1)}, .dim_name = {#d0, #d1}

// one row of a table per wire field (m: the meaning); the size members make none
#define S_F_INT(S, name, p, m)                                                                 \
    {.key = #name, .kind = S_INT, S_P_##p, .off = offsetof(S, name), .doc = m},
#define S_F_FLOAT(S, name, p, m)                                                               \
    {.key = #name, .kind = S_FLOAT, S_P_##p, .off = offsetof(S, name), .doc = m},
#define S_F_BOOL(S, name, p, m)                                                                \
    {.key = #name, .kind = S_BOOL, S_P_##p, .off = offsetof(S, name), .doc = m},
#define S_F_STR(S, name, p, m)                                                                 \
    {.key = #name, .kind = S_STR, S_P_##p, .off = offsetof(S, name), .len_off = S_NONE,        \
     .doc = m},
#define S_F_STRN(S, name, p, len, m)                                                           \
    {.key = #name, .kind = S_STR, S_P_##p, .off = offsetof(S, name),                           \
     .len_off = offsetof(S, len), .doc = m},
#define S_F_STRS(S, name, p, count, m)                                                         \
    {.key = #name, .kind = S_STRS, S_P_##p, .off = offsetof(S, name), .len_off = S_NONE,       \
     .ndim = 1, S_DIM0(S, count), .doc = m},
#define S_F_STRSN(S, name, p, lens, count, m)                                                  \
    {.key = #name, .kind = S_STRS, S_P_##p, .off = offsetof(S, name),                          \
     .len_off = offsetof(S, lens), .ndim = 1, S_DIM0(S, count), .doc = m},
#define S_F_T1(S, name, p, dt, d0, m)                                                          \
    {.key = #name, .kind = S_TENSOR, S_P_##p, .off = offsetof(S, name), .dtype = RL_DT_##dt,   \
     .ndim = 1, S_DIM0(S, d0), .doc = m},
#define S_F_T2(S, name, p, dt, d0, d1, m)                                                      \
    {.key = #name, .kind = S_TENSOR, S_P_##p, .off = offsetof(S, name), .dtype = RL_DT_##dt,   \
     .ndim = 2, S_DIM01(S, d0, d1), .doc = m},
#define S_F_DIM(S, name)
#define S_F_COUNT(S, name)
#define S_F_LENS(S, name)
#define S_F_SIZE(S, name)

#define S_N(a) ((int)(sizeof(a) / sizeof((a)[0])))

// s_fields_<message>[]: its fields in wire order
#define S_FIELDS(name, verb, side, st, fields, own)                                            \
    static const s_field_t s_fields_##name[] = {RL_PROTO_F_##fields(S_F, rl_proto_##st##_t)};
RL_PROTO_MESSAGES(S_FIELDS)

// the messages, S_MSG_<message>, in the definition's order
#define S_ENUM(name, verb, side, st, fields, own) S_MSG_##name,
enum { RL_PROTO_MESSAGES(S_ENUM) S_N_MSGS };

typedef struct {
    const char *name;  // "generate_reply": rl_proto_<name>_encode / _decode
    const char *what;  // "generate reply": the prefix of errors
    const char *verb;  // "generate"
    int reply;         // 1: op "reply" with ok = true; 0: op = verb
    const s_field_t *fields;
    int n;
} s_spec_t;

#define S_WHAT_REQUEST(verb) #verb
#define S_WHAT_REPLY(verb) #verb " reply"
#define S_REPLY_REQUEST 0
#define S_REPLY_REPLY 1
#define S_SPEC(name, verb, side, st, fields, own)                                              \
    [S_MSG_##name] = {#name, S_WHAT_##side(verb), #verb, S_REPLY_##side, s_fields_##name,      \
                      S_N(s_fields_##name)},
static const s_spec_t s_specs[S_N_MSGS] = {RL_PROTO_MESSAGES(S_SPEC)};

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

// each message's own checks after decoding (none: only the table's)
typedef int (*s_check_fn)(const void *st, char *err, size_t err_len);
static const s_check_fn s_checks[S_N_MSGS] = {
    [S_MSG_generate] = s_check_generate,
    [S_MSG_generate_reply] = s_check_generate_reply,
    [S_MSG_logprobs] = s_check_logprobs,
    [S_MSG_train] = s_check_train,
    [S_MSG_train_reply] = s_check_train_reply,
    [S_MSG_save] = s_check_save,
    [S_MSG_load] = s_check_load,
    [S_MSG_save_final] = s_check_save_final,
    [S_MSG_score] = s_check_score,
    [S_MSG_values] = s_check_values,
    [S_MSG_model_file] = s_check_model_file,
};

// ---- generic encode ---------------------------------------------------------------------------

#define S_AT(st, off, type) (*(type *)((char *)(st) + (off)))
#define S_CAT(st, off, type) (*(type const *)((const char *)(st) + (off))) // type may be const

// dimension d of field f: an int64_t (DIM) or an int (COUNT) member
static int64_t s_dim(const void *st, const s_field_t *f, int d) {
    return f->dim_size[d] == sizeof(int64_t) ? S_CAT(st, f->dim_off[d], int64_t)
                                             : (int64_t)S_CAT(st, f->dim_off[d], int);
}

static void s_dim_set(void *st, const s_field_t *f, int d, int64_t v) {
    if (f->dim_size[d] == sizeof(int64_t)) {
        S_AT(st, f->dim_off[d], int64_t) = v;
    } else {
        S_AT(st, f->dim_off[d], int) = (int)v;
    }
}

static int s_encode(const s_spec_t *spec, const void *st, uint64_t id, rl_msg_t **out, char *err,
                    size_t err_len) {
    *out = NULL;
    rl_msg_t *m = rl_msg_new(spec->reply ? "reply" : spec->verb, id);
    if (!m) {
        return rl_errf(err, err_len, RL_ENOMEM, "out of memory");
    }
    int rc = spec->reply ? rl_msg_set_bool(m, "ok", 1) : 0;
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
                                 (int)s_dim(st, f, 0));
            break;
        case S_TENSOR: {
            const void *data = S_CAT(st, f->off, const void *);
            if (!data && f->optional) {
                break;
            }
            int64_t shape[2];
            for (int d = 0; d < f->ndim; d++) {
                shape[d] = s_dim(st, f, d);
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

// *st is zeroed by the caller
static int s_decode(int which, const rl_msg_t *msg, void *st, char *err, size_t err_len) {
    const s_spec_t *spec = &s_specs[which];
    // every dimension starts unknown (-1): the first tensor or string list that has it sets it,
    // the others must agree
    for (int i = 0; i < spec->n; i++) {
        for (int d = 0; d < spec->fields[i].ndim; d++) {
            s_dim_set(st, &spec->fields[i], d, -1);
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
            int64_t want = s_dim(st, f, 0);
            if (rc == 0 && want >= 0 && want != n) {
                return rl_errf(err, err_len, RL_EPROTO, "%s: '%s' holds %d strings, %lld expected",
                               spec->what, f->key, n, (long long)want);
            }
            S_AT(st, f->off, const char *const *) = s;
            if (f->len_off != S_NONE) {
                S_AT(st, f->len_off, const size_t *) = lens;
            }
            if (rc == 0) {
                s_dim_set(st, f, 0, n);
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
                int64_t want = s_dim(st, f, d);
                if (want >= 0 && shape[d] != want) {
                    return rl_errf(err, err_len, RL_EPROTO,
                                   "%s: '%s' has %lld in dimension %d, %lld expected", spec->what,
                                   f->key, (long long)shape[d], d, (long long)want);
                }
                if (f->dim_size[d] != sizeof(int64_t) && shape[d] > INT_MAX) {
                    return rl_errf(err, err_len, RL_EPROTO,
                                   "%s: '%s' has %lld in dimension %d, at most %d", spec->what,
                                   f->key, (long long)shape[d], d, INT_MAX);
                }
                s_dim_set(st, f, d, shape[d]);
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
    // the dimensions of optional fields that were absent are 0, not unknown
    for (int i = 0; i < spec->n; i++) {
        for (int d = 0; d < spec->fields[i].ndim; d++) {
            if (s_dim(st, &spec->fields[i], d) < 0) {
                s_dim_set(st, &spec->fields[i], d, 0);
            }
        }
    }
    return s_checks[which] ? s_checks[which](st, err, err_len) : 0;
}

// ---- the typed functions ----------------------------------------------------------------------

#define S_CODEC(name, verb, side, st, fields, own)                                             \
    int rl_proto_##name##_encode(const rl_proto_##st##_t *m, uint64_t id, rl_msg_t **out,      \
                                 char *err, size_t err_len) {                                  \
        return s_encode(&s_specs[S_MSG_##name], m, id, out, err, err_len);                     \
    }                                                                                          \
    int rl_proto_##name##_decode(const rl_msg_t *msg, rl_proto_##st##_t *out, char *err,       \
                                 size_t err_len) {                                             \
        memset(out, 0, sizeof *out);                                                           \
        return s_decode(S_MSG_##name, msg, out, err, err_len);                                 \
    }
RL_PROTO_MESSAGES(S_CODEC)

// ---- the doc's tables -------------------------------------------------------------------------

// "int", "bool, optional (default true)", "f32 [B,T], optional", "strs [n]"
static void s_doc_type(FILE *out, const s_field_t *f) {
    switch (f->kind) {
    case S_INT:
        fputs("int", out);
        break;
    case S_FLOAT:
        fputs("float", out);
        break;
    case S_BOOL:
        fputs("bool", out);
        break;
    case S_STR:
        fputs("str", out);
        break;
    case S_STRS:
        fprintf(out, "strs [%s]", f->dim_name[0]);
        break;
    case S_TENSOR:
        fprintf(out, "%s [%s%s%s]", rl_wire_dtype_name(f->dtype), f->dim_name[0],
                f->ndim > 1 ? "," : "", f->ndim > 1 ? f->dim_name[1] : "");
        break;
    }
    if (f->optional && !f->has_def) {
        fputs(", optional", out);
    } else if (f->has_def && f->kind == S_BOOL) {
        fprintf(out, ", optional (default %s)", f->def != 0 ? "true" : "false");
    } else if (f->has_def && f->kind == S_INT) {
        fprintf(out, ", optional (default %lld)", (long long)f->def);
    } else if (f->has_def) {
        fprintf(out, ", optional (default %g)", f->def);
    }
}

// `a`, `b`?, ... of a message; "—" for none
static void s_doc_keys(FILE *out, const s_spec_t *spec, const char *none) {
    if (!spec) {
        fputs(none ? none : "—", out);
        return;
    }
    for (int i = 0; i < spec->n; i++) {
        fprintf(out, "%s`%s`%s", i ? ", " : "", spec->fields[i].key,
                spec->fields[i].optional ? "?" : "");
    }
}

static const s_spec_t *s_spec_of(const char *verb, int reply) {
    for (int i = 0; i < S_N_MSGS; i++) {
        if (s_specs[i].reply == reply && strcmp(s_specs[i].verb, verb) == 0) {
            return &s_specs[i];
        }
    }
    return NULL;
}

int rl_proto_doc(FILE *out, const char *name) {
    if (strcmp(name, "verbs") == 0) {
        fputs("| verb | served by | request fields | reply fields |\n|---|---|---|---|\n", out);
        for (int v = 0; v < RL_PROTO_N_VERBS; v++) {
            fprintf(out, "| `%s` | %s | ", s_verbs[v].op, s_verbs[v].served_by);
            s_doc_keys(out, s_spec_of(s_verbs[v].op, 0), NULL);
            fputs(" | ", out);
            s_doc_keys(out, s_spec_of(s_verbs[v].op, 1), s_verbs[v].answer);
            fputs(" |\n", out);
        }
        for (int i = 0; i < S_N_MSGS; i++) {
            if (rl_proto_verb_of(s_specs[i].verb) < 0) {
                return RL_EINVAL; // a message of a verb RL_PROTO_VERBS lacks: no row shows it
            }
        }
        return ferror(out) ? RL_EIO : 0;
    }
    for (int i = 0; i < S_N_MSGS; i++) {
        const s_spec_t *spec = &s_specs[i];
        if (strcmp(name, spec->name) != 0) {
            continue;
        }
        fprintf(out, "| %s | type | meaning |\n|---|---|---|\n", spec->reply ? "reply" : "request");
        for (int k = 0; k < spec->n; k++) {
            fprintf(out, "| `%s` | ", spec->fields[k].key);
            s_doc_type(out, &spec->fields[k]);
            fprintf(out, " | %s |\n", spec->fields[k].doc);
        }
        return ferror(out) ? RL_EIO : 0;
    }
    return RL_ENOTFOUND;
}

const char *rl_proto_doc_name(int i) {
    return i == 0 ? "verbs" : i > 0 && i <= S_N_MSGS ? s_specs[i - 1].name : NULL;
}

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
