// rl_controller — the GRPO loop of a run. Read top to bottom: state, setup (data, store,
// workers), the calls (generate, score, logprobs, train, sync), evaluation, checkpoints, the
// step, the loop.
#include "rl_controller.h"
#include "rl_clock.h"

#include "rl_chat.h"
#include "rl_checkpoint.h"
#include "rl_data.h"
#include "rl_err.h"
#include "rl_fault.h"
#include "rl_group.h"
#include "rl_hf.h"
#include "rl_grpo.h"
#include "rl_log.h"
#include "rl_metrics.h"
#include "rl_lora.h"
#include "rl_optim.h"
#include "rl_policy.h"
#include "rl_progress.h"
#include "rl_prompts.h"
#include "rl_reward.h"
#include "rl_reward_math.h"
#include "rl_rng.h"
#include "rl_tokenizer.h"
#include "rl_traj.h"
#include "rl_wire.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

// ---- state -----------------------------------------------------------------------------------

// Completions of one generate call, prompt-major (result p*n + s), concatenated.
typedef struct {
    int n_res;
    int32_t *lens;  // (n_res)
    int64_t *off;   // (n_res) start in ids/lp
    int32_t *ids;   // (sum lens)
    float *lp;      // (sum lens)
    uint8_t *fin;   // (n_res) 0 stop, 1 length
    uint8_t *cut;   // (n_res) 1: ended by a stop string (sampling.stop), not a stop token
    int64_t prefill, decode;
} s_gen_t;

typedef struct {
    const rl_recipe_t *r;
    const rl_controller_opts_t *o;
    rl_tokenizer_t *tok;
    rl_prompts_t *train, *eval;
    char **eval_answers;    // (eval count) normalised reference answers, NULL = none
    rl_data_sampler_t *order;
    rl_group_t *g;
    int n_samplers;
    char (*samplers)[32];   // "sampler/<k>"
    rl_traj_t *traj;
    rl_metrics_t *metrics;
    rl_progress_t *progress;
    rl_sched_t sched;
    rl_rng_t rng;
    int64_t step, version, num_tokens, model_train_step, n_trainable;
    int64_t last_ckpt;      // step of the newest checkpoint written or loaded
    double t_ckpt;          // seconds the last checkpoint took (0: none written yet)
    int actor_consistent;   // the actor's weights/optimizer are those of `step`
    double eval_first[2], eval_last[2]; // accuracy, greedy (NaN: not run)
    double t_start;
    double gen_tokens_total;
    int32_t stop_ids[64];   // the tokenizer's EOS and single-token sampling.stop strings
    int n_stop;
    const char *stop_str[64]; // sampling.stop strings of several tokens (cut after sampling)
    int n_stop_str;
    int quiet;              // preflight: no info lines
    int32_t vocab;          // config.json's vocab_size: sampled ids are below it
    int64_t max_frame;      // the largest frame any side of the run receives (s_max_frame)
    // stopping on a signal (s_cancel)
    int phase;              // S_PHASE_*: what the controller is doing now
    double t_signal;        // monotonic time the first signal was seen (0: none)
    double t_step_start;    // monotonic start of the step in progress
    double t_step_est;      // seconds the last step took (0: none finished yet)
    int stop_now;           // 1: the step would not fit in roles.stop_grace; 2: a second signal
    double deadline;        // > 0: no call may wait past this monotonic time
} s_ctl_t;

enum { S_PHASE_START = 0, S_PHASE_STEP, S_PHASE_EVAL, S_PHASE_IDLE };
#define S_STOP_MARGIN 1.0   // seconds kept for stopping the workers and exiting

static void s_gen_free(s_gen_t *g) {
    free(g->lens);
    free(g->off);
    free(g->ids);
    free(g->lp);
    free(g->fin);
    free(g->cut);
    memset(g, 0, sizeof(*g));
}

static int s_cut_stop_strings(s_ctl_t *s, s_gen_t *g);

// splitmix64 of (a, b): the seed of step b of a run seeded a
static uint64_t s_mix(uint64_t a, uint64_t b) {
    uint64_t z = a * 0x9E3779B97F4A7C15ull + b + 0x632BE59BD9B4E019ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

// ---- setup ------------------------------------------------------------------------------------

static rl_chat_format_t s_chat(const rl_recipe_t *r, rl_tokenizer_t *tok) {
    switch (r->model.chat_template) {
    case RL_RECIPE_CHAT_CHATML:
        return RL_CHAT_CHATML;
    case RL_RECIPE_CHAT_LLAMA3:
        return RL_CHAT_LLAMA3;
    case RL_RECIPE_CHAT_AUTO: {
        const char *tpl = rl_tokenizer_chat_template(tok);
        rl_chat_format_t f = RL_CHAT_NONE;
        char msg[256];
        if (tpl && rl_chat_detect(tpl, &f, msg, sizeof(msg)) != 0) {
            f = RL_CHAT_NONE;
        }
        return f;
    }
    default:
        return RL_CHAT_NONE;
    }
}

// The reference answer of an eval row (a string or a number), normalised; NULL when absent.
static char *s_answer(const rl_prompt_t *p, const char *field) {
    json_error_t je;
    json_t *row = json_loadb(p->row, p->row_len, 0, &je);
    if (!row) {
        return NULL;
    }
    json_t *v = json_object_get(row, field);
    char buf[128] = "", norm[64];
    if (json_is_string(v)) {
        snprintf(buf, sizeof(buf), "%s", json_string_value(v));
    } else if (json_is_integer(v)) {
        snprintf(buf, sizeof(buf), "%lld", (long long)json_integer_value(v));
    } else if (json_is_real(v)) {
        snprintf(buf, sizeof(buf), "%.17g", json_real_value(v));
    }
    json_decref(row);
    if (!buf[0] || rl_math_normalize(buf, norm) != 0) {
        return buf[0] ? strdup(buf) : NULL;
    }
    return strdup(norm);
}

static int s_setup_data(s_ctl_t *s, char *err, size_t err_len) {
    const rl_recipe_t *r = s->r;
    char msg[2048], dir[4096];
    snprintf(dir, sizeof(dir), "%s", r->model.tokenizer);
    char *slash = strrchr(dir, '/');
    const char *base = slash ? slash + 1 : dir;
    if (strcmp(base, "tokenizer.json") == 0 && slash) {
        *slash = '\0';
        s->tok = rl_tokenizer_new_dir(dir, msg, sizeof(msg));
    } else {
        s->tok = rl_tokenizer_new(r->model.tokenizer, msg, sizeof(msg));
    }
    if (!s->tok) {
        return rl_recipe_errorf(r, "model.tokenizer", err, err_len, RL_EINVAL, "%s", msg);
    }
    int32_t eos = rl_tokenizer_eos_id(s->tok);
    if (eos >= 0) {
        s->stop_ids[s->n_stop++] = eos;
    }
    for (int i = 0; i < r->sampling.stop.n && s->n_stop < 64; i++) {
        int32_t *ids = NULL;
        size_t n = 0;
        const char *t = r->sampling.stop.items[i];
        if (rl_tokenizer_encode(s->tok, t, strlen(t), 0, &ids, &n) == 0 && n == 1) {
            s->stop_ids[s->n_stop++] = ids[0]; // the sampler stops on it
        } else if (t[0]) {
            s->stop_str[s->n_stop_str++] = t;  // cut where the text first holds it
        }
        free(ids);
    }
    rl_chat_format_t chat = s_chat(r, s->tok);
    s->train = rl_prompts_load(r->data.train, r->data.prompt_field, s->tok, chat,
                               r->data.max_prompt_length, r->data.truncation, msg, sizeof(msg));
    if (!s->train) {
        return rl_errf(err, err_len, RL_EINVAL, "%s", msg);
    }
    if (rl_prompts_dropped(s->train)) {
        rl_log_warn("%s: %zu prompts dropped (longer than data.max_prompt_length %d)",
                    r->data.train, rl_prompts_dropped(s->train), r->data.max_prompt_length);
    }
    if (r->data.eval) {
        s->eval = rl_prompts_load(r->data.eval, r->data.prompt_field, s->tok, chat,
                                  r->data.max_prompt_length, r->data.truncation, msg,
                                  sizeof(msg));
        if (!s->eval) {
            return rl_errf(err, err_len, RL_EINVAL, "%s", msg);
        }
        size_t n = rl_prompts_count(s->eval);
        s->eval_answers = calloc(n, sizeof(char *));
        if (!s->eval_answers) {
            return rl_errf(err, err_len, RL_ENOMEM, "out of memory");
        }
        for (size_t i = 0; i < n; i++) {
            const rl_prompt_t *p = rl_prompts_get(s->eval, i);
            s->eval_answers[i] = s_answer(p, r->data.answer_field);
            if (!s->eval_answers[i]) {
                return rl_errf(err, err_len, RL_EINVAL,
                               "%s:%d: no field '%s' (data.answer_field) to score the "
                               "evaluation against",
                               r->data.eval, p->line, r->data.answer_field);
            }
        }
    }
    s->order = rl_data_sampler_new_count(rl_prompts_count(s->train), (uint64_t)r->run.seed,
                                         r->data.shuffle);
    if (!s->order) {
        return rl_errf(err, err_len, RL_ENOMEM, "out of memory");
    }
    if (!s->quiet) {
        rl_log_info("prompts: %zu train, %zu eval", rl_prompts_count(s->train),
                    s->eval ? rl_prompts_count(s->eval) : (size_t)0);
    }
    return 0;
}

static void s_teardown_data(s_ctl_t *s) {
    rl_data_sampler_destroy(&s->order);
    if (s->eval_answers) {
        for (size_t i = 0; i < rl_prompts_count(s->eval); i++) {
            free(s->eval_answers[i]);
        }
        free(s->eval_answers);
        s->eval_answers = NULL;
    }
    rl_prompts_destroy(&s->eval);
    rl_prompts_destroy(&s->train);
    rl_tokenizer_destroy(&s->tok);
}

int rl_controller_preflight(const rl_recipe_t *r, char *err, size_t err_len) {
    s_ctl_t s;
    memset(&s, 0, sizeof(s));
    s.r = r;
    s.quiet = 1;
    int rc = s_setup_data(&s, err, err_len);
    s_teardown_data(&s);
    for (int k = 0; !rc && k < r->n_rewards; k++) {
        char msg[2048];
        if (rl_reward_check(&r->rewards[k], msg, sizeof(msg)) != 0) {
            char where[64];
            snprintf(where, sizeof(where), "rewards[%d].%s", k,
                     r->rewards[k].plugin ? "plugin" : "config");
            rc = rl_recipe_errorf(r, where, err, err_len, RL_EINVAL, "%s", msg);
        }
    }
    return rc;
}

static int s_cancel(void *ctx);

// The largest frame any side of the run receives, from the run's real messages (each frame
// of a message is capped by ZMQ_MAXMSGSIZE; a peer sending more loses its connection):
//   - the trainable weights, one frame (LoRA: the adapter only; full: every parameter);
//   - a per-token tensor of the largest batch: (completions) x (longest prompt +
//     max_new_tokens) x 4 bytes, for the train step and for evaluation;
//   - a score request's first frame: every completion's prompt text, row JSON and completion
//     text (at most 3 bytes of text per raw byte of a token, for U+FFFD replacements), plus the
//     small tensors that travel inline (under RL_WIRE_INLINE_MAX each).
// The cap is the largest of these plus a quarter, plus 1 MiB for the small fields.
static int s_max_frame(s_ctl_t *s, char *err, size_t err_len) {
    const rl_recipe_t *r = s->r;
    rl_hf_config_t cfg;
    char msg[1024];
    if (rl_hf_config_load(r->model.path, &cfg, msg, sizeof msg) != 0) {
        return rl_recipe_errorf(r, "model.path", err, err_len, RL_EINVAL, "%s", msg);
    }
    s->vocab = cfg.vocab_size;
    double weights = (double)rl_hf_param_count(&cfg);
    if (r->lora.enabled) {
        rl_model_opts_t mo;
        rl_policy_model_opts(r, 1, &mo);
        weights = 0;
        for (int m = 0; m < RL_LORA_NMOD; m++) {
            int in = 0, out = 0;
            if (mo.lora_targets & (1 << m)) {
                rl_lora_module_dims(&cfg, m, &in, &out);
                weights += (double)cfg.num_hidden_layers * r->lora.r * (in + out);
            }
        }
    }
    int mnt = r->sampling.max_new_tokens;
    size_t n_train = (size_t)r->train.batch_size * (size_t)r->algorithm.num_generations;
    size_t n_eval = s->eval ? rl_prompts_count(s->eval) : 0;
    double texts = 0, longest = 0;
    size_t tok_bytes = 1;
    for (int32_t id = 0; id < rl_tokenizer_vocab_size(s->tok); id++) {
        size_t n = 0;
        if (rl_tokenizer_token_bytes(s->tok, id, &n) && n > tok_bytes) {
            tok_bytes = n;
        }
    }
    const rl_prompts_t *sets[2] = {s->train, s->eval};
    for (int k = 0; k < 2; k++) {
        for (size_t i = 0; sets[k] && i < rl_prompts_count(sets[k]); i++) {
            const rl_prompt_t *p = rl_prompts_get(sets[k], i);
            longest = p->len > longest ? p->len : longest;
            double t = (double)p->text_len + (double)p->row_len;
            texts = k == 0 && t > texts ? t : texts;
        }
    }
    double per_token = 4.0 * (double)(n_train > n_eval ? n_train : n_eval) * (longest + mnt);
    double score = (double)n_train * (texts + 3.0 * (double)tok_bytes * mnt + 32) +
                   8.0 * RL_WIRE_INLINE_MAX;
    double big = 4.0 * weights;
    big = per_token > big ? per_token : big;
    big = score > big ? score : big;
    double cap = big * 1.25 + (double)(1 << 20);
    s->max_frame = cap >= (double)RL_WIRE_MAX_BYTES ? (int64_t)RL_WIRE_MAX_BYTES : (int64_t)cap;
    rl_log_debug("frames capped at %lld bytes (weights %.0f, per-token %.0f, score %.0f)",
                 (long long)s->max_frame, 4.0 * weights, per_token, score);
    return 0;
}

static int s_setup_workers(s_ctl_t *s, char *err, size_t err_len) {
    const rl_recipe_t *r = s->r;
    char logs[4200];
    snprintf(logs, sizeof(logs), "%s/logs", s->o->run_dir);
    int rc = s_max_frame(s, err, err_len);
    if (rc) {
        return rc;
    }
    rc = rl_group_new(logs, r->roles.heartbeat, s->max_frame, &s->g, err, err_len);
    if (rc) {
        return rc;
    }
    rl_group_set_cancel(s->g, s_cancel, s);
    int at = r->roles.actor_threads ? r->roles.actor_threads : r->train.threads;
    int st = r->roles.sampler_threads ? r->roles.sampler_threads : r->train.threads;
    s->n_samplers = r->roles.samplers;
    s->samplers = calloc((size_t)s->n_samplers, sizeof(*s->samplers));
    if (!s->samplers) {
        return rl_errf(err, err_len, RL_ENOMEM, "out of memory");
    }
    if ((rc = rl_group_spawn(s->g, "actor", 0, s->o->recipe_path, at, err, err_len)) ||
        (rc = rl_group_spawn(s->g, "reward", 0, s->o->recipe_path, 1, err, err_len))) {
        return rc;
    }
    for (int k = 0; k < s->n_samplers; k++) {
        snprintf(s->samplers[k], sizeof(s->samplers[k]), "sampler/%d", k);
        if ((rc = rl_group_spawn(s->g, "sampler", k, s->o->recipe_path, st, err, err_len))) {
            return rc;
        }
    }
    double t0 = rl_clock_now();
    if ((rc = rl_group_wait_ready(s->g, r->roles.request_timeout, err, err_len))) {
        return rc;
    }
    char ta[32], ts[32];
    snprintf(ta, sizeof(ta), at > 1 ? "%d threads" : at == 1 ? "1 thread" : "all cores", at);
    snprintf(ts, sizeof(ts), st > 1 ? "%d threads" : st == 1 ? "1 thread" : "all cores", st);
    rl_log_info("workers ready in %.1f s: actor (%s), %d sampler%s (%s each), reward",
                rl_clock_now() - t0, ta, s->n_samplers, s->n_samplers == 1 ? "" : "s", ts);
    return 0;
}

// ---- calls ------------------------------------------------------------------------------------

static rl_msg_t *s_req(s_ctl_t *s, const char *op) {
    return rl_msg_new(op, rl_group_next_id(s->g));
}

static int s_call1(s_ctl_t *s, const char *peer, rl_msg_t *req, rl_msg_t **reply, double timeout,
                   char *err, size_t err_len) {
    if (!req) {
        return rl_errf(err, err_len, RL_ENOMEM, "out of memory");
    }
    const char *peers[1] = {peer};
    if (s->deadline > 0) {
        double left = s->deadline - rl_clock_now();
        timeout = left < timeout ? (left > 0.05 ? left : 0.05) : timeout;
    }
    return rl_group_call(s->g, 1, peers, &req, reply, timeout, NULL, err, err_len);
}

// Checks a sampler's generate reply before anything uses it: `want` completions, each of
// 1..max_new_tokens tokens that add up to the ids sent, every id inside the vocabulary, a finish
// reason of 0 (stop) or 1 (length), every logprob finite and <= 0. Returns 0 or RL_EPROTO
// naming the worker and the first thing wrong.
static int s_check_generate(const s_ctl_t *s, const char *peer, int64_t want, int64_t n_lens,
                            const int32_t *lens, int64_t n_ids, const int32_t *ids,
                            const float *lp, const uint8_t *fin, char *err, size_t err_len) {
    int mnt = s->r->sampling.max_new_tokens;
    if (n_lens != want) {
        return rl_errf(err, err_len, RL_EPROTO,
                       "worker %s: generate reply: %lld completions, %lld asked for", peer,
                       (long long)n_lens, (long long)want);
    }
    int64_t sum = 0;
    for (int64_t i = 0; i < n_lens; i++) {
        if (lens[i] < 1 || lens[i] > mnt) {
            return rl_errf(err, err_len, RL_EPROTO,
                           "worker %s: generate reply: completion %lld has %d tokens "
                           "(1..sampling.max_new_tokens = %d)", peer, (long long)i, lens[i],
                           mnt);
        }
        if (fin[i] > 1) {
            return rl_errf(err, err_len, RL_EPROTO,
                           "worker %s: generate reply: completion %lld has finish reason %d "
                           "(0 stop, 1 length)", peer, (long long)i, fin[i]);
        }
        sum += lens[i];
    }
    if (sum != n_ids) {
        return rl_errf(err, err_len, RL_EPROTO,
                       "worker %s: generate reply sizes do not add up (%lld ids, lengths sum "
                       "to %lld)", peer, (long long)n_ids, (long long)sum);
    }
    for (int64_t i = 0; i < n_ids; i++) {
        if (ids[i] < 0 || ids[i] >= s->vocab) {
            return rl_errf(err, err_len, RL_EPROTO,
                           "worker %s: generate reply: token id %d outside the vocabulary "
                           "(0..%d)", peer, ids[i], s->vocab - 1);
        }
        if (!(lp[i] <= 0.0f) || isinf(lp[i])) {
            return rl_errf(err, err_len, RL_EPROTO,
                           "worker %s: generate reply: logprob %g of token %lld is not a "
                           "finite number <= 0", peer, (double)lp[i], (long long)i);
        }
    }
    return 0;
}

// Generates n completions for prompts idx[0..P) of set `ps` on every sampler (contiguous shares).
static int s_generate(s_ctl_t *s, const rl_prompts_t *ps, const size_t *idx, int P, int n,
                      double temperature, uint64_t seed, s_gen_t *out, char *err,
                      size_t err_len) {
    const rl_recipe_t *r = s->r;
    memset(out, 0, sizeof(*out));
    int ns = s->n_samplers < P ? s->n_samplers : P;
    rl_msg_t *reqs[256] = {0}, *reps[256] = {0};
    const char *peers[256] = {0};
    int rc = 0;
    for (int k = 0; k < ns; k++) {
        reqs[k] = NULL;
        peers[k] = s->samplers[k];
    }
    for (int k = 0; k < ns && !rc; k++) {
        int p0 = (int)((int64_t)P * k / ns), p1 = (int)((int64_t)P * (k + 1) / ns);
        int64_t total = 0;
        for (int i = p0; i < p1; i++) {
            total += rl_prompts_get(ps, idx[i])->len;
        }
        int32_t *ids = malloc((size_t)total * sizeof(int32_t));
        int32_t *lens = malloc((size_t)(p1 - p0) * sizeof(int32_t));
        int64_t *pidx = malloc((size_t)(p1 - p0) * sizeof(int64_t));
        rl_msg_t *m = s_req(s, "generate");
        if (!ids || !lens || !pidx || !m) {
            free(ids);
            free(lens);
            free(pidx);
            rl_msg_free(&m);
            rc = rl_errf(err, err_len, RL_ENOMEM, "out of memory");
            break;
        }
        int64_t o = 0;
        for (int i = p0; i < p1; i++) {
            const rl_prompt_t *p = rl_prompts_get(ps, idx[i]);
            memcpy(ids + o, p->ids, (size_t)p->len * sizeof(int32_t));
            o += p->len;
            lens[i - p0] = p->len;
            pidx[i - p0] = (int64_t)idx[i];
        }
        int64_t sh_t[1] = {total}, sh_p[1] = {p1 - p0};
        int bad = rl_msg_set_int(m, "version", s->version);
        bad |= rl_msg_set_tensor_gift(m, "prompts", RL_DT_I32, 1, sh_t, ids);
        bad |= rl_msg_set_tensor_gift(m, "prompt_lens", RL_DT_I32, 1, sh_p, lens);
        bad |= rl_msg_set_tensor_gift(m, "prompt_index", RL_DT_I64, 1, sh_p, pidx);
        bad |= rl_msg_set_int(m, "n", n);
        bad |= rl_msg_set_int(m, "max_new_tokens", r->sampling.max_new_tokens);
        bad |= rl_msg_set_float(m, "temperature", temperature);
        bad |= rl_msg_set_float(m, "top_p", temperature > 0 ? r->sampling.top_p : 1.0);
        bad |= rl_msg_set_int(m, "top_k", temperature > 0 ? r->sampling.top_k : 0);
        bad |= rl_msg_set_int(m, "seed", (int64_t)(seed & 0x7fffffffffffffffull));
        if (s->n_stop > 0) {
            int64_t sh_s[1] = {s->n_stop};
            bad |= rl_msg_set_tensor(m, "stop_ids", RL_DT_I32, 1, sh_s, s->stop_ids);
        }
        if (bad) {
            rl_msg_free(&m);
            rc = rl_errf(err, err_len, RL_ENOMEM, "out of memory");
            break;
        }
        reqs[k] = m;
        peers[k] = s->samplers[k];
    }
    if (rc) {
        for (int k = 0; k < ns; k++) {
            rl_msg_free(&reqs[k]);
        }
        return rc;
    }
    rc = rl_group_call(s->g, ns, peers, reqs, reps, r->roles.request_timeout, NULL, err,
                       err_len);
    if (rc) {
        return rc;
    }
    // gather in prompt order
    int n_res = P * n;
    int64_t total = 0;
    const int32_t *lens[256], *ids[256];
    const float *lps[256];
    const uint8_t *fins[256];
    for (int k = 0; k < ns && !rc; k++) {
        int64_t sl[1], si[1], sp[1], sf[1], v;
        if (rl_msg_get_tensor(reps[k], "lens", RL_DT_I32, 1, sl, (const void **)&lens[k]) ||
            rl_msg_get_tensor(reps[k], "ids", RL_DT_I32, 1, si, (const void **)&ids[k]) ||
            rl_msg_get_tensor(reps[k], "logprobs", RL_DT_F32, 1, sp, (const void **)&lps[k]) ||
            rl_msg_get_tensor(reps[k], "finish", RL_DT_U8, 1, sf, (const void **)&fins[k]) ||
            sp[0] != si[0] || sf[0] != sl[0]) {
            rc = rl_errf(err, err_len, RL_EPROTO, "worker %s: malformed generate reply",
                         peers[k]);
            break;
        }
        int p0 = (int)((int64_t)P * k / ns), p1 = (int)((int64_t)P * (k + 1) / ns);
        if ((rc = s_check_generate(s, peers[k], (int64_t)(p1 - p0) * n, sl[0], lens[k], si[0],
                                   ids[k], lps[k], fins[k], err, err_len)) != 0) {
            break;
        }
        total += si[0];
        if (rl_msg_get_int(reps[k], "prefill_tokens", &v) == 0) {
            out->prefill += v;
        }
        if (rl_msg_get_int(reps[k], "decode_tokens", &v) == 0) {
            out->decode += v;
        }
    }
    if (!rc) {
        out->n_res = n_res;
        out->lens = malloc((size_t)n_res * sizeof(int32_t));
        out->off = malloc((size_t)n_res * sizeof(int64_t));
        out->fin = malloc((size_t)n_res);
        out->ids = malloc((size_t)(total ? total : 1) * sizeof(int32_t));
        out->lp = malloc((size_t)(total ? total : 1) * sizeof(float));
        if (!out->lens || !out->off || !out->fin || !out->ids || !out->lp) {
            rc = rl_errf(err, err_len, RL_ENOMEM, "out of memory");
        }
    }
    if (!rc) {
        int j = 0;
        int64_t o = 0;
        for (int k = 0; k < ns; k++) {
            int p0 = (int)((int64_t)P * k / ns), p1 = (int)((int64_t)P * (k + 1) / ns);
            int64_t ko = 0;
            for (int i = 0; i < (p1 - p0) * n; i++, j++) {
                out->lens[j] = lens[k][i];
                out->off[j] = o;
                out->fin[j] = fins[k][i];
                memcpy(out->ids + o, ids[k] + ko, (size_t)lens[k][i] * sizeof(int32_t));
                memcpy(out->lp + o, lps[k] + ko, (size_t)lens[k][i] * sizeof(float));
                o += lens[k][i];
                ko += lens[k][i];
            }
        }
    }
    for (int k = 0; k < ns; k++) {
        rl_msg_free(&reps[k]);
    }
    if (!rc && s_cut_stop_strings(s, out) != 0) {
        rc = rl_errf(err, err_len, RL_ENOMEM, "out of memory");
    }
    if (rc) {
        s_gen_free(out);
    }
    return rc;
}

// The text of completion j without its stop token, ids the tokenizer does not know dropped.
// caller owns *text_p.
// The first position of any multi-token stop string in text[0..len), or len.
static size_t s_stop_at(const s_ctl_t *s, const char *text, size_t len) {
    size_t at = len;
    for (int i = 0; i < s->n_stop_str; i++) {
        const char *p = strstr(text, s->stop_str[i]);
        if (p && (size_t)(p - text) < at) {
            at = (size_t)(p - text);
        }
    }
    return at;
}

static int s_completion_text(s_ctl_t *s, const s_gen_t *g, int j, char **text_p, size_t *len_p);

// Ends completions at the token that completes a multi-token stop string (finish "stop"); the
// tokens after it are dropped, as if the sampler had stopped there.
static int s_cut_stop_strings(s_ctl_t *s, s_gen_t *g) {
    g->cut = calloc((size_t)(g->n_res ? g->n_res : 1), 1);
    if (!g->cut) {
        return RL_ENOMEM;
    }
    for (int j = 0; s->n_stop_str > 0 && j < g->n_res; j++) {
        int n = g->lens[j];
        for (int k = 1; k <= n; k++) {
            g->lens[j] = k;
            uint8_t fin = g->fin[j];
            g->fin[j] = 1; // decode all k tokens
            char *text = NULL;
            size_t len = 0;
            int rc = s_completion_text(s, g, j, &text, &len);
            g->fin[j] = fin;
            if (rc) {
                return rc;
            }
            int hit = s_stop_at(s, text, len) < len;
            free(text);
            if (hit) {
                g->fin[j] = 0;
                g->cut[j] = 1;
                break;
            }
            if (k == n) {
                g->lens[j] = n;
            }
        }
    }
    return 0;
}

static int s_completion_text(s_ctl_t *s, const s_gen_t *g, int j, char **text_p, size_t *len_p) {
    // a stop token is not text; a stop string is cut from the text below
    int n = g->lens[j] - (g->fin[j] == 0 && !(g->cut && g->cut[j]) ? 1 : 0);
    int rc = rl_tokenizer_decode_known(s->tok, g->ids + g->off[j], (size_t)n, 0, text_p, len_p);
    if (rc == 0 && g->cut && g->cut[j]) {
        *len_p = s_stop_at(s, *text_p, *len_p);
        (*text_p)[*len_p] = '\0';
    }
    return rc;
}

// ---- weight sync ----------------------------------------------------------------------------

// Sends the actor's trainable weights (LoRA: the adapter only) to every sampler as version
// s->version. `from` is the actor's train reply, which carries the updated weights; NULL asks
// the actor for them (export_weights: at start and on resume).
static int s_sync(s_ctl_t *s, const rl_msg_t *from, char *err, size_t err_len) {
    rl_msg_t *rep = NULL;
    int rc = 0;
    if (!from) {
        rc = s_call1(s, "actor/0", s_req(s, "export_weights"), &rep,
                     s->r->roles.request_timeout, err, err_len);
        if (rc) {
            return rc;
        }
        from = rep;
    }
    int64_t shape[1];
    const float *w;
    if (rl_msg_get_tensor(from, "weights", RL_DT_F32, 1, shape, (const void **)&w)) {
        rl_msg_free(&rep);
        return rl_errf(err, err_len, RL_EPROTO, "worker actor/0: a reply without its weights");
    }
    s->n_trainable = shape[0];
    rl_msg_t *reqs[256] = {0}, *reps[256] = {0};
    const char *peers[256] = {0};
    for (int k = 0; k < s->n_samplers; k++) {
        rl_msg_t *m = s_req(s, "load_weights");
        float *copy = malloc((size_t)shape[0] * sizeof(float));
        if (!m || !copy || rl_msg_set_int(m, "version", s->version) ||
            rl_msg_set_str(m, "kind", s->r->lora.enabled ? "lora" : "full")) {
            free(copy);
            rl_msg_free(&m);
            for (int i = 0; i < k; i++) {
                rl_msg_free(&reqs[i]);
            }
            rl_msg_free(&rep);
            return rl_errf(err, err_len, RL_ENOMEM, "out of memory");
        }
        memcpy(copy, w, (size_t)shape[0] * sizeof(float));
        rl_msg_set_tensor_gift(m, "weights", RL_DT_F32, 1, shape, copy);
        reqs[k] = m;
        peers[k] = s->samplers[k];
    }
    rl_msg_free(&rep);
    rc = rl_group_call(s->g, s->n_samplers, peers, reqs, reps, s->r->roles.request_timeout, NULL,
                       err, err_len);
    for (int k = 0; !rc && k < s->n_samplers; k++) {
        rl_msg_free(&reps[k]);
    }
    return rc;
}

// ---- evaluation -------------------------------------------------------------------------------

// Accuracy of the eval prompts at `temperature` (0 = greedy).
static int s_eval_one(s_ctl_t *s, double temperature, double *acc, double *fmt, char *err,
                      size_t err_len) {
    size_t n = rl_prompts_count(s->eval);
    if (s->r->train.eval_samples > 0 && (size_t)s->r->train.eval_samples < n) {
        n = (size_t)s->r->train.eval_samples;
    }
    size_t *idx = malloc(n * sizeof(size_t));
    if (!idx) {
        return rl_errf(err, err_len, RL_ENOMEM, "out of memory");
    }
    for (size_t i = 0; i < n; i++) {
        idx[i] = i;
    }
    s_gen_t g;
    // the same draws at every evaluation (common random numbers: changes are the policy's)
    int rc = s_generate(s, s->eval, idx, (int)n, 1, temperature,
                        s_mix((uint64_t)s->r->run.seed, 0xE7A1ull), &g, err, err_len);
    free(idx);
    if (rc) {
        return rc;
    }
    double correct = 0, formatted = 0;
    for (int j = 0; j < g.n_res && !rc; j++) {
        char *text = NULL;
        size_t len = 0;
        if ((rc = s_completion_text(s, &g, j, &text, &len)) != 0) {
            rc = rl_errf(err, err_len, rc, "eval: cannot decode a completion");
            break;
        }
        rl_math_answer_t a;
        rl_math_extract(text, len, &a);
        formatted += a.formatted;
        correct += rl_math_correct(text, len, s->eval_answers[j]);
        free(text);
    }
    if (!rc) {
        *acc = correct / (double)g.n_res;
        *fmt = formatted / (double)g.n_res;
    }
    s_gen_free(&g);
    return rc;
}

static int s_evaluate(s_ctl_t *s, char *note, size_t note_len, char *err, size_t err_len) {
    double t0 = rl_clock_now(), acc, fmt, accg, fmtg;
    int rc = s_eval_one(s, s->r->sampling.temperature, &acc, &fmt, err, err_len);
    if (!rc) {
        rc = s_eval_one(s, 0.0, &accg, &fmtg, err, err_len);
    }
    if (rc) {
        return rc;
    }
    rl_metrics_add(s->metrics, "eval/accuracy", acc);
    rl_metrics_add(s->metrics, "eval/accuracy_greedy", accg);
    rl_metrics_add(s->metrics, "eval/format_rate", fmt);
    rl_metrics_add(s->metrics, "timing/eval", rl_clock_now() - t0);
    if (isnan(s->eval_first[0])) {
        s->eval_first[0] = acc;
        s->eval_first[1] = accg;
    }
    s->eval_last[0] = acc;
    s->eval_last[1] = accg;
    snprintf(note, note_len, "eval %.1f%% greedy %.1f%%", 100 * acc, 100 * accg);
    return 0;
}

// ---- checkpoints ------------------------------------------------------------------------------

// Writes checkpoints/step-<step> by the commit protocol of rl_checkpoint.h: the actor saves its
// weights and optimizer into step-<N>.tmp/, the controller adds state.json, syncs the tree,
// writes DONE and renames it into place.
static int s_checkpoint(s_ctl_t *s, char *err, size_t err_len) {
    double t0 = rl_clock_now();
    char tmp[4200], dir[4200];
    int rc = rl_checkpoint_prepare(s->o->run_dir, s->step, tmp, sizeof(tmp), err, err_len);
    if (rc) {
        return rc;
    }
    rl_msg_t *m = s_req(s, "save"), *rep = NULL;
    if (m && rl_msg_set_str(m, "dir", tmp)) {
        rl_msg_free(&m);
    }
    if ((rc = s_call1(s, "actor/0", m, &rep, s->r->roles.request_timeout, err, err_len))) {
        return rc;
    }
    int64_t mts = 0;
    rl_msg_get_int(rep, "model_train_step", &mts);
    rl_msg_free(&rep);
    rl_data_pos_t pos = rl_data_sampler_pos(s->order);
    rl_ckpt_state_t st;
    memset(&st, 0, sizeof(st));
    st.step = s->step;
    st.policy_version = s->version;
    st.data_epoch = pos.epoch;
    st.data_index = pos.index;
    st.rng = s->rng;
    snprintf(st.tune, sizeof(st.tune), "%s", s->r->lora.enabled ? "lora" : "full");
    st.n_trainable = s->n_trainable;
    st.num_tokens = s->num_tokens;
    st.model_train_step = mts;
    if ((rc = rl_checkpoint_commit(tmp, &st, NULL, dir, sizeof dir, err, err_len)) ||
        (rc = rl_checkpoint_prune(s->o->run_dir, s->r->train.keep_checkpoints, err, err_len))) {
        return rc;
    }
    s->last_ckpt = s->step;
    s->t_ckpt = rl_clock_now() - t0;
    rl_log_info("checkpoint: %s", dir);
    return 0;
}

// Restores the run from checkpoint folder `dir`: state.json, the data position, the actor's
// weights and optimizer. Returns 0, or an error that leaves the controller's state untouched;
// *mismatch is set when the checkpoint does not fit the recipe (another tuning, a data position
// outside the dataset), which an older checkpoint would not fix either.
static int s_load_checkpoint(s_ctl_t *s, const char *dir, int *mismatch, char *err,
                             size_t err_len) {
    *mismatch = 0;
    rl_ckpt_state_t st;
    int rc = rl_checkpoint_read_state(dir, &st, err, err_len);
    if (rc) {
        return rc;
    }
    const char *tune = s->r->lora.enabled ? "lora" : "full";
    if (strcmp(st.tune, tune) != 0) {
        *mismatch = 1;
        return rl_errf(err, err_len, RL_EINVAL,
                       "%s: the checkpoint is of %s tuning, the recipe asks for %s", dir, st.tune,
                       tune);
    }
    rl_data_pos_t pos = {st.data_epoch, st.data_index}, before = rl_data_sampler_pos(s->order);
    if (rl_data_sampler_seek(s->order, pos) != 0) {
        *mismatch = 1;
        return rl_errf(err, err_len, RL_EINVAL,
                       "%s: data position (epoch %lld, index %lld) is outside %s: was the "
                       "dataset changed?",
                       dir, (long long)pos.epoch, (long long)pos.index, s->r->data.train);
    }
    rl_msg_t *m = s_req(s, "load"), *rep = NULL;
    if (m && (rl_msg_set_str(m, "dir", dir) ||
              rl_msg_set_int(m, "model_train_step", st.model_train_step))) {
        rl_msg_free(&m);
    }
    if ((rc = s_call1(s, "actor/0", m, &rep, s->r->roles.request_timeout, err, err_len))) {
        rl_data_sampler_seek(s->order, before);
        return rc;
    }
    rl_msg_free(&rep);
    s->step = st.step;
    s->version = st.policy_version;
    s->rng = st.rng;
    s->num_tokens = st.num_tokens;
    s->last_ckpt = st.step;
    return 0;
}

// --resume: the checkpoint named (an error when it does not load), or the newest complete one
// that loads (the ones skipped, and why, are logged). Resuming from a checkpoint older than the
// newest starts a new branch: the newer checkpoints are moved aside (rl_checkpoint_abandon_after).
static int s_resume(s_ctl_t *s, char *err, size_t err_len) {
    int rc = 0, mismatch = 0;
    if (s->o->resume_from) {
        if ((rc = s_load_checkpoint(s, s->o->resume_from, &mismatch, err, err_len)) != 0) {
            return rc;
        }
        rl_log_info("resuming from %s at step %lld", s->o->resume_from, (long long)s->step);
    } else {
        int64_t *steps = NULL;
        size_t n = 0;
        if ((rc = rl_checkpoint_list(s->o->run_dir, &steps, &n)) != 0) {
            return rl_errf(err, err_len, rc, "%s/checkpoints: %s", s->o->run_dir, strerror(rc));
        }
        if (n == 0) {
            rl_log_warn("%s: no complete checkpoint; starting from step 0", s->o->run_dir);
            return 0;
        }
        size_t i = 0;
        for (; i < n; i++) {
            char dir[4200], why[2048];
            snprintf(dir, sizeof dir, "%s/checkpoints/step-%lld", s->o->run_dir,
                     (long long)steps[i]);
            if ((rc = s_load_checkpoint(s, dir, &mismatch, why, sizeof why)) == 0) {
                rl_log_info("resuming from %s at step %lld", dir, (long long)s->step);
                break;
            }
            if (mismatch) { // the recipe's fault, not the checkpoint's: an older one would not fit
                free(steps);
                return rl_errf(err, err_len, rc, "%s", why);
            }
            rl_log_warn("skipping checkpoints/step-%lld: %s", (long long)steps[i], why);
        }
        free(steps);
        if (i == n) {
            return rl_errf(err, err_len, RL_EINVAL,
                           "%s: none of its %zu checkpoints loads (see the warnings above); "
                           "remove the broken ones, or start over with --force", s->o->run_dir,
                           n);
        }
    }
    char where[4200];
    int moved = 0;
    if ((rc = rl_checkpoint_abandon_after(s->o->run_dir, s->step, where, sizeof where, &moved,
                                          err, err_len)) != 0) {
        return rc;
    }
    if (moved > 0) {
        rl_log_warn("resuming at step %lld starts a new branch: %d newer checkpoint%s moved to "
                    "%s (their metrics lines and trajectories after step %lld are dropped)",
                    (long long)s->step, moved, moved == 1 ? "" : "s", where,
                    (long long)s->step);
    }
    return 0;
}

// ---- one step ---------------------------------------------------------------------------------

typedef struct {
    size_t *idx;          // (P) dataset rows
    s_gen_t gen;
    double *raw;          // (R, n_res) raw reward scores
    double *total;        // (n_res)
    double *adv;          // (n_res)
    int *keep;            // (n_res) 1 = in the update
    float *old;           // (B,T) of the train batch
    int B, T;
    int *row_of;          // (B) result index of batch row b
} s_step_t;

static void s_step_free(s_step_t *t) {
    free(t->idx);
    s_gen_free(&t->gen);
    free(t->raw);
    free(t->total);
    free(t->adv);
    free(t->keep);
    free(t->old);
    free(t->row_of);
    memset(t, 0, sizeof(*t));
}

static int s_score(s_ctl_t *s, s_step_t *t, int G, char *err, size_t err_len) {
    const rl_recipe_t *r = s->r;
    int n = t->gen.n_res, R = r->n_rewards;
    const char **pr = calloc((size_t)n, sizeof(char *)), **co = calloc((size_t)n, sizeof(char *));
    const char **rows = calloc((size_t)n, sizeof(char *));
    size_t *prl = calloc((size_t)n, sizeof(size_t)), *col = calloc((size_t)n, sizeof(size_t));
    size_t *rowl = calloc((size_t)n, sizeof(size_t));
    char **texts = calloc((size_t)n, sizeof(char *));
    t->raw = calloc((size_t)R * (size_t)n, sizeof(double));
    t->total = calloc((size_t)n, sizeof(double));
    int rc = 0;
    if (!pr || !co || !rows || !prl || !col || !rowl || !texts || !t->raw || !t->total) {
        rc = rl_errf(err, err_len, RL_ENOMEM, "out of memory");
    }
    for (int j = 0; !rc && j < n; j++) {
        const rl_prompt_t *p = rl_prompts_get(s->train, t->idx[j / G]);
        pr[j] = p->text;
        prl[j] = p->text_len;
        rows[j] = p->row;
        rowl[j] = p->row_len;
        if (s_completion_text(s, &t->gen, j, &texts[j], &col[j]) != 0) {
            rc = rl_errf(err, err_len, RL_EINVAL, "cannot decode completion %d", j);
        }
        co[j] = texts[j];
    }
    int64_t sh[1] = {n}, shi[1] = {0};
    for (int j = 0; j < n; j++) {
        shi[0] += t->gen.lens[j];
    }
    for (int k = 0; !rc && k < R; k++) {
        rl_msg_t *m = s_req(s, "score"), *rep = NULL;
        int32_t *ids = malloc((size_t)(shi[0] ? shi[0] : 1) * sizeof(int32_t));
        int32_t *lens = malloc((size_t)n * sizeof(int32_t));
        if (!m || !ids || !lens) {
            free(ids);
            free(lens);
            rl_msg_free(&m);
            rc = rl_errf(err, err_len, RL_ENOMEM, "out of memory");
            break;
        }
        memcpy(ids, t->gen.ids, (size_t)shi[0] * sizeof(int32_t));
        memcpy(lens, t->gen.lens, (size_t)n * sizeof(int32_t));
        int bad = rl_msg_set_int(m, "reward", k);
        bad |= rl_msg_set_strs(m, "prompts", pr, prl, n);
        bad |= rl_msg_set_strs(m, "completions", co, col, n);
        bad |= rl_msg_set_strs(m, "rows", rows, rowl, n);
        bad |= rl_msg_set_tensor_gift(m, "ids", RL_DT_I32, 1, shi, ids);
        bad |= rl_msg_set_tensor_gift(m, "lens", RL_DT_I32, 1, sh, lens);
        if (bad) {
            rl_msg_free(&m);
            rc = rl_errf(err, err_len, RL_ENOMEM, "out of memory");
            break;
        }
        const char *peers[1] = {"reward/0"};
        int timed_out = 0;
        char e[2048];
        rc = rl_group_call(s->g, 1, peers, &m, &rep, r->roles.reward_timeout, &timed_out, e,
                           sizeof(e));
        const rl_recipe_reward_t *rw = &r->rewards[k];
        if (rc) {
            rc = rl_errf(err, err_len, rc, "reward '%s' (%s) failed on step %lld's batch: %s",
                         rw->name, rw->plugin ? rw->plugin : "built-in",
                         (long long)s->step + 1,
                         timed_out ? "no answer within roles.reward_timeout; the reward "
                                     "worker was stopped"
                                   : e);
            if (timed_out) {
                size_t l = strlen(err);
                snprintf(err + l, err_len - l, " (%g s)", r->roles.reward_timeout);
            }
            break;
        }
        int64_t ss[1];
        const double *sc;
        if (rl_msg_get_tensor(rep, "scores", RL_DT_F64, 1, ss, (const void **)&sc) ||
            ss[0] != n) {
            rl_msg_free(&rep);
            rc = rl_errf(err, err_len, RL_EPROTO, "reward '%s': malformed reply", rw->name);
            break;
        }
        memcpy(t->raw + (size_t)k * n, sc, (size_t)n * sizeof(double));
        rl_msg_free(&rep);
    }
    for (int j = 0; !rc && j < n; j++) {
        double tot = 0;
        for (int k = 0; k < R; k++) {
            tot += r->rewards[k].weight * t->raw[(size_t)k * n + j];
        }
        if (r->algorithm.overlong_buffer > 0) {
            tot += rl_grpo_overlong_penalty(t->gen.lens[j], r->sampling.max_new_tokens,
                                            r->algorithm.overlong_buffer,
                                            r->algorithm.overlong_penalty);
        }
        t->total[j] = tot; // NaN when any reward was unscorable
    }
    for (int j = 0; texts && j < n; j++) {
        free(texts[j]);
    }
    free(texts);
    free(pr);
    free(co);
    free(rows);
    free(prl);
    free(col);
    free(rowl);
    return rc;
}

// Packs the kept completions into the actor's (B,T) batch request.
static rl_msg_t *s_train_req(s_ctl_t *s, s_step_t *t, int G, double lr, const float *ref,
                             double *denom_p, int64_t *ntok_p) {
    const rl_recipe_t *r = s->r;
    int n = t->gen.n_res, B = 0, T = 2;
    for (int j = 0; j < n; j++) {
        if (t->keep[j]) {
            int L = rl_prompts_get(s->train, t->idx[j / G])->len + t->gen.lens[j];
            T = L > T ? L : T;
            B++;
        }
    }
    t->B = B;
    t->T = T;
    size_t bt = (size_t)B * (size_t)T;
    int32_t *tok = calloc(bt, sizeof(int32_t)), *len = calloc((size_t)B, sizeof(int32_t));
    uint8_t *mask = calloc(bt, 1);
    double *adv = calloc((size_t)B, sizeof(double));
    float *mu = calloc(bt, sizeof(float));
    t->row_of = calloc((size_t)B, sizeof(int));
    rl_msg_t *m = s_req(s, "train");
    if (!tok || !len || !mask || !adv || !mu || !t->row_of || !m) {
        free(tok);
        free(len);
        free(mask);
        free(adv);
        free(mu);
        rl_msg_free(&m);
        return NULL;
    }
    double active = 0;
    int b = 0;
    for (int j = 0; j < n; j++) {
        if (!t->keep[j]) {
            continue;
        }
        const rl_prompt_t *p = rl_prompts_get(s->train, t->idx[j / G]);
        int lp = p->len, lc = t->gen.lens[j];
        int32_t *row = tok + (size_t)b * T;
        memcpy(row, p->ids, (size_t)lp * sizeof(int32_t));
        memcpy(row + lp, t->gen.ids + t->gen.off[j], (size_t)lc * sizeof(int32_t));
        len[b] = lp + lc;
        int masked = r->algorithm.mask_truncated_completions && t->gen.fin[j] == 1;
        for (int i = 0; i < lc; i++) {
            mask[(size_t)b * T + lp + i] = masked ? 0 : 1;
            mu[(size_t)b * T + lp + i] = t->gen.lp[t->gen.off[j] + i];
        }
        active += masked ? 0 : lc;
        adv[b] = t->adv[j];
        t->row_of[b] = j;
        b++;
    }
    double denom = r->algorithm.loss_agg == RL_RECIPE_AGG_TOKEN_MEAN ? active
                   : r->algorithm.loss_agg == RL_RECIPE_AGG_SEQ_MEAN_TOKEN_MEAN
                       ? (double)B
                       : (double)B * r->sampling.max_new_tokens;
    if (denom <= 0) {
        denom = 1;
    }
    int64_t sh2[2] = {B, T}, sh1[1] = {B};
    int bad = rl_msg_set_int(m, "step", s->step + 1);
    bad |= rl_msg_set_float(m, "lr", lr);
    bad |= rl_msg_set_tensor_gift(m, "tokens", RL_DT_I32, 2, sh2, tok);
    bad |= rl_msg_set_tensor_gift(m, "lengths", RL_DT_I32, 1, sh1, len);
    bad |= rl_msg_set_tensor_gift(m, "mask", RL_DT_U8, 2, sh2, mask);
    bad |= rl_msg_set_tensor_gift(m, "adv", RL_DT_F64, 1, sh1, adv);
    bad |= rl_msg_set_tensor_gift(m, "mu_logp", RL_DT_F32, 2, sh2, mu);
    if (ref) {
        bad |= rl_msg_set_tensor(m, "ref_logp", RL_DT_F32, 2, sh2, ref);
    }
    bad |= rl_msg_set_float(m, "denom", denom);
    bad |= rl_msg_set_int(m, "micro_batch", r->train.micro_batch_size);
    bad |= rl_msg_set_int(m, "iterations", r->algorithm.num_iterations);
    if (bad) {
        rl_msg_free(&m);
        return NULL;
    }
    *denom_p = denom;
    *ntok_p = (int64_t)active;
    return m;
}

// The reference logprobs of the batch rows (beta > 0), through the actor's `logprobs`.
static int s_reference(s_ctl_t *s, rl_msg_t *train_req, float **ref_p, char *err,
                       size_t err_len) {
    int64_t sh[2], sl[1];
    const int32_t *tok, *len;
    if (rl_msg_get_tensor(train_req, "tokens", RL_DT_I32, 2, sh, (const void **)&tok) ||
        rl_msg_get_tensor(train_req, "lengths", RL_DT_I32, 1, sl, (const void **)&len)) {
        return rl_errf(err, err_len, RL_EINVAL, "internal: no batch");
    }
    rl_msg_t *m = s_req(s, "logprobs"), *rep = NULL;
    if (!m || rl_msg_set_tensor(m, "tokens", RL_DT_I32, 2, sh, tok) ||
        rl_msg_set_tensor(m, "lengths", RL_DT_I32, 1, sl, len) ||
        rl_msg_set_bool(m, "adapter", 0)) {
        rl_msg_free(&m);
        return rl_errf(err, err_len, RL_ENOMEM, "out of memory");
    }
    int rc = s_call1(s, "actor/0", m, &rep, s->r->roles.request_timeout, err, err_len);
    if (rc) {
        return rc;
    }
    int64_t so[2];
    const float *lp;
    if (rl_msg_get_tensor(rep, "logp", RL_DT_F32, 2, so, (const void **)&lp) || so[0] != sh[0] ||
        so[1] != sh[1]) {
        rl_msg_free(&rep);
        return rl_errf(err, err_len, RL_EPROTO, "worker actor/0: malformed logprobs reply");
    }
    *ref_p = malloc((size_t)sh[0] * (size_t)sh[1] * sizeof(float));
    if (*ref_p) {
        memcpy(*ref_p, lp, (size_t)sh[0] * (size_t)sh[1] * sizeof(float));
    }
    rl_msg_free(&rep);
    return *ref_p ? 0 : rl_errf(err, err_len, RL_ENOMEM, "out of memory");
}

static double s_get(const rl_msg_t *m, const char *k) {
    double v = NAN;
    rl_msg_get_float(m, k, &v);
    return v;
}

// Writes the records of step `step`: pending (before the actor's update, without old logprobs:
// rl_traj_put_pending) or whole (rl_traj_put_step, which completes a pending step).
static int s_store(s_ctl_t *s, int64_t step, s_step_t *t, int G, const float *ref, int pending,
                   char *err, size_t err_len) {
    const rl_recipe_t *r = s->r;
    int n = t->gen.n_res;
    rl_traj_record_t *recs = calloc((size_t)n, sizeof(*recs));
    uint8_t *mask = calloc((size_t)(t->gen.off[n - 1] + t->gen.lens[n - 1]), 1);
    double *rw = calloc((size_t)n * (size_t)(r->n_rewards ? r->n_rewards : 1), sizeof(double));
    char **names = calloc((size_t)(r->n_rewards ? r->n_rewards : 1), sizeof(char *));
    float *old = calloc((size_t)(t->gen.off[n - 1] + t->gen.lens[n - 1]), sizeof(float));
    float *refc = ref ? calloc((size_t)(t->gen.off[n - 1] + t->gen.lens[n - 1]), sizeof(float))
                      : NULL;
    int *brow = malloc((size_t)n * sizeof(int));
    if (!recs || !mask || !rw || !names || !old || !brow || (ref && !refc)) {
        free(recs);
        free(mask);
        free(rw);
        free(names);
        free(old);
        free(refc);
        free(brow);
        return rl_errf(err, err_len, RL_ENOMEM, "out of memory");
    }
    for (int k = 0; k < r->n_rewards; k++) {
        names[k] = r->rewards[k].name;
    }
    for (int j = 0; j < n; j++) {
        brow[j] = -1;
    }
    for (int b = 0; b < t->B; b++) {
        brow[t->row_of[b]] = b;
    }
    for (int j = 0; j < n; j++) {
        rl_traj_record_t *x = &recs[j];
        const rl_prompt_t *p = rl_prompts_get(s->train, t->idx[j / G]);
        int lc = t->gen.lens[j];
        int64_t o = t->gen.off[j];
        x->step = (uint64_t)step;
        x->prompt_index = (uint32_t)(j / G);
        x->sample_index = (uint32_t)(j % G);
        x->data_index = (int64_t)t->idx[j / G];
        x->policy_version = (uint64_t)s->version;
        x->n_prompt = p->len;
        x->prompt_ids = (int32_t *)p->ids;
        x->n_completion = lc;
        x->completion_ids = t->gen.ids + o;
        x->mask = mask + o;
        x->sampler_logprobs = t->gen.lp + o;
        int b = brow[j];
        if (b >= 0) {
            int masked = r->algorithm.mask_truncated_completions && t->gen.fin[j] == 1;
            for (int i = 0; i < lc; i++) {
                mask[o + i] = masked ? 0 : 1;
                old[o + i] = t->old ? t->old[(size_t)b * t->T + p->len + i] : 0.0f;
                if (refc) {
                    refc[o + i] = ref[(size_t)b * t->T + p->len + i];
                }
            }
            x->old_logprobs = t->old ? old + o : NULL;
            x->ref_logprobs = refc ? refc + o : NULL;
        }
        x->n_rewards = r->n_rewards;
        x->reward_names = names;
        for (int k = 0; k < r->n_rewards; k++) {
            rw[(size_t)j * r->n_rewards + k] = t->raw[(size_t)k * n + j];
        }
        x->rewards = rw + (size_t)j * r->n_rewards;
        x->reward = t->total[j];
        x->advantage = t->adv[j];
        x->finish = t->gen.fin[j];
    }
    int rc = pending ? rl_traj_put_pending(s->traj, (uint64_t)step, recs, n, err, err_len)
                     : rl_traj_put_step(s->traj, (uint64_t)step, recs, n, err, err_len);
    free(recs);
    free(mask);
    free(rw);
    free(names);
    free(old);
    free(refc);
    free(brow);
    return rc;
}

// One GRPO step. *advanced_p: the actor took the step's update (s->step moved on) and the
// step's metrics are in s->metrics, also when a later part (store, sync) failed: the caller
// writes that line before it stops, so that a resumed run has no hole.
static int s_step(s_ctl_t *s, int *advanced_p, char *note, size_t note_len, char *err,
                  size_t err_len) {
    const rl_recipe_t *r = s->r;
    const rl_recipe_algorithm_t *alg = &r->algorithm;
    int P = r->train.batch_size, G = alg->num_generations;
    s_step_t t;
    memset(&t, 0, sizeof(t));
    rl_metrics_t *mt = s->metrics;
    double t0 = rl_clock_now();
    int rc = 0;
    t.idx = malloc((size_t)P * sizeof(size_t));
    if (!t.idx) {
        return rl_errf(err, err_len, RL_ENOMEM, "out of memory");
    }
    rl_data_pos_t pos0 = rl_data_sampler_pos(s->order); // restored if the step fails
    for (int i = 0; i < P; i++) {
        t.idx[i] = rl_data_sampler_next(s->order);
    }
    // 1. generate
    rc = s_generate(s, s->train, t.idx, P, G, r->sampling.temperature,
                    s_mix((uint64_t)r->run.seed, (uint64_t)s->step + 1), &t.gen, err, err_len);
    double t1 = rl_clock_now();
    // 2. rewards
    if (!rc) {
        rc = s_score(s, &t, G, err, err_len);
    }
    double t2 = rl_clock_now();
    int n = t.gen.n_res;
    rl_grpo_adv_stats_t as;
    if (!rc) {
        t.adv = calloc((size_t)n, sizeof(double));
        t.keep = calloc((size_t)n, sizeof(int));
        if (!t.adv || !t.keep) {
            rc = rl_errf(err, err_len, RL_ENOMEM, "out of memory");
        }
    }
    if (!rc && (rc = rl_grpo_advantages(t.total, P, G, alg, t.adv, &as)) != 0) {
        rc = rl_errf(err, err_len, rc, "advantages");
    }
    int kept = 0;
    for (int g = 0; !rc && g < P; g++) {
        int zero = 1;
        for (int i = 0; i < G; i++) {
            zero &= t.adv[g * G + i] == 0.0;
        }
        for (int i = 0; i < G; i++) {
            t.keep[g * G + i] = !(alg->drop_zero_std_groups && zero);
            kept += t.keep[g * G + i];
        }
    }
    // 3. reference, 4. train
    double lr = rl_sched_lr(&s->sched, s->step), t3 = rl_clock_now(), t4 = t3, denom = 0;
    double t_pending = 0;
    float *ref = NULL;
    rl_msg_t *rep = NULL;
    int64_t ntok = 0;
    if (!rc && kept > 0) {
        rl_msg_t *req = s_train_req(s, &t, G, lr, NULL, &denom, &ntok);
        if (!req) {
            rc = rl_errf(err, err_len, RL_ENOMEM, "out of memory");
        }
        if (!rc && alg->beta > 0) {
            rc = s_reference(s, req, &ref, err, err_len);
            if (!rc) {
                int64_t sh2[2] = {t.B, t.T};
                rc = rl_msg_set_tensor(req, "ref_logp", RL_DT_F32, 2, sh2, ref);
            }
        }
        // the records before the update (pending): once the actor has moved, a failure cannot
        // leave the step without them
        double ta = rl_clock_now();
        if (!rc) {
            rc = s_store(s, s->step + 1, &t, G, ref, 1, err, err_len);
        }
        t_pending = rl_clock_now() - ta;
        t3 = rl_clock_now();
        if (rc) {
            rl_msg_free(&req);
        } else {
            s->actor_consistent = 0;
            rc = s_call1(s, "actor/0", req, &rep, r->roles.request_timeout, err, err_len);
        }
        t4 = rl_clock_now();
        if (!rc) {
            int64_t so[2];
            const float *old;
            if (rl_msg_get_tensor(rep, "old_logp", RL_DT_F32, 2, so, (const void **)&old) ||
                so[0] != t.B || so[1] != t.T) {
                rc = rl_errf(err, err_len, RL_EPROTO, "worker actor/0: malformed train reply");
            } else if (!(t.old = malloc((size_t)t.B * (size_t)t.T * sizeof(float)))) {
                rc = rl_errf(err, err_len, RL_ENOMEM, "out of memory");
            } else {
                memcpy(t.old, old, (size_t)t.B * (size_t)t.T * sizeof(float));
            }
        }
    }
    int advanced = 0; // the actor took this step's update (or there was none to take)
    if (!rc) {
        s->step++;
        s->actor_consistent = 1;
        s->num_tokens += ntok;
        advanced = 1;
    }
    // 5. store (completes the pending records with the old logprobs)
    double t5 = rl_clock_now();
    if (!rc && rl_fault("store")) {
        rc = rl_errf(err, err_len, RL_EIO, "trajectory store: step %lld could not be written "
                     "(RLCTL_FAULT=store)", (long long)s->step);
    } else if (!rc) {
        rc = s_store(s, s->step, &t, G, ref, 0, err, err_len);
    }
    double t6 = rl_clock_now();
    if (advanced) {
        // metrics (TRL's names, REFERENCE.md §6)
        double rsum = 0, rn = 0, len_sum = 0, clipped = 0;
        for (int j = 0; j < n; j++) {
            if (!isnan(t.total[j])) {
                rsum += t.total[j];
                rn++;
            }
            len_sum += t.gen.lens[j];
            clipped += t.gen.fin[j] == 1;
        }
        rl_metrics_add(mt, "reward", rn > 0 ? rsum / rn : NAN);
        rl_metrics_add(mt, "reward_std", as.reward_std);
        for (int k = 0; k < r->n_rewards; k++) {
            double a = 0, c = 0;
            for (int j = 0; j < n; j++) {
                double v = t.raw[(size_t)k * n + j];
                if (!isnan(v)) {
                    a += v;
                    c++;
                }
            }
            char name[300];
            snprintf(name, sizeof(name), "rewards/%s/mean", r->rewards[k].name);
            rl_metrics_add(mt, name, c > 0 ? a / c : NAN);
        }
        rl_metrics_add(mt, "frac_reward_zero_std", (double)as.zero_std_groups / P);
        rl_metrics_add(mt, "completions/mean_length", len_sum / n);
        rl_metrics_add(mt, "completions/clipped_ratio", clipped / n);
        if (rep) {
            double tok = s_get(rep, "tokens");
            double d = tok > 0 ? tok : 1;
            rl_metrics_add(mt, "loss", s_get(rep, "loss"));
            rl_metrics_add(mt, "grad_norm", s_get(rep, "grad_norm"));
            rl_metrics_add(mt, "kl", s_get(rep, "kl") / d);
            rl_metrics_add(mt, "entropy", s_get(rep, "entropy") / d);
            rl_metrics_add(mt, "clip_ratio/low_mean", s_get(rep, "clip_low") / d);
            rl_metrics_add(mt, "clip_ratio/high_mean", s_get(rep, "clip_high") / d);
            rl_metrics_add(mt, "clip_ratio/region_mean",
                           (s_get(rep, "clip_low") + s_get(rep, "clip_high")) / d);
            if (alg->dual_clip > 0) {
                rl_metrics_add(mt, "clip_ratio/dual_mean", s_get(rep, "dual_clip") / d);
            }
            rl_metrics_add(mt, "ratio/mean", s_get(rep, "ratio") / d);
            if (alg->tis != RL_RECIPE_TIS_NONE) {
                rl_metrics_add(mt, "tis/weight_mean", s_get(rep, "tis_weight") / d);
                rl_metrics_add(mt, "tis/masked_sequences", s_get(rep, "tis_masked"));
            }
            double gap = 0, gn = 0;
            for (int b = 0; b < t.B; b++) {
                int j = t.row_of[b];
                const rl_prompt_t *p = rl_prompts_get(s->train, t.idx[j / G]);
                for (int i = 0; i < t.gen.lens[j]; i++) {
                    gap += fabs((double)t.old[(size_t)b * t.T + p->len + i] -
                                (double)t.gen.lp[t.gen.off[j] + i]);
                    gn++;
                }
            }
            rl_metrics_add(mt, "sampler/logprob_gap", gn > 0 ? gap / gn : 0);
        }
        rl_metrics_add(mt, "learning_rate", lr);
        rl_metrics_add(mt, "num_tokens", (double)s->num_tokens);
        rl_metrics_add(mt, "tokens/generated", len_sum);
        rl_metrics_add(mt, "tokens/trained", (double)ntok);
        rl_metrics_add(mt, "timing/generate", t1 - t0);
        rl_metrics_add(mt, "timing/reward", t2 - t1);
        rl_metrics_add(mt, "timing/reference", t3 - t2);
        rl_metrics_add(mt, "timing/train", t4 - t3);
        rl_metrics_add(mt, "timing/store", t_pending + (t6 - t5));
        rl_metrics_add(mt, "tokens_per_second", len_sum / (t1 - t0 > 0 ? t1 - t0 : 1));
        s->gen_tokens_total += len_sum;
        snprintf(note, note_len, "reward %.3f kl %.4f gen %.0f tok/s",
                 rn > 0 ? rsum / rn : NAN,
                 rep ? s_get(rep, "kl") / (s_get(rep, "tokens") > 0 ? s_get(rep, "tokens") : 1)
                     : 0.0,
                 len_sum / (t1 - t0 > 0 ? t1 - t0 : 1));
    }
    // 6. sync (after the metrics: a failed sync still leaves the step whole; a resumed run syncs
    // the samplers from the actor anyway)
    if (!rc && kept > 0) {
        s->version = s->step;
        rc = s_sync(s, rep, err, err_len);
    }
    double t7 = rl_clock_now();
    if (!rc) {
        rl_metrics_add(mt, "timing/sync", t7 - t6);
        rl_metrics_add(mt, "timing/step", t7 - t0);
    }
    *advanced_p = advanced;
    if (rc && !advanced) {
        rl_data_sampler_seek(s->order, pos0); // the step's prompts are taken again on resume
    }
    rl_msg_free(&rep);
    free(ref);
    s_step_free(&t);
    return rc;
}

// ---- stopping on a signal ---------------------------------------------------------------------
// SIGINT/SIGTERM set *o->interrupt (cli/cmd_run.c counts them). The run must be gone within
// roles.stop_grace seconds of the first one. s_cancel, polled by every wait of rl_group, decides
// when to stop waiting: at once during start-up and evaluations (nothing there is needed for a
// checkpoint) and on a second signal; during a step, as soon as the rest of the step (estimated
// from the last step's time) plus a checkpoint (the last one's time) plus S_STOP_MARGIN no longer
// fit in the grace left. The loop then writes a checkpoint of the last finished step when that
// alone fits, and stops.

// Seconds a checkpoint takes: the last one's, or (none yet) the weights and Adam's two moments
// written at 100 MB/s.
static double s_ckpt_estimate(const s_ctl_t *s) {
    return s->t_ckpt > 0 ? s->t_ckpt : 0.5 + 12.0 * (double)s->n_trainable / 100e6;
}

// Seconds of roles.stop_grace left (a large number before any signal).
static double s_grace_left(const s_ctl_t *s) {
    return s->t_signal > 0 ? s->r->roles.stop_grace - (rl_clock_now() - s->t_signal) : 1e30;
}

static int s_cancel(void *ctx) {
    s_ctl_t *s = ctx;
    int n = s->o->interrupt ? (int)*s->o->interrupt : 0;
    if (n == 0) {
        return 0;
    }
    double now = rl_clock_now();
    if (s->t_signal == 0) {
        s->t_signal = now;
    }
    if (n >= 2) {
        s->stop_now = 2;
    }
    if (s->stop_now || s->phase == S_PHASE_START || s->phase == S_PHASE_EVAL) {
        return 1;
    }
    double need = S_STOP_MARGIN + s_ckpt_estimate(s);
    if (s->phase == S_PHASE_STEP) {
        double rest = s->t_step_est > 0 ? 1.2 * s->t_step_est - (now - s->t_step_start) : 1e30;
        need += rest > 0 ? rest : 0;
    }
    if (need > s_grace_left(s)) {
        s->stop_now = 1;
        return 1;
    }
    return 0;
}

// After a wait was cancelled (RL_ECANCELED): a checkpoint of the last finished step when the
// actor holds it and it fits in the grace left, then the message. Returns
// RL_CONTROLLER_INTERRUPTED.
static int s_stop_cancelled(s_ctl_t *s, char *err, size_t err_len) {
    char note[1024] = "";
    s_cancel(s); // notes the time of a signal that arrived during a wait no one polled
    double left = s_grace_left(s);
    int wrote = 0;
    if (s->stop_now != 2 && s->actor_consistent && s->step > s->last_ckpt && s->step > 0 &&
        s_ckpt_estimate(s) + S_STOP_MARGIN <= left) {
        rl_group_set_cancel(s->g, NULL, NULL);
        s->deadline = rl_clock_now() + left - S_STOP_MARGIN;
        char e2[1024];
        wrote = s_checkpoint(s, e2, sizeof e2) == 0;
        if (!wrote) {
            rl_log_warn("no checkpoint on stopping: %s", e2);
        }
    }
    if (wrote) {
        snprintf(note, sizeof note, "checkpoint of step %lld written", (long long)s->step);
    } else if (s->last_ckpt > 0) {
        snprintf(note, sizeof note,
                 "the newest complete checkpoint is of step %lld; rlctl run --resume redoes the "
                 "steps after it", (long long)s->last_ckpt);
    } else {
        snprintf(note, sizeof note, "no checkpoint: a new run starts from step 0");
    }
    char why[256];
    if (s->stop_now == 2) {
        snprintf(why, sizeof why, "stopped at once on a second signal");
    } else if (s->phase == S_PHASE_STEP) {
        snprintf(why, sizeof why, "stopped on a signal: the step and a checkpoint would not "
                 "finish within roles.stop_grace (%g s)", s->r->roles.stop_grace);
    } else {
        snprintf(why, sizeof why, "stopped on a signal");
    }
    return rl_errf(err, err_len, RL_CONTROLLER_INTERRUPTED, "%s, during step %lld; %s%s", why,
                   (long long)s->step + 1, note,
                   wrote ? "; continue with rlctl run --resume" : "");
}

// ---- the loop ---------------------------------------------------------------------------------

// On resume: eval/accuracy(_greedy) of the step-0 line of metrics.jsonl, if there is one.
static void s_first_eval(s_ctl_t *s, const char *metrics_path) {
    FILE *f = fopen(metrics_path, "rb");
    char *line = NULL;
    size_t cap = 0;
    while (f && getline(&line, &cap, f) > 0) {
        json_t *o = json_loads(line, 0, NULL);
        json_t *a = json_object_get(o, "eval/accuracy");
        json_t *g = json_object_get(o, "eval/accuracy_greedy");
        int first = json_integer_value(json_object_get(o, "step")) == 0 && a && g;
        if (first) {
            s->eval_first[0] = json_number_value(a);
            s->eval_first[1] = json_number_value(g);
        }
        json_decref(o);
        if (first) {
            break;
        }
    }
    free(line);
    if (f) {
        fclose(f);
    }
}

// Writes final/: the actor saves into final.tmp/, which is published as final/ in one rename
// (rl_checkpoint_publish_dir), so final/ is either the previous one or this one, whole.
static int s_final(s_ctl_t *s, char *err, size_t err_len) {
    char path[4200], tmp[4200];
    snprintf(path, sizeof(path), "%s/final", s->o->run_dir);
    snprintf(tmp, sizeof(tmp), "%s/final.tmp", s->o->run_dir);
    int rc;
    struct stat st;
    if (lstat(tmp, &st) == 0 && !S_ISDIR(st.st_mode)) {
        return rl_errf(err, err_len, RL_EINVAL, "%s is in the way (not a folder): remove it",
                       tmp);
    }
    if ((rc = rl_checkpoint_rmtree(tmp)) || (rc = rl_checkpoint_mkdirs(tmp))) {
        return rl_errf(err, err_len, rc, "%s: %s", tmp, strerror(rc));
    }
    if (rl_fault("final")) {
        return rl_errf(err, err_len, RL_EIO, "%s: cannot write (RLCTL_FAULT=final)", tmp);
    }
    rl_msg_t *m = s_req(s, "save_final"), *rep = NULL;
    // final/ follows model.dtype (auto: the input model's torch_dtype), as SFT's does
    int bf16 = s->r->model.dtype == RL_RECIPE_DTYPE_BFLOAT16;
    if (s->r->model.dtype == RL_RECIPE_DTYPE_AUTO) {
        rl_hf_config_t cfg;
        char msg[512];
        bf16 = rl_hf_config_load(s->r->model.path, &cfg, msg, sizeof(msg)) == 0 &&
               strcmp(cfg.torch_dtype, "bfloat16") == 0;
    }
    if (m && (rl_msg_set_str(m, "dir", tmp) || rl_msg_set_bool(m, "bf16", bf16))) {
        rl_msg_free(&m);
    }
    if ((rc = s_call1(s, "actor/0", m, &rep, s->r->roles.request_timeout, err, err_len))) {
        return rc;
    }
    rl_msg_free(&rep);
    if (!s->r->lora.enabled &&
        (rc = rl_checkpoint_hf_extras(tmp, s->r->model.tokenizer, s->r->model.path, err,
                                      err_len)) != 0) {
        return rc;
    }
    if ((rc = rl_checkpoint_publish_dir(tmp, path, err, err_len)) != 0) {
        return rc;
    }
    rl_log_info("final %s: %s", s->r->lora.enabled ? "adapter" : "model", path);
    return 0;
}

int rl_controller_run(const rl_recipe_t *r, const rl_controller_opts_t *o, char *err,
                      size_t err_len) {
    s_ctl_t s;
    memset(&s, 0, sizeof(s));
    s.r = r;
    s.o = o;
    s.eval_first[0] = s.eval_first[1] = NAN;
    s.eval_last[0] = s.eval_last[1] = NAN;
    s.actor_consistent = 1;
    s.last_ckpt = -1;
    s.t_start = rl_clock_now();
    rl_rng_seed(&s.rng, (uint64_t)r->run.seed);
    char path[4200], msg[1024];
    int rc = s_setup_data(&s, err, err_len);
    if (!rc) {
        snprintf(path, sizeof(path), "%s/trajectories.lmdb", o->run_dir);
        rc = rl_traj_open(path, 0, &s.traj, err, err_len);
    }
    if (!rc) {
        rc = s_setup_workers(&s, err, err_len);
    }
    if (!rc && o->resume) {
        rc = s_resume(&s, err, err_len);
    }
    int64_t total = r->train.steps;
    s.sched = rl_sched_from_recipe(r);
    if (!rc) {
        snprintf(path, sizeof(path), "%s/metrics.jsonl", o->run_dir);
        rc = rl_metrics_truncate_after(path, s.step, err, err_len);
    }
    if (!rc && (rl_traj_last_step(s.traj) > (uint64_t)s.step ||
                rl_traj_pending_step(s.traj) > (uint64_t)s.step)) {
        rc = rl_traj_truncate_after(s.traj, (uint64_t)s.step, err, err_len);
    }
    if (!rc && s.step > 0) {
        s_first_eval(&s, path); // the "before" of the closing summary
    }
    if (!rc) {
        s.metrics = rl_metrics_new(o->run_dir, o->tensorboard, msg, sizeof(msg));
        if (!s.metrics) {
            rc = rl_errf(err, err_len, RL_EIO, "%s", msg);
        }
    }
    if (!rc) {
        s.progress = rl_progress_new(stderr, total, r->train.log_every, RL_PROGRESS_AUTO);
        if (!s.progress) {
            rc = rl_errf(err, err_len, RL_ENOMEM, "out of memory");
        }
    }
    // weights version s.step to every sampler (the adapter only, with LoRA)
    if (!rc) {
        s.version = s.step;
        rc = s_sync(&s, NULL, err, err_len);
    }
    int do_eval = s.eval && r->train.eval_every > 0;
    if (!rc && s.eval && s.step == 0) {
        char note[128];
        if ((rc = s_evaluate(&s, note, sizeof(note), err, err_len)) == 0) {
            rl_log_info("before training: %s", note);
            if ((rc = rl_metrics_write(s.metrics, 0, rl_clock_wall())) != 0) {
                rc = rl_errf(err, err_len, rc, "%s", rl_metrics_errmsg(s.metrics));
            }
        }
    }
    int64_t last = total;
    if (o->stop_at > 0 && o->stop_at < last) {
        last = o->stop_at;
    }
    if (!rc && o->interrupt && *o->interrupt) {
        // Ctrl-C during start-up or the first evaluation: nothing new to save
        rc = rl_errf(err, err_len, RL_CONTROLLER_INTERRUPTED,
                     "interrupted before step %lld; nothing was trained in this run%s",
                     (long long)s.step + 1, s.last_ckpt > 0 ? "; continue with rlctl run "
                                                              "--resume" : "");
    }
    s.phase = S_PHASE_IDLE;
    while (!rc && s.step < last) {
        double t0 = rl_clock_now();
        char note[256] = "", enote[128] = "";
        int advanced = 0;
        s.phase = S_PHASE_STEP;
        s.t_step_start = t0;
        rc = s_step(&s, &advanced, note, sizeof(note), err, err_len);
        if (rc) { // s.phase stays: s_stop_cancelled says where the stop came
            // the step's line still goes out when the update was taken: no hole on resume
            if (advanced && rl_metrics_write(s.metrics, s.step, rl_clock_wall()) != 0) {
                rl_log_warn("metrics of step %lld: %s", (long long)s.step,
                            rl_metrics_errmsg(s.metrics));
            }
            break;
        }
        s.phase = S_PHASE_IDLE;
        s.t_step_est = rl_clock_now() - t0;
        int64_t step = s.step;
        int log_now = step % r->train.log_every == 0 || step == last;
        int interrupted = o->interrupt && *o->interrupt;
        if (!interrupted &&
            ((do_eval && step % r->train.eval_every == 0) || (s.eval && step == total))) {
            s.phase = S_PHASE_EVAL;
            rc = s_evaluate(&s, enote, sizeof(enote), err, err_len);
            if (rc) {
                if (rc == RL_ECANCELED) {
                    rl_metrics_write(s.metrics, step, rl_clock_wall()); // the step's own line
                }
                break;
            }
            s.phase = S_PHASE_IDLE;
            log_now = 1;
        }
        rl_metrics_add(s.metrics, "timing/step_total", rl_clock_now() - t0);
        if (log_now && (rc = rl_metrics_write(s.metrics, step, rl_clock_wall())) != 0) {
            rc = rl_errf(err, err_len, rc, "%s", rl_metrics_errmsg(s.metrics));
            break;
        }
        if (!log_now) {
            rl_metrics_clear(s.metrics);
        }
        rl_progress_update(s.progress, step, "%s%s%s", note, enote[0] ? " | " : "", enote);
        int stop = o->interrupt && *o->interrupt && step < last;
        int save = (r->train.save_every > 0 && step % r->train.save_every == 0 &&
                    step < total) ||
                   (step == last && last < total) || stop;
        if (save && (rc = s_checkpoint(&s, err, err_len))) {
            break;
        }
        if (stop) {
            rl_progress_finish(s.progress);
            rc = rl_errf(err, err_len, RL_CONTROLLER_INTERRUPTED,
                         "interrupted after step %lld; checkpoint written; continue with "
                         "rlctl run --resume", (long long)step);
            break;
        }
        if (step == last && last < total) {
            rl_progress_finish(s.progress);
            rl_log_info("stopped after step %lld (--stop-at); checkpoint written; continue "
                        "with rlctl run --resume", (long long)step);
            break;
        }
    }
    if (s.progress) {
        rl_progress_finish(s.progress);
    }
    if (rc == RL_ECANCELED) {
        rc = s_stop_cancelled(&s, err, err_len);
    }
    if (!rc && s.step >= total) {
        rc = s_final(&s, err, err_len);
        if (!rc && !isnan(s.eval_first[0])) {
            fprintf(stderr,
                    "eval/accuracy         %5.1f%% -> %5.1f%% (%+.1f points)\n"
                    "eval/accuracy_greedy  %5.1f%% -> %5.1f%% (%+.1f points)\n",
                    100 * s.eval_first[0], 100 * s.eval_last[0],
                    100 * (s.eval_last[0] - s.eval_first[0]), 100 * s.eval_first[1],
                    100 * s.eval_last[1], 100 * (s.eval_last[1] - s.eval_first[1]));
        }
        if (!rc) {
            rl_log_info("%lld steps in %.0f s", (long long)total, rl_clock_now() - s.t_start);
        }
    }
    // a failure (final/ included) leaves the rescue checkpoint below
    if (rc && rc != RL_CONTROLLER_INTERRUPTED && s.g && s.actor_consistent &&
        s.step > s.last_ckpt && s.step > 0) {
        // leave a resumable checkpoint of the last finished step when the actor still can
        char e2[1024];
        if (s_checkpoint(&s, e2, sizeof(e2)) == 0) {
            size_t l = strlen(err);
            snprintf(err + l, err_len - l,
                     "\n(checkpoint of step %lld written; continue with rlctl run --resume)",
                     (long long)s.step);
        } else {
            rl_log_warn("no checkpoint after the failure: %s", e2);
            if (s.last_ckpt > 0) {
                size_t l = strlen(err);
                snprintf(err + l, err_len - l,
                         "\n(the newest checkpoint is of step %lld; continue with rlctl run "
                         "--resume)", (long long)s.last_ckpt);
            }
        }
    } else if (rc && rc != RL_CONTROLLER_INTERRUPTED && s.last_ckpt > 0) {
        size_t l = strlen(err);
        snprintf(err + l, err_len - l,
                 "\n(the newest checkpoint is of step %lld; continue with rlctl run --resume)",
                 (long long)s.last_ckpt);
    }
    double grace = s_grace_left(&s) - 0.5; // stopping: what is left of roles.stop_grace
    grace = grace < 5.0 ? (grace > 0.1 ? grace : 0.1) : 5.0;
    rl_group_destroy(&s.g, s.stop_now == 2 ? 0.0 : grace);
    rl_progress_destroy(&s.progress);
    rl_metrics_destroy(&s.metrics);
    rl_traj_close(&s.traj);
    free(s.samplers);
    s_teardown_data(&s);
    return rc;
}
