// rl_completions — the completions table of `log.completions` (see rl_completions.h).
#include "rl_completions.h"

#include "rl_log.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define S_PROMPT_W 28
#define S_COMPLETION_W 44

void rl_completions_cell(const char *s, size_t len, int width, char *out) {
    size_t o = 0;
    int shown = 0;
    for (size_t i = 0; i < len && shown < width;) {
        unsigned char c = (unsigned char)s[i];
        const char *esc = c == '\n' ? "\\n" : c == '\t' ? "\\t" : c == '"' ? "\\\"" : NULL;
        if (esc) {
            memcpy(out + o, esc, 2);
            o += 2;
            i++;
        } else if (c < 0x20 || c == 0x7f) {
            o += (size_t)sprintf(out + o, "\\x%02x", c);
            i++;
        } else { // one UTF-8 character, whole
            size_t n = c < 0x80 ? 1 : c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc0 ? 2 : 1;
            n = i + n <= len ? n : len - i;
            memcpy(out + o, s + i, n);
            o += n;
            i += n;
        }
        shown++;
        if (shown == width && i < len) {
            memcpy(out + o, "…", strlen("…"));
            o += strlen("…");
        }
    }
    out[o] = '\0';
}

void rl_completions_print(rl_run_t *run, const rl_prompts_t *prompts, const rl_rollout_t *t,
                          const double *adv) {
    const rl_recipe_t *r = run->r;
    int64_t step = run->step;
    int want = r->log.completions;
    if (want <= 0 || !(step % r->train.log_every == 0 || step == r->train.steps)) {
        return;
    }
    int n = t->gen.n_res, G = t->G, rows = want < t->P ? want : t->P;
    char line[4096], cell[4 * S_COMPLETION_W + 16];
    rl_log_info("step %lld: %d of %d completions (the first of each of %d prompts)",
                (long long)step, rows, n, rows);
    int o = snprintf(line, sizeof line, "  %-*s  %-*s", S_PROMPT_W + 2, "prompt",
                     S_COMPLETION_W + 2, "completion");
    for (int k = 0; k < r->n_rewards && o < (int)sizeof line - 64; k++) {
        o += snprintf(line + o, sizeof line - (size_t)o, "  %8.8s", r->rewards[k].name);
    }
    snprintf(line + o, sizeof line - (size_t)o, "  %8s%s  %6s  %s", "total",
             adv ? "  advantage" : "", "tokens", "end");
    rl_log_info("%s", line);
    for (int p = 0; p < rows; p++) {
        int j = p * G; // the prompt's first sample
        const rl_prompt_t *pr = rl_prompts_get(prompts, t->idx[p]);
        char *text = NULL;
        size_t len = 0;
        rl_completions_cell(pr->text, pr->text_len, S_PROMPT_W, cell);
        o = snprintf(line, sizeof line, "  \"%s\"%*s", cell,
                     S_PROMPT_W - (int)strlen(cell) > 0 ? S_PROMPT_W - (int)strlen(cell) : 0, "");
        if (rl_run_completion_text(run, &t->gen, j, &text, &len) == 0) {
            rl_completions_cell(text, len, S_COMPLETION_W, cell);
        } else {
            snprintf(cell, sizeof cell, "(not decodable)");
        }
        free(text);
        int pad = S_COMPLETION_W - (int)strlen(cell);
        o +=
            snprintf(line + o, sizeof line - (size_t)o, "  \"%s\"%*s", cell, pad > 0 ? pad : 0, "");
        for (int k = 0; k < r->n_rewards && o < (int)sizeof line - 64; k++) {
            o += snprintf(line + o, sizeof line - (size_t)o, "  %8.3f",
                          t->raw ? t->raw[(size_t)k * n + j] : NAN);
        }
        o += snprintf(line + o, sizeof line - (size_t)o, "  %8.3f", t->total ? t->total[j] : NAN);
        if (adv) {
            o += snprintf(line + o, sizeof line - (size_t)o, "  %9.3f", adv[j]);
        }
        snprintf(line + o, sizeof line - (size_t)o, "  %6d  %s", t->gen.lens[j],
                 t->gen.fin[j] == 1 ? "length" : "stop");
        rl_log_info("%s", line);
    }
}
