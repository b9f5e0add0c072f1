// rl_err — error codes shared by every rlctl library.
// Library calls return 0 on success, a negative RL_E* code, or a positive errno passed through
// unchanged (LMDB style). rl_strerror() names both. This module is not a logger: details of a
// failure go into a handle's errmsg or a caller buffer, never into a global.
#ifndef RL_ERR_H
#define RL_ERR_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

enum {
    RL_OK = 0,
    RL_ENOMEM = -1001,   // allocation failed
    RL_EINVAL = -1002,   // invalid argument or invalid content (bad recipe, bad file)
    RL_EIO = -1003,      // read/write failed or file truncated
    RL_EPROTO = -1004,   // malformed message or file structure
    RL_EVERSION = -1005, // unsupported version (protocol, ABI, format)
    RL_ETIMEOUT = -1006, // a peer or plugin did not answer in time
    RL_EPLUGIN = -1007,  // a plugin failed to load or returned an error
    RL_ENOTFOUND = -1008,// a named thing (file, key, tensor) does not exist
    RL_EUNSUPPORTED = -1009, // valid input we refuse by design (unknown architecture, dtype)
    RL_ECANCELED = -1010, // stopped on request (a signal) before it finished
};

// Returns a static description of `code` (RL_E* or positive errno); never NULL.
// borrowed; valid until program exit.
const char *rl_strerror(int code);

// printf into a caller buffer `err` of `err_len` bytes; a no-op when err is NULL or err_len 0.
// Always NUL-terminates (truncating). Returns `code` so callers can `return rl_errf(...)`.
int rl_errf(char *err, size_t err_len, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

// The start of t[0..len) for a message, into out (cap bytes, NUL-terminated): at most `most`
// bytes of it, control bytes as \xNN, "..." when cut.
void rl_err_excerpt(const char *t, size_t len, size_t most, char *out, size_t cap);

// Abort with file:line and the expression; stays on in every build (programmer errors only).
#define RL_ASSERT(x)                                                                  \
    do {                                                                              \
        if (!(x)) {                                                                   \
            rl_assert_fail(#x, __FILE__, __LINE__);                                   \
        }                                                                             \
    } while (0)
_Noreturn void rl_assert_fail(const char *expr, const char *file, int line);

#ifdef __cplusplus
}
#endif
#endif
