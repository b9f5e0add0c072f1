// rl_mpack — the bounded msgpack reader (see rl_mpack.h). Why not msgpack-c's unpacker: it
// builds an object tree whose arrays it allocates from the counts it reads, before knowing
// whether the bytes behind them exist (an array32 header claiming 4e9 items asks for ~100 GB),
// and its errors carry no position. Here one function (s_head) knows the msgpack head bytes;
// everything else is built on it, so the bounds are checked in one place.
#include "rl_mpack.h"

#include "rl_err.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static const char *const s_type_names[] = {"nil", "bool", "uint",  "int", "float",
                                           "str", "bin",  "array", "map", "ext"};

const char *rl_mpack_type_name(rl_mpack_type_t type) {
    return (int)type >= 0 && (int)type <= (int)RL_MPACK_EXT ? s_type_names[type] : "?";
}

void rl_mpack_init(rl_mpack_t *r, const void *buf, size_t len, unsigned flags) {
    memset(r, 0, sizeof *r);
    r->p = buf;
    r->len = buf ? len : 0;
    r->flags = flags;
}

// ---- errors ------------------------------------------------------------------------------------

// Records a failure of the item at `at` and returns RL_EPROTO. The caller has filled the other
// parts of r->err it knows (this sets kind, at and the message only).
__attribute__((format(printf, 4, 5))) static int s_fail(rl_mpack_t *r, rl_mpack_errkind_t kind,
                                                        size_t at, const char *fmt, ...) {
    r->err.kind = kind;
    r->err.at = at;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->err.msg, sizeof r->err.msg, fmt, ap);
    va_end(ap);
    return RL_EPROTO;
}

static void s_err_reset(rl_mpack_t *r, size_t at, uint8_t head, rl_mpack_type_t type) {
    memset(&r->err, 0, sizeof r->err);
    r->err.at = at;
    r->err.head = head;
    r->err.type = type;
}

// ---- the head byte -----------------------------------------------------------------------------

// What a head byte says: the family, the width of the field after it, and for fixed forms the
// value or count inside the byte. An ext body is one type byte, then its data (`fix` and the
// length field count the data only).
typedef struct {
    rl_mpack_type_t type;
    int width;    // bytes after the head byte holding the value, length or count
    uint64_t fix; // fixint value, fixstr length, fixarray/fixmap count, bool, fixext data bytes
    int bad;      // 0xc1
} s_head_t;

static s_head_t s_head(uint8_t b) {
    s_head_t h = {RL_MPACK_NIL, 0, 0, 0};
    if (b <= 0x7f) {
        h.type = RL_MPACK_UINT;
        h.fix = b;
    } else if (b <= 0x8f) {
        h.type = RL_MPACK_MAP;
        h.fix = b & 0x0f;
    } else if (b <= 0x9f) {
        h.type = RL_MPACK_ARRAY;
        h.fix = b & 0x0f;
    } else if (b <= 0xbf) {
        h.type = RL_MPACK_STR;
        h.fix = b & 0x1f;
    } else if (b >= 0xe0) {
        h.type = RL_MPACK_INT;
    } else {
        switch (b) {
        case 0xc0: h.type = RL_MPACK_NIL; break;
        case 0xc1: h.bad = 1; break;
        case 0xc2:
        case 0xc3:
            h.type = RL_MPACK_BOOL;
            h.fix = b & 1;
            break;
        case 0xc4:
        case 0xc5:
        case 0xc6:
            h.type = RL_MPACK_BIN;
            h.width = 1 << (b - 0xc4);
            break;
        case 0xc7:
        case 0xc8:
        case 0xc9:
            h.type = RL_MPACK_EXT;
            h.width = 1 << (b - 0xc7);
            break;
        case 0xca:
        case 0xcb:
            h.type = RL_MPACK_FLOAT;
            h.width = b == 0xca ? 4 : 8;
            break;
        case 0xcc:
        case 0xcd:
        case 0xce:
        case 0xcf:
            h.type = RL_MPACK_UINT;
            h.width = 1 << (b - 0xcc);
            break;
        case 0xd0:
        case 0xd1:
        case 0xd2:
        case 0xd3:
            h.type = RL_MPACK_INT;
            h.width = 1 << (b - 0xd0);
            break;
        case 0xd4:
        case 0xd5:
        case 0xd6:
        case 0xd7:
        case 0xd8: // fixext 1/2/4/8/16: a type byte, then that many data bytes
            h.type = RL_MPACK_EXT;
            h.fix = 1u << (b - 0xd4);
            break;
        case 0xd9:
        case 0xda:
        case 0xdb:
            h.type = RL_MPACK_STR;
            h.width = 1 << (b - 0xd9);
            break;
        case 0xdc:
        case 0xdd:
            h.type = RL_MPACK_ARRAY;
            h.width = b == 0xdc ? 2 : 4;
            break;
        default: // 0xde, 0xdf
            h.type = RL_MPACK_MAP;
            h.width = b == 0xde ? 2 : 4;
            break;
        }
    }
    return h;
}

static uint64_t s_be(const uint8_t *p, int n) {
    uint64_t v = 0;
    for (int i = 0; i < n; i++) {
        v = v << 8 | p[i];
    }
    return v;
}

int rl_mpack_peek(rl_mpack_t *r, rl_mpack_type_t *type) {
    size_t at = r->off;
    if (at >= r->len) {
        s_err_reset(r, at, 0, RL_MPACK_NIL);
        return s_fail(r, RL_MPACK_EEND, at, "truncated: an item expected, the buffer ends");
    }
    uint8_t b = r->p[at];
    s_head_t h = s_head(b);
    if (h.bad) {
        s_err_reset(r, at, b, RL_MPACK_NIL);
        return s_fail(r, RL_MPACK_EBYTE, at, "byte 0xc1 is not a msgpack type");
    }
    if (h.type == RL_MPACK_EXT && (r->flags & RL_MPACK_NO_EXT)) {
        s_err_reset(r, at, b, RL_MPACK_EXT);
        return s_fail(r, RL_MPACK_EBYTE, at, "msgpack ext type 0x%02x is not used here", b);
    }
    *type = h.type;
    return 0;
}

int rl_mpack_read(rl_mpack_t *r, rl_mpack_item_t *it) {
    rl_mpack_type_t type;
    int rc = rl_mpack_peek(r, &type);
    if (rc) {
        return rc;
    }
    size_t at = r->off;
    uint8_t b = r->p[at];
    s_head_t h = s_head(b);
    size_t left = r->len - at - 1; // after the head byte
    if ((size_t)h.width > left) {
        s_err_reset(r, at, b, h.type);
        r->err.width = h.width;
        r->err.left = left;
        return s_fail(r, RL_MPACK_EHEAD, at, "truncated: %d header bytes expected, %zu left",
                      h.width, left);
    }
    memset(it, 0, sizeof *it);
    it->type = h.type;
    it->head = b;
    it->width = h.width;
    it->at = at;
    uint64_t v = h.width ? s_be(r->p + at + 1, h.width) : h.fix;
    left -= (size_t)h.width; // after the header
    switch (h.type) {
    case RL_MPACK_NIL: break;
    case RL_MPACK_BOOL:
    case RL_MPACK_UINT: it->u = v; break;
    case RL_MPACK_INT:
        if (h.width == 0) { // negative fixint
            it->i = (int8_t)b;
        } else if (h.width == 8) {
            it->i = (int64_t)v;
        } else { // sign-extend a w-byte two's complement value
            uint64_t sign = 1ull << (8 * h.width - 1);
            it->i = (int64_t)(v ^ sign) - (int64_t)sign;
        }
        break;
    case RL_MPACK_FLOAT:
        if (h.width == 4) {
            uint32_t u32 = (uint32_t)v;
            float f32;
            memcpy(&f32, &u32, 4);
            it->f = f32;
        } else {
            memcpy(&it->f, &v, 8);
        }
        break;
    case RL_MPACK_STR:
    case RL_MPACK_BIN:
    case RL_MPACK_EXT: {
        int ext = h.type == RL_MPACK_EXT; // one type byte before the data
        if (v > left || (ext && v + 1 > left)) {
            s_err_reset(r, at, b, h.type);
            r->err.n = v;
            r->err.left = left;
            if (ext) {
                return s_fail(r, RL_MPACK_EBODY, at,
                              "truncated: ext of %" PRIu64 " bytes and its type, %zu left", v,
                              left);
            }
            return s_fail(r, RL_MPACK_EBODY, at, "truncated: %s of %" PRIu64 " bytes, %zu left",
                          rl_mpack_type_name(h.type), v, left);
        }
        it->n = v;
        const uint8_t *body = r->p + at + 1 + h.width;
        if (ext) {
            it->ext = (int8_t)body[0];
            body++;
        }
        it->s = body;
        r->off = at + 1 + (size_t)h.width + (size_t)ext + (size_t)v;
        return 0;
    }
    case RL_MPACK_ARRAY: // every item takes at least one byte
        if (v > left) {
            s_err_reset(r, at, b, h.type);
            r->err.n = v;
            r->err.left = left;
            return s_fail(r, RL_MPACK_EBODY, at,
                          "truncated: array of %" PRIu64 " items, %zu bytes left", v, left);
        }
        it->n = v;
        break;
    case RL_MPACK_MAP: // every entry takes at least two
        if (v > left / 2) {
            s_err_reset(r, at, b, h.type);
            r->err.n = v;
            r->err.left = left;
            return s_fail(r, RL_MPACK_EBODY, at,
                          "truncated: map of %" PRIu64 " entries, %zu bytes left", v, left);
        }
        it->n = v;
        break;
    }
    r->off = at + 1 + (size_t)h.width;
    return 0;
}

// ---- typed reads -------------------------------------------------------------------------------

// Peeks the next item and checks its family against want (one or two families: b may equal a);
// `expected` names what was wanted.
static int s_want(rl_mpack_t *r, rl_mpack_type_t a, rl_mpack_type_t b, const char *expected) {
    rl_mpack_type_t t = RL_MPACK_NIL;
    int rc = rl_mpack_peek(r, &t);
    if (rc) {
        return rc;
    }
    if (t != a && t != b) {
        s_err_reset(r, r->off, r->p[r->off], t);
        r->err.expected = expected;
        return s_fail(r, RL_MPACK_ETYPE, r->off, "expected %s, found %s", expected,
                      rl_mpack_type_name(t));
    }
    return 0;
}

int rl_mpack_read_nil(rl_mpack_t *r) {
    rl_mpack_item_t it;
    int rc = s_want(r, RL_MPACK_NIL, RL_MPACK_NIL, "nil");
    return rc ? rc : rl_mpack_read(r, &it);
}

int rl_mpack_read_bool(rl_mpack_t *r, int *v) {
    rl_mpack_item_t it;
    int rc = s_want(r, RL_MPACK_BOOL, RL_MPACK_BOOL, "bool");
    if (!rc && !(rc = rl_mpack_read(r, &it))) {
        *v = (int)it.u;
    }
    return rc;
}

// An int item of either family, read (the cursor moves) into sign + magnitude.
static int s_read_any_int(rl_mpack_t *r, const char *expected, rl_mpack_item_t *it, int *neg) {
    int rc = s_want(r, RL_MPACK_UINT, RL_MPACK_INT, expected);
    if (!rc) {
        rc = rl_mpack_read(r, it);
    }
    if (!rc) {
        *neg = it->type == RL_MPACK_INT && it->i < 0;
    }
    return rc;
}

// The value of an int item as text, for range messages.
static void s_int_text(char *buf, size_t cap, const rl_mpack_item_t *it) {
    if (it->type == RL_MPACK_UINT) {
        snprintf(buf, cap, "%" PRIu64, it->u);
    } else {
        snprintf(buf, cap, "%" PRId64, it->i);
    }
}

int rl_mpack_read_uint(rl_mpack_t *r, uint64_t max, uint64_t *v) {
    rl_mpack_t save = *r;
    rl_mpack_item_t it;
    int neg = 0;
    int rc = s_read_any_int(r, "int", &it, &neg);
    if (rc) {
        return rc;
    }
    uint64_t u = it.type == RL_MPACK_UINT ? it.u : (uint64_t)it.i;
    if (neg || u > max) {
        char val[32];
        s_int_text(val, sizeof val, &it);
        *r = save;
        s_err_reset(r, it.at, it.head, it.type);
        return s_fail(r, RL_MPACK_ERANGE, it.at, "int %s outside 0..%" PRIu64, val, max);
    }
    *v = u;
    return 0;
}

int rl_mpack_read_int(rl_mpack_t *r, int64_t min, int64_t max, int64_t *v) {
    rl_mpack_t save = *r;
    rl_mpack_item_t it;
    int neg = 0;
    int rc = s_read_any_int(r, "int", &it, &neg);
    if (rc) {
        return rc;
    }
    int fits;
    if (it.type == RL_MPACK_INT) {
        fits = it.i >= min && it.i <= max;
    } else { // a uint: compared as unsigned, since it may exceed INT64_MAX
        fits = max >= 0 && it.u <= (uint64_t)max && (min <= 0 || it.u >= (uint64_t)min);
    }
    if (!fits) {
        char val[32];
        s_int_text(val, sizeof val, &it);
        *r = save;
        s_err_reset(r, it.at, it.head, it.type);
        return s_fail(r, RL_MPACK_ERANGE, it.at, "int %s outside %" PRId64 "..%" PRId64, val, min,
                      max);
    }
    *v = it.type == RL_MPACK_INT ? it.i : (int64_t)it.u;
    return 0;
}

int rl_mpack_read_number(rl_mpack_t *r, double *v) {
    rl_mpack_type_t t = RL_MPACK_NIL;
    int rc = rl_mpack_peek(r, &t);
    if (rc) {
        return rc;
    }
    rl_mpack_item_t it;
    if (t == RL_MPACK_FLOAT) {
        if (!(rc = rl_mpack_read(r, &it))) {
            *v = it.f;
        }
        return rc;
    }
    int neg;
    if (!(rc = s_read_any_int(r, "number", &it, &neg))) {
        *v = it.type == RL_MPACK_UINT ? (double)it.u : (double)it.i;
    }
    return rc;
}

// A str or bin of at most max bytes.
static int s_read_bytes(rl_mpack_t *r, rl_mpack_type_t want, uint64_t max, const uint8_t **s,
                        size_t *n) {
    rl_mpack_t save = *r;
    rl_mpack_item_t it;
    int rc = s_want(r, want, want, rl_mpack_type_name(want));
    if (!rc) {
        rc = rl_mpack_read(r, &it);
    }
    if (rc) {
        return rc;
    }
    if (it.n > max) {
        *r = save;
        s_err_reset(r, it.at, it.head, it.type);
        r->err.n = it.n;
        return s_fail(r, RL_MPACK_ECAP, it.at, "%s of %" PRIu64 " bytes (max %" PRIu64 ")",
                      rl_mpack_type_name(want), it.n, max);
    }
    *s = it.s;
    *n = (size_t)it.n;
    return 0;
}

int rl_mpack_read_str(rl_mpack_t *r, uint64_t max, const uint8_t **s, size_t *n) {
    return s_read_bytes(r, RL_MPACK_STR, max, s, n);
}

int rl_mpack_read_bin(rl_mpack_t *r, uint64_t max, const uint8_t **s, size_t *n) {
    return s_read_bytes(r, RL_MPACK_BIN, max, s, n);
}

// An array or map header of at most max items / entries.
static int s_read_count(rl_mpack_t *r, rl_mpack_type_t want, uint64_t max, uint64_t *n) {
    rl_mpack_t save = *r;
    rl_mpack_item_t it;
    int rc = s_want(r, want, want, rl_mpack_type_name(want));
    if (!rc) {
        rc = rl_mpack_read(r, &it);
    }
    if (rc) {
        return rc;
    }
    if (it.n > max) {
        *r = save;
        s_err_reset(r, it.at, it.head, it.type);
        r->err.n = it.n;
        return s_fail(r, RL_MPACK_ECAP, it.at, "%s of %" PRIu64 " %s (max %" PRIu64 ")",
                      rl_mpack_type_name(want), it.n, want == RL_MPACK_MAP ? "entries" : "items",
                      max);
    }
    *n = it.n;
    return 0;
}

int rl_mpack_read_array(rl_mpack_t *r, uint64_t max, uint64_t *n) {
    return s_read_count(r, RL_MPACK_ARRAY, max, n);
}

int rl_mpack_read_map(rl_mpack_t *r, uint64_t max, uint64_t *n) {
    return s_read_count(r, RL_MPACK_MAP, max, n);
}

// ---- skipping ----------------------------------------------------------------------------------

// Items nested in `it` that come after its header (none for scalars and str/bin/ext).
static uint64_t s_children(const rl_mpack_item_t *it) {
    return it->type == RL_MPACK_ARRAY ? it->n : it->type == RL_MPACK_MAP ? 2 * it->n : 0;
}

int rl_mpack_skip(rl_mpack_t *r, int max_depth) {
    RL_ASSERT(max_depth >= 0 && max_depth <= RL_MPACK_MAX_DEPTH);
    size_t start = r->off;
    rl_mpack_item_t it;
    int rc;
    if (max_depth == 0) {
        // No limit: `pending` counts the items still to read. Each is backed by at least one
        // byte (checked when its container was read), so it stays below the buffer's length.
        uint64_t pending = 1;
        while (pending) {
            if ((rc = rl_mpack_read(r, &it)) != 0) {
                r->off = start;
                return rc;
            }
            pending += s_children(&it);
            pending--;
        }
        return 0;
    }
    // With a limit: left[d] counts the items still to read at nesting level d + 1 (level 1 is
    // the item being skipped); items are read at level `depth`. A container read at level
    // depth <= max_depth opens level depth + 1, hence one slot more than the deepest level.
    uint64_t left[RL_MPACK_MAX_DEPTH + 1];
    int depth = 1;
    left[0] = 1;
    while (depth > 0) {
        if (left[depth - 1] == 0) {
            depth--;
            continue;
        }
        if (r->off >= r->len) { // a buffer that ends is reported before the depth
            rl_mpack_type_t t = RL_MPACK_NIL;
            rc = rl_mpack_peek(r, &t);
            r->off = start;
            return rc;
        }
        if (depth > max_depth) {
            size_t at = r->off;
            s_err_reset(r, at, r->p[at], s_head(r->p[at]).type);
            s_fail(r, RL_MPACK_EDEPTH, at, "nested deeper than %d levels", max_depth);
            r->off = start;
            return RL_EPROTO;
        }
        if ((rc = rl_mpack_read(r, &it)) != 0) {
            r->off = start;
            return rc;
        }
        left[depth - 1]--;
        uint64_t k = s_children(&it);
        if (k) {
            left[depth] = k;
            depth++;
        }
    }
    return 0;
}
