// rl_fault — fault injection for the reliability tests (docs/reliability.md). The environment
// variable RLCTL_FAULT lists points as "name" or "name@N", separated by commas; rl_fault(name)
// returns 1 the Nth time (default: the first) this process reaches the point `name`, else 0.
// Worker processes inherit the variable, so a test can make a sampler answer garbage or the
// controller's store fail at a chosen step. Unset (every real run), a point costs one load and
// compare. Not thread-safe: points are reached from one thread of a process.
#ifndef RL_FAULT_H
#define RL_FAULT_H

#ifdef __cplusplus
extern "C" {
#endif

// 1 when point `name` fires now (see above); 0 otherwise.
int rl_fault(const char *name);

#ifdef __cplusplus
}
#endif
#endif
