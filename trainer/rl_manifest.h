// rl_manifest — the file list of a folder with each file's size and CRC-32C, kept in the folder
// as manifest.json: written once the folder is complete, checked before the folder is used. It
// is how a checkpoint (rl_checkpoint) tells a damaged file from a good one: a bit flipped on
// disk, a file cut short, replaced or added after the checkpoint was written.
//
// manifest.json (format "rlctl-manifest", version 1):
//   {"format": "rlctl-manifest", "version": 1, "checksum": "crc32c",
//    "files": {"adapter/adapter_config.json": {"size": 812, "crc32c": "1a2b3c4d"}, ...}}
// Paths are relative to the folder, '/'-separated, one entry per regular file under it (sub-
// folders included) except manifest.json itself and the top-level names the caller skips.
//
// CRC-32C, not a cryptographic hash: it finds accidental damage (every burst of up to 32 bits,
// any other change with probability 1 - 2^-32), and a hash would add nothing against someone who
// can write the folder, since they can rewrite manifest.json too. Not a general archive format;
// links and special files are refused, never followed.
#ifndef RL_MANIFEST_H
#define RL_MANIFEST_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define RL_MANIFEST_FILE "manifest.json"
#define RL_MANIFEST_FORMAT_VERSION 1

// Writes <dir>/manifest.json listing every regular file under dir (recursively, sorted) but
// manifest.json and the top-level names in `skip` (a NULL-terminated list, or NULL), each with
// its size and CRC-32C read back from the file, and fsyncs it. *crc_out gets the CRC-32C of
// manifest.json's own bytes (for a marker that names it). Returns 0, or RL_EINVAL (a link or
// special file under dir, named) or an errno, with the message in err.
int rl_manifest_write(const char *dir, const char *const *skip, uint32_t *crc_out, char *err,
                      size_t err_len);

// Checks the folder against <dir>/manifest.json: with has_crc, manifest.json's own bytes must
// have CRC-32C `crc`; then every listed file must exist with its size, no other regular file may
// be there (but manifest.json and the names in skip), and every file's CRC-32C must match
// (sizes are compared first, so a file cut short is found without reading the folder). Returns
// 0, RL_ENOTFOUND (no manifest.json), RL_EPROTO with err naming the first file that differs and
// how ("<dir>/adapter/adapter_model.safetensors: checksum mismatch (crc32c 0c1d2e3f,
// manifest.json says 1a2b3c4d); the file changed after it was written"), RL_EVERSION (a
// manifest of a newer format), RL_EINVAL (a link or special file) or an errno.
int rl_manifest_verify(const char *dir, const char *const *skip, int has_crc, uint32_t crc,
                       char *err, size_t err_len);

#ifdef __cplusplus
}
#endif
#endif
