// rl_reward_math — the arithmetic of the built-in `math_answer` reward and of task accuracy:
// extract the final number of a completion (GSM8K style: the number after "#### ", else the last
// number in the text), normalise it (commas removed, "+", leading zeros and a trailing ".0"
// dropped), and compare two answers numerically. Pure functions on text; the reward ABI wrapper
// and the plugin loader are other modules.
#ifndef RL_REWARD_MATH_H
#define RL_REWARD_MATH_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    int found;       // 1 when the text holds a number at all
    int formatted;   // 1 when that number follows "#### " (the answer format the task teaches)
    char value[64];  // the normalised number ("1234", "-3.5"); "" when not found
} rl_math_answer_t;

// Extracts the final answer of `text` (len bytes, need not be NUL-terminated). A number is an
// optional sign, digits with optional thousands commas, and an optional decimal part. With
// "#### " present, the number right after its last occurrence wins (spaces and a '$' may stand
// between); otherwise the last number in the text. Numbers longer than 60 characters count as
// not found.
void rl_math_extract(const char *text, size_t len, rl_math_answer_t *out);

// Normalises a reference answer the same way ("1,234" -> "1234", "+7" -> "7", "007" -> "7",
// "3.50" -> "3.5", "2.0" -> "2"). Returns 0, or -1 (out untouched) when `answer` is not a
// number. out must hold 64 bytes.
int rl_math_normalize(const char *answer, char *out);

// 1 when the completion's extracted answer equals the reference answer (both normalised; equal
// strings, or equal values as doubles within 1e-9 relative for decimals), else 0.
int rl_math_correct(const char *completion, size_t len, const char *reference);

#ifdef __cplusplus
}
#endif
#endif
