/*
 * xb_mem.c - the xtc half of the memory section: n procs parked in a
 * receive, the resident bytes each, the time to spawn and park them and
 * the time to wake them and let them exit (xb_park.h, the same fixture as
 * bench/bench_park). Run in a child process of its own (mem.go), so that
 * what one side leaves resident does not count against the other.
 */
#include <stdio.h>
#include <string.h>

#include "xb.h"
#include "xb_api.h"
#include "xb_park.h"

int xb_mem_park(int64_t n, int64_t stack_size, xb_mem_t *out, char *why)
{
	xb_park_t r;

	memset(out, 0, sizeof *out);
	if (n < 1 || stack_size < 0 ||
	    xb_park_run((long)n, (size_t)stack_size, NULL, &r) != 0) {
		snprintf(why, XB_WHY, "the park fixture could not be set up");
		return XB_FAIL;
	}
	out->parked = r.parked;
	out->rss_bytes = r.rss_bytes;
	out->spawn_ns = r.spawn_ns;
	out->wake_ns = r.wake_ns;
	out->stack_bytes = stack_size > 0 ? stack_size : (int64_t)xtc_stack_size();
	if (r.spawn_rc != 0) {
		const char *lim = xtc_stack_nomem_reason();
		snprintf(why, XB_WHY, "spawn %ld: %s%s%s", r.fail_at,
		         xb_strerror(r.spawn_rc), lim ? ": " : "", lim ? lim : "");
		return XB_FAIL;
	}
	return XB_OK;
}
