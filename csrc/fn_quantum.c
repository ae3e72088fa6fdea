/*
 * fn_quantum.c - the adaptive quantum controller (xtc_fn_quantum_*,
 * xtc_exec_set_preempt_adaptive):
 * LibPreemptible's Algorithm 1. Inputs, per period:
 *  - service times: whole requests, not run lengths. The executor records a
 *    task's run time from when it became ready to when it finishes or
 *    parks (its preempted runs add up), so a slice cut at the quantum does
 *    not look like a heavy tail. (Run lengths truncated at q made A1 look
 *    heavy whatever q was and halved q down to 5 us.)
 *  - load: non-idle wall time of the carriers over wall time x workers
 *    (carriers report each idle stretch when they run again; it starts
 *    when the carrier finds nothing to run, before it spins: counting the
 *    spin as busy read A1 at 10% as 30-45% and at 70% as 100%); a period
 *    with no idle report on an attached executor is load 1. Summing run
 *    lengths instead hid the per-request overhead and counted preemption
 *    stalls. xtc_fn_quantum_add_busy feeds a controller not attached to
 *    an executor; xtc_fn_quantum_set_load overrides both.
 *  - preemption cost: the period's involuntary preemptions (counted per
 *    redirect, xtc__fn_quantum_cost) times the measured cost of one (at
 *    least the assumed 12.5 us), over the capacity.
 *  - alpha: the Hill estimator over the top k = max(8, n/10) services;
 *    heavy when alpha < alpha_heavy (2).
 * Rule:
 *     load >= L_high:  q = heavy ? q/2 : 2q   (a light tail wants FCFS)
 *                      (q/2 only while twice the preemption cost stays
 *                      within PREEMPT_BUDGET of the capacity, else hold)
 *     load <= L_low:   q = 2q                 (few preemptions when idle)
 *     otherwise:       q unchanged            (hold in the middle band)
 * clamped to [floor, max], floor = max(min_ns, 4 x the measured cost of
 * one preemption) (12.5 us assumed until one was measured): a quantum
 * near the cost of the signal spends the carrier on preempting. Each
 * update is kept in a small trajectory ring (xtc_fn_quantum_trajectory).
 * Samples go into a ring indexed by an atomic counter (any thread, no
 * lock; a torn statistic is harmless). The update selects the top tenth
 * of up to `window` samples (quickselect, O(n)), on the monitor thread,
 * never on a carrier.
 *
 *
 * Invariants: one controller drives an executor at a time (attached
 * through exec_q_get/put); its update runs on the monitor thread.
 *
 * Rejected: updating on a carrier (the selection is O(window) and a
 * carrier's time is the requests'); a lock around the sample ring.
 */
#include "rtcode_int.h" /* first: this file is runtime code */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "preempt_int.h"
#include "loop_int.h"
#include "xtc_fn.h"
#include "xtc_exec.h"

static int64_t now_ns(void)
{
	return xtc__now_ns(); /* base_int.h */
}

struct xtc_fn_quantum {
	xtc_fn_quantum_opts_t o;
	_Atomic int64_t quantum;
	_Atomic uint64_t head;        /* samples ever recorded */
	uint64_t seen;                /* head at the last update */
	_Atomic int64_t busy;         /* busy ns since the last update */
	int64_t last_update;
	_Atomic int64_t next_update;  /* monitor: when to run it */
	double alpha, load;
	_Atomic int64_t load_override_ppm; /* < 0: measure */
	_Atomic int64_t *ring;        /* window entries (power of two) */
	unsigned mask;
	int64_t *scratch;
	_Atomic int64_t idle;         /* carrier idle ns since the last update */
	_Atomic uint64_t idle_reports;
	_Atomic int64_t npre;         /* involuntary preemptions since the last update */
	int exec_fed;                 /* attached to an executor: idle-based load */
	xtc_fn_quantum_point_t traj[XTC_FN_QUANTUM_TRAJ];
	_Atomic uint64_t n_traj;
};

/* Assumed preemption cost until one was measured (a 2-vCPU VM
 * measured 10-12 us of carrier CPU, 12-15 us late). */
#define COST_DEFAULT_NS 12500
#define COST_FLOOR_MULT 4
/* Share of the carriers' capacity that preempting may take before the
 * controller stops shortening the quantum. */
#define PREEMPT_BUDGET 0.1

/* One preemption's cost for the controller: the measured one, never less
 * than the assumed one (the measurement closes at the next dispatch and
 * misses part of the interrupt's cost on a virtual machine). */
static int64_t cost_ns(void)
{
	int64_t c = atomic_load_explicit(&xtc__preempt_cost_ewma,
	                                 memory_order_relaxed);
	return c > COST_DEFAULT_NS ? c : COST_DEFAULT_NS;
}

static int64_t quantum_floor(const xtc_fn_quantum_t *q)
{
	int64_t c = atomic_load_explicit(&xtc__preempt_cost_ewma,
	                                 memory_order_relaxed);
	int64_t f = (c > 0 ? c : COST_DEFAULT_NS) * COST_FLOOR_MULT;
	if (f < q->o.min_ns)
		f = q->o.min_ns;
	if (f > q->o.max_ns)
		f = q->o.max_ns;
	return f;
}

static unsigned pow2_at_least(unsigned n)
{
	unsigned p = 16;
	while (p < n && p < (1u << 20))
		p <<= 1;
	return p;
}

int xtc_fn_quantum_create(const xtc_fn_quantum_opts_t *opts,
                          xtc_fn_quantum_t **out)
{
	if (out == NULL)
		return XTC_E_INVAL;
	*out = NULL;
	xtc_fn_quantum_opts_t o = { 0 };
	if (opts)
		o = *opts;
	/* isfinite: a NaN compares false with everything, so a NaN threshold
	 * would silently never fire; an infinite one always or never. */
	if (o.min_ns < 0 || o.max_ns < 0 || o.initial_ns < 0 || o.period_ns < 0 ||
	    !isfinite(o.load_high) || !isfinite(o.load_low) ||
	    !isfinite(o.alpha_heavy) ||
	    o.load_high < 0 || o.load_low < 0 || o.alpha_heavy < 0 ||
	    o.workers < 0)
		return XTC_E_INVAL;
	if (!o.min_ns) o.min_ns = 5000;
	if (!o.max_ns) o.max_ns = 1000000;
	if (!o.initial_ns) o.initial_ns = 100000;
	if (!o.period_ns) o.period_ns = 10000000000LL;
	if (o.load_high == 0) o.load_high = 0.9;
	if (o.load_low == 0) o.load_low = 0.1;
	if (o.alpha_heavy == 0) o.alpha_heavy = 2.0;
	if (!o.window) o.window = 4096;
	if (!o.workers) o.workers = 1;
	if (o.min_ns > o.max_ns || o.load_low > o.load_high)
		return XTC_E_RANGE;
	if (o.initial_ns < o.min_ns) o.initial_ns = o.min_ns;
	if (o.initial_ns > o.max_ns) o.initial_ns = o.max_ns;
	xtc_fn_quantum_t *q = calloc(1, sizeof *q);
	if (q == NULL)
		return XTC_E_NOMEM;
	unsigned w = pow2_at_least(o.window);
	q->ring = calloc(w, sizeof *q->ring);
	q->scratch = calloc(w, sizeof *q->scratch);
	if (q->ring == NULL || q->scratch == NULL) {
		free((void *)q->ring);
		free(q->scratch);
		free(q);
		return XTC_E_NOMEM;
	}
	q->o = o;
	q->mask = w - 1;
	atomic_store(&q->quantum, o.initial_ns);
	atomic_store(&q->load_override_ppm, -1);
	q->last_update = now_ns();
	atomic_store(&q->next_update,
	             xtc__deadline_after(q->last_update, o.period_ns));
	*out = q;
	return XTC_OK;
}

static _Atomic(xtc_fn_quantum_t *) exec_q;
static atomic_int exec_q_users; /* threads between loading exec_q and done */

/* Pin the attached controller for one use (NULL: none attached). The
 * relaxed pre-check keeps the per-run cost at one load while none is. */
static xtc_fn_quantum_t *exec_q_get(void)
{
	xtc_fn_quantum_t *q;

	if (atomic_load_explicit(&exec_q, memory_order_relaxed) == NULL)
		return NULL;
	atomic_fetch_add(&exec_q_users, 1);
	q = atomic_load(&exec_q);
	if (q == NULL)
		atomic_fetch_sub(&exec_q_users, 1);
	return q;
}

static void exec_q_put(void)
{
	atomic_fetch_sub_explicit(&exec_q_users, 1, memory_order_release);
}

void xtc_fn_quantum_destroy(xtc_fn_quantum_t *q)
{
	if (q == NULL)
		return;
	xtc_fn_quantum_t *expect = q;
	if (atomic_compare_exchange_strong(&exec_q, &expect, NULL))
		atomic_store(&xtc__preempt_adaptive_slice, 0);
	/* A carrier or the monitor may have loaded q just before it was
	 * detached (here or by xtc_exec_set_preempt_adaptive): wait for those
	 * uses to end. Users count themselves before loading exec_q, so one
	 * that starts after this check sees the detached pointer. */
	while (atomic_load(&exec_q_users) != 0)
		sched_yield();
	free((void *)q->ring);
	free(q->scratch);
	free(q);
}

int xtc_fn_quantum_record(xtc_fn_quantum_t *q, int64_t service_ns)
{
	if (q == NULL || service_ns < 0)
		return XTC_E_INVAL;
	uint64_t i = atomic_fetch_add_explicit(&q->head, 1, memory_order_relaxed);
	atomic_store_explicit(&q->ring[i & q->mask], service_ns,
	                      memory_order_relaxed);
	return XTC_OK;
}

int xtc_fn_quantum_add_busy(xtc_fn_quantum_t *q, int64_t busy_ns)
{
	if (q == NULL || busy_ns < 0)
		return XTC_E_INVAL;
	atomic_fetch_add_explicit(&q->busy, busy_ns, memory_order_relaxed);
	return XTC_OK;
}

int xtc_fn_quantum_set_load(xtc_fn_quantum_t *q, double load)
{
	if (q == NULL || !isfinite(load))
		return XTC_E_INVAL;
	atomic_store(&q->load_override_ppm,
	             load < 0 ? -1 : (int64_t)(load > 1000 ? 1e9 : load * 1e6));
	return XTC_OK;
}

/* Rearranges v[0..n) so that v[k] holds what a descending sort would put
 * there, with v[0..k) >= v[k] >= v(k..n): the Hill estimator needs the k
 * largest samples and the next one, not their order. Quickselect, O(n) on
 * average: a qsort of the 4096-sample window took 450 us of the monitor
 * thread per update on a 2-vCPU guest, a stall of whatever shared its CPU
 * (the load generator: its lag p99 went to 0.1-0.7 ms under the adaptive
 * quantum, and the light-tailed B looked worse than no preemption). */
static void select_desc(int64_t *v, size_t n, size_t k)
{
	ptrdiff_t lo = 0, hi = (ptrdiff_t)n - 1, kk = (ptrdiff_t)k;
	while (lo < hi) {
		int64_t a = v[lo], b = v[lo + (hi - lo) / 2], c = v[hi];
		int64_t pivot = a > b ? (b > c ? b : a > c ? c : a)
		                      : (a > c ? a : b > c ? c : b);
		ptrdiff_t i = lo, j = hi;
		while (i <= j) {
			while (v[i] > pivot)
				i++;
			while (v[j] < pivot)
				j--;
			if (i <= j) {
				int64_t t = v[i];
				v[i++] = v[j];
				v[j--] = t;
			}
		}
		/* v[lo..j] >= pivot, v[i..hi] <= pivot, between: == pivot */
		if (kk <= j)
			hi = j;
		else if (kk >= i)
			lo = i;
		else
			return;
	}
}

/* Hill estimator of the tail index over the k largest samples. */
static double hill_alpha(int64_t *v, size_t n)
{
	if (n < 16)
		return 0;
	size_t k = n / 10;
	if (k < 8)
		k = 8;
	if (k >= n)
		k = n - 1;
	select_desc(v, n, k);
	double xk = (double)(v[k] > 0 ? v[k] : 1), h = 0;
	for (size_t i = 0; i < k; i++)
		h += log((double)(v[i] > 0 ? v[i] : 1) / xk);
	h /= (double)k;
	return h > 0 ? 1.0 / h : 1e9; /* all equal: lightest possible tail */
}

int64_t xtc_fn_quantum_update(xtc_fn_quantum_t *q)
{
	if (q == NULL)
		return XTC_E_INVAL;
	int64_t now = now_ns();
	uint64_t head = atomic_load(&q->head);
	uint64_t n = head - q->seen;
	if (n > q->mask + 1)
		n = q->mask + 1;
	for (uint64_t i = 0; i < n; i++)
		q->scratch[i] = atomic_load_explicit(&q->ring[(head - n + i) & q->mask],
		                                     memory_order_relaxed);
	q->seen = head;
	int64_t wall = now - q->last_update;
	q->last_update = now;
	int64_t busy = atomic_exchange(&q->busy, 0);
	int64_t idle = atomic_exchange(&q->idle, 0);
	uint64_t idle_n = atomic_exchange(&q->idle_reports, 0);
	int64_t npre = atomic_exchange(&q->npre, 0);
	int64_t ov = atomic_load(&q->load_override_ppm);
	double cap = (double)wall * q->o.workers;
	if (ov >= 0)
		q->load = (double)ov / 1e6;
	else if (q->exec_fed && wall > 0) {
		/* non-idle wall time; an idle stretch is reported when it
		 * ends, so one spanning the update counts in the next period */
		q->load = 1.0 - (double)idle / cap;
		if (q->load < 0)
			q->load = 0;
		if (idle_n > 0 || n > 0)
			busy = 1; /* something was observed */
	} else
		q->load = wall > 0 ? (double)busy / cap : 0;
	q->alpha = hill_alpha(q->scratch, (size_t)n);
	int heavy = q->alpha > 0 && q->alpha < q->o.alpha_heavy;
	int64_t qu = atomic_load(&q->quantum);
	if (n == 0 && busy == 0 && ov < 0)
		; /* nothing observed: keep it */
	else if (q->load >= q->o.load_high) {
		/* a halved quantum about doubles what preempting costs (this
		 * period's preemptions times cost_ns()): it halves only while
		 * that stays within PREEMPT_BUDGET of the capacity, else it
		 * holds (at 70% of A1 a 25 us quantum spent the carrier on
		 * signals and the backlog never drained) */
		double pov = cap > 0 ? (double)npre * (double)cost_ns() / cap : 0;
		if (!heavy)
			qu = qu * 2;
		else if (2 * pov <= PREEMPT_BUDGET)
			qu = qu / 2;
	}
	else if (q->load <= q->o.load_low)
		qu = qu * 2;
	/* else: the middle band holds */
	int64_t fl = quantum_floor(q);
	if (n == 0 && busy == 0 && ov < 0)
		; /* nothing observed: not even the floor moves it */
	else if (qu < fl)
		qu = fl;
	if (qu > q->o.max_ns)
		qu = q->o.max_ns;
	atomic_store(&q->quantum, qu);
	uint64_t ti = atomic_load_explicit(&q->n_traj, memory_order_relaxed);
	xtc_fn_quantum_point_t *pt = &q->traj[ti % XTC_FN_QUANTUM_TRAJ];
	pt->at_ns = now;
	pt->quantum_ns = qu;
	pt->floor_ns = fl;
	pt->load = q->load;
	pt->tail_index = q->alpha;
	pt->samples = n;
	atomic_store_explicit(&q->n_traj, ti + 1, memory_order_release);
	atomic_store(&q->next_update, xtc__deadline_after(now, q->o.period_ns));
	if (atomic_load(&exec_q) == q)
		atomic_store(&xtc__preempt_adaptive_slice, qu);
	return qu;
}

int64_t xtc_fn_quantum_get(const xtc_fn_quantum_t *q)
{
	return q ? atomic_load(&((xtc_fn_quantum_t *)q)->quantum) : XTC_E_INVAL;
}

double xtc_fn_quantum_tail_index(const xtc_fn_quantum_t *q)
{
	return q ? q->alpha : 0;
}

double xtc_fn_quantum_load(const xtc_fn_quantum_t *q)
{
	return q ? q->load : 0;
}

int xtc_fn_quantum_trajectory(const xtc_fn_quantum_t *q,
                              xtc_fn_quantum_point_t *out, int max)
{
	if (q == NULL || max < 0 || (out == NULL && max > 0))
		return XTC_E_INVAL;
	uint64_t n = atomic_load_explicit(&((xtc_fn_quantum_t *)q)->n_traj,
	                                  memory_order_acquire);
	uint64_t first = n > XTC_FN_QUANTUM_TRAJ ? n - XTC_FN_QUANTUM_TRAJ : 0;
	int k = 0;
	for (uint64_t i = first; i < n && k < max; i++)
		out[k++] = q->traj[i % XTC_FN_QUANTUM_TRAJ];
	return k;
}

int xtc_exec_set_preempt_adaptive(struct xtc_exec *exec, xtc_fn_quantum_t *q)
{
	if (exec == NULL)
		return XTC_E_INVAL;
	if (q != NULL)
		q->exec_fed = 1;
	atomic_store(&exec_q, q);
	if (q != NULL) /* the monitor runs its updates: wake it for them */
		xtc__monitor_kick(atomic_load(&q->next_update));
	atomic_store(&xtc__preempt_adaptive_slice, q ? xtc_fn_quantum_get(q) : 0);
	return XTC_OK;
}

/* exec.c: one whole service (a task's runs until it finished or parked). */
static void xtc__fn_quantum_service(int64_t svc_ns)
{
	xtc_fn_quantum_t *q = exec_q_get();
	if (q == NULL)
		return;
	xtc_fn_quantum_record(q, svc_ns);
	exec_q_put();
}

/* preempt_run.c: a carrier was idle this long (it runs again now). */
static void xtc__fn_quantum_idle(int64_t idle_ns)
{
	xtc_fn_quantum_t *q = exec_q_get();
	if (q == NULL)
		return;
	if (idle_ns > 0) {
		atomic_fetch_add_explicit(&q->idle, idle_ns, memory_order_relaxed);
		atomic_fetch_add_explicit(&q->idle_reports, 1,
		                          memory_order_relaxed);
	}
	exec_q_put();
}

/* preempt_run.c: the measured cost of one involuntary preemption. */
static void xtc__fn_quantum_cost(int64_t cost_ns)
{
	xtc_fn_quantum_t *q = exec_q_get();
	if (q == NULL)
		return;
	if (cost_ns > 0)
		atomic_fetch_add_explicit(&q->npre, 1, memory_order_relaxed);
	exec_q_put();
}

/* preempt_monitor.c: when the attached controller wants its next update. */
static int64_t xtc__fn_quantum_next(void)
{
	xtc_fn_quantum_t *q = exec_q_get();
	if (q == NULL)
		return INT64_MAX;
	int64_t t = atomic_load(&q->next_update);
	exec_q_put();
	return t;
}

/* preempt_monitor.c: run the controller when its period has come. */
static void xtc__fn_quantum_tick(int64_t now)
{
	xtc_fn_quantum_t *q = exec_q_get();
	if (q == NULL)
		return;
	if (now >= atomic_load(&q->next_update))
		(void)xtc_fn_quantum_update(q);
	exec_q_put();
}

/* Preemption and the scheduler reach the controller through these
 * (preempt_int.h), not by name. */
__attribute__((constructor)) static void fn_quantum_register(void)
{
	xtc__up.quantum_tick = xtc__fn_quantum_tick;
	xtc__up.quantum_next = xtc__fn_quantum_next;
	xtc__up.quantum_idle = xtc__fn_quantum_idle;
	xtc__up.quantum_service = xtc__fn_quantum_service;
	xtc__up.quantum_cost = xtc__fn_quantum_cost;
}
