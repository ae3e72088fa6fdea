//go:build cgo

package xtc

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/xtc-go/xtc/internal/ctest"
)

// The call table grows a chunk at a time as calls overlap, with no
// refusal below the hard limit (callCapacity, lowered here to two chunks)
// and ErrAgain past it; every call of every chunk settles once, and the
// table keeps its chunks (no shrink, no move) for later calls.
func TestFrontDoorTableGrows(t *testing.T) {
	defer func(c int) { callCapacity = c }(callCapacity)
	callCapacity = 2 * callChunk
	e, err := ExecInit(1)
	require.NoError(t, err)
	e.SetServiceMode(true)
	defer e.Close()
	// not started: every call stays in flight
	rs := make([]*CallResult, 0, callCapacity)
	for i := 0; i < callCapacity; i++ {
		r, err := e.GoAsync(ctest.Ident(), nil)
		require.NoError(t, err, "call %d", i)
		rs = append(rs, r)
	}
	g := e.gc.Load()
	assert.Equal(t, 2*callChunk, g.free.count(), "two chunks made")
	_, err = e.GoAsync(ctest.Ident(), nil)
	assert.ErrorIs(t, err, ErrAgain, "past the hard limit")
	_, err = e.Start()
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for i, r := range rs {
		v, err := r.Wait(ctx)
		require.NoError(t, err, "call %d", i)
		assert.EqualValues(t, 0, v)
	}
	v, err := e.GoInt(ctx, ctest.Ident(), 5)
	require.NoError(t, err)
	assert.EqualValues(t, 5, v)
	g.free.mu.Lock()
	assert.Equal(t, 2*callChunk, g.free.made, "two chunks made")
	assert.Equal(t, 2*callChunk, len(g.free.free)+int(g.live.Load()))
	g.free.mu.Unlock()
}
