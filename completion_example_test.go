//go:build cgo

package xtc_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/xtc-go/xtc"
	"github.com/xtc-go/xtc/internal/cfuture"
)

// A goroutine runs a C function as a fiber on an executor loop and waits
// for its result without blocking an OS thread: the result comes back
// through a completion queue whose eventfd Go's netpoller watches.
func ExampleDispatch() {
	e, err := xtc.NewExec(1) // serves until Close
	if err != nil {
		panic(err)
	}
	defer e.Close()
	if _, err := e.Start(); err != nil {
		panic(err)
	}

	// cfuture.AddOne is `intptr_t add_one(void *arg)` from the test
	// package's cgo code: it returns arg + 1.
	f, err := xtc.Dispatch(e.Loop(0), cfuture.AddOne, cfuture.Arg(41))
	if err != nil {
		panic(err)
	}
	v, err := f.Wait(context.Background())
	fmt.Println(v, err)

	// DispatchWait is the same in one call
	v, err = xtc.DispatchWait(context.Background(), e.Loop(0), cfuture.AddOne, cfuture.Arg(1))
	fmt.Println(v, err)
	// Output:
	// 42 <nil>
	// 2 <nil>
}

// Wait gives up when its context ends; Cancel then stops the work
// cooperatively (the C function sees xtc_dispatch_cancelled() == 1).
func ExampleFuture_Wait() {
	e, _ := xtc.NewExec(1)
	defer e.Close()
	_, _ = e.Start()

	started := cfuture.Runs()
	f, _ := xtc.Dispatch(e.Loop(0), cfuture.UntilCancelled, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	_, err := f.Wait(ctx)
	fmt.Println(errors.Is(err, context.DeadlineExceeded))

	// cancel it while it runs (it returns 99 then): wait until it started
	for end := time.Now().Add(30 * time.Second); cfuture.Runs() == started && time.Now().Before(end); {
		time.Sleep(time.Millisecond)
	}
	f.Cancel()
	v, err := f.Wait(context.Background())
	fmt.Println(v, errors.Is(err, xtc.ErrAborted))
	// Output:
	// true
	// 99 true
}
