// test_plan — the device memory plan (rl_model_device_plan, rl_model_device_kvcache_bytes,
// `rlctl plan`; issue 31). Label gpu; its .emu twin runs on the module emulated on the CPU.
//   1. Against byte counts computed by hand (below, each step written out) for two models: the
//      cookbook's arith model (qwen2: biases, GQA, tied head) with LoRA r 8 on every
//      projection, and a small untied llama tuned in full: weights, trainable parameters,
//      gradients, AdamW moments; and a sampler's KV cache of the arith model.
//   2. Against what the device then allocates (rl_model_device_bytes, rl_kvcache_device_bytes):
//      the actor's LoRA model at its micro-batch, a sampler's inference-only model (no
//      gradients or moments) and its cache after a draw, the full llama with recompute; and the
//      activations growing with a larger forward as a plan for that size says.
//   3. `rlctl plan` on the cookbook's GRPO recipe: its actor row is rl_model_device_plan's; on a
//      device too small (CUEMU_MEMORY, the emulation only) it says so (exit 1) and names the
//      largest micro-batch that fits (of those dividing a step's 128 sequences), which then
//      fits while the next allowed one does not; `validate` and
//      `run` refuse the recipe naming model.device, before anything starts.
#include "rl_test.h"
#include "rl_test_cuda.h"

#include "rl_hf.h"
#include "rl_lora.h"
#include "rl_model.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char s_tmp[64];
static char s_out[1 << 16];

// On a GPU machine (scripts/gpu_check.sh) the build is not where it was made: RLCTL_BIN names
// the rlctl to run and RL_SOURCE_DIR the checkout; by default, this build's.
static char s_src[1024];  // the checkout
static const char *s_bin; // the rlctl binary

// The llama: V 1000, C 64, I 128, 2 layers, 4 heads of 16 (no GQA), untied, no biases.
static const char *const S_LLAMA_JSON =
    "{\"architectures\": [\"LlamaForCausalLM\"], \"model_type\": \"llama\", \"vocab_size\": 1000,"
    " \"hidden_size\": 64, \"intermediate_size\": 128, \"num_hidden_layers\": 2,"
    " \"num_attention_heads\": 4, \"num_key_value_heads\": 4, \"head_dim\": 16,"
    " \"hidden_act\": \"silu\", \"max_position_embeddings\": 256, \"rms_norm_eps\": 1e-6,"
    " \"rope_theta\": 10000.0, \"tie_word_embeddings\": false, \"bos_token_id\": 1,"
    " \"eos_token_id\": 2}";

static void s_cfg(const char *dir, rl_hf_config_t *cfg) {
    char err[1024];
    int rc = rl_hf_config_load(dir, cfg, err, sizeof err);
    CHECK_MSG(rc == 0, "%s: %s", dir, err);
}

static void s_opts_lora(rl_model_opts_t *o) {
    rl_model_opts_default(o);
    o->tune = RL_TUNE_LORA;
    o->lora_r = 8;
    o->lora_alpha = 16;
    o->lora_targets = RL_LORA_ALL;
}

static void s_opts_full(rl_model_opts_t *o) {
    rl_model_opts_default(o);
    o->tune = RL_TUNE_FULL;
    o->recompute = 1;
}

// The plan of cfg under o for `rows` tokens (into *out when given) and its parts against the
// counts made by hand (-1: not checked): weights, trainable, gradients, optimizer state.
static void s_plan_is(const rl_hf_config_t *cfg, const rl_model_opts_t *o, int rows, long long w,
                      long long t, long long g, long long opt, rl_model_device_plan_t *out) {
    rl_model_device_plan_t p;
    char err[1024];
    int rc = rl_model_device_plan(cfg, o, 1, rows, &p, err, sizeof err);
    CHECK_MSG(rc == 0, "plan: %s", err);
    const long long got[4] = {(long long)p.weights, (long long)p.trainable, (long long)p.grads,
                              (long long)p.optim};
    const long long want[4] = {w, t, g, opt};
    static const char *const what[4] = {"weights", "trainable", "gradients", "optimizer state"};
    for (int i = 0; !rc && i < 4; i++) {
        CHECK_MSG(want[i] < 0 || got[i] == want[i], "planned %s %lld bytes, by hand %lld", what[i],
                  got[i], want[i]);
    }
    if (out) {
        *out = p;
    }
}

// 1. by hand
static void s_test_by_hand(const rl_hf_config_t *arith, const rl_hf_config_t *llama) {
    char err[1024];
    rl_model_opts_t o;
    rl_model_device_plan_t p;
    // the arith model, LoRA r 8 on q, k, v, o, gate, up, down. Frozen weights, each tensor
    // rounded up to 256 bytes (all are multiples already):
    //   a layer's matrices, bf16: q 128x128 32768 + k 64x128 16384 + v 16384 + o 32768
    //     + gate 384x128 98304 + up 98304 + down 128x384 98304 = 393216
    //   its vectors, fp32: two norms 2 x 512 + q bias 512 + k bias 256 + v bias 256 = 2048
    //   4 layers: 4 x 395264 = 1581056; embed_tokens 24x128 bf16 6144 (tied: the head too);
    //   the final norm 512; in all 1587712.
    // Trainable: A (8, in) and B (out, 8) per module, each rounded up to 128 floats (all are):
    //   q 1024 + 1024, k 1024 + 512, v 1024 + 512, o 1024 + 1024, gate 1024 + 3072,
    //   up 1024 + 3072, down 3072 + 1024 = 19456 a layer, 77824 floats in all:
    //   fp32 + bf16 copy 77824 x 6 = 466944; gradients x 4 = 311296; AdamW m, v 622592.
    s_opts_lora(&o);
    s_plan_is(arith, &o, 1792, 1587712, 466944, 311296, 622592, &p);
    printf("arith LoRA: weights %zu trainable %zu grads %zu optim %zu activations %zu\n", p.weights,
           p.trainable, p.grads, p.optim, p.acts);
    // the optimizer on the host (a mesh, a head, train.optimizer_offload): no moments
    o.device_host_optim = 1;
    s_plan_is(arith, &o, 1792, -1, -1, 311296, 0, NULL);
    o.device_host_optim = 0;
    // a mesh of 3 ranks on GPUs of their own with NCCL (device_comm_ranks): ZeRO-2 by units, a
    // layer's A and B (19456 floats) in 3 parts of ceil(19456 / 3) = 6486 -> 51 x 128 = 6528:
    //   trainable as before 466944; gradients: this rank's parts 4 x 6528 = 26112, one unit's
    //   buffer 3 x 6528 = 19584, (26112 + 19584) x 4 = 182784; m, v 2 x 26112 x 4 = 208896
    o.device_comm_ranks = 3;
    s_plan_is(arith, &o, 1792, -1, 466944, 182784, 208896, NULL);
    o.device_comm_ranks = 0;
    // its frozen layers sharded over an fsdp group of 3 (ZeRO-3, device_shard_ranks): a layer's
    // block of 395264 bytes in 3 shards of ceil(395264 / 3) = 131755 -> 515 x 256 = 131840; 4
    // layers' shards 527360, one gathered layer 3 x 131840 = 395520, the embedding and the final
    // norm whole 6656: 929536 (of 1587712). Over 2: 197632 each (exactly), 790528 + 395264 +
    // 6656 = 1192448. The trainables as before.
    o.device_shard_ranks = 3;
    s_plan_is(arith, &o, 1792, 929536, 466944, -1, -1, NULL);
    o.device_shard_ranks = 2;
    s_plan_is(arith, &o, 1792, 1192448, -1, -1, -1, NULL);
    o.device_shard_ranks = 0;
    // a sampler's model: the same, no gradients or moments
    o.device_infer = 1;
    s_plan_is(arith, &o, 4096, 1587712, 466944, 0, 0, NULL);
    // its KV cache, 64 slots of 55 positions (prompt 16 + 40 new - 1), for 4096-token steps:
    //   K and V in bf16: 4 layers x 2 x 64 slots x 55 x (2 heads x 32) x 2 B = 3604480
    //   the RoPE table 55 x 32 x 4 = 7040; a step's inputs (slots, run starts, run slots, run
    //   positions, ids, positions) (6 x 4096 + 1) x 4 = 98308; 64 rows of logits 64 x 24 x 4 =
    //   6144; the draws: a row per slot 6144 + 64 x 20 = 1280; in all 3723396.
    CHECK_INT((long long)rl_model_device_kvcache_bytes(arith, 64, 55, 4096, 1), 3723396);
    CHECK_INT((long long)rl_model_device_kvcache_bytes(arith, 64, 55, 4096, 0),
              3723396 - 6144 - 1280);
    // the llama tuned in full: every tensor trainable (no frozen weights), each rounded up to
    // 128 floats: embed 1000x64 64000; a layer: two norms 2 x 128 (64 rounded up) + q, k, v, o
    //   4 x 4096 + gate, up, down 3 x 8192 = 41216, 2 layers 82432; the final norm 128; lm_head
    //   64000. 210560 floats: fp32 + bf16 1263360, gradients 842240, AdamW 1684480.
    s_opts_full(&o);
    s_plan_is(llama, &o, 300, 0, 1263360, 842240, 1684480, &p);
    printf("llama full: weights %zu trainable %zu grads %zu optim %zu activations %zu\n", p.weights,
           p.trainable, p.grads, p.optim, p.acts);
    // a sampler of it (device_infer: no fp32 masters): the bf16 copies 210560 x 2 = 421120 and
    //   the vectors' fp32, 2 layers x 2 norms x 128 + the final norm 128 = 640 floats, 2560:
    //   423680 (of 1263360); no gradients or moments
    o.device_infer = 1;
    s_plan_is(llama, &o, 300, 0, 423680, 0, 0, NULL);
    o.device_infer = 0;
    // with NCCL over 2 ranks, ZeRO-2 by units: the embedding 64000 floats in parts of 32000; a
    //   layer 41216 in parts of 20608; the final norm 128 in parts of 64 -> 128; the head 64000
    //   in parts of 32000. This rank's parts 32000 + 2 x 20608 + 128 + 32000 = 105344; one
    //   unit's buffer 2 x 32000 = 64000: gradients (105344 + 64000) x 4 = 677376 (842240
    //   whole); m, v 2 x 105344 x 4 = 842752; trainable as before 1263360
    o.device_comm_ranks = 2;
    s_plan_is(llama, &o, 300, -1, 1263360, 677376, 842752, NULL);
    // and its masters sharded (device_shard_masters): fp32 the final norm whole 128, this
    //   rank's parts of the rest 32000 + 2 x 20608 + 32000 = 105216 and the layers' norms whole
    //   2 x 2 x 128 = 512; bf16 the embedding and the head whole, 64000 + 64000 = 128000, and one
    //   gathered layer 2 x 20608 = 41216: (128 + 105216 + 512) x 4 + (128000 + 41216) x 2 =
    //   761856 (of 1263360); gradients and moments as above
    o.device_shard_masters = 1;
    s_plan_is(llama, &o, 300, -1, 761856, 677376, 842752, NULL);
    o.device_shard_masters = 0;
    o.device_comm_ranks = 0;
    // recompute keeps one layer's activations instead of two
    rl_model_device_plan_t q;
    o.recompute = 0;
    CHECK_INT(rl_model_device_plan(llama, &o, 1, 300, &q, err, sizeof err), 0);
    CHECK_MSG(q.acts > p.acts, "activations without recompute %zu, with %zu", q.acts, p.acts);
}

static size_t s_sum(const rl_model_device_plan_t *p) {
    return p->weights + p->trainable + p->grads + p->optim + p->acts;
}

// 2. the plan against the device's allocations: a model made with opts for `rows` tokens
static void s_check_model(const char *what, const rl_hf_config_t *cfg, rl_model_opts_t *o,
                          int rows) {
    char err[2048];
    rl_model_device_plan_t p;
    CHECK_INT(rl_model_device_plan(cfg, o, 1, rows, &p, err, sizeof err), 0);
    o->device.cuda = 1;
    o->device_rows = rows;
    rl_model_t *m = rl_model_new_random(cfg, o, 3, err, sizeof err);
    CHECK_MSG(m != NULL, "%s: %s", what, err);
    size_t got = m ? rl_model_device_bytes(m) : 0;
    printf("%-28s plan %zu bytes, the device holds %zu\n", what, s_sum(&p), got);
    CHECK_MSG(got == s_sum(&p), "%s: the plan says %zu bytes, the device holds %zu", what,
              s_sum(&p), got);
    rl_model_destroy(&m);
}

static void s_test_allocations(const rl_hf_config_t *arith, const rl_hf_config_t *llama) {
    char err[2048];
    rl_model_opts_t o;
    s_opts_lora(&o);
    s_check_model("arith LoRA actor, 1792", arith, &o, 1792);
    s_opts_lora(&o);
    o.device_infer = 1;
    s_check_model("arith LoRA sampler, 4096", arith, &o, 4096);
    s_opts_full(&o);
    s_check_model("llama full, recompute, 300", llama, &o, 300);
    s_opts_full(&o);
    o.device_host_optim = 1;
    s_check_model("llama full, host optimizer", llama, &o, 300);
    s_opts_full(&o);
    o.device_infer = 1;
    s_check_model("llama full sampler, 300", llama, &o, 300);
    // a sampler's cache after a draw, and the activations grown by a larger forward
    s_opts_lora(&o);
    o.device_infer = 1;
    o.device.cuda = 1;
    o.device_rows = 64;
    rl_model_t *m = rl_model_new_random(arith, &o, 3, err, sizeof err);
    CHECK_MSG(m != NULL, "%s", err);
    if (!m) {
        return;
    }
    rl_kvcache_t *c = rl_kvcache_new(m, 8, 20);
    CHECK(c != NULL);
    int32_t tok[3] = {3, 4, 5};
    int slots[3] = {0, 0, 1}, pos[3] = {0, 1, 0}, rows[2] = {1, 2};
    int32_t out[2];
    float lp[2];
    rl_model_draws_t d = {0.0f, 0, 1.0f, 2, rows, NULL, out, lp};
    CHECK_INT(rl_model_step_draw(m, c, tok, slots, pos, 3, &d), 0);
    size_t plan = rl_model_device_kvcache_bytes(arith, 8, 20, 64, 1);
    printf("%-28s plan %zu bytes, the device holds %zu\n", "KV cache 8 x 20, drawn", plan,
           rl_kvcache_device_bytes(c));
    CHECK_INT((long long)rl_kvcache_device_bytes(c), (long long)plan);
    rl_kvcache_destroy(&c);
    int32_t ft[2 * 50];
    int len[2] = {50, 40};
    for (int i = 0; i < 100; i++) {
        ft[i] = i % 24;
    }
    float flp[100];
    CHECK_INT(rl_model_forward(m, ft, len, 2, 50, 1.0f, 0, flp, NULL), 0);
    rl_model_device_plan_t p;
    CHECK_INT(rl_model_device_plan(arith, &o, 1, 90, &p, err, sizeof err), 0);
    CHECK_MSG(rl_model_device_bytes(m) == s_sum(&p),
              "grown to 90 tokens: the device holds %zu, a plan for 90 says %zu",
              rl_model_device_bytes(m), s_sum(&p));
    rl_model_destroy(&m);
}

static int s_cmd(const char *env, const char *args) {
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "env %s '%s' %s 2>&1", env, s_bin, args);
    return rl_test_shell(cmd, s_out, sizeof s_out);
}

// "plan <the cookbook's GRPO recipe> model.device=cuda" and more
static const char *s_grpo(const char *more) {
    static char b[3][2048];
    static int k;
    k = (k + 1) % 3;
    snprintf(b[k], sizeof b[k], "plan %s/cookbook/grpo_lora.yaml model.device=cuda %s", s_src,
             more);
    return b[k];
}

// 3. rlctl plan, and the refusals of a plan that does not fit
static void s_test_cli(const rl_hf_config_t *arith) {
    CHECK_INT(s_cmd("", s_grpo("")), 0);
    printf("%s", s_out);
    CHECK_CONTAINS(s_out, "actor");
    CHECK_CONTAINS(s_out, "sampler");
    CHECK_INT(s_cmd("", s_grpo("--json")), 0);
    json_t *o = json_loads(s_out, 0, NULL);
    CHECK_MSG(o != NULL, "--json is not JSON: %s", s_out);
    json_t *actor = json_array_get(json_object_get(o, "roles"), 0);
    rl_model_opts_t mo;
    s_opts_lora(&mo); // the recipe's: r 8, all-linear, dropout 0
    rl_model_device_plan_t p;
    char err[1024];
    CHECK_INT(rl_model_device_plan(arith, &mo, 1, 32 * 56, &p, err, sizeof err), 0);
    CHECK_INT(json_integer_value(json_object_get(actor, "total")), (long long)s_sum(&p));
    CHECK_INT(json_integer_value(json_object_get(actor, "rows")), 32 * 56);
    CHECK_INT(json_integer_value(json_object_get(actor, "optim")), (long long)p.optim);
    json_decref(o);
    // a sampler's KV cache holds sampling.max_batch slots (default 64) of the longest sequence
    // (prompt 16 + 40 new - 1 = 55 positions), for its 4096-row steps
    for (int k = 0; k < 2; k++) {
        CHECK_INT(s_cmd("", s_grpo(k ? "--json sampling.max_batch=8" : "--json")), 0);
        o = json_loads(s_out, 0, NULL);
        json_t *sm = NULL, *e;
        size_t i;
        json_array_foreach(json_object_get(o, "roles"), i, e) {
            const char *name = json_string_value(json_object_get(e, "role"));
            sm = name && strcmp(name, "sampler") == 0 ? e : sm;
        }
        CHECK_MSG(sm != NULL, "no sampler row: %s", s_out);
        CHECK_INT(sm ? json_integer_value(json_object_get(sm, "kv_cache")) : -1,
                  (long long)rl_model_device_kvcache_bytes(arith, k ? 8 : 64, 55, 4096, 1));
        json_decref(o);
    }
    // AdamW on the host (train.optimizer_offload): the actor's plan holds no moments
    CHECK_INT(s_cmd("", s_grpo("--json train.optimizer_offload=true")), 0);
    o = json_loads(s_out, 0, NULL);
    actor = json_array_get(json_object_get(o, "roles"), 0);
    CHECK_INT(json_integer_value(json_object_get(actor, "optim")), 0);
    CHECK_INT(json_integer_value(json_object_get(actor, "total")),
              (long long)(s_sum(&p) - p.optim));
    json_decref(o);
    if (!rl_test_emulated()) {
        return; // a device's memory cannot be shrunk here
    }
    // 150 MiB: the two samplers take ~99, the actor at micro-batch 32 ~61: too much
    const char *small = "CUEMU_MEMORY=150M";
    CHECK_INT(s_cmd(small, s_grpo("--json")), 1);
    o = json_loads(s_out, 0, NULL);
    CHECK(o && json_is_false(json_object_get(o, "fits")));
    int mb = (int)json_integer_value(json_object_get(o, "largest_micro_batch"));
    json_decref(o);
    printf("150 MiB: largest micro-batch %d\n", mb);
    CHECK_MSG(mb > 0 && mb < 32, "largest micro-batch %d", mb);
    char args[2400], more[64];
    snprintf(more, sizeof more, "train.micro_batch_size=%d", mb);
    snprintf(args, sizeof args, "%s", s_grpo(more));
    CHECK_INT(s_cmd(small, args), 0);
    CHECK_CONTAINS(s_out, ": fits");
    int next = mb + 1; // the next micro-batch the recipe allows: a divisor of its 128
    while (128 % next != 0) {
        next++;
    }
    snprintf(more, sizeof more, "train.micro_batch_size=%d", next);
    snprintf(args, sizeof args, "%s", s_grpo(more));
    CHECK_INT(s_cmd(small, args), 1);
    CHECK_CONTAINS(s_out, "DOES NOT FIT");
    // validate and run refuse it, naming the key, before anything starts
    snprintf(args, sizeof args, "validate %s/cookbook/grpo_lora.yaml model.device=cuda", s_src);
    CHECK_INT(s_cmd(small, args), 2);
    CHECK_CONTAINS(s_out, "model.device: cuda:0 (cuemu (CPU emulation)) has 150.0 MiB free");
    CHECK_CONTAINS(s_out, "the largest train.micro_batch_size that fits");
    snprintf(args, sizeof args, "run %s/cookbook/grpo_lora.yaml model.device=cuda run.dir=%s/run",
             s_src, s_tmp);
    CHECK_INT(s_cmd(small, args), 2);
    CHECK_CONTAINS(s_out, "has 150.0 MiB free");
    char run[128];
    snprintf(run, sizeof run, "%s/run", s_tmp);
    CHECK_MSG(access(run, F_OK) != 0, "the refused run made its folder");
}

int main(void) {
    unsetenv("RLCTL_CUDA_ATTN"); // the counts by hand are the bf16 attention's (a bf16 KV cache)
    const char *src = getenv("RL_SOURCE_DIR");
    snprintf(s_src, sizeof s_src, "%s", src && src[0] ? src : RL_SOURCE_DIR);
    s_bin = getenv("RLCTL_BIN");
    s_bin = s_bin && s_bin[0] ? s_bin : RL_BINARY_DIR "/rlctl";
    rl_test_cuda_open("model.device_plan");
    rl_test_cuda_close();
    rl_test_tmpdir(s_tmp, sizeof s_tmp, "plan");
    rl_hf_config_t arith, llama;
    char dir[1200];
    snprintf(dir, sizeof dir, "%s/cookbook/models/arith-noisy-base", s_src);
    s_cfg(dir, &arith);
    char p[256];
    snprintf(p, sizeof p, "%s/config.json", s_tmp);
    FILE *f = fopen(p, "w");
    CHECK(f != NULL);
    if (f) {
        fputs(S_LLAMA_JSON, f);
        fclose(f);
    }
    s_cfg(s_tmp, &llama);
    RL_TEST_RUN(s_test_by_hand, &arith, &llama);
    RL_TEST_RUN(s_test_allocations, &arith, &llama);
    RL_TEST_RUN(s_test_cli, &arith);
    rl_test_tmpdir_done(s_tmp);
    RL_TEST_DONE();
}
