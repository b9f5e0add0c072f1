// rl_reward_math — final-number extraction and comparison for math answers.
#include "rl_reward_math.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// ---------------------------------------------------------------------------------------------
// number scanning

static int s_digit(char c) { return c >= '0' && c <= '9'; }

// Scans a number starting at text[i] (a sign or a digit); returns its end, or i when there is
// none. Commas count only between digits ("1,234"), so "3, 4" is two numbers; a '.' counts only
// when a digit follows, so a sentence-ending "42." is the number 42.
static size_t s_scan(const char *t, size_t len, size_t i) {
    size_t j = i;
    if (j < len && (t[j] == '-' || t[j] == '+')) {
        j++;
    }
    if (j >= len || !s_digit(t[j])) {
        return i;
    }
    while (j < len) {
        if (s_digit(t[j])) {
            j++;
        } else if (t[j] == ',' && j + 1 < len && s_digit(t[j + 1]) && s_digit(t[j - 1])) {
            j++;
        } else {
            break;
        }
    }
    if (j + 1 < len && t[j] == '.' && s_digit(t[j + 1])) {
        j++;
        while (j < len && s_digit(t[j])) {
            j++;
        }
    }
    return j;
}

// Normalises t[i..j) into out (64 bytes). Returns 0, or -1 when it does not fit.
static int s_norm(const char *t, size_t i, size_t j, char *out) {
    char buf[64];
    size_t n = 0;
    int neg = 0;
    if (i < j && (t[i] == '-' || t[i] == '+')) {
        neg = t[i] == '-';
        i++;
    }
    for (size_t k = i; k < j; k++) {
        if (t[k] == ',') {
            continue;
        }
        if (n >= 60) {
            return -1;
        }
        buf[n++] = t[k];
    }
    buf[n] = '\0';
    char *dot = strchr(buf, '.');
    if (dot) { // drop trailing zeros of the decimal part, then a bare '.'
        char *end = buf + n;
        while (end > dot + 1 && end[-1] == '0') {
            *--end = '\0';
        }
        if (end == dot + 1) {
            *dot = '\0';
        }
    }
    const char *p = buf;
    while (p[0] == '0' && s_digit(p[1])) { // leading zeros, keeping "0" and "0.5"
        p++;
    }
    int zero = strspn(p, "0.") == strlen(p);
    snprintf(out, 64, "%s%s", neg && !zero ? "-" : "", p);
    return 0;
}

void rl_math_extract(const char *text, size_t len, rl_math_answer_t *out) {
    memset(out, 0, sizeof *out);
    // "#### N": the last marker followed by a number wins
    for (size_t i = len; i-- > 0;) {
        if (i + 4 > len || memcmp(text + i, "####", 4) != 0) {
            continue;
        }
        size_t k = i + 4;
        while (k < len && (text[k] == ' ' || text[k] == '$')) {
            k++;
        }
        size_t e = s_scan(text, len, k);
        if (e > k && s_norm(text, k, e, out->value) == 0) {
            out->found = 1;
            out->formatted = 1;
            return;
        }
    }
    // else the last number in the text
    size_t best_i = 0, best_e = 0;
    for (size_t i = 0; i < len;) {
        int starts = s_digit(text[i]) ||
                     ((text[i] == '-' || text[i] == '+') && i + 1 < len && s_digit(text[i + 1]));
        // a sign glued to a preceding digit is an operator ("3-4"), not part of the number
        if (starts && (text[i] == '-' || text[i] == '+') && i > 0 && s_digit(text[i - 1])) {
            i++;
            continue;
        }
        size_t e = starts ? s_scan(text, len, i) : i;
        if (e > i) {
            best_i = i;
            best_e = e;
            i = e;
        } else {
            i++;
        }
    }
    if (best_e > best_i && s_norm(text, best_i, best_e, out->value) == 0) {
        out->found = 1;
    }
}

int rl_math_normalize(const char *answer, char *out) {
    size_t len = strlen(answer), i = 0;
    while (i < len && (answer[i] == ' ' || answer[i] == '$')) {
        i++;
    }
    while (len > i && answer[len - 1] == ' ') {
        len--;
    }
    size_t e = s_scan(answer, len, i);
    if (e == i || e != len) {
        return -1;
    }
    char tmp[64];
    if (s_norm(answer, i, e, tmp) != 0) {
        return -1;
    }
    memcpy(out, tmp, sizeof tmp);
    return 0;
}

int rl_math_correct(const char *completion, size_t len, const char *reference) {
    rl_math_answer_t a;
    char ref[64];
    rl_math_extract(completion, len, &a);
    if (!a.found || rl_math_normalize(reference, ref) != 0) {
        return 0;
    }
    if (strcmp(a.value, ref) == 0) {
        return 1;
    }
    if (!strchr(a.value, '.') && !strchr(ref, '.')) {
        return 0; // distinct integers (exact: no rounding through double for long ones)
    }
    double x = strtod(a.value, NULL), y = strtod(ref, NULL);
    return fabs(x - y) <= 1e-9 * fmax(1.0, fabs(y));
}
