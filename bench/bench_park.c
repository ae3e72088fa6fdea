/*
 * bench_park.c - how many procs one process holds parked in a receive, the
 * resident memory each costs, and the time to spawn, park, wake and exit
 * them (the scale issue's figures; cmd/xtcbench's memory section runs the
 * same shape next to parked goroutines).
 *
 *   bench_park [N [STACK_BYTES]]     N procs (default 100000), each with
 *                                    a stack of STACK_BYTES (default
 *                                    xtc_stack_size(); 1 KiB..16 KiB is a
 *                                    small stack, xtc_proc_opts_t)
 *
 * The fixture is cmd/xtcbench/xb_park.h (procs over standalone loops, one
 * thread each, parked in xtc_recv(-1), then woken by one byte each from
 * this thread). Prints `name value unit` lines:
 *   park_procs        procs that parked (less than N when a spawn failed)
 *   park_spawn_fail   the spawn error (0 = none) and at which proc
 *   park_rss          resident bytes per parked proc (RSS growth / procs)
 *   park_vmas         VMAs of the process while they are parked
 *   park_spawn        ns per proc from the first spawn to all parked
 *   park_wake         ns per proc from the first send to all exited
 * Memory-hungry: 10^6 procs need ~5 GB with 64 KiB stacks; keep runs
 * short on a shared machine.
 */
#include <stdio.h>
#include <stdlib.h>

#include "xtc.h"
#include "fiber_int.h" /* the parked stack depth (internal) */
#include "xb_park.h"   /* cmd/xtcbench: the fixture */

/* the first parked proc records its fiber: its saved stack pointer, read
 * once all are parked, gives the stack bytes a parked proc uses (what a
 * copying design would have to keep) */
static xtc__fiber_t *probe_fiber;
static long used = -1;

static void probe(int all_parked)
{
	if (!all_parked)
		probe_fiber = xtc__fiber_current();
	else if (probe_fiber != NULL)
		used = (long)((char *)probe_fiber->stack.hi -
		              (char *)probe_fiber->sp);
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 100000;
	long stack = argc > 2 ? atol(argv[2]) : 0;
	xb_park_t r;

	if (n < 1)
		n = 1;
	if (stack < 0)
		stack = 0;
	if (xb_park_run(n, (size_t)stack, probe, &r) != 0) {
		fprintf(stderr, "bench_park: the fixture could not be set up\n");
		return 1;
	}
	printf("park_procs %ld procs\n", r.parked);
	printf("park_spawn_fail %d rc_at_%ld\n", r.spawn_rc, r.fail_at);
	if (r.spawn_rc != 0)
		fprintf(stderr, "bench_park: spawn %ld failed: %s\n", r.fail_at,
		        xtc_strerror(r.spawn_rc));
	printf("park_rss %.0f B\n", r.rss_each);
	printf("park_vmas %ld vmas\n", r.vmas);
	printf("park_spawn %.1f ns\n",
	       r.parked > 0 ? (double)r.spawn_ns / (double)r.parked : 0.0);
	printf("park_wake %.1f ns\n",
	       r.parked > 0 ? (double)r.wake_ns / (double)r.parked : 0.0);
	printf("park_stack %zu B\n", stack > 0 ? (size_t)stack : xtc_stack_size());
	printf("park_stack_used %ld B\n", used);
	return r.spawn_rc != 0;
}
