package main

// A diagnostic of the from-Go tail rows (fromgo.go): where a short
// request's sojourn goes. It replays an A1 schedule with the ingress of
// goTail and xtcGoTail (by default a goroutine locked to its thread,
// spinning until each arrival; by mode, the other ingresses of ingress.go)
// and one goroutine per request, and stamps every stage of each
// request on CLOCK_MONOTONIC:
//
//	arrival -> gostart   the request goroutine's first run
//	        -> kstart    the C kernel begins (xtcgo: submit, carrier wake,
//	                     queueing; gocgo: the cgo call's entry)
//	        -> kend      the kernel returns
//	        -> return    GoInt (or the cgo call) has returned in Go
//
// next to each thread's CPU and run-queue wait (/proc/self/task/*/
// schedstat) and the carrier's parks and wake-ups. Run by
// TestFromGoStages (stages_test.go) when XTCBENCH_STAGES is set; not part
// of the report.

/*
#cgo CFLAGS: -I${SRCDIR}/../../csrc/include -O2
#include <stdint.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include "xtc_preempt.h"

static uint64_t *xs_iters;
static int64_t *xs_kstart, *xs_kend;

static int64_t xs_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

// the tail kernel (xb_spin_call's loop), stamped; arg is the request's index
XTC_PREEMPTIBLE intptr_t xs_kernel(void *arg)
{
	intptr_t i = (intptr_t)arg;
	uint64_t iters = xs_iters[i], x = iters | 1;

	xs_kstart[i] = xs_now();
	for (uint64_t k = 0; k < iters; k++) {
		x = x * 6364136223846793005ULL + 1442695040888963407ULL;
		__asm__ volatile("" : "+r"(x));
	}
	xs_kend[i] = xs_now();
	return (intptr_t)(x & 0xffff);
}

static intptr_t xs_tid(void *arg) { (void)arg; return (intptr_t)syscall(SYS_gettid); }
static void *xs_kernel_fn(void) { return (void *)xs_kernel; }
static void *xs_tid_fn(void) { return (void *)xs_tid; }
static void xs_cgo(intptr_t i) { (void)xs_kernel((void *)i); }

static int xs_alloc(int64_t n)
{
	free(xs_iters); free(xs_kstart); free(xs_kend);
	xs_iters = calloc(n, sizeof *xs_iters);
	xs_kstart = calloc(n, sizeof *xs_kstart);
	xs_kend = calloc(n, sizeof *xs_kend);
	return xs_iters && xs_kstart && xs_kend ? 0 : -1;
}
static uint64_t *xs_iters_ptr(void) { return xs_iters; }
static int64_t *xs_kstart_ptr(void) { return xs_kstart; }
static int64_t *xs_kend_ptr(void) { return xs_kend; }
*/
import "C"

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"github.com/xtc-go/xtc"
)

// stageRun is one replay's stamps (ns on CLOCK_MONOTONIC) and counters.
type stageRun struct {
	arrival, gostart, kstart, kend, ret []int64
	lag                                 []int64
	threads                             []threadUse
	wakes                               *xtc.LoopStats
	cpuNs                               int64 // the process, generator excluded
}

type threadUse struct {
	Name      string
	CPU, Wait time.Duration
	Slices    int64
}

// stagesReplay runs s once: mode "xtcgo" (Exec.GoInt on one carrier with
// a 50 us slice, involuntary preemption, as the xtcgo row) or "gocgo"
// (the kernel by plain cgo from the request goroutine), either with
// "-yield" (the generator yields its P after each request) or with
// "-netpoll" / "-netpoll-sleep" (the arrivals of --go-ingress of that
// name, from a generator thread outside Go).
func stagesReplay(s *Schedule, iters []uint64, mode string) (*stageRun, error) {
	n := s.N()
	if C.xs_alloc(C.int64_t(n)) != 0 {
		return nil, fmt.Errorf("out of memory")
	}
	copy(unsafe.Slice((*uint64)(unsafe.Pointer(C.xs_iters_ptr())), n), iters)
	r := &stageRun{arrival: make([]int64, n), gostart: make([]int64, n), ret: make([]int64, n), lag: make([]int64, n)}
	names := map[int]string{}
	// "-yield": the generator yields its P after each request
	// (runtime.Gosched, not locked to its thread), as an accept loop
	// that parks in the netpoller lets its P run the new goroutine
	yield := strings.HasSuffix(mode, "-yield")
	mode = strings.TrimSuffix(mode, "-yield")
	// "-netpoll" / "-netpoll-sleep": the arrivals come from a generator
	// thread outside Go through the netpoller (ingress.go, --go-ingress)
	ingress := IngressGoroutine
	for _, k := range []string{IngressNetpollSleep, IngressNetpoll} {
		if strings.HasSuffix(mode, "-"+k) {
			ingress, mode = k, strings.TrimSuffix(mode, "-"+k)
			break
		}
	}
	var e *xtc.Exec
	fn := unsafe.Pointer(C.xs_kernel_fn())
	ctx := context.Background()
	if mode == "xtcgo" {
		var err error
		if e, err = xtc.NewExec(1); err != nil {
			return nil, err
		}
		defer e.Close()
		if err := e.SetPreempt(50 * time.Microsecond); err != nil {
			return nil, err
		}
		xtc.PreemptSetInvoluntary(true)
		defer xtc.PreemptSetInvoluntary(false)
		if _, err := e.Start(); err != nil {
			return nil, err
		}
		tid, err := e.GoInt(ctx, unsafe.Pointer(C.xs_tid_fn()), 0)
		if err != nil {
			return nil, err
		}
		names[int(tid)] = "carrier"
	} else if mode != "gocgo" {
		return nil, fmt.Errorf("mode %q: xtcgo or gocgo", mode)
	}
	procs := 2 // carriers + 1, as the tail rows
	if v, err := strconv.Atoi(os.Getenv("XTCBENCH_STAGES_PROCS")); err == nil && v > 0 {
		procs = v
	}
	prev := runtime.GOMAXPROCS(procs)
	defer runtime.GOMAXPROCS(prev)
	// Go's clock and C's are both CLOCK_MONOTONIC: one offset maps them
	ca := int64(C.xs_now())
	t0 := time.Now()
	c0 := (ca + int64(C.xs_now())) / 2 // C's clock at t0, within the cgo calls' skew
	now := func() int64 { return c0 + int64(time.Since(t0)) }
	var wg sync.WaitGroup
	before := readThreads()
	var ru0, ru1 syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
	var genCPU int64
	startReq := func(i int) {
		wg.Add(1)
		if e != nil {
			go func() {
				r.gostart[i] = now()
				_, _ = e.GoInt(ctx, fn, int64(i))
				r.ret[i] = now()
				wg.Done()
			}()
		} else {
			go func() {
				r.gostart[i] = now()
				C.xs_cgo(C.intptr_t(i))
				r.ret[i] = now()
				wg.Done()
			}()
		}
	}
	var replayErr error
	if ingress != IngressGoroutine {
		// the generator thread is not Go's and its CPU is not
		// subtracted: the CPU per request includes it
		// (TestFromGoStages says so)
		var base time.Time
		var lag []int64
		lag, replayErr = replay(ingress, s, &base, startReq)
		cb := c0 + int64(base.Sub(t0))
		for i := 0; i < n; i++ {
			r.arrival[i], r.lag[i] = cb+s.Arrival[i], lag[i]
		}
	} else {
		genDone := make(chan struct{})
		go func() {
			if !yield {
				runtime.LockOSThread()
				defer runtime.UnlockOSThread()
				names[syscall.Gettid()] = "generator"
			}
			cpu0 := threadCPUNs()
			base := now() + 2e6
			for i := 0; i < n; i++ {
				target := base + s.Arrival[i]
				var t int64
				for {
					if t = now(); t >= target {
						break
					}
				}
				r.arrival[i], r.lag[i] = target, t-target
				startReq(i)
				if yield {
					runtime.Gosched()
				}
			}
			if !yield { // (a yielding generator changes threads)
				genCPU = threadCPUNs() - cpu0
			}
			close(genDone)
		}()
		<-genDone
	}
	wg.Wait() // the requests that started (startReq counts them)
	if replayErr != nil {
		return nil, replayErr
	}
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
	r.threads = threadDelta(before, readThreads(), names)
	r.cpuNs = ru1.Utime.Nano() + ru1.Stime.Nano() - ru0.Utime.Nano() - ru0.Stime.Nano() - genCPU
	r.kstart = append([]int64(nil), unsafe.Slice((*int64)(unsafe.Pointer(C.xs_kstart_ptr())), n)...)
	r.kend = append([]int64(nil), unsafe.Slice((*int64)(unsafe.Pointer(C.xs_kend_ptr())), n)...)
	if e != nil {
		st, err := e.LoopStats(0)
		if err == nil {
			r.wakes = &st
		}
	}
	return r, nil
}

func threadCPUNs() int64 {
	var ts syscall.Timespec
	// CLOCK_THREAD_CPUTIME_ID = 3
	_, _, _ = syscall.Syscall(syscall.SYS_CLOCK_GETTIME, 3, uintptr(unsafe.Pointer(&ts)), 0)
	return ts.Nano()
}

type schedStat struct{ cpu, wait, slices int64 }

// readThreads: schedstat of every thread (on-CPU ns, run-queue wait ns,
// slices).
func readThreads() map[int]schedStat {
	out := map[int]schedStat{}
	ents, _ := os.ReadDir("/proc/self/task")
	for _, d := range ents {
		tid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/self/task/" + d.Name() + "/schedstat")
		if err != nil {
			continue
		}
		var s schedStat
		if _, err := fmt.Sscan(string(b), &s.cpu, &s.wait, &s.slices); err == nil {
			out[tid] = s
		}
	}
	return out
}

// threadDelta: the threads that ran or waited at least 1 ms meanwhile,
// busiest first; the unnamed ones are Go's Ms.
func threadDelta(a, b map[int]schedStat, names map[int]string) []threadUse {
	var out []threadUse
	for tid, y := range b {
		x := a[tid]
		d := schedStat{y.cpu - x.cpu, y.wait - x.wait, y.slices - x.slices}
		if d.cpu < 1e6 && d.wait < 1e6 {
			continue
		}
		name := names[tid]
		if name == "" {
			name = "go-m/" + strconv.Itoa(tid)
		}
		out = append(out, threadUse{name, time.Duration(d.cpu), time.Duration(d.wait), d.slices})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].CPU > out[j].CPU })
	return out
}

// report renders one replay: quantiles of each stage over the short
// requests after warm.
func (r *stageRun) report(s *Schedule, warm time.Duration) string {
	var soj, lag, gst, ks, svc, del []int64
	for i := range r.arrival {
		if s.Arrival[i] < int64(warm) || !s.Short[i] {
			continue
		}
		soj = append(soj, r.ret[i]-r.arrival[i])
		lag = append(lag, r.lag[i])
		gst = append(gst, r.gostart[i]-r.arrival[i])
		ks = append(ks, r.kstart[i]-r.gostart[i])
		svc = append(svc, r.kend[i]-r.kstart[i])
		del = append(del, r.ret[i]-r.kend[i])
	}
	var b strings.Builder
	row := func(name string, v []int64) {
		sm := Summarize(v)
		sort.Slice(v, func(i, j int) bool { return v[i] < v[j] })
		fmt.Fprintf(&b, "  %-22s p50 %9s  p90 %9s  p99 %9s  max %9s\n", name, fmtDur(sm.P50),
			fmtDur(Quantile(v, 0.9)), fmtDur(sm.P99), fmtDur(sm.Max))
	}
	row("sojourn", soj)
	row("generator lag", lag)
	row("arrival -> gostart", gst)
	row("gostart -> kernel", ks)
	row("kernel (service)", svc)
	row("kernel end -> return", del)
	fmt.Fprintf(&b, "  CPU per request (generator excluded) %s\n", fmtDur(r.cpuNs/int64(len(r.arrival))))
	if w := r.wakes; w != nil {
		mean := time.Duration(0)
		if w.Wakes > 0 {
			mean = w.WakeTotal / time.Duration(w.Wakes)
		}
		fmt.Fprintf(&b, "  carrier: %d parks, %d wake-ups, mean %v, max %v, %d slow\n", w.Parks, w.Wakes,
			mean.Round(100*time.Nanosecond), w.WakeMax.Round(time.Microsecond), w.SlowWakes)
	}
	for _, t := range r.threads {
		fmt.Fprintf(&b, "  %-14s cpu %8.1f ms  run-queue wait %8.1f ms  %6d slices\n", t.Name,
			float64(t.CPU)/1e6, float64(t.Wait)/1e6, t.Slices)
	}
	return b.String()
}
