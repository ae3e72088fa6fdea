/*
 * exec.c - the multi-loop executor: carriers, submission, stealing and
 * quiescence. What runs next on a loop is sched.c's; the executor registers
 * its default-lane deque and its preemption bookkeeping there.
 *
 * Model: an executor owns n loops. xtc_exec_run starts one C-created carrier
 * thread per loop (Go never owns a carrier, so fibers never run on a Go
 * thread); each carrier claims its loop and alternates between draining its
 * bounded submission ring and taking one loop step. Everything another
 * thread does to a loop goes through that loop's MPSC inbox (spawns, wakes,
 * messages: loop.c) or its submission ring (xtc_exec_submit); a carrier that
 * runs out of work tries to steal, spins, then parks (Loom's carrier
 * design: one MPSC queue and one poller per carrier, spin then park).
 *
 * Parking: the carrier publishes how it sleeps in loop->sleeping and
 * re-checks its inputs (Dekker with the producers, who publish their work
 * with a seq_cst RMW and then read the word). With an fd armed it blocks
 * in its poller and the first producer writes the eventfd; with none (the
 * common case for a compute carrier) it sleeps on a futex on that word and
 * the first producer's FUTEX_WAKE is the whole wake path: no eventfd
 * write, no poll completion, no read on the woken side (measured: spawn to
 * first run 7 -> 3 us p50 from a C thread here). The producer exchanges the
 * word to 0, so later producers of the same park pay no syscall. The spin
 * before parking is adaptive: a carrier whose recent idle gaps ended within
 * SPIN_MAX_NS spins up to twice that gap (a busy producer's next item is
 * caught with no kernel wake on either side); one with long gaps spins only
 * SPIN_ROUNDS pauses, so an idle CPU is not burnt. The waker stamps the
 * ring (loop->wake_at) and the woken carrier counts how late it resumed
 * (xtc_exec_loop_stats: parks, wakes, wake_ns, slow_wakes, wake_max_ns): on a
 * 2-vCPU guest some wake-ups resume 2-9 ms late whatever the scheduler
 * does, and a benchmark must be able to tell. Where that matters more than
 * a CPU, xtc_exec_set_spin makes an idle carrier poll longer first (after
 * the quiescence check, capped at its next loop timer and steal poll, so
 * neither is late and a run still ends). A parked carrier also
 * asks the kernel for a short slice (kslice_*), so its wake-up preempts
 * the thread that woke it instead of queueing behind it (a goroutine's
 * spawn -> first run: 12 -> 4 us p50 here); it drops it when busy.
 * Carriers start spread over the caller's CPUs and then widen to its whole
 * mask (spread_start: a placement, not a pinning).
 * While idle (steal, spins, quiescence check; ended before it parks) a
 * carrier watches the receiver that parked on its loop last
 * (loop_int.h, watched wakes): a cross-loop send to it moves only the
 * receiver's slot line, not the inbox's lines, and the spins see it.
 * Begun at the start of the idle spell, not of the spin, so the reply of
 * a fast peer is not missed while the carrier still tries to steal
 * (bench_xloop: 7-80% of wakes taken that way when it began at the spin,
 * ~100% from the idle start; round trip, carriers on one core: 323-339
 * -> 274-285 ns, on two cores: 1126-1215 -> 861-880 ns, floor ~480 ns).
 *
 * Preemption: a run that starts with nothing else to run on its loop (no
 * ready task, and nothing in its inbox or submission ring either) is
 * published "alone" (preempt_int.h): the monitor leaves it alone until
 * other work appears. The carrier announces it in loop->sleeping
 * (XTC__SLEEP_RUN), so the first producer after that makes the run
 * preemptible at its slice end (xtc__exec_ring_run), the same way it would
 * wake a parked carrier; work the run itself makes ready does the same
 * through the enqueue hook (sched.c), and a timer caps the run's hard
 * deadline. Every later producer polls the run (carrier_kick: a few loads
 * and a clock read while the carrier runs, a direct signal once the run
 * overran). A run that starts contended by producers' work (in the ring or
 * the inbox, or drained from the ring within the last few runs,
 * input_until) is timed by those polls alone, with the monitor's net
 * behind them (preempt_int.h: run_begin_polled): a timer syscall per
 * drained batch cost more than the requests on a slow hypervisor.
 *
 * Stealing: ready tasks that are neither pinned nor in a class go to the
 * loop's Chase-Lev deque (deque_int.h) instead of its private FIFO; the owner
 * takes from the top too (FIFO order, so yields stay fair), idle peers steal
 * from the top. A task is only ever READY there, i.e. switched out at a yield
 * or park point, so a migratable proc moves only at such points; the thief
 * re-homes it (xtc__task_adopt) before it runs.
 *
 * Quiescence (run returns): a carrier whose loop is locally quiescent
 * publishes an idle generation; it then checks that every carrier shows a
 * non-zero idle generation, that every inbox and ring is empty, and that
 * every generation is unchanged since the first pass. A carrier clears its
 * generation before it drains or steals anything, so during the window
 * between the passes no loop processed work, nobody could post, and every
 * queue was seen empty: nothing can ever run again (a foreign thread that
 * submits concurrently with quiescence races the end of the run, as the
 * reference allows). Service mode skips the check.
 *
 * Alternatives rejected: a global live counter bumped on every spawn and
 * reap (a shared cache line on the hottest path); a condition variable per
 * carrier (a mutex on the producer path; the futex on the word the
 * producers already read is the same wake without it); spinning until the
 * next item whatever the history (burns a core of a 2-core machine);
 * yielding the producer's CPU after a wake (helps only when the kernel
 * queues the carrier behind the producer, costs the producer a syscall;
 * the short kernel slice gets the same effect on the carrier's side).
 */
#include "rtcode_int.h" /* first: this file is runtime code */
#include <errno.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "sched_int.h"
#include "deque_int.h"
#include "loop_io_int.h"
#include "preempt_int.h"
#include "xtc_batch.h" /* xtc_batch_loop_for_device: placement is ours */

#define EXEC_MAGIC   0x45584543u /* "EXEC" */
#define MAX_LOOPS    1024
#define DEQUE_CAP    4096
#define SPIN_ROUNDS  256        /* ~ a few us of pause before parking */
#define SPIN_MAX_NS  20000      /* adaptive spin: longest window */
#define LAT_SLICE_NS 100000     /* kernel slice asked for while parked */
#define LAT_BUSY_NS  1000000    /* busy this long: the default slice again */
#define LAT_CHECK_STEPS 8       /* busy steps between two clock checks */
#define DRAIN_BATCH  256        /* submissions run at once by an idle loop */
#define DEMOTED_SLICES 4        /* slices per turn among demoted work only, */
#define DEMOTED_COST_X 200      /* and at least this many preemption costs */
#define DEMOTED_MAX_SLICES 16   /* up to this many slices */
#define STEAL_POLL_NS 1000000   /* idle re-steal interval (1 ms) */
#define STEAL_POLL_MAX_SHIFT 5  /* backoff cap: 32 ms */

#define cpu_relax() XTC__CPU_RELAX() /* base_int.h */

/* One submission ring slot (bounded MPSC, per-slot sequence numbers). */
typedef struct sub_slot {
	_Atomic uint64_t seq;
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
	/* parks and their wake-ups (carrier-written, read relaxed by
	 * xtc_exec_loop_stats) */
	uint64_t parks, wakes, slow_wakes;
	int64_t wake_ns, wake_max;
	_Atomic int steal_inflight; /* a stolen task is on its way here */
	xtc__deque_t dq;
	_Alignas(64) _Atomic uint64_t idle_gen; /* 0 = busy */
	_Alignas(64) _Atomic uint64_t sub_tail; /* producers */
	_Alignas(64) _Atomic uint64_t sub_head; /* consumer */
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
};

static int exec_ok(const xtc_exec_t *e)
{
	return e != NULL && e->magic == EXEC_MAGIC;
}

static xtc__carrier_t *carrier_of(const xtc_loop_t *l)
{
	return l->up.exec != NULL ? l->up.carrier : NULL;
}

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
	xtc__carrier_t *c = carrier_of(l);
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
	return xtc__deque_size(&carrier_of(l)->dq) > 0;
}

/* Wake a parked carrier (Dekker with carrier_park: the caller published
 * its work with a seq_cst RMW before this seq_cst load, the carrier stores
 * "sleeping" before re-checking). The exchange makes only the first waker
 * after a park pay the futex or eventfd syscall. */
static void carrier_kick(xtc__carrier_t *c)
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

/* An untagged task became ready on a loop of a multi-loop executor (the
 * router in sched.c handled classes and preemption contention). */
static int exec_enqueue(xtc_loop_t *l, xtc_task_t *t)
{
	xtc__carrier_t *c;
	uint64_t seq;

	c = carrier_of(l);
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
				carrier_kick(p);
				break;
			}
		}
	}
	return 1;
}

static int ring_nonempty(xtc__carrier_t *c);

/* Ready work other than the run about to start, visible to the owner
 * (demoted work is not: the drain budget admits submissions ahead of it). */
static int others_ready(xtc_loop_t *l)
{
	return l->rq_head != NULL || xtc__sched_busy(l);
}

/* Demotion (loop_int.h): a preempted migratable task goes to the deque
 * instead, with the peer woken, when a peer carrier is parked and could run
 * it now; otherwise the owner demotes it. */
int xtc__exec_offer(xtc_loop_t *l, xtc_task_t *t)
{
	xtc__carrier_t *c = carrier_of(l);
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
		carrier_kick(p);
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
 * EWMA: fn.c floors the adaptive quantum with it too). Between long tasks
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
	return xtc__exec_demoted_turn(q, xtc__clock_hook != NULL ? 0 :
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
	xtc__carrier_t *c = carrier_of(l);
	xtc__pslot_t *s = xtc__preempt_slot();
	int64_t until;
	int lazy = 0;
	int cut = t->cut;

	t->cut = 0;
	/* arrivals not admitted yet compete too: published contended at
	 * once, not alone and then contended by the re-check below (two
	 * timer syscalls per run of a drained backlog) */
	if (c == NULL || s == NULL || others_ready(l) ||
	    atomic_load_explicit(&l->inbox, memory_order_relaxed) != NULL ||
	    ring_nonempty(c))
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
		if (q > 0 && (until < 0 || now + turn < until)) {
			until = now + turn;
			/* long work taking its turn among demoted work is
			 * timed by the carrier (one arm per turn); a fresh run
			 * (most are short) by producers' polls and the net */
			lazy = t->svc_ns >= q / XTC__SLICE_EARLY_DIV ? 1 : 4;
		}
	}
	xtc__preempt_run_begin_alone(&t->fiber, l->lat_budget, now,
	    until < 0 ? INT64_MAX : until, lazy);
	atomic_store(&l->sleeping, XTC__SLEEP_RUN);
	if (atomic_load(&l->inbox) != NULL || ring_nonempty(c))
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
	     ring_nonempty(c));
	if (producers)
		c->input_at = now;
	if (producers || (c != NULL && s != NULL && c->input_at != 0 &&
	    now - c->input_at < run_slice(l, c)))
		xtc__preempt_run_begin_polled(&t->fiber, l->lat_budget, now);
	/* cut at its last slice end, after at least the slice-end window of
	 * this service: it will run long again. Work that yields by itself
	 * keeps the window: its whole slice would cost a timer syscall per
	 * dispatch (two class procs yielding to each other paid 12 us a
	 * yield) */
	else if (c != NULL && cut && t->svc_ns > 0 &&
	    t->svc_ns >= run_slice(l, c) / XTC__SLICE_EARLY_DIV)
		xtc__preempt_run_begin_full(&t->fiber, l->lat_budget, now);
	else
		xtc__preempt_run_begin_at(&t->fiber, l->lat_budget, now);
}

void xtc__exec_ring_run(xtc_loop_t *l)
{
	xtc__carrier_t *c = carrier_of(l);

	if (c != NULL)
		xtc__preempt_contend(atomic_load_explicit(&c->pslot,
		    memory_order_relaxed));
}

/* What the executor adds to the pick of its loops (sched.c routes). */
static const xtc__sched_exec_t exec_ops_solo = {
	.preempt_begin = preempt_begin,
};
static const xtc__sched_exec_t exec_ops_steal = {
	.def_ready = exec_def_ready,
	.def_pick = exec_def_pick,
	.enqueue = exec_enqueue,
	.preempt_begin = preempt_begin,
};

/* ------------------------------------------------------------------ */
/* Submission ring                                                      */
/* ------------------------------------------------------------------ */

static int ring_init(xtc__carrier_t *c)
{
	c->ring = calloc(XTC_EXEC_SUBMIT_CAP, sizeof(*c->ring));
	if (c->ring == NULL)
		return XTC_E_NOMEM;
	for (uint64_t i = 0; i < XTC_EXEC_SUBMIT_CAP; i++)
		atomic_init(&c->ring[i].seq, i);
	atomic_init(&c->sub_tail, 0);
	atomic_init(&c->sub_head, 0);
	return XTC_OK;
}

static int ring_push(xtc__carrier_t *c, xtc_exec_fn fn, void *arg)
{
	uint64_t pos = atomic_load_explicit(&c->sub_tail, memory_order_relaxed);
	sub_slot_t *s;

	for (;;) {
		s = &c->ring[pos & (XTC_EXEC_SUBMIT_CAP - 1)];
		uint64_t seq = atomic_load_explicit(&s->seq,
		    memory_order_acquire);
		int64_t dif = (int64_t)(seq - pos);
		if (dif == 0) {
			/* seq_cst: the Dekker of submit_once */
			if (atomic_compare_exchange_weak_explicit(&c->sub_tail,
			    &pos, pos + 1, memory_order_seq_cst,
			    memory_order_relaxed))
				break;
		} else if (dif < 0) {
			return 0; /* full */
		} else {
			pos = atomic_load_explicit(&c->sub_tail,
			    memory_order_relaxed);
		}
	}
	s->fn = fn;
	s->arg = arg;
	atomic_store_explicit(&s->seq, pos + 1, memory_order_release);
	return 1;
}

static int ring_nonempty(xtc__carrier_t *c)
{
	return atomic_load(&c->sub_tail) != atomic_load(&c->sub_head);
}

/* Owner: run up to max submissions on the carrier stack. */
static int ring_drain(xtc__carrier_t *c, int max)
{
	uint64_t head = atomic_load_explicit(&c->sub_head, memory_order_relaxed);
	int n = 0;

	while (n < max) {
		sub_slot_t *s = &c->ring[head & (XTC_EXEC_SUBMIT_CAP - 1)];
		xtc_exec_fn fn;
		void *arg;

		if (atomic_load_explicit(&s->seq, memory_order_acquire) !=
		    head + 1)
			break; /* empty, or a producer is mid-publish */
		fn = s->fn;
		arg = s->arg;
		atomic_store_explicit(&s->seq, head + XTC_EXEC_SUBMIT_CAP,
		    memory_order_release);
		head++;
		fn(arg);
		n++;
	}
	if (n > 0) { /* emptiness checks only: once per batch */
		atomic_store_explicit(&c->sub_head, head, memory_order_release);
		c->input_until = c->loop->runs + (uint64_t)n + 1;
	}
	return n;
}

/*
 * Admission pacing. A loop step runs one task, a drain can start
 * DRAIN_BATCH. Draining a full batch before every step let submissions in
 * up to 256 times faster than the loop ran them: under a steady stream
 * (open-loop arrivals) the live fibers grew without bound, every spawn past
 * the stack cache and overflow pool mapped a fresh stack (mmap, mprotect,
 * first-touch faults, munmap with a TLB shootdown at exit), the per-request
 * cost rose above the arrival gap and the backlog never drained (xtcbench
 * tail, A1 from 30% load; a flood of submit->spawn ran out of stacks).
 * So while the loop has ready work it admits at most as many submissions
 * as it ran steps since the last drain (at least one: the ring is never
 * starved); an idle loop takes a whole batch. A backlog then waits in the
 * bounded ring, holding no stack, and producers see XTC_E_AGAIN
 * (backpressure) instead of the carrier collapsing.
 */
static int drain_budget(xtc__carrier_t *c)
{
	int n;

	if (!others_ready(c->loop))
		n = DRAIN_BATCH;
	else
		n = c->drain_credit > 0 ? c->drain_credit : 1;
	c->drain_credit = 0;
	return n;
}

/* ------------------------------------------------------------------ */
/* Carriers                                                             */
/* ------------------------------------------------------------------ */

static uint64_t rng_next(uint64_t *s)
{
	/* xorshift64*: victim choice only, quality is not critical */
	uint64_t x = *s;
	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*s = x;
	return x * 0x2545f4914f6cdd1dull;
}

/* Owner, spinning: a submission is published in the next slot to drain.
 * Reading that slot's sequence instead of the ring's tail keeps the poll
 * off the line every producer CASes per submission: a carrier that spun
 * on the tail took that line back between any two submissions (one
 * producer of trivial callbacks into a one-loop executor, bench_exec
 * submit: 9-11 M/s, 3.3-7.5 once the carrier's line layout made its drain
 * faster and its spins more frequent, 20-26 with this). A slot
 * claimed but not yet published reads empty here; the park re-check
 * (has_input) compares tail and head, so it is never missed. */
static int ring_peek(xtc__carrier_t *c)
{
	uint64_t head = atomic_load_explicit(&c->sub_head, memory_order_relaxed);

	return atomic_load_explicit(&c->ring[head & (XTC_EXEC_SUBMIT_CAP - 1)].seq,
	                            memory_order_relaxed) == head + 1;
}

static int stopping(xtc__carrier_t *c)
{
	return atomic_load_explicit(&c->exec->stop, memory_order_relaxed) ||
	    atomic_load_explicit(&c->loop->stop, memory_order_relaxed);
}

/* the spin's poll: a hint, the park's re-check below is the Dekker */
static int spin_input(xtc__carrier_t *c)
{
	return atomic_load_explicit(&c->loop->inbox, memory_order_relaxed) !=
	    NULL || ring_peek(c) || stopping(c);
}

static int has_input(xtc__carrier_t *c)
{
	return atomic_load(&c->loop->inbox) != NULL || ring_nonempty(c) ||
	    stopping(c);
}

/*
 * Migration of a stolen task. Its bookkeeping (the victim's live count and
 * task list) is owner-only, so the move is a two-hop handoff through the
 * inboxes, using the task's own queue link (held by whoever holds the READY
 * task, so no allocation): the thief posts it to the victim, the victim
 * unlinks it and posts it to the thief, the thief links it and makes it
 * ready. Until the victim lets go the task counts as the victim's, then it
 * sits in the thief's inbox: quiescence never misses it, and a wake that
 * arrives meanwhile finds it READY and is latched. A thief being finalised
 * when the task arrives tears it down like its own unfinished tasks
 * (xtc__loop_adopt_orphan: detach hook, abandon, cleanup), so an awaiter
 * gets XTC_E_ABORTED; a thief already finalised refuses the post and the
 * victim keeps the task.
 */
static void migrate_in(xtc_loop_t *l, xtc__post_t *p)
{
	xtc_task_t *t = (xtc_task_t *)p;
	xtc__carrier_t *c = carrier_of(l);

	if (l->magic != XTC__LOOP_LIVE) {
		/* Thief finalising; the task is on no list and may be awaited:
		 * the teardown of any unfinished task (detach, abandon, cleanup). */
		xtc__loop_adopt_orphan(l, t);
		return;
	}
	xtc__task_all_link(l, t);
	l->live_tasks++;
	if (c != NULL)
		atomic_store(&c->steal_inflight, 0);
	atomic_fetch_add_explicit(&l->up.steals, 1, memory_order_relaxed);
	xtc__loop_make_ready(l, t);
}

static void migrate_out(xtc_loop_t *l, xtc__post_t *p)
{
	xtc_task_t *t = (xtc_task_t *)p;
	xtc_loop_t *to = t->xq.to;

	if (l->magic != XTC__LOOP_LIVE)
		return; /* still on our task list: fini releases it */
	/* A task woken early from a timed or fd park still has its timer in
	 * our heap and its fd in our poller; only we may touch those, so end
	 * the registration here (the resumed park finds nothing armed). */
	if (t->park_armed) {
		xtc__timer_disarm(&t->park_timer);
		if (t->park_io != NULL) {
			xtc__io_disarm(l, t->park_io);
			t->park_io = NULL;
		}
		t->park_armed = 0;
	}
	xtc__task_all_unlink(l, t);
	l->live_tasks--;
	/* Atomic: wakers and awaiters read it concurrently (xtc__task_loop). */
	xtc__task_set_loop(t, to);
	t->node.fn = migrate_in;
	if (t->admitted) { /* not run yet: its admission moves with it */
		atomic_fetch_add_explicit(&to->remote_pending, 1,
		                          memory_order_relaxed);
		xtc__loop_admit_done(l);
	}
	if (xtc__loop_post(to, &t->node) != XTC_OK) {
		/* thief gone: keep it here */
		xtc__carrier_t *thief = carrier_of(to);
		if (thief != NULL)
			atomic_store(&thief->steal_inflight, 0);
		if (t->admitted) {
			atomic_fetch_add_explicit(&l->remote_pending, 1,
			                          memory_order_relaxed);
			xtc__loop_admit_done(to);
		}
		xtc__task_set_loop(t, l);
		xtc__task_all_link(l, t);
		l->live_tasks++;
		xtc__loop_make_ready(l, t);
	}
}

/* Take one task from a random busy peer and start moving it here. */
static int try_steal(xtc__carrier_t *c)
{
	xtc_exec_t *e = c->exec;
	int start, n = e->n;

	if (n < 2 || atomic_load_explicit(&c->steal_inflight,
	    memory_order_relaxed))
		return 0;
	start = (int)(rng_next(&c->rng) % (uint64_t)n);
	for (int k = 0; k < n; k++) {
		xtc__carrier_t *v = &e->c[(start + k) % n];
		xtc_task_t *t;

		if (v == c || xtc__deque_size(&v->dq) == 0)
			continue;
		t = xtc__deque_steal(&v->dq);
		if (t == NULL)
			continue;
		atomic_store(&c->steal_inflight, 1);
		t->xq.to = c->loop;
		t->node.fn = migrate_out;
		if (xtc__loop_post(v->loop, &t->node) != XTC_OK)
			atomic_store(&c->steal_inflight, 0); /* victim finalised */
		return 1;
	}
	return 0;
}

/* The three-pass quiescence check described at the top of the file. */
static int exec_quiescent(xtc_exec_t *e)
{
	uint64_t gens[64], *g = gens;
	int q = 1;

	if (e->n > 64 && (g = malloc(sizeof(*g) * (size_t)e->n)) == NULL)
		return 0;
	for (int i = 0; i < e->n && q; i++)
		q = (g[i] = atomic_load(&e->c[i].idle_gen)) != 0;
	for (int i = 0; i < e->n && q; i++)
		q = atomic_load(&e->c[i].loop->inbox) == NULL &&
		    !ring_nonempty(&e->c[i]);
	for (int i = 0; i < e->n && q; i++)
		q = atomic_load(&e->c[i].idle_gen) == g[i];
	if (g != gens)
		free(g);
	return q;
}

/* Stop and errors: unconditional (a carrier between its re-check and the
 * poller still finds the eventfd set). */
static void exec_wake_all(xtc_exec_t *e)
{
	for (int i = 0; i < e->n; i++) {
		carrier_kick(&e->c[i]);
		xtc__io_wakeup(e->c[i].loop);
	}
}

static int64_t park_timeout(xtc__carrier_t *c)
{
	xtc_exec_t *e = c->exec;
	int64_t next = xtc__timers_next(c->loop), t = -1, poll;

	if (next >= 0) {
		t = next - xtc__now();
		if (t < 0)
			t = 0;
	}
	if (e->n > 1) {
		/* idle peers look for stealable work again after a while */
		poll = STEAL_POLL_NS;
		if (atomic_load_explicit(&e->backoff, memory_order_relaxed)) {
			int sh = c->idle_turns < STEAL_POLL_MAX_SHIFT
			    ? c->idle_turns : STEAL_POLL_MAX_SHIFT;
			poll <<= sh;
		}
		if (t < 0 || poll < t)
			t = poll;
	}
	return t;
}

/* Adaptive spin: a carrier whose recent idle gaps were short (input came
 * back within SPIN_MAX_NS) spins up to twice that gap, so a busy producer's
 * next submission is caught without a kernel wake on either side; a
 * carrier whose gaps are long spins only SPIN_ROUNDS pauses, so an idle
 * CPU is never burnt for nothing. Clock reads happen on the idle path
 * only. */
static int64_t spin_window(const xtc__carrier_t *c)
{
	int64_t w = 2 * c->gap_avg;

	return c->gap_avg < SPIN_MAX_NS ? (w < SPIN_MAX_NS ? w : SPIN_MAX_NS)
	    : 0;
}

/* An idle gap from t0 ended by input that arrived at `at` (0: now). A
 * parked carrier's gap ends when the producer rang, not when the kernel
 * got round to waking it: counting the wake-up's latency made one park
 * feed the next (the average passed SPIN_MAX_NS, the spin stopped, every
 * message of a cross-loop ping-pong paid a futex wake on both sides and
 * the round trip went from 1.2 us to 5-23 us). */
static void gap_record(xtc__carrier_t *c, int64_t t0, int64_t at)
{
	int64_t now = xtc_clock_mono();
	int64_t gap = (at > t0 && at < now ? at : now) - t0;

	c->busy_since = now;
	c->busy_steps = 0;
	if (gap > 4 * SPIN_MAX_NS)
		gap = 4 * SPIN_MAX_NS;
	c->gap_avg += (gap - c->gap_avg) / 4;
}

/* 1 when input arrived within the spin window w, counted from t0
 * (recorded). */
static int carrier_spin(xtc__carrier_t *c, int64_t t0, int64_t w)
{
	/* the watch carrier_idle began (loop_int.h, watched wakes) */
	atomic_uchar *f = c->loop->watch_flag;

	for (int i = 0; i < SPIN_ROUNDS; i++) {
		if (spin_input(c) || xtc__loop_watch_hit(f))
			goto caught;
		cpu_relax();
	}
	while (w > 0) {
		for (int i = 0; i < 32; i++) {
			if (spin_input(c) || xtc__loop_watch_hit(f))
				goto caught;
			cpu_relax();
		}
		if (xtc_clock_mono() - t0 >= w)
			break;
	}
	return 0;
caught:
	gap_record(c, t0, 0);
	return 1;
}

/* io_uring batches SQEs (a disarm's POLL_REMOVE) until the next poll:
 * submit them before sleeping outside the poller, or the kernel keeps the
 * cancelled poll, and the file it holds, until then. No syscall when
 * nothing is queued; nothing at all for a loop that never armed an fd. */
static void io_flush(xtc_loop_t *l)
{
#ifdef XTC_HAVE_URING
	if (l->io->req_all != NULL && l->io->ops == &xtc__io_uring_ops)
		(void)xtc__io_poll(l, 0);
#else
	(void)l;
#endif
}

/* A producer rang this parked carrier at `at` (0: it woke for another
 * reason): count the wake and how late it came. On a hypervisor that lets
 * an idle vCPU sleep, a wake-up now and then comes milliseconds late
 * while the producers' work waits (measured on a 2-vCPU guest: futex
 * waits that ended 2-9 ms after the wake, a few per second at 10% load,
 * with and without preemption); the counters let a benchmark tell those
 * from its own scheduling. */
static void wake_note(xtc__carrier_t *c, int64_t at)
{
	if (at == 0)
		return;
	int64_t lat = xtc_clock_mono() - at;
	__atomic_store_n(&c->wakes, c->wakes + 1, __ATOMIC_RELAXED);
	__atomic_store_n(&c->wake_ns, c->wake_ns + lat, __ATOMIC_RELAXED);
	if (lat >= XTC_EXEC_SLOW_WAKE_NS)
		__atomic_store_n(&c->slow_wakes, c->slow_wakes + 1,
		                 __ATOMIC_RELAXED);
	if (lat > c->wake_max)
		__atomic_store_n(&c->wake_max, lat, __ATOMIC_RELAXED);
}

/* Park until input, a timer or the steal poll. With no fd to watch the
 * carrier sleeps on a futex on loop->sleeping (a producer's FUTEX_WAKE is
 * the whole wake path); otherwise in its poller, woken by the eventfd.
 * Returns when a producer rang it (0: it was not rung). */
static int64_t carrier_park(xtc__carrier_t *c)
{
	int64_t rang = 0;
	xtc_loop_t *l = c->loop;
	int how = l->io->armed > 0 || l->io->pending != NULL ? XTC__SLEEP_POLL
	    : XTC__SLEEP_FUTEX;
	int64_t tmo;

	if (how == XTC__SLEEP_FUTEX)
		io_flush(l);

	/* a stamp left by a waker that rang after the last wake-up was
	 * read belongs to no park */
	atomic_store_explicit(&l->wake_at, 0, memory_order_relaxed);
	/* Dekker with the producers: publish "sleeping", then re-check. */
	atomic_store(&l->sleeping, how);
	if (!has_input(c)) {
		__atomic_store_n(&c->parks, c->parks + 1, __ATOMIC_RELAXED);
		tmo = park_timeout(c);
		if (how == XTC__SLEEP_POLL) {
			(void)xtc__io_poll(l, tmo);
		} else {
			struct timespec ts, *tp = NULL;
			if (tmo >= 0) {
				ts.tv_sec = tmo / 1000000000;
				ts.tv_nsec = tmo % 1000000000;
				tp = &ts;
			}
			/* returns at once unless the word still says FUTEX */
			xtc__futex_wait(&l->sleeping, XTC__SLEEP_FUTEX, tp);
		}
		rang = atomic_exchange_explicit(&l->wake_at, 0,
		                                memory_order_relaxed);
		wake_note(c, rang);
	}
	atomic_store(&l->sleeping, 0);
	return rang;
}

/*
 * Kernel slice. Woken onto a CPU that runs another thread (on a small
 * machine, typically the very Go M that spawned the work), a carrier with
 * the default slice waits until that thread blocks or its slice ends:
 * 8-15 us of a goroutine's spawn -> first run here. EEVDF (Linux 6.12+)
 * lets a thread ask for a shorter slice (sched_attr.sched_runtime, no
 * privilege): its wake-up then preempts the current thread, and its CPU
 * share is unchanged. A parked carrier asks for LAT_SLICE_NS; once it has
 * been busy for LAT_BUSY_NS it goes back to the default so that a compute
 * carrier is not chopped into short slices when it competes for its CPU.
 * One syscall per switch, none while a carrier stays in either regime;
 * older kernels accept and ignore the field. A carrier created under a
 * real-time or idle policy is left alone.
 */
struct kslice_attr {
	uint32_t size, policy;
	uint64_t flags;
	int32_t nice;
	uint32_t prio;
	uint64_t runtime, deadline, period;
};

static void kslice_init(xtc__carrier_t *c)
{
	struct kslice_attr a;

	c->kslice = -1;
	memset(&a, 0, sizeof(a));
#ifdef SYS_sched_getattr
	/* (6.12+ reports the current slice in runtime, custom or not) */
	if (syscall(SYS_sched_getattr, 0, &a, (unsigned)sizeof(a), 0) != 0 ||
	    a.policy != 0 /* SCHED_OTHER */)
		return;
	c->kslice = 0;
#endif
}

static void kslice_set(xtc__carrier_t *c, int shortq)
{
	struct kslice_attr a;

	if (c->kslice < 0 || c->kslice == shortq)
		return;
#ifdef SYS_sched_setattr
	memset(&a, 0, sizeof(a));
	a.size = sizeof(a);
	a.policy = 0;
	errno = 0;
	a.nice = getpriority(PRIO_PROCESS, 0); /* kept as it is */
	a.runtime = shortq ? LAT_SLICE_NS : 0; /* 0: the default slice */
	if (errno != 0 || syscall(SYS_sched_setattr, 0, &a, 0) != 0) {
		c->kslice = -1;
		return;
	}
	c->kslice = shortq;
#else
	(void)a;
	c->kslice = -1;
#endif
}

/* Busy carrier: back to the default kernel slice after LAT_BUSY_NS. */
static void kslice_busy(xtc__carrier_t *c)
{
	if (c->kslice == 1 && ++c->busy_steps >= LAT_CHECK_STEPS) {
		c->busy_steps = 0;
		if (xtc_clock_mono() - c->busy_since >= LAT_BUSY_NS)
			kslice_set(c, 0);
	}
}

/* The spin the application asked for (xtc_exec_set_spin), after the
 * adaptive one and the quiescence check: 1 when the carrier must not park
 * yet (input came, or a loop timer or the steal poll is due before the
 * spin ends: the caller's loop serves them and comes back here, and the
 * spin goes on from where it started). */
static int user_spin(xtc__carrier_t *c, int64_t t0)
{
	int64_t us = atomic_load_explicit(&c->exec->spin_ns,
	                                  memory_order_relaxed);

	if (us <= 0)
		return 0;
	if (c->spin_since == 0)
		c->spin_since = t0;
	int64_t end = us > INT64_MAX - c->spin_since ? INT64_MAX
	    : c->spin_since + us;
	int64_t now = xtc_clock_mono(), tmo = park_timeout(c);
	int capped = tmo >= 0 && tmo < end - now;
	if (capped)
		end = now + tmo;
	if (end > now && carrier_spin(c, now, end - now)) {
		c->spin_since = 0;
		return 1;
	}
	return capped;
}

/* carrier_idle up to the park: -1 when it must not park (input came,
 * a steal, quiescence), else 0. */
static int64_t carrier_idle_watched(xtc__carrier_t *c)
{
	xtc_exec_t *e = c->exec;
	xtc_loop_t *l = c->loop;
	int64_t t0;

	if (try_steal(c)) {
		c->idle_turns = 0;
		return -1;
	}
	t0 = c->idle_t0 = xtc_clock_mono();
	/* the adaptive quantum's load is non-idle wall time: the spin is
	 * idle too (it would read a 10% load as 30-45%) */
	if (l->feat & XTC__LF_PREEMPT)
		xtc__preempt_idle_from();
	if (carrier_spin(c, t0, spin_window(c)))
		return -1;
	if (!atomic_load(&e->service) && xtc__loop_quiescent(l) &&
	    !ring_nonempty(c)) {
		atomic_store(&c->idle_gen, ++c->gen_next);
		if (exec_quiescent(e)) {
			atomic_store(&e->stop, 1);
			exec_wake_all(e);
			atomic_store(&c->idle_gen, 0);
			return -1;
		}
	}
	if (user_spin(c, t0)) {
		atomic_store(&c->idle_gen, 0);
		return -1;
	}
	c->spin_since = 0;
	return 0;
}

/* Nothing ran in the last step: steal, spin, detect quiescence, park.
 * From its start to its end the carrier watches the receiver that parked
 * on its loop last (loop_int.h, watched wakes): its wake comes on its own
 * line, not through the inbox, and the spins poll that line too. */
static void carrier_idle(xtc__carrier_t *c)
{
	xtc_loop_t *l = c->loop;
	atomic_uchar *f = xtc__loop_watch_begin(l);
	int64_t rang = carrier_idle_watched(c);

	/* a wake left to the watch made its task ready: no park then */
	if (xtc__loop_watch_end(l, f)) {
		if (rang == 0)
			gap_record(c, c->idle_t0, 0);
		return;
	}
	if (rang < 0)
		return;
	if (l->feat & XTC__LF_PREEMPT)
		xtc__preempt_idle(); /* no deadline, tick ring stopped */
	kslice_set(c, 1);
	rang = carrier_park(c);
	atomic_store(&c->idle_gen, 0);
	/* input or a timeout: either way no input came sooner */
	gap_record(c, c->idle_t0, rang);
	c->idle_turns++;
}

/* Anything a step would act on: ready tasks, inbox posts, queued class or
 * deque work, due timers, armed I/O. */
static int loop_has_work(xtc_loop_t *l)
{
	int64_t next;

	if (l->rq_head != NULL || l->low_head != NULL ||
	    atomic_load_explicit(&l->inbox,
	    memory_order_relaxed) != NULL || xtc__sched_busy(l) ||
	    l->io->armed > 0 || l->io->pending != NULL)
		return 1;
	next = xtc__timers_next(l);
	return next >= 0 && next <= xtc__now();
}

static void *carrier_main(void *arg)
{
	xtc__carrier_t *c = arg;
	xtc_exec_t *e = c->exec;
	xtc_loop_t *l = c->loop;
	int preempt = 0;

	/* placed on one CPU to start (spread_start): any of the caller's
	 * from now on, where the kernel balances it as it likes */
	c->start_cpu = sched_getcpu();
	if (e->spread)
		(void)pthread_setaffinity_np(pthread_self(), sizeof e->cpus,
		                             &e->cpus);
	c->rc = xtc__loop_enter(l);
	if (c->rc != XTC_OK) {
		atomic_store(&e->stop, 1);
		exec_wake_all(e);
		return NULL;
	}
	kslice_init(c);
	if (e->preempt_ns > 0 &&
	    xtc__preempt_carrier_start(e->preempt_ns,
	        strcmp(xtc_io_backend_name(), "uring") == 0,
	        e->preempt_coop) == XTC_OK) {
		l->demote_ns = e->preempt_ns; /* plain yielders: loop_int.h */
		xtc__loop_feat_set(l, XTC__LF_PREEMPT);
		atomic_store(&c->pslot, xtc__preempt_slot());
		preempt = 1;
	}
	while (!atomic_load_explicit(&e->stop, memory_order_acquire)) {
		int n, r;

		/* xtc_loop_stop on an executor loop stops the executor */
		if (atomic_load_explicit(&l->stop, memory_order_relaxed)) {
			atomic_store(&l->stop, 0);
			xtc_exec_stop(e);
			break;
		}
		n = ring_drain(c, drain_budget(c));

		/* A step on an empty loop only polls the backend (a syscall):
		 * skip it unless the loop has work. */
		if (!loop_has_work(l)) {
			if (n > 0) {
				c->spin_since = 0;
				kslice_busy(c);
				continue;
			}
			carrier_idle(c);
			continue;
		}
		r = xtc__loop_step(l, 0);
		if (r < 0) {
			c->rc = r;
			atomic_store(&e->stop, 1);
			exec_wake_all(e);
			break;
		}
		if (r > 0 || n > 0) {
			if (r > 0 && c->drain_credit < DRAIN_BATCH)
				c->drain_credit++;
			c->idle_turns = 0;
			c->spin_since = 0;
			kslice_busy(c);
			continue;
		}
		carrier_idle(c);
	}
	if (preempt) {
		xtc__loop_feat_clear(l, XTC__LF_PREEMPT);
		atomic_store(&c->pslot, NULL);
		xtc__preempt_carrier_stop();
	}
	xtc__loop_leave(l);
	return NULL;
}

/* ------------------------------------------------------------------ */
/* Public API                                                           */
/* ------------------------------------------------------------------ */

static int ncpus(void)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);
	return n > 0 ? (int)n : 4;
}

int xtc_exec_init(xtc_exec_t **out, int n_loops)
{
	xtc_exec_t *e;
	int rc = XTC_OK;

	if (out == NULL)
		return XTC_E_INVAL;
	*out = NULL;
	if (n_loops <= 0)
		n_loops = ncpus();
	if (n_loops > MAX_LOOPS)
		return XTC_E_RANGE;
	e = calloc(1, sizeof(*e));
	if (e == NULL)
		return XTC_E_NOMEM;
	/* line-aligned: the carrier's layout keeps what producers read
	 * apart from what the carrier writes per step */
	e->c = aligned_alloc(_Alignof(xtc__carrier_t),
	                     (size_t)n_loops * sizeof(*e->c));
	if (e->c == NULL) {
		free(e);
		return XTC_E_NOMEM;
	}
	memset(e->c, 0, (size_t)n_loops * sizeof(*e->c));
	e->magic = EXEC_MAGIC;
	for (int i = 0; i < n_loops && rc == XTC_OK; i++) {
		xtc__carrier_t *c = &e->c[i];
		c->exec = e;
		c->idx = i;
		c->rng = 0x9e3779b97f4a7c15ull * (uint64_t)(i + 1);
		c->gap_avg = 4 * SPIN_MAX_NS;
		c->dq_seq = calloc(DEQUE_CAP, sizeof(*c->dq_seq));
		if (c->dq_seq == NULL || xtc__deque_init(&c->dq, DEQUE_CAP) != 0 ||
		    ring_init(c) != XTC_OK) {
			rc = XTC_E_NOMEM;
			break;
		}
		rc = xtc_loop_init(&c->loop);
		if (rc != XTC_OK)
			break;
		c->loop->up.exec = e;
		c->loop->up.carrier = c;
		c->loop->index = i;
		e->n = i + 1;
		xtc__sched_exec_register(c->loop,
		    n_loops > 1 ? &exec_ops_steal : &exec_ops_solo);
		if (n_loops > 1)
			xtc__loop_feat_set(c->loop, XTC__LF_EXEC);
	}
	if (rc != XTC_OK) {
		for (int i = 0; i < n_loops; i++) {
			if (e->c[i].loop)
				xtc__loop_fini_owned(e->c[i].loop);
			xtc__deque_fini(&e->c[i].dq);
			free(e->c[i].dq_seq);
			free(e->c[i].ring);
		}
		free(e->c);
		e->magic = 0;
		free(e);
		return rc;
	}
	e->n = n_loops;
	*out = e;
	return XTC_OK;
}

int xtc_exec_fini(xtc_exec_t *e)
{
	if (!exec_ok(e) || atomic_load(&e->running))
		return XTC_E_INVAL;
	for (int i = 0; i < e->n; i++) {
		xtc__carrier_t *c = &e->c[i];
		/* unrun submissions are dropped: their fn never runs */
		xtc__loop_fini_owned(c->loop);
		xtc__deque_fini(&c->dq);
		free(c->dq_seq);
		free(c->ring);
	}
	free(e->c);
	e->magic = 0;
	free(e);
	return XTC_OK;
}

/* Where carrier i starts: a new thread starts on its creator's CPU and the
 * kernel spreads threads only after milliseconds of load balancing, so
 * every carrier of a run began on the caller's CPU, and carriers that
 * exchange messages spun against each other there (a spinning carrier
 * holds the CPU its peer needs: each message waited out the spin window,
 * the carriers learned to park, and after the kernel separated them
 * every message paid a cross-CPU wake-up; xtcbench's cross-loop handoff
 * read 2-4 us instead of 0.8 us in a third of its repetitions). So each
 * carrier is created bound to one of the caller's allowed CPUs in turn,
 * beginning after the caller's own, and widens its affinity back to all
 * of them as its first act: a placement, not a pinning. With one allowed
 * CPU, or when the mask cannot be read, the kernel places them as
 * before. Rejected: pinning carriers (the machine's other work, cpusets
 * that change, and the user's own placement are the kernel's to
 * balance); yielding the CPU while spinning (a spinning carrier next to a
 * CPU hog would hand it a whole time slice while input waits). */
static pthread_attr_t *spread_start(xtc_exec_t *e, int i, pthread_attr_t *a)
{
	if (i == 0) {
		e->spread = 0;
		if (sched_getaffinity(0, sizeof e->cpus, &e->cpus) != 0 ||
		    CPU_COUNT(&e->cpus) < 2)
			return NULL;
		e->spread = 1;
	} else if (!e->spread) {
		return NULL;
	}
	/* the allowed CPUs in order, from the one after the caller's */
	int n = CPU_COUNT(&e->cpus), here = sched_getcpu(), first = 0, k = 0;
	for (int j = 0; j < CPU_SETSIZE; j++)
		if (CPU_ISSET(j, &e->cpus)) {
			k++;
			if (j == here)
				first = k;
		}
	int want = (first + i) % n, pick = -1;
	for (int j = 0, m = 0; j < CPU_SETSIZE && pick < 0; j++)
		if (CPU_ISSET(j, &e->cpus) && m++ == want)
			pick = j;
	if (pick < 0)
		return NULL;
	cpu_set_t one;
	CPU_ZERO(&one);
	CPU_SET(pick, &one);
	if (pthread_attr_init(a) != 0)
		return NULL;
	if (pthread_attr_setaffinity_np(a, sizeof one, &one) != 0) {
		pthread_attr_destroy(a);
		return NULL;
	}
	return a;
}

int xtc__exec_start_cpu(xtc_exec_t *e, int idx)
{
	return exec_ok(e) && idx >= 0 && idx < e->n ? e->c[idx].start_cpu : -1;
}

int xtc_exec_run(xtc_exec_t *e)
{
	int expect = 0, rc = XTC_OK, started = 0;

	if (!exec_ok(e) || xtc__loop_current() != NULL)
		return XTC_E_INVAL; /* not from inside one of its own loops */
	if (xtc__loop_forked(e->c[0].loop))
		return XTC_E_INVAL; /* made by the parent of this fork child */
	if (!atomic_compare_exchange_strong(&e->running, &expect, 1))
		return XTC_E_INVAL;
	/* The stop flag is NOT cleared here: a stop issued before this point
	 * (typically right after the caller started the thread that calls
	 * run) must end this run, so it is consumed on return instead, as
	 * xtc_loop_run does. */
	for (int i = 0; i < e->n; i++) {
		xtc__carrier_t *c = &e->c[i];
		c->rc = XTC_OK;
		c->idle_turns = 0;
		atomic_store(&c->idle_gen, 0);
		pthread_attr_t a, *ap = spread_start(e, i, &a);
		c->started = pthread_create(&c->th, ap, carrier_main, c) == 0;
		if (ap != NULL)
			pthread_attr_destroy(ap);
		if (!c->started) {
			rc = XTC_E_RESOURCE;
			atomic_store(&e->stop, 1);
			exec_wake_all(e);
			break;
		}
		started++;
	}
	for (int i = 0; i < started; i++) {
		pthread_join(e->c[i].th, NULL);
		e->c[i].started = 0;
		if (rc == XTC_OK && e->c[i].rc != XTC_OK)
			rc = e->c[i].rc;
	}
	atomic_store(&e->stop, 0); /* consumed by this run */
	for (int i = 0; i < e->n; i++)
		atomic_store(&e->c[i].loop->stop, 0);
	atomic_store(&e->running, 0);
	return rc;
}

int xtc_exec_stop(xtc_exec_t *e)
{
	if (!exec_ok(e))
		return XTC_E_INVAL;
	atomic_store(&e->stop, 1);
	exec_wake_all(e);
	return XTC_OK;
}

int xtc_exec_n_loops(xtc_exec_t *e)
{
	return exec_ok(e) ? e->n : 0;
}

xtc_loop_t *xtc_exec_loop(xtc_exec_t *e, int idx)
{
	if (!exec_ok(e) || idx < 0 || idx >= e->n)
		return NULL;
	return e->c[idx].loop;
}

/* The watchdog is per loop (sched_stall.c); the executor applies one budget to
 * each of its loops, so sched_stall.c needs no way back to the executor. */
void xtc_exec_set_stall_budget(xtc_exec_t *exec, int64_t budget_ns)
{
	int n = xtc_exec_n_loops(exec);

	for (int i = 0; i < n; i++)
		xtc_loop_set_stall_budget(xtc_exec_loop(exec, i), budget_ns);
}

int xtc_exec_loop_stats(xtc_exec_t *e, int idx, xtc_loop_stats_t *out)
{
	xtc_loop_t *l;

	if (!exec_ok(e) || out == NULL || idx < 0 || idx >= e->n)
		return XTC_E_INVAL;
	l = e->c[idx].loop;
	out->tasks_run = __atomic_load_n(&l->runs, __ATOMIC_RELAXED);
	out->steals = atomic_load_explicit(&l->up.steals, memory_order_relaxed);
	out->demotions = __atomic_load_n(&l->demotions, __ATOMIC_RELAXED);
	out->aged = __atomic_load_n(&l->low_aged, __ATOMIC_RELAXED);
	out->parks = __atomic_load_n(&e->c[idx].parks, __ATOMIC_RELAXED);
	out->wakes = __atomic_load_n(&e->c[idx].wakes, __ATOMIC_RELAXED);
	out->slow_wakes = __atomic_load_n(&e->c[idx].slow_wakes,
	                                  __ATOMIC_RELAXED);
	out->wake_ns = __atomic_load_n(&e->c[idx].wake_ns, __ATOMIC_RELAXED);
	out->wake_max_ns = __atomic_load_n(&e->c[idx].wake_max,
	                                   __ATOMIC_RELAXED);
	return XTC_OK;
}

int xtc_exec_loop_id(void)
{
	xtc_loop_t *l = xtc__loop_current();
	return l != NULL && l->up.exec != NULL ? l->index : -1;
}

int xtc_shard_id(void)
{
	xtc_loop_t *l = xtc__loop_current();
	if (l == NULL)
		return -1;
	return l->up.exec != NULL ? l->index : 0;
}

int xtc_shard_count(void)
{
	xtc_loop_t *l = xtc__loop_current();
	if (l == NULL)
		return 0;
	return l->up.exec != NULL ? l->up.exec->n : 1;
}

static int pick_loop(xtc_exec_t *e)
{
	return (int)(atomic_fetch_add_explicit(&e->rr, 1, memory_order_relaxed) %
	    (uint32_t)e->n);
}

/* Shared by the four spawn entry points: validation, placement (idx < 0 =
 * round robin, unpinned) and the spawn options. */
static int spawn_prep(xtc_exec_t *e, int idx, int pinned, int has_fn,
                      int retain, xtc__spawn_opts_t *o)
{
	if (!exec_ok(e) || !has_fn)
		return XTC_E_INVAL;
	if (idx < 0)
		idx = pick_loop(e);
	else if (idx >= e->n)
		return XTC_E_INVAL;
	memset(o, 0, sizeof(*o));
	o->migratable = !pinned;
	o->retain = retain;
	return idx;
}

static int spawn_task(xtc_exec_t *e, int idx, int pinned, xtc_task_fn fn,
                      void *user, xtc_task_t **out)
{
	xtc__spawn_opts_t o;

	idx = spawn_prep(e, idx, pinned, fn != NULL, out != NULL, &o);
	if (idx < 0)
		return idx;
	return xtc__task_spawn_fn(e->c[idx].loop, fn, user, &o, out);
}

int xtc_exec_spawn(xtc_exec_t *e, xtc_task_fn fn, void *user,
                   xtc_task_t **out_task)
{
	return spawn_task(e, -1, 0, fn, user, out_task);
}

int xtc_exec_spawn_on(xtc_exec_t *e, int loop_idx, xtc_task_fn fn,
                      void *user, xtc_task_t **out_task)
{
	if (loop_idx < 0)
		return XTC_E_INVAL;
	return spawn_task(e, loop_idx, 1, fn, user, out_task);
}

static int spawn_coro(xtc_exec_t *e, int idx, int pinned, xtc_coro_fn fn,
                      void *arg, xtc_task_t **out)
{
	xtc__spawn_opts_t o;

	idx = spawn_prep(e, idx, pinned, fn != NULL, out != NULL, &o);
	if (idx < 0)
		return idx;
	return xtc__task_spawn_coro(e->c[idx].loop, fn, arg, &o, out);
}

int xtc_exec_async(xtc_exec_t *e, xtc_coro_fn fn, void *arg,
                   xtc_task_t **out_task)
{
	return spawn_coro(e, -1, 0, fn, arg, out_task);
}

int xtc_exec_async_on(xtc_exec_t *e, int loop_idx, xtc_coro_fn fn, void *arg,
                      xtc_task_t **out_task)
{
	if (loop_idx < 0)
		return XTC_E_INVAL;
	return spawn_coro(e, loop_idx, 1, fn, arg, out_task);
}

static int submit_once(xtc_exec_t *e, int idx, xtc_exec_fn fn, void *arg)
{
	xtc__carrier_t *c = &e->c[idx];

	if (!ring_push(c, fn, arg))
		return XTC_E_AGAIN;
	/* Dekker with carrier_park: the push's seq_cst CAS of sub_tail
	 * precedes the load of "sleeping" (no fence: TSan models RMWs, not
	 * fences); the carrier's store of it precedes its re-check. */
	carrier_kick(c);
	return XTC_OK;
}

int xtc_exec_submit(xtc_exec_t *e, int loop_idx, xtc_exec_fn fn, void *arg)
{
	if (!exec_ok(e) || fn == NULL || loop_idx >= e->n)
		return XTC_E_INVAL;
	if (loop_idx < 0)
		loop_idx = pick_loop(e);
	return submit_once(e, loop_idx, fn, arg);
}

int xtc_exec_submit_wait(xtc_exec_t *e, int loop_idx, xtc_exec_fn fn,
                         void *arg, int64_t timeout_ns)
{
	int64_t deadline = 0;
	int rc, spins = 0;

	if (!exec_ok(e) || fn == NULL || loop_idx >= e->n)
		return XTC_E_INVAL;
	if (xtc__loop_current() == e->c[loop_idx < 0 ? 0 : loop_idx].loop)
		return XTC_E_DEADLK; /* a carrier would wait on itself */
	if (loop_idx < 0)
		loop_idx = pick_loop(e);
	if (timeout_ns > 0)
		deadline = xtc_clock_mono() + timeout_ns;
	for (;;) {
		rc = submit_once(e, loop_idx, fn, arg);
		if (rc != XTC_E_AGAIN || timeout_ns == 0)
			return rc;
		if (timeout_ns > 0 && xtc_clock_mono() >= deadline)
			return XTC_E_AGAIN;
		if (++spins < 64) {
			cpu_relax();
		} else {
			struct timespec ts = { 0, 20000 };
			nanosleep(&ts, NULL);
		}
	}
}

void xtc_exec_set_service_mode(xtc_exec_t *e, int on)
{
	if (exec_ok(e))
		atomic_store(&e->service, on ? 1 : 0);
}

int xtc_exec_get_service_mode(xtc_exec_t *e)
{
	return exec_ok(e) ? atomic_load(&e->service) : 0;
}

int xtc_exec_set_spin(xtc_exec_t *e, int64_t ns)
{
	if (!exec_ok(e) || ns < 0)
		return XTC_E_INVAL;
	atomic_store(&e->spin_ns, ns);
	return XTC_OK;
}

int64_t xtc_exec_get_spin(xtc_exec_t *e)
{
	return exec_ok(e) ? atomic_load(&e->spin_ns) : XTC_E_INVAL;
}

void xtc_exec_set_eager_rebalance(xtc_exec_t *e, int on)
{
	if (exec_ok(e))
		atomic_store(&e->eager, on ? 1 : 0);
}

int xtc_exec_get_eager_rebalance(xtc_exec_t *e)
{
	return exec_ok(e) ? atomic_load(&e->eager) : 0;
}

void xtc_exec_set_steal_backoff(xtc_exec_t *e, int on)
{
	if (exec_ok(e))
		atomic_store(&e->backoff, on ? 1 : 0);
}

int xtc_exec_get_steal_backoff(xtc_exec_t *e)
{
	return exec_ok(e) ? atomic_load(&e->backoff) : 0;
}

int xtc_exec_set_preempt(xtc_exec_t *e, int64_t interval_ns)
{
	if (!exec_ok(e))
		return XTC_E_INVAL;
	if (interval_ns < 0)
		interval_ns = 0;
	e->preempt_ns = interval_ns; /* kept even when NOSYS, as documented */
	if (e->preempt_coop)
		return XTC_OK; /* the clock is the only tick source it needs */
	return xtc__preempt_exec_configure(e, interval_ns);
}

int xtc_exec_set_preempt_coop(xtc_exec_t *e, int on)
{
	if (!exec_ok(e))
		return XTC_E_INVAL;
	/* the carriers read it when they start: a change under a run would
	 * apply to some carriers and not others */
	if (atomic_load(&e->running))
		return XTC_E_AGAIN;
	e->preempt_coop = on != 0;
	return XTC_OK;
}

int xtc_exec_get_preempt_coop(xtc_exec_t *e)
{
	return exec_ok(e) ? e->preempt_coop : 0;
}

/* ------------------------------------------------------------------ */
/* Simulator support (sim.c drives the same carriers on one thread)     */
/* ------------------------------------------------------------------ */

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
	    ring_nonempty(c) || (next >= 0 && next <= now) ||
	    (!atomic_load(&c->steal_inflight) && others_have_stealable(e, idx));
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
	n = ring_drain(c, drain_budget(c));
	r = xtc__loop_step(c->loop, 0);
	if (r > 0 && c->drain_credit < DRAIN_BATCH)
		c->drain_credit++;
	if (r == 0 && n == 0)
		r = try_steal(c);
	xtc__loop_leave(c->loop);
	return r < 0 ? r : (r > 0 || n > 0);
}

/* Every loop holds no live task, timer or queued item. */
int xtc__exec_sim_all_quiescent(xtc_exec_t *e)
{
	for (int i = 0; i < e->n; i++) {
		xtc_loop_t *l = e->c[i].loop;
		if (l->live_tasks > 0 || l->pending_timers > 0 ||
		    atomic_load(&l->inbox) != NULL || ring_nonempty(&e->c[i]) ||
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
	if (dq < 0 || dq > DEQUE_CAP)
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
	return exec_ok(e);
}

int xtc__exec_running(xtc_exec_t *e)
{
	return atomic_load(&e->running);
}

void xtc__exec_set_running(xtc_exec_t *e, int on)
{
	atomic_store(&e->running, on);
}

/* The loop reaches the executor through its upcalls (loop_int.h): the
 * carrier ring and the offer of a woken task to an idle carrier. */
__attribute__((constructor)) static void exec_upcalls(void)
{
	xtc__loop_up.exec_ring_run = xtc__exec_ring_run;
	xtc__loop_up.exec_offer = xtc__exec_offer;
}

/* ---- device placement (xtc_batch.h) --------------------------------------
 * Declared with the batch API (its man page) but defined here: which loop
 * sits on a device's NUMA node is a fact about the executor's carriers, and
 * keeping it here keeps batch.c below the executor in tools/layers.txt. */
#ifdef XTC_SCHED_POLICY
int xtc_batch_loop_for_device(struct xtc_exec *exec, int numa_node,
                              xtc_loop_t **out)
{
	xtc_loop_t *l;

	if (out != NULL)
		*out = NULL;
	if (exec == NULL || out == NULL)
		return XTC_E_INVAL;
	if (numa_node < -1)
		return XTC_E_RANGE;
	/* no carrier has recorded a node before the executor ran (the only
	 * time a group can be created): loop 0 */
	l = xtc_exec_loop(exec, 0);
	if (l == NULL)
		return XTC_E_INVAL;
	*out = l;
	return XTC_OK;
}
#else /* !XTC_SCHED_POLICY: the interface exists, the feature does not */
int xtc_batch_loop_for_device(struct xtc_exec *exec, int numa_node,
                              xtc_loop_t **out)
{
	(void)exec;
	(void)numa_node;
	if (out != NULL)
		*out = NULL;
	return XTC_E_NOSYS;
}
#endif
