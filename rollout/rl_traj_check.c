// rl_traj_check — the trajectory store's damage check and its salvage (rl_traj.h, "damage";
// docs/trajectories.md, "A damaged store"). LMDB has no checksums and believes its pages, so a
// damaged page is found only by reading it, and reading it may crash the reader. Every read of
// the store here is done by a forked child that opens the environment itself (read-only) and
// ends with _exit; the parent never maps the file. What the child finds goes into a page the
// two share (its progress, its counts, a message); the salvage's children also send the bytes
// of each record through a pipe, which the parent decodes. A child that dies of a signal, exits
// without a result (a sanitizer's report) or stops on an LMDB error has found damage, and the
// page says where it was.
#define _DEFAULT_SOURCE // MAP_ANONYMOUS
#include "rl_traj.h"

#include "rl_err.h"
#include "rl_lmdb.h"
#include "rl_mpack.h"

#include <errno.h>
#include <fcntl.h>
#include <lmdb.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define S_KEY 16                    // a record's key: u64 step, u32 prompt, u32 sample (BE)
#define S_STALL 60.0                // salvage: a child that reads nothing for this long is
                                    // stuck (a damaged page that loops) and is killed
#define S_MAX_CHILDREN 20000        // salvage: children per table before giving up on the rest
#define S_FRAME_MAX ((size_t)64 << 20) // a record: at most 2^20 + 2^20 tokens, about 33 MB
#define S_FIRST_META 2              // LMDB's two meta pages come first; free pages after them

enum { S_T_FREE, S_T_META, S_T_TRAJ, S_T_EVAL, S_T_COUNT };
static const char *const s_table[S_T_COUNT] = {"free list", "meta", "traj", "eval"};

enum { S_RUNNING, S_OK, S_DAMAGED, S_ERROR };

// A key as the child saw it: its first 32 bytes and its length.
typedef struct {
    uint8_t b[32];
    uint32_t len;
    int set;
} s_key_t;

// The page a child shares with its parent (MAP_SHARED). The child writes, the parent reads
// after the child has ended.
typedef struct {
    int state;                    // S_RUNNING until the child has a result
    int code;                     // S_ERROR: the error code
    int table;                    // the table being read
    s_key_t at;                   // the last key reached (its record not read whole yet)
    s_key_t done;                 // the last key whose record was read whole
    uint64_t progress;            // bumped for every entry read (the salvage's stall watch)
    uint64_t n[S_T_COUNT];        // entries read (free list: page numbers)
    uint64_t counted[S_T_COUNT];  // LMDB's own count of each table's entries, or UINT64_MAX
    uint64_t steps, max_step;     // traj: distinct steps, the largest
    uint64_t last_step, pending_step;
    int has_meta;                 // last_step / pending_step were read
    int opened;                   // the environment opened and its tables were found
    char msg[1024];
} s_shared_t;

static s_shared_t *s_sh; // the child's page, for s_on_assert

// ---- keys -----------------------------------------------------------------------------------

static void s_key_set(s_key_t *dst, const MDB_val *k) {
    dst->len = (uint32_t)k->mv_size;
    memcpy(dst->b, k->mv_data, k->mv_size < sizeof dst->b ? k->mv_size : sizeof dst->b);
    dst->set = 1;
}

static uint64_t s_be(const uint8_t *p, int n) {
    uint64_t x = 0;
    for (int i = 0; i < n; i++) {
        x = x << 8 | p[i];
    }
    return x;
}

// "step S, prompt P, sample I", or "a key of N bytes" when it is not a record's key.
static void s_key_name(const s_key_t *k, char *out, size_t cap) {
    if (!k->set) {
        snprintf(out, cap, "none");
    } else if (k->len == S_KEY) {
        snprintf(out, cap, "step %llu, prompt %u, sample %u",
                 (unsigned long long)s_be(k->b, 8), (unsigned)s_be(k->b + 8, 4),
                 (unsigned)s_be(k->b + 12, 4));
    } else {
        snprintf(out, cap, "a key of %u bytes", (unsigned)k->len);
    }
}

// memcmp order of two keys (LMDB's default), on their first 32 bytes: keys of records are 16.
static int s_key_cmp(const s_key_t *a, const s_key_t *b) {
    uint32_t la = a->len < 32 ? a->len : 32, lb = b->len < 32 ? b->len : 32;
    int c = memcmp(a->b, b->b, la < lb ? la : lb);
    return c ? c : (la > lb) - (la < lb);
}

// Positions in the space of 16-byte keys, as a 128-bit number (hi, lo).
typedef struct {
    uint64_t hi, lo;
} s_pos_t;

static s_pos_t s_pos_of(const uint8_t b[S_KEY]) {
    s_pos_t p = {s_be(b, 8), s_be(b + 8, 8)};
    return p;
}

static void s_pos_bytes(s_pos_t p, uint8_t b[S_KEY]) {
    for (int i = 0; i < 8; i++) {
        b[i] = (uint8_t)(p.hi >> (56 - 8 * i));
        b[8 + i] = (uint8_t)(p.lo >> (56 - 8 * i));
    }
}

// a + 2^e; 0 when it passes the last key.
static int s_pos_add(s_pos_t a, int e, s_pos_t *out) {
    s_pos_t r = a;
    if (e < 64) {
        r.lo = a.lo + ((uint64_t)1 << e);
        if (r.lo < a.lo && ++r.hi == 0) {
            return 0;
        }
    } else {
        r.hi = a.hi + ((uint64_t)1 << (e - 64));
        if (r.hi < a.hi) {
            return 0;
        }
    }
    *out = r;
    return 1;
}

// The smallest 16-byte key after k: k's first 16 bytes padded with zeros when k is shorter
// (k is then a prefix of it), else plus one. 0 when none is (k is the last key).
static int s_key_after(const s_key_t *k, s_pos_t *out) {
    uint8_t b[S_KEY] = {0};
    memcpy(b, k->b, k->len < S_KEY ? k->len : S_KEY);
    s_pos_t p = s_pos_of(b);
    if (k->len < S_KEY) {
        *out = p;
        return 1;
    }
    return s_pos_add(p, 0, out);
}

// ---- the child's side -----------------------------------------------------------------------

// liblmdb's assertions (a page of the wrong kind where it expects a leaf, ...) call this instead
// of printing; the child ends here, its page saying why.
static void s_where(const s_shared_t *sh, char *out, size_t cap);

static void s_on_assert(MDB_env *env, const char *msg) {
    (void)env;
    if (s_sh) {
        char where[160];
        s_where(s_sh, where, sizeof where);
        snprintf(s_sh->msg, sizeof s_sh->msg, "%s: liblmdb stopped on an assertion: %s", where,
                 msg);
        s_sh->state = S_DAMAGED;
    }
    _exit(3);
}

static void s_found(s_shared_t *sh, int state, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

// Records the child's result: S_DAMAGED or S_ERROR with a message, or S_OK.
static void s_found(s_shared_t *sh, int state, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(sh->msg, sizeof sh->msg, fmt, ap);
    va_end(ap);
    sh->state = state;
}

// Where the child was, for a message: "table traj, after record (step 3, prompt 1, sample 2)".
static void s_where(const s_shared_t *sh, char *out, size_t cap) {
    char k[96];
    if (sh->at.set && (!sh->done.set || s_key_cmp(&sh->at, &sh->done) != 0)) {
        s_key_name(&sh->at, k, sizeof k);
        snprintf(out, cap, "table %s, record (%s)", s_table[sh->table], k);
    } else if (sh->done.set) {
        s_key_name(&sh->done, k, sizeof k);
        snprintf(out, cap, "table %s, after record (%s)", s_table[sh->table], k);
    } else {
        snprintf(out, cap, "table %s, before its first entry", s_table[sh->table]);
    }
}

static void s_mdb_found(s_shared_t *sh, int rc, const char *what) {
    char where[160];
    s_where(sh, where, sizeof where);
    s_found(sh, S_DAMAGED, "%s: %s: %s", where, what, mdb_strerror(rc));
}

typedef struct {
    MDB_env *env;
    MDB_txn *txn;
    MDB_dbi dbi[S_T_COUNT];
    int has_eval;
    size_t last_pgno;
} s_env_t;

// Opens the environment read-only and begins a read transaction; the databases that must be
// there are opened. On failure the page holds why (S_DAMAGED or S_ERROR) and 0 is returned.
static int s_open(const char *path, s_shared_t *sh, s_env_t *e) {
    memset(e, 0, sizeof *e);
    int rc = mdb_env_create(&e->env);
    if (!rc) {
        rc = mdb_env_set_maxdbs(e->env, 3);
    }
    if (!rc) {
        rc = mdb_env_set_assert(e->env, s_on_assert);
    }
    if (rc) {
        s_found(sh, S_ERROR, "%s", mdb_strerror(rc));
        sh->code = rl_lmdb_code(rc);
        return 0;
    }
    rc = mdb_env_open(e->env, path, MDB_RDONLY, 0);
    if (rc == MDB_INVALID) { // neither meta page is one: the first two pages are damaged
        s_found(sh, S_DAMAGED, "its meta pages (the first two) are not LMDB's: %s",
                mdb_strerror(rc));
        return 0;
    }
    if (rc) {
        s_found(sh, S_ERROR, "cannot open it: %s", mdb_strerror(rc));
        sh->code = rc == MDB_VERSION_MISMATCH ? RL_EVERSION : rl_lmdb_code(rc);
        return 0;
    }
    rc = mdb_txn_begin(e->env, NULL, MDB_RDONLY, &e->txn);
    for (int tries = 0; rc == MDB_MAP_RESIZED && tries < 4; tries++) { // a writer grew the map
        rc = mdb_env_set_mapsize(e->env, 0);
        if (!rc) {
            rc = mdb_txn_begin(e->env, NULL, MDB_RDONLY, &e->txn);
        }
    }
    if (rc) {
        s_found(sh, S_ERROR, "cannot begin a read: %s", mdb_strerror(rc));
        sh->code = rl_lmdb_code(rc);
        return 0;
    }
    MDB_envinfo info;
    mdb_env_info(e->env, &info);
    e->last_pgno = info.me_last_pgno;
    e->dbi[S_T_FREE] = 0; // LMDB's free list is database 0; read-only cursors may walk it
    sh->table = S_T_META;
    rc = mdb_dbi_open(e->txn, "traj", 0, &e->dbi[S_T_TRAJ]);
    if (!rc) {
        rc = mdb_dbi_open(e->txn, "meta", 0, &e->dbi[S_T_META]);
    }
    if (rc) {
        s_found(sh, S_DAMAGED, "its 'traj' and 'meta' databases cannot be opened (a damaged main "
                "page, or not a trajectory store): %s", mdb_strerror(rc));
        return 0;
    }
    e->has_eval = mdb_dbi_open(e->txn, "eval", 0, &e->dbi[S_T_EVAL]) == 0;
    sh->opened = 1;
    return 1;
}

// LMDB's count of a table's entries (the database record's), or UINT64_MAX.
static uint64_t s_counted(MDB_txn *txn, MDB_dbi dbi) {
    MDB_stat st;
    return mdb_stat(txn, dbi, &st) == 0 ? (uint64_t)st.ms_entries : UINT64_MAX;
}

// A meta value: one msgpack uint and nothing after it.
static int s_meta_uint(const MDB_val *v, uint64_t *out) {
    rl_mpack_t r;
    rl_mpack_init(&r, v->mv_data, v->mv_size, 0);
    return rl_mpack_read_uint(&r, UINT64_MAX, out) == 0 && rl_mpack_left(&r) == 0;
}

// meta: every value a msgpack uint, schema_version present and ours. 0 on damage (recorded).
static int s_walk_meta(s_env_t *e, s_shared_t *sh) {
    MDB_cursor *c;
    MDB_val k, v;
    int has_schema = 0;
    sh->table = S_T_META;
    int rc = mdb_cursor_open(e->txn, e->dbi[S_T_META], &c);
    for (rc = rc ? rc : mdb_cursor_get(c, &k, &v, MDB_FIRST); rc == 0;
         rc = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
        sh->progress++;
        char name[40];
        snprintf(name, sizeof name, "%.*s", (int)(k.mv_size < 32 ? k.mv_size : 32),
                 (const char *)k.mv_data);
        uint64_t x;
        if (!s_meta_uint(&v, &x)) {
            s_found(sh, S_DAMAGED, "table meta, key '%s': not a msgpack uint", name);
            return 0;
        }
        if (strcmp(name, "schema_version") == 0 && k.mv_size == 14) {
            if (x != RL_TRAJ_SCHEMA_VERSION) {
                s_found(sh, S_ERROR, "schema version %llu, this build reads version %d",
                        (unsigned long long)x, RL_TRAJ_SCHEMA_VERSION);
                sh->code = RL_EVERSION;
                return 0;
            }
            has_schema = 1;
        } else if (strcmp(name, "last_step") == 0 && k.mv_size == 9) {
            sh->last_step = x;
        } else if (strcmp(name, "pending_step") == 0 && k.mv_size == 12) {
            sh->pending_step = x;
        }
        sh->n[S_T_META]++;
    }
    if (rc != MDB_NOTFOUND) {
        s_mdb_found(sh, rc, "reading");
        return 0;
    }
    mdb_cursor_close(c);
    if (!has_schema) {
        s_found(sh, S_DAMAGED, "table meta has no schema_version");
        return 0;
    }
    sh->has_meta = 1;
    return 1;
}

// traj or eval: 16-byte keys in order, each record decoded and equal to its key, as many as
// LMDB counts. 0 on damage (recorded).
static int s_walk_records(s_env_t *e, int t, s_shared_t *sh) {
    MDB_cursor *c;
    MDB_val k, v;
    sh->table = t;
    sh->at.set = sh->done.set = 0;
    int rc = mdb_cursor_open(e->txn, e->dbi[t], &c);
    for (rc = rc ? rc : mdb_cursor_get(c, &k, &v, MDB_FIRST); rc == 0;
         rc = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
        char where[160], why[256];
        s_key_set(&sh->at, &k);
        sh->progress++;
        s_where(sh, where, sizeof where);
        if (k.mv_size != S_KEY) {
            s_found(sh, S_DAMAGED, "%s: a key must be 16 bytes", where);
            return 0;
        }
        if (sh->done.set && s_key_cmp(&sh->at, &sh->done) <= 0) {
            char prev[96];
            s_key_name(&sh->done, prev, sizeof prev);
            s_found(sh, S_DAMAGED, "%s: comes after (%s): keys out of order", where, prev);
            return 0;
        }
        rl_traj_record_t rec;
        if (rl_traj_decode(v.mv_data, v.mv_size, &rec, why, sizeof why) != 0) {
            s_found(sh, S_DAMAGED, "%s: %s", where, why);
            return 0;
        }
        uint64_t step = s_be(k.mv_data, 8);
        int same = rec.step == step && rec.prompt_index == s_be((uint8_t *)k.mv_data + 8, 4) &&
                   rec.sample_index == s_be((uint8_t *)k.mv_data + 12, 4);
        rl_traj_record_clear(&rec);
        if (!same) {
            s_found(sh, S_DAMAGED, "%s: its fields name another key", where);
            return 0;
        }
        if (t == S_T_TRAJ && (sh->n[t] == 0 || step != sh->max_step)) {
            sh->steps++;
            sh->max_step = step;
        }
        sh->done = sh->at;
        sh->n[t]++;
    }
    if (rc != MDB_NOTFOUND) {
        s_mdb_found(sh, rc, "moving to the next record");
        return 0;
    }
    mdb_cursor_close(c);
    sh->counted[t] = s_counted(e->txn, e->dbi[t]);
    if (sh->counted[t] != sh->n[t]) {
        s_found(sh, S_DAMAGED, "table %s: LMDB counts %llu records, a walk finds %llu",
                s_table[t], (unsigned long long)sh->counted[t], (unsigned long long)sh->n[t]);
        return 0;
    }
    return 1;
}

// LMDB's free list: keys are transaction ids, values lists of page numbers (a count, then the
// numbers), each a page of the file that is not a meta page. A writer takes pages from it, so a
// damaged one would be written over live data. 0 on damage (recorded).
static int s_walk_free(s_env_t *e, s_shared_t *sh) {
    MDB_cursor *c;
    MDB_val k, v;
    sh->table = S_T_FREE;
    sh->at.set = sh->done.set = 0;
    int rc = mdb_cursor_open(e->txn, e->dbi[S_T_FREE], &c);
    for (rc = rc ? rc : mdb_cursor_get(c, &k, &v, MDB_FIRST); rc == 0;
         rc = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
        sh->progress++;
        size_t w = sizeof(size_t), n = 0;
        if (v.mv_size >= w) {
            memcpy(&n, v.mv_data, w);
        }
        if (k.mv_size != w || v.mv_size < w || v.mv_size % w || n != v.mv_size / w - 1) {
            s_found(sh, S_DAMAGED, "LMDB's free list: an entry of %zu bytes with a key of %zu "
                    "bytes is not a list of page numbers", v.mv_size, k.mv_size);
            return 0;
        }
        for (size_t i = 1; i <= n; i++) {
            size_t pg;
            memcpy(&pg, (const uint8_t *)v.mv_data + i * w, w);
            if (pg < S_FIRST_META || pg > e->last_pgno) {
                s_found(sh, S_DAMAGED, "LMDB's free list names page %zu; the file's pages are "
                        "%d..%zu", pg, S_FIRST_META, e->last_pgno);
                return 0;
            }
        }
        sh->n[S_T_FREE] += n;
    }
    if (rc != MDB_NOTFOUND) {
        s_mdb_found(sh, rc, "reading");
        return 0;
    }
    mdb_cursor_close(c);
    return 1;
}

// The check's child: every table, then meta's steps against the records'.
static void s_check_child(const char *path, s_shared_t *sh) {
    s_env_t e;
    if (!s_open(path, sh, &e) || !s_walk_meta(&e, sh) || !s_walk_records(&e, S_T_TRAJ, sh) ||
        (e.has_eval && !s_walk_records(&e, S_T_EVAL, sh)) || !s_walk_free(&e, sh)) {
        return;
    }
    uint64_t top = sh->last_step > sh->pending_step ? sh->last_step : sh->pending_step;
    if (sh->n[S_T_TRAJ] && sh->max_step > top) {
        s_found(sh, S_DAMAGED, "table traj holds records of step %llu, meta's last step is %llu "
                "(pending %llu)", (unsigned long long)sh->max_step,
                (unsigned long long)sh->last_step, (unsigned long long)sh->pending_step);
        return;
    }
    sh->state = S_OK;
}

// ---- the parent's side ----------------------------------------------------------------------

static double s_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

// Takes the bytes a child sends; returns 0, or an error (the child is then killed).
typedef int (*s_sink_fn)(void *ctx, const uint8_t *buf, size_t len, size_t *used);

typedef struct {
    double timeout;                        // > 0: kill the child after this many seconds
    double stall;                          // > 0: ... or after this long without progress
    const volatile sig_atomic_t *cancel;   // non-zero: kill the child
    s_sink_fn sink;                        // the pipe's bytes (NULL: the child sends none)
    void *ctx;
} s_watch_t;

typedef void (*s_child_fn)(const void *arg, s_shared_t *sh, int fd);

// Runs fn in a child with a fresh shared page; waits for it as `w` says. Returns 0 with
// *status (waitpid's) and *why (0, or RL_ETIMEOUT / RL_ECANCELED when it was killed for that),
// or an error of the parent's own (fork, pipe, the sink's) with err filled.
static int s_run_child(s_child_fn fn, const void *arg, s_shared_t *sh, const s_watch_t *w,
                       int *status, int *why, char *err, size_t err_len) {
    memset(sh, 0, sizeof *sh);
    for (int t = 0; t < S_T_COUNT; t++) {
        sh->counted[t] = UINT64_MAX;
    }
    *why = 0;
    int fd[2];
    if (pipe(fd) != 0) {
        int e = errno;
        return rl_errf(err, err_len, e, "pipe: %s", strerror(e));
    }
    fflush(NULL); // nothing buffered twice
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0) {
        int e = errno;
        close(fd[0]);
        close(fd[1]);
        return rl_errf(err, err_len, e, "fork: %s", strerror(e));
    }
    if (pid == 0) {
        close(fd[0]);
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent) {
            _exit(4);
        }
        signal(SIGPIPE, SIG_DFL);
        s_sh = sh;
        fn(arg, sh, fd[1]);
        _exit(0);
    }
    close(fd[1]);
    int rc = 0;
    uint8_t *buf = NULL;
    size_t have = 0, cap = 0;
    double t0 = s_now(), t_seen = t0;
    uint64_t seen = 0;
    for (;;) {
        double now = s_now();
        if (sh->progress != seen) {
            seen = sh->progress;
            t_seen = now;
        }
        if (w->cancel && *w->cancel) {
            *why = RL_ECANCELED;
        } else if (w->timeout > 0 && now - t0 > w->timeout) {
            *why = RL_ETIMEOUT;
        } else if (w->stall > 0 && now - t_seen > w->stall) {
            *why = RL_ETIMEOUT;
        }
        if (*why) {
            break;
        }
        struct pollfd p = {fd[0], POLLIN, 0};
        int r = poll(&p, 1, 50);
        if (r < 0 && errno != EINTR) {
            rc = rl_errf(err, err_len, errno, "poll: %s", strerror(errno));
            break;
        }
        if (r > 0) {
            if (cap - have < 65536) {
                size_t ncap = cap ? 2 * cap : 1 << 20;
                uint8_t *g = realloc(buf, ncap);
                if (!g) {
                    rc = rl_errf(err, err_len, RL_ENOMEM, "out of memory");
                    break;
                }
                buf = g;
                cap = ncap;
            }
            ssize_t got = read(fd[0], buf + have, cap - have);
            if (got < 0 && errno != EINTR && errno != EAGAIN) {
                rc = rl_errf(err, err_len, errno, "read: %s", strerror(errno));
                break;
            }
            if (got == 0) {
                break; // the child has ended (or closed its end)
            }
            if (got > 0) {
                have += (size_t)got;
                size_t used = 0;
                if (w->sink && (rc = w->sink(w->ctx, buf, have, &used)) != 0) {
                    break;
                }
                if (!w->sink) {
                    used = have;
                }
                memmove(buf, buf + used, have - used);
                have -= used;
            }
        }
    }
    if (rc || *why) {
        kill(pid, SIGKILL);
    }
    close(fd[0]);
    free(buf);
    int st = 0;
    pid_t got;
    while ((got = waitpid(pid, &st, 0)) < 0 && errno == EINTR) {
    }
    *status = got == pid ? st : 0;
    return rc;
}

// How a child that has no result ended: "it was killed by signal 11 (Segmentation fault)".
static void s_death(int status, char *out, size_t cap) {
    if (WIFSIGNALED(status)) {
        snprintf(out, cap, "reading it crashed (signal %d, %s)", WTERMSIG(status),
                 strsignal(WTERMSIG(status)));
    } else if (WIFEXITED(status)) {
        snprintf(out, cap, "reading it stopped without a result (exit status %d)",
                 WEXITSTATUS(status));
    } else {
        snprintf(out, cap, "reading it stopped without a result");
    }
}

static s_shared_t *s_shared_new(void) {
    void *p = mmap(NULL, sizeof(s_shared_t), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                   -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

static void s_shared_free(s_shared_t *sh) {
    if (sh) {
        munmap(sh, sizeof *sh);
    }
}

static void s_check_fn(const void *arg, s_shared_t *sh, int fd) {
    (void)fd;
    s_check_child(arg, sh);
}

// Seconds a check may take when asked for the default (timeout_s < 0): 120 plus 60 a GiB, a
// floor of 17 MB/s, far below a cold disk's read rate (docs/trajectories.md).
static double s_default_timeout(uint64_t bytes) {
    return 120.0 + 60.0 * (double)bytes / (double)(1u << 30);
}

int rl_traj_check(const char *path, double timeout_s, const volatile sig_atomic_t *cancel,
                  rl_traj_check_t *out, char *err, size_t err_len) {
    char data[4200];
    struct stat st;
    if (snprintf(data, sizeof data, "%s/data.mdb", path) >= (int)sizeof data) {
        return rl_errf(err, err_len, RL_EINVAL, "%s: path too long", path);
    }
    if (stat(data, &st) != 0) {
        int e = errno;
        return rl_errf(err, err_len, e, "%s: %s", data, strerror(e));
    }
    s_shared_t *sh = s_shared_new();
    if (!sh) {
        return rl_errf(err, err_len, errno, "%s: cannot map a shared page: %s", path,
                       strerror(errno));
    }
    s_watch_t w = {timeout_s < 0 ? s_default_timeout((uint64_t)st.st_size) : timeout_s, 0,
                   cancel, NULL, NULL};
    int status = 0, why = 0;
    double t0 = s_now();
    char msg[512];
    int rc = s_run_child(s_check_fn, path, sh, &w, &status, &why, msg, sizeof msg);
    double dt = s_now() - t0;
    char where[160];
    s_where(sh, where, sizeof where);
    if (rc) {
        rl_errf(err, err_len, rc, "%s: cannot check it: %s", path, msg);
    } else if (why == RL_ECANCELED) {
        rc = rl_errf(err, err_len, why, "%s: the check was cancelled", path);
    } else if (why == RL_ETIMEOUT) {
        rc = rl_errf(err, err_len, why, "%s: the check did not finish within %.0f s (it was at "
                     "%s; a damaged page can make a walk loop; `rlctl traj check` runs it "
                     "without a limit)", path, w.timeout, where);
    } else if (sh->state == S_OK) {
        if (out) {
            memset(out, 0, sizeof *out);
            out->records = sh->n[S_T_TRAJ];
            out->steps = sh->steps;
            out->evals = sh->n[S_T_EVAL];
            out->free_pages = sh->n[S_T_FREE];
            out->last_step = sh->last_step;
            out->pending_step = sh->pending_step;
            out->bytes = (uint64_t)st.st_size;
            out->seconds = dt;
        }
    } else if (sh->state == S_ERROR) {
        rc = rl_errf(err, err_len, sh->code ? sh->code : RL_EIO, "%s: %s", path, sh->msg);
    } else if (sh->state == S_DAMAGED) {
        rc = rl_errf(err, err_len, RL_EPROTO, "%s is damaged: %s", path, sh->msg);
    } else {
        char death[128];
        s_death(status, death, sizeof death);
        rc = rl_errf(err, err_len, RL_EPROTO, "%s is damaged: %s at %s", path, death, where);
    }
    s_shared_free(sh);
    return rc;
}

// ---- salvage ----------------------------------------------------------------------------------

enum { S_M_META, S_M_WALK, S_M_PROBE };

// What a salvage child does: read meta and the counts, walk a table from a key, or seek once.
typedef struct {
    const char *path;
    int mode;
    int table;
    int first;         // walk from the table's first key (else from `from`)
    uint8_t from[S_KEY];
    s_key_t after;     // keys must come after this one (the parent's last)
} s_job_t;

// A record's bytes in the pipe: this header, the key, the value.
typedef struct {
    uint32_t klen;
    uint32_t vlen;
} s_frame_t;

static int s_write_all(int fd, const void *p, size_t n) {
    const uint8_t *b = p;
    while (n) {
        ssize_t w = write(fd, b, n);
        if (w < 0 && errno == EINTR) {
            continue;
        }
        if (w <= 0) {
            return -1;
        }
        b += w;
        n -= (size_t)w;
    }
    return 0;
}

static void s_salvage_child(const void *arg, s_shared_t *sh, int fd) {
    const s_job_t *job = arg;
    s_env_t e;
    if (!s_open(job->path, sh, &e)) {
        return;
    }
    if (job->mode == S_M_META) {
        sh->counted[S_T_TRAJ] = s_counted(e.txn, e.dbi[S_T_TRAJ]);
        sh->counted[S_T_EVAL] = e.has_eval ? s_counted(e.txn, e.dbi[S_T_EVAL]) : 0;
        if (s_walk_meta(&e, sh)) {
            sh->state = S_OK;
        }
        return;
    }
    sh->table = job->table;
    if (job->table == S_T_EVAL && !e.has_eval) {
        sh->state = S_OK; // a store from before evaluations were kept: none
        return;
    }
    MDB_cursor *c;
    MDB_val k, v;
    uint8_t kb[S_KEY];
    memcpy(kb, job->from, S_KEY);
    k.mv_size = S_KEY;
    k.mv_data = kb;
    s_key_t last = job->after;
    int rc = mdb_cursor_open(e.txn, e.dbi[job->table], &c);
    if (!rc) {
        rc = mdb_cursor_get(c, &k, &v, job->first ? MDB_FIRST : MDB_SET_RANGE);
    }
    uint8_t *buf = NULL;
    size_t cap = 0;
    for (; rc == 0; rc = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
        s_key_set(&sh->at, &k);
        sh->progress++;
        if ((last.set && s_key_cmp(&sh->at, &last) <= 0) ||
            (!job->first && k.mv_size >= S_KEY && memcmp(k.mv_data, job->from, S_KEY) < 0)) {
            s_found(sh, S_DAMAGED, "keys out of order");
            return;
        }
        if (job->mode == S_M_PROBE) {
            sh->state = S_OK; // positioned; the parent walks from here
            return;
        }
        if (k.mv_size > 511 || v.mv_size > S_FRAME_MAX) {
            s_found(sh, S_DAMAGED, "an entry of %zu + %zu bytes", k.mv_size, v.mv_size);
            return; // the parent gives this key up and goes on after it
        }
        size_t n = sizeof(s_frame_t) + k.mv_size + v.mv_size;
        if (n > cap) {
            free(buf);
            cap = n > 2 * cap ? n : 2 * cap;
            if (!(buf = malloc(cap))) {
                s_found(sh, S_ERROR, "out of memory for a record of %zu bytes", v.mv_size);
                sh->code = RL_ENOMEM;
                return;
            }
        }
        s_frame_t h = {(uint32_t)k.mv_size, (uint32_t)v.mv_size};
        memcpy(buf, &h, sizeof h);
        memcpy(buf + sizeof h, k.mv_data, k.mv_size);
        memcpy(buf + sizeof h + k.mv_size, v.mv_data, v.mv_size); // a wild value dies here
        if (s_write_all(fd, buf, n) != 0) {
            s_found(sh, S_ERROR, "cannot send a record: %s", strerror(errno));
            sh->code = RL_EIO;
            return;
        }
        sh->done = sh->at;
        last = sh->at;
        sh->n[job->table]++;
    }
    free(buf);
    if (rc != MDB_NOTFOUND) {
        s_mdb_found(sh, rc, "reading");
        return;
    }
    sh->at.set = 0; // the end: nothing reached past the last record
    sh->state = S_OK;
}

// The parent's salvage: the new store, the step being gathered, what is known of the old one.
typedef struct {
    const char *path;
    rl_traj_t *dst;
    rl_traj_salvage_t *out;
    s_shared_t *sh;
    int table;
    s_key_t last;               // the last key received from a child (for this table)
    int gap_open;               // a gap since `last` waits for the next key to end it
    char gap_from[96];
    rl_traj_record_t *recs;     // the step being gathered
    int n, cap;
    uint64_t step;
    uint64_t max_step;          // the largest traj step written
    int has_meta;
    uint64_t last_step, pending_step;
    char *err;
    size_t err_len;
} s_salv_t;

static void s_note(s_salv_t *sv, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

// One line of what was lost (the first RL_TRAJ_SALVAGE_GAPS are kept).
static void s_note(s_salv_t *sv, const char *fmt, ...) {
    int i = sv->out->gaps++;
    if (i >= RL_TRAJ_SALVAGE_GAPS) {
        return;
    }
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(sv->out->gap[i], sizeof sv->out->gap[i], fmt, ap);
    va_end(ap);
}

// Writes the gathered step to the new store.
static int s_flush(s_salv_t *sv) {
    if (sv->n == 0) {
        return 0;
    }
    int eval = sv->table == S_T_EVAL, rc;
    rl_traj_use_eval(sv->dst, eval);
    if (!eval && sv->has_meta && sv->step == sv->pending_step && sv->step > sv->last_step) {
        rc = rl_traj_put_pending(sv->dst, sv->step, sv->recs, sv->n, sv->err, sv->err_len);
    } else {
        rc = rl_traj_put_step(sv->dst, sv->step, sv->recs, sv->n, sv->err, sv->err_len);
    }
    rl_traj_use_eval(sv->dst, 0);
    if (!rc) {
        if (eval) {
            sv->out->kept_eval += (uint64_t)sv->n;
        } else {
            sv->out->kept += (uint64_t)sv->n;
            sv->max_step = sv->step > sv->max_step ? sv->step : sv->max_step;
        }
    }
    for (int i = 0; i < sv->n; i++) {
        rl_traj_record_clear(&sv->recs[i]);
    }
    sv->n = 0;
    return rc;
}

// Ends an open gap at the key named `name` ("the end" when none).
static void s_gap_close(s_salv_t *sv, const char *name) {
    if (sv->gap_open) {
        s_note(sv, "%s: the records after %s and before %s could not be reached",
               s_table[sv->table], sv->gap_from, name);
        sv->gap_open = 0;
    }
}

// One record from a child: decoded and gathered into its step.
static int s_take(s_salv_t *sv, const uint8_t *key, uint32_t klen, const uint8_t *val,
                  uint32_t vlen) {
    MDB_val k = {klen, (void *)key};
    s_key_set(&sv->last, &k);
    char name[96];
    s_key_name(&sv->last, name, sizeof name);
    char end[112];
    snprintf(end, sizeof end, "(%s)", name);
    s_gap_close(sv, end);
    rl_traj_record_t rec;
    char why[256];
    int bad = klen != S_KEY;
    if (!bad && rl_traj_decode(val, vlen, &rec, why, sizeof why) != 0) {
        s_note(sv, "%s: record (%s): %s", s_table[sv->table], name, why);
        sv->out->unreadable++;
        return 0;
    }
    if (bad) {
        s_note(sv, "%s: %s", s_table[sv->table], name);
        sv->out->unreadable++;
        return 0;
    }
    uint64_t step = s_be(key, 8);
    if (rec.step != step || rec.prompt_index != s_be(key + 8, 4) ||
        rec.sample_index != s_be(key + 12, 4) || (sv->table == S_T_TRAJ && step == 0)) {
        rl_traj_record_clear(&rec);
        s_note(sv, "%s: record (%s): its fields name another key", s_table[sv->table], name);
        sv->out->unreadable++;
        return 0;
    }
    if (sv->n > 0 && step != sv->step) {
        int rc = s_flush(sv);
        if (rc) {
            rl_traj_record_clear(&rec);
            return rc;
        }
    }
    if (sv->n == sv->cap) {
        int ncap = sv->cap ? 2 * sv->cap : 64;
        rl_traj_record_t *g = realloc(sv->recs, (size_t)ncap * sizeof *g);
        if (!g) {
            rl_traj_record_clear(&rec);
            return rl_errf(sv->err, sv->err_len, RL_ENOMEM, "out of memory");
        }
        sv->recs = g;
        sv->cap = ncap;
    }
    sv->recs[sv->n++] = rec;
    sv->step = step;
    return 0;
}

// The pipe's bytes: whole frames are taken, a partial one waits for more.
static int s_sink(void *ctx, const uint8_t *buf, size_t len, size_t *used) {
    s_salv_t *sv = ctx;
    size_t o = 0;
    while (len - o >= sizeof(s_frame_t)) {
        s_frame_t h;
        memcpy(&h, buf + o, sizeof h);
        size_t n = sizeof h + (size_t)h.klen + (size_t)h.vlen;
        if (len - o < n) {
            break;
        }
        int rc = s_take(sv, buf + o + sizeof h, h.klen, buf + o + sizeof h + h.klen, h.vlen);
        if (rc) {
            *used = o;
            return rc;
        }
        o += n;
    }
    *used = o;
    return 0;
}

// Runs one salvage child. Returns 0 with *ok (it reached its end, or positioned: probes), or an
// error of the parent's (the new store's, fork's) with err filled.
static int s_job(s_salv_t *sv, const s_job_t *job, int *ok) {
    s_watch_t w = {0, S_STALL, NULL, job->mode == S_M_WALK ? s_sink : NULL, sv};
    int status = 0, why = 0;
    sv->out->children++;
    int rc = s_run_child(s_salvage_child, job, sv->sh, &w, &status, &why, sv->err, sv->err_len);
    *ok = !rc && !why && sv->sh->state == S_OK;
    if (!rc && sv->sh->state == S_ERROR) { // not damage: it could not read at all
        rc = rl_errf(sv->err, sv->err_len, sv->sh->code ? sv->sh->code : RL_EIO, "%s: %s",
                     sv->path, sv->sh->msg);
    }
    return rc;
}

static int s_probe(s_salv_t *sv, s_pos_t p, int *ok) {
    s_job_t job = {sv->path, S_M_PROBE, sv->table, 0, {0}, sv->last};
    s_pos_bytes(p, job.from);
    return s_job(sv, &job, ok);
}

static s_pos_t s_pos3(uint64_t step, uint32_t prompt, uint32_t sample) {
    s_pos_t p = {step, (uint64_t)prompt << 32 | sample};
    return p;
}

// One field of a key to search along: the step (prompt and sample at their largest), the
// prompt of `step` (sample at its largest), or the sample of (step, prompt).
typedef struct {
    int field;
    uint64_t step;
    uint32_t prompt;
} s_field_t;

static s_pos_t s_field_key(const s_field_t *f, uint64_t x) {
    return f->field == 0   ? s_pos3(x, UINT32_MAX, UINT32_MAX)
           : f->field == 1 ? s_pos3(f->step, (uint32_t)x, UINT32_MAX)
                           : s_pos3(f->step, f->prompt, (uint32_t)x);
}

// The smallest x in [lo, max] whose key (s_field_key) a seek reaches: seeks fail up to the end
// of a damaged page's keys and succeed after it, so this doubles the distance from lo until one
// succeeds, then halves the interval. *found = 0 when none does (or the budget ran out first).
// Returns 0 or an error of the parent's.
static int s_first_ok(s_salv_t *sv, const s_field_t *f, uint64_t lo, uint64_t max, int *budget,
                      int *found, uint64_t *x) {
    int ok, rc;
    *found = 0;
    uint64_t fail = lo, good = 0, d = 1;
    if ((rc = s_probe(sv, s_field_key(f, lo), &ok)) != 0) {
        return rc;
    }
    --*budget;
    if (ok) {
        *found = 1;
        *x = lo;
        return 0;
    }
    for (;;) {
        if (fail == max || *budget <= 0) {
            return 0;
        }
        uint64_t p = max - fail <= d ? max : fail + d;
        if ((rc = s_probe(sv, s_field_key(f, p), &ok)) != 0) {
            return rc;
        }
        --*budget;
        if (ok) {
            good = p;
            break;
        }
        fail = p;
        d = d > UINT64_MAX / 2 ? UINT64_MAX : 2 * d;
    }
    while (good - fail > 1 && *budget > 0) {
        uint64_t m = fail + (good - fail) / 2;
        if ((rc = s_probe(sv, s_field_key(f, m), &ok)) != 0) {
            return rc;
        }
        --*budget;
        if (ok) {
            good = m;
        } else {
            fail = m;
        }
    }
    *found = 1;
    *x = good;
    return 0;
}

// Copies one table (traj or eval) as rl_traj_salvage says. Each round a child walks from the
// table's start or from `from`; when it stops short, either the key it had reached is given up
// (its value could not be read) or, when it died moving, a search for the first key that a seek
// after sv->last reaches: every round starts further on, so the loop ends.
static int s_salvage_table(s_salv_t *sv, int t) {
    sv->table = t;
    sv->last.set = 0;
    sv->gap_open = 0;
    s_job_t job = {sv->path, S_M_WALK, t, 1, {0}, {{0}, 0, 0}};
    s_pos_t from = {0, 0};
    int rc = 0, budget = S_MAX_CHILDREN, ok;
    char name[96];
    for (;;) {
        if (--budget <= 0) {
            break;
        }
        s_key_t before = sv->last;
        job.after = sv->last;
        s_pos_bytes(from, job.from);
        if ((rc = s_job(sv, &job, &ok)) != 0) {
            return rc;
        }
        if (ok) {
            s_gap_close(sv, "the end");
            return s_flush(sv);
        }
        int was_first = job.first;
        job.first = 0;
        int moved = before.set != sv->last.set ||
                    (before.set && s_key_cmp(&before, &sv->last) != 0);
        const s_key_t *at = &sv->sh->at;
        if (at->set && (!sv->last.set || s_key_cmp(at, &sv->last) > 0)) {
            // it reached a key whose record it could not read: give that one up
            s_key_name(at, name, sizeof name);
            char end[112];
            snprintf(end, sizeof end, "(%s)", name);
            s_gap_close(sv, end);
            s_note(sv, "%s: record (%s): %s", s_table[t], name,
                   sv->sh->state == S_DAMAGED ? sv->sh->msg : "reading it crashed");
            sv->out->unreadable++;
            sv->last = *at;
            if (!s_key_after(at, &from)) {
                break;
            }
            continue;
        }
        // it died moving on: find the first key after sv->last that a seek reaches
        s_pos_t fail = from;
        if (moved || was_first) { // a seek just after sv->last has not failed yet: try it
            if (sv->last.set && !s_key_after(&sv->last, &fail)) {
                break;
            }
            if (!sv->last.set) {
                fail.hi = fail.lo = 0;
            }
            if ((rc = s_probe(sv, fail, &ok)) != 0) {
                return rc;
            }
            budget--;
            if (ok) {
                from = fail;
                continue;
            }
        }
        if (!sv->gap_open) {
            snprintf(sv->gap_from, sizeof sv->gap_from, "the start");
            if (sv->last.set) {
                s_key_name(&sv->last, name, sizeof name);
                snprintf(sv->gap_from, sizeof sv->gap_from, "(%.90s)", name);
            }
            sv->gap_open = 1;
        }
        // the first key after `fail` that a seek reaches: its step, then its prompt, then its
        // sample (a step's keys group by prompt, so each search spans a few values)
        uint64_t s0 = fail.hi, x[3] = {0, 0, 0};
        uint32_t p0 = (uint32_t)(fail.lo >> 32), i0 = (uint32_t)fail.lo;
        s_field_t f = {0, 0, 0};
        int found = 0;
        if ((rc = s_first_ok(sv, &f, s0, UINT64_MAX, &budget, &found, &x[0])) != 0) {
            return rc;
        }
        f.field = 1;
        f.step = x[0];
        if (found && (rc = s_first_ok(sv, &f, x[0] == s0 ? p0 : 0, UINT32_MAX, &budget, &found,
                                      &x[1])) != 0) {
            return rc;
        }
        f.field = 2;
        f.prompt = (uint32_t)x[1];
        if (found && (rc = s_first_ok(sv, &f, x[0] == s0 && x[1] == p0 ? i0 : 0, UINT32_MAX,
                                      &budget, &found, &x[2])) != 0) {
            return rc;
        }
        if (!found) {
            break; // nothing after the damage can be reached (or the budget is spent)
        }
        from = s_pos3(x[0], (uint32_t)x[1], (uint32_t)x[2]);
    }
    // the rest of the table cannot be reached (an open gap), or no key can follow the last
    if (budget <= 0 && !sv->gap_open) {
        snprintf(sv->gap_from, sizeof sv->gap_from, "the start");
        if (sv->last.set) {
            s_key_name(&sv->last, name, sizeof name);
            snprintf(sv->gap_from, sizeof sv->gap_from, "(%.90s)", name);
        }
        sv->gap_open = 1;
    }
    if (budget <= 0) {
        snprintf(name, sizeof name, "the end (given up after %d child processes)",
                 S_MAX_CHILDREN);
    } else {
        snprintf(name, sizeof name, "the end");
    }
    s_gap_close(sv, name);
    return s_flush(sv);
}

// Removes a store folder left by an interrupted salvage: data.mdb, lock.mdb and the folder.
static int s_remove_store(const char *dir, char *err, size_t err_len) {
    char p[4300];
    static const char *const files[] = {"data.mdb", "lock.mdb"};
    for (int i = 0; i < 2; i++) {
        snprintf(p, sizeof p, "%s/%s", dir, files[i]);
        if (unlink(p) != 0 && errno != ENOENT) {
            int e = errno;
            return rl_errf(err, err_len, e, "%s: cannot remove: %s", p, strerror(e));
        }
    }
    if (rmdir(dir) != 0 && errno != ENOENT) {
        int e = errno;
        return rl_errf(err, err_len, e, "%s: cannot remove (it holds other files: remove it "
                       "yourself): %s", dir, strerror(e));
    }
    return 0;
}

// fsync of the folder holding `path`, so that its renames are on disk.
static void s_sync_parent(const char *path) {
    char dir[4300];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash == dir) {
        dir[1] = '\0';
    } else if (slash) {
        *slash = '\0';
    } else {
        snprintf(dir, sizeof dir, ".");
    }
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        fsync(fd);
        close(fd);
    }
}

int rl_traj_salvage(const char *path, rl_traj_salvage_t *out, char *err, size_t err_len) {
    memset(out, 0, sizeof *out);
    out->counted = out->counted_eval = UINT64_MAX;
    char data[4200], tmp[4200];
    struct stat st;
    if (snprintf(data, sizeof data, "%s/data.mdb", path) >= (int)sizeof data ||
        snprintf(tmp, sizeof tmp, "%s.salvage", path) >= (int)sizeof tmp) {
        return rl_errf(err, err_len, RL_EINVAL, "%s: path too long", path);
    }
    if (stat(data, &st) != 0) {
        int e = errno;
        return rl_errf(err, err_len, e, "%s: %s", data, strerror(e));
    }
    int rc = s_remove_store(tmp, err, err_len);
    if (rc) {
        return rc;
    }
    s_salv_t sv;
    memset(&sv, 0, sizeof sv);
    sv.path = path;
    sv.out = out;
    sv.err = err;
    sv.err_len = err_len;
    if (!(sv.sh = s_shared_new())) {
        return rl_errf(err, err_len, errno, "%s: cannot map a shared page: %s", path,
                       strerror(errno));
    }
    // meta and LMDB's counts first (a child too: they live on pages like any other)
    s_job_t meta = {path, S_M_META, S_T_META, 1, {0}, {{0}, 0, 0}};
    int ok;
    rc = s_job(&sv, &meta, &ok);
    if (!rc && !sv.sh->opened) {
        rc = rl_errf(err, err_len, RL_EPROTO, "%s: nothing of it can be read: %s", path,
                     sv.sh->state == S_DAMAGED ? sv.sh->msg : "opening it crashed");
    }
    if (!rc) {
        out->counted = sv.sh->counted[S_T_TRAJ];
        out->counted_eval = sv.sh->counted[S_T_EVAL];
        sv.has_meta = sv.sh->has_meta;
        sv.last_step = sv.sh->last_step;
        sv.pending_step = sv.sh->pending_step;
        if (!ok) {
            s_note(&sv, "meta: %s (its steps are taken from the records)",
                   sv.sh->state == S_DAMAGED ? sv.sh->msg : "reading it crashed");
        }
    }
    // the new store: a map as large as the old file, so that it does not grow step by step
    size_t map = RL_TRAJ_MAP_INITIAL;
    while (map < (size_t)st.st_size && map < ((size_t)1 << 40)) {
        map *= 2;
    }
    if (!rc) {
        // unsynced commits (a step each), one sync before the store takes the old one's place
        rc = rl_traj_open_sized(tmp, RL_TRAJ_NOSYNC, map, &sv.dst, err, err_len);
    }
    if (!rc) {
        rc = s_salvage_table(&sv, S_T_TRAJ);
    }
    if (!rc && sv.has_meta && sv.last_step > sv.max_step) {
        // meta's last step outlives its records (a step with none, or lost ones)
        rc = rl_traj_put_step(sv.dst, sv.last_step, NULL, 0, err, err_len);
    }
    if (!rc) {
        rc = s_salvage_table(&sv, S_T_EVAL);
    }
    if (!rc) {
        rc = rl_traj_sync(sv.dst, err, err_len);
    }
    rl_traj_records_free(&sv.recs, sv.n);
    rl_traj_close(&sv.dst);
    s_shared_free(sv.sh);
    if (rc) {
        char ignored[256];
        s_remove_store(tmp, ignored, sizeof ignored);
        return rc;
    }
    // the old store aside, the new one in its place
    long long now = (long long)time(NULL);
    snprintf(out->aside, sizeof out->aside, "%s.damaged-%lld", path, now);
    for (int i = 2; lstat(out->aside, &st) == 0 && i < 1000; i++) {
        snprintf(out->aside, sizeof out->aside, "%s.damaged-%lld-%d", path, now, i);
    }
    if (rename(path, out->aside) != 0) {
        int e = errno;
        char ignored[256];
        s_remove_store(tmp, ignored, sizeof ignored);
        return rl_errf(err, err_len, e, "%s: cannot move it to %s: %s", path, out->aside,
                       strerror(e));
    }
    if (rename(tmp, path) != 0) {
        int e = errno;
        rename(out->aside, path);
        return rl_errf(err, err_len, e, "%s: cannot move %s to it: %s (the old store is back)",
                       path, tmp, strerror(e));
    }
    s_sync_parent(path);
    return 0;
}
