// rl_reaper — makes this process answer for every process it starts, however they try to leave:
// a child subreaper (PR_SET_CHILD_SUBREAPER) adopts its orphaned descendants, including those
// that called setsid() to leave its process group, so that killing what it started means
// killing its children until none is left. The reward worker runs one (the programs and plugins
// it runs start processes we did not write); nothing else here is one.
//
// Not a sandbox: a descendant that double-forks is still adopted and killed, but one that is
// given to another process (ptrace, a daemon manager over D-Bus) is out of reach, as is one
// that survives SIGKILL (none does).
#ifndef RL_REAPER_H
#define RL_REAPER_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

// Makes this process a child subreaper and gives it a thread that, on SIGTERM (from anyone, or
// as the death signal of the parent: rl_reaper_start sets PR_SET_PDEATHSIG to SIGTERM), kills
// every descendant (rl_reaper_sweep) and then dies of that SIGTERM. Call it before any other
// thread starts (SIGTERM is blocked in the calling thread, and so in every thread started
// after). Returns 0 or an errno (prctl, pthread_create) with err filled.
int rl_reaper_start(char *err, size_t err_len);

// Kills every descendant of this process: SIGKILL to each child (and to its process group, if
// it leads one) and reaps it; orphans of the killed are adopted and killed next, until none is
// left or timeout_s passed. Reaps children this process did not kill too: call it when nothing
// else of this process waits for a child. Returns the number of processes killed.
int rl_reaper_sweep(double timeout_s);

#ifdef __cplusplus
}
#endif
#endif
