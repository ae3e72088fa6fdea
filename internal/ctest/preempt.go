//go:build cgo

package ctest

// C workloads of the preemption tests of package xtc (preempt_test.go): a
// kernel that never yields, a short request, and the code-map probes
// (xtc__preempt_pc_ok, the records of rtcode_int.h).

/*
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include "xtc.h"

extern _Atomic long ctest_kernel_starts; // spin.go: Starts

// Spins until *stop != 0; never calls a yield point or a library function.
XTC_PREEMPTIBLE static intptr_t gopt_spin(void *arg)
{
	volatile int *stop = arg;
	uint64_t x = 1;
	atomic_fetch_add(&ctest_kernel_starts, 1);
	while (!*stop)
		x = x * 6364136223846793005ull + 1442695040888963407ull;
	return (intptr_t)(x & 1) + 1;
}

static intptr_t gopt_short(void *arg)
{
	(void)arg;
	return 7;
}

// Spins until *stop != 0 like gopt_spin, passing a preemption point
// (xtc_yield_if_due) every few hundred iterations; returns 1 + the number
// of slice ends it yielded at.
XTC_PREEMPTIBLE static intptr_t gopt_coop_spin(void *arg)
{
	volatile int *stop = arg;
	intptr_t yields = 0;
	uint64_t x = 1;
	atomic_fetch_add(&ctest_kernel_starts, 1);
	while (!*stop) {
		for (int k = 0; k < 256; k++)
			x = x * 6364136223846793005ull + 1442695040888963407ull;
		yields += xtc_yield_if_due();
	}
	return yields + 1 + (intptr_t)(x & 0);
}

static void *gopt_spin_fn(void) { return (void *)gopt_spin; }
static void *gopt_coop_spin_fn(void) { return (void *)gopt_coop_spin; }
static void *gopt_short_fn(void) { return (void *)gopt_short; }
static int *gopt_flag_new(void) { return calloc(1, sizeof(int)); }
static void gopt_flag_set(int *f) { *(volatile int *)f = 1; }

int xtc__preempt_pc_ok(const void *pc);
int xtc__preempt_codemap_get(int i, const char **file, const void **lo,
                             const void **hi);
static int gopt_pc_ok(void *pc) { return xtc__preempt_pc_ok(pc); }
static const char *gopt_codemap_file(int i)
{
	const char *f;
	const void *lo, *hi;
	return xtc__preempt_codemap_get(i, &f, &lo, &hi) == 0 ? f : NULL;
}
static void *gopt_yield_fn(void) { return (void *)xtc_yield; }
*/
import "C"

import (
	"path/filepath"
	"unsafe"
)

// Flag is a C int a spinner polls (SpinFn's argument).
type Flag struct{ p *C.int }

// NewFlag allocates a cleared flag.
func NewFlag() Flag { return Flag{C.gopt_flag_new()} }

// Set raises the flag (the spinner returns).
func (f Flag) Set() { C.gopt_flag_set(f.p) }

// Free releases the flag.
func (f Flag) Free() { C.free(unsafe.Pointer(f.p)) }

// Ptr is the flag's address, the spinner's argument.
func (f Flag) Ptr() unsafe.Pointer { return unsafe.Pointer(f.p) }

// SpinFn is a C coroutine body (intptr_t (*)(void *)) that spins without
// any call until its Flag is set; ShortFn returns 7 at once.
func SpinFn() unsafe.Pointer  { return C.gopt_spin_fn() }
func ShortFn() unsafe.Pointer { return C.gopt_short_fn() }

// CoopSpinFn spins like SpinFn but passes xtc_yield_if_due points; it
// returns 1 + the slice ends it yielded at.
func CoopSpinFn() unsafe.Pointer { return C.gopt_coop_spin_fn() }

// YieldFn is xtc_yield's address (runtime code).
func YieldFn() unsafe.Pointer { return C.gopt_yield_fn() }

// PreemptPCOK: may the involuntary path interrupt code at pc?
func PreemptPCOK(pc unsafe.Pointer) bool { return C.gopt_pc_ok(pc) == 1 }

// CodemapFiles lists the base names of the source files in the
// preemption code map, one per record (a file has several).
func CodemapFiles() []string {
	var out []string
	for i := 0; ; i++ {
		f := C.gopt_codemap_file(C.int(i))
		if f == nil {
			return out
		}
		out = append(out, filepath.Base(C.GoString(f)))
	}
}
