// rl_refcache — the reference model's summed log-probabilities of a preference dataset's
// examples, kept across runs (DPO, issue 12): an LMDB environment (the recipe's data.ref_cache)
// whose keys are (dataset hash, reference hash, example index) and whose values are the sums, so
// that a resumed run, or a second run on the same data and the same base, asks the reference for
// nothing it has already computed. TRL precomputes reference logprobs per dataset the same way
// (`precompute_ref_log_probs`); OpenRLHF recomputes them every step.
//
// Layout: database "ref": key 24 bytes, big-endian u64 dataset hash, u64 reference hash, u64
// example index (so one dataset and reference's entries are contiguous); value 8 bytes, the sum
// as a little-endian IEEE-754 float64. Database "meta": "format" -> u32 little-endian 1. The
// hashes are the caller's (rl_refcache_hash: 64-bit FNV-1a, not cryptographic: the key names
// what was computed, it does not defend against a forged cache, which is the user's own folder).
// Commits are not synced (MDB_NOSYNC): a crash may lose the last entries, which are recomputed,
// but never breaks the environment. Several runs may share one cache (LMDB's lock file).
// Not a trajectory store (rl_traj) and not a model: it knows nothing of what the sums mean.
#ifndef RL_REFCACHE_H
#define RL_REFCACHE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define RL_REFCACHE_FORMAT 1u

// ---- hashing ------------------------------------------------------------------------------------

#define RL_REFCACHE_HASH_INIT 0xcbf29ce484222325ull // FNV-1a 64's offset basis

// 64-bit FNV-1a of bytes[0..n) continued from h (start with RL_REFCACHE_HASH_INIT).
uint64_t rl_refcache_hash(uint64_t h, const void *bytes, size_t n);

// The hash of a model folder as a reference: config.json and every *.safetensors file and
// model.safetensors.index.json it holds (names sorted; each name and content hashed), continued
// from h. Returns 0, or an errno / RL_EINVAL (no weight file) with err naming the folder.
int rl_refcache_hash_model(const char *dir, uint64_t h, uint64_t *out, char *err, size_t err_len);

// ---- the cache ----------------------------------------------------------------------------------

typedef struct rl_refcache rl_refcache_t;

// Opens (creating it, and its parent folders, mode 0700) the cache at folder `dir`. A folder
// that holds another format is refused (RL_EVERSION). caller owns *out; free with
// rl_refcache_destroy.
int rl_refcache_new(const char *dir, rl_refcache_t **out, char *err, size_t err_len);
// As rl_refcache_new with the map size of a new environment given (0 = the default, 64 MiB); it
// doubles whenever a put does not fit. Tests use a tiny one.
int rl_refcache_new_sized(const char *dir, size_t map_size, rl_refcache_t **out, char *err,
                          size_t err_len);
void rl_refcache_destroy(rl_refcache_t **self_p);

// Looks up examples idx[0..n) of (data_hash, ref_hash): sums[i] and found[i] = 1 where present,
// found[i] = 0 elsewhere (sums[i] untouched). *hits (may be NULL) gets the count found. Returns 0,
// or RL_EPROTO (a value that is not 8 bytes: a damaged cache) / RL_EIO with err filled.
int rl_refcache_get(rl_refcache_t *self, uint64_t data_hash, uint64_t ref_hash, const int64_t *idx,
                    int n, double *sums, uint8_t *found, int *hits, char *err, size_t err_len);

// Stores sums of examples idx[0..n) of (data_hash, ref_hash) in one transaction (replacing
// entries already there). Returns 0 or an error with err filled; on error nothing is stored.
int rl_refcache_put(rl_refcache_t *self, uint64_t data_hash, uint64_t ref_hash, const int64_t *idx,
                    const double *sums, int n, char *err, size_t err_len);

#ifdef __cplusplus
}
#endif
#endif
