/*
 * test_mailbox.c - bounded mailboxes: send/recv/recv_match, arrival order,
 * xtc_recv_correlate (partial timeout, others kept in order),
 * the cap (save queue included), drops, timeouts, the watermark, stats,
 * zero-size messages, undelivered messages freed at exit, cross-thread
 * senders with exact per-sender order, and every error path.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "xtc.h"

#include "test_util.h"

/* Next message as an int (messages of this test are ints), -1 if none. */
static int recv_int(int64_t timeout)
{
	void *b = NULL;
	size_t sz = 0;
	int v = -1;
	if (xtc_recv(&b, &sz, timeout) != XTC_OK)
		return -1;
	if (sz == sizeof v)
		memcpy(&v, b, sizeof v);
	xtc_free(b);
	return v;
}

static int send_int(xtc_pid_t to, int v)
{
	return xtc_send(to, &v, sizeof v);
}

/* ---- error paths -------------------------------------------------------- */

struct errs {
	int rc_null_out, rc_poll, rc_timed, rc_match_null, rc_match_out;
	int64_t elapsed;
};

static void err_body(void *arg)
{
	struct errs *e = arg;
	void *b;
	e->rc_null_out = xtc_recv(NULL, NULL, 0);
	e->rc_poll = xtc_recv(&b, NULL, 0);
	int64_t t0 = xtc_clock_mono();
	e->rc_timed = xtc_recv(&b, NULL, 2 * MS);
	e->elapsed = xtc_clock_mono() - t0;
	e->rc_match_null = xtc_recv_match(NULL, NULL, &b, NULL, 0);
	e->rc_match_out = xtc_recv_match((xtc_match_fn)1, NULL, NULL, NULL, 0);
}

static void test_errors(void)
{
	xtc_loop_t *l = new_loop();
	xtc_mailbox_stats_t st;
	struct errs e;
	xtc_pid_t p, unknown = { 4242, 1, 1 }, badid = { 1, 0, 1 };
	void *b;

	CHECK(xtc_recv(&b, NULL, 0) == XTC_E_INVAL);   /* off a proc */
	CHECK(xtc_recv_match((xtc_match_fn)1, NULL, &b, NULL, 0) == XTC_E_INVAL);
	CHECK(xtc_send(XTC_PID_NONE, "x", 1) == XTC_E_INVAL);
	CHECK(xtc_send(unknown, "x", 1) == XTC_E_INVAL);
	CHECK(xtc_send(badid, "x", 1) == XTC_E_INVAL);
	CHECK(xtc_proc_mailbox_stats(XTC_PID_NONE, &st) == XTC_E_INVAL);
	CHECK(xtc_proc_mailbox_stats(unknown, &st) == XTC_E_INVAL);

	memset(&e, 0, sizeof e);
	CHECK(xtc_proc_spawn(l, err_body, &e, NULL, &p) == XTC_OK);
	CHECK(xtc_send(p, NULL, 1) == XTC_E_INVAL);
	CHECK(xtc_proc_mailbox_stats(p, NULL) == XTC_E_INVAL);
	p.gen++;
	CHECK(xtc_send(p, "x", 1) == XTC_E_INVAL);     /* wrong generation */
	run_fini(l);
	CHECK(e.rc_null_out == XTC_E_INVAL);
	CHECK(e.rc_poll == XTC_E_AGAIN);
	CHECK(e.rc_timed == XTC_E_AGAIN);
	CHECK(e.elapsed >= 2 * MS);
	CHECK(e.rc_match_null == XTC_E_INVAL);
	CHECK(e.rc_match_out == XTC_E_INVAL);
}

/* ---- order, sizes, zero-size -------------------------------------------- */

struct order {
	int n, got, in_order;
	int zero_ok;
};

static void order_body(void *arg)
{
	struct order *o = arg;
	void *b;
	size_t sz = 99;

	o->in_order = 1;
	for (int i = 0; i < o->n; i++) {
		int v = recv_int(-1);
		if (v != i)
			o->in_order = 0;
		o->got++;
	}
	o->zero_ok = xtc_recv(&b, &sz, -1) == XTC_OK && sz == 0 && b != NULL;
	xtc_free(b);
}

static void test_order(void)
{
	xtc_loop_t *l = new_loop();
	struct order o;
	xtc_pid_t p;

	memset(&o, 0, sizeof o);
	o.n = 1000;
	CHECK(xtc_proc_spawn(l, order_body, &o, NULL, &p) == XTC_OK);
	/* sent from the main thread before the loop runs */
	for (int i = 0; i < o.n; i++)
		CHECK(send_int(p, i) == XTC_OK);
	CHECK(xtc_send(p, NULL, 0) == XTC_OK);
	run_fini(l);
	CHECK(o.got == o.n && o.in_order);
	CHECK(o.zero_ok);
}

/* ---- cap, drops, stats -------------------------------------------------- */

struct capctx {
	xtc_pid_t self;
	int ok;
};

static void cap_body(void *arg)
{
	struct capctx *c = arg;
	xtc_mailbox_stats_t st;
	int ok = 1;

	c->self = xtc_self();
	for (int i = 0; i < 4; i++)
		ok &= send_int(c->self, i) == XTC_OK;
	ok &= send_int(c->self, 4) == XTC_E_AGAIN;
	ok &= send_int(c->self, 5) == XTC_E_AGAIN;
	ok &= xtc_proc_mailbox_stats(c->self, &st) == XTC_OK;
	ok &= st.depth == 4 && st.cap == 4 && st.peak == 4 &&
	      st.drop_total == 2 && st.recv_total == 0 && st.saved == 0;
	ok &= recv_int(0) == 0;
	ok &= send_int(c->self, 6) == XTC_OK;
	ok &= recv_int(0) == 1 && recv_int(0) == 2 && recv_int(0) == 3 &&
	      recv_int(0) == 6 && recv_int(0) == -1;
	ok &= xtc_proc_mailbox_stats(c->self, &st) == XTC_OK;
	ok &= st.depth == 0 && st.recv_total == 5 && st.peak == 4;
	c->ok = ok;
}

static void test_cap(void)
{
	xtc_loop_t *l = new_loop();
	xtc_proc_opts_t o;
	struct capctx c;
	xtc_pid_t p;
	xtc_mailbox_stats_t st;

	memset(&c, 0, sizeof c);
	memset(&o, 0, sizeof o);
	o.mailbox_cap = 4;
	CHECK(xtc_proc_spawn(l, cap_body, &c, &o, NULL) == XTC_OK);
	run_fini(l);
	CHECK(c.ok);

	/* default cap */
	l = new_loop();
	CHECK(xtc_proc_spawn(l, cap_body, &c, NULL, &p) == XTC_OK);
	CHECK(xtc_proc_mailbox_stats(p, &st) == XTC_OK);
	CHECK(st.cap == XTC_MAILBOX_DEFAULT_CAP && st.depth == 0);
	CHECK(xtc_exit_pid(p, 0) == XTC_OK); /* never runs its body */
	run_fini(l);
	o.mailbox_cap = (size_t)1 << 40;
	l = new_loop();
	CHECK(xtc_proc_spawn(l, cap_body, &c, &o, NULL) == XTC_E_INVAL);
	CHECK(xtc_loop_fini(l) == XTC_OK);
}

/* ---- recv_match and the save queue -------------------------------------- */

static int match_even(const void *d, size_t n, void *u)
{
	int v;
	(void)u;
	if (n != sizeof v)
		return 0;
	memcpy(&v, d, sizeof v);
	return v % 2 == 0;
}

static int match_val(const void *d, size_t n, void *u)
{
	int v;
	if (n != sizeof v)
		return 0;
	memcpy(&v, d, sizeof v);
	return v == *(int *)u;
}

static int nested_rc;
static int match_nested(const void *d, size_t n, void *u)
{
	void *b;
	(void)d; (void)n; (void)u;
	nested_rc = xtc_recv(&b, NULL, 0);
	if (xtc_demonitor(12345) != XTC_E_INVAL)
		nested_rc = 1;
	return 1;
}

struct matchctx {
	int ok_basic, ok_order, ok_cap, ok_timeout, ok_wake, ok_nested;
	xtc_pid_t self;
};

static int take_match(xtc_match_fn f, void *u, int64_t timeout)
{
	void *b = NULL;
	size_t sz;
	int v = -1;
	if (xtc_recv_match(f, u, &b, &sz, timeout) != XTC_OK)
		return -1;
	memcpy(&v, b, sizeof v);
	xtc_free(b);
	return v;
}

static void match_body(void *arg)
{
	struct matchctx *c = arg;
	xtc_mailbox_stats_t st;
	xtc_pid_t me = xtc_self();
	int want;

	c->self = me;
	/* 1 3 5 2 4: the first even is 2; 1 3 5 wait in the save queue */
	send_int(me, 1); send_int(me, 3); send_int(me, 5);
	send_int(me, 2); send_int(me, 4);
	c->ok_basic = take_match(match_even, NULL, 0) == 2;
	CHECK(xtc_proc_mailbox_stats(me, &st) == XTC_OK);
	c->ok_basic = c->ok_basic && st.depth == 4 && st.saved >= 3;
	/* plain recv keeps arrival order across save and in */
	send_int(me, 6);
	c->ok_order = recv_int(0) == 1 && recv_int(0) == 3 &&
	              recv_int(0) == 5 && recv_int(0) == 4 &&
	              recv_int(0) == 6 && recv_int(0) == -1;
	/* the cap (5) counts the save queue: 11 13 saved + 15 17 19 = full */
	send_int(me, 11); send_int(me, 13); send_int(me, 14);
	c->ok_cap = take_match(match_even, NULL, 0) == 14;
	c->ok_cap = c->ok_cap && send_int(me, 15) == XTC_OK &&
	            send_int(me, 17) == XTC_OK && send_int(me, 19) == XTC_OK &&
	            send_int(me, 16) == XTC_E_AGAIN;
	CHECK(xtc_proc_mailbox_stats(me, &st) == XTC_OK);
	c->ok_cap = c->ok_cap && st.depth == 5 && st.saved == 2 &&
	            st.drop_total == 1;
	/* no match: timeout, and nothing is lost */
	want = 99;
	int64_t t0 = xtc_clock_mono();
	c->ok_timeout = take_match(match_val, &want, 2 * MS) == -1 &&
	                xtc_clock_mono() - t0 >= 2 * MS;
	c->ok_timeout = c->ok_timeout && recv_int(0) == 11 &&
	                recv_int(0) == 13 && recv_int(0) == 15 &&
	                recv_int(0) == 17 && recv_int(0) == 19;
	/* a match that arrives while parked (sent by the helper proc) */
	want = 42;
	c->ok_wake = take_match(match_val, &want, 5000 * MS) == 42 &&
	             recv_int(0) == 41;
	/* receive from inside a predicate is refused */
	send_int(me, 1);
	nested_rc = 0;
	c->ok_nested = take_match(match_nested, NULL, 0) == 1 &&
	               nested_rc == XTC_E_INVAL;
}

static void match_helper(void *arg)
{
	struct matchctx *c = arg;
	CHECK(xtc_proc_sleep(30 * MS) == XTC_OK);
	CHECK(send_int(c->self, 41) == XTC_OK);
	CHECK(xtc_proc_sleep(2 * MS) == XTC_OK);
	CHECK(send_int(c->self, 42) == XTC_OK);
}

static void test_match(void)
{
	xtc_loop_t *l = new_loop();
	xtc_proc_opts_t o;
	struct matchctx c;

	memset(&c, 0, sizeof c);
	memset(&o, 0, sizeof o);
	o.mailbox_cap = 5;
	CHECK(xtc_proc_spawn(l, match_body, &c, &o, NULL) == XTC_OK);
	CHECK(xtc_proc_spawn(l, match_helper, &c, NULL, NULL) == XTC_OK);
	run_fini(l);
	CHECK(c.ok_basic);
	CHECK(c.ok_order);
	CHECK(c.ok_cap);
	CHECK(c.ok_timeout);
	CHECK(c.ok_wake);
	CHECK(c.ok_nested);
}

/* ---- recv_correlate ----------------------------------------------------- */

/* Messages are {int corr; int val}. */
static int send_pair(xtc_pid_t to, int corr, int val)
{
	int m[2] = { corr, val };
	return xtc_send(to, m, sizeof m);
}

static int pair_val(const xtc_msg_t *m)
{
	int v[2];
	if (m->size != sizeof v)
		return -1;
	memcpy(v, m->data, sizeof v);
	return v[1];
}

static void free_msgs(xtc_msg_t *m, int n)
{
	for (int i = 0; i < n; i++)
		xtc_free(m[i].data);
}

struct corr {
	int e_out_n, e_out_msgs, e_n0, e_nneg, e_nullv, n_after_err;
	int ok_all, ok_rest, ok_partial, ok_wake, ok_zero, ok_short, ok_pred;
	xtc_pid_t self;
};

static int corr_nested_rc;
static int corr_nested(const void *d, size_t n, void *u)
{
	xtc_msg_t m[1];
	int k = 5;
	(void)d; (void)n; (void)u;
	corr_nested_rc = xtc_recv_correlate(NULL, 0, 1, m, &k, 0);
	return 1;
}

static void corr_body(void *arg)
{
	struct corr *c = arg;
	xtc_pid_t me = xtc_self();
	xtc_mailbox_stats_t st;
	xtc_msg_t m[8];
	int key = 7, other = 8, n = 99, v = 0;

	c->self = me;
	c->e_out_n = xtc_recv_correlate(&key, sizeof key, 1, m, NULL, 0);
	c->e_out_msgs = xtc_recv_correlate(&key, sizeof key, 1, NULL, &n, 0);
	c->n_after_err = n;
	c->e_n0 = xtc_recv_correlate(&key, sizeof key, 0, m, &n, 0);
	c->e_nneg = xtc_recv_correlate(&key, sizeof key, -3, m, &n, 0);
	c->e_nullv = xtc_recv_correlate(NULL, sizeof key, 1, m, &n, 0);

	/* 8/100 7/1 8/101 7/2 7/3 8/102: take the three 7s, in order */
	send_pair(me, 8, 100); send_pair(me, 7, 1); send_pair(me, 8, 101);
	send_pair(me, 7, 2); send_pair(me, 7, 3); send_pair(me, 8, 102);
	n = -1;
	c->ok_all = xtc_recv_correlate(&key, sizeof key, 3, m, &n, 0) ==
	            XTC_OK && n == 3 && pair_val(&m[0]) == 1 &&
	            pair_val(&m[1]) == 2 && pair_val(&m[2]) == 3;
	free_msgs(m, n > 0 ? n : 0);
	CHECK(xtc_proc_mailbox_stats(me, &st) == XTC_OK);
	c->ok_all = c->ok_all && st.depth == 3 && st.saved == 3;
	/* the non-matching ones, then a newer one, by plain recv in order */
	send_pair(me, 9, 103);
	for (int i = 0; i < 4; i++) {
		void *b = NULL;
		size_t sz = 0;
		int pv[2] = { -1, -1 };
		if (xtc_recv(&b, &sz, 0) == XTC_OK && sz == sizeof pv)
			memcpy(pv, b, sizeof pv);
		xtc_free(b);
		v += pv[1] == 100 + i;
	}
	c->ok_rest = v == 4 && recv_int(0) == -1;

	/* partial: 2 of 4 present, timeout, caller owns the two */
	send_pair(me, 7, 10); send_pair(me, 8, 200); send_pair(me, 7, 11);
	n = -1;
	int64_t t0 = xtc_clock_mono();
	int rc = xtc_recv_correlate(&key, sizeof key, 4, m, &n, 2 * MS);
	c->ok_partial = rc == XTC_E_AGAIN && n == 2 &&
	                xtc_clock_mono() - t0 >= 2 * MS &&
	                pair_val(&m[0]) == 10 && pair_val(&m[1]) == 11;
	free_msgs(m, n > 0 ? n : 0);
	/* poll with nothing matching: AGAIN, 0, the 8 still queued */
	n = -1;
	rc = xtc_recv_correlate(&key, sizeof key, 1, m, &n, 0);
	c->ok_partial = c->ok_partial && rc == XTC_E_AGAIN && n == 0;
	n = -1;
	rc = xtc_recv_correlate(&other, sizeof other, 1, m, &n, 0);
	c->ok_partial = c->ok_partial && rc == XTC_OK && n == 1 &&
	                pair_val(&m[0]) == 200;
	free_msgs(m, n > 0 ? n : 0);

	/* matches arriving while parked (helper: 7/41, 8/42, 7/43) */
	n = -1;
	rc = xtc_recv_correlate(&key, sizeof key, 2, m, &n, 5000 * MS);
	c->ok_wake = rc == XTC_OK && n == 2 && pair_val(&m[0]) == 41 &&
	             pair_val(&m[1]) == 43;
	free_msgs(m, n > 0 ? n : 0);
	n = -1;
	rc = xtc_recv_correlate(&other, sizeof other, 1, m, &n, 0);
	c->ok_wake = c->ok_wake && rc == XTC_OK && n == 1 &&
	             pair_val(&m[0]) == 42;
	free_msgs(m, n > 0 ? n : 0);

	/* corr_size 0 matches anything (NULL value allowed), in order */
	send_pair(me, 1, 50); send_pair(me, 2, 51);
	n = -1;
	rc = xtc_recv_correlate(NULL, 0, 2, m, &n, 0);
	c->ok_zero = rc == XTC_OK && n == 2 && pair_val(&m[0]) == 50 &&
	             pair_val(&m[1]) == 51;
	free_msgs(m, n > 0 ? n : 0);

	/* a message shorter than corr_size never matches and stays */
	CHECK(xtc_send(me, "\x07", 1) == XTC_OK);
	n = -1;
	rc = xtc_recv_correlate(&key, sizeof key, 1, m, &n, 0);
	c->ok_short = rc == XTC_E_AGAIN && n == 0;
	{
		void *b = NULL;
		size_t sz = 0;
		c->ok_short = c->ok_short && xtc_recv(&b, &sz, 0) == XTC_OK &&
		              sz == 1;
		xtc_free(b);
	}

	/* refused from inside a recv_match predicate */
	send_int(me, 1);
	corr_nested_rc = 0;
	c->ok_pred = take_match(corr_nested, NULL, 0) == 1 &&
	             corr_nested_rc == XTC_E_INVAL;
}

static void corr_helper(void *arg)
{
	struct corr *c = arg;
	while (xtc_pid_is_none(c->self))
		CHECK(xtc_proc_sleep(1 * MS) == XTC_OK);
	CHECK(xtc_proc_sleep(20 * MS) == XTC_OK);
	CHECK(send_pair(c->self, 7, 41) == XTC_OK);
	CHECK(xtc_proc_sleep(2 * MS) == XTC_OK);
	CHECK(send_pair(c->self, 8, 42) == XTC_OK);
	CHECK(xtc_proc_sleep(2 * MS) == XTC_OK);
	CHECK(send_pair(c->self, 7, 43) == XTC_OK);
}

static void test_correlate(void)
{
	xtc_loop_t *l = new_loop();
	struct corr c;
	xtc_msg_t m[1];
	int key = 7, n = 5;

	/* off a proc: INVAL, *out_n zeroed */
	CHECK(xtc_recv_correlate(&key, sizeof key, 1, m, &n, 0) ==
	      XTC_E_INVAL);
	CHECK(n == 0);
	CHECK(xtc_recv_correlate(&key, sizeof key, 1, m, NULL, 0) ==
	      XTC_E_INVAL);
	memset(&c, 0, sizeof c);
	CHECK(xtc_proc_spawn(l, corr_body, &c, NULL, NULL) == XTC_OK);
	CHECK(xtc_proc_spawn(l, corr_helper, &c, NULL, NULL) == XTC_OK);
	run_fini(l);
	CHECK(c.e_out_n == XTC_E_INVAL);
	CHECK(c.e_out_msgs == XTC_E_INVAL);
	CHECK(c.n_after_err == 0);
	CHECK(c.e_n0 == XTC_E_INVAL);
	CHECK(c.e_nneg == XTC_E_INVAL);
	CHECK(c.e_nullv == XTC_E_INVAL);
	CHECK(c.ok_all);
	CHECK(c.ok_rest);
	CHECK(c.ok_partial);
	CHECK(c.ok_wake);
	CHECK(c.ok_zero);
	CHECK(c.ok_short);
	CHECK(c.ok_pred);
}

/* ---- watermark ---------------------------------------------------------- */

struct wm {
	int fired;
	size_t depth, cap;
	xtc_pid_t who;
	pthread_t thread;
};

static void wm_cb(xtc_pid_t self, size_t depth, size_t cap, void *user)
{
	struct wm *w = user;
	w->fired++;
	w->depth = depth;
	w->cap = cap;
	w->who = self;
	w->thread = pthread_self();
}

static void wm_body(void *arg)
{
	struct wm *w = arg;
	/* drain to below the level: re-armed */
	for (int i = 0; i < 6; i++)
		CHECK(recv_int(0) == i);
	CHECK(w->fired == 1);
	for (int i = 0; i < 5; i++)
		CHECK(send_int(xtc_self(), 100 + i) == XTC_OK);
	CHECK(w->fired == 2 && w->depth == 5);
}

static void test_watermark(void)
{
	xtc_loop_t *l = new_loop();
	xtc_proc_opts_t o;
	struct wm w;
	xtc_pid_t p;

	memset(&w, 0, sizeof w);
	memset(&o, 0, sizeof o);
	o.mailbox_cap = 10;
	o.mailbox_watermark_pct = 50;
	o.mailbox_watermark_fn = wm_cb;
	o.mailbox_watermark_user = &w;
	CHECK(xtc_proc_spawn(l, wm_body, &w, &o, &p) == XTC_OK);
	for (int i = 0; i < 4; i++)
		CHECK(send_int(p, i) == XTC_OK);
	CHECK(w.fired == 0);
	CHECK(send_int(p, 4) == XTC_OK);
	CHECK(w.fired == 1 && w.depth == 5 && w.cap == 10);
	CHECK(xtc_pid_eq(w.who, p));
	CHECK(pthread_equal(w.thread, pthread_self()));
	CHECK(send_int(p, 5) == XTC_OK);
	CHECK(w.fired == 1); /* once per crossing */
	run_fini(l);
	CHECK(w.fired == 2);
}

/* ---- undelivered messages are freed (ASan/LSan checks the leak) -------- */

static void quitter(void *arg)
{
	(void)arg;
	xtc_exit_self(1);
}

/* A message handed straight to a parked receiver that is killed before it
 * runs again: the teardown frees it (LSan), DOWN reports the kill. */
static void handoff_victim(void *arg)
{
	void *b;
	(void)arg;
	if (xtc_recv(&b, NULL, -1) == XTC_OK) {
		xtc_free(b);
		CHECK(!"the victim must not get its message");
	}
}

static int handoff_ok;

static void handoff_killer(void *arg)
{
	xtc_loop_t *l = arg;
	xtc_pid_t v;
	uint64_t ref;
	void *b;
	size_t sz;
	int reason = -1;
	xtc_mailbox_stats_t st;

	CHECK(xtc_proc_spawn_monitor(l, handoff_victim, NULL, NULL, &v, &ref) ==
	      XTC_OK);
	xtc_yield(); /* the victim parks in xtc_recv */
	CHECK(xtc_send(v, "payload", 7) == XTC_OK);
	CHECK(xtc_proc_mailbox_stats(v, &st) == XTC_OK && st.depth == 1);
	CHECK(xtc_exit_pid(v, 5) == XTC_OK);
	CHECK(xtc_recv(&b, &sz, 5000 * MS) == XTC_OK);
	handoff_ok = xtc_down_decode(b, sz, NULL, &reason) == XTC_OK &&
	             reason == 5;
	xtc_free(b);
}

static void test_undelivered(void)
{
	xtc_loop_t *l = new_loop();
	xtc_pid_t p;
	char big[4096];

	memset(big, 7, sizeof big);
	CHECK(xtc_proc_spawn(l, quitter, NULL, NULL, &p) == XTC_OK);
	for (int i = 0; i < 10; i++)
		CHECK(xtc_send(p, big, sizeof big) == XTC_OK);
	run_fini(l);
	CHECK(xtc_send(p, big, 1) == XTC_E_INVAL);

	l = new_loop();
	CHECK(xtc_proc_spawn(l, handoff_killer, l, NULL, NULL) == XTC_OK);
	run_fini(l);
	CHECK(handoff_ok);
}

/* ---- cross-thread senders ----------------------------------------------- */

#define XT_SENDERS 3
#define XT_PER     20000

struct xt {
	xtc_pid_t rcv;
	atomic_int again;
	long got[XT_SENDERS];
	int in_order;
};

struct xt_sender {
	struct xt *x;
	int id;
};

static void *xt_send_thread(void *arg)
{
	struct xt_sender *s = arg;
	for (int i = 0; i < XT_PER; i++) {
		int v[2] = { s->id, i }, rc;
		while ((rc = xtc_send(s->x->rcv, v, sizeof v)) == XTC_E_AGAIN) {
			atomic_fetch_add(&s->x->again, 1);
			usleep(50);
		}
		CHECK(rc == XTC_OK);
	}
	return NULL;
}

static void xt_recv_body(void *arg)
{
	struct xt *x = arg;
	long total = 0;
	x->in_order = 1;
	while (total < (long)XT_SENDERS * XT_PER) {
		void *b;
		size_t sz;
		int v[2];
		if (xtc_recv(&b, &sz, 10000 * MS) != XTC_OK)
			break;
		CHECK(sz == sizeof v);
		memcpy(v, b, sizeof v);
		xtc_free(b);
		if (v[0] < 0 || v[0] >= XT_SENDERS || v[1] != x->got[v[0]])
			x->in_order = 0;
		else
			x->got[v[0]]++;
		total++;
	}
}

static void test_cross_thread(void)
{
	xtc_loop_t *l = new_loop();
	xtc_proc_opts_t o;
	struct xt x;
	struct xt_sender s[XT_SENDERS];
	pthread_t th[XT_SENDERS];

	memset(&x, 0, sizeof x);
	memset(&o, 0, sizeof o);
	o.mailbox_cap = 64; /* small: exercises XTC_E_AGAIN + retries */
	CHECK(xtc_proc_spawn(l, xt_recv_body, &x, &o, &x.rcv) == XTC_OK);
	for (int i = 0; i < XT_SENDERS; i++) {
		s[i].x = &x;
		s[i].id = i;
		REQUIRE(pthread_create(&th[i], NULL, xt_send_thread, &s[i]) == 0);
	}
	run_fini(l);
	for (int i = 0; i < XT_SENDERS; i++) {
		pthread_join(th[i], NULL);
		CHECK(x.got[i] == XT_PER);
	}
	CHECK(x.in_order);
}

/* Payload sizes straddling the small-message cache (<= 96 bytes) and the
 * inline copy widths, sent from two threads; the receiver checks every
 * byte, reallocs some buffers and hands others to a third thread to free:
 * xtc_free/xtc_realloc must accept cached blocks from any thread. */
static const size_t mix_sizes[] = { 0, 1, 7, 8, 9, 15, 16, 17, 31, 32, 33,
				    96, 97, 104, 200, 5000 };
#define MIX_N (sizeof(mix_sizes) / sizeof(mix_sizes[0]))
#define MIX_PER 5000

static xtc_pid_t mix_rx;
static atomic_int mix_ready, mix_done, mix_bad;
static void **mix_keep;
static long mix_nkeep;

static void mix_fill(unsigned char *b, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		b[i] = (unsigned char)(seed * 31 + i * 7);
	if (n >= 4)
		memcpy(b, &seed, 4);
}

static int mix_ok(const void *m, size_t n)
{
	unsigned char exp[5000];
	unsigned seed;

	if (n < 4)
		return 1;
	memcpy(&seed, m, 4);
	mix_fill(exp, n, seed);
	return memcmp(exp, m, n) == 0;
}

static void mix_receiver(void *arg)
{
	(void)arg;
	mix_rx = xtc_self();
	atomic_store(&mix_ready, 1);
	for (long k = 0;; k++) {
		void *m;
		size_t n;

		if (xtc_recv(&m, &n, k % 3 == 0 ? SEC : -1) != XTC_OK) {
			atomic_fetch_add(&mix_bad, 1);
			break;
		}
		if (n == 3 && memcmp(m, "END", 3) == 0) {
			xtc_free(m);
			break;
		}
		if (!mix_ok(m, n))
			atomic_fetch_add(&mix_bad, 1);
		if (k % 5 == 0) {
			void *r = xtc_realloc(m, 300);

			if (r == NULL) {
				atomic_fetch_add(&mix_bad, 1);
				xtc_free(m);
				continue;
			}
			m = r;
			memset(m, 1, 300);
		}
		if (k % 2)
			mix_keep[mix_nkeep++] = m;
		else
			xtc_free(m);
	}
	atomic_store(&mix_done, 1);
}

static void *mix_sender(void *arg)
{
	long id = (long)arg;
	unsigned char b[5000];

	while (!atomic_load(&mix_ready))
		usleep(100);
	for (unsigned i = 0; i < MIX_PER; i++) {
		size_t n = mix_sizes[(i + id) % MIX_N];

		mix_fill(b, n, i * 2 + (unsigned)id);
		while (xtc_send(mix_rx, b, n) == XTC_E_AGAIN)
			usleep(10);
	}
	return NULL;
}

static void *mix_free_thread(void *arg)
{
	(void)arg;
	for (long i = 0; i < mix_nkeep; i++)
		xtc_free(mix_keep[i]);
	return NULL;
}

static void *mix_loop_thread(void *arg)
{
	CHECK_EQ(xtc_loop_run(arg), XTC_OK);
	return NULL;
}

static void test_sizes_cross_thread_free(void)
{
	xtc_loop_t *l;
	pthread_t th[2], lt, ft;

	mix_keep = calloc(2 * MIX_PER, sizeof(*mix_keep));
	CHECK(mix_keep != NULL);
	CHECK_EQ(xtc_loop_init(&l), XTC_OK);
	CHECK_EQ(xtc_proc_spawn(l, mix_receiver, NULL, NULL, NULL), XTC_OK);
	CHECK_EQ(pthread_create(&lt, NULL, mix_loop_thread, l), 0);
	for (long i = 0; i < 2; i++)
		CHECK_EQ(pthread_create(&th[i], NULL, mix_sender, (void *)i), 0);
	for (int i = 0; i < 2; i++)
		pthread_join(th[i], NULL);
	while (xtc_send(mix_rx, "END", 3) == XTC_E_AGAIN)
		usleep(10);
	pthread_join(lt, NULL);
	CHECK(atomic_load(&mix_done));
	CHECK_EQ(atomic_load(&mix_bad), 0);
	CHECK_EQ(pthread_create(&ft, NULL, mix_free_thread, NULL), 0);
	pthread_join(ft, NULL);
	CHECK_EQ(xtc_loop_fini(l), XTC_OK);
	free(mix_keep);
}

/* A proc parked in an untimed recv (the lock-parked path) is woken by
 * foreign-thread wakes and sends, and a foreign-thread kill ends it: the
 * loop run only returns if the kill reached it. */
static void lp_victim(void *arg)
{
	xtc_pid_t *me = arg;
	void *m;

	*me = xtc_self();
	for (;;)
		if (xtc_recv(&m, NULL, -1) == XTC_OK)
			xtc_free(m);
}

static void test_lock_parked_kill(void)
{
	xtc_loop_t *l;
	pthread_t lt;
	xtc_pid_t v = XTC_PID_NONE;

	CHECK_EQ(xtc_loop_init(&l), XTC_OK);
	CHECK_EQ(xtc_proc_spawn(l, lp_victim, &v, NULL, NULL), XTC_OK);
	CHECK_EQ(pthread_create(&lt, NULL, mix_loop_thread, l), 0);
	while (xtc_pid_is_none(*(volatile xtc_pid_t *)&v))
		usleep(100);
	usleep(20000);
	for (int i = 0; i < 100; i++) {
		CHECK_EQ(xtc_proc_wake(v), XTC_OK);
		CHECK_EQ(xtc_send(v, "x", 1), XTC_OK);
	}
	usleep(20000);
	CHECK_EQ(xtc_exit_pid(v, 7), XTC_OK);
	pthread_join(lt, NULL);
	CHECK_EQ(xtc_loop_fini(l), XTC_OK);
}

int main(void)
{
	test_errors();
	test_order();
	test_cap();
	test_match();
	test_correlate();
	test_watermark();
	test_undelivered();
	test_cross_thread();
	test_sizes_cross_thread_free();
	test_lock_parked_kill();
	if (failures) {
		fprintf(stderr, "test_mailbox: %d failure(s)\n", failures);
		return 1;
	}
	printf("test_mailbox: ok\n");
	return 0;
}
