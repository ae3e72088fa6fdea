/*
 * fn.c - deadline-preemptible functions (LibPreemptible's fn_launch /
 * fn_resume / fn_completed). The adaptive quantum controller
 * (LibPreemptible's Algorithm 1) is fn_quantum.c.
 *
 * Model
 *  - A function runs on a pooled context: a fiber whose entry loops forever
 *    "run the assigned function, mark done, switch back to the caller", so a
 *    context is reused with no re-initialisation. Contexts come from a
 *    per-thread free list and return to the free list of the thread on which
 *    the function completes.
 *  - Launch/resume publish a run with the function's slice to the monitor
 *    (preempt_run.c), backed by the thread's own timer a grace after the
 *    deadline (trigger_exact: a monitor the machine did not schedule for
 *    tens of ms let a 200 us function run 35 ms; no tick net, whose
 *    expiries would land in the caller's code between functions), with
 *    the involuntary path forced on for this run and the
 *    trampoline's yield pointed at "switch back to the caller". The caller's
 *    own timed run (a loop fiber calling xtc_fn_launch) is saved and restored
 *    around it, so nesting inside a preemptible fiber works.
 *  - Because the slice ends by signal + trampoline, a preempted function
 *    resumes with bit-identical registers, like a preempted loop fiber.
 *
 * Rejected: allocating a context per launch (the paper's free list exists
 * to avoid it); unwinding a cancelled function (C has no portable unwinding;
 * cancel documents that frames are abandoned).
 */
#include "rtcode_int.h" /* first: this file is runtime code */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "preempt_int.h"
#include "loop_int.h"
#include "xtc_fn.h"

typedef struct fnctx fnctx_t;
struct fnctx {
	xtc__fiber_t fiber;
	xtc_fn_t *owner;
	xtc_fn_entry entry;
	void *arg;
	xtc__fiber_t *caller;
	fnctx_t *next_free;
	int done;
};

#define POOL_MAX 64

static __thread fnctx_t *pool XTC__PTLS;
static __thread int pool_len XTC__PTLS;
static __thread fnctx_t *cur_ctx XTC__PTLS; /* function running on this thread */

static int64_t now_ns(void)
{
	return xtc__now_ns(); /* base_int.h */
}

static void ctx_main(void *a)
{
	fnctx_t *c = a;
	for (;;) {
		xtc_fn_t *fn = c->owner;
		fn->result = c->entry(c->arg);
		c->done = 1;
		xtc__fiber_switch(c->caller);
	}
}

static fnctx_t *ctx_get(void)
{
	fnctx_t *c = pool;
	if (c != NULL) {
		pool = c->next_free;
		pool_len--;
		return c;
	}
	c = calloc(1, sizeof *c);
	if (c == NULL)
		return NULL;
	if (xtc__fiber_init(&c->fiber, 0, ctx_main, c) != 0) {
		free(c);
		return NULL;
	}
	c->fiber.name = "xtc_fn";
	return c;
}

static void ctx_destroy(fnctx_t *c)
{
	xtc__fiber_release(&c->fiber);
	free(c);
}

/* A thread that pooled a context frees its pool when it exits (a carrier
 * of an executor ends with its run; nothing else would trim its pool). A
 * key destructor runs while the thread's TLS is still valid. */
static pthread_key_t pool_key;
static pthread_once_t pool_key_once = PTHREAD_ONCE_INIT;
static int pool_key_ok;

static void pool_thread_exit(void *unused)
{
	(void)unused;
	(void)xtc_fn_pool_trim();
}

static void pool_key_init(void)
{
	pool_key_ok = pthread_key_create(&pool_key, pool_thread_exit) == 0;
}

static void ctx_put(fnctx_t *c)
{
	c->owner = NULL;
	c->entry = NULL;
	c->arg = NULL;
	c->done = 0;
	if (pool_len >= POOL_MAX) {
		ctx_destroy(c);
		return;
	}
	if (pool == NULL) {
		(void)pthread_once(&pool_key_once, pool_key_init);
		if (pool_key_ok)
			(void)pthread_setspecific(pool_key, (void *)1);
	}
	c->next_free = pool;
	pool = c;
	pool_len++;
}

int xtc_fn_pool_trim(void)
{
	int n = 0;
	while (pool != NULL) {
		fnctx_t *c = pool;
		pool = c->next_free;
		ctx_destroy(c);
		n++;
	}
	pool_len = 0;
	return n;
}

/* The trampoline's yield for a function run: back to whoever launched it. */
static void back_to_caller(void *arg)
{
	fnctx_t *c = arg;
	xtc__fiber_switch(c->caller);
}

static int run_slice(xtc_fn_t *fn, fnctx_t *c, int64_t slice_ns)
{
	if (xtc__ptls.slot == NULL) {
		int rc = xtc__preempt_register(slice_ns);
		if (rc != XTC_OK)
			return rc;
		/* the backstop of the monitor (preempt_run.c trigger_exact);
		 * without it the monitor alone, counted */
		if (xtc__ctimer_create(xtc__ptls.slot,
		                       (int)syscall(SYS_gettid), 0) != XTC_OK)
			atomic_fetch_add(&xtc__ctimer_fallbacks, 1);
	}
	xtc__prun_t outer;
	xtc__preempt_run_save(&outer);
	fnctx_t *outer_ctx = cur_ctx;
	c->caller = xtc__fiber_current();
	xtc__ptls.yield_hook = back_to_caller;
	xtc__ptls.yield_arg = c;
	xtc__ptls.force_invol = 1;
	fn->state = XTC_FN_RUNNING;
	cur_ctx = c;
	int64_t t0 = now_ns();
	if (slice_ns < XTC__PREEMPT_MIN_SLICE_NS)
		slice_ns = XTC__PREEMPT_MIN_SLICE_NS;
	uint64_t cuts = xtc__ptls.st.preemptions;
	xtc__preempt_run_begin(&c->fiber, slice_ns, XTC__RUN_EXACT, 0, 0);
	xtc__fiber_switch(&c->fiber);
	xtc__preempt_run_end();
	int64_t ran = now_ns() - t0;
	fn->run_ns += ran;
	/* A slice that overran without being cut may have run with the
	 * preemption signal blocked (a function that masked every signal
	 * with pthread_sigmask): the mask is the thread's, so every later
	 * function on it would be uncuttable. Unblock the runtime's signal
	 * then: one syscall, only on an overrun that no cut ended (a cut
	 * proves the signal was deliverable). On the ucontext substrate the
	 * mask is the context's (swapcontext restores the one saved at the
	 * switch out): the pooled context would bring the blocked mask back
	 * to every later function it runs, so its saved mask loses the
	 * signal too. */
	if (ran >= slice_ns && xtc__ptls.st.preemptions == cuts) {
		sigset_t ss;
		sigemptyset(&ss);
		sigaddset(&ss, xtc__preempt_signo());
		pthread_sigmask(SIG_UNBLOCK, &ss, NULL);
#ifdef XTC__CORO_UCONTEXT
		xtc__uctx_sig_unblock(&c->fiber, xtc__preempt_signo());
#endif
	}
	cur_ctx = outer_ctx;
	xtc__preempt_run_restore(&outer);
	if (c->done) {
		fn->state = XTC_FN_DONE;
		fn->ctx = NULL;
		ctx_put(c);
		return XTC_OK;
	}
	fn->state = XTC_FN_PREEMPTED;
	fn->preemptions++;
	return XTC_E_AGAIN;
}

static int calling_context_ok(void)
{
	if (xtc__gocb_depth > 0)
		return XTC_E_DEADLK;
	if (xtc__fiber_thread_init() != 0)
		return XTC_E_INTERNAL;
	return XTC_OK;
}

int xtc_fn_launch(xtc_fn_t *fn, xtc_fn_entry entry, void *arg,
                  int64_t slice_ns)
{
	if (fn == NULL || entry == NULL || slice_ns <= 0)
		return XTC_E_INVAL;
	if (fn->state == XTC_FN_RUNNING)
		return XTC_E_DEADLK;
	/* PREEMPTED owns a pooled context; anything else is not an xtc_fn_t
	 * that was zero-initialised */
	if (fn->state != XTC_FN_IDLE && fn->state != XTC_FN_DONE)
		return XTC_E_INVAL;
	if (!xtc_preempt_involuntary_supported())
		return XTC_E_NOSYS;
	int rc = calling_context_ok();
	if (rc != XTC_OK)
		return rc;
	fnctx_t *c = ctx_get();
	if (c == NULL)
		return XTC_E_NOMEM;
	c->owner = fn;
	c->entry = entry;
	c->arg = arg;
	c->done = 0;
	fn->ctx = c;
	fn->result = 0;
	fn->preemptions = 0;
	fn->run_ns = 0;
	rc = run_slice(fn, c, slice_ns);
	if (rc != XTC_OK && rc != XTC_E_AGAIN) {
		fn->ctx = NULL;
		fn->state = XTC_FN_IDLE;
		ctx_put(c);
	}
	return rc;
}

int xtc_fn_resume(xtc_fn_t *fn, int64_t slice_ns)
{
	if (fn == NULL || slice_ns <= 0)
		return XTC_E_INVAL;
	if (fn->state == XTC_FN_RUNNING)
		return XTC_E_DEADLK;
	if (fn->state != XTC_FN_PREEMPTED || fn->ctx == NULL)
		return XTC_E_INVAL;
	int rc = calling_context_ok();
	if (rc != XTC_OK)
		return rc;
	return run_slice(fn, fn->ctx, slice_ns);
}

int xtc_fn_completed(const xtc_fn_t *fn)
{
	return fn != NULL && fn->state == XTC_FN_DONE;
}

int xtc_fn_cancel(xtc_fn_t *fn)
{
	if (fn == NULL || fn->state != XTC_FN_PREEMPTED || fn->ctx == NULL)
		return XTC_E_INVAL;
	fnctx_t *c = fn->ctx;
	/* the abandoned frames are dropped: start the context afresh */
	xtc__fiber_release(&c->fiber);
	memset(&c->fiber, 0, sizeof c->fiber);
	fn->ctx = NULL;
	fn->state = XTC_FN_IDLE;
	if (xtc__fiber_init(&c->fiber, 0, ctx_main, c) != 0) {
		free(c);
		return XTC_OK;
	}
	c->fiber.name = "xtc_fn";
	ctx_put(c);
	return XTC_OK;
}

/* Drop a preempted function's context from any thread, without pooling
 * it: for an owner that outlives the thread pools its context could go
 * back to (the Go wrapper's Close after its executor ended). The state
 * becomes XTC_FN_IDLE; XTC_E_INVAL unless preempted. */
int xtc__fn_discard(xtc_fn_t *fn)
{
	if (fn == NULL || fn->state != XTC_FN_PREEMPTED || fn->ctx == NULL)
		return XTC_E_INVAL;
	fnctx_t *c = fn->ctx;
	fn->ctx = NULL;
	fn->state = XTC_FN_IDLE;
	ctx_destroy(c);
	return XTC_OK;
}

int xtc_fn_yield(void)
{
	fnctx_t *c = cur_ctx;
	if (c == NULL || xtc__fiber_current() != &c->fiber)
		return XTC_E_INVAL;
	if (xtc__gocb_depth > 0)
		return XTC_E_DEADLK;
	xtc__fiber_switch(c->caller);
	return XTC_OK;
}
