//go:build cgo

package xtc

// Exported Go callbacks of batch groups; declarations only in the preamble
// (cgo copies it into two C files). The trampolines that call these on the
// carrier stack are in batch.go's preamble.

/*
#include <stdint.h>
#include "xtc.h"
*/
import "C"

import (
	"runtime/cgo"
	"unsafe"
)

//export xtcGoBatchStep
func xtcGoBatchStep(h C.uintptr_t, items *C.xtc_batch_item_t, res *C.xtc_batch_result_t, n C.size_t) C.int {
	b := cgo.Handle(h).Value().(*Batch)
	return b.runStep(unsafe.Slice(items, int(n)), unsafe.Slice(res, int(n)))
}

//export xtcGoBatchComplete
func xtcGoBatchComplete(h C.uintptr_t, handle C.uint64_t, key C.uintptr_t, outcome C.int) {
	b := cgo.Handle(h).Value().(*Batch)
	b.runComplete(uint64(handle), uintptr(key), int(outcome))
}
