// rl_safetensors — reader and writer of the safetensors format (REFERENCE.md §3).
// The reader mmaps a file read-only, validates the whole header before returning (every rule of
// §3, one clear message per violation), and hands out tensors either as borrowed pointers into
// the map (F32 on a little-endian host: zero copy) or converted to F32 (F16, BF16). Sharded
// folders are opened through model.safetensors.index.json. The writer follows the writer rules
// (sort by element size desc then name, header padded with spaces to a multiple of 8,
// "__metadata__": {"format": "pt"}). This module knows nothing about models.
#ifndef RL_SAFETENSORS_H
#define RL_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { RL_DTYPE_F32 = 0, RL_DTYPE_F16 = 1, RL_DTYPE_BF16 = 2 } rl_dtype_t;

#define RL_ST_MAX_DIMS 8
#define RL_ST_MAX_HEADER 100000000ULL // REFERENCE.md §3: reject N > 100,000,000

typedef struct {
    const char *name;              // borrowed; valid until the owning handle is destroyed
    rl_dtype_t dtype;
    int ndim;                      // 0..RL_ST_MAX_DIMS (0 = scalar)
    int64_t shape[RL_ST_MAX_DIMS];
    int64_t numel;                 // product of shape (1 for a scalar)
    const void *data;              // borrowed pointer into the mmap; valid until destroy.
                                   // Little-endian; unaligned when a foreign writer did not
                                   // pad the header to 8 (read through rl_st_to_f32/memcpy)
    size_t nbytes;                 // numel * element size
} rl_st_tensor_t;

// ---- one file ----------------------------------------------------------------------------
typedef struct rl_st_file rl_st_file_t;

// Opens and validates `path`. On failure returns NULL and writes "<path>: <what is wrong>"
// into err (e.g. "header length 123456789012 exceeds the file size 4096", "tensor 'x':
// data_offsets [0,12] overlap tensor 'y' [8,20]", "tensor 'x': dtype I64 is not supported
// (F32, F16, BF16)"). caller owns result; free with rl_st_file_destroy.
rl_st_file_t *rl_st_file_open(const char *path, char *err, size_t err_len);

// Validates a header held in memory: `buf` is the whole file content (8-byte length, JSON,
// data) of `len` bytes. This is the parser the fuzz target drives. Returns 0 or RL_EPROTO /
// RL_EUNSUPPORTED (or RL_ENOMEM) with the message in err (no path prefix). On success, when
// out is non-NULL, returns a handle that borrows `buf` (valid until buf is freed).
// caller owns result; free with rl_st_file_destroy.
int rl_st_parse(const void *buf, size_t len, rl_st_file_t **out, char *err, size_t err_len);

// Like rl_st_file_open, but returns the reason: 0, RL_ENOTFOUND (no such file), a positive
// errno (cannot open/map), RL_EPROTO (malformed), RL_EUNSUPPORTED (e.g. an I64 tensor) or
// RL_ENOMEM; *out is NULL on failure. caller owns *out; free with rl_st_file_destroy.
int rl_st_file_load(const char *path, rl_st_file_t **out, char *err, size_t err_len);

// Number of tensors and the i-th in file order of data offsets. borrowed; valid until destroy.
int rl_st_file_count(const rl_st_file_t *self);
const rl_st_tensor_t *rl_st_file_tensor(const rl_st_file_t *self, int i);
// Looks a tensor up by name (hash lookup). borrowed; valid until destroy. NULL if absent.
const rl_st_tensor_t *rl_st_file_find(const rl_st_file_t *self, const char *name);
// The "__metadata__" value for `key`, or NULL. borrowed; valid until destroy.
const char *rl_st_file_metadata(const rl_st_file_t *self, const char *key);
// Number of "__metadata__" entries and the i-th key (file order), NULL when out of range.
// borrowed; valid until destroy.
int rl_st_file_metadata_count(const rl_st_file_t *self);
const char *rl_st_file_metadata_key(const rl_st_file_t *self, int i);

void rl_st_file_destroy(rl_st_file_t **self_p);

// ---- a model folder (model.safetensors, or shards listed in model.safetensors.index.json) ---
typedef struct rl_st_model rl_st_model_t;

// Opens every shard of a folder. With an index, every weight_map entry must exist in the shard
// it names and every shard tensor must be listed; a name in two shards is an error. On failure
// NULL and a message in err. caller owns result; free with rl_st_model_destroy.
// A folder holding model.safetensors uses it (an index beside it is ignored, as transformers
// does); otherwise the index; neither is RL_ENOTFOUND. Shard names in the index must be plain
// file names inside the folder (no '/', '\\' or '..').
rl_st_model_t *rl_st_model_open(const char *dir, char *err, size_t err_len);
// Like rl_st_model_open, but returns the reason: 0, RL_ENOTFOUND (no folder, or neither file
// in it), a positive errno, RL_EINVAL (not a folder), RL_EPROTO, RL_EUNSUPPORTED or
// RL_ENOMEM; *out is NULL on failure. caller owns *out; free with rl_st_model_destroy.
int rl_st_model_load(const char *dir, rl_st_model_t **out, char *err, size_t err_len);
// Tensors in shard order (shards sorted by file name), then data-offset order within a shard.
// borrowed; valid until destroy.
int rl_st_model_count(const rl_st_model_t *self);
const rl_st_tensor_t *rl_st_model_tensor(const rl_st_model_t *self, int i);
const rl_st_tensor_t *rl_st_model_find(const rl_st_model_t *self, const char *name);
// Number of shard files and the i-th file name (sorted). borrowed; valid until destroy.
int rl_st_model_shard_count(const rl_st_model_t *self);
const char *rl_st_model_shard_name(const rl_st_model_t *self, int i);
void rl_st_model_destroy(rl_st_model_t **self_p);

// ---- conversion ----------------------------------------------------------------------------
// Copies a tensor into `dst` as F32 (numel floats): F32 copies, BF16 is a 16-bit shift, F16
// converts exactly (subnormals, inf, nan).
void rl_st_to_f32(float *dst, const rl_st_tensor_t *t);
// The index of the first element of t that is NaN or +-inf (read from its bytes, in its own
// dtype: any alignment), or -1 when every element is finite. One pass over the data; callers
// that load weights refuse such a tensor by name.
int64_t rl_st_nonfinite(const rl_st_tensor_t *t);
// 0 when every element of t is finite; else RL_EINVAL with "<where>: tensor '<name>' holds a
// non-finite value (nan at element 1234 of [64, 32]); the weights are damaged" in err.
int rl_st_check_finite(const rl_st_tensor_t *t, const char *where, char *err, size_t err_len);
// F32 -> BF16 with round-to-nearest-even (NaN stays NaN). F32 -> F16 likewise.
uint16_t rl_f32_to_bf16(float x);
float rl_bf16_to_f32(uint16_t x);
uint16_t rl_f32_to_f16(float x);
float rl_f16_to_f32(uint16_t x);
size_t rl_dtype_size(rl_dtype_t dt);     // 4, 2, 2
const char *rl_dtype_name(rl_dtype_t dt); // "F32", "F16", "BF16"

// ---- writer --------------------------------------------------------------------------------
typedef struct rl_st_writer rl_st_writer_t;

// Collects tensors to write. caller owns result; free with rl_st_writer_destroy.
rl_st_writer_t *rl_st_writer_new(void);
// Adds a tensor; `data` holds numel elements of `dtype` and is borrowed until write returns.
// Returns RL_EINVAL for a duplicate name or bad shape.
int rl_st_writer_add(rl_st_writer_t *self, const char *name, rl_dtype_t dtype, int ndim,
                     const int64_t *shape, const void *data);
// Adds a tensor from F32 data, converting to `dtype` (BF16/F16 round to nearest even).
int rl_st_writer_add_f32(rl_st_writer_t *self, const char *name, rl_dtype_t dtype, int ndim,
                         const int64_t *shape, const float *data);
// Adds a "__metadata__" string entry ("format": "pt" is always written).
int rl_st_writer_set_metadata(rl_st_writer_t *self, const char *key, const char *value);
// Writes the file atomically (temp file + rename). Returns 0 or an error with err filled.
int rl_st_writer_write(rl_st_writer_t *self, const char *path, char *err, size_t err_len);
// Writes the tensors into `dir` (which must exist) in shards of at most `max_shard_bytes` of
// tensor data (a larger tensor gets a shard of its own), filled greedily in the order the
// tensors were added, named model-00001-of-0000N.safetensors, then
// model.safetensors.index.json ({"metadata": {"total_size"}, "weight_map"}, keys sorted) last.
// When everything fits one shard, writes dir/model.safetensors and no index. Every file is
// written atomically; shards of an earlier save with another count are not removed. Returns 0
// or an error with err filled.
int rl_st_writer_write_sharded(rl_st_writer_t *self, const char *dir, size_t max_shard_bytes,
                               char *err, size_t err_len);
void rl_st_writer_destroy(rl_st_writer_t **self_p);

#ifdef __cplusplus
}
#endif
#endif
