//go:build cgo

package xtc_test

// libxtc compatibility (issue 28) as the Go API sees it.

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/xtc-go/xtc"
)

func TestDownIsNoproc(t *testing.T) {
	assert.True(t, xtc.DownIsNoproc(xtc.DownReasonNoproc))
	assert.False(t, xtc.DownIsNoproc(0))
	assert.False(t, xtc.DownIsNoproc(11))
	assert.False(t, xtc.DownIsNoproc(int(xtc.ErrNotfound)))
}

func TestStackReclaimKnob(t *testing.T) {
	defer xtc.StackReclaimDisable()
	assert.ErrorIs(t, xtc.StackReclaimEnable(-1), xtc.ErrInval)
	assert.ErrorIs(t, xtc.StackReclaimEnable(1<<40), xtc.ErrRange)
	require.NoError(t, xtc.StackReclaimEnable(0))
	assert.True(t, xtc.StackReclaimEnabled())
	n := xtc.StackReclaimCount()
	xtc.StackReclaimDisable()
	assert.False(t, xtc.StackReclaimEnabled())
	assert.GreaterOrEqual(t, xtc.StackReclaimCount(), n)
}

// xtc_strerror's texts are libxtc's; the longer reading is the Reason.
func TestStrerrorLibxtcTexts(t *testing.T) {
	for code, text := range map[xtc.Errno]string{
		0:               "ok",
		xtc.ErrInval:    "invalid argument",
		xtc.ErrNomem:    "out of memory",
		xtc.ErrNosys:    "not implemented on this platform",
		xtc.ErrRange:    "numeric out of range",
		xtc.ErrAgain:    "resource temporarily unavailable",
		xtc.ErrInternal: "internal invariant violation",
		xtc.ErrResource: "resource cap reached",
	} {
		assert.Equal(t, text, xtc.Strerror(code), code.Name())
	}
}
