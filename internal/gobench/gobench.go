// Package gobench holds the Go-runtime side of the head-to-head
// microbenchmarks: the same operations the C benches in bench/ measure on
// xtc procs, done with goroutines. bench_test.go wraps them as testing
// benchmarks and tools/benchtable calls them directly (repeated, medians)
// to print the comparison table.
package gobench

import (
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Gosched returns ns per runtime.Gosched switch between two goroutines
// that yield to each other n times each, with GOMAXPROCS=1 (the analogue of
// xtc_yield between two procs on one loop).
func Gosched(n int) float64 {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	var wg sync.WaitGroup
	start := make(chan struct{})
	body := func() {
		defer wg.Done()
		<-start
		for i := 0; i < n; i++ {
			runtime.Gosched()
		}
	}
	wg.Add(2)
	go body()
	go body()
	runtime.Gosched()
	t0 := time.Now()
	close(start)
	wg.Wait()
	return float64(time.Since(t0).Nanoseconds()) / float64(2*n)
}

// Spawn returns ns per `go f()` + wait for it to finish (the analogue of
// spawn + run + exit of a proc), one at a time.
func Spawn(n int) float64 {
	var wg sync.WaitGroup
	f := func() { wg.Done() }
	t0 := time.Now()
	for i := 0; i < n; i++ {
		wg.Add(1)
		go f()
		wg.Wait()
	}
	return float64(time.Since(t0).Nanoseconds()) / float64(n)
}

// PingPong returns ns per round trip over two unbuffered channels between
// two goroutines (the analogue of a mailbox ping-pong between two procs).
// GOMAXPROCS=1 like the single-loop C side.
func PingPong(n int) float64 {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	ping, pong := make(chan int), make(chan int)
	go func() {
		for v := range ping {
			pong <- v
		}
	}()
	t0 := time.Now()
	for i := 0; i < n; i++ {
		ping <- i
		<-pong
	}
	el := time.Since(t0)
	close(ping)
	return float64(el.Nanoseconds()) / float64(n)
}

// ParkedBytes starts n goroutines blocked on a channel and returns the
// growth of resident memory per goroutine, in bytes (the analogue of n
// parked procs). Run it first in a fresh process for a clean figure.
func ParkedBytes(n int) float64 {
	runtime.GC()
	before := rss()
	block := make(chan struct{})
	var ready sync.WaitGroup
	ready.Add(n)
	for i := 0; i < n; i++ {
		go func() {
			ready.Done()
			<-block
		}()
	}
	ready.Wait()
	after := rss()
	close(block)
	if before < 0 || after < 0 {
		return -1
	}
	return float64(after-before) / float64(n)
}

// rss returns the resident set size in bytes from /proc/self/statm.
func rss() int64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return -1
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return -1
	}
	pages, err := strconv.ParseInt(f[1], 10, 64)
	if err != nil {
		return -1
	}
	return pages * int64(os.Getpagesize())
}

// SpawnBatch returns ns per goroutine when batches of `batch` goroutines
// are started with `go f()` and then waited for together (the analogue of
// a driver coroutine spawning a batch and waiting for all of them).
func SpawnBatch(n, batch int) float64 {
	var wg sync.WaitGroup
	f := func() { wg.Done() }
	rounds := n / batch
	if rounds < 1 {
		rounds = 1
	}
	t0 := time.Now()
	for r := 0; r < rounds; r++ {
		wg.Add(batch)
		for i := 0; i < batch; i++ {
			go f()
		}
		wg.Wait()
	}
	return float64(time.Since(t0).Nanoseconds()) / float64(rounds*batch)
}
