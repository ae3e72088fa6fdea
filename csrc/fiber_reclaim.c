/*
 * fiber_reclaim.c - stack reclaim at park (libxtc's xtc_stack_reclaim_*,
 * xtc_async.h): a process-wide, opt-in switch that gives the untouched
 * part of a parking fiber's stack back to the kernel.
 *
 * Model. While enabled, a fiber that parks (waits for a message, a timer,
 * an fd, a wake: not a plain yield, which runs again at once) calls
 * xtc__stack_reclaim_park on its own stack just before it switches away.
 * Everything below its stack pointer minus keep_bytes (one page when 0),
 * rounded down to whole pages, is dropped with madvise(MADV_DONTNEED): the
 * pages read back as zeros, so a fiber that later runs deep faults fresh
 * pages in again (the cost moves from memory to the next deep call).
 * Nothing is dropped when that is less than a page (libxtc's rule);
 * xtc_stack_reclaim_count counts the parks that dropped something.
 * The call runs on the parking fiber itself, before its task is published
 * as parked: once published, another carrier may resume a migratable fiber
 * and touch those very pages. keep_bytes >= one page leaves room for the
 * madvise call's own frames below the caller's stack pointer.
 *
 * The stack pool (fiber_stack.c) owns stacks; this file owns only the knob
 * and the counter, so whatever the pool does with pages of stacks that
 * are not in use, this stays a thin layer over it.
 *
 * Rejected: reclaiming on the loop's side after the switch (the fiber may
 * already run again on another carrier); reclaiming at every yield (a
 * yielding fiber runs again within a turn: the pages would fault right
 * back).
 */
#include "rtcode_int.h" /* first: this file is runtime code */
#include <stdatomic.h>
#include <stdint.h>
#include <sys/mman.h>

#include "fiber_int.h"
#include "xtc.h"

/* 0 = off; else the bytes kept below the stack pointer (>= one page). */
_Atomic size_t xtc__stack_reclaim_keep;
static _Atomic uint64_t reclaim_count;

int xtc_stack_reclaim_enable(size_t keep_bytes)
{
	size_t pg = xtc__page_size();

	if (keep_bytes > ((size_t)1 << 30))
		return XTC_E_RANGE;
	keep_bytes = keep_bytes < pg ? pg : (keep_bytes + pg - 1) & ~(pg - 1);
	atomic_store_explicit(&xtc__stack_reclaim_keep, keep_bytes,
	                      memory_order_relaxed);
	return XTC_OK;
}

void xtc_stack_reclaim_disable(void)
{
	atomic_store_explicit(&xtc__stack_reclaim_keep, 0,
	                      memory_order_relaxed);
}

int xtc_stack_reclaim_enabled(void)
{
	return atomic_load_explicit(&xtc__stack_reclaim_keep,
	                            memory_order_relaxed) != 0;
}

uint64_t xtc_stack_reclaim_count(void)
{
	return atomic_load_explicit(&reclaim_count, memory_order_relaxed);
}

void xtc__stack_reclaim_park(const xtc__stack_t *st, size_t keep)
{
	size_t pg = xtc__page_size();
	uintptr_t lo = (uintptr_t)st->lo, sp = (uintptr_t)__builtin_frame_address(0);
	uintptr_t end;

	if (st->lo == NULL || sp < lo || sp >= (uintptr_t)st->hi ||
	    sp - lo < keep)
		return; /* not on this stack (root fiber), or nothing below */
	end = (sp - keep) & ~(uintptr_t)(pg - 1);
	if (end - lo <= pg)
		return; /* a page or less: not worth the system call */
	if (madvise((void *)lo, end - lo, MADV_DONTNEED) == 0)
		atomic_fetch_add_explicit(&reclaim_count, 1,
		                          memory_order_relaxed);
}
