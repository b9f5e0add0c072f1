// tests for `rlctl validate` reading the model folder a recipe names: a broken config.json,
// weights that do not match the config, and a tokenizer larger than the model's vocabulary are
// each reported at the recipe line that named the folder (exit 2); the intact folder passes.
// generate, logprobs and eval refuse a folder whose tokenizer does not fit its vocab_size too.
// A dataset `rlctl run` refuses (DPO's unpaired row, SFT's missing field, an empty file, in
// data.train or data.eval) is refused by `rlctl validate` with the same message, and the run
// refuses it before it makes the run folder.
#include "rl_test.h"

#include <unistd.h>

static char s_dir[256];

static void s_write(const char *name, const char *text) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", s_dir, name);
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "FAIL cannot write %s\n", path);
        exit(1);
    }
    fputs(text, f);
    fclose(f);
}

// Runs rlctl with `args`; returns its exit status and stderr in err.
static int s_rlctl(const char *args, char *err, size_t len) {
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "'%s/rlctl' %s 2>&1 >/dev/null", RL_BINARY_DIR, args);
    return rl_test_shell(cmd, err, len);
}

// A model folder m/ copied from the recipe fixtures, then changed by `edit` (a shell command
// run inside it), and a recipe naming it on line 3, column 3 (errors point at the key); with
// `tokenizer` != NULL, line 4 sets model.tokenizer to it.
static int s_case_tok(const char *edit, const char *tokenizer, char *err, size_t len) {
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "rm -rf '%s/m' && cp -r '%s/recipes/model' '%s/m' && cd '%s/m' && %s",
             s_dir, RL_FIXTURES, s_dir, s_dir, edit);
    CHECK_INT(system(cmd), 0);
    char recipe[1024];
    snprintf(recipe, sizeof recipe,
             "# fixture\n"
             "model:\n"
             "  path: m\n"
             "%s%s%s"
             "data:\n"
             "  train: %s/recipes/data/train.jsonl\n"
             "  completion_field: answer\n"
             "algorithm: {name: sft}\n"
             "optim: {lr: 1e-3}\n"
             "train: {steps: 10}\n",
             tokenizer ? "  tokenizer: " : "", tokenizer ? tokenizer : "", tokenizer ? "\n" : "",
             RL_FIXTURES);
    s_write("r.yaml", recipe);
    char args[512];
    snprintf(args, sizeof args, "validate '%s/r.yaml'", s_dir);
    return s_rlctl(args, err, len);
}

static int s_case(const char *edit, char *err, size_t len) {
    return s_case_tok(edit, NULL, err, len);
}

// Adds 10 special tokens (ids 24..33) to m/tokenizer.json: 34 ids for a vocab_size of 32.
#define S_GROW_TOKENIZER                                                                     \
    "/usr/bin/python3 -c \"import json; t = json.load(open('tokenizer.json')); "             \
    "t['added_tokens'] += [dict(id=24 + i, content='<x%d>' % i, special=True, "              \
    "single_word=False, lstrip=False, rstrip=False, normalized=False) "                      \
    "for i in range(10)]; json.dump(t, open('tokenizer.json', 'w'))\""

// `rlctl validate` and `rlctl run` of a recipe of `algo` over the intact fixture model, with
// data.train (and data.eval when eval is not NULL) holding `rows`: both refuse it (exit 2) with
// the message `want`, the same words, and the run makes no run folder.
static void s_same(const char *algo, const char *keys, const char *rows, int in_eval,
                   const char *want) {
    char cmd[2048], v[4096], r[4096];
    snprintf(cmd, sizeof cmd, "rm -rf '%s/m' '%s/runs' && cp -r '%s/recipes/model' '%s/m'", s_dir,
             s_dir, RL_FIXTURES, s_dir);
    CHECK_INT(system(cmd), 0);
    s_write("bad.jsonl", rows);
    char recipe[2048];
    snprintf(recipe, sizeof recipe,
             "run: {dir: runs/x}\n"
             "model: {path: m}\n"
             "data: {train: %s, %s%s}\n"
             "algorithm: {name: %s}\n"
             "optim: {lr: 1e-3}\n"
             "train: {steps: 2, batch_size: 1, eval_every: %d}\n",
             in_eval ? "good.jsonl" : "bad.jsonl", in_eval ? "eval_pairs: bad.jsonl, " : "", keys,
             algo, in_eval);
    s_write("r.yaml", recipe);
    snprintf(cmd, sizeof cmd, "cd '%s' && '%s/rlctl' validate r.yaml 2>&1 >/dev/null", s_dir,
             RL_BINARY_DIR);
    CHECK_INT(rl_test_shell(cmd, v, sizeof v), 2);
    snprintf(cmd, sizeof cmd, "cd '%s' && '%s/rlctl' run r.yaml 2>&1 >/dev/null", s_dir,
             RL_BINARY_DIR);
    CHECK_INT(rl_test_shell(cmd, r, sizeof r), 2);
    CHECK_CONTAINS(v, want);
    CHECK_CONTAINS(r, want);
    // the run's whole message is validate's first line
    size_t n = strcspn(r, "\n");
    CHECK_MSG(strncmp(v, r, n) == 0 && v[n] == '\n', "%s: validate says '%s', run says '%s'", algo,
              v, r);
    snprintf(cmd, sizeof cmd, "%s/runs/x", s_dir);
    CHECK_MSG(access(cmd, F_OK) != 0, "%s: the refused run made %s", algo, cmd);
}

int main(void) {
    rl_test_tmpdir(s_dir, sizeof s_dir, "validate");
    char err[4096];

    CHECK_INT(s_case("true", err, sizeof err), 0);
    CHECK_STR(err, "");

    // config.json without hidden_size
    CHECK_INT(s_case("sed -i 's/\"hidden_size\": 8, //' config.json", err, sizeof err), 2);
    CHECK_CONTAINS(err, "r.yaml:3:3: model.path: ");
    CHECK_CONTAINS(err, "hidden_size");

    // config.json that is not JSON
    CHECK_INT(s_case("printf '{\"model_type\": ' > config.json", err, sizeof err), 2);
    CHECK_CONTAINS(err, "r.yaml:3:3: model.path: ");
    CHECK_CONTAINS(err, "config.json");

    // weights of a different shape: the config says 2 layers, the file holds 1
    CHECK_INT(s_case("sed -i 's/\"num_hidden_layers\": 1/\"num_hidden_layers\": 2/' config.json",
                     err, sizeof err), 2);
    CHECK_CONTAINS(err, "r.yaml:3:3: model.path: ");
    CHECK_CONTAINS(err, "model.layers.1.");

    // truncated weights
    CHECK_INT(s_case("truncate -s 100 model.safetensors", err, sizeof err), 2);
    CHECK_CONTAINS(err, "r.yaml:3:3: model.path: ");
    CHECK_CONTAINS(err, "model.safetensors");

    // no weights at all
    CHECK_INT(s_case("rm model.safetensors", err, sizeof err), 2);
    CHECK_CONTAINS(err, "r.yaml:3:3: model.path: ");

    // a tokenizer with more tokens (24 + 10 added = 34) than the model's vocab_size (32): the
    // message names both files, the largest id and vocab_size
    CHECK_INT(s_case(S_GROW_TOKENIZER, err, sizeof err), 2);
    // model.tokenizer took its default (<model.path>/tokenizer.json): no line to point at
    char want[1024];
    snprintf(want, sizeof want, "r.yaml: model.tokenizer: %s/m/tokenizer.json has token id 33 "
             "('<x9>') but %s/m/config.json has vocab_size 32; every token id must be below "
             "vocab_size", s_dir, s_dir);
    CHECK_CONTAINS(err, want);

    // the same tokenizer named by model.tokenizer from outside the folder (line 4)
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "cp '%s/m/tokenizer.json' '%s/big.json'", s_dir, s_dir);
    CHECK_INT(system(cmd), 0);
    CHECK_INT(s_case_tok("true", "big.json", err, sizeof err), 2);
    snprintf(want, sizeof want, "r.yaml:4:3: model.tokenizer: %s/big.json has token id 33 "
             "('<x9>') but %s/m/config.json has vocab_size 32", s_dir, s_dir);
    CHECK_CONTAINS(err, want);

    // generate, logprobs and eval load the folder with its tokenizer: refused the same way
    // (exit 2) instead of running a model whose embedding table the ids overrun
    CHECK_INT(s_case(S_GROW_TOKENIZER, err, sizeof err), 2);
    const char *cmds[] = {"generate --prompt 1+1= --max-new-tokens 1",
                          "logprobs --prompt 1+1= --completion 2",
                          "eval --data '" RL_FIXTURES "/recipes/data/eval.jsonl' "
                          "--max-new-tokens 1 --limit 1"};
    for (int i = 0; i < 3; i++) {
        char args[1024];
        snprintf(args, sizeof args, "%s --model '%s/m'", cmds[i], s_dir);
        int rc = s_rlctl(args, err, sizeof err);
        CHECK_MSG(rc == 2, "rlctl %s: exit %d, want 2: %s", cmds[i], rc, err);
        snprintf(want, sizeof want, "%s/m/tokenizer.json has token id 33 ('<x9>') but "
                 "%s/m/config.json has vocab_size 32", s_dir, s_dir);
        CHECK_CONTAINS(err, want);
    }
    // ...and with the intact folder they run
    CHECK_INT(s_case("true", err, sizeof err), 0);
    for (int i = 0; i < 3; i++) {
        char args[1024];
        snprintf(args, sizeof args, "%s --model '%s/m'", cmds[i], s_dir);
        int rc = s_rlctl(args, err, sizeof err);
        CHECK_MSG(rc == 0, "rlctl %s: exit %d: %s", cmds[i], rc, err);
    }

    // a tokenizer.json of an unsupported model type
    CHECK_INT(s_case("sed -i 's/\"BPE\"/\"WordPiece\"/' tokenizer.json", err, sizeof err), 2);
    CHECK_CONTAINS(err, "model.tokenizer: ");
    CHECK_CONTAINS(err, "WordPiece");

    // --no-file-checks reads neither the folder nor the weights
    CHECK_INT(s_case("rm model.safetensors", err, sizeof err), 2);
    char args[512];
    snprintf(args, sizeof args, "validate --no-file-checks '%s/r.yaml'", s_dir);
    CHECK_INT(s_rlctl(args, err, sizeof err), 0);

    // validate = run on bad data
    s_write("good.jsonl", "{\"prompt\": \"1+1=\", \"chosen\": \"2\", \"rejected\": \"3\"}\n");
    s_same("dpo", "format: preference",
           "{\"prompt\": \"1+1=\", \"chosen\": \"2\", \"rejected\": \"3\"}\n"
           "{\"prompt\": \"2+2=\", \"chosen\": \"4\"}\n",
           0, "/bad.jsonl:2: field 'rejected' is missing");
    s_same("dpo", "format: preference", "{\"prompt\": \"2+2=\", \"rejected\": \"4\"}\n", 1,
           "/bad.jsonl:1: field 'chosen' is missing");
    s_same("rm", "format: preference", "{\"prompt\": \"2+2=\", \"chosen\": \"4\"}\n", 0,
           "/bad.jsonl:1: field 'rejected' is missing");
    s_same("sft", "format: prompt_completion", "{\"prompt\": \"1+1=\"}\n", 0,
           "/bad.jsonl:1: field 'completion' is missing");
    s_same("sft", "format: prompt_completion", "", 0, "/bad.jsonl: no usable example");

    rl_test_tmpdir_done(s_dir);
    RL_TEST_DONE();
}
