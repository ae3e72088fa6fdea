//go:build !cgo

package xtc

// The package builds with CGO_ENABLED=0 so that programs importing it still
// compile (for example for tooling), but the runtime is C: every call
// returns ErrNoCgo (which matches ErrNosys with errors.Is).

import (
	"context"
	"time"
	"unsafe"
)

// LinkInfo says how the C core was linked into this binary.
const LinkInfo = "none (CGO_ENABLED=0)"

type Loop struct{}
type Task struct{}
type Timer struct{}
type Waker struct{}
type ExecClass struct{}

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
