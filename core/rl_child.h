// rl_child — a program of any language we talk to in lines: one request line to its stdin, one
// reply line from its stdout, under a deadline. The `command:` rewards (rewards/
// rl_reward_command) and the environments of multi-turn rollouts run on it; what the lines
// mean is theirs.
//
// The program runs in a process group of its own, with the caller's environment (plus
// PYTHONUNBUFFERED=1 unless set: a Python program that forgets to flush would leave its reply
// in a buffer) and its stderr copied to the caller's (a worker's log; capped, below), and dies
// with the thread that started it (Linux PR_SET_PDEATHSIG). Writing the request and reading the
// reply poll both pipes at once, so neither side blocks the other however long the lines are.
// Everything the program writes is untrusted: lines are capped, and a program that exits, closes
// its stdout, hangs past the deadline, writes too long a line, or writes when no request is
// waiting is stopped (its whole group killed); every later call fails with the same message.
//
// Not a sandbox (a process that leaves the group is out of reach here: core/rl_reaper), and not
// a protocol (the callers build and parse the lines).
#ifndef RL_CHILD_H
#define RL_CHILD_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct rl_child rl_child_t;

// What the program writes to stderr reaches the caller's stderr through a thread of ours, up to
// RL_CHILD_STDERR_CAP bytes per program; past it the log says so once, what follows is dropped
// but for its last RL_CHILD_STDERR_TAIL bytes, and when the program ends (its stderr closes, or
// rl_child_stop) the log gets how many bytes were dropped and that tail (a traceback usually
// comes last). A program cannot grow the log without bound, and never blocks on a full pipe.
#define RL_CHILD_STDERR_CAP (16u << 20)
#define RL_CHILD_STDERR_TAIL (64u << 10)

// Seconds rl_child_stop gives the program to exit once its stdin is closed, before its group is
// killed; also how long a program that closed its stdout is given to exit, for its status.
#define RL_CHILD_GRACE_S 1.0

// Starts argv (NULL-ended; argv[0] searched on PATH when it holds no '/'). `name` is what the
// log's notes call the program ("the reward command": "the reward command's stderr passed
// 16 MiB ..."); `log_name` is what messages call the log its stderr goes to ("the reward
// worker's log": "... (its stderr is in the reward worker's log)"); both are copied. Returns 0,
// or RL_ENOTFOUND (no such program on PATH), a positive errno (ENOENT, EACCES: the exec failed),
// RL_EINVAL (not a regular file) or RL_ENOMEM, with err naming the program ("cannot run
// rl-no-such-program: no executable of that name on PATH (...)"); nothing is left running then.
// caller owns *out; free with rl_child_stop.
int rl_child_start(char *const *argv, const char *name, const char *log_name, rl_child_t **out,
                   char *err, size_t err_len);

// Sends line[0..len) plus '\n' (the line must hold no newline: RL_EINVAL, the program kept).
// What the program's stdin does not take at once is written by the next rl_child_recv, under its
// deadline. Fails (the program stopped) when the program has gone, or wrote a line no request
// was waiting for. Returns 0, or RL_EIO (exited, closed its stdout or stdin), RL_EPROTO (out of
// step), RL_ENOMEM, with err saying what the program did.
int rl_child_send(rl_child_t *c, const char *line, size_t len, char *err, size_t err_len);

// Receives one reply line: finishes writing the request, then waits at most deadline_s seconds
// (0 = no limit) for a line of at most max_len bytes (its '\n' not counted). caller owns *reply
// (NUL-terminated, the newline stripped, *len bytes); free with free(). What the program wrote
// after the line is kept for the next send (which fails on it). Returns 0, or RL_ETIMEOUT ("the
// command gave no reply within 0.3 s and was stopped"), RL_EIO ("the command exited with status 3
// before it replied (its stderr is in <log_name>)"), RL_EPROTO (a line longer than max_len, a
// reply before the whole request was read), RL_ENOMEM; on any of them the program is stopped.
int rl_child_recv(rl_child_t *c, double deadline_s, size_t max_len, char **reply, size_t *len,
                  char *err, size_t err_len);

// rl_child_send then rl_child_recv (one deadline for both the rest of the write and the reply).
int rl_child_call(rl_child_t *c, const char *line, size_t len, double deadline_s, size_t max_len,
                  char **reply, size_t *reply_len, char *err, size_t err_len);

// Why the program was stopped after a failure (the message every later call fails with), or
// NULL while it runs. borrowed; valid until rl_child_stop.
const char *rl_child_gone(const rl_child_t *c);

// The program's process id (its group's id too); 0 once it is stopped.
int rl_child_pid(const rl_child_t *c);

// Closes the program's stdin (a program reading lines exits then), waits up to
// RL_CHILD_GRACE_S for it to exit, kills its whole group, reaps it, ends the copy of its stderr
// (writing the dropped-bytes note and tail) and frees everything; sets *c to NULL. A no-op when
// *c is NULL.
void rl_child_stop(rl_child_t **c);

#ifdef __cplusplus
}
#endif
#endif
