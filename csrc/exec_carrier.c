/*
 * exec_carrier.c - the carrier: the C thread that drives one executor
 * loop, drains its submission ring, steals, spins, parks, and ends the run
 * when every loop is quiescent.
 *
 * Model:
 *  1. A carrier alternates between draining its loop's submission ring and
 *     the ring's overflow (on its own stack, in paced batches) and one loop
 *     step. Out of work, it steals migratable procs, spins, then parks
 *     (Loom's carrier: one MPSC queue and one poller per carrier, spin then
 *     park).
 *  2. Parking: the carrier publishes how it sleeps in loop->sleeping and
 *     re-checks its inputs. With an fd armed it blocks in its poller and
 *     the first producer writes the eventfd; with none (the common case
 *     for a compute carrier) it sleeps on a futex on that word and the
 *     first producer's FUTEX_WAKE is the whole wake path: no eventfd write,
 *     no poll completion, no read on the woken side. The producer exchanges
 *     the word to 0, so later producers of the same park pay no syscall.
 *  3. The spin before parking is adaptive: a carrier whose recent idle gaps
 *     ended within SPIN_MAX_NS spins up to twice that gap (a busy
 *     producer's next item is caught with no kernel wake on either side);
 *     one with long gaps spins only SPIN_ROUNDS pauses.
 *     xtc_exec_set_spin makes an idle carrier poll longer first, capped at
 *     its next loop timer and steal poll, so neither is late and a run
 *     still ends.
 *  4. A parked carrier asks the kernel for a short slice (kslice_*), so its
 *     wake-up preempts the thread that woke it instead of queueing behind
 *     it; it drops it when busy. Carriers start spread over the caller's
 *     CPUs and then widen to its whole mask (spread_start: a placement, not
 *     a pinning).
 *  5. While idle (steal, spins, quiescence check; ended before it parks) a
 *     carrier watches the receiver that parked on its loop last (loop_int.h,
 *     watched wakes): a cross-loop send to it moves only the receiver's
 *     slot line, and the spins see it. The watch begins with the idle
 *     spell, not the spin, so a fast peer's reply is not missed while the
 *     carrier still tries to steal.
 *  6. The waker stamps loop->wake_at and the woken carrier counts how late
 *     it resumed (xtc_exec_loop_stats: parks, wakes, wake_ns, slow_wakes,
 *     wake_max_ns): a virtual machine resumes some wake-ups milliseconds
 *     late whatever the scheduler does, and a benchmark must be able to
 *     tell.
 *
 * Invariants:
 *  1. Park is Dekker with the producers: they publish work with a seq_cst
 *     RMW and then read loop->sleeping; the carrier publishes
 *     loop->sleeping and then re-reads every input. No wake is lost.
 *  2. Quiescence (the run returns): a carrier whose loop is locally
 *     quiescent publishes an idle generation, then checks that every
 *     carrier shows a non-zero idle generation, that every inbox and ring
 *     is empty, and that every generation is unchanged since the first
 *     pass. A carrier clears its generation before it drains or steals
 *     anything, so between the passes no loop processed work, nobody could
 *     post, and every queue was seen empty: nothing can run again. A
 *     foreign thread that submits concurrently races the end of the run,
 *     as libxtc allows. Service mode skips the check.
 *  3. A carrier that cannot set up the preemption its executor asked for
 *     ends the run with the error; it never runs uncut silently.
 *
 * Rejected:
 *  1. A global live counter bumped on every spawn and reap: a shared cache
 *     line on the hottest path.
 *  2. A condition variable per carrier: a mutex on the producer path; the
 *     futex on the word producers already read is the same wake without it.
 *  3. Spinning until the next item whatever the history: burns a core of a
 *     2-core machine.
 *  4. Yielding the producer's CPU after a wake: helps only when the kernel
 *     queues the carrier behind the producer and costs the producer a
 *     syscall; the short kernel slice gets the effect on the carrier's side.
 *  5. Pinning carriers: the machine's other work, cpusets that change and
 *     the user's own placement are the kernel's to balance.
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

#include "exec_int.h"
#include "loop_io_int.h"

#define SPIN_ROUNDS  256        /* ~ a few us of pause before parking */
#define LAT_SLICE_NS 100000     /* kernel slice asked for while parked */
#define LAT_BUSY_NS  1000000    /* busy this long: the default slice again */
#define LAT_CHECK_STEPS 8       /* busy steps between two clock checks */
#define STEAL_POLL_NS 1000000   /* idle re-steal interval (1 ms) */
#define STEAL_POLL_MAX_SHIFT 5  /* backoff cap: 32 ms */

#define cpu_relax() XTC__CPU_RELAX() /* base_int.h */

/* ------------------------------------------------------------------ */
/* Submission ring                                                      */
/* ------------------------------------------------------------------ */

/* Owner: the overflow's oldest node, NULL when none is linked yet. The
 * producers' list is a stack, taken whole and reversed only when the
 * previous take is used up, so nodes run in the order they were pushed. */
static xtc__exec_node_t *ovf_take(xtc__carrier_t *c)
{
	xtc__exec_node_t *n = c->ovf_head;

	if (n == NULL) {
		xtc__exec_node_t *s = atomic_exchange_explicit(&c->ovf_in,
		    NULL, memory_order_acquire);

		while (s != NULL) {
			xtc__exec_node_t *next = s->next;
			s->next = n;
			n = s;
			s = next;
		}
		if (n == NULL)
			return NULL;
	}
	c->ovf_head = n->next;
	return n;
}

/* Owner: run up to max overflow nodes; how many ran. */
static int ovf_run(xtc__carrier_t *c, int max)
{
	xtc__exec_node_t *node;
	int o = 0;

	if (max <= 0 || atomic_load_explicit(&c->ovf_n, memory_order_relaxed) == 0)
		return 0;
	while (o < max && (node = ovf_take(c)) != NULL) {
		node->fn(node);
		o++;
	}
	if (o > 0) /* counted out once run, as the ring's head is */
		atomic_fetch_sub_explicit(&c->ovf_n, o, memory_order_release);
	return o;
}

/* Owner: run up to max submissions on the carrier stack, from the ring
 * and the overflow (xtc__exec_submit_node), in their order: while the
 * ring still holds what it held when the overflow began (ovf_mark), the
 * ring first; after that, with both non-empty, each drain serves the
 * other first in turn, so that neither plain xtc_exec_submit producers
 * refilling the ring nor nodes joining the overflow starve the other.
 * The overflow is paced like the ring, within the same budget. Rejected:
 * the loop's inbox for the front door's calls past the ring (what they
 * used): it starts all it holds at once, a proc and a fresh stack per
 * call, and under an open-loop overload the cost per call rose above the
 * arrival gap and the backlog never drained (drain_budget's story
 * again). */
static int ring_drain(xtc__carrier_t *c, int max)
{
	uint64_t head = atomic_load_explicit(&c->sub_head, memory_order_relaxed);
	int n = 0, first = 0, ring = 0;

	if (atomic_load_explicit(&c->ovf_n, memory_order_relaxed) != 0 &&
	    head >= atomic_load_explicit(&c->ovf_mark, memory_order_relaxed))
		first = c->ovf_turn ^= 1;
	if (first)
		n = ovf_run(c, max);
	while (n < max) {
		xtc__rcell_t *rc = xtc__ring_peek(c->ring, sizeof(*c->ring),
		    XTC_EXEC_SUBMIT_CAP - 1, head);
		sub_slot_t *s = (sub_slot_t *)rc;
		xtc_exec_fn fn;
		void *arg;

		if (rc == NULL)
			break; /* empty, or a producer is mid-publish */
		fn = s->fn;
		arg = s->arg;
		xtc__ring_release(rc, head, XTC_EXEC_SUBMIT_CAP - 1);
		head++;
		fn(arg);
		n++;
		ring = 1;
	}
	if (ring) /* emptiness checks only: once per batch */
		atomic_store_explicit(&c->sub_head, head, memory_order_release);
	if (!first)
		n += ovf_run(c, max - n);
	if (n > 0)
		c->input_until = c->loop->runs + (uint64_t)n + 1;
	return n;
}

/*
 * Admission pacing. A loop step runs one task, a drain can start
 * XTC__EXEC_DRAIN_BATCH. Draining a full batch before every step let
 * submissions in up to 256 times faster than the loop ran them: under a steady stream
 * (open-loop arrivals) the live fibers grew without bound, every spawn past
 * the stack cache and overflow pool mapped a fresh stack (mmap, mprotect,
 * first-touch faults, munmap with a TLB shootdown at exit), the per-request
 * cost rose above the arrival gap and the backlog never drained (xtcbench
 * tail, A1 from 30% load; a flood of submit->spawn ran out of stacks).
 * So while the loop has ready work it admits at most as many submissions
 * as it ran steps since the last drain (at least one: the ring is never
 * starved); an idle loop takes a whole batch. A backlog then waits in the
 * bounded ring, holding no stack, and producers see XTC_E_AGAIN
 * (backpressure) instead of the carrier collapsing. The front door's
 * calls, which are never refused, wait past the ring in the carrier's
 * overflow under the same budget (ring_drain).
 */
static int drain_budget(xtc__carrier_t *c)
{
	int n;

	if (!xtc__exec_others_ready(c->loop))
		n = XTC__EXEC_DRAIN_BATCH;
	else
		n = c->drain_credit > 0 ? c->drain_credit : 1;
	c->drain_credit = 0;
	return n;
}

/* The paced drain of the carrier loop, for the simulator's step. */
int xtc__carrier_drain(xtc__carrier_t *c)
{
	return ring_drain(c, drain_budget(c));
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

	return atomic_load_explicit(&xtc__ring_cell(c->ring, sizeof(*c->ring),
	    XTC_EXEC_SUBMIT_CAP - 1, head)->seq, memory_order_relaxed) ==
	    head + 1;
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
	    NULL || ring_peek(c) ||
	    atomic_load_explicit(&c->ovf_n, memory_order_relaxed) != 0 ||
	    stopping(c);
}

static int has_input(xtc__carrier_t *c)
{
	return atomic_load(&c->loop->inbox) != NULL || xtc__carrier_ring_nonempty(c) ||
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
	xtc__carrier_t *c = xtc__carrier_of(l);

	if (l->magic != XTC__LOOP_LIVE) {
		/* Thief finalising; the task is on no list and may be awaited:
		 * the teardown of any unfinished task (detach, abandon, cleanup). */
		xtc__loop_adopt_orphan(l, t);
		return;
	}
	xtc__task_attach(l, t);
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
	xtc__task_detach(l, t, to);
	t->node.fn = migrate_in;
	if (xtc__loop_post(to, &t->node) != XTC_OK) {
		/* thief gone: keep it here */
		xtc__carrier_t *thief = xtc__carrier_of(to);
		if (thief != NULL)
			atomic_store(&thief->steal_inflight, 0);
		xtc__task_detach_undo(l, t, to);
	}
}

/* libxtc's contract for eager rebalance (default off): a loop that still
 * owns parked tasks or pending timers does not steal -- the work it holds
 * will wake it, and a stolen proc would compete with it -- unless eager
 * rebalance is on, which trades migration cost for idle capacity. A loop
 * with nothing of its own left always may. */
int xtc__carrier_may_steal(xtc__carrier_t *c)
{
	xtc_loop_t *l = c->loop;

	return (l->live_tasks == 0 && l->pending_timers == 0) ||
	    atomic_load_explicit(&c->exec->eager, memory_order_relaxed);
}

/* Take one task from a random busy peer and start moving it here. */
int xtc__carrier_try_steal(xtc__carrier_t *c)
{
	xtc_exec_t *e = c->exec;
	int start, n = e->n;

	if (n < 2 || atomic_load_explicit(&c->steal_inflight,
	    memory_order_relaxed) || !xtc__carrier_may_steal(c))
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
		    !xtc__carrier_ring_nonempty(&e->c[i]);
	for (int i = 0; i < e->n && q; i++)
		q = atomic_load(&e->c[i].idle_gen) == g[i];
	if (g != gens)
		free(g);
	return q;
}

/* Stop and errors: unconditional (a carrier between its re-check and the
 * poller still finds the eventfd set). */
void xtc__exec_wake_all(xtc_exec_t *e)
{
	for (int i = 0; i < e->n; i++) {
		xtc__carrier_kick(&e->c[i]);
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
 * back within XTC__EXEC_SPIN_MAX_NS) spins up to twice that gap, so a busy producer's
 * next submission is caught without a kernel wake on either side; a
 * carrier whose gaps are long spins only SPIN_ROUNDS pauses, so an idle
 * CPU is never burnt for nothing. Clock reads happen on the idle path
 * only. */
static int64_t spin_window(const xtc__carrier_t *c)
{
	int64_t w = 2 * c->gap_avg;

	return c->gap_avg < XTC__EXEC_SPIN_MAX_NS ? (w < XTC__EXEC_SPIN_MAX_NS ? w : XTC__EXEC_SPIN_MAX_NS)
	    : 0;
}

/* An idle gap from t0 ended by input that arrived at `at` (0: now). A
 * parked carrier's gap ends when the producer rang, not when the kernel
 * got round to waking it: counting the wake-up's latency made one park
 * feed the next (the average passed XTC__EXEC_SPIN_MAX_NS, the spin stopped, every
 * message of a cross-loop ping-pong paid a futex wake on both sides and
 * the round trip went from 1.2 us to 5-23 us). */
static void gap_record(xtc__carrier_t *c, int64_t t0, int64_t at)
{
	int64_t now = xtc_clock_mono();
	int64_t gap = (at > t0 && at < now ? at : now) - t0;

	c->busy_since = now;
	c->busy_steps = 0;
	if (gap > 4 * XTC__EXEC_SPIN_MAX_NS)
		gap = 4 * XTC__EXEC_SPIN_MAX_NS;
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
	int64_t end = xtc__deadline_after(c->spin_since, us);
	int64_t now = xtc_clock_mono(), tmo = park_timeout(c);
	int capped = tmo >= 0 && tmo < end - now;
	if (capped)
		end = xtc__deadline_after(now, tmo);
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

	if (xtc__carrier_try_steal(c)) {
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
	    !xtc__carrier_ring_nonempty(c)) {
		atomic_store(&c->idle_gen, ++c->gen_next);
		if (exec_quiescent(e)) {
			atomic_store(&e->stop, 1);
			xtc__exec_wake_all(e);
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

void *xtc__carrier_main(void *arg)
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
		xtc__exec_wake_all(e);
		return NULL;
	}
	kslice_init(c);
	if (e->preempt_ns > 0) {
		/* preemption was asked for: a carrier that cannot have it
		 * (no monitor thread, no slot) ends the run with that error
		 * rather than running the work uncut, silently */
		int prc = xtc__preempt_carrier_start(e->preempt_ns,
		    strcmp(xtc_io_backend_name(), "uring") == 0, e->preempt_coop);
		/* (NOSYS: no tick source in this build, which
		 * xtc_exec_set_preempt reported already; the value is kept
		 * and the work runs uncut, as documented) */
		if (prc != XTC_OK && prc != XTC_E_NOSYS) {
			xtc__preempt_carrier_stop();
			c->rc = prc;
			atomic_store(&e->stop, 1);
			xtc__exec_wake_all(e);
			xtc__loop_leave(l);
			return NULL;
		}
		if (prc == XTC_OK) {
			l->demote_ns = e->preempt_ns; /* loop_int.h */
			xtc__loop_feat_set(l, XTC__LF_PREEMPT);
			atomic_store(&c->pslot, xtc__preempt_slot());
			preempt = 1;
		}
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
			xtc__exec_wake_all(e);
			break;
		}
		if (r > 0 || n > 0) {
			if (r > 0 && c->drain_credit < XTC__EXEC_DRAIN_BATCH)
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
