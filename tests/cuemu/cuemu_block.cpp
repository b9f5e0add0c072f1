// cuemu_block — how cuemu runs a kernel (see cuemu_device.h): the blocks one after another on
// the launching host thread, and within a block every CUDA thread as a fiber (cuemu_fiber.h)
// that runs until it exits or waits: at __syncthreads, or at a warp operation (shuffle, ballot,
// __syncwarp). The warps of a block run one after another, each as far as it can: its lanes run
// until they wait, the warp operations whose lanes have all arrived complete (each lane gets its
// source lane's value) and the lanes run on, until all of them wait at the barrier or exited;
// then the next warp. When every warp is there, the barrier opens. So one warp gets as far ahead
// of the others as a GPU may let it, and a barrier the kernel misses shows whichever way it was
// needed. Anything else is a bug of the kernel that a GPU would hang on or answer with undefined
// values; cuemu reports it (kernel, block, thread, what each waits at) and aborts:
//   - a __syncthreads that not every thread of the block reaches (some exited, or wait at a
//     warp operation that cannot complete);
//   - a warp operation whose mask names a lane that exited, waits elsewhere, does not exist or
//     has another mask; a shuffle reading a lane outside the mask.
// CUEMU_ORDER=forward (default) | reverse | random[:seed] sets the order of the warps, of the
// lanes within a warp and of the blocks: a kernel that misses a barrier reads what the order
// left there, so the same test under another order fails. Shared memory is poisoned (0xff: NaN)
// before each block; the dynamic part ends at a guard page. A fault during a kernel (a guard
// page: past a buffer's end, or a stack overflow) names the kernel, block and thread; after each
// kernel the canaries around every buffer are checked (cuemu_runtime.cpp). Not the runtime's
// memory or streams (cuemu_runtime.cpp).
#include "cuemu_fiber.h"
#include "cuemu_internal.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <mutex>
#include <vector>

namespace cuemu {
uint3 thread_idx, block_idx;
dim3 block_dim, grid_dim;
} // namespace cuemu

// The section of static __shared__ variables (cuemu_device.h); the linker defines its bounds.
extern "C" char __start_cuemu_shared[] __attribute__((weak, visibility("hidden")));
extern "C" char __stop_cuemu_shared[] __attribute__((weak, visibility("hidden")));

namespace {

using namespace cuemu;

const size_t S_STACK = 256 * 1024; // bytes of stack per CUDA thread

enum state_t { READY, AT_BARRIER, AT_WARP, DONE };

struct thread_t {
    fiber_t fiber;
    int stack; // index in s_stacks, -1 before it first runs and after it exits
    state_t state;
    uint3 idx;
    // the warp operation it waits at
    warp_op_t op;
    unsigned mask;
    int arg, width;
    uint64_t value, result;
};

enum order_t { FORWARD, REVERSE, RANDOM };

// The running launch (one at a time: s_mutex).
struct launch_t {
    bool running;
    pthread_t host; // the thread that launched it
    const char *name;
    int n; // threads per block
    std::vector<thread_t> threads;
    int cur; // the running thread; -1 while the scheduler runs
    fiber_t sched;
    void (*body)(void *);
    void *arg;
    char *dyn; // dynamic shared memory: dyn_bytes before a guard page
    size_t dyn_bytes;
};

std::mutex s_mutex;
launch_t s_l;
std::vector<fiber_stack_t> s_stacks;
std::vector<int> s_free; // stacks not in use
order_t s_order = FORWARD;
uint64_t s_rng = 0x9e3779b97f4a7c15ull;
char *s_dyn_map;        // the dynamic shared memory's mapping: s_dyn_cap bytes, then a guard page
size_t s_dyn_cap, s_page;
struct sigaction s_old_segv, s_old_bus;

uint64_t s_next(void) { // xorshift64*
    s_rng ^= s_rng >> 12;
    s_rng ^= s_rng << 25;
    s_rng ^= s_rng >> 27;
    return s_rng * 0x2545f4914f6cdd1dull;
}

const char *s_state_name(state_t s) {
    switch (s) {
    case READY:
        return "runs";
    case AT_BARRIER:
        return "waits at __syncthreads";
    case AT_WARP:
        return "waits at a warp operation";
    case DONE:
        return "exited";
    }
    return "?";
}

const char *s_op_name(warp_op_t op) {
    switch (op) {
    case WARP_IDX:
        return "__shfl_sync";
    case WARP_UP:
        return "__shfl_up_sync";
    case WARP_DOWN:
        return "__shfl_down_sync";
    case WARP_XOR:
        return "__shfl_xor_sync";
    case WARP_BALLOT:
        return "__ballot_sync/__syncwarp";
    }
    return "?";
}

// ---------------------------------------------------------------------------------------------
// faults during a kernel: say where, then let the access fault again under the old action

void s_on_fault(int sig, siginfo_t *si, void *uc) {
    (void)uc;
    if (s_l.running && pthread_equal(pthread_self(), s_l.host)) {
        char buf[768];
        int len = snprintf(buf, sizeof buf,
                           "cuemu: kernel %s, block (%u,%u,%u), thread (%u,%u,%u): %s at address "
                           "%p, outside everything it may touch: past the end of a cudaMalloc'd "
                           "buffer or of the dynamic shared memory (both end at a guard page), "
                           "or the thread's stack overflowed (on a GPU: an illegal address, or "
                           "silent corruption)\n",
                           s_l.name, block_idx.x, block_idx.y, block_idx.z,
                           s_l.cur >= 0 ? thread_idx.x : 0u, s_l.cur >= 0 ? thread_idx.y : 0u,
                           s_l.cur >= 0 ? thread_idx.z : 0u, sig == SIGSEGV ? "SIGSEGV" : "SIGBUS",
                           si->si_addr);
        if (len > 0) {
            ssize_t w = write(2, buf, (size_t)len < sizeof buf ? (size_t)len : sizeof buf - 1);
            (void)w;
        }
    }
    sigaction(sig, sig == SIGSEGV ? &s_old_segv : &s_old_bus, NULL);
}

// Once per launching thread: an alternate signal stack (a fiber's stack may be the one that
// overflowed). Once per process: the handlers.
void s_fault_handlers(void) {
    static thread_local bool altstack;
    if (!altstack) {
        stack_t ss;
        memset(&ss, 0, sizeof ss);
        ss.ss_size = 64 * 1024;
        ss.ss_sp = malloc(ss.ss_size);
        if (ss.ss_sp && sigaltstack(&ss, NULL) == 0) {
            altstack = true;
        }
    }
    static bool installed;
    if (!installed) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_sigaction = s_on_fault;
        sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
        sigemptyset(&sa.sa_mask);
        sigaction(SIGSEGV, &sa, &s_old_segv);
        sigaction(SIGBUS, &sa, &s_old_bus);
        installed = true;
    }
}

// ---------------------------------------------------------------------------------------------
// the order of threads and blocks

void s_read_order(void) {
    static bool read;
    if (read) {
        return;
    }
    read = true;
    const char *o = getenv("CUEMU_ORDER");
    if (!o || !o[0] || strcmp(o, "forward") == 0) {
        s_order = FORWARD;
    } else if (strcmp(o, "reverse") == 0) {
        s_order = REVERSE;
    } else if (strncmp(o, "random", 6) == 0 && (o[6] == '\0' || o[6] == ':')) {
        s_order = RANDOM;
        if (o[6] == ':') {
            char *end = NULL;
            errno = 0;
            unsigned long long seed = strtoull(o + 7, &end, 10);
            if (errno || !end || *end || end == o + 7) {
                fatal("CUEMU_ORDER=%s: the seed is not a number", o);
            }
            s_rng ^= seed * 0xbf58476d1ce4e5b9ull;
            s_next();
        }
    } else {
        fatal("CUEMU_ORDER=%s is not one of forward, reverse, random, random:<seed>", o);
    }
}

// ---------------------------------------------------------------------------------------------
// the threads' side

// A pass: threads run in s_order_p's order from s_pos on, each until it waits or exits, and
// hands over directly to the next (one switch per thread, not two); the last one of the pass
// hands back to the scheduler. A thread that exits cannot free its own stack while it runs on
// it: it leaves it in s_zombie, which whoever runs next frees (s_reap).
std::vector<int> *s_order_p;
size_t s_pos;
int s_done, s_zombie = -1;

int s_stack(void);

inline void s_reap(void) {
    if (s_zombie >= 0) {
        s_free.push_back(s_zombie);
        s_zombie = -1;
    }
}

void s_entry(void);

// Leaves `from` (a thread that waits or exited, or the scheduler starting a pass) for the
// pass's next ready thread, else for the scheduler; returns when `from` is resumed.
void s_switch_on(fiber_t *from) {
    const std::vector<int> &order = *s_order_p;
    while (s_pos < order.size()) {
        const int k = order[s_pos++];
        thread_t *t = &s_l.threads[(size_t)k];
        if (t->state != READY) {
            continue;
        }
        if (t->stack < 0) {
            t->stack = s_stack();
            fiber_start(&t->fiber, &s_stacks[(size_t)t->stack], s_entry);
        }
        s_l.cur = k;
        thread_idx = t->idx;
        fiber_switch(from, &t->fiber);
        s_reap();
        return;
    }
    s_l.cur = -1;
    if (from != &s_l.sched) {
        fiber_switch(from, &s_l.sched);
        s_reap();
    }
}

void s_entry(void) {
    s_reap();
    s_l.body(s_l.arg);
    thread_t *t = &s_l.threads[(size_t)s_l.cur];
    t->state = DONE;
    s_done++;
    s_zombie = t->stack;
    t->stack = -1;
    s_switch_on(&t->fiber);
    abort(); // never resumed
}

thread_t *s_self(const char *what) {
    if (!s_l.running || s_l.cur < 0) {
        fatal("%s outside a kernel", what);
    }
    return &s_l.threads[(size_t)s_l.cur];
}

// ---------------------------------------------------------------------------------------------
// the scheduler's side

// Completes the warp operations of warp `wi` whose lanes have all arrived (none of its lanes can
// run); returns whether any did. A group that can never complete is fatal.
bool s_resolve_warp(int wi) {
    bool any = false;
    const int n = s_l.n;
    {
        const int lo = 32 * wi;
        const int cnt = n - lo < 32 ? n - lo : 32;
        thread_t *w = &s_l.threads[(size_t)lo];
        unsigned waiting = 0;
        for (int l = 0; l < cnt; l++) {
            waiting |= (unsigned)(w[l].state == AT_WARP) << l;
        }
        while (waiting) {
            const int l0 = __builtin_ctz(waiting);
            const thread_t *t0 = &w[l0];
            const unsigned m = t0->mask;
            s_l.cur = lo + l0;
            thread_idx = t0->idx;
            if (!(m >> l0 & 1u)) {
                fatal("%s with mask %#x, which leaves out the calling lane %d", s_op_name(t0->op),
                      m, l0);
            }
            if (cnt < 32 && (m >> cnt) != 0) {
                fatal("%s with mask %#x in warp %d, which has only %d lanes (a block of %d "
                      "threads)",
                      s_op_name(t0->op), m, lo / 32, cnt, n);
            }
            const int width = t0->width;
            if (width < 1 || width > 32 || (width & (width - 1)) != 0) {
                fatal("%s with width %d (a power of 2 up to 32)", s_op_name(t0->op), width);
            }
            for (int l = 0; l < 32; l++) {
                if (!(m >> l & 1u)) {
                    continue;
                }
                if (w[l].state != AT_WARP) {
                    fatal("%s with mask %#x in warp %d: lane %d %s (a GPU would hang or return "
                          "undefined values)",
                          s_op_name(t0->op), m, lo / 32, l, s_state_name(w[l].state));
                }
                if (w[l].mask != m || w[l].op != t0->op || w[l].width != width) {
                    fatal("warp %d: lane %d is at %s with mask %#x, lane %d at %s with mask %#x "
                          "width %d vs %d",
                          lo / 32, l0, s_op_name(t0->op), m, l, s_op_name(w[l].op), w[l].mask,
                          width, w[l].width);
                }
            }
            uint64_t ballot = 0;
            if (t0->op == WARP_BALLOT) {
                for (int l = 0; l < 32; l++) {
                    ballot |= (uint64_t)((m >> l & 1u) && w[l].value != 0) << l;
                }
            }
            for (int l = 0; l < 32; l++) {
                if (!(m >> l & 1u)) {
                    continue;
                }
                thread_t *t = &w[l];
                const int seg = l & ~(width - 1), in_seg = l - seg, a = t->arg;
                int src = l;
                switch (t0->op) {
                case WARP_IDX:
                    src = seg + (a & (width - 1));
                    break;
                case WARP_UP:
                    src = a >= 0 && in_seg >= a ? l - a : l;
                    break;
                case WARP_DOWN:
                    src = a >= 0 && in_seg + a < width ? l + a : l;
                    break;
                case WARP_XOR: {
                    const int j = l ^ a;
                    src = j >= seg && j < seg + width ? j : l;
                    break;
                }
                case WARP_BALLOT:
                    break;
                }
                if (!(m >> src & 1u)) {
                    s_l.cur = lo + l;
                    thread_idx = t->idx;
                    fatal("%s with mask %#x: lane %d reads lane %d, outside the mask (its value "
                          "is undefined)",
                          s_op_name(t0->op), m, l, src);
                }
                t->result = t0->op == WARP_BALLOT ? ballot : w[src].value;
            }
            for (int l = 0; l < 32; l++) {
                if (m >> l & 1u) {
                    w[l].state = READY;
                }
            }
            waiting &= ~m;
            any = true;
        }
    }
    s_l.cur = -1;
    return any;
}

// No thread can run and no warp operation can complete: the barrier opens when every thread
// waits at it; otherwise the kernel is wrong.
void s_barrier_or_fail(void) {
    int at_barrier = 0, done = 0, at_warp = 0, first_done = -1, first_warp = -1;
    for (int i = 0; i < s_l.n; i++) {
        switch (s_l.threads[(size_t)i].state) {
        case AT_BARRIER:
            at_barrier++;
            break;
        case DONE:
            done++;
            first_done = first_done < 0 ? i : first_done;
            break;
        case AT_WARP:
            at_warp++;
            first_warp = first_warp < 0 ? i : first_warp;
            break;
        case READY:
            break;
        }
    }
    if (at_barrier == s_l.n) {
        for (auto &t : s_l.threads) {
            t.state = READY;
        }
        return;
    }
    fatal("__syncthreads that not every thread of the block reaches: %d of %d threads wait at "
          "it, %d exited (thread %d first), %d wait at a warp operation (thread %d first); a GPU "
          "would hang or go on with undefined values",
          at_barrier, s_l.n, done, first_done, at_warp, first_warp);
}

int s_stack(void) {
    if (!s_free.empty()) {
        int k = s_free.back();
        s_free.pop_back();
        return k;
    }
    fiber_stack_t s;
    if (stack_new(&s, S_STACK) != 0) {
        fatal("no memory for a thread's stack (%zu bytes)", S_STACK);
    }
    s_stacks.push_back(s);
    return (int)s_stacks.size() - 1;
}

void s_shuffle(std::vector<int> &v) {
    for (size_t i = v.size(); i > 1; i--) {
        size_t j = (size_t)(s_next() % (uint64_t)i);
        int x = v[i - 1];
        v[i - 1] = v[j];
        v[j] = x;
    }
}

// A block: warp after warp (in the order's sequence), each running until all its threads wait
// at the barrier or exited, its warp operations completing as soon as their lanes are all there;
// then the barrier opens. One warp thus gets as far ahead of the others as a GPU may let it, so
// that a missing barrier shows whichever way it was needed (the write of a later warp not yet
// done, or a value another warp still had to read already overwritten).
void s_run_block(void) {
    const int n = s_l.n, nw = (n + 31) / 32;
    const uint3 bd = {block_dim.x, block_dim.y, block_dim.z};
    for (int i = 0; i < n; i++) {
        thread_t *t = &s_l.threads[(size_t)i];
        t->state = READY;
        t->stack = -1;
        t->idx = {(unsigned)i % bd.x, (unsigned)i / bd.x % bd.y, (unsigned)i / (bd.x * bd.y)};
    }
    char *sh = __start_cuemu_shared, *sh_end = __stop_cuemu_shared;
    if (sh && sh_end > sh) {
        memset(sh, 0xff, (size_t)(sh_end - sh));
    }
    if (s_l.dyn_bytes) {
        memset(s_l.dyn, 0xff, s_l.dyn_bytes);
    }
    std::vector<int> warps((size_t)nw), lanes;
    for (int w = 0; w < nw; w++) {
        warps[(size_t)w] = s_order == REVERSE ? nw - 1 - w : w;
    }
    s_done = 0;
    s_order_p = &lanes;
    for (;;) {
        if (s_order == RANDOM) {
            s_shuffle(warps);
        }
        for (int w : warps) {
            const int lo = 32 * w, cnt = n - lo < 32 ? n - lo : 32;
            do {
                lanes.resize((size_t)cnt);
                for (int l = 0; l < cnt; l++) {
                    lanes[(size_t)l] = lo + (s_order == REVERSE ? cnt - 1 - l : l);
                }
                if (s_order == RANDOM) {
                    s_shuffle(lanes);
                }
                s_pos = 0;
                s_switch_on(&s_l.sched); // the warp's ready lanes, each until it waits
            } while (s_resolve_warp(w));
        }
        if (s_done == n) {
            return;
        }
        s_barrier_or_fail();
    }
}

// The dynamic shared memory of a launch: `bytes` (rounded up to 128, so that it starts 128-byte
// aligned, as a GPU's does: wmma's tiles need 32) ending at a guard page.
void s_dynamic_shared(size_t bytes) {
    if (!s_page) {
        s_page = (size_t)sysconf(_SC_PAGESIZE);
    }
    size_t want = (bytes + 127) / 128 * 128;
    if (!s_dyn_map || s_dyn_cap < want) {
        if (s_dyn_map) {
            munmap(s_dyn_map, s_dyn_cap + s_page);
        }
        size_t cap = (want + s_page - 1) / s_page * s_page;
        cap = cap ? cap : s_page;
        void *p = mmap(NULL, cap + s_page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                       -1, 0);
        if (p == MAP_FAILED || mprotect((char *)p + cap, s_page, PROT_NONE) != 0) {
            fatal("no memory for %zu bytes of dynamic shared memory", bytes);
        }
        s_dyn_map = (char *)p;
        s_dyn_cap = cap;
    }
    s_l.dyn = s_dyn_map + s_dyn_cap - want;
    s_l.dyn_bytes = want;
}

} // namespace

namespace cuemu {

void syncthreads(void) {
    thread_t *t = s_self("__syncthreads");
    t->state = AT_BARRIER;
    s_switch_on(&t->fiber);
}

uint64_t warp_op(warp_op_t op, unsigned mask, uint64_t value, int arg, int width) {
    thread_t *t = s_self(s_op_name(op));
    t->op = op;
    t->mask = mask;
    t->value = value;
    t->arg = arg;
    t->width = width;
    t->state = AT_WARP;
    s_switch_on(&t->fiber);
    return t->result;
}

void *dynamic_shared(void) {
    s_self("dynamic shared memory");
    return s_l.dyn;
}

void run(const char *name, const void *kernel, const launch_config_t &c, void (*body)(void *),
         void *arg) {
    if (s_l.running && pthread_equal(pthread_self(), s_l.host)) {
        fatal("kernel %s launched from device code (dynamic parallelism is not emulated)", name);
    }
    std::lock_guard<std::mutex> lock(s_mutex);
    s_read_order();
    const dim3 g = c.grid, b = c.block;
    const unsigned long long threads = (unsigned long long)b.x * b.y * b.z;
    if (b.x < 1 || b.y < 1 || b.z < 1 || b.x > MAX_THREADS || b.y > MAX_THREADS ||
        b.z > MAX_BLOCK_Z || threads > MAX_THREADS || g.x < 1 || g.x > 2147483647u || g.y < 1 ||
        g.z < 1 || g.y > MAX_GRID_YZ || g.z > MAX_GRID_YZ) {
        set_error(cudaErrorInvalidConfiguration);
        return;
    }
    if (!stream_ok(c.stream)) {
        set_error(cudaErrorInvalidResourceHandle);
        return;
    }
    if (c.smem > kernel_smem_limit(kernel)) {
        set_error(cudaErrorInvalidValue);
        return;
    }
    s_fault_handlers();
    s_dynamic_shared(c.smem);
    s_l.name = name;
    s_l.host = pthread_self();
    s_l.n = (int)threads;
    s_l.threads.resize(threads);
    s_l.body = body;
    s_l.arg = arg;
    s_l.cur = -1;
    grid_dim = g;
    block_dim = b;
    // blocks: in order, reversed, or along a random stride coprime with their number
    const unsigned long long nb = (unsigned long long)g.x * g.y * g.z;
    unsigned long long start = 0, step = 1;
    if (s_order == RANDOM && nb > 1) {
        start = s_next() % nb;
        step = s_next() % nb;
        for (;;) {
            unsigned long long a = step, bb = nb;
            while (bb) {
                unsigned long long t = a % bb;
                a = bb;
                bb = t;
            }
            if (step > 0 && a == 1) {
                break;
            }
            step = step + 1 < nb ? step + 1 : 1;
        }
    }
    s_l.running = true;
    for (unsigned long long i = 0; i < nb; i++) {
        unsigned long long k = s_order == REVERSE ? nb - 1 - i : (start + i * step) % nb;
        block_idx = {(unsigned)(k % g.x), (unsigned)(k / g.x % g.y), (unsigned)(k / g.x / g.y)};
        s_run_block();
    }
    s_l.running = false;
    char who[300];
    snprintf(who, sizeof who, "kernel %s", name);
    check_canaries(who);
}

[[noreturn]] void fatal(const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (s_l.running) {
        if (s_l.cur >= 0) {
            fprintf(stderr, "cuemu: kernel %s, block (%u,%u,%u), thread (%u,%u,%u): %s\n",
                    s_l.name, block_idx.x, block_idx.y, block_idx.z, thread_idx.x, thread_idx.y,
                    thread_idx.z, msg);
        } else {
            fprintf(stderr, "cuemu: kernel %s, block (%u,%u,%u): %s\n", s_l.name, block_idx.x,
                    block_idx.y, block_idx.z, msg);
        }
    } else {
        fprintf(stderr, "cuemu: %s\n", msg);
    }
    fflush(stderr);
    abort();
}

void not_emulated(const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fprintf(stderr, "cuemu: not emulated: %s\n", msg);
}

} // namespace cuemu
