package main

import (
	"fmt"
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
