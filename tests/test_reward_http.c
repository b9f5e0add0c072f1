// tests for rl_reward_http (rewards on a server) and the recipe's `http:` key:
//   1. URLs: the forms accepted, and each refusal (https first of all) with its reason;
//   2. the reply parser on replies fed whole and a byte at a time: Content-Length, chunked
//      (extensions, trailers), up to the close, 100 Continue, 204, and every malformed or
//      oversized one refused;
//   3. live, against tests/reward_server.py on loopback: both forms score what the built-in
//      math_answer scores; a server that fails twice with 500 succeeds on the third attempt;
//      one that always fails is given up after 1 + retries attempts with the status in the
//      message; a 404 is not retried; a port nobody listens on is an error naming the URL;
//      the time all attempts take stays within the reward's deadline;
//   4. the recipe: url, timeout, format and retries with their defaults and checks.
#include <math.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "rl_clock.h"
#include "rl_algos.h"
#include "rl_config.h"
#include "rl_err.h"
#include "rl_reward.h"
#include "rl_reward_http.h"
#include "rl_test.h"

#define PY "/usr/bin/python3"
#define SERVER_PY RL_SOURCE_DIR "/tests/reward_server.py"

static char s_err[4096];
static char s_tmp[] = "/tmp/rl_test_reward_http_XXXXXX";

// ---------------------------------------------------------------------------------------------
// 1. URLs

static void s_url_ok(const char *url, const char *host, const char *port, const char *path,
                     const char *authority) {
    rl_reward_http_url_t u;
    int rc = rl_reward_http_url_parse(url, &u, s_err, sizeof s_err);
    CHECK_MSG(rc == 0, "%s: %s", url, s_err);
    if (!rc) {
        CHECK_STR(u.host, host);
        CHECK_STR(u.port, port);
        CHECK_STR(u.path, path);
        CHECK_STR(u.authority, authority);
    }
}

static void s_url_bad(const char *url, const char *needle) {
    rl_reward_http_url_t u;
    CHECK_MSG(rl_reward_http_url_parse(url, &u, s_err, sizeof s_err) == RL_EINVAL,
              "%s was accepted", url);
    CHECK_CONTAINS(s_err, needle);
}

static void test_urls(void) {
    s_url_ok("http://127.0.0.1:8000/score", "127.0.0.1", "8000", "/score", "127.0.0.1:8000");
    s_url_ok("http://localhost", "localhost", "80", "/", "localhost");
    s_url_ok("http://rm.internal:5000/get_reward?model=a&x=1", "rm.internal", "5000",
             "/get_reward?model=a&x=1", "rm.internal:5000");
    s_url_ok("http://h?q", "h", "80", "/?q", "h");
    s_url_ok("http://[::1]:9/", "::1", "9", "/", "[::1]:9");
    s_url_bad("https://rm.example.com/score", "https is not supported");
    s_url_bad("ftp://x/y", "is not an http:// URL");
    s_url_bad("http://", "no host");
    s_url_bad("http://:80/x", "no host");
    s_url_bad("http://h:0/", "the port is not a number in 1..65535");
    s_url_bad("http://h:65536/", "the port is not a number in 1..65535");
    s_url_bad("http://h:8a/", "the port is not a number");
    s_url_bad("http://user:pw@h/", "credentials are not supported");
    s_url_bad("http://h/a#frag", "#fragment");
    s_url_bad("http://h/a b", "a space or control byte");
    s_url_bad("http://[::1/", "a bad [IPv6] host");
}

// ---------------------------------------------------------------------------------------------
// 2. the reply parser

// Feeds `text` whole (bytewise = 0) or one byte at a time, then the close when `close`; expects
// `want` (1 complete, RL_EPROTO) and, when complete, `status` and `body`; else err ~ needle.
static void s_parse(int line, const char *text, int bytewise, int close, size_t max, int want,
                    int status, const char *body, const char *needle) {
    rl_reward_http_reply_t *p = NULL;
    CHECK_INT(rl_reward_http_reply_new(max, &p), 0);
    if (!p) {
        return;
    }
    size_t n = strlen(text);
    int rc = 0;
    s_err[0] = '\0';
    for (size_t i = 0; i < n && rc == 0; i += bytewise ? 1 : n) {
        rc = rl_reward_http_reply_feed(p, text + i, bytewise ? 1 : n, s_err, sizeof s_err);
    }
    if (rc == 0 && close) {
        rc = rl_reward_http_reply_eof(p, s_err, sizeof s_err);
    }
    CHECK_MSG(rc == want, "line %d (%s): rc %d, want %d: %s", line, bytewise ? "bytewise" : "whole",
              rc, want, s_err);
    if (rc == 1 && want == 1) {
        size_t bl = 0;
        const char *b = rl_reward_http_reply_body(p, &bl);
        CHECK_MSG(rl_reward_http_reply_status(p) == status, "line %d: status %d", line,
                  rl_reward_http_reply_status(p));
        CHECK_MSG(bl == strlen(body) && !memcmp(b, body, bl), "line %d: body '%s'", line, b);
    }
    if (needle) {
        CHECK_MSG(strstr(s_err, needle) != NULL, "line %d: \"%s\" lacks \"%s\"", line, s_err,
                  needle);
    }
    rl_reward_http_reply_destroy(&p);
    CHECK(p == NULL);
}
#define PARSE(text, close, max, want, status, body, needle)                                        \
    do {                                                                                           \
        s_parse(__LINE__, text, 0, close, max, want, status, body, needle);                        \
        s_parse(__LINE__, text, 1, close, max, want, status, body, needle);                        \
    } while (0)

static void test_replies(void) {
    const int E = RL_EPROTO;
    PARSE("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 14\r\n\r\n"
          "{\"scores\":[1]}IGNORED",
          0, 1024, 1, 200, "{\"scores\":[1]}", NULL);
    PARSE("HTTP/1.0 200 OK\r\ncontent-length:  2 \r\n\r\nok", 0, 1024, 1, 200, "ok", NULL);
    PARSE("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
          "5;ext=1\r\nhello\r\nA\r\n, chunked!\r\n0\r\nX-Trailer: a\r\n\r\n",
          0, 1024, 1, 200, "hello, chunked!", NULL);
    PARSE("HTTP/1.1 200 OK\nTransfer-Encoding: Chunked\nContent-Length: 99\n\n3\nabc\n0\n\n", 0,
          1024, 1, 200, "abc", NULL); // bare \n lines; chunked wins over Content-Length
    PARSE("HTTP/1.1 200 OK\r\n\r\nuntil the close", 1, 1024, 1, 200, "until the close", NULL);
    PARSE("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\nContent-Length: 1\r\n\r\nx", 0,
          1024, 1, 201, "x", NULL);
    PARSE("HTTP/1.1 204 No Content\r\n\r\n", 0, 1024, 1, 204, "", NULL);
    PARSE("HTTP/1.1 500 Internal Server Error\r\nContent-Length: 10\r\n\r\noverloaded", 0, 1024, 1,
          500, "overloaded", NULL);
    PARSE("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", 0, 1024, 1, 200, "", NULL);
    // malformed, or too large
    PARSE("SSH-2.0-OpenSSH_9.2\r\n\r\n", 0, 1024, E, 0, "", "not an HTTP/1.x status line");
    PARSE("HTTP/1.1 200 OK\r\nContent-Length: 12x\r\n\r\n", 0, 1024, E, 0, "",
          "a bad Content-Length: '12x'");
    PARSE("HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n", 0, 1024, E, 0, "",
          "a bad Content-Length");
    PARSE("HTTP/1.1 200 OK\r\nContent-Length: 2000\r\n\r\n", 0, 1024, E, 0, "",
          "longer than 1024 bytes");
    PARSE("HTTP/1.1 200 OK\r\n\r\n", 0, 4, 0, 0, "", NULL); // needs the close
    PARSE("HTTP/1.1 200 OK\r\n\r\n12345", 1, 4, E, 0, "", "longer than 4 bytes");
    PARSE("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", 0, 1024, E, 0, "",
          "a bad chunk size line: 'zz'");
    PARSE("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n800\r\n", 0, 1024, E, 0, "",
          "longer than 1024 bytes");
    PARSE("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nfffffffffffffffffff\r\n", 0, 1024,
          E, 0, "", "a chunk size too large");
    PARSE("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabX\r\n", 0, 1024, E, 0, "",
          "no line end after a chunk's data");
    PARSE("HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", 0, 1024, E, 0, "",
          "transfer coding 'gzip, chunked' is not supported");
    PARSE("HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\n\r\n", 0, 1024, E, 0, "",
          "content coding 'gzip' is not supported");
    // cut short by the close
    PARSE("", 1, 1024, E, 0, "", "closed the connection without a reply");
    PARSE("HTTP/1.1 200", 1, 1024, E, 0, "", "inside the reply's head");
    PARSE("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc", 1, 1024, E, 0, "",
          "7 bytes before the end of the body");
    PARSE("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab", 1, 1024, E, 0, "",
          "inside the chunked body");
    // a head past 64 KiB
    size_t big = 70000;
    char *h = malloc(big + 64);
    if (h) {
        int o = snprintf(h, 64, "HTTP/1.1 200 OK\r\nX: ");
        memset(h + o, 'a', big);
        h[o + big] = '\0';
        s_parse(__LINE__, h, 0, 0, 1024, E, 0, "", "the reply's head is longer than 65536 bytes");
        free(h);
    }
}

// ---------------------------------------------------------------------------------------------
// 3. live

typedef struct {
    pid_t pid;
    int port;
} s_server_t;

// Starts tests/reward_server.py with `args` (a space-separated list, no quoting); waits for its
// port. Returns 0 or -1.
static int s_serve(s_server_t *s, const char *args) {
    char pf[600], cmd[2048];
    snprintf(pf, sizeof pf, "%s/port", s_tmp);
    unlink(pf);
    snprintf(cmd, sizeof cmd, "exec " PY " " SERVER_PY " %s %s", pf, args);
    s->port = 0;
    s->pid = fork();
    if (s->pid == 0) {
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    for (int i = 0; i < 200 && s->pid > 0; i++) {
        char *t = rl_test_read_file(pf, NULL);
        s->port = t ? atoi(t) : 0;
        free(t);
        if (s->port > 0) {
            return 0;
        }
        struct timespec ts = {0, 25000000};
        nanosleep(&ts, NULL);
    }
    CHECK_MSG(0, "reward_server.py %s did not start", args);
    return -1;
}

static void s_stop(s_server_t *s) {
    if (s->pid > 0) {
        kill(s->pid, SIGKILL);
        waitpid(s->pid, NULL, 0);
        s->pid = 0;
    }
}

// An http reward spec for url; the strings live in static storage until the next call.
static rl_recipe_reward_t s_spec(const char *url, int format, int retries, double timeout,
                                 double reward_timeout) {
    static char u[512];
    snprintf(u, sizeof u, "%s", url);
    rl_recipe_reward_t s = {0};
    s.name = "remote";
    s.weight = 1.0;
    s.builtin = RL_RECIPE_REWARD_HTTP;
    s.http.url = u;
    s.http.format = format;
    s.http.retries = retries;
    s.http.timeout = timeout;
    s.reward_timeout = reward_timeout;
    s.answer_field = "answer";
    return s;
}

static rl_reward_item_t s_item(const char *c, const char *row) {
    static const int32_t ids[2] = {7, 2};
    rl_reward_item_t it = {0};
    it.prompt = "66*3+107=";
    it.prompt_len = strlen(it.prompt);
    it.completion = c;
    it.completion_len = strlen(c);
    it.completion_ids = ids;
    it.n_completion_ids = 2;
    it.row_json = row;
    it.row_json_len = strlen(row);
    return it;
}

// Scores the same four items with `spec` and with the built-in math_answer; they must agree.
static void s_same_as_builtin(const rl_recipe_reward_t *spec, const char *what) {
    rl_recipe_reward_t bs = {
        .name = "m", .weight = 1, .builtin = RL_RECIPE_REWARD_MATH_ANSWER, .config_json = "{}"};
    rl_reward_item_t it[4] = {s_item("66*3=198;198+107=305 #### 305", "{\"answer\": \"305\"}"),
                              s_item("#### 304", "{\"answer\": \"305\"}"),
                              s_item("#### 1,234.50", "{\"answer\": 1234.5}"),
                              s_item("#### 5", "{\"prompt\": \"no answer\"}")};
    rl_reward_t *h = NULL, *b = NULL;
    CHECK_MSG(rl_reward_open(spec, 1, &h, s_err, sizeof s_err) == 0, "%s: %s", what, s_err);
    CHECK_INT(rl_reward_open(&bs, 1, &b, s_err, sizeof s_err), 0);
    double x[4], y[4];
    int rc = h ? rl_reward_score(h, it, 4, x, s_err, sizeof s_err) : -1;
    CHECK_MSG(rc == 0, "%s: %s", what, s_err);
    CHECK_INT(b ? rl_reward_score(b, it, 4, y, s_err, sizeof s_err) : -1, 0);
    for (int i = 0; rc == 0 && i < 4; i++) {
        CHECK_MSG((isnan(x[i]) && isnan(y[i])) || x[i] == y[i], "%s: item %d: %g vs %g", what, i,
                  x[i], y[i]);
    }
    CHECK_MSG(rc == 0 && x[0] == 1 && x[1] == 0 && x[2] == 1 && isnan(x[3]), "%s: %g %g %g %g",
              what, x[0], x[1], x[2], x[3]);
    rl_reward_close(&h);
    rl_reward_close(&b);
}

// Scores one item with spec; returns the code, the message in s_err.
static int s_score1(const rl_recipe_reward_t *spec) {
    rl_reward_t *r = NULL;
    int rc = rl_reward_open(spec, 1, &r, s_err, sizeof s_err);
    if (rc) {
        return rc;
    }
    rl_reward_item_t it = s_item("#### 305", "{\"answer\": \"305\"}");
    double out;
    rc = rl_reward_score(r, &it, 1, &out, s_err, sizeof s_err);
    rl_reward_close(&r);
    return rc;
}

// Lines in the server's count file.
static int s_requests(const char *count) {
    char *t = rl_test_read_file(count, NULL);
    int n = 0;
    for (const char *p = t; p && *p; p++) {
        n += *p == '\n';
    }
    free(t);
    return n;
}

static void test_live(void) {
    char url[256], args[1024], count[600], want[1200];
    snprintf(count, sizeof count, "%s/count", s_tmp);
    s_server_t s;

    // both forms, plain and chunked replies: the same scores as the built-in
    snprintf(args, sizeof args, "--count %s", count);
    if (s_serve(&s, args) == 0) {
        snprintf(url, sizeof url, "http://127.0.0.1:%d/score", s.port);
        rl_recipe_reward_t spec = s_spec(url, RL_RECIPE_HTTP_RLCTL, 0, 5, 0);
        s_same_as_builtin(&spec, "rlctl form");
        char *log = rl_test_read_file(count, NULL);
        CHECK_CONTAINS(log, "/score application/json "); // path and Content-Type as sent
        free(log);
        s_stop(&s);
    }
    if (s_serve(&s, "--format openrlhf --chunked") == 0) {
        snprintf(url, sizeof url, "http://localhost:%d/get_reward", s.port);
        rl_recipe_reward_t spec = s_spec(url, RL_RECIPE_HTTP_OPENRLHF, 0, 5, 0);
        s_same_as_builtin(&spec, "openrlhf form, chunked");
        s_stop(&s);
    }
    // 500 twice, then a good reply: the third attempt scores (backoff 0.25 s + 0.5 s)
    unlink(count);
    snprintf(args, sizeof args, "--fail-first 2 --count %s", count);
    if (s_serve(&s, args) == 0) {
        snprintf(url, sizeof url, "http://127.0.0.1:%d/score", s.port);
        rl_recipe_reward_t spec = s_spec(url, RL_RECIPE_HTTP_RLCTL, 3, 5, 0);
        CHECK_MSG(s_score1(&spec) == 0, "%s", s_err);
        CHECK_INT(s_requests(count), 3);
        s_stop(&s);
    }
    // always 500: 1 + retries attempts, then an error with the status and the body
    unlink(count);
    snprintf(args, sizeof args, "--fail-first 1000 --count %s", count);
    if (s_serve(&s, args) == 0) {
        snprintf(url, sizeof url, "http://127.0.0.1:%d/score", s.port);
        rl_recipe_reward_t spec = s_spec(url, RL_RECIPE_HTTP_RLCTL, 2, 5, 0);
        CHECK_INT(s_score1(&spec), RL_EPLUGIN);
        snprintf(want, sizeof want,
                 "reward 'remote' (%s): score failed: POST %s failed after 3 attempts: HTTP 500: "
                 "overloaded",
                 url, url);
        CHECK_CONTAINS(s_err, want);
        CHECK_INT(s_requests(count), 3);
        s_stop(&s);
    }
    // a 404 is the URL's fault: no retry
    unlink(count);
    snprintf(args, sizeof args, "--status 404 --count %s", count);
    if (s_serve(&s, args) == 0) {
        snprintf(url, sizeof url, "http://127.0.0.1:%d/nope", s.port);
        rl_recipe_reward_t spec = s_spec(url, RL_RECIPE_HTTP_RLCTL, 3, 5, 0);
        CHECK_INT(s_score1(&spec), RL_EPLUGIN);
        snprintf(want, sizeof want, "POST %s failed: HTTP 404: no such reward", url);
        CHECK_CONTAINS(s_err, want);
        CHECK_INT(s_requests(count), 1);
        s_stop(&s);
    }
    // replies that are not the scores asked for
    if (s_serve(&s, "--reply '{\"scores\":[1,2]}'") == 0) {
        snprintf(url, sizeof url, "http://127.0.0.1:%d/", s.port);
        rl_recipe_reward_t spec = s_spec(url, RL_RECIPE_HTTP_RLCTL, 3, 5, 0);
        CHECK_INT(s_score1(&spec), RL_EPLUGIN);
        snprintf(want, sizeof want, "a bad reply from %s: 2 scores for 1 items", url);
        CHECK_CONTAINS(s_err, want);
        s_stop(&s);
    }
    if (s_serve(&s, "--reply '{\"error\":\"model_not_loaded\"}'") == 0) {
        snprintf(url, sizeof url, "http://127.0.0.1:%d/", s.port);
        rl_recipe_reward_t spec = s_spec(url, RL_RECIPE_HTTP_RLCTL, 3, 5, 0);
        CHECK_INT(s_score1(&spec), RL_EPLUGIN);
        snprintf(want, sizeof want, "%s replied with an error: model_not_loaded", url);
        CHECK_CONTAINS(s_err, want);
        s_stop(&s);
    }

    // nobody listens: connection refused on every attempt, the URL named, never a silent score
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof a;
    int port = 0;
    if (fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
        getsockname(fd, (struct sockaddr *)&a, &al) == 0) {
        port = ntohs(a.sin_port); // bound, never listening: connects are refused
    }
    snprintf(url, sizeof url, "http://127.0.0.1:%d/score", port);
    rl_recipe_reward_t spec = s_spec(url, RL_RECIPE_HTTP_RLCTL, 2, 5, 0);
    double t0 = rl_clock_now();
    CHECK_INT(s_score1(&spec), RL_EPLUGIN);
    double took = rl_clock_now() - t0;
    snprintf(want, sizeof want,
             "reward 'remote' (%s): score failed: POST %s failed after 3 attempts: cannot "
             "connect: Connection refused",
             url, url);
    CHECK_CONTAINS(s_err, want);
    CHECK_MSG(took > 0.7 && took < 2.0, "3 attempts took %.2f s (backoff 0.25 + 0.5)", took);
    // the deadline (roles.reward_timeout 1 s -> 0.9 s) stops the retries early
    spec = s_spec(url, RL_RECIPE_HTTP_RLCTL, 10, 5, 1.0);
    t0 = rl_clock_now();
    CHECK_INT(s_score1(&spec), RL_EPLUGIN);
    took = rl_clock_now() - t0;
    CHECK_MSG(took < 0.95, "the retries ran %.2f s, past the 0.9 s deadline", took);
    CHECK_CONTAINS(s_err, "failed after 3 attempts: cannot connect"); // 0.25 + 0.5 s of backoff
    if (fd >= 0) {
        close(fd);
    }
    // https, refused when the reward opens (before any batch)
    spec = s_spec("https://rm.example.com/score", RL_RECIPE_HTTP_RLCTL, 2, 5, 0);
    rl_reward_t *r = NULL;
    CHECK_INT(rl_reward_open(&spec, 1, &r, s_err, sizeof s_err), RL_EPLUGIN);
    CHECK_CONTAINS(s_err, "reward 'remote' (https://rm.example.com/score): create failed: "
                          "https://rm.example.com/score: https is not supported");
    CHECK(r == NULL);
}

// ---------------------------------------------------------------------------------------------
// 4. the recipe

static void test_recipe(void) {
    char text[2048];
    snprintf(text, sizeof text,
             "model: {path: %s/cookbook/models/arith-base}\n"
             "data: {train: %s/cookbook/data/arith/train.jsonl}\n"
             "algorithm: {name: grpo}\noptim: {lr: 1.0e-3}\ntrain: {steps: 1}\n"
             "rewards:\n"
             "  - {name: a, http: {url: 'http://127.0.0.1:8000/score'}}\n"
             "  - name: b\n"
             "    http:\n"
             "      url: http://rm:5000/get_reward\n"
             "      format: openrlhf\n"
             "      timeout: 2.5\n"
             "      retries: 0\n",
             RL_SOURCE_DIR, RL_SOURCE_DIR);
    rl_recipe_t *r = NULL;
    int rc = rl_recipe_load_string(rl_algos(), text, strlen(text), "h.yaml", NULL, 0, 0, &r, s_err,
                                   sizeof s_err);
    CHECK_MSG(rc == 0, "%s", s_err);
    if (r) {
        const rl_recipe_http_t *a = &r->rewards[0].http, *b = &r->rewards[1].http;
        CHECK_INT(r->rewards[0].builtin, RL_RECIPE_REWARD_HTTP);
        CHECK_STR(a->url, "http://127.0.0.1:8000/score");
        CHECK_CLOSE(a->timeout, 30.0, 0);
        CHECK_INT(a->format, RL_RECIPE_HTTP_RLCTL);
        CHECK_INT(a->retries, 3);
        CHECK_STR(b->url, "http://rm:5000/get_reward");
        CHECK_CLOSE(b->timeout, 2.5, 0);
        CHECK_INT(b->format, RL_RECIPE_HTTP_OPENRLHF);
        CHECK_INT(b->retries, 0);
        const char *file;
        int line, col;
        CHECK_INT(rl_recipe_key_location(r, "rewards[1].http.format", &file, &line, &col), 0);
        CHECK_INT(line, 11);
        char *yaml = NULL;
        CHECK_INT(rl_recipe_to_yaml(r, &yaml), 0);
        CHECK_CONTAINS(yaml, "    http: {url: \"http://rm:5000/get_reward\", timeout: 2.5, "
                             "format: openrlhf, retries: 0}\n");
        rl_recipe_t *r2 = NULL;
        rc = yaml ? rl_recipe_load_string(rl_algos(), yaml, strlen(yaml), "<printed>", NULL, 0, 0,
                                          &r2, s_err, sizeof s_err)
                  : -1;
        CHECK_MSG(rc == 0, "%s", s_err);
        CHECK(r2 && r2->rewards[1].http.format == RL_RECIPE_HTTP_OPENRLHF &&
              !strcmp(r2->rewards[1].http.url, b->url));
        rl_recipe_destroy(&r2);
        free(yaml);
    }
    rl_recipe_destroy(&r);
}

int main(void) {
    RL_TEST_RUN(test_urls);
    RL_TEST_RUN(test_replies);
    RL_TEST_RUN(test_recipe);
    if (access(PY, X_OK) != 0) {
        fprintf(stderr, "note: %s missing; the live tests were skipped\n", PY);
        RL_TEST_DONE();
    }
    rl_test_tmpdir(s_tmp, sizeof s_tmp, "reward_http");
    RL_TEST_RUN(test_live);
    rl_test_tmpdir_done(s_tmp);
    RL_TEST_DONE();
}
