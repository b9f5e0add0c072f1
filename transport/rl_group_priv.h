// rl_group_priv — what the parts of rl_group share, and nobody outside transport/rl_group*.c uses:
// the group's struct and its workers, launchers and pending requests, and the helpers one part
// calls in another. Not an API: rl_group.h is. Names are rl_grp_*; everything file-local stays
// static s_* in its part:
//   rl_group.c        the group: creation, the socket's folder, lookups, destroy
//   rl_group_proc.c   processes: spawn (a worker, a mesh's ranks), reap, how one died, kill
//   rl_group_admit.c  who may speak: admission, heartbeats, remote samplers, hellos
//   rl_group_call.c   requests in flight: post, pump, collect with timeouts, call
#ifndef RL_GROUP_PRIV_H
#define RL_GROUP_PRIV_H

#include "rl_group.h"

#include "rl_chan.h"
#include "rl_proto.h"

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define RL_GRP_MAX_WORKERS 512
#define RL_GRP_MISSED_BEATS 10
#define RL_GRP_SECRET_FD 3      // the worker reads its secret from this descriptor
#define RL_GRP_DROP_LOGGED 10   // foreign messages logged one by one; after that, every 1000th
#define RL_GRP_MAX_PENDING 1024 // requests in flight at once

typedef struct {
    char name[64];     // "sampler/1"
    char rid[96];      // routing identity "sampler/1~<16 hex>": unguessable, given on fd 3
    char log[4400];
    pid_t pid;
    int ready;         // said hello
    int alive;         // not yet reaped
    int status;        // waitpid status once reaped
    double last_beat;  // monotonic seconds of the last message or heartbeat
    char error[1024];  // setup error from its hello (a remote: from its attach)
    // a remote sampler (rl_group_connect): no process of ours, its own CURVE connection
    int remote;
    rl_chan_t *chan; // our DEALER to it
    char endpoint[300];
    int up; // a CURVE handshake succeeded
    int failed_handshakes;
    uint64_t attach_id;
    char lost[600]; // why it is gone ("" while it is not)
    char host[128]; // from its attach reply
    int needs_model; // its attach reply asked for the run's model folder
    // a rank of a mesh (rl_group_spawn_mesh): started by the launcher, not by us; its pid is
    // learned from its first message (a child of the launcher), 0 until then
    int mesh; // 1 + the index of its launcher in rl_group.launch, 0: not a rank
    int mesh_rank;
    int far; // a rank that speaks over the mesh's tcp socket (maybe on another host): admitted
             // by its CURVE key; its pid (from its hello) names it, never a process to kill
    int reaps; // its role kills what it started on SIGTERM (rl_role_t.reaps): asked first
} rl_grp_worker_t;

// The MPI launcher of a mesh's ranks (rl_group_spawn_mesh).
typedef struct {
    pid_t pid;
    int alive, status;
    char role[32];
    int dp, fsdp, first; // its ranks are w[first .. first + dp·fsdp)
    char log[4400];      // the launcher's own output
    char secret[300];    // the ranks' secret file ("" once removed)
    char mpi_tmp[300];   // its own Open MPI session folder (orte_tmpdir_base; "" none): two
                         // launchers starting at once must not race for /tmp/ompi.<host>.<uid>
    char died[700];      // how the rank that failed first died, once known
    int died_rank;       // that rank (-1: the launcher itself, or unknown)
    int far;             // its ranks speak over rl_group.mesh_chan (a hostfile)
    int termed;          // SIGTERM sent (once: a second one makes mpirun abort at once)
} rl_grp_launch_t;

// A request sent and not collected yet (rl_group_post / rl_group_collect): its reply when it
// came, or why it failed.
typedef struct {
    int used;
    rl_grp_worker_t *w;
    uint64_t id;
    double t_sent;
    double t_done;          // > 0: answered or failed
    rl_msg_t *reply;        // an ok reply
    char why[RL_GROUP_WHY]; // "" unless it failed
} rl_grp_pending_t;

struct rl_group {
    rl_chan_t *chan;
    char endpoint[300];
    char sock_dir[200];  // the 0700 folder of the ipc socket ("" once removed)
    char sock_path[256];
    char token[65];      // the run's secret: 32 random bytes in hex
    char session[65];    // remote samplers' session token (never the local workers' secret)
    char log_dir[4096];
    double heartbeat;
    int64_t max_frame;
    int (*cancel)(void *ctx);
    void *cancel_ctx;
    uint64_t dropped;
    rl_grp_worker_t w[RL_GRP_MAX_WORKERS];
    int n;
    uint64_t next_id;
    double last_check;  // monotonic time of the last heartbeat check
    rl_grp_pending_t pend[RL_GRP_MAX_PENDING]; // requests sent and not yet collected
    rl_grp_launch_t launch[8];            // mesh launchers
    int n_launch;
    rl_chan_t *mesh_chan; // the CURVE ROUTER of ranks across hosts (NULL: none)
    rl_chan_t *last_via;  // the ROUTER the last message came in on (rl_grp_recv_any)
};

// ---- rl_group.c --------------------------------------------------------------------------------
rl_grp_worker_t *rl_grp_find(rl_group_t *g, const char *name);
// The worker whose routing identity is `rid` or `rid#hb` (*hb set to which), or NULL.
rl_grp_worker_t *rl_grp_find_rid(rl_group_t *g, const char *rid, int *hb);
// The ROUTER a worker's messages travel on: the mesh's tcp one for a rank across hosts.
rl_chan_t *rl_grp_router(const rl_group_t *g, const rl_grp_worker_t *w);
// Hex of n random bytes into out (2n + 1 bytes). Returns 0 or an errno.
int rl_grp_random_hex(char *out, size_t n);

// ---- rl_group_proc.c ---------------------------------------------------------------------------
// Reaps exited workers; returns the first newly dead one (or NULL).
rl_grp_worker_t *rl_grp_reap(rl_group_t *g);
int rl_grp_dead_error(const rl_group_t *g, const rl_grp_worker_t *w, char *err, size_t err_len);
// A remote sampler is gone for this run: we cannot kill it, only stop talking to it.
void rl_grp_lose(rl_grp_worker_t *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void rl_grp_kill(rl_group_t *g, rl_grp_worker_t *w);

// ---- rl_group_admit.c --------------------------------------------------------------------------
// Handles one message that is not a reply we wait for: hello, heartbeats, and anything not from
// a worker of ours (dropped). Returns 1 when it was consumed; otherwise *from is the worker.
int rl_grp_bookkeep(rl_group_t *g, rl_msg_t *m, const char *peer, rl_grp_worker_t **from);
// 1 when the caller's cancel check asks to stop waiting.
int rl_grp_cancelled(rl_group_t *g);
// A remote sampler's connection events: a handshake that succeeds, one its allowlist refuses,
// handshakes that fail (another server key, not CURVE), a connection that closes.
void rl_grp_remote_events(rl_group_t *g);
// Waits up to timeout_ms for a message on the ROUTER or any remote sampler's connection.
// *remote: the remote it came from (NULL: the ROUTER; peer is then its connection).
int rl_grp_recv_any(rl_group_t *g, int timeout_ms, rl_msg_t **m, rl_grp_worker_t **remote,
                    char *peer, size_t peer_len, char *e, size_t e_len);
// A message from remote sampler w: only replies of this run's session count; its attach reply
// makes it ready. Returns 1 when consumed (dropped, or the attach reply), 0 when it is a reply
// for the caller to match.
int rl_grp_remote_msg(rl_group_t *g, rl_grp_worker_t *w, const rl_msg_t *m);
// Checks deaths and heartbeats; returns an error for the first problem among `watch` (NULL:
// every worker).
// Reaps exited workers, reads remote connection events, and after a gap in listening (busy
// between calls, stopped, suspended) restarts the heartbeat clocks: beats that arrived meanwhile
// wait unread in the socket, so judge from now on, not from them.
void rl_grp_refresh(rl_group_t *g);
// One worker as of the last rl_grp_refresh: dead, lost, or silent for too long. Returns 0 or why.
int rl_grp_check_one(const rl_group_t *g, const rl_grp_worker_t *w, char *err, size_t err_len);

// ---- rl_group_call.c ---------------------------------------------------------------------------
void rl_grp_pending_free(rl_grp_pending_t *p);

#endif
