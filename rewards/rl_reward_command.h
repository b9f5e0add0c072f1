// rl_reward_command — a reward computed by a program of any language (a recipe's `command:`),
// as a reward ABI table like the built-ins: create() starts the program once, score() writes
// one request line to its stdin and reads one reply line from its stdout (rl_reward_json's
// RLCTL form), destroy() stops it. The protocol is in docs/rewards.md, "Rewards in any
// language"; cookbook/plugins/math_reward.py is an example.
//
// The program runs in a process group of its own, with the caller's environment and its stderr
// copied to the caller's (the reward worker's log; capped, below), and dies with the thread that started it (Linux
// PR_SET_PDEATHSIG: the reward worker calls create() on its main thread). destroy() closes its
// stdin, gives it a second to exit, then kills its whole group, so nothing it started outlives
// the reward. A program that exits, hangs past the deadline, or answers with anything but one
// well-formed line per request fails that score() call with a message saying what it did; a
// program that exited or was stopped fails every later call too.
//
// Not the loader (rl_reward builds this table's config from the recipe entry) and not the
// JSON (rl_reward_json).
#ifndef RL_REWARD_COMMAND_H
#define RL_REWARD_COMMAND_H

#include "rlctl/reward.h"

#ifdef __cplusplus
extern "C" {
#endif

// The longest reply line read from the program: RL_REWARD_JSON_MAX_REPLY (16 MiB).

// What the program writes to stderr reaches the caller's stderr (the reward worker's log)
// through a thread of ours, up to RL_REWARD_COMMAND_STDERR_CAP bytes per program; past it the
// log says so once, what follows is dropped but for its last RL_REWARD_COMMAND_STDERR_TAIL
// bytes, and when the program ends (its stderr closes, or destroy()) the log gets how many
// bytes were dropped and that tail (a traceback usually comes last). A program cannot grow
// the log without bound, and never blocks on a full stderr pipe.
#define RL_REWARD_COMMAND_STDERR_CAP (16u << 20)
#define RL_REWARD_COMMAND_STDERR_TAIL (64u << 10)

// The table. Its create() takes a config of rlctl's own making, not a recipe's `config:`:
//   {"argv": ["python3", "/abs/my_reward.py", ...],  the program (searched on PATH when it has
//                                                     no '/') and its arguments
//    "deadline": 2.7}                                 seconds one score() may wait for the
//                                                     reply; 0 or absent = no limit
// create() fails when the program cannot be started (not found, not executable), naming it.
// borrowed; valid until program exit.
const rl_reward_table_t *rl_reward_command_table(void);

#ifdef __cplusplus
}
#endif
#endif
