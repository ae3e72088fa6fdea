/*
 * blocking_futures.c - offload blocking calls and pass results between
 * threads and fibers.
 *
 *  1. A proc offloads a blocking sleep to the blocking pool
 *     (xtc_blocking_run) while a second proc keeps ticking on the same loop.
 *  2. A plain thread hands work to the running loop with xtc_dispatch and
 *     waits for the future; a map continuation doubles the result.
 *  3. when_all joins several futures set from another thread.
 */
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>

#include <xtc.h>

static int ticks;

static int slow_call(void *arg)
{
	usleep(20000); /* stands for a blocking library call */
	return (int)(intptr_t)arg;
}

static void offloader(void *arg)
{
	int r = 0;
	(void)arg;
	xtc_blocking_run(slow_call, (void *)(intptr_t)7, &r);
	printf("offloaded call returned %d; the loop ticked %s meanwhile\n", r,
	       ticks > 0 ? "on" : "NOT");
}

static void ticker(void *arg)
{
	(void)arg;
	for (int i = 0; i < 5; i++) {
		xtc_proc_sleep(1000000);
		ticks++;
	}
}

static int square(void *arg)
{
	int v = (int)(intptr_t)arg;
	return v * v;
}

static intptr_t twice(intptr_t v, int status, void *user)
{
	(void)status;
	(void)user;
	return 2 * v;
}

/* Keeps the loop alive until a message arrives. */
static void keepalive(void *arg)
{
	void *m = NULL;
	size_t n = 0;
	(void)arg;
	if (xtc_recv(&m, &n, -1) == XTC_OK)
		xtc_free(m);
}

static void *run_loop(void *arg)
{
	xtc_loop_run(arg);
	return NULL;
}

static xtc_promise_t *proms[3];
static void *setter(void *arg)
{
	(void)arg;
	for (int i = 0; i < 3; i++)
		xtc_promise_set(proms[i], i, XTC_OK);
	return NULL;
}

int main(void)
{
	xtc_loop_t *loop;
	xtc_future_t *fut, *doubled, *futs[3], *all;
	xtc_pid_t ka;
	pthread_t th;
	intptr_t v = 0;
	int rc;

	if (xtc_loop_init(&loop) != XTC_OK)
		return 1;

	/* 1 */
	xtc_proc_spawn(loop, offloader, NULL, NULL, NULL);
	xtc_proc_spawn(loop, ticker, NULL, NULL, NULL);
	xtc_loop_run(loop);

	/* 2: the loop runs on another thread; this one dispatches and waits */
	xtc_proc_spawn(loop, keepalive, NULL, NULL, &ka);
	pthread_create(&th, NULL, run_loop, loop);
	xtc_dispatch(loop, square, (void *)(intptr_t)12, &fut, NULL);
	xtc_future_map(fut, twice, NULL, &doubled);
	rc = xtc_future_wait(doubled, &v, -1);
	printf("dispatch + map: %ld (%s)\n", (long)v, xtc_strerror(rc));
	xtc_send(ka, "", 1);
	pthread_join(th, NULL);

	/* 3 */
	for (int i = 0; i < 3; i++)
		xtc_future_new_pair(&proms[i], &futs[i]);
	xtc_future_when_all(futs, 3, &all);
	pthread_create(&th, NULL, setter, NULL);
	rc = xtc_future_wait(all, &v, -1);
	pthread_join(th, NULL);
	printf("when_all: %ld futures (%s)\n", (long)v, xtc_strerror(rc));

	xtc_loop_fini(loop);
	xtc_blocking_shutdown();
	return ticks == 5 && rc == XTC_OK ? 0 : 1;
}
