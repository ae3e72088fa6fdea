package main

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// The hog workload: a kernel that never yields shares one carrier with a
// probe that sleeps 1 ms in a loop; the probe's lateness (actual sleep
// minus 1 ms) shows how long a timer-driven task waits behind CPU-bound
// code. Every variant is also run without the hog, as the floor of the
// timer path on this machine.

const hogSleep = time.Millisecond

// HogSeries is one variant.
type HogSeries struct {
	Key     string  `json:"key"`
	Label   string  `json:"label"`
	Status  string  `json:"status"`
	Why     string  `json:"why,omitempty"`
	Threads string  `json:"threads"`
	Late    Summary `json:"lateness"`
	// Samples keeps the raw lateness (ns) for the plot.
	Samples []int64 `json:"-"`
}

func (s *HogSeries) ok() bool { return s.Status == StatusOK.String() }

// HogResults is the hog section.
type HogResults struct {
	Slice  time.Duration `json:"xtc_slice_ns"`
	Series []HogSeries   `json:"series"`
}

func hogSteps() int { return 6 }

// hogBudget bounds every hog variant: a probe that is tens of ms late
// would otherwise stretch the run; probes not done within it are not
// counted (the table gives the number done).
func hogBudget(probes int) time.Duration {
	return 4*time.Duration(probes)*hogSleep + 2*time.Second
}

func goProbe(n int) []int64 {
	late := make([]int64, 0, n)
	end := time.Now().Add(hogBudget(n))
	for k := 0; k < n && time.Now().Before(end); k++ {
		t0 := time.Now()
		time.Sleep(hogSleep)
		late = append(late, int64(time.Since(t0)-hogSleep))
	}
	return late
}

// goHog runs the probe on GOMAXPROCS=1 next to a hog: kind "go" spins Go
// code, "cgo" runs the C kernel in one cgo call, "" runs no hog.
func goHog(kind string, probes int) []int64 {
	prev := runtime.GOMAXPROCS(1)
	defer runtime.GOMAXPROCS(prev)
	var stop atomic.Bool
	var wg sync.WaitGroup
	switch kind {
	case "go":
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				keep(goSpin(4096))
			}
		}()
	case "cgo":
		cHogArm()
		wg.Add(1)
		go func() {
			defer wg.Done()
			keep(cHogKernel())
		}()
	}
	// Let the hog get going before the first probe.
	time.Sleep(5 * time.Millisecond)
	late := goProbe(probes)
	stop.Store(true)
	if kind == "cgo" {
		cHogStop()
	}
	wg.Wait()
	return late
}

func runHog(cfg *Config, pb *Progress) *HogResults {
	res := &HogResults{Slice: cfg.HogSlice}
	add := func(s HogSeries, samples []int64) {
		if s.ok() {
			s.Samples = samples
			s.Late = Summarize(append([]int64(nil), samples...))
		}
		res.Series = append(res.Series, s)
		pb.Step("hog " + s.Key)
	}
	for _, withHog := range []bool{true, false} {
		suffix, what := "", ""
		if !withHog {
			suffix, what = "-idle", " (no hog: timer floor)"
		}
		pb.Note("hog xtc" + suffix)
		runtime.GC()
		late, st, why := xtcHog(withHog, cfg.HogProbes, hogSleep, cfg.HogSlice,
			hogBudget(cfg.HogProbes))
		add(HogSeries{Key: "xtc" + suffix, Label: "xtc, one carrier, slice " +
			fmtDur(cfg.HogSlice.Nanoseconds()) + what, Status: st.String(), Why: why,
			Threads: "1 carrier + monitor"}, late)
		if !withHog {
			pb.Note("hog go-idle")
			add(HogSeries{Key: "go-idle", Label: "Go, GOMAXPROCS=1" + what,
				Status: StatusOK.String(), Threads: "1 P"}, goHog("", cfg.HogProbes))
			continue
		}
		// the same hog with a 50 µs slice: the comparison with Go+cgo,
		// whose hog the kernel slices
		if cfg.HogSlice != 50*time.Microsecond {
			pb.Note("hog xtc-50µs")
			runtime.GC()
			late, st, why := xtcHog(true, cfg.HogProbes, hogSleep, 50*time.Microsecond,
				hogBudget(cfg.HogProbes))
			add(HogSeries{Key: "xtc-50us", Label: "xtc, one carrier, slice 50 µs",
				Status: st.String(), Why: why, Threads: "1 carrier + monitor"}, late)
		}
		pb.Note("hog gocgo")
		runtime.GC()
		add(HogSeries{Key: "gocgo", Label: "Go, GOMAXPROCS=1, hog = the C kernel in a cgo call",
			Status: StatusOK.String(), Threads: "1 P + the thread blocked in cgo (Go hands the P off)"},
			goHog("cgo", cfg.HogProbes))
		pb.Note("hog go")
		runtime.GC()
		add(HogSeries{Key: "go", Label: "Go, GOMAXPROCS=1, hog = the same loop in Go",
			Status: StatusOK.String(), Threads: "1 P"}, goHog("go", cfg.HogProbes))
	}
	return res
}

func (r *HogResults) series(key string) *HogSeries {
	if r == nil {
		return nil
	}
	for i := range r.Series {
		if r.Series[i].Key == key {
			return &r.Series[i]
		}
	}
	return nil
}
