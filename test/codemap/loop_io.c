/*
 * codemap/loop_io.c - a user file named like a runtime file (csrc/loop_io.c), with a
 * user function carrying the runtime's prefix: both preemptible
 * (test_codemap.c).
 */
#include "codemap_user.h"

int xtc_user_something(int x)
{
	return x * 11 + 1;
}
