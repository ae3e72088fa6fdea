/*
 * test_exec_class.c - executor-wide classes (xtc_exec_class_create_each):
 * argument checks, one class per loop with the given shares, setup-only,
 * and work of both classes on both carriers charges each loop's piece.
 * (Ratios are timing: the Go service test and xtcbench measure them.)
 */
#include <string.h>

#include "xtc.h"
#include "xtc_exec.h"
#include "test_util.h"

static void test_args(void)
{
	xtc_exec_t *e;
	xtc_exec_class_t c[4];

	CHECK_EQ(xtc_exec_init(&e, 2), XTC_OK);
	CHECK_EQ(xtc_exec_class_create_each(NULL, 100, 0, c, 4), XTC_E_INVAL);
	CHECK_EQ(xtc_exec_class_create_each(e, 100, 0, NULL, 4), XTC_E_INVAL);
	CHECK_EQ(xtc_exec_class_create_each(e, 100, 0, c, 1), XTC_E_INVAL);
	CHECK_EQ(xtc_exec_class_create_each(e, 0, 0, c, 4), XTC_E_INVAL);
	CHECK_EQ(xtc_exec_class_create_each(e, -5, 0, c, 4), XTC_E_INVAL);
	CHECK_EQ(xtc_exec_class_create_each(e, 1001, 0, c, 4), XTC_E_INVAL);
	CHECK_EQ(xtc_exec_class_create_each(e, 100, -1, c, 4), XTC_E_INVAL);
	memset(c, 0, sizeof(c));
	CHECK_EQ(xtc_exec_class_create_each(e, 300, 1000000, c, 4), XTC_OK);
	for (int i = 0; i < 2; i++) {
		CHECK(c[i] != NULL);
		CHECK_EQ(xtc_exec_class_shares(c[i]), 300);
		CHECK_EQ(xtc_exec_class_latency(c[i]), 1000000);
	}
	CHECK(c[0] != c[1]);
	CHECK(c[2] == NULL); /* only n_loops entries are written */
	/* the 16-class cap of a loop, all or nothing */
	for (int i = 1; i < XTC_LOOP_MAX_CLASSES; i++)
		CHECK_EQ(xtc_exec_class_create_each(e, 10, 0, c, 4), XTC_OK);
	CHECK_EQ(xtc_exec_class_create_each(e, 10, 0, c, 4), XTC_E_AGAIN);
	CHECK(c[0] == NULL && c[1] == NULL);
	CHECK_EQ(xtc_exec_fini(e), XTC_OK);
}

static void spin(void *a)
{
	int64_t end = xtc_clock_mono() + (int64_t)(intptr_t)a;
	while (xtc_clock_mono() < end)
		xtc_yield();
}

/* Yielding work in two executor-wide classes on both loops: each loop
 * charges its own piece of each class. */
static void test_split(void)
{
	xtc_exec_t *e;
	xtc_exec_class_t hi[2], lo[2];
	xtc_proc_opts_t o;
	uint64_t h = 0, l = 0;

	CHECK_EQ(xtc_exec_init(&e, 2), XTC_OK);
	CHECK_EQ(xtc_exec_class_create_each(e, 300, 0, hi, 2), XTC_OK);
	CHECK_EQ(xtc_exec_class_create_each(e, 100, 0, lo, 2), XTC_OK);
	memset(&o, 0, sizeof(o));
	for (int i = 0; i < 2; i++) {
		for (int k = 0; k < 2; k++) {
			o.sched_class = hi[i];
			CHECK_EQ(xtc_proc_spawn(xtc_exec_loop(e, i), spin,
			    (void *)(intptr_t)(20 * 1000 * 1000), &o, NULL),
			    XTC_OK);
			o.sched_class = lo[i];
			CHECK_EQ(xtc_proc_spawn(xtc_exec_loop(e, i), spin,
			    (void *)(intptr_t)(20 * 1000 * 1000), &o, NULL),
			    XTC_OK);
		}
	}
	CHECK_EQ(xtc_exec_run(e), XTC_OK);
	for (int i = 0; i < 2; i++) {
		h += xtc_exec_class_cpu_ns(hi[i]);
		l += xtc_exec_class_cpu_ns(lo[i]);
		CHECK(xtc_exec_class_cpu_ns(hi[i]) > 0);
		CHECK(xtc_exec_class_cpu_ns(lo[i]) > 0);
	}
	CHECK(h > 0 && l > 0);
	CHECK_EQ(xtc_exec_fini(e), XTC_OK);
}

int main(void)
{
	RUN(test_args);
	RUN(test_split);
	return failures ? 1 : 0;
}
