/*
 * xtc_proc.h - processes: fibers with a pid, a bounded mailbox, links and
 * monitors.
 *
 * A proc is a stackful fiber on a loop with an identity (xtc_pid_t) that any
 * thread can use to send it messages, wake it or kill it. A pid stays a
 * plain value: once its proc has exited every use reports it dead
 * (XTC_E_INVAL), even after the slot is reused (generation counter).
 *
 * Calling context: functions that act on "the calling proc" (xtc_self,
 * xtc_recv*, xtc_proc_sleep, xtc_proc_wait_fd, xtc_exit_self, xtc_link,
 * xtc_monitor, ...) return XTC_E_INVAL (or NONE / NULL) off a proc. The
 * ones taking a pid (xtc_send, xtc_proc_wake, xtc_exit_pid,
 * xtc_proc_mailbox_stats, xtc_proc_info) and the spawns work from any thread.
 *
 * Timeouts (int64_t ns): < 0 waits forever, 0 polls, > 0 bounds the wait
 * and expires with XTC_E_AGAIN.
 */
/* xtc.h first and outside the guard (see xtc_loop.h). */
#include "xtc.h"

#ifndef XTC_PROC_H
#define XTC_PROC_H

#include <setjmp.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct xtc_pid {
	uint16_t loop_id;  /* process-unique id of the home loop, >= 1 */
	uint16_t local_id; /* slot in the loop's proc table */
	uint32_t gen;      /* bumps on slot reuse: stale pids are detected */
} xtc_pid_t;

#define XTC_PID_NONE ((xtc_pid_t){0, 0, 0})

static inline int xtc_pid_eq(xtc_pid_t a, xtc_pid_t b)
{
	return a.loop_id == b.loop_id && a.local_id == b.local_id &&
	       a.gen == b.gen;
}

static inline int xtc_pid_is_none(xtc_pid_t p)
{
	return p.loop_id == 0 && p.local_id == 0 && p.gen == 0;
}

typedef void (*xtc_proc_fn)(void *arg);
typedef int  (*xtc_match_fn)(const void *data, size_t size, void *user_data);

typedef struct xtc_msg {
	void  *data;
	size_t size;
} xtc_msg_t;

/* xtc_proc_wait_fd out_revents bits, besides XTC_IO_*. */
#define XTC_WAIT_MAILBOX 0x10000u /* a new message is queued */
#define XTC_WAIT_TIMEOUT 0x20000u /* the timeout expired (XTC_E_AGAIN) */
/* DOWN reason: the target was already dead when monitored (benign). */
#define XTC_DOWN_NOPROC  (-100000)

/* Mailbox cap when xtc_proc_opts_t.mailbox_cap is 0. The cap bounds the
 * queued messages including the xtc_recv_match save queue. */
#define XTC_MAILBOX_DEFAULT_CAP 4096

/* Room for a proc's name, terminator included (longer names are cut). */
#define XTC_PROC_NAME_MAX 32

/* Spawn options; a zeroed struct (or opts == NULL) gives the defaults. */
typedef struct xtc_proc_opts {
	const char *name;        /* debug label (overflow/stall reports); copied
	                          * at spawn, up to XTC_PROC_NAME_MAX - 1 bytes */
	size_t      mailbox_cap; /* 0 = XTC_MAILBOX_DEFAULT_CAP; <= INT32_MAX */
	int         link_to;     /* legacy: nonzero = link to the live proc with
	                          * this local id on the same loop */
	int         mailbox_watermark_pct; /* 1..100, 0 = off */
	/* Called once when an accepted message first brings the depth up to
	 * pct% of the cap (re-armed when the depth falls below that level);
	 * on the sender's thread, outside the mailbox lock; must not block. */
	void      (*mailbox_watermark_fn)(xtc_pid_t self, size_t depth,
	                                  size_t cap, void *user);
	void       *mailbox_watermark_user;
	int         migratable;  /* 0 = pinned to the spawn loop; 1 = stealable
	                          * at yield/park points (executor) */
	xtc_exec_class_t sched_class; /* NULL = the default lane */
	/* Usable stack of this proc in bytes; 0 = xtc_stack_size(). 16 KiB
	 * and up: page-rounded, with a guard page. 1 KiB up to 16 KiB: a
	 * small stack, rounded up to 256 B and carved several to a page, so
	 * it has no guard page: an overflow is caught by a canary and a
	 * stack-pointer check at every switch. Small stacks need a program
	 * bound at load (-Wl,-z,now or LD_BIND_NOW), else XTC_E_INVAL
	 * (xtc_async(3), Stacks). */
	size_t      stack_size;
} xtc_proc_opts_t;

typedef struct xtc_mailbox_stats {
	size_t   depth, saved, peak, cap;
	uint64_t recv_total, drop_total;
} xtc_mailbox_stats_t;

enum {
	XTC_DOWN_KIND_CLEAN = 0,
	XTC_DOWN_KIND_EXIT = 1,
	XTC_DOWN_KIND_SIGNAL = 2,
	XTC_DOWN_KIND_NOPROC = 3,
	XTC_DOWN_KIND_NOCONNECTION = 4
};

typedef struct xtc_down_info {
	xtc_pid_t pid;
	int       kind;
	int       signal;
	int       exit_code;
	int       reason;
	uint64_t  ref;
} xtc_down_info_t;

/* Spawn fn(arg) as a proc on loop; returning from fn is a clean exit
 * (reason 0). Any thread. out_pid may be NULL.
 *   XTC_E_INVAL     NULL loop or fn, finalised loop, bad opts (watermark
 *                   pct outside 0..100 or without fn, class of another
 *                   loop, link_to not a live proc, stack_size < 1 KiB)
 *   XTC_E_RANGE     stack_size above 1 GiB
 *   XTC_E_NOMEM     allocation failed, or the kernel refused stack memory:
 *                   xtc_stack_nomem_reason() names the limit
 *                   (vm.max_map_count, RLIMIT_AS, the overcommit limit)
 *   XTC_E_RESOURCE  65535 live procs on this loop, or the loop's task cap
 * _link and _monitor set the relationship up before the child can run and
 * must be called from a proc (else XTC_E_INVAL; out_ref non-NULL). */
XTC_API int xtc_proc_spawn(xtc_loop_t *loop, xtc_proc_fn fn, void *arg,
                           const xtc_proc_opts_t *opts, xtc_pid_t *out_pid);
XTC_API int xtc_proc_spawn_link(xtc_loop_t *loop, xtc_proc_fn fn, void *arg,
                                const xtc_proc_opts_t *opts,
                                xtc_pid_t *out_pid);
XTC_API int xtc_proc_spawn_monitor(xtc_loop_t *loop, xtc_proc_fn fn,
                                   void *arg, const xtc_proc_opts_t *opts,
                                   xtc_pid_t *out_pid, uint64_t *out_ref);

/* XTC_PID_NONE off a proc. */
XTC_API xtc_pid_t xtc_self(void);
/* Per-proc pointer, never freed by the runtime. set: XTC_E_INVAL off a
 * proc; get: NULL off a proc. */
XTC_API int   xtc_proc_set_userdata(void *ud);
XTC_API void *xtc_proc_userdata(void);
/* Move the calling proc to class cls (NULL = default lane), effective from
 * its next enqueue. XTC_E_INVAL off a proc or for a class of another loop. */
XTC_API int   xtc_proc_set_class(xtc_exec_class_t cls);

/* Copy size bytes into to's mailbox; never waits. Any thread.
 *   XTC_E_INVAL   NULL data with size > 0, XTC_PID_NONE, dead/stale/unknown pid
 *   XTC_E_AGAIN   mailbox full (the message is dropped and counted)
 *   XTC_E_NOMEM */
XTC_API int xtc_send(xtc_pid_t to, const void *data, size_t size);
/* Take the oldest message; *out is freed by the caller with xtc_free (or
 * free(): every buffer the API hands out is a malloc block).
 * out_size may be NULL. XTC_E_AGAIN on timeout, XTC_E_INVAL off a proc,
 * NULL out, or from inside a match predicate; XTC_E_DEADLK inside a Go
 * callback. */
XTC_API int xtc_recv(void **out, size_t *out_size, int64_t timeout_ns);
/* Like xtc_recv, but take the oldest message for which match_fn returns
 * nonzero; the others stay queued in arrival order (save queue). The
 * predicate runs on the proc and must not receive or demonitor. */
XTC_API int xtc_recv_match(xtc_match_fn match_fn, void *user_data, void **out,
                           size_t *out_size, int64_t timeout_ns);
/* Snapshot of a live proc's mailbox; any thread. XTC_E_INVAL for NULL out
 * or a dead/unknown pid. depth counts every queued message, saved the part
 * in the save queue. */
XTC_API int xtc_proc_mailbox_stats(xtc_pid_t pid, xtc_mailbox_stats_t *out);

/* Collect n_expected messages whose first corr_size bytes equal corr_value
 * (corr_size 0 matches any message), in arrival order, into out_msgs[0..];
 * *out_n counts them (also on failure: the caller owns and frees every
 * out_msgs[i].data below *out_n). Other messages stay queued in order (save
 * queue, as xtc_recv_match). XTC_E_AGAIN on timeout with the partial count;
 * XTC_E_INVAL off a proc, NULL out_msgs or out_n, n_expected < 1, NULL
 * corr_value with corr_size > 0, or inside a match predicate;
 * XTC_E_DEADLK inside a Go callback. */
XTC_API int xtc_recv_correlate(const void *corr_value, size_t corr_size,
                               int n_expected, xtc_msg_t *out_msgs,
                               int *out_n, int64_t timeout_ns);

typedef struct xtc_proc_info {
	int         alive;        /* 1: a successful call saw it alive */
	int         kill_pending; /* xtc_exit_pid issued, not yet acted on */
	size_t      mbox_len;     /* queued messages (xtc_mailbox_stats_t.depth) */
	size_t      mbox_saved;   /* of which in the save queue */
	size_t      mbox_peak;    /* highest depth seen */
	size_t      mbox_cap;
	uint64_t    recv_total;   /* messages taken */
	uint64_t    drop_total;   /* sends refused as full */
	const char *name;         /* xtc_proc_opts_t.name, or NULL */
	int         migratable;   /* 1 stealable, 0 pinned (spawn option) */
	uint16_t    loop_id;      /* home loop (pid.loop_id) */
} xtc_proc_info_t;

/* Snapshot of a live proc; any thread. XTC_OK while pid is alive in its
 * loop's table; XTC_E_INVAL for NULL out, XTC_PID_NONE or a dead, stale or
 * unknown pid (poll it to learn "is it gone"). */
XTC_API int xtc_proc_info(xtc_pid_t pid, xtc_proc_info_t *out);

/* Wait until fd is ready for interest (XTC_IO_READABLE|WRITABLE), a new
 * message is queued (XTC_WAIT_MAILBOX, also when one is already queued at
 * the call), the timeout expires (XTC_E_AGAIN with XTC_WAIT_TIMEOUT) or the
 * proc is killed. *out_revents gets every bit that fired. The fd is
 * unregistered before return; the mailbox is not drained.
 * XTC_E_INVAL: NULL out_revents, fd < 0, no READABLE/WRITABLE in interest,
 * off a proc; a registration error is passed through. */
XTC_API int xtc_proc_wait_fd(int fd, uint32_t interest, int64_t timeout_ns,
                             uint32_t *out_revents);
/* Park the calling proc for at least ns (0 = yield once); the loop keeps
 * running. XTC_E_INVAL off a proc or for ns < 0. */
XTC_API int xtc_proc_sleep(int64_t ns);
/* Make target re-check whatever it waits on; any thread; XTC_OK even when
 * it is not parked or gone. XTC_E_INVAL for XTC_PID_NONE. */
XTC_API int xtc_proc_wake(xtc_pid_t target);

/* Exit the calling proc now with reason (0 = clean); never returns on a
 * proc (XTC_E_INVAL off a proc, XTC_E_DEADLK inside a Go callback). Links get an EXIT message when reason is
 * not 0, monitors a DOWN, undelivered messages are freed. */
XTC_API int xtc_exit_self(int reason);
/* Cleanup the calling proc's exit runs, whatever ends it (a return, an
 * exit, a kill, its loop's fini): up to XTC_PROC_AT_EXIT_MAX handlers, run
 * last registered first, before its links and monitors are told (EXIT,
 * DOWN). XTC_E_INVAL off a proc or for a NULL fn, XTC_E_RESOURCE past the
 * limit, XTC_E_NOMEM. */
#define XTC_PROC_AT_EXIT_MAX 8
XTC_API int xtc_proc_at_exit(void (*fn)(void *), void *arg);
/* Ask target to exit with reason: a flag acted on at its next yield or park
 * (recv, sleep, wait_fd, ...), or at its start. Any thread; the first call
 * wins. XTC_E_INVAL for an unknown or dead target. */
XTC_API int xtc_exit_pid(xtc_pid_t target, int reason);
/* Two-way link: an exit with reason != 0 on either side queues an EXIT
 * message (decode with xtc_exit_decode) in the other's mailbox. Idempotent.
 * XTC_E_INVAL off a proc, for NONE, self or a dead pid. unlink always
 * succeeds for a valid caller and pid. */
XTC_API int xtc_link(xtc_pid_t other);
XTC_API int xtc_unlink(xtc_pid_t other);
/* One-way monitor: when target exits, a DOWN message (xtc_down_decode)
 * carrying the monitor's ref arrives; the ref is stored in *out_ref unless
 * out_ref is NULL (the DOWN still comes; only xtc_demonitor needs the
 * ref). A dead or unknown target gives an immediate DOWN with reason
 * XTC_DOWN_NOPROC (not an error). XTC_E_INVAL off a proc, NONE or self. */
XTC_API int xtc_monitor(xtc_pid_t target, uint64_t *out_ref);
/* Cancel a monitor of the calling proc; no DOWN for it arrives afterwards
 * (one already queued is removed). XTC_E_NOTFOUND when ref is neither
 * active nor queued; XTC_E_INVAL off a proc, ref 0 or inside a predicate. */
XTC_API int xtc_demonitor(uint64_t ref);
/* Decode runtime messages; XTC_E_INVAL when msg is not one (wrong size or
 * kind). Out pointers may be NULL except for _ex. DOWN reasons: 0 clean,
 * XTC_DOWN_NOPROC, XTC_E_ABORTED when the loop was finalised under the
 * proc, otherwise the exit/kill reason. */
XTC_API int xtc_down_decode(const void *msg, size_t len, xtc_pid_t *out_pid,
                            int *out_reason);
XTC_API int xtc_down_decode_ex(const void *msg, size_t len,
                               xtc_down_info_t *out);
XTC_API int xtc_exit_decode(const void *msg, size_t len, xtc_pid_t *out_pid,
                            int *out_reason);
/* 1 when a DOWN reason is XTC_DOWN_NOPROC (the monitored proc was already
 * gone: benign, not a crash), else 0. */
XTC_API int xtc_down_is_noproc(int reason);

/* 1 when the calling proc or fiber has been asked to stop and has not yet
 * reached the yield or park that acts on it: a pending xtc_exit_pid (or a
 * deadline kill), or a cancelled xtc_dispatch. 0 otherwise and off a
 * fiber. Lets long computations stop early. */
XTC_API int xtc_cancel_requested(void);

/* ---- fault containment (xtc_proc(3) FAULTS) ------------------------------
 * xtc_fault_guard_install: handle SIGSEGV, SIGBUS, SIGFPE and SIGILL
 * process-wide (chained to the handlers installed before) and give the
 * calling thread an alternate signal stack; call it on every thread that
 * runs loops (idempotent; 0 or XTC_E_NOMEM/XTC_E_INTERNAL). Then a fault
 * in a proc's own code ends only that proc: with a recovery frame armed,
 * xtc_proc_recovery_arm() returns again with the signal number; without,
 * the proc exits with the signal number as its reason (its monitors get
 * a DOWN). Inside xtc_proc_critical_enter/leave (nestable; also defers
 * involuntary preemption) or the runtime's own code a fault is not
 * contained: the process dies of the signal. Stack overflows keep their
 * report. */
XTC_API int xtc_fault_guard_install(void);
/* The calling proc's recovery buffer (a throwaway one off a proc), marked
 * armed: what xtc_proc_recovery_arm() expands to. */
XTC_API jmp_buf *xtc_proc_recovery_slot(void);
/* Like setjmp: 0 when arming, the signal number after a contained fault
 * (the frame is then disarmed). Valid while the calling function is
 * active: disarm before it returns. */
#define xtc_proc_recovery_arm() setjmp(*xtc_proc_recovery_slot())
XTC_API void xtc_proc_recovery_disarm(void);
XTC_API void xtc_proc_critical_enter(void);
XTC_API void xtc_proc_critical_leave(void);

#ifdef __cplusplus
}
#endif

#endif
