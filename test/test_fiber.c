/*
 * test_fiber.c - the context-switch layer: switch, exit, stacks, FP control
 * state per fiber, alignment, migration between threads, error paths.
 *
 * Runs on every substrate (asm, ucontext) and arch (x86-64 natively,
 * aarch64 under qemu via tools/aarch64-test.sh).
 */
#include <fenv.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fiber_int.h"
#include "xtc.h"

#include "test_util.h"

/* ---- ping-pong with live values across switches ------------------- */

struct pp {
	xtc__fiber_t f;
	long count;
	long sum;
};

/* Leave garbage in every callee-saved register the compiler lets us name
 * before switching back: if the switch failed to restore the root's own
 * values, the root's live locals (test_pingpong) would be corrupted. */
static inline void trash_callee_saved(void)
{
#if defined(__x86_64__)
	__asm__ volatile("mov $-1, %%rbx\n\tmov $-1, %%r12\n\t"
	                 "mov $-1, %%r13\n\tmov $-1, %%r14\n\t"
	                 "mov $-1, %%r15"
	                 ::: "rbx", "r12", "r13", "r14", "r15");
#elif defined(__aarch64__)
	__asm__ volatile("mov x19, #-1\n\tmov x20, #-1\n\tmov x21, #-1\n\t"
	                 "mov x22, #-1\n\tmov x23, #-1\n\tmov x24, #-1\n\t"
	                 "mov x25, #-1\n\tmov x26, #-1\n\tmov x27, #-1\n\t"
	                 "mov x28, #-1\n\tfmov d8, #-1.0\n\t"
	                 "fmov d9, #-1.0\n\tfmov d10, #-1.0\n\t"
	                 "fmov d11, #-1.0\n\tfmov d12, #-1.0\n\t"
	                 "fmov d13, #-1.0\n\tfmov d14, #-1.0\n\t"
	                 "fmov d15, #-1.0"
	                 ::: "x19", "x20", "x21", "x22", "x23", "x24", "x25",
	                     "x26", "x27", "x28", "d8", "d9", "d10", "d11",
	                     "d12", "d13", "d14", "d15");
#endif
}

static void pp_entry(void *arg)
{
	struct pp *p = arg;
	/* Many live locals across the switch: the compiler keeps them in
	 * callee-saved registers, so a lost register shows up in sum. */
	long a = 1, b = 2, c = 3, d = 4, e = 5, g = 6;
	for (;;) {
		p->count++;
		a += 1; b += 2; c += 3; d += 4; e += 5; g += 6;
		trash_callee_saved();
		xtc__fiber_switch(xtc__fiber_root());
		p->sum = a + b + c + d + e + g;
		if (p->count == 1000)
			break;
	}
	xtc__fiber_exit_to(xtc__fiber_root());
}

static void test_pingpong(void)
{
	struct pp p = { .count = 0 };
	CHECK(xtc__fiber_init(&p.f, 0, pp_entry, &p) == XTC_OK);
	long x = 11, y = 22, z = 33, u = 44, v = 55, w = 66;
	double dx = 1.5, dy = 2.5;
	for (long i = 0; i < 1000; i++) {
		xtc__fiber_switch(&p.f);
		CHECK(xtc__fiber_current() == xtc__fiber_root());
		x += i; y += 2 * i; z += 3 * i; u += 4 * i; v += 5 * i; w += 6 * i;
		dx += 0.5; dy *= 1.0001;
	}
	CHECK(u + v + w == 165 + 15 * (999L * 1000 / 2));
	CHECK(dx == 1.5 + 500.0);
	CHECK(dy > 2.5 && dy < 2.5 * 1.11);
	CHECK(p.count == 1000);
	/* after 999 resumptions the fiber computed with a..g at count 999 */
	long n = 999;
	CHECK(p.sum == 21 + 21 * n);
	long s = 999L * 1000 / 2;
	CHECK(x == 11 + s && y == 22 + 2 * s && z == 33 + 3 * s);
	xtc__fiber_release(&p.f);
}

/* ---- a chain of fibers switching directly to each other ------------ */

#define NCHAIN 5
static xtc__fiber_t chain[NCHAIN];
static int chain_order[NCHAIN * 2];
static int chain_n;

static void chain_entry(void *arg)
{
	int i = (int)(intptr_t)arg;
	chain_order[chain_n++] = i;
	xtc__fiber_switch(i + 1 < NCHAIN ? &chain[i + 1] : xtc__fiber_root());
	chain_order[chain_n++] = NCHAIN + i;
	xtc__fiber_exit_to(i + 1 < NCHAIN ? &chain[i + 1] : xtc__fiber_root());
}

static void test_chain(void)
{
	for (int i = 0; i < NCHAIN; i++)
		CHECK(xtc__fiber_init(&chain[i], 32 * 1024, chain_entry,
		                      (void *)(intptr_t)i) == XTC_OK);
	xtc__fiber_switch(&chain[0]);
	CHECK(chain_n == NCHAIN);
	xtc__fiber_switch(&chain[0]);
	CHECK(chain_n == 2 * NCHAIN);
	for (int i = 0; i < 2 * NCHAIN; i++)
		CHECK(chain_order[i] == i);
	for (int i = 0; i < NCHAIN; i++)
		xtc__fiber_release(&chain[i]);
}

/* ---- FP control state is per fiber --------------------------------- */

static int fp_seen_at_start, fp_seen_after;
static unsigned fp_mxcsr_after;

/* fegetround() reads only the x87 control word on x86-64; check the SSE
 * rounding control (MXCSR bits 13-14) separately. */
static unsigned read_mxcsr_rc(void)
{
#if defined(__x86_64__)
	return (__builtin_ia32_stmxcsr() >> 13) & 3;
#else
	return 0;
#endif
}

static void fp_entry(void *arg)
{
	(void)arg;
	fp_seen_at_start = fegetround();
	fesetround(FE_DOWNWARD);
	xtc__fiber_switch(xtc__fiber_root());
	fp_seen_after = fegetround();
	fp_mxcsr_after = read_mxcsr_rc();
	xtc__fiber_exit_to(xtc__fiber_root());
}

static void test_fp_control(void)
{
	xtc__fiber_t f;
	/* Created while the thread rounds upward: the fiber inherits it. */
	fesetround(FE_UPWARD);
	CHECK(xtc__fiber_init(&f, 0, fp_entry, NULL) == XTC_OK);
	fesetround(FE_TONEAREST);
	xtc__fiber_switch(&f);
	CHECK(fp_seen_at_start == FE_UPWARD);
	CHECK(fegetround() == FE_TONEAREST); /* the fiber's change stayed */
	fesetround(FE_TOWARDZERO);
	xtc__fiber_switch(&f);
	CHECK(fp_seen_after == FE_DOWNWARD);
	CHECK(fegetround() == FE_TOWARDZERO); /* restored by exit_to */
#if defined(__x86_64__)
	CHECK(fp_mxcsr_after == 1);           /* MXCSR RC: 1 = down */
	CHECK(read_mxcsr_rc() == 3);          /* 3 = toward zero */
#endif
	fesetround(FE_TONEAREST);
	xtc__fiber_release(&f);
}

/* ---- alignment and stack use -------------------------------------- */

static uintptr_t seen_frame;
static int deep_ok;

__attribute__((noinline)) static void note_frame(void)
{
	seen_frame = (uintptr_t)__builtin_frame_address(0);
}

__attribute__((noinline)) static long use_stack(size_t n)
{
	volatile char buf[1024];
	memset((char *)buf, (int)n, sizeof buf);
	long r = n > 0 ? use_stack(n - 1) : 0;
	return r + buf[n % sizeof buf];
}

static void align_entry(void *arg)
{
	(void)arg;
	note_frame();
	/* ~40 KiB of a 64 KiB stack */
	deep_ok = use_stack(40) != -1;
	xtc__fiber_exit_to(xtc__fiber_root());
}

static void test_alignment_and_depth(void)
{
	xtc__fiber_t f;
	CHECK(xtc__fiber_init(&f, 64 * 1024, align_entry, NULL) == XTC_OK);
	CHECK((uintptr_t)f.stack.hi - (uintptr_t)f.stack.lo == 64 * 1024);
	CHECK((uintptr_t)f.stack.lo - (uintptr_t)f.stack.map ==
	      xtc__page_size());
	xtc__fiber_switch(&f);
	CHECK(deep_ok);
	CHECK(seen_frame > (uintptr_t)f.stack.lo &&
	      seen_frame < (uintptr_t)f.stack.hi);
#if defined(__x86_64__)
	/* with rbp pushed on an ABI-aligned call, the frame address is
	 * 16-byte aligned */
	CHECK(seen_frame % 16 == 0);
#endif
	xtc__fiber_release(&f);
}

/* ---- stack cache ---------------------------------------------------- */

static void exit_entry(void *arg)
{
	(*(int *)arg)++;
	xtc__fiber_exit_to(xtc__fiber_root());
}

static void test_stack_cache(void)
{
	xtc__stack_cache_trim();
	CHECK(xtc__stack_cache_count() == 0);
	int runs = 0;
	xtc__fiber_t f;
	CHECK(xtc__fiber_init(&f, 0, exit_entry, &runs) == XTC_OK);
	void *first = f.stack.map;
	xtc__fiber_switch(&f);
	xtc__fiber_release(&f);
	CHECK(xtc__stack_cache_count() == 1);
	/* spawn/exit cycles reuse the one cached stack */
#ifdef XTC__FIBER_TSAN
	const int cycles = 1000; /* TSan fiber contexts are expensive */
#else
	const int cycles = 10000;
#endif
	for (int i = 0; i < cycles; i++) {
		CHECK(xtc__fiber_init(&f, 0, exit_entry, &runs) == XTC_OK);
		if (f.stack.map != first) {
			CHECK(f.stack.map == first);
			break;
		}
		xtc__fiber_switch(&f);
		xtc__fiber_release(&f);
	}
	CHECK(runs == cycles + 1);
	CHECK(xtc__stack_cache_count() == 1);

	/* a different size is a separate mapping */
	xtc__stack_t a, b;
	CHECK(xtc__stack_alloc(128 * 1024, &a) == XTC_OK);
	CHECK(a.map != first);
	CHECK((char *)a.hi - (char *)a.lo == 128 * 1024);
	xtc__stack_free(&a);
	CHECK(a.map == NULL);
	CHECK(xtc__stack_cache_count() == 2);

	/* the cache is bounded */
	enum { N = XTC__STACK_CACHE_MAX + 20 };
	static xtc__stack_t many[N];
	for (int i = 0; i < N; i++)
		CHECK(xtc__stack_alloc(0, &many[i]) == XTC_OK);
	for (int i = 0; i < N; i++)
		xtc__stack_free(&many[i]);
	CHECK(xtc__stack_cache_count() == XTC__STACK_CACHE_MAX);
	xtc__stack_cache_trim();
	CHECK(xtc__stack_cache_count() == 0);

	/* stacks are writable end to end */
	CHECK(xtc__stack_alloc(20000, &b) == XTC_OK);
	CHECK((size_t)((char *)b.hi - (char *)b.lo) % xtc__page_size() == 0);
	memset(b.lo, 0xa5, (size_t)((char *)b.hi - (char *)b.lo));
	xtc__stack_free(&b);
	xtc__stack_free(&b); /* cleared: second free is a no-op */
	xtc__stack_free(NULL);
}

/* ---- the process-wide pool: stacks outlive threads ------------------ */

static void *pool_worker(void *arg)
{
	enum { N = XTC__STACK_CACHE_MAX + 20 };
	xtc__stack_t v[N];
	(void)arg;
	for (int i = 0; i < N; i++)
		CHECK(xtc__stack_alloc(0, &v[i]) == XTC_OK);
	for (int i = 0; i < N; i++)
		xtc__stack_free(&v[i]); /* 64 cached, 20 spill to the pool */
	return NULL; /* exit: the 64 cached join the pool */
}

static void *pool_taker(void *arg)
{
	xtc__stack_t st;
	size_t *maps_seen = arg;
	size_t before = xtc_stack_pool_count();
	CHECK(xtc__stack_alloc(0, &st) == XTC_OK);
	/* a fresh thread's first stack comes from the pool, with half a
	 * cache more: nothing mapped */
	*maps_seen = before - xtc_stack_pool_count();
	CHECK(xtc__stack_cache_count() == XTC__STACK_CACHE_MAX / 2 - 1);
	xtc__stack_free(&st);
	return NULL;
}

static void test_stack_pool(void)
{
	pthread_t th;
	size_t took = 0;

	xtc__stack_cache_trim();
	(void)xtc_stack_pool_trim();
	CHECK(xtc_stack_pool_count() == 0);
	pthread_create(&th, NULL, pool_worker, NULL);
	pthread_join(th, NULL);
	CHECK(xtc_stack_pool_count() == XTC__STACK_CACHE_MAX + 20);
	pthread_create(&th, NULL, pool_taker, &took);
	pthread_join(th, NULL);
	CHECK(took == XTC__STACK_CACHE_MAX / 2);
	CHECK(xtc_stack_pool_count() == XTC__STACK_CACHE_MAX + 20);

	/* reserve: tops up the pool to n stacks of the default size and
	 * keeps them, even above the pool's usual bound */
	CHECK(xtc_stack_reserve(XTC__STACK_POOL_MAX + 16) == XTC_OK);
	CHECK(xtc_stack_pool_count() == XTC__STACK_POOL_MAX + 16);
	CHECK(xtc_stack_reserve(10) == XTC_OK); /* already there */
	CHECK(xtc_stack_pool_count() == XTC__STACK_POOL_MAX + 16);
	CHECK(xtc_stack_reserve(XTC__STACK_RESERVE_MAX + 1) == XTC_E_RANGE);
	CHECK(xtc_stack_pool_trim() == XTC__STACK_POOL_MAX + 16);
	CHECK(xtc_stack_pool_count() == 0);
	CHECK(xtc_stack_pool_trim() == 0);
}

/* ---- slabs, kinds and small stacks ------------------------------- */

static void switch_back_entry(void *arg)
{
	volatile char frame[256];
	frame[0] = 1;
	(*(int *)arg) += frame[0];
	xtc__fiber_switch(xtc__fiber_root());
	(*(int *)arg)++;
	xtc__fiber_exit_to(xtc__fiber_root());
}

static void test_slabs(void)
{
	enum { N = 3000 };
	static xtc__stack_t v[N];
	xtc__stack_stats_t st0, st1;

	xtc__stack_stats(&st0);
	for (int i = 0; i < N; i++)
		CHECK(xtc__stack_alloc(0, &v[i]) == XTC_OK);
	xtc__stack_stats(&st1);
	/* 3000 stacks of 64 KiB: a few slabs, not 3000 mappings */
	CHECK(st1.slabs - st0.slabs <= 4);
	for (int i = 0; i < N; i++) {
		CHECK(v[i].kind != XTC__SK_NONE && v[i].kind != XTC__SK_OWN);
		CHECK(v[i].canary != NULL);
		CHECK((char *)v[i].hi - (char *)v[i].lo == 64 * 1024);
	}
	for (int i = 0; i < N; i++)
		xtc__stack_free(&v[i]);
	/* beyond the cache and the pool they are retired, then reused
	 * before anything new is carved */
	(void)xtc_stack_pool_trim();
	xtc__stack_cache_trim();
	xtc__stack_stats(&st0);
	CHECK(st0.cold >= N - XTC__STACK_POOL_MAX - XTC__STACK_CACHE_MAX);
	for (int i = 0; i < 10; i++)
		CHECK(xtc__stack_alloc(0, &v[i]) == XTC_OK);
	xtc__stack_stats(&st1);
	CHECK(st1.carved == st0.carved);
	for (int i = 0; i < 10; i++)
		xtc__stack_free(&v[i]);

	/* a stack above the slab slot limit has a mapping of its own */
	xtc__stack_t big;
	CHECK(xtc__stack_alloc(2u << 20, &big) == XTC_OK);
	CHECK(big.kind == XTC__SK_OWN);
	xtc__stack_free(&big);

	/* small stacks: back to back, several to a page, canary kind */
	xtc__stack_t a, b;
	CHECK(xtc__stack_alloc(1100, &a) == XTC_OK); /* rounded up */
	CHECK(xtc__stack_alloc(1280, &b) == XTC_OK);
	CHECK((char *)a.hi - (char *)a.lo == 1280);
	CHECK(a.kind == XTC__SK_CANARY && b.kind == XTC__SK_CANARY);
	CHECK(a.map_len == 1280 + XTC__STACK_SMALL_GUARD);
	CHECK((char *)b.map == (char *)a.hi || (char *)a.map == (char *)b.hi);
	CHECK(*a.canary == 0 && (const char *)a.canary < (const char *)a.lo);
	xtc__stack_free(&a);
	xtc__stack_free(&b);
	CHECK(xtc__stack_alloc(1000, &a) == XTC_E_INVAL); /* below 1 KiB */

	/* a fiber runs and switches on a small stack */
	int runs = 0;
	xtc__fiber_t f;
#if defined(XTC__FIBER_ASAN) || defined(XTC__FIBER_TSAN)
	const size_t small = 12 * 1024; /* the sanitizers' frames are larger */
#elif defined(XTC__CORO_UCONTEXT)
	const size_t small = 8192; /* its ucontext_t lives on the stack too */
#else
	const size_t small = 2048;
#endif
	CHECK(xtc__fiber_init(&f, small, switch_back_entry, &runs) == XTC_OK);
	xtc__fiber_switch(&f);
	CHECK(runs == 1);
	xtc__fiber_switch(&f);
	CHECK(runs == 2);
	xtc__fiber_release(&f);
}

/* ---- defaults and error paths -------------------------------------- */

static void test_errors_and_defaults(void)
{
	xtc__fiber_t f;
	CHECK(xtc__stack_default() == 64 * 1024);
	CHECK(xtc__stack_set_default(8 * 1024) == XTC_E_INVAL);
	CHECK(xtc__stack_set_default(0) == XTC_E_INVAL);
	CHECK(xtc__stack_set_default((size_t)1 << 40) == XTC_E_RANGE);
	CHECK(xtc__stack_default() == 64 * 1024);
	CHECK(xtc__stack_set_default(100000) == XTC_OK);
	CHECK(xtc__stack_default() % xtc__page_size() == 0);
	CHECK(xtc__stack_default() >= 100000);
	CHECK(xtc__fiber_init(&f, 0, exit_entry, NULL) == XTC_OK);
	CHECK((size_t)((char *)f.stack.hi - (char *)f.stack.lo) ==
	      xtc__stack_default());
	xtc__fiber_release(&f);
	CHECK(xtc__stack_set_default(64 * 1024) == XTC_OK);

	CHECK(xtc__fiber_init(NULL, 0, exit_entry, NULL) == XTC_E_INVAL);
	CHECK(xtc__fiber_init(&f, 0, NULL, NULL) == XTC_E_INVAL);
	CHECK(xtc__fiber_init(&f, 512, exit_entry, NULL) == XTC_E_INVAL);
	CHECK(xtc__fiber_init(&f, (size_t)1 << 40, exit_entry, NULL) ==
	      XTC_E_RANGE);
	CHECK(xtc__stack_alloc(0, NULL) == XTC_E_INVAL);

	/* release is a no-op on root, current and released fibers */
	xtc__fiber_release(xtc__fiber_root());
	xtc__fiber_release(NULL);
	CHECK(xtc__fiber_init(&f, 0, exit_entry, NULL) == XTC_OK);
	xtc__fiber_release(&f);
	xtc__fiber_release(&f);

	/* switching to the running fiber returns at once */
	xtc__fiber_switch(xtc__fiber_current());

	CHECK(xtc__stack_vma_budget_ok(10));
	long h = xtc__stack_vma_headroom();
	CHECK(h == -1 || h > 1000);
	CHECK(!xtc__stack_vma_budget_ok((size_t)1 << 40) || h == -1);

	const char *s = xtc__fiber_substrate();
	CHECK(strcmp(s, "asm") == 0 || strcmp(s, "ucontext") == 0);
#if defined(XTC_CORO_UCONTEXT) && !defined(XTC__FIBER_ASAN)
	CHECK(strcmp(s, "ucontext") == 0);
#endif
}

/* ---- threads: per-thread roots and migration ----------------------- */

struct mig {
	xtc__fiber_t f;
	pthread_t ran_on[2];
	int step;
};

/* pthread_self() is declared const, so the compiler may reuse its value
 * across a switch (the migration hazard of fiber_int.h): call it through a
 * volatile pointer. */
static pthread_t (*volatile self_fn)(void) = pthread_self;

static void mig_entry(void *arg)
{
	struct mig *m = arg;
	m->ran_on[m->step++] = self_fn();
	/* xtc__fiber_root() is re-read after the switch: it is the root of
	 * whichever thread resumed us. */
	xtc__fiber_switch(xtc__fiber_root());
	m->ran_on[m->step++] = self_fn();
	xtc__fiber_exit_to(xtc__fiber_root());
}

static void *mig_thread(void *arg)
{
	struct mig *m = arg;
	if (xtc__fiber_thread_init() != XTC_OK)
		return (void *)1;
	xtc__fiber_t *root = xtc__fiber_root();
	if (root == NULL || xtc__fiber_current() != root)
		return (void *)2;
	xtc__fiber_switch(&m->f);
	if (xtc__fiber_current() != root)
		return (void *)3;
	xtc__fiber_release(&m->f);
	xtc__fiber_thread_fini();
	return xtc__fiber_current() == NULL ? NULL : (void *)4;
}

static void test_threads(void)
{
	struct mig m = { .step = 0 };
	CHECK(xtc__fiber_init(&m.f, 0, mig_entry, &m) == XTC_OK);
	xtc__fiber_switch(&m.f); /* first half on this thread */
	CHECK(m.step == 1);
	pthread_t t;
	void *ret = (void *)99;
	REQUIRE(pthread_create(&t, NULL, mig_thread, &m) == 0);
	CHECK(pthread_join(t, &ret) == 0);
	CHECK(ret == NULL);
	CHECK(m.step == 2);
	CHECK(pthread_equal(m.ran_on[0], pthread_self()));
	CHECK(pthread_equal(m.ran_on[1], t));
	CHECK(xtc__fiber_current() == xtc__fiber_root());
}

int main(void)
{
	CHECK(xtc__fiber_current() == NULL);
	CHECK(xtc__fiber_root() == NULL);
	CHECK(xtc__fiber_thread_init() == XTC_OK);
	xtc__fiber_t *root = xtc__fiber_root();
	CHECK(root != NULL && root->is_root);
	CHECK(xtc__fiber_thread_init() == XTC_OK); /* idempotent */
	CHECK(xtc__fiber_root() == root);
	CHECK(xtc__fiber_current() == root);

	test_pingpong();
	test_chain();
	test_fp_control();
	test_alignment_and_depth();
	test_stack_cache();
	test_stack_pool();
	test_slabs();
	test_errors_and_defaults();
	test_threads();

	xtc__fiber_thread_fini();
	CHECK(xtc__fiber_current() == NULL);
	CHECK(xtc__fiber_thread_init() == XTC_OK); /* again after fini */
	test_pingpong();
	xtc__fiber_thread_fini();

	if (failures != 0) {
		fprintf(stderr, "test_fiber: %d failure(s) [%s]\n", failures,
		        "see above");
		return 1;
	}
	printf("test_fiber: ok (substrate %s)\n", xtc__fiber_substrate());
	return 0;
}
