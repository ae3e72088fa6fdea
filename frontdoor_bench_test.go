//go:build cgo

package xtc

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"sort"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/xtc-go/xtc/internal/cfuture"
	"github.com/xtc-go/xtc/internal/ctest"
)

// The front door's benchmarks, one per entry point that hands work from a
// goroutine to C (gocall.go). Round trip: one goroutine, an idle executor
// of one carrier, an empty C function; every variant interleaved with the
// others, 5 repetitions of 2000 calls after a warm-up, medians of the
// per-repetition p50/p99 with their spread. "gap" variants wait 100 us
// between calls, so the carrier and the completion server have gone to
// sleep before each one; the SetSpin row has the carrier poll 50 us before
// it parks (the other rows: its adaptive spin only, the default). The
// futex rows are the machine's floor for a gap row: no xtc, the call wakes
// a C thread parked on a futex. A plain thread keeps the kernel's default
// slice, so its tail also shows the wait for a busy CPU; the second one
// asks for the slice a parked carrier asks for (exec_carrier.c, kernel
// slice), the like-for-like floor.
//
//	go test -run '^$' -bench BenchmarkFrontDoorRoundTrip -benchtime 1x -v .
//
// (-v: without it the testing package keeps the first 10 lines of a
// benchmark's log, and the rows past them are lost)
func BenchmarkFrontDoorRoundTrip(b *testing.B) {
	e := startService(b, 1)
	l := e.Loop(0)
	ctx := context.Background()
	goInt := func() {
		if _, err := e.GoInt(ctx, ctest.Ident(), 1); err != nil {
			b.Fatal(err)
		}
	}
	// the default executor, a loop per CPU: a lone caller's calls stay on
	// one carrier (goCalls.pick)
	eAll := startService(b, 0)
	goIntAll := func() {
		if _, err := eAll.GoInt(ctx, ctest.Ident(), 1); err != nil {
			b.Fatal(err)
		}
	}
	if err := ctest.WakeStart(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(ctest.WakeStop)
	variants := []rtVariant{
		{"cgo call (empty C function)", func() { ctest.GocbDepth() }, false, nil},
		{"Exec.GoInt", goInt, false, nil},
		{"Exec.GoInt, a loop per CPU", goIntAll, false, nil},
		{"Exec.GoInt, 100us gap", goInt, true, nil},
		// the platform's floor for the row above: no xtc, a C thread
		// parked on a futex that the call wakes (with the default
		// kernel slice, and with a parked carrier's 100 us)
		{"futex wake of a parked thread, 100us gap", ctest.Wake, true, nil},
		{"the same, 100us kernel slice", ctest.WakeShortSlice, true, nil},
		{"Exec.GoInt, carrier SetSpin(50us)", goInt, false, func() {
			e.SetSpin(50 * time.Microsecond) // reset by the next variant
		}},
		{"Exec.GoInt, no caller spin", func() {
			defer func(d time.Duration) { callSpin = d }(callSpin)
			callSpin = 0
			goInt()
		}, false, nil},
		{"Exec.GoInt, 50us caller spin", func() {
			defer func(d time.Duration) { callSpin = d }(callSpin)
			callSpin = 50 * time.Microsecond
			goInt()
		}, false, nil},
		{"Exec.GoAsync + Wait", func() {
			r, err := e.GoAsync(ctest.Ident(), nil)
			if err != nil {
				b.Fatal(err)
			}
			r.Wait(ctx)
		}, false, nil},
		{"Submit + Future.Wait", func() {
			f, err := Submit(l, cfuture.AddOne, nil)
			if err != nil {
				b.Fatal(err)
			}
			f.Wait(ctx)
		}, false, nil},
		{"Exec.LaunchFn (1 slice) + Close", func() {
			f, err := e.LaunchFn(ctx, ctest.Ident(), nil, time.Millisecond)
			if err != nil {
				b.Fatal(err)
			}
			f.Close()
		}, false, nil},
	}
	p50s, p99s := roundTrips(variants, 5, 2000, func() {
		e.SetSpin(0) // the default: the carrier's adaptive spin
	})
	for k, v := range variants {
		m, lo, hi := medSpread(p50s[k])
		m99, lo99, hi99 := medSpread(p99s[k])
		b.Logf("%-32s p50 %9v [%v..%v]  p99 %9v [%v..%v]", v.name, m, lo, hi, m99, lo99, hi99)
		if v.name == "Exec.GoInt" {
			b.ReportMetric(float64(m.Nanoseconds()), "goint-p50-ns")
			b.ReportMetric(float64(m99.Nanoseconds()), "goint-p99-ns")
		}
		if v.name == "Exec.GoInt, 100us gap" {
			b.ReportMetric(float64(m.Nanoseconds()), "gap-p50-ns")
			b.ReportMetric(float64(m99.Nanoseconds()), "gap-p99-ns")
		}
		if v.name == "the same, 100us kernel slice" {
			b.ReportMetric(float64(m.Nanoseconds()), "futex-gap-p50-ns")
			b.ReportMetric(float64(m99.Nanoseconds()), "futex-gap-p99-ns")
		}
	}
	logLoad(b)
}

// hammer runs op per times in each of g goroutines and returns once they
// all ended (an error is reported and ends its goroutine).
func hammer(tb testing.TB, g, per int, op func() error) {
	var wg sync.WaitGroup
	for k := 0; k < g; k++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < per; i++ {
				if err := op(); err != nil {
					tb.Error(err)
					return
				}
			}
		}()
	}
	waitAll(tb, &wg, "the calls")
}

// rtVariant is one row of a round-trip benchmark: op is one call; gap
// waits 100 us (yielding) before each; pre runs before each repetition.
type rtVariant struct {
	name string
	op   func()
	gap  bool
	pre  func()
}

// roundTrips times n calls of each variant per repetition, the variants
// interleaved within each repetition (after a 200-call warm-up of each,
// and 50 calls before each timed run, to which the carrier adapts);
// reset runs before each variant's run. The p50s and p99s per variant,
// one per repetition.
func roundTrips(variants []rtVariant, reps, n int, reset func()) (p50s, p99s [][]time.Duration) {
	p50s = make([][]time.Duration, len(variants))
	p99s = make([][]time.Duration, len(variants))
	for _, v := range variants {
		for i := 0; i < 200; i++ {
			v.op()
		}
	}
	lat := make([]time.Duration, n)
	for r := 0; r < reps; r++ {
		for k, v := range variants {
			if reset != nil {
				reset()
			}
			if v.pre != nil {
				v.pre()
			}
			for i := 0; i < 50; i++ {
				v.op()
			}
			for i := range lat {
				if v.gap {
					t0 := time.Now()
					for time.Since(t0) < 100*time.Microsecond {
						runtime.Gosched()
					}
				}
				t0 := time.Now()
				v.op()
				lat[i] = time.Since(t0)
			}
			sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
			p50s[k] = append(p50s[k], lat[n/2])
			p99s[k] = append(p99s[k], lat[n*99/100])
		}
	}
	return p50s, p99s
}

func medSpread(d []time.Duration) (m, lo, hi time.Duration) {
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2], s[0], s[len(s)-1]
}

func logLoad(b *testing.B) {
	if la, err := os.ReadFile("/proc/loadavg"); err == nil {
		b.Logf("load average: %s", la[:len(la)-1])
	}
}

// Throughput of Exec.GoInt on an empty C function from G goroutines, each
// calling in a loop (one carrier): calls/s and allocs/op (the synchronous
// path allocates nothing per call).
//
//	go test -run '^$' -bench 'BenchmarkFrontDoorThroughput' -benchtime 200000x .
func BenchmarkFrontDoorThroughput(b *testing.B) {
	for _, g := range []int{1, 8, 64, 512} {
		for _, carriers := range []int{1, 2} {
			b.Run(fmt.Sprintf("G=%d/carriers=%d", g, carriers), func(b *testing.B) {
				e := startService(b, carriers)
				ctx := context.Background()
				fn := ctest.Ident()
				for i := 0; i < 1000; i++ { // warm: the table, the stacks
					e.GoInt(ctx, fn, 1)
				}
				per := max(b.N/g, 1)
				b.ReportAllocs()
				b.ResetTimer()
				t0 := time.Now()
				hammer(b, g, per, func() error {
					_, err := e.GoInt(ctx, fn, 1)
					return err
				})
				el := time.Since(t0)
				b.StopTimer()
				b.ReportMetric(float64(per*g)/el.Seconds(), "calls/s")
				sub, ring, spun, fb := e.callStats()
				b.Logf("submitted %d: through the ring %d, to a spinner %d, past a full ring %d", sub, ring, spun, fb)
			})
		}
	}
}

// Throughput of the plain cgo call (the reference: the same goroutines
// calling the empty C function directly).
func BenchmarkFrontDoorThroughputCgo(b *testing.B) {
	for _, g := range []int{1, 64} {
		b.Run(fmt.Sprintf("G=%d", g), func(b *testing.B) {
			var wg sync.WaitGroup
			per := b.N / g
			if per == 0 {
				per = 1
			}
			t0 := time.Now()
			for k := 0; k < g; k++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := 0; i < per; i++ {
						ctest.GocbDepth()
					}
				}()
			}
			wg.Wait()
			b.ReportMetric(float64(per*g)/time.Since(t0).Seconds(), "calls/s")
		})
	}
}

// processCPU is the process's CPU time so far (user + system).
func processCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// A call from a goroutine started for it (what a handler is: net/http
// starts one per connection, errgroup one per task), 64 in flight, one
// carrier. Next to the same goroutines making the plain cgo call, it
// counts what the front door adds, the new goroutine's stack included: a
// call path deeper than the 2 KB a goroutine starts with copied the
// stack on every call (0.9 us of CPU per call; gocall.go, stackFrugal).
//
//	go test -run '^$' -bench BenchmarkFrontDoorPerGoroutine -benchtime 200000x .
func BenchmarkFrontDoorPerGoroutine(b *testing.B) {
	e := startService(b, 1)
	fn := ctest.Ident()
	cctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for _, v := range []struct {
		name string
		call func()
	}{
		{"cgo", func() { ctest.GocbDepth() }},
		{"GoInt", func() { _, _ = e.GoInt(context.Background(), fn, 1) }},
		{"GoInt, a ctx that can end", func() { _, _ = e.GoInt(cctx, fn, 1) }},
	} {
		b.Run(v.name, func(b *testing.B) {
			sem := make(chan struct{}, 64)
			var wg sync.WaitGroup
			run := func(n int) {
				for i := 0; i < n; i++ {
					sem <- struct{}{}
					wg.Add(1)
					go func() {
						v.call()
						<-sem
						wg.Done()
					}()
				}
				wg.Wait()
			}
			run(1000) // warm: the table, its slots' channels
			b.ResetTimer()
			c0, t0 := processCPU(), time.Now()
			run(b.N)
			el, cpu := time.Since(t0), processCPU()-c0
			b.ReportMetric(float64(b.N)/el.Seconds(), "calls/s")
			b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/call")
		})
	}
}

// Idle cost: after a burst of calls the executor, its carrier and the
// completion server go quiet; the process's CPU time over the next second
// (after a 200 ms settle, so every spin has ended) as a fraction of one CPU.
//
//	go test -run '^$' -bench BenchmarkFrontDoorIdleCPU -benchtime 1x .
func BenchmarkFrontDoorIdleCPU(b *testing.B) {
	for _, carriers := range []int{1, 0} { // 0: a loop per CPU
		b.Run(fmt.Sprintf("carriers=%d", carriers), func(b *testing.B) {
			e, err := NewExec(carriers) // what a service gets
			require.NoError(b, err)
			_, err = e.Start()
			require.NoError(b, err)
			b.Cleanup(func() { require.NoError(b, e.Close()) })
			ctx := context.Background()
			for i := 0; i < 10000; i++ {
				e.GoInt(ctx, ctest.Ident(), 1)
			}
			time.Sleep(200 * time.Millisecond)
			c0, t0 := processCPU(), time.Now()
			time.Sleep(time.Second)
			frac := float64(processCPU()-c0) / float64(time.Since(t0))
			b.Logf("idle executor of %d loops: %.2f%% of a CPU over 1 s", len(e.loops), 100*frac)
			b.ReportMetric(100*frac, "idle-cpu-%")
			logLoad(b)
		})
	}
}
