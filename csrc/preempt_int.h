/*
 * preempt_int.h - internal contract of the preemption layer (preempt.c,
 * preempt_codemap.c, preempt_run.c, preempt_monitor.c, preempt_tickring.c,
 * arch/preempt_*.S; fn.c and fn_quantum.c use it) for the loop, the
 * executor and the Go callback wrapper.
 *
 * Model
 *  - Each armed thread (a "carrier") owns one 64-byte slot in a global
 *    table: the deadline (CLOCK_MONOTONIC ns) of the work it is running and
 *    a run generation. Only the carrier writes them. The trigger
 *    (preempt_monitor.c): producers' polls (every submission or post that finds
 *    the carrier running checks the run and signals it directly, with its
 *    generation, once it overran its slice; no timer syscall), an
 *    executor carrier's own timer for what no producer will come back for
 *    (SIGEV_THREAD_ID, left armed while it expires in the last half of the
 *    running slice, the slice-end window; an early expiry re-armed by the
 *    handler for the run then current), and the monitor thread for the
 *    rest (the safety nets `net` of polled and alone runs, plain armed
 *    threads, carriers without a timer). The slice a carrier applies is
 *    subject to the overhead budget (preempt_run.c). INT64_MAX means idle /
 *    nothing to time: such a carrier never gets a signal, and an idle
 *    carrier disarms its timer.
 *  - The handler (preempt.c) ignores a signal whose generation is no longer
 *    the carrier's (the run already ended). Otherwise it counts a tick, sets
 *    the pending flag (cooperative path) and, when allowed and safe,
 *    redirects the interrupted fiber to xtc__preempt_trampoline, which saves
 *    all registers, calls xtc__preempt_trampoline_yield() and resumes.
 *  - A preemption that is not safe is deferred (counted) and honoured at the
 *    next safe boundary: xtc_yield_check/xtc_yield_if_due, a park point, or
 *    leaving a no-preempt region. The handler re-arms the deadline a little
 *    later so the monitor asks again.
 *
 * Loop integration (all of it only when the loop has XTC__LF_PREEMPT, so a
 * loop without preemption pays nothing):
 *    run_begin:  xtc__preempt_run_begin(fiber, slice, mode, ..) before a run
 *    run_end:    xtc__preempt_run_end()                     after it returns
 *    idle:       xtc__preempt_idle()  before blocking in the poller
 *    yield check: xtc__preempt_due() (one or two TLS loads)
 */
#ifndef XTC_PREEMPT_INT_H
#define XTC_PREEMPT_INT_H

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>

#include "xtc.h"
#include "xtc_preempt.h"
#include "fiber_int.h"

#define XTC__PTLS XTC__TLS_IE /* base_int.h, through fiber_int.h */

/* Max carriers watched by the monitor at once. */
#define XTC__PREEMPT_MAX_SLOTS 256
/* Stack headroom the handler requires below the interrupted SP, on top of
 * the trampoline's own save area. */
#define XTC__PREEMPT_HEADROOM (8u * 1024u)
/* Shortest slice accepted (the monitor cannot do better on this kind of
 * machine; shorter requests are rounded up). */
#define XTC__PREEMPT_MIN_SLICE_NS 2000
/* The least a signal handler's re-ask waits after the handler (preempt.c
 * not_before): above what an expiry costs on a slow hypervisor (~41 us
 * measured by `bench_preempt floor`) once doubled cost measurements
 * exist; before them, this. */
#define XTC__PREEMPT_REASK_MIN_NS 20000

/* The slice-end window: a sliced run may be preempted from slice -
 * slice/XTC__SLICE_EARLY_DIV on (its timer is not moved for every short
 * run that starts inside it; preempt.c, preempt_monitor.c). */
#define XTC__SLICE_EARLY_DIV 2

/* Safety net of a run timed by producers' polls: the monitor signals it
 * this long (or four slices) after its slice end when no producer did. */
#define XTC__PREEMPT_NET_GRACE_NS 1000000
/* Its current value (a test raises it to see producers' polls alone). */
extern _Atomic int64_t xtc__preempt_net_grace_ns;
/* The overhead budget's policy (preempt_run.c): the next slice shift after a
 * window of w ns with `idle` ns idle and `ovh` ns of preemption cost. */
int xtc__preempt_budget_next(int stretch, int64_t w, int64_t idle,
                             int64_t ovh, int pct);
/* Whether a window open for w ns (idle, ovh as above) closes early: it
 * already spent a whole window's budget while saturated. */
int xtc__preempt_budget_early(int64_t w, int64_t idle, int64_t ovh, int pct);

/* Longest a run that had nothing to compete with goes unsignalled (its
 * hard deadline): a safety net for work the carrier cannot see arrive (a
 * timer the running fiber arms itself). */
#define XTC__PREEMPT_ALONE_NS 10000000
/* Its current value (tests raise it to prove what would happen without the
 * net). */
extern _Atomic int64_t xtc__preempt_alone_ns;

/* One carrier's published state: one cache line, written by the carrier,
 * read by the monitor.
 *
 * A run that starts while its loop has nothing else to run (no ready task,
 * no post, no due timer, no queued class work) gains nothing from being
 * preempted: it would be dispatched again at once, and the signal costs the
 * carrier several microseconds. Such a run publishes its slice end as the
 * soft deadline and a later hard deadline (the next timer, at most
 * XTC__PREEMPT_ALONE_NS away). The monitor signals at the hard deadline,
 * or at the soft one once `contended` says other work is waiting; anyone
 * who makes work for the loop sets it (xtc__preempt_contend): the loop's
 * own enqueue during the run, a producer's post or submission (the
 * executor's doorbell). A contended run is therefore sliced exactly as
 * before. */
typedef struct xtc__pslot {
	_Alignas(64) _Atomic int64_t deadline; /* hard; INT64_MAX: nothing to time */
	_Atomic uint32_t gen;                  /* bumped per run */
	_Atomic int tid;                       /* 0: slot free */
	_Atomic int64_t slice_ns;              /* default slice of this carrier */
	_Atomic int64_t soft;                  /* slice end (<= deadline) */
	_Atomic int contended;                 /* soft deadline applies; 2: a
	                                          producer signalled the run */
	/* Carrier timers (preempt_monitor.c, "trigger"): XTC__TIMER_MONO when the
	 * carrier owns a CLOCK_MONOTONIC timer that signals it
	 * (SIGEV_THREAD_ID); then the timer delivers the soft deadline and the
	 * hard ones it covers, and the monitor only watches `net` (the safety
	 * net of runs producers time). XTC__TIMER_TICK as well when it also
	 * owns the tick net (a timer on its own thread CPU clock): the nets
	 * then ride the kernel tick and the monitor leaves the slot alone. */
	_Atomic int timer;
	_Atomic int64_t timer_at;              /* armed expiry, INT64_MAX: none */
	_Atomic int64_t net;                   /* monitor's deadline (timer slots) */
	void *ktimer;                          /* timer_t, set before timer = 1 */
} xtc__pslot_t;
_Static_assert(sizeof(xtc__pslot_t) == 64, "one cache line per carrier");

#define XTC__TIMER_MONO 1
#define XTC__TIMER_TICK 2
/* si_value of the tick net's expiries (the slice timer's is 0) */
#define XTC__TICK_NET_SIVAL 0x78746e /* "xtn" */
/* CPU time between two tick-net expiries: the kernel checks thread CPU
 * timers at its tick, so any value up to a tick means "every tick the
 * carrier was busy through" */
#define XTC__TICK_NET_NS 1000000

#define XTC__PF_TICK 1
#define XTC__PF_WANT 2

/* With the involuntary path on, a clock-checked carrier keeps the signal
 * trigger as a backstop at this multiple of its slice (preempt_run.c). */
#define XTC__COOP_BACKSTOP 8

/* Per-thread state. Initial-exec TLS only: the signal handler reads it. */
typedef struct xtc__ptls {
	xtc__pslot_t *slot;        /* NULL: not armed */
	xtc__fiber_t *fiber;       /* fiber of the current timed run, or NULL */
	int64_t run_start;
	int64_t slice;             /* slice of the current run */
	int64_t hard;              /* hard deadline of the current run */
	int64_t early;             /* its slice end's window (XTC__SLICE_EARLY_DIV) */
	int64_t hard_early;        /* its hard deadline's (a demoted turn's end: early) */
	/* XTC__PF_TICK: a tick not yet consumed (cooperative path);
	 * XTC__PF_WANT: an involuntary preemption was deferred. One word so the
	 * due check is one load. The handler sets bits; the carrier only ever
	 * stores 0 (a tick lost to that race is re-sent by the monitor). */
	volatile sig_atomic_t pend;
	volatile sig_atomic_t in_yield;  /* inside the trampoline's yield */
	int force_invol;           /* fn.c: redirect even if the global is off */
	/* trampoline target: fn.c switches back to its caller; default yields
	 * the loop (xtc_yield_ex). Runs on the fiber stack, not in the handler. */
	void (*yield_hook)(void *arg);
	void *yield_arg;
	/* tick ring (preempt_tickring.c) */
	void *ring;                /* struct xtc__tickring *, NULL: none */
	const _Atomic unsigned *ring_tail; /* CQ tail / head pointers */
	unsigned *ring_head;
	/* measured cost (preempt.c): when the last redirect happened and how
	 * late it was; the next run start closes the measurement */
	int64_t pc_at, pc_late;
	/* EWMA of this carrier's timer expiries' lateness: where the
	 * hypervisor is slow, mostly the interrupt's stall of the thread, the
	 * estimate of what a signal from another CPU stalls it too (the
	 * handler cannot see that stall; the budget must) */
	int64_t fire_late;
	/* adaptive load (fn.c): when this carrier went idle, 0 = busy */
	int64_t idle_at;
	/* overhead budget (preempt_run.c): the trigger's cost in the current
	 * window, when the window began, and the slice multiplier (a shift)
	 * it led to. ovh is added to by the handler too: an update lost to
	 * that race only makes the estimate a little low. */
	int64_t ovh_ns, ovh_win, ovh_idle;
	int stretch;
	/* clock-checked slices (xtc_exec_set_preempt_coop): the carrier's
	 * slice, and the current run's slice end (0: none). No slot, timer,
	 * signal or monitor: the preemption points compare the clock. */
	int64_t coop_slice, coop_due;
	/* the tick net's timer_t (preempt_monitor.c), created and deleted by this
	 * carrier; NULL: none */
	void *kticker;
	int tick_paused;           /* stopped in Go code until it returns */
	/* batched publication (preempt_run.c run_begin): the slot still carries
	 * the deadline (batch_soft) and generation published for an earlier
	 * run producers time, which the runs since then share */
	int batch;
	uint32_t batch_gen;
	int64_t batch_soft;
	/* refusals of the current run (preempt.c defer): the run they
	 * belong to (its start), when the first came, whether the run was
	 * reported as blocked */
	int64_t refuse_run, refuse_since;
	int refuse_reported;
	/* fibers suspended by an involuntary preemption on this carrier,
	 * named by the blocked report (a copy: the report may come after the
	 * fiber is gone); removed when the fiber runs again */
	struct {
		const void *fiber;
		uint64_t owner_id;
		char name[24];
	} preempted[8];
	int n_preempted;
	/* counters */
	xtc_preempt_stats_t st;
} xtc__ptls_t;

extern __thread xtc__ptls_t xtc__ptls XTC__PTLS;

/* Any carrier: timing is on for this thread (a slot or a ring). */
static inline int xtc__preempt_active(void)
{
	return xtc__ptls.slot != NULL || xtc__ptls.ring != NULL;
}

/* Ring check: CQ tail (acquire) vs head; no syscall. preempt_tickring.c reaps. */
int  xtc__tickring_reap(void);
void xtc__tickring_pause(void);   /* carrier idle: remove the timeout */
void xtc__tickring_resume(void);  /* next run: submit it again */
void xtc__tickring_thread_exit(void);
/* Thread teardown (disarm at exit) and stats registration. */
void xtc__preempt_thread_register(void);
static inline int xtc__tickring_due(void)
{
	const _Atomic unsigned *t = xtc__ptls.ring_tail;
	if (t == NULL)
		return 0;
	return atomic_load_explicit(t, memory_order_acquire) !=
	       *(volatile unsigned *)xtc__ptls.ring_head;
}

/* The cooperative due check used by xtc_yield_check: consumes a pending
 * tick or a ring tick, and reports a deferred involuntary preemption; on a
 * clock-checked carrier, whether the run's slice ended (one clock read,
 * only there). */
static inline int xtc__preempt_due(void)
{
	int64_t due = xtc__ptls.coop_due;
	if (__builtin_expect(due != 0, 0) && xtc_clock_mono() >= due)
		return 1;
	int f = xtc__ptls.pend;
	if (f) {
		xtc__ptls.pend = 0;
		if (f & XTC__PF_WANT)
			xtc__ptls.st.honoured++;
		return 1;
	}
	if (xtc__tickring_due())
		return xtc__tickring_reap();
	return 0;
}

/* The involuntary path is on (xtc_preempt_set_involuntary). */
int xtc__preempt_involuntary_on(void);
/* The code map (preempt_codemap.c). build: (re)build it when objects
 * were loaded since, caller holds xtc__preempt_init_mu (the setup lock of
 * preempt.c); allows: whether a PC may be interrupted (async-signal-safe:
 * loads and a binary search); rt_known: the map holds the runtime's code. */
extern pthread_mutex_t xtc__preempt_init_mu;
int xtc__preempt_map_build(void);
int xtc__preempt_map_allows(uintptr_t pc);
int xtc__preempt_map_rt_known(void);

/* Run boundaries (owner thread of the loop; only when timing is active).
 * slice_ns <= 0: the carrier's slice; > 0 (a class latency budget): at most
 * the carrier's slice, except for XTC__RUN_EXACT. now: the run's start the
 * loop already read (xtc__now(): saves a clock read per dispatch), ignored
 * by XTC__RUN_TICK and _EXACT, which read the clock. until: the _ALONE
 * modes only. */
typedef enum xtc__run_mode {
	/* the carrier's slice from the clock's now (tests) */
	XTC__RUN_TICK,
	/* slice_ns as given (xtc_fn, the tests) */
	XTC__RUN_EXACT,
	/* a run: the slice from now */
	XTC__RUN_AT,
	/* Executor: a contended run of work that already used a slice of this
	 * service (it is long): its timer is armed at the slice end exactly,
	 * not left in the window, so it gets the whole slice. Only for work
	 * cut at its last slice end: a yielder would re-arm at every dispatch
	 * (exec_lane.c). */
	XTC__RUN_FULL,
	/* Executor: a contended run while producers are active (their work
	 * waits in the ring or the inbox). No timer syscall: every later
	 * submission polls the run (xtc__preempt_contend) and signals it once
	 * it overran; the monitor signals it XTC__PREEMPT_NET_GRACE_NS (or 4
	 * slices) after its slice end if no producer came back. */
	XTC__RUN_POLLED,
	/* Executor: a run with nothing else to run on its loop; until = when
	 * other work is due anyway (the next timer), INT64_MAX if never. The
	 * soft deadline is the slice end, the hard one max(slice end,
	 * min(until, now + xtc__preempt_alone_ns)). */
	XTC__RUN_ALONE,
	/* ... where until is a bound that moves with every run (demoted work
	 * waits), not a loop timer, and the run is long work taking its turn
	 * (its timer is armed at the turn's end) */
	XTC__RUN_ALONE_TURN,
	/* ... and the run is a fresh one (no timer syscall: producers' polls
	 * and the monitor's net time it) */
	XTC__RUN_ALONE_FRESH,
} xtc__run_mode_t;
void xtc__preempt_run_begin(xtc__fiber_t *f, int64_t slice_ns,
                            xtc__run_mode_t mode, int64_t now, int64_t until);
void xtc__preempt_run_end(void);
/* Any thread: other work now waits on the carrier owning s: its current run
 * ends at its soft deadline (wakes the monitor if needed). NULL is a no-op.
 * Slots are never freed, so a stale pointer costs at most one extra
 * preemption of whatever runs there. */
void xtc__preempt_contend(xtc__pslot_t *s);
/* The carrier found producers' work (ring, inbox) waiting for its run: the
 * run is contended and timed by those producers' polls (no timer arm). */
void xtc__preempt_contend_polled(xtc__pslot_t *s);
/* This thread's slot (NULL: not armed with the monitor). */
static inline xtc__pslot_t *xtc__preempt_slot(void);
/* Called before the carrier blocks in its poller: no deadline, ring stopped. */
void xtc__preempt_idle(void);
/* The carrier found nothing to run (before its spin): with the adaptive
 * quantum on, idle time counts from now. */
void xtc__preempt_idle_from(void);

/* Nested timed runs (fn.c runs a function inside a fiber run): save the
 * current run, and later restore it, publishing its deadline again. */
typedef struct xtc__prun {
	xtc__fiber_t *fiber;
	int64_t start, slice, hard;
	int contended;
	int force_invol;
	void (*hook)(void *);
	void *hook_arg;
	int64_t coop_due;
} xtc__prun_t;
void xtc__preempt_run_save(xtc__prun_t *out);
void xtc__preempt_run_restore(const xtc__prun_t *in);
/* Make sure the calling thread has a monitor slot (no periodic tick). */
int xtc__preempt_register(int64_t slice_ns);

/* A Go callback starts/ends on this carrier (xtc__gocb_enter/leave, outer
 * level): the current run's deadline is withdrawn meanwhile (and the
 * generation bumped so a signal already in flight is ignored), so no
 * preemption signal lands while Go code runs. */
void xtc__preempt_gocb_pause(void);
void xtc__preempt_gocb_resume(void);
/* loop hooks.check_due: the cooperative due test for xtc_yield_check. */
struct xtc_loop;
int xtc__preempt_check_due(struct xtc_loop *loop);

/* Executor knob (exec.c calls it from xtc_exec_set_preempt): validates and
 * reports what a carrier arming interval_ns would get. 0 or XTC_E_NOSYS. */
struct xtc_exec;
int xtc__preempt_exec_configure(struct xtc_exec *exec, int64_t interval_ns);
/* Carrier start/stop for the executor: arm the monitor slot (involuntary or
 * no io_uring) or the tick ring (cooperative, when the caller says the
 * loop's io backend is io_uring: preemption does not ask the io layer);
 * with coop, nothing but the clock-checked slice (xtc_exec_set_preempt_coop). */
int  xtc__preempt_carrier_start(int64_t interval_ns, int on_uring, int coop);
void xtc__preempt_carrier_stop(void);

/* Adaptive quantum (fn.c): the slice every carrier gets when no explicit
 * slice is passed to run_begin. 0 = use the carrier's armed slice. */
extern _Atomic int64_t xtc__preempt_adaptive_slice;
/* The adaptive quantum controller (fn_quantum.c) is reached through the
 * upcall table (base_int.h: xtc__up.quantum_*). */

/* Carrier timers (preempt_monitor.c). create: 0, or a negative code (the carrier
 * then stays on the monitor, counted in timer_fallbacks); tick_net: the
 * calling thread's tick net as well (carriers; a thread that only runs
 * deadline functions has the slice timer alone, fn.c). arm: absolute
 * CLOCK_MONOTONIC expiry, INT64_MAX disarms; async-signal-safe, any thread.
 * want: arm unless the timer already fires in [at - early, at] (and after
 * now): a run's slice end may come up to `early` before its deadline
 * (XTC__SLICE_EARLY), so back-to-back short runs re-arm once per `early`
 * of busy time and an expiry never finds a run that is not due. */
int  xtc__ctimer_create(xtc__pslot_t *s, int tid, int tick_net);
void xtc__ctimer_delete(xtc__pslot_t *s);
void xtc__ctimer_arm(xtc__pslot_t *s, int64_t at);
void xtc__ctimer_want(xtc__pslot_t *s, int64_t at, int64_t early,
                      int64_t now);
/* The safety net of a run that s's carrier times with its timers: the
 * monitor must watch `net` (already stored) unless the tick net covers
 * the slot. */
void xtc__monitor_net(xtc__pslot_t *s, int64_t net);
/* The calling carrier's tick net: stop it (async-signal-safe: the handler
 * does it when an expiry lands in Go code) and start it again. */
void xtc__tick_net_pause(void);
void xtc__tick_net_resume(void);
/* Any thread: signal the carrier of s now for its current run (a producer
 * contending an overdue run). 1 if sent. */
int  xtc__monitor_signal_run(xtc__pslot_t *s);
/* Trigger counters for xtc_preempt_stats_global. */
void xtc__monitor_trigger_stats(xtc_preempt_stats_t *out);
extern _Atomic uint64_t xtc__ctimer_fallbacks;
/* Tests: the monitor sends no signal while set (a monitor thread the
 * machine does not schedule in time). */
extern _Atomic int xtc__monitor_muted;
/* The calling carrier's timer syscalls on its own slot, measured around
 * the call (stats only: they follow busy periods, not slices, so
 * lengthening the slice would not reduce them). */
static inline void xtc__preempt_arm_cost(int64_t ns)
{
	xtc__ptls.st.own_arms++;
	if (ns > 0)
		xtc__ptls.st.arm_ns += (uint64_t)ns;
}
/* Measured cost of one involuntary preemption (EWMA, ns; 0 = unknown):
 * lateness of the signal past the deadline plus handler, trampoline and
 * switch up to the next dispatch on that carrier. */
extern _Atomic int64_t xtc__preempt_cost_ewma;
/* fn.c: free a preempted function's context from any thread, without
 * pooling it (the Go wrapper's Fn.Close after its executor ended). */
struct xtc_fn;
int xtc__fn_discard(struct xtc_fn *fn);

/* Slot table (preempt_monitor.c). */
xtc__pslot_t *xtc__monitor_slot_get(int tid, int64_t slice_ns);
void          xtc__monitor_slot_put(xtc__pslot_t *s);
/* A deadline was published: wake the monitor if it plans to sleep past it.
 * A fence and one load when it does not. */
void xtc__monitor_kick(int64_t deadline);
uint64_t xtc__monitor_signals_sent(void);
int64_t  xtc__monitor_cpu_ns(void); /* benchmarks */
int  xtc__monitor_start(void);
void xtc__monitor_after_fork(void);
int  xtc__monitor_poke_all(void); /* tests/benches: signal every busy carrier */
int  xtc__preempt_signo(void);

/* What is preemptible (preempt_allow.c; the code map in preempt.c asks
 * it at each build). policy: XTC_PREEMPT_POLICY_*. declared: pc lies in a
 * range declared at run time (async-signal-safe). object_allowed: the
 * object at path was allowed by name. section_of: the XTC_PREEMPTIBLE
 * section of a loaded object, run-time addresses (0 if it has one). */
struct dl_phdr_info;
int xtc__preempt_policy(void);
int xtc__preempt_declared(uintptr_t pc);
int xtc__preempt_object_allowed(const char *path);
int xtc__preempt_section_of(const struct dl_phdr_info *info, int is_main,
                            int holds_rt, uintptr_t *lo, uintptr_t *hi);
/* The map again, now (the policy or the allowed objects changed); a no-op
 * before the first arm. */
int xtc__preempt_map_rebuild(void);
/* A fiber suspended by an involuntary preemption runs again on this
 * carrier (run_begin): it leaves the list the blocked report names. */
void xtc__preempted_resumes(const xtc__fiber_t *f);
/* Lock tracking is compiled in (preempt_locks.c). */
int xtc__lock_tracking(void);

/* Arch (arch/preempt_*.S and preempt.c). */
void xtc__preempt_trampoline(void);
void xtc__preempt_trampoline_yield(void);
extern uint32_t xtc__xsave_size;   /* bytes of the XSAVE area (0: fxsave) */
extern uint32_t xtc__xsave_mode;   /* 1 xsave, 0 fxsave */

/* Set the deadline of the current run (carrier thread): hard and soft. */
static inline void xtc__preempt_set_deadline(int64_t d)
{
	xtc__pslot_t *s = xtc__ptls.slot;
	xtc__ptls.batch = 0;
	if (s != NULL) {
		atomic_store_explicit(&s->soft, d, memory_order_relaxed);
		atomic_store_explicit(&s->deadline, d, memory_order_relaxed);
	}
}

static inline xtc__pslot_t *xtc__preempt_slot(void)
{
	return xtc__ptls.slot;
}

#endif
