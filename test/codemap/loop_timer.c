/*
 * codemap/loop_timer.c - a user file named like a runtime file (csrc/loop_timer.c):
 * its code must stay preemptible (test_codemap.c).
 */
#include "codemap_user.h"

static int timer_helper(int x)
{
	return x * 7 + 3;
}

int user_timer_fn(int x)
{
	return timer_helper(x) ^ 5;
}

const void *user_timer_static(void)
{
	return (const void *)&timer_helper;
}
