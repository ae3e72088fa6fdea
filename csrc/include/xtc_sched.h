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
 * Built with -Dsched_policy=false every function exists and returns
 * XTC_E_NOSYS. See xtc_sched(3).
 */
#ifndef XTC_SCHED_H
#define XTC_SCHED_H

#include <stddef.h>
#include <stdint.h>

#include "xtc.h"
#include "xtc_loop.h"

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

#ifdef __cplusplus
}
#endif

#endif
