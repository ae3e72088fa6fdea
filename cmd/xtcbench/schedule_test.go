package main

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestDistMeans(t *testing.T) {
	m, err := DistMean("A1")
	require.NoError(t, err)
	assert.InDelta(t, 0.995*500+0.005*500_000, m, 1e-9)
	m, _ = DistMean("A2")
	assert.InDelta(t, 0.995*5_000+0.005*500_000, m, 1e-9)
	m, _ = DistMean("B")
	assert.InDelta(t, 5_000, m, 1e-9)
	m, _ = DistMean("C")
	a1, _ := DistMean("A1")
	assert.InDelta(t, 2/(1/a1+1/5000.0), m, 1e-9)
	_, err = DistMean("Z")
	assert.Error(t, err)
}

// checkPoisson: arrivals ascend, the mean gap matches the rate and the
// gaps have the coefficient of variation 1 of an exponential.
func checkPoisson(t *testing.T, arr []int64, wantRate float64) {
	t.Helper()
	require.Greater(t, len(arr), 1000)
	var sum, sum2 float64
	for i := 1; i < len(arr); i++ {
		require.GreaterOrEqual(t, arr[i], arr[i-1])
		g := float64(arr[i] - arr[i-1])
		sum += g
		sum2 += g * g
	}
	n := float64(len(arr) - 1)
	mean := sum / n
	sd := math.Sqrt(sum2/n - mean*mean)
	assert.InEpsilon(t, 1/wantRate, mean, 0.03, "mean inter-arrival")
	assert.InDelta(t, 1.0, sd/mean, 0.05, "coefficient of variation")
}

func TestScheduleA1Statistics(t *testing.T) {
	s, err := NewSchedule("A1", 0.7, 1, 500*time.Millisecond, 42)
	require.NoError(t, err)
	mean, _ := DistMean("A1")
	rate := 0.7 / mean
	checkPoisson(t, s.Arrival, rate)
	longs := 0
	for i, v := range s.Service {
		switch v {
		case a1Short:
			assert.True(t, s.Short[i])
		case aLong:
			assert.False(t, s.Short[i])
			longs++
		default:
			t.Fatalf("unexpected service time %d", v)
		}
	}
	frac := float64(longs) / float64(s.N())
	// 0.5% of ~117k requests: sd of the count is about 24 (4%).
	assert.InEpsilon(t, 0.005, frac, 0.15)
	assert.Equal(t, int64(200*mean), s.SLO())
	assert.Less(t, s.Arrival[s.N()-1], int64(500*time.Millisecond))
}

func TestScheduleBStatistics(t *testing.T) {
	s, err := NewSchedule("B", 0.5, 2, 500*time.Millisecond, 3)
	require.NoError(t, err)
	checkPoisson(t, s.Arrival, 0.5*2/5000.0)
	var sum float64
	short := 0
	for i, v := range s.Service {
		sum += float64(v)
		if s.Short[i] {
			short++
			assert.LessOrEqual(t, float64(v), 5000*math.Ln2)
		}
	}
	assert.InEpsilon(t, 5000, sum/float64(s.N()), 0.03)
	assert.InEpsilon(t, 0.5, float64(short)/float64(s.N()), 0.03)
}

func TestScheduleCHalves(t *testing.T) {
	dur := 600 * time.Millisecond
	s, err := NewSchedule("C", 0.5, 1, dur, 9)
	require.NoError(t, err)
	half := dur.Nanoseconds() / 2
	var first, second []int64
	for i, a := range s.Arrival {
		v := s.Service[i]
		if a < half-int64(time.Millisecond) {
			assert.True(t, v == a1Short || v == aLong, "first half is A1")
			first = append(first, a)
		} else if a > half+int64(time.Millisecond) {
			second = append(second, a)
		}
	}
	a1, _ := DistMean("A1")
	checkPoisson(t, first, 0.5/a1)
	checkPoisson(t, second, 0.5/5000.0)
}

func TestScheduleDeterministic(t *testing.T) {
	a, err := NewSchedule("A2", 0.3, 1, 100*time.Millisecond, 5)
	require.NoError(t, err)
	b, err := NewSchedule("A2", 0.3, 1, 100*time.Millisecond, 5)
	require.NoError(t, err)
	assert.Equal(t, a.Arrival, b.Arrival)
	assert.Equal(t, a.Service, b.Service)
	c, _ := NewSchedule("A2", 0.3, 1, 100*time.Millisecond, 6)
	assert.NotEqual(t, a.Arrival, c.Arrival)
	d, _ := NewSchedule("A2", 0.5, 1, 100*time.Millisecond, 5)
	assert.NotEqual(t, a.Arrival[:10], d.Arrival[:10])
}

func TestScheduleErrors(t *testing.T) {
	_, err := NewSchedule("A9", 0.5, 1, time.Second, 1)
	assert.Error(t, err)
	_, err = NewSchedule("A1", 0, 1, time.Second, 1)
	assert.Error(t, err)
	_, err = NewSchedule("A1", 0.5, 0, time.Second, 1)
	assert.Error(t, err)
	_, err = NewSchedule("A1", 0.5, 1, 0, 1)
	assert.Error(t, err)
}

func TestIterations(t *testing.T) {
	s := &Schedule{Service: []int64{500, 5000, 0}}
	assert.Equal(t, []uint64{1000, 10000, 1}, s.Iterations(2))
}
