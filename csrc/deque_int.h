/*
 * deque_int.h - a bounded Chase-Lev work-stealing deque of pointers.
 *
 * Model: the owner pushes and pops at the bottom (LIFO, no CAS except for the
 * last element), thieves take from the top with one CAS. The ring has a fixed
 * power-of-two capacity: a push that finds it full fails and the caller keeps
 * the item on its private (unstealable) queue, so the deque never allocates
 * after init and memory stays bounded.
 *
 * Invariants: top only grows (by CAS); bottom is written by the owner only;
 * 0 <= bottom - top <= cap between operations; a slot is read by a thief only
 * while its index lies in [top, bottom).
 *
 * Memory order: the textbook version uses standalone seq_cst fences; here the
 * same points are seq_cst accesses of top/bottom, which is equivalent and is
 * understood by ThreadSanitizer (fences are not).
 *
 * Alternatives rejected: a growable buffer (needs deferred reclamation of the
 * old arrays for racing thieves); a locked deque (every owner pop would take
 * the lock).
 */
#ifndef XTC_DEQUE_INT_H
#define XTC_DEQUE_INT_H

#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>

typedef struct xtc__deque {
	_Alignas(64) _Atomic int64_t top;
	_Alignas(64) _Atomic int64_t bottom;
	_Alignas(64) int64_t mask;
	_Atomic(void *) *buf;
} xtc__deque_t;

/* cap must be a power of two. 0 or -1 (XTC_E_NOMEM is the caller's). */
static inline int xtc__deque_init(xtc__deque_t *d, int64_t cap)
{
	atomic_init(&d->top, 0);
	atomic_init(&d->bottom, 0);
	d->mask = cap - 1;
	d->buf = calloc((size_t)cap, sizeof(*d->buf));
	return d->buf ? 0 : -1;
}

static inline void xtc__deque_fini(xtc__deque_t *d)
{
	free(d->buf);
	d->buf = NULL;
}

/* Owner. 1 pushed, 0 full. */
static inline int xtc__deque_push(xtc__deque_t *d, void *x)
{
	int64_t b = atomic_load_explicit(&d->bottom, memory_order_relaxed);
	int64_t t = atomic_load_explicit(&d->top, memory_order_acquire);

	if (b - t > d->mask)
		return 0;
	atomic_store_explicit(&d->buf[b & d->mask], x, memory_order_relaxed);
	atomic_store_explicit(&d->bottom, b + 1, memory_order_release);
	return 1;
}

/* Owner. The most recently pushed item, or NULL. */
static inline void *xtc__deque_pop(xtc__deque_t *d)
{
	int64_t b = atomic_load_explicit(&d->bottom, memory_order_relaxed) - 1;
	int64_t t;
	void *x;

	atomic_store_explicit(&d->bottom, b, memory_order_seq_cst);
	t = atomic_load_explicit(&d->top, memory_order_seq_cst);
	if (t > b) { /* empty */
		atomic_store_explicit(&d->bottom, b + 1, memory_order_relaxed);
		return NULL;
	}
	x = atomic_load_explicit(&d->buf[b & d->mask], memory_order_relaxed);
	if (t == b) { /* last item: race the thieves for it */
		if (!atomic_compare_exchange_strong_explicit(&d->top, &t, t + 1,
		    memory_order_seq_cst, memory_order_relaxed))
			x = NULL;
		atomic_store_explicit(&d->bottom, b + 1, memory_order_relaxed);
	}
	return x;
}

/* Any thread. The oldest item, or NULL (empty or lost a race). */
static inline void *xtc__deque_steal(xtc__deque_t *d)
{
	int64_t t = atomic_load_explicit(&d->top, memory_order_seq_cst);
	int64_t b = atomic_load_explicit(&d->bottom, memory_order_seq_cst);
	void *x;

	if (t >= b)
		return NULL;
	x = atomic_load_explicit(&d->buf[t & d->mask], memory_order_relaxed);
	if (!atomic_compare_exchange_strong_explicit(&d->top, &t, t + 1,
	    memory_order_seq_cst, memory_order_relaxed))
		return NULL;
	return x;
}

/* Any thread; a hint (exact for the owner between its own operations). */
static inline int64_t xtc__deque_size(xtc__deque_t *d)
{
	int64_t b = atomic_load_explicit(&d->bottom, memory_order_seq_cst);
	int64_t t = atomic_load_explicit(&d->top, memory_order_seq_cst);
	return b > t ? b - t : 0;
}

#endif
