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

// A loop runs stackless tasks whose bodies are Go functions, on the loop's
// own thread.
func ExampleTaskSpawn() {
	loop, err := xtc.LoopInit()
	if err != nil {
		panic(err)
	}
	defer loop.Fini()

	n := 0
	xtc.TaskSpawn(loop, func(*xtc.Task) xtc.TaskResult {
		n++
		if n < 3 {
			return xtc.TaskResched // run again
		}
		return xtc.TaskDone
	})
	if err := loop.Run(); err != nil { // returns when nothing is left
		panic(err)
	}
	fmt.Println("runs:", n)
	// Output: runs: 3
}

// Timers call Go functions on the loop thread, no earlier than asked.
func ExampleTimerSet() {
	loop, _ := xtc.LoopInit()
	defer loop.Fini()

	// each delay counts from its own call: set in this order, the
	// output order holds however slowly the calls run (under -asan the
	// reverse order printed "second" first)
	xtc.TimerSet(loop, time.Millisecond, func() { fmt.Println("first") })
	xtc.TimerSet(loop, 2*time.Millisecond, func() { fmt.Println("second") })
	t, _ := xtc.TimerSet(loop, time.Millisecond, func() { fmt.Println("never") })
	t.Cancel()
	loop.Run()
	// Output:
	// first
	// second
}

// Procs run C functions (here one of the test kernels; a program passes
// its own, e.g. unsafe.Pointer(C.my_worker)) on fiber stacks; goroutines
// talk to them with Send.
func ExampleProcSpawn() {
	loop, _ := xtc.LoopInit()
	defer loop.Fini()

	cell := ctest.NewCell(0) // C memory the proc writes its sum to
	defer cell.Free()
	pid, err := xtc.ProcSpawn(loop, ctest.RecvSum, cell.Ptr(), &xtc.ProcOpts{Name: "summer"})
	if err != nil {
		panic(err)
	}
	for _, v := range []byte{1, 2, 3} {
		xtc.Send(pid, []byte{v, 0, 0, 0, 0, 0, 0, 0})
	}
	xtc.Send(pid, nil) // an empty message ends the proc
	loop.Run()
	fmt.Println("sum:", cell.Sum())
	// Output: sum: 6
}

// Every error is an *xtc.Error wrapping one of the generated sentinels.
func ExampleErrno() {
	_, err := xtc.TaskSpawn(nil, func(*xtc.Task) xtc.TaskResult { return xtc.TaskDone })
	fmt.Println(errors.Is(err, xtc.ErrInval))
	var xe *xtc.Error
	if errors.As(err, &xe) {
		fmt.Println(xe.Op, xe.Code.Name())
	}
	// Output:
	// true
	// xtc_task_spawn XTC_E_INVAL
}

// A parked task is woken from another goroutine; RunContext bounds the run.
func ExampleWaker() {
	loop, _ := xtc.LoopInit()
	defer loop.Fini()

	wakers := make(chan xtc.Waker, 1)
	runs := 0
	xtc.TaskSpawn(loop, func(t *xtc.Task) xtc.TaskResult {
		runs++
		if runs == 1 {
			w, _ := t.Waker()
			wakers <- w
			return xtc.TaskPending // until woken
		}
		return xtc.TaskDone
	})
	go func() { (<-wakers).Wake() }()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := loop.RunContext(ctx); err != nil {
		panic(err)
	}
	fmt.Println("runs:", runs)
	// Output: runs: 2
}
