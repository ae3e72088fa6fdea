//go:build cgo

package xtc

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/xtc-go/xtc/internal/ctest"
)

// A stall report tells "this run used the CPU for X" from "the carrier
// thread was not running for Y" (issue 27: on a loaded host a 3 us call
// was named as a 25 ms stall). Here the run's thread sleeps 30 ms inside
// the run, off CPU, as a descheduled carrier would: the report's Ran is
// over the budget, and almost all of it is OffCPU. Not timed: a sleeping
// thread uses microseconds of CPU whatever the load.
func TestStallReportCPUSplit(t *testing.T) {
	e, err := ExecInit(1)
	require.NoError(t, err)
	defer e.Fini()
	l := e.Loop(0)
	const budget = 10 * time.Millisecond
	got := make(chan StallReport, 8)
	require.NoError(t, l.SetStallFunc(func(_ *Loop, r StallReport) {
		if !r.InFlight {
			got <- r
		}
	}))
	e.SetStallBudget(budget)
	c := ctest.NewCell(int64(3 * budget))
	defer c.Free()
	_, err = ProcSpawn(l, ctest.NapProc(), c.Ptr(), nil)
	require.NoError(t, err)
	run, err := e.Start()
	require.NoError(t, err)
	require.NoError(t, run.Wait(t.Context()))
	r := <-got
	assert.GreaterOrEqual(t, r.Ran, budget)
	assert.GreaterOrEqual(t, r.CPU, time.Duration(0))
	assert.Less(t, r.CPU, budget/2)
	assert.Greater(t, r.OffCPU, budget/2)
	assert.Equal(t, r.Ran, r.CPU+r.OffCPU)
}
