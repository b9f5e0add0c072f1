// env.turns: token-in-token-out turns (env/rl_turns) with the real Qwen3 template and tokenizer
// (tests/fixtures/third_party/qwen3, fetched by tests/reference/fetch_tokenizers.sh) and the
// built-in chatml: the text after a tool-calling turn is the template's own for the tool's
// answer; where the template is prefix-stable (a tool call after the last user query) the first
// prompt + the sampled tokens + the turn's tokens are exactly the tokens of the whole
// conversation rendered at once; a turn cut by the token limit gets the end-of-turn token from
// the template; where the template is not prefix-stable (Qwen3 drops an earlier <think> block
// once a new user message comes) the sampled tokens stay as they were; refusals.
#include "rl_test.h"

#include "rl_err.h"
#include "rl_turns.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#define QWEN3 RL_FIXTURES "/third_party/qwen3"
#define CALC_TOOLS                                                                                 \
    "[{\"type\":\"function\",\"function\":{\"name\":\"calc\",\"description\":\"Evaluate an "       \
    "integer arithmetic expression.\",\"parameters\":{\"type\":\"object\",\"properties\":{"        \
    "\"expr\":{\"type\":\"string\",\"description\":\"digits, + - * and parentheses\"}},"           \
    "\"required\":[\"expr\"]}}}]"

static char s_err[512];
static rl_tokenizer_t *s_tok;
static rl_chat_format_t s_qwen3;

static int s_setup(void) {
    s_tok = rl_tokenizer_new_dir(QWEN3, s_err, sizeof s_err);
    CHECK_MSG(s_tok != NULL, "%s (run tests/reference/fetch_tokenizers.sh)", s_err);
    json_t *cfg = json_load_file(QWEN3 "/tokenizer_config.json", 0, NULL);
    const char *tmpl = json_string_value(json_object_get(cfg, "chat_template"));
    CHECK(tmpl != NULL);
    int rc = tmpl ? rl_chat_template(tmpl, "qwen3", NULL, "<|im_end|>", NULL, &s_qwen3, s_err,
                                     sizeof s_err)
                  : -1;
    CHECK_MSG(rc == 0, "%s", s_err);
    json_decref(cfg);
    return s_tok && rc == 0;
}

// ids of text
static int32_t *s_enc(const char *text, size_t *n) {
    int32_t *ids = NULL;
    CHECK_INT(rl_tokenizer_encode(s_tok, text, strlen(text), 0, &ids, n), 0);
    return ids;
}

static void s_test_tool_turn(void) {
    const char *q = "[{\"role\":\"user\",\"content\":\"What is 12*7?\"}]";
    int32_t *p = NULL, *d = NULL;
    size_t np = 0, nd = 0;
    CHECK_INT(rl_turns_prompt(s_qwen3, s_tok, q, CALC_TOOLS, &p, &np, s_err, sizeof s_err), 0);
    // what the policy sampled (its tokens, as the sampler gave them) and the message parsed out
    const char *sampled = "<tool_call>\n{\"name\": \"calc\", \"arguments\": {\"expr\":\"12*7\"}}\n"
                          "</tool_call><|im_end|>";
    const char *hist =
        "[{\"role\":\"user\",\"content\":\"What is 12*7?\"},{\"role\":\"assistant\",\"content\":"
        "\"\",\"tool_calls\":[{\"id\":\"call_0\",\"type\":\"function\",\"function\":{\"name\":"
        "\"calc\",\"arguments\":\"{\\\"expr\\\":\\\"12*7\\\"}\"}}]}]";
    const char *env = "[{\"role\":\"tool\",\"tool_call_id\":\"call_0\",\"content\":\"84\"}]";
    char *text = NULL;
    CHECK_INT(rl_turns_after(s_qwen3, s_tok, hist, env, CALC_TOOLS, "<|im_end|>", 1, &d, &nd, &text,
                             s_err, sizeof s_err),
              0);
    CHECK_STR(text, "\n<|im_start|>user\n<tool_response>\n84\n</tool_response><|im_end|>\n"
                    "<|im_start|>assistant\n");
    // prefix-stable here: prompt + sampled + turn = the whole conversation rendered at once
    size_t ns = 0, nf = 0;
    int32_t *s = s_enc(sampled, &ns);
    json_t *all = json_loads(hist, 0, NULL);
    json_t *env_msgs = json_loads(env, 0, NULL);
    json_array_extend(all, env_msgs);
    json_decref(env_msgs);
    char *all_json = json_dumps(all, JSON_COMPACT);
    int32_t *f = NULL;
    CHECK_INT(rl_turns_prompt(s_qwen3, s_tok, all_json, CALC_TOOLS, &f, &nf, s_err, sizeof s_err),
              0);
    CHECK_INT((int)(np + ns + nd), (int)nf);
    int same = np + ns + nd == nf;
    for (size_t i = 0; same && i < nf; i++) {
        int32_t want = i < np ? p[i] : i < np + ns ? s[i - np] : d[i - np - ns];
        same = f[i] == want;
    }
    CHECK_MSG(same, "prompt + sampled + turn differs from the whole conversation's tokens");
    // a turn the token limit cut: the template's end-of-turn token comes first
    free(text);
    free(d);
    CHECK_INT(rl_turns_after(s_qwen3, s_tok, hist, env, CALC_TOOLS, "<|im_end|>", 0, &d, &nd, &text,
                             s_err, sizeof s_err),
              0);
    CHECK(text && strncmp(text, "<|im_end|>\n<|im_start|>user\n<tool_response>", 43) == 0);
    free(text);
    free(d);
    free(s);
    free(f);
    free(p);
    free(all_json);
    json_decref(all);
}

// Qwen3 drops an earlier turn's <think> block once a new user message comes: rendering the
// whole conversation again would change tokens the sampler saw. The turn's tokens are only the
// new message's, so the sequence keeps what was sampled.
static void s_test_not_prefix_stable(void) {
    const char *hist = "[{\"role\":\"user\",\"content\":\"Q\"},{\"role\":\"assistant\",\"content\":"
                       "\"<think>\\nr\\n</think>\\n\\nA1\"}]";
    const char *env = "[{\"role\":\"user\",\"content\":\"try again\"}]";
    int32_t *d = NULL;
    size_t nd = 0;
    char *text = NULL;
    CHECK_INT(rl_turns_after(s_qwen3, s_tok, hist, env, NULL, "<|im_end|>", 1, &d, &nd, &text,
                             s_err, sizeof s_err),
              0);
    CHECK_STR(text, "\n<|im_start|>user\ntry again<|im_end|>\n<|im_start|>assistant\n");
    free(text);
    free(d);
    json_t *all = json_loads(hist, 0, NULL);
    json_t *env_msgs = json_loads(env, 0, NULL);
    json_array_extend(all, env_msgs);
    json_decref(env_msgs);
    json_t *row = json_pack("{s:o}", "messages", all);
    char *j = json_dumps(row, JSON_COMPACT);
    char *full = NULL;
    size_t nfull = 0;
    CHECK_INT(rl_chat_render_json(s_qwen3, j, strlen(j), 1, &full, &nfull, s_err, sizeof s_err), 0);
    CHECK(full && strstr(full, "<|im_start|>assistant\nA1<|im_end|>") != NULL); // think dropped
    CHECK(full && strstr(full, "<think>\nr") == NULL);
    free(full);
    free(j);
    json_decref(row);
}

static void s_test_chatml_and_refusals(void) {
    rl_chat_format_t chatml = rl_chat_builtin("chatml");
    const char *hist = "[{\"role\":\"user\",\"content\":\"Q\"},{\"role\":\"assistant\",\"content\":"
                       "\"A\"}]";
    const char *env = "[{\"role\":\"user\",\"content\":\"more\"}]";
    int32_t *d = NULL;
    size_t nd = 0;
    char *text = NULL;
    CHECK_INT(rl_turns_after(chatml, s_tok, hist, env, NULL, "<|im_end|>", 1, &d, &nd, &text, s_err,
                             sizeof s_err),
              0);
    CHECK_STR(text, "\n<|im_start|>user\nmore<|im_end|>\n<|im_start|>assistant\n");
    free(text);
    free(d);
    // the conversation must end with the assistant's turn
    CHECK_INT(rl_turns_after(chatml, s_tok, env, env, NULL, "<|im_end|>", 1, &d, &nd, NULL, s_err,
                             sizeof s_err),
              RL_EINVAL);
    CHECK_CONTAINS(s_err, "ending with the assistant's message");
    // an end-of-turn token the template never writes
    CHECK_INT(rl_turns_after(chatml, s_tok, hist, env, NULL, "<|eot_id|>", 1, &d, &nd, NULL, s_err,
                             sizeof s_err),
              RL_EINVAL);
    CHECK_CONTAINS(s_err, "ends no assistant turn with the end-of-turn token <|eot_id|>");
    CHECK_INT(rl_turns_prompt(chatml, s_tok, "{}", NULL, &d, &nd, s_err, sizeof s_err), RL_EINVAL);
}

int main(void) {
    if (s_setup()) {
        RL_TEST_RUN(s_test_tool_turn);
        RL_TEST_RUN(s_test_not_prefix_stable);
        RL_TEST_RUN(s_test_chatml_and_refusals);
    }
    rl_tokenizer_destroy(&s_tok);
    RL_TEST_DONE();
}
