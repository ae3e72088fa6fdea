//go:build cgo

package xtc

// The lane-policy callback exported to C (sched.go holds its trampoline;
// this preamble only declares, see callbacks.go).

/*
#include <stdint.h>
#include "xtc.h"
*/
import "C"

import (
	"runtime/cgo"
	"unsafe"
)

//export xtcGoSchedSelect
func xtcGoSchedSelect(h C.uintptr_t, v *C.xtc_sched_lane_t, n C.size_t) C.int {
	in := cgo.Handle(h).Value().(*schedInstall)
	return callGo(in.p, C.int(schedPanicChoice), func() C.int {
		src := unsafe.Slice(v, int(n))
		lanes := in.buf[:len(src)]
		for i := range src {
			s := &src[i]
			lanes[i] = SchedLane{
				ID:           int(s.id),
				Shares:       int(s.shares),
				Runs:         uint64(s.runs),
				Bypass:       uint32(s.bypass),
				BatchGroups:  uint32(s.batch_groups),
				BatchActive:  uint32(s.batch_active),
				BatchReady:   uint32(s.batch_ready),
				BatchWaiting: uint32(s.batch_waiting),
			}
		}
		return C.int(in.p.Select(lanes))
	})
}
