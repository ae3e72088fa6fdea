//go:build cgo

package xtc

/*
#include <stdint.h>
#include <stdlib.h>
#include "xtc.h"
#include "gobridge_int.h"

// Exported from callbacks.go (declarations only there).
extern int  xtcGoTask(uintptr_t h, xtc_task_t *self);
extern void xtcGoTimer(uintptr_t h);
extern int  xtcGoDrain(uintptr_t h);

// Every C->Go call below is made by the loop on its carrier stack (stackless
// task bodies and timer callbacks never run on a fiber) and is bracketed by
// the Go-callback depth guard: while it is raised, the thread refuses fiber
// switches, parks and preemption (README, "Thread rules in a Go process").
static int xtc_go_task_tramp(xtc_task_t *self, void *user)
{
	xtc__gobridge_cb_enter();
	int rc = xtcGoTask((uintptr_t)user, self);
	xtc__gobridge_cb_leave();
	return rc;
}

static void xtc_go_timer_tramp(void *user)
{
	xtc__gobridge_cb_enter();
	xtcGoTimer((uintptr_t)user);
	xtc__gobridge_cb_leave();
}

static int xtc_go_drain_tramp(xtc_task_t *self, void *user)
{
	(void)self;
	xtc__gobridge_cb_enter();
	int rc = xtcGoDrain((uintptr_t)user);
	xtc__gobridge_cb_leave();
	return rc;
}

static int xtc_go_task_spawn(xtc_loop_t *loop, uintptr_t h, xtc_task_t **out)
{
	return xtc_task_spawn(loop, xtc_go_task_tramp, (void *)h, out);
}

static int xtc_go_drain_spawn(xtc_loop_t *loop, uintptr_t h)
{
	return xtc_task_spawn(loop, xtc_go_drain_tramp, (void *)h, NULL);
}

static int xtc_go_timer_set(xtc_loop_t *loop, int64_t ns, uintptr_t h,
                            xtc_timer_t **out)
{
	return xtc_timer_set(loop, ns, xtc_go_timer_tramp, (void *)h, out);
}

// 1 when the calling thread is inside a run of loop (a Go callback of it).
static int xtc_go_on_loop(xtc_loop_t *loop)
{
	return loop != NULL && xtc__gobridge_loop_current() == loop;
}
*/
import "C"

import (
	"context"
	"fmt"
	"runtime"
	"runtime/cgo"
	"sync"
	"sync/atomic"
	"time"
)

// Version returns the C library version string (xtc_version_string).
func Version() string { return C.GoString(C.xtc_version_string()) }

// VersionComponents returns major, minor and patch (xtc_version_components).
func VersionComponents() (major, minor, patch int, err error) {
	var a, b, c C.int
	if rc := C.xtc_version_components(&a, &b, &c); rc != 0 {
		return 0, 0, 0, mkerr("xtc_version_components", int(rc))
	}
	return int(a), int(b), int(c), nil
}

// Strerror returns the C library's text for code (xtc_strerror).
func Strerror(code Errno) string { return C.GoString(C.xtc_strerror(C.int(code))) }

// IOBackendName returns "uring" or "epoll": the I/O backend this process
// actually uses (io_uring is preferred, epoll when the kernel refuses it).
func IOBackendName() string { return C.GoString(C.xtc_io_backend_name()) }

// StackSize returns the default stack size of new fibers, in bytes.
func StackSize() int { return int(C.xtc_stack_size()) }

// SetStackSize sets the process-wide default stack size of later spawns
// (>= 16 KiB, rounded up to pages). ErrInval or ErrRange for bad sizes.
func SetStackSize(bytes int) error {
	if bytes < 0 {
		return mkerr("xtc_set_stack_size", int(ErrInval))
	}
	return mkerr("xtc_set_stack_size", int(C.xtc_set_stack_size(C.size_t(bytes))))
}

// ClockMono returns the C library's monotonic clock (xtc_clock_mono).
func ClockMono() time.Duration { return time.Duration(C.xtc_clock_mono()) }

// errClosed is returned for every use of a nil or finalised loop.
func errClosed(op string) error { return &Error{Op: op, Code: ErrInval, Reason: reasonClosed} }

// Loop is an xtc event loop (xtc_loop_t). Its C state belongs to one OS
// thread, so each Loop has an owner goroutine locked to a thread of its own
// for the Loop's whole life: init, run, fini and the owner-only calls
// (timers, yield budget) execute there. Run blocks the calling goroutine on
// a channel, not an OS thread, while the owner thread runs xtc_loop_run in
// one cgo call. Calls from other goroutines during a run are posted to the
// loop (a stackless task drains them on the loop thread); calls from Go
// callbacks of the loop run directly.
type Loop struct {
	c    *C.xtc_loop_t
	self cgo.Handle // handle of this Loop, passed to the drain task

	reqs chan func()   // owner-only work, executed by the owner goroutine
	quit chan struct{} // closed when the owner goroutine has finished

	// cmu guards c against finalisation while another goroutine makes a
	// thread-safe C call (spawn, stop, wake). Only Fini takes it for writing.
	cmu    sync.RWMutex
	closed atomic.Bool
	// running is true while xtc_loop_run is active (read by other
	// goroutines to decide whether a posted request needs a drain task).
	running atomic.Bool

	// Owner goroutine only.
	inRun     bool
	finishing bool

	owner *Exec    // owning executor, nil for a stand-alone loop
	stall *stallCb // the Go stall callback's holder (guarded by hmu)

	hmu     sync.Mutex
	handles map[cgo.Handle]struct{} // Go callbacks C still references
	panicv  any                     // first panic of a Go callback
}

// LoopInit creates a loop (xtc_loop_init) and its owner thread.
func LoopInit() (*Loop, error) {
	l := &Loop{
		reqs:    make(chan func(), 64),
		quit:    make(chan struct{}),
		handles: map[cgo.Handle]struct{}{},
	}
	initErr := make(chan error, 1)
	go l.serve(initErr)
	if err := <-initErr; err != nil {
		return nil, err
	}
	l.self = cgo.NewHandle(l)
	return l, nil
}

// serve is the owner goroutine. It never unlocks its thread: when it
// returns after Fini, the runtime ends that thread, and with it the C
// per-thread state (root fiber, stack cache, signal stack).
func (l *Loop) serve(initErr chan<- error) {
	runtime.LockOSThread()
	defer close(l.quit)
	var c *C.xtc_loop_t
	if rc := C.xtc_loop_init(&c); rc != 0 {
		initErr <- mkerr("xtc_loop_init", int(rc))
		return
	}
	l.c = c
	initErr <- nil
	for !l.finishing {
		req := <-l.reqs
		req()
	}
}

// drain runs queued requests without blocking (owner goroutine only).
func (l *Loop) drain() {
	for {
		select {
		case req := <-l.reqs:
			req()
		default:
			return
		}
	}
}

// onLoop reports whether the caller is a Go callback of l, on its thread.
func (l *Loop) onLoop() bool {
	l.cmu.RLock()
	defer l.cmu.RUnlock()
	return !l.closed.Load() && C.xtc_go_on_loop(l.c) != 0
}

// exec runs op on the owner thread and waits for it. op runs directly when
// the caller already is there (a callback of this loop).
func (l *Loop) exec(opname string, op func()) error {
	if l == nil || l.closed.Load() {
		return errClosed(opname)
	}
	if l.onLoop() {
		op()
		return nil
	}
	done := make(chan struct{})
	req := func() { op(); close(done) }
	select {
	case l.reqs <- req:
	case <-l.quit:
		return errClosed(opname)
	}
	// A running loop only looks at the request queue from a task: post one
	// (cheap, thread-safe spawn). A run starting after this check drains the
	// queue itself before entering C; a stray drain task is harmless.
	if l.running.Load() {
		l.cmu.RLock()
		if !l.closed.Load() {
			C.xtc_go_drain_spawn(l.c, C.uintptr_t(l.self))
		}
		l.cmu.RUnlock()
	}
	select {
	case <-done:
		return nil
	case <-l.quit:
		select {
		case <-done: // Fini itself
			return nil
		default:
			return errClosed(opname)
		}
	}
}

// guardedCall runs a thread-safe C call on the caller's thread while the
// handle *cp is guaranteed not to be finalised (Fini takes mu for writing
// and sets closed), for Loop and Exec alike.
func guardedCall[T any](op string, mu *sync.RWMutex, closed *atomic.Bool,
	cp *T, call func(T) C.int) error {
	mu.RLock()
	defer mu.RUnlock()
	if closed.Load() {
		return errClosed(op)
	}
	return mkerr(op, int(call(*cp)))
}

// withC runs a thread-safe C call on the caller's thread while the loop is
// guaranteed not to be finalised.
func (l *Loop) withC(opname string, call func(c *C.xtc_loop_t) C.int) error {
	if l == nil {
		return errClosed(opname)
	}
	return guardedCall(opname, &l.cmu, &l.closed, &l.c, call)
}

// Run drives the loop (xtc_loop_run) until no task or timer is left or Stop
// is called. It blocks the calling goroutine, not its thread: the loop runs
// on its owner thread. ErrInval from inside a callback of the same loop. If
// a Go callback panicked, the loop is stopped and Run panics with the same
// value in the caller's goroutine.
func (l *Loop) Run() error {
	var rc C.int
	err := l.exec("xtc_loop_run", func() {
		if l.inRun {
			rc = C.int(ErrInval)
			return
		}
		l.inRun = true
		l.running.Store(true)
		l.drain()
		rc = C.xtc_loop_run(l.c)
		l.running.Store(false)
		l.inRun = false
	})
	if err != nil {
		return err
	}
	l.hmu.Lock()
	p := l.panicv
	l.panicv = nil
	l.hmu.Unlock()
	if p != nil {
		panic(p)
	}
	return mkerr("xtc_loop_run", int(rc))
}

// RunContext is Run, stopping the loop when ctx is done; it then returns
// ctx.Err() (unless the run failed on its own).
func (l *Loop) RunContext(ctx context.Context) error {
	if ctx.Done() == nil {
		return l.Run()
	}
	returned := make(chan struct{})
	var cancelled atomic.Bool
	go func() {
		select {
		case <-ctx.Done():
		case <-returned:
			return
		}
		cancelled.Store(true)
		// One stop is enough: a stop that lands before the run starts is
		// kept and ends it (xtc_loop_stop latches until run returns).
		_ = l.Stop()
	}()
	err := l.Run()
	close(returned)
	if err == nil && cancelled.Load() {
		return ctx.Err()
	}
	return err
}

// Stop asks a running loop to return from Run after the current step
// (xtc_loop_stop). Any goroutine.
func (l *Loop) Stop() error {
	return l.withC("xtc_loop_stop", func(c *C.xtc_loop_t) C.int { return C.xtc_loop_stop(c) })
}

// Wake makes the loop's poller return and re-check what is runnable
// (xtc_loop_wake). Any goroutine; an extra wake is harmless.
func (l *Loop) Wake() error {
	return l.withC("xtc_loop_wake", func(c *C.xtc_loop_t) C.int { return C.xtc_loop_wake(c) })
}

// Fini frees the loop (xtc_loop_fini): every task and timer, then its owner
// thread. ErrInval while it runs, from inside its callbacks, or twice.
func (l *Loop) Fini() error {
	var rc C.int
	err := l.exec("xtc_loop_fini", func() {
		if l.inRun {
			rc = C.int(ErrInval)
			return
		}
		l.cmu.Lock()
		rc = C.xtc_loop_fini(l.c)
		if rc == 0 {
			l.closed.Store(true)
			l.c = nil
		}
		l.cmu.Unlock()
		if rc != 0 {
			return
		}
		l.finishing = true
		l.self.Delete()
		l.hmu.Lock()
		for h := range l.handles {
			h.Delete()
		}
		l.handles = nil
		if l.stall != nil {
			l.stall.end()
			l.stall = nil
		}
		l.hmu.Unlock()
	})
	if err != nil {
		return err
	}
	return mkerr("xtc_loop_fini", int(rc))
}

// SetYieldBudget sets the cooperative yield budget of fibers on this loop
// (xtc_yield_set_budget); 0 turns it off, negative values count as 0.
func (l *Loop) SetYieldBudget(d time.Duration) error {
	return l.exec("xtc_yield_set_budget", func() {
		C.xtc_yield_set_budget(l.c, C.int64_t(d))
	})
}

// YieldDueCount returns how many times the yield budget expired on this
// loop (xtc_yield_due_count).
func (l *Loop) YieldDueCount() (uint64, error) {
	var n C.uint64_t
	err := l.exec("xtc_yield_due_count", func() { n = C.xtc_yield_due_count(l.c) })
	return uint64(n), err
}

func (l *Loop) addHandle(v any) (cgo.Handle, bool) {
	l.hmu.Lock()
	defer l.hmu.Unlock()
	if l.handles == nil {
		return 0, false
	}
	h := cgo.NewHandle(v)
	l.handles[h] = struct{}{}
	return h, true
}

func (l *Loop) dropHandle(h cgo.Handle) {
	l.hmu.Lock()
	defer l.hmu.Unlock()
	if _, ok := l.handles[h]; ok {
		delete(l.handles, h)
		h.Delete()
	}
}

// recordPanic keeps the first panic of a Go callback and stops the loop;
// Run re-panics with it. Called on the loop thread.
func (l *Loop) recordPanic(v any) {
	if l.owner != nil { // an executor loop: its run is the executor's
		l.owner.recordPanic(v)
		return
	}
	l.hmu.Lock()
	if l.panicv == nil {
		l.panicv = v
	}
	l.hmu.Unlock()
	C.xtc_loop_stop(l.c)
}

// Task is a stackless task whose body is a Go function. The body runs on
// the loop's own thread stack (never on a fiber stack), once per
// scheduling, and must not block for long: it is a leaf for the scheduler
// (no fiber switch or preemption happens on the thread while it runs).
type Task struct {
	loop *Loop
	c    *C.xtc_task_t // set on the loop thread before each run of the body
	h    cgo.Handle
	fn   func(*Task) TaskResult
	done bool // owner thread only
}

// TaskSpawn creates a stackless task on l running fn (xtc_task_spawn);
// from any goroutine. fn receives its Task to park or build wakers. The C
// task is retained until Fini so that wakers stay valid after it finished
// (a waker of a finished task is a no-op); a long-lived loop that spawns Go
// tasks without end should be recycled now and then. A spawn from a
// goroutine other than the loop's own goes through the loop's inbox
// (about 1 µs here, an eventfd write); from a callback of the loop it is
// local.
func TaskSpawn(l *Loop, fn func(t *Task) TaskResult) (*Task, error) {
	if fn == nil {
		return nil, &Error{Op: "xtc_task_spawn", Code: ErrInval}
	}
	if l == nil {
		return nil, errClosed("xtc_task_spawn")
	}
	t := &Task{loop: l, fn: fn}
	h, ok := l.addHandle(t)
	if !ok {
		return nil, errClosed("xtc_task_spawn")
	}
	t.h = h
	// The C handle is kept (retained until Fini, so wakers stay valid);
	// the Go side learns it on the loop thread at each run (xtcGoTask).
	var ct *C.xtc_task_t
	err := l.withC("xtc_task_spawn", func(c *C.xtc_loop_t) C.int {
		return C.xtc_go_task_spawn(c, C.uintptr_t(h), &ct)
	})
	if err != nil {
		l.dropHandle(h)
		return nil, err
	}
	return t, nil
}

// ParkOnTimer arms a wake-up after d (xtc_task_park_on_timer); the body
// must then return TaskPending. Only from the task's own body.
func (t *Task) ParkOnTimer(d time.Duration) error {
	if t == nil || t.c == nil {
		return &Error{Op: "xtc_task_park_on_timer", Code: ErrInval}
	}
	return mkerr("xtc_task_park_on_timer", int(C.xtc_task_park_on_timer(t.c, C.int64_t(d))))
}

// ParkOnFd arms a wake-up when fd is ready for interest (IORead|IOWrite);
// the body must then return TaskPending. Only from the task's own body.
func (t *Task) ParkOnFd(fd int, interest uint32) error {
	if t == nil || t.c == nil {
		return &Error{Op: "xtc_task_park_on_fd", Code: ErrInval}
	}
	return mkerr("xtc_task_park_on_fd", int(C.xtc_task_park_on_fd(t.c, C.int(fd), C.uint32_t(interest))))
}

// Waker returns a waker for t (xtc_task_waker).
func (t *Task) Waker() (Waker, error) {
	var w Waker
	if t == nil || t.c == nil {
		return w, &Error{Op: "xtc_task_waker", Code: ErrInval}
	}
	if err := mkerr("xtc_task_waker", int(C.xtc_task_waker(t.c, &w.c))); err != nil {
		return w, err
	}
	w.loop = t.loop
	return w, nil
}

// Waker makes a parked task runnable again; idempotent, from any
// goroutine; a wake while the task runs is latched.
type Waker struct {
	loop *Loop
	c    C.xtc_waker_t
}

// Wake wakes the task (xtc_waker_wake). ErrInval for a zero Waker or a
// finalised loop.
func (w Waker) Wake() error {
	if w.loop == nil {
		return &Error{Op: "xtc_waker_wake", Code: ErrInval}
	}
	return w.loop.withC("xtc_waker_wake", func(*C.xtc_loop_t) C.int { return C.xtc_waker_wake(&w.c) })
}

// runTask is the Go side of xtc_go_task_tramp (loop thread).
func runTask(t *Task) TaskResult {
	res := callGo(t.loop, TaskDone, func() TaskResult { return t.fn(t) })
	if res == TaskDone {
		t.done = true
		t.loop.dropHandle(t.h)
	}
	return res
}

// Timer is a one-shot timer whose callback is a Go function, run on the
// loop thread (xtc_timer_set).
type Timer struct {
	loop *Loop
	c    *C.xtc_timer_t
	h    cgo.Handle
	fn   func()
	done bool // fired or cancelled (owner thread only)
}

// TimerSet arms a timer on l firing fn no earlier than d from now. From any
// goroutine (posted to the loop thread when needed).
func TimerSet(l *Loop, d time.Duration, fn func()) (*Timer, error) {
	if fn == nil {
		return nil, &Error{Op: "xtc_timer_set", Code: ErrInval}
	}
	if l == nil {
		return nil, errClosed("xtc_timer_set")
	}
	t := &Timer{loop: l, fn: fn}
	var rc C.int
	err := l.exec("xtc_timer_set", func() {
		h, ok := l.addHandle(t)
		if !ok {
			rc = C.int(ErrInval)
			return
		}
		t.h = h
		rc = C.xtc_go_timer_set(l.c, C.int64_t(d), C.uintptr_t(h), &t.c)
		if rc != 0 {
			l.dropHandle(h)
		}
	})
	if err == nil {
		err = mkerr("xtc_timer_set", int(rc))
	}
	if err != nil {
		return nil, err
	}
	return t, nil
}

// Cancel stops the timer before it fires (xtc_timer_cancel). Cancelling a
// timer that fired or was cancelled is a no-op; ErrInval after Fini.
func (t *Timer) Cancel() error {
	if t == nil {
		return &Error{Op: "xtc_timer_cancel", Code: ErrInval}
	}
	var rc C.int
	err := t.loop.exec("xtc_timer_cancel", func() {
		if t.done {
			return
		}
		rc = C.xtc_timer_cancel(t.c)
		if rc == 0 {
			t.done = true
			t.loop.dropHandle(t.h)
		}
	})
	if err != nil {
		return err
	}
	return mkerr("xtc_timer_cancel", int(rc))
}

// fireTimer is the Go side of xtc_go_timer_tramp (loop thread).
func fireTimer(t *Timer) {
	if t.done {
		return
	}
	t.done = true
	t.loop.dropHandle(t.h)
	callGoVoid(t.loop, t.fn)
}

// The constants of types.go are spelled as numbers so the !cgo build has
// them too; these fail to compile if the C header ever disagrees.
var (
	_ = [1]struct{}{}[TaskDone-C.XTC_TASK_DONE]
	_ = [1]struct{}{}[TaskResched-C.XTC_TASK_RESCHED]
	_ = [1]struct{}{}[TaskPending-C.XTC_TASK_PENDING]
	_ = [1]struct{}{}[IORead-C.XTC_IO_READABLE]
	_ = [1]struct{}{}[IOWrite-C.XTC_IO_WRITABLE]
	_ = [1]struct{}{}[IOHup-C.XTC_IO_HUP]
	_ = [1]struct{}{}[IOErr-C.XTC_IO_ERR]
	_ = [1]struct{}{}[DownClean-C.XTC_DOWN_KIND_CLEAN]
	_ = [1]struct{}{}[DownExit-C.XTC_DOWN_KIND_EXIT]
	_ = [1]struct{}{}[DownSignal-C.XTC_DOWN_KIND_SIGNAL]
	_ = [1]struct{}{}[DownNoproc-C.XTC_DOWN_KIND_NOPROC]
	_ = [1]struct{}{}[DownNoconnection-C.XTC_DOWN_KIND_NOCONNECTION]
	_ = [1]struct{}{}[SlowWake-C.XTC_EXEC_SLOW_WAKE_NS]
)

// String describes the loop for debugging.
func (l *Loop) String() string {
	if l == nil || l.closed.Load() {
		return "xtc.Loop(closed)"
	}
	return fmt.Sprintf("xtc.Loop(%p)", l.c)
}
