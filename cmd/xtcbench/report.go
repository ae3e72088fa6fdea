package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"time"
)

// HostInfo describes the machine and toolchain of a run.
type HostInfo struct {
	CPU       string `json:"cpu"`
	NumCPU    int    `json:"num_cpu"`
	Kernel    string `json:"kernel"`
	GoVersion string `json:"go_version"`
	OSArch    string `json:"os_arch"`
	// /proc/loadavg at the start and at the end of the run: the machine is
	// shared, and a loaded machine inflates every cross-thread figure.
	LoadStart string `json:"loadavg_start"`
	LoadEnd   string `json:"loadavg_end"`
	Nice      int    `json:"nice"` // the process's nice value (both sides share it)
	// Affinity: the CPUs the process may run on (sched_getaffinity), as
	// ranges; NumCPU counts them.
	Affinity string `json:"affinity"`
}

func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

func hostInfo() HostInfo {
	h := HostInfo{NumCPU: runtime.NumCPU(), GoVersion: runtime.Version(),
		OSArch: runtime.GOOS + "/" + runtime.GOARCH, CPU: "unknown", Kernel: "unknown",
		LoadStart: loadAvg(), Nice: niceValue(), Affinity: affinityCPUs()}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, "model name") {
				if i := strings.Index(l, ":"); i >= 0 {
					h.CPU = strings.TrimSpace(l[i+1:])
				}
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		h.Kernel = strings.TrimSpace(string(b))
	}
	return h
}

// Verdict is one line of the summary table.
type Verdict struct {
	Check  string `json:"check"`
	Xtc    string `json:"xtc"`
	Go     string `json:"go"`
	GoCgo  string `json:"go_cgo"`
	Target string `json:"target"`
	Result string `json:"result"` // MET, MISSED, NOT AVAILABLE, NOT MEASURED, info
}

const (
	resMet     = "MET"
	resMissed  = "MISSED"
	resUnavail = "NOT AVAILABLE"
	resNotMeas = "NOT MEASURED"
	resInfo    = "info"
)

// Results is everything one run produced; it is also results.json.
type Results struct {
	Started     time.Time     `json:"started"`
	Elapsed     float64       `json:"elapsed_s"`
	Command     string        `json:"command"`
	Mode        string        `json:"mode"`
	Host        HostInfo      `json:"host"`
	Features    Features      `json:"features"`
	Calibration Calibration   `json:"calibration"`
	Floor       *Floor        `json:"preemption_floor,omitempty"`
	FloorError  string        `json:"preemption_floor_error,omitempty"`
	Carriers    int           `json:"carriers"`
	Config      *Config       `json:"config"`
	Micro       []MicroRow    `json:"micro,omitempty"`
	Tail        *TailResults  `json:"tail,omitempty"`
	Fair        *FairResults  `json:"fair,omitempty"`
	Hog         *HogResults   `json:"hog,omitempty"`
	Batch       *BatchResults `json:"batch,omitempty"`
	Memory      []MemRow      `json:"memory,omitempty"`
	Verdicts    []Verdict     `json:"summary"`
	Plots       []string      `json:"plots,omitempty"`
	PlotErrors  []string      `json:"plot_errors,omitempty"`
}

func ratioStr(r float64) string {
	if r <= 0 || r != r {
		return "–"
	}
	if r >= 100 {
		return fmt.Sprintf("%.0f×", r)
	}
	if r >= 10 {
		return fmt.Sprintf("%.1f×", r)
	}
	return fmt.Sprintf("%.2f×", r)
}

func p99Str(v int64) string {
	if v == incomplete {
		return "did not finish"
	}
	return fmtDur(v)
}

// computeVerdicts fills r.Verdicts from the sections that ran.
func computeVerdicts(r *Results) {
	var vs []Verdict
	for _, m := range r.Micro {
		v := Verdict{Check: "micro " + m.Name + " (Go/xtc)", Go: fmtDurF(m.GoNs),
			GoCgo: "", Target: m.TargetTx}
		switch {
		case m.Status != StatusOK:
			v.Xtc, v.Result = m.Status.String(), resUnavail
			if m.Status == StatusFail {
				v.Result = resMissed
			}
		case m.FloorNs > 0:
			v.Check = "micro " + m.Name + " (xtc vs the cross-core floor)"
			v.Xtc = fmt.Sprintf("%s (%.2f× floor %s)", fmtDurF(m.XtcNs), m.XtcNs/m.FloorNs, fmtDurF(m.FloorNs))
			v.Go = fmtDurF(m.GoNs) + " (two locked threads)"
			v.Result = verdict(m.XtcNs <= m.FloorBound*m.FloorNs)
		case m.NotLike != "":
			v.Check = "micro " + m.Name + " (not like for like)"
			v.Xtc = fmtDurF(m.XtcNs)
			v.Result = resInfo
		case m.Target > 0:
			v.Xtc = fmtDurF(m.XtcNs) + " (" + ratioStr(m.Ratio()) + ")"
			v.Result = verdict(m.Ratio() >= m.Target)
		default:
			v.Xtc = fmtDurF(m.XtcNs) + " (" + ratioStr(m.Ratio()) + ")"
			v.Result = resInfo
		}
		vs = append(vs, v)
	}
	if t := r.Tail; t != nil {
		vs = append(vs, tailVerdicts(t)...)
	}
	if f := r.Fair; f != nil {
		v := Verdict{Check: "fairness 600:300:100, worst class error",
			Target: "≤ 5% (xtc)"}
		if x := f.series("xtc"); x != nil && x.ok() {
			v.Xtc = fmt.Sprintf("%.1f%% (%s)", 100*x.Deviation, splitStr(x.Overall))
			v.Result = verdict(x.Deviation <= 0.05)
		} else if x != nil {
			v.Xtc, v.Result = x.Status, resUnavail
		}
		// plain goroutines, and next to them Go's best weighted variant
		// (the emulation that comes closest), so the headline compares
		// xtc with the best Go can do, not only with no weights at all
		var parts []string
		if g := f.series("go"); g != nil && g.ok() {
			parts = append(parts, fmt.Sprintf("plain %.1f%% (%s)", 100*g.Deviation, splitStr(g.Overall)))
		}
		var best *FairSeries
		for i := range f.Series {
			sr := &f.Series[i]
			if strings.HasPrefix(sr.Key, "go-") && sr.ok() && (best == nil || sr.Deviation < best.Deviation) {
				best = sr
			}
		}
		if best != nil {
			parts = append(parts, fmt.Sprintf("best weighted (%s) %.1f%% (%s)",
				strings.TrimPrefix(best.Key, "go-"), 100*best.Deviation, splitStr(best.Overall)))
		}
		v.Go = strings.Join(parts, "; ")
		vs = append(vs, v)
	}
	if h := r.Hog; h != nil {
		v := Verdict{Check: "hog: 1 ms-sleep probe lateness p99, slice " + fmtDur(h.Slice.Nanoseconds()),
			Target: "xtc ≤ 400 µs"}
		if x := h.series("xtc"); x != nil && x.ok() {
			v.Xtc = fmtDur(x.Late.P99)
			v.Result = verdict(x.Late.P99 <= 400_000)
		} else if x != nil {
			v.Xtc, v.Result = x.Status, resUnavail
		}
		g, gc := h.series("go"), h.series("gocgo")
		if g != nil && g.ok() {
			v.Go = fmtDur(g.Late.P99) + " (hog in Go)"
		}
		if gc != nil && gc.ok() {
			v.GoCgo = fmtDur(gc.Late.P99) + " (hog in cgo)"
		}
		vs = append(vs, v)
		if x := h.series("xtc-50us"); x != nil {
			v2 := Verdict{Check: "hog: probe lateness p99, slice 50 µs", Target: "xtc ≤ Go+cgo"}
			if v.Go != "" {
				v2.Go = v.Go
			}
			v2.GoCgo = v.GoCgo
			if !x.ok() {
				v2.Xtc, v2.Result = x.Status, resUnavail
			} else {
				v2.Xtc = fmtDur(x.Late.P99)
				v2.Result = resNotMeas
				if gc != nil && gc.ok() {
					v2.Result = verdict(x.Late.P99 <= gc.Late.P99)
				}
			}
			vs = append(vs, v2)
		}
	}
	if b := r.Batch; b != nil {
		vs = append(vs, batchVerdicts(b)...)
	}
	vs = append(vs, memVerdicts(r.Memory)...)
	r.Verdicts = vs
}

func verdict(ok bool) string {
	if ok {
		return resMet
	}
	return resMissed
}

func splitStr(f [3]float64) string {
	return fmt.Sprintf("%.1f:%.1f:%.1f", 1000*f[0], 1000*f[1], 1000*f[2])
}

// tailVerdicts: the A1 targets (1 carrier, 50 µs slice: short p99
// ≤ 100 / 150 / 200 µs at 10 / 50 / 70% load, ≥ 10× lower than Go's
// goroutines at 50 and 70%) for the 50 µs contender; the other xtc
// contenders (no preemption: the control, other slices, adaptive) next to
// it as information; then the highest load under the SLO per distribution.
func tailVerdicts(t *TailResults) []Verdict {
	vs := fromGoVerdicts(t)
	targets := []struct {
		load   float64
		bound  int64
		vsGo   bool
		target string
	}{
		{0.1, 100_000, false, "≤ 100 µs"},
		{0.5, 150_000, true, "≤ 150 µs and ≥ 10× lower than Go"},
		{0.7, 200_000, true, "≤ 200 µs and ≥ 10× lower than Go"},
	}
	for _, tg := range targets {
		for _, c := range t.Contenders {
			if c.Kind != "xtc" {
				continue
			}
			xp := t.point("A1", tg.load, c.Key)
			if xp == nil {
				continue
			}
			gp := t.point("A1", tg.load, "go")
			cp := t.point("A1", tg.load, "gocgo")
			if c.Coop {
				// like for like: Go with the same cooperative slice; a
				// cgo call has no yield point
				gp, cp = t.point("A1", tg.load, "go-gosched"), nil
			}
			main := c.Key == "xtc-50µs"
			v := Verdict{Check: fmt.Sprintf("A1 @ %s: short p99, core alone (fed from C), %s", loadStr(tg.load), c.Label),
				Target: tg.target, Result: resInfo}
			if !main {
				v.Target = "(next to the 50 µs slice)"
			}
			if gp != nil && gp.ok() {
				v.Go = p99Str(gp.Short.P99)
			}
			if cp != nil && cp.ok() {
				v.GoCgo = p99Str(cp.Short.P99)
			}
			if !xp.ok() {
				v.Xtc = xp.Status
				if main {
					v.Result = resUnavail
				}
				vs = append(vs, v)
				continue
			}
			v.Xtc = p99Str(xp.Short.P99) + spread(xp.ShortP99Min, xp.ShortP99Max)
			if xp.Kept == 0 && len(xp.Reps) > 0 {
				v.Xtc += " (generator stalled)"
			}
			rg := 0.0
			if gp != nil && gp.ok() {
				rg = shortRatio(gp, xp)
				v.Go += " (" + ratioStr(rg) + ")"
			}
			if cp != nil && cp.ok() {
				v.GoCgo += " (" + ratioStr(shortRatio(cp, xp)) + ")"
			}
			if main {
				ok := xp.Short.P99 <= tg.bound
				if tg.vsGo {
					ok = ok && rg >= 10
				}
				v.Result = verdict(ok)
			}
			vs = append(vs, v)
		}
	}
	dists := make([]string, 0, len(t.MaxLoad))
	for _, d := range DistNames {
		if _, ok := t.MaxLoad[d]; ok {
			dists = append(dists, d)
		}
	}
	for _, d := range dists {
		v := Verdict{Check: "max load with p99 ≤ SLO, " + d, Result: resInfo}
		var xs []string
		goSched := ""
		for _, c := range t.Contenders {
			l := t.MaxLoad[d][c.Key]
			s := loadStr(l)
			p := t.point(d, t.firstLoad(), c.Key)
			if p != nil && !p.ok() {
				s = p.Status
			}
			switch c.Kind {
			case "xtc", "xtcgo":
				xs = append(xs, strings.TrimPrefix(c.Key, "xtc-")+" "+s)
			case "go":
				if c.Coop {
					goSched = "Gosched " + s
				} else {
					v.Go = s
				}
			case "gocgo":
				v.GoCgo = s
			}
		}
		v.Xtc = strings.Join(xs, ", ")
		if goSched != "" {
			v.Go += ", " + goSched // plain goroutines first
		}
		vs = append(vs, v)
	}
	return vs
}

func (t *TailResults) firstLoad() float64 {
	if len(t.Points) == 0 {
		return 0
	}
	return t.Points[0].Load
}

// shortRatio is how many times lower xtc's short p99 is than other's.
func shortRatio(other, x *TailPoint) float64 {
	if !other.ok() || !x.ok() || x.Short.P99 <= 0 {
		return 0
	}
	if x.Short.P99 == incomplete {
		return 0
	}
	if other.Short.P99 == incomplete {
		return 1e9
	}
	return float64(other.Short.P99) / float64(x.Short.P99)
}

func loadStr(l float64) string {
	if l <= 0 {
		return "none"
	}
	return fmt.Sprintf("%.0f%%", 100*l)
}

// ---------------------------------------------------------------- output

// mdTable writes a Markdown table.
func mdTable(w io.Writer, head []string, rows [][]string) {
	esc := func(s string) string { return strings.ReplaceAll(s, "|", "\\|") }
	fmt.Fprintf(w, "| %s |\n", strings.Join(mapStr(head, esc), " | "))
	seps := make([]string, len(head))
	for i := range seps {
		seps[i] = "---"
	}
	fmt.Fprintf(w, "|%s|\n", strings.Join(seps, "|"))
	for _, r := range rows {
		fmt.Fprintf(w, "| %s |\n", strings.Join(mapStr(r, esc), " | "))
	}
	fmt.Fprintln(w)
}

func mapStr(v []string, f func(string) string) []string {
	out := make([]string, len(v))
	for i, s := range v {
		out[i] = f(s)
	}
	return out
}

func summaryRows(r *Results) [][]string {
	var rows [][]string
	for _, v := range r.Verdicts {
		rows = append(rows, []string{v.Check, v.Xtc, v.Go, v.GoCgo, v.Target, v.Result})
	}
	return rows
}

var summaryHead = []string{"check", "xtc", "Go", "Go+cgo", "target", "result"}

// WriteSummary prints the summary table as aligned plain text.
func WriteSummary(w io.Writer, r *Results) {
	rows := append([][]string{summaryHead}, summaryRows(r)...)
	width := make([]int, len(summaryHead))
	for _, row := range rows {
		for i, c := range row {
			if n := len([]rune(c)); n > width[i] {
				width[i] = n
			}
		}
	}
	// The check column can be long; cap it so the table stays readable.
	if width[0] > 60 {
		width[0] = 60
	}
	for ri, row := range rows {
		var b strings.Builder
		for i, c := range row {
			rc := []rune(c)
			if len(rc) > width[i] {
				rc = append(rc[:width[i]-1], '…')
			}
			b.WriteString(string(rc))
			if i < len(row)-1 {
				b.WriteString(strings.Repeat(" ", width[i]-len(rc)+2))
			}
		}
		fmt.Fprintln(w, strings.TrimRight(b.String(), " "))
		if ri == 0 {
			tot := 0
			for _, x := range width {
				tot += x + 2
			}
			fmt.Fprintln(w, strings.Repeat("-", tot-2))
		}
	}
}

// WriteReport writes report.md and results.json into dir.
func WriteReport(dir string, r *Results) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	js, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("results.json: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "results.json"), append(js, '\n'), 0o644); err != nil {
		return err
	}
	// summary.md: the summary table alone, for pasting into the README.
	var sb strings.Builder
	fmt.Fprintf(&sb, "Measured %s by `%s` (%s, %d CPUs, load average %s).\n\n",
		r.Started.UTC().Format("2006-01-02 15:04 MST"), r.Command, r.Host.CPU,
		r.Host.NumCPU, r.Host.LoadStart)
	mdTable(&sb, summaryHead, summaryRows(r))
	if err := os.WriteFile(filepath.Join(dir, "summary.md"), []byte(sb.String()), 0o644); err != nil {
		return err
	}
	f, err := os.Create(filepath.Join(dir, "report.md"))
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	writeMarkdown(w, r)
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func hasPlot(r *Results, name string) bool {
	for _, p := range r.Plots {
		if p == name {
			return true
		}
	}
	return false
}

func writeMarkdown(w io.Writer, r *Results) {
	fmt.Fprintf(w, "# xtcbench: xtc against Go's runtime\n\n")
	fmt.Fprintf(w, "Generated %s by `%s` (%s mode, %.0f s).\n\n",
		r.Started.UTC().Format("2006-01-02 15:04 MST"), r.Command, r.Mode, r.Elapsed)
	fmt.Fprintf(w, "Machine: %s, %d CPUs (allowed: %s), Linux %s, %s, %s. xtc %s, I/O backend %s. "+
		"Busy loop: C %.3f it/ns, Go %.3f it/ns.\n\n",
		r.Host.CPU, r.Host.NumCPU, orDash(r.Host.Affinity), r.Host.Kernel, r.Host.GoVersion, r.Host.OSArch,
		r.Features.Version, orDash(r.Features.Backend),
		r.Calibration.CItersPerNs, r.Calibration.GoItersPerNs)
	if r.Calibration.Warning != "" {
		fmt.Fprintf(w, "**Calibration warning:** %s.\n\n", r.Calibration.Warning)
	}
	fmt.Fprintf(w, "Load average (1, 5, 15 min) at the start: %s; at the end: %s; the "+
		"process ran at nice %d (both sides alike). The machine is shared: with a load "+
		"above its %d CPUs, every figure that involves two threads (wake-ups, "+
		"cross-thread submission, the load generator) is inflated for both sides.\n\n",
		r.Host.LoadStart, r.Host.LoadEnd, r.Host.Nice, r.Host.NumCPU)
	if r.Floor != nil || r.FloorError != "" {
		if r.FloorError != "" {
			fmt.Fprintf(w, "**Preemption floor of this machine:** not measured (%s).\n\n",
				r.FloorError)
		} else {
			writeFloor(w, r.Floor)
		}
	}
	fmt.Fprintf(w, "Both sides ran in the same process, one after the other, on the same "+
		"machine, with the same work and the same number of worker threads. "+
		"Nothing was tuned per side; a target that is missed is reported as missed.\n\n")

	fmt.Fprintf(w, "## Summary\n\n")
	mdTable(w, summaryHead, summaryRows(r))
	if len(r.Features.Missing) > 0 {
		fmt.Fprintf(w, "Parts of xtc that were not available in this build (their rows say "+
			"NOT AVAILABLE):\n\n")
		for _, fn := range featureNames {
			if why, ok := r.Features.Missing[fn.name]; ok {
				fmt.Fprintf(w, "- %s: %s\n", fn.name, why)
			}
		}
		fmt.Fprintln(w)
	}

	if len(r.Micro) > 0 {
		writeMicro(w, r)
	}
	if r.Tail != nil {
		writeTail(w, r)
	}
	if r.Fair != nil {
		writeFair(w, r)
	}
	if r.Hog != nil {
		writeHog(w, r)
	}
	if r.Batch != nil {
		writeBatch(w, r)
	}
	if len(r.Memory) > 0 {
		writeMemory(w, r)
	}
	if len(r.PlotErrors) > 0 {
		fmt.Fprintf(w, "## Plot errors\n\n")
		for _, e := range r.PlotErrors {
			fmt.Fprintf(w, "- %s\n", e)
		}
		fmt.Fprintln(w)
	}
}

func orDash(s string) string {
	if s == "" {
		return "–"
	}
	return s
}

func writeMicro(w io.Writer, r *Results) {
	fmt.Fprintf(w, "## 1. Micro operations\n\n")
	fmt.Fprintf(w, "Median of %d repetitions, ns per operation. The xtc side is timed inside C "+
		"(one cgo call per measurement), the Go side in Go. Go/xtc > 1 means xtc is faster. "+
		"The raw context switch is not in this table: the public API has no bare switch "+
		"(a proc yielding alone takes the loop's fast path and does not switch); "+
		"`make bench` measures it with the internal API (bench_switch).\n\n",
		r.Config.MicroReps)
	var rows [][]string
	for _, m := range r.Micro {
		x := fmtDurF(m.XtcNs)
		if m.Status != StatusOK {
			x = m.Status.String() + ": " + m.Why
		}
		ratio := ratioStr(m.Ratio())
		goDoes := m.GoWhat
		if m.FloorNs > 0 && m.Status == StatusOK {
			ratio = fmt.Sprintf("%s; xtc %.2f× the floor", ratio, m.XtcNs/m.FloorNs)
			goDoes += fmt.Sprintf("; floor: two threads spinning on one word, %s per round trip", fmtDurF(m.FloorNs))
		}
		if m.NotLike != "" {
			ratio = "(not like for like)"
			goDoes += "; " + m.NotLike
		}
		rows = append(rows, []string{m.Name, x, fmtDurF(m.GoNs), ratio,
			m.TargetTx, m.XtcWhat, goDoes})
	}
	mdTable(w, []string{"operation", "xtc", "Go", "Go/xtc", "target", "xtc does", "Go does"}, rows)
}

func writeTail(w io.Writer, r *Results) {
	t := r.Tail
	cfg := r.Config
	fmt.Fprintf(w, "## 2. Tail latency under heavy-tailed load\n\n")
	fmt.Fprintf(w, "LibPreemptible's synthetic evaluation: open-loop Poisson arrivals replayed "+
		"from a schedule generated before the run (seed %d), identical for every contender. "+
		"Each request is a calibrated busy loop of its service time (C loop for xtc and Go+cgo, "+
		"the same loop in Go for Go). Sojourn = completion − *scheduled* arrival, so a "+
		"generator or runtime that falls behind pays for it. %d worker carrier(s): xtc runs "+
		"an executor with %d loop(s) plus a load-generator thread (and the preemption monitor); "+
		"Go runs with GOMAXPROCS=%d (%d for the workers, one for the generator goroutine). "+
		"Capacity = carriers / mean service time; each load point receives %v of arrivals. "+
		"\"Short\" requests are the 99.5%% class of A1/A2 and the requests below the median of B. "+
		"SLO = 200× the mean service time (as in the paper); \"meets SLO\" needs p99 of all "+
		"requests ≤ SLO and every request completed.\n\n",
		cfg.Seed, cfg.Carriers, cfg.Carriers, cfg.Carriers+1, cfg.Carriers, cfg.Point)
	switch cfg.GoIngress {
	case IngressNetpoll, IngressNetpollSleep:
		how := "spinning until each arrival"
		if cfg.GoIngress == IngressNetpollSleep {
			how = "sleeping until each arrival"
		}
		fmt.Fprintf(w, "The Go rows here (--go-ingress %s) hear of their arrivals as a server hears "+
			"of requests from a network: a generator thread outside Go, %s, rings an eventfd that "+
			"a reader goroutine waits on in the netpoller, and the reader starts one goroutine "+
			"per request; GOMAXPROCS stays %d, the generator's thread being outside Go.\n\n",
			cfg.GoIngress, how, cfg.Carriers+1)
	}
	fmt.Fprintf(w, "A repetition whose generator issued arrivals late (%v; %s) measured the "+
		"machine and is not kept when a clean one exists. For xtc the report also counts the "+
		"carriers' wake-ups that came 1 ms or more after a producer rang a parked carrier "+
		"(xtc_exec_loop_stats): those are the machine's too (an idle virtual CPU resumed late), "+
		"and every request that arrived meanwhile waited with them; Go's runtime parks and wakes "+
		"its threads the same way but does not count it.\n\n", t.Gate, t.Gate.Basis)
	fmt.Fprintf(w, "Contenders:\n\n")
	for _, c := range t.Contenders {
		fmt.Fprintf(w, "- **%s** (`%s`)\n", c.Label, c.Key)
	}
	fmt.Fprintln(w)

	fmt.Fprintf(w, "### Highest load whose p99 stays under the SLO\n\n")
	head := []string{"distribution", "SLO"}
	for _, c := range t.Contenders {
		head = append(head, c.Label)
	}
	var rows [][]string
	for _, d := range cfg.Dists {
		mean, _ := DistMean(d)
		row := []string{d + ": " + distDescription(d), fmtDurF(200 * mean)}
		for _, c := range t.Contenders {
			s := loadStr(t.MaxLoad[d][c.Key])
			if p := t.point(d, cfg.Loads[0], c.Key); p != nil && !p.ok() {
				s = p.Status
			}
			row = append(row, s)
		}
		rows = append(rows, row)
	}
	mdTable(w, head, rows)

	for _, d := range cfg.Dists {
		mean, _ := DistMean(d)
		fmt.Fprintf(w, "### %s: %s (mean service %s)\n\n", d, distDescription(d), fmtDurF(mean))
		if name := "tail_" + d + ".png"; hasPlot(r, name) {
			fmt.Fprintf(w, "![p99 sojourn vs load, %s](%s)\n\n", d, name)
		}
		var rows [][]string
		for _, load := range cfg.Loads {
			for _, c := range t.Contenders {
				p := t.point(d, load, c.Key)
				if p == nil {
					continue
				}
				if !p.ok() {
					rows = append(rows, []string{loadStr(load), c.Key, p.Status + ": " + p.Why,
						"", "", "", "", "", "", "", ""})
					continue
				}
				slo := "no"
				if p.MeetsSLO {
					slo = "yes"
				}
				kept := fmt.Sprintf("%d/%d", p.Kept, len(p.Reps))
				if p.Kept == 0 && len(p.Reps) > 0 {
					kept = fmt.Sprintf("0/%d (all stalled)", len(p.Reps))
				}
				rows = append(rows, []string{loadStr(load), c.Key,
					p99Str(p.Short.P50), p99Str(p.Short.P99) + spread(p.ShortP99Min, p.ShortP99Max),
					p99Str(p.Short.P999),
					p99Str(p.All.P50), p99Str(p.All.P99) + spread(p.AllP99Min, p.AllP99Max),
					fmtDur(p.Lag.P99) + " / " + fmtDur(p.Lag.Max), kept,
					fmt.Sprintf("%d/%d", p.Completed, p.N), slo})
			}
		}
		mdTable(w, []string{"load", "contender", "short p50", "short p99 [min–max]", "short p99.9",
			"all p50", "all p99 [min–max]", "gen. lag p99 / max", "reps kept", "completed", "meets SLO"}, rows)
		var notes []string
		for _, load := range cfg.Loads {
			for _, c := range t.Contenders {
				p := t.point(d, load, c.Key)
				if p == nil || !p.ok() || c.Kind != "xtc" {
					continue
				}
				if c.Adaptive && p.Quantum > 0 {
					var tr []string
					for _, q := range p.Trajectory {
						tr = append(tr, fmt.Sprintf("%s (load %.2f, α %.1f)", fmtDur(q.Quantum), q.Load, q.Alpha))
					}
					notes = append(notes, fmt.Sprintf("%s at %s: quantum trajectory %s; last %s, tail index %.2f, %d preemptions, measured cost %s (floor 4× = %s)",
						c.Key, loadStr(load), strings.Join(tr, " → "), fmtDur(p.Quantum), p.TailIndex,
						p.Preemptions, fmtDur(p.CostNs), fmtDur(4*p.CostNs)))
				}
				if p.Wakes != nil && p.Wakes.Wakes > 0 {
					slowReps := 0
					for _, rs := range p.Reps {
						if rs.SlowWakes > 0 {
							slowReps++
						}
					}
					if slowReps > 0 {
						notes = append(notes, fmt.Sprintf("%s at %s: late carrier wake-ups (≥ 1 ms) in %d of %d repetitions; the median one: %d of %d wake-ups (mean %s, latest %s)",
							c.Key, loadStr(load), slowReps, len(p.Reps), p.Wakes.Slow, p.Wakes.Wakes,
							fmtDur(p.Wakes.MeanNs()), fmtDur(p.Wakes.MaxNs)))
					}
				}
				if p.Fallbacks > 0 {
					notes = append(notes, fmt.Sprintf("%s at %s: %d carrier(s) had no slice timer (monitor path)",
						c.Key, loadStr(load), p.Fallbacks))
				}
				if p.Dropped > 0 || p.Why != "" {
					notes = append(notes, fmt.Sprintf("%s at %s: %s", c.Key, loadStr(load), p.Why))
				}
			}
		}
		for _, n := range notes {
			fmt.Fprintf(w, "- %s\n", n)
		}
		if len(notes) > 0 {
			fmt.Fprintln(w)
		}
		writeDemand(w, r, d)
	}
}

// writeDemand states what the fixed slices ask of a carrier at each load
// of distribution d on this machine (Demand): one paragraph.
func writeDemand(w io.Writer, r *Results, d string) {
	if r.Floor == nil || r.Tail == nil {
		return
	}
	var parts []string
	over := false
	for _, sl := range r.Config.Slices {
		var ls []string
		for _, dm := range r.Tail.Demand {
			if dm.Dist != d || dm.Slice != sl.Nanoseconds() {
				continue
			}
			ls = append(ls, fmt.Sprintf("%s → %.0f%% (%.0f /s)", loadStr(dm.Load),
				100*dm.Total, dm.PerSec))
			over = over || dm.Total >= 1
		}
		if len(ls) > 0 {
			parts = append(parts, fmt.Sprintf("slice %s: %s", fmtDur(sl.Nanoseconds()),
				strings.Join(ls, ", ")))
		}
	}
	if len(parts) == 0 {
		return
	}
	fmt.Fprintf(w, "Carrier time the fixed slices need on this machine (the work plus "+
		"%.0f µs per preemption, the floor's timer-expiry stall and near re-arm, with "+
		"every request longer than the slice preempted at each slice end; in parentheses "+
		"the preemptions per second): %s.", r.Floor.PreemptionUs(), strings.Join(parts, "; "))
	// the wait of a short request that arrives as a long one starts
	var waits []string
	for _, sl := range r.Config.Slices {
		us := float64(sl.Microseconds())
		waits = append(waits, fmt.Sprintf("%.0f–%.0f µs with a %s slice", us+r.Floor.TimerLateP50,
			us+r.Floor.TimerLateP99, fmtDur(sl.Nanoseconds())))
	}
	fmt.Fprintf(w, " Even where the carrier has room, a short request that arrives as a long "+
		"one starts waits the slice plus the expiry's lateness (p50 %.0f µs, p99 %.0f µs "+
		"here): %s, before its own service.", r.Floor.TimerLateP50, r.Floor.TimerLateP99,
		strings.Join(waits, ", "))
	if over {
		fmt.Fprint(w, " At 100% or more no runtime that preempts by timer can serve the load "+
			"with that slice here: xtc's overhead budget lengthens the slice "+
			"(xtc_preempt_set_budget) and the tail is that of the longer slice; near it, "+
			"the queue of a nearly saturated carrier is the tail.")
	}
	fmt.Fprint(w, "\n\n")
}

// spread prints " [min–max]" of the kept repetitions (empty with one).
func spread(lo, hi int64) string {
	if hi <= 0 || lo == hi || lo == int64(math.MaxInt64) {
		return ""
	}
	return " [" + p99Str(lo) + "–" + p99Str(hi) + "]"
}

func writeFair(w io.Writer, r *Results) {
	f := r.Fair
	fmt.Fprintf(w, "## 3. Fairness: a 600:300:100 split of one carrier\n\n")
	fmt.Fprintf(w, "Three always-runnable workloads of equal cost (the busy loop, counted in "+
		"iterations, i.e. CPU time) on one carrier for %v, sampled every %v. xtc puts them in "+
		"three scheduling classes with shares 600, 300 and 100; Go has no weights, so the "+
		"same workloads run as one goroutine each, and once more as 6, 3 and 1 goroutines "+
		"(the closest substitute Go offers). Target: each xtc class within ±5%% (relative) of "+
		"its share over the run.\n\n", r.Config.FairDur, r.Config.FairWindow)
	if hasPlot(r, "fair.png") {
		fmt.Fprintf(w, "![CPU split over time](fair.png)\n\n")
	}
	var rows [][]string
	for _, s := range f.Series {
		if !s.ok() {
			rows = append(rows, []string{s.Label, s.Status + ": " + s.Why, "", "", "", ""})
			continue
		}
		rows = append(rows, []string{s.Label, s.Mode, splitStr(s.Overall),
			fmt.Sprintf("%.1f%%", 100*s.Deviation), fmt.Sprintf("%.1f%%", 100*s.WorstWindowDev),
			fmt.Sprintf("%d", len(s.Times))})
	}
	mdTable(w, []string{"series", "mode", "split (per 1000)", "largest class error",
		"worst window error", "windows"}, rows)
}

func writeHog(w io.Writer, r *Results) {
	h := r.Hog
	fmt.Fprintf(w, "## 4. Hog: a never-yielding C kernel next to a 1 ms-sleep probe\n\n")
	fmt.Fprintf(w, "The probe sleeps 1 ms %d times; lateness = actual sleep − 1 ms. The hog "+
		"spins without ever yielding. xtc: one carrier, involuntary preemption with a %s "+
		"slice. Go: GOMAXPROCS=1, the hog either in Go code (Go preempts it asynchronously) "+
		"or as the same C kernel inside a cgo call (Go hands the P to another thread, so the "+
		"kernel scheduler shares the CPU). The runs without a hog show each timer path's "+
		"floor on this machine.\n\n", r.Config.HogProbes, fmtDur(h.Slice.Nanoseconds()))
	if hasPlot(r, "hog.png") {
		fmt.Fprintf(w, "![probe lateness](hog.png)\n\n")
	}
	var rows [][]string
	for _, s := range h.Series {
		if !s.ok() {
			rows = append(rows, []string{s.Label, s.Threads, s.Status + ": " + s.Why, "", "", "", ""})
			continue
		}
		rows = append(rows, []string{s.Label, s.Threads, fmtDur(s.Late.P50), fmtDur(s.Late.P99),
			fmtDur(s.Late.P999), fmtDur(s.Late.Max),
			fmt.Sprintf("%d/%d", s.Late.N, r.Config.HogProbes)})
	}
	mdTable(w, []string{"variant", "threads", "p50", "p99", "p99.9", "max", "probes done"}, rows)
	fmt.Fprintf(w, "Every variant stops after %v; probes not done by then are not counted "+
		"(a variant whose probes are very late completes fewer).\n\n", hogBudget(r.Config.HogProbes))
}

// fromGoVerdicts: the headline, A1 served from goroutines through the
// public Go API (Exec.GoInt per request goroutine, 1 carrier, 50 µs
// slice) against the same goroutines calling the kernel by plain cgo and
// against pure Go: short p99 >= 5x lower than plain cgo and >= 10x lower
// than Go at every load up to 70%, and no call refused below 90%. The
// clock-checked variant is reported next to it.
func fromGoVerdicts(t *TailResults) []Verdict {
	var vs []Verdict
	for _, c := range t.Contenders {
		if c.Kind != "xtcgo" {
			continue
		}
		main := !c.Coop
		for _, load := range t.loads("A1") {
			xp := t.point("A1", load, c.Key)
			if xp == nil {
				continue
			}
			gp, cp := t.point("A1", load, "go"), t.point("A1", load, "gocgo")
			v := Verdict{Check: fmt.Sprintf("A1 @ %s from Go: short p99, %s", loadStr(load), c.Label),
				Target: "≥ 5× lower than Go+cgo, ≥ 10× lower than Go; no refusal", Result: resInfo}
			if load > 0.7+1e-9 {
				v.Target = "no refusal below 90%"
			}
			if !main {
				v.Target = "(next to the interrupt-kept slice)"
			}
			if !xp.ok() {
				v.Xtc = xp.Status
				vs = append(vs, v)
				continue
			}
			v.Xtc = p99Str(xp.Short.P99) + spread(xp.ShortP99Min, xp.ShortP99Max)
			if xp.Dropped > 0 {
				v.Xtc += fmt.Sprintf(", %d refused", xp.Dropped)
			}
			if xp.Kept == 0 && len(xp.Reps) > 0 {
				v.Xtc += " (generator stalled)"
			}
			rg, rc := 0.0, 0.0
			if gp != nil && gp.ok() {
				rg = shortRatio(gp, xp)
				v.Go = p99Str(gp.Short.P99) + " (" + ratioStr(rg) + ")"
			}
			if cp != nil && cp.ok() {
				rc = shortRatio(cp, xp)
				v.GoCgo = p99Str(cp.Short.P99) + " (" + ratioStr(rc) + ")"
			}
			if main {
				ok := xp.Dropped == 0
				if load <= 0.7+1e-9 {
					ok = ok && rc >= 5 && rg >= 10
				}
				v.Result = verdict(ok)
			}
			vs = append(vs, v)
		}
	}
	return vs
}

// loads lists the loads measured for dist, ascending.
func (r *TailResults) loads(dist string) []float64 {
	var ls []float64
	seen := map[float64]bool{}
	for _, p := range r.Points {
		if p.Dist == dist && !seen[p.Load] {
			seen[p.Load] = true
			ls = append(ls, p.Load)
		}
	}
	sort.Float64s(ls)
	return ls
}
