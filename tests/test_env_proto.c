// env.proto: the environment protocol (env/rl_env_proto) and the calc environment: the requests'
// JSON; the built-in calc answering reset, step and close as docs/envs.md pins it, decoded by
// the checked decoder; the same requests (every expression of the calc goldens as a tool call,
// broken calls, several calls in a turn) answered by cookbook/envs/calc_env.py give the same
// replies; and every refusal of a hostile reply, named.
#include "rl_test.h"

#include "rl_env_calc.h"
#include "rl_env_proto.h"
#include "rl_err.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char s_err[512];

static void s_test_requests(void) {
    json_t *row = json_pack("{s:s, s:s}", "prompt", "2+3=", "answer", "5");
    rl_env_reset_item_t r[2] = {{"e0", row, 7}, {"e1", row, 8}};
    char *t = rl_env_request_reset(r, 2);
    CHECK_STR(t, "{\"op\":\"reset\",\"items\":[{\"episode\":\"e0\",\"row\":{\"prompt\":\"2+3=\","
                 "\"answer\":\"5\"},\"seed\":7},{\"episode\":\"e1\",\"row\":{\"prompt\":\"2+3=\","
                 "\"answer\":\"5\"},\"seed\":8}]}");
    free(t);
    json_t *msg = json_pack("{s:s, s:s}", "role", "assistant", "content", "5");
    rl_env_step_item_t s[1] = {{"e0", msg}};
    t = rl_env_request_step(s, 1);
    CHECK_STR(t, "{\"op\":\"step\",\"items\":[{\"episode\":\"e0\",\"message\":{\"role\":"
                 "\"assistant\",\"content\":\"5\"}}]}");
    free(t);
    const char *eps[2] = {"e0", "e1"};
    t = rl_env_request_close(eps, 2);
    CHECK_STR(t, "{\"op\":\"close\",\"items\":[{\"episode\":\"e0\"},{\"episode\":\"e1\"}]}");
    free(t);
    json_decref(row);
    json_decref(msg);
}

static void s_test_calc(void) {
    const char *eps[2] = {"a", "b"};
    char *rep = NULL;
    const char *reset = "{\"op\":\"reset\",\"items\":[{\"episode\":\"a\",\"row\":{\"prompt\":\"7*6="
                        "\"},\"seed\":1}]}";
    CHECK_INT(rl_env_calc_answer(reset, strlen(reset), &rep), 0);
    rl_env_reset_reply_t rr;
    CHECK_INT(rl_env_reply_reset(rep, strlen(rep), 1, eps, &rr, s_err, sizeof s_err), 0);
    char *m = json_dumps(rr.messages, JSON_COMPACT);
    CHECK_STR(m, "[{\"role\":\"user\",\"content\":\"7*6=\"}]");
    free(m);
    json_t *tools = json_loads(rl_env_calc_tools(), 0, NULL);
    CHECK(rr.tools && json_equal(rr.tools, tools));
    json_decref(tools);
    rl_env_reset_reply_free(&rr, 1);
    free(rep);
    // step: two calls answered in order; a turn without calls ends the episode
    const char *step =
        "{\"op\":\"step\",\"items\":[{\"episode\":\"a\",\"message\":{\"role\":\"assistant\","
        "\"content\":\"\",\"tool_calls\":[{\"id\":\"call_0\",\"type\":\"function\",\"function\":"
        "{\"name\":\"calc\",\"arguments\":\"{\\\"expr\\\":\\\" -2**2 * "
        "3\\\"}\"}},{\"id\":\"call_1\","
        "\"type\":\"function\",\"function\":{\"name\":\"calc\",\"arguments\":\"{\\\"expr\\\":"
        "\\\"1/2\\\"}\"}}]}},{\"episode\":\"b\",\"message\":{\"role\":\"assistant\",\"content\":"
        "\"42\"}}]}";
    CHECK_INT(rl_env_calc_answer(step, strlen(step), &rep), 0);
    rl_env_step_reply_t sr[2];
    CHECK_INT(rl_env_reply_step(rep, strlen(rep), 2, eps, sr, s_err, sizeof s_err), 0);
    m = json_dumps(sr[0].messages, JSON_COMPACT);
    CHECK_STR(m, "[{\"role\":\"tool\",\"tool_call_id\":\"call_0\",\"content\":\"-12\"},{\"role\":"
                 "\"tool\",\"tool_call_id\":\"call_1\",\"content\":\"error: bad call\"}]");
    free(m);
    CHECK_INT(sr[0].done, 0);
    CHECK_INT(sr[1].done, 1);
    CHECK_INT((int)json_array_size(sr[1].messages), 0);
    CHECK(sr[0].reward == 0.0 && sr[1].reward == 0.0);
    rl_env_step_reply_free(sr, 2);
    free(rep);
    const char *close = "{\"op\":\"close\",\"items\":[]}", *jump = "{\"op\":\"jump\",\"items\":[]}";
    CHECK_INT(rl_env_calc_answer(close, strlen(close), &rep), 0);
    CHECK_INT(rl_env_reply_close(rep, strlen(rep), s_err, sizeof s_err), 0);
    free(rep);
    // what is not a request, and a row without a prompt: an error reply, which the decoder
    // reports as the environment's words
    CHECK_INT(rl_env_calc_answer(jump, strlen(jump), &rep), 0);
    CHECK_INT(rl_env_reply_close(rep, strlen(rep), s_err, sizeof s_err), RL_EINVAL);
    CHECK_CONTAINS(s_err, "the environment says: calc: not a request");
    free(rep);
    const char *noprompt = "{\"op\":\"reset\",\"items\":[{\"episode\":\"a\",\"row\":{\"q\":1}}]}";
    CHECK_INT(rl_env_calc_answer(noprompt, strlen(noprompt), &rep), 0);
    CHECK_INT(rl_env_reply_reset(rep, strlen(rep), 1, eps, &rr, s_err, sizeof s_err), RL_EINVAL);
    CHECK_CONTAINS(s_err, "calc: the row has no string 'prompt'");
    free(rep);
}

// One step request per golden expression (as the tool-call parser encodes arguments), plus
// broken calls, written to a file; the built-in's replies and the Python program's must agree.
static void s_test_python_twin(void) {
    char dir[] = "/tmp/rl_test_env_XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char reqp[256], outp[256], cmd[1024];
    snprintf(reqp, sizeof reqp, "%s/req.jsonl", dir);
    snprintf(outp, sizeof outp, "%s/out.jsonl", dir);
    FILE *g = fopen(RL_FIXTURES "/env/calc.jsonl", "r");
    FILE *f = fopen(reqp, "w");
    CHECK(g && f);
    if (!g || !f) {
        return;
    }
    fputs(
        "{\"op\":\"reset\",\"items\":[{\"episode\":\"r\",\"row\":{\"prompt\":\"12+30=\"},\"seed\":"
        "0}]}\n",
        f);
    char *line = NULL;
    size_t cap = 0;
    int n = 0;
    for (ssize_t len; (len = getline(&line, &cap, g)) > 0;) {
        json_t *o = json_loads(line, 0, NULL);
        json_t *e = json_object_get(o, "expr");
        if (json_is_string(e)) {
            json_t *args = json_pack("{s:O}", "expr", e);
            char *a = json_dumps(args, JSON_COMPACT);
            json_t *req = json_pack("{s:s, s:[{s:s, s:{s:s, s:s, s:[{s:s, s:s, s:{s:s, s:s}}]}}]}",
                                    "op", "step", "items", "episode", "x", "message", "role",
                                    "assistant", "content", "", "tool_calls", "id", "call_3",
                                    "type", "function", "function", "name", "calc", "arguments", a);
            char *t = json_dumps(req, JSON_COMPACT);
            fprintf(f, "%s\n", t);
            free(t);
            free(a);
            json_decref(args);
            json_decref(req);
            n++;
        }
        json_decref(o);
    }
    fclose(g);
    // calls that are not calc's, arguments that are not an object or have no expr
    fputs("{\"op\":\"step\",\"items\":[{\"episode\":\"y\",\"message\":{\"role\":\"assistant\","
          "\"content\":\"\",\"tool_calls\":[{\"id\":\"c\",\"type\":\"function\",\"function\":{"
          "\"name\":\"calk\",\"arguments\":\"{\\\"expr\\\":\\\"1\\\"}\"}},{\"id\":\"d\",\"type\":"
          "\"function\",\"function\":{\"name\":\"calc\",\"arguments\":\"[1]\"}},{\"id\":\"e\","
          "\"type\":\"function\",\"function\":{\"name\":\"calc\",\"arguments\":\"{\\\"x\\\":1}\"}},"
          "{\"id\":\"f\",\"type\":\"function\",\"function\":{\"name\":\"calc\",\"arguments\":"
          "\"{\\\"expr\\\":12}\"}},{\"id\":\"g\",\"type\":\"function\",\"function\":{\"name\":"
          "\"calc\",\"arguments\":\"not json\"}}]}}]}\n",
          f);
    fputs("{\"op\":\"close\",\"items\":[{\"episode\":\"x\"}]}\n", f);
    fclose(f);
    snprintf(cmd, sizeof cmd, "python3 %s/cookbook/envs/calc_env.py < %s > %s", RL_SOURCE_DIR, reqp,
             outp);
    CHECK_INT(system(cmd), 0);
    FILE *rq = fopen(reqp, "r"), *py = fopen(outp, "r");
    CHECK(rq && py);
    char *pl = NULL;
    size_t pcap = 0;
    int lines = 0, differ = 0;
    for (ssize_t len; rq && py && (len = getline(&line, &cap, rq)) > 0;) {
        char *mine = NULL;
        CHECK_INT(rl_env_calc_answer(line, (size_t)len - 1, &mine), 0);
        ssize_t plen = getline(&pl, &pcap, py);
        json_t *a = mine ? json_loads(mine, 0, NULL) : NULL;
        json_t *b = plen > 0 ? json_loads(pl, 0, NULL) : NULL;
        if (!a || !b || !json_equal(a, b)) {
            if (differ++ < 5) {
                fprintf(stderr, "request %.200s\n  built-in %.200s\n  python   %.200s\n", line,
                        mine ? mine : "(none)", plen > 0 ? pl : "(none)");
            }
        }
        json_decref(a);
        json_decref(b);
        free(mine);
        lines++;
    }
    CHECK_MSG(differ == 0, "%d of %d replies differ between the built-in and calc_env.py", differ,
              lines);
    CHECK_INT(lines, n + 3);
    free(line);
    free(pl);
    if (rq) {
        fclose(rq);
    }
    if (py) {
        fclose(py);
    }
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    CHECK_INT(system(cmd), 0);
}

// Hostile replies: each refused, naming what is wrong and the item's episode.
static void s_test_refusals(void) {
    const char *eps[2] = {"ep-a", "ep-b"};
    static const struct {
        const char *reply;
        int step;
        const char *want;
    } cases[] = {
        {"not json", 1, "the reply is not JSON"},
        {"[1]", 1, "the reply is not a JSON object"},
        {"{\"error\": \"my env broke\"}", 1, "the environment says: my env broke"},
        {"{\"items\": []}", 1, "the reply has 0 items for 2 episodes"},
        {"{\"items\": {}}", 0, "no 'items' array"},
        {"{\"items\": [{\"messages\": [], \"done\": true}, 3]}", 1,
         "item 1 (episode ep-b): not an object"},
        {"{\"items\": [{\"messages\": [], \"done\": 1}, {\"messages\": [], \"done\": true}]}", 1,
         "item 0 (episode ep-a): 'done' must be true or false"},
        {"{\"items\": [{\"messages\": [], \"done\": true, \"reward\": \"1\"}, {\"messages\": [], "
         "\"done\": true}]}",
         1, "item 0 (episode ep-a): 'reward' must be a finite number"},
        {"{\"items\": [{\"messages\": [{\"role\": \"assistant\", \"content\": \"x\"}], \"done\": "
         "true}, {\"messages\": [], \"done\": true}]}",
         1, "messages[0]: role 'assistant': an environment's messages are user|tool|system"},
        {"{\"items\": [{\"messages\": [], \"done\": true}, {\"messages\": [{\"role\": \"tool\", "
         "\"content\": \"5\"}], \"done\": false}]}",
         1, "item 1 (episode ep-b): messages[0]: a tool message needs a string tool_call_id"},
        {"{\"items\": [{\"messages\": [{\"role\": \"user\"}], \"done\": true}, {\"messages\": [], "
         "\"done\": true}]}",
         1, "a user message's content must be a string"},
        {"{\"items\": [{\"messages\": []}, {\"messages\": []}]}", 0,
         "item 0 (episode ep-a): 'messages' must not be empty"},
        {"{\"items\": [{\"messages\": [{\"role\": \"user\", \"content\": \"q\"}], \"tools\": [{"
         "\"type\": \"function\"}]}, {\"messages\": [{\"role\": \"user\", \"content\": \"q\"}]}]}",
         0, "tools[0]: a tool is"},
        {"{\"items\": [], \"items\": []}", 1, "the reply is not JSON"},
        // an item's own error (an environment failing one episode, or a worker's failure)
        {"{\"items\": [{\"messages\": [], \"done\": true}, {\"error\": \"worker 1 died\"}]}", 1,
         "item 1 (episode ep-b): the environment says: worker 1 died"},
        {"{\"items\": [{\"error\": 5}, {\"messages\": [{\"role\": \"user\", \"content\": "
         "\"q\"}]}]}",
         0, "item 0 (episode ep-a): the environment says: (an error that is not a string)"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        s_err[0] = '\0';
        int rc;
        if (cases[i].step) {
            rl_env_step_reply_t sr[2];
            rc = rl_env_reply_step(cases[i].reply, strlen(cases[i].reply), 2, eps, sr, s_err,
                                   sizeof s_err);
        } else {
            rl_env_reset_reply_t rr[2];
            rc = rl_env_reply_reset(cases[i].reply, strlen(cases[i].reply), 2, eps, rr, s_err,
                                    sizeof s_err);
        }
        CHECK_MSG(rc == RL_EINVAL, "case %zu: rc %d", i, rc);
        CHECK_MSG(strstr(s_err, cases[i].want) != NULL, "case %zu: '%s' does not say '%s'", i,
                  s_err, cases[i].want);
    }
    // tolerant (env.on_error: drop): the failed item is marked, the other decoded
    const char *rep = "{\"items\": [{\"error\": \"worker 1 died\"}, {\"messages\": [], "
                      "\"reward\": 0.5, \"done\": true}]}";
    rl_env_step_reply_t sr[2];
    int bad[2] = {0, 0};
    s_err[0] = '\0';
    CHECK_INT(rl_env_reply_step_items(rep, strlen(rep), 2, eps, sr, bad, s_err, sizeof s_err), 0);
    CHECK(bad[0] == 1 && bad[1] == 0 && sr[1].done == 1 && sr[1].reward == 0.5);
    CHECK_CONTAINS(s_err, "item 0 (episode ep-a): the environment says: worker 1 died");
    rl_env_step_reply_free(sr, 2);
}

int main(void) {
    RL_TEST_RUN(s_test_requests);
    RL_TEST_RUN(s_test_calc);
    RL_TEST_RUN(s_test_python_twin);
    RL_TEST_RUN(s_test_refusals);
    RL_TEST_DONE();
}
