//go:build cgo

package xtc

import (
	"context"
	"os"
	"sort"
	"testing"
	"time"

	"github.com/xtc-go/xtc/internal/cfuture"
	"github.com/xtc-go/xtc/internal/ctest"
)

// Round trip of Exec.Go on an empty C function, next to what it is
// budgeted against (a plain cgo call plus one netpoller wake-up: a pipe
// write from another goroutine waking a reader parked in the netpoller)
// and to Submit, interleaved in one run: 5 repetitions of 2000 calls per
// variant after a warm-up; medians of the per-repetition p50/p99.
//
//	go test -run '^$' -bench BenchmarkGoCallRoundTrip -benchtime 1x .
func BenchmarkGoCallRoundTrip(b *testing.B) {
	e := startService(b, 1)
	l := e.Loop(0)
	ctx := context.Background()
	pr, pw, err := os.Pipe()
	if err != nil {
		b.Fatal(err)
	}
	defer pr.Close()
	defer pw.Close()
	kick := make(chan struct{})
	go func() {
		for range kick {
			pw.Write([]byte{1})
		}
	}()
	defer close(kick)
	var buf [1]byte
	variants := []struct {
		name string
		op   func()
	}{
		{"cgo call (empty C function)", func() { ctest.GocbDepth() }},
		{"netpoller wake (pipe)", func() { kick <- struct{}{}; pr.Read(buf[:]) }},
		{"Submit + Future.Wait", func() {
			f, err := Submit(l, cfuture.AddOne, nil)
			if err != nil {
				b.Fatal(err)
			}
			f.Wait(ctx)
		}},
		{"Exec.Go (proc, empty C fn)", func() {
			if _, err := e.GoInt(ctx, ctest.Ident(), 1); err != nil {
				b.Fatal(err)
			}
		}},
		{"Exec.LaunchFn (1 slice) + Close", func() {
			f, err := e.LaunchFn(ctx, ctest.Ident(), nil, time.Millisecond)
			if err != nil {
				b.Fatal(err)
			}
			f.Close()
		}},
	}
	const reps, n = 5, 2000
	p50s := make([][]time.Duration, len(variants))
	p99s := make([][]time.Duration, len(variants))
	for _, v := range variants { // warm-up
		for i := 0; i < 200; i++ {
			v.op()
		}
	}
	lat := make([]time.Duration, n)
	for r := 0; r < reps; r++ {
		for k, v := range variants {
			for i := range lat {
				t0 := time.Now()
				v.op()
				lat[i] = time.Since(t0)
			}
			sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
			p50s[k] = append(p50s[k], lat[n/2])
			p99s[k] = append(p99s[k], lat[n*99/100])
		}
	}
	med := func(d []time.Duration) (m, lo, hi time.Duration) {
		s := append([]time.Duration(nil), d...)
		sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
		return s[len(s)/2], s[0], s[len(s)-1]
	}
	var cgo, wake, goCall time.Duration
	for k, v := range variants {
		m, lo, hi := med(p50s[k])
		m99, _, _ := med(p99s[k])
		b.Logf("%-30s p50 %9v (spread %v..%v)  p99 %9v", v.name, m, lo, hi, m99)
		switch k {
		case 0:
			cgo = m
		case 1:
			wake = m
		case 3:
			goCall = m
		}
	}
	budget := 2 * (cgo + wake)
	b.Logf("Exec.Go p50 / (2 x (cgo call + netpoller wake)) = %v / %v = %.2f (<= 1 meets the target)",
		goCall, budget, float64(goCall)/float64(budget))
	b.ReportMetric(float64(goCall.Nanoseconds()), "go-p50-ns")
	b.ReportMetric(float64(goCall)/float64(budget), "go/budget")
}
