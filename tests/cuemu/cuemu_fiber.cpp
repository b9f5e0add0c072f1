// cuemu_fiber — fibers' stacks and the context switch (see cuemu_fiber.h).
#include "cuemu_fiber.h"

#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>

namespace cuemu {

int stack_new(fiber_stack_t *s, size_t bytes) {
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    bytes = (bytes + page - 1) / page * page;
    void *p = mmap(NULL, bytes + page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        return -1;
    }
    if (mprotect(p, page, PROT_NONE) != 0) {
        munmap(p, bytes + page);
        return -1;
    }
    s->base = (char *)p;
    s->bytes = bytes + page;
    return 0;
}

void stack_free(fiber_stack_t *s) {
    if (s->base) {
        munmap(s->base, s->bytes);
        s->base = NULL;
    }
}

#if defined(__x86_64__)

// cuemu_fiber_swap(void **save_sp, void *to_sp): pushes the System V callee-saved registers,
// saves rsp, loads the other stack's and pops its registers; `ret` resumes it. The FP control
// words are never changed by the emulated code, so they are not switched.
extern "C" void cuemu_fiber_swap(void **save_sp, void *to_sp);
asm(".pushsection .text\n"
    ".p2align 4\n"
    ".globl cuemu_fiber_swap\n"
    ".hidden cuemu_fiber_swap\n"
    ".type cuemu_fiber_swap, @function\n"
    "cuemu_fiber_swap:\n"
    "    pushq %rbp\n"
    "    pushq %rbx\n"
    "    pushq %r12\n"
    "    pushq %r13\n"
    "    pushq %r14\n"
    "    pushq %r15\n"
    "    movq %rsp, (%rdi)\n"
    "    movq %rsi, %rsp\n"
    "    popq %r15\n"
    "    popq %r14\n"
    "    popq %r13\n"
    "    popq %r12\n"
    "    popq %rbx\n"
    "    popq %rbp\n"
    "    ret\n"
    ".size cuemu_fiber_swap, .-cuemu_fiber_swap\n"
    ".popsection\n");

void fiber_start(fiber_t *f, const fiber_stack_t *s, void (*entry)(void)) {
    // The new stack as cuemu_fiber_swap leaves a suspended one: six registers (zero), then the
    // address `ret` jumps to. entry then starts as if called: rsp + 8 a multiple of 16.
    uintptr_t top = ((uintptr_t)s->base + s->bytes) & ~(uintptr_t)15;
    void **sp = (void **)top;
    *--sp = NULL;                              // entry's return address: never used
    *--sp = reinterpret_cast<void *>(entry);   // where `ret` goes
    for (int i = 0; i < 6; i++) {
        *--sp = NULL;                          // r15 r14 r13 r12 rbx rbp
    }
    f->sp = sp;
}

void fiber_switch(fiber_t *from, fiber_t *to) {
    cuemu_fiber_swap(&from->sp, to->sp);
}

#else

void fiber_start(fiber_t *f, const fiber_stack_t *s, void (*entry)(void)) {
    getcontext(&f->uc);
    f->uc.uc_stack.ss_sp = s->base;
    f->uc.uc_stack.ss_size = s->bytes;
    f->uc.uc_link = NULL;
    makecontext(&f->uc, entry, 0);
}

void fiber_switch(fiber_t *from, fiber_t *to) {
    swapcontext(&from->uc, &to->uc);
}

#endif

} // namespace cuemu
