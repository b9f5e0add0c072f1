// rl_tokenizer — byte-level BPE for Hugging Face tokenizer.json (see rl_tokenizer.h for the
// contract, docs/tokenizer.md for what is supported and the known divergences).
//
// Encode pipeline, in the order the Hugging Face `tokenizers` library applies it:
//   1. split out added tokens, leftmost-longest on the raw text (lstrip/rstrip/single_word);
//   2. normalize each remaining segment (NFC etc. via utf8proc);
//   3. pre-tokenize: Split (the pattern from the file, run by Oniguruma like HF does) and/or
//      ByteLevel (optionally the GPT-2 pattern, add_prefix_space);
//   4. BPE each piece. We work on raw bytes instead of the GPT-2 byte->unicode strings: the
//      mapping is a bijection, so vocab keys are converted once at load and each piece needs
//      no per-byte re-encoding. Merges are keyed by (left id, right id).
//   5. optionally the post-processor (TemplateProcessing) when add_special_tokens is asked.
#include "rl_tokenizer.h"

#include "rl_err.h"

#include <errno.h>
#include <jansson.h>
#include <oniguruma.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

// ------------------------------------------------------------------------------------------
// growable buffers

typedef struct {
    char *p;
    size_t n, cap;
} s_bytes_t;

typedef struct {
    int32_t *p;
    size_t n, cap;
} s_ids_t;

static int s_grow(void **p, size_t *cap, size_t need, size_t elem) {
    if (need <= *cap) {
        return 0;
    }
    size_t c = *cap ? *cap : 64;
    while (c < need) {
        c *= 2;
    }
    void *q = realloc(*p, c * elem);
    if (!q) {
        return RL_ENOMEM;
    }
    *p = q;
    *cap = c;
    return 0;
}

static int s_bytes_append(s_bytes_t *b, const void *p, size_t n) {
    if (s_grow((void **)&b->p, &b->cap, b->n + n + 1, 1)) {
        return RL_ENOMEM;
    }
    if (n) {
        memcpy(b->p + b->n, p, n);
    }
    b->n += n;
    b->p[b->n] = '\0';
    return 0;
}

static int s_ids_push(s_ids_t *v, int32_t x) {
    if (s_grow((void **)&v->p, &v->cap, v->n + 1, sizeof(int32_t))) {
        return RL_ENOMEM;
    }
    v->p[v->n++] = x;
    return 0;
}

static int s_ids_append(s_ids_t *v, const int32_t *x, size_t n) {
    if (n == 0) {
        return 0;
    }
    if (s_grow((void **)&v->p, &v->cap, v->n + n, sizeof(int32_t))) {
        return RL_ENOMEM;
    }
    memcpy(v->p + v->n, x, n * sizeof(int32_t));
    v->n += n;
    return 0;
}

// ------------------------------------------------------------------------------------------
// string map: bytes -> (a, b), open addressing; keys live in the map's own arena

typedef struct {
    uint64_t hash; // 0 = empty slot
    uint32_t off, len;
    int32_t a, b;
} s_slot_t;

typedef struct {
    s_slot_t *slots;
    size_t mask, count;
    s_bytes_t keys;
} s_strmap_t;

static uint64_t s_hash(const char *p, size_t n) {
    // FNV-1a; the final mix spreads the low bits we index with. Never returns 0 (empty marker).
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) {
        h = (h ^ (uint8_t)p[i]) * 1099511628211ull;
    }
    h ^= h >> 29;
    h *= 0xbf58476d1ce4e5b9ull;
    h ^= h >> 32;
    return h ? h : 1;
}

static void s_strmap_free(s_strmap_t *m) {
    free(m->slots);
    free(m->keys.p);
    memset(m, 0, sizeof(*m));
}

static void s_strmap_clear(s_strmap_t *m) {
    if (m->slots) {
        memset(m->slots, 0, (m->mask + 1) * sizeof(s_slot_t));
    }
    m->count = 0;
    m->keys.n = 0;
}

static s_slot_t *s_strmap_find(const s_strmap_t *m, const char *k, size_t n, uint64_t h) {
    if (!m->slots) {
        return NULL;
    }
    for (size_t i = h & m->mask;; i = (i + 1) & m->mask) {
        s_slot_t *s = &m->slots[i];
        if (s->hash == 0) {
            return NULL;
        }
        if (s->hash == h && s->len == n && memcmp(m->keys.p + s->off, k, n) == 0) {
            return s;
        }
    }
}

static int s_strmap_rehash(s_strmap_t *m, size_t cap) {
    s_slot_t *slots = calloc(cap, sizeof(s_slot_t));
    if (!slots) {
        return RL_ENOMEM;
    }
    if (m->slots) {
        for (size_t i = 0; i <= m->mask; i++) {
            s_slot_t *s = &m->slots[i];
            if (s->hash) {
                size_t j = s->hash & (cap - 1);
                while (slots[j].hash) {
                    j = (j + 1) & (cap - 1);
                }
                slots[j] = *s;
            }
        }
    }
    free(m->slots);
    m->slots = slots;
    m->mask = cap - 1;
    return 0;
}

// Inserts or overwrites (later entries win, as in a HashMap built from a list).
static int s_strmap_put(s_strmap_t *m, const char *k, size_t n, int32_t a, int32_t b) {
    if (!m->slots || (m->count + 1) * 2 > m->mask + 1) {
        if (s_strmap_rehash(m, m->slots ? (m->mask + 1) * 2 : 1024)) {
            return RL_ENOMEM;
        }
    }
    uint64_t h = s_hash(k, n);
    s_slot_t *s = s_strmap_find(m, k, n, h);
    if (s) {
        s->a = a;
        s->b = b;
        return 0;
    }
    if (n > UINT32_MAX || m->keys.n + n > UINT32_MAX) {
        return RL_EINVAL;
    }
    uint32_t off = (uint32_t)m->keys.n;
    if (s_bytes_append(&m->keys, k, n)) {
        return RL_ENOMEM;
    }
    size_t i = h & m->mask;
    while (m->slots[i].hash) {
        i = (i + 1) & m->mask;
    }
    m->slots[i] = (s_slot_t){h, off, (uint32_t)n, a, b};
    m->count++;
    return 0;
}

// ------------------------------------------------------------------------------------------
// merge map: (left id, right id) -> (rank, merged id)

typedef struct {
    uint64_t key; // UINT64_MAX = empty (ids are < 2^31, so no real key has all bits set)
    int32_t rank, id;
} s_merge_t;

typedef struct {
    s_merge_t *slots;
    size_t mask, count;
} s_mergemap_t;

static inline size_t s_merge_slot(uint64_t key, size_t mask) {
    return (size_t)((key * 0x9e3779b97f4a7c15ull) >> 17) & mask;
}

static inline const s_merge_t *s_merge_get(const s_mergemap_t *m, int32_t a, int32_t b) {
    uint64_t key = ((uint64_t)(uint32_t)a << 32) | (uint32_t)b;
    for (size_t i = s_merge_slot(key, m->mask);; i = (i + 1) & m->mask) {
        const s_merge_t *s = &m->slots[i];
        if (s->key == key) {
            return s;
        }
        if (s->key == UINT64_MAX) {
            return NULL;
        }
    }
}

static int s_mergemap_init(s_mergemap_t *m, size_t n) {
    size_t cap = 1024;
    while (cap < 2 * n + 2) {
        cap *= 2;
    }
    m->slots = malloc(cap * sizeof(s_merge_t));
    if (!m->slots) {
        return RL_ENOMEM;
    }
    for (size_t i = 0; i < cap; i++) {
        m->slots[i].key = UINT64_MAX;
    }
    m->mask = cap - 1;
    m->count = 0;
    return 0;
}

static void s_mergemap_put(s_mergemap_t *m, int32_t a, int32_t b, int32_t rank, int32_t id) {
    uint64_t key = ((uint64_t)(uint32_t)a << 32) | (uint32_t)b;
    size_t i = s_merge_slot(key, m->mask);
    while (m->slots[i].key != UINT64_MAX && m->slots[i].key != key) {
        i = (i + 1) & m->mask;
    }
    if (m->slots[i].key == UINT64_MAX) {
        m->count++;
    }
    m->slots[i] = (s_merge_t){key, rank, id};
}

// ------------------------------------------------------------------------------------------
// UTF-8 (Unicode Table 3-7: well-formed byte sequences)

// Length of the well-formed sequence at p (1..4), or 0 when it is ill-formed; *sub gets the
// length of its maximal subpart (the bytes one U+FFFD replaces), >= 1.
static int s_utf8_seq(const uint8_t *p, size_t n, int *sub) {
    uint8_t c = p[0];
    int need;
    uint8_t lo = 0x80, hi = 0xBF;
    if (c < 0x80) {
        *sub = 1;
        return 1;
    } else if (c >= 0xC2 && c <= 0xDF) {
        need = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
        need = 3;
        if (c == 0xE0) {
            lo = 0xA0;
        } else if (c == 0xED) {
            hi = 0x9F;
        }
    } else if (c >= 0xF0 && c <= 0xF4) {
        need = 4;
        if (c == 0xF0) {
            lo = 0x90;
        } else if (c == 0xF4) {
            hi = 0x8F;
        }
    } else {
        *sub = 1;
        return 0;
    }
    int i = 1;
    for (; i < need; i++) {
        if ((size_t)i >= n) {
            break;
        }
        uint8_t lo_i = i == 1 ? lo : 0x80, hi_i = i == 1 ? hi : 0xBF;
        if (p[i] < lo_i || p[i] > hi_i) {
            break;
        }
    }
    *sub = i;
    return i == need ? need : 0;
}

size_t rl_tokenizer_utf8_valid_prefix(const char *in, size_t n) {
    const uint8_t *p = (const uint8_t *)in;
    size_t i = 0;
    while (i < n) {
        if (p[i] < 0x80) {
            i++;
            continue;
        }
        int sub, k = s_utf8_seq(p + i, n - i, &sub);
        if (!k) {
            return i;
        }
        i += (size_t)k;
    }
    return n;
}

size_t rl_tokenizer_utf8_lossy(char *out, const char *in, size_t n) {
    const uint8_t *p = (const uint8_t *)in;
    size_t i = 0, o = 0;
    while (i < n) {
        int sub, k = s_utf8_seq(p + i, n - i, &sub);
        if (k) {
            memcpy(out + o, p + i, (size_t)k);
            o += (size_t)k;
            i += (size_t)k;
        } else {
            memcpy(out + o, "\xEF\xBF\xBD", 3);
            o += 3;
            i += (size_t)sub;
        }
    }
    out[o] = '\0';
    return o;
}

// Decodes the (valid) code point at p; returns its byte length.
static int s_utf8_decode(const uint8_t *p, int32_t *cp) {
    if (p[0] < 0x80) {
        *cp = p[0];
        return 1;
    } else if (p[0] < 0xE0) {
        *cp = ((p[0] & 0x1F) << 6) | (p[1] & 0x3F);
        return 2;
    } else if (p[0] < 0xF0) {
        *cp = ((p[0] & 0x0F) << 12) | ((p[1] & 0x3F) << 6) | (p[2] & 0x3F);
        return 3;
    }
    *cp = ((p[0] & 0x07) << 18) | ((p[1] & 0x3F) << 12) | ((p[2] & 0x3F) << 6) | (p[3] & 0x3F);
    return 4;
}

// Rust's char::is_whitespace (the White_Space property), used by lstrip/rstrip.
static int s_is_space(int32_t c) {
    return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F ||
           c == 0x205F || c == 0x3000;
}

static int s_is_word(int32_t c) {
    if (c == '_') {
        return 1;
    }
    utf8proc_category_t cat = utf8proc_category(c);
    return (cat >= UTF8PROC_CATEGORY_LU && cat <= UTF8PROC_CATEGORY_LO) ||
           (cat >= UTF8PROC_CATEGORY_ND && cat <= UTF8PROC_CATEGORY_NO);
}

// ------------------------------------------------------------------------------------------
// GPT-2 byte <-> unicode table: printable Latin-1 bytes map to themselves, the other 68 bytes
// to U+0100 + n in byte order (so ' ' -> U+0120 'Ġ').

static int32_t s_byte_cp[256];
static int16_t s_cp_byte[324];
static pthread_once_t s_tables_once = PTHREAD_ONCE_INIT;

static void s_tables_init(void) {
    int n = 0;
    for (int i = 0; i < 324; i++) {
        s_cp_byte[i] = -1;
    }
    for (int b = 0; b < 256; b++) {
        int printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174);
        s_byte_cp[b] = printable ? b : 256 + n++;
        s_cp_byte[s_byte_cp[b]] = (int16_t)b;
    }
    OnigEncoding enc = ONIG_ENCODING_UTF8;
    onig_initialize(&enc, 1);
}

// Converts a byte-level token string to raw bytes in `out` (capacity >= n). Returns the byte
// count, or -1 when a character is outside the table (the token is not byte-level).
static long s_bytelevel_to_raw(const char *s, size_t n, char *out) {
    const uint8_t *p = (const uint8_t *)s;
    size_t i = 0, o = 0;
    while (i < n) {
        int sub, k = s_utf8_seq(p + i, n - i, &sub);
        if (!k) {
            return -1;
        }
        int32_t cp;
        s_utf8_decode(p + i, &cp);
        if (cp >= 324 || s_cp_byte[cp] < 0) {
            return -1;
        }
        out[o++] = (char)s_cp_byte[cp];
        i += (size_t)k;
    }
    return (long)o;
}

// ------------------------------------------------------------------------------------------
// the handle

enum { S_NORM_NFC = 1, S_NORM_NFD, S_NORM_NFKC, S_NORM_NFKD };
enum { S_PT_SPLIT = 1, S_PT_BYTELEVEL };
enum { S_ISOLATED = 1, S_REMOVED, S_MERGED_PREV, S_MERGED_NEXT, S_CONTIGUOUS };
enum { S_KIND_NONE = 0, S_KIND_VOCAB, S_KIND_ADDED, S_KIND_SPECIAL };
enum { S_POST_NONE = 0, S_POST_OK, S_POST_UNSUPPORTED };
enum { S_FAST_NONE = 0, S_FAST_QWEN, S_FAST_LLAMA3, S_FAST_GPT2 };
enum { S_CL_L = 1, S_CL_N = 2, S_CL_S = 4 }; // \p{L}, \p{N}, \s as Oniguruma defines them
enum { S_CL_INERT = 8 }; // no normal form changes it or lets it combine (utf8proc)

#define S_MAX_STAGES 8
#define S_CACHE_MAX_ENTRIES (1u << 17)
#define S_CACHE_MAX_PIECE 256

typedef struct {
    int kind;
    regex_t *re;        // Split with Regex, or ByteLevel with use_regex
    char *literal;      // Split with String
    size_t literal_len;
    int behavior, invert;
    int add_prefix_space;
    int fast; // S_FAST_*: a hand-written matcher for this exact pattern (0: Oniguruma only)
} s_pretok_t;

typedef struct {
    int32_t id;
    uint32_t off, len; // content in arena
    int special, lstrip, rstrip, single_word, normalized;
} s_added_t;

typedef struct {
    int32_t lo, hi; // index range in the added_order array for one first byte
} s_bucket_t;

struct rl_tokenizer {
    int32_t n_ids;       // one past the largest id
    uint8_t *kind;       // [n_ids] S_KIND_*
    uint32_t *str_off;   // [n_ids] token string as written in tokenizer.json (arena)
    uint32_t *str_len;
    uint32_t *raw_off;   // [n_ids] bytes it decodes to (arena)
    uint32_t *raw_len;
    s_bytes_t arena;

    s_strmap_t vocab_str; // token string -> id (model vocab)
    s_strmap_t vocab_raw; // raw bytes -> id (byte-level vocab; only with ignore_merges)
    int32_t byte_id[256]; // id of each single byte, -1 if absent
    s_mergemap_t merges;
    int ignore_merges;

    s_added_t *added;
    size_t n_added;
    int32_t *added_order;    // added indices grouped by first byte, longest first
    s_bucket_t buckets[256];

    int norm[S_MAX_STAGES];
    int n_norm;
    s_pretok_t pt[S_MAX_STAGES];
    int n_pt;

    int post;                // S_POST_*
    char post_name[64];
    s_ids_t post_prefix, post_suffix;

    int32_t bos, eos, pad;

    // scratch (why the handle is single-threaded)
    OnigRegion *region;
    s_bytes_t work;
    size_t *pieces, n_pieces, cap_pieces;
    size_t *pieces2, n_pieces2, cap_pieces2;
    int32_t *sym, *prev, *next;
    size_t cap_sym;
    struct s_heap_item *heap;
    size_t cap_heap;
    uint8_t *cls[0x110000 >> 8]; // lazily built class blocks (S_CL_*), one per 256 code points
    regex_t *cls_re[3];           // \p{L}, \p{N}, \s: the classes come from Oniguruma itself
    s_strmap_t cache; // piece bytes -> (offset, count) in cache_ids
    s_ids_t cache_ids;

    char errmsg[512];
};

typedef struct s_heap_item {
    int32_t rank, pos, id;
} s_heap_item_t;

static int s_fail(rl_tokenizer_t *self, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int s_fail(rl_tokenizer_t *self, int code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(self->errmsg, sizeof(self->errmsg), fmt, ap);
    va_end(ap);
    return code;
}

// ------------------------------------------------------------------------------------------
// loading

static const char *s_type_of(json_t *obj) {
    json_t *t = json_object_get(obj, "type");
    return json_is_string(t) ? json_string_value(t) : NULL;
}

static int s_compile(rl_tokenizer_t *self, const char *pat, size_t n, regex_t **re_p) {
    OnigErrorInfo einfo;
    int r = onig_new(re_p, (const OnigUChar *)pat, (const OnigUChar *)pat + n, ONIG_OPTION_NONE,
                     ONIG_ENCODING_UTF8, ONIG_SYNTAX_DEFAULT, &einfo);
    if (r != ONIG_NORMAL) {
        OnigUChar msg[ONIG_MAX_ERROR_MESSAGE_LEN];
        onig_error_code_to_str(msg, r, &einfo);
        *re_p = NULL;
        return s_fail(self, RL_EINVAL, "pre_tokenizer regex /%.*s/ does not compile: %s",
                      (int)(n > 200 ? 200 : n), pat, (const char *)msg);
    }
    return 0;
}

static int s_load_normalizer(rl_tokenizer_t *self, json_t *n) {
    if (!n || json_is_null(n)) {
        return 0;
    }
    const char *type = s_type_of(n);
    if (!type) {
        return s_fail(self, RL_EINVAL, "normalizer has no type");
    }
    if (strcmp(type, "Sequence") == 0) {
        json_t *list = json_object_get(n, "normalizers");
        if (!json_is_array(list)) {
            return s_fail(self, RL_EINVAL, "normalizer Sequence has no 'normalizers' list");
        }
        size_t i;
        json_t *v;
        json_array_foreach(list, i, v) {
            int r = s_load_normalizer(self, v);
            if (r) {
                return r;
            }
        }
        return 0;
    }
    int k = strcmp(type, "NFC") == 0    ? S_NORM_NFC
            : strcmp(type, "NFD") == 0  ? S_NORM_NFD
            : strcmp(type, "NFKC") == 0 ? S_NORM_NFKC
            : strcmp(type, "NFKD") == 0 ? S_NORM_NFKD
                                        : 0;
    if (!k) {
        return s_fail(self, RL_EUNSUPPORTED,
                      "normalizer '%s' is not supported (NFC, NFD, NFKC, NFKD, Sequence)", type);
    }
    if (self->n_norm == S_MAX_STAGES) {
        return s_fail(self, RL_EUNSUPPORTED, "more than %d normalizers", S_MAX_STAGES);
    }
    self->norm[self->n_norm++] = k;
    return 0;
}

static const char s_gpt2_pattern[] =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";
static const char s_qwen_pattern[] =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+"
    "[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
static const char s_llama3_pattern[] =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+"
    "[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

// The three patterns in use get a hand-written matcher (s_fast_match); any other pattern, or
// these with a single byte changed, runs in Oniguruma.
static int s_fast_kind(const char *pat) {
    return strcmp(pat, s_qwen_pattern) == 0     ? S_FAST_QWEN
           : strcmp(pat, s_llama3_pattern) == 0 ? S_FAST_LLAMA3
           : strcmp(pat, s_gpt2_pattern) == 0   ? S_FAST_GPT2
                                                : S_FAST_NONE;
}

static int s_load_pretok(rl_tokenizer_t *self, json_t *p) {
    const char *type = s_type_of(p);
    if (!type) {
        return s_fail(self, RL_EINVAL, "pre_tokenizer has no type");
    }
    if (strcmp(type, "Sequence") == 0) {
        json_t *list = json_object_get(p, "pretokenizers");
        if (!json_is_array(list)) {
            return s_fail(self, RL_EINVAL, "pre_tokenizer Sequence has no 'pretokenizers' list");
        }
        size_t i;
        json_t *v;
        json_array_foreach(list, i, v) {
            int r = s_load_pretok(self, v);
            if (r) {
                return r;
            }
        }
        return 0;
    }
    if (self->n_pt == S_MAX_STAGES) {
        return s_fail(self, RL_EUNSUPPORTED, "more than %d pre-tokenizers", S_MAX_STAGES);
    }
    if (self->n_pt > 0 && self->pt[self->n_pt - 1].kind == S_PT_BYTELEVEL) {
        // after ByteLevel the text is in the byte->unicode alphabet; no real file does this
        return s_fail(self, RL_EUNSUPPORTED,
                      "pre_tokenizer '%s' after ByteLevel is not supported", type);
    }
    s_pretok_t *pt = &self->pt[self->n_pt];
    memset(pt, 0, sizeof(*pt));
    // counted before anything can fail, so destroy frees the regex or literal of a stage that
    // is refused after them (a Split with an unknown behavior leaked its regex)
    self->n_pt++;
    if (strcmp(type, "ByteLevel") == 0) {
        pt->kind = S_PT_BYTELEVEL;
        pt->add_prefix_space = json_is_true(json_object_get(p, "add_prefix_space"));
        json_t *ur = json_object_get(p, "use_regex");
        if (!ur || json_is_true(ur)) { // HF's default is true
            int r = s_compile(self, s_gpt2_pattern, sizeof(s_gpt2_pattern) - 1, &pt->re);
            if (r) {
                return r;
            }
            pt->fast = S_FAST_GPT2;
        }
        pt->behavior = S_ISOLATED;
        return 0;
    }
    if (strcmp(type, "Split") == 0) {
        pt->kind = S_PT_SPLIT;
        json_t *pat = json_object_get(p, "pattern");
        json_t *rx = json_object_get(pat, "Regex"), *lit = json_object_get(pat, "String");
        if (json_is_string(rx)) {
            int r = s_compile(self, json_string_value(rx), json_string_length(rx), &pt->re);
            if (r) {
                return r;
            }
            pt->fast = s_fast_kind(json_string_value(rx));
        } else if (json_is_string(lit)) {
            pt->literal_len = json_string_length(lit);
            pt->literal = malloc(pt->literal_len + 1);
            if (!pt->literal) {
                return RL_ENOMEM;
            }
            memcpy(pt->literal, json_string_value(lit), pt->literal_len + 1);
        } else {
            return s_fail(self, RL_EINVAL, "pre_tokenizer Split has no Regex or String pattern");
        }
        const char *b = json_string_value(json_object_get(p, "behavior"));
        b = b ? b : "";
        pt->behavior = strcmp(b, "Isolated") == 0             ? S_ISOLATED
                       : strcmp(b, "Removed") == 0            ? S_REMOVED
                       : strcmp(b, "MergedWithPrevious") == 0 ? S_MERGED_PREV
                       : strcmp(b, "MergedWithNext") == 0     ? S_MERGED_NEXT
                       : strcmp(b, "Contiguous") == 0         ? S_CONTIGUOUS
                                                              : 0;
        if (!pt->behavior) {
            return s_fail(self, RL_EUNSUPPORTED, "pre_tokenizer Split behavior '%s' is not "
                          "supported (Isolated, Removed, MergedWithPrevious, MergedWithNext, "
                          "Contiguous)", b);
        }
        pt->invert = json_is_true(json_object_get(p, "invert"));
        return 0;
    }
    return s_fail(self, RL_EUNSUPPORTED,
                  "pre_tokenizer '%s' is not supported (ByteLevel, Split, Sequence)", type);
}

static int s_arena_put(rl_tokenizer_t *self, const char *p, size_t n, uint32_t *off) {
    if (self->arena.n + n > UINT32_MAX) {
        return RL_ENOMEM;
    }
    *off = (uint32_t)self->arena.n;
    if (s_bytes_append(&self->arena, p, n)) {
        return RL_ENOMEM;
    }
    self->arena.n++; // keep the NUL s_bytes_append wrote: every stored string is a C string
    return 0;
}

static int s_ensure_ids(rl_tokenizer_t *self, int32_t n) {
    if (n <= self->n_ids) {
        return 0;
    }
    uint8_t *k = realloc(self->kind, (size_t)n);
    uint32_t *a = realloc(self->str_off, (size_t)n * 4);
    if (k) {
        self->kind = k;
    }
    if (a) {
        self->str_off = a;
    }
    uint32_t *b = realloc(self->str_len, (size_t)n * 4);
    if (b) {
        self->str_len = b;
    }
    uint32_t *c = realloc(self->raw_off, (size_t)n * 4);
    if (c) {
        self->raw_off = c;
    }
    uint32_t *d = realloc(self->raw_len, (size_t)n * 4);
    if (d) {
        self->raw_len = d;
    }
    if (!k || !a || !b || !c || !d) {
        return RL_ENOMEM;
    }
    memset(self->kind + self->n_ids, 0, (size_t)(n - self->n_ids));
    self->n_ids = n;
    return 0;
}

// Ids index the per-id tables (17 bytes each), so one large id in a tiny file would make us
// reserve gigabytes. Real files are dense: GPT-2, Qwen2/3 and Llama-3 number the vocab 0..n-1
// and put the added tokens right after it. We accept an id when it is below twice the number
// of entries (vocab plus added tokens) plus S_ID_SLACK: gaps stay legal, and the tables stay
// within a small multiple of the file's own size (each entry takes >= 6 bytes of JSON).
#define S_ID_SLACK 1024

typedef struct {
    long long limit;  // ids must be < limit
    size_t n_entries; // vocab entries + added tokens, for the message
} s_id_bound_t;

static s_id_bound_t s_id_bound(json_t *vocab, json_t *added) {
    s_id_bound_t b;
    b.n_entries = json_object_size(vocab) + (json_is_array(added) ? json_array_size(added) : 0);
    b.limit = 2 * (long long)b.n_entries + S_ID_SLACK;
    if (b.limit > INT32_MAX / 2) { // the tables are indexed by int32_t
        b.limit = INT32_MAX / 2;
    }
    return b;
}

static int s_id_too_big(rl_tokenizer_t *self, const s_id_bound_t *b, const char *what,
                        long long id) {
    return s_fail(self, RL_EINVAL, "%s has id %lld; ids must be below %lld (2 x %zu entries + "
                  "%d)", what, id, b->limit, b->n_entries, S_ID_SLACK);
}

static int s_load_vocab(rl_tokenizer_t *self, json_t *vocab, const s_id_bound_t *bound) {
    int32_t max_id = -1;
    const char *key;
    size_t klen;
    json_t *v;
    json_object_keylen_foreach(vocab, key, klen, v) {
        json_int_t id = json_integer_value(v);
        if (!json_is_integer(v) || id < 0) {
            return s_fail(self, RL_EINVAL, "vocab entry '%.64s' has a bad id", key);
        }
        if (id >= bound->limit) {
            char what[96];
            snprintf(what, sizeof(what), "vocab entry '%.64s'", key);
            return s_id_too_big(self, bound, what, (long long)id);
        }
        max_id = (int32_t)id > max_id ? (int32_t)id : max_id;
    }
    int r = s_ensure_ids(self, max_id + 1);
    if (r) {
        return r;
    }
    char *raw = NULL;
    size_t raw_cap = 0;
    json_object_keylen_foreach(vocab, key, klen, v) {
        int32_t id = (int32_t)json_integer_value(v);
        if ((r = s_grow((void **)&raw, &raw_cap, klen + 1, 1)) ||
            (r = s_strmap_put(&self->vocab_str, key, klen, id, 0)) ||
            (r = s_arena_put(self, key, klen, &self->str_off[id]))) {
            break;
        }
        self->str_len[id] = (uint32_t)klen;
        self->kind[id] = S_KIND_VOCAB;
        long n = s_bytelevel_to_raw(key, klen, raw);
        if (n < 0) { // not byte-level: unreachable by BPE; decodes to its own text
            self->raw_off[id] = self->str_off[id];
            self->raw_len[id] = (uint32_t)klen;
            continue;
        }
        if ((r = s_arena_put(self, raw, (size_t)n, &self->raw_off[id]))) {
            break;
        }
        self->raw_len[id] = (uint32_t)n;
        if (n == 1) {
            self->byte_id[(uint8_t)raw[0]] = id;
        }
        if (self->ignore_merges && (r = s_strmap_put(&self->vocab_raw, raw, (size_t)n, id, 0))) {
            break;
        }
    }
    free(raw);
    return r;
}

static int32_t s_vocab_lookup(const rl_tokenizer_t *self, const char *s, size_t n) {
    s_slot_t *slot = s_strmap_find(&self->vocab_str, s, n, s_hash(s, n));
    return slot ? slot->a : -1;
}

static int s_load_merges(rl_tokenizer_t *self, json_t *merges) {
    size_t n = json_array_size(merges);
    int r = s_mergemap_init(&self->merges, n);
    if (r) {
        return r;
    }
    s_bytes_t joined = {0};
    for (size_t i = 0; i < n; i++) {
        json_t *m = json_array_get(merges, i);
        const char *a, *b;
        size_t alen, blen;
        if (json_is_string(m)) {
            // "a b": tokens never hold a raw space (byte-level maps it to U+0120)
            a = json_string_value(m);
            const char *sp = strchr(a, ' ');
            if (!sp || strchr(sp + 1, ' ')) {
                r = s_fail(self, RL_EINVAL, "merge %zu '%.64s' is not two tokens", i, a);
                break;
            }
            alen = (size_t)(sp - a);
            b = sp + 1;
            blen = json_string_length(m) - alen - 1;
        } else if (json_is_array(m) && json_array_size(m) == 2 &&
                   json_is_string(json_array_get(m, 0)) && json_is_string(json_array_get(m, 1))) {
            a = json_string_value(json_array_get(m, 0));
            alen = json_string_length(json_array_get(m, 0));
            b = json_string_value(json_array_get(m, 1));
            blen = json_string_length(json_array_get(m, 1));
        } else {
            r = s_fail(self, RL_EINVAL, "merge %zu is neither \"a b\" nor [\"a\", \"b\"]", i);
            break;
        }
        int32_t ia = s_vocab_lookup(self, a, alen), ib = s_vocab_lookup(self, b, blen);
        joined.n = 0;
        if ((r = s_bytes_append(&joined, a, alen)) || (r = s_bytes_append(&joined, b, blen))) {
            break;
        }
        int32_t im = s_vocab_lookup(self, joined.p, joined.n);
        if (ia < 0 || ib < 0 || im < 0) {
            r = s_fail(self, RL_EINVAL, "merge %zu '%.*s' '%.*s': %s is not in the vocab", i,
                       (int)(alen > 64 ? 64 : alen), a, (int)(blen > 64 ? 64 : blen), b,
                       ia < 0 ? "the left token" : ib < 0 ? "the right token" : "the merged token");
            break;
        }
        s_mergemap_put(&self->merges, ia, ib, (int32_t)i, im);
    }
    free(joined.p);
    return r;
}

static int s_load_added(rl_tokenizer_t *self, json_t *list, const s_id_bound_t *bound) {
    if (!list || json_is_null(list)) {
        return 0;
    }
    if (!json_is_array(list)) {
        return s_fail(self, RL_EINVAL, "added_tokens is not a list");
    }
    size_t n = json_array_size(list);
    self->added = calloc(n ? n : 1, sizeof(s_added_t));
    self->added_order = calloc(n ? n : 1, sizeof(int32_t));
    if (!self->added || !self->added_order) {
        return RL_ENOMEM;
    }
    for (size_t i = 0; i < n; i++) {
        json_t *t = json_array_get(list, i);
        json_t *id = json_object_get(t, "id"), *content = json_object_get(t, "content");
        if (!json_is_integer(id) || json_integer_value(id) < 0 || !json_is_string(content) ||
            json_string_length(content) == 0) {
            return s_fail(self, RL_EINVAL, "added_tokens[%zu] needs an id and a content", i);
        }
        if (json_integer_value(id) >= bound->limit) {
            char what[64];
            snprintf(what, sizeof(what), "added_tokens[%zu]", i);
            return s_id_too_big(self, bound, what, (long long)json_integer_value(id));
        }
        s_added_t *a = &self->added[self->n_added++];
        a->id = (int32_t)json_integer_value(id);
        a->special = json_is_true(json_object_get(t, "special"));
        a->lstrip = json_is_true(json_object_get(t, "lstrip"));
        a->rstrip = json_is_true(json_object_get(t, "rstrip"));
        a->single_word = json_is_true(json_object_get(t, "single_word"));
        a->normalized = json_is_true(json_object_get(t, "normalized"));
        a->len = (uint32_t)json_string_length(content);
        int r = s_arena_put(self, json_string_value(content), a->len, &a->off);
        if (r || (r = s_ensure_ids(self, a->id + 1))) {
            return r;
        }
        self->kind[a->id] = a->special ? S_KIND_SPECIAL : S_KIND_ADDED;
        self->str_off[a->id] = self->raw_off[a->id] = a->off;
        self->str_len[a->id] = self->raw_len[a->id] = a->len;
    }
    // group by first byte, longest first: the first hit at a position is the longest match
    size_t k = 0;
    for (int b = 0; b < 256; b++) {
        self->buckets[b].lo = (int32_t)k;
        for (size_t i = 0; i < self->n_added; i++) {
            if ((uint8_t)self->arena.p[self->added[i].off] == b) {
                size_t j = k++;
                while (j > (size_t)self->buckets[b].lo &&
                       self->added[self->added_order[j - 1]].len < self->added[i].len) {
                    self->added_order[j] = self->added_order[j - 1];
                    j--;
                }
                self->added_order[j] = (int32_t)i;
            }
        }
        self->buckets[b].hi = (int32_t)k;
    }
    return 0;
}

// TemplateProcessing's `single` list: the ids before and after the sequence "A".
static int s_load_template(rl_tokenizer_t *self, json_t *p) {
    json_t *single = json_object_get(p, "single"), *specials = json_object_get(p, "special_tokens");
    if (!json_is_array(single)) {
        return s_fail(self, RL_EINVAL, "post_processor TemplateProcessing has no 'single' list");
    }
    int seen_seq = 0;
    size_t i;
    json_t *item;
    json_array_foreach(single, i, item) {
        if (json_object_get(item, "Sequence")) {
            seen_seq = 1;
            continue;
        }
        json_t *sp = json_object_get(item, "SpecialToken");
        const char *name = json_string_value(json_object_get(sp, "id"));
        json_t *ids = json_object_get(json_object_get(specials, name ? name : ""), "ids");
        if (!name || !json_is_array(ids)) {
            return s_fail(self, RL_EINVAL, "post_processor TemplateProcessing item %zu names no "
                          "known special token", i);
        }
        size_t j;
        json_t *id;
        json_array_foreach(ids, j, id) {
            int r = s_ids_push(seen_seq ? &self->post_suffix : &self->post_prefix,
                               (int32_t)json_integer_value(id));
            if (r) {
                return r;
            }
        }
    }
    return 0;
}

static int s_load_post(rl_tokenizer_t *self, json_t *p) {
    if (!p || json_is_null(p)) {
        return 0;
    }
    const char *type = s_type_of(p);
    type = type ? type : "(no type)";
    if (strcmp(type, "Sequence") == 0) {
        json_t *list = json_object_get(p, "processors");
        size_t i;
        json_t *v;
        json_array_foreach(list, i, v) {
            int r = s_load_post(self, v);
            if (r) {
                return r;
            }
        }
        return 0;
    }
    if (strcmp(type, "ByteLevel") == 0) { // only trims offsets; adds no tokens
        self->post = self->post == S_POST_NONE ? S_POST_OK : self->post;
        return 0;
    }
    if (strcmp(type, "TemplateProcessing") == 0) {
        self->post = self->post == S_POST_NONE ? S_POST_OK : self->post;
        return s_load_template(self, p);
    }
    // refused only when add_special_tokens is asked: plain encoding does not need it
    self->post = S_POST_UNSUPPORTED;
    snprintf(self->post_name, sizeof(self->post_name), "%s", type);
    return 0;
}

static int s_load_json(rl_tokenizer_t *self, json_t *root, const char *path) {
    json_t *model = json_object_get(root, "model");
    if (!json_is_object(model)) {
        return s_fail(self, RL_EINVAL, "%s: no 'model' object", path);
    }
    const char *type = s_type_of(model);
    if (!type && json_is_object(json_object_get(model, "vocab")) &&
        json_is_array(json_object_get(model, "merges"))) {
        type = "BPE"; // old files omit the type of a BPE model
    }
    if (!type || strcmp(type, "BPE") != 0) {
        return s_fail(self, RL_EUNSUPPORTED, "%s: model type '%s' is not supported (BPE)", path,
                      type ? type : "(none)");
    }
    json_t *dropout = json_object_get(model, "dropout");
    if (json_is_number(dropout) && json_number_value(dropout) > 0.0) {
        return s_fail(self, RL_EUNSUPPORTED, "%s: BPE dropout is not supported", path);
    }
    const char *fields[] = {"continuing_subword_prefix", "end_of_word_suffix"};
    for (int i = 0; i < 2; i++) {
        const char *s = json_string_value(json_object_get(model, fields[i]));
        if (s && *s) {
            return s_fail(self, RL_EUNSUPPORTED, "%s: BPE %s '%s' is not supported", path,
                          fields[i], s);
        }
    }
    self->ignore_merges = json_is_true(json_object_get(model, "ignore_merges"));
    json_t *vocab = json_object_get(model, "vocab"), *merges = json_object_get(model, "merges");
    if (!json_is_object(vocab) || !json_is_array(merges)) {
        return s_fail(self, RL_EINVAL, "%s: model needs a 'vocab' object and a 'merges' list",
                      path);
    }
    int r;
    if ((r = s_load_normalizer(self, json_object_get(root, "normalizer")))) {
        char tmp[sizeof(self->errmsg)];
        snprintf(tmp, sizeof(tmp), "%s", self->errmsg);
        return s_fail(self, r, "%s: %s", path, tmp);
    }
    json_t *pre = json_object_get(root, "pre_tokenizer");
    if (pre && !json_is_null(pre) && (r = s_load_pretok(self, pre))) {
        char tmp[sizeof(self->errmsg)];
        snprintf(tmp, sizeof(tmp), "%s", self->errmsg);
        return s_fail(self, r, "%s: %s", path, tmp);
    }
    if (self->n_pt == 0 || self->pt[self->n_pt - 1].kind != S_PT_BYTELEVEL) {
        return s_fail(self, RL_EUNSUPPORTED, "%s: BPE without a ByteLevel pre_tokenizer is not "
                      "supported (byte-level BPE only)", path);
    }
    json_t *dec = json_object_get(root, "decoder");
    const char *dtype = s_type_of(dec);
    if (dec && !json_is_null(dec) && (!dtype || strcmp(dtype, "ByteLevel") != 0)) {
        return s_fail(self, RL_EUNSUPPORTED, "%s: decoder '%s' is not supported (ByteLevel)",
                      path, dtype ? dtype : "(no type)");
    }
    for (int b = 0; b < 256; b++) {
        self->byte_id[b] = -1;
    }
    json_t *added = json_object_get(root, "added_tokens");
    s_id_bound_t bound = s_id_bound(vocab, added);
    if ((r = s_load_vocab(self, vocab, &bound)) || (r = s_load_merges(self, merges)) ||
        (r = s_load_added(self, added, &bound)) ||
        (r = s_load_post(self, json_object_get(root, "post_processor")))) {
        if (r == RL_ENOMEM) {
            return s_fail(self, r, "%s: out of memory", path);
        }
        char tmp[sizeof(self->errmsg)];
        snprintf(tmp, sizeof(tmp), "%s", self->errmsg);
        return s_fail(self, r, "%s: %s", path, tmp);
    }
    for (size_t i = 0; i < self->post_prefix.n + self->post_suffix.n; i++) {
        int32_t id = i < self->post_prefix.n ? self->post_prefix.p[i]
                                             : self->post_suffix.p[i - self->post_prefix.n];
        if (id < 0 || id >= self->n_ids || self->kind[id] == S_KIND_NONE) {
            return s_fail(self, RL_EINVAL, "%s: post_processor token id %d is not in the vocab",
                          path, (int)id);
        }
    }
    return 0;
}

static rl_tokenizer_t *s_alloc(void) {
    pthread_once(&s_tables_once, s_tables_init);
    rl_tokenizer_t *self = calloc(1, sizeof(*self));
    if (!self) {
        return NULL;
    }
    self->bos = self->eos = self->pad = -1;
    self->region = onig_region_new();
    if (!self->region) {
        free(self);
        return NULL;
    }
    return self;
}

// Builds a handle from a parsed tokenizer.json; takes the reference to root. NULL with err set
// on failure.
static rl_tokenizer_t *s_new_root(json_t *root, const char *path, char *err, size_t err_len) {
    rl_tokenizer_t *self = s_alloc();
    if (!self) {
        json_decref(root);
        rl_errf(err, err_len, RL_ENOMEM, "out of memory");
        return NULL;
    }
    int r = json_is_object(root) ? s_load_json(self, root, path)
                                 : s_fail(self, RL_EINVAL, "%s: not a JSON object", path);
    json_decref(root);
    if (r) {
        rl_errf(err, err_len, r, "%s", self->errmsg);
        rl_tokenizer_destroy(&self);
        return NULL;
    }
    self->errmsg[0] = '\0';
    return self;
}

rl_tokenizer_t *rl_tokenizer_new(const char *path, char *err, size_t err_len) {
    json_error_t jerr;
    json_t *root = json_load_file(path, 0, &jerr);
    if (!root) {
        FILE *f = fopen(path, "rb");
        if (!f) {
            rl_errf(err, err_len, RL_ENOTFOUND, "%s: %s", path, strerror(errno));
        } else {
            fclose(f);
            rl_errf(err, err_len, RL_EINVAL, "%s:%d:%d: %s", path, jerr.line, jerr.column,
                    jerr.text);
        }
        return NULL;
    }
    return s_new_root(root, path, err, err_len);
}

rl_tokenizer_t *rl_tokenizer_new_from_json(const char *json, size_t len, const char *name,
                                           char *err, size_t err_len) {
    name = name ? name : "tokenizer.json";
    json_error_t jerr;
    json_t *root = json_loadb(json, len, 0, &jerr);
    if (!root) {
        rl_errf(err, err_len, RL_EINVAL, "%s:%d:%d: %s", name, jerr.line, jerr.column, jerr.text);
        return NULL;
    }
    return s_new_root(root, name, err, err_len);
}

int rl_tokenizer_check_vocab(const rl_tokenizer_t *self, int32_t vocab_size, const char *tok_path,
                             const char *config_path, char *err, size_t err_len) {
    if (self->n_ids <= vocab_size) {
        return 0; // fewer ids than the model is fine: padded embeddings
    }
    int32_t id = self->n_ids - 1; // the largest id in use: the tables end at it
    const char *tok = rl_tokenizer_id_to_token(self, id);
    return rl_errf(err, err_len, RL_EINVAL,
                   "%s has token id %d ('%.64s') but %s has vocab_size %d; every token id must "
                   "be below vocab_size", tok_path, (int)id, tok ? tok : "", config_path,
                   (int)vocab_size);
}

// tokenizer_config.json writes special tokens as a string or as {"content": ...}.
static int32_t s_config_token(const rl_tokenizer_t *self, json_t *cfg, const char *key) {
    json_t *v = json_object_get(cfg, key);
    if (json_is_object(v)) {
        v = json_object_get(v, "content");
    }
    return json_is_string(v) ? rl_tokenizer_token_to_id(self, json_string_value(v)) : -1;
}

// A model folder's tokenizer must fit the folder's model: an id at or past config.json's
// vocab_size would index past the embedding table. Only vocab_size is read here; a config.json
// that is absent, unreadable or without an integer vocab_size is left to rl_hf, which reports
// it wherever the model itself is loaded (tokenize needs no model).
static int s_check_dir_config(const rl_tokenizer_t *self, const char *dir, char *err,
                              size_t err_len) {
    char path[4096], tpath[4096];
    snprintf(path, sizeof(path), "%s/config.json", dir);
    snprintf(tpath, sizeof(tpath), "%s/tokenizer.json", dir);
    json_error_t jerr;
    // config.json may hold integers beyond int64 (e.g. 1e30 limits): read them as reals
    json_t *cfg = json_load_file(path, JSON_DECODE_INT_AS_REAL, &jerr);
    json_t *v = json_object_get(cfg, "vocab_size");
    int rc = 0;
    if (json_is_number(v)) {
        double V = json_number_value(v);
        if (V >= 1.0 && V <= (double)INT32_MAX && V == (double)(int32_t)V) {
            rc = rl_tokenizer_check_vocab(self, (int32_t)V, tpath, path, err, err_len);
        }
    }
    json_decref(cfg);
    return rc;
}

rl_tokenizer_t *rl_tokenizer_new_dir(const char *dir, char *err, size_t err_len) {
    char path[4096];
    if (snprintf(path, sizeof(path), "%s/tokenizer.json", dir) >= (int)sizeof(path)) {
        rl_errf(err, err_len, RL_EINVAL, "%s: path too long", dir);
        return NULL;
    }
    rl_tokenizer_t *self = rl_tokenizer_new(path, err, err_len);
    if (!self) {
        return NULL;
    }
    if (s_check_dir_config(self, dir, err, err_len) != 0) {
        rl_tokenizer_destroy(&self);
        return NULL;
    }
    snprintf(path, sizeof(path), "%s/tokenizer_config.json", dir);
    FILE *f = fopen(path, "rb");
    if (!f) {
        return self; // optional: a bare tokenizer.json still encodes and decodes
    }
    fclose(f);
    json_error_t jerr;
    // model_max_length is often 1e30 written as an integer: read big numbers as reals
    json_t *cfg = json_load_file(path, JSON_DECODE_INT_AS_REAL, &jerr);
    if (!cfg) {
        rl_errf(err, err_len, RL_EINVAL, "%s:%d:%d: %s", path, jerr.line, jerr.column, jerr.text);
        rl_tokenizer_destroy(&self);
        return NULL;
    }
    self->bos = s_config_token(self, cfg, "bos_token");
    self->eos = s_config_token(self, cfg, "eos_token");
    self->pad = s_config_token(self, cfg, "pad_token");
    json_decref(cfg);
    return self;
}

void rl_tokenizer_destroy(rl_tokenizer_t **self_p) {
    if (!self_p || !*self_p) {
        return;
    }
    rl_tokenizer_t *self = *self_p;
    free(self->kind);
    free(self->str_off);
    free(self->str_len);
    free(self->raw_off);
    free(self->raw_len);
    free(self->arena.p);
    s_strmap_free(&self->vocab_str);
    s_strmap_free(&self->vocab_raw);
    free(self->merges.slots);
    free(self->added);
    free(self->added_order);
    for (int i = 0; i < self->n_pt; i++) {
        if (self->pt[i].re) {
            onig_free(self->pt[i].re);
        }
        free(self->pt[i].literal);
    }
    free(self->post_prefix.p);
    free(self->post_suffix.p);
    if (self->region) {
        onig_region_free(self->region, 1);
    }
    free(self->work.p);
    free(self->pieces);
    free(self->pieces2);
    free(self->sym);
    free(self->prev);
    free(self->next);
    free(self->heap);
    s_strmap_free(&self->cache);
    free(self->cache_ids.p);
    for (size_t i = 0; i < sizeof(self->cls) / sizeof(self->cls[0]); i++) {
        free(self->cls[i]);
    }
    for (int i = 0; i < 3; i++) {
        if (self->cls_re[i]) {
            onig_free(self->cls_re[i]);
        }
    }
    free(self);
    *self_p = NULL;
}

// ------------------------------------------------------------------------------------------
// BPE on one piece (raw bytes)

static int s_sym_reserve(rl_tokenizer_t *self, size_t n) {
    if (n <= self->cap_sym) {
        return 0;
    }
    size_t c = self->cap_sym ? self->cap_sym : 64;
    while (c < n) {
        c *= 2;
    }
    int32_t *a = realloc(self->sym, c * 4), *b = NULL, *d = NULL;
    if (a) {
        self->sym = a;
        b = realloc(self->prev, c * 4);
    }
    if (b) {
        self->prev = b;
        d = realloc(self->next, c * 4);
    }
    if (!d) {
        return RL_ENOMEM;
    }
    self->next = d;
    self->cap_sym = c;
    return 0;
}

static inline int s_heap_less(const s_heap_item_t *a, const s_heap_item_t *b) {
    return a->rank < b->rank || (a->rank == b->rank && a->pos < b->pos);
}

static int s_heap_push(rl_tokenizer_t *self, size_t *n, s_heap_item_t it) {
    if (s_grow((void **)&self->heap, &self->cap_heap, *n + 1, sizeof(s_heap_item_t))) {
        return RL_ENOMEM;
    }
    s_heap_item_t *h = self->heap;
    size_t i = (*n)++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!s_heap_less(&it, &h[p])) {
            break;
        }
        h[i] = h[p];
        i = p;
    }
    h[i] = it;
    return 0;
}

static s_heap_item_t s_heap_pop(rl_tokenizer_t *self, size_t *n) {
    s_heap_item_t *h = self->heap, top = h[0], last = h[--(*n)];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= *n) {
            break;
        }
        if (c + 1 < *n && s_heap_less(&h[c + 1], &h[c])) {
            c++;
        }
        if (!s_heap_less(&h[c], &last)) {
            break;
        }
        h[i] = h[c];
        i = c;
    }
    if (*n) {
        h[i] = last;
    }
    return top;
}

static int s_push_pair(rl_tokenizer_t *self, size_t *nh, int32_t pos) {
    const s_merge_t *m = s_merge_get(&self->merges, self->sym[pos], self->sym[self->next[pos]]);
    return m ? s_heap_push(self, nh, (s_heap_item_t){m->rank, pos, m->id}) : 0;
}

// Heap merge (as in HF tokenizers' Word::merge_all): pop the lowest (rank, position) pair; skip
// entries made stale by an earlier merge; merge; queue the two new neighbour pairs.
// O(n log n) for long pieces (runs of CJK or whitespace).
static int s_merge_heap(rl_tokenizer_t *self, size_t n, s_ids_t *out) {
    size_t nh = 0;
    for (size_t i = 0; i < n; i++) {
        self->prev[i] = (int32_t)i - 1;
        self->next[i] = i + 1 < n ? (int32_t)i + 1 : -1;
    }
    for (size_t i = 0; i + 1 < n; i++) {
        if (s_push_pair(self, &nh, (int32_t)i)) {
            return RL_ENOMEM;
        }
    }
    while (nh) {
        s_heap_item_t top = s_heap_pop(self, &nh);
        int32_t p = top.pos, q = self->next[p];
        if (self->sym[p] < 0 || q < 0) {
            continue;
        }
        const s_merge_t *m = s_merge_get(&self->merges, self->sym[p], self->sym[q]);
        if (!m || m->id != top.id) {
            continue;
        }
        self->sym[p] = m->id;
        self->sym[q] = -1;
        self->next[p] = self->next[q];
        if (self->next[q] >= 0) {
            self->prev[self->next[q]] = p;
        }
        if ((self->prev[p] >= 0 && s_push_pair(self, &nh, self->prev[p])) ||
            (self->next[p] >= 0 && s_push_pair(self, &nh, p))) {
            return RL_ENOMEM;
        }
    }
    for (int32_t i = n ? 0 : -1; i >= 0; i = self->next[i]) {
        if (s_ids_push(out, self->sym[i])) {
            return RL_ENOMEM;
        }
    }
    return 0;
}

// The naive twin: rescan for the lowest-rank pair (leftmost on ties) after every merge. O(n^2);
// the tests check that it agrees with s_merge_heap on the whole golden corpus.
static int s_merge_ref(rl_tokenizer_t *self, size_t n, s_ids_t *out) {
    int32_t *s = self->sym;
    for (;;) {
        const s_merge_t *best = NULL;
        size_t at = 0;
        for (size_t i = 0; i + 1 < n; i++) {
            const s_merge_t *m = s_merge_get(&self->merges, s[i], s[i + 1]);
            if (m && (!best || m->rank < best->rank)) {
                best = m;
                at = i;
            }
        }
        if (!best) {
            break;
        }
        s[at] = best->id;
        memmove(s + at + 1, s + at + 2, (n - at - 2) * sizeof(int32_t));
        n--;
    }
    return s_ids_append(out, s, n);
}

static int s_bpe(rl_tokenizer_t *self, const char *p, size_t len, int flags, s_ids_t *out) {
    if (len == 0) {
        return 0;
    }
    if (self->ignore_merges) { // Llama-3: a pre-token that is itself a token is emitted whole
        s_slot_t *s = s_strmap_find(&self->vocab_raw, p, len, s_hash(p, len));
        if (s) {
            return s_ids_push(out, s->a);
        }
    }
    int use_cache = !(flags & (RL_TOKENIZER_NO_CACHE | RL_TOKENIZER_REF_BPE)) &&
                    len <= S_CACHE_MAX_PIECE;
    uint64_t h = 0;
    if (use_cache) {
        h = s_hash(p, len);
        s_slot_t *s = s_strmap_find(&self->cache, p, len, h);
        if (s) {
            return s_ids_append(out, self->cache_ids.p + s->a, (size_t)s->b);
        }
    }
    if (s_sym_reserve(self, len)) {
        return RL_ENOMEM;
    }
    size_t n = 0;
    for (size_t i = 0; i < len; i++) {
        int32_t id = self->byte_id[(uint8_t)p[i]];
        if (id >= 0) { // no unk token in byte-level files: HF drops an unknown byte
            self->sym[n++] = id;
        }
    }
    size_t start = out->n;
    int r = (flags & RL_TOKENIZER_REF_BPE) ? s_merge_ref(self, n, out)
                                           : s_merge_heap(self, n, out);
    if (r || !use_cache) {
        return r;
    }
    if (self->cache.count >= S_CACHE_MAX_ENTRIES || self->cache_ids.n > (size_t)INT32_MAX / 2) {
        s_strmap_clear(&self->cache); // crude but bounded: a full cache starts over
        self->cache_ids.n = 0;
    }
    size_t off = self->cache_ids.n;
    if (s_ids_append(&self->cache_ids, out->p + start, out->n - start)) {
        return RL_ENOMEM;
    }
    return s_strmap_put(&self->cache, p, len, (int32_t)off, (int32_t)(out->n - start));
}

// ------------------------------------------------------------------------------------------
// pre-tokenization: pieces are (offset, length) pairs into self->work

static int s_piece_push(size_t **v, size_t *n, size_t *cap, size_t off, size_t len) {
    if (len == 0) {
        return 0; // HF drops empty splits
    }
    if (s_grow((void **)v, cap, *n + 2, 2 * sizeof(size_t))) {
        return RL_ENOMEM;
    }
    (*v)[2 * *n] = off;
    (*v)[2 * *n + 1] = len;
    (*n)++;
    return 0;
}

// Finds the next match in [at, end) of base; returns 0 and sets *ms/*me, or 1 when none.
static size_t s_fast_match(rl_tokenizer_t *self, int kind, const char *base, size_t end,
                           size_t at);

static int s_find(rl_tokenizer_t *self, const s_pretok_t *pt, const char *base, size_t end,
                  size_t at, size_t *ms, size_t *me, int flags) {
    if (pt->fast && !(flags & RL_TOKENIZER_REF_BPE) && at < end) {
        // these patterns match at every position (every character is a letter, a number,
        // whitespace or "other", and each class has an alternative), so no search is needed
        *ms = at;
        *me = s_fast_match(self, pt->fast, base, end, at);
        return 0;
    }
    if (pt->literal) {
        if (pt->literal_len == 0 || end - at < pt->literal_len) {
            return 1;
        }
        for (size_t i = at; i + pt->literal_len <= end; i++) {
            if (memcmp(base + i, pt->literal, pt->literal_len) == 0) {
                *ms = i;
                *me = i + pt->literal_len;
                return 0;
            }
        }
        return 1;
    }
    const OnigUChar *s = (const OnigUChar *)base, *e = s + end;
    // The patterns in use cover every character, so the next match nearly always starts right
    // here: an anchored match skips the search machinery (same result: search tries `at` first).
    int r = onig_match(pt->re, s, e, s + at, self->region, ONIG_OPTION_NONE);
    if (r >= 0) {
        *ms = at;
        *me = at + (size_t)r;
        return 0;
    }
    r = onig_search(pt->re, s, e, s + at, e, self->region, ONIG_OPTION_NONE);
    if (r < 0) {
        return 1;
    }
    *ms = (size_t)r;
    *me = (size_t)self->region->end[0];
    return 0;
}

static size_t s_utf8_len(uint8_t c) {
    return c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
}

// ------------------------------------------------------------------------------------------
// hand-written matchers for the GPT-2, Qwen and Llama-3 patterns
//
// Each returns the end of the match the regex finds at `at` (always non-empty: see s_find),
// trying the alternatives in the pattern's order with the same backtracking outcome:
//   (?i:'s|'t|'re|'ve|'m|'ll|'d)   contractions; case-insensitive for Qwen/Llama-3 (so 'ſ
//                                  matches as 's does: U+017F folds to s)
//   [^\r\n\p{L}\p{N}]?\p{L}+       one optional non-letter/number/CR/LF, then letters
//   \p{N} | \p{N}{1,3}             one number (Qwen) or up to three (Llama-3)
//   ' ?[^\s\p{L}\p{N}]+[\r\n]*'    symbols with an optional leading space, then CR/LF
//   \s*[\r\n]+                     = a whitespace run up to and including its last CR/LF
//   \s+(?!\S)                      = a whitespace run less its last character when a
//                                    non-space follows (the whole run at the end of text)
//   \s+                            = the single whitespace character left
// GPT-2: case-sensitive contractions, ' ?\p{L}+', ' ?\p{N}+', ' ?[^\s\p{L}\p{N}]+', then the
// last two. The classes are Oniguruma's own (s_class), and the unit tests compare these
// matchers with Oniguruma on random strings.

static void s_build_block(rl_tokenizer_t *self, size_t blk) {
    static const char *pats[3] = {"\\p{L}", "\\p{N}", "\\s"};
    uint8_t *b = calloc(256, 1);
    if (!b) {
        return; // s_class answers 0 (class "other") and retries next time
    }
    for (int k = 0; k < 3; k++) {
        if (!self->cls_re[k]) {
            OnigErrorInfo einfo;
            if (onig_new(&self->cls_re[k], (const OnigUChar *)pats[k],
                         (const OnigUChar *)pats[k] + strlen(pats[k]), ONIG_OPTION_NONE,
                         ONIG_ENCODING_UTF8, ONIG_SYNTAX_DEFAULT, &einfo) != ONIG_NORMAL) {
                self->cls_re[k] = NULL;
                free(b);
                return;
            }
        }
    }
    for (int i = 0; i < 256; i++) {
        int32_t cp = (int32_t)(blk << 8) + i;
        if (cp >= 0xD800 && cp <= 0xDFFF) {
            continue; // surrogates never reach here: the text is valid UTF-8
        }
        OnigUChar u[4];
        int n;
        if (cp < 0x80) {
            u[0] = (OnigUChar)cp;
            n = 1;
        } else if (cp < 0x800) {
            u[0] = (OnigUChar)(0xC0 | (cp >> 6));
            u[1] = (OnigUChar)(0x80 | (cp & 0x3F));
            n = 2;
        } else if (cp < 0x10000) {
            u[0] = (OnigUChar)(0xE0 | (cp >> 12));
            u[1] = (OnigUChar)(0x80 | ((cp >> 6) & 0x3F));
            u[2] = (OnigUChar)(0x80 | (cp & 0x3F));
            n = 3;
        } else {
            u[0] = (OnigUChar)(0xF0 | (cp >> 18));
            u[1] = (OnigUChar)(0x80 | ((cp >> 12) & 0x3F));
            u[2] = (OnigUChar)(0x80 | ((cp >> 6) & 0x3F));
            u[3] = (OnigUChar)(0x80 | (cp & 0x3F));
            n = 4;
        }
        for (int k = 0; k < 3; k++) {
            if (onig_match(self->cls_re[k], u, u + n, u, NULL, ONIG_OPTION_NONE) == n) {
                b[i] |= (uint8_t)(1 << k);
            }
        }
        // inert: a starter with no decomposition that takes part in no composition; Hangul
        // composes algorithmically (not in the property table), so it never counts as inert
        const utf8proc_property_t *pr = utf8proc_get_property(cp);
        int hangul = (cp >= 0x1100 && cp <= 0x11FF) || (cp >= 0xA960 && cp <= 0xA97F) ||
                     (cp >= 0xAC00 && cp <= 0xD7FF);
        if (pr->combining_class == 0 && pr->decomp_seqindex == UINT16_MAX &&
            pr->comb_index == UINT16_MAX && !hangul) {
            b[i] |= S_CL_INERT;
        }
    }
    self->cls[blk] = b;
}

static inline int s_class(rl_tokenizer_t *self, int32_t cp) {
    size_t blk = (size_t)cp >> 8;
    if (!self->cls[blk]) {
        s_build_block(self, blk);
        if (!self->cls[blk]) {
            return 0;
        }
    }
    return self->cls[blk][cp & 0xFF];
}

// Code point and class at base[i] (i < end); *n gets its byte length.
static inline int s_cp_at(rl_tokenizer_t *self, const char *base, size_t i, int32_t *cp,
                          size_t *n) {
    *n = (size_t)s_utf8_decode((const uint8_t *)base + i, cp);
    return s_class(self, *cp);
}

static inline int s_is_crlf(int32_t c) {
    return c == '\r' || c == '\n';
}

static inline int s_lower_ascii(int32_t c) {
    return c >= 'A' && c <= 'Z' ? c + 32 : c;
}

// Length of a contraction at base[at] ('s 't 're 've 'm 'll 'd), or 0.
static size_t s_contraction(const char *base, size_t end, size_t at, int fold) {
    if (base[at] != '\'' || at + 1 >= end) {
        return 0;
    }
    int32_t c1, c2 = 0;
    size_t n1 = (size_t)s_utf8_decode((const uint8_t *)base + at + 1, &c1), n2 = 0;
    if (fold) {
        c1 = c1 == 0x17F ? 's' : s_lower_ascii(c1);
    }
    if (c1 == 's' || c1 == 't' || c1 == 'm' || c1 == 'd') {
        return 1 + n1;
    }
    if (at + 1 + n1 < end) {
        n2 = (size_t)s_utf8_decode((const uint8_t *)base + at + 1 + n1, &c2);
        if (fold) {
            c2 = c2 == 0x17F ? 's' : s_lower_ascii(c2);
        }
    }
    if ((c1 == 'r' && c2 == 'e') || (c1 == 'v' && c2 == 'e') || (c1 == 'l' && c2 == 'l')) {
        return 1 + n1 + n2;
    }
    return 0;
}

// End of the run of characters of class test (mask, want) starting at i, at most max chars.
static size_t s_run_of(rl_tokenizer_t *self, const char *base, size_t end, size_t i, int mask,
                       int want, size_t max) {
    size_t count = 0;
    while (i < end && count < max) {
        int32_t cp;
        size_t n;
        if ((s_cp_at(self, base, i, &cp, &n) & mask) != want) {
            break;
        }
        i += n;
        count++;
    }
    return i;
}

static size_t s_fast_match(rl_tokenizer_t *self, int kind, const char *base, size_t end,
                           size_t at) {
    int gpt2 = kind == S_FAST_GPT2;
    size_t k = s_contraction(base, end, at, !gpt2);
    if (k) {
        return at + k;
    }
    int32_t c0, c1 = -1;
    size_t n0, n1 = 0;
    int k0 = s_cp_at(self, base, at, &c0, &n0), k1 = 0;
    if (at + n0 < end) {
        k1 = s_cp_at(self, base, at + n0, &c1, &n1);
    }
    const int LNS = S_CL_L | S_CL_N | S_CL_S;
    if (gpt2) {
        // ' ?\p{L}+', ' ?\p{N}+', ' ?[^\s\p{L}\p{N}]+': the space joins a following run
        int cls = c0 == ' ' && c1 >= 0 ? k1 : k0;
        size_t from = c0 == ' ' && c1 >= 0 && (k1 & S_CL_S) == 0 ? at + n0 : at;
        if (from > at || !(k0 & S_CL_S)) {
            int want = (cls & S_CL_L) ? S_CL_L : (cls & S_CL_N) ? S_CL_N : 0;
            int mask = want ? want : LNS;
            return s_run_of(self, base, end, from, mask, want, SIZE_MAX);
        }
    } else {
        // [^\r\n\p{L}\p{N}]?\p{L}+
        if (k0 & S_CL_L) {
            return s_run_of(self, base, end, at, S_CL_L, S_CL_L, SIZE_MAX);
        }
        if (!(k0 & (S_CL_L | S_CL_N)) && !s_is_crlf(c0) && (k1 & S_CL_L)) {
            return s_run_of(self, base, end, at + n0, S_CL_L, S_CL_L, SIZE_MAX);
        }
        // \p{N} or \p{N}{1,3}
        if (k0 & S_CL_N) {
            return s_run_of(self, base, end, at, S_CL_N, S_CL_N, kind == S_FAST_LLAMA3 ? 3 : 1);
        }
        // ' ?[^\s\p{L}\p{N}]+[\r\n]*'
        size_t from = c0 == ' ' && c1 >= 0 && (k1 & LNS) == 0 ? at + n0 : at;
        if (from > at || (k0 & LNS) == 0) {
            size_t e = s_run_of(self, base, end, from, LNS, 0, SIZE_MAX);
            while (e < end && (base[e] == '\r' || base[e] == '\n')) {
                e++;
            }
            return e;
        }
    }
    // whitespace at `at`: W = the maximal \s run
    size_t e = at, last_crlf = 0, last_start = at;
    int has_crlf = 0;
    while (e < end) {
        int32_t cp;
        size_t n;
        if (!(s_cp_at(self, base, e, &cp, &n) & S_CL_S)) {
            break;
        }
        if (s_is_crlf(cp)) {
            has_crlf = 1;
            last_crlf = e + n;
        }
        last_start = e;
        e += n;
    }
    if (!gpt2 && has_crlf) {
        return last_crlf; // \s*[\r\n]+
    }
    if (e == end || last_start == at) {
        return e; // \s+(?!\S) at the end of text, or \s+ of one character
    }
    return last_start; // \s+(?!\S): leave the last space to join what follows
}

// Splits one piece by a pattern and appends the resulting pieces (HF NormalizedString::split).
static int s_split_piece(rl_tokenizer_t *self, const s_pretok_t *pt, size_t off, size_t len,
                         int flags) {
    const char *base = self->work.p + off;
    // spans of (start, end, is_match) covering the piece, merged per behavior as we go
    size_t at = 0, prev_end = 0;
    int last_match = 0; // is the last pushed piece a match (for MergedWith*/Contiguous)
    size_t first_new = self->n_pieces2;
    for (;;) {
        size_t ms = len, me = len;
        int none = at > len || s_find(self, pt, base, len, at, &ms, &me, flags);
        if (none) {
            ms = me = len;
        }
        // gap [prev_end, ms) then match [ms, me)
        for (int part = 0; part < 2; part++) {
            size_t s = part == 0 ? prev_end : ms, e = part == 0 ? ms : me;
            if (s == e) {
                continue;
            }
            int is_match = (part == 1) != pt->invert;
            size_t n2 = self->n_pieces2;
            size_t *last = n2 > first_new ? &self->pieces2[2 * (n2 - 1)] : NULL;
            switch (pt->behavior) {
            case S_REMOVED:
                if (is_match) {
                    break;
                }
                if (s_piece_push(&self->pieces2, &self->n_pieces2, &self->cap_pieces2, off + s,
                                 e - s)) {
                    return RL_ENOMEM;
                }
                break;
            case S_MERGED_PREV:
                if (is_match && !last_match && last) {
                    last[1] = off + e - last[0];
                } else if (s_piece_push(&self->pieces2, &self->n_pieces2, &self->cap_pieces2,
                                        off + s, e - s)) {
                    return RL_ENOMEM;
                }
                break;
            case S_MERGED_NEXT:
                // a match joins the non-match after it (HF walks backwards; same result)
                if (!is_match && last_match && last) {
                    last[1] = off + e - last[0];
                } else if (s_piece_push(&self->pieces2, &self->n_pieces2, &self->cap_pieces2,
                                        off + s, e - s)) {
                    return RL_ENOMEM;
                }
                break;
            case S_CONTIGUOUS:
                if (last && is_match == last_match) {
                    last[1] = off + e - last[0];
                } else if (s_piece_push(&self->pieces2, &self->n_pieces2, &self->cap_pieces2,
                                        off + s, e - s)) {
                    return RL_ENOMEM;
                }
                break;
            default: // Isolated
                if (s_piece_push(&self->pieces2, &self->n_pieces2, &self->cap_pieces2, off + s,
                                 e - s)) {
                    return RL_ENOMEM;
                }
            }
            last_match = is_match;
        }
        if (none) {
            break;
        }
        prev_end = me;
        // an empty match would loop forever: step one character past it (onig find_iter)
        at = me > ms ? me : me + (me < len ? s_utf8_len((uint8_t)base[me]) : 1);
    }
    return 0;
}

// Runs the pre-tokenizers on work[off, off+len) and leaves the pieces in self->pieces.
static int s_pretokenize(rl_tokenizer_t *self, size_t off, size_t len, int flags) {
    self->n_pieces = 0;
    if (s_piece_push(&self->pieces, &self->n_pieces, &self->cap_pieces, off, len)) {
        return RL_ENOMEM;
    }
    for (int k = 0; k < self->n_pt; k++) {
        const s_pretok_t *pt = &self->pt[k];
        if (pt->kind == S_PT_BYTELEVEL && pt->add_prefix_space) {
            // prepend a space to each piece that does not start with one (copied to the end)
            for (size_t i = 0; i < self->n_pieces; i++) {
                size_t po = self->pieces[2 * i], pl = self->pieces[2 * i + 1];
                if (self->work.p[po] == ' ') {
                    continue;
                }
                size_t no = self->work.n;
                if (s_grow((void **)&self->work.p, &self->work.cap, no + pl + 2, 1)) {
                    return RL_ENOMEM;
                }
                self->work.p[self->work.n++] = ' ';
                memcpy(self->work.p + self->work.n, self->work.p + po, pl);
                self->work.n += pl;
                self->pieces[2 * i] = no;
                self->pieces[2 * i + 1] = pl + 1;
            }
        }
        if (!pt->re && !pt->literal) {
            continue; // ByteLevel without regex: the byte mapping is implicit (raw bytes)
        }
        self->n_pieces2 = 0;
        for (size_t i = 0; i < self->n_pieces; i++) {
            int r = s_split_piece(self, pt, self->pieces[2 * i], self->pieces[2 * i + 1], flags);
            if (r) {
                return r;
            }
        }
        size_t *t = self->pieces, tc = self->cap_pieces;
        self->pieces = self->pieces2;
        self->cap_pieces = self->cap_pieces2;
        self->n_pieces = self->n_pieces2;
        self->pieces2 = t;
        self->cap_pieces2 = tc;
    }
    return 0;
}

// Appends the normal form of text[0, len) (the normalizers in order) to work.
static int s_normalize(rl_tokenizer_t *self, const char *text, size_t len) {
    utf8proc_uint8_t *cur = NULL;
    utf8proc_ssize_t n = (utf8proc_ssize_t)len;
    const utf8proc_uint8_t *src = (const utf8proc_uint8_t *)text;
    for (int k = 0; k < self->n_norm; k++) {
        int opt = UTF8PROC_STABLE;
        switch (self->norm[k]) {
        case S_NORM_NFC: opt |= UTF8PROC_COMPOSE; break;
        case S_NORM_NFD: opt |= UTF8PROC_DECOMPOSE; break;
        case S_NORM_NFKC: opt |= UTF8PROC_COMPOSE | UTF8PROC_COMPAT; break;
        default: opt |= UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT; break;
        }
        utf8proc_uint8_t *dst = NULL;
        n = utf8proc_map(src, n, &dst, (utf8proc_option_t)opt);
        free(cur);
        if (n < 0) {
            return n == UTF8PROC_ERROR_NOMEM ? RL_ENOMEM
                                             : s_fail(self, RL_EINVAL, "normalization: %s",
                                                      utf8proc_errmsg(n));
        }
        cur = dst;
        src = dst;
    }
    int r = s_bytes_append(&self->work, cur, (size_t)n);
    free(cur);
    return r ? RL_ENOMEM : 0;
}

// Normalizes text[0, len) into work and pre-tokenizes + BPEs it into out.
static int s_encode_segment(rl_tokenizer_t *self, const char *text, size_t len, int flags,
                            s_ids_t *out) {
    if (len == 0) {
        return 0;
    }
    self->work.n = 0;
    if (self->n_norm == 0) {
        if (s_bytes_append(&self->work, text, len)) {
            return RL_ENOMEM;
        }
    } else if (flags & RL_TOKENIZER_REF_BPE) { // the reference: the whole segment at once
        int r = s_normalize(self, text, len);
        if (r) {
            return r;
        }
    } else {
        // Normalize only the chunks that need it. A chunk boundary sits before an ASCII
        // character: ASCII is a starter that never composes with what precedes it, so the
        // normal form of the whole is the concatenation of the chunks' normal forms. Chunks of
        // ASCII and inert characters are copied as they are.
        size_t i = 0, clean = 0; // [clean, i) is pending, copied raw
        while (i < len) {
            if ((uint8_t)text[i] < 0x80) {
                i++;
                continue;
            }
            int32_t cp;
            int n = s_utf8_decode((const uint8_t *)text + i, &cp);
            if (s_class(self, cp) & S_CL_INERT) {
                i += (size_t)n;
                continue;
            }
            size_t start = i, end = i;
            while (start > clean && (uint8_t)text[start - 1] >= 0x80) {
                start--;
            }
            if (start > clean) {
                start--; // the ASCII character before: it may be the base of a combining mark
            }
            while (end < len && (uint8_t)text[end] >= 0x80) {
                end++;
            }
            int r = s_bytes_append(&self->work, text + clean, start - clean);
            if (!r) {
                r = s_normalize(self, text + start, end - start);
            }
            if (r) {
                return r;
            }
            clean = i = end;
        }
        if (s_bytes_append(&self->work, text + clean, len - clean)) {
            return RL_ENOMEM;
        }
    }
    int r = s_pretokenize(self, 0, self->work.n, flags);
    for (size_t i = 0; !r && i < self->n_pieces; i++) {
        r = s_bpe(self, self->work.p + self->pieces[2 * i], self->pieces[2 * i + 1], flags, out);
    }
    return r;
}

// Leftmost-longest added token at or after `from`; returns 1 and the match [*ms, *me) (with
// lstrip/rstrip whitespace absorbed) and its index, or 0 when none.
static int s_next_added(const rl_tokenizer_t *self, const char *text, size_t len, size_t from,
                        size_t *ms, size_t *me, size_t *idx) {
    for (size_t i = from; i < len; i++) {
        const s_bucket_t *b = &self->buckets[(uint8_t)text[i]];
        for (int32_t j = b->lo; j < b->hi; j++) {
            const s_added_t *a = &self->added[self->added_order[j]];
            if (a->len > len - i || memcmp(text + i, self->arena.p + a->off, a->len) != 0) {
                continue;
            }
            size_t s = i, e = i + a->len;
            if (a->single_word) {
                int32_t cp = 0;
                int glued = 0;
                if (s > 0) {
                    size_t q = s - 1;
                    while (q > 0 && ((uint8_t)text[q] & 0xC0) == 0x80) {
                        q--;
                    }
                    s_utf8_decode((const uint8_t *)text + q, &cp);
                    glued = s_is_word(cp);
                }
                if (!glued && e < len) {
                    s_utf8_decode((const uint8_t *)text + e, &cp);
                    glued = s_is_word(cp);
                }
                if (glued) {
                    i = e - 1; // HF skips this match and resumes after it
                    break;
                }
            }
            if (a->lstrip) {
                while (s > from) {
                    size_t q = s - 1;
                    while (q > from && ((uint8_t)text[q] & 0xC0) == 0x80) {
                        q--;
                    }
                    int32_t cp;
                    s_utf8_decode((const uint8_t *)text + q, &cp);
                    if (!s_is_space(cp)) {
                        break;
                    }
                    s = q;
                }
            }
            if (a->rstrip) {
                while (e < len) {
                    int32_t cp;
                    int k2 = s_utf8_decode((const uint8_t *)text + e, &cp);
                    if (!s_is_space(cp)) {
                        break;
                    }
                    e += (size_t)k2;
                }
            }
            *ms = s;
            *me = e;
            *idx = (size_t)self->added_order[j];
            return 1;
        }
    }
    return 0;
}

int rl_tokenizer_encode(rl_tokenizer_t *self, const char *text, size_t len, int flags,
                        int32_t **ids_p, size_t *n_p) {
    *ids_p = NULL;
    *n_p = 0;
    self->errmsg[0] = '\0';
    size_t valid = rl_tokenizer_utf8_valid_prefix(text, len);
    if (valid != len) {
        return s_fail(self, RL_EINVAL, "text is not valid UTF-8 (byte offset %zu)", valid);
    }
    if ((flags & RL_TOKENIZER_ADD_SPECIAL) && self->post == S_POST_UNSUPPORTED) {
        return s_fail(self, RL_EUNSUPPORTED, "post_processor '%s' is not supported for "
                      "add_special_tokens (TemplateProcessing, ByteLevel, Sequence)",
                      self->post_name);
    }
    s_ids_t out = {0};
    int r = 0;
    if (flags & RL_TOKENIZER_ADD_SPECIAL) {
        r = s_ids_append(&out, self->post_prefix.p, self->post_prefix.n);
    }
    size_t at = 0;
    while (!r && at < len) { // (text may be NULL when len is 0)
        size_t ms = len, me = len, idx = 0;
        int hit = self->n_added && s_next_added(self, text, len, at, &ms, &me, &idx);
        r = s_encode_segment(self, text + at, ms - at, flags, &out);
        if (!r && hit) {
            r = s_ids_push(&out, self->added[idx].id);
        }
        if (!hit) {
            break;
        }
        at = me;
    }
    if (!r && (flags & RL_TOKENIZER_ADD_SPECIAL)) {
        r = s_ids_append(&out, self->post_suffix.p, self->post_suffix.n);
    }
    if (r) {
        free(out.p);
        if (!self->errmsg[0]) {
            s_fail(self, r, "encode: %s", rl_strerror(r));
        }
        return r;
    }
    if (!out.p) { // empty text: still hand back a freeable pointer
        out.p = malloc(sizeof(int32_t));
        if (!out.p) {
            return s_fail(self, RL_ENOMEM, "encode: out of memory");
        }
    }
    *ids_p = out.p;
    *n_p = out.n;
    return 0;
}

// ------------------------------------------------------------------------------------------
// decoding

int rl_tokenizer_decode(const rl_tokenizer_t *self, const int32_t *ids, size_t n, int flags,
                        char **text_p, size_t *len_p) {
    rl_tokenizer_t *mut = (rl_tokenizer_t *)self; // errmsg only
    *text_p = NULL;
    if (len_p) {
        *len_p = 0;
    }
    mut->errmsg[0] = '\0';
    // worst case: every byte of a run becomes U+FFFD (3 bytes)
    size_t cap = 1;
    for (size_t i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= self->n_ids || self->kind[ids[i]] == S_KIND_NONE) {
            return s_fail(mut, RL_EINVAL, "token id %lld is not in the vocabulary (size %d)",
                          (long long)ids[i], (int)self->n_ids);
        }
        cap += 3 * (size_t)self->raw_len[ids[i]];
    }
    char *out = malloc(cap), *run = NULL;
    size_t o = 0, run_n = 0, run_cap = 0;
    if (!out) {
        return s_fail(mut, RL_ENOMEM, "decode: out of memory");
    }
    // Byte runs between added tokens are decoded separately, as the JS port's ByteLevel decoder
    // does; added tokens are emitted as their content.
    for (size_t i = 0; i <= n; i++) {
        int k = i < n ? self->kind[ids[i]] : S_KIND_NONE;
        if (k == S_KIND_SPECIAL && (flags & RL_TOKENIZER_SKIP_SPECIAL)) {
            continue; // filtered before decoding: the byte runs around it join
        }
        if (k == S_KIND_VOCAB) {
            if (s_grow((void **)&run, &run_cap, run_n + self->raw_len[ids[i]], 1)) {
                free(out);
                free(run);
                return s_fail(mut, RL_ENOMEM, "decode: out of memory");
            }
            memcpy(run + run_n, self->arena.p + self->raw_off[ids[i]], self->raw_len[ids[i]]);
            run_n += self->raw_len[ids[i]];
            continue;
        }
        o += rl_tokenizer_utf8_lossy(out + o, run ? run : "", run_n);
        run_n = 0;
        if (i == n) {
            break;
        }
        memcpy(out + o, self->arena.p + self->raw_off[ids[i]], self->raw_len[ids[i]]);
        o += self->raw_len[ids[i]];
    }
    out[o] = '\0';
    free(run);
    *text_p = out;
    if (len_p) {
        *len_p = o;
    }
    return 0;
}

const char *rl_tokenizer_token_bytes(const rl_tokenizer_t *self, int32_t id, size_t *len_p) {
    if (id < 0 || id >= self->n_ids || self->kind[id] == S_KIND_NONE) {
        return NULL;
    }
    if (len_p) {
        *len_p = self->raw_len[id];
    }
    return self->arena.p + self->raw_off[id];
}

int32_t rl_tokenizer_token_to_id(const rl_tokenizer_t *self, const char *token) {
    size_t n = strlen(token);
    for (size_t i = 0; i < self->n_added; i++) { // added tokens first, as HF does
        const s_added_t *a = &self->added[i];
        if (a->len == n && memcmp(self->arena.p + a->off, token, n) == 0) {
            return a->id;
        }
    }
    return s_vocab_lookup(self, token, n);
}

const char *rl_tokenizer_id_to_token(const rl_tokenizer_t *self, int32_t id) {
    if (id < 0 || id >= self->n_ids || self->kind[id] == S_KIND_NONE) {
        return NULL;
    }
    return self->arena.p + self->str_off[id];
}

int32_t rl_tokenizer_vocab_size(const rl_tokenizer_t *self) {
    return self->n_ids;
}

int rl_tokenizer_is_special(const rl_tokenizer_t *self, int32_t id) {
    return id >= 0 && id < self->n_ids && self->kind[id] == S_KIND_SPECIAL;
}

int32_t rl_tokenizer_bos_id(const rl_tokenizer_t *self) {
    return self->bos;
}

int32_t rl_tokenizer_eos_id(const rl_tokenizer_t *self) {
    return self->eos;
}

int32_t rl_tokenizer_pad_id(const rl_tokenizer_t *self) {
    return self->pad;
}

const char *rl_tokenizer_errmsg(const rl_tokenizer_t *self) {
    return self->errmsg;
}

int rl_tokenizer_decode_known(const rl_tokenizer_t *self, const int32_t *ids, size_t n, int flags,
                              char **text_p, size_t *len_p) {
    *text_p = NULL;
    if (len_p) {
        *len_p = 0;
    }
    int32_t *known = malloc((n ? n : 1) * sizeof(int32_t));
    if (!known) {
        return RL_ENOMEM;
    }
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        if (rl_tokenizer_id_to_token(self, ids[i])) {
            known[m++] = ids[i];
        }
    }
    int rc = rl_tokenizer_decode(self, known, m, flags, text_p, len_p);
    free(known);
    return rc;
}
