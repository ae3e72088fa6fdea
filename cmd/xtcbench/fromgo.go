package main

// The tail workload served from Go through xtc's public Go API: the
// ingress and the goroutine per request of goTail, but each request
// goroutine hands its C work to an executor with Exec.GoInt (what a Go
// service calls from a net/http handler) instead of calling it by cgo.
// Same schedule, warm-up, repetitions and stall gate as every tail
// contender; next to the "gocgo" row (the same goroutines, plain cgo) it
// shows what xtc's scheduling buys a Go program once the front door's cost
// is paid (gocall.go).

/*
#include "xb.h"
*/
import "C"

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/xtc-go/xtc"
)

// xtcGoTail replays s with one goroutine per request calling e.GoInt on
// an executor of `carriers` loops with the given slice (0: no
// preemption); coopChunk > 0 keeps the slice with yield points instead of
// interrupts. It returns the completion stamps, the generator lag, the
// calls refused (ErrAgain or another error) and why the run failed ("" ok).
func xtcGoTail(s *Schedule, iters []uint64, carriers int, slice time.Duration,
	coopChunk uint64, drain time.Duration, ingress string) (done, lag []int64, refused int64, why string) {
	n := s.N()
	done = make([]int64, n)
	lag = make([]int64, n)
	for i := range done {
		done[i] = -1
	}
	e, err := xtc.NewExec(carriers)
	if err != nil {
		return done, lag, 0, err.Error()
	}
	defer e.Close()
	if slice > 0 {
		if err := e.SetPreempt(slice); err != nil {
			return done, lag, 0, err.Error()
		}
		if coopChunk > 0 {
			if err := e.SetPreemptCoop(true); err != nil {
				return done, lag, 0, err.Error()
			}
		} else {
			if !xtc.PreemptInvoluntarySupported() {
				return done, lag, 0, "no involuntary preemption on this platform"
			}
			xtc.PreemptSetInvoluntary(true)
			defer xtc.PreemptSetInvoluntary(false)
		}
	}
	if _, err := e.Start(); err != nil {
		return done, lag, 0, err.Error()
	}
	fn := unsafe.Pointer(C.xb_spin_call_fn())
	if coopChunk > 0 {
		fn = unsafe.Pointer(C.xb_spin_call_coop_fn())
	}
	prev := runtime.GOMAXPROCS(carriers + 1)
	defer runtime.GOMAXPROCS(prev)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	var nref atomic.Int64
	var base time.Time
	lag, err = replay(ingress, s, &base, func(i int) {
		wg.Add(1) // per started request (goTail)
		arg := int64(iters[i])
		if coopChunk > 0 {
			arg |= int64(coopChunk) << 40
		}
		go func() {
			defer wg.Done()
			if _, err := e.GoInt(ctx, fn, arg); err != nil {
				if !errors.Is(err, context.Canceled) {
					nref.Add(1)
				}
				return
			}
			done[i] = int64(time.Since(base))
		}()
	})
	if err != nil {
		why = "arrivals: " + err.Error()
	}
	// a bounded drain, as for the C-driven xtc runs; what is left then
	// is cancelled (its requests count as not completed)
	ended := make(chan struct{})
	go func() { wg.Wait(); close(ended) }()
	select {
	case <-ended:
	case <-time.After(drain):
		cancel()
		<-ended
		why = "timed out: the backlog did not drain"
	}
	return done, lag, nref.Load(), why
}
