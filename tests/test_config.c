// tests for rl_config (recipes) and rl_yaml: defaults, every error class with its exact
// file:line:col, did-you-mean, duplicates, overrides, the printed YAML's fixed point, the docs
// covering every schema key, defaults per algorithm, the name lists core shares with model/ and
// rewards/, the bad-recipe corpus (tests/fixtures/recipes/bad/*.yaml, each carrying its
// expected messages as "# expect:" lines) and the rlctl binary's exit codes.
#include "rl_config.h"
#include "rl_algos.h"
#include "rl_loss.h"
#include "rl_config_priv.h" // rl_cfg_algo_defaults with rows of the test's own
#include "rl_err.h"
#include "rl_test.h"
#include "rl_yaml.h"

#include <dirent.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#define RECIPES RL_FIXTURES "/recipes"
#define ERRLEN 65536

static char s_err[ERRLEN];


// loads text named RECIPES/bad/<name> (so relative paths hit the fixtures) and expects failure
static int s_load_str(const char *name, const char *text, const char *const *ovr, int n_ovr,
                      rl_recipe_t **out) {
    char path[512];
    snprintf(path, sizeof path, "%s/bad/%s", RECIPES, name);
    return rl_recipe_load_string(rl_algos(), text, strlen(text), path, ovr, n_ovr, 0, out, s_err,
                                 ERRLEN);
}

// The value of a number key of r (an algorithm's setting or any other): NaN when it has none.
static double s_num(const rl_recipe_t *r, const char *key) {
    double v = NAN;
    return rl_recipe_number(r, key, &v) == 0 ? v : NAN;
}

// ---------------------------------------------------------------------------------------------

static void test_yaml_tree(void) {
    rl_yaml_node_t *n = NULL;
    const char *t = "a: 1\nb: [x, 'y', 2.5]\nc: {d: ~}\n";
    CHECK_INT(rl_yaml_parse(t, strlen(t), "t.yaml", 0, &n, s_err, ERRLEN), 0);
    CHECK(n && n->kind == RL_YAML_MAP && n->n == 3);
    rl_yaml_node_t *k = NULL;
    rl_yaml_node_t *b = rl_yaml_map_get(n, "b", &k);
    CHECK(b && b->kind == RL_YAML_SEQ && b->n == 3);
    CHECK(k && k->line == 2 && k->col == 1);
    if (b && b->n == 3) {
        CHECK_INT(b->kids[0]->col, 5);
        CHECK_INT(rl_yaml_scalar_type(b->kids[0]), RL_YAML_T_STRING);
        CHECK_INT(rl_yaml_scalar_type(b->kids[1]), RL_YAML_T_STRING); // quoted
        CHECK_INT(rl_yaml_scalar_type(b->kids[2]), RL_YAML_T_FLOAT);
    }
    CHECK_INT(rl_yaml_scalar_type(rl_yaml_map_get(n, "a", NULL)), RL_YAML_T_INT);
    CHECK_INT(rl_yaml_scalar_type(rl_yaml_map_get(rl_yaml_map_get(n, "c", NULL), "d", NULL)),
              RL_YAML_T_NULL);
    rl_yaml_destroy(&n);
    CHECK(n == NULL);
    // scalar typing rules
    const char *ints[] = {"0", "-3", "+12"}, *floats[] = {"1e-4", "1.", ".5", "-2.5E+3"},
               *strs[] = {"yes", "0x10", "1e", ".", "1_000", "inf", ".nan", "e5"};
    for (size_t i = 0; i < sizeof ints / sizeof *ints; i++) {
        rl_yaml_node_t s = {.kind = RL_YAML_SCALAR, .str = (char *)ints[i],
                            .len = strlen(ints[i]), .plain = 1};
        CHECK_MSG(rl_yaml_scalar_type(&s) == RL_YAML_T_INT, "%s", ints[i]);
    }
    for (size_t i = 0; i < sizeof floats / sizeof *floats; i++) {
        rl_yaml_node_t s = {.kind = RL_YAML_SCALAR, .str = (char *)floats[i],
                            .len = strlen(floats[i]), .plain = 1};
        CHECK_MSG(rl_yaml_scalar_type(&s) == RL_YAML_T_FLOAT, "%s", floats[i]);
    }
    for (size_t i = 0; i < sizeof strs / sizeof *strs; i++) {
        rl_yaml_node_t s = {.kind = RL_YAML_SCALAR, .str = (char *)strs[i],
                            .len = strlen(strs[i]), .plain = 1};
        CHECK_MSG(rl_yaml_scalar_type(&s) == RL_YAML_T_STRING, "%s", strs[i]);
    }
    // caps: nesting depth
    char deep[400];
    memset(deep, '[', 200);
    deep[200] = '\0';
    CHECK_INT(rl_yaml_parse(deep, strlen(deep), "deep.yaml", 0, &n, s_err, ERRLEN), RL_EINVAL);
    CHECK_CONTAINS(s_err, "deep.yaml:1:65: nesting is too deep (limit 64 levels)");
    CHECK_INT(rl_yaml_parse("", 0, "e.yaml", 0, &n, s_err, ERRLEN), 0);
    CHECK(n == NULL);
    // one-line override values: problems at the end of the line are reported on line 1
    CHECK_INT(rl_yaml_parse("[a", 2, "<o>", 4, &n, s_err, ERRLEN), RL_EINVAL);
    CHECK_CONTAINS(s_err, "<o>:1:7: YAML syntax error");
}

static void test_defaults(void) {
    rl_recipe_t *r = NULL;
    int rc =
        rl_recipe_load_file(rl_algos(), RECIPES "/good/sft.yaml", NULL, 0, 0, &r, s_err, ERRLEN);
    CHECK_MSG(rc == 0, "%s", s_err);
    if (!r) {
        return;
    }
    CHECK_STR(r->run.name, "sft"); // the file's stem
    CHECK_CONTAINS(r->run.dir, "/runs/sft");
    CHECK(r->run.dir[0] == '/');
    CHECK_INT(r->run.seed, 0);
    CHECK_CONTAINS(r->model.path, "/tests/fixtures/recipes/model");
    CHECK(strstr(r->model.path, "..") == NULL);
    CHECK_CONTAINS(r->model.tokenizer, "/tests/fixtures/recipes/model/tokenizer.json");
    CHECK_INT(r->model.dtype, RL_RECIPE_DTYPE_AUTO);
    CHECK_INT(r->model.chat_template, RL_RECIPE_CHAT_AUTO);
    CHECK(!r->lora.enabled);
    CHECK_INT(r->lora.r, 8);
    CHECK_CLOSE(r->lora.alpha, 16.0, 0);
    CHECK_INT(r->lora.target_modules.n, 7);
    CHECK(r->data.eval.n == 0);
    CHECK_INT(r->data.format, RL_RECIPE_FORMAT_AUTO);
    CHECK_STR(r->data.prompt_field, "prompt");
    CHECK_STR(r->data.completion_field, "completion");
    CHECK_STR(r->data.answer_field, "answer");
    CHECK_INT(r->data.max_length, 1024);
    CHECK_INT(r->data.truncation, RL_RECIPE_TRUNC_DROP);
    CHECK(r->data.shuffle);
    CHECK_STR(r->algorithm.def->name, "sft");
    CHECK_CLOSE(s_num(r, "algorithm.completion_only_loss"), 1, 0); // SFT's setting
    CHECK(isnan(s_num(r, "algorithm.num_generations"))); // GRPO's setting: not an SFT recipe's
    CHECK_CLOSE(r->algorithm.std_eps, 1e-4, 0);
    CHECK_CLOSE(r->algorithm.epsilon_low, 0.2, 0);
    CHECK_CLOSE(r->algorithm.epsilon_high, 0.2, 0);
    CHECK_INT(r->algorithm.kl_estimator, RL_RECIPE_KL_K3);
    CHECK_INT(r->algorithm.loss_agg, RL_RECIPE_AGG_TOKEN_MEAN);
    CHECK_INT(r->algorithm.tis, RL_RECIPE_TIS_NONE);
    CHECK_CLOSE(r->sampling.temperature, 1.0, 0);
    CHECK_INT(r->sampling.max_new_tokens, 256);
    CHECK_INT(r->sampling.stop.n, 0);
    CHECK_INT(r->n_rewards, 0);
    CHECK_INT(r->optim.name, RL_RECIPE_OPTIM_ADAMW);
    CHECK_CLOSE(r->optim.lr, 2e-3, 0);
    CHECK_CLOSE(r->optim.betas[0], 0.9, 0);
    CHECK_CLOSE(r->optim.betas[1], 0.999, 0);
    CHECK_CLOSE(r->optim.eps, 1e-8, 0);
    CHECK_INT(r->optim.scheduler, RL_RECIPE_SCHED_CONSTANT);
    CHECK_INT(r->train.steps, 100);
    CHECK_INT(r->train.batch_size, 8);
    CHECK_INT(r->train.micro_batch_size, 8);
    CHECK_INT(r->train.keep_checkpoints, 2);
    CHECK_INT(r->train.log_every, 1);
    // positions: set keys have one, defaulted keys report the file
    const char *file;
    int line, col;
    CHECK_INT(rl_recipe_key_location(r, "optim.lr", &file, &line, &col), 0);
    CHECK_CONTAINS(file, "good/sft.yaml");
    CHECK_INT(line, 9);
    CHECK_INT(col, 3);
    CHECK_INT(rl_recipe_key_location(r, "optim.eps", &file, &line, &col), RL_ENOTFOUND);
    CHECK_INT(line, 0);
    CHECK_CONTAINS(file, "good/sft.yaml");
    char e[256];
    CHECK_INT(rl_recipe_errorf(r, "model.path", e, sizeof e, RL_EINVAL, "config.json: %s",
                               "bad"),
              RL_EINVAL);
    CHECK_CONTAINS(e, "good/sft.yaml:3:3: model.path: config.json: bad");
    rl_recipe_destroy(&r);
    CHECK(r == NULL);
    rl_recipe_destroy(&r); // no-op
}

static void test_grpo(void) {
    rl_recipe_t *r = NULL;
    int rc =
        rl_recipe_load_file(rl_algos(), RECIPES "/good/grpo.yaml", NULL, 0, 0, &r, s_err, ERRLEN);
    CHECK_MSG(rc == 0, "%s", s_err);
    if (!r) {
        return;
    }
    CHECK_STR(r->run.name, "fixture-grpo");
    CHECK(r->lora.enabled);
    CHECK_INT(r->lora.target_modules.n, 7);
    CHECK_STR(r->lora.target_modules.items[6], "down_proj");
    CHECK_CLOSE(s_num(r, "algorithm.num_generations"), 4, 0);
    CHECK_STR(r->algorithm.policy_loss, "grpo"); // the default; the registry checks the name
    CHECK_INT(r->sampling.stop.n, 2);
    CHECK_STR(r->sampling.stop.items[0], "\n\n");
    CHECK_INT(r->n_rewards, 3);
    if (r->n_rewards == 3) {
        CHECK_STR(r->rewards[0].name, "math_answer");
        CHECK_INT(r->rewards[0].builtin, RL_RECIPE_REWARD_MATH_ANSWER);
        CHECK_STR(r->rewards[0].config_json, "{}");
        CHECK_STR(r->rewards[1].name, "fmt");
        CHECK_CLOSE(r->rewards[1].weight, 0.5, 0);
        CHECK_STR(r->rewards[1].config_json,
                  "{\"pattern\": \"^\\\\d+$\", \"flags\": [\"i\", \"m\"], \"nested\": "
                  "{\"a\": 1, \"b\": [1.5, null, true]}}");
        CHECK_INT(r->rewards[2].builtin, RL_RECIPE_REWARD_PLUGIN);
        CHECK_CONTAINS(r->rewards[2].plugin, "/recipes/plugins/fake_reward.so");
    }
    const char *file;
    int line, col;
    CHECK_INT(rl_recipe_key_location(r, "rewards[2].plugin", &file, &line, &col), 0);
    CHECK_INT(line, 28);
    CHECK_INT(col, 5);
    CHECK_INT(r->optim.scheduler, RL_RECIPE_SCHED_COSINE);
    CHECK_INT(r->train.micro_batch_size, 8);
    rl_recipe_destroy(&r);
}

// The model's generation_config.json fills the sampling keys the recipe leaves unset (not with
// do_sample: false); the recipe's own values win; the loader says what it took.
static void test_generation_defaults(void) {
    char dir[] = "/tmp/rl_test_gencfg_XXXXXX", cmd[1024], ovr[600];
    if (!mkdtemp(dir)) {
        CHECK_MSG(0, "mkdtemp");
        return;
    }
    for (int greedy = 0; greedy < 2; greedy++) {
        snprintf(cmd, sizeof cmd,
                 "cp %s/model/* %s/ && printf '{\"do_sample\": %s, \"temperature\": 0.6, "
                 "\"top_p\": 0.9, \"top_k\": 20, \"eos_token_id\": [1, 2]}' > "
                 "%s/generation_config.json",
                 RECIPES, dir, greedy ? "false" : "true", dir);
        CHECK_INT(system(cmd), 0);
        snprintf(ovr, sizeof ovr, "model.path=%s", dir);
        const char *o[] = {ovr};
        rl_recipe_t *r = NULL;
        int rc =
            rl_recipe_load_file(rl_algos(), RECIPES "/good/grpo.yaml", o, 1, 0, &r, s_err, ERRLEN);
        CHECK_MSG(rc == 0, "%s", s_err);
        if (r) {
            CHECK_CLOSE(r->sampling.temperature, 1.0, 0); // the recipe's own
            CHECK_CLOSE(r->sampling.top_p, greedy ? 1.0 : 0.9, 1e-12);
            CHECK_INT(r->sampling.top_k, greedy ? 0 : 20);
            if (greedy) {
                CHECK_STR(rl_recipe_note(r), "");
            } else {
                CHECK_CONTAINS(rl_recipe_note(r), "sampling: top_p 0.9 top_k 20 from ");
                CHECK_CONTAINS(rl_recipe_note(r), "generation_config.json");
            }
            rl_recipe_destroy(&r);
        }
    }
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    CHECK_INT(system(cmd), 0);
}

// env.http: the server's URL, its attempts, no format; printed and loaded back the same; exactly
// one of builtin, command, plugin and http; workers only for a command or plugin
static void test_env_http(void) {
    const char *o[] = {"env.http={url: http://127.0.0.1:8123/env, retries: 5}"};
    rl_recipe_t *r = NULL, *r2 = NULL;
    char *y1 = NULL, *y2 = NULL;
    int rc = rl_recipe_load_file(rl_algos(), RECIPES "/good/grpo.yaml", o, 1, 0, &r, s_err, ERRLEN);
    CHECK_MSG(rc == 0, "%s", s_err);
    if (rc == 0) {
        CHECK_STR(r->env.http.url, "http://127.0.0.1:8123/env");
        CHECK_INT(r->env.http.retries, 5);
        CHECK_CLOSE(r->env.http.timeout, 30.0, 0);
        CHECK(r->env.builtin < 0 && r->env.command.n == 0 && rl_recipe_has_env(r));
        CHECK_INT(rl_recipe_to_yaml(r, &y1), 0);
        CHECK_CONTAINS(y1, "  http: {url: \"http://127.0.0.1:8123/env\", timeout: 3.0e+01, "
                           "retries: 5}\n");
        rc = rl_recipe_load_string(rl_algos(), y1, strlen(y1), "/tmp/elsewhere/resolved.yaml", NULL,
                                   0, 0, &r2, s_err, ERRLEN);
        CHECK_MSG(rc == 0, "%s\n%s", s_err, y1);
        if (rc == 0) {
            CHECK_INT(rl_recipe_to_yaml(r2, &y2), 0);
            CHECK_STR(y1, y2);
        }
    }
    rl_recipe_destroy(&r);
    rl_recipe_destroy(&r2);
    free(y1);
    free(y2);
    static const struct {
        const char *ovr[2], *want;
    } bad[] = {
        {{"env.http={url: http://h:1/e, format: rlctl}", NULL},
         "env.http.format: an environment takes no format"},
        {{"env.http={url: http://h:1/e, formt: 1}", NULL},
         "env.http.formt: unknown key; http takes url, timeout, retries"},
        {{"env.http={url: https://h/e}", NULL},
         "https is not supported: rlctl's environment client speaks plain http"},
        {{"env.http={timeout: 3}", NULL}, "env.http: needs url: http://HOST:PORT/PATH"},
        {{"env.http={url: http://h:1/e}", "env.builtin=calc"},
         "env.http: set together with env.builtin; an env is one of builtin, command, plugin and http"},
        {{"env.http={url: http://h:1/e}", "env.command=[python3, x.py]"},
         "env.http: set together with env.command"},
        {{"env.http={url: http://h:1/e}", "env.workers=2"},
         "env.workers: 2: a server takes each request whole"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int n = bad[i].ovr[1] ? 2 : 1;
        rc = rl_recipe_load_file(rl_algos(), RECIPES "/good/grpo.yaml", bad[i].ovr, n, 0, &r, s_err,
                                 ERRLEN);
        CHECK_MSG(rc == RL_EINVAL, "%s was accepted", bad[i].ovr[0]);
        CHECK_CONTAINS(s_err, bad[i].want);
        rl_recipe_destroy(&r);
    }
}

static void test_enum_names(void) {
    CHECK_STR(rl_recipe_enum_name(rl_algos(), "optim.scheduler", RL_RECIPE_SCHED_COSINE), "cosine");
    CHECK_STR(rl_recipe_enum_name(rl_algos(), "algorithm.name", 1), "sft");
    CHECK_STR(rl_recipe_enum_name(rl_algos(), "model.dtype", RL_RECIPE_DTYPE_BFLOAT16), "bfloat16");
    CHECK_STR(rl_recipe_enum_name(rl_algos(), "model.chat_template", RL_RECIPE_CHAT_LLAMA3),
              "llama3");
    CHECK_STR(rl_recipe_enum_name(rl_algos(), "data.format", RL_RECIPE_FORMAT_PROMPT_COMPLETION),
              "prompt_completion");
    CHECK_STR(rl_recipe_enum_name(rl_algos(), "data.truncation", RL_RECIPE_TRUNC_ERROR), "error");
    CHECK_STR(rl_recipe_enum_name(rl_algos(), "algorithm.scale_rewards", RL_RECIPE_SCALE_NONE),
              "none");
    CHECK_STR(rl_recipe_enum_name(rl_algos(), "algorithm.advantage", RL_RECIPE_ADV_RLOO), "rloo");
    CHECK_STR(rl_recipe_enum_name(rl_algos(), "algorithm.kl_estimator", RL_RECIPE_KL_K2), "k2");
    CHECK_STR(rl_recipe_enum_name(rl_algos(), "algorithm.loss_agg",
                                  RL_RECIPE_AGG_SEQ_MEAN_TOKEN_SUM_NORM),
              "seq_mean_token_sum_norm");
    CHECK_STR(rl_recipe_enum_name(rl_algos(), "algorithm.tis", RL_RECIPE_TIS_SEQUENCE), "sequence");
    CHECK_STR(rl_recipe_enum_name(rl_algos(), "optim.name", RL_RECIPE_OPTIM_ADAMW), "adamw");
    CHECK_STR(rl_recipe_enum_name(rl_algos(), "rewards.builtin", RL_RECIPE_REWARD_LENGTH),
              "length");
    CHECK_STR(rl_recipe_enum_name(rl_algos(), "rewards[1].builtin", RL_RECIPE_REWARD_REGEX_FORMAT),
              "regex_format");
    CHECK(rl_recipe_enum_name(rl_algos(), "optim.lr", 0) == NULL);
    CHECK(rl_recipe_enum_name(rl_algos(), "optim.scheduler", 9) == NULL);
    CHECK(rl_recipe_enum_name(rl_algos(), "rewards.builtin", RL_RECIPE_REWARD_PLUGIN) == NULL);
}

// every schema row: a sane table, and the all-defaults recipe loads (checked in test_defaults)
static void test_schema(void) {
    const rl_recipe_algos_t *algos = rl_algos();
    rl_recipe_keys_t it, it2;
    rl_recipe_keys_begin(&it, algos, NULL);
    int n = 0;
    for (const rl_recipe_key_t *k; (k = rl_recipe_keys_next(&it)) != NULL; n++) {
        int req = (k->flags & RL_RECIPE_K_REQUIRED) != 0;
        int opt = (k->flags & RL_RECIPE_K_OPTIONAL) != 0;
        int der = (k->flags & RL_RECIPE_K_DERIVED) != 0;
        CHECK_MSG((k->def != NULL) + req + opt + der == 1,
                  "%s.%s: exactly one of default, required, optional, derived", k->section,
                  k->key);
        CHECK_MSG(k->def_doc && k->doc && k->doc[0], "%s.%s: undocumented", k->section, k->key);
        CHECK_MSG(k->type != RL_RECIPE_T_ENUM || rl_recipe_key_choices(algos, k)[0], "%s.%s",
                  k->section, k->key);
        if (k->def) {
            CHECK_MSG(!strcmp(k->def, k->def_doc), "%s.%s: docs default '%s' vs '%s'",
                      k->section, k->key, k->def_doc, k->def);
        }
        // a key means one thing: one row of that name among the shared rows and every
        // algorithm's (an algorithm that shares another's key lists the same row)
        rl_recipe_keys_begin(&it2, algos, NULL);
        for (const rl_recipe_key_t *j; (j = rl_recipe_keys_next(&it2)) != k;) {
            CHECK_MSG(strcmp(k->section, j->section) || strcmp(k->key, j->key), "%s.%s twice",
                      k->section, k->key);
        }
    }
    CHECK(n > 60);
    // each algorithm: named as the catalog lists it, documented, its own rows in section
    // algorithm, and its defaults of keys it has (the loader asserts that each one converts:
    // test_defaults and the suites load them)
    CHECK(algos->n >= 5);
    for (int a = 0; a < algos->n; a++) {
        const rl_recipe_algo_def_t *d = algos->all[a];
        CHECK_STR(algos->names[a], d->name);
        CHECK(rl_algo_find(d->name) && &rl_algo_find(d->name)->recipe == d);
        CHECK_MSG(d->title && d->doc && d->doc[0], "%s: undocumented", d->name);
        for (int f = 0; d->keys && d->keys[f]; f++) {
            for (const rl_recipe_key_t *k = d->keys[f]; k->section; k++) {
                CHECK_MSG(!strcmp(k->section, "algorithm") && !k->uses, "%s: %s.%s", d->name,
                          k->section, k->key);
                // a setting lies inside the algorithm's own struct
                CHECK_MSG(!(k->flags & RL_RECIPE_K_SETTINGS) || k->offset < d->settings_size,
                          "%s: %s.%s outside its settings (%zu bytes)", d->name, k->section, k->key,
                          d->settings_size);
            }
        }
        for (int i = 0; d->defaults && d->defaults[i].key; i++) {
            const rl_recipe_key_t *k = rl_recipe_key_find(algos, d->defaults[i].key);
            CHECK_MSG(k && rl_recipe_key_for(k, d) && k->def,
                      "%s: a default of %s, which it has not", d->name, d->defaults[i].key);
        }
    }
    CHECK(algos->names[algos->n] == NULL);
}

// The LoRA module names and the built-in reward names exist once (rl_config.h): the recipe's
// choices are those lists, in PEFT order and in RL_RECIPE_REWARD_* order.
static void test_name_lists(void) {
    static const char *const peft[] = {"q_proj",    "k_proj",  "v_proj",   "o_proj",
                                       "gate_proj", "up_proj", "down_proj"};
    const rl_recipe_key_t *tm = rl_recipe_key_find(rl_algos(), "lora.target_modules");
    const rl_recipe_key_t *builtin = rl_recipe_key_find(rl_algos(), "rewards.builtin");
    CHECK(tm && builtin);
    if (!tm || !builtin) {
        return;
    }
    CHECK_INT(RL_RECIPE_LORA_NMOD, 7);
    for (int m = 0; m < RL_RECIPE_LORA_NMOD; m++) {
        CHECK_STR(rl_recipe_lora_module_name(m), peft[m]);
        CHECK(tm->choices[m] == rl_recipe_lora_module_name(m)); // the same string, not a copy
    }
    CHECK_STR(tm->choices[RL_RECIPE_LORA_NMOD], RL_RECIPE_LORA_ALL_LINEAR);
    CHECK(tm->choices[RL_RECIPE_LORA_NMOD + 1] == NULL);
    CHECK(rl_recipe_lora_module_name(-1) == NULL);
    CHECK(rl_recipe_lora_module_name(RL_RECIPE_LORA_NMOD) == NULL);
    CHECK_STR(rl_recipe_reward_builtin_name(RL_RECIPE_REWARD_MATH_ANSWER), "math_answer");
    CHECK_STR(rl_recipe_reward_builtin_name(RL_RECIPE_REWARD_REGEX_FORMAT), "regex_format");
    CHECK_STR(rl_recipe_reward_builtin_name(RL_RECIPE_REWARD_LENGTH), "length");
    for (int b = 0; b < RL_RECIPE_REWARD_NBUILTIN; b++) {
        CHECK(builtin->choices[b] == rl_recipe_reward_builtin_name(b));
    }
    CHECK(builtin->choices[RL_RECIPE_REWARD_NBUILTIN] == NULL);
    CHECK(rl_recipe_reward_builtin_name(RL_RECIPE_REWARD_PLUGIN) == NULL);
    CHECK(rl_recipe_reward_builtin_name(RL_RECIPE_REWARD_NBUILTIN) == NULL);
    // algorithm.name's values are the catalog's algorithms, in its order
    const rl_recipe_algos_t *algos = rl_algos();
    for (int a = 0; a < algos->n; a++) {
        CHECK_STR(rl_recipe_enum_name(algos, "algorithm.name", a), algos->all[a]->name);
    }
    CHECK(rl_recipe_enum_name(algos, "algorithm.name", algos->n) == NULL);
    CHECK(rl_recipe_enum_name(NULL, "algorithm.name", 0) == NULL); // no catalog: no names
}

// An algorithm is one definition (rl_recipe_algo_def_t): a catalog with a test's own algorithm
// "toy" beside the real ones loads toy recipes with toy's own key, its defaults of shared keys
// (a map section's, a list entry's one by one; keys the recipe or an override set keep theirs)
// and its check, and refuses toy's key in another algorithm's recipe and another's key in
// toy's. Then the real catalog's per-algorithm defaults (algorithm.beta: GRPO 0.0, PPO 0.05,
// DPO 0.1; every other key one default) as the docs and --keys show them.
typedef struct {
    int pad;         // (the knob is not at offset 0)
    double toy_knob; // toy's own setting
} s_toy_settings_t;

static int s_toy_checked;
static void s_toy_check(rl_recipe_check_t *c, const rl_recipe_t *r) {
    s_toy_checked++;
    const s_toy_settings_t *set = r->algorithm.settings;
    if (set->toy_knob > 5) {
        rl_recipe_check_err(c, "algorithm.toy_knob", "%g: toy wants at most 5", set->toy_knob);
    }
    rl_recipe_check_step(c, r->train.batch_size, "toy's step");
}

static void test_algorithm_unit(void) {
    // clang-format off (packed rows, as core/rl_config_schema.c)
    static const rl_recipe_key_t toy_keys[] = {
        {.section = "algorithm",
         .key = "toy_knob",
         .type = RL_RECIPE_T_FLOAT,
         .offset = RL_RECIPE_IN(s_toy_settings_t, toy_knob),
         .flags = RL_RECIPE_K_SETTINGS,
         RL_RECIPE_DEF("1.5"),
         .max = 10,
         .doc = "a test's own key"},
        {0},
    };
    // clang-format on
    static const rl_recipe_key_t *const toy_frags[] = {toy_keys, rl_loss_beta_keys, NULL};
    static const rl_recipe_default_t toy_defaults[] = {{"algorithm.beta", "0.25"},
                                                       {"optim.scheduler", "linear"},
                                                       {"rewards.weight", "2.0"},
                                                       {NULL, NULL}};
    const rl_recipe_algo_def_t toy = {.name = "toy",
                                      .title = "toy",
                                      .doc = "a test's algorithm",
                                      .uses = RL_RECIPE_USES_SEQUENCES,
                                      .keys = toy_frags,
                                      .defaults = toy_defaults,
                                      .check = s_toy_check,
                                      .settings_size = sizeof(s_toy_settings_t)};
    const rl_recipe_algos_t *real = rl_algos();
    const rl_recipe_algo_def_t *defs[16];
    const char *names[17];
    int n = 0;
    for (; n < real->n && n < 15; n++) {
        defs[n] = real->all[n];
        names[n] = real->names[n];
    }
    defs[n] = &toy;
    names[n++] = "toy";
    names[n] = NULL;
    const rl_recipe_algos_t cat = {defs, n, names};
    const char *base =
        "model: {path: ../model}\ndata: {train: ../data/train.jsonl}\n"
        "optim: {scheduler: cosine, lr: 1e-3}\ntrain: {steps: 3}\n"
        "rewards:\n  - {builtin: length, name: a}\n  - {builtin: length, name: b, weight: 0.5}\n"
        "  - {builtin: length, name: c}\n";
    char text[1024], path[512];
    snprintf(path, sizeof path, "%s/good/toy.yaml", RECIPES);
    rl_recipe_t *r = NULL;
    // toy's recipe: its key, its defaults, its check
    snprintf(text, sizeof text, "%salgorithm: {name: toy}\n", base);
    const char *ovr[] = {"rewards.2.weight="};
    s_toy_checked = 0;
    int rc = rl_recipe_load_string(&cat, text, strlen(text), path, ovr, 1, RL_RECIPE_NO_FILE_CHECKS,
                                   &r, s_err, ERRLEN);
    CHECK_MSG(rc == 0, "%s", s_err);
    CHECK_INT(s_toy_checked, 1);
    if (r) {
        CHECK(r->algorithm.def == &toy);
        CHECK_CLOSE(((const s_toy_settings_t *)r->algorithm.settings)->toy_knob, 1.5, 0);
        CHECK_CLOSE(s_num(r, "algorithm.toy_knob"), 1.5, 0);   // its default, in its struct
        CHECK_CLOSE(r->algorithm.beta, 0.25, 0);               // toy's default of a shared key
        CHECK_INT(r->optim.scheduler, RL_RECIPE_SCHED_COSINE); // set in the recipe: kept
        CHECK_INT(r->n_rewards, 3);
        if (r->n_rewards == 3) {
            CHECK_CLOSE(r->rewards[0].weight, 2.0, 0); // not written
            CHECK_CLOSE(r->rewards[1].weight, 0.5, 0); // weight: 0.5
            CHECK_CLOSE(r->rewards[2].weight, 2.0, 0); // written null = the default
        }
        char *yaml = NULL;
        CHECK_INT(rl_recipe_to_yaml(r, &yaml), 0);
        CHECK_CONTAINS(yaml ? yaml : "",
                       "algorithm:\n  name: toy\n  toy_knob: 1.5\n  beta: 0.25\n");
        CHECK(yaml && !strstr(yaml, "num_generations"));
        free(yaml);
        rl_recipe_destroy(&r);
    }
    // its key set, and checked by its own check
    snprintf(text, sizeof text, "%salgorithm: {name: toy, toy_knob: 7}\n", base);
    rc = rl_recipe_load_string(&cat, text, strlen(text), path, NULL, 0, RL_RECIPE_NO_FILE_CHECKS,
                               &r, s_err, ERRLEN);
    CHECK_INT(rc, RL_EINVAL);
    CHECK_CONTAINS(s_err, "toy.yaml:9:24: algorithm.toy_knob: 7: toy wants at most 5");
    // toy's key in a GRPO recipe, GRPO's key in toy's
    snprintf(text, sizeof text, "%salgorithm: {name: grpo, toy_knob: 1}\n", base);
    rc = rl_recipe_load_string(&cat, text, strlen(text), path, NULL, 0, RL_RECIPE_NO_FILE_CHECKS,
                               &r, s_err, ERRLEN);
    CHECK_INT(rc, RL_EINVAL);
    CHECK_CONTAINS(s_err, "algorithm.toy_knob: applies only when algorithm.name is toy "
                          "(this recipe: grpo)");
    snprintf(text, sizeof text, "%salgorithm: {name: toy, num_generations: 4}\n", base);
    rc = rl_recipe_load_string(&cat, text, strlen(text), path, NULL, 0, RL_RECIPE_NO_FILE_CHECKS,
                               &r, s_err, ERRLEN);
    CHECK_INT(rc, RL_EINVAL);
    CHECK_CONTAINS(s_err, "algorithm.num_generations: applies only when algorithm.name is grpo "
                          "(this recipe: toy)");
    // the catalog without toy does not know it
    rc = rl_recipe_load_string(rl_algos(), text, strlen(text), path, NULL, 0,
                               RL_RECIPE_NO_FILE_CHECKS, &r, s_err, ERRLEN);
    CHECK_INT(rc, RL_EINVAL);
    CHECK_CONTAINS(s_err, "algorithm.name: 'toy'");
    // docs: each algorithm's default when they differ, in catalog order
    char doc[256], small[8];
    const rl_recipe_key_t *beta = rl_recipe_key_find(&cat, "algorithm.beta");
    CHECK(beta != NULL);
    if (beta) {
        CHECK_STR(rl_recipe_key_default_doc(&cat, beta, doc, sizeof doc),
                  "0.0 (grpo), 0.05 (ppo), 0.1 (dpo), 0.25 (toy)");
        CHECK_STR(rl_recipe_key_default_doc(&cat, beta, small, sizeof small), "0.0 (gr");
        CHECK_STR(rl_recipe_key_default_doc(real, beta, doc, sizeof doc),
                  "0.0 (grpo), 0.05 (ppo), 0.1 (dpo)");
        CHECK_STR(rl_recipe_key_default(beta, &rl_algo_grpo.recipe), "0.0");
        CHECK_STR(rl_recipe_key_default(beta, &rl_algo_ppo.recipe), "0.05");
        CHECK_STR(rl_recipe_key_default(beta, &rl_algo_dpo.recipe), "0.1");
        CHECK_STR(rl_recipe_key_default(beta, NULL), "0.0"); // algorithm unknown: def
    }
    // the real catalog: every key but algorithm.beta shows its one default
    rl_recipe_keys_t it;
    rl_recipe_keys_begin(&it, real, NULL);
    for (const rl_recipe_key_t *k; (k = rl_recipe_keys_next(&it)) != NULL;) {
        if (k == beta) {
            continue;
        }
        CHECK_STR(rl_recipe_key_default_doc(real, k, doc, sizeof doc), k->def_doc);
        for (int a = 0; a < real->n; a++) {
            CHECK(rl_recipe_key_default(k, real->all[a]) == k->def);
        }
    }
}

// A PPO recipe: PPO's own defaults (beta 0.05 where GRPO's is 0, gamma, lam, value_clip, epochs,
// kl_horizon), the critic's derived defaults (optim.lr, lora.enabled), critic.init resolved
// against the recipe (`base` stays a word), and PPO's own errors.
static void test_ppo(void) {
    rl_recipe_t *r = NULL;
    int rc =
        rl_recipe_load_file(rl_algos(), RECIPES "/good/ppo.yaml", NULL, 0, 0, &r, s_err, ERRLEN);
    CHECK_MSG(rc == 0, "%s", s_err);
    if (r) {
        CHECK_STR(r->algorithm.def->name, "ppo");
        CHECK_CLOSE(r->algorithm.beta, 0.05, 0);
        CHECK_CLOSE(s_num(r, "algorithm.gamma"), 1.0, 0);
        CHECK_CLOSE(s_num(r, "algorithm.lam"), 0.95, 0);
        CHECK_CLOSE(r->algorithm.value_clip, 0.2, 0);
        CHECK_CLOSE(s_num(r, "algorithm.epochs"), 4, 0);
        CHECK_CLOSE(s_num(r, "algorithm.mini_batches"), 2, 0);
        CHECK_CLOSE(s_num(r, "algorithm.kl_target"), 6, 0);
        CHECK_CLOSE(s_num(r, "algorithm.kl_horizon"), 10000, 0);
        CHECK_CLOSE(r->critic.lr, 2e-4, 0);
        CHECK(r->critic.lora);
        CHECK_INT(r->critic.warmup_steps, 3);
        CHECK_INT(r->roles.critic, RL_RECIPE_REF_WORKER);
        CHECK_INT(r->train.micro_batch_size, 2);
        CHECK(r->critic.init && r->critic.init[0] == '/' &&
              strstr(r->critic.init, "fixtures/recipes/model") != NULL);
        rl_recipe_destroy(&r);
    }
    const char *ovr[] = {"critic.init=base", "critic.lr=1e-5", "critic.lora=false",
                         "algorithm.beta=0.1"};
    rc = rl_recipe_load_file(rl_algos(), RECIPES "/good/ppo.yaml", ovr, 4, 0, &r, s_err, ERRLEN);
    CHECK_MSG(rc == 0, "%s", s_err);
    if (r) {
        CHECK_STR(r->critic.init, "base");
        CHECK_CLOSE(r->critic.lr, 1e-5, 0);
        CHECK(!r->critic.lora);
        CHECK_CLOSE(r->algorithm.beta, 0.1, 0);
        rl_recipe_destroy(&r);
    }
    const struct {
        const char *ovr, *want;
    } bad[] = {
        {"algorithm.mini_batches=3", "algorithm.mini_batches: 3 does not divide "
                                     "train.batch_size (8)"},
        {"train.micro_batch_size=3", "train.micro_batch_size: 3 does not divide the 4 sequences "
                                     "of a mini-batch"},
        {"algorithm.num_generations=4", "algorithm.num_generations: applies only when "
                                        "algorithm.name is grpo (this recipe: ppo)"},
        {"critic.init=/nonexistent/rm", "critic.init: directory '/nonexistent/rm' does not "
                                        "exist"},
        {"algorithm.value_clip=-1", "algorithm.value_clip"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        rc = rl_recipe_load_file(rl_algos(), RECIPES "/good/ppo.yaml", &bad[i].ovr, 1, 0, &r, s_err,
                                 ERRLEN);
        CHECK_MSG(rc == RL_EINVAL, "%s: rc %d", bad[i].ovr, rc);
        CHECK_MSG(strstr(s_err, bad[i].want) != NULL, "%s: expected\n  %s\nin\n%s", bad[i].ovr,
                  bad[i].want, s_err);
        rl_recipe_destroy(&r);
    }
    // the critic's keys only with PPO
    const char *g[] = {"critic.lr=1e-5"};
    rc = rl_recipe_load_file(rl_algos(), RECIPES "/good/grpo.yaml", g, 1, 0, &r, s_err, ERRLEN);
    CHECK_MSG(rc == RL_EINVAL && strstr(s_err, "critic.lr: applies only when algorithm.name is "
                                               "ppo (this recipe: grpo)"),
              "%s", s_err);
    rl_recipe_destroy(&r);
}

// A DPO recipe: beta 0.1 by default, the preference keys, a step of 2 x batch_size sequences,
// and DPO's own errors; a reward model's recipe likewise.
static void test_dpo(void) {
    rl_recipe_t *r = NULL;
    int rc =
        rl_recipe_load_file(rl_algos(), RECIPES "/good/dpo.yaml", NULL, 0, 0, &r, s_err, ERRLEN);
    CHECK_MSG(rc == 0, "%s", s_err);
    if (r) {
        CHECK_STR(r->algorithm.def->name, "dpo");
        CHECK_CLOSE(r->algorithm.beta, 0.1, 0);
        CHECK_INT(r->algorithm.loss_type, RL_RECIPE_PREF_IPO);
        CHECK_CLOSE(r->algorithm.rpo_alpha, 0.5, 0);
        CHECK_CLOSE(r->algorithm.label_smoothing, 0.0, 0);
        CHECK_INT(r->data.format, RL_RECIPE_FORMAT_PREFERENCE);
        CHECK_STR(r->data.chosen_field, "good");
        CHECK_STR(r->data.rejected_field, "rejected");
        CHECK(r->data.ref_cache == NULL);
        CHECK_INT(r->train.micro_batch_size, 8); // the whole step: 4 pairs
        rl_recipe_destroy(&r);
    }
    const struct {
        const char *ovr, *want;
    } bad[] = {
        {"train.micro_batch_size=3", "train.micro_batch_size: 3 does not divide the 8 sequences"},
        {"algorithm.beta=0", "algorithm.beta: 0: DPO needs beta > 0"},
        {"data.format=text", "data.format: text rows hold no pairs"},
        {"algorithm.label_smoothing=0.5", "algorithm.label_smoothing"},
        {"algorithm.num_generations=4", "applies only when algorithm.name is grpo (this recipe: "
                                        "dpo)"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        rc = rl_recipe_load_file(rl_algos(), RECIPES "/good/dpo.yaml", &bad[i].ovr, 1, 0, &r, s_err,
                                 ERRLEN);
        CHECK_MSG(rc == RL_EINVAL, "%s: rc %d", bad[i].ovr, rc);
        CHECK_MSG(strstr(s_err, bad[i].want) != NULL, "%s: expected\n  %s\nin\n%s", bad[i].ovr,
                  bad[i].want, s_err);
        rl_recipe_destroy(&r);
    }
    // a reward model: the pair keys, its own key, and what it refuses
    rc = rl_recipe_load_file(rl_algos(), RECIPES "/good/rm.yaml", NULL, 0, 0, &r, s_err, ERRLEN);
    CHECK_MSG(rc == 0, "%s", s_err);
    if (r) {
        CHECK_STR(r->algorithm.def->name, "rm");
        CHECK_STR(r->data.margin_field, "gap");
        CHECK_CLOSE(r->algorithm.center_rewards_coefficient, 0.01, 0);
        CHECK_INT(r->train.micro_batch_size, 8);
        rl_recipe_destroy(&r);
    }
    const struct {
        const char *ovr, *want;
    } bad_rm[] = {
        {"train.micro_batch_size=3", "train.micro_batch_size: 3 does not divide the 8 sequences"},
        {"data.format=messages", "messages rows hold no pairs; a reward model takes auto or"},
        {"algorithm.beta=0.1", "applies only when algorithm.name is grpo or ppo or dpo (this "
                               "recipe: rm)"},
        {"data.eval=../data/train.jsonl", "data.eval: a reward model samples nothing; hold pairs "
                                          "out with data.eval_pairs"},
        {"data.ref_cache=/tmp", "applies only when algorithm.name is dpo (this recipe: rm)"},
    };
    for (size_t i = 0; i < sizeof bad_rm / sizeof bad_rm[0]; i++) {
        rc = rl_recipe_load_file(rl_algos(), RECIPES "/good/rm.yaml", &bad_rm[i].ovr, 1, 0, &r,
                                 s_err, ERRLEN);
        CHECK_MSG(rc == RL_EINVAL, "%s: rc %d", bad_rm[i].ovr, rc);
        CHECK_MSG(strstr(s_err, bad_rm[i].want) != NULL, "%s: expected\n  %s\nin\n%s",
                  bad_rm[i].ovr, bad_rm[i].want, s_err);
        rl_recipe_destroy(&r);
    }
    // SFT refuses preference rows
    const char *sft[] = {"data.format=preference"};
    rc = rl_recipe_load_file(rl_algos(), RECIPES "/good/sft.yaml", sft, 1, 0, &r, s_err, ERRLEN);
    CHECK_MSG(rc == RL_EINVAL && strstr(s_err, "preference rows are data for DPO, not SFT"), "%s",
              s_err);
    rl_recipe_destroy(&r);
}

// docs/recipe.md documents every key with its default: the docs cannot drift from the table
static void test_docs_cover_schema(void) {
    char *doc = rl_test_read_file(RL_SOURCE_DIR "/docs/recipe.md", NULL);
    CHECK_MSG(doc != NULL, "docs/recipe.md is missing");
    if (!doc) {
        return;
    }
    rl_recipe_keys_t it;
    rl_recipe_keys_begin(&it, rl_algos(), NULL);
    for (const rl_recipe_key_t *k; (k = rl_recipe_keys_next(&it)) != NULL;) {
        char name[128], row[160], def[300];
        int list = !strcmp(k->section, "rewards");
        snprintf(name, sizeof name, "`%s%s.%s`", k->section, list ? "[]" : "", k->key);
        snprintf(row, sizeof row, "| %s |", name);
        const char *at = strstr(doc, row);
        CHECK_MSG(at != NULL, "docs/recipe.md has no table row for %s", name);
        if (!at) {
            continue;
        }
        const char *eol = strchr(at, '\n');
        size_t len = eol ? (size_t)(eol - at) : strlen(at);
        char line[1024];
        snprintf(line, sizeof line, "%.*s", (int)(len < 1000 ? len : 1000), at);
        char shown[256]; // def_doc, or each algorithm's default when they differ
        rl_recipe_key_default_doc(rl_algos(), k, shown, sizeof shown);
        snprintf(def, sizeof def, "| `%s` |", shown);
        CHECK_MSG(strstr(line, def) != NULL, "docs/recipe.md: %s: default should read %s",
                  name, def);
        CHECK_MSG(strstr(line, rl_recipe_type_name(k->type)) != NULL,
                  "docs/recipe.md: %s: type should read %s", name, rl_recipe_type_name(k->type));
    }
    free(doc);
}

static void test_errors_inline(void) {
    rl_recipe_t *r = NULL;
    // the example of the issue: the key's position, the dotted key, what was found
    const char *t = "model:\n  path: ../model\ndata:\n  train: ../data/train.jsonl\n"
                    "algorithm: {name: sft}\ntrain: {steps: 1}\noptim:\n  lr: fast\n";
    CHECK_INT(s_load_str("bad.yaml", t, NULL, 0, &r), RL_EINVAL);
    CHECK_CONTAINS(s_err, "bad.yaml:8:3: optim.lr: expected a number, found string 'fast'");
    CHECK(r == NULL);
    // every error is reported, each on its own line, in file order
    t = "model: {path: ../model}\ndata: {train: ../data/train.jsonl}\n"
        "algorithm: {name: sft}\ntrain: {steps: 0}\noptim: {lr: -1, sheduler: cosine}\n";
    CHECK_INT(s_load_str("many.yaml", t, NULL, 0, &r), RL_EINVAL);
    CHECK_CONTAINS(s_err, "many.yaml:4:9: train.steps: 0 is out of range; allowed: an "
                          "integer >= 1\n");
    CHECK_CONTAINS(s_err, "many.yaml:5:9: optim.lr: -1 is out of range; allowed: a number in "
                          "(0, 1]\n");
    CHECK_CONTAINS(s_err, "many.yaml:5:17: optim.sheduler: unknown key; did you mean "
                          "'scheduler'?");
    // the default tokenizer is checked and reported at model.path
    t = "model: {path: ../data}\n";
    CHECK_INT(s_load_str("tok.yaml", t, NULL, 0, &r), RL_EINVAL);
    CHECK_CONTAINS(s_err, "tok.yaml:1:9: model.path: model.tokenizer: file '");
    CHECK_CONTAINS(s_err, "/data/tokenizer.json' does not exist (the default; set it to "
                          "override)");
    // fuzz-style garbage never crashes and always names the file
    const char *junk[] = {"\x01\x02", "[", "{a: 1, a: 2}", "- - - -", "a: &x 1\nb: *x\n",
                          "? [a]\n: b\n", "\"\\xff\": 1\n", "rewards: [[], {}, 3, ~]\n"};
    for (size_t i = 0; i < sizeof junk / sizeof *junk; i++) {
        CHECK_INT(s_load_str("junk.yaml", junk[i], NULL, 0, &r), RL_EINVAL);
        CHECK_CONTAINS(s_err, "junk.yaml");
    }
    // too many errors are capped
    char big[40000] = "";
    for (int i = 0; i < 300; i++) {
        snprintf(big + strlen(big), sizeof big - strlen(big), "s%d: 1\n", i);
    }
    CHECK_INT(s_load_str("big.yaml", big, NULL, 0, &r), RL_EINVAL);
    CHECK_CONTAINS(s_err, "more errors");
}

static void test_overrides(void) {
    rl_recipe_t *r = NULL;
    const char *good[] = {"optim.lr=1e-4",
                          "lora.target_modules=[q_proj,v_proj]",
                          "rewards.1.weight=2",
                          "rewards[0].config.x=[1, {y: z}]",
                          "run.seed=3",
                          "data.eval=",
                          "train.eval_every=0",
                          "sampling={temperature: 0.7}"};
    int rc =
        rl_recipe_load_file(rl_algos(), RECIPES "/good/grpo.yaml", good, 8, 0, &r, s_err, ERRLEN);
    CHECK_MSG(rc == 0, "%s", s_err);
    if (r) {
        CHECK_CLOSE(r->optim.lr, 1e-4, 0);
        CHECK_INT(r->lora.target_modules.n, 2);
        CHECK_STR(r->lora.target_modules.items[1], "v_proj");
        CHECK_CLOSE(r->rewards[1].weight, 2.0, 0);
        CHECK_STR(r->rewards[0].config_json, "{\"x\": [1, {\"y\": \"z\"}]}");
        CHECK_INT(r->run.seed, 3);
        CHECK(r->data.eval.n == 0);
        CHECK_CLOSE(r->sampling.temperature, 0.7, 0);
        CHECK_INT(r->sampling.stop.n, 0); // the whole section was replaced
        const char *file;
        int line, col;
        CHECK_INT(rl_recipe_key_location(r, "optim.lr", &file, &line, &col), 0);
        CHECK_STR(file, "<override 1>");
        CHECK_INT(line, 1);
        CHECK_INT(col, 1);
        rl_recipe_destroy(&r);
    }
    // an override fills a section the recipe left empty, and relative paths resolve to the cwd
    const char *t = "model: {path: ../model}\ndata: {train: ../data/train.jsonl}\n"
                    "algorithm: {name: sft}\ntrain: {steps: 1}\noptim:\nrun:\n";
    const char *fill[] = {"optim.lr=0.5", "run.dir=out/x"};
    CHECK_INT(s_load_str("fill.yaml", t, fill, 2, &r), 0);
    if (r) {
        CHECK_CLOSE(r->optim.lr, 0.5, 0);
        CHECK(r->run.dir[0] == '/');
        CHECK_CONTAINS(r->run.dir, "/out/x");
        rl_recipe_destroy(&r);
    }
    const char *bad[] = {"optim.lr=fast",        "lora.target_modules=[q_proj,v_proj",
                         "rewards.5.weight=1",   "nokey",
                         "train.stepz=3",        "optim.lr.x=1",
                         "a..b=1",               "sampling.top_p=2"};
    rc = rl_recipe_load_file(rl_algos(), RECIPES "/good/grpo.yaml", bad, 8, 0, &r, s_err, ERRLEN);
    CHECK_INT(rc, RL_EINVAL);
    CHECK_CONTAINS(s_err, "<override 1>:1:1: optim.lr: expected a number, found string 'fast'");
    CHECK_CONTAINS(s_err, "<override 2>:1:35: YAML syntax error: did not find expected ',' or "
                          "']' (while parsing a flow sequence at 1:21)");
    CHECK_CONTAINS(s_err, "<override 3>:1:1: rewards.5.weight: '5' is not an index of this "
                          "list (it has 3 entries)");
    CHECK_CONTAINS(s_err, "<override 4>:1:1: 'nokey': expected key=value");
    CHECK_CONTAINS(s_err, "<override 5>:1:1: train.stepz: unknown key; did you mean 'steps'?");
    CHECK_CONTAINS(s_err, "<override 6>:1:1: optim.lr.x: cannot set a key inside a value that "
                          "is not a map");
    CHECK_CONTAINS(s_err, "<override 7>:1:1: a..b: malformed key");
    CHECK_CONTAINS(s_err, "<override 8>:1:1: sampling.top_p: 2 is out of range");
    // names TRL, verl, OpenRLHF users know: which key is ours and how the meanings differ, at
    // the top level, inside a section, in a file as on the command line
    const char *theirs[] = {"learning_rate=1e-5", "train.per_device_train_batch_size=8",
                            "kl_loss_coef=0.001", "algorithm.entropy_coeff=0.01",
                            "max_completion_length=64"};
    rc =
        rl_recipe_load_file(rl_algos(), RECIPES "/good/grpo.yaml", theirs, 5, 0, &r, s_err, ERRLEN);
    CHECK_INT(rc, RL_EINVAL);
    CHECK_CONTAINS(s_err, "<override 1>:1:1: learning_rate: unknown key; 'learning_rate' is "
                          "transformers/TRL's name; rlctl's is optim.lr (the same peak learning "
                          "rate; its schedule is optim.scheduler)");
    CHECK_CONTAINS(s_err, "<override 2>:1:1: train.per_device_train_batch_size: unknown key; "
                          "'per_device_train_batch_size' is transformers/TRL's name; rlctl's is "
                          "train.batch_size (rlctl's is the whole batch of one optimizer step");
    CHECK_CONTAINS(s_err, "kl_loss_coef: unknown key; 'kl_loss_coef' is verl's name; rlctl's is "
                          "algorithm.beta");
    CHECK_CONTAINS(s_err, "algorithm.entropy_coeff: unknown key; 'entropy_coeff' is verl's; "
                          "rlctl has no such key: rlctl has no entropy bonus");
    CHECK_CONTAINS(s_err, "max_completion_length: unknown key; 'max_completion_length' is "
                          "TRL's name; rlctl's is sampling.max_new_tokens");
    // GSPO's and CISPO's names in TRL and verl: answered with algorithm.policy_loss, also where
    // TRL's value sits under a key rlctl has for something else (DPO's loss_type)
    const char *gspo[] = {"algorithm.importance_sampling_level=sequence",
                          "algorithm.loss_mode=gspo", "algorithm.loss_type=cispo"};
    rc = rl_recipe_load_file(rl_algos(), RECIPES "/good/grpo.yaml", gspo, 3, 0, &r, s_err, ERRLEN);
    CHECK_INT(rc, RL_EINVAL);
    CHECK_CONTAINS(s_err, "algorithm.importance_sampling_level: unknown key; "
                          "importance_sampling_level: sequence is TRL's GRPOConfig value; "
                          "rlctl's is algorithm.policy_loss: gspo (the same: GSPO's "
                          "sequence-level ratio)");
    CHECK_CONTAINS(s_err, "algorithm.loss_mode: unknown key; 'loss_mode' is verl's name; rlctl's "
                          "is algorithm.policy_loss (verl's policy_loss.loss_mode: vanilla is "
                          "grpo; gspo and cispo keep their names)");
    CHECK_CONTAINS(s_err, "algorithm.loss_type: not a key of grpo; loss_type: cispo is TRL's "
                          "GRPOConfig value; rlctl's is algorithm.policy_loss: cispo");
    t = "model: {path: ../model}\ndata: {train: ../data/train.jsonl}\n"
        "algorithm: {name: sft}\ntrainer:\n  total_epochs: 3\nnum_train_epochs: 3\n";
    CHECK_INT(s_load_str("trl.yaml", t, NULL, 0, &r), RL_EINVAL);
    CHECK_CONTAINS(s_err, "trl.yaml:4:1: trainer: unknown section; 'trainer' is verl's name; "
                          "rlctl's is train (total_training_steps = train.steps");
    CHECK_CONTAINS(s_err, "trl.yaml:6:1: num_train_epochs: unknown key; 'num_train_epochs' is "
                          "transformers/TRL's name; rlctl's is train.steps (rlctl counts "
                          "optimizer steps, not epochs");
    // overrides come after the recipe's own errors
    const char *one[] = {"optim.lr=x"};
    t = "model: {path: ../model}\ndata: {train: ../data/train.jsonl}\n"
        "algorithm: {name: sft}\ntrain: {steps: -1}\n";
    CHECK_INT(s_load_str("order.yaml", t, one, 1, &r), RL_EINVAL);
    const char *a = strstr(s_err, "order.yaml:4:"), *b = strstr(s_err, "<override 1>");
    CHECK(a && b && a < b);
}

// TRL's names answered with ours and the difference in meaning, naming only keys the recipe's
// algorithm has: TRL's GRPO loss_type is GRPO's loss_agg, while under DPO loss_type is DPO's own
// key (no hint there, and none that points to GRPO's loss_agg).
static void test_foreign_hints(void) {
    rl_recipe_t *r = NULL;
    // one override per load: a key given twice keeps its last value
    static const struct {
        const char *override, *says;
    } grpo[] = {
        {"algorithm.loss_type=grpo",
         "algorithm.loss_type: not a key of grpo; loss_type: grpo is TRL's GRPOConfig "
         "value; rlctl's is algorithm.loss_agg: seq_mean_token_mean (the same: each "
         "completion's token losses averaged, then the completions"},
        {"algorithm.loss_type=bnpo",
         "algorithm.loss_type: not a key of grpo; loss_type: bnpo is TRL's GRPOConfig "
         "value; rlctl's is algorithm.loss_agg: token_mean (TRL's bnpo divides by the "
         "active tokens of each device's micro-batch"},
        {"algorithm.loss_type=dr_grpo",
         "algorithm.loss_type: not a key of grpo; loss_type: dr_grpo is TRL's "
         "GRPOConfig value; rlctl's is algorithm.loss_agg: seq_mean_token_sum_norm (the "
         "same constant divisor, completions x sampling.max_new_tokens; Dr. GRPO also "
         "leaves rewards unscaled, algorithm.scale_rewards: none"},
        {"loss_type=dapo",
         "loss_type: unknown key; loss_type: dapo is TRL's GRPOConfig value; rlctl's is "
         "algorithm.loss_agg: token_mean (the same"},
        {"algorithm.loss_type=sigmoid",
         "algorithm.loss_type: not a key of grpo; 'loss_type' is TRL's name; rlctl's is "
         "algorithm.loss_agg (TRL's GRPO loss_type is how token losses are averaged: "
         "grpo is seq_mean_token_mean, bnpo and dapo are token_mean, dr_grpo is "
         "seq_mean_token_sum_norm"},
        {"algorithm.scale_rewards=true",
         "algorithm.scale_rewards: 'true' is not one of group, batch, none; "
         "scale_rewards: true is TRL's old boolean value; rlctl's is "
         "algorithm.scale_rewards: group (true divided the advantages by their group's "
         "std"},
        {"algorithm.scale_rewards=False",
         "algorithm.scale_rewards: 'False' is not one of group, batch, none; "
         "scale_rewards: False is TRL's old boolean value; rlctl's is "
         "algorithm.scale_rewards: none (false left them unscaled"},
        {"report_to=wandb",
         "report_to: unknown key; 'report_to' is transformers/TRL's; rlctl has no such "
         "key: a run writes its metrics to its folder on its own: metrics.jsonl"},
        {"vllm_gpu_memory_utilization=0.5",
         "vllm_gpu_memory_utilization: unknown key; 'vllm_gpu_memory_utilization' is "
         "TRL's name; rlctl's is roles.samplers (rlctl samples with its own sampler "
         "processes, not vLLM: roles.samplers of them"},
        {"vllm_mode=server",
         "vllm_mode: unknown key; 'vllm_mode' is TRL's name; rlctl's is roles.samplers"},
        {"algorithm.importance_sampling_level=sequence",
         "algorithm.importance_sampling_level: unknown key; importance_sampling_level: "
         "sequence is TRL's GRPOConfig value; rlctl's is algorithm.policy_loss: gspo"},
        {"algorithm.epsilon=0.3",
         "algorithm.epsilon: unknown key; 'epsilon' is TRL's name; rlctl's is "
         "algorithm.epsilon_low (TRL's epsilon is the lower clip bound, and the upper "
         "one too unless epsilon_high is set"},
        {"algorithm.num_ppo_epochs=2",
         "algorithm.num_ppo_epochs: unknown key; 'num_ppo_epochs' is TRL's name for a "
         "setting grpo does not have (algorithm.name ppo: algorithm.epochs)"},
        {"use_vllm=true",
         "use_vllm: unknown key; 'use_vllm' is TRL's name; rlctl's is roles.samplers"},
    };
    for (size_t i = 0; i < sizeof grpo / sizeof grpo[0]; i++) {
        int rc = rl_recipe_load_file(rl_algos(), RECIPES "/good/grpo.yaml", &grpo[i].override, 1, 0,
                                     &r, s_err, ERRLEN);
        CHECK_INT(rc, RL_EINVAL);
        CHECK_CONTAINS(s_err, grpo[i].says);
        // GRPO's hints never name DPO's loss_type
        CHECK(strstr(s_err, "sigmoid, hinge, ipo") == NULL);
        CHECK(strstr(s_err, "did you mean 'algorithm.loss_type'") == NULL);
        CHECK(strstr(s_err, "applies only when algorithm.name is dpo") == NULL);
    }
    // under DPO, loss_type is DPO's own key: its values load, TRL's GRPO values are refused with
    // DPO's choices and no hint towards GRPO's loss_agg; nor does epsilon_high point to GRPO's
    const char *dpo_ok[] = {"algorithm.loss_type=hinge"};
    int rc =
        rl_recipe_load_file(rl_algos(), RECIPES "/good/dpo.yaml", dpo_ok, 1, 0, &r, s_err, ERRLEN);
    CHECK_MSG(rc == 0, "%s", s_err);
    if (rc == 0) {
        CHECK_STR(rl_recipe_enum_name(rl_algos(), "algorithm.loss_type", r->algorithm.loss_type),
                  "hinge");
        rl_recipe_destroy(&r);
    }
    const char *dpo[] = {"algorithm.loss_type=dapo", "epsilon_high=0.28"};
    rc = rl_recipe_load_file(rl_algos(), RECIPES "/good/dpo.yaml", dpo, 2, 0, &r, s_err, ERRLEN);
    CHECK_INT(rc, RL_EINVAL);
    CHECK_CONTAINS(s_err, "<override 1>:1:1: algorithm.loss_type: 'dapo' is not one of sigmoid, "
                          "hinge, ipo");
    CHECK(strstr(s_err, "loss_agg") == NULL);
    CHECK_CONTAINS(s_err, "<override 2>:1:1: epsilon_high: unknown key; 'epsilon_high' is TRL's "
                          "name for a setting dpo does not have (algorithm.name grpo, ppo: "
                          "algorithm.epsilon_high)");
    CHECK(strstr(s_err, "did you mean 'algorithm.epsilon_high'") == NULL);
}

// data.train as users hold it: a list of files and folders read in the order written, a glob
// expanded in byte order of the names (Z before a, whatever the locale), a glob matching nothing
// as an error at its line and column, and the resolved recipe loading back unchanged.
static void test_data_paths(void) {
    char dir[64], p[128], path[128], text[1024], want[320];
    rl_test_tmpdir(dir, sizeof dir, "config_paths");
    const char *files[] = {"b.jsonl", "a.jsonl", "Z.jsonl", "notes.txt"};
    for (int i = 0; i < 4; i++) {
        snprintf(p, sizeof p, "%s/%s", dir, files[i]);
        rl_test_write(p, "{\"prompt\": \"%d\", \"completion\": \"x\"}\n", i);
    }
    snprintf(p, sizeof p, "%s/shard", dir);
    CHECK_INT(mkdir(p, 0700), 0);
    snprintf(p, sizeof p, "%s/shard/c.jsonl", dir);
    rl_test_write(p, "{\"prompt\": \"c\", \"completion\": \"x\"}\n");
    snprintf(path, sizeof path, "%s/r.yaml", dir);
    const char *head = "model: {path: " RECIPES "/model}\nalgorithm: {name: sft}\n"
                       "optim: {lr: 1e-3}\ntrain: {steps: 2}\n";
    rl_recipe_t *r = NULL, *r2 = NULL;

    // a list: in the order written, a folder as a folder
    snprintf(text, sizeof text, "%sdata:\n  train: [b.jsonl, shard, a.jsonl]\n", head);
    int rc =
        rl_recipe_load_string(rl_algos(), text, strlen(text), path, NULL, 0, 0, &r, s_err, ERRLEN);
    CHECK_MSG(rc == 0, "%s", s_err);
    if (rc == 0) {
        CHECK_INT(r->data.train.n, 3);
        const char *order[] = {"b.jsonl", "shard", "a.jsonl"};
        for (int i = 0; i < 3 && i < r->data.train.n; i++) {
            snprintf(want, sizeof want, "%s/%s", dir, order[i]);
            CHECK_STR(r->data.train.items[i], want);
        }
        CHECK_INT(r->data.eval.n, 0);
        rl_recipe_destroy(&r);
    }
    // a glob: the .jsonl files only, by name in byte order; in a list too, and from an override
    // (against the working directory, here given absolute)
    snprintf(text, sizeof text, "%sdata:\n  train: \"*.jsonl\"\n  eval: [shard, \"[ab].jsonl\"]\n",
             head);
    rc = rl_recipe_load_string(rl_algos(), text, strlen(text), path, NULL, 0, 0, &r, s_err, ERRLEN);
    CHECK_MSG(rc == 0, "%s", s_err);
    char *y1 = NULL, *y2 = NULL;
    if (rc == 0) {
        const char *order[] = {"Z.jsonl", "a.jsonl", "b.jsonl"};
        CHECK_INT(r->data.train.n, 3);
        for (int i = 0; i < 3 && i < r->data.train.n; i++) {
            snprintf(want, sizeof want, "%s/%s", dir, order[i]);
            CHECK_STR(r->data.train.items[i], want);
        }
        CHECK_INT(r->data.eval.n, 3);
        if (r->data.eval.n == 3) {
            snprintf(want, sizeof want, "%s/a.jsonl", dir);
            CHECK_STR(r->data.eval.items[1], want);
        }
        // the round trip: the printed recipe lists the files and loads back unchanged
        CHECK_INT(rl_recipe_to_yaml(r, &y1), 0);
        snprintf(want, sizeof want, "train: [%s/Z.jsonl, %s/a.jsonl, %s/b.jsonl]", dir, dir, dir);
        CHECK_CONTAINS(y1, want);
        rc = rl_recipe_load_string(rl_algos(), y1, strlen(y1), "/tmp/elsewhere/resolved.yaml", NULL,
                                   0, 0, &r2, s_err, ERRLEN);
        CHECK_MSG(rc == 0, "%s\n%s", s_err, y1);
        if (rc == 0) {
            CHECK_INT(rl_recipe_to_yaml(r2, &y2), 0);
            CHECK_STR(y1, y2);
        }
        rl_recipe_destroy(&r);
        rl_recipe_destroy(&r2);
    }
    free(y1);
    free(y2);
    // one file prints as a path, as a recipe writes it
    snprintf(text, sizeof text, "%sdata: {train: a.jsonl}\n", head);
    rc = rl_recipe_load_string(rl_algos(), text, strlen(text), path, NULL, 0, 0, &r, s_err, ERRLEN);
    CHECK_MSG(rc == 0, "%s", s_err);
    if (rc == 0) {
        y1 = NULL;
        CHECK_INT(rl_recipe_to_yaml(r, &y1), 0);
        snprintf(want, sizeof want, "train: %s/a.jsonl\n", dir);
        CHECK_CONTAINS(y1, want);
        free(y1);
        rl_recipe_destroy(&r);
    }
    // a glob that matches nothing: an error at the value (or the list item), file:line:column
    snprintf(text, sizeof text, "%sdata:\n  train: part-*.jsonl\n  eval: [a.jsonl, q?.jsonl]\n",
             head);
    rc = rl_recipe_load_string(rl_algos(), text, strlen(text), path, NULL, 0, 0, &r, s_err, ERRLEN);
    CHECK_INT(rc, RL_EINVAL);
    CHECK_CONTAINS(s_err, "r.yaml:6:10: data.train: no file matches 'part-*.jsonl'");
    CHECK_CONTAINS(s_err, "r.yaml:7:19: data.eval[1]: no file matches 'q?.jsonl'");
    // a Hugging Face dataset folder with a training and a held-out split is not read whole
    // (the held-out rows would be trained on); shards of one split are
    const char *hf[] = {"hf/train-00000-of-00002.jsonl",
                        "hf/train-00001-of-00002.jsonl",
                        "hf/test.jsonl",
                        "shards/train-00000-of-00002.jsonl",
                        "shards/train-00001-of-00002.jsonl",
                        "shards/README.md"};
    snprintf(p, sizeof p, "%s/hf", dir);
    CHECK_INT(mkdir(p, 0700), 0);
    snprintf(p, sizeof p, "%s/shards", dir);
    CHECK_INT(mkdir(p, 0700), 0);
    for (int i = 0; i < 6; i++) {
        snprintf(p, sizeof p, "%s/%s", dir, hf[i]);
        rl_test_write(p, "{\"prompt\": \"%d\", \"completion\": \"x\"}\n", i);
    }
    snprintf(text, sizeof text, "%sdata: {train: hf, eval: shards}\n", head);
    rc = rl_recipe_load_string(rl_algos(), text, strlen(text), path, NULL, 0, 0, &r, s_err, ERRLEN);
    CHECK_INT(rc, RL_EINVAL);
    snprintf(want, sizeof want,
             "r.yaml:5:8: data.train: '%s/hf' holds a dataset's splits "
             "(train-00000-of-00002.jsonl, test.jsonl) and a folder is read whole; name the "
             "split's files, e.g. '%s/hf/train*.jsonl'",
             dir, dir);
    CHECK_CONTAINS(s_err, want);
    CHECK(strstr(s_err, "data.eval") == NULL);
    // each path must exist; an empty list is refused
    snprintf(text, sizeof text, "%sdata:\n  train: [a.jsonl, gone.jsonl]\n  eval: []\n", head);
    rc = rl_recipe_load_string(rl_algos(), text, strlen(text), path, NULL, 0, 0, &r, s_err, ERRLEN);
    CHECK_INT(rc, RL_EINVAL);
    CHECK_CONTAINS(s_err, "gone.jsonl' does not exist");
    CHECK_CONTAINS(s_err, "r.yaml:7:3: data.eval: expected a path or a list of paths, found an "
                          "empty list");
    rl_test_tmpdir_done(dir);
}

// Float keys end up in 32-bit floats: values past FLT_MAX (or nonzero below the smallest
// subnormal) are refused at their key, from the file or an override, instead of silently
// becoming infinity (or 0) in the trainer; the largest float itself is fine.
static void test_float_range(void) {
    rl_recipe_t *r = NULL;
    const char *t = "model: {path: ../model}\ndata: {train: ../data/train.jsonl}\n"
                    "algorithm: {name: sft}\ntrain: {steps: 1}\noptim: {lr: 1e-3}\n"
                    "lora: {enabled: true, alpha: 1e300}\n";
    CHECK_INT(s_load_str("f32.yaml", t, NULL, 0, &r), RL_EINVAL);
    CHECK(r == NULL);
    CHECK_CONTAINS(s_err, "f32.yaml:6:23: lora.alpha: 1e300 is out of range (a 32-bit float "
                          "overflows to infinity); allowed: a number > 0, at most "
                          "3.402823466e+38 in magnitude");
    const char *ovr[] = {"lora.alpha=1e300", "optim.eps=1e-300", "rewards.0.weight=-3.5e38"};
    int rc =
        rl_recipe_load_file(rl_algos(), RECIPES "/good/grpo.yaml", ovr, 3, 0, &r, s_err, ERRLEN);
    CHECK_INT(rc, RL_EINVAL);
    CHECK_CONTAINS(s_err, "<override 1>:1:1: lora.alpha: 1e300 is out of range (a 32-bit float "
                          "overflows to infinity)");
    CHECK_CONTAINS(s_err, "<override 2>:1:1: optim.eps: 1e-300 is out of range (a 32-bit float "
                          "rounds it to 0)");
    CHECK_CONTAINS(s_err, "<override 3>:1:1: rewards[0].weight: -3.5e38 is out of range");
    rl_recipe_destroy(&r);
    const char *edge[] = {"lora.alpha=3.4028234e38", "optim.eps=1e-40",
                          "rewards.0.weight=-3.4e38"};
    rc = rl_recipe_load_file(rl_algos(), RECIPES "/good/grpo.yaml", edge, 3, 0, &r, s_err, ERRLEN);
    CHECK_MSG(rc == 0, "%s", s_err);
    if (r) {
        CHECK(isfinite((float)r->lora.alpha));
        CHECK((float)r->optim.eps > 0.0f);
        rl_recipe_destroy(&r);
    }
}

static void test_round_trip(void) {
    const char *files[] = {RECIPES "/good/grpo.yaml", RECIPES "/good/sft.yaml"};
    for (int i = 0; i < 2; i++) {
        rl_recipe_t *r = NULL, *r2 = NULL;
        char *y1 = NULL, *y2 = NULL;
        int rc = rl_recipe_load_file(rl_algos(), files[i], NULL, 0, 0, &r, s_err, ERRLEN);
        CHECK_MSG(rc == 0, "%s", s_err);
        if (rc) {
            continue;
        }
        CHECK_INT(rl_recipe_to_yaml(r, &y1), 0);
        // from another directory: absolute paths keep working
        rc = rl_recipe_load_string(rl_algos(), y1, strlen(y1), "/tmp/elsewhere/resolved.yaml", NULL,
                                   0, 0, &r2, s_err, ERRLEN);
        CHECK_MSG(rc == 0, "%s\n%s", s_err, y1);
        if (rc == 0) {
            CHECK_INT(rl_recipe_to_yaml(r2, &y2), 0);
            CHECK_STR(y1, y2);
        }
        free(y1);
        free(y2);
        rl_recipe_destroy(&r);
        rl_recipe_destroy(&r2);
    }
    // a model.path ending in '/' derives model.tokenizer without a double slash, which the
    // printed recipe would read back as another path (fuzz.config found "//tokenizer.json")
    {
        const char *y = "model: {path: /}\ndata: {train: t.jsonl}\nalgorithm: {name: sft}\n"
                        "optim: {lr: 1e-3}\ntrain: {steps: 2}\n";
        rl_recipe_t *a = NULL, *b = NULL;
        char *ya = NULL, *yb = NULL;
        int rc = rl_recipe_load_string(rl_algos(), y, strlen(y), "/tmp/slash.yaml", NULL, 0,
                                       RL_RECIPE_NO_FILE_CHECKS, &a, s_err, ERRLEN);
        CHECK_MSG(rc == 0, "%s", s_err);
        if (a) {
            CHECK_STR(a->model.tokenizer, "/tokenizer.json");
            CHECK_INT(rl_recipe_to_yaml(a, &ya), 0);
            rc = rl_recipe_load_string(rl_algos(), ya, strlen(ya), "/tmp/slash2.yaml", NULL, 0,
                                       RL_RECIPE_NO_FILE_CHECKS, &b, s_err, ERRLEN);
            CHECK_MSG(rc == 0, "%s", s_err);
            CHECK_INT(b ? rl_recipe_to_yaml(b, &yb) : -1, 0);
            CHECK_STR(ya, yb);
        }
        free(ya);
        free(yb);
        rl_recipe_destroy(&a);
        rl_recipe_destroy(&b);
    }
    // awkward strings survive printing
    const char *ovr[] = {"sampling.stop=[\"a: b\", \"#x\", \"tab\\there\", '', \"\\u0085\","
                         " \"\\u2028\", \"\\x7f\", \"\\u00e9\", yes, '1e3', 'null']",
                         "rewards.0.config={\"k\\n\": [\"\\u0001\", 1e999, 12345678901234567890]}",
                         "run.name=a.b-c_d"};
    rl_recipe_t *r = NULL, *r2 = NULL;
    char *y1 = NULL, *y2 = NULL;
    int rc =
        rl_recipe_load_file(rl_algos(), RECIPES "/good/grpo.yaml", ovr, 3, 0, &r, s_err, ERRLEN);
    CHECK_MSG(rc == 0, "%s", s_err);
    if (rc == 0) {
        CHECK_INT(r->sampling.stop.n, 11);
        CHECK_INT(rl_recipe_to_yaml(r, &y1), 0);
        rc = rl_recipe_load_string(rl_algos(), y1, strlen(y1), "x.yaml", NULL, 0, 0, &r2, s_err,
                                   ERRLEN);
        CHECK_MSG(rc == 0, "%s\n%s", s_err, y1);
        if (rc == 0) {
            CHECK_INT(rl_recipe_to_yaml(r2, &y2), 0);
            CHECK_STR(y1, y2);
            CHECK_STR(r2->sampling.stop.items[1], "#x");
            CHECK_STR(r2->sampling.stop.items[10], "null");
        }
    }
    free(y1);
    free(y2);
    rl_recipe_destroy(&r);
    rl_recipe_destroy(&r2);
}

// each bad recipe fails, names itself, and prints every "# expect:" line it carries
static void test_bad_corpus(void) {
    DIR *d = opendir(RECIPES "/bad");
    CHECK(d != NULL);
    if (!d) {
        return;
    }
    int seen = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        size_t len = strlen(e->d_name);
        if (len < 6 || strcmp(e->d_name + len - 5, ".yaml") != 0) {
            continue;
        }
        char path[1024];
        snprintf(path, sizeof path, "%s/bad/%s", RECIPES, e->d_name);
        char *text = rl_test_read_file(path, NULL);
        CHECK(text != NULL);
        if (!text) {
            continue;
        }
        rl_recipe_t *r = NULL;
        int rc = rl_recipe_load_file(rl_algos(), path, NULL, 0, 0, &r, s_err, ERRLEN);
        CHECK_MSG(rc == RL_EINVAL, "%s: rc %d", e->d_name, rc);
        CHECK_MSG(strstr(s_err, e->d_name) != NULL, "%s: %s", e->d_name, s_err);
        int expects = 0;
        for (char *p = strstr(text, "# expect: "); p; p = strstr(p + 1, "# expect: ")) {
            char want[512];
            char *eol = strchr(p, '\n');
            size_t n = (eol ? (size_t)(eol - p) : strlen(p)) - 10;
            snprintf(want, sizeof want, "%.*s", (int)n, p + 10);
            CHECK_MSG(strstr(s_err, want) != NULL, "%s: expected\n  %s\nin\n%s", e->d_name,
                      want, s_err);
            expects++;
        }
        CHECK_MSG(expects > 0, "%s has no # expect: line", e->d_name);
        rl_recipe_destroy(&r);
        free(text);
        seen++;
    }
    closedir(d);
    CHECK(seen >= 20);
}

// the binary: exit codes and messages on stderr
static int s_run(const char *args, char *out, size_t n) {
    char cmd[2048];
    // args carry their own redirections; plain ones get stderr merged into the output
    snprintf(cmd, sizeof cmd, "'%s/rlctl' %s%s", RL_BINARY_DIR, args,
             strchr(args, '>') ? "" : " 2>&1");
    return rl_test_shell(cmd, out, n);
}

static void test_cli(void) {
    static char out[1 << 16];
    CHECK_INT(s_run("validate '" RECIPES "/bad/lr_string.yaml' 2>&1 >/dev/null", out,
                    sizeof out),
              2);
    CHECK_CONTAINS(out, "lr_string.yaml:7:3: optim.lr: expected a number, found string 'fast'");
    CHECK_CONTAINS(out, "lr_string.yaml: 1 error");
    CHECK_INT(s_run("validate '" RECIPES "/good/grpo.yaml' optim.lr=fast 2>&1 >/dev/null", out,
                    sizeof out),
              2);
    CHECK_CONTAINS(out, "<override 1>:1:1: optim.lr: expected a number");
    // algorithm.policy_loss: its choices are the loss registry's policy losses
    CHECK_INT(s_run("validate '" RL_SOURCE_DIR "/cookbook/grpo_lora.yaml' "
                    "algorithm.policy_loss=nope 2>&1 >/dev/null",
                    out, sizeof out),
              2);
    CHECK_CONTAINS(out, "algorithm.policy_loss: 'nope' is not a policy loss; choices: grpo");
    CHECK_INT(s_run("validate '" RL_SOURCE_DIR "/cookbook/grpo_lora.yaml' "
                    "algorithm.policy_loss=dpo 2>&1 >/dev/null",
                    out, sizeof out),
              2);
    CHECK_CONTAINS(out, "algorithm.policy_loss: 'dpo' is not a policy loss; choices: grpo");
    // a knob the loss has no use for is refused, not ignored (CISPO has no dual clip), also
    // without the file checks
    CHECK_INT(s_run("validate --no-file-checks '" RL_SOURCE_DIR "/cookbook/grpo_lora.yaml' "
                    "algorithm.policy_loss=cispo algorithm.dual_clip=3 2>&1 >/dev/null",
                    out, sizeof out),
              2);
    CHECK_CONTAINS(out, "algorithm.dual_clip: 3 does not apply to policy_loss cispo");
    CHECK_INT(s_run("validate --no-file-checks '" RL_SOURCE_DIR "/cookbook/grpo_lora.yaml' "
                    "algorithm.policy_loss=gspo algorithm.dual_clip=3 >/dev/null 2>&1",
                    out, sizeof out),
              0);
    // validate reads the data as the run does: the fixture rows hold the completion in 'answer'
    CHECK_INT(s_run("validate '" RECIPES "/good/sft.yaml' 2>&1 >/dev/null", out, sizeof out), 2);
    CHECK_CONTAINS(out, "train.jsonl:1: cannot tell the row layout");
    CHECK_INT(s_run("validate '" RECIPES "/good/sft.yaml' data.completion_field=answer 2>/dev/null",
                    out, sizeof out),
              0);
    CHECK_CONTAINS(out, "algorithm:\n  name: sft\n");
    CHECK_INT(s_run("validate --help", out, sizeof out), 0);
    CHECK_CONTAINS(out, "usage: rlctl validate");
    CHECK_INT(s_run("validate", out, sizeof out), 2);
    CHECK_INT(s_run("validate /nonexistent/r.yaml", out, sizeof out), 2);
    CHECK_CONTAINS(out, "/nonexistent/r.yaml: No such file or directory");
    CHECK_INT(s_run("validate --bogus x.yaml", out, sizeof out), 2);
    // TRL's argument names (and recipe keys) as flags: the override to write instead
    CHECK_INT(s_run("run '" RECIPES "/good/grpo.yaml' --learning_rate 1e-5", out, sizeof out), 2);
    CHECK_CONTAINS(out, "rlctl run: unknown option '--learning_rate'; 'learning_rate' is "
                        "transformers/TRL's name; rlctl's is optim.lr (the same peak learning "
                        "rate; its schedule is optim.scheduler); give it after the recipe as "
                        "optim.lr=1e-5");
    CHECK_INT(s_run("run --learning-rate=2e-5 '" RECIPES "/good/grpo.yaml'", out, sizeof out), 2);
    CHECK_CONTAINS(out, "unknown option '--learning-rate'; 'learning_rate' is "
                        "transformers/TRL's name; rlctl's is optim.lr");
    CHECK_CONTAINS(out, "give it after the recipe as optim.lr=2e-5");
    CHECK_INT(s_run("validate '" RECIPES "/good/grpo.yaml' --max_steps=3", out, sizeof out), 2);
    CHECK_CONTAINS(out, "rlctl validate: unknown option '--max_steps'; 'max_steps' is "
                        "transformers/TRL's name; rlctl's is train.steps (the same: optimizer "
                        "steps); give it after the recipe as train.steps=3");
    // a name whose meaning differs gets the hint but no value to copy
    CHECK_INT(s_run("run '" RECIPES "/good/grpo.yaml' --num_train_epochs 3", out, sizeof out), 2);
    CHECK_CONTAINS(out, "'num_train_epochs' is transformers/TRL's name; rlctl's is train.steps "
                        "(rlctl counts optimizer steps, not epochs");
    CHECK(strstr(out, "train.steps=3") == NULL);
    CHECK_INT(s_run("validate --optim.lr 1e-5 '" RECIPES "/good/grpo.yaml'", out, sizeof out), 2);
    CHECK_CONTAINS(out, "rlctl validate: unknown option '--optim.lr'; recipe settings are given "
                        "after the recipe as KEY=VALUE: optim.lr=1e-5");
    // a command without overrides keeps its plain answer
    CHECK_INT(s_run("plot --learning_rate 1e-5", out, sizeof out), 2);
    CHECK_CONTAINS(out, "rlctl plot: unknown option '--learning_rate' (rlctl plot --help)");
    CHECK_INT(s_run("validate --keys", out, sizeof out), 0);
    CHECK_CONTAINS(out, "| `optim.lr` | float | `required` |");
    // the printed recipe is a fixed point of validate
    char tmp[] = "/tmp/rl_test_config_XXXXXX";
    int fd = mkstemp(tmp);
    CHECK(fd >= 0);
    if (fd >= 0) {
        close(fd);
        char args[1024];
        // --no-file-checks: the fixture's plugin is a placeholder, not a loadable reward
        snprintf(args, sizeof args, "validate --no-file-checks '%s/good/grpo.yaml' 2>/dev/null > %s",
                 RECIPES, tmp);
        CHECK_INT(s_run(args, out, sizeof out), 0);
        char *first = rl_test_read_file(tmp, NULL);
        snprintf(args, sizeof args, "validate --no-file-checks %s 2>/dev/null", tmp);
        CHECK_INT(s_run(args, out, sizeof out), 0);
        CHECK_STR(out, first ? first : "");
        free(first);
        unlink(tmp);
    }
}

// the cookbook's recipes load (when the cookbook's model and data have landed)
static void test_cookbook(void) {
    if (access(RL_SOURCE_DIR "/cookbook/models/arith-base/config.json", F_OK) != 0 ||
        access(RL_SOURCE_DIR "/cookbook/data/arith/train.jsonl", F_OK) != 0) {
        fprintf(stderr, "note: cookbook model/data absent; cookbook recipes not loaded\n");
        return;
    }
    const char *files[] = {RL_SOURCE_DIR "/cookbook/grpo_lora.yaml",
                           RL_SOURCE_DIR "/cookbook/sft_arith.yaml"};
    for (int i = 0; i < 2; i++) {
        rl_recipe_t *r = NULL;
        int rc = rl_recipe_load_file(rl_algos(), files[i], NULL, 0, 0, &r, s_err, ERRLEN);
        CHECK_MSG(rc == 0, "%s: %s", files[i], s_err);
        if (r && i == 0) {
            CHECK_STR(r->algorithm.def->name, "grpo");
            CHECK(r->lora.enabled);
            CHECK_INT(r->lora.r, 8);
            CHECK_INT(r->lora.target_modules.n, 7);
            CHECK_CLOSE(s_num(r, "algorithm.num_generations"), 8, 0);
            CHECK_INT(r->train.batch_size, 16);
            CHECK_CLOSE(r->optim.lr, 1e-3, 0);
            CHECK_CLOSE(r->algorithm.beta, 0.0, 0);
            CHECK_INT(r->algorithm.loss_agg, RL_RECIPE_AGG_TOKEN_MEAN);
            CHECK_CLOSE(r->sampling.temperature, 1.0, 0);
            CHECK(r->n_rewards == 1 && r->rewards[0].builtin == RL_RECIPE_REWARD_MATH_ANSWER);
        } else if (r) {
            CHECK_STR(r->algorithm.def->name, "sft");
            CHECK(!r->lora.enabled);
            CHECK_INT(r->train.batch_size, 64);
            CHECK_CLOSE(r->optim.lr, 2e-3, 0);
            CHECK_INT(r->optim.scheduler, RL_RECIPE_SCHED_COSINE);
            CHECK_INT(r->train.steps, 1000);
        }
        rl_recipe_destroy(&r);
    }
    // the GPU pair (scripts/gpu_cookbook.sh): their models are made at run time (rlctl init,
    // then the SFT run), so without file checks
    const char *gpu[] = {RL_SOURCE_DIR "/cookbook/sft_arith_gpu.yaml",
                         RL_SOURCE_DIR "/cookbook/grpo_lora_gpu.yaml"};
    for (int i = 0; i < 2; i++) {
        rl_recipe_t *r = NULL;
        int rc = rl_recipe_load_file(rl_algos(), gpu[i], NULL, 0, RL_RECIPE_NO_FILE_CHECKS, &r,
                                     s_err, ERRLEN);
        CHECK_MSG(rc == 0, "%s: %s", gpu[i], s_err);
        if (r) {
            CHECK_STR(r->model.device, "cuda");
            CHECK_STR(r->algorithm.def->name, i ? "grpo" : "sft");
        }
        rl_recipe_destroy(&r);
    }
}

int main(void) {
    RL_TEST_RUN(test_yaml_tree);
    RL_TEST_RUN(test_defaults);
    RL_TEST_RUN(test_grpo);
    RL_TEST_RUN(test_generation_defaults);
    RL_TEST_RUN(test_enum_names);
    RL_TEST_RUN(test_env_http);
    RL_TEST_RUN(test_schema);
    RL_TEST_RUN(test_name_lists);
    RL_TEST_RUN(test_algorithm_unit);
    RL_TEST_RUN(test_ppo);
    RL_TEST_RUN(test_dpo);
    RL_TEST_RUN(test_docs_cover_schema);
    RL_TEST_RUN(test_errors_inline);
    RL_TEST_RUN(test_overrides);
    RL_TEST_RUN(test_foreign_hints);
    RL_TEST_RUN(test_float_range);
    RL_TEST_RUN(test_round_trip);
    RL_TEST_RUN(test_data_paths);
    RL_TEST_RUN(test_bad_corpus);
    RL_TEST_RUN(test_cli);
    RL_TEST_RUN(test_cookbook);
    RL_TEST_DONE();
}
