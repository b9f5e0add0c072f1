// env.episode: multi-turn episodes (env/rl_episode) against the built-in calc environment, with
// the real Qwen3 template and tokenizer and a scripted policy, five episodes in one batch: a
// tool call answered and then a final answer (the sequence is exactly the conversation as the
// template writes it, the policy's tokens masked in, the environment's out), an answer without a
// call (one turn), a policy that never stops calling (max_turns), a call that does not parse
// (content; counted; the environment ends it), a turn cut by the token limit; then the episode
// token budget, and an environment whose replies are wrong (named).
#include "rl_test.h"

#include "rl_env_calc.h"
#include "rl_episode.h"
#include "rl_err.h"
#include "rl_turns.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#define QWEN3 RL_FIXTURES "/third_party/qwen3"
#define CALL(e)                                                                                    \
    "<tool_call>\n{\"name\": \"calc\", \"arguments\": {\"expr\":\"" e "\"}}\n</tool_call>"

static char s_err[1024];
static rl_tokenizer_t *s_tok;
static rl_chat_format_t s_fmt;
static int32_t s_eos;

// a scripted policy: episode k's turn t is script[k][t] (NULL: repeat the last); "!cut" prefix:
// the text without the end-of-turn token (cut by the limit)
typedef struct {
    const char *const *script[8];
    int calls; // generate calls
} s_policy_t;

static int s_generate(void *ctx, rl_episode_t *const *eps, int n, const int *max_new,
                      rl_episode_turn_t *out, char *err, size_t err_len) {
    s_policy_t *p = ctx;
    (void)err;
    (void)err_len;
    p->calls++;
    for (int i = 0; i < n; i++) {
        int k = atoi(eps[i]->id + 2);
        const char *const *sc = p->script[k];
        int t = eps[i]->n_turns, last = 0;
        while (sc[last + 1]) {
            last++;
        }
        const char *text = sc[t <= last ? t : last];
        int cut = !strncmp(text, "!cut", 4);
        size_t nid = 0;
        int32_t *ids = NULL;
        rl_tokenizer_encode(s_tok, text + (cut ? 4 : 0), strlen(text + (cut ? 4 : 0)), 0, &ids,
                            &nid);
        int m = (int)nid;
        if (!cut) {
            ids = realloc(ids, (nid + 1) * sizeof *ids);
            ids[m++] = s_eos;
        }
        if (m > max_new[i]) { // the limit cuts it
            m = max_new[i];
            cut = 1;
        }
        out[i].ids = ids;
        out[i].n = m;
        out[i].ended = !cut;
        out[i].logp = calloc((size_t)m, sizeof(float));
        for (int j = 0; j < m; j++) {
            out[i].logp[j] = -0.5f;
        }
    }
    return 0;
}

static int s_calc_env(void *ctx, const char *req, char **reply, char *err, size_t err_len) {
    (void)ctx;
    int rc = rl_env_calc_answer(req, strlen(req), reply);
    return rc ? rl_errf(err, err_len, rc, "calc: out of memory") : 0;
}

static int s_bad_env(void *ctx, const char *req, char **reply, char *err, size_t err_len) {
    (void)err;
    (void)err_len;
    int *n = ctx;
    if ((*n)++ == 0) {
        return rl_env_calc_answer(req, strlen(req), reply); // reset as calc
    }
    *reply = strdup("{\"items\": [{\"messages\": [], \"reward\": 0}]}"); // no done, one item
    return 0;
}

static rl_episode_opts_t s_opts(int max_turns, int max_tokens, int max_new) {
    rl_episode_opts_t o = {max_turns, max_tokens, max_new,      RL_TOOL_PARSER_HERMES,
                           s_fmt,     s_tok,      "<|im_end|>", 0};
    return o;
}

static int s_count(const rl_episode_t *ep, uint8_t m) {
    int c = 0;
    for (int i = ep->prompt_len; i < ep->n; i++) {
        c += ep->mask[i] == m;
    }
    return c;
}

static void s_test_batch(void) {
    static const char *const e0[] = {CALL("12*7"), "12*7 is 84.", NULL};
    static const char *const e1[] = {"It is 5.", NULL};
    static const char *const e2[] = {CALL("1+1"), NULL};
    static const char *const e3[] = {
        "<tool_call>\n{\"name\": \"calc\", \"arguments\": {\"expr\"\n</tool_call>", NULL};
    static const char *const e4[] = {"!cut 12*7 is", NULL};
    s_policy_t pol = {{e0, e1, e2, e3, e4}, 0};
    json_t *rows[5];
    for (int k = 0; k < 5; k++) {
        rows[k] = json_pack("{s:s}", "prompt", k == 1 ? "2+3=?" : "What is 12*7?");
    }
    rl_episode_t eps[5];
    rl_episodes_init(eps, 5, "ep", rows, NULL);
    rl_episode_opts_t o = s_opts(3, 4096, 64);
    CHECK_MSG(
        rl_episodes_run(eps, 5, &o, s_generate, &pol, s_calc_env, NULL, s_err, sizeof s_err) == 0,
        "%s", s_err);
    // 0: a call, its answer, a final answer
    rl_episode_t *a = &eps[0];
    CHECK_INT(a->n_turns, 2);
    CHECK(a->done && !a->truncated);
    CHECK_INT(a->tool_calls, 1);
    CHECK(a->turn_reward[0] == 0.0 && a->turn_reward[1] == 0.0); // calc rewards nothing itself
    CHECK_INT((int)json_array_size(a->messages), 4); // user, assistant, tool, assistant
    CHECK_STR(json_string_value(json_object_get(json_array_get(a->messages, 2), "content")), "84");
    // the tokens up to the last turn are the conversation before it, as the template writes it
    json_t *before = json_array();
    for (int i = 0; i < 3; i++) {
        json_array_append(before, json_array_get(a->messages, i));
    }
    char *bj = json_dumps(before, JSON_COMPACT), *tj = json_dumps(a->tools, JSON_COMPACT);
    int32_t *want = NULL;
    size_t nw = 0;
    CHECK_INT(rl_turns_prompt(s_fmt, s_tok, bj, tj, &want, &nw, s_err, sizeof s_err), 0);
    CHECK_INT((int)nw, a->turn_start[1]);
    CHECK(nw == (size_t)a->turn_start[1] && !memcmp(want, a->ids, nw * sizeof *want));
    free(want);
    free(bj);
    free(tj);
    json_decref(before);
    // masks: the policy's two turns in, the prompt and the tool's answer out
    size_t n1 = 0;
    int32_t *t1 = NULL;
    rl_tokenizer_encode(s_tok, e0[0], strlen(e0[0]), 0, &t1, &n1);
    free(t1);
    int end1 = a->turn_start[0] + (int)n1 + 1, bad = 0;
    for (int i = 0; i < a->n; i++) {
        int policy = (i >= a->turn_start[0] && i < end1) || i >= a->turn_start[1];
        bad += a->mask[i] != policy;
    }
    CHECK_MSG(bad == 0 && end1 < a->turn_start[1], "%d tokens masked wrong", bad);
    CHECK_INT(a->mask[a->turn_start[0]], 1);
    CHECK_INT(a->mask[a->turn_start[1] - 1], 0); // the generation prompt after the tool's answer
    CHECK_INT(a->mask[a->n - 1], 1);             // the final <|im_end|>
    CHECK(a->logp[a->n - 1] == -0.5f && a->logp[0] == 0.0f);
    // 1: no call: one turn, done
    CHECK(eps[1].n_turns == 1 && eps[1].done && eps[1].tool_calls == 0);
    CHECK_INT(s_count(&eps[1], 0), 0);
    // 2: always a call: max_turns ends it; the tool's answers only between turns
    CHECK(eps[2].n_turns == 3 && eps[2].truncated && !eps[2].done);
    CHECK_INT(eps[2].tool_calls, 3);
    CHECK_INT((int)json_array_size(eps[2].messages), 1 + 3 + 2);
    // 3: a call that does not parse: content, counted, and calc ends the episode
    CHECK(eps[3].n_turns == 1 && eps[3].done && eps[3].parse_errors == 1 && eps[3].tool_calls == 0);
    // 4: a turn cut by the limit: no step, truncated
    CHECK(eps[4].n_turns == 1 && eps[4].truncated);
    CHECK_INT(pol.calls, 3);
    rl_episodes_free(eps, 5);
    for (int k = 0; k < 5; k++) {
        json_decref(rows[k]);
    }
}

static void s_test_limits_and_failures(void) {
    static const char *const e0[] = {CALL("1+1"), NULL};
    s_policy_t pol = {{e0}, 0};
    json_t *row = json_pack("{s:s}", "prompt", "q");
    rl_episode_t ep;
    // a budget of 40 tokens after the prompt: the first turn fits, the tool's answer and a
    // second turn do not
    rl_episodes_init(&ep, 1, "ep", &row, NULL);
    rl_episode_opts_t o = s_opts(8, 40, 64);
    CHECK_INT(rl_episodes_run(&ep, 1, &o, s_generate, &pol, s_calc_env, NULL, s_err, sizeof s_err),
              0);
    CHECK(ep.truncated && ep.n - ep.prompt_len <= 40);
    rl_episodes_free(&ep, 1);
    // an environment whose step reply lacks done: the error names it and the episode
    rl_episodes_init(&ep, 1, "ep", &row, NULL);
    int calls = 0;
    CHECK_INT(rl_episodes_run(&ep, 1, &o, s_generate, &pol, s_bad_env, &calls, s_err, sizeof s_err),
              RL_EINVAL);
    CHECK_CONTAINS(s_err,
                   "the environment's step: item 0 (episode ep0): 'done' must be true or false");
    CHECK_INT(calls, 3); // reset, step, and close still sent
    rl_episodes_free(&ep, 1);
    json_decref(row);
}

int main(void) {
    s_tok = rl_tokenizer_new_dir(QWEN3, s_err, sizeof s_err);
    CHECK_MSG(s_tok != NULL, "%s (run tests/reference/fetch_tokenizers.sh)", s_err);
    json_t *cfg = json_load_file(QWEN3 "/tokenizer_config.json", 0, NULL);
    const char *tmpl = json_string_value(json_object_get(cfg, "chat_template"));
    int ok =
        s_tok && tmpl &&
        rl_chat_template(tmpl, "qwen3", NULL, "<|im_end|>", NULL, &s_fmt, s_err, sizeof s_err) == 0;
    CHECK_MSG(ok, "%s", s_err);
    json_decref(cfg);
    if (ok) {
        s_eos = rl_tokenizer_token_to_id(s_tok, "<|im_end|>");
        RL_TEST_RUN(s_test_batch);
        RL_TEST_RUN(s_test_limits_and_failures);
    }
    rl_tokenizer_destroy(&s_tok);
    RL_TEST_DONE();
}
