// rl_pool — threads that run one job at a time beside the caller (a model's training lanes and
// the workers of a batched decode step), and a spin barrier for the workers of a job.
//
// rl_pool_run(pool, fn, arg, P) runs fn(arg, k, P') for k = 0..P'-1 at once, k = 0 on the calling
// thread, and returns P' when all have returned. P' = P unless a thread could not be started
// (then fewer; 1 runs fn on the caller alone). Threads are started on first need and kept.
// Between jobs a thread spins for RL_POOL_SPIN_US microseconds, so that the next step of a
// decode loop finds it awake (starting a thread costs ~70 us on a VM, a futex wake tens), and
// then blocks on a condition variable: an idle pool takes no CPU (DESIGN.md §5, roles share
// cores). One caller at a time per pool; a pool used in a child after fork() starts new threads.
#ifndef RL_POOL_H
#define RL_POOL_H

#include <stdatomic.h>

#ifdef __cplusplus
extern "C" {
#endif

enum { RL_POOL_MAX = 16, RL_POOL_SPIN_US = 200 };

typedef struct rl_pool rl_pool_t;

// caller owns result; free with rl_pool_destroy. NULL on allocation failure.
rl_pool_t *rl_pool_new(void);
// Stops and joins the threads.
void rl_pool_destroy(rl_pool_t **self_p);
// Starts threads until P - 1 run (P clamped to [1, RL_POOL_MAX]); returns the P' a job can run
// with now (P, or fewer when a thread could not be started).
int rl_pool_reserve(rl_pool_t *self, int P);
// Runs the job (rl_pool_reserve first); returns the P' it ran with.
int rl_pool_run(rl_pool_t *self, void (*fn)(void *arg, int k, int P), void *arg, int P);

// A barrier for n threads that spins (a few microseconds) before it yields the core.
typedef struct {
    atomic_int arrived;
    atomic_uint gen;
    int n;
} rl_barrier_t;

void rl_barrier_init(rl_barrier_t *b, int n);
// Returns once all n have called it (n = 1: at once). Reusable: the next round starts at once.
void rl_barrier_wait(rl_barrier_t *b);

#ifdef __cplusplus
}
#endif

#endif
