//go:build cgo

package xtc

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/xtc-go/xtc/internal/ctest"
)

// A caller granted the spin polls its record for callSpin once the
// carrier has started the call (the record's started word), not for the
// whole callSpinWake, which covers a carrier that has yet to pick the
// call up: a call that runs long comes back through the completion
// stack, and its caller parks instead of burning a CPU.
func TestFrontDoorSpinStarted(t *testing.T) {
	defer func(d time.Duration) { callSpinWake = d }(callSpinWake)
	callSpinWake = time.Hour // only the started rule can end this poll
	e := startedExec(t, 1, 0)
	_, err := e.Start()
	require.NoError(t, err)
	defer func() { require.NoError(t, e.Close()) }()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err = e.GoInt(ctx, ctest.Ident(), 1) // the table
	require.NoError(t, err)
	g := e.gc.Load()
	_, ring0, spun0, _ := e.callStats()

	stop := ctest.NewFlag()
	t.Cleanup(stop.Free) // after the Close above: nothing reads it then
	defer stop.Set()     // a failed case still ends the call
	done := make(chan error, 1)
	go func() {
		_, err := e.Go(ctx, ctest.Forever(), stop.Ptr()) // until the flag
		done <- err
	}()
	// the caller stops polling once the call started: its index will come
	// through the completion stack (awaited), well before the bound
	deadline := time.Now().Add(20 * time.Second)
	for g.awaited.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	require.EqualValues(t, 1, g.awaited.Load(), "the caller still polls a started call")
	stop.Set()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-ctx.Done():
		t.Fatal("the call did not come back")
	}
	_, ring, spun, _ := e.callStats()
	require.Equal(t, ring0+1, ring, "settled through the completion stack")
	require.Equal(t, spun0, spun)
}
