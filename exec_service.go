//go:build cgo

package xtc

// The executor's service layer: construction options applied, the
// process-wide involuntary switch reference-counted by running executors,
// owner-only calls routed to a running carrier, statistics, and the batch
// groups an executor owns (their drain and cancel at Shutdown).
//
// Owner-only calls on executor loops (batch mutators): the C library
// accepts them before the loop's first run from any thread, during a run
// only on the loop's carrier, and between runs from a thread outside every
// loop (xtc_batch(3)). ownerCall does exactly that: directly while the
// executor is idle (gate held for reading, so a Start cannot begin under
// the call), through the carrier's submission ring while it runs (the Go
// function runs on the carrier's own stack), and directly from a Go
// callback of that very carrier. A call handed to a run that ends before
// serving it is withdrawn (claimed flag) and retried on the idle executor,
// so it runs exactly once. Rejected: a per-loop owner goroutine as
// stand-alone loops have (an executor loop's owner is its carrier, a C
// thread, and between runs nobody).

/*
#include "xtc.h"
#include "xtc_exec.h"
#include "xtc_preempt.h"
*/
import "C"

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"
)

// execExt is the state the service layer adds to an Exec.
type execExt struct {
	cfg execConfig

	// gate: owner-direct calls hold it for reading while the executor is
	// idle; Start holds it for writing while it flips running.
	gate sync.RWMutex

	involHeld atomic.Bool // the current run holds an involuntary reference

	bmu     sync.Mutex
	batches []*Batch // groups the executor owns (NewBatch)
	classes []*Class // executor-wide classes (NewClass)
	brr     int      // round-robin cursor for NewBatch's loop
}

// ---- the process-wide involuntary switch -----------------------------------

var involState struct {
	mu   sync.Mutex
	user bool // PreemptSetInvoluntary's setting
	refs int  // runs of executors built WithPreempt
}

func involApplyLocked() {
	C.xtc_preempt_set_involuntary(cbool(involState.user || involState.refs > 0))
}

// involSetUser is PreemptSetInvoluntary: the explicit, process-wide
// override, kept apart from the executors' references.
func involSetUser(on bool) {
	involState.mu.Lock()
	involState.user = on
	involApplyLocked()
	involState.mu.Unlock()
}

func involAcquire() {
	involState.mu.Lock()
	involState.refs++
	involApplyLocked()
	involState.mu.Unlock()
}

func involRelease() {
	involState.mu.Lock()
	if involState.refs > 0 {
		involState.refs--
	}
	involApplyLocked()
	involState.mu.Unlock()
}

// involActive reports whether the involuntary path is on now.
func involActive() bool {
	involState.mu.Lock()
	defer involState.mu.Unlock()
	return involState.user || involState.refs > 0
}

// ---- construction -------------------------------------------------------------

// applyOptions configures a new executor from opts; on error the caller
// finalises it.
func (e *Exec) applyOptions(opts []ExecOption) error {
	c := &e.x.cfg
	if err := c.apply(opts); err != nil {
		return err
	}
	service := true
	if c.service != nil {
		service = *c.service
	}
	e.SetServiceMode(service)
	if c.slice > 0 {
		op := "xtc.WithPreempt"
		if c.coop {
			op = "xtc.WithClockCheckedPreempt"
		}
		if !PreemptSupported() {
			return errReason(op, ErrNosys, "no preemption tick source in this build or on this machine")
		}
		if c.involuntary && !PreemptInvoluntarySupported() {
			return errReason(op, ErrNosys, "involuntary preemption needs Linux on x86-64 or aarch64 (use WithClockCheckedPreempt with kernels that have yield points)")
		}
		if err := e.withC(op, func(ce *C.xtc_exec_t) C.int {
			return C.xtc_exec_set_preempt(ce, C.int64_t(c.slice))
		}); err != nil {
			return err
		}
		if err := e.withC(op, func(ce *C.xtc_exec_t) C.int {
			return C.xtc_exec_set_preempt_coop(ce, cbool(c.coop))
		}); err != nil {
			return err
		}
		if c.adaptive != nil {
			if err := e.SetPreemptAdaptive(c.adaptive); err != nil {
				return err
			}
		}
	}
	if c.spin > 0 {
		if err := e.SetSpin(c.spin); err != nil {
			return err
		}
	}
	if c.eager {
		e.SetEagerRebalance(true)
	}
	// a service executor idles most of its life: its idle carriers poll
	// for steals every 32 ms at most rather than every 1 ms (the C
	// default, libxtc's), which kept a 2-loop executor at 3.2-3.8 % of a
	// CPU with nothing to do against 0.4 % (BenchmarkFrontDoorIdleCPU).
	// The front door's calls never wait for a steal (placed on the least
	// loaded loop, pinned); SetStealBackoff(false) or WithEagerRebalance
	// for migratable work that must spread at once.
	e.SetStealBackoff(true)
	if c.stall > 0 {
		if err := e.SetStallBudget(c.stall); err != nil {
			return err
		}
		if c.stallFnSet {
			for _, l := range e.loops {
				if err := l.SetStallFunc(c.stallFn); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// runStarting is called by Start with the gate held for writing, before
// the carriers start.
func (e *Exec) runStarting() {
	if e.x.cfg.involuntary && e.x.involHeld.CompareAndSwap(false, true) {
		involAcquire()
	}
}

// runEnded is called once a run has ended (its thread joined).
func (e *Exec) runEnded() {
	if e.x.involHeld.CompareAndSwap(true, false) {
		involRelease()
	}
}

// Preempt returns the executor's preemption as configured, and whether the
// involuntary path is on now.
func (e *Exec) Preempt() PreemptConfig {
	if e == nil {
		return PreemptConfig{}
	}
	c := e.x.cfg
	return PreemptConfig{Slice: c.slice, Involuntary: c.involuntary,
		ClockChecked: c.coop, Adaptive: c.adaptive != nil, Active: involActive()}
}

// Stats returns a snapshot of the executor: its loops' counters, its
// preemption, stall count, calls in flight, classes and batch groups.
// Relaxed while it runs, exact once it stopped. ErrClosed after Close.
func (e *Exec) Stats() (ExecStats, error) {
	if e == nil || e.closed.Load() {
		return ExecStats{}, errClosed("xtc.Exec.Stats")
	}
	st := ExecStats{Preempt: e.Preempt(), StallBudget: e.x.cfg.stall,
		Calls: e.calls.Load(), Running: e.running.Load(), Closing: e.shutting.Load()}
	for i := range e.loops {
		ls, err := e.LoopStats(i)
		if err != nil {
			return ExecStats{}, err
		}
		st.Loops = append(st.Loops, ls)
		st.Stalls += e.loops[i].StallCount()
	}
	e.x.bmu.Lock()
	st.Batches = len(e.x.batches)
	classes := append([]*Class(nil), e.x.classes...)
	e.x.bmu.Unlock()
	for _, c := range classes {
		cs, err := c.Stats()
		if err != nil {
			return ExecStats{}, err
		}
		st.Classes = append(st.Classes, cs)
	}
	return st, nil
}

// ---- owner-only calls on executor loops ------------------------------------

func (e *Exec) loopIndex(l *Loop) int {
	for i, x := range e.loops {
		if x == l {
			return i
		}
	}
	return -1
}

// ownerCall runs op where the C library takes owner-only calls of loop l
// (see the file's note) and waits for it.
func (e *Exec) ownerCall(l *Loop, opname string, op func()) error {
	if l.onLoop() {
		op()
		return nil
	}
	idx := e.loopIndex(l)
	if idx < 0 {
		return errReason(opname, ErrInval, "loop of another executor")
	}
	if cur := ExecLoopID(); cur >= 0 && cur != idx && e.onCarrierOf() {
		return errReason(opname, ErrDeadlk, "from a callback of another loop of the executor: a carrier would wait for a carrier")
	}
	for {
		e.x.gate.RLock()
		if e.closed.Load() {
			e.x.gate.RUnlock()
			return errClosed(opname)
		}
		if !e.running.Load() {
			l.cmu.RLock()
			closed := l.closed.Load()
			if !closed {
				op()
			}
			l.cmu.RUnlock()
			e.x.gate.RUnlock()
			if closed {
				return errClosed(opname)
			}
			return nil
		}
		run := e.run.Load()
		e.x.gate.RUnlock()
		var claimed atomic.Bool
		done := make(chan struct{})
		fn := func() {
			if claimed.CompareAndSwap(false, true) {
				op()
				close(done)
			}
		}
		for {
			err := e.submit(idx, fn, 0)
			if err == nil {
				break
			}
			if !errors.Is(err, ErrAgain) {
				return err
			}
			select { // ring full: room comes as the carrier drains
			case <-run.done:
			case <-time.After(50 * time.Microsecond):
				continue
			}
			break
		}
		select {
		case <-done:
			return nil
		case <-run.done:
			if claimed.CompareAndSwap(false, true) {
				continue // never served: run it on the idle executor
			}
			<-done // served before the run ended
			return nil
		}
	}
}

// batchExec runs a batch group's owner-only call on l: ownerCall on an
// executor loop, the owner goroutine of a stand-alone loop.
func (l *Loop) batchExec(opname string, op func()) error {
	if l != nil && l.owner != nil {
		return l.owner.ownerCall(l, opname, op)
	}
	return l.exec(opname, op)
}

// onCarrierOf reports whether the caller runs on a carrier of e.
func (e *Exec) onCarrierOf() bool {
	for _, l := range e.loops {
		if l.onLoop() {
			return true
		}
	}
	return false
}

// ---- batch groups owned by the executor ------------------------------------

// NewBatch creates a continuous-batching group owned by the executor: its
// driver is pinned to one of the executor's loops (the loop of a
// *LoopClass given as opts.Class, else the loops in turn), and
// e.Shutdown(ctx) drains it (accepted requests finish, new ones get
// ErrClosed), cancels what is left when ctx ends, and destroys it; Close
// cancels at once. opts.Class may be an executor-wide *Class (NewClass):
// the group runs in that class's piece on its loop. Requests come in with
// Batch.Do (opts.Complete may then be nil) or Submit/SubmitMT (Complete
// required). Setup-only, like the classes: before Start (ErrAgain after).
// Errors: ErrClosed, ErrInval for a nil Step, a class of another executor
// or sizes out of range, ErrAgain once the executor ran, ErrNosys in a
// build without batching.
func (e *Exec) NewBatch(opts BatchOpts) (*Batch, error) {
	const op = "xtc.Exec.NewBatch"
	if e == nil || e.closed.Load() || e.shutting.Load() {
		return nil, errClosed(op)
	}
	if e.running.Load() {
		return nil, errReason(op, ErrAgain, "setup-only: create batch groups before Start")
	}
	var l *Loop
	switch c := opts.Class.(type) {
	case nil:
	case *Class:
		if c == nil {
			opts.Class = nil
			break
		}
		if c.e != e {
			return nil, errReason(op, ErrInval, "class of another executor")
		}
	case *LoopClass:
		if c == nil {
			opts.Class = nil
			break
		}
		if c.l == nil || c.l.owner != e {
			return nil, errReason(op, ErrInval, "class of another executor's loop")
		}
		l = c.l
	}
	if l == nil {
		e.x.bmu.Lock()
		l = e.loops[e.x.brr%len(e.loops)]
		e.x.brr++
		e.x.bmu.Unlock()
	}
	b, err := newBatch(op, l, &opts)
	if err != nil {
		return nil, err
	}
	b.exec = e
	e.x.bmu.Lock()
	e.x.batches = append(e.x.batches, b)
	e.x.bmu.Unlock()
	return b, nil
}

func (e *Exec) ownedBatches() []*Batch {
	e.x.bmu.Lock()
	defer e.x.bmu.Unlock()
	return append([]*Batch(nil), e.x.batches...)
}

func (e *Exec) dropBatch(b *Batch) {
	e.x.bmu.Lock()
	defer e.x.bmu.Unlock()
	for i, x := range e.x.batches {
		if x == b {
			e.x.batches = append(e.x.batches[:i], e.x.batches[i+1:]...)
			return
		}
	}
}

// shutdownBatches ends the executor's groups while it runs (Shutdown,
// after new calls were refused): drain (ctx != nil) until ctx ends, then
// cancel what is left, and wait until every driver has ended. A group
// whose executor is not running gets a run for it: a driver ends only by
// running.
func (e *Exec) shutdownBatches(ctx context.Context) error {
	bs := e.ownedBatches()
	if len(bs) == 0 {
		return nil
	}
	if !e.running.Load() {
		if _, err := e.startRun(); err != nil && !errors.Is(err, ErrInval) {
			return err
		}
	}
	var werr error
	if ctx != nil {
		for _, b := range bs {
			_ = b.closeMode(BatchDrain)
		}
		werr = waitDrivers(ctx, bs)
	}
	for _, b := range bs {
		_ = b.closeMode(BatchCancel) // no-op once ended
	}
	_ = waitDrivers(context.Background(), bs)
	return werr
}

// waitDrivers waits until every group's driver ended or ctx ends.
func waitDrivers(ctx context.Context, bs []*Batch) error {
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for {
		alive := false
		for _, b := range bs {
			if b.driverAlive() {
				alive = true
				break
			}
		}
		if !alive {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// destroyBatches frees the groups once the executor stopped (their
// drivers ended); a group whose driver could not end is abandoned to
// Fini, and its Do waiters get ErrClosed.
func (e *Exec) destroyBatches() {
	for _, b := range e.ownedBatches() {
		_ = b.destroy()
		b.failPending()
		e.dropBatch(b)
	}
}
