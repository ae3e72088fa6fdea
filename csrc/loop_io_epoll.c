/*
 * loop_io_epoll.c - epoll backend of the loop (the run-time fallback when
 * io_uring is refused, or XTC_IO_BACKEND=epoll).
 *
 * Model: one epoll instance per loop, one registration per fd, however
 * many requests wait on it (two procs on one pipe, a task and a proc, two
 * batch groups fencing on one eventfd): a table indexed by fd keeps each
 * fd's waiters in arrival order and the union of their interests, which
 * is what the registration asks for (ADD for the first waiter, MOD when
 * the union changes, DEL when the last one goes). An event takes off the
 * fd every waiter whose interest it satisfies (all of them on HUP or ERR),
 * re-registers the rest, and runs those callbacks: interest stays one-shot
 * per request, as on io_uring. The eventfd doorbell is registered with a
 * key no fd has. epoll refuses regular files (EPERM): those are always
 * ready, so the request goes to a pending list that the next poll
 * completes without waiting.
 *
 * Invariants: an event names an fd and the generation of its
 * registration, never a request, so a request disarmed (and its record
 * reused) while a batch of events is dispatched cannot be reached through
 * the batch; an event whose generation is not the fd's current one (the
 * fd was dropped and registered again meanwhile) is ignored; a request
 * armed during a batch waits for the next poll (the batch's readiness is
 * from before it, and may have been consumed by then); a FIRING request
 * disarmed by an earlier callback of its batch is released, not called.
 * A closed fd leaves the kernel's registration with its file: a MOD that
 * finds none (ENOENT) registers again.
 *
 * Alternatives rejected: one registration per request (epoll keys by fd:
 * the second waiter got EEXIST, XTC_E_INVAL, under this backend only);
 * dup(2) per extra waiter (an fd per waiter, and a registration that
 * outlives the caller's close); EPOLLONESHOT with MOD re-arming (keeps
 * dead registrations around and still needs a DEL at disarm).
 */
#include "rtcode_int.h" /* first: this file is runtime code */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <time.h>
#include <unistd.h>

#include "loop_io_int.h"

#define WAKE_KEY UINT64_MAX

typedef struct ep_fd {
	xtc__io_req_t *head;  /* waiters, oldest first */
	uint32_t events;      /* what the registration asks for (0: none) */
	uint32_t gen;         /* bumped at each fresh registration */
} ep_fd_t;

typedef struct epoll_impl {
	int epfd;
	int no_pwait2;
	uint32_t batch;       /* polls so far */
	ep_fd_t *fds;
	size_t n_fds;
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
	struct epoll_event ev = { .events = EPOLLIN, .data.u64 = WAKE_KEY };

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
	free(ep->fds);
	free(ep);
	io->impl = NULL;
}

static ep_fd_t *fd_slot(epoll_impl_t *ep, int fd)
{
	if ((size_t)fd >= ep->n_fds) {
		size_t n = ep->n_fds ? ep->n_fds : 64;
		while (n <= (size_t)fd)
			n *= 2;
		ep_fd_t *t = realloc(ep->fds, n * sizeof *t);
		if (t == NULL)
			return NULL;
		memset(t + ep->n_fds, 0, (n - ep->n_fds) * sizeof *t);
		ep->fds = t;
		ep->n_fds = n;
	}
	return &ep->fds[fd];
}

static uint32_t union_of(const ep_fd_t *e)
{
	uint32_t ev = 0;

	for (const xtc__io_req_t *r = e->head; r != NULL; r = r->next)
		ev |= xtc__io_to_poll(r->interest);
	return ev;
}

/* Make fd's registration ask for `want` (0: drop it). 0 or -errno. */
static int reregister(epoll_impl_t *ep, int fd, ep_fd_t *e, uint32_t want)
{
	struct epoll_event ev;

	if (want == e->events)
		return 0;
	if (want == 0) {
		/* ENOENT/EBADF: closed by the user, gone with its file */
		(void)epoll_ctl(ep->epfd, EPOLL_CTL_DEL, fd, NULL);
		e->events = 0;
		return 0;
	}
	ev.events = want;
	if (e->events != 0) {
		ev.data.u64 = (uint64_t)e->gen << 32 | (uint32_t)fd;
		if (epoll_ctl(ep->epfd, EPOLL_CTL_MOD, fd, &ev) == 0) {
			e->events = want;
			return 0;
		}
		if (errno != ENOENT)
			return -errno;
	}
	e->gen++;
	ev.data.u64 = (uint64_t)e->gen << 32 | (uint32_t)fd;
	if (epoll_ctl(ep->epfd, EPOLL_CTL_ADD, fd, &ev) != 0)
		return -errno;
	e->events = want;
	return 0;
}

static int ep_arm(struct xtc_io *io, xtc__io_req_t *r)
{
	epoll_impl_t *ep = EP(io);
	ep_fd_t *e = fd_slot(ep, r->fd);
	xtc__io_req_t **tail;
	int rc;

	if (e == NULL)
		return XTC_E_NOMEM;
	rc = reregister(ep, r->fd, e, e->events | xtc__io_to_poll(r->interest));
	if (rc == -EPERM) {
		/* Regular files and the like cannot be polled: always ready. */
		r->state = XTC__IOR_READY;
		r->next = io->pending;
		io->pending = r;
		return 0;
	}
	if (rc != 0)
		return err_from_errno(-rc);
	r->batch = ep->batch;
	r->next = NULL;
	for (tail = &e->head; *tail != NULL; tail = &(*tail)->next)
		;
	*tail = r;
	return 0;
}

static void ep_disarm(struct xtc_io *io, xtc__io_req_t *r)
{
	epoll_impl_t *ep = EP(io);

	if (r->state == XTC__IOR_READY || r->state == XTC__IOR_FIRING) {
		/* Linked on the pending list or on the firing list of the
		 * event being dispatched: the owner of that list releases it. */
		r->state = XTC__IOR_DEAD;
		return;
	}
	ep_fd_t *e = &ep->fds[r->fd];
	for (xtc__io_req_t **p = &e->head; *p != NULL; p = &(*p)->next)
		if (*p == r) {
			*p = r->next;
			break;
		}
	(void)reregister(ep, r->fd, e, union_of(e));
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

/* One event of fd: detach the waiters it satisfies (armed before this
 * poll), re-register the others, then call the detached ones. */
static int dispatch(struct xtc_io *io, epoll_impl_t *ep, uint64_t key,
                    uint32_t events)
{
	int fd = (int)(uint32_t)key, n = 0;
	uint32_t revents = xtc__io_from_poll(events);
	xtc__io_req_t *firing = NULL, **ftail = &firing, *r, *next;

	if ((size_t)fd >= ep->n_fds)
		return 0;
	ep_fd_t *e = &ep->fds[fd];
	if (e->events == 0 || e->gen != (uint32_t)(key >> 32))
		return 0; /* dropped (and maybe registered again) meanwhile */
	for (xtc__io_req_t **p = &e->head; (r = *p) != NULL;) {
		uint32_t want = r->interest | XTC_IO_HUP | XTC_IO_ERR;
		if (r->batch != ep->batch && (revents & want)) {
			*p = r->next;
			r->state = XTC__IOR_FIRING;
			r->next = NULL;
			*ftail = r;
			ftail = &r->next;
		} else {
			p = &r->next;
		}
	}
	(void)reregister(ep, fd, e, union_of(e));
	for (r = firing; r != NULL; r = next) {
		next = r->next;
		if (r->state == XTC__IOR_DEAD) { /* disarmed by a callback */
			xtc__io_req_release(io, r);
			continue;
		}
		fire(io, r, revents);
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

	if (io->pending != NULL)
		timeout_ns = 0;
	n = ep_wait(ep, evs, 64, timeout_ns);
	if (n < 0)
		return errno == EINTR ? 0 : XTC_E_IO;
	/* requests armed from here on wait for the next poll */
	ep->batch++;
	for (i = 0; i < n; i++) {
		if (evs[i].data.u64 == WAKE_KEY) {
			xtc__io_drain_wakefd(io);
			count++;
			continue;
		}
		count += dispatch(io, ep, evs[i].data.u64, evs[i].events);
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
