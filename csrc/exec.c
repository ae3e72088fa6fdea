/*
 * exec.c - the multi-loop executor's public API (xtc_exec.h): init, run,
 * stop, fini, spawning and submission onto its loops, its knobs and
 * statistics, executor-wide classes, device placement.
 *
 * Model:
 *  1. An executor owns n loops. xtc_exec_run starts one C-created carrier
 *     thread per loop (Go never owns a carrier, so fibers never run on a
 *     Go thread); each carrier claims its loop and alternates between
 *     draining its bounded submission ring and taking one loop step
 *     (exec_carrier.c). What runs next on a loop is sched.c's; the
 *     executor registers its default-lane deque and its preemption
 *     bookkeeping there (exec_lane.c).
 *  2. Everything another thread does to a loop goes through that loop's
 *     MPSC inbox (spawns, wakes, messages: loop.c) or its submission ring
 *     (xtc_exec_submit); a carrier that runs out of work steals, spins,
 *     then parks (Loom's carrier design: one MPSC queue and one poller per
 *     carrier, spin then park).
 *  3. Carriers start spread over the caller's CPUs and then widen to its
 *     whole mask (spread_start: a placement, not a pinning).
 *  4. A class of the executor (xtc_exec_class_create_each) is one per-loop
 *     class (sched_class.c) on every loop, created together with the same
 *     shares and latency bound, so work placed on any carrier is weighted
 *     alike. The per-loop classes stay the unit the picker sees (it never
 *     looks at another carrier's queues); an executor-wide split in the
 *     share ratio follows when the work of each class is spread over the
 *     carriers (the Go wrapper places calls round-robin). Work stealing
 *     moves only migratable procs, and a proc's class is a class of its
 *     home loop, so a stolen proc runs in the default lane of the thief:
 *     keep classed work pinned (the default).
 *
 * Invariants:
 *  1. The stop flag is consumed when a run returns, never cleared when it
 *     starts: a stop issued before the run began ends that run.
 *  2. xtc_exec_class_create_each is all-or-nothing from the caller's view:
 *     on failure no class is reported (classes already made on earlier
 *     loops stay, unused and harmless, until fini: per-loop classes cannot
 *     be destroyed).
 *  3. The executor's loops belong to it: they are finalised by
 *     xtc_exec_fini only (xtc__loop_fini_owned).
 *
 * Rejected: a shared, cross-carrier vruntime for executor-wide classes (a
 * contended atomic per pick, and a carrier could not pick without its
 * peers' state); an allocated class group object (a lifetime for the
 * caller to manage, for what an array of handles already says); pinning
 * carriers (the machine's other work, cpusets that change and the user's
 * own placement are the kernel's to balance).
 */
#include "rtcode_int.h" /* first: this file is runtime code */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "exec_int.h"
#include "xtc_batch.h" /* xtc_batch_loop_for_device: placement is ours */

#define MAX_LOOPS 1024

#define cpu_relax() XTC__CPU_RELAX() /* base_int.h */

/* ------------------------------------------------------------------ */
/* Public API                                                           */
/* ------------------------------------------------------------------ */

static int ncpus(void)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);
	return n > 0 ? (int)n : 4;
}

int xtc_exec_init(xtc_exec_t **out, int n_loops)
{
	xtc_exec_t *e;
	int rc = XTC_OK;

	if (out == NULL)
		return XTC_E_INVAL;
	*out = NULL;
	if (n_loops <= 0)
		n_loops = ncpus();
	if (n_loops > MAX_LOOPS)
		return XTC_E_RANGE;
	e = calloc(1, sizeof(*e));
	if (e == NULL)
		return XTC_E_NOMEM;
	/* line-aligned: the carrier's layout keeps what producers read
	 * apart from what the carrier writes per step */
	e->c = aligned_alloc(_Alignof(xtc__carrier_t),
	                     (size_t)n_loops * sizeof(*e->c));
	if (e->c == NULL) {
		free(e);
		return XTC_E_NOMEM;
	}
	memset(e->c, 0, (size_t)n_loops * sizeof(*e->c));
	e->magic = XTC__EXEC_MAGIC;
	for (int i = 0; i < n_loops && rc == XTC_OK; i++) {
		xtc__carrier_t *c = &e->c[i];
		c->exec = e;
		c->idx = i;
		c->rng = 0x9e3779b97f4a7c15ull * (uint64_t)(i + 1);
		c->gap_avg = 4 * XTC__EXEC_SPIN_MAX_NS;
		c->dq_seq = calloc(XTC__EXEC_DEQUE_CAP, sizeof(*c->dq_seq));
		if (c->dq_seq == NULL || xtc__deque_init(&c->dq, XTC__EXEC_DEQUE_CAP) != 0 ||
		    xtc__carrier_ring_init(c) != XTC_OK) {
			rc = XTC_E_NOMEM;
			break;
		}
		rc = xtc_loop_init(&c->loop);
		if (rc != XTC_OK)
			break;
		c->loop->up.exec = e;
		c->loop->up.carrier = c;
		c->loop->index = i;
		e->n = i + 1;
		xtc__sched_exec_register(c->loop,
		    n_loops > 1 ? &xtc__exec_ops_steal : &xtc__exec_ops_solo);
		if (n_loops > 1)
			xtc__loop_feat_set(c->loop, XTC__LF_EXEC);
	}
	if (rc != XTC_OK) {
		for (int i = 0; i < n_loops; i++) {
			if (e->c[i].loop)
				xtc__loop_fini_owned(e->c[i].loop);
			xtc__deque_fini(&e->c[i].dq);
			free(e->c[i].dq_seq);
			free(e->c[i].ring);
		}
		free(e->c);
		e->magic = 0;
		free(e);
		return rc;
	}
	e->n = n_loops;
	*out = e;
	return XTC_OK;
}

int xtc_exec_fini(xtc_exec_t *e)
{
	if (!xtc__exec_ok(e) || atomic_load(&e->running))
		return XTC_E_INVAL;
	for (int i = 0; i < e->n; i++) {
		xtc__carrier_t *c = &e->c[i];
		/* unrun submissions are dropped: their fn never runs */
		xtc__loop_fini_owned(c->loop);
		xtc__deque_fini(&c->dq);
		free(c->dq_seq);
		free(c->ring);
	}
	free(e->c);
	e->magic = 0;
	free(e);
	return XTC_OK;
}

/* Where carrier i starts: a new thread starts on its creator's CPU and the
 * kernel spreads threads only after milliseconds of load balancing, so
 * every carrier of a run began on the caller's CPU, and carriers that
 * exchange messages spun against each other there (a spinning carrier
 * holds the CPU its peer needs: each message waited out the spin window,
 * the carriers learned to park, and after the kernel separated them
 * every message paid a cross-CPU wake-up; xtcbench's cross-loop handoff
 * read 2-4 us instead of 0.8 us in a third of its repetitions). So each
 * carrier is created bound to one of the caller's allowed CPUs in turn,
 * beginning after the caller's own, and widens its affinity back to all
 * of them as its first act: a placement, not a pinning. With one allowed
 * CPU, or when the mask cannot be read, the kernel places them as
 * before. Rejected: pinning carriers (the machine's other work, cpusets
 * that change, and the user's own placement are the kernel's to
 * balance); yielding the CPU while spinning (a spinning carrier next to a
 * CPU hog would hand it a whole time slice while input waits). */
static pthread_attr_t *spread_start(xtc_exec_t *e, int i, pthread_attr_t *a)
{
	int n;

	if (i == 0) {
		e->spread = 0;
		if (sched_getaffinity(0, sizeof e->cpus, &e->cpus) != 0 ||
		    CPU_COUNT(&e->cpus) < 2)
			return NULL;
		e->spread = 1;
		/* the caller's CPU is read once: a caller that moves between
		 * two creations (a freeze, a busy host) would otherwise give
		 * two carriers one CPU (test_exec test_spread_start, found by
		 * tools/freeze-hunt.sh under ASan) */
		int here = sched_getcpu(), k = 0;
		e->spread_first = 0;
		for (int j = 0; j < CPU_SETSIZE; j++)
			if (CPU_ISSET(j, &e->cpus)) {
				k++;
				if (j == here)
					e->spread_first = k;
			}
	} else if (!e->spread) {
		return NULL;
	}
	/* the allowed CPUs in order, from the one after the caller's */
	n = CPU_COUNT(&e->cpus);
	int want = (e->spread_first + i) % n, pick = -1;
	for (int j = 0, m = 0; j < CPU_SETSIZE && pick < 0; j++)
		if (CPU_ISSET(j, &e->cpus) && m++ == want)
			pick = j;
	if (pick < 0)
		return NULL;
	cpu_set_t one;
	CPU_ZERO(&one);
	CPU_SET(pick, &one);
	if (pthread_attr_init(a) != 0)
		return NULL;
	if (pthread_attr_setaffinity_np(a, sizeof one, &one) != 0) {
		pthread_attr_destroy(a);
		return NULL;
	}
	return a;
}

int xtc__exec_start_cpu(xtc_exec_t *e, int idx)
{
	return xtc__exec_ok(e) && idx >= 0 && idx < e->n ? e->c[idx].start_cpu : -1;
}

int xtc_exec_run(xtc_exec_t *e)
{
	int expect = 0, rc = XTC_OK, started = 0;

	if (!xtc__exec_ok(e) || xtc__loop_current() != NULL)
		return XTC_E_INVAL; /* not from inside one of its own loops */
	if (xtc__loop_forked(e->c[0].loop))
		return XTC_E_INVAL; /* made by the parent of this fork child */
	if (!atomic_compare_exchange_strong(&e->running, &expect, 1))
		return XTC_E_INVAL;
	/* The stop flag is NOT cleared here: a stop issued before this point
	 * (typically right after the caller started the thread that calls
	 * run) must end this run, so it is consumed on return instead, as
	 * xtc_loop_run does. */
	for (int i = 0; i < e->n; i++) {
		xtc__carrier_t *c = &e->c[i];
		c->rc = XTC_OK;
		c->idle_turns = 0;
		atomic_store(&c->idle_gen, 0);
		pthread_attr_t a, *ap = spread_start(e, i, &a);
		c->started = pthread_create(&c->th, ap, xtc__carrier_main, c) == 0;
		if (ap != NULL)
			pthread_attr_destroy(ap);
		if (!c->started) {
			rc = XTC_E_RESOURCE;
			atomic_store(&e->stop, 1);
			xtc__exec_wake_all(e);
			break;
		}
		started++;
	}
	for (int i = 0; i < started; i++) {
		pthread_join(e->c[i].th, NULL);
		e->c[i].started = 0;
		if (rc == XTC_OK && e->c[i].rc != XTC_OK)
			rc = e->c[i].rc;
	}
	atomic_store(&e->stop, 0); /* consumed by this run */
	for (int i = 0; i < e->n; i++)
		atomic_store(&e->c[i].loop->stop, 0);
	atomic_store(&e->running, 0);
	return rc;
}

int xtc_exec_stop(xtc_exec_t *e)
{
	if (!xtc__exec_ok(e))
		return XTC_E_INVAL;
	atomic_store(&e->stop, 1);
	xtc__exec_wake_all(e);
	return XTC_OK;
}

int xtc_exec_n_loops(xtc_exec_t *e)
{
	return xtc__exec_ok(e) ? e->n : 0;
}

xtc_loop_t *xtc_exec_loop(xtc_exec_t *e, int idx)
{
	if (!xtc__exec_ok(e) || idx < 0 || idx >= e->n)
		return NULL;
	return e->c[idx].loop;
}

/* The watchdog is per loop (sched_stall.c); the executor applies one budget to
 * each of its loops, so sched_stall.c needs no way back to the executor. */
void xtc_exec_set_stall_budget(xtc_exec_t *exec, int64_t budget_ns)
{
	int n = xtc_exec_n_loops(exec);

	for (int i = 0; i < n; i++)
		xtc_loop_set_stall_budget(xtc_exec_loop(exec, i), budget_ns);
}

int xtc_exec_loop_stats(xtc_exec_t *e, int idx, xtc_loop_stats_t *out)
{
	xtc_loop_t *l;

	if (!xtc__exec_ok(e) || out == NULL || idx < 0 || idx >= e->n)
		return XTC_E_INVAL;
	l = e->c[idx].loop;
	out->tasks_run = __atomic_load_n(&l->runs, __ATOMIC_RELAXED);
	out->steals = atomic_load_explicit(&l->up.steals, memory_order_relaxed);
	out->demotions = __atomic_load_n(&l->demotions, __ATOMIC_RELAXED);
	out->aged = __atomic_load_n(&l->low_aged, __ATOMIC_RELAXED);
	out->parks = __atomic_load_n(&e->c[idx].parks, __ATOMIC_RELAXED);
	out->wakes = __atomic_load_n(&e->c[idx].wakes, __ATOMIC_RELAXED);
	out->slow_wakes = __atomic_load_n(&e->c[idx].slow_wakes,
	                                  __ATOMIC_RELAXED);
	out->wake_ns = __atomic_load_n(&e->c[idx].wake_ns, __ATOMIC_RELAXED);
	out->wake_max_ns = __atomic_load_n(&e->c[idx].wake_max,
	                                   __ATOMIC_RELAXED);
	return XTC_OK;
}

int xtc_exec_loop_id(void)
{
	xtc_loop_t *l = xtc__loop_current();
	return l != NULL && l->up.exec != NULL ? l->index : -1;
}

int xtc_shard_id(void)
{
	xtc_loop_t *l = xtc__loop_current();
	if (l == NULL)
		return -1;
	return l->up.exec != NULL ? l->index : 0;
}

int xtc_shard_count(void)
{
	xtc_loop_t *l = xtc__loop_current();
	if (l == NULL)
		return 0;
	return l->up.exec != NULL ? l->up.exec->n : 1;
}

static int pick_loop(xtc_exec_t *e)
{
	return (int)(atomic_fetch_add_explicit(&e->rr, 1, memory_order_relaxed) %
	    (uint32_t)e->n);
}

/* Shared by the four spawn entry points: validation, placement (idx < 0 =
 * round robin, unpinned) and the spawn options. */
static int spawn_prep(xtc_exec_t *e, int idx, int pinned, int has_fn,
                      int retain, xtc__spawn_opts_t *o)
{
	if (!xtc__exec_ok(e) || !has_fn)
		return XTC_E_INVAL;
	if (idx < 0)
		idx = pick_loop(e);
	else if (idx >= e->n)
		return XTC_E_INVAL;
	memset(o, 0, sizeof(*o));
	o->migratable = !pinned;
	o->retain = retain;
	return idx;
}

static int spawn_task(xtc_exec_t *e, int idx, int pinned, xtc_task_fn fn,
                      void *user, xtc_task_t **out)
{
	xtc__spawn_opts_t o;

	idx = spawn_prep(e, idx, pinned, fn != NULL, out != NULL, &o);
	if (idx < 0)
		return idx;
	return xtc__task_spawn_fn(e->c[idx].loop, fn, user, &o, out);
}

int xtc_exec_spawn(xtc_exec_t *e, xtc_task_fn fn, void *user,
                   xtc_task_t **out_task)
{
	return spawn_task(e, -1, 0, fn, user, out_task);
}

int xtc_exec_spawn_on(xtc_exec_t *e, int loop_idx, xtc_task_fn fn,
                      void *user, xtc_task_t **out_task)
{
	if (loop_idx < 0)
		return XTC_E_INVAL;
	return spawn_task(e, loop_idx, 1, fn, user, out_task);
}

static int spawn_coro(xtc_exec_t *e, int idx, int pinned, xtc_coro_fn fn,
                      void *arg, xtc_task_t **out)
{
	xtc__spawn_opts_t o;

	idx = spawn_prep(e, idx, pinned, fn != NULL, out != NULL, &o);
	if (idx < 0)
		return idx;
	return xtc__task_spawn_coro(e->c[idx].loop, fn, arg, &o, out);
}

int xtc_exec_async(xtc_exec_t *e, xtc_coro_fn fn, void *arg,
                   xtc_task_t **out_task)
{
	return spawn_coro(e, -1, 0, fn, arg, out_task);
}

int xtc_exec_async_on(xtc_exec_t *e, int loop_idx, xtc_coro_fn fn, void *arg,
                      xtc_task_t **out_task)
{
	if (loop_idx < 0)
		return XTC_E_INVAL;
	return spawn_coro(e, loop_idx, 1, fn, arg, out_task);
}

static int submit_once(xtc_exec_t *e, int idx, xtc_exec_fn fn, void *arg)
{
	xtc__carrier_t *c = &e->c[idx];

	if (!xtc__carrier_ring_push(c, fn, arg))
		return XTC_E_AGAIN;
	/* Dekker with carrier_park: the push's seq_cst CAS of sub_tail
	 * precedes the load of "sleeping" (no fence: TSan models RMWs, not
	 * fences); the carrier's store of it precedes its re-check. */
	xtc__carrier_kick(c);
	return XTC_OK;
}

static void node_run(void *arg)
{
	xtc__exec_node_t *n = arg;

	n->fn(n);
}

/* The ring first while no overflow waits; past it (or behind a waiting
 * overflow, so that the nodes keep their order) a Treiber push. The count
 * is raised first (seq_cst, before the push's seq_cst CAS and the kick's
 * load of "sleeping"): a carrier that re-checks before the node is linked
 * sees the count, stays awake and finds the node an instant later. */
int xtc__exec_submit_node(xtc_exec_t *e, int idx, xtc__exec_node_t *node)
{
	xtc__carrier_t *c;
	xtc__exec_node_t *h;

	if (!xtc__exec_ok(e) || node == NULL || node->fn == NULL || idx < 0 ||
	    idx >= e->n)
		return XTC_E_INVAL;
	c = &e->c[idx];
	if (atomic_load_explicit(&c->ovf_n, memory_order_relaxed) == 0 &&
	    submit_once(e, idx, node_run, node) == XTC_OK)
		return 0;
	if (atomic_fetch_add(&c->ovf_n, 1) == 0) /* the ring's older part */
		atomic_store_explicit(&c->ovf_mark,
		    atomic_load_explicit(&c->sub_tail, memory_order_relaxed),
		    memory_order_relaxed);
	h = atomic_load_explicit(&c->ovf_in, memory_order_relaxed);
	do {
		node->next = h;
	} while (!atomic_compare_exchange_weak_explicit(&c->ovf_in, &h, node,
	    memory_order_seq_cst, memory_order_relaxed));
	xtc__carrier_kick(c);
	return 1;
}

int xtc_exec_submit(xtc_exec_t *e, int loop_idx, xtc_exec_fn fn, void *arg)
{
	if (!xtc__exec_ok(e) || fn == NULL || loop_idx >= e->n)
		return XTC_E_INVAL;
	if (loop_idx < 0)
		loop_idx = pick_loop(e);
	return submit_once(e, loop_idx, fn, arg);
}

int xtc_exec_submit_wait(xtc_exec_t *e, int loop_idx, xtc_exec_fn fn,
                         void *arg, int64_t timeout_ns)
{
	int64_t deadline = 0;
	int rc, spins = 0;

	if (!xtc__exec_ok(e) || fn == NULL || loop_idx >= e->n)
		return XTC_E_INVAL;
	if (xtc__loop_current() == e->c[loop_idx < 0 ? 0 : loop_idx].loop)
		return XTC_E_DEADLK; /* a carrier would wait on itself */
	if (loop_idx < 0)
		loop_idx = pick_loop(e);
	if (timeout_ns > 0)
		deadline = xtc__deadline_after(xtc_clock_mono(), timeout_ns);
	for (;;) {
		rc = submit_once(e, loop_idx, fn, arg);
		if (rc != XTC_E_AGAIN || timeout_ns == 0)
			return rc;
		if (timeout_ns > 0 && xtc_clock_mono() >= deadline)
			return XTC_E_AGAIN;
		if (++spins < 64) {
			cpu_relax();
		} else {
			struct timespec ts = { 0, 20000 };
			nanosleep(&ts, NULL);
		}
	}
}

void xtc_exec_set_service_mode(xtc_exec_t *e, int on)
{
	if (xtc__exec_ok(e))
		atomic_store(&e->service, on ? 1 : 0);
}

int xtc_exec_get_service_mode(xtc_exec_t *e)
{
	return xtc__exec_ok(e) ? atomic_load(&e->service) : 0;
}

int xtc_exec_set_spin(xtc_exec_t *e, int64_t ns)
{
	if (!xtc__exec_ok(e) || ns < 0)
		return XTC_E_INVAL;
	atomic_store(&e->spin_ns, ns);
	return XTC_OK;
}

int64_t xtc_exec_get_spin(xtc_exec_t *e)
{
	return xtc__exec_ok(e) ? atomic_load(&e->spin_ns) : XTC_E_INVAL;
}

void xtc_exec_set_eager_rebalance(xtc_exec_t *e, int on)
{
	if (xtc__exec_ok(e))
		atomic_store(&e->eager, on ? 1 : 0);
}

int xtc_exec_get_eager_rebalance(xtc_exec_t *e)
{
	return xtc__exec_ok(e) ? atomic_load(&e->eager) : 0;
}

void xtc_exec_set_steal_backoff(xtc_exec_t *e, int on)
{
	if (xtc__exec_ok(e))
		atomic_store(&e->backoff, on ? 1 : 0);
}

int xtc_exec_get_steal_backoff(xtc_exec_t *e)
{
	return xtc__exec_ok(e) ? atomic_load(&e->backoff) : 0;
}

int xtc_exec_set_preempt(xtc_exec_t *e, int64_t interval_ns)
{
	if (!xtc__exec_ok(e))
		return XTC_E_INVAL;
	if (interval_ns < 0)
		interval_ns = 0;
	e->preempt_ns = interval_ns; /* kept even when NOSYS, as documented */
	if (e->preempt_coop)
		return XTC_OK; /* the clock is the only tick source it needs */
	return xtc__preempt_exec_configure(e, interval_ns);
}

int xtc_exec_set_preempt_coop(xtc_exec_t *e, int on)
{
	if (!xtc__exec_ok(e))
		return XTC_E_INVAL;
	/* the carriers read it when they start: a change under a run would
	 * apply to some carriers and not others */
	if (atomic_load(&e->running))
		return XTC_E_AGAIN;
	e->preempt_coop = on != 0;
	return XTC_OK;
}

int xtc_exec_get_preempt_coop(xtc_exec_t *e)
{
	return xtc__exec_ok(e) ? e->preempt_coop : 0;
}

/* Executor-wide classes (model 4 above). */
int xtc_exec_class_create_each(xtc_exec_t *exec, int shares,
                               int64_t latency_ns, xtc_exec_class_t *out,
                               int n)
{
	int loops = xtc_exec_n_loops(exec);
	int rc;

	if (exec == NULL || out == NULL || loops <= 0 || n < loops ||
	    shares < 1 || shares > 1000 || latency_ns < 0)
		return XTC_E_INVAL;
	for (int i = 0; i < loops; i++) {
		rc = xtc_exec_class_create(xtc_exec_loop(exec, i), shares,
		    latency_ns, &out[i]);
		if (rc != XTC_OK) {
			for (int j = 0; j < loops; j++)
				out[j] = NULL;
			return rc;
		}
	}
	return XTC_OK;
}

/* ---- device placement (xtc_batch.h) --------------------------------------
 * Declared with the batch API (its man page) but defined here: which loop
 * sits on a device's NUMA node is a fact about the executor's carriers, and
 * keeping it here keeps batch.c below the executor in tools/layers.txt. */
#ifdef XTC_SCHED_POLICY
int xtc_batch_loop_for_device(struct xtc_exec *exec, int numa_node,
                              xtc_loop_t **out)
{
	xtc_loop_t *l;

	if (out != NULL)
		*out = NULL;
	if (exec == NULL || out == NULL)
		return XTC_E_INVAL;
	if (numa_node < -1)
		return XTC_E_RANGE;
	/* no carrier has recorded a node before the executor ran (the only
	 * time a group can be created): loop 0 */
	l = xtc_exec_loop(exec, 0);
	if (l == NULL)
		return XTC_E_INVAL;
	*out = l;
	return XTC_OK;
}
#else /* !XTC_SCHED_POLICY: the interface exists, the feature does not */
int xtc_batch_loop_for_device(struct xtc_exec *exec, int numa_node,
                              xtc_loop_t **out)
{
	(void)exec;
	(void)numa_node;
	if (out != NULL)
		*out = NULL;
	return XTC_E_NOSYS;
}
#endif
