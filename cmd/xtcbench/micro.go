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
}

// The Go side of each row runs on the same number of threads as the xtc
// side (one loop = GOMAXPROCS 1; two loops = GOMAXPROCS 2).
func microDefs() []microDef {
	return []microDef{
		{microYield, "yield", "xtc_yield between two procs on one loop",
			"runtime.Gosched between two goroutines (GOMAXPROCS=1)",
			400_000, 1, goYield, 3.5, "≥ 3.5×"},
		{microSpawn, "spawn", "a proc spawns a proc and yields until it ran and exited",
			"a goroutine runs go f() and waits for it (WaitGroup, GOMAXPROCS=1)",
			100_000, 1, goSpawnBatch(1), 2, "≥ 2×"},
		{microFanout, "spawn fan-out", "a proc spawns 256 procs, yields until all exited",
			"a goroutine starts 256 goroutines, WaitGroup (GOMAXPROCS=1)",
			25_600, 1, goSpawnBatch(256), 0, "info"},
		{microPingPong, "ping-pong", "mailbox round trip, two procs, one loop",
			"unbuffered channel round trip (GOMAXPROCS=1)",
			100_000, 1, goPingPong, 2.5, "≥ 2.5×"},
		{microCrossLoop, "cross-loop handoff", "mailbox round trip between two executor loops",
			"unbuffered channel round trip (GOMAXPROCS=2)",
			10_000, 2, goPingPong, 0, "info"},
		{microCCall, "C call", "a proc calls a C function",
			"a goroutine calls a C function through cgo",
			1_000_000, 1, goCCall, 0, "info"},
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
			Target: d.target, TargetTx: d.targetTx}
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
