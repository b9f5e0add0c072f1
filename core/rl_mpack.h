// rl_mpack — the one bounded msgpack reader: a cursor over a byte buffer that reads one item at a
// time (its type, its int/float value, the span of a str/bin/ext body, the count of an array or
// map) and skips whole items under a nesting limit. Bytes come from peers and from disk, so every
// length is checked against the bytes left before it is believed (an array of n items needs n
// bytes, a map of n entries 2n) and against the caller's cap, before the caller allocates for it;
// nothing here allocates. A failure leaves the cursor where it was and records in the cursor what
// went wrong: the offset of the item, the kind of failure, what was expected and what was found.
// The role protocol (transport/rl_wire) and the trajectory records (rollout/rl_traj) decode with it
// and word their own messages from that record.
// Not a writer (msgpack-c encodes), not a tree builder, not a validator of whole documents.
#ifndef RL_MPACK_H
#define RL_MPACK_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// The msgpack families. UINT is the positive fixint and uint 8..64 formats, INT the negative
// fixint and int 8..64 formats (whose value may be >= 0): a decoder that cares which form was
// written can tell; the typed reads below accept both.
typedef enum {
    RL_MPACK_NIL,
    RL_MPACK_BOOL,
    RL_MPACK_UINT,
    RL_MPACK_INT,
    RL_MPACK_FLOAT,
    RL_MPACK_STR,
    RL_MPACK_BIN,
    RL_MPACK_ARRAY,
    RL_MPACK_MAP,
    RL_MPACK_EXT,
} rl_mpack_type_t;

// What a failed call ran into (rl_mpack_t.err.kind). Every failure returns RL_EPROTO.
typedef enum {
    RL_MPACK_OK = 0,
    RL_MPACK_EEND,   // no byte left where an item was expected
    RL_MPACK_EHEAD,  // the length or value field after the head byte passes the end
    RL_MPACK_EBODY,  // a str/bin/ext body, or the least bytes an array/map count needs, passes
                     // the end
    RL_MPACK_EBYTE,  // 0xc1 (no msgpack type), or an ext head under RL_MPACK_NO_EXT
    RL_MPACK_ETYPE,  // a typed read found another type
    RL_MPACK_ERANGE, // an int outside the range the typed read asked for
    RL_MPACK_ECAP,   // a str/bin length or an array/map count above the caller's cap
    RL_MPACK_EDEPTH, // skip: an item nested deeper than allowed
} rl_mpack_errkind_t;

// Flags of rl_mpack_init.
enum {
    RL_MPACK_NO_EXT = 1u << 0, // ext items (0xc7-0xc9, 0xd4-0xd8) are an error (EBYTE), also
                               // inside skipped items: for formats that never use them
};

#define RL_MPACK_MAX_DEPTH 64 // the most nesting levels rl_mpack_skip can be asked to allow

// One item's header, as rl_mpack_read returns it.
typedef struct {
    rl_mpack_type_t type;
    uint8_t head;     // the head byte
    int width;        // bytes of the field after the head byte (0, 1, 2, 4 or 8): the value of
                      // an int or float, the length of a str/bin/ext, the count of an array/map
    size_t at;        // offset of the head byte in the buffer
    uint64_t n;       // STR/BIN/EXT: body bytes (EXT: without its type byte); ARRAY: items;
                      // MAP: entries (each count is backed by at least n, resp. 2n, bytes)
    uint64_t u;       // BOOL: 0 or 1; UINT: the value
    int64_t i;        // INT: the value (sign-extended)
    double f;         // FLOAT: the value (float 32 widened exactly)
    int8_t ext;       // EXT: its application type
    const uint8_t *s; // STR/BIN/EXT: the body, n bytes inside the buffer (borrowed; valid as
                      // long as the buffer)
} rl_mpack_item_t;

// The last failure, in parts, for decoders that word their own messages.
typedef struct {
    rl_mpack_errkind_t kind;
    size_t at;            // offset of the item the failure is about (EEND: the buffer's length)
    uint8_t head;         // its head byte (EEND: 0)
    rl_mpack_type_t type; // its type when the head byte names one (ETYPE: what was found)
    int width;            // EHEAD: bytes the field needs
    uint64_t n;           // EBODY/ECAP: the length or count the item claims
    size_t left;          // EHEAD/EBODY: bytes left after the head byte (EHEAD) or after the
                          // header (EBODY)
    const char *expected; // ETYPE: "nil", "bool", "int" (either family), "number" (an int or a
                          // float), "str", "bin", "array" or "map"; else NULL
    char msg[128];        // the failure in words, without the offset: "truncated: str of 40
                          // bytes, 3 left", "expected str, found uint", ...
} rl_mpack_err_t;

// A cursor. It is a plain value: copy it to come back to a position (a decoder's second pass).
// Fields are read-only outside this module; off only moves forward through the calls below.
typedef struct {
    const uint8_t *p; // the buffer (borrowed; valid as long as the caller keeps it)
    size_t len;       // its length in bytes
    size_t off;       // offset of the next item
    unsigned flags;   // RL_MPACK_*
    rl_mpack_err_t err;
} rl_mpack_t;

// A cursor at the start of buf[0..len) (buf may be NULL when len is 0). buf is borrowed for as
// long as the cursor and the items read through it are used.
void rl_mpack_init(rl_mpack_t *r, const void *buf, size_t len, unsigned flags);

// Bytes after the cursor.
static inline size_t rl_mpack_left(const rl_mpack_t *r) {
    return r->len - r->off;
}

// "nil", "bool", "uint", "int", "float", "str", "bin", "array", "map", "ext"; "?" otherwise.
// borrowed; valid until program exit.
const char *rl_mpack_type_name(rl_mpack_type_t type);

// The type of the next item, from its head byte alone (nothing after it is checked; the cursor
// does not move). Returns 0, or RL_EPROTO: EEND (no byte left) or EBYTE.
int rl_mpack_peek(rl_mpack_t *r, rl_mpack_type_t *type);

// Reads the next item's header into *it and moves past it; for STR/BIN/EXT also past the body,
// which is located inside the buffer. Arrays and maps are entered, not skipped: their items come
// next. Returns 0, or RL_EPROTO (EEND, EBYTE, EHEAD, EBODY) with the cursor unmoved.
int rl_mpack_read(rl_mpack_t *r, rl_mpack_item_t *it);

// ---- typed reads: the next item must be of the kind named (ETYPE otherwise, expected set) ----
// Each returns 0, or RL_EPROTO with the cursor unmoved and r->err filled; the read's own cap or
// range gives ECAP / ERANGE after the bounds are checked.

// nil.
int rl_mpack_read_nil(rl_mpack_t *r);
// bool: *v = 0 or 1.
int rl_mpack_read_bool(rl_mpack_t *r, int *v);
// An int of any format whose value is in 0..max (ERANGE otherwise, negatives included).
int rl_mpack_read_uint(rl_mpack_t *r, uint64_t max, uint64_t *v);
// An int of any format whose value is in min..max (ERANGE otherwise).
int rl_mpack_read_int(rl_mpack_t *r, int64_t min, int64_t max, int64_t *v);
// A float 32/64, or an int of any format, as a double (expected "number").
int rl_mpack_read_number(rl_mpack_t *r, double *v);
// A str of at most max bytes: *s points into the buffer (borrowed, not NUL-terminated).
int rl_mpack_read_str(rl_mpack_t *r, uint64_t max, const uint8_t **s, size_t *n);
// A bin of at most max bytes: *s points into the buffer (borrowed).
int rl_mpack_read_bin(rl_mpack_t *r, uint64_t max, const uint8_t **s, size_t *n);
// An array header of at most max items (backed by >= *n bytes); its items come next.
int rl_mpack_read_array(rl_mpack_t *r, uint64_t max, uint64_t *n);
// A map header of at most max entries (backed by >= 2 * *n bytes); key, value, key, ... follow.
int rl_mpack_read_map(rl_mpack_t *r, uint64_t max, uint64_t *n);

// Skips the next item whole: a scalar, or a container with everything nested in it. max_depth
// 1..RL_MPACK_MAX_DEPTH is how many levels may be open, the item itself counting as one (1: a
// scalar or an empty container; 2: a container of scalars); an item one level deeper gives
// EDEPTH. max_depth 0
// sets no limit: the walk keeps a count, not a stack, so it never recurses and cannot overflow
// (every pending item is backed by a byte). Any item's failure (EEND, EBYTE, EHEAD, EBODY) ends
// the skip with that item's offset in r->err. Returns 0 or RL_EPROTO; on failure the cursor is
// left unmoved.
int rl_mpack_skip(rl_mpack_t *r, int max_depth);

#ifdef __cplusplus
}
#endif
#endif
