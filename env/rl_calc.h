// rl_calc — the `calc` environment's tool: an integer arithmetic expression evaluated with
// Python's semantics, exactly as docs/envs.md pins it (so any implementation of the protocol
// reproduces the built-in environment):
//   - the expression, leading and trailing spaces removed, is non-empty, at most
//     RL_CALC_MAX_LEN characters, and holds only digits, spaces, + - * ( and );
//   - it parses as a Python expression of integer literals, unary + and -, binary + - *, the
//     power ** (right-associative, binding tighter than a unary operator on its left: -2**2 is
//     -4) and parentheses, at most RL_CALC_MAX_DEPTH deep (CPython's parser limit); a literal
//     is 0s only, or has no leading 0 (Python 3: 007 is a syntax error);
//   - its value is an integer: a negative exponent (a float, or division by zero, in Python) is
//     a bad call;
//   - every value along the way — each literal, each intermediate and the result — has at most
//     RL_CALC_MAX_DIGITS decimal digits (Python 3.11's limit on int <-> str).
// Anything else is a bad call. Not the environment (rl_env_calc) and not the tool-call parser.
#ifndef RL_CALC_H
#define RL_CALC_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define RL_CALC_MAX_LEN 1000
#define RL_CALC_MAX_DEPTH 200
#define RL_CALC_MAX_DIGITS 4300

// Evaluates the len bytes at expr (no NUL needed). Returns 0 with out = the value in decimal
// ("-" for a negative one), or RL_EINVAL for a bad call (out ""), or RL_ENOMEM. cap must be at
// least RL_CALC_MAX_DIGITS + 2.
int rl_calc_eval(const char *expr, size_t len, char *out, size_t cap);

#ifdef __cplusplus
}
#endif
#endif
