// test_async — asynchronous GRPO rollouts (algorithm.max_staleness, docs/algorithms.md): with
// k = 1 and 2 on the cookbook recipe, every stored trajectory was sampled with weights at most k
// versions older than the ones its step updates (and exactly k once the pipeline is full, except
// right after a checkpoint, where the pipeline restarts on-policy), async/staleness and the TIS
// weights are logged, and a run stopped at a checkpoint and resumed ends with the metrics and the
// adapter of the uninterrupted run. A run that fails in an evaluation while the next step's
// generation is queued leaves a rescue checkpoint whose data position is that step's prompts
// (not past them: rl_run_t.trained), so its resume trains what the uninterrupted run trains.
#include "rl_test_run.h"

static char s_tmp[256];

static int s_run(const char *run, int k, const char *extra) {
    char args[2048];
    snprintf(args, sizeof args,
             "run %s/cookbook/grpo_lora.yaml run.dir=%s/%s train.steps=7 optim.warmup_steps=1 "
             "train.eval_every=0 train.eval_samples=32 train.save_every=3 algorithm.tis=token "
             "algorithm.max_staleness=%d %s",
             RL_SOURCE_DIR, s_tmp, run, k, extra);
    return rl_test_rlctl(s_tmp, args);
}

// Every record of every step: staleness = (step - 1) - policy_version; checks the bound and
// returns the largest one seen, or -1.
static int s_check_staleness(const char *run, int k, int steps, int *at_step) {
    int most = -1;
    for (int step = 1; step <= steps; step++) {
        char args[600];
        snprintf(args, sizeof args, "traj export %s/%s --step %d", s_tmp, run, step);
        CHECK_INT(rl_test_rlctl(s_tmp, args), 0);
        char *out = rl_test_out(s_tmp);
        int n = 0, st = -1;
        char *save = NULL;
        for (char *l = out ? strtok_r(out, "\n", &save) : NULL; l;
             l = strtok_r(NULL, "\n", &save)) {
            json_t *o = json_loads(l, 0, NULL);
            if (!o) {
                continue;
            }
            long long v = (long long)json_integer_value(json_object_get(o, "policy_version"));
            int s = (int)((step - 1) - v);
            CHECK_MSG(s >= 0 && s <= k,
                      "%s step %d: a record sampled with version %lld "
                      "(staleness %d > %d)",
                      run, step, v, s, k);
            CHECK_MSG(st < 0 || s == st, "%s step %d: records of different versions", run, step);
            st = s;
            n++;
            json_decref(o);
        }
        free(out);
        CHECK_MSG(n > 0, "%s step %d: no records", run, step);
        at_step[step] = st;
        most = st > most ? st : most;
    }
    return most;
}

// The training lines of a run's metrics (the evaluations' lines aside, whose values a failed
// evaluation never wrote), eval/* keys dropped.
static json_t *s_train_lines(const char *run) {
    json_t *all = rl_test_metrics(s_tmp, run), *out = json_array();
    size_t i;
    json_t *o;
    json_array_foreach(all, i, o) {
        if (json_object_get(o, "loss")) {
            json_t *c = json_deep_copy(o);
            const char *k;
            json_t *v;
            void *it;
            json_object_foreach_safe(c, it, k, v) {
                if (strncmp(k, "eval/", 5) == 0 || strcmp(k, "timing/eval") == 0) {
                    json_object_del(c, k);
                }
            }
            json_array_append_new(out, c);
        }
    }
    json_decref(all);
    return out;
}

// The dataset rows of step `step`'s trajectories, in a string ("2080 5311 ..."), sorted.
static void s_step_rows(const char *run, int step, char *out, size_t n) {
    char args[600];
    snprintf(args, sizeof args, "traj export %s/%s --step %d", s_tmp, run, step);
    CHECK_INT(rl_test_rlctl(s_tmp, args), 0);
    char *txt = rl_test_out(s_tmp);
    long rows[512];
    int k = 0;
    char *save = NULL;
    for (char *l = txt ? strtok_r(txt, "\n", &save) : NULL; l && k < 512;
         l = strtok_r(NULL, "\n", &save)) {
        json_t *o = json_loads(l, 0, NULL);
        if (o) {
            rows[k++] = (long)json_integer_value(json_object_get(o, "data_index"));
            json_decref(o);
        }
    }
    free(txt);
    for (int i = 1; i < k; i++) { // insertion sort; duplicates (a prompt's samples) collapse
        long v = rows[i];
        int j = i - 1;
        for (; j >= 0 && rows[j] > v; j--) {
            rows[j + 1] = rows[j];
        }
        rows[j + 1] = v;
    }
    size_t o = 0;
    out[0] = '\0';
    for (int i = 0; i < k && o < n; i++) {
        if (i == 0 || rows[i] != rows[i - 1]) {
            o += (size_t)snprintf(out + o, n - o, "%s%ld", o ? " " : "", rows[i]);
        }
    }
}

// An evaluation after step 2 fails (the 6th generate of each sampler: the two of the evaluation
// before training, the generations of steps 1-3, then the evaluation's) while step 3's
// generation is queued: the step's metrics line is written, and the rescue checkpoint of step 2
// keeps the data position of step 3's prompts (2 x 16; before rl_run_t.trained it said 48 and
// the resume skipped 16 prompts). The resumed run trains steps 3 and 4 on the uninterrupted
// run's prompts (sampled on-policy, as after any checkpoint: the numbers of those steps differ).
static void test_rescue_position(void) {
    const char *args = "train.steps=4 train.eval_every=2 train.eval_samples=16 train.save_every=0";
    CHECK_INT(s_run("evk1", 1, args), 0);
    setenv("RLCTL_FAULT", "generate_bad_id@6", 1);
    CHECK_INT(s_run("evfail", 1, args), 1);
    unsetenv("RLCTL_FAULT");
    char p[700];
    snprintf(p, sizeof p, "%s/evfail/checkpoints/step-2/state.json", s_tmp);
    json_t *st = json_load_file(p, 0, NULL);
    CHECK_MSG(st != NULL, "no rescue checkpoint at %s", p);
    json_t *data = json_object_get(st, "data");
    CHECK_INT((int)json_integer_value(json_object_get(data, "epoch")), 0);
    CHECK_INT((int)json_integer_value(json_object_get(data, "index")), 32);
    json_decref(st);
    char more[300];
    snprintf(more, sizeof more, "%s --resume", args);
    CHECK_INT(s_run("evfail", 1, more), 0);
    json_t *a = s_train_lines("evk1"), *b = s_train_lines("evfail");
    CHECK_MSG(json_array_size(a) == 4 && json_array_size(b) == 4, "%zu and %zu training lines",
              json_array_size(a), json_array_size(b));
    for (size_t i = 0; i < 2 && i < json_array_size(b); i++) { // before the failure: the same
        CHECK_MSG(json_equal(json_array_get(a, i), json_array_get(b, i)), "step %zu differs",
                  i + 1);
    }
    json_decref(a);
    json_decref(b);
    for (int step = 3; step <= 4; step++) {
        char ra[4096], rb[4096];
        s_step_rows("evk1", step, ra, sizeof ra);
        s_step_rows("evfail", step, rb, sizeof rb);
        CHECK_MSG(ra[0] && strcmp(ra, rb) == 0, "step %d trained rows '%s', uninterrupted '%s'",
                  step, rb, ra);
    }
}

int main(void) {
    rl_test_tmpdir(s_tmp, sizeof s_tmp, "async");
    int at[16];
    for (int k = 1; k <= 2; k++) {
        char run[32];
        snprintf(run, sizeof run, "k%d", k);
        CHECK_INT(s_run(run, k, ""), 0);
        CHECK_INT(s_check_staleness(run, k, 7, at), k);
        // step 1 and the steps after the checkpoints of steps 3 and 6 start on-policy; the
        // pipeline then fills: staleness 1, then k (no generation is posted across a checkpoint)
        static const int want[3][8] = {{0}, {0, 0, 1, 1, 0, 1, 1, 0}, {0, 0, 1, 2, 0, 1, 2, 0}};
        for (int s = 1; s <= 7; s++) {
            CHECK_MSG(at[s] == want[k][s], "k %d step %d: staleness %d, expected %d", k, s, at[s],
                      want[k][s]);
        }
        json_t *m = rl_test_metrics(s_tmp, run);
        size_t i;
        json_t *o;
        int seen = 0;
        json_array_foreach(m, i, o) {
            if (json_object_get(o, "loss")) {
                seen++;
                CHECK(json_is_number(json_object_get(o, "async/staleness")));
                // the histogram: all of a step's completions at its staleness (local samplers)
                long st = (long)json_integer_value(json_object_get(o, "step"));
                char key[48];
                snprintf(key, sizeof key, "async/staleness_%d", want[k][st]);
                CHECK_MSG(json_number_value(json_object_get(o, key)) == 1.0,
                          "k %d step %ld: %s is not 1", k, st, key);
                CHECK(json_is_number(json_object_get(o, "tis/weight_mean")));
            }
        }
        CHECK_INT(seen, 7);
        json_decref(m);
    }
    // stopped at the checkpoint of step 3 and resumed: the uninterrupted run's numbers
    CHECK_INT(s_run("stopped", 1, "--stop-at 3"), 0);
    char args[600];
    snprintf(args, sizeof args,
             "run %s/cookbook/grpo_lora.yaml run.dir=%s/stopped train.steps=7 "
             "optim.warmup_steps=1 train.eval_every=0 train.eval_samples=32 train.save_every=3 "
             "algorithm.tis=token algorithm.max_staleness=1 --resume",
             RL_SOURCE_DIR, s_tmp);
    CHECK_INT(rl_test_rlctl(s_tmp, args), 0);
    json_t *a = rl_test_metrics(s_tmp, "k1"), *b = rl_test_metrics(s_tmp, "stopped");
    // the resumed run's folder has the bookend evaluations of both invocations: compare the
    // training steps
    json_t *ta = json_array(), *tb = json_array();
    size_t i;
    json_t *o;
    json_array_foreach(a, i, o) {
        if (json_object_get(o, "loss")) {
            json_array_append(ta, o);
        }
    }
    json_array_foreach(b, i, o) {
        if (json_object_get(o, "loss")) {
            json_array_append(tb, o);
        }
    }
    CHECK_MSG(json_array_size(ta) == 7 && json_equal(ta, tb),
              "a resumed asynchronous run differs from the uninterrupted one");
    CHECK(rl_test_files_equal(s_tmp, "k1/final/adapter_model.safetensors",
                              "stopped/final/adapter_model.safetensors"));
    json_decref(a);
    json_decref(b);
    json_decref(ta);
    json_decref(tb);
    test_rescue_position();
    rl_test_tmpdir_done(s_tmp);
    RL_TEST_DONE();
}
