// Command service is a net/http service that hands each request to a C
// kernel of its own on an xtc executor: two share classes (interactive
// 3 : batch 1) with a latency bound for the interactive one, involuntary
// preemption, a per-request context deadline that also stops the kernel,
// the result back to the handler's goroutine, and a stall watchdog naming
// the culprit while it still runs. The only C is the kernel itself.
//
//	go run ./examples/go/service -addr 127.0.0.1:8080
//	curl '127.0.0.1:8080/work?class=interactive&n=200000'
//	curl '127.0.0.1:8080/work?class=batch&n=3000000000'   # seconds of CPU
//	curl '127.0.0.1:8080/stats'
//
// GET /work?class=interactive|batch&n=N runs N rounds of xorshift (never
// yielding, no library call) and answers the result; past its deadline
// (interactive 100 ms, batch 5 s, or ?timeout=) it answers 504 and the
// kernel is killed at its next slice. GET /stats reports each class's
// measured CPU and the stall count.
package main

/*
#include <stdint.h>
// Declared preemptible (xtc_preempt(3) SAFETY): xtc interrupts a fiber only
// in code it was told is safe to cut; a preamble without xtc's headers names
// the section XTC_PREEMPTIBLE uses.
#define PREEMPTIBLE __attribute__((section("xtc_ptext"), noinline))

// static, like every preamble function here: handed to xtc through the
// getter below (unsafe.Pointer(C.crunch) would not link for a static).
PREEMPTIBLE static intptr_t crunch(void *arg)
{
	uint64_t n = (uint64_t)(uintptr_t)arg, x = 88172645463325252ull;
	for (uint64_t i = 0; i < n; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
	}
	return (intptr_t)(x >> 1);
}

static void *crunch_fn(void) { return (void *)crunch; }

// The same computation as a plain C call, to check answers.
static intptr_t crunch_direct(uint64_t n) { return crunch((void *)(uintptr_t)n); }
*/
import "C"

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/xtc-go/xtc"
)

// service owns the executor and its two classes.
type service struct {
	e            *xtc.Exec
	inter, batch *xtc.Class
	slice        time.Duration
	stalls       atomic.Int64
	lastStall    atomic.Pointer[xtc.StallReport]
}

// newService builds and starts the executor: one carrier, a preemption
// slice, the classes, a stall budget and callback.
func newService(slice, stallBudget time.Duration) (*service, error) {
	e, err := xtc.NewExec(1) // serves until Close/Shutdown
	if err != nil {
		return nil, err
	}
	s := &service{e: e, slice: slice}
	if err = e.SetPreempt(slice); err == nil {
		xtc.PreemptSetInvoluntary(true)
		s.inter, err = e.NewClass(300, time.Millisecond)
	}
	if err == nil {
		s.batch, err = e.NewClass(100, 0)
	}
	if err == nil && stallBudget > 0 {
		err = e.SetStallBudget(stallBudget)
		for i := 0; err == nil && i < e.NLoops(); i++ {
			err = e.Loop(i).SetStallFunc(func(_ *xtc.Loop, r xtc.StallReport) {
				s.stalls.Add(1)
				s.lastStall.Store(&r)
			})
		}
	}
	if err == nil {
		_, err = e.Start()
	}
	if err != nil {
		e.Close()
		return nil, err
	}
	return s, nil
}

// run hands one kernel call to the executor in class c.
func (s *service) run(ctx context.Context, c *xtc.Class, n int64) (int64, error) {
	return s.e.GoInt(ctx, C.crunch_fn(), n, xtc.WithClass(c), xtc.WithName("crunch"))
}

func crunchDirect(n int64) int64 { return int64(C.crunch_direct(C.uint64_t(n))) }

func (s *service) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /work", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		n, err := strconv.ParseInt(q.Get("n"), 10, 64)
		if err != nil || n < 0 {
			http.Error(w, "n: a non-negative integer", http.StatusBadRequest)
			return
		}
		cls, timeout := s.inter, 100*time.Millisecond
		switch q.Get("class") {
		case "interactive", "":
		case "batch":
			cls, timeout = s.batch, 5*time.Second
		default:
			http.Error(w, "class: interactive or batch", http.StatusBadRequest)
			return
		}
		if t := q.Get("timeout"); t != "" {
			if timeout, err = time.ParseDuration(t); err != nil {
				http.Error(w, "timeout: a Go duration", http.StatusBadRequest)
				return
			}
		}
		ctx, cancel := context.WithTimeout(r.Context(), timeout)
		defer cancel()
		v, err := s.run(ctx, cls, n)
		switch {
		case errors.Is(err, context.DeadlineExceeded):
			http.Error(w, "deadline exceeded (kernel killed)", http.StatusGatewayTimeout)
		case errors.Is(err, xtc.ErrClosed):
			http.Error(w, "shutting down", http.StatusServiceUnavailable)
		case err != nil:
			http.Error(w, err.Error(), http.StatusInternalServerError)
		default:
			fmt.Fprintln(w, v)
		}
	})
	mux.HandleFunc("GET /stats", func(w http.ResponseWriter, r *http.Request) {
		st := map[string]any{
			"interactive_cpu_ns": s.inter.CPU().Nanoseconds(),
			"batch_cpu_ns":       s.batch.CPU().Nanoseconds(),
			"stalls":             s.stalls.Load(),
		}
		if r := s.lastStall.Load(); r != nil {
			st["last_stall"] = r
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(st)
	})
	return mux
}

// Close ends the executor (calls in flight complete with ErrAborted).
func (s *service) Close() error { return s.e.Close() }

func main() {
	addr := flag.String("addr", "127.0.0.1:8080", "listen address")
	slice := flag.Duration("slice", 200*time.Microsecond, "preemption slice")
	stall := flag.Duration("stall", 20*time.Millisecond, "stall budget (0 = off)")
	flag.Parse()
	s, err := newService(*slice, *stall)
	if err != nil {
		log.Fatal(err)
	}
	srv := &http.Server{Addr: *addr, Handler: s.handler()}
	go func() {
		sig := make(chan os.Signal, 1)
		signal.Notify(sig, os.Interrupt)
		<-sig
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(ctx) // stop taking requests, let handlers finish
		s.e.Shutdown(ctx) // then the executor: its calls finish or die
	}()
	log.Printf("serving on %s (slice %v)", *addr, *slice)
	if err := srv.ListenAndServe(); !errors.Is(err, http.ErrServerClosed) {
		log.Fatal(err)
	}
}
