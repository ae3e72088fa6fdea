/*
 * xtc_sched.h - lane policies: choose which ready lane of a loop runs next.
 *
 * A lane is a queue the loop already has: lane -1 (XTC_SCHED_LANE_DEFAULT)
 * is the default FIFO/deque of untagged tasks, lanes 0..15 are the class
 * queues made by xtc_exec_class_create (lane id = creation index). At each
 * selection opportunity the runtime hands the policy's select callback an
 * immutable snapshot of the ready lanes, ordered by lane id, and runs the
 * oldest task of the lane it returns; XTC_SCHED_DEFAULT (or an invalid
 * choice, counted in the stats) means "the ordinary picker decides" (the
 * classes' virtual-runtime order). A lane continuously ready for max_bypass
 * opportunities without service is served next whatever the policy says
 * (oldest first, ties to the lower lane id), so with L ready lanes each is
 * served within max_bypass + L opportunities. Installation is setup-only.
 *
 * Built with -Dsched_policy=false every lane-policy function exists and
 * returns XTC_E_NOSYS. See xtc_sched(3).
 *
 * Also here, because the scheduling layer implements them and they work
 * in every build: what a scheduling class received (runs, CPU, waits
 * against its latency bound, stalls) and the stall watchdog, which
 * counts and reports runs that kept their loop for a budget or more.
 * xtc_exec.h includes this header, so code that found them there still
 * compiles.
 */
#ifndef XTC_SCHED_H
#define XTC_SCHED_H

#include <stddef.h>
#include <stdint.h>

#include "xtc.h"
#include "xtc_loop.h"
#include "xtc_proc.h" /* xtc_pid_t */

#ifdef __cplusplus
extern "C" {
#endif

#define XTC_SCHED_VERSION 1
/* select's "let the ordinary picker decide". Not a lane id: lane -1 is the
 * default lane, which a policy may also choose explicitly. */
#define XTC_SCHED_DEFAULT (-2)
#define XTC_SCHED_LANE_DEFAULT (-1)
/* Largest max_bypass accepted (XTC_E_RANGE above). */
#define XTC_SCHED_MAX_BYPASS (1 << 20)

/* One ready lane as select sees it. Counts, never task or queue pointers. */
typedef struct xtc_sched_lane {
	int32_t  id;            /* -1 default lane, 0..15 class lane */
	int32_t  shares;        /* class shares; 100 for the default lane */
	uint64_t runs;          /* tasks this lane has been served so far */
	uint32_t bypass;        /* consecutive opportunities ready, not served */
	/* Advisory batch counts (xtc_batch.h), summed over the batch groups
	 * whose driver runs in this lane; all zero without groups. */
	uint32_t batch_groups;  /* groups registered on the lane */
	uint32_t batch_active;  /* members in the active vectors */
	uint32_t batch_ready;   /* active members not BLOCKED */
	uint32_t batch_waiting; /* accepted submissions waiting for admission */
} xtc_sched_lane_t;

/* Returns a lane id present in lanes[0..n), or XTC_SCHED_DEFAULT. Called
 * on the loop's owner thread, on the carrier stack, only when two or more
 * lanes are ready and no bypass override is due. Must be bounded,
 * nonblocking, allocation-free and deterministic under simulation; it must
 * not call into the loop. */
typedef int (*xtc_sched_select_fn)(const xtc_sched_lane_t *lanes, size_t n,
                                   void *user);

typedef struct xtc_sched_policy {
	uint32_t size;       /* sizeof(xtc_sched_policy_t) */
	uint32_t version;    /* XTC_SCHED_VERSION */
	int32_t  max_bypass; /* 1..XTC_SCHED_MAX_BYPASS */
	xtc_sched_select_fn select;
	void    *user;
} xtc_sched_policy_t;

typedef struct xtc_sched_stats {
	uint32_t size;          /* in: sizeof(xtc_sched_stats_t) */
	uint32_t version;       /* in: XTC_SCHED_VERSION */
	uint64_t opportunities; /* picks with at least one ready lane */
	uint64_t selects;       /* select calls */
	uint64_t defaults;      /* select returned XTC_SCHED_DEFAULT */
	uint64_t invalid;       /* choices not naming a ready lane (fallback) */
	uint64_t forced;        /* bypass overrides of the policy */
	uint64_t max_wait;      /* most opportunities a ready lane waited */
} xtc_sched_stats_t;

/* Setup-only: before the loop's first run or step (XTC_E_AGAIN after it).
 * Copies *policy. XTC_E_INVAL: NULL, wrong size/version, NULL select,
 * max_bypass <= 0, a finalised loop; XTC_E_RANGE: max_bypass too large;
 * XTC_E_NOMEM. A second call replaces the first. */
XTC_API int xtc_sched_policy_set(xtc_loop_t *loop,
                                 const xtc_sched_policy_t *policy);
/* Setup-only. The built-in continuous-batching policy: among ready class
 * lanes with a registered batch group reporting ready members, the one
 * with the greatest bypass count, equal counts rotating by class id;
 * XTC_SCHED_DEFAULT when there is none. Same errors as policy_set. */
XTC_API int xtc_sched_continuous_set(xtc_loop_t *loop, int max_bypass);
/* Any thread while the loop lives. Zeroes without a policy.
 * XTC_E_INVAL: NULL, wrong size/version, finalised loop. */
XTC_API int xtc_sched_get_stats(xtc_loop_t *loop, xtc_sched_stats_t *out);
/* The lane id of a class: 0..15, or -1 for NULL (the default lane).
 * XTC_E_INVAL for NULL out or an invalid class handle. */
XTC_API int xtc_sched_lane_of(xtc_exec_class_t cls, int *out);

/* Stall watchdog: a run of one task/proc that takes >= budget is counted
 * and reported (callback, or a line + backtrace on stderr). */
typedef void (*xtc_stall_cb)(xtc_loop_t *loop, xtc_task_t *task,
                             int64_t ran_ns, int64_t budget_ns, void *user);
XTC_API void     xtc_loop_set_stall_budget(xtc_loop_t *loop,
                                           int64_t budget_ns);
XTC_API void     xtc_loop_set_stall_cb(xtc_loop_t *loop, xtc_stall_cb cb,
                                       void *user);
XTC_API uint64_t xtc_loop_stall_count(const xtc_loop_t *loop);

/* The run the watchdog watches on a loop: the one in flight, else the
 * last one that ended. Filled while a stall budget is (or was) set. */
typedef struct xtc_stall_info {
	uint64_t    run;        /* runs watched so far on the loop (>= 1) */
	xtc_task_t *task;       /* identity only: it may be gone */
	xtc_pid_t   pid;        /* XTC_PID_NONE when not a proc */
	const char *name;       /* the proc's name, or NULL */
	int64_t     started_ns; /* xtc_clock_mono() at the run's start */
	int64_t     ran_ns;     /* so far when running, else the whole run */
	int64_t     budget_ns;  /* the loop's budget now (0 = off) */
	int         running;    /* 1 while the run is in flight */
	/* ran_ns is wall time: of it, the carrier thread ran cpu_ns and was
	 * not running (descheduled by the OS, a stopped VM) off_cpu_ns.
	 * Measured only for a run past the budget (-1 otherwise), from a
	 * sample of the thread's CPU clock at most budget/8 older than the
	 * run's start (cpu_ns may include that much of what ran before). */
	int64_t     cpu_ns;
	int64_t     off_cpu_ns;
} xtc_stall_info_t;
/* Snapshot for any thread (a watcher polling for hung runs: running and
 * ran_ns >= budget_ns is a stall in flight; `run` tells runs apart).
 *   XTC_E_INVAL     NULL or finalised loop, NULL out
 *   XTC_E_NOTFOUND  no run watched yet (no budget ever set, or no run)
 *   XTC_E_AGAIN     the record kept changing under the read (retry) */
XTC_API int      xtc_loop_stall_inflight(const xtc_loop_t *loop,
                                         xtc_stall_info_t *out);

/* What a class received (xtc_sched_class_stats): any thread while the
 * class's loop lives; relaxed counters, exact once the loop is idle.
 * Waits are measured for latency classes only (latency_ns > 0): from the
 * moment a task entered the class's queue (spawned, woken, yielded) to
 * the start of its run. A wait longer than latency_ns is late; the class
 * met its bound while late is 0. */
typedef struct xtc_sched_class_stats {
	uint32_t size;        /* in: sizeof(xtc_sched_class_stats_t) */
	uint32_t version;     /* in: XTC_SCHED_VERSION */
	int32_t  lane;        /* 0..15 on its loop */
	int32_t  shares;
	int64_t  latency_ns;  /* the bound, 0 = none */
	uint64_t runs;        /* runs of its tasks */
	uint64_t cpu_ns;      /* measured run time charged to it */
	uint64_t stalls;      /* of its runs, those that took the loop's stall
	                       * budget or more (counted by the watchdog) */
	uint64_t waits;       /* waits measured (latency classes) */
	uint64_t late;        /* waits longer than latency_ns */
	uint64_t wait_ns;     /* their sum (mean: wait_ns / waits) */
	int64_t  wait_max_ns; /* the longest */
} xtc_sched_class_stats_t;
/* XTC_E_INVAL: NULL or invalid class handle, NULL out, wrong
 * size/version. */
XTC_API int xtc_sched_class_stats(xtc_exec_class_t cls,
                                  xtc_sched_class_stats_t *out);

#ifdef __cplusplus
}
#endif

#endif
