//go:build cgo

package xtc_test

import (
	"errors"
	"fmt"

	"github.com/xtc-go/xtc"
)

// A continuous-batching group: four requests of 5, 1, 2 and 1 rounds, at
// most two active. Each finished member's slot is refilled at the next
// iteration boundary, so 9 member-rounds take 5 iterations and the short
// requests finish first.
func ExampleBatchCreate() {
	loop, err := xtc.LoopInit()
	if err != nil {
		panic(err)
	}
	defer loop.Fini()

	type req struct {
		name         string
		length, done int
	}
	b, err := xtc.BatchCreate(loop, &xtc.BatchOpts{
		Capacity: 4, MaxActive: 2, ResourceCapacity: 2,
		Step: func(items []xtc.BatchItem, res []xtc.BatchResult) error {
			for i, it := range items {
				r := it.Request.(*req)
				if r.done++; r.done == r.length {
					res[i].State = xtc.BatchDone
				}
			}
			return nil
		},
		Complete: func(h uint64, request any, outcome error) {
			fmt.Println("done:", request.(*req).name, outcome)
		},
	})
	if err != nil {
		panic(err)
	}
	for i, n := range []int{5, 1, 2, 1} {
		if _, err := b.Submit(&req{name: fmt.Sprint("r", i), length: n}, 1); err != nil {
			panic(err)
		}
	}
	// Close, run until the driver ends, destroy, then Fini.
	xtc.BatchClose(b, xtc.BatchDrain)
	loop.Run()
	st, _ := b.Stats()
	fmt.Println(st.MemberRounds, "member-rounds in", st.Iterations, "iterations")
	b.Destroy()
	// Output:
	// done: r1 <nil>
	// done: r2 <nil>
	// done: r3 <nil>
	// done: r0 <nil>
	// 9 member-rounds in 5 iterations
}

// Cancel ends an accepted request with ErrAborted at the next iteration
// boundary, whether it waits or runs; a cancel after completion is
// ErrNotfound.
func ExampleBatch_Cancel() {
	loop, _ := xtc.LoopInit()
	defer loop.Fini()
	b, _ := xtc.BatchCreate(loop, &xtc.BatchOpts{
		Capacity: 2, MaxActive: 1, ResourceCapacity: 1,
		Step: func(items []xtc.BatchItem, res []xtc.BatchResult) error {
			for i := range items {
				res[i].State = xtc.BatchDone
			}
			return nil
		},
		Complete: func(h uint64, request any, outcome error) {
			fmt.Println(request, "aborted:", errors.Is(outcome, xtc.ErrAborted))
		},
	})
	b.Submit("kept", 1)
	h, _ := b.Submit("cancelled", 1)
	b.Cancel(h)
	xtc.BatchClose(b, xtc.BatchDrain)
	loop.Run()
	fmt.Println(errors.Is(b.Cancel(h), xtc.ErrNotfound))
	b.Destroy()
	// Output:
	// cancelled aborted: true
	// kept aborted: false
	// true
}

// A member that waits for something returns BatchBlocked: it keeps its
// slot but leaves the vector until Resume. Mutating the group from inside
// Step returns ErrDeadlk; here a Go task resumes it after the step.
func ExampleBatch_Resume() {
	loop, _ := xtc.LoopInit()
	defer loop.Fini()
	var b *xtc.Batch
	var blocked uint64
	b, _ = xtc.BatchCreate(loop, &xtc.BatchOpts{
		Capacity: 1, MaxActive: 1, ResourceCapacity: 1,
		Step: func(items []xtc.BatchItem, res []xtc.BatchResult) error {
			if items[0].Rounds == 0 {
				fmt.Println("inside step:", errors.Is(b.Resume(items[0].Handle), xtc.ErrDeadlk))
				blocked = items[0].Handle
				res[0].State = xtc.BatchBlocked
				xtc.TaskSpawn(loop, func(*xtc.Task) xtc.TaskResult {
					fmt.Println("resume:", b.Resume(blocked))
					xtc.BatchClose(b, xtc.BatchDrain)
					return xtc.TaskDone
				})
				return nil
			}
			res[0].State = xtc.BatchDone
			return nil
		},
		Complete: func(h uint64, request any, outcome error) {
			fmt.Println("complete:", outcome)
		},
	})
	b.Submit(nil, 1)
	loop.Run()
	b.Destroy()
	// Output:
	// inside step: true
	// resume: <nil>
	// complete: <nil>
}

// A Step error fails the members of that step; a member's own error (and a
// panic in Step) comes back through Complete, usable with errors.Is.
func ExampleBatchResult() {
	loop, _ := xtc.LoopInit()
	defer loop.Fini()
	errTooLong := errors.New("prompt too long")
	b, _ := xtc.BatchCreate(loop, &xtc.BatchOpts{
		Capacity: 3, MaxActive: 3, ResourceCapacity: 3,
		Step: func(items []xtc.BatchItem, res []xtc.BatchResult) error {
			for i, it := range items {
				switch it.Request {
				case "long":
					res[i] = xtc.BatchResult{State: xtc.BatchError, Err: errTooLong}
				default:
					res[i].State = xtc.BatchDone
				}
			}
			return nil
		},
		Complete: func(h uint64, request any, outcome error) {
			fmt.Println(request, errors.Is(outcome, errTooLong))
		},
	})
	b.Submit("short", 1)
	b.Submit("long", 1)
	xtc.BatchClose(b, xtc.BatchDrain)
	loop.Run()
	st, _ := b.Stats()
	fmt.Println("failed:", st.Failed)
	b.Destroy()
	// Output:
	// short false
	// long true
	// failed: 1
}
