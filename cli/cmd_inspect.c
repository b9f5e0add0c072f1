// rlctl inspect — lists the tensors of a safetensors file, a Hugging Face model folder or a PEFT
// adapter folder (name, dtype, shape, numel) and the total parameter count, as text or JSON; for
// an adapter also its LoRA settings (rl_lora_describe checks them and the tensors' ranks). It
// validates through rl_safetensors, so a bad file gets the reader's one-line message and exit
// code 1. It does not interpret tensors as a model (that is model/rl_hf).
#include "rl_cli.h"
#include "rl_err.h"
#include "rl_lora.h"
#include "rl_safetensors.h"

#include <jansson.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void s_usage(FILE *out) {
    fprintf(out,
            "usage: rlctl inspect PATH [--json]\n\n"
            "List the tensors of PATH: a .safetensors file, or a model folder holding\n"
            "model.safetensors or model.safetensors.index.json with its shards (the index\n"
            "itself may be given for its folder), or a PEFT adapter folder (adapter_config.json\n"
            "and adapter_model.safetensors: its LoRA settings come first). Each file is\n"
            "validated first; a bad file prints one message naming the file and exits 1.\n\n"
            "options:\n"
            "  --json       print one JSON object: {\"path\", \"shards\", \"tensors\":\n"
            "               [{\"name\", \"dtype\", \"shape\", \"numel\"}], \"num_tensors\",\n"
            "               \"num_parameters\"}, with \"adapter\": {\"r\", \"lora_alpha\",\n"
            "               \"lora_dropout\", \"use_rslora\", \"target_modules\",\n"
            "               \"base_model_name_or_path\", \"layers\"} for an adapter\n"
            "  -h, --help   this help\n");
}

// Names come from the file: keep control characters off the terminal.
static void s_print_name(const char *s, int width) {
    int n = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++, n++) {
        putchar(*p < 0x20 || *p == 0x7f ? '?' : *p);
    }
    for (; n < width; n++) {
        putchar(' ');
    }
}

static void s_shape(char *buf, size_t len, const rl_st_tensor_t *t) {
    size_t off = (size_t)snprintf(buf, len, "[");
    for (int d = 0; d < t->ndim && off < len; d++) {
        off += (size_t)snprintf(buf + off, len - off, d ? ", %lld" : "%lld",
                                (long long)t->shape[d]);
    }
    if (off < len) {
        snprintf(buf + off, len - off, "]");
    }
}

typedef struct {
    rl_st_file_t *file;
    rl_st_model_t *model;
    const rl_lora_info_t *adapter; // a PEFT folder's settings, or NULL
} s_src_t;

// The adapter's settings, as PEFT names them.
static json_t *s_adapter_json(const rl_lora_info_t *a) {
    json_t *mods = json_array();
    for (int m = 0; m < RL_LORA_NMOD; m++) {
        if (a->targets & (1 << m)) {
            json_array_append_new(mods, json_string(rl_lora_module_name(m)));
        }
    }
    return json_pack("{s:s, s:i, s:f, s:f, s:b, s:o, s:o, s:i}", "peft_type", "LORA", "r", a->r,
                     "lora_alpha", (double)a->alpha, "lora_dropout", (double)a->dropout,
                     "use_rslora", a->use_rslora, "target_modules", mods, "base_model_name_or_path",
                     a->base_model[0] ? json_string(a->base_model) : json_null(), "layers",
                     a->layers);
}

static void s_print_adapter(const rl_lora_info_t *a) {
    printf("adapter: LoRA r %d, lora_alpha %g (scale %g%s), lora_dropout %g, targets", a->r,
           (double)a->alpha,
           a->use_rslora ? (double)a->alpha / sqrt((double)a->r) : (double)a->alpha / a->r,
           a->use_rslora ? ", rsLoRA" : "", (double)a->dropout);
    for (int m = 0, k = 0; m < RL_LORA_NMOD; m++) {
        if (a->targets & (1 << m)) {
            printf("%s %s", k++ ? "," : "", rl_lora_module_name(m));
        }
    }
    printf("; %d layers, %d modules\nbase model: ", a->layers, a->pairs);
    s_print_name(a->base_model[0] ? a->base_model : "(not named)", 0);
    printf("\n\n");
}

static int s_count(const s_src_t *s) {
    return s->model ? rl_st_model_count(s->model) : rl_st_file_count(s->file);
}

static const rl_st_tensor_t *s_tensor(const s_src_t *s, int i) {
    return s->model ? rl_st_model_tensor(s->model, i) : rl_st_file_tensor(s->file, i);
}

static int s_print_json(const char *path, const s_src_t *src, long long total) {
    json_t *root = json_object();
    json_t *shards = json_array();
    json_t *list = json_array();
    if (!root || !shards || !list) {
        json_decref(root);
        json_decref(shards);
        json_decref(list);
        return -1;
    }
    json_object_set_new(root, "path", json_string(path));
    if (src->adapter) {
        json_object_set_new(root, "adapter", s_adapter_json(src->adapter));
    }
    if (src->model) {
        for (int i = 0; i < rl_st_model_shard_count(src->model); i++) {
            json_array_append_new(shards, json_string(rl_st_model_shard_name(src->model, i)));
        }
    }
    json_object_set_new(root, "shards", shards);
    for (int i = 0; i < s_count(src); i++) {
        const rl_st_tensor_t *t = s_tensor(src, i);
        json_t *shape = json_array();
        for (int d = 0; d < t->ndim; d++) {
            json_array_append_new(shape, json_integer(t->shape[d]));
        }
        json_array_append_new(list, json_pack("{s:s, s:s, s:o, s:I}", "name", t->name, "dtype",
                                              rl_dtype_name(t->dtype), "shape", shape, "numel",
                                              (json_int_t)t->numel));
    }
    json_object_set_new(root, "tensors", list);
    json_object_set_new(root, "num_tensors", json_integer(s_count(src)));
    json_object_set_new(root, "num_parameters", json_integer(total));
    char *text = json_dumps(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    json_decref(root);
    if (!text) {
        return -1;
    }
    printf("%s\n", text);
    free(text);
    return 0;
}

int rl_cmd_inspect(int argc, char **argv) {
    const char *path = NULL;
    int as_json = 0;
    if (rl_cli_wants_help(argc, argv)) {
        s_usage(stdout);
        return RL_EXIT_OK;
    }
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--json") == 0) {
            as_json = 1;
        } else if (argv[i][0] == '-' && argv[i][1] != '\0' && strcmp(argv[i], "--") != 0) {
            fprintf(stderr, "rlctl inspect: unknown option '%s' (rlctl inspect --help)\n",
                    argv[i]);
            return RL_EXIT_USAGE;
        } else if (strcmp(argv[i], "--") == 0 && i + 1 < argc && !path) {
            path = argv[++i];
        } else if (!path) {
            path = argv[i];
        } else {
            fprintf(stderr, "rlctl inspect: one PATH only (got '%s' and '%s')\n", path, argv[i]);
            return RL_EXIT_USAGE;
        }
    }
    if (!path) {
        s_usage(stderr);
        return RL_EXIT_USAGE;
    }
    char err[1024];
    s_src_t src = {0};
    struct stat st;
    int rc;
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    char adapter_cfg[4096];
    snprintf(adapter_cfg, sizeof adapter_cfg, "%s/adapter_config.json", path);
    rl_lora_info_t info;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode) && access(adapter_cfg, F_OK) == 0) {
        // a PEFT adapter folder: its settings, then its tensors
        rc = rl_lora_describe(path, &info, err, sizeof err);
        if (rc == 0) {
            char file[4096];
            snprintf(file, sizeof file, "%s/adapter_model.safetensors", path);
            rc = rl_st_file_load(file, &src.file, err, sizeof err);
            src.adapter = &info;
        }
    } else if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
        rc = rl_st_model_load(path, &src.model, err, sizeof err);
    } else if (strcmp(base, "model.safetensors.index.json") == 0) {
        // The index names a sharded folder: inspect that folder.
        char dir[4096];
        snprintf(dir, sizeof dir, "%.*s", base == path ? 1 : (int)(base - path - 1),
                 base == path ? "." : path);
        rc = rl_st_model_load(dir[0] ? dir : "/", &src.model, err, sizeof err);
    } else {
        rc = rl_st_file_load(path, &src.file, err, sizeof err);
    }
    if (rc != 0) {
        fprintf(stderr, "rlctl inspect: %s\n", err);
        return RL_EXIT_FAIL;
    }
    long long total = 0;
    int width = 4;
    for (int i = 0; i < s_count(&src); i++) {
        const rl_st_tensor_t *t = s_tensor(&src, i);
        total += t->numel; // each numel fits the file, so the sum fits 64 bits
        int w = (int)strlen(t->name);
        width = w > width ? (w > 80 ? 80 : w) : width;
    }
    int status = RL_EXIT_OK;
    if (as_json) {
        if (s_print_json(path, &src, total) != 0) {
            fprintf(stderr, "rlctl inspect: out of memory\n");
            status = RL_EXIT_FAIL;
        }
    } else {
        if (src.adapter) {
            s_print_adapter(src.adapter);
        }
        s_print_name("name", width);
        printf("  %-5s %-24s %s\n", "dtype", "shape", "numel");
        for (int i = 0; i < s_count(&src); i++) {
            const rl_st_tensor_t *t = s_tensor(&src, i);
            char shape[256];
            s_shape(shape, sizeof shape, t);
            s_print_name(t->name, width);
            printf("  %-5s %-24s %lld\n", rl_dtype_name(t->dtype), shape, (long long)t->numel);
        }
        printf("total: %d tensors, %lld parameters", s_count(&src), total);
        if (src.model) {
            printf(", %d shard%s", rl_st_model_shard_count(src.model),
                   rl_st_model_shard_count(src.model) == 1 ? "" : "s");
        }
        printf("\n");
    }
    rl_st_file_destroy(&src.file);
    rl_st_model_destroy(&src.model);
    return status;
}
