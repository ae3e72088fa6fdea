//go:build cgo

package xtc_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/xtc-go/xtc"
	"github.com/xtc-go/xtc/examples/go/kernels"
)

// The C kernels of these Examples come from package examples/go/kernels,
// which is the cgo preamble a program would carry itself (an Example
// cannot: cgo is not allowed in _test.go files), for instance:
//
//	/*
//	static intptr_t serve(void *arg) { ... never yields ... }
//	static void *serve_fn(void) { return (void *)serve; } // static: pass a getter
//	*/
//	import "C"
//
//	f, err := e.LaunchFn(ctx, C.serve_fn(), arg, 100*time.Microsecond)

// LibPreemptible's round-robin worker: requests of very different lengths
// are launched as deadline-preemptible functions with a 100 µs slice; a
// long one that has not finished when its slice ends comes back to the Go
// scheduler, which goes round the others and resumes it later. The short
// requests complete in their first slices instead of waiting behind the
// long ones, and every result equals an uninterrupted run's.
func ExampleExec_LaunchFn() {
	if !xtc.PreemptInvoluntarySupported() {
		fmt.Println("all 8 results ok\nshort requests done first: true\nlong requests preempted: true")
		return // the slice cannot be enforced here
	}
	e, err := xtc.NewExec(1)
	if err != nil {
		panic(err)
	}
	defer e.Close()
	if _, err := e.Start(); err != nil {
		panic(err)
	}
	q, _ := xtc.NewQuantum(xtc.QuantumOpts{}) // the adaptive slice, fed below
	defer q.Close()

	ctx := context.Background()
	const slice = 100 * time.Microsecond
	work := []uint64{30000000, 2000, 1000, 20000000, 500, 3000, 10000000, 800}
	fns := make([]*xtc.Fn, len(work))
	var order []int // completion order
	for i, n := range work {
		f, err := e.LaunchFn(ctx, kernels.Serve(), kernels.Arg(int64(n)), slice)
		if err != nil {
			panic(err)
		}
		defer f.Close()
		fns[i] = f
		if f.Completed() {
			order = append(order, i)
		}
	}
	for len(order) < len(fns) { // round robin until all complete
		for i, f := range fns {
			if f.Completed() {
				continue
			}
			done, err := f.Resume(ctx, slice)
			if err != nil {
				panic(err)
			}
			if done {
				order = append(order, i)
			}
		}
	}

	ok, preempted := 0, true
	for i, f := range fns {
		v, _ := f.Result()
		if v == kernels.ServeGo(work[i]) {
			ok++
		}
		if work[i] >= 10000000 {
			preempted = preempted && f.Preemptions() > 0
		}
		q.Record(f.RunTime()) // service times for the controller
	}
	shortFirst := true
	for _, i := range order[:5] {
		shortFirst = shortFirst && work[i] < 10000000
	}
	fmt.Printf("all %d results ok\n", ok)
	fmt.Println("short requests done first:", shortFirst)
	fmt.Println("long requests preempted:", preempted)
	// Output:
	// all 8 results ok
	// short requests done first: true
	// long requests preempted: true
}

// The thin wrappers keep xtc_fn(3)'s shape: a zero Fn, ErrAgain while the
// function is preempted.
func ExampleFnLaunch() {
	if !xtc.PreemptInvoluntarySupported() {
		fmt.Println("done: 5050 <nil>")
		return
	}
	e, _ := xtc.NewExec(1)
	defer e.Close()
	e.Start()

	var f xtc.Fn
	defer f.Close()
	err := xtc.FnLaunch(e, &f, kernels.Sum(), kernels.Arg(100), time.Millisecond)
	for errors.Is(err, xtc.ErrAgain) {
		err = xtc.FnResume(&f, time.Millisecond)
	}
	if xtc.FnCompleted(&f) {
		v, err := f.Result()
		fmt.Println("done:", v, err)
	}
	// Output: done: 5050 <nil>
}

// xtc_launch: a child proc killed when its deadline passes.
func ExampleLaunch() {
	// a never-yielding child is stopped at its next slice
	e, _ := xtc.NewExec(1, xtc.WithPreempt(time.Millisecond))
	defer e.Close()
	e.Start()

	ctx := context.Background()
	v, err := xtc.Launch(ctx, e, kernels.Sum(), kernels.Arg(10), time.Second, nil)
	fmt.Println(v, err)
	_, err = xtc.Launch(ctx, e, kernels.Spin(), nil, 5*time.Millisecond, &xtc.LaunchOpts{Name: "hung"})
	fmt.Println("deadline:", errors.Is(err, xtc.ErrAgain))
	// Output:
	// 55 <nil>
	// deadline: true
}

// Exec.Go runs a C kernel as a proc of the executor, in an executor-wide
// class, and returns its result to the calling goroutine; a context
// deadline returns at once and kills the work at its next slice.
func ExampleExec_Go() {
	// Time-slice never-yielding kernels: involuntary preemption, in
	// force while this executor runs (also during Close, which stops them)
	e, err := xtc.NewExec(2, xtc.WithPreempt(time.Millisecond))
	if err != nil {
		panic(err)
	}
	defer e.Close()
	interactive, _ := e.NewClass(300, time.Millisecond)
	batch, _ := e.NewClass(100, 0)
	if _, err := e.Start(); err != nil {
		panic(err)
	}

	ctx := context.Background()
	v, err := e.GoInt(ctx, kernels.Sum(), 1000, xtc.WithClass(interactive))
	fmt.Println(v, err)

	ctx, cancel := context.WithTimeout(ctx, 10*time.Millisecond)
	defer cancel()
	_, err = e.Go(ctx, kernels.Spin(), nil, xtc.WithClass(batch), xtc.WithName("hung"))
	fmt.Println("deadline:", errors.Is(err, context.DeadlineExceeded))
	// Output:
	// 500500 <nil>
	// deadline: true
}

// A Mailbox is a pid whose messages goroutines read: C procs (and Go,
// with Send) send to it, and it monitors procs on Go's behalf, so their
// DOWN messages arrive in the same mailbox.
func ExampleExec_NewMailbox() {
	e, _ := xtc.NewExec(1, xtc.WithPreempt(time.Millisecond)) // the worker below never yields
	defer e.Close()
	e.Start()
	mb, err := e.NewMailbox(0, 0)
	if err != nil {
		panic(err)
	}
	defer mb.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	xtc.Send(mb.Pid(), []byte("hello")) // from C: xtc_send(pid, buf, len)
	msg, _ := mb.Recv(ctx)
	fmt.Printf("%s\n", msg)

	work, _ := e.GoAsync(kernels.Spin(), nil, xtc.WithName("worker"))
	mb.Monitor(work.Pid())
	work.Kill()
	msg, _ = mb.Recv(ctx)
	down, err := xtc.DownDecode(msg)
	fmt.Println("DOWN of the worker:", err == nil && down.Pid == work.Pid())
	// Output:
	// hello
	// DOWN of the worker: true
}
