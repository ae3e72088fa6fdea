// Command serve is a net/http server whose handler hands each request to
// an xtc.Batch continuous-batching group with Do: every request is one
// Mandelbrot tile of its own depth, and one step of the group advances
// every active tile by one chunk of iterations in a single call of a C
// kernel (this file's cgo preamble, on the CPU: the FAKE device of the
// OpenCL example, with a fixed per-step launch cost). A bounded loopback
// load client (-client) drives the server continuous and static in turn,
// stops by itself and prints throughput and p50/p99.
//
//	go run ./examples/go/serve -client              # both modes, 3 reps
//	go run ./examples/go/serve -addr 127.0.0.1:8080 -mode continuous
//	curl '127.0.0.1:8080/tile?id=7&rounds=40'
//
// Workload (the skewed mix of the batching acceptance criteria and of
// cmd/xtcbench's batch section): a tile needs R rounds of `chunk`
// iterations, R uniform in 1..8 for 90% of the tiles and in 64..256 for
// 10% (a heavy tail), drawn from the request id, so both modes serve the
// same requests. A step costs launchCost plus the kernel's own time.
//
// Continuous: a finished tile leaves the vector at the next iteration
// boundary and a waiting one takes its slot. Static: the group gathers a
// full vector (or whatever arrived within gatherWait), runs that cohort
// until its deepest tile is done, answers all of them, then gathers the
// next one; latecomers wait in the vector without being advanced.
//
// Each tile's iteration counts are checked against a plain C reference by
// the test (same instructions: the one non-inlined pixel routine).
package main

/*
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

#define TW 16
#define TPIX (TW * TW)

typedef struct tile {
	float x0, y0, dx;
	int32_t depth; // iterations the tile needs
	int32_t done;  // iterations done so far (all pixels)
	float zx[TPIX], zy[TPIX];
	int32_t st[TPIX]; // >= 0: iterations of the pixel; < 0: ~count, escaped
} tile_t;

static tile_t *tile_new(int64_t id, int32_t depth)
{
	tile_t *t = calloc(1, sizeof *t);
	if (t == NULL)
		return NULL;
	// around the seahorse valley: escaped and interior pixels mixed
	t->x0 = -0.80f + 0.004f * (float)(id % 16);
	t->y0 = 0.05f + 0.004f * (float)((id / 16) % 16);
	t->dx = 0.0005f;
	t->depth = depth;
	return t;
}

static void tile_free(tile_t *t) { free(t); }

// One pixel from iteration it (state x, y) up to end or escape; returns
// the iterations reached, ~it if it escaped. Not inlined, so the chunked
// kernel and the reference run the same instructions (no contraction
// difference can change a rounding).
__attribute__((noinline))
static int32_t pixel(float cx, float cy, float *px, float *py, int32_t it,
                     int32_t end)
{
	float x = *px, y = *py;

	while (it < end) {
		float x2 = x * x, y2 = y * y, xy;
		if (x2 + y2 > 4.0f) {
			*px = x;
			*py = y;
			return ~it;
		}
		xy = x * y;
		y = xy + xy + cy;
		x = x2 - y2 + cx;
		it++;
	}
	*px = x;
	*py = y;
	return it;
}

static void spin_ns(int64_t ns)
{
	struct timespec a, b;
	clock_gettime(CLOCK_MONOTONIC, &a);
	do {
		clock_gettime(CLOCK_MONOTONIC, &b);
	} while ((b.tv_sec - a.tv_sec) * 1000000000ll + (b.tv_nsec - a.tv_nsec) < ns);
}

// The device step: launch cost, then every tile by one chunk. fin[i] = 1
// when tile i has done its depth.
static void tiles_advance(tile_t **t, int n, int32_t chunk, int64_t launch_ns,
                          uint8_t *fin)
{
	spin_ns(launch_ns);
	for (int i = 0; i < n; i++) {
		tile_t *q = t[i];
		int32_t end = q->depth - q->done < chunk ? q->depth : q->done + chunk;
		for (int p = 0; p < TPIX && q->done < end; p++) {
			if (q->st[p] < 0)
				continue;
			q->st[p] = pixel(q->x0 + (float)(p % TW) * q->dx,
			                 q->y0 + (float)(p / TW) * q->dx,
			                 &q->zx[p], &q->zy[p], q->st[p], end);
		}
		q->done = end;
		fin[i] = q->done >= q->depth;
	}
}

// Sum of the iteration counts (the answer) and its reference: each pixel
// straight through to depth.
static uint64_t tile_sum(const tile_t *t)
{
	uint64_t s = 0;
	for (int p = 0; p < TPIX; p++)
		s += (uint64_t)(t->st[p] < 0 ? ~t->st[p] : t->st[p]);
	return s;
}

static uint64_t tile_reference(int64_t id, int32_t depth)
{
	tile_t *t = tile_new(id, depth);
	uint64_t s = 0;
	if (t == NULL)
		return 0;
	for (int p = 0; p < TPIX; p++) {
		float x = 0.0f, y = 0.0f;
		int32_t r = pixel(t->x0 + (float)(p % TW) * t->dx,
		                  t->y0 + (float)(p / TW) * t->dx, &x, &y, 0, depth);
		s += (uint64_t)(r < 0 ? ~r : r);
	}
	tile_free(t);
	return s;
}
*/
import "C"

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/xtc-go/xtc"
)

const (
	chunk      = 8                     // iterations per round
	launchCost = 50 * time.Microsecond // fixed cost of one device step
	maxActive  = 32
	gatherWait = 2 * time.Millisecond // static: longest wait for a full cohort
)

// roundsOf is the workload: the rounds tile id needs (heavy-tailed).
func roundsOf(id int64) int {
	rng := rand.New(rand.NewSource(id*0x9e3779b9 + 1))
	if rng.Intn(10) == 0 {
		return 64 + rng.Intn(193)
	}
	return 1 + rng.Intn(8)
}

type tile struct {
	id     int64
	rounds int
	c      *C.tile_t
}

// server is one batch group on its own loop behind an http.Server.
type server struct {
	static bool
	loop   *xtc.Loop
	b      *xtc.Batch
	runErr chan error
	hs     *http.Server
	addr   string

	// loop thread only (Step)
	ptrs   []*C.tile_t
	fin    []C.uint8_t
	idx    []int
	cohort map[uint64]bool
	gather time.Time

	mu     sync.Mutex
	served map[int64]int // id -> answers given
	failed atomic.Int64
}

func newServer(static bool, addr string) (*server, error) {
	s := &server{
		static: static, runErr: make(chan error, 1),
		ptrs: make([]*C.tile_t, maxActive), fin: make([]C.uint8_t, maxActive),
		idx: make([]int, maxActive), cohort: map[uint64]bool{},
		served: map[int64]int{},
	}
	loop, err := xtc.LoopInit()
	if err != nil {
		return nil, err
	}
	s.loop = loop
	s.b, err = xtc.BatchCreate(loop, &xtc.BatchOpts{
		Capacity: 4 * maxActive, MaxActive: maxActive, ResourceCapacity: maxActive,
		Name: "tiles", Step: s.step,
		Complete: func(uint64, any, error) {}, // Do requests never get here
	})
	if err != nil {
		loop.Fini()
		return nil, err
	}
	go func() { s.runErr <- loop.Run() }()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		s.stopGroup()
		return nil, err
	}
	s.addr = ln.Addr().String()
	mux := http.NewServeMux()
	mux.HandleFunc("/tile", s.handle)
	s.hs = &http.Server{Handler: mux}
	go s.hs.Serve(ln)
	return s, nil
}

// step is the group's Step: one kernel call over the vector (loop thread).
func (s *server) step(items []xtc.BatchItem, res []xtc.BatchResult) error {
	if s.static && !s.cohortLive(items) {
		// gather: a full vector, or what came within gatherWait
		if len(items) < maxActive {
			if s.gather.IsZero() {
				s.gather = time.Now()
			}
			if time.Since(s.gather) < gatherWait {
				time.Sleep(20 * time.Microsecond) // nothing to run yet
				return nil
			}
		}
		s.gather = time.Time{}
		for _, it := range items {
			s.cohort[it.Handle] = true
		}
	}
	n := 0
	for i, it := range items {
		if s.static && !s.cohort[it.Handle] {
			continue // a latecomer waits for the next cohort
		}
		s.ptrs[n], s.idx[n] = it.Request.(*tile).c, i
		n++
	}
	C.tiles_advance(&s.ptrs[0], C.int(n), chunk, C.int64_t(launchCost), &s.fin[0])
	live := 0
	for k := 0; k < n; k++ {
		switch {
		case s.fin[k] == 0:
			live++
		case !s.static:
			res[s.idx[k]].State = xtc.BatchDone
		}
	}
	if s.static && live == 0 {
		for k := 0; k < n; k++ { // the cohort's deepest tile is done
			res[s.idx[k]].State = xtc.BatchDone
		}
		clear(s.cohort)
	}
	return nil
}

// cohortLive reports whether a member of the static cohort is still in
// the vector (a cancelled one leaves it without a DONE).
func (s *server) cohortLive(items []xtc.BatchItem) bool {
	for _, it := range items {
		if s.cohort[it.Handle] {
			return true
		}
	}
	clear(s.cohort)
	return false
}

// handle serves GET /tile?id=N[&rounds=R]: the tile's iteration sum.
func (s *server) handle(w http.ResponseWriter, r *http.Request) {
	id, err := strconv.ParseInt(r.URL.Query().Get("id"), 10, 64)
	if err != nil || id < 0 {
		http.Error(w, "id: a non-negative integer", http.StatusBadRequest)
		return
	}
	rounds := roundsOf(id)
	if v := r.URL.Query().Get("rounds"); v != "" {
		if rounds, err = strconv.Atoi(v); err != nil || rounds < 1 || rounds > 4096 {
			http.Error(w, "rounds: 1..4096", http.StatusBadRequest)
			return
		}
	}
	t := &tile{id: id, rounds: rounds, c: C.tile_new(C.int64_t(id), C.int32_t(rounds*chunk))}
	if t.c == nil {
		http.Error(w, "out of memory", http.StatusServiceUnavailable)
		return
	}
	defer C.tile_free(t.c) // Do returns only once the tile left the group
	if _, err := s.b.Do(r.Context(), t); err != nil {
		s.failed.Add(1)
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	sum := uint64(C.tile_sum(t.c))
	s.mu.Lock()
	s.served[id]++
	s.mu.Unlock()
	fmt.Fprintf(w, "%d %d %d\n", id, rounds, sum)
}

func (s *server) stopGroup() error {
	err := xtc.BatchClose(s.b, xtc.BatchDrain)
	if e := <-s.runErr; err == nil {
		err = e
	}
	if e := s.b.Destroy(); err == nil {
		err = e
	}
	if e := s.loop.Fini(); err == nil {
		err = e
	}
	return err
}

func (s *server) shutdown() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := s.hs.Shutdown(ctx)
	if e := s.stopGroup(); err == nil {
		err = e
	}
	return err
}

// result is one run of the load client.
type result struct {
	mode     string
	n        int
	elapsed  time.Duration
	p50, p99 time.Duration // all requests
	sp50     time.Duration // short requests (<= 8 rounds)
	sp99     time.Duration
	answers  map[int64]string // id -> body
	iters    uint64           // steps of the group
	rounds   uint64           // member-rounds
}

func (r *result) rps() float64 { return float64(r.n) / r.elapsed.Seconds() }

// load is the bounded loopback client: conc workers send requests 0..n-1
// (each id once) and stop when they are all answered.
func load(addr string, n, conc int) (*result, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil || host != "127.0.0.1" {
		return nil, fmt.Errorf("load client: loopback targets only, not %q", addr)
	}
	hc := &http.Client{
		Timeout:   60 * time.Second,
		Transport: &http.Transport{MaxIdleConnsPerHost: conc},
	}
	defer hc.CloseIdleConnections()
	lat := make([]time.Duration, n)
	bodies := make([]string, n)
	var next atomic.Int64
	var firstErr error
	var emu sync.Mutex
	var wg sync.WaitGroup
	t0 := time.Now()
	for w := 0; w < conc; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				id := next.Add(1) - 1
				if id >= int64(n) {
					return
				}
				s := time.Now()
				b, err := get(hc, fmt.Sprintf("http://%s/tile?id=%d", addr, id))
				lat[id] = time.Since(s)
				bodies[id] = b
				if err != nil {
					emu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					emu.Unlock()
					return
				}
			}
		}()
	}
	wg.Wait()
	el := time.Since(t0)
	if firstErr != nil {
		return nil, firstErr
	}
	var short []time.Duration
	for id, d := range lat {
		if roundsOf(int64(id)) <= 8 {
			short = append(short, d)
		}
	}
	r := &result{n: n, elapsed: el, answers: make(map[int64]string, n)}
	r.p50, r.p99 = pct(lat)
	r.sp50, r.sp99 = pct(short)
	for i, b := range bodies {
		r.answers[int64(i)] = b
	}
	return r, nil
}

// pct sorts v and returns its p50 and p99 (0 for none).
func pct(v []time.Duration) (p50, p99 time.Duration) {
	if len(v) == 0 {
		return 0, 0
	}
	sort.Slice(v, func(a, b int) bool { return v[a] < v[b] })
	return v[len(v)/2], v[len(v)*99/100]
}

// reference is the tile's answer computed straight through in C.
func reference(id int64, rounds int) uint64 {
	return uint64(C.tile_reference(C.int64_t(id), C.int32_t(rounds*chunk)))
}

func get(hc *http.Client, url string) (string, error) {
	resp, err := hc.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("%s: %s: %s", url, resp.Status, strings.TrimSpace(string(b)))
	}
	return strings.TrimSpace(string(b)), err
}

// runMode starts a server, drives it with the load client, stops it.
func runMode(static bool, n, conc int) (*result, *server, error) {
	s, err := newServer(static, "127.0.0.1:0")
	if err != nil {
		return nil, nil, err
	}
	r, err := load(s.addr, n, conc)
	st, serr := s.b.Stats()
	if e := s.shutdown(); err == nil {
		err = e
	}
	if err == nil {
		err = serr
	}
	if err != nil {
		return nil, s, err
	}
	r.iters, r.rounds = st.Iterations, st.MemberRounds
	r.mode = modeName(static)
	return r, s, nil
}

func modeName(static bool) string {
	if static {
		return "static"
	}
	return "continuous"
}

func median(v []float64) (med, lo, hi float64) {
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	return s[len(s)/2], s[0], s[len(s)-1]
}

func client(n, conc, reps int) error {
	type agg struct{ rps, p50, p99, sp99 []float64 }
	all := map[bool]*agg{false: {}, true: {}}
	for rep := 0; rep < reps; rep++ {
		for _, static := range []bool{false, true} { // interleaved
			r, _, err := runMode(static, n, conc)
			if err != nil {
				return err
			}
			a := all[static]
			a.rps = append(a.rps, r.rps())
			a.p50 = append(a.p50, float64(r.p50)/1e6)
			a.p99 = append(a.p99, float64(r.p99)/1e6)
			a.sp99 = append(a.sp99, float64(r.sp99)/1e6)
			fmt.Printf("rep %d %-10s %6.0f req/s  p50 %7.2f ms  p99 %7.2f ms  short p99 %7.2f ms  (%d steps, %.1f members/step)\n",
				rep, r.mode, r.rps(), float64(r.p50)/1e6, float64(r.p99)/1e6, float64(r.sp99)/1e6,
				r.iters, float64(r.rounds)/float64(max(r.iters, 1)))
		}
	}
	fmt.Printf("%d requests, %d client connections, max_active %d, %d reps (median [min..max]):\n",
		n, conc, maxActive, reps)
	var med [2]float64
	for i, static := range []bool{false, true} {
		a := all[static]
		m, lo, hi := median(a.rps)
		p5, _, _ := median(a.p50)
		p9, p9lo, p9hi := median(a.p99)
		s9, _, _ := median(a.sp99)
		med[i] = m
		fmt.Printf("  %-10s %6.0f req/s [%.0f..%.0f]  p50 %.2f ms  p99 %.2f ms [%.2f..%.2f]  short p99 %.2f ms\n",
			modeName(static), m, lo, hi, p5, p9, p9lo, p9hi, s9)
	}
	fmt.Printf("  continuous / static throughput: %.2fx\n", med[0]/med[1])
	return nil
}

func main() {
	addr := flag.String("addr", "127.0.0.1:8080", "listen address (server mode)")
	mode := flag.String("mode", "continuous", "server mode: continuous or static")
	cl := flag.Bool("client", false, "run the built-in load client against loopback servers of both modes and exit")
	n := flag.Int("n", 2000, "client: requests per run (ids 0..n-1)")
	conc := flag.Int("c", 2*maxActive, "client: concurrent connections")
	reps := flag.Int("reps", 3, "client: repetitions of each mode (interleaved)")
	flag.Parse()

	if *cl {
		if *n < 1 || *conc < 1 || *reps < 1 {
			fmt.Fprintln(os.Stderr, "serve: -n, -c and -reps must be >= 1")
			os.Exit(2)
		}
		if err := client(*n, *conc, *reps); err != nil {
			if errors.Is(err, xtc.ErrNosys) {
				fmt.Println("batching not built:", err)
				return
			}
			fmt.Fprintln(os.Stderr, "serve:", err)
			os.Exit(1)
		}
		return
	}
	if *mode != "continuous" && *mode != "static" {
		fmt.Fprintln(os.Stderr, "serve: -mode continuous or static")
		os.Exit(2)
	}
	s, err := newServer(*mode == "static", *addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "serve:", err)
		os.Exit(1)
	}
	fmt.Printf("serving %s on http://%s/tile?id=N\n", *mode, s.addr)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt)
	<-sig
	if err := s.shutdown(); err != nil {
		fmt.Fprintln(os.Stderr, "serve:", err)
		os.Exit(1)
	}
}
