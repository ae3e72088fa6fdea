/*
 * coroutines.c - stackful coroutines: xtc_async, xtc_await, xtc_yield.
 *
 * Two producers yield to each other mid-loop (their locals survive the
 * switch); a third coroutine awaits both from inside the loop and sums their
 * results; main awaits the summer, which drives the loop from outside.
 */
#include <stdio.h>
#include <stdlib.h>

#include <xtc.h>

struct producer {
	const char *name;
	int n;
};

static intptr_t
produce(void *arg)
{
	struct producer *p = arg;
	intptr_t sum = 0;
	int i;

	for (i = 1; i <= p->n; i++) {
		sum += i;
		printf("%s: step %d, partial sum %ld\n", p->name, i, (long)sum);
		xtc_yield(); /* resume after the other coroutines had a turn */
	}
	return sum;
}

struct summer {
	xtc_task_t *a, *b;
};

static intptr_t
summer(void *arg)
{
	struct summer *s = arg;
	intptr_t ra = 0, rb = 0;
	int rc;

	/* Inside a coroutine, xtc_await parks this fiber until the target is
	 * done; the producers keep running meanwhile. */
	if ((rc = xtc_await(s->a, &ra)) != XTC_OK ||
	    (rc = xtc_await(s->b, &rb)) != XTC_OK) {
		fprintf(stderr, "xtc_await: %s\n", xtc_strerror(rc));
		return -1;
	}
	printf("summer: a=%ld b=%ld\n", (long)ra, (long)rb);
	return ra + rb;
}

int
main(void)
{
	xtc_loop_t *loop;
	struct producer pa = {"a", 3}, pb = {"b", 4};
	struct summer s;
	xtc_task_t *sum;
	intptr_t total = 0;
	int rc;

	printf("default fiber stack: %zu KiB\n", xtc_stack_size() / 1024);
	if ((rc = xtc_loop_init(&loop)) != XTC_OK) {
		fprintf(stderr, "xtc_loop_init: %s\n", xtc_strerror(rc));
		return 1;
	}
	if (xtc_async(loop, produce, &pa, &s.a) != XTC_OK ||
	    xtc_async(loop, produce, &pb, &s.b) != XTC_OK ||
	    xtc_async(loop, summer, &s, &sum) != XTC_OK)
		return 1;

	/* From main, before the loop runs, xtc_await drives the loop until the
	 * coroutine is done. */
	if ((rc = xtc_await(sum, &total)) != XTC_OK) {
		fprintf(stderr, "xtc_await: %s\n", xtc_strerror(rc));
		return 1;
	}
	printf("total = %ld (expected %d)\n", (long)total, 6 + 10);

	/* Off a fiber there is nothing to suspend. */
	printf("xtc_yield_ex off a fiber: %s\n", xtc_strerror(xtc_yield_ex()));

	xtc_loop_run(loop); /* let anything left finish */
	xtc_loop_fini(loop);
	return total == 16 ? 0 : 1;
}
