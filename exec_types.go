package xtc

// Executor types shared by the cgo and !cgo builds.

import "time"

// LoopStats are the counters of one executor loop (xtc_loop_stats_t).
type LoopStats struct {
	TasksRun uint64 // dispatches
	Steals   uint64 // tasks taken from a peer's deque
	// Demotions counts preempted tasks moved to the loop's demoted level
	// (xtc_preempt(3)); Aged counts demoted tasks served first because
	// they waited too long.
	Demotions uint64
	Aged      uint64
	// Parks counts the times the carrier blocked with nothing to do;
	// Wakes the wake-ups a producer rang, WakeTotal their summed latency
	// (ring to running again), SlowWakes those that took SlowWake or
	// more and WakeMax the latest. Slow wake-ups are the machine's (an
	// idle virtual CPU the hypervisor was slow to resume), not the
	// scheduler's: a benchmark reports them next to its latencies.
	Parks     uint64
	Wakes     uint64
	WakeTotal time.Duration
	SlowWakes uint64
	WakeMax   time.Duration
}

// SlowWake is the wake-up latency from which LoopStats counts a wake-up as
// slow (XTC_EXEC_SLOW_WAKE_NS).
const SlowWake = time.Millisecond

// StallReport describes a run that took at least the loop's stall budget.
type StallReport struct {
	Pid      Pid           // the proc that ran, PidNone for another task
	Name     string        // its ProcOpts.Name, "" when none
	Ran      time.Duration // run time so far (InFlight) or the whole run
	Budget   time.Duration // the loop's stall budget
	InFlight bool          // true: the run is still going on
	Run      uint64        // the loop's run number: tells reports apart
	Started  time.Duration // the run's start on the ClockMono clock (StallInFlight)
	// Ran is wall time. Of it, the carrier thread used the CPU for CPU
	// and was not running (descheduled by the OS, a stopped VM) for
	// OffCPU: on a busy host a 3 us call can be on the carrier when the
	// thread loses 25 ms, and only CPU tells. Measured for a run past the
	// budget (xtc_stall_info_t cpu_ns, off_cpu_ns); -1 otherwise.
	CPU    time.Duration
	OffCPU time.Duration
}

// StallFunc receives stall reports of a loop (Loop.SetStallFunc). It is
// called twice for a run that overruns while it is being watched: once
// while the run is still in flight (InFlight, from a goroutine of the
// wrapper that polls the loop every quarter budget, at least every 1 ms),
// and once when it ends (on the loop's carrier stack, synchronously: keep
// it short). A run shorter than a poll interval past its budget may only
// get the end report. A panic in fn is recovered: it stops the loop's run
// (or executor's), and Loop.Run / ExecRun.Wait re-panic with the value.
type StallFunc func(l *Loop, r StallReport)
