/*
 * exec_class.c - executor-wide scheduling classes.
 *
 * Model: a class of the executor is one per-loop class (sched_class.c) on every
 * loop, created together with the same shares and latency bound, so work
 * placed on any carrier is weighted alike. The per-loop classes stay the
 * unit the picker sees (it never looks at another carrier's queues); an
 * executor-wide split in the share ratio follows when the work of each
 * class is spread over the carriers (the Go wrapper places calls
 * round-robin). Work stealing moves only migratable procs, and a proc's
 * class is a class of its home loop, so a stolen proc runs in the default
 * lane of the thief: keep classed work pinned (the default).
 *
 * Invariants: all-or-nothing from the caller's view: on failure no class
 * is reported (classes already made on earlier loops stay, unused and
 * harmless, until fini: per-loop classes cannot be destroyed).
 *
 * Alternatives rejected: a shared, cross-carrier vruntime (a contended
 * atomic per pick, and a carrier could not pick without its peers'
 * state); an allocated group object (a lifetime for the caller to manage,
 * for what an array of handles already says).
 */
#include "rtcode_int.h" /* first: this file is runtime code */
#include "sched_int.h"

int xtc_exec_class_create_each(xtc_exec_t *exec, int shares,
                               int64_t latency_ns, xtc_exec_class_t *out,
                               int n)
{
	int loops = xtc_exec_n_loops(exec);
	int rc;

	if (exec == NULL || out == NULL || loops <= 0 || n < loops ||
	    shares < 1 || shares > 1000 || latency_ns < 0)
		return XTC_E_INVAL;
	for (int i = 0; i < loops; i++) {
		rc = xtc_exec_class_create(xtc_exec_loop(exec, i), shares,
		    latency_ns, &out[i]);
		if (rc != XTC_OK) {
			for (int j = 0; j < loops; j++)
				out[j] = NULL;
			return rc;
		}
	}
	return XTC_OK;
}
