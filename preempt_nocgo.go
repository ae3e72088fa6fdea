//go:build !cgo

package xtc

import "time"

// Preemption needs the C runtime: without cgo every call reports ErrNoCgo
// (or false / zero).

type PreemptStats struct {
	Signals, Ticks, RingTicks, Preemptions, Deferrals, Honoured, Stale, RefusedGoCb uint64
	TimerFires, TimerEarly, TimerArms, Direct, TimerFallbacks, CostNs               uint64
	RefusedCtx, RefusedNoPreempt, RefusedStack, RefusedPC                           uint64
	OverheadNs, ArmNs, OwnArms, Stretches, StretchMax                               uint64
	TickNets                                                                        uint64
}

type QuantumOpts struct {
	Min, Max, Initial, Period time.Duration
	LoadHigh, LoadLow         float64
	AlphaHeavy                float64
	Window                    int
	Workers                   int
}

type Quantum struct{}

func PreemptArm(time.Duration) error             { return ErrNoCgo }
func PreemptDisarm() error                       { return ErrNoCgo }
func PreemptSetInvoluntary(bool)                 {}
func PreemptSupported() bool                     { return false }
func PreemptInvoluntarySupported() bool          { return false }
func PreemptTicks() uint64                       { return 0 }
func PreemptTickPending() bool                   { return false }
func PreemptSignal() int                         { return 0 }
func PreemptSetSignal(int) error                 { return ErrNoCgo }
func PreemptStatsGlobal() (PreemptStats, uint64) { return PreemptStats{}, 0 }
func PreemptSetBudget(int) error                 { return ErrNoCgo }
func PreemptBudget() int                         { return 0 }
func NewQuantum(QuantumOpts) (*Quantum, error)   { return nil, ErrNoCgo }
func (*Quantum) Close()                          {}
func (*Quantum) Record(time.Duration) error      { return ErrNoCgo }
func (*Quantum) AddBusy(time.Duration) error     { return ErrNoCgo }
func (*Quantum) SetLoad(float64) error           { return ErrNoCgo }
func (*Quantum) Update() (time.Duration, error)  { return 0, ErrNoCgo }
func (*Quantum) Get() time.Duration              { return 0 }
func (*Quantum) TailIndex() float64              { return 0 }
func (*Quantum) Load() float64                   { return 0 }
