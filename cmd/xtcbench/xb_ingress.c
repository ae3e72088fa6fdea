/*
 * xb_ingress.c - the arrivals of the Go rows of the tail workload, made
 * outside Go and delivered to it through the netpoller.
 *
 * Model: a Go service learns of a request from the network: the kernel
 * makes a descriptor ready, the netpoller wakes an M, an accept or read
 * goroutine starts one goroutine per request. Here a generator pthread,
 * spinning until each scheduled arrival exactly as xb_tail.c's does for
 * the core fed from C, publishes the arrival's index (`tail`) and rings
 * an eventfd when the Go reader said it is about to sleep (`armed`). The
 * reader (tail.go, replayFromC) drains the published indices and starts
 * a goroutine per request; every Go row (plain cgo, Exec.GoInt, pure Go)
 * is fed by it, so they differ only in what the request goroutine does.
 *
 * With `sleep` the generator sleeps until each arrival still ahead (an
 * absolute CLOCK_MONOTONIC sleep) instead of spinning: the load then
 * leaves the whole machine to the service, as a client across a network
 * does, and the timer's wake-up latency (tens of µs on a VM) is in every
 * row's generator lag and sojourn alike. Arrivals already due are
 * published without a syscall: a sleep call per arrival cost more than
 * the mean gap at 30 % load on the development VM, and the lag grew
 * without bound (p50 0.1-0.15 s).
 *
 * Invariant: no lost wake-up. The reader stores armed = 1 and then loads
 * tail; the generator stores tail and then loads armed; both sequentially
 * consistent, so at least one of them sees the other's store. A stale
 * ring (the reader re-checked and went on) costs a spurious wake only.
 *
 * Rejected: a generator goroutine that spins on one of Go's Ps (the rows'
 * first form). Each `go f()` then lands in that P's runnext, which the
 * other P may take only after the runtime's steal back-off (60-90 µs on
 * the development VM): a stage that no server fed by the network has, and
 * that was most of plain cgo's sojourn. A doorbell per arrival: an
 * eventfd write costs the generator a few µs, near the mean gap at 70 %.
 * Arrays in Go memory: the thread keeps them after the cgo call returns,
 * which cgo's pointer rules forbid, so they are copied in and out.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>
#include <time.h>

#include "xb.h"

struct xb_gen {
	int64_t        *arrival; /* ns after base */
	int64_t        *lag;     /* ns late, per arrival */
	int64_t         n;
	int64_t         base;
	int             efd;
	int             sleep;   /* sleep until each arrival, not spin */
	pthread_t       th;
	int             started;
	_Alignas(64) _Atomic int64_t tail;  /* arrivals published */
	_Alignas(64) _Atomic int32_t armed; /* the reader is about to sleep */
	_Alignas(64) char pad;
};

xb_gen_t *xb_gen_new(const int64_t *arrival, int64_t n, int sleep, char *why)
{
	xb_gen_t *g = calloc(1, sizeof *g);
	if (g == NULL || n < 0) {
		snprintf(why, XB_WHY, "xb_gen_new: out of memory");
		free(g);
		return NULL;
	}
	g->n = n;
	g->sleep = sleep;
	g->arrival = malloc((size_t)(n > 0 ? n : 1) * sizeof(int64_t));
	g->lag = calloc((size_t)(n > 0 ? n : 1), sizeof(int64_t));
	g->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (g->arrival == NULL || g->lag == NULL || g->efd < 0) {
		snprintf(why, XB_WHY, "xb_gen_new: %s", g->efd < 0 ? strerror(errno) : "out of memory");
		if (g->efd >= 0)
			close(g->efd);
		free(g->arrival);
		free(g->lag);
		free(g);
		return NULL;
	}
	if (n > 0)
		memcpy(g->arrival, arrival, (size_t)n * sizeof(int64_t));
	return g;
}

int      xb_gen_fd(xb_gen_t *g) { return g->efd; }
int64_t  xb_gen_base(xb_gen_t *g) { return g->base; }
int64_t *xb_gen_tail(xb_gen_t *g) { return (int64_t *)&g->tail; }
int32_t *xb_gen_armed(xb_gen_t *g) { return (int32_t *)&g->armed; }

static void *gen_main(void *arg)
{
	xb_gen_t *g = arg;
	for (int64_t i = 0; i < g->n; i++) {
		int64_t target = g->base + g->arrival[i], now;
		if (g->sleep && target > xb_now()) {
			struct timespec ts = { (time_t)(target / 1000000000),
			                       (long)(target % 1000000000) };
			while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME,
			                       &ts, NULL) == EINTR)
				;
		}
		while ((now = xb_now()) < target)
			xb_cpu_relax();
		g->lag[i] = now - target;
		atomic_store(&g->tail, i + 1);
		if (atomic_load(&g->armed) && atomic_exchange(&g->armed, 0)) {
			uint64_t one = 1;
			/* EAGAIN only when the counter is near 2^64: a wake is
			 * pending then anyway */
			(void)!write(g->efd, &one, sizeof one);
		}
	}
	return NULL;
}

int xb_gen_start(xb_gen_t *g, int64_t start_in_ns, char *why)
{
	g->base = xb_now() + start_in_ns;
	int rc = pthread_create(&g->th, NULL, gen_main, g);
	if (rc != 0) {
		snprintf(why, XB_WHY, "pthread_create: %s", strerror(rc));
		return XB_FAIL;
	}
	g->started = 1;
	return XB_OK;
}

void xb_gen_free(xb_gen_t *g, int64_t *lag_out)
{
	if (g == NULL)
		return;
	if (g->started)
		pthread_join(g->th, NULL);
	if (lag_out != NULL && g->n > 0)
		memcpy(lag_out, g->lag, (size_t)g->n * sizeof(int64_t));
	free(g->arrival);
	free(g->lag);
	free(g);
}
