//go:build cgo

package xtc

// libxtc-compatibility knobs that the Go API has a concept for (issue 28):
// the stack reclaim switch. DownIsNoproc is in noproc.go (pure Go).

/*
#include "xtc.h"
*/
import "C"

// The DOWN reason of a monitor that found its target already gone.
var _ = [1]struct{}{}[DownReasonNoproc-C.XTC_DOWN_NOPROC]

// StackReclaimEnable turns on, process-wide, the return of a parking
// fiber's unused stack pages to the kernel (xtc_stack_reclaim_enable):
// everything below its stack pointer minus keepBytes (0 = one page) is
// dropped with madvise when that is more than a page. ErrRange above 1 GiB.
func StackReclaimEnable(keepBytes int) error {
	if keepBytes < 0 {
		return errReason("xtc_stack_reclaim_enable", ErrInval, "negative keepBytes")
	}
	return mkerr("xtc_stack_reclaim_enable", int(C.xtc_stack_reclaim_enable(C.size_t(keepBytes))))
}

// StackReclaimDisable turns stack reclaim off (xtc_stack_reclaim_disable).
func StackReclaimDisable() { C.xtc_stack_reclaim_disable() }

// StackReclaimEnabled reports the switch (xtc_stack_reclaim_enabled).
func StackReclaimEnabled() bool { return C.xtc_stack_reclaim_enabled() != 0 }

// StackReclaimCount is the number of parks that gave stack pages back
// (xtc_stack_reclaim_count).
func StackReclaimCount() uint64 { return uint64(C.xtc_stack_reclaim_count()) }
