//go:build cgo

package xtc

// The Go front door: how a goroutine's call (Exec.Go, GoInt, GoAsync, the
// steps of LaunchFn) reaches a carrier and how its result comes back.
//
// Design (the C half is csrc/exec_gocall.c, whose note has the measured why):
//   - one table per executor, made on the executor's first call: a slab
//     of slabs of C call records (xtc__gocalls: chunks of 1024, never
//     moved) and, on this side, one slot per record (a reusable channel,
//     the waiter's state) in chunks of the same size; the free list of
//     indices is a LIFO stack here, so the records in use stay few and
//     hot. When it is empty the next chunk is made (the C records and the
//     slots together, under the free list's lock), up to callCapacity
//     calls in flight; past that a call returns ErrAgain. No allocation
//     per call on the synchronous path.
//   - placement: a call that names no loop goes to the loop with the
//     fewest of the table's calls in flight, the previous call's loop on
//     a tie (pick: C keeps one count per loop, on the line submissions
//     write anyway, and Go reads them without a call). A lone caller keeps one carrier
//     awake and lets the others park; a short call does not queue behind
//     a long one while another loop has none.
//   - submit: one cgo call fills record i and pushes it on the chosen
//     carrier's submission ring; the carrier drains its ring in batches
//     on its own stack and starts each call as a proc of its loop (class,
//     kill at the next slice, exactly one settlement: exec_gocall.c).
//   - the way back has two roads. A caller that finds the executor idle
//     (no other call of the table in flight, nor settled and waiting for
//     its delivery) and a spinner's place free
//     (at most max(1, GOMAXPROCS/2) spin at once) polls its record's
//     waiter word: the settlement is then a store the caller sees, with
//     no ring entry, no doorbell and no goroutine wake. It polls for
//     callSpin once the carrier has started the call (the record's
//     started word) and for callSpinWake at most before that (a carrier
//     waking up, or descheduled by the host: the back-to-back round
//     trip's p99).
//     The carrier's own spin before it parks is the executor's (adaptive,
//     plus SetSpin): a longer carrier spin by default was measured and
//     rejected (BenchmarkFrontDoorRoundTrip's SetSpin row: on the loaded
//     2-vCPU guest a 50 us carrier spin took the CPU the caller needed,
//     GoInt p50 69-88 us against 35-37 us without it, load 12-13; it
//     helps only when a CPU is free for it).
//     An asynchronous call's waiter (CallResult.Wait, the steps of Fn and
//     Launch) polls the same way under the same rule, for its delivery
//     rather than its record, helping the sleeping server (await).
//     Every other call gets its index through the completion stack, which
//     one goroutine per table serves: it pops settled indices in batches
//     (one cgo call per batch) and hands each to its waiter's channel; it
//     spins a little with Gosched before it arms the eventfd and parks in
//     the netpoller, and a carrier writes the eventfd only when it was
//     armed, so a busy table costs no syscall per call.
//     The netpoller is polled only by an M whose P ran out of goroutines
//     (or by sysmon, every 10 ms): while every P is busy, a rung server
//     is not run. So a caller about to park first delivers what the stack
//     holds itself when the server sleeps (help: one atomic load when the
//     stack is empty; the pops are serialised by one flag, the server's
//     and the helpers'). Measured with xtcbench's stage diagnostic, the
//     generator yielding its P after each request (every P busy, A1 10%):
//     kernel end -> return p50 48-112 us against 0.58-1.6 ms, p99
//     0.8-4.9 ms against 6.5-42 ms; with the usual locked generator the
//     other P's M waits in the scheduler's steal sleep (usleep(3), 60-90
//     us here) and neither the server nor a caller runs meanwhile (p50
//     76-170 us either way: the generator's cost, TestFromGoStages).
//   - cancellation: a ctx that ends first kills the call (exec_gocall.c: not
//     started, it never runs; running, its proc dies at its next slice or
//     park) and leaves the slot to the server, which frees it when the
//     settlement arrives; the caller returns ctx.Err() at once.
//   - end: Fini finalises the C executor (every started call settles
//     through its proc's exit hook), then settles the records its fini
//     dropped unrun (ErrAborted); the server frees the table once every
//     slot came back, and exits.
//
//   - stackFrugal: a handler's goroutine is new, on the runtime's
//     smallest stack (2 KB, of which the runtime keeps 928 bytes), and a
//     call whose frames do not fit copies the whole stack to one twice
//     the size. The synchronous path did on every call (GoInt, 4 frames
//     of 90-450 bytes, and cgo's pointer checks under the submission), a
//     copy that cost ~0.9 us of CPU per request in xtcbench's A1 from Go
//     (5.5 % of the samples) and 1.5-2 us per call from new goroutines
//     (BenchmarkFrontDoorPerGoroutine). So the submission and the wait
//     are sibling calls (beginSync, endSync), the rare branches are out of
//     line (makeCallTable, submitC, refused, cancelSync), and the per-call
//     C functions take the table, the kernel and the class as uintptr_t
//     (gobridge_int.h: no cgoCheckPointer per argument). The call now
//     leaves room for a caller frame or two (TestFrontDoorStackFrugal);
//     a plain cgo call leaves more (~700 bytes).
//
// Rules kept: Go code never runs on a fiber stack (the server and the
// waiters are plain goroutines; carriers never call Go for a call), and no
// preemption signal is armed on a Go thread (only cgo calls that push on
// a ring, kill a pid or pop a ring are made from Go).

/*
#include <stdint.h>
#include <stdlib.h>
#include "xtc.h"
#include "gobridge_int.h"
*/
import "C"

import (
	"context"
	"os"
	"runtime"
	"strconv"
	"sync/atomic"
	"time"
	"unsafe"
)

// callCapacity is the hard limit of the calls of one executor in flight
// at once (C records, made a chunk at a time as calls overlap); past it a
// call returns ErrAgain. A variable for the tests only.
var callCapacity = 1 << 20

// callChunk: records per chunk (C.XTC__GOCALLS_CHUNK).
const callChunk = 1024

// slotChunk is one chunk of slots and its C records' base.
type slotChunk struct {
	base  unsafe.Pointer // the chunk's first xtc__gocall_done_t
	slots [callChunk]callSlot
}

// callSpin is how long a caller that found the executor idle polls its
// record once the carrier has started the call (the record's started
// word): a short call comes back in 1-3 us; longer spins held the
// caller's P from the goroutines behind it (with GOMAXPROCS 2 and a busy
// load generator on the other P, a 50 us spin delayed every request that
// arrived meanwhile) and took a CPU from the carrier on a 2-vCPU machine.
var callSpin = 10 * time.Microsecond

// callSpinWake bounds the poll while the call is not started yet: the
// carrier is waking up (13 us p50, p99 40-50 us on the 2-vCPU guest) or
// was descheduled, and a caller that gave up after 10 us parked and then
// waited for the server's delivery on top (30-60 us more). Measured with
// calls 100 us apart (the carrier parked): p90 24-53 us, p99 81-105 us
// with a 10 us poll; p90 15-16 us, p99 42-44 us with 50 us. Back to back
// (BenchmarkFrontDoorRoundTrip, 3 alternated rounds, load 1.7), GoInt's
// p99 was 46-74 us with a flat 10 us poll and 17-50 us with 50 us; the
// started word keeps that without a flat 50 us poll's cost: 50 us of a
// CPU on every call whose function runs longer. The executor is idle
// then (the spin is granted only to its one live call), so the poll
// holds no other call back.
var callSpinWake = 50 * time.Microsecond

// serverSpin is how long the completion server polls the stack (yielding
// its P between polls) before it arms the doorbell and parks.
var serverSpin = 10 * time.Microsecond

// spinYield: a spinning caller yields its P this often.
var spinYield = 10 * time.Microsecond

const (
	slotFree      = iota
	slotSync      // a goroutine waits on ch
	slotAbandoned // the waiter left (ctx): the server frees it
	slotDelivered // the server sent the token
	slotAsync     // a CallResult waits (GoAsync)
)

type callSlot struct {
	st  atomic.Uint32
	ch  chan struct{} // capacity 1, made on the slot's first sync use
	res *CallResult   // slotAsync
}

type goCalls struct {
	e      *Exec
	t      *C.xtc__gocalls_t
	tu     C.uintptr_t // t for the per-call adapters (gobridge_int.h)
	stride uintptr
	bell   *os.File

	// chunks[c] is set once, before any of its indices is handed out
	// (under free.mu), and never changes: readers load it without the
	// lock
	chunks []atomic.Pointer[slotChunk]
	limit  int // the hard limit (callCapacity rounded up by C)

	free freeSlots // its chunks are made under free.mu (grow)

	// serving is held by the one goroutine popping the completion stack
	// (the server or a helper, see help); buf is its pop buffer
	serving atomic.Bool
	buf     [256]C.uint32_t
	head    *atomic.Uintptr // the stack's head word (C): 0 when empty
	armed   *atomic.Int32   // the doorbell's armed word (C)
	asleep  atomic.Bool     // the server waits in the netpoller
	helped  atomic.Uint64   // deliveries made by help (tests)

	// the per-loop counts of calls in flight (C: int32s) and the loop
	// picked last (pick)
	loads  unsafe.Pointer
	nloops int
	last   atomic.Int32

	live     atomic.Int64 // slots taken
	awaited  atomic.Int64 // calls whose settlement will come through the stack
	spinners atomic.Int32
	maxSpin  int32
	closed   atomic.Bool
	exited   chan struct{}
}

// callTable returns the executor's table, making it on first use (e.mu
// held for reading by the caller, so Fini cannot run meanwhile). The
// fast path is inlined: the maker's frame is not on every call's stack
// (stackFrugal).
func (e *Exec) callTable() (*goCalls, error) {
	if g := e.gc.Load(); g != nil {
		return g, nil
	}
	return e.makeCallTable()
}

func (e *Exec) makeCallTable() (*goCalls, error) {
	e.gcMu.Lock()
	defer e.gcMu.Unlock()
	if g := e.gc.Load(); g != nil {
		return g, nil
	}
	if C.XTC__GOCALLS_CHUNK != callChunk {
		panic("xtc: callChunk differs from XTC__GOCALLS_CHUNK")
	}
	var t *C.xtc__gocalls_t
	if rc := C.xtc__gocalls_create(e.c, C.uint32_t(callCapacity), &t); rc != 0 {
		return nil, mkerr("xtc_proc_spawn", int(rc))
	}
	n := int(C.xtc__gocalls_cap(t))
	var nl C.int
	loads := unsafe.Pointer(C.xtc__gocalls_loads(t, &nl))
	fd := C.xtc__gocalls_fd(t)
	C.xtc__gocalls_release_fd(t) // the os.File owns it from here
	g := &goCalls{
		e:      e,
		t:      t,
		tu:     C.uintptr_t(uintptr(unsafe.Pointer(t))),
		stride: uintptr(C.xtc__gocalls_stride()),
		bell:   os.NewFile(uintptr(fd), "xtc-calls"),
		chunks: make([]atomic.Pointer[slotChunk], (n+callChunk-1)/callChunk),
		limit:  n,
		exited: make(chan struct{}),
		head:   (*atomic.Uintptr)(C.xtc__gocalls_head(t)),
		loads:  loads,
		nloops: int(nl),
		armed:  (*atomic.Int32)(C.xtc__gocalls_armed(t)),
	}
	if err := g.grow(); err != nil { // chunk 0, made with the table
		_ = g.bell.Close()
		C.xtc__gocalls_destroy(t)
		return nil, err
	}
	g.maxSpin = int32(runtime.GOMAXPROCS(0) / 2)
	if g.maxSpin < 1 {
		g.maxSpin = 1
	}
	e.gc.Store(g)
	go g.serve()
	return g, nil
}

// grow makes the next chunk (free.mu held, or the table not yet
// published): its C records, its slots, its indices on the free list.
// ErrAgain at the hard limit.
func (g *goCalls) grow() error {
	c := g.free.made / callChunk
	if c >= len(g.chunks) {
		return errReason("xtc_proc_spawn", ErrAgain,
			"too many calls in flight ("+strconv.Itoa(g.limit)+")")
	}
	var base unsafe.Pointer
	if rc := C.xtc__gocalls_chunk(g.t, C.uint32_t(c), &base); rc != 0 {
		return mkerr("xtc_proc_spawn", int(rc))
	}
	g.chunks[c].Store(&slotChunk{base: base})
	g.free.pushChunk(callChunk)
	return nil
}

// load is loop li's count of calls in flight (an atomic load of C memory).
func (g *goCalls) load(li int) int32 {
	return (*atomic.Int32)(unsafe.Add(g.loads, uintptr(li)*4)).Load()
}

// pick places a call that names no loop: the loop with the fewest calls
// in flight, the last one picked on a tie (its carrier is the one awake).
// Round robin, the first rule, sent a lone goroutine's sequential calls
// to both carriers of a 2-CPU machine in turn, and both spun for the next
// one beside the spinning caller: BenchmarkFrontDoorThroughput
// G=1/carriers=2 made 27-34 k calls/s against 0.48-0.59 M on one carrier
// (0.51-0.53 M now), G=64/carriers=2 0.39-0.41 M/s (0.67-0.72 M now).
// The counts are read
// without a lock, so goroutines picking at once may pick the same loop;
// the next calls see the difference.
func (g *goCalls) pick() int {
	if g.nloops <= 1 {
		return 0
	}
	last := int(g.last.Load())
	best, bn := last, g.load(last)
	for k := 1; k < g.nloops && bn > 0; k++ {
		j := last + k
		if j >= g.nloops {
			j -= g.nloops
		}
		if c := g.load(j); c < bn {
			best, bn = j, c
		}
	}
	if best != last {
		g.last.Store(int32(best))
	}
	return best
}

func (g *goCalls) slot(i uint32) *callSlot {
	return &g.chunks[i/callChunk].Load().slots[i%callChunk]
}

func (g *goCalls) done(i uint32) *C.xtc__gocall_done_t {
	k := g.chunks[i/callChunk].Load()
	return (*C.xtc__gocall_done_t)(unsafe.Add(k.base, uintptr(i%callChunk)*g.stride))
}

func (g *goCalls) alloc() (uint32, error) {
	i, err := g.free.pop(g.grow)
	if err != nil {
		return 0, err
	}
	g.live.Add(1)
	return i, nil
}

// release hands slot i back once nothing of its call is left (the record
// settled and read, or abandoned and settled).
func (g *goCalls) release(i uint32) {
	g.slot(i).st.Store(slotFree)
	g.free.push(i)
	g.e.calls.Add(-1)
	g.unhold()
}

// unhold drops one hold on the table (a slot, or an await's): the server
// frees the table once the executor closed and nothing holds it.
func (g *goCalls) unhold() {
	if g.live.Add(-1) == 0 && g.closed.Load() {
		g.kick()
	}
}

// kick makes the server look at g.closed (a read deadline in the past
// ends its netpoller wait; no C call, so it is safe at any time).
func (g *goCalls) kick() { _ = g.bell.SetReadDeadline(time.Unix(1, 0)) }

// result reads a settled record. An ErrNomem there comes from the
// carrier's proc spawn (its stack): it carries the limit the kernel
// refused, as ProcSpawn's does (withNomemReason).
func (g *goCalls) result(i uint32, op string) (int64, error) {
	d := g.done(i)
	v, st := int64(d.value), int(d.status)
	if st != 0 {
		return v, withNomemReason(mkerr(op, st))
	}
	return v, nil
}

// take reads a settled record and hands its slot back: the end of every
// synchronous call that was not abandoned.
func (g *goCalls) take(i uint32, op string) (int64, error) {
	v, err := g.result(i, op)
	g.release(i)
	return v, err
}

// serve is the completion stack's consumer of last resort: it parks in
// the netpoller and the carrier rings it. Whoever pops holds g.serving
// (help takes it too) and pops until a pop comes back short, so nothing
// is left behind but the stack's head word, which the arm reads.
func (g *goCalls) serve() {
	var b [8]byte
	defer close(g.exited)
	for {
		if g.serving.CompareAndSwap(false, true) {
			n := g.drain()
			g.serving.Store(false)
			if n > 0 {
				continue
			}
		} // else a helper is delivering what it popped
		if g.closed.Load() && g.live.Load() == 0 {
			break // (a helper holds a slot: none is left)
		}
		if g.spinPop() {
			continue
		}
		if C.xtc__gocalls_arm(g.t) != 0 {
			continue // settled between the pop and the arm
		}
		g.asleep.Store(true)
		_, _ = g.bell.Read(b[:]) // parks in the netpoller; kick ends it
		g.asleep.Store(false)
	}
	_ = g.bell.Close()
	C.xtc__gocalls_destroy(g.t)
}

// drain pops and delivers until the stack is empty (g.serving held).
func (g *goCalls) drain() int {
	total := 0
	for {
		n := int(C.xtc__gocalls_pop_u(g.tu, &g.buf[0], C.int(len(g.buf))))
		for _, i := range g.buf[:n] {
			g.deliver(uint32(i))
		}
		total += n
		if n < len(g.buf) {
			return total
		}
	}
}

// help delivers what the completion stack holds from a goroutine that is
// running anyway (a caller about to park) while the server sleeps in the
// netpoller: one atomic load when the stack is empty. The netpoller
// notices the doorbell only when a P runs out of goroutines (or from
// sysmon, every 10 ms): with every P busy (A1 10 %, the stage
// diagnostic's generator yielding its P) settlements waited p50 0.6-1.6
// ms, p99 6.5-42 ms for their delivery, 48-112 us p50 with help. (With
// the generator holding a P, the other P's M sleeps in the scheduler's
// steal usleep and neither the server nor a caller runs meanwhile: p50
// 64-139 us either way.)
//
// The server asleep and not rung yet, the helper takes the arm (no
// settlement rings the doorbell while it delivers) and gives it back
// before it stops, with the server's own Dekker: store armed, then
// re-read the head. Rung already (the netpoller has not noticed), it
// delivers what is there and leaves the rest to the server, whose
// wake-up is on its way. A server that is awake is not helped: it
// delivers in batches already, and helping it anyway cost G=64
// throughput (293 k/s against 473 k/s, medians of 3, load 31-37: the
// callers popped, and the server woke to doorbells and found nothing).
// The caller holds a slot of the table, so the table outlives the help
// (the server ends once every slot came back).
func (g *goCalls) help() {
	if g.head.Load() == 0 || !g.asleep.Load() || !g.serving.CompareAndSwap(false, true) {
		return
	}
	took := g.armed.Swap(0) != 0
	for {
		g.helped.Add(uint64(g.drain()))
		if !took {
			break // rung: the server wakes and drains what comes next
		}
		g.armed.Store(1)
		if g.head.Load() == 0 || g.armed.Swap(0) == 0 {
			break // empty, or a settlement rang: the server drains
		}
	}
	g.serving.Store(false)
}

// spinPop polls the stack for up to serverSpin before the server parks,
// while settlements are still to come through it (an idle table parks at
// once). Like spin it holds its P (no Gosched storm) but for a shorter
// time. It does not spin for calls merely not yet released: right after a
// delivery the woken waiter sits in this P's run queue, and a spin there
// delayed it by the whole spin (measured: a lone caller's round trip
// 31 -> 55 us p50).
func (g *goCalls) spinPop() bool {
	if serverSpin <= 0 || g.awaited.Load() <= 0 {
		return false
	}
	t0 := time.Now()
	for time.Since(t0) < serverSpin {
		for j := 0; j < 16; j++ {
			if g.peek() {
				return true
			}
		}
	}
	return false
}

// peek: is something settled and not popped yet? (an atomic load, no
// cgo: whoever popped last drained the consumer's list)
func (g *goCalls) peek() bool {
	return g.head.Load() != 0
}

func (g *goCalls) deliver(i uint32) {
	g.awaited.Add(-1)
	s := g.slot(i)
	for {
		switch s.st.Load() {
		case slotSync:
			if s.st.CompareAndSwap(slotSync, slotDelivered) {
				s.ch <- struct{}{}
				return
			}
		case slotAbandoned:
			g.release(i)
			return
		case slotAsync:
			r := s.res
			r.mu.Lock()
			v, err := g.result(i, "xtc.Exec.Go")
			if r.pid.IsNone() {
				r.pid = g.pid(i)
			}
			r.idx = -1
			s.res = nil
			g.release(i)
			r.mu.Unlock()
			r.f.settle(v, err)
			return
		default:
			panic("xtc: call settled twice or on a free slot")
		}
	}
}

// await polls for up to callSpin until ready() (an asynchronous call's
// result delivered: GoAsync's Wait, a step of Fn or Launch), delivering
// in the sleeping server's place (help), when its call is the table's
// one live call and a spinner's place is free. A short call on an awake
// carrier then comes back without the netpoller's wake-up of the server:
// measured with BenchmarkFrontDoorRoundTrip, GoAsync + Wait p50 22-48 us
// and a one-slice LaunchFn 38-59 us before, each two handoffs (the
// carrier's eventfd write, the netpoller's wake of the server) where the
// synchronous call's spin has none. The await holds the table like a
// slot (live), so that a Fini meanwhile cannot free it under the poll.
func (g *goCalls) await(ready func() bool) {
	if callSpin <= 0 || g.live.Load() != 1 || ready() {
		return
	}
	if g.spinners.Add(1) > g.maxSpin {
		g.spinners.Add(-1)
		return
	}
	defer g.spinners.Add(-1)
	g.live.Add(1)
	defer g.unhold()
	if g.closed.Load() {
		return // the table may be on its way out: the channel waits
	}
	pollFor(callSpin, func() bool {
		if ready() {
			return true
		}
		g.help()
		return ready()
	})
}

// spin polls the waiter word of record i until the call is settled
// (true) or for callSpin after the carrier started it, callSpinWake at
// most (false). Like pollFor it yields its P every spinYield.
func (g *goCalls) spin(i uint32) bool {
	d := g.done(i)
	w := (*atomic.Uint32)(unsafe.Pointer(&d.waiter))
	started := (*atomic.Uint32)(unsafe.Pointer(&d.started))
	var since time.Duration // when the start was seen (0: not yet)
	return pollWhile(func(el time.Duration) bool {
		if since == 0 && started.Load() != 0 {
			since = max(el, 1)
		}
		return el <= callSpinWake && (since == 0 || el-since <= callSpin)
	}, func() bool { return w.Load() == C.XTC__GW_DONE })
}

// callStats: records submitted, settled through the ring, settled to a
// spinning caller, queued past a full ring (the carrier's overflow; tests,
// benchmarks).
func (e *Exec) callStats() (submitted, ring, spun, fallback uint64) {
	g := e.gc.Load()
	if g == nil || g.closed.Load() {
		return
	}
	var st C.xtc__gocalls_stats_t
	C.xtc__gocalls_stats(g.t, &st)
	return uint64(st.submitted), uint64(st.ring), uint64(st.spun), uint64(st.fallback)
}

// submit takes a slot and queues fn(arg) on loop li in class cls; st is
// the slot's waiter kind. Returns the slot and whether to poll its
// record (the spin was granted). e.mu is held for reading (no
// Fini meanwhile).
//
// With res (an asynchronous call), spawn says to start the proc from this
// thread so that its pid is known at return (GoAsync); res.mu is held
// meanwhile, so a settlement that arrives first waits for it.
func (e *Exec) submitCall(fn unsafe.Pointer, arg C.uintptr_t, p *callPlace, st uint32, res *CallResult, wantSpin, spawn bool) (*goCalls, uint32, bool, error) {
	const op = "xtc_proc_spawn"
	e.mu.RLock()
	defer e.mu.RUnlock()
	if e.closed.Load() || e.shutting.Load() {
		return nil, 0, false, errClosed(op)
	}
	g, err := e.callTable()
	if err != nil {
		return nil, 0, false, err
	}
	i, err := g.alloc()
	if err != nil {
		return nil, 0, false, err
	}
	if p.li < 0 {
		p.on(g.pick())
	}
	s := g.slot(i)
	if st == slotSync && s.ch == nil {
		s.ch = make(chan struct{}, 1)
	}
	s.res = res
	if res != nil {
		res.mu.Lock()
		defer res.mu.Unlock()
		res.g, res.idx, res.loop = g, int32(i), p.li
	}
	s.st.Store(st)
	// Spin only as the table's one live call: a call whose executor is
	// idle while other calls wait for their delivery (inflight 0 in C, the
	// server behind) would hold a P that the server and the woken callers
	// need (64 goroutines on 2 Ps: 9-60% of the calls spun that way).
	spin := 0
	if wantSpin && callSpin > 0 && g.live.Load() == 1 && g.spinners.Load() < g.maxSpin {
		spin = 1
	}
	e.calls.Add(1)
	var rc C.int
	if p.name == "" && !spawn { // the common call, with no frame more
		rc = g.push(i, p, fn, arg, nil, spin)
	} else {
		rc = g.submitC(i, p, fn, arg, spin, res, spawn)
	}
	if rc < 0 {
		return nil, 0, false, g.refused(i, op, rc, spawn)
	}
	if rc > 0 { // granted (2: the carrier was parked; spin bounds either)
		return g, i, true, nil
	}
	g.awaited.Add(1)
	return g, i, false, nil
}

// push fills record i and pushes it on its loop's ring (xtc__gocall_submit;
// inlined, so the common call has no frame more).
func (g *goCalls) push(i uint32, p *callPlace, fn unsafe.Pointer, arg C.uintptr_t, name *C.char, spin int) C.int {
	return C.xtc__gocall_submit_u(g.tu, C.uint32_t(i), C.int(p.li),
		C.uintptr_t(uintptr(fn)), arg, C.uintptr_t(uintptr(unsafe.Pointer(p.cls))), name, C.int(spin))
}

// submitC hands record i to C when the call has a name or spawns:
// pushed on its loop's ring (the return is then submit's grant: 0, 1, or
// 2 for a parked carrier) or, with spawn, started as a proc from this
// thread (res.pid set). Negative: refused.
func (g *goCalls) submitC(i uint32, p *callPlace, fn unsafe.Pointer, arg C.uintptr_t, spin int, res *CallResult, spawn bool) C.int {
	var cname *C.char
	if p.name != "" {
		cname = C.CString(p.name) // copied into the record
		defer C.free(unsafe.Pointer(cname))
	}
	if !spawn {
		return g.push(i, p, fn, arg, cname, spin)
	}
	var pid C.xtc_pid_t
	rc := C.xtc__gocall_spawn(g.t, C.uint32_t(i), C.int(p.li), fn, arg, p.cls, cname, &pid)
	if rc == 0 {
		res.pid = pidFromC(pid)
	}
	return rc
}

// refused hands back the slot of a submission C refused and says why.
func (g *goCalls) refused(i uint32, op string, rc C.int, spawn bool) error {
	g.slot(i).res = nil
	g.release(i)
	err := mkerr(op, int(rc))
	if spawn { // the proc's stack: say which limit refused it
		err = withNomemReason(err)
	}
	return err
}

// callSync runs one call and waits for it (Exec.Go, GoInt). The
// submission and the wait are two calls made from here, so the frames of
// one are off the stack while the other runs (stackFrugal).
func (e *Exec) callSync(ctx context.Context, fn unsafe.Pointer, arg C.uintptr_t, opts []CallOption) (int64, error) {
	g, i, spin, err := e.beginSync(fn, arg, opts)
	if err != nil {
		return 0, err
	}
	return g.endSync(ctx, i, spin)
}

// beginSync places and submits a synchronous call.
func (e *Exec) beginSync(fn unsafe.Pointer, arg C.uintptr_t, opts []CallOption) (*goCalls, uint32, bool, error) {
	p, err := e.place(opts)
	if err != nil {
		return nil, 0, false, err
	}
	if fn == nil {
		return nil, 0, false, errReason("xtc_proc_spawn", ErrInval, "nil C function")
	}
	return e.submitCall(fn, arg, &p, slotSync, nil, true, false)
}

// endSync waits for synchronous call i: it polls its record when the
// spin was granted, else waits for its delivery; a ctx that ends first
// kills the call.
func (g *goCalls) endSync(ctx context.Context, i uint32, spin bool) (int64, error) {
	const op = "xtc.Exec.Go"
	if spin {
		g.spinners.Add(1)
		ok := g.spin(i)
		g.spinners.Add(-1)
		if ok || C.xtc__gocall_unspin_u(g.tu, C.uint32_t(i)) == 1 {
			return g.take(i, op)
		}
		g.awaited.Add(1) // it comes through the stack now
	}
	g.help()
	s := g.slot(i)
	// A ctx that can never end (Background, TODO) waits on the channel
	// alone: a plain receive, not a two-case select (selectgo and its
	// locks were 4 % of the samples at G=64)
	if done := ctx.Done(); done == nil {
		<-s.ch
	} else {
		select {
		case <-s.ch:
		case <-done:
			return g.cancelSync(ctx, i, op)
		}
	}
	return g.take(i, op)
}

// cancelSync ends call i whose ctx ended first. Kill, then wait for the
// settlement: Go returns only once the call's C side is gone (doc.go, "C
// memory, one rule"), so the caller may free the argument right away. The
// kill lands at the kernel's next slice (its next yield without
// involuntary preemption). A call killed before it started never runs fn
// (nor touches arg): leave at once, the server frees the slot at the
// settlement (also when the executor is not started yet).
func (g *goCalls) cancelSync(ctx context.Context, i uint32, op string) (int64, error) {
	s := g.slot(i)
	if C.xtc__gocall_kill_unstarted(g.t, C.uint32_t(i)) == 1 &&
		s.st.CompareAndSwap(slotSync, slotAbandoned) {
		return 0, ctx.Err()
	}
	<-s.ch
	v, err := g.take(i, op)
	if err == nil {
		return v, nil // it returned before the kill landed
	}
	return 0, ctx.Err()
}

// callAsync starts one call and returns its CallResult (GoAsync with
// spawn: the pid known at return; the steps of Fn and Launch through the
// carrier's ring).
func (e *Exec) callAsync(fn unsafe.Pointer, arg C.uintptr_t, opts []CallOption, spawn bool) (*CallResult, error) {
	p, err := e.place(opts)
	if err != nil {
		return nil, err
	}
	if fn == nil {
		return nil, errReason("xtc_proc_spawn", ErrInval, "nil C function")
	}
	r := &CallResult{f: &Future{done: make(chan struct{}), op: "xtc.Exec.Go"}, idx: -1} // loop: submitCall
	if _, _, _, err := e.submitCall(fn, arg, &p, slotAsync, r, false, spawn); err != nil {
		return nil, err
	}
	return r, nil
}

func (g *goCalls) pid(i uint32) Pid {
	var p C.xtc_pid_t
	C.xtc__gocall_pid(g.t, C.uint32_t(i), &p)
	return pidFromC(p)
}

// finish runs after xtc_exec_fini returned (e.mu held): every record the
// fini dropped unrun is settled ErrAborted, and the server frees the
// table once every slot is back.
func (g *goCalls) finish() {
	C.xtc__gocalls_settle(g.t)
	g.closed.Store(true)
	g.kick()
}

// settle completes a Future of the front door (no dispatch handle).
func (f *Future) settle(v int64, err error) {
	f.value = v
	f.err = err
	if f.onDone != nil {
		f.onDone()
	}
	close(f.done)
}
