//go:build cgo

package xtc

// Tests wait for events, never for a time: "the kernel runs now" is the
// growth of ctest.Starts (every spinning kernel of internal/ctest counts
// its entry), waited for with a generous bound, so that a machine that
// does not run the carrier for a while delays a test instead of failing
// it.

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/xtc-go/xtc/internal/ctest"
)

// eventBound bounds every wait for an event: generous, it only ends a
// test whose event never comes.
const eventBound = 30 * time.Second

// waitStarted waits until a kernel submitted after ctest.Starts() read
// before has begun to run.
func waitStarted(t testing.TB, before int64) {
	t.Helper()
	require.Eventually(t, func() bool { return ctest.Starts() > before },
		eventBound, 100*time.Microsecond, "the kernel never started")
}

// eventCtx ends, with context.DeadlineExceeded, when expire is called.
type eventCtx struct {
	context.Context
	done chan struct{}
	once sync.Once
}

func (c *eventCtx) Done() <-chan struct{} { return c.done }

func (c *eventCtx) Err() error {
	select {
	case <-c.done:
		return context.DeadlineExceeded
	default:
		return nil
	}
}

func (c *eventCtx) expire() { c.once.Do(func() { close(c.done) }) }

// timeoutAfterStart returns a context that ends with
// context.DeadlineExceeded d after a kernel submitted after reading
// ctest.Starts() == before has started: the deadline counts from the
// kernel's start, not from the submission (on a loaded machine the
// carrier may not run it for longer than d).
func timeoutAfterStart(t testing.TB, before int64, d time.Duration) context.Context {
	c := &eventCtx{Context: context.Background(), done: make(chan struct{})}
	go func() {
		end := time.Now().Add(eventBound)
		for ctest.Starts() <= before && time.Now().Before(end) {
			time.Sleep(100 * time.Microsecond)
		}
		if ctest.Starts() <= before {
			t.Errorf("the kernel never started")
		}
		time.Sleep(d)
		c.expire()
	}()
	return c
}
