package xtc

// Types shared by the cgo build and the !cgo stub (nocgo.go).

import "fmt"

// TaskResult is what a stackless task body returns after each run.
type TaskResult int

// Task body results (XTC_TASK_*).
const (
	TaskDone    TaskResult = 0 // finished; the loop reaps it
	TaskResched TaskResult = 1 // run again after the others
	TaskPending TaskResult = 2 // parked until a wake, timer or fd
)

// I/O interest bits for Task.ParkOnFd (XTC_IO_*).
const (
	IORead  uint32 = 0x01
	IOWrite uint32 = 0x02
	IOHup   uint32 = 0x04
	IOErr   uint32 = 0x08
)

// Pid names a process (xtc_pid_t). The zero Pid is PidNone. A pid is never
// reused while stale copies may exist: the generation bumps on slot reuse.
type Pid struct {
	LoopID  uint16 // executor loop index + 1, 0 = standalone loop id
	LocalID uint16 // slot in the loop's proc table
	Gen     uint32 // generation of the slot
}

// PidNone is the pid of nothing (XTC_PID_NONE).
var PidNone = Pid{}

// IsNone reports whether p is PidNone.
func (p Pid) IsNone() bool { return p == PidNone }

// String formats the pid as <loop.local.gen>.
func (p Pid) String() string { return fmt.Sprintf("<%d.%d.%d>", p.LoopID, p.LocalID, p.Gen) }

// ProcOpts are the spawn options (xtc_proc_opts_t); the zero value (or a
// nil *ProcOpts) means defaults.
type ProcOpts struct {
	Name       string     // shown in stall and stack-overflow reports (first 31 bytes); "" = none
	MailboxCap int        // 0 = XTC_MAILBOX_DEFAULT_CAP (4096)
	Migratable bool       // may move between executor carriers at yields
	SchedClass *ExecClass // nil = the default lane
	// StackSize is this proc's usable stack in bytes; 0 = StackSize().
	// From 16 KiB it is page-rounded with a guard page; from 1 KiB up to
	// 16 KiB it is a small stack (rounded up to 256 B, several to a page,
	// an overflow caught by a canary and stack-pointer check at every
	// switch instead of a guard page: xtc_async(3), Stacks). A proc parked
	// in a receive then costs ~1.85 KiB resident with 1 KiB, ~4.8 KiB with
	// the default 64 KiB. Below 1 KiB ErrInval, above 1 GiB ErrRange.
	StackSize int
}

// DOWN message kinds (XTC_DOWN_KIND_*).
const (
	DownClean        = 0
	DownExit         = 1
	DownSignal       = 2
	DownNoproc       = 3
	DownNoconnection = 4
)

// DownInfo is a decoded DOWN message (xtc_down_info_t).
type DownInfo struct {
	Pid      Pid
	Kind     int
	Signal   int
	ExitCode int
	Reason   int
	Ref      uint64
}

// MailboxStats is a snapshot of a proc's mailbox (xtc_mailbox_stats_t).
type MailboxStats struct {
	Depth, Saved, Peak, Cap int
	RecvTotal, DropTotal    uint64
}

// ExecClass is the former name of LoopClass: a class of one loop (the
// name said "executor" for the per-loop scope, the inverse of Class).
//
// Deprecated: use LoopClass.
type ExecClass = LoopClass
