/*
 * proc.c - processes: fibers with a pid, links, monitors and exit.
 *
 * Model. A proc is a fiber task (xtc__task_spawn_fiber) whose t->proc points
 * at a slot in its home loop's table. A pid is {loop id, local id, gen}.
 * Lookup from any thread: global table indexed by loop id -> the loop's
 * table -> chunk -> slot, then gen/state are checked under the slot lock.
 * On the owner thread the global step is skipped (TLS current loop).
 *
 * Exit. Returning from the body, xtc_exit_self and a kill (xtc_exit_pid sets
 * a flag that loop.c acts on at the next yield/park by calling
 * xtc__proc_resumed) all run proc_teardown on the proc's own fiber:
 *   1. under the slot lock: ALIVE -> DEAD and gen bumped (every pid of it
 *      is stale: sends, links, kills now fail), take the mailbox (queues
 *      and a pending handoff), links, watchers and held monitors out;
 *   2. free undelivered messages;
 *   3. links: remove ourselves from each peer, EXIT message if reason != 0;
 *      watchers: DOWN message (only if the watcher still holds the ref);
 *      held monitors: remove our watcher entry from each target;
 *   4. slot FREE and back on the free list; then the fiber finishes and
 *      loop.c reaps the task (stack back to the cache).
 * Steps 2-3 are skipped when nothing is there (no vector buffer, no queued
 * message): the common proc has neither. A FREE slot therefore always has
 * empty queues, no handoff and empty vectors (spawn_abort empties them
 * too), so a spawn does not clear them again (xtc__mbox_init).
 * Loop fini runs the same teardown (reason XTC_E_ABORTED) for procs that
 * never finished, from the task cleanup hook, after closing the table.
 *
 * Table lifetime. Foreign threads increment tab->users before reading
 * tab->live; fini clears live and waits for users to drain, then frees the
 * chunks, clears the global entry and puts the table header (2 KiB) on a
 * free list that the next loop to spawn a proc takes, whatever its id: the
 * headers in existence are bounded by the loops alive at once, not by the
 * loop ids ever used (ids go round all 65535 values). Headers are never
 * returned to malloc: a foreign lookup may still hold a pointer it read
 * before the entry was cleared, and type-stable memory keeps its
 * users/live/loop_id check valid (a recycled header is live again only
 * under another loop's id, or under the same id with a higher gen floor).
 * What must outlive a loop is only its gen floor, one word per loop id
 * (g_gen_floor): slots of the next loop with that id start above it, so
 * old pids stay stale.
 *
 * Cross-thread wakes never run under a slot lock: each slot embeds a post
 * node queued on the task's loop after the lock is dropped (proc_post_fn).
 *
 * Limits: 65535 live procs per loop (local ids); link/monitor sets are
 * small vectors, scanned linearly (fine for tens, slow for a proc holding
 * 10^5 monitors).
 *
 * Alternatives rejected:
 *  - slot pointers in pids / refcounted procs: a pid must stay a plain
 *    value that can be checked stale forever;
 *  - one global proc lock: every send of every loop would contend on it;
 *  - longjmp to unwind exit: xtc__task_exit already abandons the frames,
 *    and a jmp_buf per proc costs 200 bytes of stack.
 */
#include "rtcode_int.h" /* first: this file is runtime code */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proc_int.h"
#include "sched_int.h"

static pthread_mutex_t g_tab_mu = PTHREAD_MUTEX_INITIALIZER;
static xtc__ptab_t *_Atomic g_tabs[65536];
/* under g_tab_mu: the gen floor of each loop id, the recycled headers and
 * how many headers exist (xtc__proc_tab_headers) */
static uint32_t g_gen_floor[65536];
static xtc__ptab_t *g_tab_free;
static int g_tab_headers;
static atomic_uint_fast64_t g_next_ref = 1;

static uint64_t new_ref(void)
{
	return atomic_fetch_add_explicit(&g_next_ref, 1, memory_order_relaxed);
}

/* ---- relationship vectors ----------------------------------------------- */

int xtc__relv_add(xtc__relv_t *rv, uint64_t ref, xtc_pid_t pid)
{
	if (rv->n == rv->cap) {
		uint32_t cap = rv->cap ? rv->cap * 2 : 2;
		xtc__rel_t *v = realloc(rv->v, cap * sizeof *v);
		if (!v)
			return XTC_E_NOMEM;
		rv->v = v;
		rv->cap = cap;
	}
	rv->v[rv->n].ref = ref;
	rv->v[rv->n].pid = pid;
	rv->n++;
	return XTC_OK;
}

static int relv_find_pid(const xtc__relv_t *rv, xtc_pid_t pid)
{
	for (uint32_t i = 0; i < rv->n; i++)
		if (xtc_pid_eq(rv->v[i].pid, pid))
			return (int)i;
	return -1;
}

static void relv_del_at(xtc__relv_t *rv, uint32_t i)
{
	rv->v[i] = rv->v[--rv->n];
}

int xtc__relv_del_ref(xtc__relv_t *rv, uint64_t ref, xtc_pid_t *out_pid)
{
	for (uint32_t i = 0; i < rv->n; i++) {
		if (rv->v[i].ref == ref) {
			if (out_pid)
				*out_pid = rv->v[i].pid;
			relv_del_at(rv, i);
			return 1;
		}
	}
	return 0;
}

static void relv_del_pid(xtc__relv_t *rv, xtc_pid_t pid)
{
	int i = relv_find_pid(rv, pid);
	if (i >= 0)
		relv_del_at(rv, (uint32_t)i);
}

static void relv_free(xtc__relv_t *rv)
{
	free(rv->v);
	rv->v = NULL;
	rv->n = rv->cap = 0;
}

/* ---- tables ------------------------------------------------------------- */

static xtc__ptab_t *tab_of(xtc_loop_t *loop)
{
	return __atomic_load_n(&loop->up.procs, __ATOMIC_ACQUIRE);
}

static xtc__ptab_t *tab_get(xtc_loop_t *loop)
{
	xtc__ptab_t *t = tab_of(loop);
	if (XTC__LIKELY(t != NULL))
		return t;
	pthread_mutex_lock(&g_tab_mu);
	t = tab_of(loop);
	if (!t) {
		t = g_tab_free;
		if (t) {
			g_tab_free = t->next_tab;
		} else if ((t = aligned_alloc(_Alignof(xtc__ptab_t),
		                              sizeof *t)) != NULL) {
			memset(t, 0, sizeof *t); /* `users` is line-aligned */
			g_tab_headers++;
		}
		if (t) {
			/* a fresh header, or one a finalised loop left
			 * (chunks freed, live 0); `users` is left alone: a
			 * stale foreign lookup may still hold it */
			t->next_tab = NULL;
			t->loop = loop;
			t->loop_id = loop->id;
			t->hwm = 1;
			t->free_head = 0;
			t->local_head = 0;
			t->local_n = 0;
			t->gen_floor = g_gen_floor[loop->id];
			atomic_store(&t->live, 1);
			atomic_store_explicit(&g_tabs[loop->id], t,
			                      memory_order_release);
			__atomic_store_n(&loop->up.procs, t,
			                 __ATOMIC_RELEASE);
		}
	}
	pthread_mutex_unlock(&g_tab_mu);
	return t;
}

int xtc__proc_tab_headers(void)
{
	int n;

	pthread_mutex_lock(&g_tab_mu);
	n = g_tab_headers;
	pthread_mutex_unlock(&g_tab_mu);
	return n;
}

/* The general lookup; proc_int.h inlines the owner-thread case. */
xtc__proc_t *xtc__proc_ref_slow(xtc_pid_t pid, xtc__ptab_t **ref)
{
	xtc_loop_t *cur = xtc__tls_loop;
	xtc__ptab_t *t;
	xtc__proc_t *c;

	*ref = NULL;
	if (pid.gen == 0 || pid.local_id == 0 || pid.loop_id == 0)
		return NULL;
	if (cur && cur->id == pid.loop_id) {
		/* owner thread: the table cannot be finalised under us */
		t = tab_of(cur);
		if (!t || !atomic_load_explicit(&t->live, memory_order_relaxed))
			return NULL;
	} else {
		t = atomic_load_explicit(&g_tabs[pid.loop_id],
		                         memory_order_acquire);
		if (!t)
			return NULL;
		atomic_fetch_add(&t->users, 1);
		/* a header read before its loop's fini cleared the entry may
		 * have been recycled for another loop since: live and under
		 * our loop id, or not ours (loop_id is stored before live) */
		if (!atomic_load(&t->live) || t->loop_id != pid.loop_id) {
			atomic_fetch_sub(&t->users, 1);
			return NULL;
		}
		*ref = t;
	}
	c = atomic_load_explicit(&t->chunks[pid.local_id >> XTC__PROC_CHUNK_SHIFT],
	                         memory_order_acquire);
	if (!c) {
		xtc__proc_unref(*ref);
		*ref = NULL;
		return NULL;
	}
	return &c[pid.local_id & (XTC__PROC_CHUNK - 1)];
}

static void proc_post_fn(xtc_loop_t *loop, xtc__post_t *n);

#define LOCAL_FREE_MAX 64u

static xtc__proc_t *slot_at(xtc__ptab_t *t, uint32_t id)
{
	xtc__proc_t *c = atomic_load_explicit(&t->chunks[id >> XTC__PROC_CHUNK_SHIFT],
	                                      memory_order_relaxed);
	return &c[id & (XTC__PROC_CHUNK - 1)];
}

static xtc__proc_t *slot_alloc(xtc__ptab_t *t, int *err)
{
	xtc__proc_t *p = NULL, *c;
	uint32_t id;

	if (t->loop == xtc__tls_loop && t->local_head) {
		p = slot_at(t, t->local_head);
		t->local_head = p->next_free;
		t->local_n--;
		return p;
	}
	xtc__spin_lock(&t->lock);
	id = t->free_head;
	if (id) {
		p = slot_at(t, id);
		t->free_head = p->next_free;
	} else if (t->hwm > XTC__PROC_MAX_LOCAL) {
		*err = XTC_E_RESOURCE;
	} else {
		id = t->hwm;
		c = atomic_load_explicit(&t->chunks[id >> XTC__PROC_CHUNK_SHIFT],
		                         memory_order_relaxed);
		if (!c) {
			/* rare (every 256 ids): allocate under the spinlock
			 * rather than add a second lock to the spawn path */
			/* 64-aligned: each slot's first line is its own */
			c = aligned_alloc(64, XTC__PROC_CHUNK * sizeof *c);
			if (!c) {
				*err = XTC_E_NOMEM;
				goto out;
			}
			memset(c, 0, XTC__PROC_CHUNK * sizeof *c);
			for (uint32_t i = 0; i < XTC__PROC_CHUNK; i++) {
				c[i].gen = t->gen_floor + 1;
				c[i].local_id = (uint16_t)((id & ~(XTC__PROC_CHUNK - 1)) + i);
				c[i].tab = t;
				c[i].post.fn = proc_post_fn;
			}
			atomic_store_explicit(&t->chunks[id >> XTC__PROC_CHUNK_SHIFT],
			                      c, memory_order_release);
		}
		p = &c[id & (XTC__PROC_CHUNK - 1)];
		t->hwm++;
	}
out:
	xtc__spin_unlock(&t->lock);
	return p;
}

/* Under p->lock: the proc is dead; every pid naming it is stale from now. */
static void slot_die_locked(xtc__proc_t *p)
{
	atomic_store_explicit(&p->state, XTC__PROC_DEAD, memory_order_relaxed);
	p->gen = p->gen + 1 ? p->gen + 1 : 1;
}

/* The slot is DEAD (gen already bumped) and emptied. Lookups only look
 * further than state/gen for an ALIVE slot, so no slot lock is needed. */
static void slot_release(xtc__proc_t *p)
{
	xtc__ptab_t *t = p->tab;

	p->task = NULL;
	atomic_store_explicit(&p->state, XTC__PROC_FREE, memory_order_release);
	if (t->loop == xtc__tls_loop && t->local_n < LOCAL_FREE_MAX) {
		p->next_free = t->local_head;
		t->local_head = p->local_id;
		t->local_n++;
		return;
	}
	xtc__spin_lock(&t->lock);
	p->next_free = t->free_head;
	t->free_head = p->local_id;
	xtc__spin_unlock(&t->lock);
}

/* Loop thread: the slot's cross-thread wake arrives. The proc may have
 * exited, or the slot been reused, meanwhile: an extra wake is harmless. */
static void proc_post_fn(xtc_loop_t *loop, xtc__post_t *n)
{
	xtc__proc_t *p = (xtc__proc_t *)((char *)n - offsetof(xtc__proc_t, post));

	atomic_store_explicit(&p->post_queued, 0, memory_order_release);
	xtc__loop_watch_clear(loop, n);
	if (loop->magic != XTC__LOOP_LIVE)
		return; /* fini: the tasks are being released */
	xtc__spin_lock(&p->lock);
	if (xtc__proc_state(p) == XTC__PROC_ALIVE && p->task)
		xtc__task_wake_lockheld(p->task); /* also right if it migrated */
	xtc__spin_unlock(&p->lock);
}

void xtc__proc_wake_post(xtc__proc_t *p, xtc_loop_t *loop)
{
	if (xtc__watch_claim(&p->watch))
		return; /* the watching carrier runs proc_post_fn itself */
	if (xtc__loop_post(loop, &p->post) != XTC_OK)
		atomic_store(&p->post_queued, 0); /* loop finalised */
}

/* Lock, wake if alive (gen checked), unlock, post if needed. */
static void wake_pid_slot(xtc__proc_t *o, xtc_pid_t pid, int kill, int reason,
                          int *alive)
{
	xtc_loop_t *wl = NULL;

	xtc__spin_lock(&o->lock);
	*alive = xtc__proc_is(o, pid);
	if (*alive) {
		if (!kill) {
			wl = xtc__proc_wake_locked(o);
		} else if (!o->kill_pending) { /* the first kill wins */
			o->kill_pending = 1;
			o->kill_reason = reason;
			if (o->task) {
				atomic_store(&o->task->kill_pending, 1);
				wl = xtc__proc_wake_locked(o);
			}
		}
	}
	xtc__spin_unlock(&o->lock);
	if (wl)
		xtc__proc_wake_post(o, wl);
}

/* Stop cross-thread lookups and wait out the ones in flight. Idempotent. */
static void tab_close(xtc__ptab_t *t)
{
	atomic_store(&t->live, 0);
	while (atomic_load(&t->users) != 0)
		sched_yield();
}

/* ---- teardown ----------------------------------------------------------- */

/* Remove `me` from the peer's link set; 1 if the peer was alive. */
static int unlink_peer(xtc_pid_t peer, xtc_pid_t me)
{
	xtc__ptab_t *ref;
	xtc__proc_t *o = xtc__proc_ref(peer, &ref);
	int alive = 0;

	if (!o)
		return 0;
	xtc__spin_lock(&o->lock);
	if (xtc__proc_is(o, peer)) {
		relv_del_pid(&o->links, me);
		alive = 1;
	}
	xtc__spin_unlock(&o->lock);
	xtc__proc_unref(ref);
	return alive;
}

static void unwatch_target(xtc_pid_t target, uint64_t mref)
{
	xtc__ptab_t *ref;
	xtc__proc_t *o = xtc__proc_ref(target, &ref);

	if (!o)
		return;
	xtc__spin_lock(&o->lock);
	if (xtc__proc_is(o, target))
		xtc__relv_del_ref(&o->watchers, mref, NULL);
	xtc__spin_unlock(&o->lock);
	xtc__proc_unref(ref);
}

static void notify_exit(xtc_pid_t me, int reason, xtc__relv_t *links,
                        xtc__relv_t *watchers, xtc__relv_t *held)
{
	struct xtc__exit_msg em;

	em.kind = XTC__MSG_EXIT;
	em.pid = me;
	em.reason = reason;
	for (uint32_t i = 0; i < links->n; i++)
		if (unlink_peer(links->v[i].pid, me) && reason != 0)
			(void)xtc__send_sys(links->v[i].pid, &em, sizeof em);
	for (uint32_t i = 0; i < watchers->n; i++)
		(void)xtc__send_down(watchers->v[i].pid, watchers->v[i].ref, me,
		                     reason);
	for (uint32_t i = 0; i < held->n; i++)
		unwatch_target(held->v[i].pid, held->v[i].ref);
}

/* Under p->lock, which it drops: take the mailbox and the relationships
 * out, then free and notify. Out of line: the common proc has none of
 * them, and inlined this made every teardown save all registers and
 * shuffle the five structs through the stack. */
static __attribute__((noinline)) void teardown_take(xtc__proc_t *p,
                                                    xtc_pid_t me, int reason)
{
	xtc__relv_t links, watchers, held;
	xtc__msgq_t in, save;

	links = p->links;
	watchers = p->watchers;
	held = p->held;
	in = p->in;
	save = p->save;
	memset(&p->links, 0, sizeof p->links);
	memset(&p->watchers, 0, sizeof p->watchers);
	memset(&p->held, 0, sizeof p->held);
	memset(&p->in, 0, sizeof p->in);
	memset(&p->save, 0, sizeof p->save);
	xtc__spin_unlock(&p->lock);

	xtc__msgq_free(&in);
	xtc__msgq_free(&save);
	notify_exit(me, reason, &links, &watchers, &held);
	relv_free(&links);
	relv_free(&watchers);
	relv_free(&held);
}

static void proc_teardown(xtc__proc_t *p, int reason)
{
	void (*hook)(void *, int);
	void *hook_user;
	xtc__msg_t *handoff;
	xtc_pid_t me;
	xtc_task_t *t;

	/* xtc_proc_at_exit, last first, while the proc is still alive (a
	 * handler may send its last messages); each is taken off before it
	 * runs, so a kill that lands in one goes on with the next */
	while (p->n_atexit > 0) {
		struct xtc__atexit h = p->atexit[--p->n_atexit];
		h.fn(h.arg);
	}
	if (p->fault)
		xtc__proc_fault_free(p);
	xtc__spin_lock(&p->lock);
	me = xtc__proc_pid(p);
	slot_die_locked(p);
	p->waiting = 0;
	/* a message handed to us while killed in xtc_recv (only written
	 * under this lock: no exchange needed) */
	handoff = atomic_load_explicit(&p->handoff, memory_order_relaxed);
	atomic_store_explicit(&p->handoff, NULL, memory_order_relaxed);
	t = p->task;
	hook = p->on_exit;
	hook_user = p->on_exit_user;
	p->on_exit = NULL;
	/* Most procs end with no link, monitor or mail: a vector that ever
	 * held an entry keeps its buffer (v) until here, a queue with a
	 * message has a head; only then is there anything to take out. */
	if (XTC__UNLIKELY(p->links.v != NULL || p->watchers.v != NULL ||
	                  p->held.v != NULL || p->in.head != NULL ||
	                  p->save.head != NULL))
		teardown_take(p, me, reason);
	else
		xtc__spin_unlock(&p->lock);
	xtc__hoff_free(handoff);
	if (t) {
		/* the reap then skips proc_task_cleanup, which would find
		 * nothing left to do */
		t->proc = NULL;
		t->cleanup = NULL;
	}
	slot_release(p);
	if (hook)
		hook(hook_user, reason);
}

static __attribute__((noreturn)) void proc_die(xtc__proc_t *p, int reason)
{
	proc_teardown(p, reason);
	(void)xtc__task_exit(0);
	abort(); /* unreachable: we are on a fiber task */
}

void xtc__proc_resumed(void)
{
	xtc_task_t *t = xtc__tls_task;
	xtc__proc_t *p = t ? t->proc : NULL;
	int kill, reason = 0;

	if (!p)
		return;
	xtc__spin_lock(&p->lock);
	kill = p->kill_pending;
	if (kill)
		reason = p->kill_reason;
	xtc__spin_unlock(&p->lock);
	if (kill) {
		/* a kill may arrive inside a park that raised nopreempt */
		t->fiber.nopreempt = 0;
		proc_die(p, reason);
	}
}

/* Task cleanup hook: runs at reap (the proc already tore down: proc is
 * NULL) or at loop fini for a proc whose fiber never finished. */
static void proc_task_cleanup(xtc_task_t *t, void *proc)
{
	/* t->proc, not the argument: after a normal teardown the slot may
	 * already belong to another proc */
	xtc__proc_t *p = t->proc;

	(void)proc;

	if (!p)
		return;
	/* Two ways here: the loop's fini, or a proc spawned from another
	 * thread whose stack this loop could not map at its first run
	 * (xtc__task_materialize: t->result holds why). Only fini closes the
	 * table -- a refused stack closed it too, and every later lookup of
	 * the loop's procs failed. */
	if (t->loop->magic != XTC__LOOP_LIVE) {
		/* fini: same-loop peers are being destroyed too; closing the
		 * table first makes every lookup of them fail instead of
		 * touching them. (A proc that migrated here from a live loop
		 * keeps its home table open; peers that migrated here are not
		 * covered: executor fini.) */
		if (p->tab->loop == t->loop)
			tab_close(p->tab);
		proc_teardown(p, XTC_E_ABORTED);
		return;
	}
	proc_teardown(p, t->result < 0 ? (int)t->result : XTC_E_ABORTED);
}

static void proc_entry(void *arg)
{
	xtc__proc_t *p = arg;
	xtc_task_t *t = xtc__tls_task;
	int kill, reason;

	xtc__spin_lock(&p->lock);
	p->task = t;
	kill = p->kill_pending;
	reason = p->kill_reason;
	xtc__spin_unlock(&p->lock);
	t->fiber.name = p->name;
	t->fiber.owner_id = ((uint64_t)p->tab->loop_id << 48) |
	                    ((uint64_t)p->local_id << 32) | p->gen;
	if (!kill) {
		p->fn(p->arg);
		reason = 0;
	}
	proc_teardown(p, reason);
}

int xtc_proc_at_exit(void (*fn)(void *), void *arg)
{
	xtc_task_t *t = xtc__tls_task;
	xtc__proc_t *p = t != NULL && xtc__gocb_depth == 0 ? t->proc : NULL;

	if (p == NULL || fn == NULL)
		return XTC_E_INVAL;
	if (p->n_atexit >= XTC_PROC_AT_EXIT_MAX)
		return XTC_E_RESOURCE;
	if (p->atexit == NULL) {
		p->atexit = malloc(XTC_PROC_AT_EXIT_MAX * sizeof *p->atexit);
		if (p->atexit == NULL)
			return XTC_E_NOMEM;
	}
	p->atexit[p->n_atexit++] = (struct xtc__atexit){ fn, arg };
	return XTC_OK;
}

/* ---- spawning ----------------------------------------------------------- */

static int check_opts(xtc_loop_t *loop, const xtc_proc_opts_t *o)
{
	if (!o)
		return XTC_OK;
	if (o->mailbox_watermark_pct < 0 || o->mailbox_watermark_pct > 100)
		return XTC_E_INVAL;
	if (o->mailbox_watermark_pct > 0 && !o->mailbox_watermark_fn)
		return XTC_E_INVAL;
	if (o->mailbox_cap > (size_t)INT32_MAX)
		return XTC_E_INVAL;
	if (o->link_to < 0 || o->link_to > (int)XTC__PROC_MAX_LOCAL)
		return XTC_E_INVAL;
	if (xtc__class_check(loop, o->sched_class) != XTC_OK)
		return XTC_E_INVAL;
	return xtc__stack_size_check(o->stack_size);
}

/* Link two slots: a is exclusively ours (not yet running), b may live
 * anywhere. 0 or XTC_E_INVAL (b dead) / XTC_E_NOMEM. */
static int link_new(xtc__proc_t *a, xtc_pid_t b)
{
	xtc_pid_t ap = xtc__proc_pid(a);
	xtc__ptab_t *ref;
	xtc__proc_t *o = xtc__proc_ref(b, &ref);
	int rc = XTC_E_INVAL;

	if (!o)
		return rc;
	xtc__spin_lock(&o->lock);
	if (xtc__proc_is(o, b))
		rc = xtc__relv_add(&o->links, 0, ap);
	xtc__spin_unlock(&o->lock);
	xtc__proc_unref(ref);
	if (rc == XTC_OK) {
		xtc__spin_lock(&a->lock);
		rc = xtc__relv_add(&a->links, 0, b);
		xtc__spin_unlock(&a->lock);
		if (rc != XTC_OK)
			(void)unlink_peer(b, ap);
	}
	return rc;
}

/* The pid of local id `id` on the same table, if alive (legacy link_to). */
static xtc_pid_t local_pid(xtc__ptab_t *t, uint32_t id)
{
	xtc__proc_t *c = atomic_load_explicit(&t->chunks[id >> XTC__PROC_CHUNK_SHIFT],
	                                      memory_order_acquire);
	xtc_pid_t pid = XTC_PID_NONE;

	if (!c || id >= t->hwm)
		return pid;
	xtc__proc_t *o = &c[id & (XTC__PROC_CHUNK - 1)];
	xtc__spin_lock(&o->lock);
	if (xtc__proc_state(o) == XTC__PROC_ALIVE)
		pid = xtc__proc_pid(o);
	xtc__spin_unlock(&o->lock);
	return pid;
}

/* Undo a failed spawn: the child never ran. */
static void spawn_abort(xtc__proc_t *p)
{
	xtc__relv_t links, watchers, held;
	xtc__msgq_t in, save;
	xtc__msg_t *handoff;
	xtc_pid_t me;

	/* no EXIT messages; the monitor was never reported; no exit hook
	 * (the caller keeps its user pointer on a failed spawn) */
	xtc__spin_lock(&p->lock);
	p->on_exit = NULL;
	me = xtc__proc_pid(p);
	slot_die_locked(p);
	links = p->links;
	watchers = p->watchers;
	held = p->held;
	memset(&p->links, 0, sizeof p->links);
	memset(&p->watchers, 0, sizeof p->watchers);
	memset(&p->held, 0, sizeof p->held);
	/* a peer linked before the failure may have died and sent its EXIT
	 * already: a released slot's mailbox must be empty (mbox_init no
	 * longer clears it) */
	in = p->in;
	save = p->save;
	memset(&p->in, 0, sizeof p->in);
	memset(&p->save, 0, sizeof p->save);
	handoff = atomic_load_explicit(&p->handoff, memory_order_relaxed);
	atomic_store_explicit(&p->handoff, NULL, memory_order_relaxed);
	xtc__spin_unlock(&p->lock);
	xtc__msgq_free(&in);
	xtc__msgq_free(&save);
	xtc__hoff_free(handoff);
	for (uint32_t i = 0; i < links.n; i++)
		(void)unlink_peer(links.v[i].pid, me);
	for (uint32_t i = 0; i < watchers.n; i++) {
		/* drop the parent's held entry without a DOWN */
		xtc__ptab_t *ref;
		xtc__proc_t *w = xtc__proc_ref(watchers.v[i].pid, &ref);
		if (w) {
			xtc__spin_lock(&w->lock);
			if (xtc__proc_is(w, watchers.v[i].pid))
				xtc__relv_del_ref(&w->held, watchers.v[i].ref,
				                  NULL);
			xtc__spin_unlock(&w->lock);
			xtc__proc_unref(ref);
		}
	}
	relv_free(&links);
	relv_free(&watchers);
	relv_free(&held);
	slot_release(p);
}

enum { SPAWN_PLAIN, SPAWN_LINK, SPAWN_MONITOR };

struct exit_hook {
	void (*fn)(void *user, int reason);
	void *user;
};

static int proc_spawn(xtc_loop_t *loop, xtc_proc_fn fn, void *arg,
                      const xtc_proc_opts_t *opts, xtc_pid_t *out_pid,
                      int how, uint64_t *out_ref,
                      const struct exit_hook *hook)
{
	xtc__proc_t *parent = NULL, *p;
	xtc__spawn_opts_t so;
	xtc__ptab_t *t;
	xtc_pid_t pid;
	uint64_t mref = 0;
	int rc = XTC_OK;

	if (!loop || !fn || loop->magic != XTC__LOOP_LIVE)
		return XTC_E_INVAL;
	if (how != SPAWN_PLAIN) {
		parent = xtc__proc_current();
		if (!parent || (how == SPAWN_MONITOR && !out_ref))
			return XTC_E_INVAL;
	}
	rc = check_opts(loop, opts);
	if (rc != XTC_OK)
		return rc;
	t = tab_get(loop);
	if (!t)
		return XTC_E_NOMEM;
	p = slot_alloc(t, &rc);
	if (!p)
		return rc;

	/* the slot is FREE: nobody else reads these fields until ALIVE */
	p->fn = fn;
	p->arg = arg;
	p->userdata = NULL;
	p->on_exit = hook ? hook->fn : NULL;
	p->on_exit_user = hook ? hook->user : NULL;
	p->name = NULL;
	if (opts && opts->name) {
		/* copied: a caller (the Go wrapper, a server naming each
		 * request) need not keep its string alive for the proc */
		/* the precision bounds the read too: a name is never
		 * read past what fits (a caller's unterminated buffer) */
		snprintf(p->name_buf, sizeof p->name_buf, "%.*s",
		         (int)sizeof p->name_buf - 1, opts->name);
		p->name = p->name_buf;
	}
	p->task = NULL;
	p->kill_pending = 0;
	p->kill_reason = 0;
	p->waiting = 0;
	p->in_match = 0;
	xtc__mbox_init(p, opts);
	pid = xtc__proc_pid(p);
	atomic_store_explicit(&p->state, XTC__PROC_ALIVE, memory_order_release);

	/* relationships before the child can run: no window to miss an exit */
	if (how == SPAWN_LINK) {
		rc = link_new(p, xtc__proc_pid(parent));
	} else if (how == SPAWN_MONITOR) {
		xtc_pid_t pp = xtc__proc_pid(parent);
		mref = new_ref();
		xtc__spin_lock(&parent->lock);
		rc = xtc__relv_add(&parent->held, mref, pid);
		xtc__spin_unlock(&parent->lock);
		if (rc == XTC_OK) {
			xtc__spin_lock(&p->lock);
			rc = xtc__relv_add(&p->watchers, mref, pp);
			xtc__spin_unlock(&p->lock);
			if (rc != XTC_OK) {
				xtc__spin_lock(&parent->lock);
				xtc__relv_del_ref(&parent->held, mref, NULL);
				xtc__spin_unlock(&parent->lock);
			}
		}
	}
	if (rc == XTC_OK && opts && opts->link_to > 0) {
		xtc_pid_t other = local_pid(t, (uint32_t)opts->link_to);
		rc = xtc_pid_is_none(other) || xtc_pid_eq(other, pid)
		         ? XTC_E_INVAL : link_new(p, other);
	}
	if (rc == XTC_OK) {
		memset(&so, 0, sizeof so);
		so.stack_size = opts ? opts->stack_size : 0;
		so.migratable = opts ? opts->migratable != 0 : 0;
		p->migratable = (uint8_t)so.migratable;
		so.sched_class = opts ? opts->sched_class : NULL;
		so.proc = p;
		so.cleanup = proc_task_cleanup;
		rc = xtc__task_spawn_fiber(loop, proc_entry, p, &so, NULL);
	}
	if (rc != XTC_OK) {
		spawn_abort(p);
		return rc;
	}
	if (out_pid)
		*out_pid = pid;
	if (out_ref)
		*out_ref = mref;
	return XTC_OK;
}

int xtc_proc_spawn(xtc_loop_t *loop, xtc_proc_fn fn, void *arg,
                   const xtc_proc_opts_t *opts, xtc_pid_t *out_pid)
{
	return proc_spawn(loop, fn, arg, opts, out_pid, SPAWN_PLAIN, NULL, NULL);
}

int xtc__proc_spawn_hooked(xtc_loop_t *loop, xtc_proc_fn fn, void *arg,
                           const xtc_proc_opts_t *opts,
                           void (*on_exit)(void *user, int reason),
                           void *user, xtc_pid_t *out_pid)
{
	struct exit_hook h = { on_exit, user };

	return proc_spawn(loop, fn, arg, opts, out_pid, SPAWN_PLAIN, NULL,
	    on_exit ? &h : NULL);
}

int xtc_proc_spawn_link(xtc_loop_t *loop, xtc_proc_fn fn, void *arg,
                        const xtc_proc_opts_t *opts, xtc_pid_t *out_pid)
{
	return proc_spawn(loop, fn, arg, opts, out_pid, SPAWN_LINK, NULL, NULL);
}

int xtc_proc_spawn_monitor(xtc_loop_t *loop, xtc_proc_fn fn, void *arg,
                           const xtc_proc_opts_t *opts, xtc_pid_t *out_pid,
                           uint64_t *out_ref)
{
	return proc_spawn(loop, fn, arg, opts, out_pid, SPAWN_MONITOR, out_ref,
	    NULL);
}

/* ---- identity ----------------------------------------------------------- */

xtc_pid_t xtc_self(void)
{
	xtc__proc_t *p = xtc__proc_current();
	return p ? xtc__proc_pid(p) : XTC_PID_NONE;
}

int xtc_proc_set_userdata(void *ud)
{
	xtc__proc_t *p = xtc__proc_current();
	if (!p)
		return XTC_E_INVAL;
	p->userdata = ud;
	return XTC_OK;
}

void *xtc_proc_userdata(void)
{
	xtc__proc_t *p = xtc__proc_current();
	return p ? p->userdata : NULL;
}

int xtc_proc_set_class(xtc_exec_class_t cls)
{
	xtc_task_t *t = xtc__tls_task;

	if (!t || !t->proc || xtc__class_check(t->loop, cls) != XTC_OK)
		return XTC_E_INVAL;
	/* the running task is not in any queue: the next enqueue (yield,
	 * wake) files it under the new class */
	t->sched_class = cls;
	return XTC_OK;
}

/* ---- waiting ------------------------------------------------------------ */

int xtc_proc_sleep(int64_t ns)
{
	xtc__proc_t *p = xtc__proc_current();
	int64_t deadline;
	int rc;

	if (!p || ns < 0)
		return XTC_E_INVAL;
	if (ns == 0) {
		rc = xtc__fiber_yield(); /* the loop's yield: xtc_yield_ex */
		return rc == XTC_E_DEADLK ? rc : XTC_OK;
	}
	deadline = xtc__deadline_after(xtc__now(), ns);
	for (;;) {
		int64_t left = deadline - xtc__now();
		if (left <= 0)
			return XTC_OK;
		rc = xtc__park(left, -1, 0, NULL);
		if (rc == XTC_E_AGAIN)
			return XTC_OK;
		if (rc < 0)
			return rc;
		/* woken early (xtc_proc_wake, a message): sleep on */
	}
}

static uint32_t poll_fd(int fd, uint32_t interest);

static int fd_is_bad(int fd)
{
	return fcntl(fd, F_GETFD) < 0 && errno == EBADF;
}

int xtc_proc_wait_fd(int fd, uint32_t interest, int64_t timeout_ns,
                     uint32_t *out_revents)
{
	xtc_task_t *t = xtc__tls_task;
	xtc__proc_t *p = t ? t->proc : NULL;
	int64_t deadline = timeout_ns > 0 ?
	    xtc__deadline_after(xtc__now(), timeout_ns) : 0;
	const uint32_t ok_bits = XTC_IO_READABLE | XTC_IO_WRITABLE |
	                         XTC_IO_HUP | XTC_IO_ERR;

	if (!out_revents)
		return XTC_E_INVAL;
	*out_revents = 0;
	if (!p || fd < 0 || (interest & ~ok_bits) ||
	    !(interest & (XTC_IO_READABLE | XTC_IO_WRITABLE)))
		return XTC_E_INVAL;
	for (;;) {
		uint32_t rev = 0, mail;
		int64_t left = -1;
		int rc;

		xtc__spin_lock(&p->lock);
		if (p->in.n) {
			xtc__spin_unlock(&p->lock);
			*out_revents = XTC_WAIT_MAILBOX;
			return XTC_OK;
		}
		if (timeout_ns == 0) {
			xtc__spin_unlock(&p->lock);
			rev = poll_fd(fd, interest);
			if (rev == UINT32_MAX)
				return XTC_E_INVAL;
			*out_revents = rev ? rev : XTC_WAIT_TIMEOUT;
			return rev ? XTC_OK : XTC_E_AGAIN;
		}
		if (timeout_ns > 0) {
			left = deadline - xtc__now();
			if (left <= 0) {
				xtc__spin_unlock(&p->lock);
				*out_revents = XTC_WAIT_TIMEOUT;
				return XTC_E_AGAIN;
			}
		}
		/* no preemption between publishing `waiting` and parking:
		 * a preempted (READY) task would swallow the wake */
		t->fiber.nopreempt++;
		p->waiting = XTC__WAIT_WAKE;
		xtc__spin_unlock(&p->lock);
		rc = xtc__park(left, fd, interest, &rev);
		t->fiber.nopreempt--;

		xtc__spin_lock(&p->lock);
		p->waiting = 0;
		mail = p->in.n ? XTC_WAIT_MAILBOX : 0;
		xtc__spin_unlock(&p->lock);
		if (rc == XTC_OK && (rev & XTC_IO_ERR) && fd_is_bad(fd)) {
			/* io_uring reports a bad fd as an error event; make it
			 * the same XTC_E_INVAL as epoll and the poll path */
			*out_revents = 0;
			return XTC_E_INVAL;
		}
		if (rc == XTC_OK && (rev || mail)) {
			*out_revents = rev | mail;
			return XTC_OK;
		}
		if (rc == XTC_E_AGAIN) {
			*out_revents = mail ? mail : XTC_WAIT_TIMEOUT;
			return mail ? XTC_OK : XTC_E_AGAIN;
		}
		if (rc < 0)
			return rc;
		/* a plain wake with nothing for us: wait again */
	}
}

static uint32_t poll_fd(int fd, uint32_t interest)
{
	struct pollfd pf = { .fd = fd, .events = 0 };
	uint32_t rev = 0;
	int n;

	if (interest & XTC_IO_READABLE)
		pf.events |= POLLIN;
	if (interest & XTC_IO_WRITABLE)
		pf.events |= POLLOUT;
	n = poll(&pf, 1, 0);
	if (n < 0)
		return UINT32_MAX;
	if (n == 0)
		return 0;
	if (pf.revents & POLLNVAL)
		return UINT32_MAX;
	if (pf.revents & POLLIN)
		rev |= XTC_IO_READABLE;
	if (pf.revents & POLLOUT)
		rev |= XTC_IO_WRITABLE;
	if (pf.revents & POLLHUP)
		rev |= XTC_IO_HUP;
	if (pf.revents & POLLERR)
		rev |= XTC_IO_ERR;
	return rev;
}

int xtc_proc_wake(xtc_pid_t target)
{
	xtc__ptab_t *ref;
	xtc__proc_t *o;

	if (xtc_pid_is_none(target))
		return XTC_E_INVAL;
	int alive;

	o = xtc__proc_ref(target, &ref);
	if (!o)
		return XTC_OK; /* gone: a wake carries nothing */
	wake_pid_slot(o, target, 0, 0, &alive);
	xtc__proc_unref(ref);
	return XTC_OK;
}

/* ---- exit --------------------------------------------------------------- */

int xtc_exit_self(int reason)
{
	xtc__proc_t *p = xtc__proc_current();
	if (!p)
		return XTC_E_INVAL;
	/* dying switches away from this fiber, which a Go callback forbids;
	 * refuse before the teardown, not after it */
	if (xtc__gocb_depth > 0)
		return XTC_E_DEADLK;
	proc_die(p, reason);
}

int xtc_exit_pid(xtc_pid_t target, int reason)
{
	xtc__ptab_t *ref;
	xtc__proc_t *o;
	int alive;

	if (xtc_pid_is_none(target))
		return XTC_E_INVAL;
	o = xtc__proc_ref(target, &ref);
	if (!o)
		return XTC_E_INVAL;
	wake_pid_slot(o, target, 1, reason, &alive);
	xtc__proc_unref(ref);
	return alive ? XTC_OK : XTC_E_INVAL;
}

/* ---- links and monitors ------------------------------------------------- */

int xtc_link(xtc_pid_t other)
{
	xtc__proc_t *p = xtc__proc_current();
	xtc__ptab_t *ref;
	xtc__proc_t *o;
	xtc_pid_t me;
	int rc;

	if (!p || xtc_pid_is_none(other))
		return XTC_E_INVAL;
	me = xtc__proc_pid(p);
	if (xtc_pid_eq(me, other))
		return XTC_E_INVAL;
	/* our side first: if the peer dies between the two steps its
	 * teardown finds us and removes itself */
	xtc__spin_lock(&p->lock);
	if (relv_find_pid(&p->links, other) >= 0) {
		xtc__spin_unlock(&p->lock);
		return XTC_OK;
	}
	rc = xtc__relv_add(&p->links, 0, other);
	xtc__spin_unlock(&p->lock);
	if (rc != XTC_OK)
		return rc;

	rc = XTC_E_INVAL;
	o = xtc__proc_ref(other, &ref);
	if (o) {
		xtc__spin_lock(&o->lock);
		if (xtc__proc_is(o, other))
			rc = relv_find_pid(&o->links, me) >= 0
			         ? XTC_OK : xtc__relv_add(&o->links, 0, me);
		xtc__spin_unlock(&o->lock);
		xtc__proc_unref(ref);
	}
	if (rc != XTC_OK) {
		xtc__spin_lock(&p->lock);
		relv_del_pid(&p->links, other);
		xtc__spin_unlock(&p->lock);
	}
	return rc;
}

int xtc_unlink(xtc_pid_t other)
{
	xtc__proc_t *p = xtc__proc_current();

	if (!p || xtc_pid_is_none(other))
		return XTC_E_INVAL;
	xtc__spin_lock(&p->lock);
	relv_del_pid(&p->links, other);
	xtc__spin_unlock(&p->lock);
	(void)unlink_peer(other, xtc__proc_pid(p));
	return XTC_OK;
}

int xtc_monitor(xtc_pid_t target, uint64_t *out_ref)
{
	xtc__proc_t *p = xtc__proc_current();
	xtc__ptab_t *ref;
	xtc__proc_t *o;
	xtc_pid_t me;
	uint64_t mref;
	int rc, ok = 0;

	/* out_ref may be NULL (libxtc): the DOWN comes all the same */
	if (!p || xtc_pid_is_none(target))
		return XTC_E_INVAL;
	me = xtc__proc_pid(p);
	if (xtc_pid_eq(me, target))
		return XTC_E_INVAL;
	mref = new_ref();
	xtc__spin_lock(&p->lock);
	rc = xtc__relv_add(&p->held, mref, target);
	xtc__spin_unlock(&p->lock);
	if (rc != XTC_OK)
		return rc;

	o = xtc__proc_ref(target, &ref);
	if (o) {
		xtc__spin_lock(&o->lock);
		if (xtc__proc_is(o, target)) {
			rc = xtc__relv_add(&o->watchers, mref, me);
			ok = 1;
		}
		xtc__spin_unlock(&o->lock);
		xtc__proc_unref(ref);
	}
	if (ok && rc != XTC_OK) {
		xtc__spin_lock(&p->lock);
		xtc__relv_del_ref(&p->held, mref, NULL);
		xtc__spin_unlock(&p->lock);
		return rc;
	}
	if (!ok) {
		/* already dead (or never existed): an immediate, benign DOWN */
		rc = xtc__send_down(me, mref, target, XTC_DOWN_NOPROC);
		if (rc != XTC_OK)
			return rc;
	}
	if (out_ref)
		*out_ref = mref;
	return XTC_OK;
}

int xtc_down_is_noproc(int reason)
{
	return reason == XTC_DOWN_NOPROC;
}

int xtc_demonitor(uint64_t mref)
{
	xtc__proc_t *p = xtc__proc_current();
	xtc_pid_t target;
	int found;

	if (!p || mref == 0 || p->in_match)
		return XTC_E_INVAL;
	xtc__spin_lock(&p->lock);
	found = xtc__relv_del_ref(&p->held, mref, &target);
	xtc__spin_unlock(&p->lock);
	if (found) {
		unwatch_target(target, mref);
		return XTC_OK;
	}
	/* fired already: drop the DOWN still queued, if any */
	return xtc__mbox_flush_ref(p, mref) > 0 ? XTC_OK : XTC_E_NOTFOUND;
}

/* ---- decoding ----------------------------------------------------------- */

int xtc_down_decode(const void *msg, size_t len, xtc_pid_t *out_pid,
                    int *out_reason)
{
	xtc_down_info_t info;
	int rc = xtc_down_decode_ex(msg, len, &info);

	if (rc != XTC_OK)
		return rc;
	if (out_pid)
		*out_pid = info.pid;
	if (out_reason)
		*out_reason = info.reason;
	return XTC_OK;
}

int xtc_down_decode_ex(const void *msg, size_t len, xtc_down_info_t *out)
{
	struct xtc__down_msg d;

	if (!msg || !out || len != sizeof d)
		return XTC_E_INVAL;
	memcpy(&d, msg, sizeof d);
	if (d.kind != XTC__MSG_DOWN)
		return XTC_E_INVAL;
	memset(out, 0, sizeof *out);
	out->pid = d.pid;
	out->reason = d.reason;
	out->ref = d.ref;
	if (d.reason == 0) {
		out->kind = XTC_DOWN_KIND_CLEAN;
	} else if (d.reason == XTC_DOWN_NOPROC) {
		out->kind = XTC_DOWN_KIND_NOPROC;
	} else {
		/* no contained faults in this core: every other reason is an
		 * exit code (xtc_exit_self / xtc_exit_pid / loop fini) */
		out->kind = XTC_DOWN_KIND_EXIT;
		out->exit_code = d.reason;
	}
	return XTC_OK;
}

int xtc_exit_decode(const void *msg, size_t len, xtc_pid_t *out_pid,
                    int *out_reason)
{
	struct xtc__exit_msg e;

	if (!msg || len != sizeof e)
		return XTC_E_INVAL;
	memcpy(&e, msg, sizeof e);
	if (e.kind != XTC__MSG_EXIT)
		return XTC_E_INVAL;
	if (out_pid)
		*out_pid = e.pid;
	if (out_reason)
		*out_reason = e.reason;
	return XTC_OK;
}

/* ---- loop fini ---------------------------------------------------------- */

void xtc__proc_loop_fini(xtc_loop_t *loop)
{
	xtc__ptab_t *t;
	uint32_t maxgen;

	if (!loop)
		return;
	t = tab_of(loop);
	if (!t)
		return;
	tab_close(t);
	maxgen = t->gen_floor;
	for (uint32_t ci = 0; ci < XTC__PROC_NCHUNKS; ci++) {
		xtc__proc_t *c = atomic_load(&t->chunks[ci]);
		if (!c)
			continue;
		for (uint32_t i = 0; i < XTC__PROC_CHUNK; i++) {
			xtc__proc_t *p = &c[i];
			/* cleanup hooks ran for every task; a slot still in
			 * use here lost its task some other way */
			if (xtc__proc_state(p) != XTC__PROC_FREE) {
				xtc__hoff_free(atomic_exchange(&p->handoff,
				                               NULL));
				xtc__msgq_free(&p->in);
				xtc__msgq_free(&p->save);
				relv_free(&p->links);
				relv_free(&p->watchers);
				relv_free(&p->held);
			}
			if (p->gen > maxgen)
				maxgen = p->gen;
			free(p->atexit);
		}
		atomic_store(&t->chunks[ci], NULL);
		free(c);
	}
	pthread_mutex_lock(&g_tab_mu);
	g_gen_floor[t->loop_id] = maxgen + 1;
	t->gen_floor = maxgen + 1;
	t->loop = NULL;
	t->hwm = 1;
	t->free_head = 0;
	t->local_head = 0;
	t->local_n = 0;
	if (atomic_load(&g_tabs[t->loop_id]) == t)
		atomic_store(&g_tabs[t->loop_id], NULL);
	loop->up.procs = NULL;
	t->next_tab = g_tab_free;
	g_tab_free = t;
	pthread_mutex_unlock(&g_tab_mu);
}

static uint64_t proc_label(const void *proc, const char **name)
{
	const xtc__proc_t *p = proc;
	xtc_pid_t id = xtc__proc_pid(p);

	*name = p->name;
	return (uint64_t)id.loop_id << 48 | (uint64_t)id.local_id << 32 |
	    id.gen;
}

/* The loop reaches the proc layer through its upcalls (loop_int.h). */
__attribute__((constructor)) static void proc_upcalls(void)
{
	xtc__up.proc_resumed = xtc__proc_resumed;
	xtc__up.proc_loop_fini = xtc__proc_loop_fini;
	xtc__up.proc_label = proc_label;
}
