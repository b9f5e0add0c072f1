// rlctl export — merges a PEFT LoRA adapter into its base model and writes a plain Hugging Face
// folder (config.json, the weights in the base's dtype or the one asked for, W += scale * B A
// for every adapted Linear, sharded with an index above --max-shard-size as save_pretrained),
// copying every tokenizer, chat-template and generation file of the base folder. Without
// --adapter it converts the model alone (e.g. to bf16). It does not train or evaluate anything.
#include "rl_cli.h"
#include "rl_err.h"
#include "rl_model.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/stat.h>

static void s_usage(FILE *out) {
    fprintf(out,
            "usage: rlctl export --model DIR [--adapter DIR] --out DIR\n"
            "                    [--dtype auto|fp32|bf16|fp16] [--max-shard-size SIZE]\n\n"
            "Merge a PEFT LoRA adapter (adapter_config.json + adapter_model.safetensors) into\n"
            "its base model and write a Hugging Face folder: DIR/config.json and the weights\n"
            "with W += scaling * B A (scaling = lora_alpha / r, or lora_alpha / sqrt(r) with\n"
            "use_rslora): DIR/model.safetensors, or above --max-shard-size shards\n"
            "model-0000i-of-0000N.safetensors with model.safetensors.index.json. Every\n"
            "tokenizer, chat-template and generation file of the model folder is copied\n"
            "(tokenizer*, special_tokens_map.json, added_tokens.json, vocab.*, merges.txt,\n"
            "chat_template*, generation_config.json).\n\n"
            "options:\n"
            "  --model DIR            base model folder (config.json + safetensors)\n"
            "  --adapter DIR          PEFT adapter folder; without it the model is re-saved\n"
            "  --out DIR              output folder (created; files of the same name replaced)\n"
            "  --dtype D              auto (default: the base's torch_dtype), fp32, bf16, fp16\n"
            "  --max-shard-size SIZE  largest safetensors shard: bytes, or with KB, MB, GB\n"
            "                         (powers of 1000, as transformers; default 5GB)\n"
            "  -h, --help             this help\n");
}

// Copies src to dst byte for byte and counts it in *copied; a missing src is not an error.
static int s_copy_file(const char *src, const char *dst, int *copied, char *err,
                       size_t err_len) {
    FILE *in = fopen(src, "rb");
    if (!in) {
        return errno == ENOENT ? 0 : rl_errf(err, err_len, errno, "%s: %s", src, strerror(errno));
    }
    FILE *out = fopen(dst, "wb");
    if (!out) {
        int e = errno;
        fclose(in);
        return rl_errf(err, err_len, e, "%s: %s", dst, strerror(e));
    }
    char buf[1 << 16];
    size_t n;
    int bad = 0;
    while (!bad && (n = fread(buf, 1, sizeof buf, in)) > 0) {
        bad = fwrite(buf, 1, n, out) != n;
    }
    bad |= ferror(in);
    fclose(in);
    bad |= fclose(out) != 0;
    if (bad) {
        return rl_errf(err, err_len, RL_EIO, "copying %s to %s failed", src, dst);
    }
    (*copied)++;
    return 0;
}

// 1 for a file of the model folder that export copies: the tokenizer's, the chat template's
// and the generation defaults (not the weights, their index or config.json, which it writes).
static int s_copied_file(const char *name) {
    static const char *const prefixes[] = {"tokenizer", "chat_template", "vocab."};
    static const char *const names[] = {"special_tokens_map.json", "added_tokens.json",
                                        "merges.txt", "generation_config.json"};
    for (size_t i = 0; i < sizeof prefixes / sizeof *prefixes; i++) {
        if (!strncmp(name, prefixes[i], strlen(prefixes[i]))) {
            return 1;
        }
    }
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        if (!strcmp(name, names[i])) {
            return 1;
        }
    }
    return 0;
}

// "5GB", "500MB", "2048" -> bytes (KB/MB/GB in powers of 1000, KiB/MiB/GiB of 1024, as
// transformers' max_shard_size). Returns 0, or -1 for anything else.
static int s_size(const char *s, size_t *out) {
    char *end = NULL;
    double v = strtod(s, &end);
    if (!end || end == s || !(v > 0)) {
        return -1;
    }
    static const struct {
        const char *unit;
        double mul;
    } units[] = {{"", 1},     {"B", 1},        {"KB", 1e3},        {"MB", 1e6},
                 {"GB", 1e9}, {"KIB", 1024.0}, {"MIB", 1048576.0}, {"GIB", 1073741824.0}};
    char u[8] = "";
    size_t n = strlen(end);
    if (n >= sizeof u) {
        return -1;
    }
    for (size_t i = 0; i <= n; i++) {
        u[i] = (char)(end[i] >= 'a' && end[i] <= 'z' ? end[i] - 32 : end[i]);
    }
    for (size_t i = 0; i < sizeof units / sizeof *units; i++) {
        if (!strcmp(u, units[i].unit) && v * units[i].mul >= 1 && v * units[i].mul < 1e18) {
            *out = (size_t)(v * units[i].mul);
            return 0;
        }
    }
    return -1;
}

int rl_cmd_export(int argc, char **argv) {
    if (rl_cli_wants_help(argc, argv)) {
        s_usage(stdout);
        return RL_EXIT_OK;
    }
    const char *model = NULL, *adapter = NULL, *out = NULL, *dtype = "auto", *shard = "5GB";
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char **slot = NULL;
        if (strcmp(a, "--model") == 0) {
            slot = &model;
        } else if (strcmp(a, "--adapter") == 0) {
            slot = &adapter;
        } else if (strcmp(a, "--out") == 0) {
            slot = &out;
        } else if (strcmp(a, "--dtype") == 0) {
            slot = &dtype;
        } else if (strcmp(a, "--max-shard-size") == 0) {
            slot = &shard;
        } else {
            fprintf(stderr, "rlctl export: unknown argument '%s' (rlctl export --help)\n", a);
            return RL_EXIT_USAGE;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "rlctl export: %s needs a value\n", a);
            return RL_EXIT_USAGE;
        }
        *slot = argv[++i];
    }
    if (!model || !out) {
        fprintf(stderr, "rlctl export: --model and --out are required (rlctl export --help)\n");
        return RL_EXIT_USAGE;
    }
    if (strcmp(dtype, "auto") && strcmp(dtype, "fp32") && strcmp(dtype, "bf16") &&
        strcmp(dtype, "fp16")) {
        fprintf(stderr, "rlctl export: --dtype '%s' is not supported (auto, fp32, bf16, fp16)\n",
                dtype);
        return RL_EXIT_USAGE;
    }
    size_t max_shard = 0;
    if (s_size(shard, &max_shard) != 0) {
        fprintf(stderr,
                "rlctl export: --max-shard-size '%s': expected bytes, or a number with "
                "KB, MB or GB (e.g. 5GB)\n",
                shard);
        return RL_EXIT_USAGE;
    }
    if (strcmp(model, out) == 0) {
        fprintf(stderr, "rlctl export: --out must differ from --model (the weights are read "
                        "from a mapping of the model's files)\n");
        return RL_EXIT_USAGE;
    }

    char err[1024] = "";
    rl_model_opts_t opts;
    rl_model_opts_default(&opts); // tune NONE: frozen weights stay in the mmap
    rl_model_t *m = rl_model_load(model, &opts, err, sizeof err);
    if (!m) {
        fprintf(stderr, "rlctl export: %s\n", err);
        return RL_EXIT_USAGE;
    }
    int rc = 0;
    if (adapter && (rc = rl_model_load_adapter(m, adapter, err, sizeof err)) != 0) {
        fprintf(stderr, "rlctl export: %s\n", err);
        rl_model_destroy(&m);
        return rc == RL_EINVAL || rc == RL_EUNSUPPORTED || rc == RL_ENOTFOUND ? RL_EXIT_USAGE
                                                                                : RL_EXIT_FAIL;
    }
    if (mkdir(out, 0755) != 0 && errno != EEXIST) {
        fprintf(stderr, "rlctl export: %s: %s\n", out, strerror(errno));
        rl_model_destroy(&m);
        return RL_EXIT_FAIL;
    }
    // auto: the dtype the base was saved in (config.json's torch_dtype; float32 when absent)
    const char *base = rl_model_config(m)->torch_dtype;
    if (!strcmp(dtype, "auto")) {
        dtype = !strcmp(base, "bfloat16") ? "bf16" : !strcmp(base, "float16") ? "fp16" : "fp32";
    }
    rl_dtype_t dt = !strcmp(dtype, "bf16")   ? RL_DTYPE_BF16
                    : !strcmp(dtype, "fp16") ? RL_DTYPE_F16
                                             : RL_DTYPE_F32;
    rc = rl_model_save_hf_as(m, out, dt, max_shard, err, sizeof err);
    rl_model_destroy(&m);
    int copied = 0;
    DIR *d = rc == 0 ? opendir(model) : NULL;
    for (struct dirent *e = d ? readdir(d) : NULL; rc == 0 && e; e = readdir(d)) {
        if (!s_copied_file(e->d_name)) {
            continue;
        }
        char src[4096], dst[4096];
        snprintf(src, sizeof src, "%s/%s", model, e->d_name);
        snprintf(dst, sizeof dst, "%s/%s", out, e->d_name);
        struct stat st;
        if (stat(src, &st) == 0 && S_ISREG(st.st_mode)) {
            rc = s_copy_file(src, dst, &copied, err, sizeof err);
        }
    }
    if (d) {
        closedir(d);
    }
    if (rc) {
        fprintf(stderr, "rlctl export: %s\n", err);
        return RL_EXIT_FAIL;
    }
    printf("wrote %s: %s%s, %s, %d tokenizer/template/generation file%s copied\n", out, model,
           adapter ? " + adapter merged" : "", dtype, copied, copied == 1 ? "" : "s");
    return RL_EXIT_OK;
}
