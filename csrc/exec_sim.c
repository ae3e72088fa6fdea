/*
 * exec_sim.c - what the simulator (sim.c) needs of an executor: one
 * scheduling turn of a carrier on the calling thread, whether a loop could
 * progress at a virtual time, and the structural checker and state hash
 * it runs after every turn.
 *
 * Model: sim.c drives the same carriers that xtc_exec_run would start as
 * threads, one turn at a time on one thread, in an order drawn from its
 * seed; a turn is the carrier loop's body (a paced ring drain, one loop
 * step, a steal when idle) without spinning or parking.
 *
 * Invariants: everything here runs on the simulator's thread while no
 * carrier thread runs (xtc__exec_set_running guards xtc_exec_run); the
 * checker reads loop internals only between turns.
 *
 * Rejected: a separate simulated executor (it would test itself, not the
 * carriers); checking from the carrier threads (racy reads).
 */
#include "rtcode_int.h" /* first: this file is runtime code */
#include <stdatomic.h>

#include "exec_int.h"

void xtc__exec_sim_begin(xtc_exec_t *e, uint64_t seed)
{
	atomic_store(&e->stop, 0);
	for (int i = 0; i < e->n; i++)
		e->c[i].rng = (seed ^ 0x9e3779b97f4a7c15ull) *
		    (uint64_t)(2 * i + 1) | 1u;
}

int xtc__exec_stopped(xtc_exec_t *e)
{
	return atomic_load(&e->stop);
}

static int others_have_stealable(xtc_exec_t *e, int idx)
{
	if (e->n < 2)
		return 0;
	for (int i = 0; i < e->n; i++)
		if (i != idx && xtc__deque_size(&e->c[i].dq) > 0)
			return 1;
	return 0;
}

/* Could loop idx make progress at virtual time now? */
int xtc__exec_sim_runnable(xtc_exec_t *e, int idx, int64_t now)
{
	xtc__carrier_t *c = &e->c[idx];
	xtc_loop_t *l = c->loop;
	int64_t next = xtc__timers_next(l);

	return l->rq_head != NULL || l->low_head != NULL ||
	    xtc__deque_size(&c->dq) > 0 || xtc__class_queued(l) > 0 || atomic_load(&l->inbox) != NULL ||
	    xtc__carrier_ring_nonempty(c) || (next >= 0 && next <= now) ||
	    (!atomic_load(&c->steal_inflight) && xtc__carrier_may_steal(c) &&
	     others_have_stealable(e, idx));
}

/* Earliest timer deadline over every loop, -1 = none. */
int64_t xtc__exec_sim_next_deadline(xtc_exec_t *e)
{
	int64_t best = -1;

	for (int i = 0; i < e->n; i++) {
		int64_t d = xtc__timers_next(e->c[i].loop);
		if (d >= 0 && (best < 0 || d < best))
			best = d;
	}
	return best;
}

/* One scheduling turn of loop idx on the calling thread. */
int xtc__exec_sim_step(xtc_exec_t *e, int idx)
{
	xtc__carrier_t *c = &e->c[idx];
	int rc, n, r;

	rc = xtc__loop_enter(c->loop);
	if (rc != XTC_OK)
		return rc;
	n = xtc__carrier_drain(c);
	r = xtc__loop_step(c->loop, 0);
	if (r > 0 && c->drain_credit < XTC__EXEC_DRAIN_BATCH)
		c->drain_credit++;
	if (r == 0 && n == 0)
		r = xtc__carrier_try_steal(c);
	xtc__loop_leave(c->loop);
	return r < 0 ? r : (r > 0 || n > 0);
}

/* Every loop holds no live task, timer or queued item. */
int xtc__exec_sim_all_quiescent(xtc_exec_t *e)
{
	for (int i = 0; i < e->n; i++) {
		xtc_loop_t *l = e->c[i].loop;
		if (l->live_tasks > 0 || l->pending_timers > 0 ||
		    atomic_load(&l->inbox) != NULL || xtc__carrier_ring_nonempty(&e->c[i]) ||
		    xtc__sched_busy(l))
			return 0;
	}
	return 1;
}

/* Structural invariants of one loop (owner thread or the simulator). */
static int check_loop(xtc__carrier_t *c)
{
	xtc_loop_t *l = c->loop;
	int64_t ready = 0, dq;

	if (l->magic != XTC__LOOP_LIVE || l->live_tasks < 0 ||
	    l->pending_timers < 0 || l->task_free_len > (1u << 30))
		return XTC_E_INTERNAL;
	for (xtc_task_t *t = l->rq_head; t != NULL;
	     t = (xtc_task_t *)t->node.next) {
		if (atomic_load(&t->state) != XTC__T_READY || t->loop != l)
			return XTC_E_INTERNAL;
		if (++ready > l->live_tasks)
			return XTC_E_INTERNAL; /* cycle or leaked count */
		if (t->node.next == NULL && t != l->rq_tail)
			return XTC_E_INTERNAL;
	}
	for (xtc_task_t *t = l->low_head; t != NULL;
	     t = (xtc_task_t *)t->node.next) {
		if (atomic_load(&t->state) != XTC__T_READY || t->loop != l ||
		    !t->demoted)
			return XTC_E_INTERNAL;
		if (++ready > l->live_tasks)
			return XTC_E_INTERNAL;
		if (t->node.next == NULL && t != l->low_tail)
			return XTC_E_INTERNAL;
	}
	dq = xtc__deque_size(&c->dq);
	if (dq < 0 || dq > XTC__EXEC_DEQUE_CAP)
		return XTC_E_INTERNAL;
	for (int64_t i = atomic_load(&c->dq.top);
	     i < atomic_load(&c->dq.bottom); i++) {
		xtc_task_t *t = atomic_load(&c->dq.buf[i & c->dq.mask]);
		if (t == NULL || t->pinned ||
		    atomic_load(&t->state) != XTC__T_READY)
			return XTC_E_INTERNAL;
	}
	ready += dq + xtc__class_queued(l);
	if (ready > l->live_tasks)
		return XTC_E_INTERNAL;
	for (xtc_task_t *t = l->all; t != NULL; t = t->all_next) {
		uint32_t s = atomic_load(&t->state);
		if (s > XTC__T_DONE)
			return XTC_E_INTERNAL;
	}
	return XTC_OK;
}

int xtc__exec_check(xtc_exec_t *e)
{
	for (int i = 0; i < e->n; i++) {
		int rc = check_loop(&e->c[i]);
		if (rc != XTC_OK)
			return rc;
	}
	return XTC_OK;
}

uint64_t xtc__exec_hash(xtc_exec_t *e)
{
	uint64_t h = 0xcbf29ce484222325ull;

	for (int i = 0; i < e->n; i++) {
		xtc_loop_t *l = e->c[i].loop;
		h = xtc__hash_u64(h, l->runs);
		h = xtc__hash_u64(h, atomic_load(&l->up.steals));
		h = xtc__hash_u64(h, (uint64_t)l->live_tasks);
		h = xtc__hash_u64(h, (uint64_t)l->pending_timers);
		h = xtc__hash_u64(h, (uint64_t)xtc__deque_size(&e->c[i].dq));
		h = xtc__class_hash(l, h);
		h = xtc__sched_hash(l, h);
	}
	return h;
}

int xtc__exec_valid(const xtc_exec_t *e)
{
	return xtc__exec_ok(e);
}

int xtc__exec_running(xtc_exec_t *e)
{
	return atomic_load(&e->running);
}

void xtc__exec_set_running(xtc_exec_t *e, int on)
{
	atomic_store(&e->running, on);
}
