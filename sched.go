//go:build cgo

package xtc

// Lane policies (xtc_sched.h, xtc_sched(3)): choose which ready lane of a
// loop runs next. A Go Select function is called by the C picker through
// a trampoline on the carrier's own stack with the Go-callback guard
// raised; the policy travels as a cgo.Handle held by the loop until Fini.

/*
#include <stdint.h>
#include "xtc.h"
#include "xtc_sched.h"
#include "gobridge_int.h"

extern int xtcGoSchedSelect(uintptr_t h, xtc_sched_lane_t *lanes, size_t n);

static int xtc_go_sched_tramp(const xtc_sched_lane_t *v, size_t n, void *user)
{
	xtc__gobridge_cb_enter();
	int rc = xtcGoSchedSelect((uintptr_t)user, (xtc_sched_lane_t *)v, n);
	xtc__gobridge_cb_leave();
	return rc;
}

static int xtc_go_sched_policy_set(xtc_loop_t *loop, int32_t max_bypass,
                                   uintptr_t h)
{
	xtc_sched_policy_t p = { .size = sizeof(p),
	    .version = XTC_SCHED_VERSION, .max_bypass = max_bypass,
	    .select = xtc_go_sched_tramp, .user = (void *)h };
	return xtc_sched_policy_set(loop, &p);
}

static int xtc_go_sched_get_stats(xtc_loop_t *loop, xtc_sched_stats_t *st)
{
	st->size = sizeof(*st);
	st->version = XTC_SCHED_VERSION;
	return xtc_sched_get_stats(loop, st);
}
*/
import "C"

import "math"

// What a panicking Select returns to C: no lane has this id, so the
// runtime counts an invalid choice and the ordinary picker decides.
const schedPanicChoice = -3

// schedInstall is what C holds (as a handle) for one loop's Go policy:
// the policy and the lanes buffer reused by every call on that loop.
type schedInstall struct {
	p   *SchedPolicy
	buf []SchedLane
}

// recordPanic counts a panic of Select (callGo's sink): the choice is
// invalid, the loop keeps running.
func (p *SchedPolicy) recordPanic(v any) {
	p.pmu.Lock()
	p.last = v
	p.panics.Add(1)
	p.pmu.Unlock()
}

func clampBypass(n int) C.int32_t {
	switch {
	case n > math.MaxInt32:
		return C.int32_t(SchedMaxBypass + 1) // XTC_E_RANGE
	case n < 0:
		return -1 // XTC_E_INVAL
	}
	return C.int32_t(n)
}

// SchedPolicySet installs p as loop's lane policy (xtc_sched_policy_set).
// Setup-only: before the loop's first run (ErrAgain afterwards, also for a
// loop of an executor that has run). ErrInval for a nil loop, policy or
// Select, a MaxBypass <= 0 or a finalised loop; ErrRange for a MaxBypass
// above SchedMaxBypass; ErrNosys in a build without lane policies. p is
// referenced (not copied) until the loop's Fini.
func SchedPolicySet(loop *Loop, p *SchedPolicy) error {
	const op = "xtc_sched_policy_set"
	if loop == nil || p == nil || p.Select == nil {
		return &Error{Op: op, Code: ErrInval}
	}
	in := &schedInstall{p: p, buf: make([]SchedLane, C.XTC_LOOP_MAX_CLASSES+1)}
	h, ok := loop.addHandle(in)
	if !ok {
		return errClosed(op)
	}
	err := loop.withC(op, func(c *C.xtc_loop_t) C.int {
		return C.xtc_go_sched_policy_set(c, clampBypass(p.MaxBypass),
			C.uintptr_t(h))
	})
	if err != nil {
		loop.dropHandle(h)
	}
	return err
}

// SchedContinuousSet installs the built-in continuous-batching policy
// (xtc_sched_continuous_set): among ready class lanes whose batch groups
// report ready members, the one bypassed longest, ties rotating by class
// id; otherwise the ordinary picker. Same rules and errors as
// SchedPolicySet.
func SchedContinuousSet(loop *Loop, maxBypass int) error {
	const op = "xtc_sched_continuous_set"
	return loop.withC(op, func(c *C.xtc_loop_t) C.int {
		return C.xtc_sched_continuous_set(c, C.int(clampBypass(maxBypass)))
	})
}

// SchedStats returns the loop's lane-policy counters
// (xtc_sched_get_stats), from any goroutine. ErrInval for a nil or
// finalised loop.
func (loop *Loop) SchedStats() (SchedStats, error) {
	var st C.xtc_sched_stats_t
	err := loop.withC("xtc_sched_get_stats", func(c *C.xtc_loop_t) C.int {
		return C.xtc_go_sched_get_stats(c, &st)
	})
	if err != nil {
		return SchedStats{}, err
	}
	return SchedStats{
		Opportunities: uint64(st.opportunities),
		Selects:       uint64(st.selects),
		Defaults:      uint64(st.defaults),
		Invalid:       uint64(st.invalid),
		Forced:        uint64(st.forced),
		MaxWait:       uint64(st.max_wait),
	}, nil
}

// SchedLaneOf returns the lane id of cls (xtc_sched_lane_of): its creation
// index 0..15 on its loop, SchedLaneDefault for nil. ErrInval once the
// class's loop was finalised.
func SchedLaneOf(cls *ExecClass) (int, error) {
	const op = "xtc_sched_lane_of"
	if cls == nil {
		var lane C.int
		if rc := C.xtc_sched_lane_of(nil, &lane); rc != 0 {
			return 0, mkerr(op, int(rc))
		}
		return int(lane), nil
	}
	var lane C.int
	var rc C.int
	if !cls.with(func(c C.xtc_exec_class_t) { rc = C.xtc_sched_lane_of(c, &lane) }) {
		return 0, errClosed(op)
	}
	if rc != 0 {
		return 0, mkerr(op, int(rc))
	}
	return int(lane), nil
}
