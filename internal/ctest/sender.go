//go:build cgo

package ctest

// A C proc that sends to a pid: what a C producer does to a Go mailbox.

/*
#include <stdint.h>
#include <stdlib.h>
#include "xtc.h"

typedef struct gosend_job {
	xtc_pid_t to;
	int64_t n;
	int64_t sent;
	int64_t again; // sends refused with XTC_E_AGAIN (atomic: Again)
	int exit_reason;
} gosend_job;

// Sends n 8-byte messages (0..n-1) to job->to, retrying while the mailbox
// is full, then waits for one message and exits with job->exit_reason.
static void gosend_proc(void *a)
{
	gosend_job *j = a;

	for (int64_t i = 0; i < j->n; i++) {
		while (xtc_send(j->to, &i, sizeof(i)) == XTC_E_AGAIN) {
			__atomic_fetch_add(&j->again, 1, __ATOMIC_RELAXED);
			xtc_proc_sleep(100000);
		}
		j->sent++;
	}
	if (j->exit_reason != 0) {
		void *m;
		if (xtc_recv(&m, NULL, -1) == XTC_OK)
			xtc_free(m);
		xtc_exit_self(j->exit_reason);
	}
}

static int64_t gosend_again(gosend_job *j)
{
	return __atomic_load_n(&j->again, __ATOMIC_RELAXED);
}

static void *gosend_fn(void) { return (void *)gosend_proc; }

static gosend_job *gosend_new(uint16_t l, uint16_t id, uint32_t gen, int64_t n, int reason)
{
	gosend_job *j = calloc(1, sizeof(*j));
	j->to.loop_id = l;
	j->to.local_id = id;
	j->to.gen = gen;
	j->n = n;
	j->exit_reason = reason;
	return j;
}
*/
import "C"

import "unsafe"

// SendJob is C memory describing what SendProc does.
type SendJob struct{ j *C.gosend_job }

// NewSendJob: send n messages to the pid (loop, local, gen); if reason is
// non-zero, then wait for one message and exit with that reason.
func NewSendJob(loop, local uint16, gen uint32, n int64, reason int) SendJob {
	return SendJob{C.gosend_new(C.uint16_t(loop), C.uint16_t(local), C.uint32_t(gen), C.int64_t(n), C.int(reason))}
}

// Ptr is the proc argument.
func (s SendJob) Ptr() unsafe.Pointer { return unsafe.Pointer(s.j) }

// Sent is how many messages went out.
func (s SendJob) Sent() int64 { return int64(s.j.sent) }

// Again counts the sends the mailbox refused as full (each retried).
func (s SendJob) Again() int64 { return int64(C.gosend_again(s.j)) }

// Free releases the job (after the proc ended).
func (s SendJob) Free() { C.free(unsafe.Pointer(s.j)) }

// SendProc is the `void (*)(void *)` proc body.
func SendProc() unsafe.Pointer { return C.gosend_fn() }
