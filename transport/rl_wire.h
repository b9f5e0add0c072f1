// rl_wire — the role protocol's messages (DESIGN.md §3 "Wire", docs/protocol.md). A message is a
// flat map of string keys to values: nil, bool, int (i64), float (f64), string, a list of
// strings, or a tensor {dtype, shape, data}. On the wire it is one msgpack map in the first
// ZeroMQ frame, with `v` (RL_WIRE_VERSION), `op` and `id`; a tensor whose data is at least
// RL_WIRE_INLINE_MAX bytes travels as an extra frame instead, the map then holding
// {dtype, shape, frame: <index>}. The decoder takes bytes from peers: it checks every length
// and type against the bytes left and against the caps below, rejects unknown versions, and
// never trusts a count before the bytes to back it exist. Not the transport (rl_chan) and not
// the verbs (docs/protocol.md).
#ifndef RL_WIRE_H
#define RL_WIRE_H

#include "rl_err.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define RL_WIRE_VERSION 2
#define RL_WIRE_INLINE_MAX (64u * 1024u) // tensor data this large or larger: an extra frame
#define RL_WIRE_MAX_KEYS 256             // keys per message, besides v, op and id
#define RL_WIRE_MAX_KEY_LEN 255          // bytes of a key or an op (no NUL)
#define RL_WIRE_MAX_FRAMES 64            // extra frames per message
#define RL_WIRE_MAX_NDIM 4
#define RL_WIRE_MAX_STRS (1u << 20)      // items in a string list
#define RL_WIRE_MAX_BYTES (1ull << 34)   // any one string, bin or frame; a string also
                                         // fits msgpack's 32-bit lengths (< 4 GiB)

typedef enum {
    RL_DT_F32 = 0, // "f32"
    RL_DT_F64 = 1, // "f64"
    RL_DT_I32 = 2, // "i32"
    RL_DT_I64 = 3, // "i64"
    RL_DT_U8 = 4,  // "u8"
} rl_wire_dtype_t; // (not rl_dtype_t: core/rl_safetensors.h owns that name)

// "f32", ...; NULL for an unknown value. borrowed; valid until program exit.
const char *rl_wire_dtype_name(rl_wire_dtype_t dt);
// Bytes per element; 0 for an unknown value.
size_t rl_wire_dtype_size(rl_wire_dtype_t dt);

typedef struct rl_msg rl_msg_t;

// ---- building ------------------------------------------------------------------------------

// A new message {v, op, id}; op is 1..RL_WIRE_MAX_KEY_LEN bytes (aborts otherwise: a programmer
// error). caller owns result; free with rl_msg_free. NULL when out of memory.
rl_msg_t *rl_msg_new(const char *op, uint64_t id);
void rl_msg_free(rl_msg_t **msg_p);

// Setters copy key and value (a key set twice keeps the last value). Return 0 or RL_ENOMEM /
// RL_EINVAL (a reserved key v/op/id, a key of 0 or more than RL_WIRE_MAX_KEY_LEN bytes, too many
// keys, a string over 4 GiB - 1, ndim > RL_WIRE_MAX_NDIM, a negative dimension, more than
// RL_WIRE_MAX_BYTES of tensor data, more than RL_WIRE_MAX_FRAMES frame-sized tensors); the
// message keeps its previous content then, and rl_msg_errmsg says why.
int rl_msg_set_nil(rl_msg_t *m, const char *key);
int rl_msg_set_bool(rl_msg_t *m, const char *key, int v);
int rl_msg_set_int(rl_msg_t *m, const char *key, int64_t v);
int rl_msg_set_float(rl_msg_t *m, const char *key, double v);
int rl_msg_set_str(rl_msg_t *m, const char *key, const char *s);          // NUL-terminated
int rl_msg_set_strn(rl_msg_t *m, const char *key, const char *s, size_t len);
// n strings; lens may be NULL (NUL-terminated strings).
int rl_msg_set_strs(rl_msg_t *m, const char *key, const char *const *s, const size_t *lens,
                    int n);
// A tensor of prod(shape) elements (ndim 0..4; ndim 0 is one element). The data is copied (data
// may be NULL when there are no elements).
int rl_msg_set_tensor(rl_msg_t *m, const char *key, rl_wire_dtype_t dt, int ndim,
                      const int64_t *shape, const void *data);
// As rl_msg_set_tensor, but the message takes `data` (allocated with malloc) without copying
// and frees it with free() when the last frame holding it has been sent or the message freed
// (a large payload goes to ZeroMQ as a zero-copy frame). On failure data is freed too.
int rl_msg_set_tensor_gift(rl_msg_t *m, const char *key, rl_wire_dtype_t dt, int ndim,
                           const int64_t *shape, void *data);

// ---- reading -------------------------------------------------------------------------------

const char *rl_msg_op(const rl_msg_t *m);
uint64_t rl_msg_id(const rl_msg_t *m);
int rl_msg_has(const rl_msg_t *m, const char *key); // 1 or 0
// The keys besides v/op/id, in the order set (or received): i in 0..rl_msg_count(m).
// borrowed; valid until rl_msg_free.
int rl_msg_count(const rl_msg_t *m);
const char *rl_msg_key(const rl_msg_t *m, int i);

// Getters return 0, RL_ENOTFOUND (no such key) or RL_EPROTO (another type); the message of an
// RL_EPROTO names the key, the expected and the found type (rl_msg_errmsg).
int rl_msg_get_bool(const rl_msg_t *m, const char *key, int *v);
int rl_msg_get_int(const rl_msg_t *m, const char *key, int64_t *v);
int rl_msg_get_float(const rl_msg_t *m, const char *key, double *v); // ints convert
// borrowed; valid until rl_msg_free. *len may be NULL. The string may hold NULs; it is
// NUL-terminated after len.
int rl_msg_get_str(const rl_msg_t *m, const char *key, const char **s, size_t *len);
int rl_msg_get_strs(const rl_msg_t *m, const char *key, const char *const **s,
                    const size_t **lens, int *n);
// A tensor of dtype `dt` with `ndim` dimensions (RL_EPROTO otherwise); writes shape[0..ndim)
// and sets *data (borrowed; valid until rl_msg_free; aligned for the dtype).
int rl_msg_get_tensor(const rl_msg_t *m, const char *key, rl_wire_dtype_t dt, int ndim,
                      int64_t *shape, const void **data);
// Message of the last failed setter, getter or encode on m. borrowed; valid until the next call.
const char *rl_msg_errmsg(const rl_msg_t *m);

// ---- the bytes -------------------------------------------------------------------------------

typedef struct {
    const void *data;
    size_t len;
} rl_frame_t;

// Encodes m: *frames_p gets 1 + extra frames (frame 0 = the msgpack map), borrowed from m and
// valid until m is freed or encoded again (setting a key in between does not move them). Extra
// frames appear in the order their keys were set. Returns 0 or RL_ENOMEM.
int rl_msg_encode(rl_msg_t *m, const rl_frame_t **frames_p, int *n_frames_p);

// For a transport that hands an extra frame to another owner without copying it (a ZeroMQ
// zero-copy frame): takes a reference on the storage of frame i (1 <= i < n_frames of the last
// rl_msg_encode), which then outlives the message, and sets *release_p and *hint_p. The holder
// calls (*release_p)(frames[i].data, *hint_p) exactly once, from any thread (the signature of
// zmq_free_fn). Returns 0 or RL_EINVAL (no such frame).
int rl_msg_frame_hold(rl_msg_t *m, int i, void (**release_p)(void *data, void *hint),
                      void **hint_p);

// Decodes frames[0..n) into a new message that copies what it keeps (tensor data of extra
// frames is copied into aligned storage). Beyond the caps it rejects duplicate keys, non-string
// keys, maps other than tensor maps, bin outside a tensor, inline tensor data of
// RL_WIRE_INLINE_MAX bytes or more (a smaller tensor may come as a frame), and extra frames
// that no tensor references or that two reference. Returns 0, RL_EPROTO (malformed: err says
// where and what), RL_EVERSION (v differs from RL_WIRE_VERSION, wherever v sits in the map) or
// RL_ENOMEM; err gets the reason. caller owns *out; free with rl_msg_free.
int rl_msg_decode(const rl_frame_t *frames, int n, rl_msg_t **out, char *err, size_t err_len);

// For a transport that owns the received frames (rl_chan_recv): who may give an extra frame's
// memory away instead of having it copied.
typedef struct {
    void (*release)(void *data, void *hint); // NULL: frame i is copied
    void *hint;
    int kept; // out: 1 when the message took the frame
} rl_frame_owner_t;

// As rl_msg_decode, but a tensor in extra frame i whose owners[i].release is set and whose data is
// aligned for its dtype keeps the frame's memory instead of a copy (one copy less per large
// tensor, and no second buffer of its size). owners has n entries (owners[0] is not used). On
// success, owners[i].kept = 1 for each frame taken: the message calls
// owners[i].release(frames[i].data, owners[i].hint) exactly once when done with it, from
// rl_msg_free or from whichever thread drops the last reference to it (a zero-copy send of the
// message); the caller must not free it. On failure nothing is kept.
int rl_msg_decode_owned(const rl_frame_t *frames, rl_frame_owner_t *owners, int n,
                        rl_msg_t **out, char *err, size_t err_len);

#ifdef __cplusplus
}
#endif
#endif
