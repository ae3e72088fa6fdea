/*
 * test_sigmask.c - preemption survives a program that blocks signals.
 *
 * The sigwait-thread pattern: main blocks every signal before it creates
 * any thread, so each thread (the executor's carriers included) inherits a
 * full mask, and one thread takes signals with sigwait. The preemption
 * signal is thread-directed and must still reach the carriers: a
 * never-yielding spinner shares one carrier with a sleeper, and the
 * sleeper only wakes if the spinner is preempted. The program's sigwait
 * thread must not see the preemption signal. xtc_preempt_arm on a thread
 * that blocks everything unblocks exactly the preemption signal there.
 * Skipped (77) where involuntary preemption does not exist, and under
 * TSan (it defers asynchronous signals until an interceptor).
 */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <unistd.h>

#include "xtc.h"
#include "xtc_exec.h"
#include "xtc_preempt.h"
#include "test_util.h"

static atomic_int woke, spin_gave_up, sigwait_got_preempt;
static atomic_int quit_sigwait;

XTC_PREEMPTIBLE static void spinner(void *a)
{
	int64_t t0 = xtc_clock_mono();

	(void)a;
	/* no call that yields: only an involuntary preemption lets the
	 * sleeper on this carrier run */
	while (!atomic_load_explicit(&woke, memory_order_relaxed))
		if (xtc_clock_mono() - t0 > 20 * SEC) {
			atomic_store(&spin_gave_up, 1); /* preemption is off */
			return;
		}
}

static void sleeper(void *a)
{
	(void)a;
	xtc_proc_sleep(5 * MS);
	atomic_store(&woke, 1);
}

static void *sigwaiter(void *a)
{
	sigset_t all;

	(void)a;
	sigfillset(&all);
	while (!atomic_load(&quit_sigwait)) {
		int sig = 0;
		struct timespec ts = { 0, 10 * 1000 * 1000 };
		siginfo_t si;

		sig = sigtimedwait(&all, &si, &ts);
		if (sig == xtc_preempt_signal())
			atomic_store(&sigwait_got_preempt, 1);
	}
	return NULL;
}

static void *exec_thread(void *a)
{
	CHECK_EQ(xtc_exec_run(a), XTC_OK);
	return NULL;
}

static void test_blocked_mask_exec(void)
{
	xtc_exec_t *e;
	pthread_t sw, run;

	CHECK_EQ(pthread_create(&sw, NULL, sigwaiter, NULL), 0);
	CHECK_EQ(xtc_exec_init(&e, 1), XTC_OK);
	CHECK_EQ(xtc_exec_set_preempt(e, 1 * MS), XTC_OK);
	xtc_preempt_set_involuntary(1);
	CHECK_EQ(xtc_proc_spawn(xtc_exec_loop(e, 0), spinner, NULL, NULL, NULL),
	    XTC_OK);
	CHECK_EQ(xtc_proc_spawn(xtc_exec_loop(e, 0), sleeper, NULL, NULL, NULL),
	    XTC_OK);
	CHECK_EQ(pthread_create(&run, NULL, exec_thread, e), 0);
	pthread_join(run, NULL);
	CHECK_EQ(atomic_load(&woke), 1);
	CHECK_EQ(atomic_load(&spin_gave_up), 0);
	xtc_preempt_set_involuntary(0);
	CHECK_EQ(xtc_exec_fini(e), XTC_OK);
	atomic_store(&quit_sigwait, 1);
	pthread_join(sw, NULL);
	CHECK_EQ(atomic_load(&sigwait_got_preempt), 0);
}

/* On the caller's own thread: arming unblocks the signal (only it). */
static void *arm_blocked(void *a)
{
	sigset_t cur;

	(void)a;
	CHECK_EQ(xtc_preempt_arm(1 * MS), XTC_OK);
	CHECK_EQ(pthread_sigmask(SIG_BLOCK, NULL, &cur), 0);
	CHECK_EQ(sigismember(&cur, xtc_preempt_signal()), 0);
	CHECK_EQ(sigismember(&cur, SIGUSR1), 1); /* the rest stays blocked */
	CHECK_EQ(xtc_preempt_disarm(), XTC_OK);
	return NULL;
}

static void test_blocked_mask_arm(void)
{
	pthread_t th;

	CHECK_EQ(pthread_create(&th, NULL, arm_blocked, NULL), 0);
	pthread_join(th, NULL);
}

int main(void)
{
	sigset_t all;

#if defined(__SANITIZE_THREAD__)
	return 77;
#endif
	if (!xtc_preempt_involuntary_supported())
		return 77;
	/* before any thread: everything inherits the full mask */
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL);
	RUN(test_blocked_mask_exec);
	RUN(test_blocked_mask_arm);
	return failures ? 1 : 0;
}
