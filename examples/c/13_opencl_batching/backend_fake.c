/*
 * backend_fake.c - the FAKE device: one worker thread plays the
 * accelerator. launch hands it the step under a mutex and returns; the
 * worker runs mb_step_pixel over every member's tile, stamps the time and
 * writes the eventfd, exactly where an OpenCL completion callback would.
 * Used where no OpenCL platform exists (or on request), so the batch path
 * the example exercises - submit, FENCE wait, collect - is the same code.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "backend.h"

typedef struct fake {
	mb_backend_t be;
	pthread_t thread;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int have_job, quit;
	mb_arg_t *args;      /* the step in flight (copied by launch) */
	size_t n;
	int chunk;
	float *zx, *zy;      /* per-slot pixel state, the "device memory" */
	int32_t *st;
	int32_t *rows;       /* results handed back through result() */
	size_t nslots;
	long steps, fail_step;
	_Atomic int status;
	_Atomic int64_t signal_ns;
} fake_t;

int64_t
mb_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void
run_step(fake_t *f)
{
	for (size_t k = 0; k < f->n; k++) {
		const mb_arg_t *a = &f->args[k];
		size_t base = (size_t)a->slot * MB_TILE_PIX;

		for (int p = 0; p < MB_TILE_PIX; p++) {
			int32_t s = mb_step_pixel(a, p, f->chunk, &f->zx[base + p],
			    &f->zy[base + p], f->st[base + p]);

			f->st[base + p] = s;
			f->rows[k * MB_TILE_PIX + p] = s;
		}
	}
}

static void *
worker(void *arg)
{
	fake_t *f = arg;
	uint64_t one = 1;

	pthread_mutex_lock(&f->mu);
	for (;;) {
		while (!f->have_job && !f->quit)
			pthread_cond_wait(&f->cv, &f->mu);
		if (f->quit)
			break;
		pthread_mutex_unlock(&f->mu);
		if (++f->steps == f->fail_step) {
			atomic_store(&f->status, -EIO); /* injected fault */
		} else {
			run_step(f);
			atomic_store(&f->status, 0);
		}
		atomic_store(&f->signal_ns, mb_now_ns());
		pthread_mutex_lock(&f->mu);
		f->have_job = 0;
		/* The fence: the driver proc parked on this fd resumes. */
		if (write(f->be.fence_fd, &one, sizeof one) != sizeof one)
			perror("fake: eventfd write");
	}
	pthread_mutex_unlock(&f->mu);
	return NULL;
}

static int
fake_launch(mb_backend_t *be, const mb_arg_t *args, size_t n, int chunk)
{
	fake_t *f = (fake_t *)be;

	if (n == 0 || n > be->max_n)
		return -EINVAL;
	for (size_t k = 0; k < n; k++)
		if (args[k].slot < 0 || (size_t)args[k].slot >= f->nslots)
			return -EINVAL;
	pthread_mutex_lock(&f->mu);
	if (f->have_job) {
		pthread_mutex_unlock(&f->mu);
		return -EBUSY;
	}
	memcpy(f->args, args, n * sizeof *args);
	f->n = n;
	f->chunk = chunk;
	f->have_job = 1;
	pthread_cond_signal(&f->cv);
	pthread_mutex_unlock(&f->mu);
	return 0;
}

static int
fake_result(mb_backend_t *be, const int32_t **rows, int64_t *signal_ns)
{
	fake_t *f = (fake_t *)be;

	*rows = f->rows;
	*signal_ns = atomic_load(&f->signal_ns);
	return atomic_load(&f->status);
}

static long
fake_blocking_calls(mb_backend_t *be)
{
	(void)be;
	return 0;
}

static void
fake_destroy(mb_backend_t *be)
{
	fake_t *f = (fake_t *)be;

	pthread_mutex_lock(&f->mu);
	f->quit = 1;
	pthread_cond_signal(&f->cv);
	pthread_mutex_unlock(&f->mu);
	pthread_join(f->thread, NULL);
	close(be->fence_fd);
	free(f->args);
	free(f->zx);
	free(f->zy);
	free(f->st);
	free(f->rows);
	pthread_cond_destroy(&f->cv);
	pthread_mutex_destroy(&f->mu);
	free(f);
}

int
mb_fake_open(size_t nslots, size_t max_n, long fail_step, mb_backend_t **out)
{
	fake_t *f = calloc(1, sizeof *f);
	size_t pix = nslots * MB_TILE_PIX;

	if (f == NULL)
		return -ENOMEM;
	f->nslots = nslots;
	f->args = calloc(max_n, sizeof *f->args);
	f->zx = calloc(pix, sizeof *f->zx);
	f->zy = calloc(pix, sizeof *f->zy);
	f->st = calloc(pix, sizeof *f->st);
	f->rows = calloc(max_n * MB_TILE_PIX, sizeof *f->rows);
	f->be.fence_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (f->args == NULL || f->zx == NULL || f->zy == NULL ||
	    f->st == NULL || f->rows == NULL || f->be.fence_fd < 0) {
		int e = f->be.fence_fd < 0 ? -errno : -ENOMEM;

		if (f->be.fence_fd >= 0)
			close(f->be.fence_fd);
		free(f->args);
		free(f->zx);
		free(f->zy);
		free(f->st);
		free(f->rows);
		free(f);
		return e;
	}
	f->fail_step = fail_step;
	pthread_mutex_init(&f->mu, NULL);
	pthread_cond_init(&f->cv, NULL);
	snprintf(f->be.name, sizeof f->be.name,
	    "FAKE: one CPU thread signalling an eventfd");
	f->be.max_n = max_n;
	f->be.launch = fake_launch;
	f->be.result = fake_result;
	f->be.blocking_calls = fake_blocking_calls;
	f->be.destroy = fake_destroy;
	if (pthread_create(&f->thread, NULL, worker, f) != 0) {
		close(f->be.fence_fd);
		pthread_cond_destroy(&f->cv);
		pthread_mutex_destroy(&f->mu);
		free(f->args);
		free(f->zx);
		free(f->zy);
		free(f->st);
		free(f->rows);
		free(f);
		return -EAGAIN;
	}
	*out = &f->be;
	return 0;
}
