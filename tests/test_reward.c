// tests for rl_reward and rl_reward_builtin: the loader's refusals on real broken plugins
// (tests/plugins/), each message checked for the reward's name, the path and (for the version)
// both numbers; a working plugin built with -fvisibility=hidden; create/score errors; NaN and
// infinity; the built-ins on hand-written items (GSM8K answers, last numbers, commas, missing
// fields, regexes, the length formulas); the cookbook's example plugin from both of its builds,
// and the gold completions of the arith task under math_answer and format_bonus.
// The crash and hang plugins are only loaded here, never scored: the reward worker's tests run
// them in a process they can lose.
#include <dlfcn.h>
#include <jansson.h>
#include <unistd.h>

#include "rl_err.h"
#include "rl_reward.h"
#include "rl_reward_builtin.h"
#include "rl_test.h"

#define PLUGIN(name) RL_TEST_PLUGIN_DIR "/" name ".so"

static char s_err[2048];

// ---------------------------------------------------------------------------------------------
// helpers

static rl_recipe_reward_t s_plugin(const char *name, const char *path, const char *config) {
    rl_recipe_reward_t s = {0};
    s.name = (char *)name;
    s.weight = 1.0;
    s.builtin = RL_RECIPE_REWARD_PLUGIN;
    s.plugin = (char *)path;
    s.config_json = (char *)config;
    return s;
}

static rl_recipe_reward_t s_builtin(const char *name, int which, const char *config) {
    rl_recipe_reward_t s = {0};
    s.name = (char *)name;
    s.weight = 1.0;
    s.builtin = which;
    s.config_json = (char *)config;
    return s;
}

static const int32_t s_ids[64] = {0};

// An item for completion text `c` with n_ids token ids and dataset row `row` (JSON text).
static rl_reward_item_t s_item(const char *c, size_t n_ids, const char *row) {
    rl_reward_item_t it = {0};
    it.prompt = "66*3+107=";
    it.prompt_len = strlen(it.prompt);
    it.completion = c;
    it.completion_len = strlen(c);
    it.completion_ids = s_ids;
    it.n_completion_ids = n_ids;
    it.row_json = row;
    it.row_json_len = strlen(row);
    return it;
}

// Opening `spec` must fail with `rc`, leave *out NULL, and say each of needles[] (NULL-ended).
static void s_refused(int line, const rl_recipe_reward_t *spec, int rc,
                      const char *const *needles) {
    rl_reward_t *r = (rl_reward_t *)&s_err; // any non-NULL value: open must reset it
    s_err[0] = '\0';
    int got = rl_reward_open(spec, 1, &r, s_err, sizeof s_err);
    CHECK_MSG(got == rc, "line %d: rc %d (%s), want %d; err: %s", line, got, rl_strerror(got), rc,
              s_err);
    CHECK_MSG(r == NULL, "line %d: *out not NULL after a failure", line);
    for (int i = 0; needles[i]; i++) {
        CHECK_MSG(strstr(s_err, needles[i]) != NULL, "line %d: \"%s\" lacks \"%s\"", line, s_err,
                  needles[i]);
    }
    if (got == 0) {
        rl_reward_close(&r);
    }
    // the pre-flight check gives the same answer
    char err2[2048];
    CHECK_MSG(rl_reward_check(spec, err2, sizeof err2) == rc && strcmp(err2, s_err) == 0,
              "line %d: rl_reward_check disagrees: %s", line, err2);
}
#define REFUSED(spec, rc, ...)                                                                     \
    do {                                                                                           \
        rl_recipe_reward_t rl_s_ = (spec);                                                         \
        const char *const rl_n_[] = {__VA_ARGS__, NULL};                                           \
        s_refused(__LINE__, &rl_s_, (rc), rl_n_);                                                  \
    } while (0)

static rl_reward_t *s_open(const rl_recipe_reward_t spec) {
    rl_reward_t *r = NULL;
    int rc = rl_reward_open(&spec, 1, &r, s_err, sizeof s_err);
    CHECK_MSG(rc == 0 && r, "open '%s': %s", spec.name ? spec.name : "(null)", s_err);
    return r;
}

// Scores one completion with `r`; NaN on a failed call (reported).
static double s_score1(rl_reward_t *r, const char *c, size_t n_ids, const char *row) {
    rl_reward_item_t it = s_item(c, n_ids, row);
    double out = -12345;
    if (!r || rl_reward_score(r, &it, 1, &out, s_err, sizeof s_err) != 0) {
        CHECK_MSG(0, "score \"%s\": %s", c, r ? s_err : "reward not open");
        return NAN;
    }
    return out;
}

// ---------------------------------------------------------------------------------------------
// the loader

static void test_refusals(void) {
    REFUSED(s_plugin("txt", RL_TEST_NOT_A_PLUGIN, "{}"), RL_EPLUGIN, "reward 'txt'",
            RL_TEST_NOT_A_PLUGIN, "cannot load plugin");
    REFUSED(s_plugin("gone", RL_TEST_PLUGIN_DIR "/does_not_exist.so", "{}"), RL_EPLUGIN,
            "reward 'gone'", RL_TEST_PLUGIN_DIR "/does_not_exist.so", "No such file");
    REFUSED(s_plugin("dir", RL_TEST_PLUGIN_DIR, "{}"), RL_EPLUGIN, RL_TEST_PLUGIN_DIR,
            "not a regular file");
    REFUSED(s_plugin("nosym", PLUGIN("no_symbol"), "{}"), RL_EPLUGIN, "reward 'nosym'",
            PLUGIN("no_symbol"), "does not export rl_reward_entry", "RL_REWARD_EXPORT");
    REFUSED(s_plugin("nulltab", PLUGIN("null_table"), "{}"), RL_EPLUGIN, "reward 'nulltab'",
            PLUGIN("null_table"), "rl_reward_entry() returned NULL");
    REFUSED(s_plugin("abi", PLUGIN("wrong_abi"), "{}"), RL_EVERSION, "reward 'abi'",
            PLUGIN("wrong_abi"), "reward ABI version 999", "supports version 1");
    char short_size[64];
    snprintf(short_size, sizeof short_size, "struct_size %zu < %zu",
             offsetof(rl_reward_table_t, score), sizeof(rl_reward_table_t));
    REFUSED(s_plugin("short", PLUGIN("short_table"), "{}"), RL_EPLUGIN, "reward 'short'",
            PLUGIN("short_table"), "short table", short_size);
    REFUSED(s_plugin("nullcb", PLUGIN("null_callback"), "{}"), RL_EPLUGIN, "reward 'nullcb'",
            PLUGIN("null_callback"), "score is NULL");
    // without a recipe name, the plugin's file name stands in
    REFUSED(s_plugin(NULL, PLUGIN("wrong_abi"), "{}"), RL_EVERSION, "reward 'wrong_abi.so'");
    // inconsistent specs
    REFUSED(s_plugin("nopath", NULL, "{}"), RL_EINVAL, "reward 'nopath'", "no plugin path");
    REFUSED(s_builtin("nine", 9, "{}"), RL_EINVAL, "reward 'nine'", "unknown builtin 9");
    CHECK(rl_reward_builtin_table(RL_RECIPE_REWARD_PLUGIN) == NULL);
}

static void test_ok_plugin(void) {
    // -fvisibility=hidden (the project's preset) is in force and the export macro beats it
    void *dl = dlopen(PLUGIN("ok"), RTLD_NOW | RTLD_LOCAL);
    CHECK_MSG(dl != NULL, "%s", dlerror());
    if (dl) {
        CHECK(dlsym(dl, "rl_reward_entry") != NULL);
        CHECK(dlsym(dl, "ok_hidden_helper") == NULL);
        dlclose(dl);
    }

    rl_reward_t *a = s_open(s_plugin("len", PLUGIN("ok"), "{\"scale\": 0.5}"));
    rl_reward_t *b = s_open(s_plugin(NULL, PLUGIN("ok"), NULL)); // NULL config = "{}"
    if (!a || !b) {
        rl_reward_close(&a);
        rl_reward_close(&b);
        return;
    }
    CHECK_STR(rl_reward_name(a), "len");
    CHECK_STR(rl_reward_origin(a), PLUGIN("ok"));
    CHECK_STR(rl_reward_name(b), "ok"); // the table's name when the recipe gives none
    rl_reward_item_t items[3] = {s_item("", 0, "{}"), s_item("abcd", 4, "{\"answer\": \"1\"}"),
                                 s_item("ten tokens", 10, "{}")};
    double out[3];
    CHECK_INT(rl_reward_score(a, items, 3, out, s_err, sizeof s_err), 0);
    CHECK_CLOSE(out[0], 0.0, 0);
    CHECK_CLOSE(out[1], 2.0, 0);
    CHECK_CLOSE(out[2], 5.0, 0);
    // two instances of one .so keep separate states
    CHECK_INT(rl_reward_score(b, items, 3, out, s_err, sizeof s_err), 0);
    CHECK_CLOSE(out[2], 10.0, 0);
    out[0] = 7;
    CHECK_INT(rl_reward_score(a, items, 0, out, s_err, sizeof s_err), 0); // n = 0: no call
    CHECK_CLOSE(out[0], 7.0, 0);
    rl_reward_close(&a);
    CHECK(a == NULL);
    rl_reward_close(&a);                            // a no-op now
    CHECK_CLOSE(s_score1(b, "x", 3, "{}"), 3.0, 0); // b survives a's dlclose (refcounted)
    rl_reward_close(&b);

    CHECK_INT(rl_reward_check(
                  &(rl_recipe_reward_t){
                      .name = "ok", .builtin = -1, .plugin = PLUGIN("ok"), .config_json = "{}"},
                  s_err, sizeof s_err),
              0);
    // a bare file name is taken from the working directory, never searched for
    char cwd[4096];
    if (getcwd(cwd, sizeof cwd) && chdir(RL_TEST_PLUGIN_DIR) == 0) {
        rl_reward_t *c = s_open(s_plugin("here", "ok.so", "{}"));
        CHECK_STR(c ? rl_reward_origin(c) : NULL, "ok.so");
        rl_reward_close(&c);
        CHECK(chdir(cwd) == 0);
    }
}

static void test_plugin_errors(void) {
    // create's message comes back with the reward's name and origin
    char ce[512];
    snprintf(ce, sizeof ce, "reward 'tok' (%s): create failed: config: missing key 'token'",
             PLUGIN("create_error"));
    REFUSED(s_plugin("tok", PLUGIN("create_error"), "{}"), RL_EPLUGIN, ce);

    rl_reward_t *r = s_open(s_plugin("remote", PLUGIN("score_error"), "{}"));
    rl_reward_item_t items[2] = {s_item("a", 1, "{}"), s_item("b", 1, "{}")};
    double out[2];
    if (r) {
        CHECK_INT(rl_reward_score(r, items, 2, out, s_err, sizeof s_err), RL_EPLUGIN);
        char se[512];
        snprintf(se, sizeof se, "reward 'remote' (%s): score failed: backend unavailable (2 items)",
                 PLUGIN("score_error"));
        CHECK_STR(s_err, se);
        rl_reward_close(&r);
    }

    // NaN passes through; infinity is refused with the item's index
    r = s_open(s_plugin("nan", PLUGIN("nan"), "{}"));
    rl_reward_item_t four[4] = {s_item("a", 1, "{}"), s_item("b", 1, "{}"), s_item("c", 1, "{}"),
                                s_item("d", 1, "{}")};
    double o4[4];
    if (r) {
        CHECK_INT(rl_reward_score(r, four, 4, o4, s_err, sizeof s_err), 0);
        CHECK(o4[0] == 0.0 && isnan(o4[1]) && o4[2] == 2.0 && isnan(o4[3]));
        rl_reward_close(&r);
    }
    r = s_open(s_plugin("inf", PLUGIN("nan"), "{\"inf\": true}"));
    if (r) {
        CHECK_INT(rl_reward_score(r, four, 4, o4, s_err, sizeof s_err), RL_EPLUGIN);
        CHECK_CONTAINS(s_err, "reward 'inf'");
        CHECK_CONTAINS(s_err, "returned inf for item 1 of 4");
        rl_reward_close(&r);
    }

    // crash and hang load, create and destroy cleanly; their score is the worker's business
    rl_recipe_reward_t crash = s_plugin("crash", PLUGIN("crash"), "{}");
    rl_recipe_reward_t hang = s_plugin("hang", PLUGIN("hang"), "{}");
    CHECK_MSG(rl_reward_check(&crash, s_err, sizeof s_err) == 0, "%s", s_err);
    CHECK_MSG(rl_reward_check(&hang, s_err, sizeof s_err) == 0, "%s", s_err);
}

// ---------------------------------------------------------------------------------------------
// built-ins

static void test_math_answer(void) {
    rl_reward_t *r = s_open(s_builtin("correct", RL_RECIPE_REWARD_MATH_ANSWER, "{}"));
    if (!r) {
        return;
    }
    CHECK_STR(rl_reward_origin(r), "builtin math_answer");
    const char *row = "{\"prompt\": \"66*3+107=\", \"answer\": \"305\"}";
    CHECK_CLOSE(s_score1(r, "66*3=198;198+107=305 #### 305", 12, row), 1.0, 0);
    CHECK_CLOSE(s_score1(r, "66*3=198;198+107=304 #### 304", 12, row), 0.0, 0);
    CHECK_CLOSE(s_score1(r, "#### 305 #### 306", 4, row), 0.0, 0); // the last marker wins
    CHECK_CLOSE(s_score1(r, "so it is 305", 4, row), 1.0, 0);      // the last number
    CHECK_CLOSE(s_score1(r, "305, or maybe 306", 4, row), 0.0, 0);
    CHECK_CLOSE(s_score1(r, "no idea", 2, row), 0.0, 0);
    // commas, in the completion or in the reference
    CHECK_CLOSE(s_score1(r, "#### 1,234", 3, "{\"answer\": \"1234\"}"), 1.0, 0);
    CHECK_CLOSE(s_score1(r, "#### 1234", 3, "{\"answer\": \"1,234\"}"), 1.0, 0);
    // a GSM8K row: the reference is the solution, its answer after "#### "
    CHECK_CLOSE(s_score1(r, "She sold 48+24 = 72 clips. #### 72", 9,
                         "{\"question\": \"Natalia sold clips...\", \"answer\": \"Natalia sold "
                         "48/2 = <<48/2=24>>24 clips in May.\\n#### 72\"}"),
                1.0, 0);
    // numeric fields
    CHECK_CLOSE(s_score1(r, "#### 305", 3, "{\"answer\": 305}"), 1.0, 0);
    CHECK_CLOSE(s_score1(r, "#### 2.50", 3, "{\"answer\": 2.5}"), 1.0, 0);
    CHECK_CLOSE(s_score1(r, "#### -7", 3, "{\"answer\": -7}"), 1.0, 0);
    // no usable reference: unscorable
    CHECK(isnan(s_score1(r, "#### 305", 3, "{\"prompt\": \"66*3+107=\"}")));
    CHECK(isnan(s_score1(r, "#### 305", 3, "{\"answer\": null}")));
    CHECK(isnan(s_score1(r, "#### 305", 3, "{\"answer\": \"three hundred and five\"}")));
    CHECK(isnan(s_score1(r, "#### 305", 3, "{\"answer\": [305]}")));
    // a row that is not a JSON object is a broken call, not an unscorable item
    rl_reward_item_t bad = s_item("#### 1", 3, "{\"answer\": ");
    double out;
    CHECK_INT(rl_reward_score(r, &bad, 1, &out, s_err, sizeof s_err), RL_EPLUGIN);
    CHECK_CONTAINS(s_err, "reward 'correct' (builtin math_answer): score failed: item 0: the "
                          "row is not a JSON object");
    rl_reward_close(&r);

    // config: another field; unknown keys and wrong types are refused
    r = s_open(s_builtin("gold", RL_RECIPE_REWARD_MATH_ANSWER, "{\"field\": \"gold\"}"));
    CHECK_CLOSE(s_score1(r, "#### 9", 3, "{\"answer\": \"8\", \"gold\": \"9\"}"), 1.0, 0);
    rl_reward_close(&r);
    REFUSED(s_builtin("c", RL_RECIPE_REWARD_MATH_ANSWER, "{\"fild\": \"gold\"}"), RL_EPLUGIN,
            "reward 'c' (builtin math_answer): create failed: config: unknown key 'fild' "
            "(valid keys: field)");
    REFUSED(s_builtin("c", RL_RECIPE_REWARD_MATH_ANSWER, "{\"field\": 3}"), RL_EPLUGIN,
            "'field' must be a non-empty string");
    REFUSED(s_builtin("c", RL_RECIPE_REWARD_MATH_ANSWER, "[1]"), RL_EPLUGIN,
            "config must be a map");
    // the built-in's own name when the recipe gives none
    r = s_open(s_builtin(NULL, RL_RECIPE_REWARD_MATH_ANSWER, NULL));
    CHECK_STR(r ? rl_reward_name(r) : NULL, "math_answer");
    rl_reward_close(&r);
}

static void test_regex_format(void) {
    rl_reward_t *r = s_open(
        s_builtin("fmt", RL_RECIPE_REWARD_REGEX_FORMAT, "{\"pattern\": \"#### -?[0-9]+$\"}"));
    CHECK_CLOSE(s_score1(r, "66*3=198;198+107=305 #### 305", 12, "{}"), 1.0, 0);
    CHECK_CLOSE(s_score1(r, "66*3=198;198+107=305 #### 305 ok", 13, "{}"), 0.0, 0);
    CHECK_CLOSE(s_score1(r, "305", 1, "{}"), 0.0, 0);
    CHECK_CLOSE(s_score1(r, "", 0, "{}"), 0.0, 0);
    rl_reward_close(&r);
    // Python's re.search: unanchored unless the pattern anchors itself; '.' stops at a newline
    r = s_open(s_builtin("x", RL_RECIPE_REWARD_REGEX_FORMAT,
                         "{\"pattern\": \"^<think>.*</think>(yes|no)$\"}"));
    CHECK_CLOSE(s_score1(r, "<think>a b</think>yes", 5, "{}"), 1.0, 0);
    CHECK_CLOSE(s_score1(r, "<think>a\nb</think>yes", 5, "{}"), 0.0, 0);
    CHECK_CLOSE(s_score1(r, " <think>a</think>yes", 5, "{}"), 0.0, 0);
    rl_reward_close(&r);
    // ... unless (?s) lets it span lines, as TRL's format rewards write it
    r = s_open(
        s_builtin("s", RL_RECIPE_REWARD_REGEX_FORMAT, "{\"pattern\": \"(?s)<think>.*</think>\"}"));
    CHECK_CLOSE(s_score1(r, "<think>\nstep 1\nstep 2\n</think> #### 42", 9, "{}"), 1.0, 0);
    CHECK_CLOSE(s_score1(r, "<think> no end", 3, "{}"), 0.0, 0);
    rl_reward_close(&r);
    // Python's classes and anchors: \d, ^ the text's start, $ its end or before a final newline
    r = s_open(s_builtin("d", RL_RECIPE_REWARD_REGEX_FORMAT, "{\"pattern\": \"^\\\\d+$\"}"));
    CHECK_CLOSE(s_score1(r, "42", 1, "{}"), 1.0, 0);
    CHECK_CLOSE(s_score1(r, "4 2", 2, "{}"), 0.0, 0);
    CHECK_CLOSE(s_score1(r, "42\n", 2, "{}"), 1.0, 0);
    CHECK_CLOSE(s_score1(r, "x\n42", 2, "{}"), 0.0, 0);
    CHECK_CLOSE(s_score1(r, "42\nx", 2, "{}"), 0.0, 0);
    rl_reward_close(&r);
    // (?m) makes ^ and $ lines'; (?P<name>...) and (?P=name) are Python's groups
    r = s_open(s_builtin("m", RL_RECIPE_REWARD_REGEX_FORMAT,
                         "{\"pattern\": \"(?m)^#### (?P<n>\\\\d+)$\"}"));
    CHECK_CLOSE(s_score1(r, "work\n#### 5\nmore", 6, "{}"), 1.0, 0);
    rl_reward_close(&r);
    r = s_open(s_builtin("p", RL_RECIPE_REWARD_REGEX_FORMAT,
                         "{\"pattern\": \"(?P<n>\\\\d+)\\\\+(?P=n)\"}"));
    CHECK_CLOSE(s_score1(r, "so 7+7=14", 5, "{}"), 1.0, 0);
    CHECK_CLOSE(s_score1(r, "so 7+8=15", 5, "{}"), 0.0, 0);
    rl_reward_close(&r);
    r = s_open(s_builtin("y", RL_RECIPE_REWARD_REGEX_FORMAT, "{\"pattern\": \"[0-9]+\"}"));
    CHECK_CLOSE(s_score1(r, "abc 5 def", 3, "{}"), 1.0, 0);
    rl_reward_close(&r);

    REFUSED(s_builtin("fmt", RL_RECIPE_REWARD_REGEX_FORMAT, "{\"pattern\": \"([0-9]\"}"),
            RL_EPLUGIN,
            "reward 'fmt' (builtin regex_format): create failed: bad pattern "
            "'([0-9]'");
    REFUSED(s_builtin("fmt", RL_RECIPE_REWARD_REGEX_FORMAT, "{}"), RL_EPLUGIN, "reward 'fmt'",
            "'pattern'", "is required");
    REFUSED(s_builtin("fmt", RL_RECIPE_REWARD_REGEX_FORMAT, "{\"pattern\": 5}"), RL_EPLUGIN,
            "is not a string");
    REFUSED(s_builtin("fmt", RL_RECIPE_REWARD_REGEX_FORMAT, "{\"pattern\": \"a\", \"x\": 1}"),
            RL_EPLUGIN, "unknown key 'x'");
}

static void test_length(void) {
    // target: -|L - target| / target
    rl_reward_t *r = s_open(s_builtin("len", RL_RECIPE_REWARD_LENGTH, "{\"target\": 10}"));
    CHECK_CLOSE(s_score1(r, "", 10, "{}"), 0.0, 1e-15);
    CHECK_CLOSE(s_score1(r, "", 5, "{}"), -0.5, 1e-15);
    CHECK_CLOSE(s_score1(r, "", 20, "{}"), -1.0, 1e-15);
    CHECK_CLOSE(s_score1(r, "", 0, "{}"), -1.0, 1e-15);
    rl_reward_close(&r);

    // DAPO overlong: 0 up to max - buffer = 15, then -(L - 15)/5 * penalty, -penalty beyond 20
    r = s_open(s_builtin("over", RL_RECIPE_REWARD_LENGTH, "{\"max\": 20, \"buffer\": 5}"));
    CHECK_CLOSE(s_score1(r, "", 3, "{}"), 0.0, 1e-15);
    CHECK_CLOSE(s_score1(r, "", 15, "{}"), 0.0, 1e-15);
    CHECK_CLOSE(s_score1(r, "", 16, "{}"), -0.2, 1e-15);
    CHECK_CLOSE(s_score1(r, "", 19, "{}"), -0.8, 1e-15);
    CHECK_CLOSE(s_score1(r, "", 20, "{}"), -1.0, 1e-15);
    CHECK_CLOSE(s_score1(r, "", 25, "{}"), -1.0, 1e-15);
    rl_reward_close(&r);
    r = s_open(s_builtin("over", RL_RECIPE_REWARD_LENGTH,
                         "{\"max\": 20, \"buffer\": 5, \"penalty\": 0.5}"));
    CHECK_CLOSE(s_score1(r, "", 18, "{}"), -0.3, 1e-15);
    CHECK_CLOSE(s_score1(r, "", 21, "{}"), -0.5, 1e-15);
    rl_reward_close(&r);
    // buffer 0 (the default): a cliff at max
    r = s_open(s_builtin("cliff", RL_RECIPE_REWARD_LENGTH, "{\"max\": 20}"));
    CHECK_CLOSE(s_score1(r, "", 20, "{}"), 0.0, 1e-15);
    CHECK_CLOSE(s_score1(r, "", 21, "{}"), -1.0, 1e-15);
    rl_reward_close(&r);
    // both terms add up: -|18 - 10|/10 - (18 - 15)/5 = -0.8 - 0.6
    r = s_open(s_builtin("both", RL_RECIPE_REWARD_LENGTH,
                         "{\"target\": 10, \"max\": 20, \"buffer\": 5, \"penalty\": 1}"));
    CHECK_CLOSE(s_score1(r, "", 18, "{}"), -1.4, 1e-15);
    rl_reward_close(&r);

    REFUSED(s_builtin("len", RL_RECIPE_REWARD_LENGTH, "{}"), RL_EPLUGIN,
            "reward 'len' (builtin length): create failed: config: set 'target'");
    REFUSED(s_builtin("len", RL_RECIPE_REWARD_LENGTH, "{\"target\": 0}"), RL_EPLUGIN,
            "'target' must be > 0");
    REFUSED(s_builtin("len", RL_RECIPE_REWARD_LENGTH, "{\"target\": \"10\"}"), RL_EPLUGIN,
            "'target' must be a number");
    REFUSED(s_builtin("len", RL_RECIPE_REWARD_LENGTH, "{\"max\": 10, \"buffer\": 11}"), RL_EPLUGIN,
            "'buffer' must be in [0, max = 10]");
    REFUSED(s_builtin("len", RL_RECIPE_REWARD_LENGTH, "{\"target\": 5, \"buffer\": 2}"), RL_EPLUGIN,
            "'buffer' and 'penalty' need 'max'");
    REFUSED(s_builtin("len", RL_RECIPE_REWARD_LENGTH, "{\"max\": 5, \"penalty\": -1}"), RL_EPLUGIN,
            "'penalty' must be >= 0");
    REFUSED(s_builtin("len", RL_RECIPE_REWARD_LENGTH, "{\"max\": 5, \"min\": 1}"), RL_EPLUGIN,
            "unknown key 'min' (valid keys: target, max, buffer, penalty)");
}

// ---------------------------------------------------------------------------------------------
// the cookbook's example plugin, and the arith task's gold completions

static void test_example(const char *path) {
    rl_reward_t *r = s_open(s_plugin("format", path, "{}"));
    if (!r) {
        return;
    }
    CHECK_CLOSE(s_score1(r, "66*3=198;198+107=305 #### 305", 12, "{}"), 1.0, 0);
    CHECK_CLOSE(s_score1(r, "66*3=198;198+107=305 #### 305\n", 13, "{}"), 1.0, 0);
    CHECK_CLOSE(s_score1(r, "#### -5", 3, "{}"), 1.0, 0);
    CHECK_CLOSE(s_score1(r, "#### 1,234.5", 3, "{}"), 1.0, 0);
    CHECK_CLOSE(s_score1(r, "#### 305 done", 4, "{}"), 0.0, 0);
    CHECK_CLOSE(s_score1(r, "66*3=198;198+107=305", 10, "{}"), 0.0, 0);
    CHECK_CLOSE(s_score1(r, "####305", 2, "{}"), 0.0, 0);
    CHECK_CLOSE(s_score1(r, "#### 1.2.3", 3, "{}"), 0.0, 0);
    CHECK_CLOSE(s_score1(r, "#### 12.", 3, "{}"), 0.0, 0);
    CHECK_CLOSE(s_score1(r, "", 0, "{}"), 0.0, 0);
    rl_reward_close(&r);
    r = s_open(s_plugin("format", path, "{\"value\": 0.25}"));
    CHECK_CLOSE(s_score1(r, "#### 7", 2, "{}"), 0.25, 0);
    rl_reward_close(&r);
    REFUSED(s_plugin("format", path, "{\"value\": \"high\"}"), RL_EPLUGIN,
            "create failed: config: 'value' must be a number");
}

// Every gold completion of the held-out arith set is right (math_answer) and well formed
// (format_bonus), with the row handed over as the dataset has it.
static void test_arith_gold(void) {
    size_t len = 0;
    char *text = rl_test_read_file(RL_SOURCE_DIR "/cookbook/data/arith/eval.jsonl", &len);
    if (!text) {
        CHECK_MSG(0, "cannot read cookbook/data/arith/eval.jsonl");
        return;
    }
    rl_reward_t *math = s_open(s_builtin("correct", RL_RECIPE_REWARD_MATH_ANSWER, "{}"));
    rl_reward_t *fmt = s_open(s_plugin("format", RL_EXAMPLE_PLUGIN, "{}"));
    int rows = 0, right = 0, formed = 0;
    for (char *line = strtok(text, "\n"); line && math && fmt; line = strtok(NULL, "\n")) {
        json_t *row = json_loads(line, 0, NULL);
        const char *c = json_string_value(json_object_get(row, "completion"));
        if (!c) {
            json_decref(row);
            continue;
        }
        rows++;
        right += s_score1(math, c, 1, line) == 1.0;
        formed += s_score1(fmt, c, 1, line) == 1.0;
        json_decref(row);
    }
    CHECK_MSG(rows > 100 && right == rows && formed == rows, "%d rows, %d right, %d formed", rows,
              right, formed);
    rl_reward_close(&math);
    rl_reward_close(&fmt);
    free(text);
}

// A reward model (`model:`): the shipped cookbook/models/arith-rm scores a right completion of
// "66*3+107=" above a wrong one, in a batch or alone the same; a sequence past the model's
// positions is NaN; a folder without a score head, a missing folder and an unknown config key
// are refused naming the reward.
static void test_model_reward(void) {
    rl_recipe_reward_t spec = s_builtin("rm", RL_RECIPE_REWARD_MODEL, "{\"batch_size\": 2}");
    spec.model = RL_SOURCE_DIR "/cookbook/models/arith-rm";
    rl_reward_t *r = s_open(spec);
    CHECK_STR(r ? rl_reward_origin(r) : "", "model " RL_SOURCE_DIR "/cookbook/models/arith-rm");
    static char long_text[600];
    memset(long_text, '1', sizeof long_text - 1); // 599 tokens: past its 128 positions
    const char *texts[3] = {"66*3=198;198+107=305 #### 305", "66*3=198;198+107=305 #### 309",
                            long_text};
    rl_reward_item_t items[3];
    for (int i = 0; i < 3; i++) {
        items[i] = s_item(texts[i], 1, "{}");
    }
    double out[3] = {0, 0, 0};
    CHECK_INT(r ? rl_reward_score(r, items, 3, out, s_err, sizeof s_err) : -1, 0);
    double right = r ? s_score1(r, texts[0], 1, "{}") : NAN;
    fprintf(stderr, "arith-rm: right %.4f, wrong %.4f, too long %g\n", out[0], out[1], out[2]);
    CHECK_MSG(isfinite(out[0]) && isfinite(out[1]) && out[0] > out[1] + 1.0,
              "arith-rm scores the right completion %g, the wrong one %g", out[0], out[1]);
    CHECK_MSG(fabs(right - out[0]) <= 1e-5 * fmax(1.0, fabs(out[0])), "alone %g, in a batch %g",
              right, out[0]);
    CHECK_MSG(isnan(out[2]), "a sequence past the positions scored %g, not NaN", out[2]);
    rl_reward_close(&r);
    spec.model = RL_SOURCE_DIR "/cookbook/models/arith-base";
    REFUSED(spec, RL_EPLUGIN, "reward 'rm'", "has no score.weight [1, 128]: not a reward model");
    spec.model = RL_SOURCE_DIR "/cookbook/models/no-such-folder";
    REFUSED(spec, RL_EPLUGIN, "reward 'rm'", "no-such-folder");
    spec.model = RL_SOURCE_DIR "/cookbook/models/arith-rm";
    spec.config_json = "{\"batch\": 2}";
    REFUSED(spec, RL_EPLUGIN, "reward 'rm'", "unknown key 'batch'");
}

int main(void) {
    RL_TEST_RUN(test_model_reward);
    RL_TEST_RUN(test_refusals);
    RL_TEST_RUN(test_ok_plugin);
    RL_TEST_RUN(test_plugin_errors);
    RL_TEST_RUN(test_math_answer);
    RL_TEST_RUN(test_regex_format);
    RL_TEST_RUN(test_length);
    test_example(RL_EXAMPLE_PLUGIN);    // built as a MODULE with the project's flags
    test_example(RL_EXAMPLE_PLUGIN_CC); // built with the documented cc line
    RL_TEST_RUN(test_arith_gold);
    RL_TEST_DONE();
}
