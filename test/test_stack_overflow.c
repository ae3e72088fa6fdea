/*
 * test_stack_overflow.c - the guard-page report and SIGSEGV chaining.
 *
 * Each case runs in a child process (fork + exec of this binary with the
 * case name; with XTC_TEST_NOEXEC=1, or when exec fails as under qemu-user
 * without binfmt_misc, the forked child runs the case directly). The parent
 * checks how the child ended and what it wrote to stderr:
 *   overflow       fiber recursion hits the guard page: SIGABRT and
 *                  "xtc: stack overflow in proc 'deep-recursor' (id 42)"
 *   chain-root     a fault that is not an overflow, on the root stack, goes
 *                  to the SA_SIGINFO handler installed before ours
 *   chain-fiber    the same fault on a fiber stack: chained too
 *   default        no previous handler: the process dies of the fault
 *                  (or of ASan's report), without an overflow message
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fiber_int.h"
#include "xtc.h"

#define OVERFLOW_MSG "xtc: stack overflow in proc 'deep-recursor' (id 42)"

/* ---- child side ---------------------------------------------------- */

static volatile long recurse_limit = 1L << 40;

__attribute__((noinline)) static long recurse(long n)
{
	volatile char frame[512];
	frame[0] = (char)n;
	if (n > recurse_limit)
		return 0;
	/* the use after the call prevents a tail call */
	return recurse(n + 1) + frame[0];
}

static void overflow_entry(void *arg)
{
	(void)arg;
	recurse(0);
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

static int child(const char *mode)
{
	xtc__fiber_t f;
	if (strcmp(mode, "chain-root") == 0 || strcmp(mode, "chain-fiber") == 0)
		install_user_handler();
	if (xtc__fiber_thread_init() != XTC_OK)
		return 10;
	if (strcmp(mode, "overflow") == 0) {
		if (xtc__fiber_init(&f, 16 * 1024, overflow_entry, NULL) != XTC_OK)
			return 11;
		f.name = "deep-recursor";
		f.owner_id = 42;
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

	CHECK(spawn_case(argv[0], "overflow", &o) == 0, "overflow");
	CHECK(WIFSIGNALED(o.status) && WTERMSIG(o.status) == SIGABRT,
	      "overflow");
	CHECK(strstr(o.err, OVERFLOW_MSG) != NULL, "overflow");
	if (failures)
		fprintf(stderr, "overflow child stderr:\n%s\n", o.err);

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
