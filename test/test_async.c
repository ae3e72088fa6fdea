/* test_async.c - coroutines: start at the next step, await (fiber, driving
 * thread, foreign thread), yield order and no-op cases, yield_ex codes,
 * stack size, the yield budget, task exit, and 10^6 spawn/exit cycles with
 * flat RSS. */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "xtc.h"
#include "loop_int.h"

#include "test_util.h"

static char trace[256];
static int ntrace;
static void mark(char c) { if (ntrace < 255) trace[ntrace++] = c; }

static intptr_t letters(void *a)
{
	char base = (char)(intptr_t)a;
	volatile char local[64]; /* stack-resident state survives yields */

	for (int i = 0; i < 3; i++) {
		local[i] = (char)(base + i);
		mark(local[i]);
		xtc_yield();
	}
	return local[0] + local[1] + local[2];
}

static void test_order_and_drive(void)
{
	xtc_loop_t *l;
	xtc_task_t *a, *b;
	intptr_t ra = 0, rb = 0;

	REQUIRE(xtc_loop_init(&l) == 0);
	ntrace = 0;
	CHECK(xtc_async(l, letters, (void *)(intptr_t)'a', &a) == 0);
	CHECK(xtc_async(l, letters, (void *)(intptr_t)'A', &b) == 0);
	CHECK(ntrace == 0); /* starts at the next step, not inside async */
	/* Await from the main thread before run drives the loop itself. */
	CHECK(xtc_await(b, &rb) == 0);
	CHECK(rb == 'A' + 'B' + 'C');
	CHECK(xtc_await(a, &ra) == 0);
	CHECK(ra == 'a' + 'b' + 'c');
	trace[ntrace] = 0;
	CHECK(strcmp(trace, "aAbBcC") == 0);
	CHECK(xtc_await(a, NULL) == 0); /* already done */
	CHECK(xtc_loop_run(l) == 0);
	CHECK(xtc_loop_fini(l) == 0);
}

static intptr_t child(void *a)
{
	xtc_yield();
	xtc_yield();
	return (intptr_t)a * 2;
}

struct par { xtc_loop_t *l; intptr_t got; int rc_self, rc_null; };

static intptr_t parent(void *a)
{
	struct par *p = a;
	xtc_task_t *c;

	CHECK(xtc_async(p->l, child, (void *)21, &c) == 0);
	CHECK(xtc_await(c, &p->got) == 0);
	p->rc_self = xtc_await(xtc__task_current(), NULL);
	p->rc_null = xtc_await(NULL, NULL);
	return 0;
}

static int stackless_awaiter(xtc_task_t *self, void *u)
{
	xtc_task_t *target = u;

	(void)self;
	if (atomic_load(&target->state) != XTC__T_DONE)
		CHECK(xtc_await(target, NULL) == XTC_E_INVAL);
	return XTC_TASK_DONE;
}

static void test_await_in_fiber(void)
{
	xtc_loop_t *l;
	struct par p = { 0 };
	xtc_task_t *slow;

	REQUIRE(xtc_loop_init(&l) == 0);
	p.l = l;
	CHECK(xtc_async(l, parent, &p, NULL) == 0);
	CHECK(xtc_async(l, child, (void *)1, &slow) == 0);
	CHECK(xtc_task_spawn(l, stackless_awaiter, slow, NULL) == 0);
	CHECK(xtc_loop_run(l) == 0);
	CHECK(p.got == 42);
	CHECK(p.rc_self == XTC_E_DEADLK);
	CHECK(p.rc_null == XTC_E_INVAL);
	CHECK(xtc_async(NULL, child, NULL, NULL) == XTC_E_INVAL);
	CHECK(xtc_async(l, NULL, NULL, NULL) == XTC_E_INVAL);
	CHECK(xtc_loop_fini(l) == 0);
}

/* Await from a foreign thread while the loop runs elsewhere. */
static intptr_t sleeper(void *a)
{
	for (int i = 0; i < 5; i++) {
		xtc__park(1000000, -1, 0, NULL);
	}
	return (intptr_t)a;
}

struct aw { xtc_task_t *t; intptr_t r; int rc; };
static void *await_thread(void *p)
{
	struct aw *w = p;

	w->rc = xtc_await(w->t, &w->r);
	return NULL;
}

static void test_await_foreign(void)
{
	xtc_loop_t *l;
	struct aw w = { 0 };
	pthread_t th;

	REQUIRE(xtc_loop_init(&l) == 0);
	CHECK(xtc_async(l, sleeper, (void *)7, &w.t) == 0);
	/* Make sure the loop is owned by this thread before the waiter. */
	CHECK(xtc__loop_enter(l) == 0);
	CHECK(xtc__loop_step(l, 0) == 1);
	pthread_create(&th, NULL, await_thread, &w);
	while (!xtc__loop_quiescent(l))
		CHECK(xtc__loop_step(l, 1) >= 0);
	xtc__loop_leave(l);
	pthread_join(th, NULL);
	CHECK(w.rc == 0 && w.r == 7);
	CHECK(xtc_loop_fini(l) == 0);
}

/* ---- await across loops and threads vs loop fini -------------------- */

/* A coroutine that never finishes on its own: parks untimed. */
static intptr_t forever(void *a)
{
	(void)a;
	for (;;)
		xtc__park(-1, -1, 0, NULL);
	return 0;
}

static intptr_t gated(void *a)
{
	while (!atomic_load((_Atomic int *)a))
		xtc__park(1000000, -1, 0, NULL);
	return 99;
}

struct xw { xtc_task_t *t; intptr_t r; int rc, done; };

static intptr_t fiber_waiter(void *a)
{
	struct xw *w = a;

	w->r = -1;
	w->rc = xtc_await(w->t, &w->r);
	w->done = 1;
	return 0;
}

static int hooked(xtc_task_t *t)
{
	return atomic_load(&t->waiters) != NULL;
}

/* A coroutine's loop is finalised while a plain thread (which cannot drive
 * it: this thread owns it) and a fiber of another loop await it: both get
 * XTC_E_ABORTED, and neither touches the freed task. */
static void test_fini_awaited_loop(void)
{
	xtc_loop_t *lt, *lw;
	struct aw tw = { 0 };
	struct xw fw = { 0 };
	pthread_t th;

	REQUIRE(xtc_loop_init(&lt) == 0);
	REQUIRE(xtc_loop_init(&lw) == 0);
	CHECK(xtc_async(lt, forever, NULL, &tw.t) == 0);
	fw.t = tw.t;
	CHECK(xtc__loop_enter(lt) == 0);
	CHECK(xtc__loop_step(lt, 0) == 1); /* parked */
	pthread_create(&th, NULL, await_thread, &tw);
	while (!hooked(tw.t))
		usleep(100);
	xtc__loop_leave(lt);
	CHECK(xtc_async(lw, fiber_waiter, &fw, NULL) == 0);
	CHECK(xtc__loop_enter(lw) == 0);
	CHECK(xtc__loop_step(lw, 0) == 1); /* fiber waiter parked */
	xtc__loop_leave(lw);
	CHECK(fw.done == 0);
	CHECK(xtc_loop_fini(lt) == 0);
	pthread_join(th, NULL);
	CHECK(tw.rc == XTC_E_ABORTED);
	CHECK(xtc_loop_run(lw) == 0);
	CHECK(fw.done == 1 && fw.rc == XTC_E_ABORTED && fw.r == -1);
	CHECK(xtc_loop_fini(lw) == 0);
}

/* Same, but the waiters return before the fini finishes or after it: run a
 * few rounds with the thread waiter racing the fini. */
static void test_fini_awaited_race(void)
{
	for (int i = 0; i < 50; i++) {
		xtc_loop_t *lt;
		struct aw tw = { 0 };
		pthread_t th;

		REQUIRE(xtc_loop_init(&lt) == 0);
		CHECK(xtc_async(lt, forever, NULL, &tw.t) == 0);
		CHECK(xtc__loop_enter(lt) == 0);
		CHECK(xtc__loop_step(lt, 0) == 1);
		pthread_create(&th, NULL, await_thread, &tw);
		while (!hooked(tw.t))
			sched_yield();
		xtc__loop_leave(lt);
		CHECK(xtc_loop_fini(lt) == 0);
		pthread_join(th, NULL);
		CHECK(tw.rc == XTC_E_ABORTED);
	}
}

/* The waiter's loop is finalised while the awaited coroutine (another
 * loop) still runs; then the coroutine completes: it must not write into
 * the released fiber's node or wake its freed task. */
static void test_fini_waiter_loop(void)
{
	xtc_loop_t *lt, *lw;
	struct xw fw = { 0 };
	_Atomic int gate = 0;
	intptr_t r = 0;

	REQUIRE(xtc_loop_init(&lt) == 0);
	REQUIRE(xtc_loop_init(&lw) == 0);
	CHECK(xtc_async(lt, gated, &gate, &fw.t) == 0);
	/* Start it first, so its stack is not the one the fini releases. */
	CHECK(xtc__loop_enter(lt) == 0);
	CHECK(xtc__loop_step(lt, 0) == 1);
	xtc__loop_leave(lt);
	CHECK(xtc_async(lw, fiber_waiter, &fw, NULL) == 0);
	CHECK(xtc__loop_enter(lw) == 0);
	CHECK(xtc__loop_step(lw, 0) == 1); /* parked on fw.t */
	xtc__loop_leave(lw);
	CHECK(hooked(fw.t));
	CHECK(xtc_loop_fini(lw) == 0);
	CHECK(fw.done == 0);
	atomic_store(&gate, 1);
	CHECK(xtc_await(fw.t, &r) == 0 && r == 99); /* drives lt */
	CHECK(xtc_loop_fini(lt) == 0);
}

/* Both on one loop, both unfinished at fini: no leak, no hang. */
static void test_fini_same_loop(void)
{
	xtc_loop_t *l;
	struct xw fw = { 0 };

	REQUIRE(xtc_loop_init(&l) == 0);
	CHECK(xtc_async(l, forever, NULL, &fw.t) == 0);
	CHECK(xtc_async(l, fiber_waiter, &fw, NULL) == 0);
	CHECK(xtc__loop_enter(l) == 0);
	CHECK(xtc__loop_step(l, 0) == 1);
	CHECK(xtc__loop_step(l, 0) == 1);
	xtc__loop_leave(l);
	CHECK(hooked(fw.t));
	CHECK(xtc_loop_fini(l) == 0);
	CHECK(fw.done == 0);
}

/* Cross-thread completion race: a fiber on one loop thread awaits a
 * coroutine completed on another loop thread (handshake, no lost wake). */
static void *run_loop_thread(void *p)
{
	CHECK(xtc_loop_run(p) == 0);
	return NULL;
}

static intptr_t quick(void *a)
{
	return (intptr_t)a + 1;
}

static intptr_t remote_awaiter(void *a)
{
	xtc_loop_t *lt = a;
	intptr_t sum = 0, r;
	xtc_task_t *t;

	for (int i = 0; i < 200; i++) {
		int rc;

		while ((rc = xtc_async(lt, quick, (void *)(intptr_t)i, &t)) ==
		       XTC_E_AGAIN)
			xtc_yield();
		CHECK(rc == 0);
		r = 0;
		CHECK(xtc_await(t, &r) == 0);
		sum += r;
	}
	return sum;
}

static intptr_t keepalive(void *a)
{
	while (!atomic_load((_Atomic int *)a))
		xtc__park(1000000, -1, 0, NULL);
	return 0;
}

static void test_await_cross_thread(void)
{
	xtc_loop_t *lt, *lw;
	xtc_task_t *w;
	_Atomic int stop = 0;
	intptr_t r = 0;
	pthread_t th;

	REQUIRE(xtc_loop_init(&lt) == 0);
	REQUIRE(xtc_loop_init(&lw) == 0);
	CHECK(xtc_async(lt, keepalive, &stop, NULL) == 0);
	pthread_create(&th, NULL, run_loop_thread, lt);
	CHECK(xtc_async(lw, remote_awaiter, lt, &w) == 0);
	CHECK(xtc_await(w, &r) == 0);
	CHECK(r == 200 * 201 / 2);
	atomic_store(&stop, 1);
	pthread_join(th, NULL);
	CHECK(xtc_loop_fini(lw) == 0);
	CHECK(xtc_loop_fini(lt) == 0);
}

/* Another thread reads the loop's liveness (lock-free) while it is
 * finalised: atomic under TSan, and 0 once finalised. */
static void *poll_liveness(void *p)
{
	xtc_loop_t *l = p;

	for (int i = 0; i < 100000; i++)
		(void)xtc_yield_due_count(l);
	return NULL;
}

static void test_liveness_race(void)
{
	xtc_loop_t *l;
	pthread_t th;

	REQUIRE(xtc_loop_init(&l) == 0);
	pthread_create(&th, NULL, poll_liveness, l);
	usleep(100);
	CHECK(xtc_loop_fini(l) == 0);
	pthread_join(th, NULL);
	CHECK(xtc_yield_due_count(l) == 0);
}

/* ---- yield and yield_ex off a fiber --------------------------------- */

static int yield_in_task(xtc_task_t *self, void *u)
{
	int *rc = u;

	(void)self;
	xtc_yield(); /* stackless: no-op */
	*rc = xtc_yield_ex();
	return XTC_TASK_DONE;
}

static void test_yield_codes(void)
{
	xtc_loop_t *l;
	int rc = 0;

	xtc_yield(); /* off a loop: returns at once */
	CHECK(xtc_yield_ex() == XTC_E_INVAL);
	REQUIRE(xtc_loop_init(&l) == 0);
	CHECK(xtc_task_spawn(l, yield_in_task, &rc, NULL) == 0);
	CHECK(xtc_loop_run(l) == 0);
	CHECK(rc == XTC_E_INVAL);
	CHECK(xtc_loop_fini(l) == 0);
}

/* ---- stack size ------------------------------------------------------ */

static intptr_t deep(void *a)
{
	volatile char buf[100 * 1024];

	buf[0] = 1;
	buf[sizeof(buf) - 1] = 2;
	(void)a;
	return buf[0] + buf[sizeof(buf) - 1];
}

static void test_stack_size(void)
{
	size_t def = xtc_stack_size();
	xtc_loop_t *l;
	xtc_task_t *t;
	intptr_t r = 0;

	CHECK(def == 64 * 1024);
	CHECK(xtc_set_stack_size(8 * 1024) == XTC_E_INVAL);
	CHECK(xtc_set_stack_size(0) == XTC_E_INVAL);
	CHECK(xtc_set_stack_size(200 * 1024 + 1) == 0);
	CHECK(xtc_stack_size() >= 200 * 1024 + 1 &&
	      xtc_stack_size() % 4096 == 0);
	REQUIRE(xtc_loop_init(&l) == 0);
	CHECK(xtc_async(l, deep, NULL, &t) == 0);
	CHECK(xtc_await(t, &r) == 0);
	CHECK(r == 3);
	CHECK(xtc_loop_fini(l) == 0);
	CHECK(xtc_set_stack_size(def) == 0);
	CHECK(xtc_stack_size() == def);
}

/* ---- yield budget ----------------------------------------------------- */

struct bud { int64_t waited; int checks_before; int if_due; uint64_t due; };

static intptr_t budget_spinner(void *a)
{
	struct bud *b = a;
	int64_t t0 = xtc__task_current()->run_start; /* stamped at dispatch */

	while (!xtc_yield_check())
		b->checks_before++;
	b->waited = xtc_clock_mono() - t0;
	/* After a yield the run restarts: not due right away. */
	xtc_yield();
	b->if_due = xtc_yield_if_due();
	return 0;
}

static intptr_t no_budget(void *a)
{
	int *zero = a;

	for (int i = 0; i < 1000; i++)
		*zero += xtc_yield_check() + xtc_yield_if_due();
	return 0;
}

static void test_budget(void)
{
	xtc_loop_t *l;
	struct bud b = { 0 };
	int zero = 0;

	CHECK(xtc_yield_check() == 0);
	CHECK(xtc_yield_if_due() == 0);
	CHECK(xtc_yield_due_count(NULL) == 0);
	xtc_yield_set_budget(NULL, 5); /* no-op */
	REQUIRE(xtc_loop_init(&l) == 0);
	CHECK(xtc_async(l, no_budget, &zero, NULL) == 0);
	CHECK(xtc_loop_run(l) == 0);
	CHECK(zero == 0);
	CHECK(l->feat == 0);
	xtc_yield_set_budget(l, 2000000);
	CHECK(l->feat & XTC__LF_BUDGET);
	CHECK(xtc_async(l, budget_spinner, &b, NULL) == 0);
	CHECK(xtc_loop_run(l) == 0);
	CHECK(b.waited >= 2000000); /* never due before the budget */
	CHECK(b.if_due == 0);
	CHECK(xtc_yield_due_count(l) == 1);
	xtc_yield_set_budget(l, -7); /* negative = off */
	CHECK(l->feat == 0 && l->yield_budget == 0);
	CHECK(xtc_loop_fini(l) == 0);
}

/* ---- task exit from a nested frame ----------------------------------- */

static void nested_exit(int depth)
{
	if (depth == 0) {
		xtc__task_exit(99);
		CHECK(0); /* does not return on a fiber */
		return;
	}
	nested_exit(depth - 1);
	CHECK(0);
}

static intptr_t exiter(void *a)
{
	(void)a;
	nested_exit(5);
	return 0;
}

static void test_task_exit(void)
{
	xtc_loop_t *l;
	xtc_task_t *t;
	intptr_t r = 0;

	REQUIRE(xtc_loop_init(&l) == 0);
	CHECK(xtc_async(l, exiter, NULL, &t) == 0);
	CHECK(xtc_await(t, &r) == 0);
	CHECK(r == 99);
	CHECK(xtc_loop_fini(l) == 0);
}

/* ---- 10^6 spawn/exit: RSS stays flat ---------------------------------- */

static long rss_kib(void)
{
	FILE *f = fopen("/proc/self/statm", "r");
	long pages = 0, res = 0;

	if (f == NULL)
		return -1;
	if (fscanf(f, "%ld %ld", &pages, &res) != 2)
		res = -1;
	fclose(f);
	return res * (sysconf(_SC_PAGESIZE) / 1024);
}

static long n_done;
static intptr_t tiny(void *a)
{
	(void)a;
	n_done++;
	return 0;
}

struct churn { xtc_loop_t *l; long total, batch; };
static intptr_t churn_driver(void *a)
{
	struct churn *c = a;

	for (long i = 0; i < c->total; i += c->batch) {
		for (long k = 0; k < c->batch; k++)
			CHECK(xtc_async(c->l, tiny, NULL, NULL) == 0);
		while (n_done < i + c->batch)
			xtc_yield();
	}
	return 0;
}

#if defined(__SANITIZE_THREAD__)
/* TSan creates a heavy context per fiber: a smaller count, no RSS check. */
#define CHURN_N 6400L /* a multiple of the batch */
#define CHURN_RSS 0
#else
#define CHURN_N 1000000L
#define CHURN_RSS 1
#endif

static void test_churn(void)
{
	xtc_loop_t *l;
	struct churn c = { .batch = 64 };
	long rss0, rss1;

	REQUIRE(xtc_loop_init(&l) == 0);
	c.l = l;
	c.total = CHURN_N / 10;
	n_done = 0;
	CHECK(xtc_async(l, churn_driver, &c, NULL) == 0);
	CHECK(xtc_loop_run(l) == 0);
	rss0 = rss_kib();
	c.total = CHURN_N;
	n_done = 0;
	CHECK(xtc_async(l, churn_driver, &c, NULL) == 0);
	CHECK(xtc_loop_run(l) == 0);
	rss1 = rss_kib();
	CHECK(n_done == CHURN_N);
	CHECK(l->live_tasks == 0);
	/* Flat: 10^6 spawns may not grow RSS by more than 2 MiB (a leak of
	 * even one 64 KiB stack per 1000 spawns would be 64 MiB). */
	if (CHURN_RSS) {
		CHECK(rss1 - rss0 < 2048);
		if (rss1 - rss0 >= 2048)
			fprintf(stderr, "rss grew %ld KiB -> %ld KiB\n", rss0, rss1);
	}
	CHECK(xtc_loop_fini(l) == 0);
}

/* ---- burst above the stack cache: stacks are pooled, not remapped ---- */

enum { BURST = 600 };
static void *burst_lo[2][BURST];
static int burst_round, burst_i;
static void nop_timer(void *u)
{
	(void)u;
}

static intptr_t burst_fiber(void *a)
{
	(void)a;
	burst_lo[burst_round][burst_i++] = xtc__task_current()->fiber.stack.lo;
	xtc_yield(); /* all BURST fibers are alive at once */
	return 0;
}

static int cmp_ptr(const void *a, const void *b)
{
	uintptr_t x = (uintptr_t)*(void *const *)a, y = (uintptr_t)*(void *const *)b;

	return (x > y) - (x < y);
}

static void test_stack_pool(void)
{
	xtc_loop_t *l;
	int reused = 0;

	REQUIRE(xtc_loop_init(&l) == 0);
	CHECK(xtc__loop_enter(l) == 0);
	for (burst_round = 0; burst_round < 2; burst_round++) {
		burst_i = 0;
		for (int i = 0; i < BURST; i++)
			CHECK(xtc_async(l, burst_fiber, NULL, NULL) == 0);
		while (!xtc__loop_quiescent(l))
			CHECK(xtc__loop_step(l, 0) >= 0);
		CHECK(burst_i == BURST);
	}
	/* Round 2 ran on round 1's stacks: the overflow pool handed them
	 * back instead of unmapping and mapping again. */
	CHECK(l->spool_n + xtc__stack_cache_count() >= BURST - 8);
	qsort(burst_lo[0], BURST, sizeof(void *), cmp_ptr);
	for (int i = 0; i < BURST; i++)
		if (bsearch(&burst_lo[1][i], burst_lo[0], BURST, sizeof(void *),
		            cmp_ptr) != NULL)
			reused++;
	CHECK(reused == BURST);
	/* Idle trim: stacks the pool did not hand out during a whole trim
	 * period are released when the loop blocks idle. */
	CHECK(l->spool_n > 0);
	/* Two idle blocks release them (the first marks what stayed unused).
	 * A block happens only when the timer is not due yet by the time the
	 * loop steps: a slow sanitizer build once stepped after a 100 us
	 * timer came due in both passes. Progress, not timing: more passes
	 * with a longer timer, bounded. */
	for (int pass = 0; pass < 20 && l->spool_n > 0; pass++) {
		l->spool_trim_at = 0; /* pretend the period elapsed */
		CHECK(xtc_timer_set(l, 5000000, nop_timer, NULL, NULL) == 0);
		while (l->pending_timers > 0)
			CHECK(xtc__loop_step(l, 1) >= 0);
	}
	CHECK(l->spool_n == 0);
	xtc__loop_leave(l);
	CHECK(xtc_loop_fini(l) == 0);
}

int main(void)
{
	test_order_and_drive();
	test_await_in_fiber();
	test_await_foreign();
	test_fini_awaited_loop();
	test_fini_awaited_race();
	test_fini_waiter_loop();
	test_fini_same_loop();
	test_await_cross_thread();
	test_liveness_race();
	test_yield_codes();
	test_stack_size();
	test_budget();
	test_task_exit();
	test_churn();
	test_stack_pool();
	if (failures) {
		fprintf(stderr, "test_async: %d failure(s)\n", failures);
		return 1;
	}
	printf("test_async: ok\n");
	return 0;
}
