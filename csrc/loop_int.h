/*
 * loop_int.h - internal contract of the loop layer (loop.c, loop_timer.c,
 * async.c, io_*.c) for the proc layer, the executor, classes, the stall
 * watchdog, preemption and the simulator.
 *
 * Model
 *  - A loop is owned by at most one OS thread at a time: the thread inside
 *    xtc_loop_run / xtc_await-driving / an executor carrier, between
 *    xtc__loop_enter() and xtc__loop_leave(). Owner-only state (run queue,
 *    timer heap, free lists, io registrations) is touched only there, without
 *    locks. Everything another thread may do goes through the loop's MPSC
 *    inbox (xtc__loop_post) followed by an io wakeup (eventfd).
 *  - A task is either stackless (fn returns DONE/RESCHED/PENDING each run,
 *    always on the carrier stack) or a fiber (its body runs on its own stack
 *    and may yield/park; returning from the body finishes the task).
 *  - Task states: NEW -> READY -> RUNNING -> (READY | PARKED | DONE).
 *    The only transition another thread may make is PARKED -> READY (a
 *    wake, by CAS), and a wake that finds READY or RUNNING sets wake_pending
 *    instead; the task re-checks (and consumes) wake_pending after
 *    publishing PARKED (both sides use seq_cst), so a wake racing
 *    RUNNING->PARKED is never lost; at worst a latched wake makes one later
 *    park return at once (a spurious wake-up). Whoever wins
 *    the CAS to READY owns the single queue link (node.next) until the task
 *    is dispatched: no allocation per wake, no double enqueue. A
 *    lock-parked task (t->lock_parked, a mailbox wait) is the exception:
 *    only a holder of its waiter's lock moves it to READY, with plain
 *    stores; other wakers latch (see xtc__park_lock_publish).
 *  - A fiber that yields switches directly to the next ready fiber when
 *    there is one and no scheduling feature is on (the fast path: no clock,
 *    no syscall, no allocation); otherwise, and every XTC__FAIR_RUNS runs,
 *    it switches to the carrier (root) fiber, which runs xtc__loop_step.
 *  - Go code never runs on a fiber stack: xtc__carrier_call() moves a call
 *    onto the carrier stack, and while xtc__gocb_depth > 0 no switch, park
 *    or yield is allowed on that thread (they return XTC_E_DEADLK).
 *
 * Alternatives rejected
 *  - A mutex-protected run queue for cross-thread wakes: it would put a lock
 *    on every local dispatch. The inbox keeps the owner path lock-free.
 *  - Always bouncing through the scheduler stack on yield: two switches and
 *    a loop step per yield; the direct fiber->fiber switch halves that.
 *  - Heap-allocated wake messages: the intrusive node cannot fail and
 *    cannot leak.
 */
#ifndef XTC_LOOP_INT_H
#define XTC_LOOP_INT_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "xtc.h"
#include "fiber_int.h"

#define XTC__TLS XTC__TLS_IE /* base_int.h, through fiber_int.h */

/* With a timed feature on (XTC__LF_TIMED: runs are clocked anyway), the
 * fairness poll also happens after any run that ends with a timer due or
 * XTC__FAIR_NS after the previous poll, so a long (e.g. preempted) run
 * cannot delay timers by XTC__FAIR_RUNS runs. */
#define XTC__FAIR_NS 1000000
/* Overflow stack pool bound (stacks per loop) and its idle trim period. */
#define XTC__SPOOL_MAX 4096
#define XTC__SPOOL_TRIM_NS 1000000000LL
/* Every XTC__FAIR_RUNS task runs the loop does a non-blocking io poll, fires
 * due timers and drains the inbox, even when the run queue never empties. */
#define XTC__FAIR_RUNS 64

/* ------------------------------------------------------------------ */
/* MPSC inbox: intrusive, lock-free, any thread -> owner                */
/* ------------------------------------------------------------------ */

/* A posted node. fn runs later on the loop's owner thread (during a step,
 * or at fini with loop->state == XTC__LOOP_FINI so it can free instead of
 * deliver). The poster must not touch the node again until fn has run.
 * Nodes are delivered in posting order per producer. */
typedef struct xtc__post xtc__post_t;
struct xtc__post {
	xtc__post_t *next;
	void (*fn)(xtc_loop_t *loop, xtc__post_t *p);
};

/* Any thread. Pushes p and wakes the loop's poller if it is blocked.
 * XTC_E_INVAL for NULL loop/p/fn or a finalised (or finalising) loop: the
 * node was not taken, the caller still owns (and must free) it. A post
 * that succeeded is always delivered, or at fini its fn runs with
 * loop->magic != XTC__LOOP_LIVE (it frees instead of delivering): fini
 * closes the inbox (XTC__INBOX_CLOSED) and waits for every poster that got
 * in to finish its wake-up before it closes the eventfd. */
int xtc__loop_post(xtc_loop_t *loop, xtc__post_t *p);
#define XTC__INBOX_CLOSED ((xtc__post_t *)(uintptr_t)1)

/* ------------------------------------------------------------------ */
/* Timers (loop_timer.c): an intrusive min-heap on the deadline              */
/* ------------------------------------------------------------------ */

enum {
	XTC__TM_IDLE = 0,   /* never armed, or disarmed */
	XTC__TM_ARMED = 1,  /* in the heap */
	XTC__TM_FIRED = 2,  /* fired; a cancel is a no-op */
	XTC__TM_CANCELLED = 3
};
enum {
	XTC__TMK_INTERNAL = 0, /* embedded in someone's struct; never freed by us */
	XTC__TMK_PUBLIC = 1,   /* xtc_timer_set with a handle: kept until fini */
	XTC__TMK_ANON = 2      /* xtc_timer_set without a handle: recycled */
};

struct xtc_timer {
	int64_t deadline;      /* xtc_clock_mono() ns */
	uint64_t seq;          /* FIFO among equal deadlines */
	xtc_timer_fn fn;       /* called on the loop thread */
	void *user;
	xtc_loop_t *loop;
	uint32_t heap_idx;
	uint8_t state;         /* XTC__TM_* */
	uint8_t kind;          /* XTC__TMK_* */
	struct xtc_timer *next_free; /* loop's timer list (public/anon) */
};

/* Owner thread only. An intrusive timer: tm is caller memory (e.g. in a proc
 * slot) that must stay valid until it fires or is disarmed. Re-arming an
 * armed timer moves it. Internal timers do not count for quiescence (their
 * owner task is live anyway). */
int  xtc__timer_arm(xtc_loop_t *loop, struct xtc_timer *tm, int64_t deadline_ns,
                    xtc_timer_fn fn, void *user);
void xtc__timer_disarm(struct xtc_timer *tm); /* no-op unless armed */

/* ------------------------------------------------------------------ */
/* I/O interest (loop_io_int.h has the backend side)                         */
/* ------------------------------------------------------------------ */

typedef struct xtc__io_req xtc__io_req_t;
typedef void (*xtc__io_cb)(void *arg, uint32_t revents);

/* Owner thread only. One-shot: cb(arg, revents) runs once on the loop thread
 * when fd is ready for interest (XTC_IO_READABLE/WRITABLE; HUP/ERR always
 * reported), then the registration is gone. Returns the backend's real error
 * (e.g. XTC_E_INVAL for a bad fd). After xtc__io_disarm(req) cb is never
 * called; the backend frees req when it is safe (io_uring: after the
 * cancelled CQE arrives). */
int  xtc__io_arm(xtc_loop_t *loop, int fd, uint32_t interest, xtc__io_cb cb,
                 void *arg, xtc__io_req_t **out);
void xtc__io_disarm(xtc_loop_t *loop, xtc__io_req_t *req);

/* ------------------------------------------------------------------ */
/* Tasks                                                                */
/* ------------------------------------------------------------------ */

enum {
	XTC__T_NEW = 0,
	XTC__T_READY = 1,   /* in a run queue, a class queue or an inbox */
	XTC__T_RUNNING = 2,
	XTC__T_PARKED = 3,
	XTC__T_DONE = 4
};

/* Why a park ended (t->park_why), for xtc__park's result. */
enum {
	XTC__PW_NONE = 0,
	XTC__PW_WAKE = 1,
	XTC__PW_FD = 2,
	XTC__PW_TIMEOUT = 3
};

typedef void (*xtc__task_cleanup_fn)(xtc_task_t *t, void *proc);

/* A waiter on a task's completion (xtc_await); lives on the waiter's stack. */
typedef struct xtc__await_node xtc__await_node_t;
struct xtc__await_node {
	xtc__await_node_t *next;
	xtc_task_t *task;     /* fiber waiter, or NULL for a thread waiter */
	_Atomic uint32_t done; /* XTC__AW_*; thread waiter: futex word */
	int status;           /* 0, or XTC_E_ABORTED: the task's loop was finalised */
	intptr_t result;      /* the task's result (status 0) */
};
/* Completion handshake of an await node (as futures, future_int.h): the
 * completer takes the node off the list under wlock, stores result and
 * status, publishes FIRING, wakes the waiter, then publishes DONE as its
 * last access. A waiter that sees FIRING waits for DONE before it leaves
 * (its node, and for a fiber waiter its task, may vanish afterwards). */
enum { XTC__AW_PENDING = 0, XTC__AW_FIRING = 1, XTC__AW_DONE = 2 };

struct xtc_task {
	xtc__post_t node;        /* queue/inbox link: MUST stay first */
	xtc_loop_t *loop;        /* home loop (updated by migration) */
	_Atomic uint32_t state;  /* XTC__T_* */
	_Atomic uint32_t wake_pending;
	uint8_t is_fiber;
	uint8_t pinned;          /* spawn option: never stolen (executor) */
	uint8_t retain;          /* handle given out: not recycled until fini */
	/* set by the proc layer, read by the loop on every resume (so it
	 * stays on the first line): see xtc__proc_resumed */
	_Atomic uint8_t kill_pending;
	uint8_t park_why;        /* XTC__PW_* */
	uint8_t park_armed;      /* an fd or timer registration is outstanding */
	xtc__spin_t wlock;       /* guards waiters (fiber_int.h) */
	uint8_t stack_lazy;      /* fiber whose stack is mapped at first run */
	uint8_t demoted;         /* READY at the demoted level (loop.c) */
	/* its last run ended at its slice end (preempted, or a due point):
	 * the next one runs long (exec_lane.c reads and clears it per dispatch) */
	uint8_t cut;
	uint8_t admitted;        /* holds a cross-thread admission until it
	                          * first runs (XTC__REMOTE_SPAWN_MAX) */
	/* parked by xtc__park_lock_publish: only a holder of the waiter's
	 * lock may make it READY (plain stores); other wakers latch */
	_Atomic uint8_t lock_parked;
	size_t stack_size;       /* requested size for the lazy stack */

	/* body */
	xtc_task_fn fn;          /* stackless */
	void *user;
	xtc__fiber_entry body;   /* fiber (procs) */
	xtc_coro_fn coro;        /* fiber (xtc_async): result = coro(arg) */
	void *arg;
	intptr_t result;         /* xtc_async result */
	xtc__fiber_t fiber;

	/* park */
	uint32_t revents;
	struct xtc_timer park_timer;
	xtc__io_req_t *park_io;

	/* Owned by the layers above the loop, typed to their own structs.
	 * The loop resets the group at spawn (task_reset), stores proc and
	 * sched_class from the spawn options, and only ever tests
	 * sched_class against NULL (default lane or not); what they point to
	 * is the owners' alone. An anonymous member, so the owners (and the
	 * tests) keep their field names. */
	struct {
		struct xtc__proc *proc;  /* proc layer back-pointer (xtc_self) */
		struct xtc_run_class *sched_class; /* class, NULL = default lane */
		/* executor: the enqueue sequence while READY on the carrier's
		 * private FIFO; the thief's loop while a steal moves it;
		 * sched_class.c: when it entered a latency class's queue (the
		 * three never overlap: a task in flight is on no FIFO, and
		 * class work is neither on the FIFO nor stolen) */
		union {
			uint64_t seq;
			xtc_loop_t *to;
			int64_t ready_at;
		} xq;
	};

	/* hooks */
	xtc__task_cleanup_fn cleanup; /* loop thread, at reap or fini */
	_Atomic(xtc__await_node_t *) waiters; /* under wlock; XTC__AWAIT_CLOSED once DONE */
	/* hooked xtc_await waiters holding the struct (+ XTC__WREF_ORPHAN) */
	_Atomic uint32_t wrefs;

	/* bookkeeping */
	xtc_task_t *all_prev, *all_next; /* loop's live list (for fini) */
	int64_t run_start;       /* only written when a timed feature is on */
	int64_t low_since;       /* when it was demoted (aging) */
	int64_t svc_ns;          /* run time since it last parked (adaptive q) */
	uint64_t runs;

	/* waiter detach hook (xtc__task_set_detach), set by the task itself */
	void (*detach)(void *arg);
	void *detach_arg;
};
/* Queues and the inbox cast a post node back to its task. */
_Static_assert(offsetof(struct xtc_task, node) == 0, "node MUST stay first");

/* Waiter detach hook. A fiber that parks on an object another thread or
 * loop completes (a future, a blocking pool job, a launch child) registers
 * fn(arg) for the whole wait and clears it (fn NULL) before the wait
 * returns. When the task's loop is finalised with the task unfinished,
 * loop fini calls fn(arg) on the finalising thread before it drains the
 * inbox or releases any task. fn unhooks the waiter under the object's own
 * lock so that, once fn returns, no completer touches the waiter (its
 * stack, its task) again; a completer already past that point is waited
 * for without parking (it is between two stores). fn must not park or
 * yield and must not touch the loop's tasks. Set and cleared by the task
 * itself, read by fini only while no thread runs the loop. */
/* t's home loop as seen from a thread that does not own t: the executor
 * moves a READY task by storing t->loop atomically on the victim's thread
 * (xtc__task_detach), so every reader that can run concurrently with a
 * migration (a cross-thread wake, await, send, a waker handle) uses this.
 * The value may be the pre-migration loop; a wake posted there is
 * forwarded (the post handler re-reads the loop under the task's state).
 * Plain reads stay correct only on the owning loop's thread or from the
 * running task itself. */
static inline xtc_loop_t *xtc__task_loop(const xtc_task_t *t)
{
	return __atomic_load_n(&t->loop, __ATOMIC_ACQUIRE);
}

static inline void xtc__task_set_loop(xtc_task_t *t, xtc_loop_t *l)
{
	__atomic_store_n(&t->loop, l, __ATOMIC_RELEASE);
}

static inline void xtc__task_set_detach(xtc_task_t *t, void (*fn)(void *),
                                        void *arg)
{
	t->detach_arg = arg;
	t->detach = fn;
}

#define XTC__AWAIT_CLOSED ((xtc__await_node_t *)(uintptr_t)1)
/* The task's loop was finalised with the task unfinished (task_abandon):
 * waiters were fired with XTC_E_ABORTED and later awaits fail the same. */
#define XTC__AWAIT_ABORTED ((xtc__await_node_t *)(uintptr_t)2)
#define XTC__AWAIT_SEALED(p) ((p) == XTC__AWAIT_CLOSED || (p) == XTC__AWAIT_ABORTED)

/* Waiter references (t->wrefs). A waiter that hooked a node on t (async.c)
 * holds t until it has touched t for the last time, because the task's
 * loop may be finalised meanwhile by another thread. Whoever would free or
 * recycle t (loop fini, reap of an unretained task) sets XTC__WREF_ORPHAN
 * and frees only if no reference was held; otherwise the waiter dropping
 * the last reference frees t (it was calloc'ed). */
#define XTC__WREF_ORPHAN (1u << 31)

static inline void xtc__task_wlock(xtc_task_t *t)
{
	xtc__spin_lock(&t->wlock);
}
static inline void xtc__task_wunlock(xtc_task_t *t)
{
	xtc__spin_unlock(&t->wlock);
}

typedef struct xtc__spawn_opts {
	size_t stack_size;   /* 0 = xtc_stack_size() */
	int migratable;      /* 0 = pinned to this loop */
	void *sched_class;   /* opaque, may be NULL */
	void *proc;          /* stored in t->proc before the task can run */
	xtc__task_cleanup_fn cleanup; /* called on the loop thread at reap/fini */
	int retain;          /* keep the task struct until fini (public handles) */
	int admitted;        /* owner thread: the caller already holds an
	                      * admission (xtc__loop_admit) that the task takes
	                      * over (cross-thread dispatch) */
} xtc__spawn_opts_t;

/* Backpressure on work that crosses threads: at most this many cross-thread
 * spawns (procs, tasks, coroutines, dispatches) per loop may be admitted
 * and not yet started; beyond, the spawning call returns XTC_E_AGAIN. An
 * admission ends when the task first runs (or finishes unrun), not when
 * the loop moves it out of its inbox: the loop drains the inbox far faster
 * than it runs tasks, so counting until the drain bounded only the inbox
 * and let the run queue grow without limit. A migrating task carries its
 * admission to its new loop. */
#define XTC__REMOTE_SPAWN_MAX 65536

/* Any thread: take one admission on loop (XTC_E_AGAIN at the cap) /
 * give one back. */
/* 1 when loop was created before a fork() of this process (we are the
 * child): its fds (io_uring, eventfd) are shared with the parent and its
 * carriers and owner thread do not exist here, so running it or spawning
 * on it returns XTC_E_INVAL. A relaxed load of one global. */
int xtc__loop_forked(const xtc_loop_t *loop);

static inline int xtc__loop_admit(xtc_loop_t *loop);
static inline void xtc__loop_admit_done(xtc_loop_t *loop);

/* Any thread. Creates a fiber task running body(arg) and makes it READY
 * (directly on the owner thread, through the inbox otherwise). On the owner
 * thread the stack comes from its cache at once; a spawn from another
 * thread maps it lazily when the task first runs, so spawns waiting in the
 * inbox cost no stack (and no VMA). If that late allocation fails the task
 * finishes without running: result XTC_E_NOMEM, cleanup called, waiters
 * woken. Returning from body finishes the
 * task (DONE): waiters are woken, cleanup runs, the stack goes back to the
 * cache, and the struct is recycled unless retain. out may be NULL; without
 * retain the pointer is only valid until the task is reaped.
 * Errors: XTC_E_INVAL (NULL loop/body, finalised loop, stack_size below
 * 1 KiB), XTC_E_RANGE (stack_size above 1 GiB), XTC_E_NOMEM,
 * XTC_E_RESOURCE (loop->max_tasks reached), XTC_E_AGAIN (cross-thread:
 * XTC__REMOTE_SPAWN_MAX spawns already pending), XTC_E_INTERNAL. */
int xtc__task_spawn_fiber(xtc_loop_t *loop, xtc__fiber_entry body, void *arg,
                          const xtc__spawn_opts_t *opts, xtc_task_t **out);
/* Same for a stackless task (xtc_task_spawn): fn(t, user) per run. */
int xtc__task_spawn_fn(xtc_loop_t *loop, xtc_task_fn fn, void *user,
                       const xtc__spawn_opts_t *opts, xtc_task_t **out);

/* Any thread; idempotent. PARKED -> READY (requeue, through the inbox and an
 * io wakeup when not on the owner thread); READY or RUNNING -> latched (the
 * next park returns at once); NEW, DONE -> no-op. 0, or XTC_E_INVAL for
 * NULL. The task must not have been
 * reaped: callers that may race the task's exit (procs) post to the loop and
 * wake from the loop thread after re-checking their own generation. */
int xtc__task_wake(xtc_task_t *t);
/* Wake t while holding the lock t may be lock-parked under (see
 * xtc__park_lock_publish): a lock-parked task goes READY with plain
 * stores, no CAS (no one else may take it out of PARKED); otherwise as
 * xtc__task_wake. Any thread. */
int xtc__task_wake_lockheld(xtc_task_t *t);

/* Park the current fiber task until a wake, fd readiness (fd >= 0) or the
 * timeout (< 0 forever, 0 poll, > 0 bounded). Spurious wakes are possible;
 * loop on your condition. Checked in this order:
 *  XTC_E_DEADLK    inside a Go callback (xtc__gocb_depth > 0), even on the
 *                  carrier stack
 *  XTC_E_INVAL     off a fiber task, fd >= 0 without READABLE/WRITABLE,
 *                  fd not a descriptor, or a park already outstanding
 *  other           fd registration error from the backend (XTC_E_NOMEM..)
 *  0               woken, or fd ready (*out_revents = XTC_IO_* bits fired)
 *  XTC_E_AGAIN     timeout (out_revents = 0); with timeout 0: not ready
 * After resuming, if t->kill_pending, xtc__proc_resumed() is called. */
int xtc__park(int64_t timeout_ns, int fd, uint32_t interest,
              uint32_t *out_revents);
/* xtc__park(-1, -1, 0, NULL). */
int xtc__task_park(void);
/* Lock-parking: an untimed park for a waiter whose every needed wake
 * comes through one lock (the proc slot lock of a mailbox wait). If
 * xtc__park_prepublish_ok(t), the caller calls xtc__park_lock_publish(t)
 * while holding that lock, releases the lock, then calls
 * xtc__park_published(). Wakers that take the lock afterwards see PARKED
 * (the lock orders it) and wake with xtc__task_wake_local/_lockheld:
 * plain stores, no CAS. xtc__task_wake from outside the lock (a stale
 * waker of some earlier wait) sees lock_parked and latches instead, which
 * surfaces as a spurious wake-up at a later park. So neither side pays a
 * fence or an RMW. Returns 0 (woken); the kill check runs as in
 * xtc__park. */
extern XTC__TLS __thread int xtc__gocb_depth;
static inline int xtc__park_prepublish_ok(xtc_task_t *t)
{
	return xtc__gocb_depth == 0 && t->is_fiber && !t->park_armed &&
	       atomic_load_explicit(&t->wake_pending,
	                            memory_order_relaxed) == 0;
}
static inline void xtc__park_lock_publish(xtc_task_t *t)
{
	atomic_store_explicit(&t->lock_parked, 1, memory_order_relaxed);
	/* release: a waker reading PARKED (acquire) sees the flag */
	atomic_store_explicit(&t->state, XTC__T_PARKED, memory_order_release);
}
int xtc__park_published(void);
/* xtc__park with flags: XTC__PARK_NOKILL skips the kill check on resume
 * (for waits that must unhook themselves before the proc may unwind). */
#define XTC__PARK_NOKILL 1
int xtc__park_ex(int64_t timeout_ns, int fd, uint32_t interest,
                 uint32_t *out_revents, int flags);
/* Yield the current fiber task (xtc_yield); with XTC__PARK_NOKILL a
 * pending kill is left for the caller to act on (t->kill_pending). 0,
 * XTC_E_DEADLK inside a Go callback, XTC_E_INVAL off a fiber task. */
int xtc__fiber_yield_ex(int flags);

/* Finish the current fiber task now, as if its body returned (result for
 * xtc_await). Frames above are abandoned (no unwinding). Off a fiber task:
 * returns XTC_E_INVAL. */
int xtc__task_exit(intptr_t result);

/* Defined by proc.c (the loop reaches it as xtc__up.proc_resumed).
 * Called on the resumed fiber after a yield/park when t->kill_pending is
 * set, holding no loop state; it may longjmp to the proc's entry frame. */
void xtc__proc_resumed(void);

/* What the loop calls in the layers above it (proc, sched, exec) goes
 * through the upcall table xtc__up (base_int.h). */

/* ------------------------------------------------------------------ */
/* Current context (TLS)                                                */
/* ------------------------------------------------------------------ */

extern XTC__TLS __thread xtc_loop_t *xtc__tls_loop;
extern XTC__TLS __thread xtc_task_t *xtc__tls_task;
/* xtc__gocb_depth (> 0 while a Go callback runs on this thread: no
 * switch/park/yield) lives in the fiber layer
 * (fiber_int.h), which the loop and preemption both sit on. */

/* Bracket a C->Go call made on the carrier stack (Go wrappers of stackless
 * task bodies, stall and policy callbacks). */
/* The outer level also withdraws the preemption deadline of the current
 * run (preempt_run.c registers the hooks), so no preemption signal is sent
 * while Go code runs; the tick net's first expiry in a long callback stops
 * it until the callback returns (preempt_monitor.c). */
static inline void xtc__gocb_enter(void)
{
	if (xtc__gocb_depth++ == 0)
		xtc__up.gocb_pause(); /* base_int.h */
}
static inline void xtc__gocb_leave(void)
{
	if (--xtc__gocb_depth == 0)
		xtc__up.gocb_resume();
}

static inline xtc_loop_t *xtc__loop_current(void) { return xtc__tls_loop; }
static inline xtc_task_t *xtc__task_current(void) { return xtc__tls_task; }
static inline int xtc__in_fiber(void)
{
	xtc_task_t *t = xtc__tls_task;
	return t != NULL && t->is_fiber;
}

/* Run fn(arg) on the carrier (scheduler) stack of this thread, with
 * xtc__gocb_depth raised around it. From a fiber task the fiber switches to
 * the carrier, the carrier calls fn, and the same fiber resumes at once (it
 * stays RUNNING; nothing else runs in between). From the carrier stack
 * (stackless task bodies, timer callbacks, a plain thread) fn is called
 * directly. fn must not yield/park. 0, or XTC_E_INVAL for NULL fn. */
int xtc__carrier_call(void (*fn)(void *), void *arg);

/* ------------------------------------------------------------------ */
/* The loop                                                             */
/* ------------------------------------------------------------------ */

/* Feature bits (loop->feat). While feat == 0 the dispatch path is the plain
 * FIFO with no clock read; any bit routes every dispatch through the hooks
 * below (one branch on the hot path). */
enum {
	XTC__LF_BUDGET  = 1u << 0, /* yield budget set: read the clock at run start */
	XTC__LF_CLASSES = 1u << 1, /* classes exist: hooks.pick / hooks.enqueue */
	XTC__LF_STALL   = 1u << 2, /* stall budget: hooks.run_end with ran_ns */
	XTC__LF_PREEMPT = 1u << 3, /* publish per-run deadlines: hooks.run_begin */
	XTC__LF_EXEC    = 1u << 4  /* executor loop of several: the deque */
};
#define XTC__LF_TIMED (XTC__LF_BUDGET | XTC__LF_CLASSES | XTC__LF_STALL | \
                       XTC__LF_PREEMPT)

typedef struct xtc__loop_hooks {
	void *ctx;
	/* CLASS PICK HOOK: return the next task to run (already removed from its
	 * queue) or NULL to fall back to the plain FIFO. */
	xtc_task_t *(*pick)(xtc_loop_t *loop);
	/* Make t ready on this loop; return 1 if taken (class FIFO, deque), 0 to
	 * use the plain FIFO. Called on the owner thread only. */
	int (*enqueue)(xtc_loop_t *loop, xtc_task_t *t);
	/* PREEMPTION DEADLINE HOOK: called before each run, now = run start. */
	void (*run_begin)(xtc_loop_t *loop, xtc_task_t *t, int64_t now);
	/* STALL CHECK / CLASS CHARGE HOOK: after each run (verdict applied). */
	void (*run_end)(xtc_loop_t *loop, xtc_task_t *t, int64_t ran_ns);
	/* Optional extra quiescence term (deque/stolen work); NULL = 0. */
	int (*busy)(xtc_loop_t *loop);
	/* xtc_yield_check, with XTC__LF_PREEMPT: 1 if a tick/ring deadline says
	 * the current run should yield (consumes the tick). */
	int (*check_due)(xtc_loop_t *loop);
} xtc__loop_hooks_t;

enum { XTC__LOOP_LIVE = 0x4c4f4f50u /* "LOOP" */, XTC__LOOP_FINI = 0x46494e49u /* "FINI" */ };

/* A 16-bit process-unique loop id (loop->id) is assigned at init from a
 * global table: ids start at 1 (0 never names a loop, so XTC_PID_NONE stays
 * none), are handed out round-robin over 1..65535 and are reused only after
 * wrapping past every live loop. xtc__loop_by_id is valid while that loop is
 * alive (finalising a loop other threads still address is the caller's
 * race). More than 65535 live loops: xtc_loop_init returns XTC_E_RESOURCE. */
xtc_loop_t *xtc__loop_by_id(uint16_t id);

struct xtc_io; /* loop_io_int.h */

struct xtc_loop {
	/* see xtc__loop_forked */
	uint32_t fork_gen;
	/* hot: dispatch */
	xtc_task_t *rq_head, *rq_tail; /* plain FIFO, owner only */
	uint32_t feat;                 /* XTC__LF_* */
	int32_t fair_left;             /* runs until the next fairness poll */
	int64_t fair_last;             /* clock of the last poll (timed feats) */
	xtc__fiber_t *root;            /* carrier fiber of the owner thread */
	uint64_t runs;                 /* tasks run (stats: tasks_run) */
	/* demoted level (see xtc__loop_demote): preempted default-lane work,
	 * served after everything else unless it has aged */
	xtc_task_t *low_head, *low_tail;
	uint64_t demotions, low_aged;  /* stats: demoted yields, aged picks */
	int low_turn;                  /* the last pick was an aged one */
	/* time-fair aging (sched.c demoted_aged): the aged run in progress,
	 * and the run time the other levels get before the next aged pick
	 * (what the last aged run took), paid down by each other run, at
	 * least low_step at a time */
	xtc_task_t *low_run;
	int64_t low_debt, low_step;
	/* timed feats: the last run's end, the aging's clock (a pick
	 * follows a run end by the scheduler's own work: 5 ms of aging
	 * need no clock read per pick) */
	int64_t run_end_at;
	/* the clock a demotion check read just before its yield switched
	 * out: that run's end (0: none) */
	int64_t yield_at;
	int64_t demote_ns;             /* a plain yield after this much run
	                                  time since the last park demotes */
	/* the receiver that parked here last, whose wake an idle executor
	 * carrier polls instead of its inbox (xtc__loop_watch_*) */
	atomic_uchar *watch_flag;
	xtc__post_t *watch_post;
	_Atomic uint64_t watch_hits;   /* wakes taken that way (owner
	                                  writes; tests read) */

	/* carrier requests from a fiber back to the root */
	xtc_task_t *reap;              /* DONE fiber to reap on the root stack */
	void (*ccall_fn)(void *);      /* xtc__carrier_call request */
	void *ccall_arg;
	xtc_task_t *ccall_task;

	/* The line other threads share: what a producer reads or writes per
	 * submission, post, spawn or wake (the lifecycle words, `sleeping`,
	 * the inbox), and nothing the owner writes per run or per spawn.
	 * live_tasks and posts_taken used to share it: every spawn and exit
	 * on the carrier then moved the line a producer reads per submission
	 * (`sleeping`) to the carrier's CPU, and a request of no work cost
	 * 300 -> 430 ns at saturation (bench_preempt capacity, preemption
	 * off; the layout shifted when fields were added before it).
	 * Ordered to fit one line. */
	/* XTC__LOOP_LIVE / XTC__LOOP_FINI. Read by other threads (posts,
	 * spawns, wakes): atomic, stored with release by init/fini. */
	_Alignas(64) _Atomic uint32_t magic;
	_Atomic int stop;
	_Atomic int sleeping;          /* XTC__SLEEP_*: owner (about to be) blocked */
	/* counts xtc_loop_wake/stop callers inside their eventfd write */
	_Atomic int rings;
	_Atomic uintptr_t owner;       /* owner thread token, 0 = none */
	/* when the waker that won `sleeping` rang a blocked owner (before its
	 * syscall); the owner reads it once awake: the wake's latency
	 * (exec_carrier.c: parks, slow wakes). 0: no wake pending. */
	_Atomic int64_t wake_at;
	/* cross-thread inbox (Treiber stack, drained whole and reversed);
	 * XTC__INBOX_CLOSED from fini on. posts_done counts finished posts
	 * (push and wake-up both done; one RMW per post, on the inbox's
	 * line), posts_taken (below, the owner's) the nodes the owner took
	 * out: fini waits until they match, i.e. until no poster still
	 * touches the loop. */
	_Atomic(xtc__post_t *) inbox;
	_Atomic uint64_t posts_done;
	_Atomic int64_t remote_pending; /* admitted cross-thread spawns not yet
	                                 * started (XTC__REMOTE_SPAWN_MAX) */
	/* set by the first xtc__loop_enter (run, step, carrier, await
	 * driving) and never cleared: "setup-only" calls (batch groups, lane
	 * policies) return XTC_E_AGAIN once it is set */
	_Atomic uint8_t started;
	uint16_t id;                   /* process-unique, >= 1 */
	int index;                     /* executor index, -1 standalone */

	/* the owner's again */
	_Alignas(64) uint64_t posts_taken;
	/* quiescence */
	int64_t live_tasks;            /* spawned and not reaped (owner) */
	int64_t pending_timers;        /* armed public/anon timers (owner) */
	int64_t max_tasks;             /* 0 = unlimited -> XTC_E_RESOURCE */

	/* timers */
	struct xtc_timer **heap;
	uint32_t heap_len, heap_cap;
	uint64_t timer_seq;
	struct xtc_timer *timers_all;  /* public handles (freed at fini) */
	struct xtc_timer *timers_free; /* anon timers for reuse */

	/* io */
	struct xtc_io *io;

	/* Overflow stack pool: stacks of reaped fibers that the thread's
	 * cache (XTC__STACK_CACHE_MAX) could not take, handed back to it at
	 * the next spawn, so bursts above the cache bound do not mmap/munmap
	 * per fiber. Stacks never needed during XTC__SPOOL_TRIM_NS are
	 * released when the loop goes idle. */
	xtc__stack_t *spool;
	uint32_t spool_n, spool_cap, spool_low;
	int64_t spool_trim_at;

	/* tasks */
	xtc_task_t *all;               /* live + retained tasks */
	xtc_task_t *task_free;         /* recyclable task structs */
	uint32_t task_free_len;
	/* Task structs for spawns from other threads (loop_task.c task_alloc):
	 * the owner pushes reaped ones, a foreign spawner pops one under
	 * spare_lock (one popper at a time: no ABA; the owner's push needs
	 * no lock). Own line: foreign spawners write it. */
	_Alignas(64) xtc_task_t *_Atomic spare;
	_Atomic uint32_t spare_n;
	xtc__spin_t spare_lock;
	_Alignas(64) char spare_end_;  /* nothing else on that line */

	/* yield budget: the effective budget is the smaller non-zero of
	 * yield_budget (xtc_yield_set_budget) and lat_budget (latency classes,
	 * sched_class.c); XTC__LF_BUDGET is set while it is non-zero. */
	int64_t yield_budget;
	int64_t lat_budget;
	_Atomic uint64_t yield_due;

	/* the pick: written by sched.c only (the executor, classes, lane
	 * policies and batch groups register with it) */
	xtc__loop_hooks_t hooks;

	/* shell list link while finalised (loop.c shell_get/shell_put) */
	xtc_loop_t *shell_next;

	/* State the layers above the loop own. Each pointer is typed to its
	 * layer's own incomplete struct and is allocated, read and freed by
	 * that layer alone; the loop only clears the group when it is
	 * finalised, and never looks inside. */
	struct {
		struct xtc_exec *exec;        /* owning executor, NULL standalone (exec.c) */
		struct xtc__carrier *carrier; /* the carrier running this loop (exec.c) */
		_Atomic uint64_t steals;      /* tasks stolen into this loop (exec.c) */
		struct xtc__classes *classes; /* class state (sched_class.c) */
		struct xtc__stall *stall;     /* stall watchdog state (sched_stall.c) */
		struct xtc__sched *sched;     /* lane policy / batch counts (sched.c) */
		struct xtc__ptab *procs;      /* proc table (proc.c, freed in xtc__proc_loop_fini) */
	} up;
};
/* The line other threads share stays theirs (see its note): one line, and
 * the owner's per-run fields start on the next. */
_Static_assert(offsetof(struct xtc_loop, magic) % 64 == 0 &&
               offsetof(struct xtc_loop, index) / 64 ==
                   offsetof(struct xtc_loop, magic) / 64 &&
               offsetof(struct xtc_loop, posts_taken) % 64 == 0,
               "the cross-thread line of struct xtc_loop");

/* Watched wakes. A cross-thread wake is a post on the loop's inbox: the
 * waker moves the inbox's line, the post count's and the wake flag's to
 * its CPU, and the owner's poll moves them back, on top of the line the
 * wake is about (a mailbox slot: proc_int.h). An idle executor carrier
 * (exec_carrier.c carrier_idle, from its steal attempt to its park) instead
 * watches the one waiter that parked on its loop last: it stores WATCH_ON
 * in a flag on the waiter's own line, and a waker that finds ON swaps it
 * to WATCH_HIT and posts nothing; the carrier sees HIT in its spin's poll
 * and runs the post's callback itself. One line moves per wake: the
 * cross-loop ping-pong's. The end of a watch swaps the flag back to OFF,
 * so exactly one of the two acts: a waker that comes later finds OFF and
 * posts. A stale watch (the waiter woke another way, or migrated, and two
 * carriers watch one line) is harmless: only a watch's end takes a HIT
 * off the flag (a begin turns OFF to ON, never HIT), and whichever end
 * takes it runs the callback, which re-checks its target and wakes it
 * through its real loop. Rejected: the waiter turning the watch on as it
 * parks (every loop step, not only an idle carrier, would then have to
 * poll the flag, or a wake could wait behind a busy carrier's whole
 * run). Owner thread only, except the waker's xtc__watch_claim. */
enum { XTC__WATCH_OFF = 0, XTC__WATCH_ON = 1, XTC__WATCH_HIT = 2 };
static inline void xtc__loop_watch_set(xtc_loop_t *l, atomic_uchar *flag,
                                       xtc__post_t *post)
{
	l->watch_flag = flag;
	l->watch_post = post;
}
static inline void xtc__loop_watch_clear(xtc_loop_t *l, xtc__post_t *post)
{
	if (l->watch_post == post) {
		l->watch_flag = NULL;
		l->watch_post = NULL;
	}
}
/* OFF -> ON only: a stale watch of another loop's carrier on the same
 * line may hold a HIT, and overwriting it would lose that wake (whoever
 * ends a watch on a HIT runs the callback, so this end takes it). */
static inline atomic_uchar *xtc__loop_watch_begin(xtc_loop_t *l)
{
	atomic_uchar *f = l->watch_flag;
	unsigned char off = XTC__WATCH_OFF;
	if (f != NULL)
		(void)atomic_compare_exchange_strong(f, &off, XTC__WATCH_ON);
	return f;
}
static inline int xtc__loop_watch_hit(const atomic_uchar *f)
{
	return f != NULL && atomic_load_explicit((atomic_uchar *)f,
	                        memory_order_relaxed) == XTC__WATCH_HIT;
}
/* Ends the watch begun with f; runs the wake a waker left to it (1). */
static inline int xtc__loop_watch_end(xtc_loop_t *l, atomic_uchar *f)
{
	if (f == NULL || atomic_exchange(f, XTC__WATCH_OFF) != XTC__WATCH_HIT)
		return 0;
	atomic_store_explicit(&l->watch_hits, atomic_load_explicit(
	    &l->watch_hits, memory_order_relaxed) + 1, memory_order_relaxed);
	l->watch_post->fn(l, l->watch_post);
	return 1;
}
/* Any thread, instead of posting the wake: 1 if the watching carrier
 * took it. */
static inline int xtc__watch_claim(atomic_uchar *f)
{
	unsigned char on = XTC__WATCH_ON;
	return atomic_load_explicit(f, memory_order_relaxed) == on &&
	       atomic_compare_exchange_strong(f, &on, XTC__WATCH_HIT);
}

static inline int xtc__loop_admit(xtc_loop_t *loop)
{
	/* add first, then check: concurrent spawners cannot all pass a
	 * load-then-add check and overshoot the cap together */
	if (atomic_fetch_add_explicit(&loop->remote_pending, 1,
	                              memory_order_relaxed) >=
	    XTC__REMOTE_SPAWN_MAX) {
		atomic_fetch_sub_explicit(&loop->remote_pending, 1,
		                          memory_order_relaxed);
		return XTC_E_AGAIN;
	}
	return XTC_OK;
}

static inline void xtc__loop_admit_done(xtc_loop_t *loop)
{
	atomic_fetch_sub_explicit(&loop->remote_pending, 1,
	                          memory_order_relaxed);
}

/* The loop's list of live and retained tasks (loop->all, which fini
 * walks): the loop links a task at spawn and unlinks it at reap; a
 * migration moves it from the victim's list to the thief's
 * (xtc__task_detach/attach).
 * Owner thread of loop. */
static inline void xtc__task_all_link(xtc_loop_t *loop, xtc_task_t *t)
{
	t->all_prev = NULL;
	t->all_next = loop->all;
	if (loop->all != NULL)
		loop->all->all_prev = t;
	loop->all = t;
}

static inline void xtc__task_all_unlink(xtc_loop_t *loop, xtc_task_t *t)
{
	if (t->all_prev != NULL)
		t->all_prev->all_next = t->all_next;
	else
		loop->all = t->all_next;
	if (t->all_next != NULL)
		t->all_next->all_prev = t->all_prev;
	t->all_prev = t->all_next = NULL;
}

/* loop->sleeping: 0 awake; XTC__SLEEP_POLL blocked (or about to block) in
 * the poller, woken by the eventfd; XTC__SLEEP_FUTEX an executor carrier
 * with no fd to watch, parked on a futex on the sleeping word itself (a
 * cheaper wake on both sides: no eventfd write, completion or read). A
 * waker exchanges the word to 0 and rings what the old value names
 * (xtc__loop_ring), so only the first waker after a park pays a syscall.
 * That waker also stamps loop->wake_at (a clock read next to the syscall
 * it pays anyway), so the owner can tell how late its wake-up came. */
enum { XTC__SLEEP_POLL = 1, XTC__SLEEP_FUTEX = 2, XTC__SLEEP_RUN = 3 };
void xtc__loop_ring(xtc_loop_t *loop, int how);
/* XTC__SLEEP_RUN: not blocked but running a fiber that had nothing to
 * compete with; the first poster tells the executor (exec_lane.c, reached
 * through xtc__up), which then lets that run be preempted at its
 * slice end. */
void xtc__exec_ring_run(xtc_loop_t *loop);

/* The executor that owns loop, NULL for a standalone loop: the accessor
 * for code outside the executor (gobridge.c among it), which must
 * not reach into loop->up. */
static inline struct xtc_exec *xtc__loop_exec(const xtc_loop_t *loop)
{
	return loop->up.exec;
}

/* xtc_loop_fini refuses a loop with loop->up.exec set (XTC_E_INVAL), and so
 * does xtc_loop_run; the executor finalises its loops with this. */
int xtc__loop_fini_owned(xtc_loop_t *loop);

/* Fini only (owner thread, magic already XTC__LOOP_FINI): a task that
 * reached the closing inbox on no task list (a cross-thread spawn, a
 * migration) gets the teardown of every unfinished task: its detach hook
 * runs now and it joins loop->all, so release_all_tasks abandons it
 * (waiters get XTC_E_ABORTED), runs its cleanup and frees it. */
void xtc__loop_adopt_orphan(xtc_loop_t *loop, xtc_task_t *t);

/* Called by xtc_loop_fini after every task has been released (cleanup hooks
 * run) and the inbox drained; proc.c defines it (reached through
 * xtc__up, a no-op without proc.c). */
void xtc__proc_loop_fini(xtc_loop_t *loop);
/* Same for sched.c (class, stall and policy state; sched_int.h). */
void xtc__sched_loop_fini(xtc_loop_t *loop);

/* Claim/release the loop for the calling thread: sets TLS current loop,
 * owner, root fiber (xtc__fiber_thread_init). XTC_E_INVAL when another
 * thread owns it or it is finalised. Nesting on the same thread is refused
 * too (XTC_E_INVAL): one loop per thread at a time. */
int  xtc__loop_enter(xtc_loop_t *loop);
void xtc__loop_leave(xtc_loop_t *loop);
int  xtc__loop_on_owner_thread(const xtc_loop_t *loop);
/* Thread token used for loop->owner. */
uintptr_t xtc__thread_token(void);

/* Owner thread (after enter). One scheduling step: drain the inbox, run one
 * ready task (a fiber may chain up to XTC__FAIR_RUNS direct switches), apply
 * the fairness poll; if nothing was ready fire due timers, then (may_block)
 * block in the poller until the next deadline / a wakeup. Returns 1 progress,
 * 0 idle, < 0 error. */
int xtc__loop_step(xtc_loop_t *loop, int may_block);
/* Nothing live: no tasks, no armed public timers, empty inbox, and
 * hooks.busy() == 0. Owner thread. */
int xtc__loop_quiescent(const xtc_loop_t *loop);

/* The loop is live (init done, fini not begun); acquire pairs with the
 * release stores of init and fini. */
static inline int xtc__loop_live(const xtc_loop_t *loop)
{
	return loop != NULL &&
	       atomic_load_explicit(&loop->magic, memory_order_acquire) ==
	               XTC__LOOP_LIVE;
}

/* loop.c <-> loop_task.c, owner thread. The task's end: complete publishes
 * DONE and releases its waiters; reap (root stack) cancels its park
 * registration, runs its cleanup, releases its stack and struct. A fiber
 * spawned from another thread maps its stack at its first run
 * (materialize; on failure the task is finished unrun and reaped, and the
 * error returned). */
void xtc__task_complete(xtc_task_t *t);
void xtc__task_reap(xtc_loop_t *loop, xtc_task_t *t);
int  xtc__task_materialize(xtc_loop_t *loop, xtc_task_t *t);
/* Register / cancel the park of fiber task t on fd (>= 0) and/or a
 * timeout (> 0 ns); a failed arm leaves nothing registered. */
int  xtc__task_park_arm(xtc_loop_t *loop, xtc_task_t *t, int64_t timeout_ns,
                        int fd, uint32_t interest);
void xtc__task_park_cancel(xtc_loop_t *loop, xtc_task_t *t);
/* Idle: unmap the overflow pool's stacks unused since the last trim (all:
 * every one, and the pool itself, at fini). */
void xtc__loop_spool_trim(xtc_loop_t *loop, int64_t now, int all);
/* Fini: unhook the tasks that wait on other threads' objects (first), then
 * release every task (unfinished ones are abandoned: XTC_E_ABORTED). */
void xtc__loop_detach_waiters(xtc_loop_t *loop);
void xtc__loop_release_tasks(xtc_loop_t *loop);

/* Migration of a READY task between two loops (loop_task.c; the executor
 * carries it through their inboxes). detach, on from's owner thread: t
 * leaves from's task list and live count, its park registration ends, its
 * loop becomes `to` and an admission of a task that has not run yet moves
 * with it. attach, on l's owner thread: t joins l's task list and live
 * count (the caller makes it ready). detach_undo, on from's owner thread
 * when the post to `to` failed: t is from's again, and READY. */
void xtc__task_detach(xtc_loop_t *from, xtc_task_t *t, xtc_loop_t *to);
void xtc__task_attach(xtc_loop_t *l, xtc_task_t *t);
void xtc__task_detach_undo(xtc_loop_t *from, xtc_task_t *t, xtc_loop_t *to);

/* Owner thread: make a task READY on its loop (run queue or hooks.enqueue).
 * The caller must own the READY transition (CAS won or freshly created). */
void xtc__loop_make_ready(xtc_loop_t *loop, xtc_task_t *t);
/* Owner thread: xtc__loop_make_ready with its feat == 0 case (READY and
 * the tail of the plain FIFO, loop.c's make_ready/rq_push) inline. */
static inline void xtc__loop_make_ready_inl(xtc_loop_t *loop, xtc_task_t *t)
{
	if (XTC__LIKELY(loop->feat == 0)) {
		atomic_store_explicit(&t->state, XTC__T_READY,
		                      memory_order_relaxed);
		t->node.next = NULL;
		if (loop->rq_tail != NULL)
			loop->rq_tail->node.next = &t->node;
		else
			loop->rq_head = t;
		loop->rq_tail = t;
		return;
	}
	xtc__loop_make_ready(loop, t);
}
/* xtc__task_wake_lockheld for a caller on t's loop owner thread (t->loop
 * == xtc__tls_loop), e.g. a same-loop mailbox send, inline; the PARKED ->
 * READY case of a plain park is one CAS and a run-queue push. */
static inline void xtc__task_wake_local(xtc_task_t *t)
{
	uint32_t s = XTC__T_PARKED;

	if (atomic_load_explicit(&t->lock_parked, memory_order_relaxed)) {
		/* READY before the flag drops: a waker that sees the flag
		 * clear (acquire) also sees READY and its CAS fails */
		atomic_store_explicit(&t->state, XTC__T_READY,
		                      memory_order_relaxed);
		atomic_store_explicit(&t->lock_parked, 0,
		                      memory_order_release);
		xtc__loop_make_ready_inl(t->loop, t);
	} else if (atomic_compare_exchange_strong(&t->state, &s,
	                                          XTC__T_READY)) {
		xtc__loop_make_ready_inl(t->loop, t);
	} else {
		xtc__task_wake(t);
	}
}
/* Owner thread: pop the next task from the plain FIFO (NULL when empty). */
xtc_task_t *xtc__rq_pop(xtc_loop_t *loop);

/* Demotion (LibPreemptible's two-level queue). A default-lane fiber whose
 * slice ran out (an involuntary preemption, or a cooperative yield at a due
 * tick) is made READY at the demoted level instead of the tail of the run
 * queue. The pick serves it only when the default lane has nothing else
 * ready (run queue, deque), after the carrier drained its submission ring
 * and inbox, except that the oldest demoted task is served first once it
 * waited XTC__DEMOTE_AGE_NS, alternating with the other levels in run time
 * (aging: long work progresses under any load, and so does new work; an
 * aged run that overran its slice gives the overrun back: sched.c).
 * Classes choose between lanes exactly as before: demoted tasks make the
 * default lane ready. Owner thread. */
#define XTC__DEMOTE_AGE_NS 5000000
/* A plain yield demotes too once the task ran loop->demote_ns (the slice)
 * since it last parked or finished (t->svc_ns, kept by the executor): a
 * fiber that yields every microsecond but never blocks is CPU-bound work.
 * Yield the current fiber because its slice ended: demoted when the loop
 * preempts (XTC__LF_PREEMPT) and the task is in the default lane, a plain
 * yield otherwise. Same results as xtc__fiber_yield. */
int xtc__fiber_yield_slice(void);
/* The current fiber task goes to the back of its queue and gives up the
 * CPU (xtc_yield, xtc_yield_ex and proc sleeps of 0 are this). 0, or
 * XTC_E_INVAL off a fiber task, XTC_E_DEADLK inside a Go callback. */
int xtc__fiber_yield(void);
/* A fiber task whose body is a coroutine: its result is kept for
 * xtc_await (async.c, exec.c). */
int xtc__task_spawn_coro(xtc_loop_t *loop, xtc_coro_fn fn, void *arg,
                         const xtc__spawn_opts_t *opts, xtc_task_t **out);
/* Pop the demoted level (NULL: empty). */
xtc_task_t *xtc__loop_low_pop(xtc_loop_t *loop);
/* The executor may take a preempted migratable task instead (an idle peer
 * can run it now); 1 if it did (exec_lane.c, through xtc__up). */
int xtc__exec_offer(xtc_loop_t *loop, xtc_task_t *t);

/* Recompute XTC__LF_BUDGET from yield_budget / lat_budget (owner thread). */
void xtc__loop_budget_update(xtc_loop_t *loop);

/* Set feature bits / hooks (owner thread or before the loop runs). */
void xtc__loop_set_hooks(xtc_loop_t *loop, const xtc__loop_hooks_t *hooks);
void xtc__loop_feat_set(xtc_loop_t *loop, uint32_t bits);
void xtc__loop_feat_clear(xtc_loop_t *loop, uint32_t bits);

/* Clock used by the loop (timers, budget): xtc_clock_mono(), which follows
 * xtc__up.clock (base_int.h). */
static inline int64_t xtc__now(void) { return xtc_clock_mono(); }

/* Timer internals (loop_timer.c), owner thread. */
int     xtc__timers_init(xtc_loop_t *loop);
void    xtc__timers_fini(xtc_loop_t *loop);
int     xtc__timers_fire(xtc_loop_t *loop, int64_t now); /* # fired */
int64_t xtc__timers_next(const xtc_loop_t *loop);       /* -1 = none */

/* Stack size (fiber_stack.c): process-wide default used when size == 0. */
size_t xtc__stack_default(void);
int    xtc__stack_set_default(size_t bytes);

#endif
