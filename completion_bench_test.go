//go:build cgo

package xtc

import (
	"context"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/xtc-go/xtc/internal/cfuture"
)

// Round trip of one Submit: goroutine -> loop inbox -> fiber runs a trivial
// C function on a carrier -> completion ring + eventfd doorbell -> the
// completion goroutine (netpoller) -> the waiting goroutine. Reported as
// p50/p99 per round trip, next to the same shape done entirely in Go (a
// worker goroutine answering over channels), measured in the same run.

func percentiles(ds []time.Duration) (p50, p99 time.Duration) {
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	return ds[len(ds)/2], ds[len(ds)*99/100]
}

func BenchmarkSubmitRoundTrip(b *testing.B) {
	e := startService(b, 1)
	l := e.Loop(0)
	ctx := context.Background()
	// Warm up: the first call pays thread and queue creation.
	for i := 0; i < 100; i++ {
		f, _ := Submit(l, cfuture.AddOne, nil)
		f.Wait(ctx)
	}
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		f, err := Submit(l, cfuture.AddOne, nil)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := f.Wait(ctx); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(t0))
	}
	b.StopTimer()
	p50, p99 := percentiles(lat)
	b.ReportMetric(float64(p50.Nanoseconds()), "p50-ns")
	b.ReportMetric(float64(p99.Nanoseconds()), "p99-ns")
}

// Go-only peer: a worker goroutine receives a request and replies.
func BenchmarkGoChannelRoundTrip(b *testing.B) {
	req := make(chan int64)
	resp := make(chan int64)
	go func() {
		for v := range req {
			resp <- v + 1
		}
	}()
	defer close(req)
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		req <- int64(i)
		<-resp
		lat = append(lat, time.Since(t0))
	}
	b.StopTimer()
	p50, p99 := percentiles(lat)
	b.ReportMetric(float64(p50.Nanoseconds()), "p50-ns")
	b.ReportMetric(float64(p99.Nanoseconds()), "p99-ns")
}

// Throughput with many Submits in flight (the doorbell rings once per
// batch the consumer drains). Depth 32 stays within a carrier's stack
// cache (64 stacks); at 256 most spawns map a fresh stack.
func BenchmarkSubmitPipelined(b *testing.B) {
	for _, depth := range []int{32, 256} {
		b.Run(fmt.Sprintf("depth=%d", depth), func(b *testing.B) {
			e := startService(b, 1)
			l := e.Loop(0)
			ctx := context.Background()
			fs := make([]*Future, 0, depth)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				f, err := Submit(l, cfuture.AddOne, nil)
				if err != nil {
					b.Fatal(err)
				}
				fs = append(fs, f)
				if len(fs) == depth {
					for _, f := range fs {
						f.Wait(ctx)
					}
					fs = fs[:0]
				}
			}
			for _, f := range fs {
				f.Wait(ctx)
			}
		})
	}
}
