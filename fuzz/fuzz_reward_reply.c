// fuzz_reward_reply — libFuzzer target for what command and http rewards read from another
// program: the JSON reply decoder (rl_reward_json_reply, with its rewrite of Python's NaN and
// Infinity words) and the HTTP/1.1 reply parser (rl_reward_http_reply_*), fed in pieces of a
// size the input picks, then its body through the JSON decoder as the client does. Any input
// must give a known code and a message, never a crash, a leak or a read past the input.
// Checked on the way: a decoded score is finite or NaN, never infinite; a complete HTTP reply
// has a status of 200..599 (1xx are skipped) and a NUL-terminated body within the cap; feeding
// after the end changes nothing.
//
// Input layout:
//   byte 0      bit 7: 0 the JSON decoder, 1 the HTTP parser; bit 0: the form (rlctl, openrlhf);
//               bits 1..3: the number of items the reply must score (0..7)
//   byte 1      HTTP only: the size of each piece fed (1..256) and the body cap (16 * (1 + b))
//   the rest    the reply
#include "rl_err.h"
#include "rl_reward_http.h"
#include "rl_reward_json.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void s_json(const char *text, size_t len, int format, size_t n) {
    double out[8];
    char err[512] = "";
    int rc = rl_reward_json_reply(text, len, format, n, out, err, sizeof err);
    if (rc != 0 && rc != RL_EPLUGIN && rc != RL_EPROTO && rc != RL_ENOMEM) {
        abort();
    }
    if ((rc != 0 && rc != RL_EPLUGIN && !err[0]) || !memchr(err, '\0', sizeof err)) {
        abort();
    }
    for (size_t i = 0; rc == 0 && i < n; i++) {
        if (isinf(out[i])) {
            abort();
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 2) {
        return 0;
    }
    int http = data[0] >> 7, format = data[0] & 1;
    size_t n = (data[0] >> 1) & 7;
    size_t len = size - 2;
    char *text = malloc(len ? len : 1); // exactly len bytes: ASan flags a read past the end
    if (!text) {
        return 0;
    }
    memcpy(text, data + 2, len);
    if (!http) {
        s_json(text, len, format, n);
        free(text);
        return 0;
    }
    size_t piece = (size_t)data[1] + 1, cap = 16 * ((size_t)data[1] + 1);
    rl_reward_http_reply_t *p = NULL;
    if (rl_reward_http_reply_new(cap, &p) != 0) {
        free(text);
        return 0;
    }
    char err[512];
    int rc = 0;
    for (size_t i = 0; i < len && rc == 0; i += piece) {
        rc = rl_reward_http_reply_feed(p, text + i, len - i < piece ? len - i : piece, err,
                                       sizeof err);
    }
    if (rc == 0) {
        rc = rl_reward_http_reply_eof(p, err, sizeof err);
    }
    if (rc != 1 && rc != RL_EPROTO) {
        abort();
    }
    if (rc == 1) {
        size_t bl = 0;
        const char *body = rl_reward_http_reply_body(p, &bl);
        int st = rl_reward_http_reply_status(p);
        if (st < 200 || st > 599 || bl > cap || body[bl] != '\0') {
            abort();
        }
        if (rl_reward_http_reply_feed(p, "more", 4, err, sizeof err) != 1) {
            abort(); // complete stays complete
        }
        s_json(body, bl, format, n);
    }
    rl_reward_http_reply_destroy(&p);
    free(text);
    return 0;
}
