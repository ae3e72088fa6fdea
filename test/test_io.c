/* test_io.c - io_uring backend specifics: many fds, one-shot interest,
 * disarm of submitted polls (the cancelled completion recycles the
 * request), two interests on one fd, bounded request records, and the
 * eventfd doorbell from another thread. Exits 77 (skipped) when the process
 * runs on the epoll fallback (io_uring refused, or XTC_IO_BACKEND=epoll);
 * test_loop covers the common behaviour on both backends. */
#include <pthread.h>
#include <sys/resource.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "xtc.h"
#include "loop_int.h"
#include "loop_io_int.h"

#include "test_util.h"

/* 400 arms + 200 removals + 200 cancelled adds per round: more completions
 * than the CQ ring (512) holds, so the overflow path runs too. */
enum { NFD = 400 };

struct rec { int calls; uint32_t rev; };
static void cb(void *arg, uint32_t rev)
{
	struct rec *r = arg;

	r->calls++;
	r->rev |= rev;
}

static int count_reqs(struct xtc_io *io)
{
	int n = 0;

	for (xtc__io_req_t *r = io->req_all; r != NULL; r = r->all_next)
		n++;
	return n;
}

static void poll_until(xtc_loop_t *l, int *cond_a, int want, int rounds)
{
	for (int i = 0; i < rounds && *cond_a < want; i++)
		xtc__io_poll(l, 2000000);
}

static int total_calls;
static void cb_count(void *arg, uint32_t rev)
{
	(void)arg;
	(void)rev;
	total_calls++;
}

static void test_many_fds(void)
{
	xtc_loop_t *l;
	int p[NFD][2];
	xtc__io_req_t *q[NFD];
	char c = 'x', buf[8];

	REQUIRE(xtc_loop_init(&l) == 0);
	CHECK(xtc__loop_enter(l) == 0);
	for (int i = 0; i < NFD; i++)
		CHECK(pipe(p[i]) == 0);
	for (int round = 0; round < 20; round++) {
		total_calls = 0;
		for (int i = 0; i < NFD; i++)
			CHECK(xtc__io_arm(l, p[i][0], XTC_IO_READABLE, cb_count,
			                  NULL, &q[i]) == 0);
		/* Submit, then disarm the odd half while in the kernel. */
		xtc__io_poll(l, 0);
		for (int i = 1; i < NFD; i += 2)
			xtc__io_disarm(l, q[i]);
		for (int i = 0; i < NFD; i++)
			CHECK(write(p[i][1], &c, 1) == 1);
		poll_until(l, &total_calls, NFD / 2, 50);
		xtc__io_poll(l, 1000000);
		CHECK(total_calls == NFD / 2);
		CHECK(l->io->armed == 0);
		for (int i = 0; i < NFD; i++)
			CHECK(read(p[i][0], buf, sizeof(buf)) == 1);
	}
	/* Records are recycled: bounded by the peak of live requests plus
	 * cancelled ones in flight, not by the number of rounds. */
	CHECK(count_reqs(l->io) <= 2 * NFD);
	for (int i = 0; i < NFD; i++) {
		close(p[i][0]);
		close(p[i][1]);
	}
	xtc__loop_leave(l);
	CHECK(xtc_loop_fini(l) == 0);
}

static void test_same_fd_twice(void)
{
	xtc_loop_t *l;
	int p[2];
	struct rec a = { 0 }, b = { 0 }, w = { 0 };
	xtc__io_req_t *qa, *qb, *qw;
	char c = 'y';

	CHECK(pipe(p) == 0);
	REQUIRE(xtc_loop_init(&l) == 0);
	CHECK(xtc__loop_enter(l) == 0);
	CHECK(xtc__io_arm(l, p[0], XTC_IO_READABLE, cb, &a, &qa) == 0);
	CHECK(xtc__io_arm(l, p[0], XTC_IO_READABLE, cb, &b, &qb) == 0);
	CHECK(xtc__io_arm(l, p[1], XTC_IO_WRITABLE, cb, &w, &qw) == 0);
	CHECK(write(p[1], &c, 1) == 1);
	for (int i = 0; i < 20 && (a.calls == 0 || b.calls == 0 || w.calls == 0); i++)
		xtc__io_poll(l, 2000000);
	CHECK(a.calls == 1 && b.calls == 1 && w.calls == 1);
	CHECK((a.rev & XTC_IO_READABLE) && (w.rev & XTC_IO_WRITABLE));
	/* A bad fd is refused at arm time, as on epoll. */
	{
		struct rec e = { 0 };
		xtc__io_req_t *qe;
		CHECK(xtc__io_arm(l, 1000000, XTC_IO_READABLE, cb, &e, &qe) ==
		      XTC_E_INVAL);
		CHECK(e.calls == 0);
	}
	xtc__loop_leave(l);
	CHECK(xtc_loop_fini(l) == 0);
	close(p[0]);
	close(p[1]);
}

static void *poke(void *a)
{
	xtc_sleep_ns(2000000);
	xtc_loop_wake(a);
	return NULL;
}

static void test_doorbell(void)
{
	xtc_loop_t *l;
	pthread_t th;
	int64_t t0;
	int n = 0;

	REQUIRE(xtc_loop_init(&l) == 0);
	CHECK(xtc__loop_enter(l) == 0);
	for (int round = 0; round < 3; round++) {
		pthread_create(&th, NULL, poke, l);
		t0 = xtc_clock_mono();
		n = xtc__io_poll(l, 2000000000LL); /* returns on the wakeup */
		CHECK(n >= 1);
		CHECK(xtc_clock_mono() - t0 < 1000000000LL);
		pthread_join(th, NULL);
	}
	xtc__loop_leave(l);
	CHECK(xtc_loop_fini(l) == 0);
}

int main(void)
{
	struct rlimit rl;

	/* 2 * NFD pipe ends: lift the soft fd limit to the hard one. */
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	if (strcmp(xtc_io_backend_name(), "uring") != 0) {
		printf("test_io: skipped (backend %s)\n", xtc_io_backend_name());
		return 77;
	}
	test_many_fds();
	test_same_fd_twice();
	test_doorbell();
	if (failures) {
		fprintf(stderr, "test_io: %d failure(s)\n", failures);
		return 1;
	}
	printf("test_io: ok\n");
	return 0;
}
