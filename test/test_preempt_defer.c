/*
 * test_preempt_defer.c - a deferred preemption does not hand the carrier
 * to long work (sched.c demoted_aged, preempt.c defer), under the
 * deterministic simulator (XTC_SIM builds; 77 elsewhere).
 *
 * A long task's preemption is deferred while its fiber is in code not
 * declared preemptible (a library call) or holds a lock: its run goes on
 * past the slice until the cut lands. Simulated exactly: each run of the
 * long task advances the virtual clock by OVERRUN (20 slices) before it
 * yields at its slice end (xtc__fiber_yield_slice, what the trampoline
 * calls); four such tasks are demoted at once. Short work arrives all the time (a stream that runs one slice
 * and yields, never parking). Once the long task has aged, the aged picks
 * alternated with the stream per pick, so the long tasks took OVERRUN for
 * every slice the stream got (95% of the carrier: in bench/libs_tail.c,
 * zlib requests waited 3x as many chunks of long work as with preemption
 * off). Alternating in time, the stream gets at least as much run time as
 * the aged runs took. Counted in virtual time: the check is a ratio of
 * the simulator's clock, not a wall-time measurement.
 */
#include <stdatomic.h>
#include <string.h>

#include "xtc.h"
#include "xtc_exec.h"
#include "xtc_sim.h"
#include "loop_int.h"
#include "preempt_int.h"
#include "sched_int.h"
#include "test_util.h"

#define SLICE (100 * 1000)      /* virtual ns: one run of the stream */
#define OVERRUN (20 * SLICE)    /* one run of the long task (deferred cut) */
#define LONG_RUNS 40
#define N_LONG 4                /* long tasks demoted at once */

static atomic_int stop;
static int64_t stream_ns, long_ns, long_runs, long_done;
static int long_ran_last;       /* the previous run was the long task's */
static int long_back_to_back;   /* two long runs with no stream run between */

/* The executor's preemption on a loop, without carriers (the simulator
 * steps the loop on this thread). */
static void preempt_on(xtc_loop_t *l)
{
	xtc__sched_attach(l);
	l->demote_ns = 0; /* plain yields never demote */
	xtc__loop_feat_set(l, XTC__LF_PREEMPT);
}

static void stream_task(void *a)
{
	(void)a;
	while (!atomic_load(&stop)) {
		xtc_sim_clock_advance(SLICE);
		stream_ns += SLICE;
		long_ran_last = 0;
		xtc_yield();
	}
}

static void long_task(void *a)
{
	if (a != NULL)
		CHECK_EQ(xtc_proc_spawn(xtc__loop_current(), stream_task, NULL,
		    NULL, NULL), XTC_OK);
	for (int i = 0; i < LONG_RUNS; i++) {
		/* from its second run on (aged runs): the first runs of the
		 * four are fresh work, in arrival order */
		if (i > 0 && long_ran_last)
			long_back_to_back++;
		xtc_sim_clock_advance(OVERRUN);
		if (i > 0)
			long_ns += OVERRUN;
		long_runs++;
		long_ran_last = i > 0; /* an aged run */
		CHECK_EQ(xtc__fiber_yield_slice(), 0);
	}
	if (++long_done == N_LONG)
		atomic_store(&stop, 1);
}

static void test_deferred_runs_share_time(void)
{
	xtc_exec_t *e;
	xtc_loop_stats_t st;

	atomic_store(&stop, 0);
	stream_ns = long_ns = long_runs = long_done = 0;
	long_ran_last = long_back_to_back = 0;
	CHECK_EQ(xtc_exec_init(&e, 1), XTC_OK);
	preempt_on(xtc_exec_loop(e, 0));
	for (int i = 0; i < N_LONG; i++)
		CHECK_EQ(xtc_proc_spawn(xtc_exec_loop(e, 0), long_task,
		    i == 0 ? (void *)1 : NULL, NULL, NULL), XTC_OK);
	CHECK_EQ(xtc_sim_exec_run(e, 23, 1000000), XTC_OK);
	CHECK_EQ(xtc_exec_loop_stats(e, 0, &st), XTC_OK);
	fprintf(stderr, "  long %lld ms, stream %lld ms, aged picks %llu\n",
	    (long long)(long_ns / 1000000), (long long)(stream_ns / 1000000),
	    (unsigned long long)st.aged);
	CHECK_EQ(long_runs, N_LONG * LONG_RUNS);
	/* the long tasks progressed by aging (the stream never empties the
	 * high level) ... */
	CHECK(st.aged >= (uint64_t)(N_LONG * (LONG_RUNS - 2)));
	CHECK_EQ(long_back_to_back, 0);
	/* ... and every aged run was followed by at least as much stream
	 * time: the stream had at least the long tasks' time (before: one
	 * 100 us stream run per 2 ms long run once all had aged) */
	CHECK(stream_ns >= long_ns - OVERRUN);
	CHECK_EQ(xtc_sim_check(e), XTC_OK);
	CHECK_EQ(xtc_exec_fini(e), XTC_OK);
}

int main(int argc, char **argv)
{
	if (!xtc_sim_supported()) {
		fprintf(stderr, "not an XTC_SIM build (meson -Dsim=true): skip\n");
		return 77;
	}
	test_only = argc > 1 ? argv[1] : NULL;
	RUN(test_deferred_runs_share_time);
	return failures ? 1 : 0;
}
