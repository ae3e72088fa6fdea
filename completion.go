//go:build cgo

package xtc

// Completions from C back to goroutines.
//
// A goroutine hands C work to a loop with Submit: the function runs as a
// fresh fiber on that loop (xtc_dispatch, posted through the loop's MPSC
// inbox when called from another thread) and its result completes a C
// future. The future is registered with one process-wide completion queue
// (xtc_cq_t): a bounded MPSC ring that the completing carrier pushes into
// without locks or allocation, plus an eventfd doorbell. One goroutine
// serves the queue; when the ring is empty it arms the doorbell and reads
// the eventfd through os.NewFile, so it parks in Go's netpoller and no OS
// thread is ever blocked in a cgo call waiting for C. Each delivered entry
// closes the Future's channel, which is what Wait selects on together with
// the caller's context.
//
// The ring has a fixed number of slots (cqCapacity); a slot is reserved
// per in-flight Submit, so the C side can never find it full, and Submit
// returns ErrAgain when every slot is taken.
//
// A waiter that polls (await) pops and delivers in the server's place,
// on its own goroutine's stack: often a handler's, new, on the runtime's
// smallest stack. The delivery keeps within it (gocall.go, stackFrugal;
// TestFrontDoorStackFrugal): a Dispatch is found by its tag's slot in a
// table, not a map (a map delete's frames made most calls copy the
// stack), the per-batch scratch is the queue's own, the delivery is two
// siblings (claim under the lock, hand outside it), and the calls made
// per delivery take the queue and records as uintptr_t (gobridge_int.h).

/*
#include <stdint.h>
#include "xtc.h"
#include "gobridge_int.h"
*/
import "C"

import (
	"context"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"
)

// cqCapacity bounds the Submits in flight at once (C ring slots).
const cqCapacity = 1 << 14

type completionQueue struct {
	cq   *C.xtc_cq_t
	cqu  C.uintptr_t // cq for the per-delivery adapters (gobridge_int.h)
	bell *os.File

	// A Dispatch's tag is dispatchTag | its slot in futs; slots are
	// reused through free. A slot table rather than a map: the delivery
	// runs in a waiter's goroutine (await), often a handler's, new and on
	// the smallest stack, and a map delete's frames made it copy that
	// stack on most calls (TestFrontDoorStackFrugal). Mailboxes take
	// blocks of 4 tags from next (never with dispatchTag).
	mu     sync.Mutex
	futs   []*Future
	free   []uint32
	mboxes map[uint64]*Mailbox // by their first tag (a block of 4)
	next   uint64

	inflight atomic.Int64
	// Delivered entries, for tests and the benchmark.
	delivered atomic.Uint64

	// serving is held by the one goroutine popping the ring (the
	// server, or a waiter in its place: await) and covers the arm,
	// which reads the consumer's position; buf is its pop buffer.
	// asleep: the server waits in the netpoller. spinners: waiters in
	// await (at most one). helped: entries delivered by waiters (tests).
	serving  atomic.Bool
	buf      [256]C.xtc_cq_entry_t
	fs       [256]*Future  // deliver's scratch (q.serving held)
	ms       [256]*Mailbox // deliver's scratch
	asleep   atomic.Bool
	spinners atomic.Int32
	helped   atomic.Uint64
}

var (
	cqOnce sync.Once
	theCQ  *completionQueue
	cqErr  error
)

func getCQ() (*completionQueue, error) {
	cqOnce.Do(func() {
		var c *C.xtc_cq_t
		if rc := C.xtc_cq_create(cqCapacity, &c); rc != 0 {
			cqErr = mkerr("xtc_cq_create", int(rc))
			return
		}
		fd := C.xtc_cq_fd(c)
		C.xtc_cq_release_fd(c)
		// EFD_NONBLOCK: os.NewFile registers it with the netpoller.
		q := &completionQueue{
			cq:     c,
			cqu:    C.uintptr_t(uintptr(unsafe.Pointer(c))),
			bell:   os.NewFile(uintptr(fd), "xtc-completions"),
			mboxes: map[uint64]*Mailbox{},
		}
		theCQ = q
		go q.serve()
	})
	return theCQ, cqErr
}

// serve is the ring's consumer of last resort. It never returns: the
// queue lives as long as the process, parked in the netpoller when idle.
// It pops under q.serving, arms the doorbell under it (the arm reads the
// consumer's position) and parks. A waiter holding q.serving (await) is
// brief: the server yields until it lets go.
func (q *completionQueue) serve() {
	var bell [8]byte
	for {
		if !q.serving.CompareAndSwap(false, true) {
			runtime.Gosched()
			continue
		}
		n := q.drain()
		armed := n == 0 && C.xtc__cq_arm_u(q.cqu) == 0
		q.serving.Store(false)
		if !armed {
			continue // delivered some, or pushed between pop and arm
		}
		// Parks this goroutine (not its thread) until a carrier rings.
		q.asleep.Store(true)
		_, err := q.bell.Read(bell[:])
		q.asleep.Store(false)
		if err != nil {
			panic("xtc: completion doorbell: " + err.Error())
		}
	}
}

// drain pops and delivers until the ring is empty (q.serving held).
func (q *completionQueue) drain() int {
	total := 0
	for {
		n := int(C.xtc__cq_pop_u(q.cqu, &q.buf[0], C.int(len(q.buf))))
		if n > 0 { // two siblings: the second's frames are the deep ones
			q.claim(q.buf[:n])
			q.hand(q.buf[:n])
		}
		total += n
		if n < len(q.buf) {
			return total
		}
	}
}

// A waiter delivers in the server's place. The server parks in the
// netpoller, which Go polls only when a P runs out of goroutines (or from
// sysmon every 10 ms), and a carrier's completion then costs an eventfd
// write, a netpoller wake-up and the server's wake before the waiter's
// own: Dispatch + Wait measured p50 11-45 us, Mailbox Send + Recv 32-47
// us, against 1.3 us for Exec.GoInt, whose caller polls its record
// (gocall.go). So, as there, a goroutine about to wait for one completion
// (the one Dispatch in flight; a Recv), when no other waiter spins, polls
// for up to callSpin (await); if the server sleeps it takes q.serving
// and the doorbell (xtc__gocq_disarm: no producer rings, the server
// stays asleep), pops the ring itself, and gives both back with the
// server's Dekker (release). Rejected: gocall.go's help (a waiter about
// to park delivers the ring while the server sleeps) for these: it cost
// Dispatch's throughput from 64 goroutines 15 % (300-332 k/s against
// 362-381 k/s, 3 interleaved runs), even with a two-load check that the
// ring holds something.

// release gives the arm back (took: this waiter holds it) and q.serving.
// Armed again, an entry already in the ring would ring nobody: take the
// arm back and deliver it, unless a producer rang meanwhile (the server
// wakes and drains).
func (q *completionQueue) release(took bool) {
	for took && C.xtc__cq_arm_u(q.cqu) != 0 {
		if C.xtc__gocq_disarm_u(q.cqu) != 1 {
			break
		}
		q.helped.Add(uint64(q.drain()))
	}
	q.serving.Store(false)
}

// await polls for up to d until ready() (its completion was delivered),
// popping in the sleeping server's place; true when ready.
// One waiter spins at a time: a spin holds a P that the server and the
// other waiters may need.
func (q *completionQueue) await(ready func() bool, d time.Duration) bool {
	if callSpin <= 0 || !q.spinners.CompareAndSwap(0, 1) {
		return ready()
	}
	defer q.spinners.Store(0)
	held, took := false, false
	t0 := time.Now()
	last := time.Duration(0)
	for {
		if !held && q.asleep.Load() && q.serving.CompareAndSwap(false, true) {
			held = true
			took = C.xtc__gocq_disarm_u(q.cqu) == 1
		}
		if held {
			q.helped.Add(uint64(q.drain()))
		}
		if ready() {
			break
		}
		el := time.Since(t0)
		if el > d {
			break
		}
		if !held && el-last > spinYield {
			last = el
			runtime.Gosched()
		}
	}
	if held {
		q.release(took)
	}
	return ready()
}

// dispatchTag marks a Dispatch's tag (its slot in futs below it).
const dispatchTag = uint64(1) << 62

// track gives f a slot and returns its tag (q.mu held).
func (q *completionQueue) track(f *Future) uint64 {
	var i uint32
	if n := len(q.free); n > 0 {
		i = q.free[n-1]
		q.free = q.free[:n-1]
		q.futs[i] = f
	} else {
		i = uint32(len(q.futs))
		q.futs = append(q.futs, f)
	}
	return dispatchTag | uint64(i)
}

// untrack returns the Future of tag and frees its slot, nil when tag is
// not a Dispatch's in flight (q.mu held).
func (q *completionQueue) untrack(tag uint64) *Future {
	i := tag &^ dispatchTag
	if tag&dispatchTag == 0 || i >= uint64(len(q.futs)) || q.futs[i] == nil {
		return nil
	}
	f := q.futs[i]
	q.futs[i] = nil
	q.free = append(q.free, uint32(i))
	return f
}

// tracked: Dispatches in flight (tests).
func (q *completionQueue) tracked() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.futs) - len(q.free)
}

// claim finds each entry's Future or Mailbox (q.serving held: the scratch
// arrays are its own; len(es) <= len(q.buf)); hand delivers them.
func (q *completionQueue) claim(es []C.xtc_cq_entry_t) {
	fs, ms := q.fs[:len(es)], q.ms[:len(es)]
	nf := 0
	q.mu.Lock()
	for i, e := range es {
		tag := uint64(e.tag)
		fs[i], ms[i] = nil, nil
		if f := q.untrack(tag); f != nil {
			fs[i] = f
		} else if m := q.mboxes[tag&^3]; m != nil {
			ms[i] = m // mailbox entries are not Dispatch slots
			continue
		}
		nf++
	}
	q.mu.Unlock()
	q.inflight.Add(-int64(nf))
	q.delivered.Add(uint64(len(es)))
}

func (q *completionQueue) hand(es []C.xtc_cq_entry_t) {
	for i := range es {
		if f := q.fs[i]; f != nil {
			q.fs[i] = nil // no reference kept past the delivery
			f.complete(int64(es[i].value), int(es[i].status))
		} else if m := q.ms[i]; m != nil {
			q.ms[i] = nil
			q.deliverMailbox(m, &es[i])
		}
	}
}

// Future is the result of C work submitted from Go (Submit). It completes
// exactly once with the C function's intptr_t result, or with ErrAborted
// when the work was cancelled before it ran, cancelled while running, or
// dropped unrun because its loop was finalised.
type Future struct {
	done  chan struct{}
	value int64
	err   error

	mu sync.Mutex
	h  *C.xtc_dispatch_handle_t // until completion or Cancel

	onDone func() // set before the work starts; run once at completion
	op     string // the operation named by a failure ("" = xtc_dispatch)
	// viaCQ: completed through the process-wide completion queue
	// (Dispatch), whose ring Wait may poll; the front door's futures
	// (GoAsync) are completed by the call table's server instead
	viaCQ bool
	// wake: its loop was parked at the dispatch (Wait polls for up to
	// callSpinWake instead of callSpin)
	wake bool
}

// Dispatch runs the C function fn(arg) as a new fiber on loop l and returns
// a Future for its result; fn is an `intptr_t (*)(void *)` supplied by the
// caller's cgo code, e.g. unsafe.Pointer(C.my_kernel). It may yield, park
// and offload blocking calls (xtc_blocking_run) like any fiber. arg must
// not point to Go memory (cgo pointer rules). From any goroutine; nothing
// blocks: the spawn goes through the loop's inbox and the result comes back
// through the completion queue. The loop must be running (or run later)
// for fn to execute: an executor loop (Exec.Loop) or a Loop whose Run is
// active. Errors: ErrInval (nil fn, nil or finalised loop), ErrAgain (too
// many Dispatches in flight), ErrNomem. Failures of the spawn itself, which
// happens on the loop's thread (ErrNomem, ErrResource for the loop's task
// cap), and the loop being finalised before fn ran (ErrAborted) come back
// through the Future.
func Dispatch(l *Loop, fn unsafe.Pointer, arg unsafe.Pointer) (*Future, error) {
	if fn == nil || l == nil {
		return nil, &Error{Op: "xtc_dispatch", Code: ErrInval}
	}
	q, err := getCQ()
	if err != nil {
		return nil, err
	}
	if q.inflight.Add(1) > cqCapacity {
		q.inflight.Add(-1)
		return nil, &Error{Op: "xtc_dispatch", Code: ErrAgain}
	}
	f := &Future{done: make(chan struct{}), viaCQ: true}
	q.mu.Lock()
	tag := q.track(f)
	q.mu.Unlock()
	// The fiber may finish (and its entry be delivered) before this call
	// returns: f.mu makes complete wait until h is recorded.
	f.mu.Lock()
	err = l.withC("xtc_dispatch", func(c *C.xtc_loop_t) C.int {
		rc := C.xtc__gofut_submit(c, fn, arg, q.cq, C.uint64_t(tag), &f.h)
		if rc == 1 { // the loop was parked: Wait polls for its wake-up
			f.wake, rc = true, 0
		}
		return rc
	})
	f.mu.Unlock()
	if err != nil {
		q.mu.Lock()
		q.untrack(tag)
		q.mu.Unlock()
		q.inflight.Add(-1)
		return nil, err
	}
	return f, nil
}

// complete settles f. It often runs in a waiter's goroutine, under
// Wait's poll, await, drain and hand (stackFrugal, gocall.go): the handle's
// free and the error's making are out of line, so that the close's
// frames still fit a new goroutine's stack (TestFrontDoorStackFrugal).
func (f *Future) complete(v int64, status int) {
	f.freeHandle()
	f.value = v
	if status != 0 {
		f.fail(status)
	}
	if f.onDone != nil {
		f.onDone()
	}
	close(f.done)
}

//go:noinline
func (f *Future) freeHandle() {
	f.mu.Lock()
	if f.h != nil {
		C.xtc_dispatch_handle_free(f.h)
		f.h = nil
	}
	f.mu.Unlock()
}

//go:noinline
func (f *Future) fail(status int) {
	op := f.op
	if op == "" {
		op = "xtc_dispatch"
	}
	f.err = withNomemReason(mkerr(op, status))
}

// Wait returns the result once the work completed, or ctx's error as soon
// as ctx is done (the work goes on; Wait can be called again, and Cancel
// stops work that has not finished). A nil ctx means context.Background().
// The value comes with a nil error, or with ErrAborted (value = what a
// cancelled-while-running fn returned, else 0). The only Dispatch in
// flight is first polled for up to 10 µs (burning that CPU), so that a
// quick result costs no wake-up; then Wait parks.
func (f *Future) Wait(ctx context.Context) (int64, error) {
	if f == nil {
		return 0, &Error{Op: "xtc_future_wait", Code: ErrInval}
	}
	if !f.Ready() {
		f.poll() // a sibling of the wait below: not on its stack
	}
	if ctx != nil {
		if done := ctx.Done(); done != nil {
			return f.waitCtx(ctx, done)
		}
	}
	<-f.done
	return f.value, f.err
}

// poll polls for f's completion only as the one Dispatch in flight (as
// Exec.Go's caller spins only as its table's one live call): with more,
// the spinner holds a P that the others' deliveries need.
func (f *Future) poll() {
	if q := theCQ; q != nil && f.viaCQ && q.inflight.Load() <= 1 {
		d := callSpin
		if f.wake {
			d = max(d, callSpinWake)
		}
		q.await(f.Ready, d)
	}
}

func (f *Future) waitCtx(ctx context.Context, done <-chan struct{}) (int64, error) {
	select {
	case <-f.done:
		return f.value, f.err
	case <-done:
		return 0, ctx.Err()
	}
}

// Done is closed when the future has completed.
func (f *Future) Done() <-chan struct{} { return f.done }

// Ready reports whether the future has completed.
func (f *Future) Ready() bool {
	select {
	case <-f.done:
		return true
	default:
		return false
	}
}

// Cancel asks the work to stop (xtc_dispatch_cancel): not yet started, it
// never runs; running, xtc_dispatch_cancelled() turns 1 inside fn, and the
// future completes with ErrAborted when fn returns. After completion, or a
// second time, it does nothing. ErrInval for a nil Future.
func (f *Future) Cancel() error {
	if f == nil {
		return &Error{Op: "xtc_dispatch_cancel", Code: ErrInval}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.h != nil {
		C.xtc_dispatch_cancel(f.h)
		f.h = nil
	}
	return nil
}

// DispatchWait dispatches fn(arg) to l and waits for the result; when ctx
// ends first the work is cancelled and ctx's error returned.
func DispatchWait(ctx context.Context, l *Loop, fn unsafe.Pointer, arg unsafe.Pointer) (int64, error) {
	f, err := Dispatch(l, fn, arg)
	if err != nil {
		return 0, err
	}
	v, err := f.Wait(ctx)
	if err != nil && !f.Ready() {
		f.Cancel()
	}
	return v, err
}

// CompletionsDelivered returns how many completions the queue has handed
// to Futures since the process started (a counter for tests and tools).
func CompletionsDelivered() uint64 {
	if theCQ == nil {
		return 0
	}
	return theCQ.delivered.Load()
}

// BlockingPoolSize fixes the blocking offload pool at n threads
// (xtc_blocking_pool_size): 1..64, only while the pool is not started.
// ErrRange, ErrInval.
func BlockingPoolSize(n int) error {
	if n < 1 || n > 64 {
		return &Error{Op: "xtc_blocking_pool_size", Code: ErrRange}
	}
	return mkerr("xtc_blocking_pool_size", int(C.xtc_blocking_pool_size(C.int(n))))
}

// BlockingThreads returns the number of blocking pool threads
// (0 when not started).
func BlockingThreads() int { return int(C.xtc_blocking_threads()) }

// BlockingShutdown runs the queued blocking jobs and joins the pool threads
// (xtc_blocking_shutdown); a later offload restarts the pool.
func BlockingShutdown() { C.xtc_blocking_shutdown() }
