/*
 * sched.c - the pick: the one owner of "what runs next" on a loop.
 *
 * Model: the loop (loop.c) asks its hooks table which task runs next, where
 * a ready task goes, and what to do around each run. This file is the only
 * writer of that table (xtc__sched_attach) and routes each hook to the
 * modules switched on for the loop: the scheduling classes (sched_class.c: the
 * ordinary picker, vruntime order over the default lane and 16 class
 * lanes), the stall watchdog (sched_stall.c), preemption (preempt.c, a lower
 * layer), an optional lane policy (below), and what an executor registers
 * for its loops (xtc__sched_exec_register: the stealable deque that backs
 * the default lane, the "alone" bookkeeping of a preemptible run). The
 * executor never writes hooks itself, so the dependencies point one way:
 * loop <- sched <- exec.
 *
 * Lane policies (xtc_sched.h, XTC_SCHED_POLICY builds): a lane is a queue
 * the loop already owns (lane -1 the default lane, lanes 0..15 the class
 * queues); the policy only chooses among the ready ones. At each selection
 * opportunity (a pick with at least one lane ready) the ordinary picker's
 * choice is computed first (sched_class.c keeps its idle-lift state exactly as
 * without a policy), then:
 *   1. a ready lane whose bypass count reached max_bypass is served (the
 *      oldest, ties to the lower id): the override that bounds the wait;
 *   2. else with one ready lane it is served (nothing to choose);
 *   3. else select() sees the snapshot of the ready lanes by lane id and
 *      returns a ready lane, XTC_SCHED_DEFAULT (the ordinary choice), or
 *      anything else (invalid: the ordinary choice, counted).
 * Every ready lane not served has its bypass count raised, the served one
 * and every lane that is not ready are reset. A lane at max_bypass waits
 * at most for the lanes at least as old, fewer than L, so each ready lane
 * is served within max_bypass + L opportunities, whatever select returns.
 *
 * Demotion (LibPreemptible's two-level queue, loop_int.h): a default-lane
 * fiber whose slice ran out is READY at the loop's demoted level. The pick
 * serves it after everything else the default lane holds (the run queue,
 * the executor's deque), the carrier having drained its inbox and, with
 * the drain budget ignoring demoted work, its submission ring; the class
 * decision counts it as default-lane work, so shares between lanes keep
 * their meaning. Aging: once the oldest demoted task waited
 * XTC__DEMOTE_AGE_NS it is served first, never twice in a row (waited
 * until the last run's end: a pick follows one by the scheduler's own
 * work, so aging costs no clock read per pick).
 *
 * Invariants: hooks are written only here; policy state exists only when a
 * policy was installed or a batch group registered (loop->up.sched), and the
 * pick reads it only while classes exist (with the default lane alone there
 * is nothing to choose), so a loop without classes pays nothing, and one
 * with classes but no policy pays one pointer test per pick.
 *
 * Alternatives rejected: policy-owned queues (a vtable owning enqueue,
 * dequeue and stealing duplicates task lifetime and wake handling, and
 * widens what has to be proven); a wall-time bypass bound (clock reads in
 * the picker, and no replay under the simulator); calling select when one
 * lane is ready or an override is due (a call whose answer cannot matter).
 */
#include "rtcode_int.h" /* first: this file is runtime code */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "sched_int.h"
#include "preempt_int.h"

#define NLANES (XTC_LOOP_MAX_CLASSES + 1) /* index = lane id + 1 */

struct xtc__sched {
	/* the installed policy (a copy), on == 0: none */
	int on;
	uint32_t max_bypass;
	xtc_sched_select_fn select;
	void *user;
	int cont_last;                 /* continuous policy: last tie winner */
	uint32_t bypass[NLANES];
	struct {
		int32_t groups, active, ready, waiting;
	} batch[NLANES];
	xtc_sched_lane_t snap[NLANES];
	/* stats: written by the owner, read from any thread */
	_Atomic uint64_t opportunities, selects, defaults, invalid, forced,
	    max_wait;
};

static inline uint64_t ld(_Atomic uint64_t *p)
{
	return atomic_load_explicit(p, memory_order_relaxed);
}

static inline void bump(_Atomic uint64_t *p)
{
	/* single writer (the owner): a plain read-modify-write is enough */
	atomic_store_explicit(p, ld(p) + 1, memory_order_relaxed);
}

static const xtc__sched_exec_t *exec_of(const xtc_loop_t *l)
{
	return l->hooks.ctx;
}

static int def_ready(xtc_loop_t *l, const xtc__sched_exec_t *ex)
{
	return l->rq_head != NULL ||
	    (ex != NULL && ex->def_ready != NULL && ex->def_ready(l));
}

/* ------------------------------------------------------------------ */
/* Lane policy pick                                                     */
/* ------------------------------------------------------------------ */

#ifdef XTC_SCHED_POLICY
static uint32_t clamp0(int32_t v)
{
	return v > 0 ? (uint32_t)v : 0;
}

/* The snapshot of the ready lanes rm (bit k: lane k - 1), by lane id. */
static int snapshot(xtc_loop_t *l, struct xtc__sched *s, uint32_t rm)
{
	int n = 0;

	for (uint32_t m = rm; m != 0; m &= m - 1) {
		int k = __builtin_ctz(m), shares;
		xtc_sched_lane_t *o = &s->snap[n++];

		o->id = k - 1;
		(void)xtc__class_lane_info(l, k - 1, &shares, &o->runs);
		o->shares = shares;
		o->bypass = s->bypass[k];
		o->batch_groups = clamp0(s->batch[k].groups);
		o->batch_active = clamp0(s->batch[k].active);
		o->batch_ready = clamp0(s->batch[k].ready);
		o->batch_waiting = clamp0(s->batch[k].waiting);
	}
	return n;
}

/* Lane ids index bit k = id + 1 of the ready mask rm and of s->bypass. */
static xtc_task_t *policy_pick(xtc_loop_t *l, struct xtc__sched *s, int def)
{
	uint32_t rm = xtc__class_ready_mask(l) << 1 | (def ? 1u : 0u);
	int ord = xtc__class_choose(l, def);
	int nl = xtc__class_count(l) + 1, chosen, forced = -2;
	uint32_t oldest = 0;

	if (rm == 0) {
		memset(s->bypass, 0, sizeof(s->bypass));
		return xtc__class_take(l, -1); /* nothing ready: no opportunity */
	}
	bump(&s->opportunities);
	for (uint32_t m = rm; m != 0; m &= m - 1) {
		int k = __builtin_ctz(m);
		if (s->bypass[k] >= s->max_bypass && s->bypass[k] > oldest) {
			oldest = s->bypass[k];
			forced = k - 1;
		}
	}
	if (forced != -2) {
		chosen = forced;
		bump(&s->forced);
	} else if ((rm & (rm - 1)) == 0) {
		chosen = __builtin_ctz(rm) - 1; /* the only ready lane */
	} else {
		int n = snapshot(l, s, rm);

		bump(&s->selects);
		chosen = s->select(s->snap, (size_t)n, s->user);
		if (chosen == XTC_SCHED_DEFAULT) {
			bump(&s->defaults);
			chosen = ord;
		} else if (chosen < -1 || chosen >= XTC_LOOP_MAX_CLASSES ||
		    !(rm & (1u << (chosen + 1)))) {
			bump(&s->invalid);
			chosen = ord;
		}
	}
	for (int k = 0; k < nl; k++) {
		if (!(rm & (1u << k)))
			s->bypass[k] = 0;
		else if (k - 1 != chosen)
			s->bypass[k] += s->bypass[k] < UINT32_MAX;
		else {
			if (s->bypass[k] > ld(&s->max_wait))
				atomic_store_explicit(&s->max_wait, s->bypass[k],
				    memory_order_relaxed);
			s->bypass[k] = 0;
		}
	}
	return xtc__class_take(l, chosen);
}
#endif

/* ------------------------------------------------------------------ */
/* Hooks                                                                */
/* ------------------------------------------------------------------ */

/* The demoted level (loop_int.h): an aged demoted task first, but never
 * twice in a row, so new work and aged work alternate and neither starves;
 * otherwise the loop serves it after the default lane's other work.
 * Alternate in time, not in picks: after an aged run the other levels run
 * as long as it did before the next aged pick (low_debt, hook_run_end). An
 * aged run is meant to last a slice, but one whose preemption was
 * deferred (its fiber in code not declared preemptible, or holding a
 * lock: preempt.c) runs on until the cut lands; alternating per pick then
 * handed the carrier to long work: zlib requests spending 85% of their
 * time in the library behind their own declared kernel
 * (bench/libs_tail.c, a 100 us slice) waited 3x as many chunks of long
 * work as with preemption off. Each other run pays at least 1/64 of the
 * debt, so runs too short to measure cannot starve demoted work. */
static xtc_task_t *demoted_aged(xtc_loop_t *l)
{
	if (l->low_debt > 0) {
		l->low_turn = 0;
		return NULL;
	}
	if (l->low_turn) {
		l->low_turn = 0;
		return NULL;
	}
	/* the last run's end (loop_int.h run_end_at); a loop without timed
	 * features (preemption switched off with demoted work left) has none */
	int64_t now = (l->feat & XTC__LF_TIMED) ? l->run_end_at : xtc__now();
	if (now - l->low_head->low_since < XTC__DEMOTE_AGE_NS)
		return NULL;
	l->low_turn = 1;
	l->low_aged++;
	l->low_run = xtc__loop_low_pop(l);
	return l->low_run;
}

/* A run ended: an aged one sets what the other levels get before the next
 * aged pick; any other pays that down (demoted_aged). */
static void demoted_charge(xtc_loop_t *l, const xtc_task_t *t,
                           int64_t ran_ns)
{
	if (t == l->low_run) {
		l->low_run = NULL;
		l->low_debt = ran_ns > 0 ? ran_ns : 0;
		l->low_step = l->low_debt / 64 > 0 ? l->low_debt / 64 : 1;
		return;
	}
	if (l->low_debt > 0)
		l->low_debt -= ran_ns > l->low_step ? ran_ns : l->low_step;
}

static xtc_task_t *hook_pick(xtc_loop_t *l)
{
	const xtc__sched_exec_t *ex = exec_of(l);
	xtc_task_t *aged;

	if (XTC__UNLIKELY(l->low_head != NULL) &&
	    (aged = demoted_aged(l)) != NULL)
		return aged;
	if (l->feat & XTC__LF_CLASSES) {
		/* demoted tasks are default-lane work: the lanes' shares
		 * hold whatever level the default lane serves */
		int def = def_ready(l, ex) || l->low_head != NULL;
		xtc_task_t *t;
#ifdef XTC_SCHED_POLICY
		struct xtc__sched *s = l->up.sched;
		if (XTC__UNLIKELY(s != NULL && s->on))
			t = policy_pick(l, s, def);
		else
#endif
			t = xtc__class_pick(l, def);
		if (t != NULL)
			return t;
	}
	/* the default lane: the executor orders its deque against the plain
	 * FIFO; NULL runs the plain FIFO, then the demoted level (loop.c) */
	return ex != NULL && ex->def_pick != NULL ? ex->def_pick(l) : NULL;
}

static int hook_enqueue(xtc_loop_t *l, xtc_task_t *t)
{
	const xtc__sched_exec_t *ex;

	/* work made ready during a run (not the run's own yield): that run
	 * now competes, so its slice applies (exec_lane.c, preempt_begin) */
	if ((l->feat & XTC__LF_PREEMPT) && xtc__ptls.fiber != NULL &&
	    t != xtc__task_current())
		xtc__preempt_contend(xtc__ptls.slot);
	if ((l->feat & XTC__LF_CLASSES) && xtc__class_enqueue(l, t))
		return 1;
	ex = exec_of(l);
	return ex != NULL && ex->enqueue != NULL ? ex->enqueue(l, t) : 0;
}

static void hook_run_begin(xtc_loop_t *l, xtc_task_t *t, int64_t now)
{
	if (l->feat & XTC__LF_STALL)
		xtc__stall_begin(l, t, now);
	if (l->feat & XTC__LF_CLASSES)
		xtc__class_run_begin(l, t, now);
	/* latency classes shorten the slice as they tighten the budget;
	 * `now` is the run's start: no second clock read */
	if ((l->feat & XTC__LF_PREEMPT) && t->is_fiber) {
		const xtc__sched_exec_t *ex = exec_of(l);
		if (ex != NULL && ex->preempt_begin != NULL)
			ex->preempt_begin(l, t, now);
		else
			xtc__preempt_run_begin(&t->fiber, l->lat_budget,
			    XTC__RUN_AT, now, 0);
	}
}

static void hook_run_end(xtc_loop_t *l, xtc_task_t *t, int64_t ran_ns)
{
	if (XTC__UNLIKELY(l->low_run != NULL || l->low_debt > 0))
		demoted_charge(l, t, ran_ns);
	if (l->feat & XTC__LF_PREEMPT) {
		if (atomic_load_explicit(&l->sleeping, memory_order_relaxed) ==
		    XTC__SLEEP_RUN)
			atomic_store_explicit(&l->sleeping, 0,
			    memory_order_relaxed);
		xtc__preempt_run_end();
		/* run time since the task last parked: the demotion of plain
		 * yielders (loop.c) and, whole, the adaptive quantum's service
		 * samples (fn_quantum.c) */
		uint32_t st = atomic_load_explicit(&t->state,
		    memory_order_relaxed);
		t->svc_ns += ran_ns;
		if (st == XTC__T_DONE || st == XTC__T_PARKED) {
			if (atomic_load_explicit(&xtc__preempt_adaptive_slice,
			    memory_order_relaxed) > 0)
				xtc__up.quantum_service(t->svc_ns);
			t->svc_ns = 0;
		}
	}
	if (l->feat & XTC__LF_CLASSES)
		xtc__class_charge(l, t, ran_ns);
	if (l->feat & XTC__LF_STALL)
		xtc__stall_check(l, t, ran_ns);
}

int xtc__sched_busy(xtc_loop_t *l)
{
	const xtc__sched_exec_t *ex = exec_of(l);

	if (xtc__class_queued(l) > 0)
		return 1;
	return ex != NULL && ex->def_ready != NULL && ex->def_ready(l);
}

void xtc__sched_attach(xtc_loop_t *l)
{
	xtc__loop_hooks_t h;

	if (l->hooks.pick == hook_pick)
		return;
	memset(&h, 0, sizeof(h));
	h.ctx = l->hooks.ctx;
	h.pick = hook_pick;
	h.enqueue = hook_enqueue;
	h.run_begin = hook_run_begin;
	h.run_end = hook_run_end;
	h.busy = xtc__sched_busy;
	h.check_due = xtc__preempt_check_due; /* ticks and tick ring */
	xtc__loop_set_hooks(l, &h);
}

void xtc__sched_exec_register(xtc_loop_t *l, const xtc__sched_exec_t *ops)
{
	xtc__sched_attach(l);
	l->hooks.ctx = (void *)ops;
}

/* ------------------------------------------------------------------ */
/* Run on the owner thread                                              */
/* ------------------------------------------------------------------ */

struct on_owner {
	xtc__post_t node; /* first: the post pointer is the request */
	void (*fn)(xtc_loop_t *, void *);
	void *arg;
};

static void on_owner_run(xtc_loop_t *l, xtc__post_t *p)
{
	struct on_owner *r = (struct on_owner *)p;

	r->fn(l, r->arg); /* at fini (magic FINI) fn sees it and just frees */
	free(r);
}

int xtc__sched_on_owner(xtc_loop_t *l, void (*fn)(xtc_loop_t *, void *),
                        void *arg)
{
	struct on_owner *r;

	if (atomic_load(&l->owner) == 0 || xtc__loop_on_owner_thread(l)) {
		fn(l, arg);
		return XTC_OK;
	}
	r = calloc(1, sizeof(*r));
	if (r == NULL)
		return XTC_E_NOMEM;
	r->node.fn = on_owner_run;
	r->fn = fn;
	r->arg = arg;
	if (xtc__loop_post(l, &r->node) != XTC_OK) {
		free(r);
		return XTC_E_INVAL;
	}
	return XTC_OK;
}

void xtc__sched_loop_fini(xtc_loop_t *l)
{
	xtc__class_loop_fini(l);
	xtc__stall_loop_fini(l);
	free(l->up.sched);
	l->up.sched = NULL;
}

/* ------------------------------------------------------------------ */
/* Policy state, batch counts                                           */
/* ------------------------------------------------------------------ */

static int loop_live(const xtc_loop_t *l)
{
	return l != NULL && atomic_load_explicit(&l->magic,
	    memory_order_acquire) == XTC__LOOP_LIVE;
}

/* Owner thread, or no thread drives the loop. */
static int owner_ok(const xtc_loop_t *l)
{
	return atomic_load(&l->owner) == 0 || xtc__loop_on_owner_thread(l);
}

static struct xtc__sched *sched_state(xtc_loop_t *l)
{
	if (l->up.sched == NULL)
		l->up.sched = calloc(1, sizeof(*l->up.sched));
	return l->up.sched;
}

uint64_t xtc__sched_hash(const xtc_loop_t *l, uint64_t h)
{
	const struct xtc__sched *s = l->up.sched;

	if (s == NULL || !s->on)
		return h;
	for (int k = 0; k < NLANES; k++)
		h = xtc__hash_u64(h, s->bypass[k]);
	return h;
}

int xtc__sched_batch_register(xtc_loop_t *l, int lane)
{
	struct xtc__sched *s;

	if (!loop_live(l) || lane < -1 || lane >= XTC_LOOP_MAX_CLASSES ||
	    !owner_ok(l))
		return XTC_E_INVAL;
	if ((s = sched_state(l)) == NULL)
		return XTC_E_NOMEM;
	s->batch[lane + 1].groups++;
	return XTC_OK;
}

void xtc__sched_batch_unregister(xtc_loop_t *l, int lane)
{
	struct xtc__sched *s;

	if (l == NULL || lane < -1 || lane >= XTC_LOOP_MAX_CLASSES ||
	    (s = l->up.sched) == NULL || s->batch[lane + 1].groups <= 0)
		return;
	s->batch[lane + 1].groups--;
}

static void adj(int32_t *v, int32_t d)
{
	int64_t n = (int64_t)*v + d;
	*v = n < 0 ? 0 : n > INT32_MAX ? INT32_MAX : (int32_t)n;
}

void xtc__sched_batch_adjust(xtc_loop_t *l, int lane, int32_t d_active,
                             int32_t d_ready, int32_t d_waiting)
{
	struct xtc__sched *s;

	if (l == NULL || lane < -1 || lane >= XTC_LOOP_MAX_CLASSES ||
	    (s = l->up.sched) == NULL)
		return;
	adj(&s->batch[lane + 1].active, d_active);
	adj(&s->batch[lane + 1].ready, d_ready);
	adj(&s->batch[lane + 1].waiting, d_waiting);
}

/* ------------------------------------------------------------------ */
/* Public API                                                           */
/* ------------------------------------------------------------------ */

#ifdef XTC_SCHED_POLICY
/* The built-in continuous policy: the ready batch class with ready members
 * and the greatest bypass count; equal counts rotate by class id (the
 * first id above the last tie winner, wrapping). */
static int continuous_select(const xtc_sched_lane_t *v, size_t n, void *user)
{
	struct xtc__sched *s = user;
	int best = XTC_SCHED_DEFAULT, wrap = XTC_SCHED_DEFAULT;
	uint32_t bb = 0, wb = 0;

	for (size_t i = 0; i < n; i++) {
		const xtc_sched_lane_t *o = &v[i];
		if (o->id < 0 || o->batch_groups == 0 || o->batch_ready == 0)
			continue;
		/* two candidates per age: above the cursor, and the lowest */
		if (o->id > s->cont_last &&
		    (best == XTC_SCHED_DEFAULT || o->bypass > bb)) {
			best = o->id;
			bb = o->bypass;
		}
		if (wrap == XTC_SCHED_DEFAULT || o->bypass > wb) {
			wrap = o->id;
			wb = o->bypass;
		}
	}
	if (wrap == XTC_SCHED_DEFAULT)
		return XTC_SCHED_DEFAULT;
	if (best == XTC_SCHED_DEFAULT || wb > bb)
		best = wrap;
	s->cont_last = best;
	return best;
}

static int install(xtc_loop_t *l, int32_t max_bypass, xtc_sched_select_fn fn,
                   void *user, int builtin)
{
	struct xtc__sched *s;

	if (!loop_live(l) || max_bypass <= 0)
		return XTC_E_INVAL;
	if (max_bypass > XTC_SCHED_MAX_BYPASS)
		return XTC_E_RANGE;
	if (atomic_load(&l->started))
		return XTC_E_AGAIN;
	if (!owner_ok(l))
		return XTC_E_INVAL;
	if ((s = sched_state(l)) == NULL)
		return XTC_E_NOMEM;
	s->max_bypass = (uint32_t)max_bypass;
	s->select = fn;
	s->user = builtin ? s : user; /* the built-in's state is s */
	s->cont_last = -1;
	s->on = 1;
	xtc__sched_attach(l);
	return XTC_OK;
}
#endif

int xtc_sched_policy_set(xtc_loop_t *loop, const xtc_sched_policy_t *policy)
{
#ifdef XTC_SCHED_POLICY
	if (policy == NULL || policy->size != sizeof(*policy) ||
	    policy->version != XTC_SCHED_VERSION || policy->select == NULL)
		return XTC_E_INVAL;
	if (policy->select == continuous_select)
		return XTC_E_INVAL; /* its user must be the loop's state */
	return install(loop, policy->max_bypass, policy->select, policy->user,
	    0);
#else
	(void)loop;
	(void)policy;
	return XTC_E_NOSYS;
#endif
}

int xtc_sched_continuous_set(xtc_loop_t *loop, int max_bypass)
{
#ifdef XTC_SCHED_POLICY
	return install(loop, max_bypass, continuous_select, NULL, 1);
#else
	(void)loop;
	(void)max_bypass;
	return XTC_E_NOSYS;
#endif
}

int xtc_sched_get_stats(xtc_loop_t *loop, xtc_sched_stats_t *out)
{
#ifdef XTC_SCHED_POLICY
	struct xtc__sched *s;

	if (!loop_live(loop) || out == NULL || out->size != sizeof(*out) ||
	    out->version != XTC_SCHED_VERSION)
		return XTC_E_INVAL;
	memset((char *)out + 2 * sizeof(uint32_t), 0,
	    sizeof(*out) - 2 * sizeof(uint32_t));
	s = loop->up.sched;
	if (s == NULL)
		return XTC_OK;
	out->opportunities = ld(&s->opportunities);
	out->selects = ld(&s->selects);
	out->defaults = ld(&s->defaults);
	out->invalid = ld(&s->invalid);
	out->forced = ld(&s->forced);
	out->max_wait = ld(&s->max_wait);
	return XTC_OK;
#else
	(void)loop;
	(void)out;
	return XTC_E_NOSYS;
#endif
}

int xtc_sched_lane_of(xtc_exec_class_t cls, int *out)
{
#ifdef XTC_SCHED_POLICY
	int idx;

	if (out == NULL)
		return XTC_E_INVAL;
	if (cls == NULL) {
		*out = XTC_SCHED_LANE_DEFAULT;
		return XTC_OK;
	}
	idx = xtc__class_index(cls);
	if (idx < 0)
		return XTC_E_INVAL;
	*out = idx;
	return XTC_OK;
#else
	(void)cls;
	(void)out;
	return XTC_E_NOSYS;
#endif
}

/* The loop reaches the scheduler's loop teardown through its upcalls
 * (loop_int.h). */
__attribute__((constructor)) static void sched_upcalls(void)
{
	xtc__up.sched_loop_fini = xtc__sched_loop_fini;
}
