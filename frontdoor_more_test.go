//go:build cgo

package xtc

import (
	"context"
	"encoding/binary"
	"errors"
	"math/rand"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/xtc-go/xtc/internal/cfuture"
)

// The other entry points of the front door (frontdoor_more_bench_test.go
// measures them): exactly once, cancellation, shutdown, no growth.

// quickBatch is an executor group whose Step finishes a member after the
// number of rounds its request (*int) holds; < 0: never (until a cancel).
func quickBatch(t *testing.T, capacity int) (*Exec, *Batch) {
	e, err := NewExec(1)
	require.NoError(t, err)
	b, err := e.NewBatch(BatchOpts{Capacity: capacity, MaxActive: 32, ResourceCapacity: 32,
		Step: func(items []BatchItem, res []BatchResult) error {
			for i := range items {
				if n := *items[i].Request.(*int); n >= 0 && items[i].Rounds+1 >= uint64(n) {
					res[i].State = BatchDone
				}
			}
			return nil
		}})
	require.NoError(t, err)
	return e, b
}

// waitAll waits for wg with a generous bound (an event, not a time: the
// bound only turns a hang into a failure).
func waitAll(t testing.TB, wg *sync.WaitGroup, what string) {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(120 * time.Second):
		t.Fatalf("%s did not all return", what)
	}
}

// 1000 goroutines call Do in a loop, some with a context cancelled at a
// random moment, some with requests that never finish; Close under that
// load: every Do returns exactly once, with its result, ctx's error,
// ErrAborted (accepted, cancelled by the close) or ErrClosed (refused),
// and every hand-in slot comes back.
func TestBatchDoCloseUnderLoad(t *testing.T) {
	e, b := quickBatch(t, 4096)
	_, err := e.Start()
	require.NoError(t, err)

	const goroutines = 1000
	var wg sync.WaitGroup
	o := newLoadOutcomes()
	for g := 0; g < goroutines; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			rng := rand.New(rand.NewSource(int64(g)))
			for i := 0; ; i++ {
				n := 1 + rng.Intn(4)
				if g < 16 && i == 0 {
					n = -1 // runs until cancelled: 16 such at most
				}
				ctx, cancel := context.WithCancel(context.Background())
				if rng.Intn(4) == 0 {
					time.AfterFunc(time.Duration(rng.Intn(200))*time.Microsecond, cancel)
				}
				if n < 0 && rng.Intn(2) == 0 {
					cancel()
				}
				o.calls.Add(1)
				_, err := b.Do(ctx, &n)
				cancel()
				if o.note(t, "Do", err, isClosed) {
					return // refused: the group is closed
				}
			}
		}(g)
	}
	o.closeUnderLoad(t, e, &wg, "Do", goroutines)
	assert.Zero(t, b.mt.live.Load(), "every hand-in slot is back")
}

// loadOutcomes tallies the outcomes of calls that goroutines make in a
// loop while the executor closes under them: a result, ctx's error,
// ErrAborted (cut by the close), or a refusal that ends the goroutine.
type loadOutcomes struct {
	calls, ok, cancelled, aborted, refused atomic.Int64
	busy                                   chan struct{} // closed after 5000 calls returned
	busyOnce                               sync.Once
}

func newLoadOutcomes() *loadOutcomes { return &loadOutcomes{busy: make(chan struct{})} }

func isClosed(err error) bool { return errors.Is(err, ErrClosed) }

// note counts one returned call; true when the goroutine is to stop (a
// refusal, or an outcome the test did not expect, reported).
func (o *loadOutcomes) note(t *testing.T, what string, err error, refusal func(error) bool) bool {
	if o.calls.Load() >= 5000 {
		o.busyOnce.Do(func() { close(o.busy) })
	}
	switch {
	case err == nil:
		o.ok.Add(1)
	case errors.Is(err, context.Canceled):
		o.cancelled.Add(1)
	case errors.Is(err, ErrAborted):
		o.aborted.Add(1)
	case refusal(err):
		o.refused.Add(1)
		return true
	default:
		t.Errorf("%s: unexpected %v", what, err)
		return true
	}
	return false
}

// closeUnderLoad closes e once 5000 calls returned, waits for every
// goroutine, and checks one outcome per call and a refusal per goroutine.
func (o *loadOutcomes) closeUnderLoad(t *testing.T, e *Exec, wg *sync.WaitGroup, what string, goroutines int) {
	t.Helper()
	select {
	case <-o.busy:
	case <-time.After(120 * time.Second):
		t.Fatalf("5000 %s calls did not return", what)
	}
	require.NoError(t, e.Close())
	waitAll(t, wg, what+" calls")
	assert.Equal(t, o.calls.Load(), o.ok.Load()+o.cancelled.Load()+o.aborted.Load()+o.refused.Load(),
		"one outcome per call")
	assert.Equal(t, int64(goroutines), o.refused.Load(), "each goroutine ends refused")
	t.Logf("%d %s calls: %d ok, %d cancelled, %d aborted, %d refused", o.calls.Load(), what,
		o.ok.Load(), o.cancelled.Load(), o.aborted.Load(), o.refused.Load())
}

// Many Do calls reuse a few slots: the table stays at the calls in flight,
// every slot comes back, and the path allocates nothing per call.
func TestBatchDoSlotsReused(t *testing.T) {
	e, b := quickBatch(t, 4096)
	_, err := e.Start()
	require.NoError(t, err)
	defer e.Close()
	const g, per = 64, 2000
	one := 1
	run := func() {
		hammer(t, g, per, func() error {
			_, err := b.Do(context.Background(), &one)
			return err
		})
	}
	run() // warm: the slots, their channels, the goroutine stacks
	var m0, m1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m0)
	run()
	runtime.ReadMemStats(&m1)
	assert.Zero(t, b.mt.live.Load())
	b.mt.free.mu.Lock()
	made, free := b.mt.free.made, len(b.mt.free.free)
	b.mt.free.mu.Unlock()
	assert.Equal(t, made, free, "every slot is on the free list")
	assert.LessOrEqual(t, made, 2*mtChunk, "slots for the calls in flight only")
	t.Logf("%d calls: %d slots, mallocs +%d", g*per, made, m1.Mallocs-m0.Mallocs)
	// the goroutines themselves allocate; the calls do not. Not under
	// -asan/-race: there cgo.Handle.Value's sync.Map lookup boxes its key
	// on the heap (pprof: HashTrieMap.Load, one per completion callback),
	// which the plain build does not
	if !underSanitizer {
		assert.Less(t, m1.Mallocs-m0.Mallocs, uint64(g*per/100))
	}
}

// 1000 goroutines dispatch in a loop (a quarter with a ctx cancelled at
// a random moment, some functions that yield before they return), and
// the executor closes under that load: every Dispatch either fails at
// once (the loop is gone) or its Future completes exactly once, with the
// function's result, ctx's error (DispatchWait cancels it) or ErrAborted
// (dropped unrun by the loop's fini); none is left waiting.
func TestDispatchCloseUnderLoad(t *testing.T) {
	e, err := NewExec(1)
	require.NoError(t, err)
	_, err = e.Start()
	require.NoError(t, err)
	l := e.Loop(0)

	const goroutines = 1000
	var wg sync.WaitGroup
	o := newLoadOutcomes()
	for g := 0; g < goroutines; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			rng := rand.New(rand.NewSource(int64(g)))
			for {
				fn, want := cfuture.AddOne, int64(g+1)
				if rng.Intn(4) == 0 {
					fn, want = cfuture.Yield3, int64(g)
				}
				ctx, cancel := context.WithCancel(context.Background())
				if rng.Intn(4) == 0 {
					time.AfterFunc(time.Duration(rng.Intn(200))*time.Microsecond, cancel)
				}
				o.calls.Add(1)
				v, err := DispatchWait(ctx, l, fn, cfuture.Arg(g))
				cancel()
				if err == nil && v != want {
					t.Errorf("Dispatch: %d, want %d", v, want)
				}
				if o.note(t, "Dispatch", err, func(err error) bool {
					return errors.Is(err, ErrInval) || errors.Is(err, ErrClosed)
				}) {
					return // the loop is gone
				}
			}
		}(g)
	}
	o.closeUnderLoad(t, e, &wg, "Dispatch", goroutines)
}

// 1000 goroutines send to one Mailbox while a goroutine receives, and
// the mailbox closes under that load: every message received was sent
// once and arrives once, each sender's in order; Recv ends with
// ErrClosed once the messages handed over are read; no Send blocks.
func TestMailboxCloseUnderLoad(t *testing.T) {
	e, err := NewExec(1)
	require.NoError(t, err)
	mb, err := e.NewMailbox(0, 1024)
	require.NoError(t, err)
	_, err = e.Start()
	require.NoError(t, err)
	defer e.Close()

	const goroutines = 1000
	var sent atomic.Int64
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for g := 0; g < goroutines; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			var b [8]byte
			for i := uint32(0); ; i++ {
				binary.NativeEndian.PutUint32(b[:4], uint32(g))
				binary.NativeEndian.PutUint32(b[4:], i)
				err := Send(mb.Pid(), b[:])
				switch {
				case err == nil:
					sent.Add(1)
				case errors.Is(err, ErrAgain): // full: the receiver is behind
					runtime.Gosched()
					i--
				default: // the mailbox is gone
					return
				}
				select {
				case <-stop:
					return
				default:
				}
			}
		}(g)
	}
	next := make([]uint32, goroutines)
	received := 0
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	for {
		if received == 5000 {
			go func() { _ = mb.Close() }() // under load
		}
		b, err := mb.Recv(ctx)
		if err != nil {
			require.ErrorIs(t, err, ErrClosed, "Recv ends on ErrClosed")
			break
		}
		require.Len(t, b, 8)
		g, i := binary.NativeEndian.Uint32(b[:4]), binary.NativeEndian.Uint32(b[4:])
		require.Equal(t, next[g], i, "sender %d in order, each message once", g)
		next[g]++
		received++
	}
	close(stop)
	waitAll(t, &wg, "senders")
	assert.LessOrEqual(t, int64(received), sent.Load())
	assert.GreaterOrEqual(t, received, 5000)
	t.Logf("%d sent, %d received before the close", sent.Load(), received)
}
