//go:build cgo

package xtc

// Exported Go callbacks. This file's preamble holds declarations only: cgo
// copies it into two C files, so a definition here would be duplicated.
// The C trampolines that call these (and raise the Go-callback depth guard
// around them) are in xtc.go's preamble.

/*
#include <stdint.h>
#include "xtc.h"
*/
import "C"

import "runtime/cgo"

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
	l.drain()
	return C.XTC_TASK_DONE
}
