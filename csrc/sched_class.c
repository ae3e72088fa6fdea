/*
 * sched_class.c - proportional-share scheduling classes (Glommio-style vruntime).
 *
 * Model: a loop may carry up to XTC_LOOP_MAX_CLASSES classes plus the
 * implicit default lane (untagged tasks, 100 shares). A ready task whose
 * t->sched_class names a class of this loop waits in that class's FIFO (an
 * intrusive list through t->node, which the READY owner holds); untagged
 * tasks stay on the loop's own run queue/deque. At every dispatch the lane
 * with the lowest virtual runtime runs its oldest task; after the run the
 * lane is charged
 *     vruntime += (max(ran_ns, 1000) * ((1 << 22) / shares)) >> 12
 * where ran_ns is the MEASURED wall time of that run (the loop reads the
 * clock only while a timed feature is on), clamped against OS-preemption
 * outliers (charge_of below). Charging measured time, not a
 * count of runs, is what makes three always-runnable classes split the CPU
 * in their share ratio on real hardware; under the simulator's frozen clock
 * every run costs the 1 us floor and the run ratio equals the share ratio.
 *
 * Invariants (owner thread only, except the relaxed-atomic counters that the
 * getters read from anywhere):
 *  - a task is in at most one class queue, and only while READY;
 *  - ties go to the default lane, then to the lower creation index;
 *  - a new class starts at the minimum vruntime of the existing classes; a
 *    lane that was idle (nothing queued, not running) is lifted to the
 *    minimum of the active lanes when it becomes ready again (CFS's rule),
 *    so sleeping never banks credit that would later starve the others;
 *  - class queues are never stolen from: class work stays on its loop.
 *
 * Latency classes do not change the pick: a non-zero latency tightens the
 * loop's cooperative yield budget to the smallest latency, so fibers that
 * call xtc_yield_if_due() give the picker a chance within that bound.
 * Whether the bound held is measured, not assumed: a task entering a
 * latency class's queue is stamped (t->xq.ready_at, one clock read), and
 * the start of its run (the clock the loop read anyway) closes the wait;
 * waits over the bound are counted as late (xtc_sched_class_stats). The
 * stall watchdog attributes each stall to the lane of the run it caught
 * (xtc__class_stall_note, after the charge recorded that lane). Classes
 * without a bound are not stamped: their runs cost no extra clock read.
 *
 * Alternatives rejected: a heap of lanes (16 lanes scan in a few ns and the
 * scan has no update cost); counting runs instead of time (shares then only
 * hold when every run costs the same).
 */
#include "rtcode_int.h" /* first: this file is runtime code */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "sched_int.h"

#define CLASS_MAGIC 0x434c4153u /* "CLAS" */
#define RECIP(shares) ((uint64_t)((1u << 22) / (unsigned)(shares)))

struct xtc_run_class {
	uint32_t magic;
	int idx;
	int shares;
	int64_t latency_ns;
	uint64_t recip;
	xtc_loop_t *loop;
	xtc_task_t *qhead, *qtail;
	_Atomic uint64_t vruntime;
	_Atomic uint64_t runs;
	_Atomic uint64_t cpu_ns;
	uint64_t ewma;   /* smoothed charge per run (outlier clamp) */
	/* what xtc_sched_class_stats reports: stalls of its runs, waits of
	 * a latency class (owner writes, anyone reads) */
	_Atomic uint64_t stalls;
	_Atomic uint64_t waits, late, wait_ns;
	_Atomic int64_t wait_max;
};

typedef struct xtc__classes {
	int n;
	struct xtc_run_class *v[XTC_LOOP_MAX_CLASSES];
	uint64_t def_vruntime;
	uint64_t def_ewma;
	int def_active;   /* default lane was ready or ran at the last pick */
	uint64_t def_runs; /* picks that served the default lane while ready */
	struct xtc_run_class *running; /* lane of the task in flight */
	struct xtc_run_class *last;    /* lane the last charge went to */
	int in_run;
	int64_t queued;
} xtc__classes_t;

static inline uint64_t ld(_Atomic uint64_t *p)
{
	return atomic_load_explicit(p, memory_order_relaxed);
}

static inline void add(_Atomic uint64_t *p, uint64_t d)
{
	/* single writer (the owner): a plain read-modify-write is enough */
	atomic_store_explicit(p, ld(p) + d, memory_order_relaxed);
}

static int valid_class(xtc_exec_class_t c)
{
	return c != NULL && c->magic == CLASS_MAGIC;
}

/* Minimum vruntime over the lanes that have work (queued or running). */
static int active_min(xtc__classes_t *cs, uint64_t *out)
{
	int found = 0;
	uint64_t m = UINT64_MAX;

	if (cs->def_active) {
		m = cs->def_vruntime;
		found = 1;
	}
	for (int i = 0; i < cs->n; i++) {
		struct xtc_run_class *c = cs->v[i];
		if (c->qhead == NULL && !(cs->in_run && cs->running == c))
			continue;
		if (ld(&c->vruntime) < m)
			m = ld(&c->vruntime);
		found = 1;
	}
	*out = m;
	return found;
}

xtc_loop_t *xtc__class_loop(xtc_exec_class_t cls)
{
	return valid_class(cls) ? cls->loop : NULL;
}

int xtc__class_index(xtc_exec_class_t cls)
{
	return valid_class(cls) ? cls->idx : -1;
}

int xtc__class_check(xtc_loop_t *loop, xtc_exec_class_t cls)
{
	if (cls == NULL)
		return XTC_OK;
	if (!valid_class(cls) || cls->loop != loop)
		return XTC_E_INVAL;
	return XTC_OK;
}

int xtc__class_enqueue(xtc_loop_t *loop, xtc_task_t *t)
{
	xtc__classes_t *cs = loop->up.classes;
	struct xtc_run_class *c = t->sched_class;
	uint64_t m;

	if (cs == NULL || c == NULL || !valid_class(c) || c->loop != loop)
		return 0;
	if (c->qhead == NULL && !(cs->in_run && cs->running == c) &&
	    active_min(cs, &m) && ld(&c->vruntime) < m)
		atomic_store_explicit(&c->vruntime, m, memory_order_relaxed);
	if (c->latency_ns > 0)
		t->xq.ready_at = xtc__now(); /* its wait starts (run_begin) */
	t->node.next = NULL;
	if (c->qtail)
		c->qtail->node.next = (xtc__post_t *)t;
	else
		c->qhead = t;
	c->qtail = t;
	cs->queued++;
	return 1;
}

int xtc__class_choose(xtc_loop_t *loop, int default_ready)
{
	xtc__classes_t *cs = loop->up.classes;
	int best = -1;
	uint64_t bv, m;

	if (cs == NULL || cs->n == 0)
		return -1;
	if (default_ready && !cs->def_active) {
		/* the default lane comes back from idle: no banked credit */
		if (active_min(cs, &m) && cs->def_vruntime < m)
			cs->def_vruntime = m;
	}
	cs->def_active = default_ready;
	bv = default_ready ? cs->def_vruntime : UINT64_MAX;
	for (int i = 0; i < cs->n; i++) {
		struct xtc_run_class *c = cs->v[i];
		if (c->qhead != NULL && ld(&c->vruntime) < bv) {
			best = i;
			bv = ld(&c->vruntime);
		}
	}
	return best;
}

xtc_task_t *xtc__class_take(xtc_loop_t *loop, int lane)
{
	xtc__classes_t *cs = loop->up.classes;
	struct xtc_run_class *c;
	xtc_task_t *t;

	if (cs == NULL || cs->n == 0)
		return NULL;
	cs->in_run = 1;
	if (lane < 0 || lane >= cs->n || cs->v[lane]->qhead == NULL) {
		cs->running = NULL;
		if (cs->def_active)
			cs->def_runs++;
		return NULL;
	}
	c = cs->running = cs->v[lane];
	t = c->qhead;
	c->qhead = (xtc_task_t *)t->node.next;
	if (c->qhead == NULL)
		c->qtail = NULL;
	t->node.next = NULL;
	cs->queued--;
	add(&c->runs, 1);
	return t;
}

xtc_task_t *xtc__class_pick(xtc_loop_t *loop, int default_ready)
{
	return xtc__class_take(loop, xtc__class_choose(loop, default_ready));
}

uint32_t xtc__class_ready_mask(const xtc_loop_t *loop)
{
	const xtc__classes_t *cs = loop->up.classes;
	uint32_t m = 0;

	if (cs == NULL)
		return 0;
	for (int i = 0; i < cs->n; i++)
		if (cs->v[i]->qhead != NULL)
			m |= 1u << i;
	return m;
}

int xtc__class_lane_info(const xtc_loop_t *loop, int lane, int *shares,
                         uint64_t *runs)
{
	const xtc__classes_t *cs = loop->up.classes;

	if (lane < 0) {
		*shares = XTC_DEFAULT_CLASS_SHARES;
		*runs = cs != NULL ? cs->def_runs : 0;
		return XTC_OK;
	}
	if (cs == NULL || lane >= cs->n)
		return XTC_E_INVAL;
	*shares = cs->v[lane]->shares;
	*runs = ld(&cs->v[lane]->runs);
	return XTC_OK;
}

int xtc__class_count(const xtc_loop_t *loop)
{
	const xtc__classes_t *cs = loop->up.classes;
	return cs != NULL ? cs->n : 0;
}

/* The charge of one run: the measured time, floored at 1 us, and clamped
 * to OUTLIER_X times the lane's smoothed run time. The clamp exists because
 * the clock is wall time (a thread CPU clock costs ~750 ns per read here,
 * against ~40 ns for the vDSO monotonic clock): a carrier the OS
 * deschedules mid-run would be charged for time it did not run, and on a
 * busy machine that noise alone moved a 600:300:100 split to 0.51:0.35:0.14
 * (0.60:0.30:0.10 with the clamp, bench/bench_exec). The price: a lane
 * whose runs are mostly short but occasionally more than OUTLIER_X times
 * longer (less than 1 run in OUTLIER_X) is undercharged for those long
 * runs. A lane whose runs really grow follows within a few runs, since the
 * average tracks the clamped charge. */
#define OUTLIER_X 4u

static uint64_t charge_of(int64_t ran_ns, uint64_t *ewma)
{
	uint64_t cost = ran_ns < XTC_VRUNTIME_MIN_QUANTUM_NS
	    ? XTC_VRUNTIME_MIN_QUANTUM_NS : (uint64_t)ran_ns;

	if (*ewma != 0 && cost > OUTLIER_X * *ewma)
		cost = OUTLIER_X * *ewma;
	*ewma = *ewma == 0 ? cost : *ewma - *ewma / 8 + cost / 8;
	return cost;
}

void xtc__class_run_begin(xtc_loop_t *loop, xtc_task_t *t, int64_t now)
{
	xtc__classes_t *cs = loop->up.classes;
	struct xtc_run_class *c;
	int64_t w;

	if (cs == NULL || !cs->in_run || (c = cs->running) == NULL ||
	    c->latency_ns <= 0 || t->sched_class != c)
		return;
	w = now - t->xq.ready_at;
	if (w < 0)
		w = 0;
	add(&c->waits, 1);
	add(&c->wait_ns, (uint64_t)w);
	if (w > c->latency_ns)
		add(&c->late, 1);
	if (w > atomic_load_explicit(&c->wait_max, memory_order_relaxed))
		atomic_store_explicit(&c->wait_max, w, memory_order_relaxed);
}

void xtc__class_stall_note(xtc_loop_t *loop)
{
	xtc__classes_t *cs = loop->up.classes;

	if (cs != NULL && cs->last != NULL)
		add(&cs->last->stalls, 1);
}

void xtc__class_charge(xtc_loop_t *loop, xtc_task_t *t, int64_t ran_ns)
{
	xtc__classes_t *cs = loop->up.classes;
	struct xtc_run_class *c;
	uint64_t cost;

	(void)t; /* may be recycled already: charge the lane of the pick */
	if (cs == NULL || cs->n == 0)
		return;
	cs->last = cs->in_run ? cs->running : NULL;
	if (!cs->in_run)
		return;
	c = cs->running;
	if (c != NULL) {
		cost = charge_of(ran_ns, &c->ewma);
		add(&c->vruntime, (cost * c->recip) >> 12);
		add(&c->cpu_ns, ran_ns > 0 ? (uint64_t)ran_ns : 0);
	} else {
		cost = charge_of(ran_ns, &cs->def_ewma);
		cs->def_vruntime += (cost * RECIP(XTC_DEFAULT_CLASS_SHARES)) >> 12;
		cs->def_active = 1;
	}
	cs->in_run = 0;
	cs->running = NULL;
}

int64_t xtc__class_queued(const xtc_loop_t *loop)
{
	const xtc__classes_t *cs = loop->up.classes;
	return cs ? cs->queued : 0;
}

uint64_t xtc__class_hash(const xtc_loop_t *loop, uint64_t h)
{
	const xtc__classes_t *cs = loop->up.classes;

	if (cs == NULL)
		return h;
	h = xtc__hash_u64(h, cs->def_vruntime);
	for (int i = 0; i < cs->n; i++) {
		h = xtc__hash_u64(h, ld(&cs->v[i]->vruntime));
		h = xtc__hash_u64(h, ld(&cs->v[i]->runs));
	}
	return h;
}

void xtc__class_loop_fini(xtc_loop_t *loop)
{
	xtc__classes_t *cs = loop->up.classes;

	if (cs == NULL)
		return;
	for (int i = 0; i < cs->n; i++) {
		cs->v[i]->magic = 0;
		free(cs->v[i]);
	}
	free(cs);
	loop->up.classes = NULL;
}

static int64_t min_latency(const xtc__classes_t *cs)
{
	int64_t m = 0;

	for (int i = 0; i < cs->n; i++) {
		int64_t l = cs->v[i]->latency_ns;
		if (l > 0 && (m == 0 || l < m))
			m = l;
	}
	return m;
}

/* Latency classes only ever tighten the loop's yield budget: the loop
 * uses the smaller non-zero of the user's budget and lat_budget. */
static void tighten_budget(xtc_loop_t *loop, const xtc__classes_t *cs)
{
	loop->lat_budget = min_latency(cs);
	xtc__loop_budget_update(loop);
}

int xtc_exec_class_create(xtc_loop_t *loop, int shares, int64_t latency_ns,
                          xtc_exec_class_t *out)
{
	xtc__classes_t *cs;
	struct xtc_run_class *c;
	uint64_t m;

	if (loop == NULL || out == NULL || loop->magic != XTC__LOOP_LIVE ||
	    shares < 1 || shares > 1000 || latency_ns < 0)
		return XTC_E_INVAL;
	if (atomic_load(&loop->owner) != 0 && !xtc__loop_on_owner_thread(loop))
		return XTC_E_INVAL; /* setup-time or owner-thread only */
	cs = loop->up.classes;
	if (cs == NULL) {
		cs = calloc(1, sizeof(*cs));
		if (cs == NULL)
			return XTC_E_NOMEM;
		loop->up.classes = cs;
	}
	if (cs->n >= XTC_LOOP_MAX_CLASSES)
		return XTC_E_AGAIN;
	c = calloc(1, sizeof(*c));
	if (c == NULL)
		return XTC_E_NOMEM;
	c->magic = CLASS_MAGIC;
	c->idx = cs->n;
	c->shares = shares;
	c->latency_ns = latency_ns;
	c->recip = RECIP(shares);
	c->loop = loop;
	m = 0;
	for (int i = 0; i < cs->n; i++)
		if (i == 0 || ld(&cs->v[i]->vruntime) < m)
			m = ld(&cs->v[i]->vruntime);
	atomic_init(&c->vruntime, m);
	atomic_init(&c->runs, 0);
	atomic_init(&c->cpu_ns, 0);
	atomic_init(&c->stalls, 0);
	atomic_init(&c->waits, 0);
	atomic_init(&c->late, 0);
	atomic_init(&c->wait_ns, 0);
	atomic_init(&c->wait_max, 0);
	cs->v[cs->n++] = c;
	xtc__sched_attach(loop);
	xtc__loop_feat_set(loop, XTC__LF_CLASSES);
	tighten_budget(loop, cs);
	*out = c;
	return XTC_OK;
}

int xtc_exec_class_shares(xtc_exec_class_t cls)
{
	return valid_class(cls) ? cls->shares : 0;
}

int64_t xtc_exec_class_latency(xtc_exec_class_t cls)
{
	return valid_class(cls) ? cls->latency_ns : 0;
}

uint64_t xtc_exec_class_runs(xtc_exec_class_t cls)
{
	return valid_class(cls) ? ld(&cls->runs) : 0;
}

uint64_t xtc_exec_class_vruntime(xtc_exec_class_t cls)
{
	return valid_class(cls) ? ld(&cls->vruntime) : 0;
}

uint64_t xtc_exec_class_cpu_ns(xtc_exec_class_t cls)
{
	return valid_class(cls) ? ld(&cls->cpu_ns) : 0;
}

int xtc_sched_class_stats(xtc_exec_class_t cls, xtc_sched_class_stats_t *out)
{
	if (!valid_class(cls) || out == NULL || out->size != sizeof(*out) ||
	    out->version != XTC_SCHED_VERSION)
		return XTC_E_INVAL;
	memset((char *)out + 2 * sizeof(uint32_t), 0,
	    sizeof(*out) - 2 * sizeof(uint32_t));
	out->lane = cls->idx;
	out->shares = cls->shares;
	out->latency_ns = cls->latency_ns;
	out->runs = ld(&cls->runs);
	out->cpu_ns = ld(&cls->cpu_ns);
	out->stalls = ld(&cls->stalls);
	out->waits = ld(&cls->waits);
	out->late = ld(&cls->late);
	out->wait_ns = ld(&cls->wait_ns);
	out->wait_max_ns = atomic_load_explicit(&cls->wait_max,
	    memory_order_relaxed);
	return XTC_OK;
}
