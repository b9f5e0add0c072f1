// fuzz_tokenizer — libFuzzer target for rl_tokenizer encode + decode on arbitrary bytes, with the
// two hand-made fixtures (GPT-2 pattern via ByteLevel, Qwen pattern via Split + NFC).
// Invariants checked (abort on violation):
//   - encode of arbitrary bytes returns 0 or RL_EINVAL (invalid UTF-8), never crashes;
//   - encode of the U+FFFD-repaired bytes succeeds, and the hand-written split matchers give the
//     same ids as Oniguruma (RL_TOKENIZER_REF_BPE);
//   - decode of any in-range ids yields valid UTF-8.
#include "rl_err.h"
#include "rl_tokenizer.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static rl_tokenizer_t *s_tok[2];

static void s_load(void) {
    const char *files[2] = {RL_FIXTURES "/tokenizer/bpe_string_merges.json",
                            RL_FIXTURES "/tokenizer/bpe_list_merges.json"};
    for (int i = 0; i < 2; i++) {
        char err[512];
        s_tok[i] = rl_tokenizer_new(files[i], err, sizeof(err));
        if (!s_tok[i]) {
            fprintf(stderr, "fuzz_tokenizer: %s\n", err);
            abort();
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!s_tok[0]) {
        s_load();
    }
    if (size > 4096) {
        return 0;
    }
    rl_tokenizer_t *tok = s_tok[size & 1];
    int32_t *ids = NULL, *ref = NULL;
    size_t n = 0, nref = 0;
    int r = rl_tokenizer_encode(tok, (const char *)data, size, 0, &ids, &n);
    if (r != 0 && r != RL_EINVAL) {
        abort();
    }
    free(ids);
    char *fixed = malloc(3 * size + 1);
    size_t nf = rl_tokenizer_utf8_lossy(fixed, (const char *)data, size);
    r = rl_tokenizer_encode(tok, fixed, nf, 0, &ids, &n);
    int rr = rl_tokenizer_encode(tok, fixed, nf, RL_TOKENIZER_REF_BPE, &ref, &nref);
    if (r != 0 || rr != 0 || n != nref || (n && memcmp(ids, ref, n * sizeof(int32_t)) != 0)) {
        abort();
    }
    free(ref);
    free(ids);
    free(fixed);
    // the bytes as ids: every in-range id must decode to valid UTF-8
    size_t nid = size / 2;
    ids = malloc((nid ? nid : 1) * sizeof(int32_t));
    int32_t V = rl_tokenizer_vocab_size(tok);
    for (size_t i = 0; i < nid; i++) {
        ids[i] = (int32_t)((data[2 * i] | (data[2 * i + 1] << 8)) % (uint32_t)(V + 2));
    }
    char *text = NULL;
    size_t len = 0;
    r = rl_tokenizer_decode(tok, ids, nid, (int)(size & 2) ? RL_TOKENIZER_SKIP_SPECIAL : 0, &text,
                            &len);
    if (r == 0 && rl_tokenizer_utf8_valid_prefix(text, len) != len) {
        abort();
    }
    if (r != 0 && r != RL_EINVAL) {
        abort();
    }
    free(text);
    free(ids);
    return 0;
}
