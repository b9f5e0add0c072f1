// rl_data — JSONL SFT rows to tokens + masks. The file is read with core's JSONL reader
// (rl_jsonl: lines, blank lines, the line cap, JSON parsing). All examples of a file live in two
// growing arrays (tokens, mask) with per-example offsets, so a 100k-row dataset is 3 allocations.
#include "rl_data.h"

#include "rl_err.h"
#include "rl_jsonl.h"
#include "rl_rng.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    size_t off; // into tokens/mask
    int len;
    int line;
    double margin; // a preference pair's margin (opts.margin_field), on both of its examples
} s_example_t;

struct rl_data {
    int format;
    int32_t *tokens;
    uint8_t *mask;
    size_t n_tok, cap_tok;
    s_example_t *ex;
    size_t n_ex, cap_ex;
    size_t dropped;
    int64_t loss_tokens;
    size_t n_margin; // pairs that gave opts.margin_field
};

void rl_data_opts_default(rl_data_opts_t *o) {
    memset(o, 0, sizeof(*o));
    o->format = RL_DATA_FORMAT_AUTO;
    o->prompt_field = "prompt";
    o->completion_field = "completion";
    o->text_field = "text";
    o->messages_field = "messages";
    o->chosen_field = "chosen";
    o->rejected_field = "rejected";
    o->pairs = 0;
    o->completion_only_loss = 1;
    o->max_length = 1024;
    o->truncation = RL_DATA_TRUNC_DROP;
    o->eos_id = -1;
    o->chat = RL_CHAT_NONE;
}

// ---- building one example ------------------------------------------------------------------
// An example under construction: pieces of text are encoded one by one and appended with their
// mask value into the dataset's arrays after the current example's start.

static int s_reserve(rl_data_t *d, size_t extra) {
    if (d->n_tok + extra <= d->cap_tok) {
        return 0;
    }
    size_t cap = d->cap_tok ? d->cap_tok : 4096;
    while (cap < d->n_tok + extra) {
        cap *= 2;
    }
    int32_t *t = realloc(d->tokens, cap * sizeof(*t));
    if (!t) {
        return RL_ENOMEM;
    }
    d->tokens = t;
    uint8_t *m = realloc(d->mask, cap);
    if (!m) {
        return RL_ENOMEM;
    }
    d->mask = m;
    d->cap_tok = cap;
    return 0;
}

static int s_append_ids(rl_data_t *d, const int32_t *ids, size_t n, uint8_t m) {
    if (s_reserve(d, n)) {
        return RL_ENOMEM;
    }
    memcpy(d->tokens + d->n_tok, ids, n * sizeof(*ids));
    memset(d->mask + d->n_tok, m, n);
    d->n_tok += n;
    return 0;
}

// Encodes text[0..len) and appends it with mask value m. Errors name where.
static int s_append_text(rl_data_t *d, rl_tokenizer_t *tok, const char *text, size_t len, uint8_t m,
                         const char *where, char *err, size_t err_len) {
    int32_t *ids = NULL;
    size_t n = 0;
    int rc = rl_tokenizer_encode(tok, text, len, 0, &ids, &n);
    if (rc) {
        return rl_errf(err, err_len, rc, "%s: cannot tokenize: %s", where,
                       rl_tokenizer_errmsg(tok));
    }
    rc = s_append_ids(d, ids, n, m);
    free(ids);
    return rc ? rl_errf(err, err_len, rc, "out of memory") : 0;
}

// A string field of a row; names the field when it is missing or not a string.
static int s_field(json_t *row, const char *name, const char **s, size_t *n, const char *where,
                   char *err, size_t err_len) {
    json_t *v = json_object_get(row, name);
    if (!v) {
        return rl_errf(err, err_len, RL_EINVAL, "%s: field '%s' is missing", where, name);
    }
    if (!json_is_string(v)) {
        return rl_errf(err, err_len, RL_EINVAL, "%s: field '%s' is not a string", where, name);
    }
    *s = json_string_value(v);
    *n = json_string_length(v);
    return 0;
}

// messages: renders growing prefixes and encodes the difference between consecutive ones, so
// each piece is exactly the text a template adds for one message (see rl_data.h). For an
// assistant turn at k: prev = render(0..k-1) is a prefix of head = render(0..k-1, generation
// prompt), which is a prefix of cur = render(0..k). [prev, head) is the role header (no loss),
// [head, cur) the content and end-of-turn token (loss), except trailing whitespace (ChatML's
// "\n" after <|im_end|>), which the model never has to produce before stopping.
// The first k messages of `list` rendered with the row's tools (NULL: none) through the JSON
// path, which hands every field of a message (tool_calls, tool_call_id, ...) to the template.
static int s_render_rich(rl_chat_format_t chat, json_t *list, json_t *tools, size_t k, int gen,
                         char **out, size_t *n_out, char *sub, size_t sub_len) {
    json_t *row = json_object(), *part = json_array();
    for (size_t i = 0; part && i < k; i++) {
        json_array_append(part, json_array_get(list, i));
    }
    char *text = NULL;
    if (row && part && json_object_set(row, "messages", part) == 0 &&
        (!tools || json_object_set(row, "tools", tools) == 0)) {
        text = json_dumps(row, JSON_COMPACT | JSON_PRESERVE_ORDER);
    }
    json_decref(part);
    json_decref(row);
    if (!text) {
        snprintf(sub, sub_len, "out of memory");
        return RL_ENOMEM;
    }
    int rc = rl_chat_render_json(chat, text, strlen(text), gen, out, n_out, sub, sub_len);
    free(text);
    return rc;
}

// A message with more than a role and a string content (tool_calls, tool_call_id, name, a
// null content), or a row with tools: rendered through the JSON path.
static int s_rich(json_t *list, json_t *tools) {
    if (tools && !json_is_null(tools)) {
        return 1;
    }
    size_t i;
    json_t *m;
    json_array_foreach(list, i, m) {
        if (json_object_size(m) != 2 || !json_is_string(json_object_get(m, "content"))) {
            return 1;
        }
    }
    return 0;
}

static int s_messages(rl_data_t *d, rl_tokenizer_t *tok, json_t *list, json_t *tools,
                      rl_chat_format_t chat, const char *where, char *err, size_t err_len) {
    size_t n = json_array_size(list);
    int rich = s_rich(list, tools);
    tools = tools && !json_is_null(tools) ? tools : NULL;
    rl_chat_msg_t *msgs = calloc(n ? n : 1, sizeof(*msgs));
    char *prev = NULL, *head = NULL, *cur = NULL;
    size_t n_prev = 0, n_head = 0, n_cur = 0;
    int rc = 0;
    char sub[512];
    if (!msgs) {
        return rl_errf(err, err_len, RL_ENOMEM, "out of memory");
    }
    for (size_t i = 0; i < n; i++) {
        json_t *m = json_array_get(list, i);
        json_t *role = json_object_get(m, "role"), *content = json_object_get(m, "content");
        // with tool calls, an assistant's content may be absent or null (OpenAI's shape)
        int calls = rich && json_is_array(json_object_get(m, "tool_calls")) &&
                    (!content || json_is_null(content));
        if (!json_is_string(role) || (!json_is_string(content) && !calls)) {
            rc = rl_errf(err, err_len, RL_EINVAL, "%s: messages[%zu].%s is missing or not a string",
                         where, i, json_is_string(role) ? "content" : "role");
            goto fail;
        }
        msgs[i].role = json_string_value(role);
        msgs[i].content = calls ? "" : json_string_value(content);
    }
#define S_RENDER(k, gen, out, n_out)                                                               \
    (rich ? s_render_rich(chat, list, tools, (k), (gen), (out), (n_out), sub, sizeof(sub))         \
          : rl_chat_render(chat, msgs, (k), (gen), (out), (n_out), sub, sizeof(sub)))
    rc = S_RENDER(0, 0, &prev, &n_prev);
    if (rc) {
        rc = rl_errf(err, err_len, rc, "%s: %s", where, sub);
        goto fail;
    }
    if (rich && n_prev > 0) { // what the template writes before any message (tools): context
        rc = s_append_text(d, tok, prev, n_prev, 0, where, err, err_len);
        if (rc) {
            goto fail;
        }
    }
    int any_loss = 0;
    for (size_t k = 0; k < n; k++) {
        int is_asst = strcmp(msgs[k].role, "assistant") == 0;
        rc = S_RENDER(k + 1, 0, &cur, &n_cur);
        if (!rc && is_asst) {
            rc = S_RENDER(k, 1, &head, &n_head);
        }
        if (rc) {
            rc = rl_errf(err, err_len, rc, "%s: %s", where, sub);
            goto fail;
        }
        if (!is_asst) {
            if (n_cur < n_prev || memcmp(cur, prev, n_prev) != 0) {
                rc = rl_errf(err, err_len, RL_EINVAL, "%s: chat rendering is not incremental",
                             where);
                goto fail;
            }
            rc = s_append_text(d, tok, cur + n_prev, n_cur - n_prev, 0, where, err, err_len);
        } else {
            if (n_head < n_prev || memcmp(head, prev, n_prev) != 0 || n_cur < n_head ||
                memcmp(cur, head, n_head) != 0) {
                rc = rl_errf(err, err_len, RL_EINVAL, "%s: chat rendering is not incremental",
                             where);
                goto fail;
            }
            size_t end = n_cur;
            while (end > n_head && (cur[end - 1] == '\n' || cur[end - 1] == ' ')) {
                end--;
            }
            rc = s_append_text(d, tok, head + n_prev, n_head - n_prev, 0, where, err, err_len);
            if (!rc) {
                rc = s_append_text(d, tok, cur + n_head, end - n_head, 1, where, err, err_len);
            }
            if (!rc && end < n_cur) {
                rc = s_append_text(d, tok, cur + end, n_cur - end, 0, where, err, err_len);
            }
            any_loss = 1;
        }
        if (rc) {
            goto fail;
        }
        free(prev);
        free(head);
        head = NULL;
        prev = cur;
        n_prev = n_cur;
        cur = NULL;
    }
    if (!any_loss) {
        rc = rl_errf(err, err_len, RL_EINVAL, "%s: messages hold no assistant turn to train on",
                     where);
    }
#undef S_RENDER
fail:
    free(prev);
    free(head);
    free(cur);
    free(msgs);
    return rc;
}

static int s_detect(json_t *row, const rl_data_opts_t *o, const char *where, char *err,
                    size_t err_len) {
    int pref = json_object_get(row, o->chosen_field) && json_object_get(row, o->rejected_field);
    if (o->pairs) {
        return pref ? RL_DATA_FORMAT_PREFERENCE
                    : rl_errf(err, err_len, RL_EINVAL,
                              "%s: not a preference row: it needs '%s' and '%s' (and '%s', or "
                              "conversations with a common prompt)",
                              where, o->chosen_field, o->rejected_field, o->prompt_field);
    }
    if (pref) {
        return rl_errf(err, err_len, RL_EINVAL,
                       "%s: a preference row ('%s', '%s'): that is data for DPO or a reward "
                       "model, not SFT",
                       where, o->chosen_field, o->rejected_field);
    }
    if (json_object_get(row, o->messages_field)) {
        return RL_DATA_FORMAT_MESSAGES;
    }
    if (json_object_get(row, o->prompt_field) && json_object_get(row, o->completion_field)) {
        return RL_DATA_FORMAT_PROMPT_COMPLETION;
    }
    if (json_object_get(row, o->text_field)) {
        return RL_DATA_FORMAT_TEXT;
    }
    return rl_errf(err, err_len, RL_EINVAL,
                   "%s: cannot tell the row layout: no '%s', no '%s' + '%s', no '%s' field "
                   "(set data.format)",
                   where, o->messages_field, o->prompt_field, o->completion_field, o->text_field);
}

// ---- preference rows ------------------------------------------------------------------------

// The messages of a JSON list into msgs[0..n) (borrowed from the list). Errors name the field.
static int s_msg_list(json_t *list, const char *field, rl_chat_msg_t **msgs_p, size_t *n_p,
                      const char *where, char *err, size_t err_len) {
    if (!json_is_array(list)) {
        return rl_errf(err, err_len, RL_EINVAL, "%s: field '%s' is not a list of messages", where,
                       field);
    }
    size_t n = json_array_size(list);
    rl_chat_msg_t *msgs = calloc(n ? n : 1, sizeof(*msgs));
    if (!msgs) {
        return rl_errf(err, err_len, RL_ENOMEM, "out of memory");
    }
    for (size_t i = 0; i < n; i++) {
        json_t *m = json_array_get(list, i);
        json_t *role = json_object_get(m, "role"), *content = json_object_get(m, "content");
        if (!json_is_string(role) || !json_is_string(content)) {
            free(msgs);
            return rl_errf(err, err_len, RL_EINVAL, "%s: %s[%zu].%s is missing or not a string",
                           where, field, i, json_is_string(role) ? "content" : "role");
        }
        msgs[i].role = json_string_value(role);
        msgs[i].content = json_string_value(content);
    }
    *msgs_p = msgs;
    *n_p = n;
    return 0;
}

// One side of a conversational pair: prompt[0..np) rendered with the assistant header (no loss),
// then the text the template adds for side[0..ns) (loss; trailing whitespace, such as ChatML's
// newline after <|im_end|>, without it).
static int s_pref_messages(rl_data_t *d, rl_tokenizer_t *tok, const rl_chat_msg_t *prompt,
                           size_t np, const rl_chat_msg_t *side, size_t ns, rl_chat_format_t chat,
                           const char *where, char *err, size_t err_len) {
    rl_chat_msg_t *all = calloc(np + ns + 1, sizeof(*all));
    char *head = NULL, *full = NULL, sub[512];
    size_t n_head = 0, n_full = 0;
    int rc = all ? 0 : RL_ENOMEM;
    if (rc) {
        return rl_errf(err, err_len, rc, "out of memory");
    }
    memcpy(all, prompt, np * sizeof(*all));
    memcpy(all + np, side, ns * sizeof(*all));
    rc = rl_chat_render(chat, prompt, np, 1, &head, &n_head, sub, sizeof sub);
    if (!rc) {
        rc = rl_chat_render(chat, all, np + ns, 0, &full, &n_full, sub, sizeof sub);
    }
    if (rc) {
        rc = rl_errf(err, err_len, rc, "%s: %s", where, sub);
    } else if (n_full <= n_head || memcmp(full, head, n_head) != 0) {
        rc = rl_errf(err, err_len, RL_EINVAL,
                     "%s: the completion does not follow the prompt's assistant header (does "
                     "it start with an assistant message?)",
                     where);
    }
    size_t end = n_full;
    while (!rc && end > n_head && (full[end - 1] == '\n' || full[end - 1] == ' ')) {
        end--;
    }
    if (!rc) {
        rc = s_append_text(d, tok, head, n_head, 0, where, err, err_len);
    }
    if (!rc) {
        rc = s_append_text(d, tok, full + n_head, end - n_head, 1, where, err, err_len);
    }
    if (!rc && end < n_full) {
        rc = s_append_text(d, tok, full + end, n_full - end, 0, where, err, err_len);
    }
    free(head);
    free(full);
    free(all);
    return rc;
}

static int s_same_msg(const rl_chat_msg_t *a, const rl_chat_msg_t *b) {
    return strcmp(a->role, b->role) == 0 && strcmp(a->content, b->content) == 0;
}

// Appends the chosen side (which = 0) or the rejected one (1) of a preference row as one
// example's tokens (not yet an example: s_push does that).
static int s_pref_side(rl_data_t *d, json_t *row, const rl_data_opts_t *o, rl_tokenizer_t *tok,
                       int which, const char *where, char *err, size_t err_len) {
    const char *field = which ? o->rejected_field : o->chosen_field;
    json_t *pv = json_object_get(row, o->prompt_field), *sv = json_object_get(row, field);
    json_t *other = json_object_get(row, which ? o->chosen_field : o->rejected_field);
    if (!sv) {
        return rl_errf(err, err_len, RL_EINVAL, "%s: field '%s' is missing", where, field);
    }
    if (json_is_string(sv)) {
        if (!pv || !json_is_string(pv)) {
            return rl_errf(err, err_len, RL_EINVAL,
                           "%s: field '%s' is %s; a string '%s' needs a string '%s' (implicit "
                           "prompts need conversations)",
                           where, o->prompt_field, pv ? "not a string" : "missing", field,
                           o->prompt_field);
        }
        int rc = s_append_text(d, tok, json_string_value(pv), json_string_length(pv), 0, where, err,
                               err_len);
        if (!rc) {
            rc = s_append_text(d, tok, json_string_value(sv), json_string_length(sv), 1, where, err,
                               err_len);
        }
        if (!rc && o->eos_id >= 0 && s_append_ids(d, &o->eos_id, 1, 1) != 0) {
            rc = rl_errf(err, err_len, RL_ENOMEM, "out of memory");
        }
        return rc;
    }
    if (o->chat == RL_CHAT_NONE) {
        return rl_errf(err, err_len, RL_EINVAL,
                       "%s: conversational rows need a chat format (model.chat_template: chatml "
                       "or llama3, or a tokenizer_config.json with a chat_template)",
                       where);
    }
    rl_chat_msg_t *side = NULL, *prompt = NULL, *oth = NULL;
    size_t ns = 0, np = 0, no = 0;
    int rc = s_msg_list(sv, field, &side, &ns, where, err, err_len);
    if (!rc && pv) {
        rc = s_msg_list(pv, o->prompt_field, &prompt, &np, where, err, err_len);
    } else if (!rc) {
        // implicit prompt: the messages chosen and rejected share from the start (TRL's
        // extract_prompt)
        rc = s_msg_list(other, which ? o->chosen_field : o->rejected_field, &oth, &no, where, err,
                        err_len);
        size_t k = 0;
        while (!rc && k < ns && k < no && s_same_msg(&side[k], &oth[k])) {
            k++;
        }
        if (!rc && (k == ns || k == no)) {
            rc = rl_errf(err, err_len, RL_EINVAL,
                         "%s: no '%s' field, and '%s' and '%s' do not differ after a common "
                         "prompt",
                         where, o->prompt_field, o->chosen_field, o->rejected_field);
        }
        prompt = side; // the common prefix, borrowed
        np = k;
    }
    if (!rc) {
        rc = s_pref_messages(d, tok, prompt, np, side + (pv ? 0 : np), ns - (pv ? 0 : np), o->chat,
                             where, err, err_len);
    }
    if (prompt != side) {
        free(prompt);
    }
    free(side);
    free(oth);
    return rc;
}

// Appends one row's example (or rolls it back when dropped). Returns 0, 1 when dropped, or an
// error.
static int s_push(rl_data_t *d, size_t start, const rl_data_opts_t *o, int line, const char *where,
                  char *err, size_t err_len);

// A preference row: two examples (chosen, rejected), both or neither.
static int s_pref_row(rl_data_t *d, json_t *row, const rl_data_opts_t *o, rl_tokenizer_t *tok,
                      int line, const char *where, char *err, size_t err_len) {
    size_t start = d->n_tok, n_ex = d->n_ex, dropped = d->dropped;
    int64_t loss = d->loss_tokens;
    json_t *mj = o->margin_field ? json_object_get(row, o->margin_field) : NULL;
    if (mj && (!json_is_number(mj) || !isfinite(json_number_value(mj)))) {
        return rl_errf(err, err_len, RL_EINVAL,
                       "%s: field '%s' (the pair's margin) is not a "
                       "finite number",
                       where, o->margin_field);
    }
    int rc = s_pref_side(d, row, o, tok, 0, where, err, err_len);
    if (!rc) {
        rc = s_push(d, start, o, line, where, err, err_len);
    }
    size_t mid = d->n_tok;
    if (rc == 0) {
        rc = s_pref_side(d, row, o, tok, 1, where, err, err_len);
        if (!rc) {
            rc = s_push(d, mid, o, line, where, err, err_len);
        }
    }
    if (rc) { // either side failed or was dropped: neither stays
        d->n_tok = start;
        d->n_ex = n_ex;
        d->loss_tokens = loss;
        d->dropped = dropped + (rc == 1);
    } else if (mj) {
        d->ex[n_ex].margin = d->ex[n_ex + 1].margin = json_number_value(mj);
        d->n_margin++;
    }
    return rc;
}

static int s_row(rl_data_t *d, json_t *row, const rl_data_opts_t *o, rl_tokenizer_t *tok, int line,
                 const char *where, char *err, size_t err_len) {
    size_t start = d->n_tok;
    int rc = 0;
    if (d->format == RL_DATA_FORMAT_PREFERENCE) {
        return s_pref_row(d, row, o, tok, line, where, err, err_len);
    }
    const char *a = NULL, *b = NULL;
    size_t na = 0, nb = 0;
    int conv = 0; // a conversational row: its end-of-turn token ends it, no EOS appended
    json_t *pl = json_object_get(row, o->prompt_field);
    json_t *cl = json_object_get(row, o->completion_field);
    switch (d->format) {
    case RL_DATA_FORMAT_PROMPT_COMPLETION:
        if (json_is_array(pl) || json_is_array(cl)) { // TRL's conversational prompt-completion
            conv = 1;
            if (o->chat == RL_CHAT_NONE) {
                rc = rl_errf(err, err_len, RL_EINVAL,
                             "%s: conversational rows need a chat format (model.chat_template: "
                             "chatml or llama3, or a tokenizer_config.json with a chat_template)",
                             where);
                break;
            }
            rl_chat_msg_t *pm = NULL, *cm = NULL;
            size_t np = 0, nc = 0;
            rc = s_msg_list(pl, o->prompt_field, &pm, &np, where, err, err_len);
            if (!rc) {
                rc = s_msg_list(cl, o->completion_field, &cm, &nc, where, err, err_len);
            }
            if (!rc) { // the prompt and its assistant header without loss, the reply with it
                rc = s_pref_messages(d, tok, pm, np, cm, nc, o->chat, where, err, err_len);
            }
            free(pm);
            free(cm);
            break;
        }
        rc = s_field(row, o->prompt_field, &a, &na, where, err, err_len);
        if (!rc) {
            rc = s_field(row, o->completion_field, &b, &nb, where, err, err_len);
        }
        if (!rc) {
            rc = s_append_text(d, tok, a, na, o->completion_only_loss ? 0 : 1, where, err, err_len);
        }
        if (!rc) {
            rc = s_append_text(d, tok, b, nb, 1, where, err, err_len);
        }
        break;
    case RL_DATA_FORMAT_TEXT:
        rc = s_field(row, o->text_field, &a, &na, where, err, err_len);
        if (!rc) {
            rc = s_append_text(d, tok, a, na, 1, where, err, err_len);
        }
        break;
    case RL_DATA_FORMAT_MESSAGES: {
        json_t *list = json_object_get(row, o->messages_field);
        if (!list) {
            rc = rl_errf(err, err_len, RL_EINVAL, "%s: field '%s' is missing", where,
                         o->messages_field);
        } else if (!json_is_array(list)) {
            rc = rl_errf(err, err_len, RL_EINVAL, "%s: field '%s' is not a list", where,
                         o->messages_field);
        } else if (o->chat == RL_CHAT_NONE) {
            rc = rl_errf(err, err_len, RL_EINVAL,
                         "%s: messages rows need a chat format (model.chat_template: chatml or "
                         "llama3, or a tokenizer_config.json with a chat_template)",
                         where);
        } else {
            rc = s_messages(d, tok, list, json_object_get(row, "tools"), o->chat, where, err,
                            err_len);
        }
        break;
    }
    default: rc = rl_errf(err, err_len, RL_EINVAL, "%s: unsupported row layout", where);
    }
    if (!rc && d->format != RL_DATA_FORMAT_MESSAGES && !conv && o->eos_id >= 0) {
        rc = s_append_ids(d, &o->eos_id, 1, 1);
        if (rc) {
            rc = rl_errf(err, err_len, rc, "out of memory");
        }
    }
    if (rc) {
        d->n_tok = start;
        return rc;
    }
    return s_push(d, start, o, line, where, err, err_len);
}

// Makes tokens [start, n_tok) an example (or rolls them back when too long). Returns 0, 1 when
// dropped, or an error.
static int s_push(rl_data_t *d, size_t start, const rl_data_opts_t *o, int line, const char *where,
                  char *err, size_t err_len) {
    size_t len = d->n_tok - start;
    if (len > (size_t)o->max_length) {
        d->n_tok = start;
        if (o->truncation == RL_DATA_TRUNC_ERROR) {
            return rl_errf(err, err_len, RL_EINVAL,
                           "%s: example has %zu tokens, more than data.max_length %d "
                           "(data.truncation: error; use drop to skip such rows)",
                           where, len, o->max_length);
        }
        d->dropped++;
        return 1;
    }
    if (len < 2) {
        // one token has nothing to predict: logp is defined from position 1 on
        d->n_tok = start;
        return rl_errf(err, err_len, RL_EINVAL,
                       "%s: example has %zu token%s; at least 2 are "
                       "needed",
                       where, len, len == 1 ? "" : "s");
    }
    d->mask[start] = 0; // the first token is never predicted
    if (d->n_ex == d->cap_ex) {
        size_t cap = d->cap_ex ? 2 * d->cap_ex : 256;
        s_example_t *e = realloc(d->ex, cap * sizeof(*e));
        if (!e) {
            return rl_errf(err, err_len, RL_ENOMEM, "out of memory");
        }
        d->ex = e;
        d->cap_ex = cap;
    }
    d->ex[d->n_ex++] = (s_example_t){start, (int)len, line, 0.0};
    for (size_t i = start; i < d->n_tok; i++) {
        d->loss_tokens += d->mask[i];
    }
    return 0;
}

rl_data_t *rl_data_load(const char *const *paths, int n_paths, const rl_data_opts_t *o,
                        rl_tokenizer_t *tok, char *err, size_t err_len) {
    rl_data_t *d = calloc(1, sizeof(*d));
    rl_jsonl_t *in = NULL;
    char where[600], path[4200];
    rl_jsonl_names(paths, n_paths, path, sizeof path);
    if (!d) {
        rl_errf(err, err_len, RL_ENOMEM, "out of memory");
        return NULL;
    }
    if (o->format == RL_DATA_FORMAT_PROMPT) {
        rl_errf(err, err_len, RL_EINVAL,
                "%s: data.format prompt holds prompts for RL (grpo); SFT needs "
                "prompt_completion, text or messages rows",
                path);
        goto fail;
    }
    if ((o->format == RL_DATA_FORMAT_PREFERENCE) != !!o->pairs &&
        o->format != RL_DATA_FORMAT_AUTO) {
        rl_errf(err, err_len, RL_EINVAL,
                o->pairs ? "%s: a preference dataset (DPO, reward models) needs preference rows "
                           "({prompt, chosen, rejected})"
                         : "%s: preference rows are data for DPO or a reward model, not SFT",
                path);
        goto fail;
    }
    d->format = o->format;
    int rc = rl_jsonl_open_list(paths, n_paths, 0, &in, err, err_len);
    if (rc) {
        if (rc > 0) {
            rl_errf(err, err_len, rc, "%s: cannot open: %s", path, strerror(rc));
        }
        goto fail;
    }
    json_t *row;
    while ((rc = rl_jsonl_next(in, &row)) == 1) {
        int lineno = (int)rl_jsonl_lineno(in);
        snprintf(where, sizeof(where), "%s:%d", rl_jsonl_path(in), lineno);
        if (d->format == RL_DATA_FORMAT_AUTO) {
            int fmt = s_detect(row, o, where, err, err_len);
            if (fmt < 0) {
                json_decref(row);
                goto fail;
            }
            d->format = fmt;
        }
        rc = s_row(d, row, o, tok, lineno, where, err, err_len);
        json_decref(row);
        if (rc < 0 || rc > 1) {
            goto fail;
        }
    }
    if (rc) {
        const json_error_t *je = rl_jsonl_json_error(in);
        if (je) {
            snprintf(where, sizeof(where), "%s:%ld", rl_jsonl_path(in), rl_jsonl_lineno(in));
            rl_errf(err, err_len, RL_EINVAL, "%s:%d: invalid JSON: %s", where, je->column,
                    je->text);
        } else {
            rl_errf(err, err_len, rc, "%s", rl_jsonl_errmsg(in));
        }
        goto fail;
    }
    if (d->n_ex == 0) {
        rl_errf(err, err_len, RL_EINVAL,
                "%s: no usable example (%zu rows dropped as longer "
                "than data.max_length %d)",
                path, d->dropped, o->max_length);
        goto fail;
    }
    if (d->loss_tokens == 0) {
        rl_errf(err, err_len, RL_EINVAL, "%s: no token carries the loss", path);
        goto fail;
    }
    if (d->n_margin > 0 && d->n_margin != d->n_ex / 2) {
        rl_errf(err, err_len, RL_EINVAL,
                "%s: %zu of %zu pairs have a '%s' field (a margin); give it to every pair or "
                "to none",
                path, d->n_margin, d->n_ex / 2, o->margin_field);
        goto fail;
    }
    rl_jsonl_destroy(&in);
    return d;
fail:
    rl_jsonl_destroy(&in);
    rl_data_destroy(&d);
    return NULL;
}

void rl_data_destroy(rl_data_t **self_p) {
    if (!self_p || !*self_p) {
        return;
    }
    rl_data_t *d = *self_p;
    free(d->tokens);
    free(d->mask);
    free(d->ex);
    free(d);
    *self_p = NULL;
}

size_t rl_data_count(const rl_data_t *self) {
    return self->n_ex;
}
int rl_data_margin(const rl_data_t *self, size_t i, double *margin) {
    *margin = self->ex[i].margin;
    return self->n_margin > 0;
}
size_t rl_data_dropped(const rl_data_t *self) {
    return self->dropped;
}
int rl_data_format(const rl_data_t *self) {
    return self->format;
}
int64_t rl_data_loss_tokens(const rl_data_t *self) {
    return self->loss_tokens;
}

void rl_data_example(const rl_data_t *self, size_t i, const int32_t **tokens_p,
                     const uint8_t **mask_p, int *len_p, int *line_p) {
    const s_example_t *e = &self->ex[i];
    if (tokens_p) {
        *tokens_p = self->tokens + e->off;
    }
    if (mask_p) {
        *mask_p = self->mask + e->off;
    }
    if (len_p) {
        *len_p = e->len;
    }
    if (line_p) {
        *line_p = e->line;
    }
}

// ---- sampler ---------------------------------------------------------------------------------

struct rl_data_sampler {
    size_t n; // examples per epoch
    uint64_t seed;
    int shuffle;
    rl_data_pos_t pos;
    size_t *perm; // (count) the order of pos.epoch
};

static void s_permute(rl_data_sampler_t *s) {
    size_t n = s->n;
    for (size_t i = 0; i < n; i++) {
        s->perm[i] = i;
    }
    if (!s->shuffle) {
        return;
    }
    // One stream per epoch: seed and epoch mixed through splitmix64 inside rl_rng_seed.
    rl_rng_t rng;
    rl_rng_seed(&rng, s->seed ^ (0x9E3779B97F4A7C15ull * (uint64_t)(s->pos.epoch + 1)));
    for (size_t i = n; i > 1; i--) {
        size_t j = (size_t)rl_rng_below(&rng, i);
        size_t t = s->perm[i - 1];
        s->perm[i - 1] = s->perm[j];
        s->perm[j] = t;
    }
}

rl_data_sampler_t *rl_data_sampler_new(const rl_data_t *data, uint64_t seed, int shuffle) {
    return rl_data_sampler_new_count(data->n_ex, seed, shuffle);
}

rl_data_sampler_t *rl_data_sampler_new_count(size_t count, uint64_t seed, int shuffle) {
    rl_data_sampler_t *s = calloc(1, sizeof(*s));
    if (!s) {
        return NULL;
    }
    s->perm = malloc((count ? count : 1) * sizeof(size_t));
    if (!s->perm) {
        free(s);
        return NULL;
    }
    s->n = count;
    s->seed = seed;
    s->shuffle = shuffle;
    s_permute(s);
    return s;
}

void rl_data_sampler_destroy(rl_data_sampler_t **self_p) {
    if (!self_p || !*self_p) {
        return;
    }
    free((*self_p)->perm);
    free(*self_p);
    *self_p = NULL;
}

size_t rl_data_sampler_next(rl_data_sampler_t *s) {
    if ((size_t)s->pos.index >= s->n) {
        s->pos.epoch++;
        s->pos.index = 0;
        s_permute(s);
    }
    return s->perm[s->pos.index++];
}

rl_data_pos_t rl_data_sampler_pos(const rl_data_sampler_t *s) {
    return s->pos;
}

int rl_data_sampler_seek(rl_data_sampler_t *s, rl_data_pos_t pos) {
    if (pos.epoch < 0 || pos.index < 0 || (uint64_t)pos.index > s->n) {
        return RL_EINVAL;
    }
    s->pos = pos;
    s_permute(s);
    return 0;
}

// ---- micro-batches -----------------------------------------------------------------------------

int rl_data_batch_fill(rl_data_batch_t *bt, const rl_data_t *d, const size_t *idx, int n) {
    int T = 1;
    for (int b = 0; b < n; b++) {
        int len = d->ex[idx[b]].len;
        T = len > T ? len : T;
    }
    size_t bt_n = (size_t)n * (size_t)T;
    if (bt_n > bt->cap_bt) {
        int32_t *t = realloc(bt->tokens, bt_n * sizeof(*t));
        if (!t) {
            return RL_ENOMEM;
        }
        bt->tokens = t;
        float *m = realloc(bt->mask, bt_n * sizeof(*m));
        if (!m) {
            return RL_ENOMEM;
        }
        bt->mask = m;
        bt->cap_bt = bt_n;
    }
    if ((size_t)n > bt->cap_b) {
        int *l = realloc(bt->lengths, (size_t)n * sizeof(*l));
        if (!l) {
            return RL_ENOMEM;
        }
        bt->lengths = l;
        bt->cap_b = (size_t)n;
    }
    bt->B = n;
    bt->T = T;
    for (int b = 0; b < n; b++) {
        const s_example_t *e = &d->ex[idx[b]];
        int32_t *tok = bt->tokens + (size_t)b * T;
        float *mask = bt->mask + (size_t)b * T;
        for (int t = 0; t < T; t++) {
            tok[t] = t < e->len ? d->tokens[e->off + t] : 0;
            mask[t] = t < e->len ? (float)d->mask[e->off + t] : 0.0f;
        }
        bt->lengths[b] = e->len;
    }
    return 0;
}

void rl_data_batch_free(rl_data_batch_t *bt) {
    free(bt->tokens);
    free(bt->mask);
    free(bt->lengths);
    memset(bt, 0, sizeof(*bt));
}
