// rl_progress — one redrawn line on a TTY, a plain line every N steps elsewhere.
#include "rl_progress.h"
#include "rl_clock.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

struct rl_progress {
    FILE *out;
    long total;
    long every;
    int tty;
    int open_line;  // a TTY line is drawn and not yet ended
    double t0;      // monotonic seconds at creation
    long step0;     // first step seen (a resumed run starts mid-way)
    int have_step0;
};

rl_progress_t *rl_progress_new(FILE *out, long total, long every, rl_progress_mode_t mode) {
    rl_progress_t *self = calloc(1, sizeof *self);
    if (!self) {
        return NULL;
    }
    self->out = out;
    self->total = total > 0 ? total : 0;
    self->every = every > 0 ? every : 1;
    self->tty = mode == RL_PROGRESS_TTY || (mode == RL_PROGRESS_AUTO && isatty(fileno(out)));
    self->t0 = rl_clock_now();
    return self;
}

char *rl_progress_format_eta(double seconds, char *buf, size_t len) {
    if (seconds < 0 || seconds != seconds) {
        snprintf(buf, len, "?");
        return buf;
    }
    long s = (long)(seconds + 0.5);
    if (s < 60) {
        snprintf(buf, len, "%lds", s);
    } else if (s < 3600) {
        snprintf(buf, len, "%ldm%02lds", s / 60, s % 60);
    } else {
        snprintf(buf, len, "%ldh%02ldm", s / 3600, (s % 3600) / 60);
    }
    return buf;
}

int rl_progress_update(rl_progress_t *self, long step, const char *fmt, ...) {
    if (!self->have_step0) {
        self->step0 = step - 1;
        self->have_step0 = 1;
    }
    int last = self->total > 0 && step >= self->total;
    if (!self->tty && !last && step % self->every != 0) {
        return 0;
    }
    char fields[512] = "";
    if (fmt) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(fields, sizeof fields, fmt, ap);
        va_end(ap);
    }
    double elapsed = rl_clock_now() - self->t0;
    long done = step - self->step0;
    double per = done > 0 ? elapsed / (double)done : 0.0;
    char head[64], tail[96], eta[32];
    if (self->total > 0) {
        snprintf(head, sizeof head, "step %ld/%ld [%ld%%]", step, self->total,
                 step * 100 / self->total);
        rl_progress_format_eta(per * (double)(self->total - step), eta, sizeof eta);
        snprintf(tail, sizeof tail, "%.2f s/step ETA %s", per, eta);
    } else {
        snprintf(head, sizeof head, "step %ld", step);
        snprintf(tail, sizeof tail, "%.2f s/step", per);
    }
    if (self->tty) {
        // "\033[K" clears what a longer previous line left behind.
        fprintf(self->out, "\r%s %s | %s\033[K", head, fields, tail);
        self->open_line = 1;
    } else {
        fprintf(self->out, "%s %s | %s\n", head, fields, tail);
    }
    fflush(self->out);
    return 1;
}

void rl_progress_finish(rl_progress_t *self) {
    if (self && self->tty && self->open_line) {
        fputc('\n', self->out);
        fflush(self->out);
        self->open_line = 0;
    }
}

void rl_progress_destroy(rl_progress_t **self_p) {
    if (!self_p || !*self_p) {
        return;
    }
    rl_progress_finish(*self_p);
    free(*self_p);
    *self_p = NULL;
}
