//go:build cgo

package xtc

// What the front door's slot tables share (gocall.go's call table,
// batch.go's hand-in table): the free list of their indices and the
// caller's bounded poll of its slot.

import (
	"runtime"
	"sync"
	"time"
)

// freeSlots is a slot table's free list: a LIFO stack of indices, so the
// slots in use stay few and hot. When it is empty, pop calls grow with
// the lock held: grow makes the table's next chunk and hands its indices
// over (pushChunk), or returns the error that the table is at its limit.
type freeSlots struct {
	mu   sync.Mutex
	free []uint32
	made int // indices handed over by pushChunk
}

func (f *freeSlots) pop(grow func() error) (uint32, error) {
	f.mu.Lock()
	if len(f.free) == 0 {
		if err := grow(); err != nil {
			f.mu.Unlock()
			return 0, err
		}
	}
	n := len(f.free)
	i := f.free[n-1]
	f.free = f.free[:n-1]
	f.mu.Unlock()
	return i, nil
}

func (f *freeSlots) push(i uint32) {
	f.mu.Lock()
	f.free = append(f.free, i)
	f.mu.Unlock()
}

// pushChunk hands over the n indices from f.made on, lowest popped first
// (lock held: from grow, or before the table is shared).
func (f *freeSlots) pushChunk(n int) {
	for j := n - 1; j >= 0; j-- {
		f.free = append(f.free, uint32(f.made+j))
	}
	f.made += n
}

// count is how many indices were ever made.
func (f *freeSlots) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.made
}

// pollFor polls done() for up to d and reports whether it turned
// true. It holds its P (runtime.Gosched wakes an idle P's thread each
// time: a futex storm on this guest), except for one yield every
// spinYield so that a goroutine queued behind it is not held up for the
// whole spin; the clock is read every 256 polls.
func pollFor(d time.Duration, done func() bool) bool {
	return pollWhile(func(el time.Duration) bool { return el <= d }, done)
}

// pollWhile is pollFor with a bound decided at each clock read: it gives
// up once more(el) is false, el being the time since the poll began.
func pollWhile(more func(el time.Duration) bool, done func() bool) bool {
	t0 := time.Now()
	last := time.Duration(0)
	for {
		for j := 0; j < 256; j++ {
			if done() {
				return true
			}
		}
		el := time.Since(t0)
		if !more(el) {
			return false
		}
		if el-last > spinYield {
			last = el
			runtime.Gosched()
		}
	}
}
