// rl_safetensors — safetensors reader (mmap + full header validation), sharded folders, dtype
// conversion and an atomic writer. The rules enforced are REFERENCE.md §3 and are listed with
// their exact messages in docs/formats.md; keep the two in step. Not a model loader: it knows
// tensors by name only.
#include "rl_safetensors.h"

#include "rl_err.h"

#include <jansson.h>

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
#define S_BIG_ENDIAN 1
#else
#define S_BIG_ENDIAN 0
#endif

#define S_INDEX_NAME "model.safetensors.index.json"
#define S_SINGLE_NAME "model.safetensors"

// ---- error messages ------------------------------------------------------------------------

// Every message is "<path>: <what>" when a path is known (rl_st_parse has none).
static int s_fail(char *err, size_t err_len, const char *path, int code, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static int s_fail(char *err, size_t err_len, const char *path, int code, const char *fmt, ...) {
    char what[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    // Names and JSON excerpts come from the file: a newline or escape in them must not split
    // the one-line message or reach a terminal.
    for (char *p = what; *p; p++) {
        if ((unsigned char)*p < 0x20 || *p == 0x7f) {
            *p = '?';
        }
    }
    if (path) {
        return rl_errf(err, err_len, code, "%s: %s", path, what);
    }
    return rl_errf(err, err_len, code, "%s", what);
}

// Tensor names come from untrusted files: cap them in messages so one absurd name cannot push
// the useful part of the message out of the caller's buffer.
#define S_NAME_FMT "%.200s"

// ---- name hash (FNV-1a, open addressing) ---------------------------------------------------

typedef struct {
    uint32_t *slots; // index + 1 into the owner's tensor list; 0 = empty
    size_t mask;
} s_hash_t;

static uint64_t s_fnv1a(const char *s) {
    uint64_t h = 1469598103934665603ULL;
    for (; *s; s++) {
        h ^= (unsigned char)*s;
        h *= 1099511628211ULL;
    }
    return h;
}

static int s_hash_init(s_hash_t *h, size_t n) {
    size_t cap = 8;
    while (cap < 2 * n) {
        cap <<= 1;
    }
    h->slots = calloc(cap, sizeof *h->slots);
    h->mask = cap - 1;
    return h->slots ? 0 : RL_ENOMEM;
}

// Inserts index i (name names[i]); returns the index already holding that name, or -1.
static int s_hash_insert(s_hash_t *h, const char *name, int i,
                         const rl_st_tensor_t *const *list) {
    size_t pos = (size_t)s_fnv1a(name) & h->mask;
    while (h->slots[pos]) {
        int j = (int)h->slots[pos] - 1;
        if (strcmp(list[j]->name, name) == 0) {
            return j;
        }
        pos = (pos + 1) & h->mask;
    }
    h->slots[pos] = (uint32_t)i + 1;
    return -1;
}

static int s_hash_find(const s_hash_t *h, const char *name, const rl_st_tensor_t *const *list) {
    if (!h->slots) {
        return -1;
    }
    size_t pos = (size_t)s_fnv1a(name) & h->mask;
    while (h->slots[pos]) {
        int j = (int)h->slots[pos] - 1;
        if (strcmp(list[j]->name, name) == 0) {
            return j;
        }
        pos = (pos + 1) & h->mask;
    }
    return -1;
}

// ---- dtypes and conversion -----------------------------------------------------------------

size_t rl_dtype_size(rl_dtype_t dt) {
    return dt == RL_DTYPE_F32 ? 4 : 2;
}

const char *rl_dtype_name(rl_dtype_t dt) {
    switch (dt) {
    case RL_DTYPE_F32: return "F32";
    case RL_DTYPE_F16: return "F16";
    case RL_DTYPE_BF16: return "BF16";
    }
    return "?";
}

static int s_dtype_parse(const char *s, rl_dtype_t *out) {
    if (strcmp(s, "F32") == 0) {
        *out = RL_DTYPE_F32;
    } else if (strcmp(s, "F16") == 0) {
        *out = RL_DTYPE_F16;
    } else if (strcmp(s, "BF16") == 0) {
        *out = RL_DTYPE_BF16;
    } else {
        return -1;
    }
    return 0;
}

static uint32_t s_f32_bits(float x) {
    uint32_t u;
    memcpy(&u, &x, 4);
    return u;
}

static float s_bits_f32(uint32_t u) {
    float x;
    memcpy(&x, &u, 4);
    return x;
}

float rl_bf16_to_f32(uint16_t x) {
    return s_bits_f32((uint32_t)x << 16);
}

uint16_t rl_f32_to_bf16(float x) {
    uint32_t u = s_f32_bits(x);
    if ((u & 0x7fffffffu) > 0x7f800000u) {
        // NaN: keep sign and top payload bits, force the quiet bit so truncation never turns
        // a NaN whose payload lives in the low 16 bits into an infinity.
        return (uint16_t)((u >> 16) | 0x0040u);
    }
    // Round to nearest even: add 0x7fff plus the lowest kept bit; a carry out of the mantissa
    // bumps the exponent, which is exactly the rounded value (up to inf at the top).
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

float rl_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t man = h & 0x3ffu;
    if (exp == 0x1f) {
        return s_bits_f32(sign | 0x7f800000u | (man << 13)); // inf, or nan with its payload
    }
    if (exp != 0) {
        return s_bits_f32(sign | ((exp + 112u) << 23) | (man << 13)); // rebias 15 -> 127
    }
    if (man == 0) {
        return s_bits_f32(sign);
    }
    // Subnormal: value = man * 2^-24; normalise so the leading 1 becomes the implicit bit.
    int e = -1;
    do {
        man <<= 1;
        e++;
    } while (!(man & 0x400u));
    man &= 0x3ffu;
    return s_bits_f32(sign | ((uint32_t)(112 - e) << 23) | (man << 13));
}

uint16_t rl_f32_to_f16(float x) {
    uint32_t u = s_f32_bits(x);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u) {
        return (uint16_t)(sign | 0x7e00u | ((a >> 13) & 0x3ffu)); // quiet NaN, payload kept
    }
    if (a >= 0x477ff000u) {
        // >= 65520 = halfway between 65504 (max finite, odd mantissa) and 65536: ties go to
        // the even neighbour, which is infinity.
        return (uint16_t)(sign | 0x7c00u);
    }
    if (a < 0x38800000u) {
        // Below 2^-14: the f16 subnormal unit is 2^-24, and a = m * 2^(e-150) with the
        // implicit bit, so the subnormal count is m >> (126 - e), rounded to nearest even.
        uint32_t e = a >> 23;
        if (e < 102) {
            return sign; // < 2^-25 = half the smallest subnormal: rounds to zero
        }
        uint32_t m = (a & 0x7fffffu) | 0x800000u;
        uint32_t shift = 126 - e; // 14..24
        uint32_t r = m >> shift;
        uint32_t rem = m & ((1u << shift) - 1u);
        uint32_t half = 1u << (shift - 1);
        if (rem > half || (rem == half && (r & 1u))) {
            r++; // may carry into 0x400, the smallest normal: the right encoding
        }
        return (uint16_t)(sign | r);
    }
    uint32_t r = a - 0x38000000u; // rebias 127 -> 15
    uint32_t h = r >> 13;
    uint32_t rem = r & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) {
        h++;
    }
    return (uint16_t)(sign | h);
}

static uint16_t s_le16(const uint8_t *p) {
    return (uint16_t)(p[0] | (p[1] << 8));
}

static uint64_t s_le64(const uint8_t *p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) {
        v = (v << 8) | p[i];
    }
    return v;
}

// A value is NaN or +-inf when its exponent bits are all ones: F32 0x7f800000, BF16 0x7f80,
// F16 0x7c00. The scan ORs a flag over blocks of elements (a loop the compiler vectorises, as
// fast as reading the bytes) and looks for the index only inside a block that has one.
int64_t rl_st_nonfinite(const rl_st_tensor_t *t) {
    const uint8_t *p = t->data;
    const size_t n = (size_t)t->numel, es = rl_dtype_size(t->dtype), blk = 4096;
    const uint32_t mask = t->dtype == RL_DTYPE_F32   ? 0x7f800000u
                          : t->dtype == RL_DTYPE_BF16 ? 0x7f80u
                                                      : 0x7c00u;
    for (size_t b = 0; b < n; b += blk) {
        size_t e = b + blk < n ? b + blk : n;
        uint32_t any = 0;
        if (es == 4) {
            for (size_t i = b; i < e; i++) {
                uint32_t u = (uint32_t)p[4 * i] | (uint32_t)p[4 * i + 1] << 8 |
                             (uint32_t)p[4 * i + 2] << 16 | (uint32_t)p[4 * i + 3] << 24;
                any |= (uint32_t)((u & mask) == mask);
            }
        } else {
            for (size_t i = b; i < e; i++) {
                uint32_t u = s_le16(p + 2 * i);
                any |= (uint32_t)((u & mask) == mask);
            }
        }
        if (!any) {
            continue;
        }
        for (size_t i = b; i < e; i++) {
            uint32_t u = es == 4 ? (uint32_t)p[4 * i] | (uint32_t)p[4 * i + 1] << 8 |
                                       (uint32_t)p[4 * i + 2] << 16 | (uint32_t)p[4 * i + 3] << 24
                                 : s_le16(p + 2 * i);
            if ((u & mask) == mask) {
                return (int64_t)i;
            }
        }
    }
    return -1;
}

int rl_st_check_finite(const rl_st_tensor_t *t, const char *where, char *err, size_t err_len) {
    int64_t i = rl_st_nonfinite(t);
    if (i < 0) {
        return 0;
    }
    rl_st_tensor_t one = *t;
    one.numel = 1;
    one.data = (const uint8_t *)t->data + (size_t)i * rl_dtype_size(t->dtype);
    float v;
    rl_st_to_f32(&v, &one);
    char shape[160] = "";
    size_t o = 0;
    for (int d = 0; d < t->ndim && o < sizeof shape; d++) {
        o += (size_t)snprintf(shape + o, sizeof shape - o, "%s%lld", d ? ", " : "",
                              (long long)t->shape[d]);
    }
    return rl_errf(err, err_len, RL_EINVAL,
                   "%s: tensor '%s' holds a non-finite value (%s at element %lld of [%s]); the "
                   "weights are damaged",
                   where, t->name, isnan(v) ? "nan" : v > 0 ? "inf" : "-inf", (long long)i,
                   shape);
}

void rl_st_to_f32(float *dst, const rl_st_tensor_t *t) {
    const uint8_t *p = t->data;
    size_t n = (size_t)t->numel;
    if (n == 0) {
        return;
    }
    switch (t->dtype) {
    case RL_DTYPE_F32:
        if (!S_BIG_ENDIAN) {
            memcpy(dst, p, n * 4); // data may be unaligned when the header is not padded
        } else {
            for (size_t i = 0; i < n; i++) {
                uint32_t u = (uint32_t)p[4 * i] | (uint32_t)p[4 * i + 1] << 8 |
                             (uint32_t)p[4 * i + 2] << 16 | (uint32_t)p[4 * i + 3] << 24;
                dst[i] = s_bits_f32(u);
            }
        }
        break;
    case RL_DTYPE_BF16:
        if (!S_BIG_ENDIAN) {
            // memcpy loads/stores (no aliasing, any alignment) so the compiler vectorises the
            // widening shift; this loop is the whole cost of loading a BF16 checkpoint.
            uint32_t *d32 = (uint32_t *)(void *)dst;
            for (size_t i = 0; i < n; i++) {
                uint16_t h;
                memcpy(&h, p + 2 * i, 2);
                uint32_t u = (uint32_t)h << 16;
                memcpy(&d32[i], &u, 4);
            }
        } else {
            for (size_t i = 0; i < n; i++) {
                dst[i] = s_bits_f32((uint32_t)s_le16(p + 2 * i) << 16);
            }
        }
        break;
    case RL_DTYPE_F16:
        for (size_t i = 0; i < n; i++) {
            dst[i] = rl_f16_to_f32(s_le16(p + 2 * i));
        }
        break;
    }
}

// ---- one file: parse and validate ----------------------------------------------------------

typedef struct {
    rl_st_tensor_t t;
    uint64_t begin, end; // data_offsets, relative to the start of the data section
} s_entry_t;

struct rl_st_file {
    void *map; // owned mmap (rl_st_file_open) or NULL (rl_st_parse borrows the caller's bytes)
    size_t map_len;
    int n;
    s_entry_t *entries; // sorted by data offsets
    const rl_st_tensor_t **list; // entries[i].t, for the shared hash helpers
    s_hash_t hash;
    int nmeta;
    char **meta_keys;
    char **meta_values;
};

void rl_st_file_destroy(rl_st_file_t **self_p) {
    if (!self_p || !*self_p) {
        return;
    }
    rl_st_file_t *self = *self_p;
    for (int i = 0; i < self->n; i++) {
        free((char *)self->entries[i].t.name);
    }
    free(self->entries);
    free(self->list);
    free(self->hash.slots);
    for (int i = 0; i < self->nmeta; i++) {
        free(self->meta_keys[i]);
        free(self->meta_values[i]);
    }
    free(self->meta_keys);
    free(self->meta_values);
    if (self->map) {
        munmap(self->map, self->map_len);
    }
    free(self);
    *self_p = NULL;
}

// Formats a shape as "[2,3]" for messages.
static void s_shape_str(char *buf, size_t len, const rl_st_tensor_t *t) {
    size_t off = 0;
    off += (size_t)snprintf(buf + off, len - off, "[");
    for (int d = 0; d < t->ndim && off < len; d++) {
        off += (size_t)snprintf(buf + off, len - off, d ? ",%lld" : "%lld",
                                (long long)t->shape[d]);
    }
    if (off < len) {
        snprintf(buf + off, len - off, "]");
    }
}

// Validates one tensor entry `v` named `name` into e (name not yet set).
static int s_parse_entry(const char *path, const char *name, json_t *v, s_entry_t *e,
                         char *err, size_t err_len) {
    if (!json_is_object(v)) {
        return s_fail(err, err_len, path, RL_EPROTO,
                      "tensor '" S_NAME_FMT "': entry is not an object", name);
    }
    const char *key;
    json_t *val;
    json_object_foreach(v, key, val) {
        if (strcmp(key, "dtype") != 0 && strcmp(key, "shape") != 0 &&
            strcmp(key, "data_offsets") != 0) {
            return s_fail(err, err_len, path, RL_EPROTO,
                          "tensor '" S_NAME_FMT "': unknown key '" S_NAME_FMT
                          "' (expected dtype, shape, data_offsets)",
                          name, key);
        }
    }
    json_t *dt = json_object_get(v, "dtype");
    if (!dt) {
        return s_fail(err, err_len, path, RL_EPROTO,
                      "tensor '" S_NAME_FMT "': missing \"dtype\"", name);
    }
    if (!json_is_string(dt)) {
        return s_fail(err, err_len, path, RL_EPROTO,
                      "tensor '" S_NAME_FMT "': \"dtype\" is not a string", name);
    }
    if (s_dtype_parse(json_string_value(dt), &e->t.dtype) != 0) {
        return s_fail(err, err_len, path, RL_EUNSUPPORTED,
                      "tensor '" S_NAME_FMT "': dtype " S_NAME_FMT
                      " is not supported (F32, F16, BF16)",
                      name, json_string_value(dt));
    }
    json_t *shape = json_object_get(v, "shape");
    if (!shape) {
        return s_fail(err, err_len, path, RL_EPROTO,
                      "tensor '" S_NAME_FMT "': missing \"shape\"", name);
    }
    if (!json_is_array(shape)) {
        return s_fail(err, err_len, path, RL_EPROTO,
                      "tensor '" S_NAME_FMT "': \"shape\" is not an array", name);
    }
    size_t ndim = json_array_size(shape);
    if (ndim > RL_ST_MAX_DIMS) {
        return s_fail(err, err_len, path, RL_EUNSUPPORTED,
                      "tensor '" S_NAME_FMT "': shape has %zu dimensions, at most %d are supported",
                      name, ndim, RL_ST_MAX_DIMS);
    }
    e->t.ndim = (int)ndim;
    // numel is the true product: a zero dim makes it 0 even if the other dims would overflow.
    int64_t numel = 1;
    int overflow = 0, zero = 0;
    for (size_t d = 0; d < ndim; d++) {
        json_t *x = json_array_get(shape, d);
        if (!json_is_integer(x) || json_integer_value(x) < 0) {
            return s_fail(err, err_len, path, RL_EPROTO,
                          "tensor '" S_NAME_FMT "': shape[%zu] is not a non-negative integer",
                          name, d);
        }
        int64_t dim = (int64_t)json_integer_value(x);
        e->t.shape[d] = dim;
        if (dim == 0) {
            zero = 1;
        } else if (!overflow && __builtin_mul_overflow(numel, dim, &numel)) {
            overflow = 1;
        }
    }
    int64_t nbytes = 0;
    if (zero) {
        numel = 0;
    } else if (overflow ||
               __builtin_mul_overflow(numel, (int64_t)rl_dtype_size(e->t.dtype), &nbytes)) {
        return s_fail(err, err_len, path, RL_EPROTO,
                      "tensor '" S_NAME_FMT "': the byte size of shape overflows 64 bits", name);
    }
    e->t.numel = numel;
    json_t *offs = json_object_get(v, "data_offsets");
    if (!offs) {
        return s_fail(err, err_len, path, RL_EPROTO,
                      "tensor '" S_NAME_FMT "': missing \"data_offsets\"", name);
    }
    if (!json_is_array(offs) || json_array_size(offs) != 2 ||
        !json_is_integer(json_array_get(offs, 0)) || !json_is_integer(json_array_get(offs, 1)) ||
        json_integer_value(json_array_get(offs, 0)) < 0 ||
        json_integer_value(json_array_get(offs, 1)) < 0) {
        return s_fail(err, err_len, path, RL_EPROTO,
                      "tensor '" S_NAME_FMT
                      "': \"data_offsets\" is not [begin, end] with non-negative integers",
                      name);
    }
    e->begin = (uint64_t)json_integer_value(json_array_get(offs, 0));
    e->end = (uint64_t)json_integer_value(json_array_get(offs, 1));
    if (e->begin > e->end) {
        return s_fail(err, err_len, path, RL_EPROTO,
                      "tensor '" S_NAME_FMT "': data_offsets [%llu,%llu] have begin > end", name,
                      (unsigned long long)e->begin, (unsigned long long)e->end);
    }
    if (e->end - e->begin != (uint64_t)nbytes) {
        char sh[160];
        s_shape_str(sh, sizeof sh, &e->t);
        return s_fail(err, err_len, path, RL_EPROTO,
                      "tensor '" S_NAME_FMT "': data_offsets [%llu,%llu] hold %llu bytes but "
                      "%s %s needs %lld",
                      name, (unsigned long long)e->begin, (unsigned long long)e->end,
                      (unsigned long long)(e->end - e->begin), rl_dtype_name(e->t.dtype), sh,
                      (long long)nbytes);
    }
    e->t.nbytes = (size_t)nbytes;
    return 0;
}

static int s_entry_cmp(const void *pa, const void *pb) {
    const s_entry_t *a = pa, *b = pb;
    if (a->begin != b->begin) {
        return a->begin < b->begin ? -1 : 1;
    }
    if (a->end != b->end) {
        return a->end < b->end ? -1 : 1;
    }
    return strcmp(a->t.name, b->t.name);
}

static int s_parse_metadata(rl_st_file_t *f, const char *path, json_t *m, char *err,
                            size_t err_len) {
    if (!json_is_object(m)) {
        return s_fail(err, err_len, path, RL_EPROTO,
                      "\"__metadata__\" is not an object of strings");
    }
    size_t n = json_object_size(m);
    f->meta_keys = calloc(n ? n : 1, sizeof *f->meta_keys);
    f->meta_values = calloc(n ? n : 1, sizeof *f->meta_values);
    if (!f->meta_keys || !f->meta_values) {
        return s_fail(err, err_len, path, RL_ENOMEM, "out of memory");
    }
    const char *key;
    json_t *val;
    json_object_foreach(m, key, val) {
        if (!json_is_string(val)) {
            return s_fail(err, err_len, path, RL_EPROTO,
                          "\"__metadata__\" value for '" S_NAME_FMT "' is not a string", key);
        }
        f->meta_keys[f->nmeta] = strdup(key);
        f->meta_values[f->nmeta] = strdup(json_string_value(val));
        f->nmeta++;
        if (!f->meta_keys[f->nmeta - 1] || !f->meta_values[f->nmeta - 1]) {
            return s_fail(err, err_len, path, RL_ENOMEM, "out of memory");
        }
    }
    return 0;
}

// Checks the sorted entries tile [0, data_len) exactly: no hole, no overlap, nothing after.
static int s_check_layout(const rl_st_file_t *f, const char *path, uint64_t data_len,
                          char *err, size_t err_len) {
    uint64_t pos = 0;
    const s_entry_t *prev = NULL;
    for (int i = 0; i < f->n; i++) {
        const s_entry_t *e = &f->entries[i];
        if (e->begin < pos) {
            return s_fail(err, err_len, path, RL_EPROTO,
                          "tensor '" S_NAME_FMT "': data_offsets [%llu,%llu] overlap tensor '"
                          S_NAME_FMT "' [%llu,%llu]",
                          e->t.name, (unsigned long long)e->begin, (unsigned long long)e->end,
                          prev->t.name, (unsigned long long)prev->begin,
                          (unsigned long long)prev->end);
        }
        if (e->begin > pos) {
            if (prev) {
                return s_fail(err, err_len, path, RL_EPROTO,
                              "tensor '" S_NAME_FMT "': data_offsets [%llu,%llu] leave a hole "
                              "after tensor '" S_NAME_FMT "' (bytes %llu..%llu belong to no "
                              "tensor)",
                              e->t.name, (unsigned long long)e->begin,
                              (unsigned long long)e->end, prev->t.name,
                              (unsigned long long)pos, (unsigned long long)e->begin);
            }
            return s_fail(err, err_len, path, RL_EPROTO,
                          "tensor '" S_NAME_FMT "': data_offsets [%llu,%llu] leave a hole at "
                          "the start of the data (bytes 0..%llu belong to no tensor)",
                          e->t.name, (unsigned long long)e->begin, (unsigned long long)e->end,
                          (unsigned long long)e->begin);
        }
        if (e->end > data_len) {
            return s_fail(err, err_len, path, RL_EPROTO,
                          "tensor '" S_NAME_FMT "': data_offsets [%llu,%llu] run past the end "
                          "of the data (%llu bytes; file truncated?)",
                          e->t.name, (unsigned long long)e->begin, (unsigned long long)e->end,
                          (unsigned long long)data_len);
        }
        pos = e->end;
        prev = e;
    }
    if (pos != data_len) {
        if (prev) {
            return s_fail(err, err_len, path, RL_EPROTO,
                          "trailing bytes: the data is %llu bytes but the last tensor '"
                          S_NAME_FMT "' ends at %llu",
                          (unsigned long long)data_len, prev->t.name, (unsigned long long)pos);
        }
        return s_fail(err, err_len, path, RL_EPROTO,
                      "trailing bytes: the data is %llu bytes but the file holds no tensors",
                      (unsigned long long)data_len);
    }
    return 0;
}

static int s_parse(const uint8_t *buf, size_t len, const char *path, rl_st_file_t **out,
                   char *err, size_t err_len) {
    int rc = 0;
    json_t *root = NULL;
    rl_st_file_t *f = NULL;
    if (out) {
        *out = NULL;
    }
    if (len == 0) {
        return s_fail(err, err_len, path, RL_EPROTO, "file is empty");
    }
    if (len < 8) {
        return s_fail(err, err_len, path, RL_EPROTO,
                      "file is %zu bytes, shorter than the 8-byte header length", len);
    }
    uint64_t hlen = s_le64(buf);
    if (hlen > RL_ST_MAX_HEADER) {
        return s_fail(err, err_len, path, RL_EPROTO,
                      "header length %llu exceeds the limit of %llu bytes",
                      (unsigned long long)hlen, RL_ST_MAX_HEADER);
    }
    if (hlen > len - 8) {
        return s_fail(err, err_len, path, RL_EPROTO,
                      "header length %llu exceeds the file size %zu (%zu bytes after the "
                      "length field)",
                      (unsigned long long)hlen, len, len - 8);
    }
    json_error_t jerr;
    root = json_loadb((const char *)buf + 8, (size_t)hlen, JSON_REJECT_DUPLICATES, &jerr);
    if (!root) {
        if (json_error_code(&jerr) == json_error_duplicate_key) {
            return s_fail(err, err_len, path, RL_EPROTO,
                          "header has a duplicate key: %s (line %d, column %d)", jerr.text,
                          jerr.line, jerr.column);
        }
        return s_fail(err, err_len, path, RL_EPROTO,
                      "header is not valid JSON: %s (line %d, column %d)", jerr.text, jerr.line,
                      jerr.column);
    }
    if (!json_is_object(root)) {
        rc = s_fail(err, err_len, path, RL_EPROTO, "header is not a JSON object");
        goto fail;
    }
    f = calloc(1, sizeof *f);
    size_t cap = json_object_size(root);
    if (!f || !(f->entries = calloc(cap ? cap : 1, sizeof *f->entries))) {
        rc = s_fail(err, err_len, path, RL_ENOMEM, "out of memory");
        goto fail;
    }
    const uint8_t *data = buf + 8 + hlen;
    uint64_t data_len = (uint64_t)(len - 8 - hlen);
    const char *key;
    json_t *val;
    json_object_foreach(root, key, val) {
        if (strcmp(key, "__metadata__") == 0) {
            if ((rc = s_parse_metadata(f, path, val, err, err_len)) != 0) {
                goto fail;
            }
            continue;
        }
        s_entry_t *e = &f->entries[f->n];
        if ((rc = s_parse_entry(path, key, val, e, err, err_len)) != 0) {
            goto fail;
        }
        if (!(e->t.name = strdup(key))) {
            rc = s_fail(err, err_len, path, RL_ENOMEM, "out of memory");
            goto fail;
        }
        f->n++;
        if (f->n > INT32_MAX / 2) {
            rc = s_fail(err, err_len, path, RL_EUNSUPPORTED, "too many tensors");
            goto fail;
        }
    }
    qsort(f->entries, (size_t)f->n, sizeof *f->entries, s_entry_cmp);
    if ((rc = s_check_layout(f, path, data_len, err, err_len)) != 0) {
        goto fail;
    }
    f->list = calloc((size_t)(f->n ? f->n : 1), sizeof *f->list);
    if (!f->list || s_hash_init(&f->hash, (size_t)f->n) != 0) {
        rc = s_fail(err, err_len, path, RL_ENOMEM, "out of memory");
        goto fail;
    }
    for (int i = 0; i < f->n; i++) {
        f->entries[i].t.data = data + f->entries[i].begin;
        f->list[i] = &f->entries[i].t;
        // Duplicates were refused by the JSON parser, so every insert is new.
        s_hash_insert(&f->hash, f->list[i]->name, i, f->list);
    }
    json_decref(root);
    if (out) {
        *out = f;
    } else {
        rl_st_file_destroy(&f);
    }
    return 0;
fail:
    json_decref(root);
    rl_st_file_destroy(&f);
    return rc;
}

int rl_st_parse(const void *buf, size_t len, rl_st_file_t **out, char *err, size_t err_len) {
    return s_parse(buf, len, NULL, out, err, err_len);
}

int rl_st_file_load(const char *path, rl_st_file_t **out, char *err, size_t err_len) {
    *out = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        return s_fail(err, err_len, path, e == ENOENT ? RL_ENOTFOUND : e, "cannot open: %s",
                      strerror(e));
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return s_fail(err, err_len, path, e, "cannot stat: %s", strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return s_fail(err, err_len, path, RL_EINVAL, "not a regular file");
    }
    size_t len = (size_t)st.st_size;
    if (len == 0) {
        close(fd);
        return s_fail(err, err_len, path, RL_EPROTO, "file is empty");
    }
    void *map = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);
    int map_errno = errno;
    close(fd); // the mapping keeps the file alive
    if (map == MAP_FAILED) {
        return s_fail(err, err_len, path, map_errno, "cannot mmap: %s", strerror(map_errno));
    }
    rl_st_file_t *f = NULL;
    int rc = s_parse(map, len, path, &f, err, err_len);
    if (rc != 0) {
        munmap(map, len);
        return rc;
    }
    f->map = map;
    f->map_len = len;
    *out = f;
    return 0;
}

rl_st_file_t *rl_st_file_open(const char *path, char *err, size_t err_len) {
    rl_st_file_t *f = NULL;
    rl_st_file_load(path, &f, err, err_len);
    return f;
}

int rl_st_file_count(const rl_st_file_t *self) {
    return self->n;
}

const rl_st_tensor_t *rl_st_file_tensor(const rl_st_file_t *self, int i) {
    if (i < 0 || i >= self->n) {
        return NULL;
    }
    return &self->entries[i].t;
}

const rl_st_tensor_t *rl_st_file_find(const rl_st_file_t *self, const char *name) {
    int i = s_hash_find(&self->hash, name, self->list);
    return i < 0 ? NULL : self->list[i];
}

const char *rl_st_file_metadata(const rl_st_file_t *self, const char *key) {
    for (int i = 0; i < self->nmeta; i++) {
        if (strcmp(self->meta_keys[i], key) == 0) {
            return self->meta_values[i];
        }
    }
    return NULL;
}

int rl_st_file_metadata_count(const rl_st_file_t *self) {
    return self->nmeta;
}

const char *rl_st_file_metadata_key(const rl_st_file_t *self, int i) {
    if (i < 0 || i >= self->nmeta) {
        return NULL;
    }
    return self->meta_keys[i];
}

// ---- a model folder ------------------------------------------------------------------------

struct rl_st_model {
    int nshards;
    rl_st_file_t **shards;
    char **shard_names; // plain file names inside the folder
    int n;
    const rl_st_tensor_t **list; // shard order (by file name), then data-offset order
    int *shard_of;               // list[i] lives in shards[shard_of[i]]
    s_hash_t hash;
};

void rl_st_model_destroy(rl_st_model_t **self_p) {
    if (!self_p || !*self_p) {
        return;
    }
    rl_st_model_t *self = *self_p;
    for (int i = 0; i < self->nshards; i++) {
        if (self->shards) {
            rl_st_file_destroy(&self->shards[i]);
        }
        if (self->shard_names) {
            free(self->shard_names[i]);
        }
    }
    free(self->shards);
    free(self->shard_names);
    free(self->list);
    free(self->shard_of);
    free(self->hash.slots);
    free(self);
    *self_p = NULL;
}

// A shard named by the index must be a plain file inside the folder: an index is untrusted
// input and must not make us open files elsewhere.
static int s_plain_name(const char *s) {
    return s[0] != '\0' && !strchr(s, '/') && !strchr(s, '\\') && !strstr(s, "..") &&
           strcmp(s, ".") != 0;
}

static char *s_join(const char *dir, const char *name) {
    size_t a = strlen(dir), b = strlen(name);
    char *p = malloc(a + b + 2);
    if (p) {
        memcpy(p, dir, a);
        p[a] = '/';
        memcpy(p + a + 1, name, b + 1);
    }
    return p;
}

static int s_cmp_str(const void *pa, const void *pb) {
    return strcmp(*(char *const *)pa, *(char *const *)pb);
}

// Reads the index and fills the model's shard name list (sorted, unique). *wmap_out gets the
// weight_map (caller decrefs *root_out).
static int s_read_index(rl_st_model_t *m, const char *ipath, json_t **root_out,
                        json_t **wmap_out, char *err, size_t err_len) {
    json_error_t jerr;
    json_t *root = json_load_file(ipath, JSON_REJECT_DUPLICATES, &jerr);
    *root_out = root;
    if (!root) {
        if (json_error_code(&jerr) == json_error_duplicate_key) {
            return s_fail(err, err_len, ipath, RL_EPROTO,
                          "duplicate key: %s (line %d, column %d)", jerr.text, jerr.line,
                          jerr.column);
        }
        return s_fail(err, err_len, ipath, RL_EPROTO, "not valid JSON: %s (line %d, column %d)",
                      jerr.text, jerr.line, jerr.column);
    }
    if (!json_is_object(root)) {
        return s_fail(err, err_len, ipath, RL_EPROTO, "not a JSON object");
    }
    json_t *meta = json_object_get(root, "metadata");
    if (meta && !json_is_object(meta) && !json_is_null(meta)) {
        return s_fail(err, err_len, ipath, RL_EPROTO, "\"metadata\" is not an object");
    }
    json_t *wmap = json_object_get(root, "weight_map");
    if (!wmap || !json_is_object(wmap)) {
        return s_fail(err, err_len, ipath, RL_EPROTO,
                      "\"weight_map\" is missing or not an object");
    }
    *wmap_out = wmap;
    size_t n = json_object_size(wmap);
    m->shard_names = calloc(n ? n : 1, sizeof *m->shard_names);
    if (!m->shard_names) {
        return s_fail(err, err_len, ipath, RL_ENOMEM, "out of memory");
    }
    const char *key;
    json_t *val;
    int count = 0;
    json_object_foreach(wmap, key, val) {
        if (!json_is_string(val)) {
            return s_fail(err, err_len, ipath, RL_EPROTO,
                          "weight_map entry '" S_NAME_FMT "' is not a string", key);
        }
        const char *shard = json_string_value(val);
        if (!s_plain_name(shard)) {
            return s_fail(err, err_len, ipath, RL_EPROTO,
                          "weight_map entry '" S_NAME_FMT "' names shard '" S_NAME_FMT
                          "', which is not a plain file name inside the folder",
                          key, shard);
        }
        // nshards tracks the names so far, so rl_st_model_destroy frees them on failure.
        m->nshards = ++count;
        if (!(m->shard_names[count - 1] = strdup(shard))) {
            return s_fail(err, err_len, ipath, RL_ENOMEM, "out of memory");
        }
    }
    qsort(m->shard_names, (size_t)count, sizeof *m->shard_names, s_cmp_str);
    int u = 0;
    for (int i = 0; i < count; i++) {
        char *name = m->shard_names[i];
        m->shard_names[i] = NULL;
        if (u > 0 && strcmp(m->shard_names[u - 1], name) == 0) {
            free(name);
        } else {
            m->shard_names[u++] = name;
        }
    }
    m->nshards = u;
    return 0;
}

int rl_st_model_load(const char *dir, rl_st_model_t **out, char *err, size_t err_len) {
    int rc = 0;
    json_t *root = NULL, *wmap = NULL;
    char *single = NULL, *ipath = NULL, *spath = NULL;
    *out = NULL;
    rl_st_model_t *m = calloc(1, sizeof *m);
    single = s_join(dir, S_SINGLE_NAME);
    ipath = s_join(dir, S_INDEX_NAME);
    if (!m || !single || !ipath) {
        rc = s_fail(err, err_len, dir, RL_ENOMEM, "out of memory");
        goto fail;
    }
    struct stat st;
    if (stat(dir, &st) != 0) {
        int e = errno;
        rc = s_fail(err, err_len, dir, e == ENOENT ? RL_ENOTFOUND : e, "cannot open: %s",
                    strerror(e));
        goto fail;
    }
    if (!S_ISDIR(st.st_mode)) {
        rc = s_fail(err, err_len, dir, RL_EINVAL, "not a folder");
        goto fail;
    }
    // Like transformers, a single model.safetensors wins over an index beside it.
    if (stat(single, &st) == 0) {
        m->nshards = 1;
        m->shards = calloc(1, sizeof *m->shards);
        m->shard_names = calloc(1, sizeof *m->shard_names);
        if (!m->shards || !m->shard_names || !(m->shard_names[0] = strdup(S_SINGLE_NAME))) {
            rc = s_fail(err, err_len, dir, RL_ENOMEM, "out of memory");
            goto fail;
        }
        if ((rc = rl_st_file_load(single, &m->shards[0], err, err_len)) != 0) {
            goto fail;
        }
    } else if (stat(ipath, &st) == 0) {
        if ((rc = s_read_index(m, ipath, &root, &wmap, err, err_len)) != 0) {
            goto fail;
        }
        m->shards = calloc((size_t)(m->nshards ? m->nshards : 1), sizeof *m->shards);
        if (!m->shards) {
            rc = s_fail(err, err_len, dir, RL_ENOMEM, "out of memory");
            goto fail;
        }
        for (int s = 0; s < m->nshards; s++) {
            free(spath);
            if (!(spath = s_join(dir, m->shard_names[s]))) {
                rc = s_fail(err, err_len, dir, RL_ENOMEM, "out of memory");
                goto fail;
            }
            if ((rc = rl_st_file_load(spath, &m->shards[s], err, err_len)) != 0) {
                goto fail;
            }
        }
    } else {
        rc = s_fail(err, err_len, dir, RL_ENOTFOUND,
                    "no " S_SINGLE_NAME " or " S_INDEX_NAME " in this folder");
        goto fail;
    }
    size_t total = 0;
    for (int s = 0; s < m->nshards; s++) {
        total += (size_t)rl_st_file_count(m->shards[s]);
    }
    if (total > INT32_MAX / 2) {
        rc = s_fail(err, err_len, dir, RL_EUNSUPPORTED, "too many tensors");
        goto fail;
    }
    m->list = calloc(total ? total : 1, sizeof *m->list);
    m->shard_of = calloc(total ? total : 1, sizeof *m->shard_of);
    if (!m->list || !m->shard_of || s_hash_init(&m->hash, total) != 0) {
        rc = s_fail(err, err_len, dir, RL_ENOMEM, "out of memory");
        goto fail;
    }
    for (int s = 0; s < m->nshards; s++) {
        for (int i = 0; i < rl_st_file_count(m->shards[s]); i++) {
            const rl_st_tensor_t *t = rl_st_file_tensor(m->shards[s], i);
            m->list[m->n] = t;
            m->shard_of[m->n] = s;
            int prev = s_hash_insert(&m->hash, t->name, m->n, m->list);
            if (prev >= 0) {
                rc = s_fail(err, err_len, dir, RL_EPROTO,
                            "tensor '" S_NAME_FMT "' is in both shard '%s' and shard '%s'",
                            t->name, m->shard_names[m->shard_of[prev]], m->shard_names[s]);
                goto fail;
            }
            if (wmap) {
                json_t *where = json_object_get(wmap, t->name);
                if (!where) {
                    rc = s_fail(err, err_len, ipath, RL_EPROTO,
                                "shard '%s' holds tensor '" S_NAME_FMT
                                "', which weight_map does not list",
                                m->shard_names[s], t->name);
                    goto fail;
                }
                if (strcmp(json_string_value(where), m->shard_names[s]) != 0) {
                    rc = s_fail(err, err_len, ipath, RL_EPROTO,
                                "tensor '" S_NAME_FMT "' is in shard '%s' but weight_map "
                                "places it in '%s'",
                                t->name, m->shard_names[s], json_string_value(where));
                    goto fail;
                }
            }
            m->n++;
        }
    }
    if (wmap) {
        const char *key;
        json_t *val;
        json_object_foreach(wmap, key, val) {
            if (s_hash_find(&m->hash, key, m->list) < 0) {
                rc = s_fail(err, err_len, ipath, RL_EPROTO,
                            "weight_map places tensor '" S_NAME_FMT
                            "' in shard '%s', which does not hold it",
                            key, json_string_value(val));
                goto fail;
            }
        }
    }
    json_decref(root);
    free(single);
    free(ipath);
    free(spath);
    *out = m;
    return 0;
fail:
    json_decref(root);
    free(single);
    free(ipath);
    free(spath);
    rl_st_model_destroy(&m);
    return rc;
}

rl_st_model_t *rl_st_model_open(const char *dir, char *err, size_t err_len) {
    rl_st_model_t *m = NULL;
    rl_st_model_load(dir, &m, err, err_len);
    return m;
}

int rl_st_model_count(const rl_st_model_t *self) {
    return self->n;
}

const rl_st_tensor_t *rl_st_model_tensor(const rl_st_model_t *self, int i) {
    if (i < 0 || i >= self->n) {
        return NULL;
    }
    return self->list[i];
}

const rl_st_tensor_t *rl_st_model_find(const rl_st_model_t *self, const char *name) {
    int i = s_hash_find(&self->hash, name, self->list);
    return i < 0 ? NULL : self->list[i];
}

int rl_st_model_shard_count(const rl_st_model_t *self) {
    return self->nshards;
}

const char *rl_st_model_shard_name(const rl_st_model_t *self, int i) {
    if (i < 0 || i >= self->nshards) {
        return NULL;
    }
    return self->shard_names[i];
}

// ---- writer --------------------------------------------------------------------------------

typedef struct {
    char *name;
    rl_dtype_t dtype;
    int ndim;
    int64_t shape[RL_ST_MAX_DIMS];
    size_t nbytes;
    const void *data; // borrowed, or `owned`
    void *owned;      // converted copy made by add_f32
} s_wtensor_t;

struct rl_st_writer {
    int n, cap;
    s_wtensor_t *t;
    int nmeta, meta_cap;
    char **meta_keys; // meta_keys[0] is always "format" = "pt"
    char **meta_values;
};

rl_st_writer_t *rl_st_writer_new(void) {
    rl_st_writer_t *w = calloc(1, sizeof *w);
    if (!w) {
        return NULL;
    }
    if (rl_st_writer_set_metadata(w, "format", "pt") != 0) {
        rl_st_writer_destroy(&w);
    }
    return w;
}

void rl_st_writer_destroy(rl_st_writer_t **self_p) {
    if (!self_p || !*self_p) {
        return;
    }
    rl_st_writer_t *w = *self_p;
    for (int i = 0; i < w->n; i++) {
        free(w->t[i].name);
        free(w->t[i].owned);
    }
    free(w->t);
    for (int i = 0; i < w->nmeta; i++) {
        free(w->meta_keys[i]);
        free(w->meta_values[i]);
    }
    free(w->meta_keys);
    free(w->meta_values);
    free(w);
    *self_p = NULL;
}

// A string our reader will accept back: valid UTF-8 without NUL (jansson decides).
static int s_json_ok(const char *s) {
    json_t *j = json_string(s);
    json_decref(j);
    return j != NULL;
}

int rl_st_writer_set_metadata(rl_st_writer_t *self, const char *key, const char *value) {
    if (!key || !value || !s_json_ok(key) || !s_json_ok(value)) {
        return RL_EINVAL;
    }
    if (strcmp(key, "format") == 0 && strcmp(value, "pt") != 0 && self->nmeta > 0) {
        return RL_EINVAL; // "format": "pt" is part of the format contract
    }
    for (int i = 0; i < self->nmeta; i++) {
        if (strcmp(self->meta_keys[i], key) == 0) {
            char *v = strdup(value);
            if (!v) {
                return RL_ENOMEM;
            }
            free(self->meta_values[i]);
            self->meta_values[i] = v;
            return 0;
        }
    }
    if (self->nmeta == self->meta_cap) {
        int cap = self->meta_cap ? 2 * self->meta_cap : 4;
        char **k = realloc(self->meta_keys, (size_t)cap * sizeof *k);
        if (!k) {
            return RL_ENOMEM;
        }
        self->meta_keys = k;
        char **v = realloc(self->meta_values, (size_t)cap * sizeof *v);
        if (!v) {
            return RL_ENOMEM;
        }
        self->meta_values = v;
        self->meta_cap = cap;
    }
    char *k = strdup(key), *v = strdup(value);
    if (!k || !v) {
        free(k);
        free(v);
        return RL_ENOMEM;
    }
    self->meta_keys[self->nmeta] = k;
    self->meta_values[self->nmeta] = v;
    self->nmeta++;
    return 0;
}

static int s_writer_push(rl_st_writer_t *self, const char *name, rl_dtype_t dtype, int ndim,
                         const int64_t *shape, const void *data, s_wtensor_t **out) {
    if (!name || strcmp(name, "__metadata__") == 0 || !s_json_ok(name) || ndim < 0 ||
        ndim > RL_ST_MAX_DIMS || (ndim > 0 && !shape) ||
        (dtype != RL_DTYPE_F32 && dtype != RL_DTYPE_F16 && dtype != RL_DTYPE_BF16)) {
        return RL_EINVAL;
    }
    int64_t numel = 1;
    int overflow = 0, zero = 0;
    for (int d = 0; d < ndim; d++) {
        if (shape[d] < 0) {
            return RL_EINVAL;
        }
        if (shape[d] == 0) {
            zero = 1;
        } else if (__builtin_mul_overflow(numel, shape[d], &numel)) {
            overflow = 1;
        }
    }
    int64_t nbytes = 0;
    if (!zero && (overflow || __builtin_mul_overflow(numel, (int64_t)rl_dtype_size(dtype),
                                                     &nbytes))) {
        return RL_EINVAL;
    }
    if (!data && nbytes > 0) {
        return RL_EINVAL;
    }
    for (int i = 0; i < self->n; i++) {
        if (strcmp(self->t[i].name, name) == 0) {
            return RL_EINVAL;
        }
    }
    if (self->n == self->cap) {
        int cap = self->cap ? 2 * self->cap : 16;
        s_wtensor_t *t = realloc(self->t, (size_t)cap * sizeof *t);
        if (!t) {
            return RL_ENOMEM;
        }
        self->t = t;
        self->cap = cap;
    }
    s_wtensor_t *t = &self->t[self->n];
    memset(t, 0, sizeof *t);
    if (!(t->name = strdup(name))) {
        return RL_ENOMEM;
    }
    t->dtype = dtype;
    t->ndim = ndim;
    for (int d = 0; d < ndim; d++) {
        t->shape[d] = shape[d];
    }
    t->nbytes = (size_t)nbytes;
    self->n++;
    *out = t;
    return 0;
}

int rl_st_writer_add(rl_st_writer_t *self, const char *name, rl_dtype_t dtype, int ndim,
                     const int64_t *shape, const void *data) {
    s_wtensor_t *t;
    int rc = s_writer_push(self, name, dtype, ndim, shape, data, &t);
    if (rc != 0) {
        return rc;
    }
    t->data = data;
    return 0;
}

int rl_st_writer_add_f32(rl_st_writer_t *self, const char *name, rl_dtype_t dtype, int ndim,
                         const int64_t *shape, const float *data) {
    s_wtensor_t *t;
    int rc = s_writer_push(self, name, dtype, ndim, shape, data, &t);
    if (rc != 0) {
        return rc;
    }
    size_t n = t->nbytes / rl_dtype_size(dtype);
    t->owned = malloc(t->nbytes ? t->nbytes : 1);
    if (!t->owned) {
        free(t->name);
        self->n--;
        return RL_ENOMEM;
    }
    // The buffer holds host-order elements, like the borrowed data of rl_st_writer_add; the
    // write path makes them little-endian.
    if (dtype == RL_DTYPE_F32) {
        memcpy(t->owned, data, t->nbytes);
    } else {
        uint16_t *o = t->owned;
        for (size_t i = 0; i < n; i++) {
            o[i] = dtype == RL_DTYPE_BF16 ? rl_f32_to_bf16(data[i]) : rl_f32_to_f16(data[i]);
        }
    }
    t->data = t->owned;
    return 0;
}

// Growable text buffer for the header.
typedef struct {
    char *p;
    size_t len, cap;
    int oom;
} s_buf_t;

static void s_buf_put(s_buf_t *b, const char *s, size_t n) {
    if (b->oom) {
        return;
    }
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (b->len + n + 1 > cap) {
            cap *= 2;
        }
        char *p = realloc(b->p, cap);
        if (!p) {
            b->oom = 1;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}

static void s_buf_printf(s_buf_t *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void s_buf_printf(s_buf_t *b, const char *fmt, ...) {
    char tmp[64];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    s_buf_put(b, tmp, (size_t)n);
}

// JSON string with the escapes of Python's json.dumps(ensure_ascii=False) (and serde_json):
// '"' and '\\', \b \f \n \r \t, other controls as \u00xx; everything else raw UTF-8. The
// python fixture script relies on this being byte-identical.
static void s_buf_json_str(s_buf_t *b, const char *s) {
    s_buf_put(b, "\"", 1);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        switch (*p) {
        case '"': s_buf_put(b, "\\\"", 2); break;
        case '\\': s_buf_put(b, "\\\\", 2); break;
        case '\b': s_buf_put(b, "\\b", 2); break;
        case '\f': s_buf_put(b, "\\f", 2); break;
        case '\n': s_buf_put(b, "\\n", 2); break;
        case '\r': s_buf_put(b, "\\r", 2); break;
        case '\t': s_buf_put(b, "\\t", 2); break;
        default:
            if (*p < 0x20) {
                s_buf_printf(b, "\\u%04x", *p);
            } else {
                s_buf_put(b, (const char *)p, 1);
            }
        }
    }
    s_buf_put(b, "\"", 1);
}

// Writer order (REFERENCE.md §3): element size, largest first, so that with a header padded to
// 8 every tensor starts at a multiple of its element size; then name.
static int s_wtensor_cmp(const void *pa, const void *pb) {
    const s_wtensor_t *a = *(const s_wtensor_t *const *)pa, *b = *(const s_wtensor_t *const *)pb;
    size_t ea = rl_dtype_size(a->dtype), eb = rl_dtype_size(b->dtype);
    if (ea != eb) {
        return ea > eb ? -1 : 1;
    }
    return strcmp(a->name, b->name);
}

static int s_meta_cmp(const void *pa, const void *pb) {
    return strcmp(**(char **const *)pa, **(char **const *)pb);
}

static int s_write_all(int fd, const void *p, size_t n) {
    const uint8_t *c = p;
    while (n > 0) {
        ssize_t w = write(fd, c, n > (1u << 30) ? (1u << 30) : n);
        if (w < 0) {
            if (errno == EINTR) {
                continue;
            }
            return errno;
        }
        c += w;
        n -= (size_t)w;
    }
    return 0;
}

// Writes host-order elements as little-endian.
static int s_write_le(int fd, const void *data, size_t nbytes, size_t esize) {
    if (!S_BIG_ENDIAN || esize == 1) {
        return s_write_all(fd, data, nbytes);
    }
    uint8_t tmp[4096];
    const uint8_t *p = data;
    while (nbytes > 0) {
        size_t n = nbytes < sizeof tmp ? nbytes : sizeof tmp;
        for (size_t i = 0; i < n; i += esize) {
            for (size_t k = 0; k < esize; k++) {
                tmp[i + k] = p[i + esize - 1 - k];
            }
        }
        int rc = s_write_all(fd, tmp, n);
        if (rc != 0) {
            return rc;
        }
        p += n;
        nbytes -= n;
    }
    return 0;
}

int rl_st_writer_write(rl_st_writer_t *self, const char *path, char *err, size_t err_len) {
    int rc = 0, fd = -1;
    char *tmp = NULL;
    s_buf_t b = {0};
    const s_wtensor_t **order = calloc((size_t)(self->n ? self->n : 1), sizeof *order);
    char ***meta = calloc((size_t)(self->nmeta ? self->nmeta : 1), sizeof *meta);
    if (!order || !meta) {
        rc = s_fail(err, err_len, path, RL_ENOMEM, "out of memory");
        goto fail;
    }
    for (int i = 0; i < self->n; i++) {
        order[i] = &self->t[i];
    }
    qsort(order, (size_t)self->n, sizeof *order, s_wtensor_cmp);
    // "format" first, then the caller's keys in byte order: a fixed order keeps output
    // reproducible (and byte-comparable with the python fixture writer).
    for (int i = 0; i < self->nmeta; i++) {
        meta[i] = &self->meta_keys[i];
    }
    qsort(meta + 1, (size_t)(self->nmeta - 1), sizeof *meta, s_meta_cmp);
    s_buf_put(&b, "{\"__metadata__\":{", 17);
    for (int i = 0; i < self->nmeta; i++) {
        size_t k = (size_t)(meta[i] - self->meta_keys);
        if (i) {
            s_buf_put(&b, ",", 1);
        }
        s_buf_json_str(&b, self->meta_keys[k]);
        s_buf_put(&b, ":", 1);
        s_buf_json_str(&b, self->meta_values[k]);
    }
    s_buf_put(&b, "}", 1);
    uint64_t off = 0;
    for (int i = 0; i < self->n; i++) {
        const s_wtensor_t *t = order[i];
        s_buf_put(&b, ",", 1);
        s_buf_json_str(&b, t->name);
        s_buf_printf(&b, ":{\"dtype\":\"%s\",\"shape\":[", rl_dtype_name(t->dtype));
        for (int d = 0; d < t->ndim; d++) {
            s_buf_printf(&b, d ? ",%lld" : "%lld", (long long)t->shape[d]);
        }
        s_buf_printf(&b, "],\"data_offsets\":[%llu,%llu]}", (unsigned long long)off,
                     (unsigned long long)(off + t->nbytes));
        off += t->nbytes;
    }
    s_buf_put(&b, "}", 1);
    while (!b.oom && b.len % 8 != 0) {
        s_buf_put(&b, " ", 1);
    }
    if (b.oom) {
        rc = s_fail(err, err_len, path, RL_ENOMEM, "out of memory");
        goto fail;
    }
    if (b.len > RL_ST_MAX_HEADER) {
        rc = s_fail(err, err_len, path, RL_EINVAL,
                    "header would be %zu bytes, over the limit of %llu", b.len,
                    RL_ST_MAX_HEADER);
        goto fail;
    }
    // The temp file sits beside the target so rename() is atomic (same file system).
    size_t plen = strlen(path);
    tmp = malloc(plen + 16);
    if (!tmp) {
        rc = s_fail(err, err_len, path, RL_ENOMEM, "out of memory");
        goto fail;
    }
    memcpy(tmp, path, plen);
    memcpy(tmp + plen, ".tmp.XXXXXX", 12);
    fd = mkstemp(tmp);
    if (fd < 0) {
        int e = errno;
        free(tmp);
        tmp = NULL;
        rc = s_fail(err, err_len, path, e, "cannot create a temporary file: %s", strerror(e));
        goto fail;
    }
    fchmod(fd, 0644); // mkstemp makes 0600; model files are meant to be shared
    uint8_t len8[8];
    for (int i = 0; i < 8; i++) {
        len8[i] = (uint8_t)((uint64_t)b.len >> (8 * i));
    }
    int e = s_write_all(fd, len8, 8);
    if (!e) {
        e = s_write_all(fd, b.p, b.len);
    }
    for (int i = 0; i < self->n && !e; i++) {
        e = s_write_le(fd, order[i]->data, order[i]->nbytes, rl_dtype_size(order[i]->dtype));
    }
    if (!e && fsync(fd) != 0) {
        e = errno;
    }
    if (close(fd) != 0 && !e) {
        e = errno;
    }
    fd = -1;
    if (!e && rename(tmp, path) != 0) {
        e = errno;
    }
    if (e) {
        rc = s_fail(err, err_len, path, e, "write failed: %s", strerror(e));
        goto fail;
    }
    free(tmp);
    free(order);
    free(meta);
    free(b.p);
    return 0;
fail:
    if (fd >= 0) {
        close(fd);
    }
    if (tmp) {
        unlink(tmp);
        free(tmp);
    }
    free(order);
    free(meta);
    free(b.p);
    return rc;
}

// ---- sharded writer ------------------------------------------------------------------------

// Writes `text` to `path` atomically (temp file beside it + rename).
static int s_write_text_atomic(const char *path, const char *text, char *err, size_t err_len) {
    size_t plen = strlen(path);
    char *tmp = malloc(plen + 16);
    if (!tmp) {
        return s_fail(err, err_len, path, RL_ENOMEM, "out of memory");
    }
    memcpy(tmp, path, plen);
    memcpy(tmp + plen, ".tmp.XXXXXX", 12);
    int fd = mkstemp(tmp);
    if (fd < 0) {
        int e = errno;
        free(tmp);
        return s_fail(err, err_len, path, e, "cannot create a temporary file: %s", strerror(e));
    }
    fchmod(fd, 0644);
    int e = s_write_all(fd, text, strlen(text));
    if (!e && fsync(fd) != 0) {
        e = errno;
    }
    if (close(fd) != 0 && !e) {
        e = errno;
    }
    if (!e && rename(tmp, path) != 0) {
        e = errno;
    }
    if (e) {
        unlink(tmp);
    }
    free(tmp);
    if (e) {
        return s_fail(err, err_len, path, e, "write failed: %s", strerror(e));
    }
    return 0;
}

int rl_st_writer_write_sharded(rl_st_writer_t *self, const char *dir, size_t max_shard_bytes,
                               char *err, size_t err_len) {
    int rc = 0, nshards = 0;
    int *shard_of = calloc((size_t)(self->n ? self->n : 1), sizeof *shard_of);
    char *path = NULL, *text = NULL;
    json_t *index = NULL;
    rl_st_writer_t *sw = NULL;
    if (!shard_of) {
        return s_fail(err, err_len, dir, RL_ENOMEM, "out of memory");
    }
    // Greedy in the order tensors were added (a model's module order, as transformers does):
    // open a new shard when the next tensor would push a non-empty one past the limit.
    size_t cur = 0, total = 0;
    for (int i = 0; i < self->n; i++) {
        size_t nb = self->t[i].nbytes;
        if (i == 0 || (cur > 0 && cur + nb > max_shard_bytes)) {
            nshards++;
            cur = 0;
        }
        shard_of[i] = nshards - 1;
        cur += nb;
        total += nb;
    }
    if (nshards <= 1) {
        free(shard_of);
        if (!(path = s_join(dir, S_SINGLE_NAME))) {
            return s_fail(err, err_len, dir, RL_ENOMEM, "out of memory");
        }
        rc = rl_st_writer_write(self, path, err, err_len);
        free(path);
        return rc;
    }
    if (nshards > 99999) {
        rc = s_fail(err, err_len, dir, RL_EINVAL, "%d shards exceed the 99999 of the naming "
                    "scheme; raise the shard size", nshards);
        goto fail;
    }
    index = json_object();
    json_t *meta = json_object(), *wmap = json_object();
    json_object_set_new(index, "metadata", meta);
    json_object_set_new(index, "weight_map", wmap);
    json_object_set_new(meta, "total_size", json_integer((json_int_t)total));
    char name[64];
    for (int s = 0; s < nshards; s++) {
        snprintf(name, sizeof name, "model-%05d-of-%05d.safetensors", s + 1, nshards);
        if (!(sw = rl_st_writer_new())) {
            rc = s_fail(err, err_len, dir, RL_ENOMEM, "out of memory");
            goto fail;
        }
        for (int k = 1; k < self->nmeta; k++) {
            if ((rc = rl_st_writer_set_metadata(sw, self->meta_keys[k], self->meta_values[k]))) {
                rc = s_fail(err, err_len, dir, rc, "out of memory");
                goto fail;
            }
        }
        for (int i = 0; i < self->n; i++) {
            const s_wtensor_t *t = &self->t[i];
            if (shard_of[i] != s) {
                continue;
            }
            if ((rc = rl_st_writer_add(sw, t->name, t->dtype, t->ndim, t->shape, t->data))) {
                rc = s_fail(err, err_len, dir, rc, "out of memory");
                goto fail;
            }
            json_object_set_new(wmap, t->name, json_string(name));
        }
        free(path);
        if (!(path = s_join(dir, name))) {
            rc = s_fail(err, err_len, dir, RL_ENOMEM, "out of memory");
            goto fail;
        }
        if ((rc = rl_st_writer_write(sw, path, err, err_len)) != 0) {
            goto fail;
        }
        rl_st_writer_destroy(&sw);
    }
    // The index goes last, so it never names a shard that is not on disk yet.
    text = json_dumps(index, JSON_INDENT(2) | JSON_SORT_KEYS);
    free(path);
    path = s_join(dir, S_INDEX_NAME);
    if (!text || !path) {
        rc = s_fail(err, err_len, dir, RL_ENOMEM, "out of memory");
        goto fail;
    }
    size_t tl = strlen(text);
    char *nl = realloc(text, tl + 2);
    if (!nl) {
        rc = s_fail(err, err_len, dir, RL_ENOMEM, "out of memory");
        goto fail;
    }
    text = nl;
    memcpy(text + tl, "\n", 2);
    rc = s_write_text_atomic(path, text, err, err_len);
fail:
    rl_st_writer_destroy(&sw);
    json_decref(index);
    free(text);
    free(path);
    free(shard_of);
    return rc;
}
