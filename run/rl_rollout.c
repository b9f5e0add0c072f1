// rl_rollout — the rollout every sampling algorithm shares (rl_rollout.h): data, generation,
// scoring, the actor's batch, records, the common metrics and the held-out evaluation.
#include "rl_rollout.h"

#include "rl_chat.h"
#include "rl_clock.h"
#include "rl_env_host.h"
#include "rl_env_module.h"
#include "rl_env_proto.h"
#include "rl_err.h"
#include "rl_fault.h"
#include "rl_jsonl.h"
#include "rl_log.h"
#include "rl_grpo.h"
#include "rl_reaper.h"
#include "rl_reward.h"
#include "rl_reward_math.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

uint64_t rl_rollout_mix(uint64_t a, uint64_t b) {
    uint64_t z = a * 0x9E3779B97F4A7C15ull + b + 0x632BE59BD9B4E019ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

// ---- the data -----------------------------------------------------------------------------------

// The reference answer of an evaluation row, normalised as the math reward reads numbers
// ("1,234" -> "1234"); a text that is not a number is kept as it is. NULL when the field is
// absent, empty or of another type (or out of memory).
static char *s_answer(const rl_prompt_t *p, const char *field) {
    char *text = NULL, norm[64];
    if (rl_jsonl_row_field_text(p->row, p->row_len, field, &text) != 0) {
        return NULL;
    }
    if (!text[0]) {
        free(text);
        return NULL;
    }
    if (rl_math_normalize(text, norm) != 0) {
        return text;
    }
    free(text);
    return strdup(norm);
}

void rl_rollout_data_destroy(rl_rollout_data_t **self_p) {
    rl_rollout_data_t *s = *self_p;
    if (!s) {
        return;
    }
    for (size_t i = 0; s->eval_answers && i < rl_prompts_count(s->eval); i++) {
        free(s->eval_answers[i]);
    }
    free(s->eval_answers);
    free(s->eval_prompts);
    rl_prompts_destroy(&s->eval);
    rl_prompts_destroy(&s->train);
    free(s);
    *self_p = NULL;
}

int rl_rollout_data_new(const rl_recipe_t *r, rl_tokenizer_t *tok, unsigned flags,
                        rl_rollout_data_t **out, char *err, size_t err_len) {
    rl_rollout_data_t *s = calloc(1, sizeof *s);
    *out = s;
    if (!s) {
        return rl_errf(err, err_len, RL_ENOMEM, "out of memory");
    }
    char msg[2048];
    rl_chat_format_t chat = rl_run_chat_format(r);
    if (!(flags & RL_ROLLOUT_EVAL_ONLY)) {
        s->train = rl_prompts_load(rl_recipe_paths(&r->data.train), r->data.train.n,
                                   r->data.prompt_field, tok, chat, r->data.max_prompt_length,
                                   r->data.truncation, msg, sizeof(msg));
        if (!s->train) {
            return rl_errf(err, err_len, RL_EINVAL, "%s", msg);
        }
    }
    if (s->train && rl_prompts_dropped(s->train)) {
        rl_log_warn("data.train: %zu prompts dropped (longer than data.max_prompt_length %d)",
                    rl_prompts_dropped(s->train), r->data.max_prompt_length);
    }
    if (r->data.eval.n) {
        s->eval = rl_prompts_load(rl_recipe_paths(&r->data.eval), r->data.eval.n,
                                  r->data.prompt_field, tok, chat, r->data.max_prompt_length,
                                  r->data.truncation, msg, sizeof(msg));
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
            // scored by the recipe's rewards (GRPO, PPO) a row needs no answer; DPO measures
            // accuracy by the math rule, which does
            if (!s->eval_answers[i] && (flags & RL_ROLLOUT_EVAL_ONLY)) {
                return rl_errf(err, err_len, RL_EINVAL,
                               "%s:%d: no field '%s' (data.answer_field) to score the "
                               "evaluation against",
                               p->file, p->line, r->data.answer_field);
            }
        }
        // the prompts evaluated: the first train.eval_samples (0 = all)
        s->n_eval = (int)n;
        if (r->train.eval_samples > 0 && (size_t)r->train.eval_samples < n) {
            s->n_eval = r->train.eval_samples;
        }
        s->eval_prompts = calloc((size_t)s->n_eval + 1, sizeof(*s->eval_prompts));
        if (!s->eval_prompts) {
            return rl_errf(err, err_len, RL_ENOMEM, "out of memory");
        }
        for (int i = 0; i < s->n_eval; i++) {
            const rl_prompt_t *p = rl_prompts_get(s->eval, (size_t)i);
            s->eval_prompts[i] = (rl_run_prompt_t){p->ids, p->len, i, 0};
        }
    }
    if (!(flags & RL_ROLLOUT_QUIET)) {
        rl_log_info("prompts: %zu train, %zu eval",
                    s->train ? rl_prompts_count(s->train) : (size_t)0,
                    s->eval ? rl_prompts_count(s->eval) : (size_t)0);
    }
    return 0;
}

// The check of a `command:` reward: the program started, and a reply to one request (the first
// training prompt, an empty completion), so that a program that exits before replying is
// caught before the run. Returns 0 or an error in msg.
static int s_probe(const rl_recipe_reward_t *w, const rl_prompt_t *p, char *msg, size_t len) {
    rl_reward_t *rw = NULL;
    int rc = rl_reward_open(w, 1, &rw, msg, len);
    if (!rc && p) {
        static const int32_t none[1] = {0};
        rl_reward_item_t it = {p->text, p->text_len, "", 0, none, 0, p->row, p->row_len};
        double v = 0;
        rc = rl_reward_score(rw, &it, 1, &v, msg, len);
    }
    rl_reward_close(&rw);
    return rc;
}

typedef struct {
    const rl_recipe_reward_t *w;
    const rl_recipe_t *r;
    const rl_prompt_t *p;
} s_probe_ctx_t;

static int s_probe_reward(const s_probe_ctx_t *c, char *msg, size_t len) {
    return s_probe(c->w, c->p, msg, len);
}

// The recipe's environment answers a reset of the first training row (episode "check-0", seed
// 0) with a reply the protocol accepts, then a close: a program that does not start, exits or
// answers garbage is caught before the run.
static int s_probe_env(const s_probe_ctx_t *c, char *msg, size_t len) {
    rl_recipe_env_t one = c->r->env;
    one.workers = 1;
    rl_env_host_t *h = NULL;
    int rc = rl_env_host_open(&one, &h, msg, len);
    json_t *row = c->p ? json_loadb(c->p->row, c->p->row_len, 0, NULL) : NULL;
    if (!rc && row) {
        rl_env_reset_item_t it = {"check-0", row, 0};
        const char *ids[1] = {"check-0"};
        char *req = rl_env_request_reset(&it, 1), *reply = NULL;
        rl_env_reset_reply_t rep;
        rc = req ? rl_env_host_call(h, req, &reply, msg, len) : RL_ENOMEM;
        if (!rc) {
            char why[1024];
            rc = rl_env_reply_reset(reply, strlen(reply), 1, ids, &rep, why, sizeof why);
            if (rc) {
                rl_errf(msg, len, rc, "its reply to a reset of the first training row: %s", why);
            } else {
                rl_env_reset_reply_free(&rep, 1);
            }
        }
        free(reply);
        free(req);
        char *close_req = rc ? NULL : rl_env_request_close(ids, 1);
        reply = NULL;
        if (close_req && rl_env_host_call(h, close_req, &reply, msg, len) == 0) {
            free(reply);
        }
        free(close_req);
    }
    json_decref(row);
    rl_env_host_close(&h);
    return rc;
}

// fn in a child process that answers for whatever a program it starts starts, as the reward
// worker of a run does (a child subreaper: a descendant that left the program's process group
// is killed too, rl_reaper_sweep); the child sends back its result and message through a pipe.
static int s_in_child(int (*fn)(const s_probe_ctx_t *, char *, size_t), const s_probe_ctx_t *c,
                      char *msg, size_t len) {
    int fds[2];
    if (pipe(fds) != 0) {
        return rl_errf(msg, len, errno, "pipe: %s", strerror(errno));
    }
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        int e = errno;
        close(fds[0]);
        close(fds[1]);
        return rl_errf(msg, len, e, "fork: %s", strerror(e));
    }
    if (pid == 0) {
        close(fds[0]);
        char m[2048] = "";
        int32_t code = prctl(PR_SET_CHILD_SUBREAPER, 1) != 0
                           ? rl_errf(m, sizeof m, errno, "prctl: %s", strerror(errno))
                           : fn(c, m, sizeof m);
        rl_reaper_sweep(2.0);
        size_t n = strlen(m);
        int ok = write(fds[1], &code, sizeof code) == (ssize_t)sizeof code &&
                 write(fds[1], m, n) == (ssize_t)n;
        _exit(ok ? 0 : 1);
    }
    close(fds[1]);
    char buf[2048 + sizeof(int32_t)];
    size_t got = 0;
    for (ssize_t r;
         got < sizeof buf - 1 &&
         ((r = read(fds[0], buf + got, sizeof buf - 1 - got)) > 0 || (r < 0 && errno == EINTR));) {
        got += r > 0 ? (size_t)r : 0;
    }
    close(fds[0]);
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
    }
    if (got < sizeof(int32_t)) {
        return rl_errf(msg, len, RL_EIO, "the check of the command died (%s %d)",
                       WIFSIGNALED(st) ? "signal" : "status",
                       WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
    }
    int32_t code;
    memcpy(&code, buf, sizeof code);
    buf[got] = '\0';
    if (code) {
        snprintf(msg, len, "%s", buf + sizeof code);
    }
    return code;
}

int rl_rollout_preflight(const rl_recipe_t *r, char *err, size_t err_len) {
    char msg[2048];
    rl_tokenizer_t *tok = rl_run_tokenizer(r, err, err_len);
    if (!tok) {
        return RL_EINVAL;
    }
    rl_rollout_data_t *s = NULL;
    int rc = rl_rollout_data_new(r, tok, RL_ROLLOUT_QUIET, &s, err, err_len);
    const rl_prompt_t *first =
        !rc && s->train && rl_prompts_count(s->train) > 0 ? rl_prompts_get(s->train, 0) : NULL;
    for (int k = 0; !rc && k < r->n_rewards; k++) {
        const rl_recipe_reward_t *w = &r->rewards[k];
        int command = !w->plugin && w->builtin == RL_RECIPE_REWARD_COMMAND;
        s_probe_ctx_t c = {w, r, first};
        if ((command ? s_in_child(s_probe_reward, &c, msg, sizeof msg)
                     : rl_reward_check(w, msg, sizeof(msg))) != 0) {
            // reported at the key that names what failed
            char where[64];
            snprintf(where, sizeof(where), "rewards[%d].%s", k,
                     w->plugin                                ? "plugin"
                     : w->python_json                         ? "python"
                     : w->builtin == RL_RECIPE_REWARD_COMMAND ? "command"
                     : w->builtin == RL_RECIPE_REWARD_HTTP    ? "http"
                                                              : "config");
            rc = rl_recipe_errorf(r, where, err, err_len, RL_EINVAL, "%s", msg);
        }
    }
    if (!rc && r->env.plugin && rl_env_module_check(r->env.plugin, msg, sizeof msg) != 0) {
        rc = rl_recipe_errorf(r, "env.plugin", err, err_len, RL_EINVAL, "%s", msg);
    }
    // a program or plugin must answer now; a server need not be up before the first step (as
    // the rewards on a server: its URL was checked at load)
    if (!rc && rl_recipe_has_env(r) && !r->env.http.url) {
        s_probe_ctx_t c = {NULL, r, first};
        if (s_in_child(s_probe_env, &c, msg, sizeof msg) != 0) {
            const char *key = r->env.plugin      ? "env.plugin"
                              : r->env.command.n ? "env.command"
                                                 : "env.builtin";
            rc = rl_recipe_errorf(r, key, err, err_len, RL_EINVAL, "%s", msg);
        }
    }
    rl_rollout_data_destroy(&s);
    rl_tokenizer_destroy(&tok);
    return rc;
}

double rl_rollout_data_frame(const rl_run_t *run, const rl_rollout_data_t *s, size_t per_step) {
    const rl_recipe_t *r = run->r;
    int mnt = r->sampling.max_new_tokens;
    size_t n_train = per_step;
    size_t n_eval = (size_t)s->n_eval;
    double texts = 0, longest = 0;
    size_t tok_bytes = 1;
    for (int32_t id = 0; id < rl_tokenizer_vocab_size(run->tok); id++) {
        size_t n = 0;
        if (rl_tokenizer_token_bytes(run->tok, id, &n) && n > tok_bytes) {
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
    double score =
        (double)n_train * (texts + 3.0 * (double)tok_bytes * mnt + 32) + 8.0 * RL_WIRE_INLINE_MAX;
    return per_token > score ? per_token : score;
}

// ---- one step's rollout -------------------------------------------------------------------------

void rl_rollout_free(rl_rollout_t *t) {
    free(t->idx);
    rl_run_gen_free(&t->gen);
    free(t->raw);
    free(t->total);
    free(t->row_of);
    free(t->brow);
    free(t->tok);
    free(t->len);
    free(t->mask);
    free(t->mu);
    rl_episodes_free(t->eps, t->n_eps);
    free(t->eps);
    memset(t, 0, sizeof(*t));
}

int rl_rollout_post(rl_run_t *run, const rl_rollout_data_t *d, int P, int G, int64_t step,
                    rl_rollout_job_t *job, char *err, size_t err_len) {
    const rl_recipe_t *r = run->r;
    memset(job, 0, sizeof *job);
    job->P = P;
    job->G = G;
    job->step = step;
    job->idx = malloc((size_t)P * sizeof(size_t));
    rl_run_prompt_t *pr = malloc((size_t)P * sizeof(*pr));
    if (!job->idx || !pr) {
        free(pr);
        rl_rollout_job_free(job);
        return rl_errf(err, err_len, RL_ENOMEM, "out of memory");
    }
    job->pos0 = rl_data_sampler_pos(run->order);
    for (int i = 0; i < P; i++) {
        job->idx[i] = rl_data_sampler_next(run->order);
        const rl_prompt_t *p = rl_prompts_get(d->train, job->idx[i]);
        pr[i] = (rl_run_prompt_t){p->ids, p->len, (int64_t)job->idx[i], 0};
    }
    if (run->env) { // episodes: run at collect, turn by turn
        job->d = d;
        free(pr);
        return 0;
    }
    int rc = rl_run_generate_post(run, pr, P, G, r->sampling.temperature,
                                  rl_rollout_mix((uint64_t)r->run.seed, (uint64_t)step), 0,
                                  &job->job, err, err_len);
    free(pr);
    if (rc) {
        rl_data_sampler_seek(run->order, job->pos0);
        rl_rollout_job_free(job);
    }
    return rc;
}

int rl_rollout_collect(rl_run_t *run, rl_rollout_job_t *job, rl_rollout_t *t, char *err,
                       size_t err_len) {
    t->P = job->P;
    t->G = job->G;
    t->idx = job->idx;
    job->idx = NULL;
    if (job->d) {
        return rl_rollout_episodes(run, job->d->train, t, run->r->sampling.temperature,
                                   rl_rollout_mix((uint64_t)run->r->run.seed, (uint64_t)job->step),
                                   job->step, 0, err, err_len);
    }
    t->version = rl_run_genjob_version(job->job);
    return rl_run_generate_collect(run, job->job, &t->gen, err, err_len);
}

void rl_rollout_job_free(rl_rollout_job_t *job) {
    rl_run_genjob_free(&job->job);
    free(job->idx);
    memset(job, 0, sizeof *job);
}

int rl_rollout_generate(rl_run_t *run, const rl_rollout_data_t *d, int P, int G, rl_rollout_t *t,
                        char *err, size_t err_len) {
    rl_rollout_job_t job;
    int rc = rl_rollout_post(run, d, P, G, run->step + 1, &job, err, err_len);
    if (rc) {
        return rc;
    }
    rc = rl_rollout_collect(run, &job, t, err, err_len);
    if (rc) {
        rl_data_sampler_seek(run->order, job.pos0);
    }
    rl_rollout_job_free(&job);
    return rc;
}

void rl_rollout_totals(const rl_recipe_t *r, const double *raw, int m, double *total) {
    for (int j = 0; j < m; j++) {
        double tot = 0;
        for (int k = 0; k < r->n_rewards; k++) {
            double x = raw[(size_t)k * m + j];
            // weight 0: measured and logged, never trained on; a `python:` reward's None (NaN)
            // is "not applicable", left out of the sum as TRL's nansum leaves it
            if (r->rewards[k].weight != 0 && !(r->rewards[k].python_json && isnan(x))) {
                tot += r->rewards[k].weight * x;
            }
        }
        total[j] = tot; // NaN when another reward trained on was unscorable
    }
}

void rl_rollout_eval_stats(const rl_recipe_t *r, const double *raw, const double *total, int P,
                           int n, rl_rollout_eval_t *out) {
    int m = P * n;
    double pass = 0, tsum = 0, tn = 0, any = 0;
    for (int j = 0; j < m; j++) {
        pass += !isnan(total[j]) && total[j] >= r->train.eval_pass_threshold;
        if (!isnan(total[j])) {
            tsum += total[j];
            tn++;
        }
    }
    for (int p = 0; p < P; p++) { // pass@k: any of the prompt's n completions
        int hit = 0;
        for (int k = 0; k < n; k++) {
            double v = total[(size_t)p * n + k];
            hit |= !isnan(v) && v >= r->train.eval_pass_threshold;
        }
        any += hit;
    }
    for (int k = 0; k < r->n_rewards; k++) {
        double a = 0, c = 0;
        for (int j = 0; j < m; j++) {
            double v = raw[(size_t)k * m + j];
            if (!isnan(v)) {
                a += v;
                c++;
            }
        }
        out->means[k] = c > 0 ? a / c : NAN;
    }
    out->reward = tn > 0 ? tsum / tn : NAN;
    out->accuracy = m > 0 ? pass / m : NAN;
    out->pass_at_k = P > 0 ? any / P : NAN;
}

// The scores' sums must not overflow: every mean, std and advantage of the batch (the group
// statistics, the metrics' means) is a sum over its completions, and a finite score near
// DBL_MAX (1.7e308), or one whose square passes it (above 1.3e154), would turn them into
// infinities and NaNs far from the reward that caused them. So the sum of squares of each
// reward's scores over the batch, and of the weighted totals, must be finite (when it is,
// every sum, mean, centred square and std of those values is finite too); otherwise the run
// stops naming the reward and the score. raw (R, m), total (m): NaN is unscorable, skipped.
static int s_check_sums(const rl_recipe_t *r, const double *raw, const double *total, int m,
                        const char *what, char *err, size_t err_len) {
    for (int k = 0; k <= r->n_rewards; k++) {
        const double *v = k < r->n_rewards ? raw + (size_t)k * m : total;
        double ss = 0.0;
        int worst = -1;
        for (int j = 0; j < m; j++) {
            if (!isnan(v[j])) {
                ss += v[j] * v[j];
                worst = worst < 0 || fabs(v[j]) > fabs(v[worst]) ? j : worst;
            }
        }
        if (isfinite(ss)) {
            continue;
        }
        if (k == r->n_rewards) { // the totals: name the reward of the largest weighted score
            int kk = 0;
            for (int q = 1; q < r->n_rewards; q++) {
                double a = fabs(r->rewards[q].weight * raw[(size_t)q * m + worst]);
                kk = a > fabs(r->rewards[kk].weight * raw[(size_t)kk * m + worst]) ? q : kk;
            }
            return rl_errf(err, err_len, RL_EINVAL,
                           "%s: the weighted total of completion %d is %g (reward '%s' scored "
                           "%g, weight %g): totals this large overflow the batch's statistics "
                           "(the sum of their squares passes 1.8e308); scores must stay well "
                           "below 1e150",
                           what, worst, total[worst], r->rewards[kk].name,
                           raw[(size_t)kk * m + worst], r->rewards[kk].weight);
        }
        return rl_errf(err, err_len, RL_EINVAL,
                       "reward '%s' scored %g on completion %d of %s: scores this large overflow "
                       "the batch's statistics (the sum of their squares passes 1.8e308); "
                       "scores must stay well below 1e150",
                       r->rewards[k].name, v[worst], worst, what);
    }
    return 0;
}

// An episode's row for the rewards: the dataset row with "rlctl_episode": {"messages": what
// followed the first prompt (the policy's turns as parsed, the environment's answers), "tools":
// reset's tools or null} (docs/envs.md). JSON text (caller frees), *len its length; NULL when
// out of memory (a row that does not parse keeps only the episode).
static char *s_episode_row(const rl_prompt_t *p, const rl_episode_t *ep, size_t *len) {
    json_t *row = json_loadb(p->row, p->row_len, 0, NULL);
    if (!json_is_object(row)) {
        json_decref(row);
        row = json_object();
    }
    json_t *after = json_array();
    for (size_t i = (size_t)ep->n_first; after && i < json_array_size(ep->messages); i++) {
        json_array_append(after, json_array_get(ep->messages, i));
    }
    json_t *e = after ? json_pack("{s:o,s:O}", "messages", after, "tools",
                                  ep->tools ? ep->tools : json_null())
                      : NULL;
    char *out = NULL;
    if (row && e && json_object_set_new(row, "rlctl_episode", e) == 0) {
        out = json_dumps(row, JSON_COMPACT | JSON_PRESERVE_ORDER);
    }
    json_decref(row);
    *len = out ? strlen(out) : 0;
    return out;
}

// Scores t's completions of `prompts` (rows t->idx) with every reward of the recipe; `what`
// names the batch in errors; shaping: add DAPO's overlong shaping to the total.
static int s_score(rl_run_t *run, const rl_prompts_t *prompts, rl_rollout_t *t, int shaping,
                   const char *what, char *err, size_t err_len) {
    const rl_recipe_t *r = run->r;
    int n = t->gen.n_res, R = r->n_rewards, G = t->G;
    const char **pr = calloc((size_t)n, sizeof(char *)), **co = calloc((size_t)n, sizeof(char *));
    const char **rows = calloc((size_t)n, sizeof(char *));
    size_t *prl = calloc((size_t)n, sizeof(size_t)), *col = calloc((size_t)n, sizeof(size_t));
    size_t *rowl = calloc((size_t)n, sizeof(size_t));
    char **texts = calloc((size_t)n, sizeof(char *));
    char **ep_rows = calloc((size_t)n, sizeof(char *)); // episodes' rows, owned
    t->raw = calloc((size_t)R * (size_t)n, sizeof(double));
    t->total = calloc((size_t)n, sizeof(double));
    int rc = 0;
    if (!pr || !co || !rows || !prl || !col || !rowl || !texts || !ep_rows || !t->raw ||
        !t->total) {
        rc = rl_errf(err, err_len, RL_ENOMEM, "out of memory");
    }
    for (int j = 0; !rc && j < n; j++) {
        const rl_prompt_t *p = rl_prompts_get(prompts, t->idx[j / G]);
        pr[j] = p->text;
        prl[j] = p->text_len;
        rows[j] = p->row;
        rowl[j] = p->row_len;
        if (t->eps && !rc) { // an episode: its conversation after the first prompt, in the row
            char *er = s_episode_row(p, &t->eps[j], &rowl[j]);
            if (!er) {
                rc = rl_errf(err, err_len, RL_ENOMEM, "out of memory");
            }
            rows[j] = er;
            ep_rows[j] = er;
        }
        if (rl_run_completion_text(run, &t->gen, j, &texts[j], &col[j]) != 0) {
            rc = rl_errf(err, err_len, RL_EINVAL, "cannot decode completion %d", j);
        }
        co[j] = texts[j];
    }
    int64_t n_ids = 0;
    for (int j = 0; j < n; j++) {
        n_ids += t->gen.lens[j];
    }
    for (int k = 0; !rc && k < R; k++) {
        rl_proto_score_t q = {.reward = k,
                              .prompts = pr,
                              .completions = co,
                              .rows = rows,
                              .prompt_lens = prl,
                              .completion_lens = col,
                              .row_lens = rowl,
                              .n = n,
                              .ids = t->gen.ids,
                              .n_ids = n_ids,
                              .lens = t->gen.lens};
        rl_msg_t *req = NULL, *rep = NULL;
        int timed_out = 0;
        char e[2048];
        int r2 = rl_proto_score_encode(&q, rl_run_id(run), &req, e, sizeof e);
        if (!r2) {
            r2 = rl_run_call(run, &run->reward, 0, req, &rep, r->roles.reward_timeout, &timed_out,
                             e, sizeof(e));
        }
        const rl_recipe_reward_t *rw = &r->rewards[k];
        if (r2) {
            char origin[1024];
            rl_reward_spec_origin(rw, origin, sizeof origin);
            rc = rl_errf(err, err_len, r2, "reward '%s' (%s) failed on %s: %s", rw->name, origin,
                         what,
                         timed_out ? "no answer within roles.reward_timeout; the reward "
                                     "worker was stopped"
                                   : e);
            if (timed_out) {
                size_t l = strlen(err);
                snprintf(err + l, err_len - l, " (%g s)", r->roles.reward_timeout);
            }
            break;
        }
        rl_proto_score_reply_t x;
        if (rl_proto_score_reply_decode(rep, &x, e, sizeof e) != 0 || x.n != n) {
            rl_msg_free(&rep);
            rc = rl_errf(err, err_len, RL_EPROTO, "reward '%s': malformed reply", rw->name);
            break;
        }
        memcpy(t->raw + (size_t)k * n, x.scores, (size_t)n * sizeof(double));
        rl_msg_free(&rep);
    }
    if (!rc) {
        rl_rollout_totals(r, t->raw, n, t->total);
        for (int j = 0; t->eps && j < n; j++) { // an episode's return: its steps' rewards too
            t->total[j] = t->eps[j].dropped ? NAN : t->total[j] + t->eps[j].env_reward;
        }
        rc = s_check_sums(r, t->raw, t->total, n, what, err, err_len);
    }
    for (int j = 0; !rc && shaping && r->algorithm.overlong_buffer > 0 && j < n; j++) {
        t->total[j] +=
            rl_grpo_overlong_penalty(t->gen.lens[j], r->sampling.max_new_tokens,
                                     r->algorithm.overlong_buffer, r->algorithm.overlong_penalty);
    }
    for (int j = 0; texts && j < n; j++) {
        free(texts[j]);
    }
    for (int j = 0; ep_rows && j < n; j++) {
        free(ep_rows[j]);
    }
    free(ep_rows);
    free(texts);
    free(pr);
    free(co);
    free(rows);
    free(prl);
    free(col);
    free(rowl);
    return rc;
}

int rl_rollout_score(rl_run_t *run, const rl_rollout_data_t *d, rl_rollout_t *t, char *err,
                     size_t err_len) {
    char what[64];
    snprintf(what, sizeof what, "step %lld's batch", (long long)run->step + 1);
    return s_score(run, d->train, t, 1, what, err, err_len);
}

int rl_rollout_batch(rl_run_t *run, const rl_rollout_data_t *d, rl_rollout_t *t, const int *keep) {
    const rl_recipe_t *r = run->r;
    int n = t->gen.n_res, B = 0, T = 2;
    for (int j = 0; j < n; j++) {
        if ((!keep || keep[j]) && !(t->eps && t->eps[j].dropped)) {
            const int32_t *pids;
            int L;
            rl_rollout_prompt(d, t, j, &pids, &L);
            L += t->gen.lens[j];
            T = L > T ? L : T;
            B++;
        }
    }
    t->B = B;
    t->T = T;
    size_t bt = (size_t)B * (size_t)T;
    t->tok = calloc(bt, sizeof(int32_t));
    t->len = calloc((size_t)B, sizeof(int32_t));
    t->mask = calloc(bt, 1);
    t->mu = calloc(bt, sizeof(float));
    t->row_of = calloc((size_t)B, sizeof(int));
    t->brow = malloc((size_t)n * sizeof(int));
    if (!t->tok || !t->len || !t->mask || !t->mu || !t->row_of || !t->brow) {
        return RL_ENOMEM;
    }
    double active = 0;
    int b = 0;
    for (int j = 0; j < n; j++) {
        t->brow[j] = -1;
        if ((keep && !keep[j]) || (t->eps && t->eps[j].dropped)) {
            continue; // a dropped episode is never trained on
        }
        const int32_t *pids;
        int lp, lc = t->gen.lens[j];
        rl_rollout_prompt(d, t, j, &pids, &lp);
        int32_t *row = t->tok + (size_t)b * T;
        memcpy(row, pids, (size_t)lp * sizeof(int32_t));
        memcpy(row + lp, t->gen.ids + t->gen.off[j], (size_t)lc * sizeof(int32_t));
        t->len[b] = lp + lc;
        int masked = r->algorithm.mask_truncated_completions && t->gen.fin[j] == 1;
        // an episode's environment tokens are context, never trained on
        const uint8_t *em = t->eps ? t->eps[j].mask + lp : NULL;
        for (int i = 0; i < lc; i++) {
            uint8_t m = masked ? 0 : em ? em[i] : 1;
            t->mask[(size_t)b * T + lp + i] = m;
            t->mu[(size_t)b * T + lp + i] = t->gen.lp[t->gen.off[j] + i];
            active += m;
        }
        t->row_of[b] = j;
        t->brow[j] = b;
        b++;
    }
    double denom = r->algorithm.loss_agg == RL_RECIPE_AGG_TOKEN_MEAN ? active
                   : r->algorithm.loss_agg == RL_RECIPE_AGG_SEQ_MEAN_TOKEN_MEAN
                       ? (double)B
                       : (double)B * r->sampling.max_new_tokens;
    t->denom = denom > 0 ? denom : 1;
    t->ntok = (int64_t)active;
    return 0;
}

// ---- records ------------------------------------------------------------------------------------

int rl_rollout_store(rl_run_t *run, const rl_rollout_data_t *d, const rl_rollout_t *t, int64_t step,
                     const rl_rollout_extra_t *ex, int pending, char *err, size_t err_len) {
    const rl_recipe_t *r = run->r;
    if (!pending && rl_fault("store")) { // docs/reliability.md; tests only
        return rl_errf(err, err_len, RL_EIO,
                       "trajectory store: step %lld could not be written (RLCTL_FAULT=store)",
                       (long long)step);
    }
    int n = t->gen.n_res, G = t->G;
    size_t n_tok = (size_t)(t->gen.off[n - 1] + t->gen.lens[n - 1]);
    size_t nt = n_tok ? n_tok : 1;
    rl_traj_record_t *recs = calloc((size_t)n, sizeof(*recs));
    rl_traj_episode_t *epi = NULL; // env: each record's episode
    int32_t *starts = NULL;        // their turns' starts
    int used = 0;
    uint8_t *mask = calloc(nt, 1);
    double *rw = calloc((size_t)n * (size_t)(r->n_rewards ? r->n_rewards : 1), sizeof(double));
    char **names = calloc((size_t)(r->n_rewards ? r->n_rewards : 1), sizeof(char *));
    // who sampled each: "sampler/1", or "sampler/2@tcp://host:port" for a remote one
    int ns = run->samplers.n > 0 ? run->samplers.n : 1;
    char(*who)[320] = calloc((size_t)ns, sizeof *who);
    for (int k = 0; who && k < run->samplers.n; k++) {
        const char *ep = rl_group_endpoint(run->g, run->samplers.names[k]);
        snprintf(who[k], sizeof who[k], "%s%s%.280s", run->samplers.names[k], ep ? "@" : "",
                 ep ? ep : "");
    }
    // the per-token arrays of the batch, cut to each completion
    const float *src[5] = {ex->old, ex->ref, ex->values, ex->adv, ex->rewards};
    float *dst[5] = {NULL, NULL, NULL, NULL, NULL};
    int rc = 0, oom = !recs || !mask || !rw || !names || !who;
    for (int a = 0; a < 5; a++) {
        if (src[a] && !(dst[a] = calloc(nt, sizeof(float)))) {
            oom = 1;
        }
    }
    if (oom) {
        rc = rl_errf(err, err_len, RL_ENOMEM, "out of memory");
        goto done;
    }
    for (int k = 0; k < r->n_rewards; k++) {
        names[k] = r->rewards[k].name;
    }
    int n_turns = 0;
    for (int j = 0; t->eps && j < n; j++) {
        n_turns += t->eps[j].n_turns;
    }
    epi = t->eps ? calloc((size_t)n, sizeof *epi) : NULL;
    starts = t->eps ? calloc((size_t)(n_turns ? n_turns : 1), sizeof *starts) : NULL;
    if (t->eps && (!epi || !starts)) {
        rc = rl_errf(err, err_len, RL_ENOMEM, "out of memory");
        goto done;
    }
    for (int j = 0; j < n; j++) {
        rl_traj_record_t *x = &recs[j];
        const int32_t *pids;
        int plen, lc = t->gen.lens[j];
        rl_rollout_prompt(d, t, j, &pids, &plen);
        int64_t o = t->gen.off[j];
        x->step = (uint64_t)step;
        x->prompt_index = (uint32_t)(j / G);
        x->sample_index = (uint32_t)(j % G);
        x->data_index = (int64_t)t->idx[j / G];
        x->policy_version = (uint64_t)(t->gen.ver ? t->gen.ver[j] : t->version);
        x->n_prompt = plen;
        x->prompt_ids = (int32_t *)pids;
        x->n_completion = lc;
        x->completion_ids = t->gen.ids + o;
        x->mask = mask + o;
        x->sampler_logprobs = t->gen.lp + o;
        int b = t->brow ? t->brow[j] : -1;
        if (b >= 0) {
            for (int i = 0; i < lc; i++) {
                size_t bt = (size_t)b * t->T + plen + i;
                mask[o + i] = t->mask[bt];
                for (int a = 0; a < 5; a++) {
                    if (dst[a]) {
                        dst[a][o + i] = src[a][bt];
                    }
                }
            }
            x->old_logprobs = dst[0] ? dst[0] + o : NULL;
            x->ref_logprobs = dst[1] ? dst[1] + o : NULL;
            x->values = dst[2] ? dst[2] + o : NULL;
            x->advantages = dst[3] ? dst[3] + o : NULL;
            x->token_rewards = dst[4] ? dst[4] + o : NULL;
        }
        x->n_rewards = r->n_rewards;
        x->reward_names = names;
        for (int k = 0; k < r->n_rewards; k++) {
            rw[(size_t)j * r->n_rewards + k] = t->raw[(size_t)k * n + j];
        }
        x->rewards = rw + (size_t)j * r->n_rewards;
        x->reward = t->total[j];
        x->advantage = ex->seq_adv ? ex->seq_adv[j] : 0.0;
        x->finish = t->gen.fin[j];
        int k = t->gen.who ? t->gen.who[j] : -1;
        x->sampler = k >= 0 && k < run->samplers.n ? who[k] : NULL;
        if (epi) {
            const rl_episode_t *ep = &t->eps[j];
            int32_t *ts = starts + used;
            for (int u = 0; u < ep->n_turns; u++) { // offsets into the completion
                ts[u] = ep->turn_start[u] - ep->prompt_len;
            }
            used += ep->n_turns;
            epi[j] = (rl_traj_episode_t){.n_turns = ep->n_turns,
                                         .turn_starts = ts,
                                         .turn_rewards = ep->turn_reward,
                                         .truncated = ep->truncated,
                                         .tool_calls = ep->tool_calls,
                                         .parse_errors = ep->parse_errors};
            json_t *conv = json_pack("{s:O}", "messages", ep->messages);
            if (conv && ep->tools) {
                json_object_set(conv, "tools", ep->tools);
            }
            epi[j].conversation =
                conv ? json_dumps(conv, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
            json_decref(conv);
            x->episode = &epi[j];
        }
    }
    rc = pending ? rl_traj_put_pending(run->traj, (uint64_t)step, recs, n, err, err_len)
                 : rl_traj_put_step(run->traj, (uint64_t)step, recs, n, err, err_len);
done:
    for (int j = 0; epi && j < n; j++) {
        free(epi[j].conversation);
    }
    free(epi);
    free(starts);
    free(recs);
    free(mask);
    free(rw);
    free(names);
    free(who);
    for (int a = 0; a < 5; a++) {
        free(dst[a]);
    }
    return rc;
}

// ---- metrics ------------------------------------------------------------------------------------

void rl_rollout_metrics(rl_run_t *run, const rl_rollout_data_t *d, const rl_rollout_t *t,
                        const float *old, double lr, double *reward_mean, double *gen_tokens) {
    const rl_recipe_t *r = run->r;
    rl_metrics_t *mt = run->metrics;
    int n = t->gen.n_res;
    double rsum = 0, rn = 0, len_sum = 0, clipped = 0;
    for (int j = 0; j < n; j++) {
        if (!isnan(t->total[j])) {
            rsum += t->total[j];
            rn++;
        }
        len_sum += t->gen.lens[j];
        clipped += t->gen.fin[j] == 1;
    }
    rl_metrics_add(mt, "reward", rn > 0 ? rsum / rn : NAN);
    for (int k = 0; k < r->n_rewards; k++) {
        double a = 0, c = 0;
        for (int j = 0; j < n; j++) {
            double v = t->raw[(size_t)k * n + j];
            if (!isnan(v)) {
                a += v;
                c++;
            }
        }
        // TRL's nanstd: over the scorable scores, with Bessel's correction (NaN below 2)
        double mean = c > 0 ? a / c : NAN, ss = 0;
        for (int j = 0; j < n; j++) {
            double v = t->raw[(size_t)k * n + j];
            if (!isnan(v)) {
                ss += (v - mean) * (v - mean);
            }
        }
        char name[300];
        snprintf(name, sizeof(name), "rewards/%s/mean", r->rewards[k].name);
        rl_metrics_add(mt, name, mean);
        snprintf(name, sizeof(name), "rewards/%s/std", r->rewards[k].name);
        rl_metrics_add(mt, name, c > 1 ? sqrt(ss / (c - 1)) : NAN);
    }
    int min_len = n > 0 ? t->gen.lens[0] : 0, max_len = min_len;
    for (int j = 1; j < n; j++) {
        min_len = t->gen.lens[j] < min_len ? t->gen.lens[j] : min_len;
        max_len = t->gen.lens[j] > max_len ? t->gen.lens[j] : max_len;
    }
    rl_metrics_add(mt, "completions/mean_length", len_sum / n);
    rl_metrics_add(mt, "completions/min_length", min_len);
    rl_metrics_add(mt, "completions/max_length", max_len);
    rl_metrics_add(mt, "completions/clipped_ratio", clipped / n);
    if (old) {
        double gap = 0, gn = 0;
        for (int b = 0; b < t->B; b++) {
            int j = t->row_of[b], plen;
            const int32_t *pids;
            rl_rollout_prompt(d, t, j, &pids, &plen);
            for (int i = 0; i < t->gen.lens[j]; i++) {
                if (t->eps && !t->eps[j].mask[plen + i]) {
                    continue; // the environment's tokens: not sampled
                }
                gap += fabs((double)old[(size_t)b * t->T + plen + i] -
                            (double)t->gen.lp[t->gen.off[j] + i]);
                gn++;
            }
        }
        rl_metrics_add(mt, "sampler/logprob_gap", gn > 0 ? gap / gn : 0);
    }
    rl_metrics_add(mt, "learning_rate", lr);
    rl_metrics_add(mt, "num_tokens", (double)run->num_tokens);
    // epochs of prompts trained on (TRL's epoch): the data order's position after this step's
    rl_metrics_add(mt, "epoch",
                   (double)run->trained.epoch +
                       (double)run->trained.index / (double)rl_prompts_count(d->train));
    rl_metrics_add(mt, "tokens/generated", len_sum);
    rl_metrics_add(mt, "tokens/trained", (double)t->ntok);
    rl_rollout_env_metrics(run, t);
    if (reward_mean) {
        *reward_mean = rn > 0 ? rsum / rn : NAN;
    }
    if (gen_tokens) {
        *gen_tokens = len_sum;
    }
}

// ---- evaluation ---------------------------------------------------------------------------------

// One evaluation pass scored by the recipe's rewards: n completions of each eval prompt at
// `temperature`, the reward worker's scores, and the pass rate (a completion passes when its
// total reaches train.eval_pass_threshold). prefix: "eval/" (sampled) or "" (greedy: only the
// rate). *acc: the share of completions that pass; *fmt: of those in the math answer format.
static int s_eval_rewards(const rl_rollout_data_t *s, rl_run_t *run, double temperature, int n,
                          uint64_t seed, int log, double *acc, double *fmt, rl_rollout_t *keep,
                          char *err, size_t err_len) {
    const rl_recipe_t *r = run->r;
    rl_rollout_t t;
    memset(&t, 0, sizeof t);
    t.P = s->n_eval;
    t.G = n;
    t.idx = malloc((size_t)s->n_eval * sizeof *t.idx);
    if (!t.idx) {
        return rl_errf(err, err_len, RL_ENOMEM, "out of memory");
    }
    for (int i = 0; i < s->n_eval; i++) {
        t.idx[i] = (size_t)i;
    }
    int rc = run->env ? rl_rollout_episodes(run, s->eval, &t, temperature, seed, run->step, 1, err,
                                            err_len)
                      : rl_run_generate(run, s->eval_prompts, s->n_eval, n, temperature, seed, 0,
                                        &t.gen, err, err_len);
    if (!rc) {
        rc = s_score(run, s->eval, &t, 0, "the evaluation's batch", err, err_len);
    }
    int m = t.gen.n_res, R = r->n_rewards;
    double formatted = 0;
    for (int j = 0; !rc && j < m; j++) {
        char *text = NULL;
        size_t len = 0;
        if (rl_run_completion_text(run, &t.gen, j, &text, &len) == 0) {
            rl_math_answer_t a;
            rl_math_extract(text, len, &a);
            formatted += a.formatted;
        }
        free(text);
    }
    rl_rollout_eval_t st;
    if (!rc) {
        rl_rollout_eval_stats(r, t.raw, t.total, t.P, n, &st);
        *acc = st.accuracy;
        *fmt = m > 0 ? formatted / m : NAN;
    }
    if (!rc && log) {
        rl_metrics_add(run->metrics, "eval/reward", st.reward);
        for (int k = 0; k < R; k++) {
            char name[300];
            snprintf(name, sizeof name, "eval/rewards/%s/mean", r->rewards[k].name);
            rl_metrics_add(run->metrics, name, st.means[k]);
        }
        if (n > 1) {
            char name[64];
            snprintf(name, sizeof name, "eval/pass@%d", n);
            rl_metrics_add(run->metrics, name, st.pass_at_k);
        }
    }
    if (!rc && keep) { // the caller stores them
        *keep = t;
    } else {
        rl_rollout_free(&t);
    }
    return rc;
}

// An evaluation's completions as trajectory records of its own table (rl_traj_use_eval), keyed
// by the step it followed: the sampled ones as samples 0..k-1, the greedy one as sample k.
static int s_eval_store(rl_run_t *run, const rl_rollout_data_t *s, const rl_rollout_t *sampled,
                        const rl_rollout_t *greedy, char *err, size_t err_len) {
    const rl_recipe_t *r = run->r;
    const rl_rollout_t *pass[2] = {sampled, greedy};
    int total = sampled->gen.n_res + greedy->gen.n_res, R = r->n_rewards, k = 0, rc = 0;
    rl_traj_record_t *recs = calloc((size_t)total + 1, sizeof *recs);
    double *rw = calloc((size_t)total * (size_t)(R ? R : 1) + 1, sizeof *rw);
    char **names = calloc((size_t)(R ? R : 1), sizeof *names);
    size_t most = 1;
    for (int q = 0; q < 2; q++) {
        for (int j = 0; j < pass[q]->gen.n_res; j++) {
            most = (size_t)pass[q]->gen.lens[j] > most ? (size_t)pass[q]->gen.lens[j] : most;
        }
    }
    uint8_t *zeros = calloc(most, 1); // the loss mask: nothing of an evaluation is trained on
    if (!recs || !rw || !names || !zeros) {
        rc = rl_errf(err, err_len, RL_ENOMEM, "out of memory");
        goto done;
    }
    for (int q = 0; q < R; q++) {
        names[q] = r->rewards[q].name;
    }
    for (int q = 0; q < 2; q++) {
        const rl_rollout_t *t = pass[q];
        int m = t->gen.n_res;
        for (int j = 0; j < m; j++, k++) {
            const rl_prompt_t *p = rl_prompts_get(s->eval, t->idx[j / t->G]);
            const int32_t *pids = p->ids;
            int plen = p->len;
            if (t->eps) { // an episode: its first prompt
                pids = t->eps[j].ids;
                plen = t->eps[j].prompt_len;
            }
            rl_traj_record_t *x = &recs[k];
            x->step = (uint64_t)run->step;
            x->prompt_index = (uint32_t)(j / t->G);
            x->sample_index = (uint32_t)(q ? sampled->G : j % t->G);
            x->data_index = (int64_t)t->idx[j / t->G];
            x->policy_version = (uint64_t)run->version;
            x->n_prompt = plen;
            x->prompt_ids = (int32_t *)pids;
            x->n_completion = t->gen.lens[j];
            x->completion_ids = t->gen.ids + t->gen.off[j];
            x->mask = zeros;
            x->sampler_logprobs = t->gen.lp + t->gen.off[j];
            x->n_rewards = R;
            x->reward_names = names;
            for (int w = 0; w < R; w++) {
                rw[(size_t)k * R + w] = t->raw[(size_t)w * m + j];
            }
            x->rewards = rw + (size_t)k * R;
            x->reward = t->total[j];
            x->finish = t->gen.fin[j];
            int who = t->gen.who ? t->gen.who[j] : -1;
            x->sampler = who >= 0 && who < run->samplers.n ? run->samplers.names[who] : NULL;
        }
    }
    rl_traj_use_eval(run->traj, 1);
    rc = rl_traj_put_step(run->traj, (uint64_t)run->step, recs, total, err, err_len);
    rl_traj_use_eval(run->traj, 0);
done:
    free(recs);
    free(rw);
    free(names);
    free(zeros);
    return rc;
}

int rl_rollout_evaluate(const rl_rollout_data_t *s, rl_run_t *run, double *acc, double *acc_greedy,
                        char *note, size_t note_len, char *err, size_t err_len) {
    *acc = *acc_greedy = NAN;
    if (!s->eval) {
        return 0;
    }
    double t0 = rl_clock_now(), fmt, fmtg;
    // the same draws at every evaluation (common random numbers: changes are the policy's)
    uint64_t seed = rl_rollout_mix((uint64_t)run->r->run.seed, 0xE7A1ull);
    int rc;
    if (run->reward.n > 0 || run->env) { // the recipe's own rewards score it (docs/training.md)
        rl_rollout_t ts, tg; // kept for the trajectory store
        memset(&ts, 0, sizeof ts);
        memset(&tg, 0, sizeof tg);
        rc = s_eval_rewards(s, run, run->r->sampling.temperature, run->r->train.eval_k, seed, 1,
                            acc, &fmt, &ts, err, err_len);
        if (!rc) {
            rc = s_eval_rewards(s, run, 0.0, 1, seed, 0, acc_greedy, &fmtg, &tg, err, err_len);
        }
        if (!rc && run->traj) {
            rc = s_eval_store(run, s, &ts, &tg, err, err_len);
        }
        rl_rollout_free(&ts);
        rl_rollout_free(&tg);
    } else { // no reward worker (DPO): the math rule against data.answer_field
        rc = rl_run_eval_accuracy(run, s->eval_prompts, s->eval_answers, s->n_eval,
                                  run->r->sampling.temperature, seed, 0, acc, &fmt, NULL, err,
                                  err_len);
        if (!rc) {
            rc = rl_run_eval_accuracy(run, s->eval_prompts, s->eval_answers, s->n_eval, 0.0, seed,
                                      0, acc_greedy, &fmtg, NULL, err, err_len);
        }
    }
    if (rc) {
        return rc;
    }
    rl_metrics_add(run->metrics, "eval/accuracy", *acc);
    rl_metrics_add(run->metrics, "eval/accuracy_greedy", *acc_greedy);
    rl_metrics_add(run->metrics, "eval/format_rate", fmt);
    rl_metrics_add(run->metrics, "timing/eval", rl_clock_now() - t0);
    snprintf(note, note_len, "eval %.1f%% greedy %.1f%%", 100 * *acc, 100 * *acc_greedy);
    return 0;
}

// ---- the recipe's keys of a rollout's shaping (GRPO, PPO) ----------------------------------

// clang-format off
const rl_recipe_key_t rl_rollout_shaping_keys[] = {
    {.section = "algorithm", .key = "mask_truncated_completions", .type = RL_RECIPE_T_BOOL,
     .offset = RL_RECIPE_AT(algorithm.mask_truncated_completions), RL_RECIPE_DEF("false"),
     .doc = "zero the loss of completions cut at max_new_tokens (DAPO)"},
    {.section = "algorithm", .key = "overlong_buffer", .type = RL_RECIPE_T_INT,
     .offset = RL_RECIPE_AT(algorithm.overlong_buffer), RL_RECIPE_DEF("0"), .max = 1048576,
     .doc = "DAPO overlong shaping over the last N tokens before max_new_tokens; 0 = off"},
    {.section = "algorithm", .key = "overlong_penalty", .type = RL_RECIPE_T_FLOAT,
     .offset = RL_RECIPE_AT(algorithm.overlong_penalty), RL_RECIPE_DEF("1.0"), .max = RL_RECIPE_BIG,
     .doc = "largest overlong penalty (reached at max_new_tokens)"},
    {0},
};
// clang-format on
