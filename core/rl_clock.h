// rl_clock — the two clocks rlctl reads: monotonic seconds for durations and timeouts, and unix
// seconds for the `time` of metrics lines.
#ifndef RL_CLOCK_H
#define RL_CLOCK_H

#ifdef __cplusplus
extern "C" {
#endif

// Seconds of CLOCK_MONOTONIC (arbitrary origin; never jumps).
double rl_clock_now(void);
// Seconds since the unix epoch (CLOCK_REALTIME).
double rl_clock_wall(void);

#ifdef __cplusplus
}
#endif
#endif
