// tests for rl_pool: every worker of every job runs once with the job's P; the barrier holds
// all workers until the last arrives, round after round; jobs after the threads went to sleep
// (past the spin window) still run; a forked child runs jobs with threads of its own.
#include "rl_pool.h"
#include "rl_test.h"

#include <stdatomic.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

enum { ROUNDS = 50 };

typedef struct {
    int P;
    atomic_int ran[RL_POOL_MAX];
    atomic_int bad_p;
    atomic_int count[ROUNDS]; // arrivals per barrier round
    atomic_int early;         // a worker saw a round's count short after the barrier
    rl_barrier_t bar;
} job_t;

static void s_job(void *arg, int k, int P) {
    job_t *j = arg;
    if (P != j->P) {
        atomic_fetch_add(&j->bad_p, 1);
    }
    atomic_fetch_add(&j->ran[k], 1);
    for (int r = 0; r < ROUNDS; r++) {
        atomic_fetch_add(&j->count[r], 1);
        rl_barrier_wait(&j->bar);
        if (atomic_load(&j->count[r]) != P) {
            atomic_fetch_add(&j->early, 1);
        }
    }
}

// Runs one job with P workers; returns the number of problems found.
static int s_run(rl_pool_t *pool, int P) {
    static job_t j;
    memset(&j, 0, sizeof j);
    j.P = rl_pool_reserve(pool, P);
    if (j.P != P) {
        fprintf(stderr, "reserve %d gave %d\n", P, j.P);
        return 1;
    }
    rl_barrier_init(&j.bar, P);
    int got = rl_pool_run(pool, s_job, &j, P);
    int bad = got != P || atomic_load(&j.bad_p) != 0 || atomic_load(&j.early) != 0;
    for (int k = 0; k < RL_POOL_MAX; k++) {
        bad |= atomic_load(&j.ran[k]) != (k < P);
    }
    for (int r = 0; r < ROUNDS; r++) {
        bad |= atomic_load(&j.count[r]) != P;
    }
    if (bad) {
        fprintf(stderr, "job with P=%d: ran with %d, wrong P %d, early %d\n", P, got,
                atomic_load(&j.bad_p), atomic_load(&j.early));
    }
    return bad;
}

int main(void) {
    rl_pool_t *pool = rl_pool_new();
    CHECK(pool != NULL);
    int bad = 0;
    for (int i = 0; i < 200; i++) { // back to back: the threads are spinning
        bad += s_run(pool, 1 + i % 4);
    }
    CHECK_MSG(bad == 0, "%d of 200 back-to-back jobs went wrong", bad);
    bad = 0;
    for (int i = 0; i < 5; i++) { // the threads blocked on the condition variable
        struct timespec ts = {0, 3 * RL_POOL_SPIN_US * 1000L};
        nanosleep(&ts, NULL);
        bad += s_run(pool, 3);
    }
    CHECK_MSG(bad == 0, "%d of 5 jobs after a sleep went wrong", bad);
    bad = s_run(pool, RL_POOL_MAX);
    CHECK_MSG(bad == 0, "a job with RL_POOL_MAX workers went wrong");
    pid_t pid = fork();
    if (pid == 0) {
        _exit(s_run(pool, 3) ? 1 : 0);
    }
    int st = 0;
    CHECK(pid > 0 && waitpid(pid, &st, 0) == pid);
    CHECK_MSG(WIFEXITED(st) && WEXITSTATUS(st) == 0, "a job in a forked child went wrong");
    CHECK(s_run(pool, 2) == 0); // the parent's threads still work
    rl_pool_destroy(&pool);
    CHECK(pool == NULL);
    rl_pool_destroy(&pool); // NULL is fine
    RL_TEST_DONE();
}
