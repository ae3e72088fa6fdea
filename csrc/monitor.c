/*
 * monitor.c - the preemption monitor thread (LibPreemptible's timer thread,
 * without UINTR).
 *
 * Model: a fixed table of 64-byte slots, one per armed carrier thread. A
 * carrier publishes in its own slot the CLOCK_MONOTONIC deadline of the run
 * it is executing (INT64_MAX when idle or between runs) and a generation
 * bumped per run. One monitor thread sleeps until the earliest deadline (at
 * most the shortest slice ahead, since a run that starts while it sleeps
 * ends no earlier than that), and sends the preemption signal, carrying the
 * generation in si_value, to each carrier whose deadline has passed. It
 * sends at most one signal per (generation, deadline) pair: the handler
 * re-arms the deadline when it defers, which is what asks for the next one.
 * The monitor sleeps on a futex with an absolute CLOCK_MONOTONIC timeout
 * and publishes when it will wake (wake_at; INT64_MAX when no slot held a
 * deadline for two scans). A carrier that publishes a deadline earlier than
 * wake_at wakes it (xtc__monitor_kick: a fence and one load per run
 * otherwise; the monitor re-scans after publishing wake_at, so a deadline
 * racing with its decision to sleep is never missed).
 *
 * Alone runs: a slot carries a hard deadline and a soft one (the slice
 * end). The monitor acts at the hard deadline, or at the soft one once the
 * slot is marked contended (preempt_int.h). While a sliced (contended) run
 * exists it sleeps at most the shortest slice, so the carrier's next run
 * never has to kick it (a futex syscall per preemption on the carrier's
 * CPU); with only alone runs it sleeps to their hard deadlines: a lone
 * spinner costs neither the carrier nor the monitor a wake per slice.
 *
 * Invariants: only the carrier writes deadline/gen/soft of its slot (any
 * thread may set contended; the carrier clears it per run); only the
 * monitor writes its private last-signalled record; slots are never freed
 * (a freed slot has tid 0 and is skipped), so the monitor never reads freed
 * memory.
 *
 * Rejected: per-carrier POSIX timers on CLOCK_THREAD_CPUTIME_ID (they fire
 * only at the kernel tick, 4 ms here); per-carrier CLOCK_MONOTONIC timers
 * (every carrier takes an interrupt per period even when its fibers yield on
 * their own, and an idle carrier must disarm them); busy-polling the TSC
 * like LibPreemptible (burns a core on a 2-core machine).
 */
#include "rtcode_int.h" /* first: this file is runtime code */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "preempt_int.h"

static xtc__pslot_t slots[XTC__PREEMPT_MAX_SLOTS];

/* Monitor-private: what was last signalled for each slot. */
static struct {
	uint32_t gen;
	int64_t deadline;
} sent[XTC__PREEMPT_MAX_SLOTS];

static pthread_mutex_t slot_mu = PTHREAD_MUTEX_INITIALIZER;
static _Atomic int slot_hwm;           /* slots in use: [0, hwm) */
static _Atomic int monitor_started;
static _Atomic int64_t wake_at;         /* 0 while awake */
static _Atomic uint32_t monitor_futex;
static _Atomic uint64_t signals_sent;
static pid_t self_pid;
static uid_t self_uid;
static pthread_t monitor_thread;

static int64_t mono_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Sleep while *w == val, until the absolute monotonic time t at most. */
static void futex_wait_until(_Atomic uint32_t *w, uint32_t val, int64_t t)
{
	if (t == INT64_MAX) {
		syscall(SYS_futex, w, FUTEX_WAIT_PRIVATE, val, NULL, NULL, 0);
		return;
	}
	struct timespec ts = { .tv_sec = t / 1000000000, .tv_nsec = t % 1000000000 };
	syscall(SYS_futex, w, FUTEX_WAIT_BITSET_PRIVATE, val, &ts, NULL,
	        FUTEX_BITSET_MATCH_ANY);
}

static void futex_wake(_Atomic uint32_t *w)
{
	syscall(SYS_futex, w, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

void xtc__monitor_kick(int64_t deadline)
{
	/* pairs with the monitor's store of wake_at then re-scan */
#if defined(__SANITIZE_THREAD__)
	/* TSan does not model fences: an RMW orders the same way */
	static _Atomic int tsan_order;
	(void)atomic_fetch_add(&tsan_order, 0);
#else
	atomic_thread_fence(memory_order_seq_cst);
#endif
	if (deadline < atomic_load_explicit(&wake_at, memory_order_relaxed)) {
		atomic_store_explicit(&wake_at, 0, memory_order_relaxed);
		atomic_fetch_add(&monitor_futex, 1);
		futex_wake(&monitor_futex);
	}
}

/* Benchmarks: CPU time the monitor thread used so far (ns), 0 if none. */
int64_t xtc__monitor_cpu_ns(void)
{
	clockid_t cid;
	struct timespec ts;
	if (!atomic_load(&monitor_started) ||
	    pthread_getcpuclockid(monitor_thread, &cid) != 0 ||
	    clock_gettime(cid, &ts) != 0)
		return 0;
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

uint64_t xtc__monitor_signals_sent(void)
{
	return atomic_load_explicit(&signals_sent, memory_order_relaxed);
}

static void send_tick(int tid, uint32_t gen)
{
	siginfo_t si;
	memset(&si, 0, sizeof si);
	si.si_signo = xtc__preempt_signo();
	si.si_code = SI_QUEUE;
	si.si_pid = self_pid;
	si.si_uid = self_uid; /* cached: no syscall per signal */
	si.si_value.sival_int = (int)gen;
	if (syscall(SYS_rt_tgsigqueueinfo, self_pid, tid, si.si_signo, &si) == 0)
		atomic_fetch_add_explicit(&signals_sent, 1, memory_order_relaxed);
}

/* When the monitor must act on a slot: its hard deadline, or its soft one
 * (the slice end) once other work contends for the carrier. */
static int64_t effective_deadline(xtc__pslot_t *s, int64_t d)
{
	if (atomic_load_explicit(&s->contended, memory_order_relaxed)) {
		int64_t sd = atomic_load_explicit(&s->soft, memory_order_relaxed);
		if (sd < d)
			return sd;
	}
	return d;
}

/* One pass over the slots: signal overrun carriers, return the earliest
 * future deadline (INT64_MAX: none) and the shortest slice seen. *any: a
 * slot has a deadline; *sliced: one of them is sliced (not an uncontended
 * alone run), so its carrier is likely to start another timed run soon.
 * The record of what was sent is keyed on the hard deadline, so a run
 * signalled at its soft deadline is not signalled again at its hard one. */
static int64_t scan(int64_t now, int64_t *min_slice, int *any, int *sliced)
{
	int64_t earliest = INT64_MAX;
	int n = atomic_load_explicit(&slot_hwm, memory_order_acquire);
	*any = 0;
	*sliced = 0;
	for (int i = 0; i < n; i++) {
		xtc__pslot_t *s = &slots[i];
		int tid = atomic_load_explicit(&s->tid, memory_order_acquire);
		if (tid == 0)
			continue;
		int64_t sl = atomic_load_explicit(&s->slice_ns, memory_order_relaxed);
		if (sl > 0 && sl < *min_slice)
			*min_slice = sl;
		int64_t d = atomic_load_explicit(&s->deadline, memory_order_acquire);
		if (d == INT64_MAX)
			continue;
		*any = 1;
		uint32_t g = atomic_load_explicit(&s->gen, memory_order_acquire);
		int64_t eff = effective_deadline(s, d);
		if (eff != d || atomic_load_explicit(&s->soft,
		                                     memory_order_relaxed) >= d)
			*sliced = 1;
		if (eff > now) {
			if (eff < earliest)
				earliest = eff;
			continue;
		}
		if (sent[i].gen == g && sent[i].deadline == d)
			continue; /* already asked; the handler re-arms if it defers */
		sent[i].gen = g;
		sent[i].deadline = d;
		send_tick(tid, g);
	}
	return earliest;
}

/* Tests and benchmarks: signal every carrier that has a run in progress
 * now, whatever its deadline (drives the preemption path faster than the
 * monitor's sleep granularity allows). Returns the number signalled. */
int xtc__monitor_poke_all(void)
{
	/* like the monitor: one signal per (generation, deadline), so queued
	 * real-time signals never pile up on a carrier */
	static struct { uint32_t gen; int64_t deadline; } poked[XTC__PREEMPT_MAX_SLOTS];
	int n = atomic_load_explicit(&slot_hwm, memory_order_acquire), k = 0;
	if (self_pid == 0) {
		self_pid = getpid();
		self_uid = getuid();
	}
	for (int i = 0; i < n; i++) {
		xtc__pslot_t *s = &slots[i];
		int tid = atomic_load_explicit(&s->tid, memory_order_acquire);
		int64_t d = atomic_load_explicit(&s->deadline, memory_order_acquire);
		if (tid == 0 || d == INT64_MAX)
			continue;
		uint32_t g = atomic_load_explicit(&s->gen, memory_order_acquire);
		if (poked[i].gen == g && poked[i].deadline == d)
			continue;
		poked[i].gen = g;
		poked[i].deadline = d;
		send_tick(tid, g);
		k++;
	}
	return k;
}

/* Earliest published deadline (no signalling). */
static int64_t earliest_deadline(void)
{
	int n = atomic_load_explicit(&slot_hwm, memory_order_acquire);
	int64_t e = INT64_MAX;
	for (int i = 0; i < n; i++) {
		if (atomic_load_explicit(&slots[i].tid, memory_order_relaxed) == 0)
			continue;
		int64_t d = atomic_load_explicit(&slots[i].deadline,
		                                 memory_order_relaxed);
		if (d == INT64_MAX || (sent[i].deadline == d &&
		                       sent[i].gen == atomic_load(&slots[i].gen)))
			continue;
		d = effective_deadline(&slots[i], d);
		if (d < e)
			e = d;
	}
	return e;
}

static void *monitor_main(void *arg)
{
	(void)arg;
	sigset_t all;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL); /* never a carrier */
	int empty_scans = 0;
	for (;;) {
		uint32_t v = atomic_load(&monitor_futex);
		int64_t now = mono_now();
		int64_t min_slice = INT64_MAX;
		int any, sliced;
		int64_t next = scan(now, &min_slice, &any, &sliced);
		xtc__fn_quantum_tick(now);
		empty_scans = any ? 0 : empty_scans + 1;
		if (min_slice == INT64_MAX)
			min_slice = 1000000;
		int64_t target;
		if (!any && empty_scans >= 2) {
			target = INT64_MAX; /* nothing to time: sleep until kicked */
		} else {
			/* A run that starts while we sleep, or gets contended,
			 * kicks us when its deadline is earlier than wake_at; so
			 * does a signalled deadline the handler re-arms. While a
			 * sliced run exists, the next run on its carrier (which
			 * ends no earlier than the shortest slice from now) must
			 * not have to kick us: a futex wake per preemption on the
			 * carrier's CPU. Uncontended alone runs need no periodic
			 * wake at all; the long cap is a safety net (and paces the
			 * adaptive quantum controller). */
			target = now + (sliced ? min_slice :
			                any ? atomic_load(&xtc__preempt_alone_ns) :
			                2 * min_slice);
			if (next < target)
				target = next;
			if (target <= now)
				target = now + XTC__PREEMPT_MIN_SLICE_NS;
		}
		atomic_store(&wake_at, target);
		if (earliest_deadline() < target) {
			atomic_store(&wake_at, 0);
			continue;
		}
		futex_wait_until(&monitor_futex, v, target);
		atomic_store(&wake_at, 0);
	}
	return NULL;
}

int xtc__monitor_start(void)
{
	if (atomic_load_explicit(&monitor_started, memory_order_acquire))
		return XTC_OK;
	pthread_mutex_lock(&slot_mu);
	int rc = XTC_OK;
	if (!atomic_load(&monitor_started)) {
		self_pid = getpid();
		self_uid = getuid();
		pthread_t th;
		pthread_attr_t a;
		pthread_attr_init(&a);
		pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
		pthread_attr_setstacksize(&a, 64 * 1024);
		if (pthread_create(&th, &a, monitor_main, NULL) != 0)
			rc = XTC_E_INTERNAL;
		else {
			monitor_thread = th;
			pthread_setname_np(th, "xtc-monitor");
			atomic_store_explicit(&monitor_started, 1, memory_order_release);
		}
		pthread_attr_destroy(&a);
	}
	pthread_mutex_unlock(&slot_mu);
	return rc;
}

/* Child of fork: only the forking thread exists and no monitor runs. The
 * table is emptied; the next arm in the child starts a new monitor. */
void xtc__monitor_after_fork(void)
{
	pthread_mutex_init(&slot_mu, NULL);
	for (int i = 0; i < XTC__PREEMPT_MAX_SLOTS; i++) {
		atomic_store(&slots[i].tid, 0);
		atomic_store(&slots[i].deadline, INT64_MAX);
	}
	atomic_store(&slot_hwm, 0);
	atomic_store(&wake_at, 0);
	atomic_store(&monitor_started, 0);
	self_pid = 0;
}

xtc__pslot_t *xtc__monitor_slot_get(int tid, int64_t slice_ns)
{
	xtc__pslot_t *r = NULL;
	pthread_mutex_lock(&slot_mu);
	int n = atomic_load(&slot_hwm);
	for (int i = 0; i < XTC__PREEMPT_MAX_SLOTS; i++) {
		if (atomic_load(&slots[i].tid) != 0)
			continue;
		r = &slots[i];
		atomic_store(&r->deadline, INT64_MAX);
		atomic_store(&r->soft, INT64_MAX);
		atomic_store(&r->contended, 0);
		atomic_store(&r->slice_ns, slice_ns);
		atomic_fetch_add(&r->gen, 1);
		atomic_store_explicit(&r->tid, tid, memory_order_release);
		if (i >= n)
			atomic_store_explicit(&slot_hwm, i + 1, memory_order_release);
		break;
	}
	pthread_mutex_unlock(&slot_mu);
	return r;
}

void xtc__monitor_slot_put(xtc__pslot_t *s)
{
	if (s == NULL)
		return;
	pthread_mutex_lock(&slot_mu);
	atomic_store(&s->deadline, INT64_MAX);
	atomic_fetch_add(&s->gen, 1);
	atomic_store_explicit(&s->tid, 0, memory_order_release);
	pthread_mutex_unlock(&slot_mu);
}
