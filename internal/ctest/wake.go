//go:build cgo

package ctest

// The platform's floor for a call that finds its server asleep: a plain C
// thread parked on a futex, woken by the caller, which waits until the
// thread says it runs. No xtc code is involved. The round-trip benchmarks
// run it next to the rows whose carrier parked between calls, so that a
// wake-up's cost on the machine at hand is measured in the same run. Two
// such threads: one with the kernel's default slice (a plain thread), one
// that asks for the 100 us slice a parked carrier asks for (exec_carrier.c,
// kernel slice), so that a woken thread preempts the one on its CPU.

/*
#include <linux/futex.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <unistd.h>

struct ctest_waker {
	_Atomic int word; // 0: parked or about to park; 1: woken; 2: stop
	int up;
	uint64_t slice_ns; // 0: the default
	pthread_t th;
};
static struct ctest_waker ctest_wakers[2] = { { 0 }, { .slice_ns = 100000 } };

struct ctest_sched_attr {
	uint32_t size, policy;
	uint64_t flags;
	int32_t nice;
	uint32_t prio;
	uint64_t runtime, deadline, period;
};

static void *ctest_wake_main(void *a)
{
	struct ctest_waker *w = a;

#ifdef SYS_sched_setattr
	if (w->slice_ns != 0) {
		// EEVDF (Linux 6.12+) reads runtime as the slice; older
		// kernels ignore it
		struct ctest_sched_attr at = { 0 };
		at.size = sizeof(at);
		at.runtime = w->slice_ns;
		(void)syscall(SYS_sched_setattr, 0, &at, 0);
	}
#endif
	for (;;) {
		int v;

		while ((v = atomic_load(&w->word)) == 0)
			syscall(SYS_futex, &w->word, FUTEX_WAIT_PRIVATE, 0, NULL,
			    NULL, 0);
		if (v == 2)
			return NULL;
		atomic_store(&w->word, 0); // the answer
	}
}

static int ctest_wake_start(void)
{
	for (int i = 0; i < 2; i++) {
		struct ctest_waker *w = &ctest_wakers[i];

		if (w->up)
			continue;
		atomic_store(&w->word, 0);
		if (pthread_create(&w->th, NULL, ctest_wake_main, w) != 0)
			return -1;
		w->up = 1;
	}
	return 0;
}

// One call: wake thread i and wait for its answer (when calls come back
// to back it may not have parked yet: then it answers without a wake).
static void ctest_wake_call(int i)
{
	struct ctest_waker *w = &ctest_wakers[i & 1];

	atomic_store(&w->word, 1);
	syscall(SYS_futex, &w->word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
	while (atomic_load(&w->word) != 0)
		;
}

static void ctest_wake_stop(void)
{
	for (int i = 0; i < 2; i++) {
		struct ctest_waker *w = &ctest_wakers[i];

		if (!w->up)
			continue;
		atomic_store(&w->word, 2);
		syscall(SYS_futex, &w->word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL,
		    0);
		pthread_join(w->th, NULL);
		w->up = 0;
	}
}
*/
import "C"

import "errors"

// WakeStart starts the two parked threads (once; WakeStop ends them).
func WakeStart() error {
	if C.ctest_wake_start() != 0 {
		WakeStop()
		return errors.New("ctest: pthread_create failed")
	}
	return nil
}

// Wake wakes the thread with the default kernel slice and returns once it
// runs. Not for concurrent callers.
func Wake() { C.ctest_wake_call(0) }

// WakeShortSlice is Wake for the thread that asked for a 100 us slice.
func WakeShortSlice() { C.ctest_wake_call(1) }

// WakeStop ends the threads WakeStart started.
func WakeStop() { C.ctest_wake_stop() }
