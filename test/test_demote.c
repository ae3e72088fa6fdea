/*
 * test_demote.c - the demoted level of the run queue (loop.c, used by the
 * preemption path), under the deterministic simulator (XTC_SIM builds; 77
 * elsewhere): a task whose slice ran out runs after new work (local spawns,
 * submissions) and before nothing newer; an aged demoted task is served
 * after XTC__DEMOTE_AGE_NS of virtual time and alternates with new work;
 * a plain yielder that ran a whole slice without parking is demoted too;
 * class tasks are never demoted (their class queue keeps its order).
 *
 * The slice end is simulated by calling xtc__fiber_yield_slice() (what the
 * trampoline and xtc_yield_if_due call), so the order is exact; the
 * clock-checked slice (xtc_exec_set_preempt_coop) is driven by virtual
 * time instead: its yield points cut the run exactly at its slice end.
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

static char order[64];
static int n_order;

static void logc(char c)
{
	if (n_order < (int)sizeof(order) - 1)
		order[n_order++] = c;
	order[n_order] = 0;
}

/* The executor's preemption on a loop, without carriers (the simulator
 * steps the loop on this thread). */
static void preempt_on(xtc_loop_t *l, int64_t demote_ns)
{
	xtc__sched_attach(l);
	l->demote_ns = demote_ns;
	xtc__loop_feat_set(l, XTC__LF_PREEMPT);
}

/* ---- order ------------------------------------------------------------- */

static xtc_exec_t *ord_exec;

static void short_task(void *a)
{
	logc((char)(intptr_t)a);
}

static void submitted(void *a)
{
	(void)a;
	CHECK_EQ(xtc_proc_spawn(xtc_exec_loop(ord_exec, 0), short_task,
	    (void *)(intptr_t)'R', NULL, NULL), XTC_OK);
}

static void long_task(void *a)
{
	xtc_loop_t *l = xtc__loop_current();
	(void)a;
	logc('L');
	for (int i = 0; i < 3; i++)
		CHECK_EQ(xtc_proc_spawn(l, short_task,
		    (void *)(intptr_t)('1' + i), NULL, NULL), XTC_OK);
	CHECK_EQ(xtc_exec_submit(ord_exec, 0, submitted, NULL), XTC_OK);
	CHECK_EQ(xtc__fiber_yield_slice(), 0); /* its slice ran out */
	logc('L');
	CHECK_EQ(xtc__fiber_yield_slice(), 0); /* nothing else: runs on */
	logc('l');
}

static void test_order(void)
{
	xtc_loop_stats_t st;

	n_order = 0;
	CHECK_EQ(xtc_exec_init(&ord_exec, 1), XTC_OK);
	preempt_on(xtc_exec_loop(ord_exec, 0), 0);
	CHECK_EQ(xtc_proc_spawn(xtc_exec_loop(ord_exec, 0), long_task, NULL,
	    NULL, NULL), XTC_OK);
	CHECK_EQ(xtc_sim_exec_run(ord_exec, 5, 100000), XTC_OK);
	fprintf(stderr, "  order %s\n", order);
	/* everything that arrived while it ran (spawns, then the submission
	 * admitted by the drain) runs before the demoted task resumes */
	CHECK(strcmp(order, "L123RLl") == 0);
	CHECK_EQ(xtc_exec_loop_stats(ord_exec, 0, &st), XTC_OK);
	CHECK_EQ(st.demotions, 2);
	CHECK_EQ(st.aged, 0);
	CHECK_EQ(xtc_sim_check(ord_exec), XTC_OK);
	CHECK_EQ(xtc_exec_fini(ord_exec), XTC_OK);
}

/* ---- aging -------------------------------------------------------------- */

static atomic_int age_stop;
static int64_t demoted_at, resumed_at;
static int after_aged; /* what ran right after the aged pick: 'G' */
static int g_runs_since;

#define G_STEP (100 * 1000) /* virtual ns per run of the stream */

static void stream_task(void *a)
{
	(void)a;
	while (!atomic_load(&age_stop)) {
		xtc_sim_clock_advance(G_STEP);
		g_runs_since++;
		if (resumed_at != 0 && after_aged == 0)
			after_aged = 'G';
		xtc_yield(); /* never parks: the high level never empties */
	}
}

static void aged_task(void *a)
{
	(void)a;
	CHECK_EQ(xtc_proc_spawn(xtc__loop_current(), stream_task, NULL, NULL,
	    NULL), XTC_OK);
	demoted_at = xtc_clock_mono();
	CHECK_EQ(xtc__fiber_yield_slice(), 0);
	resumed_at = xtc_clock_mono();
	g_runs_since = 0;
	CHECK_EQ(xtc__fiber_yield_slice(), 0);
	/* alternation: the stream ran once before this second aged pick */
	CHECK(g_runs_since >= 1);
	atomic_store(&age_stop, 1);
}

static void test_aging(void)
{
	xtc_exec_t *e;
	xtc_loop_stats_t st;

	atomic_store(&age_stop, 0);
	demoted_at = resumed_at = 0;
	after_aged = 0;
	CHECK_EQ(xtc_exec_init(&e, 1), XTC_OK);
	preempt_on(xtc_exec_loop(e, 0), 0); /* plain yields never demote */
	CHECK_EQ(xtc_proc_spawn(xtc_exec_loop(e, 0), aged_task, NULL, NULL,
	    NULL), XTC_OK);
	CHECK_EQ(xtc_sim_exec_run(e, 11, 1000000), XTC_OK);
	fprintf(stderr, "  aged after %lld us\n",
	    (long long)(resumed_at - demoted_at) / 1000);
	CHECK(resumed_at - demoted_at >= XTC__DEMOTE_AGE_NS);
	CHECK(resumed_at - demoted_at <= XTC__DEMOTE_AGE_NS + 2 * G_STEP);
	CHECK_EQ(after_aged, 'G');
	CHECK_EQ(xtc_exec_loop_stats(e, 0, &st), XTC_OK);
	CHECK(st.aged >= 2);
	CHECK_EQ(xtc_sim_check(e), XTC_OK);
	CHECK_EQ(xtc_exec_fini(e), XTC_OK);
}

/* ---- a yielder that never parks is demoted after a slice ---------------- */

static int yl_runs, peer_runs_at_demote, peer_runs;

static void peer_task(void *a)
{
	(void)a;
	for (int i = 0; i < 40; i++) {
		peer_runs++;
		CHECK_EQ(xtc__park(1000, -1, 0, NULL), XTC_E_AGAIN);
	}
}

static void yielder_task(void *a)
{
	(void)a;
	/* 1 ms slice, 100 us per run: a plain yield from the 10th run on
	 * goes to the demoted level */
	for (yl_runs = 0; yl_runs < 30; yl_runs++) {
		xtc_sim_clock_advance(G_STEP);
		xtc_yield();
	}
}

static void test_yielder(void)
{
	xtc_exec_t *e;
	xtc_loop_stats_t st;

	yl_runs = peer_runs = peer_runs_at_demote = 0;
	CHECK_EQ(xtc_exec_init(&e, 1), XTC_OK);
	preempt_on(xtc_exec_loop(e, 0), 1000 * 1000);
	CHECK_EQ(xtc_proc_spawn(xtc_exec_loop(e, 0), yielder_task, NULL, NULL,
	    NULL), XTC_OK);
	CHECK_EQ(xtc_proc_spawn(xtc_exec_loop(e, 0), peer_task, NULL, NULL,
	    NULL), XTC_OK);
	CHECK_EQ(xtc_sim_exec_run(e, 13, 1000000), XTC_OK);
	CHECK_EQ(xtc_exec_loop_stats(e, 0, &st), XTC_OK);
	fprintf(stderr, "  yielder demotions %llu\n",
	    (unsigned long long)st.demotions);
	/* runs 10..30 (the clock reads 1 ms of run time from the 10th) */
	CHECK(st.demotions >= 15 && st.demotions <= 21);
	CHECK_EQ(peer_runs, 40);
	CHECK_EQ(xtc_sim_check(e), XTC_OK);
	CHECK_EQ(xtc_exec_fini(e), XTC_OK);
}

/* ---- classes keep their own order --------------------------------------- */

static int class_yields;

static void class_task(void *a)
{
	(void)a;
	for (int i = 0; i < 5; i++) {
		CHECK_EQ(xtc__fiber_yield_slice(), 0);
		class_yields++;
	}
}

static void test_class_not_demoted(void)
{
	xtc_exec_t *e;
	xtc_exec_class_t c;
	xtc_proc_opts_t o;
	xtc_loop_stats_t st;

	class_yields = 0;
	CHECK_EQ(xtc_exec_init(&e, 1), XTC_OK);
	preempt_on(xtc_exec_loop(e, 0), 0);
	CHECK_EQ(xtc_exec_class_create(xtc_exec_loop(e, 0), 100, 0, &c),
	    XTC_OK);
	memset(&o, 0, sizeof(o));
	o.sched_class = c;
	CHECK_EQ(xtc_proc_spawn(xtc_exec_loop(e, 0), class_task, NULL, &o,
	    NULL), XTC_OK);
	CHECK_EQ(xtc_proc_spawn(xtc_exec_loop(e, 0), class_task, NULL, &o,
	    NULL), XTC_OK);
	CHECK_EQ(xtc_sim_exec_run(e, 17, 100000), XTC_OK);
	CHECK_EQ(class_yields, 10);
	CHECK_EQ(xtc_exec_loop_stats(e, 0, &st), XTC_OK);
	CHECK_EQ(st.demotions, 0);
	CHECK_EQ(xtc_sim_check(e), XTC_OK);
	CHECK_EQ(xtc_exec_fini(e), XTC_OK);
}

/* ---- clock-checked slices ------------------------------------------------ */

#define COOP_SLICE (50 * 1000) /* virtual ns */
#define COOP_STEP  1000        /* virtual ns per chunk of the long task */

static int64_t coop_short_at[3];
static int coop_dues;

static void coop_short(void *a)
{
	coop_short_at[(intptr_t)a] = xtc_clock_mono();
	logc('s');
}

/* 200 us of work in 1 us chunks with a yield point after each; shorts
 * arrive at +11, +21 and +121 us */
static void coop_long(void *a)
{
	int64_t t0 = xtc_clock_mono();
	(void)a;
	logc('L');
	for (int i = 0; i < 200; i++) {
		xtc_sim_clock_advance(COOP_STEP);
		if (i == 10 || i == 20 || i == 120)
			CHECK_EQ(xtc_proc_spawn(xtc__loop_current(), coop_short,
			    (void *)(intptr_t)(i == 10 ? 0 : i == 20 ? 1 : 2),
			    NULL, NULL), XTC_OK);
		if (xtc_yield_if_due()) {
			coop_dues++;
			logc('y');
		}
	}
	logc('E');
	for (int k = 0; k < 3; k++)
		coop_short_at[k] -= t0;
}

static void test_coop_slice(void)
{
	xtc_exec_t *e;
	xtc_loop_stats_t st;

	n_order = 0;
	coop_dues = 0;
	memset(coop_short_at, 0, sizeof(coop_short_at));
	CHECK_EQ(xtc_exec_init(&e, 1), XTC_OK);
	preempt_on(xtc_exec_loop(e, 0), COOP_SLICE);
	xtc__ptls.coop_slice = COOP_SLICE; /* what a coop carrier starts with */
	CHECK_EQ(xtc_proc_spawn(xtc_exec_loop(e, 0), coop_long, NULL, NULL,
	    NULL), XTC_OK);
	CHECK_EQ(xtc_sim_exec_run(e, 19, 100000), XTC_OK);
	xtc__ptls.coop_slice = 0;
	fprintf(stderr, "  order %s, shorts at %lld %lld %lld us\n", order,
	    (long long)coop_short_at[0] / 1000,
	    (long long)coop_short_at[1] / 1000,
	    (long long)coop_short_at[2] / 1000);
	/* slice ends at 50, 100, 150, 200 us of the long task's work: the
	 * shorts that arrived meanwhile run at the next one, before it
	 * resumes; with nothing waiting the slice end costs a demotion and
	 * the task runs on */
	CHECK(strcmp(order, "LssyysyyE") == 0); /* y: logged on resumption */
	CHECK_EQ(coop_dues, 4);
	CHECK_EQ(coop_short_at[0], 50 * 1000);
	CHECK_EQ(coop_short_at[1], 50 * 1000);
	CHECK_EQ(coop_short_at[2], 150 * 1000);
	CHECK_EQ(xtc_exec_loop_stats(e, 0, &st), XTC_OK);
	CHECK_EQ(st.demotions, 4);
	CHECK_EQ(xtc_sim_check(e), XTC_OK);
	CHECK_EQ(xtc_exec_fini(e), XTC_OK);
}

/* ---- the same seed, the same schedule ----------------------------------- */

static void test_replay(void)
{
	char first[64];

	test_order();
	memcpy(first, order, sizeof(first));
	test_order();
	CHECK(strcmp(first, order) == 0);
}

int main(void)
{
	if (!xtc_sim_supported()) {
		fprintf(stderr, "not an XTC_SIM build (meson -Dsim=true): skip\n");
		return 77;
	}
	RUN(test_order);
	RUN(test_aging);
	RUN(test_yielder);
	RUN(test_class_not_demoted);
	RUN(test_coop_slice);
	RUN(test_replay);
	return failures ? 1 : 0;
}
