/*
 * test_proc.c - processes: spawn and its variants, identity, userdata,
 * classes, sleep, wait_fd, wake (also from a pthread), exit paths (return,
 * exit_self, kill before/while running/parked), links, monitors, decoding,
 * xtc_proc_info (live and dead pids, from a pthread), loop fini with
 * live procs, and every error path.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "loop_int.h"
#include "proc_int.h"
#include "xtc.h"

#include "test_util.h"

/* Receive one message with a timeout; returns its buffer or NULL. */
static void *get(size_t *sz, int64_t timeout)
{
	void *m = NULL;
	if (xtc_recv(&m, sz, timeout) != XTC_OK)
		return NULL;
	return m;
}

static void noop(void *arg) { (void)arg; }

/* ---- off-proc error paths ----------------------------------------------- */

static void test_off_proc(void)
{
	uint64_t ref = 0;
	uint32_t rev = 0;
	void *m = NULL;
	xtc_pid_t fake = { 1, 1, 1 };

	CHECK(xtc_pid_is_none(xtc_self()));
	CHECK(xtc_proc_set_userdata(&ref) == XTC_E_INVAL);
	CHECK(xtc_proc_userdata() == NULL);
	CHECK(xtc_proc_set_class(NULL) == XTC_E_INVAL);
	CHECK(xtc_proc_sleep(1) == XTC_E_INVAL);
	CHECK(xtc_proc_wait_fd(0, XTC_IO_READABLE, 0, &rev) == XTC_E_INVAL);
	CHECK(xtc_exit_self(1) == XTC_E_INVAL);
	CHECK(xtc_link(fake) == XTC_E_INVAL);
	CHECK(xtc_unlink(fake) == XTC_E_INVAL);
	CHECK(xtc_monitor(fake, &ref) == XTC_E_INVAL);
	CHECK(xtc_demonitor(1) == XTC_E_INVAL);
	CHECK(xtc_recv(&m, NULL, 0) == XTC_E_INVAL);
	CHECK(xtc_exit_pid(XTC_PID_NONE, 1) == XTC_E_INVAL);
	CHECK(xtc_exit_pid(fake, 1) == XTC_E_INVAL);
	CHECK(xtc_proc_wake(XTC_PID_NONE) == XTC_E_INVAL);
	CHECK(xtc_proc_wake(fake) == XTC_OK);
	CHECK(xtc_proc_spawn(NULL, noop, NULL, NULL, NULL) == XTC_E_INVAL);

	xtc_loop_t *l = new_loop();
	xtc_proc_opts_t o;
	xtc_pid_t pid;
	CHECK(xtc_proc_spawn(l, NULL, NULL, NULL, NULL) == XTC_E_INVAL);
	CHECK(xtc_proc_spawn_link(l, noop, NULL, NULL, &pid) == XTC_E_INVAL);
	CHECK(xtc_proc_spawn_monitor(l, noop, NULL, NULL, &pid, &ref) ==
	      XTC_E_INVAL);
	memset(&o, 0, sizeof o);
	o.mailbox_watermark_pct = 101;
	CHECK(xtc_proc_spawn(l, noop, NULL, &o, NULL) == XTC_E_INVAL);
	o.mailbox_watermark_pct = -1;
	CHECK(xtc_proc_spawn(l, noop, NULL, &o, NULL) == XTC_E_INVAL);
	o.mailbox_watermark_pct = 50; /* no callback */
	CHECK(xtc_proc_spawn(l, noop, NULL, &o, NULL) == XTC_E_INVAL);
	memset(&o, 0, sizeof o);
	o.link_to = 77; /* no such proc */
	CHECK(xtc_proc_spawn(l, noop, NULL, &o, NULL) == XTC_E_INVAL);
	o.link_to = -3;
	CHECK(xtc_proc_spawn(l, noop, NULL, &o, NULL) == XTC_E_INVAL);
	run_fini(l);
}

/* ---- identity and a clean run ------------------------------------------- */

struct ident {
	xtc_pid_t seen;
	void *ud_before, *ud_after;
	int set_rc;
	int ran;
};

static void ident_body(void *arg)
{
	struct ident *s = arg;
	s->seen = xtc_self();
	s->ud_before = xtc_proc_userdata();
	s->set_rc = xtc_proc_set_userdata(s);
	xtc_yield();
	s->ud_after = xtc_proc_userdata();
	s->ran = 1;
}

static void test_identity(void)
{
	xtc_loop_t *l = new_loop();
	struct ident a, b;
	xtc_pid_t pa, pb;
	xtc_mailbox_stats_t st;

	memset(&a, 0, sizeof a);
	memset(&b, 0, sizeof b);
	CHECK(xtc_proc_spawn(l, ident_body, &a, NULL, &pa) == XTC_OK);
	CHECK(xtc_proc_spawn(l, ident_body, &b, NULL, &pb) == XTC_OK);
	CHECK(!xtc_pid_is_none(pa));
	CHECK(!xtc_pid_eq(pa, pb));
	CHECK(pa.gen != 0 && pa.loop_id != 0 && pa.local_id != 0);
	CHECK(xtc_proc_spawn(l, noop, NULL, NULL, NULL) == XTC_OK);
	CHECK(xtc_loop_run(l) == XTC_OK);
	CHECK(a.ran && b.ran);
	CHECK(xtc_pid_eq(a.seen, pa));
	CHECK(xtc_pid_eq(b.seen, pb));
	CHECK(a.ud_before == NULL && a.set_rc == XTC_OK && a.ud_after == &a);
	CHECK(b.ud_after == &b);
	/* dead now: every pid operation reports it */
	CHECK(xtc_send(pa, "x", 1) == XTC_E_INVAL);
	CHECK(xtc_exit_pid(pa, 1) == XTC_E_INVAL);
	CHECK(xtc_proc_mailbox_stats(pa, &st) == XTC_E_INVAL);
	CHECK(xtc_proc_wake(pa) == XTC_OK);

	/* slot reuse: a new proc never answers to the old pid */
	xtc_pid_t pc;
	memset(&a, 0, sizeof a);
	CHECK(xtc_proc_spawn(l, ident_body, &a, NULL, &pc) == XTC_OK);
	CHECK(!xtc_pid_eq(pc, pa) && !xtc_pid_eq(pc, pb));
	CHECK(xtc_send(pa, "x", 1) == XTC_E_INVAL);
	CHECK(xtc_send(pc, "x", 1) == XTC_OK);
	CHECK(xtc_proc_mailbox_stats(pc, &st) == XTC_OK && st.depth == 1);
	run_fini(l);
}

/* ---- classes ------------------------------------------------------------ */

struct cls_ctx {
	xtc_exec_class_t mine, other;
	int rc_mine, rc_other, rc_null;
	uint64_t in_class, after_null;
};

static void cls_body(void *arg)
{
	struct cls_ctx *c = arg;
	uint64_t r0;

	c->rc_mine = xtc_proc_set_class(c->mine);
	r0 = xtc_exec_class_runs(c->mine);
	for (int i = 0; i < 10; i++)
		xtc_yield(); /* each yield is a pick from `mine` */
	c->in_class = xtc_exec_class_runs(c->mine) - r0;
	c->rc_other = xtc_proc_set_class(c->other);
	c->rc_null = xtc_proc_set_class(NULL);
	r0 = xtc_exec_class_runs(c->mine);
	for (int i = 0; i < 10; i++)
		xtc_yield();
	c->after_null = xtc_exec_class_runs(c->mine) - r0;
}

static void test_classes(void)
{
	xtc_loop_t *l = new_loop(), *l2 = new_loop();
	struct cls_ctx c;
	xtc_proc_opts_t o;

	memset(&c, 0, sizeof c);
	c.rc_mine = c.rc_other = c.rc_null = 99;
	CHECK(xtc_exec_class_create(l, 10, 0, &c.mine) == XTC_OK);
	CHECK(xtc_exec_class_create(l2, 10, 0, &c.other) == XTC_OK);
	memset(&o, 0, sizeof o);
	o.sched_class = c.other;
	CHECK(xtc_proc_spawn(l, noop, NULL, &o, NULL) == XTC_E_INVAL);
	o.sched_class = c.mine;
	CHECK(xtc_proc_spawn(l, noop, NULL, &o, NULL) == XTC_OK);
	CHECK(xtc_proc_spawn(l, cls_body, &c, NULL, NULL) == XTC_OK);
	CHECK(xtc_loop_run(l) == XTC_OK);
	CHECK(c.rc_mine == XTC_OK);
	CHECK(c.rc_other == XTC_E_INVAL);
	CHECK(c.rc_null == XTC_OK);
	CHECK(c.in_class >= 10);
	CHECK(c.after_null <= 1);
	CHECK(xtc_exec_class_runs(c.mine) >= 11); /* + the one spawned in it */
	CHECK(xtc_loop_fini(l) == XTC_OK);
	CHECK(xtc_loop_fini(l2) == XTC_OK);
}

/* ---- sleep -------------------------------------------------------------- */

struct sleep_ctx {
	int rc_neg, rc_zero, rc;
	int64_t elapsed;
};

static void sleep_body(void *arg)
{
	struct sleep_ctx *s = arg;
	s->rc_neg = xtc_proc_sleep(-1);
	s->rc_zero = xtc_proc_sleep(0);
	int64_t t0 = xtc_clock_mono();
	s->rc = xtc_proc_sleep(3 * MS);
	s->elapsed = xtc_clock_mono() - t0;
}

static void test_sleep(void)
{
	xtc_loop_t *l = new_loop();
	struct sleep_ctx s;

	memset(&s, 0, sizeof s);
	CHECK(xtc_proc_spawn(l, sleep_body, &s, NULL, NULL) == XTC_OK);
	run_fini(l);
	CHECK(s.rc_neg == XTC_E_INVAL);
	CHECK(s.rc_zero == XTC_OK);
	CHECK(s.rc == XTC_OK);
	CHECK(s.elapsed >= 3 * MS);
}

/* ---- wait_fd ------------------------------------------------------------ */

struct wfd {
	int rfd, wfd;
	xtc_pid_t waiter;
	int rc_null, rc_neg, rc_noint, rc_bad, rc_closed, rc_closed_poll;
	int closed_fd;
	int rc_to, rc_poll, rc_read, rc_mail, rc_poll_ready;
	uint32_t rev_to, rev_poll, rev_read, rev_mail, rev_poll_ready;
	int64_t elapsed_to;
};

static void wfd_waiter(void *arg)
{
	struct wfd *w = arg;
	uint32_t rev = 0;
	void *m;

	w->rc_null = xtc_proc_wait_fd(w->rfd, XTC_IO_READABLE, 0, NULL);
	w->rc_neg = xtc_proc_wait_fd(-1, XTC_IO_READABLE, 0, &rev);
	w->rc_noint = xtc_proc_wait_fd(w->rfd, 0, 0, &rev);
	w->rc_bad = xtc_proc_wait_fd(w->rfd, 0x100, 0, &rev);
	w->rc_closed = xtc_proc_wait_fd(w->closed_fd, XTC_IO_READABLE, 2 * MS,
	                                &rev);
	w->rc_closed_poll = xtc_proc_wait_fd(w->closed_fd, XTC_IO_READABLE, 0,
	                                     &rev);
	w->rc_poll = xtc_proc_wait_fd(w->rfd, XTC_IO_READABLE, 0, &w->rev_poll);
	int64_t t0 = xtc_clock_mono();
	w->rc_to = xtc_proc_wait_fd(w->rfd, XTC_IO_READABLE, 2 * MS, &w->rev_to);
	w->elapsed_to = xtc_clock_mono() - t0;
	/* the writer proc writes after a short sleep */
	w->rc_read = xtc_proc_wait_fd(w->rfd, XTC_IO_READABLE, 5000 * MS,
	                              &w->rev_read);
	w->rc_poll_ready = xtc_proc_wait_fd(w->rfd, XTC_IO_READABLE, 0,
	                                    &w->rev_poll_ready);
	char buf[8];
	CHECK(read(w->rfd, buf, sizeof buf) == 1);
	/* now a message instead of the fd */
	w->rc_mail = xtc_proc_wait_fd(w->rfd, XTC_IO_READABLE, 5000 * MS,
	                              &w->rev_mail);
	m = get(NULL, 0);
	CHECK(m != NULL);
	xtc_free(m);
}

static void wfd_writer(void *arg)
{
	struct wfd *w = arg;
	CHECK(xtc_proc_sleep(10 * MS) == XTC_OK);
	CHECK(write(w->wfd, "x", 1) == 1);
	CHECK(xtc_proc_sleep(10 * MS) == XTC_OK);
	CHECK(xtc_send(w->waiter, "m", 1) == XTC_OK);
}

static void test_wait_fd(void)
{
	xtc_loop_t *l = new_loop();
	struct wfd w;
	int fds[2];

	memset(&w, 0, sizeof w);
	CHECK(pipe(fds) == 0);
	w.rfd = fds[0];
	w.wfd = fds[1];
	CHECK(pipe(fds) == 0); /* a number that names no open fd */
	close(fds[0]);
	close(fds[1]);
	w.closed_fd = fds[0];
	CHECK(xtc_proc_spawn(l, wfd_waiter, &w, NULL, &w.waiter) == XTC_OK);
	CHECK(xtc_proc_spawn(l, wfd_writer, &w, NULL, NULL) == XTC_OK);
	run_fini(l);
	CHECK(w.rc_null == XTC_E_INVAL);
	CHECK(w.rc_neg == XTC_E_INVAL);
	CHECK(w.rc_noint == XTC_E_INVAL);
	CHECK(w.rc_bad == XTC_E_INVAL);
	CHECK(w.rc_closed < 0 && w.rc_closed != XTC_E_AGAIN);
	CHECK(w.rc_closed_poll == XTC_E_INVAL);
	CHECK(w.rc_poll == XTC_E_AGAIN && w.rev_poll == XTC_WAIT_TIMEOUT);
	CHECK(w.rc_to == XTC_E_AGAIN && w.rev_to == XTC_WAIT_TIMEOUT);
	CHECK(w.elapsed_to >= 2 * MS);
	CHECK(w.rc_read == XTC_OK && (w.rev_read & XTC_IO_READABLE));
	CHECK(!(w.rev_read & XTC_WAIT_TIMEOUT));
	CHECK(w.rc_poll_ready == XTC_OK &&
	      (w.rev_poll_ready & XTC_IO_READABLE));
	CHECK(w.rc_mail == XTC_OK && w.rev_mail == XTC_WAIT_MAILBOX);
	close(w.rfd);
	close(w.wfd);
}

/* ---- wake from a pthread ------------------------------------------------ */

struct wake_ctx {
	atomic_int parked;
	atomic_int done;
	xtc_pid_t pid;
};

static void wake_body(void *arg)
{
	struct wake_ctx *w = arg;
	atomic_store(&w->parked, 1);
	while (!atomic_load(&w->done)) {
		/* a bare park: only xtc_proc_wake can end it */
		CHECK(xtc__task_park() == XTC_OK);
		atomic_store(&w->done, 1);
	}
}

static void *waker_thread(void *arg)
{
	struct wake_ctx *w = arg;
	while (!atomic_load(&w->parked))
		usleep(100);
	usleep(2000); /* let it really park */
	CHECK(xtc_proc_wake(w->pid) == XTC_OK);
	return NULL;
}

static void test_wake_pthread(void)
{
	xtc_loop_t *l = new_loop();
	struct wake_ctx w;
	pthread_t th;

	memset(&w, 0, sizeof w);
	CHECK(xtc_proc_spawn(l, wake_body, &w, NULL, &w.pid) == XTC_OK);
	REQUIRE(pthread_create(&th, NULL, waker_thread, &w) == 0);
	run_fini(l);
	pthread_join(th, NULL);
	CHECK(atomic_load(&w.done) == 1);
}

/* ---- monitors ----------------------------------------------------------- */

struct mon {
	int mode;
	int ran;
};

static void child_body(void *arg)
{
	struct mon *m = arg;
	m->ran = 1;
	if (m->mode == 1)
		xtc_exit_self(7);
	if (m->mode == 2) {
		void *b = get(NULL, -1); /* parked until killed */
		xtc_free(b);
		m->ran = 2;              /* never reached */
	}
	if (m->mode == 3)
		for (;;)
			xtc_yield();     /* killed at a yield */
}

static int expect_down(uint64_t ref, xtc_pid_t pid, int reason, int kind)
{
	size_t sz = 0;
	void *b = get(&sz, 5000 * MS);
	xtc_pid_t dp;
	int dr = -1, ok;
	xtc_down_info_t di;

	if (!b)
		return 0;
	ok = xtc_down_decode(b, sz, &dp, &dr) == XTC_OK &&
	     xtc_pid_eq(dp, pid) && dr == reason;
	ok = ok && xtc_down_decode_ex(b, sz, &di) == XTC_OK && di.ref == ref &&
	     di.kind == kind && di.reason == reason;
	if (kind == XTC_DOWN_KIND_EXIT)
		ok = ok && di.exit_code == reason;
	ok = ok && xtc_exit_decode(b, sz, NULL, NULL) == XTC_E_INVAL;
	xtc_free(b);
	return ok;
}

struct mon_results {
	int clean, exitcode, killed, yieldkill, noproc, early_kill;
	int early_ran;
	int demon, demon_late, demon_unknown, demon_zero;
	int mon_none, mon_self, mon_null;
	int kill_first;
};

static struct mon_results mr;

static void monitor_driver(void *arg)
{
	struct mon c1 = { 0, 0 }, c2 = { 1, 0 }, c3 = { 2, 0 }, c4 = { 3, 0 },
	           c5 = { 0, 0 }, c6 = { 2, 0 }, c7 = { 0, 0 };
	xtc_loop_t *l = arg;
	xtc_pid_t p;
	uint64_t r, r2;
	void *b;

	/* clean return */
	CHECK(xtc_proc_spawn_monitor(l, child_body, &c1, NULL, &p, &r) == 0);
	CHECK(r != 0);
	mr.clean = expect_down(r, p, 0, XTC_DOWN_KIND_CLEAN);
	/* exit_self(7) */
	CHECK(xtc_proc_spawn_monitor(l, child_body, &c2, NULL, &p, &r) == 0);
	mr.exitcode = expect_down(r, p, 7, XTC_DOWN_KIND_EXIT) && c2.ran == 1;
	/* killed while parked in recv; the first kill wins */
	CHECK(xtc_proc_spawn_monitor(l, child_body, &c3, NULL, &p, &r) == 0);
	xtc_yield();
	CHECK(xtc_exit_pid(p, 9) == XTC_OK);
	mr.kill_first = xtc_exit_pid(p, 10) == XTC_OK;
	mr.killed = expect_down(r, p, 9, XTC_DOWN_KIND_EXIT) && c3.ran == 1;
	CHECK(xtc_exit_pid(p, 9) == XTC_E_INVAL); /* dead now */
	/* killed at a yield */
	CHECK(xtc_proc_spawn_monitor(l, child_body, &c4, NULL, &p, &r) == 0);
	xtc_yield();
	CHECK(xtc_exit_pid(p, 11) == XTC_OK);
	mr.yieldkill = expect_down(r, p, 11, XTC_DOWN_KIND_EXIT);
	/* killed before it ever ran: the body never starts */
	CHECK(xtc_proc_spawn_monitor(l, child_body, &c5, NULL, &p, &r) == 0);
	CHECK(xtc_exit_pid(p, 5) == XTC_OK);
	mr.early_kill = expect_down(r, p, 5, XTC_DOWN_KIND_EXIT);
	mr.early_ran = c5.ran;
	/* monitoring the dead: immediate NOPROC */
	CHECK(xtc_monitor(p, &r2) == XTC_OK);
	mr.noproc = expect_down(r2, p, XTC_DOWN_NOPROC, XTC_DOWN_KIND_NOPROC);
	/* demonitor before the exit: no DOWN ever */
	CHECK(xtc_proc_spawn(l, child_body, &c6, NULL, &p) == XTC_OK);
	CHECK(xtc_monitor(p, &r) == XTC_OK);
	mr.demon = xtc_demonitor(r) == XTC_OK;
	CHECK(xtc_exit_pid(p, 3) == XTC_OK);
	CHECK(xtc_proc_sleep(2 * MS) == XTC_OK);
	b = get(NULL, 0);
	mr.demon = mr.demon && b == NULL;
	xtc_free(b);
	/* demonitor after the DOWN was queued: removed from the mailbox */
	CHECK(xtc_proc_spawn(l, child_body, &c7, NULL, &p) == XTC_OK);
	CHECK(xtc_monitor(p, &r) == XTC_OK);
	CHECK(xtc_proc_sleep(2 * MS) == XTC_OK); /* child exits cleanly */
	mr.demon_late = xtc_demonitor(r) == XTC_OK && get(NULL, 0) == NULL;
	mr.demon_unknown = xtc_demonitor(r) == XTC_E_NOTFOUND;
	mr.demon_zero = xtc_demonitor(0) == XTC_E_INVAL;
	mr.mon_none = xtc_monitor(XTC_PID_NONE, &r) == XTC_E_INVAL;
	mr.mon_self = xtc_monitor(xtc_self(), &r) == XTC_E_INVAL;
	/* a NULL ref is accepted (libxtc): the DOWN (NOPROC: p is gone)
	 * still arrives */
	mr.mon_null = xtc_monitor(p, NULL) == XTC_OK;
	b = get(NULL, 5000 * MS);
	mr.mon_null = mr.mon_null && b != NULL;
	xtc_free(b);
}

static void test_monitors(void)
{
	xtc_loop_t *l = new_loop();

	memset(&mr, 0, sizeof mr);
	CHECK(xtc_proc_spawn(l, monitor_driver, l, NULL, NULL) == XTC_OK);
	run_fini(l);
	CHECK(mr.clean);
	CHECK(mr.exitcode);
	CHECK(mr.killed);
	CHECK(mr.kill_first);
	CHECK(mr.yieldkill);
	CHECK(mr.early_kill);
	CHECK(mr.early_ran == 0);
	CHECK(mr.noproc);
	CHECK(mr.demon);
	CHECK(mr.demon_late);
	CHECK(mr.demon_unknown);
	CHECK(mr.demon_zero);
	CHECK(mr.mon_none && mr.mon_self && mr.mon_null);
}

/* ---- links -------------------------------------------------------------- */

struct link_results {
	int abnormal, clean_silent, unlinked_silent, parent_side, legacy;
	int link_dead, link_self, link_none, link_twice;
};

static struct link_results lr;

static int expect_exit(xtc_pid_t pid, int reason)
{
	size_t sz = 0;
	void *b = get(&sz, 5000 * MS);
	xtc_pid_t ep;
	int er = 0, ok;

	if (!b)
		return 0;
	ok = xtc_exit_decode(b, sz, &ep, &er) == XTC_OK &&
	     xtc_pid_eq(ep, pid) && er == reason &&
	     xtc_down_decode(b, sz, NULL, NULL) == XTC_E_INVAL;
	xtc_free(b);
	return ok;
}

static void link_child(void *arg)
{
	int how = (int)(intptr_t)arg;
	if (how == 1)
		xtc_exit_self(3);
	if (how == 2) { /* waits for its parent's EXIT */
		size_t sz;
		void *b = get(&sz, 5000 * MS);
		xtc_pid_t ep;
		int er = 0;
		lr.parent_side = b && xtc_exit_decode(b, sz, &ep, &er) == 0 &&
		                 er == 4;
		xtc_free(b);
	}
	if (how == 3) {
		CHECK(xtc_proc_sleep(1 * MS) == XTC_OK);
		xtc_exit_self(6);
	}
}

static void link_parent(void *arg)
{
	xtc_loop_t *l = arg;
	xtc_pid_t c = XTC_PID_NONE;
	(void)l;
	CHECK(xtc_proc_spawn_link(l, link_child, (void *)(intptr_t)2, NULL, &c) == 0);
	xtc_yield();
	xtc_exit_self(4);
}

static void link_driver(void *arg)
{
	xtc_loop_t *l = arg;
	xtc_pid_t c, me = xtc_self();

	CHECK(xtc_proc_spawn_link(l, link_child, (void *)(intptr_t)1, NULL, &c) == 0);
	lr.abnormal = expect_exit(c, 3);
	CHECK(xtc_proc_spawn_link(l, link_child, (void *)(intptr_t)0, NULL, &c) == 0);
	CHECK(xtc_proc_sleep(2 * MS) == XTC_OK);
	lr.clean_silent = get(NULL, 0) == NULL;
	lr.link_dead = xtc_link(c) == XTC_E_INVAL;
	lr.link_self = xtc_link(me) == XTC_E_INVAL;
	lr.link_none = xtc_link(XTC_PID_NONE) == XTC_E_INVAL;
	/* link later, then unlink: its abnormal exit stays silent */
	CHECK(xtc_proc_spawn(l, link_child, (void *)(intptr_t)3, NULL, &c) == 0);
	CHECK(xtc_link(c) == XTC_OK);
	lr.link_twice = xtc_link(c) == XTC_OK;
	CHECK(xtc_unlink(c) == XTC_OK);
	CHECK(xtc_unlink(c) == XTC_OK);
	CHECK(xtc_proc_sleep(5 * MS) == XTC_OK);
	lr.unlinked_silent = get(NULL, 0) == NULL;
	/* legacy link_to: the new proc links to us by local id */
	xtc_proc_opts_t o;
	memset(&o, 0, sizeof o);
	o.link_to = me.local_id;
	CHECK(xtc_proc_spawn(l, link_child, (void *)(intptr_t)1, &o, &c) == 0);
	lr.legacy = expect_exit(c, 3);
}

static void test_links(void)
{
	xtc_loop_t *l = new_loop();

	memset(&lr, 0, sizeof lr);
	CHECK(xtc_proc_spawn(l, link_driver, l, NULL, NULL) == XTC_OK);
	CHECK(xtc_proc_spawn(l, link_parent, l, NULL, NULL) == XTC_OK);
	run_fini(l);
	CHECK(lr.abnormal);
	CHECK(lr.clean_silent);
	CHECK(lr.unlinked_silent);
	CHECK(lr.parent_side);
	CHECK(lr.legacy);
	CHECK(lr.link_dead && lr.link_self && lr.link_none && lr.link_twice);
}

/* ---- spawn failure unwinds relationships -------------------------------- */

struct capres {
	int rc_plain, rc_link, rc_mon, demon_nf, no_msg, pid_untouched;
};

static void cap_driver(void *arg)
{
	struct capres *r = arg;
	xtc_loop_t *l = xtc__loop_current();
	xtc_pid_t p = XTC_PID_NONE;
	uint64_t ref = 0;

	/* the driver is the only live task: cap it there */
	l->max_tasks = l->live_tasks;
	r->rc_plain = xtc_proc_spawn(l, noop, NULL, NULL, &p);
	r->rc_link = xtc_proc_spawn_link(l, noop, NULL, NULL, &p);
	r->rc_mon = xtc_proc_spawn_monitor(l, noop, NULL, NULL, &p, &ref);
	r->pid_untouched = xtc_pid_is_none(p) && ref == 0;
	l->max_tasks = 0;
	/* nothing of the failed spawns survives: no held monitor, no link */
	r->demon_nf = xtc_demonitor(ref ? ref : 1) == XTC_E_NOTFOUND &&
	              xtc__proc_current()->held.n == 0 &&
	              xtc__proc_current()->links.n == 0;
	xtc_exit_self(0);
}

static void test_spawn_cap(void)
{
	xtc_loop_t *l = new_loop();
	struct capres r;

	memset(&r, 0, sizeof r);
	CHECK(xtc_proc_spawn(l, cap_driver, &r, NULL, NULL) == XTC_OK);
	run_fini(l);
	CHECK(r.rc_plain == XTC_E_RESOURCE);
	CHECK(r.rc_link == XTC_E_RESOURCE);
	CHECK(r.rc_mon == XTC_E_RESOURCE);
	CHECK(r.pid_untouched);
	CHECK(r.demon_nf);
}

/* ---- decoders ----------------------------------------------------------- */

static void test_decode(void)
{
	unsigned char junk[32];
	xtc_down_info_t di;
	xtc_pid_t p;
	int r;

	memset(junk, 0, sizeof junk);
	CHECK(xtc_down_decode(NULL, 21, &p, &r) == XTC_E_INVAL);
	CHECK(xtc_down_decode(junk, 21, &p, &r) == XTC_E_INVAL); /* kind 0 */
	junk[0] = 'D';
	CHECK(xtc_down_decode(junk, 20, &p, &r) == XTC_E_INVAL); /* short */
	CHECK(xtc_down_decode(junk, 21, NULL, NULL) == XTC_OK);
	CHECK(xtc_down_decode_ex(junk, 21, NULL) == XTC_E_INVAL);
	CHECK(xtc_down_decode_ex(junk, 21, &di) == XTC_OK &&
	      di.kind == XTC_DOWN_KIND_CLEAN);
	CHECK(xtc_exit_decode(junk, 13, &p, &r) == XTC_E_INVAL);
	junk[0] = 'E';
	CHECK(xtc_exit_decode(junk, 13, &p, &r) == XTC_OK);
	CHECK(xtc_exit_decode(NULL, 13, &p, &r) == XTC_E_INVAL);
	CHECK(xtc_exit_decode(junk, 12, &p, &r) == XTC_E_INVAL);
}

/* ---- loop fini with live procs ----------------------------------------- */

static atomic_int fini_down;

static int never(const void *d, size_t n, void *u)
{
	(void)d; (void)n; (void)u;
	return 0;
}

static void fini_parked(void *arg)
{
	void *b = NULL;
	(void)arg;
	/* never returns: the loop is finalised; the queued message stays
	 * in the save queue and must be freed by fini */
	CHECK(xtc_recv_match(never, NULL, &b, NULL, -1) == XTC_OK);
	xtc_free(b);
}

static void fini_stopper(void *arg)
{
	xtc_loop_t *l = arg;
	xtc_yield();
	CHECK(xtc_loop_stop(l) == XTC_OK);
}

struct xmon {
	xtc_pid_t target;
	atomic_int ready;
};

/* On another loop (thread): monitors a proc of the finalised loop. */
static void fini_watcher(void *arg)
{
	struct xmon *x = arg;
	uint64_t r;
	size_t sz;
	int reason = 0;
	CHECK(xtc_monitor(x->target, &r) == XTC_OK);
	atomic_store(&x->ready, 1);
	void *b = get(&sz, 10000 * MS);
	if (b && xtc_down_decode(b, sz, NULL, &reason) == XTC_OK &&
	    reason == XTC_E_ABORTED)
		atomic_store(&fini_down, 1);
	xtc_free(b);
}

static void *loop_thread(void *arg)
{
	xtc_loop_t *l = arg;
	CHECK(xtc_loop_run(l) == XTC_OK);
	return NULL;
}

static void test_fini_live(void)
{
	xtc_loop_t *l = new_loop(), *l2 = new_loop();
	struct xmon x;
	pthread_t th;
	xtc_pid_t p;

	memset(&x, 0, sizeof x);
	CHECK(xtc_proc_spawn(l, fini_parked, NULL, NULL, &p) == XTC_OK);
	CHECK(xtc_send(p, "undelivered", 11) == XTC_OK);
	x.target = p;
	CHECK(xtc_proc_spawn(l2, fini_watcher, &x, NULL, NULL) == XTC_OK);
	REQUIRE(pthread_create(&th, NULL, loop_thread, l2) == 0);
	while (!atomic_load(&x.ready))
		usleep(100);
	CHECK(xtc_proc_spawn(l, fini_stopper, l, NULL, NULL) == XTC_OK);
	CHECK(xtc_loop_run(l) == XTC_OK); /* returns by the stop */
	CHECK(xtc_loop_fini(l) == XTC_OK);
	pthread_join(th, NULL);
	CHECK(atomic_load(&fini_down) == 1);
	CHECK(xtc_loop_fini(l2) == XTC_OK);
	/* the finalised loop's pids are dead, from any thread */
	CHECK(xtc_send(p, "x", 1) == XTC_E_INVAL);
}

/* ---- calling context: Go callback, stackless task, coroutine ------------- */

/* rc of every call made with the Go-callback guard raised on a proc */
struct gocb_rcs {
	int recv, match, sleep, wait_fd, exit_self, alive_after;
	int cc_self_none, cc_recv, cc_exit;
};

static int match_any(const void *d, size_t n, void *u)
{
	(void)d; (void)n; (void)u;
	return 1;
}

static struct gocb_rcs *cc_out;

/* Runs on the carrier stack (as a Go callback does): no proc is current. */
static void in_carrier(void *arg)
{
	void *m = NULL;

	(void)arg;
	cc_out->cc_self_none = xtc_pid_is_none(xtc_self());
	cc_out->cc_recv = xtc_recv(&m, NULL, -1);
	cc_out->cc_exit = xtc_exit_self(5);
}

static void gocb_body(void *arg)
{
	struct gocb_rcs *r = arg;
	int fds[2];
	uint32_t rev = 0;
	void *m = NULL;

	CHECK(pipe(fds) == 0);
	xtc__gocb_enter();
	/* every wait must refuse at once, never hang or switch away */
	r->recv = xtc_recv(&m, NULL, -1);
	r->match = xtc_recv_match(match_any, NULL, &m, NULL, -1);
	r->sleep = xtc_proc_sleep(50 * MS);
	r->wait_fd = xtc_proc_wait_fd(fds[0], XTC_IO_READABLE, -1, &rev);
	r->exit_self = xtc_exit_self(3); /* refused: the proc lives on */
	xtc__gocb_leave();
	r->alive_after = 1;
	cc_out = r;
	CHECK(xtc__carrier_call(in_carrier, NULL) == XTC_OK);
	close(fds[0]);
	close(fds[1]);
}

/* rc of proc calls made from tasks that are not procs */
struct notproc_rcs {
	int recv, sleep, exit_self, link, set_class, ran;
};

static void notproc_calls(struct notproc_rcs *r)
{
	void *m = NULL;
	xtc_pid_t fake = { 1, 1, 1 };

	r->recv = xtc_recv(&m, NULL, -1);
	r->sleep = xtc_proc_sleep(MS);
	r->exit_self = xtc_exit_self(1);
	r->link = xtc_link(fake);
	r->set_class = xtc_proc_set_class(NULL);
	r->ran = 1;
}

static int stackless_body(xtc_task_t *self, void *arg)
{
	(void)self;
	notproc_calls(arg);
	return 0;
}

static intptr_t coro_body(void *arg)
{
	notproc_calls(arg);
	return 0;
}

static void check_notproc(const struct notproc_rcs *r)
{
	CHECK(r->ran == 1);
	CHECK(r->recv == XTC_E_INVAL);
	CHECK(r->sleep == XTC_E_INVAL);
	CHECK(r->exit_self == XTC_E_INVAL);
	CHECK(r->link == XTC_E_INVAL);
	CHECK(r->set_class == XTC_E_INVAL);
}

static void test_context(void)
{
	xtc_loop_t *l = new_loop();
	struct gocb_rcs g;
	struct notproc_rcs a, b;

	memset(&g, 0, sizeof g);
	memset(&a, 0, sizeof a);
	memset(&b, 0, sizeof b);
	CHECK(xtc_proc_spawn(l, gocb_body, &g, NULL, NULL) == XTC_OK);
	CHECK(xtc_task_spawn(l, stackless_body, &a, NULL) == XTC_OK);
	CHECK(xtc_async(l, coro_body, &b, NULL) == XTC_OK);
	run_fini(l);
	CHECK(g.recv == XTC_E_DEADLK);
	CHECK(g.match == XTC_E_DEADLK);
	CHECK(g.sleep == XTC_E_DEADLK);
	CHECK(g.wait_fd == XTC_E_DEADLK);
	CHECK(g.exit_self == XTC_E_DEADLK);
	CHECK(g.alive_after == 1);
	CHECK(g.cc_self_none == 1);
	CHECK(g.cc_recv == XTC_E_INVAL);
	CHECK(g.cc_exit == XTC_E_INVAL);
	check_notproc(&a);
	check_notproc(&b);
}

/* ---- pids and loops after fini ------------------------------------------- */

static void test_after_fini(void)
{
	xtc_loop_t *l = new_loop(), *l2;
	xtc_mailbox_stats_t st;
	xtc_pid_t p;

	CHECK(xtc_proc_spawn(l, noop, NULL, NULL, &p) == XTC_OK);
	CHECK(xtc_loop_fini(l) == XTC_OK); /* never ran: the proc is dropped */
	CHECK(xtc_send(p, "x", 1) == XTC_E_INVAL);
	CHECK(xtc_exit_pid(p, 1) == XTC_E_INVAL);
	CHECK(xtc_proc_mailbox_stats(p, &st) == XTC_E_INVAL);
	CHECK(xtc_proc_wake(p) == XTC_OK);
	/* a new loop may reuse the id and the slot: the old pid stays dead */
	l2 = new_loop();
	CHECK(xtc_proc_spawn(l2, noop, NULL, NULL, NULL) == XTC_OK);
	CHECK(xtc_send(p, "x", 1) == XTC_E_INVAL);
	CHECK(xtc_proc_mailbox_stats(p, &st) == XTC_E_INVAL);
	run_fini(l2);
}

/* ---- xtc_proc_info from another thread ---------------------------------- */

static atomic_int info_stage;

static int info_want99(const void *d, size_t n, void *u)
{
	int v;
	(void)u;
	if (n != sizeof v)
		return 0;
	memcpy(&v, d, sizeof v);
	return v == 99;
}

static void info_body(void *arg)
{
	void *m = NULL;
	(void)arg;
	CHECK(xtc_recv(&m, NULL, -1) == XTC_OK);
	xtc_free(m);
	atomic_store(&info_stage, 1);
	/* 2 3 4 go to the save queue; parks until killed */
	(void)xtc_recv_match(info_want99, NULL, &m, NULL, -1);
}

static void info_idle(void *arg)
{
	void *m = NULL;
	(void)arg;
	(void)xtc_recv(&m, NULL, -1);
	xtc_free(m);
}

static void *info_loop_thread(void *arg)
{
	CHECK(xtc_loop_run(arg) == XTC_OK);
	return NULL;
}

/* Poll xtc_proc_info until pred holds or ~5 s pass. */
static int info_wait(xtc_pid_t pid, xtc_proc_info_t *in, int want_rc,
                     int (*pred)(const xtc_proc_info_t *))
{
	for (int i = 0; i < 5000; i++) {
		int rc = xtc_proc_info(pid, in);
		if (rc == want_rc && (!pred || pred(in)))
			return 1;
		usleep(1000);
	}
	return 0;
}

static int saved3(const xtc_proc_info_t *in) { return in->mbox_saved == 3; }

static void test_info(void)
{
	xtc_loop_t *l = new_loop();
	xtc_proc_opts_t o;
	xtc_proc_info_t in;
	xtc_pid_t p, q, r, stale, unknown = { 4242, 1, 1 };
	pthread_t th;

	char namebuf[64];

	memset(&o, 0, sizeof o);
	/* the name is copied at spawn: the caller's buffer may change */
	snprintf(namebuf, sizeof namebuf, "infoproc");
	o.name = namebuf;
	o.mailbox_cap = 4;
	atomic_store(&info_stage, 0);
	CHECK(xtc_proc_spawn(l, info_body, NULL, &o, &p) == XTC_OK);
	memset(namebuf, 'X', sizeof namebuf - 1);
	namebuf[sizeof namebuf - 1] = '\0';
	/* a long name is cut to XTC_PROC_NAME_MAX - 1 bytes */
	o.name = namebuf;
	CHECK(xtc_proc_spawn(l, info_idle, NULL, &o, &stale) == XTC_OK);
	CHECK(xtc_proc_info(stale, &in) == XTC_OK);
	CHECK(in.name != NULL && strlen(in.name) == XTC_PROC_NAME_MAX - 1);
	CHECK(xtc_exit_pid(stale, 0) == XTC_OK);
	CHECK(xtc_proc_spawn(l, info_idle, NULL, NULL, &q) == XTC_OK);
	o.name = NULL;
	o.mailbox_cap = 0;
	o.migratable = 1;
	CHECK(xtc_proc_spawn(l, info_idle, NULL, &o, &r) == XTC_OK);

	/* errors */
	CHECK(xtc_proc_info(p, NULL) == XTC_E_INVAL);
	CHECK(xtc_proc_info(XTC_PID_NONE, &in) == XTC_E_INVAL);
	CHECK(xtc_proc_info(unknown, &in) == XTC_E_INVAL);
	stale = p;
	stale.gen++;
	CHECK(xtc_proc_info(stale, &in) == XTC_E_INVAL);

	/* live, not started yet */
	memset(&in, 0xa5, sizeof in);
	CHECK(xtc_proc_info(p, &in) == XTC_OK);
	CHECK(in.alive == 1);
	CHECK(in.kill_pending == 0);
	CHECK(in.name != NULL && strcmp(in.name, "infoproc") == 0);
	CHECK(in.migratable == 0);
	CHECK(in.loop_id == p.loop_id);
	CHECK(in.mbox_cap == 4);
	CHECK(in.mbox_len == 0 && in.mbox_saved == 0 && in.recv_total == 0);
	for (int v = 1; v <= 4; v++) {
		CHECK(xtc_send(p, &v, sizeof v) == XTC_OK);
	}
	CHECK(xtc_send(p, "x", 1) == XTC_E_AGAIN);
	CHECK(xtc_proc_info(p, &in) == XTC_OK);
	CHECK(in.mbox_len == 4 && in.mbox_peak == 4 && in.drop_total == 1);
	CHECK(xtc_exit_pid(q, 3) == XTC_OK);
	CHECK(xtc_proc_info(q, &in) == XTC_OK);
	CHECK(in.kill_pending == 1 && in.name == NULL);
	CHECK(in.mbox_cap == XTC_MAILBOX_DEFAULT_CAP);

	/* live, parked, read from this (foreign) thread */
	REQUIRE(pthread_create(&th, NULL, info_loop_thread, l) == 0);
	CHECK(info_wait(p, &in, XTC_OK, saved3));
	CHECK(atomic_load(&info_stage) == 1);
	CHECK(in.alive == 1 && in.migratable == 0);
	CHECK(in.mbox_len == 3 && in.recv_total == 1 && in.mbox_peak == 4);
	CHECK(xtc_proc_info(r, &in) == XTC_OK);
	CHECK(in.migratable == 1);
	/* q was killed before it ran: gone once the loop acted on it */
	CHECK(info_wait(q, &in, XTC_E_INVAL, NULL));

	/* dead pids: INVAL, from this thread */
	CHECK(xtc_exit_pid(p, 5) == XTC_OK);
	CHECK(xtc_exit_pid(r, 5) == XTC_OK);
	CHECK(info_wait(p, &in, XTC_E_INVAL, NULL));
	CHECK(info_wait(r, &in, XTC_E_INVAL, NULL));
	pthread_join(th, NULL);
	CHECK(xtc_proc_info(p, &in) == XTC_E_INVAL);
	CHECK(xtc_loop_fini(l) == XTC_OK);
	CHECK(xtc_proc_info(p, &in) == XTC_E_INVAL); /* after fini */
}

/* xtc__proc_spawn_hooked: the exit hook runs exactly once, with 0 for a
 * return, the kill reason for a kill, XTC_E_ABORTED for a proc dropped by
 * fini (never run); not at all for a failed spawn. */
static atomic_int hook_calls, hook_last;

static void hook_fn(void *user, int reason)
{
	(void)user;
	atomic_fetch_add(&hook_calls, 1);
	atomic_store(&hook_last, reason);
}

static void hook_body_sleep(void *a)
{
	(void)a;
	xtc_proc_sleep(1000LL * 1000 * 1000);
}

static void hook_body_ret(void *a)
{
	(void)a;
}

static void test_exit_hook(void)
{
	xtc_loop_t *l = new_loop();
	xtc_pid_t p;

	atomic_store(&hook_calls, 0);
	CHECK(xtc__proc_spawn_hooked(l, hook_body_ret, NULL, NULL, hook_fn,
	    NULL, &p) == XTC_OK);
	CHECK(xtc_loop_run(l) == XTC_OK);
	CHECK(atomic_load(&hook_calls) == 1 && atomic_load(&hook_last) == 0);

	CHECK(xtc__proc_spawn_hooked(l, hook_body_sleep, NULL, NULL, hook_fn,
	    NULL, &p) == XTC_OK);
	CHECK(xtc_exit_pid(p, 77) == XTC_OK);
	CHECK(xtc_loop_run(l) == XTC_OK);
	CHECK(atomic_load(&hook_calls) == 2 && atomic_load(&hook_last) == 77);

	CHECK(xtc__proc_spawn_hooked(NULL, hook_body_ret, NULL, NULL, hook_fn,
	    NULL, &p) == XTC_E_INVAL);
	CHECK(atomic_load(&hook_calls) == 2);

	CHECK(xtc__proc_spawn_hooked(l, hook_body_ret, NULL, NULL, hook_fn,
	    NULL, &p) == XTC_OK);
	CHECK(xtc_loop_fini(l) == XTC_OK);
	CHECK(atomic_load(&hook_calls) == 3 &&
	    atomic_load(&hook_last) == XTC_E_ABORTED);
}

/* The proc table header of a loop is recycled when the loop is finalised:
 * creating and destroying loops that used procs (each a new loop id, ids
 * go round all 65535) leaves the header count at the number of loops alive
 * at once. Old pids stay stale: a pid of a finalised loop never names the
 * proc of a later loop that got the same header or the same id. */
static void hdr_body(void *a)
{
	*(xtc_pid_t *)a = xtc_self();
}

static void test_tab_recycle(void)
{
	int base = -1;
	xtc_pid_t old = XTC_PID_NONE, p;

	for (int i = 0; i < 3000; i++) {
		xtc_loop_t *l = new_loop(), *l2 = NULL;
		xtc_pid_t got = XTC_PID_NONE;

		CHECK(xtc_proc_spawn(l, hdr_body, &got, NULL, &p) == XTC_OK);
		if (i % 100 == 0) {
			/* a second loop alive at the same time */
			l2 = new_loop();
			CHECK(xtc_proc_spawn(l2, hdr_body, &got, NULL, NULL) ==
			    XTC_OK);
		}
		if (!xtc_pid_is_none(old))
			CHECK(xtc_exit_pid(old, 1) == XTC_E_INVAL);
		CHECK(xtc_loop_run(l) == XTC_OK);
		CHECK(xtc_pid_eq(got, p));
		CHECK(xtc_loop_fini(l) == XTC_OK);
		if (l2 != NULL) {
			CHECK(xtc_loop_run(l2) == XTC_OK);
			CHECK(xtc_loop_fini(l2) == XTC_OK);
		}
		old = p;
		if (i == 0)
			base = xtc__proc_tab_headers();
	}
	/* the first pass may create the second header; none after it */
	CHECK(xtc__proc_tab_headers() <= base + 1);
	CHECK(xtc_exit_pid(old, 1) == XTC_E_INVAL);
}

/* ---- several waiters on one fd (both I/O backends) ----------------------- */

/* Two procs waiting on one pipe, a task and a proc, a reader and a writer
 * on one socket (issue 27): every waiter is told once its own interest is
 * met. Under XTC_IO_BACKEND=epoll (meson runs this file again with it) the
 * second waiter got XTC_E_INVAL at once: epoll keys registrations by fd.
 * Ordered by the loop: the waiters park before the writer runs (spawn
 * order). */
static int mw_fd[2], mw_sock[2];
static int mw_rc[4] = { 1, 1, 1, 1 };
static uint32_t mw_rev[4];
static int mw_task_woken;

static void mw_reader(void *arg)
{
	int i = (int)(intptr_t)arg;
	mw_rc[i] = xtc_proc_wait_fd(mw_fd[0], XTC_IO_READABLE, 60 * SEC,
	                            &mw_rev[i]);
}

static int mw_task(xtc_task_t *self, void *user)
{
	(void)user;
	if (mw_task_woken++ == 0) {
		int rc = xtc_task_park_on_fd(self, mw_fd[0], XTC_IO_READABLE);
		CHECK_EQ(rc, XTC_OK);
		return rc == XTC_OK ? XTC_TASK_PENDING : XTC_TASK_DONE;
	}
	return XTC_TASK_DONE;
}

static void mw_sock_wait(void *arg)
{
	int i = (int)(intptr_t)arg;
	mw_rc[i] = xtc_proc_wait_fd(mw_sock[0], i == 2 ? XTC_IO_READABLE :
	                            XTC_IO_WRITABLE, 60 * SEC, &mw_rev[i]);
}

static void mw_writer(void *arg)
{
	(void)arg;
	REQUIRE(write(mw_fd[1], "x", 1) == 1);
	/* the socket's writer-side waiter (3) is done by now: the reader
	 * (2) still waits on the same fd */
	while (mw_rc[3] == 1)
		REQUIRE(xtc_proc_sleep(0) == XTC_OK);
	CHECK(mw_rc[2] == 1);
	REQUIRE(write(mw_sock[1], "y", 1) == 1);
}

static void test_wait_fd_shared(void)
{
	xtc_loop_t *l = new_loop();
	REQUIRE(pipe(mw_fd) == 0);
	REQUIRE(socketpair(AF_UNIX, SOCK_STREAM, 0, mw_sock) == 0);
	REQUIRE(xtc_proc_spawn(l, mw_reader, (void *)0, NULL, NULL) == XTC_OK);
	REQUIRE(xtc_proc_spawn(l, mw_reader, (void *)1, NULL, NULL) == XTC_OK);
	REQUIRE(xtc_task_spawn(l, mw_task, NULL, NULL) == XTC_OK);
	REQUIRE(xtc_proc_spawn(l, mw_sock_wait, (void *)2, NULL, NULL) ==
	        XTC_OK);
	REQUIRE(xtc_proc_spawn(l, mw_sock_wait, (void *)3, NULL, NULL) ==
	        XTC_OK);
	REQUIRE(xtc_proc_spawn(l, mw_writer, NULL, NULL, NULL) == XTC_OK);
	run_fini(l);
	for (int i = 0; i < 4; i++)
		CHECK_EQ(mw_rc[i], XTC_OK);
	CHECK(mw_rev[0] & XTC_IO_READABLE);
	CHECK(mw_rev[1] & XTC_IO_READABLE);
	CHECK(mw_rev[2] & XTC_IO_READABLE);
	CHECK(mw_rev[3] & XTC_IO_WRITABLE);
	CHECK_EQ(mw_task_woken, 2);
	close(mw_fd[0]);
	close(mw_fd[1]);
	close(mw_sock[0]);
	close(mw_sock[1]);
}

/* ---- xtc_proc_at_exit ------------------------------------------------------ */

static char ae_log[64];
static int ae_n;
static int ae_down_seen_before; /* handlers ran before the watcher's DOWN */

static void ae_note(void *arg)
{
	if (ae_n < (int)sizeof ae_log - 1)
		ae_log[ae_n++] = (char)(intptr_t)arg;
}

static void ae_body_return(void *arg)
{
	(void)arg;
	CHECK(xtc_proc_at_exit(NULL, NULL) == XTC_E_INVAL);
	CHECK(xtc_proc_at_exit(ae_note, (void *)'a') == XTC_OK);
	CHECK(xtc_proc_at_exit(ae_note, (void *)'b') == XTC_OK);
	CHECK(xtc_proc_at_exit(ae_note, (void *)'c') == XTC_OK);
}

static void ae_body_full(void *arg)
{
	(void)arg;
	for (int i = 0; i < XTC_PROC_AT_EXIT_MAX; i++)
		CHECK(xtc_proc_at_exit(ae_note, (void *)(intptr_t)('0' + i)) ==
		      XTC_OK);
	CHECK(xtc_proc_at_exit(ae_note, (void *)'x') == XTC_E_RESOURCE);
	xtc_exit_self(3);
}

static void ae_body_parked(void *arg)
{
	(void)arg;
	CHECK(xtc_proc_at_exit(ae_note, (void *)'k') == XTC_OK);
	CHECK(xtc_proc_at_exit(ae_note, (void *)'K') == XTC_OK);
	for (;;)
		(void)xtc_proc_sleep(1 * SEC);
}

static xtc_pid_t ae_victim;

static void ae_watcher(void *arg)
{
	(void)arg;
	uint64_t ref;
	CHECK(xtc_monitor(ae_victim, &ref) == XTC_OK);
	CHECK(xtc_exit_pid(ae_victim, 9) == XTC_OK);
	void *m = NULL;
	CHECK(xtc_recv(&m, NULL, 5 * SEC) == XTC_OK);
	/* the victim's handlers ran before its DOWN was sent */
	ae_down_seen_before = ae_n;
	xtc_free(m);
}

/* Handlers run last first, whatever ends the proc (a return, an exit, a
 * kill, the loop's fini), before its monitors are told; a full table is
 * XTC_E_RESOURCE; off a proc XTC_E_INVAL. */
static void test_at_exit(void)
{
	CHECK(xtc_proc_at_exit(ae_note, NULL) == XTC_E_INVAL); /* off a proc */
	xtc_loop_t *l = new_loop();
	ae_n = 0;
	CHECK(xtc_proc_spawn(l, ae_body_return, NULL, NULL, NULL) == XTC_OK);
	CHECK(xtc_loop_run(l) == XTC_OK);
	ae_log[ae_n] = 0;
	CHECK(strcmp(ae_log, "cba") == 0);

	ae_n = 0;
	CHECK(xtc_proc_spawn(l, ae_body_full, NULL, NULL, NULL) == XTC_OK);
	CHECK(xtc_loop_run(l) == XTC_OK);
	ae_log[ae_n] = 0;
	CHECK(strcmp(ae_log, "76543210") == 0);

	ae_n = 0;
	ae_down_seen_before = -1;
	CHECK(xtc_proc_spawn(l, ae_body_parked, NULL, NULL, &ae_victim) ==
	      XTC_OK);
	CHECK(xtc_proc_spawn(l, ae_watcher, NULL, NULL, NULL) == XTC_OK);
	CHECK(xtc_loop_run(l) == XTC_OK);
	ae_log[ae_n] = 0;
	CHECK(strcmp(ae_log, "Kk") == 0);
	CHECK(ae_down_seen_before == 2);

	/* a proc still parked when its loop is finalised */
	ae_n = 0;
	CHECK(xtc_proc_spawn(l, ae_body_parked, NULL, NULL, NULL) == XTC_OK);
	CHECK(xtc_proc_spawn(l, fini_stopper, l, NULL, NULL) == XTC_OK);
	CHECK(xtc_loop_run(l) == XTC_OK); /* returns by the stop */
	CHECK(ae_n == 0);
	CHECK(xtc_loop_fini(l) == XTC_OK);
	ae_log[ae_n] = 0;
	CHECK(strcmp(ae_log, "Kk") == 0);
}

int main(void)
{
	test_tab_recycle();
	test_exit_hook();
	test_off_proc();
	test_identity();
	test_classes();
	test_sleep();
	test_wait_fd();
	test_wait_fd_shared();
	test_wake_pthread();
	test_info();
	test_monitors();
	test_links();
	test_decode();
	test_spawn_cap();
	test_fini_live();
	test_context();
	test_after_fini();
	test_at_exit();
	if (failures) {
		fprintf(stderr, "test_proc: %d failure(s)\n", failures);
		return 1;
	}
	printf("test_proc: ok\n");
	return 0;
}
