/*
 * preempt_locks.c - lock tracking: a fiber that holds a lock is never
 * preempted.
 *
 * Model: the runtime defines the POSIX lock entry points a program and its
 * libraries call (pthread_mutex_lock/trylock/unlock, the rwlock's
 * rdlock/wrlock/tryrdlock/trywrlock/unlock, pthread_spin_lock/trylock/
 * unlock, pthread_once), so the dynamic linker binds every call made
 * through the PLT to these (the executable, or a libxtc loaded before
 * libc, comes first in the lookup order) and calls from the program's own
 * objects bind to them at link time. Each one does the C library's work
 * (glibc's exported __pthread_* entry points; the spin lock is an atomic
 * word compatible with glibc's) and counts the locks the current fiber
 * holds (xtc__fiber_t.locks; pthread_once counts while its initialiser
 * runs). The preemption handler refuses a fiber whose count is not zero
 * (refused_lock), whatever its PC: a fiber preempted while holding a lock
 * deadlocks its carrier as soon as the next fiber there waits for that
 * lock, and a recursive mutex owned by the carrier thread lets the next
 * fiber walk into a half-updated structure (sqlite's serialized
 * connection). This complements the deny-by-default map
 * (preempt_allow.c): it protects code declared or allowed preemptible that
 * takes locks, and third-party code compiled into the executable under
 * XTC_PREEMPT_POLICY_PROGRAM (a Go binary's cgo amalgamations), but not a
 * library's thread-local state, which no lock guards.
 *
 * Invariants: the gap between taking a lock and counting it (and between
 * uncounting and releasing) is inside this file or libc, both denied by
 * the code map, so no preemption lands in it. A count never goes below
 * zero (a lock taken before the fiber started, or on another fiber, and
 * released here); a lock taken on one fiber and released on another
 * leaves the first non-preemptible (the safe direction). Off a fiber (the
 * carrier's own stack, a plain thread, a Go thread) the count is not kept.
 *
 * Not tracked: the timed and clock variants of the lock calls (no glibc
 * entry point to forward them to), C11 mtx_* and call_once (glibc calls
 * its internal lock there, never the PLT), semaphores (not owned: the
 * waiter is not the holder), locks inside libc itself, futexes a library
 * uses directly. Under ThreadSanitizer and AddressSanitizer the runtime
 * leaves the calls to the sanitizer's interceptors (tracking off: ASan's
 * weak __pthread_* interceptors left both link-time bindings empty); with
 * musl (no __pthread_* exports), and on architectures other than x86-64
 * and aarch64 (whose glibc base versions it knows), too. XTC_LOCK_TRACKING=0 at build time turns it off.
 *
 * Rejected: dlsym(RTLD_NEXT) to find the real functions (allocates, takes
 * ld.so's lock on first use, and does not exist in a static program);
 * counting per thread (a fiber that yields while holding a lock would make
 * the next fiber of its carrier non-preemptible instead of itself).
 */
#include "rtcode_int.h" /* first: this file is runtime code */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "fiber_int.h"

#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define XTC__LOCKS_SANITIZED 1
#endif
#endif
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
#define XTC__LOCKS_SANITIZED 1
#endif

#if !defined(XTC_LOCK_TRACKING)
#if defined(__GLIBC__) && !defined(XTC__LOCKS_SANITIZED) && \
    (defined(__x86_64__) || defined(__aarch64__))
#define XTC_LOCK_TRACKING 1
#else
#define XTC_LOCK_TRACKING 0
#endif
#endif

int xtc__lock_tracking(void);
int xtc__lock_tracking(void)
{
	return XTC_LOCK_TRACKING;
}

#if XTC_LOCK_TRACKING

/* The C library's own entry points. A shared glibc exports them only as
 * compatibility symbols of its base version (bound here with .symver), a
 * static one as plain symbols (the weak unversioned references): whichever
 * the link resolved is used. */
#if defined(__x86_64__)
#define XTC__GLIBC_BASE "GLIBC_2.2.5"
#elif defined(__aarch64__)
#define XTC__GLIBC_BASE "GLIBC_2.17"
#endif

/* Neither link-time binding resolved (an unusual link): ask the dynamic
 * linker for the next definition, once per call site's first use. */
static void *real_lookup(const char *alias, const char *name)
{
	void *f = dlsym(RTLD_NEXT, alias);
	if (f == NULL)
		f = dlsym(RTLD_NEXT, name);
	if (f == NULL)
		abort(); /* no C library lock to forward to: nothing is safe */
	return f;
}

#define XTC__REAL(ret, name, params, args)                                   \
	extern ret xtc__v_##name params __attribute__((weak));                  \
	__asm__(".symver xtc__v_" #name ", __" #name "@" XTC__GLIBC_BASE);       \
	extern ret __##name params __attribute__((weak));                       \
	static inline ret real_##name params                                    \
	{                                                                       \
		ret(*f) params = xtc__v_##name ? xtc__v_##name : __##name;          \
		if (__builtin_expect(f == NULL, 0))                                 \
			f = (ret(*) params)real_lookup("__" #name, #name);              \
		return f args;                                                      \
	}

XTC__REAL(int, pthread_mutex_lock, (pthread_mutex_t *m), (m))
XTC__REAL(int, pthread_mutex_trylock, (pthread_mutex_t *m), (m))
XTC__REAL(int, pthread_mutex_unlock, (pthread_mutex_t *m), (m))
XTC__REAL(int, pthread_rwlock_rdlock, (pthread_rwlock_t *l), (l))
XTC__REAL(int, pthread_rwlock_wrlock, (pthread_rwlock_t *l), (l))
XTC__REAL(int, pthread_rwlock_tryrdlock, (pthread_rwlock_t *l), (l))
XTC__REAL(int, pthread_rwlock_trywrlock, (pthread_rwlock_t *l), (l))
XTC__REAL(int, pthread_rwlock_unlock, (pthread_rwlock_t *l), (l))
XTC__REAL(int, pthread_once, (pthread_once_t *o, void (*init)(void)), (o, init))

static inline void held(void)
{
	xtc__fiber_t *f = xtc__fiber_cur;
	if (f != NULL)
		f->locks++;
}

static inline void released(void)
{
	xtc__fiber_t *f = xtc__fiber_cur;
	if (f != NULL && f->locks > 0)
		f->locks--;
}

#define XTC__EXPORT __attribute__((visibility("default")))

XTC__EXPORT int pthread_mutex_lock(pthread_mutex_t *m)
{
	int rc = real_pthread_mutex_lock(m);
	if (rc == 0)
		held();
	return rc;
}

XTC__EXPORT int pthread_mutex_trylock(pthread_mutex_t *m)
{
	int rc = real_pthread_mutex_trylock(m);
	if (rc == 0)
		held();
	return rc;
}

XTC__EXPORT int pthread_mutex_unlock(pthread_mutex_t *m)
{
	int rc = real_pthread_mutex_unlock(m);
	if (rc == 0)
		released();
	return rc;
}

XTC__EXPORT int pthread_rwlock_rdlock(pthread_rwlock_t *l)
{
	int rc = real_pthread_rwlock_rdlock(l);
	if (rc == 0)
		held();
	return rc;
}

XTC__EXPORT int pthread_rwlock_wrlock(pthread_rwlock_t *l)
{
	int rc = real_pthread_rwlock_wrlock(l);
	if (rc == 0)
		held();
	return rc;
}

XTC__EXPORT int pthread_rwlock_tryrdlock(pthread_rwlock_t *l)
{
	int rc = real_pthread_rwlock_tryrdlock(l);
	if (rc == 0)
		held();
	return rc;
}

XTC__EXPORT int pthread_rwlock_trywrlock(pthread_rwlock_t *l)
{
	int rc = real_pthread_rwlock_trywrlock(l);
	if (rc == 0)
		held();
	return rc;
}

XTC__EXPORT int pthread_rwlock_unlock(pthread_rwlock_t *l)
{
	int rc = real_pthread_rwlock_unlock(l);
	if (rc == 0)
		released();
	return rc;
}

/* glibc's spin lock is an int: 0 free, anything else taken. */
XTC__EXPORT int pthread_spin_lock(pthread_spinlock_t *l)
{
	_Atomic int *w = (_Atomic int *)(void *)l;
	for (;;) {
		if (atomic_exchange_explicit(w, 1, memory_order_acquire) == 0)
			break;
		while (atomic_load_explicit(w, memory_order_relaxed) != 0)
			XTC__CPU_RELAX();
	}
	held();
	return 0;
}

XTC__EXPORT int pthread_spin_trylock(pthread_spinlock_t *l)
{
	_Atomic int *w = (_Atomic int *)(void *)l;
	if (atomic_exchange_explicit(w, 1, memory_order_acquire) != 0)
		return 16; /* EBUSY */
	held();
	return 0;
}

XTC__EXPORT int pthread_spin_unlock(pthread_spinlock_t *l)
{
	atomic_store_explicit((_Atomic int *)(void *)l, 0, memory_order_release);
	released();
	return 0;
}

/* The initialiser runs as if a lock were held: a fiber preempted inside
 * it would leave every other caller on its carrier waiting for it. */
XTC__EXPORT int pthread_once(pthread_once_t *o, void (*init)(void))
{
	held();
	int rc = real_pthread_once(o, init);
	released();
	return rc;
}

#endif /* XTC_LOCK_TRACKING */
