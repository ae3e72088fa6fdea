// Command xtcbench runs the same workloads on xtc and on Go's runtime in
// one process and writes a Markdown report, results.json and PNG plots.
//
//	cd cmd/xtcbench && go run . --short --out ../../docs/xtcbench
//
// See `xtcbench --help` and the README section on xtcbench.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "--mem-child" {
		return runMemChild(args[1:], stdout)
	}
	cfg, err := parseConfig(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "xtcbench:", err)
		return 2
	}
	errf, _ := stderr.(*os.File)
	if errf == nil {
		cfg.Progress = "off"
	}
	res, err := Execute(cfg, errf, "xtcbench "+strings.Join(args, " "))
	if err != nil {
		fmt.Fprintln(stderr, "xtcbench:", err)
		return 1
	}
	fmt.Fprintln(stdout)
	WriteSummary(stdout, res)
	if res.Floor != nil {
		fmt.Fprintf(stdout, "\npreemption floor here: a timer expiry stalls a thread %.0f µs, "+
			"a near re-arm %.0f µs, a signal from another CPU %.0f µs (report.md says more)\n",
			res.Floor.TimerStall, res.Floor.ArmNearUs, res.Floor.CrossStallP50Us)
	}
	if res.Calibration.Warning != "" {
		fmt.Fprintf(stdout, "\nwarning: %s\n", res.Calibration.Warning)
	}
	fmt.Fprintf(stdout, "\nreport: %s\n", filepath.Join(cfg.Out, "report.md"))
	return 0
}

// Execute runs the configured workloads and writes the output folder.
// progressOut may be nil (no progress bar).
func Execute(cfg *Config, progressOut *os.File, command string) (*Results, error) {
	if err := os.MkdirAll(cfg.Out, 0o755); err != nil {
		return nil, err
	}
	start := time.Now()
	res := &Results{Started: start, Command: strings.TrimSpace(command), Mode: cfg.Mode,
		Host: hostInfo(), Features: probeFeatures(), Carriers: cfg.Carriers, Config: cfg}

	total := 1
	if cfg.has("micro") {
		total += len(microDefs())
	}
	if cfg.has("tail") {
		total += tailSteps(cfg)
	}
	if cfg.has("fair") {
		total += fairSteps()
	}
	if cfg.has("hog") {
		total += hogSteps()
	}
	if cfg.has("batch") {
		total += batchSteps(cfg)
	}
	if cfg.has("memory") {
		total += memSteps(cfg)
	}
	var pb *Progress
	if progressOut != nil {
		pb = NewProgress(cfg.Progress, progressOut, total)
	}
	pb.Note("calibrating the busy loops")
	res.Calibration = calibrate()
	// what one preemption costs here bounds every slice result: stated
	// next to them (xb_floor.c)
	if cfg.has("tail") || cfg.has("hog") || cfg.has("fair") {
		if f, err := measureFloor(); err != nil {
			res.FloorError = err.Error()
		} else {
			res.Floor = f
		}
	}
	pb.Step("calibrated")

	if cfg.has("micro") {
		res.Micro = runMicro(cfg, pb)
	}
	if cfg.has("tail") {
		res.Tail = runTail(cfg, res.Calibration, res.Floor, pb)
	}
	if cfg.has("fair") {
		res.Fair = runFair(cfg, res.Calibration, pb)
	}
	if cfg.has("hog") {
		res.Hog = runHog(cfg, pb)
	}
	if cfg.has("batch") {
		res.Batch = runBatch(cfg, res.Calibration, pb)
	}
	if cfg.has("memory") {
		res.Memory = runMemory(cfg, pb)
	}
	pb.Done()
	res.Elapsed = time.Since(start).Seconds()
	res.Host.LoadEnd = loadAvg()
	computeVerdicts(res)
	if cfg.Plots {
		res.Plots, res.PlotErrors = writePlots(cfg.Out, res)
	}
	if err := WriteReport(cfg.Out, res); err != nil {
		return res, err
	}
	return res, nil
}
