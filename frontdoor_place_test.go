//go:build cgo

package xtc

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/xtc-go/xtc/internal/ctest"
)

// A call that names no loop goes to the loop with the fewest calls in
// flight, the previous call's loop on a tie (goCalls.pick): one
// goroutine's sequential calls stay on one carrier, and a call made
// while a long one holds a loop goes to another loop, in the class of
// the loop it lands on.
func TestFrontDoorPlacement(t *testing.T) {
	e := startedExec(t, 2, 0)
	cls, err := e.NewClass(3, 0) // classes are made before Start
	require.NoError(t, err)
	_, err = e.Start()
	require.NoError(t, err)
	defer func() { require.NoError(t, e.Close()) }()
	// a wait that fails the test instead of hanging it (a call placed
	// behind the never-yielding long call below would never run)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	wait := func(r *CallResult) int64 {
		t.Helper()
		v, err := r.Wait(ctx)
		require.NoError(t, err)
		return v
	}

	first, err := e.GoAsync(ctest.ShortFn(), nil)
	require.NoError(t, err)
	require.EqualValues(t, 7, wait(first))
	for i := 0; i < 50; i++ {
		r, err := e.GoAsync(ctest.ShortFn(), nil)
		require.NoError(t, err)
		require.EqualValues(t, 7, wait(r))
		require.Equal(t, first.loop, r.loop, "call %d: a sequential call left the idle loop it had", i)
	}

	// a long call holds one loop (each in turn: the Go side reads every
	// loop's count at its own offset): the calls made meanwhile go to the
	// other, in the class's piece of the loop they land on
	for busy := 0; busy < 2; busy++ {
		stop := ctest.NewFlag()
		t.Cleanup(stop.Free) // after the Close below: nothing reads it then
		defer stop.Set()     // a failed case still ends the long call
		long, err := e.GoAsync(ctest.CoopSpinFn(), stop.Ptr(), WithLoop(busy))
		require.NoError(t, err)
		runs0 := cls.OnLoop(1 - busy).Runs()
		for i := 0; i < 20; i++ {
			r, err := e.GoAsync(ctest.ShortFn(), nil, WithClass(cls))
			require.NoError(t, err)
			require.EqualValues(t, 7, wait(r))
			require.Equal(t, 1-busy, r.loop, "call %d queued behind the long call on loop %d", i, busy)
		}
		require.Greater(t, cls.OnLoop(1-busy).Runs(), runs0)
		stop.Set()
		require.Greater(t, wait(long), int64(0))
	}
	busy := 1

	// a named loop is still obeyed, busy or not
	r, err := e.GoAsync(ctest.ShortFn(), nil, WithLoop(busy))
	require.NoError(t, err)
	require.EqualValues(t, 7, wait(r))
	require.Equal(t, busy, r.loop)
	_, err = e.GoAsync(ctest.ShortFn(), nil, WithLoop(2))
	require.ErrorIs(t, err, ErrInval)
}
