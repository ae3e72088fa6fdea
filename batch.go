//go:build cgo

package xtc

// Continuous batching from Go: the Go side of xtc_batch (csrc/batch.c).
//
// Model: the engine is C; Go supplies Step and Complete, which C calls on
// the driver fiber and the trampolines below move onto the carrier's own
// stack (Go never runs on a fiber). C never holds a Go pointer: the
// request it keeps is an integer key, from the owner's map (Submit, on
// the loop's thread) or from the hand-in table (SubmitMT and Do, from any
// goroutine: mtTable below, one slot per request in flight, found by
// index). A Do is the serving front: one cgo call hands the request in
// (xtc_batch_submit_mt: a lock-free ring the driver drains at its next
// iteration boundary), and Complete, on the loop's thread, settles the
// slot and sends one token on the slot's reused channel; a lone caller
// polls its slot briefly first, as Exec.Go's caller does (gocall.go).
// Nothing is allocated per Do (BenchmarkFrontDoorMoreThroughput).
//
// Measured against Go's own batcher (cmd/xtcbench, batch section): the C
// engine is under 1 % of the CPU; the step work both sides run is most of
// it, so per CPU second xtc and Go come out close (the report prints the
// ceiling, the step work alone).

/*
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "xtc.h"
#include "gobridge_int.h"

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

// The handle comes back by value: a pointer to a Go variable would move
// that variable to the heap (an allocation per hand-in).
typedef struct {
	uint64_t h;
	int rc;
} xtc_go_mt_ret_t;

static xtc_go_mt_ret_t xtc_go_batch_submit_mt(xtc_batch_t *g, uintptr_t key,
                                              uint64_t charge)
{
	xtc_go_mt_ret_t r;

	r.rc = xtc_batch_submit_mt(g, (void *)key, charge, &r.h);
	return r;
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
	"sync/atomic"
	"time"
	"unsafe"
)

// Batch is a continuous-batching group (xtc_batch_t) on one loop: a pinned
// driver proc calls Step once per iteration with every ready member and
// refills the vector from the FCFS queue at each iteration boundary.
// Requests may be Go values of any type: C holds only an integer key.
//
// Mutators (Submit, Cancel, Resume, BatchClose, BatchDestroy) run on the
// loop's owner thread: called from another goroutine they are posted there
// and waited for (on an executor loop: handed to its carrier while the
// executor runs, called directly while it is idle); from a Go callback of
// the loop they run directly. Inside Step or Complete they return
// ErrDeadlk.
//
// Closed: once Close, Shutdown or BatchClose was called, Do, Submit and
// SubmitMT return an error matching ErrClosed (the request was not
// taken: do not retry it here); after the group was destroyed every
// method does. Requests accepted before the close complete (drained) or
// end with ErrAborted (cancelled).
type Batch struct {
	loop     *Loop
	exec     *Exec // owner (Exec.NewBatch), nil for a loop-level group
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
	closing        atomic.Bool // Close, Shutdown or BatchClose was called
	shut           atomic.Bool // Close or Shutdown was called

	// cross-thread hand-ins (SubmitMT, Do): any goroutine
	mt mtTable
}

// Hand-ins (SubmitMT, Do) from any goroutine.
//
// Model: a table of slots per group, one per hand-in in flight; the key C
// keeps as the request pointer is mtKeyBit | generation | slot index, so
// the driver's Step and Complete find the request by index (no hashing,
// no lock), and a key of an earlier use of the slot is told apart by its
// generation. Slots are made a chunk of mtChunk at a time (never moved),
// up to the group's hand-in pool (xtc_batch_mt_capacity: C refuses more
// anyway), and reused from a LIFO free list, so the records in use stay
// few and hot. A Do waits on its slot's own channel (capacity 1, made on
// the slot's first Do and reused): exactly one token per use, sent by
// whoever settles the slot (the CAS from mtDo to mtSettled: the driver's
// Complete, or failPending for a group abandoned to Fini), so a Do
// allocates nothing but what the caller's request and context need.
//
// Happens-before (also for -race, which does not see C's atomics): the
// producer writes the slot's request, then publishes its state with an
// atomic store; the loop's thread loads the state before it reads the
// request; the settler's channel send orders its result before the
// waiter's read.
//
// Rejected: a sync.Map of entries by key (what this replaced: 3-4
// allocations per hand-in and a hashed lookup per member per step,
// measured at 4-5% of the xtcbench batch section's CPU); a channel per
// Do (an allocation per call); context.AfterFunc for the cancellation (an
// allocation per call; Do selects on ctx.Done() itself, and only when the
// context can end).
type mtTable struct {
	free     freeSlots // its chunks are made under free.mu (grow)
	limit    int       // the group's hand-in pool
	chunks   []atomic.Pointer[[mtChunk]mtSlot]
	live     atomic.Int64 // slots taken
	spinning atomic.Bool  // a lone Do polls its slot (spin)
}

const mtChunk = 256

// Slot states.
const (
	mtFree    = iota
	mtCB      // SubmitMT: Complete gets the outcome
	mtDo      // a Do waits on ch
	mtSettled // the settler owns the slot (its token sent)
)

type mtSlot struct {
	st  atomic.Uint32
	gen uint32 // this use of the slot (written before st is published)
	req any
	err error
	ch  chan struct{} // Do: capacity 1, made once
}

// Keys of hand-ins have this bit; owner-side keys count up from 1. Below
// it: the slot's generation, then mtIdxBits of slot index.
const (
	mtKeyBit  = uintptr(1) << (unsafe.Sizeof(uintptr(0))*8 - 2)
	mtIdxBits = 17 // MT_MAX (65536) slots at most
	mtGenMask = mtKeyBit>>mtIdxBits - 1
)

func (t *mtTable) init(limit int) {
	t.limit = limit
	t.chunks = make([]atomic.Pointer[[mtChunk]mtSlot], (limit+mtChunk-1)/mtChunk)
}

func (t *mtTable) slot(i uint32) *mtSlot {
	return &t.chunks[i/mtChunk].Load()[i%mtChunk]
}

// alloc takes a free slot (false when the pool's worth is in flight).
func (t *mtTable) alloc() (uint32, bool) {
	i, err := t.free.pop(t.grow)
	if err != nil {
		return 0, false
	}
	t.live.Add(1)
	return i, true
}

// errMTFull: every chunk of the table is made and its slots are taken.
var errMTFull = errors.New("xtc: hand-in table full")

// grow makes the next chunk (free.mu held).
func (t *mtTable) grow() error {
	c := t.free.made / mtChunk
	if c >= len(t.chunks) {
		return errMTFull
	}
	t.chunks[c].Store(new([mtChunk]mtSlot))
	t.free.pushChunk(mtChunk)
	return nil
}

// spin polls a lone Do's slot for up to callSpin (gocall.go: the same
// budget and yield rule as Exec.Go's caller) before the caller parks on
// the slot's channel: when the carrier is awake the settlement lands
// meanwhile, and its token then waits in the channel's buffer, so neither
// side pays a goroutine wake-up. Only the group's one live hand-in spins:
// with others in flight the P is worth more to them (the same rule as
// Exec.Go's, measured there).
func (t *mtTable) spin(s *mtSlot) {
	if callSpin <= 0 || t.live.Load() != 1 || !t.spinning.CompareAndSwap(false, true) {
		return
	}
	defer t.spinning.Store(false)
	pollFor(callSpin, func() bool { return s.st.Load() == mtSettled })
}

func (t *mtTable) release(i uint32) {
	s := t.slot(i)
	s.req, s.err = nil, nil
	s.st.Store(mtFree)
	t.free.push(i)
	t.live.Add(-1)
}

// lookup returns the slot of a hand-in key while that use of it is live.
func (t *mtTable) lookup(key uintptr) (*mtSlot, uint32, uint32) {
	i := uint32(key & (1<<mtIdxBits - 1))
	if int(i/mtChunk) >= len(t.chunks) {
		return nil, 0, 0
	}
	c := t.chunks[i/mtChunk].Load()
	if c == nil {
		return nil, 0, 0
	}
	s := &c[i%mtChunk]
	st := s.st.Load() // before gen and req: the producer's publication
	if st == mtFree || uintptr(s.gen) != (key>>mtIdxBits)&mtGenMask {
		return nil, 0, 0
	}
	return s, i, st
}

func (b *Batch) reqOf(key uintptr) any {
	if key&mtKeyBit != 0 {
		if s, _, _ := b.mt.lookup(key); s != nil {
			return s.req
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
// kept); ErrRange for a charge above the resource capacity; ErrClosed once
// the group is closed; ErrInval without a Complete function.
func (b *Batch) SubmitMT(request any, charge uint64) (uint64, error) {
	_, h, err := b.submitMT(request, charge, mtCB)
	return h, err
}

// submitMT hands request in as a slot of kind (mtCB or mtDo) and returns
// the slot and the handle.
func (b *Batch) submitMT(request any, charge uint64, kind uint32) (uint32, uint64, error) {
	const op = "xtc_batch_submit_mt"
	if b == nil || b.destroyed.Load() || b.closing.Load() {
		return 0, 0, errClosed(op)
	}
	if kind == mtCB && b.complete == nil {
		return 0, 0, errNoComplete(op)
	}
	i, ok := b.mt.alloc()
	if !ok {
		if b.closedOrEnded() {
			return 0, 0, errClosed(op)
		}
		return 0, 0, errReason(op, ErrAgain, "the group's hand-in pool is full")
	}
	s := b.mt.slot(i)
	s.gen = uint32((uintptr(s.gen) + 1) & mtGenMask)
	s.req = request
	if kind == mtDo && s.ch == nil {
		s.ch = make(chan struct{}, 1)
	}
	s.st.Store(kind) // publishes gen and req: complete may run at once
	key := mtKeyBit | uintptr(s.gen)<<mtIdxBits | uintptr(i)
	r := C.xtc_go_batch_submit_mt(b.c, C.uintptr_t(key), C.uint64_t(charge))
	if rc := r.rc; rc != 0 {
		if !s.st.CompareAndSwap(kind, mtSettled) {
			<-s.ch // failPending settled it meanwhile: take its token
		}
		b.mt.release(i)
		switch {
		case Errno(rc) == ErrAgain && b.closedOrEnded(),
			Errno(rc) == ErrInval && (b.closing.Load() || b.destroyed.Load()): // destroyed meanwhile
			return 0, 0, errClosed(op)
		}
		return 0, 0, mkerr(op, int(rc))
	}
	return i, uint64(r.h), nil
}

// CancelMT asks for handle's cancellation from any goroutine
// (xtc_batch_cancel_mt): applied at the next boundary, discarded when the
// handle has completed. ErrAgain when the ring is full or the driver has
// ended.
func (b *Batch) CancelMT(handle uint64) error {
	const op = "xtc_batch_cancel_mt"
	if b == nil || b.destroyed.Load() {
		return errClosed(op)
	}
	return mkerr(op, int(C.xtc_batch_cancel_mt(b.c, C.uint64_t(handle))))
}

// ResumeMT is Resume from any goroutine (xtc_batch_resume_mt), applied at
// the next boundary; codes as CancelMT.
func (b *Batch) ResumeMT(handle uint64) error {
	const op = "xtc_batch_resume_mt"
	if b == nil || b.destroyed.Load() {
		return errClosed(op)
	}
	return mkerr(op, int(C.xtc_batch_resume_mt(b.c, C.uint64_t(handle))))
}

// DoOption configures one Batch.Do.
type DoOption func(*doOpts)

type doOpts struct{ charge uint64 }

// WithCharge sets the request's fixed resource charge (default 1): the
// group admits members while their charges fit its ResourceCapacity.
func WithCharge(units uint64) DoOption { return func(o *doOpts) { o.charge = units } }

// Do runs request through the group and returns it once it completed
// (Step sees it as BatchItem.Request and may change what it points to),
// with nil, or with the member's error. Any number of goroutines may call
// it at once; the completion is handed to the waiting goroutine through a
// channel from the loop's thread, so no OS thread is held per waiter. Do
// completions do not go to Complete (which may be nil when only Do is
// used). When Do returns, the request has left the group: memory it
// refers to may be released.
//
// When ctx is done first, Do issues exactly one CancelMT and returns
// ctx.Err() once the cancel took effect; if the request finished first it
// returns the result and nil (exactly one of the two). While the hand-in
// pool is full Do retries until ctx is done. A closed or destroyed group
// returns an error matching ErrClosed at once (not ErrAgain: retrying
// cannot succeed); ErrRange for a charge above the resource capacity.
func (b *Batch) Do(ctx context.Context, request any, opts ...DoOption) (any, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	charge := uint64(1)
	if len(opts) > 0 { // o escapes to the options: no allocation without them
		o := doOpts{charge: 1}
		for _, f := range opts {
			if f != nil {
				f(&o)
			}
		}
		charge = o.charge
	}
	var h uint64
	var i uint32
	for {
		var err error
		i, h, err = b.submitMT(request, charge, mtDo)
		if err == nil {
			break
		}
		if !errors.Is(err, ErrAgain) {
			return nil, err
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(20 * time.Microsecond):
		}
	}
	s := b.mt.slot(i)
	b.mt.spin(s)
	if done := ctx.Done(); done == nil {
		<-s.ch
	} else {
		select {
		case <-s.ch:
		case <-done:
			// one cancel; ErrAgain only while the ring is full
			for errors.Is(b.CancelMT(h), ErrAgain) && !b.closedOrEnded() {
				runtime.Gosched()
			}
			<-s.ch
		}
	}
	req, err := s.req, s.err
	b.mt.release(i)
	if err != nil && errors.Is(err, ErrAborted) && ctx.Err() != nil {
		return nil, ctx.Err()
	}
	return req, err
}

func (b *Batch) closedOrEnded() bool {
	if b.destroyed.Load() || b.closing.Load() {
		return true
	}
	var closed C.unsigned
	alive := C.xtc_go_batch_driver_alive(b.c, &closed)
	return alive == 0 || closed != 0
}

// BatchCreate creates a group on loop (xtc_batch_create), the thin
// wrapper; a service creates its groups with Exec.NewBatch, which the
// executor's Shutdown ends. Setup-only: after the loop's first run it
// returns ErrAgain. ErrInval for nil opts, a nil Step, a class of another
// loop; ErrInval/ErrRange for sizes out of range (as the C call). ErrNosys
// when built without the feature. Complete may be nil when requests come
// only through Do.
func BatchCreate(loop *Loop, opts *BatchOpts) (*Batch, error) {
	if opts == nil {
		return nil, &Error{Op: "xtc_batch_create", Code: ErrInval}
	}
	return newBatch("xtc_batch_create", loop, opts)
}

func newBatch(op string, loop *Loop, opts *BatchOpts) (*Batch, error) {
	if loop == nil {
		return nil, errClosed(op)
	}
	if opts == nil || opts.Step == nil || opts.Capacity < 0 || opts.MaxActive < 0 {
		return nil, errReason(op, ErrInval, "nil options or Step, or a negative size")
	}
	var cls C.xtc_exec_class_t
	switch c := opts.Class.(type) {
	case nil:
	case *LoopClass:
		if c != nil {
			if c.l != loop {
				return nil, errReason(op, ErrInval, "class of another loop")
			}
			cls = c.c
		}
	case *Class:
		if c != nil {
			i := -1
			if loop.owner != nil && c.e == loop.owner {
				i = loop.owner.loopIndex(loop)
			}
			if i < 0 {
				return nil, errReason(op, ErrInval, "class of another executor")
			}
			cls = c.per[i].c
		}
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
	err := loop.batchExec(op, func() {
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
	b.mt.init(int(C.xtc_batch_mt_capacity(b.c)))
	return b, nil
}

func errNoComplete(op string) error {
	return errReason(op, ErrInval, "the group has no Complete function: use Do, or set BatchOpts.Complete")
}

// call runs a mutator on the owner thread.
func (b *Batch) call(op string, fn func() C.int) error {
	if b == nil || b.destroyed.Load() {
		return errClosed(op)
	}
	var rc C.int
	gone := false
	if err := b.loop.batchExec(op, func() {
		if b.destroyed.Load() {
			gone = true
			return
		}
		rc = fn()
	}); err != nil {
		return err
	}
	if gone {
		return errClosed(op)
	}
	return mkerr(op, int(rc))
}

// Submit queues request with a fixed charge (xtc_batch_submit) and returns
// its handle (monotonic, never reused); Complete receives its outcome.
// ErrAgain when the group is full (the request is not kept); ErrClosed
// once it is closed; ErrRange for a charge above the resource capacity;
// ErrDeadlk from inside Step or Complete; ErrInval without a Complete
// function.
func (b *Batch) Submit(request any, charge uint64) (uint64, error) {
	const op = "xtc_batch_submit"
	if b != nil && b.complete == nil {
		return 0, errNoComplete(op)
	}
	var h C.uint64_t
	err := b.call(op, func() C.int {
		b.nextKey++
		key := b.nextKey
		b.reqs[key] = request
		rc := C.xtc_go_batch_submit(b.c, C.uintptr_t(key), C.uint64_t(charge), &h)
		if rc != 0 {
			delete(b.reqs, key)
		}
		return rc
	})
	if errors.Is(err, ErrAgain) && b.closedOrEnded() {
		return 0, errClosed(op)
	}
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

// BatchClose stops b accepting requests (xtc_batch_close), the thin
// wrapper: BatchDrain finishes the accepted ones, BatchCancel aborts them
// (a drain may be upgraded to a cancel). The driver ends when the loop
// runs afterwards; BatchDestroy then frees the group. Shutdown and Close
// do all of it.
func BatchClose(b *Batch, mode BatchCloseMode) error {
	return b.closeMode(mode)
}

func (b *Batch) closeMode(mode BatchCloseMode) error {
	err := b.call("xtc_batch_close", func() C.int {
		return C.xtc_batch_close(b.c, C.unsigned(mode))
	})
	if err == nil {
		b.closing.Store(true)
	}
	return err
}

// BatchDestroy frees the group (xtc_batch_destroy), the thin wrapper:
// ErrAgain while its driver proc exists (close it and run the loop
// first). Before the loop's Fini.
func BatchDestroy(b *Batch) error { return b.destroy() }

// Destroy is BatchDestroy.
//
// Deprecated: use Close or Shutdown (or BatchDestroy, the thin wrapper).
func (b *Batch) Destroy() error { return b.destroy() }

func (b *Batch) destroy() error {
	err := b.call("xtc_batch_destroy", func() C.int {
		rc := C.xtc_batch_destroy(b.c)
		if rc == 0 {
			b.destroyed.Store(true)
		}
		return rc
	})
	if err == nil {
		b.closing.Store(true)
		b.loop.dropHandle(b.h)
	}
	return err
}

// Close ends the group now: requests not finished complete with an error
// matching ErrAborted (Do returns it), new ones get ErrClosed, and the
// group is freed once its driver has ended (io.Closer). It is Shutdown
// with no time to drain; see Shutdown for what must run meanwhile. A
// second Close returns ErrClosed.
func (b *Batch) Close() error {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return b.Shutdown(ctx)
}

// Shutdown ends the group gracefully: new requests get ErrClosed at once,
// accepted ones run to completion until ctx ends, then what is left is
// cancelled (ErrAborted), and once the driver has ended the group is
// freed. It returns ctx.Err() when the drain was cut short (the group is
// closed all the same), ErrClosed on a second call.
//
// The driver ends only by running: a group of a stand-alone Loop is
// driven here (Loop.RunContext) when the loop is not running already; a
// group an executor owns (Exec.NewBatch) needs the executor running, and
// if it is not, the group is only closed here and freed by the executor's
// Shutdown or Close (which end every group they own anyway).
func (b *Batch) Shutdown(ctx context.Context) error {
	const op = "xtc.Batch.Shutdown"
	if b == nil || b.destroyed.Load() || !b.shut.CompareAndSwap(false, true) {
		return errClosed(op)
	}
	b.closing.Store(true)
	if ctx == nil {
		ctx = context.Background()
	}
	if e := b.exec; e != nil && !e.running.Load() {
		mode := BatchDrain
		if ctx.Err() != nil {
			mode = BatchCancel
		}
		return b.closeMode(mode)
	}
	bs := []*Batch{b}
	var werr error
	if ctx.Err() == nil {
		if err := b.closeMode(BatchDrain); err != nil {
			return err
		}
		werr = b.driveUntilEnded(ctx, bs)
	}
	if err := b.closeMode(BatchCancel); err != nil {
		return err
	}
	_ = b.driveUntilEnded(context.Background(), bs)
	if err := b.destroy(); err != nil {
		return err
	}
	if b.exec != nil {
		b.exec.dropBatch(b)
	}
	return werr
}

// driveUntilEnded waits for the driver's end (or ctx), running a
// stand-alone loop that is not running meanwhile.
func (b *Batch) driveUntilEnded(ctx context.Context, bs []*Batch) error {
	if b.exec == nil && !b.loop.running.Load() {
		rctx, cancel := context.WithCancel(ctx)
		defer cancel()
		go func() { // the loop quiesces once the driver ended; else stop it then
			_ = waitDrivers(rctx, bs)
			cancel()
		}()
		if err := b.loop.RunContext(rctx); err != nil && !errors.Is(err, context.Canceled) {
			return err
		}
		if !b.driverAlive() {
			return nil
		}
		return ctx.Err()
	}
	return waitDrivers(ctx, bs)
}

func (b *Batch) driverAlive() bool {
	if b.destroyed.Load() {
		return false
	}
	var closed C.unsigned
	return C.xtc_go_batch_driver_alive(b.c, &closed) != 0
}

// failPending completes the Do waiters of a group abandoned to Fini with
// ErrClosed (never an accepted request: those completed before destroy).
func (b *Batch) failPending() {
	n := b.mt.free.count()
	for i := 0; i < n; i++ {
		s := b.mt.slot(uint32(i))
		if s.st.CompareAndSwap(mtDo, mtSettled) {
			s.err = errClosed("xtc.Batch.Do")
			s.ch <- struct{}{}
		}
	}
}

// Stats returns the group's counters (xtc_batch_get_stats); any goroutine,
// also from Step and Complete.
func (b *Batch) Stats() (BatchStats, error) {
	const op = "xtc_batch_get_stats"
	var st C.xtc_batch_stats_t
	if b == nil || b.destroyed.Load() {
		return BatchStats{}, errClosed(op)
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
	var do *mtSlot
	if key&mtKeyBit != 0 {
		s, i, st := b.mt.lookup(key)
		if s == nil || (st != mtCB && st != mtDo) || !s.st.CompareAndSwap(st, mtSettled) {
			return // settled already (a group abandoned to Fini)
		}
		if st == mtDo {
			do = s // its waiter reads the result and frees the slot
		} else {
			req = s.req
			b.mt.release(i)
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
	if do != nil {
		do.err = err
		do.ch <- struct{}{} // capacity 1, one token per use: never blocks
		return
	}
	if b.complete == nil {
		return // not reached: Submit and SubmitMT need a Complete
	}
	defer func() {
		if recover() != nil {
			b.completePanics.Add(1)
		}
	}()
	b.complete(handle, req, err)
}
