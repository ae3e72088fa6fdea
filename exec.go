//go:build cgo

package xtc

/*
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>
#include "xtc.h"
#include "xtc_exec.h"
#include "gobridge_int.h"

// Exported from exec_cb.go (declarations only there).
extern void xtcGoStall(uintptr_t h, xtc_stall_info_t *info);
extern void xtcGoSubmit(uintptr_t h);

// Both trampolines run on a carrier's own stack (the run-end hook and the
// submission ring are served there, never on a fiber), with the Go-callback
// guard raised: no fiber switch or preemption while Go runs.
static void xtc_go_stall_tramp(xtc_loop_t *loop, xtc_task_t *task,
                               int64_t ran, int64_t budget, void *user)
{
	xtc_stall_info_t in;

	// the record is this run's (ended): identity, whole run time
	if (xtc_loop_stall_inflight(loop, &in) != 0 || in.task != task) {
		memset(&in, 0, sizeof(in));
		in.task = task;
		in.cpu_ns = in.off_cpu_ns = -1; // not measured
	}
	in.ran_ns = ran;
	in.budget_ns = budget;
	in.running = 0;
	xtc__gobridge_cb_enter();
	xtcGoStall((uintptr_t)user, &in);
	xtc__gobridge_cb_leave();
}

static void xtc_go_submit_tramp(void *user)
{
	xtc__gobridge_cb_enter();
	xtcGoSubmit((uintptr_t)user);
	xtc__gobridge_cb_leave();
}

static void xtc_go_set_stall_cb(xtc_loop_t *loop, uintptr_t h)
{
	xtc_loop_set_stall_cb(loop, h ? xtc_go_stall_tramp : NULL, (void *)h);
}

static int xtc_go_submit(xtc_exec_t *e, int idx, uintptr_t h, int64_t wait)
{
	if (wait == 0)
		return xtc_exec_submit(e, idx, xtc_go_submit_tramp, (void *)h);
	return xtc_exec_submit_wait(e, idx, xtc_go_submit_tramp, (void *)h, wait);
}

static int xtc_go_loop_is_exec(xtc_loop_t *loop)
{
	return loop != NULL && xtc__gobridge_loop_exec(loop) != NULL;
}

// A run on a C-created thread that rings an eventfd when it returns, so Go
// waits in its netpoller instead of in a blocking cgo call.
typedef struct xtc_go_runner {
	xtc_exec_t *e;
	int efd;
	int rc;
	pthread_t th;
} xtc_go_runner_t;

static void *xtc_go_run_thread(void *a)
{
	xtc_go_runner_t *r = a;
	uint64_t one = 1;
	ssize_t n;

	r->rc = xtc_exec_run(r->e);
	do
		n = write(r->efd, &one, sizeof(one));
	while (n < 0 && errno == EINTR);
	return NULL;
}

static int xtc_go_exec_start(xtc_exec_t *e, xtc_go_runner_t **out)
{
	xtc_go_runner_t *r = calloc(1, sizeof(*r));

	if (r == NULL)
		return XTC_E_NOMEM;
	r->e = e;
	r->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (r->efd < 0) {
		free(r);
		return XTC_E_RESOURCE;
	}
	if (pthread_create(&r->th, NULL, xtc_go_run_thread, r) != 0) {
		close(r->efd);
		free(r);
		return XTC_E_RESOURCE;
	}
	*out = r;
	return 0;
}

// The thread has rung the eventfd: join it (returns at once) and free.
static int xtc_go_exec_reap(xtc_go_runner_t *r)
{
	int rc;

	pthread_join(r->th, NULL);
	rc = r->rc;
	free(r);
	return rc;
}
*/
import "C"

import (
	"context"
	"fmt"
	"os"
	"runtime/cgo"
	"sync"
	"sync/atomic"
	"time"
)

// Exec is a multi-loop executor (xtc_exec_t): n loops, each driven by its
// own C-created carrier thread while the executor runs. Go code never runs
// on a carrier's fibers; Go callbacks (Submit functions, stall callbacks,
// TaskSpawn bodies) run on a carrier's own stack.
type Exec struct {
	c     *C.xtc_exec_t
	loops []*Loop

	mu      sync.RWMutex // guards c against Fini
	closed  atomic.Bool
	running atomic.Bool

	pmu    sync.Mutex
	panicv any // first panic of a Submit function

	run      atomic.Pointer[ExecRun] // the current run (Start)
	calls    atomic.Int64            // Go calls whose proc has not ended
	shutting atomic.Bool             // Close/Shutdown began: no new calls

	gc   atomic.Pointer[goCalls] // the Go front door's table (gocall.go)
	gcMu sync.Mutex

	x execExt // the service layer (exec_service.go)
}

// submitFn is what a Submit handle carries.
type submitFn struct {
	e  *Exec
	fn func()
}

// recordPanic keeps the first panic of a Go callback run by a carrier and
// stops the executor; Wait re-panics with it in the caller's goroutine.
func (e *Exec) recordPanic(v any) {
	e.pmu.Lock()
	if e.panicv == nil {
		e.panicv = v
	}
	e.pmu.Unlock()
	_ = e.Stop()
}

// takePanic returns (and clears) the first panic of a callback of this
// executor: a Submit function or a TaskSpawn body on one of its loops.
func (e *Exec) takePanic() any {
	e.pmu.Lock()
	p := e.panicv
	e.panicv = nil
	e.pmu.Unlock()
	for _, l := range e.loops {
		l.hmu.Lock()
		if p == nil {
			p = l.panicv
		}
		l.panicv = nil
		l.hmu.Unlock()
	}
	return p
}

// NewExec creates an executor with n loops (n <= 0: one per CPU) for a
// service, configured by opts (WithPreempt, WithStallWatch, ...): once
// started it serves until Close or Shutdown, idle or not (service mode
// on, unless WithServiceMode(false); steal backoff on, see
// SetStealBackoff). Create its classes (NewClass), batch
// groups (NewBatch) and mailboxes before Start. An option with a bad value
// or one this build or machine cannot honour fails NewExec (ErrInval,
// ErrNosys; the reason names the option). ExecInit is the thin
// constructor with the C defaults.
//
// After Close or Shutdown every method returns an error matching
// ErrClosed (getters return zero values).
func NewExec(n int, opts ...ExecOption) (*Exec, error) {
	e, err := ExecInit(n)
	if err != nil {
		return nil, err
	}
	if err := e.applyOptions(opts); err != nil {
		_ = e.Fini()
		return nil, err
	}
	return e, nil
}

// ExecInit creates an executor with n loops (xtc_exec_init); n <= 0 means
// one per CPU. Its runs end at quiescence unless SetServiceMode(true) (see
// NewExec).
func ExecInit(n int) (*Exec, error) {
	var c *C.xtc_exec_t
	if rc := C.xtc_exec_init(&c, C.int(n)); rc != 0 {
		return nil, mkerr("xtc_exec_init", int(rc))
	}
	e := &Exec{c: c}
	cnt := int(C.xtc_exec_n_loops(c))
	for i := 0; i < cnt; i++ {
		l := execLoop(C.xtc_exec_loop(c, C.int(i)))
		l.owner = e
		e.loops = append(e.loops, l)
	}
	return e, nil
}

// execLoop wraps a loop owned by an executor: thread-safe calls (ProcSpawn,
// TaskSpawn, Wake, Stop, class creation before the run) work; owner-only
// calls (Run, Fini, timers, SetYieldBudget) return ErrInval, because the
// loop belongs to its carrier.
func execLoop(c *C.xtc_loop_t) *Loop {
	l := &Loop{
		c:       c,
		reqs:    make(chan func()),
		quit:    make(chan struct{}),
		handles: map[cgo.Handle]struct{}{},
	}
	close(l.quit)
	return l
}

func (e *Exec) withC(op string, call func(c *C.xtc_exec_t) C.int) error {
	if e == nil {
		return errClosed(op)
	}
	return guardedCall(op, &e.mu, &e.closed, &e.c, call)
}

// NLoops returns the number of loops (0 for a nil or finalised Exec).
func (e *Exec) NLoops() int {
	if e == nil || e.closed.Load() {
		return 0
	}
	return len(e.loops)
}

// Loop returns loop i (xtc_exec_loop), or nil when i is out of range.
func (e *Exec) Loop(i int) *Loop {
	if e == nil || e.closed.Load() || i < 0 || i >= len(e.loops) {
		return nil
	}
	return e.loops[i]
}

// LoopStats returns relaxed snapshots of loop i's counters
// (xtc_exec_loop_stats); exact once Run has returned.
func (e *Exec) LoopStats(i int) (LoopStats, error) {
	var st C.xtc_loop_stats_t
	err := e.withC("xtc_exec_loop_stats", func(c *C.xtc_exec_t) C.int {
		return C.xtc_exec_loop_stats(c, C.int(i), &st)
	})
	return LoopStats{TasksRun: uint64(st.tasks_run), Steals: uint64(st.steals),
		Demotions: uint64(st.demotions), Aged: uint64(st.aged),
		Parks: uint64(st.parks), Wakes: uint64(st.wakes),
		WakeTotal: time.Duration(st.wake_ns),
		SlowWakes: uint64(st.slow_wakes),
		WakeMax:   time.Duration(st.wake_max_ns)}, err
}

// ExecRun is a running executor started by Start.
type ExecRun struct {
	e    *Exec
	done chan struct{}
	err  error
}

// Start runs the executor (xtc_exec_run) on a C-created thread and returns
// at once. No goroutine sits in a blocking cgo call meanwhile: the run
// signals its end through an eventfd that Go's netpoller watches. The
// carriers start spread over the CPUs the process may use and the kernel
// balances them from there (a placement, not a pinning: xtc_exec(3),
// Lifecycle).
func (e *Exec) Start() (*ExecRun, error) {
	if e == nil || e.closed.Load() || e.shutting.Load() {
		return nil, errClosed("xtc_exec_run")
	}
	return e.startRun()
}

// startRun is Start without the shutting check (Shutdown runs the executor
// to end its batch groups).
func (e *Exec) startRun() (*ExecRun, error) {
	var r *C.xtc_go_runner_t
	e.x.gate.Lock()
	if e.closed.Load() {
		e.x.gate.Unlock()
		return nil, errClosed("xtc_exec_run")
	}
	if !e.running.CompareAndSwap(false, true) {
		e.x.gate.Unlock()
		return nil, errReason("xtc_exec_run", ErrInval, "already running")
	}
	e.runStarting()
	e.mu.RLock()
	rc := C.xtc_go_exec_start(e.c, &r)
	e.mu.RUnlock()
	if rc != 0 {
		e.running.Store(false)
		e.runEnded()
		e.x.gate.Unlock()
		return nil, mkerr("xtc_exec_run", int(rc))
	}
	run := &ExecRun{e: e, done: make(chan struct{})}
	e.run.Store(run)
	e.x.gate.Unlock()
	f := os.NewFile(uintptr(r.efd), "xtc-exec-run")
	go func() {
		var b [8]byte
		for {
			// Non-blocking eventfd: the read parks this goroutine in
			// the netpoller until the run thread writes.
			if _, err := f.Read(b[:]); err == nil {
				break
			}
		}
		f.Close()
		run.err = mkerr("xtc_exec_run", int(C.xtc_go_exec_reap(r)))
		e.runEnded()
		e.running.Store(false)
		close(run.done)
	}()
	return run, nil
}

// Wait waits for the run to end (quiescence or Stop) and returns its
// result, or ctx's error when ctx ends first (the run goes on; call Stop
// and Wait again to end it). If a Go callback of the executor panicked,
// the run was stopped and Wait panics with the same value.
func (r *ExecRun) Wait(ctx context.Context) error {
	select {
	case <-r.done:
		if p := r.e.takePanic(); p != nil {
			panic(p)
		}
		return r.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Done is closed when the run has ended.
func (r *ExecRun) Done() <-chan struct{} { return r.done }

// Run runs the executor until quiescence or Stop (xtc_exec_run). It is
// Start followed by Wait(context.Background()).
func (e *Exec) Run() error {
	r, err := e.Start()
	if err != nil {
		return err
	}
	return r.Wait(context.Background())
}

// Stop ends a run from any goroutine (xtc_exec_stop).
func (e *Exec) Stop() error {
	return e.withC("xtc_exec_stop", func(c *C.xtc_exec_t) C.int { return C.xtc_exec_stop(c) })
}

// Fini frees the executor and its loops (xtc_exec_fini). ErrInval while
// it runs or twice.
func (e *Exec) Fini() error {
	if e == nil || e.closed.Load() {
		return errClosed("xtc_exec_fini")
	}
	if e.running.Load() {
		return errReason("xtc_exec_fini", ErrInval, "executor is running: Stop and Wait first, or Close")
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed.Load() {
		return errClosed("xtc_exec_fini")
	}
	for _, l := range e.loops {
		l.cmu.Lock()
	}
	rc := C.xtc_exec_fini(e.c)
	if rc == 0 {
		e.closed.Store(true)
		e.c = nil
		if g := e.gc.Load(); g != nil {
			g.finish() // calls the fini dropped unrun: ErrAborted
		}
	}
	for _, l := range e.loops {
		if rc == 0 {
			l.closed.Store(true)
			l.c = nil
		}
		l.cmu.Unlock()
	}
	if rc != 0 {
		return mkerr("xtc_exec_fini", int(rc))
	}
	for _, l := range e.loops {
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
	}
	return nil
}

// Close ends the executor (io.Closer): no new calls (ErrClosed), its
// batch groups are cancelled (their requests end with ErrAborted), the
// run is stopped and waited for, calls still in flight complete with
// ErrAborted (their procs are dropped), and the executor is finalised.
// Any goroutine, not from a callback of the executor. A second Close
// returns ErrClosed. A Go callback's panic recorded by the run resurfaces
// here as it would from Wait.
func (e *Exec) Close() error {
	return e.Shutdown(nil)
}

// Shutdown ends the executor gracefully: new calls and batch requests are
// refused (ErrClosed) at once; then, until ctx ends, the batch groups it
// owns drain (accepted requests finish) and the Go calls in flight
// return; then it does what Close does (groups still busy are cancelled,
// calls still running are killed), frees the groups and finalises the
// executor. It returns ctx.Err() when ctx ended first (the executor is
// closed all the same). A nil ctx means Close. Its involuntary
// preemption (WithPreempt) is given back when the run ends.
func (e *Exec) Shutdown(ctx context.Context) error {
	if e == nil || e.closed.Load() || !e.shutting.CompareAndSwap(false, true) {
		return errClosed("xtc.Exec.Close")
	}
	werr := e.shutdownBatches(ctx)
	if ctx != nil && werr == nil {
		tick := time.NewTicker(time.Millisecond)
		for e.calls.Load() > 0 && werr == nil {
			select {
			case <-ctx.Done():
				werr = ctx.Err()
			case <-tick.C:
			}
		}
		tick.Stop()
	}
	if run := e.run.Load(); run != nil && e.running.Load() {
		_ = e.Stop()
		<-run.done
		if p := e.takePanic(); p != nil {
			defer panic(p)
		}
	}
	e.destroyBatches()
	if err := e.Fini(); err != nil {
		return err
	}
	return werr
}

// Submit runs fn once on carrier loopIdx's own stack (xtc_exec_submit);
// loopIdx < 0 picks one round-robin. The submission ring is bounded: when
// it is full, Submit returns ErrAgain at once. fn must not block for long;
// a panic in fn stops the executor and resurfaces from Wait/Run.
func (e *Exec) Submit(loopIdx int, fn func()) error {
	return e.submit(loopIdx, fn, 0)
}

// SubmitWithin is Submit that waits for room in a full ring, up to timeout
// (< 0 forever), then returns ErrAgain (xtc_exec_submit_wait). (Named
// apart from the package's SubmitWait, which waits for a C function's
// result.)
func (e *Exec) SubmitWithin(loopIdx int, fn func(), timeout time.Duration) error {
	if timeout == 0 {
		timeout = 1 // 0 would mean "no wait" in the C call
	}
	return e.submit(loopIdx, fn, timeout)
}

func (e *Exec) submit(loopIdx int, fn func(), wait time.Duration) error {
	if fn == nil {
		return &Error{Op: "xtc_exec_submit", Code: ErrInval}
	}
	h := cgo.NewHandle(&submitFn{e: e, fn: fn})
	err := e.withC("xtc_exec_submit", func(c *C.xtc_exec_t) C.int {
		return C.xtc_go_submit(c, C.int(loopIdx), C.uintptr_t(h), C.int64_t(wait))
	})
	if err != nil {
		h.Delete()
	}
	return err
}

// SetServiceMode turns the idle auto-stop off (on) or back on.
//
// Deprecated: NewExec serves by default; WithServiceMode(false) for runs that
// end at their first idle moment.
func (e *Exec) SetServiceMode(on bool) {
	_ = e.withC("", func(c *C.xtc_exec_t) C.int { C.xtc_exec_set_service_mode(c, cbool(on)); return 0 })
}

// ServiceMode reports the service-mode knob.
func (e *Exec) ServiceMode() bool {
	return e.getKnob(func(c *C.xtc_exec_t) C.int { return C.xtc_exec_get_service_mode(c) })
}

// SetEagerRebalance makes idle loops steal migratable work before parking
// even when they still own parked procs or timers, and wakes a parked peer
// when migratable work is queued. Off (the default, libxtc's contract), a
// loop steals only once it owns nothing that will wake it.
func (e *Exec) SetEagerRebalance(on bool) {
	_ = e.withC("", func(c *C.xtc_exec_t) C.int { C.xtc_exec_set_eager_rebalance(c, cbool(on)); return 0 })
}

// EagerRebalance reports the eager-rebalance knob.
func (e *Exec) EagerRebalance() bool {
	return e.getKnob(func(c *C.xtc_exec_t) C.int { return C.xtc_exec_get_eager_rebalance(c) })
}

// SetStealBackoff grows an idle loop's steal-poll interval from 1 ms to
// 32 ms (saves idle CPU: each poll wakes a parked carrier). On by default
// for NewExec, off for ExecInit (the C default). Off, an idle carrier
// finds migratable work queued on a busy peer within 1 ms; on, within
// 32 ms after a long idle spell (WithEagerRebalance wakes a peer at once
// instead).
func (e *Exec) SetStealBackoff(on bool) {
	_ = e.withC("", func(c *C.xtc_exec_t) C.int { C.xtc_exec_set_steal_backoff(c, cbool(on)); return 0 })
}

// StealBackoff reports the steal-backoff knob.
func (e *Exec) StealBackoff() bool {
	return e.getKnob(func(c *C.xtc_exec_t) C.int { return C.xtc_exec_get_steal_backoff(c) })
}

// SetSpin makes an idle carrier poll its inputs for up to d (counted from
// when it ran out of work) before it parks (xtc_exec_set_spin); 0, the
// default, keeps the adaptive spin only. A latency-critical service on a
// machine whose wake-ups are slow (a virtual machine) trades a CPU per idle
// carrier for them: on a 2-vCPU guest the median 0.5 µs request at 10% load
// waited 12 µs with parks and 2 µs with a 100 µs spin. Loop timers, stealing,
// Stop and quiescence are served during the spin. Any time, any goroutine;
// ErrInval for d < 0.
func (e *Exec) SetSpin(d time.Duration) error {
	return e.withC("xtc_exec_set_spin", func(c *C.xtc_exec_t) C.int {
		return C.xtc_exec_set_spin(c, C.int64_t(d))
	})
}

// Spin reports the SetSpin knob (0 for a closed executor).
func (e *Exec) Spin() time.Duration {
	var d time.Duration
	_ = e.withC("", func(c *C.xtc_exec_t) C.int {
		if v := C.xtc_exec_get_spin(c); v > 0 {
			d = time.Duration(v)
		}
		return 0
	})
	return d
}

// SetPreempt sets every carrier's preemption slice (xtc_exec_set_preempt);
// setup-only: ErrAgain once the executor runs. ErrNosys when the build has
// no tick source.
//
// Deprecated: give NewExec WithPreempt(slice) (involuntary, held while the
// executor runs) or WithClockCheckedPreempt(slice).
func (e *Exec) SetPreempt(slice time.Duration) error {
	if e != nil && e.running.Load() {
		return errReason("xtc_exec_set_preempt", ErrAgain, "setup-only: call before Start")
	}
	return e.withC("xtc_exec_set_preempt", func(c *C.xtc_exec_t) C.int {
		return C.xtc_exec_set_preempt(c, C.int64_t(slice))
	})
}

// SetPreemptCoop makes the slice clock-checked (xtc_exec_set_preempt_coop):
// it is enforced only at preemption points (xtc_yield_if_due,
// xtc_yield_check, a plain xtc_yield after a slice), which compare the clock
// with the run's slice end, and a slice end still demotes the run. No timer,
// no signal, no monitor: nothing interrupts a carrier, so C code without
// such points is never cut, unless the involuntary path is on
// (PreemptSetInvoluntary): then the signal trigger stays as a backstop at 8
// times the slice. For code that has the points, where an interrupt is
// expensive: on a 2-vCPU virtual machine one involuntary preemption cost its
// carrier 45-57 µs. Setup-only: ErrAgain once the executor runs.
//
// Deprecated: give NewExec WithClockCheckedPreempt(slice).
func (e *Exec) SetPreemptCoop(on bool) error {
	if e != nil && e.running.Load() {
		return errReason("xtc_exec_set_preempt_coop", ErrAgain, "setup-only: call before Start")
	}
	return e.withC("xtc_exec_set_preempt_coop", func(c *C.xtc_exec_t) C.int {
		return C.xtc_exec_set_preempt_coop(c, cbool(on))
	})
}

// PreemptCoop reports the SetPreemptCoop knob.
func (e *Exec) PreemptCoop() bool {
	return e.getKnob(func(c *C.xtc_exec_t) C.int { return C.xtc_exec_get_preempt_coop(c) })
}

// SetStallBudget arms the stall watchdog of every loop
// (xtc_exec_set_stall_budget); 0 turns it off. Any time, any goroutine.
func (e *Exec) SetStallBudget(d time.Duration) error {
	return e.withC("xtc_exec_set_stall_budget", func(c *C.xtc_exec_t) C.int {
		C.xtc_exec_set_stall_budget(c, C.int64_t(d))
		return 0
	})
}

func (e *Exec) getKnob(get func(c *C.xtc_exec_t) C.int) bool {
	on := false
	_ = e.withC("", func(c *C.xtc_exec_t) C.int { on = get(c) != 0; return 0 })
	return on
}

func cbool(b bool) C.int {
	if b {
		return 1
	}
	return 0
}

// ExecLoopID returns the executor loop index of the calling carrier
// (xtc_exec_loop_id), -1 off a carrier: meaningful inside Submit functions
// and task bodies.
func ExecLoopID() int { return int(C.xtc_exec_loop_id()) }

// ShardID is xtc_shard_id: the calling carrier's shard, -1 off a carrier.
func ShardID() int { return int(C.xtc_shard_id()) }

// ShardCount is xtc_shard_count: the number of shards of the calling
// carrier's executor.
func ShardCount() int { return int(C.xtc_shard_count()) }

// ---- scheduling classes ----------------------------------------------------

// ExecClassCreate creates a scheduling class on loop (xtc_exec_class_create):
// shares in 1..1000 weight its CPU against the loop's other classes and the
// default lane (100 shares); a non-zero latency tightens the loop's yield
// budget to that bound. ErrInval for bad arguments, ErrAgain past 16
// classes on a loop. For an executor loop, create classes before the run.
func ExecClassCreate(loop *Loop, shares int, latency time.Duration) (*LoopClass, error) {
	var cls C.xtc_exec_class_t
	var rc C.int
	op := "xtc_exec_class_create"
	if loop == nil {
		return nil, errClosed(op)
	}
	call := func() {
		rc = C.xtc_exec_class_create(loop.c, C.int(shares), C.int64_t(latency), &cls)
	}
	loop.cmu.RLock()
	if loop.closed.Load() {
		loop.cmu.RUnlock()
		return nil, errClosed(op)
	}
	isExec := C.xtc_go_loop_is_exec(loop.c) != 0
	if isExec && loop.owner != nil && loop.owner.running.Load() {
		loop.cmu.RUnlock()
		return nil, errReason(op, ErrAgain, "setup-only: create an executor loop's classes before Start")
	}
	if shares < 1 || shares > 1000 {
		loop.cmu.RUnlock()
		return nil, errReason(op, ErrInval, fmt.Sprintf("shares must be in 1..1000, got %d", shares))
	}
	if latency < 0 {
		loop.cmu.RUnlock()
		return nil, errReason(op, ErrInval, fmt.Sprintf("latency must be >= 0, got %v", latency))
	}
	if isExec {
		call()
		loop.cmu.RUnlock()
	} else {
		loop.cmu.RUnlock()
		if err := loop.exec(op, call); err != nil {
			return nil, err
		}
	}
	if rc != 0 {
		return nil, mkerr(op, int(rc))
	}
	return &LoopClass{c: cls, l: loop}, nil
}

// Shares returns the class's shares (0 for nil or after its loop's Fini).
func (c *LoopClass) Shares() int {
	var v C.int
	c.with(func(cls C.xtc_exec_class_t) { v = C.xtc_exec_class_shares(cls) })
	return int(v)
}

// Latency returns the class's latency bound (0 for nil, none, or after
// its loop's Fini).
func (c *LoopClass) Latency() time.Duration {
	var v C.int64_t
	c.with(func(cls C.xtc_exec_class_t) { v = C.xtc_exec_class_latency(cls) })
	return time.Duration(v)
}

// Runs returns how many times a task of the class was picked.
func (c *LoopClass) Runs() uint64 {
	var v C.uint64_t
	c.with(func(cls C.xtc_exec_class_t) { v = C.xtc_exec_class_runs(cls) })
	return uint64(v)
}

// VRuntime returns the class's weighted virtual runtime.
func (c *LoopClass) VRuntime() uint64 {
	var v C.uint64_t
	c.with(func(cls C.xtc_exec_class_t) { v = C.xtc_exec_class_vruntime(cls) })
	return uint64(v)
}

// CPU returns the measured run time charged to the class.
func (c *LoopClass) CPU() time.Duration {
	var v C.uint64_t
	c.with(func(cls C.xtc_exec_class_t) { v = C.xtc_exec_class_cpu_ns(cls) })
	return time.Duration(v)
}

// ---- stall watchdog ----------------------------------------------------------

// stallCb is the one handle per loop that C holds for its Go stall
// callback; SetStallFunc swaps fn in place, so replacing the callback
// never leaves a handle behind (it is deleted at Fini).
type stallCb struct {
	l    *Loop
	h    cgo.Handle
	fn   atomic.Pointer[StallFunc]
	stop chan struct{} // closes the in-flight poller (Fini)
}

// SetStallBudget arms this loop's stall watchdog (xtc_loop_set_stall_budget);
// 0 turns it off. Any goroutine.
func (l *Loop) SetStallBudget(d time.Duration) error {
	return l.withC("xtc_loop_set_stall_budget", func(c *C.xtc_loop_t) C.int {
		C.xtc_loop_set_stall_budget(c, C.int64_t(d))
		return 0
	})
}

// SetStallFunc installs fn as the loop's stall callback
// (xtc_loop_set_stall_cb) and starts reporting runs in flight (see
// StallFunc); nil restores the default report on stderr (at run end).
// Any goroutine; calling it again replaces the callback.
func (l *Loop) SetStallFunc(fn StallFunc) error {
	if l == nil {
		return errClosed("xtc_loop_set_stall_cb")
	}
	l.hmu.Lock()
	if l.handles == nil {
		l.hmu.Unlock()
		return errClosed("xtc_loop_set_stall_cb")
	}
	s := l.stall
	if s == nil {
		s = &stallCb{l: l, stop: make(chan struct{})}
		s.h = cgo.NewHandle(s)
		l.handles[s.h] = struct{}{}
		l.stall = s
		go s.poll()
	}
	l.hmu.Unlock()
	var h cgo.Handle
	if fn != nil {
		s.fn.Store(&fn)
		h = s.h
	} else {
		s.fn.Store(nil)
	}
	return l.withC("xtc_loop_set_stall_cb", func(c *C.xtc_loop_t) C.int {
		C.xtc_go_set_stall_cb(c, C.uintptr_t(h))
		return 0
	})
}

// StallInFlight returns the run the stall watchdog watches on the loop
// (xtc_loop_stall_inflight): the one in flight (InFlight, Ran so far),
// else the last one that ended (Ran = its whole run), with Started, its
// start on the ClockMono clock. Any goroutine, while a stall budget is or
// was set. ErrNotfound before the first watched run, ErrClosed.
func (l *Loop) StallInFlight() (StallReport, error) {
	var in C.xtc_stall_info_t
	if err := l.withC("xtc_loop_stall_inflight", func(c *C.xtc_loop_t) C.int {
		return C.xtc_loop_stall_inflight(c, &in)
	}); err != nil {
		return StallReport{}, err
	}
	r := stallReportC(&in)
	r.InFlight = in.running != 0
	r.Started = time.Duration(in.started_ns)
	return r, nil
}

func (l *Loop) stallInflight() (StallReport, bool) {
	r, err := l.StallInFlight()
	return r, err == nil
}

func stallReportC(in *C.xtc_stall_info_t) StallReport {
	r := StallReport{Pid: pidFromC(in.pid), Ran: time.Duration(in.ran_ns),
		Budget: time.Duration(in.budget_ns), Run: uint64(in.run),
		CPU: time.Duration(in.cpu_ns), OffCPU: time.Duration(in.off_cpu_ns)}
	if in.name != nil {
		r.Name = C.GoString(in.name)
	}
	return r
}

// poll is the in-flight watcher of one loop: every quarter budget (at
// least 1 ms; 50 ms while no budget is set) it looks at the run in flight
// and reports an over-budget one once. It parks on a Go timer between
// looks, never on an OS thread, and ends at the loop's Fini.
func (s *stallCb) poll() {
	var reported uint64
	wait := 50 * time.Millisecond
	t := time.NewTimer(wait)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
		}
		wait = 50 * time.Millisecond
		if fn := s.fn.Load(); fn != nil {
			if r, ok := s.l.stallInflight(); ok && r.Budget > 0 {
				if wait = r.Budget / 4; wait < time.Millisecond {
					wait = time.Millisecond
				}
				if r.InFlight && r.Ran >= r.Budget && r.Run != reported {
					reported = r.Run
					callGoVoid(s.l, func() { (*fn)(s.l, r) })
				}
			}
		}
		t.Reset(wait)
	}
}

// end stops the poller (Fini; with hmu held).
func (s *stallCb) end() { close(s.stop) }

// StallCount returns how many runs overran the budget (xtc_loop_stall_count).
func (l *Loop) StallCount() uint64 {
	var n C.uint64_t
	_ = l.withC("xtc_loop_stall_count", func(c *C.xtc_loop_t) C.int {
		n = C.xtc_loop_stall_count(c)
		return 0
	})
	return uint64(n)
}
