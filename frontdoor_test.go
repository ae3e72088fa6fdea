//go:build cgo

package xtc

import (
	"context"
	"errors"
	"math/rand"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/xtc-go/xtc/internal/ctest"
)

// The front door (gocall.go) under many goroutines: every call returns
// exactly once with its own value or the error of its own cancellation,
// every record comes back, nothing is left running or parked. 1000
// goroutines; XTC_FRONTDOOR_LONG=1 makes it 10^6 calls (10^3 each), the
// default is 5*10^4 (-short: 2*10^4).
func frontDoorCalls(t *testing.T) int {
	switch {
	case os.Getenv("XTC_FRONTDOOR_LONG") != "":
		return 1000
	case testing.Short():
		return 20
	}
	return 50
}

func TestFrontDoorExactlyOnce(t *testing.T) {
	const G = 1000
	per := frontDoorCalls(t)
	e := startedExec(t, 2, 200*time.Microsecond)
	cls, err := e.NewClass(300, 0)
	require.NoError(t, err)
	_, err = e.Start()
	require.NoError(t, err)
	baseG := runtime.NumGoroutine()
	var ok, cancelled, bad atomic.Int64
	var wg sync.WaitGroup
	for g := 0; g < G; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			rnd := rand.New(rand.NewSource(int64(g)))
			for k := 0; k < per; k++ {
				want := int64(g)<<20 | int64(k)
				ctx := context.Background()
				var cancel context.CancelFunc
				fn := ctest.Ident()
				arg := want
				if rnd.Intn(50) == 0 { // a few spin long enough to be cancelled
					fn, arg = ctest.SpinFor(), int64(time.Millisecond)
					ctx, cancel = context.WithTimeout(ctx, time.Duration(rnd.Intn(500))*time.Microsecond)
				}
				var opts []CallOption
				if k%3 == 0 {
					opts = append(opts, WithClass(cls))
				}
				v, err := e.GoInt(ctx, fn, arg, opts...)
				if cancel != nil {
					cancel()
				}
				switch {
				case err == nil && (v == want || (arg != want && v == 42)):
					ok.Add(1)
				case errors.Is(err, context.DeadlineExceeded):
					cancelled.Add(1)
				default:
					bad.Add(1)
					t.Errorf("call %d/%d: %d, %v", g, k, v, err)
				}
			}
		}(g)
	}
	wg.Wait()
	assert.EqualValues(t, 0, bad.Load())
	assert.EqualValues(t, G*per, ok.Load()+cancelled.Load())
	t.Logf("%d calls: %d ok, %d cancelled", G*per, ok.Load(), cancelled.Load())
	// the cancelled ones are killed at their next slice; every record
	// comes back
	deadline := time.Now().Add(30 * time.Second)
	for e.calls.Load() != 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	assert.EqualValues(t, 0, e.calls.Load())
	sub, ring, spun, _ := e.callStats()
	assert.Equal(t, sub, ring+spun, "every submitted record settled once")
	assert.LessOrEqual(t, sub, uint64(G*per)) // a ctx done before the call starts nothing
	assert.GreaterOrEqual(t, sub, uint64(ok.Load()))
	g := e.gc.Load()
	require.NotNil(t, g)
	assert.EqualValues(t, 0, g.live.Load())
	for li := 0; li < g.nloops; li++ { // placement's counts did not drift
		assert.EqualValues(t, 0, g.load(li), "loop %d", li)
	}
	require.NoError(t, e.Close())
	// the completion server exits with the executor
	select {
	case <-g.exited:
	case <-time.After(30 * time.Second):
		t.Fatal("the completion server did not exit")
	}
	for runtime.NumGoroutine() > baseG && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	assert.LessOrEqual(t, runtime.NumGoroutine(), baseG)
}

// Close while 1000 goroutines call in a loop: every call returns (a value,
// ErrClosed for the ones that came after, ErrAborted for the ones in
// flight), nothing hangs, the server exits.
func TestFrontDoorCloseUnderLoad(t *testing.T) {
	const G = 1000
	e := startedExec(t, 2, 200*time.Microsecond)
	_, err := e.Start()
	require.NoError(t, err)
	var ok, closed, aborted atomic.Int64
	var wg sync.WaitGroup
	started := make(chan struct{})
	var once sync.Once
	for g := 0; g < G; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for k := 0; ; k++ {
				fn, arg := ctest.Ident(), int64(k)
				if k%10 == 9 {
					fn, arg = ctest.SpinFor(), int64(100*time.Microsecond)
				}
				v, err := e.GoInt(context.Background(), fn, arg)
				switch {
				case err == nil:
					if (fn == ctest.Ident() && v != arg) || (fn != ctest.Ident() && v != 42) {
						t.Errorf("wrong value %d for %d", v, arg)
					}
					ok.Add(1)
					if k == 5 {
						once.Do(func() { close(started) })
					}
				case errors.Is(err, ErrClosed):
					closed.Add(1)
					return
				case errors.Is(err, ErrAborted):
					aborted.Add(1)
				default:
					t.Errorf("call: %v", err)
					return
				}
			}
		}(g)
	}
	select {
	case <-started:
	case <-time.After(30 * time.Second):
		t.Fatal("no call completed")
	}
	// under load: as many calls done as there are callers (an event, not
	// a time the machine may not give the callers)
	require.Eventually(t, func() bool { return ok.Load() >= G }, eventBound,
		100*time.Microsecond, "the callers made no progress")
	g := e.gc.Load()
	require.NoError(t, e.Close())
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		t.Fatal("callers still blocked after Close")
	}
	assert.EqualValues(t, G, closed.Load())
	t.Logf("ok %d, aborted %d, closed %d", ok.Load(), aborted.Load(), closed.Load())
	select {
	case <-g.exited:
	case <-time.After(30 * time.Second):
		t.Fatal("the completion server did not exit")
	}
}

// A cancelled call that never started never runs; one that runs is killed
// and its record comes back (the server frees what the caller abandoned).
func TestFrontDoorCancelBeforeStart(t *testing.T) {
	// a slice, so that a broken kill still lets Close end the test
	e := startedExec(t, 1, 200*time.Microsecond)
	defer e.Close()
	// not started: the call waits in the ring; its ctx ends first
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Millisecond)
	defer cancel()
	c := ctest.NewCell(0)
	defer c.Free()
	_, err := e.Go(ctx, ctest.Forever(), c.Ptr())
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	_, err = e.Start()
	require.NoError(t, err)
	// the killed record settles without running Forever (which would
	// never return: the cell stays 0 and nothing preempts it here)
	deadline := time.Now().Add(30 * time.Second)
	for e.calls.Load() != 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	assert.EqualValues(t, 0, e.calls.Load())
	v, err := e.GoInt(context.Background(), ctest.Ident(), 9)
	require.NoError(t, err)
	assert.EqualValues(t, 9, v)
}

// No goroutine and no slot growth over many sequential calls (10^5; the
// long variant 10^7 with XTC_FRONTDOOR_LONG=1).
func TestFrontDoorNoGrowth(t *testing.T) {
	n := 100000
	if os.Getenv("XTC_FRONTDOOR_LONG") != "" {
		n = 10_000_000
	} else if testing.Short() {
		n = 20000
	}
	e := startedExec(t, 1, 0)
	defer e.Close()
	_, err := e.Start()
	require.NoError(t, err)
	ctx := context.Background()
	for i := 0; i < 1000; i++ {
		_, _ = e.GoInt(ctx, ctest.Ident(), 1)
	}
	runtime.GC()
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	g0 := runtime.NumGoroutine()
	for i := 0; i < n; i++ {
		v, err := e.GoInt(ctx, ctest.Ident(), int64(i))
		if err != nil || v != int64(i) {
			t.Fatalf("call %d: %d, %v", i, v, err)
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&m1)
	assert.LessOrEqual(t, runtime.NumGoroutine(), g0)
	g := e.gc.Load()
	g.free.mu.Lock()
	free, slots := len(g.free.free), g.free.made
	g.free.mu.Unlock()
	assert.Equal(t, slots, free, "every slot is back on the free list")
	t.Logf("%d calls: heap %d -> %d bytes, mallocs +%d", n, m0.HeapAlloc, m1.HeapAlloc, m1.Mallocs-m0.Mallocs)
	// the synchronous path allocates nothing per call
	assert.Less(t, m1.Mallocs-m0.Mallocs, uint64(n/100))
}

// Calls past a full submission ring wait in the carrier's overflow: none
// is refused, and once the executor runs each settles once with its own
// value (the overflow's order and pacing are the C tests':
// test_exec_gocall's test_fallback, test_exec's test_submit_node).
func TestFrontDoorOverflow(t *testing.T) {
	const N = 6000 // the ring holds 4096
	e := startedExec(t, 1, 0)
	defer e.Close()
	var wg sync.WaitGroup
	var bad atomic.Int64
	for i := 0; i < N; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			v, err := e.GoInt(context.Background(), ctest.Ident(), int64(i))
			if err != nil || v != int64(i) {
				bad.Add(1)
				t.Errorf("call %d: %d, %v", i, v, err)
			}
		}(i)
	}
	// every call is queued before the run starts
	require.Eventually(t, func() bool { sub, _, _, _ := e.callStats(); return sub == N },
		60*time.Second, time.Millisecond, "calls queued before the run")
	sub, _, _, past := e.callStats()
	require.EqualValues(t, N, sub, "calls queued before the run")
	assert.EqualValues(t, N-4096, past, "calls past the full ring")
	_, err := e.Start()
	require.NoError(t, err)
	wg.Wait()
	assert.Zero(t, bad.Load())
	sub, ring, spun, _ := e.callStats()
	assert.Equal(t, sub, ring+spun, "every submitted record settled once")
}
