/*
 * loop_timer.c - the loop's timer heap.
 *
 * Model: a binary min-heap of timer pointers keyed on (deadline, seq); each
 * timer remembers its heap index so disarm is O(log n) without a search.
 * Timers are intrusive: internal users (parks, proc sleeps, recv timeouts)
 * embed a struct xtc_timer and arm it with xtc__timer_arm, so a million
 * timed waits allocate nothing. Public handles from xtc_timer_set are
 * allocated, stay valid for the loop's lifetime (libxtc's rule) and are
 * freed at fini; timers set without a handle are recycled once they fire.
 *
 * Invariants: heap[i]->heap_idx == i for every armed timer; a timer is in
 * the heap iff state == XTC__TM_ARMED; pending_timers counts armed
 * non-internal timers (they keep xtc_loop_run alive).
 *
 * A timer fires no earlier than asked: deadlines are absolute xtc__now()
 * values and the loop fires only timers with deadline <= now.
 *
 * Alternatives rejected: a timer wheel (cheaper inserts, but coarse
 * granularity and a tick); a sorted list (O(n) inserts under many sleepers).
 */
#include "rtcode_int.h" /* first: this file is runtime code */
#include <stdlib.h>

#include "loop_int.h"

static int tm_before(const struct xtc_timer *a, const struct xtc_timer *b)
{
	if (a->deadline != b->deadline)
		return a->deadline < b->deadline;
	return a->seq < b->seq;
}

static void heap_set(xtc_loop_t *loop, uint32_t i, struct xtc_timer *tm)
{
	loop->heap[i] = tm;
	tm->heap_idx = i;
}

static void sift_up(xtc_loop_t *loop, uint32_t i)
{
	struct xtc_timer *tm = loop->heap[i];

	while (i > 0) {
		uint32_t parent = (i - 1) / 2;
		if (!tm_before(tm, loop->heap[parent]))
			break;
		heap_set(loop, i, loop->heap[parent]);
		i = parent;
	}
	heap_set(loop, i, tm);
}

static void sift_down(xtc_loop_t *loop, uint32_t i)
{
	struct xtc_timer *tm = loop->heap[i];
	uint32_t n = loop->heap_len;

	for (;;) {
		uint32_t c = 2 * i + 1;
		if (c >= n)
			break;
		if (c + 1 < n && tm_before(loop->heap[c + 1], loop->heap[c]))
			c++;
		if (!tm_before(loop->heap[c], tm))
			break;
		heap_set(loop, i, loop->heap[c]);
		i = c;
	}
	heap_set(loop, i, tm);
}

static int heap_push(xtc_loop_t *loop, struct xtc_timer *tm)
{
	if (loop->heap_len == loop->heap_cap) {
		uint32_t cap = loop->heap_cap ? loop->heap_cap * 2 : 64;
		struct xtc_timer **h = realloc(loop->heap, cap * sizeof(*h));
		if (h == NULL)
			return XTC_E_NOMEM;
		loop->heap = h;
		loop->heap_cap = cap;
	}
	heap_set(loop, loop->heap_len++, tm);
	sift_up(loop, tm->heap_idx);
	return XTC_OK;
}

static void heap_remove(xtc_loop_t *loop, struct xtc_timer *tm)
{
	uint32_t i = tm->heap_idx;
	struct xtc_timer *last = loop->heap[--loop->heap_len];

	if (last != tm) {
		heap_set(loop, i, last);
		if (i > 0 && tm_before(last, loop->heap[(i - 1) / 2]))
			sift_up(loop, i);
		else
			sift_down(loop, i);
	}
}

static void tm_unarm(struct xtc_timer *tm, uint8_t new_state)
{
	xtc_loop_t *loop = tm->loop;

	heap_remove(loop, tm);
	tm->state = new_state;
	if (tm->kind != XTC__TMK_INTERNAL)
		loop->pending_timers--;
	if (tm->kind == XTC__TMK_ANON) {
		tm->next_free = loop->timers_free;
		loop->timers_free = tm;
	}
}

int xtc__timer_arm(xtc_loop_t *loop, struct xtc_timer *tm, int64_t deadline_ns,
                   xtc_timer_fn fn, void *user)
{
	int rc;

	if (tm->state == XTC__TM_ARMED) {
		heap_remove(tm->loop, tm);
		if (tm->kind != XTC__TMK_INTERNAL)
			tm->loop->pending_timers--;
	}
	tm->loop = loop;
	tm->deadline = deadline_ns;
	tm->seq = loop->timer_seq++;
	tm->fn = fn;
	tm->user = user;
	rc = heap_push(loop, tm);
	if (rc != 0) {
		tm->state = XTC__TM_IDLE;
		return rc;
	}
	tm->state = XTC__TM_ARMED;
	if (tm->kind != XTC__TMK_INTERNAL)
		loop->pending_timers++;
	return XTC_OK;
}

void xtc__timer_disarm(struct xtc_timer *tm)
{
	if (tm != NULL && tm->state == XTC__TM_ARMED)
		tm_unarm(tm, XTC__TM_IDLE);
}

int xtc__timers_init(xtc_loop_t *loop)
{
	loop->heap = NULL;
	loop->heap_len = loop->heap_cap = 0;
	loop->timer_seq = 0;
	loop->timers_all = loop->timers_free = NULL;
	loop->pending_timers = 0;
	return XTC_OK;
}

void xtc__timers_fini(xtc_loop_t *loop)
{
	struct xtc_timer *tm, *next;
	uint32_t i;

	/* Anonymous timers live either in the heap or on the free list. */
	for (i = 0; i < loop->heap_len; i++) {
		tm = loop->heap[i];
		tm->state = XTC__TM_CANCELLED;
		if (tm->kind == XTC__TMK_ANON)
			free(tm);
	}
	loop->heap_len = 0;
	for (tm = loop->timers_free; tm != NULL; tm = next) {
		next = tm->next_free;
		free(tm);
	}
	for (tm = loop->timers_all; tm != NULL; tm = next) {
		next = tm->next_free;
		free(tm);
	}
	free(loop->heap);
	xtc__timers_init(loop);
}

int xtc__timers_fire(xtc_loop_t *loop, int64_t now)
{
	int fired = 0;
	/* Bound the batch so a callback that re-arms at "now" cannot spin the
	 * loop forever; the rest fire at the next step. */
	uint32_t budget = loop->heap_len;

	while (budget-- > 0 && loop->heap_len > 0 &&
	       loop->heap[0]->deadline <= now) {
		struct xtc_timer *tm = loop->heap[0];
		xtc_timer_fn fn = tm->fn;
		void *user = tm->user;

		tm_unarm(tm, XTC__TM_FIRED);
		if (fn != NULL)
			fn(user);
		fired++;
	}
	return fired;
}

int64_t xtc__timers_next(const xtc_loop_t *loop)
{
	return loop->heap_len > 0 ? loop->heap[0]->deadline : -1;
}

static int timer_loop_ok(const xtc_loop_t *loop)
{
	uintptr_t owner;

	if (loop == NULL || loop->magic != XTC__LOOP_LIVE)
		return 0;
	owner = atomic_load_explicit(&loop->owner, memory_order_relaxed);
	return owner == 0 || owner == xtc__thread_token();
}

static int64_t deadline_after(int64_t delay_ns)
{
	return xtc__deadline_after(xtc__now(), delay_ns);
}

int xtc_timer_set(xtc_loop_t *loop, int64_t delay_ns, xtc_timer_fn fn,
                  void *user, xtc_timer_t **out_timer)
{
	struct xtc_timer *tm;
	int rc;

	if (!timer_loop_ok(loop) || fn == NULL || delay_ns < 0)
		return XTC_E_INVAL;
	if (out_timer == NULL && loop->timers_free != NULL) {
		tm = loop->timers_free;
		loop->timers_free = tm->next_free;
	} else {
		tm = calloc(1, sizeof(*tm));
		if (tm == NULL)
			return XTC_E_NOMEM;
	}
	tm->state = XTC__TM_IDLE;
	tm->kind = out_timer != NULL ? XTC__TMK_PUBLIC : XTC__TMK_ANON;
	rc = xtc__timer_arm(loop, tm, deadline_after(delay_ns), fn, user);
	if (rc != 0) {
		free(tm);
		return rc;
	}
	if (out_timer != NULL) {
		tm->next_free = loop->timers_all;
		loop->timers_all = tm;
		*out_timer = tm;
	}
	return XTC_OK;
}

int xtc_timer_cancel(xtc_timer_t *timer)
{
	if (timer == NULL || timer->kind != XTC__TMK_PUBLIC ||
	    !timer_loop_ok(timer->loop))
		return XTC_E_INVAL;
	if (timer->state == XTC__TM_ARMED)
		tm_unarm(timer, XTC__TM_CANCELLED);
	return XTC_OK;
}
