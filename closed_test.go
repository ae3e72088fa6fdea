//go:build cgo

package xtc

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Every handle, once closed, answers an error matching ErrClosed and not
// ErrAgain (issue 29 item 5: the same meaning for every object).
func TestClosedMeansErrClosedEverywhere(t *testing.T) {
	closed := func(t *testing.T, what string, err error) {
		t.Helper()
		assert.ErrorIs(t, err, ErrClosed, what)
		assert.NotErrorIs(t, err, ErrAgain, what)
	}
	ctx := context.Background()

	// Exec and what it owns
	e, err := NewExec(1)
	require.NoError(t, err)
	cls, err := e.NewClass(100, 0)
	require.NoError(t, err)
	b, err := e.NewBatch(BatchOpts{Capacity: 2, MaxActive: 1, ResourceCapacity: 1, Class: cls,
		Step: countdownStep})
	require.NoError(t, err)
	m, err := e.NewMailbox(0, 4)
	require.NoError(t, err)
	_, err = e.Start()
	require.NoError(t, err)
	require.NoError(t, m.Close())
	_, err = m.Recv(ctx)
	closed(t, "Mailbox.Recv after Close", err)
	closed(t, "Mailbox.Close twice", m.Close())
	require.NoError(t, e.Close())
	closed(t, "Exec.Close twice", e.Close())
	_, err = e.Start()
	closed(t, "Exec.Start", err)
	_, err = e.GoInt(ctx, nil, 0)
	closed(t, "Exec.GoInt", err)
	_, err = e.NewClass(100, 0)
	closed(t, "Exec.NewClass", err)
	_, err = e.NewMailbox(0, 4)
	closed(t, "Exec.NewMailbox", err)
	_, err = e.Stats()
	closed(t, "Exec.Stats", err)
	closed(t, "Exec.Submit", e.Submit(0, func() {}))
	n := 1
	_, err = b.Do(ctx, &n)
	closed(t, "Batch.Do after the executor closed", err)
	_, err = b.SubmitMT(&n, 1)
	closed(t, "Batch.SubmitMT", err)
	closed(t, "Batch.Cancel", b.Cancel(1))
	closed(t, "Batch.Shutdown", b.Shutdown(ctx))
	_, err = b.Stats()
	closed(t, "Batch.Stats", err)

	// a stand-alone loop's group, closed but not destroyed: requests are
	// refused as closed
	l, err := LoopInit()
	require.NoError(t, err)
	lb, err := BatchCreate(l, &BatchOpts{Capacity: 2, MaxActive: 1, ResourceCapacity: 1, Step: countdownStep,
		Complete: func(uint64, any, error) {}})
	require.NoError(t, err)
	require.NoError(t, BatchClose(lb, BatchDrain))
	_, err = lb.Submit(&n, 1)
	closed(t, "Batch.Submit after BatchClose", err)
	_, err = lb.Do(ctx, &n)
	closed(t, "Batch.Do after BatchClose", err)
	require.NoError(t, lb.Close()) // drives the loop until the driver ended
	closed(t, "Batch.Close twice", lb.Close())
	require.NoError(t, l.Fini())
	closed(t, "Loop.Fini twice", l.Fini())
	closed(t, "Loop.Run", l.Run())
	closed(t, "Loop.Stop", l.Stop())
	_, err = TimerSet(l, time.Millisecond, func() {})
	closed(t, "TimerSet", err)
	_, err = ExecClassCreate(l, 100, 0)
	closed(t, "ExecClassCreate", err)

	q, err := NewQuantum(QuantumOpts{})
	require.NoError(t, err)
	q.Close()
	closed(t, "Quantum.Record", q.Record(time.Millisecond))
	_, err = q.Update()
	closed(t, "Quantum.Update", err)
}
