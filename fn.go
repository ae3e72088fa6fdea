//go:build cgo

package xtc

// Deadline-preemptible C functions from Go: xtc_fn(3) (launch, resume,
// completed, cancel) and xtc_launch(3) (a child proc killed at a deadline).
//
// Model. Go code never runs on a fiber stack and the preemption signal is
// never armed on a Go-owned thread, so the C calls cannot be made from the
// calling goroutine's thread. Each step (one launch or one resume of one
// slice) is instead a small driver proc on an executor carrier, started
// with the Exec.Go machinery: the driver calls xtc_fn_launch or
// xtc_fn_resume on the function's record (C memory), which runs the
// function on a pooled context of that carrier until it returns or its
// slice ends, and then the driver returns. The proc's end completes the
// Go call through the completion queue (no OS thread blocked per waiter).
// Between steps the function is parked in its record, exactly where its
// slice ended; the Go caller is the scheduler that decides what runs next,
// which is LibPreemptible's model (fn_launch returns after the deadline).
//
// Invariants. At most one step of a function is in flight (f.busy); the
// record is read by Go only after that step's proc has ended (Done), and
// the outcome is taken from the record's own state (XTC_FN_*), never from
// the driver's return value, so a driver killed or dropped at any point
// still leaves a consistent answer: the state C last wrote. A caller whose
// ctx ends during a step returns ctx.Err() at once; the slice ends by
// itself (it is bounded), and the next call on the function waits for it.
// All steps of a function run on the loop of its first one (its contexts
// come from that carrier's pool). A record is freed exactly once, by
// Close or by the failed launch, after any step in flight has ended; a
// still-preempted context is then freed from the Go thread
// (xtc__fn_discard: no carrier and no running executor needed).
//
// Alternatives rejected: running xtc_fn_launch in a cgo call on the
// goroutine's thread (would arm the preemption signal on a Go thread and
// run the function's fiber on it; cgo-feasibility.md section 4); one
// long-lived driver per function fed by messages (a proc and a mailbox per
// function, and a kill of the driver would strand the context); a Go
// finalizer freeing the record (it could run while a step is queued).

/*
#include <stdint.h>
#include <stdlib.h>
#include "xtc.h"
#include "xtc_fn.h"
#include "gobridge_int.h"
*/
import "C"

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"
)

// The FnState values are xtc_fn.h's (fn_types.go); checked at compile time.
var _ = [1]struct{}{}[int(FnIdle)-int(C.XTC_FN_IDLE)]
var _ = [1]struct{}{}[int(FnPreempted)-int(C.XTC_FN_PREEMPTED)]
var _ = [1]struct{}{}[int(FnRunning)-int(C.XTC_FN_RUNNING)]
var _ = [1]struct{}{}[int(FnDone)-int(C.XTC_FN_DONE)]

// fnLive counts C records of Fn and Launch alive (tests: no leak).
var fnLive atomic.Int64

// Fn is a deadline-preemptible C function (xtc_fn_t): launched with a
// time slice, it runs on an executor carrier until it returns or the slice
// ends, and then control comes back to the Go caller, which decides what
// runs next; Resume continues it exactly where it was, with bit-identical
// registers. This is LibPreemptible's fn_launch / fn_resume /
// fn_completed, with the Go caller as the scheduler (see the round-robin
// Example). The slice is enforced by involuntary preemption whatever the
// executor's SetPreempt says; it needs PreemptInvoluntarySupported.
//
// Create one with Exec.LaunchFn (or use a zero Fn with the thin FnLaunch).
// Its methods are safe for concurrent use; slices of one function run one
// at a time. A preempted function holds a stack until it completes, is
// cancelled or is closed: Close every Fn you stop using (io.Closer). An
// Fn must not be copied after first use.
type Fn struct {
	mu     sync.Mutex
	e      *Exec
	rec    *C.xtc__gofn_t
	entry  unsafe.Pointer // of the last launch
	arg    unsafe.Pointer
	opts   []CallOption
	busy   *fnStep // the step in flight, nil when none
	closed bool

	state   FnState
	result  int64
	preempt uint32
	run     time.Duration
}

// fnStep is one launch or resume in flight; whoever sees its proc end
// first (its waiter or a later call) fills in the outcome.
type fnStep struct {
	r        *CallResult
	op       string
	preState FnState // the record before the step
	prePre   uint32
	state    FnState
	err      error
}

// absorb takes the outcome of the step in flight from the record once its
// proc has ended (f.mu held). Whether the slice ran is read from the
// record's state (a slice moves it on or counts a preemption), so a
// driver killed between its C call and its own bookkeeping still counts.
func (f *Fn) absorb() {
	s := f.busy
	f.busy = nil
	var rec C.xtc__gofn_view_t
	C.xtc__gofn_view(f.rec, &rec)
	f.state = FnState(rec.state)
	f.result = int64(rec.result)
	f.preempt = uint32(rec.preemptions)
	f.run = time.Duration(rec.run_ns)
	s.state = f.state
	ran := f.state != s.preState || f.preempt != s.prePre
	switch {
	case rec.ran != 0 && rec.rc != 0 && int(rec.rc) != int(ErrAgain):
		s.err = mkerr(s.op, int(rec.rc))
	case rec.ran == 0 && !ran:
		s.err = errReason(s.op, ErrAborted, "the slice's driver proc ended before it ran (killed, or the executor closed)")
	}
}

// settle waits until no step of f is in flight, or ctx ends (f.mu held;
// released while waiting).
func (f *Fn) settle(ctx context.Context) error {
	for f.busy != nil {
		s := f.busy
		select {
		case <-s.r.Done():
			f.absorb()
			continue
		default:
		}
		f.mu.Unlock()
		var err error
		select {
		case <-s.r.Done():
		case <-ctx.Done():
			err = ctx.Err()
		}
		f.mu.Lock()
		if err != nil {
			return err
		}
		if f.busy == s {
			f.absorb()
		}
	}
	return nil
}

// poll absorbs a step that has ended, without waiting (f.mu held).
func (f *Fn) poll() {
	if f.busy != nil {
		select {
		case <-f.busy.r.Done():
			f.absorb()
		default:
		}
	}
}

// step runs one slice (f.mu held, no step in flight) and waits for it or
// ctx. On ctx's end it returns ctx.Err() and leaves the step in flight.
func (f *Fn) step(ctx context.Context, op string, kind C.int, slice time.Duration) (FnState, error) {
	rec := f.rec
	// a launch starts from a clean record (no context: idle or done), so
	// "it ran" shows as a state other than idle
	C.xtc__gofn_prepare(rec, kind, f.entry, f.arg, C.int64_t(slice))
	if kind == C.XTC__GOFN_LAUNCH {
		f.state, f.result, f.preempt, f.run = FnIdle, 0, 0, 0
	}
	// read before the start: from there on the carrier owns the record
	var v C.xtc__gofn_view_t
	C.xtc__gofn_view(rec, &v)
	s := &fnStep{op: op, preState: FnState(v.state), prePre: uint32(v.preemptions)}
	r, err := f.e.start(unsafe.Pointer(C.xtc__gofn_step_fn()),
		C.uintptr_t(uintptr(unsafe.Pointer(rec))), f.opts)
	if err != nil {
		return f.state, err
	}
	s.r = r
	if kind == C.XTC__GOFN_LAUNCH && r.loop >= 0 {
		// the contexts of one function come from one carrier's pool
		f.opts = append(f.opts, WithLoop(r.loop))
	}
	f.busy = s
	f.mu.Unlock()
	r.await()
	select {
	case <-r.Done():
	case <-ctx.Done():
		f.mu.Lock()
		if f.busy == s {
			select {
			case <-r.Done():
				f.absorb()
				return s.state, s.err
			default:
			}
		}
		return FnRunning, ctx.Err()
	}
	f.mu.Lock()
	if f.busy == s {
		f.absorb()
	}
	return s.state, s.err
}

// LaunchFn starts the C function entry(arg) (an `intptr_t (*)(void *)` of
// the caller's cgo code, see the package doc for static functions) as a
// deadline-preemptible function on an executor carrier (xtc_fn_launch) and
// returns once it completed or its slice ended, whichever came first:
// Completed tells which. Resume it until it completes, Close it when done.
// opts place it as for Exec.Go (WithClass, WithLoopClass, WithLoop,
// WithName); every slice of it runs on the loop of the first.
//
// When ctx ends first, LaunchFn returns ctx.Err() at once and the function
// is abandoned: it is stopped at the end of its first slice and its stack
// freed. A ctx already done returns its error without starting anything.
//
// Errors (*Error): ErrClosed for a nil or closed executor, ErrInval for a
// nil entry or a slice <= 0 (and the placement errors of Exec.Go), ErrNosys
// without involuntary preemption (PreemptInvoluntarySupported), ErrNomem,
// ErrAborted when the executor closed before the slice ran.
func (e *Exec) LaunchFn(ctx context.Context, entry, arg unsafe.Pointer, slice time.Duration, opts ...CallOption) (*Fn, error) {
	f := &Fn{}
	if err := f.launch(ctx, e, entry, arg, slice, opts); err != nil {
		_ = f.Close()
		return nil, err
	}
	return f, nil
}

// FnLaunch is xtc_fn_launch, the thin wrapper: it launches entry(arg) as f
// (a zero Fn, or one that completed or was cancelled) on executor e with a
// time slice. It returns nil when the function completed within the slice,
// ErrAgain when the slice ended first (f is then FnPreempted: FnResume or
// FnCancel it), or the errors of Exec.LaunchFn.
func FnLaunch(e *Exec, f *Fn, entry, arg unsafe.Pointer, slice time.Duration) error {
	if err := f.launch(context.Background(), e, entry, arg, slice, nil); err != nil {
		return err
	}
	return thinAgain("xtc_fn_launch", f)
}

// FnResume is xtc_fn_resume: one more slice for a preempted f; nil when it
// completed, ErrAgain when the slice ended first, ErrInval unless f is
// preempted.
func FnResume(f *Fn, slice time.Duration) error {
	if _, err := f.Resume(context.Background(), slice); err != nil {
		return err
	}
	return thinAgain("xtc_fn_resume", f)
}

// FnCompleted is xtc_fn_completed: whether f returned (false for nil).
func FnCompleted(f *Fn) bool { return f.Completed() }

// FnCancel is xtc_fn_cancel: see Fn.Cancel.
func FnCancel(f *Fn) error { return f.Cancel() }

func thinAgain(op string, f *Fn) error {
	if f.Completed() {
		return nil
	}
	return errReason(op, ErrAgain, "the slice ended before the function returned")
}

func (f *Fn) launch(ctx context.Context, e *Exec, entry, arg unsafe.Pointer, slice time.Duration, opts []CallOption) error {
	const op = "xtc_fn_launch"
	if ctx == nil {
		ctx = context.Background()
	}
	switch {
	case f == nil:
		return errReason(op, ErrInval, "nil Fn")
	case e == nil || e.closed.Load() || e.shutting.Load():
		return errClosed(op)
	case entry == nil:
		return errReason(op, ErrInval, "nil C function")
	case slice <= 0:
		return errReason(op, ErrInval, fmt.Sprintf("slice must be > 0, got %v", slice))
	case !PreemptInvoluntarySupported():
		return errReason(op, ErrNosys, "no involuntary preemption in this build: the function could not be stopped at its slice")
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.settle(ctx); err != nil {
		return err
	}
	if f.closed {
		return errClosed(op)
	}
	if f.state == FnPreempted {
		return errReason(op, ErrInval, "already launched and preempted: Resume, Cancel or Close it")
	}
	if f.rec == nil {
		f.rec = C.xtc__gofn_new()
		if f.rec == nil {
			return errReason(op, ErrNomem, "function record")
		}
		fnLive.Add(1)
	}
	f.e = e
	f.opts = append([]CallOption(nil), opts...)
	f.entry, f.arg = entry, arg
	_, err := f.step(ctx, op, C.XTC__GOFN_LAUNCH, slice)
	return err
}

// Resume runs a preempted function for another slice (xtc_fn_resume) on
// its carrier and returns whether it completed. When ctx ends first,
// Resume returns ctx.Err() at once; the slice still ends by itself, and
// the next call on f waits for it. ErrInval unless f is FnPreempted (a
// nil Fn, a slice <= 0, or f completed or cancelled); ErrClosed after
// Close or when its executor closed.
func (f *Fn) Resume(ctx context.Context, slice time.Duration) (bool, error) {
	const op = "xtc_fn_resume"
	if ctx == nil {
		ctx = context.Background()
	}
	if f == nil {
		return false, errReason(op, ErrInval, "nil Fn")
	}
	if slice <= 0 {
		return false, errReason(op, ErrInval, fmt.Sprintf("slice must be > 0, got %v", slice))
	}
	if err := ctx.Err(); err != nil {
		return false, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.settle(ctx); err != nil {
		return false, err
	}
	if f.closed {
		return false, errClosed(op)
	}
	if f.state != FnPreempted {
		return f.state == FnDone, errReason(op, ErrInval, "not preempted (state "+f.state.String()+")")
	}
	st, err := f.step(ctx, op, C.XTC__GOFN_RESUME, slice)
	return st == FnDone && err == nil, err
}

// Wait waits until no slice of f is in flight (after a LaunchFn or Resume
// whose ctx ended) or ctx ends.
func (f *Fn) Wait(ctx context.Context) error {
	if f == nil {
		return errReason("xtc.Fn.Wait", ErrInval, "nil Fn")
	}
	if ctx == nil {
		ctx = context.Background()
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.settle(ctx)
}

// Completed reports whether the function returned (xtc_fn_completed):
// its Result is then valid. False for nil and while a slice is in flight.
func (f *Fn) Completed() bool {
	return f.State() == FnDone
}

// State returns the function's state: FnRunning while a slice of it is in
// flight, else what its last slice left (FnIdle for nil).
func (f *Fn) State() FnState {
	if f == nil {
		return FnIdle
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.poll()
	if f.busy != nil {
		return FnRunning
	}
	return f.state
}

// Result returns the C function's return value once it completed;
// ErrAgain while a slice is in flight, ErrInval before it completed.
func (f *Fn) Result() (int64, error) {
	const op = "xtc.Fn.Result"
	if f == nil {
		return 0, errReason(op, ErrInval, "nil Fn")
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.poll()
	switch {
	case f.busy != nil:
		return 0, errReason(op, ErrAgain, "a slice is in flight")
	case f.state != FnDone:
		return 0, errReason(op, ErrInval, "not completed (state "+f.state.String()+")")
	}
	return f.result, nil
}

// Preemptions returns how many of its slices ended before it completed.
func (f *Fn) Preemptions() int {
	if f == nil {
		return 0
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.poll()
	return int(f.preempt)
}

// RunTime returns the time the function has run so far (all its slices).
func (f *Fn) RunTime() time.Duration {
	if f == nil {
		return 0
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.poll()
	return f.run
}

// Cancel abandons a preempted function (xtc_fn_cancel): it never runs
// again and its stack is freed, without unwinding. A function is preempted
// only in code declared preemptible with no pthread lock held
// (PreemptPolicy), so it is never abandoned inside a C library call; memory
// it allocated is lost unless it frees it elsewhere; the state becomes
// FnIdle, and FnLaunch
// may reuse f. ErrAgain while a slice is in flight (Wait first), ErrInval
// unless preempted, ErrClosed after Close. Works after the executor
// closed.
func (f *Fn) Cancel() error {
	const op = "xtc_fn_cancel"
	if f == nil {
		return errReason(op, ErrInval, "nil Fn")
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.poll()
	switch {
	case f.closed:
		return errClosed(op)
	case f.busy != nil:
		return errReason(op, ErrAgain, "a slice is in flight: Wait for it first")
	case f.state != FnPreempted:
		return errReason(op, ErrInval, "not preempted (state "+f.state.String()+")")
	}
	if rc := C.xtc__gofn_discard(f.rec); rc != 0 {
		return mkerr(op, int(rc))
	}
	f.state = FnIdle
	return nil
}

// Close releases the function (io.Closer): a preempted one is cancelled,
// a slice in flight is left to end (the stack is freed then), and later
// calls return ErrClosed. Close never blocks; a second Close returns
// ErrClosed.
func (f *Fn) Close() error {
	const op = "xtc.Fn.Close"
	if f == nil {
		return errReason(op, ErrInval, "nil Fn")
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return errClosed(op)
	}
	f.closed = true
	f.poll()
	if f.busy == nil {
		f.free()
		return nil
	}
	s := f.busy
	_ = s.r.Kill() // a slice still queued never runs
	go func() {
		<-s.r.Done()
		f.mu.Lock()
		if f.busy == s {
			f.absorb()
		}
		f.free()
		f.mu.Unlock()
	}()
	return nil
}

// free drops the C record (f.mu held, no step in flight).
func (f *Fn) free() {
	if f.rec != nil {
		C.xtc__gofn_free(f.rec)
		f.rec = nil
		fnLive.Add(-1)
	}
	if f.state == FnPreempted {
		f.state = FnIdle
	}
}

// Launch is xtc_launch, the thin wrapper: it runs the C function fn(arg)
// on a new child proc of executor e and waits until it returns or timeout
// passes (< 0: no deadline), when the child is killed with reason
// XTC_LAUNCH_CANCEL_REASON. It returns fn's value, or an error:
//
//	ErrAgain    the deadline passed: the child was killed and has finished dying
//	ErrAborted  the child died without returning (killed by someone else, or
//	            the executor closed)
//	ctx.Err()   ctx ended first: the child is killed (it stops at its next
//	            slice with preemption on, else at its next yield or park)
//	ErrClosed   e is nil or closed; ErrInval for a nil fn or a loop out of range
//
// The caller's side of xtc_launch (a fiber that parks until the child
// ends) is a driver proc on the same carrier; the goroutine waits through
// the completion queue. A child that never yields is only stopped on time
// with involuntary preemption on (Exec.SetPreempt, PreemptSetInvoluntary).
// Exec.Go with a context deadline does the same in one proc.
func Launch(ctx context.Context, e *Exec, fn, arg unsafe.Pointer, timeout time.Duration, o *LaunchOpts) (int64, error) {
	const op = "xtc_launch"
	if ctx == nil {
		ctx = context.Background()
	}
	switch {
	case e == nil || e.closed.Load() || e.shutting.Load():
		return 0, errClosed(op)
	case fn == nil:
		return 0, errReason(op, ErrInval, "nil C function")
	case o != nil && o.MailboxCap < 0:
		return 0, errReason(op, ErrInval, fmt.Sprintf("MailboxCap must be >= 0, got %d", o.MailboxCap))
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	var opts []CallOption
	var name *C.char
	var mcap C.size_t
	if o != nil {
		if o.Loop >= 0 {
			opts = append(opts, WithLoop(o.Loop))
		}
		if o.Name != "" {
			name = C.CString(o.Name) // owned by the record from here
		}
		mcap = C.size_t(o.MailboxCap)
	}
	rec := C.xtc__golaunch_new(fn, arg, C.int64_t(timeout), name, mcap)
	if rec == nil {
		C.free(unsafe.Pointer(name))
		return 0, errReason(op, ErrNomem, "launch record")
	}
	fnLive.Add(1)
	free := func() {
		C.xtc__golaunch_free(rec)
		fnLive.Add(-1)
	}
	r, err := e.start(unsafe.Pointer(C.xtc__golaunch_drive_fn()),
		C.uintptr_t(uintptr(unsafe.Pointer(rec))), opts)
	if err != nil {
		free()
		return 0, err
	}
	r.await()
	select {
	case <-r.Done():
	case <-ctx.Done():
		// the driver, killed while it waits, kills the child and waits
		// for it to be gone before it ends; the record lives until then
		_ = r.Kill()
		go func() {
			<-r.Done()
			free()
		}()
		return 0, ctx.Err()
	}
	defer free()
	var ran C.int
	var result C.intptr_t
	rc := C.xtc__golaunch_outcome(rec, &ran, &result)
	if ran == 0 {
		return 0, errReason(op, ErrAborted, "the driver proc ended before the child returned (killed, or the executor closed)")
	}
	if rc != 0 {
		return 0, mkerr(op, int(rc))
	}
	return int64(result), nil
}
