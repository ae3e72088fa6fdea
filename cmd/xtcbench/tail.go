package main

import (
	"fmt"
	"math"
	"runtime"
	"sort"
	"sync"
	"time"
)

// Contender is one way of serving the tail-latency workload.
type Contender struct {
	Key      string        `json:"key"`
	Label    string        `json:"label"`
	Kind     string        `json:"kind"` // xtc | go | gocgo
	Slice    time.Duration `json:"slice_ns,omitempty"`
	Adaptive bool          `json:"adaptive,omitempty"`
	Polled   bool          `json:"polled_ingress,omitempty"`
	// Coop: the slice is kept by yield points in the request's busy loop
	// (about every µs), not by interrupts: xtc's clock-checked slices
	// (xtc_exec_set_preempt_coop) and, for Go, runtime.Gosched.
	Coop bool `json:"coop,omitempty"`
}

func contenders(cfg *Config) []Contender {
	var cs []Contender
	for _, s := range cfg.Slices {
		cs = append(cs, Contender{Key: "xtc-" + s.String(),
			Label: "xtc, slice " + fmtDur(s.Nanoseconds()), Kind: "xtc", Slice: s})
	}
	// The same slices with a different way in (--polled): the generator
	// fills a ring that a dispatcher proc on the carrier polls (no
	// wake-ups), which separates the scheduling from the runtime's
	// cross-thread ingress. A diagnostic: off by default.
	if cfg.Polled {
		for _, s := range cfg.Slices {
			cs = append(cs, Contender{Key: "xtc-" + s.String() + "-polled",
				Label: "xtc, slice " + fmtDur(s.Nanoseconds()) + ", polled ingress",
				Kind:  "xtc", Slice: s, Polled: true})
		}
	}
	// Preemption without its interrupt (--coop): the first slice kept by
	// yield points that the request's busy loop passes about every µs,
	// in both runtimes. Next to the involuntary row it splits the tail
	// into what the policy does and what an interrupt costs the machine.
	if cfg.Coop && len(cfg.Slices) > 0 {
		s := cfg.Slices[0]
		cs = append(cs,
			Contender{Key: "xtc-" + s.String() + "-coop",
				Label: "xtc, slice " + fmtDur(s.Nanoseconds()) + ", clock-checked (yield points, no interrupt)",
				Kind:  "xtc", Slice: s, Coop: true},
			Contender{Key: "go-gosched",
				Label: "Go, goroutine per request, runtime.Gosched every " + fmtDur(s.Nanoseconds()),
				Kind:  "go", Slice: s, Coop: true})
	}
	// The headline rows: the same work served from Go through the public
	// Go API (a goroutine per request calling Exec.GoInt), the first slice
	// kept by interrupts and, with --coop, by yield points (fromgo.go).
	if len(cfg.Slices) > 0 {
		s := cfg.Slices[0]
		cs = append(cs, Contender{Key: "xtcgo-" + s.String(),
			Label: "xtc from Go (Exec.GoInt per request goroutine), slice " + fmtDur(s.Nanoseconds()),
			Kind:  "xtcgo", Slice: s})
		if cfg.Coop {
			cs = append(cs, Contender{Key: "xtcgo-" + s.String() + "-coop",
				Label: "xtc from Go (Exec.GoInt), slice " + fmtDur(s.Nanoseconds()) + ", clock-checked",
				Kind:  "xtcgo", Slice: s, Coop: true})
		}
	}
	cs = append(cs,
		// The control: the same executor without preemption (FIFO, each
		// request runs to completion), to show what preemption changes.
		Contender{Key: "xtc-nopreempt", Label: "xtc, no preemption", Kind: "xtc"},
		// The controller starts from its own default quantum (100 µs).
		Contender{Key: "xtc-adaptive", Label: "xtc, adaptive slice", Kind: "xtc",
			Slice: 100 * time.Microsecond, Adaptive: true},
		Contender{Key: "go", Label: "Go, goroutine per request", Kind: "go"},
		Contender{Key: "gocgo", Label: "Go+cgo, goroutine per request, work in C", Kind: "gocgo"},
	)
	return cs
}

// TailPoint is the outcome of one contender at one (distribution, load).
type TailPoint struct {
	Dist      string  `json:"dist"`
	Load      float64 `json:"load"`
	Contender string  `json:"contender"`
	Status    string  `json:"status"`
	Why       string  `json:"why,omitempty"`
	N         int     `json:"requests"`
	Completed int     `json:"completed"`
	Dropped   int64   `json:"dropped,omitempty"` // xtc: spawns refused (e.g. out of stacks)
	All       Summary `json:"all"`
	Short     Summary `json:"short"`
	Lag       Summary `json:"generator_lag"`
	SLO       int64   `json:"slo_ns"`
	MeetsSLO  bool    `json:"meets_slo"`
	Wall      float64 `json:"wall_s"`
	// xtc only: involuntary preemptions during the run, and for the
	// adaptive contender the controller's last quantum and tail index.
	Preemptions uint64  `json:"preemptions,omitempty"`
	Quantum     int64   `json:"final_quantum_ns,omitempty"`
	TailIndex   float64 `json:"tail_index,omitempty"`
	CostNs      int64   `json:"preempt_cost_ns,omitempty"`
	TimerFires  uint64  `json:"timer_fires,omitempty"`
	Direct      uint64  `json:"direct_signals,omitempty"`
	Fallbacks   uint64  `json:"timer_fallbacks,omitempty"`
	// the overhead budget (xtc_preempt_set_budget): windows that
	// lengthened the slice, and the preemption cost it counted
	Stretches  uint64 `json:"budget_stretches,omitempty"`
	OverheadNs int64  `json:"preempt_overhead_ns,omitempty"`
	// xtc only: the carriers' parks and wake-ups (late ones are the
	// machine's: an idle vCPU resumed late while requests waited)
	Wakes      *WakeStats `json:"carrier_wakes,omitempty"`
	Trajectory []QPoint   `json:"quantum_trajectory,omitempty"`
	// Repetitions (interleaved with the other contenders): the point's
	// summaries are those of the median kept repetition (by short p99);
	// Reps has every repetition, Stalled ones were not kept (the
	// generator fell behind: see stalled()).
	Reps        []RepStat `json:"reps,omitempty"`
	Kept        int       `json:"reps_kept"`
	ShortP99Min int64     `json:"short_p99_min_ns"`
	ShortP99Max int64     `json:"short_p99_max_ns"`
	AllP99Min   int64     `json:"all_p99_min_ns"`
	AllP99Max   int64     `json:"all_p99_max_ns"`
}

// RepStat is one repetition of a point.
type RepStat struct {
	ShortP99  int64  `json:"short_p99_ns"`
	AllP99    int64  `json:"all_p99_ns"`
	LagP99    int64  `json:"lag_p99_ns"`
	LagMax    int64  `json:"lag_max_ns"`
	Stalled   bool   `json:"stalled"`
	SlowWakes uint64 `json:"slow_wakes,omitempty"` // xtc: carrier wake-ups >= 1 ms
	WakeMax   int64  `json:"wake_max_ns,omitempty"`
	Status    string `json:"status"`
}

// WakeStats are the xtc carriers' parks and wake-ups during one run
// (xtc_exec_loop_stats): Slow counts wake-ups that came 1 ms or more after
// the producer rang (XTC_EXEC_SLOW_WAKE_NS).
type WakeStats struct {
	Parks   uint64 `json:"parks"`
	Wakes   uint64 `json:"wakes"`
	Slow    uint64 `json:"slow"`
	TotalNs int64  `json:"total_ns"`
	MaxNs   int64  `json:"max_ns"`
}

// MeanNs is the mean wake-up latency (0 without wake-ups).
func (w *WakeStats) MeanNs() int64 {
	if w == nil || w.Wakes == 0 {
		return 0
	}
	return w.TotalNs / int64(w.Wakes)
}

// LagGate says when a repetition's generator issued arrivals so late (p99
// or max) that it measured the machine, not the runtime (another process
// held the CPU): such a repetition is marked and not kept when a clean one
// exists. The base limits are 30 µs (p99) and 300 µs (max); on a machine
// whose interrupts stall a thread longer than that (a software-virtualised
// guest: every interrupt that lands on the generator's CPU stalls it), they
// are raised to 2x and 10x the measured stall, or every repetition would
// be marked and the mark would say nothing.
type LagGate struct {
	P99   int64  `json:"p99_ns"`
	Max   int64  `json:"max_ns"`
	Basis string `json:"basis"`
}

const (
	lagP99Base = 30 * time.Microsecond
	lagMaxBase = 300 * time.Microsecond
)

func lagGate(f *Floor) LagGate {
	g := LagGate{P99: int64(lagP99Base), Max: int64(lagMaxBase), Basis: "fixed"}
	if f == nil {
		return g
	}
	stall := time.Duration(max(f.TimerStall, f.CrossStallP50Us) * float64(time.Microsecond))
	if 2*stall > lagP99Base {
		g.P99 = int64(2 * stall)
		g.Max = max(g.Max, int64(10*stall))
		g.Basis = fmt.Sprintf("raised to 2x / 10x the machine's interrupt stall (%.0f µs)",
			float64(stall)/float64(time.Microsecond))
	}
	return g
}

func (g LagGate) String() string {
	return fmt.Sprintf("lag p99 > %v or max > %v", time.Duration(g.P99).Round(time.Microsecond),
		time.Duration(g.Max).Round(time.Microsecond))
}

func stalled(p *TailPoint, g LagGate) bool {
	return p.Lag.P99 > g.P99 || p.Lag.Max > g.Max
}

// warmup is the prefix of every schedule that runs but is not measured
// (stack pools, caches, the controller's first period): the clock starts
// after it.
func warmup(cfg *Config) time.Duration {
	return max(cfg.Point/10, 10*time.Millisecond)
}

func (p *TailPoint) ok() bool { return p.Status == StatusOK.String() }

// incomplete marks a request that never completed; it sorts last, so any
// percentile that reaches it reads as "did not complete".
const incomplete = math.MaxInt64

// summarizeRun turns completion stamps into sojourn summaries, leaving
// out the requests that arrived during the warm-up.
func summarizeRun(s *Schedule, done, lag []int64, p *TailPoint, warm time.Duration) {
	n := s.N()
	all := make([]int64, 0, n)
	short := make([]int64, 0, n)
	var lagKept []int64
	p.N, p.Completed = 0, 0
	for i := 0; i < n; i++ {
		if s.Arrival[i] < int64(warm) {
			continue
		}
		p.N++
		lagKept = append(lagKept, lag[i])
		v := int64(incomplete)
		if done[i] >= 0 {
			v = done[i] - s.Arrival[i]
			p.Completed++
		}
		all = append(all, v)
		if s.Short[i] {
			short = append(short, v)
		}
	}
	p.All = Summarize(all)
	p.Short = Summarize(short)
	p.Lag = Summarize(lagKept)
	if p.Completed < p.N {
		// the mean is meaningless with sentinels in it: -1 = n/a
		p.All.Mean, p.Short.Mean = -1, -1
	}
	p.SLO = s.SLO()
	p.MeetsSLO = p.Completed == p.N && p.All.P99 <= p.SLO
}

// goTail replays the schedule on Go's runtime: one goroutine per request
// (what a Go server does per incoming request), started by the ingress
// (ingress.go; by default a generator thread outside Go, heard through the
// netpoller). The workers get `carriers` Ps plus one, the machine's
// default GOMAXPROCS on 2 vCPUs with one carrier, and the same for every
// Go row. Go has no way to give the request goroutines priority over each
// other; a long one holds its P (or, in cgo, its M) until it ends.
func goTail(s *Schedule, iters []uint64, cgo bool, carriers int, y goSched,
	ingress string) (done, lag []int64, err error) {
	prev := runtime.GOMAXPROCS(carriers + 1)
	defer runtime.GOMAXPROCS(prev)
	n := s.N()
	done = make([]int64, n)
	for i := range done {
		done[i] = -1
	}
	// counted per started request: a generator that failed to start
	// starts none, and then nothing is waited for
	var wg sync.WaitGroup
	var base time.Time
	lag, err = replay(ingress, s, &base, func(i int) {
		wg.Add(1)
		it := iters[i]
		if cgo {
			go func() {
				cSpin(it)
				done[i] = int64(time.Since(base))
				wg.Done()
			}()
		} else {
			go func() {
				if y.chunk > 0 {
					keep(goSpinSched(it, y))
				} else {
					keep(goSpin(it))
				}
				done[i] = int64(time.Since(base))
				wg.Done()
			}()
		}
	})
	wg.Wait()
	return done, lag, err
}

// drainBound is how long an xtc run may take to finish its backlog after
// the last arrival before it is stopped; requests still pending then count
// as not completed (the report says so). Go's goroutines cannot be
// stopped, so the Go runs always drain fully.
func drainBound(cfg *Config) time.Duration {
	return cfg.Point/2 + 300*time.Millisecond
}

// adaptPeriod scales the controller's update period to the run: the paper
// updates every 10 s of 2-minute runs; a load point here lasts --point, so
// the controller runs about ten times per point (at least every 10 ms).
func adaptPeriod(cfg *Config) time.Duration {
	return max(cfg.Point/10, 10*time.Millisecond)
}

// TailResults holds every point plus the per-distribution SLO verdicts.
type TailResults struct {
	Contenders []Contender                   `json:"contenders"`
	Gate       LagGate                       `json:"generator_lag_gate"`
	Points     []TailPoint                   `json:"points"`
	MaxLoad    map[string]map[string]float64 `json:"max_load_under_slo"` // dist -> contender -> load (0 = none)
	// Demand is what each fixed slice asks of a carrier at each point on
	// this machine (nil without a measured floor).
	Demand []Demand `json:"preemption_demand,omitempty"`
}

// Demand is the carrier time a fixed slice needs at one point of the
// schedule if every run longer than the slice is contended for its whole
// service (at 50% load of A1 a short request arrives every ~6 µs, so a
// long one nearly always is): each such request is preempted
// ceil(service/slice) - 1 times, each preemption costing the machine's
// floor (a timer expiry's stall plus a near re-arm, Floor.PreemptionUs).
// Above 1 the carrier cannot serve the load with that slice at all:
// xtc's overhead budget then lengthens the slice, and the tail is that of
// the longer slice. It bounds what any runtime that preempts by timer
// could reach on this machine, so it is reported next to the targets.
type Demand struct {
	Dist  string  `json:"dist"`
	Load  float64 `json:"load"`
	Slice int64   `json:"slice_ns"`
	// PerSec is preemptions per second per carrier; Share their carrier
	// time as a fraction of it; Total Share plus the offered work.
	PerSec float64 `json:"preemptions_per_s"`
	Share  float64 `json:"preemption_share"`
	Total  float64 `json:"total_demand"`
}

// preemptDemand computes Demand for one schedule and slice, with a
// preemption costing costUs of carrier time.
func preemptDemand(s *Schedule, slice time.Duration, costUs float64) Demand {
	d := Demand{Dist: s.Dist, Load: s.Load, Slice: slice.Nanoseconds()}
	span := float64(s.Duration.Nanoseconds()) * float64(s.Carriers)
	if slice <= 0 || span <= 0 {
		return d
	}
	var cuts, work float64
	for _, svc := range s.Service {
		work += float64(svc)
		if n := (svc + slice.Nanoseconds() - 1) / slice.Nanoseconds(); n > 1 {
			cuts += float64(n - 1)
		}
	}
	d.PerSec = cuts / span * 1e9
	d.Share = cuts * costUs * 1e3 / span
	d.Total = d.Share + work/span
	return d
}

func tailSteps(cfg *Config) int {
	return len(cfg.Dists) * len(cfg.Loads) * len(contenders(cfg)) * cfg.TailReps
}

// runOne is one repetition of one contender at one point.
func runOne(cfg *Config, c Contender, s *Schedule, cIters, goIters []uint64,
	cal Calibration, dist string, load float64) TailPoint {
	p := TailPoint{Dist: dist, Load: load, Contender: c.Key, SLO: s.SLO()}
	warm := warmup(cfg)
	runtime.GC()
	t0 := time.Now()
	switch c.Kind {
	case "xtc":
		var chunk uint64
		if c.Coop {
			chunk = coopChunk(cal.CItersPerNs)
		}
		r, st, why := xtcTail(s.Arrival, cIters, cfg.Carriers, c.Slice,
			c.Adaptive, c.Polled, chunk, adaptPeriod(cfg), drainBound(cfg))
		p.Status, p.Why = st.String(), why
		if st == StatusOK {
			summarizeRun(s, r.Done, r.Lag, &p, warm)
			p.Preemptions, p.Quantum, p.TailIndex = r.Preempts, int64(r.Quantum), r.TailIndex
			p.CostNs, p.TimerFires, p.Direct, p.Fallbacks = r.CostNs, r.Fires, r.Direct, r.Fallbacks
			p.Stretches, p.OverheadNs = r.Stretches, r.OvhNs
			p.Trajectory = r.Traj
			w := r.Wakes
			p.Wakes = &w
			p.Dropped = r.Dropped
			if r.Dropped > 0 {
				p.Why = fmt.Sprintf("%d requests dropped: the runtime refused to spawn them", r.Dropped)
			}
			if r.TimedOut {
				p.Why = fmt.Sprintf("timed out: %d of %d requests completed", r.Completed, s.N())
			}
		}
	case "go":
		var y goSched
		if c.Coop {
			y = goSched{chunk: coopChunk(cal.GoItersPerNs), slice: c.Slice}
		}
		done, lag, err := goTail(s, goIters, false, cfg.Carriers, y, cfg.GoIngress)
		p.Status = StatusOK.String()
		summarizeRun(s, done, lag, &p, warm)
		if err != nil {
			p.Why = "arrivals: " + err.Error()
		}
	case "xtcgo":
		var chunk uint64
		if c.Coop {
			chunk = coopChunk(cal.CItersPerNs)
		}
		done, lag, refused, why := xtcGoTail(s, cIters, cfg.Carriers, c.Slice, chunk,
			drainBound(cfg), cfg.GoIngress)
		p.Status = StatusOK.String()
		summarizeRun(s, done, lag, &p, warm)
		p.Dropped = refused
		if refused > 0 {
			p.Why = fmt.Sprintf("%d calls refused (ErrAgain or another error)", refused)
		}
		if why != "" {
			p.Why = why
		}
	case "gocgo":
		done, lag, err := goTail(s, cIters, true, cfg.Carriers, goSched{}, cfg.GoIngress)
		p.Status = StatusOK.String()
		summarizeRun(s, done, lag, &p, warm)
		if err != nil {
			p.Why = "arrivals: " + err.Error()
		}
	}
	p.Wall = time.Since(t0).Seconds()
	return p
}

// aggregate folds the repetitions of one contender at one point: the
// median kept repetition (by short p99) stands for the point, with the
// spread over the kept ones. Stalled repetitions are kept only when every
// repetition stalled (then the point is marked).
func aggregate(reps []TailPoint, g LagGate) TailPoint {
	var kept []int
	for i := range reps {
		if reps[i].ok() && !stalled(&reps[i], g) {
			kept = append(kept, i)
		}
	}
	allStalled := len(kept) == 0
	if allStalled {
		for i := range reps {
			if reps[i].ok() {
				kept = append(kept, i)
			}
		}
	}
	if len(kept) == 0 {
		p := reps[0]
		p.Reps = repStats(reps, g)
		return p
	}
	sort.Slice(kept, func(a, b int) bool { return reps[kept[a]].Short.P99 < reps[kept[b]].Short.P99 })
	p := reps[kept[(len(kept)-1)/2]]
	p.Reps = repStats(reps, g)
	p.Kept = len(kept)
	p.ShortP99Min, p.ShortP99Max = int64(math.MaxInt64), 0
	p.AllP99Min, p.AllP99Max = int64(math.MaxInt64), 0
	for _, k := range kept {
		r := &reps[k]
		p.ShortP99Min, p.ShortP99Max = min(p.ShortP99Min, r.Short.P99), max(p.ShortP99Max, r.Short.P99)
		p.AllP99Min, p.AllP99Max = min(p.AllP99Min, r.All.P99), max(p.AllP99Max, r.All.P99)
	}
	if allStalled {
		p.Kept = 0
		note := fmt.Sprintf("every repetition had a stalled generator (%v): the figure measures the machine", g)
		if p.Why != "" {
			p.Why += "; " + note
		} else {
			p.Why = note
		}
	}
	return p
}

func repStats(reps []TailPoint, g LagGate) []RepStat {
	out := make([]RepStat, len(reps))
	for i := range reps {
		r := &reps[i]
		out[i] = RepStat{ShortP99: r.Short.P99, AllP99: r.All.P99, LagP99: r.Lag.P99,
			LagMax: r.Lag.Max, Stalled: r.ok() && stalled(r, g), Status: r.Status}
		if r.Wakes != nil {
			out[i].SlowWakes, out[i].WakeMax = r.Wakes.Slow, r.Wakes.MaxNs
		}
	}
	return out
}

func runTail(cfg *Config, cal Calibration, floor *Floor, pb *Progress) *TailResults {
	cs := contenders(cfg)
	res := &TailResults{Contenders: cs, Gate: lagGate(floor), MaxLoad: map[string]map[string]float64{}}
	unavailable := map[string]string{} // contender -> why, once known
	for _, dist := range cfg.Dists {
		for _, load := range cfg.Loads {
			s, err := NewSchedule(dist, load, cfg.Carriers, cfg.Point, cfg.Seed)
			if err != nil {
				panic(err) // configuration was validated
			}
			if floor != nil {
				for _, sl := range cfg.Slices {
					res.Demand = append(res.Demand, preemptDemand(s, sl, floor.PreemptionUs()))
				}
			}
			cIters := s.Iterations(cal.CItersPerNs)
			goIters := s.Iterations(cal.GoItersPerNs)
			reps := make([][]TailPoint, len(cs))
			// interleaved: every repetition runs every contender, in an
			// order rotated per repetition, so a slow phase of the
			// machine does not land on one contender
			for rep := 0; rep < cfg.TailReps; rep++ {
				for k := range cs {
					ci := (k + rep) % len(cs)
					c := cs[ci]
					label := fmt.Sprintf("tail %s %2.0f%% %s #%d", dist, load*100, c.Key, rep+1)
					pb.Note(label)
					if why, ok := unavailable[c.Key]; ok {
						reps[ci] = append(reps[ci], TailPoint{Dist: dist, Load: load,
							Contender: c.Key, SLO: s.SLO(), Status: StatusUnavail.String(), Why: why})
						pb.Step(label)
						continue
					}
					p := runOne(cfg, c, s, cIters, goIters, cal, dist, load)
					if p.Status == StatusUnavail.String() {
						unavailable[c.Key] = p.Why
					}
					reps[ci] = append(reps[ci], p)
					pb.Step(label)
				}
			}
			for ci := range cs {
				res.Points = append(res.Points, aggregate(reps[ci], res.Gate))
			}
		}
	}
	for _, dist := range cfg.Dists {
		res.MaxLoad[dist] = map[string]float64{}
		for _, c := range cs {
			best := 0.0
			for _, p := range res.Points {
				if p.Dist == dist && p.Contender == c.Key && p.ok() && p.MeetsSLO && p.Load > best {
					best = p.Load
				}
			}
			res.MaxLoad[dist][c.Key] = best
		}
	}
	return res
}

// point finds the result of a contender at (dist, load); nil if absent.
func (r *TailResults) point(dist string, load float64, key string) *TailPoint {
	if r == nil {
		return nil
	}
	for i := range r.Points {
		p := &r.Points[i]
		if p.Dist == dist && p.Contender == key && math.Abs(p.Load-load) < 1e-9 {
			return p
		}
	}
	return nil
}
