// tests for rl_traj, the trajectory store: a record survives encode/decode and a put/read round
// trip bit for bit (NaN rewards and absent arrays included); keys walk in (step, prompt, sample)
// order across byte boundaries; a step put again replaces its records; truncate_after and
// last_step; a map that starts tiny grows; a store reopened read-only reads the same and refuses
// writes; another schema version is refused; corrupt values give RL_EPROTO naming the key;
// the decoder refuses each kind of malformed map with the field's name; and the time of a
// 128-record put (printed; the figure in docs/trajectories.md). Damage (rl_traj_check.c): a
// whole store checks whole; a zeroed leaf page, a branch naming a page past the file, are found
// and named without harm to the caller; salvage keeps every record but the lost page's, with
// meta's last and pending steps and the evaluations, and keeps the old store aside; a check can
// be cancelled and timed out. A full disk (a tmpfs in a user namespace; RLCTL_FAULT=traj_enospc
// where none can be made) says "disk full" and names data.mdb; a dead reader's slot is freed.
#define _GNU_SOURCE // unshare, CLONE_*
#include "rl_err.h"
#include "rl_test.h"
#include "rl_test_lmdb.h"
#include "rl_traj.h"

#include <errno.h>
#include <lmdb.h>
#include <msgpack.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

// ---- records --------------------------------------------------------------------------------

static char *s_names[2] = {"correct", "format"};

// A record whose every value follows from (step, p, s): prompts of np tokens, completions of
// nc, the optional arrays present when `opt`.
static rl_traj_record_t s_make(uint64_t step, uint32_t p, uint32_t s, int np, int nc, int opt) {
    rl_traj_record_t r;
    memset(&r, 0, sizeof r);
    r.step = step;
    r.prompt_index = p;
    r.sample_index = s;
    r.data_index = (int64_t)p * 7 - 3; // -3 for prompt 0: negative indices are plain ints
    r.policy_version = step - 1;
    r.n_prompt = np;
    r.n_completion = nc;
    r.prompt_ids = malloc((size_t)(np ? np : 1) * 4);
    r.completion_ids = malloc((size_t)(nc ? nc : 1) * 4);
    r.mask = malloc((size_t)(nc ? nc : 1));
    r.sampler_logprobs = malloc((size_t)(nc ? nc : 1) * 4);
    for (int i = 0; i < np; i++) {
        r.prompt_ids[i] = (int32_t)((step * 131 + p * 17 + (uint64_t)i) % 151000);
    }
    for (int i = 0; i < nc; i++) {
        r.completion_ids[i] = (int32_t)((step * 7 + s * 3 + (uint64_t)i * 1000003) % 2000000000);
        r.mask[i] = (uint8_t)(i % 5 != 4);
        r.sampler_logprobs[i] = -0.01f * (float)(i + 1) - (float)s;
    }
    if (opt) {
        float **arr[4] = {&r.old_logprobs, &r.ref_logprobs, &r.values, &r.advantages};
        for (int a = 0; a < 4; a++) {
            *arr[a] = malloc((size_t)(nc ? nc : 1) * 4);
            for (int i = 0; i < nc; i++) {
                (*arr[a])[i] = r.sampler_logprobs[i] + 1e-3f * (float)(a + 1) * (float)(i % 3);
            }
        }
    }
    r.n_rewards = 2;
    r.reward_names = malloc(2 * sizeof(char *));
    r.reward_names[0] = strdup(s_names[0]);
    r.reward_names[1] = strdup(s_names[1]);
    r.rewards = malloc(2 * sizeof(double));
    r.rewards[0] = (double)((p + s) % 2);
    r.rewards[1] = s == 3 ? NAN : 0.1 * s; // NaN = unscorable
    r.reward = r.rewards[0] + 0.1 * s;
    r.advantage = ((double)s - 1.5) / 1.118033988749895;
    r.finish = (int)(s % 2);
    return r;
}

static int s_same_f(const float *a, const float *b, int n) {
    if (!a || !b) {
        return a == b;
    }
    return n == 0 || memcmp(a, b, (size_t)n * 4) == 0;
}

static int s_same_d(double a, double b) {
    return memcmp(&a, &b, sizeof a) == 0; // bitwise: NaN equals NaN, -0 differs from 0
}

// Every field equal, bit for bit.
static int s_equal(const rl_traj_record_t *a, const rl_traj_record_t *b) {
    if (a->step != b->step || a->prompt_index != b->prompt_index ||
        a->sample_index != b->sample_index || a->data_index != b->data_index ||
        a->policy_version != b->policy_version || a->n_prompt != b->n_prompt ||
        a->n_completion != b->n_completion || a->n_rewards != b->n_rewards ||
        a->finish != b->finish || !s_same_d(a->reward, b->reward) ||
        !s_same_d(a->advantage, b->advantage)) {
        return 0;
    }
    int nc = a->n_completion;
    if ((a->n_prompt && memcmp(a->prompt_ids, b->prompt_ids, (size_t)a->n_prompt * 4)) ||
        (nc && memcmp(a->completion_ids, b->completion_ids, (size_t)nc * 4)) ||
        (nc && memcmp(a->mask, b->mask, (size_t)nc)) ||
        !s_same_f(a->sampler_logprobs, b->sampler_logprobs, nc) ||
        !s_same_f(a->old_logprobs, b->old_logprobs, nc) ||
        !s_same_f(a->ref_logprobs, b->ref_logprobs, nc) ||
        !s_same_f(a->values, b->values, nc) || !s_same_f(a->advantages, b->advantages, nc) ||
        !s_same_f(a->token_rewards, b->token_rewards, nc)) {
        return 0;
    }
    for (int i = 0; i < a->n_rewards; i++) {
        if (strcmp(a->reward_names[i], b->reward_names[i]) ||
            !s_same_d(a->rewards[i], b->rewards[i])) {
            return 0;
        }
    }
    return 1;
}

// ---- encode / decode ------------------------------------------------------------------------

static void test_codec(void) {
    char err[512];
    for (int opt = 0; opt < 2; opt++) {
        for (int nc = 0; nc <= 40; nc += 40) {
            rl_traj_record_t r = s_make(9, 2, 3, 12, nc, opt), d;
            void *buf = NULL;
            size_t len = 0;
            CHECK_INT(rl_traj_encode(&r, &buf, &len), 0);
            CHECK(buf != NULL && len > 0);
            CHECK_INT(rl_traj_decode(buf, len, &d, err, sizeof err), 0);
            CHECK_MSG(s_equal(&r, &d), "opt %d nc %d", opt, nc);
            CHECK(opt || (!d.old_logprobs && !d.ref_logprobs && !d.values && !d.advantages));
            rl_traj_record_clear(&d);
            CHECK(d.prompt_ids == NULL && d.n_rewards == 0);
            free(buf);
            rl_traj_record_clear(&r);
        }
    }
    // the optional token_rewards (PPO): round trip; a record without it is byte for byte what
    // it was before the key existed (18 keys); a wrong length is refused naming it
    {
        rl_traj_record_t r = s_make(9, 2, 3, 12, 5, 1), d;
        void *b0 = NULL, *b1 = NULL;
        size_t l0 = 0, l1 = 0;
        CHECK_INT(rl_traj_encode(&r, &b0, &l0), 0);
        CHECK(((const uint8_t *)b0)[0] == 0xde && ((const uint8_t *)b0)[2] == 18); // map16, 18
        r.token_rewards = malloc(5 * sizeof(float));
        for (int i = 0; i < 5; i++) {
            r.token_rewards[i] = i == 4 ? 1.0f : -0.01f * (float)i;
        }
        CHECK_INT(rl_traj_encode(&r, &b1, &l1), 0);
        CHECK(l1 == l0 + 14 + 2 + 20); // key "token_rewards" (1 + 13), bin8 header, 20 bytes
        CHECK_INT(rl_traj_decode(b1, l1, &d, err, sizeof err), 0);
        CHECK_MSG(s_equal(&r, &d) && d.token_rewards, "token_rewards round trip");
        rl_traj_record_clear(&d);
        CHECK_INT(rl_traj_decode(b0, l0, &d, err, sizeof err), 0);
        CHECK(d.token_rewards == NULL);
        rl_traj_record_clear(&d);
        ((uint8_t *)b1)[l1 - 21] = 16; // the bin's length byte: 16 bytes for 5 tokens
        CHECK_INT(rl_traj_decode(b1, l1 - 4, &d, err, sizeof err), RL_EPROTO);
        CHECK_CONTAINS(err, "token_rewards");
        rl_traj_record_clear(&d);
        free(b0);
        free(b1);
        rl_traj_record_clear(&r);
    }
    // a multi-turn episode (docs/envs.md): round trip of its turns, turn rewards, end, counts
    // and conversation; encode refuses turns that do not start at 0 and increase inside the
    // completion, decode refuses such bytes and a map without its required keys
    {
        rl_traj_record_t r = s_make(9, 2, 3, 12, 10, 0), d;
        rl_traj_episode_t *e = calloc(1, sizeof *e);
        e->n_turns = 2;
        e->turn_starts = malloc(2 * sizeof *e->turn_starts);
        e->turn_starts[0] = 0;
        e->turn_starts[1] = 6;
        e->turn_rewards = malloc(2 * sizeof *e->turn_rewards);
        e->turn_rewards[0] = 0.25;
        e->turn_rewards[1] = -1.0;
        e->truncated = 1;
        e->tool_calls = 3;
        e->parse_errors = 1;
        e->conversation = strdup("{\"messages\":[{\"role\":\"user\",\"content\":\"q\"}]}");
        r.episode = e;
        void *b = NULL;
        size_t l = 0;
        CHECK_INT(rl_traj_encode(&r, &b, &l), 0);
        CHECK_INT(rl_traj_decode(b, l, &d, err, sizeof err), 0);
        CHECK(s_equal(&r, &d) && d.episode);
        if (d.episode) {
            CHECK(d.episode->n_turns == 2 && d.episode->turn_starts[1] == 6 &&
                  d.episode->turn_rewards[0] == 0.25 && d.episode->turn_rewards[1] == -1.0 &&
                  d.episode->truncated == 1 && d.episode->tool_calls == 3 &&
                  d.episode->parse_errors == 1);
            CHECK_STR(d.episode->conversation, e->conversation);
        }
        rl_traj_record_clear(&d);
        // bytes whose second turn starts past the completion: refused naming the field
        uint8_t *at = memmem(b, l, "\x92\x00\x06", 3); // turns: [0, 6] as a fixarray
        CHECK(at != NULL);
        if (at) {
            at[2] = 10; // == n_completion
            CHECK_INT(rl_traj_decode(b, l, &d, err, sizeof err), RL_EPROTO);
            CHECK_CONTAINS(err, "episode");
            rl_traj_record_clear(&d);
            at[2] = 6;
            at[1] = 1; // the first turn not at 0
            CHECK_INT(rl_traj_decode(b, l, &d, err, sizeof err), RL_EPROTO);
            rl_traj_record_clear(&d);
        }
        uint8_t *end = memmem(b, l,
                              "\xa3"
                              "end",
                              4); // the key "end" renamed: missing
        CHECK(end != NULL);
        if (end) {
            end[1] = 'E';
            CHECK_INT(rl_traj_decode(b, l, &d, err, sizeof err), RL_EPROTO);
            CHECK_CONTAINS(err, "turns, turn_rewards and end are required");
            rl_traj_record_clear(&d);
        }
        free(b);
        e->turn_starts[1] = 0;
        CHECK_INT(rl_traj_encode(&r, &b, &l), RL_EINVAL);
        e->turn_starts[1] = 6;
        e->n_turns = 11;
        CHECK_INT(rl_traj_encode(&r, &b, &l), RL_EINVAL);
        e->n_turns = 2;
        rl_traj_record_clear(&r);
    }
    // what encode refuses, so that the store never holds a record decode would refuse
    rl_traj_record_t r = s_make(1, 0, 0, 4, 6, 0);
    void *buf;
    size_t len;
    r.prompt_ids[1] = -5;
    CHECK_INT(rl_traj_encode(&r, &buf, &len), RL_EINVAL);
    r.prompt_ids[1] = 5;
    r.mask[2] = 2;
    CHECK_INT(rl_traj_encode(&r, &buf, &len), RL_EINVAL);
    r.mask[2] = 1;
    r.finish = 2;
    CHECK_INT(rl_traj_encode(&r, &buf, &len), RL_EINVAL);
    r.finish = 0;
    char *name = r.reward_names[1], same[] = "correct", empty[] = "";
    r.reward_names[1] = same;
    CHECK_INT(rl_traj_encode(&r, &buf, &len), RL_EINVAL);
    r.reward_names[1] = empty;
    CHECK_INT(rl_traj_encode(&r, &buf, &len), RL_EINVAL);
    r.reward_names[1] = name;
    float *keep = r.sampler_logprobs;
    r.sampler_logprobs = NULL;
    CHECK_INT(rl_traj_encode(&r, &buf, &len), RL_EINVAL);
    r.sampler_logprobs = keep;
    r.n_completion = RL_TRAJ_MAX_TOKENS + 1;
    CHECK_INT(rl_traj_encode(&r, &buf, &len), RL_EINVAL);
    r.n_completion = 6;
    CHECK_INT(rl_traj_encode(&r, &buf, &len), 0);
    free(buf);
    rl_traj_record_clear(&r);
}

// ---- malformed maps -------------------------------------------------------------------------

typedef struct {
    msgpack_sbuffer sb;
    msgpack_packer pk;
} s_mp_t;

static void s_mp_init(s_mp_t *m) {
    msgpack_sbuffer_init(&m->sb);
    msgpack_packer_init(&m->pk, &m->sb, msgpack_sbuffer_write);
}

static void s_str(s_mp_t *m, const char *s) {
    msgpack_pack_str(&m->pk, strlen(s));
    msgpack_pack_str_body(&m->pk, s, strlen(s));
}

static void s_bin(s_mp_t *m, const void *p, size_t n) {
    msgpack_pack_bin(&m->pk, n);
    msgpack_pack_bin_body(&m->pk, p, n);
}

// The fields of a valid 2-token record, each one replaceable: `skip` leaves a field out,
// `field`/`fn` writes that field's value by hand, `extra` adds entries after the map's end
// count. Returns the number of entries written (the caller writes the map header first).
typedef void (*s_val_fn)(s_mp_t *m);

static const char *const s_all[] = {
    "v", "step", "prompt_index", "sample_index", "data_index", "policy_version", "prompt_ids",
    "completion_ids", "mask", "sampler_logprobs", "old_logprobs", "ref_logprobs", "values",
    "advantages", "rewards", "reward", "advantage", "finish", NULL,
};

static void s_field(s_mp_t *m, const char *f) {
    static const uint8_t ids[8] = {1, 0, 0, 0, 2, 0, 0, 0};
    static const uint8_t mask[2] = {1, 0};
    static const uint8_t lp[8] = {0, 0, 0x80, 0xbf, 0, 0, 0, 0xc0}; // -1.0f, -2.0f
    s_str(m, f);
    if (!strcmp(f, "v")) {
        msgpack_pack_uint8(&m->pk, 1);
    } else if (!strcmp(f, "step")) {
        msgpack_pack_uint64(&m->pk, 4);
    } else if (!strcmp(f, "prompt_index") || !strcmp(f, "sample_index")) {
        msgpack_pack_uint32(&m->pk, 1);
    } else if (!strcmp(f, "data_index")) {
        msgpack_pack_int64(&m->pk, -1);
    } else if (!strcmp(f, "policy_version")) {
        msgpack_pack_uint64(&m->pk, 3);
    } else if (!strcmp(f, "prompt_ids") || !strcmp(f, "completion_ids")) {
        s_bin(m, ids, 8);
    } else if (!strcmp(f, "mask")) {
        s_bin(m, mask, 2);
    } else if (!strcmp(f, "sampler_logprobs") || !strcmp(f, "old_logprobs")) {
        s_bin(m, lp, 8);
    } else if (!strcmp(f, "rewards")) {
        msgpack_pack_map(&m->pk, 1);
        s_str(m, "correct");
        msgpack_pack_double(&m->pk, 1.0);
    } else if (!strcmp(f, "reward") || !strcmp(f, "advantage")) {
        msgpack_pack_float(&m->pk, 0.5f); // float32 is accepted too
    } else if (!strcmp(f, "finish")) {
        s_str(m, "length");
    } else {
        msgpack_pack_nil(&m->pk);
    }
}

// Builds a record map with `bad` (a field name) written by fn instead, or left out when fn is
// NULL and drop is set; extra entries (n_extra) are written by extra().
static void s_build(s_mp_t *m, const char *bad, s_val_fn fn, int drop, int n_extra,
                    s_val_fn extra) {
    s_mp_init(m);
    int n = 18 - (drop ? 1 : 0) + n_extra;
    msgpack_pack_map(&m->pk, (size_t)n);
    for (int i = 0; s_all[i]; i++) {
        if (bad && !strcmp(s_all[i], bad)) {
            if (!drop) {
                s_str(m, bad);
                fn(m);
            }
            continue;
        }
        s_field(m, s_all[i]);
    }
    if (extra) {
        extra(m);
    }
}

static void v_nil(s_mp_t *m) { msgpack_pack_nil(&m->pk); }
static void v_two(s_mp_t *m) { msgpack_pack_uint8(&m->pk, 2); }
static void v_neg(s_mp_t *m) { msgpack_pack_int8(&m->pk, -1); }
static void v_str(s_mp_t *m) { s_str(m, "x"); }
static void v_bin3(s_mp_t *m) { s_bin(m, "abc", 3); }
static void v_bin1(s_mp_t *m) { s_bin(m, "\1", 1); }
static void v_mask2(s_mp_t *m) { s_bin(m, "\1\2", 2); }
static void v_big_u32(s_mp_t *m) { msgpack_pack_uint64(&m->pk, 1ull << 32); }
static void v_finish(s_mp_t *m) { s_str(m, "eos"); }
static void v_negid(s_mp_t *m) { s_bin(m, "\1\0\0\0\xff\xff\xff\xff", 8); }
static void v_rew_dup(s_mp_t *m) {
    msgpack_pack_map(&m->pk, 2);
    s_str(m, "a");
    msgpack_pack_double(&m->pk, 1.0);
    s_str(m, "a");
    msgpack_pack_double(&m->pk, 2.0);
}
static void v_rew_val(s_mp_t *m) {
    msgpack_pack_map(&m->pk, 1);
    s_str(m, "a");
    s_str(m, "one");
}
static void v_rew_many(s_mp_t *m) {
    msgpack_pack_map(&m->pk, 65);
    for (int i = 0; i < 65; i++) {
        char k[8];
        snprintf(k, sizeof k, "r%d", i);
        s_str(m, k);
        msgpack_pack_double(&m->pk, i);
    }
}
static void x_unknown(s_mp_t *m) { // a future field: skipped
    s_str(m, "note");
    msgpack_pack_array(&m->pk, 2);
    msgpack_pack_map(&m->pk, 1);
    s_str(m, "k");
    msgpack_pack_true(&m->pk);
    msgpack_pack_ext(&m->pk, 3, 7);
    msgpack_pack_ext_body(&m->pk, "abc", 3);
}
static void x_dup_step(s_mp_t *m) { s_field(m, "step"); }
static void x_deep(s_mp_t *m) {
    s_str(m, "deep");
    for (int i = 0; i < 40; i++) {
        msgpack_pack_array(&m->pk, 1);
    }
    msgpack_pack_nil(&m->pk);
}

static void s_expect(const char *what, s_mp_t *m, int code, const char *needle) {
    rl_traj_record_t d;
    char err[512] = "";
    int rc = rl_traj_decode(m->sb.data, m->sb.size, &d, err, sizeof err);
    CHECK_MSG(rc == code, "%s: rc %d (%s), expected %d", what, rc, err, code);
    if (needle) {
        CHECK_MSG(strstr(err, needle) != NULL, "%s: '%s' lacks '%s'", what, err, needle);
    }
    if (rc == 0) {
        CHECK(d.n_completion == 2 && d.completion_ids[1] == 2 && d.finish == 1);
        rl_traj_record_clear(&d);
    } else {
        CHECK_MSG(d.prompt_ids == NULL && d.reward_names == NULL, "%s: not emptied", what);
    }
    msgpack_sbuffer_destroy(&m->sb);
}

static void test_malformed(void) {
    s_mp_t m;
    s_build(&m, NULL, NULL, 0, 0, NULL);
    s_expect("valid", &m, 0, NULL);
    s_build(&m, NULL, NULL, 0, 1, x_unknown);
    s_expect("unknown key", &m, 0, NULL);
    // every field is required
    for (int i = 0; s_all[i]; i++) {
        s_build(&m, s_all[i], NULL, 1, 0, NULL);
        char needle[64];
        snprintf(needle, sizeof needle, "field '%s': missing", s_all[i]);
        s_expect(s_all[i], &m, RL_EPROTO, needle);
    }
    s_build(&m, "v", v_two, 0, 0, NULL);
    s_expect("v 2", &m, RL_EVERSION, "record version 2");
    s_build(&m, "v", v_str, 0, 0, NULL);
    s_expect("v str", &m, RL_EPROTO, "field 'v': expected an int, found str");
    s_build(&m, "step", v_neg, 0, 0, NULL);
    s_expect("step -1", &m, RL_EPROTO, "field 'step': integer out of range");
    s_build(&m, "prompt_index", v_big_u32, 0, 0, NULL);
    s_expect("prompt_index 2^32", &m, RL_EPROTO, "field 'prompt_index'");
    s_build(&m, "prompt_ids", v_bin3, 0, 0, NULL);
    s_expect("ids of 3 bytes", &m, RL_EPROTO, "field 'prompt_ids': length is not a multiple");
    s_build(&m, "completion_ids", v_str, 0, 0, NULL);
    s_expect("ids as str", &m, RL_EPROTO, "field 'completion_ids': expected a bin, found str");
    s_build(&m, "completion_ids", v_negid, 0, 0, NULL);
    s_expect("negative id", &m, RL_EPROTO, "field 'completion_ids': a negative id");
    s_build(&m, "mask", v_bin1, 0, 0, NULL);
    s_expect("mask short", &m, RL_EPROTO, "field 'mask': length differs");
    s_build(&m, "mask", v_mask2, 0, 0, NULL);
    s_expect("mask byte 2", &m, RL_EPROTO, "field 'mask': a byte other than 0 or 1");
    s_build(&m, "sampler_logprobs", v_nil, 0, 0, NULL);
    s_expect("sampler nil", &m, RL_EPROTO, "field 'sampler_logprobs': expected a bin, found nil");
    s_build(&m, "values", v_bin3, 0, 0, NULL);
    s_expect("values short", &m, RL_EPROTO, "field 'values': length is not 4 x");
    s_build(&m, "advantages", v_two, 0, 0, NULL);
    s_expect("advantages int", &m, RL_EPROTO, "field 'advantages': expected a bin or nil");
    s_build(&m, "rewards", v_rew_dup, 0, 0, NULL);
    s_expect("reward twice", &m, RL_EPROTO, "field 'rewards': a reward name appears twice");
    s_build(&m, "rewards", v_rew_val, 0, 0, NULL);
    s_expect("reward str", &m, RL_EPROTO, "field 'rewards': expected a number, found str");
    s_build(&m, "rewards", v_rew_many, 0, 0, NULL);
    s_expect("65 rewards", &m, RL_EPROTO, "field 'rewards': more than");
    s_build(&m, "reward", v_str, 0, 0, NULL);
    s_expect("reward str", &m, RL_EPROTO, "field 'reward': expected a number");
    s_build(&m, "finish", v_finish, 0, 0, NULL);
    s_expect("finish eos", &m, RL_EPROTO, "field 'finish': expected \"stop\" or \"length\"");
    s_build(&m, NULL, NULL, 0, 1, x_dup_step);
    s_expect("step twice", &m, RL_EPROTO, "field 'step': appears twice");
    s_build(&m, NULL, NULL, 0, 1, x_deep);
    s_expect("deep", &m, RL_EPROTO, "field 'deep': nested too deep");

    // byte-level damage: truncation at every length, trailing bytes, a non-map, huge counts
    s_build(&m, NULL, NULL, 0, 0, NULL);
    for (size_t cut = 0; cut < m.sb.size; cut++) {
        rl_traj_record_t d;
        char err[256] = "";
        int rc = rl_traj_decode(m.sb.data, cut, &d, err, sizeof err);
        CHECK_MSG(rc == RL_EPROTO && err[0], "cut at %zu: rc %d", cut, rc);
    }
    msgpack_pack_nil(&m.pk);
    s_expect("trailing nil", &m, RL_EPROTO, "bytes after the record's map");
    s_mp_init(&m);
    msgpack_pack_array(&m.pk, 0);
    s_expect("array", &m, RL_EPROTO, "a record is a msgpack map");
    static const uint8_t huge_map[] = {0xdf, 0xff, 0xff, 0xff, 0xff, 0xa1, 'v', 0x01};
    static const uint8_t huge_arr[] = {0x82, 0xa1, 'v', 0x01, 0xa1, 'x', 0xdd, 0xff, 0xff,
                                       0xff, 0xff, 0xc0};
    static const uint8_t huge_bin[] = {0x81, 0xa1, 'v', 0xc6, 0x7f, 0xff, 0xff, 0xff};
    const struct {
        const uint8_t *b;
        size_t n;
    } raw[] = {{huge_map, sizeof huge_map}, {huge_arr, sizeof huge_arr},
               {huge_bin, sizeof huge_bin}};
    for (size_t i = 0; i < sizeof raw / sizeof raw[0]; i++) {
        rl_traj_record_t d;
        char err[256] = "";
        CHECK_INT(rl_traj_decode(raw[i].b, raw[i].n, &d, err, sizeof err), RL_EPROTO);
    }
}

// ---- the store ------------------------------------------------------------------------------

static char s_dir[64];

static void s_path(char *out, size_t cap, const char *name) {
    snprintf(out, cap, "%s/%s", s_dir, name);
}

// Puts the records of `step` for prompts p0..p0+np-1 and samples 0..G-1, in reverse order (the
// store must sort them).
static int s_put(rl_traj_t *t, uint64_t step, uint32_t p0, int np, int G, int nc, int opt) {
    int n = np * G;
    rl_traj_record_t *recs = calloc((size_t)n, sizeof(*recs));
    for (int i = 0; i < n; i++) {
        int j = n - 1 - i;
        recs[i] = s_make(step, p0 + (uint32_t)(j / G), (uint32_t)(j % G), 9, nc, opt);
    }
    char err[512];
    int rc = rl_traj_put_step(t, step, recs, n, err, sizeof err);
    if (rc) {
        fprintf(stderr, "put step %llu: %s\n", (unsigned long long)step, err);
    }
    for (int i = 0; i < n; i++) {
        rl_traj_record_clear(&recs[i]);
    }
    free(recs);
    return rc;
}

// Reads `step` and checks it holds exactly the records s_put wrote, in key order.
static void s_check_step(rl_traj_t *t, uint64_t step, uint32_t p0, int np, int G, int nc,
                         int opt) {
    rl_traj_record_t *recs = NULL;
    int n = -1;
    char err[512];
    int rc = rl_traj_read_step(t, step, &recs, &n, err, sizeof err);
    CHECK_MSG(rc == 0, "read step %llu: %s", (unsigned long long)step, err);
    CHECK_INT(n, np * G);
    for (int i = 0; i < n && i < np * G; i++) {
        rl_traj_record_t want = s_make(step, p0 + (uint32_t)(i / G), (uint32_t)(i % G), 9, nc,
                                       opt);
        CHECK_MSG(s_equal(&recs[i], &want), "step %llu record %d", (unsigned long long)step, i);
        rl_traj_record_clear(&want);
    }
    rl_traj_records_free(&recs, n);
    CHECK(recs == NULL);
}

static void s_check_steps(rl_traj_t *t, const uint64_t *want, int n_want) {
    uint64_t *steps = NULL;
    int n = -1;
    char err[512];
    CHECK_INT(rl_traj_steps(t, &steps, &n, err, sizeof err), 0);
    CHECK_INT(n, n_want);
    for (int i = 0; i < n && i < n_want; i++) {
        CHECK_MSG(steps[i] == want[i], "steps[%d] = %llu, want %llu", i,
                  (unsigned long long)steps[i], (unsigned long long)want[i]);
    }
    free(steps);
}

static void test_store(void) {
    char path[128], err[512];
    s_path(path, sizeof path, "store");
    rl_traj_t *t = NULL;
    CHECK_INT(rl_traj_open(path, 0, &t, err, sizeof err), 0);
    RL_ASSERT(t);
    CHECK_INT(rl_traj_map_size(t), RL_TRAJ_MAP_INITIAL);
    CHECK_INT(rl_traj_last_step(t), 0);
    s_check_steps(t, NULL, 0);

    // key order: big-endian bytes sort steps 1 < 2 < 256 < 2^32 and prompt 1 < 256, whatever
    // order they are put in
    CHECK_INT(s_put(t, 256, 0, 1, 2, 5, 0), 0);
    CHECK_INT(s_put(t, 2, 254, 3, 2, 5, 1), 0); // prompts 254, 255, 256
    CHECK_INT(s_put(t, 1ull << 32, 0, 1, 1, 5, 0), 0);
    CHECK_INT(s_put(t, 1, 0, 2, 4, 5, 0), 0);
    uint64_t all[] = {1, 2, 256, 1ull << 32};
    s_check_steps(t, all, 4);
    CHECK_INT(rl_traj_last_step(t), 1ull << 32);
    s_check_step(t, 1, 0, 2, 4, 5, 0);
    s_check_step(t, 2, 254, 3, 2, 5, 1);
    s_check_step(t, 256, 0, 1, 2, 5, 0);
    s_check_step(t, 3, 0, 0, 0, 5, 0); // absent: no records, no error

    // replace: step 2 again with other records; the others are untouched
    CHECK_INT(s_put(t, 2, 0, 1, 3, 7, 0), 0);
    s_check_step(t, 2, 0, 1, 3, 7, 0);
    s_check_step(t, 1, 0, 2, 4, 5, 0);
    s_check_step(t, 256, 0, 1, 2, 5, 0);
    CHECK_INT(rl_traj_last_step(t), 1ull << 32); // an older step does not lower it

    // refusals leave the step as it was (one transaction)
    rl_traj_record_t two[2] = {s_make(2, 0, 0, 3, 3, 0), s_make(2, 0, 0, 3, 3, 0)};
    CHECK_INT(rl_traj_put_step(t, 2, two, 2, err, sizeof err), RL_EINVAL);
    CHECK_CONTAINS(err, "appears twice");
    two[1].step = 3;
    CHECK_INT(rl_traj_put_step(t, 2, two, 2, err, sizeof err), RL_EINVAL);
    CHECK_CONTAINS(err, "record 1 has step 3");
    two[1].step = 2;
    two[1].sample_index = 1;
    two[1].mask[0] = 7;
    CHECK_INT(rl_traj_put_step(t, 2, two, 2, err, sizeof err), RL_EINVAL);
    CHECK_CONTAINS(err, "record 1 (prompt 0, sample 1): mask[0] = 7");
    CHECK_INT(rl_traj_put_step(t, 0, two, 1, err, sizeof err), RL_EINVAL);
    rl_traj_record_clear(&two[0]);
    rl_traj_record_clear(&two[1]);
    s_check_step(t, 2, 0, 1, 3, 7, 0);

    // an empty step: put with n = 0 removes its records
    CHECK_INT(rl_traj_put_step(t, 256, NULL, 0, err, sizeof err), 0);
    uint64_t no256[] = {1, 2, 1ull << 32};
    s_check_steps(t, no256, 3);

    // truncate_after: later steps go, last_step follows; truncating above it changes nothing
    CHECK_INT(rl_traj_truncate_after(t, 1000, err, sizeof err), 0);
    uint64_t two_steps[] = {1, 2};
    s_check_steps(t, two_steps, 2);
    CHECK_INT(rl_traj_last_step(t), 1000);
    CHECK_INT(rl_traj_truncate_after(t, 1, err, sizeof err), 0);
    s_check_steps(t, two_steps, 1);
    CHECK_INT(rl_traj_last_step(t), 1);
    CHECK_INT(rl_traj_truncate_after(t, 5, err, sizeof err), 0);
    CHECK_INT(rl_traj_last_step(t), 1);
    CHECK_INT(s_put(t, 2, 0, 2, 2, 6, 1), 0);
    CHECK_INT(rl_traj_last_step(t), 2);
    rl_traj_close(&t);
    CHECK(t == NULL);
    rl_traj_close(&t); // no-op

    // reopen read-only: the same records; writes are refused
    CHECK_INT(rl_traj_open(path, RL_TRAJ_READONLY, &t, err, sizeof err), 0);
    RL_ASSERT(t);
    s_check_step(t, 1, 0, 2, 4, 5, 0);
    s_check_step(t, 2, 0, 2, 2, 6, 1);
    CHECK_INT(rl_traj_last_step(t), 2);
    CHECK_INT(s_put(t, 3, 0, 1, 1, 5, 0), RL_EINVAL);
    CHECK_INT(rl_traj_truncate_after(t, 0, err, sizeof err), RL_EINVAL);
    CHECK_CONTAINS(err, "read-only");
    // a writer and a reader at once (the run and `rlctl traj`)
    rl_traj_t *w = NULL;
    CHECK_INT(rl_traj_open(path, 0, &w, err, sizeof err), 0);
    CHECK_INT(s_put(w, 3, 0, 1, 2, 5, 0), 0);
    s_check_step(t, 3, 0, 1, 2, 5, 0);
    rl_traj_close(&w);
    rl_traj_close(&t);

    // read-only on nothing
    char none[128];
    s_path(none, sizeof none, "absent");
    CHECK_INT(rl_traj_open(none, RL_TRAJ_READONLY, &t, err, sizeof err), ENOENT);
    CHECK(t == NULL);
    CHECK_CONTAINS(err, "absent");
    CHECK_INT(rl_traj_open(s_dir, RL_TRAJ_READONLY, &t, err, sizeof err), ENOENT);
    CHECK_CONTAINS(err, "not a trajectory store");
}

// A map that starts at 256 KiB has to double several times for a 3 MiB step.
static void test_growth(void) {
    char path[128], err[512];
    s_path(path, sizeof path, "tiny");
    rl_traj_t *t = NULL;
    CHECK_INT(rl_traj_open_sized(path, 0, 256u << 10, &t, err, sizeof err), 0);
    RL_ASSERT(t);
    size_t before = rl_traj_map_size(t);
    CHECK_INT(before, 256u << 10);
    CHECK_INT(s_put(t, 1, 0, 8, 8, 3000, 1), 0); // 64 records x 3000 tokens x 25 bytes
    size_t after = rl_traj_map_size(t);
    CHECK_MSG(after >= 8 * before, "map %zu -> %zu", before, after);
    CHECK_INT(s_put(t, 2, 0, 1, 1, 3, 0), 0);
    s_check_step(t, 1, 0, 8, 8, 3000, 1);
    rl_traj_close(&t);
    // reopened, it keeps the grown size (the initial size applies to new stores only)
    CHECK_INT(rl_traj_open_sized(path, 0, 256u << 10, &t, err, sizeof err), 0);
    CHECK_MSG(rl_traj_map_size(t) >= after, "reopened map %zu", rl_traj_map_size(t));
    s_check_step(t, 1, 0, 8, 8, 3000, 1);
    rl_traj_close(&t);
}

// ---- damage written behind the store's back -------------------------------------------------

// Puts `val` under `key` in database `db` of the environment at path, with plain LMDB.
static void s_raw_put(const char *path, const char *db, const void *key, size_t klen,
                      const void *val, size_t vlen) {
    MDB_env *env;
    MDB_txn *txn;
    MDB_dbi dbi;
    RL_ASSERT(mdb_env_create(&env) == 0);
    mdb_env_set_maxdbs(env, 2);
    RL_ASSERT(mdb_env_open(env, path, 0, 0664) == 0);
    RL_ASSERT(mdb_txn_begin(env, NULL, 0, &txn) == 0);
    RL_ASSERT(mdb_dbi_open(txn, db, 0, &dbi) == 0);
    MDB_val k = {klen, (void *)key}, v = {vlen, (void *)val};
    RL_ASSERT(mdb_put(txn, dbi, &k, &v, 0) == 0);
    RL_ASSERT(mdb_txn_commit(txn) == 0);
    mdb_env_close(env);
}

static void s_key(uint8_t k[16], uint64_t step, uint32_t p, uint32_t s) {
    for (int i = 0; i < 8; i++) {
        k[i] = (uint8_t)(step >> (56 - 8 * i));
    }
    for (int i = 0; i < 4; i++) {
        k[8 + i] = (uint8_t)(p >> (24 - 8 * i));
        k[12 + i] = (uint8_t)(s >> (24 - 8 * i));
    }
}

static void test_corrupt(void) {
    char path[128], err[512];
    s_path(path, sizeof path, "corrupt");
    rl_traj_t *t = NULL;
    CHECK_INT(rl_traj_open(path, 0, &t, err, sizeof err), 0);
    CHECK_INT(s_put(t, 5, 0, 2, 2, 4, 0), 0);
    CHECK_INT(s_put(t, 6, 0, 1, 2, 4, 0), 0);
    CHECK_INT(s_put(t, 7, 0, 1, 1, 4, 0), 0);
    rl_traj_close(&t);

    uint8_t k[16];
    s_key(k, 5, 1, 0);
    s_raw_put(path, "traj", k, 16, "\x93\x01\x02\x03", 4); // an array, not a map
    // a valid record of step 6 stored under another key's name
    rl_traj_record_t other = s_make(6, 0, 9, 3, 3, 0);
    void *buf;
    size_t len;
    RL_ASSERT(rl_traj_encode(&other, &buf, &len) == 0);
    s_key(k, 6, 0, 1);
    s_raw_put(path, "traj", k, 16, buf, len);
    // a record of version 2 at step 7
    s_mp_t m;
    s_build(&m, "v", v_two, 0, 0, NULL);
    s_key(k, 7, 1, 1);
    s_raw_put(path, "traj", k, 16, m.sb.data, m.sb.size);
    msgpack_sbuffer_destroy(&m.sb);
    free(buf);
    rl_traj_record_clear(&other);

    CHECK_INT(rl_traj_open(path, RL_TRAJ_READONLY, &t, err, sizeof err), 0);
    rl_traj_record_t *recs = NULL;
    int n = -1;
    CHECK_INT(rl_traj_read_step(t, 5, &recs, &n, err, sizeof err), RL_EPROTO);
    CHECK_CONTAINS(err, "step 5, prompt 1, sample 0");
    CHECK_CONTAINS(err, "a record is a msgpack map");
    CHECK(recs == NULL && n == 0);
    CHECK_INT(rl_traj_read_step(t, 6, &recs, &n, err, sizeof err), RL_EPROTO);
    CHECK_CONTAINS(err, "step 6, prompt 0, sample 1): its fields say step 6, prompt 0, sample 9");
    CHECK_INT(rl_traj_read_step(t, 7, &recs, &n, err, sizeof err), RL_EVERSION);
    CHECK_CONTAINS(err, "step 7, prompt 1, sample 1");
    CHECK_CONTAINS(err, "record version 2");
    rl_traj_close(&t);

    // a key that is not 16 bytes (sorting after step 7, where the walk over steps seeks)
    s_raw_put(path, "traj", "\0\0\0\0\0\0\0\x08\xff", 9, "\x80", 1);
    CHECK_INT(rl_traj_open(path, RL_TRAJ_READONLY, &t, err, sizeof err), 0);
    uint64_t *steps = NULL;
    CHECK_INT(rl_traj_steps(t, &steps, &n, err, sizeof err), RL_EPROTO);
    CHECK_CONTAINS(err, "key of 9 bytes 0x0000000000000008ff");
    CHECK(steps == NULL);
    rl_traj_close(&t);

    // another schema version in meta: refused, read-only or not
    static const uint8_t v2[] = {0x02};
    s_raw_put(path, "meta", "schema_version", 14, v2, 1);
    CHECK_INT(rl_traj_open(path, 0, &t, err, sizeof err), RL_EVERSION);
    CHECK(t == NULL);
    CHECK_CONTAINS(err, "schema version 2, this build reads version 1");
    CHECK_INT(rl_traj_open(path, RL_TRAJ_READONLY, &t, err, sizeof err), RL_EVERSION);
    s_raw_put(path, "meta", "schema_version", 14, "\xa1x", 2);
    CHECK_INT(rl_traj_open(path, RL_TRAJ_READONLY, &t, err, sizeof err), RL_EPROTO);
    CHECK_CONTAINS(err, "schema_version is not a msgpack uint");

    // an LMDB environment without our databases
    char plain[128];
    s_path(plain, sizeof plain, "plain");
    RL_ASSERT(mkdir(plain, 0775) == 0);
    MDB_env *env;
    RL_ASSERT(mdb_env_create(&env) == 0);
    RL_ASSERT(mdb_env_open(env, plain, 0, 0664) == 0);
    mdb_env_close(env);
    CHECK_INT(rl_traj_open(plain, RL_TRAJ_READONLY, &t, err, sizeof err), RL_EPROTO);
    CHECK_CONTAINS(err, "not a trajectory store");
}

// ---- time -----------------------------------------------------------------------------------

static double s_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int s_cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

// The GRPO cookbook's step: 16 prompts x 8 samples, 9-token prompts, ~40-token completions,
// old logprobs stored. Printed, not checked beyond a loose bound (CI disks vary); the target
// is 2% of a 0.5 s step = 10 ms.
static void test_put_time(void) {
    char path[128], err[512];
    s_path(path, sizeof path, "time");
    rl_traj_t *t = NULL;
    CHECK_INT(rl_traj_open(path, 0, &t, err, sizeof err), 0);
    enum { STEPS = 30, N = 128 };
    rl_traj_record_t *recs = calloc(N, sizeof(*recs));
    double ms[STEPS];
    for (int s = 0; s < STEPS; s++) {
        for (int i = 0; i < N; i++) {
            recs[i] = s_make((uint64_t)s + 1, (uint32_t)(i / 8), (uint32_t)(i % 8), 9,
                             30 + (i * 7) % 21, 0);
            recs[i].old_logprobs = malloc((size_t)recs[i].n_completion * 4);
            memcpy(recs[i].old_logprobs, recs[i].sampler_logprobs,
                   (size_t)recs[i].n_completion * 4);
        }
        double t0 = s_now();
        int rc = rl_traj_put_step(t, (uint64_t)s + 1, recs, N, err, sizeof err);
        ms[s] = 1e3 * (s_now() - t0);
        CHECK_MSG(rc == 0, "%s", err);
        for (int i = 0; i < N; i++) {
            rl_traj_record_clear(&recs[i]);
        }
    }
    free(recs);
    qsort(ms, STEPS, sizeof ms[0], s_cmp_d);
    fprintf(stderr, "put_step, 128 records of 9+30..50 tokens, synced: median %.3f ms, "
                    "min %.3f, max %.3f\n", ms[STEPS / 2], ms[0], ms[STEPS - 1]);
    CHECK_MSG(ms[STEPS / 2] < 250.0, "median put %.1f ms", ms[STEPS / 2]);
    double t0 = s_now();
    rl_traj_record_t *got = NULL;
    int n = 0;
    CHECK_INT(rl_traj_read_step(t, STEPS / 2, &got, &n, err, sizeof err), 0);
    fprintf(stderr, "read_step of %d records: %.3f ms\n", n, 1e3 * (s_now() - t0));
    rl_traj_records_free(&got, n);
    rl_traj_close(&t);
}

// The evaluations' table: its records beside the steps', step 0 allowed, no step bookkeeping;
// truncate_after drops evaluations after its step too; a read-only open reads them.
static void test_eval_table(void) {
    char path[128], err[512];
    s_path(path, sizeof path, "eval_store");
    rl_traj_t *t = NULL;
    CHECK_INT(rl_traj_open(path, 0, &t, err, sizeof err), 0);
    RL_ASSERT(t);
    CHECK_INT(s_put(t, 1, 0, 2, 4, 5, 0), 0); // a step: 8 records
    rl_traj_use_eval(t, 1);
    CHECK_INT(s_put(t, 0, 0, 3, 2, 4, 0), 0); // evaluations before training, after 1 and 2
    CHECK_INT(s_put(t, 1, 0, 3, 2, 4, 0), 0);
    CHECK_INT(s_put(t, 2, 0, 3, 2, 4, 0), 0);
    s_check_steps(t, (const uint64_t[]){0, 1, 2}, 3);
    rl_traj_use_eval(t, 0);
    CHECK_INT((int)rl_traj_last_step(t), 1); // evaluations move no step
    s_check_steps(t, (const uint64_t[]){1}, 1);
    CHECK_INT(rl_traj_truncate_after(t, 1, err, sizeof err), 0);
    rl_traj_use_eval(t, 1);
    s_check_steps(t, (const uint64_t[]){0, 1}, 2);
    rl_traj_close(&t);
    CHECK_INT(rl_traj_open(path, RL_TRAJ_READONLY, &t, err, sizeof err), 0);
    RL_ASSERT(t);
    rl_traj_use_eval(t, 1);
    rl_traj_record_t *recs = NULL;
    int n = 0;
    CHECK_INT(rl_traj_read_step(t, 1, &recs, &n, err, sizeof err), 0);
    CHECK_INT(n, 6);
    rl_traj_records_free(&recs, n);
    rl_traj_close(&t);
}

// ---- damage ---------------------------------------------------------------------------------

enum { D_STEPS = 12, D_PER = 16, D_NC = 40 }; // 3 records of ~1.2 KB a page: 64 leaves

// Steps 1..11 whole, step 12 pending, evaluations after steps 0 and 6.
static void s_damage_store(const char *path) {
    char err[512];
    rl_traj_t *t = NULL;
    CHECK_INT(rl_traj_open(path, 0, &t, err, sizeof err), 0);
    RL_ASSERT(t);
    for (uint64_t s = 1; s < D_STEPS; s++) {
        CHECK_INT(s_put(t, s, 0, 4, 4, D_NC, 1), 0);
    }
    rl_traj_record_t recs[D_PER];
    for (int i = 0; i < D_PER; i++) {
        recs[i] = s_make(D_STEPS, (uint32_t)(i / 4), (uint32_t)(i % 4), 9, D_NC, 1);
    }
    CHECK_INT(rl_traj_put_pending(t, D_STEPS, recs, D_PER, err, sizeof err), 0);
    for (int i = 0; i < D_PER; i++) {
        rl_traj_record_clear(&recs[i]);
    }
    rl_traj_use_eval(t, 1);
    CHECK_INT(s_put(t, 0, 0, 2, 2, 10, 0), 0);
    CHECK_INT(s_put(t, 6, 0, 2, 2, 10, 0), 0);
    rl_traj_close(&t);
}

static void s_copy_store(const char *from, const char *to) {
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s' '%s'.* && cp -r '%s' '%s'", to, to, from, to);
    RL_ASSERT(system(cmd) == 0);
}

// After a salvage: the store checks whole, every record it holds is the one written under its
// key, `kept` of them; meta's steps and the evaluations are back.
static void s_check_salvaged(const char *path, uint64_t kept) {
    char err[512];
    rl_traj_check_t c;
    CHECK_INT(rl_traj_check(path, 0, NULL, &c, err, sizeof err), 0);
    CHECK_INT(c.records, kept);
    CHECK_INT(c.last_step, D_STEPS - 1);
    CHECK_INT(c.pending_step, D_STEPS);
    CHECK_INT(c.evals, 8);
    rl_traj_t *t = NULL;
    CHECK_INT(rl_traj_open(path, RL_TRAJ_READONLY, &t, err, sizeof err), 0);
    RL_ASSERT(t);
    uint64_t n_all = 0;
    for (uint64_t s = 1; s <= D_STEPS; s++) {
        rl_traj_record_t *recs = NULL;
        int n = 0;
        CHECK_INT(rl_traj_read_step(t, s, &recs, &n, err, sizeof err), 0);
        for (int i = 0; i < n; i++) {
            rl_traj_record_t want = s_make(s, recs[i].prompt_index, recs[i].sample_index, 9,
                                           D_NC, 1);
            CHECK_MSG(s_equal(&recs[i], &want), "salvaged step %llu record %d",
                      (unsigned long long)s, i);
            rl_traj_record_clear(&want);
        }
        n_all += (uint64_t)n;
        rl_traj_records_free(&recs, n);
    }
    CHECK_INT(n_all, kept);
    CHECK_INT(rl_traj_pending_step(t), D_STEPS);
    rl_traj_use_eval(t, 1);
    s_check_steps(t, (const uint64_t[]){0, 6}, 2);
    s_check_step(t, 6, 0, 2, 2, 10, 0);
    rl_traj_close(&t);
}

static void test_damage(void) {
    char whole[128], path[128], err[1024];
    s_path(whole, sizeof whole, "whole");
    s_path(path, sizeof path, "damaged");
    s_damage_store(whole);
    rl_traj_check_t c;
    CHECK_INT(rl_traj_check(whole, 0, NULL, &c, err, sizeof err), 0);
    CHECK_INT(c.records, D_STEPS * D_PER);
    CHECK_INT(c.steps, D_STEPS);
    CHECK_INT(c.evals, 8);
    CHECK_INT(c.last_step, D_STEPS - 1);
    CHECK_INT(c.pending_step, D_STEPS);
    CHECK(c.bytes > 96 * 4096);
    fprintf(stderr, "check of %llu bytes: %.4f s\n", (unsigned long long)c.bytes, c.seconds);
    volatile sig_atomic_t stop = 1;
    CHECK_INT(rl_traj_check(whole, 0, &stop, &c, err, sizeof err), RL_ECANCELED);
    CHECK_INT(rl_traj_check(whole, 1e-9, NULL, &c, err, sizeof err), RL_ETIMEOUT);
    CHECK_CONTAINS(err, "did not finish within");
    CHECK_INT(rl_traj_check(s_dir, 0, NULL, &c, err, sizeof err), ENOENT);

    // a leaf page zeroed (a block the disk lost): liblmdb asserts on it when a cursor moves
    // there; the check names the store and the last record before it
    s_copy_store(whole, path);
    int lost = 0;
    CHECK(rl_test_traj_zero_leaf(path, &lost, NULL) > 0);
    CHECK_MSG(lost >= 1 && lost <= 3, "the leaf held %d records", lost);
    CHECK_INT(rl_traj_check(path, 0, NULL, &c, err, sizeof err), RL_EPROTO);
    CHECK_CONTAINS(err, path);
    CHECK_CONTAINS(err, "is damaged");
    CHECK_CONTAINS(err, "table traj, after record (step ");
    fprintf(stderr, "zeroed leaf: %s\n", err);
    rl_traj_salvage_t sv;
    CHECK_INT(rl_traj_salvage(path, &sv, err, sizeof err), 0);
    CHECK_INT(sv.counted, D_STEPS * D_PER);
    CHECK_INT(sv.kept, D_STEPS * D_PER - lost);
    CHECK_INT(sv.kept_eval, 8);
    CHECK_INT(sv.counted_eval, 8);
    CHECK_INT(sv.gaps, 1);
    CHECK_CONTAINS(sv.gap[0], "could not be reached");
    fprintf(stderr, "salvage: %s (%d children)\n", sv.gap[0], sv.children);
    char aside_data[4300];
    snprintf(aside_data, sizeof aside_data, "%s/data.mdb", sv.aside);
    CHECK_MSG(strncmp(sv.aside, path, strlen(path)) == 0 && strstr(sv.aside, ".damaged-") &&
              access(aside_data, F_OK) == 0, "the old store: %s", sv.aside);
    s_check_salvaged(path, D_STEPS * D_PER - (uint64_t)lost);
    // the one moved aside is still the damaged one
    CHECK_INT(rl_traj_check(sv.aside, 0, NULL, &c, err, sizeof err), RL_EPROTO);

    // a branch naming a page past the end of the file: LMDB's MDB_PAGE_NOTFOUND, named
    s_copy_store(whole, path);
    CHECK(rl_test_traj_lose_leaf(path, &lost) > 0);
    CHECK_INT(rl_traj_check(path, 0, NULL, &c, err, sizeof err), RL_EPROTO);
    CHECK_CONTAINS(err, "MDB_PAGE_NOTFOUND");
    CHECK_INT(rl_traj_salvage(path, &sv, err, sizeof err), 0);
    CHECK_INT(sv.kept, D_STEPS * D_PER - lost);
    s_check_salvaged(path, D_STEPS * D_PER - (uint64_t)lost);
}

// A reader that dies inside a read transaction while the run has the store open (`rlctl traj`
// killed, or stopped by a damaged page) leaves its slot in lock.mdb; the writer's next step
// frees it (else the pages freed after its snapshot are never reused).
static void test_dead_reader(void) {
    char path[128], err[512];
    s_path(path, sizeof path, "readers");
    rl_traj_t *t = NULL;
    CHECK_INT(rl_traj_open(path, 0, &t, err, sizeof err), 0);
    CHECK_INT(s_put(t, 1, 0, 1, 2, 5, 0), 0);
    int fd[2];
    RL_ASSERT(pipe(fd) == 0);
    pid_t pid = fork();
    if (pid == 0) {
        MDB_env *env;
        MDB_txn *txn;
        if (mdb_env_create(&env) || mdb_env_set_maxdbs(env, 3) ||
            mdb_env_open(env, path, MDB_RDONLY, 0) ||
            mdb_txn_begin(env, NULL, MDB_RDONLY, &txn)) {
            _exit(1);
        }
        (void)!write(fd[1], "r", 1);
        pause();
        _exit(0);
    }
    char c = 0;
    CHECK_INT(read(fd[0], &c, 1), 1);
    close(fd[0]);
    close(fd[1]);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    CHECK_INT(s_put(t, 2, 0, 1, 2, 5, 0), 0);
    // counted from another process: a second environment of this one would take the lock file
    // as its first user and clear the table itself
    pid = fork();
    if (pid == 0) {
        MDB_env *env;
        int dead = 100;
        if (mdb_env_create(&env) || mdb_env_set_maxdbs(env, 3) ||
            mdb_env_open(env, path, MDB_RDONLY, 0) || mdb_reader_check(env, &dead)) {
            _exit(100);
        }
        _exit(dead);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    CHECK_MSG(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%d dead readers left after a step was "
              "written", WIFEXITED(st) ? WEXITSTATUS(st) : -1);
    rl_traj_close(&t);
}

// Steps of 64 records of 200 tokens into `path` until a put fails; its code and message.
static int s_fill_until_full(const char *path, char *err, size_t err_len) {
    rl_traj_t *t = NULL;
    int rc = rl_traj_open(path, 0, &t, err, err_len);
    for (uint64_t s = 1; !rc && s <= 200; s++) {
        rl_traj_record_t recs[64];
        for (int i = 0; i < 64; i++) {
            recs[i] = s_make(s, (uint32_t)(i / 8), (uint32_t)(i % 8), 9, 200, 1);
        }
        rc = rl_traj_put_step(t, s, recs, 64, err, err_len);
        for (int i = 0; i < 64; i++) {
            rl_traj_record_clear(&recs[i]);
        }
    }
    rl_traj_close(&t);
    return rc;
}

// A full disk says so and names the file: really (a 1 MiB tmpfs mounted in a user and mount
// namespace of a child process), and through RLCTL_FAULT=traj_enospc (ENOSPC at a commit), which
// is all that can be done where no namespace can be made.
static void test_disk_full(const char *self) {
    char path[128], err[1024], cmd[4400];
    s_path(path, sizeof path, "enospc");
    // RLCTL_FAULT is read once per process: the injected case runs in a process of its own
    snprintf(cmd, sizeof cmd, "RLCTL_FAULT=traj_enospc@3 '%s' --enospc '%s'", self, path);
    static char out[4096];
    int rc = rl_test_shell(cmd, out, sizeof out);
    CHECK_MSG(rc == 0, "the injected ENOSPC: exit %d: %s", rc, out);
    char want[256];
    snprintf(want, sizeof want, "%s/data.mdb: step 2: disk full (", path);
    CHECK_CONTAINS(out, want);
    CHECK(strstr(out, "nput/output") == NULL);

    int fd[2];
    RL_ASSERT(pipe(fd) == 0);
    char mnt[128];
    s_path(mnt, sizeof mnt, "tmpfs");
    RL_ASSERT(mkdir(mnt, 0700) == 0);
    uid_t uid = geteuid();
    gid_t gid = getegid();
    pid_t pid = fork();
    if (pid == 0) {
        close(fd[0]);
        char map[64];
        if (unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0) {
            _exit(77);
        }
        FILE *f = fopen("/proc/self/setgroups", "w");
        if (f) {
            fputs("deny", f);
            fclose(f);
        }
        snprintf(map, sizeof map, "0 %u 1", (unsigned)uid);
        f = fopen("/proc/self/uid_map", "w");
        int ok = f && fputs(map, f) >= 0;
        ok = f && fclose(f) == 0 && ok;
        snprintf(map, sizeof map, "0 %u 1", (unsigned)gid);
        f = fopen("/proc/self/gid_map", "w");
        ok = ok && f && fputs(map, f) >= 0;
        ok = f && fclose(f) == 0 && ok;
        if (!ok || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0 ||
            mount("tmpfs", mnt, "tmpfs", 0, "size=1m") != 0) {
            _exit(77);
        }
        char store[192];
        snprintf(store, sizeof store, "%s/store", mnt);
        int full = s_fill_until_full(store, err, sizeof err);
        (void)!write(fd[1], err, strlen(err));
        _exit(full == ENOSPC ? 0 : 1);
    }
    close(fd[1]);
    char msg[1024] = "";
    ssize_t got = read(fd[0], msg, sizeof msg - 1);
    msg[got > 0 ? got : 0] = '\0';
    close(fd[0]);
    int st = 0;
    waitpid(pid, &st, 0);
    if (WIFEXITED(st) && WEXITSTATUS(st) == 77) {
        printf("test_disk_full: no user and mount namespace here: the real full disk is "
               "skipped (RLCTL_FAULT=traj_enospc was tested)\n");
        return;
    }
    CHECK_MSG(WIFEXITED(st) && WEXITSTATUS(st) == 0, "a full tmpfs: status %d: %s", st, msg);
    snprintf(want, sizeof want, "%s/store/data.mdb: step ", mnt);
    CHECK_CONTAINS(msg, want);
    CHECK_CONTAINS(msg, "disk full (");
    fprintf(stderr, "a full tmpfs: %s\n", msg);
}

// With RLCTL_FAULT=traj_enospc@3 (test_disk_full): step 1 is written, step 2's commit fails
// with ENOSPC and leaves nothing of it, and step 2 then goes in. Prints step 2's error; exits 0
// when all that held.
static int s_enospc_child(const char *path) {
    char err[1024];
    rl_traj_t *t = NULL;
    int ok = rl_traj_open(path, 0, &t, err, sizeof err) == 0 && s_put(t, 1, 0, 1, 2, 5, 0) == 0;
    rl_traj_record_t r = s_make(2, 0, 0, 9, 5, 0);
    ok = ok && rl_traj_put_step(t, 2, &r, 1, err, sizeof err) == ENOSPC;
    printf("%s\n", err);
    ok = ok && rl_traj_last_step(t) == 1 && rl_traj_put_step(t, 2, &r, 1, err, sizeof err) == 0;
    rl_traj_record_clear(&r);
    rl_traj_close(&t);
    return ok ? 0 : 1;
}

int main(int argc, char **argv) {
    if (argc == 3 && strcmp(argv[1], "--enospc") == 0) {
        return s_enospc_child(argv[2]);
    }
    char self[4096];
    ssize_t n_self = readlink("/proc/self/exe", self, sizeof self - 1);
    RL_TEST_ASSERT_FILE(n_self > 0, "/proc/self/exe");
    self[n_self] = '\0';
    rl_test_tmpdir(s_dir, sizeof s_dir, "traj");
    RL_TEST_RUN(test_codec);
    RL_TEST_RUN(test_malformed);
    RL_TEST_RUN(test_store);
    RL_TEST_RUN(test_growth);
    RL_TEST_RUN(test_corrupt);
    RL_TEST_RUN(test_put_time);
    RL_TEST_RUN(test_eval_table);
    RL_TEST_RUN(test_damage);
    RL_TEST_RUN(test_dead_reader);
    RL_TEST_RUN(test_disk_full, self);
    rl_test_tmpdir_done(s_dir);
    RL_TEST_DONE();
}
