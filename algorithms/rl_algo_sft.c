// rl_algo_sft — supervised fine-tuning (TRL's SFTTrainer; REFERENCE.md §1) as the controller runs
// it. Per step:
//   1. take train.batch_size examples in the run's data order (prompt + completion, a text, or
//      a conversation, tokenized with the chat template; the loss mask covers the completion, or
//      every token without completion_only_loss);
//   2. the actor's update: the negative log-likelihood of the masked tokens, averaged over the
//      step's loss tokens (token_mean over the whole step), in micro-batches of
//      train.micro_batch_size at temperature 1, then clip and AdamW.
// Evaluation: eval/loss over the held-out examples (the same loss, through the actor's logprobs,
// no dropout), and, when the recipe scores with math_answer, eval/accuracy at the sampling
// temperature and greedily on the samplers (the actor's weights synced to them first).
#include "rl_algos.h"

#include "rl_chat.h"
#include "rl_clock.h"
#include "rl_err.h"
#include "rl_eval.h"
#include "rl_hf.h"
#include "rl_log.h"
#include "rl_loss_sft.h"
#include "rl_reward_math.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// ---- the recipe: its keys and checks (rl_recipe_algo_def_t) ----------------------------------

// SFT's own settings (the recipe's RL_RECIPE_K_SETTINGS keys below; r->algorithm.settings).
typedef struct {
    bool completion_only_loss; // prompt/completion rows: the loss on the completion only
} s_sft_settings_t;

static const s_sft_settings_t *s_set(const rl_recipe_t *r) {
    return r->algorithm.settings;
}

// clang-format off
static const rl_recipe_key_t s_sft_keys[] = {
    {.section = "algorithm", .key = "completion_only_loss", .type = RL_RECIPE_T_BOOL,
     .offset = RL_RECIPE_IN(s_sft_settings_t, completion_only_loss), .flags = RL_RECIPE_K_SETTINGS,
     RL_RECIPE_DEF("true"), .doc = "prompt/completion rows: loss on completion tokens only"},
    {0},
};
// clang-format on

// Preference rows are DPO's; a step is train.batch_size examples, which
// train.micro_batch_size divides.
static void s_check(rl_recipe_check_t *c, const rl_recipe_t *r) {
    if (r->data.format == RL_RECIPE_FORMAT_PREFERENCE) {
        rl_recipe_check_err(c, "data.format", "preference rows are data for DPO, not SFT");
    }
    char what[64];
    snprintf(what, sizeof what, "train.batch_size (%d)", r->train.batch_size);
    rl_recipe_check_step(c, r->train.batch_size, what);
}

static const rl_recipe_key_t *const s_keys[] = {s_sft_keys, NULL};

// The loss SFT trains with (the registry's, rl_loss.h).
#define S_LOSS "sft"

typedef struct {
    rl_data_t *train, *eval;
    // accuracy: the eval rows' prompts (tokenized as written) and normalised answers
    rl_eval_data_t *acc_data;
    rl_run_prompt_t *acc_prompts;
    int32_t **acc_ids;
    char **acc_answers;
    int n_acc;
    rl_data_batch_t batch;   // an eval micro-batch
    float *logp;             // its logprobs
    size_t cap_logp;
} s_sft_t;

// 1 when the recipe measures accuracy: held-out data, a cadence (SFT evaluates every
// train.eval_every steps only) and the math_answer reward.
static int s_wants_accuracy(const rl_recipe_t *r) {
    int math = 0;
    for (int i = 0; i < r->n_rewards; i++) {
        math |= r->rewards[i].builtin == RL_RECIPE_REWARD_MATH_ANSWER;
    }
    return math && r->data.eval.n && r->train.eval_every > 0;
}

static void s_roles(const rl_recipe_t *r, rl_algo_roles_t *out) {
    out->sampling = s_wants_accuracy(r);
    out->samplers = out->sampling ? r->roles.samplers : 0;
}

static void s_destroy(void **state) {
    s_sft_t *s = *state;
    if (!s) {
        return;
    }
    for (int i = 0; i < s->n_acc; i++) {
        free(s->acc_ids ? s->acc_ids[i] : NULL);
        free(s->acc_answers ? s->acc_answers[i] : NULL);
    }
    free(s->acc_ids);
    free(s->acc_answers);
    free(s->acc_prompts);
    rl_eval_data_destroy(&s->acc_data);
    rl_data_batch_free(&s->batch);
    free(s->logp);
    rl_data_destroy(&s->eval);
    rl_data_destroy(&s->train);
    free(s);
    *state = NULL;
}

// The eval rows' prompts and answers for the accuracy (their prompts tokenized as written).
static int s_load_accuracy(const rl_recipe_t *r, rl_tokenizer_t *tok, s_sft_t *s, char *err,
                           size_t err_len) {
    char msg[1024];
    s->acc_data =
        rl_eval_data_load(rl_recipe_paths(&r->data.eval), r->data.eval.n, r->data.prompt_field,
                          r->data.answer_field, r->train.eval_samples, msg, sizeof msg);
    if (!s->acc_data) {
        return rl_errf(err, err_len, RL_EINVAL, "eval: %s", msg);
    }
    int n = rl_eval_data_count(s->acc_data);
    s->acc_prompts = calloc((size_t)n + 1, sizeof(*s->acc_prompts));
    s->acc_ids = calloc((size_t)n + 1, sizeof(*s->acc_ids));
    s->acc_answers = calloc((size_t)n + 1, sizeof(*s->acc_answers));
    if (!s->acc_prompts || !s->acc_ids || !s->acc_answers) {
        return rl_errf(err, err_len, RL_ENOMEM, "out of memory");
    }
    for (int i = 0; i < n; i++) {
        const rl_eval_row_t *row = rl_eval_data_row(s->acc_data, i);
        size_t len = 0;
        s->n_acc = i + 1;
        if (rl_tokenizer_encode(tok, row->prompt, strlen(row->prompt), 0, &s->acc_ids[i],
                                &len) != 0) {
            return rl_errf(err, err_len, RL_EINVAL, "eval row %d: %s", i + 1,
                           rl_tokenizer_errmsg(tok));
        }
        s->acc_answers[i] = strdup(row->answer);
        if (!s->acc_answers[i]) {
            return rl_errf(err, err_len, RL_ENOMEM, "out of memory");
        }
        s->acc_prompts[i] = (rl_run_prompt_t){s->acc_ids[i], (int)len, i, 0};
    }
    return 0;
}

// The training data and the held-out rows (data.eval, when evaluations are due) as the run
// trains on them; quiet: no warnings or info lines (the check before the run, `rlctl validate`,
// gives the same errors word for word). caller owns *train and *eval (also on failure).
static int s_load_data(const rl_recipe_t *r, rl_tokenizer_t *tok, int quiet, rl_data_t **train,
                       rl_data_t **eval, char *err, size_t err_len) {
    char msg[2048];
    rl_data_opts_t d;
    rl_data_opts_default(&d);
    d.format = r->data.format;
    d.prompt_field = r->data.prompt_field;
    d.completion_field = r->data.completion_field;
    d.text_field = r->data.text_field;
    d.messages_field = r->data.messages_field;
    d.completion_only_loss = s_set(r)->completion_only_loss;
    d.max_length = r->data.max_length;
    d.truncation = r->data.truncation;
    // EOS after each completion / text: tokenizer_config.json's eos_token, else the model's
    // first eos_token_id
    d.eos_id = rl_tokenizer_eos_id(tok);
    rl_hf_config_t cfg;
    if (d.eos_id < 0 && rl_hf_config_load(r->model.path, &cfg, msg, sizeof msg) == 0 &&
        cfg.n_eos > 0) {
        d.eos_id = cfg.eos_token_ids[0];
    }
    if (d.eos_id < 0 && !quiet) {
        rl_log_warn("no EOS token known (tokenizer_config.json eos_token, config.json "
                    "eos_token_id): completions are trained without one");
    }
    d.chat = rl_run_chat_format(r);
    *train = rl_data_load(rl_recipe_paths(&r->data.train), r->data.train.n, &d, tok, msg,
                          sizeof(msg));
    if (!*train) {
        return rl_errf(err, err_len, RL_EINVAL, "%s", msg);
    }
    if (rl_data_dropped(*train) && !quiet) {
        rl_log_warn("data.train: %zu rows dropped (longer than data.max_length %d tokens)",
                    rl_data_dropped(*train), r->data.max_length);
    }
    if (!quiet) {
        rl_log_info("train data: %zu examples, %lld loss tokens", rl_data_count(*train),
                    (long long)rl_data_loss_tokens(*train));
    }
    if (r->data.eval.n && r->train.eval_every > 0) {
        *eval = rl_data_load(rl_recipe_paths(&r->data.eval), r->data.eval.n, &d, tok, msg,
                             sizeof(msg));
        if (!*eval) {
            return rl_errf(err, err_len, RL_EINVAL, "%s", msg);
        }
        if (rl_data_dropped(*eval) && !quiet) {
            rl_log_warn("data.eval: %zu rows dropped (longer than data.max_length %d tokens)",
                        rl_data_dropped(*eval), r->data.max_length);
        }
    }
    return 0;
}

static int s_create(rl_run_t *run, void **state, size_t *n_train, double *data_frame, char *err,
                    size_t err_len) {
    const rl_recipe_t *r = run->r;
    s_sft_t *s = calloc(1, sizeof *s);
    *state = s;
    if (!s) {
        return rl_errf(err, err_len, RL_ENOMEM, "out of memory");
    }
    int rc = s_load_data(r, run->tok, 0, &s->train, &s->eval, err, err_len);
    if (rc) {
        return rc;
    }
    int longest = 1;
    if (s_wants_accuracy(r)) {
        rc = s_load_accuracy(r, run->tok, s, err, err_len);
        if (rc) {
            return rc;
        }
    }
    const rl_data_t *sets[2] = {s->train, s->eval};
    for (int k = 0; k < 2; k++) {
        for (size_t i = 0; sets[k] && i < rl_data_count(sets[k]); i++) {
            int len;
            rl_data_example(sets[k], i, NULL, NULL, &len, NULL);
            longest = len > longest ? len : longest;
        }
    }
    for (int i = 0; i < s->n_acc; i++) {
        int L = s->acc_prompts[i].len + r->sampling.max_new_tokens;
        longest = L > longest ? L : longest;
    }
    // the step's batch travels whole: (batch_size, longest) tensors of 4 bytes
    int rows = r->train.batch_size > s->n_acc ? r->train.batch_size : s->n_acc;
    *n_train = rl_data_count(s->train);
    *data_frame = 4.0 * (double)rows * (double)longest;
    return 0;
}

// ---- one step -----------------------------------------------------------------------------------

static int s_step(void *state, rl_run_t *run, int *advanced_p, char *note, size_t note_len,
                  char *err, size_t err_len) {
    s_sft_t *s = state;
    const rl_recipe_t *r = run->r;
    int B = r->train.batch_size, T = 1;
    double t0 = rl_clock_now();
    *advanced_p = 0;
    size_t *idx = malloc((size_t)B * sizeof(*idx));
    if (!idx) {
        return rl_errf(err, err_len, RL_ENOMEM, "out of memory");
    }
    // 1. the step's examples; N_tok over the whole step, counted before any forward
    int64_t n_loss = 0, n_all = 0;
    for (int i = 0; i < B; i++) {
        idx[i] = rl_data_sampler_next(run->order);
        const uint8_t *m;
        int len;
        rl_data_example(s->train, idx[i], NULL, &m, &len, NULL);
        for (int t = 0; t < len; t++) {
            n_loss += m[t];
        }
        n_all += len;
        T = len > T ? len : T;
    }
    T = T > 2 ? T : 2;
    int32_t *tok = calloc((size_t)B * (size_t)T, sizeof(int32_t));
    int32_t *len = calloc((size_t)B, sizeof(int32_t));
    uint8_t *mask = calloc((size_t)B * (size_t)T, 1);
    int rc = 0;
    if (!tok || !len || !mask) {
        rc = rl_errf(err, err_len, RL_ENOMEM, "out of memory");
    }
    for (int i = 0; !rc && i < B; i++) {
        const int32_t *x;
        const uint8_t *m;
        int n;
        rl_data_example(s->train, idx[i], &x, &m, &n, NULL);
        memcpy(tok + (size_t)i * T, x, (size_t)n * sizeof(int32_t));
        memcpy(mask + (size_t)i * T, m, (size_t)n);
        len[i] = n;
    }
    // 2. the actor's update
    double lr = rl_sched_lr(&run->sched, run->step);
    rl_msg_t *rep = NULL;
    rl_proto_train_reply_t x;
    if (!rc) {
        rl_proto_train_t q = {.loss = S_LOSS, .step = run->step + 1, .lr = lr, .temperature = 1.0,
                              .tokens = tok, .lengths = len, .mask = mask, .B = B, .T = T,
                              .denom = (double)n_loss, .micro_batch = r->train.micro_batch_size,
                              .iterations = 1, .want_weights = 0};
        rc = rl_run_train(run, &run->actor, &q, &x, &rep, err, err_len);
    }
    free(tok);
    free(len);
    free(mask);
    free(idx);
    if (rc) {
        rl_msg_free(&rep);
        return rc;
    }
    rl_run_advance(run, n_all, NULL);
    run->version = run->step; // the samplers are synced before an evaluation
    *advanced_p = 1;
    rl_metrics_t *mt = run->metrics;
    rl_data_pos_t pos = rl_data_sampler_pos(run->order);
    rl_run_loss_metrics(run, S_LOSS, &x);
    rl_metrics_add(mt, "learning_rate", lr);
    rl_metrics_add(mt, "num_tokens", (double)run->num_tokens);
    rl_metrics_add(mt, "epoch",
                   (double)pos.epoch + (double)pos.index / (double)rl_data_count(s->train));
    rl_metrics_add(mt, "timing/train", rl_clock_now() - t0);
    rl_metrics_add(mt, "timing/step", rl_clock_now() - t0);
    snprintf(note, note_len, "loss %.4f lr %.3g gnorm %.3g", rl_run_loss_metric(S_LOSS, &x, "loss"),
             lr, rl_run_loss_metric(S_LOSS, &x, "grad_norm"));
    rl_msg_free(&rep);
    return 0;
}

// ---- evaluation -------------------------------------------------------------------------------

// eval/loss: the SFT loss over the held-out examples in micro-batches, through the actor's
// logprobs at temperature 1 (no dropout), over their N_tok.
static int s_eval_loss(s_sft_t *s, rl_run_t *run, double *loss_p, char *err, size_t err_len) {
    const rl_recipe_t *r = run->r;
    size_t n = rl_data_count(s->eval);
    if (r->train.eval_samples > 0 && (size_t)r->train.eval_samples < n) {
        n = (size_t)r->train.eval_samples;
    }
    int64_t n_loss = 0;
    for (size_t i = 0; i < n; i++) {
        const uint8_t *m;
        int len;
        rl_data_example(s->eval, i, NULL, &m, &len, NULL);
        for (int t = 0; t < len; t++) {
            n_loss += m[t];
        }
    }
    int mb = r->train.micro_batch_size;
    double loss = 0.0;
    for (size_t b0 = 0; b0 < n; b0 += (size_t)mb) {
        int B = n - b0 < (size_t)mb ? (int)(n - b0) : mb;
        size_t idx[4096];
        int32_t lens[4096];
        if (B > 4096) {
            return rl_errf(err, err_len, RL_EINVAL, "eval: micro-batch of %d rows", B);
        }
        for (int i = 0; i < B; i++) {
            idx[i] = b0 + (size_t)i;
        }
        rl_data_batch_t *bt = &s->batch;
        int rc = rl_data_batch_fill(bt, s->eval, idx, B);
        size_t need = (size_t)bt->B * (size_t)bt->T;
        if (!rc && need > s->cap_logp) {
            float *p = realloc(s->logp, need * sizeof(float));
            rc = p ? 0 : RL_ENOMEM;
            s->logp = p ? p : s->logp;
            s->cap_logp = p ? need : s->cap_logp;
        }
        if (rc) {
            return rl_errf(err, err_len, RL_ENOMEM, "out of memory");
        }
        if (bt->T < 2) { // the protocol's batches are at least 2 wide: pad with a 0 column
            return rl_errf(err, err_len, RL_EINVAL, "eval: examples of one token");
        }
        for (int i = 0; i < B; i++) {
            lens[i] = bt->lengths[i];
        }
        rc = rl_run_logprobs(run, 0, bt->tokens, lens, bt->B, bt->T, 1.0, s->logp, err,
                             err_len);
        if (rc) {
            return rc;
        }
        loss += rl_loss_sft_forward(s->logp, bt->mask, bt->B, bt->T, n_loss);
    }
    *loss_p = loss;
    return 0;
}

static int s_evaluate(void *state, rl_run_t *run, double *acc, double *acc_greedy, char *note,
                      size_t note_len, char *err, size_t err_len) {
    s_sft_t *s = state;
    const rl_recipe_t *r = run->r;
    *acc = *acc_greedy = NAN;
    if (!s->eval) {
        return 0;
    }
    double t0 = rl_clock_now(), loss = 0;
    int rc = s_eval_loss(s, run, &loss, err, err_len);
    if (rc) {
        return rc;
    }
    rl_metrics_add(run->metrics, "eval/loss", loss);
    snprintf(note, note_len, "eval %.4f", loss);
    if (s->n_acc > 0 && run->samplers.n > 0) {
        // the samplers hold the weights of this step
        double fmt, fmtg, mlen, mleng;
        rc = rl_run_sync_actor(run, err, err_len);
        uint64_t seed = (uint64_t)r->run.seed;
        if (!rc) {
            rc = rl_run_eval_accuracy(run, s->acc_prompts, s->acc_answers, s->n_acc,
                                      r->sampling.temperature, seed, 0, acc, &fmt, &mlen, err,
                                      err_len);
        }
        if (!rc) {
            rc = rl_run_eval_accuracy(run, s->acc_prompts, s->acc_answers, s->n_acc, 0.0, seed,
                                      0, acc_greedy, &fmtg, &mleng, err, err_len);
        }
        if (rc) {
            return rc;
        }
        rl_metrics_add(run->metrics, "eval/accuracy", *acc);
        rl_metrics_add(run->metrics, "eval/accuracy_greedy", *acc_greedy);
        rl_metrics_add(run->metrics, "eval/format_rate", fmt);
        rl_metrics_add(run->metrics, "eval/completions/mean_length", mlen);
        snprintf(note, note_len, "eval %.4f acc %.1f%% greedy %.1f%%", loss, 100 * *acc,
                 100 * *acc_greedy);
    }
    rl_metrics_add(run->metrics, "timing/eval", rl_clock_now() - t0);
    return 0;
}

// What s_create loads, checked before the run and by `rlctl validate` with the run's messages.
static int s_preflight(const rl_recipe_t *r, char *err, size_t err_len) {
    rl_tokenizer_t *tok = rl_run_tokenizer(r, err, err_len);
    if (!tok) {
        return RL_EINVAL;
    }
    rl_data_t *train = NULL, *eval = NULL;
    int rc = s_load_data(r, tok, 1, &train, &eval, err, err_len);
    rl_data_destroy(&train);
    rl_data_destroy(&eval);
    rl_tokenizer_destroy(&tok);
    return rc;
}

const rl_algo_t rl_algo_sft = {
    .recipe =
        {
            .name = "sft",
            .title = "SFT",
            .doc = "supervised fine-tuning: the next-token loss on given completions or texts",
            .uses = RL_RECIPE_USES_SEQUENCES,
            .keys = s_keys,
            .check = s_check,
            .settings_size = sizeof(s_sft_settings_t),
        },
    .roles = s_roles,
    .preflight = s_preflight,
    .create = s_create,
    .destroy = s_destroy,
    .step = s_step,
    .evaluate = s_evaluate,
    .bookends = 0,
    .stores = 0,
};
