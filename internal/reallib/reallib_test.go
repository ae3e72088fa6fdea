//go:build cgo && xtc_reallibs

package reallib_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/xtc-go/xtc"
	"github.com/xtc-go/xtc/internal/reallib"
)

func newExec(t *testing.T) *xtc.Exec {
	t.Helper()
	if !xtc.PreemptInvoluntarySupported() {
		t.Skip("no involuntary preemption here")
	}
	e, err := xtc.ExecInit(2)
	require.NoError(t, err)
	require.NoError(t, e.SetPreempt(100*time.Microsecond))
	e.SetServiceMode(true)
	xtc.PreemptSetInvoluntary(true)
	return e
}

// bounded fails the test instead of hanging when fn does not return.
func bounded(t *testing.T, d time.Duration, what string, fn func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { fn(); close(done) }()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatalf("%s did not return within %v (deadlock under preemption)", what, d)
	}
}

// One Exec.Go call per request, from many goroutines at once, with
// involuntary preemption at 100 us: every result equals the direct call's.
func TestSqliteRequestsUnderPreemption(t *testing.T) {
	e := newExec(t)
	defer e.Fini()
	defer xtc.PreemptSetInvoluntary(false)
	run, err := e.Start()
	require.NoError(t, err)
	const n = 120
	got := make([]int64, n)
	errs := make([]error, n)
	before, _ := xtc.PreemptStatsGlobal()
	bounded(t, 60*time.Second, "the requests", func() {
		var wg sync.WaitGroup
		for i := 0; i < n; i++ {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				got[i], errs[i] = e.GoInt(context.Background(), reallib.Request(), int64(i))
			}(i)
		}
		wg.Wait()
	})
	after, _ := xtc.PreemptStatsGlobal()
	t.Logf("%d preemptions, %d deferred", after.Preemptions-before.Preemptions,
		after.Deferrals-before.Deferrals)
	for i := 0; i < n; i++ {
		require.NoError(t, errs[i])
		assert.Equal(t, reallib.Direct(int64(i)), got[i], "request %d", i)
	}
	require.NoError(t, e.Stop())
	require.NoError(t, run.Wait(context.Background()))
}

// A ctx deadline kills calls inside sqlite work; afterwards a plain cgo
// call into sqlite from another goroutine returns (a killed fiber that held
// one of sqlite's static mutexes would block it forever).
func TestSqliteKillThenPlainCall(t *testing.T) {
	e := newExec(t)
	defer e.Fini()
	defer xtc.PreemptSetInvoluntary(false)
	run, err := e.Start()
	require.NoError(t, err)
	killed := 0
	bounded(t, 60*time.Second, "the killed calls", func() {
		var mu sync.Mutex
		var wg sync.WaitGroup
		for i := 0; i < 40; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
				defer cancel()
				r, err := e.GoAsync(reallib.Forever(), nil)
				if err != nil {
					return
				}
				if _, err := r.Wait(ctx); errors.Is(err, context.DeadlineExceeded) {
					_ = r.Kill()
					<-r.Done()
					mu.Lock()
					killed++
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
	})
	assert.Greater(t, killed, 0)
	bounded(t, 20*time.Second, "a plain cgo call into sqlite after the kills", func() {
		assert.True(t, reallib.Plain())
	})
	require.NoError(t, e.Stop())
	require.NoError(t, run.Wait(context.Background()))
}
