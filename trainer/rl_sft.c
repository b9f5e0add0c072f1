// rl_sft — the SFT loop. Read top to bottom: setup (tokenizer, data, model, optimizer,
// schedule, resume: the newest checkpoint that loads, newer ones moved aside as an abandoned
// branch), the step, evaluation, checkpoints, final/ (with a rescue checkpoint when it fails).
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
#include <sys/stat.h>
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
    int64_t last_ckpt;      // step of this branch's newest checkpoint on disk (0: none)
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
// *ckpt_fault (may be NULL) is set to 1 when what failed to load was the checkpoint's files.
static int s_setup_model(s_run_t *s, const char *ckpt, int *ckpt_fault, char *err,
                         size_t err_len) {
    const rl_recipe_t *r = s->r;
    rl_model_opts_t mo;
    rl_policy_model_opts(r, r->train.threads, &mo);
    char dir[4200], msg[2048];
    if (ckpt && !r->lora.enabled) {
        snprintf(dir, sizeof(dir), "%s/model", ckpt);
    } else {
        snprintf(dir, sizeof(dir), "%s", r->model.path);
    }
    int from_ckpt = ckpt && !r->lora.enabled;
    if (ckpt_fault) {
        *ckpt_fault = 0;
    }
    s->model = rl_model_load(dir, &mo, msg, sizeof(msg));
    if (!s->model) {
        if (from_ckpt && ckpt_fault) {
            *ckpt_fault = 1;
        }
        return from_ckpt
                   ? rl_errf(err, err_len, RL_EINVAL, "%s", msg)
                   : rl_recipe_errorf(r, "model.path", err, err_len, RL_EINVAL, "%s", msg);
    }
    if (ckpt && r->lora.enabled) {
        snprintf(dir, sizeof(dir), "%s/adapter", ckpt);
        int rc = rl_model_load_adapter(s->model, dir, msg, sizeof(msg));
        if (rc) {
            if (ckpt_fault) {
                *ckpt_fault = 1;
            }
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

// Restores optimizer, data position, RNG and counters from checkpoint folder ckpt. *corrupt
// says whether a failure is the checkpoint's (optimizer.bin unreadable) or the recipe's (another
// model, another dataset), which no older checkpoint would fix.
static int s_restore(s_run_t *s, const char *ckpt, const rl_ckpt_state_t *st, int *corrupt,
                     char *err, size_t err_len) {
    *corrupt = 0;
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
        *corrupt = 1;
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
    s->last_ckpt = st->step;
    return 0;
}

// Loads checkpoint folder ckpt: state.json, the model (model/, or the base and adapter/), the
// data on first use, then s_restore. On failure the model and optimizer are released again and
// *corrupt says whether the checkpoint is to blame (unreadable or damaged files: an older one
// may load) or the recipe (another tuning mode or model, a base model that does not load, a
// changed dataset: stop).
static int s_load_checkpoint(s_run_t *s, const char *ckpt, int *corrupt, char *err,
                             size_t err_len) {
    rl_ckpt_state_t st;
    *corrupt = 1;
    int rc = rl_checkpoint_read_state(ckpt, &st, err, err_len);
    if (rc) {
        return rc;
    }
    const char *tune = s->r->lora.enabled ? "lora" : "full";
    if (strcmp(st.tune, tune) != 0) {
        *corrupt = 0;
        return rl_errf(err, err_len, RL_EINVAL,
                       "%s: the checkpoint is of %s tuning, the recipe asks for %s "
                       "(lora.enabled)", ckpt, st.tune, tune);
    }
    rc = s_setup_model(s, ckpt, corrupt, err, err_len);
    if (!rc && !s->train && (rc = s_setup_data(s, err, err_len)) != 0) {
        *corrupt = 0;
    }
    if (!rc) {
        rc = s_restore(s, ckpt, &st, corrupt, err, err_len);
    }
    if (rc) {
        rl_optim_destroy(&s->optim);
        rl_model_destroy(&s->model);
        s->params = s->grads = NULL;
        s->n_params = 0;
    }
    return rc;
}

// Picks and loads the checkpoint to resume from. An explicit --resume DIR must load; otherwise
// the complete checkpoints are tried newest first, and each that does not load is skipped with
// a warning naming it and why. Sets *resumed (0: nothing to resume, start at step 0) and the
// folder's path in ckpt. Returns 0 or an error with err set.
static int s_resume(s_run_t *s, char *ckpt, size_t cap, int *resumed, char *err,
                    size_t err_len) {
    const rl_sft_opts_t *o = s->o;
    int corrupt = 0, rc;
    *resumed = 0;
    if (o->resume_from) {
        snprintf(ckpt, cap, "%s", o->resume_from);
        if ((rc = s_load_checkpoint(s, ckpt, &corrupt, err, err_len)) == 0) {
            *resumed = 1;
        }
        return rc;
    }
    int64_t *steps = NULL;
    size_t n = 0;
    rc = rl_checkpoint_list(o->run_dir, &steps, &n);
    if (rc) {
        return rl_errf(err, err_len, rc, "%s/checkpoints: %s", o->run_dir, strerror(rc));
    }
    if (n == 0) {
        rl_log_warn("%s: no complete checkpoint; starting from step 0", o->run_dir);
        return 0;
    }
    char first[1024] = "";
    for (size_t i = 0; i < n && !*resumed; i++) {
        snprintf(ckpt, cap, "%s/checkpoints/step-%lld", o->run_dir, (long long)steps[i]);
        rc = s_load_checkpoint(s, ckpt, &corrupt, err, err_len);
        if (!rc) {
            *resumed = 1;
        } else if (!corrupt) {
            break;
        } else {
            rl_log_warn("skipping checkpoints/step-%lld: %s", (long long)steps[i], err);
            if (!first[0]) {
                snprintf(first, sizeof(first), "step-%lld: %s", (long long)steps[i], err);
            }
        }
    }
    if (!*resumed && corrupt) {
        rc = rl_errf(err, err_len, RL_EINVAL,
                     "%s/checkpoints: none of the %zu complete checkpoints loads (the newest, "
                     "%s); start over with --force",
                     o->run_dir, n, first);
    }
    free(steps);
    return rc;
}

// The run continues from the step just loaded: complete checkpoints newer than it belong to a
// branch given up (an explicit --resume of an older one, or newer ones that did not load). They
// are moved into checkpoints/abandoned-<time>/, so that pruning keeps this branch's checkpoints
// and a later plain --resume continues it.
static int s_abandon_newer(s_run_t *s, char *err, size_t err_len) {
    int64_t *steps = NULL;
    size_t n = 0;
    char names[512] = "", where[4200];
    if (rl_checkpoint_list(s->o->run_dir, &steps, &n) == 0) {
        for (size_t i = n; i-- > 0;) {
            size_t l = strlen(names);
            if (steps[i] > s->step && l + 32 < sizeof(names)) {
                snprintf(names + l, sizeof(names) - l, "%sstep-%lld", l ? ", " : "",
                         (long long)steps[i]);
            }
        }
    }
    free(steps);
    int moved = 0;
    int rc = rl_checkpoint_abandon_after(s->o->run_dir, s->step, where, sizeof(where), &moved,
                                         err, err_len);
    if (moved > 0) {
        rl_log_warn("resuming from step %lld starts a new branch: moved %d newer checkpoint%s "
                    "(%s) to %s",
                    (long long)s->step, moved, moved == 1 ? "" : "s", names, where);
    }
    return rc;
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

// Writes checkpoints/step-<step> (through step-<step>.tmp: rl_checkpoint.h) and prunes.
static int s_checkpoint(s_run_t *s, char *err, size_t err_len) {
    char tmp[4200], dir[4200];
    int rc = rl_checkpoint_prepare(s->o->run_dir, s->step, tmp, sizeof(tmp), err, err_len);
    if (!rc) {
        rc = s_save_weights(s, tmp, 0, err, err_len);
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
        rc = rl_checkpoint_commit(tmp, &st, s->optim, dir, sizeof(dir), err, err_len);
    }
    if (!rc) {
        s->last_ckpt = s->step;
        rc = rl_checkpoint_prune(s->o->run_dir, s->r->train.keep_checkpoints, err, err_len);
    }
    if (!rc) {
        rl_log_info("checkpoint: %s", dir);
    }
    return rc;
}

// Writes final/ as final.tmp/ and publishes it in one rename, so final/ is never half written.
static int s_final(s_run_t *s, char *err, size_t err_len) {
    char tmp[4200], dst[4200];
    snprintf(tmp, sizeof(tmp), "%s/final.tmp", s->o->run_dir);
    snprintf(dst, sizeof(dst), "%s/final", s->o->run_dir);
    // a final.tmp folder is what an interrupted write left; anything else there is not ours
    struct stat sb;
    int rc = 0;
    if (lstat(tmp, &sb) == 0) {
        if (!S_ISDIR(sb.st_mode)) {
            return rl_errf(err, err_len, EEXIST,
                           "%s is in the way (not a folder rlctl wrote; move it away)", tmp);
        }
        if ((rc = rl_checkpoint_rmtree(tmp)) != 0) {
            return rl_errf(err, err_len, rc, "%s: cannot remove: %s", tmp, strerror(rc));
        }
    }
    if (mkdir(tmp, 0755) != 0) {
        rc = errno;
        return rl_errf(err, err_len, rc, "%s: cannot create: %s", tmp, strerror(rc));
    }
    if ((rc = s_save_weights(s, tmp, 1, err, err_len)) != 0 ||
        (rc = rl_checkpoint_publish_dir(tmp, dst, err, err_len)) != 0) {
        return rc;
    }
    rl_log_info("final %s: %s", s->r->lora.enabled ? "adapter" : "model", dst);
    return 0;
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
    int resuming = 0;

    // the trainer's stream from the seed; a resume overwrites it with the checkpoint's
    rl_rng_seed(&s.rng, (uint64_t)r->run.seed);
    if (o->resume && (rc = s_resume(&s, ckpt, sizeof(ckpt), &resuming, err, err_len)) != 0) {
        goto done;
    }
    if (!resuming && ((rc = s_setup_model(&s, NULL, NULL, err, err_len)) ||
                      (rc = s_setup_data(&s, err, err_len)))) {
        goto done;
    }
    if (resuming && (rc = s_abandon_newer(&s, err, err_len)) != 0) {
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
        double loss = 0.0;
        int64_t ntok = 0;
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
    if (s.step >= total && (rc = s_final(&s, err, err_len)) != 0) {
        // the trained weights must not be lost with final/: leave a checkpoint to resume from
        // (with train.save_every 0 there is none otherwise, whatever the run's length)
        char why[2048], e2[1024];
        snprintf(why, sizeof(why), "%s", err);
        if (s.step > s.last_ckpt && s_checkpoint(&s, e2, sizeof(e2)) == 0) {
            rl_errf(err, err_len, rc,
                    "final/ could not be written: %s; checkpoint of step %lld written; "
                    "continue with rlctl run --resume", why, (long long)s.step);
        } else if (s.step > s.last_ckpt) {
            char newest[128] = "";
            if (s.last_ckpt > 0) {
                snprintf(newest, sizeof(newest), " (the newest checkpoint is of step %lld)",
                         (long long)s.last_ckpt);
            }
            rl_errf(err, err_len, rc,
                    "final/ could not be written: %s; no checkpoint of step %lld either: %s%s",
                    why, (long long)s.step, e2, newest);
        } else {
            rl_errf(err, err_len, rc,
                    "final/ could not be written: %s; the checkpoint of step %lld holds the "
                    "weights; continue with rlctl run --resume", why, (long long)s.step);
        }
        goto done;
    } else if (s.step < total) {
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
