package xtc_test

// Go-runtime side of the comparison with the C benches (bench/*.c); `make
// bench` runs both and prints one table (tools/benchtable).
//
//	go test -run '^$' -bench BenchmarkGo -count 5

import (
	"testing"

	"github.com/xtc-go/xtc/internal/gobench"
)

// ns per runtime.Gosched switch, two goroutines, GOMAXPROCS=1.
func BenchmarkGoGosched(b *testing.B) {
	b.ReportMetric(gobench.Gosched(b.N), "ns/switch")
}

// ns per `go f()` + WaitGroup wait.
func BenchmarkGoSpawn(b *testing.B) {
	b.ReportMetric(gobench.Spawn(b.N), "ns/spawn")
}

// ns per unbuffered channel round trip.
func BenchmarkGoChanPingPong(b *testing.B) {
	b.ReportMetric(gobench.PingPong(b.N), "ns/roundtrip")
}

// Resident bytes per parked goroutine, 100k of them.
func BenchmarkGoParkedMemory(b *testing.B) {
	var v float64
	for i := 0; i < b.N; i++ {
		v = gobench.ParkedBytes(100_000)
	}
	b.ReportMetric(v, "B/parked")
}

// ns per goroutine, started 32 at a time and waited for together.
func BenchmarkGoSpawnBatch(b *testing.B) {
	b.ReportMetric(gobench.SpawnBatch(b.N, 32), "ns/spawn")
}
