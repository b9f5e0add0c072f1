// tests for rl_log: level parsing, RLCTL_LOG, and that disabled levels print nothing.
#include "rl_log.h"
#include "rl_err.h"
#include "rl_test.h"

#include <stdlib.h>
#include <unistd.h>

// Captures what rl_log writes to stderr while `fn` runs.
static void s_capture(char *out, size_t len, void (*fn)(void)) {
    fflush(stderr);
    int saved = dup(STDERR_FILENO);
    FILE *tmp = tmpfile();
    dup2(fileno(tmp), STDERR_FILENO);
    fn();
    fflush(stderr);
    dup2(saved, STDERR_FILENO);
    close(saved);
    rewind(tmp);
    size_t n = fread(out, 1, len - 1, tmp);
    out[n] = '\0';
    fclose(tmp);
}

static void s_emit(void) {
    rl_log_debug("dbg %d", 1);
    rl_log_info("inf %d", 2);
    rl_log_warn("wrn %d", 3);
    rl_log_error("err %d", 4);
}

int main(void) {
    rl_log_level_t lv;
    CHECK_INT(rl_log_parse_level("debug", &lv), 0);
    CHECK_INT(lv, RL_LOG_DEBUG);
    CHECK_INT(rl_log_parse_level("loud", &lv), RL_EINVAL);

    setenv("RLCTL_LOG", "warn", 1);
    CHECK_INT(rl_log_get_level(), RL_LOG_WARN);
    char buf[1024];
    s_capture(buf, sizeof buf, s_emit);
    CHECK_STR(buf, "rlctl: warn: wrn 3\nrlctl: error: err 4\n");

    rl_log_set_level(RL_LOG_DEBUG);
    s_capture(buf, sizeof buf, s_emit);
    CHECK_CONTAINS(buf, "rlctl: debug: dbg 1\nrlctl: info: inf 2\n");
    RL_TEST_DONE();
}
