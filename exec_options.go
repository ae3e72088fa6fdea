package xtc

// Construction options of an executor (NewExec) and its statistics: the
// service layer's shape, shared by the cgo and !cgo builds (the !cgo
// NewExec still returns ErrNoCgo).
//
// Model. Everything an executor needs to know before its carriers start
// is an ExecOption given to NewExec: the preemption slice and kind, the
// stall watchdog, the idle policy. An option with a bad value fails
// NewExec (the first such error, naming the option), and an option the
// build or the machine cannot honour fails it too (ErrNosys), so a
// service learns at start-up, not from a missed deadline, that its
// kernels will not be time-sliced. What used to be setup-only setters
// (SetPreempt, SetPreemptCoop, SetServiceMode, ...) stay for one release
// as deprecated equivalents.
//
// Preemption is part of the executor: WithPreempt turns the involuntary
// path on while this executor runs and gives it back when its run ends.
// The C switch behind it (xtc_preempt_set_involuntary) is process-wide,
// so it is reference-counted by the executors that run with WithPreempt
// (plus the explicit PreemptSetInvoluntary override): one executor's
// Shutdown never turns preemption off under another one.

import (
	"fmt"
	"time"
)

// ExecOption configures an executor at construction (NewExec).
type ExecOption func(*execConfig) error

// execConfig is what the options collected; zero means the default.
type execConfig struct {
	service     *bool         // nil: NewExec's default (on)
	slice       time.Duration // 0: no preemption slice
	involuntary bool          // WithPreempt: cut code that never yields
	coop        bool          // WithClockCheckedPreempt
	adaptive    *Quantum
	spin        time.Duration
	stall       time.Duration
	stallFn     StallFunc
	stallFnSet  bool
	eager       bool
}

func (c *execConfig) apply(opts []ExecOption) error {
	for _, o := range opts {
		if o == nil {
			continue
		}
		if err := o(c); err != nil {
			return err
		}
	}
	if c.adaptive != nil && c.slice == 0 {
		return errReason("xtc.WithAdaptivePreempt", ErrInval,
			"needs a slice: add WithPreempt or WithClockCheckedPreempt")
	}
	return nil
}

func sliceCheck(op string, d time.Duration) error {
	if d <= 0 {
		return errReason(op, ErrInval, fmt.Sprintf("slice must be > 0, got %v", d))
	}
	return nil
}

// WithPreempt time-slices the executor's fibers every slice, involuntarily:
// C code that never reaches a yield point is cut at a safe point when its
// slice has ended and someone else waits for the carrier (xtc_preempt(3);
// which code counts as safe is the preemption design's rule, see
// PreemptSupported and the package doc). The involuntary path is switched
// on while the executor runs and given back when its run ends; other
// executors of the process keep theirs. NewExec fails with ErrNosys where
// involuntary preemption does not exist (not Linux x86-64 or aarch64, a
// build without a tick source) and with ErrInval for slice <= 0.
func WithPreempt(slice time.Duration) ExecOption {
	return func(c *execConfig) error {
		if err := sliceCheck("xtc.WithPreempt", slice); err != nil {
			return err
		}
		c.slice, c.involuntary, c.coop = slice, true, false
		return nil
	}
}

// WithClockCheckedPreempt sets a slice that is enforced only at the
// kernels' own preemption points (xtc_yield_if_due, xtc_yield_check):
// no timer and no signal interrupt the carrier, so C code without such
// points is never cut (xtc_exec_set_preempt_coop). For kernels that have
// the points, where an interrupt costs too much (45-57 µs a preemption
// on a 2-vCPU virtual machine). ErrInval for slice <= 0; ErrNosys without
// a tick source.
func WithClockCheckedPreempt(slice time.Duration) ExecOption {
	return func(c *execConfig) error {
		if err := sliceCheck("xtc.WithClockCheckedPreempt", slice); err != nil {
			return err
		}
		c.slice, c.coop, c.involuntary = slice, true, false
		return nil
	}
}

// WithAdaptivePreempt lets q drive the slice of every carrier
// (xtc_exec_set_preempt_adaptive); it needs WithPreempt or
// WithClockCheckedPreempt for the kind and the starting slice. q must
// outlive the executor (close it after the executor).
func WithAdaptivePreempt(q *Quantum) ExecOption {
	return func(c *execConfig) error {
		if q == nil {
			return errReason("xtc.WithAdaptivePreempt", ErrInval, "nil Quantum")
		}
		c.adaptive = q
		return nil
	}
}

// WithStallWatch arms the stall watchdog on every loop: a run that takes
// budget or more is counted (ExecStats.Stalls) and reported to fn, once
// while it is still in flight and once when it ends (see StallFunc); a
// nil fn keeps the default report on stderr. ErrInval for budget <= 0.
func WithStallWatch(budget time.Duration, fn StallFunc) ExecOption {
	return func(c *execConfig) error {
		if budget <= 0 {
			return errReason("xtc.WithStallWatch", ErrInval,
				fmt.Sprintf("budget must be > 0, got %v", budget))
		}
		c.stall, c.stallFn, c.stallFnSet = budget, fn, fn != nil
		return nil
	}
}

// WithSpin makes an idle carrier poll for work for up to d before it
// parks (see Exec.SetSpin for what that buys on a virtual machine).
// ErrInval for d < 0.
func WithSpin(d time.Duration) ExecOption {
	return func(c *execConfig) error {
		if d < 0 {
			return errReason("xtc.WithSpin", ErrInval, fmt.Sprintf("spin must be >= 0, got %v", d))
		}
		c.spin = d
		return nil
	}
}

// WithServiceMode(false) makes the executor's runs end at their first
// idle moment (the C default, for batch programs); NewExec's default is
// on: a started executor serves until Close or Shutdown.
func WithServiceMode(on bool) ExecOption {
	return func(c *execConfig) error { c.service = &on; return nil }
}

// WithEagerRebalance makes idle loops steal migratable work before they
// park (xtc_exec_set_eager_rebalance).
func WithEagerRebalance() ExecOption {
	return func(c *execConfig) error { c.eager = true; return nil }
}

// WithStealBackoff grows an idle loop's steal-poll interval from 1 ms to
// 32 ms. NewExec does so anyway (kept for the programs that asked for it);
// e.SetStealBackoff(false) after NewExec brings the 1 ms poll back.
func WithStealBackoff() ExecOption {
	return func(*execConfig) error { return nil }
}

// PreemptConfig is an executor's preemption as configured, and whether it
// is in force now.
type PreemptConfig struct {
	Slice        time.Duration // 0: no slice
	Involuntary  bool          // WithPreempt: never-yielding C code is cut
	ClockChecked bool          // WithClockCheckedPreempt
	Adaptive     bool          // WithAdaptivePreempt: Slice is the start
	// Active: the process-wide involuntary path is on now (it is while
	// an executor with Involuntary runs, or PreemptSetInvoluntary(true)).
	Active bool
}

// ExecStats is a snapshot of an executor (Exec.Stats).
type ExecStats struct {
	Loops   []LoopStats   // per loop, by index
	Preempt PreemptConfig // the executor's preemption
	// Stalls counts the runs that took the stall budget or more, on all
	// loops (WithStallWatch); StallBudget is the budget (0: off).
	Stalls      uint64
	StallBudget time.Duration
	Calls       int64        // Exec.Go calls whose C side has not ended
	Classes     []ClassStats // the executor-wide classes (NewClass), in creation order
	Batches     int          // batch groups the executor owns (NewBatch)
	Running     bool         // a run is in progress
	Closing     bool         // Shutdown or Close began
}

// ClassStats are the counters of a scheduling class (xtc_sched_class_stats),
// summed over its loops for an executor-wide Class.
type ClassStats struct {
	Shares  int
	Latency time.Duration // its bound, 0 for none
	CPU     time.Duration // measured run time charged to it
	Runs    uint64        // times its work was picked
	// Stalls: those of its runs that took the stall budget or more
	// (WithStallWatch, Loop.SetStallBudget); counted before the
	// StallFunc is called.
	Stalls uint64
	// Waits of its work, measured for a latency class only: from the
	// moment a call or proc became ready (started, woken, or yielded)
	// to the start of its run. Late: those longer than Latency; WaitSum
	// and WaitMax: their sum (mean WaitSum / Waits) and the longest.
	Waits   uint64
	Late    uint64
	WaitSum time.Duration
	WaitMax time.Duration
}

// MetBound reports whether the class met its latency bound: no measured
// wait was longer than Latency. A class without a bound has none to miss.
// The bound tightens the carriers' slices; it is not a guarantee, which
// is why it is measured (a never-yielding kernel without preemption, a
// long queue or a stalled machine makes work late).
func (s ClassStats) MetBound() bool { return s.Latency == 0 || s.Late == 0 }
