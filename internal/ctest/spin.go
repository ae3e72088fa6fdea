//go:build cgo

package ctest

// Never-yielding C kernels for the Go-surface tests (stall reports in
// flight, exec.Go cancellation), declared preemptible (PREEMPTIBLE).

/*
#include <stdatomic.h>
#include <stdint.h>
#include <time.h>
// Declared preemptible (xtc_preempt(3) SAFETY): xtc interrupts a fiber only
// in code it was told is safe to cut; a preamble without xtc's headers names
// the section XTC_PREEMPTIBLE uses.
#define PREEMPTIBLE __attribute__((section("xtc_ptext"), noinline))

// Entries into the kernels of this package, process-wide (Starts): the
// event "the kernel runs now" a test waits for instead of a sleep. Shared
// with preempt.go's kernels.
_Atomic long ctest_kernel_starts;
static long ctest_starts_get(void) { return atomic_load(&ctest_kernel_starts); }

PREEMPTIBLE static int64_t gospin_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

// Proc body: spins for *(int64_t *)arg nanoseconds without a yield point
// (the clock read is a vDSO call, no runtime function).
PREEMPTIBLE static void gospin_proc(void *arg)
{
	atomic_fetch_add(&ctest_kernel_starts, 1);
	int64_t end = gospin_now() + *(int64_t *)arg;
	while (gospin_now() < end) {
	}
}

// Coroutine body: returns its argument (the empty kernel of round trips).
static intptr_t gospin_ident(void *arg) { return (intptr_t)arg; }

// Coroutine body: spins until *(volatile int *)arg != 0, pure arithmetic.
PREEMPTIBLE static intptr_t gospin_forever(void *arg)
{
	volatile int *stop = arg;
	uint64_t x = 1;
	atomic_fetch_add(&ctest_kernel_starts, 1);
	while (stop == 0 || !*stop)
		x = x * 6364136223846793005ull + 1442695040888963407ull;
	return (intptr_t)(x & 1);
}

// Coroutine body: spins for (intptr_t)arg nanoseconds, returns 42.
PREEMPTIBLE static intptr_t gospin_for(void *arg)
{
	atomic_fetch_add(&ctest_kernel_starts, 1);
	int64_t end = gospin_now() + (int64_t)(intptr_t)arg;
	while (gospin_now() < end) {
	}
	return 42;
}

// Proc body: spins (no yield point) for the int64 at arg nanoseconds and
// then until the int64 after it turns non-zero (Cell: N, then Release).
PREEMPTIBLE static void gospin_hold_proc(void *arg)
{
	volatile int64_t *c = arg;
	atomic_fetch_add(&ctest_kernel_starts, 1);
	int64_t end = gospin_now() + c[0];
	while (gospin_now() < end || !__atomic_load_n(&c[1], __ATOMIC_ACQUIRE)) {
	}
}

// Proc body: the thread sleeps *(int64_t *)arg ns inside the run, off
// CPU, as a carrier the OS does not run would sit (stall CPU split).
static void gospin_nap_proc(void *arg)
{
	int64_t ns = *(int64_t *)arg;
	struct timespec ts = { ns / 1000000000, ns % 1000000000 };
	nanosleep(&ts, NULL);
}

static void *gospin_proc_fn(void)    { return (void *)gospin_proc; }
static void *gospin_hold_proc_fn(void) { return (void *)gospin_hold_proc; }
static void *gospin_nap_proc_fn(void) { return (void *)gospin_nap_proc; }
static void *gospin_ident_fn(void)   { return (void *)gospin_ident; }
static void *gospin_forever_fn(void) { return (void *)gospin_forever; }
static void *gospin_for_fn(void)     { return (void *)gospin_for; }
*/
import "C"

import "unsafe"

// SpinProc is a `void (*)(void *)` proc body spinning for the number of
// nanoseconds its int64 argument (C memory, see NewCell: N) holds.
func SpinProc() unsafe.Pointer { return C.gospin_proc_fn() }

// HoldProc is a `void (*)(void *)` proc body spinning (no yield point) for
// the nanoseconds its Cell's N holds and then until Release is called on
// the Cell: a run that lasts at least N and until the test saw what it
// waits for.
func HoldProc() unsafe.Pointer { return C.gospin_hold_proc_fn() }

// Starts counts, process-wide, the entries into this package's spinning
// kernels (SpinProc, HoldProc, Forever, SpinFor, SpinFn, CoopSpinFn): a
// test reads it before it submits one and waits (bounded) for it to grow,
// the event "the kernel runs now", instead of sleeping.
func Starts() int64 { return int64(C.ctest_starts_get()) }

// NapProc is a `void (*)(void *)` proc body whose thread sleeps (off
// CPU, not parked on the loop) for the nanoseconds its int64 argument
// (C memory, see NewCell: N) holds.
func NapProc() unsafe.Pointer { return C.gospin_nap_proc_fn() }

// Ident is an `intptr_t (*)(void *)` returning its argument.
func Ident() unsafe.Pointer { return C.gospin_ident_fn() }

// Forever is an `intptr_t (*)(void *)` that spins (never yielding) until
// the int its argument points to turns non-zero; a nil argument spins
// until killed.
func Forever() unsafe.Pointer { return C.gospin_forever_fn() }

// SpinFor is an `intptr_t (*)(void *)` spinning for arg nanoseconds (the
// argument is the number itself), returning 42.
func SpinFor() unsafe.Pointer { return C.gospin_for_fn() }
