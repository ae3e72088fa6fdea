/*
 * bench_xloop.c - cross-loop mailbox handoff against the machine's
 * cross-core floor.
 *
 * Prints `name value unit` lines:
 *   xloop_rt_p50/_min/_max   one round trip (xtc_send of 16 bytes + xtc_recv
 *                            each way) between a proc on loop 0 and a proc
 *                            on loop 1 of a 2-loop executor (ns), the
 *                            median/min/max over the rounds; the same
 *                            workload as cmd/xtcbench's crossloop micro
 *   xloop_floor_p50          two threads ping-ponging one atomic word, the
 *                            least any cross-core round trip pays (ns)
 *   xloop_ratio              rt_p50 / floor_p50
 * Arguments: [round trips per round] [rounds] [spin ns] (default
 * 200000 x 7, spin 0). A spin (xtc_exec_set_spin) keeps the carriers from
 * parking between messages: with the adaptive spin alone, a run can fall
 * into a mode where every message pays a futex wake (a few us), and the
 * rounds are then bimodal; the spin isolates the handoff itself.
 * XTC_BENCH_QUICK=1 shrinks the counts.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "xtc.h"

#include "bench_util.h"
#include "xtc_exec.h"

typedef struct {
	xtc_pid_t from;
	int64_t seq;
} msg_t;

typedef struct {
	int64_t n, t0, t1;
	xtc_pid_t peer;
	int err;
} ctx_t;

static void server(void *arg)
{
	ctx_t *c = arg;

	for (int64_t i = 0; i < c->n; i++) {
		void *m = NULL;
		size_t sz = 0;
		int rc = xtc_recv(&m, &sz, -1);
		if (rc != 0 || sz != sizeof(msg_t)) {
			c->err = rc ? rc : -1;
			return;
		}
		msg_t r = *(msg_t *)m;
		xtc_pid_t to = r.from;
		xtc_free(m);
		r.from = xtc_self();
		if ((rc = xtc_send(to, &r, sizeof r)) != 0) {
			c->err = rc;
			return;
		}
	}
}

static void client(void *arg)
{
	ctx_t *c = arg;
	msg_t m = { .from = xtc_self(), .seq = 0 };

	c->t0 = xtc_clock_mono();
	for (int64_t i = 0; i < c->n; i++) {
		void *r = NULL;
		size_t sz = 0;
		int rc;
		m.seq = i;
		if ((rc = xtc_send(c->peer, &m, sizeof m)) != 0 ||
		    (rc = xtc_recv(&r, &sz, -1)) != 0) {
			c->err = rc;
			return;
		}
		xtc_free(r);
	}
	c->t1 = xtc_clock_mono();
}

static int64_t spin_ns;

static double xloop_round(int64_t n)
{
	xtc_exec_t *ex = NULL;
	ctx_t c, s;

	memset(&c, 0, sizeof c);
	memset(&s, 0, sizeof s);
	c.n = s.n = n;
	if (xtc_exec_init(&ex, 2) != 0 ||
	    (spin_ns > 0 && xtc_exec_set_spin(ex, spin_ns) != 0) ||
	    xtc_proc_spawn(xtc_exec_loop(ex, 1), server, &s, NULL, &c.peer) ||
	    xtc_proc_spawn(xtc_exec_loop(ex, 0), client, &c, NULL, NULL) ||
	    xtc_exec_run(ex) != 0 || c.err || s.err) {
		fprintf(stderr, "bench_xloop: run failed (%d %d)\n", c.err,
		        s.err);
		exit(1);
	}
	xtc_exec_fini(ex);
	return (double)(c.t1 - c.t0) / (double)n;
}

/* ---- floor: one shared word, two spinning threads ---------------------- */

static _Alignas(64) _Atomic int64_t word;
static int64_t floor_n;

static void *floor_peer(void *arg)
{
	(void)arg;
	for (int64_t i = 0; i < floor_n; i++) {
		while (atomic_load_explicit(&word, memory_order_acquire) !=
		       2 * i + 1)
			;
		atomic_store_explicit(&word, 2 * i + 2, memory_order_release);
	}
	return NULL;
}

static double floor_round(int64_t n)
{
	pthread_t th;
	int64_t t0, t1;

	floor_n = n;
	atomic_store(&word, 0);
	pthread_create(&th, NULL, floor_peer, NULL);
	t0 = xtc_clock_mono();
	for (int64_t i = 0; i < n; i++) {
		atomic_store_explicit(&word, 2 * i + 1, memory_order_release);
		while (atomic_load_explicit(&word, memory_order_acquire) !=
		       2 * i + 2)
			;
	}
	t1 = xtc_clock_mono();
	pthread_join(th, NULL);
	return (double)(t1 - t0) / (double)n;
}

int main(int argc, char **argv)
{
	int quick = getenv("XTC_BENCH_QUICK") != NULL;
	int64_t n = argc > 1 ? atoll(argv[1]) : quick ? 20000 : 200000;
	int rounds = argc > 2 ? atoi(argv[2]) : quick ? 3 : 7;

	spin_ns = argc > 3 ? atoll(argv[3]) : 0;
	double *rt, *fl, p50, fp50;

	if (n < 1 || rounds < 1)
		return 2;
	rt = calloc((size_t)rounds, sizeof *rt);
	fl = calloc((size_t)rounds, sizeof *fl);
	xloop_round(n / 10 + 1); /* warm: stacks, message blocks, threads */
	for (int i = 0; i < rounds; i++) {
		/* interleaved, so both see the same machine state */
		fl[i] = floor_round(n);
		rt[i] = xloop_round(n);
	}
	p50 = bench_median(rt, rounds);
	fp50 = bench_median(fl, rounds);
	printf("xloop_rt_p50 %.0f ns\n", p50);
	printf("xloop_rt_min %.0f ns\n", rt[0]);
	printf("xloop_rt_max %.0f ns\n", rt[rounds - 1]);
	printf("xloop_floor_p50 %.0f ns\n", fp50);
	printf("xloop_ratio %.2f x\n", p50 / fp50);
	free(rt);
	free(fl);
	return 0;
}
