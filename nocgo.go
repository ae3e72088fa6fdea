//go:build !cgo

package xtc

import (
	"context"
	"time"
	"unsafe"
)

// The package builds with CGO_ENABLED=0 so that programs importing it still
// compile (for example for tooling), but the runtime is C: every call
// returns ErrNoCgo (which matches ErrNosys with errors.Is).

// LinkInfo says how the C core was linked into this binary.
const LinkInfo = "none (CGO_ENABLED=0)"

type Loop struct{}
type Task struct{}
type Timer struct{}
type Waker struct{}
type LoopClass struct{}

func Version() string                                        { return "" }
func VersionComponents() (int, int, int, error)              { return 0, 0, 0, ErrNoCgo }
func Strerror(code Errno) string                             { return code.Error() }
func IOBackendName() string                                  { return "none" }
func StackSize() int                                         { return 0 }
func SetStackSize(int) error                                 { return ErrNoCgo }
func ClockMono() time.Duration                               { return 0 }
func LoopInit() (*Loop, error)                               { return nil, ErrNoCgo }
func (*Loop) Run() error                                     { return ErrNoCgo }
func (*Loop) RunContext(context.Context) error               { return ErrNoCgo }
func (*Loop) Stop() error                                    { return ErrNoCgo }
func (*Loop) Wake() error                                    { return ErrNoCgo }
func (*Loop) Fini() error                                    { return ErrNoCgo }
func (*Loop) SetYieldBudget(time.Duration) error             { return ErrNoCgo }
func (*Loop) YieldDueCount() (uint64, error)                 { return 0, ErrNoCgo }
func (*Loop) String() string                                 { return "xtc.Loop(nocgo)" }
func TaskSpawn(*Loop, func(*Task) TaskResult) (*Task, error) { return nil, ErrNoCgo }
func (*Task) ParkOnTimer(time.Duration) error                { return ErrNoCgo }
func (*Task) ParkOnFd(int, uint32) error                     { return ErrNoCgo }
func (*Task) Waker() (Waker, error)                          { return Waker{}, ErrNoCgo }
func (Waker) Wake() error                                    { return ErrNoCgo }
func TimerSet(*Loop, time.Duration, func()) (*Timer, error)  { return nil, ErrNoCgo }
func (*Timer) Cancel() error                                 { return ErrNoCgo }
func ProcSpawn(*Loop, unsafe.Pointer, unsafe.Pointer, *ProcOpts) (Pid, error) {
	return PidNone, ErrNoCgo
}
func Send(Pid, []byte) error                     { return ErrNoCgo }
func ProcWake(Pid) error                         { return ErrNoCgo }
func ExitPid(Pid, int) error                     { return ErrNoCgo }
func Monitor(Pid) (uint64, error)                { return 0, ErrNoCgo }
func Demonitor(uint64) error                     { return ErrNoCgo }
func Link(Pid) error                             { return ErrNoCgo }
func Unlink(Pid) error                           { return ErrNoCgo }
func DownDecode([]byte) (DownInfo, error)        { return DownInfo{}, ErrNoCgo }
func ExitDecode([]byte) (Pid, int, error)        { return PidNone, 0, ErrNoCgo }
func ProcMailboxStats(Pid) (MailboxStats, error) { return MailboxStats{}, ErrNoCgo }

// ---- batch (stubs)

// Batch groups need the C runtime: every call returns ErrNoCgo.

type Batch struct{}

func BatchCreate(loop *Loop, opts *BatchOpts) (*Batch, error)        { return nil, ErrNoCgo }
func (b *Batch) Submit(request any, charge uint64) (uint64, error)   { return 0, ErrNoCgo }
func (b *Batch) Cancel(handle uint64) error                          { return ErrNoCgo }
func (b *Batch) Resume(handle uint64) error                          { return ErrNoCgo }
func (b *Batch) Close() error                                        { return ErrNoCgo }
func (b *Batch) Shutdown(context.Context) error                      { return ErrNoCgo }
func BatchClose(b *Batch, mode BatchCloseMode) error                 { return ErrNoCgo }
func BatchDestroy(b *Batch) error                                    { return ErrNoCgo }
func (b *Batch) Destroy() error                                      { return ErrNoCgo }
func (b *Batch) Stats() (BatchStats, error)                          { return BatchStats{}, ErrNoCgo }
func (b *Batch) SubmitMT(request any, charge uint64) (uint64, error) { return 0, ErrNoCgo }
func (b *Batch) CancelMT(handle uint64) error                        { return ErrNoCgo }
func (b *Batch) ResumeMT(handle uint64) error                        { return ErrNoCgo }
func (b *Batch) Do(context.Context, any, ...DoOption) (any, error)   { return nil, ErrNoCgo }

// DoOption configures one Batch.Do.
type DoOption func(*doOpts)

type doOpts struct{}

func WithCharge(uint64) DoOption { return func(*doOpts) {} }

// ---- completion (stubs)

// Stubs of completion.go for CGO_ENABLED=0 builds: every call reports
// ErrNoCgo.

type Future struct{}

func Dispatch(*Loop, unsafe.Pointer, unsafe.Pointer) (*Future, error) { return nil, ErrNoCgo }
func DispatchWait(context.Context, *Loop, unsafe.Pointer, unsafe.Pointer) (int64, error) {
	return 0, ErrNoCgo
}
func (*Future) Wait(context.Context) (int64, error) { return 0, ErrNoCgo }
func (*Future) Done() <-chan struct{}               { return nil }
func (*Future) Ready() bool                         { return false }
func (*Future) Cancel() error                       { return ErrNoCgo }
func CompletionsDelivered() uint64                  { return 0 }
func BlockingPoolSize(int) error                    { return ErrNoCgo }
func BlockingThreads() int                          { return 0 }
func BlockingShutdown()                             {}

// ---- exec (stubs)

// Stubs of the executor, Exec.Go, classes, mailboxes and deadline-
// preemptible functions for CGO_ENABLED=0 builds: every call reports
// ErrNoCgo (or a zero value), so a program importing xtc still compiles.

type Exec struct{}
type ExecRun struct{}
type Class struct{}
type CallResult struct{}
type Mailbox struct{}
type Fn struct{}

// CallOption configures one Exec.Go call.
type CallOption func(*callOpts)

type callOpts struct{}

func NewExec(int, ...ExecOption) (*Exec, error)             { return nil, ErrNoCgo }
func (*Exec) NewBatch(BatchOpts) (*Batch, error)            { return nil, ErrNoCgo }
func (*Exec) Stats() (ExecStats, error)                     { return ExecStats{}, ErrNoCgo }
func (*Exec) Preempt() PreemptConfig                        { return PreemptConfig{} }
func ExecInit(int) (*Exec, error)                           { return nil, ErrNoCgo }
func (*Exec) NLoops() int                                   { return 0 }
func (*Exec) Loop(int) *Loop                                { return nil }
func (*Exec) LoopStats(int) (LoopStats, error)              { return LoopStats{}, ErrNoCgo }
func (*Exec) Start() (*ExecRun, error)                      { return nil, ErrNoCgo }
func (*ExecRun) Wait(context.Context) error                 { return ErrNoCgo }
func (*ExecRun) Done() <-chan struct{}                      { return nil }
func (*Exec) Run() error                                    { return ErrNoCgo }
func (*Exec) Stop() error                                   { return ErrNoCgo }
func (*Exec) Fini() error                                   { return ErrNoCgo }
func (*Exec) Close() error                                  { return ErrNoCgo }
func (*Exec) Shutdown(context.Context) error                { return ErrNoCgo }
func (*Exec) Submit(int, func()) error                      { return ErrNoCgo }
func (*Exec) SubmitWithin(int, func(), time.Duration) error { return ErrNoCgo }
func (*Exec) SetServiceMode(bool)                           {}
func (*Exec) ServiceMode() bool                             { return false }
func (*Exec) SetEagerRebalance(bool)                        {}
func (*Exec) EagerRebalance() bool                          { return false }
func (*Exec) SetStealBackoff(bool)                          {}
func (*Exec) StealBackoff() bool                            { return false }
func (*Exec) SetPreempt(time.Duration) error                { return ErrNoCgo }
func (*Exec) SetPreemptCoop(bool) error                     { return ErrNoCgo }
func (*Exec) PreemptCoop() bool                             { return false }
func (*Exec) SetSpin(time.Duration) error                   { return ErrNoCgo }
func (*Exec) Spin() time.Duration                           { return 0 }
func (*Exec) SetStallBudget(time.Duration) error            { return ErrNoCgo }
func (*Exec) SetPreemptAdaptive(*Quantum) error             { return ErrNoCgo }
func ExecLoopID() int                                       { return -1 }
func ShardID() int                                          { return -1 }
func ShardCount() int                                       { return 0 }
func ExecClassCreate(*Loop, int, time.Duration) (*LoopClass, error) {
	return nil, ErrNoCgo
}
func (*LoopClass) Shares() int                            { return 0 }
func (*LoopClass) Latency() time.Duration                 { return 0 }
func (*LoopClass) Runs() uint64                           { return 0 }
func (*LoopClass) VRuntime() uint64                       { return 0 }
func (*LoopClass) CPU() time.Duration                     { return 0 }
func (*Loop) SetStallBudget(time.Duration) error          { return ErrNoCgo }
func (*Loop) SetStallFunc(StallFunc) error                { return ErrNoCgo }
func (*Loop) StallInFlight() (StallReport, error)         { return StallReport{}, ErrNoCgo }
func (*Loop) StallCount() uint64                          { return 0 }
func (*Exec) NewClass(int, time.Duration) (*Class, error) { return nil, ErrNoCgo }
func (*Class) Shares() int                                { return 0 }
func (*Class) Latency() time.Duration                     { return 0 }
func (*Class) OnLoop(int) *LoopClass                      { return nil }
func (*Class) CPU() time.Duration                         { return 0 }
func (*Class) Runs() uint64                               { return 0 }
func (*Class) Stats() (ClassStats, error)                 { return ClassStats{}, ErrNoCgo }
func (*LoopClass) Stats() (ClassStats, error)             { return ClassStats{}, ErrNoCgo }
func WithClass(*Class) CallOption                         { return func(*callOpts) {} }
func WithLoopClass(*ExecClass) CallOption                 { return func(*callOpts) {} }
func WithLoop(int) CallOption                             { return func(*callOpts) {} }
func WithName(string) CallOption                          { return func(*callOpts) {} }
func (*CallResult) Pid() Pid                              { return PidNone }
func (*CallResult) Done() <-chan struct{}                 { return nil }
func (*CallResult) Wait(context.Context) (int64, error)   { return 0, ErrNoCgo }
func (*CallResult) Kill() error                           { return ErrNoCgo }
func (*Exec) Go(context.Context, unsafe.Pointer, unsafe.Pointer, ...CallOption) (int64, error) {
	return 0, ErrNoCgo
}
func (*Exec) GoInt(context.Context, unsafe.Pointer, int64, ...CallOption) (int64, error) {
	return 0, ErrNoCgo
}
func (*Exec) GoAsync(unsafe.Pointer, unsafe.Pointer, ...CallOption) (*CallResult, error) {
	return nil, ErrNoCgo
}
func (*Exec) NewMailbox(int, int) (*Mailbox, error)   { return nil, ErrNoCgo }
func (*Mailbox) Pid() Pid                             { return PidNone }
func (*Mailbox) Recv(context.Context) ([]byte, error) { return nil, ErrNoCgo }
func (*Mailbox) Monitor(Pid) (uint64, error)          { return 0, ErrNoCgo }
func (*Mailbox) Demonitor(uint64) error               { return ErrNoCgo }
func (*Mailbox) Link(Pid) error                       { return ErrNoCgo }
func (*Mailbox) Unlink(Pid) error                     { return ErrNoCgo }
func (*Mailbox) Close() error                         { return ErrNoCgo }
func (*Mailbox) Done() <-chan struct{}                { return nil }
func (*Exec) LaunchFn(context.Context, unsafe.Pointer, unsafe.Pointer, time.Duration, ...CallOption) (*Fn, error) {
	return nil, ErrNoCgo
}
func FnLaunch(*Exec, *Fn, unsafe.Pointer, unsafe.Pointer, time.Duration) error { return ErrNoCgo }
func FnResume(*Fn, time.Duration) error                                        { return ErrNoCgo }
func FnCompleted(*Fn) bool                                                     { return false }
func FnCancel(*Fn) error                                                       { return ErrNoCgo }
func (*Fn) Resume(context.Context, time.Duration) (bool, error)                { return false, ErrNoCgo }
func (*Fn) Wait(context.Context) error                                         { return ErrNoCgo }
func (*Fn) Completed() bool                                                    { return false }
func (*Fn) State() FnState                                                     { return FnIdle }
func (*Fn) Result() (int64, error)                                             { return 0, ErrNoCgo }
func (*Fn) Preemptions() int                                                   { return 0 }
func (*Fn) RunTime() time.Duration                                             { return 0 }
func (*Fn) Cancel() error                                                      { return ErrNoCgo }
func (*Fn) Close() error                                                       { return ErrNoCgo }
func Launch(context.Context, *Exec, unsafe.Pointer, unsafe.Pointer, time.Duration, *LaunchOpts) (int64, error) {
	return 0, ErrNoCgo
}

// ---- preempt (stubs)

// Preemption needs the C runtime: without cgo every call reports ErrNoCgo
// (or false / zero).

type PreemptStats struct {
	Signals, Ticks, RingTicks, Preemptions, Deferrals, Honoured, Stale, RefusedGoCb uint64
	TimerFires, TimerEarly, TimerArms, Direct, TimerFallbacks, CostNs               uint64
	RefusedCtx, RefusedNoPreempt, RefusedStack, RefusedPC                           uint64
	OverheadNs, ArmNs, OwnArms, Stretches, StretchMax                               uint64
	TickNets                                                                        uint64
	RefusedLock, BlockedReports                                                     uint64
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
func PreemptSetPolicy(PreemptPolicy) error       { return ErrNoCgo }
func PreemptGetPolicy() PreemptPolicy            { return PreemptDeclared }
func PreemptAllowObject(string) error            { return ErrNoCgo }
func PreemptDeclare(uintptr, uintptr) error      { return ErrNoCgo }
func PreemptUndeclare(uintptr, uintptr) error    { return ErrNoCgo }
func PreemptPreemptible(unsafe.Pointer) bool     { return false }
func NewQuantum(QuantumOpts) (*Quantum, error)   { return nil, ErrNoCgo }
func (*Quantum) Close()                          {}
func (*Quantum) Record(time.Duration) error      { return ErrNoCgo }
func (*Quantum) AddBusy(time.Duration) error     { return ErrNoCgo }
func (*Quantum) SetLoad(float64) error           { return ErrNoCgo }
func (*Quantum) Update() (time.Duration, error)  { return 0, ErrNoCgo }
func (*Quantum) Get() time.Duration              { return 0 }
func (*Quantum) TailIndex() float64              { return 0 }
func (*Quantum) Load() float64                   { return 0 }

// ---- sched (stubs)

func SchedPolicySet(*Loop, *SchedPolicy) error { return ErrNoCgo }
func SchedContinuousSet(*Loop, int) error      { return ErrNoCgo }
func (*Loop) SchedStats() (SchedStats, error)  { return SchedStats{}, ErrNoCgo }
func SchedLaneOf(*ExecClass) (int, error)      { return 0, ErrNoCgo }
