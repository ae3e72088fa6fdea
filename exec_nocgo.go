//go:build !cgo

package xtc

// Stubs of the executor, Exec.Go, classes, mailboxes and deadline-
// preemptible functions for CGO_ENABLED=0 builds: every call reports
// ErrNoCgo (or a zero value), so a program importing xtc still compiles.

import (
	"context"
	"time"
	"unsafe"
)

type Exec struct{}
type ExecRun struct{}
type Class struct{}
type CallResult struct{}
type Mailbox struct{}
type Fn struct{}

// CallOption configures one Exec.Go call.
type CallOption func(*callOpts)

type callOpts struct{}

func NewExec(int) (*Exec, error)                            { return nil, ErrNoCgo }
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
func ExecClassCreate(*Loop, int, time.Duration) (*ExecClass, error) {
	return nil, ErrNoCgo
}
func (*ExecClass) Shares() int                            { return 0 }
func (*ExecClass) Latency() time.Duration                 { return 0 }
func (*ExecClass) Runs() uint64                           { return 0 }
func (*ExecClass) VRuntime() uint64                       { return 0 }
func (*ExecClass) CPU() time.Duration                     { return 0 }
func (*Loop) SetStallBudget(time.Duration) error          { return ErrNoCgo }
func (*Loop) SetStallFunc(StallFunc) error                { return ErrNoCgo }
func (*Loop) StallInFlight() (StallReport, error)         { return StallReport{}, ErrNoCgo }
func (*Loop) StallCount() uint64                          { return 0 }
func (*Exec) NewClass(int, time.Duration) (*Class, error) { return nil, ErrNoCgo }
func (*Class) Shares() int                                { return 0 }
func (*Class) Latency() time.Duration                     { return 0 }
func (*Class) OnLoop(int) *ExecClass                      { return nil }
func (*Class) CPU() time.Duration                         { return 0 }
func (*Class) Runs() uint64                               { return 0 }
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
