/*
 * sched_int.h - internal contract between the executor (exec.c), the
 * scheduling classes (class.c), the stall watchdog (stall.c) and the
 * simulator (sim.c). All of them plug into the loop through the one hooks
 * table of loop_int.h; exec.c owns that table (xtc__sched_attach) and routes
 * each hook to the modules that are switched on for the loop.
 */
#ifndef XTC_SCHED_INT_H
#define XTC_SCHED_INT_H

#include <stdint.h>

#include "xtc_exec.h"
#include "loop_int.h"

/* ---- exec.c ------------------------------------------------------------ */

/* Install the routing hooks on loop (idempotent). Owner thread or before the
 * loop runs. */
void xtc__sched_attach(xtc_loop_t *loop);
/* Run fn(loop, arg) on the loop's owner thread: at once when called there or
 * while no thread owns the loop, else posted through the inbox (arg must stay
 * valid until then; fn frees it if needed). 0 or XTC_E_NOMEM. */
int xtc__sched_on_owner(xtc_loop_t *loop, void (*fn)(xtc_loop_t *, void *),
                        void *arg);
/* Called by loop.c from xtc_loop_fini (frees class and stall state). */
void xtc__sched_loop_fini(xtc_loop_t *loop);

/* Simulator and invariant-checker support (exec.c). */
int      xtc__exec_valid(const xtc_exec_t *e);
int      xtc__exec_running(xtc_exec_t *e);
void     xtc__exec_set_running(xtc_exec_t *e, int on);
void     xtc__exec_sim_begin(xtc_exec_t *e, uint64_t seed);
int      xtc__exec_stopped(xtc_exec_t *e);
int      xtc__exec_sim_runnable(xtc_exec_t *e, int idx, int64_t now);
int64_t  xtc__exec_sim_next_deadline(xtc_exec_t *e);
int      xtc__exec_sim_step(xtc_exec_t *e, int idx);
int      xtc__exec_sim_all_quiescent(xtc_exec_t *e);
int      xtc__exec_check(xtc_exec_t *e);
uint64_t xtc__exec_hash(xtc_exec_t *e);

/* ---- class.c ------------------------------------------------------------ */

/* Owner thread. The next class task by minimum vruntime, or NULL when the
 * default lane (default_ready != 0) wins or nothing is queued. Records the
 * lane that will be charged at run end. */
xtc_task_t *xtc__class_pick(xtc_loop_t *loop, int default_ready);
/* Owner thread. 1 if t belongs to a class of this loop and was queued. */
int  xtc__class_enqueue(xtc_loop_t *loop, xtc_task_t *t);
/* Owner thread. Charge the lane recorded by the last pick. */
void xtc__class_charge(xtc_loop_t *loop, xtc_task_t *t, int64_t ran_ns);
/* Tasks waiting in class queues (owner thread). */
int64_t xtc__class_queued(const xtc_loop_t *loop);
void xtc__class_loop_fini(xtc_loop_t *loop);
xtc_loop_t *xtc__class_loop(xtc_exec_class_t cls);
/* Lane id (creation index 0..15) of a valid class, or -1 (NULL/invalid). */
int xtc__class_index(xtc_exec_class_t cls);
/* Validation for xtc_proc_set_class / spawn: 0 or XTC_E_INVAL. */
int xtc__class_check(xtc_loop_t *loop, xtc_exec_class_t cls);
/* Hash of class state (sim). */
uint64_t xtc__class_hash(const xtc_loop_t *loop, uint64_t h);

/* ---- stall.c ------------------------------------------------------------ */

void xtc__stall_begin(xtc_loop_t *loop, xtc_task_t *t, int64_t now);
void xtc__stall_check(xtc_loop_t *loop, xtc_task_t *t, int64_t ran_ns);
void xtc__stall_loop_fini(xtc_loop_t *loop);

/* ---- sim.c -------------------------------------------------------------- */

/* FNV-1a step used by the state hash. */
static inline uint64_t xtc__hash_u64(uint64_t h, uint64_t v)
{
	for (int i = 0; i < 8; i++) {
		h ^= (v >> (8 * i)) & 0xffu;
		h *= 0x100000001b3ull;
	}
	return h;
}

#endif
