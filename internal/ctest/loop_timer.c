/*
 * loop_timer.c - user code in a file named like a runtime file (csrc/loop_timer.c),
 * and a user function with the runtime's prefix: the preemption code map
 * must leave both preemptible (preempt_test.go).
 */
int ctest_codemap_timer_fn(int x);
int xtc_ctest_codemap_fn(int x);

int ctest_codemap_timer_fn(int x)
{
	return x * 7 + 3;
}

int xtc_ctest_codemap_fn(int x)
{
	return x * 11 + 1;
}
