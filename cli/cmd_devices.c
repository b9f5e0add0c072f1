// rlctl devices — what this machine can compute on: each NVIDIA GPU this process may use (through
// the CUDA module, model/rl_device: CUDA_VISIBLE_DEVICES honoured, numbered as a run numbers
// them), the driver's and the runtime's CUDA versions, and the CPU (model, cores, memory). Without
// a usable GPU it lists the CPU and says why there is none, in rl_device's words. Text or JSON.
// It only reads: it starts no context on a GPU.
#define _GNU_SOURCE // sched_getaffinity, CPU_COUNT
#include "rl_cli.h"
#include "rl_device.h"
#include "rl_err.h"

#include "cuda/rl_cuda_module.h"

#include <jansson.h>
#include <sched.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void s_usage(FILE *out) {
    fprintf(
        out,
        "usage: rlctl devices [--json]\n\n"
        "List what this machine can compute on: each NVIDIA GPU this process may use\n"
        "(cuda:N as a recipe's model.device names it; CUDA_VISIBLE_DEVICES is honoured)\n"
        "with its name, memory total and free, compute capability and multiprocessors,\n"
        "and whether rlctl can use it; the CUDA driver's and runtime's versions; and the\n"
        "CPU (model, cores this process may use, memory). Without a usable GPU it lists\n"
        "the CPU and says why no GPU was found (no CUDA module in this build, no driver,\n"
        "no device). Exits 0 either way.\n\n"
        "options:\n"
        "  --json       one JSON object: {\"cpu\": {\"model\", \"cores\", \"mem_total\",\n"
        "               \"mem_available\"}, \"cuda\": {\"visible_devices\", \"driver_version\",\n"
        "               \"runtime_version\", \"devices\": [{\"device\", \"name\", \"mem_total\",\n"
        "               \"mem_free\", \"compute_capability\", \"sms\", \"usable\", \"why\"}],\n"
        "               \"why\"}} (bytes; versions as \"13.0\"; a why is null when all is well)\n"
        "  -h, --help   this help\n");
}

typedef struct {
    char model[256];
    int cores;                          // this process's (its affinity mask)
    long long mem_total, mem_available; // bytes; -1 when unknown
} s_cpu_t;

// A /proc/meminfo field in bytes, or -1.
static long long s_meminfo(const char *text, const char *key) {
    const char *p = strstr(text, key);
    long long kb;
    if (!p || sscanf(p + strlen(key), " %lld kB", &kb) != 1) {
        return -1;
    }
    return kb * 1024;
}

static void s_cpu(s_cpu_t *c) {
    memset(c, 0, sizeof *c);
    snprintf(c->model, sizeof c->model, "unknown");
    cpu_set_t set;
    c->cores = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set)
                                                           : (int)sysconf(_SC_NPROCESSORS_ONLN);
    c->mem_total = c->mem_available = -1;
    char buf[8192];
    FILE *f = fopen("/proc/meminfo", "r");
    if (f) {
        size_t n = fread(buf, 1, sizeof buf - 1, f);
        buf[n] = '\0';
        fclose(f);
        c->mem_total = s_meminfo(buf, "MemTotal:");
        c->mem_available = s_meminfo(buf, "MemAvailable:");
    }
    f = fopen("/proc/cpuinfo", "r");
    char line[512];
    while (f && fgets(line, sizeof line, f)) {
        const char *colon = strchr(line, ':');
        if (colon && !strncmp(line, "model name", 10)) {
            colon++;
            colon += *colon == ' ';
            snprintf(c->model, sizeof c->model, "%.*s", (int)strcspn(colon, "\n"), colon);
            break;
        }
    }
    if (f) {
        fclose(f);
    }
}

typedef struct {
    rl_cuda_device_info_t info;
    int ok;        // device_info answered
    char why[768]; // why rlctl cannot use it ("" when it can)
} s_gpu_t;

typedef struct {
    char why[1536]; // why there is no GPU at all ("" when the module and driver answered)
    int driver, runtime, n;
    s_gpu_t *gpus;
    int *access, *rank; // (n, n) between devices: peer access, and its performance rank (-1:
                        // unknown, the diagonal, or a module without the query)
    int nccl;           // with devices: NCCL opens (a mesh with a GPU per rank uses it)
    char nccl_why[600]; // why it does not
} s_cuda_t;

static void s_cuda(s_cuda_t *c) {
    memset(c, 0, sizeof *c);
    const rl_cuda_module_t *m = rl_device_cuda(c->why, sizeof c->why);
    if (!m) {
        return;
    }
    c->why[0] = '\0';
    if (m->probe(&c->n, &c->driver, &c->runtime, c->why, sizeof c->why) != 0) {
        c->n = 0;
        if (!c->why[0]) {
            snprintf(c->why, sizeof c->why, "the CUDA driver does not answer");
        }
        return;
    }
    c->gpus = c->n > 0 ? calloc((size_t)c->n, sizeof *c->gpus) : NULL;
    for (int i = 0; c->gpus && i < c->n; i++) {
        s_gpu_t *g = &c->gpus[i];
        char msg[512] = "";
        g->ok = m->device_info(i, &g->info, msg, sizeof msg) == 0;
        if (!g->ok) {
            snprintf(g->why, sizeof g->why, "%s", msg);
            continue;
        }
        rl_device_t d = {1, i};
        char err[768];
        if (rl_device_check(&d, 0, NULL, err, sizeof err) != 0) {
            snprintf(g->why, sizeof g->why, "%s", err);
        }
    }
    if (c->n == 0) {
        snprintf(c->why, sizeof c->why, "the CUDA driver sees no device");
    } else if (m->struct_size >= (int)(offsetof(rl_cuda_module_t, comm_id) + sizeof m->comm_id)) {
        c->nccl = m->comm_id(NULL, c->nccl_why, sizeof c->nccl_why) == 0; // no id, no context
    } else {
        snprintf(c->nccl_why, sizeof c->nccl_why, "this CUDA module has no NCCL entries");
    }
    // the topology between them: peer access and the driver's rank of each link
    const int n = c->n;
    if (n > 1 && m->struct_size >= (int)(offsetof(rl_cuda_module_t, peer) + sizeof m->peer)) {
        c->access = calloc((size_t)n * (size_t)n, sizeof *c->access);
        c->rank = calloc((size_t)n * (size_t)n, sizeof *c->rank);
        for (int a = 0; c->access && c->rank && a < n; a++) {
            for (int b = 0; b < n; b++) {
                char msg[256];
                int *acc = &c->access[a * n + b], *rk = &c->rank[a * n + b];
                if (a == b || m->peer(a, b, acc, rk, msg, sizeof msg) != 0) {
                    *acc = 0;
                    *rk = -1;
                }
            }
        }
    }
}

static void s_version(char *buf, size_t cap, int v) {
    snprintf(buf, cap, "%d.%d", v / 1000, (v % 1000) / 10);
}

static double s_gib(long long b) {
    return (double)b / (1024.0 * 1024.0 * 1024.0);
}

static int s_print_json(const s_cpu_t *cpu, const s_cuda_t *cu, const char *visible) {
    json_t *gpus = json_array();
    for (int i = 0; cu->gpus && i < cu->n; i++) {
        const s_gpu_t *g = &cu->gpus[i];
        char dev[32], cc[16];
        snprintf(dev, sizeof dev, "cuda:%d", i);
        snprintf(cc, sizeof cc, "%d.%d", g->info.cc_major, g->info.cc_minor);
        json_array_append_new(
            gpus, g->ok ? json_pack("{s:s,s:s,s:I,s:I,s:s,s:i,s:b,s:o}", "device", dev, "name",
                                    g->info.name, "mem_total", (json_int_t)g->info.mem_total,
                                    "mem_free", (json_int_t)g->info.mem_free, "compute_capability",
                                    cc, "sms", g->info.sms, "usable", !g->why[0], "why",
                                    g->why[0] ? json_string(g->why) : json_null())
                        : json_pack("{s:s,s:b,s:s}", "device", dev, "usable", 0, "why", g->why));
    }
    json_t *topo = json_array(); // [{a, b, peer_access, performance_rank}]
    for (int a = 0; cu->access && a < cu->n; a++) {
        for (int b = 0; b < cu->n; b++) {
            if (a != b) {
                int r = cu->rank[a * cu->n + b];
                json_array_append_new(topo, json_pack("{s:i,s:i,s:b,s:o}", "from", a, "to", b,
                                                      "peer_access", cu->access[a * cu->n + b],
                                                      "performance_rank",
                                                      r >= 0 ? json_integer(r) : json_null()));
            }
        }
    }
    char drv[16], rt[16];
    s_version(drv, sizeof drv, cu->driver);
    s_version(rt, sizeof rt, cu->runtime);
    json_t *o = json_pack(
        "{s:{s:s,s:i,s:o,s:o},s:{s:o,s:o,s:o,s:o,s:o}}", "cpu", "model", cpu->model, "cores",
        cpu->cores, "mem_total",
        cpu->mem_total >= 0 ? json_integer((json_int_t)cpu->mem_total) : json_null(),
        "mem_available",
        cpu->mem_available >= 0 ? json_integer((json_int_t)cpu->mem_available) : json_null(),
        "cuda", "visible_devices", visible ? json_string(visible) : json_null(), "driver_version",
        cu->driver > 0 ? json_string(drv) : json_null(), "runtime_version",
        cu->runtime > 0 ? json_string(rt) : json_null(), "devices", gpus, "why",
        cu->why[0] ? json_string(cu->why) : json_null());
    json_object_set_new(json_object_get(o, "cuda"), "topology", topo);
    if (cu->n > 0) {
        json_object_set_new(json_object_get(o, "cuda"), "nccl",
                            json_pack("{s:b,s:o}", "available", cu->nccl, "why",
                                      cu->nccl ? json_null() : json_string(cu->nccl_why)));
    }
    char *s = o ? json_dumps(o, JSON_INDENT(2)) : NULL;
    json_decref(o);
    if (!s) {
        fprintf(stderr, "rlctl devices: out of memory\n");
        return RL_EXIT_FAIL;
    }
    printf("%s\n", s);
    free(s);
    return RL_EXIT_OK;
}

static void s_print_text(const s_cpu_t *cpu, const s_cuda_t *cu, const char *visible) {
    printf("cpu      %s: %d cores", cpu->model, cpu->cores);
    if (cpu->mem_total >= 0) {
        printf(", %.1f GiB memory", s_gib(cpu->mem_total));
        if (cpu->mem_available >= 0) {
            printf(" (%.1f GiB available)", s_gib(cpu->mem_available));
        }
    }
    printf("\n");
    if (cu->driver > 0 || cu->runtime > 0) {
        char drv[16], rt[16];
        s_version(drv, sizeof drv, cu->driver);
        s_version(rt, sizeof rt, cu->runtime);
        printf("cuda     driver %s, runtime %s%s%s\n", cu->driver > 0 ? drv : "none", rt,
               visible ? ", CUDA_VISIBLE_DEVICES=" : "", visible ? visible : "");
    }
    for (int i = 0; cu->gpus && i < cu->n; i++) {
        const s_gpu_t *g = &cu->gpus[i];
        if (!g->ok) {
            printf("cuda:%-3d %s\n", i, g->why);
            continue;
        }
        printf("cuda:%-3d %s: %.1f GiB (%.1f GiB free), compute capability %d.%d, %d SMs%s%s\n", i,
               g->info.name, s_gib((long long)g->info.mem_total),
               s_gib((long long)g->info.mem_free), g->info.cc_major, g->info.cc_minor, g->info.sms,
               g->why[0] ? "; not usable: " : "", g->why);
    }
    if (cu->access) { // the topology: which device reaches which directly
        printf("peers    direct access between devices (P2P) and the driver's rank of the link, "
               "0 the best\n         (NVLink or PCIe: nvidia-smi topo -m)\n%-9s",
               "");
        for (int b = 0; b < cu->n; b++) {
            char h[16];
            snprintf(h, sizeof h, "cuda:%d", b);
            printf(b + 1 < cu->n ? "%-9s" : "%s", h); // no spaces at the end of a line
        }
        printf("\n");
        for (int a = 0; a < cu->n; a++) {
            char h[16];
            snprintf(h, sizeof h, "cuda:%d", a);
            printf("%-9s", h);
            for (int b = 0; b < cu->n; b++) {
                int i = a * cu->n + b;
                char cell[16] = "-";
                if (a != b && cu->access[i]) {
                    snprintf(cell, sizeof cell, "P2P r%d", cu->rank[i]);
                } else if (a != b) {
                    snprintf(cell, sizeof cell, "no P2P");
                }
                printf(b + 1 < cu->n ? "%-9s" : "%s", cell);
            }
            printf("\n");
        }
    }
    if (cu->n > 0) { // what a mesh with a GPU per rank sums its gradients with
        const char *lib = getenv("RLCTL_NCCL_LIBRARY");
        if (cu->nccl) {
            printf("nccl     %s opens: a mesh with a GPU per rank sums its gradients with it\n",
                   lib && *lib ? lib : "libnccl.so.2");
        } else {
            printf("nccl     %s (a mesh's gradients go through host memory)\n", cu->nccl_why);
        }
    }
    if (cu->why[0]) {
        printf("no GPU: %s\n", cu->why);
    }
}

int rl_cmd_devices(int argc, char **argv) {
    if (rl_cli_wants_help(argc, argv)) {
        s_usage(stdout);
        return RL_EXIT_OK;
    }
    int as_json = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--json")) {
            as_json = 1;
        } else {
            fprintf(stderr, "rlctl devices: unknown argument '%s' (rlctl devices --help)\n",
                    argv[i]);
            return RL_EXIT_USAGE;
        }
    }
    s_cpu_t cpu;
    s_cpu(&cpu);
    s_cuda_t cu;
    s_cuda(&cu);
    const char *visible = getenv("CUDA_VISIBLE_DEVICES");
    int rc = RL_EXIT_OK;
    if (as_json) {
        rc = s_print_json(&cpu, &cu, visible);
    } else {
        s_print_text(&cpu, &cu, visible);
    }
    free(cu.gpus);
    free(cu.access);
    free(cu.rank);
    return rc;
}
