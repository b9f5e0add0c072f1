// rl_svg — the pure parts of `rlctl plot` (cli/cmd_plot.c): axes with ticks at "nice" numbers
// (1, 2 or 5 x 10^k), their labels (fixed, exponent or percent), the mapping of a value to a
// pixel, a trailing moving average, and XML text escaping. No state; only rl_svg_smooth
// allocates (a scratch array it frees). Not an SVG writer: cmd_plot.c writes the elements.
#ifndef RL_SVG_H
#define RL_SVG_H

#include <stddef.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

// An axis: the range [lo, hi] it shows and its ticks first + i*step, i in [0, n).
typedef struct {
    double lo, hi;      // shown range; lo < hi, both finite
    double step;        // tick spacing: 1, 2 or 5 x 10^k (k >= 0 for an integer axis)
    double first;       // first tick, a multiple of step (equals lo unless the range was
                        // too wide to round outwards without overflowing)
    int n;              // tick count, >= 2
    int k;              // the exponent of step (step = m x 10^k, m in {1, 2, 5})
} rl_svg_axis_t;

// The smallest step in {1, 2, 5} x 10^k with span / step <= max_ticks (max_ticks >= 1; span > 0
// and finite). integer != 0 keeps the step >= 1 (an axis of optimizer steps).
double rl_svg_nice_step(double span, int max_ticks, int integer, int *k_out);

// The axis for data in [lo, hi] (finite, lo <= hi) with about max_ticks intervals (at most
// max_ticks + 2 ticks). A flat range (hi - lo tiny next to |lo|, or equal) is first padded: by
// 1 on an integer axis or at zero, else by 10% of |lo| on each side. The range is then widened
// outwards to the nearest ticks, so both ends of the axis carry a tick (unless that would
// overflow a double: then the range stays as given and the ticks lie inside it).
void rl_svg_axis(double lo, double hi, int max_ticks, int integer, rl_svg_axis_t *out);

// Tick i of the axis (computed from the tick's index, not by repeated addition; a value within
// step * 1e-9 of zero is exactly 0, so no "-0" label).
double rl_svg_tick(const rl_svg_axis_t *a, int i);

// The label of tick value v into buf (always NUL-terminated): fixed notation with as many
// decimals as the step needs ("0.55", "120") while the axis' largest magnitude is in
// [1e-4, 1e6), else exponent notation with enough digits to tell ticks apart ("1.5e+07"; zero
// as "0"); percent != 0: v x 100 with a "%" ("55%", "2.5%"). Returns buf.
const char *rl_svg_tick_label(const rl_svg_axis_t *a, double v, int percent, char *buf,
                              size_t len);

// The pixel of v on an axis drawn from pixel p0 (at a->lo) to p1 (at a->hi); p1 < p0 for a y
// axis. Halves are taken before the difference so that ranges near +-DBL_MAX do not overflow.
double rl_svg_map(const rl_svg_axis_t *a, double v, double p0, double p1);

// Trailing moving average: out[i] = mean of y[max(0, i-window+1) .. i] (the first window-1
// points average what there is). window >= 1; out and y (n values) may not overlap. Summed in
// blocks of `window` without subtraction, so a large value that leaves the window leaves no
// rounding residue behind, and values are scaled by 1/window first so no sum overflows.
// Returns 0 or RL_ENOMEM (out untouched).
int rl_svg_smooth(double *out, const double *y, int n, int window);

// Writes s as XML character data / attribute text: & < > " ' as entities, control bytes that
// XML 1.0 forbids and bytes that are not valid UTF-8 as '?'. Returns what fputs-like writes
// return: 0, or EOF when a write failed.
int rl_svg_escape(FILE *f, const char *s);

#ifdef __cplusplus
}
#endif
#endif
