// tests for rl_reward_command (rewards as programs speaking JSON lines) and the recipe's
// `command:` key:
//   1. cookbook/plugins/math_reward.py scores exactly as the built-in math_answer: on the gold
//      and wrong completions of the arith eval set, on hand-written traps, and on 4000 random
//      completions and references (seeded), compared bit for bit;
//   2. the protocol: null and NaN are unscorable, and every way a program can misbehave
//      (tests/reward_command.py: exits, garbage, a wrong count, an infinity, an error reply,
//      two lines for one request, a hang past the deadline) fails the batch with its message,
//      naming the reward and the command; a hang leaves no process behind (the program's whole
//      group is killed); a program that cannot start is refused at open;
//   3. the recipe: paths in `command:` resolve against the recipe's folder (the working
//      directory for an override) as `plugin:` does, and the printed recipe reads back the same.
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "rl_clock.h"
#include "rl_algos.h"
#include "rl_config.h"
#include "rl_err.h"
#include "rl_reward.h"
#include "rl_reward_command.h"
#include "rl_test.h"

#define PY "/usr/bin/python3"
#define MATH_PY RL_SOURCE_DIR "/cookbook/plugins/math_reward.py"
#define CMD_PY RL_SOURCE_DIR "/tests/reward_command.py"

static char s_err[4096];
static char s_tmp[] = "/tmp/rl_test_reward_command_XXXXXX";

// A command reward spec for argv (NULL-ended), with roles.reward_timeout `timeout`.
static rl_recipe_reward_t s_spec(const char *name, const char **argv, double timeout) {
    rl_recipe_reward_t s = {0};
    s.name = (char *)name;
    s.weight = 1.0;
    s.builtin = RL_RECIPE_REWARD_COMMAND;
    while (argv[s.command.n]) {
        s.command.n++;
    }
    s.command.items = (char **)argv;
    s.reward_timeout = timeout;
    return s;
}

static rl_reward_t *s_open(const rl_recipe_reward_t *spec) {
    rl_reward_t *r = NULL;
    int rc = rl_reward_open(spec, 1, &r, s_err, sizeof s_err);
    CHECK_MSG(rc == 0 && r, "open '%s': %s", spec->name, s_err);
    return r;
}

static const int32_t s_ids[4] = {3, 1, 4, 1};

static rl_reward_item_t s_item(const char *c, size_t c_len, const char *row) {
    rl_reward_item_t it = {0};
    it.prompt = "66*3+107=";
    it.prompt_len = strlen(it.prompt);
    it.completion = c;
    it.completion_len = c_len;
    it.completion_ids = s_ids;
    it.n_completion_ids = 4;
    it.row_json = row;
    it.row_json_len = strlen(row);
    return it;
}

// 1 when a and b are the same double (NaN equals NaN)
static int s_same(double a, double b) {
    return (isnan(a) && isnan(b)) || a == b;
}

// ---------------------------------------------------------------------------------------------
// 1. math_reward.py == math_answer

typedef struct {
    uint64_t s;
} s_rng_t;

static uint32_t s_next(s_rng_t *g) {
    g->s = g->s * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(g->s >> 33);
}

// Scores items with both rewards and compares every score bit for bit. Returns the number of
// items compared.
static size_t s_compare(rl_reward_t *builtin, rl_reward_t *py, const rl_reward_item_t *items,
                        size_t n, const char *what) {
    double *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b);
    if (!a || !b) {
        free(a);
        free(b);
        CHECK_MSG(0, "out of memory");
        return 0;
    }
    int ra = rl_reward_score(builtin, items, n, a, s_err, sizeof s_err);
    CHECK_MSG(ra == 0, "%s: math_answer: %s", what, s_err);
    int rb = rl_reward_score(py, items, n, b, s_err, sizeof s_err);
    CHECK_MSG(rb == 0, "%s: math_reward.py: %s", what, s_err);
    size_t diff = 0, nan = 0, ones = 0;
    for (size_t i = 0; ra == 0 && rb == 0 && i < n; i++) {
        nan += isnan(a[i]);
        ones += a[i] == 1.0;
        if (!s_same(a[i], b[i]) && diff++ < 5) {
            fprintf(stderr,
                    "%s: item %zu: completion \"%.*s\" row %s: math_answer %g, "
                    "math_reward.py %g\n",
                    what, i, (int)items[i].completion_len, items[i].completion, items[i].row_json,
                    a[i], b[i]);
        }
    }
    CHECK_MSG(diff == 0, "%s: %zu of %zu scores differ", what, diff, n);
    fprintf(stderr, "%s: %zu items, %zu right, %zu unscorable, %zu differ\n", what, n, ones, nan,
            diff);
    free(a);
    free(b);
    return n;
}

static void test_math_equivalence(void) {
    rl_recipe_reward_t bs = {.name = "correct",
                             .weight = 1.0,
                             .builtin = RL_RECIPE_REWARD_MATH_ANSWER,
                             .config_json = "{}"};
    const char *argv[] = {PY, MATH_PY, NULL};
    rl_recipe_reward_t ps = s_spec("correct", argv, 0);
    rl_reward_t *b = s_open(&bs), *p = s_open(&ps);
    if (!b || !p) {
        rl_reward_close(&b);
        rl_reward_close(&p);
        return;
    }
    CHECK_STR(rl_reward_origin(p), "command " PY " " MATH_PY);

    // the gold completions of the held-out set, and each with its last digit changed
    char *txt = rl_test_read_file(RL_SOURCE_DIR "/cookbook/data/arith/eval.jsonl", NULL);
    CHECK_MSG(txt != NULL, "cannot read the arith eval set");
    size_t cap = 1200, n = 0;
    rl_reward_item_t *items = calloc(cap, sizeof *items);
    char **owned = calloc(cap, sizeof *owned);
    char *save = NULL;
    for (char *line = txt ? strtok_r(txt, "\n", &save) : NULL; line && n + 2 <= cap;
         line = strtok_r(NULL, "\n", &save)) {
        const char *c = strstr(line, "\"completion\": \"");
        if (!c) {
            continue;
        }
        c += 15;
        size_t cl = strcspn(c, "\"");
        owned[n] = strndup(c, cl);
        items[n] = s_item(owned[n], cl, line);
        n++;
        owned[n] = strndup(c, cl);
        owned[n][cl - 1] = owned[n][cl - 1] == '9' ? '0' : (char)(owned[n][cl - 1] + 1);
        items[n] = s_item(owned[n], cl, line);
        n++;
    }
    CHECK_MSG(n >= 500, "only %zu eval items", n);
    s_compare(b, p, items, n, "arith eval, gold and wrong");
    for (size_t i = 0; i < n; i++) {
        free(owned[i]);
    }
    free(txt);

    // hand-written traps: markers, signs, commas, decimals, long numbers, every reference type
    static const char *const traps[][2] = {
        {"91*3=273;273+125=398 #### 398", "{\"answer\": \"398\"}"},
        {"#### 305 #### 306", "{\"answer\": \"305\"}"},
        {"#### nothing but the answer is 7", "{\"answer\": 7}"},
        {"so the total is #### 1,234", "{\"answer\": \"1234\"}"},
        {"#### $18", "{\"answer\": \" $18 \"}"},
        {"It costs 3.50 dollars", "{\"answer\": 3.5}"},
        {"3-4", "{\"answer\": \"4\"}"},
        {"x = -4", "{\"answer\": -4}"},
        {"-0", "{\"answer\": \"0\"}"},
        {"#### 0.1", "{\"answer\": \"0.10000000000000001\"}"},
        {"#### 12345678901234567890", "{\"answer\": \"12345678901234567891\"}"},
        {"#### 1234567890123456789012345678901234567890123456789012345678901234567890",
         "{\"answer\": \"1\"}"},
        {"#### 2.50", "{\"answer\": 2.5}"},
        {"#### 100000000000000", "{\"answer\": 1e14}"},
        {"#### 1", "{\"answer\": 1e15}"},
        {"#### 0", "{\"answer\": -1e-11}"},
        {"#### 5", "{\"answer\": true}"},
        {"#### 5", "{\"answer\": null}"},
        {"#### 5", "{\"answer\": [5]}"},
        {"#### 5", "{\"prompt\": \"x\"}"},
        {"#### 72", "{\"answer\": \"Natalia sold 48/2 = <<48/2=24>>24 clips.\\n#### 72\"}"},
        {"#### 72", "{\"answer\": \"three hundred and five\"}"},
        {"\xd9\xa3 then 3", "{\"answer\": \"3\"}"}, // an Arabic-Indic digit is not a digit
        {"caf\xc3\xa9 9\xff", "{\"answer\": \"9\"}"},
        {"1.", "{\"answer\": \"1\"}"},
        {"1,2,3", "{\"answer\": \"123\"}"},
        {"+7", "{\"answer\": \"7\"}"},
        {"", "{\"answer\": \"0\"}"},
    };
    size_t nt = sizeof traps / sizeof traps[0];
    for (size_t i = 0; i < nt; i++) {
        items[i] = s_item(traps[i][0], strlen(traps[i][0]), traps[i][1]);
    }
    s_compare(b, p, items, nt, "traps");

    // random references, and completions from the characters the rule reads; half of them end
    // in the reference's own text (right, or nearly: signs, commas, zeros and marks around it)
    static const char *const pieces[] = {"0", "1",  "2",        "7",   "9",    "00", ",",
                                         ".", "-",  "+",        "#",   "####", " ",  "$",
                                         "a", "\n", "\xc3\xa9", "0.5", "1,000"};
    static char comp[1000][96], rows[1000][96];
    s_rng_t g = {20261125};
    size_t total = 0;
    for (int round = 0; round < 4; round++) {
        for (int i = 0; i < 1000; i++) {
            char ref[40];
            size_t ro = 0;
            int rk = 1 + (int)(s_next(&g) % 5);
            for (int j = 0; j < rk; j++) {
                const char *pc = pieces[s_next(&g) % 14]; // digits, signs, marks, spaces, '$'
                if (ro + strlen(pc) < sizeof ref) {
                    memcpy(ref + ro, pc, strlen(pc));
                    ro += strlen(pc);
                }
            }
            ref[ro] = '\0';
            const char *as_text = ref;
            char num[40];
            switch (s_next(&g) % 4) {
            case 0: snprintf(rows[i], sizeof rows[i], "{\"answer\": \"%s\"}", ref); break;
            case 1:
                snprintf(num, sizeof num, "%d", (int)(s_next(&g) % 2001) - 1000);
                snprintf(rows[i], sizeof rows[i], "{\"answer\": %s}", num);
                as_text = num;
                break;
            case 2:
                snprintf(num, sizeof num, "%d.%d", (int)(s_next(&g) % 100),
                         (int)(s_next(&g) % 1000));
                snprintf(rows[i], sizeof rows[i], "{\"answer\": %s}", num);
                as_text = num;
                break;
            default: snprintf(rows[i], sizeof rows[i], "{\"answer\": \"#### %s\"}", ref); break;
            }
            size_t o = 0;
            int k = (int)(s_next(&g) % 8);
            for (int j = 0; j < k; j++) {
                const char *pc = pieces[s_next(&g) % (sizeof pieces / sizeof pieces[0])];
                memcpy(comp[i] + o, pc, strlen(pc));
                o += strlen(pc);
            }
            if (s_next(&g) % 2) {
                o += (size_t)snprintf(comp[i] + o, sizeof comp[i] - o, "%s%s%s",
                                      s_next(&g) % 2 ? "#### " : " ", as_text,
                                      s_next(&g) % 3 ? "" : "0");
            }
            comp[i][o] = '\0';
            items[i] = s_item(comp[i], o, rows[i]);
        }
        total += s_compare(b, p, items, 1000, "random");
    }
    CHECK_INT((int)total, 4000);
    free(items);
    free(owned);
    rl_reward_close(&b);
    rl_reward_close(&p);
}

// ---------------------------------------------------------------------------------------------
// 2. the protocol and its failures

// Opens tests/reward_command.py MODE [ARG] as reward 'cmd' (deadline from `timeout`).
static rl_reward_t *s_mode(const char *mode, const char *arg, double timeout) {
    const char *argv[] = {PY, CMD_PY, mode, arg, NULL};
    rl_recipe_reward_t spec = s_spec("cmd", argv, timeout);
    return s_open(&spec);
}

// Scores two items with r: returns rl_reward_score's code, the message in s_err.
static int s_score2(rl_reward_t *r, double *out) {
    rl_reward_item_t it[2] = {s_item("#### 1", 6, "{\"answer\": \"1\"}"),
                              s_item("#### 2", 6, "{\"answer\": \"1\"}")};
    s_err[0] = '\0';
    return r ? rl_reward_score(r, it, 2, out, s_err, sizeof s_err) : -1;
}

#define ORIGIN "reward 'cmd' (command " PY " " CMD_PY

static void test_protocol(void) {
    double out[3];
    rl_reward_t *r = s_mode("ok", NULL, 0);
    rl_reward_item_t three[3] = {s_item("a", 1, "{}"), s_item("b", 1, "{}"), s_item("c", 1, "{}")};
    CHECK_INT(r ? rl_reward_score(r, three, 3, out, s_err, sizeof s_err) : -1, 0);
    CHECK(out[0] == 1.0 && isnan(out[1]) && out[2] == 1.0); // null: unscorable
    CHECK_INT(s_score2(r, out), 0);                         // the same process, again
    rl_reward_close(&r);

    r = s_mode("nan", NULL, 0);
    CHECK_INT(s_score2(r, out), 0);
    CHECK(isnan(out[0]) && isnan(out[1]));
    rl_reward_close(&r);

    // exits: before any reply, and after a good first batch
    r = s_mode("exit", "1", 0);
    CHECK_INT(s_score2(r, out), RL_EPLUGIN);
    CHECK_CONTAINS(s_err, ORIGIN " exit 1): score failed: the command exited with status 3 before "
                                 "it replied (its stderr is in the reward worker's log)");
    CHECK_INT(s_score2(r, out), RL_EPLUGIN); // gone for good, and says so
    CHECK_CONTAINS(s_err, "the command exited with status 3 before it replied");
    rl_reward_close(&r);
    r = s_mode("exit", "2", 0);
    CHECK_INT(s_score2(r, out), 0);
    CHECK_INT(s_score2(r, out), RL_EPLUGIN);
    CHECK_CONTAINS(s_err, "the command exited with status 3");
    rl_reward_close(&r);

    r = s_mode("garbage", NULL, 0);
    CHECK_INT(s_score2(r, out), RL_EPLUGIN);
    CHECK_CONTAINS(s_err, ORIGIN " garbage): score failed: a bad reply from the command: not JSON "
                                 "(");
    CHECK_CONTAINS(s_err, "'this is not json'");
    rl_reward_close(&r);

    r = s_mode("wrong_count", NULL, 0);
    CHECK_INT(s_score2(r, out), RL_EPLUGIN);
    CHECK_CONTAINS(s_err, "a bad reply from the command: 1 scores for 2 items: '{\"scores\": "
                          "[1.0]}'");
    rl_reward_close(&r);

    r = s_mode("infinite", NULL, 0);
    CHECK_INT(s_score2(r, out), RL_EPLUGIN);
    CHECK_CONTAINS(s_err, "a bad reply from the command: score 0 of 2 is Infinity (write null for "
                          "an unscorable item)");
    rl_reward_close(&r);

    r = s_mode("error", NULL, 0);
    CHECK_INT(s_score2(r, out), RL_EPLUGIN);
    CHECK_CONTAINS(s_err, ORIGIN " error): score failed: the command replied with an error: "
                                 "backend unavailable (2 items)");
    rl_reward_close(&r);

    r = s_mode("chatty", NULL, 0);
    CHECK_INT(s_score2(r, out), 0);
    struct timespec ts = {0, 100000000};
    nanosleep(&ts, NULL); // its second line is written by now
    CHECK_INT(s_score2(r, out), RL_EPLUGIN);
    CHECK_CONTAINS(s_err, "the command wrote '{\"scores\": [1.0, 1.0]}' when no request was "
                          "waiting (one reply line per request line; log to stderr)");
    rl_reward_close(&r);

    // a hang: the deadline is just under roles.reward_timeout (1.5 s -> 1.35 s); the program and
    // the child it started are killed, and the next batch says why it is gone
    char pidfile[600];
    snprintf(pidfile, sizeof pidfile, "%s/hang.pid", s_tmp);
    r = s_mode("hang", pidfile, 1.5);
    double t0 = rl_clock_now();
    CHECK_INT(s_score2(r, out), RL_EPLUGIN);
    double took = rl_clock_now() - t0;
    CHECK_MSG(took >= 1.3 && took < 2.5, "the hang was cut after %.2f s, want 1.35", took);
    CHECK_CONTAINS(s_err, ORIGIN " hang ");
    CHECK_CONTAINS(s_err, "score failed: the command gave no reply within 1.35 s (the reward's "
                          "deadline, just under roles.reward_timeout) and was stopped");
    char *pid_txt = rl_test_read_file(pidfile, NULL);
    pid_t child = pid_txt ? (pid_t)atoi(pid_txt) : 0;
    free(pid_txt);
    CHECK_MSG(child > 0, "the hanging command wrote no child pid");
    int gone = 0;
    for (int i = 0; i < 40 && child > 0 && !gone; i++) {
        gone = kill(child, 0) != 0;
        nanosleep(&ts, NULL);
    }
    CHECK_MSG(gone, "the command's child %d outlived it", (int)child);
    CHECK_INT(s_score2(r, out), RL_EPLUGIN);
    CHECK_CONTAINS(s_err, "gave no reply within 1.35 s");
    rl_reward_close(&r);

    // programs that cannot start are refused at open, naming them
    const char *nope[] = {"rl-no-such-program", NULL};
    rl_recipe_reward_t spec = s_spec("cmd", nope, 0);
    rl_reward_t *bad = NULL;
    CHECK_INT(rl_reward_open(&spec, 1, &bad, s_err, sizeof s_err), RL_EPLUGIN);
    CHECK_CONTAINS(s_err, "reward 'cmd' (command rl-no-such-program): create failed: cannot run "
                          "rl-no-such-program: no executable of that name on PATH");
    const char *data[] = {RL_SOURCE_DIR "/cookbook/data/arith/eval.jsonl", NULL};
    spec = s_spec("cmd", data, 0);
    CHECK_INT(rl_reward_open(&spec, 1, &bad, s_err, sizeof s_err), RL_EPLUGIN);
    CHECK_CONTAINS(s_err, "cannot run " RL_SOURCE_DIR "/cookbook/data/arith/eval.jsonl: "
                          "Permission denied");
    CHECK(bad == NULL);
    // the check before a run starts the program and stops it at once
    const char *ok[] = {PY, CMD_PY, "ok", NULL};
    spec = s_spec("cmd", ok, 60);
    t0 = rl_clock_now();
    CHECK_INT(rl_reward_check(&spec, s_err, sizeof s_err), 0);
    CHECK_MSG(rl_clock_now() - t0 < 1.0, "the check took %.2f s", rl_clock_now() - t0);
}

// ---------------------------------------------------------------------------------------------
// 3. the recipe

// A program that writes 20 MiB to stderr: the log (our stderr, a file here) gets the first
// RL_REWARD_COMMAND_STDERR_CAP bytes, a line saying the rest is dropped, and when the reward
// closes the count of dropped bytes and the last RL_REWARD_COMMAND_STDERR_TAIL bytes, which end
// with the program's last line; the reward scores as usual meanwhile.
static void test_stderr_cap(void) {
    char path[700];
    snprintf(path, sizeof path, "%s/stderr.log", s_tmp);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    CHECK(fd >= 0);
    if (fd < 0) {
        return;
    }
    fflush(stderr);
    int saved = dup(2);
    dup2(fd, 2);
    close(fd);
    double out[2];
    rl_reward_t *r = s_mode("spew", "20", 0);
    int rc = s_score2(r, out);
    rl_reward_close(&r);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    CHECK_MSG(rc == 0, "spew: %s", s_err);
    CHECK(out[0] == 1.0 && out[1] == 1.0);
    size_t n = 0;
    char *log = rl_test_read_file(path, &n);
    size_t most = RL_REWARD_COMMAND_STDERR_CAP + RL_REWARD_COMMAND_STDERR_TAIL + 4096;
    CHECK_MSG(log && n <= most && n > RL_REWARD_COMMAND_STDERR_CAP,
              "a program's 20 MiB of stderr made a log of %zu bytes (want at most %zu)", n, most);
    if (log) {
        // (not CHECK_CONTAINS: it would print megabytes)
        CHECK_MSG(strstr(log, "the reward command's stderr passed 16 MiB: the rest is dropped"),
                  "the log does not say where it was cut");
        CHECK_MSG(strstr(log, "bytes of the reward command's stderr were dropped (past 16 MiB)"),
                  "the log does not count the dropped bytes");
        const char *end = "spew: end of request 1\n";
        CHECK_MSG(n >= strlen(end) && !strcmp(log + n - strlen(end), end),
                  "the log does not end with the program's last line");
    }
    free(log);
}

static void test_recipe(void) {
    char dir[700], path[800], script[800], cwd[4096];
    snprintf(dir, sizeof dir, "%s/recipe", s_tmp);
    mkdir(dir, 0700);
    snprintf(script, sizeof script, "%s/score.py", dir);
    FILE *f = fopen(script, "w");
    if (f) {
        fclose(f);
    }
    snprintf(path, sizeof path, "%s/r.yaml", dir);
    char text[2048];
    snprintf(text, sizeof text,
             "model: {path: %s/cookbook/models/arith-base}\n"
             "data: {train: %s/cookbook/data/arith/train.jsonl, answer_field: gold}\n"
             "algorithm: {name: grpo}\noptim: {lr: 1.0e-3}\ntrain: {steps: 1}\n"
             "roles: {reward_timeout: 7}\n"
             "rewards:\n"
             "  - {name: a, command: [python3, score.py, -v, not_here.txt, ./score.py, '..']}\n"
             "  - {name: b, command: [./score.py]}\n",
             RL_SOURCE_DIR, RL_SOURCE_DIR);
    rl_recipe_t *r = NULL;
    int rc = rl_recipe_load_string(rl_algos(), text, strlen(text), path, NULL, 0, 0, &r, s_err,
                                   sizeof s_err);
    CHECK_MSG(rc == 0, "%s", s_err);
    if (r) {
        const rl_recipe_reward_t *a = &r->rewards[0], *b = &r->rewards[1];
        CHECK_INT(a->builtin, RL_RECIPE_REWARD_COMMAND);
        CHECK_INT(a->command.n, 6);
        if (a->command.n == 6) {
            CHECK_STR(a->command.items[0], "python3"); // a bare name: PATH, when it starts
            CHECK_STR(a->command.items[1], script);    // a file beside the recipe
            CHECK_STR(a->command.items[2], "-v");
            CHECK_STR(a->command.items[3], "not_here.txt"); // names nothing there: as written
            CHECK_STR(a->command.items[4], script);
            CHECK_STR(a->command.items[5], s_tmp); // a folder counts too
        }
        CHECK_STR(b->command.n ? b->command.items[0] : "", script);
        CHECK_CLOSE(a->reward_timeout, 7.0, 0);
        CHECK_STR(a->answer_field, "gold");
        // the printed recipe reads back to the same commands
        char *yaml = NULL;
        CHECK_INT(rl_recipe_to_yaml(r, &yaml), 0);
        CHECK_CONTAINS(yaml, "command: [python3, ");
        rl_recipe_t *r2 = NULL;
        rc = yaml ? rl_recipe_load_string(rl_algos(), yaml, strlen(yaml), "<printed>", NULL, 0, 0,
                                          &r2, s_err, sizeof s_err)
                  : -1;
        CHECK_MSG(rc == 0, "%s", s_err);
        for (int i = 0; r2 && i < a->command.n; i++) {
            CHECK_STR(r2->rewards[0].command.items[i], a->command.items[i]);
        }
        rl_recipe_destroy(&r2);
        free(yaml);
    }
    rl_recipe_destroy(&r);
    // an override resolves against the working directory, as plugin: does
    const char *ovr[] = {"rewards.1.command=[./score.py]"};
    if (getcwd(cwd, sizeof cwd) && chdir(s_tmp) == 0) {
        rc = rl_recipe_load_string(rl_algos(), text, strlen(text), path, ovr, 1, 0, &r, s_err,
                                   sizeof s_err);
        CHECK_INT(rc, RL_EINVAL);
        CHECK_CONTAINS(s_err, "<override 1>:1:");
        CHECK_CONTAINS(s_err, "rewards[1].command: file '");
        CHECK_CONTAINS(s_err, "/score.py' does not exist");
        CHECK_MSG(chdir(cwd) == 0, "chdir back");
    }
    rl_recipe_destroy(&r);
}

int main(void) {
    if (access(PY, X_OK) != 0) {
        fprintf(stderr, "note: %s missing; command rewards not tested\n", PY);
        return 0;
    }
    rl_test_tmpdir(s_tmp, sizeof s_tmp, "reward_command");
    RL_TEST_RUN(test_math_equivalence);
    RL_TEST_RUN(test_protocol);
    RL_TEST_RUN(test_stderr_cap);
    RL_TEST_RUN(test_recipe);
    rl_test_tmpdir_done(s_tmp);
    RL_TEST_DONE();
}
