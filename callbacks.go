//go:build cgo

package xtc

// Go callbacks called by the C runtime, and the one trampoline they all go
// through.
//
// Every C->Go call (task bodies, timers, Submit functions, stall reports,
// and the batching and lane-policy callbacks) is made by a loop on its
// carrier's own stack with the Go-callback guard raised (no fiber switch or
// preemption meanwhile; README, "Thread rules in a Go process"). A Go panic must
// never unwind through those C frames: it would skip the guard's release
// and C's own cleanup, and the Go runtime aborts the process when a panic
// crosses a C frame. So each exported function is a thin shell around
// callGo:
//
//	//export xtcGoSomething
//	func xtcGoSomething(h C.uintptr_t, x C.int) C.int {
//		cb := cgo.Handle(h).Value().(*something)
//		return callGo(cb.sink, C.int(SOMETHING_ERROR), func() C.int {
//			return C.int(cb.fn(int(x)))
//		})
//	}
//
// callGo runs the body; on a panic it records the value with the sink
// (the Loop or Exec that owns the callback: the first panic is kept and
// the run is stopped), returns fallback to C, and Loop.Run / ExecRun.Wait
// re-panic with the value in the goroutine that drives the run. The
// handle lookup belongs inside the body when the handle may be stale.
//
// This file's preamble holds declarations only: cgo copies it into two C
// files, so a definition here would be duplicated. The C trampolines that
// call these exports are in the preambles of xtc.go and exec.go.

/*
#include <stdint.h>
#include "xtc.h"
*/
import "C"

import "runtime/cgo"

// panicSink is what owns a callback: it keeps the first panic and stops
// its run so that the driver of the run re-raises it (*Loop, *Exec).
type panicSink interface {
	recordPanic(v any)
}

// callGo is the recovering trampoline: it runs fn, and when fn panics it
// hands the value to sink (nil sink: the panic is dropped, which only the
// tests' stand-alone calls use) and returns fallback. It never lets a
// panic return to its C caller.
func callGo[T any](sink panicSink, fallback T, fn func() T) (res T) {
	defer func() {
		if p := recover(); p != nil {
			if sink != nil {
				sink.recordPanic(p)
			}
			res = fallback
		}
	}()
	return fn()
}

// callGoVoid is callGo for callbacks without a result.
func callGoVoid(sink panicSink, fn func()) {
	callGo(sink, struct{}{}, func() struct{} { fn(); return struct{}{} })
}

//export xtcGoTask
func xtcGoTask(h C.uintptr_t, self *C.xtc_task_t) C.int {
	t := cgo.Handle(h).Value().(*Task)
	t.c = self // the same pointer spawn returned, also for remote spawns
	return C.int(runTask(t))
}

//export xtcGoTimer
func xtcGoTimer(h C.uintptr_t) {
	fireTimer(cgo.Handle(h).Value().(*Timer))
}

//export xtcGoDrain
func xtcGoDrain(h C.uintptr_t) C.int {
	l := cgo.Handle(h).Value().(*Loop)
	callGoVoid(l, l.drain)
	return C.XTC_TASK_DONE
}
