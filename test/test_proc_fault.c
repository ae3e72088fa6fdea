/*
 * test_proc_fault.c - fault containment (xtc_proc(3) FAULTS): with the
 * fault guard installed, a hardware fault in a proc's own code ends that
 * proc only (its monitors get a DOWN) and the loop goes on; a recovery
 * frame makes xtc_proc_recovery_arm return again with the signal number;
 * a fault inside a critical section is not contained (the process dies of
 * the signal, checked in a child process); the calls are harmless off a
 * proc.
 */
#include <setjmp.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "xtc.h"

#include "test_util.h"

static volatile int *volatile wild; /* NULL: a write through it faults */

static void fault_now(void)
{
	*wild = 42;
}

struct fc {
	int recovered_sig, after_fault, peer_runs, bad;
	int down_reason[4];
	int ndown;
};

/* Arms a frame, faults, recovers, exits with a reason of its own. */
static void armed_body(void *arg)
{
	struct fc *c = arg;
	int sig = xtc_proc_recovery_arm();

	if (sig != 0) {
		c->recovered_sig = sig;
		xtc_proc_recovery_disarm();
		xtc_exit_self(7);
	}
	fault_now();
	c->after_fault = 1; /* not reached */
}

/* Faults without a frame: the proc ends with the signal number. */
static void bare_body(void *arg)
{
	struct fc *c = arg;

	fault_now();
	c->after_fault = 1;
}

/* Recovers twice: a frame can be armed again after a fault. */
static void twice_body(void *arg)
{
	struct fc *c = arg;
	volatile int n = 0;

	if (xtc_proc_recovery_arm() != 0)
		n++;
	if (n == 1) {
		if (xtc_proc_recovery_arm() != 0)
			n++;
		if (n == 1)
			fault_now();
	}
	if (n == 0)
		fault_now();
	xtc_proc_recovery_disarm();
	c->recovered_sig = n; /* 2 when both faults came back */
}

static void peer_body(void *arg)
{
	struct fc *c = arg;

	for (int i = 0; i < 100; i++) {
		c->peer_runs++;
		xtc_yield();
	}
}

static xtc_loop_t *fl;

static void watcher(void *arg)
{
	struct fc *c = arg;
	void (*bodies[3])(void *) = { armed_body, bare_body, twice_body };
	xtc_pid_t pid;

	for (int i = 0; i < 3; i++) {
		void *m;
		size_t n;
		int reason = 0;

		if (xtc_proc_spawn(fl, bodies[i], c, NULL, &pid) != XTC_OK ||
		    xtc_monitor(pid, NULL) != XTC_OK ||
		    xtc_recv(&m, &n, 10 * SEC) != XTC_OK) {
			c->bad++;
			return;
		}
		if (xtc_down_decode(m, n, NULL, &reason) != XTC_OK)
			c->bad++;
		xtc_free(m);
		c->down_reason[c->ndown++] = reason;
	}
}

static void test_contained(void)
{
	struct fc c;

	CHECK_EQ(xtc_fault_guard_install(), XTC_OK);
	CHECK_EQ(xtc_fault_guard_install(), XTC_OK); /* idempotent */
	memset(&c, 0, sizeof c);
	fl = new_loop();
	REQUIRE(xtc_proc_spawn(fl, peer_body, &c, NULL, NULL) == XTC_OK);
	REQUIRE(xtc_proc_spawn(fl, watcher, &c, NULL, NULL) == XTC_OK);
	CHECK_EQ(xtc_loop_run(fl), XTC_OK);
	CHECK_EQ(c.bad, 0);
	CHECK_EQ(c.after_fault, 0);
	CHECK_EQ(c.ndown, 3);
	CHECK_EQ(c.down_reason[0], 7);       /* the armed proc's own exit */
	CHECK_EQ(c.down_reason[1], SIGSEGV); /* no frame: the signal */
	CHECK_EQ(c.down_reason[2], 0);       /* recovered twice, returned */
	CHECK_EQ(c.recovered_sig, 2);
	CHECK_EQ(c.peer_runs, 100);          /* the loop went on */
	CHECK_EQ(xtc_loop_fini(fl), XTC_OK);
}

/* Recorded by the armed proc before its exit. */
static void test_recovered_signal(void)
{
	struct fc c;
	xtc_loop_t *l = new_loop();

	memset(&c, 0, sizeof c);
	REQUIRE(xtc_proc_spawn(l, armed_body, &c, NULL, NULL) == XTC_OK);
	CHECK_EQ(xtc_loop_run(l), XTC_OK);
	CHECK_EQ(c.recovered_sig, SIGSEGV);
	CHECK_EQ(xtc_loop_fini(l), XTC_OK);
}

/* ---- escalation ---------------------------------------------------------- */

static void critical_body(void *arg)
{
	(void)arg;
	xtc_proc_critical_enter();
	xtc_proc_critical_enter(); /* nests */
	xtc_proc_critical_leave();
	fault_now(); /* still inside one level */
	xtc_proc_critical_leave();
}

static void armed_critical_body(void *arg)
{
	(void)arg;
	if (xtc_proc_recovery_arm() != 0)
		_exit(3); /* contained: wrong */
	xtc_proc_critical_enter();
	fault_now();
}

/* Runs body as the only proc of a loop in a child process; returns the
 * wait status. */
static int in_child(void (*body)(void *))
{
	pid_t pid = fork();
	int st = 0;

	REQUIRE(pid >= 0);
	if (pid == 0) {
		xtc_loop_t *l = NULL;

		if (xtc_fault_guard_install() != XTC_OK ||
		    xtc_loop_init(&l) != XTC_OK ||
		    xtc_proc_spawn(l, body, NULL, NULL, NULL) != XTC_OK)
			_exit(2);
		(void)xtc_loop_run(l);
		_exit(0); /* the fault did not kill us: wrong */
	}
	REQUIRE(waitpid(pid, &st, 0) == pid);
	return st;
}

static void test_critical_escalates(void)
{
	int st = in_child(critical_body);

	CHECK(WIFSIGNALED(st));
	if (WIFSIGNALED(st))
		CHECK_EQ(WTERMSIG(st), SIGSEGV);
	st = in_child(armed_critical_body);
	CHECK(WIFSIGNALED(st));
	if (WIFSIGNALED(st))
		CHECK_EQ(WTERMSIG(st), SIGSEGV);
}

/* ---- off a proc ----------------------------------------------------------- */

static void test_off_proc(void)
{
	/* no proc: arming is a no-op that returns 0, the rest do nothing */
	CHECK_EQ(xtc_proc_recovery_arm(), 0);
	xtc_proc_recovery_disarm();
	xtc_proc_critical_enter();
	xtc_proc_critical_leave();
	xtc_proc_critical_leave(); /* unbalanced: ignored */
}

int main(int argc, char **argv)
{
	test_only = argc > 1 ? argv[1] : NULL;
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
	/* the sanitizers own SIGSEGV and check every jump across stacks */
	printf("test_proc_fault: skipped under a sanitizer\n");
	return 77;
#endif
	RUN(test_off_proc);
	RUN(test_contained);
	RUN(test_recovered_signal);
	RUN(test_critical_escalates);
	if (failures) {
		fprintf(stderr, "test_proc_fault: %d failure(s)\n", failures);
		return 1;
	}
	printf("test_proc_fault: ok\n");
	return 0;
}
