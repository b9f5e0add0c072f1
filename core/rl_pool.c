// rl_pool — see rl_pool.h. A job is published by bumping `gen` (under the mutex, so that a
// thread about to block cannot miss it); each thread runs its share and bumps `done`.
#include "rl_pool.h"

#include "rl_clock.h"

#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <unistd.h>

typedef struct {
    rl_pool_t *pool;
    int k;
    unsigned gen0; // the job count when the thread was started
} s_arg_t;

struct rl_pool {
    pthread_t th[RL_POOL_MAX];
    s_arg_t args[RL_POOL_MAX];
    int n;     // threads started: workers 1..n
    pid_t pid; // the process that started them
    pthread_mutex_t mu;
    pthread_cond_t cv;
    atomic_uint gen; // bumped per job (and to quit)
    atomic_int done; // threads done with the current job
    int quit;        // under mu
    // the current job (written before gen is bumped)
    void (*fn)(void *arg, int k, int P);
    void *arg;
    int P;
};

// Iterations of a spin loop between clock reads or yields.
enum { S_SPIN_CHECK = 256, S_BARRIER_SPIN = 4000 };

static void s_pause(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

static void *s_thread(void *p) {
    s_arg_t *a = p;
    rl_pool_t *self = a->pool;
    unsigned seen = a->gen0;
    for (;;) {
        double t0 = rl_clock_now();
        for (int i = 1; atomic_load_explicit(&self->gen, memory_order_acquire) == seen; i++) {
            s_pause();
            if (i % S_SPIN_CHECK == 0 && rl_clock_now() - t0 > RL_POOL_SPIN_US * 1e-6) {
                pthread_mutex_lock(&self->mu);
                while (atomic_load_explicit(&self->gen, memory_order_acquire) == seen) {
                    pthread_cond_wait(&self->cv, &self->mu);
                }
                pthread_mutex_unlock(&self->mu);
            }
        }
        seen = atomic_load_explicit(&self->gen, memory_order_acquire);
        pthread_mutex_lock(&self->mu);
        int quit = self->quit;
        pthread_mutex_unlock(&self->mu);
        if (quit) {
            return NULL;
        }
        if (a->k < self->P) {
            self->fn(self->arg, a->k, self->P);
        }
        atomic_fetch_add_explicit(&self->done, 1, memory_order_release);
    }
}

rl_pool_t *rl_pool_new(void) {
    rl_pool_t *self = calloc(1, sizeof *self);
    if (!self) {
        return NULL;
    }
    pthread_mutex_init(&self->mu, NULL);
    pthread_cond_init(&self->cv, NULL);
    atomic_init(&self->gen, 0);
    atomic_init(&self->done, 0);
    self->pid = getpid();
    return self;
}

// Publishes the current job (or the quit) to the threads.
static void s_publish(rl_pool_t *self) {
    pthread_mutex_lock(&self->mu);
    atomic_fetch_add_explicit(&self->gen, 1, memory_order_release);
    pthread_cond_broadcast(&self->cv);
    pthread_mutex_unlock(&self->mu);
}

void rl_pool_destroy(rl_pool_t **self_p) {
    if (!self_p || !*self_p) {
        return;
    }
    rl_pool_t *self = *self_p;
    if (self->n > 0 && self->pid == getpid()) {
        pthread_mutex_lock(&self->mu);
        self->quit = 1;
        pthread_mutex_unlock(&self->mu);
        s_publish(self);
        for (int k = 1; k <= self->n; k++) {
            pthread_join(self->th[k], NULL);
        }
    }
    pthread_mutex_destroy(&self->mu);
    pthread_cond_destroy(&self->cv);
    free(self);
    *self_p = NULL;
}

int rl_pool_reserve(rl_pool_t *self, int P) {
    P = P < 1 ? 1 : P > RL_POOL_MAX ? RL_POOL_MAX : P;
    if (self->pid != getpid()) { // a forked child: the threads stayed in the parent
        pthread_mutex_init(&self->mu, NULL);
        pthread_cond_init(&self->cv, NULL);
        self->n = 0;
        self->pid = getpid();
    }
    while (self->n < P - 1) {
        int k = self->n + 1;
        self->args[k] = (s_arg_t){self, k, atomic_load_explicit(&self->gen, memory_order_relaxed)};
        if (pthread_create(&self->th[k], NULL, s_thread, &self->args[k]) != 0) {
            break;
        }
        self->n = k;
    }
    return P < self->n + 1 ? P : self->n + 1;
}

int rl_pool_run(rl_pool_t *self, void (*fn)(void *arg, int k, int P), void *arg, int P) {
    P = rl_pool_reserve(self, P);
    if (P == 1) {
        fn(arg, 0, 1);
        return 1;
    }
    self->fn = fn;
    self->arg = arg;
    self->P = P;
    atomic_store_explicit(&self->done, 0, memory_order_relaxed);
    s_publish(self);
    fn(arg, 0, P);
    for (int i = 1; atomic_load_explicit(&self->done, memory_order_acquire) < self->n; i++) {
        if (i % S_BARRIER_SPIN == 0) {
            sched_yield();
        } else {
            s_pause();
        }
    }
    return P;
}

void rl_barrier_init(rl_barrier_t *b, int n) {
    atomic_init(&b->arrived, 0);
    atomic_init(&b->gen, 0);
    b->n = n;
}

void rl_barrier_wait(rl_barrier_t *b) {
    if (b->n < 2) {
        return;
    }
    unsigned g = atomic_load_explicit(&b->gen, memory_order_acquire);
    if (atomic_fetch_add_explicit(&b->arrived, 1, memory_order_acq_rel) == b->n - 1) {
        atomic_store_explicit(&b->arrived, 0, memory_order_relaxed);
        atomic_fetch_add_explicit(&b->gen, 1, memory_order_release);
        return;
    }
    for (int i = 1; atomic_load_explicit(&b->gen, memory_order_acquire) == g; i++) {
        if (i >= S_BARRIER_SPIN) {
            sched_yield();
        } else {
            s_pause();
        }
    }
}
