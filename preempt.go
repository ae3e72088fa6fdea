//go:build cgo

package xtc

// Preemption wrappers (xtc_preempt.h, xtc_fn.h's adaptive quantum).
//
// What runs where: preemption applies to C code running on fibers of an
// executor whose slice is set (Exec.SetPreempt) — typically a C kernel that
// never yields, submitted with Submit or ProcSpawn — and, by default, only
// to C code declared preemptible (PreemptDeclared): a C library is never
// interrupted in the middle of a call. Go code is never
// preempted by xtc: Go never runs on a fiber stack, and while a Go callback
// runs on a carrier the runtime withdraws that carrier's deadline, so no
// xtc signal lands in Go code. The preemption signal is a real-time signal
// (SIGRTMIN+3 by default); never pass it to signal.Ignore, which would
// replace xtc's handler.

/*
#include <stdint.h>
#include <stdlib.h>
#include "xtc.h"
#include "xtc_preempt.h"
#include "xtc_fn.h"
#include "xtc_exec.h"

static int xtc_go_preempt_map_info(int *n_rt, int *n_files);
int xtc__preempt_map_info(int *n_rt, int *n_files);
static int xtc_go_preempt_map_info(int *n_rt, int *n_files)
{
	return xtc__preempt_map_info(n_rt, n_files);
}
static int xtc_go_preempt_preemptible(uintptr_t pc)
{
	return xtc_preempt_preemptible((const void *)pc);
}
static int xtc_go_preempt_declare(uintptr_t lo, uintptr_t hi, int on)
{
	return on ? xtc_preempt_declare_preemptible((const void *)lo, (const void *)hi)
	          : xtc_preempt_undeclare_preemptible((const void *)lo, (const void *)hi);
}
*/
import "C"

import (
	"sync"
	"time"
	"unsafe"
)

// PreemptStats are the preemption counters (xtc_preempt_stats_t).
type PreemptStats struct {
	Signals     uint64 // preemption signals received
	Ticks       uint64 // signal ticks observed
	RingTicks   uint64 // io_uring tick-ring ticks
	Preemptions uint64 // involuntary yields performed
	Deferrals   uint64 // signals that found an unsafe point (libc, runtime, ...)
	Honoured    uint64 // deferred preemptions taken later at a safe boundary
	Stale       uint64 // signals for a run that had already ended
	RefusedGoCb uint64 // deferrals because a Go callback was active
	// The trigger (process-wide, filled by PreemptStatsGlobal).
	TimerFires     uint64 // carrier slice-timer expiries that found a run due
	TimerEarly     uint64 // expiries before the current run's deadline
	TimerArms      uint64 // carrier timer (re)arms
	Direct         uint64 // producers that signalled an overdue run
	TimerFallbacks uint64 // carriers without a slice timer (monitor path)
	CostNs         uint64 // measured cost of one preemption (EWMA)
	// Deferrals by reason (and RefusedGoCb above).
	RefusedCtx       uint64 // the carrier was in its own scheduler code
	RefusedNoPreempt uint64 // a no-preempt region
	RefusedStack     uint64 // stack pointer outside the fiber's stack
	RefusedPC        uint64 // code not declared preemptible (PreemptPolicy), the runtime, an unsafe range
	// The overhead budget (PreemptSetBudget).
	OverheadNs uint64 // preemption cost the budget weighed
	ArmNs      uint64 // time in the carriers' own timer arms
	OwnArms    uint64 // those arms
	Stretches  uint64 // budget windows that lengthened the slice
	StretchMax uint64 // largest slice multiplier reached (0: none)
	// The tick net: expiries of a carrier's CPU-clock timer (they ride the
	// kernel tick) that found its run overdue.
	TickNets uint64
	// Safety (PreemptPolicy): deferrals because the fiber held a lock, and
	// runs reported for refusing preemption for a second (a carrier
	// blocked in a lock wait, or a long call into code not declared
	// preemptible; one line on stderr each).
	RefusedLock    uint64
	BlockedReports uint64
}

func statsFromC(s *C.xtc_preempt_stats_t) PreemptStats {
	return PreemptStats{
		Signals:     uint64(s.signals),
		Ticks:       uint64(s.ticks),
		RingTicks:   uint64(s.ring_ticks),
		Preemptions: uint64(s.preemptions),
		Deferrals:   uint64(s.deferrals),
		Honoured:    uint64(s.honoured),
		Stale:       uint64(s.stale),
		RefusedGoCb: uint64(s.refused_gocb),

		TimerFires:     uint64(s.timer_fires),
		TimerEarly:     uint64(s.timer_early),
		TimerArms:      uint64(s.timer_arms),
		Direct:         uint64(s.direct),
		TimerFallbacks: uint64(s.timer_fallbacks),
		CostNs:         uint64(s.cost_ns),

		RefusedCtx:       uint64(s.refused_ctx),
		RefusedNoPreempt: uint64(s.refused_nopreempt),
		RefusedStack:     uint64(s.refused_stack),
		RefusedPC:        uint64(s.refused_pc),

		OverheadNs: uint64(s.overhead_ns),
		ArmNs:      uint64(s.arm_ns),
		OwnArms:    uint64(s.own_arms),
		Stretches:  uint64(s.stretches),
		StretchMax: uint64(s.stretch_max),

		TickNets: uint64(s.tick_nets),

		RefusedLock:    uint64(s.refused_lock),
		BlockedReports: uint64(s.blocked_reports),
	}
}

// PreemptSetBudget sets the preemption overhead budget in percent of a
// carrier's time (xtc_preempt_set_budget, default 20): a carrier that is
// nearly saturated and spends more than that on preemption lengthens its
// slice (doubling, up to 64x) until it fits, and shortens it again when
// the carrier has room. 0 applies slices as set whatever they cost.
// Process-wide, any goroutine, any time. ErrInval outside 0..100.
func PreemptSetBudget(percent int) error {
	return mkerr("xtc_preempt_set_budget", int(C.xtc_preempt_set_budget(C.int(percent))))
}

// PreemptBudget returns the overhead budget in percent
// (xtc_preempt_get_budget).
func PreemptBudget() int { return int(C.xtc_preempt_get_budget()) }

// PreemptArm arms the preemption tick on the calling OS thread
// (xtc_preempt_arm): the thread ticks every interval while it runs. Go
// moves goroutines between threads, so call it only with
// runtime.LockOSThread held and PreemptDisarm before unlocking; executor
// carriers arm themselves (Exec.SetPreempt), which is what programs
// normally use. ErrInval for interval <= 0, ErrNosys without a tick source.
func PreemptArm(interval time.Duration) error {
	return mkerr("xtc_preempt_arm", int(C.xtc_preempt_arm(C.int64_t(interval))))
}

// PreemptDisarm stops the calling thread's tick (xtc_preempt_disarm); a
// no-op when it is not armed.
func PreemptDisarm() error {
	return mkerr("xtc_preempt_disarm", int(C.xtc_preempt_disarm()))
}

// PreemptSetInvoluntary turns the involuntary path on or off, process-wide
// (xtc_preempt_set_involuntary): with it, C code that never reaches a yield
// point is time-sliced by redirecting it, at a safe point, to a yield that
// saves and restores every register. It is an override on top of the
// executors built WithPreempt, which hold the path on while they run:
// PreemptSetInvoluntary(false) does not turn it off under them.
//
// Deprecated: give the executor WithPreempt(slice) (NewExec), which
// applies it while the executor runs and gives it back at Close.
func PreemptSetInvoluntary(on bool) {
	involSetUser(on)
}

// PreemptSetPolicy chooses which C code involuntary preemption may
// interrupt, process-wide, at any time (xtc_preempt_set_policy; the
// default is PreemptDeclared, the environment variable XTC_PREEMPT_POLICY
// sets the initial one). ErrInval for an unknown policy.
func PreemptSetPolicy(p PreemptPolicy) error {
	return mkerr("xtc_preempt_set_policy", int(C.xtc_preempt_set_policy(C.int(p))))
}

// PreemptGetPolicy returns the policy in force (xtc_preempt_get_policy).
func PreemptGetPolicy() PreemptPolicy { return PreemptPolicy(C.xtc_preempt_get_policy()) }

// PreemptAllowObject declares a loaded C library safe to preempt anywhere,
// by the prefix of its file's base name ("libz.so"), for objects loaded
// later too (xtc_preempt_allow_object). Allow only a library that takes no
// lock a fiber could be cut with and keeps no thread-local state across
// calls. ErrInval for "", ErrResource past 16 names.
func PreemptAllowObject(name string) error {
	if name == "" {
		return &Error{Op: "xtc_preempt_allow_object", Code: ErrInval}
	}
	cs := C.CString(name)
	defer C.free(unsafe.Pointer(cs))
	return mkerr("xtc_preempt_allow_object", int(C.xtc_preempt_allow_object(cs)))
}

// PreemptDeclare declares the code range [lo, hi) preemptible
// (xtc_preempt_declare_preemptible): JIT code or other anonymous executable
// memory a C library produced, which belongs to no loaded object. Undeclare
// it (PreemptUndeclare) before the memory is freed. ErrInval for an empty
// range, ErrResource past 64 ranges.
func PreemptDeclare(lo, hi uintptr) error {
	return mkerr("xtc_preempt_declare_preemptible",
		int(C.xtc_go_preempt_declare(C.uintptr_t(lo), C.uintptr_t(hi), 1)))
}

// PreemptUndeclare removes a range PreemptDeclare added
// (xtc_preempt_undeclare_preemptible); ErrNotfound if it was not declared.
func PreemptUndeclare(lo, hi uintptr) error {
	return mkerr("xtc_preempt_undeclare_preemptible",
		int(C.xtc_go_preempt_declare(C.uintptr_t(lo), C.uintptr_t(hi), 0)))
}

// PreemptPreemptible reports whether a fiber may be interrupted at the C
// code address pc (a C function pointer) under the current policy
// (xtc_preempt_preemptible): a program can check that its kernels are
// declared.
func PreemptPreemptible(pc unsafe.Pointer) bool {
	return C.xtc_go_preempt_preemptible(C.uintptr_t(uintptr(pc))) != 0
}

// PreemptSupported reports whether a tick source exists
// (xtc_preempt_supported).
func PreemptSupported() bool { return C.xtc_preempt_supported() != 0 }

// PreemptInvoluntarySupported reports whether the involuntary path exists
// here (Linux x86-64 and aarch64).
func PreemptInvoluntarySupported() bool {
	return C.xtc_preempt_involuntary_supported() != 0
}

// PreemptTicks returns the ticks the calling thread observed since it was
// armed (xtc_preempt_ticks).
func PreemptTicks() uint64 { return uint64(C.xtc_preempt_ticks()) }

// PreemptTickPending reports and consumes a pending tick of the calling
// thread (xtc_preempt_tick_pending).
func PreemptTickPending() bool { return C.xtc_preempt_tick_pending() != 0 }

// PreemptSignal returns the real-time signal number used for preemption.
func PreemptSignal() int { return int(C.xtc_preempt_signal()) }

// PreemptSetSignal picks the real-time signal (>= SIGRTMIN+3) before the
// first arm (xtc_preempt_set_signal): ErrRange below it, ErrAgain once armed.
func PreemptSetSignal(sig int) error {
	return mkerr("xtc_preempt_set_signal", int(C.xtc_preempt_set_signal(C.int(sig))))
}

// PreemptStatsGlobal sums the counters of every thread that ever armed and
// returns the number of signals the monitor sent
// (xtc_preempt_stats_global).
func PreemptStatsGlobal() (PreemptStats, uint64) {
	var s C.xtc_preempt_stats_t
	var sent C.uint64_t
	C.xtc_preempt_stats_global(&s, &sent)
	return statsFromC(&s), uint64(sent)
}

// preemptMapInfo reports how many runtime code ranges the preemptible-code
// map knows and from how many runtime source files (rtcode_int.h); for
// tests.
func preemptMapInfo() (nRanges, nFiles int, ok bool) {
	var a, b C.int
	rc := C.xtc_go_preempt_map_info(&a, &b)
	return int(a), int(b), rc == 0
}

// QuantumOpts configures the adaptive quantum controller
// (xtc_fn_quantum_opts_t); zero fields take the defaults (5 us .. 1 ms,
// start 100 us, period 10 s, load thresholds 0.9 / 0.1, heavy tail when
// the tail index is below 2, 4096 samples, 1 worker).
type QuantumOpts struct {
	Min, Max, Initial, Period time.Duration
	LoadHigh, LoadLow         float64
	AlphaHeavy                float64
	Window                    int
	Workers                   int
}

// Quantum is LibPreemptible's adaptive time-quantum controller
// (xtc_fn_quantum_t): it watches recent service times (their tail index)
// and the load, and shortens the quantum under load with heavy tails,
// lengthens it when load is low or the tail is light.
type Quantum struct {
	// mu keeps c alive while a method uses it: Close takes it for writing,
	// so a concurrent Record/Get/... never reaches the freed controller.
	mu sync.RWMutex
	c  *C.xtc_fn_quantum_t
}

// NewQuantum creates a controller (xtc_fn_quantum_create). ErrInval for a
// negative field, ErrRange for Min > Max or LoadLow > LoadHigh.
func NewQuantum(o QuantumOpts) (*Quantum, error) {
	if o.Window < 0 || o.Workers < 0 {
		return nil, &Error{Op: "xtc_fn_quantum_create", Code: ErrInval}
	}
	co := C.xtc_fn_quantum_opts_t{
		min_ns:      C.int64_t(o.Min),
		max_ns:      C.int64_t(o.Max),
		initial_ns:  C.int64_t(o.Initial),
		period_ns:   C.int64_t(o.Period),
		load_high:   C.double(o.LoadHigh),
		load_low:    C.double(o.LoadLow),
		alpha_heavy: C.double(o.AlphaHeavy),
		window:      C.unsigned(o.Window),
		workers:     C.int(o.Workers),
	}
	var c *C.xtc_fn_quantum_t
	if rc := C.xtc_fn_quantum_create(&co, &c); rc != 0 {
		return nil, mkerr("xtc_fn_quantum_create", int(rc))
	}
	return &Quantum{c: c}, nil
}

// Close frees the controller (xtc_fn_quantum_destroy), detaching it from
// executors first; concurrent methods and a second Close are safe: after
// it, methods return an error matching ErrClosed (getters zero values).
func (q *Quantum) Close() {
	if q == nil {
		return
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.c != nil {
		C.xtc_fn_quantum_destroy(q.c)
		q.c = nil
	}
}

// use calls f with the live controller (read-locked); false for nil or
// closed.
func (q *Quantum) use(f func(c *C.xtc_fn_quantum_t)) bool {
	if q == nil {
		return false
	}
	q.mu.RLock()
	defer q.mu.RUnlock()
	if q.c == nil {
		return false
	}
	f(q.c)
	return true
}

// Record adds one request's service time.
func (q *Quantum) Record(service time.Duration) error {
	return q.call("xtc_fn_quantum_record", func(c *C.xtc_fn_quantum_t) C.int {
		return C.xtc_fn_quantum_record(c, C.int64_t(service))
	})
}

// AddBusy adds time spent serving, for the measured load.
func (q *Quantum) AddBusy(d time.Duration) error {
	return q.call("xtc_fn_quantum_add_busy", func(c *C.xtc_fn_quantum_t) C.int {
		return C.xtc_fn_quantum_add_busy(c, C.int64_t(d))
	})
}

// SetLoad fixes the load (fraction of capacity) used by the next updates;
// a negative value goes back to measuring busy time.
func (q *Quantum) SetLoad(load float64) error {
	return q.call("xtc_fn_quantum_set_load", func(c *C.xtc_fn_quantum_t) C.int {
		return C.xtc_fn_quantum_set_load(c, C.double(load))
	})
}

// call runs an int-returning C function on the live controller; ErrClosed
// for nil or closed.
func (q *Quantum) call(op string, f func(c *C.xtc_fn_quantum_t) C.int) error {
	var rc C.int
	if !q.use(func(c *C.xtc_fn_quantum_t) { rc = f(c) }) {
		return errClosed(op)
	}
	return mkerr(op, int(rc))
}

// Update runs the controller now and returns the new quantum.
func (q *Quantum) Update() (time.Duration, error) {
	var v int64
	if !q.use(func(c *C.xtc_fn_quantum_t) { v = int64(C.xtc_fn_quantum_update(c)) }) {
		return 0, errClosed("xtc_fn_quantum_update")
	}
	if v < 0 {
		return 0, mkerr("xtc_fn_quantum_update", int(v))
	}
	return time.Duration(v), nil
}

// Get returns the current quantum (0 for a nil or closed controller).
func (q *Quantum) Get() time.Duration {
	var v C.int64_t
	q.use(func(c *C.xtc_fn_quantum_t) { v = C.xtc_fn_quantum_get(c) })
	return time.Duration(v)
}

// TailIndex returns the last Hill estimate of the service-time tail index.
func (q *Quantum) TailIndex() float64 {
	var v C.double
	q.use(func(c *C.xtc_fn_quantum_t) { v = C.xtc_fn_quantum_tail_index(c) })
	return float64(v)
}

// Load returns the load used by the last update.
func (q *Quantum) Load() float64 {
	var v C.double
	q.use(func(c *C.xtc_fn_quantum_t) { v = C.xtc_fn_quantum_load(c) })
	return float64(v)
}

// SetPreemptAdaptive lets q drive the slice of every carrier
// (xtc_exec_set_preempt_adaptive); preemption must be on (SetPreempt). nil
// turns it off.
//
// Deprecated: give NewExec WithAdaptivePreempt(q).
func (e *Exec) SetPreemptAdaptive(q *Quantum) error {
	attach := func(c *C.xtc_fn_quantum_t) error {
		return e.withC("xtc_exec_set_preempt_adaptive", func(ce *C.xtc_exec_t) C.int {
			return C.xtc_exec_set_preempt_adaptive((*C.struct_xtc_exec)(ce), c)
		})
	}
	if q == nil {
		return attach(nil)
	}
	// attached under the read lock: a concurrent Close waits, then its
	// destroy detaches the controller again
	err := error(&Error{Op: "xtc_exec_set_preempt_adaptive", Code: ErrInval})
	q.use(func(c *C.xtc_fn_quantum_t) { err = attach(c) })
	return err
}
