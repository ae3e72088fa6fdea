//go:build cgo

package xtc

/*
#include <stdlib.h>
#include <string.h>
#include "xtc.h"
#include "gobridge_int.h"

static int xtc_go_proc_spawn(xtc_loop_t *loop, void *fn, void *arg,
                             const xtc_proc_opts_t *opts, xtc_pid_t *out)
{
	return xtc_proc_spawn(loop, (xtc_proc_fn)fn, arg, opts, out);
}
*/
import "C"

import (
	"unsafe"
)

func (p Pid) c() C.xtc_pid_t {
	return C.xtc_pid_t{loop_id: C.uint16_t(p.LoopID), local_id: C.uint16_t(p.LocalID), gen: C.uint32_t(p.Gen)}
}

func pidFromC(c C.xtc_pid_t) Pid {
	return Pid{LoopID: uint16(c.loop_id), LocalID: uint16(c.local_id), Gen: uint32(c.gen)}
}

// LoopClass is a scheduling class of one loop (xtc_exec_class_t, created
// by ExecClassCreate); nil is the loop's default lane. An executor-wide
// class is a *Class (Exec.NewClass), made of one LoopClass per loop.
type LoopClass struct {
	c C.xtc_exec_class_t
	l *Loop // the class lives (in C) until this loop is finalised
}

// with calls get with the C handle while the class's loop is held open;
// false for nil or once the loop was finalised (the C class is freed then).
func (c *LoopClass) with(get func(cls C.xtc_exec_class_t)) bool {
	if c == nil || c.l == nil {
		return false
	}
	c.l.cmu.RLock()
	defer c.l.cmu.RUnlock()
	if c.l.closed.Load() {
		return false
	}
	get(c.c)
	return true
}

// ProcSpawn starts a process on l running the C function fn(arg), where fn
// is a `void (*)(void *)` supplied by the caller's own cgo code, e.g.
// unsafe.Pointer(C.my_worker); a proc runs C on its own fiber stack and
// never Go. arg is passed through untouched and must not point to Go
// memory (cgo pointer rules); use C memory or a cgo.Handle value. From any
// goroutine.
func ProcSpawn(l *Loop, fn unsafe.Pointer, arg unsafe.Pointer, opts *ProcOpts) (Pid, error) {
	if fn == nil {
		return PidNone, &Error{Op: "xtc_proc_spawn", Code: ErrInval}
	}
	if l == nil {
		return PidNone, errClosed("xtc_proc_spawn")
	}
	var co C.xtc_proc_opts_t
	var copts *C.xtc_proc_opts_t
	if opts != nil {
		if opts.MailboxCap < 0 {
			return PidNone, &Error{Op: "xtc_proc_spawn", Code: ErrInval}
		}
		if opts.StackSize < 0 {
			return PidNone, errReason("xtc_proc_spawn", ErrInval, "negative StackSize")
		}
		co.stack_size = C.size_t(opts.StackSize)
		co.mailbox_cap = C.size_t(opts.MailboxCap)
		if opts.Migratable {
			co.migratable = 1
		}
		if opts.SchedClass != nil {
			// a class of another loop is refused by C too; refusing it
			// here also covers one whose loop was finalised (freed)
			if opts.SchedClass.l != l {
				return PidNone, &Error{Op: "xtc_proc_spawn", Code: ErrInval}
			}
			co.sched_class = opts.SchedClass.c
		}
		if opts.Name != "" {
			// C copies the name at spawn (XTC_PROC_NAME_MAX): freed
			// right after the call, so named spawns leave nothing behind.
			name := C.CString(opts.Name)
			defer C.free(unsafe.Pointer(name))
			co.name = name
		}
		copts = &co
	}
	var pid C.xtc_pid_t
	err := l.withC("xtc_proc_spawn", func(c *C.xtc_loop_t) C.int {
		return C.xtc_go_proc_spawn(c, fn, arg, copts, &pid)
	})
	if err != nil {
		return PidNone, withStackReason(withNomemReason(err), opts)
	}
	return pidFromC(pid), nil
}

// withStackReason says why a StackSize was refused (xtc_proc(3), ERRORS).
func withStackReason(err error, opts *ProcOpts) error {
	e, ok := err.(*Error)
	if !ok || e.Code != ErrInval || (e.Reason != "" && e.Reason != e.Code.Explain()) || opts == nil ||
		opts.StackSize <= 0 || opts.StackSize >= 16<<10 {
		return err
	}
	if opts.StackSize < 1<<10 {
		e.Reason = "StackSize below the 1 KiB minimum"
	} else {
		e.Reason = "a small StackSize (below 16 KiB) needs a program " +
			"bound at load: link with -Wl,-z,now or set LD_BIND_NOW=1"
	}
	return err
}

// withNomemReason gives an ErrNomem the limit the kernel refused stack
// memory at (xtc_stack_nomem_reason: vm.max_map_count, RLIMIT_AS, the
// overcommit limit), when there is one, as its Reason.
func withNomemReason(err error) error {
	e, ok := err.(*Error)
	if !ok || e.Code != ErrNomem || (e.Reason != "" && e.Reason != e.Code.Explain()) {
		return err
	}
	if r := C.xtc_stack_nomem_reason(); r != nil {
		e.Reason = "stack memory: " + C.GoString(r)
	}
	return err
}

// Send copies msg into the mailbox of pid (xtc_send); from any goroutine.
// ErrAgain when the mailbox is full, ErrInval for a dead or unknown pid.
func Send(pid Pid, msg []byte) error {
	var p *C.uchar
	if len(msg) > 0 {
		p = (*C.uchar)(unsafe.Pointer(&msg[0]))
	}
	return mkerr("xtc_send", int(C.xtc__send_bytes(pid.c(), p, C.size_t(len(msg)))))
}

// ProcWake wakes pid if it is parked (xtc_proc_wake); it carries no
// message, an extra wake is harmless. ErrInval for PidNone.
func ProcWake(pid Pid) error {
	return mkerr("xtc_proc_wake", int(C.xtc_proc_wake(pid.c())))
}

// ExitPid asks pid to exit with reason (xtc_exit_pid); it acts at the
// target's next yield or park, the first request wins. ErrInval when the
// target is unknown or already dead.
func ExitPid(pid Pid, reason int) error {
	return mkerr("xtc_exit_pid", int(C.xtc_exit_pid(pid.c(), C.int(reason))))
}

// Monitor, Demonitor, Link and Unlink act on behalf of the calling proc.
// Go code never runs on a proc (procs run C), so from Go they return
// ErrInval; they exist so the C API maps one to one. A goroutine that
// wants DOWN and EXIT messages uses a Mailbox (Exec.NewMailbox): its
// Monitor and Link act for the mailbox's pid, and the messages arrive
// through Mailbox.Recv.

// Monitor monitors target from the calling proc (xtc_monitor).
func Monitor(target Pid) (uint64, error) {
	var ref C.uint64_t
	err := mkerr("xtc_monitor", int(C.xtc_monitor(target.c(), &ref)))
	return uint64(ref), err
}

// Demonitor removes a monitor of the calling proc (xtc_demonitor).
func Demonitor(ref uint64) error {
	return mkerr("xtc_demonitor", int(C.xtc_demonitor(C.uint64_t(ref))))
}

// Link links the calling proc with other (xtc_link).
func Link(other Pid) error { return mkerr("xtc_link", int(C.xtc_link(other.c()))) }

// Unlink removes a link of the calling proc (xtc_unlink).
func Unlink(other Pid) error { return mkerr("xtc_unlink", int(C.xtc_unlink(other.c()))) }

// DownDecode decodes a DOWN message (xtc_down_decode_ex). ErrInval when msg
// is not one.
func DownDecode(msg []byte) (DownInfo, error) {
	var out C.xtc_down_info_t
	var p unsafe.Pointer
	if len(msg) > 0 {
		p = unsafe.Pointer(&msg[0])
	}
	if rc := C.xtc_down_decode_ex(p, C.size_t(len(msg)), &out); rc != 0 {
		return DownInfo{}, mkerr("xtc_down_decode_ex", int(rc))
	}
	return DownInfo{Pid: pidFromC(out.pid), Kind: int(out.kind), Signal: int(out.signal),
		ExitCode: int(out.exit_code), Reason: int(out.reason), Ref: uint64(out.ref)}, nil
}

// ExitDecode decodes a link EXIT message (xtc_exit_decode).
func ExitDecode(msg []byte) (Pid, int, error) {
	var pid C.xtc_pid_t
	var reason C.int
	var p unsafe.Pointer
	if len(msg) > 0 {
		p = unsafe.Pointer(&msg[0])
	}
	if rc := C.xtc_exit_decode(p, C.size_t(len(msg)), &pid, &reason); rc != 0 {
		return PidNone, 0, mkerr("xtc_exit_decode", int(rc))
	}
	return pidFromC(pid), int(reason), nil
}

// ProcMailboxStats returns pid's mailbox counters (xtc_proc_mailbox_stats);
// any goroutine. ErrInval for a dead or unknown pid.
func ProcMailboxStats(pid Pid) (MailboxStats, error) {
	var s C.xtc_mailbox_stats_t
	if rc := C.xtc_proc_mailbox_stats(pid.c(), &s); rc != 0 {
		return MailboxStats{}, mkerr("xtc_proc_mailbox_stats", int(rc))
	}
	return MailboxStats{Depth: int(s.depth), Saved: int(s.saved), Peak: int(s.peak), Cap: int(s.cap),
		RecvTotal: uint64(s.recv_total), DropTotal: uint64(s.drop_total)}, nil
}
