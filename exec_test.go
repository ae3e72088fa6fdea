//go:build cgo

package xtc

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/xtc-go/xtc/internal/ctest"
)

func TestExecErrors(t *testing.T) {
	_, err := ExecInit(100000)
	assert.ErrorIs(t, err, ErrRange)

	var nilE *Exec
	assert.Equal(t, 0, nilE.NLoops())
	assert.Nil(t, nilE.Loop(0))
	assert.ErrorIs(t, nilE.Stop(), ErrInval)
	assert.ErrorIs(t, nilE.Fini(), ErrInval)
	assert.ErrorIs(t, nilE.Run(), ErrInval)
	_, err = nilE.LoopStats(0)
	assert.ErrorIs(t, err, ErrInval)
	assert.ErrorIs(t, nilE.Submit(0, func() {}), ErrInval)
	assert.False(t, nilE.ServiceMode())

	e, err := ExecInit(2)
	require.NoError(t, err)
	assert.Equal(t, 2, e.NLoops())
	assert.NotNil(t, e.Loop(1))
	assert.Nil(t, e.Loop(2))
	assert.Nil(t, e.Loop(-1))
	_, err = e.LoopStats(2)
	assert.ErrorIs(t, err, ErrInval)
	assert.ErrorIs(t, e.Submit(0, nil), ErrInval)
	assert.ErrorIs(t, e.Submit(5, func() {}), ErrInval)
	assert.NoError(t, e.SetPreempt(0))

	// executor loops belong to their carriers: owner-only calls refuse
	assert.ErrorIs(t, e.Loop(0).Run(), ErrInval)
	assert.ErrorIs(t, e.Loop(0).Fini(), ErrInval)

	// knobs
	e.SetServiceMode(true)
	assert.True(t, e.ServiceMode())
	e.SetServiceMode(false)
	assert.False(t, e.ServiceMode())
	e.SetEagerRebalance(true)
	assert.True(t, e.EagerRebalance())
	e.SetStealBackoff(true)
	assert.True(t, e.StealBackoff())

	// an empty run returns at once
	require.NoError(t, e.Run())
	require.NoError(t, e.Fini())
	assert.ErrorIs(t, e.Fini(), ErrInval)
	assert.ErrorIs(t, e.Stop(), ErrInval)
	assert.Equal(t, 0, e.NLoops())
	assert.Equal(t, -1, ExecLoopID())
	assert.Equal(t, -1, ShardID())
	assert.Equal(t, 0, ShardCount())
}

func TestExecSubmitAndStats(t *testing.T) {
	e, err := ExecInit(2)
	require.NoError(t, err)
	defer e.Fini()
	var ran atomic.Int64
	var badID atomic.Int64
	const n = 1000
	for i := 0; i < n; i++ {
		idx := i % 2
		require.NoError(t, e.Submit(idx, func() {
			if ExecLoopID() != idx || ShardCount() != 2 {
				badID.Add(1)
			}
			ran.Add(1)
		}))
	}
	require.NoError(t, e.Run())
	assert.EqualValues(t, n, ran.Load())
	assert.Zero(t, badID.Load())
	s0, err := e.LoopStats(0)
	require.NoError(t, err)
	_ = s0
}

// Goroutines submit while a service-mode run goes on; Wait honours ctx.
func TestExecStartWaitService(t *testing.T) {
	e, err := ExecInit(2)
	require.NoError(t, err)
	defer e.Fini()
	e.SetServiceMode(true)
	run, err := e.Start()
	require.NoError(t, err)
	_, err = e.Start()
	assert.ErrorIs(t, err, ErrInval)
	assert.ErrorIs(t, e.Fini(), ErrInval) // running

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	assert.ErrorIs(t, run.Wait(ctx), context.DeadlineExceeded)

	var wg sync.WaitGroup
	var ran atomic.Int64
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 2000; i++ {
				if err := e.SubmitWithin(-1, func() { ran.Add(1) }, -1); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	require.Eventually(t, func() bool { return ran.Load() == 8000 }, 10*time.Second, time.Millisecond)
	require.NoError(t, e.Stop())
	require.NoError(t, run.Wait(context.Background()))
	<-run.Done()
}

// gappedSubmits runs a service-mode run of e (one loop) that receives ten
// submissions with a gap before each and returns its loop stats. With
// parks, each gap lasts until the carrier parked once more (the event,
// not a time: a carrier the machine did not run within some milliseconds
// would not have parked yet); otherwise it is 2 ms.
func gappedSubmits(t *testing.T, e *Exec, parks bool) LoopStats {
	t.Helper()
	e.SetServiceMode(true)
	run, err := e.Start()
	require.NoError(t, err)
	var parked uint64
	for i := 0; i < 10; i++ {
		if parks {
			require.Eventually(t, func() bool {
				st, err := e.LoopStats(0)
				return err == nil && st.Parks > parked
			}, eventBound, 100*time.Microsecond, "the carrier never parked")
			st, _ := e.LoopStats(0)
			parked = st.Parks
		} else {
			time.Sleep(2 * time.Millisecond)
		}
		done := make(chan struct{})
		require.NoError(t, e.SubmitWithin(0, func() { close(done) }, -1))
		<-done
	}
	require.NoError(t, e.Stop())
	require.NoError(t, run.Wait(context.Background()))
	st, err := e.LoopStats(0)
	require.NoError(t, err)
	return st
}

// An idle carrier parks; a submission rings it and the stats count the
// wake-up and its latency (never a timing assertion: orderings only).
func TestExecLoopStatsWakes(t *testing.T) {
	e, err := ExecInit(1)
	require.NoError(t, err)
	defer e.Fini()
	st := gappedSubmits(t, e, true)
	assert.GreaterOrEqual(t, st.Parks, uint64(10))
	assert.GreaterOrEqual(t, st.Wakes, uint64(1))
	assert.LessOrEqual(t, st.Wakes, st.Parks)
	assert.Positive(t, st.WakeMax)
	assert.GreaterOrEqual(t, st.WakeTotal, st.WakeMax)
	assert.LessOrEqual(t, st.SlowWakes, st.Wakes)
}

// SetSpin: an idle carrier polls instead of parking while work keeps
// coming within the spin; bad values are refused.
func TestExecSpin(t *testing.T) {
	e, err := ExecInit(1)
	require.NoError(t, err)
	defer e.Fini()
	assert.Zero(t, e.Spin())
	assert.ErrorIs(t, e.SetSpin(-1), ErrInval)
	require.NoError(t, e.SetSpin(time.Minute))
	assert.Equal(t, time.Minute, e.Spin())
	assert.Zero(t, gappedSubmits(t, e, false).Parks)
}

func TestExecTasksFromGoroutines(t *testing.T) {
	e, err := ExecInit(2)
	require.NoError(t, err)
	defer e.Fini()
	var ran atomic.Int64
	for i := 0; i < 100; i++ {
		_, err := TaskSpawn(e.Loop(i%2), func(*Task) TaskResult {
			ran.Add(1)
			return TaskDone
		})
		require.NoError(t, err)
	}
	require.NoError(t, e.Run())
	assert.EqualValues(t, 100, ran.Load())
}

func TestExecClassErrors(t *testing.T) {
	_, err := ExecClassCreate(nil, 10, 0)
	assert.ErrorIs(t, err, ErrInval)
	l, err := LoopInit()
	require.NoError(t, err)
	defer l.Fini()
	for _, bad := range []int{0, 1001, -1} {
		_, err = ExecClassCreate(l, bad, 0)
		assert.ErrorIs(t, err, ErrInval, "shares %d", bad)
	}
	_, err = ExecClassCreate(l, 10, -time.Nanosecond)
	assert.ErrorIs(t, err, ErrInval)
	for i := 0; i < 16; i++ {
		c, err := ExecClassCreate(l, 10+i, time.Duration(i)*time.Microsecond)
		require.NoError(t, err)
		assert.Equal(t, 10+i, c.Shares())
		assert.Equal(t, time.Duration(i)*time.Microsecond, c.Latency())
		assert.Zero(t, c.Runs())
		assert.Zero(t, c.VRuntime())
	}
	_, err = ExecClassCreate(l, 10, 0)
	assert.ErrorIs(t, err, ErrAgain)

	var nc *ExecClass
	assert.Zero(t, nc.Shares())
	assert.Zero(t, nc.Latency())
	assert.Zero(t, nc.Runs())
	assert.Zero(t, nc.VRuntime())
	assert.Zero(t, nc.CPU())
}

// A class lives (in C) until its loop is finalised: afterwards the getters
// answer zero instead of reading freed memory, and a spawn naming it (or a
// class of another loop) is refused before C sees the handle.
func TestExecClassAfterFini(t *testing.T) {
	l, err := LoopInit()
	require.NoError(t, err)
	other, err := LoopInit()
	require.NoError(t, err)
	defer other.Fini()
	c, err := ExecClassCreate(l, 42, time.Microsecond)
	require.NoError(t, err)
	assert.Equal(t, 42, c.Shares())
	_, err = ProcSpawn(other, ctest.Worker(), nil, &ProcOpts{SchedClass: c})
	assert.ErrorIs(t, err, ErrInval, "class of another loop")
	require.NoError(t, l.Fini())
	assert.Zero(t, c.Shares())
	assert.Zero(t, c.Latency())
	assert.Zero(t, c.Runs())
	assert.Zero(t, c.VRuntime())
	assert.Zero(t, c.CPU())
	_, err = ProcSpawn(other, ctest.Worker(), nil, &ProcOpts{SchedClass: c})
	assert.ErrorIs(t, err, ErrInval, "class of a finalised loop")

	// the same through an executor's Fini
	e, err := ExecInit(1)
	require.NoError(t, err)
	ec, err := ExecClassCreate(e.Loop(0), 7, 0)
	require.NoError(t, err)
	assert.Equal(t, 7, ec.Shares())
	require.NoError(t, e.Fini())
	assert.Zero(t, ec.Shares())
}

// classesAttempt runs three classes 600:300:100 of equal-cost C workers on
// an executor loop and returns the picks of each.
func classesAttempt(t *testing.T) []uint64 {
	e, err := ExecInit(1)
	require.NoError(t, err)
	defer e.Fini()
	l := e.Loop(0)
	var cls []*ExecClass
	for _, s := range []int{600, 300, 100} {
		c, err := ExecClassCreate(l, s, 0)
		require.NoError(t, err)
		cls = append(cls, c)
		for k := 0; k < 2; k++ {
			_, err := ProcSpawn(l, ctest.Worker(), nil, &ProcOpts{SchedClass: c})
			require.NoError(t, err)
		}
	}
	ctest.SetBudget(3000)
	require.NoError(t, e.Run())
	assert.Greater(t, cls[0].CPU(), time.Duration(0))
	return []uint64{cls[0].Runs(), cls[1].Runs(), cls[2].Runs()}
}

// More shares, more runs. Ordering only, 3x and 6x apart (exact ratios are
// for benchmarks and the simulator); the charge is measured wall time, so
// an oversubscribed machine adds random noise: up to three attempts.
func TestExecClassesOrder(t *testing.T) {
	ok := false
	for a := 0; a < 3 && !ok; a++ {
		r := classesAttempt(t)
		t.Logf("runs 600:300:100 -> %v", r)
		ok = r[0] > r[2] && r[1] > r[2]
	}
	assert.True(t, ok)

	// a class of another loop is refused
	e1, err := ExecInit(1)
	require.NoError(t, err)
	defer e1.Fini()
	e2, err := ExecInit(1)
	require.NoError(t, err)
	defer e2.Fini()
	other, err := ExecClassCreate(e2.Loop(0), 10, 0)
	require.NoError(t, err)
	_, err = ProcSpawn(e1.Loop(0), ctest.Worker(), nil, &ProcOpts{SchedClass: other})
	assert.ErrorIs(t, err, ErrInval)
}

func TestExecStallFunc(t *testing.T) {
	e, err := ExecInit(1)
	require.NoError(t, err)
	defer e.Fini()
	l := e.Loop(0)
	var calls atomic.Int64
	var gotRan, gotBudget atomic.Int64
	var gotLoop atomic.Pointer[Loop]
	require.NoError(t, l.SetStallFunc(func(sl *Loop, r StallReport) {
		if r.InFlight {
			return // the end-of-run report only
		}
		gotLoop.Store(sl)
		gotRan.Store(int64(r.Ran))
		gotBudget.Store(int64(r.Budget))
		calls.Add(1)
	}))
	e.SetStallBudget(2 * time.Millisecond)
	_, err = TaskSpawn(l, func(*Task) TaskResult {
		end := time.Now().Add(5 * time.Millisecond)
		for time.Now().Before(end) {
		}
		return TaskDone
	})
	require.NoError(t, err)
	require.NoError(t, e.Run())
	assert.EqualValues(t, 1, calls.Load())
	assert.EqualValues(t, 1, l.StallCount())
	assert.Same(t, l, gotLoop.Load())
	assert.GreaterOrEqual(t, gotRan.Load(), int64(5*time.Millisecond))
	assert.EqualValues(t, 2*time.Millisecond, gotBudget.Load())

	// standalone loop: budget and count through the Loop methods
	sl, err := LoopInit()
	require.NoError(t, err)
	defer sl.Fini()
	require.NoError(t, sl.SetStallBudget(time.Millisecond))
	require.NoError(t, sl.SetStallFunc(func(_ *Loop, r StallReport) {
		if !r.InFlight {
			calls.Add(1)
		}
	}))
	_, err = TaskSpawn(sl, func(*Task) TaskResult {
		time.Sleep(3 * time.Millisecond)
		return TaskDone
	})
	require.NoError(t, err)
	require.NoError(t, sl.Run())
	assert.EqualValues(t, 1, sl.StallCount())
	assert.EqualValues(t, 2, calls.Load())

	var nl *Loop
	assert.True(t, errors.Is(nl.SetStallBudget(time.Second), ErrInval))
	assert.Zero(t, nl.StallCount())
}

func TestExecFanoutXtcHelper(t *testing.T) {
	d := ctest.ExecFanout(20000)
	assert.Greater(t, d, time.Duration(0))
}

// A panicking Submit function stops the run; Run re-panics with its value.
func TestExecSubmitPanic(t *testing.T) {
	e, err := ExecInit(1)
	require.NoError(t, err)
	defer e.Fini()
	e.SetServiceMode(true) // only the panic can end this run
	require.NoError(t, e.Submit(0, func() { panic("boom") }))
	assert.PanicsWithValue(t, "boom", func() { _ = e.Run() })
	// the executor is usable again afterwards
	e.SetServiceMode(false)
	var ran atomic.Bool
	require.NoError(t, e.Submit(0, func() { ran.Store(true) }))
	require.NoError(t, e.Run())
	assert.True(t, ran.Load())
}

func ExampleExecClassCreate() {
	e, _ := ExecInit(1)
	defer e.Fini()
	flush, _ := ExecClassCreate(e.Loop(0), 600, 0)
	query, _ := ExecClassCreate(e.Loop(0), 300, 500*time.Microsecond)
	// Procs join a class at spawn:
	//   xtc.ProcSpawn(e.Loop(0), unsafe.Pointer(C.flush), nil,
	//                 &xtc.ProcOpts{SchedClass: flush})
	fmt.Println(flush.Shares(), query.Shares(), query.Latency())
	// Output: 600 300 500µs
}

func ExampleExec_Submit() {
	e, _ := ExecInit(2)
	defer e.Fini()
	var n atomic.Int64
	for i := 0; i < 10; i++ {
		_ = e.Submit(i%2, func() { n.Add(1) }) // runs on a carrier
	}
	_ = e.Run() // returns at quiescence
	fmt.Println(n.Load())
	// Output: 10
}

// A latency-critical service keeps its idle carriers polling instead of
// parking: requests that come within the spin find the carrier awake (no
// wake-up to pay), and LoopStats shows it never parked.
func ExampleExec_SetSpin() {
	e, _ := NewExec(1) // service mode
	defer e.Fini()
	_ = e.SetSpin(time.Second) // one CPU while idle, for up to a second
	run, _ := e.Start()
	for i := 0; i < 5; i++ {
		time.Sleep(time.Millisecond) // an idle gap between requests
		done := make(chan struct{})
		_ = e.Submit(0, func() { close(done) })
		<-done
	}
	_ = e.Stop()
	_ = run.Wait(context.Background())
	st, _ := e.LoopStats(0)
	fmt.Println("parks:", st.Parks)
	// Output: parks: 0
}

func ExampleExec_Start() {
	e, _ := NewExec(1)  // serves until Close or Shutdown
	run, _ := e.Start() // no goroutine blocks in cgo while it runs
	done := make(chan struct{})
	_ = e.Submit(0, func() { close(done) })
	<-done
	_ = e.Close() // stops the carriers and waits for them
	<-run.Done()
	fmt.Println(run.Wait(context.Background()))
	// Output: <nil>
}
