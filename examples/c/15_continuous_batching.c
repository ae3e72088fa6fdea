/*
 * 15_continuous_batching.c - the seed's continuous-batching snippet: four
 * requests needing 5, 1, 2 and 1 rounds, at most two active. Each finished
 * member frees a slot that the next waiting request takes at the following
 * iteration boundary, so the program runs 9 member-rounds in 5 iterations
 * and the three short requests finish before the long one (completion
 * order 1, 2, 3, 0). A static batch of two would hold requests 2 and 3
 * until request 0 finished (7 iterations). In a build without the feature
 * (-Dsched_policy=false) it prints a note and exits 0.
 *
 * The step, complete, create/submit and shutdown parts are the seed's text
 * unchanged; main() around them checks the figures and prints them.
 */
#include <stdio.h>
#include <string.h>

#include "xtc.h"
#include "xtc_loop.h"
#include "xtc_exec.h"
#include "xtc_sched.h"
#include "xtc_batch.h"

#define NREQ 4

struct req {
	int length;      /* rounds it needs */
	int rounds;      /* rounds done */
	int outcome;     /* complete's outcome */
	int order;       /* 1-based completion order */
	uint64_t handle;
};

struct demo {
	xtc_batch_t *group;
	struct req reqs[NREQ];
	int deadlk;      /* mutators refused inside the step (one per call) */
	int finished;
};

/* One call per iteration, with the whole ready vector. */
static int
step(const xtc_batch_item_t *items, xtc_batch_result_t *results,
    size_t count, void *user)
{
	struct demo *d = user;
	uint64_t h;
	size_t i;

	/* Callbacks cannot mutate their own group. */
	if (xtc_batch_submit(d->group, NULL, 1, &h) == XTC_E_DEADLK)
		d->deadlk++;
	for (i = 0; i < count; i++) {
		struct req *r = items[i].request;

		r->rounds++;
		results[i].state = r->rounds == r->length ?
		    XTC_BATCH_DONE : XTC_BATCH_CONTINUE;
	}
	return XTC_OK;
}

/* Exactly once per accepted request. */
static void
complete(uint64_t handle, void *request, int outcome, void *user)
{
	struct demo *d = user;
	struct req *r = request;

	(void)handle;
	r->outcome = outcome;
	r->order = ++d->finished;
}

int
main(void)
{
	static const int lengths[NREQ] = { 5, 1, 2, 1 };
	static const int want_order[NREQ] = { 4, 1, 2, 3 };
	struct demo d;
	xtc_batch_opts_t opts;
	xtc_batch_stats_t st;
	xtc_exec_class_t cls;
	xtc_loop_t *loop;
	int i, rc;

	memset(&d, 0, sizeof d);
	if (xtc_loop_init(&loop) != XTC_OK ||
	    xtc_exec_class_create(loop, 100, 0, &cls) != XTC_OK)
		return 1;

	opts = (xtc_batch_opts_t){ .size = sizeof(opts),
	    .version = XTC_BATCH_VERSION,
	    .capacity = NREQ,        /* waiting + active slots */
	    .max_active = 2,         /* members per vector, at most */
	    .resource_capacity = 2,  /* units shared by active members */
	    .sched_class = cls,
	    .step = step, .complete = complete, .user = &d };

	/* Before the loop's first run. */
	rc = xtc_batch_create(loop, &opts, &d.group);
	if (rc == XTC_E_NOSYS) {
		puts("batching not built (configure --enable-sched-policy)");
		(void)xtc_loop_fini(loop);
		return 0;
	}
	if (rc != XTC_OK ||
	    xtc_sched_continuous_set(loop, 3) != XTC_OK) /* optional */
		return 1;
	for (i = 0; i < NREQ; i++) {
		d.reqs[i].length = lengths[i];
		if (xtc_batch_submit(d.group, &d.reqs[i], 1,
		    &d.reqs[i].handle) != XTC_OK)
			return 1;
	}

	/* Close, run until the driver ends, destroy, then fini. */
	if (xtc_batch_close(d.group, XTC_BATCH_DRAIN) != XTC_OK ||
	    xtc_loop_run(loop) != XTC_OK ||
	    xtc_batch_get_stats(d.group, &st) != XTC_OK ||
	    xtc_batch_destroy(d.group) != XTC_OK ||
	    xtc_loop_fini(loop) != XTC_OK)
		return 1;

	printf("%llu member-rounds in %llu iterations (max_active 2)\n",
	    (unsigned long long)st.member_rounds,
	    (unsigned long long)st.iterations);
	printf("completion order:");
	for (int k = 1; k <= NREQ; k++)
		for (i = 0; i < NREQ; i++)
			if (d.reqs[i].order == k)
				printf(" %d", i);
	printf("\nsubmits refused inside step: %d (XTC_E_DEADLK)\n", d.deadlk);

	if (st.member_rounds != 9 || st.iterations != 5 ||
	    d.deadlk != (int)st.iterations)
		return 1;
	for (i = 0; i < NREQ; i++)
		if (d.reqs[i].outcome != XTC_OK ||
		    d.reqs[i].order != want_order[i])
			return 1;
	return 0;
}
