// rl_svg — axis ticks, tick labels, value-to-pixel mapping, a trailing moving average and XML
// escaping for `rlctl plot` (contracts in rl_svg.h). Pure functions of their arguments; the
// SVG elements themselves are written by cli/cmd_plot.c.
#include "rl_svg.h"

#include "rl_err.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

// ---- ticks ----------------------------------------------------------------------------------

// Relative slack when comparing quotients that should be whole numbers: 0.6 / 0.05 is
// 11.999999999999998 in doubles and must count as 12.
#define S_EPS 1e-9

// The smallest m x 10^k (m in {1, 2, 5}) that is >= raw (> 0, finite), up to S_EPS.
static double s_nice(double raw, int integer, int *k_out) {
    int k = (int)floor(log10(raw));
    double p = pow(10.0, k);
    double f = raw / p; // in [1, 10) up to rounding of log10
    double m;
    if (!(p > 0.0) || !isfinite(f)) { // raw subnormal: treat as the smallest normal step
        k = DBL_MIN_10_EXP;
        m = 1.0;
    } else if (f <= 1.0 + S_EPS) {
        m = 1.0;
    } else if (f <= 2.0 * (1.0 + S_EPS)) {
        m = 2.0;
    } else if (f <= 5.0 * (1.0 + S_EPS)) {
        m = 5.0;
    } else {
        m = 1.0;
        k++;
    }
    if (integer && k < 0) { // an axis of whole steps has no tick at 2.5
        m = 1.0;
        k = 0;
    }
    if (k_out) {
        *k_out = k;
    }
    // 10^k from pow, not p * 10 etc.: pow(10, k) is the double nearest 10^k for these k
    return m * pow(10.0, k);
}

double rl_svg_nice_step(double span, int max_ticks, int integer, int *k_out) {
    return s_nice(span / (max_ticks >= 1 ? max_ticks : 1), integer, k_out);
}

// q rounded down (up = 0) or up (up = 1), where a q within S_EPS of a whole number is that
// number.
static double s_round_to(double q, int up) {
    double r = round(q);
    if (fabs(q - r) <= S_EPS * (fabs(q) > 1.0 ? fabs(q) : 1.0)) {
        return r;
    }
    return up ? ceil(q) : floor(q);
}

void rl_svg_axis(double lo, double hi, int max_ticks, int integer, rl_svg_axis_t *out) {
    if (max_ticks < 1) {
        max_ticks = 1;
    }
    if (hi < lo) {
        double t = lo;
        lo = hi;
        hi = t;
    }
    // Flat: nothing to spread ticks over, or a span below what 13 digits of |lo| can show.
    double mid = lo * 0.5 + hi * 0.5, amid = fabs(mid);
    if (hi - lo <= amid * 1e-12 || hi - lo < 1e-290) {
        double pad = (integer || amid < 1e-290) ? 1.0 : amid * 0.1;
        lo = mid - pad;
        hi = mid + pad;
    }
    // the span per tick, halved first: hi - lo overflows when both are near DBL_MAX
    double raw = (hi * 0.5 - lo * 0.5) / max_ticks * 2.0;
    out->step = s_nice(raw, integer, &out->k);
    double s = out->step;
    double i_lo = s_round_to(lo / s, 0), i_hi = s_round_to(hi / s, 1);
    double a_lo = i_lo * s, a_hi = i_hi * s;
    if (isfinite(a_lo) && isfinite(a_hi)) {
        out->lo = a_lo + 0.0; // -0 becomes 0
        out->hi = a_hi + 0.0;
        out->first = a_lo;
        out->n = (int)(i_hi - i_lo) + 1;
    } else { // rounding outwards would leave the doubles: keep the data's range, ticks inside
        double i_first = s_round_to(lo / s, 1), i_last = s_round_to(hi / s, 0);
        out->lo = lo;
        out->hi = hi;
        out->first = i_first * s;
        out->n = (int)(i_last - i_first) + 1;
    }
}

double rl_svg_tick(const rl_svg_axis_t *a, int i) {
    double t = (round(a->first / a->step) + i) * a->step;
    return fabs(t) < a->step * 1e-9 ? 0.0 : t;
}

const char *rl_svg_tick_label(const rl_svg_axis_t *a, double v, int percent, char *buf,
                              size_t len) {
    double mag = fmax(fabs(a->lo), fabs(a->hi));
    if (percent) {
        // step m x 10^k of a fraction is m x 10^(k+2) percent
        int dec = -(a->k + 2);
        dec = dec < 0 ? 0 : dec > 15 ? 15 : dec;
        snprintf(buf, len, "%.*f%%", dec, v * 100.0);
    } else if (mag >= 1e-4 && mag < 1e6) {
        int dec = -a->k;
        dec = dec < 0 ? 0 : dec > 17 ? 17 : dec;
        snprintf(buf, len, "%.*f", dec, v == 0.0 ? 0.0 : v); // no "-0.0"
    } else if (v == 0.0) {
        snprintf(buf, len, "0"); // not "0.0e+00"
    } else {
        // digits after the point: from the axis' largest exponent down to the step's
        int e = (int)floor(log10(mag));
        int dig = e - a->k;
        dig = dig < 0 ? 0 : dig > 16 ? 16 : dig;
        snprintf(buf, len, "%.*e", dig, v);
    }
    return buf;
}

double rl_svg_map(const rl_svg_axis_t *a, double v, double p0, double p1) {
    double t = (v * 0.5 - a->lo * 0.5) / (a->hi * 0.5 - a->lo * 0.5);
    return p0 + t * (p1 - p0);
}

// ---- smoothing ------------------------------------------------------------------------------

// Blocks of w points: pre[i] sums y[block start of i .. i], suf[j] sums y[j .. block end of j].
// The window [j, i] (j = i - w + 1 > 0) is a whole block when j starts one (pre[i]), else the
// tail of j's block plus the head of i's (suf[j] + pre[i]). Every sum adds only values inside
// the window, unlike a running sum that subtracts the value leaving it.
int rl_svg_smooth(double *out, const double *y, int n, int window) {
    if (n <= 0) {
        return 0;
    }
    int w = window < 1 ? 1 : window > n ? n : window;
    double *suf = malloc((size_t)n * sizeof(*suf));
    if (!suf) {
        return RL_ENOMEM;
    }
    double s = 1.0 / w;
    double *pre = out; // pre[i] is read only when out[i] is written, so it can live in out
    for (int i = 0; i < n; i++) {
        pre[i] = (i % w ? pre[i - 1] : 0.0) + y[i] * s;
    }
    for (int j = n - 1; j >= 0; j--) {
        suf[j] = ((j + 1) % w && j + 1 < n ? suf[j + 1] : 0.0) + y[j] * s;
    }
    for (int i = 0; i < n; i++) {
        int j = i - w + 1;
        double sum = (j <= 0 || j % w == 0) ? pre[i] : suf[j] + pre[i];
        int cnt = j <= 0 ? i + 1 : w;
        out[i] = cnt == w ? sum : sum * ((double)w / cnt);
    }
    free(suf);
    return 0;
}

// ---- XML text -------------------------------------------------------------------------------

// The length of the valid UTF-8 sequence at p that XML 1.0 allows (not U+FFFE, U+FFFF), or 0.
static int s_utf8_len(const unsigned char *p) {
    unsigned c = p[0];
    if (c >= 0xc2 && c <= 0xdf) {
        return (p[1] & 0xc0) == 0x80 ? 2 : 0;
    }
    if (c >= 0xe0 && c <= 0xef) {
        unsigned lo = c == 0xe0 ? 0xa0 : 0x80, hi = c == 0xed ? 0x9f : 0xbf;
        if (p[1] < lo || p[1] > hi || (p[2] & 0xc0) != 0x80) {
            return 0;
        }
        if (c == 0xef && p[1] == 0xbf && (p[2] == 0xbe || p[2] == 0xbf)) {
            return 0;
        }
        return 3;
    }
    if (c >= 0xf0 && c <= 0xf4) {
        unsigned lo = c == 0xf0 ? 0x90 : 0x80, hi = c == 0xf4 ? 0x8f : 0xbf;
        if (p[1] < lo || p[1] > hi || (p[2] & 0xc0) != 0x80 || (p[3] & 0xc0) != 0x80) {
            return 0;
        }
        return 4;
    }
    return 0;
}

int rl_svg_escape(FILE *f, const char *s) {
    const unsigned char *p = (const unsigned char *)s;
    while (*p) {
        const char *ent = NULL;
        switch (*p) {
        case '&': ent = "&amp;"; break;
        case '<': ent = "&lt;"; break;
        case '>': ent = "&gt;"; break;
        case '"': ent = "&quot;"; break;
        case '\'': ent = "&apos;"; break;
        default: break;
        }
        if (ent) {
            if (fputs(ent, f) == EOF) {
                return EOF;
            }
            p++;
        } else if (*p < 0x80) {
            int c = (*p < 0x20 && *p != '\t' && *p != '\n' && *p != '\r') ? '?' : *p;
            if (fputc(c, f) == EOF) {
                return EOF;
            }
            p++;
        } else {
            // a NUL ends a sequence early: s_utf8_len sees it as a bad continuation byte
            int n = s_utf8_len(p);
            if (n == 0) {
                if (fputc('?', f) == EOF) {
                    return EOF;
                }
                p++;
            } else {
                if (fwrite(p, 1, (size_t)n, f) != (size_t)n) {
                    return EOF;
                }
                p += n;
            }
        }
    }
    return 0;
}
