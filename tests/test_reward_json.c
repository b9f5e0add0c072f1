// tests for rl_reward_json: the request lines of both forms, byte for byte (rows embedded as
// objects, text made valid UTF-8 and ASCII, labels of every type), and the reply decoder on
// good replies, on Python's NaN/Infinity words, and on every way a reply can be wrong, each
// with its message.
#include <math.h>

#include "rl_err.h"
#include "rl_reward_json.h"
#include "rl_test.h"

static char s_err[2048];

static rl_reward_item_t s_item(const char *prompt, const char *completion, const int32_t *ids,
                               size_t n_ids, const char *row) {
    rl_reward_item_t it = {0};
    it.prompt = prompt;
    it.prompt_len = strlen(prompt);
    it.completion = completion;
    it.completion_len = strlen(completion);
    it.completion_ids = ids;
    it.n_completion_ids = n_ids;
    it.row_json = row;
    it.row_json_len = row ? strlen(row) : 0;
    return it;
}

static void s_request(int line, const rl_reward_item_t *items, size_t n, int format,
                      const char *want) {
    char *got = NULL;
    size_t len = 0;
    int rc = rl_reward_json_request(items, n, format, "answer", &got, &len, s_err, sizeof s_err);
    CHECK_MSG(rc == 0 && got && strlen(got) == len && !strcmp(got, want),
              "line %d: rc %d (%s)\n got  %s\n want %s", line, rc, s_err, got ? got : "(null)",
              want);
    free(got);
}

static void test_requests(void) {
    const int32_t ids[3] = {5, 17, 2};
    rl_reward_item_t it[3] = {
        s_item("1+2=", "#### 3", ids, 3, "{\"prompt\": \"1+2=\", \"answer\": \"3\"}"),
        // a completion cut inside a character: its first byte alone, then a lone continuation
        s_item("caf\xc3\xa9", "x\xc3 \x80y\n", ids, 0, "{\"answer\": 7.5, \"tags\": [1, null]}"),
        s_item("", "", ids, 1, "{\"answer\": null, \"n\": 12345678901234}"),
    };
    s_request(__LINE__, it, 3, RL_REWARD_JSON_RLCTL,
              "{\"items\":[{\"prompt\":\"1+2=\",\"completion\":\"#### 3\",\"completion_ids\":"
              "[5,17,2],\"row\":{\"prompt\":\"1+2=\",\"answer\":\"3\"}},{\"prompt\":"
              "\"caf\\u00E9\",\"completion\":\"x\\uFFFD \\uFFFDy\\n\",\"completion_ids\":[],"
              "\"row\":{\"answer\":7.5,\"tags\":[1,null]}},{\"prompt\":\"\",\"completion\":\"\","
              "\"completion_ids\":[5],\"row\":{\"answer\":null,\"n\":12345678901234}}]}");
    s_request(__LINE__, it, 3, RL_REWARD_JSON_OPENRLHF,
              "{\"query\":[\"1+2=#### 3\",\"caf\\u00E9x\\uFFFD \\uFFFDy\\n\",\"\"],\"prompts\":"
              "[\"1+2=\",\"caf\\u00E9\",\"\"],\"labels\":[\"3\",\"7.5\",\"\"]}");
    s_request(__LINE__, it, 0, RL_REWARD_JSON_RLCTL, "{\"items\":[]}");
    // a label of another type is its JSON text; a missing field is ""
    rl_reward_item_t lab[3] = {
        s_item("p", "c", ids, 0, "{\"answer\": 42}"),
        s_item("p", "c", ids, 0, "{\"answer\": {\"x\": [true]}}"),
        s_item("p", "c", ids, 0, "{}"),
    };
    s_request(__LINE__, lab, 3, RL_REWARD_JSON_OPENRLHF,
              "{\"query\":[\"pc\",\"pc\",\"pc\"],\"prompts\":[\"p\",\"p\",\"p\"],\"labels\":"
              "[\"42\",\"{\\\"x\\\":[true]}\",\"\"]}");
    // a 4-byte character and a NUL inside the row survive
    rl_reward_item_t wide = s_item("\xf0\x9f\x98\x80", "ok", ids, 0, "{\"a\": \"x\\u0000y\"}");
    s_request(__LINE__, &wide, 1, RL_REWARD_JSON_RLCTL,
              "{\"items\":[{\"prompt\":\"\\uD83D\\uDE00\",\"completion\":\"ok\","
              "\"completion_ids\":[],\"row\":{\"a\":\"x\\u0000y\"}}]}");
    // a row that is not a JSON object is an error naming the item, in both forms
    rl_reward_item_t bad[2] = {it[0], s_item("p", "c", ids, 0, "[1, 2]")};
    for (int f = 0; f < 2; f++) {
        char *got = NULL;
        size_t len = 0;
        CHECK_INT(rl_reward_json_request(bad, 2, f, "answer", &got, &len, s_err, sizeof s_err),
                  RL_EINVAL);
        CHECK_CONTAINS(s_err, "item 1: the row is not a JSON object");
        CHECK(got == NULL);
    }
    bad[1] = s_item("p", "c", ids, 0, "{\"answer\": ");
    char *got = NULL;
    size_t len = 0;
    CHECK_INT(
        rl_reward_json_request(bad, 2, RL_REWARD_JSON_RLCTL, NULL, &got, &len, s_err, sizeof s_err),
        RL_EINVAL);
    CHECK_CONTAINS(s_err, "item 1: the row is not a JSON object: ");
}

// Decodes `text` for n items: must return rc, and (rc 0) the scores in want, or (rc != 0) a
// message containing `needle`.
static void s_reply(int line, const char *text, int format, size_t n, int rc, const double *want,
                    const char *needle) {
    double out[8];
    s_err[0] = '\0';
    int got = rl_reward_json_reply(text, strlen(text), format, n, out, s_err, sizeof s_err);
    CHECK_MSG(got == rc, "line %d: %s: rc %d, want %d (%s)", line, text, got, rc, s_err);
    for (size_t i = 0; got == 0 && rc == 0 && i < n; i++) {
        int same = isnan(want[i]) ? isnan(out[i]) : out[i] == want[i];
        CHECK_MSG(same, "line %d: score %zu: %g, want %g", line, i, out[i], want[i]);
    }
    if (needle) {
        CHECK_MSG(strstr(s_err, needle) != NULL, "line %d: \"%s\" lacks \"%s\"", line, s_err,
                  needle);
    }
}
#define REPLY(text, format, n, rc, needle, ...)                                                    \
    do {                                                                                           \
        const double rl_w_[] = {__VA_ARGS__};                                                      \
        s_reply(__LINE__, (text), (format), (n), (rc), rl_w_, (needle));                           \
    } while (0)

static void test_replies(void) {
    const int R = RL_REWARD_JSON_RLCTL, O = RL_REWARD_JSON_OPENRLHF;
    REPLY("{\"scores\": [1, 0.5, null, -2e3]}", R, 4, 0, NULL, 1, 0.5, NAN, -2000);
    REPLY("  {\"scores\":[1.0],\"extra\":{\"x\":[1,2]},\"later\":\"keys\"}\r", R, 1, 0, NULL, 1);
    REPLY("{\"scores\": []}", R, 0, 0, NULL, 0);
    // Python's words: NaN is null; the infinities are refused, naming the item
    REPLY("{\"scores\": [NaN, 1.0], \"note\": \"NaN and Infinity in text stay text\"}", R, 2, 0,
          NULL, NAN, 1);
    REPLY("{\"scores\": [1.0, Infinity]}", R, 2, RL_EPROTO, "score 1 of 2 is Infinity (write null",
          0);
    REPLY("{\"scores\": [-Infinity]}", R, 1, RL_EPROTO, "score 0 of 1 is -Infinity", 0);
    REPLY("{\"scores\": [1e308, 1e309]}", R, 2, RL_EPROTO, "not JSON", 0); // jansson: overflow
    // an error reply, whole or cut
    REPLY("{\"error\": \"backend unavailable (3 items)\", \"scores\": [1]}", R, 1, RL_EPLUGIN,
          "backend unavailable (3 items)", 0);
    REPLY("{\"error\": 5}", R, 1, RL_EPROTO, "\"error\" is a number, not a string", 0);
    REPLY("{\"error\": null, \"scores\": [2]}", R, 1, 0, NULL, 2);
    // not the reply asked for
    REPLY("this is not json", R, 1, RL_EPROTO, "not JSON (", 0);
    REPLY("this is not json", R, 1, RL_EPROTO, "'this is not json'", 0);
    REPLY("", R, 1, RL_EPROTO, "not JSON", 0);
    REPLY("[1, 2]", R, 2, RL_EPROTO, "not a JSON object: '[1, 2]'", 0);
    REPLY("{\"score\": [1]}", R, 1, RL_EPROTO, "no \"scores\" (nor \"error\")", 0);
    REPLY("{\"scores\": 1}", R, 1, RL_EPROTO, "\"scores\" is a number, not a list", 0);
    REPLY("{\"scores\": [1, 2]}", R, 3, RL_EPROTO, "2 scores for 3 items", 0);
    REPLY("{\"scores\": [1, \"2\"]}", R, 2, RL_EPROTO, "score 1 of 2 is a string, not a number", 0);
    REPLY("{\"scores\": [true]}", R, 1, RL_EPROTO, "score 0 of 1 is a boolean", 0);
    REPLY("{\"scores\": [1], \"scores\": [2]}", R, 1, RL_EPROTO, "duplicate", 0);
    REPLY("{\"scores\": [1]} trailing", R, 1, RL_EPROTO, "not JSON", 0);
    // OpenRLHF's form reads "rewards" (its "scores" and "extra_logs" are not ours)
    REPLY("{\"rewards\": [0.25, 1], \"scores\": [9, 9], \"extra_logs\": {}}", O, 2, 0, NULL, 0.25,
          1);
    REPLY("{\"scores\": [1, 2]}", O, 2, RL_EPROTO, "no \"rewards\": ", 0);
    // control bytes are quoted in messages
    REPLY("\x01\x02", R, 1, RL_EPROTO, "'\\x01\\x02'", 0);
}

int main(void) {
    RL_TEST_RUN(test_requests);
    RL_TEST_RUN(test_replies);
    RL_TEST_DONE();
}
