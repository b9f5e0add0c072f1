// rl_log — leveled logging to stderr. The level comes from RLCTL_LOG (error|warn|info|debug,
// default info) on first use or from rl_log_set_level(). Not a metrics sink: metrics go to
// metrics.jsonl.
#ifndef RL_LOG_H
#define RL_LOG_H

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    RL_LOG_ERROR = 0,
    RL_LOG_WARN = 1,
    RL_LOG_INFO = 2,
    RL_LOG_DEBUG = 3
} rl_log_level_t;

// Sets the level; overrides RLCTL_LOG.
void rl_log_set_level(rl_log_level_t level);
// Returns the current level (reads RLCTL_LOG once if no level was set).
rl_log_level_t rl_log_get_level(void);
// Parses "error", "warn", "info", "debug"; returns 0 and sets *out, or RL_EINVAL.
int rl_log_parse_level(const char *s, rl_log_level_t *out);
// Writes "rlctl: <level>: message\n" to stderr when `level` is enabled.
void rl_log(rl_log_level_t level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define rl_log_error(...) rl_log(RL_LOG_ERROR, __VA_ARGS__)
#define rl_log_warn(...) rl_log(RL_LOG_WARN, __VA_ARGS__)
#define rl_log_info(...) rl_log(RL_LOG_INFO, __VA_ARGS__)
#define rl_log_debug(...) rl_log(RL_LOG_DEBUG, __VA_ARGS__)

#ifdef __cplusplus
}
#endif
#endif
