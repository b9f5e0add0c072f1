// tests for rl_progress: plain mode prints every N steps and the last; TTY mode redraws with
// '\r' and ends with one newline; ETA formatting.
#include "rl_progress.h"
#include "rl_test.h"

#include <stdlib.h>

static char *s_slurp(FILE *f) {
    static char buf[8192];
    rewind(f);
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = '\0';
    return buf;
}

int main(void) {
    FILE *f = tmpfile();
    rl_progress_t *p = rl_progress_new(f, 10, 4, RL_PROGRESS_PLAIN);
    int printed = 0;
    for (long s = 1; s <= 10; s++) {
        printed += rl_progress_update(p, s, "reward %.2f", 0.1 * (double)s);
    }
    rl_progress_destroy(&p);
    CHECK(p == NULL);
    CHECK_INT(printed, 3); // steps 4, 8 and the last (10)
    char *out = s_slurp(f);
    CHECK_CONTAINS(out, "step 4/10 [40%] reward 0.40 |");
    CHECK_CONTAINS(out, "step 10/10 [100%] reward 1.00 |");
    CHECK(strchr(out, '\r') == NULL);
    int lines = 0;
    for (char *c = out; *c; c++) {
        lines += *c == '\n';
    }
    CHECK_INT(lines, 3);
    fclose(f);

    f = tmpfile();
    p = rl_progress_new(f, 3, 100, RL_PROGRESS_TTY);
    for (long s = 1; s <= 3; s++) {
        CHECK_INT(rl_progress_update(p, s, "kl %d", (int)s), 1);
    }
    rl_progress_destroy(&p);
    out = s_slurp(f);
    CHECK_CONTAINS(out, "\rstep 1/3 [33%] kl 1 |");
    CHECK_CONTAINS(out, "\rstep 3/3 [100%] kl 3 |");
    CHECK(out[strlen(out) - 1] == '\n');
    CHECK(strchr(out, '\n') == out + strlen(out) - 1);
    fclose(f);

    char eta[32];
    CHECK_STR(rl_progress_format_eta(45.2, eta, sizeof eta), "45s");
    CHECK_STR(rl_progress_format_eta(374, eta, sizeof eta), "6m14s");
    CHECK_STR(rl_progress_format_eta(7380, eta, sizeof eta), "2h03m");
    rl_progress_destroy(&p); // no-op on NULL
    RL_TEST_DONE();
}
