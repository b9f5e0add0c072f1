// rl_wire — the role protocol's messages: a flat key -> value map, its msgpack encoding (frame 0)
// plus the extra frames of large tensors, and the decoder for bytes from peers. Not the transport
// (rl_chan) and not the verbs (docs/protocol.md).
//
// Encoding goes through msgpack-c's packer (it picks the shortest form of every integer and
// length, so what we write is what any msgpack library reads). Decoding does not use msgpack-c's
// unpacker: that one allocates its object tree from the counts it reads before knowing whether
// the bytes behind them exist (an array32 header claiming 4e9 items asks for ~100 GB), and its
// error reports carry no position. Frame 0 is read with core's bounded reader (rl_mpack, shared
// with the trajectory records): it walks the bytes once and checks each length against the bytes
// left before anything is touched; the decoder allocates only after a count is known to be
// backed by bytes, and names the offset and key of every failure.
#include "rl_wire.h"

#include "rl_mpack.h"

#include <msgpack.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define S_ALIGN 64                       // tensor storage alignment (a cache line; >= any dtype)
#define S_STR_MAX ((uint64_t)UINT32_MAX) // msgpack's str/bin lengths are 32-bit

// ---- dtypes ----------------------------------------------------------------------------------

static const char *const s_dt_names[] = {"f32", "f64", "i32", "i64", "u8"};
static const size_t s_dt_sizes[] = {4, 8, 4, 8, 1};
#define S_N_DT ((int)(sizeof s_dt_sizes / sizeof s_dt_sizes[0]))

const char *rl_wire_dtype_name(rl_wire_dtype_t dt) {
    return (int)dt >= 0 && (int)dt < S_N_DT ? s_dt_names[dt] : NULL;
}

size_t rl_wire_dtype_size(rl_wire_dtype_t dt) {
    return (int)dt >= 0 && (int)dt < S_N_DT ? s_dt_sizes[dt] : 0;
}

// Bytes of a tensor: prod(shape) * size, or 0 with *ok = 0 when a dimension is negative or the
// product passes RL_WIRE_MAX_BYTES (checked by division before each multiplication, so it never
// wraps).
static size_t s_tensor_bytes(rl_wire_dtype_t dt, int ndim, const int64_t *shape, int *ok) {
    uint64_t n = rl_wire_dtype_size(dt);
    *ok = 0;
    for (int d = 0; d < ndim; d++) {
        if (shape[d] < 0) {
            return 0;
        }
        uint64_t k = (uint64_t)shape[d];
        if (k != 0 && n > RL_WIRE_MAX_BYTES / k) {
            return 0;
        }
        n *= k;
    }
    *ok = n <= RL_WIRE_MAX_BYTES;
    return *ok ? (size_t)n : 0;
}

// ---- tensor storage --------------------------------------------------------------------------

// Tensor data lives in a reference-counted buffer, so that an extra frame handed to ZeroMQ
// without copying outlives the message: the message holds one reference, an encode another
// (until the next encode or free), and each frame in flight one more. ZeroMQ drops its
// references from its I/O thread, hence the atomic count. data comes from malloc (a gift) or
// posix_memalign (a copy), freed with free(), or is a received frame kept by
// rl_msg_decode_owned, given back through its owner's release.
typedef struct {
    atomic_int refs;
    void *data;
    void (*release)(void *data, void *hint); // NULL: free(data)
    void *hint;
} s_buf_t;

static s_buf_t *s_buf_wrap(void *data) {
    s_buf_t *b = malloc(sizeof *b);
    if (b) {
        atomic_init(&b->refs, 1);
        b->data = data;
        b->release = NULL;
        b->hint = NULL;
    }
    return b;
}

// A buffer of n bytes (at least 1, so data is never NULL) aligned to S_ALIGN.
static s_buf_t *s_buf_alloc(size_t n) {
    void *p = NULL;
    if (posix_memalign(&p, S_ALIGN, n ? n : 1) != 0) {
        return NULL;
    }
    s_buf_t *b = s_buf_wrap(p);
    if (!b) {
        free(p);
    }
    return b;
}

static void s_buf_unref(s_buf_t *b) {
    if (b && atomic_fetch_sub_explicit(&b->refs, 1, memory_order_acq_rel) == 1) {
        if (b->release) {
            b->release(b->data, b->hint);
        } else {
            free(b->data);
        }
        free(b);
    }
}

// The release of a frame the decoder is about to keep, until the decode has succeeded: if it
// fails, the frame stays its owner's.
static void s_release_none(void *data, void *hint) {
    (void)data;
    (void)hint;
}

static void s_buf_release(void *data, void *hint) {
    (void)data;
    s_buf_unref(hint);
}

// ---- the message -----------------------------------------------------------------------------

typedef enum { S_NIL, S_BOOL, S_INT, S_FLOAT, S_STR, S_STRS, S_TENSOR } s_kind_t;
static const char *const s_kind_names[] = {"nil", "bool",     "int",   "float",
                                           "str", "str list", "tensor"};

typedef struct {
    char *key;
    s_kind_t kind;
    union {
        int b;
        int64_t i;
        double f;
        struct {
            char *s; // NUL-terminated after len
            size_t len;
        } str;
        struct {
            char **s; // one block: n pointers, n lengths, then the NUL-terminated strings
            size_t *lens;
            int n;
        } strs;
        struct {
            rl_wire_dtype_t dt;
            int ndim;
            int64_t shape[RL_WIRE_MAX_NDIM];
            size_t nbytes;
            s_buf_t *buf;
        } t;
    } u;
} s_entry_t;

struct rl_msg {
    char *op;
    uint64_t id;
    s_entry_t *e; // n entries, in the order set or received
    int n, cap;
    // the last encode: frame 0 in sb, extra frame i backed by fbuf[i] (one reference each)
    msgpack_sbuffer sb;
    rl_frame_t frames[1 + RL_WIRE_MAX_FRAMES];
    s_buf_t *fbuf[1 + RL_WIRE_MAX_FRAMES];
    int n_frames;
    char errmsg[256];
};

static void s_entry_clear(s_entry_t *e) {
    switch (e->kind) {
    case S_STR: free(e->u.str.s); break;
    case S_STRS: free(e->u.strs.s); break;
    case S_TENSOR: s_buf_unref(e->u.t.buf); break;
    default: break;
    }
    e->kind = S_NIL;
}

static int s_is_frame_tensor(const s_entry_t *e) {
    return e->kind == S_TENSOR && e->u.t.nbytes >= RL_WIRE_INLINE_MAX;
}

static void s_release_frames(rl_msg_t *m) {
    for (int i = 1; i < m->n_frames; i++) {
        s_buf_unref(m->fbuf[i]);
        m->fbuf[i] = NULL;
    }
    m->n_frames = 0;
}

// Writes the message of a failed call into m->errmsg (also through a const handle: the getters
// report on messages their callers only read) and returns code.
__attribute__((format(printf, 3, 4))) static int s_fail_msg(const rl_msg_t *m, int code,
                                                            const char *fmt, ...) {
    rl_msg_t *mm = (rl_msg_t *)m;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(mm->errmsg, sizeof mm->errmsg, fmt, ap);
    va_end(ap);
    return code;
}

static int s_op_ok(const char *op) {
    size_t n = op ? strlen(op) : 0;
    return n >= 1 && n <= RL_WIRE_MAX_KEY_LEN;
}

rl_msg_t *rl_msg_new(const char *op, uint64_t id) {
    RL_ASSERT(s_op_ok(op));
    rl_msg_t *m = calloc(1, sizeof *m);
    if (!m) {
        return NULL;
    }
    m->op = strdup(op);
    if (!m->op) {
        free(m);
        return NULL;
    }
    m->id = id;
    msgpack_sbuffer_init(&m->sb);
    return m;
}

void rl_msg_free(rl_msg_t **msg_p) {
    if (!msg_p || !*msg_p) {
        return;
    }
    rl_msg_t *m = *msg_p;
    s_release_frames(m);
    for (int i = 0; i < m->n; i++) {
        s_entry_clear(&m->e[i]);
        free(m->e[i].key);
    }
    free(m->e);
    free(m->op);
    msgpack_sbuffer_destroy(&m->sb);
    free(m);
    *msg_p = NULL;
}

static s_entry_t *s_find(const rl_msg_t *m, const char *key) {
    for (int i = 0; i < m->n; i++) {
        if (strcmp(m->e[i].key, key) == 0) {
            return &m->e[i];
        }
    }
    return NULL;
}

// ---- building --------------------------------------------------------------------------------

// Stores the value *v under key (replacing an older value of the same key) or, on failure,
// frees what *v owns. Either way *v is consumed.
static int s_put(rl_msg_t *m, const char *key, s_entry_t *v) {
    int rc = 0;
    size_t klen = key ? strlen(key) : 0;
    if (klen == 0 || klen > RL_WIRE_MAX_KEY_LEN) {
        rc = s_fail_msg(m, RL_EINVAL, "key of %zu bytes (1..%d)", klen, RL_WIRE_MAX_KEY_LEN);
        goto fail;
    }
    if (strcmp(key, "v") == 0 || strcmp(key, "op") == 0 || strcmp(key, "id") == 0) {
        rc = s_fail_msg(m, RL_EINVAL, "key \"%s\" is reserved for the envelope", key);
        goto fail;
    }
    s_entry_t *old = s_find(m, key);
    if (s_is_frame_tensor(v)) {
        int frames = 0;
        for (int i = 0; i < m->n; i++) {
            frames += &m->e[i] != old && s_is_frame_tensor(&m->e[i]);
        }
        if (frames >= RL_WIRE_MAX_FRAMES) {
            rc = s_fail_msg(m, RL_EINVAL, "key \"%s\": more than %d tensors of %u bytes or more",
                            key, RL_WIRE_MAX_FRAMES, RL_WIRE_INLINE_MAX);
            goto fail;
        }
    }
    if (old) {
        s_entry_clear(old);
        old->kind = v->kind;
        old->u = v->u;
        return 0;
    }
    if (m->n >= RL_WIRE_MAX_KEYS) {
        rc = s_fail_msg(m, RL_EINVAL, "key \"%s\": more than %d keys", key, RL_WIRE_MAX_KEYS);
        goto fail;
    }
    if (m->n == m->cap) {
        int cap = m->cap ? 2 * m->cap : 8;
        s_entry_t *e = realloc(m->e, (size_t)cap * sizeof *e);
        if (!e) {
            rc = RL_ENOMEM;
            goto fail;
        }
        m->e = e;
        m->cap = cap;
    }
    char *k = strdup(key);
    if (!k) {
        rc = RL_ENOMEM;
        goto fail;
    }
    m->e[m->n] = *v;
    m->e[m->n].key = k;
    m->n++;
    return 0;
fail:
    if (rc == RL_ENOMEM) {
        s_fail_msg(m, rc, "out of memory");
    }
    s_entry_clear(v);
    return rc;
}

int rl_msg_set_nil(rl_msg_t *m, const char *key) {
    s_entry_t v = {.kind = S_NIL};
    return s_put(m, key, &v);
}

int rl_msg_set_bool(rl_msg_t *m, const char *key, int b) {
    s_entry_t v = {.kind = S_BOOL, .u.b = b != 0};
    return s_put(m, key, &v);
}

int rl_msg_set_int(rl_msg_t *m, const char *key, int64_t i) {
    s_entry_t v = {.kind = S_INT, .u.i = i};
    return s_put(m, key, &v);
}

int rl_msg_set_float(rl_msg_t *m, const char *key, double f) {
    s_entry_t v = {.kind = S_FLOAT, .u.f = f};
    return s_put(m, key, &v);
}

int rl_msg_set_strn(rl_msg_t *m, const char *key, const char *s, size_t len) {
    if (len > S_STR_MAX || (!s && len)) {
        return s_fail_msg(m, RL_EINVAL, "key \"%s\": string of %zu bytes", key ? key : "", len);
    }
    s_entry_t v = {.kind = S_STR};
    v.u.str.s = malloc(len + 1);
    if (!v.u.str.s) {
        return s_fail_msg(m, RL_ENOMEM, "out of memory");
    }
    if (len) {
        memcpy(v.u.str.s, s, len);
    }
    v.u.str.s[len] = '\0';
    v.u.str.len = len;
    return s_put(m, key, &v);
}

int rl_msg_set_str(rl_msg_t *m, const char *key, const char *s) {
    if (!s) {
        return s_fail_msg(m, RL_EINVAL, "key \"%s\": NULL string", key ? key : "");
    }
    return rl_msg_set_strn(m, key, s, strlen(s));
}

int rl_msg_set_strs(rl_msg_t *m, const char *key, const char *const *s, const size_t *lens, int n) {
    if (n < 0 || (unsigned)n > RL_WIRE_MAX_STRS || (n > 0 && !s)) {
        return s_fail_msg(m, RL_EINVAL, "key \"%s\": %d strings (0..%u)", key ? key : "", n,
                          RL_WIRE_MAX_STRS);
    }
    size_t total = 0;
    for (int i = 0; i < n; i++) {
        size_t l = lens ? lens[i] : (s[i] ? strlen(s[i]) : 0);
        if (l > S_STR_MAX || (!s[i] && l) || (!s[i] && !lens)) {
            return s_fail_msg(m, RL_EINVAL, "key \"%s\": string %d is NULL or too long",
                              key ? key : "", i);
        }
        total += l + 1;
    }
    size_t head = (size_t)n * (sizeof(char *) + sizeof(size_t));
    s_entry_t v = {.kind = S_STRS};
    char **block = malloc(head + total + 1);
    if (!block) {
        return s_fail_msg(m, RL_ENOMEM, "out of memory");
    }
    size_t *ls = (size_t *)(block + n);
    char *p = (char *)block + head;
    for (int i = 0; i < n; i++) {
        ls[i] = lens ? lens[i] : strlen(s[i]);
        block[i] = p;
        if (ls[i]) {
            memcpy(p, s[i], ls[i]);
        }
        p[ls[i]] = '\0';
        p += ls[i] + 1;
    }
    v.u.strs.s = block;
    v.u.strs.lens = ls;
    v.u.strs.n = n;
    return s_put(m, key, &v);
}

// Checks a tensor's dtype and shape; returns 0 and its byte count, or RL_EINVAL.
static int s_check_tensor(rl_msg_t *m, const char *key, rl_wire_dtype_t dt, int ndim,
                          const int64_t *shape, size_t *nbytes) {
    const char *k = key ? key : "";
    if (!rl_wire_dtype_name(dt)) {
        return s_fail_msg(m, RL_EINVAL, "key \"%s\": unknown dtype %d", k, (int)dt);
    }
    if (ndim < 0 || ndim > RL_WIRE_MAX_NDIM || (ndim > 0 && !shape)) {
        return s_fail_msg(m, RL_EINVAL, "key \"%s\": ndim %d (0..%d)", k, ndim, RL_WIRE_MAX_NDIM);
    }
    int ok;
    *nbytes = s_tensor_bytes(dt, ndim, shape, &ok);
    if (!ok) {
        return s_fail_msg(m, RL_EINVAL, "key \"%s\": negative dimension or more than %llu bytes", k,
                          (unsigned long long)RL_WIRE_MAX_BYTES);
    }
    return 0;
}

static int s_set_tensor_buf(rl_msg_t *m, const char *key, rl_wire_dtype_t dt, int ndim,
                            const int64_t *shape, size_t nbytes, s_buf_t *buf) {
    s_entry_t v = {.kind = S_TENSOR};
    v.u.t.dt = dt;
    v.u.t.ndim = ndim;
    for (int d = 0; d < ndim; d++) {
        v.u.t.shape[d] = shape[d];
    }
    v.u.t.nbytes = nbytes;
    v.u.t.buf = buf;
    return s_put(m, key, &v);
}

int rl_msg_set_tensor(rl_msg_t *m, const char *key, rl_wire_dtype_t dt, int ndim,
                      const int64_t *shape, const void *data) {
    size_t nbytes;
    int rc = s_check_tensor(m, key, dt, ndim, shape, &nbytes);
    if (rc) {
        return rc;
    }
    if (nbytes && !data) {
        return s_fail_msg(m, RL_EINVAL, "key \"%s\": NULL data", key ? key : "");
    }
    s_buf_t *b = s_buf_alloc(nbytes);
    if (!b) {
        return s_fail_msg(m, RL_ENOMEM, "out of memory");
    }
    if (nbytes) {
        memcpy(b->data, data, nbytes);
    }
    return s_set_tensor_buf(m, key, dt, ndim, shape, nbytes, b);
}

int rl_msg_set_tensor_gift(rl_msg_t *m, const char *key, rl_wire_dtype_t dt, int ndim,
                           const int64_t *shape, void *data) {
    size_t nbytes;
    int rc = s_check_tensor(m, key, dt, ndim, shape, &nbytes);
    if (rc == 0 && nbytes && !data) {
        rc = s_fail_msg(m, RL_EINVAL, "key \"%s\": NULL data", key ? key : "");
    }
    if (rc) {
        free(data);
        return rc;
    }
    s_buf_t *b = data ? s_buf_wrap(data) : s_buf_alloc(0);
    if (!b) {
        free(data);
        return s_fail_msg(m, RL_ENOMEM, "out of memory");
    }
    return s_set_tensor_buf(m, key, dt, ndim, shape, nbytes, b);
}

// ---- reading ---------------------------------------------------------------------------------

const char *rl_msg_op(const rl_msg_t *m) {
    return m->op;
}

uint64_t rl_msg_id(const rl_msg_t *m) {
    return m->id;
}

int rl_msg_has(const rl_msg_t *m, const char *key) {
    return key && s_find(m, key) != NULL;
}

int rl_msg_count(const rl_msg_t *m) {
    return m->n;
}

const char *rl_msg_key(const rl_msg_t *m, int i) {
    return i >= 0 && i < m->n ? m->e[i].key : NULL;
}

const char *rl_msg_errmsg(const rl_msg_t *m) {
    return m->errmsg;
}

// The entry of key with kind `want`, or RL_ENOTFOUND / RL_EPROTO with the message set.
static int s_get(const rl_msg_t *m, const char *key, s_kind_t want, const s_entry_t **out) {
    const s_entry_t *e = key ? s_find(m, key) : NULL;
    if (!e) {
        return s_fail_msg(m, RL_ENOTFOUND, "op \"%s\": no key \"%s\"", m->op, key ? key : "");
    }
    if (e->kind != want && !(want == S_FLOAT && e->kind == S_INT)) {
        return s_fail_msg(m, RL_EPROTO, "op \"%s\": key \"%s\": expected %s, found %s", m->op, key,
                          s_kind_names[want], s_kind_names[e->kind]);
    }
    *out = e;
    return 0;
}

int rl_msg_get_bool(const rl_msg_t *m, const char *key, int *v) {
    const s_entry_t *e;
    int rc = s_get(m, key, S_BOOL, &e);
    if (rc == 0) {
        *v = e->u.b;
    }
    return rc;
}

int rl_msg_get_int(const rl_msg_t *m, const char *key, int64_t *v) {
    const s_entry_t *e;
    int rc = s_get(m, key, S_INT, &e);
    if (rc == 0) {
        *v = e->u.i;
    }
    return rc;
}

int rl_msg_get_float(const rl_msg_t *m, const char *key, double *v) {
    const s_entry_t *e;
    int rc = s_get(m, key, S_FLOAT, &e);
    if (rc == 0) {
        *v = e->kind == S_INT ? (double)e->u.i : e->u.f;
    }
    return rc;
}

int rl_msg_get_str(const rl_msg_t *m, const char *key, const char **s, size_t *len) {
    const s_entry_t *e;
    int rc = s_get(m, key, S_STR, &e);
    if (rc == 0) {
        *s = e->u.str.s;
        if (len) {
            *len = e->u.str.len;
        }
    }
    return rc;
}

int rl_msg_get_strs(const rl_msg_t *m, const char *key, const char *const **s, const size_t **lens,
                    int *n) {
    const s_entry_t *e;
    int rc = s_get(m, key, S_STRS, &e);
    if (rc == 0) {
        *s = (const char *const *)e->u.strs.s;
        if (lens) {
            *lens = e->u.strs.lens;
        }
        *n = e->u.strs.n;
    }
    return rc;
}

// "f32 [3,4]" into buf
static void s_tensor_desc(char *buf, size_t cap, rl_wire_dtype_t dt, int ndim,
                          const int64_t *shape) {
    int k = snprintf(buf, cap, "%s [", rl_wire_dtype_name(dt));
    for (int d = 0; d < ndim && k > 0 && (size_t)k < cap; d++) {
        k += snprintf(buf + k, cap - (size_t)k, "%s%lld", d ? "," : "", (long long)shape[d]);
    }
    if (k > 0 && (size_t)k < cap) {
        snprintf(buf + k, cap - (size_t)k, "]");
    }
}

int rl_msg_get_tensor(const rl_msg_t *m, const char *key, rl_wire_dtype_t dt, int ndim,
                      int64_t *shape, const void **data) {
    const s_entry_t *e;
    int rc = s_get(m, key, S_TENSOR, &e);
    if (rc) {
        return rc;
    }
    if (e->u.t.dt != dt || e->u.t.ndim != ndim) {
        char found[96];
        s_tensor_desc(found, sizeof found, e->u.t.dt, e->u.t.ndim, e->u.t.shape);
        const char *want = rl_wire_dtype_name(dt);
        return s_fail_msg(m, RL_EPROTO,
                          "op \"%s\": key \"%s\": expected a %s tensor of %d dimensions, "
                          "found %s",
                          m->op, key, want ? want : "(unknown dtype)", ndim, found);
    }
    for (int d = 0; d < ndim; d++) {
        shape[d] = e->u.t.shape[d];
    }
    *data = e->u.t.buf->data;
    return 0;
}

// ---- encoding --------------------------------------------------------------------------------

static int s_pack_cstr(msgpack_packer *pk, const char *s) {
    size_t n = strlen(s);
    return msgpack_pack_str(pk, n) || msgpack_pack_str_body(pk, s, n);
}

int rl_msg_encode(rl_msg_t *m, const rl_frame_t **frames_p, int *n_frames_p) {
    s_release_frames(m);
    m->sb.size = 0;
    msgpack_packer pk;
    msgpack_packer_init(&pk, &m->sb, msgpack_sbuffer_write);
    int n_frames = 1;
    // every failure below is a failed realloc inside msgpack_sbuffer_write
    int bad = msgpack_pack_map(&pk, (size_t)m->n + 3) || s_pack_cstr(&pk, "v") ||
              msgpack_pack_uint64(&pk, RL_WIRE_VERSION) || s_pack_cstr(&pk, "op") ||
              s_pack_cstr(&pk, m->op) || s_pack_cstr(&pk, "id") || msgpack_pack_uint64(&pk, m->id);
    for (int i = 0; i < m->n && !bad; i++) {
        const s_entry_t *e = &m->e[i];
        bad = s_pack_cstr(&pk, e->key);
        switch (e->kind) {
        case S_NIL: bad = bad || msgpack_pack_nil(&pk); break;
        case S_BOOL:
            bad = bad || (e->u.b ? msgpack_pack_true(&pk) : msgpack_pack_false(&pk));
            break;
        case S_INT: bad = bad || msgpack_pack_int64(&pk, e->u.i); break;
        case S_FLOAT: bad = bad || msgpack_pack_double(&pk, e->u.f); break;
        case S_STR:
            bad = bad || msgpack_pack_str(&pk, e->u.str.len) ||
                  msgpack_pack_str_body(&pk, e->u.str.s, e->u.str.len);
            break;
        case S_STRS:
            bad = bad || msgpack_pack_array(&pk, (size_t)e->u.strs.n);
            for (int j = 0; j < e->u.strs.n && !bad; j++) {
                bad = msgpack_pack_str(&pk, e->u.strs.lens[j]) ||
                      msgpack_pack_str_body(&pk, e->u.strs.s[j], e->u.strs.lens[j]);
            }
            break;
        case S_TENSOR:
            bad = bad || msgpack_pack_map(&pk, 3) || s_pack_cstr(&pk, "dtype") ||
                  s_pack_cstr(&pk, rl_wire_dtype_name(e->u.t.dt)) || s_pack_cstr(&pk, "shape") ||
                  msgpack_pack_array(&pk, (size_t)e->u.t.ndim);
            for (int d = 0; d < e->u.t.ndim && !bad; d++) {
                bad = msgpack_pack_int64(&pk, e->u.t.shape[d]);
            }
            if (!s_is_frame_tensor(e)) {
                bad = bad || s_pack_cstr(&pk, "data") || msgpack_pack_bin(&pk, e->u.t.nbytes) ||
                      msgpack_pack_bin_body(&pk, e->u.t.buf->data, e->u.t.nbytes);
            } else {
                // s_put and the decoder keep frame-sized tensors <= RL_WIRE_MAX_FRAMES
                RL_ASSERT(n_frames <= RL_WIRE_MAX_FRAMES);
                bad = bad || s_pack_cstr(&pk, "frame") ||
                      msgpack_pack_uint64(&pk, (uint64_t)n_frames);
                if (!bad) {
                    atomic_fetch_add_explicit(&e->u.t.buf->refs, 1, memory_order_relaxed);
                    m->fbuf[n_frames] = e->u.t.buf;
                    m->frames[n_frames].data = e->u.t.buf->data;
                    m->frames[n_frames].len = e->u.t.nbytes;
                    n_frames++;
                    m->n_frames = n_frames; // so a failure below releases what was taken
                }
            }
            break;
        }
    }
    if (bad) {
        s_release_frames(m);
        return s_fail_msg(m, RL_ENOMEM, "out of memory");
    }
    m->frames[0].data = m->sb.data;
    m->frames[0].len = m->sb.size;
    m->n_frames = n_frames;
    *frames_p = m->frames;
    *n_frames_p = n_frames;
    return 0;
}

int rl_msg_frame_hold(rl_msg_t *m, int i, void (**release_p)(void *data, void *hint),
                      void **hint_p) {
    if (i < 1 || i >= m->n_frames) {
        return s_fail_msg(m, RL_EINVAL, "no extra frame %d (the last encode has %d frames)", i,
                          m->n_frames);
    }
    atomic_fetch_add_explicit(&m->fbuf[i]->refs, 1, memory_order_relaxed);
    *release_p = s_buf_release;
    *hint_p = m->fbuf[i];
    return 0;
}

// ---- decoding: the msgpack reader ------------------------------------------------------------

// Frame 0 is read with core's bounded reader (rl_mpack): every item's header is checked against
// the bytes left before anything of it is used, and str/bin bodies are located inside the frame.
// ext items are not part of the protocol, so the cursor refuses them (RL_MPACK_NO_EXT), even
// inside values that are only skipped.
typedef struct {
    rl_mpack_t r; // over frame 0
    const rl_frame_t *frames;
    int n_frames;
    unsigned char used[1 + RL_WIRE_MAX_FRAMES];
    rl_frame_owner_t *owners;              // NULL: copy every frame
    s_buf_t *kept[1 + RL_WIRE_MAX_FRAMES]; // frames wrapped without a copy
    char *err;
    size_t err_len;
} s_dec_t;

__attribute__((format(printf, 4, 5))) static int s_dfail(s_dec_t *d, size_t at, int code,
                                                         const char *fmt, ...) {
    if (d->err && d->err_len) {
        int k = snprintf(d->err, d->err_len, "frame 0 offset %zu: ", at);
        if (k > 0 && (size_t)k < d->err_len) {
            va_list ap;
            va_start(ap, fmt);
            vsnprintf(d->err + k, d->err_len - (size_t)k, fmt, ap);
            va_end(ap);
        }
    }
    return code;
}

// A key for a message: bytes outside printable ASCII become '?', long keys are cut.
static const char *s_printable(char *buf, size_t cap, const uint8_t *s, size_t n) {
    size_t k = 0;
    for (size_t i = 0; i < n && k + 4 < cap; i++) {
        buf[k++] = s[i] >= 0x20 && s[i] < 0x7f ? (char)s[i] : '?';
    }
    if (k < n) {
        memcpy(buf + k, "...", 3);
        k += 3;
    }
    buf[k] = '\0';
    return buf;
}

// Reads the next item's header (and for str/bin, locates its body); the reader's failure becomes
// the decode's, at the item's offset.
static int s_next(s_dec_t *d, rl_mpack_item_t *t) {
    if (rl_mpack_read(&d->r, t) == 0) {
        return 0;
    }
    const rl_mpack_err_t *e = &d->r.err;
    if (e->kind == RL_MPACK_EEND) {
        return s_dfail(d, e->at, RL_EPROTO, "truncated: an item expected, the frame ends");
    }
    return s_dfail(d, e->at, RL_EPROTO, "%s", e->msg);
}

// A signed 64-bit value of an int item, or RL_EPROTO.
static int s_tok_i64(s_dec_t *d, const rl_mpack_item_t *t, const char *what, int64_t *v) {
    if (t->type == RL_MPACK_INT) {
        *v = t->i;
        return 0;
    }
    if (t->type == RL_MPACK_UINT && t->u <= (uint64_t)INT64_MAX) {
        *v = (int64_t)t->u;
        return 0;
    }
    if (t->type == RL_MPACK_UINT) {
        return s_dfail(d, t->at, RL_EPROTO, "%s: %llu does not fit a signed 64-bit int", what,
                       (unsigned long long)t->u);
    }
    return s_dfail(d, t->at, RL_EPROTO, "%s: expected int, found %s", what,
                   rl_mpack_type_name(t->type));
}

static int s_str_is(const rl_mpack_item_t *t, const char *s) {
    size_t n = strlen(s);
    return t->type == RL_MPACK_STR && t->n == n && memcmp(t->s, s, n) == 0;
}

// Skips what is nested in t (nothing for scalars): t's header has been read.
static int s_skip_nested(rl_mpack_t *r, const rl_mpack_item_t *t) {
    uint64_t pending = t->type == RL_MPACK_ARRAY ? t->n : t->type == RL_MPACK_MAP ? 2 * t->n : 0;
    for (; pending; pending--) {
        if (rl_mpack_skip(r, 0) != 0) { // no depth limit: the skip keeps a count, not a stack
            return RL_EPROTO;
        }
    }
    return 0;
}

// Version check before anything else: a peer speaking another version may use forms this one
// rejects, so a top-level integer `v` other than ours is reported as RL_EVERSION wherever it
// sits in the map. Any malformation here is left for the full parse to report.
static int s_scan_version(const s_dec_t *d0) {
    s_dec_t dd = *d0, *d = &dd;
    d->err = NULL; // quiet: only a version mismatch is reported from here
    rl_mpack_item_t map, k, v;
    if (rl_mpack_read(&d->r, &map) || map.type != RL_MPACK_MAP) {
        return 0;
    }
    for (uint64_t i = 0; i < map.n; i++) {
        if (rl_mpack_read(&d->r, &k) || s_skip_nested(&d->r, &k)) {
            return 0;
        }
        if (rl_mpack_read(&d->r, &v)) {
            return 0;
        }
        if (s_str_is(&k, "v")) {
            int64_t ver = 0;
            if (s_tok_i64(d, &v, "v", &ver) == 0 && ver != RL_WIRE_VERSION) {
                d->err = d0->err;
                return s_dfail(d, v.at, RL_EVERSION, "protocol version %lld, this build speaks %d",
                               (long long)ver, RL_WIRE_VERSION);
            }
            return 0;
        }
        if (s_skip_nested(&d->r, &v)) {
            return 0;
        }
    }
    return 0;
}

// ---- decoding: the message -------------------------------------------------------------------

// A string list: an array of str items, copied into one block (two passes: sizes, then copy).
static int s_dec_strs(s_dec_t *d, const rl_mpack_item_t *arr, const char *key, s_entry_t *v) {
    if (arr->n > RL_WIRE_MAX_STRS) {
        return s_dfail(d, arr->at, RL_EPROTO, "key \"%s\": list of %llu strings (max %u)", key,
                       (unsigned long long)arr->n, RL_WIRE_MAX_STRS);
    }
    rl_mpack_t start = d->r; // the items are read twice
    size_t total = 0;
    rl_mpack_item_t t;
    for (uint64_t j = 0; j < arr->n; j++) {
        int rc = s_next(d, &t);
        if (rc) {
            return rc;
        }
        if (t.type != RL_MPACK_STR) {
            return s_dfail(d, t.at, RL_EPROTO,
                           "key \"%s\": item %llu: a list holds only strings, found %s", key,
                           (unsigned long long)j, rl_mpack_type_name(t.type));
        }
        total += (size_t)t.n + 1; // bounded by the frame's length
    }
    int n = (int)arr->n;
    size_t head = (size_t)n * (sizeof(char *) + sizeof(size_t));
    char **block = malloc(head + total + 1);
    if (!block) {
        return s_dfail(d, arr->at, RL_ENOMEM, "key \"%s\": out of memory", key);
    }
    size_t *ls = (size_t *)(block + n);
    char *p = (char *)block + head;
    d->r = start;
    for (int j = 0; j < n; j++) {
        s_next(d, &t); // cannot fail: read once already
        block[j] = p;
        ls[j] = (size_t)t.n;
        memcpy(p, t.s, (size_t)t.n);
        p[t.n] = '\0';
        p += t.n + 1;
    }
    v->kind = S_STRS;
    v->u.strs.s = block;
    v->u.strs.lens = ls;
    v->u.strs.n = n;
    return 0;
}

// A tensor map {dtype, shape, data | frame}.
static int s_dec_tensor(s_dec_t *d, const rl_mpack_item_t *map, const char *key, s_entry_t *v) {
    if (map->n != 3) {
        return s_dfail(d, map->at, RL_EPROTO,
                       "key \"%s\": a map value must be a tensor {dtype, shape, data|frame}, "
                       "found a map of %llu entries",
                       key, (unsigned long long)map->n);
    }
    int have_dt = 0, have_shape = 0, have_data = 0;
    rl_wire_dtype_t dt = RL_DT_F32;
    int ndim = 0;
    int64_t shape[RL_WIRE_MAX_NDIM];
    const uint8_t *src = NULL;
    size_t src_len = 0, data_at = 0;
    int have_frame = 0;
    int64_t frame_index = 0;
    int rc;
    for (int e = 0; e < 3; e++) {
        rl_mpack_item_t k, t;
        if ((rc = s_next(d, &k)) != 0) {
            return rc;
        }
        if (k.type != RL_MPACK_STR) {
            return s_dfail(d, k.at, RL_EPROTO, "tensor \"%s\": a key must be a str, found %s", key,
                           rl_mpack_type_name(k.type));
        }
        char kb[64];
        s_printable(kb, sizeof kb, k.s, (size_t)k.n);
        if ((rc = s_next(d, &t)) != 0) {
            return rc;
        }
        if (s_str_is(&k, "dtype")) {
            if (have_dt++) {
                return s_dfail(d, k.at, RL_EPROTO, "tensor \"%s\": duplicate key \"dtype\"", key);
            }
            if (t.type != RL_MPACK_STR) {
                return s_dfail(d, t.at, RL_EPROTO, "tensor \"%s\": dtype: expected str, found %s",
                               key, rl_mpack_type_name(t.type));
            }
            int found = -1;
            for (int i = 0; i < S_N_DT; i++) {
                found = s_str_is(&t, s_dt_names[i]) ? i : found;
            }
            if (found < 0) {
                char vb[64];
                return s_dfail(d, t.at, RL_EPROTO,
                               "tensor \"%s\": unknown dtype \"%s\" (f32, f64, i32, i64, u8)", key,
                               s_printable(vb, sizeof vb, t.s, (size_t)t.n));
            }
            dt = (rl_wire_dtype_t)found;
        } else if (s_str_is(&k, "shape")) {
            if (have_shape++) {
                return s_dfail(d, k.at, RL_EPROTO, "tensor \"%s\": duplicate key \"shape\"", key);
            }
            if (t.type != RL_MPACK_ARRAY || t.n > RL_WIRE_MAX_NDIM) {
                return s_dfail(d, t.at, RL_EPROTO,
                               "tensor \"%s\": shape: expected an array of 0..%d ints, found %s "
                               "of %llu",
                               key, RL_WIRE_MAX_NDIM, rl_mpack_type_name(t.type),
                               (unsigned long long)t.n);
            }
            ndim = (int)t.n;
            for (int i = 0; i < ndim; i++) {
                rl_mpack_item_t dim;
                if ((rc = s_next(d, &dim)) != 0 || (rc = s_tok_i64(d, &dim, "shape", &shape[i]))) {
                    return rc;
                }
                if (shape[i] < 0) {
                    return s_dfail(d, dim.at, RL_EPROTO, "tensor \"%s\": dimension %d is %lld", key,
                                   i, (long long)shape[i]);
                }
            }
        } else if (s_str_is(&k, "data")) {
            if (have_data++) {
                return s_dfail(d, k.at, RL_EPROTO, "tensor \"%s\": data given twice", key);
            }
            if (t.type != RL_MPACK_BIN) {
                return s_dfail(d, t.at, RL_EPROTO, "tensor \"%s\": data: expected bin, found %s",
                               key, rl_mpack_type_name(t.type));
            }
            if (t.n >= RL_WIRE_INLINE_MAX) { // keeps the frame count of a re-encode in bounds
                return s_dfail(d, t.at, RL_EPROTO,
                               "tensor \"%s\": %llu bytes inline (%u or more travel as a frame)",
                               key, (unsigned long long)t.n, RL_WIRE_INLINE_MAX);
            }
            src = t.s;
            src_len = (size_t)t.n;
            data_at = t.at;
        } else if (s_str_is(&k, "frame")) {
            if (have_data++) {
                return s_dfail(d, k.at, RL_EPROTO, "tensor \"%s\": data given twice", key);
            }
            int64_t fi = 0;
            if ((rc = s_tok_i64(d, &t, "frame", &fi)) != 0) {
                return rc;
            }
            if (fi < 1 || fi >= d->n_frames) {
                return s_dfail(d, t.at, RL_EPROTO,
                               "tensor \"%s\": frame %lld is missing (the message has %d extra "
                               "frames, numbered from 1)",
                               key, (long long)fi, d->n_frames - 1);
            }
            if (d->used[fi]) {
                return s_dfail(d, t.at, RL_EPROTO, "tensor \"%s\": frame %lld is used twice", key,
                               (long long)fi);
            }
            d->used[fi] = 1;
            have_frame = 1;
            frame_index = fi;
            src = d->frames[fi].data;
            src_len = d->frames[fi].len;
            data_at = t.at;
        } else {
            return s_dfail(d, k.at, RL_EPROTO,
                           "tensor \"%s\": unknown key \"%s\" (dtype, shape, data, frame)", key,
                           kb);
        }
    }
    if (!have_dt || !have_shape || !have_data) {
        return s_dfail(d, map->at, RL_EPROTO, "tensor \"%s\": missing %s", key,
                       !have_dt      ? "dtype"
                       : !have_shape ? "shape"
                                     : "data or frame");
    }
    int ok;
    size_t nbytes = s_tensor_bytes(dt, ndim, shape, &ok);
    if (!ok) {
        return s_dfail(d, map->at, RL_EPROTO, "tensor \"%s\": shape holds more than %llu bytes",
                       key, (unsigned long long)RL_WIRE_MAX_BYTES);
    }
    if (nbytes != src_len) {
        char desc[96];
        s_tensor_desc(desc, sizeof desc, dt, ndim, shape);
        return s_dfail(d, data_at, RL_EPROTO,
                       "tensor \"%s\": %s needs %zu bytes of data, found %zu", key, desc, nbytes,
                       src_len);
    }
    // Copied into aligned storage (frame bytes from ZeroMQ carry no alignment promise, and an
    // inline bin sits at any offset of frame 0), unless the caller lets us keep the frame and it
    // happens to be aligned for the dtype: then the frame's memory becomes the tensor's.
    s_buf_t *b = NULL;
    int fi = (int)(have_frame ? frame_index : 0);
    if (fi && d->owners && d->owners[fi].release && nbytes &&
        (uintptr_t)src % rl_wire_dtype_size(dt) == 0) {
        b = s_buf_wrap((void *)src);
        if (b) {
            b->release = s_release_none; // until the whole decode succeeds
            d->kept[fi] = b;
        }
    }
    if (!b) {
        b = s_buf_alloc(nbytes);
        if (!b) {
            return s_dfail(d, map->at, RL_ENOMEM, "tensor \"%s\": out of memory (%zu bytes)", key,
                           nbytes);
        }
        if (nbytes) {
            memcpy(b->data, src, nbytes);
        }
    }
    v->kind = S_TENSOR;
    v->u.t.dt = dt;
    v->u.t.ndim = ndim;
    for (int i = 0; i < ndim; i++) {
        v->u.t.shape[i] = shape[i];
    }
    v->u.t.nbytes = nbytes;
    v->u.t.buf = b;
    return 0;
}

// One value of a user key.
static int s_dec_value(s_dec_t *d, const char *key, s_entry_t *v) {
    rl_mpack_item_t t;
    int rc = s_next(d, &t);
    if (rc) {
        return rc;
    }
    switch (t.type) {
    case RL_MPACK_NIL: v->kind = S_NIL; return 0;
    case RL_MPACK_BOOL:
        v->kind = S_BOOL;
        v->u.b = (int)t.u;
        return 0;
    case RL_MPACK_UINT:
    case RL_MPACK_INT: v->kind = S_INT; return s_tok_i64(d, &t, key, &v->u.i);
    case RL_MPACK_FLOAT:
        v->kind = S_FLOAT;
        v->u.f = t.f;
        return 0;
    case RL_MPACK_STR:
        v->u.str.s = malloc((size_t)t.n + 1);
        if (!v->u.str.s) {
            return s_dfail(d, t.at, RL_ENOMEM, "key \"%s\": out of memory", key);
        }
        v->kind = S_STR;
        memcpy(v->u.str.s, t.s, (size_t)t.n);
        v->u.str.s[t.n] = '\0';
        v->u.str.len = (size_t)t.n;
        return 0;
    case RL_MPACK_ARRAY: return s_dec_strs(d, &t, key, v);
    case RL_MPACK_MAP: return s_dec_tensor(d, &t, key, v);
    case RL_MPACK_BIN:
        return s_dfail(d, t.at, RL_EPROTO,
                       "key \"%s\": a bin value outside a tensor map (bytes travel as a u8 "
                       "tensor)",
                       key);
    case RL_MPACK_EXT: break; // refused by the cursor (RL_MPACK_NO_EXT)
    }
    return s_dfail(d, t.at, RL_EPROTO, "key \"%s\": unexpected item", key);
}

int rl_msg_decode(const rl_frame_t *frames, int n, rl_msg_t **out, char *err, size_t err_len) {
    return rl_msg_decode_owned(frames, NULL, n, out, err, err_len);
}

int rl_msg_decode_owned(const rl_frame_t *frames, rl_frame_owner_t *owners, int n, rl_msg_t **out,
                        char *err, size_t err_len) {
    *out = NULL;
    for (int i = 0; owners && i < n && i <= RL_WIRE_MAX_FRAMES; i++) {
        owners[i].kept = 0;
    }
    if (err && err_len) {
        err[0] = '\0';
    }
    if (n < 1 || n > 1 + RL_WIRE_MAX_FRAMES) {
        return rl_errf(err, err_len, RL_EPROTO, "%d frames (1..%d)", n, 1 + RL_WIRE_MAX_FRAMES);
    }
    for (int i = 0; i < n; i++) {
        if ((!frames[i].data && frames[i].len) || frames[i].len > RL_WIRE_MAX_BYTES) {
            return rl_errf(err, err_len, RL_EPROTO, "frame %d: %zu bytes (max %llu)", i,
                           frames[i].len, (unsigned long long)RL_WIRE_MAX_BYTES);
        }
    }
    s_dec_t d = {.frames = frames, .n_frames = n, .owners = owners, .err = err, .err_len = err_len};
    rl_mpack_init(&d.r, frames[0].data, frames[0].len, RL_MPACK_NO_EXT);
    int rc = s_scan_version(&d); // reads a copy of the cursor
    if (rc) {
        return rc;
    }
    rl_msg_t *m = calloc(1, sizeof *m);
    if (!m) {
        return rl_errf(err, err_len, RL_ENOMEM, "out of memory");
    }
    msgpack_sbuffer_init(&m->sb);
    rl_mpack_item_t map;
    if ((rc = s_next(&d, &map)) != 0) {
        goto fail;
    }
    if (map.type != RL_MPACK_MAP) {
        rc = s_dfail(&d, map.at, RL_EPROTO, "a message is a map, found %s",
                     rl_mpack_type_name(map.type));
        goto fail;
    }
    if (map.n > RL_WIRE_MAX_KEYS + 3) {
        rc = s_dfail(&d, map.at, RL_EPROTO, "map of %llu keys (max %d besides v, op, id)",
                     (unsigned long long)map.n, RL_WIRE_MAX_KEYS);
        goto fail;
    }
    m->e = calloc(map.n ? (size_t)map.n : 1, sizeof *m->e);
    if (!m->e) {
        rc = rl_errf(err, err_len, RL_ENOMEM, "out of memory");
        goto fail;
    }
    m->cap = (int)(map.n ? map.n : 1);
    int have_v = 0, have_id = 0;
    for (uint64_t i = 0; i < map.n; i++) {
        rl_mpack_item_t k, t;
        char kb[64];
        if ((rc = s_next(&d, &k)) != 0) {
            goto fail;
        }
        if (k.type != RL_MPACK_STR) {
            rc = s_dfail(&d, k.at, RL_EPROTO, "entry %llu: a key must be a str, found %s",
                         (unsigned long long)i, rl_mpack_type_name(k.type));
            goto fail;
        }
        s_printable(kb, sizeof kb, k.s, (size_t)k.n);
        if (k.n < 1 || k.n > RL_WIRE_MAX_KEY_LEN || memchr(k.s, 0, (size_t)k.n)) {
            rc = s_dfail(&d, k.at, RL_EPROTO, "key \"%s\": %llu bytes (1..%d, no NUL)", kb,
                         (unsigned long long)k.n, RL_WIRE_MAX_KEY_LEN);
            goto fail;
        }
        char key[RL_WIRE_MAX_KEY_LEN + 1];
        memcpy(key, k.s, (size_t)k.n);
        key[k.n] = '\0';
        if ((strcmp(key, "v") == 0 && have_v) || (strcmp(key, "op") == 0 && m->op) ||
            (strcmp(key, "id") == 0 && have_id) || s_find(m, key)) {
            rc = s_dfail(&d, k.at, RL_EPROTO, "duplicate key \"%s\"", kb);
            goto fail;
        }
        if (strcmp(key, "v") == 0) {
            int64_t val = 0;
            if ((rc = s_next(&d, &t)) != 0 || (rc = s_tok_i64(&d, &t, key, &val)) != 0) {
                goto fail;
            }
            if (val != RL_WIRE_VERSION) { // reported by the scan already; kept for clarity
                rc = s_dfail(&d, t.at, RL_EVERSION, "protocol version %lld, this build speaks %d",
                             (long long)val, RL_WIRE_VERSION);
                goto fail;
            }
            have_v = 1;
        } else if (strcmp(key, "id") == 0) { // the full u64 range
            if ((rc = s_next(&d, &t)) != 0) {
                goto fail;
            }
            if (t.type != RL_MPACK_UINT && !(t.type == RL_MPACK_INT && t.i >= 0)) {
                rc = s_dfail(&d, t.at, RL_EPROTO, "id: expected an int >= 0, found %s%s",
                             rl_mpack_type_name(t.type), t.type == RL_MPACK_INT ? " < 0" : "");
                goto fail;
            }
            m->id = t.type == RL_MPACK_UINT ? t.u : (uint64_t)t.i;
            have_id = 1;
        } else if (strcmp(key, "op") == 0) {
            if ((rc = s_next(&d, &t)) != 0) {
                goto fail;
            }
            if (t.type != RL_MPACK_STR || t.n < 1 || t.n > RL_WIRE_MAX_KEY_LEN ||
                memchr(t.s, 0, t.n)) {
                rc = s_dfail(&d, t.at, RL_EPROTO,
                             "op: expected a str of 1..%d bytes without NUL, "
                             "found %s of %llu",
                             RL_WIRE_MAX_KEY_LEN, rl_mpack_type_name(t.type),
                             (unsigned long long)t.n);
                goto fail;
            }
            m->op = malloc((size_t)t.n + 1);
            if (!m->op) {
                rc = rl_errf(err, err_len, RL_ENOMEM, "out of memory");
                goto fail;
            }
            memcpy(m->op, t.s, (size_t)t.n);
            m->op[t.n] = '\0';
        } else {
            s_entry_t *e = &m->e[m->n];
            memset(e, 0, sizeof *e);
            e->key = strdup(key);
            if (!e->key) {
                rc = rl_errf(err, err_len, RL_ENOMEM, "out of memory");
                goto fail;
            }
            m->n++; // counted now, so the fail path frees the key and whatever value is set
            if ((rc = s_dec_value(&d, kb, e)) != 0) {
                goto fail;
            }
        }
    }
    if (!have_v || !m->op || !have_id) {
        rc = s_dfail(&d, map.at, RL_EPROTO, "missing key \"%s\"",
                     !have_v  ? "v"
                     : !m->op ? "op"
                              : "id");
        goto fail;
    }
    if (rl_mpack_left(&d.r) != 0) {
        rc = s_dfail(&d, d.r.off, RL_EPROTO, "%zu bytes after the map", rl_mpack_left(&d.r));
        goto fail;
    }
    for (int i = 1; i < n; i++) {
        if (!d.used[i]) {
            rc = rl_errf(err, err_len, RL_EPROTO,
                         "frame %d (%zu bytes) is not referenced by "
                         "any tensor",
                         i, frames[i].len);
            goto fail;
        }
    }
    for (int i = 1; i < n; i++) { // the decode stands: kept frames are the message's now
        if (d.kept[i]) {
            d.kept[i]->release = owners[i].release;
            d.kept[i]->hint = owners[i].hint;
            owners[i].kept = 1;
        }
    }
    *out = m;
    return 0;
fail:
    rl_msg_free(&m); // kept frames go back through s_release_none: they stay the caller's
    return rc;
}
