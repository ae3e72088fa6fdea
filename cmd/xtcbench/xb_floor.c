/*
 * xb_floor.c - the machine's preemption floor: what the kernel (and, in a
 * guest, the hypervisor) charge for the pieces every involuntary
 * preemption is made of, before xtc does any work of its own.
 *
 * Why: a timer interrupt, a signal delivery and a timer re-arm cost a few
 * microseconds on bare metal but tens in a guest, where the interrupt, the
 * deadline write and the cross-CPU IPI are VM exits. No slice can cost
 * less than that, so the report states the floor next to the results it
 * bounds.
 *
 * Model: a raw syscall, a private real-time signal (never xtc's) and a
 * private POSIX timer, on threads of its own pinned to one CPU each, so a
 * migration never looks like a stall and nothing of xtc or Go is on the
 * path. A stall is the largest gap between consecutive clock reads of a
 * spinning thread within the window of one delivery: the time the
 * interrupt, the handler and the return took from it. Medians over n
 * samples after a warm-up; at XB_FLOOR_N the whole run takes about 0.1-0.2
 * s. This is the one implementation: xtcbench calls it through xb_floor()
 * (xb_common.c), and meson compiles this file into bench/bench_preempt
 * (argument `floor`), which takes more samples. It uses only libc and
 * xtc_preempt_signal(), so it builds in both.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "xtc.h"
#include "xb_floor.h"

#define AHEAD_NS 50000 /* a short slice: expiry 50 us after arming */
#define TAIL_NS 5000   /* spin on after the handler, so the return path is
                          inside the window */
#define LOST_NS 1000000000 /* not seen in 1 s: lost, not merely late (a
                              real-time signal is queued) */
#define WARM 30
#define NMAX (XB_FLOOR_NMAX + WARM)

static int     fl_sig;
static pid_t   fl_pid;
static _Atomic int64_t  fl_hit_at; /* the handler's clock read */
static _Atomic unsigned fl_hits;
static _Atomic int      fl_stop;
static int     fl_n; /* samples of this measurement */
static int64_t fl_a[NMAX], fl_b[NMAX];

static int64_t fl_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void fl_handler(int sig)
{
	(void)sig;
	atomic_store_explicit(&fl_hit_at, fl_now(), memory_order_relaxed);
	atomic_fetch_add_explicit(&fl_hits, 1, memory_order_release);
}

static pid_t fl_gettid(void)
{
	return (pid_t)syscall(SYS_gettid);
}

static int fl_kill(pid_t tid)
{
	return (int)syscall(SYS_tgkill, fl_pid, tid, fl_sig);
}

/* Threads created from a Go thread inherit its mask, which may block the
 * signal. */
static void fl_thread_setup(int cpu)
{
	sigset_t s;
	sigemptyset(&s);
	sigaddset(&s, fl_sig);
	pthread_sigmask(SIG_UNBLOCK, &s, NULL);
	if (cpu >= 0) {
		cpu_set_t c;
		CPU_ZERO(&c);
		CPU_SET(cpu, &c);
		pthread_setaffinity_np(pthread_self(), sizeof c, &c);
	}
}

/* Spins until the handler has run `want` times in all and TAIL_NS more
 * have passed; returns the largest gap between two clock reads, or -1 if
 * `limit` passed (or fl_stop was set) first. */
static int64_t fl_spin(unsigned want, int64_t limit)
{
	int64_t prev = fl_now(), gap = 0;
	for (;;) {
		int64_t t = fl_now();
		if (t - prev > gap)
			gap = t - prev;
		prev = t;
		if ((int)(atomic_load_explicit(&fl_hits, memory_order_acquire) -
		          want) >= 0) {
			if (t - atomic_load_explicit(&fl_hit_at, memory_order_relaxed) >=
			    TAIL_NS)
				return gap;
		} else if (t > limit ||
		           atomic_load_explicit(&fl_stop, memory_order_relaxed)) {
			return -1;
		}
	}
}

static int cmp64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return (x > y) - (x < y);
}

/* nearest-rank quantile, in us; sorts v */
static double fl_q_us(int64_t *v, int n, int pct)
{
	qsort(v, (size_t)n, sizeof *v, cmp64);
	return (double)v[(size_t)n * (size_t)pct / 100] / 1e3;
}

static struct timespec fl_ts(int64_t ns)
{
	struct timespec ts = { (time_t)(ns / 1000000000), (long)(ns % 1000000000) };
	return ts;
}

typedef struct fl_run {
	xb_floor_t *out;
	int         cpu_a, cpu_b;
	const char *err;
} fl_run_t;

typedef struct fl_cross {
	int      n, cpu;
	unsigned base;
	_Atomic pid_t tid;
	_Atomic int   done; /* windows published */
} fl_cross_t;

/* The cross-CPU target: one window per signal, back to back, so the
 * sender's pause is inside the window (spinning, as a carrier would). */
static void *fl_cross_target(void *arg)
{
	fl_cross_t *c = arg;
	fl_thread_setup(c->cpu);
	atomic_store(&c->tid, fl_gettid());
	for (int k = 0; k < c->n; k++) {
		int64_t gap = fl_spin(c->base + (unsigned)k + 1,
		                      fl_now() + 2 * (int64_t)LOST_NS);
		if (gap < 0)
			break;
		fl_b[k] = gap;
		atomic_store_explicit(&c->done, k + 1, memory_order_release);
	}
	return NULL;
}

static const char *fl_cross(fl_run_t *r)
{
	const int n = fl_n;
	fl_cross_t c = { .n = n + WARM, .cpu = r->cpu_b,
	                 .base = atomic_load(&fl_hits) };
	pthread_t th;
	atomic_store(&fl_stop, 0);
	if (pthread_create(&th, NULL, fl_cross_target, &c) != 0)
		return "pthread_create";
	pid_t tid;
	while ((tid = atomic_load(&c.tid)) == 0)
		;
	const char *err = NULL;
	for (int k = 0; k < c.n && !err; k++) {
		int64_t t = fl_now();
		while (!err && atomic_load_explicit(&c.done, memory_order_acquire) < k)
			if (fl_now() - t > LOST_NS)
				err = "cross-CPU target stopped";
		if (err)
			break;
		/* a pause that varies, so sends do not lock onto the tick */
		int64_t go = fl_now() + 20000 + (k * 7919) % 40000;
		while (fl_now() < go)
			;
		int64_t sent = fl_now();
		if (fl_kill(tid) != 0) {
			err = "tgkill to the other CPU failed";
			break;
		}
		while (!err &&
		       atomic_load_explicit(&c.done, memory_order_acquire) < k + 1)
			if (fl_now() - sent > LOST_NS)
				err = "cross-CPU signal lost";
		if (!err && k >= WARM)
			fl_a[k - WARM] = atomic_load(&fl_hit_at) - sent;
	}
	atomic_store(&fl_stop, 1);
	pthread_join(th, NULL);
	if (err)
		return err;
	r->out->cross = 1;
	r->out->cross_signal_p50_us = fl_q_us(fl_a, n, 50);
	r->out->cross_stall_p50_us = fl_q_us(fl_b + WARM, n, 50);
	return NULL;
}

static const char *fl_timer(fl_run_t *r)
{
	const int n = fl_n;
	struct sigevent sev;
	memset(&sev, 0, sizeof sev);
	sev.sigev_notify = SIGEV_THREAD_ID;
	sev.sigev_signo = fl_sig;
	sev._sigev_un._tid = fl_gettid();
	timer_t tm;
	if (timer_create(CLOCK_MONOTONIC, &sev, &tm) != 0)
		return "timer_create failed";
	const char *err = NULL;
	const struct itimerspec off = { { 0, 0 }, { 0, 0 } };
	struct itimerspec its = off;
	/* a sample whose timer fired inside the arming call (the thread was
	 * descheduled) has no window: redo it */
	int k = 0, tries = 0;
	while (k < n + WARM && !err) {
		if (++tries > 4 * (n + WARM)) {
			err = "the timer fired inside timer_settime too often";
			break;
		}
		unsigned want = atomic_load(&fl_hits) + 1;
		int64_t exp = fl_now() + AHEAD_NS;
		its.it_value = fl_ts(exp);
		if (timer_settime(tm, TIMER_ABSTIME, &its, NULL) != 0) {
			err = "timer_settime failed";
			break;
		}
		int64_t armed = fl_now();
		int64_t gap = fl_spin(want, exp + LOST_NS);
		if (gap < 0) {
			err = "timer signal lost";
			break;
		}
		int64_t hit = atomic_load(&fl_hit_at);
		if (hit < armed)
			continue;
		if (k >= WARM) {
			fl_a[k - WARM] = hit - exp;
			fl_b[k - WARM] = gap;
		}
		k++;
	}
	if (!err) {
		r->out->timer_late_p99_us = fl_q_us(fl_a, n, 99);
		r->out->timer_late_p50_us = fl_q_us(fl_a, n, 50);
		r->out->timer_stall_p50_us = fl_q_us(fl_b, n, 50);
	}
	/* Arming alone. Near: earlier than anything queued on this CPU (the
	 * tick is >= 1 ms away at any HZ, and this running thread keeps it on),
	 * so the timer device is reprogrammed, as for a slice timer at every
	 * dispatch. Far: behind the tick, a queue insert only. Disarmed
	 * (untimed) before it can fire. */
	const int64_t ahead[2] = { AHEAD_NS, 1000000000 };
	double *dst[2] = { &r->out->arm_near_us, &r->out->arm_far_us };
	for (int w = 0; w < 2 && !err; w++) {
		for (int i = 0; i < n + WARM; i++) {
			int64_t t0 = fl_now();
			its.it_value = fl_ts(t0 + ahead[w]);
			timer_settime(tm, TIMER_ABSTIME, &its, NULL);
			int64_t t1 = fl_now();
			timer_settime(tm, 0, &off, NULL);
			if (i >= WARM)
				fl_a[i - WARM] = t1 - t0;
		}
		*dst[w] = fl_q_us(fl_a, n, 50);
	}
	timer_delete(tm);
	return err;
}

static void *fl_probe(void *arg)
{
	fl_run_t   *r = arg;
	xb_floor_t *o = r->out;
	const int   n = fl_n;
	fl_thread_setup(r->cpu_a);
	pid_t self = fl_gettid();

	/* a syscall that does nothing: the kernel entry/exit floor */
	const int batch = 50;
	for (int k = 0; k < n + WARM; k++) {
		int64_t t0 = fl_now();
		for (int i = 0; i < batch; i++)
			syscall(SYS_getppid);
		if (k >= WARM)
			fl_a[k - WARM] = (fl_now() - t0) / batch;
	}
	o->syscall_ns = fl_q_us(fl_a, n, 50) * 1e3;

	/* a signal to self is delivered on the way out of tgkill */
	for (int k = 0; k < n + WARM; k++) {
		unsigned h = atomic_load(&fl_hits);
		int64_t t0 = fl_now();
		fl_kill(self);
		int64_t t1 = fl_now();
		if (atomic_load(&fl_hits) == h) {
			r->err = "a signal to self was not delivered";
			return NULL;
		}
		if (k >= WARM)
			fl_a[k - WARM] = t1 - t0;
	}
	o->self_signal_us = fl_q_us(fl_a, n, 50);

	if ((r->err = fl_timer(r)) != NULL)
		return NULL;
	if (r->cpu_b >= 0)
		r->err = fl_cross(r);
	return NULL;
}

const char *xb_floor_measure(xb_floor_t *out, int n)
{
	/* the probes share static buffers and one handler */
	static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
	fl_run_t r = { out, -1, -1, NULL };
	memset(out, 0, sizeof *out);
	if (n < 1 || n > XB_FLOOR_NMAX)
		return "sample count out of range";
	out->samples = n;
	cpu_set_t set;
	if (sched_getaffinity(0, sizeof set, &set) == 0)
		for (int c = 0; c < CPU_SETSIZE && r.cpu_b < 0; c++)
			if (CPU_ISSET(c, &set)) {
				if (r.cpu_a < 0)
					r.cpu_a = c;
				else
					r.cpu_b = c;
			}
	pthread_mutex_lock(&mu);
	fl_n = n;
	fl_sig = SIGRTMIN + 7;
	if (fl_sig == xtc_preempt_signal())
		fl_sig++;
	out->signo = fl_sig;
	fl_pid = getpid();
	/* A Go process's handler for this signal is put back afterwards; the
	 * signal is only ever sent to the probe's own threads meanwhile. */
	struct sigaction sa, old;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = fl_handler;
	sa.sa_flags = SA_RESTART | SA_ONSTACK;
	sigemptyset(&sa.sa_mask);
	if (sigaction(fl_sig, &sa, &old) != 0) {
		pthread_mutex_unlock(&mu);
		return "sigaction failed";
	}
	pthread_t th;
	if (pthread_create(&th, NULL, fl_probe, &r) != 0)
		r.err = "pthread_create failed";
	else
		pthread_join(th, NULL);
	sigaction(fl_sig, &old, NULL);
	pthread_mutex_unlock(&mu);
	return r.err;
}
