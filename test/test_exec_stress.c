/*
 * test_exec_stress.c - two executor loops under cross-loop load:
 *  - 10^6 messages each way between procs on different loops (bounded
 *    mailboxes, XTC_E_AGAIN handled by yielding), every one received exactly
 *    once and in per-sender order;
 *  - 10^6 cross-loop wakes: token pairs split across the loops hand a turn
 *    back and forth with xtc_proc_wake; a lost wake hangs the pair (caught by
 *    the watchdog), a duplicate shows up as a wrong count;
 *  - pinned procs never change loop; migratable ones change only across a
 *    yield (never between two points of one run);
 *  - migratable ping-pong pairs on spinning, stealing carriers: watched
 *    wakes (loop_int.h) lose and duplicate nothing.
 * Under ThreadSanitizer the counts are divided by 10.
 */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

#include "xtc.h"
#include "xtc_exec.h"
#include "loop_int.h"
#include "test_util.h"

#if defined(__SANITIZE_THREAD__)
#define SCALE 10
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define SCALE 10
#endif
#endif
#ifndef SCALE
#define SCALE 1
#endif

#define NMSG   (1000000 / SCALE) /* per direction */
#define NSEND  8                 /* senders per direction */
#define NWAKE  (1000000 / SCALE) /* handoffs in total */
#define NPAIR  16

/* ---- messages ------------------------------------------------------------ */

struct rx {
	xtc_pid_t pid;
	atomic_long got;
	atomic_int bad;
};

static struct rx rxs[2 * NSEND];
static atomic_long sent_total, again_total;

static void receiver(void *a)
{
	struct rx *r = a;
	long expect = 0;

	while (expect < NMSG / NSEND) {
		void *m;
		size_t sz;
		long v;

		if (xtc_recv(&m, &sz, -1) != XTC_OK) {
			atomic_fetch_add(&r->bad, 1);
			return;
		}
		memcpy(&v, m, sizeof(v));
		xtc_free(m);
		if (sz != sizeof(v) || v != expect)
			atomic_fetch_add(&r->bad, 1);
		expect++;
		atomic_fetch_add_explicit(&r->got, 1, memory_order_relaxed);
	}
}

static void sender(void *a)
{
	struct rx *r = a;

	for (long i = 0; i < NMSG / NSEND; i++) {
		int rc;
		while ((rc = xtc_send(r->pid, &i, sizeof(i))) == XTC_E_AGAIN) {
			atomic_fetch_add_explicit(&again_total, 1,
			    memory_order_relaxed);
			xtc_yield();
		}
		if (rc != XTC_OK) {
			atomic_fetch_add(&r->bad, 1);
			return;
		}
		atomic_fetch_add_explicit(&sent_total, 1, memory_order_relaxed);
	}
}

/* ---- wakes --------------------------------------------------------------- */

struct pair {
	atomic_int turn;     /* 0: A's turn, 1: B's turn */
	xtc_pid_t pid[2];
	atomic_long handoffs;
	atomic_int ready;
};

static struct pair pairs[NPAIR];

struct side {
	struct pair *p;
	int me;
};

static struct side sides[NPAIR][2];

static void token(void *a)
{
	struct side *s = a;
	struct pair *p = s->p;
	long rounds = NWAKE / NPAIR / 2;

	p->pid[s->me] = xtc_self();
	atomic_fetch_add(&p->ready, 1);
	while (atomic_load(&p->ready) < 2)
		xtc_yield();
	for (long i = 0; i < rounds; i++) {
		while (atomic_load(&p->turn) != s->me)
			xtc__task_park(); /* spurious returns are fine */
		atomic_fetch_add_explicit(&p->handoffs, 1, memory_order_relaxed);
		atomic_store(&p->turn, 1 - s->me);
		if (xtc_proc_wake(p->pid[1 - s->me]) != XTC_OK)
			atomic_fetch_add(&p->handoffs, 1000000000L); /* flag */
	}
}

/* ---- migration ------------------------------------------------------------ */

#define NMIG 8

struct mig {
	int pinned;
	atomic_int moves, bad;
};

static struct mig migs[NMIG];

static void mig_proc(void *a)
{
	struct mig *m = a;
	int id = xtc_exec_loop_id();
	pthread_t me = pthread_self();

	for (int i = 0; i < 20000 / SCALE; i++) {
		for (volatile int k = 0; k < 200; k++)
			;
		if (!pthread_equal(me, pthread_self()) || xtc_exec_loop_id() != id)
			atomic_fetch_add(&m->bad, 1);
		xtc_yield();
		if (xtc_exec_loop_id() != id) {
			atomic_fetch_add(&m->moves, 1);
			if (m->pinned)
				atomic_fetch_add(&m->bad, 1);
			id = xtc_exec_loop_id();
			me = pthread_self();
		}
	}
}

/* ---- migration racing fini -------------------------------------------------
 * Migratable fibers that never finish, all homed on loop 0 (loop 1 steals
 * them back and forth), each awaited by a plain thread. The executor is
 * stopped and finalised mid-flight, so now and then a task sits in a
 * thief's inbox between its two migration hops when the thief is
 * finalised. Every awaiter must come back (XTC_E_ABORTED) once fini
 * returns: a task freed there without being abandoned leaves its awaiter
 * hanging (caught by the deadline) or reading freed memory (ASan). */

#define MF_ROUNDS (200 / SCALE)
#define MF_TASKS  6

static atomic_int mf_back;
static unsigned long long mf_steals;

static void mf_body(void *a)
{
	(void)a;
	for (;;)
		xtc_yield();
}

static void *mf_awaiter(void *a)
{
	intptr_t res;

	CHECK_EQ(xtc_await(a, &res), XTC_E_ABORTED);
	atomic_fetch_add(&mf_back, 1);
	return NULL;
}

static void *mf_runner(void *a)
{
	CHECK_EQ(xtc_exec_run(a), XTC_OK);
	return NULL;
}

static void test_migrate_fini_race(void)
{
	xtc__spawn_opts_t o = { .migratable = 1 };

	for (int r = 0; r < MF_ROUNDS; r++) {
		xtc_exec_t *e;
		xtc_task_t *t[MF_TASKS];
		pthread_t aw[MF_TASKS], run;

		CHECK_EQ(xtc_exec_init(&e, 2), XTC_OK);
		xtc_exec_set_eager_rebalance(e, 1);
		atomic_store(&mf_back, 0);
		for (int i = 0; i < MF_TASKS; i++)
			CHECK_EQ(xtc__task_spawn_fiber(xtc_exec_loop(e, 0), mf_body,
			    NULL, &o, &t[i]), XTC_OK);
		/* Hook every awaiter before the run: we hold loop 0, so they
		 * wait instead of driving it, and they read t->loop (xtc_await)
		 * before any migration can rewrite it. */
		CHECK_EQ(xtc__loop_enter(xtc_exec_loop(e, 0)), XTC_OK);
		for (int i = 0; i < MF_TASKS; i++)
			CHECK_EQ(pthread_create(&aw[i], NULL, mf_awaiter, t[i]), 0);
		for (int i = 0; i < MF_TASKS; i++)
			while (atomic_load(&t[i]->waiters) == NULL)
				sched_yield();
		xtc__loop_leave(xtc_exec_loop(e, 0));
		CHECK_EQ(pthread_create(&run, NULL, mf_runner, e), 0);
		for (int i = 0; i < 2; i++)
			while (atomic_load(&xtc_exec_loop(e, i)->owner) == 0)
				sched_yield();
		usleep(200 + (r % 7) * 150);
		CHECK_EQ(xtc_exec_stop(e), XTC_OK);
		pthread_join(run, NULL);
		{
			xtc_loop_stats_t a, b;
			xtc_exec_loop_stats(e, 0, &a);
			xtc_exec_loop_stats(e, 1, &b);
			mf_steals += a.steals + b.steals;
		}
		CHECK_EQ(xtc_exec_fini(e), XTC_OK);
		for (int k = 0; k < 500 && atomic_load(&mf_back) < MF_TASKS; k++)
			usleep(10000);
		CHECK_EQ(atomic_load(&mf_back), MF_TASKS);
		if (atomic_load(&mf_back) < MF_TASKS)
			_exit(1); /* an awaiter hangs: cannot join it */
		for (int i = 0; i < MF_TASKS; i++)
			pthread_join(aw[i], NULL);
	}
	fprintf(stderr, "migrate/fini race: %d rounds, %llu steals\n",
	    MF_ROUNDS, mf_steals);
}

/* ---- watched wakes under migration ----------------------------------------
 * Migratable ping-pong pairs on spinning carriers, next to migratable
 * spinners that keep the carriers stealing: receivers park on one loop
 * and wake on another, so carriers watch stale slots and two carriers
 * watch one (loop_int.h, watched wakes). Every message arrives once, in
 * order; a lost wake hangs a pair (the guard stops the run and fails). */

#define WW_PAIRS  4
#define WW_ROUNDS (20000 / SCALE)

static xtc_pid_t ww_pid[WW_PAIRS][2];
static atomic_int ww_ready, ww_bad, ww_done, ww_spin_stop;

static void ww_proc(void *a)
{
	int k = (int)(intptr_t)a, pair = k / 2, me = k % 2;

	ww_pid[pair][me] = xtc_self();
	atomic_fetch_add(&ww_ready, 1);
	while (atomic_load(&ww_ready) < 2 * WW_PAIRS)
		xtc_yield();
	for (long i = 0; i < WW_ROUNDS; i++) {
		if (me == 0 && xtc_send(ww_pid[pair][1], &i, sizeof i) != 0)
			goto bad;
		void *m = NULL;
		size_t sz = 0;
		long v;
		if (xtc_recv(&m, &sz, -1) != 0 || sz != sizeof v)
			goto bad;
		memcpy(&v, m, sizeof v);
		xtc_free(m);
		if (v != i)
			goto bad;
		if (me == 1 && xtc_send(ww_pid[pair][0], &v, sizeof v) != 0)
			goto bad;
	}
	if (atomic_fetch_add(&ww_done, 1) + 1 == 2 * WW_PAIRS)
		atomic_store(&ww_spin_stop, 1);
	return;
bad:
	atomic_fetch_add(&ww_bad, 1);
	atomic_fetch_add(&ww_done, 1);
	atomic_store(&ww_spin_stop, 1);
}

/* bursts of ready work on one loop while the other idles: steals */
static void ww_spinner(void *a)
{
	(void)a;
	while (!atomic_load(&ww_spin_stop)) {
		for (int y = 0; y < 20; y++) {
			for (volatile int k = 0; k < 500; k++)
				;
			xtc_yield();
		}
		xtc_proc_sleep(100 * 1000);
	}
}

static void *ww_guard(void *a)
{
	for (int i = 0; i < 1200 && atomic_load(&ww_done) < 2 * WW_PAIRS; i++)
		usleep(100000);
	if (atomic_load(&ww_done) < 2 * WW_PAIRS) {
		atomic_fetch_add(&ww_bad, 1000);
		atomic_store(&ww_spin_stop, 1);
		xtc_exec_stop(a);
	}
	return NULL;
}

static void test_watched_wakes_migrating(void)
{
	xtc_exec_t *e;
	xtc_proc_opts_t o;
	pthread_t g;
	xtc_loop_stats_t st[2];

	CHECK_EQ(xtc_exec_init(&e, 2), XTC_OK);
	CHECK_EQ(xtc_exec_set_spin(e, 20LL * 1000 * 1000), XTC_OK);
	xtc_exec_set_eager_rebalance(e, 1);
	memset(&o, 0, sizeof o);
	o.migratable = 1;
	for (int k = 0; k < 2 * WW_PAIRS; k++)
		CHECK_EQ(xtc_proc_spawn(xtc_exec_loop(e, k % 2), ww_proc,
		    (void *)(intptr_t)k, &o, NULL), XTC_OK);
	for (int k = 0; k < 2; k++)
		CHECK_EQ(xtc_proc_spawn(xtc_exec_loop(e, 0), ww_spinner, NULL,
		    &o, NULL), XTC_OK);
	CHECK_EQ(pthread_create(&g, NULL, ww_guard, e), 0);
	CHECK_EQ(xtc_exec_run(e), XTC_OK);
	/* a lost wake leaves its pair parked: the run ends at quiescence */
	int finished = atomic_load(&ww_done);
	atomic_store(&ww_done, 2 * WW_PAIRS); /* release the guard */
	pthread_join(g, NULL);
	CHECK_EQ(finished, 2 * WW_PAIRS);
	CHECK_EQ(atomic_load(&ww_bad), 0);
	for (int i = 0; i < 2; i++)
		CHECK_EQ(xtc_exec_loop_stats(e, i, &st[i]), XTC_OK);
	fprintf(stderr, "watched wakes, migrating: %d pairs x %d round trips, "
	    "%llu + %llu watched, %llu steals\n", WW_PAIRS, WW_ROUNDS,
	    (unsigned long long)atomic_load(&xtc_exec_loop(e, 0)->watch_hits),
	    (unsigned long long)atomic_load(&xtc_exec_loop(e, 1)->watch_hits),
	    (unsigned long long)(st[0].steals + st[1].steals));
	CHECK_EQ(xtc_exec_fini(e), XTC_OK);
}

/* ---- watchdog --------------------------------------------------------------- */

static atomic_int done, timed_out;

static void *watchdog(void *a)
{
	xtc_exec_t *e = a;

	for (int i = 0; i < 2400 && !atomic_load(&done); i++)
		usleep(100000);
	if (!atomic_load(&done)) {
		atomic_store(&timed_out, 1);
		xtc_exec_stop(e);
	}
	return NULL;
}

int main(void)
{
	xtc_exec_t *e;
	xtc_proc_opts_t o;
	pthread_t wd;
	xtc_loop_stats_t s0, s1;
	long got = 0, handoffs = 0;
	int moves = 0;
	int64_t t0, t1;

	CHECK_EQ(xtc_exec_init(&e, 2), XTC_OK);
	memset(&o, 0, sizeof(o));
	for (int i = 0; i < 2 * NSEND; i++) {
		int home = i < NSEND ? 1 : 0; /* receivers on the other loop */
		CHECK_EQ(xtc_proc_spawn(xtc_exec_loop(e, home), receiver, &rxs[i],
		    NULL, &rxs[i].pid), XTC_OK);
		CHECK_EQ(xtc_proc_spawn(xtc_exec_loop(e, 1 - home), sender,
		    &rxs[i], NULL, NULL), XTC_OK);
	}
	for (int i = 0; i < NPAIR; i++) {
		for (int s = 0; s < 2; s++) {
			sides[i][s].p = &pairs[i];
			sides[i][s].me = s;
			CHECK_EQ(xtc_proc_spawn(xtc_exec_loop(e, s), token,
			    &sides[i][s], NULL, NULL), XTC_OK);
		}
	}
	for (int i = 0; i < NMIG; i++) {
		migs[i].pinned = i & 1;
		o.migratable = !migs[i].pinned;
		CHECK_EQ(xtc_proc_spawn(xtc_exec_loop(e, 0), mig_proc, &migs[i],
		    &o, NULL), XTC_OK);
	}
	CHECK_EQ(pthread_create(&wd, NULL, watchdog, e), 0);
	t0 = xtc_clock_mono();
	CHECK_EQ(xtc_exec_run(e), XTC_OK);
	t1 = xtc_clock_mono();
	atomic_store(&done, 1);
	pthread_join(wd, NULL);
	CHECK_EQ(atomic_load(&timed_out), 0);

	for (int i = 0; i < 2 * NSEND; i++) {
		CHECK_EQ(atomic_load(&rxs[i].bad), 0);
		got += atomic_load(&rxs[i].got);
	}
	CHECK_EQ(got, 2L * NMSG);
	CHECK_EQ(atomic_load(&sent_total), 2L * NMSG);
	for (int i = 0; i < NPAIR; i++) {
		long h = atomic_load(&pairs[i].handoffs);
		CHECK_EQ(h, 2L * (NWAKE / NPAIR / 2));
		handoffs += h;
	}
	for (int i = 0; i < NMIG; i++) {
		CHECK_EQ(atomic_load(&migs[i].bad), 0);
		if (!migs[i].pinned)
			moves += atomic_load(&migs[i].moves);
	}
	CHECK_EQ(xtc_exec_loop_stats(e, 0, &s0), XTC_OK);
	CHECK_EQ(xtc_exec_loop_stats(e, 1, &s1), XTC_OK);
	fprintf(stderr, "messages %ld, wakes %ld, mailbox-full retries %ld, "
	    "migrations %d, steals %llu, %.2f s\n", got, handoffs,
	    atomic_load(&again_total), moves,
	    (unsigned long long)(s0.steals + s1.steals), (t1 - t0) / 1e9);
	CHECK_EQ(xtc_exec_fini(e), XTC_OK);
	test_migrate_fini_race();
	test_watched_wakes_migrating();
	return failures ? 1 : 0;
}
