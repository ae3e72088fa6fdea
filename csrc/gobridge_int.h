/*
 * gobridge_int.h - the one internal header the Go package's cgo preambles
 * include (the root *.go files); csrc/gobridge.c implements it.
 *
 * Model: the root package wraps the C core that package csrc compiles. Its
 * preambles hold trampolines (C->Go calls bracketed by the Go-callback
 * guard, carrier-stack hops) and need a handful of internals. They get them
 * here as out-of-line functions, so:
 *  1. no struct layout of the core crosses the package boundary: a preamble
 *     compiled with other flags than csrc (the context-switch substrate,
 *     sanitizer defines) still agrees with the core, and csrc can change a
 *     struct without recompiling a preamble that would silently disagree;
 *  2. the only shared layout is the front door's completion word
 *     (xtc__gocall_done_t, exec_gocall_int.h), which is substrate-free and
 *     read by Go without a call on purpose (the spin-wait of Exec.Go).
 *
 * Rejected: including loop_int.h from the preambles (it pulled the fiber,
 * task and loop structs into Go's build and forced the root to mirror
 * csrc's substrate define in a tag file); exporting these as public xtc_*
 * API (they are Go-binding plumbing with rules a C user must not rely on).
 *
 * Cost: one direct call per use instead of an inlined TLS access; every
 * user is a cgo crossing (tens of ns at least), so it is not measurable.
 */
#ifndef XTC_GOBRIDGE_INT_H
#define XTC_GOBRIDGE_INT_H

#include <stdint.h>
#include <stdlib.h>

#include "xtc.h"
#include "xtc_exec.h"
#include "exec_gocall_int.h"

/* The front door's per-call functions with the table, the C function and
 * the class as uintptr_t. cgo checks every pointer argument whose type
 * may hold Go pointers (GODEBUG cgocheck=1, the default) with a runtime
 * call: three per submission, and their frames were the deepest on the
 * calling goroutine's stack (gocall.go, stackFrugal). These pointers are
 * C memory by construction, never Go's. */
static inline int xtc__gocall_submit_u(uintptr_t t, uint32_t idx, int loop_idx,
                                       uintptr_t fn, uintptr_t arg,
                                       uintptr_t cls, const char *name,
                                       int spin)
{
	return xtc__gocall_submit((xtc__gocalls_t *)t, idx, loop_idx,
	                          (void *)fn, arg, (xtc_exec_class_t)cls,
	                          name, spin);
}

static inline int xtc__gocall_unspin_u(uintptr_t t, uint32_t idx)
{
	return xtc__gocall_unspin((xtc__gocalls_t *)t, idx);
}

static inline int xtc__gocalls_pop_u(uintptr_t t, uint32_t *out, int max)
{
	return xtc__gocalls_pop((xtc__gocalls_t *)t, out, max);
}

/* The completion queue's per-delivery calls and a mailbox message's
 * record, with the queue and the record as uintptr_t (C memory, never
 * Go's; see xtc__gocall_submit_u): a Dispatch's or a Mailbox's waiter
 * pops and delivers in the server's place (completion.go, await), on its
 * own goroutine's stack, often a new one. */
static inline int xtc__cq_pop_u(uintptr_t cq, xtc_cq_entry_t *out, int max)
{
	return xtc_cq_pop((xtc_cq_t *)cq, out, max);
}

static inline int xtc__cq_arm_u(uintptr_t cq)
{
	return xtc_cq_arm((xtc_cq_t *)cq);
}

static inline int xtc__gocq_disarm_u(uintptr_t cq)
{
	return xtc__gocq_disarm((xtc_cq_t *)cq);
}

static inline size_t xtc__gombox_rec_len_u(uintptr_t rec)
{
	return xtc__gombox_rec_len((const xtc__gombox_rec_t *)rec);
}

static inline void *xtc__gombox_rec_data_u(uintptr_t rec)
{
	return xtc__gombox_rec_data((xtc__gombox_rec_t *)rec);
}

static inline void xtc__gombox_rec_free_u(uintptr_t rec)
{
	free((void *)rec);
}

/* xtc_send with the bytes as unsigned char: a []byte holds no Go
 * pointers, so cgo's check of a void * argument (a runtime call, among the
 * deepest frames of a new goroutine's Send + Recv) has nothing to find;
 * cgo makes none for a pointer to a type without pointers. */
static inline int xtc__send_bytes(xtc_pid_t to, const unsigned char *data,
                                  size_t size)
{
	return xtc_send(to, data, size);
}

/* Bracket a C->Go call made on a carrier stack (raises the Go-callback
 * guard: no switch, park or preemption on this thread while it is up). */
void xtc__gobridge_cb_enter(void);
void xtc__gobridge_cb_leave(void);

/* The loop running on this thread, NULL on a thread that runs none. */
xtc_loop_t *xtc__gobridge_loop_current(void);

/* The executor owning loop, NULL for a standalone loop. */
xtc_exec_t *xtc__gobridge_loop_exec(const xtc_loop_t *loop);

/* Run fn(arg) on this thread's carrier stack with the guard raised (see
 * loop_int.h); 0 or XTC_E_INVAL. */
int xtc__carrier_call(void (*fn)(void *), void *arg);

#endif
