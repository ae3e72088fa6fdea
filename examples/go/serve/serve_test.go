package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

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

// A client that gives up cancels its tile: the handler's ctx is done, Do
// cancels the member (it leaves the group ABORTED, exactly once), the
// handler answers nothing, and the server keeps serving.
func TestServeClientCancel(t *testing.T) {
	for _, static := range []bool{false, true} {
		t.Run(modeName(static), func(t *testing.T) {
			s, err := newServer(static, "127.0.0.1:0")
			if errors.Is(err, xtc.ErrNosys) {
				t.Skip("batching not built")
			}
			require.NoError(t, err)
			ctx, cancel := context.WithCancel(context.Background())
			req, err := http.NewRequestWithContext(ctx, http.MethodGet,
				"http://"+s.addr+"/tile?id=100000&rounds=4096", nil)
			require.NoError(t, err)
			got := make(chan error, 1)
			go func() {
				resp, err := http.DefaultClient.Do(req)
				if err == nil {
					resp.Body.Close()
				}
				got <- err
			}()
			// cancel once the deep tile is in the group (bounded wait)
			require.Eventually(t, func() bool {
				st, err := s.b.Stats()
				return err == nil && st.Active+st.Waiting > 0
			}, 30*time.Second, time.Millisecond)
			cancel()
			assert.Error(t, <-got)
			require.Eventually(t, func() bool { return s.failed.Load() == 1 },
				30*time.Second, time.Millisecond)
			r, err := load(s.addr, 20, 4) // still serving
			require.NoError(t, err)
			assert.Len(t, r.answers, 20)
			st, err := s.b.Stats()
			require.NoError(t, err)
			require.NoError(t, s.shutdown())
			assert.Equal(t, uint64(1), st.Aborted)
			assert.Equal(t, st.Accepted, st.Completed)
			s.mu.Lock()
			assert.Zero(t, s.served[100000]) // the cancelled one got no answer
			s.mu.Unlock()
		})
	}
}
