/*
 * xtc_proc.h - processes: fibers with a pid, a bounded mailbox, links and
 * monitors.
 */
#ifndef XTC_PROC_H
#define XTC_PROC_H

#include <stddef.h>
#include <stdint.h>

#include "xtc_loop.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct xtc_pid {
	uint16_t loop_id;  /* executor loop index + 1; 0 = standalone loop */
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

/* Scheduling class handle (see xtc_exec.h); NULL = the default lane. */
typedef struct xtc_run_class *xtc_exec_class_t;

typedef void (*xtc_proc_fn)(void *arg);
typedef int  (*xtc_match_fn)(const void *data, size_t size, void *user_data);

typedef struct xtc_msg {
	void  *data;
	size_t size;
} xtc_msg_t;

#define XTC_WAIT_MAILBOX 0x10000u
#define XTC_WAIT_TIMEOUT 0x20000u
#define XTC_DOWN_NOPROC  (-100000)

#define XTC_MAILBOX_DEFAULT_CAP 4096

typedef struct xtc_proc_opts {
	const char *name;
	size_t      mailbox_cap;
	int         link_to;
	int         mailbox_watermark_pct;
	void      (*mailbox_watermark_fn)(xtc_pid_t self, size_t depth,
	                                  size_t cap, void *user);
	void       *mailbox_watermark_user;
	int         migratable;
	xtc_exec_class_t sched_class;
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

XTC_API int xtc_proc_spawn(xtc_loop_t *loop, xtc_proc_fn fn, void *arg,
                           const xtc_proc_opts_t *opts, xtc_pid_t *out_pid);
XTC_API int xtc_proc_spawn_link(xtc_loop_t *loop, xtc_proc_fn fn, void *arg,
                                const xtc_proc_opts_t *opts,
                                xtc_pid_t *out_pid);
XTC_API int xtc_proc_spawn_monitor(xtc_loop_t *loop, xtc_proc_fn fn,
                                   void *arg, const xtc_proc_opts_t *opts,
                                   xtc_pid_t *out_pid, uint64_t *out_ref);

XTC_API xtc_pid_t xtc_self(void);
XTC_API int   xtc_proc_set_userdata(void *ud);
XTC_API void *xtc_proc_userdata(void);
XTC_API int   xtc_proc_set_class(xtc_exec_class_t cls);

XTC_API int xtc_send(xtc_pid_t to, const void *data, size_t size);
XTC_API int xtc_recv(void **out, size_t *out_size, int64_t timeout_ns);
XTC_API int xtc_recv_match(xtc_match_fn match_fn, void *user_data, void **out,
                           size_t *out_size, int64_t timeout_ns);
XTC_API int xtc_proc_mailbox_stats(xtc_pid_t pid, xtc_mailbox_stats_t *out);

XTC_API int xtc_proc_wait_fd(int fd, uint32_t interest, int64_t timeout_ns,
                             uint32_t *out_revents);
XTC_API int xtc_proc_sleep(int64_t ns);
XTC_API int xtc_proc_wake(xtc_pid_t target);

XTC_API int xtc_exit_self(int reason);
XTC_API int xtc_exit_pid(xtc_pid_t target, int reason);
XTC_API int xtc_link(xtc_pid_t other);
XTC_API int xtc_unlink(xtc_pid_t other);
XTC_API int xtc_monitor(xtc_pid_t target, uint64_t *out_ref);
XTC_API int xtc_demonitor(uint64_t ref);
XTC_API int xtc_down_decode(const void *msg, size_t len, xtc_pid_t *out_pid,
                            int *out_reason);
XTC_API int xtc_down_decode_ex(const void *msg, size_t len,
                               xtc_down_info_t *out);
XTC_API int xtc_exit_decode(const void *msg, size_t len, xtc_pid_t *out_pid,
                            int *out_reason);

#ifdef __cplusplus
}
#endif

#endif
