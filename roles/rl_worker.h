// rl_worker — the worker processes of a run (DESIGN.md §2). The controller spawns
// `rlctl worker --role R --rank N --connect EP --parent PID --secret-fd 3 --max-frame BYTES
// --heartbeat S` (posix_spawn: a fresh process with its own ZeroMQ context) and writes the
// worker's secret into fd 3: "token <hex>\nidentity <id>\n". The worker reads and closes it,
// connects a DEALER under that identity ("R/N~<nonce>"), starts its heartbeat thread (which
// carries the token), says hello with the token and its role's verbs, and waits for `configure`
// (the resolved recipe and its thread count, over the protocol: no worker reads a recipe file),
// which loads what the role needs; then it serves the role's verbs (rl_role: one file per role)
// until `shutdown`. Messages that do not come from the controller's process (--parent, by the
// connection's SO_PEERCRED) are dropped and logged. Every failure of a request is answered
// (ok = false, error = what and where) rather than ending the process. The worker dies with its
// controller (PR_SET_PDEATHSIG), ignores the terminal's SIGINT (the controller decides when to
// stop), and writes its log to stderr, which the controller points at
// <run>/logs/<role>-<rank>.log.
#ifndef RL_WORKER_H
#define RL_WORKER_H

#include "rl_coll.h"
#include "rl_role.h"

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    const char *role;     // "actor", "sampler", "reward"
    const rl_role_t *serves; // that role's table (rl_role_find(role)): passed in, so the loop
                             // serves any table (a test's fake roles too); NULL: an unknown
                             // role, which the worker reports in its hello
    const rl_recipe_algos_t *algos; // the algorithms its `configure` recipe is loaded with
                                    // (the caller's: rl_algos())
    int rank;
    const char *endpoint; // the controller's ROUTER
    int parent;           // the controller's pid (0: do not watch, accept any sender of our uid)
    double heartbeat;     // seconds between heartbeats
    int secret_fd;        // where to read "token <hex>\nidentity <id>\n" (read, then closed)
    int64_t max_frame;    // the largest frame accepted (0: the decoder's cap)
    // a rank of a mesh (started by the MPI launcher, not by the controller; docs/mesh.md):
    int mesh_dp, mesh_fsdp;  // > 0: join the MPI world of dp·fsdp ranks; the rank is the
                             // world rank (opts.rank is ignored)
    const char *secret_file; // instead of secret_fd: "token <hex>" and one "identity <id>" line
                             // per rank, in the controller's 0700 socket folder; the rank takes
                             // the line of "<role>/<rank>~"
    const char *log_dir;     // a rank writes its log to <log_dir>/<role>-<rank>.log
    // a rank across hosts (a mesh with a hostfile) instead of secret_file: endpoint is the
    // controller's tcp:// CURVE socket, whose public key is $RLCTL_MESH_SERVER_KEY; the rank
    // connects with the key pair of key_file (on its host) as "<role>/<rank>~<mesh_nonce>"
    const char *key_file;
    const char *mesh_nonce;
} rl_worker_opts_t;

// Runs the worker until shutdown (returns 0) or a fatal error (returns non-zero after logging
// it: no secret, cannot connect, an unknown role).
int rl_worker_main(const rl_worker_opts_t *opts);

#ifdef __cplusplus
}
#endif
#endif
