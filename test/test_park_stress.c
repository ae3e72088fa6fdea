/*
 * test_park_stress.c - a million procs in one process (stress suite): 10^6
 * procs on 1 KiB stacks, each parked in xtc_recv, each woken by one
 * message and run to its end; the process keeps a few hundred mappings
 * while they are parked. Under the sanitizers (larger frames, costly
 * fiber contexts) 10^5 on 16 KiB stacks. XTC_PARK_N overrides the count.
 * Prints the resident bytes per parked proc (not asserted: a figure, see
 * bench/bench_park and cmd/xtcbench's memory section).
 */
#include "fiber_int.h"
#include "xb_park.h" /* cmd/xtcbench: the fixture */
#include "test_util.h"

int main(void)
{
#if defined(XTC__FIBER_ASAN) || defined(XTC__FIBER_TSAN)
	long n = 100000;
	size_t stack = 16384;
#elif defined(XTC__CORO_UCONTEXT)
	long n = 100000;
	size_t stack = 8192; /* its ucontext_t lives on the stack too */
#else
	long n = 1000000;
	size_t stack = 1024;
#endif
	const char *env = getenv("XTC_PARK_N");
	xb_park_t r;

	if (env != NULL && atol(env) > 0)
		n = atol(env);
	REQUIRE(xb_park_run(n, stack, NULL, &r) == 0);
	CHECK_EQ(r.spawn_rc, 0);
	CHECK_EQ(r.parked, n);
	CHECK_EQ(r.exited, n);
	CHECK(r.vmas >= 0 && r.vmas < 2000);
	printf("test_park_stress: %ld procs on %zu-byte stacks parked in a "
	       "receive: %ld mappings, %.0f B resident each; all woke and "
	       "exited\n", r.parked, stack, r.vmas, r.rss_each);
	if (failures) {
		fprintf(stderr, "test_park_stress: %d failure(s)\n", failures);
		return 1;
	}
	printf("test_park_stress: ok\n");
	return 0;
}
