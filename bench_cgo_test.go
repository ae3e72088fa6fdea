//go:build cgo

package xtc_test

// Costs of the Go wrappers themselves (cgo crossings, handles, posting to
// the loop thread), next to the pure C figures of bench/.

import (
	"testing"

	"github.com/xtc-go/xtc"
	"github.com/xtc-go/xtc/internal/ctest"
)

// A Go task body per run: spawn from Go + one C->Go callback + reap.
func BenchmarkTaskSpawnGoBody(b *testing.B) {
	l, err := xtc.LoopInit()
	if err != nil {
		b.Fatal(err)
	}
	defer l.Fini()
	body := func(*xtc.Task) xtc.TaskResult { return xtc.TaskDone }
	const batch = 1000
	b.ResetTimer()
	for done := 0; done < b.N; done += batch {
		for i := 0; i < batch; i++ {
			if _, err := xtc.TaskSpawn(l, body); err != nil {
				b.Fatal(err)
			}
		}
		if err := l.Run(); err != nil {
			b.Fatal(err)
		}
	}
}

// Re-running one Go task body: the C->Go callback alone.
func BenchmarkGoCallback(b *testing.B) {
	l, err := xtc.LoopInit()
	if err != nil {
		b.Fatal(err)
	}
	defer l.Fini()
	n := 0
	if _, err := xtc.TaskSpawn(l, func(*xtc.Task) xtc.TaskResult {
		n++
		if n < b.N {
			return xtc.TaskResched
		}
		return xtc.TaskDone
	}); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	if err := l.Run(); err != nil {
		b.Fatal(err)
	}
}

// xtc.Send from a goroutine into a proc's mailbox on a running loop.
func BenchmarkSendFromGoroutine(b *testing.B) {
	l, err := xtc.LoopInit()
	if err != nil {
		b.Fatal(err)
	}
	defer l.Fini()
	c := ctest.NewCell(0)
	defer c.Free()
	pid, err := xtc.ProcSpawn(l, ctest.RecvSum, c.Ptr(), &xtc.ProcOpts{MailboxCap: 1 << 16})
	if err != nil {
		b.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- l.Run() }()
	msg := []byte{1, 0, 0, 0, 0, 0, 0, 0}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for xtc.Send(pid, msg) != nil { // full: let the proc drain
		}
	}
	b.StopTimer()
	for xtc.Send(pid, nil) != nil {
	}
	if err := <-done; err != nil {
		b.Fatal(err)
	}
}
