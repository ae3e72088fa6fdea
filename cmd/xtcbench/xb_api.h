/*
 * xb_api.h - the public xtc API as xtcbench's drivers see it: the real
 * headers, with every function the drivers call re-declared weak so that a
 * function not linked yet is a NULL address instead of a link error.
 *
 * XB_HAVE_EXEC / XB_HAVE_PREEMPT say whether the headers exist at build
 * time; XB_LINKED(fn) says whether fn is linked at run time.
 */
#ifndef XB_API_H
#define XB_API_H

#include "xtc.h"

#if __has_include("xtc_exec.h")
#include "xtc_exec.h"
#define XB_HAVE_EXEC 1
#else
#define XB_HAVE_EXEC 0
#endif

#if __has_include("xtc_preempt.h")
#include "xtc_preempt.h"
#define XB_HAVE_PREEMPT 1
#else
#define XB_HAVE_PREEMPT 0
#endif

/* The adaptive quantum controller (LibPreemptible's Algorithm 1) lives in
 * xtc_fn.h: xtc_fn_quantum_* plus xtc_exec_set_preempt_adaptive. */
#if XB_HAVE_EXEC && __has_include("xtc_fn.h")
#include "xtc_fn.h"
#define XB_HAVE_ADAPTIVE 1
#else
#define XB_HAVE_ADAPTIVE 0
#endif

#define XB_LINKED(fn) ((void *)(fn) != (void *)0)

#pragma weak xtc_version_string
#pragma weak xtc_strerror
#pragma weak xtc_io_backend_name
#pragma weak xtc_free
#pragma weak xtc_loop_init
#pragma weak xtc_loop_run
#pragma weak xtc_loop_fini
#pragma weak xtc_proc_spawn
#pragma weak xtc_self
#pragma weak xtc_yield
#pragma weak xtc_send
#pragma weak xtc_recv
#pragma weak xtc_proc_sleep

#if XB_HAVE_EXEC
#pragma weak xtc_exec_init
#pragma weak xtc_stack_reserve
#pragma weak xtc_exec_run
#pragma weak xtc_exec_stop
#pragma weak xtc_exec_fini
#pragma weak xtc_exec_loop
#pragma weak xtc_exec_loop_id
#pragma weak xtc_exec_submit
#pragma weak xtc_exec_set_service_mode
#pragma weak xtc_exec_set_preempt
#pragma weak xtc_exec_class_create
#endif

#if XB_HAVE_ADAPTIVE
#pragma weak xtc_fn_quantum_create
#pragma weak xtc_fn_quantum_destroy
#pragma weak xtc_fn_quantum_get
#pragma weak xtc_fn_quantum_tail_index
#pragma weak xtc_fn_quantum_trajectory
#pragma weak xtc_exec_set_preempt_adaptive
#endif

#if XB_HAVE_PREEMPT
#pragma weak xtc_preempt_set_involuntary
#pragma weak xtc_preempt_supported
#pragma weak xtc_preempt_involuntary_supported
#pragma weak xtc_preempt_stats_global
#endif

/* Error text of an xtc return code, also when xtc_strerror is missing. */
static inline const char *xb_strerror(int rc)
{
	return XB_LINKED(xtc_strerror) ? xtc_strerror(rc) : "?";
}

#endif
