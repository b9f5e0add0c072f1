// rlctl export — merges a PEFT LoRA adapter into its base model and writes a plain Hugging Face
// folder (config.json, model.safetensors in fp32 or bf16, W += scale * B A for every adapted
// Linear), copying the base folder's tokenizer files when present. Without --adapter it
// converts the model alone (e.g. to bf16). It does not train or evaluate anything.
#include "rl_cli.h"
#include "rl_err.h"
#include "rl_model.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static void s_usage(FILE *out) {
    fprintf(out,
            "usage: rlctl export --model DIR [--adapter DIR] --out DIR [--dtype fp32|bf16]\n\n"
            "Merge a PEFT LoRA adapter (adapter_config.json + adapter_model.safetensors) into\n"
            "its base model and write a Hugging Face folder: DIR/config.json and\n"
            "DIR/model.safetensors with W += scaling * B A (scaling = lora_alpha / r, or\n"
            "lora_alpha / sqrt(r) with use_rslora). tokenizer.json, tokenizer_config.json,\n"
            "generation_config.json and special_tokens_map.json are copied from the model\n"
            "folder when present.\n\n"
            "options:\n"
            "  --model DIR     base model folder (config.json + safetensors)\n"
            "  --adapter DIR   PEFT adapter folder; without it the model is re-saved as is\n"
            "  --out DIR       output folder (created; files of the same name are replaced)\n"
            "  --dtype D       fp32 (default) or bf16\n"
            "  -h, --help      this help\n");
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

int rl_cmd_export(int argc, char **argv) {
    if (rl_cli_wants_help(argc, argv)) {
        s_usage(stdout);
        return RL_EXIT_OK;
    }
    const char *model = NULL, *adapter = NULL, *out = NULL, *dtype = "fp32";
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
    int bf16;
    if (strcmp(dtype, "fp32") == 0) {
        bf16 = 0;
    } else if (strcmp(dtype, "bf16") == 0) {
        bf16 = 1;
    } else {
        fprintf(stderr, "rlctl export: --dtype '%s' is not supported (fp32, bf16)\n", dtype);
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
    rc = rl_model_save_hf(m, out, bf16, err, sizeof err);
    rl_model_destroy(&m);
    static const char *const files[] = {"tokenizer.json", "tokenizer_config.json",
                                        "generation_config.json", "special_tokens_map.json"};
    int copied = 0;
    for (size_t i = 0; rc == 0 && i < sizeof files / sizeof *files; i++) {
        char src[4096], dst[4096];
        snprintf(src, sizeof src, "%s/%s", model, files[i]);
        snprintf(dst, sizeof dst, "%s/%s", out, files[i]);
        rc = s_copy_file(src, dst, &copied, err, sizeof err);
    }
    if (rc) {
        fprintf(stderr, "rlctl export: %s\n", err);
        return RL_EXIT_FAIL;
    }
    printf("wrote %s: %s%s, %s, %d tokenizer/config file%s copied\n", out, model,
           adapter ? " + adapter merged" : "", dtype, copied, copied == 1 ? "" : "s");
    return RL_EXIT_OK;
}
