/*
 * ring_int.h - the bounded sequence-cell ring (Vyukov's bounded queue),
 * written once for its three users: the executor's submission ring
 * (exec_int.h: many producers claiming by CAS, one consumer), the batch
 * group's cross-thread queue (batch.c: many producers, many consumers,
 * both by CAS) and the completion queue (future_cq.c: producers that
 * reserved their slot at registration, one consumer).
 *
 * Model:
 *  1. A ring is a power-of-two array of cells, each starting with its
 *     sequence word (xtc__rcell_t); the user's payload follows in its own
 *     cell type, whose size is the stride. Cell i starts with seq i.
 *  2. A producer owns the cell at position pos once it claimed pos (a CAS
 *     of the tail from pos to pos + 1 that found seq == pos, or a
 *     fetch-add when the slot was reserved beforehand); it writes the
 *     payload and publishes seq = pos + 1 (release).
 *  3. A consumer takes the cell at head when seq == head + 1 (acquire),
 *     reads the payload and hands the cell to the next lap: seq = head +
 *     capacity (release). A single consumer advances its head with plain
 *     stores (when to publish it is the user's choice: the submission
 *     ring publishes once per batch); several consumers claim head by CAS.
 *
 * Invariants: 0 <= tail - head <= capacity; a cell's seq is pos (free for
 * the producer of pos), pos + 1 (full, for the consumer of pos) or pos +
 * capacity (free for the next lap), nothing else; only the owner of a
 * position touches that cell's payload.
 *
 * The memory orders are arguments (constants at every call site, so the
 * inlined code is what each copy had): the submission ring claims with a
 * seq_cst CAS because the tail is its half of a Dekker with the parking
 * carrier, the cq publishes seq_cst for the same reason with its armed
 * doorbell; the batch queue needs only relaxed claims.
 *
 * Rejected: one ring type with its head, tail and cells in one struct
 * (the three users keep head and tail on lines of their own choosing,
 * next to the fields each reads with them); a macro that generates a ring
 * per payload type (three copies again, in the preprocessor); a locked
 * queue (producers are carriers in the middle of a run or a completion:
 * they must neither block nor fail except when the ring is full).
 */
#ifndef XTC_RING_INT_H
#define XTC_RING_INT_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "base_int.h"

typedef struct xtc__rcell {
	_Atomic uint64_t seq;
} xtc__rcell_t;

/* The cell of position pos (cells: the array, stride: sizeof a cell). */
static inline xtc__rcell_t *xtc__ring_cell(void *cells, size_t stride,
                                           uint64_t mask, uint64_t pos)
{
	return (xtc__rcell_t *)((char *)cells + (size_t)(pos & mask) * stride);
}

/* Before any producer or consumer: cell i gets seq i. */
static inline void xtc__ring_init(void *cells, size_t stride, uint64_t n)
{
	for (uint64_t i = 0; i < n; i++)
		atomic_init(&xtc__ring_cell(cells, stride, n - 1, i)->seq, i);
}

/* Producer: claim the next position by CAS of *tail (cas: the success
 * order). The claimed cell, its position in *pos; NULL when full. */
static inline xtc__rcell_t *xtc__ring_claim(_Atomic uint64_t *tail,
                                            void *cells, size_t stride,
                                            uint64_t mask, memory_order cas,
                                            uint64_t *pos)
{
	uint64_t p = atomic_load_explicit(tail, memory_order_relaxed);
	xtc__rcell_t *c;

	for (;;) {
		c = xtc__ring_cell(cells, stride, mask, p);
		uint64_t seq = atomic_load_explicit(&c->seq,
		                                    memory_order_acquire);
		int64_t d = (int64_t)(seq - p);
		if (d == 0) {
			if (atomic_compare_exchange_weak_explicit(tail, &p,
			    p + 1, cas, memory_order_relaxed))
				break;
		} else if (d < 0) {
			return NULL; /* full */
		} else {
			p = atomic_load_explicit(tail, memory_order_relaxed);
		}
	}
	*pos = p;
	return c;
}

/* Producer of a reserved slot: the ring has room by construction (the
 * cell at pos was released one lap ago, or is about to be). */
static inline xtc__rcell_t *xtc__ring_claim_reserved(_Atomic uint64_t *tail,
                                                     void *cells,
                                                     size_t stride,
                                                     uint64_t mask,
                                                     uint64_t *pos)
{
	uint64_t p = atomic_fetch_add_explicit(tail, 1, memory_order_relaxed);
	xtc__rcell_t *c = xtc__ring_cell(cells, stride, mask, p);

	while (atomic_load_explicit(&c->seq, memory_order_acquire) != p)
		XTC__CPU_RELAX(); /* unreachable with reservations; be safe */
	*pos = p;
	return c;
}

/* Producer: the payload of the cell claimed at pos is written. */
static inline void xtc__ring_publish(xtc__rcell_t *c, uint64_t pos,
                                     memory_order mo)
{
	atomic_store_explicit(&c->seq, pos + 1, mo);
}

/* Single consumer: the cell at head when its payload is published, else
 * NULL (empty, or the producer of head has not published yet). */
static inline xtc__rcell_t *xtc__ring_peek(void *cells, size_t stride,
                                           uint64_t mask, uint64_t head)
{
	xtc__rcell_t *c = xtc__ring_cell(cells, stride, mask, head);

	return atomic_load_explicit(&c->seq, memory_order_acquire) == head + 1
	    ? c : NULL;
}

/* Consumer: the payload of the cell taken at pos was read; the cell is
 * the next lap's. */
static inline void xtc__ring_release(xtc__rcell_t *c, uint64_t pos,
                                     uint64_t mask)
{
	atomic_store_explicit(&c->seq, pos + mask + 1, memory_order_release);
}

/* One of several consumers: claim the published cell at *head by CAS
 * (relaxed: the cell's seq orders the payload). NULL when empty. */
static inline xtc__rcell_t *xtc__ring_take(_Atomic uint64_t *head,
                                           void *cells, size_t stride,
                                           uint64_t mask, uint64_t *pos)
{
	uint64_t p = atomic_load_explicit(head, memory_order_relaxed);
	xtc__rcell_t *c;

	for (;;) {
		c = xtc__ring_cell(cells, stride, mask, p);
		uint64_t seq = atomic_load_explicit(&c->seq,
		                                    memory_order_acquire);
		int64_t d = (int64_t)(seq - (p + 1));
		if (d == 0) {
			if (atomic_compare_exchange_weak_explicit(head, &p,
			    p + 1, memory_order_relaxed, memory_order_relaxed))
				break;
		} else if (d < 0) {
			return NULL; /* empty (or the push at head not written) */
		} else {
			p = atomic_load_explicit(head, memory_order_relaxed);
		}
	}
	*pos = p;
	return c;
}

#endif
