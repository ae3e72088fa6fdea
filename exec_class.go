//go:build cgo

package xtc

/*
#include "xtc.h"
#include "xtc_exec.h"
#include "xtc_sched.h"
*/
import "C"

import (
	"fmt"
	"time"
	"unsafe"
)

// Class is an executor-wide scheduling class: the same shares and latency
// bound on every loop of its executor (xtc_exec_class_create_each). Calls
// placed with WithClass go to the loops in turn, so the executor's CPU
// splits between classes in their share ratio across carriers; each
// carrier enforces the split among the work it has.
type Class struct {
	e       *Exec
	per     []*ExecClass // per[i] lives on loop i
	shares  int
	latency time.Duration
}

// NewClass creates an executor-wide class: shares in 1..1000 weight its
// CPU against the other classes and the default lane (100 shares); a
// non-zero latency bounds how long its ready work waits (it tightens the
// carriers' slices). Before Start (setup-only). Errors: ErrClosed, ErrInval
// for shares outside 1..1000 or a negative latency (the reason says
// which), ErrAgain when the executor already runs or a loop has 16
// classes.
func (e *Exec) NewClass(shares int, latency time.Duration) (*Class, error) {
	const op = "xtc_exec_class_create_each"
	if e == nil || e.closed.Load() {
		return nil, errClosed(op)
	}
	if shares < 1 || shares > 1000 {
		return nil, errReason(op, ErrInval, fmt.Sprintf("shares must be in 1..1000, got %d", shares))
	}
	if latency < 0 {
		return nil, errReason(op, ErrInval, fmt.Sprintf("latency must be >= 0, got %v", latency))
	}
	if e.running.Load() {
		return nil, errReason(op, ErrAgain, "setup-only: create classes before Start")
	}
	n := len(e.loops)
	out := make([]C.xtc_exec_class_t, n)
	err := e.withC(op, func(c *C.xtc_exec_t) C.int {
		return C.xtc_exec_class_create_each(c, C.int(shares), C.int64_t(latency),
			(*C.xtc_exec_class_t)(unsafe.Pointer(&out[0])), C.int(n))
	})
	if err != nil {
		return nil, err
	}
	cl := &Class{e: e, shares: shares, latency: latency}
	for i, h := range out {
		cl.per = append(cl.per, &LoopClass{c: h, l: e.loops[i]})
	}
	e.x.bmu.Lock()
	e.x.classes = append(e.x.classes, cl)
	e.x.bmu.Unlock()
	return cl, nil
}

// Shares returns the class's shares (0 for nil).
func (c *Class) Shares() int {
	if c == nil {
		return 0
	}
	return c.shares
}

// Latency returns the class's latency bound (0 for nil or none).
func (c *Class) Latency() time.Duration {
	if c == nil {
		return 0
	}
	return c.latency
}

// OnLoop returns the class's per-loop piece on loop i (for ProcOpts), nil
// when i is out of range.
func (c *Class) OnLoop(i int) *LoopClass {
	if c == nil || i < 0 || i >= len(c.per) {
		return nil
	}
	return c.per[i]
}

// CPU returns the measured run time charged to the class on all loops.
func (c *Class) CPU() time.Duration {
	var d time.Duration
	if c != nil {
		for _, p := range c.per {
			d += p.CPU()
		}
	}
	return d
}

// Runs returns how many times work of the class was picked, on all loops.
func (c *Class) Runs() uint64 {
	var n uint64
	if c != nil {
		for _, p := range c.per {
			n += p.Runs()
		}
	}
	return n
}

// Stats returns what the class received on all its loops: runs, CPU,
// stalls, and the waits of its work against its latency bound
// (ClassStats.MetBound). Any goroutine; relaxed while the executor runs.
// ErrClosed once the executor was closed.
func (c *Class) Stats() (ClassStats, error) {
	const op = "xtc_sched_class_stats"
	if c == nil || c.e == nil || c.e.closed.Load() {
		return ClassStats{}, errClosed(op)
	}
	st := ClassStats{Shares: c.shares, Latency: c.latency}
	for _, p := range c.per {
		ps, err := p.Stats()
		if err != nil {
			return ClassStats{}, err
		}
		st.CPU += ps.CPU
		st.Runs += ps.Runs
		st.Stalls += ps.Stalls
		st.Waits += ps.Waits
		st.Late += ps.Late
		st.WaitSum += ps.WaitSum
		st.WaitMax = max(st.WaitMax, ps.WaitMax)
	}
	return st, nil
}

// Stats returns what the class received on its loop
// (xtc_sched_class_stats): runs, CPU, stalls, and the waits of its work
// against its latency bound (ClassStats.MetBound). Any goroutine.
// ErrClosed for nil or once its loop was finalised.
func (c *LoopClass) Stats() (ClassStats, error) {
	const op = "xtc_sched_class_stats"
	var st C.xtc_sched_class_stats_t
	st.size = C.uint32_t(unsafe.Sizeof(st))
	st.version = C.XTC_SCHED_VERSION
	var rc C.int
	if !c.with(func(cls C.xtc_exec_class_t) { rc = C.xtc_sched_class_stats(cls, &st) }) {
		return ClassStats{}, errClosed(op)
	}
	if rc != 0 {
		return ClassStats{}, mkerr(op, int(rc))
	}
	return ClassStats{
		Shares:  int(st.shares),
		Latency: time.Duration(st.latency_ns),
		CPU:     time.Duration(st.cpu_ns),
		Runs:    uint64(st.runs),
		Stalls:  uint64(st.stalls),
		Waits:   uint64(st.waits),
		Late:    uint64(st.late),
		WaitSum: time.Duration(st.wait_ns),
		WaitMax: time.Duration(st.wait_max_ns),
	}, nil
}
