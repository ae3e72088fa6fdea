/*
 * sched_int.h - internal contract of the scheduling layer: the pick
 * (sched.c), the scheduling classes (sched_class.c), the stall watchdog
 * (sched_stall.c), and what the executor (exec.c) and the simulator (sim.c) need
 * from them. sched.c is the one owner of "what runs next": it alone writes
 * the loop's hooks table (loop_int.h) and routes each hook to the modules
 * switched on for the loop; classes, lane policies and the batch
 * preference meet in its pick. The executor does not write hooks: it
 * registers its default-lane queue (the stealable deque) and its per-run
 * preemption bookkeeping with xtc__sched_exec_register.
 */
#ifndef XTC_SCHED_INT_H
#define XTC_SCHED_INT_H

#include <stdint.h>

#include "xtc_exec.h"
#include "xtc_sched.h"
#include "loop_int.h"

/* ---- sched.c ------------------------------------------------------------ */

/* Install the routing hooks on loop (idempotent). Owner thread or before the
 * loop runs. */
void xtc__sched_attach(xtc_loop_t *loop);

/* What an executor adds to a loop's pick; any field may be NULL. Called on
 * the owner thread from the hooks; ops must outlive the loop (static). */
typedef struct xtc__sched_exec {
	/* the default lane has work beyond the plain FIFO (deque) */
	int (*def_ready)(xtc_loop_t *loop);
	/* the default lane is served: its next task in FIFO order across the
	 * plain FIFO and the deque, NULL = the plain FIFO's head */
	xtc_task_t *(*def_pick)(xtc_loop_t *loop);
	/* an untagged task became ready: 1 taken (deque), 0 plain FIFO */
	int (*enqueue)(xtc_loop_t *loop, xtc_task_t *t);
	/* a fiber run starts with XTC__LF_PREEMPT on: publish its deadline */
	void (*preempt_begin)(xtc_loop_t *loop, xtc_task_t *t, int64_t now);
} xtc__sched_exec_t;
/* Attach and register ops for loop (before it runs). */
void xtc__sched_exec_register(xtc_loop_t *loop, const xtc__sched_exec_t *ops);
/* Ready work that the plain FIFO does not show (class queues, deque). */
int xtc__sched_busy(xtc_loop_t *loop);

/* Run fn(loop, arg) on the loop's owner thread: at once when called there or
 * while no thread owns the loop, else posted through the inbox (arg must stay
 * valid until then; fn frees it if needed). 0 or XTC_E_NOMEM. */
int xtc__sched_on_owner(xtc_loop_t *loop, void (*fn)(xtc_loop_t *, void *),
                        void *arg);
/* Called by loop.c from xtc_loop_fini (frees class, stall, policy state). */
void xtc__sched_loop_fini(xtc_loop_t *loop);

/* Batch groups (batch.c) publish advisory counts per lane for the lane
 * policies. lane: the class id 0..15 whose queue the group's driver runs
 * in, or -1 (default lane: counted, never preferred). A lane may hold
 * several groups; the counts are sums over them. Owner thread or before
 * the loop runs. register: 0, XTC_E_INVAL (bad loop or lane), XTC_E_NOMEM.
 * adjust: deltas of active members, members ready (not BLOCKED) and
 * submissions waiting for admission; a sum never goes below 0. */
int  xtc__sched_batch_register(xtc_loop_t *loop, int lane);
void xtc__sched_batch_unregister(xtc_loop_t *loop, int lane);
void xtc__sched_batch_adjust(xtc_loop_t *loop, int lane, int32_t d_active,
                             int32_t d_ready, int32_t d_waiting);
/* Hash of policy state (sim). */
uint64_t xtc__sched_hash(const xtc_loop_t *loop, uint64_t h);

/* ---- exec.c ------------------------------------------------------------- */

/* A turn among demoted work for slice q where a preemption costs `cost`
 * (0: unknown): 4 slices, at least 200 costs, at most 16 slices. */
int64_t  xtc__exec_demoted_turn(int64_t q, int64_t cost);
/* The CPU carrier idx's thread started on in the last run (-1: none). */
int      xtc__exec_start_cpu(xtc_exec_t *e, int idx);

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

/* ---- sched_class.c ------------------------------------------------------------ */

/* Owner thread. The next class task by minimum vruntime, or NULL when the
 * default lane (default_ready != 0) wins or nothing is queued. Records the
 * lane that will be charged at run end. Same as take(choose()). */
xtc_task_t *xtc__class_pick(xtc_loop_t *loop, int default_ready);
/* Owner thread, once per pick: the lane the vruntime order serves (a class
 * index, or -1 for the default lane / nothing queued); keeps the default
 * lane's idle lift. */
int xtc__class_choose(xtc_loop_t *loop, int default_ready);
/* Owner thread, after choose: take lane's oldest task (NULL for lane -1)
 * and record lane for the charge at run end. */
xtc_task_t *xtc__class_take(xtc_loop_t *loop, int lane);
/* Bit i set: class lane i has queued tasks. */
uint32_t xtc__class_ready_mask(const xtc_loop_t *loop);
/* Shares and runs of a lane (-1: default lane). 0 or XTC_E_INVAL. */
int xtc__class_lane_info(const xtc_loop_t *loop, int lane, int *shares,
                         uint64_t *runs);
int xtc__class_count(const xtc_loop_t *loop);
/* Owner thread. 1 if t belongs to a class of this loop and was queued. */
int  xtc__class_enqueue(xtc_loop_t *loop, xtc_task_t *t);
/* Owner thread. Charge the lane recorded by the last pick (and remember
 * it for xtc__class_stall_note). */
void xtc__class_charge(xtc_loop_t *loop, xtc_task_t *t, int64_t ran_ns);
/* Owner thread, at a run's start (now: the loop's clock read): closes the
 * wait of a latency class's task. */
void xtc__class_run_begin(xtc_loop_t *loop, xtc_task_t *t, int64_t now);
/* Owner thread, after the charge: the watchdog counted a stall of the run
 * just charged; count it for its class (none for the default lane). */
void xtc__class_stall_note(xtc_loop_t *loop);
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

/* ---- sched_stall.c ------------------------------------------------------------ */

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
