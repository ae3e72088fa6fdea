//go:build cgo

package ctest

// C workloads of the executor tests and benchmarks of package xtc
// (exec_test.go, exec_bench_test.go): small procs for fan-out/fan-in,
// equal-cost yielding workers for the class tests, a spawn-latency stamp.
// Here rather than in package xtc so they are not compiled into every
// program that imports xtc.

/*
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include "xtc.h"
#include "xtc_exec.h"

static atomic_long xtc_th_done;
static atomic_long xtc_th_budget;

static void xtc_th_child(void *a)
{
	(void)a;
	atomic_fetch_add_explicit(&xtc_th_done, 1, memory_order_relaxed);
}

struct xtc_th_fan { xtc_loop_t *loop; long n; };

static void xtc_th_spawner(void *a)
{
	struct xtc_th_fan *f = a;
	for (long i = 0; i < f->n; i++) {
		xtc_proc_spawn(f->loop, xtc_th_child, NULL, NULL, NULL);
		if ((i & 63) == 63)
			xtc_yield();
	}
}

// n procs spawned and finished on 2 loops (one spawner per loop); ns.
static int64_t xtc_th_fanout(long n)
{
	xtc_exec_t *e;
	struct xtc_th_fan f[2];
	int64_t t0, t1;

	if (xtc_exec_init(&e, 2) != 0)
		return -1;
	atomic_store(&xtc_th_done, 0);
	for (int i = 0; i < 2; i++) {
		f[i].loop = xtc_exec_loop(e, i);
		f[i].n = n / 2;
		xtc_proc_spawn(f[i].loop, xtc_th_spawner, &f[i], NULL, NULL);
	}
	t0 = xtc_clock_mono();
	xtc_exec_run(e);
	t1 = xtc_clock_mono();
	xtc_exec_fini(e);
	return atomic_load(&xtc_th_done) == 2 * (n / 2) ? t1 - t0 : -1;
}

// Equal-cost worker: ~20 us chunks from a shared budget, yielding between.
static void xtc_th_worker(void *a)
{
	(void)a;
	while (atomic_fetch_sub(&xtc_th_budget, 1) > 0) {
		int64_t end = xtc_clock_mono() + 20000;
		while (xtc_clock_mono() < end)
			;
		xtc_yield();
	}
}

static void *xtc_th_worker_ptr(void) { return (void *)xtc_th_worker; }

// Spawn -> first run of a C task on a (parked) carrier, from the caller's
// thread: the task stores the delay; -1 until it ran.
static _Atomic int64_t xtc_th_t0, xtc_th_lat;

static int xtc_th_stamp_task(xtc_task_t *t, void *u)
{
	(void)t;
	(void)u;
	atomic_store(&xtc_th_lat, xtc_clock_mono() - atomic_load(&xtc_th_t0));
	return XTC_TASK_DONE;
}

static int xtc_th_stamp_spawn(void *ep)
{
	xtc_exec_t *e = ep;
	atomic_store(&xtc_th_lat, -1);
	atomic_store(&xtc_th_t0, xtc_clock_mono());
	return xtc_exec_spawn_on(e, 0, xtc_th_stamp_task, NULL, NULL);
}

static int64_t xtc_th_stamp_get(void) { return atomic_load(&xtc_th_lat); }
static void xtc_th_set_budget(long n) { atomic_store(&xtc_th_budget, n); }
*/
import "C"

import (
	"time"
	"unsafe"
)

// ExecFanout runs the C fan-out/fan-in workload: n procs on 2 loops of a
// fresh executor; -1 on a failure.
func ExecFanout(n int) time.Duration { return time.Duration(C.xtc_th_fanout(C.long(n))) }

// Worker is a C proc body: equal-cost chunks drawn from the budget set by
// SetBudget, with a yield between chunks.
func Worker() unsafe.Pointer { return C.xtc_th_worker_ptr() }

// SetBudget sets the number of chunks Worker procs share.
func SetBudget(n int) { C.xtc_th_set_budget(C.long(n)) }

// SpawnStamped spawns a C task on loop 0 of the executor exec (an
// xtc_exec_t *) that records the delay from this call to its first run;
// StampedLatency returns it (-1 until it ran). The code is XTC_E_*.
func SpawnStamped(exec unsafe.Pointer) int { return int(C.xtc_th_stamp_spawn(exec)) }

// StampedLatency: see SpawnStamped.
func StampedLatency() time.Duration { return time.Duration(C.xtc_th_stamp_get()) }
