//go:build !cgo

package xtc

import (
	"context"
	"errors"
	"testing"
)

// Without cgo the executor, Exec.Go, mailboxes and deadline-preemptible
// functions return ErrNoCgo (matching ErrNosys), never panic.
func TestNoCgoCallsReturnErrNoCgo(t *testing.T) {
	ctx := context.Background()
	e, err := NewExec(1)
	check := func(name string, err error) {
		if !errors.Is(err, ErrNoCgo) || !errors.Is(err, ErrNosys) {
			t.Errorf("%s: %v, want ErrNoCgo", name, err)
		}
	}
	check("NewExec", err)
	_, err = e.Go(ctx, nil, nil)
	check("Exec.Go", err)
	_, err = e.LaunchFn(ctx, nil, nil, 1)
	check("Exec.LaunchFn", err)
	var f Fn
	check("FnLaunch", FnLaunch(e, &f, nil, nil, 1))
	_, err = f.Resume(ctx, 1)
	check("Fn.Resume", err)
	_, err = Launch(ctx, e, nil, nil, 1, nil)
	check("Launch", err)
	_, err = e.NewMailbox(0, 0)
	check("Exec.NewMailbox", err)
	check("Exec.Close", e.Close())
	if FnCompleted(&f) || f.State() != FnIdle {
		t.Error("a !cgo Fn is idle")
	}
}
