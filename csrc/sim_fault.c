/*
 * sim_fault.c - fault injection for simulated runs: seeded fault coins,
 * named fault points and buggify sites (xtc_sim.h, libxtc's API).
 *
 * Model. Three kinds of decision, all drawn from the simulator's seeded
 * streams so a run replays bit for bit and enabling them never shifts the
 * schedule (the scheduler draws from its own streams):
 *   xtc_sim_fault(pct)        a fresh coin per call on XTC_SIM_RNG_FAULT;
 *   fault points (by name)    once enabled, every reach of a named point
 *                             flips a coin on the FAULT stream; a hit is
 *                             counted per name and returned, and the code
 *                             at the point takes its faulty branch;
 *   buggify sites (by name)   the coin is flipped once per run per name on
 *                             XTC_SIM_RNG_BUGGIFY, on the first reach, and
 *                             cached: a buggified site stays buggified for
 *                             the whole run, so its pessimal-but-legal path
 *                             is taken consistently (FoundationDB's rule).
 * Outside an active simulation every decision is 0, and the cost at a
 * point is a call and two loads; XTC_INJECT_DISABLE compiles the macros
 * (XTC_SIM_FAULT_POINT, XTC_SIM_BUGGIFY) out entirely.
 *
 * State: name tables of fixed size (FP_MAX / BG_MAX names, SITE_NAME-1
 * bytes kept of each) behind one mutex: a simulated run is one thread, but
 * fault points may also be reached by real threads while a simulation is
 * merely active, and these paths are never hot. Enabling resets the
 * table it governs; xtc_sim_activate resets the buggify decisions (each
 * run decides afresh from its seed), fires stay readable after a disable.
 *
 * Rejected: hashing names into the stream seed instead of drawing in
 * reach order (a site's decision would not depend on the schedule, which
 * is what a seed sweep should explore); storing the caller's name pointer
 * (names built in a buffer would alias).
 */
#include "rtcode_int.h" /* first: this file is runtime code */
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "xtc_sim.h"
#include "sim_int.h"

#define FP_MAX   256
#define BG_MAX   256
#define SITE_NAME 48

static struct {
	pthread_mutex_t lock;
	_Atomic unsigned fp_pct;  /* 0 = fault points off */
	_Atomic unsigned bg_pct;  /* 0 = buggify off */
	int fp_n, bg_n, bg_active;
	struct { char name[SITE_NAME]; uint64_t fires; } fp[FP_MAX];
	struct { char name[SITE_NAME]; int on; } bg[BG_MAX];
} g = { .lock = PTHREAD_MUTEX_INITIALIZER };

/* Copy at most n - 1 bytes of src and a terminator (n >= 1). */
static void name_copy(char *dst, size_t n, const char *src)
{
	size_t len = strnlen(src, n - 1);

	memcpy(dst, src, len);
	dst[len] = '\0';
}

static int coin(int stream, unsigned pct_per_1000)
{
	if (pct_per_1000 == 0)
		return 0;
	if (pct_per_1000 >= 1000)
		return 1;
	return xtc_sim_rand(stream) % 1000u < pct_per_1000;
}

int xtc_sim_fault(unsigned pct_per_1000)
{
	if (!xtc_sim_active())
		return 0;
	return coin(XTC_SIM_RNG_FAULT, pct_per_1000);
}

/* ---- fault points ------------------------------------------------------- */

void xtc_sim_fault_points_enable(unsigned pct_per_1000)
{
	pthread_mutex_lock(&g.lock);
	g.fp_n = 0;
	atomic_store_explicit(&g.fp_pct, pct_per_1000 > 1000 ? 1000
	                      : pct_per_1000, memory_order_relaxed);
	pthread_mutex_unlock(&g.lock);
}

void xtc_sim_fault_points_disable(void)
{
	atomic_store_explicit(&g.fp_pct, 0, memory_order_relaxed);
}

/* Index of name in the fault-point table, added when absent; -1 when the
 * table is full. Under g.lock. */
static int fp_find(const char *name, int add)
{
	for (int i = 0; i < g.fp_n; i++)
		if (strncmp(g.fp[i].name, name, SITE_NAME - 1) == 0)
			return i;
	if (!add || g.fp_n == FP_MAX)
		return -1;
	name_copy(g.fp[g.fp_n].name, SITE_NAME, name);
	g.fp[g.fp_n].fires = 0;
	return g.fp_n++;
}

int xtc_sim_fault_point(const char *name)
{
	unsigned pct = atomic_load_explicit(&g.fp_pct, memory_order_relaxed);
	int i, hit;

	if (pct == 0 || name == NULL || !xtc_sim_active())
		return 0;
	pthread_mutex_lock(&g.lock);
	i = fp_find(name, 1);
	hit = i >= 0 && coin(XTC_SIM_RNG_FAULT, pct);
	if (hit)
		g.fp[i].fires++;
	pthread_mutex_unlock(&g.lock);
	return hit;
}

uint64_t xtc_sim_fault_point_fires(const char *name)
{
	uint64_t n = 0;
	int i;

	if (name == NULL)
		return 0;
	pthread_mutex_lock(&g.lock);
	i = fp_find(name, 0);
	if (i >= 0)
		n = g.fp[i].fires;
	pthread_mutex_unlock(&g.lock);
	return n;
}

int xtc_sim_fault_points_seen(void)
{
	int n;

	pthread_mutex_lock(&g.lock);
	n = g.fp_n;
	pthread_mutex_unlock(&g.lock);
	return n;
}

/* ---- buggify ------------------------------------------------------------ */

static void bg_reset_locked(void)
{
	g.bg_n = 0;
	g.bg_active = 0;
}

/* Called by xtc_sim_activate: a new run decides every site afresh. */
void xtc__sim_fault_reset(void)
{
	pthread_mutex_lock(&g.lock);
	bg_reset_locked();
	pthread_mutex_unlock(&g.lock);
}

void xtc_sim_buggify_enable(unsigned pct_per_1000)
{
	pthread_mutex_lock(&g.lock);
	bg_reset_locked();
	atomic_store_explicit(&g.bg_pct, pct_per_1000 > 1000 ? 1000
	                      : pct_per_1000, memory_order_relaxed);
	pthread_mutex_unlock(&g.lock);
}

void xtc_sim_buggify_disable(void)
{
	atomic_store_explicit(&g.bg_pct, 0, memory_order_relaxed);
}

int xtc_sim_buggify(const char *name)
{
	unsigned pct = atomic_load_explicit(&g.bg_pct, memory_order_relaxed);
	int on = 0, i;

	if (pct == 0 || name == NULL || !xtc_sim_active())
		return 0;
	pthread_mutex_lock(&g.lock);
	for (i = 0; i < g.bg_n; i++)
		if (strncmp(g.bg[i].name, name, SITE_NAME - 1) == 0)
			break;
	if (i < g.bg_n) {
		on = g.bg[i].on;
	} else if (g.bg_n < BG_MAX) {
		on = coin(XTC_SIM_RNG_BUGGIFY, pct);
		name_copy(g.bg[i].name, SITE_NAME, name);
		g.bg[i].on = on;
		g.bg_n++;
		g.bg_active += on;
	} /* table full: a site never seen before stays off */
	pthread_mutex_unlock(&g.lock);
	return on;
}

int xtc_sim_buggify_fault(unsigned pct_per_1000)
{
	if (atomic_load_explicit(&g.bg_pct, memory_order_relaxed) == 0 ||
	    !xtc_sim_active())
		return 0;
	return coin(XTC_SIM_RNG_BUGGIFY, pct_per_1000);
}

int xtc_sim_buggify_active_count(void)
{
	int n;

	pthread_mutex_lock(&g.lock);
	n = g.bg_active;
	pthread_mutex_unlock(&g.lock);
	return n;
}

int xtc_sim_buggify_reached_count(void)
{
	int n;

	pthread_mutex_lock(&g.lock);
	n = g.bg_n;
	pthread_mutex_unlock(&g.lock);
	return n;
}

int xtc_sim_buggify_site(int idx, char *buf, size_t buflen,
                         int *out_activated)
{
	int rc = XTC_OK;

	if (buf == NULL && buflen > 0)
		return XTC_E_INVAL;
	pthread_mutex_lock(&g.lock);
	if (idx < 0 || idx >= g.bg_n) {
		rc = XTC_E_INVAL;
	} else {
		if (buflen > 0)
			name_copy(buf, buflen, g.bg[idx].name);
		if (out_activated != NULL)
			*out_activated = g.bg[idx].on;
	}
	pthread_mutex_unlock(&g.lock);
	return rc;
}
