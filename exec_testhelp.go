//go:build cgo

package xtc

// C workloads used by exec_test.go and exec_bench_test.go (test files
// cannot hold cgo code): small procs for fan-out/fan-in, equal-cost
// yielding workers for the class tests. Unexported; nothing of the public
// API depends on them.

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

static int xtc_th_stamp_spawn(xtc_exec_t *e)
{
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

// execFanoutXtc runs the C fan-out/fan-in workload: n procs on 2 loops.
func execFanoutXtc(n int) time.Duration { return time.Duration(C.xtc_th_fanout(C.long(n))) }

// testWorker is a C proc body: equal-cost chunks drawn from the budget set
// by setTestBudget, with a yield between chunks.
func testWorker() unsafe.Pointer { return C.xtc_th_worker_ptr() }

func setTestBudget(n int) { C.xtc_th_set_budget(C.long(n)) }

// spawnStamped spawns a C task on loop 0 of e that records the delay from
// this call to its first run; stampedLatency returns it (-1 until it ran).
func spawnStamped(e *Exec) error {
	return e.withC("xtc_exec_spawn_on", func(c *C.xtc_exec_t) C.int { return C.xtc_th_stamp_spawn(c) })
}

func stampedLatency() time.Duration { return time.Duration(C.xtc_th_stamp_get()) }
