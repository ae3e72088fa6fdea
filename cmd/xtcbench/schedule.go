package main

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"time"
)

// The tail-latency workload follows LibPreemptible's evaluation (seed 003):
// open-loop Poisson arrivals and synthetic requests whose only work is a
// calibrated busy loop. The whole arrival schedule (times and service
// times) is generated before a run from a fixed seed, so every contender at
// a given (distribution, load) point receives the very same requests at the
// very same offsets; the load generator only replays it. Sojourn time is
// measured from the *scheduled* arrival, so a generator or runtime that
// falls behind pays for it (no coordinated omission).

// Service-time distributions, in nanoseconds.
const (
	a1Short = 500     // A1: 99.5% 0.5 µs
	a2Short = 5_000   // A2: 99.5% 5 µs
	aLong   = 500_000 // A1/A2: 0.5% 500 µs
	aPShort = 0.995
	bMean   = 5_000 // B: exponential, mean 5 µs
)

// DistNames lists the distributions in report order.
var DistNames = []string{"A1", "A2", "B", "C"}

// distDescription is the one-line description used in the report.
func distDescription(name string) string {
	switch name {
	case "A1":
		return "bimodal: 99.5% 0.5 µs, 0.5% 500 µs"
	case "A2":
		return "bimodal: 99.5% 5 µs, 0.5% 500 µs"
	case "B":
		return "exponential, mean 5 µs"
	case "C":
		return "A1 for the first half of the run, then B"
	}
	return "?"
}

// bimodalMean is the expected service time of a bimodal distribution.
func bimodalMean(short float64) float64 {
	return aPShort*short + (1-aPShort)*aLong
}

// DistMean returns the expected service time (ns) of a request of the
// distribution. For C, whose two halves run at the same load, the expected
// service time per request is the harmonic mean of the halves' means
// (each half receives a number of requests inversely proportional to its
// mean).
func DistMean(name string) (float64, error) {
	switch name {
	case "A1":
		return bimodalMean(a1Short), nil
	case "A2":
		return bimodalMean(a2Short), nil
	case "B":
		return bMean, nil
	case "C":
		m1, m2 := bimodalMean(a1Short), float64(bMean)
		return 2 / (1/m1 + 1/m2), nil
	}
	return 0, fmt.Errorf("unknown distribution %q (want one of %s)", name,
		strings.Join(DistNames, ", "))
}

// Schedule is one precomputed open-loop run.
type Schedule struct {
	Dist     string
	Load     float64 // fraction of capacity (carriers / mean service time)
	Carriers int
	Duration time.Duration
	Arrival  []int64 // ns from the start of the run, non-decreasing
	Service  []int64 // ns of busy-loop work
	Short    []bool  // request belongs to the "short" class
	Mean     float64 // expected service time (ns) of the distribution
}

// SLO is the latency bound used for the "highest load under SLO" figure:
// 200 times the mean service time, as in the paper.
func (s *Schedule) SLO() int64 { return int64(200 * s.Mean) }

// N is the number of requests.
func (s *Schedule) N() int { return len(s.Arrival) }

// sampleBimodal draws one service time; short reports the class.
func sampleBimodal(rng *rand.Rand, short int64) (int64, bool) {
	if rng.Float64() < aPShort {
		return short, true
	}
	return aLong, false
}

// sampleExp draws from B. "Short" for B is below its median (mean*ln 2), so
// the short-request percentiles of every distribution cover the lower half
// or more of its requests.
func sampleExp(rng *rand.Rand) (int64, bool) {
	v := rng.ExpFloat64() * bMean
	if v < 1 {
		v = 1
	}
	return int64(v), v <= bMean*math.Ln2
}

// NewSchedule builds the schedule of one (distribution, load) point.
// Arrivals are Poisson with rate load*carriers/mean; for C the rate of each
// half uses that half's own mean, so both halves run at the requested load.
func NewSchedule(dist string, load float64, carriers int, dur time.Duration,
	seed uint64) (*Schedule, error) {
	mean, err := DistMean(dist)
	if err != nil {
		return nil, err
	}
	if load <= 0 || load > 2 {
		return nil, fmt.Errorf("load %.2f out of range (0, 2]", load)
	}
	if carriers < 1 {
		return nil, fmt.Errorf("carriers %d < 1", carriers)
	}
	if dur <= 0 {
		return nil, fmt.Errorf("duration %v <= 0", dur)
	}
	rng := rand.New(rand.NewPCG(seed, uint64(math.Float64bits(load))^hashName(dist)))
	s := &Schedule{Dist: dist, Load: load, Carriers: carriers, Duration: dur, Mean: mean}
	expected := int(load*float64(carriers)*float64(dur.Nanoseconds())/mean) + 16
	s.Arrival = make([]int64, 0, expected)
	s.Service = make([]int64, 0, expected)
	s.Short = make([]bool, 0, expected)
	half := dur.Nanoseconds() / 2
	var t float64
	for {
		phaseDist := dist
		if dist == "C" {
			phaseDist = "A1"
			if int64(t) >= half {
				phaseDist = "B"
			}
		}
		pm, _ := DistMean(phaseDist)
		rate := load * float64(carriers) / pm // arrivals per ns
		t += rng.ExpFloat64() / rate
		if int64(t) >= dur.Nanoseconds() {
			break
		}
		var svc int64
		var short bool
		switch phaseDist {
		case "A1":
			svc, short = sampleBimodal(rng, a1Short)
		case "A2":
			svc, short = sampleBimodal(rng, a2Short)
		default:
			svc, short = sampleExp(rng)
		}
		s.Arrival = append(s.Arrival, int64(t))
		s.Service = append(s.Service, svc)
		s.Short = append(s.Short, short)
	}
	return s, nil
}

func hashName(s string) uint64 {
	var h uint64 = 1469598103934665603
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= 1099511628211
	}
	return h
}

// Iterations converts the schedule's service times into busy-loop
// iterations at a calibrated rate (iterations per ns).
func (s *Schedule) Iterations(itersPerNs float64) []uint64 {
	out := make([]uint64, len(s.Service))
	for i, ns := range s.Service {
		it := uint64(math.Round(float64(ns) * itersPerNs))
		if it < 1 {
			it = 1
		}
		out[i] = it
	}
	return out
}
