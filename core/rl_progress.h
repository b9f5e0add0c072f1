// rl_progress — the live progress line of long commands. On a TTY it redraws one line with
// '\r'; elsewhere (logs, CI) it prints a plain line every `every` steps and at the last step.
// Not a logger and not a metrics sink.
#ifndef RL_PROGRESS_H
#define RL_PROGRESS_H

#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct rl_progress rl_progress_t;

typedef enum {
    RL_PROGRESS_AUTO = 0,
    RL_PROGRESS_TTY = 1,
    RL_PROGRESS_PLAIN = 2
} rl_progress_mode_t;

// Creates a progress line for `total` steps (0 = unknown) written to `out` (borrowed; valid
// until destroy). AUTO picks TTY when isatty(fileno(out)). `every` (>= 1) is the plain-mode
// cadence. caller owns result; free with rl_progress_destroy. NULL on allocation failure.
rl_progress_t *rl_progress_new(FILE *out, long total, long every, rl_progress_mode_t mode);

// Reports that `step` (1-based) is done; `fmt` adds fields such as "reward 0.41 kl 0.002".
// The line reads "step 12/300 [4%] <fields> | 1.3 s/step ETA 6m14s". Returns 1 if a line was
// written, 0 if this step was skipped (plain mode, not on the cadence).
int rl_progress_update(rl_progress_t *self, long step, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

// Ends a TTY line with '\n' (so later output starts on a fresh line); no-op in plain mode.
void rl_progress_finish(rl_progress_t *self);

// Formats seconds as "45s", "6m14s" or "2h03m" into buf. Returns buf.
char *rl_progress_format_eta(double seconds, char *buf, size_t len);

void rl_progress_destroy(rl_progress_t **self_p);

#ifdef __cplusplus
}
#endif
#endif
