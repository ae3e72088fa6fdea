/*
 * test_sim_fault.c - fault injection of the simulator (xtc_sim(3) FAULT
 * INJECTION): every decision is 0 outside an active simulation; coins,
 * fault points and buggify sites replay from the seed and draw from their
 * own streams (the application's stream, and so the schedule, does not
 * move when they are used); fault points count fires per name; a buggify
 * site decides once per run; the accessors and their argument checks.
 * In a simulator build, a seeded executor run with buggify sites planted
 * in its procs replays identically.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "xtc.h"

#include "test_util.h"

static void test_inactive(void)
{
	xtc_sim_deactivate();
	xtc_sim_fault_points_enable(1000);
	xtc_sim_buggify_enable(1000);
	CHECK_EQ(xtc_sim_fault(1000), 0);
	CHECK_EQ(xtc_sim_fault_point("inactive.point"), 0);
	CHECK_EQ(xtc_sim_buggify("inactive.site"), 0);
	CHECK_EQ(xtc_sim_buggify_fault(1000), 0);
	CHECK_EQ(xtc_sim_fault_point_fires("inactive.point"), 0);
	CHECK_EQ(xtc_sim_buggify_reached_count(), 0);
	xtc_sim_fault_points_disable();
	xtc_sim_buggify_disable();
}

static void test_fault_coin(void)
{
	uint64_t seq[64], app1, app2;
	int hits = 0;

	xtc_sim_activate(42);
	CHECK_EQ(xtc_sim_fault(0), 0);
	CHECK_EQ(xtc_sim_fault(1000), 1);
	CHECK_EQ(xtc_sim_fault(5000), 1);
	for (int i = 0; i < 2000; i++)
		hits += xtc_sim_fault(250);
	CHECK(hits > 350 && hits < 650); /* 500 expected; binomial sd ~19 */
	/* replay: the same seed, the same coins */
	xtc_sim_activate(7);
	for (int i = 0; i < 64; i++)
		seq[i] = (uint64_t)xtc_sim_fault(500);
	xtc_sim_activate(7);
	for (int i = 0; i < 64; i++)
		CHECK_EQ(xtc_sim_fault(500), seq[i]);
	/* its own stream: faults drawn or not, the app stream is the same */
	xtc_sim_activate(9);
	app1 = xtc_sim_rand(XTC_SIM_RNG_APP);
	xtc_sim_activate(9);
	for (int i = 0; i < 10; i++)
		(void)xtc_sim_fault(500);
	app2 = xtc_sim_rand(XTC_SIM_RNG_APP);
	CHECK(app1 == app2);
	xtc_sim_deactivate();
}

static void test_fault_points(void)
{
	char name[32];
	uint64_t fires_a;

	xtc_sim_activate(3);
	CHECK_EQ(xtc_sim_fault_point("p.a"), 0); /* not enabled */
	xtc_sim_fault_points_enable(1000);
	CHECK_EQ(xtc_sim_fault_points_seen(), 0);
	for (int i = 0; i < 5; i++)
		CHECK_EQ(xtc_sim_fault_point("p.a"), 1);
	CHECK_EQ(xtc_sim_fault_point("p.b"), 1);
	XTC_SIM_FAULT_POINT("p.c"); /* the macro reaches it too */
	CHECK_EQ(xtc_sim_fault_point_fires("p.a"), 5);
	CHECK_EQ(xtc_sim_fault_point_fires("p.b"), 1);
	CHECK_EQ(xtc_sim_fault_point_fires("p.c"), 1);
	CHECK_EQ(xtc_sim_fault_point_fires("p.unknown"), 0);
	CHECK_EQ(xtc_sim_fault_point_fires(NULL), 0);
	CHECK_EQ(xtc_sim_fault_point(NULL), 0);
	CHECK_EQ(xtc_sim_fault_points_seen(), 3);
	/* disabled: no more fires, the counts stay readable */
	xtc_sim_fault_points_disable();
	CHECK_EQ(xtc_sim_fault_point("p.a"), 0);
	CHECK_EQ(xtc_sim_fault_point_fires("p.a"), 5);
	/* half the reaches fire, and the same seed fires the same ones */
	xtc_sim_activate(11);
	xtc_sim_fault_points_enable(500);
	CHECK_EQ(xtc_sim_fault_points_seen(), 0); /* enable resets */
	for (int i = 0; i < 400; i++) {
		snprintf(name, sizeof name, "p.%d", i % 4);
		(void)xtc_sim_fault_point(name);
	}
	fires_a = xtc_sim_fault_point_fires("p.0") +
	          xtc_sim_fault_point_fires("p.1") +
	          xtc_sim_fault_point_fires("p.2") +
	          xtc_sim_fault_point_fires("p.3");
	CHECK(fires_a > 120 && fires_a < 280);
	CHECK_EQ(xtc_sim_fault_points_seen(), 4);
	uint64_t per[4];
	for (int k = 0; k < 4; k++) {
		snprintf(name, sizeof name, "p.%d", k);
		per[k] = xtc_sim_fault_point_fires(name);
	}
	xtc_sim_activate(11);
	xtc_sim_fault_points_enable(500);
	for (int i = 0; i < 400; i++) {
		snprintf(name, sizeof name, "p.%d", i % 4);
		(void)xtc_sim_fault_point(name);
	}
	for (int k = 0; k < 4; k++) {
		snprintf(name, sizeof name, "p.%d", k);
		CHECK_EQ(xtc_sim_fault_point_fires(name), per[k]);
	}
	xtc_sim_fault_points_disable();
	xtc_sim_deactivate();
}

/* Decisions of 64 sites for one seed, as a bit mask. */
static uint64_t buggify_mask(uint64_t seed)
{
	char name[32];
	uint64_t mask = 0;

	xtc_sim_activate(seed);
	for (int i = 0; i < 64; i++) {
		snprintf(name, sizeof name, "site.%d", i);
		if (XTC_SIM_BUGGIFY(name))
			mask |= (uint64_t)1 << i;
	}
	return mask;
}

static void test_buggify(void)
{
	char name[32], buf[8];
	int on = -1, active = 0;
	uint64_t m1, m2, differs = 0;

	xtc_sim_buggify_enable(500);
	m1 = buggify_mask(5);
	/* a site keeps its decision for the whole run */
	for (int i = 0; i < 64; i++) {
		snprintf(name, sizeof name, "site.%d", i);
		CHECK_EQ(xtc_sim_buggify(name), (m1 >> i) & 1);
		active += (int)((m1 >> i) & 1);
	}
	CHECK_EQ(xtc_sim_buggify_reached_count(), 64);
	CHECK_EQ(xtc_sim_buggify_active_count(), active);
	CHECK(active > 10 && active < 54);
	/* sites in reach order, names truncated to the buffer */
	CHECK_EQ(xtc_sim_buggify_site(0, buf, sizeof buf, &on), XTC_OK);
	CHECK(strcmp(buf, "site.0") == 0);
	CHECK_EQ(on, (int)(m1 & 1));
	CHECK_EQ(xtc_sim_buggify_site(63, buf, 4, NULL), XTC_OK);
	CHECK(strcmp(buf, "sit") == 0);
	CHECK_EQ(xtc_sim_buggify_site(64, buf, sizeof buf, &on), XTC_E_INVAL);
	CHECK_EQ(xtc_sim_buggify_site(-1, buf, sizeof buf, &on), XTC_E_INVAL);
	CHECK_EQ(xtc_sim_buggify_site(0, NULL, 8, &on), XTC_E_INVAL);
	CHECK_EQ(xtc_sim_buggify_site(0, NULL, 0, &on), XTC_OK);
	/* a new run (activation) decides afresh: same seed, same decisions */
	m2 = buggify_mask(5);
	CHECK(m1 == m2);
	for (uint64_t s = 100; s < 104; s++)
		differs |= buggify_mask(s) ^ m1;
	CHECK(differs != 0);
	/* buggify_fault: a fresh coin, only while buggify is enabled */
	xtc_sim_activate(1);
	CHECK_EQ(xtc_sim_buggify_fault(1000), 1);
	CHECK_EQ(xtc_sim_buggify_fault(0), 0);
	xtc_sim_buggify_disable();
	CHECK_EQ(xtc_sim_buggify_fault(1000), 0);
	CHECK_EQ(xtc_sim_buggify("site.0"), 0);
	/* pct 0 enabled: never */
	xtc_sim_buggify_enable(0);
	CHECK_EQ(xtc_sim_buggify("site.0"), 0);
	xtc_sim_buggify_disable();
	xtc_sim_deactivate();
}

/* ---- a seeded executor run with buggify sites in its procs ----------------- */

struct bw {
	int id;
	uint64_t trace;
};

static void bw_body(void *arg)
{
	struct bw *w = arg;
	char site[32];

	for (int i = 0; i < 20; i++) {
		snprintf(site, sizeof site, "worker.%d.slow", w->id);
		if (XTC_SIM_BUGGIFY(site))
			xtc_yield(); /* the pessimal path: yield once more */
		if (xtc_sim_fault(100))
			xtc_yield();
		w->trace = w->trace * 31 + (uint64_t)xtc_exec_loop_id() + 1;
		xtc_yield();
	}
}

static uint64_t sim_run(uint64_t seed, int *active)
{
	xtc_exec_t *e = NULL;
	struct bw w[8];
	xtc_proc_opts_t o;
	uint64_t h;

	memset(&o, 0, sizeof o);
	o.migratable = 1;
	REQUIRE(xtc_exec_init(&e, 3) == XTC_OK);
	for (int i = 0; i < 8; i++) {
		w[i].id = i;
		w[i].trace = 0;
		REQUIRE(xtc_proc_spawn(xtc_exec_loop(e, 0), bw_body, &w[i], &o,
		                       NULL) == XTC_OK);
	}
	xtc_sim_buggify_enable(400);
	CHECK_EQ(xtc_sim_exec_run(e, seed, 1000000), XTC_OK);
	*active = xtc_sim_buggify_active_count();
	xtc_sim_buggify_disable();
	h = xtc_sim_state_hash(e);
	for (int i = 0; i < 8; i++)
		h = h * 1099511628211ull + w[i].trace;
	CHECK_EQ(xtc_exec_fini(e), XTC_OK);
	return h;
}

static void test_sim_replay(void)
{
	int a1 = 0, a2 = 0, a3 = 0;
	uint64_t h1, h2, h3;

	if (!xtc_sim_supported()) {
		fprintf(stderr, "test_sim_replay: skipped (not a sim build)\n");
		return;
	}
	h1 = sim_run(77, &a1);
	h2 = sim_run(77, &a2);
	CHECK(h1 == h2);
	CHECK_EQ(a1, a2);
	h3 = sim_run(78, &a3);
	CHECK(h3 != h1 || a3 != a1);
}

int main(int argc, char **argv)
{
	test_only = argc > 1 ? argv[1] : NULL;
	RUN(test_inactive);
	RUN(test_fault_coin);
	RUN(test_fault_points);
	RUN(test_buggify);
	RUN(test_sim_replay);
	if (failures) {
		fprintf(stderr, "test_sim_fault: %d failure(s)\n", failures);
		return 1;
	}
	printf("test_sim_fault: ok\n");
	return 0;
}
