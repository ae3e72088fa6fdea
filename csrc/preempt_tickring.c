/*
 * preempt_tickring.c - the io_uring tick ring: cooperative preemption ticks with no
 * signal and no syscall on the check.
 *
 * Model: each armed carrier owns one small private ring (8 entries, default
 * flags) holding a repeating IORING_OP_TIMEOUT (multishot on kernels that
 * have it, else one-shot re-armed when reaped). A tick is a CQE; "is a tick
 * due" is an acquire load of the CQ tail compared with the CQ head, inlined
 * in preempt_int.h (xtc__tickring_due). Reaping advances the head with a
 * store-release, again no syscall (a one-shot re-arm needs one submit). The
 * ring is per thread, so the check always uses the ring of the carrier
 * currently running the fiber, never the fiber's home loop. While the
 * carrier is idle the timeout is removed (a wall-clock tick would wake a
 * sleeping carrier) and it is submitted again at the next run.
 *
 * Rejected: SINGLE_ISSUER|DEFER_TASKRUN (CQEs appear only inside
 * io_uring_enter, so a spinning fiber never sees one) and COOP_TASKRUN (works
 * only when the timer interrupt lands on the carrier's CPU); putting the
 * timeout on the loop's main ring (its CQEs are reaped by the loop, not
 * checkable in two loads, and would mix with I/O completions).
 */
#include "rtcode_int.h" /* first: this file is runtime code */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <stdlib.h>

#include "preempt_int.h"

#ifdef XTC_HAVE_URING
#include <liburing.h>

#ifndef IORING_TIMEOUT_MULTISHOT
#define IORING_TIMEOUT_MULTISHOT (1U << 6)
#endif

#define TICK_TAG 1u
#define REMOVE_TAG 2u

struct xtc__tickring {
	struct io_uring ring;
	struct __kernel_timespec ts;
	int multishot;
	int running;
	int64_t interval;
};

static __thread struct xtc__tickring *tls_tr XTC__PTLS;

static int submit_timeout(struct xtc__tickring *tr)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&tr->ring);
	if (sqe == NULL)
		return XTC_E_AGAIN;
	io_uring_prep_timeout(sqe, &tr->ts, 0,
	                      tr->multishot ? IORING_TIMEOUT_MULTISHOT : 0);
	io_uring_sqe_set_data64(sqe, TICK_TAG);
	return io_uring_submit(&tr->ring) == 1 ? XTC_OK : XTC_E_INTERNAL;
}

/* Multishot timeouts exist from Linux 6.4; older kernels fail the SQE with
 * EINVAL at once. */
static int start_probe(struct xtc__tickring *tr)
{
	tr->multishot = 1;
	if (submit_timeout(tr) != XTC_OK)
		return XTC_E_INTERNAL;
	struct io_uring_cqe *cqe;
	if (io_uring_peek_cqe(&tr->ring, &cqe) == 0 && cqe->res == -EINVAL) {
		io_uring_cqe_seen(&tr->ring, cqe);
		tr->multishot = 0;
		if (submit_timeout(tr) != XTC_OK)
			return XTC_E_INTERNAL;
	}
	tr->running = 1;
	return XTC_OK;
}

int xtc_preempt_arm_ring(int64_t interval_ns)
{
	if (interval_ns <= 0)
		return XTC_E_INVAL;
	if (interval_ns < XTC__PREEMPT_MIN_SLICE_NS)
		interval_ns = XTC__PREEMPT_MIN_SLICE_NS;
	struct xtc__tickring *tr = tls_tr;
	if (tr != NULL) {
		/* new interval: restart the timeout */
		xtc__tickring_pause();
		tr->interval = interval_ns;
		tr->ts.tv_sec = interval_ns / 1000000000;
		tr->ts.tv_nsec = interval_ns % 1000000000;
		xtc__tickring_resume();
		return XTC_OK;
	}
	tr = calloc(1, sizeof *tr);
	if (tr == NULL)
		return XTC_E_NOMEM;
	if (io_uring_queue_init(8, &tr->ring, 0) != 0) {
		free(tr);
		return XTC_E_NOSYS;
	}
	tr->interval = interval_ns;
	tr->ts.tv_sec = interval_ns / 1000000000;
	tr->ts.tv_nsec = interval_ns % 1000000000;
	if (start_probe(tr) != XTC_OK) {
		io_uring_queue_exit(&tr->ring);
		free(tr);
		return XTC_E_NOSYS;
	}
	xtc__preempt_thread_register();
	tls_tr = tr;
	xtc__ptls.ring_head = tr->ring.cq.khead;
	xtc__ptls.ring_tail = (const _Atomic unsigned *)tr->ring.cq.ktail;
	xtc__ptls.ring = tr;
	return XTC_OK;
}

int xtc_preempt_disarm_ring(void)
{
	struct xtc__tickring *tr = tls_tr;
	if (tr == NULL)
		return XTC_OK;
	xtc__ptls.ring = NULL;
	xtc__ptls.ring_tail = NULL;
	xtc__ptls.ring_head = NULL;
	tls_tr = NULL;
	io_uring_queue_exit(&tr->ring); /* cancels the timeout */
	free(tr);
	return XTC_OK;
}

void xtc__tickring_thread_exit(void)
{
	xtc_preempt_disarm_ring();
}

/* Consume every CQE; 1 if at least one was a tick. */
int xtc__tickring_reap(void)
{
	struct xtc__tickring *tr = tls_tr;
	if (tr == NULL)
		return 0;
	unsigned head, n = 0;
	int ticks = 0, rearm = 0;
	struct io_uring_cqe *cqe;
	io_uring_for_each_cqe(&tr->ring, head, cqe) {
		n++;
		if (cqe->user_data != TICK_TAG)
			continue;
		if (cqe->res == -ETIME) {
			ticks++;
			if (!(cqe->flags & IORING_CQE_F_MORE))
				rearm = 1; /* one-shot, or the kernel ended it */
		} else if (tr->running && cqe->res != -ECANCELED) {
			rearm = 1;
		}
	}
	io_uring_cq_advance(&tr->ring, n);
	if (rearm && tr->running)
		(void)submit_timeout(tr);
	xtc__ptls.st.ring_ticks += (uint64_t)ticks;
	return ticks > 0;
}

void xtc__tickring_pause(void)
{
	struct xtc__tickring *tr = tls_tr;
	if (tr == NULL || !tr->running)
		return;
	struct io_uring_sqe *sqe = io_uring_get_sqe(&tr->ring);
	if (sqe == NULL)
		return;
	io_uring_prep_timeout_remove(sqe, TICK_TAG, 0);
	io_uring_sqe_set_data64(sqe, REMOVE_TAG);
	if (io_uring_submit(&tr->ring) == 1)
		tr->running = 0;
}

void xtc__tickring_resume(void)
{
	struct xtc__tickring *tr = tls_tr;
	if (tr == NULL || tr->running)
		return;
	/* drop the removal's completions so they are not read as ticks */
	(void)xtc__tickring_reap();
	if (submit_timeout(tr) == XTC_OK)
		tr->running = 1;
}

#else /* !XTC_HAVE_URING */

int xtc_preempt_arm_ring(int64_t interval_ns)
{
	return interval_ns <= 0 ? XTC_E_INVAL : XTC_E_NOSYS;
}

int xtc_preempt_disarm_ring(void)
{
	return XTC_OK;
}

void xtc__tickring_thread_exit(void) {}
int  xtc__tickring_reap(void) { return 0; }
void xtc__tickring_pause(void) {}
void xtc__tickring_resume(void) {}

#endif
