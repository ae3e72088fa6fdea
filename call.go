//go:build cgo

package xtc

// Exec.Go: a C function run as a proc of an executor, with a class, a
// result and a context, from any goroutine.
//
// Model. Each call is one proc (so it has a pid, a class and can be
// killed) whose body runs the user's `intptr_t (*)(void *)`; its record
// (a slot of the executor's fixed table, csrc/exec_gocall.c) is settled exactly
// once, whatever ended the proc: its return (the value), a kill or the
// executor's Fini (ErrAborted). How the call gets to a carrier and its
// result back to the goroutine is the front door (gocall.go): a ring push
// per call, a spin on the record when the executor is idle, else a
// completion ring served by one goroutine per executor that parks in the
// netpoller: no OS thread is blocked per waiter, nothing is allocated per
// synchronous call.
//
// Cancellation. When ctx ends first, Go returns ctx.Err() at once and
// kills the proc (xtc_exit_pid). With involuntary preemption on
// (Exec.SetPreempt and PreemptSetInvoluntary(true)), a never-yielding
// kernel is stopped at its next slice end in code declared preemptible
// (PreemptPolicy: never inside a C library call, never with a pthread lock
// held); without it, at its next yield or park. The kernel's frames are
// not unwound: it must not hold resources a kill would leak (allocate in
// the caller, pass them in arg, free them after Go returned AND the work
// was reaped, see CallResult; or register C cleanup with
// xtc_proc_at_exit), or check xtc_yield_if_due/poll cooperatively.
//
// Relation to the C API: Exec.Go with a context deadline is what
// xtc_launch(3) does for a C caller (spawn, wait with a timeout, kill at
// the deadline); xtc_launch itself must be called from a fiber, which Go
// code never is, so its wrapper (Launch, fn.go) runs it in a driver proc
// started by this machinery. The deadline-preemptible functions of
// xtc_fn(3) (Exec.LaunchFn, FnLaunch, ...) are driven the same way: each
// slice is a driver proc on a carrier, never a cgo call on a Go thread,
// where the preemption signal must not be armed (cgo-feasibility.md,
// section 4).
//
// Alternatives rejected: the dispatch fibers of Submit (a cancel only sets
// a flag a never-yielding kernel never reads); a Go-side reaper that polls
// the pid (what users wrote by hand: a poll per call and a window where
// the C record is freed while the proc still runs).

/*
#include <stdint.h>
#include "xtc.h"
#include "gobridge_int.h"
*/
import "C"

import (
	"context"
	"sync"
	"unsafe"
)

// CallOption configures one Exec.Go call.
type CallOption func(*callOpts)

type callOpts struct {
	class  *Class
	lclass *ExecClass
	loop   int
	name   string
}

// WithClass runs the call in the executor-wide class c (Exec.NewClass).
func WithClass(c *Class) CallOption { return func(o *callOpts) { o.class = c } }

// WithLoopClass runs the call on the loop of the per-loop class c
// (ExecClassCreate on one of the executor's loops), in that class.
func WithLoopClass(c *ExecClass) CallOption { return func(o *callOpts) { o.lclass = c } }

// WithLoop runs the call on executor loop i. By default a call goes to
// the loop with the fewest of the executor's calls in flight, the loop of
// the previous call on a tie: sequential calls stay on one awake carrier
// (the others park), and a short call does not queue behind a long one
// while another loop has none. Only calls of this front door are counted:
// a loop kept busy by procs spawned otherwise looks idle to it.
func WithLoop(i int) CallOption { return func(o *callOpts) { o.loop = i } }

// WithName names the call's proc (stall and overflow reports).
func WithName(name string) CallOption { return func(o *callOpts) { o.name = name } }

// CallResult is the outcome of a call started with Exec.GoAsync.
type CallResult struct {
	f    *Future
	loop int // executor loop index the proc runs on

	mu  sync.Mutex
	g   *goCalls
	idx int32 // the call's record until it settled, then -1
	pid Pid   // once settled
}

// Pid is the call's proc (dead once Done is closed).
func (r *CallResult) Pid() Pid {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.pid.IsNone() && r.idx >= 0 {
		return r.g.pid(uint32(r.idx)) // a step started from the ring
	}
	return r.pid
}

// Done is closed once the proc has ended (returned, killed or dropped at
// Fini) and its C record was released: after that nothing of the call runs.
func (r *CallResult) Done() <-chan struct{} { return r.f.done }

// Wait returns the C function's result once the proc ended, or ctx.Err()
// when ctx ends first (the work goes on: Kill stops it). ErrAborted when
// the proc was killed or the executor finalised before it returned.
func (r *CallResult) Wait(ctx context.Context) (int64, error) {
	r.await()
	return r.f.Wait(ctx)
}

// await polls a little for the result before the caller parks on Done
// (goCalls.await).
func (r *CallResult) await() {
	if r.g != nil {
		r.g.await(r.f.Ready)
	}
}

// Kill stops the call: not started yet, it never runs; running, it stops
// at its next slice end in code declared preemptible (with preemption on;
// never inside a library call) or its next yield or park (xtc_exit_pid);
// Wait then returns ErrAborted. A call that already ended is left alone
// (nil).
func (r *CallResult) Kill() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.idx >= 0 {
		C.xtc__gocall_kill(r.g.t, C.uint32_t(r.idx))
	}
	return nil
}

// Go runs the C function fn(arg) as a proc of the executor and returns its
// result: fn is an `intptr_t (*)(void *)` of the caller's own cgo code
// (see the package doc for the idiom that also works for static C
// functions), arg must not point to Go memory. From any number of
// goroutines at once; the waiting goroutine parks on a channel, no OS
// thread is blocked per call.
//
// What is preempted where: with involuntary preemption on (NewExec's
// WithPreempt), fn is time-sliced only while it runs C code declared
// preemptible (PreemptPolicy: by default the functions of the program's
// cgo preamble marked XTC_PREEMPTIBLE or
// __attribute__((section("xtc_ptext"), noinline)), libraries allowed with
// PreemptAllowObject, ranges declared with PreemptDeclare) and holds no
// pthread lock. Calls into other C code, C libraries such as sqlite3 or
// OpenSSL above all, run to their end on the carrier thread: their locks
// and thread-local state stay consistent, and a long one delays the slice
// end until fn is back in its own declared code (or passes
// xtc_yield_if_due). A preempted fn resumes on the same carrier thread,
// with its own errno.
//
// When ctx ends before fn returned, Go kills the proc and returns
// ctx.Err() once it is gone. The kill lands only where fn is suspended:
// at its next slice end in declared code (never inside a library call or
// with a lock held), or at its next yield or park. It does not unwind
// fn's C frames: what fn owns is freed only by the cleanup it registered
// with xtc_proc_at_exit from C. So when Go returns, with a result or an
// error, no C code of the call runs any more and arg may be freed (the
// package doc's "C memory, one rule"); if fn returned before the kill
// landed, Go returns its result. A ctx already done returns its error
// without starting anything.
//
// The executor must be running (Start) or be started later for fn to run.
// Errors (*Error): ErrClosed for a nil or closed executor (also matches
// ErrInval), ErrInval for a nil fn, a class of another executor or a loop
// out of range, ErrAgain when too many calls are in flight (1 << 20 per executor),
// ErrNomem, ErrResource (the loop's proc cap), ErrAborted when the proc was
// killed by someone else or dropped at Fini.
func (e *Exec) Go(ctx context.Context, fn, arg unsafe.Pointer, opts ...CallOption) (int64, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	return e.wait(ctx, fn, C.uintptr_t(uintptr(arg)), opts)
}

// GoInt is Go with an integer argument: fn receives n itself as its
// `void *` (cast it back with (intptr_t)arg), for kernels that take a
// count or an id; no C memory and no unsafe conversion needed.
func (e *Exec) GoInt(ctx context.Context, fn unsafe.Pointer, n int64, opts ...CallOption) (int64, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	return e.wait(ctx, fn, C.uintptr_t(n), opts)
}

func (e *Exec) wait(ctx context.Context, fn unsafe.Pointer, arg C.uintptr_t, opts []CallOption) (int64, error) {
	return e.callSync(ctx, fn, arg, opts)
}

// GoAsync starts fn(arg) like Go and returns at once; the CallResult
// waits for it, kills it and tells when its C side is gone. Its proc is
// spawned before GoAsync returns (Pid is valid at once), so a spawn error
// (ErrResource for the loop's proc cap, ErrNomem for its slot) is
// GoAsync's; its stack is mapped by the carrier at its first run, so a
// stack the kernel refuses comes back from Wait as ErrNomem, naming the
// limit, and fn never runs.
func (e *Exec) GoAsync(fn, arg unsafe.Pointer, opts ...CallOption) (*CallResult, error) {
	return e.callAsync(fn, C.uintptr_t(uintptr(arg)), opts, true)
}

// start: a call whose proc a carrier starts from its ring (the steps of
// Fn and Launch; no pid needed).
func (e *Exec) start(fn unsafe.Pointer, arg C.uintptr_t, opts []CallOption) (*CallResult, error) {
	return e.callAsync(fn, arg, opts, false)
}

// callPlace is where a call runs: its executor loop (-1: not chosen yet,
// the front door picks the least loaded when it submits), its class on
// that loop and its proc's name.
type callPlace struct {
	li    int
	class *Class // executor-wide: its per-loop class is the chosen loop's
	cls   C.xtc_exec_class_t
	name  string
}

// on places the call on loop li.
func (p *callPlace) on(li int) {
	p.li = li
	if p.class != nil {
		p.cls = p.class.per[li].c
	}
}

// place resolves a call's options: the executor loop if they name one,
// the class and the proc's name.
func (e *Exec) place(opts []CallOption) (callPlace, error) {
	const op = "xtc_proc_spawn"
	p := callPlace{li: -1}
	if e == nil || e.closed.Load() {
		return p, errClosed(op)
	}
	if e.shutting.Load() {
		return p, errClosed(op)
	}
	if len(opts) == 0 { // the common call: no allocation for the options
		return p, nil
	}
	o := callOpts{loop: -1}
	for _, f := range opts {
		f(&o)
	}
	switch {
	case o.class != nil && o.lclass != nil:
		return p, errReason(op, ErrInval, "WithClass and WithLoopClass together")
	case o.lclass != nil:
		l := o.lclass.l
		if l == nil || l.owner != e {
			return p, errReason(op, ErrInval, "class of another executor's loop")
		}
		li := -1
		for i, x := range e.loops {
			if x == l {
				li = i
			}
		}
		if o.loop >= 0 && o.loop != li {
			return p, errReason(op, ErrInval, "WithLoop disagrees with the class's loop")
		}
		return callPlace{li: li, cls: o.lclass.c, name: o.name}, nil
	case o.class != nil:
		if o.class.e != e {
			return p, errReason(op, ErrInval, "class of another executor")
		}
	}
	if o.loop >= len(e.loops) {
		return p, errReason(op, ErrInval, "loop index out of range")
	}
	p.class, p.name = o.class, o.name
	if o.loop >= 0 {
		p.on(o.loop)
	}
	return p, nil
}
