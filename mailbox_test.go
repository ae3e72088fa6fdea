//go:build cgo

package xtc

import (
	"context"
	"encoding/binary"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/xtc-go/xtc/internal/ctest"
)

// C procs send to a Go mailbox; Go receives in order, monitors and links
// the senders and gets their DOWN and EXIT messages.
func TestMailboxFromC(t *testing.T) {
	e := startedExec(t, 2, 0)
	defer e.Close()
	_, err := e.Start()
	require.NoError(t, err)
	mb, err := e.NewMailbox(1, 0)
	require.NoError(t, err)
	p := mb.Pid()
	const n = 3000 // more than the Go-side window: flow control
	job := ctest.NewSendJob(p.LoopID, p.LocalID, p.Gen, n, 3)
	defer job.Free()
	sender, err := ProcSpawn(e.Loop(0), ctest.SendProc(), job.Ptr(), nil)
	require.NoError(t, err)
	ref, err := mb.Monitor(sender)
	require.NoError(t, err)
	require.NoError(t, mb.Link(sender))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for i := 0; i < n; i++ {
		b, err := mb.Recv(ctx)
		require.NoError(t, err)
		require.Len(t, b, 8)
		require.EqualValues(t, i, binary.NativeEndian.Uint64(b), "in order")
	}
	// release the sender: it exits with reason 3
	require.NoError(t, Send(sender, []byte("go")))
	var gotDown, gotExit bool
	for !(gotDown && gotExit) {
		b, err := mb.Recv(ctx)
		require.NoError(t, err)
		if d, err := DownDecode(b); err == nil {
			assert.Equal(t, sender, d.Pid)
			assert.Equal(t, ref, d.Ref)
			assert.Equal(t, 3, d.Reason)
			gotDown = true
		} else if pid, reason, err := ExitDecode(b); err == nil {
			assert.Equal(t, sender, pid)
			assert.Equal(t, 3, reason)
			gotExit = true
		} else {
			t.Fatalf("unexpected message %q", b)
		}
	}
	// a monitor of a dead proc answers DOWN at once; demonitor works
	ref2, err := mb.Monitor(sender)
	require.NoError(t, err)
	b, err := mb.Recv(ctx)
	require.NoError(t, err)
	d, err := DownDecode(b)
	require.NoError(t, err)
	assert.Equal(t, ref2, d.Ref)
	assert.NoError(t, mb.Unlink(sender))

	// Go to Go through the pid, and a ctx that ends
	require.NoError(t, Send(p, []byte("hello")))
	b, err = mb.Recv(ctx)
	require.NoError(t, err)
	assert.Equal(t, "hello", string(b))
	sctx, scancel := context.WithTimeout(ctx, 5*time.Millisecond)
	defer scancel()
	_, err = mb.Recv(sctx)
	assert.ErrorIs(t, err, context.DeadlineExceeded)

	require.NoError(t, mb.Close())
	_, err = mb.Recv(ctx)
	assert.ErrorIs(t, err, ErrClosed)
	assert.ErrorIs(t, mb.Close(), ErrClosed)
	_, err = mb.Monitor(sender)
	assert.ErrorIs(t, err, ErrClosed)
	assert.Error(t, Send(p, []byte("late"))) // the pid is dead
}

func TestMailboxBadInput(t *testing.T) {
	var ne *Exec
	_, err := ne.NewMailbox(0, 0)
	assert.ErrorIs(t, err, ErrClosed)
	e := startedExec(t, 1, 0)
	_, err = e.NewMailbox(3, 0)
	assert.ErrorIs(t, err, ErrInval)
	_, err = e.NewMailbox(0, -1)
	assert.ErrorIs(t, err, ErrInval)
	mb, err := e.NewMailbox(0, 0)
	require.NoError(t, err)
	// Fini drops the relay: the mailbox reports closed
	require.NoError(t, e.Close())
	<-mb.Done()
	_, err = mb.Recv(context.Background())
	assert.ErrorIs(t, err, ErrClosed)
	_, err = e.NewMailbox(0, 0)
	assert.ErrorIs(t, err, ErrClosed)
}

// A small C mailbox and a slow reader: the sender sees ErrAgain and
// retries, nothing is lost or reordered.
func TestMailboxFlowControl(t *testing.T) {
	e := startedExec(t, 1, 0)
	defer e.Close()
	_, err := e.Start()
	require.NoError(t, err)
	mb, err := e.NewMailbox(0, 16)
	require.NoError(t, err)
	p := mb.Pid()
	const n = 2000
	job := ctest.NewSendJob(p.LoopID, p.LocalID, p.Gen, n, 0)
	defer job.Free()
	_, err = ProcSpawn(e.Loop(0), ctest.SendProc(), job.Ptr(), nil)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var again int64
	for i := 0; i < n; i++ {
		if i%500 == 0 {
			// let it fill up: wait until the sender is refused once more
			// (at most i + 256 + 16 < n sent, so it must be)
			require.Eventually(t, func() bool { return job.Again() > again },
				eventBound, 100*time.Microsecond, "the sender was never refused")
			again = job.Again()
		}
		b, err := mb.Recv(ctx)
		require.NoError(t, err)
		require.EqualValues(t, i, binary.NativeEndian.Uint64(b))
	}
	st, err := ProcMailboxStats(p)
	require.NoError(t, err)
	assert.LessOrEqual(t, st.Peak, 16)
	assert.Positive(t, job.Again(), "the sender saw ErrAgain")
}

// A zero Mailbox (not made by NewMailbox) has nothing to receive: Recv
// waits for ctx and returns its error, whether or not the process's
// completion queue exists yet.
func TestMailboxZeroRecv(t *testing.T) {
	var m Mailbox
	ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
	defer cancel()
	_, err := m.Recv(ctx)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
}
