package main

// The bridge to the C drivers (xb_*.c). Every xtc workload is one cgo
// call; the timing happens in C. The C runtime itself is compiled by the
// root package github.com/xtc-go/xtc (through package csrc), which link.go
// imports for that side effect; the drivers reach it through the public
// headers only.

/*
#cgo CFLAGS: -I${SRCDIR}/../../csrc/include -O2
#cgo LDFLAGS: -lpthread
#include <stdlib.h>
#include "xb.h"
*/
import "C"

import (
	"fmt"
	"time"
	"unsafe"
)

// Status of one xtc driver call.
type Status int

const (
	StatusOK      Status = C.XB_OK
	StatusUnavail Status = C.XB_UNAVAIL
	StatusFail    Status = C.XB_FAIL
)

func (s Status) String() string {
	switch s {
	case StatusOK:
		return "ok"
	case StatusUnavail:
		return "not available"
	case StatusFail:
		return "failed"
	}
	return fmt.Sprintf("status(%d)", int(s))
}

// Feature bits (xb.h).
const (
	FeatCore     = C.XB_F_CORE
	FeatExec     = C.XB_F_EXEC
	FeatClasses  = C.XB_F_CLASSES
	FeatPreempt  = C.XB_F_PREEMPT
	FeatAdaptive = C.XB_F_ADAPTIVE
)

var featureNames = []struct {
	bit  int
	name string
}{
	{FeatCore, "core (loop, procs, mailboxes)"},
	{FeatExec, "executor"},
	{FeatClasses, "scheduling classes"},
	{FeatPreempt, "involuntary preemption"},
	{FeatAdaptive, "adaptive quantum controller"},
}

// Features is what the linked runtime offers, with the reason for every
// missing part.
type Features struct {
	Bits    int               `json:"bits"`
	Missing map[string]string `json:"missing"`
	Version string            `json:"xtc_version"`
	Backend string            `json:"io_backend"`
}

func (f Features) Has(bit int) bool { return f.Bits&bit == bit }

func probeFeatures() Features {
	bits := int(C.xb_features())
	f := Features{Bits: bits, Missing: map[string]string{},
		Version: C.GoString(C.xb_xtc_version())}
	if bits&FeatCore != 0 {
		f.Backend = C.GoString(C.xb_io_backend())
	}
	for _, fn := range featureNames {
		if bits&fn.bit == 0 {
			f.Missing[fn.name] = C.GoString(C.xb_feature_why(C.int(fn.bit)))
		}
	}
	return f
}

func whyBuf() *C.char { return (*C.char)(C.calloc(1, C.XB_WHY)) }

func takeWhy(p *C.char) string {
	s := C.GoString(p)
	C.free(unsafe.Pointer(p))
	return s
}

// PreemptStats are the runtime's process-wide preemption counters; the
// difference across one run says what preemption did during it.
type PreemptStats struct {
	Signals     uint64 `json:"signals"`
	Ticks       uint64 `json:"ticks"`
	RingTicks   uint64 `json:"ring_ticks"`
	Preemptions uint64 `json:"preemptions"`
	Deferrals   uint64 `json:"deferrals"`
	Honoured    uint64 `json:"honoured"`
	Stale       uint64 `json:"stale"`
	RefusedGoCb uint64 `json:"refused_gocb"`
	Sent        uint64 `json:"signals_sent"`
}

func preemptStats() PreemptStats {
	var v [9]C.uint64_t
	C.xb_preempt_stats(&v[0])
	return PreemptStats{uint64(v[0]), uint64(v[1]), uint64(v[2]), uint64(v[3]),
		uint64(v[4]), uint64(v[5]), uint64(v[6]), uint64(v[7]), uint64(v[8])}
}

// Sub returns s - o, field by field.
func (s PreemptStats) Sub(o PreemptStats) PreemptStats {
	return PreemptStats{s.Signals - o.Signals, s.Ticks - o.Ticks, s.RingTicks - o.RingTicks,
		s.Preemptions - o.Preemptions, s.Deferrals - o.Deferrals, s.Honoured - o.Honoured,
		s.Stale - o.Stale, s.RefusedGoCb - o.RefusedGoCb, s.Sent - o.Sent}
}

// cSpin runs the C busy loop (the work of the Go+cgo contender).
func cSpin(iters uint64) uint64 { return uint64(C.xb_spin(C.uint64_t(iters))) }

// cCalibrate returns iterations per ns of the C busy loop.
func cCalibrate() float64 { return float64(C.xb_calibrate()) }

func cNoop() { C.xb_noop() }

// Micro benchmark ids (xb.h).
const (
	microYield     = C.XB_MICRO_YIELD
	microSpawn     = C.XB_MICRO_SPAWN
	microPingPong  = C.XB_MICRO_PINGPONG
	microCrossLoop = C.XB_MICRO_CROSSLOOP
	microCCall     = C.XB_MICRO_CCALL
	microFanout    = C.XB_MICRO_FANOUT
)

func xtcMicro(which int, n int64) (float64, Status, string) {
	why := whyBuf()
	var ns C.double
	st := Status(C.xb_micro(C.int(which), C.int64_t(n), &ns, why))
	return float64(ns), st, takeWhy(why)
}

// tailResult is the raw outcome of one xtc tail run.
type tailResult struct {
	Done      []int64 // completion offset per request, -1 = never
	Lag       []int64
	Completed int64
	Dropped   int64
	TimedOut  bool
	Retries   int64
	Quantum   time.Duration // adaptive: the controller's last quantum
	TailIndex float64       // adaptive: its last tail-index estimate
	Preempts  uint64        // involuntary yields during the run
	CostNs    int64         // measured cost of one preemption
	Fires     uint64        // carrier timer expiries that preempted
	Direct    uint64        // producers that signalled an overdue run
	Fallbacks uint64        // carriers without a slice timer
	Stretches uint64        // budget windows that lengthened the slice
	OvhNs     int64         // preemption cost the budget counted
	Wakes     WakeStats     // the carriers' parks and wake-ups
	Traj      []QPoint      // adaptive: the controller's updates
}

// QPoint is one update of the adaptive quantum controller.
type QPoint struct {
	Quantum int64   `json:"quantum_ns"`
	Load    float64 `json:"load"`
	Alpha   float64 `json:"tail_index"`
}

// coopChunk > 0: clock-checked slices, a yield point every coopChunk
// iterations of the request's busy loop.
func xtcTail(arrival []int64, iters []uint64, carriers int, slice time.Duration,
	adaptive, polled bool, coopChunk uint64, adaptPeriod, timeout time.Duration) (*tailResult, Status, string) {
	n := len(arrival)
	if n == 0 || len(iters) != n {
		return nil, StatusFail, "empty or mismatched schedule"
	}
	sz := C.size_t(n) * 8
	cArr := C.malloc(sz)
	cIt := C.malloc(sz)
	cDone := C.malloc(sz)
	cLag := C.malloc(sz)
	defer C.free(cArr)
	defer C.free(cIt)
	defer C.free(cDone)
	defer C.free(cLag)
	copy(unsafe.Slice((*int64)(cArr), n), arrival)
	copy(unsafe.Slice((*uint64)(cIt), n), iters)

	t := (*C.xb_tail_t)(C.calloc(1, C.size_t(unsafe.Sizeof(C.xb_tail_t{}))))
	defer C.free(unsafe.Pointer(t))
	t.n = C.int64_t(n)
	t.arrival = (*C.int64_t)(cArr)
	t.iters = (*C.uint64_t)(cIt)
	t.carriers = C.int(carriers)
	t.slice_ns = C.int64_t(slice.Nanoseconds())
	t.coop_chunk = C.uint64_t(coopChunk)
	if adaptive {
		t.adaptive = 1
		t.adapt_period_ns = C.int64_t(adaptPeriod.Nanoseconds())
	}
	t.timeout_ns = C.int64_t(timeout.Nanoseconds())
	t.ingress = C.XB_INGRESS_SUBMIT
	if polled {
		t.ingress = C.XB_INGRESS_POLL
	}
	t.done = (*C.int64_t)(cDone)
	t.lag = (*C.int64_t)(cLag)
	why := whyBuf()
	st := Status(C.xb_tail_run(t, why))
	w := takeWhy(why)
	if st != StatusOK {
		return nil, st, w
	}
	r := &tailResult{
		Done:      append([]int64(nil), unsafe.Slice((*int64)(cDone), n)...),
		Lag:       append([]int64(nil), unsafe.Slice((*int64)(cLag), n)...),
		Completed: int64(t.completed),
		Dropped:   int64(t.dropped),
		TimedOut:  t.timed_out != 0,
		Retries:   int64(t.spawn_retries),
		Quantum:   time.Duration(t.final_quantum_ns),
		TailIndex: float64(t.tail_index),
		Preempts:  uint64(t.preemptions),
		CostNs:    int64(t.cost_ns),
		Fires:     uint64(t.timer_fires),
		Direct:    uint64(t.direct),
		Fallbacks: uint64(t.fallbacks),
		Stretches: uint64(t.stretches),
		OvhNs:     int64(t.overhead_ns),
		Wakes: WakeStats{Parks: uint64(t.parks), Wakes: uint64(t.wakes),
			Slow: uint64(t.slow_wakes), TotalNs: int64(t.wake_ns),
			MaxNs: int64(t.wake_max_ns)},
	}
	for i := 0; i < int(t.n_traj) && i < C.XB_TRAJ; i++ {
		r.Traj = append(r.Traj, QPoint{Quantum: int64(t.traj_q[i]),
			Load: float64(t.traj_load[i]), Alpha: float64(t.traj_alpha[i])})
	}
	return r, st, w
}

// fairSample is the state of the three counters at time T (from start).
type fairSample struct {
	T      time.Duration
	Counts [3]int64
}

func xtcFair(dur, window time.Duration, shares [3]int, preempt bool,
	slice time.Duration, chunkIters uint64) ([]fairSample, Status, string) {
	maxW := int(dur/window) + 4
	buf := C.calloc(C.size_t(maxW*4), 8)
	defer C.free(buf)
	f := (*C.xb_fair_t)(C.calloc(1, C.size_t(unsafe.Sizeof(C.xb_fair_t{}))))
	defer C.free(unsafe.Pointer(f))
	f.dur_ns = C.int64_t(dur.Nanoseconds())
	f.window_ns = C.int64_t(window.Nanoseconds())
	for i := 0; i < 3; i++ {
		f.shares[i] = C.int(shares[i])
	}
	if preempt {
		f.preempt = 1
	}
	f.slice_ns = C.int64_t(slice.Nanoseconds())
	f.chunk_iters = C.uint64_t(chunkIters)
	f.max_windows = C.int(maxW)
	f.samples = (*C.int64_t)(buf)
	why := whyBuf()
	st := Status(C.xb_fair_run(f, why))
	w := takeWhy(why)
	if st != StatusOK {
		return nil, st, w
	}
	raw := unsafe.Slice((*int64)(buf), maxW*4)
	out := make([]fairSample, int(f.nsamples))
	for i := range out {
		out[i].T = time.Duration(raw[4*i])
		copy(out[i].Counts[:], raw[4*i+1:4*i+4])
	}
	return out, st, w
}

func xtcHog(withHog bool, probes int, sleep, slice, budget time.Duration) ([]int64, Status, string) {
	late := C.calloc(C.size_t(probes), 8)
	defer C.free(late)
	h := (*C.xb_hog_t)(C.calloc(1, C.size_t(unsafe.Sizeof(C.xb_hog_t{}))))
	defer C.free(unsafe.Pointer(h))
	if withHog {
		h.with_hog = 1
	}
	h.probes = C.int(probes)
	h.sleep_ns = C.int64_t(sleep.Nanoseconds())
	h.budget_ns = C.int64_t(budget.Nanoseconds())
	h.slice_ns = C.int64_t(slice.Nanoseconds())
	h.late = (*C.int64_t)(late)
	why := whyBuf()
	st := Status(C.xb_hog_run(h, why))
	w := takeWhy(why)
	if st != StatusOK {
		return nil, st, w
	}
	n := int(h.done_probes)
	return append([]int64(nil), unsafe.Slice((*int64)(late), probes)[:n]...), st, w
}

// The Go+cgo hog: the same C kernel, inside one cgo call.
func cHogArm()           { C.xb_hog_kernel_arm() }
func cHogKernel() uint64 { return uint64(C.xb_hog_kernel()) }
func cHogStop()          { C.xb_hog_kernel_stop() }
