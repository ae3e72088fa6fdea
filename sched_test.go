//go:build cgo

package xtc_test

import (
	"errors"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/xtc-go/xtc"
	"github.com/xtc-go/xtc/internal/ctest"
)

// schedLoop makes a loop with n classes and, per lane (default + classes),
// one proc yielding rounds times. The cells are freed by the cleanup.
func schedLoop(t *testing.T, n, rounds int) (*xtc.Loop, []*xtc.ExecClass) {
	t.Helper()
	l, err := xtc.LoopInit()
	require.NoError(t, err)
	var cls []*xtc.ExecClass
	for i := 0; i < n; i++ {
		c, err := xtc.ExecClassCreate(l, 100, 0)
		require.NoError(t, err)
		cls = append(cls, c)
	}
	for i := -1; i < n; i++ {
		cell := ctest.NewCell(int64(rounds))
		t.Cleanup(cell.Free)
		o := &xtc.ProcOpts{}
		if i >= 0 {
			o.SchedClass = cls[i]
		}
		_, err := xtc.ProcSpawn(l, ctest.YieldN, cell.Ptr(), o)
		require.NoError(t, err)
	}
	return l, cls
}

func TestSchedErrors(t *testing.T) {
	sel := func([]xtc.SchedLane) int { return xtc.SchedDefault }
	l, err := xtc.LoopInit()
	require.NoError(t, err)

	assert.ErrorIs(t, xtc.SchedPolicySet(nil, &xtc.SchedPolicy{MaxBypass: 1, Select: sel}), xtc.ErrInval)
	assert.ErrorIs(t, xtc.SchedPolicySet(l, nil), xtc.ErrInval)
	assert.ErrorIs(t, xtc.SchedPolicySet(l, &xtc.SchedPolicy{MaxBypass: 1}), xtc.ErrInval)
	for _, mb := range []int{0, -1, -1 << 40} {
		assert.ErrorIs(t, xtc.SchedPolicySet(l, &xtc.SchedPolicy{MaxBypass: mb, Select: sel}), xtc.ErrInval, mb)
		assert.ErrorIs(t, xtc.SchedContinuousSet(l, mb), xtc.ErrInval, mb)
	}
	for _, mb := range []int{xtc.SchedMaxBypass + 1, 1 << 40} {
		assert.ErrorIs(t, xtc.SchedPolicySet(l, &xtc.SchedPolicy{MaxBypass: mb, Select: sel}), xtc.ErrRange, mb)
		assert.ErrorIs(t, xtc.SchedContinuousSet(l, mb), xtc.ErrRange, mb)
	}
	assert.ErrorIs(t, xtc.SchedContinuousSet(nil, 3), xtc.ErrInval)
	_, err = (*xtc.Loop)(nil).SchedStats()
	assert.ErrorIs(t, err, xtc.ErrInval)

	lane, err := xtc.SchedLaneOf(nil)
	require.NoError(t, err)
	assert.Equal(t, xtc.SchedLaneDefault, lane)
	for i := 0; i < 2; i++ {
		c, err := xtc.ExecClassCreate(l, 100, 0)
		require.NoError(t, err)
		lane, err := xtc.SchedLaneOf(c)
		require.NoError(t, err)
		assert.Equal(t, i, lane)
		defer func() {
			_, err := xtc.SchedLaneOf(c) // after Fini
			assert.ErrorIs(t, err, xtc.ErrInval)
		}()
	}

	require.NoError(t, xtc.SchedPolicySet(l, &xtc.SchedPolicy{MaxBypass: 2, Select: sel}))
	require.NoError(t, xtc.SchedContinuousSet(l, 2)) // replaces, still setup
	st, err := l.SchedStats()
	require.NoError(t, err)
	assert.Zero(t, st)

	// setup-only: an empty run counts
	require.NoError(t, l.Run())
	assert.ErrorIs(t, xtc.SchedPolicySet(l, &xtc.SchedPolicy{MaxBypass: 2, Select: sel}), xtc.ErrAgain)
	assert.ErrorIs(t, xtc.SchedContinuousSet(l, 2), xtc.ErrAgain)

	require.NoError(t, l.Fini())
	assert.ErrorIs(t, xtc.SchedPolicySet(l, &xtc.SchedPolicy{MaxBypass: 2, Select: sel}), xtc.ErrInval)
	assert.ErrorIs(t, xtc.SchedContinuousSet(l, 2), xtc.ErrInval)
	_, err = l.SchedStats()
	assert.ErrorIs(t, err, xtc.ErrInval)
	var xe *xtc.Error
	require.True(t, errors.As(xtc.SchedContinuousSet(l, 2), &xe))
}

// A Go policy always choosing class lane 0: lane 0 is served whenever no
// override is due, every other lane within MaxBypass + L opportunities.
func TestSchedGoPolicy(t *testing.T) {
	const mb, n = 3, 2
	l, _ := schedLoop(t, n, 200)
	defer l.Fini()
	var calls, bad, absent atomic.Int64
	p := &xtc.SchedPolicy{MaxBypass: mb, Select: func(lanes []xtc.SchedLane) int {
		calls.Add(1)
		if len(lanes) < 2 {
			bad.Add(1)
		}
		ready0 := false
		for _, v := range lanes {
			ready0 = ready0 || v.ID == 0
		}
		if !ready0 {
			absent.Add(1) // lane 0 is not ready: an invalid choice
		}
		for i, v := range lanes {
			if (i > 0 && v.ID <= lanes[i-1].ID) || v.Bypass >= mb || v.Shares != 100 {
				bad.Add(1)
			}
		}
		return 0
	}}
	require.NoError(t, xtc.SchedPolicySet(l, p))
	require.NoError(t, l.Run())
	st, err := l.SchedStats()
	require.NoError(t, err)
	assert.Zero(t, bad.Load())
	assert.Equal(t, uint64(calls.Load()), st.Selects)
	assert.Positive(t, st.Forced)
	assert.Less(t, st.MaxWait, uint64(mb+n+1))
	assert.Equal(t, uint64(absent.Load()), st.Invalid)
	np, _ := p.Panics()
	assert.Zero(t, np)
}

// A panicking Select is recovered: an invalid choice, counted, the run
// goes on and ends normally.
func TestSchedPanic(t *testing.T) {
	l, _ := schedLoop(t, 2, 100)
	defer l.Fini()
	var calls atomic.Int64
	p := &xtc.SchedPolicy{MaxBypass: 4, Select: func(lanes []xtc.SchedLane) int {
		if calls.Add(1)%2 == 0 {
			panic("select bug")
		}
		return lanes[len(lanes)-1].ID
	}}
	require.NoError(t, xtc.SchedPolicySet(l, p))
	require.NotPanics(t, func() { require.NoError(t, l.Run()) })
	st, err := l.SchedStats()
	require.NoError(t, err)
	n, last := p.Panics()
	assert.Equal(t, uint64(calls.Load()/2), n)
	assert.Equal(t, n, st.Invalid)
	assert.Equal(t, "select bug", last)
	assert.Positive(t, st.Selects)
}

// Invalid choices fall back to the ordinary picker and are counted
// exactly; SchedDefault is counted as such.
func TestSchedInvalidCounted(t *testing.T) {
	l, _ := schedLoop(t, 3, 50)
	defer l.Fini()
	var calls, invalid, defaults atomic.Int64
	p := &xtc.SchedPolicy{MaxBypass: 8, Select: func(lanes []xtc.SchedLane) int {
		switch calls.Add(1) % 3 {
		case 0:
			invalid.Add(1)
			return 99
		case 1:
			defaults.Add(1)
			return xtc.SchedDefault
		}
		return lanes[0].ID
	}}
	require.NoError(t, xtc.SchedPolicySet(l, p))
	require.NoError(t, l.Run())
	st, err := l.SchedStats()
	require.NoError(t, err)
	assert.Equal(t, uint64(invalid.Load()), st.Invalid)
	assert.Equal(t, uint64(defaults.Load()), st.Defaults)
	assert.Equal(t, uint64(calls.Load()), st.Selects)
}

// Executor loops: setup before Run, ErrAgain after.
func TestSchedExecLoops(t *testing.T) {
	e, err := xtc.ExecInit(2)
	require.NoError(t, err)
	defer e.Fini()
	l := e.Loop(0)
	c, err := xtc.ExecClassCreate(l, 200, 0)
	require.NoError(t, err)
	require.NoError(t, xtc.SchedContinuousSet(e.Loop(1), 3))
	var calls atomic.Int64
	require.NoError(t, xtc.SchedPolicySet(l, &xtc.SchedPolicy{MaxBypass: 2,
		Select: func(lanes []xtc.SchedLane) int { calls.Add(1); return lanes[0].ID }}))
	for _, o := range []*xtc.ProcOpts{{}, {SchedClass: c}} {
		cell := ctest.NewCell(100)
		defer cell.Free()
		_, err := xtc.ProcSpawn(l, ctest.YieldN, cell.Ptr(), o)
		require.NoError(t, err)
	}
	require.NoError(t, e.Run())
	st, err := l.SchedStats()
	require.NoError(t, err)
	assert.Equal(t, uint64(calls.Load()), st.Selects)
	assert.Positive(t, st.Selects)
	assert.ErrorIs(t, xtc.SchedContinuousSet(l, 3), xtc.ErrAgain)
	assert.ErrorIs(t, xtc.SchedPolicySet(e.Loop(1), &xtc.SchedPolicy{MaxBypass: 1,
		Select: func([]xtc.SchedLane) int { return 0 }}), xtc.ErrAgain)
}

// A lane policy that prefers the "foreground" class whenever it is ready;
// the other lanes still run within MaxBypass + L opportunities.
func ExampleSchedPolicySet() {
	loop, _ := xtc.LoopInit()
	defer loop.Fini()
	fg, _ := xtc.ExecClassCreate(loop, 100, 0)
	bg, _ := xtc.ExecClassCreate(loop, 100, 0)
	fgLane, _ := xtc.SchedLaneOf(fg)

	err := xtc.SchedPolicySet(loop, &xtc.SchedPolicy{
		MaxBypass: 4,
		Select: func(lanes []xtc.SchedLane) int {
			for _, l := range lanes {
				if l.ID == fgLane {
					return l.ID
				}
			}
			return xtc.SchedDefault
		},
	})
	if err != nil {
		panic(err)
	}
	for _, c := range []*xtc.ExecClass{fg, bg} {
		cell := ctest.NewCell(40) // a C proc that yields 40 times
		defer cell.Free()
		xtc.ProcSpawn(loop, ctest.YieldN, cell.Ptr(), &xtc.ProcOpts{SchedClass: c})
	}
	loop.Run()
	st, _ := loop.SchedStats()
	fmt.Println("overrides:", st.Forced > 0, "longest wait <", 4+2, ":", st.MaxWait < 6)
	// Output: overrides: true longest wait < 6 : true
}

// The built-in continuous-batching policy, installed before the first run.
func ExampleSchedContinuousSet() {
	loop, _ := xtc.LoopInit()
	defer loop.Fini()
	if err := xtc.SchedContinuousSet(loop, 3); err != nil {
		panic(err)
	}
	loop.Run()
	fmt.Println(xtc.SchedContinuousSet(loop, 3)) // setup-only
	// Output: xtc: xtc_sched_continuous_set: resource temporarily unavailable (try again: timeout, full queue or budget exhausted)
}

// The cost of a Go Select per selection opportunity (a cgo callback from
// the carrier stack) against the classes' own picker and a C policy (the
// built-in continuous one, which returns DEFAULT here): two class lanes
// and the default lane, one yielding C proc each. ns/op is per yield.
func BenchmarkSchedSelect(b *testing.B) {
	for _, v := range []string{"none", "c", "go"} {
		b.Run(v, func(b *testing.B) {
			l, err := xtc.LoopInit()
			require.NoError(b, err)
			defer l.Fini()
			var cls []*xtc.ExecClass
			for i := 0; i < 2; i++ {
				c, err := xtc.ExecClassCreate(l, 100, 0)
				require.NoError(b, err)
				cls = append(cls, c)
			}
			switch v {
			case "c":
				require.NoError(b, xtc.SchedContinuousSet(l, 4))
			case "go":
				require.NoError(b, xtc.SchedPolicySet(l, &xtc.SchedPolicy{MaxBypass: 4,
					Select: func([]xtc.SchedLane) int { return xtc.SchedDefault }}))
			}
			per := int64(b.N/3 + 1)
			for i := -1; i < 2; i++ {
				cell := ctest.NewCell(per)
				defer cell.Free()
				o := &xtc.ProcOpts{}
				if i >= 0 {
					o.SchedClass = cls[i]
				}
				_, err := xtc.ProcSpawn(l, ctest.YieldN, cell.Ptr(), o)
				require.NoError(b, err)
			}
			b.ResetTimer()
			require.NoError(b, l.Run())
		})
	}
}
