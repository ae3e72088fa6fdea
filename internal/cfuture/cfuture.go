//go:build cgo

// Package cfuture holds the C functions the Go tests, examples and
// benchmarks of xtc.Submit run (cgo is not allowed in _test.go files).
// Each is an `intptr_t (*)(void *)` for xtc.Submit; the symbols of the xtc C
// API come from package xtc's objects linked into the same binary.
package cfuture

/*
#cgo CFLAGS: -I${SRCDIR}/../../csrc/include -D_GNU_SOURCE -std=gnu11
#include <stdatomic.h>
#include <stdint.h>
#include <unistd.h>
#include "xtc.h"

static _Atomic long cfut_runs;

// arg + 1.
static intptr_t cfut_add_one(void *arg)
{
	atomic_fetch_add(&cfut_runs, 1);
	return (intptr_t)arg + 1;
}

// Yields three times, then returns arg.
static intptr_t cfut_yield3(void *arg)
{
	atomic_fetch_add(&cfut_runs, 1);
	for (int i = 0; i < 3; i++)
		xtc_yield();
	return (intptr_t)arg;
}

// Yields until cancelled (at most ~10 s): 99 when cancelled, -1 otherwise.
static intptr_t cfut_until_cancelled(void *arg)
{
	int64_t end = xtc_clock_mono() + 10000000000LL;
	(void)arg;
	atomic_fetch_add(&cfut_runs, 1);
	while (!xtc_dispatch_cancelled() && xtc_clock_mono() < end)
		xtc_yield();
	return xtc_dispatch_cancelled() ? 99 : -1;
}

static int cfut_sleep_ms(void *arg)
{
	usleep((useconds_t)(intptr_t)arg * 1000);
	return (int)(intptr_t)arg;
}

// Offloads a blocking usleep(arg ms) to the blocking pool; returns its
// result times 10 (the fiber parked meanwhile).
static intptr_t cfut_blocking(void *arg)
{
	int r = -1;
	atomic_fetch_add(&cfut_runs, 1);
	if (xtc_blocking_run(cfut_sleep_ms, arg, &r) != 0)
		return -1;
	return (intptr_t)r * 10;
}

static _Atomic long cfut_gate;

// Yields until the gate (OpenGate) reaches arg (at most ~60 s), then
// returns arg; -1 when the bound ended it.
static intptr_t cfut_gated(void *arg)
{
	int64_t end = xtc_clock_mono() + 60000000000LL;
	atomic_fetch_add(&cfut_runs, 1);
	while (atomic_load(&cfut_gate) < (long)(intptr_t)arg) {
		if (xtc_clock_mono() > end)
			return -1;
		xtc_yield();
	}
	return (intptr_t)arg;
}

static void cfut_gate_open(long v) { atomic_store(&cfut_gate, v); }
static long cfut_gate_get(void) { return atomic_load(&cfut_gate); }

static void *cfut_fn(int which)
{
	switch (which) {
	case 0: return (void *)cfut_add_one;
	case 1: return (void *)cfut_yield3;
	case 2: return (void *)cfut_until_cancelled;
	case 3: return (void *)cfut_blocking;
	case 4: return (void *)cfut_gated;
	}
	return NULL;
}

static long cfut_runs_get(void) { return atomic_load(&cfut_runs); }
static void *cfut_arg(intptr_t v) { return (void *)v; }
*/
import "C"

import "unsafe"

var (
	AddOne         = unsafe.Pointer(C.cfut_fn(0)) // returns arg+1
	Yield3         = unsafe.Pointer(C.cfut_fn(1)) // yields 3 times, returns arg
	UntilCancelled = unsafe.Pointer(C.cfut_fn(2)) // yields until cancelled: 99
	Blocking       = unsafe.Pointer(C.cfut_fn(3)) // xtc_blocking_run(usleep(arg ms)): arg*10
	Gated          = unsafe.Pointer(C.cfut_fn(4)) // yields until OpenGate(>= arg): arg
)

// OpenGate lets the Gated calls whose arg is at most v return.
func OpenGate(v int) { C.cfut_gate_open(C.long(v)) }

// GateNow is the gate's value (it only grows: use args above it).
func GateNow() int { return int(C.cfut_gate_get()) }

// Runs returns how many of the functions above have started.
func Runs() int64 { return int64(C.cfut_runs_get()) }

// Arg turns a small integer into a Submit argument (not a pointer).
func Arg(v int) unsafe.Pointer { return C.cfut_arg(C.intptr_t(v)) }
