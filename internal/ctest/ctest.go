//go:build cgo

// Package ctest holds small C proc bodies for the Go tests, examples and
// benchmarks of package xtc. cgo is not allowed in _test.go files, so test
// C code lives here: an internal, non-test package that only tests import.
// Its C functions call the xtc C API directly; the symbols come from package
// xtc's C objects, linked into the same binary.
//
// Every proc takes a *Cell (C memory) as its argument, so the Go side can
// read what the proc did once the loop has run.
package ctest

/*
#cgo CFLAGS: -I${SRCDIR}/../../csrc/include -I${SRCDIR}/../../csrc -D_GNU_SOURCE -std=gnu11
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "xtc.h"
#include "loop_int.h"

// The Go-callback depth of the calling thread (xtc__gocb_depth).
static int ctest_gocb_depth(void) { return xtc__gocb_depth; }

typedef struct ctest_cell {
	int64_t n;      // input: iterations, or result count
	int64_t sum;    // result
	int64_t rc;     // last xtc return code seen
	int64_t done;   // 1 when the proc body finished
} ctest_cell;

static int ctest_cell_waiting(ctest_cell *c)
{
	return __atomic_load_n(&c->n, __ATOMIC_ACQUIRE) == 1;
}

static void ctest_cell_release(ctest_cell *c)
{
	__atomic_store_n(&c->sum, 1, __ATOMIC_RELEASE);
}

// Does nothing: spawn/exit cost and error paths.
static void ctest_noop(void *arg)
{
	ctest_cell *c = arg;
	if (c)
		c->done = 1;
}

// Yields n times, counting in sum.
static void ctest_yield_n(void *arg)
{
	ctest_cell *c = arg;
	for (int64_t i = 0; i < c->n; i++) {
		xtc_yield();
		c->sum++;
	}
	c->done = 1;
}

// Receives int64 messages and adds them up until an empty message; n
// counts the messages. rc keeps the first recv error.
static void ctest_recv_sum(void *arg)
{
	ctest_cell *c = arg;
	for (;;) {
		void *m = NULL;
		size_t len = 0;
		int rc = xtc_recv(&m, &len, -1);
		if (rc != 0) {
			c->rc = rc;
			break;
		}
		if (len == 0) {
			xtc_free(m);
			break;
		}
		int64_t v = 0;
		memcpy(&v, m, len < sizeof v ? len : sizeof v);
		xtc_free(m);
		c->sum += v;
		c->n++;
	}
	c->done = 1;
}

// Sleeps n nanoseconds on the loop (xtc_proc_sleep).
static void ctest_sleep(void *arg)
{
	ctest_cell *c = arg;
	c->rc = xtc_proc_sleep(c->n);
	c->done = 1;
}

// Waits for a message forever (n is 1 once it runs: Waiting); done stays
// 0 when it is killed instead.
static void ctest_wait(void *arg)
{
	ctest_cell *c = arg;
	void *m = NULL;
	size_t len = 0;
	__atomic_store_n(&c->n, 1, __ATOMIC_RELEASE);
	c->rc = xtc_recv(&m, &len, -1);
	xtc_free(m);
	c->done = 1;
}

// User code in loop_timer.c (named like a runtime file) and a user xtc_*
// function: the preemption code map must leave both preemptible.
int ctest_codemap_timer_fn(int x);
int xtc_ctest_codemap_fn(int x);

static void *ctest_fn(int which)
{
	switch (which) {
	case 0: return (void *)ctest_noop;
	case 1: return (void *)ctest_yield_n;
	case 2: return (void *)ctest_recv_sum;
	case 3: return (void *)ctest_sleep;
	case 4: return (void *)ctest_wait;
	case 5: return (void *)ctest_codemap_timer_fn;
	case 6: return (void *)xtc_ctest_codemap_fn;
	}
	return NULL;
}
*/
import "C"

import "unsafe"

// Proc bodies, as `void (*)(void *)` C function pointers for xtc.ProcSpawn.
var (
	Noop    = unsafe.Pointer(C.ctest_fn(0)) // sets Done
	YieldN  = unsafe.Pointer(C.ctest_fn(1)) // yields N times; Sum = N
	RecvSum = unsafe.Pointer(C.ctest_fn(2)) // sums int64 messages until an empty one
	Sleep   = unsafe.Pointer(C.ctest_fn(3)) // xtc_proc_sleep(N ns); RC = result
	Wait    = unsafe.Pointer(C.ctest_fn(4)) // Waiting, then blocks in xtc_recv; Done=1 after a message
)

// User functions for the preemption code-map test: one in a file named
// loop_timer.c, one named xtc_*; neither is runtime code.
var (
	CodemapTimerFn = unsafe.Pointer(C.ctest_fn(5))
	CodemapXtcFn   = unsafe.Pointer(C.ctest_fn(6))
)

// GocbDepth returns the calling thread's Go-callback depth: > 0 inside a
// Go task body or timer callback (no fiber switch allowed there).
func GocbDepth() int { return int(C.ctest_gocb_depth()) }

// YieldEx calls xtc_yield_ex from the caller's thread and returns its code.
func YieldEx() int { return int(C.xtc_yield_ex()) }

// Cell is C memory shared with a proc.
type Cell struct{ c *C.ctest_cell }

// NewCell allocates a zeroed cell with N = n. Free it after the loop ran.
func NewCell(n int64) Cell {
	c := (*C.ctest_cell)(C.calloc(1, C.size_t(unsafe.Sizeof(C.ctest_cell{}))))
	c.n = C.int64_t(n)
	return Cell{c}
}

// Ptr is the proc argument.
func (c Cell) Ptr() unsafe.Pointer { return unsafe.Pointer(c.c) }

func (c Cell) N() int64   { return int64(c.c.n) }
func (c Cell) Sum() int64 { return int64(c.c.sum) }
func (c Cell) RC() int64  { return int64(c.c.rc) }
func (c Cell) Done() bool { return c.c.done != 0 }
func (c Cell) Free()      { C.free(unsafe.Pointer(c.c)) }

// Waiting reports that a Wait proc runs (it then parks in xtc_recv).
func (c Cell) Waiting() bool { return C.ctest_cell_waiting(c.c) != 0 }

// Release ends a HoldProc spinning on the cell (an atomic store of its
// second word).
func (c Cell) Release() { C.ctest_cell_release(c.c) }
