/*
 * test_proc_stress.c - procs and mailboxes under volume:
 *  1. 10^6 spawn/exit cycles (return, exit_self, kill; every 16th one
 *     monitored) with resident memory flat between 10^5 and 10^6 cycles
 *     (/proc/self/statm);
 *  2. >= 10^5 messages across two loop threads and two plain pthreads,
 *     small mailboxes (XTC_E_AGAIN + retry), exact per-sender counts and
 *     order;
 *  3. cross-loop spawn_monitor / kill races: every child reported by
 *     exactly one DOWN with the right reason.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "xtc.h"

#include "test_util.h"

static long rss_kib(void)
{
	long size = 0, res = -1;
	FILE *f = fopen("/proc/self/statm", "r");
	if (!f)
		return -1;
	if (fscanf(f, "%ld %ld", &size, &res) != 2)
		res = -1;
	fclose(f);
	return res < 0 ? -1 : res * (sysconf(_SC_PAGESIZE) / 1024);
}

static void *loop_thread(void *arg)
{
	CHECK(xtc_loop_run(arg) == XTC_OK);
	return NULL;
}

/* ---- 1. churn ----------------------------------------------------------- */

#define CHURN_TOTAL 1000000L
#define CHURN_BATCH 50L /* within the per-thread stack cache (64) */

struct churn {
	xtc_loop_t *loop;
	long done, downs, bad_downs;
	long rss_warm, rss_end;
};

static void churn_child(void *arg)
{
	struct churn *c = arg;
	void *m;
	c->done++;
	switch (c->done % 4) {
	case 0:
		return;
	case 1:
		/* a message to itself, left undelivered: freed by teardown */
		CHECK(xtc_send(xtc_self(), &c, sizeof c) == XTC_OK);
		xtc_exit_self(1);
		return; /* not reached */
	case 2:
		/* parks; the driver kills it */
		if (xtc_recv(&m, NULL, -1) == XTC_OK)
			xtc_free(m);
		return;
	default:
		CHECK(xtc_send(xtc_self(), "x", 1) == XTC_OK);
		CHECK(xtc_recv(&m, NULL, 0) == XTC_OK);
		xtc_free(m);
		return;
	}
}

static void churn_driver(void *arg)
{
	struct churn *c = arg;
	xtc_pid_t pids[CHURN_BATCH];
	int monitored[CHURN_BATCH];

	for (long base = 0; base < CHURN_TOTAL; base += CHURN_BATCH) {
		long expect_downs = c->downs;
		for (long i = 0; i < CHURN_BATCH; i++) {
			uint64_t ref;
			monitored[i] = (base + i) % 16 == 0;
			int rc = monitored[i]
			    ? xtc_proc_spawn_monitor(c->loop, churn_child, c,
			                             NULL, &pids[i], &ref)
			    : xtc_proc_spawn(c->loop, churn_child, c, NULL,
			                     &pids[i]);
			CHECK(rc == XTC_OK);
			expect_downs += monitored[i];
		}
		xtc_yield(); /* FIFO: every child of the batch runs once */
		for (long i = 0; i < CHURN_BATCH; i++)
			(void)xtc_exit_pid(pids[i], 2); /* parked ones die */
		while (c->downs < expect_downs) {
			void *m;
			size_t sz;
			int reason;
			if (xtc_recv(&m, &sz, 5000 * MS) != XTC_OK)
				break;
			if (xtc_down_decode(m, sz, NULL, &reason) != XTC_OK ||
			    reason < 0 || reason > 2)
				c->bad_downs++;
			c->downs++;
			xtc_free(m);
		}
		CHECK(c->downs == expect_downs);
		xtc_yield(); /* killed children finish their teardown */
		if (base + CHURN_BATCH == CHURN_TOTAL / 10)
			c->rss_warm = rss_kib();
	}
	c->rss_end = rss_kib();
}

static void test_churn(void)
{
	struct churn c;

	memset(&c, 0, sizeof c);
	c.loop = new_loop();
	CHECK(xtc_proc_spawn(c.loop, churn_driver, &c, NULL, NULL) == XTC_OK);
	CHECK(xtc_loop_run(c.loop) == XTC_OK);
	CHECK(xtc_loop_fini(c.loop) == XTC_OK);
	CHECK(c.done == CHURN_TOTAL);
	CHECK(c.downs == CHURN_TOTAL / 16);
	CHECK(c.bad_downs == 0);
	fprintf(stderr, "churn: %ld procs, rss %ld KiB at 10^5, %ld KiB at "
	        "10^6\n", c.done, c.rss_warm, c.rss_end);
	/* flat: no per-proc leak (10^6 leaked bytes-per-proc would be MiBs).
	 * ASan's quarantine holds freed memory, so there LSan checks leaks. */
#ifndef __SANITIZE_ADDRESS__
	CHECK(c.rss_warm > 0 && c.rss_end - c.rss_warm < 4096);
#endif
}

/* ---- 2. messages across threads ----------------------------------------- */

#define XS_PROCS_PER_LOOP 2
#define XS_THREADS        2
#define XS_PER_SENDER     15000
/* senders: 2 loops x 2 procs + 2 threads = 6, x 15000 x 2 targets */
#define XS_SENDERS        (2 * XS_PROCS_PER_LOOP + XS_THREADS)

struct xs {
	xtc_pid_t rcv[2];
	atomic_int rcv_ready;
	long got[2][XS_SENDERS];
	int order_ok[2];
	atomic_long again;
};

struct xs_sender {
	struct xs *x;
	int id;
};

static int xs_send(struct xs *x, int target, int id, int seq, int in_proc)
{
	int v[2] = { id, seq }, rc;
	while ((rc = xtc_send(x->rcv[target], v, sizeof v)) == XTC_E_AGAIN) {
		atomic_fetch_add(&x->again, 1);
		if (in_proc)
			xtc_yield();
		else
			usleep(20);
	}
	return rc;
}

static void xs_proc_sender(void *arg)
{
	struct xs_sender *s = arg;
	for (int i = 0; i < XS_PER_SENDER; i++)
		for (int t = 0; t < 2; t++)
			CHECK(xs_send(s->x, t, s->id, i, 1) == XTC_OK);
}

static void *xs_thread_sender(void *arg)
{
	struct xs_sender *s = arg;
	for (int i = 0; i < XS_PER_SENDER; i++)
		for (int t = 0; t < 2; t++)
			CHECK(xs_send(s->x, t, s->id, i, 0) == XTC_OK);
	return NULL;
}

struct xs_rcv {
	struct xs *x;
	int which;
};

static void xs_receiver(void *arg)
{
	struct xs_rcv *r = arg;
	struct xs *x = r->x;
	long total = 0, want = (long)XS_SENDERS * XS_PER_SENDER;

	x->order_ok[r->which] = 1;
	while (total < want) {
		void *m;
		size_t sz;
		int v[2];
		if (xtc_recv(&m, &sz, 20000 * MS) != XTC_OK)
			break;
		memcpy(v, m, sizeof v);
		xtc_free(m);
		if (sz != sizeof v || v[0] < 0 || v[0] >= XS_SENDERS ||
		    v[1] != x->got[r->which][v[0]])
			x->order_ok[r->which] = 0;
		else
			x->got[r->which][v[0]]++;
		total++;
	}
}

static void test_cross_thread(void)
{
	xtc_loop_t *l[2] = { new_loop(), new_loop() };
	struct xs x;
	struct xs_sender s[XS_SENDERS];
	struct xs_rcv r[2];
	pthread_t lt[2], st[XS_THREADS];
	xtc_proc_opts_t o;
	int id = 0;

	memset(&x, 0, sizeof x);
	memset(&o, 0, sizeof o);
	o.mailbox_cap = 32;
	for (int i = 0; i < 2; i++) {
		r[i].x = &x;
		r[i].which = i;
		CHECK(xtc_proc_spawn(l[i], xs_receiver, &r[i], &o, &x.rcv[i]) ==
		      XTC_OK);
	}
	for (int i = 0; i < 2; i++)
		for (int j = 0; j < XS_PROCS_PER_LOOP; j++, id++) {
			s[id].x = &x;
			s[id].id = id;
			CHECK(xtc_proc_spawn(l[i], xs_proc_sender, &s[id], NULL,
			                     NULL) == XTC_OK);
		}
	for (int i = 0; i < 2; i++)
		REQUIRE(pthread_create(&lt[i], NULL, loop_thread, l[i]) == 0);
	for (int i = 0; i < XS_THREADS; i++, id++) {
		s[id].x = &x;
		s[id].id = id;
		REQUIRE(pthread_create(&st[i], NULL, xs_thread_sender, &s[id]) == 0);
	}
	for (int i = 0; i < XS_THREADS; i++)
		pthread_join(st[i], NULL);
	for (int i = 0; i < 2; i++) {
		pthread_join(lt[i], NULL);
		CHECK(xtc_loop_fini(l[i]) == XTC_OK);
	}
	for (int t = 0; t < 2; t++) {
		CHECK(x.order_ok[t]);
		for (int i = 0; i < XS_SENDERS; i++)
			CHECK(x.got[t][i] == XS_PER_SENDER);
	}
	fprintf(stderr, "cross-thread: %ld messages, %ld full-mailbox retries\n",
	        2L * XS_SENDERS * XS_PER_SENDER, atomic_load(&x.again));
}

/* ---- 3. cross-loop monitor / kill races --------------------------------- */

#define XM_N 20000

struct xm {
	xtc_loop_t *other;
	xtc_pid_t keeper;
	long downs, clean, killed, noproc, bad;
};

static void xm_child(void *arg)
{
	void *m;
	if (((uintptr_t)arg & 1) == 0)
		return;                           /* exits at once */
	if (xtc_recv(&m, NULL, -1) == XTC_OK)    /* parked until killed */
		xtc_free(m);
}

static void xm_driver(void *arg)
{
	struct xm *x = arg;
	long expect = 0;

	for (long i = 0; i < XM_N; i++) {
		xtc_pid_t p;
		uint64_t ref;
		/* monitor set up before the child can run on the other thread */
		if (xtc_proc_spawn_monitor(x->other, xm_child, (void *)(uintptr_t)i,
		                           NULL, &p, &ref) != XTC_OK) {
			x->bad++;
			continue;
		}
		expect++;
		if (i & 1)
			CHECK(xtc_exit_pid(p, 77) == XTC_OK);
		/* and a second, racing monitor on the same target */
		if (i % 8 == 0) {
			CHECK(xtc_monitor(p, &ref) == XTC_OK);
			expect++;
		}
		if (i % 64 == 0)
			xtc_yield();
	}
	while (x->downs < expect) {
		void *m;
		size_t sz;
		int reason = -1;
		if (xtc_recv(&m, &sz, 20000 * MS) != XTC_OK)
			break;
		if (xtc_down_decode(m, sz, NULL, &reason) != XTC_OK)
			x->bad++;
		else if (reason == 0)
			x->clean++;
		else if (reason == 77)
			x->killed++;
		else if (reason == XTC_DOWN_NOPROC)
			x->noproc++;
		else
			x->bad++;
		x->downs++;
		xtc_free(m);
	}
	CHECK(x->downs == expect);
	CHECK(xtc_recv(&(void *){ NULL }, NULL, 10 * MS) == XTC_E_AGAIN);
	CHECK(xtc_send(x->keeper, "bye", 3) == XTC_OK);
}

/* Keeps loop b from going quiescent before the driver's spawns land. */
static void xm_keeper(void *arg)
{
	void *m;
	(void)arg;
	if (xtc_recv(&m, NULL, -1) == XTC_OK)
		xtc_free(m);
}

static void test_cross_monitor(void)
{
	xtc_loop_t *a = new_loop(), *b = new_loop();
	struct xm x;
	pthread_t th;

	memset(&x, 0, sizeof x);
	x.other = b;
	CHECK(xtc_proc_spawn(b, xm_keeper, NULL, NULL, &x.keeper) == XTC_OK);
	CHECK(xtc_proc_spawn(a, xm_driver, &x, NULL, NULL) == XTC_OK);
	REQUIRE(pthread_create(&th, NULL, loop_thread, b) == 0);
	CHECK(xtc_loop_run(a) == XTC_OK);
	pthread_join(th, NULL);
	CHECK(xtc_loop_fini(a) == XTC_OK);
	CHECK(xtc_loop_fini(b) == XTC_OK);
	CHECK(x.bad == 0);
	CHECK(x.killed == XM_N / 2);
	CHECK(x.clean + x.noproc + x.killed == x.downs);
	fprintf(stderr, "cross-monitor: %ld DOWN (%ld clean, %ld killed, %ld "
	        "noproc)\n", x.downs, x.clean, x.killed, x.noproc);
}

static void timed(const char *name, void (*fn)(void))
{
	int64_t t0 = xtc_clock_mono();
	fn();
	fprintf(stderr, "%s: %.0f ms\n", name,
	        (double)(xtc_clock_mono() - t0) / 1e6);
}

/* usage: test_proc_stress [churn|cross-thread|cross-monitor] (default all) */
int main(int argc, char **argv)
{
	const char *only = argc > 1 ? argv[1] : NULL;

	if (!only || !strcmp(only, "churn"))
		timed("churn", test_churn);
	if (!only || !strcmp(only, "cross-thread"))
		timed("cross-thread", test_cross_thread);
	if (!only || !strcmp(only, "cross-monitor"))
		timed("cross-monitor", test_cross_monitor);
	if (failures) {
		fprintf(stderr, "test_proc_stress: %d failure(s)\n", failures);
		return 1;
	}
	printf("test_proc_stress: ok\n");
	return 0;
}
