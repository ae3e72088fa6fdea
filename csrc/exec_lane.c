/*
 * exec_lane.c - what an executor adds to the scheduling of each of its
 * loops: the default lane's work-stealing deque, the offer of preempted
 * work to an idle peer, and the preemption deadline of each run.
 *
 * Model:
 *  1. Stealing: ready tasks that are neither pinned nor in a class go to
 *     the loop's Chase-Lev deque (deque_int.h) instead of its private
 *     FIFO; the owner takes from the top too (FIFO order, so yields stay
 *     fair), idle peers steal from the top (exec_carrier.c). A task is
 *     only ever READY there, i.e. switched out at a yield or park point,
 *     so a migratable proc moves only at such points; the thief re-homes
 *     it (xtc__task_detach/xtc__task_attach, loop_task.c) before it runs.
 *  2. Preemption: a run that starts with nothing else to run on its loop
 *     (no ready task, and nothing in its inbox or submission ring either)
 *     is published "alone" (preempt_int.h): the monitor leaves it alone
 *     until other work appears. The carrier announces it in
 *     loop->sleeping (XTC__SLEEP_RUN), so the first producer after that
 *     makes the run preemptible at its slice end (xtc__exec_ring_run), the
 *     same way it would wake a parked carrier; work the run itself makes
 *     ready does the same through the enqueue hook (sched.c), and a timer
 *     caps the run's hard deadline. Every later producer polls the run
 *     (xtc__carrier_kick: a few loads and a clock read while the carrier
 *     runs, a direct signal once the run overran). A run that starts
 *     contended by producers' work (in the ring or the inbox, or drained
 *     from the ring within the last few runs, input_until) is timed by
 *     those polls alone, with the monitor's net behind them (preempt_int.h:
 *     XTC__RUN_POLLED): a timer syscall per drained batch cost more than
 *     the requests on a slow hypervisor.
 *
 * Invariants: the hooks here run on the loop's owner thread (sched.c
 * calls them); a task is READY before a thief can see it in a deque.
 *
 * Rejected: one shared queue for all carriers (a contended line per
 * dispatch); arming the carrier's timer for every contended run (a near
 * re-arm per few short runs: 3k arms a second at 30% A1 load).
 */
#include "rtcode_int.h" /* first: this file is runtime code */
#include <stdatomic.h>

#include "exec_int.h"

#define DEMOTED_SLICES 4        /* slices per turn among demoted work only, */
#define DEMOTED_COST_X 200      /* and at least this many preemption costs */
#define DEMOTED_MAX_SLICES 16   /* up to this many slices */

/* ------------------------------------------------------------------ */
/* The default lane of a multi-loop executor: deque and plain FIFO      */
/* (registered with sched.c, which routes the loop's hooks)            */
/* ------------------------------------------------------------------ */

/* Ready tasks carry their enqueue sequence so the owner can serve its
 * private FIFO and its deque in one global FIFO order: a pinned task that
 * yields forever cannot starve the migratable ones, nor the reverse. The
 * sequence of a private task sits in t->xq.seq; that of a deque slot in
 * dq_seq, which only the owner touches (a deque task may be stolen at any
 * moment, so the owner must not read the task itself). */
static inline uint64_t seq_of(const xtc_task_t *t)
{
	return t->xq.seq;
}

static xtc_task_t *deque_oldest(xtc__carrier_t *c)
{
	xtc_task_t *t;

	while (xtc__deque_size(&c->dq) > 0) {
		t = xtc__deque_steal(&c->dq); /* top = oldest */
		if (t != NULL)
			return t;
	}
	return NULL;
}

/* The default lane is served: the older of the plain FIFO's head and the
 * deque's top (NULL: the plain FIFO). */
static xtc_task_t *exec_def_pick(xtc_loop_t *l)
{
	xtc__carrier_t *c = xtc__carrier_of(l);
	int64_t tp;

	if (xtc__deque_size(&c->dq) == 0)
		return NULL; /* the plain FIFO */
	if (l->rq_head != NULL) {
		/* a hint: if a thief takes that slot meanwhile, the next
		 * oldest deque task runs, which is as good */
		tp = atomic_load_explicit(&c->dq.top, memory_order_acquire);
		if (seq_of(l->rq_head) < c->dq_seq[tp & c->dq.mask])
			return NULL;
	}
	return deque_oldest(c);
}

static int exec_def_ready(xtc_loop_t *l)
{
	return xtc__deque_size(&xtc__carrier_of(l)->dq) > 0;
}

/* An untagged task became ready on a loop of a multi-loop executor (the
 * router in sched.c handled classes and preemption contention). */
static int exec_enqueue(xtc_loop_t *l, xtc_task_t *t)
{
	xtc__carrier_t *c;
	uint64_t seq;

	c = xtc__carrier_of(l);
	seq = ++c->enq_seq;
	if (!t->pinned && t->sched_class == NULL) {
		int64_t b = atomic_load_explicit(&c->dq.bottom,
		    memory_order_relaxed);
		c->dq_seq[b & c->dq.mask] = seq;
		if (xtc__deque_push(&c->dq, t))
			goto pushed;
	}
	/* private FIFO (also when the deque is full: memory stays bounded) */
	t->xq.seq = seq;
	return 0;
pushed:
	if (atomic_load_explicit(&c->exec->eager, memory_order_relaxed)) {
		/* wake one parked peer so it can take the new work */
		xtc_exec_t *e = c->exec;
		for (int i = 1; i < e->n; i++) {
			xtc__carrier_t *p = &e->c[(c->idx + i) % e->n];
			int s = atomic_load(&p->loop->sleeping);
			if (s == XTC__SLEEP_POLL || s == XTC__SLEEP_FUTEX) {
				xtc__carrier_kick(p);
				break;
			}
		}
	}
	return 1;
}

/* Demotion (loop_int.h): a preempted migratable task goes to the deque
 * instead, with the peer woken, when a peer carrier is parked and could run
 * it now; otherwise the owner demotes it. */
int xtc__exec_offer(xtc_loop_t *l, xtc_task_t *t)
{
	xtc__carrier_t *c = xtc__carrier_of(l);
	xtc_exec_t *e;

	if (c == NULL || c->exec->n < 2 || t->pinned || t->sched_class != NULL)
		return 0;
	e = c->exec;
	for (int i = 1; i < e->n; i++) {
		xtc__carrier_t *p = &e->c[(c->idx + i) % e->n];
		int s = atomic_load_explicit(&p->loop->sleeping,
		    memory_order_relaxed);
		if (s != XTC__SLEEP_POLL && s != XTC__SLEEP_FUTEX)
			continue;
		/* READY before a thief can see it in the deque */
		atomic_store_explicit(&t->state, XTC__T_READY,
		    memory_order_relaxed);
		if (!exec_enqueue(l, t))
			return 0; /* deque full: demote */
		xtc__carrier_kick(p);
		return 1;
	}
	return 0;
}

/* The slice a run on l gets: the adaptive one or the executor's, a
 * latency class budget may only shorten it. */
static int64_t run_slice(const xtc_loop_t *l, const xtc__carrier_t *c)
{
	int64_t q = atomic_load_explicit(&xtc__preempt_adaptive_slice,
	    memory_order_relaxed);

	if (q <= 0)
		q = c->exec->preempt_ns;
	if (l->lat_budget > 0 && l->lat_budget < q)
		q = l->lat_budget;
	return q;
}

/* A turn among demoted work: DEMOTED_SLICES slices, and at least
 * DEMOTED_COST_X times what a preemption costs this machine (the measured
 * EWMA: fn_quantum.c floors the adaptive quantum with it too). Between long tasks
 * a preemption only trades one for another: its cost is pure loss, which
 * this keeps near 0.5% of the carrier unless DEMOTED_MAX_SLICES binds
 * (two spinners sharing a carrier, on a guest where a preemption costs
 * 45-60 us, bench_preempt loss: 12.5% at a 100 us slice with 4-slice
 * turns, 4.9-5.3% with 20 costs a turn, 2.5-4.1% now (the 16-slice cap);
 * at 200 us 4.5-5.5% -> 0.8-2.5%, at 1 ms 1.0-1.1% -> median 0.6%).
 * A turn as long as 10 ms between CPU-bound fibers is the usual
 * granularity of time sharing (Go forces a preemption after 10 ms). New
 * arrivals are not kept waiting by it: they make the run contended, and a
 * contended run ends at its ordinary slice. */
int64_t xtc__exec_demoted_turn(int64_t q, int64_t cost)
{
	int64_t t = DEMOTED_SLICES * q, m = DEMOTED_MAX_SLICES * q;

	if (cost <= 0)
		return t;
	if (cost >= m / DEMOTED_COST_X) /* also keeps the product in range */
		return m;
	return cost * DEMOTED_COST_X > t ? cost * DEMOTED_COST_X : t;
}

static int64_t demoted_turn(int64_t q)
{
	/* the simulator's virtual time has no preemption cost (and its runs
	 * must not depend on the machine's) */
	return xtc__exec_demoted_turn(q, xtc__up.clock != NULL ? 0 :
	    atomic_load_explicit(&xtc__preempt_cost_ewma, memory_order_relaxed));
}

/*
 * Publish the run's preemption deadline. A run with nothing to compete
 * with is published "alone" (preempt_int.h: only its hard deadline counts
 * until someone contends), then the loop announces it through `sleeping`
 * (XTC__SLEEP_RUN) and re-checks the inbox and the ring: a producer that
 * posted before the announcement is seen here, one that posts after it
 * finds XTC__SLEEP_RUN and contends through xtc__exec_ring_run (Dekker on
 * `sleeping`, as for a parked carrier). The alone state is published
 * first, so a contention can never be overwritten by it.
 */
static void preempt_begin(xtc_loop_t *l, xtc_task_t *t, int64_t now)
{
	xtc__carrier_t *c = xtc__carrier_of(l);
	xtc__pslot_t *s = xtc__preempt_slot();
	int64_t until;
	xtc__run_mode_t mode = XTC__RUN_ALONE;
	int cut = t->cut;

	t->cut = 0;
	/* arrivals not admitted yet compete too: published contended at
	 * once, not alone and then contended by the re-check below (two
	 * timer syscalls per run of a drained backlog) */
	if (c == NULL || s == NULL || xtc__exec_others_ready(l) ||
	    atomic_load_explicit(&l->inbox, memory_order_relaxed) != NULL ||
	    xtc__carrier_ring_nonempty(c))
		goto contended;
	until = xtc__timers_next(l);
	if (until >= 0 && until <= now)
		goto contended; /* a due timer is other work */
	if (l->low_head != NULL) {
		/* Only demoted (long) work competes: the demoted level is
		 * served round-robin in turns of DEMOTED_SLICES slices or more
		 * (demoted_turn: a multilevel queue's longer quantum below,
		 * stretched where a preemption is expensive), and the run stays
		 * "alone" otherwise, so new work that arrives still gets the
		 * carrier at the ordinary slice end. */
		int64_t q = run_slice(l, c), turn = demoted_turn(q);
		if (q > 0 && (until < 0 ||
		              xtc__deadline_after(now, turn) < until)) {
			until = xtc__deadline_after(now, turn);
			/* long work taking its turn among demoted work is
			 * timed by the carrier (one arm per turn); a fresh run
			 * (most are short) by producers' polls and the net */
			mode = t->svc_ns >= q / XTC__SLICE_EARLY_DIV ?
			    XTC__RUN_ALONE_TURN : XTC__RUN_ALONE_FRESH;
		}
	}
	xtc__preempt_run_begin(&t->fiber, l->lat_budget, mode, now,
	    until < 0 ? INT64_MAX : until);
	atomic_store(&l->sleeping, XTC__SLEEP_RUN);
	if (atomic_load(&l->inbox) != NULL || xtc__carrier_ring_nonempty(c))
		xtc__preempt_contend_polled(s);
	return;
contended:
	/* producers are active (their work waits, or what competes was just
	 * drained from the ring, or they were seen within the last slice:
	 * the ready tasks of a drained burst run long after the burst's
	 * input_until): their next submissions time this run. A guess that
	 * no producer honours costs one late slice end (the monitor's net);
	 * timing every such run with the carrier's timer cost a near re-arm
	 * (12 us on a slow hypervisor) per few short runs: 3k arms a second
	 * at 30% A1 load. */
	/* the carrier's own record first: the ring's tail is written by
	 * every submission, so reading it per run is a cache miss per run
	 * (the producers' core owns the line) */
	int producers = c != NULL && s != NULL &&
	    (l->runs <= c->input_until ||
	     atomic_load_explicit(&l->inbox, memory_order_relaxed) != NULL ||
	     xtc__carrier_ring_nonempty(c));
	if (producers)
		c->input_at = now;
	if (producers || (c != NULL && s != NULL && c->input_at != 0 &&
	    now - c->input_at < run_slice(l, c)))
		xtc__preempt_run_begin(&t->fiber, l->lat_budget,
		    XTC__RUN_POLLED, now, 0);
	/* cut at its last slice end, after at least the slice-end window of
	 * this service: it will run long again. Work that yields by itself
	 * keeps the window: its whole slice would cost a timer syscall per
	 * dispatch (two class procs yielding to each other paid 12 us a
	 * yield) */
	else if (c != NULL && cut && t->svc_ns > 0 &&
	    t->svc_ns >= run_slice(l, c) / XTC__SLICE_EARLY_DIV)
		xtc__preempt_run_begin(&t->fiber, l->lat_budget,
		    XTC__RUN_FULL, now, 0);
	else
		xtc__preempt_run_begin(&t->fiber, l->lat_budget,
		    XTC__RUN_AT, now, 0);
}

void xtc__exec_ring_run(xtc_loop_t *l)
{
	xtc__carrier_t *c = xtc__carrier_of(l);

	if (c != NULL)
		xtc__preempt_contend(atomic_load_explicit(&c->pslot,
		    memory_order_relaxed));
}

/* What the executor adds to the pick of its loops (sched.c routes). */
const xtc__sched_exec_t xtc__exec_ops_solo = {
	.preempt_begin = preempt_begin,
};
const xtc__sched_exec_t xtc__exec_ops_steal = {
	.def_ready = exec_def_ready,
	.def_pick = exec_def_pick,
	.enqueue = exec_enqueue,
	.preempt_begin = preempt_begin,
};

/* The loop reaches the executor through its upcalls (loop_int.h): the
 * carrier ring and the offer of a woken task to an idle carrier. */
__attribute__((constructor)) static void exec_upcalls(void)
{
	xtc__up.exec_ring_run = xtc__exec_ring_run;
	xtc__up.exec_offer = xtc__exec_offer;
}
