// tests for `rlctl validate` reading the model folder a recipe names: a broken config.json,
// weights that do not match the config, and a tokenizer larger than the model's vocabulary are
// each reported at the recipe line that named the folder (exit 2); the intact folder passes.
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
// run inside it), and a recipe naming it on line 3, column 3 (errors point at the key).
static int s_case(const char *edit, char *err, size_t len) {
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "rm -rf '%s/m' && cp -r '%s/recipes/model' '%s/m' && cd '%s/m' && %s",
             s_dir, RL_FIXTURES, s_dir, s_dir, edit);
    CHECK_INT(system(cmd), 0);
    char recipe[1024];
    snprintf(recipe, sizeof recipe,
             "# fixture\n"
             "model:\n"
             "  path: m\n"
             "data:\n"
             "  train: %s/recipes/data/train.jsonl\n"
             "algorithm: {name: sft}\n"
             "optim: {lr: 1e-3}\n"
             "train: {steps: 10}\n",
             RL_FIXTURES);
    s_write("r.yaml", recipe);
    char args[512];
    snprintf(args, sizeof args, "validate '%s/r.yaml'", s_dir);
    return s_rlctl(args, err, len);
}

int main(void) {
    snprintf(s_dir, sizeof s_dir, "/tmp/rl_test_validate_XXXXXX");
    RL_TEST_ASSERT_FILE(mkdtemp(s_dir), s_dir);
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

    // a tokenizer with more tokens (24 + 10 added = 34) than the model's vocab_size (32)
    CHECK_INT(s_case("/usr/bin/python3 -c \"import json; t = json.load(open('tokenizer.json')); "
                     "t['added_tokens'] += [dict(id=24 + i, content='<x%d>' % i, special=True, "
                     "single_word=False, lstrip=False, rstrip=False, normalized=False) "
                     "for i in range(10)]; json.dump(t, open('tokenizer.json', 'w'))\"",
                     err, sizeof err), 2);
    // model.tokenizer took its default (<model.path>/tokenizer.json): no line to point at
    CHECK_CONTAINS(err, "r.yaml: model.tokenizer: the tokenizer has 34 tokens but the model's "
                        "vocab_size is 32");

    // a tokenizer.json of an unsupported model type
    CHECK_INT(s_case("sed -i 's/\"BPE\"/\"WordPiece\"/' tokenizer.json", err, sizeof err), 2);
    CHECK_CONTAINS(err, "model.tokenizer: ");
    CHECK_CONTAINS(err, "WordPiece");

    // --no-file-checks reads neither the folder nor the weights
    CHECK_INT(s_case("rm model.safetensors", err, sizeof err), 2);
    char args[512];
    snprintf(args, sizeof args, "validate --no-file-checks '%s/r.yaml'", s_dir);
    CHECK_INT(s_rlctl(args, err, sizeof err), 0);

    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", s_dir);
    CHECK_INT(system(cmd), 0);
    RL_TEST_DONE();
}
