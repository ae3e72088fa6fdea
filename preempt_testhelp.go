//go:build cgo

package xtc

// C workloads used by preempt_test.go (test files cannot hold cgo code): a
// kernel that never yields and a short request. Unexported.

/*
#include <stdint.h>
#include <stdlib.h>

// Spins until *stop != 0; never calls a yield point or a library function.
static intptr_t xtc_pt_spin(void *arg)
{
	volatile int *stop = arg;
	uint64_t x = 1;
	while (!*stop)
		x = x * 6364136223846793005ull + 1442695040888963407ull;
	return (intptr_t)(x & 1) + 1;
}

static intptr_t xtc_pt_short(void *arg)
{
	(void)arg;
	return 7;
}

static void *xtc_pt_spin_fn(void) { return (void *)xtc_pt_spin; }
static void *xtc_pt_short_fn(void) { return (void *)xtc_pt_short; }
static int *xtc_pt_flag_new(void) { return calloc(1, sizeof(int)); }
static void xtc_pt_flag_set(int *f) { *(volatile int *)f = 1; }
*/
import "C"

import "unsafe"

type ptFlag struct{ p *C.int }

func ptFlagNew() ptFlag              { return ptFlag{C.xtc_pt_flag_new()} }
func (f ptFlag) set()                { C.xtc_pt_flag_set(f.p) }
func (f ptFlag) free()               { C.free(unsafe.Pointer(f.p)) }
func (f ptFlag) ptr() unsafe.Pointer { return unsafe.Pointer(f.p) }
func ptSpinFn() unsafe.Pointer       { return C.xtc_pt_spin_fn() }
func ptShortFn() unsafe.Pointer      { return C.xtc_pt_short_fn() }
