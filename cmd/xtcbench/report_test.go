package main

import (
	"bytes"
	"encoding/json"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// tinyConfig runs every workload for a few milliseconds.
func tinyConfig(t *testing.T, out string) *Config {
	t.Helper()
	c, err := parseConfig([]string{"--out", out, "--dists", "A1,C", "--loads", "30,70",
		"--point", "15ms", "--fair-dur", "150ms", "--fair-window", "50ms",
		"--hog-probes", "5", "--reps", "1", "--micro-scale", "0.01",
		"--slices", "100us", "--carriers", "1", "--progress", "off"}, &bytes.Buffer{})
	require.NoError(t, err)
	return c
}

func TestTinyRunWritesReportAndPlots(t *testing.T) {
	dir := t.TempDir()
	cfg := tinyConfig(t, dir)
	res, err := Execute(cfg, nil, "xtcbench --tiny")
	require.NoError(t, err)

	md, err := os.ReadFile(filepath.Join(dir, "report.md"))
	require.NoError(t, err)
	text := string(md)
	for _, want := range []string{"# xtcbench", "## Summary", "## 1. Micro operations",
		"## 2. Tail latency", "### A1:", "### C:", "Highest load whose p99",
		"## 3. Fairness", "## 4. Hog", "| check | xtc | Go | Go+cgo | target | result |",
		"A1 @ 70%", "ping-pong"} {
		assert.Contains(t, text, want)
	}
	if res.Floor != nil {
		assert.Contains(t, text, "Carrier time the fixed slices need")
		assert.NotEmpty(t, res.Tail.Demand)
	}
	// Every xtc row either ran or says why not; Go rows always ran.
	if !res.Features.Has(FeatPreempt) {
		assert.Contains(t, text, "not available")
	}

	sm, err := os.ReadFile(filepath.Join(dir, "summary.md"))
	require.NoError(t, err)
	assert.Contains(t, string(sm), "| check | xtc | Go | Go+cgo | target | result |")

	js, err := os.ReadFile(filepath.Join(dir, "results.json"))
	require.NoError(t, err)
	var back map[string]any
	require.NoError(t, json.Unmarshal(js, &back))
	assert.Contains(t, back, "summary")
	assert.Contains(t, back, "tail")

	for _, name := range []string{"tail_A1.png", "tail_C.png", "fair.png", "hog.png"} {
		f, err := os.Open(filepath.Join(dir, name))
		require.NoError(t, err, name)
		img, err := png.Decode(f)
		f.Close()
		require.NoError(t, err, name)
		assert.Greater(t, img.Bounds().Dx(), 300, name)
		assert.Contains(t, text, "("+name+")", "report embeds "+name)
	}
	assert.Empty(t, res.PlotErrors)

	// The cooperative pair ran next to the others (on by default), and
	// its xtc row is compared with Go's Gosched row.
	assert.Contains(t, text, "xtc-100µs-coop")
	assert.Contains(t, text, "runtime.Gosched every 100")
	if res.Features.Has(FeatPreempt) {
		for _, p := range res.Tail.Points {
			if p.Contender == "xtc-100µs-coop" {
				assert.Equal(t, "ok", p.Status, p.Why)
				assert.Zero(t, p.Preemptions, "no involuntary preemption on a clock-checked carrier")
			}
		}
	}

	// Go contenders produced real numbers at every point.
	for _, p := range res.Tail.Points {
		if p.Contender == "go" || p.Contender == "gocgo" || p.Contender == "go-gosched" {
			assert.Equal(t, "ok", p.Status)
			assert.Equal(t, p.N, p.Completed)
			assert.Greater(t, p.All.P50, int64(0))
		}
	}
	g := res.Fair.series("go")
	require.NotNil(t, g)
	assert.InDelta(t, 1.0, g.Overall[0]+g.Overall[1]+g.Overall[2], 1e-9)

	var sum bytes.Buffer
	WriteSummary(&sum, res)
	assert.Contains(t, sum.String(), "check")
	assert.Contains(t, sum.String(), "hog")
}

func TestRunPrintsSummary(t *testing.T) {
	dir := t.TempDir()
	var so, se bytes.Buffer
	rc := run([]string{"--only", "hog", "--hog-probes", "3", "--out", dir, "--no-plots"}, &so, &se)
	require.Equal(t, 0, rc, se.String())
	assert.Contains(t, so.String(), "result")
	assert.Contains(t, so.String(), "report: ")
	_, err := os.Stat(filepath.Join(dir, "hog.png"))
	assert.True(t, os.IsNotExist(err), "--no-plots writes no plot")
}

func TestVerdicts(t *testing.T) {
	pt := func(key string, short int64) TailPoint {
		return TailPoint{Dist: "A1", Load: 0.7, Contender: key, Status: "ok",
			Short: Summary{P99: short}, N: 1, Completed: 1}
	}
	r := &Results{
		Micro: []MicroRow{
			{Name: "yield", XtcNs: 20, GoNs: 100, Status: StatusOK, Target: 3.5},
			{Name: "spawn", XtcNs: 80, GoNs: 100, Status: StatusOK, Target: 2},
			{Name: "fan-out", Status: StatusUnavail, GoNs: 50},
		},
		Tail: &TailResults{
			Contenders: []Contender{{Key: "xtc-50µs", Label: "xtc a", Kind: "xtc"},
				{Key: "xtc-b", Label: "xtc b", Kind: "xtc"},
				{Key: "xtcgo-50µs", Label: "xtc go", Kind: "xtcgo"},
				{Key: "xtcgo-b", Label: "xtc go b", Kind: "xtcgo", Coop: true},
				{Key: "go", Kind: "go"}, {Key: "gocgo", Kind: "gocgo"}},
			Points: []TailPoint{pt("xtc-50µs", 10_000), pt("xtc-b", 50_000),
				pt("xtcgo-50µs", 20_000), pt("xtcgo-b", 100_000),
				pt("go", 200_000), pt("gocgo", 150_000)},
			MaxLoad: map[string]map[string]float64{"A1": {"xtc-50µs": 0.7, "go": 0}},
		},
		Fair: &FairResults{Series: []FairSeries{{Key: "xtc", Status: "ok", Deviation: 0.04}}},
		Hog: &HogResults{Series: []HogSeries{{Key: "xtc", Status: "ok",
			Late: Summary{P99: 3_000_000}}}},
	}
	computeVerdicts(r)
	got := map[string]string{}
	for _, v := range r.Verdicts {
		got[v.Check] = v.Result
	}
	assert.Equal(t, resMet, got["micro yield (Go/xtc)"])
	assert.Equal(t, resMissed, got["micro spawn (Go/xtc)"])
	assert.Equal(t, resUnavail, got["micro fan-out (Go/xtc)"])
	assert.Equal(t, resMet, got["A1 @ 70%: short p99, core alone (fed from C), xtc a"])  // ≤ 200 µs, 20× Go
	assert.Equal(t, resInfo, got["A1 @ 70%: short p99, core alone (fed from C), xtc b"]) // next to it
	// from Go: 7.5x lower than plain cgo (>= 5) and 10x lower than Go
	assert.Equal(t, resMet, got["A1 @ 70% from Go: short p99, xtc go"])
	assert.Equal(t, resInfo, got["A1 @ 70% from Go: short p99, xtc go b"]) // next to it
	assert.Equal(t, "A1 @ 70% from Go: short p99, xtc go", r.Verdicts[3].Check, "the from-Go rows come first")
	assert.Equal(t, resMet, got["fairness 600:300:100, worst class error"])
	for k, v := range got {
		if strings.HasPrefix(k, "hog") {
			assert.Equal(t, resMissed, v)
		}
		if strings.HasPrefix(k, "max load") {
			assert.Equal(t, resInfo, v)
		}
	}
}

// The demand paragraph: figures per slice and load, and the warning only
// where some point needs the whole carrier or more.
func TestWriteDemand(t *testing.T) {
	r := &Results{Config: &Config{Slices: []time.Duration{50 * time.Microsecond}},
		Floor: sampleFloor(),
		Tail: &TailResults{Demand: []Demand{
			{Dist: "A1", Load: 0.1, Slice: 50_000, PerSec: 1500, Share: 0.09, Total: 0.19},
			{Dist: "A1", Load: 0.7, Slice: 50_000, PerSec: 10500, Share: 0.63, Total: 1.33},
			{Dist: "B", Load: 0.7, Slice: 50_000, PerSec: 10, Total: 0.7},
		}}}
	var b bytes.Buffer
	writeDemand(&b, r, "A1")
	s := b.String()
	assert.Contains(t, s, "59 µs per preemption")
	assert.Contains(t, s, "slice 50.0 µs: 10% → 19% (1500 /s), 70% → 133% (10500 /s)")
	assert.Contains(t, s, "no runtime that preempts by timer")
	assert.Contains(t, s, "p50 43 µs, p99 61 µs here): 93–111 µs with a 50.0 µs slice")
	b.Reset()
	writeDemand(&b, r, "B")
	assert.Contains(t, b.String(), "70% → 70% (10 /s)")
	assert.NotContains(t, b.String(), "no runtime that preempts by timer")
	b.Reset()
	r.Floor = nil
	writeDemand(&b, r, "A1")
	assert.Empty(t, b.String())
}

func TestProgressNilAndLines(t *testing.T) {
	var p *Progress
	p.Step("x") // nil is a no-op
	p.Note("x")
	p.Done()
	f, err := os.CreateTemp(t.TempDir(), "pb")
	require.NoError(t, err)
	defer f.Close()
	assert.Nil(t, NewProgress("auto", f, 3), "auto stays quiet on a file")
	pb := NewProgress("on", f, 2)
	require.NotNil(t, pb)
	pb.Step("one")
	pb.Step("two")
	pb.Step("three") // past the total: total grows
	pb.Done()
	b, _ := os.ReadFile(f.Name())
	assert.Contains(t, string(b), "2/2")
	assert.Contains(t, string(b), "3/3")
	_ = time.Second
}
