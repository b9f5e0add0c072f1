// tests for rl_hf: the public configs of Llama-3.2-1B, Qwen2.5-0.5B and Qwen3-0.6B (fields,
// published parameter counts, tensor lists), a transformers v5 rope_parameters config, every
// refusal (fixtures in tests/fixtures/hf/bad plus inline variants), config.json round trips,
// and rl_hf_check_weights against safetensors files written here.
#include "rl_err.h"
#include "rl_hf.h"
#include "rl_safetensors.h"
#include "rl_test.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define HF_FIXTURES RL_FIXTURES "/hf"

// Loads a fixture folder; on failure prints the message and returns rc.
static int s_load(const char *name, rl_hf_config_t *cfg) {
    char dir[1024], err[512] = "";
    snprintf(dir, sizeof dir, "%s/%s", HF_FIXTURES, name);
    int rc = rl_hf_config_load(dir, cfg, err, sizeof err);
    if (rc) {
        fprintf(stderr, "load %s: %s\n", name, err);
    }
    return rc;
}

static int s_parse(const char *json, rl_hf_config_t *cfg, char *err, size_t err_len) {
    return rl_hf_config_parse(json, strlen(json), "inline.json", cfg, err, err_len);
}

static const rl_hf_tensor_spec_t *s_find(const rl_hf_tensor_spec_t *specs, int n,
                                         const char *name) {
    for (int i = 0; i < n; i++) {
        if (strcmp(specs[i].name, name) == 0) {
            return &specs[i];
        }
    }
    return NULL;
}

// Shape of a named spec as "a,b" or "a" ("absent" when missing), for compact checks.
static const char *s_shape(const rl_hf_tensor_spec_t *specs, int n, const char *name) {
    static char buf[64];
    const rl_hf_tensor_spec_t *t = s_find(specs, n, name);
    if (!t) {
        return "absent";
    }
    if (t->ndim == 1) {
        snprintf(buf, sizeof buf, "%lld", (long long)t->shape[0]);
    } else {
        snprintf(buf, sizeof buf, "%lld,%lld", (long long)t->shape[0], (long long)t->shape[1]);
    }
    return buf;
}

// The sum of the specs' element counts must equal rl_hf_param_count: two independent
// derivations of the same architecture.
static void s_check_specs_sum(const rl_hf_config_t *cfg) {
    int n = rl_hf_tensor_specs(cfg, NULL, 0);
    rl_hf_tensor_spec_t *specs = calloc((size_t)n, sizeof *specs);
    RL_ASSERT(specs);
    CHECK_INT(rl_hf_tensor_specs(cfg, specs, n), n);
    int64_t sum = 0;
    for (int i = 0; i < n; i++) {
        sum += specs[i].ndim == 1 ? specs[i].shape[0] : specs[i].shape[0] * specs[i].shape[1];
    }
    CHECK_INT(sum, rl_hf_param_count(cfg));
    free(specs);
}

// to_json -> parse gives back the identical struct.
static void s_check_round_trip(const rl_hf_config_t *cfg) {
    char *text = rl_hf_config_to_json(cfg);
    CHECK(text != NULL);
    if (!text) {
        return;
    }
    rl_hf_config_t back;
    char err[512] = "";
    int rc = rl_hf_config_parse(text, strlen(text), "roundtrip.json", &back, err, sizeof err);
    CHECK_MSG(rc == 0, "%s\n%s", err, text);
    CHECK_MSG(memcmp(cfg, &back, sizeof back) == 0, "round trip differs:\n%s", text);
    free(text);
}

// ---------------------------------------------------------------------------------------------

static void s_test_llama(void) {
    rl_hf_config_t c;
    if (s_load("llama-3.2-1b", &c) != 0) {
        CHECK(0);
        return;
    }
    CHECK_INT(c.arch, RL_ARCH_LLAMA);
    CHECK_INT(c.hidden_size, 2048);
    CHECK_INT(c.intermediate_size, 8192);
    CHECK_INT(c.num_hidden_layers, 16);
    CHECK_INT(c.num_attention_heads, 32);
    CHECK_INT(c.num_key_value_heads, 8);
    CHECK_INT(c.head_dim, 64);
    CHECK_INT(c.vocab_size, 128256);
    CHECK_INT(c.max_position_embeddings, 131072);
    CHECK(c.rms_norm_eps == 1e-5f);
    CHECK(c.rope_theta == 500000.0);
    CHECK_INT(c.rope_type, RL_ROPE_LLAMA3);
    CHECK(c.rope_factor == 32.0 && c.rope_low_freq_factor == 1.0 &&
          c.rope_high_freq_factor == 4.0);
    CHECK_INT(c.rope_original_max_position_embeddings, 8192);
    CHECK_INT(c.tie_word_embeddings, 1);
    CHECK_INT(c.attention_bias, 0);
    CHECK_INT(c.o_bias, 0);
    CHECK_INT(c.mlp_bias, 0);
    CHECK_INT(c.qk_norm, 0);
    CHECK_STR(c.torch_dtype, "bfloat16");
    CHECK_INT(c.bos_token_id, 128000);
    CHECK_INT(c.n_eos, 1);
    CHECK_INT(c.eos_token_ids[0], 128001);
    CHECK(c.initializer_range == 0.02);
    // published: 1.24B; exact from the config: 128256*2048 + 16*60,821,504 + 2048
    CHECK_INT(rl_hf_param_count(&c), 1235814400LL);

    rl_hf_tensor_spec_t specs[160];
    int n = rl_hf_tensor_specs(&c, specs, 160);
    CHECK_INT(n, 1 + 16 * 9 + 1); // tied: no lm_head
    CHECK_STR(specs[0].name, "model.embed_tokens.weight");
    CHECK_STR(s_shape(specs, n, "model.embed_tokens.weight"), "128256,2048");
    CHECK_STR(s_shape(specs, n, "model.layers.0.input_layernorm.weight"), "2048");
    CHECK_STR(s_shape(specs, n, "model.layers.15.self_attn.q_proj.weight"), "2048,2048");
    CHECK_STR(s_shape(specs, n, "model.layers.15.self_attn.k_proj.weight"), "512,2048");
    CHECK_STR(s_shape(specs, n, "model.layers.3.mlp.down_proj.weight"), "2048,8192");
    CHECK_STR(s_shape(specs, n, "model.layers.0.self_attn.q_proj.bias"), "absent");
    CHECK_STR(s_shape(specs, n, "lm_head.weight"), "absent");
    CHECK_STR(specs[n - 1].name, "model.norm.weight");
    // cap bounds the writes but the count stays the full count
    CHECK_INT(rl_hf_tensor_specs(&c, specs, 3), n);
    s_check_specs_sum(&c);
    s_check_round_trip(&c);

    char *text = rl_hf_config_to_json(&c);
    CHECK_CONTAINS(text, "\"rms_norm_eps\": 1e-5");
    CHECK_CONTAINS(text, "\"rope_type\": \"llama3\"");
    CHECK_CONTAINS(text, "\"LlamaForCausalLM\"");
    free(text);
}

static void s_test_qwen2(void) {
    rl_hf_config_t c;
    if (s_load("qwen2.5-0.5b", &c) != 0) {
        CHECK(0);
        return;
    }
    CHECK_INT(c.arch, RL_ARCH_QWEN2);
    CHECK_INT(c.head_dim, 64); // 896 / 14, not given in the file
    CHECK_INT(c.num_key_value_heads, 2);
    CHECK_INT(c.attention_bias, 1); // no attention_bias key, yet q/k/v have biases
    CHECK_INT(c.o_bias, 0);
    CHECK_INT(c.rope_type, RL_ROPE_DEFAULT);
    CHECK(c.rope_theta == 1000000.0);
    CHECK(c.rms_norm_eps == 1e-6f);
    CHECK_INT(c.tie_word_embeddings, 1);
    CHECK_INT(c.n_eos, 1); // config and generation_config both say 151643: deduplicated
    CHECK_INT(c.eos_token_ids[0], 151643);
    CHECK_INT(rl_hf_param_count(&c), 494032768LL); // Qwen2.5-0.5B model card: 0.49B

    rl_hf_tensor_spec_t specs[300];
    int n = rl_hf_tensor_specs(&c, specs, 300);
    CHECK_INT(n, 1 + 24 * 12 + 1);
    CHECK_STR(s_shape(specs, n, "model.layers.0.self_attn.q_proj.bias"), "896");
    CHECK_STR(s_shape(specs, n, "model.layers.0.self_attn.k_proj.bias"), "128");
    CHECK_STR(s_shape(specs, n, "model.layers.23.self_attn.v_proj.bias"), "128");
    CHECK_STR(s_shape(specs, n, "model.layers.0.self_attn.o_proj.bias"), "absent");
    CHECK_STR(s_shape(specs, n, "model.layers.0.mlp.gate_proj.weight"), "4864,896");
    CHECK_STR(s_shape(specs, n, "lm_head.weight"), "absent");
    s_check_specs_sum(&c);
    s_check_round_trip(&c);

    // whatever attention_bias says, Qwen2 keeps q/k/v biases and no o bias
    rl_hf_config_t d;
    char err[512] = "";
    CHECK_INT(s_parse("{\"model_type\": \"qwen2\", \"hidden_size\": 64, \"intermediate_size\": 96,"
                      " \"num_hidden_layers\": 1, \"num_attention_heads\": 4, \"vocab_size\": 50,"
                      " \"attention_bias\": false, \"mlp_bias\": true}",
                      &d, err, sizeof err),
              0);
    CHECK_INT(d.attention_bias, 1);
    CHECK_INT(d.o_bias, 0);
    CHECK_INT(d.mlp_bias, 0);
    CHECK_INT(d.tie_word_embeddings, 0); // Qwen2Config default
    CHECK_INT(d.max_position_embeddings, 32768);
    CHECK_INT(d.num_key_value_heads, 4); // missing -> heads
    CHECK_INT(d.n_eos, 0);
    CHECK_INT(d.bos_token_id, -1);
    s_check_round_trip(&d);
}

static void s_test_qwen3(void) {
    rl_hf_config_t c;
    if (s_load("qwen3-0.6b", &c) != 0) {
        CHECK(0);
        return;
    }
    CHECK_INT(c.arch, RL_ARCH_QWEN3);
    CHECK_INT(c.head_dim, 128); // != 1024 / 16
    CHECK_INT(c.qk_norm, 1);
    CHECK_INT(c.attention_bias, 0);
    CHECK_INT(c.o_bias, 0);
    CHECK(c.rope_theta == 1000000.0); // written as an integer in the file
    CHECK_INT(c.rope_type, RL_ROPE_DEFAULT); // rope_scaling: null
    CHECK_INT(c.max_position_embeddings, 40960);
    // config says 151645 (<|im_end|>); generation_config adds 151643 (<|endoftext|>)
    CHECK_INT(c.n_eos, 2);
    CHECK_INT(c.eos_token_ids[0], 151645);
    CHECK_INT(c.eos_token_ids[1], 151643);
    CHECK_INT(rl_hf_param_count(&c), 596049920LL); // Qwen3-0.6B model card: 0.6B

    rl_hf_tensor_spec_t specs[400];
    int n = rl_hf_tensor_specs(&c, specs, 400);
    CHECK_INT(n, 1 + 28 * 11 + 1);
    CHECK_STR(s_shape(specs, n, "model.layers.0.self_attn.q_proj.weight"), "2048,1024");
    CHECK_STR(s_shape(specs, n, "model.layers.0.self_attn.k_proj.weight"), "1024,1024");
    CHECK_STR(s_shape(specs, n, "model.layers.0.self_attn.o_proj.weight"), "1024,2048");
    CHECK_STR(s_shape(specs, n, "model.layers.27.self_attn.q_norm.weight"), "128");
    CHECK_STR(s_shape(specs, n, "model.layers.27.self_attn.k_norm.weight"), "128");
    CHECK_STR(s_shape(specs, n, "model.layers.0.self_attn.q_proj.bias"), "absent");
    s_check_specs_sum(&c);
    s_check_round_trip(&c);

    // Qwen3Config defaults head_dim to 128 even when hidden/heads says otherwise;
    // attention_bias gives q/k/v and o biases as in llama
    rl_hf_config_t d;
    char err[512] = "";
    CHECK_INT(s_parse("{\"model_type\": \"qwen3\", \"hidden_size\": 64, \"intermediate_size\": 96,"
                      " \"num_hidden_layers\": 2, \"num_attention_heads\": 4,"
                      " \"num_key_value_heads\": 2, \"vocab_size\": 50, \"attention_bias\": true}",
                      &d, err, sizeof err),
              0);
    CHECK_INT(d.head_dim, 128);
    CHECK_INT(d.attention_bias, 1);
    CHECK_INT(d.o_bias, 1);
    CHECK_INT(d.mlp_bias, 0);
    n = rl_hf_tensor_specs(&d, specs, 400);
    CHECK_STR(s_shape(specs, n, "model.layers.1.self_attn.o_proj.bias"), "64");
    CHECK_STR(s_shape(specs, n, "model.layers.1.self_attn.q_proj.weight"), "512,64");
    CHECK_STR(s_shape(specs, n, "lm_head.weight"), "50,64"); // Qwen3Config: untied by default
    s_check_specs_sum(&d);
    s_check_round_trip(&d);
}

static void s_test_rope_parameters(void) {
    rl_hf_config_t c;
    if (s_load("rope-parameters", &c) != 0) {
        CHECK(0);
        return;
    }
    CHECK_INT(c.rope_type, RL_ROPE_LLAMA3);
    CHECK(c.rope_theta == 500000.0);
    CHECK(c.rope_factor == 8.0);
    CHECK_INT(c.rope_original_max_position_embeddings, 64);
    CHECK_STR(c.torch_dtype, "float32"); // from "dtype"
    CHECK_INT(c.num_key_value_heads, 4);
    CHECK_INT(c.head_dim, 16);
    CHECK_INT(c.n_eos, 2); // [2, 3, 2] deduplicated in order
    CHECK_INT(c.eos_token_ids[0], 2);
    CHECK_INT(c.eos_token_ids[1], 3);
    CHECK_INT(c.o_bias, 1); // llama attention_bias covers o_proj too
    CHECK_INT(c.mlp_bias, 1);
    CHECK_INT(c.tie_word_embeddings, 0);
    // by hand: per layer 2*64 + 4*64*64 + 3*64 + 64 + 3*160*64 + 2*160 + 64 = 47,872;
    // embed + lm_head 2*100*64, final norm 64
    CHECK_INT(rl_hf_param_count(&c), 12800 + 2 * 47872 + 64);
    rl_hf_tensor_spec_t specs[64];
    int n = rl_hf_tensor_specs(&c, specs, 64);
    CHECK_STR(s_shape(specs, n, "model.layers.1.mlp.down_proj.bias"), "64");
    CHECK_STR(s_shape(specs, n, "model.layers.1.mlp.up_proj.bias"), "160");
    CHECK_STR(s_shape(specs, n, "lm_head.weight"), "100,64");
    CHECK_STR(specs[n - 1].name, "lm_head.weight");
    s_check_specs_sum(&c);
    s_check_round_trip(&c);
}

// ---------------------------------------------------------------------------------------------
// refusals

static void s_expect_bad_file(const char *name, int want_rc, const char *want1,
                              const char *want2) {
    char path[1024], err[512] = "";
    snprintf(path, sizeof path, "%s/bad/%s", HF_FIXTURES, name);
    FILE *f = fopen(path, "rb");
    CHECK_MSG(f != NULL, "%s", path);
    if (!f) {
        return;
    }
    char buf[4096];
    size_t len = fread(buf, 1, sizeof buf, f);
    fclose(f);
    rl_hf_config_t c;
    memset(&c, 0x5a, sizeof c);
    int rc = rl_hf_config_parse(buf, len, path, &c, err, sizeof err);
    fprintf(stderr, "  refused as expected: %s\n", err);
    CHECK_MSG(rc == want_rc, "%s: rc %d (%s), want %d", name, rc, err, want_rc);
    CHECK_CONTAINS(err, name); // the message names the file
    CHECK_CONTAINS(err, want1);
    if (want2) {
        CHECK_CONTAINS(err, want2);
    }
    CHECK_INT(c.hidden_size, 0); // *out is cleared on failure, never half-filled
}

static void s_expect_bad(const char *json, int want_rc, const char *want) {
    rl_hf_config_t c;
    char err[512] = "";
    int rc = s_parse(json, &c, err, sizeof err);
    CHECK_MSG(rc == want_rc, "rc %d (%s), want %d for %s", rc, err, want_rc, json);
    CHECK_CONTAINS(err, "inline.json");
    CHECK_CONTAINS(err, want);
}

#define BASE                                                                                  \
    "\"model_type\": \"llama\", \"hidden_size\": 64, \"intermediate_size\": 128,"             \
    " \"num_hidden_layers\": 1, \"num_attention_heads\": 4, \"num_key_value_heads\": 2,"      \
    " \"vocab_size\": 100"

static void s_test_refusals(void) {
    s_expect_bad_file("unknown-model-type.json", RL_EUNSUPPORTED,
                      "model_type 'mistral' is not supported (llama, qwen2, qwen3)", NULL);
    s_expect_bad_file("unknown-rope-type.json", RL_EUNSUPPORTED,
                      "rope type 'yarn' is not supported (default, llama3)", "rope_scaling");
    s_expect_bad_file("missing-hidden-size.json", RL_EINVAL, "missing required key 'hidden_size'",
                      NULL);
    s_expect_bad_file("wrong-type.json", RL_EINVAL,
                      "'hidden_size' must be an integer, not a string", NULL);
    s_expect_bad_file("heads-not-dividing.json", RL_EINVAL, "'num_attention_heads' (4)",
                      "'num_key_value_heads' (3)");
    s_expect_bad_file("duplicate-key.json", RL_EINVAL, "duplicate object key", NULL);
    s_expect_bad_file("hidden-not-divisible.json", RL_EINVAL, "'hidden_size' (66)", "head_dim");
    s_expect_bad_file("zero-vocab.json", RL_EINVAL, "'vocab_size' must be positive, got 0", NULL);

    s_expect_bad("{" BASE ", \"rope_scaling\": {\"type\": \"linear\", \"factor\": 2.0}}",
                 RL_EUNSUPPORTED, "rope type 'linear' is not supported (default, llama3)");
    s_expect_bad("{" BASE ", \"rope_parameters\": {\"rope_type\": \"yarn\", \"factor\": 4.0}}",
                 RL_EUNSUPPORTED, "'rope_parameters.rope_type'");
    s_expect_bad("{" BASE ", \"rope_scaling\": \"llama3\"}", RL_EINVAL,
                 "'rope_scaling' must be an object or null, not a string");
    s_expect_bad("{" BASE ", \"rope_scaling\": {\"rope_type\": \"llama3\", \"factor\": 8.0,"
                 " \"low_freq_factor\": 1.0, \"original_max_position_embeddings\": 8192}}",
                 RL_EINVAL, "missing required key 'rope_scaling.high_freq_factor'");
    s_expect_bad("{" BASE ", \"rope_scaling\": {\"rope_type\": \"llama3\", \"factor\": 8.0,"
                 " \"low_freq_factor\": 4.0, \"high_freq_factor\": 4.0,"
                 " \"original_max_position_embeddings\": 8192}}",
                 RL_EINVAL, "must exceed");
    s_expect_bad("{" BASE ", \"rope_theta\": 10000.0,"
                 " \"rope_parameters\": {\"rope_type\": \"default\", \"rope_theta\": 500000.0}}",
                 RL_EINVAL, "disagree");
    s_expect_bad("{" BASE ", \"rope_theta\": -1}", RL_EINVAL, "'rope_theta' must be positive");
    s_expect_bad("{" BASE ", \"rope_theta\": \"1e4\"}", RL_EINVAL,
                 "'rope_theta' must be a number, not a string");
    s_expect_bad("{" BASE ", \"tie_word_embeddings\": 1}", RL_EINVAL,
                 "'tie_word_embeddings' must be true or false, not an integer");
    s_expect_bad("{" BASE ", \"eos_token_id\": [1, \"2\"]}", RL_EINVAL,
                 "'eos_token_id' entries must be integers");
    s_expect_bad("{" BASE ", \"eos_token_id\": 100}", RL_EINVAL,
                 "'eos_token_id' 100 is outside the vocabulary [0, 100)");
    s_expect_bad("{" BASE ", \"bos_token_id\": 100}", RL_EINVAL, "'bos_token_id' = 100");
    s_expect_bad("{" BASE ", \"hidden_act\": \"gelu\"}", RL_EUNSUPPORTED,
                 "hidden_act 'gelu' is not supported (silu)");
    s_expect_bad("{" BASE ", \"torch_dtype\": \"int8\"}", RL_EUNSUPPORTED,
                 "dtype 'int8' is not supported");
    s_expect_bad("{" BASE ", \"head_dim\": 15}", RL_EINVAL, "'head_dim' (15) must be even");
    s_expect_bad("{" BASE ", \"num_hidden_layers\": 2}", RL_EINVAL, "duplicate object key");
    s_expect_bad("{\"model_type\": \"qwen2\", \"hidden_size\": 64, \"intermediate_size\": 96,"
                 " \"num_hidden_layers\": 1, \"num_attention_heads\": 4, \"vocab_size\": 50,"
                 " \"use_sliding_window\": true}",
                 RL_EUNSUPPORTED, "'use_sliding_window'");
    s_expect_bad("{\"hidden_size\": 64}", RL_EINVAL, "missing required key 'model_type'");
    s_expect_bad("[1, 2]", RL_EINVAL, "expected a JSON object, not an array");
    s_expect_bad("{\"model_type\": \"llama\",", RL_EINVAL, "inline.json:1:");

    // every real we read ends up in a float: beyond FLT_MAX it would silently become infinity,
    // below the smallest subnormal 0 (the message names the file and the key)
    s_expect_bad("{" BASE ", \"rms_norm_eps\": 1e300}", RL_EINVAL,
                 "'rms_norm_eps' = 1e+300 does not fit a 32-bit float; allowed: a number in "
                 "[1.4013e-45, 3.40282e+38]");
    s_expect_bad("{" BASE ", \"rms_norm_eps\": 1e-50}", RL_EINVAL,
                 "'rms_norm_eps' = 1e-50 does not fit a 32-bit float");
    s_expect_bad("{" BASE ", \"rope_theta\": 1e39}", RL_EINVAL,
                 "'rope_theta' = 1e+39 does not fit a 32-bit float");
    s_expect_bad("{" BASE ", \"initializer_range\": 1e300}", RL_EINVAL,
                 "'initializer_range' = 1e+300 does not fit a 32-bit float");
    s_expect_bad("{" BASE ", \"rope_parameters\": {\"rope_type\": \"default\","
                 " \"rope_theta\": 1e300}}",
                 RL_EINVAL, "'rope_parameters.rope_theta' = 1e+300 does not fit a 32-bit float");
    s_expect_bad("{" BASE ", \"rope_scaling\": {\"rope_type\": \"llama3\", \"factor\": 1e300,"
                 " \"low_freq_factor\": 1.0, \"high_freq_factor\": 4.0,"
                 " \"original_max_position_embeddings\": 8192}}",
                 RL_EINVAL, "'rope_scaling.factor' = 1e+300 does not fit a 32-bit float");
    s_expect_bad("{" BASE ", \"rope_scaling\": {\"rope_type\": \"llama3\", \"factor\": 8.0,"
                 " \"low_freq_factor\": 1.0, \"high_freq_factor\": 1e40,"
                 " \"original_max_position_embeddings\": 8192}}",
                 RL_EINVAL, "'rope_scaling.high_freq_factor' = 1e+40 does not fit a 32-bit float");
    // the edges of float still load (FLT_MAX is exactly representable in JSON's double)
    {
        rl_hf_config_t c;
        char err[512] = "";
        int rc = s_parse("{" BASE ", \"rope_theta\": 3.4028234663852886e38,"
                         " \"rms_norm_eps\": 1e-40}", &c, err, sizeof err);
        CHECK_MSG(rc == 0, "%s", err);
        CHECK(rc != 0 || isfinite((float)c.rope_theta));
        CHECK(rc != 0 || c.rms_norm_eps > 0.0f);
    }

    // accepted variants: legacy "type" key, explicit default, null rope_scaling, eos null
    rl_hf_config_t c;
    char err[512] = "";
    CHECK_INT(s_parse("{" BASE ", \"rope_scaling\": {\"type\": \"default\"}, \"eos_token_id\":"
                      " null, \"head_dim\": 32}",
                      &c, err, sizeof err),
              0);
    CHECK_INT(c.rope_type, RL_ROPE_DEFAULT);
    CHECK(c.rope_theta == 10000.0); // transformers' default
    CHECK(c.rms_norm_eps == 1e-6f); // LlamaConfig default
    CHECK_INT(c.max_position_embeddings, 2048); // LlamaConfig default
    CHECK_INT(c.head_dim, 32); // explicit head_dim wins over 64 / 4
    CHECK_INT(c.n_eos, 0);
    CHECK_INT(c.tie_word_embeddings, 0);
    CHECK_STR(c.torch_dtype, "");
    s_check_round_trip(&c);
}

static void s_test_load_errors(void) {
    rl_hf_config_t c;
    char err[512] = "";
    CHECK_INT(rl_hf_config_load(HF_FIXTURES "/does-not-exist", &c, err, sizeof err),
              RL_ENOTFOUND);
    CHECK_CONTAINS(err, "does-not-exist/config.json");

    // a broken generation_config.json is reported by its own name
    char dir[] = "/tmp/rl_test_hf_XXXXXX";
    rl_test_tmpdir(dir, sizeof dir, "hf");
    char path[256];
    snprintf(path, sizeof path, "%s/config.json", dir);
    FILE *f = fopen(path, "w");
    RL_ASSERT(f);
    fputs("{" BASE ", \"eos_token_id\": 1}", f);
    fclose(f);
    snprintf(path, sizeof path, "%s/generation_config.json", dir);
    f = fopen(path, "w");
    RL_ASSERT(f);
    fputs("{\"eos_token_id\": [1, \"x\"]}", f);
    fclose(f);
    CHECK_INT(rl_hf_config_load(dir, &c, err, sizeof err), RL_EINVAL);
    CHECK_CONTAINS(err, "generation_config.json");
    f = fopen(path, "w");
    RL_ASSERT(f);
    fputs("{\"eos_token_id\": [1, 7, 9]}", f);
    fclose(f);
    CHECK_INT(rl_hf_config_load(dir, &c, err, sizeof err), 0);
    CHECK_INT(c.n_eos, 3);
    CHECK_INT(c.eos_token_ids[2], 9);
    unlink(path);
    snprintf(path, sizeof path, "%s/config.json", dir);
    unlink(path);
    rmdir(dir);
}

// ---------------------------------------------------------------------------------------------
// rl_hf_check_weights

// Writes a model.safetensors holding `specs` (zeros; F32 or BF16) plus an optional extra
// tensor, skipping the spec named `skip` and reshaping the one named `reshape`.
static void s_write_model(const char *dir, const rl_hf_tensor_spec_t *specs, int n,
                          const char *skip, const char *reshape, const char *extra, int bf16) {
    rl_st_writer_t *w = rl_st_writer_new();
    RL_ASSERT(w);
    float *zeros = calloc(1 << 16, sizeof *zeros);
    RL_ASSERT(zeros);
    for (int i = 0; i < n; i++) {
        if (skip && strcmp(specs[i].name, skip) == 0) {
            continue;
        }
        int64_t shape[2] = {specs[i].shape[0], specs[i].shape[1]};
        if (reshape && strcmp(specs[i].name, reshape) == 0) {
            shape[0] += 1;
        }
        RL_ASSERT(shape[0] * (specs[i].ndim == 2 ? shape[1] : 1) <= (1 << 16));
        int rc = rl_st_writer_add_f32(w, specs[i].name, bf16 ? RL_DTYPE_BF16 : RL_DTYPE_F32,
                                      specs[i].ndim, shape, zeros);
        RL_ASSERT(rc == 0);
    }
    if (extra) {
        int64_t shape[1] = {4};
        RL_ASSERT(rl_st_writer_add_f32(w, extra, RL_DTYPE_F32, 1, shape, zeros) == 0);
    }
    char path[256], err[512] = "";
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    int rc = rl_st_writer_write(w, path, err, sizeof err);
    CHECK_MSG(rc == 0, "%s", err);
    rl_st_writer_destroy(&w);
    free(zeros);
}

// Opens `dir` and runs the check; returns its code with the message in err.
static int s_check_dir(const char *dir, const rl_hf_config_t *cfg, char *err, size_t err_len) {
    rl_st_model_t *m = rl_st_model_open(dir, err, err_len);
    CHECK_MSG(m != NULL, "%s", err);
    if (!m) {
        return -1;
    }
    int rc = rl_hf_check_weights(cfg, m, err, err_len);
    rl_st_model_destroy(&m);
    return rc;
}

static void s_test_check_weights(void) {
    rl_hf_config_t c;
    char err[1024] = "";
    // tiny qwen3: tied, q/k norms
    CHECK_INT(s_parse("{\"model_type\": \"qwen3\", \"hidden_size\": 32, \"intermediate_size\": 48,"
                      " \"num_hidden_layers\": 2, \"num_attention_heads\": 4,"
                      " \"num_key_value_heads\": 2, \"head_dim\": 16, \"vocab_size\": 40,"
                      " \"tie_word_embeddings\": true}",
                      &c, err, sizeof err),
              0);
    rl_hf_tensor_spec_t specs[64];
    int n = rl_hf_tensor_specs(&c, specs, 64);
    char dir[] = "/tmp/rl_test_hfw_XXXXXX";
    rl_test_tmpdir(dir, sizeof dir, "hf");

    s_write_model(dir, specs, n, NULL, NULL, NULL, 0);
    CHECK_INT(s_check_dir(dir, &c, err, sizeof err), 0);
    s_write_model(dir, specs, n, NULL, NULL, "model.layers.0.self_attn.rotary_emb.inv_freq", 1);
    CHECK_MSG(s_check_dir(dir, &c, err, sizeof err) == 0, "%s", err); // BF16 + inv_freq: fine

    s_write_model(dir, specs, n, "model.layers.1.self_attn.k_norm.weight", NULL, NULL, 0);
    CHECK_INT(s_check_dir(dir, &c, err, sizeof err), RL_EINVAL);
    CHECK_CONTAINS(err, "1 missing tensor (model.layers.1.self_attn.k_norm.weight)");

    s_write_model(dir, specs, n, NULL, "model.layers.0.mlp.down_proj.weight", "lm_head.weight",
                  0);
    CHECK_INT(s_check_dir(dir, &c, err, sizeof err), RL_EINVAL);
    CHECK_CONTAINS(err, "1 unexpected tensor (lm_head.weight)"); // tied: no head allowed
    CHECK_CONTAINS(err, "model.layers.0.mlp.down_proj.weight is [33, 48], expected [32, 48]");

    // the same weights against an untied config: lm_head is now missing
    rl_hf_config_t u = c;
    u.tie_word_embeddings = 0;
    s_write_model(dir, specs, n, NULL, NULL, NULL, 0);
    CHECK_INT(s_check_dir(dir, &u, err, sizeof err), RL_EINVAL);
    CHECK_CONTAINS(err, "lm_head.weight");

    // many missing: the first few are named, then "..."
    rl_hf_config_t big = c;
    big.num_hidden_layers = 4;
    CHECK_INT(s_check_dir(dir, &big, err, sizeof err), RL_EINVAL);
    fprintf(stderr, "  refused as expected: %s\n", err);
    CHECK_CONTAINS(err, "missing tensors (model.layers.2.");
    CHECK_CONTAINS(err, ", ...)");

    char path[256];
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    unlink(path);
    rmdir(dir);
}

// The committed cookbook model: its config parses, its weights match it, its size is as
// documented in cookbook/models/arith-base/README.md.
static void s_test_cookbook_model(void) {
    const char *dir = RL_SOURCE_DIR "/cookbook/models/arith-base";
    rl_hf_config_t c;
    char err[1024] = "";
    int rc = rl_hf_config_load(dir, &c, err, sizeof err);
    CHECK_MSG(rc == 0, "%s", err);
    if (rc) {
        return;
    }
    CHECK_INT(c.arch, RL_ARCH_QWEN2);
    CHECK_INT(c.vocab_size, 24);
    CHECK_INT(c.tie_word_embeddings, 1);
    CHECK_INT(c.n_eos, 1);
    CHECK_INT(c.eos_token_ids[0], 21);
    CHECK_INT(rl_hf_param_count(&c), 791680);
    rl_st_model_t *m = rl_st_model_open(dir, err, sizeof err);
    CHECK_MSG(m != NULL, "%s", err);
    if (m) {
        rc = rl_hf_check_weights(&c, m, err, sizeof err);
        CHECK_MSG(rc == 0, "%s", err);
        rl_st_model_destroy(&m);
    }
}

int main(void) {
    RL_TEST_RUN(s_test_llama);
    RL_TEST_RUN(s_test_qwen2);
    RL_TEST_RUN(s_test_qwen3);
    RL_TEST_RUN(s_test_rope_parameters);
    RL_TEST_RUN(s_test_refusals);
    RL_TEST_RUN(s_test_load_errors);
    RL_TEST_RUN(s_test_check_weights);
    RL_TEST_RUN(s_test_cookbook_model);
    RL_TEST_DONE();
}
