/*
 * proc_mailbox.c - bounded per-proc mailboxes: xtc_send, xtc_recv,
 * xtc_recv_match, xtc_recv_correlate, stats, xtc_proc_info, watermark.
 *
 * Model. Each proc slot (proc_int.h) has two FIFO queues of messages:
 *   in    appended by any sender under the slot spinlock;
 *   save  messages a xtc_recv_match has already looked at and passed over.
 *         Everything in `save` arrived before everything in `in`, so taking
 *         save-then-in keeps arrival order. Its links are touched only by
 *         the owning proc; its count only under the lock.
 * The cap bounds in.n + save.n (depth + save queue, as in libxtc); a full
 * mailbox refuses with XTC_E_AGAIN and counts a drop. Runtime messages
 * (EXIT, DOWN) bypass the cap: losing a DOWN would leave a watcher waiting
 * forever.
 *
 * A message is one malloc block: payload at the start (that pointer is
 * what xtc_recv returns, freed with xtc_free or free() in any thread),
 * the queue node at the 16-aligned end. Small ones are fixed-size blocks
 * recycled through a per-thread free list ("small-message cache" below),
 * larger ones a malloc of their size.
 *
 * Wake protocol. A receiver that finds nothing sets slot->waiting under the
 * lock and parks, with preemption deferred from the flag to the park (a
 * preempted task is READY and a wake would be a no-op). A sender that
 * enqueues and sees `waiting` clears it and wakes the task: on the task's
 * loop thread under the lock (a run-queue push, no syscall; an ALIVE slot's
 * task is never reaped), from any other thread by queueing the slot's own
 * post node on the loop inbox after the lock is dropped (so the eventfd
 * write never extends the critical section the receiver spins on), or by
 * handing the wake to the loop's idle carrier when it watches this slot
 * (loop_int.h, watched wakes).
 * Every wake a mailbox wait needs thus comes through the slot lock, so an
 * untimed wait lock-parks (loop_int.h): PARKED is stored under the lock
 * and the waker makes the task READY with plain stores, no fence or CAS
 * on either side (a same-loop round trip pays two lock xchgs, nothing
 * else atomic). Timed waits use the ordinary park (the timer wakes
 * without the lock).
 *
 * Handoff: when the receiver is parked in xtc_recv on an empty mailbox, the
 * sender stores the message in slot->handoff (release) instead of the
 * queue; the woken receiver takes it with an acquire load and no second
 * lock round trip. Only the sender that clears `waiting` may hand off, and
 * only the receiver re-arms it, so the slot never holds two. From another
 * thread, a payload of up to XTC__HOFF_INLINE_MAX bytes is copied into
 * the slot's hbuf instead (handoff then holds an odd tag, not an
 * address): the receiver builds its message from it in its own thread's
 * block cache, and the sender's block goes straight back to its cache.
 *
 * Cache lines. Between two carriers every line a message touches on both
 * sides costs a transfer (~250 ns on the 2-vCPU guest, where the bare
 * ping-pong of one word, bench_xloop's floor, is ~500 ns a round trip).
 * A one-way handoff to a parked receiver used to move seven: slot lines
 * 0 (lock, waiting, task), 2 (handoff, peak), 3 (recv_total) and 4 (the
 * wake's post node), the task's first line (its loop, read for the wake;
 * its carrier writes the state there at every park), the loop's inbox
 * line and the message block. Now the slot's first line holds all the
 * sender touches (proc_int.h: 64-aligned slots), the wake of a pinned
 * proc takes its loop from the table instead of the task, the receiver
 * counts its own receipt (recv_total lives on the owner's line), and the
 * payload rides in that same line: two lines remain, the slot's first
 * and the inbox's. bench_xloop, 11 alternating runs (medians, min-max):
 * 2.32 (2.27-2.42) -> 1.23 (1.15-1.29) us per round trip, floor 0.51 us;
 * xtcbench's crossloop micro 2.05 -> 1.37 us (7 runs).
 * Where the rest goes (rdtsc marks along one one-way handoff, carriers on
 * different cores): the sender until its inbox push, 50-75 ns; push to
 * the idle carrier seeing it, ~300 ns (the floor's one-way: the carrier
 * spins on the inbox word); the carrier from seeing input to the loop
 * step's drain, 150-200 ns (exec_carrier.c: a clock read, the ring and work
 * checks); drain, slot line and wake, ~160 ns; switch and take, ~40 ns.
 * Since then the wake of a receiver parked on a loop whose carrier is
 * idle skips the inbox (loop_int.h, watched wakes; proc.c
 * xtc__proc_wake_post): the carrier polls a flag on the slot's first
 * line, so one line moves per one-way message. bench_xloop, alternating
 * runs, per round trip: carriers sharing a core 323-339 -> 274-285 ns (5
 * runs), on two cores 1126-1215 -> 861-880 ns (4 runs; floor 451-556 ns,
 * so 2.35-2.65x -> 1.56-1.82x the floor).
 * Tried and kept out, no difference above the noise (segment timings
 * within 2%, 11-run medians within 5%): the proc table's `users` count
 * on a line of its own, the inbox's posts_done off the inbox line, a
 * write prefetch of the drained node, a plain load/store for post_queued
 * under the lock instead of the exchange.
 *
 * Rejected: delivering cross-thread messages through the target loop's
 * inbox (the message as the post node, queued by the receiver's
 * carrier): the sender would no longer touch the slot, but then the cap,
 * the dead-pid error, the watermark callback on the sender's thread and
 * the DOWN-after-demonitor check could not be decided at send time, and
 * the slot's line is one transfer against the inbox's one plus the
 * message's. A lock-free MPSC queue for `in` (the cap needs a consistent
 * count anyway, and the lock is uncontended on the ping-pong path); copying
 * into a second buffer on recv (one more allocation per message); a
 * lock-free `in` for same-thread senders next to a locked one for foreign
 * threads (an exact cap across the two needs the lock again, and a
 * migrating proc changes which thread is "same"); switching from a send
 * straight to the woken receiver (a send would become a yield; the
 * receiver runs next anyway once the sender parks in its own recv).
 */
#include "rtcode_int.h" /* first: this file is runtime code */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "base_int.h"
#include "proc_int.h"

/* ---- small-message cache -------------------------------------------------
 * Messages whose payload and node fit in MSG_BLK bytes use fixed-size
 * blocks recycled through a per-thread free list, so the same-thread
 * send/recv/xtc_free cycle costs a few loads and stores instead of a
 * malloc and a free. Every block is an ordinary malloc(MSG_BLK) chunk, so
 * a received buffer may also be released with free(), as libxtc programs
 * do: it then just leaves the cache and a later send mallocs a new one.
 * xtc_free takes back any block whose usable size (malloc_usable_size) is
 * in [MSG_BLK, MSG_BLK_MAX] -- a block its owner gave up serves as well as
 * one of ours -- from any thread: a foreign free feeds that thread's list.
 * A thread's list is bounded (TC_MAX); the surplus, and the whole list at
 * thread exit, goes to a global list (at most GL_MAX blocks, the rest is
 * freed) under a spinlock that refills threads in batches. Under ASan/TSan
 * the cache is off so the sanitizers see every message's lifetime.
 * Cost of the compatibility: xtc_free's malloc_usable_size call against
 * the old one range compare, 885 -> 943 instructions per same-loop
 * ping-pong round trip (cachegrind), +3-4% thread CPU time in 12
 * interleaved runs at load average 14 (a program that frees with free()
 * pays a malloc per message instead: it leaves the cache).
 * Rejected: blocks carved from one reserved address range that xtc_free
 * recognised by address (the earlier design: free() of such a
 * block crashed in glibc with "free(): invalid pointer"); a header with a
 * magic word in front of every payload (xtc_free would have to read before
 * arbitrary malloc pointers); glibc's tcache alone (malloc + free were
 * ~130 instructions per message here). */

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define MSG_CACHE 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define MSG_CACHE 0
#endif
#endif
#ifndef MSG_CACHE
#define MSG_CACHE 1
#endif

#define MSG_BLK      128u                 /* bytes per block */
#define MSG_BLK_MAX  192u                 /* largest usable size taken back */
#define TC_MAX       256u                 /* blocks kept per thread */
#define TC_BATCH     32u                  /* global <-> thread transfer */
#define GL_MAX       65536u               /* blocks kept globally */

struct blk { struct blk *next; };

static struct {
	xtc__spin_t lock;
	struct blk *head;        /* global free list */
	size_t n;
	pthread_once_t once;
	pthread_key_t key;
	int key_ok;
} g_mc = { .once = PTHREAD_ONCE_INIT };

static XTC__TLS __thread struct tcache {
	struct blk *head;
	uint32_t n;
	uint8_t registered;      /* exit destructor installed */
} tc;

static void tc_flush(void *arg);
static void msg_recycle(void *p);

static void mc_init(void)
{
	g_mc.key_ok = pthread_key_create(&g_mc.key, tc_flush) == 0;
	if (g_mc.key_ok) /* xtc_free hands blocks of our size back */
		xtc__alloc_recycler_set(MSG_BLK, MSG_BLK_MAX, msg_recycle);
}

static void chain_free(struct blk *b)
{
	while (b) {
		struct blk *n = b->next;
		free(b);
		b = n;
	}
}

/* Give the chain head..tail (n blocks) to the global list. */
static void global_put(struct blk *head, struct blk *tail, size_t n)
{
	xtc__spin_lock(&g_mc.lock);
	if (g_mc.n + n > GL_MAX) {
		xtc__spin_unlock(&g_mc.lock);
		tail->next = NULL;
		chain_free(head);
		return;
	}
	tail->next = g_mc.head;
	__atomic_store_n(&g_mc.head, head, __ATOMIC_RELAXED);
	g_mc.n += n;
	xtc__spin_unlock(&g_mc.lock);
}

/* Thread exit (pthread key destructor): nothing stays stranded. */
static void tc_flush(void *arg)
{
	struct tcache *c = arg;
	struct blk *tail = c->head;

	if (!tail)
		return;
	while (tail->next)
		tail = tail->next;
	global_put(c->head, tail, c->n);
	c->head = NULL;
	c->n = 0;
}

static void tc_register(void)
{
	pthread_once(&g_mc.once, mc_init);
	if (!tc.registered && g_mc.key_ok) {
		tc.registered = 1;
		pthread_setspecific(g_mc.key, &tc);
	}
}

/* Slow path of a small alloc: a batch from the global list, else one new
 * block. NULL only when malloc fails. */
static __attribute__((noinline)) struct blk *tc_refill(void)
{
	struct blk *b, *last = NULL;
	uint32_t n = 0;

	tc_register();
	if (__atomic_load_n(&g_mc.head, __ATOMIC_RELAXED) != NULL) {
		xtc__spin_lock(&g_mc.lock);
		b = g_mc.head;
		while (b && n < TC_BATCH) {
			last = b;
			b = b->next;
			n++;
		}
		if (n) {
			struct blk *got = g_mc.head;
			__atomic_store_n(&g_mc.head, b, __ATOMIC_RELAXED);
			g_mc.n -= n;
			xtc__spin_unlock(&g_mc.lock);
			last->next = NULL;
			tc.head = got->next;
			tc.n = n - 1;
			return got;
		}
		xtc__spin_unlock(&g_mc.lock);
	}
	return malloc(MSG_BLK);
}

static inline void *blk_get(void)
{
	struct blk *b = tc.head;

	if (XTC__LIKELY(b != NULL)) {
		tc.head = b->next;
		tc.n--;
		return b;
	}
	return tc_refill();
}

/* First free on this thread, or its list is full. */
static __attribute__((noinline)) void recycle_slow(struct blk *b)
{
	if (!tc.registered) {
		tc_register();
		if (!tc.registered) {
			free(b);
			return;
		}
	}
	b->next = tc.head;
	tc.head = b;
	if (++tc.n > TC_MAX) {
		/* keep half: a steady sender/receiver pair stays local */
		struct blk *first = tc.head, *tail = first;
		for (uint32_t i = 1; i < TC_MAX / 2; i++)
			tail = tail->next;
		tc.head = tail->next;
		tc.n -= TC_MAX / 2;
		global_put(first, tail, TC_MAX / 2);
	}
}

/* xtc_free of a block of our size (base.c), any thread. */
static void msg_recycle(void *p)
{
	struct blk *b = p;

	if (XTC__LIKELY(tc.registered && tc.n < TC_MAX)) {
		b->next = tc.head;
		tc.head = b;
		tc.n++;
		return;
	}
	recycle_slow(b);
}

/* ---- messages and queues ------------------------------------------------ */

static inline __attribute__((always_inline)) xtc__msg_t *
msg_new(const void *data, size_t size)
{
	size_t off = XTC__MSG_OFF(size);
	char *base = NULL;
	xtc__msg_t *m;

	if (MSG_CACHE && off + sizeof(xtc__msg_t) <= MSG_BLK)
		base = blk_get();
	if (!base) {
		base = malloc(off + sizeof(xtc__msg_t));
		if (!base)
			return NULL;
	}
	if (size >= 8 && size <= 16) {
		/* two overlapping fixed-size copies: inline, no libc call */
		memcpy(base, data, 8);
		memcpy(base + size - 8, (const char *)data + size - 8, 8);
	} else if (size) {
		memcpy(base, data, size);
	}
	m = (xtc__msg_t *)(base + off);
	m->next = NULL;
	m->size = size;
	m->tag = 0;
	return m;
}

static void msg_free(xtc__msg_t *m)
{
	xtc_free(xtc__msg_data(m));
}

void xtc__msgq_free(xtc__msgq_t *q)
{
	xtc__msg_t *m = q->head;
	while (m) {
		xtc__msg_t *n = m->next;
		msg_free(m);
		m = n;
	}
	memset(q, 0, sizeof *q);
}

static inline void q_push(xtc__msgq_t *q, xtc__msg_t *m)
{
	m->next = NULL;
	if (q->tail)
		q->tail->next = m;
	else
		q->head = m;
	q->tail = m;
	q->n++;
}

static inline xtc__msg_t *q_pop(xtc__msgq_t *q)
{
	xtc__msg_t *m = q->head;
	if (m) {
		q->head = m->next;
		if (!q->head)
			q->tail = NULL;
		q->n--;
	}
	return m;
}

/* Append all of `from` to `to`. */
static void q_splice(xtc__msgq_t *to, xtc__msgq_t *from)
{
	if (!from->head)
		return;
	if (to->tail)
		to->tail->next = from->head;
	else
		to->head = from->head;
	to->tail = from->tail;
	to->n += from->n;
	memset(from, 0, sizeof *from);
}

int xtc__mbox_init(xtc__proc_t *p, const xtc_proc_opts_t *opts)
{
	size_t cap = opts && opts->mailbox_cap ? opts->mailbox_cap
	                                       : XTC_MAILBOX_DEFAULT_CAP;
	int pct = opts ? opts->mailbox_watermark_pct : 0;

	/* in, save and handoff are empty already: chunks start zeroed and a
	 * slot is released only emptied (proc_teardown, spawn_abort) */
	p->cap = (uint32_t)cap;
	p->peak = 0;
	atomic_store_explicit(&p->recv_total, 0, memory_order_relaxed);
	p->drop_total = 0;
	p->wm_fn = pct > 0 ? opts->mailbox_watermark_fn : NULL;
	p->wm_user = pct > 0 ? opts->mailbox_watermark_user : NULL;
	p->wm_level = 0;
	p->mflags = 0;
	if (pct > 0) {
		uint64_t lvl = ((uint64_t)cap * (uint64_t)pct + 99) / 100;
		p->wm_level = lvl ? (uint32_t)lvl : 1;
		p->mflags = XTC__MF_WM;
	}
	return XTC_OK;
}

/* ---- sending ------------------------------------------------------------ */

enum { PUT_USER = 0, PUT_SYS = 1 };

/* n <= XTC__HOFF_INLINE_MAX bytes, without a libc call. */
static inline void copy_small(void *dst, const void *src, size_t n)
{
	if (n >= 8) {
		memcpy(dst, src, 8);
		memcpy((char *)dst + n - 8, (const char *)src + n - 8, 8);
	} else if (n) {
		memcpy(dst, src, n);
	}
}

/* Enqueue m for `to`. On failure the caller still owns m. */
/* Inlined into each sender so `kind` and `down_ref` fold away on the
 * xtc_send path. */
static inline __attribute__((always_inline)) int
mbox_put(xtc_pid_t to, xtc__msg_t *m, int kind, uint64_t down_ref)
{
	void (*wm_fn)(xtc_pid_t, size_t, size_t, void *) = NULL;
	void *wm_user = NULL;
	xtc_loop_t *wl = NULL;
	xtc__msg_t *spent = NULL;
	uint32_t depth = 0, cap = 0;
	xtc__ptab_t *ref;
	xtc__proc_t *o;
	int rc = XTC_OK;

	o = xtc__proc_ref(to, &ref);
	if (!o)
		return XTC_E_INVAL;
	xtc__spin_lock(&o->lock);
	if (!xtc__proc_is(o, to)) {
		rc = XTC_E_INVAL;
	} else if (down_ref && !xtc__relv_del_ref(&o->held, down_ref, NULL)) {
		rc = XTC_E_NOTFOUND; /* demonitored: deliver nothing */
	} else if (kind == PUT_USER && o->waiting != XTC__WAIT_RECV &&
	           o->in.n + o->save.n >= o->cap) {
		/* (a receiver parked in xtc_recv has both queues empty: the
		 * handoff never reads them, they are on another line) */
		o->drop_total++;
		rc = XTC_E_AGAIN;
	} else {
		if (o->waiting == XTC__WAIT_RECV) {
			/* receiver parked on an empty mailbox: hand it over
			 * (it counts the receipt itself: recv_total is the
			 * owner's, off this line). From another thread a
			 * small payload goes inline: the receiver then
			 * reads no line of ours but this one. */
			xtc__msg_t *h = m;
			if (kind == PUT_USER && ref != NULL &&
			    m->size <= XTC__HOFF_INLINE_MAX) {
				copy_small(o->hbuf, xtc__msg_data(m), m->size);
				h = xtc__hoff_inline(m->size);
				spent = m;
			}
			atomic_store_explicit(&o->handoff, h,
			                      memory_order_release);
			depth = 1;
			if (!(o->mflags & XTC__MF_PEAKED)) {
				o->mflags |= XTC__MF_PEAKED;
				if (o->peak < 1)
					o->peak = 1;
			}
		} else {
			q_push(&o->in, m);
			depth = o->in.n + o->save.n;
			if (depth > o->peak)
				o->peak = depth;
		}
		if ((o->mflags & (XTC__MF_WM | XTC__MF_WM_FIRED)) ==
		    XTC__MF_WM && depth >= o->wm_level) {
			/* a handoff leaves the depth at 0 at once: stay armed */
			if (o->waiting != XTC__WAIT_RECV)
				o->mflags |= XTC__MF_WM_FIRED;
			wm_fn = o->wm_fn;
			wm_user = o->wm_user;
			cap = o->cap;
		}
		wl = xtc__proc_wake_waiter_locked(o);
	}
	xtc__spin_unlock(&o->lock);
	if (wl)
		xtc__proc_wake_post(o, wl);
	xtc__proc_unref(ref);
	if (spent)
		msg_free(spent); /* back to this thread's cache, still hot */
	if (wm_fn)
		wm_fn(to, depth, cap, wm_user);
	return rc;
}

int xtc_send(xtc_pid_t to, const void *data, size_t size)
{
	xtc__msg_t *m;
	int rc;

	if ((!data && size) || size > XTC__MSG_MAX || xtc_pid_is_none(to))
		return XTC_E_INVAL;
	m = msg_new(data, size);
	if (!m)
		return XTC_E_NOMEM;
	rc = mbox_put(to, m, PUT_USER, 0);
	if (rc != XTC_OK)
		msg_free(m);
	return rc;
}

int xtc__send_sys(xtc_pid_t to, const void *data, size_t size)
{
	xtc__msg_t *m = msg_new(data, size);
	int rc;

	if (!m)
		return XTC_E_NOMEM;
	rc = mbox_put(to, m, PUT_SYS, 0);
	if (rc != XTC_OK)
		msg_free(m);
	return rc;
}

int xtc__send_down(xtc_pid_t to, uint64_t ref, xtc_pid_t who, int reason)
{
	struct xtc__down_msg d;
	xtc__msg_t *m;
	int rc;

	d.kind = XTC__MSG_DOWN;
	d.ref = ref;
	d.pid = who;
	d.reason = reason;
	m = msg_new(&d, sizeof d);
	if (!m)
		return XTC_E_NOMEM;
	m->tag = ref;
	rc = mbox_put(to, m, PUT_SYS, ref);
	if (rc != XTC_OK)
		msg_free(m);
	return rc;
}

/* ---- receiving ---------------------------------------------------------- */

/* The owner proc is recv_total's only writer. */
static inline void count_recv(xtc__proc_t *p)
{
	atomic_store_explicit(&p->recv_total,
	    atomic_load_explicit(&p->recv_total, memory_order_relaxed) + 1,
	    memory_order_relaxed);
}

/* Under p->lock, after a message left the mailbox. */
static inline void took_locked(xtc__proc_t *p)
{
	count_recv(p);
	if ((p->mflags & XTC__MF_WM_FIRED) &&
	    p->in.n + p->save.n < p->wm_level)
		p->mflags &= (uint8_t)~XTC__MF_WM_FIRED; /* re-arm: next
		                                          * crossing reports */
}

static inline int deliver(xtc__msg_t *m, void **out, size_t *out_size)
{
	*out = xtc__msg_data(m);
	if (out_size)
		*out_size = m->size;
	return XTC_OK;
}

/* Take the handoff m (the owner, with `waiting` clear: no sender writes
 * it or hbuf until the owner re-arms). An inline payload becomes a
 * message of this thread; if that allocation fails the handoff stays for
 * the next xtc_recv. */
static int take_handoff(xtc__proc_t *p, xtc__msg_t *m, void **out,
                        size_t *out_size)
{
	if (xtc__hoff_is_inline(m)) {
		m = msg_new(p->hbuf, xtc__hoff_inline_size(m));
		if (!m)
			return XTC_E_NOMEM;
	}
	atomic_store_explicit(&p->handoff, NULL, memory_order_relaxed);
	count_recv(p);
	return deliver(m, out, out_size);
}

/* Park until a sender wakes us (or a timeout/kill). `left` < 0 = forever.
 * Called with p->lock held; returns with it released. */
static inline __attribute__((always_inline)) int
wait_mail_unlock(xtc_task_t *t, xtc__proc_t *p, int64_t left, int how)
{
	int rc;

	t->fiber.nopreempt++; /* see "Wake protocol" above */
	p->waiting = (uint8_t)how;
	if (left < 0 && xtc__park_prepublish_ok(t)) {
		/* every waker of a mailbox wait takes p->lock: park under
		 * it, no fence or CAS on either side (loop_int.h) */
		xtc__park_lock_publish(t);
		xtc__spin_unlock(&p->lock);
		/* an idle carrier polls our line for the wake (loop_int.h,
		 * watched wakes) */
		xtc__loop_watch_set(xtc__tls_loop, &p->watch, &p->post);
		rc = xtc__park_published();
		xtc__loop_watch_clear(xtc__tls_loop, &p->post);
	} else {
		xtc__spin_unlock(&p->lock);
		rc = xtc__park(left, -1, 0, NULL);
	}
	t->fiber.nopreempt--;
	return rc;
}

/* Time left until deadline: > 0, or 0 when expired. */
static inline int64_t time_left(int64_t deadline)
{
	int64_t left = deadline - xtc__now();
	return left > 0 ? left : 0;
}

int xtc_recv(void **out, size_t *out_size, int64_t timeout_ns)
{
	xtc_task_t *t = xtc__tls_task;
	xtc__proc_t *p = t ? t->proc : NULL;
	int64_t deadline = timeout_ns > 0 ?
	    xtc__deadline_after(xtc__now(), timeout_ns) : 0;
	xtc__msg_t *m;

	if (!out)
		return XTC_E_INVAL;
	*out = NULL;
	if (!p || p->in_match)
		return XTC_E_INVAL;
	for (;;) {
		int64_t left = timeout_ns < 0 ? -1 : 0;
		int rc;

		if (timeout_ns > 0)
			left = time_left(deadline);
		xtc__spin_lock(&p->lock);
		p->waiting = 0;
		m = atomic_load_explicit(&p->handoff, memory_order_relaxed);
		if (m) {
			/* handed off between our wake-up and this lock */
			rc = take_handoff(p, m, out, out_size);
			xtc__spin_unlock(&p->lock);
			return rc;
		}
		m = q_pop(&p->save);
		if (!m)
			m = q_pop(&p->in);
		if (m) {
			took_locked(p);
			xtc__spin_unlock(&p->lock);
			return deliver(m, out, out_size);
		}
		if (left == 0) {
			xtc__spin_unlock(&p->lock);
			return XTC_E_AGAIN;
		}
		rc = wait_mail_unlock(t, p, left, XTC__WAIT_RECV);
		m = atomic_load_explicit(&p->handoff, memory_order_acquire);
		if (m) /* no other writer: the sender cleared `waiting` */
			return take_handoff(p, m, out, out_size);
		if (rc < 0 && rc != XTC_E_AGAIN)
			return rc; /* XTC_E_DEADLK inside a Go callback, ... */
		/* woken, timed out or spurious: re-check the queue first */
	}
}

/* ---- selective receive -------------------------------------------------
 * recv_match and recv_correlate scan the save queue with a cursor (prev)
 * that survives refills, so each message is looked at once however long
 * the wait. Links of the save queue are owner-only; its count is shared
 * with senders (the cap covers both queues), hence the lock around takes. */

/* Unlink m (after prev) from the save queue. */
static void save_take(xtc__proc_t *p, xtc__msg_t *prev, xtc__msg_t *m)
{
	xtc__spin_lock(&p->lock);
	if (prev)
		prev->next = m->next;
	else
		p->save.head = m->next;
	if (p->save.tail == m)
		p->save.tail = prev;
	p->save.n--;
	took_locked(p);
	xtc__spin_unlock(&p->lock);
}

/* The scan reached the end of the save queue: move newer messages into it
 * or wait for some. 0 = rescan from the cursor (new messages, a wake or a
 * timeout: the next call reports it); XTC_E_AGAIN when the time is up;
 * other negative codes from the wait (XTC_E_DEADLK in a Go callback...). */
static int save_refill(xtc_task_t *t, xtc__proc_t *p, int64_t timeout_ns,
                       int64_t deadline)
{
	int64_t left = timeout_ns < 0 ? -1 : 0;
	int rc;

	if (timeout_ns > 0)
		left = time_left(deadline);
	xtc__spin_lock(&p->lock);
	p->waiting = 0;
	if (p->in.n) {
		q_splice(&p->save, &p->in);
		xtc__spin_unlock(&p->lock);
		return 0;
	}
	if (left == 0) {
		xtc__spin_unlock(&p->lock);
		return XTC_E_AGAIN;
	}
	rc = wait_mail_unlock(t, p, left, XTC__WAIT_WAKE);
	return rc < 0 && rc != XTC_E_AGAIN ? rc : 0;
}

int xtc_recv_match(xtc_match_fn match_fn, void *user_data, void **out,
                   size_t *out_size, int64_t timeout_ns)
{
	xtc_task_t *t = xtc__tls_task;
	xtc__proc_t *p = t ? t->proc : NULL;
	int64_t deadline = timeout_ns > 0 ?
	    xtc__deadline_after(xtc__now(), timeout_ns) : 0;
	xtc__msg_t *prev = NULL, *m;
	int rc;

	if (!out)
		return XTC_E_INVAL;
	*out = NULL;
	if (!p || !match_fn || p->in_match)
		return XTC_E_INVAL;
	m = p->save.head;
	for (;;) {
		while (m) {
			int take;
			p->in_match = 1;
			take = match_fn(xtc__msg_data(m), m->size, user_data);
			p->in_match = 0;
			if (take) {
				save_take(p, prev, m);
				return deliver(m, out, out_size);
			}
			prev = m;
			m = m->next;
		}
		rc = save_refill(t, p, timeout_ns, deadline);
		if (rc < 0)
			return rc;
		m = prev ? prev->next : p->save.head;
	}
}

/* xtc_recv_correlate is recv_match with a built-in prefix predicate, taking
 * n_expected messages in one scan. No user code runs during the scan, so
 * in_match is not raised. */
static inline int corr_hit(const xtc__msg_t *m, const void *v, size_t n)
{
	return m->size >= n &&
	       (n == 0 || memcmp(xtc__msg_data((xtc__msg_t *)m), v, n) == 0);
}

int xtc_recv_correlate(const void *corr_value, size_t corr_size,
                       int n_expected, xtc_msg_t *out_msgs, int *out_n,
                       int64_t timeout_ns)
{
	xtc_task_t *t = xtc__tls_task;
	xtc__proc_t *p = t ? t->proc : NULL;
	int64_t deadline = timeout_ns > 0 ?
	    xtc__deadline_after(xtc__now(), timeout_ns) : 0;
	xtc__msg_t *prev = NULL, *m;
	int got = 0, rc;

	if (!out_n)
		return XTC_E_INVAL;
	*out_n = 0;
	if (!p || !out_msgs || n_expected < 1 || (corr_size && !corr_value) ||
	    p->in_match)
		return XTC_E_INVAL;
	m = p->save.head;
	for (;;) {
		while (m) {
			xtc__msg_t *next = m->next;
			if (corr_hit(m, corr_value, corr_size)) {
				save_take(p, prev, m);
				out_msgs[got].data = xtc__msg_data(m);
				out_msgs[got].size = m->size;
				*out_n = ++got;
				if (got == n_expected)
					return XTC_OK;
			} else {
				prev = m;
			}
			m = next;
		}
		rc = save_refill(t, p, timeout_ns, deadline);
		if (rc < 0)
			return rc; /* *out_n already counts what was taken */
		m = prev ? prev->next : p->save.head;
	}
}

int xtc__mbox_flush_ref(xtc__proc_t *p, uint64_t ref)
{
	xtc__msgq_t *qs[2] = { &p->save, &p->in };
	int n = 0;

	xtc__spin_lock(&p->lock);
	for (int i = 0; i < 2; i++) {
		xtc__msgq_t *q = qs[i];
		xtc__msg_t *prev = NULL, *m = q->head;
		while (m) {
			xtc__msg_t *next = m->next;
			if (m->tag == ref) {
				if (prev)
					prev->next = next;
				else
					q->head = next;
				if (q->tail == m)
					q->tail = prev;
				q->n--;
				msg_free(m);
				n++;
			} else {
				prev = m;
			}
			m = next;
		}
	}
	xtc__spin_unlock(&p->lock);
	return n;
}

/* Under o->lock, o alive. */
static void stats_locked(xtc__proc_t *o, xtc_mailbox_stats_t *out)
{
	out->depth = o->in.n + o->save.n +
	             (atomic_load_explicit(&o->handoff,
	                                   memory_order_relaxed) != NULL);
	out->saved = o->save.n;
	out->peak = o->peak;
	out->cap = o->cap;
	out->recv_total = atomic_load_explicit(&o->recv_total,
	                                       memory_order_relaxed);
	out->drop_total = o->drop_total;
}

/* xtc_proc_info: under the slot lock, the mailbox counters plus the slot's
 * identity fields (name, migratable: both set at spawn). */
int xtc_proc_info(xtc_pid_t pid, xtc_proc_info_t *out)
{
	xtc_mailbox_stats_t st;
	xtc__ptab_t *ref;
	xtc__proc_t *o;
	int rc = XTC_E_INVAL;

	if (!out || xtc_pid_is_none(pid))
		return XTC_E_INVAL;
	o = xtc__proc_ref(pid, &ref);
	if (!o)
		return XTC_E_INVAL;
	xtc__spin_lock(&o->lock);
	if (xtc__proc_is(o, pid)) {
		stats_locked(o, &st);
		memset(out, 0, sizeof *out);
		out->alive = 1;
		out->kill_pending = o->kill_pending != 0;
		out->mbox_len = st.depth;
		out->mbox_saved = st.saved;
		out->mbox_peak = st.peak;
		out->mbox_cap = st.cap;
		out->recv_total = st.recv_total;
		out->drop_total = st.drop_total;
		out->name = o->name;
		out->migratable = o->migratable;
		out->loop_id = pid.loop_id;
		rc = XTC_OK;
	}
	xtc__spin_unlock(&o->lock);
	xtc__proc_unref(ref);
	return rc;
}

/* The mailbox counters are a subset of xtc_proc_info. */
int xtc_proc_mailbox_stats(xtc_pid_t pid, xtc_mailbox_stats_t *out)
{
	xtc_proc_info_t in;
	int rc;

	if (!out)
		return XTC_E_INVAL;
	rc = xtc_proc_info(pid, &in);
	if (rc != XTC_OK)
		return rc;
	out->depth = in.mbox_len;
	out->saved = in.mbox_saved;
	out->peak = in.mbox_peak;
	out->cap = in.mbox_cap;
	out->recv_total = in.recv_total;
	out->drop_total = in.drop_total;
	return XTC_OK;
}
