package xtc

// Names kept for one release after they were renamed, in both builds
// (with and without cgo): each calls the new name.

import (
	"context"
	"unsafe"
)

// Submit is the old name of Dispatch (it wraps xtc_dispatch, whose name it
// now carries; Exec.Submit is another mechanism, xtc_exec_submit).
//
// Deprecated: use Dispatch. Submit goes in the next release.
func Submit(l *Loop, fn unsafe.Pointer, arg unsafe.Pointer) (*Future, error) {
	return Dispatch(l, fn, arg)
}

// SubmitWait is the old name of DispatchWait.
//
// Deprecated: use DispatchWait. SubmitWait goes in the next release.
func SubmitWait(ctx context.Context, l *Loop, fn unsafe.Pointer, arg unsafe.Pointer) (int64, error) {
	return DispatchWait(ctx, l, fn, arg)
}

// SchedGetStats is the old name of Loop.SchedStats (the only getter whose
// name had Get).
//
// Deprecated: use loop.SchedStats(). SchedGetStats goes in the next
// release.
func SchedGetStats(loop *Loop) (SchedStats, error) {
	return loop.SchedStats()
}
