/*
 * loop_io_epoll.c - epoll backend of the loop (the run-time fallback when
 * io_uring is refused, or XTC_IO_BACKEND=epoll).
 *
 * Model: one epoll instance per loop; each armed request is one fd
 * registration (data.ptr = request) removed with EPOLL_CTL_DEL when it fires
 * or is disarmed, so interest is one-shot. The eventfd doorbell is
 * registered with data.ptr = NULL. epoll refuses regular files (EPERM):
 * those are always ready, so the request goes to a pending list that the
 * next poll completes without waiting.
 *
 * Invariants: an fd has at most one registration per loop (a second arm
 * fails with the real error, XTC_E_INVAL for EEXIST); a request disarmed
 * while a poll batch is being dispatched is parked on the zombie list until
 * the batch ends, because the batch may still hold its pointer.
 *
 * Alternatives rejected: EPOLLONESHOT with MOD re-arming (keeps dead
 * registrations around and still needs a DEL at disarm); level-triggered
 * persistent registrations (would need per-fd demultiplexing of waiters).
 */
#include "rtcode_int.h" /* first: this file is runtime code */
#include <errno.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <time.h>
#include <unistd.h>

#include "loop_io_int.h"

typedef struct epoll_impl {
	int epfd;
	int in_batch;
	int no_pwait2;
} epoll_impl_t;

#define EP(io) ((epoll_impl_t *)(io)->impl)

static int err_from_errno(int e)
{
	switch (e) {
	case ENOMEM:
	case ENOSPC:
		return XTC_E_NOMEM;
	case EBADF:
	case EINVAL:
	case EEXIST:
	case ELOOP:
		return XTC_E_INVAL;
	default:
		return XTC_E_IO;
	}
}

static int ep_init(struct xtc_io *io)
{
	epoll_impl_t *ep = calloc(1, sizeof(*ep));
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = NULL };

	if (ep == NULL)
		return XTC_E_NOMEM;
	ep->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (ep->epfd < 0) {
		int e = errno;
		free(ep);
		if (e == EMFILE || e == ENFILE)
			return XTC_E_RESOURCE;
		return e == ENOMEM ? XTC_E_NOMEM : XTC_E_INTERNAL;
	}
	if (epoll_ctl(ep->epfd, EPOLL_CTL_ADD, io->wake_fd, &ev) != 0) {
		int rc = err_from_errno(errno);
		close(ep->epfd);
		free(ep);
		return rc;
	}
	io->impl = ep;
	return 0;
}

static void ep_fini(struct xtc_io *io)
{
	epoll_impl_t *ep = EP(io);

	if (ep == NULL)
		return;
	close(ep->epfd);
	free(ep);
	io->impl = NULL;
}

static int ep_arm(struct xtc_io *io, xtc__io_req_t *r)
{
	struct epoll_event ev;

	ev.events = xtc__io_to_poll(r->interest);
	ev.data.ptr = r;
	if (epoll_ctl(EP(io)->epfd, EPOLL_CTL_ADD, r->fd, &ev) == 0)
		return 0;
	if (errno == EPERM) {
		/* Regular files and the like cannot be polled: always ready. */
		r->state = XTC__IOR_READY;
		r->next = io->pending;
		io->pending = r;
		return 0;
	}
	return err_from_errno(errno);
}

static void ep_disarm(struct xtc_io *io, xtc__io_req_t *r)
{
	epoll_impl_t *ep = EP(io);

	if (r->state == XTC__IOR_ARMED)
		epoll_ctl(ep->epfd, EPOLL_CTL_DEL, r->fd, NULL);
	if (r->state == XTC__IOR_READY || ep->in_batch) {
		/* Still linked on the pending list or named by the batch being
		 * dispatched: the owner of that list releases it. */
		int was_ready = r->state == XTC__IOR_READY;
		r->state = XTC__IOR_DEAD;
		if (!was_ready) {
			r->next = io->zombies;
			io->zombies = r;
		}
		return;
	}
	xtc__io_req_release(io, r);
}

static void fire(struct xtc_io *io, xtc__io_req_t *r, uint32_t revents)
{
	xtc__io_cb cb = r->cb;
	void *arg = r->arg;

	io->armed--;
	xtc__io_req_release(io, r);
	cb(arg, revents);
}

static int run_pending(struct xtc_io *io)
{
	xtc__io_req_t *r = io->pending, *next;
	int n = 0;

	io->pending = NULL;
	for (; r != NULL; r = next) {
		next = r->next;
		if (r->state == XTC__IOR_DEAD) {
			xtc__io_req_release(io, r);
			continue;
		}
		fire(io, r, r->interest & (XTC_IO_READABLE | XTC_IO_WRITABLE));
		n++;
	}
	return n;
}

static int ep_wait(epoll_impl_t *ep, struct epoll_event *evs, int max,
                   int64_t timeout_ns)
{
	int ms;

	if (timeout_ns >= 0 && !ep->no_pwait2) {
		struct timespec ts = { .tv_sec = timeout_ns / 1000000000,
		                       .tv_nsec = timeout_ns % 1000000000 };
		int n = epoll_pwait2(ep->epfd, evs, max, &ts, NULL);
		if (n >= 0 || errno != ENOSYS)
			return n;
		ep->no_pwait2 = 1;
	}
	if (timeout_ns < 0)
		ms = -1;
	else if (timeout_ns > (int64_t)INT32_MAX * 1000000)
		ms = INT32_MAX;
	else /* round up: never wake before the timer is due */
		ms = (int)((timeout_ns + 999999) / 1000000);
	return epoll_wait(ep->epfd, evs, max, ms);
}

static int ep_poll(struct xtc_io *io, int64_t timeout_ns)
{
	epoll_impl_t *ep = EP(io);
	struct epoll_event evs[64];
	int n, i, count = 0;
	xtc__io_req_t *z;

	if (io->pending != NULL)
		timeout_ns = 0;
	n = ep_wait(ep, evs, 64, timeout_ns);
	if (n < 0)
		return errno == EINTR ? 0 : XTC_E_IO;
	ep->in_batch = 1;
	for (i = 0; i < n; i++) {
		xtc__io_req_t *r = evs[i].data.ptr;
		if (r == NULL) {
			xtc__io_drain_wakefd(io);
			count++;
			continue;
		}
		if (r->state != XTC__IOR_ARMED)
			continue;
		epoll_ctl(ep->epfd, EPOLL_CTL_DEL, r->fd, NULL);
		fire(io, r, xtc__io_from_poll(evs[i].events));
		count++;
	}
	ep->in_batch = 0;
	while ((z = io->zombies) != NULL) {
		io->zombies = z->next;
		xtc__io_req_release(io, z);
	}
	return count + run_pending(io);
}

const xtc__io_ops_t xtc__io_epoll_ops = {
	.name = "epoll",
	.init = ep_init,
	.fini = ep_fini,
	.arm = ep_arm,
	.disarm = ep_disarm,
	.poll = ep_poll,
};
