/*
 * fiber_stack.c - fiber stacks: mmap'd, guarded, cached per thread.
 *
 * Model: a stack is one anonymous private mapping [map, map+map_len). Its
 * lowest page is PROT_NONE (the guard); [lo, hi) above it is read-write and
 * page-rounded. Memory is committed lazily by the kernel, so a parked fiber
 * costs only the pages it has touched (typically 1-2 pages: that is what
 * makes "≤ 8 KiB per parked proc" reachable with 64 KiB stacks).
 *
 * Reuse: freed stacks go to a per-thread LIFO cache of at most
 * XTC__STACK_CACHE_MAX entries; a hit needs no syscall and no lock, so
 * spawn/exit cycles run syscall-free once warm. A warm spawn takes the
 * top entry and a reap pushes one (xtc__stack_cache_put), each a few
 * dozen instructions; scans, the pool and mmap sit behind an out-of-line
 * slow path. A stack freed on another
 * thread than the one that mapped it simply joins that thread's cache.
 * Behind the thread caches sits one process-wide pool (a mutex and an
 * array, at most XTC__STACK_POOL_MAX stacks or what xtc_stack_reserve
 * asked for): a thread cache that overflows spills into it, a thread that
 * exits (an executor's carrier at the end of a run) hands its cache to it,
 * and a thread cache that misses takes half a cache from it before it maps
 * anything. So stacks outlive the threads and loops that used them: a
 * fresh executor starts warm (measured on a 2-vCPU VM: 6-7 us per spawn
 * for the first ~2 ms of every new executor, mmap + mprotect + first
 * touch, which built the backlog that dominated the high-load p99). The
 * lock is only on the miss and overflow paths, which used to be syscalls.
 * Beyond the pool's bound stacks are unmapped, so a burst does not pin
 * memory forever; xtc_stack_pool_trim releases the pool.
 * xtc_stack_reserve(n) maps n stacks up front and touches their top pages
 * (prefault), so even the first spawns of a process pay nothing.
 * Reused pages keep their old contents and stay resident: we do not
 * madvise them away (that would put a syscall back on the spawn path).
 *
 * VMA budget: a guarded stack is 2 kernel VMAs (different protections never
 * merge, and neighbouring stacks are separated by guards), and
 * vm.max_map_count defaults to 65530. So about 32k stacks can be live at
 * once by default; 100k parked fibers need the sysctl raised (root:
 * `sysctl vm.max_map_count=262144`) or fewer fibers. A slab of unguarded
 * stacks would be 1 VMA but would lose the overflow report, so it was
 * rejected. xtc__stack_vma_headroom() lets benchmarks check first instead
 * of dying in mmap with ENOMEM.
 *
 * Sanitizers: ASan keeps poisoned redzones of frames that never returned
 * (a fiber that exits mid-stack), so a stack is unpoisoned before it is
 * cached, reused or unmapped.
 *
 * Rejected: malloc'd stacks (no guard page, no lazy commit control), one
 * global locked pool alone (a lock on the spawn path: it only backs the
 * thread caches), MAP_GROWSDOWN (the kernel only grows it for faults near
 * the stack pointer and it is deprecated), prefaulting every stack
 * (resident memory for fibers that never run deep).
 */
#include "rtcode_int.h" /* first: this file is runtime code */
#include "fiber_int.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "xtc.h"

#ifdef XTC__FIBER_ASAN
#include <sanitizer/asan_interface.h>
#define STACK_UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION((p), (n))
#else
#define STACK_UNPOISON(p, n) ((void)(p), (void)(n))
#endif

#ifndef MAP_STACK
#define MAP_STACK 0
#endif
#ifndef MAP_NORESERVE
#define MAP_NORESERVE 0
#endif

struct stack_cache {
	size_t n;
	xtc__stack_t s[XTC__STACK_CACHE_MAX];
};

static _Atomic size_t default_usable = XTC__STACK_DEFAULT;
static size_t page_size_cached;
static pthread_key_t cache_key;
static pthread_once_t cache_key_once = PTHREAD_ONCE_INIT;
static __thread struct stack_cache *tls_cache XTC__TLS_IE;

/* The process-wide pool behind the thread caches. */
static pthread_mutex_t pool_mu = PTHREAD_MUTEX_INITIALIZER;
static xtc__stack_t *pool;
static size_t pool_n, pool_cap, pool_max = XTC__STACK_POOL_MAX;

/* Caller holds pool_mu. pool_n is written only under the mutex but read
 * without it (an empty-pool fast path in xtc__stack_alloc), so its stores
 * are atomic. */
static void pool_count_set(size_t n)
{
	__atomic_store_n(&pool_n, n, __ATOMIC_RELAXED);
}

/* Caller holds pool_mu. 1 if kept. */
static int pool_put_locked(const xtc__stack_t *st)
{
	if (pool_n >= pool_max)
		return 0;
	if (pool_n == pool_cap) {
		size_t nc = pool_cap ? pool_cap * 2 : 256;
		xtc__stack_t *np = realloc(pool, nc * sizeof *np);
		if (np == NULL)
			return 0;
		pool = np;
		pool_cap = nc;
	}
	pool[pool_n] = *st;
	pool_count_set(pool_n + 1);
	return 1;
}

size_t xtc__page_size(void)
{
	size_t p = __atomic_load_n(&page_size_cached, __ATOMIC_RELAXED);
	if (p == 0) {
		long v = sysconf(_SC_PAGESIZE);
		p = v > 0 ? (size_t)v : 4096;
		__atomic_store_n(&page_size_cached, p, __ATOMIC_RELAXED);
	}
	return p;
}

static size_t round_page(size_t n)
{
	size_t p = xtc__page_size();
	return (n + p - 1) & ~(p - 1);
}

size_t xtc__stack_default(void)
{
	return atomic_load_explicit(&default_usable, memory_order_relaxed);
}

int xtc__stack_set_default(size_t bytes)
{
	if (bytes < XTC__STACK_MIN)
		return XTC_E_INVAL;
	if (bytes > XTC__STACK_MAX)
		return XTC_E_RANGE;
	atomic_store_explicit(&default_usable, round_page(bytes),
	                      memory_order_relaxed);
	return XTC_OK;
}

static void unmap_stack(xtc__stack_t *st)
{
	STACK_UNPOISON(st->lo, (size_t)((char *)st->hi - (char *)st->lo));
	munmap(st->map, st->map_len);
}

static void cache_destroy(void *p)
{
	struct stack_cache *c = p;
	size_t i = 0;
	/* the exiting thread's warm stacks go to the pool */
	pthread_mutex_lock(&pool_mu);
	for (; i < c->n && pool_put_locked(&c->s[i]); i++)
		;
	pthread_mutex_unlock(&pool_mu);
	for (; i < c->n; i++)
		unmap_stack(&c->s[i]);
	if (tls_cache == c)
		tls_cache = NULL;
	free(c);
}

static void pool_after_fork(void)
{
	/* only the forking thread survives: nobody holds the lock */
	pthread_mutex_init(&pool_mu, NULL);
}

static void cache_key_create(void)
{
	(void)pthread_key_create(&cache_key, cache_destroy);
	(void)pthread_atfork(NULL, NULL, pool_after_fork);
}

/* NULL when out of memory: callers then map/unmap without caching. */
static struct stack_cache *cache_get(void)
{
	struct stack_cache *c = tls_cache;
	if (__builtin_expect(c != NULL, 1))
		return c;
	pthread_once(&cache_key_once, cache_key_create);
	c = calloc(1, sizeof *c);
	if (c == NULL)
		return NULL;
	if (pthread_setspecific(cache_key, c) != 0) {
		free(c);
		return NULL;
	}
	tls_cache = c;
	return c;
}

static int map_stack(size_t usable, xtc__stack_t *out)
{
	size_t page = xtc__page_size();
	size_t len = usable + page;
	void *m = mmap(NULL, len, PROT_READ | PROT_WRITE,
	               MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK,
	               -1, 0);
	if (m == MAP_FAILED)
		return XTC_E_NOMEM;
	if (mprotect(m, page, PROT_NONE) != 0) {
		munmap(m, len);
		return XTC_E_NOMEM;
	}
	out->map = m;
	out->map_len = len;
	out->lo = (char *)m + page;
	out->hi = (char *)m + len;
	return XTC_OK;
}

/* Miss: one stack of map_len want from the pool for *out, and up to half
 * a cache more into c (one lock per XTC__STACK_CACHE_MAX/2 spawns). */
static int pool_take(size_t want, struct stack_cache *c, xtc__stack_t *out)
{
	int got = 0;
	size_t extra = XTC__STACK_CACHE_MAX / 2;
	pthread_mutex_lock(&pool_mu);
	for (size_t i = pool_n; i-- > 0;) {
		if (pool[i].map_len != want)
			continue;
		xtc__stack_t st = pool[i];
		pool_count_set(pool_n - 1);
		pool[i] = pool[pool_n];
		if (!got) {
			*out = st;
			got = 1;
		} else if (c != NULL && c->n < XTC__STACK_CACHE_MAX) {
			c->s[c->n++] = st;
		} else {
			pool[pool_n] = st; /* put back */
			pool_count_set(pool_n + 1);
			break;
		}
		if (got && (c == NULL || --extra == 0))
			break;
	}
	pthread_mutex_unlock(&pool_mu);
	if (got)
		STACK_UNPOISON(out->lo, (size_t)((char *)out->hi - (char *)out->lo));
	return got;
}

/* Everything but the top-of-cache hit, out of line so the hit (every warm
 * spawn) saves no registers. */
static __attribute__((noinline)) int stack_alloc_slow(size_t usable,
                                                      size_t want,
                                                      xtc__stack_t *out)
{
	struct stack_cache *c = cache_get();
	if (c != NULL) {
		/* LIFO scan: the most recently freed stack is the warmest */
		for (size_t i = c->n; i-- > 0;) {
			if (c->s[i].map_len != want)
				continue;
			*out = c->s[i];
			c->s[i] = c->s[--c->n];
			STACK_UNPOISON(out->lo,
			               (size_t)((char *)out->hi - (char *)out->lo));
			return XTC_OK;
		}
	}
	if (__atomic_load_n(&pool_n, __ATOMIC_RELAXED) > 0 &&
	    pool_take(want, c, out))
		return XTC_OK;
	int rc = map_stack(usable, out);
	if (rc != XTC_OK)
		memset(out, 0, sizeof *out);
	return rc;
}

int xtc__stack_alloc(size_t usable, xtc__stack_t *out)
{
	if (out == NULL)
		return XTC_E_INVAL;
	/* *out is written whole on success and cleared on failure; not
	 * cleared first (the spawn path writes it once) */
	if (usable == 0) {
		usable = xtc__stack_default(); /* page-rounded when set */
	} else if (usable > XTC__STACK_MAX) {
		memset(out, 0, sizeof *out);
		return XTC_E_RANGE;
	} else {
		usable = round_page(usable);
	}
	size_t want = usable + xtc__page_size();

	/* With one stack size in use the most recently freed stack (the
	 * warmest) always fits. */
	struct stack_cache *c = tls_cache;
	if (__builtin_expect(c != NULL && c->n > 0 &&
	                     c->s[c->n - 1].map_len == want, 1)) {
		*out = c->s[--c->n];
		STACK_UNPOISON(out->lo,
		               (size_t)((char *)out->hi - (char *)out->lo));
		return XTC_OK;
	}
	return stack_alloc_slow(usable, want, out);
}

void xtc__stack_free(xtc__stack_t *st)
{
	if (st == NULL || st->map == NULL)
		return;
	/* cache_get creates this thread's cache on first use */
	if (cache_get() != NULL && xtc__stack_cache_put(st))
		return;
	STACK_UNPOISON(st->lo, (size_t)((char *)st->hi - (char *)st->lo));
	pthread_mutex_lock(&pool_mu);
	int kept = pool_put_locked(st);
	pthread_mutex_unlock(&pool_mu);
	if (!kept)
		unmap_stack(st);
	memset(st, 0, sizeof *st);
}

int xtc__stack_cache_put(xtc__stack_t *st)
{
	struct stack_cache *c = tls_cache;

	if (c == NULL || c->n >= XTC__STACK_CACHE_MAX)
		return 0;
	STACK_UNPOISON(st->lo, (size_t)((char *)st->hi - (char *)st->lo));
	c->s[c->n++] = *st;
	memset(st, 0, sizeof *st);
	return 1;
}

/* Touch the top pages of a fresh stack (where a fiber's frames live). */
static void prefault(const xtc__stack_t *st)
{
	size_t page = xtc__page_size();
	char *hi = st->hi;
	for (size_t off = page; off <= XTC__STACK_PREFAULT &&
	     hi - off >= (char *)st->lo; off += page)
		*(volatile char *)(hi - off) = 0;
}

int xtc_stack_reserve(size_t n)
{
	if (n > XTC__STACK_RESERVE_MAX)
		return XTC_E_RANGE;
	size_t usable = round_page(xtc__stack_default());
	size_t want = usable + xtc__page_size();
	pthread_mutex_lock(&pool_mu);
	size_t have = 0;
	for (size_t i = 0; i < pool_n; i++)
		have += pool[i].map_len == want;
	if (pool_max < n + (pool_n - have))
		pool_max = n + (pool_n - have); /* the reserve is kept */
	int rc = XTC_OK;
	while (have < n) {
		xtc__stack_t st;
		pthread_mutex_unlock(&pool_mu);
		rc = map_stack(usable, &st);
		if (rc == XTC_OK)
			prefault(&st);
		pthread_mutex_lock(&pool_mu);
		if (rc != XTC_OK)
			break;
		if (!pool_put_locked(&st)) {
			pthread_mutex_unlock(&pool_mu);
			unmap_stack(&st);
			return XTC_E_NOMEM;
		}
		have++;
	}
	pthread_mutex_unlock(&pool_mu);
	return rc;
}

size_t xtc_stack_pool_count(void)
{
	pthread_mutex_lock(&pool_mu);
	size_t n = pool_n;
	pthread_mutex_unlock(&pool_mu);
	return n;
}

size_t xtc_stack_pool_trim(void)
{
	pthread_mutex_lock(&pool_mu);
	xtc__stack_t *v = pool;
	size_t n = pool_n;
	pool = NULL;
	pool_count_set(0);
	pool_cap = 0;
	pool_max = XTC__STACK_POOL_MAX;
	pthread_mutex_unlock(&pool_mu);
	for (size_t i = 0; i < n; i++)
		unmap_stack(&v[i]);
	free(v);
	return n;
}

void xtc__stack_cache_trim(void)
{
	struct stack_cache *c = tls_cache;
	if (c == NULL)
		return;
	for (size_t i = 0; i < c->n; i++)
		unmap_stack(&c->s[i]);
	c->n = 0;
}

size_t xtc__stack_cache_count(void)
{
	struct stack_cache *c = tls_cache;
	return c != NULL ? c->n : 0;
}

/* Count newlines of a /proc file without stdio (it may be large: one line
 * per VMA). Returns -1 on error. */
static long count_lines(const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	char buf[8192];
	long lines = 0;
	for (;;) {
		ssize_t r = read(fd, buf, sizeof buf);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			lines = -1;
			break;
		}
		if (r == 0)
			break;
		for (ssize_t i = 0; i < r; i++)
			lines += buf[i] == '\n';
	}
	close(fd);
	return lines;
}

static long read_long(const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	char buf[32];
	ssize_t r = read(fd, buf, sizeof buf - 1);
	close(fd);
	if (r <= 0)
		return -1;
	buf[r] = '\0';
	char *end;
	long v = strtol(buf, &end, 10);
	return end == buf ? -1 : v;
}

long xtc__stack_vma_headroom(void)
{
	/* Keep a margin for malloc arenas, thread stacks, libraries and the
	 * io_uring rings mapped after the check. */
	const long reserve = 1024;
	long max = read_long("/proc/sys/vm/max_map_count");
	long used = count_lines("/proc/self/maps");
	if (max < 0 || used < 0)
		return -1;
	long free_vmas = max - used - reserve;
	return free_vmas > 0 ? free_vmas / 2 : 0;
}

int xtc__stack_vma_budget_ok(size_t n)
{
	long h = xtc__stack_vma_headroom();
	if (h < 0)
		return 1;
	return n <= (size_t)h;
}
