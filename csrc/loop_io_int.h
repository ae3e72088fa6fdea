/*
 * loop_io_int.h - the loop's I/O backend interface (loop_io.c, loop_io_uring.c,
 * loop_io_epoll.c).
 *
 * Model: each loop owns one backend instance and one eventfd. The eventfd is
 * the cross-thread doorbell (xtc__io_wakeup, any thread); everything else is
 * owner-thread only. Interest is one-shot: an armed request fires its
 * callback once and is then gone. The backend is chosen once per process:
 * io_uring when built with XTC_HAVE_URING and io_uring_queue_init succeeds,
 * epoll otherwise (or when XTC_IO_BACKEND=epoll is set in the environment).
 *
 * Invariants: a request is freed only by the backend, never by the user; a
 * disarmed request never calls back; on io_uring a disarmed request stays
 * allocated until its cancelled completion arrives, because the kernel
 * still holds its user_data.
 */
#ifndef XTC_IO_INT_H
#define XTC_IO_INT_H

#include <stdint.h>

#include "loop_int.h"

enum {
	XTC__IOR_FREE = 0,
	XTC__IOR_ARMED = 1,  /* registered, callback pending */
	XTC__IOR_DEAD = 2,   /* disarmed, waiting for the kernel to let go */
	XTC__IOR_READY = 3,  /* epoll: fired without registering (regular file) */
	XTC__IOR_FIRING = 4  /* epoll: taken off its fd by this poll's event,
	                      * its callback not run yet */
};

struct xtc__io_req {
	xtc__io_cb cb;
	void *arg;
	int fd;
	uint32_t interest;
	uint32_t state;      /* XTC__IOR_* */
	xtc__io_req_t *next; /* free list / pending list / epoll: its fd's
	                      * waiters, then the firing list */
	xtc__io_req_t *all_next;
	uint32_t batch;      /* epoll: the poll it was armed in */
};

struct xtc_io;

typedef struct xtc__io_ops {
	const char *name;
	int  (*init)(struct xtc_io *io);   /* 0 or XTC_E_*; may refuse (NOSYS) */
	void (*fini)(struct xtc_io *io);
	int  (*arm)(struct xtc_io *io, xtc__io_req_t *r);
	void (*disarm)(struct xtc_io *io, xtc__io_req_t *r);
	/* Wait up to timeout_ns (< 0 forever, 0 non-blocking), run callbacks of
	 * ready requests, consume wakeups. Returns the number of callbacks run
	 * plus wakeups seen, or < 0. */
	int  (*poll)(struct xtc_io *io, int64_t timeout_ns);
} xtc__io_ops_t;

struct xtc_io {
	const xtc__io_ops_t *ops;
	xtc_loop_t *loop;
	int wake_fd;               /* blocking eventfd: read only when ready */
	uint64_t wake_buf;         /* io_uring read target */
	xtc__io_req_t *req_free;
	xtc__io_req_t *req_all;    /* every request ever allocated (fini) */
	xtc__io_req_t *pending;    /* epoll: ready without registration */
	int armed;                 /* live registrations */
	void *impl;                /* backend state */
};

extern const xtc__io_ops_t xtc__io_epoll_ops;
#ifdef XTC_HAVE_URING
extern const xtc__io_ops_t xtc__io_uring_ops;
#endif

/* loop_io.c */
int  xtc__io_init(xtc_loop_t *loop);
void xtc__io_fini(xtc_loop_t *loop);
int  xtc__io_poll(xtc_loop_t *loop, int64_t timeout_ns);
int  xtc__io_wakeup(xtc_loop_t *loop); /* any thread */
void xtc__io_req_release(struct xtc_io *io, xtc__io_req_t *r);
/* Map XTC_IO_* interest to poll(2) events and back. */
uint32_t xtc__io_to_poll(uint32_t interest);
uint32_t xtc__io_from_poll(uint32_t events);
/* Consume the eventfd counter (non-blocking). */
void xtc__io_drain_wakefd(struct xtc_io *io);

#endif
