/*
 * exec_int.h - what the executor's files share: the executor and its
 * carriers (struct xtc_exec, xtc__carrier_t), the producer side of the
 * submission ring, and the carrier wake.
 *
 * Model: an executor is an array of carriers, one per loop; a carrier is a
 * C thread that owns its loop (exec_carrier.c), the default-lane deque
 * and preemption bookkeeping its loop's scheduler asks for (exec_lane.c),
 * and a bounded submission ring any thread pushes onto (xtc_exec_submit:
 * exec.c). The simulator drives the same carriers on one thread
 * (exec_sim.c).
 *
 * Invariants:
 *  1. Line 0 of a carrier holds only what producers read per submission
 *     (the ring, the preemption slot), written at setup and when
 *     preemption is armed or disarmed; per-step carrier fields live on
 *     their own lines.
 *  2. Only the carrier's thread (or the simulator, on one thread) drains
 *     its ring and its overflow, steals for it and touches its deque
 *     bottom, dq_seq and ovf_head.
 *  3. The overflow (xtc__exec_submit_node) is part of the ring for every
 *     reader: xtc__carrier_ring_nonempty counts it (ovf_n), so the park's
 *     re-check, the quiescence check and the simulator see it.
 *
 * Rejected: one file for all of it (1 900 lines of six concepts); an
 * opaque carrier behind accessors (the lane's pick and the carrier's
 * spin read these fields per step: calls there cost the hot path).
 */
#ifndef XTC_EXEC_INT_H
#define XTC_EXEC_INT_H

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>

#include "sched_int.h"
#include "deque_int.h"
#include "preempt_int.h"
#include "ring_int.h"

#define XTC__EXEC_MAGIC       0x45584543u /* "EXEC" */
#define XTC__EXEC_DEQUE_CAP   4096
#define XTC__EXEC_SPIN_MAX_NS 20000 /* adaptive spin: longest window */
#define XTC__EXEC_DRAIN_BATCH 256   /* submissions an idle loop runs at once */

#define cpu_relax() XTC__CPU_RELAX() /* base_int.h */

/* An intrusive submission (xtc__exec_submit_node): it lives in the
 * submitter's record, so it is never refused for want of room. Not the
 * loop's xtc__post_t, whose fn takes the loop: from the ring the node
 * runs as an xtc_exec_fn, with nothing but its argument. */
typedef struct xtc__exec_node xtc__exec_node_t;
struct xtc__exec_node {
	xtc__exec_node_t *next;                /* the overflow's link */
	void (*fn)(xtc__exec_node_t *node); /* run on the carrier */
};

/* One submission ring slot (bounded MPSC, per-slot sequence numbers). */
typedef struct sub_slot {
	xtc__rcell_t rc; /* ring_int.h */
	xtc_exec_fn fn;
	void *arg;
} sub_slot_t;

typedef struct xtc__carrier {
	/* Line 0: what a producer reads per submission (submit_once,
	 * carrier_kick), written at setup and when preemption is armed or
	 * disarmed only. The carrier's per-step fields used to share a line
	 * with ring and pslot, so every request moved that line from the
	 * carrier's CPU to the producer's and back (perf: the drain credit's
	 * update was the carrier's costliest load at saturation). */
	xtc_exec_t *exec;
	xtc_loop_t *loop;
	sub_slot_t *ring;
	_Atomic(xtc__pslot_t *) pslot; /* preemption slot, NULL: none */
	int idx;
	int started;
	int rc;
	pthread_t th;
	/* the carrier's own (peers touch steal_inflight on a steal only) */
	_Alignas(64) uint64_t rng;
	int idle_turns;
	int busy_steps;
	int drain_credit;       /* loop steps since the last ring drain */
	int kslice;            /* kernel slice: -1 untouched, 0 default, 1 short */
	int start_cpu;         /* where its thread started (spread_start) */
	uint64_t gen_next;
	uint64_t enq_seq;      /* FIFO order across the private queue and deque */
	uint64_t input_until;  /* loop->runs up to which runs serve work just
	                          drained from the ring (preempt_begin) */
	int64_t input_at;      /* last run start that saw producers' work */
	int64_t spin_since;    /* xtc_exec_set_spin: this idle spell's start */
	int64_t gap_avg;       /* recent idle gaps ended by input (ns) */
	int64_t busy_since;    /* end of the last idle episode */
	int64_t idle_t0;       /* start of the current idle episode */
	uint64_t *dq_seq;      /* enqueue sequence per deque slot (owner only) */
	xtc__exec_node_t *ovf_head; /* the overflow taken, oldest first */
	int ovf_turn;          /* the overflow's turn to go first (ring_drain) */
	/* parks and their wake-ups (carrier-written, read relaxed by
	 * xtc_exec_loop_stats) */
	uint64_t parks, wakes, slow_wakes;
	int64_t wake_ns, wake_max;
	_Atomic int steal_inflight; /* a stolen task is on its way here */
	xtc__deque_t dq;
	_Alignas(64) _Atomic uint64_t idle_gen; /* 0 = busy */
	_Alignas(64) _Atomic uint64_t sub_tail; /* producers */
	_Alignas(64) _Atomic uint64_t sub_head; /* consumer */
	/* the overflow's producers (a backlog only: an overloaded carrier) */
	_Alignas(64) _Atomic(xtc__exec_node_t *) ovf_in; /* newest first */
	_Atomic int64_t ovf_n; /* nodes submitted and not yet run */
	_Atomic uint64_t ovf_mark; /* sub_tail when ovf_n left 0 */
	_Alignas(64) char pad;
} xtc__carrier_t;

struct xtc_exec {
	uint32_t magic;
	int n;
	xtc__carrier_t *c;
	_Atomic int running;
	_Atomic int stop;
	_Atomic int service;
	_Atomic int eager;
	_Atomic int backoff;
	_Atomic uint32_t rr;
	_Atomic int64_t spin_ns; /* xtc_exec_set_spin; 0: adaptive only */
	int64_t preempt_ns;
	int preempt_coop;        /* xtc_exec_set_preempt_coop */
	/* the run's caller's CPUs: each carrier starts on one of them in
	 * turn and widens to all of them at once (spread_start) */
	cpu_set_t cpus;
	int spread;
	int spread_first; /* rank of the caller's CPU in cpus, read once */
};

static inline int xtc__exec_ok(const xtc_exec_t *e)
{
	return e != NULL && e->magic == XTC__EXEC_MAGIC;
}

/* The carrier of an executor loop, NULL for a standalone loop. */
static inline xtc__carrier_t *xtc__carrier_of(const xtc_loop_t *l)
{
	return l->up.exec != NULL ? l->up.carrier : NULL;
}

/* ---- submission ring, producer side (bounded MPSC, per-slot sequence
 * numbers; the carrier drains it: exec_carrier.c) ------------------------ */

static inline int xtc__carrier_ring_init(xtc__carrier_t *c)
{
	c->ring = calloc(XTC_EXEC_SUBMIT_CAP, sizeof(*c->ring));
	if (c->ring == NULL)
		return XTC_E_NOMEM;
	xtc__ring_init(c->ring, sizeof(*c->ring), XTC_EXEC_SUBMIT_CAP);
	atomic_init(&c->sub_tail, 0);
	atomic_init(&c->sub_head, 0);
	atomic_init(&c->ovf_in, NULL);
	atomic_init(&c->ovf_n, 0);
	atomic_init(&c->ovf_mark, 0);
	c->ovf_head = NULL;
	return XTC_OK;
}

/* 0 when full. The claim's CAS is seq_cst: the Dekker of submit_once. */
static inline int xtc__carrier_ring_push(xtc__carrier_t *c, xtc_exec_fn fn,
                                         void *arg)
{
	uint64_t pos;
	xtc__rcell_t *rc = xtc__ring_claim(&c->sub_tail, c->ring,
	    sizeof(*c->ring), XTC_EXEC_SUBMIT_CAP - 1, memory_order_seq_cst,
	    &pos);
	sub_slot_t *s = (sub_slot_t *)rc;

	if (rc == NULL)
		return 0;
	s->fn = fn;
	s->arg = arg;
	xtc__ring_publish(rc, pos, memory_order_release);
	return 1;
}

static inline int xtc__carrier_ring_nonempty(xtc__carrier_t *c)
{
	return atomic_load(&c->sub_tail) != atomic_load(&c->sub_head) ||
	    atomic_load(&c->ovf_n) != 0;
}

/* Wake a parked carrier (Dekker with carrier_park: the caller published
 * its work with a seq_cst RMW before this seq_cst load, the carrier stores
 * "sleeping" before re-checking). The exchange makes only the first waker
 * after a park pay the futex or eventfd syscall. */
static inline void xtc__carrier_kick(xtc__carrier_t *c)
{
	xtc_loop_t *l = c->loop;
	xtc__pslot_t *ps;
	int s;

	if (atomic_load(&l->sleeping) &&
	    (s = atomic_exchange(&l->sleeping, 0)) != 0)
		xtc__loop_ring(l, s);
	else if ((ps = atomic_load_explicit(&c->pslot,
	    memory_order_relaxed)) != NULL)
		/* the run in progress: time it (a poll, no syscall unless it
		 * overran its slice) */
		xtc__preempt_contend(ps);
}

/* Ready work other than the run about to start, visible to the owner
 * (demoted work is not: the drain budget admits submissions ahead of it). */
static inline int xtc__exec_others_ready(xtc_loop_t *l)
{
	return l->rq_head != NULL || xtc__sched_busy(l);
}

/* exec_lane.c: what the executor adds to the pick of its loops (sched.c
 * routes the loop's hooks to it). */
extern const xtc__sched_exec_t xtc__exec_ops_solo, xtc__exec_ops_steal;

/* exec_carrier.c */
void *xtc__carrier_main(void *arg);          /* the carrier thread */
void  xtc__exec_wake_all(xtc_exec_t *e);     /* stop and errors */
int   xtc__carrier_drain(xtc__carrier_t *c); /* a paced ring drain: # run */
int   xtc__carrier_try_steal(xtc__carrier_t *c);
/* May c steal now? (eager rebalance's contract, exec_carrier.c) */
int   xtc__carrier_may_steal(xtc__carrier_t *c);

/* exec.c: queue node->fn(node) on loop idx like xtc_exec_submit, but never
 * refused for want of room: past a full ring the node waits in the
 * carrier's overflow (an intrusive list), drained after the ring under
 * the same admission pacing, and later nodes join it while it holds any
 * (FIFO). 0 through the ring, 1 through the overflow, XTC_E_INVAL. */
int   xtc__exec_submit_node(xtc_exec_t *e, int idx, xtc__exec_node_t *node);

#endif
