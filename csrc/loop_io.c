/*
 * loop_io.c - backend-neutral part of the loop's I/O: backend choice, the
 * eventfd doorbell, request records and the interest-bit mapping.
 *
 * Model: the backend is chosen once per process, at the first loop init:
 * io_uring (when built with XTC_HAVE_URING) unless XTC_IO_BACKEND=epoll is
 * set, falling back to epoll when io_uring_queue_init is refused (old
 * kernel, seccomp, io_uring_disabled sysctl). Every later loop uses the same
 * backend, so xtc_io_backend_name() names one thing.
 *
 * Request records come from a per-loop free list and are freed only at
 * fini: the io_uring kernel side may still hold a pointer to a disarmed
 * record, so a record must never be returned to malloc while armed or dead.
 *
 * Alternatives rejected: a per-loop backend choice (tests and users could
 * not tell which backend ran); freeing records on disarm (use after free
 * when the cancelled completion arrives).
 */
#include "rtcode_int.h" /* first: this file is runtime code */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "loop_io_int.h"

static const xtc__io_ops_t *chosen_ops;
static pthread_mutex_t choose_mu = PTHREAD_MUTEX_INITIALIZER;

static __attribute__((unused)) int want_epoll(void)
{
	const char *e = getenv("XTC_IO_BACKEND");

	return e != NULL && strcmp(e, "epoll") == 0;
}

static int backend_start(struct xtc_io *io);

/* Start the backend choice on a throw-away io state: what a loop would
 * get, without creating a loop (the io layer stays below the loop's
 * lifecycle). */
static void probe_backend(void)
{
	struct xtc_io *io = calloc(1, sizeof(*io));

	if (io == NULL)
		return;
	io->wake_fd = eventfd(0, EFD_CLOEXEC);
	if (io->wake_fd >= 0 && backend_start(io) == 0)
		io->ops->fini(io);
	if (io->wake_fd >= 0)
		close(io->wake_fd);
	free(io);
}

const char *xtc_io_backend_name(void)
{
	const xtc__io_ops_t *ops = __atomic_load_n(&chosen_ops, __ATOMIC_ACQUIRE);

	if (ops != NULL)
		return ops->name;
#ifdef XTC_HAVE_URING
	/* Nothing chosen yet: probing means creating a ring. */
	probe_backend();
	ops = __atomic_load_n(&chosen_ops, __ATOMIC_ACQUIRE);
	if (ops != NULL)
		return ops->name;
	return want_epoll() ? "epoll" : "uring";
#else
	return "epoll";
#endif
}

static int backend_start(struct xtc_io *io)
{
	const xtc__io_ops_t *ops;
	int rc;

	pthread_mutex_lock(&choose_mu);
	ops = chosen_ops;
	if (ops != NULL) {
		io->ops = ops;
		rc = ops->init(io);
		pthread_mutex_unlock(&choose_mu);
		return rc;
	}
#ifdef XTC_HAVE_URING
	if (!want_epoll()) {
		io->ops = &xtc__io_uring_ops;
		rc = io->ops->init(io);
		if (rc == 0) {
			__atomic_store_n(&chosen_ops, io->ops, __ATOMIC_RELEASE);
			pthread_mutex_unlock(&choose_mu);
			return 0;
		}
		if (rc != XTC_E_NOSYS) {
			pthread_mutex_unlock(&choose_mu);
			return rc;
		}
	}
#endif
	io->ops = &xtc__io_epoll_ops;
	rc = io->ops->init(io);
	if (rc == 0)
		__atomic_store_n(&chosen_ops, io->ops, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&choose_mu);
	return rc;
}

int xtc__io_init(xtc_loop_t *loop)
{
	struct xtc_io *io = calloc(1, sizeof(*io));
	int rc;

	if (io == NULL)
		return XTC_E_NOMEM;
	io->loop = loop;
	io->wake_fd = eventfd(0, EFD_CLOEXEC);
	if (io->wake_fd < 0) {
		free(io);
		return errno == ENOMEM ? XTC_E_NOMEM : XTC_E_RESOURCE;
	}
	rc = backend_start(io);
	if (rc != 0) {
		close(io->wake_fd);
		free(io);
		return rc;
	}
	loop->io = io;
	return 0;
}

void xtc__io_fini(xtc_loop_t *loop)
{
	struct xtc_io *io = loop->io;
	xtc__io_req_t *r, *next;

	if (io == NULL)
		return;
	io->ops->fini(io);
	for (r = io->req_all; r != NULL; r = next) {
		next = r->all_next;
		free(r);
	}
	close(io->wake_fd);
	free(io);
	loop->io = NULL;
}

int xtc__io_poll(xtc_loop_t *loop, int64_t timeout_ns)
{
	return loop->io->ops->poll(loop->io, timeout_ns);
}

int xtc__io_wakeup(xtc_loop_t *loop)
{
	uint64_t one = 1;
	ssize_t n;

	/* EAGAIN means the counter is saturated: the loop is being woken
	 * anyway. */
	do
		n = write(loop->io->wake_fd, &one, sizeof(one));
	while (n < 0 && errno == EINTR);
	return 0;
}

void xtc__io_drain_wakefd(struct xtc_io *io)
{
	uint64_t v;
	ssize_t n;

	do
		n = read(io->wake_fd, &v, sizeof(v));
	while (n < 0 && errno == EINTR);
}

static xtc__io_req_t *req_get(struct xtc_io *io)
{
	xtc__io_req_t *r = io->req_free;

	if (r != NULL) {
		io->req_free = r->next;
		return r;
	}
	r = calloc(1, sizeof(*r));
	if (r == NULL)
		return NULL;
	r->all_next = io->req_all;
	io->req_all = r;
	return r;
}

void xtc__io_req_release(struct xtc_io *io, xtc__io_req_t *r)
{
	r->state = XTC__IOR_FREE;
	r->cb = NULL;
	r->arg = NULL;
	r->next = io->req_free;
	io->req_free = r;
}

int xtc__io_arm(xtc_loop_t *loop, int fd, uint32_t interest, xtc__io_cb cb,
                void *arg, xtc__io_req_t **out)
{
	struct xtc_io *io;
	xtc__io_req_t *r;
	int rc;

	if (loop == NULL || loop->io == NULL || fd < 0 || cb == NULL ||
	    out == NULL ||
	    (interest & (XTC_IO_READABLE | XTC_IO_WRITABLE)) == 0)
		return XTC_E_INVAL;
	io = loop->io;
	r = req_get(io);
	if (r == NULL)
		return XTC_E_NOMEM;
	r->cb = cb;
	r->arg = arg;
	r->fd = fd;
	r->interest = interest;
	r->state = XTC__IOR_ARMED;
	r->next = NULL;
	rc = io->ops->arm(io, r);
	if (rc != 0) {
		xtc__io_req_release(io, r);
		return rc;
	}
	io->armed++;
	*out = r;
	return 0;
}

void xtc__io_disarm(xtc_loop_t *loop, xtc__io_req_t *r)
{
	if (loop == NULL || loop->io == NULL || r == NULL)
		return;
	if (r->state != XTC__IOR_ARMED && r->state != XTC__IOR_READY &&
	    r->state != XTC__IOR_FIRING)
		return;
	loop->io->armed--;
	loop->io->ops->disarm(loop->io, r);
}

uint32_t xtc__io_to_poll(uint32_t interest)
{
	uint32_t ev = 0;

	if (interest & XTC_IO_READABLE)
		ev |= POLLIN | POLLRDHUP;
	if (interest & XTC_IO_WRITABLE)
		ev |= POLLOUT;
	return ev;
}

uint32_t xtc__io_from_poll(uint32_t events)
{
	uint32_t r = 0;

	if (events & (POLLIN | POLLPRI | POLLRDHUP))
		r |= XTC_IO_READABLE;
	if (events & POLLOUT)
		r |= XTC_IO_WRITABLE;
	if (events & POLLHUP)
		r |= XTC_IO_HUP;
	if (events & (POLLERR | POLLNVAL))
		r |= XTC_IO_ERR;
	return r;
}
