//go:build cgo

package xtc

// Exported Go callbacks of exec.go. Declarations only in this preamble (cgo
// copies it into two C files); the trampolines are in exec.go's preamble.

/*
#include <stdint.h>
#include "xtc.h"
*/
import "C"

import "runtime/cgo"

//export xtcGoStall
func xtcGoStall(h C.uintptr_t, in *C.xtc_stall_info_t) {
	s := cgo.Handle(h).Value().(*stallCb)
	fn := s.fn.Load()
	if fn == nil {
		return
	}
	r := stallReportC(in)
	callGoVoid(s.l, func() { (*fn)(s.l, r) })
}

//export xtcGoSubmit
func xtcGoSubmit(h C.uintptr_t) {
	hd := cgo.Handle(h)
	s := hd.Value().(*submitFn)
	hd.Delete()
	callGoVoid(s.e, s.fn)
}
