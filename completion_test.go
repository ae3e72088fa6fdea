//go:build cgo

package xtc

import (
	"context"
	"runtime/pprof"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/xtc-go/xtc/internal/cfuture"
)

// startService runs an executor in service mode (it does not stop when
// idle) and returns it with a cleanup.
func startService(t testing.TB, n int) *Exec {
	e, err := ExecInit(n)
	require.NoError(t, err)
	e.SetServiceMode(true)
	run, err := e.Start()
	require.NoError(t, err)
	t.Cleanup(func() {
		require.NoError(t, e.Stop())
		require.NoError(t, run.Wait(context.Background()))
		require.NoError(t, e.Fini())
	})
	return e
}

func TestSubmitErrors(t *testing.T) {
	_, err := Submit(nil, cfuture.AddOne, nil)
	assert.ErrorIs(t, err, ErrInval)
	l, err := LoopInit()
	require.NoError(t, err)
	_, err = Submit(l, nil, nil)
	assert.ErrorIs(t, err, ErrInval)
	require.NoError(t, l.Fini())
	_, err = Submit(l, cfuture.AddOne, nil) // finalised
	assert.ErrorIs(t, err, ErrInval)
	_, err = SubmitWait(context.Background(), nil, cfuture.AddOne, nil)
	assert.ErrorIs(t, err, ErrInval)

	var nf *Future
	_, err = nf.Wait(context.Background())
	assert.ErrorIs(t, err, ErrInval)
	assert.ErrorIs(t, nf.Cancel(), ErrInval)
}

// A plain Loop: the fiber runs during Run; the result arrives after.
func TestSubmitPlainLoop(t *testing.T) {
	l, err := LoopInit()
	require.NoError(t, err)
	defer l.Fini()
	f, err := Submit(l, cfuture.AddOne, cfuture.Arg(41))
	require.NoError(t, err)
	f2, err := Submit(l, cfuture.Yield3, cfuture.Arg(-7))
	require.NoError(t, err)
	require.NoError(t, l.Run())
	v, err := f.Wait(nil) //nolint:staticcheck // nil ctx = Background
	require.NoError(t, err)
	assert.EqualValues(t, 42, v)
	v, err = f2.Wait(context.Background())
	require.NoError(t, err)
	assert.EqualValues(t, -7, v)
	assert.True(t, f.Ready())
	assert.NoError(t, f.Cancel()) // after completion: no-op
	<-f.Done()
}

// Cancelled before the loop ran it: fn never runs, ErrAborted.
func TestSubmitCancelBeforeRun(t *testing.T) {
	l, err := LoopInit()
	require.NoError(t, err)
	defer l.Fini()
	before := cfuture.Runs()
	f, err := Submit(l, cfuture.AddOne, cfuture.Arg(1))
	require.NoError(t, err)
	require.NoError(t, f.Cancel())
	require.NoError(t, f.Cancel()) // twice: no-op
	require.NoError(t, l.Run())
	v, err := f.Wait(context.Background())
	assert.ErrorIs(t, err, ErrAborted)
	assert.Zero(t, v)
	assert.Equal(t, before, cfuture.Runs())
}

// The loop is finalised with the fiber never run: ErrAborted, once.
func TestSubmitLoopFinalised(t *testing.T) {
	l, err := LoopInit()
	require.NoError(t, err)
	f, err := Submit(l, cfuture.AddOne, cfuture.Arg(1))
	require.NoError(t, err)
	require.NoError(t, l.Fini())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = f.Wait(ctx)
	assert.ErrorIs(t, err, ErrAborted)
}

// Wait honours ctx without stopping the work; Cancel then stops it.
func TestSubmitContextAndCancelWhileRunning(t *testing.T) {
	e := startService(t, 1)
	runs0 := cfuture.Runs()
	f, err := Submit(e.Loop(0), cfuture.UntilCancelled, nil)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	_, err = f.Wait(ctx)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.False(t, f.Ready())
	// Cancel while it runs: wait for the event "it started" (a loaded
	// machine may not have run the fiber within the 20 ms above; cancelled
	// before it starts, it never returns 99).
	require.Eventually(t, func() bool { return cfuture.Runs() > runs0 },
		30*time.Second, time.Millisecond, "the function never started")
	require.NoError(t, f.Cancel())
	v, err := f.Wait(context.Background())
	assert.ErrorIs(t, err, ErrAborted)
	assert.EqualValues(t, 99, v)

	// SubmitWait cancels the work when ctx ends first.
	ctx2, cancel2 := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel2()
	_, err = SubmitWait(ctx2, e.Loop(0), cfuture.UntilCancelled, nil)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
}

// Fibers offload blocking calls; the pool runs them while the carrier goes
// on with other fibers.
func TestSubmitBlockingOffload(t *testing.T) {
	e := startService(t, 1)
	fs := make([]*Future, 8)
	for i := range fs {
		var err error
		fs[i], err = Submit(e.Loop(0), cfuture.Blocking, cfuture.Arg(i+1))
		require.NoError(t, err)
	}
	for i, f := range fs {
		v, err := f.Wait(context.Background())
		require.NoError(t, err)
		assert.EqualValues(t, (i+1)*10, v)
	}
	assert.Positive(t, BlockingThreads())
}

// Many goroutines, two carriers: every result exactly once; no OS thread
// sits blocked per waiting goroutine.
func TestSubmitConcurrentExact(t *testing.T) {
	e := startService(t, 2)
	const G, N = 8, 500
	threadsBefore := pprof.Lookup("threadcreate").Count()
	delivered := CompletionsDelivered()
	var wg sync.WaitGroup
	sums := make([]int64, G)
	for g := 0; g < G; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			fs := make([]*Future, 0, N)
			for i := 0; i < N; i++ {
				f, err := Submit(e.Loop(i%2), cfuture.AddOne, cfuture.Arg(g*N+i))
				if err != nil {
					t.Error(err)
					return
				}
				fs = append(fs, f)
			}
			for _, f := range fs {
				v, err := f.Wait(context.Background())
				if err != nil {
					t.Error(err)
					return
				}
				sums[g] += v
			}
		}(g)
	}
	wg.Wait()
	var got, want int64
	for g := 0; g < G; g++ {
		got += sums[g]
	}
	for k := 0; k < G*N; k++ {
		want += int64(k + 1)
	}
	assert.Equal(t, want, got)
	assert.Equal(t, uint64(G*N), CompletionsDelivered()-delivered)
	// 4000 waiting goroutines must not have needed OS threads of their own.
	assert.Less(t, pprof.Lookup("threadcreate").Count()-threadsBefore, 32)
}

func TestBlockingPoolSizeGo(t *testing.T) {
	assert.ErrorIs(t, BlockingPoolSize(0), ErrRange)
	assert.ErrorIs(t, BlockingPoolSize(65), ErrRange)
}

// Backpressure: at most cqCapacity Submits in flight (ErrAgain beyond);
// finalising the loop with all of them unrun aborts each exactly once and
// frees every slot.
func TestSubmitBackpressureAndFiniAbortsAll(t *testing.T) {
	q, err := getCQ()
	require.NoError(t, err)
	base := q.inflight.Load()
	l, err := LoopInit()
	require.NoError(t, err)
	free := cqCapacity - int(base)
	fs := make([]*Future, 0, free)
	for i := 0; i < free; i++ {
		f, err := Submit(l, cfuture.AddOne, nil)
		require.NoError(t, err)
		fs = append(fs, f)
	}
	_, err = Submit(l, cfuture.AddOne, nil)
	assert.ErrorIs(t, err, ErrAgain)
	runs := cfuture.Runs()
	require.NoError(t, l.Fini())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, f := range fs {
		_, err := f.Wait(ctx)
		require.ErrorIs(t, err, ErrAborted)
	}
	assert.Equal(t, runs, cfuture.Runs()) // none ran
	assert.Equal(t, base, q.inflight.Load())
}

// A waiter pops the completion ring in the sleeping server's place
// (completion.go, await): with the server asleep when the waiter starts
// to poll, and the completion made only then (a gated C function; a Send
// made then), every Dispatch's and every Mailbox message's entry is
// delivered by the goroutine waiting for it, exactly once. The spin is
// made long enough that the waiter never gives up first (events, not
// times: each wait ends when the other side got there).
func TestCompletionWaiterPops(t *testing.T) {
	e := startService(t, 1)
	mb, err := e.NewMailbox(0, 16)
	require.NoError(t, err)
	defer mb.Close()
	q, err := getCQ()
	require.NoError(t, err)
	defer func(d time.Duration) { callSpin = d }(callSpin)
	callSpin = time.Minute
	until := func(what string, cond func() bool) {
		t0 := time.Now()
		for !cond() {
			if time.Since(t0) > time.Minute {
				panic(what) // (not t.Fatal: called off the test goroutine)
			}
			time.Sleep(50 * time.Microsecond)
		}
	}
	asleep := func() bool { return q.asleep.Load() && !q.serving.Load() && q.inflight.Load() == 0 }
	polling := func() bool { return q.spinners.Load() == 1 }
	ctx := context.Background()
	const rounds = 50
	h0 := q.helped.Load()
	base := cfuture.GateNow()
	for i := base + 1; i <= base+rounds; i++ {
		until("the server never slept", asleep)
		f, err := Dispatch(e.Loop(0), cfuture.Gated, cfuture.Arg(i))
		require.NoError(t, err)
		go func() {
			until("the waiter never polled", polling)
			cfuture.OpenGate(i)
		}()
		v, err := f.Wait(ctx)
		require.NoError(t, err)
		require.EqualValues(t, i, v)
	}
	assert.EqualValues(t, rounds, q.helped.Load()-h0, "each Dispatch popped by its waiter")
	h0 = q.helped.Load()
	for i := 0; i < rounds; i++ {
		until("the server never slept", asleep)
		go func() {
			until("the receiver never polled", polling)
			if err := Send(mb.Pid(), []byte{byte(i)}); err != nil {
				panic(err)
			}
		}()
		b, err := mb.Recv(ctx)
		require.NoError(t, err)
		require.Equal(t, []byte{byte(i)}, b)
	}
	assert.EqualValues(t, rounds, q.helped.Load()-h0, "each message popped by its receiver")
}
