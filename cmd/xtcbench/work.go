package main

import (
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
}

func calibrate() Calibration {
	return Calibration{GoItersPerNs: goCalibrate(), CItersPerNs: cCalibrate()}
}
