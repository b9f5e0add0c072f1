// rl_err — error code names, the caller-buffer error helper and excerpts for messages.
#include "rl_err.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *rl_strerror(int code) {
    switch (code) {
    case RL_OK: return "success";
    case RL_ENOMEM: return "out of memory";
    case RL_EINVAL: return "invalid argument or content";
    case RL_EIO: return "input/output error";
    case RL_EPROTO: return "malformed message or file";
    case RL_EVERSION: return "unsupported version";
    case RL_ETIMEOUT: return "timed out";
    case RL_EPLUGIN: return "plugin error";
    case RL_ENOTFOUND: return "not found";
    case RL_EUNSUPPORTED: return "unsupported";
    case RL_ECANCELED: return "cancelled";
    default: break;
    }
    if (code > 0) {
        return strerror(code);
    }
    return "unknown error";
}

void rl_err_excerpt(const char *t, size_t len, size_t most, char *out, size_t cap) {
    size_t o = 0, i = 0;
    for (; i < len && i < most && o + 8 < cap; i++) {
        unsigned char c = (unsigned char)t[i];
        if (c < 0x20 || c == 0x7f) {
            o += (size_t)snprintf(out + o, cap - o, "\\x%02x", c);
        } else {
            out[o++] = (char)c;
        }
    }
    if (i < len && o + 4 < cap) {
        memcpy(out + o, "...", 3);
        o += 3;
    }
    out[o] = '\0';
}

int rl_errf(char *err, size_t err_len, int code, const char *fmt, ...) {
    if (err && err_len > 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, err_len, fmt, ap);
        va_end(ap);
    }
    return code;
}

void rl_assert_fail(const char *expr, const char *file, int line) {
    fprintf(stderr, "rlctl: assertion failed: %s (%s:%d)\n", expr, file, line);
    fflush(stderr);
    abort();
}
