// cuemu_fiber — the execution contexts of cuemu's threads (tests/cuemu/): a stack of its own
// and a switch that saves one context and resumes another, so that a CUDA thread can stop at a
// barrier or a warp shuffle and let the others of its block run. A hand-written switch of the
// callee-saved registers on x86-64 (ucontext's swapcontext makes a system call per switch, and
// a block switches 1024 times per barrier); ucontext elsewhere. Not a scheduler
// (cuemu_block.cpp is).
#ifndef CUEMU_FIBER_H
#define CUEMU_FIBER_H

#include <stddef.h>

#if !defined(__x86_64__)
#include <ucontext.h>
#endif

namespace cuemu {

struct fiber_t {
#if defined(__x86_64__)
    void *sp; // the saved stack pointer; the registers lie on that stack
#else
    ucontext_t uc;
#endif
};

// A stack of `bytes` (rounded to pages) with a guard page below it: an overflow faults.
struct fiber_stack_t {
    char *base; // the mapping, guard page first
    size_t bytes;
};

// Maps a stack; returns 0, or -1 when the memory is not there.
int stack_new(fiber_stack_t *s, size_t bytes);
void stack_free(fiber_stack_t *s);

// Prepares f to run entry() on stack s at its first fiber_switch to it. entry must never
// return: it ends by switching away for good.
void fiber_start(fiber_t *f, const fiber_stack_t *s, void (*entry)(void));

// Saves the running context into `from` and resumes `to`.
void fiber_switch(fiber_t *from, fiber_t *to);

} // namespace cuemu

#endif
