// rl_log — leveled logging; one write() per line so lines from worker processes do not tear.
#include "rl_log.h"

#include "rl_err.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int s_level = -1; // -1: not yet read from the environment

static const char *s_names[] = {"error", "warn", "info", "debug"};

int rl_log_parse_level(const char *s, rl_log_level_t *out) {
    for (int i = 0; i < 4; i++) {
        if (s && strcmp(s, s_names[i]) == 0) {
            *out = (rl_log_level_t)i;
            return 0;
        }
    }
    return RL_EINVAL;
}

void rl_log_set_level(rl_log_level_t level) { s_level = (int)level; }

rl_log_level_t rl_log_get_level(void) {
    if (s_level < 0) {
        rl_log_level_t lv = RL_LOG_INFO;
        const char *env = getenv("RLCTL_LOG");
        if (env && *env && rl_log_parse_level(env, &lv) != 0) {
            fprintf(stderr, "rlctl: warn: RLCTL_LOG=%s is not one of error|warn|info|debug\n", env);
        }
        s_level = (int)lv;
    }
    return (rl_log_level_t)s_level;
}

void rl_log(rl_log_level_t level, const char *fmt, ...) {
    if ((int)level > (int)rl_log_get_level()) {
        return;
    }
    char buf[4096];
    int n = snprintf(buf, sizeof buf, "rlctl: %s: ", s_names[level]);
    va_list ap;
    va_start(ap, fmt);
    int m = vsnprintf(buf + n, sizeof buf - (size_t)n - 1, fmt, ap);
    va_end(ap);
    size_t len = (size_t)n + (m < 0 ? 0 : (size_t)m);
    if (len > sizeof buf - 2) {
        len = sizeof buf - 2;
    }
    buf[len++] = '\n';
    ssize_t w = write(STDERR_FILENO, buf, len);
    (void)w;
}
