//go:build cgo

package xtc

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/xtc-go/xtc/internal/ctest"
)

// sumStep finishes each member after its request's count of rounds; the
// request is a *int rounds-left counter.
func countdownStep(items []BatchItem, res []BatchResult) error {
	for i := range items {
		p := items[i].Request.(*int)
		if *p--; *p <= 0 {
			res[i].State = BatchDone
		}
	}
	return nil
}

// Issue 27 item 6: a group on an executor loop, created before Start and
// used while it runs, from many goroutines (Do) and through Submit (an
// owner-only mutator handed to the carrier), then ended by Shutdown.
func TestExecBatchOnExecutor(t *testing.T) {
	e, err := NewExec(2)
	require.NoError(t, err)
	var completed atomic.Int64
	b, err := e.NewBatch(BatchOpts{Capacity: 64, MaxActive: 8, ResourceCapacity: 8,
		Name: "exec-batch", Step: countdownStep,
		Complete: func(_ uint64, _ any, outcome error) {
			if outcome == nil {
				completed.Add(1)
			}
		}})
	require.NoError(t, err)
	// the thin constructor on an executor loop works too (it failed with
	// ErrClosed before: no owner goroutine on executor loops)
	b2, err := BatchCreate(e.Loop(1), &BatchOpts{Capacity: 4, MaxActive: 2, ResourceCapacity: 2, Step: countdownStep})
	require.NoError(t, err)
	_, err = e.Start()
	require.NoError(t, err)

	var wg sync.WaitGroup
	for g := 0; g < 16; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 20; i++ {
				n := 3
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				v, err := b.Do(ctx, &n, WithCharge(1))
				cancel()
				if !assert.NoError(t, err) {
					return
				}
				assert.Equal(t, 0, *v.(*int))
			}
		}()
	}
	// owner-only mutators from a plain goroutine while the executor runs
	for i := 0; i < 10; i++ {
		n := 2
		_, err := b.Submit(&n, 1)
		require.NoError(t, err)
	}
	n := 1
	_, err = b2.Do(context.Background(), &n)
	require.NoError(t, err)
	_, err = b2.Submit(&n, 1) // no Complete: only Do
	assert.ErrorIs(t, err, ErrInval)
	wg.Wait()

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, e.Shutdown(ctx))
	assert.EqualValues(t, 10, completed.Load())
	// after the executor's Shutdown both groups are gone
	_, err = b.Do(context.Background(), &n)
	assert.ErrorIs(t, err, ErrClosed)
	_, err = b.Stats()
	assert.ErrorIs(t, err, ErrClosed)
	assert.ErrorIs(t, b.Close(), ErrClosed)
}

// Shutdown with requests in flight: they drain (complete with their
// result) while ctx lasts; what is left when it ends is cancelled, and
// every Do returns exactly once. release: the slow members finish during
// the drain (Shutdown returns nil), else ctx ends first.
func TestExecShutdownDrainsThenCancelsBatch(t *testing.T) {
	for _, release := range []bool{false, true} {
		testShutdownDrain(t, release)
	}
}

func testShutdownDrain(t *testing.T, releaseInDrain bool) {
	e, err := NewExec(1)
	require.NoError(t, err)
	var release atomic.Bool
	b, err := e.NewBatch(BatchOpts{Capacity: 32, MaxActive: 8, ResourceCapacity: 8,
		Step: func(items []BatchItem, res []BatchResult) error {
			for i := range items {
				p := items[i].Request.(*int)
				if *p == 0 || release.Load() { // 0: quick; else until released
					res[i].State = BatchDone
				}
			}
			return nil
		}})
	require.NoError(t, err)
	_, err = e.Start()
	require.NoError(t, err)

	results := make(chan error, 40)
	for i := 0; i < 8; i++ { // 4 quick, 4 that run until released
		v := i % 2
		go func() {
			_, err := b.Do(context.Background(), &v)
			results <- err
		}()
	}
	require.Eventually(t, func() bool {
		st, err := b.Stats()
		return err == nil && st.CompletedOK == 4 && st.Active == 4
	}, 30*time.Second, time.Millisecond)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	shut := make(chan error, 1)
	go func() { shut <- e.Shutdown(ctx) }()
	// new requests are refused at once, as ErrClosed (not ErrAgain)
	require.Eventually(t, func() bool {
		z := 0 // bounded: refused, or accepted and waiting
		pctx, pcancel := context.WithTimeout(context.Background(), 5*time.Millisecond)
		defer pcancel()
		_, err := b.Do(pctx, &z)
		return errors.Is(err, ErrClosed)
	}, 30*time.Second, time.Millisecond)
	if releaseInDrain {
		release.Store(true)
		require.NoError(t, <-shut)
	} else {
		cancel() // the drain is cut short: the slow members are cancelled
		require.ErrorIs(t, <-shut, context.Canceled)
	}
	ok, aborted := 0, 0
	for i := 0; i < 8; i++ {
		err := <-results
		switch {
		case err == nil:
			ok++
		case errors.Is(err, ErrAborted):
			aborted++
		default:
			t.Errorf("unexpected outcome %v", err)
		}
	}
	if releaseInDrain {
		assert.Equal(t, 8, ok)
	} else {
		assert.Equal(t, 4, ok)
		assert.Equal(t, 4, aborted)
	}
	select {
	case err := <-results:
		t.Fatalf("a Do returned twice: %v", err)
	default:
	}
}

// Batch.Shutdown on its own, and Close, on a stand-alone loop that is not
// running: the group drives its loop until the driver ends.
func TestBatchShutdownStandalone(t *testing.T) {
	l, err := LoopInit()
	require.NoError(t, err)
	defer l.Fini()
	var done atomic.Int64
	b, err := BatchCreate(l, &BatchOpts{Capacity: 8, MaxActive: 2, ResourceCapacity: 2,
		Step:     countdownStep,
		Complete: func(_ uint64, _ any, err error) { done.Add(1) }})
	require.NoError(t, err)
	for i := 0; i < 4; i++ {
		n := 3
		_, err := b.Submit(&n, 1)
		require.NoError(t, err)
	}
	require.NoError(t, b.Shutdown(context.Background()))
	assert.EqualValues(t, 4, done.Load())
	assert.ErrorIs(t, b.Shutdown(context.Background()), ErrClosed)
	_, err = b.Submit(new(int), 1)
	assert.ErrorIs(t, err, ErrClosed)
	assert.ErrorIs(t, BatchDestroy(b), ErrClosed)
}

func TestExecNewBatchErrors(t *testing.T) {
	e, err := NewExec(2)
	require.NoError(t, err)
	other, err := NewExec(1)
	require.NoError(t, err)
	defer other.Close()
	oc, err := other.NewClass(100, 0)
	require.NoError(t, err)
	step := countdownStep
	_, err = e.NewBatch(BatchOpts{Capacity: 1, MaxActive: 1, ResourceCapacity: 1})
	assert.ErrorIs(t, err, ErrInval) // no Step
	_, err = e.NewBatch(BatchOpts{Capacity: 1, MaxActive: 1, ResourceCapacity: 1, Step: step, Class: oc})
	assert.ErrorIs(t, err, ErrInval)
	_, err = e.NewBatch(BatchOpts{Capacity: 1, MaxActive: 1, ResourceCapacity: 1, Step: step, Class: oc.OnLoop(0)})
	assert.ErrorIs(t, err, ErrInval)
	c, err := e.NewClass(300, 0)
	require.NoError(t, err)
	b, err := e.NewBatch(BatchOpts{Capacity: 1, MaxActive: 1, ResourceCapacity: 1, Step: step, Class: c})
	require.NoError(t, err)
	_, err = e.Start()
	require.NoError(t, err)
	_, err = e.NewBatch(BatchOpts{Capacity: 1, MaxActive: 1, ResourceCapacity: 1, Step: step})
	assert.ErrorIs(t, err, ErrAgain) // setup-only
	n := 2
	_, err = b.Do(context.Background(), &n, WithCharge(2))
	assert.ErrorIs(t, err, ErrRange) // above the resource capacity
	_, err = b.Do(context.Background(), &n)
	require.NoError(t, err)
	require.NoError(t, e.Close())
	_, err = e.NewBatch(BatchOpts{Capacity: 1, MaxActive: 1, ResourceCapacity: 1, Step: step})
	assert.ErrorIs(t, err, ErrClosed)
	_, err = b.Do(context.Background(), &n)
	assert.ErrorIs(t, err, ErrClosed)
}

// An executor that never ran: Shutdown runs it to end its groups, and a
// request accepted before the start completes.
func TestExecShutdownNeverStartedBatch(t *testing.T) {
	e, err := NewExec(1)
	require.NoError(t, err)
	b, err := e.NewBatch(BatchOpts{Capacity: 4, MaxActive: 1, ResourceCapacity: 1, Step: countdownStep})
	require.NoError(t, err)
	res := make(chan error, 1)
	go func() {
		n := 2
		_, err := b.Do(context.Background(), &n)
		res <- err
	}()
	require.Eventually(t, func() bool { // handed in (accepted at the first run)
		return b.mt.live.Load() == 1
	}, 30*time.Second, time.Millisecond)
	require.NoError(t, e.Shutdown(context.Background()))
	require.NoError(t, <-res)
}

// WithPreempt: the involuntary path is on while the executor runs,
// reference-counted across executors, and back to its former state once
// the last one closed; Stats shows it.
func TestExecWithPreemptRefcount(t *testing.T) {
	if !PreemptInvoluntarySupported() {
		_, err := NewExec(1, WithPreempt(time.Millisecond))
		require.ErrorIs(t, err, ErrNosys)
		return
	}
	require.False(t, involActive(), "a test before left the involuntary path on")
	_, err := NewExec(1, WithPreempt(0))
	assert.ErrorIs(t, err, ErrInval)
	_, err = NewExec(1, WithStallWatch(-1, nil))
	assert.ErrorIs(t, err, ErrInval)
	_, err = NewExec(1, WithAdaptivePreempt(nil))
	assert.ErrorIs(t, err, ErrInval)

	a, err := NewExec(1, WithPreempt(200*time.Microsecond))
	require.NoError(t, err)
	b, err := NewExec(1, WithPreempt(time.Millisecond))
	require.NoError(t, err)
	st, err := a.Stats()
	require.NoError(t, err)
	assert.Equal(t, PreemptConfig{Slice: 200 * time.Microsecond, Involuntary: true}, st.Preempt)
	_, err = a.Start()
	require.NoError(t, err)
	_, err = b.Start()
	require.NoError(t, err)
	st, _ = a.Stats()
	assert.True(t, st.Preempt.Active)
	assert.True(t, st.Running)
	require.NoError(t, a.Shutdown(context.Background()))
	assert.True(t, involActive(), "b still runs: a's Shutdown must not turn preemption off")
	require.NoError(t, b.Close())
	assert.False(t, involActive())

	// the explicit process-wide override survives executors
	involSetUser(true)
	c, err := NewExec(1, WithPreempt(time.Millisecond))
	require.NoError(t, err)
	_, err = c.Start()
	require.NoError(t, err)
	require.NoError(t, c.Close())
	assert.True(t, involActive())
	involSetUser(false)
	assert.False(t, involActive())
	_, err = c.Stats()
	assert.ErrorIs(t, err, ErrClosed)
}

func TestExecOptionsApplied(t *testing.T) {
	var stalls atomic.Int64
	e, err := NewExec(2, WithClockCheckedPreempt(time.Millisecond), WithSpin(50*time.Microsecond),
		WithServiceMode(false), WithStallWatch(time.Hour, func(*Loop, StallReport) { stalls.Add(1) }),
		WithEagerRebalance(), WithStealBackoff())
	require.NoError(t, err)
	defer e.Close()
	assert.True(t, e.PreemptCoop())
	assert.False(t, e.ServiceMode())
	assert.Equal(t, 50*time.Microsecond, e.Spin())
	assert.True(t, e.EagerRebalance())
	assert.True(t, e.StealBackoff())
	st, err := e.Stats()
	require.NoError(t, err)
	assert.Equal(t, PreemptConfig{Slice: time.Millisecond, ClockChecked: true}, st.Preempt)
	assert.Equal(t, time.Hour, st.StallBudget)
	assert.Len(t, st.Loops, 2)
	e2, err := NewExec(1)
	require.NoError(t, err)
	defer e2.Close()
	assert.True(t, e2.ServiceMode(), "NewExec serves by default")
	assert.True(t, e2.StealBackoff(), "NewExec's idle carriers poll for steals at most every 32 ms")
	assert.False(t, e2.EagerRebalance())
	e3, err := ExecInit(1)
	require.NoError(t, err)
	defer e3.Fini()
	assert.False(t, e3.StealBackoff(), "ExecInit keeps the C default")
}

// The C-memory contract (doc.go, "C memory, one rule"): Go returns only
// once the call's C side is gone, also when ctx ended first, so nothing of
// the call is left running or counted when it returns.
func TestGoReturnsOnceCSideGone(t *testing.T) {
	if !PreemptInvoluntarySupported() {
		t.Skip("no involuntary preemption here")
	}
	e, err := NewExec(1, WithPreempt(500*time.Microsecond))
	require.NoError(t, err)
	defer e.Close()
	_, err = e.Start()
	require.NoError(t, err)
	for rep := 0; rep < 20; rep++ {
		ctx, cancel := context.WithTimeout(context.Background(), time.Duration(rep%4)*time.Millisecond)
		_, err := e.Go(ctx, forever(), nil, WithName("forever"))
		cancel()
		require.ErrorIs(t, err, context.DeadlineExceeded)
		// Started, the killed call is over when Go returns; killed before
		// it started (fn never runs, arg is never touched), Go leaves at
		// once and the carrier settles the record right after.
		assert.Eventually(t, func() bool { return e.calls.Load() == 0 },
			30*time.Second, time.Millisecond, "the killed call is settled")
	}
	st, err := e.Stats()
	require.NoError(t, err)
	assert.Zero(t, st.Calls)
}

// What a class received: a never-yielding run in one class stalls (the
// class's Stalls, counted before the StallFunc sees it), and work of a
// 1 ms class queued behind it waits longer than its bound (Late: the
// bound was not met) while a 60 s class's bound holds. Ordered by events:
// the hog is released only once the watchdog saw it run past the budget.
func TestClassStatsStallsAndBound(t *testing.T) {
	var inFn atomic.Uint64 // the hog class's Stalls as the StallFunc saw them
	var hogc *Class
	e, err := NewExec(1, WithStallWatch(20*time.Millisecond, func(l *Loop, r StallReport) {
		if !r.InFlight && inFn.Load() == 0 {
			if st, err := hogc.OnLoop(0).Stats(); err == nil {
				inFn.Store(st.Stalls)
			}
		}
	}))
	require.NoError(t, err)
	defer e.Close()
	hogc, err = e.NewClass(100, 0) // created first: wins the tie, runs first
	require.NoError(t, err)
	tight, err := e.NewClass(100, time.Millisecond)
	require.NoError(t, err)
	loose, err := e.NewClass(100, time.Minute)
	require.NoError(t, err)

	st, err := tight.Stats()
	require.NoError(t, err)
	assert.Equal(t, ClassStats{Shares: 100, Latency: time.Millisecond}, st)

	stop := ctest.NewFlag()
	defer stop.Free()
	// spawned before Start: all three are queued when the carrier begins
	hog, err := e.GoAsync(ctest.Forever(), stop.Ptr(), WithClass(hogc))
	require.NoError(t, err)
	a, err := e.GoAsync(ctest.Ident(), nil, WithClass(tight))
	require.NoError(t, err)
	b, err := e.GoAsync(ctest.Ident(), nil, WithClass(loose))
	require.NoError(t, err)
	_, err = e.Start()
	require.NoError(t, err)
	// the hog runs past the budget, then is let go
	require.Eventually(t, func() bool {
		r, err := e.Loop(0).StallInFlight()
		return err == nil && r.InFlight && r.Ran >= r.Budget
	}, time.Minute, time.Millisecond)
	stop.Set()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, r := range []*CallResult{hog, a, b} {
		_, err := r.Wait(ctx)
		require.NoError(t, err)
	}

	// the watchdog counts at the run's end, after the call returned: its
	// end report is the event to wait for
	require.Eventually(t, func() bool { return inFn.Load() != 0 }, time.Minute, time.Millisecond)
	assert.EqualValues(t, 1, inFn.Load(), "counted before the StallFunc ran")
	hs, err := hogc.Stats()
	require.NoError(t, err)
	assert.EqualValues(t, 1, hs.Stalls)
	assert.EqualValues(t, 1, hs.Runs)
	assert.Zero(t, hs.Waits, "no bound: waits are not measured")
	assert.True(t, hs.MetBound())
	ts, err := tight.Stats()
	require.NoError(t, err)
	assert.EqualValues(t, 1, ts.Waits)
	assert.EqualValues(t, 1, ts.Late)
	assert.GreaterOrEqual(t, ts.WaitMax, 20*time.Millisecond) // behind the hog's run
	assert.Equal(t, ts.WaitMax, ts.WaitSum)
	assert.False(t, ts.MetBound())
	ls, err := loose.Stats()
	require.NoError(t, err)
	assert.EqualValues(t, 1, ls.Waits)
	assert.Zero(t, ls.Late)
	assert.True(t, ls.MetBound())

	es, err := e.Stats()
	require.NoError(t, err)
	require.Len(t, es.Classes, 3)
	assert.Equal(t, hs.Stalls, es.Classes[0].Stalls)
	assert.Equal(t, ts.Late, es.Classes[1].Late)
	assert.GreaterOrEqual(t, es.Stalls, hs.Stalls)

	require.NoError(t, e.Close())
	_, err = tight.Stats()
	assert.ErrorIs(t, err, ErrClosed)
	_, err = tight.OnLoop(0).Stats()
	assert.ErrorIs(t, err, ErrClosed)
	_, err = (*LoopClass)(nil).Stats()
	assert.ErrorIs(t, err, ErrClosed)
}
