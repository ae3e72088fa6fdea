package main

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestQuantileNearestRank(t *testing.T) {
	v := make([]int64, 100)
	for i := range v {
		v[i] = int64(i + 1) // 1..100
	}
	assert.Equal(t, int64(50), Quantile(v, 0.50))
	assert.Equal(t, int64(99), Quantile(v, 0.99))
	assert.Equal(t, int64(100), Quantile(v, 0.999))
	assert.Equal(t, int64(1), Quantile(v, 0))
	assert.Equal(t, int64(100), Quantile(v, 1))
	assert.Equal(t, int64(1), Quantile(v, 0.001))
	assert.Equal(t, int64(0), Quantile(nil, 0.5))

	w := make([]int64, 1000)
	for i := range w {
		w[i] = int64(i + 1)
	}
	assert.Equal(t, int64(990), Quantile(w, 0.99))
	assert.Equal(t, int64(999), Quantile(w, 0.999))
	assert.Equal(t, int64(7), Quantile([]int64{7}, 0.99))
}

func TestSummarizeSortsAndSummarizes(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	v := make([]int64, 10000)
	for i := range v {
		v[i] = int64(i)
	}
	r.Shuffle(len(v), func(i, j int) { v[i], v[j] = v[j], v[i] })
	s := Summarize(v)
	assert.Equal(t, 10000, s.N)
	assert.Equal(t, int64(4999), s.P50)
	assert.Equal(t, int64(9899), s.P99)
	assert.Equal(t, int64(9989), s.P999)
	assert.Equal(t, int64(9999), s.Max)
	assert.InDelta(t, 4999.5, s.Mean, 1e-9)
	assert.Equal(t, Summary{}, Summarize(nil))
}

func TestMedianAndFormat(t *testing.T) {
	assert.Equal(t, 2.0, median([]float64{3, 1, 2}))
	assert.Equal(t, 2.5, median([]float64{4, 1, 2, 3}))
	assert.Equal(t, 0.0, median(nil))
	assert.Equal(t, "5.25 ns", fmtDurF(5.25))
	assert.Equal(t, "120.0 ns", fmtDur(120))
	assert.Equal(t, "12.5 µs", fmtDur(12_500))
	assert.Equal(t, "1.50 ms", fmtDur(1_500_000))
	assert.Equal(t, "2.00 s", fmtDur(2_000_000_000))
}

func TestSummarizeRunMarksIncomplete(t *testing.T) {
	s := &Schedule{Arrival: []int64{0, 10, 20, 30}, Service: []int64{1, 1, 1, 1},
		Short: []bool{true, true, false, true}, Mean: 1}
	var p TailPoint
	summarizeRun(s, []int64{5, 20, 40, -1}, []int64{0, 0, 0, 0}, &p, 0)
	assert.Equal(t, 4, p.N)
	assert.Equal(t, 3, p.Completed)
	assert.Equal(t, int64(incomplete), p.All.Max)
	assert.Equal(t, 3, p.Short.N)
	assert.False(t, p.MeetsSLO)
	assert.Equal(t, -1.0, p.All.Mean)

	var q TailPoint
	summarizeRun(s, []int64{5, 20, 40, 31}, []int64{0, 1, 2, 3}, &q, 0)
	assert.Equal(t, int64(20), q.All.Max)
	assert.Equal(t, int64(5), q.Short.P50)
	assert.True(t, q.MeetsSLO) // p99 20 <= SLO 200

	// the warm-up prefix runs but is not measured
	var w TailPoint
	summarizeRun(s, []int64{5, 20, 40, -1}, []int64{9, 9, 0, 0}, &w, 15)
	assert.Equal(t, 2, w.N)
	assert.Equal(t, 1, w.Completed)
	assert.Equal(t, int64(0), w.Lag.Max)
}

func TestAggregateKeepsMedianOfCleanReps(t *testing.T) {
	mk := func(short, lag int64) TailPoint {
		return TailPoint{Status: StatusOK.String(), Short: Summary{P99: short},
			All: Summary{P99: short * 2}, Lag: Summary{P99: lag, Max: lag}}
	}
	g := lagGate(nil)
	stall := g.Max * 2
	p := aggregate([]TailPoint{mk(300, 0), mk(100, 0), mk(900, stall), mk(200, 0)}, g)
	assert.Equal(t, int64(200), p.Short.P99) // median of the 3 clean ones
	assert.Equal(t, 3, p.Kept)
	assert.Equal(t, int64(100), p.ShortP99Min)
	assert.Equal(t, int64(300), p.ShortP99Max)
	assert.Equal(t, 4, len(p.Reps))
	assert.True(t, p.Reps[2].Stalled)
	q := aggregate([]TailPoint{mk(300, stall), mk(100, stall)}, g)
	assert.Equal(t, 0, q.Kept)
	assert.Contains(t, q.Why, "stalled")
}

func TestLagGateFollowsTheMachine(t *testing.T) {
	g := lagGate(nil)
	assert.Equal(t, int64(30*time.Microsecond), g.P99)
	assert.Equal(t, int64(300*time.Microsecond), g.Max)
	// a machine whose interrupts stall a thread 5 µs: the fixed limits
	g = lagGate(&Floor{TimerStall: 5, CrossStallP50Us: 4})
	assert.Equal(t, int64(30*time.Microsecond), g.P99)
	assert.Equal(t, "fixed", g.Basis)
	// a slow guest: 40 µs stalls raise them to 2x and 10x
	g = lagGate(&Floor{TimerStall: 40, CrossStallP50Us: 30})
	assert.Equal(t, int64(80*time.Microsecond), g.P99)
	assert.Equal(t, int64(400*time.Microsecond), g.Max)
	assert.Contains(t, g.Basis, "40 µs")
	p := TailPoint{Lag: Summary{P99: int64(60 * time.Microsecond), Max: int64(200 * time.Microsecond)}}
	assert.False(t, stalled(&p, g))
	assert.True(t, stalled(&p, lagGate(nil)))
}
