package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// The demand of a slice, on a hand-made schedule: the arithmetic only.
func TestPreemptDemand(t *testing.T) {
	// 1 s on one carrier: 1000 requests of 500 µs (50% of the carrier)
	// and 100 000 of 1 µs (10%)
	s := &Schedule{Dist: "A1", Load: 0.6, Carriers: 1, Duration: time.Second}
	for i := 0; i < 1000; i++ {
		s.Service = append(s.Service, 500_000)
	}
	for i := 0; i < 100_000; i++ {
		s.Service = append(s.Service, 1_000)
	}
	// 50 µs slice: each long one is cut 9 times, 60 µs each: 54%
	d := preemptDemand(s, 50*time.Microsecond, 60)
	assert.InDelta(t, 9000, d.PerSec, 1e-6)
	assert.InDelta(t, 0.54, d.Share, 1e-9)
	assert.InDelta(t, 1.14, d.Total, 1e-9)
	assert.Equal(t, int64(50_000), d.Slice)
	// a slice that divides the service exactly: the last piece ends the
	// request, not a preemption (500/200 -> 3 pieces, 2 cuts)
	d = preemptDemand(s, 200*time.Microsecond, 60)
	assert.InDelta(t, 2000, d.PerSec, 1e-6)
	d = preemptDemand(s, 250*time.Microsecond, 60)
	assert.InDelta(t, 1000, d.PerSec, 1e-6)
	// two carriers share the cuts
	s.Carriers = 2
	d = preemptDemand(s, 50*time.Microsecond, 60)
	assert.InDelta(t, 4500, d.PerSec, 1e-6)
	assert.InDelta(t, 0.57, d.Total, 1e-9)
	// nothing to divide by
	assert.Zero(t, preemptDemand(s, 0, 60).Total)
}
