//go:build cgo

package xtc_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/xtc-go/xtc"
	"github.com/xtc-go/xtc/internal/cfuture"
)

// The names kept for one release do what the new ones do, errors included.
func TestDeprecatedNamesCallTheNewOnes(t *testing.T) {
	_, err := xtc.Submit(nil, cfuture.AddOne, nil) //nolint:staticcheck // the alias itself
	assert.ErrorIs(t, err, xtc.ErrInval)
	_, err = xtc.SubmitWait(context.Background(), nil, cfuture.AddOne, nil) //nolint:staticcheck
	assert.ErrorIs(t, err, xtc.ErrInval)
	_, err = xtc.SchedGetStats(nil) //nolint:staticcheck
	assert.ErrorIs(t, err, xtc.ErrInval)

	e, err := xtc.NewExec(1)
	require.NoError(t, err)
	defer e.Close()
	_, err = e.Start()
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	f, err := xtc.Submit(e.Loop(0), cfuture.AddOne, cfuture.Arg(1)) //nolint:staticcheck
	require.NoError(t, err)
	v, err := f.Wait(ctx)
	require.NoError(t, err)
	assert.EqualValues(t, 2, v)
	v, err = xtc.SubmitWait(ctx, e.Loop(0), cfuture.AddOne, cfuture.Arg(2)) //nolint:staticcheck
	require.NoError(t, err)
	assert.EqualValues(t, 3, v)
	_, err = xtc.DispatchWait(ctx, e.Loop(0), nil, nil)
	assert.ErrorIs(t, err, xtc.ErrInval)

	l, err := xtc.LoopInit()
	require.NoError(t, err)
	a, err := xtc.SchedGetStats(l) //nolint:staticcheck
	require.NoError(t, err)
	b, err := l.SchedStats()
	require.NoError(t, err)
	assert.Equal(t, a, b)
	require.NoError(t, l.Fini())
	_, err = l.SchedStats()
	assert.ErrorIs(t, err, xtc.ErrInval)
}
