package main

import (
	"os"
	"testing"
	"time"
)

func TestDebugGoTail(t *testing.T) {
	if os.Getenv("XB_DEBUG") == "" {
		t.Skip()
	}
	cal := calibrate()
	t.Logf("cal %+v", cal)
	for _, load := range []float64{0.1, 0.3, 0.7} {
		s, _ := NewSchedule("A1", load, 1, 300*time.Millisecond, 1)
		for _, cgo := range []bool{false, true} {
			it := s.Iterations(cal.GoItersPerNs)
			if cgo {
				it = s.Iterations(cal.CItersPerNs)
			}
			t0 := time.Now()
			done, lag := goTail(s, it, cgo, 1)
			var p TailPoint
			summarizeRun(s, done, lag, &p)
			t.Logf("load %.1f cgo=%v n=%d wall=%v short p50 %s p99 %s all p99 %s lag p50 %s p99 %s", load, cgo, p.N, time.Since(t0),
				fmtDur(p.Short.P50), fmtDur(p.Short.P99), fmtDur(p.All.P99), fmtDur(p.Lag.P50), fmtDur(p.Lag.P99))
		}
	}
}

func TestDebugFeatures(t *testing.T) {
	if os.Getenv("XB_DEBUG") == "" {
		t.Skip()
	}
	t.Logf("%+v", probeFeatures())
	for _, id := range []int{microSwitch, microYield, microSpawn, microPingPong, microCrossLoop, microCCall} {
		ns, st, why := xtcMicro(id, 100000)
		t.Logf("micro %d: %.1f ns %v %s", id, ns, st, why)
	}
}

func TestDebugSpawn(t *testing.T) {
	if os.Getenv("XB_DEBUG") == "" {
		t.Skip()
	}
	for _, n := range []int64{1, 10, 256, 512, 2560, 25600} {
		ns, st, why := xtcMicro(microSpawn, n)
		t.Logf("spawn n=%d: %.1f ns %v %s", n, ns, st, why)
	}
}

func TestDebugXtcTail(t *testing.T) {
	if os.Getenv("XB_DEBUG") == "" {
		t.Skip()
	}
	cal := calibrate()
	for _, load := range []float64{0.1, 0.3, 0.7} {
		s, _ := NewSchedule("A1", load, 1, 300*time.Millisecond, 1)
		for _, sl := range []time.Duration{0, 50 * time.Microsecond} {
			t0 := time.Now()
			r, st, why := xtcTail(s.Arrival, s.Iterations(cal.CItersPerNs), 1, sl, false, os.Getenv("XB_POLL") != "", 0, 3*time.Second)
			if st != StatusOK {
				t.Fatalf("%v %s", st, why)
			}
			var p TailPoint
			summarizeRun(s, r.Done, r.Lag, &p)
			t.Logf("load %.1f slice %v n=%d done=%d wall=%v short p50 %s p99 %s all p99 %s lag p50 %s p99 %s preempts %d retries %d", load, sl, p.N, p.Completed, time.Since(t0),
				fmtDur(p.Short.P50), fmtDur(p.Short.P99), fmtDur(p.All.P99), fmtDur(p.Lag.P50), fmtDur(p.Lag.P99), r.Preempts, r.Retries)
		}
	}
}

func TestDebugHog(t *testing.T) {
	if os.Getenv("XB_DEBUG") == "" {
		t.Skip()
	}
	s0 := preemptStats()
	late, st, why := xtcHog(true, 300, time.Millisecond, 500*time.Microsecond, 3*time.Second)
	s1 := preemptStats()
	t.Logf("%v %s %+v", st, why, s1.Sub(s0))
	sm := Summarize(late)
	t.Logf("p50 %s p99 %s max %s", fmtDur(sm.P50), fmtDur(sm.P99), fmtDur(sm.Max))
	n := 0
	for i, v := range late { if v > 5e6 && n < 10 { t.Logf("probe %d late %s", i, fmtDur(v)); n++ } }
}
