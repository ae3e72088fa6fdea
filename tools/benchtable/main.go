// Command benchtable runs the C microbenchmarks of bench/ (built by meson)
// and the Go-runtime equivalents (internal/gobench) in the same run, several
// times each, and prints one Markdown table of medians:
//
//	operation | xtc | Go | ratio
//
// ratio is Go/xtc: for times, how many times faster xtc is; for memory,
// how many times less xtc uses. Above 1 means xtc wins. Each C bench is an
// executable build/bench/bench_<x> printing lines `name value unit`; rows
// are matched to Go workloads by name (see rows). C lines with no Go
// counterpart are listed with "-" in the Go column.
//
// Usage: go run ./tools/benchtable [-builddir build] [-reps 5] [-only bench_a,bench_b] [-all]
package main

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/xtc-go/xtc/internal/gobench"
)

// row pairs a C bench result name with a Go workload.
type row struct {
	op    string         // table label
	names []string       // C result names that feed the xtc column (first found wins)
	goRun func() float64 // Go measurement, same unit
	unit  string
}

var rows = []row{
	{"one-way switch (asm)", []string{"switch_asm_oneway", "switch_asm", "switch"}, nil, "ns"},
	{"one-way switch (ucontext)", []string{"switch_ucontext_oneway", "switch_ucontext"}, nil, "ns"},
	{"yield between two procs vs runtime.Gosched (GOMAXPROCS=1)",
		[]string{"yield_proc", "proc_yield", "yield"}, func() float64 { return gobench.Gosched(1_000_000) }, "ns"},
	{"proc spawn + run + exit, one at a time, vs go f() + wait",
		[]string{"spawn_proc"}, func() float64 { return gobench.Spawn(200_000) }, "ns"},
	{"coroutine spawn + run + exit, one at a time, vs go f() + wait",
		[]string{"spawn_one"}, func() float64 { return gobench.Spawn(200_000) }, "ns"},
	{"coroutine spawn + run + exit, batches of 32, vs go f() x32 + wait",
		[]string{"spawn"}, func() float64 { return gobench.SpawnBatch(320_000, 32) }, "ns"},
	{"mailbox ping-pong round trip vs unbuffered chan",
		[]string{"proc_pingpong", "mailbox_pingpong", "pingpong"}, func() float64 { return gobench.PingPong(200_000) }, "ns"},
	{"resident memory per parked proc vs goroutine (100k)",
		[]string{"proc_parked_bytes", "parked_bytes"}, parkedGo, "B"},
}

func main() {
	builddir := flag.String("builddir", "build", "meson build directory")
	reps := flag.Int("reps", 5, "repetitions (medians are reported)")
	only := flag.String("only", "", "comma-separated bench executables to run (default: all)")
	all := flag.Bool("all", false, "also list the C figures that have no Go counterpart")
	flag.Parse()

	// Interleave: each repetition runs every C bench once, then every Go
	// workload once, so slow drifts of a shared machine hit both sides.
	cres, units := map[string][]float64{}, map[string]string{}
	gres := make([][]float64, len(rows))
	exes := cBenches(*builddir, *only)
	if len(exes) == 0 {
		fmt.Fprintf(os.Stderr, "benchtable: no C benches in %s/bench (not written yet, or not built)\n", *builddir)
	}
	for i := 0; i < *reps; i++ {
		runC(exes, cres, units)
		for j, r := range rows {
			if r.goRun != nil {
				gres[j] = append(gres[j], r.goRun())
			}
		}
	}
	fmt.Printf("\nxtc vs Go runtime, medians of %d runs (%s)\n\n", *reps, time.Now().UTC().Format(time.RFC3339))
	fmt.Println("| operation | xtc | Go | ratio (Go/xtc) |")
	fmt.Println("|---|---|---|---|")
	used := map[string]bool{}
	for i, r := range rows {
		xv, xu, ok := pick(cres, units, r.names, used)
		gv := median(gres[i])
		if !ok && r.goRun == nil {
			continue
		}
		xs, gs, ratio := "n/a", "-", "-"
		if ok {
			xs = fmtv(xv, xu)
		}
		if r.goRun != nil {
			gs = fmtv(gv, r.unit)
		}
		if ok && r.goRun != nil && xv > 0 && gv > 0 {
			ratio = fmt.Sprintf("%.2fx", gv/xv)
		}
		fmt.Printf("| %s | %s | %s | %s |\n", r.op, xs, gs, ratio)
	}
	var rest []string
	for n := range cres {
		if !used[n] {
			rest = append(rest, n)
		}
	}
	sort.Strings(rest)
	if !*all && len(rest) > 0 {
		fmt.Printf("\n%d more xtc-only figures: go run ./tools/benchtable -all\n", len(rest))
		rest = nil
	}
	for _, n := range rest {
		fmt.Printf("| %s (xtc only) | %s | - | - |\n", n, fmtv(median(cres[n]), units[n]))
	}
	fmt.Println()
}

func pick(cres map[string][]float64, units map[string]string, names []string, used map[string]bool) (float64, string, bool) {
	for _, n := range names {
		if v, ok := cres[n]; ok && len(v) > 0 {
			used[n] = true
			return median(v), units[n], true
		}
	}
	return 0, "", false
}

// cBenches lists the bench executables of builddir.
func cBenches(builddir, only string) []string {
	exes, _ := filepath.Glob(filepath.Join(builddir, "bench", "bench_*"))
	want := map[string]bool{}
	for _, n := range strings.Split(only, ",") {
		if n != "" {
			want[n] = true
		}
	}
	var runnable []string
	for _, e := range exes {
		if len(want) > 0 && !want[filepath.Base(e)] {
			continue
		}
		if st, err := os.Stat(e); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
			runnable = append(runnable, e)
		}
	}
	return runnable
}

// runC runs each bench once and appends its `name value unit` results.
func runC(exes []string, res map[string][]float64, units map[string]string) {
	for _, e := range exes {
		var out bytes.Buffer
		cmd := exec.Command(e)
		cmd.Stdout = &out
		cmd.Stderr = os.Stderr
		if err := cmd.Run(); err != nil {
			fmt.Fprintf(os.Stderr, "benchtable: %s: %v\n", e, err)
			continue
		}
		sc := bufio.NewScanner(&out)
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			if len(f) != 3 {
				continue
			}
			v, err := strconv.ParseFloat(f[1], 64)
			if err != nil {
				continue
			}
			res[f[0]] = append(res[f[0]], v)
			units[f[0]] = f[2]
		}
	}
}

// parkedGo measures in a fresh child process (a clean heap and RSS).
func parkedGo() float64 {
	if os.Getenv("BENCHTABLE_PARKED_CHILD") == "1" {
		return gobench.ParkedBytes(100_000)
	}
	self, err := os.Executable()
	if err != nil {
		return gobench.ParkedBytes(100_000)
	}
	cmd := exec.Command(self, "-parked-child")
	cmd.Env = append(os.Environ(), "BENCHTABLE_PARKED_CHILD=1")
	out, err := cmd.Output()
	if err != nil {
		return -1
	}
	v, err := strconv.ParseFloat(strings.TrimSpace(string(out)), 64)
	if err != nil {
		return -1
	}
	return v
}

func init() {
	if os.Getenv("BENCHTABLE_PARKED_CHILD") == "1" {
		fmt.Printf("%.1f\n", gobench.ParkedBytes(100_000))
		os.Exit(0)
	}
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func fmtv(v float64, unit string) string {
	switch {
	case unit == "B" && v >= 1024:
		return fmt.Sprintf("%.2f KiB", v/1024)
	case v >= 100:
		return fmt.Sprintf("%.0f %s", v, unit)
	default:
		return fmt.Sprintf("%.1f %s", v, unit)
	}
}
