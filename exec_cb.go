//go:build cgo

package xtc

// Exported Go callbacks of exec.go. Declarations only in this preamble (cgo
// copies it into two C files); the trampolines are in exec.go's preamble.

/*
#include <stdint.h>
#include "xtc.h"
*/
import "C"

import (
	"runtime/cgo"
	"time"
	"unsafe"
)

//export xtcGoStall
func xtcGoStall(h C.uintptr_t, task *C.xtc_task_t, ran, budget C.int64_t) {
	s := cgo.Handle(h).Value().(*stallCb)
	s.fn(s.l, unsafe.Pointer(task), time.Duration(ran), time.Duration(budget))
}

//export xtcGoSubmit
func xtcGoSubmit(h C.uintptr_t) {
	hd := cgo.Handle(h)
	s := hd.Value().(*submitFn)
	hd.Delete()
	defer func() {
		if p := recover(); p != nil {
			s.e.recordPanic(p) // a panic must not unwind through C
		}
	}()
	s.fn()
}
