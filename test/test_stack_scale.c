/*
 * test_stack_scale.c - stacks at scale (fiber_stack.c): more procs than the
 * old one-mapping-per-stack ceiling, small per-proc stacks, the spawn
 * option's error paths, and XTC_E_NOMEM naming the limit it hit.
 *
 *  beyond_map_count  40 000 procs parked in a receive with default stacks
 *                    (a mapping plus a guard page each stopped at 32 748
 *                    under the default vm.max_map_count); the process
 *                    keeps a few hundred mappings, every proc wakes and
 *                    exits
 *  small_stacks      10 000 procs on 1 KiB stacks park and exit (16 KiB
 *                    under the sanitizers, whose frames are larger; 8 KiB
 *                    with the ucontext substrate)
 *  small_many_loops  64 loops x 500 procs on small stacks, 20 rounds: the
 *                    first wakes on each loop thread take the runtime's
 *                    first calls into libc (a lazily bound call there
 *                    overflowed 1 KiB stacks into their neighbours: a
 *                    crash in 10 of 10 runs; test_stack_lazy has the
 *                    lazily bound program)
 *  stack_size_opt    xtc_proc_opts_t.stack_size: below 1 KiB XTC_E_INVAL,
 *                    above 1 GiB XTC_E_RANGE, a small one runs
 *  nomem_reason      in a child with RLIMIT_AS lowered, a spawn whose
 *                    stack the kernel refuses fails with XTC_E_NOMEM and
 *                    xtc_stack_nomem_reason() names RLIMIT_AS
 */
#include <errno.h>
#include <pthread.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/wait.h>

#include "fiber_int.h"
#include "xb_park.h" /* cmd/xtcbench: the fixture */
#include "test_util.h"

#if defined(XTC__FIBER_ASAN) || defined(XTC__FIBER_TSAN)
#define SANITIZED 1
#else
#define SANITIZED 0
#endif
/* The smallest stack the tests give a proc: the sanitizers' frames are
 * larger, and the ucontext substrate keeps its ucontext_t (and 4 KiB of
 * headroom) on the stack. */
#if SANITIZED
#define SMALL_STACK 16384
#elif defined(XTC__CORO_UCONTEXT)
#define SMALL_STACK 8192
#else
#define SMALL_STACK 1024
#endif

static void test_beyond_map_count(void)
{
	xb_park_t r;
	long n = SANITIZED ? 5000 : 40000;

	REQUIRE(xb_park_run(n, 0, NULL, &r) == 0);
	CHECK_EQ(r.spawn_rc, 0);
	CHECK_EQ(r.parked, n);
	CHECK_EQ(r.exited, n);
	/* slabs: not two mappings per stack */
	CHECK(r.vmas >= 0 && r.vmas < 2000);
	printf("  %ld procs parked: %ld mappings, %.0f B resident each\n",
	       r.parked, r.vmas, r.rss_each);
}

static void test_small_stacks(void)
{
	xb_park_t r;
	long n = 10000;

	REQUIRE(xb_park_run(n, SMALL_STACK, NULL, &r) == 0);
	CHECK_EQ(r.spawn_rc, 0);
	CHECK_EQ(r.parked, n);
	CHECK_EQ(r.exited, n);
	printf("  %ld procs on %d-byte stacks: %.0f B resident each\n",
	       r.parked, SMALL_STACK, r.rss_each);
}

static void test_small_many_loops(void)
{
	long rounds = SANITIZED ? 3 : 20;

	for (long i = 0; i < rounds; i++) {
		xb_park_t r;
		REQUIRE(xb_park_run_per(64 * 500, 500, SMALL_STACK, NULL, &r) == 0);
		REQUIRE(r.spawn_rc == 0);
		CHECK_EQ(r.parked, 64 * 500);
		CHECK_EQ(r.exited, 64 * 500);
	}
}

static int small_ran;

static void small_body(void *arg)
{
	volatile char buf[256];
	(void)arg;
	buf[0] = 1;
	small_ran += buf[0];
	xtc_yield();
	small_ran++;
}

static void test_stack_size_opt(void)
{
	xtc_loop_t *l;
	xtc_proc_opts_t o;
	xtc_pid_t pid;

	REQUIRE(xtc_loop_init(&l) == 0);
	memset(&o, 0, sizeof o);
	o.stack_size = 512;
	CHECK_EQ(xtc_proc_spawn(l, small_body, NULL, &o, &pid), XTC_E_INVAL);
	o.stack_size = (size_t)2 << 30;
	CHECK_EQ(xtc_proc_spawn(l, small_body, NULL, &o, &pid), XTC_E_RANGE);
	o.stack_size = SMALL_STACK;
	CHECK_EQ(xtc_proc_spawn(l, small_body, NULL, &o, &pid), 0);
	o.stack_size = 100 * 1024; /* a page-rounded size of its own */
	CHECK_EQ(xtc_proc_spawn(l, small_body, NULL, &o, &pid), 0);
	CHECK_EQ(xtc_loop_run(l), 0);
	CHECK_EQ(small_ran, 4);
	CHECK_EQ(xtc_loop_fini(l), 0);
}

static int nomem_rc = 1, nomem_rc_default = 1;
static const char *nomem_why;
static xtc_loop_t *nomem_loop;


/* On the loop (its owner thread), where a spawn maps its stack at once. */
static void nomem_driver(void *arg)
{
	xtc_proc_opts_t o;
	xtc_pid_t pid;
	(void)arg;
	memset(&o, 0, sizeof o);
	o.stack_size = (size_t)512 << 20; /* a mapping of its own: refused */
	nomem_rc = xtc_proc_spawn(nomem_loop, small_body, NULL,
	                          &o, &pid);
	nomem_why = xtc_stack_nomem_reason(); /* cleared by a later mapping */
	/* the default still works under the limit: slabs are reserved, not
	 * committed */
	nomem_rc_default = xtc_proc_spawn(nomem_loop, small_body,
	                                  NULL, NULL, &pid);
}

/* A spawn from another thread maps its stack at the proc's first run on
 * the loop: refused there, the proc never runs, and the loop's other
 * procs stay reachable (the refusal once closed the loop's proc table:
 * every later send failed). */
static xtc_pid_t keeper;
static int keeper_rc = 1, sender_rc = 1, foreign_rc = 1;
static int foreign_ran;

static void foreign_body(void *arg)
{
	(void)arg;
	foreign_ran = 1;
}

static void *foreign_spawn(void *arg)
{
	xtc_proc_opts_t o;
	(void)arg;
	memset(&o, 0, sizeof o);
	o.stack_size = (size_t)512 << 20;
	foreign_rc = xtc_proc_spawn(nomem_loop, foreign_body, NULL, &o, NULL);
	return NULL;
}

static void keeper_body(void *arg)
{
	void *m = NULL;
	size_t n = 0;
	(void)arg;
	/* a bound for a broken table (the send never comes), not a timing */
	keeper_rc = xtc_recv(&m, &n, 30 * 1000000000LL);
	if (keeper_rc == 0)
		xtc_free(m);
}

static void sender_body(void *arg)
{
	(void)arg;
	for (int i = 0; i < 8; i++)
		xtc_yield(); /* the foreign spawn is drained and refused */
	sender_rc = xtc_send(keeper, "x", 1);
}

static int nomem_foreign(void)
{
	pthread_t th;

	if (xtc_proc_spawn(nomem_loop, keeper_body, NULL, NULL, &keeper) != 0 ||
	    xtc_proc_spawn(nomem_loop, sender_body, NULL, NULL, NULL) != 0)
		return 20;
	if (pthread_create(&th, NULL, foreign_spawn, NULL) != 0)
		return 77;
	pthread_join(th, NULL);
	if (foreign_rc != 0) /* queued: the stack is mapped by the loop */
		return 21;
	if (xtc_loop_run(nomem_loop) != 0)
		return 22;
	if (foreign_ran)
		return 23;
	if (sender_rc != 0 || keeper_rc != 0)
		return 24;
	return 0;
}

static int nomem_child(void)
{
	struct rlimit rl;
	long vm_kib = 0;
	char buf[4096];
	int fd;

	if (xtc_loop_init(&nomem_loop) != 0)
		return 10;
	/* the address space in use now, plus 256 MiB */
	fd = open("/proc/self/status", O_RDONLY);
	if (fd >= 0) {
		ssize_t n = read(fd, buf, sizeof buf - 1);
		close(fd);
		if (n > 0) {
			buf[n] = '\0';
			char *p = strstr(buf, "VmSize:");
			if (p != NULL)
				vm_kib = strtol(p + 7, NULL, 10);
		}
	}
	if (vm_kib <= 0)
		return 77;
	rl.rlim_cur = rl.rlim_max = (rlim_t)vm_kib * 1024 + ((rlim_t)256 << 20);
	if (setrlimit(RLIMIT_AS, &rl) != 0)
		return 77;
	if (xtc_proc_spawn(nomem_loop, nomem_driver, NULL, NULL, NULL) != 0)
		return 15;
	if (xtc_loop_run(nomem_loop) != 0)
		return 14;
	if (nomem_rc != XTC_E_NOMEM)
		return 11;
	const char *why = nomem_why;
	if (why == NULL || strstr(why, "RLIMIT_AS") == NULL)
		return 12;
	printf("  reason: %s\n", why);
	fflush(stdout);
	if (nomem_rc_default != 0)
		return 13;
	return nomem_foreign();
}

static void test_nomem_reason(void)
{
	int st = 0;
	pid_t c;

	if (SANITIZED) {
		printf("  skipped: the sanitizers reserve more than RLIMIT_AS lets\n");
		return;
	}
	CHECK(xtc_stack_nomem_reason() == NULL ||
	      strstr(xtc_stack_nomem_reason(), "RLIMIT_AS") == NULL);
	fflush(NULL);
	c = fork();
	REQUIRE(c >= 0);
	if (c == 0)
		_exit(nomem_child());
	while (waitpid(c, &st, 0) < 0 && errno == EINTR)
		;
	CHECK(WIFEXITED(st) && (WEXITSTATUS(st) == 0 || WEXITSTATUS(st) == 77));
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
		printf("  child status %#x\n", st);
}

int main(int argc, char **argv)
{
	test_only = argc > 1 ? argv[1] : NULL;
	RUN(test_stack_size_opt);
	RUN(test_small_stacks);
	RUN(test_small_many_loops);
	RUN(test_beyond_map_count);
	RUN(test_nomem_reason);
	if (failures) {
		fprintf(stderr, "test_stack_scale: %d failure(s)\n", failures);
		return 1;
	}
	printf("test_stack_scale: ok\n");
	return 0;
}
