// Command service is a net/http service that hands C work to an xtc
// executor, written against the service layer of the Go API:
//
//	GET /fast?n=N            a short C kernel (about 3 µs at the default n),
//	                         interactive class
//	GET /slow?n=N            a C kernel that never yields, in the batch
//	                         class; 504 past its 50 ms deadline, and the
//	                         kernel is stopped at its next slice
//	GET /batch?tokens=N      continuous batching on the executor: the
//	                         request joins a running vector that a step
//	                         function advances one token per iteration
//	GET /sum?n=N&passes=P&timeout=D
//	                         C memory as the argument: the handler
//	                         allocates an array of n in C, the kernel sums
//	                         it passes times, the handler frees it once,
//	                         when Go returned (also past a deadline)
//	GET /stats               the executor's statistics as JSON
//
// One executor (NewExec with WithPreempt and WithStallWatch) carries all
// of it; SIGTERM or SIGINT stop the listener, let the handlers finish,
// then e.Shutdown(ctx) drains the batch group and the calls in flight.
//
//	go run ./examples/go/service -addr 127.0.0.1:8080
//	curl '127.0.0.1:8080/slow?n=100000000000'   # 504 after 50 ms
package main

/*
#include <stdint.h>
#include <stdlib.h>
#include <stdatomic.h>

// The kernels are declared preemptible: xtc cuts a fiber only in code
// declared so (XTC_PREEMPTIBLE in <xtc_preempt.h>; this preamble does
// without xtc's headers and writes the attribute itself).
#define PREEMPTIBLE __attribute__((section("xtc_ptext"), noinline))

// xorshift rounds, never yielding and calling nothing: the work a
// request asks for. static, handed to xtc through the getters below
// (unsafe.Pointer(C.crunch) would not link for a static function).
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
static intptr_t crunch_direct(uint64_t n) { return crunch((void *)(uintptr_t)n); }

// /sum's argument: C memory the handler owns. live is checked by the
// kernel and by the release, so a release while the kernel still runs, or
// twice, is counted instead of passing silently.
enum { SUM_LIVE = 0x5a5a5a5a, SUM_DEAD = 0x0d0d0d0d };
typedef struct {
	_Atomic uint32_t live;
	uint64_t n, passes;
	int64_t *v;
} sum_req_t;

static _Atomic uint64_t sum_allocs, sum_frees, sum_bad_frees, sum_dead_reads;

static sum_req_t *sum_req_new(uint64_t n, uint64_t passes)
{
	sum_req_t *r = malloc(sizeof(*r));
	if (r == NULL)
		return NULL;
	r->v = malloc((n ? n : 1) * sizeof(int64_t));
	if (r->v == NULL) {
		free(r);
		return NULL;
	}
	for (uint64_t i = 0; i < n; i++)
		r->v[i] = (int64_t)(i % 1000);
	r->n = n;
	r->passes = passes;
	atomic_store(&r->live, SUM_LIVE);
	atomic_fetch_add(&sum_allocs, 1);
	return r;
}

static void sum_req_free(sum_req_t *r)
{
	if (atomic_exchange(&r->live, SUM_DEAD) != SUM_LIVE) {
		atomic_fetch_add(&sum_bad_frees, 1);
		return;
	}
	atomic_fetch_add(&sum_frees, 1);
	free(r->v);
	free(r);
}

// Sums the array, passes times over, never yielding; checks between
// passes that its argument is still live.
PREEMPTIBLE static intptr_t sum_kernel(void *arg)
{
	sum_req_t *r = arg;
	int64_t s = 0;

	for (uint64_t p = 0; p < r->passes; p++) {
		if (atomic_load_explicit(&r->live, memory_order_relaxed) != SUM_LIVE) {
			atomic_fetch_add(&sum_dead_reads, 1);
			return -1;
		}
		for (uint64_t i = 0; i < r->n; i++)
			s += r->v[i];
	}
	return (intptr_t)s;
}
static void *sum_kernel_fn(void) { return (void *)sum_kernel; }
static int64_t sum_direct(uint64_t n, uint64_t passes)
{
	int64_t s = 0;
	for (uint64_t p = 0; p < passes; p++)
		for (uint64_t i = 0; i < n; i++)
			s += (int64_t)(i % 1000);
	return s;
}
static void sum_counters(uint64_t *a, uint64_t *f, uint64_t *bad, uint64_t *dead)
{
	*a = atomic_load(&sum_allocs);
	*f = atomic_load(&sum_frees);
	*bad = atomic_load(&sum_bad_frees);
	*dead = atomic_load(&sum_dead_reads);
}

// One decoding step of the batch: a token from the member's state.
static uint64_t next_token(uint64_t state) { return state * 6364136223846793005ull + 1442695040888963407ull; }
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
	"syscall"
	"time"
	"unsafe"

	"github.com/xtc-go/xtc"
)

// Config is what the service is built with.
type Config struct {
	Slice        time.Duration // preemption slice
	SlowDeadline time.Duration // /slow's deadline
	StallBudget  time.Duration // stall watchdog (0: off)
	Carriers     int
}

// DefaultConfig is the command's default.
var DefaultConfig = Config{Slice: 200 * time.Microsecond, SlowDeadline: 50 * time.Millisecond,
	StallBudget: 20 * time.Millisecond, Carriers: 1}

// service owns the executor, its classes and its batch group.
type service struct {
	cfg         Config
	e           *xtc.Exec
	inter, bulk *xtc.Class
	batch       *xtc.Batch
}

// genReq is one /batch request: the group's step advances it one token
// per iteration until it has all of them.
type genReq struct {
	state  uint64
	want   int
	tokens []uint64
}

func newService(cfg Config) (*service, error) {
	opts := []xtc.ExecOption{xtc.WithPreempt(cfg.Slice)}
	if cfg.StallBudget > 0 {
		opts = append(opts, xtc.WithStallWatch(cfg.StallBudget, func(_ *xtc.Loop, r xtc.StallReport) {
			if !r.InFlight {
				log.Printf("stall: %s %v ran %v (budget %v)", r.Name, r.Pid, r.Ran, r.Budget)
			}
		}))
	}
	e, err := xtc.NewExec(cfg.Carriers, opts...)
	if err != nil {
		return nil, err
	}
	s := &service{cfg: cfg, e: e}
	if s.inter, err = e.NewClass(300, time.Millisecond); err == nil {
		s.bulk, err = e.NewClass(100, 0)
	}
	if err == nil {
		s.batch, err = e.NewBatch(xtc.BatchOpts{Capacity: 1024, MaxActive: 32,
			ResourceCapacity: 256, Class: s.inter, Name: "decode", Step: decodeStep})
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

// decodeStep runs on the carrier (never blocks): one token for every
// member of the vector, done when a member has what it asked for.
func decodeStep(items []xtc.BatchItem, res []xtc.BatchResult) error {
	for i := range items {
		r := items[i].Request.(*genReq)
		r.state = uint64(C.next_token(C.uint64_t(r.state)))
		r.tokens = append(r.tokens, r.state>>40)
		if len(r.tokens) >= r.want {
			res[i].State = xtc.BatchDone
		}
	}
	return nil
}

func intParam(r *http.Request, name string, def int64) (int64, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%s: a non-negative integer", name)
	}
	return n, nil
}

// reply maps the executor's errors to HTTP: a deadline is 504, a closed
// executor or group 503.
func reply(w http.ResponseWriter, v any, err error) {
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		http.Error(w, "deadline exceeded (the kernel was stopped)", http.StatusGatewayTimeout)
	case errors.Is(err, xtc.ErrClosed), errors.Is(err, xtc.ErrAborted):
		// refused by a closed executor or group, or cut by its Shutdown
		http.Error(w, "shutting down", http.StatusServiceUnavailable)
	case errors.Is(err, context.Canceled):
		http.Error(w, "client went away", 499)
	case err != nil:
		http.Error(w, err.Error(), http.StatusInternalServerError)
	default:
		fmt.Fprintln(w, v)
	}
}

func (s *service) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /fast", func(w http.ResponseWriter, r *http.Request) {
		n, err := intParam(r, "n", 3000)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		v, err := s.e.GoInt(r.Context(), C.crunch_fn(), n, xtc.WithClass(s.inter))
		reply(w, v, err)
	})
	mux.HandleFunc("GET /slow", func(w http.ResponseWriter, r *http.Request) {
		n, err := intParam(r, "n", 20_000_000)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), s.cfg.SlowDeadline)
		defer cancel()
		v, err := s.e.GoInt(ctx, C.crunch_fn(), n, xtc.WithClass(s.bulk), xtc.WithName("slow"))
		reply(w, v, err)
	})
	mux.HandleFunc("GET /batch", func(w http.ResponseWriter, r *http.Request) {
		n, err := intParam(r, "tokens", 16)
		if err != nil || n == 0 || n > 4096 {
			http.Error(w, "tokens: 1..4096", http.StatusBadRequest)
			return
		}
		seed, _ := intParam(r, "seed", 1)
		req := &genReq{state: uint64(seed), want: int(n)}
		// a request holds one unit of the group's capacity per 64 tokens
		_, err = s.batch.Do(r.Context(), req, xtc.WithCharge(uint64(1+n/64)))
		if err != nil {
			reply(w, nil, err)
			return
		}
		reply(w, req.tokens[len(req.tokens)-1], nil)
	})
	mux.HandleFunc("GET /sum", func(w http.ResponseWriter, r *http.Request) {
		n, err := intParam(r, "n", 100_000)
		if err != nil || n > 1<<24 {
			http.Error(w, "n: 0..16777216", http.StatusBadRequest)
			return
		}
		passes, err := intParam(r, "passes", 1)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		ctx := r.Context()
		if t := r.URL.Query().Get("timeout"); t != "" {
			d, err := time.ParseDuration(t)
			if err != nil {
				http.Error(w, "timeout: a Go duration", http.StatusBadRequest)
				return
			}
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, d)
			defer cancel()
		}
		req := C.sum_req_new(C.uint64_t(n), C.uint64_t(passes))
		if req == nil {
			http.Error(w, "out of memory", http.StatusInsufficientStorage)
			return
		}
		// Exec.Go returns only once the call's C side is gone (also on a
		// deadline: the kernel was stopped first), so the argument is
		// released right after, exactly once.
		v, err := s.e.Go(ctx, C.sum_kernel_fn(), unsafe.Pointer(req), xtc.WithClass(s.bulk))
		C.sum_req_free(req)
		reply(w, v, err)
	})
	mux.HandleFunc("GET /stats", func(w http.ResponseWriter, r *http.Request) {
		st, err := s.e.Stats()
		if err != nil {
			reply(w, nil, err)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(st)
	})
	return mux
}

// crunchDirect and sumDirect compute /fast's and /sum's answers with a
// plain C call (the tests compare).
func crunchDirect(n int64) int64 { return int64(C.crunch_direct(C.uint64_t(n))) }
func sumDirect(n, passes int64) int64 {
	return int64(C.sum_direct(C.uint64_t(n), C.uint64_t(passes)))
}

// memCounters are /sum's C allocations: allocs and frees must match once
// the service is shut down, and the other two stay 0.
type memCounters struct{ Allocs, Frees, BadFrees, DeadReads uint64 }

func sumCounters() memCounters {
	var a, f, b, d C.uint64_t
	C.sum_counters(&a, &f, &b, &d)
	return memCounters{uint64(a), uint64(f), uint64(b), uint64(d)}
}

// Shutdown ends the executor: the batch group drains and the calls in
// flight finish until ctx ends; then the rest is cancelled or killed.
func (s *service) Shutdown(ctx context.Context) error { return s.e.Shutdown(ctx) }

func main() {
	addr := flag.String("addr", "127.0.0.1:8080", "listen address")
	cfg := DefaultConfig
	flag.DurationVar(&cfg.Slice, "slice", cfg.Slice, "preemption slice")
	flag.DurationVar(&cfg.StallBudget, "stall", cfg.StallBudget, "stall budget (0 = off)")
	flag.IntVar(&cfg.Carriers, "carriers", cfg.Carriers, "executor carriers")
	flag.Parse()
	s, err := newService(cfg)
	if err != nil {
		log.Fatal(err)
	}
	srv := &http.Server{Addr: *addr, Handler: s.handler()}
	stopped := make(chan struct{})
	go func() {
		sig := make(chan os.Signal, 1)
		signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
		<-sig
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(ctx) // stop taking requests, let handlers finish
		if err := s.Shutdown(ctx); err != nil {
			log.Printf("executor shutdown: %v", err)
		}
		log.Printf("C memory of /sum: %+v", sumCounters())
		close(stopped)
	}()
	log.Printf("serving on %s (%s)", *addr, xtc.LinkInfo)
	if err := srv.ListenAndServe(); !errors.Is(err, http.ErrServerClosed) {
		log.Fatal(err)
	}
	<-stopped
}
