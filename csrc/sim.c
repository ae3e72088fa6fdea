/*
 * sim.c - deterministic simulation of the executor (XTC_SIM builds).
 *
 * Model: the real executor code (exec.c, loop.c, proc.c, sched_class.c) runs on
 * the calling thread. Each executor loop is an entity; at every turn a seeded
 * generator picks one runnable loop and that loop takes exactly one step
 * (its submission ring, one loop step, a steal when idle). The runtime clock
 * is the virtual clock below (through xtc__up.clock): it stands still while
 * a task runs, so every run costs 0 ns (the class charge floor then makes the
 * run ratio equal the share ratio), and when no loop is runnable it jumps to
 * the earliest timer deadline. Nothing blocks: pollers are only polled.
 *
 * Invariants: the only inputs of a run are the program and the seed; random
 * draws come from independent streams (splitmix64 of seed and stream), so a
 * draw added at one site never shifts another's sequence; the state hash is
 * built from logical counters only (never addresses).
 *
 * Termination: no runnable loop and no timer: XTC_OK if every loop is
 * quiescent, else XTC_E_DEADLK (live tasks all parked with nothing that could
 * wake them: a lost wake). max_steps exhausted: XTC_E_AGAIN. A periodic
 * xtc_sim_check failure: XTC_E_INTERNAL.
 *
 * Alternatives rejected: simulating threads with real carriers and a global
 * lock (the OS scheduler would still choose the interleaving); a separate
 * model of the scheduler (it would prove the model, not our code).
 */
#include "rtcode_int.h" /* first: this file is runtime code */
#include <stdatomic.h>
#include <string.h>

#include "xtc_sim.h"
#include "sched_int.h"
#include "sim_int.h"

#define CHECK_EVERY 64

static struct {
	int active;
	uint64_t seed;
	uint64_t stream[XTC_SIM_RNG_NSTREAMS];
	int clock_on;
	int64_t now;
	unsigned pessimal;
	long steps;
} sim;

static uint64_t splitmix(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

int xtc_sim_supported(void)
{
#ifdef XTC_SIM
	return 1;
#else
	return 0;
#endif
}

void xtc_sim_activate(uint64_t seed)
{
	sim.active = 1;
	sim.seed = seed;
	xtc__sim_fault_reset(); /* buggify decides afresh in each run */
	for (int i = 0; i < XTC_SIM_RNG_NSTREAMS; i++) {
		uint64_t s = seed ^ (0xd1b54a32d192ed03ull * (uint64_t)(i + 1));
		sim.stream[i] = splitmix(&s);
	}
}

void xtc_sim_deactivate(void)
{
	sim.active = 0;
}

int xtc_sim_active(void)
{
	return sim.active;
}

uint64_t xtc_sim_rand(int stream)
{
	if (!sim.active || stream < 0 || stream >= XTC_SIM_RNG_NSTREAMS)
		return 0;
	return splitmix(&sim.stream[stream]);
}

void xtc_sim_sched_pessimal(unsigned pct_per_1000)
{
	sim.pessimal = pct_per_1000 > 1000 ? 1000 : pct_per_1000;
}

/* ---- virtual clock ------------------------------------------------------ */

#ifdef XTC_SIM
static int64_t sim_now(void)
{
	return sim.now;
}
#endif

void xtc_sim_clock_enable(int64_t start_ns)
{
#ifdef XTC_SIM
	sim.now = start_ns;
	sim.clock_on = 1;
	xtc__up.clock = sim_now;
#else
	(void)start_ns;
#endif
}

void xtc_sim_clock_disable(void)
{
	if (sim.clock_on) {
		xtc__up.clock = NULL;
		sim.clock_on = 0;
	}
}

int xtc_sim_clock_enabled(void)
{
	return sim.clock_on;
}

void xtc_sim_clock_advance(int64_t delta_ns)
{
	if (sim.clock_on && delta_ns > 0)
		sim.now += delta_ns;
}

void xtc_sim_clock_set(int64_t ns)
{
	if (sim.clock_on && ns > sim.now)
		sim.now = ns; /* monotonic: never backwards */
}

int64_t xtc_sim_clock_now(void)
{
	return sim.clock_on ? sim.now : xtc_clock_mono();
}

/* ---- the run ------------------------------------------------------------ */

long xtc_sim_steps(void)
{
	return sim.steps;
}

int xtc_sim_check(struct xtc_exec *e)
{
	if (!xtc__exec_valid(e))
		return XTC_E_INVAL;
	return xtc__exec_check(e);
}

uint64_t xtc_sim_state_hash(struct xtc_exec *e)
{
	if (!xtc__exec_valid(e))
		return 0;
	return xtc__exec_hash(e);
}

#ifdef XTC_SIM
/* Choose the loop for this turn among the runnable ones; -1 if none. */
static int choose(struct xtc_exec *e, int last, int *runnable)
{
	int n = xtc_exec_n_loops(e), k = 0;

	for (int i = 0; i < n; i++)
		if (xtc__exec_sim_runnable(e, i, sim.now))
			runnable[k++] = i;
	if (k == 0)
		return -1;
	if (sim.pessimal && last >= 0 &&
	    xtc_sim_rand(XTC_SIM_RNG_SCHED) % 1000 < sim.pessimal)
		for (int i = 0; i < k; i++)
			if (runnable[i] == last)
				return last;
	return runnable[xtc_sim_rand(XTC_SIM_RNG_SCHED) % (uint64_t)k];
}

static int run_loop(struct xtc_exec *e, long max_steps)
{
	int runnable[1024], last = -1, rc;

	for (;;) {
		int i;

		if (xtc__exec_stopped(e))
			return XTC_OK;
		i = choose(e, last, runnable);
		if (i < 0) {
			int64_t d = xtc__exec_sim_next_deadline(e);
			if (d >= 0) {
				if (d > sim.now)
					sim.now = d;
				continue;
			}
			return xtc__exec_sim_all_quiescent(e) ? XTC_OK
			    : XTC_E_DEADLK;
		}
		if (max_steps > 0 && sim.steps >= max_steps)
			return XTC_E_AGAIN;
		rc = xtc__exec_sim_step(e, i);
		if (rc < 0)
			return rc;
		sim.steps++;
		last = i;
		if (sim.steps % CHECK_EVERY == 0 &&
		    xtc__exec_check(e) != XTC_OK)
			return XTC_E_INTERNAL;
	}
}
#endif

int xtc_sim_exec_run(struct xtc_exec *e, uint64_t seed, long max_steps)
{
#ifdef XTC_SIM
	int rc, had_clock = sim.clock_on;

	if (!xtc__exec_valid(e) || xtc__exec_running(e) ||
	    xtc_exec_n_loops(e) > 1024 || xtc__loop_current() != NULL)
		return XTC_E_INVAL;
	xtc__exec_set_running(e, 1);
	xtc_sim_activate(seed);
	if (!had_clock)
		xtc_sim_clock_enable(0);
	sim.steps = 0;
	xtc__exec_sim_begin(e, xtc_sim_rand(XTC_SIM_RNG_STEAL));
	rc = run_loop(e, max_steps);
	if (rc == XTC_OK && xtc__exec_check(e) != XTC_OK)
		rc = XTC_E_INTERNAL;
	if (!had_clock)
		xtc_sim_clock_disable();
	xtc_sim_deactivate();
	xtc__exec_set_running(e, 0);
	return rc;
#else
	(void)e;
	(void)seed;
	(void)max_steps;
	return XTC_E_NOSYS;
#endif
}
