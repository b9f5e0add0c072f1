// fuzz_wire — libFuzzer target for the role protocol's decoder (rl_msg_decode). Any frames must
// give either a message or an error with a message; never a crash, a leak or a read outside the
// frames. A message that decodes must re-encode to frames that decode to the same bytes again
// (the encoder and the decoder agree on every value they accept). Every message that decodes also
// goes through every typed decoder of the protocol (rl_proto: each verb's request and reply,
// whose checks guard what a remote peer sends: attach, model_file, generate replies, ...).
//
// Input layout (frames as ZeroMQ would hand them over):
//   byte 0              k = 1 + byte % 8 frames; bit 7 set: decode with rl_msg_decode_owned,
//                       offering every extra frame (kept frames are freed by the message)
//   k-1 lengths         3 bytes little-endian each: the sizes of extra frames 1..k-1
//   the extra frames    in order, each cut short where the input ends
//   the rest            frame 0 (the msgpack map)
#include "rl_proto.h"
#include "rl_wire.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void s_free_hint(void *data, void *hint) {
    if (data < hint) { // data lies inside the buffer `hint`
        abort();
    }
    free(hint);
}

#define S_TRY(name, T)                                                                             \
    do {                                                                                           \
        T x;                                                                                       \
        char e[256];                                                                               \
        (void)rl_proto_##name##_decode(m, &x, e, sizeof e);                                        \
    } while (0)

// Every typed decoder on the message: each must accept or refuse it, never crash.
static void s_typed(const rl_msg_t *m) {
#define S_TRY_OF(name, verb, side, st, fields, own) S_TRY(name, rl_proto_##st##_t);
    RL_PROTO_MESSAGES(S_TRY_OF) // every message of the definition (transport/rl_proto_def.h)
#undef S_TRY_OF
    int ok;
    const char *why;
    (void)rl_proto_reply_status(m, &ok, &why);
    (void)rl_proto_session_is(m, "0123456789abcdef0123456789abcdef");
}

// Reads every value through its getter (and through the wrong ones), as a caller would.
static void s_touch(const rl_msg_t *m) {
    for (int i = 0; i < rl_msg_count(m); i++) {
        const char *k = rl_msg_key(m, i);
        int b;
        int64_t v;
        double f;
        const char *s;
        size_t len;
        const char *const *ss;
        const size_t *lens;
        int n;
        int64_t shape[RL_WIRE_MAX_NDIM];
        const void *p;
        if (!k || !rl_msg_has(m, k)) {
            abort();
        }
        rl_msg_get_bool(m, k, &b);
        rl_msg_get_int(m, k, &v);
        rl_msg_get_float(m, k, &f);
        if (rl_msg_get_str(m, k, &s, &len) == 0 && s[len] != '\0') {
            abort();
        }
        if (rl_msg_get_strs(m, k, &ss, &lens, &n) == 0) {
            for (int j = 0; j < n; j++) {
                if (ss[j][lens[j]] != '\0') {
                    abort();
                }
            }
        }
        for (int dt = RL_DT_F32; dt <= RL_DT_U8; dt++) {
            for (int nd = 0; nd <= RL_WIRE_MAX_NDIM; nd++) {
                if (rl_msg_get_tensor(m, k, (rl_wire_dtype_t)dt, nd, shape, &p) == 0) {
                    size_t bytes = rl_wire_dtype_size((rl_wire_dtype_t)dt);
                    for (int d = 0; d < nd; d++) {
                        bytes *= (size_t)shape[d];
                    }
                    if ((uintptr_t)p % rl_wire_dtype_size((rl_wire_dtype_t)dt) != 0) {
                        abort();
                    }
                    volatile uint8_t sink = 0;
                    for (size_t j = 0; j < bytes; j += 4096) { // every page of the data
                        sink ^= ((const uint8_t *)p)[j];
                    }
                    if (bytes) {
                        sink ^= ((const uint8_t *)p)[bytes - 1];
                    }
                    (void)sink;
                }
            }
        }
    }
}

// Re-encodes m; the bytes decode again and re-encode to the same bytes.
static void s_reencode(rl_msg_t *m) {
    const rl_frame_t *f1, *f2;
    int n1, n2;
    if (rl_msg_encode(m, &f1, &n1) != 0) {
        return; // out of memory only
    }
    rl_msg_t *m2 = NULL;
    char err[512];
    if (rl_msg_decode(f1, n1, &m2, err, sizeof err) != 0) {
        abort(); // we wrote something we do not read
    }
    if (rl_msg_encode(m2, &f2, &n2) != 0) {
        rl_msg_free(&m2);
        return;
    }
    if (n1 != n2 || strcmp(rl_msg_op(m), rl_msg_op(m2)) != 0 || rl_msg_id(m) != rl_msg_id(m2)) {
        abort();
    }
    for (int i = 0; i < n1; i++) {
        if (f1[i].len != f2[i].len || (f1[i].len && memcmp(f1[i].data, f2[i].data, f1[i].len))) {
            abort();
        }
    }
    rl_msg_free(&m2);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) {
        return 0;
    }
    int k = 1 + data[0] % 8;
    size_t off = 1;
    size_t lens[8] = {0};
    for (int i = 1; i < k; i++) {
        if (off + 3 <= size) {
            lens[i] = (size_t)data[off] | (size_t)data[off + 1] << 8 | (size_t)data[off + 2] << 16;
        }
        off = off + 3 <= size ? off + 3 : size;
    }
    // each frame in its own exact-size allocation, so ASan sees any read past its end
    rl_frame_t frames[8];
    uint8_t *bufs[8] = {0};
    for (int i = 1; i < k; i++) {
        size_t n = lens[i] < size - off ? lens[i] : size - off;
        bufs[i] = malloc(n ? n : 1);
        if (!bufs[i]) {
            goto done;
        }
        memcpy(bufs[i], data + off, n);
        frames[i].data = bufs[i];
        frames[i].len = n;
        off += n;
    }
    bufs[0] = malloc(size - off ? size - off : 1);
    if (!bufs[0]) {
        goto done;
    }
    memcpy(bufs[0], data + off, size - off);
    frames[0].data = bufs[0];
    frames[0].len = size - off;

    rl_msg_t *m = NULL;
    char err[512];
    err[0] = '\0';
    rl_frame_owner_t owners[8];
    int owned = (data[0] & 0x80) != 0;
    for (int i = 0; i < k; i++) {
        owners[i].release = i > 0 ? s_free_hint : NULL;
        owners[i].hint = bufs[i];
        owners[i].kept = 0;
    }
    int rc = owned ? rl_msg_decode_owned(frames, owners, k, &m, err, sizeof err)
                   : rl_msg_decode(frames, k, &m, err, sizeof err);
    for (int i = 1; owned && i < k; i++) {
        if (owners[i].kept) {
            if (rc != 0) {
                abort(); // a failed decode keeps nothing
            }
            bufs[i] = NULL; // the message's now: freed by rl_msg_free
        }
    }
    if (rc != 0) {
        if (m != NULL || err[0] == '\0' ||
            (rc != RL_EPROTO && rc != RL_EVERSION && rc != RL_ENOMEM)) {
            abort(); // a failure comes with a message, a known code and no message object
        }
    } else {
        if (!m || rl_msg_op(m)[0] == '\0') {
            abort();
        }
        s_touch(m);
        s_typed(m);
        s_reencode(m);
        rl_msg_free(&m);
    }
done:
    for (int i = 0; i < k; i++) {
        free(bufs[i]);
    }
    return 0;
}
