//go:build cgo

package xtc

import (
	"context"
	"errors"
	"math/rand"
	"runtime"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/xtc-go/xtc/internal/ctest"
)

func startedExec(t *testing.T, n int, slice time.Duration) *Exec {
	e, err := NewExec(n)
	require.NoError(t, err)
	if slice > 0 {
		require.NoError(t, e.SetPreempt(slice))
		PreemptSetInvoluntary(true) // process-wide; the tests run one at a time
		t.Cleanup(func() { PreemptSetInvoluntary(false) })
	}
	return e
}

func TestExecGoResult(t *testing.T) {
	e := startedExec(t, 2, 0)
	cls, err := e.NewClass(300, time.Millisecond)
	require.NoError(t, err)
	_, err = e.Start()
	require.NoError(t, err)
	v, err := e.GoInt(context.Background(), ctest.Ident(), 7, WithClass(cls))
	require.NoError(t, err)
	assert.EqualValues(t, 7, v)
	v, err = e.GoInt(context.Background(), ctest.SpinFor(), int64(time.Millisecond),
		WithClass(cls), WithName("spin"), WithLoop(1))
	require.NoError(t, err)
	assert.EqualValues(t, 42, v)
	// the result can reach the caller (settled by the proc's exit hook)
	// before the carrier charges the run to its class at the switch out
	deadline := time.Now().Add(10 * time.Second)
	for cls.CPU() == 0 && time.Now().Before(deadline) {
		time.Sleep(100 * time.Microsecond)
	}
	assert.Greater(t, cls.CPU(), time.Duration(0))
	assert.Greater(t, cls.Runs(), uint64(0))
	require.NoError(t, e.Close())
	assert.ErrorIs(t, e.Close(), ErrClosed)
}

// Bad input: nil and closed executors, a class of another executor, bad
// shares, an already-cancelled context, bad loops and functions.
func TestExecGoBadInput(t *testing.T) {
	ctx := context.Background()
	var ne *Exec
	_, err := ne.Go(ctx, ctest.Ident(), nil)
	assert.ErrorIs(t, err, ErrClosed)
	assert.ErrorIs(t, err, ErrInval)
	_, err = ne.NewClass(100, 0)
	assert.ErrorIs(t, err, ErrClosed)
	assert.ErrorIs(t, ne.Close(), ErrClosed)

	e := startedExec(t, 1, 0)
	defer e.Close()
	e2 := startedExec(t, 1, 0)
	defer e2.Close()
	for _, sh := range []int{0, -1, 1001} {
		_, err = e.NewClass(sh, 0)
		assert.ErrorIs(t, err, ErrInval)
		var xe *Error
		require.True(t, errors.As(err, &xe))
		assert.Contains(t, xe.Reason, "shares")
		assert.Contains(t, err.Error(), "shares must be in 1..1000")
		_, err = ExecClassCreate(e.Loop(0), sh, 0)
		assert.ErrorIs(t, err, ErrInval)
	}
	_, err = e.NewClass(10, -time.Second)
	assert.ErrorIs(t, err, ErrInval)
	other, err := e2.NewClass(100, 0)
	require.NoError(t, err)
	otherLoop, err := ExecClassCreate(e2.Loop(0), 100, 0)
	require.NoError(t, err)
	_, err = e.Start()
	require.NoError(t, err)
	_, err = e.Go(ctx, ctest.Ident(), nil, WithClass(other))
	assert.ErrorIs(t, err, ErrInval)
	assert.Contains(t, err.Error(), "another executor")
	_, err = e.Go(ctx, ctest.Ident(), nil, WithLoopClass(otherLoop))
	assert.ErrorIs(t, err, ErrInval)
	_, err = e.Go(ctx, nil, nil)
	assert.ErrorIs(t, err, ErrInval)
	_, err = e.Go(ctx, ctest.Ident(), nil, WithLoop(5))
	assert.ErrorIs(t, err, ErrInval)
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	_, err = e.Go(cctx, ctest.Ident(), nil)
	assert.ErrorIs(t, err, context.Canceled)
	// setup-only calls after Start return the documented error
	_, err = e.NewClass(100, 0)
	assert.ErrorIs(t, err, ErrAgain)
	assert.ErrorIs(t, e.SetPreempt(time.Millisecond), ErrAgain)
	_, err = ExecClassCreate(e.Loop(0), 100, 0)
	assert.ErrorIs(t, err, ErrAgain)
	_, err = e.Start()
	assert.ErrorIs(t, err, ErrInval)
	assert.ErrorIs(t, e.Fini(), ErrInval) // running

	require.NoError(t, e.Close())
	_, err = e.Go(ctx, ctest.Ident(), nil)
	assert.ErrorIs(t, err, ErrClosed)
	_, err = e.Start()
	assert.ErrorIs(t, err, ErrClosed)
	assert.ErrorIs(t, e.Fini(), ErrClosed)
}

// A never-yielding kernel whose context ends is killed at its next slice:
// the call returns ctx.Err() at once, and its class stops consuming CPU.
// How long it ran past the kill is read from the loop's last-run record
// (the class counter is charged at run end, so it jumps by the whole run
// at the kill) and reported in slices.
func TestExecGoCancelStopsWork(t *testing.T) {
	if !PreemptInvoluntarySupported() {
		t.Skip("no involuntary preemption here")
	}
	const slice = 500 * time.Microsecond
	e := startedExec(t, 1, slice)
	defer e.Close()
	require.NoError(t, e.SetStallBudget(time.Hour)) // only to keep the run record
	cls, err := e.NewClass(100, 0)
	require.NoError(t, err)
	_, err = e.Start()
	require.NoError(t, err)
	var over []float64
	for rep := 0; rep < 5; rep++ {
		// the deadline counts from the kernel's start: killed before it
		// started, it would measure nothing
		ctx, cancel := context.WithCancel(timeoutAfterStart(t, ctest.Starts(), 10*time.Millisecond))
		var killAt atomic.Int64
		context.AfterFunc(ctx, func() { killAt.Store(int64(ClockMono())) })
		_, err = e.Go(ctx, forever(), nil, WithClass(cls), WithName("forever"))
		cancel()
		assert.ErrorIs(t, err, context.DeadlineExceeded)
		// the class counter is charged at run end: wait for the run
		// record to show the kernel's run over; then the CPU stays flat
		var r StallReport
		for i := 0; i < 2500; i++ {
			if r, err = e.Loop(0).StallInFlight(); err == nil && !r.InFlight {
				break
			}
			time.Sleep(2 * time.Millisecond)
		}
		require.False(t, r.InFlight, "the killed kernel kept running")
		// The class may still be charged for the exit path's last
		// dispatch just after the run record closed; a kernel that kept
		// running would never let two reads 5 ms apart agree.
		flat := false
		for i := 0; i < 200 && !flat; i++ {
			cpu := cls.CPU()
			time.Sleep(5 * time.Millisecond)
			flat = cpu == cls.CPU()
		}
		require.True(t, flat, "the killed kernel kept running")
		end := r.Started + r.Ran
		over = append(over, float64(end-time.Duration(killAt.Load()))/float64(slice))
	}
	sort.Float64s(over)
	t.Logf("kernel ran past the kill: median %.2f slices of %v (min %.2f, max %.2f, 5 runs)",
		over[2], slice, over[0], over[4])
	// and the executor still serves
	v, err := e.GoInt(context.Background(), ctest.Ident(), 3)
	require.NoError(t, err)
	assert.EqualValues(t, 3, v)
}

func forever() unsafe.Pointer { return ctest.Forever() }

// GoAsync exposes when the C side is gone, and Kill.
func TestExecGoAsyncKill(t *testing.T) {
	e := startedExec(t, 1, 500*time.Microsecond)
	defer e.Close()
	_, err := e.Start()
	require.NoError(t, err)
	started := ctest.Starts()
	r, err := e.GoAsync(ctest.Forever(), nil)
	require.NoError(t, err)
	assert.False(t, r.Pid().IsNone())
	waitStarted(t, started) // a kill of a running call
	require.NoError(t, r.Kill())
	if PreemptInvoluntarySupported() {
		_, err = r.Wait(context.Background())
		assert.ErrorIs(t, err, ErrAborted)
		<-r.Done()
		require.NoError(t, r.Kill()) // ended: a no-op
	}
}

// Close with calls in flight completes them with ErrAborted.
func TestExecCloseAbortsCalls(t *testing.T) {
	e := startedExec(t, 1, 0)
	// never started: the procs wait, Close drops them
	var rs []*CallResult
	for i := 0; i < 10; i++ {
		r, err := e.GoAsync(ctest.Ident(), nil)
		require.NoError(t, err)
		rs = append(rs, r)
	}
	require.NoError(t, e.Close())
	for _, r := range rs {
		_, err := r.Wait(context.Background())
		assert.ErrorIs(t, err, ErrAborted)
	}
}

func TestExecShutdown(t *testing.T) {
	e := startedExec(t, 1, 0)
	_, err := e.Start()
	require.NoError(t, err)
	c := ctest.NewCell(0)
	defer c.Free()
	r, err := e.GoAsync(ctest.SpinFor(), nil)
	require.NoError(t, err)
	_ = c
	require.NoError(t, e.Shutdown(context.Background())) // waits for the call
	v, err := r.Wait(context.Background())
	require.NoError(t, err)
	assert.EqualValues(t, 42, v) // SpinFor(0) returns at once with 42
	assert.ErrorIs(t, e.Shutdown(context.Background()), ErrClosed)

	// a deadline that passes first: ctx.Err(), the executor is closed
	e = startedExec(t, 1, 500*time.Microsecond)
	_, err = e.Start()
	require.NoError(t, err)
	_, err = e.GoAsync(ctest.Forever(), nil)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if PreemptInvoluntarySupported() {
		assert.ErrorIs(t, e.Shutdown(ctx), context.DeadlineExceeded)
		_, err = e.Go(context.Background(), ctest.Ident(), nil)
		assert.ErrorIs(t, err, ErrClosed)
	} else {
		_ = e.Close()
	}
}

// 10^4 goroutines call Go with random cancellation: every call returns
// exactly once, nothing leaks (goroutines, in-flight calls, queue slots).
func TestExecGoManyRandomCancel(t *testing.T) {
	n := 10000
	if testing.Short() {
		n = 2000
	}
	e := startedExec(t, 2, 500*time.Microsecond)
	cls, err := e.NewClass(200, 0)
	require.NoError(t, err)
	_, err = e.Start()
	require.NoError(t, err)
	q, err := getCQ()
	require.NoError(t, err)
	baseG := runtime.NumGoroutine()
	baseInflight := q.inflight.Load()
	var ok, cancelled, returned atomic.Int64
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			rnd := rand.New(rand.NewSource(int64(i)))
			ctx, cancel := context.WithCancel(context.Background())
			if rnd.Intn(2) == 0 {
				time.AfterFunc(time.Duration(rnd.Intn(2000))*time.Microsecond, cancel)
			}
			defer cancel()
			var opts []CallOption
			if i%2 == 0 {
				opts = append(opts, WithClass(cls))
			}
			spin := time.Duration(rnd.Intn(200)) * time.Microsecond
			v, err := e.GoInt(ctx, ctest.SpinFor(), int64(spin), opts...)
			returned.Add(1)
			switch {
			case err == nil && v == 42:
				ok.Add(1)
			case errors.Is(err, context.Canceled):
				cancelled.Add(1)
			default:
				t.Errorf("call %d: %d, %v", i, v, err)
			}
		}(i)
	}
	wg.Wait()
	assert.EqualValues(t, n, returned.Load())
	assert.EqualValues(t, n, ok.Load()+cancelled.Load())
	t.Logf("%d ok, %d cancelled", ok.Load(), cancelled.Load())
	// every proc ends (the killed ones at their next slice)
	deadline := time.Now().Add(20 * time.Second)
	for e.calls.Load() != 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	assert.EqualValues(t, 0, e.calls.Load())
	// (the queue is process-wide: earlier tests' late completions drain too)
	for q.inflight.Load() > baseInflight && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	assert.LessOrEqual(t, q.inflight.Load(), baseInflight)
	require.NoError(t, e.Close())
	for runtime.NumGoroutine() > baseG && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	assert.LessOrEqual(t, runtime.NumGoroutine(), baseG)
	assert.Zero(t, q.tracked())
}
