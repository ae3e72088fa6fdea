package xtc

// Continuous batching types shared by the cgo build (batch.go) and the
// !cgo stubs (nocgo.go). See xtc_batch(3).

import "fmt"

// BatchState is a member's result for one step (XTC_BATCH_*).
type BatchState int

// Step results.
const (
	BatchContinue BatchState = 0 // stays in the vector
	BatchDone     BatchState = 1 // finished: Complete(nil)
	BatchBlocked  BatchState = 2 // leaves the vector until Resume
	BatchError    BatchState = 3 // failed: Complete(result.Err)
)

// BatchCloseMode selects how Close ends a group.
type BatchCloseMode uint

// Close modes (XTC_BATCH_DRAIN, XTC_BATCH_CANCEL).
const (
	BatchDrain  BatchCloseMode = 1 // finish accepted work, accept no more
	BatchCancel BatchCloseMode = 2 // abort accepted work (ErrAborted)
)

// BatchItem is one member of the ready vector as Step sees it.
type BatchItem struct {
	Handle  uint64 // from Submit
	Request any    // the value given to Submit
	Charge  uint64 // its fixed resource charge
	Rounds  uint64 // steps it took part in before this one
}

// BatchResult is Step's verdict for one member; it is preset to
// BatchContinue. For BatchError, Err is the member's error (nil counts as
// ErrInternal); Complete receives that same error value.
type BatchResult struct {
	State BatchState
	Err   error
}

// BatchOpts configures BatchCreate (xtc_batch_opts_t).
type BatchOpts struct {
	Capacity         int    // waiting + active requests (1..2^20)
	MaxActive        int    // members per vector (1..min(Capacity, 65536))
	ResourceCapacity uint64 // units shared by the active members (>= 1)
	// Class is the driver's class: a *LoopClass of the group's loop, or,
	// for Exec.NewBatch, an executor-wide *Class; nil = the default lane.
	Class ClassRef
	Name  string // driver proc label

	// Step advances every member of the ready vector by one round and
	// fills results[i] for items[i]. It runs on the loop's thread (on the
	// carrier stack, never a fiber): it must not block. A non-nil error
	// fails the whole vector (each member completes with it). A panic is
	// recovered and becomes every member's error (*BatchPanicError).
	Step func(items []BatchItem, results []BatchResult) error
	// Complete runs exactly once per request accepted by Submit or
	// SubmitMT, on the loop's thread: outcome nil (done), an error
	// matching ErrAborted (cancelled), or the member's error. A panic in
	// it is recovered and counted. It may be nil when requests come only
	// through Do (which returns the outcome itself).
	Complete func(handle uint64, request any, outcome error)
}

// BatchStats are a group's counters and current sizes
// (xtc_batch_stats_t).
type BatchStats struct {
	Accepted, Refused, Admitted             uint64
	Completed, CompletedOK, Aborted, Failed uint64
	Iterations, MemberRounds, Deadlk        uint64
	Waiting, Active, Blocked, ResourceUsed  uint64
	PeakActive                              uint64
	Closed                                  BatchCloseMode // 0 while open
	DriverAlive                             bool
	Driver                                  Pid
	CompletePanics                          uint64 // recovered in Complete (Go side)
}

// BatchPanicError is the outcome of the members of a step whose Go Step
// function panicked; it matches ErrInternal with errors.Is.
type BatchPanicError struct {
	Value any // what Step panicked with
}

// Error names the panic value.
func (e *BatchPanicError) Error() string {
	return fmt.Sprintf("xtc: batch step panicked: %v", e.Value)
}

// Unwrap makes errors.Is(err, ErrInternal) true.
func (e *BatchPanicError) Unwrap() error { return ErrInternal }

// ClassRef is a scheduling class as a batch group takes it: an
// executor-wide *Class (Exec.NewClass) or a per-loop *LoopClass
// (ExecClassCreate). A nil *Class or *LoopClass means the default lane.
type ClassRef interface{ isClassRef() }

func (*Class) isClassRef()     {}
func (*LoopClass) isClassRef() {}
