// tests for finding the model's own chat template the one way (rl_chat_model_source): the string
// form of tokenizer_config.json's chat_template, the list form's "default", chat_template.jinja
// when the config has none, a folder with neither; then GRPO and PPO over a model folder whose
// template is the real Qwen3 one in tokenizer_config.json (tests/reference/fetch_tokenizers.sh):
// `rlctl validate` accepts conversational prompts, and the prompts the rollout renders are
// Qwen3's, with data.chat_template_kwargs (enable_thinking) reaching the template.
// `rlctl template --template chatml` renders the built-in as model.chat_template: chatml does.
#include "rl_algos.h"
#include "rl_chat.h"
#include "rl_config.h"
#include "rl_err.h"
#include "rl_rollout.h"
#include "rl_test.h"
#include "rl_tokenizer.h"

#include <string.h>
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

static void s_sh(const char *fmt, const char *a) {
    char cmd[2048];
    snprintf(cmd, sizeof cmd, fmt, a, a, a, a);
    CHECK_INT(system(cmd), 0);
}

static void s_test_source(void) {
    char dir[512], err[1024] = "";
    rl_chat_source_t src;
    snprintf(dir, sizeof dir, "%s/f", s_dir);
    s_sh("rm -rf '%s/f' && mkdir '%s/f'", s_dir);

    // neither: no template, and the format names the folder and the built-ins
    CHECK_INT(rl_chat_model_source(dir, NULL, &src, err, sizeof err), 0);
    CHECK(src.text == NULL);
    rl_chat_source_free(&src);
    rl_chat_format_t fmt = RL_CHAT_NONE;
    CHECK_INT(rl_chat_model_format(dir, NULL, NULL, &fmt, err, sizeof err), RL_EINVAL);
    CHECK_CONTAINS(err, "/f has no chat template (no chat_template in tokenizer_config.json, no "
                        "chat_template.jinja)");

    // chat_template.jinja alone
    s_write("f/chat_template.jinja", "J{{ messages[0]['content'] }}");
    CHECK_INT(rl_chat_model_source(dir, NULL, &src, err, sizeof err), 0);
    CHECK_STR(src.text ? src.text : "(null)", "J{{ messages[0]['content'] }}");
    CHECK_CONTAINS(src.where, "/f/chat_template.jinja");
    rl_chat_source_free(&src);

    // the config's string comes first; its tokens as a string or {"content": ...}
    s_write("f/tokenizer_config.json",
            "{\"chat_template\": \"S\", \"bos_token\": {\"content\": \"<b>\"}, "
            "\"eos_token\": \"<e>\", \"model_max_length\": 1000000000000000019884624838656}");
    CHECK_INT(rl_chat_model_source(dir, NULL, &src, err, sizeof err), 0);
    CHECK_STR(src.text ? src.text : "(null)", "S");
    CHECK_CONTAINS(src.where, "/f/tokenizer_config.json chat_template");
    CHECK_STR(src.bos ? src.bos : "(null)", "<b>");
    CHECK_STR(src.eos ? src.eos : "(null)", "<e>");
    rl_chat_source_free(&src);

    // the list form: the one named "default", wherever it stands
    s_write("f/tokenizer_config.json",
            "{\"chat_template\": [{\"name\": \"default\", \"template\": \"D\"}, "
            "{\"name\": \"tool_use\", \"template\": \"T\"}]}");
    CHECK_INT(rl_chat_model_source(dir, NULL, &src, err, sizeof err), 0);
    CHECK_STR(src.text ? src.text : "(null)", "D");
    rl_chat_source_free(&src);

    // a config without one: chat_template.jinja beside it
    s_write("f/tokenizer_config.json", "{\"eos_token\": \"<e>\"}");
    CHECK_INT(rl_chat_model_source(dir, NULL, &src, err, sizeof err), 0);
    CHECK_STR(src.text ? src.text : "(null)", "J{{ messages[0]['content'] }}");
    rl_chat_source_free(&src);

    // a broken config names file:line:column
    s_write("f/tokenizer_config.json", "{\"chat_template\": ");
    CHECK_INT(rl_chat_model_source(dir, NULL, &src, err, sizeof err), RL_EINVAL);
    CHECK_CONTAINS(err, "/f/tokenizer_config.json:1:");
    rl_chat_source_free(&src);
}

// A recipe of `algo` over m/ (the fixture model with the real Qwen3 tokenizer_config.json) and
// conversational prompts; `extra` is more recipe text.
static void s_recipe(const char *algo, const char *extra) {
    char text[2048];
    snprintf(text, sizeof text,
             "model: {path: m}\n"
             "data: {train: chat.jsonl%s}\n"
             "algorithm: {name: %s}\n"
             "rewards:\n  - builtin: math_answer\n"
             "optim: {lr: 1e-3}\n"
             "train: {steps: 2, batch_size: 2, micro_batch_size: 2}\n",
             extra, algo);
    s_write("r.yaml", text);
}

static const char *const s_want = "<|im_start|>user\n1+1=<|im_end|>\n<|im_start|>assistant\n";

// The first training prompt of the recipe as the rollout renders it (rl_rollout_data_new).
static void s_check_render(const char *algo, const char *want) {
    char path[512], err[4096] = "";
    snprintf(path, sizeof path, "%s/r.yaml", s_dir);
    rl_recipe_t *r = NULL;
    CHECK_INT(rl_recipe_load_file(rl_algos(), path, NULL, 0, 0, &r, err, sizeof err), 0);
    if (!r) {
        fprintf(stderr, "  %s: %s\n", algo, err);
        return;
    }
    rl_tokenizer_t *tok = rl_tokenizer_new(r->model.tokenizer, err, sizeof err);
    CHECK(tok != NULL);
    rl_rollout_data_t *d = NULL;
    int rc = tok ? rl_rollout_data_new(r, tok, RL_ROLLOUT_QUIET, &d, err, sizeof err) : -1;
    CHECK_MSG(rc == 0, "%s: %s", algo, err);
    if (rc == 0 && d->train) {
        const rl_prompt_t *p = rl_prompts_get(d->train, 0);
        CHECK_MSG(p->text_len == strlen(want) && memcmp(p->text, want, p->text_len) == 0,
                  "%s renders '%.*s', not '%s'", algo, (int)p->text_len, p->text, want);
    }
    rl_rollout_data_destroy(&d);
    rl_tokenizer_destroy(&tok);
    rl_recipe_destroy(&r);
}

static void s_test_qwen3(void) {
    char cmd[2048], out[8192];
    snprintf(cmd, sizeof cmd, "%s/third_party/qwen3/tokenizer_config.json", RL_FIXTURES);
    if (access(cmd, R_OK) != 0) {
        CHECK_MSG(0, "%s is missing (run tests/reference/fetch_tokenizers.sh)", cmd);
        return;
    }
    snprintf(cmd, sizeof cmd,
             "rm -rf '%s/m' && cp -r '%s/recipes/model' '%s/m' && "
             "cp '%s/third_party/qwen3/tokenizer_config.json' '%s/m/'",
             s_dir, RL_FIXTURES, s_dir, RL_FIXTURES, s_dir);
    CHECK_INT(system(cmd), 0);
    s_write("chat.jsonl", "{\"prompt\": [{\"role\": \"user\", \"content\": \"1+1=\"}], "
                          "\"answer\": \"2\"}\n"
                          "{\"prompt\": [{\"role\": \"user\", \"content\": \"2+3=\"}], "
                          "\"answer\": \"5\"}\n");
    const char *algos[] = {"grpo", "ppo"};
    for (int i = 0; i < 2; i++) {
        s_recipe(algos[i], "");
        snprintf(cmd, sizeof cmd, "cd '%s' && '%s/rlctl' validate r.yaml 2>&1 >/dev/null", s_dir,
                 RL_BINARY_DIR);
        int rc = rl_test_shell(cmd, out, sizeof out);
        CHECK_MSG(rc == 0, "rlctl validate of a %s recipe: exit %d: %s", algos[i], rc, out);
        s_check_render(algos[i], s_want);
        // the recipe's keyword arguments reach Qwen3's template
        s_recipe(algos[i], ", chat_template_kwargs: {enable_thinking: false}");
        char want[256];
        snprintf(want, sizeof want, "%s<think>\n\n</think>\n\n", s_want);
        s_check_render(algos[i], want);
    }
    // the same folder without the template: refused
    snprintf(cmd, sizeof cmd, "rm '%s/m/tokenizer_config.json'", s_dir);
    CHECK_INT(system(cmd), 0);
    s_recipe("grpo", "");
    snprintf(cmd, sizeof cmd, "cd '%s' && '%s/rlctl' validate r.yaml 2>&1 >/dev/null", s_dir,
             RL_BINARY_DIR);
    CHECK_INT(rl_test_shell(cmd, out, sizeof out), 2);
    CHECK_CONTAINS(out, "chat.jsonl:1: field 'prompt' is a message list");
    CHECK_CONTAINS(out, "the model has no chat template");

    // rlctl template --template chatml: the built-in model.chat_template: chatml names
    s_write("msgs.json", "[{\"role\": \"user\", \"content\": \"1+1=\"}]");
    snprintf(cmd, sizeof cmd,
             "cd '%s' && '%s/rlctl' template --template chatml --messages msgs.json "
             "--add-generation-prompt 2>&1",
             s_dir, RL_BINARY_DIR);
    CHECK_INT(rl_test_shell(cmd, out, sizeof out), 0);
    CHECK_STR(out, s_want);
    snprintf(cmd, sizeof cmd,
             "cd '%s' && '%s/rlctl' template --template qwen --messages msgs.json 2>&1", s_dir,
             RL_BINARY_DIR);
    CHECK_INT(rl_test_shell(cmd, out, sizeof out), 2);
    CHECK_CONTAINS(out, "--template 'qwen': not a built-in (chatml, llama3)");
}

int main(void) {
    rl_test_tmpdir(s_dir, sizeof s_dir, "chat_source");
    s_test_source();
    s_test_qwen3();
    rl_test_tmpdir_done(s_dir);
    RL_TEST_DONE();
}
