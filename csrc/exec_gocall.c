/*
 * exec_gocall.c - the Go front door's C half: a call from a goroutine (Exec.Go,
 * GoInt, GoAsync, LaunchFn's steps) as a record of a fixed slab, started
 * by a carrier from its submission ring and settled exactly once onto a
 * completion stack (contract: exec_gocall_int.h).
 *
 * Why. The first front door built each call from the general pieces: a
 * calloc'd record, a promise/future pair, a completion-queue registration
 * of the future, a proc spawned from the Go thread (pid slot under the
 * table lock, a task posted through the loop's inbox), and at the end a
 * promise set, a continuation, a cq push and an eventfd write on every
 * completion; the Go side added a map under a mutex, a channel per call
 * and a netpoller goroutine. Measured on the 2-vCPU guest: 35-45 us p50
 * per empty call, two cross-thread wake-ups (10-20 us each here) on every
 * call, and 0.39 M calls/s from 64 goroutines.
 *
 * Path of one call now:
 *   Go thread (one cgo call): take record i (the Go side's free list),
 *     fill it, push (start, i) on the carrier's submission ring
 *     (xtc_exec_submit: one CAS; the futex wake only if the carrier
 *     parked). Past a full ring the record waits in the carrier's
 *     overflow through its own node (xtc__exec_submit_node: no refusal,
 *     no allocation, and started at the ring's pace: the loop's inbox,
 *     used before, started a whole backlog at once, a stack each).
 *   carrier (on its own stack, a batch of submissions per drain): spawn
 *     the call as a proc of its own loop (local: no cross-thread pid or
 *     inbox traffic), in the call's class, with an exit hook.
 *   proc end (return, kill, loop fini): the hook settles the record: CAS
 *     to DONE, value and status, then the waiter word is exchanged. If
 *     the submitter is polling the record (it asked to spin and the table
 *     was idle when it submitted) it takes the result itself: no ring, no
 *     doorbell, no wake of any thread. Otherwise the index is pushed on
 *     the completion stack, and the eventfd is written only if the reader
 *     armed it before sleeping (one write per sleep, not per completion).
 *
 * The consumer is one at a time but not one goroutine: the Go side's
 * server and, while it sleeps, a caller about to park (gocall.go, help)
 * pop under one flag, each until a pop comes back short, so the
 * consumer's list is empty whenever nobody pops and the arm reads the
 * head alone. A helper takes the arm word while it delivers (no doorbell
 * meanwhile) and gives it back with the same Dekker (store, then re-read
 * the head); their addresses are handed out for that (xtc__gocalls_head,
 * xtc__gocalls_armed).
 *
 * Exactly once: every path that ends a record (the hook, a start that
 * found the kill word or failed to spawn, xtc__gocalls_settle after
 * xtc_exec_fini for submissions the fini dropped unrun, in the ring or
 * its overflow) goes through settle(), and only the one that moves the
 * state word to DONE publishes. The completion stack is intrusive (a
 * link in the record, a record on it at most once): never full, no
 * allocation, one CAS per push; the consumer takes it whole with one
 * exchange and reverses it (oldest first).
 *
 * Records: a slab of slabs. Chunks of XTC__GOCALLS_CHUNK records are made
 * the first time one of their indices is used (a CAS installs the chunk
 * pointer; a loser frees its copy) and are never moved, so a record's
 * address stays valid for the table's life and the caller may read it
 * without a call; the only bound is the hard limit given at creation
 * (1 << 20 at most). A fixed slab of 16384 refused calls with
 * XTC_E_AGAIN (ErrAgain in Go) under an open-loop overload; a realloc'd
 * array would move records under readers; a completion ring needs a
 * slot per record, so it would have to grow with them.
 *
 * Placement is the Go side's (gocall.go, pick): it reads one count per
 * loop of the calls in flight, raised here by the submission (or spawn)
 * that places a call on the loop and lowered by its settlement. They sit
 * on the submitters' line, which every submission writes anyway; the
 * carriers of a many-loop executor share it when they settle (one line
 * each was slower for every call, see the struct). A count that ignores
 * the loop's other work (procs spawned otherwise) is the price of keeping
 * the carrier's ready queue private.
 *
 * Kill: the killer stores the kill word, then reads the state; the start
 * stores STARTED (after the pid), then reads the kill word (both seq_cst):
 * one of them sees the other, so a started proc is always killed, by the
 * killer (xtc_exit_pid) or by the start itself. The body checks the word
 * before it calls the function: killed before its first run, it never
 * runs.
 *
 * Alternatives rejected: a "call runner" fiber per carrier that runs
 * calls one after another (a long call would hold every short one behind
 * it: the calls must be separate fibers to be sliced and demoted one by
 * one); a plain fiber task instead of a proc (the kill at the next slice
 * is the proc's, and its spawn is not where the time went: ~0.1-0.2 us
 * of the 35-45); calling Go from the carrier to wake the goroutine (a
 * cgo callback on a carrier must acquire a P and would stall the carrier
 * behind busy goroutines); a doorbell per completion (a syscall on the
 * carrier per call).
 */
#include "rtcode_int.h" /* first: this file is runtime code */
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "exec_gocall_int.h"
#include "exec_int.h"
#include "future_int.h"
#include "preempt_int.h"
#include "proc_int.h"
#include "xtc_fn.h"
#include "xtc_launch.h"

#define GC_MAGIC 0x47434c53u /* "GCLS" */
#define GC_MAX   (1u << 20)

typedef struct gocall {
	xtc__gocall_done_t d; /* first: read by the caller (exec_exec_gocall_int.h) */
	_Atomic uint32_t state;
	_Atomic uint32_t kill;
	uint32_t idx;
	int finished;
	intptr_t (*fn)(void *);
	void *arg;
	intptr_t result;
	xtc_exec_class_t cls;
	xtc_loop_t *loop;
	xtc__gocalls_t *tab;
	xtc_pid_t pid;
	xtc__exec_node_t node; /* its submission (ring or overflow) */
	struct gocall *cnext; /* the completion stack's link */
	char name[XTC_PROC_NAME_MAX];
	/* last, in the tail's padding: the fields above keep the lines they
	 * had (placed after idx, it moved cls to the second line and cost
	 * GoInt's round trip 0.4 us p50) */
	int li; /* the loop it was placed on (its count in load[]) */
} __attribute__((aligned(64))) gocall_t;

#define GC_CHUNK_SHIFT 10
#define GC_CHUNK       (1u << GC_CHUNK_SHIFT)     /* records per chunk */
#define GC_CHUNKS      (GC_MAX >> GC_CHUNK_SHIFT) /* chunk pointers */

struct xtc__gocalls {
	uint32_t magic;
	uint32_t mask;                          /* the hard limit - 1 */
	xtc_exec_t *exec;
	int fd;
	int fd_released;
	/* the records: chunks of GC_CHUNK, made on first use, never moved
	 * (a record's address is valid for the table's life) */
	_Atomic(gocall_t *) chunk[GC_CHUNKS];
	_Alignas(64) _Atomic(gocall_t *) chead; /* settlements (LIFO) */
	_Alignas(64) gocall_t *cpriv;           /* the consumer's, oldest first */
	_Atomic int armed;
	_Alignas(64) _Atomic uint64_t n_ring, n_spun;
	int n_loops;
	/* the submitters' line: then the calls in flight per loop (the Go
	 * side's placement reads them), n_loops of them from the same line
	 * on. A line of its own per count, tried first, cost GoInt's round
	 * trip 0.3-0.4 us p50 on the 2-vCPU guest (1.55-1.70 against
	 * 1.22-1.32 us here, 3 alternated runs): one more line moving
	 * between the caller and the carrier on every call */
	_Alignas(64) _Atomic uint32_t hi;       /* records ever used: [0, hi) */
	_Atomic uint64_t submitted, fallback;
	int32_t load[];                         /* atomic */
};

static int tab_ok(const xtc__gocalls_t *t)
{
	return t != NULL && t->magic == GC_MAGIC;
}

/* Chunk c of the records, made on first use (any thread: the first
 * installer wins, a loser frees its copy). calloc: the pages of records
 * never used are never touched (the caller's free list is LIFO, so the
 * hot records stay few). NULL when out of memory. */
static gocall_t *chunk_get(xtc__gocalls_t *t, uint32_t c)
{
	gocall_t *k = atomic_load_explicit(&t->chunk[c], memory_order_acquire);
	gocall_t *nil = NULL;

	if (k != NULL)
		return k;
	k = calloc(GC_CHUNK, sizeof(*k));
	if (k == NULL)
		return NULL;
	for (uint32_t i = 0; i < GC_CHUNK; i++) {
		k[i].idx = (c << GC_CHUNK_SHIFT) | i;
		k[i].tab = t;
	}
	if (!atomic_compare_exchange_strong_explicit(&t->chunk[c], &nil, k,
	        memory_order_acq_rel, memory_order_acquire)) {
		free(k);
		return nil;
	}
	return k;
}

/* Record idx when its chunk exists (every index a caller handed to a
 * submission: rec_claim made the chunk), else NULL. */
static gocall_t *rec_at(const xtc__gocalls_t *t, uint32_t idx)
{
	gocall_t *k;

	if (idx > t->mask)
		return NULL;
	k = atomic_load_explicit(&((xtc__gocalls_t *)t)->chunk[idx >> GC_CHUNK_SHIFT],
	                         memory_order_acquire);
	return k == NULL ? NULL : &k[idx & (GC_CHUNK - 1)];
}

int xtc__gocalls_create(xtc_exec_t *e, uint32_t cap, xtc__gocalls_t **out)
{
	xtc__gocalls_t *t;
	uint32_t n = 1;
	int nl;

	if (out == NULL || e == NULL)
		return XTC_E_INVAL;
	if (cap < 1 || cap > GC_MAX)
		return XTC_E_RANGE;
	while (n < cap)
		n <<= 1;
	nl = xtc_exec_n_loops(e);
	if (nl < 1)
		return XTC_E_INVAL;
	t = calloc(1, sizeof(*t) + (size_t)nl * sizeof(t->load[0]));
	if (t == NULL)
		return XTC_E_NOMEM;
	t->mask = n - 1;
	t->exec = e;
	t->magic = GC_MAGIC;
	t->n_loops = nl;
	/* the first chunk now, so that a table that exists can take a call */
	if (chunk_get(t, 0) == NULL) {
		free(t);
		return XTC_E_NOMEM;
	}
	t->fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (t->fd < 0) {
		int err = errno;
		free(atomic_load(&t->chunk[0]));
		free(t);
		return err == ENOMEM ? XTC_E_NOMEM : XTC_E_IO;
	}
	*out = t;
	return XTC_OK;
}

void xtc__gocalls_destroy(xtc__gocalls_t *t)
{
	if (!tab_ok(t))
		return;
	t->magic = 0;
	if (!t->fd_released)
		close(t->fd);
	for (uint32_t c = 0; c < GC_CHUNKS; c++)
		free(atomic_load(&t->chunk[c]));
	free(t);
}

uint32_t xtc__gocalls_cap(const xtc__gocalls_t *t)
{
	return tab_ok(t) ? t->mask + 1 : 0;
}

int xtc__gocalls_fd(const xtc__gocalls_t *t)
{
	return tab_ok(t) ? t->fd : -1;
}

void xtc__gocalls_release_fd(xtc__gocalls_t *t)
{
	if (tab_ok(t))
		t->fd_released = 1;
}

int xtc__gocalls_chunk(xtc__gocalls_t *t, uint32_t c, void **base)
{
	gocall_t *k;

	if (!tab_ok(t) || base == NULL)
		return XTC_E_INVAL;
	if (c > (t->mask >> GC_CHUNK_SHIFT) ||
	    (c << GC_CHUNK_SHIFT) > t->mask)
		return XTC_E_RANGE;
	if ((k = chunk_get(t, c)) == NULL)
		return XTC_E_NOMEM;
	*base = k;
	return XTC_OK;
}

xtc__gocall_done_t *xtc__gocalls_done(const xtc__gocalls_t *t, uint32_t idx)
{
	gocall_t *r = tab_ok(t) ? rec_at(t, idx) : NULL;

	return r == NULL ? NULL : &r->d;
}

uint32_t xtc__gocalls_stride(void)
{
	return (uint32_t)sizeof(gocall_t);
}

/* ------------------------------------------------------------------ */
/* settlement                                                           */
/* ------------------------------------------------------------------ */

static void ring_bell(xtc__gocalls_t *t)
{
	static const uint64_t one = 1;
	ssize_t n;

	do
		n = write(t->fd, &one, sizeof(one));
	while (n < 0 && errno == EINTR);
}

/* Any thread: r goes on the completion stack (intrusive: a record is on
 * it at most once, between its settlement and the consumer's pop, so it
 * is never full and never allocates). */
static void cstack_push(xtc__gocalls_t *t, gocall_t *r)
{
	gocall_t *h = atomic_load_explicit(&t->chead, memory_order_relaxed);

	do
		r->cnext = h;
	/* seq_cst: the Dekker with xtc__gocalls_arm (publish, then read the
	 * armed word; the reader stores it, then reads the head) */
	while (!atomic_compare_exchange_weak_explicit(&t->chead, &h, r,
	           memory_order_seq_cst, memory_order_relaxed));
	if (atomic_load(&t->armed) && atomic_exchange(&t->armed, 0))
		ring_bell(t);
}

static void settle(gocall_t *r, intptr_t value, int status)
{
	xtc__gocalls_t *t = r->tab;
	uint32_t s = atomic_load(&r->state);
	uint32_t old;

	do {
		if (s == XTC__GC_DONE || s == XTC__GC_FREE)
			return; /* someone else settled it */
	} while (!atomic_compare_exchange_weak(&r->state, &s, XTC__GC_DONE));
	r->d.value = value;
	r->d.status = status;
	__atomic_fetch_sub(&t->load[r->li], 1, __ATOMIC_RELAXED);
	/* a spinning caller may reuse the record once it sees DONE; one that
	 * waits for the completion stack only after the pop (so the push may
	 * still link it) */
	old = __atomic_exchange_n(&r->d.waiter, XTC__GW_DONE, __ATOMIC_SEQ_CST);
	if (old == XTC__GW_SPIN) {
		atomic_fetch_add_explicit(&t->n_spun, 1, memory_order_relaxed);
		return;
	}
	atomic_fetch_add_explicit(&t->n_ring, 1, memory_order_relaxed);
	cstack_push(t, r);
}

/* ------------------------------------------------------------------ */
/* start and end of the proc                                            */
/* ------------------------------------------------------------------ */

static void gc_body(void *a)
{
	gocall_t *r = a;

	if (atomic_load_explicit(&r->kill, memory_order_relaxed))
		return; /* killed before its first run: never runs */
	r->result = r->fn(r->arg);
	r->finished = 1;
}

/* the proc's exit hook: exactly once, whatever ended it */
static void gc_exit(void *a, int reason)
{
	gocall_t *r = a;

	/* a kill with reason 0 looks like a return; a proc that never ran
	 * because its loop could not map its stack says so (XTC_E_NOMEM) */
	if (r->finished)
		settle(r, r->result, 0);
	else
		settle(r, 0, reason == XTC_E_NOMEM ? XTC_E_NOMEM : XTC_E_ABORTED);
}

/* On the carrier of r->loop, on its own stack. */
static void gc_start(gocall_t *r)
{
	xtc_proc_opts_t o;
	xtc_pid_t pid;
	uint32_t q = XTC__GC_QUEUED;
	int rc;

	if (atomic_load(&r->kill)) {
		settle(r, 0, XTC_E_ABORTED);
		return;
	}
	memset(&o, 0, sizeof(o));
	o.sched_class = r->cls;
	o.name = r->name[0] ? r->name : NULL;
	rc = xtc__proc_spawn_hooked(r->loop, gc_body, r, &o, gc_exit, r, &pid);
	if (rc != XTC_OK) {
		settle(r, 0, rc);
		return;
	}
	/* the proc runs after this drain: r is still the caller's */
	r->pid = pid;
	(void)atomic_compare_exchange_strong(&r->state, &q, XTC__GC_STARTED);
	__atomic_store_n(&r->d.started, 1, __ATOMIC_RELAXED);
	if (atomic_load(&r->kill))
		(void)xtc_exit_pid(pid, XTC_E_ABORTED);
}

static void gc_node_fn(xtc__exec_node_t *n)
{
	gc_start((gocall_t *)((char *)n - offsetof(gocall_t, node)));
}

/* ------------------------------------------------------------------ */
/* the caller's side                                                    */
/* ------------------------------------------------------------------ */

/* Claim record idx for a new call (the caller's: free, or settled and
 * consumed) and fill it; XTC_E_INVAL on bad arguments or a record in
 * flight. The shared first half of a submission and of a spawn. */
static int rec_claim(xtc__gocalls_t *t, uint32_t idx, int loop_idx,
                     void *fn, uintptr_t arg, xtc_exec_class_t cls,
                     const char *name, gocall_t **out)
{
	gocall_t *r;
	xtc_loop_t *loop;

	if (!tab_ok(t) || fn == NULL || idx > t->mask)
		return XTC_E_INVAL;
	loop = xtc_exec_loop(t->exec, loop_idx);
	if (loop == NULL)
		return XTC_E_INVAL;
	if (chunk_get(t, idx >> GC_CHUNK_SHIFT) == NULL)
		return XTC_E_NOMEM;
	r = rec_at(t, idx);
	switch (atomic_load_explicit(&r->state, memory_order_relaxed)) {
	case XTC__GC_FREE:
	case XTC__GC_DONE: /* settled and consumed: the caller's again */
		break;
	default:
		return XTC_E_INVAL; /* in flight: not the caller's to submit */
	}
	for (uint32_t h = atomic_load_explicit(&t->hi, memory_order_relaxed);
	     idx >= h;)
		if (atomic_compare_exchange_weak(&t->hi, &h, idx + 1))
			break;
	r->fn = (intptr_t (*)(void *))fn;
	r->arg = (void *)arg;
	r->cls = cls;
	r->loop = loop;
	r->li = loop_idx;
	r->finished = 0;
	r->result = 0;
	r->d.value = 0;
	r->d.status = 0;
	__atomic_store_n(&r->d.started, 0, __ATOMIC_RELAXED);
	r->pid = XTC_PID_NONE;
	if (name != NULL) {
		strncpy(r->name, name, sizeof(r->name) - 1);
		r->name[sizeof(r->name) - 1] = 0;
	} else {
		r->name[0] = 0;
	}
	atomic_store_explicit(&r->kill, 0, memory_order_relaxed);
	*out = r;
	return XTC_OK;
}

int xtc__gocall_submit(xtc__gocalls_t *t, uint32_t idx, int loop_idx,
                       void *fn, uintptr_t arg, xtc_exec_class_t cls,
                       const char *name, int spin)
{
	gocall_t *r;
	int64_t prev;
	int granted = 0, rc;

	rc = rec_claim(t, idx, loop_idx, fn, arg, cls, name, &r);
	if (rc != XTC_OK)
		return rc;
	/* the loop's count is the grant's test (the Go side asks only as the
	 * table's one live call): one RMW per submission and settlement */
	prev = __atomic_fetch_add(&t->load[loop_idx], 1, __ATOMIC_RELAXED);
	granted = spin && prev == 0;
	/* a parked carrier: its wake-up (13 us p50 on the 2-vCPU guest) is
	 * the round trip, and the caller polls longer for it (gocall.go) */
	if (granted && atomic_load_explicit(&r->loop->sleeping,
	                                    memory_order_relaxed) != 0)
		granted = 2;
	__atomic_store_n(&r->d.waiter, granted ? XTC__GW_SPIN : XTC__GW_RING,
	                 __ATOMIC_RELAXED);
	/* published by the ring's release (or the overflow's push) */
	atomic_store_explicit(&r->state, XTC__GC_QUEUED, memory_order_relaxed);
	r->node.fn = gc_node_fn;
	rc = xtc__exec_submit_node(t->exec, loop_idx, &r->node);
	if (rc == 1) {
		atomic_fetch_add_explicit(&t->fallback, 1, memory_order_relaxed);
		rc = XTC_OK;
	}
	if (rc != XTC_OK) {
		atomic_store(&r->state, XTC__GC_FREE);
		__atomic_fetch_sub(&t->load[loop_idx], 1, __ATOMIC_RELAXED);
		return rc;
	}
	atomic_fetch_add_explicit(&t->submitted, 1, memory_order_relaxed);
	return granted;
}

int xtc__gocall_spawn(xtc__gocalls_t *t, uint32_t idx, int loop_idx,
                      void *fn, uintptr_t arg, xtc_exec_class_t cls,
                      const char *name, xtc_pid_t *out_pid)
{
	gocall_t *r;
	xtc_proc_opts_t o;
	xtc_pid_t pid;
	uint32_t q = XTC__GC_QUEUED;
	int rc;

	if (out_pid == NULL)
		return XTC_E_INVAL;
	rc = rec_claim(t, idx, loop_idx, fn, arg, cls, name, &r);
	if (rc != XTC_OK)
		return rc;
	__atomic_fetch_add(&t->load[loop_idx], 1, __ATOMIC_RELAXED);
	__atomic_store_n(&r->d.waiter, XTC__GW_RING, __ATOMIC_RELAXED);
	atomic_store(&r->state, XTC__GC_QUEUED);
	memset(&o, 0, sizeof(o));
	o.sched_class = cls;
	o.name = name;
	/* from this thread: through the loop's inbox (xtc_proc_spawn) */
	rc = xtc__proc_spawn_hooked(r->loop, gc_body, r, &o, gc_exit, r, &pid);
	if (rc != XTC_OK) {
		atomic_store(&r->state, XTC__GC_FREE);
		__atomic_fetch_sub(&t->load[loop_idx], 1, __ATOMIC_RELAXED);
		return rc;
	}
	/* the proc may have ended already: the caller keeps the record until
	 * it consumed the settlement, so r is still valid here */
	r->pid = pid;
	(void)atomic_compare_exchange_strong(&r->state, &q, XTC__GC_STARTED);
	atomic_fetch_add_explicit(&t->submitted, 1, memory_order_relaxed);
	*out_pid = pid;
	return XTC_OK;
}

int xtc__gocall_unspin(xtc__gocalls_t *t, uint32_t idx)
{
	uint32_t w = XTC__GW_SPIN;

	gocall_t *r = tab_ok(t) ? rec_at(t, idx) : NULL;

	if (r == NULL)
		return XTC_E_INVAL;
	if (__atomic_compare_exchange_n(&r->d.waiter, &w,
	                                XTC__GW_RING, 0, __ATOMIC_SEQ_CST,
	                                __ATOMIC_SEQ_CST))
		return 0;
	return w == XTC__GW_DONE ? 1 : XTC_E_INVAL;
}

int xtc__gocall_kill(xtc__gocalls_t *t, uint32_t idx)
{
	gocall_t *r = tab_ok(t) ? rec_at(t, idx) : NULL;

	if (r == NULL)
		return XTC_E_INVAL;
	atomic_store(&r->kill, 1);
	if (atomic_load(&r->state) == XTC__GC_STARTED)
		(void)xtc_exit_pid(r->pid, XTC_E_ABORTED); /* INVAL: it ended */
	return XTC_OK;
}

int xtc__gocall_kill_unstarted(xtc__gocalls_t *t, uint32_t idx)
{
	int rc = xtc__gocall_kill(t, idx);

	if (rc != XTC_OK)
		return rc;
	/* Read after the kill word's store (both sequentially consistent):
	 * QUEUED here means gc_start sets STARTED later and then sees the
	 * kill, and gc_body checks it before calling the function, so the
	 * function never runs and never touches its argument. */
	return atomic_load(&rec_at(t, idx)->state) == XTC__GC_QUEUED;
}

int xtc__gocalls_pop(xtc__gocalls_t *t, uint32_t *out, int max)
{
	int n = 0;

	if (!tab_ok(t) || out == NULL || max < 0)
		return XTC_E_INVAL;
	while (n < max) {
		gocall_t *r = t->cpriv;

		if (r == NULL) {
			/* take the whole stack, reversed: oldest first */
			gocall_t *h = atomic_exchange_explicit(&t->chead, NULL,
			                                       memory_order_acquire);
			while (h != NULL) {
				gocall_t *nx = h->cnext;
				h->cnext = r;
				r = h;
				h = nx;
			}
			if (r == NULL)
				break;
		}
		/* read the link before the index leaves: the caller may
		 * reuse the record as soon as it has it */
		t->cpriv = r->cnext;
		out[n++] = r->idx;
	}
	return n;
}

int xtc__gocalls_arm(xtc__gocalls_t *t)
{
	if (!tab_ok(t))
		return XTC_E_INVAL;
	atomic_store(&t->armed, 1);
	/* the head only: a consumer pops until a pop comes back short, so
	 * its list is empty whenever no pop is under way, and one that is
	 * under way delivers what it took (the caller may arm meanwhile) */
	return atomic_load(&t->chead) != NULL;
}

int xtc__gocalls_peek(const xtc__gocalls_t *t)
{
	if (!tab_ok(t))
		return 0;
	return t->cpriv != NULL ||
	       atomic_load_explicit(&((xtc__gocalls_t *)t)->chead,
	                            memory_order_relaxed) != NULL;
}

void *xtc__gocalls_head(xtc__gocalls_t *t)
{
	return tab_ok(t) ? (void *)&t->chead : NULL;
}

void *xtc__gocalls_armed(xtc__gocalls_t *t)
{
	return tab_ok(t) ? (void *)&t->armed : NULL;
}

int32_t *xtc__gocalls_loads(xtc__gocalls_t *t, int *n)
{
	if (!tab_ok(t) || n == NULL)
		return NULL;
	*n = t->n_loops;
	return t->load;
}

int xtc__gocall_pid(const xtc__gocalls_t *t, uint32_t idx, xtc_pid_t *out)
{
	const gocall_t *r;

	if (!tab_ok(t) || idx > t->mask || out == NULL)
		return XTC_E_INVAL;
	r = rec_at(t, idx);
	if (r == NULL)
		return XTC_E_INVAL;
	*out = atomic_load(&((gocall_t *)r)->state) >= XTC__GC_STARTED
	           ? r->pid : XTC_PID_NONE;
	return XTC_OK;
}

void xtc__gocalls_bell(xtc__gocalls_t *t)
{
	if (tab_ok(t))
		ring_bell(t);
}

int xtc__gocalls_settle(xtc__gocalls_t *t)
{
	int n = 0;

	if (!tab_ok(t))
		return XTC_E_INVAL;
	for (uint32_t i = 0, hi = atomic_load(&t->hi); i < hi; i++) {
		gocall_t *r = rec_at(t, i);
		uint32_t s = r == NULL ? XTC__GC_FREE : atomic_load(&r->state);
		if (s == XTC__GC_QUEUED || s == XTC__GC_STARTED) {
			settle(r, 0, XTC_E_ABORTED);
			n++;
		}
	}
	return n;
}

void xtc__gocalls_stats(const xtc__gocalls_t *t, xtc__gocalls_stats_t *out)
{
	if (out == NULL)
		return;
	memset(out, 0, sizeof(*out));
	if (!tab_ok(t))
		return;
	out->submitted = atomic_load_explicit(&t->submitted, memory_order_relaxed);
	out->fallback = atomic_load_explicit(&t->fallback, memory_order_relaxed);
	out->ring = atomic_load_explicit(&t->n_ring, memory_order_relaxed);
	out->spun = atomic_load_explicit(&t->n_spun, memory_order_relaxed);
}

/* ------------------------------------------------------------------ */
/* the C halves of the other Go entry points                            */
/* ------------------------------------------------------------------ */

/*
 * Steps of a deadline-preemptible function (xtc_fn(3)) and the driver of
 * one xtc_launch(3), each run as a call of this front door (the Go side:
 * fn.go). The records are the Go side's, handed to a step by pointer; it
 * reads them back through xtc__gofn_view / xtc__golaunch_outcome only
 * after the step's call settled (so no struct layout crosses into Go).
 * A step's outcome is the record's own state (XTC_FN_*), never the
 * driver's return value: a driver killed or dropped at any point still
 * leaves the state C last wrote.
 */
struct xtc__gofn {
	xtc_fn_t fn;
	void *entry; /* intptr_t (*)(void *) */
	void *arg;
	int64_t slice;
	int op;      /* XTC__GOFN_* */
	int rc;      /* the step's xtc_fn_* result, valid when ran */
	int ran;     /* the step's C call returned */
};

static intptr_t gofn_step(void *a)
{
	xtc__gofn_t *r = a;
	int rc;

	if (r->op == XTC__GOFN_LAUNCH)
		rc = xtc_fn_launch(&r->fn, (xtc_fn_entry)r->entry, r->arg,
		                   r->slice);
	else
		rc = xtc_fn_resume(&r->fn, r->slice);
	r->rc = rc;
	r->ran = 1;
	return rc;
}

void *xtc__gofn_step_fn(void)
{
	return (void *)gofn_step;
}

xtc__gofn_t *xtc__gofn_new(void)
{
	return calloc(1, sizeof(xtc__gofn_t));
}

void xtc__gofn_prepare(xtc__gofn_t *r, int op, void *entry, void *arg,
                       int64_t slice)
{
	if (op == XTC__GOFN_LAUNCH) {
		/* a launch starts from a clean record (no context: idle or
		 * done), so "it ran" shows as a state other than idle */
		memset(r, 0, sizeof(*r));
		r->entry = entry;
		r->arg = arg;
	}
	r->op = op;
	r->slice = slice;
	r->rc = 0;
	r->ran = 0;
}

void xtc__gofn_view(const xtc__gofn_t *r, xtc__gofn_view_t *out)
{
	out->state = r->fn.state;
	out->result = r->fn.result;
	out->preemptions = r->fn.preemptions;
	out->run_ns = r->fn.run_ns;
	out->ran = r->ran;
	out->rc = r->rc;
}

int xtc__gofn_discard(xtc__gofn_t *r)
{
	return xtc__fn_discard(&r->fn);
}

void xtc__gofn_free(xtc__gofn_t *r)
{
	if (r == NULL)
		return;
	if (r->fn.state == XTC_FN_PREEMPTED)
		(void)xtc__fn_discard(&r->fn);
	free(r);
}

struct xtc__golaunch {
	void *fn;      /* intptr_t (*)(void *) */
	void *arg;
	int64_t timeout;
	char *name;    /* owned by the record (NULL: the default) */
	size_t mailbox_cap;
	intptr_t result;
	int rc;
	int ran;
};

/* The driver of one xtc_launch: a proc, so a fiber of a carrier, which is
 * what xtc_launch requires of its caller. Killed while it waits, it kills
 * the child and waits for it to be gone before it ends (xtc_launch(3)). */
static intptr_t golaunch_drive(void *a)
{
	xtc__golaunch_t *r = a;
	xtc_launch_opts_t o;

	memset(&o, 0, sizeof(o));
	o.name = r->name;
	o.mailbox_cap = r->mailbox_cap;
	r->rc = xtc_launch(NULL, (xtc_launch_fn)r->fn, r->arg, r->timeout, &o,
	                   &r->result);
	r->ran = 1;
	return 0;
}

void *xtc__golaunch_drive_fn(void)
{
	return (void *)golaunch_drive;
}

xtc__golaunch_t *xtc__golaunch_new(void *fn, void *arg, int64_t timeout,
                                   char *name, size_t cap)
{
	xtc__golaunch_t *r = calloc(1, sizeof(*r));

	if (r == NULL)
		return NULL;
	r->fn = fn;
	r->arg = arg;
	r->timeout = timeout;
	r->name = name;
	r->mailbox_cap = cap;
	return r;
}

void xtc__golaunch_free(xtc__golaunch_t *r)
{
	if (r == NULL)
		return;
	free(r->name);
	free(r);
}

int xtc__golaunch_outcome(const xtc__golaunch_t *r, int *ran,
                          intptr_t *result)
{
	*ran = r->ran;
	*result = r->result;
	return r->rc;
}

/* Submit (completion.go): dispatch fn (an intptr_t (*)(void *)) on loop
 * and route its result into cq under tag. The slot was reserved by the Go
 * side, so notify only fails on a bug; the dispatch is then cancelled and
 * the future dropped. */
int xtc__gofut_submit(xtc_loop_t *loop, void *fn, void *arg, xtc_cq_t *cq,
                      uint64_t tag, xtc_dispatch_handle_t **out_h)
{
	xtc_future_t *f = NULL;
	/* read before the dispatch wakes it (a hint, as the call's grant) */
	int parked = loop != NULL &&
	    atomic_load_explicit(&loop->sleeping, memory_order_relaxed) != 0;
	int rc = xtc__dispatch_coro(loop, (xtc_coro_fn)fn, arg, &f, out_h);

	if (rc != 0)
		return rc;
	rc = xtc_future_notify(f, cq, tag);
	if (rc != 0) {
		xtc_dispatch_cancel(*out_h);
		*out_h = NULL;
		xtc_future_drop(f);
		return rc;
	}
	return parked;
}

int xtc__gocq_disarm(xtc_cq_t *cq)
{
	return xtc__cq_disarm(cq);
}

/* ------------------------------------------------------------------ */
/* the mailbox relay (mailbox.go)                                       */
/* ------------------------------------------------------------------ */

/*
 * Exec.NewMailbox: a relay proc owns the pid goroutines receive on. It
 * hands each message to Go through the completion queue (tag: a message,
 * whose value is an xtc__gombox_rec_t the Go side frees; tag + 1: the
 * relay is gone; tag + 2: the reply to a control request), at most
 * `window` unread at a time (credits; Go returns one per message read),
 * and serves control requests (monitor, demonitor, link, unlink: a
 * message carrying the record's random token) even while Go is behind.
 */
enum { XTC__GOMBOX_TOKEN = 16, XTC__GOMBOX_CTL = XTC__GOMBOX_TOKEN + 1 + 8 };

struct xtc__gombox {
	xtc_cq_t *cq;
	uint64_t tag;            /* tag: messages, +1: gone, +2: control replies */
	_Atomic int credits;
	unsigned char token[XTC__GOMBOX_TOKEN];
	xtc_promise_t *gone;
};

struct xtc__gombox_rec {
	size_t len;
	unsigned char data[];
};

/* One entry into the queue; waits (parks the relay) while the ring is full. */
static void gombox_push(xtc__gombox_t *m, uint64_t tag, intptr_t v, int st)
{
	for (;;) {
		xtc_promise_t *p;
		xtc_future_t *f;
		int rc;

		if (xtc_future_new_pair(&p, &f) != 0) {
			xtc_proc_sleep(100000);
			continue;
		}
		rc = xtc_future_notify(f, m->cq, tag);
		if (rc == 0) {
			xtc_promise_set(p, v, st);
			return;
		}
		xtc_future_drop(f);
		xtc_promise_drop(p);
		xtc_proc_sleep(100000); /* ring full: Go is behind */
	}
}

static void gombox_control(xtc__gombox_t *m, const unsigned char *c)
{
	uint64_t v;
	xtc_pid_t pid;
	uint64_t ref = 0;
	int rc;

	memcpy(&v, c + XTC__GOMBOX_TOKEN + 1, 8);
	pid.loop_id = (uint16_t)(v >> 48);
	pid.local_id = (uint16_t)(v >> 32);
	pid.gen = (uint32_t)v;
	switch (c[XTC__GOMBOX_TOKEN]) {
	case 'M': rc = xtc_monitor(pid, &ref); break;
	case 'D': rc = xtc_demonitor(v); break;
	case 'L': rc = xtc_link(pid); break;
	case 'U': rc = xtc_unlink(pid); break;
	default: rc = XTC_E_INVAL;
	}
	gombox_push(m, m->tag + 2, (intptr_t)ref, rc);
}

static int gombox_is_ctl(const void *data, size_t size, void *user)
{
	xtc__gombox_t *m = user;

	return size == XTC__GOMBOX_CTL && memcmp(data, m->token, XTC__GOMBOX_TOKEN) == 0;
}

static void gombox_body(void *a)
{
	xtc__gombox_t *m = a;

	for (;;) {
		void *msg;
		size_t len;
		xtc__gombox_rec_t *r;
		int rc;

		/* Go has `window` messages unread: take only control requests */
		/* (the data stays queued, in order) until Go receives. */
		while (atomic_load(&m->credits) <= 0) {
			rc = xtc_recv_match(gombox_is_ctl, m, &msg, &len, 100000);
			if (rc == XTC_OK) {
				gombox_control(m, msg);
				xtc_free(msg);
			} else if (rc != XTC_E_AGAIN) {
				return;
			}
		}
		if (xtc_recv(&msg, &len, -1) != 0)
			return;
		if (len == XTC__GOMBOX_CTL &&
		    memcmp(msg, m->token, XTC__GOMBOX_TOKEN) == 0) {
			gombox_control(m, msg);
			xtc_free(msg);
			continue;
		}
		r = malloc(sizeof(*r) + len);
		while (r == NULL) {
			xtc_proc_sleep(1000000);
			r = malloc(sizeof(*r) + len);
		}
		r->len = len;
		if (len > 0)
			memcpy(r->data, msg, len);
		xtc_free(msg);
		atomic_fetch_sub(&m->credits, 1);
		gombox_push(m, m->tag, (intptr_t)r, 0);
	}
}

static void gombox_exit(void *a, int reason)
{
	xtc__gombox_t *m = a;

	(void)reason;
	xtc_promise_set(m->gone, 0, 0); /* Go frees m when this arrives */
}

/* The record, with its gone entry routed to the queue (tag + 1). */
int xtc__gombox_new(xtc_cq_t *cq, uint64_t tag, int window,
                         const unsigned char *token, xtc__gombox_t **out)
{
	xtc__gombox_t *m = calloc(1, sizeof(*m));
	xtc_future_t *f;
	int rc;

	if (m == NULL)
		return XTC_E_NOMEM;
	m->cq = cq;
	m->tag = tag;
	atomic_init(&m->credits, window);
	memcpy(m->token, token, XTC__GOMBOX_TOKEN);
	if ((rc = xtc_future_new_pair(&m->gone, &f)) != 0) {
		free(m);
		return rc;
	}
	if ((rc = xtc_future_notify(f, cq, tag + 1)) != 0) {
		xtc_future_drop(f);
		xtc_promise_drop(m->gone);
		free(m);
		return rc;
	}
	*out = m;
	return 0;
}

/* Start the relay on loop; on failure the gone entry is settled (Go frees */
/* m when it arrives, as after a normal exit). */
int xtc__gombox_spawn(xtc_loop_t *loop, xtc__gombox_t *m, size_t cap,
                           xtc_pid_t *pid)
{
	xtc_proc_opts_t o = {0};
	int rc;

	o.name = "xtc.Mailbox";
	o.mailbox_cap = cap;
	rc = xtc__proc_spawn_hooked(loop, gombox_body, m, &o,
	    gombox_exit, m, pid);
	if (rc != 0)
		xtc_promise_set(m->gone, 0, 0);
	return rc;
}

void xtc__gombox_credit(xtc__gombox_t *m) { atomic_fetch_add(&m->credits, 1); }
size_t xtc__gombox_rec_len(const xtc__gombox_rec_t *r) { return r->len; }
void *xtc__gombox_rec_data(xtc__gombox_rec_t *r) { return r->data; }

void xtc__gombox_free(xtc__gombox_t *m)
{
	free(m);
}
