package main

import (
	"fmt"
	"runtime"
	"time"
)

// goSpin is the Go twin of xb_spin: one 64-bit LCG step per iteration, a
// single dependency chain the compiler cannot fold. The result is returned
// so the loop is never dead code.
//
//go:noinline
func goSpin(iters uint64) uint64 {
	x := iters | 1
	for i := uint64(0); i < iters; i++ {
		x = x*6364136223846793005 + 1442695040888963407
	}
	return x
}

// coopChunk is about a microsecond of the busy loop at itersPerNs: how
// often a cooperative contender passes its yield point.
func coopChunk(itersPerNs float64) uint64 {
	return max(uint64(1000*itersPerNs), 1)
}

// goSched: goSpinSched's cooperative slice (zero: none).
type goSched struct {
	chunk uint64
	slice time.Duration
}

// goSpinSched is goSpin with a cooperative slice, Go's side of xtc's
// clock-checked slices: every chunk iterations it reads the clock and
// calls runtime.Gosched once the slice has passed since the goroutine
// started or last yielded.
func goSpinSched(iters uint64, y goSched) uint64 {
	x := iters | 1
	since := time.Now()
	for iters > 0 {
		n := min(iters, y.chunk)
		for i := uint64(0); i < n; i++ {
			x = x*6364136223846793005 + 1442695040888963407
		}
		iters -= n
		if iters > 0 && time.Since(since) >= y.slice {
			runtime.Gosched()
			since = time.Now()
		}
	}
	return x
}

// goCalibrate returns iterations per ns of goSpin: the best of several
// timed runs, the least disturbed by other load on the machine.
func goCalibrate() float64 {
	const n = 2_000_000
	sink := goSpin(n / 4)
	best := time.Duration(1 << 62)
	for r := 0; r < 7; r++ {
		t0 := time.Now()
		sink += goSpin(n)
		if d := time.Since(t0); d > 0 && d < best {
			best = d
		}
	}
	keep(sink)
	return float64(n) / float64(best.Nanoseconds())
}

var keepSink uint64

// keep makes a value observable so the computation producing it stays.
//
//go:noinline
func keep(v uint64) {
	if v == 0x5eed {
		keepSink++
	}
}

// Calibration holds the busy-loop rates of both languages.
type Calibration struct {
	GoItersPerNs float64 `json:"go_iters_per_ns"`
	CItersPerNs  float64 `json:"c_iters_per_ns"`
	Warning      string  `json:"warning,omitempty"`
}

// calibrate measures both loops in alternation, several rounds, keeping
// each side's best: a burst of outside load during one round then cannot
// skew one language against the other. The two loops are the same
// dependency chain, so their rates should agree; Warning says when they do
// not (the work of one side would then be mis-sized).
func calibrate() Calibration {
	var c Calibration
	for round := 0; round < 5; round++ {
		c.GoItersPerNs = max(c.GoItersPerNs, goCalibrate())
		c.CItersPerNs = max(c.CItersPerNs, cCalibrate())
		if round >= 1 && ratioWithin(c.GoItersPerNs, c.CItersPerNs, 0.15) {
			break
		}
	}
	if !ratioWithin(c.GoItersPerNs, c.CItersPerNs, 0.15) {
		c.Warning = fmt.Sprintf("the C and Go busy loops calibrated %.3f and %.3f it/ns, "+
			"more than 15%% apart: the machine was busy during calibration", c.CItersPerNs,
			c.GoItersPerNs)
	}
	return c
}

func ratioWithin(a, b, tol float64) bool {
	if a <= 0 || b <= 0 {
		return false
	}
	r := a / b
	return r <= 1+tol && r >= 1/(1+tol)
}
