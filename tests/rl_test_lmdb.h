// rl_test_lmdb — damage for the trajectory store's tests (rollout.traj, cli.traj,
// roles.grpo_faults): finds a live page of the `traj` table through LMDB's own records (the
// table's root page, from its record in the main database) and overwrites it in data.mdb as a
// failing disk would. Page layout of liblmdb 0.9 (mdb.c: MDB_page, MDB_node, MDB_db): a page
// starts with its number (8 bytes), 2 bytes of padding, flags, lower and upper (2 each), then
// `lower - 16` bytes of 2-byte node offsets; a branch node starts with its child's page number
// in 6 bytes (lo, hi, flags as three little-endian u16s).
#ifndef RL_TEST_LMDB_H
#define RL_TEST_LMDB_H

#include <fcntl.h>
#include <lmdb.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

// The `traj` table of the store at `dir`: its depth, root page, entry count and page size.
// Returns 0, or -1 when it cannot be read.
static inline int rl_test_traj_root(const char *dir, int *depth, uint64_t *root,
                                    uint64_t *entries, size_t *psize) {
    MDB_env *env;
    MDB_txn *txn;
    MDB_dbi main_db;
    MDB_val k = {4, (void *)"traj"}, v;
    int rc = mdb_env_create(&env);
    if (rc) {
        return -1;
    }
    mdb_env_set_maxdbs(env, 3);
    rc = mdb_env_open(env, dir, MDB_RDONLY, 0);
    if (!rc) {
        rc = mdb_txn_begin(env, NULL, MDB_RDONLY, &txn);
    }
    if (!rc) {
        rc = mdb_dbi_open(txn, NULL, 0, &main_db);
        if (!rc) {
            rc = mdb_get(txn, main_db, &k, &v);
        }
        if (!rc && v.mv_size >= 48) {
            uint16_t d;
            memcpy(&d, (const uint8_t *)v.mv_data + 6, 2);
            *depth = d;
            memcpy(entries, (const uint8_t *)v.mv_data + 32, 8);
            memcpy(root, (const uint8_t *)v.mv_data + 40, 8);
        }
        rc = rc || v.mv_size < 48;
        mdb_txn_abort(txn);
    }
    MDB_stat st;
    if (!rc && mdb_env_stat(env, &st) == 0) {
        *psize = st.ms_psize;
    }
    mdb_env_close(env);
    return rc ? -1 : 0;
}

// Child `i` (-1: the middle one) of the branch page `pg`: its page number, and into *n_children
// how many the branch has. Returns 0 or -1.
static inline int rl_test_lmdb_child(const char *dir, uint64_t pg, size_t psize, int i,
                                     uint64_t *child, int *n_children) {
    char p[4200];
    snprintf(p, sizeof p, "%s/data.mdb", dir);
    int fd = open(p, O_RDONLY);
    uint8_t page[65536];
    if (fd < 0 || psize > sizeof page) {
        if (fd >= 0) {
            close(fd);
        }
        return -1;
    }
    ssize_t got = pread(fd, page, psize, (off_t)(pg * psize));
    close(fd);
    uint16_t flags, lower, off;
    memcpy(&flags, page + 10, 2);
    memcpy(&lower, page + 12, 2);
    int n = (lower - 16) / 2;
    if (got != (ssize_t)psize || !(flags & 1) || n < 1) { // 1: P_BRANCH
        return -1;
    }
    *n_children = n;
    i = i < 0 ? n / 2 : i;
    if (i >= n) {
        return -1;
    }
    memcpy(&off, page + 16 + 2 * i, 2);
    uint16_t w[3];
    memcpy(w, page + off, 6);
    *child = (uint64_t)w[0] | (uint64_t)w[1] << 16 | (uint64_t)w[2] << 32;
    return 0;
}

// The number of entries on page `pg` ((lower - 16) / 2). Returns it, or -1.
static inline int rl_test_lmdb_entries(const char *dir, uint64_t pg, size_t psize) {
    char p[4200];
    snprintf(p, sizeof p, "%s/data.mdb", dir);
    int fd = open(p, O_RDONLY);
    uint16_t lower;
    if (fd < 0) {
        return -1;
    }
    ssize_t got = pread(fd, &lower, 2, (off_t)(pg * psize + 12));
    close(fd);
    return got == 2 ? (lower - 16) / 2 : -1;
}

// Writes n bytes at byte `at` of the store's data.mdb. Returns 0 or -1.
static inline int rl_test_lmdb_poke(const char *dir, uint64_t at, const void *bytes, size_t n) {
    char p[4200];
    snprintf(p, sizeof p, "%s/data.mdb", dir);
    int fd = open(p, O_WRONLY);
    if (fd < 0) {
        return -1;
    }
    ssize_t w = pwrite(fd, bytes, n, (off_t)at);
    int rc = (w == (ssize_t)n && fsync(fd) == 0) ? 0 : -1;
    close(fd);
    return rc;
}

// A leaf in the middle of `traj`: from the root, the middle child at every level. *parent is
// the branch above it and *index its slot there. Returns 0, or -1 (no branch: one page).
static inline int rl_test_traj_mid_leaf(const char *dir, uint64_t *parent, int *index,
                                        uint64_t *leaf, size_t *psize) {
    int depth = 0, n = 0;
    uint64_t pg = 0, entries = 0;
    if (rl_test_traj_root(dir, &depth, &pg, &entries, psize) != 0 || depth < 2) {
        return -1;
    }
    for (int level = 1; level < depth; level++) {
        *parent = pg;
        if (rl_test_lmdb_child(dir, pg, *psize, -1, &pg, &n) != 0) {
            return -1;
        }
        *index = n / 2;
    }
    *leaf = pg;
    return 0;
}

// The step of the first key on leaf page `pg` (a leaf node: 2+2 bytes of data size, flags,
// key size, then the key: big-endian u64 step first). Returns 0 or -1.
static inline int rl_test_lmdb_first_step(const char *dir, uint64_t pg, size_t psize,
                                          uint64_t *step) {
    char p[4200];
    snprintf(p, sizeof p, "%s/data.mdb", dir);
    int fd = open(p, O_RDONLY);
    uint8_t page[65536];
    if (fd < 0 || psize > sizeof page) {
        if (fd >= 0) {
            close(fd);
        }
        return -1;
    }
    ssize_t got = pread(fd, page, psize, (off_t)(pg * psize));
    close(fd);
    uint16_t off, ksize;
    memcpy(&off, page + 16, 2);
    if (got != (ssize_t)psize || off + 8u + 16u > psize) {
        return -1;
    }
    memcpy(&ksize, page + off + 6, 2);
    if (ksize != 16) {
        return -1;
    }
    *step = 0;
    for (int i = 0; i < 8; i++) {
        *step = *step << 8 | page[off + 8 + i];
    }
    return 0;
}

// Zeroes a leaf page in the middle of `traj` (rl_test_traj_mid_leaf), as a block that a disk
// lost reads. Returns its page number, with *lost its entry count and *first_step (may be NULL)
// the step of its first record, or -1.
static inline int64_t rl_test_traj_zero_leaf(const char *dir, int *lost, uint64_t *first_step) {
    uint64_t parent, leaf, step = 0;
    int index;
    size_t psize = 0;
    if (rl_test_traj_mid_leaf(dir, &parent, &index, &leaf, &psize) != 0 ||
        rl_test_lmdb_first_step(dir, leaf, psize, &step) != 0) {
        return -1;
    }
    if (first_step) {
        *first_step = step;
    }
    *lost = rl_test_lmdb_entries(dir, leaf, psize);
    static uint8_t zero[65536];
    if (psize > sizeof zero || rl_test_lmdb_poke(dir, leaf * psize, zero, psize) != 0) {
        return -1;
    }
    return (int64_t)leaf;
}

// Makes the pointer to that leaf in its branch name page 2^48 - 1, far past the file (what
// LMDB reports as MDB_PAGE_NOTFOUND). Returns the leaf's page number, with *lost its entry
// count, or -1.
static inline int64_t rl_test_traj_lose_leaf(const char *dir, int *lost) {
    uint64_t parent, leaf;
    int index;
    size_t psize = 0;
    if (rl_test_traj_mid_leaf(dir, &parent, &index, &leaf, &psize) != 0) {
        return -1;
    }
    *lost = rl_test_lmdb_entries(dir, leaf, psize);
    char p[4200];
    snprintf(p, sizeof p, "%s/data.mdb", dir);
    int fd = open(p, O_RDONLY);
    uint16_t off = 0;
    ssize_t got = fd >= 0 ? pread(fd, &off, 2, (off_t)(parent * psize + 16 + 2 * index)) : -1;
    if (fd >= 0) {
        close(fd);
    }
    static const uint8_t far[6] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
    if (got != 2 || rl_test_lmdb_poke(dir, parent * psize + off, far, 6) != 0) {
        return -1;
    }
    return (int64_t)leaf;
}

// Points the first node of the leaf with the highest page number (among the children of
// `traj`'s root) 65528 bytes past its page start, which is past the end of data.mdb when the
// page lies in the file's last 64 KiB: reading that node then faults (SIGBUS: a mapped page past
// the end of the file). Returns the page number, or -1 when no child page lies that close to the
// end (or the table has no branch page).
static inline int64_t rl_test_traj_wild_node(const char *dir) {
    int depth = 0, n = 0;
    uint64_t root = 0, entries = 0, best = 0, child;
    size_t psize = 0;
    if (rl_test_traj_root(dir, &depth, &root, &entries, &psize) != 0 || depth != 2 ||
        rl_test_lmdb_child(dir, root, psize, 0, &child, &n) != 0) {
        return -1;
    }
    for (int i = 0; i < n; i++) {
        if (rl_test_lmdb_child(dir, root, psize, i, &child, &n) == 0 && child > best) {
            best = child;
        }
    }
    char p[4200];
    struct stat st;
    snprintf(p, sizeof p, "%s/data.mdb", dir);
    uint16_t off = 0xfff8;
    if (stat(p, &st) != 0 || best * psize + off + 8 <= (uint64_t)st.st_size ||
        rl_test_lmdb_poke(dir, best * psize + 16, &off, 2) != 0) {
        return -1;
    }
    return (int64_t)best;
}

#endif
