//go:build cgo

package xtc

// Exec.Go: a C function run as a proc of an executor, with a class, a
// result and a context, from any goroutine.
//
// Model. Each call is one proc (so it has a pid, a class and can be
// killed) whose body runs the user's `intptr_t (*)(void *)` and records
// the result; an exit hook of the proc (xtc__proc_spawn_hooked) settles a
// promise exactly once, whatever ended the proc: its return (the value),
// a kill or the executor's Fini (ErrAborted). The promise's future feeds
// the process-wide completion queue (completion.go), so the waiting
// goroutine parks on a channel, served by one goroutine parked in the
// netpoller: no OS thread is blocked per waiter.
//
// Cancellation. When ctx ends first, Go returns ctx.Err() at once and
// kills the proc (xtc_exit_pid). With involuntary preemption on
// (Exec.SetPreempt and PreemptSetInvoluntary(true)), a never-yielding
// kernel is stopped at its next slice;
// without it, at its next yield or park. The kernel gets no chance to
// clean up: it must not hold resources a kill would leak (allocate in the
// caller, pass them in arg, free them after Go returned AND the work was
// reaped, see CallResult), or check xtc_yield_if_due/poll cooperatively.
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
#include <stdlib.h>
#include "xtc.h"
#include "proc_int.h"

typedef struct xtc_go_call {
	intptr_t (*fn)(void *);
	void *arg;
	xtc_promise_t *prom;
	intptr_t value;
	int finished;
} xtc_go_call_t;

static void xtc_go_call_body(void *a)
{
	xtc_go_call_t *c = a;

	c->value = c->fn(c->arg);
	c->finished = 1;
}

// The proc's exit hook: exactly once, on the thread that tore it down.
static void xtc_go_call_exit(void *a, int reason)
{
	xtc_go_call_t *c = a;

	(void)reason; // a kill with reason 0 looks like a return: use finished
	if (c->finished)
		xtc_promise_set(c->prom, c->value, 0);
	else
		xtc_promise_drop(c->prom); // completes with XTC_E_ABORTED
	free(c);
}

// Spawn fn(arg) on loop as a proc whose end completes cq entry tag. On a
// spawn error the promise is dropped (the entry still arrives, ABORTED),
// so the Go side always gets exactly one completion per started call.
static int xtc_go_call_start(xtc_loop_t *loop, void *fn, uintptr_t arg,
                             xtc_exec_class_t cls, const char *name,
                             xtc_cq_t *cq, uint64_t tag, xtc_pid_t *pid,
                             int *routed)
{
	xtc_go_call_t *c = calloc(1, sizeof(*c));
	xtc_future_t *fut;
	xtc_proc_opts_t o = {0};
	int rc;

	*routed = 0;
	if (c == NULL)
		return XTC_E_NOMEM;
	rc = xtc_future_new_pair(&c->prom, &fut);
	if (rc != 0) {
		free(c);
		return rc;
	}
	rc = xtc_future_notify(fut, cq, tag);
	if (rc != 0) {
		xtc_future_drop(fut);
		xtc_promise_drop(c->prom);
		free(c);
		return rc; // nothing was routed to cq
	}
	*routed = 1;
	c->fn = (intptr_t (*)(void *))fn;
	c->arg = (void *)arg;
	o.sched_class = cls;
	o.name = name;
	rc = xtc__proc_spawn_hooked(loop, xtc_go_call_body, c, &o,
	    xtc_go_call_exit, c, pid);
	if (rc != 0) {
		xtc_promise_drop(c->prom);
		free(c);
		return rc;
	}
	return 0;
}
*/
import "C"

import (
	"context"
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

// WithLoop runs the call on executor loop i (default: the loops in turn).
func WithLoop(i int) CallOption { return func(o *callOpts) { o.loop = i } }

// WithName names the call's proc (stall and overflow reports).
func WithName(name string) CallOption { return func(o *callOpts) { o.name = name } }

// CallResult is the outcome of a call started with Exec.GoAsync.
type CallResult struct {
	f    *Future
	pid  Pid
	loop int // executor loop index the proc runs on
}

// Pid is the call's proc (dead once Done is closed).
func (r *CallResult) Pid() Pid { return r.pid }

// Done is closed once the proc has ended (returned, killed or dropped at
// Fini) and its C record was freed: after that nothing of the call runs.
func (r *CallResult) Done() <-chan struct{} { return r.f.done }

// Wait returns the C function's result once the proc ended, or ctx.Err()
// when ctx ends first (the work goes on: Kill stops it). ErrAborted when
// the proc was killed or the executor finalised before it returned.
func (r *CallResult) Wait(ctx context.Context) (int64, error) { return r.f.Wait(ctx) }

// Kill stops the call at its next slice (with preemption on) or its next
// yield or park (xtc_exit_pid); Wait then returns ErrAborted. A call that
// already ended is left alone (nil).
func (r *CallResult) Kill() error {
	if r.f.Ready() {
		return nil
	}
	err := ExitPid(r.pid, int(ErrAborted))
	if err != nil && r.f.Ready() {
		return nil // it ended meanwhile
	}
	return err
}

// Go runs the C function fn(arg) as a proc of the executor and returns its
// result: fn is an `intptr_t (*)(void *)` of the caller's own cgo code
// (see the package doc for the idiom that also works for static C
// functions), arg must not point to Go memory. From any number of
// goroutines at once; the waiting goroutine parks on a channel, no OS
// thread is blocked per call.
//
// When ctx ends before fn returned, Go returns ctx.Err() at once and kills
// the proc: with involuntary preemption on (Exec.SetPreempt and
// PreemptSetInvoluntary(true)) it stops at its next slice, else at its
// next yield or park; the kill never runs C cleanup
// (see GoAsync to know when the call's C side is gone). A ctx already done
// returns its error without starting anything.
//
// The executor must be running (Start) or be started later for fn to run.
// Errors (*Error): ErrClosed for a nil or closed executor (also matches
// ErrInval), ErrInval for a nil fn, a class of another executor or a loop
// out of range, ErrAgain when too many calls are in flight (16384),
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
	r, err := e.start(fn, arg, opts)
	if err != nil {
		return 0, err
	}
	select {
	case <-r.f.done:
		return r.f.value, r.f.err
	case <-ctx.Done():
		_ = r.Kill()
		return 0, ctx.Err()
	}
}

// GoAsync starts fn(arg) like Go and returns at once; the CallResult
// waits for it, kills it and tells when its C side is gone.
func (e *Exec) GoAsync(fn, arg unsafe.Pointer, opts ...CallOption) (*CallResult, error) {
	return e.start(fn, C.uintptr_t(uintptr(arg)), opts)
}

func (e *Exec) start(fn unsafe.Pointer, arg C.uintptr_t, opts []CallOption) (*CallResult, error) {
	const op = "xtc_proc_spawn"
	if e == nil || e.closed.Load() {
		return nil, errClosed(op)
	}
	if fn == nil {
		return nil, errReason(op, ErrInval, "nil C function")
	}
	o := callOpts{loop: -1}
	for _, f := range opts {
		f(&o)
	}
	var cls C.xtc_exec_class_t
	var l *Loop
	li := -1
	switch {
	case o.class != nil && o.lclass != nil:
		return nil, errReason(op, ErrInval, "WithClass and WithLoopClass together")
	case o.lclass != nil:
		l = o.lclass.l
		if l == nil || l.owner != e {
			return nil, errReason(op, ErrInval, "class of another executor's loop")
		}
		cls = o.lclass.c
	case o.class != nil:
		if o.class.e != e {
			return nil, errReason(op, ErrInval, "class of another executor")
		}
	}
	if l == nil {
		i := o.loop
		if i >= len(e.loops) {
			return nil, errReason(op, ErrInval, "loop index out of range")
		}
		if i < 0 {
			i = int(e.rr.Add(1)-1) % len(e.loops)
		}
		l = e.loops[i]
		li = i
		if o.class != nil {
			cls = o.class.per[i].c
		}
	} else if o.loop >= 0 && e.loops[o.loop] != l {
		return nil, errReason(op, ErrInval, "WithLoop disagrees with the class's loop")
	}
	if e.shutting.Load() {
		return nil, errClosed(op)
	}
	q, err := getCQ()
	if err != nil {
		return nil, err
	}
	if q.inflight.Add(1) > cqCapacity {
		q.inflight.Add(-1)
		return nil, errReason(op, ErrAgain, "too many calls and Submits in flight")
	}
	f := &Future{done: make(chan struct{}), op: "xtc.Exec.Go"}
	q.mu.Lock()
	q.next++
	tag := q.next
	q.pending[tag] = f
	q.mu.Unlock()
	e.calls.Add(1)
	f.onDone = func() { e.calls.Add(-1) }
	var cname *C.char
	if o.name != "" {
		cname = C.CString(o.name) // copied by the spawn
		defer C.free(unsafe.Pointer(cname))
	}
	var pid C.xtc_pid_t
	var routed C.int
	err = l.withC(op, func(c *C.xtc_loop_t) C.int {
		return C.xtc_go_call_start(c, fn, arg, cls, cname, q.cq, C.uint64_t(tag), &pid, &routed)
	})
	if err != nil {
		q.mu.Lock()
		delete(q.pending, tag)
		q.mu.Unlock()
		e.calls.Add(-1)
		if routed == 0 {
			q.inflight.Add(-1) // no entry will arrive for this tag
		}
		return nil, err
	}
	if li < 0 {
		for i, x := range e.loops {
			if x == l {
				li = i
			}
		}
	}
	return &CallResult{f: f, pid: pidFromC(pid), loop: li}, nil
}
