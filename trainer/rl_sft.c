// rl_sft — the SFT loop. Read top to bottom: setup (tokenizer, data, model, optimizer,
// schedule, resume), the step, evaluation, checkpoints, final/.
#include "rl_sft.h"
#include "rl_clock.h"

#include "rl_chat.h"
#include "rl_checkpoint.h"
#include "rl_data.h"
#include "rl_err.h"
#include "rl_log.h"
#include "rl_loss_sft.h"
#include "rl_metrics.h"
#include "rl_model.h"
#include "rl_optim.h"
#include "rl_policy.h"
#include "rl_progress.h"
#include "rl_rng.h"
#include "rl_tokenizer.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

// ---- helpers ---------------------------------------------------------------------------------

// ---- the run state ---------------------------------------------------------------------------

typedef struct {
    const rl_recipe_t *r;
    const rl_sft_opts_t *o;
    rl_tokenizer_t *tok;
    rl_data_t *train, *eval;
    rl_data_sampler_t *sampler;
    rl_model_t *model;
    rl_optim_t *optim;
    rl_metrics_t *metrics;
    rl_progress_t *progress;
    rl_sched_t sched;
    rl_rng_t rng;           // the trainer's stream (saved in checkpoints; SFT draws nothing yet)
    float *params, *grads;  // the trainable flat view (borrowed from the model)
    size_t n_params;
    rl_data_batch_t batch;
    float *logp, *dlogp;    // (micro B, T) scratch, grown to the largest micro-batch
    size_t cap_bt;
    size_t *idx;            // (batch_size) example indices of the step
    int64_t step;           // optimizer steps done
    int64_t num_tokens;     // tokens trained on so far (non-padding, all micro-batches)
    char tokdir[4096];
} s_run_t;

static int s_scratch(s_run_t *s, size_t bt) {
    if (bt <= s->cap_bt) {
        return 0;
    }
    float *a = realloc(s->logp, bt * sizeof(float));
    if (!a) {
        return RL_ENOMEM;
    }
    s->logp = a;
    float *b = realloc(s->dlogp, bt * sizeof(float));
    if (!b) {
        return RL_ENOMEM;
    }
    s->dlogp = b;
    s->cap_bt = bt;
    return 0;
}

// ---- setup ------------------------------------------------------------------------------------

static int s_setup_data(s_run_t *s, char *err, size_t err_len) {
    const rl_recipe_t *r = s->r;
    char msg[2048];
    // tokenizer: the folder of model.tokenizer, so tokenizer_config.json (eos, chat template)
    // comes along when it is there
    rl_checkpoint_dirname(r->model.tokenizer, s->tokdir, sizeof(s->tokdir));
    const char *base = strrchr(r->model.tokenizer, '/');
    base = base ? base + 1 : r->model.tokenizer;
    if (strcmp(base, "tokenizer.json") == 0) {
        s->tok = rl_tokenizer_new_dir(s->tokdir, msg, sizeof(msg));
    } else {
        s->tok = rl_tokenizer_new(r->model.tokenizer, msg, sizeof(msg));
    }
    if (!s->tok) {
        return rl_recipe_errorf(r, "model.tokenizer", err, err_len, RL_EINVAL, "%s", msg);
    }
    rl_data_opts_t d;
    rl_data_opts_default(&d);
    d.format = r->data.format;
    d.prompt_field = r->data.prompt_field;
    d.completion_field = r->data.completion_field;
    d.text_field = r->data.text_field;
    d.messages_field = r->data.messages_field;
    d.completion_only_loss = r->algorithm.completion_only_loss;
    d.max_length = r->data.max_length;
    d.truncation = r->data.truncation;
    // EOS after each completion / text: tokenizer_config.json's eos_token, else the model's
    // first eos_token_id (checked against the model below)
    d.eos_id = rl_tokenizer_eos_id(s->tok);
    if (d.eos_id < 0 && s->model && rl_model_config(s->model)->n_eos > 0) {
        d.eos_id = rl_model_config(s->model)->eos_token_ids[0];
    }
    if (d.eos_id < 0) {
        rl_log_warn("no EOS token known (tokenizer_config.json eos_token, config.json "
                    "eos_token_id): completions are trained without one");
    }
    switch (r->model.chat_template) {
    case RL_RECIPE_CHAT_CHATML:
        d.chat = RL_CHAT_CHATML;
        break;
    case RL_RECIPE_CHAT_LLAMA3:
        d.chat = RL_CHAT_LLAMA3;
        break;
    case RL_RECIPE_CHAT_AUTO: {
        const char *tpl = rl_tokenizer_chat_template(s->tok);
        rl_chat_format_t f = RL_CHAT_NONE;
        if (tpl && rl_chat_detect(tpl, &f, msg, sizeof(msg)) != 0) {
            f = RL_CHAT_NONE; // reported only if a messages row needs it
        }
        d.chat = f;
        break;
    }
    default:
        d.chat = RL_CHAT_NONE;
    }
    s->train = rl_data_load(r->data.train, &d, s->tok, msg, sizeof(msg));
    if (!s->train) {
        return rl_errf(err, err_len, RL_EINVAL, "%s", msg);
    }
    if (rl_data_dropped(s->train)) {
        rl_log_warn("%s: %zu rows dropped (longer than data.max_length %d tokens)",
                    r->data.train, rl_data_dropped(s->train), r->data.max_length);
    }
    rl_log_info("train data: %zu examples, %lld loss tokens", rl_data_count(s->train),
                (long long)rl_data_loss_tokens(s->train));
    if (r->data.eval && r->train.eval_every > 0) {
        s->eval = rl_data_load(r->data.eval, &d, s->tok, msg, sizeof(msg));
        if (!s->eval) {
            return rl_errf(err, err_len, RL_EINVAL, "%s", msg);
        }
        if (rl_data_dropped(s->eval)) {
            rl_log_warn("%s: %zu rows dropped (longer than data.max_length %d tokens)",
                        r->data.eval, rl_data_dropped(s->eval), r->data.max_length);
        }
    }
    s->sampler = rl_data_sampler_new(s->train, (uint64_t)r->run.seed, r->data.shuffle);
    if (!s->sampler) {
        return rl_errf(err, err_len, RL_ENOMEM, "out of memory");
    }
    return 0;
}

// Loads the model: the recipe's folder, or for a full-tuning resume the checkpoint's model/
// (the weights are the state); a LoRA resume loads the base and then the checkpoint's adapter.
static int s_setup_model(s_run_t *s, const char *ckpt, char *err, size_t err_len) {
    const rl_recipe_t *r = s->r;
    rl_model_opts_t mo;
    rl_policy_model_opts(r, r->train.threads, &mo);
    char dir[4200], msg[2048];
    if (ckpt && !r->lora.enabled) {
        snprintf(dir, sizeof(dir), "%s/model", ckpt);
    } else {
        snprintf(dir, sizeof(dir), "%s", r->model.path);
    }
    s->model = rl_model_load(dir, &mo, msg, sizeof(msg));
    if (!s->model) {
        return ckpt ? rl_errf(err, err_len, RL_EINVAL, "%s", msg)
                    : rl_recipe_errorf(r, "model.path", err, err_len, RL_EINVAL, "%s", msg);
    }
    if (ckpt && r->lora.enabled) {
        snprintf(dir, sizeof(dir), "%s/adapter", ckpt);
        int rc = rl_model_load_adapter(s->model, dir, msg, sizeof(msg));
        if (rc) {
            return rl_errf(err, err_len, rc, "%s", msg);
        }
    }
    s->params = rl_model_trainable(s->model, &s->n_params);
    s->grads = rl_model_trainable_grads(s->model);
    if (!s->params || !s->grads || s->n_params == 0) {
        return rl_errf(err, err_len, RL_EINVAL, "%s: the model has no trainable parameters",
                       r->model.path);
    }
    rl_optim_hparams_t hp = {r->optim.betas[0], r->optim.betas[1], r->optim.eps,
                             r->optim.weight_decay};
    s->optim = rl_optim_new(s->n_params, &hp);
    if (!s->optim) {
        return rl_errf(err, err_len, RL_ENOMEM, "out of memory (optimizer state)");
    }
    rl_log_info("model: %lld parameters, %zu trainable (%s)",
                (long long)rl_model_param_count(s->model), s->n_params,
                r->lora.enabled ? "LoRA" : "full");
    return 0;
}

// Restores optimizer, data position, RNG and counters from checkpoint folder ckpt.
static int s_restore(s_run_t *s, const char *ckpt, const rl_ckpt_state_t *st, char *err,
                     size_t err_len) {
    if (st->n_trainable != (int64_t)s->n_params) {
        return rl_errf(err, err_len, RL_EINVAL,
                       "%s: the checkpoint trains %lld parameters, this recipe's model %zu "
                       "(another model or tuning mode?)",
                       ckpt, (long long)st->n_trainable, s->n_params);
    }
    char path[4200];
    snprintf(path, sizeof(path), "%s/optimizer.bin", ckpt);
    int rc = rl_optim_load(s->optim, path, err, err_len);
    if (rc) {
        return rc;
    }
    rl_data_pos_t pos = {st->data_epoch, st->data_index};
    if (rl_data_sampler_seek(s->sampler, pos) != 0) {
        return rl_errf(err, err_len, RL_EINVAL,
                       "%s: data position (epoch %lld, index %lld) is outside %s (%zu examples): "
                       "was the dataset changed?",
                       ckpt, (long long)pos.epoch, (long long)pos.index, s->r->data.train,
                       rl_data_count(s->train));
    }
    s->rng = st->rng;
    rl_model_set_train_step(s->model, (uint64_t)st->model_train_step);
    s->step = st->step;
    s->num_tokens = st->num_tokens;
    return 0;
}

// ---- checkpoints and final/ -----------------------------------------------------------------

static int s_save_weights(s_run_t *s, const char *dir, int final, char *err, size_t err_len) {
    const rl_recipe_t *r = s->r;
    char path[4200];
    int rc;
    if (r->lora.enabled) {
        snprintf(path, sizeof(path), final ? "%s" : "%s/adapter", dir);
        rc = rl_model_save_adapter(s->model, path, r->model.path, err, err_len);
        return rc;
    }
    snprintf(path, sizeof(path), final ? "%s" : "%s/model", dir);
    // checkpoints keep fp32 (the state); final/ follows model.dtype
    int bf16 = 0;
    if (final) {
        bf16 = r->model.dtype == RL_RECIPE_DTYPE_BFLOAT16 ||
               (r->model.dtype == RL_RECIPE_DTYPE_AUTO &&
                strcmp(rl_model_config(s->model)->torch_dtype, "bfloat16") == 0);
    }
    rc = rl_model_save_hf(s->model, path, bf16, err, err_len);
    if (rc) {
        return rc;
    }
    // a usable HF folder: tokenizer files and generation_config.json beside the weights
    return rl_checkpoint_hf_extras(path, s->r->model.tokenizer, r->model.path, err, err_len);
}

static int s_checkpoint(s_run_t *s, char *err, size_t err_len) {
    char dir[4200];
    int rc = rl_checkpoint_prepare(s->o->run_dir, s->step, dir, sizeof(dir), err, err_len);
    if (!rc) {
        rc = s_save_weights(s, dir, 0, err, err_len);
    }
    if (!rc) {
        rl_data_pos_t pos = rl_data_sampler_pos(s->sampler);
        rl_ckpt_state_t st = {0};
        st.step = s->step;
        st.policy_version = s->step;
        st.data_epoch = pos.epoch;
        st.data_index = pos.index;
        st.rng = s->rng;
        snprintf(st.tune, sizeof(st.tune), "%s", s->r->lora.enabled ? "lora" : "full");
        st.n_trainable = (int64_t)s->n_params;
        st.num_tokens = s->num_tokens;
        st.model_train_step = (int64_t)rl_model_train_step(s->model);
        rc = rl_checkpoint_commit(dir, &st, s->optim, err, err_len);
    }
    if (!rc) {
        rc = rl_checkpoint_prune(s->o->run_dir, s->r->train.keep_checkpoints, err, err_len);
    }
    if (!rc) {
        rl_log_info("checkpoint: %s", dir);
    }
    return rc;
}

// ---- one step ---------------------------------------------------------------------------------

// Runs forward + loss over examples idx[0..n) in micro-batches of mb; with train, also the
// backward (gradients accumulate). Returns 0 or an error; *loss_p gets the token_mean loss over
// the n examples (their N_tok), *ntok_p the non-padding token count.
static int s_pass(s_run_t *s, const size_t *idx, int n, int mb, int train, double *loss_p,
                  int64_t *ntok_p, char *err, size_t err_len) {
    // N_tok over the whole step, counted before any forward (REFERENCE.md §1, token_mean)
    int64_t n_loss = 0, n_all = 0;
    for (int i = 0; i < n; i++) {
        const uint8_t *m;
        int len;
        rl_data_example(train ? s->train : s->eval, idx[i], NULL, &m, &len, NULL);
        for (int t = 0; t < len; t++) {
            n_loss += m[t];
        }
        n_all += len;
    }
    double loss = 0.0;
    for (int b0 = 0; b0 < n; b0 += mb) {
        int B = n - b0 < mb ? n - b0 : mb;
        rl_data_batch_t *bt = &s->batch;
        int rc = rl_data_batch_fill(bt, train ? s->train : s->eval, idx + b0, B);
        if (!rc) {
            rc = s_scratch(s, (size_t)bt->B * (size_t)bt->T);
        }
        if (rc) {
            return rl_errf(err, err_len, rc, "out of memory");
        }
        rc = rl_model_forward(s->model, bt->tokens, bt->lengths, bt->B, bt->T, 1.0f, train,
                              s->logp, NULL);
        if (rc) {
            return rl_errf(err, err_len, rc, "forward: %s", rl_model_errmsg(s->model));
        }
        loss += rl_loss_sft_forward(s->logp, bt->mask, bt->B, bt->T, n_loss);
        if (train) {
            rl_loss_sft_backward(s->dlogp, bt->mask, bt->B, bt->T, n_loss);
            rc = rl_model_backward(s->model, s->dlogp);
            if (rc) {
                return rl_errf(err, err_len, rc, "backward: %s", rl_model_errmsg(s->model));
            }
        }
    }
    *loss_p = loss;
    *ntok_p = n_all;
    return 0;
}

static int s_evaluate(s_run_t *s, double *loss_p, char *err, size_t err_len) {
    size_t n = rl_data_count(s->eval);
    if (s->r->train.eval_samples > 0 && (size_t)s->r->train.eval_samples < n) {
        n = (size_t)s->r->train.eval_samples;
    }
    size_t *idx = malloc(n * sizeof(*idx));
    if (!idx) {
        return rl_errf(err, err_len, RL_ENOMEM, "out of memory");
    }
    for (size_t i = 0; i < n; i++) {
        idx[i] = i;
    }
    int64_t ntok;
    int rc = s_pass(s, idx, (int)n, s->r->train.micro_batch_size, 0, loss_p, &ntok, err,
                    err_len);
    free(idx);
    return rc;
}

// ---- the loop ---------------------------------------------------------------------------------

int rl_sft_run(const rl_recipe_t *r, const rl_sft_opts_t *o, char *err, size_t err_len) {
    s_run_t s;
    memset(&s, 0, sizeof(s));
    s.r = r;
    s.o = o;
    int rc = 0;
    char ckpt[4200] = "";
    rl_ckpt_state_t st;
    int resuming = 0;

    // which checkpoint, if any
    if (o->resume) {
        int64_t step;
        if (o->resume_from) {
            snprintf(ckpt, sizeof(ckpt), "%s", o->resume_from);
            resuming = 1;
        } else if (rl_checkpoint_latest(o->run_dir, ckpt, sizeof(ckpt), &step) == 0) {
            resuming = 1;
        } else {
            rl_log_warn("%s: no complete checkpoint; starting from step 0", o->run_dir);
        }
        if (resuming && (rc = rl_checkpoint_read_state(ckpt, &st, err, err_len)) != 0) {
            return rc;
        }
        const char *tune = r->lora.enabled ? "lora" : "full";
        if (resuming && strcmp(st.tune, tune) != 0) {
            return rl_errf(err, err_len, RL_EINVAL,
                           "%s: the checkpoint is of %s tuning, the recipe asks for %s "
                           "(lora.enabled)", ckpt, st.tune, tune);
        }
    }
    rl_rng_seed(&s.rng, (uint64_t)r->run.seed);

    if ((rc = s_setup_model(&s, resuming ? ckpt : NULL, err, err_len)) ||
        (rc = s_setup_data(&s, err, err_len))) {
        goto done;
    }
    if (resuming && (rc = s_restore(&s, ckpt, &st, err, err_len))) {
        goto done;
    }
    int64_t total = r->train.steps;
    s.sched = rl_sched_from_recipe(r);

    // metrics: a resumed run drops the lines a crashed run wrote after its checkpoint
    char path[4200];
    snprintf(path, sizeof(path), "%s/metrics.jsonl", o->run_dir);
    if ((rc = rl_metrics_truncate_after(path, s.step, err, err_len))) {
        goto done;
    }
    char msg[1024];
    s.metrics = rl_metrics_new(o->run_dir, o->tensorboard, msg, sizeof(msg));
    if (!s.metrics) {
        rc = rl_errf(err, err_len, RL_EIO, "%s", msg);
        goto done;
    }
    s.idx = malloc((size_t)r->train.batch_size * sizeof(*s.idx));
    s.progress = rl_progress_new(stderr, total, r->train.log_every, RL_PROGRESS_AUTO);
    if (!s.idx || !s.progress) {
        rc = rl_errf(err, err_len, RL_ENOMEM, "out of memory");
        goto done;
    }
    if (resuming) {
        rl_log_info("resuming from %s at step %lld", ckpt, (long long)s.step);
    }

    int64_t last = total;
    if (o->stop_at > 0 && o->stop_at < last) {
        last = o->stop_at;
    }
    while (s.step < last) {
        double t0 = rl_clock_now();
        int64_t step = s.step + 1; // 1-based number of the step being taken
        for (int i = 0; i < r->train.batch_size; i++) {
            s.idx[i] = rl_data_sampler_next(s.sampler);
        }
        rl_model_zero_grad(s.model);
        double loss;
        int64_t ntok;
        rc = s_pass(&s, s.idx, r->train.batch_size, r->train.micro_batch_size, 1, &loss, &ntok,
                    err, err_len);
        if (rc) {
            goto done;
        }
        double t1 = rl_clock_now();
        if (!isfinite(loss)) {
            rc = rl_errf(err, err_len, RL_EINVAL,
                         "step %lld: the loss is %s; stopping (lower optim.lr, check the data, "
                         "or resume from the last checkpoint)",
                         (long long)step, isnan(loss) ? "NaN" : "infinite");
            goto done;
        }
        double gnorm = rl_optim_clip_grad_norm(s.grads, s.n_params, r->optim.max_grad_norm);
        if (!isfinite(gnorm)) {
            rc = rl_errf(err, err_len, RL_EINVAL,
                         "step %lld: the gradient norm is %s; stopping (lower optim.lr or "
                         "resume from the last checkpoint)",
                         (long long)step, isnan(gnorm) ? "NaN" : "infinite");
            goto done;
        }
        double lr = rl_sched_lr(&s.sched, s.step);
        rl_optim_step(s.optim, s.params, s.grads, lr);
        s.step = step;
        s.num_tokens += ntok;
        double t2 = rl_clock_now();

        int log_now = step % r->train.log_every == 0 || step == last;
        rl_metrics_add(s.metrics, "loss", loss);
        rl_metrics_add(s.metrics, "grad_norm", gnorm);
        rl_metrics_add(s.metrics, "learning_rate", lr);
        rl_metrics_add(s.metrics, "num_tokens", (double)s.num_tokens);
        rl_metrics_add(s.metrics, "epoch",
                       (double)rl_data_sampler_pos(s.sampler).epoch +
                           (double)rl_data_sampler_pos(s.sampler).index /
                               (double)rl_data_count(s.train));
        rl_metrics_add(s.metrics, "timing/forward_backward", t1 - t0);
        rl_metrics_add(s.metrics, "timing/optimizer", t2 - t1);
        double eval_loss = NAN;
        char note[128] = "";
        if (s.eval && r->train.eval_every > 0 && step % r->train.eval_every == 0) {
            double te = rl_clock_now();
            if ((rc = s_evaluate(&s, &eval_loss, err, err_len))) {
                goto done;
            }
            rl_metrics_add(s.metrics, "eval/loss", eval_loss);
            if (o->eval_fn &&
                (rc = o->eval_fn(o->eval_ctx, s.model, step, s.metrics, note, sizeof note,
                                    err, err_len)) != 0) {
                goto done;
            }
            rl_metrics_add(s.metrics, "timing/eval", rl_clock_now() - te);
            log_now = 1;
        }
        rl_metrics_add(s.metrics, "timing/step", rl_clock_now() - t0);
        if (log_now && (rc = rl_metrics_write(s.metrics, step, rl_clock_wall())) != 0) {
            rc = rl_errf(err, err_len, rc, "%s", rl_metrics_errmsg(s.metrics));
            goto done;
        }
        if (!log_now) {
            rl_metrics_clear(s.metrics); // an unlogged step's values are not carried over
        }
        if (isnan(eval_loss)) {
            rl_progress_update(s.progress, step, "loss %.4f lr %.3g gnorm %.3g", loss, lr,
                               gnorm);
        } else {
            rl_progress_update(s.progress, step, "loss %.4f eval %.4f%s%s lr %.3g", loss,
                               eval_loss, note[0] ? " " : "", note, lr);
        }
        int stop = o->interrupt && *o->interrupt && step < last;
        int save = (r->train.save_every > 0 && step % r->train.save_every == 0 &&
                    step < total) ||
                   (step == last && last < total) || stop;
        if (save && (rc = s_checkpoint(&s, err, err_len))) {
            goto done;
        }
        if (stop) {
            rl_progress_finish(s.progress);
            rc = rl_errf(err, err_len, RL_SFT_INTERRUPTED,
                         "interrupted after step %lld; checkpoint written; continue with "
                         "--resume", (long long)step);
            goto done;
        }
    }
    rl_progress_finish(s.progress);
    if (s.step >= total) {
        snprintf(path, sizeof(path), "%s/final", o->run_dir);
        if ((rc = rl_checkpoint_rmtree(path)) || (rc = rl_checkpoint_mkdirs(path))) {
            rc = rl_errf(err, err_len, rc, "%s: %s", path, strerror(rc));
            goto done;
        }
        if ((rc = s_save_weights(&s, path, 1, err, err_len))) {
            goto done;
        }
        rl_log_info("final %s: %s", r->lora.enabled ? "adapter" : "model", path);
    } else {
        rl_log_info("stopped after step %lld (resume with --resume)", (long long)s.step);
    }
done:
    rl_progress_destroy(&s.progress);
    rl_metrics_destroy(&s.metrics);
    free(s.idx);
    free(s.logp);
    free(s.dlogp);
    rl_data_batch_free(&s.batch);
    rl_data_sampler_destroy(&s.sampler);
    rl_data_destroy(&s.eval);
    rl_data_destroy(&s.train);
    rl_optim_destroy(&s.optim);
    rl_model_destroy(&s.model);
    rl_tokenizer_destroy(&s.tok);
    return rc;
}
