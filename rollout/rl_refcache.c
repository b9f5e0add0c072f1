// rl_refcache — the reference sums cache (rl_refcache.h): FNV-1a hashing of data and model
// folders, an LMDB environment of 24-byte keys and float64 values that grows when full.
#include "rl_refcache.h"

#include "rl_err.h"
#include "rl_lmdb.h"

#include <dirent.h>
#include <errno.h>
#include <lmdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define S_MAP_DEFAULT ((size_t)64 << 20)
#define S_MAP_MAX ((size_t)1 << 40)

struct rl_refcache {
    MDB_env *env;
    MDB_dbi ref, meta;
};

// ---- hashing ------------------------------------------------------------------------------------

uint64_t rl_refcache_hash(uint64_t h, const void *bytes, size_t n) {
    const unsigned char *p = bytes;
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 0x100000001b3ull; // FNV-1a 64's prime
    }
    return h;
}

static int s_cmp_str(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int s_ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

static int s_hash_file(const char *path, uint64_t *h, char *err, size_t err_len) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        int e = errno;
        return rl_errf(err, err_len, e, "%s: %s", path, strerror(e));
    }
    enum { S_CHUNK = 1 << 16 };
    unsigned char *buf = malloc(S_CHUNK);
    if (!buf) {
        fclose(f);
        return rl_errf(err, err_len, RL_ENOMEM, "out of memory");
    }
    size_t n;
    while ((n = fread(buf, 1, S_CHUNK, f)) > 0) {
        *h = rl_refcache_hash(*h, buf, n);
    }
    int bad = ferror(f);
    fclose(f);
    free(buf);
    return bad ? rl_errf(err, err_len, RL_EIO, "%s: read error", path) : 0;
}

int rl_refcache_hash_model(const char *dir, uint64_t h, uint64_t *out, char *err, size_t err_len) {
    DIR *d = opendir(dir);
    if (!d) {
        int e = errno;
        return rl_errf(err, err_len, e, "%s: %s", dir, strerror(e));
    }
    char **names = NULL;
    size_t n = 0, cap = 0;
    int rc = 0, weights = 0;
    for (struct dirent *e = readdir(d); e && !rc; e = readdir(d)) {
        const char *s = e->d_name;
        int w = s_ends_with(s, ".safetensors");
        if (!w && strcmp(s, "config.json") != 0 && strcmp(s, "model.safetensors.index.json")) {
            continue;
        }
        weights += w;
        if (n == cap) {
            cap = cap ? 2 * cap : 16;
            char **q = realloc(names, cap * sizeof(*q));
            if (!q) {
                rc = rl_errf(err, err_len, RL_ENOMEM, "out of memory");
                break;
            }
            names = q;
        }
        if (!(names[n] = strdup(s))) {
            rc = rl_errf(err, err_len, RL_ENOMEM, "out of memory");
            break;
        }
        n++;
    }
    closedir(d);
    if (!rc && !weights) {
        rc = rl_errf(err, err_len, RL_EINVAL, "%s: no *.safetensors file to hash", dir);
    }
    if (!rc) {
        qsort(names, n, sizeof(*names), s_cmp_str);
    }
    for (size_t i = 0; !rc && i < n; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        h = rl_refcache_hash(h, names[i], strlen(names[i]) + 1); // the name, NUL included
        rc = s_hash_file(path, &h, err, err_len);
    }
    for (size_t i = 0; i < n; i++) {
        free(names[i]);
    }
    free(names);
    if (!rc) {
        *out = h;
    }
    return rc;
}

// ---- the environment ----------------------------------------------------------------------------


static int s_mkdirs(const char *dir) {
    char p[4096];
    if (snprintf(p, sizeof p, "%s", dir) >= (int)sizeof p) {
        return ENAMETOOLONG;
    }
    for (char *s = p + 1; *s; s++) {
        if (*s == '/') {
            *s = '\0';
            if (mkdir(p, 0700) != 0 && errno != EEXIST) {
                return errno;
            }
            *s = '/';
        }
    }
    return mkdir(p, 0700) != 0 && errno != EEXIST ? errno : 0;
}

static void s_key(unsigned char k[24], uint64_t a, uint64_t b, uint64_t c) {
    for (int i = 0; i < 8; i++) {
        k[i] = (unsigned char)(a >> (56 - 8 * i));
        k[8 + i] = (unsigned char)(b >> (56 - 8 * i));
        k[16 + i] = (unsigned char)(c >> (56 - 8 * i));
    }
}

int rl_refcache_new_sized(const char *dir, size_t map_size, rl_refcache_t **out, char *err,
                          size_t err_len) {
    *out = NULL;
    int rc = s_mkdirs(dir);
    if (rc) {
        return rl_errf(err, err_len, rc, "%s: cannot create: %s", dir, strerror(rc));
    }
    rl_refcache_t *self = calloc(1, sizeof *self);
    if (!self) {
        return rl_errf(err, err_len, RL_ENOMEM, "out of memory");
    }
    struct stat st;
    char data[4200];
    snprintf(data, sizeof data, "%s/data.mdb", dir);
    int exists = stat(data, &st) == 0;
    MDB_txn *txn = NULL;
    rc = mdb_env_create(&self->env);
    if (!rc) {
        rc = mdb_env_set_maxdbs(self->env, 2);
    }
    if (!rc && !exists) {
        rc = mdb_env_set_mapsize(self->env, map_size ? map_size : S_MAP_DEFAULT);
    }
    if (!rc) {
        rc = mdb_env_open(self->env, dir, MDB_NOSYNC, 0600);
    }
    if (!rc && exists) {
        rc = mdb_env_set_mapsize(self->env, 0); // adopt the size a grown environment has
    }
    if (!rc) {
        rc = mdb_txn_begin(self->env, NULL, 0, &txn);
    }
    if (!rc) {
        rc = mdb_dbi_open(txn, "ref", MDB_CREATE, &self->ref);
    }
    if (!rc) {
        rc = mdb_dbi_open(txn, "meta", MDB_CREATE, &self->meta);
    }
    uint32_t fmt = 0;
    if (!rc) {
        MDB_val k = {6, "format"}, v;
        int g = mdb_get(txn, self->meta, &k, &v);
        if (g == MDB_NOTFOUND) {
            unsigned char le[4] = {RL_REFCACHE_FORMAT, 0, 0, 0};
            MDB_val nv = {4, le};
            rc = mdb_put(txn, self->meta, &k, &nv, 0);
            fmt = RL_REFCACHE_FORMAT;
        } else if (g == 0 && v.mv_size == 4) {
            const unsigned char *b = v.mv_data;
            fmt =
                (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
        } else {
            rc = g ? g : MDB_CORRUPTED;
        }
    }
    if (!rc && fmt != RL_REFCACHE_FORMAT) {
        mdb_txn_abort(txn);
        rl_refcache_destroy(&self);
        return rl_errf(err, err_len, RL_EVERSION,
                       "%s: reference cache format %u, this rlctl reads %u (remove the folder "
                       "to start a new cache)",
                       dir, (unsigned)fmt, RL_REFCACHE_FORMAT);
    }
    if (!rc) {
        rc = mdb_txn_commit(txn);
        txn = NULL;
    }
    if (rc) {
        if (txn) {
            mdb_txn_abort(txn);
        }
        rl_refcache_destroy(&self);
        return rl_errf(err, err_len, rl_lmdb_code(rc), "%s: %s", dir, mdb_strerror(rc));
    }
    *out = self;
    return 0;
}

int rl_refcache_new(const char *dir, rl_refcache_t **out, char *err, size_t err_len) {
    return rl_refcache_new_sized(dir, 0, out, err, err_len);
}

void rl_refcache_destroy(rl_refcache_t **self_p) {
    rl_refcache_t *self = *self_p;
    if (!self) {
        return;
    }
    if (self->env) {
        mdb_env_close(self->env);
    }
    free(self);
    *self_p = NULL;
}

int rl_refcache_get(rl_refcache_t *self, uint64_t data_hash, uint64_t ref_hash, const int64_t *idx,
                    int n, double *sums, uint8_t *found, int *hits, char *err, size_t err_len) {
    MDB_txn *txn = NULL;
    int rc = mdb_txn_begin(self->env, NULL, MDB_RDONLY, &txn), count = 0;
    for (int i = 0; !rc && i < n; i++) {
        unsigned char kb[24];
        s_key(kb, data_hash, ref_hash, (uint64_t)idx[i]);
        MDB_val k = {24, kb}, v;
        int g = mdb_get(txn, self->ref, &k, &v);
        found[i] = 0;
        if (g == MDB_NOTFOUND) {
            continue;
        }
        if (g) {
            rc = g;
            break;
        }
        if (v.mv_size != 8) {
            mdb_txn_abort(txn);
            return rl_errf(err, err_len, RL_EPROTO,
                           "reference cache: the entry of example %lld holds %zu bytes, not 8 "
                           "(a damaged cache: remove its folder)",
                           (long long)idx[i], v.mv_size);
        }
        uint64_t u = 0;
        const unsigned char *b = v.mv_data;
        for (int j = 7; j >= 0; j--) {
            u = u << 8 | b[j];
        }
        memcpy(&sums[i], &u, 8);
        found[i] = 1;
        count++;
    }
    if (txn) {
        mdb_txn_abort(txn);
    }
    if (rc) {
        return rl_errf(err, err_len, rl_lmdb_code(rc), "reference cache: %s", mdb_strerror(rc));
    }
    if (hits) {
        *hits = count;
    }
    return 0;
}

int rl_refcache_put(rl_refcache_t *self, uint64_t data_hash, uint64_t ref_hash, const int64_t *idx,
                    const double *sums, int n, char *err, size_t err_len) {
    for (;;) {
        MDB_txn *txn = NULL;
        int rc = mdb_txn_begin(self->env, NULL, 0, &txn);
        for (int i = 0; !rc && i < n; i++) {
            unsigned char kb[24], vb[8];
            s_key(kb, data_hash, ref_hash, (uint64_t)idx[i]);
            uint64_t u;
            memcpy(&u, &sums[i], 8);
            for (int j = 0; j < 8; j++) {
                vb[j] = (unsigned char)(u >> (8 * j));
            }
            MDB_val k = {24, kb}, v = {8, vb};
            rc = mdb_put(txn, self->ref, &k, &v, 0);
        }
        if (!rc) {
            rc = mdb_txn_commit(txn);
            txn = NULL;
        }
        if (txn) {
            mdb_txn_abort(txn);
        }
        if (rc != MDB_MAP_FULL) {
            return rc ? rl_errf(err, err_len, rl_lmdb_code(rc), "reference cache: %s", mdb_strerror(rc))
                      : 0;
        }
        // full: double the map and write the whole batch again (nothing of it was committed)
        MDB_envinfo info;
        mdb_env_info(self->env, &info);
        size_t cur = info.me_mapsize;
        if (cur >= S_MAP_MAX || (rc = mdb_env_set_mapsize(self->env, cur * 2)) != 0) {
            return rl_errf(err, err_len, RL_EIO, "reference cache: cannot grow past %zu bytes",
                           cur);
        }
    }
}
