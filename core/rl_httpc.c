// rl_httpc — rlctl's HTTP/1.1 client: the URL, a reply parser fed in arbitrary pieces (a state
// machine: head, then a body by Content-Length, by chunks, or up to the close), one POST per
// attempt over a non-blocking socket with every wait bounded by poll(), and the attempts with
// their backoff. Everything the server sends is untrusted: heads, chunk sizes and bodies have
// caps; what the body means is the caller's.
#include "rl_httpc.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include "rl_clock.h"
#include "rl_err.h"
#include "rl_version.h"

#define S_MAX_HEAD 65536  // bytes of a reply's status line and headers
#define S_MAX_LINE 1024   // bytes of a chunk-size or trailer line
#define S_BACKOFF0 0.25   // seconds before the first retry; doubling
#define S_BACKOFF_MAX 4.0 // ... up to this

// ---------------------------------------------------------------------------------------------
// the URL

int rl_httpc_url_parse(const char *url, const char *who, rl_httpc_url_t *out, char *err,
                       size_t err_len) {
    memset(out, 0, sizeof *out);
    if (!strncmp(url, "https://", 8)) {
        return rl_errf(err, err_len, RL_EINVAL,
                       "%s: https is not supported: rlctl's %s client speaks plain http (serve "
                       "the %s on loopback or a private network, or put a TLS proxy in front of "
                       "it on this host)",
                       url, who, who);
    }
    if (strncmp(url, "http://", 7) != 0) {
        return rl_errf(err, err_len, RL_EINVAL, "'%s' is not an http:// URL", url);
    }
    for (const char *p = url; *p; p++) {
        if ((unsigned char)*p <= ' ' || *p == 0x7f) {
            return rl_errf(err, err_len, RL_EINVAL, "%s: a space or control byte in the URL", url);
        }
    }
    if (strchr(url, '#')) {
        return rl_errf(err, err_len, RL_EINVAL, "%s: a #fragment, which a request cannot carry",
                       url);
    }
    const char *h = url + 7;
    size_t alen = strcspn(h, "/?");
    if (alen == 0 || alen >= sizeof out->authority) {
        return rl_errf(err, err_len, RL_EINVAL, "%s: %s", url, alen ? "host too long" : "no host");
    }
    memcpy(out->authority, h, alen);
    if (memchr(h, '@', alen)) {
        return rl_errf(err, err_len, RL_EINVAL, "%s: user@ credentials are not supported", url);
    }
    const char *hs = h, *he, *port = NULL;
    if (*h == '[') {
        const char *rb = memchr(h, ']', alen);
        if (!rb || rb == h + 1 || (rb + 1 < h + alen && rb[1] != ':')) {
            return rl_errf(err, err_len, RL_EINVAL, "%s: a bad [IPv6] host", url);
        }
        hs = h + 1;
        he = rb;
        port = rb + 1 < h + alen ? rb + 1 : NULL;
    } else {
        port = memchr(h, ':', alen);
        he = port ? port : h + alen;
    }
    if (he == hs || (size_t)(he - hs) >= sizeof out->host) {
        return rl_errf(err, err_len, RL_EINVAL, "%s: %s", url,
                       he == hs ? "no host" : "host too long");
    }
    memcpy(out->host, hs, (size_t)(he - hs));
    if (port) {
        const char *p = port + 1, *end = h + alen;
        long v = 0;
        for (; p < end && *p >= '0' && *p <= '9' && v <= 65535; p++) {
            v = v * 10 + (*p - '0');
        }
        if (p == port + 1 || p != end || v < 1 || v > 65535) {
            return rl_errf(err, err_len, RL_EINVAL, "%s: the port is not a number in 1..65535",
                           url);
        }
        snprintf(out->port, sizeof out->port, "%ld", v);
    } else {
        snprintf(out->port, sizeof out->port, "80");
    }
    const char *path = h + alen;
    if (strlen(path) + 2 > sizeof out->path) {
        return rl_errf(err, err_len, RL_EINVAL, "%s: path too long", url);
    }
    snprintf(out->path, sizeof out->path, "%s%s", *path == '/' ? "" : "/", path);
    return 0;
}

// ---------------------------------------------------------------------------------------------
// the reply parser

enum {
    S_HEAD,
    S_LEN,
    S_CHUNK_SIZE,
    S_CHUNK_DATA,
    S_CHUNK_END,
    S_TRAILER,
    S_UNTIL_EOF,
    S_DONE,
    S_ERR
};

struct rl_httpc_reply {
    size_t max_body;
    int state; // S_*
    int status;
    char *head; // the head so far; S_MAX_HEAD + 1 bytes
    size_t head_len;
    char *body; // max_body + 1 bytes at most, NUL-terminated
    size_t body_len, body_cap;
    unsigned long long left; // body bytes still to come (S_LEN) or of this chunk (S_CHUNK_DATA)
    char line[S_MAX_LINE + 1];
    size_t line_len;
    char why[256]; // the error, for later calls
};

int rl_httpc_reply_new(size_t max_body, rl_httpc_reply_t **out) {
    *out = NULL;
    rl_httpc_reply_t *p = calloc(1, sizeof *p);
    if (!p || !(p->head = malloc(S_MAX_HEAD + 1)) || !(p->body = malloc(1))) {
        if (p) {
            free(p->head);
        }
        free(p);
        return RL_ENOMEM;
    }
    p->body[0] = '\0';
    p->body_cap = 1;
    p->max_body = max_body;
    *out = p;
    return 0;
}

void rl_httpc_reply_destroy(rl_httpc_reply_t **p_p) {
    if (!p_p || !*p_p) {
        return;
    }
    free((*p_p)->head);
    free((*p_p)->body);
    free(*p_p);
    *p_p = NULL;
}

int rl_httpc_reply_status(const rl_httpc_reply_t *p) {
    return p->status;
}

const char *rl_httpc_reply_body(const rl_httpc_reply_t *p, size_t *len) {
    *len = p->body_len;
    return p->body;
}

static int s_fail(rl_httpc_reply_t *p, const char *fmt, const char *arg) {
    snprintf(p->why, sizeof p->why, fmt, arg);
    p->state = S_ERR;
    return RL_EPROTO;
}

// Appends d[0..n) to the body within max_body. Returns 0 or RL_EPROTO.
static int s_body(rl_httpc_reply_t *p, const char *d, size_t n) {
    if (n > p->max_body - p->body_len) {
        char m[32];
        snprintf(m, sizeof m, "%zu", p->max_body);
        return s_fail(p, "the reply's body is longer than %s bytes", m);
    }
    if (p->body_len + n + 1 > p->body_cap) {
        size_t cap = p->body_cap;
        while (cap < p->body_len + n + 1) {
            cap = cap < p->max_body / 2 ? cap * 2 + 64 : p->max_body + 1;
        }
        char *b = realloc(p->body, cap);
        if (!b) {
            return s_fail(p, "%s", "out of memory");
        }
        p->body = b;
        p->body_cap = cap;
    }
    memcpy(p->body + p->body_len, d, n);
    p->body_len += n;
    p->body[p->body_len] = '\0';
    return 0;
}

// 1 when the header line `l` (its name ends at `colon`) is called `name` (any case).
static int s_is(const char *l, const char *colon, const char *name) {
    size_t n = strlen(name);
    if ((size_t)(colon - l) != n) {
        return 0;
    }
    for (size_t i = 0; i < n; i++) {
        char a = l[i], b = name[i];
        a = a >= 'A' && a <= 'Z' ? (char)(a - 'A' + 'a') : a;
        if (a != b) {
            return 0;
        }
    }
    return 1;
}

// A header's value: spaces and tabs trimmed, lower case when `lower` (into out, cut to cap).
static void s_value(const char *v, const char *end, int lower, char *out, size_t cap) {
    while (v < end && (*v == ' ' || *v == '\t')) {
        v++;
    }
    while (end > v && (end[-1] == ' ' || end[-1] == '\t' || end[-1] == '\r')) {
        end--;
    }
    size_t n = (size_t)(end - v) < cap - 1 ? (size_t)(end - v) : cap - 1;
    for (size_t i = 0; i < n; i++) {
        char c = v[i];
        out[i] = lower && c >= 'A' && c <= 'Z' ? (char)(c - 'A' + 'a') : c;
    }
    out[n] = '\0';
}

// Parses the head p->head[0..len): the status line and the headers that frame the body. Sets
// the next state. Returns 0 or RL_EPROTO.
static int s_parse_head(rl_httpc_reply_t *p, size_t len) {
    char *h = p->head, *end = h + len;
    *--end = '\0'; // the last '\n' of the blank line
    if (len < 12 || memcmp(h, "HTTP/1.", 7) != 0 || h[7] < '0' || h[7] > '9' || h[8] != ' ' ||
        h[9] < '1' || h[9] > '5' || h[10] < '0' || h[10] > '9' || h[11] < '0' || h[11] > '9') {
        char q[64];
        size_t n = strcspn(h, "\r\n");
        snprintf(q, sizeof q, "%.*s", (int)(n < 60 ? n : 60), h);
        return s_fail(p, "not an HTTP/1.x status line: '%s'", q);
    }
    p->status = (h[9] - '0') * 100 + (h[10] - '0') * 10 + (h[11] - '0');
    long long clen = -1;
    int chunked = 0;
    char v[128];
    for (char *l = strchr(h, '\n'); l && l + 1 < end; l = strchr(l, '\n')) {
        l++;
        char *eol = strchr(l, '\n');
        eol = eol ? eol : end;
        char *colon = memchr(l, ':', (size_t)(eol - l));
        if (!colon) {
            continue; // the blank line's '\r', or a line no server should send: not ours
        }
        if (s_is(l, colon, "content-length")) {
            s_value(colon + 1, eol, 0, v, sizeof v);
            char *e = NULL;
            errno = 0;
            long long x = v[0] >= '0' && v[0] <= '9' ? strtoll(v, &e, 10) : -1;
            if (x < 0 || errno || *e || (clen >= 0 && clen != x)) {
                return s_fail(p, "a bad Content-Length: '%s'", v);
            }
            clen = x;
        } else if (s_is(l, colon, "transfer-encoding")) {
            s_value(colon + 1, eol, 1, v, sizeof v);
            if (!strcmp(v, "chunked")) {
                chunked = 1;
            } else if (strcmp(v, "identity") != 0) {
                return s_fail(p, "transfer coding '%s' is not supported (only chunked)", v);
            }
        } else if (s_is(l, colon, "content-encoding")) {
            s_value(colon + 1, eol, 1, v, sizeof v);
            if (v[0] && strcmp(v, "identity") != 0) {
                return s_fail(p,
                              "content coding '%s' is not supported (the request asks for "
                              "none)",
                              v);
            }
        }
        l = eol;
    }
    if (p->status >= 100 && p->status < 200) {
        p->status = 0; // 100 Continue and the like: the real reply follows
        p->state = S_HEAD;
    } else if (p->status == 204 || p->status == 304) {
        p->state = S_DONE;
    } else if (chunked) {
        p->state = S_CHUNK_SIZE;
    } else if (clen >= 0) {
        if ((unsigned long long)clen > p->max_body) {
            char m[32];
            snprintf(m, sizeof m, "%zu", p->max_body);
            return s_fail(p, "the reply's body is longer than %s bytes", m);
        }
        p->left = (unsigned long long)clen;
        p->state = clen ? S_LEN : S_DONE;
    } else {
        p->state = S_UNTIL_EOF;
    }
    return 0;
}

// A complete line of a chunked body (p->line, its '\n' dropped).
static int s_chunk_line(rl_httpc_reply_t *p) {
    char *l = p->line;
    size_t n = p->line_len;
    if (n && l[n - 1] == '\r') {
        n--;
    }
    l[n] = '\0';
    if (p->state == S_CHUNK_END) {
        if (n) {
            return s_fail(p, "no line end after a chunk's data: '%.60s'", l);
        }
        p->state = S_CHUNK_SIZE;
        return 0;
    }
    if (p->state == S_TRAILER) {
        p->state = n ? S_TRAILER : S_DONE; // trailer fields are not ours
        return 0;
    }
    unsigned long long size = 0;
    size_t i = 0;
    for (; i < n; i++) {
        char c = l[i];
        int d = c >= '0' && c <= '9'   ? c - '0'
                : c >= 'a' && c <= 'f' ? c - 'a' + 10
                : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                       : -1;
        if (d < 0) {
            break;
        }
        if (size > (~0ull >> 4)) { // one more digit would overflow
            return s_fail(p, "a chunk size too large: '%.60s'", l);
        }
        size = size * 16 + (unsigned)d;
    }
    if (i == 0 || (i < n && l[i] != ';' && l[i] != ' ' && l[i] != '\t')) {
        return s_fail(p, "a bad chunk size line: '%.60s'", l);
    }
    if (size > p->max_body - p->body_len) {
        char m[32];
        snprintf(m, sizeof m, "%zu", p->max_body);
        return s_fail(p, "the reply's body is longer than %s bytes", m);
    }
    p->left = size;
    p->state = size ? S_CHUNK_DATA : S_TRAILER;
    return 0;
}

int rl_httpc_reply_feed(rl_httpc_reply_t *p, const char *d, size_t n, char *err, size_t err_len) {
    size_t i = 0;
    while (p->state != S_DONE && p->state != S_ERR && i < n) {
        size_t avail = n - i;
        switch (p->state) {
        case S_HEAD: {
            size_t take =
                avail < S_MAX_HEAD + 1 - p->head_len ? avail : S_MAX_HEAD + 1 - p->head_len;
            size_t from = p->head_len > 3 ? p->head_len - 3 : 0;
            memcpy(p->head + p->head_len, d + i, take);
            p->head_len += take;
            size_t e = 0;
            for (size_t k = from; k < p->head_len && !e; k++) {
                if (p->head[k] == '\n' && k >= 1 &&
                    (p->head[k - 1] == '\n' ||
                     (k >= 3 && p->head[k - 1] == '\r' && p->head[k - 2] == '\n'))) {
                    e = k + 1;
                }
            }
            if (!e) {
                if (p->head_len > S_MAX_HEAD) {
                    s_fail(p, "the reply's head is longer than %s bytes", "65536");
                }
                i += take;
                break;
            }
            i += take - (p->head_len - e); // the bytes after the head go to the body
            if (s_parse_head(p, e) == 0) {
                p->head_len = 0;
            }
            break;
        }
        case S_LEN:
        case S_CHUNK_DATA: {
            size_t take = avail < p->left ? avail : (size_t)p->left;
            if (s_body(p, d + i, take) != 0) {
                break;
            }
            i += take;
            p->left -= take;
            if (!p->left) {
                p->state = p->state == S_LEN ? S_DONE : S_CHUNK_END;
            }
            break;
        }
        case S_CHUNK_SIZE:
        case S_CHUNK_END:
        case S_TRAILER: {
            const char *nl = memchr(d + i, '\n', avail);
            size_t take = nl ? (size_t)(nl - (d + i)) : avail;
            if (p->line_len + take > S_MAX_LINE) {
                s_fail(p, "a chunk line longer than %s bytes", "1024");
                break;
            }
            memcpy(p->line + p->line_len, d + i, take);
            p->line_len += take;
            i += take + (nl != NULL);
            if (nl) {
                s_chunk_line(p);
                p->line_len = 0;
            }
            break;
        }
        case S_UNTIL_EOF:
            if (s_body(p, d + i, avail) == 0) {
                i = n;
            }
            break;
        default: break;
        }
    }
    if (p->state == S_ERR) {
        return rl_errf(err, err_len, RL_EPROTO, "%s", p->why);
    }
    return p->state == S_DONE;
}

int rl_httpc_reply_eof(rl_httpc_reply_t *p, char *err, size_t err_len) {
    switch (p->state) {
    case S_DONE: return 1;
    case S_UNTIL_EOF: p->state = S_DONE; return 1;
    case S_ERR: return rl_errf(err, err_len, RL_EPROTO, "%s", p->why);
    case S_HEAD:
        return rl_errf(err, err_len, RL_EPROTO, "the server closed the connection %s",
                       p->head_len ? "inside the reply's head" : "without a reply");
    case S_LEN:
        return rl_errf(err, err_len, RL_EPROTO,
                       "the server closed the connection %llu bytes before the end of the "
                       "body its Content-Length announced",
                       p->left);
    default:
        return rl_errf(err, err_len, RL_EPROTO,
                       "the server closed the connection inside the chunked body");
    }
}

// ---------------------------------------------------------------------------------------------
// one POST

// Waits until fd is ready for `events` or until t_end (monotonic seconds). Returns 1 ready,
// 0 timed out, -1 on a poll error.
static int s_wait(int fd, short events, double t_end) {
    for (;;) {
        double left = t_end - rl_clock_now();
        if (left <= 0) {
            return 0;
        }
        struct pollfd pf = {fd, events, 0};
        int ms = (int)fmin(ceil(left * 1000), 1e9);
        int r = poll(&pf, 1, ms);
        if (r > 0) {
            return 1;
        }
        if (r < 0 && errno != EINTR) {
            return -1;
        }
    }
}

// A connected non-blocking socket to the URL's host, or -1 with why filled.
static int s_connect(const rl_httpc_url_t *u, double t_end, int *retry, char *why, size_t why_len) {
    struct addrinfo hints, *ai = NULL;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICSERV;
    int g = getaddrinfo(u->host, u->port, &hints, &ai);
    if (g != 0) {
        *retry = g == EAI_AGAIN;
        snprintf(why, why_len, "cannot resolve %s: %s", u->host, gai_strerror(g));
        return -1;
    }
    int fd = -1;
    snprintf(why, why_len, "no address to connect to");
    for (struct addrinfo *a = ai; a && fd < 0; a = a->ai_next) {
        fd = socket(a->ai_family, a->ai_socktype, a->ai_protocol);
        if (fd < 0) {
            snprintf(why, why_len, "socket: %s", strerror(errno));
            continue;
        }
        fcntl(fd, F_SETFD, FD_CLOEXEC);
        fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
        int e = connect(fd, a->ai_addr, a->ai_addrlen) == 0 ? 0 : errno;
        if (e == EINPROGRESS) {
            int w = s_wait(fd, POLLOUT, t_end);
            socklen_t sl = sizeof e;
            e = w == 0                                               ? ETIMEDOUT
                : w < 0                                              ? errno
                : getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &sl) != 0 ? errno
                                                                     : e;
        }
        if (e != 0) {
            snprintf(why, why_len, "cannot connect: %s", strerror(e));
            close(fd);
            fd = -1;
        }
    }
    freeaddrinfo(ai);
    *retry = fd < 0;
    return fd;
}

// One POST of body[0..len) with the whole exchange done by t_end. Returns 0 with the reply in
// rep, or 1 with why filled; *retry says whether another attempt may help (no connection, or
// the connection lost before a whole reply).
static int s_post(const rl_httpc_url_t *u, const char *body, size_t len, double t_end,
                  rl_httpc_reply_t *rep, int *retry, char *why, size_t why_len) {
    *retry = 0;
    double t0 = rl_clock_now();
    int fd = s_connect(u, t_end, retry, why, why_len);
    if (fd < 0) {
        return 1;
    }
    char head[3072];
    int hl = snprintf(head, sizeof head,
                      "POST %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: rlctl/%s\r\n"
                      "Content-Type: application/json\r\nAccept: application/json\r\n"
                      "Content-Length: %zu\r\nConnection: close\r\n\r\n",
                      u->path, u->authority, RLCTL_VERSION, len);
    const char *parts[2] = {head, body};
    size_t sizes[2] = {(size_t)hl, len};
    int rc = 0;
    for (int k = 0; k < 2 && !rc; k++) {
        for (size_t sent = 0; sent < sizes[k] && !rc;) {
            ssize_t w = send(fd, parts[k] + sent, sizes[k] - sent, MSG_NOSIGNAL);
            if (w > 0) {
                sent += (size_t)w;
            } else if (w < 0 && (errno == EAGAIN || errno == EINTR)) {
                if (s_wait(fd, POLLOUT, t_end) <= 0) {
                    rc = 1;
                    snprintf(why, why_len, "no progress sending the request within %.3g s",
                             t_end - t0);
                }
            } else {
                rc = 1;
                *retry = 1; // a server restarting drops connections
                snprintf(why, why_len, "the connection broke while sending the request: %s",
                         strerror(errno));
            }
        }
    }
    char buf[65536], perr[512];
    while (!rc) {
        int w = s_wait(fd, POLLIN, t_end);
        if (w <= 0) {
            rc = 1;
            snprintf(why, why_len, "no whole reply within %.3g s", t_end - t0);
            break;
        }
        ssize_t r = recv(fd, buf, sizeof buf, 0);
        int done;
        if (r > 0) {
            done = rl_httpc_reply_feed(rep, buf, (size_t)r, perr, sizeof perr);
        } else if (r == 0) {
            done = rl_httpc_reply_eof(rep, perr, sizeof perr);
            *retry = done != 1 && rl_httpc_reply_status(rep) == 0;
        } else if (errno == EAGAIN || errno == EINTR) {
            continue;
        } else {
            rc = 1;
            *retry = rl_httpc_reply_status(rep) == 0;
            snprintf(why, why_len, "the connection broke before a whole reply: %s",
                     strerror(errno));
            break;
        }
        if (done == 1) {
            break;
        }
        if (done < 0) {
            rc = 1;
            snprintf(why, why_len, "%s%s", r == 0 ? "" : "a malformed reply: ", perr);
        }
    }
    close(fd);
    return rc;
}

// ---------------------------------------------------------------------------------------------
// the attempts

static void s_sleep(double s) {
    struct timespec ts = {(time_t)s, (long)((s - floor(s)) * 1e9)};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

int rl_httpc_post(const rl_httpc_opts_t *o, const char *body, size_t len, rl_httpc_reply_t **out,
                  char *err, size_t err_len) {
    *out = NULL;
    double t_all = o->limit > 0 ? rl_clock_now() + o->limit : INFINITY;
    char why[768] = "", ex[1024];
    int attempts = 0, rc = RL_EIO, retry = 0;
    rl_httpc_reply_t *rep = NULL;
    for (;;) {
        attempts++;
        double now = rl_clock_now();
        double t_end = fmin(now + o->timeout, t_all);
        rl_httpc_reply_destroy(&rep);
        if (rl_httpc_reply_new(o->max_body, &rep) != 0) {
            rc = rl_errf(err, err_len, RL_ENOMEM, "out of memory");
            break;
        }
        int pr = s_post(&o->url, body, len, t_end, rep, &retry, why, sizeof why);
        if (pr != 0 && t_end < now + o->timeout && rl_clock_now() >= t_end) {
            size_t l = strlen(why); // the limit, not the attempt's timeout, cut it short
            snprintf(why + l, sizeof why - l, " (the time left of %s)",
                     o->limit_name ? o->limit_name : "the request's limit");
        }
        int status = pr == 0 ? rl_httpc_reply_status(rep) : 0;
        if (pr == 0 && status >= 200 && status < 300) {
            *out = rep;
            rep = NULL;
            rc = 0;
            break;
        }
        if (pr == 0) {
            size_t blen = 0;
            const char *b = rl_httpc_reply_body(rep, &blen);
            rl_err_excerpt(b, blen, 200, ex, sizeof ex);
            snprintf(why, sizeof why, "HTTP %d%s%.700s", status, blen ? ": " : "", ex);
            retry = status >= 500;
        }
        double wait = fmin(S_BACKOFF0 * pow(2, attempts - 1), S_BACKOFF_MAX);
        if (!retry || attempts > o->retries || rl_clock_now() + wait >= t_all) {
            char tries[48] = "";
            if (attempts > 1) {
                snprintf(tries, sizeof tries, " after %d attempts", attempts);
            }
            rc = rl_errf(err, err_len, RL_EIO, "POST %s failed%s: %s", o->url_text, tries, why);
            break;
        }
        s_sleep(wait);
    }
    rl_httpc_reply_destroy(&rep);
    return rc;
}
