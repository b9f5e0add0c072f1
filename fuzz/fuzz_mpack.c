// fuzz_mpack — libFuzzer target for the bounded msgpack reader itself (rl_mpack), under the
// role protocol's decoder (fuzz_wire) and the trajectory records' (fuzz_traj). Those two drive it
// the way their formats do; this one checks the reader's own promises on any bytes, item after
// item until the input ends or fails:
//   - rl_mpack_skip with no limit ends where a walk with rl_mpack_read ends (or fails on the same
//     item, with the same kind), and with a limit it agrees with the walk's deepest level;
//   - a failure leaves the cursor where it was;
//   - each typed read succeeds exactly when rl_mpack_read's item is of its kind, value and cap,
//     and returns the same value or span;
//   - every str/bin/ext body lies inside the input.
//
// Input layout:
//   byte 0      bit 0: RL_MPACK_NO_EXT; bits 1-7: the depth limit given to rl_mpack_skip
//               (value % (RL_MPACK_MAX_DEPTH + 1); 0 = none)
//   the rest    msgpack items, one after another
#include "rl_err.h"
#include "rl_mpack.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

// Walks one item with rl_mpack_read, tracking nesting with an explicit count per level (levels
// is a scratch array of at least len + 1 entries). Returns 0 with *end and *deepest set, or the
// failing read's code with *fail = a copy of the cursor's error.
static int s_walk(rl_mpack_t r, uint64_t *levels, size_t *end, int *deepest, rl_mpack_err_t *fail) {
    int depth = 1; // levels[depth - 1]: items still to read at level depth
    levels[0] = 1;
    *deepest = 0;
    while (depth > 0) {
        if (levels[depth - 1] == 0) {
            depth--;
            continue;
        }
        rl_mpack_item_t it;
        if (rl_mpack_read(&r, &it) != 0) {
            *fail = r.err;
            return RL_EPROTO;
        }
        *deepest = depth > *deepest ? depth : *deepest;
        if (it.s && (it.s < r.p || it.s + it.n > r.p + r.len)) {
            abort(); // a body outside the input
        }
        levels[depth - 1]--;
        uint64_t k = it.type == RL_MPACK_ARRAY ? it.n : it.type == RL_MPACK_MAP ? 2 * it.n : 0;
        if (k) {
            levels[depth++] = k; // each pending item is backed by a byte: depth <= len
        }
    }
    *end = r.off;
    return 0;
}

// Each typed read on the item under r agrees with rl_mpack_read's view of it.
static void s_typed(const rl_mpack_t *r0) {
    rl_mpack_t r = *r0, t;
    rl_mpack_item_t it;
    int ok = rl_mpack_read(&r, &it) == 0;
    size_t after = r.off;
#define SAME_FAIL(rc) ((rc) == 0 ? t.off == after : t.off == r0->off)
    uint64_t u = 0;
    int64_t i = 0;
    double f = 0;
    int b = 0;
    const uint8_t *s = NULL;
    size_t n = 0;
    int is_int = ok && (it.type == RL_MPACK_UINT || it.type == RL_MPACK_INT);
    int neg = is_int && it.type == RL_MPACK_INT && it.i < 0;

    t = *r0;
    int rc = rl_mpack_read_uint(&t, 1000, &u);
    if ((rc == 0) !=
            (is_int && !neg && (it.type == RL_MPACK_UINT ? it.u : (uint64_t)it.i) <= 1000) ||
        !SAME_FAIL(rc) || (rc == 0 && u != (it.type == RL_MPACK_UINT ? it.u : (uint64_t)it.i))) {
        abort();
    }
    t = *r0;
    rc = rl_mpack_read_int(&t, INT64_MIN, INT64_MAX, &i);
    if ((rc == 0) != (is_int && (it.type == RL_MPACK_INT || it.u <= (uint64_t)INT64_MAX)) ||
        !SAME_FAIL(rc)) {
        abort();
    }
    t = *r0;
    rc = rl_mpack_read_number(&t, &f);
    if ((rc == 0) != (is_int || (ok && it.type == RL_MPACK_FLOAT)) || !SAME_FAIL(rc)) {
        abort();
    }
    t = *r0;
    rc = rl_mpack_read_bool(&t, &b);
    if ((rc == 0) != (ok && it.type == RL_MPACK_BOOL) || !SAME_FAIL(rc) || (rc == 0 && b > 1)) {
        abort();
    }
    t = *r0;
    rc = rl_mpack_read_nil(&t);
    if ((rc == 0) != (ok && it.type == RL_MPACK_NIL) || !SAME_FAIL(rc)) {
        abort();
    }
    t = *r0;
    rc = rl_mpack_read_str(&t, 8, &s, &n);
    if ((rc == 0) != (ok && it.type == RL_MPACK_STR && it.n <= 8) || !SAME_FAIL(rc) ||
        (rc == 0 && (s != it.s || n != it.n))) {
        abort();
    }
    t = *r0;
    rc = rl_mpack_read_bin(&t, UINT64_MAX, &s, &n);
    if ((rc == 0) != (ok && it.type == RL_MPACK_BIN) || !SAME_FAIL(rc)) {
        abort();
    }
    t = *r0;
    rc = rl_mpack_read_array(&t, 3, &u);
    if ((rc == 0) != (ok && it.type == RL_MPACK_ARRAY && it.n <= 3) || !SAME_FAIL(rc)) {
        abort();
    }
    t = *r0;
    rc = rl_mpack_read_map(&t, UINT64_MAX, &u);
    if ((rc == 0) != (ok && it.type == RL_MPACK_MAP) || !SAME_FAIL(rc)) {
        abort();
    }
#undef SAME_FAIL
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) {
        return 0;
    }
    unsigned flags = data[0] & 1 ? RL_MPACK_NO_EXT : 0;
    int limit = (data[0] >> 1) % (RL_MPACK_MAX_DEPTH + 1);
    size_t n = size - 1;
    uint8_t *buf = malloc(n ? n : 1); // exactly n bytes: ASan flags a read past the end
    uint64_t *levels = malloc((n + 1) * sizeof *levels);
    if (!buf || !levels) {
        free(buf);
        free(levels);
        return 0;
    }
    memcpy(buf, data + 1, n);
    rl_mpack_t r;
    rl_mpack_init(&r, buf, n, flags);
    while (rl_mpack_left(&r) > 0) {
        s_typed(&r);
        size_t end = 0;
        int deepest = 0;
        rl_mpack_err_t fail;
        int walked = s_walk(r, levels, &end, &deepest, &fail);

        rl_mpack_t a = r;
        int rc = rl_mpack_skip(&a, 0);
        if (rc != walked || (rc == 0 && a.off != end) || (rc != 0 && a.off != r.off) ||
            (rc != 0 && (a.err.kind != fail.kind || a.err.at != fail.at))) {
            abort();
        }
        if (limit) {
            rl_mpack_t d = r;
            rc = rl_mpack_skip(&d, limit);
            if (walked == 0 && deepest <= limit) {
                if (rc != 0 || d.off != end) {
                    abort();
                }
            } else if (walked == 0) {
                if (rc == 0 || d.err.kind != RL_MPACK_EDEPTH || d.off != r.off) {
                    abort();
                }
            } else if (rc == 0 || d.off != r.off ||
                       (d.err.kind != RL_MPACK_EDEPTH && d.err.kind != fail.kind)) {
                abort();
            }
        }
        if (walked != 0) {
            break;
        }
        r = a;
    }
    free(levels);
    free(buf);
    return 0;
}
