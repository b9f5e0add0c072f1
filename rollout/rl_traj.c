// rl_traj — the trajectory store: one LMDB environment per run, records as plain msgpack maps
// (docs/trajectories.md is the format's manual). Records are written with msgpack-c's packer
// and read back with core's bounded reader (rl_mpack): bytes from disk are untrusted, and
// msgpack-c's object unpacker allocates an array's declared size before the bytes to back it
// exist.
// It is not a query engine: reads are whole steps in key order.
#include "rl_traj.h"

#include "rl_err.h"
#include "rl_fault.h"
#include "rl_lmdb.h"
#include "rl_mpack.h"

#include <errno.h>
#include <lmdb.h>
#include <msgpack.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#define S_KEY_LEN 16
#define S_MAP_MAX ((size_t)1 << 40) // the map doubles up to 1 TiB, then a step fails
#define S_MAX_FIELDS 256            // entries of a record map, unknown keys included
#define S_MAX_DEPTH 16              // nesting of an unknown value that is skipped
#define S_FULL_BELOW ((uint64_t)16 << 20) // EIO with less free than this: a full disk (below)

struct rl_traj {
    MDB_env *env;
    MDB_dbi traj, meta, eval; // eval: the evaluations' completions (rl_traj_use_eval)
    int has_eval;             // the store has the eval table (older ones do not)
    int use_eval;             // the record calls read and write the eval table
    unsigned flags;
    char *path;           // the environment's folder, for messages
    msgpack_sbuffer sbuf; // encode scratch, reused by every put
};

// ---- keys -----------------------------------------------------------------------------------

// 16 bytes big-endian (u64 step, u32 prompt_index, u32 sample_index): memcmp order, which is
// LMDB's default key order, is training order.
static void s_key(uint8_t k[S_KEY_LEN], uint64_t step, uint32_t p, uint32_t s) {
    for (int i = 0; i < 8; i++) {
        k[i] = (uint8_t)(step >> (56 - 8 * i));
    }
    for (int i = 0; i < 4; i++) {
        k[8 + i] = (uint8_t)(p >> (24 - 8 * i));
        k[12 + i] = (uint8_t)(s >> (24 - 8 * i));
    }
}

static uint64_t s_be(const uint8_t *p, int n) {
    uint64_t x = 0;
    for (int i = 0; i < n; i++) {
        x = x << 8 | p[i];
    }
    return x;
}

// "step S, prompt P, sample I", or the key's bytes in hex when it is not 16 bytes long.
static void s_key_name(const MDB_val *k, char *out, size_t cap) {
    const uint8_t *b = k->mv_data;
    if (k->mv_size == S_KEY_LEN) {
        snprintf(out, cap, "step %llu, prompt %u, sample %u", (unsigned long long)s_be(b, 8),
                 (unsigned)s_be(b + 8, 4), (unsigned)s_be(b + 12, 4));
        return;
    }
    size_t o = (size_t)snprintf(out, cap, "key of %zu bytes 0x", k->mv_size);
    for (size_t i = 0; i < k->mv_size && i < 32 && o + 3 < cap; i++) {
        o += (size_t)snprintf(out + o, cap - o, "%02x", b[i]);
    }
}

// ---- errors ---------------------------------------------------------------------------------

static int s_mdb_err(char *err, size_t err_len, int rc, const char *what) {
    return rl_errf(err, err_len, rl_lmdb_code(rc), "%s: %s", what, mdb_strerror(rc));
}

// "1.5 MiB": a byte count for a message.
static void s_bytes(uint64_t n, char *out, size_t cap) {
    static const char *const unit[] = {"bytes", "KiB", "MiB", "GiB", "TiB"};
    double x = (double)n;
    int u = 0;
    while (x >= 1024.0 && u < 4) {
        x /= 1024.0;
        u++;
    }
    snprintf(out, cap, u ? "%.1f %s" : "%.0f %s", x, unit[u]);
}

// A failed write transaction (an LMDB code or an errno from its writes), named by the store's
// data file. A full disk says so: ENOSPC or EDQUOT, or EIO with under S_FULL_BELOW left on the
// filesystem, which is what LMDB returns when the disk fills during a write (a write of fewer
// bytes than asked: liblmdb's "short write, filesystem full?"). Returns ENOSPC for a full disk,
// else the code as RL_E* or errno.
static int s_write_err(const rl_traj_t *self, int rc, const char *what, char *err,
                       size_t err_len) {
    const char *path = self->path ? self->path : "trajectory store";
    struct statvfs vfs;
    int full = rc == ENOSPC || rc == EDQUOT;
    if ((full || rc == EIO) && statvfs(path, &vfs) == 0) {
        // root may also use the blocks reserved for it
        uint64_t blocks = geteuid() == 0 ? (uint64_t)vfs.f_bfree : (uint64_t)vfs.f_bavail;
        uint64_t left = blocks * (uint64_t)vfs.f_frsize;
        full = full || left < S_FULL_BELOW;
        if (full) {
            char b[32];
            s_bytes(left, b, sizeof b);
            return rl_errf(err, err_len, ENOSPC, "%s/data.mdb: %s: disk full (%s; %s left on "
                           "its filesystem)", path, what, rc == EIO ? "a write stopped short" :
                           strerror(rc), b);
        }
    }
    if (full) {
        return rl_errf(err, err_len, ENOSPC, "%s/data.mdb: %s: disk full (%s)", path, what,
                       strerror(rc));
    }
    return rl_errf(err, err_len, rl_lmdb_code(rc), "%s/data.mdb: %s: %s", path, what,
                   mdb_strerror(rc));
}

// ---- msgpack writing ------------------------------------------------------------------------

static int s_pack_key(msgpack_packer *pk, const char *key) {
    size_t n = strlen(key);
    return msgpack_pack_str(pk, n) | msgpack_pack_str_body(pk, key, n);
}

// n 4-byte values (int32 or float32) as one bin of little-endian bytes, or nil when v is NULL.
static int s_pack_bin32(msgpack_packer *pk, const void *v, int n) {
    if (!v) {
        return msgpack_pack_nil(pk);
    }
    size_t len = (size_t)n * 4;
    int rc = msgpack_pack_bin(pk, len);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    rc |= len ? msgpack_pack_bin_body(pk, v, len) : 0;
#else
    const uint8_t *src = v;
    uint8_t tmp[1024];
    for (size_t off = 0; off < len; off += sizeof tmp) {
        size_t m = len - off < sizeof tmp ? len - off : sizeof tmp;
        for (size_t i = 0; i < m; i += 4) {
            uint32_t x;
            memcpy(&x, src + off + i, 4);
            tmp[i] = (uint8_t)x;
            tmp[i + 1] = (uint8_t)(x >> 8);
            tmp[i + 2] = (uint8_t)(x >> 16);
            tmp[i + 3] = (uint8_t)(x >> 24);
        }
        rc |= msgpack_pack_bin_body(pk, tmp, m);
    }
#endif
    return rc;
}

// The checks rl_traj_decode makes, so that whatever is stored decodes.
static int s_check_record(const rl_traj_record_t *r, char *err, size_t err_len) {
    int nc = r->n_completion;
    if (r->n_prompt < 0 || r->n_prompt > RL_TRAJ_MAX_TOKENS || nc < 0 ||
        nc > RL_TRAJ_MAX_TOKENS) {
        return rl_errf(err, err_len, RL_EINVAL, "n_prompt %d / n_completion %d outside 0..%d",
                       r->n_prompt, nc, RL_TRAJ_MAX_TOKENS);
    }
    if ((r->n_prompt && !r->prompt_ids) ||
        (nc && (!r->completion_ids || !r->mask || !r->sampler_logprobs))) {
        return rl_errf(err, err_len, RL_EINVAL, "NULL ids, mask or sampler_logprobs");
    }
    for (int i = 0; i < r->n_prompt; i++) {
        if (r->prompt_ids[i] < 0) {
            return rl_errf(err, err_len, RL_EINVAL, "prompt_ids[%d] = %d is negative", i,
                           (int)r->prompt_ids[i]);
        }
    }
    for (int i = 0; i < nc; i++) {
        if (r->completion_ids[i] < 0) {
            return rl_errf(err, err_len, RL_EINVAL, "completion_ids[%d] = %d is negative", i,
                           (int)r->completion_ids[i]);
        }
        if (r->mask[i] > 1) {
            return rl_errf(err, err_len, RL_EINVAL, "mask[%d] = %d (0 or 1)", i, r->mask[i]);
        }
    }
    if (r->finish != 0 && r->finish != 1) {
        return rl_errf(err, err_len, RL_EINVAL, "finish %d (0 stop, 1 length)", r->finish);
    }
    if (r->n_rewards < 0 || r->n_rewards > RL_TRAJ_MAX_REWARDS ||
        (r->n_rewards && (!r->reward_names || !r->rewards))) {
        return rl_errf(err, err_len, RL_EINVAL, "n_rewards %d outside 0..%d or NULL arrays",
                       r->n_rewards, RL_TRAJ_MAX_REWARDS);
    }
    for (int i = 0; i < r->n_rewards; i++) {
        const char *a = r->reward_names[i];
        size_t n = a ? strlen(a) : 0;
        if (n == 0 || n > RL_TRAJ_MAX_NAME) {
            return rl_errf(err, err_len, RL_EINVAL, "reward name %d: empty or longer than %d "
                           "bytes", i, RL_TRAJ_MAX_NAME);
        }
        for (int j = 0; j < i; j++) {
            if (strcmp(a, r->reward_names[j]) == 0) {
                return rl_errf(err, err_len, RL_EINVAL, "reward '%s' given twice", a);
            }
        }
    }
    if (r->sampler && (!r->sampler[0] || strlen(r->sampler) > RL_TRAJ_MAX_NAME)) {
        return rl_errf(err, err_len, RL_EINVAL, "sampler name empty or longer than %d bytes",
                       RL_TRAJ_MAX_NAME);
    }
    const rl_traj_episode_t *e = r->episode;
    if (e) {
        if (e->n_turns < 1 || e->n_turns > nc || !e->turn_starts || !e->turn_rewards ||
            e->turn_starts[0] != 0 || (e->truncated != 0 && e->truncated != 1) ||
            e->tool_calls < 0 || e->parse_errors < 0 ||
            (e->conversation && strlen(e->conversation) > RL_TRAJ_MAX_CONVERSATION)) {
            return rl_errf(err, err_len, RL_EINVAL,
                           "episode: %d turns for %d tokens, turns from 0, end 0 or 1, counts "
                           ">= 0, a conversation of at most %d bytes",
                           e->n_turns, nc, RL_TRAJ_MAX_CONVERSATION);
        }
        for (int t = 1; t < e->n_turns; t++) {
            if (e->turn_starts[t] <= e->turn_starts[t - 1] || e->turn_starts[t] >= nc) {
                return rl_errf(err, err_len, RL_EINVAL, "episode: turn %d starts at %d", t,
                               (int)e->turn_starts[t]);
            }
        }
    }
    return 0;
}

// Appends the record's map to sbuf. The key order is fixed (v first, so a reader meets the
// version before anything else) but readers must not depend on it.
static int s_encode(const rl_traj_record_t *r, msgpack_sbuffer *sbuf, char *err,
                    size_t err_len) {
    int rc = s_check_record(r, err, err_len);
    if (rc) {
        return rc;
    }
    msgpack_packer pk;
    msgpack_packer_init(&pk, sbuf, msgpack_sbuffer_write);
    int nc = r->n_completion;
    int w = msgpack_pack_map(&pk, 18 + (r->token_rewards != NULL) + (r->sampler != NULL) +
                                      (r->episode != NULL));
    w |= s_pack_key(&pk, "v") | msgpack_pack_uint32(&pk, RL_TRAJ_SCHEMA_VERSION);
    w |= s_pack_key(&pk, "step") | msgpack_pack_uint64(&pk, r->step);
    w |= s_pack_key(&pk, "prompt_index") | msgpack_pack_uint32(&pk, r->prompt_index);
    w |= s_pack_key(&pk, "sample_index") | msgpack_pack_uint32(&pk, r->sample_index);
    w |= s_pack_key(&pk, "data_index") | msgpack_pack_int64(&pk, r->data_index);
    w |= s_pack_key(&pk, "policy_version") | msgpack_pack_uint64(&pk, r->policy_version);
    // a zero-length array is a valid empty bin even when its pointer is NULL
    static const int32_t none[1] = {0};
    w |= s_pack_key(&pk, "prompt_ids") |
         s_pack_bin32(&pk, r->n_prompt ? (const void *)r->prompt_ids : none, r->n_prompt);
    w |= s_pack_key(&pk, "completion_ids") |
         s_pack_bin32(&pk, nc ? (const void *)r->completion_ids : none, nc);
    w |= s_pack_key(&pk, "mask") | msgpack_pack_bin(&pk, (size_t)nc);
    w |= nc ? msgpack_pack_bin_body(&pk, r->mask, (size_t)nc) : 0;
    w |= s_pack_key(&pk, "sampler_logprobs") |
         s_pack_bin32(&pk, nc ? (const void *)r->sampler_logprobs : none, nc);
    w |= s_pack_key(&pk, "old_logprobs") | s_pack_bin32(&pk, r->old_logprobs, nc);
    w |= s_pack_key(&pk, "ref_logprobs") | s_pack_bin32(&pk, r->ref_logprobs, nc);
    w |= s_pack_key(&pk, "values") | s_pack_bin32(&pk, r->values, nc);
    w |= s_pack_key(&pk, "advantages") | s_pack_bin32(&pk, r->advantages, nc);
    w |= s_pack_key(&pk, "rewards") | msgpack_pack_map(&pk, (size_t)r->n_rewards);
    for (int i = 0; i < r->n_rewards; i++) {
        w |= s_pack_key(&pk, r->reward_names[i]) | msgpack_pack_double(&pk, r->rewards[i]);
    }
    w |= s_pack_key(&pk, "reward") | msgpack_pack_double(&pk, r->reward);
    w |= s_pack_key(&pk, "advantage") | msgpack_pack_double(&pk, r->advantage);
    w |= s_pack_key(&pk, "finish") | s_pack_key(&pk, r->finish ? "length" : "stop");
    if (r->token_rewards) { // optional: absent when there are none (GRPO's records unchanged)
        w |= s_pack_key(&pk, "token_rewards") | s_pack_bin32(&pk, r->token_rewards, nc);
    }
    if (r->sampler) { // optional: absent in stores written before it existed
        w |= s_pack_key(&pk, "sampler") | s_pack_key(&pk, r->sampler);
    }
    const rl_traj_episode_t *e = r->episode;
    if (e) { // optional: a multi-turn episode
        w |= s_pack_key(&pk, "episode") | msgpack_pack_map(&pk, 5 + (e->conversation != NULL));
        w |= s_pack_key(&pk, "turns") | msgpack_pack_array(&pk, (size_t)e->n_turns);
        for (int t = 0; t < e->n_turns; t++) {
            w |= msgpack_pack_uint32(&pk, (uint32_t)e->turn_starts[t]);
        }
        w |= s_pack_key(&pk, "turn_rewards") | msgpack_pack_array(&pk, (size_t)e->n_turns);
        for (int t = 0; t < e->n_turns; t++) {
            w |= msgpack_pack_double(&pk, e->turn_rewards[t]);
        }
        w |= s_pack_key(&pk, "end") | s_pack_key(&pk, e->truncated ? "truncated" : "done");
        w |= s_pack_key(&pk, "tool_calls") | msgpack_pack_uint32(&pk, (uint32_t)e->tool_calls);
        w |= s_pack_key(&pk, "parse_errors") | msgpack_pack_uint32(&pk, (uint32_t)e->parse_errors);
        if (e->conversation) {
            w |= s_pack_key(&pk, "conversation") | s_pack_key(&pk, e->conversation);
        }
    }
    return w ? rl_errf(err, err_len, RL_ENOMEM, "out of memory encoding a record") : 0;
}

int rl_traj_encode(const rl_traj_record_t *rec, void **buf_p, size_t *len_p) {
    *buf_p = NULL;
    *len_p = 0;
    msgpack_sbuffer sbuf;
    msgpack_sbuffer_init(&sbuf);
    int rc = s_encode(rec, &sbuf, NULL, 0);
    if (rc) {
        msgpack_sbuffer_destroy(&sbuf);
        return rc;
    }
    *len_p = sbuf.size;
    *buf_p = msgpack_sbuffer_release(&sbuf);
    return 0;
}

// ---- msgpack reading ------------------------------------------------------------------------

// Values are read with core's bounded reader (rl_mpack, shared with the role protocol). The
// helpers below only word its failures the way this decoder always has: a static description
// ("truncated", "expected an int", ...) that the caller prefixes with the field's name, the
// cursor left on a value of the wrong type so that the message can name what was found.
static const char s_truncated[] = "truncated";

static int s_is_trunc(const rl_mpack_t *r) {
    return r->err.kind == RL_MPACK_EEND || r->err.kind == RL_MPACK_EHEAD ||
           r->err.kind == RL_MPACK_EBODY;
}

// The type of the value under the cursor, for "found ..." (ints of either family are "int").
static const char *s_type_name(const rl_mpack_t *at) {
    rl_mpack_t r = *at;
    rl_mpack_type_t t;
    if (rl_mpack_peek(&r, &t) != 0) {
        return "the unused byte 0xc1"; // the only byte that has no type (the cursor has one)
    }
    return t == RL_MPACK_UINT ? "int" : rl_mpack_type_name(t);
}

// Each reader fails with "truncated" or with what it expected; none moves the cursor then.
static const char *s_rd_uint(rl_mpack_t *r, uint64_t max, uint64_t *out) {
    if (rl_mpack_read_uint(r, max, out) == 0) {
        return NULL;
    }
    return s_is_trunc(r)                    ? s_truncated
           : r->err.kind == RL_MPACK_ERANGE ? "integer out of range"
                                            : "expected an int";
}

static const char *s_rd_i64(rl_mpack_t *r, int64_t *out) {
    if (rl_mpack_read_int(r, INT64_MIN, INT64_MAX, out) == 0) {
        return NULL;
    }
    return s_is_trunc(r)                    ? s_truncated
           : r->err.kind == RL_MPACK_ERANGE ? "integer out of range"
                                            : "expected an int";
}

// float64, float32 or an int, as a double. (An int whose value field is cut short is reported
// as "expected a number", a float's as "truncated": this decoder always has.)
static const char *s_rd_num(rl_mpack_t *r, double *out) {
    if (rl_mpack_read_number(r, out) == 0) {
        return NULL;
    }
    if (r->err.kind == RL_MPACK_EEND ||
        (r->err.kind == RL_MPACK_EHEAD && r->err.type == RL_MPACK_FLOAT)) {
        return s_truncated;
    }
    return "expected a number";
}

// str or bin (want 's' or 'b'): a pointer into the input and a length checked against it.
static const char *s_rd_bytes(rl_mpack_t *r, char want, const uint8_t **ptr, size_t *len) {
    int rc = want == 's' ? rl_mpack_read_str(r, UINT64_MAX, ptr, len)
                         : rl_mpack_read_bin(r, UINT64_MAX, ptr, len);
    if (rc == 0) {
        return NULL;
    }
    return s_is_trunc(r) ? s_truncated : want == 's' ? "expected a str" : "expected a bin";
}

static const char *s_rd_map(rl_mpack_t *r, uint64_t *n) {
    if (rl_mpack_read_map(r, UINT64_MAX, n) == 0) {
        return NULL;
    }
    return s_is_trunc(r) ? s_truncated : "expected a map";
}

// Skips one value of any type, nested at most `depth` levels.
static const char *s_skip(rl_mpack_t *r, int depth) {
    if (rl_mpack_skip(r, depth) == 0) {
        return NULL;
    }
    return s_is_trunc(r)                    ? s_truncated
           : r->err.kind == RL_MPACK_EDEPTH ? "nested too deep"
                                            : "the unused byte 0xc1";
}

// ---- record decoding ------------------------------------------------------------------------

enum {
    F_V,
    F_STEP,
    F_PROMPT_INDEX,
    F_SAMPLE_INDEX,
    F_DATA_INDEX,
    F_POLICY_VERSION,
    F_PROMPT_IDS,
    F_COMPLETION_IDS,
    F_MASK,
    F_SAMPLER_LP,
    F_OLD_LP,
    F_REF_LP,
    F_VALUES,
    F_ADVANTAGES,
    F_REWARDS,
    F_REWARD,
    F_ADVANTAGE,
    F_FINISH,
    F_TOKEN_REWARDS,
    F_SAMPLER,
    F_EPISODE,
    F_COUNT
};
#define F_REQUIRED F_TOKEN_REWARDS // the fields before it must be present; the others may not

static const char *const s_fields[F_COUNT] = {
    "v",
    "step",
    "prompt_index",
    "sample_index",
    "data_index",
    "policy_version",
    "prompt_ids",
    "completion_ids",
    "mask",
    "sampler_logprobs",
    "old_logprobs",
    "ref_logprobs",
    "values",
    "advantages",
    "rewards",
    "reward",
    "advantage",
    "finish",
    "token_rewards",
    "sampler",
    "episode",
};

static int s_field_index(const uint8_t *k, size_t n) {
    for (int f = 0; f < F_COUNT; f++) {
        if (strlen(s_fields[f]) == n && memcmp(s_fields[f], k, n) == 0) {
            return f;
        }
    }
    return -1;
}

static uint32_t s_le32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

// A bin of n little-endian 4-byte values (n given by the caller) into a new array.
static void *s_copy32(const uint8_t *src, int n) {
    void *dst = malloc(n ? (size_t)n * 4 : 1);
    if (!dst) {
        return NULL;
    }
    uint32_t *d = dst;
    for (int i = 0; i < n; i++) {
        d[i] = s_le32(src + 4 * (size_t)i);
    }
    return dst;
}

// The rewards map: name -> number.
static const char *s_rd_rewards(rl_mpack_t *r, rl_traj_record_t *out, int *oom) {
    uint64_t n;
    const char *why = s_rd_map(r, &n);
    if (why) {
        return why;
    }
    if (n > RL_TRAJ_MAX_REWARDS) {
        return "more than RL_TRAJ_MAX_REWARDS (64) rewards";
    }
    out->reward_names = calloc(n ? n : 1, sizeof(char *));
    out->rewards = calloc(n ? n : 1, sizeof(double));
    if (!out->reward_names || !out->rewards) {
        *oom = 1;
        return "out of memory";
    }
    for (uint64_t i = 0; i < n; i++) {
        const uint8_t *k;
        size_t len;
        if ((why = s_rd_bytes(r, 's', &k, &len)) != NULL) {
            return why;
        }
        if (len == 0 || len > RL_TRAJ_MAX_NAME || memchr(k, 0, len)) {
            return "a reward name is empty, longer than 255 bytes or holds a NUL";
        }
        for (int j = 0; j < out->n_rewards; j++) {
            if (strlen(out->reward_names[j]) == len && !memcmp(out->reward_names[j], k, len)) {
                return "a reward name appears twice";
            }
        }
        char *name = malloc(len + 1);
        if (!name) {
            *oom = 1;
            return "out of memory";
        }
        memcpy(name, k, len);
        name[len] = '\0';
        out->reward_names[out->n_rewards++] = name;
        if ((why = s_rd_num(r, &out->rewards[i])) != NULL) {
            return why;
        }
    }
    return NULL;
}

typedef struct {
    const uint8_t *p;
    size_t len;
    int nil;
} s_span_t;

// Empties *out and describes the failure; `at` (may be NULL) is the cursor left on the value
// that had the wrong type, named after an "expected ..." message.
static int s_fail_at(rl_traj_record_t *out, char *err, size_t err_len, int code,
                     const char *field, const char *why, const rl_mpack_t *at) {
    rl_traj_record_clear(out);
    char found[48] = "";
    if (at && rl_mpack_left(at) > 0 && strncmp(why, "expected", 8) == 0) {
        snprintf(found, sizeof found, ", found %s", s_type_name(at));
    }
    if (field) {
        return rl_errf(err, err_len, code, "field '%s': %s%s", field, why, found);
    }
    return rl_errf(err, err_len, code, "%s%s", why, found);
}

static void s_episode_free(rl_traj_episode_t *e) {
    if (e) {
        free(e->turn_starts);
        free(e->turn_rewards);
        free(e->conversation);
        free(e);
    }
}

// The episode's map: turns and turn_rewards (arrays of one length), end, and optionally
// tool_calls, parse_errors, conversation; unknown keys skipped. Turn starts are checked against
// the completion's length by the caller.
static const char *s_rd_episode(rl_mpack_t *r, rl_traj_episode_t **out, int *oom) {
    uint64_t n;
    const char *why = s_rd_map(r, &n);
    if (why) {
        return why;
    }
    if (n > 16) {
        return "more than 16 entries in the episode's map";
    }
    rl_traj_episode_t *e = calloc(1, sizeof *e);
    if (!e) {
        *oom = 1;
        return "out of memory";
    }
    *out = e;
    int have = 0, nr = -1;
    for (uint64_t i = 0; i < n && !why; i++) {
        const uint8_t *k;
        size_t kl;
        if ((why = s_rd_bytes(r, 's', &k, &kl)) != NULL) {
            break;
        }
        uint64_t m = 0;
        if (kl == 5 && !memcmp(k, "turns", 5) && !(have & 1)) {
            have |= 1;
            if (rl_mpack_read_array(r, RL_TRAJ_MAX_TOKENS, &m) != 0) {
                why = s_is_trunc(r) ? s_truncated : "episode.turns: expected an array";
            } else if (m == 0) {
                why = "episode.turns: empty";
            } else if (!(e->turn_starts = malloc(m * sizeof *e->turn_starts))) {
                why = "out of memory";
                *oom = 1;
            }
            for (uint64_t t = 0; !why && t < m; t++) {
                uint64_t v;
                why = s_rd_uint(r, RL_TRAJ_MAX_TOKENS, &v);
                e->turn_starts[t] = (int32_t)v;
            }
            e->n_turns = (int)m;
        } else if (kl == 12 && !memcmp(k, "turn_rewards", 12) && !(have & 2)) {
            have |= 2;
            if (rl_mpack_read_array(r, RL_TRAJ_MAX_TOKENS, &m) != 0) {
                why = s_is_trunc(r) ? s_truncated : "episode.turn_rewards: expected an array";
            } else if (!(e->turn_rewards = malloc((m ? m : 1) * sizeof *e->turn_rewards))) {
                why = "out of memory";
                *oom = 1;
            }
            for (uint64_t t = 0; !why && t < m; t++) {
                why = s_rd_num(r, &e->turn_rewards[t]);
            }
            nr = (int)m;
        } else if (kl == 3 && !memcmp(k, "end", 3) && !(have & 4)) {
            have |= 4;
            const uint8_t *v;
            size_t vl;
            why = s_rd_bytes(r, 's', &v, &vl);
            if (!why && vl == 4 && !memcmp(v, "done", 4)) {
                e->truncated = 0;
            } else if (!why && vl == 9 && !memcmp(v, "truncated", 9)) {
                e->truncated = 1;
            } else if (!why) {
                why = "episode.end: expected \"done\" or \"truncated\"";
            }
        } else if (kl == 10 && !memcmp(k, "tool_calls", 10)) {
            why = s_rd_uint(r, INT32_MAX, &m);
            e->tool_calls = (int)m;
        } else if (kl == 12 && !memcmp(k, "parse_errors", 12)) {
            why = s_rd_uint(r, INT32_MAX, &m);
            e->parse_errors = (int)m;
        } else if (kl == 12 && !memcmp(k, "conversation", 12) && !e->conversation) {
            const uint8_t *v;
            size_t vl;
            why = s_rd_bytes(r, 's', &v, &vl);
            if (!why && (vl > RL_TRAJ_MAX_CONVERSATION || memchr(v, 0, vl))) {
                why = "episode.conversation: longer than 16 MiB, or a NUL inside";
            } else if (!why && !(e->conversation = malloc(vl + 1))) {
                why = "out of memory";
                *oom = 1;
            } else if (!why) {
                memcpy(e->conversation, v, vl);
                e->conversation[vl] = '\0';
            }
        } else {
            why = s_skip(r, S_MAX_DEPTH);
        }
    }
    if (!why && have != 7) {
        why = "episode: turns, turn_rewards and end are required";
    }
    if (!why && nr != e->n_turns) {
        why = "episode: turns and turn_rewards differ in length";
    }
    return why;
}

static int s_fail(rl_traj_record_t *out, char *err, size_t err_len, int code, const char *field,
                  const char *why) {
    return s_fail_at(out, err, err_len, code, field, why, NULL);
}

int rl_traj_decode(const void *buf, size_t len, rl_traj_record_t *out, char *err,
                   size_t err_len) {
    memset(out, 0, sizeof(*out));
    if (!buf && len) {
        return s_fail(out, err, err_len, RL_EPROTO, NULL, "no bytes");
    }
    rl_mpack_t r;
    rl_mpack_init(&r, buf, len, 0);
    uint64_t n_fields;
    const char *why = s_rd_map(&r, &n_fields);
    if (why) {
        return s_fail(out, err, err_len, RL_EPROTO, NULL,
                      why == s_truncated ? "truncated record" : "a record is a msgpack map");
    }
    if (n_fields > S_MAX_FIELDS) {
        return s_fail(out, err, err_len, RL_EPROTO, NULL, "more than 256 entries in the map");
    }
    const rl_mpack_t body = r;

    // Pass 1: the version, before anything is interpreted (a later version may change types).
    int have_v = 0;
    for (uint64_t i = 0; i < n_fields; i++) {
        const uint8_t *k;
        size_t kl;
        if ((why = s_rd_bytes(&r, 's', &k, &kl)) != NULL) {
            return s_fail(out, err, err_len, RL_EPROTO, NULL,
                          why == s_truncated ? "truncated record" : "a map key is not a str");
        }
        if (kl == 1 && k[0] == 'v') {
            uint64_t v;
            if (have_v) {
                return s_fail(out, err, err_len, RL_EPROTO, "v", "appears twice");
            }
            if ((why = s_rd_uint(&r, UINT32_MAX, &v)) != NULL) {
                return s_fail_at(out, err, err_len, RL_EPROTO, "v", why, &r);
            }
            if (v != RL_TRAJ_SCHEMA_VERSION) {
                rl_traj_record_clear(out);
                return rl_errf(err, err_len, RL_EVERSION, "field 'v': record version %llu, "
                               "this build reads version %d", (unsigned long long)v,
                               RL_TRAJ_SCHEMA_VERSION);
            }
            have_v = 1;
        } else if ((why = s_skip(&r, S_MAX_DEPTH)) != NULL) {
            char name[72];
            snprintf(name, sizeof name, "%.*s", (int)(kl < 64 ? kl : 64), (const char *)k);
            return s_fail(out, err, err_len, RL_EPROTO, name, why);
        }
    }
    if (rl_mpack_left(&r) != 0) {
        return s_fail(out, err, err_len, RL_EPROTO, NULL, "bytes after the record's map");
    }
    if (!have_v) {
        return s_fail(out, err, err_len, RL_EPROTO, "v", "missing");
    }

    // Pass 2: every known field; arrays are remembered as spans and copied once their lengths
    // agree with each other.
    r = body;
    unsigned seen = 0;
    s_span_t span[F_COUNT];
    memset(span, 0, sizeof span);
    for (uint64_t i = 0; i < n_fields; i++) {
        const uint8_t *k;
        size_t kl;
        s_rd_bytes(&r, 's', &k, &kl); // checked in pass 1
        int f = s_field_index(k, kl);
        if (f < 0) {
            s_skip(&r, S_MAX_DEPTH);
            continue;
        }
        const char *name = s_fields[f];
        if (seen & (1u << f)) {
            return s_fail(out, err, err_len, RL_EPROTO, name, "appears twice");
        }
        seen |= 1u << f;
        uint64_t u = 0;
        int oom = 0;
        switch (f) {
        case F_V: why = s_skip(&r, 1); break;
        case F_STEP: why = s_rd_uint(&r, UINT64_MAX, &out->step); break;
        case F_PROMPT_INDEX:
            why = s_rd_uint(&r, UINT32_MAX, &u);
            out->prompt_index = (uint32_t)u;
            break;
        case F_SAMPLE_INDEX:
            why = s_rd_uint(&r, UINT32_MAX, &u);
            out->sample_index = (uint32_t)u;
            break;
        case F_DATA_INDEX: why = s_rd_i64(&r, &out->data_index); break;
        case F_POLICY_VERSION: why = s_rd_uint(&r, UINT64_MAX, &out->policy_version); break;
        case F_OLD_LP:
        case F_REF_LP:
        case F_VALUES:
        case F_ADVANTAGES:
        case F_TOKEN_REWARDS:
            if (rl_mpack_read_nil(&r) == 0) { // nil: not stored
                span[f].nil = 1;
                why = NULL;
            } else {
                why = s_rd_bytes(&r, 'b', &span[f].p, &span[f].len);
                why = why && why != s_truncated ? "expected a bin or nil" : why;
            }
            break;
        case F_PROMPT_IDS:
        case F_COMPLETION_IDS:
        case F_MASK:
        case F_SAMPLER_LP: why = s_rd_bytes(&r, 'b', &span[f].p, &span[f].len); break;
        case F_REWARDS: why = s_rd_rewards(&r, out, &oom); break;
        case F_REWARD: why = s_rd_num(&r, &out->reward); break;
        case F_ADVANTAGE: why = s_rd_num(&r, &out->advantage); break;
        case F_SAMPLER: {
            const uint8_t *s;
            size_t sl;
            why = s_rd_bytes(&r, 's', &s, &sl);
            if (!why && (sl == 0 || sl > RL_TRAJ_MAX_NAME || memchr(s, 0, sl))) {
                why = "expected a name of 1 to 255 bytes";
            }
            if (!why && !(out->sampler = malloc(sl + 1))) {
                why = "out of memory";
                oom = 1;
            }
            if (!why) {
                memcpy(out->sampler, s, sl);
                out->sampler[sl] = '\0';
            }
            break;
        }
        case F_EPISODE: why = s_rd_episode(&r, &out->episode, &oom); break;
        case F_FINISH: {
            const uint8_t *s;
            size_t sl;
            why = s_rd_bytes(&r, 's', &s, &sl);
            if (!why && sl == 4 && !memcmp(s, "stop", 4)) {
                out->finish = 0;
            } else if (!why && sl == 6 && !memcmp(s, "length", 6)) {
                out->finish = 1;
            } else if (!why) {
                why = "expected \"stop\" or \"length\"";
            }
            break;
        }
        default: why = "unhandled field"; break;
        }
        if (why) {
            return s_fail_at(out, err, err_len, oom ? RL_ENOMEM : RL_EPROTO, name, why, &r);
        }
    }
    for (int f = 0; f < F_REQUIRED; f++) {
        if (!(seen & (1u << f))) {
            return s_fail(out, err, err_len, RL_EPROTO, s_fields[f], "missing");
        }
    }
    if (!(seen & (1u << F_TOKEN_REWARDS))) {
        span[F_TOKEN_REWARDS].nil = 1; // absent: none
    }

    // Lengths: ids and float arrays are 4 bytes a token, the mask 1; every per-token array has
    // the completion's length.
    if (span[F_PROMPT_IDS].len % 4 || span[F_PROMPT_IDS].len / 4 > RL_TRAJ_MAX_TOKENS) {
        return s_fail(out, err, err_len, RL_EPROTO, "prompt_ids",
                      "length is not a multiple of 4 or exceeds 2^20 tokens");
    }
    if (span[F_COMPLETION_IDS].len % 4 ||
        span[F_COMPLETION_IDS].len / 4 > RL_TRAJ_MAX_TOKENS) {
        return s_fail(out, err, err_len, RL_EPROTO, "completion_ids",
                      "length is not a multiple of 4 or exceeds 2^20 tokens");
    }
    int np = (int)(span[F_PROMPT_IDS].len / 4);
    int nc = (int)(span[F_COMPLETION_IDS].len / 4);
    if (span[F_MASK].len != (size_t)nc) {
        return s_fail(out, err, err_len, RL_EPROTO, "mask",
                      "length differs from completion_ids' token count");
    }
    for (int f = F_SAMPLER_LP; f < F_COUNT; f++) {
        if (f >= F_REWARDS && f != F_TOKEN_REWARDS) {
            continue;
        }
        if (!span[f].nil && span[f].len != (size_t)nc * 4) {
            return s_fail(out, err, err_len, RL_EPROTO, s_fields[f],
                          "length is not 4 x completion_ids' token count");
        }
    }
    for (int i = 0; i < nc; i++) {
        if (span[F_MASK].p[i] > 1) {
            return s_fail(out, err, err_len, RL_EPROTO, "mask", "a byte other than 0 or 1");
        }
    }
    out->n_prompt = np;
    out->n_completion = nc;
    out->prompt_ids = s_copy32(span[F_PROMPT_IDS].p, np);
    out->completion_ids = s_copy32(span[F_COMPLETION_IDS].p, nc);
    out->mask = malloc(nc ? (size_t)nc : 1);
    out->sampler_logprobs = s_copy32(span[F_SAMPLER_LP].p, nc);
    float **opt[4] = {&out->old_logprobs, &out->ref_logprobs, &out->values, &out->advantages};
    int oom = !out->prompt_ids || !out->completion_ids || !out->mask || !out->sampler_logprobs;
    for (int f = F_OLD_LP; f <= F_ADVANTAGES; f++) {
        if (!span[f].nil) {
            *opt[f - F_OLD_LP] = s_copy32(span[f].p, nc);
            oom |= *opt[f - F_OLD_LP] == NULL;
        }
    }
    if (!span[F_TOKEN_REWARDS].nil) {
        out->token_rewards = s_copy32(span[F_TOKEN_REWARDS].p, nc);
        oom |= out->token_rewards == NULL;
    }
    if (oom) {
        return s_fail(out, err, err_len, RL_ENOMEM, NULL, "out of memory");
    }
    if (nc) {
        memcpy(out->mask, span[F_MASK].p, (size_t)nc);
    }
    for (int i = 0; i < np; i++) {
        if (out->prompt_ids[i] < 0) {
            return s_fail(out, err, err_len, RL_EPROTO, "prompt_ids", "a negative id");
        }
    }
    for (int i = 0; i < nc; i++) {
        if (out->completion_ids[i] < 0) {
            return s_fail(out, err, err_len, RL_EPROTO, "completion_ids", "a negative id");
        }
    }
    const rl_traj_episode_t *e = out->episode;
    for (int t = 0; e && t < e->n_turns; t++) {
        int32_t at = e->turn_starts[t];
        if ((t == 0 && at != 0) || (t > 0 && at <= e->turn_starts[t - 1]) || at >= nc) {
            return s_fail(out, err, err_len, RL_EPROTO, "episode",
                          "turns do not start at 0 and increase within the completion");
        }
    }
    return 0;
}

void rl_traj_record_clear(rl_traj_record_t *rec) {
    if (!rec) {
        return;
    }
    free(rec->prompt_ids);
    free(rec->completion_ids);
    free(rec->mask);
    free(rec->sampler_logprobs);
    free(rec->old_logprobs);
    free(rec->ref_logprobs);
    free(rec->values);
    free(rec->advantages);
    free(rec->token_rewards);
    free(rec->sampler);
    s_episode_free(rec->episode);
    for (int i = 0; rec->reward_names && i < rec->n_rewards; i++) {
        free(rec->reward_names[i]);
    }
    free(rec->reward_names);
    free(rec->rewards);
    memset(rec, 0, sizeof(*rec));
}

void rl_traj_records_free(rl_traj_record_t **recs_p, int n) {
    if (!recs_p || !*recs_p) {
        return;
    }
    for (int i = 0; i < n; i++) {
        rl_traj_record_clear(&(*recs_p)[i]);
    }
    free(*recs_p);
    *recs_p = NULL;
}

// ---- environment ----------------------------------------------------------------------------

// Another process (the run, while `rlctl traj` reads) may have grown the map: adopt its size.
static int s_txn_begin(rl_traj_t *self, unsigned flags, MDB_txn **txn) {
    int rc = mdb_txn_begin(self->env, NULL, flags, txn);
    for (int tries = 0; rc == MDB_MAP_RESIZED && tries < 4; tries++) {
        rc = mdb_env_set_mapsize(self->env, 0);
        if (rc == 0) {
            rc = mdb_txn_begin(self->env, NULL, flags, txn);
        }
    }
    return rc;
}

// meta values are msgpack uints.
static int s_meta_get(rl_traj_t *self, MDB_txn *txn, const char *key, uint64_t *out, int *found) {
    MDB_val k = {strlen(key), (void *)key}, v;
    int rc = mdb_get(txn, self->meta, &k, &v);
    *found = rc == 0;
    if (rc == MDB_NOTFOUND) {
        return 0;
    }
    if (rc) {
        return rc;
    }
    rl_mpack_t r;
    rl_mpack_init(&r, v.mv_data, v.mv_size, 0);
    if (rl_mpack_read_uint(&r, UINT64_MAX, out) != 0 || rl_mpack_left(&r) != 0) {
        return RL_EPROTO;
    }
    return 0;
}

static int s_meta_put(rl_traj_t *self, MDB_txn *txn, const char *key, uint64_t value) {
    // a msgpack uint in its smallest form, written by hand (no allocation inside the txn)
    uint8_t b[9];
    size_t n;
    if (value <= 0x7f) {
        b[0] = (uint8_t)value;
        n = 1;
    } else {
        int w = value <= 0xff ? 1 : value <= 0xffff ? 2 : value <= 0xffffffffu ? 4 : 8;
        b[0] = (uint8_t)(w == 1 ? 0xcc : w == 2 ? 0xcd : w == 4 ? 0xce : 0xcf);
        for (int i = 0; i < w; i++) {
            b[1 + i] = (uint8_t)(value >> (8 * (w - 1 - i)));
        }
        n = 1 + (size_t)w;
    }
    MDB_val k = {strlen(key), (void *)key}, v = {n, b};
    return mdb_put(txn, self->meta, &k, &v, 0);
}

static int s_meta_del(rl_traj_t *self, MDB_txn *txn, const char *key) {
    MDB_val k = {strlen(key), (void *)key};
    int rc = mdb_del(txn, self->meta, &k, NULL);
    return rc == MDB_NOTFOUND ? 0 : rc;
}

typedef int (*s_write_fn)(rl_traj_t *self, MDB_txn *txn, const void *ctx, char *err,
                          size_t err_len);

// Runs fn in one write transaction; when the map is full the transaction is dropped, the map
// doubled, and fn runs again from the start. fn returns 0, an RL_E* code with err filled, or
// an LMDB code.
static int s_write(rl_traj_t *self, s_write_fn fn, const void *ctx, const char *what, char *err,
                   size_t err_len) {
    if (self->flags & RL_TRAJ_READONLY) {
        return rl_errf(err, err_len, RL_EINVAL, "%s: the store is open read-only", what);
    }
    // Frees the reader slots of processes that died reading (a `rlctl traj` killed, or stopped
    // by a damaged page, while the run writes): a slot left would keep every page freed after its
    // snapshot from being reused, and the file would grow. A scan of the lock file's table.
    int dead = 0;
    mdb_reader_check(self->env, &dead);
    for (;;) {
        MDB_txn *txn = NULL;
        int rc = s_txn_begin(self, 0, &txn);
        if (rc) {
            return s_write_err(self, rc, what, err, err_len);
        }
        rc = fn(self, txn, ctx, err, err_len);
        if (rc == 0 && rl_fault("traj_enospc")) { // tests: the disk fills as this commits
            mdb_txn_abort(txn);
            rc = ENOSPC;
        } else if (rc == 0) {
            rc = mdb_txn_commit(txn); // frees txn, also on failure
        } else {
            mdb_txn_abort(txn);
        }
        if (rc == MDB_MAP_FULL) {
            size_t cur = rl_traj_map_size(self);
            if (cur >= S_MAP_MAX || (rc = mdb_env_set_mapsize(self->env, cur * 2)) != 0) {
                return rl_errf(err, err_len, RL_EIO, "%s/data.mdb: %s: the map is full at %zu "
                               "bytes and cannot grow (%s)", self->path, what, cur,
                               mdb_strerror(rc ? rc : MDB_MAP_FULL));
            }
            continue;
        }
        if (rc > -1001 || rc < -1099) { // an LMDB code or errno, not yet described
            return rc ? s_write_err(self, rc, what, err, err_len) : 0;
        }
        return rc;
    }
}

static int s_init_fn(rl_traj_t *self, MDB_txn *txn, const void *ctx, char *err,
                     size_t err_len) {
    (void)ctx;
    (void)err;
    (void)err_len;
    int rc = mdb_dbi_open(txn, "traj", MDB_CREATE, &self->traj);
    if (!rc) {
        rc = mdb_dbi_open(txn, "meta", MDB_CREATE, &self->meta);
    }
    if (!rc) {
        rc = mdb_dbi_open(txn, "eval", MDB_CREATE, &self->eval);
        self->has_eval = rc == 0;
    }
    uint64_t v = 0;
    int found = 0;
    if (!rc) {
        rc = s_meta_get(self, txn, "schema_version", &v, &found);
    }
    if (!rc && !found) {
        MDB_stat st;
        rc = mdb_stat(txn, self->traj, &st);
        if (!rc && st.ms_entries) {
            return rl_errf(err, err_len, RL_EPROTO, "records but no meta schema_version");
        }
        if (!rc) {
            rc = s_meta_put(self, txn, "schema_version", RL_TRAJ_SCHEMA_VERSION);
        }
        v = RL_TRAJ_SCHEMA_VERSION;
    }
    if (rc == RL_EPROTO) {
        return rl_errf(err, err_len, RL_EPROTO, "meta schema_version is not a msgpack uint");
    }
    if (!rc && v != RL_TRAJ_SCHEMA_VERSION) {
        return rl_errf(err, err_len, RL_EVERSION, "schema version %llu, this build reads "
                       "version %d", (unsigned long long)v, RL_TRAJ_SCHEMA_VERSION);
    }
    return rc;
}

// Read-only: the databases must exist and carry our version.
static int s_init_ro(rl_traj_t *self, char *err, size_t err_len) {
    MDB_txn *txn;
    int rc = s_txn_begin(self, MDB_RDONLY, &txn);
    if (rc) {
        return s_mdb_err(err, err_len, rc, "begin");
    }
    rc = mdb_dbi_open(txn, "traj", 0, &self->traj);
    if (!rc) {
        rc = mdb_dbi_open(txn, "meta", 0, &self->meta);
    }
    if (!rc) { // a store written before the eval table existed has none: no evaluations
        self->has_eval = mdb_dbi_open(txn, "eval", 0, &self->eval) == 0;
    }
    if (rc == MDB_NOTFOUND || rc == MDB_INCOMPATIBLE) {
        mdb_txn_abort(txn);
        return rl_errf(err, err_len, RL_EPROTO, "not a trajectory store (no 'traj' and 'meta' "
                       "databases)");
    }
    uint64_t v = 0;
    int found = 0;
    if (!rc) {
        rc = s_meta_get(self, txn, "schema_version", &v, &found);
    }
    if (rc) {
        mdb_txn_abort(txn);
        return rc == RL_EPROTO ? rl_errf(err, err_len, rc, "meta schema_version is not a "
                                         "msgpack uint") : s_mdb_err(err, err_len, rc, "meta");
    }
    if (!found || v != RL_TRAJ_SCHEMA_VERSION) {
        mdb_txn_abort(txn);
        if (!found) {
            return rl_errf(err, err_len, RL_EPROTO, "meta has no schema_version");
        }
        return rl_errf(err, err_len, RL_EVERSION, "schema version %llu, this build reads "
                       "version %d", (unsigned long long)v, RL_TRAJ_SCHEMA_VERSION);
    }
    rc = mdb_txn_commit(txn); // keeps the dbi handles for the environment
    return rc ? s_mdb_err(err, err_len, rc, "commit") : 0;
}

int rl_traj_open_sized(const char *path, unsigned flags, size_t map_size, rl_traj_t **out,
                       char *err, size_t err_len) {
    *out = NULL;
    int ro = (flags & RL_TRAJ_READONLY) != 0;
    char msg[512] = "";
    char data[4096];
    struct stat st;
    if (snprintf(data, sizeof data, "%s/data.mdb", path) >= (int)sizeof data) {
        return rl_errf(err, err_len, RL_EINVAL, "%s: path too long", path);
    }
    int exists = stat(data, &st) == 0;
    if (ro && !exists) {
        if (stat(path, &st) != 0) {
            int e = errno;
            return rl_errf(err, err_len, e, "%s: %s", path, strerror(e));
        }
        return rl_errf(err, err_len, ENOENT, "%s: not a trajectory store (no data.mdb)", path);
    }
    if (!ro && mkdir(path, 0775) != 0 && errno != EEXIST) {
        int e = errno;
        return rl_errf(err, err_len, e, "%s: %s", path, strerror(e));
    }
    int rc;
    rl_traj_t *self = calloc(1, sizeof(*self));
    if (!self) {
        return rl_errf(err, err_len, RL_ENOMEM, "%s: out of memory", path);
    }
    self->flags = flags;
    msgpack_sbuffer_init(&self->sbuf);
    if (!(self->path = strdup(path))) {
        rc = rl_errf(err, err_len, RL_ENOMEM, "%s: out of memory", path);
        goto fail;
    }
    rc = mdb_env_create(&self->env);
    if (!rc) {
        rc = mdb_env_set_maxdbs(self->env, 3);
    }
    if (!rc && !ro && !exists) {
        rc = mdb_env_set_mapsize(self->env, map_size ? map_size : RL_TRAJ_MAP_INITIAL);
    }
    if (rc) {
        rc = rl_errf(err, err_len, rl_lmdb_code(rc), "%s: %s", path, mdb_strerror(rc));
        goto fail;
    }
    // Synced commits: a step is on disk when put_step returns, so a resumed run finds every
    // step it was told about (the cost, about a millisecond a step, is in docs/trajectories.md).
    // RL_TRAJ_NOSYNC is for a bulk copy that syncs once (rl_traj_salvage).
    rc = mdb_env_open(self->env, path,
                      ro ? MDB_RDONLY : (flags & RL_TRAJ_NOSYNC) ? MDB_NOSYNC : 0, 0664);
    if (rc) {
        rc = rl_errf(err, err_len, rl_lmdb_code(rc), "%s: %s", path, mdb_strerror(rc));
        goto fail;
    }
    rc = ro ? s_init_ro(self, msg, sizeof msg)
            : s_write(self, s_init_fn, NULL, "open", msg, sizeof msg);
    if (rc) {
        rl_errf(err, err_len, rc, "%s: %s", path, msg);
        goto fail;
    }
    *out = self;
    return 0;

fail:
    rl_traj_close(&self);
    return rc;
}

int rl_traj_open(const char *path, unsigned flags, rl_traj_t **out, char *err, size_t err_len) {
    return rl_traj_open_sized(path, flags, 0, out, err, err_len);
}

int rl_traj_sync(rl_traj_t *self, char *err, size_t err_len) {
    int rc = self->flags & RL_TRAJ_READONLY ? 0 : mdb_env_sync(self->env, 1);
    return rc ? s_write_err(self, rc, "sync", err, err_len) : 0;
}

void rl_traj_close(rl_traj_t **self_p) {
    if (!self_p || !*self_p) {
        return;
    }
    rl_traj_t *self = *self_p;
    if (self->env) {
        mdb_env_close(self->env);
    }
    msgpack_sbuffer_destroy(&self->sbuf);
    free(self->path);
    free(self);
    *self_p = NULL;
}

size_t rl_traj_map_size(const rl_traj_t *self) {
    MDB_envinfo info;
    if (mdb_env_info(self->env, &info) != 0) {
        return 0;
    }
    return info.me_mapsize;
}

// ---- writing --------------------------------------------------------------------------------

typedef struct {
    uint64_t step;
    const rl_traj_record_t *recs;
    int n;
    int pending; // rl_traj_put_pending: meta pending_step instead of last_step
} s_put_t;

// The table the record calls use: the steps' records, or the evaluations' (rl_traj_use_eval).
static MDB_dbi s_tab(const rl_traj_t *self) {
    return self->use_eval ? self->eval : self->traj;
}

void rl_traj_use_eval(rl_traj_t *self, int on) {
    self->use_eval = on != 0;
}

// Deletes every record of table dbi with key >= (from, 0, 0) and, when only_step, step == from.
static int s_delete_from(rl_traj_t *self, MDB_txn *txn, MDB_dbi dbi, uint64_t from, int only_step) {
    (void)self;
    MDB_cursor *c;
    int rc = mdb_cursor_open(txn, dbi, &c);
    if (rc) {
        return rc;
    }
    uint8_t kb[S_KEY_LEN];
    s_key(kb, from, 0, 0);
    for (;;) {
        // seek again after each delete: GET_CURRENT after deleting the last record of the
        // database gives EINVAL rather than MDB_NOTFOUND
        MDB_val k = {S_KEY_LEN, kb}, v;
        rc = mdb_cursor_get(c, &k, &v, MDB_SET_RANGE);
        if (rc != 0 || (only_step && (k.mv_size < 8 || s_be(k.mv_data, 8) != from))) {
            break;
        }
        rc = mdb_cursor_del(c, 0);
        if (rc != 0) {
            break;
        }
    }
    mdb_cursor_close(c);
    return rc == MDB_NOTFOUND ? 0 : rc;
}

static int s_put_fn(rl_traj_t *self, MDB_txn *txn, const void *ctx, char *err,
                    size_t err_len) {
    const s_put_t *put = ctx;
    int rc = s_delete_from(self, txn, s_tab(self), put->step, 1);
    if (rc) {
        return rc;
    }
    uint8_t kb[S_KEY_LEN];
    for (int i = 0; i < put->n; i++) {
        const rl_traj_record_t *rec = &put->recs[i];
        char why[256];
        if (rec->step != put->step) {
            return rl_errf(err, err_len, RL_EINVAL, "record %d has step %llu, not %llu", i,
                           (unsigned long long)rec->step, (unsigned long long)put->step);
        }
        msgpack_sbuffer_clear(&self->sbuf);
        rc = s_encode(rec, &self->sbuf, why, sizeof why);
        if (rc) {
            return rl_errf(err, err_len, rc, "record %d (prompt %u, sample %u): %s", i,
                           (unsigned)rec->prompt_index, (unsigned)rec->sample_index, why);
        }
        s_key(kb, put->step, rec->prompt_index, rec->sample_index);
        MDB_val k = {S_KEY_LEN, kb}, v = {self->sbuf.size, self->sbuf.data};
        rc = mdb_put(txn, s_tab(self), &k, &v, MDB_NOOVERWRITE);
        if (rc == MDB_KEYEXIST) {
            return rl_errf(err, err_len, RL_EINVAL, "record %d: (prompt %u, sample %u) appears "
                           "twice in the step", i, (unsigned)rec->prompt_index,
                           (unsigned)rec->sample_index);
        }
        if (rc) {
            return rc;
        }
    }
    if (self->use_eval) { // an evaluation's records: no step bookkeeping
        return 0;
    }
    if (put->pending) {
        return s_meta_put(self, txn, "pending_step", put->step);
    }
    uint64_t last = 0, pending = 0;
    int found, has_pending = 0;
    rc = s_meta_get(self, txn, "last_step", &last, &found);
    if (!rc) {
        rc = s_meta_get(self, txn, "pending_step", &pending, &has_pending);
    }
    if (rc == RL_EPROTO) {
        return rl_errf(err, err_len, rc, "meta last_step or pending_step is not a msgpack uint");
    }
    if (!rc && put->step > last) {
        rc = s_meta_put(self, txn, "last_step", put->step);
    }
    if (!rc && has_pending && pending <= put->step) {
        rc = s_meta_del(self, txn, "pending_step");
    }
    return rc;
}

int rl_traj_put_step(rl_traj_t *self, uint64_t step, const rl_traj_record_t *recs, int n,
                     char *err, size_t err_len) {
    if ((step == 0 && !self->use_eval) || n < 0 || (n > 0 && !recs) ||
        (self->use_eval && !self->has_eval)) {
        return rl_errf(err, err_len, RL_EINVAL, "put_step: step %llu (from 1), %d records",
                       (unsigned long long)step, n);
    }
    s_put_t put = {step, recs, n, 0};
    char what[64];
    snprintf(what, sizeof what, "step %llu", (unsigned long long)step);
    return s_write(self, s_put_fn, &put, what, err, err_len);
}

int rl_traj_put_pending(rl_traj_t *self, uint64_t step, const rl_traj_record_t *recs, int n,
                        char *err, size_t err_len) {
    if (step == 0 || n < 0 || (n > 0 && !recs)) {
        return rl_errf(err, err_len, RL_EINVAL, "put_pending: step %llu (from 1), %d records",
                       (unsigned long long)step, n);
    }
    s_put_t put = {step, recs, n, 1};
    char what[64];
    snprintf(what, sizeof what, "step %llu (pending)", (unsigned long long)step);
    return s_write(self, s_put_fn, &put, what, err, err_len);
}

static int s_truncate_fn(rl_traj_t *self, MDB_txn *txn, const void *ctx, char *err,
                         size_t err_len) {
    uint64_t step = *(const uint64_t *)ctx;
    int rc = step == UINT64_MAX ? 0 : s_delete_from(self, txn, self->traj, step + 1, 0);
    if (!rc && step != UINT64_MAX && self->has_eval) { // and the evaluations after it
        rc = s_delete_from(self, txn, self->eval, step + 1, 0);
    }
    uint64_t last = 0;
    int found = 0;
    if (!rc) {
        rc = s_meta_get(self, txn, "last_step", &last, &found);
    }
    if (rc == RL_EPROTO) {
        return rl_errf(err, err_len, rc, "meta last_step is not a msgpack uint");
    }
    if (!rc && found && last > step) {
        rc = s_meta_put(self, txn, "last_step", step);
    }
    uint64_t pending = 0;
    if (!rc && (rc = s_meta_get(self, txn, "pending_step", &pending, &found)) == 0 && found &&
        pending > step) {
        rc = s_meta_del(self, txn, "pending_step");
    }
    if (rc == RL_EPROTO) {
        return rl_errf(err, err_len, rc, "meta pending_step is not a msgpack uint");
    }
    return rc;
}

int rl_traj_truncate_after(rl_traj_t *self, uint64_t step, char *err, size_t err_len) {
    return s_write(self, s_truncate_fn, &step, "truncate", err, err_len);
}

// ---- reading --------------------------------------------------------------------------------

uint64_t rl_traj_pending_step(rl_traj_t *self) {
    MDB_txn *txn;
    if (s_txn_begin(self, MDB_RDONLY, &txn) != 0) {
        return 0;
    }
    uint64_t pending = 0;
    int found;
    if (s_meta_get(self, txn, "pending_step", &pending, &found) != 0 || !found) {
        pending = 0;
    }
    mdb_txn_abort(txn);
    return pending;
}

uint64_t rl_traj_last_step(rl_traj_t *self) {
    MDB_txn *txn;
    if (s_txn_begin(self, MDB_RDONLY, &txn) != 0) {
        return 0;
    }
    uint64_t last = 0;
    int found;
    if (s_meta_get(self, txn, "last_step", &last, &found) != 0) {
        last = 0;
    }
    mdb_txn_abort(txn);
    return last;
}

int rl_traj_read_step(rl_traj_t *self, uint64_t step, rl_traj_record_t **recs_p, int *n_p,
                      char *err, size_t err_len) {
    *recs_p = NULL;
    *n_p = 0;
    if (self->use_eval && !self->has_eval) {
        return 0; // a store from before evaluations were kept: none
    }
    MDB_txn *txn = NULL;
    MDB_cursor *c = NULL;
    rl_traj_record_t *recs = NULL;
    int n = 0, cap = 0;
    int rc = s_txn_begin(self, MDB_RDONLY, &txn);
    if (!rc) {
        rc = mdb_cursor_open(txn, s_tab(self), &c);
    }
    if (rc) {
        s_mdb_err(err, err_len, rc, "read");
        rc = rl_lmdb_code(rc);
        goto fail;
    }
    uint8_t kb[S_KEY_LEN];
    s_key(kb, step, 0, 0);
    MDB_val k = {S_KEY_LEN, kb}, v;
    for (rc = mdb_cursor_get(c, &k, &v, MDB_SET_RANGE); rc == 0;
         rc = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
        char name[96], why[256];
        s_key_name(&k, name, sizeof name);
        if (k.mv_size != S_KEY_LEN) {
            rc = rl_errf(err, err_len, RL_EPROTO, "%s: a key must be 16 bytes", name);
            goto fail;
        }
        if (s_be(k.mv_data, 8) != step) {
            break;
        }
        if (n > 0 && (recs[n - 1].prompt_index > s_be((const uint8_t *)k.mv_data + 8, 4) ||
                      (recs[n - 1].prompt_index == s_be((const uint8_t *)k.mv_data + 8, 4) &&
                       recs[n - 1].sample_index >= s_be((const uint8_t *)k.mv_data + 12, 4)))) {
            // LMDB walks keys in order; going back is a damaged page (docs/trajectories.md)
            rc = rl_errf(err, err_len, RL_EPROTO, "%s: keys out of order: the store is damaged",
                         name);
            goto fail;
        }
        if (n == cap) {
            int ncap = cap ? 2 * cap : 64;
            rl_traj_record_t *grown = realloc(recs, (size_t)ncap * sizeof(*recs));
            if (!grown) {
                rc = rl_errf(err, err_len, RL_ENOMEM, "read step: out of memory");
                goto fail;
            }
            recs = grown;
            cap = ncap;
        }
        rc = rl_traj_decode(v.mv_data, v.mv_size, &recs[n], why, sizeof why);
        if (rc) {
            rl_errf(err, err_len, rc, "record (%s): %s", name, why);
            goto fail;
        }
        n++;
        const rl_traj_record_t *d = &recs[n - 1];
        const uint8_t *kp = k.mv_data;
        if (d->step != step || d->prompt_index != s_be(kp + 8, 4) ||
            d->sample_index != s_be(kp + 12, 4)) {
            rc = rl_errf(err, err_len, RL_EPROTO, "record (%s): its fields say step %llu, "
                         "prompt %u, sample %u", name, (unsigned long long)d->step,
                         (unsigned)d->prompt_index, (unsigned)d->sample_index);
            goto fail;
        }
    }
    if (rc != 0 && rc != MDB_NOTFOUND) {
        s_mdb_err(err, err_len, rc, "read");
        rc = rl_lmdb_code(rc);
        goto fail;
    }
    mdb_cursor_close(c);
    mdb_txn_abort(txn);
    *recs_p = recs;
    *n_p = n;
    return 0;

fail:
    rl_traj_records_free(&recs, n);
    if (c) {
        mdb_cursor_close(c);
    }
    if (txn) {
        mdb_txn_abort(txn);
    }
    return rc;
}

int rl_traj_steps(rl_traj_t *self, uint64_t **steps_p, int *n_p, char *err, size_t err_len) {
    *steps_p = NULL;
    *n_p = 0;
    if (self->use_eval && !self->has_eval) {
        return 0;
    }
    MDB_txn *txn = NULL;
    MDB_cursor *c = NULL;
    uint64_t *steps = NULL;
    int n = 0, cap = 0;
    MDB_val k, v;
    uint8_t kb[S_KEY_LEN];
    int rc = s_txn_begin(self, MDB_RDONLY, &txn);
    if (!rc) {
        rc = mdb_cursor_open(txn, s_tab(self), &c);
    }
    if (!rc) {
        rc = mdb_cursor_get(c, &k, &v, MDB_FIRST);
    }
    // one seek per step: jump past the step just seen
    for (; rc == 0; rc = mdb_cursor_get(c, &k, &v, MDB_SET_RANGE)) {
        if (k.mv_size != S_KEY_LEN) {
            char name[96];
            s_key_name(&k, name, sizeof name);
            rc = rl_errf(err, err_len, RL_EPROTO, "%s: a key must be 16 bytes", name);
            goto fail;
        }
        uint64_t s = s_be(k.mv_data, 8);
        if (n > 0 && s <= steps[n - 1]) { // a seek past step steps[n-1] went back: damaged
            char name[96];
            s_key_name(&k, name, sizeof name);
            rc = rl_errf(err, err_len, RL_EPROTO, "%s: keys out of order: the store is damaged",
                         name);
            goto fail;
        }
        if (n == cap) {
            int ncap = cap ? 2 * cap : 256;
            uint64_t *grown = realloc(steps, (size_t)ncap * sizeof(*steps));
            if (!grown) {
                rc = rl_errf(err, err_len, RL_ENOMEM, "steps: out of memory");
                goto fail;
            }
            steps = grown;
            cap = ncap;
        }
        steps[n++] = s;
        if (s == UINT64_MAX) {
            rc = MDB_NOTFOUND;
            break;
        }
        s_key(kb, s + 1, 0, 0);
        k.mv_size = S_KEY_LEN;
        k.mv_data = kb;
    }
    if (rc != MDB_NOTFOUND) {
        s_mdb_err(err, err_len, rc, "steps");
        rc = rl_lmdb_code(rc);
        goto fail;
    }
    mdb_cursor_close(c);
    mdb_txn_abort(txn);
    *steps_p = steps;
    *n_p = n;
    return 0;

fail:
    free(steps);
    if (c) {
        mdb_cursor_close(c);
    }
    if (txn) {
        mdb_txn_abort(txn);
    }
    return rc;
}
