/*
 * fn_round_robin.c - LibPreemptible's round-robin worker (its Figure 7)
 * with xtc_fn_launch / xtc_fn_resume / xtc_fn_completed.
 *
 * Requests of very different lengths arrive together. Each is launched as a
 * preemptible function with a 100 us slice; a long one that has not
 * finished when its slice ends comes back to the worker, which goes round
 * the others and resumes it later. Short requests therefore complete in
 * their first slice instead of waiting behind the long ones (no
 * head-of-line blocking), and every result is the same as an uninterrupted
 * run's. An adaptive quantum controller is fed the service times.
 */
#include <stdio.h>
#include <stdlib.h>

#include "xtc.h"
#include "xtc_fn.h"
#include "xtc_preempt.h"

/* A request: n rounds of arithmetic that never yields. */
XTC_PREEMPTIBLE static intptr_t serve(void *arg)
{
	uint64_t n = (uint64_t)(uintptr_t)arg, x = n | 1;
	for (uint64_t i = 0; i < n; i++)
		x = x * 6364136223846793005ull + 1442695040888963407ull;
	return (intptr_t)(x >> 1);
}

int main(void)
{
	enum { N = 8 };
	const uint64_t work[N] = { 30000000, 2000, 1000, 20000000, 500,
	                           3000, 10000000, 800 };
	const int64_t slice = 100000; /* 100 us */
	if (!xtc_preempt_involuntary_supported()) {
		printf("no involuntary preemption here: skipped\n");
		return 77;
	}
	xtc_fn_quantum_t *q = NULL;
	if (xtc_fn_quantum_create(NULL, &q) != XTC_OK)
		return 1;
	xtc_fn_t f[N] = { 0 };
	int64_t start[N], done_at[N];
	int order[N], done = 0;
	int64_t t0 = xtc_clock_mono();
	for (int i = 0; i < N; i++) {
		start[i] = xtc_clock_mono();
		int rc = xtc_fn_launch(&f[i], serve, (void *)(uintptr_t)work[i], slice);
		if (rc == XTC_OK) {
			done_at[i] = xtc_clock_mono();
			order[done++] = i;
		} else if (rc != XTC_E_AGAIN) {
			fprintf(stderr, "launch: %s\n", xtc_strerror(rc));
			return 1;
		}
	}
	while (done < N) {
		for (int i = 0; i < N; i++) {
			if (xtc_fn_completed(&f[i]) || f[i].state != XTC_FN_PREEMPTED)
				continue;
			if (xtc_fn_resume(&f[i], slice) == XTC_OK) {
				done_at[i] = xtc_clock_mono();
				order[done++] = i;
			}
		}
	}
	int ok = 1;
	for (int k = 0; k < N; k++) {
		int i = order[k];
		xtc_fn_quantum_record(q, f[i].run_ns);
		int same = f[i].result == serve((void *)(uintptr_t)work[i]);
		ok &= same;
		printf("request %d (%9llu rounds): done after %7.2f ms, %4u "
		       "preemptions, result %s\n", i, (unsigned long long)work[i],
		       (double)(done_at[i] - start[i]) / 1e6, f[i].preemptions,
		       same ? "ok" : "WRONG");
	}
	/* a busy worker with a few very long requests: shorter quantum */
	xtc_fn_quantum_set_load(q, 0.95);
	int64_t before = xtc_fn_quantum_get(q);
	int64_t after = xtc_fn_quantum_update(q);
	printf("all done in %.1f ms; adaptive quantum at 95%% load: %lld us -> "
	       "%lld us\n", (double)(xtc_clock_mono() - t0) / 1e6,
	       (long long)before / 1000, (long long)after / 1000);
	xtc_fn_quantum_destroy(q);
	return ok ? 0 : 1;
}
