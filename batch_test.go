//go:build cgo

package xtc

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type goReq struct {
	name          string
	length, done  int
	outcome       error
	order         int
	completeCalls int
}

// The seed's snippet through Go: 5, 1, 2, 1 rounds, two active, 9
// member-rounds in 5 iterations, completion order 1, 2, 3, 0.
func TestBatchSnippet(t *testing.T) {
	l, err := LoopInit()
	require.NoError(t, err)
	defer l.Fini()
	cls, err := ExecClassCreate(l, 100, 0)
	require.NoError(t, err)

	var b *Batch
	finished, deadlk := 0, 0
	b, err = BatchCreate(l, &BatchOpts{
		Capacity: 4, MaxActive: 2, ResourceCapacity: 2, Class: cls,
		Name: "snippet",
		Step: func(items []BatchItem, res []BatchResult) error {
			if _, err := b.Submit("x", 1); errors.Is(err, ErrDeadlk) {
				deadlk++
			}
			for i, it := range items {
				r := it.Request.(*goReq)
				r.done++
				if r.done == r.length {
					res[i].State = BatchDone
				}
			}
			return nil
		},
		Complete: func(h uint64, req any, outcome error) {
			r := req.(*goReq)
			finished++
			r.order = finished
			r.outcome = outcome
			r.completeCalls++
		},
	})
	require.NoError(t, err)
	reqs := []*goReq{{length: 5}, {length: 1}, {length: 2}, {length: 1}}
	var last uint64
	for _, r := range reqs {
		h, err := b.Submit(r, 1)
		require.NoError(t, err)
		assert.Greater(t, h, last)
		last = h
	}
	require.NoError(t, BatchClose(b, BatchDrain))
	require.NoError(t, l.Run())
	st, err := b.Stats()
	require.NoError(t, err)
	assert.EqualValues(t, 9, st.MemberRounds)
	assert.EqualValues(t, 5, st.Iterations)
	assert.EqualValues(t, 4, st.CompletedOK)
	assert.False(t, st.DriverAlive)
	assert.Equal(t, 5, deadlk)
	for i, want := range []int{4, 1, 2, 3} {
		assert.Equal(t, want, reqs[i].order, "request %d", i)
		assert.NoError(t, reqs[i].outcome)
		assert.Equal(t, 1, reqs[i].completeCalls)
	}
	require.NoError(t, b.Destroy())
	assert.ErrorIs(t, b.Destroy(), ErrInval)
	_, err = b.Stats()
	assert.ErrorIs(t, err, ErrInval)
}

// Requests of any type, errors of a member and of a whole step, a panic in
// Step and in Complete: never a crash, each reported as the member's error.
func TestBatchErrorsAndPanics(t *testing.T) {
	l, err := LoopInit()
	require.NoError(t, err)
	defer l.Fini()

	myErr := errors.New("model says no")
	outcomes := map[any]error{}
	calls := 0
	b, err := BatchCreate(l, &BatchOpts{
		Capacity: 8, MaxActive: 1, ResourceCapacity: 1,
		Step: func(items []BatchItem, res []BatchResult) error {
			calls++
			switch v := items[0].Request.(type) {
			case int:
				if v == 1 {
					panic("boom")
				}
				res[0].State = BatchDone
			case string:
				res[0] = BatchResult{State: BatchError, Err: myErr}
			case uint8:
				return ErrIo
			case struct{ X int }:
				res[0] = BatchResult{State: BatchError} // nil Err
			case float64:
				return myErr
			}
			return nil
		},
		Complete: func(h uint64, req any, outcome error) {
			outcomes[req] = outcome
			if req == 2 {
				panic("complete panics too")
			}
		},
	})
	require.NoError(t, err)
	for _, r := range []any{0, 1, 2, "s", uint8(9), struct{ X int }{7}, 2.5} {
		_, err := b.Submit(r, 1)
		require.NoError(t, err)
	}
	require.NoError(t, BatchClose(b, BatchDrain))
	require.NoError(t, l.Run())
	assert.NoError(t, outcomes[0])
	var pe *BatchPanicError
	require.ErrorAs(t, outcomes[1], &pe)
	assert.Equal(t, "boom", pe.Value)
	assert.ErrorIs(t, outcomes[1], ErrInternal)
	assert.NoError(t, outcomes[2])
	assert.ErrorIs(t, outcomes["s"], myErr)
	assert.ErrorIs(t, outcomes[struct{ X int }{7}], ErrInternal)
	assert.ErrorIs(t, outcomes[2.5], myErr)
	assert.ErrorIs(t, outcomes[uint8(9)], ErrIo)
	assert.Len(t, outcomes, 7)
	st, err := b.Stats()
	require.NoError(t, err)
	assert.EqualValues(t, 7, st.Completed)
	assert.EqualValues(t, 5, st.Failed)
	assert.EqualValues(t, 1, st.CompletePanics)
	require.NoError(t, b.Destroy())
}

// Bad input and lifecycle rules from Go.
func TestBatchBadInput(t *testing.T) {
	l, err := LoopInit()
	require.NoError(t, err)
	step := func([]BatchItem, []BatchResult) error { return nil }
	done := func(uint64, any, error) {}
	_, err = BatchCreate(nil, &BatchOpts{})
	assert.ErrorIs(t, err, ErrInval)
	_, err = BatchCreate(l, nil)
	assert.ErrorIs(t, err, ErrInval)
	_, err = BatchCreate(l, &BatchOpts{Capacity: 1, MaxActive: 1, ResourceCapacity: 1, Complete: done})
	assert.ErrorIs(t, err, ErrInval)
	_, err = BatchCreate(l, &BatchOpts{Capacity: 0, MaxActive: 1, ResourceCapacity: 1, Step: step, Complete: done})
	assert.ErrorIs(t, err, ErrInval)
	_, err = BatchCreate(l, &BatchOpts{Capacity: 1, MaxActive: 2, ResourceCapacity: 1, Step: step, Complete: done})
	assert.ErrorIs(t, err, ErrRange)
	_, err = BatchCreate(l, &BatchOpts{Capacity: 1 << 21, MaxActive: 1, ResourceCapacity: 1, Step: step, Complete: done})
	assert.ErrorIs(t, err, ErrRange)
	_, err = BatchCreate(l, &BatchOpts{Capacity: -1, MaxActive: 1, ResourceCapacity: 1, Step: step, Complete: done})
	assert.ErrorIs(t, err, ErrInval)
	l2, err := LoopInit()
	require.NoError(t, err)
	other, err := ExecClassCreate(l2, 100, 0)
	require.NoError(t, err)
	_, err = BatchCreate(l, &BatchOpts{Capacity: 1, MaxActive: 1, ResourceCapacity: 1, Class: other, Step: step, Complete: done})
	assert.ErrorIs(t, err, ErrInval)
	require.NoError(t, l2.Fini())

	b, err := BatchCreate(l, &BatchOpts{Capacity: 1, MaxActive: 1, ResourceCapacity: 2, Step: step, Complete: done})
	require.NoError(t, err)
	_, err = b.Submit(nil, 3)
	assert.ErrorIs(t, err, ErrRange)
	h, err := b.Submit(nil, 2)
	require.NoError(t, err)
	_, err = b.Submit(nil, 1)
	assert.ErrorIs(t, err, ErrAgain) // full
	assert.ErrorIs(t, b.Cancel(0), ErrInval)
	assert.ErrorIs(t, b.Cancel(h+1), ErrNotfound)
	assert.ErrorIs(t, BatchClose(b, 0), ErrInval)
	assert.ErrorIs(t, b.Destroy(), ErrAgain) // the driver exists
	require.NoError(t, b.Cancel(h))
	require.NoError(t, b.Cancel(h)) // twice
	require.NoError(t, BatchClose(b, BatchCancel))
	_, err = b.Submit(nil, 1)
	assert.ErrorIs(t, err, ErrClosed) // closed: not ErrAgain, a retry cannot succeed
	assert.NotErrorIs(t, err, ErrAgain)
	require.NoError(t, l.Run())
	assert.ErrorIs(t, b.Cancel(h), ErrNotfound)
	require.NoError(t, b.Destroy())
	_, err = b.Submit(nil, 1)
	assert.ErrorIs(t, err, ErrInval)

	// setup-only: after the first run
	_, err = BatchCreate(l, &BatchOpts{Capacity: 1, MaxActive: 1, ResourceCapacity: 1, Step: step, Complete: done})
	assert.ErrorIs(t, err, ErrAgain)
	require.NoError(t, l.Fini())
	var nb *Batch
	assert.ErrorIs(t, BatchClose(nb, BatchDrain), ErrInval)
}

// Goroutines submit while the loop runs; blocked members are resumed and
// cancelled from goroutines; every accepted request completes exactly once.
func TestBatchGoroutines(t *testing.T) {
	l, err := LoopInit()
	require.NoError(t, err)
	defer l.Fini()

	type rq struct {
		id, length, rounds int
		blocked            bool
	}
	var mu sync.Mutex
	completed := map[uint64]int{}
	outcomes := map[int]error{}
	blockedCh := make(chan uint64, 1024)
	b, err := BatchCreate(l, &BatchOpts{
		Capacity: 16, MaxActive: 4, ResourceCapacity: 8,
		Step: func(items []BatchItem, res []BatchResult) error {
			for i, it := range items {
				r := it.Request.(*rq)
				r.rounds++
				switch {
				case r.id%7 == 3 && !r.blocked:
					r.blocked = true
					res[i].State = BatchBlocked
					blockedCh <- it.Handle
				case r.rounds >= r.length:
					res[i].State = BatchDone
				}
			}
			return nil
		},
		Complete: func(h uint64, req any, outcome error) {
			mu.Lock()
			completed[h]++
			outcomes[req.(*rq).id] = outcome
			mu.Unlock()
		},
	})
	require.NoError(t, err)

	runErr := make(chan error, 1)
	go func() { runErr <- l.Run() }()

	const producers, per = 4, 50
	var wg sync.WaitGroup
	var amu sync.Mutex
	accepted := map[uint64]bool{}
	cancelled := map[uint64]bool{}
	for p := 0; p < producers; p++ {
		wg.Add(1)
		go func(p int) {
			defer wg.Done()
			rng := rand.New(rand.NewSource(int64(p)))
			for i := 0; i < per; i++ {
				r := &rq{id: p*per + i, length: 1 + rng.Intn(6)}
				for {
					h, err := b.Submit(r, uint64(1+rng.Intn(3)))
					if err == nil {
						amu.Lock()
						accepted[h] = true
						amu.Unlock()
						if rng.Intn(5) == 0 {
							if b.Cancel(h) == nil {
								amu.Lock()
								cancelled[h] = true
								amu.Unlock()
							}
						}
						break
					}
					require.ErrorIs(t, err, ErrAgain)
					time.Sleep(50 * time.Microsecond)
				}
			}
		}(p)
	}
	stop := make(chan struct{})
	var rwg sync.WaitGroup
	rwg.Add(1)
	go func() { // resumer
		defer rwg.Done()
		for {
			select {
			case h := <-blockedCh:
				err := b.Resume(h)
				if err != nil {
					assert.ErrorIs(t, err, ErrNotfound) // cancelled meanwhile
				}
			case <-stop:
				return
			}
		}
	}()
	wg.Wait()
	require.NoError(t, BatchClose(b, BatchDrain))
	require.NoError(t, <-runErr)
	close(stop)
	rwg.Wait()

	st, err := b.Stats()
	require.NoError(t, err)
	assert.EqualValues(t, producers*per, st.Accepted)
	assert.EqualValues(t, producers*per, st.Completed)
	assert.Len(t, completed, producers*per)
	for h := range accepted {
		assert.Equal(t, 1, completed[h], "handle %d", h)
	}
	assert.EqualValues(t, len(cancelled), st.Aborted) // OK cancel => ABORTED
	require.NoError(t, b.Destroy())
}

// BenchmarkBatchGoStep: one iteration of a group whose Step and Complete
// are Go functions (the carrier-stack trampoline and the cgo callback),
// 1 and 32 members, empty step work.
func BenchmarkBatchGoStep(b *testing.B) {
	for _, members := range []int{1, 32} {
		b.Run(fmt.Sprintf("members=%d", members), func(b *testing.B) {
			l, err := LoopInit()
			require.NoError(b, err)
			defer l.Fini()
			left := b.N
			g, err := BatchCreate(l, &BatchOpts{
				Capacity: members, MaxActive: members, ResourceCapacity: uint64(members),
				Step: func(items []BatchItem, res []BatchResult) error {
					if left--; left <= 0 {
						for i := range res {
							res[i].State = BatchDone
						}
					}
					return nil
				},
				Complete: func(uint64, any, error) {},
			})
			require.NoError(b, err)
			for i := 0; i < members; i++ {
				_, err := g.Submit(i, 1)
				require.NoError(b, err)
			}
			require.NoError(b, BatchClose(g, BatchDrain))
			b.ResetTimer()
			require.NoError(b, l.Run())
			b.StopTimer()
			require.NoError(b, g.Destroy())
		})
	}
}

// 1000 goroutines call Do at once, a third with a ctx cancelled at a
// random moment (before the call, while waiting, racing DONE), plus
// SubmitMT/CancelMT producers: each Do returns exactly one of its result
// or ctx.Err(), Complete runs once per SubmitMT handle, the counters add
// up.
func TestBatchDoAndSubmitMT(t *testing.T) {
	l, err := LoopInit()
	require.NoError(t, err)
	defer l.Fini()

	type rq struct{ id, length, rounds int }
	var mu sync.Mutex
	mtDone := map[uint64]int{}
	b, err := BatchCreate(l, &BatchOpts{
		Capacity: 64, MaxActive: 16, ResourceCapacity: 16,
		Step: func(items []BatchItem, res []BatchResult) error {
			for i, it := range items {
				r := it.Request.(*rq)
				r.rounds++
				if r.rounds >= r.length {
					res[i].State = BatchDone
				}
			}
			return nil
		},
		Complete: func(h uint64, req any, outcome error) {
			mu.Lock()
			mtDone[h]++
			mu.Unlock()
			if req.(*rq).id >= 0 {
				t.Errorf("a Do request reached Complete")
			}
		},
	})
	require.NoError(t, err)
	runErr := make(chan error, 1)
	go func() { runErr <- l.Run() }()

	const doers, producers, per = 1000, 4, 200
	var wg sync.WaitGroup
	var ok, cancelled atomic.Int64
	for g := 0; g < doers; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			rng := rand.New(rand.NewSource(int64(g)))
			r := &rq{id: g, length: 1 + rng.Intn(8)}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			switch rng.Intn(3) {
			case 0:
				if rng.Intn(10) == 0 {
					cancel() // before the call
				} else {
					time.AfterFunc(time.Duration(rng.Intn(300))*time.Microsecond, cancel)
				}
			}
			res, err := b.Do(ctx, r)
			switch {
			case err == nil:
				assert.Same(t, r, res)
				assert.GreaterOrEqual(t, r.rounds, r.length)
				ok.Add(1)
			case errors.Is(err, context.Canceled):
				assert.Nil(t, res)
				assert.Error(t, ctx.Err())
				cancelled.Add(1)
			default:
				t.Errorf("Do: %v", err)
			}
		}(g)
	}
	var handles sync.Map
	for p := 0; p < producers; p++ {
		wg.Add(1)
		go func(p int) {
			defer wg.Done()
			rng := rand.New(rand.NewSource(int64(1000 + p)))
			for i := 0; i < per; i++ {
				r := &rq{id: -1, length: 1 + rng.Intn(4)}
				h, err := b.SubmitMT(r, 1)
				for errors.Is(err, ErrAgain) {
					time.Sleep(20 * time.Microsecond)
					h, err = b.SubmitMT(r, 1)
				}
				require.NoError(t, err)
				handles.Store(h, true)
				if rng.Intn(3) == 0 {
					_ = b.CancelMT(h) // maybe twice, maybe after DONE
					if rng.Intn(2) == 0 {
						_ = b.CancelMT(h)
					}
				}
			}
		}(p)
	}
	wg.Wait()
	require.NoError(t, BatchClose(b, BatchDrain))
	require.NoError(t, <-runErr)

	assert.Equal(t, int64(doers), ok.Load()+cancelled.Load())
	n := 0
	handles.Range(func(k, _ any) bool {
		n++
		mu.Lock()
		assert.Equal(t, 1, mtDone[k.(uint64)], "handle %x", k)
		mu.Unlock()
		return true
	})
	assert.Equal(t, producers*per, n)
	assert.Len(t, mtDone, producers*per)
	st, err := b.Stats()
	require.NoError(t, err)
	assert.Equal(t, st.Accepted, st.Completed)
	t.Logf("Do: %d ok, %d cancelled; %d SubmitMT", ok.Load(), cancelled.Load(), n)
	_, err = b.SubmitMT(&rq{}, 1)
	assert.ErrorIs(t, err, ErrClosed) // closed
	_, err = b.Do(context.Background(), &rq{})
	assert.ErrorIs(t, err, ErrClosed)
	require.NoError(t, b.Destroy())
	_, err = b.SubmitMT(&rq{}, 1)
	assert.ErrorIs(t, err, ErrInval)
	assert.ErrorIs(t, b.CancelMT(1), ErrInval)
	assert.ErrorIs(t, b.ResumeMT(1), ErrInval)
}
