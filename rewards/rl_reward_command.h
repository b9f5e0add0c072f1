// rl_reward_command — a reward computed by a program of any language (a recipe's `command:`),
// as a reward ABI table like the built-ins: create() starts the program once, score() writes
// one request line to its stdin and reads one reply line from its stdout (rl_reward_json's
// RLCTL form), destroy() stops it. The protocol is in docs/rewards.md, "Rewards in any
// language"; cookbook/plugins/math_reward.py is an example.
//
// The program is an rl_child (core/rl_child.h): a process group of its own, the caller's
// environment, its stderr copied to the caller's (the reward worker's log; capped), dead with
// the thread that started it (the reward worker calls create() on its main thread). destroy()
// closes its stdin, gives it a second to exit, then kills its whole group, so nothing it started
// outlives the reward. A program that exits, hangs past the deadline, or answers with anything
// but one well-formed line per request fails that score() call with a message saying what it
// did; a program that exited, was stopped, or fell out of step fails every later call too.
//
// Not the loader (rl_reward builds this table's config from the recipe entry) and not the
// JSON (rl_reward_json).
#ifndef RL_REWARD_COMMAND_H
#define RL_REWARD_COMMAND_H

#include "rl_child.h"
#include "rlctl/reward.h"

#ifdef __cplusplus
extern "C" {
#endif

// The longest reply line read from the program: RL_REWARD_JSON_MAX_REPLY (16 MiB).

// The cap on what the program's stderr puts into the log, and the tail kept past it
// (rl_child.h: the note says "the reward command's stderr passed 16 MiB ...").
#define RL_REWARD_COMMAND_STDERR_CAP RL_CHILD_STDERR_CAP
#define RL_REWARD_COMMAND_STDERR_TAIL RL_CHILD_STDERR_TAIL

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
