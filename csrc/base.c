/*
 * base.c - the xtc.h basics: version, error text, allocation helpers,
 * clocks, thread sleep and the two atomics.
 *
 * Model: thin, total functions. Each one accepts every input (NULL, zero
 * sizes, unknown codes) and answers with a documented value instead of
 * crashing. The error text is generated from the one XTC_ERRORS table so
 * the enum, the text and the Go sentinels cannot drift.
 *
 * Alternatives rejected: returning NULL for zero-size allocations (libxtc
 * promises a unique pointer that can be freed, and callers test for NULL to
 * detect failure); a TSC clock here (the vDSO monotonic clock is cheap and
 * correct across CPUs; TSC accounting belongs to the scheduler).
 */
#include "rtcode_int.h" /* first: this file is runtime code */
#include <errno.h>
#include <link.h>
#include <stdatomic.h>
#include <stdint.h>
#include <malloc.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "xtc.h"
#include "base_int.h"

/* ---- the upcall table (base_int.h): defaults -------------------------- */

static int no_slice_yield(void)
{
	return XTC_E_INVAL;
}

static void up_nop(void)
{
}

static void up_nop_i64(int64_t v)
{
	(void)v;
}

static int64_t up_never(void)
{
	return INT64_MAX;
}

static void up_nop_loop(struct xtc_loop *loop)
{
	(void)loop;
}

static uint64_t up_no_label(const void *proc, const char **name)
{
	(void)proc;
	*name = NULL;
	return 0;
}

static int up_no_offer(struct xtc_loop *loop, struct xtc_task *t)
{
	(void)loop;
	(void)t;
	return 0;
}

xtc__upcalls_t xtc__up = {
	.clock = NULL,
	.slice_yield = no_slice_yield,
	.gocb_pause = up_nop,
	.gocb_resume = up_nop,
	.quantum_tick = up_nop_i64,
	.quantum_next = up_never,
	.quantum_idle = up_nop_i64,
	.quantum_service = up_nop_i64,
	.quantum_cost = up_nop_i64,
	.proc_resumed = up_nop,
	.proc_loop_fini = up_nop_loop,
	.proc_label = up_no_label,
	.sched_loop_fini = up_nop_loop,
	.exec_ring_run = up_nop_loop,
	.exec_offer = up_no_offer,
};

const char *xtc_version_string(void)
{
	return XTC_VERSION_STRING;
}

int xtc_version_components(int *major, int *minor, int *patch)
{
	if (major == NULL || minor == NULL || patch == NULL)
		return XTC_E_INVAL;
	*major = XTC_VERSION_MAJOR;
	*minor = XTC_VERSION_MINOR;
	*patch = XTC_VERSION_PATCH;
	return XTC_OK;
}

const char *xtc_strerror(int xtc_err)
{
	switch (xtc_err) {
#define XTC__ERR_TEXT(name, val, text) case (val): return (text);
	XTC_ERRORS(XTC__ERR_TEXT)
#undef XTC__ERR_TEXT
	default:
		return "unknown";
	}
}

/* A zero-size request gets one byte so the pointer is unique and freeable. */
void *xtc_malloc(size_t size)
{
	return malloc(size != 0 ? size : 1);
}

void *xtc_calloc(size_t n, size_t size)
{
	if (n != 0 && size > SIZE_MAX / n)
		return NULL;
	if (n == 0 || size == 0)
		return calloc(1, 1);
	return calloc(n, size);
}

/* The registered recycler (base_int.h): published with release after
 * its bounds, read with acquire (free on x86, one ldar on arm64). */
static struct {
	_Atomic(void (*)(void *)) put;
	size_t lo, span;
} recycler;

void xtc__alloc_recycler_set(size_t lo, size_t hi, void (*put)(void *))
{
	recycler.lo = lo;
	recycler.span = hi - lo;
	atomic_store_explicit(&recycler.put, put, memory_order_release);
}

/* realloc(p, 0) may free p and return NULL; keep the unique-pointer rule. */
void *xtc_realloc(void *p, size_t size)
{
	return realloc(p, size != 0 ? size : 1);
}

/* Every buffer the API hands out is a malloc chunk, so free() releases it
 * too; xtc_free gives blocks of the message size back to the message
 * cache (proc_mailbox.c) instead: one malloc_usable_size call, the price
 * of letting free() work (bench_proc proc_pingpong: +58 instructions per
 * round trip, 885 -> 943, +3-4% in thread CPU time). */
void xtc_free(void *p)
{
	void (*put)(void *) = atomic_load_explicit(&recycler.put,
	                                           memory_order_acquire);

	if (put != NULL && p != NULL &&
	    malloc_usable_size(p) - recycler.lo <= recycler.span) {
		put(p);
		return;
	}
	free(p);
}

void *xtc_aligned_alloc(size_t align, size_t size)
{
	void *p = NULL;

	if (align == 0 || (align & (align - 1)) != 0)
		return NULL;
	if (align < sizeof(void *))
		align = sizeof(void *);
	if (posix_memalign(&p, align, size != 0 ? size : 1) != 0)
		return NULL;
	return p;
}

void xtc_aligned_free(void *p)
{
	free(p);
}

static int64_t clock_ns(clockid_t id)
{
	struct timespec ts;

	if (clock_gettime(id, &ts) != 0)
		return 0;
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int64_t xtc_clock_mono(void)
{
	if (XTC__UNLIKELY(xtc__up.clock != NULL))
		return xtc__up.clock();
	return clock_ns(CLOCK_MONOTONIC);
}

int64_t xtc_clock_real(void)
{
	return clock_ns(CLOCK_REALTIME);
}

/* Blocks the OS thread (not a fiber primitive): restarts after signals so
 * the full duration elapses. */
int xtc_sleep_ns(int64_t ns)
{
	struct timespec ts;

	if (ns < 0)
		return XTC_E_INVAL;
	ts.tv_sec = (time_t)(ns / 1000000000);
	ts.tv_nsec = (long)(ns % 1000000000);
	while (nanosleep(&ts, &ts) != 0) {
		if (errno != EINTR)
			return XTC_E_INTERNAL;
	}
	return XTC_OK;
}

int64_t xtc_atomic_i64_load(const int64_t *p)
{
	if (p == NULL)
		return 0;
	return __atomic_load_n(p, __ATOMIC_RELAXED);
}

int64_t xtc_atomic_i64_add(int64_t *p, int64_t delta)
{
	if (p == NULL)
		return 0;
	return __atomic_fetch_add(p, delta, __ATOMIC_SEQ_CST);
}

void xtc__sig_chain(const struct sigaction *old_act, int sig, siginfo_t *si,
                    void *uctx)
{
	struct sigaction old = *old_act;

	if (old.sa_flags & SA_SIGINFO) {
		if (old.sa_sigaction != NULL) {
			old.sa_sigaction(sig, si, uctx);
			return;
		}
	} else if (old.sa_handler != SIG_DFL && old.sa_handler != SIG_IGN) {
		old.sa_handler(sig);
		return;
	}
	/* Default disposition (SIG_IGN makes no sense for a fault): restore
	 * it and return; the faulting instruction re-executes and the kernel
	 * delivers the signal with the default action. */
	struct sigaction dfl;
	memset(&dfl, 0, sizeof dfl);
	dfl.sa_handler = SIG_DFL;
	sigemptyset(&dfl.sa_mask);
	sigaction(sig, &dfl, NULL);
}

static int tls_sum(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)size;
	size_t *sum = arg;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		if (ph->p_type == PT_TLS)
			*sum += ph->p_memsz + (ph->p_align > 1 ? ph->p_align : 0);
	}
	return 0;
}

size_t xtc__thread_stack_size(size_t frames)
{
	size_t sum = 0;
	dl_iterate_phdr(tls_sum, &sum);
	return (frames + sum + 16 * 1024 + 4095) & ~(size_t)4095;
}
