//go:build cgo

package xtc

import (
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/xtc-go/xtc/internal/ctest"
)

// Every kind of Go callback the runtime calls goes through callGo: a
// panic in it is recovered on the carrier, stops the run and resurfaces
// from Run / Wait in the driving goroutine; the process survives and the
// loop or executor stays usable.
func TestCallbackPanicEachKind(t *testing.T) {
	t.Run("loop task", func(t *testing.T) {
		l, err := LoopInit()
		require.NoError(t, err)
		defer l.Fini()
		_, err = TaskSpawn(l, func(*Task) TaskResult { panic("task") })
		require.NoError(t, err)
		assert.PanicsWithValue(t, "task", func() { _ = l.Run() })
		require.NoError(t, l.Run())
	})
	t.Run("loop timer", func(t *testing.T) {
		l, err := LoopInit()
		require.NoError(t, err)
		defer l.Fini()
		_, err = TimerSet(l, time.Microsecond, func() { panic("timer") })
		require.NoError(t, err)
		assert.PanicsWithValue(t, "timer", func() { _ = l.Run() })
	})
	t.Run("exec task", func(t *testing.T) {
		e, err := ExecInit(1)
		require.NoError(t, err)
		defer e.Fini()
		e.SetServiceMode(true)
		_, err = TaskSpawn(e.Loop(0), func(*Task) TaskResult { panic("etask") })
		require.NoError(t, err)
		assert.PanicsWithValue(t, "etask", func() { _ = e.Run() })
	})
	t.Run("submit", func(t *testing.T) {
		e, err := ExecInit(1)
		require.NoError(t, err)
		defer e.Fini()
		e.SetServiceMode(true)
		require.NoError(t, e.Submit(0, func() { panic("submit") }))
		assert.PanicsWithValue(t, "submit", func() { _ = e.Run() })
	})
	for _, inflight := range []bool{false, true} {
		name := "stall end"
		if inflight {
			name = "stall in flight"
		}
		t.Run(name, func(t *testing.T) {
			e, err := ExecInit(1)
			require.NoError(t, err)
			defer e.Fini()
			l := e.Loop(0)
			e.SetServiceMode(true) // only the panic ends the run
			// the hog runs until the in-flight report came (an event:
			// 200 ms of spinning is not one on a machine that may not run
			// the watchdog meanwhile), then ends its run
			c := ctest.NewCell(int64(200 * time.Millisecond))
			defer c.Free()
			require.NoError(t, l.SetStallFunc(func(_ *Loop, r StallReport) {
				if r.InFlight {
					c.Release()
				}
				if r.InFlight == inflight {
					panic("stall")
				}
			}))
			e.SetStallBudget(2 * time.Millisecond)
			_, err = ProcSpawn(l, ctest.HoldProc(), c.Ptr(), &ProcOpts{Name: "hog"})
			require.NoError(t, err)
			assert.PanicsWithValue(t, "stall", func() { _ = e.Run() })
		})
	}
}

// The watchdog names the culprit while it still runs: pid, name, run time
// so far and budget, before the run ends.
func TestStallReportInFlight(t *testing.T) {
	e, err := ExecInit(1)
	require.NoError(t, err)
	defer e.Fini()
	l := e.Loop(0)
	got := make(chan StallReport, 4)
	require.NoError(t, l.SetStallFunc(func(_ *Loop, r StallReport) { got <- r }))
	e.SetStallBudget(5 * time.Millisecond)
	// it spins 300 ms and until the first report came: "before the run
	// ends" is then an order of events, not a race with the watchdog
	c := ctest.NewCell(int64(300 * time.Millisecond))
	defer c.Free()
	pid, err := ProcSpawn(l, ctest.HoldProc(), c.Ptr(), &ProcOpts{Name: "hung-kernel"})
	require.NoError(t, err)
	run, err := e.Start()
	require.NoError(t, err)
	first := <-got
	c.Release()
	select {
	case <-run.Done():
		t.Fatal("first report came after the run ended")
	default:
	}
	assert.True(t, first.InFlight)
	assert.Equal(t, pid, first.Pid)
	assert.Equal(t, "hung-kernel", first.Name)
	assert.GreaterOrEqual(t, first.Ran, 5*time.Millisecond)
	assert.Equal(t, 5*time.Millisecond, first.Budget)
	require.NoError(t, run.Wait(t.Context()))
	last := <-got
	assert.False(t, last.InFlight)
	assert.Equal(t, first.Run, last.Run)
	assert.Equal(t, pid, last.Pid)
	assert.GreaterOrEqual(t, last.Ran, 300*time.Millisecond)
	assert.EqualValues(t, 1, l.StallCount())
}

func loopHandles(l *Loop) int {
	l.hmu.Lock()
	defer l.hmu.Unlock()
	return len(l.handles)
}

// Replacing the stall callback reuses one handle.
func TestSetStallFuncNoHandleLeak(t *testing.T) {
	l, err := LoopInit()
	require.NoError(t, err)
	defer l.Fini()
	require.NoError(t, l.SetStallFunc(func(*Loop, StallReport) {}))
	base := loopHandles(l)
	for i := 0; i < 10000; i++ {
		require.NoError(t, l.SetStallFunc(func(*Loop, StallReport) {}))
		if i%3 == 0 {
			require.NoError(t, l.SetStallFunc(nil))
		}
	}
	assert.Equal(t, base, loopHandles(l))
	assert.Equal(t, 1, base)
}

func rssKiB(t *testing.T) int64 {
	b, err := os.ReadFile("/proc/self/status")
	require.NoError(t, err)
	for _, ln := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(ln, "VmRSS:") {
			var n int64
			for _, f := range strings.Fields(ln)[1:2] {
				for _, ch := range f {
					n = n*10 + int64(ch-'0')
				}
			}
			return n
		}
	}
	t.Fatal("no VmRSS")
	return 0
}

// A server spawning one named proc per request runs flat: 10^6 named
// spawns, RSS and handle counts after the first tenth equal the end's
// (within allocator noise).
func TestNamedSpawnsFlat(t *testing.T) {
	if underSanitizer {
		t.Skip("RSS under a sanitizer's allocator says nothing about xtc")
	}
	n, batch := 1000000, 10000
	if testing.Short() {
		n = 100000
	}
	l, err := LoopInit()
	require.NoError(t, err)
	defer l.Fini()
	var base int64
	var baseH int
	var baseG int
	for i := 0; i < n; i += batch {
		for j := 0; j < batch; j++ {
			_, err := ProcSpawn(l, ctest.Noop, nil, &ProcOpts{Name: "request-" + strconv.Itoa(i+j)})
			require.NoError(t, err)
		}
		require.NoError(t, l.Run())
		if i == n/10 {
			runtime.GC()
			base, baseH, baseG = rssKiB(t), loopHandles(l), runtime.NumGoroutine()
		}
	}
	runtime.GC()
	end := rssKiB(t)
	t.Logf("RSS after %d named spawns: %d KiB (after %d: %d KiB)", n, end, n/10, base)
	assert.Less(t, end-base, int64(8*1024), "RSS grew by more than 8 MiB")
	assert.Equal(t, baseH, loopHandles(l))
	assert.LessOrEqual(t, runtime.NumGoroutine(), baseG)
}
