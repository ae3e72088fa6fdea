//go:build cgo

package xtc

// C workloads used by preempt_test.go (test files cannot hold cgo code): a
// kernel that never yields and a short request, and the code-map probes
// (xtc__preempt_pc_ok, the records of rtcode_int.h). Unexported.

/*
#include <stdint.h>
#include <stdlib.h>
#include "xtc.h"

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

type ptFlag struct{ p *C.int }

func ptFlagNew() ptFlag              { return ptFlag{C.gopt_flag_new()} }
func (f ptFlag) set()                { C.gopt_flag_set(f.p) }
func (f ptFlag) free()               { C.free(unsafe.Pointer(f.p)) }
func (f ptFlag) ptr() unsafe.Pointer { return unsafe.Pointer(f.p) }
func ptSpinFn() unsafe.Pointer       { return C.gopt_spin_fn() }
func ptShortFn() unsafe.Pointer      { return C.gopt_short_fn() }

// preemptPCOK: may the involuntary path interrupt code at pc?
func preemptPCOK(pc unsafe.Pointer) bool { return C.gopt_pc_ok(pc) == 1 }

// preemptCodemapFiles lists the base names of the source files in the
// preemption code map, one per record (a file has several).
func preemptCodemapFiles() []string {
	var out []string
	for i := 0; ; i++ {
		f := C.gopt_codemap_file(C.int(i))
		if f == nil {
			return out
		}
		out = append(out, filepath.Base(C.GoString(f)))
	}
}

func ptYieldFn() unsafe.Pointer { return C.gopt_yield_fn() }
