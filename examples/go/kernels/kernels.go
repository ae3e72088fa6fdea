//go:build cgo

// Package kernels is the cgo preamble a program of its own would have: a
// few C kernels of the `intptr_t (*)(void *)` shape that xtc's Exec.Go,
// Exec.LaunchFn and Launch run, used by the godoc Examples of package xtc
// (cgo is not allowed in _test.go files, so an Example cannot carry its
// own preamble). Copy the idiom: the kernels are static, and each is
// handed to Go by a getter returning its address, because
// unsafe.Pointer(C.name) does not link for a static C function.
//
// Nothing here includes xtc's headers: the kernels never yield, so they
// can only be stopped on time by involuntary preemption (Exec.SetPreempt,
// xtc.PreemptSetInvoluntary, or an Fn's slice), and they are declared
// preemptible (the PREEMPTIBLE attribute below): xtc interrupts only code
// it was told is safe to cut, never a C library in the middle of a call.
package kernels

/*
#include <stdint.h>
// Declared preemptible (xtc_preempt(3) SAFETY): xtc interrupts a fiber only
// in code it was told is safe to cut; a preamble without xtc's headers names
// the section XTC_PREEMPTIBLE uses.
#define PREEMPTIBLE __attribute__((section("xtc_ptext"), noinline))

// n rounds of a 64-bit LCG, never yielding: a request of cost n.
PREEMPTIBLE static intptr_t serve(void *arg)
{
	uint64_t n = (uint64_t)(uintptr_t)arg, x = n | 1;
	for (uint64_t i = 0; i < n; i++)
		x = x * 6364136223846793005ull + 1442695040888963407ull;
	return (intptr_t)(x >> 1);
}

// 1 + 2 + ... + n.
PREEMPTIBLE static intptr_t sum(void *arg)
{
	intptr_t n = (intptr_t)arg, s = 0;
	for (intptr_t i = 1; i <= n; i++)
		s += i;
	return s;
}

// Never returns (a hung kernel): only a kill or a cancel stops it.
PREEMPTIBLE static intptr_t spin(void *arg)
{
	volatile uint64_t x = (uint64_t)(uintptr_t)arg;
	for (;;)
		x = x * 6364136223846793005ull + 1;
	return 0;
}

static void *serve_fn(void) { return (void *)serve; }
static void *sum_fn(void) { return (void *)sum; }
static void *spin_fn(void) { return (void *)spin; }

// An integer as a kernel's void * (converted in C: go vet rightly flags
// unsafe.Pointer(uintptr(n)) in Go).
static void *int_arg(intptr_t n) { return (void *)n; }
*/
import "C"

import "unsafe"

// Serve is `intptr_t serve(void *n)`: n rounds of an LCG that never
// yields; it returns what ServeGo returns.
func Serve() unsafe.Pointer { return C.serve_fn() }

// Sum is `intptr_t sum(void *n)`: 1 + 2 + ... + n.
func Sum() unsafe.Pointer { return C.sum_fn() }

// Spin is `intptr_t spin(void *)`: it never returns.
func Spin() unsafe.Pointer { return C.spin_fn() }

// Arg passes an integer as a kernel's `void *` argument.
// (Exec.GoInt needs none of this.)
func Arg(n int64) unsafe.Pointer { return C.int_arg(C.intptr_t(n)) }

// ServeGo is Serve's result computed in Go (to check a run).
func ServeGo(n uint64) int64 {
	x := n | 1
	for i := uint64(0); i < n; i++ {
		x = x*6364136223846793005 + 1442695040888963407
	}
	return int64(x >> 1)
}
