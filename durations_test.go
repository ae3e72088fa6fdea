//go:build cgo

package xtc

import (
	"context"
	"math"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/xtc-go/xtc/examples/go/kernels"
)

// maxDuration is the longest time.Duration: "as good as never" (issue 27).
const maxDuration = time.Duration(math.MaxInt64)

// TestDurationsForever passes math.MaxInt64 to every duration argument
// of the Go API: each call behaves as with a long finite value (the wait
// ends by its event, the slice never cuts). Launch and SubmitWithin once
// returned ErrAgain at once (the C deadline now + timeout overflowed to
// the past); the ASan+UBSan build of the C core (go test -asan) fails on
// a signed overflow on these paths.
func TestDurationsForever(t *testing.T) {
	ctx := context.Background()

	// a full ring: SubmitWithin waits for room however long it takes
	e, err := NewExec(1)
	require.NoError(t, err)
	t.Cleanup(func() { _ = e.Close() })
	require.NoError(t, e.SetSpin(maxDuration))
	require.NoError(t, e.SetStallBudget(maxDuration))
	var ran atomic.Int64
	n := 0
	for e.Submit(0, func() { ran.Add(1) }) == nil {
		n++
	}
	require.Greater(t, n, 0)
	// a class with no latency bound to speak of (setup-only: before Start)
	c, err := ExecClassCreate(e.Loop(0), 100, maxDuration)
	require.NoError(t, err)
	assert.Equal(t, maxDuration, c.Latency())
	// a slice that never ends (setup-only too)
	require.NoError(t, e.SetPreempt(maxDuration))
	_, err = e.Start()
	require.NoError(t, err)
	require.NoError(t, e.SubmitWithin(0, func() { ran.Add(1) }, maxDuration))
	require.Eventually(t, func() bool { return ran.Load() == int64(n+1) },
		time.Minute, time.Millisecond)

	// a launch whose deadline never comes, a deadline function whose
	// slice never ends
	if PreemptInvoluntarySupported() {
		v, err := Launch(ctx, e, kernels.Sum(), kernels.Arg(1000), maxDuration, nil)
		require.NoError(t, err)
		assert.Equal(t, int64(1000*1001/2), v)
		f, err := e.LaunchFn(ctx, kernels.Sum(), kernels.Arg(1000), maxDuration)
		require.NoError(t, err)
		require.NoError(t, f.Wait(ctx))
		r, err := f.Result()
		require.NoError(t, err)
		assert.Equal(t, int64(1000*1001/2), r)
		require.NoError(t, f.Close())
	}

	// a plain thread armed at MaxInt64 never ticks
	require.NoError(t, PreemptArm(maxDuration))
	require.NoError(t, PreemptDisarm())
}
