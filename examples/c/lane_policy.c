/*
 * lane_policy.c - a lane policy (xtc_sched(3)): the "interactive" class is
 * preferred whenever it has work, yet the "bulk" class and the default
 * lane are never starved: each is served within max_bypass + L selection
 * opportunities (L = ready lanes), whatever the policy says.
 *
 * Each worker yields ROUNDS times and records, at every run, how many runs
 * (of anyone) happened since its lane last ran. Prints the share of runs
 * each lane got while all three were busy, the worst wait of the two
 * bypassed lanes against the bound, and the policy counters. Exit status 1
 * if the bound is broken, 77 in a build without lane policies.
 */
#include <stdio.h>

#include "xtc.h"
#include "xtc_sched.h"

#define ROUNDS 300
#define MAX_BYPASS 4

static long tick, last[3], worst[3], runs_busy[3];
static int left = 3;

static int prefer_interactive(const xtc_sched_lane_t *lanes, size_t n,
                              void *user)
{
	int want = *(int *)user; /* the interactive class's lane id */

	for (size_t i = 0; i < n; i++)
		if (lanes[i].id == want)
			return want;
	return XTC_SCHED_DEFAULT; /* not ready: the vruntime order decides */
}

static void worker(void *arg)
{
	int k = (int)(intptr_t)arg;

	for (int r = 0; r < ROUNDS; r++) {
		long gap = ++tick - last[k];
		last[k] = tick;
		if (gap > worst[k])
			worst[k] = gap;
		if (left == 3)
			runs_busy[k]++;
		xtc_yield();
	}
	left--;
}

int main(void)
{
	static const char *name[3] = { "default", "interactive", "bulk" };
	xtc_loop_t *loop;
	xtc_exec_class_t inter, bulk;
	xtc_proc_opts_t o = { 0 };
	int lane;
	xtc_sched_policy_t p = { .size = sizeof(p),
	    .version = XTC_SCHED_VERSION, .max_bypass = MAX_BYPASS,
	    .select = prefer_interactive, .user = &lane };
	xtc_sched_stats_t st = { .size = sizeof(st),
	    .version = XTC_SCHED_VERSION };
	long total = 0;
	int rc;

	if (xtc_loop_init(&loop) != XTC_OK ||
	    xtc_exec_class_create(loop, 100, 0, &inter) != XTC_OK ||
	    xtc_exec_class_create(loop, 100, 0, &bulk) != XTC_OK)
		return 1;
	rc = xtc_sched_lane_of(inter, &lane);
	if (rc == XTC_E_NOSYS) {
		puts("lane policies not built (-Dsched_policy=false)");
		(void)xtc_loop_fini(loop);
		return 77;
	}
	/* before the first run: setup-only */
	if (rc != XTC_OK || xtc_sched_policy_set(loop, &p) != XTC_OK)
		return 1;
	for (int k = 0; k < 3; k++) {
		o.sched_class = k == 0 ? NULL : k == 1 ? inter : bulk;
		if (xtc_proc_spawn(loop, worker, (void *)(intptr_t)k, &o,
		    NULL) != XTC_OK)
			return 1;
	}
	if (xtc_loop_run(loop) != XTC_OK ||
	    xtc_sched_get_stats(loop, &st) != XTC_OK)
		return 1;
	for (int k = 0; k < 3; k++)
		total += runs_busy[k];
	for (int k = 0; k < 3; k++)
		printf("%-11s %5.1f%% of the runs while all were busy, "
		    "worst wait %ld runs\n", name[k],
		    100.0 * (double)runs_busy[k] / (double)total, worst[k]);
	printf("bound max_bypass + L = %d; %llu selects, %llu overrides, "
	    "%llu invalid, longest wait %llu\n", MAX_BYPASS + 3,
	    (unsigned long long)st.selects, (unsigned long long)st.forced,
	    (unsigned long long)st.invalid, (unsigned long long)st.max_wait);
	if (xtc_loop_fini(loop) != XTC_OK)
		return 1;
	return worst[0] <= MAX_BYPASS + 3 && worst[2] <= MAX_BYPASS + 3 ? 0 : 1;
}
