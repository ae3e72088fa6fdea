package main

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// MicroRow is one line of the micro table: the median over repetitions of
// ns per operation on each side.
type MicroRow struct {
	Name     string  `json:"name"`
	XtcWhat  string  `json:"xtc_what"`
	GoWhat   string  `json:"go_what"`
	XtcNs    float64 `json:"xtc_ns"`
	GoNs     float64 `json:"go_ns"`
	Status   Status  `json:"-"`
	StatusS  string  `json:"xtc_status"`
	Why      string  `json:"why,omitempty"`
	Target   float64 `json:"target_ratio,omitempty"` // Go/xtc at least this
	TargetTx string  `json:"target,omitempty"`
	// Rows checked against the machine instead of Go: the raw cross-core
	// cache-line round trip, and the bound xtc must stay under (× floor).
	FloorNs    float64 `json:"floor_ns,omitempty"`
	FloorBound float64 `json:"floor_bound,omitempty"`
	// NotLike: the two sides do not do the same thing (info only).
	NotLike string `json:"not_like_for_like,omitempty"`
}

// Ratio is Go time / xtc time (> 1: xtc faster); 0 when xtc did not run.
func (r MicroRow) Ratio() float64 {
	if r.Status != StatusOK || r.XtcNs <= 0 {
		return 0
	}
	return r.GoNs / r.XtcNs
}

type microDef struct {
	id       int
	name     string
	xtcWhat  string
	goWhat   string
	n        int64 // base iteration count (scaled by --micro-scale)
	procs    int   // GOMAXPROCS of the Go side
	goFn     func(n int64) float64
	target   float64
	targetTx string
	floor    bool   // also measure the cross-core floor (bound 1.2×)
	notLike  string // why the comparison is not like for like
}

// The Go side of each row runs on the same number of threads as the xtc
// side (one loop = GOMAXPROCS 1; two loops = GOMAXPROCS 2).
func microDefs() []microDef {
	return []microDef{
		{microYield, "yield", "xtc_yield between two procs on one loop",
			"runtime.Gosched between two goroutines (GOMAXPROCS=1)",
			400_000, 1, goYield, 3.5, "≥ 3.5×", false, ""},
		{microSpawn, "spawn", "a proc spawns a proc and yields until it ran and exited",
			"a goroutine runs go f() and waits for it (WaitGroup, GOMAXPROCS=1)",
			100_000, 1, goSpawnBatch(1), 2, "≥ 2×", false, ""},
		{microFanout, "batched spawn", "a proc spawns 64 procs, yields until all ran and exited, repeats (warm)",
			"a goroutine starts 64 goroutines, WaitGroup, repeats (warm, GOMAXPROCS=1)",
			64_000, 1, goSpawnBatch(64), 2, "≥ 2×", false, ""},
		{microPingPong, "ping-pong", "mailbox round trip, two procs, one loop",
			"unbuffered channel round trip (GOMAXPROCS=1)",
			100_000, 1, goPingPong, 2.5, "≥ 2.5×", false, ""},
		// Go's plain channel ping-pong at GOMAXPROCS=2 never leaves one
		// thread (runnext handoff): the Go side is locked to two OS
		// threads so it crosses cores like the two executor loops, and
		// the row is judged against the machine's floor.
		{microCrossLoop, "cross-loop handoff", "mailbox round trip between two executor loops (two threads)",
			"unbuffered channel round trip between two goroutines locked to two OS threads",
			10_000, 2, goPingPongLocked, 0, "≤ 1.2× floor", true, ""},
		{microCCall, "C call", "a proc calls a C function",
			"a goroutine calls a C function through cgo",
			1_000_000, 1, goCCall, 0, "info", false,
			"a C-to-C call against a Go-to-C cgo call: shows what cgo costs, not a runtime comparison"},
	}
}

func runMicro(cfg *Config, pb *Progress) []MicroRow {
	var rows []MicroRow
	for _, d := range microDefs() {
		n := int64(float64(d.n) * cfg.MicroScale)
		if n < 1 {
			n = 1
		}
		row := MicroRow{Name: d.name, XtcWhat: d.xtcWhat, GoWhat: d.goWhat,
			Target: d.target, TargetTx: d.targetTx, NotLike: d.notLike}
		var xs, gs []float64
		for r := 0; r < cfg.MicroReps; r++ {
			ns, st, why := xtcMicro(d.id, n)
			row.Status, row.Why = st, why
			if st != StatusOK {
				break
			}
			xs = append(xs, ns)
		}
		for r := 0; r < cfg.MicroReps; r++ {
			prev := runtime.GOMAXPROCS(d.procs)
			gs = append(gs, d.goFn(n))
			runtime.GOMAXPROCS(prev)
		}
		row.XtcNs, row.GoNs = median(xs), median(gs)
		if d.floor {
			var fs []float64
			for r := 0; r < cfg.MicroReps; r++ {
				fs = append(fs, crossCoreFloor(n*10))
			}
			row.FloorNs, row.FloorBound = median(fs), 1.2
		}
		row.StatusS = row.Status.String()
		rows = append(rows, row)
		pb.Step("micro " + d.name)
	}
	return rows
}

func perOp(d time.Duration, n int64) float64 {
	return float64(d.Nanoseconds()) / float64(n)
}

func goYield(n int64) float64 {
	var wg sync.WaitGroup
	start := make(chan struct{})
	wg.Add(2)
	for k := 0; k < 2; k++ {
		go func() {
			defer wg.Done()
			<-start
			for i := int64(0); i < n; i++ {
				runtime.Gosched()
			}
		}()
	}
	t0 := time.Now()
	close(start)
	wg.Wait()
	return perOp(time.Since(t0), 2*n)
}

func goSpawnBatch(batch int64) func(int64) float64 {
	return func(n int64) float64 { return goSpawn(n, batch) }
}

func goSpawn(n, batch int64) float64 {
	var count atomic.Int64
	var wg sync.WaitGroup
	// one untimed batch: the clock starts warm, as on xtc's side
	wg.Add(int(batch))
	for k := int64(0); k < batch; k++ {
		go func() {
			count.Add(1)
			wg.Done()
		}()
	}
	wg.Wait()
	t0 := time.Now()
	for done := int64(0); done < n; {
		b := min(n-done, batch)
		wg.Add(int(b))
		for k := int64(0); k < b; k++ {
			go func() {
				count.Add(1)
				wg.Done()
			}()
		}
		wg.Wait()
		done += b
	}
	return perOp(time.Since(t0), n)
}

func goPingPong(n int64) float64 {
	ping, pong := make(chan int64), make(chan int64)
	go func() {
		for i := int64(0); i < n; i++ {
			pong <- <-ping
		}
	}()
	t0 := time.Now()
	for i := int64(0); i < n; i++ {
		ping <- i
		<-pong
	}
	return perOp(time.Since(t0), n)
}

func goCCall(n int64) float64 {
	t0 := time.Now()
	for i := int64(0); i < n; i++ {
		cNoop()
	}
	return perOp(time.Since(t0), n)
}

// goPingPongLocked: the channel round trip with each goroutine locked to
// its own OS thread, so every handoff crosses threads (and, with
// GOMAXPROCS=2 on two CPUs, cores).
func goPingPongLocked(n int64) float64 {
	ping, pong := make(chan int64), make(chan int64)
	ready := make(chan struct{})
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		close(ready)
		for i := int64(0); i < n; i++ {
			pong <- <-ping
		}
	}()
	<-ready
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	t0 := time.Now()
	for i := int64(0); i < n; i++ {
		ping <- i
		<-pong
	}
	return perOp(time.Since(t0), n)
}

// crossCoreFloor: the machine's cross-core round trip, two threads
// spinning on one shared word (no runtime, no wake-up): the floor any
// cross-thread handoff pays.
func crossCoreFloor(n int64) float64 {
	prev := runtime.GOMAXPROCS(2)
	defer runtime.GOMAXPROCS(prev)
	var word atomic.Int64
	done := make(chan struct{})
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		for i := int64(0); i < n; i++ {
			for word.Load() != 2*i+1 {
			}
			word.Store(2*i + 2)
		}
		close(done)
	}()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	t0 := time.Now()
	for i := int64(0); i < n; i++ {
		word.Store(2*i + 1)
		for word.Load() != 2*i+2 {
		}
	}
	el := time.Since(t0)
	<-done
	return perOp(el, n)
}
