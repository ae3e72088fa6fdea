package main

import (
	"math"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// The fairness workload: three always-runnable workloads of equal cost
// that should split one carrier's CPU 600:300:100. xtc gives them three
// scheduling classes with those shares; Go has no weights, so the same
// three workloads run as one goroutine each (and, as the closest thing Go
// offers, once more with goroutine counts 6:3:1).

var fairShares = [3]int{600, 300, 100}

// FairSeries is one side's run.
type FairSeries struct {
	Key       string       `json:"key"`
	Label     string       `json:"label"`
	Status    string       `json:"status"`
	Why       string       `json:"why,omitempty"`
	Mode      string       `json:"mode,omitempty"`
	Times     []float64    `json:"window_end_s"`
	Fractions [][3]float64 `json:"window_fractions"`
	Overall   [3]float64   `json:"overall_fractions"`
	// Deviation is the largest relative error |f - target| / target over
	// the three classes, for the whole run and for the worst window.
	Deviation      float64 `json:"max_rel_deviation"`
	WorstWindowDev float64 `json:"worst_window_rel_deviation"`
}

func (s *FairSeries) ok() bool { return s.Status == StatusOK.String() }

// FairResults is the fairness section.
type FairResults struct {
	Target [3]float64   `json:"target_fractions"`
	Series []FairSeries `json:"series"`
}

func fairTarget() [3]float64 {
	sum := 0
	for _, s := range fairShares {
		sum += s
	}
	var t [3]float64
	for i, s := range fairShares {
		t[i] = float64(s) / float64(sum)
	}
	return t
}

// analyzeFair turns cumulative counter samples into per-window fractions,
// the overall split and the deviations from the target.
func analyzeFair(samples []fairSample, s *FairSeries) {
	target := fairTarget()
	var prev [3]int64
	for _, smp := range samples {
		var d [3]float64
		var tot float64
		for k := 0; k < 3; k++ {
			d[k] = float64(smp.Counts[k] - prev[k])
			tot += d[k]
		}
		prev = smp.Counts
		if tot <= 0 {
			continue
		}
		var fr [3]float64
		for k := range fr {
			fr[k] = d[k] / tot
		}
		s.Times = append(s.Times, smp.T.Seconds())
		s.Fractions = append(s.Fractions, fr)
		s.WorstWindowDev = math.Max(s.WorstWindowDev, relDev(fr, target))
	}
	if len(samples) == 0 {
		return
	}
	last := samples[len(samples)-1].Counts
	var tot float64
	for k := 0; k < 3; k++ {
		tot += float64(last[k])
	}
	if tot > 0 {
		for k := 0; k < 3; k++ {
			s.Overall[k] = float64(last[k]) / tot
		}
		s.Deviation = relDev(s.Overall, target)
	}
}

func relDev(f, target [3]float64) float64 {
	m := 0.0
	for k := 0; k < 3; k++ {
		m = math.Max(m, math.Abs(f[k]-target[k])/target[k])
	}
	return m
}

// goFair runs groups[k] goroutines for workload k on one P, each spinning
// chunks of Go work and adding them to the workload's counter.
func goFair(dur, window time.Duration, groups [3]int, chunk uint64) []fairSample {
	prev := runtime.GOMAXPROCS(1)
	defer runtime.GOMAXPROCS(prev)
	var counts [3]atomic.Int64
	var stop atomic.Bool
	var wg sync.WaitGroup
	for k := 0; k < 3; k++ {
		for g := 0; g < groups[k]; g++ {
			wg.Add(1)
			go func(k int) {
				defer wg.Done()
				for !stop.Load() {
					keep(goSpin(chunk))
					counts[k].Add(int64(chunk))
				}
			}(k)
		}
	}
	// The sampler shares the single P: its wake-ups may be late, so each
	// sample carries its actual time.
	t0 := time.Now()
	var out []fairSample
	for next := window; ; next += window {
		if d := next - time.Since(t0); d > 0 {
			time.Sleep(d)
		}
		smp := fairSample{T: time.Since(t0)}
		for k := 0; k < 3; k++ {
			smp.Counts[k] = counts[k].Load()
		}
		out = append(out, smp)
		if smp.T >= dur {
			break
		}
	}
	stop.Store(true)
	wg.Wait()
	return out
}

func fairSteps() int { return 3 }

func runFair(cfg *Config, cal Calibration, pb *Progress) *FairResults {
	res := &FairResults{Target: fairTarget()}
	const chunk = 20 * time.Microsecond
	cChunk := uint64(float64(chunk.Nanoseconds()) * cal.CItersPerNs)
	goChunk := uint64(float64(chunk.Nanoseconds()) * cal.GoItersPerNs)

	// xtc: never-yielding workers when involuntary preemption exists,
	// otherwise cooperative workers yielding after every chunk.
	pb.Note("fair xtc")
	feat := probeFeatures()
	x := FairSeries{Key: "xtc", Label: "xtc classes 600:300:100"}
	preempt := feat.Has(FeatPreempt)
	x.Mode = "never-yielding C workers, involuntary preemption, slice " + fmtDur(cfg.HogSlice.Nanoseconds())
	if !preempt {
		x.Mode = "cooperative C workers (xtc_yield after each 20 µs chunk): involuntary preemption not available"
	}
	runtime.GC()
	samples, st, why := xtcFair(cfg.FairDur, cfg.FairWindow, fairShares, preempt, cfg.HogSlice, cChunk)
	x.Status, x.Why = st.String(), why
	if st == StatusOK {
		analyzeFair(samples, &x)
	}
	res.Series = append(res.Series, x)
	pb.Step("fair xtc")

	pb.Note("fair go")
	g := FairSeries{Key: "go", Label: "Go, one goroutine per workload (no weights)",
		Status: StatusOK.String(), Mode: "never-yielding Go workers, GOMAXPROCS=1"}
	runtime.GC()
	analyzeFair(goFair(cfg.FairDur, cfg.FairWindow, [3]int{1, 1, 1}, goChunk), &g)
	res.Series = append(res.Series, g)
	pb.Step("fair go")

	pb.Note("fair go 6:3:1")
	g2 := FairSeries{Key: "go-6:3:1", Label: "Go, goroutine counts 6:3:1 (weights emulated)",
		Status: StatusOK.String(), Mode: "never-yielding Go workers, GOMAXPROCS=1"}
	runtime.GC()
	analyzeFair(goFair(cfg.FairDur, cfg.FairWindow, [3]int{6, 3, 1}, goChunk), &g2)
	res.Series = append(res.Series, g2)
	pb.Step("fair go 6:3:1")
	return res
}

func (r *FairResults) series(key string) *FairSeries {
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
