package main

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Every ingress starts each arrival exactly once, not before its time on
// the run's clock, and reports a lag per arrival. The arrivals are close
// together (1-40 µs), so the netpoll kinds go through both roads: the
// published count read without sleeping, and the armed eventfd.
func TestIngressStartsEachArrivalOnce(t *testing.T) {
	s := &Schedule{Dist: "A1", Load: 0.1, Carriers: 1, Duration: 20 * time.Millisecond}
	at := int64(0)
	for i := 0; i < 2000; i++ {
		at += int64(1000 + (i*7919)%39000) // 1-40 µs apart
		s.Arrival = append(s.Arrival, at)
		s.Service = append(s.Service, 500)
	}
	for _, kind := range Ingresses {
		t.Run(kind, func(t *testing.T) {
			n := s.N()
			seen := make([]int, n)
			early := make([]int64, n)
			var base time.Time
			var mu sync.Mutex
			var wg sync.WaitGroup
			wg.Add(n)
			lag, err := replay(kind, s, &base, func(i int) {
				el := int64(time.Since(base))
				go func() {
					mu.Lock()
					seen[i]++
					// slack for the clocks' anchoring (ingress.go): a
					// generator that did not wait would be ms early
					if el < s.Arrival[i]-50_000 {
						early[i] = s.Arrival[i] - el
					}
					mu.Unlock()
					wg.Done()
				}()
			})
			require.NoError(t, err)
			wg.Wait()
			require.Len(t, lag, n)
			for i := 0; i < n; i++ {
				require.Equal(t, 1, seen[i], "arrival %d started %d times", i, seen[i])
				assert.Zero(t, early[i], "arrival %d started %d ns early", i, early[i])
				assert.GreaterOrEqual(t, lag[i], int64(0), "arrival %d", i)
			}
		})
	}
}

// An empty schedule is no error and starts nothing.
func TestIngressEmpty(t *testing.T) {
	s := &Schedule{Dist: "A1", Load: 0.1, Carriers: 1, Duration: time.Millisecond}
	for _, kind := range Ingresses {
		var base time.Time
		lag, err := replay(kind, s, &base, func(int) { t.Error("started an arrival of an empty schedule") })
		require.NoError(t, err, kind)
		assert.Empty(t, lag, kind)
	}
}
