//go:build cgo

package xtc

// C workloads used by preempt_test.go (test files cannot hold cgo code): a
// kernel that never yields and a short request. Unexported. (Not named
// xtc_*: the preemption map treats every xtc_* function as the runtime's
// own code, which is never interrupted.)

/*
#include <stdint.h>
#include <stdlib.h>

// Spins until *stop != 0; never calls a yield point or a library function.
static intptr_t gopt_spin(void *arg)
{
	volatile int *stop = arg;
	uint64_t x = 1;
	while (!*stop)
		x = x * 6364136223846793005ull + 1442695040888963407ull;
	return (intptr_t)(x & 1) + 1;
}

static intptr_t gopt_short(void *arg)
{
	(void)arg;
	return 7;
}

static void *gopt_spin_fn(void) { return (void *)gopt_spin; }
static void *gopt_short_fn(void) { return (void *)gopt_short; }
static int *gopt_flag_new(void) { return calloc(1, sizeof(int)); }
static void gopt_flag_set(int *f) { *(volatile int *)f = 1; }
*/
import "C"

import "unsafe"

type ptFlag struct{ p *C.int }

func ptFlagNew() ptFlag              { return ptFlag{C.gopt_flag_new()} }
func (f ptFlag) set()                { C.gopt_flag_set(f.p) }
func (f ptFlag) free()               { C.free(unsafe.Pointer(f.p)) }
func (f ptFlag) ptr() unsafe.Pointer { return unsafe.Pointer(f.p) }
func ptSpinFn() unsafe.Pointer       { return C.gopt_spin_fn() }
func ptShortFn() unsafe.Pointer      { return C.gopt_short_fn() }
