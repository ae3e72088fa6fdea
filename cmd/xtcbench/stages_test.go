package main

import (
	"fmt"
	"os"
	"runtime/trace"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestFromGoStages prints where the short requests' sojourn goes in the
// from-Go tail rows (stages.go), interleaved with plain cgo from the same
// goroutines. A diagnostic, run on demand:
//
//	cd cmd/xtcbench && XTCBENCH_STAGES=1 go test -run TestFromGoStages -v .
//
// XTCBENCH_STAGES_LOAD (default 0.1), _REPS (3), _MODES (xtcgo,gocgo),
// _PROCS (GOMAXPROCS, default 2) and _TRACE=file (a runtime/trace of each
// mode's first repetition, to file.<mode>) change it. A mode is xtcgo or
// gocgo, then optionally -yield (the generator goroutine yields its P
// after each request) or an ingress of --go-ingress: -netpoll (a spinning
// generator thread outside Go, heard through the netpoller) or
// -netpoll-sleep (the same thread sleeping until each arrival). With the
// netpoll ingresses the CPU per request includes the generator thread's.
// No assertion on the figures.
func TestFromGoStages(t *testing.T) {
	if os.Getenv("XTCBENCH_STAGES") == "" {
		t.Skip("diagnostic: set XTCBENCH_STAGES=1")
	}
	load, reps := 0.1, 3
	if v := os.Getenv("XTCBENCH_STAGES_LOAD"); v != "" {
		f, err := strconv.ParseFloat(v, 64)
		require.NoError(t, err)
		load = f
	}
	if v := os.Getenv("XTCBENCH_STAGES_REPS"); v != "" {
		n, err := strconv.Atoi(v)
		require.NoError(t, err)
		reps = n
	}
	modes := []string{"xtcgo", "gocgo"}
	if v := os.Getenv("XTCBENCH_STAGES_MODES"); v != "" {
		modes = strings.Split(v, ",")
	}
	cal := calibrate()
	s, err := NewSchedule("A1", load, 1, 200*time.Millisecond, 1)
	require.NoError(t, err)
	iters := s.Iterations(cal.CItersPerNs)
	for rep := 0; rep < reps; rep++ {
		for _, m := range modes {
			tr := os.Getenv("XTCBENCH_STAGES_TRACE")
			if tr != "" && rep == 0 {
				f, err := os.Create(tr + "." + m)
				require.NoError(t, err)
				require.NoError(t, trace.Start(f))
			}
			r, err := stagesReplay(s, iters, m)
			if tr != "" && rep == 0 {
				trace.Stop()
			}
			require.NoError(t, err)
			fmt.Printf("A1 %.0f%% %s, repetition %d (%s)\n%s", load*100, m, rep+1, loadavg(), r.report(s, 20*time.Millisecond))
		}
	}
}

func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "load ?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "load ?"
	}
	return "load average " + strings.Join(f[:3], " ")
}
