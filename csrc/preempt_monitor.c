/*
 * preempt_monitor.c - the preemption trigger: per-carrier slice timers, the
 * direct producer signal, the tick net, and the safety-net monitor thread
 * (LibPreemptible's timer thread, without UINTR).
 *
 * Model: a fixed table of 64-byte slots, one per armed carrier thread. A
 * carrier publishes in its own slot the CLOCK_MONOTONIC deadline of the run
 * it is executing (INT64_MAX when idle or between runs) and a generation
 * bumped per run; an alone run also carries a hard deadline, its slice end
 * being a soft one that applies once the slot is marked contended
 * (preempt_int.h). Triggers, in order of preference:
 *  1. The carrier's own timer: each executor carrier owns a
 *     timer_create(CLOCK_MONOTONIC, SIGEV_THREAD_ID) timer that signals that
 *     thread only, delivered from the timer interrupt of the carrier's own
 *     CPU, so no third thread has to be scheduled. A sliced run may be
 *     preempted anywhere in [deadline - slice/2, deadline]
 *     (XTC__SLICE_EARLY_DIV, "the window"): a run that starts while the
 *     timer fires inside its window leaves it alone, otherwise it re-arms it
 *     at its deadline (xtc__ctimer_want). Back-to-back short runs so re-arm
 *     once per half slice of busy time and an expiry never finds a run that
 *     is not due. Work known to be long (it used half a slice of this
 *     service already and was cut at its last slice end) is armed at its
 *     deadline exactly and gets its whole slice; work that yields by itself
 *     keeps the window. An idle carrier disarms the timer before it parks; a
 *     lone run does not arm it at all.
 *  2. Producers poll (xtc__preempt_contend, from every submission or post
 *     that finds the carrier running): the first marks the run contended
 *     and leaves a safety net with the monitor; every one that finds the run
 *     past its slice end signals the carrier directly (rt_tgsigqueueinfo
 *     with the run's generation), once per run (contended 1 -> 2). A run
 *     that starts while producers' work waits in the ring or the inbox, or
 *     right after the carrier drained some, is timed the same way
 *     (xtc__preempt_run_begin, XTC__RUN_POLLED): no timer syscall on any
 *     path that runs per request. The carrier's timer (1.) stays for what no
 *     producer comes back for: work its run made ready, procs sharing a
 *     loop, loop timers.
 *  3. The tick net: a periodic timer on the carrier's own thread CPU clock
 *     (XTC__TICK_NET_NS, si_value XTC__TICK_NET_SIVAL), the safety net
 *     behind producers' polls (a run they time whose producers went quiet)
 *     and of alone runs (XTC__PREEMPT_ALONE_NS). The kernel checks thread
 *     CPU timers only from its tick, on the thread's CPU, so it expires at
 *     most once per tick and only while the carrier runs: no interrupt of
 *     its own, no third thread, nothing while idle. An expiry preempts a run
 *     past its slice end while contended, past its hard deadline, or with a
 *     deferral pending (preempt.c tick_net_due); else it does nothing. The
 *     price: a quiet producer's run is cut at the first tick after its
 *     slice end (up to a tick, 4 ms at HZ=250).
 *  4. The monitor thread: the nets of a carrier without a tick net (field
 *     `net`: XTC__PREEMPT_NET_GRACE_NS, or four slices, after the slice
 *     end; an alone run at its hard deadline), everything for carriers whose
 *     timer could not be created (the monitor-driven path, counted in
 *     timer_fallbacks), threads armed with xtc_preempt_arm, deadline
 *     functions outside carriers (their thread's own timer is the backstop
 *     a grace later, preempt_run.c trigger_exact), and the adaptive
 *     quantum's periods. It sleeps on a futex with an absolute timeout and
 *     PR_SET_TIMERSLACK 1 (the default slack was most of its lateness),
 *     sends at most one signal per (generation, deadline), and publishes
 *     when it will wake (wake_at) so a carrier that publishes an earlier
 *     deadline wakes it (xtc__monitor_kick). Its stack is sized by the
 *     loaded objects' static TLS, which glibc carves from it.
 * Every trigger is weighed against what a timer expiry, a re-arm and a
 * cross-CPU signal cost on a virtual machine (an exit to the hypervisor
 * each; `bench_preempt floor` measures them), which the overhead budget
 * (preempt_run.c) protects a carrier from.
 *
 * Invariants:
 *  1. Only the carrier writes deadline/gen/soft of its slot; any thread may
 *     set contended, install a net for a contended run and arm its timer;
 *     the carrier resets contended per run. Only the monitor writes its
 *     private last-signalled record.
 *  2. `net` is written by the carrier at run start and, for a run producers
 *     contend, by the first of them (a CAS from INT64_MAX, never over the
 *     carrier's own value); the monitor keys what it sent on (generation,
 *     net). A producer that lowers the net just as the carrier starts the
 *     next run costs at worst one early preemption of that run, a grace
 *     period after its predecessor's slice end.
 *  3. Slots are never freed (a freed slot has tid 0 and is skipped), and a
 *     timer is deleted only by its carrier after it cleared `timer`. A
 *     producer that loaded the pointer just before may call timer_settime on
 *     a deleted id: it fails with EINVAL, harmlessly (ids are not reused
 *     while the process holds few timers).
 *
 * Rejected:
 *  1. Per-carrier timers on CLOCK_THREAD_CPUTIME_ID as the slice timer:
 *     they fire only at the kernel tick.
 *  2. Arming a timer per dispatch: a syscall and a hypervisor exit per run
 *     of a sub-microsecond request.
 *  3. Periodic CLOCK_MONOTONIC timers, or a monotonic net timer per run: an
 *     interrupt per period even when fibers yield on their own.
 *  4. Preempting exactly at the deadline and keeping any earlier expiry: an
 *     expiry plus a re-arm per slice of busy time that mostly found nothing
 *     due (a fifth of a carrier at a 50 us slice).
 *  5. The monitor's net per run: it woke for every run, each wake-up a
 *     context switch on the carrier's CPU or the load generator's.
 *  6. Busy-polling the TSC like LibPreemptible: burns a core on a 2-core
 *     machine. A SCHED_FIFO monitor: needs privilege, and each of its wakes
 *     steals the load generator's CPU.
 */
#include "rtcode_int.h" /* first: this file is runtime code */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <link.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/prctl.h>
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
static _Atomic uint64_t n_fires, n_early, n_arms, n_direct;
_Atomic uint64_t xtc__ctimer_fallbacks;
_Atomic int xtc__monitor_muted;
static pthread_t monitor_thread;

static int64_t mono_now(void)
{
	return xtc__now_ns();
}

/* Sleep while *w == val, until the absolute monotonic time t at most. */
static void futex_wait_until(_Atomic uint32_t *w, uint32_t val, int64_t t)
{
	if (t == INT64_MAX)
		xtc__futex_wait(w, val, NULL);
	else
		xtc__futex_wait_abs(w, val, t);
}

static void futex_wake(_Atomic uint32_t *w)
{
	xtc__futex_wake(w, 1);
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
	int tm = atomic_load_explicit(&s->timer, memory_order_relaxed);
	if (tm & XTC__TIMER_TICK)
		return INT64_MAX; /* the tick net covers it */
	if (tm)
		return atomic_load_explicit(&s->net, memory_order_relaxed);
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
		if (d == INT64_MAX || (atomic_load_explicit(&s->timer,
		    memory_order_relaxed) & XTC__TIMER_TICK))
			continue; /* idle, or its timers and tick net time it */
		*any = 1;
		uint32_t g = atomic_load_explicit(&s->gen, memory_order_acquire);
		int64_t eff = effective_deadline(s, d);
		if (atomic_load_explicit(&s->timer, memory_order_relaxed)) {
			if (eff == INT64_MAX)
				continue; /* the carrier's timer covers it */
			d = eff;      /* the safety net is the record's key */
		} else if (eff != d || atomic_load_explicit(&s->soft,
		                                     memory_order_relaxed) >= d)
			*sliced = 1;
		if (eff > now) {
			if (eff < earliest)
				earliest = eff;
			continue;
		}
		if (sent[i].gen == g && sent[i].deadline == d)
			continue; /* already asked; the handler re-arms if it defers */
		if (atomic_load_explicit(&xtc__monitor_muted,
		                         memory_order_relaxed))
			continue; /* a test standing in for a starved monitor */
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
		int tm = atomic_load_explicit(&slots[i].timer,
		                              memory_order_relaxed);
		if (tm & XTC__TIMER_TICK)
			continue;
		if (d != INT64_MAX && tm)
			d = atomic_load_explicit(&slots[i].net,
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
	/* its futex timeouts are its deadlines: no 50 us coalescing */
	(void)prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
	int empty_scans = 0;
	for (;;) {
		uint32_t v = atomic_load(&monitor_futex);
		int64_t now = mono_now();
		int64_t min_slice = INT64_MAX;
		int any, sliced;
		int64_t next = scan(now, &min_slice, &any, &sliced);
		xtc__up.quantum_tick(now);
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
			target = xtc__deadline_after(now, sliced ? min_slice :
			    any ? atomic_load(&xtc__preempt_alone_ns) :
			    xtc__deadline_after(min_slice, min_slice));
			if (next < target)
				target = next;
			if (target <= now)
				target = now + XTC__PREEMPT_MIN_SLICE_NS;
		}
		/* the adaptive controller's period (its update sorts the
		 * window: it must not run on a carrier) */
		int64_t qn = xtc__up.quantum_next();
		if (qn < target)
			target = qn > now ? qn : now + XTC__PREEMPT_MIN_SLICE_NS;
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

/* The monitor's own frames (futex waits, signal sends). */
#define MONITOR_STACK (64 * 1024)

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
		/* its own frames need little, but glibc carves the thread's
		 * static TLS out of the same stack: a program with a 260 KiB
		 * __thread array made a 64 KiB stack fail (EINVAL), and with
		 * it every carrier's preemption. Sized by the TLS of the
		 * loaded objects, and the default size if that still fails. */
		int err = pthread_attr_setstacksize(&a,
		                            xtc__thread_stack_size(MONITOR_STACK));
		if (err == 0)
			err = pthread_create(&th, &a, monitor_main, NULL);
		if (err != 0 && err != EAGAIN) {
			pthread_attr_t d;
			pthread_attr_init(&d);
			pthread_attr_setdetachstate(&d, PTHREAD_CREATE_DETACHED);
			err = pthread_create(&th, &d, monitor_main, NULL);
			pthread_attr_destroy(&d);
		}
		if (err != 0)
			rc = XTC_E_RESOURCE;
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
		/* timers are not inherited across fork */
		atomic_store(&slots[i].timer, 0);
		atomic_store(&slots[i].timer_at, INT64_MAX);
		slots[i].ktimer = NULL;
	}
	xtc__ptls.kticker = NULL; /* nor is the tick net */
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
		atomic_store(&r->timer, 0);
		atomic_store(&r->timer_at, INT64_MAX);
		atomic_store(&r->net, INT64_MAX);
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

/* ------------------------------------------------------------------ */
/* Carrier timers and the direct signal                                 */
/* ------------------------------------------------------------------ */

static int thread_timer(clockid_t clk, int tid, int sival, timer_t *out)
{
	struct sigevent ev;

	memset(&ev, 0, sizeof ev);
	ev.sigev_notify = SIGEV_THREAD_ID;
	ev.sigev_signo = xtc__preempt_signo();
	ev.sigev_value.sival_int = sival;
#ifdef sigev_notify_thread_id
	ev.sigev_notify_thread_id = tid;
#else
	ev._sigev_un._tid = tid; /* glibc < 2.38 has no name for it */
#endif
	if (timer_create(clk, &ev, out) != 0)
		return errno == EAGAIN ? XTC_E_RESOURCE : XTC_E_INTERNAL;
	return XTC_OK;
}

/* The tick net (design note, 3.): a periodic timer on the carrier's own
 * CPU clock. The kernel checks such timers only from its tick, on the CPU
 * the thread runs on, so it expires at most once per tick and only while
 * the carrier is busy: no interrupt of its own, no third thread. Called
 * by the carrier itself (its CPU clock is the caller's). */
static int tick_net_set(timer_t t, int on)
{
	struct itimerspec its;

	memset(&its, 0, sizeof its);
	if (on) {
		its.it_value.tv_nsec = XTC__TICK_NET_NS;
		its.it_interval.tv_nsec = XTC__TICK_NET_NS;
	}
	return timer_settime(t, 0, &its, NULL);
}

static void tick_net_create(xtc__pslot_t *s, int tid)
{
	clockid_t clk;
	timer_t t;

	if (pthread_getcpuclockid(pthread_self(), &clk) != 0 ||
	    thread_timer(clk, tid, XTC__TICK_NET_SIVAL, &t) != XTC_OK)
		return; /* the monitor keeps watching the nets */
	if (tick_net_set(t, 1) != 0) {
		timer_delete(t);
		return;
	}
	xtc__ptls.kticker = (void *)t;
	xtc__ptls.tick_paused = 0;
	atomic_fetch_or(&s->timer, XTC__TIMER_TICK);
}

/* Go code must not keep taking the tick net's expiries (xtc_preempt(3),
 * GO PROGRAMS): the first one that lands in a Go callback stops it, and
 * the carrier starts it again when the callback returns. Stopping it at
 * every callback instead would cost two system calls per callback, and a
 * Go service makes one per request. */
void xtc__tick_net_pause(void)
{
	if (xtc__ptls.kticker != NULL && !xtc__ptls.tick_paused) {
		xtc__ptls.tick_paused = 1;
		(void)tick_net_set((timer_t)xtc__ptls.kticker, 0);
	}
}

void xtc__tick_net_resume(void)
{
	if (xtc__ptls.kticker != NULL && xtc__ptls.tick_paused) {
		xtc__ptls.tick_paused = 0;
		(void)tick_net_set((timer_t)xtc__ptls.kticker, 1);
	}
}

int xtc__ctimer_create(xtc__pslot_t *s, int tid, int tick_net)
{
	timer_t t;

	if (s == NULL)
		return XTC_E_INVAL;
	if (!atomic_load(&s->timer)) {
		int rc = thread_timer(CLOCK_MONOTONIC, tid, 0, &t);
		if (rc != XTC_OK)
			return rc;
		s->ktimer = (void *)t;
		atomic_store(&s->timer_at, INT64_MAX);
		atomic_store(&s->net, INT64_MAX);
		atomic_store_explicit(&s->timer, XTC__TIMER_MONO,
		                      memory_order_release);
	}
	/* a thread that ran deadline functions first has the slice timer
	 * alone; as a carrier it gets the net too */
	if (tick_net && xtc__ptls.kticker == NULL &&
	    tid == (int)syscall(SYS_gettid))
		tick_net_create(s, tid);
	return XTC_OK;
}

void xtc__ctimer_delete(xtc__pslot_t *s)
{
	if (s == NULL || !atomic_load(&s->timer))
		return;
	atomic_store(&s->timer, 0);
	atomic_store(&s->timer_at, INT64_MAX);
	timer_delete((timer_t)s->ktimer);
	s->ktimer = NULL;
	if (xtc__ptls.kticker != NULL) {
		timer_delete((timer_t)xtc__ptls.kticker);
		xtc__ptls.kticker = NULL;
	}
}

void xtc__monitor_net(xtc__pslot_t *s, int64_t net)
{
	if (!(atomic_load_explicit(&s->timer, memory_order_relaxed) &
	      XTC__TIMER_TICK))
		xtc__monitor_kick(net);
}

void xtc__ctimer_arm(xtc__pslot_t *s, int64_t at)
{
	struct itimerspec its;
	void *kt = s->ktimer; /* the first id of a process is 0: not a flag */

	if (!atomic_load_explicit(&s->timer, memory_order_relaxed))
		return;
	memset(&its, 0, sizeof its);
	if (at != INT64_MAX) {
		if (at <= 0)
			at = 1;
		its.it_value.tv_sec = at / 1000000000;
		its.it_value.tv_nsec = at % 1000000000;
	}
	/* published first: a fire racing this call sees a value at least as
	 * early as the one it came from, and re-arms if it finds no run due */
	atomic_store_explicit(&s->timer_at, at, memory_order_relaxed);
	/* the carrier's own arms cost its CPU (a producer's arm costs the
	 * producer's): counted for the stats */
	int own = xtc__ptls.slot == s;
	int64_t t0 = own ? mono_now() : 0;
	if (timer_settime((timer_t)kt, TIMER_ABSTIME, &its, NULL) == 0)
		atomic_fetch_add_explicit(&n_arms, 1, memory_order_relaxed);
	if (own)
		xtc__preempt_arm_cost(mono_now() - t0);
}

void xtc__ctimer_want(xtc__pslot_t *s, int64_t at, int64_t early, int64_t now)
{
	int64_t cur = atomic_load_explicit(&s->timer_at, memory_order_relaxed);

	if (cur > now && cur <= at && cur >= at - early)
		return; /* fires in the run's window: the handler takes it */
	xtc__ctimer_arm(s, at);
}

int xtc__monitor_signal_run(xtc__pslot_t *s)
{
	uint32_t g = atomic_load_explicit(&s->gen, memory_order_acquire);
	int tid = atomic_load_explicit(&s->tid, memory_order_acquire);

	if (tid == 0 || atomic_load_explicit(&s->deadline,
	    memory_order_acquire) == INT64_MAX ||
	    atomic_load_explicit(&s->gen, memory_order_acquire) != g)
		return 0; /* idle, or the run just changed */
	if (self_pid == 0) {
		self_pid = getpid();
		self_uid = getuid();
	}
	send_tick(tid, g);
	atomic_fetch_add_explicit(&n_direct, 1, memory_order_relaxed);
	return 1;
}

/* The handler counts expiries here (global: cheap relaxed RMWs). */
void xtc__monitor_count_fire(int due);
void xtc__monitor_count_fire(int due)
{
	atomic_fetch_add_explicit(due ? &n_fires : &n_early, 1,
	                          memory_order_relaxed);
}

void xtc__monitor_trigger_stats(xtc_preempt_stats_t *out)
{
	out->timer_fires = atomic_load(&n_fires);
	out->timer_early = atomic_load(&n_early);
	out->timer_arms = atomic_load(&n_arms);
	out->direct = atomic_load(&n_direct);
	out->timer_fallbacks = atomic_load(&xtc__ctimer_fallbacks);
}
