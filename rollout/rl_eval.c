// rl_eval — held-out evaluation: JSONL rows (read with core's rl_jsonl) -> sampler -> scorer ->
// accuracy and format rate.
#include "rl_eval.h"
#include "rl_clock.h"

#include "rl_err.h"
#include "rl_jsonl.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct rl_eval_data {
    rl_eval_row_t *rows;
    int n;
    char *strings; // every prompt and answer, NUL-separated, one allocation
};

// Rows are converted to text once (rl_jsonl_field_text): an answer given as a JSON number is
// printed the way the scorer will normalise it anyway.
rl_eval_data_t *rl_eval_data_load(const char *const *paths, int n_paths, const char *prompt_field,
                                  const char *answer_field, int limit, char *err, size_t err_len) {
    rl_jsonl_t *in = NULL;
    char path[4200];
    rl_jsonl_names(paths, n_paths, path, sizeof path);
    int rc = rl_jsonl_open_list(paths, n_paths, 0, &in, err, err_len);
    if (rc) {
        if (rc > 0) {
            rl_errf(err, err_len, RL_EIO, "%s: %s", path, strerror(rc));
        }
        return NULL;
    }
    rl_eval_data_t *d = calloc(1, sizeof *d);
    char **texts = NULL;
    size_t n_texts = 0, cap_texts = 0, total = 0;
    if (!d) {
        goto fail;
    }
    json_t *row;
    while ((rc = rl_jsonl_next(in, &row)) == 1) { // blank lines are allowed, as in most readers
        char *p = NULL, *a = NULL;
        int rp = rl_jsonl_field_text(row, prompt_field, &p);
        int ra = rl_jsonl_field_text(row, answer_field, &a);
        json_decref(row);
        if (rp == RL_ENOMEM || ra == RL_ENOMEM) {
            free(p);
            free(a);
            goto fail;
        }
        if (!p || !a) {
            rl_errf(err, err_len, RL_EINVAL, "%s:%ld: the row has no %s field '%s'",
                    rl_jsonl_path(in), rl_jsonl_lineno(in), p ? "text or number" : "text",
                    p ? answer_field : prompt_field);
            free(p);
            free(a);
            goto fail;
        }
        if (n_texts + 2 > cap_texts) {
            cap_texts = cap_texts ? 2 * cap_texts : 256;
            char **t = realloc(texts, cap_texts * sizeof *t);
            if (!t) {
                free(p);
                free(a);
                goto fail;
            }
            texts = t;
        }
        texts[n_texts++] = p;
        texts[n_texts++] = a;
        total += strlen(p) + strlen(a) + 2;
        if (limit > 0 && (int)(n_texts / 2) >= limit) {
            rc = 0;
            break;
        }
    }
    if (rc) {
        const json_error_t *je = rl_jsonl_json_error(in);
        if (je) {
            rl_errf(err, err_len, RL_EINVAL, "%s:%ld: %s", rl_jsonl_path(in), rl_jsonl_lineno(in),
                    je->text);
        } else {
            rl_errf(err, err_len, rc, "%s", rl_jsonl_errmsg(in));
        }
        goto fail;
    }
    d->n = (int)(n_texts / 2);
    d->rows = calloc((size_t)d->n + 1, sizeof *d->rows);
    d->strings = malloc(total + 1);
    if (!d->rows || !d->strings) {
        goto fail;
    }
    char *w = d->strings;
    for (size_t i = 0; i < n_texts; i++) {
        size_t l = strlen(texts[i]) + 1;
        memcpy(w, texts[i], l);
        if (i % 2 == 0) {
            d->rows[i / 2].prompt = w;
        } else {
            d->rows[i / 2].answer = w;
        }
        w += l;
        free(texts[i]);
    }
    free(texts);
    rl_jsonl_destroy(&in);
    return d;
fail:
    if (err && err_len && !err[0]) {
        rl_errf(err, err_len, RL_ENOMEM, "%s: out of memory", path);
    }
    for (size_t i = 0; i < n_texts; i++) {
        free(texts[i]);
    }
    free(texts);
    rl_jsonl_destroy(&in);
    rl_eval_data_destroy(&d);
    return NULL;
}

int rl_eval_data_count(const rl_eval_data_t *self) { return self->n; }

const rl_eval_row_t *rl_eval_data_row(const rl_eval_data_t *self, int i) {
    return i >= 0 && i < self->n ? &self->rows[i] : NULL;
}

void rl_eval_data_destroy(rl_eval_data_t **self_p) {
    if (!self_p || !*self_p) {
        return;
    }
    free((*self_p)->rows);
    free((*self_p)->strings);
    free(*self_p);
    *self_p = NULL;
}

// ---------------------------------------------------------------------------------------------

int rl_eval_run(rl_sampler_t *sampler, rl_tokenizer_t *tok, const rl_eval_data_t *data,
                const rl_sampler_params_t *params, rl_eval_score_fn score, void *ctx,
                rl_eval_result_t *out, char *err, size_t err_len) {
    memset(out, 0, sizeof *out);
    double t0 = rl_clock_now();
    int n = data->n, rc = 0;
    rl_sampler_prompt_t *prompts = calloc((size_t)n + 1, sizeof *prompts);
    int32_t **ids = calloc((size_t)n + 1, sizeof *ids);
    rl_sampler_result_t *res = NULL;
    if (!prompts || !ids) {
        rc = rl_errf(err, err_len, RL_ENOMEM, "eval: out of memory");
        goto done;
    }
    for (int i = 0; i < n; i++) {
        size_t len = 0;
        const char *p = data->rows[i].prompt;
        rc = rl_tokenizer_encode(tok, p, strlen(p), 0, &ids[i], &len);
        if (rc != 0) {
            rl_errf(err, err_len, rc, "eval row %d: %s", i + 1, rl_tokenizer_errmsg(tok));
            goto done;
        }
        prompts[i].ids = ids[i];
        prompts[i].len = (int)len;
        prompts[i].index = (uint64_t)i;
    }
    rc = rl_sampler_generate(sampler, prompts, n, params, &res);
    if (rc != 0) {
        rl_errf(err, err_len, rc, "eval: %s", rl_sampler_errmsg(sampler));
        goto done;
    }
    int total = n * params->n;
    double sum = 0.0;
    long long fmt = 0, clipped = 0;
    for (int k = 0; k < total; k++) {
        rl_sampler_result_t *r = &res[k];
        out->tokens += r->n_ids;
        int n_text = r->n_ids - (r->finish == RL_SAMPLER_FINISH_STOP ? 1 : 0);
        // ids the tokenizer does not know (a padded model vocabulary) have no text
        char *text = NULL;
        size_t tlen = 0;
        rc = rl_tokenizer_decode_known(tok, r->ids, (size_t)n_text, 0, &text, &tlen);
        if (rc != 0) {
            rl_errf(err, err_len, rc, "eval: %s", rl_tokenizer_errmsg(tok));
            goto done;
        }
        int formatted = 0;
        sum += score(ctx, text, tlen, data->rows[r->prompt].answer, &formatted);
        fmt += formatted != 0;
        clipped += r->finish == RL_SAMPLER_FINISH_LENGTH;
        free(text);
    }
    out->rows = n;
    out->samples = total;
    out->accuracy = total ? sum / total : 0.0;
    out->format_rate = total ? (double)fmt / total : 0.0;
    out->mean_length = total ? (double)out->tokens / total : 0.0;
    out->clipped_ratio = total ? (double)clipped / total : 0.0;
done:
    if (res) {
        rl_sampler_results_free(&res, n * params->n);
    }
    for (int i = 0; ids && i < n; i++) {
        free(ids[i]);
    }
    free(ids);
    free(prompts);
    out->seconds = rl_clock_now() - t0;
    return rc;
}
