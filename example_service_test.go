package xtc_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/xtc-go/xtc"
)

// An executor configured at construction, a batch group it owns fed with
// Do from goroutines, and one Shutdown that drains the group.
func ExampleExec_NewBatch() {
	e, err := xtc.NewExec(1, xtc.WithStallWatch(time.Second, nil))
	if err != nil {
		fmt.Println(err)
		return
	}
	b, _ := e.NewBatch(xtc.BatchOpts{Capacity: 8, MaxActive: 4, ResourceCapacity: 4,
		Step: func(items []xtc.BatchItem, res []xtc.BatchResult) error {
			for i := range items {
				n := items[i].Request.(*int)
				if *n *= 2; *n >= 8 {
					res[i].State = xtc.BatchDone
				}
			}
			return nil
		}})
	e.Start()
	n := 1
	out, err := b.Do(context.Background(), &n, xtc.WithCharge(2))
	fmt.Println(*out.(*int), err)
	fmt.Println(e.Shutdown(context.Background()))
	_, err = b.Do(context.Background(), &n)
	fmt.Println(errors.Is(err, xtc.ErrClosed))
	// Output:
	// 8 <nil>
	// <nil>
	// true
}
