/*
 * test_stack_lazy.c - small proc stacks in a program bound lazily
 * (fiber_stack.c, "Small stacks and lazy binding"). Meson links this one
 * program with -Wl,-z,lazy (every other one binds at load) and runs it
 * twice:
 *   stack-lazy          no LD_BIND_NOW: a small stack is refused with
 *                       XTC_E_INVAL at spawn, from the loop's thread and
 *                       from another one; a page-sized one still runs
 *   stack-lazy-bindnow  LD_BIND_NOW=1: small stacks are accepted, and 64
 *                       loops x 500 procs park on them, wake and exit
 *                       (the fixture that crashed when a first lazily
 *                       bound call ran on a 1 KiB stack)
 */
#include "fiber_int.h"
#include "xb_park.h" /* cmd/xtcbench: the fixture */
#include "test_util.h"

static int ran;

static void body(void *arg)
{
	(void)arg;
	ran++;
}

static void test_spawn_rc(void)
{
	const char *env = getenv("LD_BIND_NOW");
	int bound = env != NULL && env[0] != '\0';
	xtc_loop_t *loop;
	xtc_proc_opts_t o = {0};
	xtc_pid_t pid;

	REQUIRE(xtc_loop_init(&loop) == 0);
	o.stack_size = 1024;
	CHECK_EQ(xtc_proc_spawn(loop, body, NULL, &o, &pid),
	         bound ? XTC_OK : XTC_E_INVAL);
	o.stack_size = 8192;
	CHECK_EQ(xtc_proc_spawn(loop, body, NULL, &o, &pid),
	         bound ? XTC_OK : XTC_E_INVAL);
	o.stack_size = 16384; /* page-sized and guarded: always */
	CHECK_EQ(xtc_proc_spawn(loop, body, NULL, &o, &pid), XTC_OK);
	o.stack_size = 512; /* below the small minimum: always refused */
	CHECK_EQ(xtc_proc_spawn(loop, body, NULL, &o, &pid), XTC_E_INVAL);
	REQUIRE(xtc_loop_run(loop) == 0);
	CHECK_EQ(ran, bound ? 3 : 1);
	xtc_loop_fini(loop);
}

static void test_park_many_loops(void)
{
	const char *env = getenv("LD_BIND_NOW");
	xb_park_t r;

	if (env == NULL || env[0] == '\0') {
		REQUIRE(xb_park_run_per(64, 1, 1024, NULL, &r) == 0);
		CHECK_EQ(r.spawn_rc, XTC_E_INVAL);
		CHECK_EQ(r.parked, 0);
		return;
	}
	for (int i = 0; i < 10; i++) {
		REQUIRE(xb_park_run_per(64 * 500, 500, 1024, NULL, &r) == 0);
		REQUIRE(r.spawn_rc == 0);
		CHECK_EQ(r.parked, 64 * 500);
		CHECK_EQ(r.exited, 64 * 500);
	}
}

int main(int argc, char **argv)
{
	test_only = argc > 1 ? argv[1] : NULL;
	RUN(test_spawn_rc);
	RUN(test_park_many_loops);
	if (failures) {
		fprintf(stderr, "test_stack_lazy: %d failure(s)\n", failures);
		return 1;
	}
	printf("test_stack_lazy: ok\n");
	return 0;
}
