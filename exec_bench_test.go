//go:build cgo

package xtc

import (
	"context"
	"runtime"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/xtc-go/xtc/internal/ctest"
)

// Fan-out/fan-in of small units of work on 2 carriers: xtc procs on a
// 2-loop executor (C workload, internal/ctest/exec.go) against goroutines
// with GOMAXPROCS=2, in the same run. Reported as ns per unit; the ratio
// is printed by BenchmarkExecFanout/ratio.
const fanoutN = 1_000_000

func goFanout(n int) time.Duration {
	prev := runtime.GOMAXPROCS(2)
	defer runtime.GOMAXPROCS(prev)
	var done atomic.Int64
	var wg sync.WaitGroup
	t0 := time.Now()
	for s := 0; s < 2; s++ {
		wg.Add(1)
		go func() { // one spawner per P, like one spawner proc per loop
			defer wg.Done()
			var inner sync.WaitGroup
			for i := 0; i < n/2; i++ {
				inner.Add(1)
				go func() {
					done.Add(1)
					inner.Done()
				}()
				if i&63 == 63 {
					runtime.Gosched() // as the xtc spawner yields
				}
			}
			inner.Wait()
		}()
	}
	wg.Wait()
	d := time.Since(t0)
	if done.Load() != int64(2*(n/2)) {
		return -1
	}
	return d
}

func median(ds []time.Duration) time.Duration {
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	return ds[len(ds)/2]
}

func BenchmarkExecFanout(b *testing.B) {
	b.Run("xtc", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			d := ctest.ExecFanout(fanoutN)
			b.ReportMetric(float64(d.Nanoseconds())/fanoutN, "ns/proc")
		}
	})
	b.Run("go", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			d := goFanout(fanoutN)
			b.ReportMetric(float64(d.Nanoseconds())/fanoutN, "ns/goroutine")
		}
	})
	b.Run("ratio", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			var xs, gs []time.Duration
			for r := 0; r < 3; r++ {
				xs = append(xs, ctest.ExecFanout(fanoutN))
				gs = append(gs, goFanout(fanoutN))
			}
			x, g := median(xs), median(gs)
			b.ReportMetric(float64(g)/float64(x), "xtc-throughput/go")
		}
	})
}

// Cross-thread spawn from a goroutine to a parked carrier: time from the
// spawn call to the C task's first run (both stamped in C, so neither the
// cgo call nor a Go-side wake is counted). The carrier has no fd armed, so
// it sleeps on a futex and the spawn's FUTEX_WAKE is the whole wake path;
// from the wake to the task running takes ~0.1 us. What remains is the
// kernel. Woken onto this goroutine's CPU, a carrier with the default
// kernel slice would queue behind the M until it blocks (8-15 us here), so
// a parked carrier asks EEVDF for a short slice and preempts it instead
// (exec.c, kslice). Woken onto a halted vCPU, the hypervisor makes the
// wake cost 15-25 us: on this 2-vCPU VM the figure is bimodal with the
// machine's load, so compare several runs.
func BenchmarkExecSpawnLatency(b *testing.B) {
	e, err := ExecInit(1)
	if err != nil {
		b.Fatal(err)
	}
	defer e.Fini()
	e.SetServiceMode(true)
	run, err := e.Start()
	if err != nil {
		b.Fatal(err)
	}
	time.Sleep(10 * time.Millisecond)
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		time.Sleep(300 * time.Microsecond) // the carrier parks
		if err := mkerr("xtc_exec_spawn_on", ctest.SpawnStamped(unsafe.Pointer(e.c))); err != nil {
			b.Fatal(err)
		}
		for ctest.StampedLatency() < 0 {
			// sleep, do not spin: a spinning goroutine (and the Go
			// scheduler's spinning Ms) would compete with the carrier
			// for this machine's two cores; the delay is stamped in C
			time.Sleep(20 * time.Microsecond)
		}
		lat = append(lat, ctest.StampedLatency())
	}
	b.StopTimer()
	e.Stop()
	run.Wait(context.Background())
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds()), "p50-ns")
	b.ReportMetric(float64(lat[len(lat)*9/10].Nanoseconds()), "p90-ns")
	b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds()), "p99-ns")
}

// Cross-thread submission of a Go function from a goroutine to a parked
// carrier: time from Submit to the function running on the carrier
// (includes the C-to-Go callback entry).
func BenchmarkExecSubmitLatency(b *testing.B) {
	e, err := ExecInit(1)
	if err != nil {
		b.Fatal(err)
	}
	defer e.Fini()
	e.SetServiceMode(true)
	run, err := e.Start()
	if err != nil {
		b.Fatal(err)
	}
	time.Sleep(10 * time.Millisecond)
	lat := make([]time.Duration, 0, b.N)
	ch := make(chan time.Duration, 1)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		time.Sleep(300 * time.Microsecond) // the carrier parks
		t0 := time.Now()
		if err := e.Submit(0, func() { ch <- time.Since(t0) }); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, <-ch)
	}
	b.StopTimer()
	e.Stop()
	run.Wait(context.Background())
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds()), "p50-ns")
	b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds()), "p99-ns")
}

// Sustained submissions from one goroutine (bounded ring, blocking when
// full).
func BenchmarkExecSubmitThroughput(b *testing.B) {
	e, err := ExecInit(1)
	if err != nil {
		b.Fatal(err)
	}
	defer e.Fini()
	e.SetServiceMode(true)
	run, err := e.Start()
	if err != nil {
		b.Fatal(err)
	}
	var done atomic.Int64
	fn := func() { done.Add(1) }
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := e.SubmitWithin(0, fn, -1); err != nil {
			b.Fatal(err)
		}
	}
	for done.Load() < int64(b.N) {
		runtime.Gosched()
	}
	b.StopTimer()
	e.Stop()
	run.Wait(context.Background())
}
