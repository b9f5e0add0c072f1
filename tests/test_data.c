// test_data — SFT rows to tokens and masks (prompt/completion, text, messages), preference rows
// (strings, conversational with an explicit or an implicit prompt) as chosen/rejected example
// pairs, the EOS rule,
// max_length policies, error messages with file:line, the seeded epoch order and its
// position, and micro-batch padding. The fixture tokenizer has one token per byte
// (tests/fixtures/data/README.md), so expected ids are written by hand.
#define _GNU_SOURCE // memmem
#include "rl_chat.h"
#include "rl_data.h"
#include "rl_err.h"
#include "rl_prompts.h"
#include "rl_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FIX RL_FIXTURES "/data/"
enum { EOS = 258, IM_START = 257, IM_END = 258 };

static rl_tokenizer_t *s_tok;

static rl_data_t *s_load(const char *file, const rl_data_opts_t *o, char *err, size_t n) {
    return rl_data_load(&file, 1, o, s_tok, err, n);
}

static void s_check_example(const rl_data_t *d, size_t i, const int32_t *ids, const char *mask,
                            int n, int line) {
    const int32_t *t;
    const uint8_t *m;
    int len, ln;
    rl_data_example(d, i, &t, &m, &len, &ln);
    CHECK_INT(len, n);
    CHECK_INT(ln, line);
    for (int k = 0; k < n && k < len; k++) {
        CHECK_MSG(t[k] == ids[k], "example %zu token %d: %d != %d", i, k, t[k], ids[k]);
        CHECK_MSG(m[k] == (mask[k] == '1'), "example %zu mask %d", i, k);
    }
}

static void test_prompt_completion(void) {
    char err[1024];
    rl_data_opts_t o;
    rl_data_opts_default(&o);
    o.eos_id = EOS;
    rl_data_t *d = s_load(FIX "pc.jsonl", &o, err, sizeof(err));
    CHECK_MSG(d != NULL, "%s", err);
    if (!d) {
        return;
    }
    CHECK_INT(rl_data_format(d), RL_DATA_FORMAT_PROMPT_COMPLETION);
    CHECK_INT(rl_data_count(d), 3);
    // "ab" + "cd" + EOS: loss on the completion and EOS only
    s_check_example(d, 0, (const int32_t[]){'a', 'b', 'c', 'd', EOS}, "00111", 5, 1);
    // line 2 is empty and skipped; "1+1=" + "2"
    s_check_example(d, 1, (const int32_t[]){'1', '+', '1', '=', '2', EOS}, "000011", 6, 3);
    // "é" is two bytes (0xC3 0xA9); " z" stays " z" (encoded apart: no merge with the prompt)
    s_check_example(d, 2, (const int32_t[]){0xC3, 0xA9, ' ', 'z', EOS}, "00111", 5, 4);
    CHECK_INT(rl_data_loss_tokens(d), 3 + 2 + 3);
    rl_data_destroy(&d);
    CHECK(d == NULL);
    rl_data_destroy(&d);

    // a list (data.train: [a, b]) reads its files one after another: pc.jsonl twice is its
    // three examples twice, in order
    d = rl_data_load((const char *[]){FIX "pc.jsonl", FIX "pc.jsonl"}, 2, &o, s_tok, err,
                     sizeof err);
    CHECK_MSG(d != NULL, "%s", err);
    if (d) {
        CHECK_INT(rl_data_count(d), 6);
        s_check_example(d, 3, (const int32_t[]){'a', 'b', 'c', 'd', EOS}, "00111", 5, 1);
        s_check_example(d, 5, (const int32_t[]){0xC3, 0xA9, ' ', 'z', EOS}, "00111", 5, 4);
        rl_data_destroy(&d);
    }

    // completion_only_loss off: every token after the first; no EOS configured
    o.completion_only_loss = 0;
    o.eos_id = -1;
    d = s_load(FIX "pc.jsonl", &o, err, sizeof(err));
    CHECK(d != NULL);
    if (d) {
        s_check_example(d, 0, (const int32_t[]){'a', 'b', 'c', 'd'}, "0111", 4, 1);
        rl_data_destroy(&d);
    }
    // custom field names
    rl_data_opts_default(&o);
    o.prompt_field = "prompt";
    o.completion_field = "answer";
    o.format = RL_DATA_FORMAT_PROMPT_COMPLETION;
    d = s_load(FIX "pc.jsonl", &o, err, sizeof(err));
    CHECK(d == NULL); // line 3 has no "answer"
    CHECK_CONTAINS(err, "pc.jsonl:3: field 'answer' is missing");
}

static void test_text(void) {
    char err[1024];
    rl_data_opts_t o;
    rl_data_opts_default(&o);
    o.eos_id = EOS;
    rl_data_t *d = s_load(FIX "text.jsonl", &o, err, sizeof(err));
    CHECK_MSG(d != NULL, "%s", err);
    if (!d) {
        return;
    }
    CHECK_INT(rl_data_format(d), RL_DATA_FORMAT_TEXT);
    s_check_example(d, 0, (const int32_t[]){'h', 'e', 'l', 'l', 'o', EOS}, "011111", 6, 1);
    s_check_example(d, 1, (const int32_t[]){'a', ' ', 'b', EOS}, "0111", 4, 2);
    rl_data_destroy(&d);
}

static void test_messages(void) {
    char err[1024];
    rl_data_opts_t o;
    rl_data_opts_default(&o);
    o.eos_id = EOS;
    rl_data_t *d = s_load(FIX "messages.jsonl", &o, err, sizeof(err));
    CHECK(d == NULL); // no chat format
    CHECK_CONTAINS(err, "messages.jsonl:1: messages rows need a chat format");
    o.chat = RL_CHAT_CHATML;
    d = s_load(FIX "messages.jsonl", &o, err, sizeof(err));
    CHECK_MSG(d != NULL, "%s", err);
    if (!d) {
        return;
    }
    CHECK_INT(rl_data_format(d), RL_DATA_FORMAT_MESSAGES);
    // <|im_start|>user\nhi<|im_end|>\n <|im_start|>assistant\n [yo<|im_end|>] \n
    const int32_t ids[] = {IM_START, 'u', 's', 'e', 'r', '\n', 'h', 'i', IM_END, '\n',
                           IM_START, 'a', 's', 's', 'i', 's', 't', 'a', 'n', 't', '\n',
                           'y', 'o', IM_END, '\n'};
    s_check_example(d, 0, ids, "0000000000000000000001110", 25, 1);
    // two assistant turns both train; no EOS appended (the end-of-turn token ends the turn)
    const int32_t *t;
    const uint8_t *m;
    int len;
    rl_data_example(d, 1, &t, &m, &len, NULL);
    int ones = 0;
    for (int k = 0; k < len; k++) {
        ones += m[k];
    }
    CHECK_INT(ones, 4); // "a" + <|im_end|>, "b" + <|im_end|>
    CHECK_INT(t[len - 1], '\n');
    CHECK_INT(t[len - 2], IM_END);
    CHECK_INT(m[len - 2], 1);
    rl_data_destroy(&d);
}

// Messages with tools (TRL's tool-calling SFT rows): `tools` and an assistant turn of
// `tool_calls` (content null) reach the model's template, which writes them; the loss covers the
// assistant's turns only (the call's text included), not the tools line, the user's or the
// tool's answer.
static void test_messages_tools(void) {
    static const char tmpl[] =
        "{% if tools %}<|im_start|>system\ntools:{% for t in tools %} {{ t.function.name }}"
        "{% endfor %}<|im_end|>\n{% endif %}{% for m in messages %}<|im_start|>{{ m.role }}\n"
        "{% if m.content %}{{ m.content }}{% endif %}{% for c in m.tool_calls or [] %}"
        "<tool_call>{{ c.function.name }} {{ c.function.arguments }}</tool_call>{% endfor %}"
        "<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}";
    rl_chat_format_t fmt;
    char err[1024];
    CHECK_INT(rl_chat_template(tmpl, "test", NULL, NULL, NULL, &fmt, err, sizeof err), 0);
    FILE *f = fopen(RL_BINARY_DIR "/tests/data_tools.jsonl", "w");
    CHECK(f != NULL);
    if (!f) {
        return;
    }
    fputs("{\"messages\": [{\"role\": \"user\", \"content\": \"q\"}, {\"role\": \"assistant\", "
          "\"content\": null, \"tool_calls\": [{\"id\": \"c0\", \"type\": \"function\", "
          "\"function\": {\"name\": \"calc\", \"arguments\": \"1+1\"}}]}, {\"role\": \"tool\", "
          "\"tool_call_id\": \"c0\", \"content\": \"2\"}, {\"role\": \"assistant\", \"content\": "
          "\"#### 2\"}], \"tools\": [{\"type\": \"function\", \"function\": {\"name\": "
          "\"calc\"}}]}\n",
          f);
    fclose(f);
    rl_data_opts_t o;
    rl_data_opts_default(&o);
    o.eos_id = EOS;
    o.chat = fmt;
    rl_data_t *d = s_load(RL_BINARY_DIR "/tests/data_tools.jsonl", &o, err, sizeof err);
    CHECK_MSG(d != NULL, "%s", err);
    if (!d) {
        return;
    }
    const int32_t *t;
    const uint8_t *m;
    int len;
    rl_data_example(d, 0, &t, &m, &len, NULL);
    // the text (one token per byte; the chat tokens as markers) and what is trained
    char all[512] = "", trained[512] = "";
    size_t na = 0, nt = 0;
    for (int k = 0; k < len && na + 16 < sizeof all; k++) {
        const char *s = t[k] == IM_START ? "<S>" : t[k] == IM_END ? "<E>" : NULL;
        char one[2] = {(char)t[k], 0};
        na += (size_t)snprintf(all + na, sizeof all - na, "%s", s ? s : one);
        if (m[k]) {
            nt += (size_t)snprintf(trained + nt, sizeof trained - nt, "%s", s ? s : one);
        }
    }
    CHECK_STR(all, "<S>system\ntools: calc<E>\n<S>user\nq<E>\n<S>assistant\n<tool_call>calc "
                   "1+1</tool_call><E>\n<S>tool\n2<E>\n<S>assistant\n#### 2<E>\n");
    CHECK_STR(trained, "<tool_call>calc 1+1</tool_call><E>#### 2<E>");
    rl_data_destroy(&d);
}

// Preference rows: two examples a row (chosen, then rejected), loss on the completion; a pair
// whose longer side exceeds max_length is dropped whole; SFT refuses such rows and a preference
// dataset refuses others; implicit prompts need conversations.
static void test_preference(void) {
    char err[1024];
    rl_data_opts_t o;
    rl_data_opts_default(&o);
    o.eos_id = EOS;
    o.pairs = 1;
    o.max_length = 12;
    rl_data_t *d = s_load(FIX "pref.jsonl", &o, err, sizeof(err));
    CHECK_MSG(d != NULL, "%s", err);
    if (d) {
        CHECK_INT(rl_data_format(d), RL_DATA_FORMAT_PREFERENCE);
        // row 3's chosen and row 4's rejected are too long: both pairs are dropped whole
        CHECK_INT(rl_data_count(d), 4);
        CHECK_INT(rl_data_dropped(d), 2);
        s_check_example(d, 0, (const int32_t[]){'1', '+', '1', '=', '2', EOS}, "000011", 6, 1);
        s_check_example(d, 1, (const int32_t[]){'1', '+', '1', '=', '3', EOS}, "000011", 6, 1);
        s_check_example(d, 2, (const int32_t[]){'a', 'b', 'c', 'd', EOS}, "00111", 5, 2);
        s_check_example(d, 3, (const int32_t[]){'a', 'b', 'x', 'y', 'z', EOS}, "001111", 6, 2);
        CHECK_INT(rl_data_loss_tokens(d), 2 + 2 + 3 + 4);
        rl_data_destroy(&d);
    }
    // max_length error names the row
    o.truncation = RL_DATA_TRUNC_ERROR;
    d = s_load(FIX "pref.jsonl", &o, err, sizeof(err));
    CHECK(d == NULL);
    CHECK_CONTAINS(err, "pref.jsonl:3: example has");
    o.truncation = RL_DATA_TRUNC_DROP;
    o.max_length = 1024;
    // conversational: explicit prompt; implicit prompt (the common first message)
    d = s_load(FIX "pref_chat.jsonl", &o, err, sizeof(err));
    CHECK(d == NULL);
    CHECK_CONTAINS(err, "pref_chat.jsonl:1: conversational rows need a chat format");
    o.chat = RL_CHAT_CHATML;
    d = s_load(FIX "pref_chat.jsonl", &o, err, sizeof(err));
    CHECK_MSG(d != NULL, "%s", err);
    if (d) {
        CHECK_INT(rl_data_count(d), 4);
        // <|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n [yo<|im_end|>] \n
        const int32_t yo[] = {IM_START, 'u', 's', 'e', 'r', '\n', 'h', 'i', IM_END, '\n',
                              IM_START, 'a', 's', 's', 'i', 's', 't', 'a', 'n', 't', '\n',
                              'y', 'o', IM_END, '\n'};
        s_check_example(d, 0, yo, "0000000000000000000001110", 25, 1);
        int32_t no[25];
        memcpy(no, yo, sizeof no);
        no[21] = 'n';
        s_check_example(d, 1, no, "0000000000000000000001110", 25, 1);
        // implicit: the prompt is the shared user turn; "ok" / "bad" carry the loss
        const int32_t *t;
        const uint8_t *m;
        int len;
        rl_data_example(d, 2, &t, &m, &len, NULL);
        CHECK(len == 25 && t[21] == 'o' && t[22] == 'k' && m[20] == 0 && m[21] == 1 &&
              m[23] == 1 && m[24] == 0);
        rl_data_example(d, 3, &t, &m, &len, NULL);
        CHECK(len == 26 && t[21] == 'b' && m[21] == 1 && m[24] == 1 && m[25] == 0);
        rl_data_destroy(&d);
    }
    // a string pair without a prompt; SFT refuses preference rows; DPO refuses SFT rows
    d = s_load(FIX "pref_bad.jsonl", &o, err, sizeof(err));
    CHECK(d == NULL);
    CHECK_CONTAINS(err, "pref_bad.jsonl:2: field 'prompt' is missing; a string 'chosen' needs a "
                        "string 'prompt'");
    o.pairs = 0;
    d = s_load(FIX "pref.jsonl", &o, err, sizeof(err));
    CHECK(d == NULL);
    CHECK_CONTAINS(err, "pref.jsonl:1: a preference row ('chosen', 'rejected'): that is data for "
                        "DPO or a reward model, not SFT");
    o.pairs = 1;
    d = s_load(FIX "pc.jsonl", &o, err, sizeof(err));
    CHECK(d == NULL);
    CHECK_CONTAINS(err, "pc.jsonl:1: not a preference row");
}

static void test_max_length(void) {
    char err[1024];
    rl_data_opts_t o;
    rl_data_opts_default(&o);
    o.eos_id = EOS;
    o.max_length = 12; // rows are 5, 17, 3, 12 tokens
    o.truncation = RL_DATA_TRUNC_DROP;
    rl_data_t *d = s_load(FIX "long.jsonl", &o, err, sizeof(err));
    CHECK_MSG(d != NULL, "%s", err);
    if (d) {
        CHECK_INT(rl_data_count(d), 3);
        CHECK_INT(rl_data_dropped(d), 1);
        int line;
        rl_data_example(d, 1, NULL, NULL, NULL, &line);
        CHECK_INT(line, 3); // the row after the dropped one keeps its own line
        rl_data_destroy(&d);
    }
    o.truncation = RL_DATA_TRUNC_ERROR;
    d = s_load(FIX "long.jsonl", &o, err, sizeof(err));
    CHECK(d == NULL);
    CHECK_CONTAINS(err, "long.jsonl:2: example has 17 tokens, more than data.max_length 12");
    o.truncation = RL_DATA_TRUNC_DROP;
    o.max_length = 2;
    d = s_load(FIX "long.jsonl", &o, err, sizeof(err));
    CHECK(d == NULL);
    CHECK_CONTAINS(err, "no usable example (4 rows dropped");
}

static void test_errors(void) {
    char err[1024];
    rl_data_opts_t o;
    rl_data_opts_default(&o);
    rl_data_t *d = s_load(FIX "bad_json.jsonl", &o, err, sizeof(err));
    CHECK(d == NULL);
    CHECK_CONTAINS(err, "bad_json.jsonl:2:");
    CHECK_CONTAINS(err, "invalid JSON");
    d = s_load(FIX "missing_field.jsonl", &o, err, sizeof(err));
    CHECK(d == NULL);
    CHECK_CONTAINS(err, "missing_field.jsonl:3: field 'completion' is missing");
    d = s_load(FIX "wrong_type.jsonl", &o, err, sizeof(err));
    CHECK(d == NULL);
    CHECK_CONTAINS(err, "wrong_type.jsonl:2: field 'completion' is not a string");
    d = s_load(FIX "not_object.jsonl", &o, err, sizeof(err));
    CHECK(d == NULL);
    CHECK_CONTAINS(err, "not_object.jsonl:1: a row must be a JSON object");
    d = s_load(FIX "unknown_layout.jsonl", &o, err, sizeof(err));
    CHECK(d == NULL);
    CHECK_CONTAINS(err, "unknown_layout.jsonl:1: cannot tell the row layout");
    d = s_load(FIX "no_such_file.jsonl", &o, err, sizeof(err));
    CHECK(d == NULL);
    CHECK_CONTAINS(err, "no_such_file.jsonl: cannot open");
    o.format = RL_DATA_FORMAT_PROMPT;
    d = s_load(FIX "pc.jsonl", &o, err, sizeof(err));
    CHECK(d == NULL);
    CHECK_CONTAINS(err, "grpo");
    o.format = RL_DATA_FORMAT_TEXT;
    d = s_load(FIX "pc.jsonl", &o, err, sizeof(err));
    CHECK(d == NULL);
    CHECK_CONTAINS(err, "pc.jsonl:1: field 'text' is missing");
}

static void test_sampler(void) {
    char err[1024];
    rl_data_opts_t o;
    rl_data_opts_default(&o);
    o.max_length = 100;
    rl_data_t *d = s_load(FIX "long.jsonl", &o, err, sizeof(err));
    CHECK(d != NULL);
    if (!d) {
        return;
    }
    size_t n = rl_data_count(d);
    // no shuffle: file order, epoch after epoch
    rl_data_sampler_t *s = rl_data_sampler_new(d, 7, 0);
    for (size_t k = 0; k < 2 * n; k++) {
        CHECK_INT(rl_data_sampler_next(s), k % n);
    }
    rl_data_sampler_destroy(&s);
    CHECK(s == NULL);
    // shuffled: each epoch a permutation; different epochs (likely) differ; same seed repeats
    enum { STEPS = 40 };
    size_t a[STEPS], b[STEPS];
    rl_data_pos_t mid = {0, 0};
    s = rl_data_sampler_new(d, 1234, 1);
    for (int k = 0; k < STEPS; k++) {
        if (k == 13) {
            mid = rl_data_sampler_pos(s);
        }
        a[k] = rl_data_sampler_next(s);
    }
    CHECK_INT(mid.epoch, 3);
    CHECK_INT(mid.index, 1);
    int seen[4] = {0};
    for (int k = 0; k < 4; k++) {
        seen[a[k]]++;
    }
    CHECK(seen[0] == 1 && seen[1] == 1 && seen[2] == 1 && seen[3] == 1);
    int differs = 0;
    for (int e = 1; e < STEPS / 4; e++) {
        differs |= memcmp(a, a + 4 * e, 4 * sizeof(size_t)) != 0;
    }
    CHECK(differs);
    rl_data_sampler_t *s2 = rl_data_sampler_new(d, 1234, 1);
    for (int k = 0; k < STEPS; k++) {
        b[k] = rl_data_sampler_next(s2);
    }
    CHECK(memcmp(a, b, sizeof(a)) == 0);
    // resume from the saved position: a fresh sampler seeks and yields the same tail
    rl_data_sampler_t *s3 = rl_data_sampler_new(d, 1234, 1);
    CHECK_INT(rl_data_sampler_seek(s3, mid), 0);
    for (int k = 13; k < STEPS; k++) {
        CHECK_INT(rl_data_sampler_next(s3), a[k]);
    }
    // another seed, another order
    rl_data_sampler_t *s4 = rl_data_sampler_new(d, 99, 1);
    for (int k = 0; k < STEPS; k++) {
        b[k] = rl_data_sampler_next(s4);
    }
    CHECK(memcmp(a, b, sizeof(a)) != 0);
    CHECK_INT(rl_data_sampler_seek(s4, (rl_data_pos_t){0, 5}), RL_EINVAL);
    CHECK_INT(rl_data_sampler_seek(s4, (rl_data_pos_t){-1, 0}), RL_EINVAL);
    CHECK_INT(rl_data_sampler_seek(s4, (rl_data_pos_t){2, 4}), 0); // end of an epoch is legal
    rl_data_sampler_destroy(&s);
    rl_data_sampler_destroy(&s2);
    rl_data_sampler_destroy(&s3);
    rl_data_sampler_destroy(&s4);
    rl_data_destroy(&d);
}

static void test_batch(void) {
    char err[1024];
    rl_data_opts_t o;
    rl_data_opts_default(&o);
    o.eos_id = EOS;
    rl_data_t *d = s_load(FIX "pc.jsonl", &o, err, sizeof(err));
    CHECK(d != NULL);
    if (!d) {
        return;
    }
    rl_data_batch_t bt = {0};
    size_t idx[3] = {2, 1, 0};
    CHECK_INT(rl_data_batch_fill(&bt, d, idx, 3), 0);
    CHECK_INT(bt.B, 3);
    CHECK_INT(bt.T, 6);
    CHECK_INT(bt.lengths[0], 5);
    CHECK_INT(bt.lengths[1], 6);
    CHECK_INT(bt.lengths[2], 5);
    // row 0 = example 2, padded with token 0 and mask 0
    CHECK_INT(bt.tokens[0], 0xC3);
    CHECK_INT(bt.tokens[4], EOS);
    CHECK_INT(bt.tokens[5], 0);
    CHECK(bt.mask[5] == 0.0f && bt.mask[4] == 1.0f && bt.mask[1] == 0.0f);
    CHECK_INT(bt.tokens[6 + 5], EOS);
    CHECK(bt.mask[6 + 5] == 1.0f);
    // a smaller batch reuses the buffers
    int32_t *keep = bt.tokens;
    CHECK_INT(rl_data_batch_fill(&bt, d, idx + 2, 1), 0);
    CHECK(bt.tokens == keep);
    CHECK_INT(bt.B, 1);
    CHECK_INT(bt.T, 5);
    rl_data_batch_free(&bt);
    CHECK(bt.tokens == NULL);
    rl_data_destroy(&d);
}

// GRPO's prompts from a `messages` field: the conversation's last assistant reply (the answer)
// is never part of the prompt; earlier turns are, and the prompt ends with the assistant header.
static void test_prompt_messages(void) {
    char err[1024];
    rl_prompts_t *p = rl_prompts_load((const char *[]){FIX "messages.jsonl"}, 1, "messages", s_tok,
                                      RL_CHAT_CHATML, 1000, RL_DATA_TRUNC_ERROR, err, sizeof err);
    CHECK_MSG(p != NULL, "%s", err);
    if (!p) {
        return;
    }
    CHECK_INT((int)rl_prompts_count(p), 2);
    const rl_prompt_t *a = rl_prompts_get(p, 0), *b = rl_prompts_get(p, 1);
    const char *want_a = "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n";
    CHECK_MSG(a->text_len == strlen(want_a) && memcmp(a->text, want_a, a->text_len) == 0,
              "row 1's prompt: %.*s", (int)a->text_len, a->text);
    const char *tail_b = "<|im_start|>user\nr<|im_end|>\n<|im_start|>assistant\n";
    size_t tb = strlen(tail_b);
    CHECK_MSG(b->text_len > tb && memcmp(b->text + b->text_len - tb, tail_b, tb) == 0 &&
                  memmem(b->text, b->text_len, "\na<|im_end|>", 12) != NULL &&
                  memmem(b->text, b->text_len, "\nb<|im_end|>", 12) == NULL,
              "row 2's prompt leaks or loses a turn: %.*s", (int)b->text_len, b->text);
    rl_prompts_destroy(&p);
    // a row without the prompt field but with messages (TRL's conversational rows): the same
    p = rl_prompts_load((const char *[]){FIX "messages.jsonl"}, 1, "prompt", s_tok, RL_CHAT_CHATML,
                        1000, RL_DATA_TRUNC_ERROR, err, sizeof err);
    CHECK_MSG(p != NULL, "%s", err);
    if (p) {
        a = rl_prompts_get(p, 0);
        CHECK_MSG(a->text_len == strlen(want_a) && memcmp(a->text, want_a, a->text_len) == 0,
                  "row 1's prompt from messages: %.*s", (int)a->text_len, a->text);
        rl_prompts_destroy(&p);
    }
    // a list of files (data.train: [a, b]): each prompt knows its file and line
    p = rl_prompts_load((const char *[]){FIX "messages.jsonl", FIX "pc.jsonl"}, 2, "prompt", s_tok,
                        RL_CHAT_CHATML, 1000, RL_DATA_TRUNC_ERROR, err, sizeof err);
    CHECK_MSG(p != NULL, "%s", err);
    if (p) {
        CHECK_INT((int)rl_prompts_count(p), 5);
        a = rl_prompts_get(p, 1);
        b = rl_prompts_get(p, 3); // pc.jsonl's second row: line 3 (line 2 is blank)
        CHECK_STR(a->file, FIX "messages.jsonl");
        CHECK_STR(b->file, FIX "pc.jsonl");
        CHECK_INT(b->line, 3);
        CHECK_MSG(b->text_len == 4 && memcmp(b->text, "1+1=", 4) == 0, "%.*s", (int)b->text_len,
                  b->text);
        rl_prompts_destroy(&p);
    }
}

// TRL's conversational prompt-completion rows for SFT: the prompt's messages and the assistant
// header without loss, the reply's text and end of turn with it, no EOS appended.
static void test_prompt_completion_chat(void) {
    char err[1024];
    rl_data_opts_t o;
    rl_data_opts_default(&o);
    o.eos_id = EOS;
    o.chat = RL_CHAT_CHATML;
    rl_data_t *d = s_load(FIX "pc_chat.jsonl", &o, err, sizeof(err));
    CHECK_MSG(d != NULL, "%s", err);
    if (!d) {
        return;
    }
    CHECK_INT(rl_data_format(d), RL_DATA_FORMAT_PROMPT_COMPLETION);
    const int32_t ids[] = {IM_START, 'u',      's',  'e', 'r', '\n',   'h', 'i', IM_END,
                           '\n',     IM_START, 'a',  's', 's', 'i',    's', 't', 'a',
                           'n',      't',      '\n', 'y', 'o', IM_END, '\n'};
    s_check_example(d, 0, ids, "0000000000000000000001110", 25, 1);
    rl_data_destroy(&d);
    o.chat = RL_CHAT_NONE;
    d = s_load(FIX "pc_chat.jsonl", &o, err, sizeof(err));
    CHECK(d == NULL);
    CHECK_CONTAINS(err, "pc_chat.jsonl:1: conversational rows need a chat format");
}

int main(void) {
    char err[512];
    s_tok = rl_tokenizer_new_dir(FIX "tok", err, sizeof(err));
    RL_TEST_ASSERT_FILE(s_tok, err);
    CHECK_INT(rl_tokenizer_eos_id(s_tok), EOS);
    RL_TEST_RUN(test_prompt_completion);
    RL_TEST_RUN(test_text);
    RL_TEST_RUN(test_messages);
    RL_TEST_RUN(test_messages_tools);
    RL_TEST_RUN(test_prompt_messages);
    RL_TEST_RUN(test_prompt_completion_chat);
    RL_TEST_RUN(test_preference);
    RL_TEST_RUN(test_max_length);
    RL_TEST_RUN(test_errors);
    RL_TEST_RUN(test_sampler);
    RL_TEST_RUN(test_batch);
    rl_tokenizer_destroy(&s_tok);
    RL_TEST_DONE();
}
