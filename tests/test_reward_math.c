// tests for rl_reward_math: GSM8K "#### N" extraction, the last-number fallback, normalisation
// and numeric comparison, including the traps (commas, signs, sentence dots, operators).
#include "rl_reward_math.h"
#include "rl_test.h"

static void s_expect(const char *text, int found, int formatted, const char *value) {
    rl_math_answer_t a;
    rl_math_extract(text, strlen(text), &a);
    CHECK_MSG(a.found == found && a.formatted == formatted && strcmp(a.value, value) == 0,
              "\"%s\": got found=%d formatted=%d value=\"%s\", want %d %d \"%s\"", text, a.found,
              a.formatted, a.value, found, formatted, value);
}

int main(void) {
    s_expect("91*3=273;273+125=398 #### 398", 1, 1, "398");
    s_expect("so the total is #### 1,234", 1, 1, "1234");
    s_expect("#### $18", 1, 1, "18");
    s_expect("#### -5", 1, 1, "-5");
    s_expect("#### 12 then #### 13", 1, 1, "13");
    s_expect("#### nothing but the answer is 7", 1, 0, "7"); // marker without a number
    s_expect("91*3=273;273+125=398", 1, 0, "398");
    s_expect("The answer is 42.", 1, 0, "42");
    s_expect("It costs 3.50 dollars", 1, 0, "3.5");
    s_expect("3-4", 1, 0, "4");       // '-' after a digit is an operator
    s_expect("x = -4", 1, 0, "-4");
    s_expect("1, 2, 3", 1, 0, "3");
    s_expect("1,234,567 apples", 1, 0, "1234567");
    s_expect("007", 1, 0, "7");
    s_expect("-0", 1, 0, "0");
    s_expect("2.0", 1, 0, "2");
    s_expect("no digits here", 0, 0, "");
    s_expect("", 0, 0, "");
    s_expect("#### ", 0, 0, "");
    // a 70-digit number does not fit: not found rather than truncated
    s_expect("1234567890123456789012345678901234567890123456789012345678901234567890", 0, 0, "");

    char out[64];
    CHECK_INT(rl_math_normalize("1,234", out), 0);
    CHECK_STR(out, "1234");
    CHECK_INT(rl_math_normalize(" $+7 ", out), 0);
    CHECK_STR(out, "7");
    CHECK_INT(rl_math_normalize("3.50", out), 0);
    CHECK_STR(out, "3.5");
    CHECK_INT(rl_math_normalize("12 apples", out), -1);
    CHECK_INT(rl_math_normalize("", out), -1);

    CHECK_INT(rl_math_correct("... #### 398", 12, "398"), 1);
    CHECK_INT(rl_math_correct("... #### 397", 12, "398"), 0);
    CHECK_INT(rl_math_correct("the answer: 1,234", 17, "1234"), 1);
    CHECK_INT(rl_math_correct("#### 2.50", 9, "2.5"), 1);
    CHECK_INT(rl_math_correct("#### 0.1", 8, "0.10000000000000001"), 1);
    CHECK_INT(rl_math_correct("#### 12345678901234567890", 25, "12345678901234567891"), 0);
    CHECK_INT(rl_math_correct("nothing", 7, "3"), 0);
    CHECK_INT(rl_math_correct("#### 3", 6, "three"), 0);
    // len is honoured: the text past len is not read
    CHECK_INT(rl_math_correct("#### 39", 6, "3"), 1);
    RL_TEST_DONE();
}
