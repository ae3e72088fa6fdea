//go:build cgo

package xtc

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/xtc-go/xtc/internal/cfuture"
	"github.com/xtc-go/xtc/internal/ctest"
)

// The front door's other entry points, measured like
// frontdoor_bench_test.go measures Exec.Go: Dispatch (a C function as a
// fresh fiber, its result through the completion queue), a Mailbox (a Go
// Send to its pid, the relay proc, Recv) and Batch.Do (a hand-in to a
// group whose Go Step finishes every member at once). Round trip: one
// goroutine, an idle executor of one carrier, the variants interleaved,
// 5 repetitions of 2000 operations after a warm-up, medians of the
// per-repetition p50/p99 with their spread (GoInt is the reference row).
// Throughput: G goroutines each looping the operation; ops/s and
// allocs/op.
//
//	go test -run '^$' -bench 'BenchmarkFrontDoorMore' -benchtime 20000x .

// moreExec starts a one-carrier executor with a Batch group (whose Step
// finishes every member at once) and a Mailbox of its own; closed at the
// end of the test.
func moreExec(tb testing.TB) (*Exec, *Batch, *Mailbox) {
	e, err := NewExec(1)
	require.NoError(tb, err)
	bt, err := e.NewBatch(BatchOpts{Capacity: 4096, MaxActive: 64, ResourceCapacity: 64,
		Step: func(items []BatchItem, res []BatchResult) error {
			for i := range res {
				res[i].State = BatchDone
			}
			return nil
		}})
	require.NoError(tb, err)
	mb, err := e.NewMailbox(0, 4096)
	require.NoError(tb, err)
	_, err = e.Start()
	require.NoError(tb, err)
	tb.Cleanup(func() { require.NoError(tb, e.Close()) })
	return e, bt, mb
}

func BenchmarkFrontDoorMoreRoundTrip(b *testing.B) {
	e, bt, mb := moreExec(b)
	l := e.Loop(0)
	ctx := context.Background()
	msg := []byte("ping")
	variants := []rtVariant{
		{name: "Exec.GoInt (reference)", op: func() {
			if _, err := e.GoInt(ctx, ctest.Ident(), 1); err != nil {
				b.Fatal(err)
			}
		}},
		{name: "Dispatch + Future.Wait", op: func() {
			f, err := Dispatch(l, cfuture.AddOne, nil)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := f.Wait(ctx); err != nil {
				b.Fatal(err)
			}
		}},
		{name: "Send + Mailbox.Recv", op: func() {
			if err := Send(mb.Pid(), msg); err != nil {
				b.Fatal(err)
			}
			if _, err := mb.Recv(ctx); err != nil {
				b.Fatal(err)
			}
		}},
		{name: "Batch.Do", op: func() {
			if _, err := bt.Do(ctx, 1); err != nil {
				b.Fatal(err)
			}
		}},
		// 100 us between calls: the carrier has parked each time
		{name: "Exec.GoInt, 100us gap", gap: true, op: func() {
			if _, err := e.GoInt(ctx, ctest.Ident(), 1); err != nil {
				b.Fatal(err)
			}
		}},
		{name: "Dispatch + Wait, 100us gap", gap: true, op: func() {
			f, err := Dispatch(l, cfuture.AddOne, nil)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := f.Wait(ctx); err != nil {
				b.Fatal(err)
			}
		}},
		{name: "Batch.Do, 100us gap", gap: true, op: func() {
			if _, err := bt.Do(ctx, 1); err != nil {
				b.Fatal(err)
			}
		}},
	}
	p50s, p99s := roundTrips(variants, 5, 2000, nil)
	for k, v := range variants {
		m, lo, hi := medSpread(p50s[k])
		m99, lo99, hi99 := medSpread(p99s[k])
		b.Logf("%-28s p50 %9v [%v..%v]  p99 %9v [%v..%v]", v.name, m, lo, hi, m99, lo99, hi99)
	}
	logLoad(b)
}

// Throughput from G goroutines, each looping its operation; for the
// mailbox, G senders and one receiver.
func BenchmarkFrontDoorMoreThroughput(b *testing.B) {
	ops := []struct {
		name string
		op   func(e *Exec, bt *Batch) error
	}{
		{"Dispatch", func(e *Exec, _ *Batch) error {
			f, err := Dispatch(e.Loop(0), cfuture.AddOne, nil)
			if err != nil {
				return err
			}
			_, err = f.Wait(context.Background())
			return err
		}},
		{"Batch.Do", func(_ *Exec, bt *Batch) error {
			_, err := bt.Do(context.Background(), 1)
			return err
		}},
	}
	for _, o := range ops {
		for _, g := range []int{1, 64} {
			b.Run(fmt.Sprintf("%s/G=%d", o.name, g), func(b *testing.B) {
				e, bt, _ := moreExec(b)
				for i := 0; i < 500; i++ {
					if err := o.op(e, bt); err != nil {
						b.Fatal(err)
					}
				}
				per := max(b.N/g, 1)
				b.ReportAllocs()
				b.ResetTimer()
				t0 := time.Now()
				hammer(b, g, per, func() error { return o.op(e, bt) })
				el := time.Since(t0)
				b.StopTimer()
				b.ReportMetric(float64(per*g)/el.Seconds(), "ops/s")
			})
		}
	}
	for _, g := range []int{1, 64} {
		b.Run(fmt.Sprintf("Mailbox/senders=%d", g), func(b *testing.B) {
			_, _, mb := moreExec(b)
			ctx := context.Background()
			msg := []byte("ping")
			per := max(b.N/g, 1)
			recvd := make(chan error, 1)
			b.ReportAllocs()
			b.ResetTimer()
			t0 := time.Now()
			go func() {
				for i := 0; i < per*g; i++ {
					if _, err := mb.Recv(ctx); err != nil {
						recvd <- err
						return
					}
				}
				recvd <- nil
			}()
			hammer(b, g, per, func() error {
				err := Send(mb.Pid(), msg)
				for errors.Is(err, ErrAgain) { // the mailbox is full: the receiver is behind
					time.Sleep(10 * time.Microsecond)
					err = Send(mb.Pid(), msg)
				}
				return err
			})
			if err := <-recvd; err != nil {
				b.Fatal(err)
			}
			el := time.Since(t0)
			b.StopTimer()
			b.ReportMetric(float64(per*g)/el.Seconds(), "msgs/s")
		})
	}
}
