//go:build cgo

package xtc_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/xtc-go/xtc"
	"github.com/xtc-go/xtc/internal/ctest"
)

// ProcOpts.StackSize: a small stack runs a proc; the bounds are refused
// with the documented codes (xtc_proc(3)).
func TestProcStackSize(t *testing.T) {
	l := newLoop(t)
	small := ctest.NewCell(3)
	defer small.Free()
	big := ctest.NewCell(3)
	defer big.Free()
	size := 8 << 10 // a small stack (no guard page); 1 KiB fits this body
	// too, but not under -asan, whose frames are larger
	_, err := xtc.ProcSpawn(l, ctest.YieldN, small.Ptr(), &xtc.ProcOpts{Name: "small", StackSize: size})
	require.NoError(t, err)
	_, err = xtc.ProcSpawn(l, ctest.YieldN, big.Ptr(), &xtc.ProcOpts{StackSize: 256 << 10})
	require.NoError(t, err)
	require.NoError(t, runWithin(t, l, 10*time.Second))
	assert.Equal(t, int64(3), small.Sum())
	assert.Equal(t, int64(3), big.Sum())

	for _, c := range []struct {
		size int
		code xtc.Errno
	}{{-1, xtc.ErrInval}, {512, xtc.ErrInval}, {2 << 30, xtc.ErrRange}} {
		_, err := xtc.ProcSpawn(l, ctest.Noop, nil, &xtc.ProcOpts{StackSize: c.size})
		assert.ErrorIs(t, err, c.code, "StackSize %d", c.size)
		var xe *xtc.Error
		assert.True(t, errors.As(err, &xe))
		if c.size == 512 {
			assert.Contains(t, xe.Reason, "1 KiB minimum")
		}
	}
}
