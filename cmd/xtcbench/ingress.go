package main

// How the Go rows of the tail workload learn of their requests.
//
// netpoll (the default): a C generator thread outside Go (xb_ingress.c)
// spins until each arrival, as the core's own generator does, and the Go
// side hears of it through an eventfd in the netpoller: a reader goroutine
// drains the published arrivals and starts one goroutine per request, the
// way a net/http server's connection goroutines do. The Go runtime is
// woken by the kernel, as by a network card, and its Ps are all the
// service's.
//
// netpoll-sleep: the same thread sleeping until each arrival instead of
// spinning, so that the load leaves both CPUs of a small machine to the
// service (its timer's wake-up latency is then in every row's lag).
//
// goroutine (the default, the rows' first form): a generator
// goroutine locked to its thread spins on one of Go's Ps and starts the
// request goroutines itself. Each `go` lands in that P's runnext, which
// the other P may take only after the runtime's steal back-off (60-90 µs
// on a small VM): a start-up stage no server fed by the network has.

/*
#include "xb.h"
*/
import "C"

import (
	"errors"
	"os"
	"runtime"
	"sync/atomic"
	"time"
	"unsafe"
)

// Go ingress kinds (--go-ingress).
const (
	IngressGoroutine    = "goroutine"
	IngressNetpoll      = "netpoll"
	IngressNetpollSleep = "netpoll-sleep"
)

// Ingresses lists the kinds, the default first.
var Ingresses = []string{IngressGoroutine, IngressNetpoll, IngressNetpollSleep}

// replay calls start(i) on one goroutine for each arrival of s, at its
// time, and returns each arrival's lag (ns late) once every arrival was
// started. *base is set before the first arrival: completion stamps are
// time.Since(*base), on the arrivals' clock. An error from the netpoll
// kinds means either that the generator could not be made (nothing was
// started) or that its eventfd failed (every arrival was still started,
// by polling): callers count their requests in start.
func replay(kind string, s *Schedule, base *time.Time, start func(i int)) (lag []int64, err error) {
	if kind == IngressGoroutine {
		return replayGoroutine(s, base, start), nil
	}
	return replayFromC(s, base, start, kind == IngressNetpollSleep)
}

func replayGoroutine(s *Schedule, base *time.Time, start func(i int)) []int64 {
	n := s.N()
	lag := make([]int64, n)
	*base = time.Now().Add(2 * time.Millisecond)
	genDone := make(chan struct{})
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		for i := 0; i < n; i++ {
			target := time.Duration(s.Arrival[i])
			var now time.Duration
			for {
				if now = time.Since(*base); now >= target {
					break
				}
			}
			lag[i] = int64(now - target)
			start(i)
		}
		close(genDone)
	}()
	<-genDone
	return lag
}

func replayFromC(s *Schedule, base *time.Time, start func(i int), sleep bool) ([]int64, error) {
	n := s.N()
	lag := make([]int64, n)
	var why [C.XB_WHY]C.char
	var arr *C.int64_t
	if n > 0 {
		arr = (*C.int64_t)(unsafe.Pointer(&s.Arrival[0]))
	}
	sl := C.int(0)
	if sleep {
		sl = 1
	}
	g := C.xb_gen_new(arr, C.int64_t(n), sl, &why[0])
	if g == nil {
		return lag, errors.New(C.GoString(&why[0]))
	}
	f := os.NewFile(uintptr(C.xb_gen_fd(g)), "xtcbench-arrivals")
	tail := (*int64)(unsafe.Pointer(C.xb_gen_tail(g)))
	armed := (*int32)(unsafe.Pointer(C.xb_gen_armed(g)))
	// the two clocks are both CLOCK_MONOTONIC; anchor Go's reading to
	// the generator's base by the tightest of a few C-Go-C read triples
	// (~100 ns each; a preempted one is not picked)
	var cRef int64
	var goRef time.Time
	best := int64(-1)
	for k := 0; k < 8; k++ {
		c1 := int64(C.xb_now())
		gt := time.Now()
		c2 := int64(C.xb_now())
		if best < 0 || c2-c1 < best {
			best, cRef, goRef = c2-c1, c1+(c2-c1)/2, gt
		}
	}
	if C.xb_gen_start(g, C.int64_t(2*time.Millisecond), &why[0]) != C.XB_OK {
		C.xb_gen_free(g, nil)
		f.Close()
		return lag, errors.New(C.GoString(&why[0]))
	}
	*base = goRef.Add(time.Duration(int64(C.xb_gen_base(g)) - cRef))
	var buf [8]byte
	var rerr error
	for next := 0; next < n; {
		if t := int(atomic.LoadInt64(tail)); next < t {
			for ; next < t; next++ {
				start(next)
			}
			continue
		}
		if rerr != nil {
			// the eventfd failed (never seen): poll, the run goes on
			// and reports the error
			runtime.Gosched()
			continue
		}
		atomic.StoreInt32(armed, 1)
		if int(atomic.LoadInt64(tail)) > next {
			// published meanwhile; a ring that comes anyway is a
			// spurious wake-up next time
			atomic.StoreInt32(armed, 0)
			continue
		}
		_, rerr = f.Read(buf[:])
	}
	var out *C.int64_t
	if n > 0 {
		out = (*C.int64_t)(unsafe.Pointer(&lag[0]))
	}
	C.xb_gen_free(g, out)
	f.Close()
	return lag, rerr
}
