/*
 * test_sim.c - the deterministic simulator (XTC_SIM builds; 77 elsewhere):
 * exact share ratios under the frozen clock, identical replays of a seed,
 * a seed sweep over a mixed workload (cross-loop messages, sleeps, stealing,
 * wakes) that must pass the invariant checker with exact counts, a lost wake
 * reported as XTC_E_DEADLK, the step budget, the virtual clock, and the
 * checker catching a planted corruption, and eager rebalance's contract
 * (off: a loop that owns parked fibers does not steal; on: it does).
 *
 * SWEEP_SEEDS (default 500) sets the sweep size; test_sim_soak.c includes
 * this file with a larger one for the slow suite.
 */
#include <stdatomic.h>
#include <string.h>

#include "xtc.h"
#include "xtc_exec.h"
#include "xtc_sim.h"
#include "loop_int.h"
#include "test_util.h"

#ifndef SWEEP_SEEDS
#define SWEEP_SEEDS 500
#endif


/* ---- shares are exact under the simulator ------------------------------ */

struct shares_ctx {
	xtc_loop_t *loop;
	xtc_exec_class_t c[3];
	int nclasses;
	int budget;
};

static int shared_budget;

static void share_worker(void *a)
{
	(void)a;
	while (shared_budget-- > 0)
		xtc_yield();
}

static void spawner(void *a)
{
	struct shares_ctx *s = a;
	xtc_proc_opts_t o;

	memset(&o, 0, sizeof(o));
	for (int i = 0; i < s->nclasses; i++) {
		o.sched_class = s->c[i];
		for (int k = 0; k < 4; k++)
			CHECK_EQ(xtc_proc_spawn(s->loop, share_worker, NULL, &o,
			    NULL), XTC_OK);
	}
}

static void run_shares(const int *shares, int n, int budget, uint64_t seed,
                       uint64_t *runs, uint64_t *hash)
{
	xtc_exec_t *e;
	struct shares_ctx s;

	CHECK_EQ(xtc_exec_init(&e, 1), XTC_OK);
	memset(&s, 0, sizeof(s));
	s.loop = xtc_exec_loop(e, 0);
	s.nclasses = n;
	for (int i = 0; i < n; i++)
		CHECK_EQ(xtc_exec_class_create(s.loop, shares[i], 0, &s.c[i]),
		    XTC_OK);
	shared_budget = budget;
	CHECK_EQ(xtc_proc_spawn(s.loop, spawner, &s, NULL, NULL), XTC_OK);
	CHECK_EQ(xtc_sim_exec_run(e, seed, 2000000), XTC_OK);
	for (int i = 0; i < n; i++)
		runs[i] = xtc_exec_class_runs(s.c[i]);
	*hash = xtc_sim_state_hash(e);
	CHECK_EQ(xtc_sim_check(e), XTC_OK);
	CHECK_EQ(xtc_exec_fini(e), XTC_OK);
}

static void test_shares_exact(void)
{
	int two[2] = { 3, 1 }, three[3] = { 600, 300, 100 };
	uint64_t r[3], h;

	run_shares(two, 2, 1200, 1, r, &h);
	fprintf(stderr, "  3:1 -> %llu:%llu\n", (unsigned long long)r[0],
	    (unsigned long long)r[1]);
	/* each of the 4 workers per class runs once more to see the budget
	 * is gone; the rest is the split: exactly the share ratio, give or
	 * take the last pick of a round */
	CHECK(r[0] + r[1] == 1200 + 8);
	CHECK(llabs((long long)(r[0] - 4) - 3 * (long long)(r[1] - 4)) <= 3);

	run_shares(three, 3, 10000, 7, r, &h);
	fprintf(stderr, "  600:300:100 -> %llu:%llu:%llu\n",
	    (unsigned long long)r[0], (unsigned long long)r[1],
	    (unsigned long long)r[2]);
	CHECK(r[0] + r[1] + r[2] == 10000 + 12);
	CHECK(llabs((long long)(r[0] - 4) - 6 * (long long)(r[2] - 4)) <= 6);
	CHECK(llabs((long long)(r[1] - 4) - 3 * (long long)(r[2] - 4)) <= 3);
}

/* ---- mixed workload for replay and the sweep --------------------------- */

#define NPAIRS 3
#define ROUNDS 20

struct mix {
	xtc_exec_t *e;
	atomic_int pongs;
	atomic_int slept;
	atomic_int yields;
	atomic_int moves;
};

static struct mix mix;

struct pinger_arg {
	xtc_pid_t peer;
	int idx;
};

static void ponger(void *a)
{
	(void)a;
	for (int i = 0; i < ROUNDS; i++) {
		void *m;
		size_t sz;
		xtc_pid_t from;

		CHECK_EQ(xtc_recv(&m, &sz, -1), XTC_OK);
		CHECK_EQ(sz, sizeof(from));
		memcpy(&from, m, sizeof(from));
		xtc_free(m);
		CHECK_EQ(xtc_send(from, &i, sizeof(i)), XTC_OK);
	}
}

static void pinger(void *a)
{
	struct pinger_arg *p = a;
	xtc_pid_t me = xtc_self();

	for (int i = 0; i < ROUNDS; i++) {
		void *m;
		size_t sz;
		int v;

		CHECK_EQ(xtc_send(p->peer, &me, sizeof(me)), XTC_OK);
		CHECK_EQ(xtc_recv(&m, &sz, -1), XTC_OK);
		memcpy(&v, m, sizeof(v));
		xtc_free(m);
		CHECK_EQ(v, i);
		atomic_fetch_add(&mix.pongs, 1);
		if (i % 5 == 0)
			CHECK_EQ(xtc_proc_sleep(1000 * (p->idx + 1)), XTC_OK);
	}
}

static void sleeper(void *a)
{
	(void)a;
	for (int i = 0; i < 5; i++)
		CHECK_EQ(xtc_proc_sleep(SEC), XTC_OK);
	atomic_fetch_add(&mix.slept, 1);
}

static void yielder(void *a)
{
	int id = xtc_exec_loop_id();

	(void)a;
	for (int i = 0; i < 50; i++) {
		xtc_yield();
		atomic_fetch_add(&mix.yields, 1);
		if (xtc_exec_loop_id() != id) {
			atomic_fetch_add(&mix.moves, 1);
			id = xtc_exec_loop_id();
		}
	}
}

/* Migratable receivers parked with a timeout and woken early by a message:
 * they may be stolen while their park timer is still armed. */
#define NTR 3
#define TR_MSGS 15
static xtc_pid_t tr_pids[NTR];
static atomic_int tr_ready;

static void timed_receiver(void *a)
{
	int idx = (int)(intptr_t)a, got = 0;

	tr_pids[idx] = xtc_self();
	atomic_fetch_add(&tr_ready, 1);
	while (got < TR_MSGS) {
		void *m;
		size_t sz;
		if (xtc_recv(&m, &sz, 10 * SEC) == XTC_OK) {
			xtc_free(m);
			got++;
		}
	}
	atomic_fetch_add(&mix.slept, 1);
}

static void tr_sender(void *a)
{
	(void)a;
	while (atomic_load(&tr_ready) < NTR)
		xtc_yield();
	for (int r = 0; r < TR_MSGS; r++)
		for (int i = 0; i < NTR; i++) {
			CHECK_EQ(xtc_send(tr_pids[i], &r, sizeof(r)), XTC_OK);
			xtc_yield();
		}
}

static struct pinger_arg pargs[NPAIRS];

static int run_mix(uint64_t seed, uint64_t *hash)
{
	xtc_exec_t *e;
	xtc_proc_opts_t o;
	int rc, n = 3;

	memset(&mix, 0, sizeof(mix));
	CHECK_EQ(xtc_exec_init(&e, n), XTC_OK);
	/* every loop holds parked procs: only eager rebalance steals then
	 * (test_eager_rebalance), and the sweep is about migrations */
	xtc_exec_set_eager_rebalance(e, 1);
	mix.e = e;
	memset(&o, 0, sizeof(o));
	for (int i = 0; i < NPAIRS; i++) {
		xtc_pid_t pong;
		CHECK_EQ(xtc_proc_spawn(xtc_exec_loop(e, (i + 1) % n), ponger,
		    NULL, NULL, &pong), XTC_OK);
		pargs[i].peer = pong;
		pargs[i].idx = i;
		CHECK_EQ(xtc_proc_spawn(xtc_exec_loop(e, i % n), pinger,
		    &pargs[i], NULL, NULL), XTC_OK);
	}
	CHECK_EQ(xtc_proc_spawn(xtc_exec_loop(e, 2), sleeper, NULL, NULL, NULL),
	    XTC_OK);
	o.migratable = 1;
	for (int i = 0; i < 6; i++)
		CHECK_EQ(xtc_proc_spawn(xtc_exec_loop(e, 0), yielder, NULL, &o,
		    NULL), XTC_OK);
	atomic_store(&tr_ready, 0);
	for (int i = 0; i < NTR; i++)
		CHECK_EQ(xtc_proc_spawn(xtc_exec_loop(e, 1), timed_receiver,
		    (void *)(intptr_t)i, &o, NULL), XTC_OK);
	CHECK_EQ(xtc_proc_spawn(xtc_exec_loop(e, 1), tr_sender, NULL, NULL,
	    NULL), XTC_OK);
	rc = xtc_sim_exec_run(e, seed, 1000000);
	*hash = xtc_sim_state_hash(e);
	if (rc == XTC_OK) {
		CHECK_EQ(xtc_sim_check(e), XTC_OK);
		CHECK_EQ(atomic_load(&mix.pongs), NPAIRS * ROUNDS);
		CHECK_EQ(atomic_load(&mix.slept), 1 + NTR);
		CHECK_EQ(atomic_load(&mix.yields), 6 * 50);
	}
	CHECK_EQ(xtc_exec_fini(e), XTC_OK);
	return rc;
}

static void test_replay(void)
{
	uint64_t h1, h2, h3;
	long s1, s2;
	int moves1, differs = 0;

	CHECK_EQ(run_mix(42, &h1), XTC_OK);
	s1 = xtc_sim_steps();
	moves1 = atomic_load(&mix.moves);
	CHECK_EQ(run_mix(42, &h2), XTC_OK);
	s2 = xtc_sim_steps();
	CHECK(h1 == h2);
	CHECK_EQ(s1, s2);
	CHECK_EQ(atomic_load(&mix.moves), moves1);
	for (uint64_t seed = 43; seed < 53; seed++) {
		CHECK_EQ(run_mix(seed, &h3), XTC_OK);
		differs += h3 != h1;
	}
	CHECK(differs > 0); /* other seeds, other schedules */
}

static void test_sweep(void)
{
	uint64_t h;
	int ok = 0, moved = 0;

	for (uint64_t seed = 1000; seed < 1000 + SWEEP_SEEDS; seed++) {
		if (seed % 4 == 0)
			xtc_sim_sched_pessimal(900);
		int rc = run_mix(seed, &h);
		xtc_sim_sched_pessimal(0);
		if (rc != XTC_OK) {
			fprintf(stderr, "  seed %llu: %s\n",
			    (unsigned long long)seed, xtc_strerror(rc));
			failures++;
			break;
		}
		ok++;
		moved += atomic_load(&mix.moves) > 0;
	}
	fprintf(stderr, "  %d seeds ok, %d with migrations\n", ok, moved);
	CHECK_EQ(ok, SWEEP_SEEDS);
	CHECK(moved > 0);
}

/* ---- a lost wake is a deadlock ------------------------------------------ */

static int flag;
static xtc_task_t *waiter_task;

static void waiter(void *a)
{
	(void)a;
	waiter_task = xtc__task_current();
	while (!flag)
		xtc__task_park();
}

static void setter_forgets(void *a)
{
	(void)a;
	xtc_yield();
	flag = 1; /* ...and never wakes the waiter */
}

static void setter_wakes(void *a)
{
	(void)a;
	xtc_yield();
	flag = 1;
	xtc__task_wake(waiter_task);
}

static void test_lost_wake(void)
{
	xtc_exec_t *e;

	for (int variant = 0; variant < 2; variant++) {
		flag = 0;
		CHECK_EQ(xtc_exec_init(&e, 2), XTC_OK);
		CHECK_EQ(xtc_proc_spawn(xtc_exec_loop(e, 0), waiter, NULL, NULL,
		    NULL), XTC_OK);
		CHECK_EQ(xtc_proc_spawn(xtc_exec_loop(e, 0),
		    variant ? setter_wakes : setter_forgets, NULL, NULL, NULL),
		    XTC_OK);
		CHECK_EQ(xtc_sim_exec_run(e, 5, 100000),
		    variant ? XTC_OK : XTC_E_DEADLK);
		CHECK_EQ(flag, 1);
		CHECK_EQ(xtc_exec_fini(e), XTC_OK);
	}
}

/* ---- step budget, clock, checker ---------------------------------------- */

static atomic_int forever_stop;

static void forever(void *a)
{
	(void)a;
	while (!atomic_load(&forever_stop))
		xtc_yield();
}

static int64_t t_before, t_after;

static void long_sleeper(void *a)
{
	(void)a;
	t_before = xtc_clock_mono();
	CHECK_EQ(xtc_proc_sleep(3600 * SEC), XTC_OK);
	t_after = xtc_clock_mono();
}

static void test_budget_clock_check(void)
{
	xtc_exec_t *e;
	int64_t real0;

	CHECK_EQ(xtc_sim_exec_run(NULL, 1, 10), XTC_E_INVAL);
	CHECK_EQ(xtc_sim_check(NULL), XTC_E_INVAL);
	CHECK_EQ(xtc_sim_state_hash(NULL), 0);

	atomic_store(&forever_stop, 0);
	CHECK_EQ(xtc_exec_init(&e, 2), XTC_OK);
	CHECK_EQ(xtc_proc_spawn(xtc_exec_loop(e, 1), forever, NULL, NULL, NULL),
	    XTC_OK);
	CHECK_EQ(xtc_sim_exec_run(e, 3, 1000), XTC_E_AGAIN);
	CHECK_EQ(xtc_sim_steps(), 1000);
	CHECK_EQ(xtc_sim_check(e), XTC_OK);
	/* plant a corruption: the checker must see it */
	xtc_exec_loop(e, 1)->live_tasks = -1;
	CHECK_EQ(xtc_sim_check(e), XTC_E_INTERNAL);
	xtc_exec_loop(e, 1)->live_tasks = 1;
	CHECK_EQ(xtc_sim_check(e), XTC_OK);
	atomic_store(&forever_stop, 1);
	CHECK_EQ(xtc_sim_exec_run(e, 3, 0), XTC_OK);
	CHECK_EQ(xtc_exec_fini(e), XTC_OK);

	/* an hour of virtual sleep takes no real time */
	real0 = xtc_clock_mono();
	CHECK_EQ(xtc_exec_init(&e, 1), XTC_OK);
	CHECK_EQ(xtc_proc_spawn(xtc_exec_loop(e, 0), long_sleeper, NULL, NULL,
	    NULL), XTC_OK);
	CHECK_EQ(xtc_sim_exec_run(e, 9, 0), XTC_OK);
	CHECK(t_after - t_before >= 3600 * SEC);
	CHECK(xtc_clock_mono() - real0 < 30 * SEC);
	CHECK_EQ(xtc_exec_fini(e), XTC_OK);

	/* clock API */
	xtc_sim_clock_enable(100);
	CHECK_EQ(xtc_sim_clock_enabled(), 1);
	CHECK_EQ(xtc_sim_clock_now(), 100);
	CHECK_EQ(xtc_clock_mono(), 100);
	xtc_sim_clock_advance(50);
	CHECK_EQ(xtc_sim_clock_now(), 150);
	xtc_sim_clock_set(120); /* never backwards */
	CHECK_EQ(xtc_sim_clock_now(), 150);
	xtc_sim_clock_set(1000);
	CHECK_EQ(xtc_clock_mono(), 1000);
	xtc_sim_clock_disable();
	CHECK_EQ(xtc_sim_clock_enabled(), 0);
	CHECK(xtc_clock_mono() != 1000);

	/* streams are independent and seeded */
	xtc_sim_activate(77);
	uint64_t a1 = xtc_sim_rand(XTC_SIM_RNG_APP);
	(void)xtc_sim_rand(XTC_SIM_RNG_SCHED);
	uint64_t a2 = xtc_sim_rand(XTC_SIM_RNG_APP);
	xtc_sim_activate(77);
	CHECK(xtc_sim_rand(XTC_SIM_RNG_APP) == a1);
	CHECK(xtc_sim_rand(XTC_SIM_RNG_APP) == a2);
	/* a stream outside the enum draws nothing (and shifts no stream) */
	xtc_sim_activate(77);
	CHECK_EQ(xtc_sim_rand(-1), 0);
	CHECK_EQ(xtc_sim_rand(XTC_SIM_RNG_NSTREAMS), 0);
	CHECK(xtc_sim_rand(XTC_SIM_RNG_APP) == a1);
	xtc_sim_deactivate();
	CHECK_EQ(xtc_sim_rand(XTC_SIM_RNG_APP), 0);

	/* the virtual clock ignores negative steps */
	xtc_sim_clock_enable(500);
	xtc_sim_clock_advance(-5);
	xtc_sim_clock_set(-1);
	CHECK_EQ(xtc_sim_clock_now(), 500);
	xtc_sim_clock_disable();
	xtc_sim_clock_advance(10); /* disabled: no-op */
	CHECK_EQ(xtc_sim_clock_enabled(), 0);
}

/* A simulated run cannot start from inside a loop (it would nest two
 * schedulers on one thread). */
static int nested_rc = 1;

static int nested_run(xtc_task_t *self, void *arg)
{
	(void)self;
	nested_rc = xtc_sim_exec_run(arg, 1, 10);
	return 0;
}

static void test_nested_run(void)
{
	xtc_exec_t *e;
	xtc_loop_t *l;

	CHECK_EQ(xtc_exec_init(&e, 1), XTC_OK);
	CHECK_EQ(xtc_loop_init(&l), XTC_OK);
	CHECK_EQ(xtc_task_spawn(l, nested_run, e, NULL), XTC_OK);
	CHECK_EQ(xtc_loop_run(l), XTC_OK);
	CHECK_EQ(nested_rc, XTC_E_INVAL);
	CHECK_EQ(xtc_loop_fini(l), XTC_OK);
	CHECK_EQ(xtc_sim_exec_run(e, 1, 10), XTC_OK); /* idle: quiescent */
	CHECK_EQ(xtc_exec_fini(e), XTC_OK);
}

/* ---- eager rebalance (libxtc's contract) ------------------------------
 * Loop 1 owns one proc parked in a receive for the whole run; loop 0 holds
 * 16 migratable workers that yield. Off (the default), loop 1 never
 * steals: it owns a parked fiber. On, it steals workers. The last worker
 * releases the parked proc so the run ends quiescent. */
#define EG_WORKERS 16
static xtc_pid_t eg_holder;
static int eg_left;

static void eg_holder_body(void *a)
{
	void *m;

	(void)a;
	if (xtc_recv(&m, NULL, -1) == XTC_OK)
		xtc_free(m);
}

static void eg_worker(void *a)
{
	(void)a;
	for (int i = 0; i < 50; i++)
		xtc_yield();
	if (--eg_left == 0)
		CHECK_EQ(xtc_send(eg_holder, "x", 1), XTC_OK);
}

static uint64_t eg_run(int eager, uint64_t seed, uint64_t *hash)
{
	xtc_exec_t *e = NULL;
	xtc_proc_opts_t o;
	xtc_loop_stats_t st;
	uint64_t steals = 0;

	REQUIRE(xtc_exec_init(&e, 2) == XTC_OK);
	xtc_exec_set_eager_rebalance(e, eager);
	memset(&o, 0, sizeof o);
	REQUIRE(xtc_proc_spawn(xtc_exec_loop(e, 1), eg_holder_body, NULL, NULL,
	                       &eg_holder) == XTC_OK);
	o.migratable = 1;
	eg_left = EG_WORKERS;
	for (int i = 0; i < EG_WORKERS; i++)
		REQUIRE(xtc_proc_spawn(xtc_exec_loop(e, 0), eg_worker, NULL, &o,
		                       NULL) == XTC_OK);
	CHECK_EQ(xtc_sim_exec_run(e, seed, 1000000), XTC_OK);
	CHECK_EQ(eg_left, 0);
	for (int i = 0; i < 2; i++) {
		REQUIRE(xtc_exec_loop_stats(e, i, &st) == XTC_OK);
		steals += st.steals;
	}
	*hash = xtc_sim_state_hash(e);
	CHECK_EQ(xtc_exec_fini(e), XTC_OK);
	return steals;
}

static void test_eager_rebalance(void)
{
	uint64_t h_off, h_on, h2, off, on;

	off = eg_run(0, 4242, &h_off);
	on = eg_run(1, 4242, &h_on);
	fprintf(stderr, "  seed 4242: steals off %llu, on %llu\n",
	        (unsigned long long)off, (unsigned long long)on);
	CHECK_EQ(off, 0);
	CHECK(on > 0);
	CHECK(h_off != h_on);
	/* each replays */
	CHECK_EQ(eg_run(0, 4242, &h2), off);
	CHECK(h2 == h_off);
	CHECK_EQ(eg_run(1, 4242, &h2), on);
	CHECK(h2 == h_on);
}

int main(void)
{
	if (!xtc_sim_supported()) {
		xtc_exec_t *e;
		if (xtc_exec_init(&e, 1) == XTC_OK) {
			CHECK_EQ(xtc_sim_exec_run(e, 1, 10), XTC_E_NOSYS);
			xtc_exec_fini(e);
		}
		fprintf(stderr, "not an XTC_SIM build (meson -Dsim=true): skip\n");
		return failures ? 1 : 77;
	}
	RUN(test_budget_clock_check);
	RUN(test_nested_run);
	RUN(test_lost_wake);
	RUN(test_shares_exact);
	RUN(test_replay);
	RUN(test_sweep);
	RUN(test_eager_rebalance);
	return failures ? 1 : 0;
}
