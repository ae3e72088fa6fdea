/*
 * test_codemap.c - the preemption code map (rtcode_int.h, preempt.c) is
 * exactly the runtime's code: one function of every runtime object is never
 * preempted, while user functions in files named like runtime files
 * (codemap/loop_timer.c, codemap/loop_io.c) and a user function named xtc_* are
 * under the policy that allows the program's own text
 * (XTC_PREEMPT_POLICY_PROGRAM; by default only declared code is).
 *
 * Driven by test_codemap.sh, which checks every object of libxtc.a for
 * text outside the code map and passes, for each object, one of its
 * functions as NAME=ADDRESS (nm of this executable) and main's address, so
 * the check does not rest on the mechanism under test. Without arguments
 * only the user-side checks run.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "xtc.h"
#include "xtc_preempt.h"

#include "codemap/codemap_user.h"
#include "test_util.h"

int xtc__preempt_pc_ok(const void *pc);
int xtc__preempt_map_info(int *n_rt, int *n_files);
int xtc__preempt_codemap_get(int i, const char **file, const void **lo,
                             const void **hi);

int main(int argc, char **argv);

static int local_user_fn(int x)
{
	return x + 1;
}

static void build_map(void)
{
	REQUIRE(xtc_preempt_arm(1 * MS) == XTC_OK);
	xtc_preempt_disarm();
	xtc_preempt_set_involuntary(1); /* builds the map */
	xtc_preempt_set_involuntary(0);
	int n_rt = 0, n_files = 0;
	REQUIRE(xtc__preempt_map_info(&n_rt, &n_files) == XTC_OK);
	CHECK(n_rt >= n_files && n_files > 10);
}

/* Under the default policy only declared code is preemptible; under
 * XTC_PREEMPT_POLICY_PROGRAM the program's own text is, whatever its
 * files and functions are called, and the runtime's code never is. */
static void test_user_code_preemptible(void)
{
	CHECK(xtc__preempt_pc_ok((const void *)&user_timer_fn) == 0);
	CHECK(xtc__preempt_pc_ok((const void *)&local_user_fn) == 0);
	CHECK(xtc_preempt_set_policy(XTC_PREEMPT_POLICY_PROGRAM) == XTC_OK);
	CHECK(xtc__preempt_pc_ok((const void *)&user_timer_fn) == 1);
	CHECK(xtc__preempt_pc_ok(user_timer_static()) == 1);
	CHECK(xtc__preempt_pc_ok((const void *)&xtc_user_something) == 1);
	CHECK(xtc__preempt_pc_ok((const void *)&local_user_fn) == 1);
	CHECK(xtc__preempt_pc_ok((const void *)&malloc) == 0);       /* libc */
	CHECK(xtc__preempt_pc_ok((const void *)&pthread_mutex_lock) == 0);
	CHECK(xtc__preempt_pc_ok((const void *)&xtc_yield) == 0);   /* runtime */
	CHECK(xtc__preempt_pc_ok((const void *)&xtc_loop_run) == 0);
	CHECK(xtc_preempt_set_policy(XTC_PREEMPT_POLICY_DECLARED) == XTC_OK);
}

/* Every record names a runtime source, none names a user file. */
static void test_records(void)
{
	const char *file;
	const void *lo, *hi;
	int n = 0;
	for (int i = 0; xtc__preempt_codemap_get(i, &file, &lo, &hi) == XTC_OK; i++) {
		n++;
		CHECK(strstr(file, "csrc/") != NULL);
		CHECK(strstr(file, "codemap/") == NULL);
		CHECK((uintptr_t)hi >= (uintptr_t)lo);
	}
	CHECK(n > 10);
}

/* argv: main=ADDR then OBJECT:FUNC=ADDR..., addresses from nm. */
static void test_every_object(int argc, char **argv)
{
	if (argc < 2)
		return;
	uintptr_t nm_main = 0;
	REQUIRE(sscanf(argv[1], "main=%lx", &nm_main) == 1);
	intptr_t bias = (intptr_t)((uintptr_t)&main - nm_main);
	int checked = 0;
	for (int i = 2; i < argc; i++) {
		char *eq = strrchr(argv[i], '=');
		REQUIRE(eq != NULL);
		uintptr_t a = (uintptr_t)strtoul(eq + 1, NULL, 16) + (uintptr_t)bias;
		if (xtc__preempt_pc_ok((const void *)a) != 0) {
			fprintf(stderr, "test_codemap: %.*s is preemptible: its object "
			        "is outside the code map\n", (int)(eq - argv[i]), argv[i]);
			failures++;
		}
		checked++;
	}
	fprintf(stderr, "test_codemap: %d runtime objects checked\n", checked);
	CHECK(checked > 10);
}

int main(int argc, char **argv)
{
	if (!xtc_preempt_involuntary_supported()) {
		fprintf(stderr, "test_codemap: no involuntary preemption here\n");
		return 77;
	}
	build_map();
	RUN(test_user_code_preemptible);
	RUN(test_records);
	test_every_object(argc, argv);
	return failures ? 1 : 0;
}
