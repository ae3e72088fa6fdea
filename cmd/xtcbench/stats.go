package main

import (
	"math"
	"sort"
	"strconv"
)

// Percentiles are exact: every sample of a run is kept and sorted, and the
// p-quantile is the nearest-rank value x[ceil(p*n)-1] (a value that was
// actually observed, never an interpolation between two). With n samples a
// quantile p is only meaningful when n*(1-p) >= 1; Summary records n so the
// report can say how many samples stand behind p99.9.

// Summary is the distribution of one set of durations (nanoseconds).
type Summary struct {
	N    int     `json:"n"`
	Mean float64 `json:"mean_ns"`
	P50  int64   `json:"p50_ns"`
	P99  int64   `json:"p99_ns"`
	P999 int64   `json:"p999_ns"`
	Max  int64   `json:"max_ns"`
}

// Quantile returns the nearest-rank p-quantile of sorted samples; 0 for an
// empty slice. p is clamped to [0, 1].
func Quantile(sorted []int64, p float64) int64 {
	n := len(sorted)
	if n == 0 {
		return 0
	}
	if p <= 0 {
		return sorted[0]
	}
	if p >= 1 {
		return sorted[n-1]
	}
	rank := int(math.Ceil(p * float64(n)))
	if rank < 1 {
		rank = 1
	}
	return sorted[rank-1]
}

// Summarize sorts samples in place and returns their summary.
func Summarize(samples []int64) Summary {
	if len(samples) == 0 {
		return Summary{}
	}
	sort.Slice(samples, func(i, j int) bool { return samples[i] < samples[j] })
	var sum float64
	for _, v := range samples {
		sum += float64(v)
	}
	return Summary{
		N:    len(samples),
		Mean: sum / float64(len(samples)),
		P50:  Quantile(samples, 0.50),
		P99:  Quantile(samples, 0.99),
		P999: Quantile(samples, 0.999),
		Max:  samples[len(samples)-1],
	}
}

// median of float values (a copy is sorted); 0 when empty.
func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	c := append([]float64(nil), v...)
	sort.Float64s(c)
	if len(c)%2 == 1 {
		return c[len(c)/2]
	}
	return (c[len(c)/2-1] + c[len(c)/2]) / 2
}

// fmtDur prints nanoseconds with a unit chosen for readability.
func fmtDur(ns int64) string {
	return fmtDurF(float64(ns))
}

func fmtDurF(ns float64) string {
	switch {
	case ns <= 0:
		return "0"
	case ns < 10:
		return trimFloat(ns, 2) + " ns"
	case ns < 1e3:
		return trimFloat(ns, 1) + " ns"
	case ns < 1e6:
		return trimFloat(ns/1e3, 1) + " µs"
	case ns < 1e9:
		return trimFloat(ns/1e6, 2) + " ms"
	default:
		return trimFloat(ns/1e9, 2) + " s"
	}
}

func trimFloat(v float64, prec int) string {
	return strconv.FormatFloat(v, 'f', prec, 64)
}
