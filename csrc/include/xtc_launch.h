/*
 * xtc_launch.h - bounded-time work: run a function on a child proc with a
 * deadline, killing it when the deadline passes. See xtc_launch(3).
 */
#ifndef XTC_LAUNCH_H
#define XTC_LAUNCH_H

#include <stddef.h>
#include <stdint.h>

#include "xtc.h"
#include "xtc_loop.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef intptr_t (*xtc_launch_fn)(void *arg);

/* Exit reason of a child killed at its deadline ("LC"). */
#define XTC_LAUNCH_CANCEL_REASON 0x4c43

typedef struct xtc_launch_opts {
	const char *name;        /* child proc name (reports), may be NULL */
	size_t      mailbox_cap; /* child mailbox; 0 = default */
	int         loop;        /* reserved: 0 (the loop argument decides) */
} xtc_launch_opts_t;

/* Run fn(arg) on a new child proc of loop (NULL: the caller's loop) and
 * park the calling fiber until it returns or timeout_ns passes (< 0: no
 * deadline).
 *   XTC_OK        *result (may be NULL) = fn's return value
 *   XTC_E_AGAIN   deadline: the child was killed with reason
 *                 XTC_LAUNCH_CANCEL_REASON and has finished dying
 *   XTC_E_ABORTED the child died without returning (killed by someone
 *                 else, or its loop was finalised)
 *   XTC_E_INVAL   NULL fn, off a fiber, opts->loop != 0
 *   XTC_E_DEADLK  inside a Go callback
 *   other         the spawn's error
 * A child that never yields can only be stopped on time with the
 * involuntary preemption path on (xtc_preempt(3)). */
XTC_API int xtc_launch(xtc_loop_t *loop, xtc_launch_fn fn, void *arg,
                       int64_t timeout_ns, const xtc_launch_opts_t *opts,
                       intptr_t *result);

#ifdef __cplusplus
}
#endif

#endif
