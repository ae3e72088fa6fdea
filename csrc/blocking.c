/*
 * blocking.c - the blocking offload pool (xtc_blocking.h).
 *
 * Model. One process-wide pool: a FIFO of jobs under one mutex, a condition
 * variable the idle pool threads sleep on, and up to
 * XTC_BLOCKING_MAX_THREADS threads. xtc_blocking_run puts a job that lives
 * on the calling fiber's stack (the fiber cannot leave while it is queued)
 * and parks; the pool thread runs fn, stores the result and fires the
 * job's wait node (future_int.h), which wakes the fiber through
 * xtc__task_wake: on its current loop, through that loop's MPSC inbox and
 * poller wakeup from the pool thread. A fiber that migrated between its
 * spurious wakes is still found, because the wake reads t->loop when it
 * fires. xtc_blocking_submit jobs are heap records freed by the pool thread.
 *
 * Invariants
 *  - a queued job is run exactly once: by a pool thread, or by
 *    xtc_blocking_shutdown for jobs that raced the shutdown;
 *  - the pool's state changes (start, shutdown, size) are serialised by
 *    life_mu, so a shutdown never joins a thread another call is creating;
 *  - the parked fiber waits with XTC__PARK_NOKILL: a kill cannot unwind its
 *    stack while a pool thread still writes the job's result there;
 *  - for the same reason loop fini, which releases the parked fiber, runs
 *    its detach hook first (xtc__task_set_detach): a job still queued is
 *    taken off the queue and never runs; a job already running is waited
 *    for, since fn's argument commonly lives on that fiber's stack.
 *
 * Alternatives rejected
 *  - A completion pipe per job waited on with xtc_proc_wait_fd (libxtc's
 *    way): two extra syscalls and an fd per job; the inbox wake is the
 *    loop's own cross-thread path and needs neither.
 *  - A lock-free job queue: pool threads sleep when idle anyway, so the
 *    mutex + condvar costs nothing extra, and it makes "grow when every
 *    thread is busy" exact.
 *  - Running run's fn on the carrier when off a fiber would block a loop;
 *    but there is no fiber to park, so the synchronous call is the only
 *    answer that still runs fn (libxtc does the same).
 */
#include "rtcode_int.h" /* first: this file is runtime code */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

#include "xtc.h"
#include "xtc_blocking.h"
#include "future_int.h"
#include "loop_int.h"

typedef struct bjob bjob_t;
struct bjob {
	bjob_t *next;
	int (*fn)(void *);
	void *arg;
	int result;
	int heap;            /* submit: freed by whoever runs it */
	xtc__wnode_t wn;     /* run: fired after result is stored */
};

enum { POOL_STOPPED = 0, POOL_RUNNING = 1, POOL_STOPPING = 2 };

static struct {
	pthread_mutex_t mu;       /* queue, counters, state */
	pthread_cond_t cv;        /* idle threads wait here */
	pthread_mutex_t life_mu;  /* start / shutdown / size */
	bjob_t *head, *tail;
	int state;                /* POOL_* */
	int nthreads;             /* created and not joined */
	int idle;                 /* waiting on cv */
	int qlen;                 /* queued jobs */
	int fixed;                /* pool_size called: no growth */
	int size;                 /* initial size (fixed size when fixed) */
	pthread_t tids[XTC_BLOCKING_MAX_THREADS];
} pool = {
	.mu = PTHREAD_MUTEX_INITIALIZER,
	.cv = PTHREAD_COND_INITIALIZER,
	.life_mu = PTHREAD_MUTEX_INITIALIZER,
};

/* Set in pool threads: shutdown from a job must not join itself. */
static __thread int in_pool_thread;

/* fork(): the child has none of the pool threads. Prepare takes pool.mu
 * so the child's copy of the queue and counters is consistent (not
 * life_mu: a shutdown holds it while it joins, possibly the very thread
 * that forks from inside a job). The child starts from a stopped, empty
 * pool that the next job re-creates; jobs queued at the fork belong to
 * the parent, which still runs them (running a copy would run them
 * twice). A fixed size set with xtc_blocking_pool_size is kept. */
static pthread_once_t fork_once = PTHREAD_ONCE_INIT;

static void fork_prepare(void)
{
	pthread_mutex_lock(&pool.mu);
}

static void fork_parent(void)
{
	pthread_mutex_unlock(&pool.mu);
}

static void fork_child(void)
{
	pthread_mutex_init(&pool.mu, NULL);
	pthread_mutex_init(&pool.life_mu, NULL);
	pthread_cond_init(&pool.cv, NULL);
	pool.head = pool.tail = NULL;
	pool.qlen = 0;
	pool.nthreads = 0;
	pool.idle = 0;
	pool.state = POOL_STOPPED;
	if (!pool.fixed)
		pool.size = 0;
	in_pool_thread = 0; /* a job that forked: the child is not a pool thread */
}

static void fork_register(void)
{
	(void)pthread_atfork(fork_prepare, fork_parent, fork_child);
}

static int default_size(void)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);

	if (n < 4)
		n = 4;
	if (n > XTC_BLOCKING_MAX_THREADS)
		n = XTC_BLOCKING_MAX_THREADS;
	return (int)n;
}

static void job_finish(bjob_t *j)
{
	if (j->heap)
		free(j);
	else
		xtc__wnode_fire(&j->wn);
}

static void job_run(bjob_t *j)
{
	j->result = j->fn(j->arg);
	job_finish(j);
}

static bjob_t *queue_pop_locked(void)
{
	bjob_t *j = pool.head;

	if (j != NULL) {
		pool.head = j->next;
		if (pool.head == NULL)
			pool.tail = NULL;
		j->next = NULL;
		pool.qlen--;
	}
	return j;
}

/* A pool thread counts as idle whenever it is not running a job (also
 * while it is starting), so enqueue's "queue longer than idle" test never
 * spawns a thread for a job an existing one is about to take. */
static void *pool_main(void *unused)
{
	(void)unused;
	in_pool_thread = 1;
	pthread_mutex_lock(&pool.mu);
	for (;;) {
		bjob_t *j = queue_pop_locked();

		if (j != NULL) {
			pool.idle--;
			pthread_mutex_unlock(&pool.mu);
			job_run(j);
			pthread_mutex_lock(&pool.mu);
			pool.idle++;
			continue;
		}
		if (pool.state == POOL_STOPPING)
			break;
		pthread_cond_wait(&pool.cv, &pool.mu);
	}
	pool.idle--;
	pthread_mutex_unlock(&pool.mu);
	return NULL;
}

/* pool.mu held. Create one more thread; 0 or XTC_E_AGAIN. */
static int spawn_thread_locked(void)
{
	pthread_attr_t attr;
	int rc;

	if (pool.nthreads >= XTC_BLOCKING_MAX_THREADS)
		return XTC_E_AGAIN;
	if (pthread_attr_init(&attr) != 0)
		return XTC_E_AGAIN;
	/* Blocking C code may want a real stack; 256 KiB of frames is plenty
	 * for the libc calls this pool exists for and keeps 64 threads
	 * cheap. The program's static TLS comes out of the same stack
	 * (xtc__thread_stack_size); the default size if that is refused. */
	rc = pthread_attr_setstacksize(&attr, xtc__thread_stack_size(256 * 1024));
	if (rc == 0)
		rc = pthread_create(&pool.tids[pool.nthreads], &attr, pool_main,
		                    NULL);
	pthread_attr_destroy(&attr);
	if (rc != 0 && rc != EAGAIN)
		rc = pthread_create(&pool.tids[pool.nthreads], NULL, pool_main,
		                    NULL);
	if (rc != 0)
		return XTC_E_AGAIN;
	pool.nthreads++;
	pool.idle++;
	return 0;
}

/* Queue j, starting or growing the pool as needed. XTC_E_AGAIN when there
 * is no thread at all to run it (j not queued). */
static int enqueue(bjob_t *j)
{
	int rc = 0;

	pthread_once(&fork_once, fork_register);
	pthread_mutex_lock(&pool.mu);
	if (pool.state == POOL_STOPPED) {
		int want = pool.size > 0 ? pool.size : default_size();

		pool.size = want;
		pool.state = POOL_RUNNING;
		for (int i = 0; i < want; i++)
			if (spawn_thread_locked() != 0)
				break;
	}
	if (pool.nthreads == 0 && pool.state == POOL_RUNNING) {
		pool.state = POOL_STOPPED;
		rc = XTC_E_AGAIN;
	} else {
		/* STOPPING: shutdown runs what is left after joining. */
		j->next = NULL;
		if (pool.tail != NULL)
			pool.tail->next = j;
		else
			pool.head = j;
		pool.tail = j;
		pool.qlen++;
		/* Every queued job needs a thread that is idle (signalled) or
		 * new: grow while the queue outnumbers the idle threads, so a
		 * job never waits behind blocked ones. Best effort. */
		if (pool.state == POOL_RUNNING && !pool.fixed &&
		    pool.qlen > pool.idle)
			(void)spawn_thread_locked();
		pthread_cond_signal(&pool.cv);
	}
	pthread_mutex_unlock(&pool.mu);
	return rc;
}

/* 1 if j was queued (now removed: it will never run). */
static int queue_remove(bjob_t *j)
{
	bjob_t **pp, *prev = NULL;
	int found = 0;

	pthread_mutex_lock(&pool.mu);
	for (pp = &pool.head; *pp != NULL; prev = *pp, pp = &(*pp)->next) {
		if (*pp == j) {
			*pp = j->next;
			if (pool.tail == j)
				pool.tail = prev;
			pool.qlen--;
			found = 1;
			break;
		}
	}
	pthread_mutex_unlock(&pool.mu);
	return found;
}

/* Detach hook of a fiber parked in xtc_blocking_run, run by loop fini:
 * withdraw the job, or wait until whoever runs it has stored the result
 * and fired the node (fn may use memory on the fiber's stack). */
static void job_detach(void *arg)
{
	bjob_t *j = arg;

	if (!queue_remove(j))
		xtc__wnode_await_done(&j->wn);
}

int xtc_blocking_run(int (*fn)(void *), void *arg, int *out_result)
{
	bjob_t j = { .fn = fn, .arg = arg };
	int rc;

	if (fn == NULL)
		return XTC_E_INVAL;
	if (!xtc__in_fiber() || xtc__gocb_depth > 0 || in_pool_thread)
		goto sync;
	xtc__wnode_init(&j.wn);
	if (j.wn.task == NULL)
		goto sync;
	if (enqueue(&j) != 0)
		goto sync;
	xtc__task_set_detach(j.wn.task, job_detach, &j);
	rc = xtc__wnode_wait(&j.wn, -1);
	xtc__task_set_detach(j.wn.task, NULL, NULL);
	if (rc != 0) {
		/* Cannot happen for a fiber outside a Go callback (checked
		 * above); never return while the job may still be written. */
		xtc__wnode_settle(&j.wn);
	}
	if (out_result != NULL)
		*out_result = j.result;
	return 0;
sync:
	rc = fn(arg);
	if (out_result != NULL)
		*out_result = rc;
	return 0;
}

int xtc_blocking_submit(int (*fn)(void *), void *arg)
{
	bjob_t *j;
	int rc;

	if (fn == NULL)
		return XTC_E_INVAL;
	j = calloc(1, sizeof(*j));
	if (j == NULL)
		return XTC_E_NOMEM;
	j->fn = fn;
	j->arg = arg;
	j->heap = 1;
	rc = enqueue(j);
	if (rc != 0)
		free(j);
	return rc;
}

int xtc_blocking_pool_size(int nthreads)
{
	int rc = 0;

	if (nthreads < 1 || nthreads > XTC_BLOCKING_MAX_THREADS)
		return XTC_E_RANGE;
	pthread_mutex_lock(&pool.life_mu);
	pthread_mutex_lock(&pool.mu);
	if (pool.state != POOL_STOPPED) {
		rc = XTC_E_INVAL;
	} else {
		pool.size = nthreads;
		pool.fixed = 1;
	}
	pthread_mutex_unlock(&pool.mu);
	pthread_mutex_unlock(&pool.life_mu);
	return rc;
}

void xtc_blocking_shutdown(void)
{
	int n;
	bjob_t *j;

	if (in_pool_thread)
		return;
	pthread_mutex_lock(&pool.life_mu);
	pthread_mutex_lock(&pool.mu);
	if (pool.state != POOL_RUNNING) {
		pthread_mutex_unlock(&pool.mu);
		pthread_mutex_unlock(&pool.life_mu);
		return;
	}
	pool.state = POOL_STOPPING;
	pthread_cond_broadcast(&pool.cv);
	n = pool.nthreads;
	pthread_mutex_unlock(&pool.mu);
	/* Threads only ever grow while RUNNING, so n is final now. */
	for (int i = 0; i < n; i++)
		pthread_join(pool.tids[i], NULL);
	pthread_mutex_lock(&pool.mu);
	pool.nthreads = 0;
	/* Jobs queued after the last thread left: run them here. */
	while ((j = queue_pop_locked()) != NULL) {
		pthread_mutex_unlock(&pool.mu);
		job_run(j);
		pthread_mutex_lock(&pool.mu);
	}
	pool.state = POOL_STOPPED;
	if (!pool.fixed)
		pool.size = 0;
	pthread_mutex_unlock(&pool.mu);
	pthread_mutex_unlock(&pool.life_mu);
}

int xtc_blocking_threads(void)
{
	int n;

	pthread_mutex_lock(&pool.mu);
	n = pool.nthreads;
	pthread_mutex_unlock(&pool.mu);
	return n;
}
