// rl_pairs — see rl_pairs.h.
#include "rl_pairs.h"

#include "rl_err.h"
#include "rl_hf.h"
#include "rl_log.h"

#include <stdlib.h>
#include <string.h>

int rl_pairs_load(const rl_recipe_t *r, rl_tokenizer_t *tok, int eos, int with_margin,
                  unsigned flags, rl_data_t **train, rl_data_t **eval, char *err, size_t err_len) {
    char msg[2048];
    *train = *eval = NULL;
    rl_data_opts_t d;
    rl_data_opts_default(&d);
    d.pairs = 1;
    d.format = r->data.format;
    d.prompt_field = r->data.prompt_field;
    d.chosen_field = r->data.chosen_field;
    d.rejected_field = r->data.rejected_field;
    d.margin_field = with_margin ? r->data.margin_field : NULL;
    d.max_length = r->data.max_length;
    d.truncation = r->data.truncation;
    d.eos_id = -1;
    if (eos) {
        d.eos_id = rl_tokenizer_eos_id(tok);
        rl_hf_config_t cfg;
        if (d.eos_id < 0 && rl_hf_config_load(r->model.path, &cfg, msg, sizeof msg) == 0 &&
            cfg.n_eos > 0) {
            d.eos_id = cfg.eos_token_ids[0];
        }
    }
    d.chat = rl_run_chat_format(r);
    const rl_recipe_strlist_t *paths[2] = {&r->data.train, &r->data.eval_pairs};
    const char *keys[2] = {"data.train", "data.eval_pairs"};
    rl_data_t **outs[2] = {train, eval};
    for (int k = 0; k < 2; k++) {
        if (!paths[k]->n) {
            continue;
        }
        *outs[k] = rl_data_load(rl_recipe_paths(paths[k]), paths[k]->n, &d, tok, msg, sizeof msg);
        if (!*outs[k]) {
            return rl_errf(err, err_len, RL_EINVAL, "%s", msg);
        }
        if (rl_data_dropped(*outs[k]) && !(flags & RL_PAIRS_QUIET)) {
            rl_log_warn("%s: %zu pairs dropped (a side longer than data.max_length %d tokens)",
                        keys[k], rl_data_dropped(*outs[k]), r->data.max_length);
        }
    }
    return 0;
}

int rl_pairs_preflight(const rl_recipe_t *r, int eos, int with_margin, char *err, size_t err_len) {
    rl_tokenizer_t *tok = rl_run_tokenizer(r, err, err_len);
    if (!tok) {
        return RL_EINVAL;
    }
    rl_data_t *train = NULL, *eval = NULL;
    int rc = rl_pairs_load(r, tok, eos, with_margin, RL_PAIRS_QUIET, &train, &eval, err, err_len);
    rl_data_destroy(&train);
    rl_data_destroy(&eval);
    rl_tokenizer_destroy(&tok);
    return rc;
}

void rl_pairs_take(rl_run_t *run, int P, int64_t *ex) {
    for (int i = 0; i < P; i++) {
        size_t pair = rl_data_sampler_next(run->order);
        ex[2 * i] = (int64_t)(2 * pair);
        ex[2 * i + 1] = ex[2 * i] + 1;
    }
}

void rl_pairs_rows_free(rl_pairs_rows_t *t) {
    free(t->ex);
    free(t->tok);
    free(t->len);
    free(t->mask);
    memset(t, 0, sizeof *t);
}

int rl_pairs_rows(const rl_data_t *data, const int64_t *ex, int B, rl_pairs_rows_t *t) {
    memset(t, 0, sizeof *t);
    int T = 2;
    for (int i = 0; i < B; i++) {
        int len;
        rl_data_example(data, (size_t)ex[i], NULL, NULL, &len, NULL);
        T = len > T ? len : T;
    }
    size_t bt = (size_t)B * (size_t)T;
    t->ex = malloc(((size_t)B + 1) * sizeof(int64_t));
    t->tok = calloc(bt, sizeof(int32_t));
    t->len = calloc((size_t)B + 1, sizeof(int32_t));
    t->mask = calloc(bt, 1);
    if (!t->ex || !t->tok || !t->len || !t->mask) {
        return RL_ENOMEM;
    }
    for (int i = 0; i < B; i++) {
        const int32_t *x;
        const uint8_t *m;
        int n;
        rl_data_example(data, (size_t)ex[i], &x, &m, &n, NULL);
        memcpy(t->tok + (size_t)i * T, x, (size_t)n * sizeof(int32_t));
        memcpy(t->mask + (size_t)i * T, m, (size_t)n);
        t->len[i] = n;
        t->ex[i] = ex[i];
    }
    t->B = B;
    t->T = T;
    return 0;
}

int rl_pairs_train(rl_run_t *run, const char *loss, const rl_pairs_rows_t *w, const double *ref_sum,
                   const double *margin, double lr, rl_proto_train_reply_t *x, rl_msg_t **rep,
                   char *err, size_t err_len) {
    rl_proto_train_t q = {.loss = loss,
                          .step = run->step + 1,
                          .lr = lr,
                          .temperature = 1.0,
                          .tokens = w->tok,
                          .lengths = w->len,
                          .mask = w->mask,
                          .ref_sum = ref_sum,
                          .margin = margin,
                          .B = w->B,
                          .T = w->T,
                          .denom = w->B / 2,
                          .micro_batch = run->r->train.micro_batch_size,
                          .iterations = 1,
                          .want_weights = 0};
    int rc = rl_run_train(run, &run->actor, &q, x, rep, err, err_len);
    if (rc) {
        return rc;
    }
    int64_t tokens = 0;
    for (int b = 0; b < w->B; b++) {
        tokens += w->len[b];
    }
    rl_run_advance(run, tokens, NULL);
    return 0;
}
