package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// Workload names accepted by --only.
var WorkloadNames = []string{"micro", "tail", "fair", "hog", "batch", "memory"}

// Config is everything a run needs; parseConfig fills it from the command
// line, starting from the defaults of the chosen mode (--short or --full)
// and applying every flag the user set explicitly on top.
type Config struct {
	Mode       string          // "short" or "full"
	Out        string          // output folder
	Workloads  []string        // subset of WorkloadNames, in canonical order
	Dists      []string        // subset of DistNames
	Loads      []float64       // fractions of capacity, ascending
	Point      time.Duration   // arrival window of one load point
	Carriers   int             // xtc carriers = GOMAXPROCS of the Go workers
	Slices     []time.Duration // fixed preemption slices of the xtc contenders
	TailReps   int             // repetitions per tail point (interleaved)
	Polled     bool            // add the polled-ingress xtc contenders
	Coop       bool            // add the cooperative pair (yield points, no interrupt)
	GoIngress  string          // how the Go rows hear of arrivals (ingress.go)
	FairDur    time.Duration   // fairness run length (per side)
	FairWindow time.Duration   // fairness sampling window
	HogProbes  int             // number of 1 ms sleeps of the probe
	HogSlice   time.Duration   // xtc preemption slice in the hog test
	MicroReps  int             // repetitions per micro benchmark (median kept)
	MicroScale float64         // multiplies the micro iteration counts
	Seed       uint64          // schedule seed
	Progress   string          // auto | on | off
	Plots      bool            // write PNG plots
}

func defaultConfig(mode string) Config {
	c := Config{
		Mode:       mode,
		Out:        "xtcbench-out",
		Workloads:  append([]string(nil), WorkloadNames...),
		Dists:      append([]string(nil), DistNames...),
		Loads:      []float64{0.1, 0.3, 0.5, 0.7, 0.9},
		Point:      200 * time.Millisecond,
		Carriers:   defaultCarriers(),
		Slices:     []time.Duration{50 * time.Microsecond, 200 * time.Microsecond},
		FairDur:    2 * time.Second,
		FairWindow: 100 * time.Millisecond,
		HogProbes:  500,
		HogSlice:   200 * time.Microsecond,
		MicroReps:  3,
		TailReps:   3,
		Coop:       true,
		GoIngress:  IngressGoroutine,
		MicroScale: 1,
		Seed:       1,
		Progress:   "auto",
		Plots:      true,
	}
	if mode == "full" {
		c.Loads = []float64{0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9}
		c.Point = 2 * time.Second
		c.FairDur = 10 * time.Second
		c.HogProbes = 3000
		c.MicroReps = 7
		c.MicroScale = 3
	}
	return c
}

// defaultCarriers leaves one CPU to the load generator (and the preemption
// monitor) so that the workers are not oversubscribed; at least one.
func defaultCarriers() int {
	n := runtime.NumCPU() - 1
	if n < 1 {
		n = 1
	}
	return n
}

const usageHeader = `xtcbench: xtc against Go's runtime on the same workloads, in one process.

Usage: xtcbench [--short | --full] [flags]

Workloads (--only):
  micro  yield, spawn, spawn fan-out, ping-pong, cross-loop handoff,
         C call: xtc (timed inside C) vs Go (timed in Go), with ratios
         (the raw context switch needs the internal API: make bench)
  tail   open-loop Poisson arrivals, service A1/A2/B/C (LibPreemptible),
         loads 10%..90%: p50/p99/p99.9 sojourn, highest load under the SLO
         (p99 <= 200x mean service); xtc with involuntary preemption vs
         Go goroutine-per-request (work in Go, and work in a cgo call)
  fair   three workloads that should split CPU 600:300:100:
         xtc scheduling classes vs Go (no weights)
  hog    a never-yielding C kernel next to a 1 ms-sleep probe: probe lateness
  batch  continuous batching of a skewed mix: xtc.Batch vs a Go
         goroutine/channel batcher vs static batching (throughput, p99)
  memory 10^5 and 10^6 procs parked in a receive (and 10^6 on 1 KiB stacks)
         vs parked goroutines:
         resident bytes each, time to spawn+park and to wake+exit (each
         side in a child process; 10^6 xtc procs hold ~5 GB for seconds)

Writes report.md, results.json and PNG plots into --out and prints the
summary table. --short (the default; what "make run" uses) finishes in
about two minutes on a 2-core machine; --full runs every point longer.

Flags:
`

// parseConfig parses args (without the program name). It returns
// flag.ErrHelp after printing usage for -h/--help.
func parseConfig(args []string, stderr io.Writer) (*Config, error) {
	fs := flag.NewFlagSet("xtcbench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	short := fs.Bool("short", false, "short run (default): about 2 minutes")
	full := fs.Bool("full", false, "full run: every load from 10% to 90%, longer points")
	out := fs.String("out", "", "output folder (default xtcbench-out)")
	only := fs.String("only", "", "comma-separated workloads to run: "+strings.Join(WorkloadNames, ","))
	dists := fs.String("dists", "", "comma-separated service distributions: "+strings.Join(DistNames, ","))
	loads := fs.String("loads", "", "comma-separated loads in percent of capacity (short: 10,30,50,70,90; full: 10..90 by 10)")
	point := fs.Duration("point", 0, "arrival window of one load point (short 200ms, full 2s)")
	carriers := fs.Int("carriers", 0, "worker carriers for xtc = GOMAXPROCS of the Go workers (default NumCPU-1, at least 1)")
	slices := fs.String("slices", "", "fixed xtc preemption slices (default 50us,200us)")
	tailReps := fs.Int("tail-reps", 0, "repetitions per tail point, interleaved, median kept (default 3)")
	polled := fs.Bool("polled", false, "also run the xtc contenders with polled ingress (diagnostic)")
	goIngress := fs.String("go-ingress", IngressGoroutine, "how the Go rows of the tail section hear of arrivals: "+
		IngressGoroutine+" (a generator goroutine spinning on one of Go's Ps), "+
		IngressNetpoll+" (a spinning generator thread outside Go, heard through the netpoller, as from a network) or "+
		IngressNetpollSleep+" (the same thread sleeping until each arrival: the load leaves the whole machine to the service)")
	coop := fs.Bool("coop", true, "also run the first slice kept by yield points instead of interrupts, in xtc (clock-checked slices) and Go (runtime.Gosched)")
	fairDur := fs.Duration("fair-dur", 0, "fairness run length per side (short 2s, full 10s)")
	fairWin := fs.Duration("fair-window", 0, "fairness sampling window (default 100ms)")
	hogProbes := fs.Int("hog-probes", 0, "1 ms sleeps of the hog probe (short 500, full 3000)")
	hogSlice := fs.Duration("hog-slice", 0, "xtc preemption slice of the hog and fairness tests (default 200us)")
	reps := fs.Int("reps", 0, "repetitions per micro benchmark, median kept (short 3, full 7)")
	scale := fs.Float64("micro-scale", 0, "multiplier of micro iteration counts (short 1, full 3)")
	seed := fs.Uint64("seed", 1, "seed of the arrival schedules")
	progress := fs.String("progress", "auto", "progress bar on stderr: auto (when a terminal), on, off")
	noPlots := fs.Bool("no-plots", false, "do not write PNG plots")
	fs.Usage = func() {
		fmt.Fprint(stderr, usageHeader)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		fs.Usage()
		return nil, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if *short && *full {
		return nil, errors.New("--short and --full are exclusive")
	}
	mode := "short"
	if *full {
		mode = "full"
	}
	c := defaultConfig(mode)
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })

	var err error
	if set["out"] {
		if *out == "" {
			return nil, errors.New("--out must not be empty")
		}
		c.Out = *out
	}
	if set["only"] {
		if c.Workloads, err = parseNames(*only, WorkloadNames, "workload"); err != nil {
			return nil, err
		}
	}
	if set["dists"] {
		if c.Dists, err = parseNames(*dists, DistNames, "distribution"); err != nil {
			return nil, err
		}
	}
	if set["loads"] {
		if c.Loads, err = parseLoads(*loads); err != nil {
			return nil, err
		}
	}
	if set["point"] {
		if *point <= 0 {
			return nil, errors.New("--point must be > 0")
		}
		c.Point = *point
	}
	if set["carriers"] {
		if *carriers < 1 || *carriers > 64 {
			return nil, fmt.Errorf("--carriers %d out of range 1..64", *carriers)
		}
		c.Carriers = *carriers
	}
	if set["slices"] {
		if c.Slices, err = parseDurations(*slices); err != nil {
			return nil, fmt.Errorf("--slices: %w", err)
		}
	}
	if set["tail-reps"] {
		if *tailReps < 1 || *tailReps > 50 {
			return nil, errors.New("--tail-reps must be in 1..50")
		}
		c.TailReps = *tailReps
	}
	c.Polled = *polled
	c.Coop = *coop
	known := false
	for _, k := range Ingresses {
		known = known || k == *goIngress
	}
	if !known {
		return nil, fmt.Errorf("--go-ingress %q: want one of %s", *goIngress, strings.Join(Ingresses, ", "))
	}
	c.GoIngress = *goIngress
	if set["fair-dur"] {
		if *fairDur <= 0 {
			return nil, errors.New("--fair-dur must be > 0")
		}
		c.FairDur = *fairDur
	}
	if set["fair-window"] {
		if *fairWin <= 0 {
			return nil, errors.New("--fair-window must be > 0")
		}
		c.FairWindow = *fairWin
	}
	if c.FairWindow > c.FairDur {
		return nil, errors.New("--fair-window longer than --fair-dur")
	}
	if set["hog-probes"] {
		if *hogProbes < 1 {
			return nil, errors.New("--hog-probes must be >= 1")
		}
		c.HogProbes = *hogProbes
	}
	if set["hog-slice"] {
		if *hogSlice <= 0 {
			return nil, errors.New("--hog-slice must be > 0")
		}
		c.HogSlice = *hogSlice
	}
	if set["reps"] {
		if *reps < 1 {
			return nil, errors.New("--reps must be >= 1")
		}
		c.MicroReps = *reps
	}
	if set["micro-scale"] {
		if *scale <= 0 {
			return nil, errors.New("--micro-scale must be > 0")
		}
		c.MicroScale = *scale
	}
	c.Seed = *seed
	switch *progress {
	case "auto", "on", "off":
		c.Progress = *progress
	default:
		return nil, fmt.Errorf("--progress %q: want auto, on or off", *progress)
	}
	c.Plots = !*noPlots
	return &c, nil
}

// parseNames splits a comma list, checks each name against valid
// (case-insensitively) and returns them in valid's order, deduplicated.
func parseNames(s string, valid []string, what string) ([]string, error) {
	want := map[string]bool{}
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		ok := false
		for _, v := range valid {
			if strings.EqualFold(f, v) {
				want[v] = true
				ok = true
			}
		}
		if !ok {
			return nil, fmt.Errorf("unknown %s %q (want %s)", what, f, strings.Join(valid, ","))
		}
	}
	var out []string
	for _, v := range valid {
		if want[v] {
			out = append(out, v)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no %s given", what)
	}
	return out, nil
}

// parseLoads reads percentages (1..200) and returns sorted fractions.
func parseLoads(s string) ([]float64, error) {
	seen := map[float64]bool{}
	var out []float64
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(f), "%"))
		if f == "" {
			continue
		}
		v, err := strconv.ParseFloat(f, 64)
		if err != nil || v <= 0 || v > 200 {
			return nil, fmt.Errorf("bad load %q: want a percentage in (0, 200]", f)
		}
		if !seen[v] {
			seen[v] = true
			out = append(out, v/100)
		}
	}
	if len(out) == 0 {
		return nil, errors.New("no load given")
	}
	sortFloats(out)
	return out, nil
}

func parseDurations(s string) ([]time.Duration, error) {
	var out []time.Duration
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		d, err := time.ParseDuration(f)
		if err != nil {
			return nil, err
		}
		if d < time.Microsecond || d > time.Second {
			return nil, fmt.Errorf("slice %v out of range 1µs..1s", d)
		}
		out = append(out, d)
	}
	if len(out) == 0 {
		return nil, errors.New("no slice given")
	}
	return out, nil
}

func sortFloats(v []float64) {
	for i := 1; i < len(v); i++ {
		for j := i; j > 0 && v[j] < v[j-1]; j-- {
			v[j], v[j-1] = v[j-1], v[j]
		}
	}
}

func (c *Config) has(workload string) bool {
	for _, w := range c.Workloads {
		if w == workload {
			return true
		}
	}
	return false
}
