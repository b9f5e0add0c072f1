// cuemu_nccl — NCCL's few entries the CUDA module opens (model/cuda/rl_cuda_nccl.cu), emulated
// on the CPU between processes of one machine, for the emulated module's tests
// (libnccl_cuemu.so; tests point RLCTL_NCCL_LIBRARY at it). Devices are cuemu's (host memory),
// and cuemu runs every queued call at once, so a collective here runs when it is called.
//
// A communicator is a folder of files in /dev/shm named by the unique id: a control page (a
// sense-reversing barrier) and one data file per rank. A collective: every rank writes its input
// to its file, waits at the barrier, reads what it needs from every rank's file, sums in rank
// order 0, 1, ... (so every rank gets the same bits, as NCCL's do), and waits again before
// anyone writes anew. The names are unlinked once every rank has opened everything: nothing
// stays behind a finished or killed run. A peer that never comes (it died) fails the collective
// after CUEMU_NCCL_TIMEOUT seconds (default 120) with ncclSystemError, where NCCL would hang.
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <vector>

namespace {

enum { SUCCESS = 0, SYSTEM_ERROR = 2, INVALID_ARGUMENT = 4, INVALID_USAGE = 5 };
enum { SUM = 0, FLOAT32 = 7, FLOAT64 = 8 };
const char MAGIC[] = "cuemu-nccl:";

struct Id {
    char internal[128];
};

struct Ctl {
    std::atomic<uint32_t> arrived;
    std::atomic<uint32_t> sense;
};

struct Comm {
    int nranks, rank;
    uint32_t sense;
    Ctl *ctl;
    std::vector<int> fds; // every rank's data file
};

double timeout_s() {
    const char *e = getenv("CUEMU_NCCL_TIMEOUT");
    double t = e ? atof(e) : 0.0;
    return t > 0 ? t : 120.0;
}

double now_s() {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int barrier(Comm *c) {
    c->sense ^= 1u;
    if (c->ctl->arrived.fetch_add(1) + 1 == (uint32_t)c->nranks) {
        c->ctl->arrived.store(0);
        c->ctl->sense.store(c->sense);
        return SUCCESS;
    }
    double until = now_s() + timeout_s();
    struct timespec nap = {0, 20000};
    while (c->ctl->sense.load() != c->sense) {
        if (now_s() > until) {
            fprintf(stderr, "cuemu nccl: rank %d of %d waited %.0f s for its peers\n", c->rank,
                    c->nranks, timeout_s());
            return SYSTEM_ERROR;
        }
        nanosleep(&nap, NULL);
    }
    return SUCCESS;
}

int full_write(int fd, const void *p, size_t bytes) {
    const char *s = (const char *)p;
    for (size_t at = 0; at < bytes;) {
        ssize_t w = pwrite(fd, s + at, bytes - at, (off_t)at);
        if (w <= 0 && errno != EINTR) {
            return SYSTEM_ERROR;
        }
        at += w > 0 ? (size_t)w : 0;
    }
    return SUCCESS;
}

int full_read(int fd, void *p, size_t bytes, size_t off) {
    char *d = (char *)p;
    for (size_t at = 0; at < bytes;) {
        ssize_t r = pread(fd, d + at, bytes - at, (off_t)(off + at));
        if (r <= 0 && errno != EINTR) {
            return SYSTEM_ERROR;
        }
        at += r > 0 ? (size_t)r : 0;
    }
    return SUCCESS;
}

size_t type_size(int t) {
    return t == FLOAT32 ? 4 : t == FLOAT64 ? 8 : 0;
}

// out (count of type t) = the sum over the ranks of the block at byte `off` of each rank's file.
int sum_blocks(Comm *c, void *out, size_t count, int t, size_t off) {
    size_t bytes = count * type_size(t);
    std::vector<char> in(bytes ? bytes : 1), acc(bytes ? bytes : 1);
    for (int r = 0; r < c->nranks; r++) {
        if (full_read(c->fds[(size_t)r], r ? in.data() : acc.data(), bytes, off)) {
            return SYSTEM_ERROR;
        }
        for (size_t i = 0; r && i < count; i++) {
            if (t == FLOAT32) {
                ((float *)acc.data())[i] += ((const float *)in.data())[i];
            } else {
                ((double *)acc.data())[i] += ((const double *)in.data())[i];
            }
        }
    }
    memcpy(out, acc.data(), bytes);
    return SUCCESS;
}

} // namespace

#define CUEMU_NCCL_API extern "C" __attribute__((visibility("default")))

CUEMU_NCCL_API const char *ncclGetErrorString(int r) {
    switch (r) {
    case SUCCESS: return "no error";
    case SYSTEM_ERROR: return "unhandled system error (cuemu: a peer did not come, or a file)";
    case INVALID_ARGUMENT: return "invalid argument";
    case INVALID_USAGE: return "invalid usage";
    default: return "unknown result code";
    }
}

CUEMU_NCCL_API int ncclGetUniqueId(Id *id) {
    if (!id) {
        return INVALID_ARGUMENT;
    }
    static std::atomic<unsigned> counter{0};
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    memset(id, 0, sizeof *id);
    snprintf(id->internal, sizeof id->internal, "%s/dev/shm/cuemu-nccl-%ld-%u-%lx", MAGIC,
             (long)getpid(), counter.fetch_add(1), (unsigned long)ts.tv_nsec);
    return SUCCESS;
}

CUEMU_NCCL_API int ncclCommInitRank(Comm **out, int nranks, Id id, int rank) {
    if (!out || nranks < 1 || rank < 0 || rank >= nranks ||
        strncmp(id.internal, MAGIC, sizeof MAGIC - 1) != 0 ||
        !memchr(id.internal, 0, sizeof id.internal)) {
        return INVALID_ARGUMENT;
    }
    *out = NULL;
    const char *base = id.internal + sizeof MAGIC - 1;
    char path[160];
    snprintf(path, sizeof path, "%s.ctl", base);
    int fd = open(path, O_RDWR | O_CREAT, 0600);
    if (fd < 0 || ftruncate(fd, sizeof(Ctl)) != 0) { // a new file's zeros: a fresh barrier
        if (fd >= 0) {
            close(fd);
        }
        return SYSTEM_ERROR;
    }
    void *p = mmap(NULL, sizeof(Ctl), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (p == MAP_FAILED) {
        return SYSTEM_ERROR;
    }
    Comm *c = new Comm{nranks, rank, 0, (Ctl *)p, std::vector<int>((size_t)nranks, -1)};
    snprintf(path, sizeof path, "%s.%d", base, rank);
    c->fds[(size_t)rank] = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
    int rc = c->fds[(size_t)rank] < 0 ? SYSTEM_ERROR : barrier(c); // every file exists
    for (int r = 0; !rc && r < nranks; r++) {
        snprintf(path, sizeof path, "%s.%d", base, r);
        if (r != rank && (c->fds[(size_t)r] = open(path, O_RDWR)) < 0) {
            rc = SYSTEM_ERROR;
        }
    }
    rc = rc ? rc : barrier(c); // every rank opened everything: the names can go
    snprintf(path, sizeof path, "%s.%d", base, rank);
    unlink(path);
    if (rank == 0) {
        snprintf(path, sizeof path, "%s.ctl", base);
        unlink(path);
    }
    if (rc) {
        for (int f : c->fds) {
            if (f >= 0) {
                close(f);
            }
        }
        munmap(c->ctl, sizeof(Ctl));
        delete c;
        return rc;
    }
    *out = c;
    return SUCCESS;
}

CUEMU_NCCL_API int ncclCommDestroy(Comm *c) {
    if (!c) {
        return INVALID_ARGUMENT;
    }
    for (int f : c->fds) {
        if (f >= 0) {
            close(f);
        }
    }
    munmap(c->ctl, sizeof(Ctl));
    delete c;
    return SUCCESS;
}

CUEMU_NCCL_API int ncclAllReduce(const void *send, void *recv, size_t count, int type, int op,
                                 Comm *c, void *stream) {
    (void)stream;
    if (!c || op != SUM || !type_size(type)) {
        return INVALID_ARGUMENT;
    }
    int rc = full_write(c->fds[(size_t)c->rank], send, count * type_size(type));
    rc = rc ? rc : barrier(c);
    rc = rc ? rc : sum_blocks(c, recv, count, type, 0);
    return rc ? rc : barrier(c);
}

CUEMU_NCCL_API int ncclReduceScatter(const void *send, void *recv, size_t count, int type, int op,
                                     Comm *c, void *stream) {
    (void)stream;
    if (!c || op != SUM || !type_size(type)) {
        return INVALID_ARGUMENT;
    }
    size_t bytes = count * type_size(type);
    int rc = full_write(c->fds[(size_t)c->rank], send, bytes * (size_t)c->nranks);
    rc = rc ? rc : barrier(c);
    rc = rc ? rc : sum_blocks(c, recv, count, type, bytes * (size_t)c->rank);
    return rc ? rc : barrier(c);
}

CUEMU_NCCL_API int ncclAllGather(const void *send, void *recv, size_t count, int type, Comm *c,
                                 void *stream) {
    (void)stream;
    if (!c || !type_size(type)) {
        return INVALID_ARGUMENT;
    }
    size_t bytes = count * type_size(type);
    int rc = full_write(c->fds[(size_t)c->rank], send, bytes);
    rc = rc ? rc : barrier(c);
    for (int r = 0; !rc && r < c->nranks; r++) {
        rc = full_read(c->fds[(size_t)r], (char *)recv + bytes * (size_t)r, bytes, 0);
    }
    return rc ? rc : barrier(c);
}
