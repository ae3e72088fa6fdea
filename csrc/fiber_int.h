/*
 * fiber_int.h - internal contract of the context-switch layer
 * (csrc/arch/switch_*.S, csrc/ctx_ucontext.c, csrc/stack.c, csrc/fiber.c).
 *
 * Model: a fiber is a saved machine context plus a stack. Every OS thread
 * that runs fibers also has a "root" fiber standing for its own pthread
 * stack (the carrier/scheduler stack); Go callbacks and all blocking loop
 * work happen there. Any fiber may switch to any other fiber of the same
 * thread. A fiber's entry function must never return: when its work is done
 * it calls xtc__fiber_exit_to(), which switches away without saving, so the
 * dead stack can be reused at once.
 *
 * Invariants:
 *  - a fiber runs on one OS thread at a time; it moves to another thread only
 *    while switched out (executor migration at yield/park points);
 *  - the first field of xtc__fiber_t is the saved stack pointer, so the
 *    assembly can address it at offset 0;
 *  - xtc__fiber_current() is never NULL on a thread after
 *    xtc__fiber_thread_init() (it is the root fiber when no fiber runs).
 */
#ifndef XTC_FIBER_INT_H
#define XTC_FIBER_INT_H

#include <stddef.h>
#include <stdint.h>

typedef struct xtc__stack {
	void  *map;     /* mmap base (guard page first) */
	size_t map_len; /* whole mapping */
	void  *lo;      /* lowest usable byte (just above the guard) */
	void  *hi;      /* one past the highest usable byte */
} xtc__stack_t;

/* Stacks come from a per-thread cache; a miss maps a new one with a
 * PROT_NONE guard page below it. usable is rounded up to pages. */
int  xtc__stack_alloc(size_t usable, xtc__stack_t *out);
void xtc__stack_free(xtc__stack_t *st);
void xtc__stack_cache_trim(void); /* unmap this thread's cached stacks */

typedef struct xtc__fiber xtc__fiber_t;
typedef void (*xtc__fiber_entry)(void *arg);

struct xtc__fiber {
	void *sp;                 /* saved stack pointer: MUST stay first */
	xtc__stack_t stack;       /* empty for a thread's root fiber */
	xtc__fiber_entry entry;
	void *arg;
	const char *name;         /* shown by the stack-overflow report */
	uint64_t owner_id;        /* e.g. proc pid packed, for the report */
	int nopreempt;            /* > 0: involuntary preemption deferred */
	int is_root;
	void *impl;               /* substrate data (ucontext_t *), or NULL */
	void *asan_fake;          /* sanitizer bookkeeping */
	const void *asan_bottom;
	size_t asan_size;
	void *tsan_fiber;
};

/* Per-thread setup: root fiber, sigaltstack for the overflow handler.
 * Idempotent. */
int xtc__fiber_thread_init(void);
void xtc__fiber_thread_fini(void);
xtc__fiber_t *xtc__fiber_root(void);
xtc__fiber_t *xtc__fiber_current(void);

/* Prepare f to run entry(arg) on a fresh stack of stack_size bytes (0 =
 * the process default, see xtc_stack_size()). */
int  xtc__fiber_init(xtc__fiber_t *f, size_t stack_size,
                     xtc__fiber_entry entry, void *arg);
/* Release the stack of a fiber that has exited (or never ran). */
void xtc__fiber_release(xtc__fiber_t *f);

/* Save the current context into xtc__fiber_current() and resume to. */
void xtc__fiber_switch(xtc__fiber_t *to);
/* Leave the current fiber for good (its stack may be reused) and resume to. */
__attribute__((noreturn)) void xtc__fiber_exit_to(xtc__fiber_t *to);

/* Name of the context-switch substrate: "asm" or "ucontext". */
const char *xtc__fiber_substrate(void);

#endif
