/*
 * test_migrate.c - procs that migrate while other threads wake them.
 *
 * A migratable proc is moved by the executor only while READY (exec.c
 * migrate_out stores t->loop on the victim's carrier); at the same moment
 * a send or wake from another thread reads the proc's loop to post the
 * wake. This test makes both happen as often as it can: migratable
 * receivers that yield after every message (each yield is a migration
 * point) on an executor with eager rebalancing, fed by senders on both
 * carriers and by foreign threads, plus foreign xtc_proc_wake calls.
 * Every message is received exactly once and in per-sender order; under
 * ThreadSanitizer (make test-tsan) any unsynchronised access to a task's
 * home loop is a reported race. Counts are divided by 10 under TSan.
 */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

#include "xtc.h"
#include "xtc_exec.h"
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

#define NRX    8                    /* migratable receivers */
#define NSRC   4                    /* sources per receiver */
#define PER    (20000 / SCALE)      /* messages per source */

struct msg {
	int src;
	long seq;
};

struct rx {
	xtc_pid_t pid;
	atomic_long got;
	atomic_int bad;
	atomic_int moves;
};

static struct rx rxs[NRX];
static atomic_int rx_ready, foreign_done;

static void receiver(void *a)
{
	struct rx *r = a;
	long next[NSRC] = { 0 };
	int last = xtc_exec_loop_id();

	r->pid = xtc_self();
	atomic_fetch_add(&rx_ready, 1);
	while (atomic_load(&r->got) < (long)NSRC * PER) {
		void *m;
		size_t sz;
		int rc = xtc_recv(&m, &sz, 10 * SEC);

		if (rc != XTC_OK) {
			atomic_fetch_add(&r->bad, 1);
			return; /* a lost wake: the receiver starves */
		}
		if (sz == sizeof(struct msg)) {
			struct msg v;
			memcpy(&v, m, sizeof v);
			if (v.src < 0 || v.src >= NSRC || v.seq != next[v.src])
				atomic_fetch_add(&r->bad, 1);
			else
				next[v.src]++;
			atomic_fetch_add(&r->got, 1);
		}
		/* size 0: a foreign wake marker, not counted */
		xtc_free(m);
		xtc_yield(); /* a migration point per message */
		if (xtc_exec_loop_id() != last) {
			last = xtc_exec_loop_id();
			atomic_fetch_add(&r->moves, 1);
		}
	}
}

/* Always READY (yields in a loop): the executor's favourite steal victims,
 * woken by a foreign thread the whole time, so wakes and migrations of
 * the same task overlap as often as possible. */
#define NYL 4
static xtc_pid_t yl_pid[NYL];
static atomic_int yl_stop, yl_ready, yl_moves;

static void yielder(void *a)
{
	int last = xtc_exec_loop_id();

	yl_pid[(long)a] = xtc_self();
	atomic_fetch_add(&yl_ready, 1);
	while (!atomic_load(&yl_stop)) {
		xtc_yield();
		if (xtc_exec_loop_id() != last) {
			last = xtc_exec_loop_id();
			atomic_fetch_add(&yl_moves, 1);
		}
	}
}

static void *waker(void *a)
{
	(void)a;
	while (atomic_load(&yl_ready) < NYL)
		sched_yield();
	while (atomic_load(&foreign_done) < NSRC - 2)
		for (int i = 0; i < NYL; i++)
			CHECK_EQ(xtc_proc_wake(yl_pid[i]), XTC_OK);
	atomic_store(&yl_stop, 1);
	return NULL;
}

static int send_retry(xtc_pid_t to, const struct msg *v, int on_proc)
{
	for (;;) {
		int rc = xtc_send(to, v, sizeof *v);
		if (rc != XTC_E_AGAIN)
			return rc;
		if (on_proc)
			xtc_yield();
		else
			sched_yield();
	}
}

/* Sources 0..1 are pinned procs on loop 0 with every receiver, so loop 1
 * only ever has stolen work and the receivers keep moving both ways;
 * sources 2..3 are foreign threads. */
struct src {
	int id;
};

static void proc_source(void *a)
{
	struct src *s = a;

	while (atomic_load(&rx_ready) < NRX)
		xtc_yield();
	for (long i = 0; i < PER; i++)
		for (int r = 0; r < NRX; r++) {
			struct msg v = { s->id, i };
			CHECK_EQ(send_retry(rxs[r].pid, &v, 1), XTC_OK);
		}
}

static void *thread_source(void *a)
{
	struct src *s = a;

	while (atomic_load(&rx_ready) < NRX)
		sched_yield();
	for (long i = 0; i < PER; i++)
		for (int r = 0; r < NRX; r++) {
			struct msg v = { s->id, i };
			CHECK_EQ(send_retry(rxs[r].pid, &v, 0), XTC_OK);
			if ((i & 63) == 0)
				xtc_proc_wake(rxs[r].pid); /* bare wake, any state */
		}
	atomic_fetch_add(&foreign_done, 1);
	return NULL;
}

static void *runner(void *a)
{
	CHECK_EQ(xtc_exec_run(a), XTC_OK);
	return NULL;
}

static void test_migrating_receivers(void)
{
	xtc_exec_t *e;
	xtc_proc_opts_t mo = { .migratable = 1 };
	struct src srcs[NSRC];
	pthread_t th[NSRC], run, wk;
	xtc_loop_stats_t s0, s1;
	long total = 0;
	int bad = 0, moves = 0;

	CHECK_EQ(xtc_exec_init(&e, 2), XTC_OK);
	xtc_exec_set_eager_rebalance(e, 1);
	for (int i = 0; i < NRX; i++)
		CHECK_EQ(xtc_proc_spawn(xtc_exec_loop(e, 0), receiver,
		    &rxs[i], &mo, NULL), XTC_OK);
	for (int s = 0; s < NSRC; s++) {
		srcs[s].id = s;
		if (s < 2)
			CHECK_EQ(xtc_proc_spawn(xtc_exec_loop(e, 0), proc_source,
			    &srcs[s], NULL, NULL), XTC_OK);
	}
	for (long i = 0; i < NYL; i++)
		CHECK_EQ(xtc_proc_spawn(xtc_exec_loop(e, 0), yielder, (void *)i,
		    &mo, NULL), XTC_OK);
	CHECK_EQ(pthread_create(&run, NULL, runner, e), 0);
	for (int s = 2; s < NSRC; s++)
		CHECK_EQ(pthread_create(&th[s], NULL, thread_source, &srcs[s]), 0);
	CHECK_EQ(pthread_create(&wk, NULL, waker, NULL), 0);
	for (int s = 2; s < NSRC; s++)
		pthread_join(th[s], NULL);
	pthread_join(wk, NULL);
	pthread_join(run, NULL); /* the run ends when every proc returned */
	for (int i = 0; i < NRX; i++) {
		total += atomic_load(&rxs[i].got);
		bad += atomic_load(&rxs[i].bad);
		moves += atomic_load(&rxs[i].moves);
	}
	CHECK_EQ(total, (long)NRX * NSRC * PER);
	CHECK_EQ(bad, 0);
	CHECK_EQ(xtc_exec_loop_stats(e, 0, &s0), XTC_OK);
	CHECK_EQ(xtc_exec_loop_stats(e, 1, &s1), XTC_OK);
	fprintf(stderr, "migrating receivers: %ld messages, %d + %d observed "
	    "moves, %llu steals\n", total, moves, atomic_load(&yl_moves),
	    (unsigned long long)(s0.steals + s1.steals));
	CHECK_EQ(xtc_exec_fini(e), XTC_OK);
}

int main(void)
{
	RUN(test_migrating_receivers);
	return failures ? 1 : 0;
}
