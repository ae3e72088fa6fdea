/*
 * test_compat.c - libxtc programs run unchanged (issue 28): written like
 * one, against the public headers only, one case per behaviour libxtc
 * documents that xtc used to lack:
 *   - buffers the API hands out (xtc_recv, xtc_recv_match,
 *     xtc_recv_correlate, runtime DOWN messages) are released with plain
 *     free() as well as with xtc_free, on the receiving thread or another;
 *   - xtc_monitor(pid, NULL) is accepted and the DOWN still arrives;
 *     xtc_down_is_noproc classifies the benign "already gone" DOWN;
 *   - xtc_cancel_requested sees a pending kill and a cancelled dispatch;
 *   - the protothread macros (xtc_pt_t, XTC_PT_*);
 *   - xtc_strerror's texts are libxtc's;
 *   - xtc_io.h and xtc_dispatch.h exist and declare what libxtc's do;
 *   - xtc_stack_reclaim_* give a parked fiber's unused stack pages back.
 * (Fault containment: test_proc_fault.c; fault injection: test_sim_fault.c;
 * eager rebalance: test_sim.c.)
 */
#include "xtc_io.h"       /* libxtc's headers, included as libxtc programs do */
#include "xtc_dispatch.h"
#include "xtc.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "test_util.h"

/* ---- free() on received buffers ------------------------------------------ */

static const size_t sizes[] = { 0, 1, 8, 16, 17, 64, 100, 112, 113, 200, 4096 };
#define NSIZES (sizeof sizes / sizeof sizes[0])

static void fill(unsigned char *b, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		b[i] = (unsigned char)(seed * 31u + i);
}

static int same(const unsigned char *b, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		if (b[i] != (unsigned char)(seed * 31u + i))
			return 0;
	return 1;
}

struct fr {
	_Atomic int rx_ready;
	xtc_pid_t rx;
	int rounds, got, bad;
};

static int first_byte_is(const void *d, size_t n, void *u)
{
	return n > 0 && *(const unsigned char *)d == *(unsigned char *)u;
}

/* Receives rounds * NSIZES messages and releases them alternately with
 * free() and xtc_free(); then one through recv_match and two through
 * recv_correlate, freed with free(); then a DOWN, freed with free(). */
static void fr_receiver(void *arg)
{
	struct fr *c = arg;
	void *m;
	size_t n;

	c->rx = xtc_self();
	atomic_store(&c->rx_ready, 1);
	for (int i = 0; i < c->rounds * (int)NSIZES; i++) {
		if (xtc_recv(&m, &n, 10 * SEC) != XTC_OK) {
			c->bad++;
			return;
		}
		if (n != sizes[i % NSIZES] || !same(m, n, (unsigned)i))
			c->bad++;
		if (i % 3 == 2) { /* grow it first, as a program may */
			void *q = xtc_realloc(m, n + 300);
			if (q == NULL) {
				c->bad++;
				free(m);
				continue;
			}
			if (!same(q, n, (unsigned)i))
				c->bad++;
			m = q;
		}
		if (i & 1)
			free(m);
		else
			xtc_free(m);
		c->got++;
	}
	unsigned char key = 0x7e;
	if (xtc_recv_match(first_byte_is, &key, &m, &n, 10 * SEC) != XTC_OK) {
		c->bad++;
		return;
	}
	free(m);
	xtc_msg_t out[2];
	int got = 0;
	unsigned char corr = 0x55;
	if (xtc_recv_correlate(&corr, 1, 2, out, &got, 10 * SEC) != XTC_OK ||
	    got != 2) {
		c->bad++;
		return;
	}
	free(out[0].data);
	free(out[1].data);
	/* whatever else is queued (the unmatched ones), then a DOWN */
	while (xtc_recv(&m, &n, 0) == XTC_OK)
		free(m);
	xtc_pid_t gone = XTC_PID_NONE;
	gone.loop_id = 1;
	gone.local_id = 60000;
	gone.gen = 77;
	if (xtc_monitor(gone, NULL) != XTC_OK ||
	    xtc_recv(&m, &n, 10 * SEC) != XTC_OK) {
		c->bad++;
		return;
	}
	free(m);
	c->got++;
}

static int send_sized(xtc_pid_t to, size_t n, unsigned seed)
{
	unsigned char buf[4096];
	int rc;

	fill(buf, n, seed);
	while ((rc = xtc_send(to, buf, n)) == XTC_E_AGAIN)
		xtc_yield();
	return rc;
}

static void fr_sender(void *arg)
{
	struct fr *c = arg;
	unsigned char b[3];

	while (!atomic_load(&c->rx_ready))
		xtc_proc_sleep(100 * US);
	for (int i = 0; i < c->rounds * (int)NSIZES; i++)
		if (send_sized(c->rx, sizes[i % NSIZES], (unsigned)i) != XTC_OK)
			c->bad++;
	b[0] = 0x11, b[1] = 1, b[2] = 2; /* skipped by the match */
	CHECK_EQ(xtc_send(c->rx, b, 3), XTC_OK);
	b[0] = 0x7e;
	CHECK_EQ(xtc_send(c->rx, b, 3), XTC_OK);
	b[0] = 0x55;
	CHECK_EQ(xtc_send(c->rx, b, 3), XTC_OK);
	CHECK_EQ(xtc_send(c->rx, b, 3), XTC_OK);
}

static void *run_loop(void *arg)
{
	if (xtc_loop_run(arg) != XTC_OK)
		abort();
	return NULL;
}

static void test_free_received(void)
{
	/* one loop: the ping-pong path (handoff, block cache) */
	struct fr c;
	xtc_loop_t *l = new_loop();

	memset(&c, 0, sizeof c);
	c.rounds = 50;
	REQUIRE(xtc_proc_spawn(l, fr_receiver, &c, NULL, NULL) == XTC_OK);
	REQUIRE(xtc_proc_spawn(l, fr_sender, &c, NULL, NULL) == XTC_OK);
	CHECK_EQ(xtc_loop_run(l), XTC_OK);
	CHECK_EQ(c.bad, 0);
	CHECK_EQ(c.got, c.rounds * (int)NSIZES + 1);
	CHECK_EQ(xtc_loop_fini(l), XTC_OK);

	/* two loops on two threads: blocks freed on the other thread */
	xtc_loop_t *a = new_loop(), *b = new_loop();
	pthread_t th;

	memset(&c, 0, sizeof c);
	c.rounds = 50;
	REQUIRE(xtc_proc_spawn(b, fr_receiver, &c, NULL, NULL) == XTC_OK);
	REQUIRE(xtc_proc_spawn(a, fr_sender, &c, NULL, NULL) == XTC_OK);
	REQUIRE(pthread_create(&th, NULL, run_loop, b) == 0);
	CHECK_EQ(xtc_loop_run(a), XTC_OK);
	pthread_join(th, NULL);
	CHECK_EQ(c.bad, 0);
	CHECK_EQ(c.got, c.rounds * (int)NSIZES + 1);
	CHECK_EQ(xtc_loop_fini(a), XTC_OK);
	CHECK_EQ(xtc_loop_fini(b), XTC_OK);

	/* xtc_free still takes everything, including blocks of our size the
	 * program allocated itself */
	for (int i = 0; i < 1000; i++) {
		void *p = xtc_malloc((size_t)(i % 300));
		REQUIRE(p != NULL);
		memset(p, 0xa5, (size_t)(i % 300));
		xtc_free(p);
	}
	xtc_free(NULL);
}

/* ---- monitor with a NULL ref, xtc_down_is_noproc -------------------------- */

struct mon {
	int reason_child, reason_gone, down_info_kind, bad;
};

static void mon_child(void *arg)
{
	(void)arg;
	xtc_exit_self(5);
}

static int recv_down(int *reason, xtc_pid_t *pid)
{
	void *m;
	size_t n;
	int rc = xtc_recv(&m, &n, 10 * SEC);

	if (rc != XTC_OK)
		return rc;
	rc = xtc_down_decode(m, n, pid, reason);
	free(m);
	return rc;
}

static xtc_loop_t *mon_loop;

static void mon_parent(void *arg)
{
	struct mon *c = arg;
	xtc_pid_t child, who;

	/* the child runs only after we park: monitor it first, without a ref */
	if (xtc_proc_spawn(mon_loop, mon_child, NULL, NULL, &child) != XTC_OK ||
	    xtc_monitor(child, NULL) != XTC_OK ||
	    recv_down(&c->reason_child, &who) != XTC_OK ||
	    !xtc_pid_eq(who, child))
		c->bad++;
	/* now it is gone: an immediate DOWN with XTC_DOWN_NOPROC */
	if (xtc_monitor(child, NULL) != XTC_OK ||
	    recv_down(&c->reason_gone, &who) != XTC_OK)
		c->bad++;
	/* the argument checks that remain */
	if (xtc_monitor(XTC_PID_NONE, NULL) != XTC_E_INVAL ||
	    xtc_monitor(xtc_self(), NULL) != XTC_E_INVAL)
		c->bad++;
}

static void test_monitor_null_ref(void)
{
	struct mon c;

	memset(&c, 0, sizeof c);
	mon_loop = new_loop();
	REQUIRE(xtc_proc_spawn(mon_loop, mon_parent, &c, NULL, NULL) ==
	        XTC_OK);
	CHECK_EQ(xtc_loop_run(mon_loop), XTC_OK);
	CHECK_EQ(c.bad, 0);
	CHECK_EQ(c.reason_child, 5);
	CHECK_EQ(c.reason_gone, XTC_DOWN_NOPROC);
	CHECK_EQ(xtc_down_is_noproc(c.reason_gone), 1);
	CHECK_EQ(xtc_down_is_noproc(c.reason_child), 0);
	CHECK_EQ(xtc_down_is_noproc(0), 0);
	CHECK_EQ(xtc_down_is_noproc(XTC_DOWN_NOPROC), 1);
	/* off a proc: still refused */
	CHECK_EQ(xtc_monitor(XTC_PID_NONE, NULL), XTC_E_INVAL);
	CHECK_EQ(xtc_loop_fini(mon_loop), XTC_OK);
}

/* ---- xtc_cancel_requested ------------------------------------------------ */

struct cancel {
	_Atomic int started;
	_Atomic uint64_t pid_bits;
	xtc_pid_t pid;
	int seen_before, seen_after, done;
	xtc_dispatch_handle_t *h;
};

static void cancel_victim(void *arg)
{
	struct cancel *c = arg;
	int64_t until = xtc_clock_mono() + 30 * SEC;

	c->seen_before = xtc_cancel_requested();
	c->pid = xtc_self();
	atomic_store(&c->started, 1);
	/* a long computation that polls instead of yielding */
	while (!xtc_cancel_requested() && xtc_clock_mono() < until)
		;
	c->seen_after = xtc_cancel_requested();
	xtc_yield(); /* acts on the kill: never returns */
	c->done = 1;
}

static void *cancel_killer(void *arg)
{
	struct cancel *c = arg;

	while (!atomic_load(&c->started))
		usleep(100);
	if (xtc_exit_pid(c->pid, 9) != XTC_OK)
		abort();
	return NULL;
}

static int disp_body(void *arg)
{
	struct cancel *c = arg;
	int64_t until = xtc_clock_mono() + 30 * SEC;

	c->seen_before = xtc_cancel_requested();
	atomic_store(&c->started, 1);
	while (!xtc_cancel_requested() && xtc_clock_mono() < until)
		;
	c->seen_after = xtc_cancel_requested();
	return 3;
}

static void *disp_canceller(void *arg)
{
	struct cancel *c = arg;

	while (!atomic_load(&c->started))
		usleep(100);
	if (xtc_dispatch_cancel(c->h) != XTC_OK)
		abort();
	return NULL;
}

static void test_cancel_requested(void)
{
	struct cancel c;
	pthread_t th;
	xtc_loop_t *l = new_loop();

	CHECK_EQ(xtc_cancel_requested(), 0); /* off a fiber */
	memset(&c, 0, sizeof c);
	REQUIRE(xtc_proc_spawn(l, cancel_victim, &c, NULL, NULL) == XTC_OK);
	REQUIRE(pthread_create(&th, NULL, cancel_killer, &c) == 0);
	CHECK_EQ(xtc_loop_run(l), XTC_OK);
	pthread_join(th, NULL);
	CHECK_EQ(c.seen_before, 0);
	CHECK_EQ(c.seen_after, 1);
	CHECK_EQ(c.done, 0);

	/* a cancelled dispatch */
	xtc_future_t *f = NULL;
	intptr_t v = 0;

	memset(&c, 0, sizeof c);
	REQUIRE(xtc_dispatch(l, disp_body, &c, &f, &c.h) == XTC_OK);
	REQUIRE(pthread_create(&th, NULL, disp_canceller, &c) == 0);
	CHECK_EQ(xtc_loop_run(l), XTC_OK);
	pthread_join(th, NULL);
	CHECK_EQ(c.seen_before, 0);
	CHECK_EQ(c.seen_after, 1);
	CHECK_EQ(xtc_future_wait(f, &v, 10 * SEC), XTC_E_ABORTED);
	CHECK_EQ(v, 3);
	CHECK_EQ(xtc_loop_fini(l), XTC_OK);
}

/* ---- protothreads --------------------------------------------------------- */

static int pt_log[8], pt_n, pt_gate;

static XTC_PT_THREAD(pt_body(xtc_pt_t *pt, int *runs))
{
	XTC_PT_BEGIN(pt);
	pt_log[pt_n++] = 1;
	XTC_PT_YIELD(pt);
	pt_log[pt_n++] = 2;
	XTC_PT_WAIT_UNTIL(pt, pt_gate);
	pt_log[pt_n++] = 3;
	(*runs)++;
	XTC_PT_END(pt);
}

struct pt_task {
	xtc_pt_t pt;
	int runs, calls;
};

/* A protothread as a loop task's body. */
static int pt_task_fn(xtc_task_t *self, void *user)
{
	struct pt_task *s = user;

	(void)self;
	s->calls++;
	if (s->calls == 4)
		pt_gate = 1;
	return pt_body(&s->pt, &s->runs) == XTC_PT_DONE ? XTC_TASK_DONE
	                                                : XTC_TASK_RESCHED;
}

static void test_protothreads(void)
{
	xtc_pt_t pt;
	int runs = 0;

	XTC_PT_INIT(&pt);
	pt_n = 0, pt_gate = 0;
	CHECK_EQ(pt_body(&pt, &runs), XTC_PT_YIELDED);
	CHECK_EQ(pt_body(&pt, &runs), XTC_PT_YIELDED); /* waits for the gate */
	CHECK_EQ(pt_body(&pt, &runs), XTC_PT_YIELDED);
	CHECK_EQ(pt_n, 2);
	pt_gate = 1;
	CHECK_EQ(pt_body(&pt, &runs), XTC_PT_DONE);
	CHECK_EQ(runs, 1);
	CHECK_EQ(pt_n, 3);
	CHECK_EQ(pt_log[0] * 100 + pt_log[1] * 10 + pt_log[2], 123);
	/* END rewinds: it runs again from the start */
	CHECK_EQ(pt_body(&pt, &runs), XTC_PT_YIELDED);
	CHECK_EQ(pt_n, 4);

	struct pt_task s;
	xtc_loop_t *l = new_loop();

	memset(&s, 0, sizeof s);
	XTC_PT_INIT(&s.pt);
	pt_n = 0, pt_gate = 0;
	REQUIRE(xtc_task_spawn(l, pt_task_fn, &s, NULL) == XTC_OK);
	CHECK_EQ(xtc_loop_run(l), XTC_OK);
	CHECK_EQ(s.runs, 1);
	CHECK_EQ(s.calls, 4);
	CHECK_EQ(pt_n, 3);
	CHECK_EQ(xtc_loop_fini(l), XTC_OK);
}

/* ---- strerror, headers ----------------------------------------------------- */

static void test_strerror_texts(void)
{
	/* libxtc's texts, which programs and tests compare */
	CHECK(strcmp(xtc_strerror(XTC_OK), "ok") == 0);
	CHECK(strcmp(xtc_strerror(XTC_E_INVAL), "invalid argument") == 0);
	CHECK(strcmp(xtc_strerror(XTC_E_NOMEM), "out of memory") == 0);
	CHECK(strcmp(xtc_strerror(XTC_E_NOSYS),
	             "not implemented on this platform") == 0);
	CHECK(strcmp(xtc_strerror(XTC_E_RANGE), "numeric out of range") == 0);
	CHECK(strcmp(xtc_strerror(XTC_E_AGAIN),
	             "resource temporarily unavailable") == 0);
	CHECK(strcmp(xtc_strerror(XTC_E_INTERNAL),
	             "internal invariant violation") == 0);
	CHECK(strcmp(xtc_strerror(XTC_E_RESOURCE), "resource cap reached") == 0);
	CHECK(strcmp(xtc_strerror(-12345), "unknown") == 0);
}

static void test_headers(void)
{
	/* xtc_io.h: libxtc's values */
	CHECK_EQ(XTC_IO_READABLE, 0x01);
	CHECK_EQ(XTC_IO_WRITABLE, 0x02);
	CHECK_EQ(XTC_IO_HUP, 0x04);
	CHECK_EQ(XTC_IO_ERR, 0x08);
	CHECK_EQ(XTC_IO_WAKEUP, 0x10);
	const char *b = xtc_io_backend_name();
	CHECK(b != NULL && (strcmp(b, "uring") == 0 || strcmp(b, "epoll") == 0));
	/* xtc_dispatch.h: the declarations, by address */
	int (*d)(xtc_loop_t *, int (*)(void *), void *, xtc_future_t **,
	         xtc_dispatch_handle_t **) = xtc_dispatch;
	int (*dc)(xtc_dispatch_handle_t *) = xtc_dispatch_cancel;
	CHECK(d != NULL && dc != NULL);
	CHECK_EQ(xtc_dispatch(NULL, NULL, NULL, NULL, NULL), XTC_E_INVAL);
}

/* ---- stack reclaim --------------------------------------------------------- */

struct rc {
	uintptr_t lo, hi; /* the deep region this fiber touched */
	int resident_before, resident_after;
};

static int resident_pages(uintptr_t lo, uintptr_t hi)
{
	long pg = sysconf(_SC_PAGESIZE);
	unsigned char v[64];
	size_t n;
	int r = 0;

	lo = (lo + (uintptr_t)pg - 1) & ~((uintptr_t)pg - 1);
	hi &= ~((uintptr_t)pg - 1);
	if (hi <= lo)
		return -1;
	n = (hi - lo) / (size_t)pg;
	if (n > sizeof v)
		n = sizeof v;
	if (mincore((void *)lo, n * (size_t)pg, v) != 0)
		return -1;
	for (size_t i = 0; i < n; i++)
		r += v[i] & 1;
	return r;
}

static __attribute__((noinline)) void go_deep(struct rc *c)
{
	volatile char buf[24 * 1024];

	memset((char *)buf, 1, sizeof buf);
	/* the top of buf lies within keep_bytes (a page) of the stack pointer
	 * at the park, plus rounding: only the rest must be given back */
	c->lo = (uintptr_t)buf;
	c->hi = (uintptr_t)buf + sizeof buf - 2 * 4096;
	c->resident_before = resident_pages(c->lo, c->hi);
}

static void reclaim_body(void *arg)
{
	struct rc *c = arg;

	go_deep(c);
	xtc_proc_sleep(1 * MS); /* a park */
	c->resident_after = resident_pages(c->lo, c->hi);
}

static void test_stack_reclaim(void)
{
	struct rc c;
	xtc_loop_t *l = new_loop();
	uint64_t n0;

	CHECK_EQ(xtc_stack_reclaim_enabled(), 0);
	CHECK_EQ(xtc_stack_reclaim_enable((size_t)1 << 40), XTC_E_RANGE);
	CHECK_EQ(xtc_stack_reclaim_enable(0), XTC_OK);
	CHECK_EQ(xtc_stack_reclaim_enabled(), 1);
	n0 = xtc_stack_reclaim_count();
	memset(&c, 0, sizeof c);
	REQUIRE(xtc_proc_spawn(l, reclaim_body, &c, NULL, NULL) == XTC_OK);
	CHECK_EQ(xtc_loop_run(l), XTC_OK);
	CHECK(xtc_stack_reclaim_count() > n0);
	CHECK(c.resident_before > 0);
	CHECK_EQ(c.resident_after, 0);

	/* off: nothing is given back any more */
	xtc_stack_reclaim_disable();
	CHECK_EQ(xtc_stack_reclaim_enabled(), 0);
	n0 = xtc_stack_reclaim_count();
	memset(&c, 0, sizeof c);
	REQUIRE(xtc_proc_spawn(l, reclaim_body, &c, NULL, NULL) == XTC_OK);
	CHECK_EQ(xtc_loop_run(l), XTC_OK);
	CHECK_EQ(xtc_stack_reclaim_count(), n0);
	CHECK(c.resident_after > 0);
	CHECK_EQ(xtc_loop_fini(l), XTC_OK);
}

int main(int argc, char **argv)
{
	test_only = argc > 1 ? argv[1] : NULL;
	RUN(test_free_received);
	RUN(test_monitor_null_ref);
	RUN(test_cancel_requested);
	RUN(test_protothreads);
	RUN(test_strerror_texts);
	RUN(test_headers);
	RUN(test_stack_reclaim);
	if (failures) {
		fprintf(stderr, "test_compat: %d failure(s)\n", failures);
		return 1;
	}
	printf("test_compat: ok\n");
	return 0;
}
