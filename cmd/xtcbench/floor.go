package main

// #include "xb.h"
import "C"

import (
	"fmt"
	"io"
)

// The machine's preemption floor: what the kernel (and, in a guest, the
// hypervisor) charge for the pieces of one involuntary preemption, measured
// in C by xb_floor.c without xtc or Go on the path. Every slice result of
// the report is bounded by it, so it is stated next to them.

// Floor is the machine's preemption floor (medians unless p99).
type Floor struct {
	Samples      int     `json:"samples"`
	Signal       int     `json:"signal"`
	SyscallNs    float64 `json:"syscall_ns"`
	SelfSignalUs float64 `json:"self_signal_us"`
	TimerLateP50 float64 `json:"timer_late_p50_us"`
	TimerLateP99 float64 `json:"timer_late_p99_us"`
	TimerStall   float64 `json:"timer_stall_p50_us"`
	ArmNearUs    float64 `json:"arm_near_us"`
	ArmFarUs     float64 `json:"arm_far_us"`
	// Cross is false when only one CPU was allowed; the two fields after
	// it are then zero and left out.
	Cross            bool    `json:"cross_cpu"`
	CrossSignalP50Us float64 `json:"cross_signal_p50_us,omitempty"`
	CrossStallP50Us  float64 `json:"cross_stall_p50_us,omitempty"`
}

// PreemptionUs is the least carrier CPU one involuntary preemption costs:
// the stall of a timer expiry plus re-arming the slice timer near.
func (f *Floor) PreemptionUs() float64 { return f.TimerStall + f.ArmNearUs }

// measureFloor runs the probes (about 0.1-0.2 s; the C side pins its own
// threads, so the calling goroutine needs no locking).
func measureFloor() (*Floor, error) {
	why := whyBuf()
	var o C.xb_floor_t
	st := Status(C.xb_floor(&o, why))
	w := takeWhy(why)
	if st != StatusOK {
		return nil, fmt.Errorf("preemption floor %s: %s", st, w)
	}
	return &Floor{
		Samples:          int(o.samples),
		Signal:           int(o.signo),
		SyscallNs:        float64(o.syscall_ns),
		SelfSignalUs:     float64(o.self_signal_us),
		TimerLateP50:     float64(o.timer_late_p50_us),
		TimerLateP99:     float64(o.timer_late_p99_us),
		TimerStall:       float64(o.timer_stall_p50_us),
		ArmNearUs:        float64(o.arm_near_us),
		ArmFarUs:         float64(o.arm_far_us),
		Cross:            o.cross != 0,
		CrossSignalP50Us: float64(o.cross_signal_p50_us),
		CrossStallP50Us:  float64(o.cross_stall_p50_us),
	}, nil
}

// writeFloor renders the floor as one Markdown paragraph.
func writeFloor(w io.Writer, f *Floor) {
	if f == nil {
		fmt.Fprintln(w, "**Preemption floor of this machine:** not measured.")
		fmt.Fprintln(w)
		return
	}
	fmt.Fprintf(w, "**Preemption floor of this machine** (medians of %d samples): "+
		"a system call (getppid) costs %.2f µs and a signal to the calling thread "+
		"(tgkill, handler, return) %.1f µs; a timer armed 50 µs ahead by the "+
		"spinning thread it signals fires %.0f µs late (p99 %.0f µs) and takes "+
		"%.0f µs from that thread (interrupt, signal delivery and return); "+
		"arming a timer that becomes the CPU's earliest costs %.1f µs, a later one %.1f µs",
		f.Samples, f.SyscallNs/1e3, f.SelfSignalUs, f.TimerLateP50, f.TimerLateP99,
		f.TimerStall, f.ArmNearUs, f.ArmFarUs)
	if f.Cross {
		fmt.Fprintf(w, "; a signal sent from another CPU reaches its handler after "+
			"%.0f µs and takes %.0f µs from the thread it interrupts",
			f.CrossSignalP50Us, f.CrossStallP50Us)
	} else {
		fmt.Fprint(w, " (one CPU allowed: the cross-CPU signal was not measured)")
	}
	p := f.PreemptionUs()
	fmt.Fprintf(w, ". One involuntary preemption costs the carrier at least a timer "+
		"expiry (%.0f µs stall) plus a near re-arm (%.0f µs), %.0f µs of CPU, "+
		"so a slice much shorter than ~4× that sum (~%.0f µs) cannot pay for "+
		"its own preemption here.\n\n", f.TimerStall, f.ArmNearUs, p, 4*p)
}
