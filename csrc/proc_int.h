/*
 * proc_int.h - internal contract of processes and mailboxes (csrc/proc.c,
 * csrc/proc_mailbox.c).
 *
 * Model: a proc is a fiber task (loop_int.h) plus a slot in its home loop's
 * proc table. The slot holds everything another thread may touch
 * (generation, state, mailbox, links, monitors, the kill flag) behind one
 * small spinlock; the task holds only scheduling state and t->proc, the
 * back-pointer to the slot.
 *
 * Invariants:
 *  - slot memory is stable: a table grows by chunks that never move and are
 *    freed only at loop fini, so a slot pointer from xtc__proc_ref stays
 *    valid while the table reference is held (or on the owner thread);
 *  - a pid names a live proc iff slot->gen == pid.gen and the state is
 *    ALIVE, both read under the slot lock; gen bumps when the proc dies, so
 *    a stale pid never reaches the next occupant;
 *  - only the proc itself (or loop fini) moves ALIVE -> DEAD, in
 *    proc_teardown; every exit path (return, xtc_exit_self, kill) ends there;
 *  - while a slot is ALIVE its task has not been reaped, so waking
 *    slot->task under the slot lock is safe from any thread;
 *  - no two slot locks are ever held at once (no lock ordering to get wrong);
 *    slot locks are never held across a park, and they defer preemption;
 *  - a message is one allocation (a cached block for small ones, else a
 *    malloc): payload first (what xtc_recv hands out, freed with xtc_free
 *    from any thread), the queue node at the 16-aligned tail; the one
 *    exception is an inline handoff (payload in the slot, proc_mailbox.c);
 *  - a slot's first cache line holds everything a cross-thread send to a
 *    parked receiver reads or writes (static assert below).
 */
#ifndef XTC_PROC_INT_H
#define XTC_PROC_INT_H

#include <sched.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "xtc_proc.h"
#include "base_int.h"
#include "loop_int.h"

/* ---- spinlock -----------------------------------------------------------
 * xtc__spin_t (fiber_int.h), held for tens of instructions (a queue
 * splice, a vector edit), with preemption disabled while held. */

/* ---- messages ----------------------------------------------------------- */

typedef struct xtc__msg {
	struct xtc__msg *next;
	size_t size;     /* payload bytes */
	uint64_t tag;    /* DOWN messages: the monitor ref (for demonitor flush) */
} xtc__msg_t;

#define XTC__MSG_OFF(size) (((size) + 15u) & ~(size_t)15u)
#define XTC__MSG_MAX       ((size_t)1 << 40)

static inline void *xtc__msg_data(xtc__msg_t *m)
{
	return (char *)m - XTC__MSG_OFF(m->size);
}

typedef struct xtc__msgq {
	xtc__msg_t *head, *tail;
	uint32_t n;
} xtc__msgq_t;

/* ---- relationships ------------------------------------------------------ */

typedef struct xtc__rel {
	uint64_t ref;    /* monitor ref; 0 for a link */
	xtc_pid_t pid;   /* the other side */
} xtc__rel_t;

typedef struct xtc__relv {
	xtc__rel_t *v;
	uint32_t n, cap;
} xtc__relv_t;

/* ---- the proc slot ------------------------------------------------------ */

enum { XTC__PROC_FREE = 0, XTC__PROC_ALIVE = 1, XTC__PROC_DEAD = 2 };
/* slot->mflags: what the handoff path needs to know of the fields it does
 * not read (they are on the owner's line) */
enum { XTC__MF_WM = 1,       /* a watermark is set (wm_level != 0) */
       XTC__MF_PEAKED = 2,   /* peak >= 1 already */
       XTC__MF_WM_FIRED = 4 }; /* watermark reported, re-armed below level */

/* Inline handoff: a payload this small travels in the slot's first line
 * (hbuf), which the send moves anyway; the receiver copies it into a
 * message of its own thread. handoff then holds an odd value, never a
 * message address (those are 16-aligned). */
#define XTC__HOFF_INLINE_MAX 16u
static inline xtc__msg_t *xtc__hoff_inline(size_t n)
{
	return (xtc__msg_t *)(uintptr_t)((n << 1) | 1u);
}
static inline int xtc__hoff_is_inline(const xtc__msg_t *m)
{
	return ((uintptr_t)m & 1u) != 0;
}
static inline size_t xtc__hoff_inline_size(const xtc__msg_t *m)
{
	return (uintptr_t)m >> 1;
}
/* Free what a handoff holds (teardown): an inline one holds no memory. */
static inline void xtc__hoff_free(xtc__msg_t *m)
{
	if (m && !xtc__hoff_is_inline(m))
		xtc_free(xtc__msg_data(m));
}
enum { XTC__WAIT_NONE = 0, XTC__WAIT_WAKE = 1, XTC__WAIT_RECV = 2 };

typedef struct xtc__ptab xtc__ptab_t;

typedef struct xtc__proc {
	/* Line 0: everything a sender on another thread touches when the
	 * receiver is parked in xtc_recv (the cross-loop ping-pong): lock,
	 * liveness, the handoff and its inline payload, the wake (post node,
	 * post_queued, the task). One cache line moves per one-way message;
	 * the slot used to spread them over lines 0-4, plus the task's line
	 * and the message's (proc_mailbox.c, "Cache lines"). Slots are 64-aligned,
	 * so neighbours never share it. */
	_Alignas(64) xtc__spin_t lock;
	/* XTC__PROC_*: ALIVE is published by a release store after the
	 * unlocked init of a FREE slot; DEAD is set under the lock; FREE by a
	 * release store once the slot is emptied (then it joins the free list) */
	atomic_uchar state;
	uint8_t waiting;         /* parked on the mailbox: a send must wake;
	                          * XTC__WAIT_RECV also accepts a handoff */
	atomic_uchar post_queued;/* `post` sits in a loop inbox */
	uint8_t kill_pending;    /* under lock; first xtc_exit_pid wins */
	/* the spinning carrier of the receiver's loop watches this line
	 * (xtc__loop_watch_*): XTC__WATCH_ON, and a waker that finds it so
	 * swaps it to XTC__WATCH_HIT instead of posting the wake */
	atomic_uchar watch;
	uint8_t migratable;      /* spawn option: 0 = the task never leaves
	                          * tab->loop (the wake need not read it) */
	uint8_t mflags;          /* XTC__MF_*, under lock */
	uint32_t gen;            /* written under lock (bumped at death) */
	uint32_t cap;
	/* a message given straight to a receiver parked in xtc_recv on an empty
	 * mailbox (set under the lock with release, with waiting cleared, so
	 * the woken receiver takes it without relocking): a message, or
	 * xtc__hoff_inline(n) for n payload bytes in hbuf */
	xtc__msg_t *_Atomic handoff;
	/* cross-thread wake: queued on the task's loop after the slot lock is
	 * dropped (never a syscall under the lock); its callback re-checks the
	 * slot on the loop thread. Slot memory is stable, so it cannot dangle. */
	xtc__post_t post;
	xtc_task_t *task;        /* set by the proc's first run, under lock */
	unsigned char hbuf[XTC__HOFF_INLINE_MAX];
	/* line 1: written at spawn only (shared clean between carriers) */
	xtc__ptab_t *tab;        /* home table */
	uint16_t local_id;
	int kill_reason;
	xtc_proc_fn fn;
	void *arg;
	void *userdata;
	const char *name;        /* NULL or name_buf */
	/* internal exit hook (xtc__proc_spawn_hooked): called once at
	 * teardown, whatever ended the proc (return, kill, loop fini) */
	void (*on_exit)(void *user, int reason);
	void *on_exit_user;
	/* xtc_proc_at_exit handlers, run LIFO at the start of teardown
	 * (owner only; the array is allocated at the first one and stays
	 * with the slot) */
	struct xtc__atexit {
		void (*fn)(void *);
		void *arg;
	} *atexit;
	uint8_t n_atexit;
	/* mailbox. `in` is appended by senders under the lock; `save` (messages
	 * a recv_match has passed over, older than everything in `in`) is
	 * spliced and scanned by the owner only, its count kept under the lock
	 * so senders can enforce cap >= in.n + save.n. */
	_Alignas(64) xtc__msgq_t in;
	xtc__msgq_t save;
	/* written by the owner proc only (under the lock, or after taking a
	 * handoff without it); read under the lock by the stats */
	_Atomic uint64_t recv_total;
	uint64_t drop_total;
	uint32_t wm_level, peak;
	void (*wm_fn)(xtc_pid_t self, size_t depth, size_t cap, void *user);
	void *wm_user;
	uint8_t in_match;        /* owner: inside a recv_match predicate */
	/* relationships, under lock */
	xtc__relv_t links;
	xtc__relv_t watchers;    /* monitors on me: {ref, watcher} */
	xtc__relv_t held;        /* monitors I hold: {ref, target} */
	uint32_t next_free;      /* free-list link (local id), under tab lock */
	/* the spawn option's copy: slots live until loop fini, so a report
	 * that still holds `name` after the proc died reads valid memory (at
	 * worst the name of the slot's next proc) */
	char name_buf[XTC_PROC_NAME_MAX];
	/* recovery frame (proc_fault.c); NULL until the proc first arms one,
	 * freed at teardown */
	struct xtc__pfault *fault;
} xtc__proc_t;
_Static_assert(offsetof(xtc__proc_t, tab) == 64,
               "a handoff's fields fill the slot's first line, no more");

/* Per-loop table: 256 chunks of 256 slots; local ids 1..65535. */
#define XTC__PROC_CHUNK_SHIFT 8u
#define XTC__PROC_CHUNK       (1u << XTC__PROC_CHUNK_SHIFT)
#define XTC__PROC_NCHUNKS     (65536u >> XTC__PROC_CHUNK_SHIFT)
#define XTC__PROC_MAX_LOCAL   65535u

struct xtc__ptab {
	atomic_int live;         /* 1 while the owner loop accepts lookups */
	xtc_loop_t *loop;
	uint16_t loop_id;
	xtc__spin_t lock;        /* free list and chunk growth */
	uint32_t hwm;            /* next never-used local id */
	uint32_t free_head;      /* shared free list (lock); 0 = empty */
	/* owner-thread cache of free ids: spawn/exit on the loop thread
	 * skip the lock; bounded so foreign spawners still find slots */
	uint32_t local_head, local_n;
	uint32_t gen_floor;      /* slots of a reused loop id start above it */
	xtc__ptab_t *next_tab;   /* free list of finalised headers (proc.c) */
	xtc__proc_t *_Atomic chunks[XTC__PROC_NCHUNKS];
	/* foreign-thread lookups in flight, alone on its line: every send
	 * from another loop does an RMW on it, and sharing a line with `live`
	 * (which the owner's own lookups read) made each cross-loop message
	 * pay a cache miss for the owner's read before it. bench_xloop,
	 * interleaved, 3 rounds each way: round trip 1.42-1.46 -> 1.23-1.27
	 * us where the machine's cross-core floor is ~500 ns, 485-539 ->
	 * 361-441 ns where its two CPUs share a core (floor ~110 ns) */
	_Alignas(64) atomic_int users;
};

/* Table headers in existence (live or recycled): bounded by the loops with
 * procs alive at once, not by the loop ids used (tests). */
int xtc__proc_tab_headers(void);

/* Lookup from any thread (no lock taken on the slot). On success returns
 * the slot and, when the lookup went through the global table (foreign
 * thread), *ref holds a users reference to drop with xtc__proc_unref.
 * NULL for XTC_PID_NONE, an unknown loop or an id never allocated. The
 * caller still checks gen and state under the slot lock. */
xtc__proc_t *xtc__proc_ref_slow(xtc_pid_t pid, xtc__ptab_t **ref);
static inline xtc__proc_t *xtc__proc_ref(xtc_pid_t pid, xtc__ptab_t **ref)
{
	xtc_loop_t *cur = xtc__tls_loop;
	uint16_t loop_id = pid.loop_id, local_id = pid.local_id;

	/* owner thread of pid's loop (the same-loop send): the table cannot
	 * be finalised under us, no users reference, a few loads */
	if (XTC__LIKELY(cur != NULL && cur->id == loop_id &&
	                pid.gen != 0 && local_id != 0)) {
		xtc__ptab_t *t = __atomic_load_n(&cur->up.procs,
		                                 __ATOMIC_ACQUIRE);
		xtc__proc_t *c;

		*ref = NULL;
		if (!t || !atomic_load_explicit(&t->live, memory_order_relaxed))
			return NULL;
		c = atomic_load_explicit(
			&t->chunks[local_id >> XTC__PROC_CHUNK_SHIFT],
			memory_order_acquire);
		return c ? &c[local_id & (XTC__PROC_CHUNK - 1)] : NULL;
	}
	return xtc__proc_ref_slow(pid, ref);
}
static inline void xtc__proc_unref(xtc__ptab_t *ref)
{
	if (ref)
		atomic_fetch_sub_explicit(&ref->users, 1, memory_order_release);
}

static inline int xtc__proc_state(xtc__proc_t *p)
{
	return atomic_load_explicit(&p->state, memory_order_acquire);
}

/* Under p->lock. */
static inline int xtc__proc_is(xtc__proc_t *p, xtc_pid_t pid)
{
	return xtc__proc_state(p) == XTC__PROC_ALIVE && p->gen == pid.gen;
}

static inline xtc_pid_t xtc__proc_pid(const xtc__proc_t *p)
{
	xtc_pid_t pid = { p->tab->loop_id, p->local_id, p->gen };
	return pid;
}

/* proc_fault.c: free p's recovery frame (teardown, on the proc's fiber). */
void xtc__proc_fault_free(xtc__proc_t *p);

/* The calling proc's slot, or NULL off a proc. */
static inline xtc__proc_t *xtc__proc_current(void)
{
	xtc_task_t *t = xtc__tls_task;
	return t ? t->proc : NULL;
}

/* Under p->lock (slot ALIVE): wake p's task. On the task's own loop
 * thread this is a run-queue push. Otherwise it returns the loop to hand to
 * xtc__proc_wake_post() once the lock is dropped (NULL: nothing to do). */
static inline xtc_loop_t *xtc__proc_wake_locked(xtc__proc_t *p)
{
	xtc_task_t *t = p->task;
	xtc_loop_t *home;

	if (!t)
		return NULL; /* not started: it will look at its mailbox anyway */
	/* a pinned task stays on its home loop: no read of the task's line,
	 * which its carrier writes at every park; a migratable one is read
	 * once (a migration may move it meanwhile) */
	home = p->migratable ? xtc__task_loop(t) : p->tab->loop;
	if (home == xtc__tls_loop) {
		xtc__task_wake_local(t);
		return NULL;
	}
	if (atomic_exchange_explicit(&p->post_queued, 1, memory_order_acq_rel))
		return NULL; /* a queued post will wake it */
	return home;
}

/* After dropping p->lock: queue p's wake on loop (from
 * xtc__proc_wake_locked). The caller still holds its table reference. */
void xtc__proc_wake_post(xtc__proc_t *p, xtc_loop_t *loop);

/* Under p->lock: wake the proc if it waits on its mailbox. */
static inline xtc_loop_t *xtc__proc_wake_waiter_locked(xtc__proc_t *p)
{
	if (!p->waiting)
		return NULL;
	p->waiting = 0;
	return xtc__proc_wake_locked(p);
}

/* Mailbox side of the slot (proc_mailbox.c). */
int  xtc__mbox_init(xtc__proc_t *p, const xtc_proc_opts_t *opts);
void xtc__msgq_free(xtc__msgq_t *q);
/* Runtime message (EXIT): bypasses the cap. 0 or XTC_E_INVAL (dead pid),
 * XTC_E_NOMEM. Any thread. */
int  xtc__send_sys(xtc_pid_t to, const void *data, size_t size);
/* DOWN delivery: enqueued only if `to` still holds monitor `ref` (which is
 * removed at the same time, under its lock), so nothing arrives after a
 * successful xtc_demonitor. */
int  xtc__send_down(xtc_pid_t to, uint64_t ref, xtc_pid_t who, int reason);
/* Owner: drop queued DOWN messages of monitor `ref`; returns # dropped. */
int  xtc__mbox_flush_ref(xtc__proc_t *p, uint64_t ref);

/* Relationship vectors (proc.c); callers hold the owning slot's lock. */
int  xtc__relv_add(xtc__relv_t *rv, uint64_t ref, xtc_pid_t pid);
int  xtc__relv_del_ref(xtc__relv_t *rv, uint64_t ref, xtc_pid_t *out_pid);

/* Packed runtime messages (decode them with xtc_down_decode /
 * xtc_exit_decode, never by casting). */
#define XTC__MSG_DOWN 'D'
#define XTC__MSG_EXIT 'E'

struct __attribute__((packed)) xtc__down_msg {
	uint8_t kind;
	uint64_t ref;
	xtc_pid_t pid;
	int reason;
};

struct __attribute__((packed)) xtc__exit_msg {
	uint8_t kind;
	xtc_pid_t pid;
	int reason;
};

/* xtc_proc_spawn with an exit hook: on_exit(user, reason) is called exactly
 * once when the proc ends, on whatever thread tears it down (its loop's,
 * normally the proc's own fiber), with reason 0 for a return from fn, the
 * xtc_exit_pid reason for a kill, XTC_E_ABORTED when the loop was
 * finalised before the proc finished (also when it never ran). Not called
 * when the spawn itself fails (the caller still owns user then). The hook
 * must not block, park or call back into this proc. What the Go wrapper's
 * calls (Exec.Go) use to complete a result exactly once. */
int xtc__proc_spawn_hooked(xtc_loop_t *loop, xtc_proc_fn fn, void *arg,
                           const xtc_proc_opts_t *opts,
                           void (*on_exit)(void *user, int reason),
                           void *user, xtc_pid_t *out_pid);

#endif
