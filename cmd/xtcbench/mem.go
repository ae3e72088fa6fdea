package main

// The memory section: n xtc procs parked in a receive against n goroutines
// parked on a channel receive; resident bytes each, the time to spawn and
// park them and the time to wake them and let them exit. Each side runs in
// a child process of its own (this binary re-executed with --mem-child),
// so what one side leaves resident does not count against the other, and
// the sides alternate (xtc, Go, xtc, Go, ...) so that a change of the
// machine's load hits both.

/*
#include <stdlib.h>
#include "xb.h"
*/
import "C"

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"time"
	"unsafe"
)

// MemRow is one count of parked units, xtc against Go (medians).
type MemRow struct {
	N           int64     `json:"n"`
	Reps        int       `json:"reps"`
	XtcRSS      float64   `json:"xtc_rss_bytes_each"`
	GoRSS       float64   `json:"go_rss_bytes_each"`
	XtcSpawnNs  float64   `json:"xtc_spawn_park_ns_each"`
	GoSpawnNs   float64   `json:"go_spawn_park_ns_each"`
	XtcWakeNs   float64   `json:"xtc_wake_exit_ns_each"`
	GoWakeNs    float64   `json:"go_wake_exit_ns_each"`
	XtcStack    int64     `json:"xtc_stack_bytes"`
	XtcRSSAll   []float64 `json:"xtc_rss_all"`
	GoRSSAll    []float64 `json:"go_rss_all"`
	XtcTotalAll []float64 `json:"xtc_total_ns_each_all"`
	GoTotalAll  []float64 `json:"go_total_ns_each_all"`
	Status      Status    `json:"status"`
	Why         string    `json:"why,omitempty"`
}

// memChildResult is what a --mem-child process prints (one JSON line).
type memChildResult struct {
	Parked  int64  `json:"parked"`
	RSS     int64  `json:"rss_bytes"`
	SpawnNs int64  `json:"spawn_ns"`
	WakeNs  int64  `json:"wake_ns"`
	Stack   int64  `json:"stack_bytes"`
	Err     string `json:"err,omitempty"`
}

// memPoint is one row: n parked units, xtc procs with stack bytes each
// (0 = the default, 64 KiB).
type memPoint struct {
	n     int64
	stack int64
}

// memPoints is the section's shape: 10^5 and 10^6 with the default stacks,
// and 10^6 on 1 KiB small stacks (xtc_proc_opts_t.stack_size), in both
// modes; --full repeats each three times.
func memPoints() []memPoint {
	return []memPoint{{100_000, 0}, {1_000_000, 0}, {1_000_000, 1024}}
}

func memReps(cfg *Config) int {
	if cfg.Mode == "full" {
		return 3
	}
	return 1
}

func memSteps(cfg *Config) int { return len(memPoints()) * memReps(cfg) }

// runMemChild is the child side: `xtcbench --mem-child xtc|go N [STACK]`.
func runMemChild(args []string, stdout io.Writer) int {
	if len(args) != 2 && len(args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: xtcbench --mem-child xtc|go N [STACK]")
		return 2
	}
	var stack int64
	if len(args) == 3 {
		stack, _ = strconv.ParseInt(args[2], 10, 64)
	}
	n, err := strconv.ParseInt(args[1], 10, 64)
	if err != nil || n < 1 {
		fmt.Fprintln(os.Stderr, "xtcbench --mem-child: bad count", args[1])
		return 2
	}
	var r memChildResult
	switch args[0] {
	case "xtc":
		r = xtcParked(n, stack)
	case "go":
		r = goParked(n)
	default:
		fmt.Fprintln(os.Stderr, "xtcbench --mem-child: side must be xtc or go")
		return 2
	}
	b, _ := json.Marshal(r)
	fmt.Fprintln(stdout, string(b))
	return 0
}

func xtcParked(n, stack int64) memChildResult {
	var m C.xb_mem_t
	why := (*C.char)(C.calloc(C.XB_WHY, 1))
	defer C.free(unsafe.Pointer(why))
	st := C.xb_mem_park(C.int64_t(n), C.int64_t(stack), &m, why)
	r := memChildResult{Parked: int64(m.parked), RSS: int64(m.rss_bytes),
		SpawnNs: int64(m.spawn_ns), WakeNs: int64(m.wake_ns), Stack: int64(m.stack_bytes)}
	if st != C.XB_OK {
		r.Err = C.GoString(why)
	}
	return r
}

func rssBytes() int64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return -1
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return -1
	}
	pages, _ := strconv.ParseInt(f[1], 10, 64)
	return pages * int64(os.Getpagesize())
}

// goParked: n goroutines each blocked receiving from one unbuffered
// channel; woken by n sends on it (one goroutine each).
func goParked(n int64) memChildResult {
	runtime.GC()
	debug.FreeOSMemory()
	ch := make(chan byte)
	var started, done sync.WaitGroup
	started.Add(int(n))
	done.Add(int(n))
	rss0 := rssBytes()
	t0 := time.Now()
	for i := int64(0); i < n; i++ {
		go func() {
			started.Done()
			<-ch
			done.Done()
		}()
	}
	started.Wait()
	runtime.Gosched() // the last ones reach the receive
	t1 := time.Now()
	rss1 := rssBytes()
	t2 := time.Now()
	for i := int64(0); i < n; i++ {
		ch <- 1
	}
	done.Wait()
	t3 := time.Now()
	return memChildResult{Parked: n, RSS: rss1 - rss0, SpawnNs: t1.Sub(t0).Nanoseconds(),
		WakeNs: t3.Sub(t2).Nanoseconds()}
}

func memChild(side string, n, stack int64) (memChildResult, error) {
	exe, err := os.Executable()
	if err != nil {
		return memChildResult{}, err
	}
	var out, errb bytes.Buffer
	cmd := exec.Command(exe, "--mem-child", side, strconv.FormatInt(n, 10),
		strconv.FormatInt(stack, 10))
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return memChildResult{}, fmt.Errorf("%s child: %v: %s", side, err, strings.TrimSpace(errb.String()))
	}
	var r memChildResult
	if err := json.Unmarshal(bytes.TrimSpace(out.Bytes()), &r); err != nil {
		return r, fmt.Errorf("%s child: %v", side, err)
	}
	if r.Err != "" {
		return r, fmt.Errorf("%s", r.Err)
	}
	return r, nil
}

func runMemory(cfg *Config, pb *Progress) []MemRow {
	var rows []MemRow
	for _, pt := range memPoints() {
		n := pt.n
		row := MemRow{N: n, Reps: memReps(cfg), Status: StatusOK}
		var xs, gs, xsp, gsp, xw, gw []float64
		for r := 0; r < row.Reps; r++ {
			pb.Note(fmt.Sprintf("memory: %d parked procs / goroutines", n))
			if x, err := memChild("xtc", n, pt.stack); err != nil {
				row.Status, row.Why = StatusFail, err.Error()
			} else {
				f := float64(x.Parked)
				xs = append(xs, float64(x.RSS)/f)
				xsp = append(xsp, float64(x.SpawnNs)/f)
				xw = append(xw, float64(x.WakeNs)/f)
				row.XtcTotalAll = append(row.XtcTotalAll, float64(x.SpawnNs+x.WakeNs)/f)
				row.XtcStack = x.Stack
			}
			if g, err := memChild("go", n, 0); err == nil {
				f := float64(g.Parked)
				gs = append(gs, float64(g.RSS)/f)
				gsp = append(gsp, float64(g.SpawnNs)/f)
				gw = append(gw, float64(g.WakeNs)/f)
				row.GoTotalAll = append(row.GoTotalAll, float64(g.SpawnNs+g.WakeNs)/f)
			} else if row.Why == "" {
				row.Why = err.Error()
			}
			pb.Step(fmt.Sprintf("memory %d", n))
		}
		row.XtcRSSAll, row.GoRSSAll = xs, gs
		row.XtcRSS, row.GoRSS = median(append([]float64(nil), xs...)), median(append([]float64(nil), gs...))
		row.XtcSpawnNs, row.GoSpawnNs = median(xsp), median(gsp)
		row.XtcWakeNs, row.GoWakeNs = median(xw), median(gw)
		rows = append(rows, row)
	}
	return rows
}

func memVerdicts(rows []MemRow) []Verdict {
	var vs []Verdict
	for _, m := range rows {
		if m.Status != StatusOK {
			vs = append(vs, Verdict{Check: fmt.Sprintf("memory: %s parked procs", m.label()),
				Xtc: m.Status.String() + ": " + m.Why, Target: "all park", Result: resMissed})
			continue
		}
		vs = append(vs, Verdict{Check: fmt.Sprintf("memory: resident bytes per parked proc (%s)", m.label()),
			Xtc: fmt.Sprintf("%.0f B", m.XtcRSS), Go: fmt.Sprintf("%.0f B", m.GoRSS),
			Target: "≤ Go", Result: verdict(m.XtcRSS <= m.GoRSS)})
		xt, gt := m.XtcSpawnNs+m.XtcWakeNs, m.GoSpawnNs+m.GoWakeNs
		vs = append(vs, Verdict{Check: fmt.Sprintf("memory: spawn+park+wake+exit per proc (%s)", m.label()),
			Xtc: fmtDurF(xt), Go: fmtDurF(gt), Target: "≤ Go", Result: verdict(xt <= gt)})
	}
	return vs
}

func writeMemory(w io.Writer, r *Results) {
	fmt.Fprintf(w, "## Memory: parked procs against parked goroutines\n\n")
	fmt.Fprintf(w, "n xtc procs each blocked in `xtc_recv` (the default %d KiB stacks, or the "+
		"small stacks of xtc_proc_opts_t.stack_size where the row says so; spread over "+
		"loops of 62 500 procs, one thread each: a loop holds at most 65 535 procs) against "+
		"n goroutines each blocked receiving from one channel. Each side runs in a child "+
		"process of its own, alternating, median of %d. Resident bytes = growth of the "+
		"resident set (/proc/self/statm) from before the first spawn to all parked, per unit. "+
		"Spawn = first spawn until all parked; wake = first send until all exited "+
		"(one message or channel send each, from one thread).\n\n",
		int64(64), memRepsOf(r.Memory))
	var rows [][]string
	for _, m := range r.Memory {
		if m.Status != StatusOK {
			rows = append(rows, []string{m.label(), m.Status.String() + ": " + m.Why,
				fmt.Sprintf("%.0f B", m.GoRSS), "–", "–", "–", "–", "–"})
			continue
		}
		rows = append(rows, []string{m.label(),
			fmt.Sprintf("%.0f B", m.XtcRSS), fmt.Sprintf("%.0f B", m.GoRSS),
			ratioStr(m.GoRSS / m.XtcRSS),
			fmtDurF(m.XtcSpawnNs), fmtDurF(m.GoSpawnNs),
			fmtDurF(m.XtcWakeNs), fmtDurF(m.GoWakeNs)})
	}
	mdTable(w, []string{"n", "xtc bytes each", "Go bytes each", "Go/xtc",
		"xtc spawn+park", "Go spawn+park", "xtc wake+exit", "Go wake+exit"}, rows)
	fmt.Fprintf(w, "A parked proc keeps the top page of its stack (4 KiB: page granularity is "+
		"the floor of a stack that stays in place) plus its task, proc slot and mailbox "+
		"(~760 B); small stacks share pages, four 1 KiB stacks to a page, with no guard page "+
		"(a canary and a stack-pointer check at every switch instead). A goroutine starts on a "+
		"2 KiB stack that Go may move, because Go knows every pointer into it; a parked "+
		"proc uses 272 B of its stack, so a design that copied it out would need ~1 KiB "+
		"(xtc_async(3), \"Stacks\", says why xtc does not).\n\n")
}

// label: "10^6, 64 KiB stacks".
func (m MemRow) label() string {
	n := strconv.FormatInt(m.N, 10)
	switch m.N {
	case 100_000:
		n = "10^5"
	case 1_000_000:
		n = "10^6"
	case 10_000_000:
		n = "10^7"
	}
	if m.XtcStack >= 1024 {
		return fmt.Sprintf("%s, %d KiB stacks", n, m.XtcStack>>10)
	}
	return n
}

func memRepsOf(rows []MemRow) int {
	if len(rows) > 0 {
		return rows[0].Reps
	}
	return 1
}
