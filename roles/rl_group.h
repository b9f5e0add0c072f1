// rl_group — the controller's side of its workers: spawn worker processes (posix_spawn of the
// rlctl binary, so no child ever shares the controller's ZeroMQ context), wait for their hello,
// send requests and collect replies with timeouts, watch heartbeats and exits, and shut them
// down. Each worker is addressed as "<role>/<rank>"; a role is the group of its ranks. Every
// failure names the worker (role, rank, pid) and, when it died, how (exit code or signal) and
// where its log is. Workers run in their own process group, so the terminal's Ctrl-C reaches
// only the controller, which stops them in order; they also die with the controller
// (PR_SET_PDEATHSIG), so a SIGKILLed controller leaves no orphan.
#ifndef RL_GROUP_H
#define RL_GROUP_H

#include "rl_wire.h"

#include <stddef.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct rl_group rl_group_t;

// Binds the controller's ROUTER on a fresh abstract ipc:// endpoint. log_dir: where worker logs
// go (<log_dir>/<role>-<rank>.log, created). heartbeat: the workers' period in seconds.
int rl_group_new(const char *log_dir, double heartbeat, rl_group_t **out, char *err,
                 size_t err_len);
// Shuts every live worker down (shutdown request, then SIGKILL after timeout_s), frees.
void rl_group_destroy(rl_group_t **self_p, double timeout_s);

// Spawns `rlctl worker` for role/rank with the recipe and thread count. The process gets
// OPENBLAS_NUM_THREADS and a short OPENBLAS_THREAD_TIMEOUT so idle BLAS threads sleep (roles
// share cores; DESIGN.md §5). Returns 0 or an error.
int rl_group_spawn(rl_group_t *self, const char *role, int rank, const char *recipe_path,
                   int threads, char *err, size_t err_len);

// Waits until every spawned worker said hello (or timeout_s). A worker whose setup failed says
// so in its hello; its message is returned. Returns 0 or an error naming the worker.
int rl_group_wait_ready(rl_group_t *self, double timeout_s, char *err, size_t err_len);

// A fresh request id: build every request with rl_msg_new(op, rl_group_next_id(g)).
uint64_t rl_group_next_id(rl_group_t *self);

// Sends reqs[i] to peers[i] ("sampler/1"), i < n (takes the messages, each with its own id),
// and waits for all replies up to timeout_s. replies[i] gets each (caller frees). A reply with
// ok = false, a worker that exits, a lost heartbeat or the timeout fails the call with the
// worker's name and the reason; replies received so far are freed. On a timeout the late
// worker is killed (its state is unknown) and *timed_out (may be NULL) is set to 1.
int rl_group_call(rl_group_t *self, int n, const char *const *peers, rl_msg_t **reqs,
                  rl_msg_t **replies, double timeout_s, int *timed_out, char *err,
                  size_t err_len);

// The pid of a worker, or -1.
pid_t rl_group_pid(const rl_group_t *self, const char *peer);

#ifdef __cplusplus
}
#endif
#endif
