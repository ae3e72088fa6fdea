//go:build cgo

package xtc

// Go mailboxes: a pid whose messages are read by goroutines.
//
// Model. Go code never runs on a proc, so a Mailbox is a small relay proc
// (C, on an executor loop) that owns a real pid and mailbox: C procs send
// to it with xtc_send, and it monitors and links on Go's behalf, so DOWN
// and EXIT messages arrive like any other. It takes each message from its
// mailbox and hands a copy to Go through the process-wide completion queue
// (a promise notified to the queue per message), where the serving
// goroutine puts it on the Mailbox's channel; Recv reads that channel with
// a context. No OS thread blocks for a receiver.
//
// Flow control: the relay hands over at most `window` messages Go has not
// received yet (credits); past that it stops taking messages, so they stay
// in its C mailbox (bounded: senders then get ErrAgain), and the serving
// goroutine never blocks on a full channel. Control requests (monitor,
// link) are messages that start with a random per-mailbox token. The
// relay's exit (Close, a kill, Fini) settles a "gone" entry reserved at
// creation, after which Go frees the shared C record: exactly once.
//
// Alternatives rejected: a Go-side proc shadow polled with xtc_proc_info
// (a poll per receiver, no DOWN/EXIT); making Go code run on a fiber
// (cgo-feasibility.md forbids it).

/*
#include <stdint.h>
#include <stdlib.h>
#include "xtc.h"
#include "gobridge_int.h"
*/
import "C"

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"sync"
	"time"
	"unsafe"
)

const mailboxWindow = 256

// Mailbox is a pid whose mailbox goroutines read: C procs send to Pid()
// with xtc_send (or Go with Send), Recv returns the messages in order.
// Monitor and Link act for the mailbox, so DOWN and EXIT messages arrive
// through Recv (decode them with DownDecode and ExitDecode). It lives on
// one executor loop until Close, a kill of its pid, or the executor's
// Fini; Recv then returns ErrClosed once the messages already handed over
// are read. Safe for concurrent use.
type Mailbox struct {
	pid   Pid
	tag   uint64
	token [16]byte
	msgs  chan []byte
	reply chan ctlReply
	ctlMu sync.Mutex

	mu   sync.Mutex
	c    *C.xtc__gombox_t // nil once gone (freed)
	gone chan struct{}
}

type ctlReply struct {
	ref uint64
	rc  int
}

// NewMailbox starts a Go mailbox on executor loop loopIdx (< 0: loop 0)
// with a C mailbox of capacity cap (0 = XTC_MAILBOX_DEFAULT_CAP): at most
// cap messages wait in C plus 256 handed to Go and not yet received, then
// senders get ErrAgain. The executor must run for messages to flow.
// Errors: ErrClosed, ErrInval (bad loop or cap), ErrNomem, ErrResource.
func (e *Exec) NewMailbox(loopIdx int, cap int) (*Mailbox, error) {
	const op = "xtc.Exec.NewMailbox"
	if e == nil || e.closed.Load() || e.shutting.Load() {
		return nil, errClosed(op)
	}
	if loopIdx < 0 {
		loopIdx = 0
	}
	if loopIdx >= len(e.loops) {
		return nil, errReason(op, ErrInval, "loop index out of range")
	}
	if cap < 0 {
		return nil, errReason(op, ErrInval, "negative capacity")
	}
	q, err := getCQ()
	if err != nil {
		return nil, err
	}
	m := &Mailbox{msgs: make(chan []byte, mailboxWindow), reply: make(chan ctlReply, 1),
		gone: make(chan struct{})}
	if _, err := rand.Read(m.token[:]); err != nil {
		return nil, errReason(op, ErrInternal, "no random token: "+err.Error())
	}
	q.mu.Lock()
	m.tag = (q.next | 3) + 1 // a block of 4 tags: messages, gone, replies
	q.next = m.tag + 3
	q.mu.Unlock()
	if rc := C.xtc__gombox_new(q.cq, C.uint64_t(m.tag), mailboxWindow,
		(*C.uchar)(unsafe.Pointer(&m.token[0])), &m.c); rc != 0 {
		return nil, mkerr(op, int(rc))
	}
	q.mu.Lock()
	q.mboxes[m.tag] = m // before the relay can produce anything
	q.mu.Unlock()
	var pid C.xtc_pid_t
	err = e.loops[loopIdx].withC(op, func(c *C.xtc_loop_t) C.int {
		return C.xtc__gombox_spawn(c, m.c, C.size_t(cap), &pid)
	})
	if err != nil {
		<-m.gone // the settled gone entry frees the record
		return nil, err
	}
	m.pid = pidFromC(pid)
	return m, nil
}

// Pid is the mailbox's pid (send to it from C with xtc_send).
func (m *Mailbox) Pid() Pid { return m.pid }

// Recv returns the oldest message, waiting until one arrives or ctx ends
// (ctx.Err()). ErrClosed once the mailbox is gone and drained. With
// nothing queued it polls for up to 10 µs (one receiver at a time), so a
// message that is on its way costs no wake-up, then parks.
func (m *Mailbox) Recv(ctx context.Context) ([]byte, error) {
	if q := theCQ; q != nil && len(m.msgs) == 0 { // poll, popping in the server's place (completion.go)
		q.await(m.ready, callSpin) // a sibling of the wait: not under its frame
	}
	return m.recv(ctx)
}

func (m *Mailbox) recv(ctx context.Context) ([]byte, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	select {
	case b, ok := <-m.msgs:
		if !ok {
			return nil, errClosed("xtc.Mailbox.Recv")
		}
		m.mu.Lock()
		if m.c != nil {
			C.xtc__gombox_credit(m.c)
		}
		m.mu.Unlock()
		return b, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// ready: a message is queued or the mailbox is gone (Recv's poll).
func (m *Mailbox) ready() bool { return len(m.msgs) > 0 || isGone(m.gone) }

// control sends one request to the relay and waits for its answer.
func (m *Mailbox) control(op string, kind byte, v uint64) (uint64, error) {
	m.ctlMu.Lock()
	defer m.ctlMu.Unlock()
	var b [16 + 1 + 8]byte
	copy(b[:], m.token[:])
	b[16] = kind
	binary.NativeEndian.PutUint64(b[17:], v)
	for wait := time.Duration(0); ; wait += time.Millisecond {
		err := Send(m.pid, b[:])
		if err == nil {
			break
		}
		if isGone(m.gone) {
			return 0, errClosed(op)
		}
		if !errors.Is(err, ErrAgain) || wait >= 100*time.Millisecond {
			return 0, &Error{Op: op, Code: err.(*Error).Code,
				Reason: "the mailbox is full: receive from it first"}
		}
		time.Sleep(time.Millisecond)
	}
	select {
	case r := <-m.reply:
		return r.ref, mkerr(op, r.rc)
	case <-m.gone:
		return 0, errClosed(op)
	}
}

func isGone(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

func packPid(p Pid) uint64 {
	return uint64(p.LoopID)<<48 | uint64(p.LocalID)<<32 | uint64(p.Gen)
}

// Monitor, Demonitor, Link and Unlink are requests to the relay through
// the mailbox itself: ErrAgain (after 100 ms of retries) when the C
// mailbox is full and nobody receives.

// Monitor makes the mailbox watch target (xtc_monitor, on its behalf):
// when target exits, a DOWN message with the returned reference arrives
// through Recv (DownDecode). A target already dead gives a DOWN at once.
func (m *Mailbox) Monitor(target Pid) (uint64, error) {
	return m.control("xtc_monitor", 'M', packPid(target))
}

// Demonitor cancels a monitor of the mailbox (xtc_demonitor).
func (m *Mailbox) Demonitor(ref uint64) error {
	_, err := m.control("xtc_demonitor", 'D', ref)
	return err
}

// Link links the mailbox with target (xtc_link): when either exits with a
// non-zero reason the other gets an EXIT message (ExitDecode); the
// mailbox keeps running.
func (m *Mailbox) Link(target Pid) error {
	_, err := m.control("xtc_link", 'L', packPid(target))
	return err
}

// Unlink removes a link of the mailbox (xtc_unlink).
func (m *Mailbox) Unlink(target Pid) error {
	_, err := m.control("xtc_unlink", 'U', packPid(target))
	return err
}

// Close ends the mailbox (io.Closer): its relay proc is killed (at its
// next park, at once when idle), its links and monitors fire, messages
// already handed over can still be received. ErrClosed the second time.
func (m *Mailbox) Close() error {
	if isGone(m.gone) {
		return errClosed("xtc.Mailbox.Close")
	}
	if err := ExitPid(m.pid, 0); err != nil && !isGone(m.gone) {
		return err
	}
	<-m.gone
	return nil
}

// Done is closed once the mailbox's relay proc has ended.
func (m *Mailbox) Done() <-chan struct{} { return m.gone }

// deliverMsg copies message record v into Go memory, frees it and queues
// it. Its own function: the cgo calls' frames are on top of a waiter's
// (Recv, await, drain, hand) and must still fit a new goroutine's stack
// (TestFrontDoorStackFrugal).
//
//go:noinline
func (m *Mailbox) deliverMsg(v C.intptr_t) {
	r := C.uintptr_t(v) // a C record (gobridge_int.h: no pointer check)
	b := C.GoBytes(C.xtc__gombox_rec_data_u(r), C.int(C.xtc__gombox_rec_len_u(r)))
	C.xtc__gombox_rec_free_u(r)
	m.msgs <- b
}

// deliverMailbox handles one completion entry of a mailbox (the server,
// or a waiter in its place). Never blocks: credits bound the messages in
// m.msgs.
func (q *completionQueue) deliverMailbox(m *Mailbox, e *C.xtc_cq_entry_t) {
	switch uint64(e.tag) - m.tag {
	case 0:
		m.deliverMsg(e.value)
	case 1:
		q.mu.Lock()
		delete(q.mboxes, m.tag)
		q.mu.Unlock()
		m.mu.Lock()
		if m.c != nil {
			C.xtc__gombox_free(m.c)
			m.c = nil
		}
		m.mu.Unlock()
		close(m.gone)
		close(m.msgs)
	case 2:
		m.reply <- ctlReply{ref: uint64(e.value), rc: int(e.status)}
	}
}
