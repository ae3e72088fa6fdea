//go:build cgo

package xtc_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/xtc-go/xtc"
	"github.com/xtc-go/xtc/internal/ctest"
)

// The kernels of these examples come from a test package's cgo preamble
// (a _test.go file cannot have one): ctest.Ident is
// `intptr_t ident(void *arg) { return (intptr_t)arg; }`, ctest.Forever
// spins without ever yielding until it is killed, ctest.SpinFor spins for
// arg nanoseconds. In your code they are functions of your own preamble,
// handed over with XTC_GO_FUNC (see CFunc).

// An executor is configured once, at construction; a bad option fails
// NewExec and names itself.
func ExampleNewExec() {
	e, err := xtc.NewExec(2,
		xtc.WithPreempt(5*time.Millisecond),
		xtc.WithStallWatch(100*time.Millisecond, nil))
	if err != nil {
		fmt.Println(err) // ErrNosys where involuntary preemption does not exist
		return
	}
	defer e.Close()
	st, _ := e.Stats()
	fmt.Println(len(st.Loops), st.Preempt.Slice, st.Preempt.Involuntary, st.StallBudget)

	_, err = xtc.NewExec(1, xtc.WithPreempt(0))
	fmt.Println(errors.Is(err, xtc.ErrInval))
	// Output:
	// 2 5ms true 100ms
	// true
}

// With WithPreempt a kernel that never yields no longer keeps its carrier:
// a short call on the same one-carrier executor is served within a slice,
// and the kernel is stopped when its context ends.
func ExampleWithPreempt() {
	e, err := xtc.NewExec(1, xtc.WithPreempt(2*time.Millisecond))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer e.Close()
	if _, err := e.Start(); err != nil {
		fmt.Println(err)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	hog := make(chan error)
	go func() {
		_, err := e.Go(ctx, ctest.Forever(), nil) // never yields
		hog <- err
	}()
	v, err := e.GoInt(context.Background(), ctest.Ident(), 7)
	fmt.Println(v, err)
	fmt.Println(<-hog) // killed at its deadline; its C side is gone
	fmt.Println(e.Preempt().Active)
	// Output:
	// 7 <nil>
	// context deadline exceeded
	// true
}

// CFunc: a C function whose shape the C compiler checked (XTC_GO_FUNC in
// your preamble), called with Exec.Call, CallInt or CallAsync.
func ExampleCFuncOf() {
	// in your code: XTC_GO_FUNC(kernel) in the preamble, then
	// k := xtc.CFuncOf(C.kernel_cfunc())
	k := xtc.CFuncOf(ctest.Ident())

	e, _ := xtc.NewExec(1)
	defer e.Close()
	e.Start()
	v, err := e.CallInt(context.Background(), k, 42)
	fmt.Println(v, err)
	_, err = e.CallInt(context.Background(), xtc.CFunc{}, 1)
	fmt.Println(errors.Is(err, xtc.ErrInval))
	// Output:
	// 42 <nil>
	// true
}

// What each class received: its runs, the runs the stall watchdog counted
// against it, and whether its work waited longer than its latency bound.
func ExampleClass_Stats() {
	stalled := make(chan struct{}, 1)
	e, _ := xtc.NewExec(1, xtc.WithStallWatch(10*time.Millisecond,
		func(_ *xtc.Loop, r xtc.StallReport) {
			if !r.InFlight { // the report at the run's end, after the count
				select {
				case stalled <- struct{}{}:
				default:
				}
			}
		}))
	defer e.Close()
	inter, _ := e.NewClass(300, time.Minute)
	bulk, _ := e.NewClass(100, 0)
	e.Start()

	ctx := context.Background()
	e.GoInt(ctx, ctest.SpinFor(), int64(20*time.Millisecond), xtc.WithClass(bulk))
	e.GoInt(ctx, ctest.Ident(), 1, xtc.WithClass(inter))
	<-stalled // the watchdog counts at the end of the run, after the call returned

	is, _ := inter.Stats()
	fmt.Printf("interactive: runs %d, late %d, met its bound: %v\n", is.Runs, is.Late, is.MetBound())
	bs, _ := bulk.Stats()
	fmt.Printf("bulk: runs %d, stalls %d\n", bs.Runs, bs.Stalls)
	// Output:
	// interactive: runs 1, late 0, met its bound: true
	// bulk: runs 1, stalls 1
}

// Shutdown lets the calls in flight finish (or cancels them at ctx's end),
// drains the batch groups the executor owns and closes it; later calls
// fail with ErrClosed.
func ExampleExec_Shutdown() {
	e, _ := xtc.NewExec(2)
	e.Start()
	v, _ := e.GoInt(context.Background(), ctest.Ident(), 1)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	fmt.Println(v, e.Shutdown(ctx))
	_, err := e.GoInt(context.Background(), ctest.Ident(), 1)
	fmt.Println(errors.Is(err, xtc.ErrClosed))
	// Output:
	// 1 <nil>
	// true
}
