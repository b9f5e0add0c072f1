// rl_device — device names and the CUDA module's loading and checks (see rl_device.h).
#include "rl_device.h"

#include "cuda/rl_cuda_module.h"
#include "rl_err.h"

#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef RL_CUDA_MODULE_DIR
#define RL_CUDA_MODULE_DIR ""
#endif

int rl_device_parse(const char *text, rl_device_t *out, char *err, size_t err_len) {
    memset(out, 0, sizeof *out);
    if (text && strcmp(text, "cpu") == 0) {
        return 0;
    }
    if (text && strcmp(text, "cuda") == 0) {
        out->cuda = 1;
        return 0;
    }
    if (text && strncmp(text, "cuda:", 5) == 0 && text[5] >= '0' && text[5] <= '9') {
        char *end = NULL;
        long n = strtol(text + 5, &end, 10);
        if (*end == '\0' && n >= 0 && n < 1024 && (text[5] != '0' || text[6] == '\0')) {
            out->cuda = 1;
            out->index = (int)n;
            return 0;
        }
    }
    return rl_errf(err, err_len, RL_EINVAL,
                   "device '%s' is not one; allowed: cpu, cuda, cuda:N (N the GPU's index)",
                   text ? text : "(null)");
}

char *rl_device_name(const rl_device_t *d, char *buf, size_t cap) {
    if (d->cuda) {
        snprintf(buf, cap, "cuda:%d", d->index);
    } else {
        snprintf(buf, cap, "cpu");
    }
    return buf;
}

// ---------------------------------------------------------------------------------------------
// the module

static pthread_once_t s_once = PTHREAD_ONCE_INIT;
static const rl_cuda_module_t *s_mod;
static char s_why[1536];

// The table of an opened module, checked (symbol, ABI, size), or NULL with s_why naming
// `what` (the file, or RLCTL_CUDA_MODULE=path) and dl closed.
static const rl_cuda_module_t *s_table(void *dl, const char *what) {
    rl_cuda_module_fn fn = NULL;
    *(void **)&fn = dlsym(dl, RL_CUDA_MODULE_SYMBOL);
    const rl_cuda_module_t *m = fn ? fn() : NULL;
    if (!m || m->abi != RL_CUDA_MODULE_ABI || m->struct_size < (int)sizeof(rl_cuda_module_t)) {
        snprintf(s_why, sizeof s_why, "%.1000s is not this rlctl's CUDA module (%s %d, want %d)",
                 what, fn ? "ABI" : "no " RL_CUDA_MODULE_SYMBOL " symbol: ABI", m ? m->abi : -1,
                 RL_CUDA_MODULE_ABI);
        dlclose(dl);
        return NULL;
    }
    return m;
}

// The module named by RLCTL_CUDA_MODULE, and only it: a path that does not load is an error
// naming it, never a quiet fall back to the default module.
static void s_load_named(const char *path) {
    char what[1100];
    snprintf(what, sizeof what, "RLCTL_CUDA_MODULE=%.1000s", path);
    if (access(path, F_OK) != 0) {
        snprintf(s_why, sizeof s_why, "%s: no such file", what);
        return;
    }
    void *dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!dl) {
        const char *e = dlerror();
        snprintf(s_why, sizeof s_why, "%s cannot be loaded: %.400s", what,
                 e ? e : "dlopen failed");
        return;
    }
    s_mod = s_table(dl, what); // kept open until exit
}

// Opens the module named by RLCTL_CUDA_MODULE when it is set; else the one beside the running
// binary, else the one where the build put it (as rl_coll opens the MPI module).
static void s_load(void) {
    const char *named = getenv("RLCTL_CUDA_MODULE");
    if (named && named[0]) {
        s_load_named(named);
        return;
    }
    char exe[PATH_MAX], path[PATH_MAX + 64];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    const char *dirs[2] = {NULL, RL_CUDA_MODULE_DIR};
    if (n > 0) {
        exe[n] = '\0';
        char *slash = strrchr(exe, '/');
        if (slash) {
            *slash = '\0';
            dirs[0] = exe;
        }
    }
    char tried[1200] = "";
    void *dl = NULL;
    int found_file = 0;
    for (int i = 0; i < 2 && !dl; i++) {
        if (!dirs[i] || !dirs[i][0]) {
            continue;
        }
        snprintf(path, sizeof path, "%s/" RL_CUDA_MODULE_FILE, dirs[i]);
        if (access(path, F_OK) != 0) {
            continue;
        }
        found_file = 1;
        dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
        if (!dl) {
            const char *e = dlerror();
            size_t l = strlen(tried);
            snprintf(tried + l, sizeof tried - l, "%s%.500s", l ? "; " : "", e ? e : path);
        }
    }
    if (!dl) {
        if (!found_file) {
            snprintf(s_why, sizeof s_why,
                     "this rlctl was built without its CUDA module (" RL_CUDA_MODULE_FILE
                     " is not beside the binary: CMake found no CUDA toolkit, or "
                     "-DRLCTL_CUDA=OFF)");
        } else {
            snprintf(s_why, sizeof s_why,
                     "the CUDA module cannot be loaded (its CUDA libraries, cuBLASLt among them, "
                     "are missing here?): %s",
                     tried);
        }
        return;
    }
    s_mod = s_table(dl, RL_CUDA_MODULE_FILE); // kept open until exit
}

const rl_cuda_module_t *rl_device_cuda(char *err, size_t err_len) {
    pthread_once(&s_once, s_load);
    if (!s_mod) {
        rl_errf(err, err_len, RL_ENOTFOUND, "%s", s_why);
    }
    return s_mod;
}

// ---- queries in a process of their own (rl_device_isolate) ----------------------------------

static int s_isolated;

void rl_device_isolate(int on) {
    s_isolated = on;
}

typedef struct {
    int rc, access;
    rl_device_info_t info;
    char err[1536];
} s_answer_t;

typedef void (*s_query_fn)(const void *arg, s_answer_t *out);

// The answers so far, by query (kind 0: check of device a with min_free; 1: peer a -> b): a
// process asks each once (a probe costs a CUDA initialisation, a fraction of a second on a GPU).
typedef struct {
    int kind, a, b;
    size_t min_free;
    s_answer_t ans;
} s_cached_t;
static s_cached_t s_cache[32];
static int s_n_cached;
static pthread_mutex_t s_cache_mutex = PTHREAD_MUTEX_INITIALIZER;

static void s_probe(s_query_fn fn, const void *arg, s_answer_t *out);

// The answer to query (kind, a, b, min_free), from the cache or a probe (then kept).
static void s_in_child(s_query_fn fn, const void *arg, int kind, int a, int b, size_t min_free,
                       s_answer_t *out) {
    pthread_mutex_lock(&s_cache_mutex);
    for (int i = 0; i < s_n_cached; i++) {
        const s_cached_t *c = &s_cache[i];
        if (c->kind == kind && c->a == a && c->b == b && c->min_free == min_free) {
            *out = c->ans;
            pthread_mutex_unlock(&s_cache_mutex);
            return;
        }
    }
    s_probe(fn, arg, out);
    if (out->rc != RL_EIO && s_n_cached < (int)(sizeof s_cache / sizeof s_cache[0])) {
        s_cache[s_n_cached++] = (s_cached_t){kind, a, b, min_free, *out};
    }
    pthread_mutex_unlock(&s_cache_mutex);
}

// fn(arg) in a child process named rlctl-probe, its answer back through a pipe: the CUDA context
// its queries make ends with it. A child that cannot start or dies is an RL_EIO answer.
static void s_probe(s_query_fn fn, const void *arg, s_answer_t *out) {
    memset(out, 0, sizeof *out);
    char why[8];
    (void)rl_device_cuda(why, sizeof why); // loaded here (no context): the child need not dlopen
    int p[2];
    if (pipe(p) != 0) {
        out->rc = rl_errf(out->err, sizeof out->err, RL_EIO,
                          "cannot start the device probe's process: pipe: %s", strerror(errno));
        return;
    }
    fflush(NULL); // nothing buffered is written twice
    pid_t pid = fork();
    if (pid < 0) {
        close(p[0]);
        close(p[1]);
        out->rc = rl_errf(out->err, sizeof out->err, RL_EIO,
                          "cannot start the device probe's process: fork: %s", strerror(errno));
        return;
    }
    if (pid == 0) {
        close(p[0]);
        prctl(PR_SET_NAME, "rlctl-probe", 0, 0, 0);
        s_answer_t a;
        memset(&a, 0, sizeof a);
        fn(arg, &a);
        const char *b = (const char *)&a;
        size_t done = 0;
        while (done < sizeof a) {
            ssize_t w = write(p[1], b + done, sizeof a - done);
            if (w <= 0 && errno != EINTR) {
                _exit(1);
            }
            done += w > 0 ? (size_t)w : 0;
        }
        _exit(0);
    }
    close(p[1]);
    size_t got = 0;
    while (got < sizeof *out) {
        ssize_t r = read(p[0], (char *)out + got, sizeof *out - got);
        if (r < 0 && errno == EINTR) {
            continue;
        }
        if (r <= 0) {
            break;
        }
        got += (size_t)r;
    }
    close(p[0]);
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
    }
    if (got != sizeof *out) {
        memset(out, 0, sizeof *out);
        out->rc = rl_errf(out->err, sizeof out->err, RL_EIO,
                          "the device probe's process ended without an answer (%s %d)",
                          WIFSIGNALED(st) ? "signal" : "status",
                          WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
    }
}

int rl_device_comm_id(unsigned char *id, char *err, size_t err_len) {
    _Static_assert(RL_DEVICE_COMM_ID == RL_CUDA_COMM_ID, "the device's comm id is NCCL's");
    char why[1536];
    const rl_cuda_module_t *m = rl_device_cuda(why, sizeof why);
    if (!m) {
        return rl_errf(err, err_len, RL_ENOTFOUND, "%s", why);
    }
    if (m->comm_id(id, why, sizeof why) != 0) {
        return rl_errf(err, err_len, RL_ENOTFOUND, "%s", why);
    }
    return 0;
}

static int s_check(const rl_device_t *d, size_t min_free, rl_device_info_t *info, char *err,
                   size_t err_len);

typedef struct {
    const rl_device_t *d;
    size_t min_free;
} s_check_arg_t;

static void s_check_query(const void *arg, s_answer_t *out) {
    const s_check_arg_t *a = arg;
    out->rc = s_check(a->d, a->min_free, &out->info, out->err, sizeof out->err);
}

int rl_device_check(const rl_device_t *d, size_t min_free, rl_device_info_t *info, char *err,
                    size_t err_len) {
    if (!s_isolated || !d->cuda) {
        return s_check(d, min_free, info, err, err_len);
    }
    s_check_arg_t a = {d, min_free};
    s_answer_t ans;
    s_in_child(s_check_query, &a, 0, d->index, 0, min_free, &ans);
    if (info) {
        *info = ans.info;
    }
    return ans.rc ? rl_errf(err, err_len, ans.rc, "%s", ans.err) : 0;
}

static int s_check(const rl_device_t *d, size_t min_free, rl_device_info_t *info, char *err,
                   size_t err_len) {
    rl_device_info_t local;
    rl_device_info_t *o = info ? info : &local;
    memset(o, 0, sizeof *o);
    if (!d->cuda) {
        snprintf(o->name, sizeof o->name, "cpu");
        return 0;
    }
    char why[1536];
    const rl_cuda_module_t *m = rl_device_cuda(why, sizeof why);
    if (!m) {
        return rl_errf(err, err_len, RL_ENOTFOUND, "cuda:%d: %s", d->index, why);
    }
    char msg[512] = "";
    if (m->probe(&o->n_devices, &o->driver_version, &o->runtime_version, msg, sizeof msg) != 0) {
        return rl_errf(err, err_len, RL_ENOTFOUND, "cuda:%d: %s", d->index, msg);
    }
    if (d->index >= o->n_devices) {
        if (o->n_devices == 1) {
            return rl_errf(err, err_len, RL_ENOTFOUND,
                           "cuda:%d: there is 1 visible GPU (cuda:0)", d->index);
        }
        return rl_errf(err, err_len, RL_ENOTFOUND,
                       "cuda:%d: there are %d visible GPUs (cuda:0 .. cuda:%d)", d->index,
                       o->n_devices, o->n_devices - 1);
    }
    rl_cuda_device_info_t di;
    if (m->device_info(d->index, &di, msg, sizeof msg) != 0) {
        return rl_errf(err, err_len, RL_ENOTFOUND, "cuda:%d: %s", d->index, msg);
    }
    snprintf(o->name, sizeof o->name, "%s", di.name);
    o->mem_total = di.mem_total;
    o->mem_free = di.mem_free;
    o->cc_major = di.cc_major;
    o->cc_minor = di.cc_minor;
    if (di.cc_major < 8) {
        return rl_errf(err, err_len, RL_EUNSUPPORTED,
                       "cuda:%d (%s) has compute capability %d.%d; rlctl's CUDA module needs 8.0 "
                       "or newer (A100, H100, H200: bf16 tensor cores)",
                       d->index, di.name, di.cc_major, di.cc_minor);
    }
    if (min_free > 0 && di.mem_free < min_free) {
        return rl_errf(err, err_len, RL_ENOMEM,
                       "cuda:%d (%s) has %.2f GiB free of %.2f GiB; this needs %.2f GiB",
                       d->index, di.name, (double)di.mem_free / (1 << 30),
                       (double)di.mem_total / (1 << 30), (double)min_free / (1 << 30));
    }
    return 0;
}

int rl_device_open(const char *text, rl_device_t *out, char *err, size_t err_len) {
    int rc = rl_device_parse(text, out, err, err_len);
    return rc ? rc : rl_device_check(out, 0, NULL, err, err_len);
}

static int s_peer(int a, int b, int *access, char *err, size_t err_len);

static void s_peer_query(const void *arg, s_answer_t *out) {
    const int *ab = arg;
    out->rc = s_peer(ab[0], ab[1], &out->access, out->err, sizeof out->err);
}

int rl_device_peer(int a, int b, int *access, char *err, size_t err_len) {
    *access = a == b;
    if (a == b || !s_isolated) {
        return a == b ? 0 : s_peer(a, b, access, err, err_len);
    }
    const int ab[2] = {a, b};
    s_answer_t ans;
    s_in_child(s_peer_query, ab, 1, a, b, 0, &ans);
    *access = ans.access;
    return ans.rc ? rl_errf(err, err_len, ans.rc, "%s", ans.err) : 0;
}

static int s_peer(int a, int b, int *access, char *err, size_t err_len) {
    *access = 0;
    const rl_cuda_module_t *cu = rl_device_cuda(err, err_len);
    if (!cu) {
        return RL_ENOTFOUND;
    }
    char msg[512];
    int rank = 0;
    if (cu->peer(a, b, access, &rank, msg, sizeof msg) != 0) {
        *access = 0;
        return rl_errf(err, err_len, RL_EIO, "cuda:%d and cuda:%d: %s", a, b, msg);
    }
    return 0;
}
