/*
 * fiber_stack.c - fiber stacks: carved from large slabs, guarded, cached per
 * thread, pooled per process.
 *
 * Model: a stack is a slot [map, map+map_len): its lowest page is the
 * guard, [lo, hi) above it is read-write and page-rounded. Slots are
 * carved from slabs, large anonymous private mappings (MAP_NORESERVE,
 * no transparent huge pages) of about XTC__SLAB_BYTES, one per slot size
 * in use; stacks larger than XTC__SLAB_SLOT_MAX get a mapping of their
 * own (kind OWN). Memory is committed lazily by the kernel, so a parked
 * fiber costs only the pages it touched (one, for a proc parked in a
 * receive: 4 KiB; see "Memory" below).
 *
 * Why slabs: a mapping per stack plus its PROT_NONE guard is two kernel
 * VMAs, and vm.max_map_count defaults to 65530: about 32 700 live stacks,
 * then mmap fails with ENOMEM (measured: the 32 749th spawn failed, with
 * no hint of which limit). A slab of ~1000 stacks is one VMA, so a
 * million stacks is ~1000 VMAs, and spawns map nothing most of the time.
 *
 * Guards, the kinds of stack (xtc__stack_t.kind), chosen per slot:
 *  - MADV (default where the kernel has it, Linux >= 6.13): the guard is a
 *    guard region installed with madvise(MADV_GUARD_INSTALL) when the slab
 *    is mapped (in one process_madvise call per 1024 slots when the kernel
 *    takes it): a fault on any access, and no VMA of its own.
 *  - PROT (older kernels): the guard page is mprotect'ed PROT_NONE, which
 *    splits the slab: two VMAs per stack again. These are handed out only
 *    while a budget lasts: half of what vm.max_map_count leaves free when
 *    the first slab is mapped, less a quarter of the count kept for the
 *    rest of the program (~16 000 stacks by default).
 *  - CANARY (beyond the budget): the guard page stays read-write and
 *    untouched (a soft guard: it costs no memory and absorbs an overflow of
 *    up to a page), and its top word, just below lo, is a canary that must
 *    stay zero. Every switch away from a fiber checks its stack pointer
 *    against lo and its canary (fiber_int.h, xtc__fiber_check_out: two
 *    loads and two compares on the hot path; every kind gets the stack
 *    pointer check, only CANARY has a canary), and so do the preemption
 *    handler and the SIGSEGV handler. A broken check is reported as an
 *    overflow of that proc, by pid and name, and the process dies of
 *    SIGSEGV before any other fiber of the thread runs, so the neighbour
 *    whose stack may have been written never resumes. What it trades
 *    away: an overflow is caught at the next switch, not at the faulting
 *    store, and a frame that jumps more than a page below lo, writes and
 *    returns without touching the canary is missed (a frame that is still
 *    live at the switch is caught by the stack pointer check).
 *  - OWN: a mapping of its own with a PROT_NONE guard (stacks above
 *    XTC__SLAB_SLOT_MAX, 1 MiB usable), two VMAs as before.
 * Small stacks (below XTC__STACK_MIN, a per-proc option) are CANARY
 * slots packed several to a page with a 64-byte soft guard; they are only
 * handed out in a program bound at load, because the lazy-binding
 * resolver's register save (~2.7 KiB) would land on a neighbour before
 * any check ran ("Small stacks and lazy binding" below).
 * xtc__stack_guard_force() pins a kind for the tests (one overflow test
 * per kind: test_stack_overflow).
 *
 * Reuse: freed stacks go to a per-thread LIFO cache of at most
 * XTC__STACK_CACHE_MAX entries; a hit needs no syscall and no lock, so
 * spawn/exit cycles run syscall-free once warm. A warm spawn takes the
 * top entry and a reap pushes one (xtc__stack_cache_put), each a few
 * dozen instructions; scans, the pool, the slabs and mmap sit behind an
 * out-of-line slow path. A stack freed on another thread than the one
 * that carved it simply joins that thread's cache. Behind the thread
 * caches sits one process-wide pool (a mutex and an array, at most
 * XTC__STACK_POOL_MAX stacks or what xtc_stack_reserve asked for): a
 * thread cache that overflows spills into it, a thread that exits (an
 * executor's carrier at the end of a run) hands its cache to it, and a
 * thread cache that misses takes half a cache from it before it carves
 * anything. So stacks outlive the threads and loops that used them: a
 * fresh executor starts warm (measured on a 2-vCPU VM: 6-7 us per spawn
 * for the first ~2 ms of every new executor when each stack was mmap +
 * mprotect + first touch). The lock is only on the miss and overflow
 * paths. Beyond the pool's bound, stacks are retired: their pages are
 * given back (MADV_DONTNEED, batched: one process_madvise per
 * XTC__SLAB_RETIRE stacks, a madvise each where the kernel refuses it)
 * and the slot goes on its slab class's cold list, taken before anything
 * new is carved. A slot is never unmapped (that would split its slab);
 * only OWN stacks are. xtc_stack_pool_trim retires the pool.
 * xtc_stack_reserve(n) carves n stacks up front and touches their top
 * pages (prefault), so even the first spawns of a process pay nothing.
 * Reused pages keep their old contents and stay resident: a warm spawn
 * does not madvise them away (that would put a syscall back on the spawn
 * path). Giving a parked proc's pages back at park is opt-in
 * (xtc_stack_reclaim_enable, a madvise per park).
 *
 * Memory: a proc parked in xtc_recv touches the top page of its stack
 * only, so it costs that page plus its task, proc slot and mailbox
 * (about 4.8 KiB in all, xtc_async(3)); page granularity is the floor of
 * every design that keeps a stack in place. Go's goroutines cost 2.7 KiB
 * because Go moves stacks (it knows every pointer into them); C cannot.
 * Rejected: copying a parked proc's used stack out to a buffer and back
 * to a shared stack (libaco): the runtime keeps pointers into parked
 * stacks (await waiters, timer and wait records live in the parked
 * fiber's frames) and so may user code (a proc passing &local to a peer
 * and waiting for its reply), and a copied-out stack is neither readable
 * nor writable at its address: any of those writes would be lost or land
 * on the next proc's frames. The runtime's own records could be moved
 * off-stack; user pointers cannot be found.
 *
 * Errors: XTC_E_NOMEM only when the kernel refuses a slab (or an OWN
 * mapping); which limit it hit (vm.max_map_count, RLIMIT_AS, the commit
 * limit of vm.overcommit_memory=2, or memory itself) is worked out then
 * and kept for xtc_stack_nomem_reason().
 *
 * Sanitizers: ASan keeps poisoned redzones of frames that never returned
 * (a fiber that exits mid-stack), so a stack is unpoisoned before it is
 * cached, reused or retired.
 *
 * Rejected: malloc'd stacks (no guard page, no lazy commit control), one
 * global locked pool alone (a lock on the spawn path: it only backs the
 * thread caches), MAP_GROWSDOWN (the kernel only grows it for faults near
 * the stack pointer and it is deprecated), prefaulting every stack
 * (resident memory for fibers that never run deep), a guard page per
 * stack by mprotect alone (the VMA ceiling above), growable stacks (a C
 * stack cannot move, and a split stack needs every caller compiled with
 * -fsplit-stack: a proc that needs more sets a larger size).
 */
#include "rtcode_int.h" /* first: this file is runtime code */
#include "fiber_int.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/uio.h>
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
#ifndef MADV_GUARD_INSTALL
#define MADV_GUARD_INSTALL 102 /* Linux 6.13 */
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

/* Slab classes, one per slot size in use (under pool_mu). A slot size
 * beyond the table gets OWN mappings. */
struct slab_class {
	size_t slot;             /* map_len of its stacks; 0 = unused entry */
	char *cur, *end;         /* carving cursor in the newest slab */
	char *pop;               /* slots below it had their top populated */
	xtc__stack_t *cold;      /* retired: pages given back */
	size_t cold_n, cold_cap;
	xtc__stack_t retire[XTC__SLAB_RETIRE]; /* to retire, still warm */
	size_t retire_n;
};
static struct slab_class classes[XTC__SLAB_CLASSES];
static size_t slab_count;     /* slabs mapped (xtc__stack_stats) */
static size_t carved_count;   /* slots carved */
static long prot_budget = -1; /* PROT guards left; -1: not computed yet */
static int guard_forced;      /* xtc__stack_guard_force */
static int madv_guard = -1;   /* MADV_GUARD_INSTALL works: -1 unknown */
static int pm_fd = -2;        /* pidfd of this process for process_madvise */
static int populate_ok = 1;   /* MADV_POPULATE_WRITE works (else faults) */
static const char *nomem_reason;

/* The canary of the guarded kinds and of a zeroed descriptor: never
 * written, always zero (fiber_int.h reads it at every switch). */
const uint64_t xtc__stack_no_canary = 0;

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

/* ---- small stacks and lazy binding ------------------------------------
 * The first call through a lazily bound PLT slot runs the dynamic
 * linker's resolver on the caller's stack, and the resolver saves the
 * whole register file there first (XSAVE: about 2.7 KiB with AVX-512,
 * about 1 KiB with AVX). On a small stack that is an overflow by 1-2 KiB
 * into the neighbour below, which shares its page, and no canary or
 * stack-pointer check sees it in time (measured: 64 loops x 500 procs
 * parked on 1 KiB stacks, woken, 40 rounds: a crash in 10 of 10 runs,
 * 2.4 KiB written below lo; none with LD_BIND_NOW=1). The runtime's own
 * calls are compiled -fno-plt, but a static link may still route them
 * through the executable's PLT, and the proc's own code always goes
 * through it. So small stacks are only handed out when the main program
 * is bound at load (linked with -Wl,-z,now, or LD_BIND_NOW set, or a
 * static executable); otherwise the spawn fails with XTC_E_INVAL
 * (xtc_proc(3)). Page-sized stacks and up are not affected: their guard
 * page catches the resolver's frame like any other overflow. */
static int main_bound_now(void)
{
	const char *env = getenv("LD_BIND_NOW");
	if (env != NULL && env[0] != '\0')
		return 1;
	const ElfW(Phdr) *ph = (const ElfW(Phdr) *)getauxval(AT_PHDR);
	size_t n = (size_t)getauxval(AT_PHNUM);
	if (ph == NULL || n == 0)
		return 0;
	uintptr_t bias = 0;
	const ElfW(Phdr) *dynp = NULL;
	for (size_t i = 0; i < n; i++) {
		if (ph[i].p_type == PT_PHDR)
			bias = (uintptr_t)ph - ph[i].p_vaddr;
		else if (ph[i].p_type == PT_DYNAMIC)
			dynp = &ph[i];
	}
	if (dynp == NULL)
		return 1; /* a static executable: nothing is bound lazily */
	int jmprel = 0;
	for (const ElfW(Dyn) *d = (const ElfW(Dyn) *)(bias + dynp->p_vaddr);
	     d->d_tag != DT_NULL; d++) {
		if (d->d_tag == DT_BIND_NOW)
			return 1;
		if (d->d_tag == DT_FLAGS && (d->d_un.d_val & DF_BIND_NOW))
			return 1;
		if (d->d_tag == DT_FLAGS_1 && (d->d_un.d_val & DF_1_NOW))
			return 1;
		if (d->d_tag == DT_JMPREL)
			jmprel = 1;
	}
	return !jmprel; /* no PLT relocations: nothing to bind lazily */
}

static int small_ok = -1; /* unknown, 0, 1: the program does not change */

int xtc__stack_small_allowed(void)
{
	int ok = __atomic_load_n(&small_ok, __ATOMIC_RELAXED);
	if (ok < 0) {
		ok = main_bound_now();
		__atomic_store_n(&small_ok, ok, __ATOMIC_RELAXED);
	}
	return ok;
}

int xtc__stack_size_check(size_t bytes)
{
	if (bytes == 0)
		return XTC_OK;
	if (bytes > XTC__STACK_MAX)
		return XTC_E_RANGE;
	if (bytes < XTC__STACK_MIN &&
	    (bytes < XTC__STACK_SMALL_MIN || !xtc__stack_small_allowed()))
		return XTC_E_INVAL;
	return XTC_OK;
}

/* ---- /proc helpers -------------------------------------------------- */

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

/* ---- which limit refused a mapping ---------------------------------- */

/* After mmap/mprotect failed with ENOMEM: name the limit (static text,
 * kept for xtc_stack_nomem_reason). Caller holds pool_mu or not: the
 * pointer store is atomic and every candidate is a literal. */
static void note_nomem(void)
{
	const char *why;
	long max = read_long("/proc/sys/vm/max_map_count");
	long used = count_lines("/proc/self/maps");
	struct rlimit rl;

	if (max > 0 && used >= 0 && used + 64 >= max)
		why = "vm.max_map_count reached: the process has as many "
		      "memory mappings as the kernel allows (raise the sysctl "
		      "or hold fewer large-stack or OWN-stack procs)";
	else if (getrlimit(RLIMIT_AS, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
		why = "RLIMIT_AS reached: the address-space limit (ulimit -v) "
		      "is smaller than the stacks asked for (use "
		      "smaller stacks: xtc_set_stack_size, "
		      "xtc_proc_opts_t.stack_size; or raise the limit)";
	else if (read_long("/proc/sys/vm/overcommit_memory") == 2)
		why = "commit limit reached: vm.overcommit_memory=2 charges "
		      "every stack in full (use smaller stacks, raise "
		      "vm.overcommit_ratio, or use overcommit mode 0)";
	else
		why = "the kernel refused a stack mapping (ENOMEM): "
		      "address space or memory exhausted";
	__atomic_store_n(&nomem_reason, why, __ATOMIC_RELEASE);
}

/* A later mapping succeeded: the limit is no longer in the way. */
static void note_nomem_clear(void)
{
	if (__atomic_load_n(&nomem_reason, __ATOMIC_RELAXED) != NULL)
		__atomic_store_n(&nomem_reason, NULL, __ATOMIC_RELEASE);
}

static void note_nomem_text(const char *why)
{
	__atomic_store_n(&nomem_reason, why, __ATOMIC_RELEASE);
}

const char *xtc_stack_nomem_reason(void)
{
	return __atomic_load_n(&nomem_reason, __ATOMIC_ACQUIRE);
}

/* ---- guards ---------------------------------------------------------- */

static int pidfd_self(void)
{
#ifdef SYS_pidfd_open
	if (pm_fd == -2) {
		long fd = syscall(SYS_pidfd_open, (long)getpid(), 0L);
		pm_fd = fd >= 0 ? (int)fd : -1;
		if (pm_fd >= 0)
			(void)fcntl(pm_fd, F_SETFD, FD_CLOEXEC);
	}
	return pm_fd;
#else
	return -1;
#endif
}

/* madvise(advice) over n ranges: one process_madvise per 1024 where the
 * kernel takes it, else one madvise each. 0 on success. Caller holds
 * pool_mu (pm_fd). */
static int madvise_many(struct iovec *iov, size_t n, int advice)
{
	size_t done = 0;
#ifdef SYS_process_madvise
	int fd = pidfd_self();
	while (fd >= 0 && done < n) {
		size_t k = n - done > 1024 ? 1024 : n - done;
		size_t want = 0;
		for (size_t i = 0; i < k; i++)
			want += iov[done + i].iov_len;
		long r = syscall(SYS_process_madvise, (long)fd, iov + done,
		                 (unsigned long)k, (long)advice, 0L);
		if (r < 0 || (size_t)r != want)
			break; /* refused or partial: the loop below redoes it */
		done += k;
	}
#endif
	for (; done < n; done++)
		if (madvise(iov[done].iov_base, iov[done].iov_len, advice) != 0)
			return -1;
	return 0;
}

static int madv_guard_supported(void)
{
	if (madv_guard < 0) {
		size_t page = xtc__page_size();
		void *m = mmap(NULL, 2 * page, PROT_READ | PROT_WRITE,
		               MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
		madv_guard = 0;
		if (m != MAP_FAILED) {
			madv_guard = madvise(m, page, MADV_GUARD_INSTALL) == 0;
			munmap(m, 2 * page);
		}
	}
	return madv_guard;
}

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif
/* Carve-ahead: make the top pages of the next XTC__SLAB_POPULATE slots
 * of c, from slot s on, resident in one call (caller holds pool_mu). A
 * fresh stack's first touch is a page fault, and faults cost 40 us each
 * on the reference guest against 1.6-4.9 us a page populated in one
 * process_madvise of 1024 pages (same run, 3 runs each); this pays for
 * at most XTC__SLAB_POPULATE pages nobody has used yet. Small slots share
 * pages: their whole run is populated. A kernel without the advice (Linux
 * < 5.14) keeps faulting. */
static void populate_ahead(struct slab_class *c, char *s)
{
	size_t page = xtc__page_size();
	size_t n = (size_t)(c->end - s) / c->slot;
	if (n > XTC__SLAB_POPULATE)
		n = XTC__SLAB_POPULATE;
	c->pop = s + n * c->slot;
	if (!populate_ok || n == 0)
		return;
	int rc;
	if (c->slot < XTC__STACK_MIN) {
		uintptr_t lo = (uintptr_t)s & ~(uintptr_t)(page - 1);
		uintptr_t hi = ((uintptr_t)c->pop + page - 1) & ~(uintptr_t)(page - 1);
		rc = madvise((void *)lo, hi - lo, MADV_POPULATE_WRITE);
	} else {
		struct iovec iov[XTC__SLAB_POPULATE];
		for (size_t i = 0; i < n; i++) {
			iov[i].iov_base = s + (i + 1) * c->slot - page;
			iov[i].iov_len = page;
		}
		rc = madvise_many(iov, n, MADV_POPULATE_WRITE);
	}
	if (rc != 0 && errno == EINVAL)
		populate_ok = 0; /* not this kernel: first touches fault */
}

/* PROT guards left (caller holds pool_mu): see the design note. */
static long prot_budget_left(void)
{
	if (prot_budget < 0) {
		long max = read_long("/proc/sys/vm/max_map_count");
		long used = count_lines("/proc/self/maps");
		long b = 0;
		if (max > 0 && used >= 0)
			b = (max - used - max / 4) / 2;
		prot_budget = b > 0 ? b : 0;
	}
	return prot_budget;
}

int xtc__stack_guard_force(int kind)
{
	if (kind < 0 || kind > XTC__SK_CANARY)
		return XTC_E_INVAL;
	pthread_mutex_lock(&pool_mu);
	guard_forced = kind;
	pthread_mutex_unlock(&pool_mu);
	/* stacks of another kind must not be handed out from the caches */
	xtc__stack_cache_trim();
	(void)xtc_stack_pool_trim();
	pthread_mutex_lock(&pool_mu);
	for (size_t i = 0; i < XTC__SLAB_CLASSES; i++)
		classes[i].cold_n = 0; /* leaked: a test-only hook */
	pthread_mutex_unlock(&pool_mu);
	return XTC_OK;
}

/* The kind the next carved stack gets (caller holds pool_mu). */
static int guard_kind(void)
{
	if (guard_forced != XTC__SK_AUTO)
		return guard_forced;
	if (madv_guard_supported())
		return XTC__SK_MADV;
	return prot_budget_left() > 0 ? XTC__SK_PROT : XTC__SK_CANARY;
}

/* ---- slabs ------------------------------------------------------------ */

/* Bytes below lo in a slot of slot_len: a page, or the small guard. */
static size_t guard_of(size_t slot_len)
{
	return slot_len < XTC__STACK_MIN ? XTC__STACK_SMALL_GUARD :
	       xtc__page_size();
}

static void stack_set(xtc__stack_t *st, char *slot, size_t slot_len,
                      int kind)
{
	size_t guard = guard_of(slot_len);
	st->map = slot;
	st->map_len = slot_len;
	st->lo = slot + guard;
	st->hi = slot + slot_len;
	st->kind = (uint32_t)kind;
	st->canary = kind == XTC__SK_CANARY ?
	             (const uint64_t *)(void *)(slot + guard) - 1 :
	             &xtc__stack_no_canary;
}

static int map_own(size_t usable, xtc__stack_t *out)
{
	size_t page = xtc__page_size();
	size_t len = usable + page;
	void *m = mmap(NULL, len, PROT_READ | PROT_WRITE,
	               MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK,
	               -1, 0);
	if (m == MAP_FAILED) {
		note_nomem();
		return XTC_E_NOMEM;
	}
	if (mprotect(m, page, PROT_NONE) != 0) {
		munmap(m, len);
		note_nomem();
		return XTC_E_NOMEM;
	}
	stack_set(out, m, len, XTC__SK_OWN);
	note_nomem_clear();
	return XTC_OK;
}

/* The class of slot size slot_len, claimed if new; NULL when the table is
 * full (the caller maps OWN). Caller holds pool_mu. */
static struct slab_class *class_of(size_t slot_len)
{
	for (size_t i = 0; i < XTC__SLAB_CLASSES; i++) {
		if (classes[i].slot == slot_len)
			return &classes[i];
		if (classes[i].slot == 0) {
			classes[i].slot = slot_len;
			return &classes[i];
		}
	}
	return NULL;
}

/* Map a new slab for c (caller holds pool_mu). */
static int slab_new(struct slab_class *c, int kind)
{
	size_t n = XTC__SLAB_BYTES / c->slot;
	if (n < XTC__SLAB_MIN_SLOTS)
		n = XTC__SLAB_MIN_SLOTS;
	size_t len = n * c->slot;
	char *m = mmap(NULL, len, PROT_READ | PROT_WRITE,
	               MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK,
	               -1, 0);
	if (m == MAP_FAILED) {
		note_nomem();
		return XTC_E_NOMEM;
	}
#ifdef MADV_NOHUGEPAGE
	/* a huge page would make 2 MiB resident for one stack's top page */
	(void)madvise(m, len, MADV_NOHUGEPAGE);
#endif
	if (kind == XTC__SK_MADV) {
		size_t page = xtc__page_size();
		struct iovec *iov = malloc(n * sizeof *iov);
		int rc = -1;
		if (iov != NULL) {
			for (size_t i = 0; i < n; i++) {
				iov[i].iov_base = m + i * c->slot;
				iov[i].iov_len = page;
			}
			rc = madvise_many(iov, n, MADV_GUARD_INSTALL);
			free(iov);
		}
		if (rc != 0) {
			munmap(m, len);
			note_nomem();
			return XTC_E_NOMEM;
		}
	}
	c->cur = m;
	c->pop = m; /* nothing of it populated yet */
	c->end = m + len;
	slab_count++;
	note_nomem_clear();
	return XTC_OK;
}

/* Give the pages of c's retire batch back and move it to the cold list
 * (caller holds pool_mu). A slot the cold list cannot take is dropped: it
 * stays mapped and released, never reused. */
static void retire_flush(struct slab_class *c)
{
	struct iovec iov[XTC__SLAB_RETIRE];
	size_t n = c->retire_n;

	if (n == 0)
		return;
	/* small stacks share pages with their neighbours: kept as they are */
	if (c->slot >= XTC__STACK_MIN) {
		for (size_t i = 0; i < n; i++) {
			iov[i].iov_base = c->retire[i].lo;
			iov[i].iov_len = (size_t)((char *)c->retire[i].hi -
			                          (char *)c->retire[i].lo);
		}
		(void)madvise_many(iov, n, MADV_DONTNEED);
	}
	if (c->cold_n + n > c->cold_cap) {
		size_t nc = c->cold_cap ? c->cold_cap * 2 : 1024;
		while (nc < c->cold_n + n)
			nc *= 2;
		xtc__stack_t *v = realloc(c->cold, nc * sizeof *v);
		if (v != NULL) {
			c->cold = v;
			c->cold_cap = nc;
		}
	}
	for (size_t i = 0; i < n && c->cold_n < c->cold_cap; i++)
		c->cold[c->cold_n++] = c->retire[i];
	c->retire_n = 0;
}

/* A stack nobody caches any more: OWN ones are unmapped, slots join their
 * class's retire batch. Takes pool_mu. */
static void stack_retire(xtc__stack_t *st)
{
	STACK_UNPOISON(st->lo, (size_t)((char *)st->hi - (char *)st->lo));
	if (st->kind == XTC__SK_OWN) {
		munmap(st->map, st->map_len);
		return;
	}
	pthread_mutex_lock(&pool_mu);
	struct slab_class *c = class_of(st->map_len);
	if (c != NULL) {
		if (c->retire_n == XTC__SLAB_RETIRE)
			retire_flush(c);
		c->retire[c->retire_n++] = *st;
	}
	pthread_mutex_unlock(&pool_mu);
}

/* One stack of `usable` bytes from the slabs: the retire batch (warm),
 * the cold list, then a carve. */
static int slab_alloc(size_t usable, xtc__stack_t *out)
{
	size_t page = xtc__page_size();
	int small = usable < XTC__STACK_MIN;
	size_t slot = usable + (small ? XTC__STACK_SMALL_GUARD : page);
	int rc = XTC_OK;

	if (slot > XTC__SLAB_SLOT_MAX + page)
		return map_own(usable, out);
	pthread_mutex_lock(&pool_mu);
	struct slab_class *c = class_of(slot);
	if (c == NULL && small) {
		pthread_mutex_unlock(&pool_mu);
		note_nomem_text("every slab class is taken: at most 8 stack "
		                "sizes at once, and a small stack needs a slab");
		return XTC_E_NOMEM;
	}
	if (c == NULL) {
		pthread_mutex_unlock(&pool_mu);
		return map_own(usable, out);
	}
	if (c->retire_n > 0) {
		*out = c->retire[--c->retire_n];
	} else if (c->cold_n > 0) {
		*out = c->cold[--c->cold_n];
	} else {
		/* a small stack shares pages: no guard page can be its */
		int kind = small ? XTC__SK_CANARY : guard_kind();
		if (kind == XTC__SK_OWN) {
			pthread_mutex_unlock(&pool_mu);
			return map_own(usable, out);
		}
		if (c->cur == c->end)
			rc = slab_new(c, kind);
		if (rc == XTC_OK) {
			char *s = c->cur;
			if (s >= c->pop)
				populate_ahead(c, s);
			c->cur += slot;
			carved_count++;
			if (kind == XTC__SK_PROT) {
				if (mprotect(s, page, PROT_NONE) != 0)
					kind = XTC__SK_CANARY; /* map count */
				else if (prot_budget > 0)
					prot_budget--;
			}
			stack_set(out, s, slot, kind);
		}
	}
	pthread_mutex_unlock(&pool_mu);
	return rc;
}

/* ---- caches and pool -------------------------------------------------- */

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
		stack_retire(&c->s[i]);
	if (tls_cache == c)
		tls_cache = NULL;
	free(c);
}

static void pool_after_fork(void)
{
	/* only the forking thread survives: nobody holds the lock */
	pthread_mutex_init(&pool_mu, NULL);
	pm_fd = -2; /* the pidfd names the parent */
}

static void cache_key_create(void)
{
	(void)pthread_key_create(&cache_key, cache_destroy);
	(void)pthread_atfork(NULL, NULL, pool_after_fork);
}

/* NULL when out of memory: callers then carve/retire without caching. */
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
	int rc = slab_alloc(usable, out);
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
	size_t want;
	if (usable == 0) {
		usable = xtc__stack_default(); /* page-rounded when set */
	} else if (usable > XTC__STACK_MAX) {
		memset(out, 0, sizeof *out);
		return XTC_E_RANGE;
	} else if (usable < XTC__STACK_MIN) {
		if (usable < XTC__STACK_SMALL_MIN ||
		    !xtc__stack_small_allowed()) {
			memset(out, 0, sizeof *out);
			return XTC_E_INVAL;
		}
		usable = (usable + XTC__STACK_SMALL_ALIGN - 1) &
		         ~(size_t)(XTC__STACK_SMALL_ALIGN - 1);
		want = usable + XTC__STACK_SMALL_GUARD;
		goto sized;
	} else {
		usable = round_page(usable);
	}
	want = usable + xtc__page_size();
sized:;

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
		stack_retire(st);
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
		rc = slab_alloc(usable, &st);
		if (rc == XTC_OK)
			prefault(&st);
		pthread_mutex_lock(&pool_mu);
		if (rc != XTC_OK)
			break;
		if (!pool_put_locked(&st)) {
			pthread_mutex_unlock(&pool_mu);
			stack_retire(&st);
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
		stack_retire(&v[i]);
	free(v);
	/* give the retire batches' pages back too */
	pthread_mutex_lock(&pool_mu);
	for (size_t i = 0; i < XTC__SLAB_CLASSES; i++)
		retire_flush(&classes[i]);
	pthread_mutex_unlock(&pool_mu);
	return n;
}

void xtc__stack_cache_trim(void)
{
	struct stack_cache *c = tls_cache;
	if (c == NULL)
		return;
	for (size_t i = 0; i < c->n; i++)
		stack_retire(&c->s[i]);
	c->n = 0;
}

size_t xtc__stack_cache_count(void)
{
	struct stack_cache *c = tls_cache;
	return c != NULL ? c->n : 0;
}

void xtc__stack_stats(xtc__stack_stats_t *out)
{
	memset(out, 0, sizeof *out);
	pthread_mutex_lock(&pool_mu);
	out->slabs = slab_count;
	out->carved = carved_count;
	for (size_t i = 0; i < XTC__SLAB_CLASSES; i++)
		out->cold += classes[i].cold_n + classes[i].retire_n;
	out->prot_budget = prot_budget;
	pthread_mutex_unlock(&pool_mu);
}

long xtc__stack_vma_headroom(void)
{
	/* Keep a margin for malloc arenas, thread stacks, libraries and the
	 * io_uring rings mapped after the check. A slab stack costs no VMA
	 * of its own (one per slab of ~1000), so this is what OWN stacks
	 * (two VMAs each) have left. */
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
