/*
 * xb_micro.c - the xtc half of the micro table. Each benchmark is one cgo
 * call; the clock is read inside the procs, around the measured loop only
 * (loop creation and teardown are outside the interval).
 *
 * There is no "raw switch" row: the public API offers no bare context
 * switch (a proc yielding alone takes the loop's fast path and does not
 * switch at all); bench/bench_switch measures it with the internal API.
 *
 *  yield      two procs on one loop alternate with xtc_yield; per yield
 *  spawn      spawn + run + exit of a proc that does nothing: a proc on the
 *             loop spawns one and yields until it exited
 *  fanout     the same with batches of 64 (batched spawn), warm
 *  pingpong   mailbox round trip between two procs on one loop
 *  crossloop  mailbox round trip between procs on two executor loops
 *  ccall      a proc calling an external C function (what a goroutine
 *             reaches through a cgo call)
 */
#include <stdio.h>
#include <string.h>

#include "xb.h"
#include "xb_api.h"

typedef struct micro_ctx {
	int64_t   n;
	int64_t   t0, t1;
	int       started, finished;
	xtc_pid_t peer;
	int       err;
	int64_t   warm;   /* procs of the untimed warm-up batch */
} micro_ctx_t;

static void mark_start(micro_ctx_t *c)
{
	if (c->started++ == 0)
		c->t0 = xb_now();
}

static void mark_end(micro_ctx_t *c, int total)
{
	if (++c->finished == total)
		c->t1 = xb_now();
}

static void p_yield_pair(void *arg)
{
	micro_ctx_t *c = arg;
	mark_start(c);
	for (int64_t i = 0; i < c->n; i++)
		xtc_yield();
	mark_end(c, 2);
}

static void p_nop(void *arg)
{
	(*(int64_t *)arg)++;
}

/* The spawner runs on the loop, like `go f()` from a goroutine: it spawns
 * a batch of procs (1, or 64 for the batched row), yields until all have
 * run and exited, and repeats. One untimed batch first: the clock starts
 * warm (stacks, task structs and mailboxes recycled), as Go's side does. */
static xtc_loop_t *spawn_loop;
static int64_t     spawn_batch;

static void p_spawner(void *arg)
{
	micro_ctx_t *c = arg;
	int64_t      count = 0;
	const int64_t batch = spawn_batch;
	for (int64_t k = 0; k < batch; k++)
		if (xtc_proc_spawn(spawn_loop, p_nop, &count, NULL, NULL) == 0)
			c->warm++;
	while (count < c->warm)
		xtc_yield();
	count = 0;
	mark_start(c);
	for (int64_t done = 0; done < c->n;) {
		int64_t b = c->n - done < batch ? c->n - done : batch;
		for (int64_t k = 0; k < b; k++) {
			int rc = xtc_proc_spawn(spawn_loop, p_nop, &count, NULL,
			                        NULL);
			if (rc) {
				c->err = rc;
				return;
			}
		}
		done += b;
		while (count < done)
			xtc_yield();
	}
	mark_end(c, 1);
}

static void p_ccall(void *arg)
{
	micro_ctx_t *c = arg;
	mark_start(c);
	for (int64_t i = 0; i < c->n; i++)
		xb_noop();
	mark_end(c, 1);
}

/* The server answers every message to the pid it carries. Shared by the
 * single-loop and the cross-loop ping-pong. Messages are 16 bytes. */
typedef struct pp_msg {
	xtc_pid_t from;
	int64_t   seq;
} pp_msg_t;

static void p_pp_server(void *arg)
{
	micro_ctx_t *c = arg;
	for (int64_t i = 0; i < c->n; i++) {
		void  *m = NULL;
		size_t sz = 0;
		int    rc = xtc_recv(&m, &sz, -1);
		if (rc != 0 || sz != sizeof(pp_msg_t)) {
			c->err = rc ? rc : -1;
			return;
		}
		pp_msg_t reply = *(pp_msg_t *)m;
		xtc_pid_t to = reply.from;
		xtc_free(m);
		reply.from = xtc_self();
		rc = xtc_send(to, &reply, sizeof reply);
		if (rc != 0) {
			c->err = rc;
			return;
		}
	}
}

static void p_pp_client(void *arg)
{
	micro_ctx_t *c = arg;
	pp_msg_t     msg = {.from = xtc_self(), .seq = 0};
	mark_start(c);
	for (int64_t i = 0; i < c->n; i++) {
		msg.seq = i;
		int rc = xtc_send(c->peer, &msg, sizeof msg);
		if (rc != 0) {
			c->err = rc;
			break;
		}
		void  *m = NULL;
		size_t sz = 0;
		rc = xtc_recv(&m, &sz, -1);
		if (rc != 0) {
			c->err = rc;
			break;
		}
		xtc_free(m);
	}
	mark_end(c, 1);
}

#define FAIL(what, rc)                                                        \
	do {                                                                   \
		snprintf(why, XB_WHY, "%s: %s (%d)", what, xb_strerror(rc),   \
		         rc);                                                  \
		ret = XB_FAIL;                                                 \
		goto out;                                                      \
	} while (0)

static int micro_loop(int which, int64_t n, double *ns_per_op, char *why)
{
	xtc_loop_t *loop = NULL;
	micro_ctx_t c, srv;
	int         ret = XB_OK, rc;
	memset(&c, 0, sizeof c);
	memset(&srv, 0, sizeof srv);
	c.n = srv.n = n;

	if ((rc = xtc_loop_init(&loop)) != 0)
		FAIL("xtc_loop_init", rc);

	switch (which) {
	case XB_MICRO_YIELD:
		for (int k = 0; k < 2; k++)
			if ((rc = xtc_proc_spawn(loop, p_yield_pair, &c, NULL,
			                         NULL)))
				FAIL("xtc_proc_spawn", rc);
		break;
	case XB_MICRO_CCALL:
		if ((rc = xtc_proc_spawn(loop, p_ccall, &c, NULL, NULL)))
			FAIL("xtc_proc_spawn", rc);
		break;
	case XB_MICRO_PINGPONG:
		if ((rc = xtc_proc_spawn(loop, p_pp_server, &srv, NULL,
		                         &c.peer)))
			FAIL("xtc_proc_spawn", rc);
		if ((rc = xtc_proc_spawn(loop, p_pp_client, &c, NULL, NULL)))
			FAIL("xtc_proc_spawn", rc);
		break;
	case XB_MICRO_SPAWN:
	case XB_MICRO_FANOUT:
		spawn_loop = loop;
		spawn_batch = which == XB_MICRO_FANOUT ? 64 : 1;
		if ((rc = xtc_proc_spawn(loop, p_spawner, &c, NULL, NULL)))
			FAIL("xtc_proc_spawn", rc);
		break;
	default:
		snprintf(why, XB_WHY, "unknown micro %d", which);
		ret = XB_FAIL;
		goto out;
	}
	if ((rc = xtc_loop_run(loop)))
		FAIL("xtc_loop_run", rc);
	if (c.err || srv.err)
		FAIL("mailbox", c.err ? c.err : srv.err);
	if (c.finished == 0) {
		snprintf(why, XB_WHY, "the measured procs did not finish");
		ret = XB_FAIL;
		goto out;
	}
	double per = (double)(c.t1 - c.t0) / (double)n;
	if (which == XB_MICRO_YIELD)
		per /= 2; /* two procs yielding n times each */
	*ns_per_op = per;
out:
	if (loop)
		xtc_loop_fini(loop);
	return ret;
}

static int micro_crossloop(int64_t n, double *ns_per_op, char *why)
{
#if XB_HAVE_EXEC
	xtc_exec_t *ex = NULL;
	micro_ctx_t c, srv;
	int         ret = XB_OK, rc;
	memset(&c, 0, sizeof c);
	memset(&srv, 0, sizeof srv);
	c.n = srv.n = n;
	if ((rc = xtc_exec_init(&ex, 2)))
		FAIL("xtc_exec_init", rc);
	if ((rc = xtc_proc_spawn(xtc_exec_loop(ex, 1), p_pp_server, &srv, NULL,
	                         &c.peer)))
		FAIL("xtc_proc_spawn(loop 1)", rc);
	if ((rc = xtc_proc_spawn(xtc_exec_loop(ex, 0), p_pp_client, &c, NULL,
	                         NULL)))
		FAIL("xtc_proc_spawn(loop 0)", rc);
	if ((rc = xtc_exec_run(ex)))
		FAIL("xtc_exec_run", rc);
	if (c.err || srv.err)
		FAIL("mailbox", c.err ? c.err : srv.err);
	if (c.finished == 0) {
		snprintf(why, XB_WHY, "the measured procs did not finish");
		ret = XB_FAIL;
		goto out;
	}
	*ns_per_op = (double)(c.t1 - c.t0) / (double)n;
out:
	if (ex)
		xtc_exec_fini(ex);
	return ret;
#else
	(void)n;
	(void)ns_per_op;
	snprintf(why, XB_WHY, "xtc_exec.h does not exist yet");
	return XB_UNAVAIL;
#endif
}

int xb_micro(int which, int64_t n, double *ns_per_op, char *why)
{
	int f = xb_features();
	why[0] = 0;
	*ns_per_op = 0;
	if (n < 1) {
		snprintf(why, XB_WHY, "n < 1");
		return XB_FAIL;
	}
	if (!(f & XB_F_CORE)) {
		snprintf(why, XB_WHY, "%s", xb_feature_why(XB_F_CORE));
		return XB_UNAVAIL;
	}
	if (which == XB_MICRO_CROSSLOOP) {
		if (!(f & XB_F_EXEC)) {
			snprintf(why, XB_WHY, "%s", xb_feature_why(XB_F_EXEC));
			return XB_UNAVAIL;
		}
		return micro_crossloop(n, ns_per_op, why);
	}
	return micro_loop(which, n, ns_per_op, why);
}
