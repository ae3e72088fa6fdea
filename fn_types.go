package xtc

import "fmt"

// FnState is the state of a deadline-preemptible function (XTC_FN_*).
type FnState int

// The states of an Fn (xtc_fn_t.state), plus FnRunning while a slice of it
// is in flight on a carrier.
const (
	FnIdle      FnState = 0 // never launched, or cancelled
	FnPreempted FnState = 1 // its slice ended first: Resume or Cancel it
	FnRunning   FnState = 2 // a slice is in flight
	FnDone      FnState = 3 // it returned: Result is valid
)

// String names the state ("idle", "preempted", "running", "done").
func (s FnState) String() string {
	switch s {
	case FnIdle:
		return "idle"
	case FnPreempted:
		return "preempted"
	case FnRunning:
		return "running"
	case FnDone:
		return "done"
	}
	return fmt.Sprintf("FnState(%d)", int(s))
}

// LaunchOpts configures Launch (xtc_launch_opts_t).
type LaunchOpts struct {
	Name       string // the child proc's name (stall and overflow reports); "" = "xtc_launch"
	MailboxCap int    // the child's mailbox capacity; 0 = default
	Loop       int    // executor loop of the child; < 0 or a nil LaunchOpts: the loops in turn
}
