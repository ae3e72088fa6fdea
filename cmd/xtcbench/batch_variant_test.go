package main

import (
	"os"
	"strconv"
	"testing"
	"time"
)

// TestBatchVariantCPU runs one variant of the batch section on its own,
// XTCBENCH_BATCH_REPS times (default 3) over the same mixes as the report,
// and logs per repetition its wall and CPU time (less setup, as the
// report counts it), the steps and
// member-rounds it ran and their work (the floor): CPU - floor is what the
// variant spends besides the step work. Skipped unless
// XTCBENCH_BATCH_VARIANT names a variant (xtc-do, go, xtc, go-engine,
// static); interleave two binaries with it to compare builds:
//
//	XTCBENCH_BATCH_VARIANT=xtc-do go test -run TestBatchVariantCPU -v .
func TestBatchVariantCPU(t *testing.T) {
	key := os.Getenv("XTCBENCH_BATCH_VARIANT")
	if key == "" {
		t.Skip("XTCBENCH_BATCH_VARIANT not set")
	}
	runs := map[string]func(batchMix, float64) ([]time.Duration, time.Duration, error){
		"xtc-do": runBatchXtcDo, "go": runBatchGo, "xtc": runBatchXtc,
		"go-engine": runBatchGoEngine, "static": runBatchStatic,
	}
	run, ok := runs[key]
	if !ok {
		t.Fatalf("unknown variant %q", key)
	}
	reps, _ := strconv.Atoi(os.Getenv("XTCBENCH_BATCH_REPS"))
	if reps <= 0 {
		reps = 3
	}
	const n = 2000 // the --short section's requests
	ipn := goCalibrate()
	for r := 0; r < reps; r++ {
		m := makeBatchMix(n, int64(4242+r))
		stepCount.Store(0)
		memberCount.Store(0)
		setupCPU = 0
		c0 := processCPU()
		_, wall, err := run(m, ipn)
		cpu := processCPU() - c0 - setupCPU
		if err != nil {
			t.Fatal(err)
		}
		floor := time.Duration(stepCount.Load())*batchC0 + time.Duration(memberCount.Load())*batchC1
		t.Logf("%s wall %v cpu %v (setup %v left out) floor %v beyond %v steps %d member-rounds %d",
			key, wall.Round(time.Microsecond), cpu.Round(time.Microsecond),
			setupCPU.Round(time.Microsecond), floor, (cpu - floor).Round(time.Microsecond),
			stepCount.Load(), memberCount.Load())
	}
}
