// test_proto — the typed role messages (transport/rl_proto): every verb's request and reply goes
// through encode -> the wire's bytes (rl_msg_encode / rl_msg_decode) -> decode and comes back
// field for field; decoders refuse a missing field, a wrong type, tensors whose shared dimensions
// disagree, and each verb's inconsistent sizes, naming the verb and the field; the envelope
// helpers (ok, fail, status, request, welcome) and the verb names.
#include "rl_proto.h"
#include "rl_test.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// m through the bytes and back (frees m). caller owns result.
static rl_msg_t *s_wire(rl_msg_t *m) {
    const rl_frame_t *fr;
    int n;
    CHECK_INT(rl_msg_encode(m, &fr, &n), 0);
    rl_msg_t *back = NULL;
    char err[256];
    CHECK_INT(rl_msg_decode(fr, n, &back, err, sizeof err), 0);
    rl_msg_free(&m);
    return back;
}

static void test_verbs(void) {
    for (int v = 0; v < RL_PROTO_N_VERBS; v++) {
        CHECK_INT(rl_proto_verb_of(rl_proto_verb_name((rl_proto_verb_t)v)), v);
    }
    CHECK_INT(rl_proto_verb_of("nonsense"), -1);
    CHECK_STR(rl_proto_verb_name(RL_PROTO_GENERATE), "generate");
}

static void test_hello_hb_configure(void) {
    char err[256];
    const char *caps[] = {"generate", "shutdown"};
    rl_proto_hello_t h = {"sampler", 3, 1234, "t0k", caps, 2, NULL, NULL};
    rl_msg_t *m = NULL;
    CHECK_INT(rl_proto_hello_encode(&h, 0, &m, err, sizeof err), 0);
    CHECK_STR(rl_msg_op(m), "hello");
    m = s_wire(m);
    rl_proto_hello_t d;
    CHECK_INT(rl_proto_hello_decode(m, &d, err, sizeof err), 0);
    CHECK_STR(d.role, "sampler");
    CHECK_INT((int)d.rank, 3);
    CHECK_INT((int)d.pid, 1234);
    CHECK_STR(d.token, "t0k");
    CHECK_INT(d.n_caps, 2);
    CHECK(d.n_caps == 2 && strcmp(d.caps[1], "shutdown") == 0);
    CHECK(d.error == NULL && d.host == NULL);
    rl_msg_free(&m);
    h.error = "no model";
    h.host = "gpu-host-2"; // a rank across hosts names its host
    CHECK_INT(rl_proto_hello_encode(&h, 0, &m, err, sizeof err), 0);
    CHECK_INT(rl_proto_hello_decode(m, &d, err, sizeof err), 0);
    CHECK_STR(d.error ? d.error : "", "no model");
    CHECK_STR(d.host ? d.host : "", "gpu-host-2");
    rl_msg_free(&m);

    rl_proto_hb_t hb = {"t0k"}, hbd;
    CHECK_INT(rl_proto_hb_encode(&hb, 7, &m, err, sizeof err), 0);
    CHECK_INT(rl_proto_hb_decode(m, &hbd, err, sizeof err), 0);
    CHECK_STR(hbd.token, "t0k");
    CHECK_INT((int)rl_msg_id(m), 7);
    rl_msg_free(&m);

    rl_proto_configure_t c = {"run: {name: x}\n", 0, 2}, cd;
    CHECK_INT(rl_proto_configure_encode(&c, 9, &m, err, sizeof err), 0);
    m = s_wire(m);
    CHECK_INT(rl_proto_configure_decode(m, &cd, err, sizeof err), 0);
    CHECK_STR(cd.recipe, "run: {name: x}\n");
    CHECK_INT((int)cd.recipe_len, (int)strlen(c.recipe));
    CHECK_INT((int)cd.threads, 2);
    rl_msg_free(&m);
}

static void test_sampler(void) {
    char err[256];
    float w[5] = {1, 2, 3, 4, 5};
    rl_proto_load_weights_t lw = {.version = 4,
                                  .kind = "lora",
                                  .weights = w,
                                  .n = 5,
                                  .offset = 10,
                                  .total = 15},
                            lwd; // a bucket: [10, 15) of 15
    rl_msg_t *m = NULL;
    CHECK_INT(rl_proto_load_weights_encode(&lw, 3, &m, err, sizeof err), 0);
    m = s_wire(m);
    CHECK_INT(rl_proto_load_weights_decode(m, &lwd, err, sizeof err), 0);
    CHECK_INT((int)lwd.version, 4);
    CHECK_STR(lwd.kind, "lora");
    CHECK(lwd.n == 5 && lwd.weights[4] == 5.0f);
    CHECK(lwd.offset == 10 && lwd.total == 15);
    CHECK(lwd.ipc == NULL && lwd.n_ipc == 0 && lwd.ipc_array == NULL && lwd.n_ipc_array == 0);
    rl_msg_free(&m);
    // through CUDA IPC: the actor's handle instead of the weights
    uint8_t h[64];
    for (int i = 0; i < 64; i++) {
        h[i] = (uint8_t)(i * 7 + 1);
    }
    rl_proto_publish_weights_reply_t pw = {h, 64, -5, 1000}, pwd;
    CHECK_INT(rl_proto_publish_weights_reply_encode(&pw, 3, &m, err, sizeof err), 0);
    m = s_wire(m);
    CHECK_INT(rl_proto_publish_weights_reply_decode(m, &pwd, err, sizeof err), 0);
    CHECK(pwd.n_handle == 64 && memcmp(pwd.handle, h, 64) == 0 && pwd.layout == -5 &&
          pwd.floats == 1000);
    rl_msg_free(&m);
    const int64_t arr[2] = {-5, 1000};
    rl_proto_load_weights_t li = {
        .version = 5, .kind = "full", .ipc = h, .n_ipc = 64, .ipc_array = arr, .n_ipc_array = 2};
    CHECK_INT(rl_proto_load_weights_encode(&li, 3, &m, err, sizeof err), 0);
    m = s_wire(m);
    CHECK_INT(rl_proto_load_weights_decode(m, &lwd, err, sizeof err), 0);
    CHECK(lwd.version == 5 && lwd.n == 0 && lwd.n_ipc == 64 && memcmp(lwd.ipc, h, 64) == 0 &&
          lwd.n_ipc_array == 2 && lwd.ipc_array[0] == -5 && lwd.ipc_array[1] == 1000);
    rl_msg_free(&m);
    rl_proto_load_weights_reply_t lr = {4}, lrd;
    CHECK_INT(rl_proto_load_weights_reply_encode(&lr, 3, &m, err, sizeof err), 0);
    int ok = 0;
    const char *why;
    CHECK_INT(rl_proto_reply_status(m, &ok, &why), 0);
    CHECK_INT(ok, 1);
    CHECK_INT(rl_proto_load_weights_reply_decode(m, &lrd, err, sizeof err), 0);
    CHECK_INT((int)lrd.version, 4);
    rl_msg_free(&m);

    int32_t ids[5] = {1, 2, 3, 4, 5}, lens[2] = {2, 3}, stop[1] = {9};
    int64_t idx[2] = {10, 11};
    rl_proto_generate_t g = {.version = 1, .prompts = ids, .n_prompt_ids = 5,
                             .prompt_lens = lens, .prompt_index = idx, .P = 2, .n = 3,
                             .max_new_tokens = 8, .temperature = 0.7, .top_p = 0.9,
                             .top_k = 5, .seed = 42, .stop_ids = stop, .n_stop = 1};
    rl_proto_generate_t gd;
    CHECK_INT(rl_proto_generate_encode(&g, 5, &m, err, sizeof err), 0);
    m = s_wire(m);
    CHECK_INT(rl_proto_generate_decode(m, &gd, err, sizeof err), 0);
    CHECK(gd.P == 2 && gd.n_prompt_ids == 5 && gd.prompt_index[1] == 11 && gd.n == 3);
    CHECK(gd.temperature == 0.7 && gd.top_p == 0.9 && gd.top_k == 5 && gd.seed == 42);
    CHECK(gd.n_stop == 1 && gd.stop_ids[0] == 9 && gd.max_new_tokens == 8);
    rl_msg_free(&m);
    // no stop ids: absent, and the decoder says none
    g.stop_ids = NULL;
    g.n_stop = 0;
    CHECK_INT(rl_proto_generate_encode(&g, 5, &m, err, sizeof err), 0);
    CHECK(!rl_msg_has(m, "stop_ids"));
    CHECK_INT(rl_proto_generate_decode(m, &gd, err, sizeof err), 0);
    CHECK(gd.stop_ids == NULL && gd.n_stop == 0);
    rl_msg_free(&m);
    // prompt_lens that exceed the prompts
    lens[1] = 4;
    CHECK_INT(rl_proto_generate_encode(&g, 5, &m, err, sizeof err), 0);
    CHECK_INT(rl_proto_generate_decode(m, &gd, err, sizeof err), RL_EPROTO);
    CHECK_CONTAINS(err, "generate: prompt_lens exceed prompts");
    rl_msg_free(&m);
    lens[1] = 3;
    // prompt_index of another length than prompt_lens
    g.P = 2;
    CHECK_INT(rl_proto_generate_encode(&g, 5, &m, err, sizeof err), 0);
    int64_t one[1] = {1};
    rl_msg_set_tensor(m, "prompt_index", RL_DT_I64, 1, one, idx);
    CHECK_INT(rl_proto_generate_decode(m, &gd, err, sizeof err), RL_EPROTO);
    CHECK_CONTAINS(err, "'prompt_index' has 1 in dimension 0, 2 expected");
    rl_msg_free(&m);

    int32_t rl[2] = {2, 1}, rid[3] = {7, 8, 9};
    float rlp[3] = {-0.5f, -1.0f, -2.0f};
    uint8_t fin[2] = {0, 1};
    rl_proto_generate_reply_t gr = {.lens = rl, .finish = fin, .n_res = 2, .ids = rid,
                                    .logprobs = rlp, .n_ids = 3, .prefill_tokens = 10,
                                    .decode_tokens = 3},
                              grd;
    CHECK_INT(rl_proto_generate_reply_encode(&gr, 5, &m, err, sizeof err), 0);
    m = s_wire(m);
    CHECK_INT(rl_proto_generate_reply_decode(m, &grd, err, sizeof err), 0);
    CHECK(grd.n_res == 2 && grd.n_ids == 3 && grd.ids[2] == 9 && grd.finish[1] == 1);
    CHECK(grd.logprobs[1] == -1.0f && grd.prefill_tokens == 10 && grd.decode_tokens == 3);
    rl_msg_free(&m);
    rl[0] = 5; // lengths no longer add up to the ids
    CHECK_INT(rl_proto_generate_reply_encode(&gr, 5, &m, err, sizeof err), 0);
    CHECK_INT(rl_proto_generate_reply_decode(m, &grd, err, sizeof err), RL_EPROTO);
    CHECK_CONTAINS(err, "generate reply sizes do not add up");
    rl_msg_free(&m);
}

static void test_actor(void) {
    char err[256];
    int32_t tok[6] = {1, 2, 3, 4, 5, 0}, len[2] = {3, 2};
    uint8_t mask[6] = {0, 1, 1, 0, 1, 0};
    double adv[2] = {0.5, -0.5};
    float mu[6] = {0, -1, -1, 0, -2, 0};
    rl_msg_t *m = NULL;
    rl_proto_logprobs_t lp = {tok, len, 2, 3, 0, 0.8}, lpd;
    CHECK_INT(rl_proto_logprobs_encode(&lp, 1, &m, err, sizeof err), 0);
    m = s_wire(m);
    CHECK_INT(rl_proto_logprobs_decode(m, &lpd, err, sizeof err), 0);
    CHECK(lpd.B == 2 && lpd.T == 3 && lpd.adapter == 0 && lpd.temperature == 0.8);
    CHECK(lpd.tokens[4] == 5 && lpd.lengths[1] == 2);
    rl_msg_free(&m);
    float out[6] = {0, -1, -2, 0, -3, 0};
    rl_proto_logprobs_reply_t lr = {out, 2, 3}, lrd;
    CHECK_INT(rl_proto_logprobs_reply_encode(&lr, 1, &m, err, sizeof err), 0);
    CHECK_INT(rl_proto_logprobs_reply_decode(m, &lrd, err, sizeof err), 0);
    CHECK(lrd.B == 2 && lrd.T == 3 && lrd.logp[4] == -3.0f);
    rl_msg_free(&m);

    rl_proto_train_t t = {.loss = "grpo", .step = 4, .lr = 1e-3, .temperature = 1.0,
                          .tokens = tok, .lengths = len, .mask = mask, .adv = adv,
                          .mu_logp = mu, .ref_logp = NULL, .B = 2, .T = 3, .denom = 3,
                          .micro_batch = 1, .iterations = 2, .want_weights = 1};
    rl_proto_train_t td;
    CHECK_INT(rl_proto_train_encode(&t, 2, &m, err, sizeof err), 0);
    m = s_wire(m);
    CHECK_INT(rl_proto_train_decode(m, &td, err, sizeof err), 0);
    CHECK_STR(td.loss, "grpo");
    CHECK(td.step == 4 && td.lr == 1e-3 && td.B == 2 && td.T == 3 && td.adv[1] == -0.5);
    CHECK(td.mu_logp && td.mu_logp[4] == -2.0f && td.ref_logp == NULL);
    CHECK(td.denom == 3 && td.micro_batch == 1 && td.iterations == 2 && td.want_weights == 1);
    rl_msg_free(&m);
    // SFT: no advantages; an unknown loss; a mask of another shape; a length past T
    t.loss = "sft";
    t.adv = NULL;
    t.mu_logp = NULL;
    CHECK_INT(rl_proto_train_encode(&t, 2, &m, err, sizeof err), 0);
    CHECK_INT(rl_proto_train_decode(m, &td, err, sizeof err), 0);
    CHECK(td.adv == NULL);
    rl_msg_free(&m);
    t.loss = "grpo";
    CHECK_INT(rl_proto_train_encode(&t, 2, &m, err, sizeof err), 0);
    CHECK_INT(rl_proto_train_decode(m, &td, err, sizeof err), RL_EPROTO);
    CHECK_CONTAINS(err, "train: the grpo loss needs 'adv' or 'token_adv'");
    rl_msg_free(&m);
    t.loss = "kto";
    t.adv = adv;
    CHECK_INT(rl_proto_train_encode(&t, 2, &m, err, sizeof err), 0);
    CHECK_INT(rl_proto_train_decode(m, &td, err, sizeof err), RL_EPROTO);
    CHECK_CONTAINS(err, "unknown loss 'kto'");
    rl_msg_free(&m);
    t.loss = "grpo";
    CHECK_INT(rl_proto_train_encode(&t, 2, &m, err, sizeof err), 0);
    int64_t sh[2] = {3, 2};
    rl_msg_set_tensor(m, "mask", RL_DT_U8, 2, sh, mask);
    CHECK_INT(rl_proto_train_decode(m, &td, err, sizeof err), RL_EPROTO);
    CHECK_CONTAINS(err, "train: 'mask' has 3 in dimension 0, 2 expected");
    rl_msg_free(&m);
    len[0] = 4;
    CHECK_INT(rl_proto_train_encode(&t, 2, &m, err, sizeof err), 0);
    CHECK_INT(rl_proto_train_decode(m, &td, err, sizeof err), RL_EPROTO);
    CHECK_CONTAINS(err, "train: a length outside [1, T]");
    rl_msg_free(&m);
    len[0] = 3;
    // a missing field and a field of another type
    CHECK_INT(rl_proto_train_encode(&t, 2, &m, err, sizeof err), 0);
    rl_msg_t *bare = rl_msg_new("train", 2);
    CHECK_INT(rl_proto_train_decode(bare, &td, err, sizeof err), RL_EPROTO);
    CHECK_CONTAINS(err, "train: missing string 'loss'");
    rl_msg_free(&bare);
    rl_msg_set_str(m, "lr", "fast");
    CHECK_INT(rl_proto_train_decode(m, &td, err, sizeof err), RL_EPROTO);
    CHECK_CONTAINS(err, "train: ");
    CHECK_CONTAINS(err, "lr");
    rl_msg_free(&m);

    float old[6] = {0, -1, -1, 0, -2, 0}, w[3] = {0.1f, 0.2f, 0.3f};
    rl_loss_stats_t st0 = {0};
    rl_loss_stats_put(&st0, "loss", 0.25);
    rl_loss_stats_put(&st0, "tokens", 3);
    rl_loss_stats_put(&st0, "kl", 0.01);
    rl_loss_stats_put(&st0, "grad_norm", 1.5);
    rl_loss_stats_put(&st0, "entropy", 2.0);
    rl_proto_train_reply_t tr = {.old_logp = old, .B = 2, .T = 3, .iterations = 2,
                                 .weights = w, .n = 3},
                           trd;
    rl_proto_train_reply_set_stats(&tr, &st0);
    CHECK_INT(rl_proto_train_reply_encode(&tr, 2, &m, err, sizeof err), 0);
    m = s_wire(m);
    CHECK_INT(rl_proto_train_reply_decode(m, &trd, err, sizeof err), 0);
    rl_loss_stats_t std_;
    rl_proto_train_reply_stats(&trd, &std_);
    double v1 = 0, v2 = 0;
    CHECK(trd.B == 2 && trd.T == 3 && trd.n_stats == 5 && std_.n == 5 && std_.updates == 1);
    CHECK(rl_loss_stats_get(&std_, "loss", &v1) && v1 == 0.25);
    CHECK(rl_loss_stats_get(&std_, "grad_norm", &v2) && v2 == 1.5);
    CHECK(strcmp(std_.name[3], "grad_norm") == 0 && !rl_loss_stats_get(&std_, "ratio", &v1));
    CHECK(trd.iterations == 2 && trd.n == 3 && trd.weights[2] == 0.3f);
    rl_msg_free(&m);
    tr.weights = NULL; // want_weights = 0
    tr.n = 0;
    CHECK_INT(rl_proto_train_reply_encode(&tr, 2, &m, err, sizeof err), 0);
    CHECK_INT(rl_proto_train_reply_decode(m, &trd, err, sizeof err), 0);
    CHECK(trd.weights == NULL && trd.n == 0);
    rl_msg_free(&m);
    // an empty list is a list; a hostile one is refused naming what is wrong: past the bound,
    // a name of other bytes, too long, empty, twice, and names and values of different counts
    rl_loss_stats_t none = {0};
    rl_proto_train_reply_set_stats(&tr, &none);
    CHECK_INT(rl_proto_train_reply_encode(&tr, 2, &m, err, sizeof err), 0);
    m = s_wire(m);
    CHECK_INT(rl_proto_train_reply_decode(m, &trd, err, sizeof err), 0);
    CHECK(trd.n_stats == 0);
    rl_msg_free(&m);
    static const char *const names[] = {"a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k",
                                        "l", "m", "n", "o", "p", "q", "r", "s", "t", "u", "v",
                                        "w", "x", "y", "z", "aa", "ab", "ac", "ad", "ae", "af",
                                        "ag"};
    double vals[33] = {0};
    const struct {
        const char *first; // names[0] replaced, or NULL
        int n;
        const char *want;
    } bad[] = {
        {NULL, 33, "33 statistics, at most 32"},
        {"Loss", 2, "statistic 0 is not a name"},
        {"clip-low", 2, "statistic 0 is not a name"},
        {"a_name_of_forty_nine_bytes_is_one_byte_too_long_x", 2, "statistic 0 is not a name"},
        {"", 2, "statistic 0 is not a name"},
        {"b", 2, "statistic 'b' twice"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const char *nm[33];
        memcpy(nm, names, sizeof nm);
        if (bad[i].first) {
            nm[0] = bad[i].first;
        }
        tr.stat_names = nm;
        tr.stat_lens = NULL;
        tr.n_stats = bad[i].n;
        tr.stats = vals;
        CHECK_INT(rl_proto_train_reply_encode(&tr, 2, &m, err, sizeof err), 0);
        m = s_wire(m);
        CHECK_INT(rl_proto_train_reply_decode(m, &trd, err, sizeof err), RL_EPROTO);
        CHECK_CONTAINS(err, bad[i].want);
        rl_msg_free(&m);
    }
    tr.stat_names = names;
    tr.n_stats = 2;
    CHECK_INT(rl_proto_train_reply_encode(&tr, 2, &m, err, sizeof err), 0);
    int64_t three = 3;
    rl_msg_set_tensor(m, "stats", RL_DT_F64, 1, &three, vals); // 2 names, 3 values
    CHECK_INT(rl_proto_train_reply_decode(m, &trd, err, sizeof err), RL_EPROTO);
    CHECK_CONTAINS(err, "'stats' has 3 in dimension 0, 2 expected");
    rl_msg_free(&m);

    rl_proto_export_weights_reply_t ex = {"full", w, 3}, exd;
    CHECK_INT(rl_proto_export_weights_reply_encode(&ex, 8, &m, err, sizeof err), 0);
    CHECK_INT(rl_proto_export_weights_reply_decode(m, &exd, err, sizeof err), 0);
    CHECK(strcmp(exd.kind, "full") == 0 && exd.n == 3);
    rl_msg_free(&m);

    rl_proto_save_t sv = {"/x/step-3.tmp", 0, NULL}, svd;
    CHECK_INT(rl_proto_save_encode(&sv, 9, &m, err, sizeof err), 0);
    CHECK_STR(rl_msg_op(m), "save");
    CHECK_INT(rl_proto_save_decode(m, &svd, err, sizeof err), 0);
    CHECK_STR(svd.dir, "/x/step-3.tmp");
    rl_msg_free(&m);
    sv.model_train_step = 12;
    CHECK_INT(rl_proto_load_encode(&sv, 9, &m, err, sizeof err), 0);
    CHECK_STR(rl_msg_op(m), "load");
    CHECK_INT(rl_proto_load_decode(m, &svd, err, sizeof err), 0);
    CHECK_INT((int)svd.model_train_step, 12);
    rl_msg_free(&m);
    rl_proto_save_reply_t sr = {12, 77824}, srd;
    CHECK_INT(rl_proto_save_reply_encode(&sr, 9, &m, err, sizeof err), 0);
    CHECK_INT(rl_proto_load_reply_decode(m, &srd, err, sizeof err), 0);
    CHECK(srd.model_train_step == 12 && srd.n_trainable == 77824);
    rl_msg_free(&m);
    rl_proto_save_final_t sf = {"/x/final.tmp", 1, NULL, 21}, sfd;
    CHECK_INT(rl_proto_save_final_encode(&sf, 10, &m, err, sizeof err), 0);
    CHECK_INT(rl_proto_save_final_decode(m, &sfd, err, sizeof err), 0);
    CHECK(sfd.bf16 == 1 && strcmp(sfd.dir, "/x/final.tmp") == 0 && sfd.pad_token_id == 21);
    rl_msg_free(&m);
}

// PPO's additions: the critic's values verb, the ppo and value losses with their tensors, the
// value statistics of a train reply, and the part (policy or critic) of save, load, save_final.
static void test_critic(void) {
    char err[256];
    int32_t tok[6] = {5, 6, 7, 5, 6, 0}, len[2] = {3, 2};
    rl_proto_values_t v = {tok, len, 2, 3, 0}, vd;
    rl_msg_t *m = NULL;
    CHECK_INT(rl_proto_values_encode(&v, 11, &m, err, sizeof err), 0);
    CHECK_STR(rl_msg_op(m), "values");
    m = s_wire(m);
    CHECK_INT(rl_proto_values_decode(m, &vd, err, sizeof err), 0);
    CHECK(vd.B == 2 && vd.T == 3 && vd.tokens[4] == 6 && vd.lengths[1] == 2 && vd.scores == 0);
    rl_msg_free(&m);
    v.scores = 1; // a reward model's scores: the flag crosses the wire
    CHECK_INT(rl_proto_values_encode(&v, 11, &m, err, sizeof err), 0);
    m = s_wire(m);
    CHECK_INT(rl_proto_values_decode(m, &vd, err, sizeof err), 0);
    CHECK(vd.scores == 1);
    rl_msg_free(&m);
    v.scores = 0;
    len[1] = 0;
    CHECK_INT(rl_proto_values_encode(&v, 11, &m, err, sizeof err), 0);
    CHECK_INT(rl_proto_values_decode(m, &vd, err, sizeof err), RL_EPROTO);
    CHECK_CONTAINS(err, "values: a length outside [1, T]");
    rl_msg_free(&m);
    len[1] = 2;
    float val[6] = {0, 0.5f, 0.25f, 0, -1, 0};
    rl_proto_values_reply_t vr = {val, 2, 3}, vrd;
    CHECK_INT(rl_proto_values_reply_encode(&vr, 11, &m, err, sizeof err), 0);
    m = s_wire(m);
    CHECK_INT(rl_proto_values_reply_decode(m, &vrd, err, sizeof err), 0);
    CHECK(vrd.B == 2 && vrd.T == 3 && vrd.values[1] == 0.5f && vrd.values[4] == -1);
    rl_msg_free(&m);

    uint8_t mask[6] = {0, 1, 1, 0, 1, 0};
    float adv[6] = {0, 1, 2, 0, 3, 0}, old[6] = {0, -1, -2, 0, -3, 0}, ret[6] = {0, 1, 1, 0, 2, 0};
    rl_proto_train_t t = {.loss = "ppo", .step = 4, .lr = 1e-3, .temperature = 1,
                          .tokens = tok, .lengths = len, .mask = mask, .token_adv = adv,
                          .B = 2, .T = 3, .denom = 3, .micro_batch = 2, .iterations = 1},
                     td;
    CHECK_INT(rl_proto_train_encode(&t, 12, &m, err, sizeof err), 0);
    CHECK_INT(rl_proto_train_decode(m, &td, err, sizeof err), RL_EPROTO);
    CHECK_CONTAINS(err, "the ppo loss needs 'token_adv' and 'old_logp'");
    rl_msg_free(&m);
    t.old_logp = old;
    CHECK_INT(rl_proto_train_encode(&t, 12, &m, err, sizeof err), 0);
    m = s_wire(m);
    CHECK_INT(rl_proto_train_decode(m, &td, err, sizeof err), 0);
    CHECK(td.old_logp && td.old_logp[2] == -2 && td.token_adv[4] == 3 && !td.values);
    rl_msg_free(&m);
    t.loss = "value";
    t.old_logp = NULL;
    t.token_adv = NULL;
    t.values = val;
    CHECK_INT(rl_proto_train_encode(&t, 12, &m, err, sizeof err), 0);
    CHECK_INT(rl_proto_train_decode(m, &td, err, sizeof err), RL_EPROTO);
    CHECK_CONTAINS(err, "the value loss needs 'values' and 'returns'");
    rl_msg_free(&m);
    t.returns = ret;
    CHECK_INT(rl_proto_train_encode(&t, 12, &m, err, sizeof err), 0);
    m = s_wire(m);
    CHECK_INT(rl_proto_train_decode(m, &td, err, sizeof err), 0);
    CHECK(td.values[2] == 0.25f && td.returns[4] == 2 && !td.old_logp);
    rl_msg_free(&m);
    // the value loss's statistics travel as any loss's list
    rl_loss_stats_t vst = {0};
    rl_loss_stats_put(&vst, "loss", 0.5);
    rl_loss_stats_put(&vst, "clipped", 1);
    rl_loss_stats_put(&vst, "value_sum", -0.25);
    rl_proto_train_reply_t tr = {.old_logp = old, .B = 2, .T = 3, .iterations = 1}, trd;
    rl_proto_train_reply_set_stats(&tr, &vst);
    CHECK_INT(rl_proto_train_reply_encode(&tr, 12, &m, err, sizeof err), 0);
    m = s_wire(m);
    CHECK_INT(rl_proto_train_reply_decode(m, &trd, err, sizeof err), 0);
    rl_loss_stats_t vls;
    rl_proto_train_reply_stats(&trd, &vls);
    double c = 0, vs = 0;
    CHECK(rl_loss_stats_get(&vls, "clipped", &c) && c == 1);
    CHECK(rl_loss_stats_get(&vls, "value_sum", &vs) && vs == -0.25);
    rl_msg_free(&m);

    // dpo: rows in pairs with the reference sums; the reply's preference statistics
    double rs[2] = {-3.5, -7.25};
    rl_proto_train_t dq = {.loss = "dpo", .step = 1, .lr = 1e-3, .temperature = 1,
                           .tokens = tok, .lengths = len, .mask = mask, .B = 2, .T = 3,
                           .denom = 1, .micro_batch = 2, .iterations = 1};
    CHECK_INT(rl_proto_train_encode(&dq, 15, &m, err, sizeof err), 0);
    CHECK_INT(rl_proto_train_decode(m, &td, err, sizeof err), RL_EPROTO);
    CHECK_CONTAINS(err, "the dpo loss needs 'ref_sum' and rows in pairs");
    rl_msg_free(&m);
    dq.ref_sum = rs;
    CHECK_INT(rl_proto_train_encode(&dq, 15, &m, err, sizeof err), 0);
    m = s_wire(m);
    CHECK_INT(rl_proto_train_decode(m, &td, err, sizeof err), 0);
    CHECK(td.ref_sum && td.ref_sum[1] == -7.25);
    rl_msg_free(&m);
    rl_proto_save_t sv = {"/x/step-3.tmp/critic", 7, "critic"}, svd;
    CHECK_INT(rl_proto_save_encode(&sv, 13, &m, err, sizeof err), 0);
    m = s_wire(m);
    CHECK_INT(rl_proto_save_decode(m, &svd, err, sizeof err), 0);
    CHECK_STR(svd.part, "critic");
    rl_msg_free(&m);
    CHECK_INT(rl_proto_load_encode(&sv, 13, &m, err, sizeof err), 0);
    CHECK_INT(rl_proto_load_decode(m, &svd, err, sizeof err), 0);
    CHECK(svd.model_train_step == 7 && strcmp(svd.part, "critic") == 0);
    rl_msg_free(&m);
    sv.part = "value_head";
    CHECK_INT(rl_proto_load_encode(&sv, 13, &m, err, sizeof err), 0);
    CHECK_INT(rl_proto_load_decode(m, &svd, err, sizeof err), RL_EPROTO);
    CHECK_CONTAINS(err, "load: unknown part 'value_head' (policy, critic)");
    rl_msg_free(&m);
    rl_proto_save_final_t sf = {"/x/final.tmp/critic", 0, "critic", -1}, sfd;
    CHECK_INT(rl_proto_save_final_encode(&sf, 14, &m, err, sizeof err), 0);
    CHECK_INT(rl_proto_save_final_decode(m, &sfd, err, sizeof err), 0);
    CHECK_STR(sfd.part, "critic");
    CHECK_INT((int)sfd.pad_token_id, -1);
    rl_msg_free(&m);
    sf.part = NULL; // absent: the policy
    CHECK_INT(rl_proto_save_final_encode(&sf, 14, &m, err, sizeof err), 0);
    CHECK_INT(rl_proto_save_final_decode(m, &sfd, err, sizeof err), 0);
    CHECK(sfd.part == NULL);
    rl_msg_free(&m);
}

static void test_reward(void) {
    char err[256];
    const char *pr[2] = {"1+1=", "2+2="}, *co[2] = {"2", "5"}, *rows[2] = {"{}", "{}"};
    size_t prl[2] = {4, 4}, col[2] = {1, 1}, rowl[2] = {2, 2};
    int32_t ids[3] = {1, 2, 3}, lens[2] = {1, 2};
    rl_proto_score_t sc = {.reward = 1, .prompts = pr, .completions = co, .rows = rows,
                           .prompt_lens = prl, .completion_lens = col, .row_lens = rowl,
                           .n = 2, .ids = ids, .n_ids = 3, .lens = lens};
    rl_proto_score_t scd;
    rl_msg_t *m = NULL;
    CHECK_INT(rl_proto_score_encode(&sc, 4, &m, err, sizeof err), 0);
    m = s_wire(m);
    CHECK_INT(rl_proto_score_decode(m, &scd, err, sizeof err), 0);
    CHECK(scd.reward == 1 && scd.n == 2 && scd.n_ids == 3 && scd.lens[1] == 2);
    CHECK(strcmp(scd.completions[1], "5") == 0 && scd.row_lens[0] == 2);
    rl_msg_free(&m);
    // lists of different lengths; lens past the ids
    CHECK_INT(rl_proto_score_encode(&sc, 4, &m, err, sizeof err), 0);
    rl_msg_set_strs(m, "rows", rows, rowl, 1);
    CHECK_INT(rl_proto_score_decode(m, &scd, err, sizeof err), RL_EPROTO);
    CHECK_CONTAINS(err, "score: 'rows' holds 1 strings, 2 expected");
    rl_msg_free(&m);
    lens[1] = 3;
    CHECK_INT(rl_proto_score_encode(&sc, 4, &m, err, sizeof err), 0);
    CHECK_INT(rl_proto_score_decode(m, &scd, err, sizeof err), RL_EPROTO);
    CHECK_CONTAINS(err, "score: lens exceed ids");
    rl_msg_free(&m);
    double s[2] = {1.0, NAN};
    rl_proto_score_reply_t sr = {s, 2}, srd;
    CHECK_INT(rl_proto_score_reply_encode(&sr, 4, &m, err, sizeof err), 0);
    m = s_wire(m);
    CHECK_INT(rl_proto_score_reply_decode(m, &srd, err, sizeof err), 0);
    CHECK(srd.n == 2 && srd.scores[0] == 1.0 && isnan(srd.scores[1]));
    rl_msg_free(&m);
}

static void test_envelopes(void) {
    rl_msg_t *m = NULL;
    int ok = 1;
    const char *why = NULL;
    CHECK_INT(rl_proto_fail(5, "it broke", &m), 0);
    CHECK_INT(rl_proto_reply_status(m, &ok, &why), 0);
    CHECK_INT(ok, 0);
    CHECK_STR(why, "it broke");
    rl_msg_free(&m);
    CHECK_INT(rl_proto_ok(6, &m), 0);
    CHECK_INT(rl_proto_reply_status(m, &ok, &why), 0);
    CHECK_INT(ok, 1);
    rl_msg_free(&m);
    CHECK_INT(rl_proto_request(RL_PROTO_SHUTDOWN, 7, &m), 0);
    CHECK_STR(rl_msg_op(m), "shutdown");
    CHECK_INT(rl_proto_reply_status(m, &ok, &why), RL_EPROTO); // not a reply
    rl_msg_free(&m);
    CHECK_INT(rl_proto_welcome(0, &m), 0);
    CHECK_STR(rl_msg_op(m), "welcome");
    rl_msg_free(&m);
}

// The fuzz target's seeds of the train reply's statistics (fuzz/corpus/wire/train_reply_stats*,
// one frame each: byte 0 = 0, then the msgpack map): the good one decodes to its list, each bad
// one is refused for its own reason.
static void test_corpus_train_reply(void) {
    static const struct {
        const char *file, *want; // want NULL: decodes
    } seeds[] = {
        {"train_reply_stats.bin", NULL},
        {"train_reply_stats_twice.bin", "statistic 'loss' twice"},
        {"train_reply_stats_badname.bin", "statistic 1 is not a name"},
        {"train_reply_stats_count.bin", "'stats' has 3 in dimension 0, 4 expected"},
    };
    for (size_t i = 0; i < sizeof seeds / sizeof seeds[0]; i++) {
        char path[512], err[512] = "";
        snprintf(path, sizeof path, "%s/fuzz/corpus/wire/%s", RL_SOURCE_DIR, seeds[i].file);
        size_t len = 0;
        char *bytes = rl_test_read_file(path, &len);
        CHECK_MSG(bytes && len > 1 && bytes[0] == 0, "%s: unreadable", path);
        if (!bytes || len < 2) {
            free(bytes);
            continue;
        }
        rl_frame_t fr = {bytes + 1, len - 1};
        rl_msg_t *m = NULL;
        CHECK_INT(rl_msg_decode(&fr, 1, &m, err, sizeof err), 0);
        rl_proto_train_reply_t x;
        int rc = m ? rl_proto_train_reply_decode(m, &x, err, sizeof err) : -1;
        if (!seeds[i].want) {
            CHECK_MSG(rc == 0, "%s: %s", seeds[i].file, err);
            rl_loss_stats_t st;
            double v = 0;
            if (rc == 0) {
                rl_proto_train_reply_stats(&x, &st);
                CHECK(st.n == 4 && rl_loss_stats_get(&st, "grad_norm", &v) && v == 1.5);
            }
        } else {
            CHECK_INT(rc, RL_EPROTO);
            CHECK_CONTAINS(err, seeds[i].want);
        }
        rl_msg_free(&m);
        free(bytes);
    }
}

// ---- the bytes, pinned ------------------------------------------------------------------------
// Every message of the protocol, every field set (optional ones too), encoded: frame 0's bytes in
// hex; then what each decoder says of hostile copies: an empty message of the op, and each key in
// turn replaced by nil, by a string and by an int, and left out (its name in the bytes changed).
// tests/fixtures/proto/golden.txt holds the transcript recorded with the hand-written field
// tables (before the protocol was defined once, transport/rl_proto_def.h), so a change to the bytes
// or to a decoder's refusals shows as a diff.
// RL_PROTO_GOLDEN_WRITE=1 rewrites the file instead (then review its diff).

typedef int (*s_decode_fn)(const rl_msg_t *msg, void *out, char *err, size_t err_len);

static void s_golden_one(FILE *out, const char *name, rl_msg_t *m, s_decode_fn dec, size_t size) {
    const rl_frame_t *fr;
    int n = 0;
    CHECK_INT(rl_msg_encode(m, &fr, &n), 0);
    fprintf(out, "%s frames %d:", name, n);
    for (int f = 0; f < n; f++) {
        fprintf(out, " ");
        for (size_t i = 0; i < fr[f].len; i++) {
            fprintf(out, "%02x", ((const unsigned char *)fr[f].data)[i]);
        }
    }
    fprintf(out, "\n");
    rl_msg_t *back = NULL;
    char err[512] = "";
    CHECK_INT(rl_msg_decode(fr, n, &back, err, sizeof err), 0);
    void *st = calloc(1, size);
    rl_msg_t *empty = rl_msg_new(rl_msg_op(m), rl_msg_id(m));
    int rc = dec(empty, st, err, sizeof err);
    fprintf(out, "%s empty: %d %s\n", name, rc, rc ? err : "");
    rl_msg_free(&empty);
    for (int k = 0; back && k < rl_msg_count(back); k++) {
        const char *key = rl_msg_key(back, k);
        if (strcmp(key, "ok") == 0) {
            continue;
        }
        // gone: the key's name in frame 0 (its first occurrence, a fixstr) renamed "Z..."
        size_t kl = strlen(key);
        unsigned char *f0 = malloc(fr[0].len);
        const unsigned char *src = fr[0].data;
        memcpy(f0, src, fr[0].len);
        for (size_t i = 0; kl < 32 && i + 1 + kl <= fr[0].len; i++) {
            if (src[i] == (0xa0 | kl) && memcmp(src + i + 1, key, kl) == 0) {
                f0[i + 1] = 'Z';
                break;
            }
        }
        rl_frame_t gone[RL_WIRE_MAX_FRAMES + 1];
        for (int f = 0; f < n && f <= RL_WIRE_MAX_FRAMES; f++) {
            gone[f] = fr[f];
        }
        gone[0].data = f0;
        for (int how = 0; how < 4; how++) {
            rl_msg_t *c = NULL;
            CHECK_INT(rl_msg_decode(how == 3 ? gone : fr, n, &c, err, sizeof err), 0);
            if (!c) {
                continue;
            }
            const char *k2 = rl_msg_key(c, k);
            if (how == 0) {
                rl_msg_set_nil(c, k2);
            } else if (how == 1) {
                rl_msg_set_str(c, k2, "x");
            } else if (how == 2) {
                rl_msg_set_int(c, k2, 3);
            }
            static const char *const hows[] = {"nil", "str", "int", "gone"};
            err[0] = 0;
            rc = dec(c, st, err, sizeof err);
            fprintf(out, "%s %s=%s: %d %s\n", name, key, hows[how], rc, rc ? err : "");
            rl_msg_free(&c);
        }
        free(f0);
    }
    free(st);
    rl_msg_free(&back);
    rl_msg_free(&m);
}

#define S_GOLDEN(out, name, type, ...)                                                         \
    do {                                                                                       \
        type x_ = __VA_ARGS__;                                                                 \
        rl_msg_t *m_ = NULL;                                                                   \
        char e_[256] = "";                                                                     \
        CHECK_MSG(rl_proto_##name##_encode(&x_, 7, &m_, e_, sizeof e_) == 0, "%s: %s", #name,  \
                  e_);                                                                         \
        if (m_) {                                                                              \
            s_golden_one(out, #name, m_, (s_decode_fn)rl_proto_##name##_decode, sizeof x_);    \
        }                                                                                      \
    } while (0)

static void s_golden_all(FILE *out) {
    const char *caps[] = {"generate", "shutdown"};
    const char *pr[] = {"p0", "p1"}, *co[] = {"c0", "c1"}, *rows[] = {"{}", "{\"a\":1}"};
    const char *sn[] = {"loss", "grad_norm"};
    int32_t tok[6] = {1, 2, 3, 4, 5, 0}, len2[2] = {3, 2}, ids[5] = {1, 2, 3, 4, 5};
    int32_t stop[1] = {9}, rl[2] = {2, 1}, rid[3] = {7, 8, 9}, slen[2] = {1, 2};
    int64_t idx[2] = {10, 11};
    uint8_t mask[6] = {0, 1, 1, 0, 1, 0}, fin[2] = {0, 1}, data[4] = {1, 2, 3, 4};
    float f6[6] = {0, -1, -2, 0, -3, 0}, w[3] = {0.1f, 0.2f, 0.3f}, rlp[3] = {-0.5f, -1, -2};
    double adv[2] = {0.5, -0.5}, sv[2] = {0.25, 1.5}, sc[2] = {1, NAN};
    S_GOLDEN(out, hello, rl_proto_hello_t,
             {.role = "sampler", .rank = 3, .pid = 1234, .token = "t0k", .caps = caps,
              .n_caps = 2, .error = "no model", .host = "h2"});
    S_GOLDEN(out, hb, rl_proto_hb_t, {.token = "t0k"});
    S_GOLDEN(out, configure, rl_proto_configure_t, {.recipe = "run: {}\n", .threads = 2});
    S_GOLDEN(out, load_weights, rl_proto_load_weights_t,
             {.version = 4, .kind = "lora", .weights = w, .n = 3, .offset = 3, .total = 6});
    const uint8_t hnd[8] = {9, 8, 7, 6, 5, 4, 3, 2}; // a handle's first bytes (64 on the wire)
    const int64_t arr[2] = {-7, 12};
    S_GOLDEN(
        out, load_weights, rl_proto_load_weights_t,
        {.version = 5, .kind = "full", .ipc = hnd, .n_ipc = 8, .ipc_array = arr, .n_ipc_array = 2});
    S_GOLDEN(out, load_weights_reply, rl_proto_load_weights_reply_t, {.version = 4});
    S_GOLDEN(out, generate, rl_proto_generate_t,
             {.version = 1, .prompts = ids, .n_prompt_ids = 5, .prompt_lens = len2,
              .prompt_index = idx, .P = 2, .n = 3, .max_new_tokens = 8, .temperature = 0.7,
              .top_p = 0.9, .top_k = 5, .seed = 42, .stop_ids = stop, .n_stop = 1});
    int64_t sess[2] = {1001, 0}; // an episode's turn (sessions, added after the recording)
    S_GOLDEN(out, generate, rl_proto_generate_t,
             {.version = 1,
              .prompts = ids,
              .n_prompt_ids = 5,
              .prompt_lens = len2,
              .prompt_index = idx,
              .sessions = sess,
              .P = 2,
              .n = 1,
              .max_new_tokens = 8,
              .temperature = 0.7,
              .top_p = 0.9,
              .top_k = 5,
              .seed = 42});
    S_GOLDEN(out, generate_reply, rl_proto_generate_reply_t,
             {.lens = rl, .finish = fin, .n_res = 2, .ids = rid, .logprobs = rlp, .n_ids = 3,
              .prefill_tokens = 10, .decode_tokens = 3});
    S_GOLDEN(out, logprobs, rl_proto_logprobs_t,
             {.tokens = tok, .lengths = len2, .B = 2, .T = 3, .adapter = 0, .temperature = 0.8});
    S_GOLDEN(out, logprobs_reply, rl_proto_logprobs_reply_t, {.logp = f6, .B = 2, .T = 3});
    S_GOLDEN(out, train, rl_proto_train_t,
             {.loss = "grpo", .step = 4, .lr = 1e-3, .temperature = 1.0, .tokens = tok,
              .lengths = len2, .mask = mask, .adv = adv, .token_adv = f6, .mu_logp = f6,
              .ref_logp = f6, .old_logp = f6, .values = f6, .returns = f6, .ref_sum = adv,
              .margin = adv, .B = 2, .T = 3, .denom = 3, .micro_batch = 1, .iterations = 2,
              .want_weights = 0});
    S_GOLDEN(out, train_reply, rl_proto_train_reply_t,
             {.old_logp = f6, .B = 2, .T = 3, .stat_names = sn, .n_stats = 2, .stats = sv,
              .iterations = 2, .weights = w, .n = 3});
    S_GOLDEN(out, export_weights_reply, rl_proto_export_weights_reply_t,
             {.kind = "full", .weights = w, .n = 3});
    S_GOLDEN(out, publish_weights_reply, rl_proto_publish_weights_reply_t,
             {.handle = hnd, .n_handle = 8, .layout = -7, .floats = 12});
    S_GOLDEN(out, save, rl_proto_save_t, {.dir = "/x/step-3.tmp", .part = "critic"});
    S_GOLDEN(out, save_reply, rl_proto_save_reply_t, {.model_train_step = 12, .n_trainable = 9});
    S_GOLDEN(out, load, rl_proto_save_t,
             {.dir = "/x/step-3", .model_train_step = 12, .part = "policy"});
    S_GOLDEN(out, load_reply, rl_proto_save_reply_t, {.model_train_step = 12, .n_trainable = 9});
    S_GOLDEN(out, save_final, rl_proto_save_final_t,
             {.dir = "/x/final.tmp", .bf16 = 1, .part = "critic", .pad_token_id = 21});
    S_GOLDEN(out, score, rl_proto_score_t,
             {.reward = 1, .prompts = pr, .completions = co, .rows = rows, .n = 2, .ids = ids,
              .n_ids = 3, .lens = slen});
    S_GOLDEN(out, score_reply, rl_proto_score_reply_t, {.scores = sc, .n = 2});
    S_GOLDEN(out, values, rl_proto_values_t,
             {.tokens = tok, .lengths = len2, .B = 2, .T = 3, .scores = 1});
    S_GOLDEN(out, values_reply, rl_proto_values_reply_t, {.values = f6, .B = 2, .T = 3});
    S_GOLDEN(out, attach, rl_proto_attach_t,
             {.session = "0123456789abcdef0123456789abcdef", .model_hash = "00ff00ff00ff00ff",
              .run = "run x of h (pid 1)"});
    S_GOLDEN(out, attach_reply, rl_proto_attach_reply_t,
             {.session = "s", .pid = 77, .host = "h", .threads = 4, .needs_model = 1});
    S_GOLDEN(out, model_file, rl_proto_model_file_t,
             {.name = "config.json", .offset = 4, .total = 8, .data = data, .n = 4, .last = 1});
}

static void test_golden(void) {
    char path[512];
    snprintf(path, sizeof path, "%s/proto/golden.txt", RL_FIXTURES);
    char *got = NULL;
    size_t got_len = 0;
    FILE *out = open_memstream(&got, &got_len);
    CHECK(out != NULL);
    if (!out) {
        return;
    }
    s_golden_all(out);
    fclose(out);
    const char *w = getenv("RL_PROTO_GOLDEN_WRITE");
    if (w && strcmp(w, "1") == 0) {
        FILE *f = fopen(path, "w");
        CHECK_MSG(f && fwrite(got, 1, got_len, f) == got_len, "%s: cannot write", path);
        if (f) {
            fclose(f);
        }
    }
    size_t want_len = 0;
    char *want = rl_test_read_file(path, &want_len);
    CHECK_MSG(want != NULL, "%s: unreadable", path);
    if (want) {
        // the first line that differs, both ways
        const char *a = want, *b = got;
        int line = 1;
        while (*a && *b && *a == *b) {
            line += *a == '\n';
            a++;
            b++;
        }
        int same = want_len == got_len && memcmp(want, got, got_len) == 0;
        if (!same) {
            while (a > want && a[-1] != '\n') {
                a--;
            }
            while (b > got && b[-1] != '\n') {
                b--;
            }
        }
        CHECK_MSG(same, "%s:%d differs:\n  recorded: %.*s\n  now:      %.*s", path, line,
                  (int)strcspn(a, "\n"), a, (int)strcspn(b, "\n"), b);
    }
    free(want);
    free(got);
}

int main(void) {
    RL_TEST_RUN(test_verbs);
    RL_TEST_RUN(test_corpus_train_reply);
    RL_TEST_RUN(test_hello_hb_configure);
    RL_TEST_RUN(test_sampler);
    RL_TEST_RUN(test_actor);
    RL_TEST_RUN(test_critic);
    RL_TEST_RUN(test_reward);
    RL_TEST_RUN(test_envelopes);
    RL_TEST_RUN(test_golden);
    RL_TEST_DONE();
}
