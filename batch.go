//go:build cgo

package xtc

/*
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "xtc.h"
#include "loop_int.h"

// Exported from batch_cb.go (declarations only there).
extern int  xtcGoBatchStep(uintptr_t h, xtc_batch_item_t *items,
                           xtc_batch_result_t *res, size_t n);
extern void xtcGoBatchComplete(uintptr_t h, uint64_t handle, uintptr_t key,
                               int outcome);

// The engine calls step/complete on its driver fiber; Go must not run
// there, so each trampoline moves the call onto the carrier stack
// (xtc__carrier_call raises the Go-callback guard around it).
typedef struct {
	xtc_batch_item_t *items;
	xtc_batch_result_t *res;
	size_t n;
	uintptr_t h;
	int rc;
} xtc_go_bstep_t;

static void xtc_go_bstep_cc(void *p)
{
	xtc_go_bstep_t *a = p;
	a->rc = xtcGoBatchStep(a->h, a->items, a->res, a->n);
}

static int xtc_go_bstep(const xtc_batch_item_t *items,
                        xtc_batch_result_t *res, size_t n, void *user)
{
	xtc_go_bstep_t a = { (xtc_batch_item_t *)items, res, n,
	                     (uintptr_t)user, 0 };
	int rc = xtc__carrier_call(xtc_go_bstep_cc, &a);
	return rc != 0 ? rc : a.rc;
}

typedef struct {
	uintptr_t h;
	uint64_t handle;
	void *req;
	int outcome;
} xtc_go_bdone_t;

static void xtc_go_bdone_cc(void *p)
{
	xtc_go_bdone_t *a = p;
	xtcGoBatchComplete(a->h, a->handle, (uintptr_t)a->req, a->outcome);
}

static void xtc_go_bdone(uint64_t handle, void *req, int outcome, void *user)
{
	xtc_go_bdone_t a = { (uintptr_t)user, handle, req, outcome };
	(void)xtc__carrier_call(xtc_go_bdone_cc, &a);
}

static int xtc_go_batch_create(xtc_loop_t *loop, size_t cap, size_t act,
                               uint64_t res, xtc_exec_class_t cls,
                               const char *name, uintptr_t h,
                               xtc_batch_t **out)
{
	xtc_batch_opts_t o;

	memset(&o, 0, sizeof o);
	o.size = sizeof o;
	o.version = XTC_BATCH_VERSION;
	o.capacity = cap;
	o.max_active = act;
	o.resource_capacity = res;
	o.sched_class = cls;
	o.step = xtc_go_bstep;
	o.complete = xtc_go_bdone;
	o.user = (void *)h;
	o.name = name;
	return xtc_batch_create(loop, &o, out);
}

// The request pointer C keeps is a small integer key into the Batch's own
// table, never a Go pointer.
static int xtc_go_batch_submit(xtc_batch_t *g, uintptr_t key,
                               uint64_t charge, uint64_t *out)
{
	return xtc_batch_submit(g, (void *)key, charge, out);
}

static int xtc_go_batch_submit_mt(xtc_batch_t *g, uintptr_t key,
                                  uint64_t charge, uint64_t *out)
{
	return xtc_batch_submit_mt(g, (void *)key, charge, out);
}

static int xtc_go_batch_driver_alive(xtc_batch_t *g, unsigned *closed)
{
	xtc_batch_stats_t st;

	if (xtc_batch_get_stats(g, &st) != 0)
		return 0;
	*closed = st.closed;
	return (int)st.driver_alive;
}
*/
import "C"

import (
	"context"
	"errors"
	"runtime"
	"runtime/cgo"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"
)

// Batch is a continuous-batching group (xtc_batch_t) on one loop: a pinned
// driver proc calls Step once per iteration with every ready member and
// refills the vector from the FCFS queue at each iteration boundary.
// Requests may be Go values of any type: C holds only an integer key.
//
// Mutators (Submit, Cancel, Resume, Close, Destroy) run on the loop's
// owner thread: called from another goroutine they are posted there and
// waited for (as Loop's owner-only calls); from a Go callback of the loop
// they run directly. Inside Step or Complete they return ErrDeadlk.
type Batch struct {
	loop     *Loop
	c        *C.xtc_batch_t
	h        cgo.Handle
	step     func([]BatchItem, []BatchResult) error
	complete func(uint64, any, error)

	// owner thread only
	reqs    map[uintptr]any // key -> request
	nextKey uintptr
	errs    map[uint64]error // handle -> Go error for Complete
	items   []BatchItem
	results []BatchResult

	completePanics atomic.Uint64
	destroyed      atomic.Bool

	// cross-thread hand-ins (SubmitMT, Do): any goroutine
	mtReqs sync.Map // key (mtKeyBit set) -> *mtEntry
	mtKey  atomic.Uintptr
}

// Keys of hand-ins have this bit; owner-side keys count up from 1.
const mtKeyBit = uintptr(1) << (unsafe.Sizeof(uintptr(0))*8 - 2)

type mtEntry struct {
	req  any
	done chan mtResult // Do only (buffered 1); nil: Complete gets it
}

type mtResult struct {
	req any
	err error
}

func (b *Batch) reqOf(key uintptr) any {
	if key&mtKeyBit != 0 {
		if e, ok := b.mtReqs.Load(key); ok {
			return e.(*mtEntry).req
		}
		return nil
	}
	return b.reqs[key]
}

// SubmitMT hands request in from any goroutine (xtc_batch_submit_mt),
// without a trip to the loop's thread: lock-free, never blocking. nil
// means Complete runs exactly once for the handle (a hand-in that finds
// the group full waits for a slot in submission order). ErrAgain when the
// group is closed or its hand-in pool or ring is full (the request is not
// kept); ErrRange for a charge above the resource capacity. Not after
// Destroy.
func (b *Batch) SubmitMT(request any, charge uint64) (uint64, error) {
	return b.submitMT(&mtEntry{req: request}, charge)
}

func (b *Batch) submitMT(e *mtEntry, charge uint64) (uint64, error) {
	const op = "xtc_batch_submit_mt"
	if b == nil || b.destroyed.Load() {
		return 0, &Error{Op: op, Code: ErrInval}
	}
	key := mtKeyBit | b.mtKey.Add(1)
	b.mtReqs.Store(key, e) // before the call: complete may run at once
	var h C.uint64_t
	rc := C.xtc_go_batch_submit_mt(b.c, C.uintptr_t(key), C.uint64_t(charge), &h)
	if rc != 0 {
		b.mtReqs.Delete(key)
		return 0, mkerr(op, int(rc))
	}
	return uint64(h), nil
}

// CancelMT asks for handle's cancellation from any goroutine
// (xtc_batch_cancel_mt): applied at the next boundary, discarded when the
// handle has completed. ErrAgain when the ring is full or the driver has
// ended.
func (b *Batch) CancelMT(handle uint64) error {
	const op = "xtc_batch_cancel_mt"
	if b == nil || b.destroyed.Load() {
		return &Error{Op: op, Code: ErrInval}
	}
	return mkerr(op, int(C.xtc_batch_cancel_mt(b.c, C.uint64_t(handle))))
}

// ResumeMT is Resume from any goroutine (xtc_batch_resume_mt), applied at
// the next boundary; codes as CancelMT.
func (b *Batch) ResumeMT(handle uint64) error {
	const op = "xtc_batch_resume_mt"
	if b == nil || b.destroyed.Load() {
		return &Error{Op: op, Code: ErrInval}
	}
	return mkerr(op, int(C.xtc_batch_resume_mt(b.c, C.uint64_t(handle))))
}

// Do runs request through the group (charge 1) and returns it once it
// completed (Step sees it as BatchItem.Request and may change what it
// points to), with nil, or with the member's error. Any number of
// goroutines may call it at once; the completion is handed to the waiting
// goroutine through a channel from the loop's thread, so no OS thread is
// held per waiter. Do completions do not go to Complete.
//
// When ctx is done first, Do issues exactly one CancelMT and returns
// ctx.Err() once the cancel took effect; if the request finished first it
// returns the result and nil (exactly one of the two). While the hand-in
// pool is full Do retries until ctx is done; a closed group returns an
// error matching ErrAgain.
func (b *Batch) Do(ctx context.Context, request any) (any, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	e := &mtEntry{req: request, done: make(chan mtResult, 1)}
	var h uint64
	for {
		var err error
		h, err = b.submitMT(e, 1)
		if err == nil {
			break
		}
		if !errors.Is(err, ErrAgain) || b.closedOrEnded() {
			return nil, err
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(20 * time.Microsecond):
		}
	}
	stop := context.AfterFunc(ctx, func() {
		// one cancel; ErrAgain only while the ring is full
		for errors.Is(b.CancelMT(h), ErrAgain) && !b.closedOrEnded() {
			runtime.Gosched()
		}
	})
	r := <-e.done
	stop()
	if r.err != nil && errors.Is(r.err, ErrAborted) && ctx.Err() != nil {
		return nil, ctx.Err()
	}
	return r.req, r.err
}

func (b *Batch) closedOrEnded() bool {
	var closed C.unsigned
	alive := C.xtc_go_batch_driver_alive(b.c, &closed)
	return alive == 0 || closed != 0
}

// BatchCreate creates a group on loop (xtc_batch_create). Setup-only: after
// the loop's first run it returns ErrAgain. ErrInval for nil opts, a nil
// Step or Complete, a class of another loop; ErrInval/ErrRange for sizes
// out of range (as the C call). ErrNosys when built without the feature.
func BatchCreate(loop *Loop, opts *BatchOpts) (*Batch, error) {
	const op = "xtc_batch_create"
	if loop == nil {
		return nil, errClosed(op)
	}
	if opts == nil || opts.Step == nil || opts.Complete == nil ||
		opts.Capacity < 0 || opts.MaxActive < 0 {
		return nil, &Error{Op: op, Code: ErrInval}
	}
	var cls C.xtc_exec_class_t
	if opts.Class != nil {
		if opts.Class.l != loop {
			return nil, &Error{Op: op, Code: ErrInval}
		}
		cls = opts.Class.c
	}
	b := &Batch{
		loop:     loop,
		step:     opts.Step,
		complete: opts.Complete,
		reqs:     map[uintptr]any{},
		errs:     map[uint64]error{},
	}
	h, ok := loop.addHandle(b)
	if !ok {
		return nil, errClosed(op)
	}
	b.h = h
	var name *C.char
	if opts.Name != "" {
		// the driver's spawn copies the name
		name = C.CString(opts.Name)
		defer C.free(unsafe.Pointer(name))
	}
	var rc C.int
	err := loop.exec(op, func() {
		rc = C.xtc_go_batch_create(loop.c, C.size_t(opts.Capacity),
			C.size_t(opts.MaxActive), C.uint64_t(opts.ResourceCapacity),
			cls, name, C.uintptr_t(h), &b.c)
	})
	if err == nil {
		err = mkerr(op, int(rc))
	}
	if err != nil {
		loop.dropHandle(h)
		return nil, err
	}
	return b, nil
}

// call runs a mutator on the owner thread.
func (b *Batch) call(op string, fn func() C.int) error {
	if b == nil || b.destroyed.Load() {
		return &Error{Op: op, Code: ErrInval}
	}
	var rc C.int
	if err := b.loop.exec(op, func() {
		if b.destroyed.Load() {
			rc = C.int(ErrInval)
			return
		}
		rc = fn()
	}); err != nil {
		return err
	}
	return mkerr(op, int(rc))
}

// Submit queues request with a fixed charge (xtc_batch_submit) and returns
// its handle (monotonic, never reused). ErrAgain when the group is full or
// closed (the request is not kept); ErrRange for a charge above the
// resource capacity; ErrDeadlk from inside Step or Complete.
func (b *Batch) Submit(request any, charge uint64) (uint64, error) {
	var h C.uint64_t
	err := b.call("xtc_batch_submit", func() C.int {
		b.nextKey++
		key := b.nextKey
		b.reqs[key] = request
		rc := C.xtc_go_batch_submit(b.c, C.uintptr_t(key), C.uint64_t(charge), &h)
		if rc != 0 {
			delete(b.reqs, key)
		}
		return rc
	})
	return uint64(h), err
}

// Cancel cancels an accepted request (xtc_batch_cancel): it completes with
// an error matching ErrAborted at the next iteration boundary. nil also
// when repeated; ErrNotfound once it completed.
func (b *Batch) Cancel(handle uint64) error {
	return b.call("xtc_batch_cancel", func() C.int {
		return C.xtc_batch_cancel(b.c, C.uint64_t(handle))
	})
}

// Resume makes a BLOCKED member ready again (xtc_batch_resume); nil and no
// effect for a live member that is not blocked; ErrNotfound once it
// completed.
func (b *Batch) Resume(handle uint64) error {
	return b.call("xtc_batch_resume", func() C.int {
		return C.xtc_batch_resume(b.c, C.uint64_t(handle))
	})
}

// Close stops accepting requests (xtc_batch_close): BatchDrain finishes
// the accepted ones, BatchCancel aborts them. The driver ends when the
// loop runs afterwards.
func (b *Batch) Close(mode BatchCloseMode) error {
	return b.call("xtc_batch_close", func() C.int {
		return C.xtc_batch_close(b.c, C.unsigned(mode))
	})
}

// Destroy frees the group (xtc_batch_destroy): ErrAgain while its driver
// proc exists (close it and run the loop first). Destroy before Fini.
func (b *Batch) Destroy() error {
	err := b.call("xtc_batch_destroy", func() C.int {
		rc := C.xtc_batch_destroy(b.c)
		if rc == 0 {
			b.destroyed.Store(true)
		}
		return rc
	})
	if err == nil {
		b.loop.dropHandle(b.h)
	}
	return err
}

// Stats returns the group's counters (xtc_batch_get_stats); any goroutine,
// also from Step and Complete.
func (b *Batch) Stats() (BatchStats, error) {
	const op = "xtc_batch_get_stats"
	var st C.xtc_batch_stats_t
	if b == nil || b.destroyed.Load() {
		return BatchStats{}, &Error{Op: op, Code: ErrInval}
	}
	err := b.loop.withC(op, func(*C.xtc_loop_t) C.int {
		return C.xtc_batch_get_stats(b.c, &st)
	})
	if err != nil {
		return BatchStats{}, err
	}
	return BatchStats{
		Accepted: uint64(st.accepted), Refused: uint64(st.refused),
		Admitted: uint64(st.admitted), Completed: uint64(st.completed),
		CompletedOK: uint64(st.completed_ok), Aborted: uint64(st.aborted),
		Failed: uint64(st.failed), Iterations: uint64(st.iterations),
		MemberRounds: uint64(st.member_rounds), Deadlk: uint64(st.deadlk),
		Waiting: uint64(st.waiting), Active: uint64(st.active),
		Blocked: uint64(st.blocked), ResourceUsed: uint64(st.resource_used),
		PeakActive: uint64(st.peak_active), Closed: BatchCloseMode(st.closed),
		DriverAlive: st.driver_alive != 0, Driver: pidFromC(st.driver),
		CompletePanics: b.completePanics.Load(),
	}, nil
}

// errCode maps a Go error to the code C records; the Go value itself is
// kept for Complete when it carries more than the bare code.
func errCode(err error) (C.int, bool) {
	var code Errno
	if errors.As(err, &code) && code < 0 {
		return C.int(code), err == error(code)
	}
	return C.int(ErrInternal), false
}

// runStep is the body of xtcGoBatchStep (loop thread, carrier stack).
func (b *Batch) runStep(items []C.xtc_batch_item_t, res []C.xtc_batch_result_t) (rc C.int) {
	n := len(items)
	if cap(b.items) < n {
		b.items = make([]BatchItem, n)
		b.results = make([]BatchResult, n)
	}
	its, rs := b.items[:n], b.results[:n]
	for i := range items {
		its[i] = BatchItem{
			Handle:  uint64(items[i].handle),
			Request: b.reqOf(uintptr(items[i].request)),
			Charge:  uint64(items[i].charge),
			Rounds:  uint64(items[i].rounds),
		}
		rs[i] = BatchResult{}
	}
	defer func() {
		if v := recover(); v != nil {
			perr := &BatchPanicError{Value: v}
			for i := range its {
				b.errs[its[i].Handle] = perr
			}
			rc = C.int(ErrInternal)
		}
		for i := range its {
			its[i].Request = nil // do not keep requests alive
		}
	}()
	if err := b.step(its, rs); err != nil {
		code, bare := errCode(err)
		if !bare {
			for i := range its {
				b.errs[its[i].Handle] = err
			}
		}
		return code
	}
	for i := range rs {
		res[i].state = C.int(rs[i].State)
		if rs[i].State == BatchError {
			code, bare := errCode(rs[i].Err)
			res[i].error = code
			if !bare && rs[i].Err != nil {
				b.errs[its[i].Handle] = rs[i].Err
			}
		}
	}
	return 0
}

// runComplete is the body of xtcGoBatchComplete (loop thread).
func (b *Batch) runComplete(handle uint64, key uintptr, outcome int) {
	var req any
	var done chan mtResult
	if key&mtKeyBit != 0 {
		if v, ok := b.mtReqs.LoadAndDelete(key); ok {
			e := v.(*mtEntry)
			req, done = e.req, e.done
		}
	} else {
		req = b.reqs[key]
		delete(b.reqs, key)
	}
	var err error
	if e, ok := b.errs[handle]; ok {
		delete(b.errs, handle)
		if outcome != 0 && outcome != int(ErrAborted) {
			err = e
		}
	}
	if err == nil && outcome != 0 {
		err = &Error{Op: "xtc_batch", Code: Errno(outcome)}
	}
	if done != nil {
		done <- mtResult{req: req, err: err} // buffered: never blocks
		return
	}
	defer func() {
		if recover() != nil {
			b.completePanics.Add(1)
		}
	}()
	b.complete(handle, req, err)
}
