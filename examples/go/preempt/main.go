// Command preempt time-slices a C kernel that never yields next to short
// requests, inside a Go program.
//
// The kernel (crunch, in this file's cgo preamble) is a pure CPU loop with
// no yield point and no library call: Go cannot preempt it (a cgo call is
// never preempted) and a cooperative runtime would let it own its carrier
// until it finishes. On an xtc executor with a slice (Exec.SetPreempt) and
// the involuntary path on, the runtime interrupts it at its deadline, saves
// every register, runs the queued short requests, and resumes it exactly
// where it was. The program runs the same workload twice, without and with
// preemption, and prints the short requests' latency and the kernel's
// result (identical in both runs: preemption never changes what the kernel
// computes). A third run shows the other way to slice: the same kernel
// with a yield point (xtc_yield_if_due) every few thousand iterations, on
// an executor whose slices are clock-checked (Exec.SetPreemptCoop): no
// timer and no signal at all, which is what to use where an interrupt is
// expensive (a virtual machine) and the code can carry the points.
//
//	go run ./examples/go/preempt
package main

/*
#cgo CFLAGS: -I${SRCDIR}/../../../csrc/include -std=gnu11
#include <stdint.h>
#include "xtc.h"

// ~0.3 s of arithmetic; never yields, never calls anything.
XTC_PREEMPTIBLE static intptr_t crunch(void *arg)
{
	uint64_t n = (uint64_t)(uintptr_t)arg, x = 88172645463325252ull;
	for (uint64_t i = 0; i < n; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
	}
	return (intptr_t)(x >> 1);
}

// crunch with a preemption point every 4096 iterations: on a
// clock-checked executor it yields there once its slice has ended.
XTC_PREEMPTIBLE static intptr_t crunch_points(void *arg)
{
	uint64_t n = (uint64_t)(uintptr_t)arg, x = 88172645463325252ull;
	for (uint64_t i = 0; i < n; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		if ((i & 4095) == 0)
			xtc_yield_if_due();
	}
	return (intptr_t)(x >> 1);
}

// A short request: a few microseconds of work.
static intptr_t request(void *arg)
{
	uint64_t x = (uint64_t)(uintptr_t)arg + 1;
	for (int i = 0; i < 1000; i++)
		x = x * 6364136223846793005ull + 1442695040888963407ull;
	return (intptr_t)(x >> 1);
}

static void *crunch_fn(void) { return (void *)crunch; }
static void *crunch_points_fn(void) { return (void *)crunch_points; }
static void *u64_arg(uint64_t n) { return (void *)(uintptr_t)n; }
static void *request_fn(void) { return (void *)request; }
*/
import "C"

import (
	"context"
	"fmt"
	"log"
	"sort"
	"time"

	"github.com/xtc-go/xtc"
)

const kernelIters = 300_000_000

func run(slice time.Duration, points bool) (lat []time.Duration, kernel int64, kernelTime time.Duration) {
	e, err := xtc.ExecInit(1) // one carrier: the kernel and the requests share it
	if err != nil {
		log.Fatal(err)
	}
	defer e.Fini()
	e.SetServiceMode(true)
	if points {
		if err := e.SetPreemptCoop(true); err != nil {
			log.Fatal(err)
		}
	}
	if slice > 0 {
		if err := e.SetPreempt(slice); err != nil {
			log.Fatal(err)
		}
	}
	xtc.PreemptSetInvoluntary(slice > 0 && !points)
	defer xtc.PreemptSetInvoluntary(false)
	r, err := e.Start()
	if err != nil {
		log.Fatal(err)
	}
	loop := e.Loop(0)
	t0 := time.Now()
	fn := C.crunch_fn()
	if points {
		fn = C.crunch_points_fn()
	}
	k, err := xtc.Dispatch(loop, fn, C.u64_arg(kernelIters))
	if err != nil {
		log.Fatal(err)
	}
	time.Sleep(10 * time.Millisecond) // the kernel owns the carrier now
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i := 0; i < 20 && !k.Ready(); i++ {
		s := time.Now()
		f, err := xtc.Dispatch(loop, C.request_fn(), C.u64_arg(C.uint64_t(i)))
		if err != nil {
			log.Fatal(err)
		}
		if _, err := f.Wait(ctx); err != nil {
			log.Fatal(err)
		}
		lat = append(lat, time.Since(s))
	}
	kernel, err = k.Wait(ctx)
	if err != nil {
		log.Fatal(err)
	}
	kernelTime = time.Since(t0)
	_ = e.Stop()
	_ = r.Wait(context.Background())
	return lat, kernel, kernelTime
}

func summary(lat []time.Duration) string {
	if len(lat) == 0 {
		return "no request ran while the kernel did"
	}
	s := append([]time.Duration(nil), lat...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return fmt.Sprintf("%d requests, median %v, max %v",
		len(s), s[len(s)/2].Round(time.Microsecond), s[len(s)-1].Round(time.Microsecond))
}

func main() {
	if !xtc.PreemptInvoluntarySupported() {
		fmt.Println("involuntary preemption is not available on this platform")
		return
	}
	lat0, k0, t0 := run(0, false)
	fmt.Printf("cooperative only:         %s; kernel %v\n", summary(lat0), t0.Round(time.Millisecond))
	lat1, k1, t1 := run(200*time.Microsecond, false)
	fmt.Printf("200us slice, involuntary: %s; kernel %v\n", summary(lat1), t1.Round(time.Millisecond))
	st, sent := xtc.PreemptStatsGlobal()
	fmt.Printf("preemptions %d (signals sent %d, deferred %d)\n", st.Preemptions, sent, st.Deferrals)
	lat2, k2, t2 := run(200*time.Microsecond, true)
	fmt.Printf("200us slice, clock-checked at the kernel's yield points: %s; kernel %v\n",
		summary(lat2), t2.Round(time.Millisecond))
	_, sent2 := xtc.PreemptStatsGlobal()
	fmt.Printf("signals sent during that run: %d\n", sent2-sent)
	if k0 != k1 || k1 != k2 {
		log.Fatalf("kernel results differ: %d, %d, %d", k0, k1, k2)
	}
	fmt.Println("kernel result identical in all three runs:", k1)
}
