// rl_optim — AdamW, clipping, schedules and the optimizer state file. See rl_optim.h for the
// formulas; this file says why where the code is not obvious.
#include "rl_optim.h"

#include "rl_crc32c.h"
#include "rl_err.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "rl_optim writes its state file in host order and supports little-endian hosts only"
#endif

struct rl_optim {
    rl_optim_hparams_t hp;
    size_t n;
    int64_t step;
    float *m;       // (n) first moment
    float *v;       // (n) second moment; m and v share one allocation, or
    void *map;      // the state file's read-only mapping they point into (rl_optim_load_shared)
    size_t map_len; // its bytes
};

// m and v's memory given back: the allocation freed, or the file's mapping unmapped.
static void s_drop_state(rl_optim_t *self) {
    if (self->map) {
        munmap(self->map, self->map_len);
        self->map = NULL;
        self->map_len = 0;
    } else {
        free(self->m);
    }
    self->m = self->v = NULL;
}

// ---- AdamW ------------------------------------------------------------------------------------

rl_optim_t *rl_optim_new(size_t n, const rl_optim_hparams_t *hp) {
    rl_optim_t *self = calloc(1, sizeof(*self));
    if (!self) {
        return NULL;
    }
    self->hp = *hp;
    self->n = n;
    self->m = calloc(n ? 2 * n : 1, sizeof(float));
    if (!self->m) {
        free(self);
        return NULL;
    }
    self->v = self->m + n;
    return self;
}

void rl_optim_destroy(rl_optim_t **self_p) {
    if (!self_p || !*self_p) {
        return;
    }
    s_drop_state(*self_p);
    free(*self_p);
    *self_p = NULL;
}

// One AdamW update of the state slice [off, off + n) from params/grads at the step's scalars.
static void s_update(rl_optim_t *self, float *params, const float *grads, size_t n, size_t off,
                     double lr) {
    const double b1 = self->hp.beta1, b2 = self->hp.beta2;
    const double t = (double)self->step;
    // torch computes the bias corrections in Python floats (double) and folds 1/bc1 into the
    // step size and sqrt(bc2) into the denominator; we do the same so rounding matches.
    const double bc1 = 1.0 - pow(b1, t);
    const double bc2_sqrt = sqrt(1.0 - pow(b2, t));
    const float decay = (float)(1.0 - lr * self->hp.weight_decay);
    const float step_size = (float)(lr / bc1);
    const float inv_bc2_sqrt = (float)(1.0 / bc2_sqrt);
    const float omb1 = (float)(1.0 - b1), omb2 = (float)(1.0 - b2), fb2 = (float)b2;
    const float eps = (float)self->hp.eps;
    float *m = self->m + off, *v = self->v + off;
    for (size_t i = 0; i < n; i++) {
        float g = grads[i];
        float p = params[i] * decay;
        m[i] += omb1 * (g - m[i]);
        v[i] = fb2 * v[i] + omb2 * g * g;
        float denom = sqrtf(v[i]) * inv_bc2_sqrt + eps;
        params[i] = p - step_size * m[i] / denom;
    }
}

void rl_optim_step(rl_optim_t *self, float *params, const float *grads, double lr) {
    self->step++;
    s_update(self, params, grads, self->n, 0, lr);
}

int rl_optim_step_parts(rl_optim_t *self, const rl_optim_part_t *parts, int k, double lr) {
    size_t total = 0;
    for (int i = 0; i < k; i++) {
        total += parts[i].n;
    }
    if (total != self->n) {
        return RL_EINVAL;
    }
    self->step++;
    size_t off = 0;
    for (int i = 0; i < k; i++) {
        s_update(self, parts[i].params, parts[i].grads, parts[i].n, off, lr);
        off += parts[i].n;
    }
    return 0;
}

int64_t rl_optim_steps(const rl_optim_t *self) { return self->step; }
void rl_optim_set_steps(rl_optim_t *self, int64_t steps) {
    self->step = steps;
}
size_t rl_optim_size(const rl_optim_t *self) { return self->n; }
float *rl_optim_m(rl_optim_t *self) { return self->m; }

void rl_optim_release(rl_optim_t *self) {
    // calloc of a block this large maps fresh zero pages (glibc: mmap past its threshold); the
    // old block's pages go back with free
    float *m = calloc(self->n ? 2 * self->n : 1, sizeof(float));
    if (m) {
        s_drop_state(self);
        self->m = m;
        self->v = m + self->n;
    }
}
float *rl_optim_v(rl_optim_t *self) { return self->v; }

// ---- state file ---------------------------------------------------------------------------------

static const double S_PI = 3.14159265358979323846;

static const char s_magic[8] = {'R', 'L', 'O', 'P', 'T', 'I', 'M', '\0'};

// The header of self's state whose data's checksum is crc.
static void s_header(unsigned char hdr[RL_OPTIM_HEADER_SIZE], const rl_optim_t *self,
                     uint32_t crc) {
    memset(hdr, 0, RL_OPTIM_HEADER_SIZE);
    uint32_t version = RL_OPTIM_FORMAT_VERSION, hsize = RL_OPTIM_HEADER_SIZE;
    uint64_t n = self->n;
    double hp[4] = {self->hp.beta1, self->hp.beta2, self->hp.eps, self->hp.weight_decay};
    memcpy(hdr, s_magic, 8);
    memcpy(hdr + 8, &version, 4);
    memcpy(hdr + 12, &hsize, 4);
    memcpy(hdr + 16, &n, 8);
    memcpy(hdr + 24, &self->step, 8);
    memcpy(hdr + 32, hp, 32);
    memcpy(hdr + 64, &crc, 4);
}

int rl_optim_save(const rl_optim_t *self, const char *path, char *err, size_t err_len) {
    unsigned char hdr[RL_OPTIM_HEADER_SIZE];
    s_header(hdr, self, rl_crc32c(0, self->m, 2 * self->n * sizeof(float)));

    size_t plen = strlen(path);
    char *tmp = malloc(plen + 5);
    if (!tmp) {
        return rl_errf(err, err_len, RL_ENOMEM, "out of memory");
    }
    memcpy(tmp, path, plen);
    memcpy(tmp + plen, ".tmp", 5);
    FILE *f = fopen(tmp, "wb");
    if (!f) {
        int e = errno;
        rl_errf(err, err_len, e, "%s: cannot create: %s", tmp, strerror(e));
        free(tmp);
        return e;
    }
    int ok = fwrite(hdr, 1, sizeof(hdr), f) == sizeof(hdr) &&
             fwrite(self->m, sizeof(float), 2 * self->n, f) == 2 * self->n;
    ok = (fclose(f) == 0) && ok;
    if (!ok || rename(tmp, path) != 0) {
        int e = errno ? errno : EIO;
        remove(tmp);
        rl_errf(err, err_len, RL_EIO, "%s: write failed: %s", path, strerror(e));
        free(tmp);
        return RL_EIO;
    }
    free(tmp);
    return 0;
}

struct rl_optim_writer {
    char *path, *tmp; // the file, and path.tmp being written
    int fd;
    void *map; // tmp's shared mapping: header, then m and v
    size_t len, n;
};

void rl_optim_write_abort(rl_optim_writer_t **w_p) {
    rl_optim_writer_t *w = w_p ? *w_p : NULL;
    if (!w) {
        return;
    }
    if (w->map && w->map != MAP_FAILED) {
        munmap(w->map, w->len);
    }
    if (w->fd >= 0) {
        close(w->fd);
        unlink(w->tmp);
    }
    free(w->path);
    free(w->tmp);
    free(w);
    *w_p = NULL;
}

int rl_optim_write_begin(const char *path, size_t n, rl_optim_writer_t **out, float **m, float **v,
                         char *err, size_t err_len) {
    *out = NULL;
    rl_optim_writer_t *w = calloc(1, sizeof *w);
    size_t plen = strlen(path);
    if (!w || !(w->path = strdup(path)) || !(w->tmp = malloc(plen + 5))) {
        if (w) {
            free(w->path);
        }
        free(w);
        return rl_errf(err, err_len, RL_ENOMEM, "out of memory");
    }
    memcpy(w->tmp, path, plen);
    memcpy(w->tmp + plen, ".tmp", 5);
    w->n = n;
    w->len = (size_t)RL_OPTIM_HEADER_SIZE + 2 * n * sizeof(float);
    w->fd = open(w->tmp, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    int e = w->fd < 0 ? errno : 0;
    // the blocks reserved now: a full disk is this error, not a fault while the pages are
    // written
    if (!e) {
        e = posix_fallocate(w->fd, 0, (off_t)w->len);
    }
    if (!e &&
        (w->map = mmap(NULL, w->len, PROT_READ | PROT_WRITE, MAP_SHARED, w->fd, 0)) == MAP_FAILED) {
        e = errno;
    }
    if (e) {
        rl_errf(err, err_len, e == ENOSPC ? RL_EIO : e, "%s: cannot write %zu bytes: %s", w->tmp,
                w->len, strerror(e));
        int rc = e == ENOSPC ? RL_EIO : e;
        rl_optim_write_abort(&w);
        return rc;
    }
    *m = (float *)(void *)((char *)w->map + RL_OPTIM_HEADER_SIZE);
    *v = *m + n;
    *out = w;
    return 0;
}

int rl_optim_write_end(rl_optim_writer_t **w_p, const rl_optim_t *like, char *err, size_t err_len) {
    rl_optim_writer_t *w = *w_p;
    if (like->n != w->n) {
        size_t n = w->n;
        rl_optim_write_abort(w_p);
        return rl_errf(err, err_len, RL_EINVAL, "optimizer state of %zu parameters, not %zu", n,
                       like->n);
    }
    const char *data = (const char *)w->map + RL_OPTIM_HEADER_SIZE;
    s_header((unsigned char *)w->map, like, rl_crc32c(0, data, 2 * w->n * sizeof(float)));
    errno = 0;
    int ok = munmap(w->map, w->len) == 0;
    w->map = NULL;
    ok = close(w->fd) == 0 && ok;
    w->fd = -1;
    int e = errno ? errno : EIO;
    if (!ok || rename(w->tmp, w->path) != 0) {
        unlink(w->tmp);
        rl_errf(err, err_len, RL_EIO, "%s: write failed: %s", w->path, strerror(e));
        rl_optim_write_abort(w_p);
        return RL_EIO;
    }
    rl_optim_write_abort(w_p); // frees it (nothing left to remove)
    return 0;
}

// Reads and checks the header of an optimizer state file open as f (positioned after it on
// return): its parameter count must be n_want; *step and *crc from it. Returns 0 or the error
// rl_optim_load documents, err set.
static int s_read_header(FILE *f, const char *path, size_t n_want, int64_t *step, uint32_t *crc,
                         char *err, size_t err_len) {
    unsigned char hdr[RL_OPTIM_HEADER_SIZE];
    size_t got = fread(hdr, 1, sizeof(hdr), f);
    if (got < 16 || memcmp(hdr, s_magic, 8) != 0) {
        return rl_errf(err, err_len, got < 8 ? RL_EIO : RL_EPROTO,
                       "%s: not an rlctl optimizer state file (bad magic%s)", path,
                       got < 8 ? ", file too short" : "");
    }
    uint32_t version, hsize;
    memcpy(&version, hdr + 8, 4);
    memcpy(&hsize, hdr + 12, 4);
    if (version != RL_OPTIM_FORMAT_VERSION) {
        return rl_errf(err, err_len, RL_EVERSION,
                       "%s: optimizer state format version %u is not supported (this rlctl "
                       "reads version %u)",
                       path, version, RL_OPTIM_FORMAT_VERSION);
    }
    if (hsize != RL_OPTIM_HEADER_SIZE || got != sizeof(hdr)) {
        return rl_errf(err, err_len, got != sizeof(hdr) ? RL_EIO : RL_EPROTO,
                       "%s: optimizer state header is %s", path,
                       got != sizeof(hdr) ? "truncated" : "malformed (header size)");
    }
    uint64_t n;
    memcpy(&n, hdr + 16, 8);
    memcpy(step, hdr + 24, 8);
    memcpy(crc, hdr + 64, 4);
    if (n != n_want) {
        return rl_errf(err, err_len, RL_EINVAL,
                       "%s: optimizer state holds %llu parameters, the model trains %zu "
                       "(a checkpoint of another model or tuning mode?)",
                       path, (unsigned long long)n, n_want);
    }
    if (*step < 0) {
        return rl_errf(err, err_len, RL_EPROTO, "%s: negative step count %lld", path,
                       (long long)*step);
    }
    return 0;
}

// The data section's size check: `have` floats found where `want` belong (trailing: more).
static int s_size_error(const char *path, size_t want, size_t have, int trailing, char *err,
                        size_t err_len) {
    if (trailing) {
        return rl_errf(err, err_len, RL_EIO, "%s: trailing bytes after the optimizer state", path);
    }
    return rl_errf(err, err_len, RL_EIO,
                   "%s: optimizer state truncated: expected %zu bytes, found %zu", path,
                   (size_t)RL_OPTIM_HEADER_SIZE + want * sizeof(float),
                   (size_t)RL_OPTIM_HEADER_SIZE + have * sizeof(float));
}

// Opens path (*f; NULL when it cannot be opened) and reads its header (s_read_header).
static int s_open(const char *path, size_t n_want, FILE **f, int64_t *step, uint32_t *crc,
                  char *err, size_t err_len) {
    *f = fopen(path, "rb");
    if (!*f) {
        int e = errno;
        return rl_errf(err, err_len, e, "%s: cannot open optimizer state: %s", path, strerror(e));
    }
    return s_read_header(*f, path, n_want, step, crc, err, err_len);
}

int rl_optim_load(rl_optim_t *self, const char *path, char *err, size_t err_len) {
    float *buf = NULL;
    FILE *f;
    int64_t step = 0;
    uint32_t crc = 0;
    const size_t n = self->n, want = 2 * n;
    int rc = s_open(path, n, &f, &step, &crc, err, err_len);
    if (!f) {
        return rc;
    }
    if (!rc && !(buf = malloc(n ? want * sizeof(float) : 1))) {
        rc = rl_errf(err, err_len, RL_ENOMEM, "out of memory");
    }
    size_t have = rc ? 0 : fread(buf, sizeof(float), want, f);
    if (!rc && (have != want || fgetc(f) != EOF)) {
        rc = s_size_error(path, want, have, have == want, err, err_len);
    }
    if (!rc && rl_crc32c(0, buf, want * sizeof(float)) != crc) {
        rc = rl_errf(err, err_len, RL_EPROTO,
                     "%s: optimizer state checksum mismatch (the file is corrupt)", path);
    }
    if (!rc) { // the read block becomes the state (no second copy: 64 GB at Llama-3-8B)
        s_drop_state(self);
        self->m = buf;
        self->v = buf + n;
        buf = NULL;
        self->step = step;
    }
    free(buf);
    fclose(f);
    return rc;
}

int rl_optim_load_shared(rl_optim_t *self, const char *path, char *err, size_t err_len) {
    FILE *f;
    int64_t step = 0;
    uint32_t crc = 0;
    const size_t n = self->n, want = 2 * n;
    const size_t len = (size_t)RL_OPTIM_HEADER_SIZE + want * sizeof(float);
    int rc = s_open(path, n, &f, &step, &crc, err, err_len);
    if (!f) {
        return rc;
    }
    struct stat st;
    if (!rc && fstat(fileno(f), &st) != 0) {
        rc = rl_errf(err, err_len, RL_EIO, "%s: %s", path, strerror(errno));
    }
    if (!rc && (size_t)st.st_size != len) {
        size_t have = (size_t)st.st_size > len
                          ? want
                          : ((size_t)st.st_size - RL_OPTIM_HEADER_SIZE) / sizeof(float);
        rc = s_size_error(path, want, have, (size_t)st.st_size > len, err, err_len);
    }
    void *map = MAP_FAILED;
    if (!rc && (map = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fileno(f), 0)) == MAP_FAILED) {
        rc = rl_errf(err, err_len, RL_ENOMEM, "%s: cannot map %zu bytes: %s", path, len,
                     strerror(errno));
    }
    const float *data = rc ? NULL : (const float *)((const char *)map + RL_OPTIM_HEADER_SIZE);
    if (!rc && rl_crc32c(0, data, want * sizeof(float)) != crc) {
        rc = rl_errf(err, err_len, RL_EPROTO,
                     "%s: optimizer state checksum mismatch (the file is corrupt)", path);
    }
    fclose(f); // the mapping stays
    if (rc) {
        if (map != MAP_FAILED) {
            munmap(map, len);
        }
        return rc;
    }
    s_drop_state(self);
    self->map = map;
    self->map_len = len;
    self->m = (float *)(uintptr_t)data; // read-only pages: writing them faults
    self->v = self->m + n;
    self->step = step;
    return 0;
}

// ---- gradient clipping ----------------------------------------------------------------------

double rl_optim_clip_grad_norm(float *grads, size_t n, double max_norm) {
    rl_optim_part_t part = {NULL, grads, n};
    return rl_optim_clip_grad_norm_parts(&part, 1, max_norm);
}

double rl_optim_clip_grad_norm_parts(const rl_optim_part_t *parts, int k, double max_norm) {
    double ss = 0.0;
    for (int j = 0; j < k; j++) {
        const float *g = parts[j].grads;
        for (size_t i = 0; i < parts[j].n; i++) {
            ss += (double)g[i] * (double)g[i];
        }
    }
    double norm = sqrt(ss);
    if (max_norm > 0.0 && isfinite(norm)) {
        double coef = max_norm / (norm + 1e-6);
        if (coef < 1.0) {
            float c = (float)coef;
            for (int j = 0; j < k; j++) {
                float *g = parts[j].grads;
                for (size_t i = 0; i < parts[j].n; i++) {
                    g[i] *= c;
                }
            }
        }
    }
    return norm;
}

// ---- schedules ----------------------------------------------------------------------------------

int64_t rl_sched_warmup(int64_t warmup_steps, double warmup_ratio, int64_t total_steps) {
    if (warmup_steps > 0) {
        return warmup_steps;
    }
    return (int64_t)ceil(warmup_ratio * (double)total_steps);
}

double rl_sched_lr(const rl_sched_t *s, int64_t step) {
    const int64_t W = s->warmup_steps, N = s->total_steps;
    if (step < W) {
        return s->lr * (double)step / (double)(W > 1 ? W : 1);
    }
    const double r = s->min_lr_ratio;
    const double span = (double)(N - W > 1 ? N - W : 1);
    double f = 1.0;
    switch (s->kind) {
    case RL_SCHED_LINEAR: {
        double lin = (double)(N - step) / span;
        f = r + (1.0 - r) * (lin > 0.0 ? lin : 0.0);
        break;
    }
    case RL_SCHED_COSINE: {
        double p = (double)(step - W) / span;
        double c = 0.5 * (1.0 + cos(S_PI * p));
        f = r + (1.0 - r) * (c > 0.0 ? c : 0.0);
        break;
    }
    default:
        f = 1.0;
        break;
    }
    return s->lr * f;
}

rl_sched_t rl_sched_from_recipe(const rl_recipe_t *r) {
    rl_sched_t sc;
    int64_t total = r->train.steps;
    sc.kind = r->optim.scheduler == RL_RECIPE_SCHED_LINEAR   ? RL_SCHED_LINEAR
              : r->optim.scheduler == RL_RECIPE_SCHED_COSINE ? RL_SCHED_COSINE
                                                             : RL_SCHED_CONSTANT;
    sc.lr = r->optim.lr;
    sc.total_steps = total;
    sc.warmup_steps = rl_sched_warmup(r->optim.warmup_steps, r->optim.warmup_ratio, total);
    sc.min_lr_ratio = r->optim.min_lr_ratio;
    return sc;
}
