/*
 * coop_slices.c - time-slicing without an interrupt: clock-checked slices
 * (xtc_exec_set_preempt_coop).
 *
 * A long computation passes a preemption point, xtc_yield_if_due(), every
 * few thousand iterations. On an executor whose slices are clock-checked
 * the point compares the clock with the run's slice end; once the slice
 * is over the computation yields there and is demoted, so the short
 * requests submitted meanwhile run first. No timer is armed and no signal
 * is sent, which is what to use where an interrupt is expensive (on a
 * virtual machine one costs tens of microseconds) and the code can carry
 * the points. The program prints how long the short requests waited, how
 * often the long one yielded at a slice end, and that no signal was sent.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <unistd.h>

#include "xtc.h"
#include "xtc_exec.h"
#include "xtc_preempt.h"

enum { SHORTS = 20 };

static atomic_int shorts_done;
static atomic_int long_started, long_done;
static int64_t submitted_at[SHORTS], ran_at[SHORTS];
static int yields;

/* ~0.3 s of arithmetic with a point every 4096 iterations (a few us) */
static void long_work(void *arg)
{
	uint64_t x = 88172645463325252ull;
	(void)arg;
	atomic_store(&long_started, 1);
	for (uint64_t i = 0; i < 300000000; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		if ((i & 4095) == 0)
			yields += xtc_yield_if_due();
	}
	printf("long computation done (%llu), yielded at %d slice ends\n",
	       (unsigned long long)(x >> 60), yields);
	atomic_store(&long_done, 1);
}

static void short_request(void *arg)
{
	int i = (int)(intptr_t)arg;
	ran_at[i] = xtc_clock_mono();
	atomic_fetch_add(&shorts_done, 1);
}

static void *run(void *e)
{
	xtc_exec_run(e);
	return NULL;
}

static void stop(void *e)
{
	xtc_exec_stop(e);
}

int main(void)
{
	xtc_exec_t *e = NULL;
	if (xtc_exec_init(&e, 1) != XTC_OK)
		return 1;
	xtc_exec_set_service_mode(e, 1);
	/* clock-checked 200 us slices: no timer, no signal */
	if (xtc_exec_set_preempt_coop(e, 1) != XTC_OK ||
	    xtc_exec_set_preempt(e, 200 * 1000) != XTC_OK)
		return 1;
	xtc_preempt_stats_t s0, s1;
	xtc_preempt_stats_global(&s0, NULL);
	if (xtc_proc_spawn(xtc_exec_loop(e, 0), long_work, NULL, NULL,
	                   NULL) != XTC_OK)
		return 1;
	pthread_t th;
	pthread_create(&th, NULL, run, e);
	while (!atomic_load(&long_started))
		usleep(100);
	for (int i = 0; i < SHORTS; i++) {
		submitted_at[i] = xtc_clock_mono();
		while (xtc_exec_submit(e, 0, short_request,
		                       (void *)(intptr_t)i) == XTC_E_AGAIN)
			usleep(100);
		while (atomic_load(&shorts_done) <= i)
			usleep(50);
	}
	int64_t worst = 0, sum = 0;
	for (int i = 0; i < SHORTS; i++) {
		int64_t w = ran_at[i] - submitted_at[i];
		sum += w;
		if (w > worst)
			worst = w;
	}
	printf("%d short requests while it ran: mean wait %lld us, worst %lld "
	       "us (slice 200 us)\n", SHORTS, (long long)(sum / SHORTS / 1000),
	       (long long)(worst / 1000));
	/* the long computation finishes, then the run stops */
	while (!atomic_load(&long_done))
		usleep(1000);
	if (xtc_exec_submit_wait(e, 0, stop, e, 5000000000LL) != XTC_OK)
		xtc_exec_stop(e);
	pthread_join(th, NULL);
	xtc_preempt_stats_global(&s1, NULL);
	printf("preemption signals sent: %llu\n",
	       (unsigned long long)(s1.signals - s0.signals));
	xtc_exec_fini(e);
	return yields > 0 && s1.signals == s0.signals ? 0 : 1;
}
