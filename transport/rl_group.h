// rl_group — the controller's side of its workers: spawn worker processes (posix_spawn of the
// rlctl binary, so no child ever shares the controller's ZeroMQ context), wait for their hello,
// send requests and collect replies with timeouts, watch heartbeats and exits, and shut them
// down. Each worker is addressed as "<role>/<rank>"; a role is the group of its ranks. Every
// failure names the worker (role, rank, pid) and, when it died, how (exit code or signal) and
// where its log is. Workers run in their own process group, so the terminal's Ctrl-C reaches
// only the controller, which stops them in order; they also die with the controller
// (PR_SET_PDEATHSIG), so a SIGKILLed controller leaves no orphan; a worker is killed with its
// whole process group, so processes a plugin started do not outlive the run.
//
// Only the processes this group spawned can join or answer (docs/reliability.md):
//   - the ROUTER's ipc:// socket lives in a fresh 0700 folder (mkdtemp) and admits only our
//     effective uid: other users cannot connect at all;
//   - every worker gets, through a pipe on fd 3 (never argv or the environment), the run's
//     random token and its own unguessable routing identity "<role>/<rank>~<16 hex>"; a
//     connection under any other identity is ignored, and none can take a worker's name (no
//     handover);
//   - every message (hello, heartbeat, reply) must come from the pid this group spawned under
//     that name (the kernel's SO_PEERCRED of the connection) and hello and heartbeats must carry
//     the token; anything else is dropped, counted (rl_group_dropped) and logged a few times.
#ifndef RL_GROUP_H
#define RL_GROUP_H

#include "rl_curve.h"
#include "rl_wire.h"

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct rl_group rl_group_t;

// Binds the controller's ROUTER at ipc://<fresh 0700 folder>/ctl (under $XDG_RUNTIME_DIR when
// it is ours, else $TMPDIR or /tmp) and draws the run's token. log_dir: where worker logs go
// (<log_dir>/<role>-<rank>.log, created 0700; never through a symlink). heartbeat: the
// workers' period in seconds. max_frame: the largest frame in bytes any side of the run may
// receive (rl_chan_bind; 0: the decoder's cap); the workers get the same cap.
int rl_group_new(const char *log_dir, double heartbeat, int64_t max_frame, rl_group_t **out,
                 char *err, size_t err_len);
// Shuts every live worker down (shutdown request, then SIGKILL of its process group after
// timeout_s), kills what is left of each worker's process group, removes the socket folder,
// frees.
void rl_group_destroy(rl_group_t **self_p, double timeout_s);

// A cancel check polled (at least every 100 ms) while rl_group_wait_ready and rl_group_call wait;
// when it returns non-zero they return RL_ECANCELED and the workers they waited for are left
// running (their state is unknown: destroy the group). NULL: none.
void rl_group_set_cancel(rl_group_t *self, int (*cancel)(void *ctx), void *ctx);

// Messages dropped because they did not come from a worker of this group (unknown identity,
// wrong pid or uid, missing or wrong token).
uint64_t rl_group_dropped(const rl_group_t *self);

// Spawns `rlctl worker` for role/rank in its own process group, with its secret (token and
// identity) on fd 3. The process gets OPENBLAS_NUM_THREADS=threads (0: every core) and a short
// OPENBLAS_THREAD_TIMEOUT so idle BLAS threads sleep (roles share cores; DESIGN.md §5); it
// learns the recipe from `configure`. reaps: the role runs programs we did not write and kills
// what they started when it gets SIGTERM (rl_role_t.reaps): stopping it sends SIGTERM first and
// waits up to 1 s before the SIGKILL of its process group. Returns 0 or an error.
int rl_group_spawn(rl_group_t *self, const char *role, int rank, int threads, int reaps,
                   char *err, size_t err_len);

// How rl_group_spawn_mesh starts a mesh's ranks.
typedef struct {
    const char *launcher;             // Open MPI's mpirun (found on PATH); NULL: "mpirun"
    const char *const *launcher_args; // more arguments for it, before the program (≤ 16)
    int n_launcher_args;
    // ranks on other hosts (docs/mesh.md, "Across hosts"); hostfile NULL: all on this host
    const char *hostfile;      // the launcher's --hostfile
    const char *endpoint;      // tcp://ADDR:PORT to bind for them (port 0: any)
    const rl_curve_key_t *key; // the controller's key pair (the ranks get the public)
    const char (*allow)[RL_CURVE_Z85_LEN + 1]; // the ranks' public keys admitted
    int n_allow;
    const char *rank_key; // the ranks' secret key file on their hosts
    int reaps;            // as rl_group_spawn's
} rl_group_mesh_opts_t;

// Starts `role` as the dp·fsdp ranks of a mesh (docs/mesh.md): spawns the MPI launcher in its
// own process group with what it needs here (--allow-run-as-root as root, --oversubscribe,
// --bind-to none, mpi_yield_when_idle, shared memory), which starts dp·fsdp `rlctl worker --mesh
// DP,FSDP` processes with `threads` BLAS threads each. They are role/0 .. role/<dp·fsdp-1> (the
// MPI world rank). On this host (no hostfile) mpirun hands its ranks no descriptor, so their
// secrets (the token and one identity per rank) are in a 0600 file of the socket's 0700 folder,
// removed once every worker said hello; a rank is admitted as rl_group.h says for spawned workers,
// except that its pid is learned from its first message, which must come from a child of the
// launcher; from then on only that process speaks for it. With a hostfile the ranks may be on
// other hosts: they connect over tcp to a CURVE ROUTER bound at o->endpoint with o->key, and
// what admits one is its key (on o->allow; the ranks read o->rank_key on their hosts) and its
// identity "<role>/<rank>~<nonce>" (the nonce on their command line tells this run's ranks from
// another's); the launcher gets the hostfile, tcp between hosts, and passes the ranks
// OPENBLAS_* and the controller's public key (RLCTL_MESH_SERVER_KEY). A rank that dies takes the
// launcher and the other ranks with it: each call then fails naming the rank that died first and
// how (from the launcher's log). Returns 0 or an error (no launcher: says so).
int rl_group_spawn_mesh(rl_group_t *self, const char *role, int dp, int fsdp, int threads,
                        const rl_group_mesh_opts_t *o, char *err, size_t err_len);

// The host a worker named in its hello (a rank across hosts) or its attach reply (a remote
// sampler); NULL when it did not (a local worker: this host). borrowed.
const char *rl_group_host(const rl_group_t *self, const char *peer);

// Adds a remote sampler (`rlctl sampler serve` on endpoint, "tcp://HOST:PORT") as role/rank:
// connects a DEALER as a CURVE client with the key pair `client`, trusting only server_pub
// (Z85), and queues its `attach` (this group's session token, which no local worker ever sees;
// model_hash: the fingerprint of the run's model.path, which the sampler must serve; run: a
// label for its log). It is ready when it answers attach (rl_group_wait_ready). From then on
// every request to it and every reply from it carries the session; a reply without it is
// dropped and counted. We have no process to watch or kill: it is lost (every later call to it
// fails with why) when its allowlist refuses our key, the handshake fails (another server key),
// its connection closes (it stopped, or sent no ZMTP heartbeat for 10 periods) or it does not
// answer in time. Returns 0 or an error.
int rl_group_connect(rl_group_t *self, const char *role, int rank, const char *endpoint,
                     const rl_curve_key_t *client, const char *server_pub, const char *model_hash,
                     const char *run, char *err, size_t err_len);

// Waits until every spawned worker said hello (or timeout_s). A worker whose setup failed says
// so in its hello; its message is returned. Returns 0 or an error naming the worker.
int rl_group_wait_ready(rl_group_t *self, double timeout_s, char *err, size_t err_len);

// A fresh request id: build every request with rl_msg_new(op, rl_group_next_id(g)).
uint64_t rl_group_next_id(rl_group_t *self);

// Sends reqs[i] to peers[i] ("sampler/1"), i < n (takes the messages, each with its own id),
// and waits for all replies up to timeout_s. replies[i] gets each (caller frees). A reply with
// ok = false, a worker that exits, a lost heartbeat or the timeout fails the call with the
// worker's name and the reason; replies received so far are freed. On a timeout the late
// worker is killed (its state is unknown) and *timed_out (may be NULL) is set to 1. A reply
// counts only when it comes from the worker's own connection and process (see above).
int rl_group_call(rl_group_t *self, int n, const char *const *peers, rl_msg_t **reqs,
                  rl_msg_t **replies, double timeout_s, int *timed_out, char *err,
                  size_t err_len);

#define RL_GROUP_WHY 1024 // bytes of one worker's failure in rl_group_call_each

// As rl_group_call, but one worker's failure (ok = false, death, a lost connection, the
// timeout) does not end the call: its reply stays NULL, why[i] says what happened, and the others
// are still waited for. elapsed (may be NULL) gets each reply's seconds since the requests were
// sent. Returns 0 (look at replies[i] and why[i]) or an error of the call itself (a cancel).
int rl_group_call_each(rl_group_t *self, int n, const char *const *peers, rl_msg_t **reqs,
                       rl_msg_t **replies, double timeout_s, char (*why)[RL_GROUP_WHY],
                       double *elapsed, char *err, size_t err_len);

// Requests without waiting: sends reqs[i] (taken, each with its own id) to peers[i] and records
// them as in flight; ids[i] gets each one's id for rl_group_collect. A send that fails is that
// request's failure (collect reports it). While any call or collect waits, the replies of every
// request in flight are filed as they come, so requests to different workers (a generation
// while the actor trains) overlap. Returns 0 or an error of the call itself (an unknown peer,
// more than 1024 requests in flight).
int rl_group_post(rl_group_t *self, int n, const char *const *peers, rl_msg_t **reqs, uint64_t *ids,
                  char *err, size_t err_len);
// Waits until the requests ids[0..n) (posted, not yet collected) are answered or failed, as
// rl_group_call_each: replies[i] or why[i]; elapsed[i] (may be NULL): seconds from its send to
// its reply. A request times out timeout_s after it was sent. Each id can be collected once.
int rl_group_collect(rl_group_t *self, int n, const uint64_t *ids, rl_msg_t **replies,
                     double timeout_s, char (*why)[RL_GROUP_WHY], double *elapsed, char *err,
                     size_t err_len);

// When the reply (or the failure) of a posted request came, as filed so far while some call
// waited (monotonic seconds), or 0: not yet, or no such request in flight.
double rl_group_done_at(rl_group_t *self, uint64_t id);

// 1 when the remote sampler peer said at attach that it has no copy of the run's model (send it
// with model_file requests before configure).
int rl_group_needs_model(const rl_group_t *self, const char *peer);

// 1 when peer is a remote sampler (rl_group_connect); its endpoint (borrowed), or NULL.
int rl_group_is_remote(const rl_group_t *self, const char *peer);
const char *rl_group_endpoint(const rl_group_t *self, const char *peer);

// The pid of a worker, or -1.
pid_t rl_group_pid(const rl_group_t *self, const char *peer);

#ifdef __cplusplus
}
#endif
#endif
