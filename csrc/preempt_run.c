/*
 * preempt_run.c - what a carrier publishes per run: the run's deadlines
 * (one xtc__preempt_run_begin taking a mode), contention by producers, the
 * cost of each preemption, the overhead budget, clock-checked carriers,
 * and the executor's carrier setup.
 *
 * Model (preempt_int.h holds the carrier/monitor protocol):
 *  - A preempted fiber yields through xtc__fiber_yield_slice: demoted
 *    (loop_int.h), so new arrivals run before it. Each redirect starts a
 *    cost measurement (lateness + handler-to-next-dispatch) that the next
 *    run start on the carrier closes: xtc__preempt_cost_ewma, the floor of
 *    the adaptive quantum (fn_quantum.c). A timer expiry's lateness counts whole
 *    (on a slow hypervisor it is mostly the interrupt's stall of the
 *    carrier); a signal from another CPU counts at most this carrier's
 *    typical expiry lateness (its flight is not carrier time, its stall
 *    is, and the handler cannot see that stall).
 *  - Batched publication (batch_keeps): runs that producers time back to
 *    back share one publication of deadline and generation while its
 *    slice end is at least half a slice away, and run_end leaves it:
 *    producers read the slot at every submission, and a carrier that
 *    rewrote it per run pulled its cache line back from their CPU every
 *    time (a carrier at saturation with a 50 us slice: requests of no
 *    work 59% dearer than without preemption before this and the tick
 *    net, 14.5% after; 5 us requests 16.7% and 8.5%). A run may then be
 *    cut up to half a slice early (the slice-end window allows that
 *    anyway); a signal between two runs is stale. Only carriers with a
 *    tick net batch: the monitor would take a deadline that outlives its
 *    run for an overrun.
 *  - Clock-checked carriers (xtc_exec_set_preempt_coop) take no part in
 *    any of that: no slot, no timer, no signal, no ring. run_begin keeps
 *    only the run's slice end (ptls coop_due) and the due check compares
 *    the clock with it, so code that passes yield points is sliced and
 *    demoted at the price of a clock read per point, and nothing ever
 *    interrupts the carrier. Where an interrupt costs tens of us (a
 *    software-virtualised guest: ~45 us per expiry) that is the only way
 *    a 50 us slice is worth having. With the involuntary path on, such a
 *    carrier also runs the whole trigger above as a backstop, at
 *    XTC__COOP_BACKSTOP times the slice: code with points is cut at the
 *    slice without an interrupt, code without points at the backstop
 *    slice by one. Rejected: a timer at the slice itself (its expiry's
 *    stall is the cost to avoid); making it the default cooperative path
 *    (code without points would lose the ticks' telemetry and tests rely
 *    on them).
 *  - Overhead budget (xtc_preempt_set_budget): each carrier adds up what
 *    preemption cost it per window of XTC_PREEMPT_BUDGET_WINDOW_NS (those
 *    measurements, plus the stall of expiries that found nothing due) and
 *    its idle time. A carrier busy >= 90% of a window on which preemption
 *    spent more than the budget doubles the slice it applies, as many
 *    times as the overrun calls for (cost ~ 1/slice), up to 64x, without
 *    waiting for the window's end once it spent a whole window's budget
 *    or spends at twice its rate, after a tenth of a window at least
 *    (overload builds backlog by the millisecond); it halves back one
 *    step a window once busy plus the cost (what a halving adds) < 75%,
 *    or the cost is under a quarter of the budget: the room a stretch
 *    made is not room for the shorter slice (the oscillation that
 *    halving on busy < 75% alone caused at 50-70% load fed the tail).
 *    Measured on a software-virtualised 2-vCPU
 *    guest (an expiry stalls the carrier ~41 us, a near re-arm 13 us), a
 *    50 us slice cut each 500 us request ten times and A1 at 10-70% load
 *    never drained its backlog (362 ms p99 at 10%); a slice that pays for
 *    itself there is several hundred us. Idle capacity is never budgeted:
 *    at low load the tail is what preemption is for. Timer arms are
 *    counted apart (arm_ns): they follow busy periods, not slices.
 *    Rejected: a fixed floor (cost depends on the machine by 4-5x);
 *    budgeting against wall time regardless of load (at 10% load it
 *    stretched the slice 16x and gave the tail of no preemption).
 *
 * Invariants: run_begin/run_end run on the carrier's thread only, around
 * every timed run; a slot's deadline is INT64_MAX between runs unless a
 * batch keeps it (batch_keeps); a contention acts once per run
 * (contended 0 -> 1 -> 2).
 *
 * Rejected: a timer arm per run (a syscall per dispatch; producers poll
 * instead and the monitor's net is behind them); six entry points for six
 * kinds of run (one call taking a mode says which).
 */
#include "rtcode_int.h" /* first: this file is runtime code */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "preempt_int.h"

static _Atomic int budget_pct = XTC_PREEMPT_BUDGET_DEFAULT;
/* the slice multiplier's cap, as a shift: 64x */
#define STRETCH_MAX 6
/* busy share of a window from which the budget applies, and below which
 * a lengthened slice shortens again (hysteresis: a stretch that brought the
 * carrier just under the first must not undo itself the next window) */
#define BUDGET_BUSY_PCT 90
#define BUDGET_IDLE_PCT 75

static int64_t now_ns(void)
{
	return xtc__now_ns(); /* base_int.h */
}

static void run_begin(xtc__fiber_t *f, int64_t slice_ns, int exact,
                      int64_t now, int64_t until, int lazy);

/* The one entry point (preempt_int.h, xtc__run_mode_t): a mode says which
 * kind of run begins; run_begin below reads it as (exact, lazy). */
void xtc__preempt_run_begin(xtc__fiber_t *f, int64_t slice_ns,
                            xtc__run_mode_t mode, int64_t now, int64_t until)
{
	int lazy = 0;

	switch (mode) {
	case XTC__RUN_TICK:
	case XTC__RUN_EXACT:
		run_begin(f, slice_ns, mode == XTC__RUN_EXACT, 0, 0, 0);
		return;
	case XTC__RUN_AT:
		break;
	case XTC__RUN_FULL:
		lazy = 2;
		break;
	case XTC__RUN_POLLED:
		lazy = 3;
		break;
	case XTC__RUN_ALONE_TURN:
		lazy = 1;
		/* fall through */
	case XTC__RUN_ALONE:
	case XTC__RUN_ALONE_FRESH:
		if (mode == XTC__RUN_ALONE_FRESH)
			lazy = 4;
		until = until > 0 ? until : 1;
		/* the loop's clock is the monotonic clock unless the simulator
		 * replaced it with virtual time */
		run_begin(f, slice_ns, 0, xtc__up.clock == NULL ? now : 0,
		          until, lazy);
		return;
	}
	run_begin(f, slice_ns, 0, xtc__up.clock == NULL ? now : 0, 0, lazy);
}

/* The slice-end window a producer assumes for the carrier's run: the
 * carrier's slice (or the adaptive one); a latency class's shorter slice
 * only costs an early expiry the handler re-arms. */
static int64_t slot_early(xtc__pslot_t *s)
{
	int64_t q = atomic_load_explicit(&xtc__preempt_adaptive_slice,
	                                 memory_order_relaxed);
	if (q <= 0)
		q = atomic_load_explicit(&s->slice_ns, memory_order_relaxed);
	return q / XTC__SLICE_EARLY_DIV;
}

/* A producer found the carrier's run contended: if it overran its slice,
 * signal it, once per run (contended 1 -> 2; run_begin resets it). The
 * generation is read first and checked again before the signal, so a run
 * that began meanwhile is not signalled for its predecessor's overrun (the
 * handler also drops a signal whose generation is not current). */
static void poll_overdue(xtc__pslot_t *s)
{
	uint32_t g = atomic_load_explicit(&s->gen, memory_order_acquire);
	if (atomic_load_explicit(&s->deadline, memory_order_acquire) == INT64_MAX)
		return;
	int64_t soft = atomic_load_explicit(&s->soft, memory_order_relaxed);
	if (soft == INT64_MAX || now_ns() < soft)
		return;
	int one = 1;
	if (atomic_load_explicit(&s->gen, memory_order_acquire) == g &&
	    atomic_compare_exchange_strong(&s->contended, &one, 2) &&
	    atomic_load_explicit(&s->gen, memory_order_acquire) == g)
		(void)xtc__monitor_signal_run(s);
}

/* The safety net for a run that producers time by polling: if no producer
 * comes back after its slice end, the monitor signals it this much later
 * (a carrier with a tick net is cut by the first tick after its slice end
 * instead: preempt_monitor.c, trigger 3.). */
static int64_t net_grace(xtc__pslot_t *s)
{
	int64_t g = 4 * atomic_load_explicit(&s->slice_ns, memory_order_relaxed);
	int64_t n = atomic_load_explicit(&xtc__preempt_net_grace_ns,
	                                 memory_order_relaxed);
	return g > n ? g : n;
}

static void net_watch(xtc__pslot_t *s, uint32_t g, int64_t soft)
{
	int64_t n = soft + net_grace(s);
	int64_t cur = atomic_load_explicit(&s->net, memory_order_relaxed);
	/* only ever earlier (an alone run's net is its far hard deadline) */
	while (n < cur)
		if (atomic_compare_exchange_weak(&s->net, &cur, n)) {
			if (atomic_load_explicit(&s->gen,
			                         memory_order_acquire) == g)
				xtc__monitor_net(s, n);
			break;
		}
}

void xtc__preempt_contend_polled(xtc__pslot_t *s)
{
	if (s == NULL)
		return;
	uint32_t g = atomic_load_explicit(&s->gen, memory_order_acquire);
	if (atomic_exchange(&s->contended, 1) ||
	    atomic_load(&s->deadline) == INT64_MAX)
		return;
	net_watch(s, g, atomic_load_explicit(&s->soft, memory_order_relaxed));
}

void xtc__preempt_contend(xtc__pslot_t *s)
{
	if (s == NULL)
		return;
	/* the carrier itself (work made ready by its run) arms its own timer:
	 * nobody else will come; any other thread is a producer, who polls */
	int own = xtc__ptls.slot == s;
	if (atomic_load_explicit(&s->contended, memory_order_relaxed)) {
		if (!own)
			poll_overdue(s);
		return;
	}
	if (!atomic_load_explicit(&s->timer, memory_order_relaxed)) {
		atomic_store(&s->contended, 1);
		xtc__monitor_kick(atomic_load_explicit(&s->soft,
		                                       memory_order_relaxed));
		return;
	}
	/* one contender per run acts (seq_cst: pairs with run_begin's
	 * re-check after it armed its own timer) */
	if (atomic_exchange(&s->contended, 1)) {
		if (!own)
			poll_overdue(s);
		return;
	}
	if (atomic_load(&s->deadline) == INT64_MAX)
		return; /* between runs: the next run_begin sees the work */
	int64_t soft = atomic_load_explicit(&s->soft, memory_order_relaxed);
	/* the carrier itself reads no clock (a send or spawn per run made it
	 * a third read per dispatch): its run's start bounds now from below,
	 * so it arms the slice end, and if that has passed already (a run
	 * that overran alone) the timer expires at once */
	int64_t now = own ? xtc__ptls.run_start : now_ns();
	if (soft <= now) {
		int one = 1;
		if (atomic_compare_exchange_strong(&s->contended, &one, 2))
			(void)xtc__monitor_signal_run(s); /* overdue: now */
	} else if (own || now >= soft - slot_early(s)) {
		/* the first contender of a run nobody timed yet that is in its
		 * slice-end window: it may be the only contender (a
		 * closed-loop client waits for its answer), so the slice end
		 * is armed, from the producer's CPU for a producer */
		xtc__ctimer_want(s, soft, slot_early(s), now);
	} else {
		/* a young run (most are short): later producers poll it, the
		 * monitor's net is behind them. Arming here too cost 30-60%
		 * on the 10% A1 tail on a slow hypervisor (interleaved A/B:
		 * 50 us slice p99 249-357 us armed, 184-221 polled, 208-235
		 * with this rule) */
		net_watch(s, atomic_load_explicit(&s->gen, memory_order_acquire),
		          soft);
	}
}

/* The carrier's timer after a run's deadlines were published: soft for a
 * contended run, the hard deadline of an alone run when it is a real one
 * (a loop timer), nothing for an alone run whose only deadline is the
 * safety net (the monitor watches `net`: a lone request costs no timer
 * syscall). Then the Dekker re-check with xtc__preempt_contend: a producer
 * that contended before our arm may have been overwritten by it. */
static void trigger_run(xtc__pslot_t *s, int64_t soft, int64_t hard,
                        int64_t now, int64_t cap, int lazy)
{
	int64_t early = xtc__ptls.early;

	if (!atomic_load_explicit(&s->timer, memory_order_relaxed)) {
		xtc__monitor_kick(hard);
		return;
	}
	if (lazy == 3) {
		/* producers are active (their work waits in the ring or the
		 * inbox): they time this run by polling (xtc__preempt_contend),
		 * the monitor is the safety net; no timer syscall per run */
		int64_t n = soft + net_grace(s);
		atomic_store_explicit(&s->net, n, memory_order_release);
		xtc__monitor_net(s, n);
		/* an expiry left armed by an earlier run that lands before
		 * this run's slice-end window would be an early fire: a
		 * ~40 us stall on a slow hypervisor, against one far
		 * disarm now */
		int64_t at = atomic_load_explicit(&s->timer_at,
		                                  memory_order_relaxed);
		if (at != INT64_MAX && at > now && at < soft - early)
			xtc__ctimer_arm(s, INT64_MAX);
		return;
	}
	if (soft == hard) {
		atomic_store_explicit(&s->net, INT64_MAX, memory_order_relaxed);
		/* work known to run long gets its whole slice (one arm per
		 * slice of it); a fresh run keeps the window */
		xtc__ctimer_want(s, soft, lazy == 2 ? 0 : early, now);
		return;
	}
	if (hard >= cap) {
		atomic_store_explicit(&s->net, hard, memory_order_release);
		xtc__monitor_net(s, hard);
	} else if (lazy == 1) {
		/* long work's turn among demoted work: the turn's end (one
		 * arm per turn). Work that yields by itself starts a turn at
		 * every dispatch: the end armed for an earlier one serves
		 * while it falls in the turn's last half slice (the handler
		 * takes it there: hard_early). Re-arming at each moving end
		 * was a timer syscall per xtc_yield: two fibers yielding to
		 * each other on a preemptive executor paid 4.5 us a yield
		 * instead of 19 ns. */
		atomic_store_explicit(&s->net, INT64_MAX, memory_order_relaxed);
		xtc__ctimer_want(s, hard, early, now);
		return;
	} else if (lazy) {
		/* a fresh run while only demoted work waits, a bound that
		 * moves with every run: no timer syscall per run. New work
		 * comes from producers, who poll the run
		 * (xtc__preempt_contend); the demoted work's bound is the
		 * monitor's, coarsened to the net grace: an arm per short run
		 * cost more than the whole run on a slow hypervisor */
		int64_t n = soft + net_grace(s);
		if (n < hard)
			n = hard;
		atomic_store_explicit(&s->net, n, memory_order_release);
		xtc__monitor_net(s, n);
		return;
	} else {
		/* a loop timer is the deadline: arm it exactly (an earlier
		 * expiry left by a previous run would cost an interrupt and a
		 * re-arm; the next runs of the same wait find it armed) */
		atomic_store_explicit(&s->net, INT64_MAX, memory_order_relaxed);
		if (atomic_load_explicit(&s->timer_at, memory_order_relaxed) != hard)
			xtc__ctimer_arm(s, hard);
	}
	if (atomic_load(&s->contended))
		xtc__ctimer_want(s, soft, early, now);
}

/* Close a cost measurement: lateness plus redirect-to-next-dispatch. */
static void cost_close(xtc__ptls_t *p, int64_t now)
{
	int64_t c = now - p->pc_at + p->pc_late;
	p->pc_at = 0;
	if (c <= 0 || c > 1000000)
		return; /* the carrier did something else meanwhile */
	p->ovh_ns += c < 100000 ? c : 100000;
	int64_t e = atomic_load_explicit(&xtc__preempt_cost_ewma,
	                                 memory_order_relaxed);
	/* a typical cost, not the outliers: a carrier the kernel descheduled
	 * between the signal and the next dispatch (other load on the
	 * machine) moves the estimate by at most a doubling per 16 samples */
	if (c > 100000)
		c = 100000;
	if (e > 0 && c > 2 * e)
		c = 2 * e;
	e = e == 0 ? c : e + (c - e) / 16;
	atomic_store_explicit(&xtc__preempt_cost_ewma, e, memory_order_relaxed);
	xtc__up.quantum_cost(c);
}

/* The budget's decision for one window of w ns, idle of them idle and
 * ovh of them spent on preemption: the next slice shift. Pure, so the test
 * checks the policy without a machine that makes preemption expensive. */
int xtc__preempt_budget_next(int stretch, int64_t w, int64_t idle,
                             int64_t ovh, int pct)
{
	if (pct <= 0 || w <= 0)
		return 0;
	/* the carrier's busy share of the window: preemption that runs on
	 * idle capacity costs nobody anything, so the slice is only
	 * lengthened while the carrier is nearly saturated */
	int64_t busy = w - idle;
	int hot = busy * 100 >= w * BUDGET_BUSY_PCT;
	if (hot && ovh * 100 > w * pct) {
		/* in one step by the overrun (the overhead is about
		 * proportional to 1 / slice): a window at overload builds a
		 * backlog that takes many more to drain */
		int k = 1;
		while (k < STRETCH_MAX && ovh * 100 > ((w * pct) << k))
			k++;
		stretch += k;
		return stretch > STRETCH_MAX ? STRETCH_MAX : stretch;
	}
	/* a halving doubles the overhead: shorten only where the carrier
	 * stays under the hysteresis mark with that added (a carrier at
	 * 50-70% load that halved from its measured room alone fell back
	 * into overload, built a backlog for a window, and stretched again:
	 * the oscillation was the tail), or the cost stays under half the
	 * budget */
	if (stretch > 0 && ((busy + ovh) * 100 < w * BUDGET_IDLE_PCT ||
	                    ovh * 400 < w * pct))
		return stretch - 1;
	return stretch;
}

/* Whether the window so far already spent the budget of a whole one, or
 * spends at twice the budget's rate, while the carrier was saturated:
 * close it now. At overload every window's worth of waiting builds
 * backlog (a 10 ms window at twice the capacity left ~3 ms of it, most of
 * a short point's p99); the decision on a partial window of at least a
 * tenth is the same ratio. The rate test is what a burst needs: a clump
 * of long requests at 70% load with a 50 us slice on a guest where a
 * preemption costs ~50 us spends ~45% of the carrier on preemption, and
 * waiting for a whole window's budget (4.4 ms of it) kept the carrier
 * overloaded for that long at every clump. xtcbench A1 at 50% load, 50 us
 * slice, 200 ms points, three interleaved rounds of three repetitions:
 * 583-596 -> 470-526 preemptions and 37-38 -> 30-34 ms of overhead per
 * point (the budget's 20% was overrun before, not after); the short p99
 * could not be told apart under the guest's generator stalls. */
int xtc__preempt_budget_early(int64_t w, int64_t idle, int64_t ovh, int pct)
{
	return pct > 0 && w >= XTC_PREEMPT_BUDGET_WINDOW_NS / 10 &&
	       (ovh * 100 > XTC_PREEMPT_BUDGET_WINDOW_NS * pct ||
	        ovh * 100 > 2 * w * pct) &&
	       (w - idle) * 100 >= w * BUDGET_BUSY_PCT;
}

/* Close a budget window (design note: "Overhead budget"). The simulator's
 * virtual clock has no trigger cost: no stretching there. */
static void budget_window(xtc__ptls_t *p, int64_t now)
{
	int64_t w = now - p->ovh_win;

	/* a window that spanned a long park says nothing: restart */
	if (p->ovh_win != 0 && w < 4 * XTC_PREEMPT_BUDGET_WINDOW_NS &&
	    xtc__up.clock == NULL) {
		int n = xtc__preempt_budget_next(p->stretch, w, p->ovh_idle,
		    p->ovh_ns, atomic_load_explicit(&budget_pct,
		                                    memory_order_relaxed));
		if (n > p->stretch) {
			p->st.stretches++;
			if ((1u << n) > p->st.stretch_max)
				p->st.stretch_max = 1u << n;
		}
		p->stretch = n;
	}
	p->st.overhead_ns += (uint64_t)(p->ovh_ns > 0 ? p->ovh_ns : 0);
	p->ovh_ns = 0;
	p->ovh_idle = 0;
	p->ovh_win = now;
}

int xtc_preempt_set_budget(int percent)
{
	if (percent < 0 || percent > 100)
		return XTC_E_INVAL;
	atomic_store(&budget_pct, percent);
	return XTC_OK;
}

int xtc_preempt_get_budget(void)
{
	return atomic_load(&budget_pct);
}

/* A clock-checked carrier's run (xtc_exec_set_preempt_coop): its slice
 * end is all there is. A run of xtc_fn (exact) is not cut: its deadline is
 * the function's, kept by fn.c. */
static int64_t coop_slice_of(const xtc__ptls_t *p, int64_t slice_ns)
{
	int64_t base = atomic_load_explicit(&xtc__preempt_adaptive_slice,
	                                    memory_order_relaxed);
	if (base <= 0)
		base = p->coop_slice;
	return slice_ns <= 0 || slice_ns > base ? base : slice_ns;
}

static void coop_begin(xtc__ptls_t *p, int64_t slice_ns, int exact,
                       int64_t now)
{
	if (exact) {
		p->coop_due = 0;
		return;
	}
	slice_ns = coop_slice_of(p, slice_ns);
	if (now <= 0)
		now = xtc_clock_mono(); /* the simulator's virtual clock */
	p->run_start = now;
	p->slice = slice_ns;
	p->early = slice_ns / XTC__SLICE_EARLY_DIV;
	p->hard = xtc__deadline_after(now, slice_ns);
	p->coop_due = p->hard;
}

/* Batched publication. Back-to-back runs that producers time (lazy 3: their
 * work waits or was just drained) share one publication while its slice
 * end is at least half a slice away: the slot keeps the deadline and
 * generation of the batch's first run, and run_end leaves them. Producers
 * read the slot at every submission; a carrier that rewrote it per run
 * took the line back from their CPU each time (measured: ~80 ns a request
 * on a 2-vCPU guest, a tenth of a 0.5 us request's whole cost). What it
 * changes: a run of the batch may be cut up to half a slice early, which
 * is the slice-end window every trigger already allows (preempt_monitor.c); a
 * signal that lands between two runs is stale (handler); only a carrier
 * with a tick net batches (the monitor, which would see a deadline that
 * outlives its run, leaves such slots alone). Any other writer of the
 * slot (a redirect, a re-ask, a nested run, a Go callback, a producer's
 * signal: contended 2) changes what is checked here and ends the batch. */
static int batch_keeps(xtc__ptls_t *p, xtc__pslot_t *s, int lazy,
                       int64_t soft, int64_t now)
{
	if (!p->batch || lazy != 3)
		return 0;
	int64_t b = p->batch_soft;
	if (b > soft || b - now < p->slice / 2 ||
	    atomic_load_explicit(&s->gen, memory_order_relaxed) != p->batch_gen ||
	    atomic_load_explicit(&s->deadline, memory_order_relaxed) != b ||
	    atomic_load_explicit(&s->contended, memory_order_relaxed) != 1) {
		p->batch = 0;
		return 0;
	}
	p->hard = b;
	return 1;
}

/* A thread with its own slice timer and no tick net: one that runs
 * deadline functions outside any carrier (fn.c). */
static inline int plain_timer(xtc__pslot_t *s)
{
	return atomic_load_explicit(&s->timer, memory_order_relaxed) ==
	       XTC__TIMER_MONO;
}

/* A deadline function's run on such a thread: the monitor signals it at
 * its deadline (net = deadline), and the thread's own timer is the
 * backstop a grace later, for when the monitor is not scheduled in time
 * (an oversubscribed machine woke it 16-250 ms late: a 200 us function
 * then ran 35 ms uncut). The backstop stays armed across runs while it
 * falls within [deadline, deadline + grace] of the new run, so
 * back-to-back functions arm it about once per grace of busy time, and it
 * expires between runs (stale, ignored) at most as often. Rejected: the
 * timer at the deadline itself (an arm per launch whose deadline moved,
 * and an expiry per function that finished early: ~13 and ~40 us each
 * where the hypervisor is slow). */
static void trigger_exact(xtc__pslot_t *s, int64_t hard, int64_t slice_ns)
{
	atomic_store_explicit(&s->net, hard, memory_order_release);
	xtc__monitor_kick(hard);
	int64_t grace = slice_ns > INT64_MAX / 4 ? INT64_MAX : 4 * slice_ns;
	if (grace < XTC__PREEMPT_NET_GRACE_NS)
		grace = XTC__PREEMPT_NET_GRACE_NS;
	int64_t at = atomic_load_explicit(&s->timer_at, memory_order_relaxed);
	int64_t last = xtc__deadline_after(hard, grace);
	if (at < hard || at > last)
		xtc__ctimer_arm(s, last);
}

/* until: 0 = a contended run (hard = soft); > 0 see XTC__RUN_ALONE.
 * lazy: 0 a plain run (XTC__RUN_TICK, _EXACT, _AT, _ALONE), 1 _ALONE_TURN,
 * 2 _FULL, 3 _POLLED, 4 _ALONE_FRESH. */
static void run_begin(xtc__fiber_t *f, int64_t slice_ns, int exact,
                      int64_t now, int64_t until, int lazy)
{
	xtc__ptls_t *p = &xtc__ptls;
	p->fiber = f;
	p->pend = 0;
	if (f != NULL && f->invol && p->n_preempted > 0)
		xtc__preempted_resumes(f);
	if (p->ring)
		xtc__tickring_resume();
	xtc__pslot_t *s = p->slot;
	if (s == NULL) {
		if (p->coop_slice > 0)
			coop_begin(p, slice_ns, exact, now);
		return;
	}
	int64_t asked = slice_ns;
	if (!exact) {
		/* the carrier's slice (or the adaptive one); a class latency
		 * budget may only shorten it */
		int64_t base = atomic_load_explicit(&xtc__preempt_adaptive_slice,
		                                    memory_order_relaxed);
		if (base <= 0)
			base = atomic_load_explicit(&s->slice_ns, memory_order_relaxed);
		if (slice_ns <= 0 || slice_ns > base)
			slice_ns = base;
		if (slice_ns < XTC__PREEMPT_MIN_SLICE_NS)
			slice_ns = XTC__PREEMPT_MIN_SLICE_NS;
	}
	if (now <= 0)
		now = now_ns();
	if (p->pc_at != 0)
		cost_close(p, now);
	if (p->idle_at != 0) {
		/* idle time: the adaptive quantum's load and the budget's (the
		 * spell that ends now belongs to the window it ends in) */
		if (now > p->idle_at) {
			p->ovh_idle += now - p->idle_at;
			if (atomic_load_explicit(&xtc__preempt_adaptive_slice,
			                         memory_order_relaxed) > 0)
				xtc__up.quantum_idle(now - p->idle_at);
		}
		p->idle_at = 0;
	}
	if (!exact) {
		if (now - p->ovh_win >= XTC_PREEMPT_BUDGET_WINDOW_NS ||
		    xtc__preempt_budget_early(now - p->ovh_win, p->ovh_idle,
		        p->ovh_ns, atomic_load_explicit(&budget_pct,
		                                        memory_order_relaxed)))
			budget_window(p, now);
		slice_ns = slice_ns > (INT64_MAX >> p->stretch) ? INT64_MAX
		           : slice_ns << p->stretch;
	}
	int64_t soft = xtc__deadline_after(now, slice_ns), hard = soft;
	int64_t cap = xtc__deadline_after(now,
	    atomic_load_explicit(&xtc__preempt_alone_ns, memory_order_relaxed));
	if (until > 0) {
		hard = cap;
		if (until < hard)
			hard = until;
		if (hard < soft)
			hard = soft;
	}
	p->run_start = now;
	p->slice = slice_ns;
	p->early = slice_ns / XTC__SLICE_EARLY_DIV;
	/* a turn among demoted work ends within its last half slice (the
	 * timer armed for the turn's first dispatch serves the next ones of
	 * work that yields by itself); a loop timer's deadline is exact */
	p->hard_early = lazy == 1 ? p->early : 0;
	p->hard = hard;
	/* clock-checked with an involuntary backstop: the points cut at the
	 * slice, the interrupts only at the backstop's */
	if (p->coop_slice > 0)
		p->coop_due = exact ? 0 :
		    xtc__deadline_after(now, coop_slice_of(p, asked));
	if (batch_keeps(p, s, lazy, soft, now))
		return;
	uint32_t g = atomic_load_explicit(&s->gen, memory_order_relaxed);
	atomic_store_explicit(&s->contended, lazy == 3, memory_order_relaxed);
	atomic_store_explicit(&s->soft, soft, memory_order_relaxed);
	atomic_store_explicit(&s->gen, g + 1, memory_order_relaxed);
	atomic_store_explicit(&s->deadline, hard, memory_order_release);
	/* a run producers time on a carrier with a tick net opens a batch */
	p->batch = lazy == 3 && (atomic_load_explicit(&s->timer,
	    memory_order_relaxed) & XTC__TIMER_TICK);
	p->batch_gen = g + 1;
	p->batch_soft = soft;
	/* an alone run that gets contended kicks the trigger itself */
	if (exact && plain_timer(s))
		trigger_exact(s, hard, slice_ns);
	else
		trigger_run(s, soft, hard, now, cap, lazy);
}

static void run_clear(xtc__ptls_t *p)
{
	xtc__pslot_t *s = p->slot;
	p->batch = 0;
	if (s != NULL) {
		atomic_store_explicit(&s->deadline, INT64_MAX, memory_order_relaxed);
		atomic_store_explicit(&s->net, INT64_MAX, memory_order_relaxed);
	}
}

void xtc__preempt_run_end(void)
{
	xtc__ptls_t *p = &xtc__ptls;
	/* a batch's publication outlives its runs (batch_keeps) */
	if (!p->batch)
		run_clear(p);
	p->fiber = NULL;
	p->coop_due = 0;
}

void xtc__preempt_run_save(xtc__prun_t *out)
{
	xtc__ptls_t *p = &xtc__ptls;
	out->fiber = p->fiber;
	out->start = p->run_start;
	out->slice = p->slice;
	out->hard = p->hard;
	out->contended = p->slot != NULL &&
	                 atomic_load_explicit(&p->slot->contended,
	                                      memory_order_relaxed);
	out->force_invol = p->force_invol;
	out->hook = p->yield_hook;
	out->hook_arg = p->yield_arg;
	out->coop_due = p->coop_due;
}

/* A run continues (after a nested run or a Go callback) with deadlines
 * that may be past: the trigger asks at once then. */
static void republish(xtc__pslot_t *s, int64_t soft, int64_t hard)
{
	int64_t d = atomic_load(&s->contended) ? soft : hard;
	if (!atomic_load_explicit(&s->timer, memory_order_relaxed)) {
		xtc__monitor_kick(d);
		return;
	}
	int64_t now = now_ns();
	int64_t cap = xtc__deadline_after(now,
	    atomic_load_explicit(&xtc__preempt_alone_ns, memory_order_relaxed));
	if (d == hard && hard >= cap && soft != hard) {
		atomic_store_explicit(&s->net, hard, memory_order_release);
		xtc__monitor_net(s, hard);
		return;
	}
	atomic_store_explicit(&s->net, INT64_MAX, memory_order_relaxed);
	xtc__ctimer_arm(s, d > now ? d : now + 1000);
}

void xtc__preempt_run_restore(const xtc__prun_t *in)
{
	xtc__ptls_t *p = &xtc__ptls;
	p->force_invol = in->force_invol;
	p->yield_hook = in->hook;
	p->yield_arg = in->hook_arg;
	p->fiber = in->fiber;
	p->run_start = in->start;
	p->slice = in->slice;
	p->early = in->slice / XTC__SLICE_EARLY_DIV;
	p->hard_early = 0;
	p->hard = in->hard;
	p->batch = 0;
	xtc__pslot_t *s = p->slot;
	if (p->coop_slice > 0)
		p->coop_due = in->fiber != NULL && in->coop_due != 0 ?
		              in->coop_due : 0;
	if (s == NULL || in->fiber == NULL)
		return;
	uint32_t g = atomic_load_explicit(&s->gen, memory_order_relaxed);
	/* a contention seen before or during the nested run still holds */
	if (in->contended)
		atomic_store_explicit(&s->contended, 1, memory_order_relaxed);
	atomic_store_explicit(&s->soft, in->start + in->slice,
	                      memory_order_relaxed);
	atomic_store_explicit(&s->gen, g + 1, memory_order_relaxed);
	atomic_store_explicit(&s->deadline, in->hard, memory_order_release);
	republish(s, in->start + in->slice, in->hard);
}

void xtc__preempt_gocb_pause(void)
{
	xtc__ptls_t *p = &xtc__ptls;
	xtc__pslot_t *s = p->slot;
	p->batch = 0; /* the run's own publication from here on */
	if (s == NULL)
		return;
	uint32_t g = atomic_load_explicit(&s->gen, memory_order_relaxed);
	atomic_store_explicit(&s->deadline, INT64_MAX, memory_order_relaxed);
	atomic_store_explicit(&s->gen, g + 1, memory_order_release);
	/* no expiry may land while Go code runs on this thread */
	if (atomic_load_explicit(&s->timer, memory_order_relaxed) &&
	    atomic_load_explicit(&s->timer_at, memory_order_relaxed) != INT64_MAX)
		xtc__ctimer_arm(s, INT64_MAX);
}

void xtc__preempt_gocb_resume(void)
{
	xtc__ptls_t *p = &xtc__ptls;
	xtc__pslot_t *s = p->slot;
	xtc__tick_net_resume();
	if (s == NULL || p->fiber == NULL)
		return;
	/* the run continues: its deadline (maybe past: then the monitor asks
	 * at once) under a fresh generation; soft and contended are kept */
	uint32_t g = atomic_load_explicit(&s->gen, memory_order_relaxed);
	atomic_store_explicit(&s->gen, g + 1, memory_order_relaxed);
	atomic_store_explicit(&s->deadline, p->hard, memory_order_release);
	republish(s, p->run_start + p->slice, p->hard);
}

int xtc__preempt_check_due(struct xtc_loop *loop)
{
	(void)loop;
	return xtc__preempt_due();
}

void xtc__preempt_idle(void)
{
	xtc__ptls_t *p = &xtc__ptls;
	xtc__pslot_t *s = p->slot;
	xtc__preempt_run_end();
	run_clear(p); /* an idle carrier publishes nothing, batch or not */
	if (p->ring)
		xtc__tickring_pause();
	/* an idle carrier gets no interrupt: disarm a pending expiry */
	if (s != NULL && atomic_load_explicit(&s->timer, memory_order_relaxed) &&
	    atomic_load_explicit(&s->timer_at, memory_order_relaxed) != INT64_MAX)
		xtc__ctimer_arm(s, INT64_MAX);
	if (p->idle_at == 0)
		p->idle_at = now_ns();
}

void xtc__preempt_idle_from(void)
{
	xtc__ptls_t *p = &xtc__ptls;
	/* the run clock (now_ns), not the loop's: run_begin closes it */
	if (p->slot != NULL && p->idle_at == 0)
		p->idle_at = now_ns();
}

/* ------------------------------------------------------------------ */
/* Executor                                                             */
/* ------------------------------------------------------------------ */

int xtc__preempt_exec_configure(struct xtc_exec *exec, int64_t interval_ns)
{
	if (exec == NULL)
		return XTC_E_INVAL;
	if (interval_ns > 0 && !xtc_preempt_supported())
		return XTC_E_NOSYS;
	return XTC_OK;
}

int xtc__preempt_carrier_start(int64_t interval_ns, int on_uring, int coop)
{
	if (interval_ns <= 0)
		return XTC_OK;
	/* Clock-checked: no slot (the monitor and producers leave the
	 * carrier alone), no timer, no ring: nothing interrupts it. */
	if (coop) {
		xtc__ptls.coop_slice = interval_ns;
		xtc__ptls.coop_due = 0;
		if (!xtc__preempt_involuntary_on())
			return XTC_OK;
		/* the involuntary path as a backstop for code without points:
		 * the usual trigger at a multiple of the slice */
		interval_ns = interval_ns > INT64_MAX / XTC__COOP_BACKSTOP ?
		              INT64_MAX : interval_ns * XTC__COOP_BACKSTOP;
	}
	/* Cooperative on io_uring: the tick ring, no signal. The involuntary
	 * path needs the signal, so it uses the monitor. */
	if (!xtc__preempt_involuntary_on() && on_uring &&
	    xtc_preempt_arm_ring(interval_ns) == XTC_OK)
		return XTC_OK;
	/* no periodic tick: the loop publishes a deadline per run */
	int rc = xtc__preempt_register(interval_ns);
	if (rc != XTC_OK)
		return rc;
	/* the carrier's own slice timer (preempt_monitor.c); without one the carrier
	 * stays on the monitor-driven path, counted */
	xtc__pslot_t *s = xtc__ptls.slot;
	if (!(atomic_load(&s->timer) & XTC__TIMER_TICK) &&
	    xtc__ctimer_create(s, (int)syscall(SYS_gettid), 1) != XTC_OK)
		atomic_fetch_add(&xtc__ctimer_fallbacks, 1);
	/* its parks wake for loop timers: no 50 us coalescing either */
	(void)prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
	return XTC_OK;
}

void xtc__preempt_carrier_stop(void)
{
	xtc__ptls.coop_slice = 0;
	xtc__ptls.coop_due = 0;
	xtc_preempt_disarm();
	xtc_preempt_disarm_ring();
}

/* Go callbacks (xtc__gocb_enter, loop_int.h) reach preemption through the
 * fiber layer's hooks. */
__attribute__((constructor)) static void preempt_upcalls(void)
{
	xtc__up.gocb_pause = xtc__preempt_gocb_pause;
	xtc__up.gocb_resume = xtc__preempt_gocb_resume;
}
