/*
 * mailbox.c - bounded per-proc mailboxes: xtc_send, xtc_recv,
 * xtc_recv_match, stats, watermark.
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
 * A message is one malloc: payload at the start (that pointer is what
 * xtc_recv returns, so xtc_free works on it), the queue node at the
 * 16-aligned end. glibc's per-thread cache makes the same-thread
 * send/recv/free cycle allocation-cheap, so no private free list: the
 * receiver frees buffers itself, in any thread, with xtc_free.
 *
 * Wake protocol. A receiver that finds nothing sets slot->waiting under the
 * lock and parks, with preemption deferred from the flag to the park (a
 * preempted task is READY and a wake would be a no-op). A sender that
 * enqueues and sees `waiting` clears it and wakes the task: on the task's
 * loop thread under the lock (a run-queue push, no syscall; an ALIVE slot's
 * task is never reaped), from any other thread by queueing the slot's own
 * post node on the loop inbox after the lock is dropped (so the eventfd
 * write never extends the critical section the receiver spins on).
 *
 * Handoff: when the receiver is parked in xtc_recv on an empty mailbox, the
 * sender stores the message in slot->handoff (release) instead of the
 * queue; the woken receiver takes it with an acquire load and no second
 * lock round trip. Only the sender that clears `waiting` may hand off, and
 * only the receiver re-arms it, so the slot never holds two.
 *
 * Rejected: a lock-free MPSC queue for `in` (the cap needs a consistent
 * count anyway, and the lock is uncontended on the ping-pong path); copying
 * into a second buffer on recv (one more allocation per message).
 */
#include <stdlib.h>
#include <string.h>

#include "proc_int.h"

/* ---- messages and queues ------------------------------------------------ */

static xtc__msg_t *msg_new(const void *data, size_t size)
{
	size_t off = XTC__MSG_OFF(size);
	char *base = malloc(off + sizeof(xtc__msg_t));
	xtc__msg_t *m;

	if (!base)
		return NULL;
	if (size)
		memcpy(base, data, size);
	m = (xtc__msg_t *)(base + off);
	m->next = NULL;
	m->size = size;
	m->tag = 0;
	return m;
}

static void msg_free(xtc__msg_t *m)
{
	free(xtc__msg_data(m));
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

	memset(&p->in, 0, sizeof p->in);
	memset(&p->save, 0, sizeof p->save);
	p->cap = (uint32_t)cap;
	p->peak = 0;
	p->recv_total = 0;
	p->drop_total = 0;
	p->wm_fired = 0;
	p->wm_fn = pct > 0 ? opts->mailbox_watermark_fn : NULL;
	p->wm_user = pct > 0 ? opts->mailbox_watermark_user : NULL;
	p->wm_level = 0;
	if (pct > 0) {
		uint64_t lvl = ((uint64_t)cap * (uint64_t)pct + 99) / 100;
		p->wm_level = lvl ? (uint32_t)lvl : 1;
	}
	return XTC_OK;
}

/* ---- sending ------------------------------------------------------------ */

enum { PUT_USER = 0, PUT_SYS = 1 };

/* Enqueue m for `to`. On failure the caller still owns m. */
static int mbox_put(xtc_pid_t to, xtc__msg_t *m, int kind, uint64_t down_ref)
{
	void (*wm_fn)(xtc_pid_t, size_t, size_t, void *) = NULL;
	void *wm_user = NULL;
	xtc_loop_t *wl = NULL;
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
	} else if (kind == PUT_USER && o->in.n + o->save.n >= o->cap) {
		o->drop_total++;
		rc = XTC_E_AGAIN;
	} else {
		if (o->waiting == XTC__WAIT_RECV) {
			/* receiver parked on an empty mailbox: hand it over */
			atomic_store_explicit(&o->handoff, m,
			                      memory_order_release);
			o->recv_total++;
			depth = 1;
		} else {
			q_push(&o->in, m);
			depth = o->in.n + o->save.n;
		}
		if (depth > o->peak)
			o->peak = depth;
		if (o->wm_level && !o->wm_fired && depth >= o->wm_level) {
			/* a handoff leaves the depth at 0 at once: stay armed */
			o->wm_fired = o->waiting != XTC__WAIT_RECV;
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

/* Under p->lock, after a message left the mailbox. */
static inline void took_locked(xtc__proc_t *p)
{
	p->recv_total++;
	if (p->wm_fired && p->in.n + p->save.n < p->wm_level)
		p->wm_fired = 0; /* re-arm: next crossing reports again */
}

static inline int deliver(xtc__msg_t *m, void **out, size_t *out_size)
{
	*out = xtc__msg_data(m);
	if (out_size)
		*out_size = m->size;
	return XTC_OK;
}

/* Park until a sender wakes us (or a timeout/kill). `left` < 0 = forever.
 * Called with p->lock held; returns with it released. */
static int wait_mail_unlock(xtc_task_t *t, xtc__proc_t *p, int64_t left,
                            int how)
{
	int rc;

	t->fiber.nopreempt++; /* see "Wake protocol" above */
	p->waiting = (uint8_t)how;
	xtc__spin_unlock(&p->lock);
	rc = xtc__park(left, -1, 0, NULL);
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
	int64_t deadline = timeout_ns > 0 ? xtc__now() + timeout_ns : 0;
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
			atomic_store_explicit(&p->handoff, NULL,
			                      memory_order_relaxed);
			xtc__spin_unlock(&p->lock);
			return deliver(m, out, out_size);
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
		if (m) {
			/* no other writer: the sender cleared `waiting` */
			atomic_store_explicit(&p->handoff, NULL,
			                      memory_order_relaxed);
			return deliver(m, out, out_size);
		}
		if (rc < 0 && rc != XTC_E_AGAIN)
			return rc; /* XTC_E_DEADLK inside a Go callback, ... */
		/* woken, timed out or spurious: re-check the queue first */
	}
}

int xtc_recv_match(xtc_match_fn match_fn, void *user_data, void **out,
                   size_t *out_size, int64_t timeout_ns)
{
	xtc_task_t *t = xtc__tls_task;
	xtc__proc_t *p = t ? t->proc : NULL;
	int64_t deadline = timeout_ns > 0 ? xtc__now() + timeout_ns : 0;
	xtc__msg_t *prev = NULL, *m;

	if (!out)
		return XTC_E_INVAL;
	*out = NULL;
	if (!p || !match_fn || p->in_match)
		return XTC_E_INVAL;
	m = p->save.head;
	for (;;) {
		int64_t left;
		int rc;

		/* scan what we have not looked at yet (owner-only links) */
		while (m) {
			int take;
			p->in_match = 1;
			take = match_fn(xtc__msg_data(m), m->size, user_data);
			p->in_match = 0;
			if (take) {
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
				return deliver(m, out, out_size);
			}
			prev = m;
			m = m->next;
		}
		left = timeout_ns < 0 ? -1 : 0;
		if (timeout_ns > 0)
			left = time_left(deadline);
		xtc__spin_lock(&p->lock);
		p->waiting = 0;
		if (p->in.n) {
			/* newer messages join the save queue, then get scanned */
			q_splice(&p->save, &p->in);
			xtc__spin_unlock(&p->lock);
			m = prev ? prev->next : p->save.head;
			continue;
		}
		if (left == 0) {
			xtc__spin_unlock(&p->lock);
			return XTC_E_AGAIN;
		}
		rc = wait_mail_unlock(t, p, left, XTC__WAIT_WAKE);
		if (rc < 0 && rc != XTC_E_AGAIN)
			return rc;
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

int xtc_proc_mailbox_stats(xtc_pid_t pid, xtc_mailbox_stats_t *out)
{
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
		out->depth = o->in.n + o->save.n +
		             (atomic_load_explicit(&o->handoff,
		                                   memory_order_relaxed) != NULL);
		out->saved = o->save.n;
		out->peak = o->peak;
		out->cap = o->cap;
		out->recv_total = o->recv_total;
		out->drop_total = o->drop_total;
		rc = XTC_OK;
	}
	xtc__spin_unlock(&o->lock);
	xtc__proc_unref(ref);
	return rc;
}
