/*
 * test_soak.c - a 60 s mixed soak (suite `slow`; XTC_SOAK_SECONDS changes
 * the length).
 *
 * Epoch after epoch, one executor (two carriers, preemption on when the
 * platform has it) carries at once:
 *  - receivers (half of them migratable) fed by sender procs on both
 *    carriers and by a foreign thread; every message carries its sender
 *    and sequence number and is checked in order;
 *  - a killer proc that spawns victims, monitors and kills them, and
 *    counts one DOWN per kill;
 *  - never-yielding spinners that only preemption can interleave with
 *    the rest;
 *  - a foreign thread submitting callbacks (xtc_exec_submit_wait);
 *  - stop/start cycles: the run is stopped from outside and restarted
 *    several times per epoch while all of the above is in flight.
 * Accounting is exact: every message sent is received once, every submit
 * runs once, every kill yields one DOWN (per epoch: the killer finishes
 * all its victims before the epoch ends). Every wait is bounded. The resident set size is sampled
 * after each epoch: once warm (after the first epochs) it must stay flat.
 */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "xtc.h"
#include "xtc_exec.h"
#include "xtc_preempt.h"
#include "test_util.h"

#define NRX     8
#define NSND    4        /* sender procs; + 1 foreign sender thread */
#define PER     2000     /* messages per sender per receiver per epoch */
#define NVICT   200      /* victims killed per epoch */
#define NSUB    20000    /* submits per epoch */
#define NSPIN   2
#define FOREIGN NSND     /* the foreign sender's id */

struct msg {
	int src;
	int seq;
};

static xtc_pid_t rx_pid[NRX];
static atomic_int rx_up, rx_done, bad;
static atomic_long received, sent, submits_run, downs, kills;
static atomic_int spin_stop, spin_gave_up, killer_done;

static void receiver(void *a)
{
	int next[NSND + 1] = { 0 };
	long want = (long)(NSND + 1) * PER;

	rx_pid[(long)a] = xtc_self();
	atomic_fetch_add(&rx_up, 1);
	for (long got = 0; got < want;) {
		void *m;
		size_t n;
		struct msg v;

		if (xtc_recv(&m, &n, 30 * SEC) != XTC_OK) {
			atomic_fetch_add(&bad, 1);
			break;
		}
		if (n != sizeof v) {
			atomic_fetch_add(&bad, 1);
			xtc_free(m);
			continue;
		}
		memcpy(&v, m, sizeof v);
		xtc_free(m);
		if (v.src < 0 || v.src > NSND || v.seq != next[v.src])
			atomic_fetch_add(&bad, 1);
		else
			next[v.src]++;
		got++;
		atomic_fetch_add_explicit(&received, 1, memory_order_relaxed);
		if ((got & 15) == 0)
			xtc_yield();
	}
	atomic_fetch_add(&rx_done, 1);
}

static int send_one(xtc_pid_t to, int src, int seq, int on_proc)
{
	struct msg v = { src, seq };
	int rc;

	while ((rc = xtc_send(to, &v, sizeof v)) == XTC_E_AGAIN) {
		if (on_proc)
			xtc_yield();
		else
			sched_yield();
	}
	if (rc == XTC_OK)
		atomic_fetch_add_explicit(&sent, 1, memory_order_relaxed);
	return rc;
}

static void sender(void *a)
{
	int id = (int)(long)a;

	while (atomic_load(&rx_up) < NRX)
		xtc_yield();
	for (int s = 0; s < PER; s++)
		for (int r = 0; r < NRX; r++)
			if (send_one(rx_pid[r], id, s, 1) != XTC_OK)
				atomic_fetch_add(&bad, 1);
}

static void *foreign_sender(void *a)
{
	(void)a;
	while (atomic_load(&rx_up) < NRX)
		sched_yield();
	for (int s = 0; s < PER; s++)
		for (int r = 0; r < NRX; r++)
			if (send_one(rx_pid[r], FOREIGN, s, 0) != XTC_OK)
				atomic_fetch_add(&bad, 1);
	return NULL;
}

static void victim(void *a)
{
	(void)a;
	for (;;)
		if (xtc_proc_sleep(1 * MS) != XTC_OK)
			return;
}

static void killer(void *a)
{
	(void)a;
	for (int i = 0; i < NVICT; i++) {
		xtc_pid_t v;
		uint64_t ref;
		void *m;
		size_t n;

		if (xtc_proc_spawn_monitor(xtc_exec_loop(a, i & 1), victim, NULL,
		    NULL, &v, &ref) != XTC_OK) {
			atomic_fetch_add(&bad, 1);
			continue;
		}
		if (xtc_exit_pid(v, 9) == XTC_OK)
			atomic_fetch_add(&kills, 1);
		if (xtc_recv(&m, &n, 30 * SEC) != XTC_OK) {
			atomic_fetch_add(&bad, 1);
			continue;
		}
		{
			xtc_pid_t who;
			int reason;
			if (xtc_down_decode(m, n, &who, &reason) == XTC_OK &&
			    xtc_pid_eq(who, v))
				atomic_fetch_add(&downs, 1);
			else
				atomic_fetch_add(&bad, 1);
		}
		xtc_free(m);
	}
	/* the epoch ends only after this: kills == downs also holds between
	 * two iterations, and a killer stopped there by the executor's fini
	 * would leave its next kill without a DOWN in the global counts */
	atomic_store(&killer_done, 1);
}

/* Bursts of 5 ms without a yield point (only preemption interleaves the
 * rest with them), then a 40 ms sleep, until the epoch ends. */
XTC_PREEMPTIBLE static void spinner(void *a)
{
	int64_t t0 = xtc_clock_mono();

	(void)a;
	while (!atomic_load_explicit(&spin_stop, memory_order_relaxed)) {
		int64_t b = xtc_clock_mono();
		while (xtc_clock_mono() - b < 5 * MS)
			;
		if (xtc_clock_mono() - t0 > 120 * SEC) {
			atomic_store(&spin_gave_up, 1);
			return;
		}
		if (xtc_proc_sleep(40 * MS) != XTC_OK)
			return;
	}
}

static void sub_fn(void *a)
{
	(void)a;
	atomic_fetch_add_explicit(&submits_run, 1, memory_order_relaxed);
}

static void *submitter(void *a)
{
	for (int i = 0; i < NSUB; i++)
		if (xtc_exec_submit_wait(a, -1, sub_fn, NULL, -1) != XTC_OK)
			atomic_fetch_add(&bad, 1);
	return NULL;
}

static void *runner(void *a)
{
	int rc = xtc_exec_run(a);

	if (rc != XTC_OK)
		atomic_fetch_add(&bad, 1);
	return NULL;
}

static long rss_kb(void)
{
	long pages = 0, res = 0;
	FILE *f = fopen("/proc/self/statm", "r");

	if (f == NULL)
		return 0;
	if (fscanf(f, "%ld %ld", &pages, &res) != 2)
		res = 0;
	fclose(f);
	return res * (sysconf(_SC_PAGESIZE) / 1024);
}

static int preempt_on;

/* Every wait of an epoch is bounded: a lost wake-up or message fails the
 * soak with the name of what never finished instead of hanging it (the
 * bound is far above any epoch's length on a loaded machine). */
#define EPOCH_MAX_NS (120 * SEC)

static int timed_out(int64_t t_end, const char *what)
{
	if (atomic_load(&bad) != 0)
		return 1;
	if (xtc_clock_mono() < t_end)
		return 0;
	fprintf(stderr, "soak: epoch timed out waiting for the %s\n", what);
	atomic_fetch_add(&bad, 1);
	return 1;
}

static void epoch(int k)
{
	xtc_exec_t *e;
	xtc_proc_opts_t mig = { .migratable = 1 };
	pthread_t fs, sb, run;
	long sent0 = atomic_load(&sent), recv0 = atomic_load(&received);
	long sub0 = atomic_load(&submits_run);
	long kills0 = atomic_load(&kills), downs0 = atomic_load(&downs);
	int64_t t_end = xtc_clock_mono() + EPOCH_MAX_NS;
	int restarts = 0;

	atomic_store(&killer_done, 0);
	atomic_store(&rx_up, 0);
	atomic_store(&rx_done, 0);
	atomic_store(&spin_stop, 0);
	CHECK_EQ(xtc_exec_init(&e, 2), XTC_OK);
	xtc_exec_set_service_mode(e, 1);
	if (preempt_on)
		CHECK_EQ(xtc_exec_set_preempt(e, 1 * MS), XTC_OK);
	for (long i = 0; i < NRX; i++)
		CHECK_EQ(xtc_proc_spawn(xtc_exec_loop(e, (int)(i & 1)), receiver,
		    (void *)i, (i & 2) ? &mig : NULL, NULL), XTC_OK);
	for (long i = 0; i < NSND; i++)
		CHECK_EQ(xtc_proc_spawn(xtc_exec_loop(e, (int)(i & 1)), sender,
		    (void *)i, NULL, NULL), XTC_OK);
	CHECK_EQ(xtc_proc_spawn(xtc_exec_loop(e, k & 1), killer, e, NULL, NULL),
	    XTC_OK);
	if (preempt_on)
		for (int i = 0; i < NSPIN; i++)
			CHECK_EQ(xtc_proc_spawn(xtc_exec_loop(e, i & 1), spinner, NULL,
			    NULL, NULL), XTC_OK);
	CHECK_EQ(pthread_create(&fs, NULL, foreign_sender, NULL), 0);
	CHECK_EQ(pthread_create(&sb, NULL, submitter, e), 0);
	CHECK_EQ(pthread_create(&run, NULL, runner, e), 0);
	/* stop/start cycles while everything is in flight */
	while (atomic_load(&rx_done) < NRX && !timed_out(t_end, "receivers")) {
		usleep(2000 + (unsigned)(rand() % 20000));
		CHECK_EQ(xtc_exec_stop(e), XTC_OK);
		pthread_join(run, NULL);
		restarts++;
		CHECK_EQ(pthread_create(&run, NULL, runner, e), 0);
	}
	pthread_join(fs, NULL);
	pthread_join(sb, NULL);
	while (atomic_load(&submits_run) - sub0 < NSUB && !timed_out(t_end,
	    "submits"))
		usleep(1000);
	while (!atomic_load(&killer_done) && !timed_out(t_end, "killer"))
		usleep(1000);
	atomic_store(&spin_stop, 1);
	usleep(5000);
	CHECK_EQ(xtc_exec_stop(e), XTC_OK);
	pthread_join(run, NULL);
	CHECK_EQ(xtc_exec_fini(e), XTC_OK);
	CHECK_EQ(atomic_load(&sent) - sent0, (long)NRX * (NSND + 1) * PER);
	CHECK_EQ(atomic_load(&received) - recv0, atomic_load(&sent) - sent0);
	CHECK_EQ(atomic_load(&submits_run) - sub0, NSUB);
	CHECK_EQ(atomic_load(&kills) - kills0, NVICT);
	CHECK_EQ(atomic_load(&downs) - downs0, NVICT);
	(void)restarts;
}

int main(void)
{
	const char *env = getenv("XTC_SOAK_SECONDS");
	int64_t secs = env ? atoll(env) : 60, t0 = xtc_clock_mono();
	long rss[4096];
	int n = 0;

	srand(42);
	preempt_on = xtc_preempt_involuntary_supported();
#if defined(__SANITIZE_THREAD__)
	preempt_on = 0; /* TSan defers asynchronous signals */
#endif
	if (preempt_on)
		xtc_preempt_set_involuntary(1);
	while (xtc_clock_mono() - t0 < secs * SEC && n < 4096 && !failures &&
	       atomic_load(&bad) == 0) {
		epoch(n);
		rss[n++] = rss_kb();
	}
	CHECK_EQ(atomic_load(&bad), 0);
	CHECK_EQ(atomic_load(&spin_gave_up), 0);
	CHECK_EQ(atomic_load(&kills), atomic_load(&downs));
	CHECK_EQ(atomic_load(&received), atomic_load(&sent));
	fprintf(stderr, "soak: %d epochs in %lld s: %ld messages, %ld submits, "
	    "%ld kills/DOWNs, preemption %s\n", n,
	    (long long)((xtc_clock_mono() - t0) / SEC), atomic_load(&received),
	    atomic_load(&submits_run), atomic_load(&downs),
	    preempt_on ? "on" : "off");
	if (n >= 6) {
		/* flat once warm: the last epoch within 16 MiB of the highest
		 * of epochs 2..4 (caches and pools filled by then) */
		long warm = 0;
		for (int i = 2; i < 5; i++)
			if (rss[i] > warm)
				warm = rss[i];
		fprintf(stderr, "soak: rss warm %ld MiB, last %ld MiB\n",
		    warm / 1024, rss[n - 1] / 1024);
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
		/* (not under the sanitizers: their allocators keep freed
		 * memory in quarantine and their shadow grows with it) */
		CHECK(rss[n - 1] - warm < 16 * 1024);
#endif
	}
	return failures ? 1 : 0;
}
