// env.toolcall: tool calls taken out of sampled text (env/rl_toolcall): Qwen's hermes blocks
// (one, several, with text around, broken JSON, a missing name, arguments that are no object,
// a block never closed, duplicate keys), Llama 3's JSON calls (one, several with ';', the python
// tag, a text that is no call, a piece that is not a call), the ids and the arguments' text.
#include "rl_test.h"

#include "rl_err.h"
#include "rl_toolcall.h"

#include <string.h>

static rl_tool_parse_t s_p;

static void s_parse(rl_tool_parser_t which, const char *text, int first_id) {
    rl_tool_parse_free(&s_p);
    CHECK_INT(rl_tool_parse(which, text, strlen(text), first_id, &s_p), 0);
}

static void s_call_is(int k, const char *id, const char *name, const char *args) {
    CHECK_MSG(k < s_p.n_calls, "call %d of %d", k, s_p.n_calls);
    if (k < s_p.n_calls) {
        CHECK_STR(s_p.calls[k].id, id);
        CHECK_STR(s_p.calls[k].name, name);
        CHECK_STR(s_p.calls[k].arguments, args);
    }
}

static void s_test_hermes(void) {
    const rl_tool_parser_t H = RL_TOOL_PARSER_HERMES;
    s_parse(H, "The answer is 4.", 0);
    CHECK_INT(s_p.n_calls, 0);
    CHECK_INT(s_p.parse_errors, 0);
    CHECK_STR(s_p.content, "The answer is 4.");
    // Qwen3's shape: the call on its own lines after some text
    s_parse(H, "Let me compute.\n<tool_call>\n{\"name\": \"calc\", \"arguments\": {\"expr\": "
               "\"12 * (3+4)\"}}\n</tool_call>",
            0);
    CHECK_INT(s_p.n_calls, 1);
    s_call_is(0, "call_0", "calc", "{\"expr\":\"12 * (3+4)\"}");
    CHECK_STR(s_p.content, "Let me compute.");
    CHECK_INT(s_p.parse_errors, 0);
    // two calls, numbered from first_id, text between them kept; keys keep their order
    s_parse(H, "<tool_call>{\"name\":\"a\",\"arguments\":{\"z\":1,\"y\":[true,null]}}</tool_call> and "
               "<tool_call>{\"arguments\":{},\"name\":\"b\"}</tool_call>",
            7);
    CHECK_INT(s_p.n_calls, 2);
    s_call_is(0, "call_7", "a", "{\"z\":1,\"y\":[true,null]}");
    s_call_is(1, "call_8", "b", "{}");
    CHECK_STR(s_p.content, "and");
    // no arguments: {}; UTF-8 stays UTF-8
    s_parse(H, "<tool_call>{\"name\":\"ping\"}</tool_call><tool_call>{\"name\":\"say\","
               "\"arguments\":{\"t\":\"h\\u00e9\"}}</tool_call>",
            0);
    CHECK_INT(s_p.n_calls, 2);
    s_call_is(0, "call_0", "ping", "{}");
    s_call_is(1, "call_1", "say", "{\"t\":\"h\xc3\xa9\"}");
    // what is not a call stays as written and counts: broken JSON, no name, an empty name,
    // arguments that are a string, duplicate keys; the good one among them is still a call
    s_parse(H, "<tool_call>{\"name\": \"calc\", </tool_call>"
               "<tool_call>{\"arguments\": {}}</tool_call>"
               "<tool_call>{\"name\": \"\"}</tool_call>"
               "<tool_call>{\"name\": \"calc\", \"arguments\": \"{\\\"expr\\\": \\\"1\\\"}\"}"
               "</tool_call>"
               "<tool_call>{\"name\": \"a\", \"name\": \"b\"}</tool_call>"
               "<tool_call>{\"name\": \"ok\", \"arguments\": {\"x\": 2}}</tool_call>",
            3);
    CHECK_INT(s_p.parse_errors, 5);
    CHECK_INT(s_p.n_calls, 1);
    s_call_is(0, "call_3", "ok", "{\"x\":2}");
    CHECK(strstr(s_p.content, "<tool_call>{\"name\": \"calc\", </tool_call>") == s_p.content);
    CHECK(strstr(s_p.content, "{\"name\": \"a\", \"name\": \"b\"}") != NULL);
    CHECK(strstr(s_p.content, "\"ok\"") == NULL);
    // a block never closed (the token limit cut it): content, one error
    s_parse(H, "Sure. <tool_call>\n{\"name\": \"calc\", \"argum", 0);
    CHECK_INT(s_p.n_calls, 0);
    CHECK_INT(s_p.parse_errors, 1);
    CHECK_STR(s_p.content, "Sure. <tool_call>\n{\"name\": \"calc\", \"argum");
    // a NUL byte is content, not the end of the text
    rl_tool_parse_free(&s_p);
    CHECK_INT(rl_tool_parse(H, "a\0b", 3, 0, &s_p), 0);
    CHECK_INT((int)s_p.content_len, 3);
    CHECK_INT(memcmp(s_p.content, "a\0b", 3), 0);
}

static void s_test_llama3(void) {
    const rl_tool_parser_t L = RL_TOOL_PARSER_LLAMA3_JSON;
    s_parse(L, "The answer is 4.", 0);
    CHECK_INT(s_p.n_calls, 0);
    CHECK_INT(s_p.parse_errors, 0);
    CHECK_STR(s_p.content, "The answer is 4.");
    s_parse(L, "{\"name\": \"calc\", \"parameters\": {\"expr\": \"2+2\"}}", 4);
    CHECK_INT(s_p.n_calls, 1);
    s_call_is(0, "call_4", "calc", "{\"expr\":\"2+2\"}");
    CHECK_STR(s_p.content, "");
    s_parse(L, " <|python_tag|>{\"name\": \"a\", \"arguments\": {}} ; {\"name\": \"b\", "
               "\"parameters\": {\"k\": 1}}\n",
            0);
    CHECK_INT(s_p.n_calls, 2);
    s_call_is(0, "call_0", "a", "{}");
    s_call_is(1, "call_1", "b", "{\"k\":1}");
    // one piece is not a call: no call at all, the text is the content, one error
    s_parse(L, "{\"name\": \"a\", \"parameters\": {}}; {\"nom\": \"b\"}", 0);
    CHECK_INT(s_p.n_calls, 0);
    CHECK_INT(s_p.parse_errors, 1);
    CHECK_STR(s_p.content, "{\"name\": \"a\", \"parameters\": {}}; {\"nom\": \"b\"}");
    s_parse(L, "{\"name\": \"a\", \"parameters\": {}} and then", 0);
    CHECK_INT(s_p.n_calls, 0);
    CHECK_INT(s_p.parse_errors, 1);
    s_parse(L, "{\"name\": \"a\", \"parameters\": {}};", 0); // a ';' with nothing after
    CHECK_INT(s_p.n_calls, 0);
    CHECK_INT(s_p.parse_errors, 1);
    s_parse(L, "{\"name\": \"a\"}", 0); // Llama's calls carry their parameters
    CHECK_INT(s_p.n_calls, 0);
    CHECK_INT(s_p.parse_errors, 1);
}

static void s_test_names(void) {
    rl_tool_parser_t p;
    CHECK_INT(rl_tool_parser_find("hermes", &p), 0);
    CHECK_INT(p, RL_TOOL_PARSER_HERMES);
    CHECK_INT(rl_tool_parser_find("llama3_json", &p), 0);
    CHECK_INT(p, RL_TOOL_PARSER_LLAMA3_JSON);
    CHECK_INT(rl_tool_parser_find("mistral", &p), RL_EINVAL);
    CHECK_STR(rl_tool_parser_names(), "hermes, llama3_json");
}

int main(void) {
    RL_TEST_RUN(s_test_hermes);
    RL_TEST_RUN(s_test_llama3);
    RL_TEST_RUN(s_test_names);
    rl_tool_parse_free(&s_p);
    RL_TEST_DONE();
}
