package xtc

import (
	"sync"
	"sync/atomic"
)

// Lane ids and limits of the lane policies (xtc_sched.h).
const (
	// SchedDefault, returned by a Select function, lets the loop's
	// ordinary picker (the classes' virtual-runtime order) decide.
	SchedDefault = -2
	// SchedLaneDefault is the id of the default lane (untagged work);
	// class lanes are 0..15 in creation order (SchedLaneOf).
	SchedLaneDefault = -1
	// SchedMaxBypass is the largest MaxBypass accepted.
	SchedMaxBypass = 1 << 20
)

// SchedLane is one ready lane as a Select function sees it: counts only,
// never a task or queue.
type SchedLane struct {
	ID     int    // SchedLaneDefault, or a class lane 0..15
	Shares int    // the class's shares; 100 for the default lane
	Runs   uint64 // tasks this lane has been served
	Bypass uint32 // consecutive opportunities ready and not served
	// Advisory counts of the batch groups whose driver runs in the lane.
	BatchGroups, BatchActive, BatchReady, BatchWaiting uint32
}

// SchedPolicy is a lane policy (xtc_sched_policy_t) for SchedPolicySet.
//
// Select is called on the loop's carrier thread, on its own stack, at
// each selection opportunity where two or more lanes are ready and no
// bypass override is due; lanes holds those lanes ordered by ID and is
// valid only during the call (the slice is reused). It returns the ID of
// one of them or SchedDefault; anything else is an invalid choice (the
// ordinary picker decides; counted in SchedStats.Invalid). Select must be
// quick, must not block and must not call into the loop. A panic in
// Select is recovered: it counts as an invalid choice and is kept for
// Panics; the loop goes on. A policy installed on several loops (the
// loops of an executor) has Select called concurrently from their
// carriers.
//
// MaxBypass (1..SchedMaxBypass) bounds the wait: a lane continuously
// ready for MaxBypass opportunities without service is served next,
// whatever Select says, so with L ready lanes each is served within
// MaxBypass + L opportunities.
type SchedPolicy struct {
	MaxBypass int
	Select    func(lanes []SchedLane) int

	panics atomic.Uint64
	pmu    sync.Mutex
	last   any
}

// Panics returns how many calls of Select panicked, over every loop the
// policy is installed on, and the last panic value.
func (p *SchedPolicy) Panics() (n uint64, last any) {
	if p == nil {
		return 0, nil
	}
	p.pmu.Lock()
	defer p.pmu.Unlock()
	return p.panics.Load(), p.last
}

// SchedStats are a loop's lane-policy counters (xtc_sched_stats_t),
// relaxed snapshots while the loop runs; all zero without a policy.
type SchedStats struct {
	Opportunities uint64 // picks with at least one ready lane
	Selects       uint64 // Select calls
	Defaults      uint64 // Select returned SchedDefault
	Invalid       uint64 // choices not naming a ready lane (panics included)
	Forced        uint64 // bypass overrides of the policy
	MaxWait       uint64 // most opportunities a ready lane waited
}
