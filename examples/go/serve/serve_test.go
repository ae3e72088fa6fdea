package main

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/xtc-go/xtc"
)

// Both modes serve a short bounded run: every request answered exactly
// once, with the C reference's iteration sum (no timing assertions).
func TestServeBothModes(t *testing.T) {
	const n, conc = 300, 24
	for _, static := range []bool{false, true} {
		t.Run(modeName(static), func(t *testing.T) {
			r, s, err := runMode(static, n, conc)
			if errors.Is(err, xtc.ErrNosys) {
				t.Skip("batching not built")
			}
			require.NoError(t, err)
			assert.Len(t, s.served, n)
			for id := int64(0); id < n; id++ {
				assert.Equal(t, 1, s.served[id], "id %d", id)
				rounds := roundsOf(id)
				want := fmt.Sprintf("%d %d %d", id, rounds, reference(id, rounds))
				assert.Equal(t, want, r.answers[id])
			}
			assert.Zero(t, s.failed.Load())
			assert.GreaterOrEqual(t, r.rounds, r.iters)
			t.Logf("%s: %.0f req/s, p50 %v, p99 %v, %d steps (%.1f members/step)",
				r.mode, r.rps(), r.p50, r.p99, r.iters,
				float64(r.rounds)/float64(max(r.iters, 1)))
		})
	}
}

// The load client refuses anything but loopback.
func TestServeLoopbackOnly(t *testing.T) {
	_, err := load("10.0.0.1:80", 1, 1)
	assert.Error(t, err)
}
