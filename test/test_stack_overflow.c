/*
 * test_stack_overflow.c - the overflow report of every kind of stack and
 * SIGSEGV chaining.
 *
 * Each case runs in a child process (fork + exec of this binary with the
 * case name; with XTC_TEST_NOEXEC=1, or when exec fails as under qemu-user
 * without binfmt_misc, the forked child runs the case directly). The parent
 * checks how the child ended and what it wrote to stderr:
 *   overflow-K     fiber recursion on a stack of kind K (own, madv, prot:
 *                  a guard page that faults; canary: no page faults, the
 *                  recursion runs on through the soft guard into the slab
 *                  until a fault) dies of SIGSEGV (as a guard-page fault
 *                  with no handler would; libxtc programs expect it) after
 *                  "xtc: stack overflow in proc 'deep-recursor' (pid
 *                  1.2.42)", and the report names only real knobs;
 *   switch-sp      canary kind: a fiber switches away while its stack
 *                  pointer is below its stack: caught at the switch
 *   switch-canary  canary kind: a fiber overflowed a little, returned,
 *                  then switched away: the canary is caught at the switch
 *   preempt-sp     canary kind: a deadline function (xtc_fn) spins with
 *                  its stack pointer in its soft guard: the preemption
 *                  handler catches it (skipped without involuntary
 *                  preemption)
 *   chain-root     a fault that is not an overflow, on the root stack, goes
 *                  to the SA_SIGINFO handler installed before ours
 *   chain-fiber    the same fault on a fiber stack: chained too
 *   default        no previous handler: the process dies of the fault
 *                  (or of ASan's report), without an overflow message
 * A kind the machine lacks (madv: Linux < 6.13) exits 77 and is skipped.
 */
#include <errno.h>
#include <stdint.h>
#include <time.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fiber_int.h"
#include "xtc.h"

#define OVERFLOW_MSG "xtc: stack overflow in proc 'deep-recursor' (pid 1.2.42)"

/* ---- child side ---------------------------------------------------- */

static volatile long recurse_limit = 1L << 40;
/* switch-* cases: recursion stops once a frame is below this address */
static volatile uintptr_t stop_below;
static volatile int switch_at_bottom;
static volatile int spin_at_bottom;

static int64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Spin (no call, no switch) until a preemption signal arrives; give up
 * after 20 s. */
static void spin_here(void)
{
	int64_t end = mono_ns() + 20 * (int64_t)1000000000;
	for (;;) {
		for (volatile long i = 0; i < 1000000; i++)
			;
		if (mono_ns() > end)
			return;
	}
}

__attribute__((noinline)) static long recurse(long n)
{
	volatile char frame[512];
	for (size_t i = 0; i < sizeof frame; i++)
		frame[i] = (char)(n + 1); /* every byte written: nonzero */
	if (n > recurse_limit)
		return 0;
	if ((uintptr_t)&frame[0] < stop_below) {
		if (switch_at_bottom)
			xtc__fiber_switch(xtc__fiber_root());
		if (spin_at_bottom)
			spin_here();
		return 0;
	}
	/* the use after the call prevents a tail call */
	return recurse(n + 1) + frame[0];
}

static void overflow_entry(void *arg)
{
	(void)arg;
	recurse(0);
	/* switch-canary: back up with the canary written */
	xtc__fiber_switch(xtc__fiber_root());
	xtc__fiber_exit_to(xtc__fiber_root());
}

static void fault_now(void)
{
	/* not NULL (UBSan would report it first) and not a constant the
	 * compiler may turn into a trap */
	int *volatile p = (int *)16;
	*p = 1;
}

static void fault_entry(void *arg)
{
	(void)arg;
	fault_now();
	xtc__fiber_exit_to(xtc__fiber_root());
}

static void user_handler(int sig, siginfo_t *si, void *uc)
{
	(void)sig;
	(void)uc;
	static const char ok[] = "chained-ok\n";
	if (si != NULL && si->si_addr == (void *)16)
		(void)!write(STDERR_FILENO, ok, sizeof ok - 1);
	_exit(3);
}

static void install_user_handler(void)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_sigaction = user_handler;
	sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGSEGV, &sa, NULL);
}

static intptr_t preempt_entry(void *arg)
{
	(void)arg;
	stop_below = (uintptr_t)xtc__fiber_current()->stack.lo - 256;
	spin_at_bottom = 1;
	recurse(0);
	return 0;
}

static int kind_of(const char *mode)
{
	if (strcmp(mode, "overflow-own") == 0)
		return XTC__SK_OWN;
	if (strcmp(mode, "overflow-madv") == 0)
		return XTC__SK_MADV;
	if (strcmp(mode, "overflow-prot") == 0)
		return XTC__SK_PROT;
	if (strcmp(mode, "overflow-canary") == 0 ||
	    strcmp(mode, "switch-sp") == 0 || strcmp(mode, "switch-canary") == 0 ||
	    strcmp(mode, "preempt-sp") == 0)
		return XTC__SK_CANARY;
	return -1;
}

static int child(const char *mode)
{
	xtc__fiber_t f;
	int kind = kind_of(mode);
	if (strcmp(mode, "chain-root") == 0 || strcmp(mode, "chain-fiber") == 0)
		install_user_handler();
	if (xtc__fiber_thread_init() != XTC_OK)
		return 10;
	if (strcmp(mode, "preempt-sp") == 0) {
		xtc_fn_t fn;
		if (!xtc_preempt_supported())
			return 77;
		if (xtc__stack_guard_force(kind) != XTC_OK)
			return 14;
		memset(&fn, 0, sizeof fn);
		int rc = xtc_fn_launch(&fn, preempt_entry, NULL, 1000000);
		/* preempted on its way down (a slow machine): go on */
		while (rc == XTC_E_AGAIN)
			rc = xtc_fn_resume(&fn, 1000000);
		return rc == XTC_E_NOSYS ? 77 : 16; /* not caught */
	}
	if (kind >= 0) {
		if (xtc__stack_guard_force(kind) != XTC_OK)
			return 14;
		if (xtc__fiber_init(&f, 16 * 1024, overflow_entry, NULL) != XTC_OK)
			return 11;
		if (f.stack.kind != (uint32_t)kind)
			return 77; /* e.g. no MADV_GUARD_INSTALL here */
		f.name = "deep-recursor";
		f.owner_id = ((uint64_t)1 << 48) | ((uint64_t)2 << 32) | 42;
		/* a little below: the catch needs room in the soft guard */
		if (strcmp(mode, "switch-sp") == 0) {
			stop_below = (uintptr_t)f.stack.lo - 256;
			switch_at_bottom = 1;
		} else if (strcmp(mode, "switch-canary") == 0) {
#ifdef XTC__FIBER_ASAN
			/* ASan may keep the frames off the stack (its fake
			 * stack): nothing would be written below it */
			return 77;
#endif
			stop_below = (uintptr_t)f.stack.lo - 256;
		}
		xtc__fiber_switch(&f);
		return 12; /* not reached */
	}
	if (strcmp(mode, "chain-fiber") == 0) {
		if (xtc__fiber_init(&f, 0, fault_entry, NULL) != XTC_OK)
			return 11;
		f.name = "faulty";
		xtc__fiber_switch(&f);
		return 12;
	}
	if (strcmp(mode, "chain-root") == 0 || strcmp(mode, "default") == 0) {
		fault_now();
		return 12;
	}
	return 13;
}

/* ---- parent side --------------------------------------------------- */

static int failures;

#define CHECK(cond, what)                                                   \
	do {                                                                    \
		if (!(cond)) {                                                      \
			fprintf(stderr, "%s:%d: %s: CHECK failed: %s\n", __FILE__,      \
			        __LINE__, (what), #cond);                               \
			failures++;                                                     \
		}                                                                   \
	} while (0)

struct outcome {
	int status;
	char err[4096];
};

static int spawn_case(const char *self, const char *mode, struct outcome *o)
{
	int pfd[2];
	if (pipe(pfd) != 0)
		return -1;
	fflush(NULL);
	pid_t pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0) {
		struct rlimit nocore = { 0, 0 };
		setrlimit(RLIMIT_CORE, &nocore); /* abort() must not dump */
		close(pfd[0]);
		dup2(pfd[1], STDERR_FILENO);
		close(pfd[1]);
		const char *noexec = getenv("XTC_TEST_NOEXEC");
		if (noexec == NULL || strcmp(noexec, "1") != 0) {
			char *argv[] = { (char *)self, (char *)mode, NULL };
			execv("/proc/self/exe", argv);
			execv(self, argv);
		}
		_exit(child(mode));
	}
	close(pfd[1]);
	size_t len = 0;
	for (;;) {
		ssize_t r = read(pfd[0], o->err + len, sizeof o->err - 1 - len);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		len += (size_t)r;
		if (len == sizeof o->err - 1)
			break;
	}
	o->err[len] = '\0';
	close(pfd[0]);
	while (waitpid(pid, &o->status, 0) < 0 && errno == EINTR)
		;
	return 0;
}

int main(int argc, char **argv)
{
	if (argc > 1)
		return child(argv[1]);

	struct outcome o;

	const char *kinds[] = { "overflow-own", "overflow-madv", "overflow-prot",
		                "overflow-canary", "switch-sp", "switch-canary",
		                "preempt-sp" };
	for (int i = 0; i < 7; i++) {
		int before = failures;
		CHECK(spawn_case(argv[0], kinds[i], &o) == 0, kinds[i]);
		if (WIFEXITED(o.status) && WEXITSTATUS(o.status) == 77) {
			printf("%s: skipped (kind not available here)\n", kinds[i]);
			continue;
		}
		CHECK(WIFSIGNALED(o.status) && WTERMSIG(o.status) == SIGSEGV,
		      kinds[i]);
		/* a deadline function is a fiber with no proc */
		CHECK(strstr(o.err, strcmp(kinds[i], "preempt-sp") == 0 ?
		                    "xtc: stack overflow in fiber 'xtc_fn'" :
		                    OVERFLOW_MSG) != NULL, kinds[i]);
		/* the knobs it names exist: xtc_set_stack_size,
		 * xtc_proc_opts_t.stack_size (test_stack_scale uses both) */
		CHECK(strstr(o.err, "xtc_set_stack_size") != NULL, kinds[i]);
		CHECK(strstr(o.err, "xtc_proc_opts_t.stack_size") != NULL,
		      kinds[i]);
#ifdef XTC__FIBER_ASAN
		/* ASan's frames are larger: the switch path itself may run
		 * off the soft guard first (then the fault is the report) */
		if (strcmp(kinds[i], "preempt-sp") == 0)
#else
		if (strncmp(kinds[i], "switch-", 7) == 0 ||
		    strcmp(kinds[i], "preempt-sp") == 0)
#endif
			CHECK(strstr(o.err, "caught by the switch and preemption "
			                    "check") != NULL, kinds[i]);
		if (strcmp(kinds[i], "switch-canary") == 0)
			CHECK(strstr(o.err, "canary") != NULL, kinds[i]);
		if (failures != before)
			fprintf(stderr, "%s child stderr (status %#x):\n%s\n",
			        kinds[i], o.status, o.err);
	}

	const char *chains[] = { "chain-root", "chain-fiber" };
	for (int i = 0; i < 2; i++) {
		int before = failures;
		CHECK(spawn_case(argv[0], chains[i], &o) == 0, chains[i]);
		CHECK(WIFEXITED(o.status) && WEXITSTATUS(o.status) == 3,
		      chains[i]);
		CHECK(strstr(o.err, "chained-ok") != NULL, chains[i]);
		CHECK(strstr(o.err, "stack overflow") == NULL, chains[i]);
		if (failures != before)
			fprintf(stderr, "%s child stderr:\n%s\n", chains[i], o.err);
	}

	int before = failures;
	CHECK(spawn_case(argv[0], "default", &o) == 0, "default");
#if defined(XTC__FIBER_ASAN) || defined(XTC__FIBER_TSAN)
	/* the sanitizer's own SEGV report is the previous handler: it exits
	 * or aborts in its own way */
	CHECK(WIFSIGNALED(o.status) ||
	      (WIFEXITED(o.status) && WEXITSTATUS(o.status) != 0 &&
	       (WEXITSTATUS(o.status) < 10 || WEXITSTATUS(o.status) > 13)),
	      "default");
#else
	CHECK(WIFSIGNALED(o.status) && WTERMSIG(o.status) == SIGSEGV,
	      "default");
#endif
	CHECK(strstr(o.err, "stack overflow") == NULL, "default");
	if (failures != before)
		fprintf(stderr, "default child stderr:\n%s\n", o.err);

	if (failures) {
		fprintf(stderr, "test_stack_overflow: %d failure(s)\n", failures);
		return 1;
	}
	printf("test_stack_overflow: ok\n");
	return 0;
}
