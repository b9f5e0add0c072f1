// test_refcache — rollout/rl_refcache: FNV-1a 64 against its published vectors; a model folder's
// hash follows every weight byte and file name but not other files; the cache returns what was
// put, across a reopen, keyed apart by dataset hash, reference hash and example, with partial
// hits; bit-exact doubles (NaN, -0, subnormals); a tiny map grows; a damaged entry and another
// format are refused naming why.
#include "rl_err.h"
#include "rl_refcache.h"
#include "rl_test.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <lmdb.h>

static char s_dir[] = "/tmp/rl_test_refcache_XXXXXX";

static void s_write(const char *rel, const char *text) {
    char p[600];
    snprintf(p, sizeof p, "%s/%s", s_dir, rel);
    FILE *f = fopen(p, "wb");
    if (f) {
        fputs(text, f);
        fclose(f);
    }
}

static void test_hash(void) {
    // FNV-1a 64 test vectors (Fowler, Noll, Vo)
    CHECK(rl_refcache_hash(RL_REFCACHE_HASH_INIT, "", 0) == 0xcbf29ce484222325ull);
    CHECK(rl_refcache_hash(RL_REFCACHE_HASH_INIT, "a", 1) == 0xaf63dc4c8601ec8cull);
    CHECK(rl_refcache_hash(RL_REFCACHE_HASH_INIT, "foobar", 6) == 0x85944171f73967e8ull);
    // streaming: two pieces equal the whole
    uint64_t h = rl_refcache_hash(RL_REFCACHE_HASH_INIT, "foo", 3);
    CHECK(rl_refcache_hash(h, "bar", 3) == 0x85944171f73967e8ull);
    // a model folder: weights and config count, a README does not
    char m[600], err[512];
    snprintf(m, sizeof m, "%s/model", s_dir);
    CHECK_INT(mkdir(m, 0700), 0);
    uint64_t h0 = 0, h1 = 0, h2 = 0, h3 = 0;
    CHECK_INT(rl_refcache_hash_model(m, RL_REFCACHE_HASH_INIT, &h0, err, sizeof err), RL_EINVAL);
    CHECK_CONTAINS(err, "no *.safetensors file");
    s_write("model/config.json", "{\"hidden_size\": 8}");
    s_write("model/model.safetensors", "weights-1");
    CHECK_INT(rl_refcache_hash_model(m, RL_REFCACHE_HASH_INIT, &h0, err, sizeof err), 0);
    s_write("model/README.md", "notes");
    CHECK_INT(rl_refcache_hash_model(m, RL_REFCACHE_HASH_INIT, &h1, err, sizeof err), 0);
    CHECK_MSG(h0 == h1, "a README changed the model's hash");
    s_write("model/model.safetensors", "weights-2");
    CHECK_INT(rl_refcache_hash_model(m, RL_REFCACHE_HASH_INIT, &h2, err, sizeof err), 0);
    CHECK_MSG(h2 != h0, "a weight byte did not change the hash");
    s_write("model/model.safetensors", "weights-1");
    s_write("model/extra.safetensors", "");
    CHECK_INT(rl_refcache_hash_model(m, RL_REFCACHE_HASH_INIT, &h3, err, sizeof err), 0);
    CHECK_MSG(h3 != h0, "an added (empty) shard did not change the hash");
}

static void test_cache(void) {
    char c[600], err[512];
    snprintf(c, sizeof c, "%s/cache/deeper", s_dir); // parents are created
    rl_refcache_t *rc = NULL;
    CHECK_INT(rl_refcache_new_sized(c, 64 << 10, &rc, err, sizeof err), 0);
    if (!rc) {
        fprintf(stderr, "%s\n", err);
        return;
    }
    enum { N = 3000 }; // 3000 entries do not fit a 64 KiB map: it grows
    int64_t *idx = malloc(N * sizeof *idx);
    double *v = malloc(N * sizeof *v), *got = malloc(N * sizeof *got);
    uint8_t *found = malloc(N);
    for (int i = 0; i < N; i++) {
        idx[i] = 2 * i;
        v[i] = -1.0 - 0.001 * i;
    }
    v[1] = NAN;
    v[2] = -0.0;
    v[3] = 4.9e-324; // the smallest subnormal
    CHECK_INT(rl_refcache_put(rc, 11, 22, idx, v, N, err, sizeof err), 0);
    rl_refcache_destroy(&rc);
    CHECK(rc == NULL);
    CHECK_INT(rl_refcache_new(c, &rc, err, sizeof err), 0);
    int hits = -1;
    CHECK_INT(rl_refcache_get(rc, 11, 22, idx, N, got, found, &hits, err, sizeof err), 0);
    CHECK_INT(hits, N);
    CHECK_MSG(memcmp(v, got, N * sizeof *v) == 0, "values changed through the cache");
    // other keys: another dataset, another reference, odd examples are absent
    CHECK_INT(rl_refcache_get(rc, 12, 22, idx, N, got, found, &hits, err, sizeof err), 0);
    CHECK_INT(hits, 0);
    CHECK_INT(rl_refcache_get(rc, 11, 23, idx, N, got, found, &hits, err, sizeof err), 0);
    CHECK_INT(hits, 0);
    int64_t mixed[4] = {0, 1, 3, 5999}; // 0 is stored; odd examples are not
    double out[4] = {7, 7, 7, 7};
    CHECK_INT(rl_refcache_get(rc, 11, 22, mixed, 4, out, found, &hits, err, sizeof err), 0);
    CHECK(hits == 1 && found[0] == 1 && found[1] == 0 && found[2] == 0 && found[3] == 0);
    CHECK(out[0] == v[0] && out[1] == 7 && out[3] == 7);
    // a replaced entry
    double nv = 3.5;
    CHECK_INT(rl_refcache_put(rc, 11, 22, &idx[5], &nv, 1, err, sizeof err), 0);
    CHECK_INT(rl_refcache_get(rc, 11, 22, &idx[5], 1, out, found, &hits, err, sizeof err), 0);
    CHECK(hits == 1 && out[0] == 3.5);
    rl_refcache_destroy(&rc);
    // a damaged entry (a value of 4 bytes) and another format, written with LMDB directly
    MDB_env *env;
    MDB_txn *txn;
    MDB_dbi ref, meta;
    CHECK_INT(mdb_env_create(&env), 0);
    CHECK_INT(mdb_env_set_maxdbs(env, 2), 0);
    CHECK_INT(mdb_env_open(env, c, 0, 0600), 0);
    CHECK_INT(mdb_txn_begin(env, NULL, 0, &txn), 0);
    CHECK_INT(mdb_dbi_open(txn, "ref", 0, &ref), 0);
    unsigned char kb[24] = {0};
    kb[7] = 11;
    kb[15] = 22;
    kb[23] = 0; // example 0
    MDB_val k = {24, kb}, bad = {4, "abcd"};
    CHECK_INT(mdb_put(txn, ref, &k, &bad, 0), 0);
    CHECK_INT(mdb_txn_commit(txn), 0);
    CHECK_INT(rl_refcache_new(c, &rc, err, sizeof err), 0);
    if (rc) {
        CHECK_INT(rl_refcache_get(rc, 11, 22, idx, 1, out, found, &hits, err, sizeof err),
                  RL_EPROTO);
        CHECK_CONTAINS(err, "example 0 holds 4 bytes, not 8");
        rl_refcache_destroy(&rc);
    }
    CHECK_INT(mdb_txn_begin(env, NULL, 0, &txn), 0);
    CHECK_INT(mdb_dbi_open(txn, "meta", 0, &meta), 0);
    MDB_val fk = {6, "format"}, fv = {4, "\x02\x00\x00\x00"};
    CHECK_INT(mdb_put(txn, meta, &fk, &fv, 0), 0);
    CHECK_INT(mdb_txn_commit(txn), 0);
    mdb_env_close(env);
    CHECK_INT(rl_refcache_new(c, &rc, err, sizeof err), RL_EVERSION);
    CHECK_CONTAINS(err, "reference cache format 2, this rlctl reads 1");
    CHECK(rc == NULL);
    free(idx);
    free(v);
    free(got);
    free(found);
}

int main(void) {
    rl_test_tmpdir(s_dir, sizeof s_dir, "refcache");
    RL_TEST_RUN(test_hash);
    RL_TEST_RUN(test_cache);
    rl_test_tmpdir_done(s_dir);
    RL_TEST_DONE();
}
