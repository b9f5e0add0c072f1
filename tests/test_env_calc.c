// env.calc: the calc environment's tool (env/rl_calc) against Python: every expression of
// tests/fixtures/env/calc.jsonl (made by tests/reference/make_calc_goldens.py from Python's own
// parser and integers under the rules docs/envs.md pins) gives the same decimal value or the same
// bad call; then the limits at their edges and what no golden can say (bytes past the length,
// NUL, the output buffer).
#include "rl_test.h"

#include "rl_calc.h"
#include "rl_err.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char s_out[RL_CALC_MAX_DIGITS + 2];

static void s_test_goldens(void) {
    FILE *f = fopen(RL_FIXTURES "/env/calc.jsonl", "r");
    CHECK_MSG(f != NULL, "no %s", RL_FIXTURES "/env/calc.jsonl");
    if (!f) {
        return;
    }
    char *line = NULL;
    size_t cap = 0;
    int n = 0, bad = 0, wrong = 0;
    for (ssize_t len; (len = getline(&line, &cap, f)) > 0;) {
        json_t *o = json_loads(line, 0, NULL);
        json_t *e = json_object_get(o, "expr");
        if (!json_is_string(e)) { // the header
            json_decref(o);
            continue;
        }
        json_t *v = json_object_get(o, "value");
        int rc = rl_calc_eval(json_string_value(e), json_string_length(e), s_out, sizeof s_out);
        int ok = json_is_null(v) ? rc == RL_EINVAL && s_out[0] == '\0'
                                 : rc == 0 && strcmp(s_out, json_string_value(v)) == 0;
        if (!ok && wrong++ < 10) {
            fprintf(stderr, "calc '%.200s': rc %d '%.80s', Python: %.80s\n", json_string_value(e),
                    rc, s_out, json_is_null(v) ? "bad call" : json_string_value(v));
        }
        n++;
        bad += json_is_null(v);
        json_decref(o);
    }
    free(line);
    fclose(f);
    CHECK_MSG(wrong == 0, "%d of %d expressions differ from Python", wrong, n);
    CHECK_MSG(n > 1000 && bad > 100 && n - bad > 500, "%d cases, %d bad calls", n, bad);
}

static int s_eval(const char *e) {
    return rl_calc_eval(e, strlen(e), s_out, sizeof s_out);
}

static void s_test_edges(void) {
    // the length counts after the spaces around are removed
    char *big = malloc(RL_CALC_MAX_LEN + 64);
    memset(big, ' ', 20);
    memset(big + 20, '1', RL_CALC_MAX_LEN);
    memset(big + 20 + RL_CALC_MAX_LEN, ' ', 20);
    big[RL_CALC_MAX_LEN + 40] = '\0';
    CHECK_INT(s_eval(big), 0); // 1000 characters between the spaces: the longest there is
    CHECK_INT((int)strlen(s_out), RL_CALC_MAX_LEN);
    big[20] = '(';
    big[20 + RL_CALC_MAX_LEN] = ')'; // 1001 characters
    big[20 + RL_CALC_MAX_LEN + 1] = '\0';
    CHECK_INT(s_eval(big), RL_EINVAL);
    free(big);
    CHECK_INT(s_eval("10**4299"), 0);
    CHECK_INT((int)strlen(s_out), 4300);
    CHECK_INT(s_eval("-10**4299"), 0);
    CHECK_INT((int)strlen(s_out), 4301);
    CHECK_INT(s_eval("10**4300"), RL_EINVAL);
    CHECK_INT(s_eval("10**4300 - 10**4300"), RL_EINVAL); // an intermediate over the limit
    CHECK_INT(s_eval("(-1)**(10**4000+1)"), 0);
    CHECK_STR(s_out, "-1");
    CHECK_INT(s_eval("99999999999*99999999999"), 0);
    CHECK_STR(s_out, "9999999999800000000001");
    // only the len bytes are read; a NUL inside is not an expression's byte
    CHECK_INT(rl_calc_eval("1+2+3", 3, s_out, sizeof s_out), 0);
    CHECK_STR(s_out, "3");
    CHECK_INT(rl_calc_eval("1\0+2", 4, s_out, sizeof s_out), RL_EINVAL);
    // a buffer that cannot hold the largest value is refused whatever the expression
    char small[8] = "x";
    CHECK_INT(rl_calc_eval("1", 1, small, sizeof small), RL_EINVAL);
    CHECK_STR(small, "");
}

int main(void) {
    RL_TEST_RUN(s_test_goldens);
    RL_TEST_RUN(s_test_edges);
    RL_TEST_DONE();
}
