//go:build cgo

package xtc_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/xtc-go/xtc"
)

// A Stop issued right after Start (before the run thread has entered
// xtc_exec_run, or while its carriers start) ends that run: Wait returns.
// The executor is in service mode, so nothing but a stop ends its runs.
func TestExecStopRacesStart(t *testing.T) {
	e, err := xtc.ExecInit(2)
	require.NoError(t, err)
	defer func() { require.NoError(t, e.Fini()) }()
	e.SetServiceMode(true)
	for i := 0; i < 300; i++ {
		run, err := e.Start()
		require.NoError(t, err)
		if i%3 == 1 {
			time.Sleep(time.Duration(i%50) * time.Microsecond)
		}
		require.NoError(t, e.Stop())
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err = run.Wait(ctx)
		cancel()
		require.NoError(t, err, "round %d: the stop was lost", i)
	}
}

// RunContext on a loop that would run forever: a cancel at any point,
// including before the run started, ends it with ctx.Err().
func TestLoopRunContextCancelRacesStart(t *testing.T) {
	l, err := xtc.LoopInit()
	require.NoError(t, err)
	defer func() { require.NoError(t, l.Fini()) }()
	_, err = xtc.TaskSpawn(l, func(tk *xtc.Task) xtc.TaskResult {
		_ = tk.ParkOnTimer(time.Hour)
		return xtc.TaskPending
	})
	require.NoError(t, err)
	for i := 0; i < 200; i++ {
		ctx, cancel := context.WithCancel(context.Background())
		if i%2 == 0 {
			cancel()
		} else {
			go cancel()
		}
		done := make(chan error, 1)
		go func() { done <- l.RunContext(ctx) }()
		select {
		case err := <-done:
			require.ErrorIs(t, err, context.Canceled)
		case <-time.After(10 * time.Second):
			t.Fatalf("round %d: RunContext ignored the cancel", i)
		}
	}
}
