// fuzz_tokenizer_load — libFuzzer target for the rl_tokenizer *loader*: arbitrary bytes as
// tokenizer.json text (rl_tokenizer_new_from_json), then a short encode/decode on whatever
// loads. fuzz_tokenizer covers encode on fixed, trusted files; this one covers the file itself,
// which comes from a model folder and is untrusted. Run with -rss_limit_mb=2048 (ctest does),
// which also caps single allocations, so a loader that sizes tables from a number in the file
// fails here.
// Invariants checked (abort on violation):
//   - a refusal always says why (err is not empty);
//   - the id tables stay proportional to the input: vocab_size <= 2 * size + 1024 (the bound
//     is 2 x entries + 1024, and every entry takes several bytes of JSON);
//   - encode of a fixed valid text returns 0 or RL_EUNSUPPORTED (add_special_tokens with an
//     unsupported post-processor), and the fast paths give the ids of the reference paths;
//   - every encoded id is one the tokenizer knows, and decode of all known ids is valid UTF-8.
#include "rl_err.h"
#include "rl_tokenizer.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

// Exercises a loaded tokenizer on a text with letters, digits, spaces, newlines, a composed and
// a decomposed accent, and the added-token spellings of the seeds.
static void s_use(rl_tokenizer_t *tok) {
    static const char text[] = "hi <s>Hello, world! 123\n\n  caf\xC3\xA9 cafe\xCC\x81 <|end|> x y";
    for (int flags = 0; flags <= RL_TOKENIZER_ADD_SPECIAL; flags += RL_TOKENIZER_ADD_SPECIAL) {
        int32_t *ids = NULL, *ref = NULL;
        size_t n = 0, nref = 0;
        int r = rl_tokenizer_encode(tok, text, sizeof(text) - 1, flags, &ids, &n);
        int rr = rl_tokenizer_encode(tok, text, sizeof(text) - 1, flags | RL_TOKENIZER_REF_BPE,
                                     &ref, &nref);
        if ((r != 0 && r != RL_EUNSUPPORTED) || r != rr || n != nref ||
            (n && memcmp(ids, ref, n * sizeof(int32_t)) != 0)) {
            fprintf(stderr, "fuzz_tokenizer_load: encode rc %d/%d, %zu/%zu ids: %s\n", r, rr, n,
                    nref, rl_tokenizer_errmsg(tok));
            abort();
        }
        for (size_t i = 0; i < n; i++) {
            if (!rl_tokenizer_id_to_token(tok, ids[i])) {
                abort();
            }
        }
        free(ids);
        free(ref);
    }
    int32_t V = rl_tokenizer_vocab_size(tok);
    int32_t m = V < 4096 ? V : 4096;
    int32_t *all = malloc((size_t)(m ? m : 1) * sizeof(int32_t));
    if (!all) {
        return;
    }
    for (int32_t i = 0; i < m; i++) {
        all[i] = i;
    }
    char *out = NULL;
    size_t len = 0;
    int r = rl_tokenizer_decode_known(tok, all, (size_t)m, 0, &out, &len);
    if (r != 0 || rl_tokenizer_utf8_valid_prefix(out, len) != len) {
        abort();
    }
    free(out);
    free(all);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > 1 << 16) { // larger files add nothing the mutator can reach in a short run
        return 0;
    }
    char err[512];
    err[0] = '\0';
    rl_tokenizer_t *tok =
        rl_tokenizer_new_from_json((const char *)data, size, "fuzz.json", err, sizeof(err));
    if (!tok) {
        if (!err[0]) {
            abort();
        }
        return 0;
    }
    if ((int64_t)rl_tokenizer_vocab_size(tok) > 2 * (int64_t)size + 1024) {
        fprintf(stderr, "fuzz_tokenizer_load: %d ids from %zu bytes\n",
                (int)rl_tokenizer_vocab_size(tok), size);
        abort();
    }
    s_use(tok);
    rl_tokenizer_destroy(&tok);
    return 0;
}
