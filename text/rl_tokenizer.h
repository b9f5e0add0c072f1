// rl_tokenizer — byte-level BPE tokenizer for Hugging Face tokenizer.json files (GPT-2, Qwen2/3,
// Llama-3 families). It loads the model (vocab + merges), the added tokens, the normalizer, the
// pre-tokenizer, the post-processor and the decoder, and encodes/decodes with the ids the
// Hugging Face `tokenizers` library produces (REFERENCE.md §4; exactness is checked against the
// official JS port on committed goldens, see docs/tokenizer.md).
//
// It is not a general tokenizer library: model types other than BPE, BPE without a ByteLevel
// pre-tokenizer, and components other than those listed in docs/tokenizer.md are refused by
// name at load time. It renders no chat templates (see rl_chat.h).
//
// Thread safety: loading is thread-safe; one handle must not be used by two threads at once
// (encode fills a per-handle cache of pre-token results). Give each thread its own handle.
#ifndef RL_TOKENIZER_H
#define RL_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct rl_tokenizer rl_tokenizer_t;

// Flags for rl_tokenizer_encode.
enum {
    // Apply the post-processor (TemplateProcessing: e.g. a BOS token). Off by default, like
    // `encode(text, add_special_tokens=False)`.
    RL_TOKENIZER_ADD_SPECIAL = 1 << 0,
    // Bypass the per-handle cache of pre-token results (benchmarks: cold-cache numbers).
    RL_TOKENIZER_NO_CACHE = 1 << 1,
    // The reference paths (tests: the `_ref` twin): the naive O(n^2) merge loop instead of the
    // heap, Oniguruma for every split instead of the hand-written matchers, the normalizer on
    // whole segments instead of only the chunks that need it, and no cache.
    RL_TOKENIZER_REF_BPE = 1 << 2,
};

// Flags for rl_tokenizer_decode.
enum {
    RL_TOKENIZER_SKIP_SPECIAL = 1 << 0, // drop added tokens marked "special": true
};

// Loads a tokenizer.json file. On failure returns NULL and writes why into err (e.g.
// "tokenizer.json: model type 'WordPiece' is not supported (BPE)"). Token ids (vocab and added
// tokens) must be below 2 x (vocab entries + added tokens) + 1024, so a small file cannot make
// us reserve large id tables; a larger id is refused naming the file, the id and the bound.
// caller owns result; free with rl_tokenizer_destroy.
rl_tokenizer_t *rl_tokenizer_new(const char *path, char *err, size_t err_len);

// As rl_tokenizer_new, from `len` bytes of tokenizer.json text in memory (not necessarily
// NUL-terminated); `name` (NULL: "tokenizer.json") stands for the file in messages.
// caller owns result; free with rl_tokenizer_destroy.
rl_tokenizer_t *rl_tokenizer_new_from_json(const char *json, size_t len, const char *name,
                                           char *err, size_t err_len);

// Loads DIR/tokenizer.json and, when present, DIR/tokenizer_config.json (bos/eos/pad tokens;
// its chat template is rl_chat_model_source's). When DIR/config.json gives an integer vocab_size, a
// tokenizer with an id at or past it is refused (see rl_tokenizer_check_vocab). On failure returns
// NULL and writes why into err. caller owns result; free with rl_tokenizer_destroy.
rl_tokenizer_t *rl_tokenizer_new_dir(const char *dir, char *err, size_t err_len);

// Checks that every id of the tokenizer (vocab and added tokens) is below `vocab_size`, the
// model's (config.json's): a larger id would index past the embedding table. Fewer ids than
// vocab_size is fine (padded embeddings). Returns 0, or RL_EINVAL with a message naming both
// files (`tok_path`, `config_path`), the largest id and vocab_size in err.
int rl_tokenizer_check_vocab(const rl_tokenizer_t *self, int32_t vocab_size, const char *tok_path,
                             const char *config_path, char *err, size_t err_len);

// Frees the tokenizer and sets *self_p to NULL; a no-op when *self_p is NULL.
void rl_tokenizer_destroy(rl_tokenizer_t **self_p);

// Encodes `len` bytes of UTF-8 `text` (NUL bytes allowed) into token ids. `flags` is a mix of
// RL_TOKENIZER_ADD_SPECIAL, _NO_CACHE, _REF_BPE. Returns 0 and sets *ids_p/*n_p (an empty text
// gives n 0 and a freeable pointer), RL_EINVAL (text is not valid UTF-8), RL_EUNSUPPORTED
// (ADD_SPECIAL with a post-processor we do not support) or RL_ENOMEM; details in
// rl_tokenizer_errmsg. On error *ids_p is NULL and *n_p is 0.
// caller owns *ids_p; free with free().
int rl_tokenizer_encode(rl_tokenizer_t *self, const char *text, size_t len, int flags,
                        int32_t **ids_p, size_t *n_p);

// Decodes ids into UTF-8 text: byte-level tokens through the inverse byte table, added tokens
// as their content; byte runs that are not valid UTF-8 become U+FFFD per maximal subpart
// (WHATWG / Rust from_utf8_lossy). No clean-up of spaces. `flags`: RL_TOKENIZER_SKIP_SPECIAL.
// The result is NUL-terminated (*len_p excludes the NUL). Returns 0, RL_EINVAL (an id outside
// the vocabulary; see rl_tokenizer_errmsg) or RL_ENOMEM; on error *text_p is NULL.
// caller owns *text_p; free with free().
int rl_tokenizer_decode(const rl_tokenizer_t *self, const int32_t *ids, size_t n, int flags,
                        char **text_p, size_t *len_p);

// As rl_tokenizer_decode, leaving out the ids the tokenizer does not know (negative, past its
// vocabulary, or holes in it): a model's vocabulary may be larger than its tokenizer's (padded
// embeddings), and such ids have no text, as in Hugging Face's decode. Returns 0 or RL_ENOMEM.
// caller owns *text_p; free with free().
int rl_tokenizer_decode_known(const rl_tokenizer_t *self, const int32_t *ids, size_t n, int flags,
                              char **text_p, size_t *len_p);

// The raw bytes a token decodes to (added tokens: their content), for streaming decoders that
// join bytes themselves; NULL when id is outside the vocabulary.
// borrowed; valid until rl_tokenizer_destroy.
const char *rl_tokenizer_token_bytes(const rl_tokenizer_t *self, int32_t id, size_t *len_p);

// The id of a token given as it is written in tokenizer.json ("Ġworld", "<|im_end|>"),
// or -1 when there is none.
int32_t rl_tokenizer_token_to_id(const rl_tokenizer_t *self, const char *token);

// The token string of `id` as written in tokenizer.json, or NULL when id is unused.
// borrowed; valid until rl_tokenizer_destroy.
const char *rl_tokenizer_id_to_token(const rl_tokenizer_t *self, int32_t id);

// One past the largest id in use (vocab and added tokens); model configs may declare more.
int32_t rl_tokenizer_vocab_size(const rl_tokenizer_t *self);

// 1 when id is an added token marked "special": true, else 0.
int rl_tokenizer_is_special(const rl_tokenizer_t *self, int32_t id);

// Ids of tokenizer_config.json's bos_token / eos_token / pad_token, or -1 when not set (or when
// the tokenizer was loaded from a file without its config).
int32_t rl_tokenizer_bos_id(const rl_tokenizer_t *self);
int32_t rl_tokenizer_eos_id(const rl_tokenizer_t *self);
int32_t rl_tokenizer_pad_id(const rl_tokenizer_t *self);

// The message of the last failed call on this handle ("" when none).
// borrowed; valid until the next call on this handle.
const char *rl_tokenizer_errmsg(const rl_tokenizer_t *self);

// Writes the UTF-8 of `n` bytes of `in` into `out` (capacity >= 3*n + 1 bytes), replacing each
// maximal invalid subpart with U+FFFD; NUL-terminates. Returns the bytes written (without NUL).
size_t rl_tokenizer_utf8_lossy(char *out, const char *in, size_t n);

// Returns the length of the valid UTF-8 prefix of `in` (== n when all of it is valid).
size_t rl_tokenizer_utf8_valid_prefix(const char *in, size_t n);

#ifdef __cplusplus
}
#endif
#endif
