// test_split — how a step's prompts are spread over the samplers (rl_run_split, roles.balance):
// even shares as m*j/n; by speed, in proportion to each sampler's measured tokens per second,
// an unmeasured one counted at the mean of the measured; every prompt in exactly one share.
#include "rl_run.h"
#include "rl_test.h"

#include <string.h>

static void s_check_partition(const int *b, int na, int m) {
    CHECK_INT(b[0], 0);
    CHECK_INT(b[na], m);
    for (int j = 0; j < na; j++) {
        CHECK_MSG(b[j] <= b[j + 1], "share %d: [%d, %d)", j, b[j], b[j + 1]);
    }
}

int main(void) {
    static rl_recipe_t r;
    static rl_run_t run;
    memset(&r, 0, sizeof r);
    memset(&run, 0, sizeof run);
    run.r = &r;
    int ks[4] = {0, 1, 2, 3}, b[5];
    // even: the split rl_run_generate always made
    r.roles.balance = RL_RECIPE_BALANCE_EVEN;
    run.sampler_speed[0] = 3000;
    run.sampler_speed[1] = 1000;
    rl_run_split(&run, 16, 2, ks, b);
    CHECK(b[1] == 8);
    rl_run_split(&run, 7, 3, ks, b);
    s_check_partition(b, 3, 7);
    CHECK(b[1] == 2 && b[2] == 4);
    // speed: 3:1 of 16 prompts is 12 and 4
    r.roles.balance = RL_RECIPE_BALANCE_SPEED;
    rl_run_split(&run, 16, 2, ks, b);
    s_check_partition(b, 2, 16);
    CHECK_MSG(b[1] == 12, "3:1 of 16: first share %d, expected 12", b[1]);
    // an unmeasured sampler counts at the mean of the measured (2000): 3000:1000:2000 of 12
    run.sampler_speed[2] = 0;
    rl_run_split(&run, 12, 3, ks, b);
    s_check_partition(b, 3, 12);
    CHECK_MSG(b[1] == 6 && b[2] == 8, "3:1:2 of 12: [%d %d %d %d]", b[0], b[1], b[2], b[3]);
    // none measured: even
    memset(run.sampler_speed, 0, sizeof run.sampler_speed);
    rl_run_split(&run, 10, 4, ks, b);
    s_check_partition(b, 4, 10);
    CHECK(b[1] == 2 && b[2] == 5 && b[3] == 7);
    // fewer prompts than samplers: some shares empty, none negative
    run.sampler_speed[0] = 1;
    run.sampler_speed[1] = 100;
    rl_run_split(&run, 3, 2, ks, b);
    s_check_partition(b, 2, 3);
    RL_TEST_DONE();
}
