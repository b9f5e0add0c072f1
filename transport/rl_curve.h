// rl_curve — CURVE key files (ZeroMQ's Curve25519 keys as 40-character Z85 text): a key pair
// written by `rlctl keygen` (DIR/key: the secret key, mode 0600; DIR/key.pub: the public key),
// read back with the checks ssh makes of its own key files (a secret key readable by anyone else
// is refused), and allowlists of public keys (a file of keys, one per line, `#` comments, or a
// folder of *.pub files). Keys live only in files: never argv, a recipe or a log line (a log
// names a key by its file and its first 8 characters at most).
#ifndef RL_CURVE_H
#define RL_CURVE_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define RL_CURVE_Z85_LEN 40 // a key as Z85 text (32 bytes)

typedef struct {
    char pub[RL_CURVE_Z85_LEN + 1];
    char sec[RL_CURVE_Z85_LEN + 1]; // "" for a public key alone
} rl_curve_key_t;

// Writes a fresh key pair into dir (created 0700 when missing): dir/key (the secret key, mode
// 0600, created exclusively: an existing key is never overwritten unless force) and dir/key.pub.
// *out (may be NULL) gets the pair. Returns 0 or an error naming the file.
int rl_curve_keygen(const char *dir, int force, rl_curve_key_t *out, char *err, size_t err_len);

// Reads a secret key file (one Z85 key; the public key is derived from it). Refuses a file that
// group or others may read or write, or that is not ours. Returns 0 or an error naming the file.
int rl_curve_load_secret(const char *path, rl_curve_key_t *out, char *err, size_t err_len);

// Reads a public key file (one Z85 key). out->sec is "". Returns 0 or an error naming the file.
int rl_curve_load_public(const char *path, rl_curve_key_t *out, char *err, size_t err_len);

// Reads an allowlist: a file of public keys (one per line; blank lines and `#` comments
// skipped; a line that is not a key is an error naming file:line) or a folder whose *.pub files
// each hold one. *keys_p: n Z85 keys of RL_CURVE_Z85_LEN + 1 bytes each (caller owns; free with
// free()). An allowlist with no key is an error. Returns 0 or an error.
int rl_curve_load_allow(const char *path, char (**keys_p)[RL_CURVE_Z85_LEN + 1], int *n_p,
                        char *err, size_t err_len);

// Reads a small secret file (a secret key, a bearer token: at most 1 MiB, a regular file,
// opened without following a link) that must be ours and readable by us alone; `what` names it
// in the refusal ("%s: a <what> must be ours and readable by us alone (mode 0644; chmod 600
// %s)"). *buf_p: its bytes, NUL-terminated (caller owns; wipe and free with free()). Returns 0
// or an error naming the file.
int rl_curve_read_secret(const char *path, const char *what, char **buf_p, char *err,
                         size_t err_len);

// 1 when text[0..len) is a well-formed Z85 key (40 characters of the Z85 alphabet that decode).
int rl_curve_key_valid(const char *text, size_t len);

// The index of the first argument of argv[0..argc) that is a CURVE key, bare or after '='
// (--key=KEY), or -1: commands refuse to run with a key in argv (readable by every user in
// /proc). A key is 40 characters of Z85 that decode; since paths can be such text too, one
// that names an existing file or folder, or whose folder (other than /) exists, is not a key.
int rl_curve_argv_key(int argc, char **argv);

#ifdef __cplusplus
}
#endif
#endif
