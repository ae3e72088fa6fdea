//go:build cgo

package xtc

import (
	"context"
	"errors"
	"math"
	"math/rand"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/xtc-go/xtc/examples/go/kernels"
)

func fnExec(t *testing.T, n int) *Exec {
	t.Helper()
	if !PreemptInvoluntarySupported() {
		t.Skip("no involuntary preemption in this build")
	}
	e, err := NewExec(n)
	require.NoError(t, err)
	_, err = e.Start()
	require.NoError(t, err)
	t.Cleanup(func() { _ = e.Close() })
	return e
}

// fnRecords returns a check that every C record of Fn and Launch made
// since is freed (Close's deferred frees run when the slice in flight
// ends: bounded wait). Relative, so one failed test does not fail the next.
func fnRecords(t *testing.T) func() {
	base := fnLive.Load()
	return func() {
		t.Helper()
		require.Eventually(t, func() bool { return fnLive.Load() <= base }, 30*time.Second,
			time.Millisecond, "C records of Fn/Launch left: %d (before: %d)", fnLive.Load(), base)
	}
}

const fnSlice = 100 * time.Microsecond

// The paper's round robin: short requests finish in their first slice,
// long ones are preempted and resumed, and every result equals an
// uninterrupted run's.
func TestFnRoundRobin(t *testing.T) {
	noLeak := fnRecords(t)
	e := fnExec(t, 1)
	ctx := context.Background()
	work := []uint64{30000000, 2000, 1000, 20000000, 500, 3000}
	fs := make([]*Fn, len(work))
	var order []int
	for i, n := range work {
		f, err := e.LaunchFn(ctx, kernels.Serve(), kernels.Arg(int64(n)), fnSlice, WithName("serve"))
		require.NoError(t, err)
		fs[i] = f
		if f.Completed() {
			order = append(order, i)
		} else {
			assert.Equal(t, FnPreempted, f.State())
		}
	}
	for len(order) < len(work) {
		for i, f := range fs {
			if f.Completed() {
				continue
			}
			done, err := f.Resume(ctx, fnSlice)
			require.NoError(t, err)
			if done {
				order = append(order, i)
			}
		}
	}
	for i, f := range fs {
		v, err := f.Result()
		require.NoError(t, err)
		assert.Equal(t, kernels.ServeGo(work[i]), v, "request %d", i)
		assert.Greater(t, f.RunTime(), time.Duration(0))
		if work[i] >= 10000000 {
			assert.Greater(t, f.Preemptions(), 0, "long request %d was never preempted", i)
		}
		require.NoError(t, f.Close())
		assert.ErrorIs(t, f.Close(), ErrClosed)
	}
	// the long requests (0 and 3) finish last
	assert.ElementsMatch(t, []int{0, 3}, order[len(order)-2:], "completion order %v", order)
	noLeak()
}

// The thin, man-page-shaped wrappers on a zero Fn; a completed Fn can be
// launched again.
func TestFnThinWrappers(t *testing.T) {
	noLeak := fnRecords(t)
	e := fnExec(t, 2)
	var f Fn
	assert.False(t, FnCompleted(&f))
	assert.Equal(t, FnIdle, f.State())
	// ~30 ms of work: preempted at its first 100 us slice even when the
	// monitor is late on a loaded machine
	const work = 20000000
	err := FnLaunch(e, &f, kernels.Serve(), kernels.Arg(work), fnSlice)
	require.ErrorIs(t, err, ErrAgain)
	for {
		err = FnResume(&f, fnSlice)
		if err == nil {
			break
		}
		require.ErrorIs(t, err, ErrAgain)
	}
	assert.True(t, FnCompleted(&f))
	v, err := f.Result()
	require.NoError(t, err)
	assert.Equal(t, kernels.ServeGo(work), v)
	assert.ErrorIs(t, FnResume(&f, fnSlice), ErrInval) // not preempted
	assert.ErrorIs(t, FnCancel(&f), ErrInval)

	require.NoError(t, FnLaunch(e, &f, kernels.Sum(), kernels.Arg(100), 50*time.Millisecond))
	v, err = f.Result()
	require.NoError(t, err)
	assert.EqualValues(t, 5050, v)
	assert.Equal(t, 0, f.Preemptions())
	require.NoError(t, f.Close())
	noLeak()
}

func TestFnBadInput(t *testing.T) {
	noLeak := fnRecords(t)
	if !PreemptInvoluntarySupported() {
		t.Skip("no involuntary preemption in this build")
	}
	ctx := context.Background()
	var ne *Exec
	_, err := ne.LaunchFn(ctx, kernels.Sum(), nil, fnSlice)
	assert.ErrorIs(t, err, ErrClosed)
	_, err = Launch(ctx, nil, kernels.Sum(), nil, time.Second, nil)
	assert.ErrorIs(t, err, ErrClosed)

	e := fnExec(t, 1)
	_, err = e.LaunchFn(ctx, nil, nil, fnSlice)
	assert.ErrorIs(t, err, ErrInval)
	for _, s := range []time.Duration{0, -1, -time.Second} {
		_, err = e.LaunchFn(ctx, kernels.Sum(), nil, s)
		assert.ErrorIs(t, err, ErrInval, "slice %v", s)
		var xe *Error
		require.ErrorAs(t, err, &xe)
		assert.Contains(t, xe.Reason, "slice")
	}
	_, err = e.LaunchFn(ctx, kernels.Sum(), nil, fnSlice, WithLoop(5))
	assert.ErrorIs(t, err, ErrInval)
	other, err := NewExec(1)
	require.NoError(t, err)
	ocls, err := other.NewClass(100, 0)
	require.NoError(t, err)
	_, err = e.LaunchFn(ctx, kernels.Sum(), nil, fnSlice, WithClass(ocls))
	assert.ErrorIs(t, err, ErrInval)
	require.NoError(t, other.Close())
	_, err = Launch(ctx, e, nil, nil, time.Second, nil)
	assert.ErrorIs(t, err, ErrInval)
	_, err = Launch(ctx, e, kernels.Sum(), nil, time.Second, &LaunchOpts{MailboxCap: -1})
	assert.ErrorIs(t, err, ErrInval)

	done, cancel := context.WithCancel(ctx)
	cancel()
	_, err = e.LaunchFn(done, kernels.Sum(), nil, fnSlice)
	assert.ErrorIs(t, err, context.Canceled)
	_, err = Launch(done, e, kernels.Sum(), nil, time.Second, nil)
	assert.ErrorIs(t, err, context.Canceled)

	// nil Fn: no crash
	var nf *Fn
	_, err = nf.Resume(ctx, fnSlice)
	assert.ErrorIs(t, err, ErrInval)
	assert.False(t, nf.Completed())
	assert.Equal(t, FnIdle, nf.State())
	_, err = nf.Result()
	assert.ErrorIs(t, err, ErrInval)
	assert.ErrorIs(t, nf.Cancel(), ErrInval)
	assert.ErrorIs(t, nf.Close(), ErrInval)
	assert.ErrorIs(t, nf.Wait(ctx), ErrInval)
	assert.ErrorIs(t, FnLaunch(e, nil, kernels.Sum(), nil, fnSlice), ErrInval)

	f, err := e.LaunchFn(ctx, kernels.Spin(), nil, fnSlice)
	require.NoError(t, err)
	_, err = f.Resume(ctx, 0)
	assert.ErrorIs(t, err, ErrInval)
	_, err = f.Resume(done, fnSlice)
	assert.ErrorIs(t, err, context.Canceled)
	_, err = f.Result()
	assert.ErrorIs(t, err, ErrInval)
	assert.ErrorIs(t, FnLaunch(e, f, kernels.Sum(), nil, fnSlice), ErrInval) // still preempted
	require.NoError(t, f.Close())
	_, err = f.Resume(ctx, fnSlice)
	assert.ErrorIs(t, err, ErrClosed)
	assert.ErrorIs(t, f.Cancel(), ErrClosed)

	// the adaptive quantum rejects NaN and infinite options
	for _, o := range []QuantumOpts{{LoadHigh: math.NaN()}, {LoadLow: math.Inf(1)},
		{AlphaHeavy: math.NaN()}, {Min: -1}, {Window: -1}} {
		_, err = NewQuantum(o)
		assert.ErrorIs(t, err, ErrInval, "%+v", o)
	}
	q, err := NewQuantum(QuantumOpts{})
	require.NoError(t, err)
	assert.ErrorIs(t, q.SetLoad(math.NaN()), ErrInval)
	assert.ErrorIs(t, q.SetLoad(math.Inf(-1)), ErrInval)
	q.Close()

	require.NoError(t, e.Close())
	_, err = e.LaunchFn(ctx, kernels.Sum(), nil, fnSlice)
	assert.ErrorIs(t, err, ErrClosed)
	_, err = Launch(ctx, e, kernels.Sum(), nil, time.Second, nil)
	assert.ErrorIs(t, err, ErrClosed)
	noLeak()
}

// Cancel abandons a preempted function; a preempted function outlives its
// executor and is freed by Close from the Go side.
func TestFnCancelAndExecClose(t *testing.T) {
	noLeak := fnRecords(t)
	e := fnExec(t, 1)
	ctx := context.Background()
	f, err := e.LaunchFn(ctx, kernels.Spin(), nil, fnSlice)
	require.NoError(t, err)
	done, err := f.Resume(ctx, fnSlice)
	require.NoError(t, err)
	assert.False(t, done)
	assert.Equal(t, 2, f.Preemptions())
	require.NoError(t, f.Cancel())
	assert.Equal(t, FnIdle, f.State())
	_, err = f.Resume(ctx, fnSlice)
	assert.ErrorIs(t, err, ErrInval)
	// relaunch the cancelled Fn
	require.NoError(t, FnLaunch(e, f, kernels.Sum(), kernels.Arg(10), time.Second))
	v, err := f.Result()
	require.NoError(t, err)
	assert.EqualValues(t, 55, v)
	require.NoError(t, f.Close())

	g, err := e.LaunchFn(ctx, kernels.Spin(), nil, fnSlice)
	require.NoError(t, err)
	require.NoError(t, e.Close())
	_, err = g.Resume(ctx, fnSlice)
	assert.ErrorIs(t, err, ErrClosed)
	assert.Equal(t, FnPreempted, g.State())
	require.NoError(t, g.Close())
	noLeak()
}

// A ctx that ends during a slice returns at once; the slice ends by
// itself and the next call waits for it.
func TestFnContextEnds(t *testing.T) {
	noLeak := fnRecords(t)
	e := fnExec(t, 1)
	ctx := context.Background()
	const long = 300 * time.Millisecond
	f, err := e.LaunchFn(ctx, kernels.Spin(), nil, fnSlice)
	require.NoError(t, err)
	short, cancel := context.WithTimeout(ctx, time.Millisecond)
	_, err = f.Resume(short, long)
	cancel()
	require.ErrorIs(t, err, context.DeadlineExceeded)
	// the long slice may still run: Cancel refuses, Wait waits for it
	if err := f.Cancel(); err != nil {
		assert.ErrorIs(t, err, ErrAgain)
	}
	wctx, wcancel := context.WithTimeout(ctx, 30*time.Second)
	defer wcancel()
	require.NoError(t, f.Wait(wctx))
	assert.Equal(t, FnPreempted, f.State())
	require.NoError(t, f.Cancel())
	require.NoError(t, f.Close())

	// a launch whose ctx ends is abandoned and freed after its slice
	short, cancel = context.WithTimeout(ctx, time.Millisecond)
	g, err := e.LaunchFn(short, kernels.Spin(), nil, long)
	cancel()
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Nil(t, g)
	noLeak()
}

// xtc_launch: a deadline kills the child, a result comes back, a ctx that
// ends kills the driver and with it the child.
func TestLaunchDeadline(t *testing.T) {
	noLeak := fnRecords(t)
	if !PreemptInvoluntarySupported() {
		t.Skip("no involuntary preemption in this build")
	}
	e := startedExec(t, 1, time.Millisecond)
	cls, err := e.NewClass(100, 0)
	require.NoError(t, err)
	_, err = e.Start()
	require.NoError(t, err)
	defer e.Close()
	ctx := context.Background()
	v, err := Launch(ctx, e, kernels.Sum(), kernels.Arg(100), -1, &LaunchOpts{Name: "sum", Loop: 0})
	require.NoError(t, err)
	assert.EqualValues(t, 5050, v)
	_, err = Launch(ctx, e, kernels.Spin(), nil, 5*time.Millisecond, &LaunchOpts{Name: "spin"})
	assert.ErrorIs(t, err, ErrAgain)
	short, cancel := context.WithTimeout(ctx, 5*time.Millisecond)
	_, err = Launch(short, e, kernels.Spin(), nil, -1, nil)
	cancel()
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	noLeak() // the driver ended, so the child is gone
	_ = cls
}

// Many goroutines launch and resume functions, some with a ctx that ends
// at a random point: every call returns, and nothing leaks.
func TestFnManyGoroutines(t *testing.T) {
	noLeak := fnRecords(t)
	e := fnExec(t, 2)
	w, err := e.LaunchFn(context.Background(), kernels.Sum(), nil, fnSlice)
	require.NoError(t, err) // the completion queue's goroutine starts once
	require.NoError(t, w.Close())
	g0 := runtime.NumGoroutine()
	const n = 200
	var wg sync.WaitGroup
	var bad sync.Map
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			r := rand.New(rand.NewSource(int64(i)))
			ctx := context.Background()
			var cancel context.CancelFunc = func() {}
			if i%3 == 0 {
				ctx, cancel = context.WithTimeout(ctx, time.Duration(r.Intn(2000))*time.Microsecond)
			}
			defer cancel()
			work := uint64(1000 + r.Intn(300000))
			f, err := e.LaunchFn(ctx, kernels.Serve(), kernels.Arg(int64(work)), fnSlice)
			if err != nil {
				if !errors.Is(err, context.DeadlineExceeded) {
					bad.Store(i, err)
				}
				return
			}
			defer f.Close()
			for !f.Completed() {
				if _, err := f.Resume(ctx, fnSlice); err != nil {
					if !errors.Is(err, context.DeadlineExceeded) {
						bad.Store(i, err)
					}
					return
				}
			}
			if v, err := f.Result(); err != nil || v != kernels.ServeGo(work) {
				bad.Store(i, err)
			}
		}(i)
	}
	wg.Wait()
	bad.Range(func(k, v any) bool { t.Errorf("goroutine %v: %v", k, v); return true })
	noLeak()
	// polled here, not with Eventually (whose own goroutine would count)
	for end := time.Now().Add(30 * time.Second); runtime.NumGoroutine() > g0 && time.Now().Before(end); {
		time.Sleep(time.Millisecond)
	}
	if runtime.NumGoroutine() > g0 {
		buf := make([]byte, 1<<16)
		t.Errorf("goroutines: %d before, %d after\n%s", g0, runtime.NumGoroutine(), buf[:runtime.Stack(buf, true)])
	}
}
