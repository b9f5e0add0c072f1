// rl_hf — Hugging Face config.json / generation_config.json for llama, qwen2 and qwen3, and the
// tensor list a config implies. Defaults follow transformers' LlamaConfig, Qwen2Config and
// Qwen3Config; every default and trap is listed in docs/formats.md ("config.json").
#include "rl_hf.h"

#include "rl_err.h"

#include <errno.h>
#include <float.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// Sizes above this are certainly not a real model and would overflow int products downstream.
#define S_MAX_SIZE (1 << 24)
// How many names of each kind rl_hf_check_weights lists before saying "and N more".
#define S_LIST_MAX 4

const char *rl_hf_arch_name(rl_arch_t arch) {
    switch (arch) {
    case RL_ARCH_LLAMA: return "llama";
    case RL_ARCH_QWEN2: return "qwen2";
    case RL_ARCH_QWEN3: return "qwen3";
    }
    return "unknown";
}

const char *rl_hf_rope_type_name(rl_rope_type_t type) {
    switch (type) {
    case RL_ROPE_DEFAULT: return "default";
    case RL_ROPE_LLAMA3: return "llama3";
    }
    return "unknown";
}

// ---------------------------------------------------------------------------------------------
// typed getters: each names the file and the key in its message

typedef struct {
    const char *path; // file name for messages
    char *err;
    size_t err_len;
} s_ctx_t;

static const char *s_type_name(const json_t *v) {
    switch (json_typeof(v)) {
    case JSON_OBJECT: return "an object";
    case JSON_ARRAY: return "an array";
    case JSON_STRING: return "a string";
    case JSON_INTEGER: return "an integer";
    case JSON_REAL: return "a real number";
    case JSON_TRUE:
    case JSON_FALSE: return "a boolean";
    case JSON_NULL: return "null";
    }
    return "unknown";
}

// A key that is absent or null counts as missing (transformers writes null for unset values).
static json_t *s_lookup(json_t *obj, const char *key) {
    json_t *v = json_object_get(obj, key);
    return (v && !json_is_null(v)) ? v : NULL;
}

// The value of `key` (NULL when absent or null); absent and `required` sets *rc to an error
// naming '<prefix><key>'.
static json_t *s_lookup_required(const s_ctx_t *c, json_t *obj, const char *prefix,
                                 const char *key, int required, int *rc) {
    json_t *v = s_lookup(obj, key);
    if (!v && required) {
        *rc = rl_errf(c->err, c->err_len, RL_EINVAL, "%s: missing required key '%s%s'", c->path,
                      prefix, key);
    }
    return v;
}

// Integer in [lo, hi]; `prefix` qualifies nested keys ("rope_scaling.") for messages.
// Missing: error when required, else *out = def.
static int s_get_int(const s_ctx_t *c, json_t *obj, const char *prefix, const char *key,
                     int required, int def, long long lo, long long hi, int *out) {
    int rc = 0;
    json_t *v = s_lookup_required(c, obj, prefix, key, required, &rc);
    if (!v) {
        if (rc == 0) {
            *out = def;
        }
        return rc;
    }
    if (!json_is_integer(v)) {
        return rl_errf(c->err, c->err_len, RL_EINVAL, "%s: '%s%s' must be an integer, not %s",
                       c->path, prefix, key, s_type_name(v));
    }
    long long x = json_integer_value(v);
    if (x < lo || x > hi) {
        if (lo == 1 && x < 1) {
            return rl_errf(c->err, c->err_len, RL_EINVAL, "%s: '%s%s' must be positive, got %lld",
                           c->path, prefix, key, x);
        }
        return rl_errf(c->err, c->err_len, RL_EINVAL,
                       "%s: '%s%s' = %lld is out of range [%lld, %lld]", c->path, prefix, key, x,
                       lo, hi);
    }
    *out = (int)x;
    return 0;
}

// Number (integer or real: "rope_theta": 500000 and 500000.0 both occur) that must be > 0.
// Every such field ends up in a float somewhere (rms_norm_eps is stored as one, the rope and
// init values are cast in rl_layers / rl_model / rlctl init), so it must also be a positive
// float: past FLT_MAX it would become infinity, below the smallest subnormal 0.
static int s_get_pos_num(const s_ctx_t *c, json_t *obj, const char *prefix, const char *key,
                         int required, double def, double *out) {
    int rc = 0;
    json_t *v = s_lookup_required(c, obj, prefix, key, required, &rc);
    if (!v) {
        if (rc == 0) {
            *out = def;
        }
        return rc;
    }
    if (!json_is_number(v)) {
        return rl_errf(c->err, c->err_len, RL_EINVAL, "%s: '%s%s' must be a number, not %s",
                       c->path, prefix, key, s_type_name(v));
    }
    double x = json_number_value(v);
    if (!(x > 0.0)) {
        return rl_errf(c->err, c->err_len, RL_EINVAL, "%s: '%s%s' must be positive, got %g",
                       c->path, prefix, key, x);
    }
    if (x < FLT_TRUE_MIN || x > FLT_MAX) {
        return rl_errf(c->err, c->err_len, RL_EINVAL,
                       "%s: '%s%s' = %g does not fit a 32-bit float; allowed: a number in "
                       "[%g, %g]", c->path, prefix, key, x, (double)FLT_TRUE_MIN,
                       (double)FLT_MAX);
    }
    *out = x;
    return 0;
}

static int s_get_bool(const s_ctx_t *c, json_t *obj, const char *key, int def, int *out) {
    json_t *v = s_lookup(obj, key);
    if (!v) {
        *out = def;
        return 0;
    }
    if (!json_is_boolean(v)) {
        return rl_errf(c->err, c->err_len, RL_EINVAL, "%s: '%s' must be true or false, not %s",
                       c->path, key, s_type_name(v));
    }
    *out = json_is_true(v);
    return 0;
}

// String or missing (*out = NULL). borrowed; valid while obj lives.
static int s_get_str(const s_ctx_t *c, json_t *obj, const char *prefix, const char *key,
                     const char **out) {
    json_t *v = s_lookup(obj, key);
    *out = NULL;
    if (!v) {
        return 0;
    }
    if (!json_is_string(v)) {
        return rl_errf(c->err, c->err_len, RL_EINVAL, "%s: '%s%s' must be a string, not %s",
                       c->path, prefix, key, s_type_name(v));
    }
    *out = json_string_value(v);
    return 0;
}

// Appends token ids from an int or a list of ints to cfg->eos_token_ids, skipping duplicates.
static int s_add_eos(const s_ctx_t *c, json_t *v, int vocab_size, rl_hf_config_t *cfg) {
    if (!v || json_is_null(v)) {
        return 0;
    }
    size_t n = json_is_array(v) ? json_array_size(v) : 1;
    if (!json_is_array(v) && !json_is_integer(v)) {
        return rl_errf(c->err, c->err_len, RL_EINVAL,
                       "%s: 'eos_token_id' must be an integer or a list of integers, not %s",
                       c->path, s_type_name(v));
    }
    for (size_t i = 0; i < n; i++) {
        json_t *e = json_is_array(v) ? json_array_get(v, i) : v;
        if (!json_is_integer(e)) {
            return rl_errf(c->err, c->err_len, RL_EINVAL,
                           "%s: 'eos_token_id' entries must be integers, not %s", c->path,
                           s_type_name(e));
        }
        long long id = json_integer_value(e);
        if (id < 0 || id >= vocab_size) {
            return rl_errf(c->err, c->err_len, RL_EINVAL,
                           "%s: 'eos_token_id' %lld is outside the vocabulary [0, %d)", c->path,
                           id, vocab_size);
        }
        int dup = 0;
        for (int k = 0; k < cfg->n_eos; k++) {
            dup |= cfg->eos_token_ids[k] == (int)id;
        }
        if (dup) {
            continue;
        }
        if (cfg->n_eos == RL_HF_MAX_EOS) {
            return rl_errf(c->err, c->err_len, RL_EINVAL,
                           "%s: more than %d distinct eos token ids", c->path, RL_HF_MAX_EOS);
        }
        cfg->eos_token_ids[cfg->n_eos++] = (int)id;
    }
    return 0;
}

// ---------------------------------------------------------------------------------------------
// rope: legacy `rope_theta` + `rope_scaling`, or transformers v5 `rope_parameters` (which may
// carry rope_theta and the type inside). Both spellings of the type key ("rope_type" and the
// older "type") are accepted.

static int s_parse_rope(const s_ctx_t *c, json_t *root, rl_hf_config_t *cfg) {
    json_t *params = s_lookup(root, "rope_parameters");
    json_t *scaling = s_lookup(root, "rope_scaling");
    const char *pkey = "rope_parameters";
    if (params && !json_is_object(params)) {
        return rl_errf(c->err, c->err_len, RL_EINVAL,
                       "%s: 'rope_parameters' must be an object, not %s", c->path,
                       s_type_name(params));
    }
    if (scaling && !json_is_object(scaling)) {
        return rl_errf(c->err, c->err_len, RL_EINVAL,
                       "%s: 'rope_scaling' must be an object or null, not %s", c->path,
                       s_type_name(scaling));
    }
    json_t *rope = params;
    if (!rope) {
        rope = scaling;
        pkey = "rope_scaling";
    }
    char prefix[32];
    snprintf(prefix, sizeof prefix, "%s.", pkey);

    // theta: inside rope_parameters when present there, else top level; both must agree
    double top_theta = 0.0, in_theta = 0.0;
    int rc = s_get_pos_num(c, root, "", "rope_theta", 0, 0.0, &top_theta);
    if (rc == 0 && rope) {
        rc = s_get_pos_num(c, rope, prefix, "rope_theta", 0, 0.0, &in_theta);
    }
    if (rc) {
        return rc;
    }
    if (top_theta > 0.0 && in_theta > 0.0 && top_theta != in_theta) {
        return rl_errf(c->err, c->err_len, RL_EINVAL,
                       "%s: 'rope_theta' (%g) and '%srope_theta' (%g) disagree", c->path,
                       top_theta, prefix, in_theta);
    }
    cfg->rope_theta = in_theta > 0.0 ? in_theta : top_theta > 0.0 ? top_theta : 10000.0;

    cfg->rope_type = RL_ROPE_DEFAULT;
    if (!rope) {
        return 0;
    }
    const char *type = NULL, *legacy = NULL;
    if ((rc = s_get_str(c, rope, prefix, "rope_type", &type)) ||
        (rc = s_get_str(c, rope, prefix, "type", &legacy))) {
        return rc;
    }
    if (type && legacy && strcmp(type, legacy) != 0) {
        return rl_errf(c->err, c->err_len, RL_EINVAL,
                       "%s: '%srope_type' ('%s') and '%stype' ('%s') disagree", c->path, prefix,
                       type, prefix, legacy);
    }
    if (!type) {
        type = legacy ? legacy : "default";
    }
    if (strcmp(type, "default") == 0) {
        return 0;
    }
    if (strcmp(type, "llama3") != 0) {
        return rl_errf(c->err, c->err_len, RL_EUNSUPPORTED,
                       "%s: '%srope_type': rope type '%s' is not supported (default, llama3)",
                       c->path, prefix, type);
    }
    cfg->rope_type = RL_ROPE_LLAMA3;
    if ((rc = s_get_pos_num(c, rope, prefix, "factor", 1, 0.0, &cfg->rope_factor)) ||
        (rc = s_get_pos_num(c, rope, prefix, "low_freq_factor", 1, 0.0,
                            &cfg->rope_low_freq_factor)) ||
        (rc = s_get_pos_num(c, rope, prefix, "high_freq_factor", 1, 0.0,
                            &cfg->rope_high_freq_factor)) ||
        (rc = s_get_int(c, rope, prefix, "original_max_position_embeddings", 1, 0, 1, S_MAX_SIZE,
                        &cfg->rope_original_max_position_embeddings))) {
        return rc;
    }
    // llama3 smoothing divides by (high - low): equal factors would divide by zero
    if (!(cfg->rope_high_freq_factor > cfg->rope_low_freq_factor)) {
        return rl_errf(c->err, c->err_len, RL_EINVAL,
                       "%s: '%shigh_freq_factor' (%g) must exceed 'low_freq_factor' (%g)", c->path,
                       prefix, cfg->rope_high_freq_factor, cfg->rope_low_freq_factor);
    }
    return 0;
}

// ---------------------------------------------------------------------------------------------
// config.json

// rl_hf_param_count in double: the same terms, no overflow for any sizes in range.
static double s_param_count_f(const rl_hf_config_t *cfg) {
    const double C = cfg->hidden_size, I = cfg->intermediate_size, V = cfg->vocab_size;
    const double D = cfg->head_dim, QD = cfg->num_attention_heads * D;
    const double KVD = cfg->num_key_value_heads * D;
    double layer = 2 * C + QD * C + 2 * KVD * C + C * QD +
                   (cfg->attention_bias ? QD + 2 * KVD : 0) + (cfg->o_bias ? C : 0) +
                   (cfg->qk_norm ? 2 * D : 0) + 3 * I * C + (cfg->mlp_bias ? 2 * I + C : 0);
    return V * C + cfg->num_hidden_layers * layer + C + (cfg->tie_word_embeddings ? 0 : V * C);
}

static int s_parse_root(const s_ctx_t *c, json_t *root, rl_hf_config_t *cfg) {
    int rc;
    if (!json_is_object(root)) {
        return rl_errf(c->err, c->err_len, RL_EINVAL, "%s: expected a JSON object, not %s",
                       c->path, s_type_name(root));
    }
    const char *mt = NULL;
    if ((rc = s_get_str(c, root, "", "model_type", &mt))) {
        return rc;
    }
    if (!mt) {
        return rl_errf(c->err, c->err_len, RL_EINVAL, "%s: missing required key 'model_type'",
                       c->path);
    }
    if (strcmp(mt, "llama") == 0) {
        cfg->arch = RL_ARCH_LLAMA;
    } else if (strcmp(mt, "qwen2") == 0) {
        cfg->arch = RL_ARCH_QWEN2;
    } else if (strcmp(mt, "qwen3") == 0) {
        cfg->arch = RL_ARCH_QWEN3;
    } else {
        return rl_errf(c->err, c->err_len, RL_EUNSUPPORTED,
                       "%s: model_type '%s' is not supported (llama, qwen2, qwen3)", c->path, mt);
    }

    // the five sizes that transformers would silently default to a 7B shape: required here
    if ((rc = s_get_int(c, root, "", "hidden_size", 1, 0, 1, S_MAX_SIZE, &cfg->hidden_size)) ||
        (rc = s_get_int(c, root, "", "intermediate_size", 1, 0, 1, S_MAX_SIZE,
                        &cfg->intermediate_size)) ||
        (rc = s_get_int(c, root, "", "num_hidden_layers", 1, 0, 1, 100000,
                        &cfg->num_hidden_layers)) ||
        (rc = s_get_int(c, root, "", "num_attention_heads", 1, 0, 1, 65536,
                        &cfg->num_attention_heads)) ||
        (rc = s_get_int(c, root, "", "vocab_size", 1, 0, 1, S_MAX_SIZE, &cfg->vocab_size))) {
        return rc;
    }
    if ((rc = s_get_int(c, root, "", "num_key_value_heads", 0, cfg->num_attention_heads, 1,
                        65536, &cfg->num_key_value_heads))) {
        return rc;
    }
    if (cfg->num_attention_heads % cfg->num_key_value_heads != 0) {
        return rl_errf(c->err, c->err_len, RL_EINVAL,
                       "%s: 'num_attention_heads' (%d) is not a multiple of "
                       "'num_key_value_heads' (%d)",
                       c->path, cfg->num_attention_heads, cfg->num_key_value_heads);
    }

    // head_dim: Qwen3Config defaults it to 128 whatever hidden/heads is; Llama and Qwen2 derive
    // it from hidden_size / num_attention_heads, which must then divide exactly.
    int NH = cfg->num_attention_heads;
    if (s_lookup(root, "head_dim") || cfg->arch == RL_ARCH_QWEN3) {
        if ((rc = s_get_int(c, root, "", "head_dim", 0, 128, 1, 65536, &cfg->head_dim))) {
            return rc;
        }
    } else {
        if (cfg->hidden_size % NH != 0) {
            return rl_errf(c->err, c->err_len, RL_EINVAL,
                           "%s: 'hidden_size' (%d) is not a multiple of 'num_attention_heads' "
                           "(%d) and 'head_dim' is not given",
                           c->path, cfg->hidden_size, NH);
        }
        cfg->head_dim = cfg->hidden_size / NH;
    }
    if (cfg->head_dim % 2 != 0) {
        // rotate_half pairs i with i + D/2
        return rl_errf(c->err, c->err_len, RL_EINVAL, "%s: 'head_dim' (%d) must be even for RoPE",
                       c->path, cfg->head_dim);
    }
    if ((long long)NH * cfg->head_dim > S_MAX_SIZE) {
        return rl_errf(c->err, c->err_len, RL_EINVAL,
                       "%s: 'num_attention_heads' * 'head_dim' (%lld) is too large", c->path,
                       (long long)NH * cfg->head_dim);
    }

    int def_max_pos = cfg->arch == RL_ARCH_LLAMA ? 2048 : 32768;
    if ((rc = s_get_int(c, root, "", "max_position_embeddings", 0, def_max_pos, 1, 1 << 30,
                        &cfg->max_position_embeddings))) {
        return rc;
    }
    double eps = 0.0;
    if ((rc = s_get_pos_num(c, root, "", "rms_norm_eps", 0, 1e-6, &eps)) ||
        (rc = s_get_pos_num(c, root, "", "initializer_range", 0, 0.02,
                            &cfg->initializer_range))) {
        return rc;
    }
    cfg->rms_norm_eps = (float)eps;

    const char *act = NULL;
    if ((rc = s_get_str(c, root, "", "hidden_act", &act))) {
        return rc;
    }
    if (act && strcmp(act, "silu") != 0) {
        return rl_errf(c->err, c->err_len, RL_EUNSUPPORTED,
                       "%s: hidden_act '%s' is not supported (silu)", c->path, act);
    }
    if (cfg->arch == RL_ARCH_QWEN2) {
        int sw = 0;
        if ((rc = s_get_bool(c, root, "use_sliding_window", 0, &sw))) {
            return rc;
        }
        if (sw) {
            return rl_errf(c->err, c->err_len, RL_EUNSUPPORTED,
                           "%s: 'use_sliding_window': true is not supported", c->path);
        }
    }

    if ((rc = s_parse_rope(c, root, cfg))) {
        return rc;
    }

    // transformers: LlamaConfig, Qwen2Config and Qwen3Config all default tie_word_embeddings
    // to false; the small Qwen checkpoints set it to true explicitly.
    if ((rc = s_get_bool(c, root, "tie_word_embeddings", 0, &cfg->tie_word_embeddings))) {
        return rc;
    }
    int attn_bias = 0, mlp_bias = 0;
    if ((rc = s_get_bool(c, root, "attention_bias", 0, &attn_bias)) ||
        (rc = s_get_bool(c, root, "mlp_bias", 0, &mlp_bias))) {
        return rc;
    }
    switch (cfg->arch) {
    case RL_ARCH_LLAMA: // q/k/v and o all follow attention_bias; the MLP follows mlp_bias
        cfg->attention_bias = attn_bias;
        cfg->o_bias = attn_bias;
        cfg->mlp_bias = mlp_bias;
        break;
    case RL_ARCH_QWEN2: // Qwen2Attention hard-codes bias=True on q/k/v and False on o
        cfg->attention_bias = 1;
        cfg->o_bias = 0;
        cfg->mlp_bias = 0;
        break;
    case RL_ARCH_QWEN3: // like llama's attention; Qwen3MLP has no bias
        cfg->attention_bias = attn_bias;
        cfg->o_bias = attn_bias;
        cfg->mlp_bias = 0;
        cfg->qk_norm = 1;
        break;
    }

    // "dtype" is the transformers v5 spelling of "torch_dtype"
    const char *dt = NULL, *tdt = NULL;
    if ((rc = s_get_str(c, root, "", "dtype", &dt)) ||
        (rc = s_get_str(c, root, "", "torch_dtype", &tdt))) {
        return rc;
    }
    if (!dt) {
        dt = tdt;
    }
    if (dt) {
        if (strcmp(dt, "float32") != 0 && strcmp(dt, "bfloat16") != 0 &&
            strcmp(dt, "float16") != 0) {
            return rl_errf(c->err, c->err_len, RL_EUNSUPPORTED,
                           "%s: dtype '%s' is not supported (float32, bfloat16, float16)",
                           c->path, dt);
        }
        snprintf(cfg->torch_dtype, sizeof cfg->torch_dtype, "%s", dt);
    }

    // each size is in range, but their products may not be: the parameter count (in double,
    // exact far past the bound) must fit RL_HF_MAX_PARAMS, so that rl_hf_param_count's int64
    // and every tensor's byte count (size_t) cannot overflow
    double np = s_param_count_f(cfg);
    if (np > (double)RL_HF_MAX_PARAMS) {
        return rl_errf(c->err, c->err_len, RL_EINVAL,
                       "%s: the sizes give %.3g parameters (vocab_size %d, hidden_size %d, "
                       "intermediate_size %d, num_hidden_layers %d, num_attention_heads %d x "
                       "head_dim %d), more than rlctl handles (%.3g)",
                       c->path, np, cfg->vocab_size, cfg->hidden_size, cfg->intermediate_size,
                       cfg->num_hidden_layers, cfg->num_attention_heads, cfg->head_dim,
                       (double)RL_HF_MAX_PARAMS);
    }
    if ((rc = s_get_int(c, root, "", "bos_token_id", 0, -1, 0, cfg->vocab_size - 1,
                        &cfg->bos_token_id))) {
        return rc;
    }
    return s_add_eos(c, json_object_get(root, "eos_token_id"), cfg->vocab_size, cfg);
}

static json_t *s_load_json(const s_ctx_t *c, const char *text, size_t len, int *rc) {
    json_error_t je;
    json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
    if (!root) {
        *rc = rl_errf(c->err, c->err_len, RL_EINVAL, "%s:%d:%d: %s", c->path, je.line,
                      je.column, je.text);
    }
    return root;
}

int rl_hf_config_parse(const char *json, size_t len, const char *path, rl_hf_config_t *out,
                       char *err, size_t err_len) {
    RL_ASSERT(json && out);
    s_ctx_t c = {path ? path : "config.json", err, err_len};
    memset(out, 0, sizeof *out);
    int rc = 0;
    json_t *root = s_load_json(&c, json, len, &rc);
    if (!root) {
        return rc;
    }
    rl_hf_config_t cfg;
    memset(&cfg, 0, sizeof cfg);
    rc = s_parse_root(&c, root, &cfg);
    json_decref(root);
    if (rc == 0) {
        *out = cfg;
    }
    return rc;
}

// Reads a whole file; RL_ENOTFOUND when it does not exist. caller owns *out; free with free().
static int s_read_file(const char *path, char **out, size_t *len, char *err, size_t err_len) {
    *out = NULL;
    FILE *f = fopen(path, "rb");
    if (!f) {
        int e = errno;
        return rl_errf(err, err_len, e == ENOENT ? RL_ENOTFOUND : e, "%s: %s", path, strerror(e));
    }
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    int rc = 0;
    while (buf) {
        if (n == cap) {
            char *nb = realloc(buf, cap * 2);
            if (!nb) {
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
    if (!buf || (n == cap && !feof(f))) {
        rc = rl_errf(err, err_len, RL_ENOMEM, "%s: out of memory", path);
    } else if (ferror(f)) {
        rc = rl_errf(err, err_len, RL_EIO, "%s: read error", path);
    }
    fclose(f);
    if (rc) {
        free(buf);
        return rc;
    }
    *out = buf;
    *len = n;
    return 0;
}

int rl_hf_config_load_file(const char *path, rl_hf_config_t *out, char *err, size_t err_len) {
    RL_ASSERT(path && out);
    char *text = NULL;
    size_t len = 0;
    memset(out, 0, sizeof *out);
    int rc = s_read_file(path, &text, &len, err, err_len);
    if (rc) {
        return rc;
    }
    rc = rl_hf_config_parse(text, len, path, out, err, err_len);
    free(text);
    return rc;
}

int rl_hf_config_load(const char *dir, rl_hf_config_t *out, char *err, size_t err_len) {
    RL_ASSERT(dir && out);
    char path[4096];
    char *text = NULL;
    size_t len = 0;
    memset(out, 0, sizeof *out);
    snprintf(path, sizeof path, "%s/config.json", dir);
    rl_hf_config_t cfg;
    int rc = rl_hf_config_load_file(path, &cfg, err, err_len);
    if (rc) {
        return rc;
    }

    // generation_config.json's eos ids are the ones generate() stops on (Llama-3-8B-Instruct
    // lists <|eot_id|> only there), so they join the config's.
    snprintf(path, sizeof path, "%s/generation_config.json", dir);
    rc = s_read_file(path, &text, &len, err, err_len);
    if (rc == RL_ENOTFOUND) {
        *out = cfg;
        return 0;
    }
    if (rc) {
        return rc;
    }
    s_ctx_t c = {path, err, err_len};
    json_t *root = s_load_json(&c, text, len, &rc);
    free(text);
    if (!root) {
        return rc;
    }
    if (!json_is_object(root)) {
        rc = rl_errf(err, err_len, RL_EINVAL, "%s: expected a JSON object, not %s", path,
                     s_type_name(root));
    } else {
        rc = s_add_eos(&c, json_object_get(root, "eos_token_id"), cfg.vocab_size, &cfg);
    }
    json_decref(root);
    if (rc == 0) {
        *out = cfg;
    }
    return rc;
}

// ---------------------------------------------------------------------------------------------
// serialisation

// jansson prints every real with one precision for the whole document; we pick the smallest
// that reproduces every real we wrote, so 1e-06 prints as 1e-06 and round trips stay exact.
typedef struct {
    int precision;
} s_dump_t;

static int s_shortest_digits(double x) {
    char buf[40];
    for (int p = 1; p < 17; p++) {
        snprintf(buf, sizeof buf, "%.*g", p, x);
        if (strtod(buf, NULL) == x) {
            return p;
        }
    }
    return 17;
}

static json_t *s_real(s_dump_t *d, double x) {
    int p = s_shortest_digits(x);
    // whole numbers print in full ("rope_theta": 10000.0, not 1e4), as transformers writes them
    double a = x < 0 ? -x : x;
    if (a < 1e16 && a == (double)(int64_t)a) {
        int digits = 1;
        for (; a >= 10.0; a /= 10.0) {
            digits++;
        }
        p = digits > p ? digits : p;
    }
    d->precision = p > d->precision ? p : d->precision;
    return json_real(x);
}

// A float field as the double of its shortest decimal, so 1e-6f is written 1e-06, not
// 9.99999997e-07; (float) of that double gives the same float back.
static json_t *s_real_f32(s_dump_t *d, float x) {
    char buf[40];
    for (int p = 1; p <= 9; p++) {
        snprintf(buf, sizeof buf, "%.*g", p, (double)x);
        if (strtof(buf, NULL) == x) {
            break;
        }
    }
    return s_real(d, strtod(buf, NULL));
}

static int s_set(json_t *obj, const char *key, json_t *v) {
    return v ? json_object_set_new(obj, key, v) : -1;
}

char *rl_hf_config_to_json(const rl_hf_config_t *cfg) {
    return rl_hf_config_to_json_seq_cls(cfg, -2);
}

char *rl_hf_config_to_json_seq_cls(const rl_hf_config_t *cfg, int pad_token_id) {
    RL_ASSERT(cfg);
    static const char *arch_class[] = {"LlamaForCausalLM", "Qwen2ForCausalLM",
                                       "Qwen3ForCausalLM"};
    static const char *cls_class[] = {"LlamaForSequenceClassification",
                                      "Qwen2ForSequenceClassification",
                                      "Qwen3ForSequenceClassification"};
    RL_ASSERT(cfg->arch >= RL_ARCH_LLAMA && cfg->arch <= RL_ARCH_QWEN3);
    const int seq_cls = pad_token_id != -2;
    s_dump_t d = {1};
    json_t *o = json_object();
    json_t *archs = json_array();
    json_t *rope = NULL, *eos = NULL;
    char *text = NULL;
    int bad = !o || !archs;
    bad = bad || json_array_append_new(archs, json_string(seq_cls ? cls_class[cfg->arch]
                                                                   : arch_class[cfg->arch])) != 0;
    bad = bad || s_set(o, "architectures", archs) != 0;
    if (seq_cls) { // one label, as transformers writes num_labels = 1
        json_t *id2label = json_object(), *label2id = json_object();
        bad = bad || !id2label || !label2id;
        bad = bad || s_set(id2label, "0", json_string("LABEL_0")) != 0;
        bad = bad || s_set(label2id, "LABEL_0", json_integer(0)) != 0;
        bad = bad || s_set(o, "id2label", id2label) != 0;
        bad = bad || s_set(o, "label2id", label2id) != 0;
        bad = bad || s_set(o, "pad_token_id",
                           pad_token_id >= 0 ? json_integer(pad_token_id) : json_null()) != 0;
    }
    archs = NULL; // owned by o (or freed by json_object_set_new on failure)
    bad = bad || s_set(o, "model_type", json_string(rl_hf_arch_name(cfg->arch))) != 0;
    bad = bad || s_set(o, "vocab_size", json_integer(cfg->vocab_size)) != 0;
    bad = bad || s_set(o, "hidden_size", json_integer(cfg->hidden_size)) != 0;
    bad = bad || s_set(o, "intermediate_size", json_integer(cfg->intermediate_size)) != 0;
    bad = bad || s_set(o, "num_hidden_layers", json_integer(cfg->num_hidden_layers)) != 0;
    bad = bad || s_set(o, "num_attention_heads", json_integer(cfg->num_attention_heads)) != 0;
    bad = bad || s_set(o, "num_key_value_heads", json_integer(cfg->num_key_value_heads)) != 0;
    bad = bad || s_set(o, "head_dim", json_integer(cfg->head_dim)) != 0;
    bad = bad || s_set(o, "hidden_act", json_string("silu")) != 0;
    bad = bad ||
          s_set(o, "max_position_embeddings", json_integer(cfg->max_position_embeddings)) != 0;
    bad = bad || s_set(o, "initializer_range", s_real(&d, cfg->initializer_range)) != 0;
    bad = bad || s_set(o, "rms_norm_eps", s_real_f32(&d, cfg->rms_norm_eps)) != 0;
    bad = bad || s_set(o, "rope_theta", s_real(&d, cfg->rope_theta)) != 0;
    if (cfg->rope_type == RL_ROPE_LLAMA3) {
        rope = json_object();
        bad = bad || !rope;
        bad = bad || s_set(rope, "rope_type", json_string("llama3")) != 0;
        bad = bad || s_set(rope, "factor", s_real(&d, cfg->rope_factor)) != 0;
        bad = bad || s_set(rope, "low_freq_factor", s_real(&d, cfg->rope_low_freq_factor)) != 0;
        bad = bad ||
              s_set(rope, "high_freq_factor", s_real(&d, cfg->rope_high_freq_factor)) != 0;
        bad = bad || s_set(rope, "original_max_position_embeddings",
                           json_integer(cfg->rope_original_max_position_embeddings)) != 0;
        bad = bad || s_set(o, "rope_scaling", rope) != 0;
    } else {
        bad = bad || s_set(o, "rope_scaling", json_null()) != 0;
    }
    if (cfg->arch != RL_ARCH_QWEN2) { // Qwen2 ignores attention_bias; writing it would mislead
        bad = bad || s_set(o, "attention_bias", json_boolean(cfg->attention_bias)) != 0;
    } else {
        bad = bad || s_set(o, "use_sliding_window", json_false()) != 0;
    }
    if (cfg->arch == RL_ARCH_LLAMA) {
        bad = bad || s_set(o, "mlp_bias", json_boolean(cfg->mlp_bias)) != 0;
    }
    bad = bad || s_set(o, "tie_word_embeddings", json_boolean(cfg->tie_word_embeddings)) != 0;
    if (cfg->torch_dtype[0]) {
        bad = bad || s_set(o, "torch_dtype", json_string(cfg->torch_dtype)) != 0;
    }
    if (cfg->bos_token_id >= 0) {
        bad = bad || s_set(o, "bos_token_id", json_integer(cfg->bos_token_id)) != 0;
    }
    if (cfg->n_eos == 1) {
        bad = bad || s_set(o, "eos_token_id", json_integer(cfg->eos_token_ids[0])) != 0;
    } else if (cfg->n_eos > 1) {
        eos = json_array();
        bad = bad || !eos;
        for (int i = 0; !bad && i < cfg->n_eos; i++) {
            bad = json_array_append_new(eos, json_integer(cfg->eos_token_ids[i])) != 0;
        }
        bad = bad || s_set(o, "eos_token_id", eos) != 0;
    }
    if (!bad) {
        text = json_dumps(o, JSON_INDENT(2) | JSON_REAL_PRECISION(d.precision));
    }
    json_decref(o);
    return text;
}

// ---------------------------------------------------------------------------------------------
// tensor list

typedef struct {
    rl_hf_tensor_spec_t *out;
    int cap;
    int n;
} s_specs_t;

static void s_spec(s_specs_t *s, const char *name, int64_t d0, int64_t d1) {
    if (s->out && s->n < s->cap) {
        rl_hf_tensor_spec_t *t = &s->out[s->n];
        snprintf(t->name, sizeof t->name, "%s", name);
        t->ndim = d1 > 0 ? 2 : 1;
        t->shape[0] = d0;
        t->shape[1] = d1 > 0 ? d1 : 0;
    }
    s->n++;
}

// "model.layers.<l>.<suffix>"; d1 == 0 for a vector
static void s_layer_spec(s_specs_t *s, int l, const char *suffix, int64_t d0, int64_t d1) {
    char name[96];
    snprintf(name, sizeof name, "model.layers.%d.%s", l, suffix);
    s_spec(s, name, d0, d1);
}

int rl_hf_tensor_specs(const rl_hf_config_t *cfg, rl_hf_tensor_spec_t *out, int cap) {
    RL_ASSERT(cfg);
    s_specs_t s = {out, cap, 0};
    const int64_t C = cfg->hidden_size, I = cfg->intermediate_size, V = cfg->vocab_size;
    const int64_t D = cfg->head_dim, QD = cfg->num_attention_heads * D;
    const int64_t KVD = cfg->num_key_value_heads * D;

    s_spec(&s, "model.embed_tokens.weight", V, C);
    for (int l = 0; l < cfg->num_hidden_layers; l++) {
        s_layer_spec(&s, l, "input_layernorm.weight", C, 0);
        s_layer_spec(&s, l, "self_attn.q_proj.weight", QD, C);
        if (cfg->attention_bias) {
            s_layer_spec(&s, l, "self_attn.q_proj.bias", QD, 0);
        }
        s_layer_spec(&s, l, "self_attn.k_proj.weight", KVD, C);
        if (cfg->attention_bias) {
            s_layer_spec(&s, l, "self_attn.k_proj.bias", KVD, 0);
        }
        s_layer_spec(&s, l, "self_attn.v_proj.weight", KVD, C);
        if (cfg->attention_bias) {
            s_layer_spec(&s, l, "self_attn.v_proj.bias", KVD, 0);
        }
        s_layer_spec(&s, l, "self_attn.o_proj.weight", C, QD);
        if (cfg->o_bias) {
            s_layer_spec(&s, l, "self_attn.o_proj.bias", C, 0);
        }
        if (cfg->qk_norm) { // one [D] weight shared by every head
            s_layer_spec(&s, l, "self_attn.q_norm.weight", D, 0);
            s_layer_spec(&s, l, "self_attn.k_norm.weight", D, 0);
        }
        s_layer_spec(&s, l, "post_attention_layernorm.weight", C, 0);
        s_layer_spec(&s, l, "mlp.gate_proj.weight", I, C);
        if (cfg->mlp_bias) {
            s_layer_spec(&s, l, "mlp.gate_proj.bias", I, 0);
        }
        s_layer_spec(&s, l, "mlp.up_proj.weight", I, C);
        if (cfg->mlp_bias) {
            s_layer_spec(&s, l, "mlp.up_proj.bias", I, 0);
        }
        s_layer_spec(&s, l, "mlp.down_proj.weight", C, I);
        if (cfg->mlp_bias) {
            s_layer_spec(&s, l, "mlp.down_proj.bias", C, 0);
        }
    }
    s_spec(&s, "model.norm.weight", C, 0);
    if (!cfg->tie_word_embeddings) {
        s_spec(&s, "lm_head.weight", V, C);
    }
    return s.n;
}

int64_t rl_hf_param_count(const rl_hf_config_t *cfg) {
    RL_ASSERT(cfg);
    const int64_t C = cfg->hidden_size, I = cfg->intermediate_size, V = cfg->vocab_size;
    const int64_t D = cfg->head_dim, QD = cfg->num_attention_heads * D;
    const int64_t KVD = cfg->num_key_value_heads * D;
    int64_t layer = 2 * C                                      // the two RMSNorms
                    + QD * C + 2 * KVD * C + C * QD            // q, k, v, o
                    + (cfg->attention_bias ? QD + 2 * KVD : 0) //
                    + (cfg->o_bias ? C : 0)                    //
                    + (cfg->qk_norm ? 2 * D : 0)               //
                    + 3 * I * C                                // gate, up, down
                    + (cfg->mlp_bias ? 2 * I + C : 0);
    return V * C + cfg->num_hidden_layers * layer + C + (cfg->tie_word_embeddings ? 0 : V * C);
}

// ---------------------------------------------------------------------------------------------
// weights against the config

static int s_cmp_str(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static int s_ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

// Appends ", name" (or "name" first) to a list buffer, counting all and naming S_LIST_MAX.
static void s_list_add(char *buf, size_t cap, int *count, const char *name) {
    if (*count < S_LIST_MAX) {
        size_t n = strlen(buf);
        snprintf(buf + n, cap - n, "%s%s", *count ? ", " : "", name);
    }
    (*count)++;
}

static void s_shape_str(char *buf, size_t cap, int ndim, const int64_t *shape) {
    size_t n = (size_t)snprintf(buf, cap, "[");
    for (int i = 0; i < ndim && n < cap; i++) {
        n += (size_t)snprintf(buf + n, cap - n, "%s%lld", i ? ", " : "", (long long)shape[i]);
    }
    if (n < cap) {
        snprintf(buf + n, cap - n, "]");
    }
}

int rl_hf_check_weights(const rl_hf_config_t *cfg, const rl_st_model_t *model, char *err,
                        size_t err_len) {
    return rl_hf_check_weights_ex(cfg, model, 0, err, err_len);
}

int rl_hf_check_weights_ex(const rl_hf_config_t *cfg, const rl_st_model_t *model, int seq_cls,
                           char *err, size_t err_len) {
    RL_ASSERT(cfg && model);
    int n = rl_hf_tensor_specs(cfg, NULL, 0);
    rl_hf_tensor_spec_t *specs = malloc((size_t)(n + 1) * sizeof *specs);
    const char **names = malloc((size_t)(n + 1) * sizeof *names);
    int rc = 0;
    if (!specs || !names) {
        rc = rl_errf(err, err_len, RL_ENOMEM, "out of memory checking %d tensors", n);
        goto fail;
    }
    rl_hf_tensor_specs(cfg, specs, n);
    if (seq_cls && rl_st_model_find(model, "score.weight")) {
        // a sequence classifier's head, [num_labels = 1, C]; checked like the others
        snprintf(specs[n].name, sizeof specs[n].name, "score.weight");
        specs[n].ndim = 2;
        specs[n].shape[0] = 1;
        specs[n].shape[1] = cfg->hidden_size;
        n++;
    }

    char missing[512] = "", unexpected[512] = "", shapes[1024] = "", dtype_msg[256] = "";
    int n_missing = 0, n_unexpected = 0, n_shape = 0;
    for (int i = 0; i < n; i++) {
        names[i] = specs[i].name;
        const rl_st_tensor_t *t = rl_st_model_find(model, specs[i].name);
        if (!t && seq_cls && strcmp(specs[i].name, "lm_head.weight") == 0) {
            continue; // a sequence classifier has no vocabulary head
        }
        if (!t) {
            s_list_add(missing, sizeof missing, &n_missing, specs[i].name);
            continue;
        }
        if (t->dtype != RL_DTYPE_F32 && t->dtype != RL_DTYPE_F16 && t->dtype != RL_DTYPE_BF16 &&
            !dtype_msg[0]) {
            snprintf(dtype_msg, sizeof dtype_msg,
                     "tensor '%s': dtype %d is not supported (F32, F16, BF16)", t->name,
                     (int)t->dtype);
        }
        int same = t->ndim == specs[i].ndim;
        for (int k = 0; same && k < t->ndim; k++) {
            same = t->shape[k] == specs[i].shape[k];
        }
        if (!same) {
            char got[128], want[64], item[320];
            s_shape_str(got, sizeof got, t->ndim, t->shape);
            s_shape_str(want, sizeof want, specs[i].ndim, specs[i].shape);
            snprintf(item, sizeof item, "%s is %s, expected %s", specs[i].name, got, want);
            s_list_add(shapes, sizeof shapes, &n_shape, item);
        }
    }
    qsort(names, (size_t)n, sizeof *names, s_cmp_str);
    int total = rl_st_model_count(model);
    for (int i = 0; i < total; i++) {
        const rl_st_tensor_t *t = rl_st_model_tensor(model, i);
        // non-persistent RoPE buffers that some old conversions saved; not parameters
        if (s_ends_with(t->name, ".rotary_emb.inv_freq")) {
            continue;
        }
        if (!bsearch(&t->name, names, (size_t)n, sizeof *names, s_cmp_str)) {
            s_list_add(unexpected, sizeof unexpected, &n_unexpected, t->name);
        }
    }

    if (dtype_msg[0]) {
        rc = rl_errf(err, err_len, RL_EUNSUPPORTED, "%s", dtype_msg);
    } else if (n_missing || n_unexpected || n_shape) {
        char buf[2200] = "";
        size_t len = 0;
        if (n_missing) {
            len += (size_t)snprintf(buf + len, sizeof buf - len, "%d missing tensor%s (%s%s)",
                                    n_missing, n_missing == 1 ? "" : "s", missing,
                                    n_missing > S_LIST_MAX ? ", ..." : "");
        }
        if (n_unexpected && len < sizeof buf) {
            len += (size_t)snprintf(buf + len, sizeof buf - len,
                                    "%s%d unexpected tensor%s (%s%s)", len ? "; " : "",
                                    n_unexpected, n_unexpected == 1 ? "" : "s", unexpected,
                                    n_unexpected > S_LIST_MAX ? ", ..." : "");
        }
        if (n_shape && len < sizeof buf) {
            snprintf(buf + len, sizeof buf - len, "%s%d tensor%s with the wrong shape (%s%s)",
                     len ? "; " : "", n_shape, n_shape == 1 ? "" : "s", shapes,
                     n_shape > S_LIST_MAX ? ", ..." : "");
        }
        rc = rl_errf(err, err_len, RL_EINVAL, "weights do not match the %s config: %s",
                     rl_hf_arch_name(cfg->arch), buf);
    }
fail:
    free(specs);
    free(names);
    return rc;
}
