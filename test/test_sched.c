/*
 * test_sched.c - lane policies (xtc_sched.h): every error path and the
 * setup-only rule; the bounded-bypass property against adversarial
 * policies (always lane 0, always invalid, always DEFAULT, a lane that is
 * not ready, random) over L in {1, 2, 5, 17} and max_bypass in
 * {1, 2, 3, 8, 64}, with the gap measured by the tasks themselves and the
 * invalid choices counted by the policy and by the runtime; the built-in
 * continuous policy (preference, rotation, no preference for all-BLOCKED
 * groups, nothing starved); executor loops; replay under the simulator.
 *
 * Suites: unit (native loops, a few seeds per case) and sim (the sweep over
 * SWEEP_SEEDS seeds under the deterministic simulator; 77 in other builds
 * for that part). In a -Dsched_policy=false build only the XTC_E_NOSYS
 * checks run.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#include "xtc.h"
#include "xtc_exec.h"
#include "xtc_sched.h"
#include "xtc_batch.h"
#include "xtc_sim.h"
#include "loop_int.h"
#include "sched_int.h"
#include "test_util.h"

#ifndef SWEEP_SEEDS
#define SWEEP_SEEDS 500
#endif

static int noop_select(const xtc_sched_lane_t *v, size_t n, void *u)
{
	(void)v;
	(void)n;
	(void)u;
	return XTC_SCHED_DEFAULT;
}

static xtc_sched_policy_t mkpol(int max_bypass, xtc_sched_select_fn fn,
                                void *user)
{
	xtc_sched_policy_t p;

	memset(&p, 0, sizeof(p));
	p.size = sizeof(p);
	p.version = XTC_SCHED_VERSION;
	p.max_bypass = max_bypass;
	p.select = fn;
	p.user = user;
	return p;
}

/* ---- a build without the feature --------------------------------------- */

#ifndef XTC_SCHED_POLICY
static void test_nosys(void)
{
	xtc_loop_t *l = new_loop();
	xtc_sched_policy_t p = mkpol(3, noop_select, NULL);
	xtc_sched_stats_t st = { .size = sizeof(st),
	    .version = XTC_SCHED_VERSION };
	int lane = 7;

	CHECK_EQ(xtc_sched_policy_set(l, &p), XTC_E_NOSYS);
	CHECK_EQ(xtc_sched_policy_set(NULL, NULL), XTC_E_NOSYS);
	CHECK_EQ(xtc_sched_continuous_set(l, 3), XTC_E_NOSYS);
	CHECK_EQ(xtc_sched_get_stats(l, &st), XTC_E_NOSYS);
	CHECK_EQ(xtc_sched_lane_of(NULL, &lane), XTC_E_NOSYS);
	CHECK_EQ(lane, 7);
	CHECK(l->up.sched == NULL);
	CHECK_EQ(xtc_loop_fini(l), XTC_OK);
}
#else

static xtc_sched_stats_t get_stats(xtc_loop_t *l)
{
	xtc_sched_stats_t st;

	memset(&st, 0, sizeof(st));
	st.size = sizeof(st);
	st.version = XTC_SCHED_VERSION;
	CHECK_EQ(xtc_sched_get_stats(l, &st), XTC_OK);
	return st;
}


/* ---- errors and the setup-only rule ------------------------------------ */

static void test_errors(void)
{
	xtc_loop_t *l = new_loop();
	xtc_sched_policy_t p = mkpol(3, noop_select, NULL), q;
	xtc_sched_stats_t st;
	xtc_exec_class_t c;
	int lane, junk[16] = { 0 };

	/* policy_set */
	CHECK_EQ(xtc_sched_policy_set(NULL, &p), XTC_E_INVAL);
	CHECK_EQ(xtc_sched_policy_set(l, NULL), XTC_E_INVAL);
	q = p; q.size = sizeof(q) - 1;
	CHECK_EQ(xtc_sched_policy_set(l, &q), XTC_E_INVAL);
	q = p; q.size = 0;
	CHECK_EQ(xtc_sched_policy_set(l, &q), XTC_E_INVAL);
	q = p; q.version = XTC_SCHED_VERSION + 1;
	CHECK_EQ(xtc_sched_policy_set(l, &q), XTC_E_INVAL);
	q = p; q.select = NULL;
	CHECK_EQ(xtc_sched_policy_set(l, &q), XTC_E_INVAL);
	q = p; q.max_bypass = 0;
	CHECK_EQ(xtc_sched_policy_set(l, &q), XTC_E_INVAL);
	q = p; q.max_bypass = -1;
	CHECK_EQ(xtc_sched_policy_set(l, &q), XTC_E_INVAL);
	q = p; q.max_bypass = XTC_SCHED_MAX_BYPASS + 1;
	CHECK_EQ(xtc_sched_policy_set(l, &q), XTC_E_RANGE);
	q = p; q.max_bypass = XTC_SCHED_MAX_BYPASS;
	CHECK_EQ(xtc_sched_policy_set(l, &q), XTC_OK);
	CHECK_EQ(xtc_sched_policy_set(l, &p), XTC_OK); /* replaces */
	/* continuous_set */
	CHECK_EQ(xtc_sched_continuous_set(NULL, 3), XTC_E_INVAL);
	CHECK_EQ(xtc_sched_continuous_set(l, 0), XTC_E_INVAL);
	CHECK_EQ(xtc_sched_continuous_set(l, -7), XTC_E_INVAL);
	CHECK_EQ(xtc_sched_continuous_set(l, XTC_SCHED_MAX_BYPASS + 1),
	    XTC_E_RANGE);
	CHECK_EQ(xtc_sched_continuous_set(l, 1), XTC_OK);
	/* get_stats */
	memset(&st, 0, sizeof(st));
	CHECK_EQ(xtc_sched_get_stats(l, NULL), XTC_E_INVAL);
	CHECK_EQ(xtc_sched_get_stats(NULL, &st), XTC_E_INVAL);
	st.size = sizeof(st);
	CHECK_EQ(xtc_sched_get_stats(l, &st), XTC_E_INVAL); /* version 0 */
	st.version = XTC_SCHED_VERSION;
	st.size = 8;
	CHECK_EQ(xtc_sched_get_stats(l, &st), XTC_E_INVAL);
	st.size = sizeof(st);
	st.opportunities = 99;
	CHECK_EQ(xtc_sched_get_stats(l, &st), XTC_OK);
	CHECK_EQ(st.opportunities, 0);
	CHECK_EQ(st.size, sizeof(st));
	/* lane_of */
	CHECK_EQ(xtc_sched_lane_of(NULL, NULL), XTC_E_INVAL);
	CHECK_EQ(xtc_sched_lane_of(NULL, &lane), XTC_OK);
	CHECK_EQ(lane, XTC_SCHED_LANE_DEFAULT);
	CHECK_EQ(xtc_sched_lane_of((xtc_exec_class_t)(void *)junk, &lane),
	    XTC_E_INVAL);
	for (int i = 0; i < 3; i++) {
		CHECK_EQ(xtc_exec_class_create(l, 100, 0, &c), XTC_OK);
		CHECK_EQ(xtc_sched_lane_of(c, &lane), XTC_OK);
		CHECK_EQ(lane, i);
	}
	CHECK_EQ(xtc_sched_lane_of(c, NULL), XTC_E_INVAL);
	/* internal batch counts */
	CHECK_EQ(xtc__sched_batch_register(NULL, 0), XTC_E_INVAL);
	CHECK_EQ(xtc__sched_batch_register(l, -2), XTC_E_INVAL);
	CHECK_EQ(xtc__sched_batch_register(l, XTC_LOOP_MAX_CLASSES),
	    XTC_E_INVAL);
	CHECK_EQ(xtc__sched_batch_register(l, -1), XTC_OK);
	xtc__sched_batch_unregister(l, -1);
	xtc__sched_batch_unregister(l, -1); /* unbalanced: ignored */
	xtc__sched_batch_adjust(l, 99, 1, 1, 1); /* ignored */
	xtc__sched_batch_adjust(NULL, 0, 1, 1, 1);
	/* setup-only: an empty run counts */
	CHECK_EQ(xtc_loop_run(l), XTC_OK);
	CHECK_EQ(xtc_sched_policy_set(l, &p), XTC_E_AGAIN);
	CHECK_EQ(xtc_sched_continuous_set(l, 3), XTC_E_AGAIN);
	/* bad arguments still come first */
	CHECK_EQ(xtc_sched_policy_set(l, NULL), XTC_E_INVAL);
	CHECK_EQ(xtc_sched_continuous_set(l, 0), XTC_E_INVAL);
	CHECK_EQ(xtc_sched_get_stats(l, &st), XTC_OK);
	CHECK_EQ(xtc_loop_fini(l), XTC_OK);
	/* after fini */
	CHECK_EQ(xtc_sched_policy_set(l, &p), XTC_E_INVAL);
	CHECK_EQ(xtc_sched_continuous_set(l, 3), XTC_E_INVAL);
	CHECK_EQ(xtc_sched_get_stats(l, &st), XTC_E_INVAL);
	CHECK_EQ(xtc__sched_batch_register(l, 0), XTC_E_INVAL);
	xtc__sched_batch_adjust(l, 0, 1, 1, 1);
	xtc__sched_batch_unregister(l, 0);
}

/* From a proc of the running loop and from another thread while it runs:
 * XTC_E_AGAIN (the loop has started). */
static int inrun_rc, thread_rc;
static atomic_int thread_done;

static void *other_thread(void *a)
{
	thread_rc = xtc_sched_continuous_set(a, 2);
	atomic_store(&thread_done, 1);
	return NULL;
}

static void inrun_proc(void *a)
{
	xtc_loop_t *l = a;
	xtc_sched_policy_t p = mkpol(3, noop_select, NULL);
	pthread_t th;

	inrun_rc = xtc_sched_policy_set(l, &p);
	CHECK_EQ(pthread_create(&th, NULL, other_thread, l), 0);
	while (!atomic_load(&thread_done))
		xtc_yield();
	pthread_join(th, NULL);
}

static void test_setup_only_in_run(void)
{
	xtc_loop_t *l = new_loop();

	atomic_store(&thread_done, 0);
	CHECK_EQ(xtc_proc_spawn(l, inrun_proc, l, NULL, NULL), XTC_OK);
	run_fini(l);
	CHECK_EQ(inrun_rc, XTC_E_AGAIN);
	CHECK_EQ(thread_rc, XTC_E_AGAIN);
}

static void test_exec_setup_only(void)
{
	xtc_exec_t *e;
	xtc_loop_t *l;

	CHECK_EQ(xtc_exec_init(&e, 2), XTC_OK);
	l = xtc_exec_loop(e, 1);
	CHECK_EQ(xtc_sched_continuous_set(l, 4), XTC_OK);
	CHECK_EQ(xtc_exec_run(e), XTC_OK);
	CHECK_EQ(xtc_sched_continuous_set(l, 4), XTC_E_AGAIN);
	CHECK_EQ(xtc_sched_continuous_set(xtc_exec_loop(e, 0), 4),
	    XTC_E_AGAIN);
	CHECK_EQ(xtc_exec_fini(e), XTC_OK);
}

/* ---- the bypass workload ------------------------------------------------ */

enum {
	P_LANE0, P_INVALID, P_DEFAULT, P_NOTREADY, P_RANDOM, P_CONT, NPOL
};
static const char *pol_name[NPOL] = {
	"lane0", "invalid", "default", "notready", "random", "continuous"
};
#define MAXK (XTC_LOOP_MAX_CLASSES + 1) /* lane k - 1 */
#define MAXP 64

static struct wl {
	/* configuration */
	int L, mb, policy, sim, rounds, rounds1; /* rounds1: lane 0's procs */
	uint64_t rng;
	xtc_loop_t *loop;
	xtc_exec_class_t cls[XTC_LOOP_MAX_CLASSES];
	int kfirst;           /* first lane index used (k = lane + 1) */
	int steady[MAXK];     /* lanes with always-ready tasks */
	int procs[MAXK];      /* procs spawned per lane */
	int batch[MAXK];      /* lanes registered as batch lanes */
	/* observation */
	long tick;            /* task runs = opportunities served */
	long last[MAXK];
	long worst;           /* worst gap of a steady lane */
	long worst_by_kind[2];/* [0] default lane, [1] class lanes */
	long runs[MAXK];
	uint64_t selects, invalid, defaults, bad_snap;
	int steady_left;
	int nflaky;
	xtc_pid_t flaky[MAXP];
} W;

static uint64_t rnd(void)
{
	if (W.sim)
		return xtc_sim_rand(XTC_SIM_RNG_APP);
	uint64_t z = (W.rng += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static void note(int k)
{
	long gap;

	W.tick++;
	W.runs[k]++;
	gap = W.tick - W.last[k];
	W.last[k] = W.tick;
	if (!W.steady[k])
		return;
	if (gap > W.worst)
		W.worst = gap;
	if (gap > W.worst_by_kind[k > 0])
		W.worst_by_kind[k > 0] = gap;
}

static int in_snap(const xtc_sched_lane_t *v, size_t n, int id)
{
	for (size_t i = 0; i < n; i++)
		if (v[i].id == id)
			return 1;
	return 0;
}

static int adversary(const xtc_sched_lane_t *v, size_t n, void *u)
{
	int want;

	(void)u;
	W.selects++;
	/* the snapshot: >= 2 ready lanes, ascending ids, no override due */
	if (n < 2 || n > MAXK)
		W.bad_snap++;
	for (size_t i = 0; i < n; i++) {
		if ((i > 0 && v[i].id <= v[i - 1].id) ||
		    v[i].id < W.kfirst - 1 || v[i].id >= W.L + W.kfirst - 1 ||
		    v[i].bypass >= (uint32_t)W.mb ||
		    v[i].shares != 100)
			W.bad_snap++;
	}
	switch (W.policy) {
	case P_LANE0:
		want = 0;
		break;
	case P_INVALID: {
		static const int junk[] = { 16, 17, -3, -1000, 1 << 30,
		    XTC_SCHED_DEFAULT - 1 };
		want = junk[rnd() % 6];
		break;
	}
	case P_DEFAULT:
		want = XTC_SCHED_DEFAULT;
		break;
	case P_NOTREADY:
		want = -1;
		for (int id = -1; id < XTC_LOOP_MAX_CLASSES; id++)
			if (!in_snap(v, n, id)) {
				want = id;
				break;
			}
		break;
	default: /* P_RANDOM */
		switch (rnd() % 4) {
		case 0:
			want = XTC_SCHED_DEFAULT;
			break;
		case 1:
			want = (int)(rnd() % 21) - 3;
			break;
		default:
			want = v[rnd() % n].id;
		}
	}
	if (want == XTC_SCHED_DEFAULT)
		W.defaults++;
	else if (!in_snap(v, n, want))
		W.invalid++;
	return want;
}

static void steady_proc(void *a)
{
	int k = (int)(intptr_t)a, one = 1, zero = 0;
	int rounds = k == 1 ? W.rounds1 : W.rounds;

	for (int r = 0; r < rounds; r++) {
		note(k);
		if (W.nflaky > 0 && rnd() % 3 == 0)
			(void)xtc_send(W.flaky[rnd() % (uint64_t)W.nflaky], &one,
			    sizeof(one));
		xtc_yield();
	}
	note(k);
	if (--W.steady_left == 0)
		for (int i = 0; i < W.nflaky; i++)
			CHECK_EQ(xtc_send(W.flaky[i], &zero, sizeof(zero)), XTC_OK);
}

/* Ready only while it has messages: its lane comes and goes. Every run
 * notes exactly once: at its start, after each yield, and after a receive
 * that parked (a receive that finds a message does not end the run). */
static void flaky_proc(void *a)
{
	int k = (int)(intptr_t)a;

	note(k);
	for (;;) {
		void *m;
		size_t sz;
		int v, rc;

		rc = xtc_recv(&m, &sz, 0);
		if (rc == XTC_E_AGAIN) {
			rc = xtc_recv(&m, &sz, -1);
			if (rc == XTC_OK)
				note(k);
		}
		if (rc != XTC_OK)
			break;
		v = *(int *)m;
		xtc_free(m);
		if (v == 0)
			break;
		for (uint64_t j = rnd() % 3; j > 0; j--) {
			xtc_yield();
			note(k);
		}
	}
}

static void spawn_in(int k, xtc_proc_fn fn, xtc_pid_t *pid)
{
	xtc_proc_opts_t o;

	memset(&o, 0, sizeof(o));
	o.sched_class = k == 0 ? NULL : W.cls[k - 1];
	CHECK_EQ(xtc_proc_spawn(W.loop, fn, (void *)(intptr_t)k, &o, pid),
	    XTC_OK);
}

/* Runs first (alone) and makes the whole population ready at once. */
static void starter(void *a)
{
	int nsteady = 0;

	(void)a;
	for (int k = W.kfirst; k < W.kfirst + W.L; k++) {
		int procs = 1 + (int)(rnd() % 2);
		W.procs[k] = procs;
		/* the first lane and most others are steady */
		W.steady[k] = k == W.kfirst || rnd() % 4 != 0;
		for (int i = 0; i < procs; i++) {
			if (W.steady[k]) {
				spawn_in(k, steady_proc, NULL);
				nsteady++;
			} else if (W.nflaky < MAXP) {
				spawn_in(k, flaky_proc, &W.flaky[W.nflaky++]);
			}
		}
	}
	W.steady_left = nsteady;
	W.tick = 0;
	memset(W.last, 0, sizeof(W.last));
}

static void wl_reset(int L, int mb, int policy, uint64_t seed, int sim)
{
	memset(&W, 0, sizeof(W));
	W.L = L;
	W.mb = mb;
	W.policy = policy;
	W.rng = seed * 0x2545f4914f6cdd1dull + 1;
	W.sim = sim;
	/* long enough to reach the bound: lane 0 (the target of "always
	 * lane 0") outlasts the first max_bypass opportunities */
	W.rounds = 6 + mb / 4;
	W.rounds1 = mb + 2;
	/* L = 1: one class lane; otherwise the default lane + L - 1 classes */
	W.kfirst = L == 1 ? 1 : 0;
}

/* Configure W.loop: classes, policy, batch lanes (continuous). */
static void wl_setup(void)
{
	int nclasses = W.kfirst + W.L - 1;

	for (int i = 0; i < nclasses; i++)
		CHECK_EQ(xtc_exec_class_create(W.loop, 100, 0, &W.cls[i]),
		    XTC_OK);
	if (W.policy == P_CONT) {
		CHECK_EQ(xtc_sched_continuous_set(W.loop, W.mb), XTC_OK);
	} else {
		xtc_sched_policy_t p = mkpol(W.mb, adversary, NULL);
		CHECK_EQ(xtc_sched_policy_set(W.loop, &p), XTC_OK);
	}
	CHECK_EQ(xtc_proc_spawn(W.loop, starter, NULL, NULL, NULL), XTC_OK);
}

static void wl_check(const xtc_sched_stats_t *st, const char *where)
{
	long bound = W.mb + W.L;

	if (W.worst > bound || W.bad_snap != 0)
		fprintf(stderr, "  %s: L=%d mb=%d %s: worst gap %ld > %ld or "
		    "bad snapshot %llu\n", where, W.L, W.mb,
		    pol_name[W.policy], W.worst, bound,
		    (unsigned long long)W.bad_snap);
	CHECK(W.worst <= bound);
	CHECK_EQ(W.bad_snap, 0);
	CHECK(W.steady_left == 0);
	if (W.policy != P_CONT) {
		CHECK_EQ(st->selects, W.selects);
		CHECK_EQ(st->invalid, W.invalid);
		CHECK_EQ(st->defaults, W.defaults);
	}
	CHECK(st->max_wait < (uint64_t)bound);
	CHECK(st->opportunities >= (uint64_t)W.tick);
}

/* Worst gap per (L, max_bypass, policy), reported at the end. */
static const int Ls[] = { 1, 2, 5, 17 };
static const int MBs[] = { 1, 2, 3, 8, 64 };
static long worst_tab[4][5][NPOL];

static void record(int li, int mi)
{
	if (W.worst > worst_tab[li][mi][W.policy])
		worst_tab[li][mi][W.policy] = W.worst;
}

static void report(const char *title, int npol)
{
	fprintf(stderr, "  %s: worst gap (bound max_bypass + L)\n", title);
	for (int li = 0; li < 4; li++)
		for (int mi = 0; mi < 5; mi++) {
			fprintf(stderr, "    L=%-2d mb=%-2d bound=%-2d:", Ls[li],
			    MBs[mi], Ls[li] + MBs[mi]);
			for (int p = 0; p < npol; p++)
				fprintf(stderr, " %s=%ld", pol_name[p],
				    worst_tab[li][mi][p]);
			fprintf(stderr, "\n");
		}
}

/* All lanes steady and always lane 0: the others reach max_bypass
 * together and are served one by one, so the last waits mb + L - 1:
 * the bound is tight within one. */
static void check_tight(void)
{
	int all = 1;

	for (int k = W.kfirst; k < W.kfirst + W.L; k++)
		all &= W.steady[k];
	/* lane 0 (k 1) must outlast the first max_bypass opportunities */
	if (W.policy == P_LANE0 && all && W.L >= 2)
		CHECK(W.worst >= W.mb + W.L - 1);
}

static void run_native(int L, int mb, int policy, uint64_t seed)
{
	xtc_sched_stats_t st;

	wl_reset(L, mb, policy, seed, 0);
	W.loop = new_loop();
	wl_setup();
	CHECK_EQ(xtc_loop_run(W.loop), XTC_OK);
	st = get_stats(W.loop);
	wl_check(&st, "native");
	check_tight();
	CHECK_EQ(xtc_loop_fini(W.loop), XTC_OK);
}

static void test_bypass_native(void)
{
	memset(worst_tab, 0, sizeof(worst_tab));
	for (int li = 0; li < 4; li++)
		for (int mi = 0; mi < 5; mi++)
			for (int p = 0; p < P_CONT; p++)
				for (uint64_t s = 0; s < 4; s++) {
					run_native(Ls[li], MBs[mi], p, s);
					record(li, mi);
				}
	report("native, 4 seeds each", P_CONT);
}

/* Under the simulator: an executor of one loop, the workload drawn from
 * the seed (XTC_SIM_RNG_APP), every (L, max_bypass) pair per seed, the
 * policy rotating with the seed. */
static void run_sim(int L, int mb, int policy, uint64_t seed, uint64_t *hash)
{
	xtc_exec_t *e;
	xtc_sched_stats_t st;

	wl_reset(L, mb, policy, seed, 1);
	CHECK_EQ(xtc_exec_init(&e, 1), XTC_OK);
	W.loop = xtc_exec_loop(e, 0);
	wl_setup();
	CHECK_EQ(xtc_sim_exec_run(e, seed, 1000000), XTC_OK);
	st = get_stats(W.loop);
	wl_check(&st, "sim");
	check_tight();
	if (hash != NULL)
		*hash = xtc_sim_state_hash(e) ^ (uint64_t)W.worst ^
		    (uint64_t)W.tick << 20 ^ st.invalid << 40;
	CHECK_EQ(xtc_exec_fini(e), XTC_OK);
}

static void test_bypass_sim(void)
{
	memset(worst_tab, 0, sizeof(worst_tab));
	for (uint64_t s = 0; s < SWEEP_SEEDS; s++)
		for (int li = 0; li < 4; li++)
			for (int mi = 0; mi < 5; mi++) {
				run_sim(Ls[li], MBs[mi], (int)(s % NPOL), s, NULL);
				record(li, mi);
			}
	fprintf(stderr, "  sim: %d seeds, every (L, max_bypass) per seed, "
	    "policy = seed %% %d\n", SWEEP_SEEDS, NPOL);
	report("sim", NPOL);
}

static void test_sim_replay(void)
{
	uint64_t h1, h2, h3;

	run_sim(5, 3, P_RANDOM, 42, &h1);
	run_sim(5, 3, P_RANDOM, 42, &h2);
	run_sim(5, 3, P_RANDOM, 43, &h3);
	CHECK(h1 == h2);
	CHECK(h1 != h3);
}

/* ---- the continuous policy --------------------------------------------- */

/* Lanes: default (k 0), a plain class (k 1), batch classes (k 2..): every
 * lane steady; the batch lanes report ready members (or all BLOCKED). */
static long order_k[4096];
static int norder;
static struct {
	xtc_batch_t *g;     /* a real batch group on class lane 1 (k 2) */
	int blocked;        /* its step parks every member (BLOCKED) */
	long completed;
} BG;

static void cont_proc(void *a)
{
	int k = (int)(intptr_t)a;

	for (int r = 0; r < W.rounds; r++) {
		note(k);
		if (norder < 4096)
			order_k[norder++] = k;
		xtc_yield();
	}
	if (--W.steady_left == 0 && BG.g != NULL)
		CHECK_EQ(xtc_batch_close(BG.g, XTC_BATCH_CANCEL), XTC_OK);
}

static void run_cont(int nbatch, int blocked, int mb, int sim, uint64_t seed,
                     xtc_sched_stats_t *st)
{
	xtc_exec_t *e = NULL;
	int nlanes = 2 + nbatch;

	wl_reset(nlanes, mb, P_CONT, seed, sim);
	norder = 0;
	W.rounds = W.rounds1 = 200;
	if (sim) {
		CHECK_EQ(xtc_exec_init(&e, 1), XTC_OK);
		W.loop = xtc_exec_loop(e, 0);
	} else {
		W.loop = new_loop();
	}
	for (int i = 0; i < nlanes - 1; i++)
		CHECK_EQ(xtc_exec_class_create(W.loop, 100, 0, &W.cls[i]),
		    XTC_OK);
	CHECK_EQ(xtc_sched_continuous_set(W.loop, mb), XTC_OK);
	for (int k = 2; k < nlanes; k++) {
		CHECK_EQ(xtc__sched_batch_register(W.loop, k - 1), XTC_OK);
		xtc__sched_batch_adjust(W.loop, k - 1, 4, blocked ? 0 : 4, 2);
	}
	/* a group on the default lane is counted, never preferred */
	CHECK_EQ(xtc__sched_batch_register(W.loop, -1), XTC_OK);
	xtc__sched_batch_adjust(W.loop, -1, 4, 4, 0);
	for (int k = 0; k < nlanes; k++) {
		W.steady[k] = 1;
		spawn_in(k, cont_proc, NULL);
		W.steady_left++;
	}
	if (sim)
		CHECK_EQ(xtc_sim_exec_run(e, seed, 1000000), XTC_OK);
	else
		CHECK_EQ(xtc_loop_run(W.loop), XTC_OK);
	*st = get_stats(W.loop);
	CHECK(W.worst <= mb + nlanes);
	CHECK_EQ(W.steady_left, 0);
	if (sim)
		CHECK_EQ(xtc_exec_fini(e), XTC_OK);
	else
		CHECK_EQ(xtc_loop_fini(W.loop), XTC_OK);
}

/* Runs of lane k among the first `upto` entries of order_k. */
static long served(int k, int upto)
{
	long n = 0;

	for (int i = 0; i < upto && i < norder; i++)
		n += order_k[i] == k;
	return n;
}

static void cont_cases(int sim)
{
	xtc_sched_stats_t st;
	int mb = 8, head = 120;

	/* one batch lane: preferred, the others within the bound */
	run_cont(1, 0, mb, sim, 1, &st);
	CHECK(W.worst_by_kind[0] <= mb + 3); /* default-lane task */
	CHECK(W.worst_by_kind[1] <= mb + 3); /* class tasks */
	CHECK(served(2, head) > 3 * served(0, head));
	CHECK(served(2, head) > 3 * served(1, head));
	CHECK(served(0, head) > 0 && served(1, head) > 0);
	CHECK(st.forced > 0);
	CHECK_EQ(st.invalid, 0);
	/* all members BLOCKED: no preference, every select says DEFAULT and
	 * the vruntime order shares the CPU evenly */
	run_cont(1, 1, mb, sim, 2, &st);
	CHECK(st.selects > 0);
	CHECK_EQ(st.defaults, st.selects);
	/* natively the charge is measured time (OS noise, sanitizers): only
	 * "no preference" there (a preferred lane would take 4 of 6), the
	 * exact round robin under the simulator */
	if (sim)
		CHECK_EQ(st.forced, 0);
	for (int k = 0; k < 3; k++) {
		long n = served(k, head);
		if (sim)
			CHECK(n >= head / 3 - 2 && n <= head / 3 + 2);
		else
			CHECK(n > 0 && n <= head / 2);
	}
	/* three batch lanes: rotation, A B C A B C between overrides */
	run_cont(3, 0, 64, sim, 3, &st);
	for (int i = 0; i + 2 < 60; i += 3) {
		CHECK_EQ(order_k[i], 2);
		CHECK_EQ(order_k[i + 1], 3);
		CHECK_EQ(order_k[i + 2], 4);
	}
	CHECK(served(0, 400) > 0 && served(1, 400) > 0);
	CHECK(W.worst <= 64 + 5);
}

/* End to end with a real batch group (xtc_batch.h): its driver runs in
 * class lane 1 and reports its members to the policy. Lanes: default
 * (k 0), a plain class (k 1), the batch class (k 2). */
static int bstep(const xtc_batch_item_t *it, xtc_batch_result_t *res,
                 size_t n, void *u)
{
	(void)u;
	note(2);
	if (norder < 4096)
		order_k[norder++] = 2;
	for (size_t i = 0; i < n; i++)
		res[i].state = BG.blocked ? XTC_BATCH_BLOCKED :
		    it[i].rounds + 1 >= 150 ? XTC_BATCH_DONE : XTC_BATCH_CONTINUE;
	return XTC_OK;
}

static void bcomplete(uint64_t h, void *req, int outcome, void *u)
{
	(void)h;
	(void)req;
	(void)u;
	(void)outcome;
	BG.completed++;
}

static void run_batch(int blocked, int sim, xtc_sched_stats_t *st)
{
	xtc_exec_t *e = NULL;
	xtc_batch_opts_t o;
	uint64_t h;
	int rc;

	wl_reset(3, 4, P_CONT, 9, sim);
	norder = 0;
	W.rounds = W.rounds1 = 150;
	memset(&BG, 0, sizeof(BG));
	BG.blocked = blocked;
	if (sim) {
		CHECK_EQ(xtc_exec_init(&e, 1), XTC_OK);
		W.loop = xtc_exec_loop(e, 0);
	} else {
		W.loop = new_loop();
	}
	for (int i = 0; i < 2; i++)
		CHECK_EQ(xtc_exec_class_create(W.loop, 100, 0, &W.cls[i]),
		    XTC_OK);
	CHECK_EQ(xtc_sched_continuous_set(W.loop, 4), XTC_OK);
	memset(&o, 0, sizeof(o));
	o.size = sizeof(o);
	o.version = XTC_BATCH_VERSION;
	o.capacity = o.max_active = 4;
	o.resource_capacity = 4;
	o.sched_class = W.cls[1];
	o.step = bstep;
	o.complete = bcomplete;
	rc = xtc_batch_create(W.loop, &o, &BG.g);
	CHECK_EQ(rc, XTC_OK);
	if (rc != XTC_OK)
		return;
	for (int i = 0; i < 4; i++)
		CHECK_EQ(xtc_batch_submit(BG.g, NULL, 1, &h), XTC_OK);
	for (int k = 0; k < 3; k++) {
		/* k 2: a plain task shares the batch class (when blocked) */
		if (k == 2 && !blocked)
			break;
		W.steady[k] = 1;
		spawn_in(k, cont_proc, NULL);
		W.steady_left++;
	}
	if (!blocked)
		CHECK_EQ(xtc_batch_close(BG.g, XTC_BATCH_DRAIN), XTC_OK);
	if (sim)
		CHECK_EQ(xtc_sim_exec_run(e, 9, 1000000), XTC_OK);
	else
		CHECK_EQ(xtc_loop_run(W.loop), XTC_OK);
	*st = get_stats(W.loop);
	CHECK_EQ(BG.completed, 4);
	CHECK_EQ(xtc_batch_destroy(BG.g), XTC_OK);
	BG.g = NULL;
	if (sim)
		CHECK_EQ(xtc_exec_fini(e), XTC_OK);
	else
		CHECK_EQ(xtc_loop_fini(W.loop), XTC_OK);
}

static void batch_cases(int sim)
{
	xtc_sched_stats_t st;
	int head = 120;

	/* ready members: the batch class is preferred (4 of every 6), the
	 * default lane and the plain class wait at most max_bypass + L */
	run_batch(0, sim, &st);
	CHECK(W.worst_by_kind[0] <= 4 + 3);
	CHECK(W.worst_by_kind[1] <= 4 + 3);
	CHECK(served(2, head) >= 3 * head / 5);
	CHECK(served(0, head) > 0 && served(1, head) > 0);
	CHECK(st.forced > 0);
	/* every member BLOCKED: the group's class gets no preference (its
	 * plain task runs as often as the others) */
	run_batch(1, sim, &st);
	/* the counts are advisory: the driver publishes the BLOCKED results
	 * at its next boundary, so the lane may be preferred while the driver
	 * is queued after its one step (a couple of selects), never after */
	CHECK(st.defaults + 3 >= st.selects);
	CHECK(st.selects > 100);
	CHECK_EQ(st.invalid, 0);
	/* natively the vruntime charge is measured time (the driver's runs
	 * cost more than a yield, sanitizers and a loaded machine stretch
	 * them): only "no preference" for the batch class (k 2: it took 3/5
	 * and more with ready members above) and progress for every lane are
	 * checked there, the exact split under the simulator. A bound on the
	 * other two lanes' share was a timing assertion: under TSan, with the
	 * CI's tests running side by side, a lane once took more than half
	 * of the picks. */
	for (int k = 0; k < 3; k++) {
		long n = served(k, head);
		if (sim) {
			CHECK(n >= head / 3 - 2 && n <= head / 3 + 2);
			continue;
		}
		int fair = n > 0 && (k != 2 || n <= head / 2);
		CHECK(fair);
		if (!fair)
			fprintf(stderr, "  lane %d served %ld of the first %d\n",
			        k, n, head);
	}
}

static void test_continuous_native(void)
{
	cont_cases(0);
	batch_cases(0);
}

static void test_continuous_sim(void)
{
	cont_cases(1);
	batch_cases(1);
}

/* ---- no classes: nothing to choose, nothing counted -------------------- */

static void plain_proc(void *a)
{
	(void)a;
	for (int i = 0; i < 10; i++)
		xtc_yield();
}

static void test_no_classes(void)
{
	xtc_loop_t *l = new_loop();
	xtc_sched_policy_t p = mkpol(2, adversary, NULL);
	xtc_sched_stats_t st;

	memset(&W, 0, sizeof(W));
	CHECK_EQ(xtc_sched_policy_set(l, &p), XTC_OK);
	CHECK_EQ(l->feat, 0); /* the plain path: no hook */
	for (int i = 0; i < 3; i++)
		CHECK_EQ(xtc_proc_spawn(l, plain_proc, NULL, NULL, NULL),
		    XTC_OK);
	CHECK_EQ(xtc_loop_run(l), XTC_OK);
	st = get_stats(l);
	CHECK_EQ(st.opportunities, 0);
	CHECK_EQ(W.selects, 0);
	CHECK_EQ(xtc_loop_fini(l), XTC_OK);
}

/* ---- executor loops ------------------------------------------------------ */

static atomic_int exec_stats_ok;

static void *stats_reader(void *a)
{
	xtc_sched_stats_t st = { .size = sizeof(st),
	    .version = XTC_SCHED_VERSION };

	for (int i = 0; i < 1000; i++)
		if (xtc_sched_get_stats(a, &st) != XTC_OK)
			return NULL;
	atomic_store(&exec_stats_ok, 1);
	return NULL;
}

static void test_exec_loops(void)
{
	xtc_exec_t *e;
	xtc_sched_stats_t st;
	pthread_t th;

	wl_reset(5, 3, P_RANDOM, 7, 0);
	W.rounds = W.rounds1 = 50;
	CHECK_EQ(xtc_exec_init(&e, 2), XTC_OK);
	W.loop = xtc_exec_loop(e, 0);
	wl_setup();
	CHECK_EQ(pthread_create(&th, NULL, stats_reader, W.loop), 0);
	CHECK_EQ(xtc_exec_run(e), XTC_OK);
	pthread_join(th, NULL);
	CHECK(atomic_load(&exec_stats_ok));
	st = get_stats(W.loop);
	wl_check(&st, "exec");
	CHECK(st.selects > 0);
	CHECK_EQ(xtc_exec_fini(e), XTC_OK);
}

#endif /* XTC_SCHED_POLICY */

int main(void)
{
#ifdef XTC_SCHED_POLICY
	RUN(test_errors);
	RUN(test_setup_only_in_run);
	RUN(test_exec_setup_only);
	RUN(test_no_classes);
	if (xtc_sim_supported()) {
		/* the sim build: the sweep (suite sim) */
		RUN(test_bypass_sim);
		RUN(test_sim_replay);
		RUN(test_continuous_sim);
	} else {
		RUN(test_bypass_native);
		RUN(test_continuous_native);
		RUN(test_exec_loops);
	}
#else
	RUN(test_nosys);
#endif
	return failures ? 1 : 0;
}
