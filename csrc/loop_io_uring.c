/*
 * loop_io_uring.c - io_uring backend of the loop (the default when built with
 * liburing).
 *
 * Model: one small ring per loop. Interest is a one-shot IORING_OP_POLL_ADD
 * whose user_data is the request record; a disarm marks the record dead and
 * queues an IORING_OP_POLL_REMOVE (user_data 0, its completion ignored); the
 * record is recycled when the add's completion (-ECANCELED or an event)
 * arrives. The eventfd doorbell is a pending POLL_ADD too (user_data 1),
 * drained with read(2) and re-armed when it fires. SQEs are batched: they
 * reach the kernel at the next poll, which is one io_uring_enter that also
 * waits (with the timer deadline as its timeout).
 *
 * Refusal: io_uring_queue_init failing with ENOSYS/EPERM/EACCES/EINVAL is
 * reported as XTC_E_NOSYS so loop_io.c falls back to epoll for the process.
 *
 * Alternatives rejected: multishot poll for the doorbell (needs 5.13 and
 * re-arming logic anyway when it terminates); submitting on every arm (a
 * syscall per park); an IORING_OP_READ on the eventfd (a blocking read can
 * pin an io-wq worker on kernels without nowait support for eventfd).
 */
#include "rtcode_int.h" /* first: this file is runtime code */
#ifdef XTC_HAVE_URING

#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <poll.h>
#include <stdlib.h>

#include "loop_io_int.h"

#define WAKE_TAG 1u
#define RING_ENTRIES 256

typedef struct uring_impl {
	struct io_uring ring;
	unsigned unsubmitted;
	int wake_armed;
} uring_impl_t;

#define UR(io) ((uring_impl_t *)(io)->impl)

static struct io_uring_sqe *get_sqe(uring_impl_t *u)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&u->ring);

	if (sqe == NULL) {
		io_uring_submit(&u->ring);
		u->unsubmitted = 0;
		sqe = io_uring_get_sqe(&u->ring);
	}
	if (sqe != NULL)
		u->unsubmitted++;
	return sqe;
}

static int arm_wake(struct xtc_io *io)
{
	uring_impl_t *u = UR(io);
	struct io_uring_sqe *sqe = get_sqe(u);

	if (sqe == NULL)
		return XTC_E_AGAIN;
	io_uring_prep_poll_add(sqe, io->wake_fd, POLLIN);
	io_uring_sqe_set_data64(sqe, WAKE_TAG);
	u->wake_armed = 1;
	return 0;
}

static int ur_init(struct xtc_io *io)
{
	uring_impl_t *u = calloc(1, sizeof(*u));
	int rc;

	if (u == NULL)
		return XTC_E_NOMEM;
	rc = io_uring_queue_init(RING_ENTRIES, &u->ring, 0);
	if (rc < 0) {
		free(u);
		if (rc == -ENOMEM)
			return XTC_E_NOMEM;
		if (rc == -EMFILE || rc == -ENFILE)
			return XTC_E_RESOURCE;
		return XTC_E_NOSYS;
	}
	io->impl = u;
	arm_wake(io);
	return 0;
}

static void ur_fini(struct xtc_io *io)
{
	uring_impl_t *u = UR(io);

	if (u == NULL)
		return;
	io_uring_queue_exit(&u->ring);
	free(u);
	io->impl = NULL;
}

static int ur_arm(struct xtc_io *io, xtc__io_req_t *r)
{
	struct io_uring_sqe *sqe;

	/* The poll is submitted later, so the kernel would report a bad fd
	 * only in its completion; check now to return the error like epoll
	 * does (one cheap syscall; parking is not the yield hot path). */
	if (fcntl(r->fd, F_GETFD) < 0)
		return XTC_E_INVAL;
	sqe = get_sqe(UR(io));
	if (sqe == NULL)
		return XTC_E_AGAIN;
	io_uring_prep_poll_add(sqe, r->fd, xtc__io_to_poll(r->interest));
	io_uring_sqe_set_data(sqe, r);
	return 0;
}

static void ur_disarm(struct xtc_io *io, xtc__io_req_t *r)
{
	uring_impl_t *u = UR(io);
	struct io_uring_sqe *sqe;

	r->state = XTC__IOR_DEAD;
	/* Make sure the add reached the kernel before the remove, so the
	 * remove finds it (otherwise it would linger until the fd fires). */
	if (u->unsubmitted > 0) {
		io_uring_submit(&u->ring);
		u->unsubmitted = 0;
	}
	sqe = get_sqe(u);
	if (sqe == NULL)
		return; /* ring full even after submit: the record waits for its event */
	io_uring_prep_poll_remove(sqe, (__u64)(uintptr_t)r);
	io_uring_sqe_set_data64(sqe, 0);
}

static int handle_cqe(struct xtc_io *io, __u64 ud, int res)
{
	xtc__io_req_t *r;
	xtc__io_cb cb;
	void *arg;

	if (ud == 0)
		return 0;
	if (ud == WAKE_TAG) {
		UR(io)->wake_armed = 0;
		if (res > 0)
			xtc__io_drain_wakefd(io);
		return 1;
	}
	r = (xtc__io_req_t *)(uintptr_t)ud;
	if (r->state != XTC__IOR_ARMED) {
		xtc__io_req_release(io, r);
		return 0;
	}
	cb = r->cb;
	arg = r->arg;
	io->armed--;
	xtc__io_req_release(io, r);
	cb(arg, res < 0 ? XTC_IO_ERR : xtc__io_from_poll((uint32_t)res));
	return 1;
}

static int ur_poll(struct xtc_io *io, int64_t timeout_ns)
{
	uring_impl_t *u = UR(io);
	struct io_uring_cqe *cqe = NULL;
	int rc, count = 0;

	if (!u->wake_armed)
		arm_wake(io);
	if (timeout_ns == 0) {
		if (u->unsubmitted > 0)
			rc = io_uring_submit(&u->ring);
		/* Completions beyond the CQ ring wait in the kernel until an
		 * enter flushes them; a non-blocking poll must not miss them. */
		else if (io_uring_cq_has_overflow(&u->ring))
			rc = io_uring_get_events(&u->ring);
	} else if (timeout_ns < 0) {
		rc = io_uring_submit_and_wait(&u->ring, 1);
	} else {
		struct __kernel_timespec ts = {
			.tv_sec = timeout_ns / 1000000000,
			.tv_nsec = timeout_ns % 1000000000,
		};
		rc = io_uring_submit_and_wait_timeout(&u->ring, &cqe, 1, &ts, NULL);
		if (rc == -ETIME)
			rc = 0;
	}
	u->unsubmitted = 0;
	(void)rc;
	/* Errors of the wait itself (EINTR, EBUSY with a full CQ) only mean
	 * "look at the CQ now". */
	while (io_uring_peek_cqe(&u->ring, &cqe) == 0) {
		__u64 ud = cqe->user_data;
		int res = cqe->res;
		io_uring_cqe_seen(&u->ring, cqe);
		count += handle_cqe(io, ud, res);
		if (io_uring_cq_ready(&u->ring) == 0 &&
		    io_uring_cq_has_overflow(&u->ring))
			io_uring_get_events(&u->ring);
	}
	if (!u->wake_armed)
		arm_wake(io);
	return count;
}

const xtc__io_ops_t xtc__io_uring_ops = {
	.name = "uring",
	.init = ur_init,
	.fini = ur_fini,
	.arm = ur_arm,
	.disarm = ur_disarm,
	.poll = ur_poll,
};

#else
/* Built without liburing: loop_io.c uses epoll only. */
typedef int xtc__io_uring_unused;
#endif
