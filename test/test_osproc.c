/*
 * test_osproc.c - the OS-process tier: argv and forked-function children,
 * exit status through the pidfd, signals, timeouts, the control socket
 * (XTC_CTRL_FD for exec'd children), call/serve framing, a fiber that waits
 * while its loop keeps running, and every error path.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "loop_int.h"
#include "xtc.h"
#include "xtc_osproc.h"

#include "test_util.h"

static int child_ret42(int fd, void *arg)
{
	(void)fd;
	(void)arg;
	return 42;
}

static int child_sleep(int fd, void *arg)
{
	(void)fd;
	(void)arg;
	for (;;)
		pause();
	return 0;
}

static int child_nap_ms(int fd, void *arg)
{
	(void)fd;
	usleep((useconds_t)(intptr_t)arg * 1000);
	return 3;
}

static int upper(const void *req, size_t len, void **rep, size_t *rep_len,
                 void *arg)
{
	(void)arg;
	char *o = malloc(len + 1);
	if (o == NULL)
		return XTC_E_NOMEM;
	for (size_t i = 0; i < len; i++) {
		char c = ((const char *)req)[i];
		o[i] = (c >= 'a' && c <= 'z') ? (char)(c - 32) : c;
	}
	*rep = o;
	*rep_len = len;
	return XTC_OK;
}

static int child_serve(int fd, void *arg)
{
	return xtc_osproc_serve(fd, upper, arg) == XTC_OK ? 0 : 9;
}


/* A failed execve is the spawn's error, never a child exiting 127: a
 * missing absolute path, a file without execute permission, a directory,
 * a non-executable file with the x bit. No child is left behind. */
static void check_exec_failures(void)
{
	char dir[] = "/tmp/xtc-osproc-XXXXXX", noexec[64], junk[64];
	xtc_osproc_t *p = (xtc_osproc_t *)1;

	if (mkdtemp(dir) == NULL) {
		CHECK(0);
		return;
	}
	snprintf(noexec, sizeof noexec, "%s/noexec", dir);
	snprintf(junk, sizeof junk, "%s/junk", dir);
	int fd = open(noexec, O_CREAT | O_WRONLY, 0644);
	CHECK(fd >= 0 && write(fd, "#!/bin/sh\nexit 0\n", 18) == 18);
	close(fd);
	fd = open(junk, O_CREAT | O_WRONLY, 0755);
	CHECK(fd >= 0 && write(fd, "\x01\x02garbage", 9) == 9);
	close(fd);

	char *abs_missing[] = { "/nonexistent/xtc/program", NULL };
	char *not_x[] = { noexec, NULL };
	char *a_dir[] = { dir, NULL };
	char *bad_fmt[] = { junk, NULL };
	xtc_osproc_opts_t o = { .argv = abs_missing };
	CHECK(xtc_osproc_spawn(&o, &p) == XTC_E_NOTFOUND && p == NULL);
	o.argv = not_x;
	CHECK(xtc_osproc_spawn(&o, &p) == XTC_E_INVAL && p == NULL);
	o.argv = a_dir;
	CHECK(xtc_osproc_spawn(&o, &p) == XTC_E_INVAL && p == NULL);
	o.argv = bad_fmt;
	o.ctrl_socket = 1;
	CHECK(xtc_osproc_spawn(&o, &p) == XTC_E_INVAL && p == NULL);
	unlink(noexec);
	unlink(junk);
	rmdir(dir);
}

static void test_errors(void)
{
	xtc_osproc_t *p = (xtc_osproc_t *)1;
	char *argv[] = { "/bin/true", NULL };
	char *empty[] = { NULL };
	xtc_osproc_opts_t o = { 0 };
	CHECK(xtc_osproc_spawn(NULL, &p) == XTC_E_INVAL && p == NULL);
	CHECK(xtc_osproc_spawn(&o, &p) == XTC_E_INVAL); /* neither */
	o.argv = argv;
	o.fn = child_ret42;
	CHECK(xtc_osproc_spawn(&o, &p) == XTC_E_INVAL); /* both */
	o.fn = NULL;
	CHECK(xtc_osproc_spawn(&o, NULL) == XTC_E_INVAL);
	o.argv = empty;
	CHECK(xtc_osproc_spawn(&o, &p) == XTC_E_INVAL);
	char *missing[] = { "no-such-program-xtc", NULL };
	o.argv = missing;
	CHECK(xtc_osproc_spawn(&o, &p) == XTC_E_NOTFOUND && p == NULL);
	check_exec_failures();
	CHECK(xtc_osproc_isolated_spawn("x", NULL, NULL, &p) == XTC_E_INVAL);
	CHECK(xtc_osproc_pid(NULL) == -1);
	CHECK(xtc_osproc_ctrl_fd(NULL) == -1);
	CHECK(xtc_osproc_signal(NULL, SIGTERM) == XTC_E_INVAL);
	CHECK(xtc_osproc_try_wait(NULL, NULL) == XTC_E_INVAL);
	CHECK(xtc_osproc_wait(NULL, NULL, 0) == XTC_E_INVAL);
	void *rep = (void *)1;
	size_t rl = 5;
	CHECK(xtc_osproc_call(NULL, "a", 1, &rep, &rl, 10, 0) == XTC_E_INVAL);
	CHECK(rep == NULL && rl == 0);
	CHECK(xtc_osproc_serve(-1, upper, NULL) == XTC_E_INVAL);
	CHECK(xtc_osproc_serve(0, NULL, NULL) == XTC_E_INVAL);
	xtc_osproc_destroy(NULL);

	/* no control socket: call refused, ctrl_fd -1 */
	o = (xtc_osproc_opts_t){ .fn = child_ret42 };
	CHECK(xtc_osproc_spawn(&o, &p) == XTC_OK);
	CHECK(xtc_osproc_ctrl_fd(p) == -1);
	CHECK(xtc_osproc_call(p, "a", 1, &rep, &rl, 10, 0) == XTC_E_INVAL);
	CHECK(xtc_osproc_signal(p, -1) == XTC_E_INVAL);
	int st = 0;
	CHECK(xtc_osproc_signal(p, 100000) == XTC_E_INVAL);
	CHECK(xtc_osproc_wait(p, &st, -1) == XTC_OK);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 42);
	CHECK(xtc_osproc_signal(p, SIGTERM) == XTC_E_NOTFOUND);
	CHECK(xtc_osproc_signal(p, 0) == XTC_E_NOTFOUND);
	/* the status is cached: later waits give it again, never ECHILD */
	st = 0;
	CHECK(xtc_osproc_wait(p, &st, 0) == XTC_OK && WEXITSTATUS(st) == 42);
	st = 0;
	CHECK(xtc_osproc_try_wait(p, &st) == XTC_OK && WEXITSTATUS(st) == 42);
	CHECK(xtc_osproc_try_wait(p, NULL) == XTC_OK);
	xtc_osproc_destroy(p);

	/* with a control socket: the call's own argument checks */
	o = (xtc_osproc_opts_t){ .fn = child_ret42, .ctrl_socket = 1 };
	CHECK(xtc_osproc_spawn(&o, &p) == XTC_OK);
	CHECK(xtc_osproc_ctrl_fd(p) >= 0);
	CHECK(xtc_osproc_call(p, "a", 1, NULL, &rl, 10, 0) == XTC_E_INVAL);
	CHECK(xtc_osproc_call(p, "a", 1, &rep, NULL, 10, 0) == XTC_E_INVAL);
	CHECK(xtc_osproc_call(p, NULL, 1, &rep, &rl, 10, 0) == XTC_E_INVAL);
	CHECK(xtc_osproc_call(p, "a", (size_t)XTC_OSPROC_MAX_FRAME + 1, &rep,
	                      &rl, 10, 0) == XTC_E_RANGE);
	CHECK(xtc_osproc_wait(p, &st, -1) == XTC_OK);
	xtc_osproc_destroy(p);
}

static void test_argv(void)
{
	char *argv[] = { "sh", "-c", "exit 7", NULL };
	xtc_osproc_opts_t o = { .name = "exit7", .argv = argv };
	xtc_osproc_t *p = NULL;
	CHECK(xtc_osproc_spawn(&o, &p) == XTC_OK);
	CHECK(xtc_osproc_pid(p) > 0);
	int st = -1;
	CHECK(xtc_osproc_wait(p, &st, 5000 * MS) == XTC_OK);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 7);
	/* reaped once, status cached */
	st = -1;
	CHECK(xtc_osproc_try_wait(p, &st) == XTC_OK && WEXITSTATUS(st) == 7);
	xtc_osproc_destroy(p);

	/* exec'd child finds its control fd in XTC_CTRL_FD */
	char *argv2[] = { "sh", "-c", "printf hello >&$XTC_CTRL_FD", NULL };
	o = (xtc_osproc_opts_t){ .argv = argv2, .ctrl_socket = 1 };
	CHECK(xtc_osproc_spawn(&o, &p) == XTC_OK);
	int fd = xtc_osproc_ctrl_fd(p);
	CHECK(fd >= 0);
	CHECK(xtc_osproc_wait(p, &st, 5000 * MS) == XTC_OK);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	char buf[16] = { 0 };
	CHECK(read(fd, buf, sizeof buf - 1) == 5 && strcmp(buf, "hello") == 0);
	xtc_osproc_destroy(p);
}

static void test_fn_child(void)
{
	xtc_osproc_opts_t o = { .fn = child_ret42 };
	xtc_osproc_t *p = NULL;
	CHECK(xtc_osproc_spawn(&o, &p) == XTC_OK);
	int st = -1;
	CHECK(xtc_osproc_wait(p, &st, -1) == XTC_OK);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 42);
	xtc_osproc_destroy(p);

	/* running: try_wait says AGAIN, a bounded wait times out, a signal ends
	 * it and the wait reports it */
	o.fn = child_sleep;
	CHECK(xtc_osproc_spawn(&o, &p) == XTC_OK);
	CHECK(xtc_osproc_try_wait(p, &st) == XTC_E_AGAIN);
	CHECK(xtc_osproc_wait(p, &st, 0) == XTC_E_AGAIN);
	int64_t t0 = xtc_clock_mono();
	CHECK(xtc_osproc_wait(p, &st, 20 * MS) == XTC_E_AGAIN);
	CHECK(xtc_clock_mono() - t0 >= 19 * MS);
	CHECK(xtc_osproc_signal(p, SIGKILL) == XTC_OK);
	CHECK(xtc_osproc_wait(p, &st, -1) == XTC_OK);
	CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
	xtc_osproc_destroy(p);

	/* destroy does not kill: the child still exits on its own */
	o.fn = child_nap_ms;
	o.arg = (void *)(intptr_t)30;
	CHECK(xtc_osproc_spawn(&o, &p) == XTC_OK);
	pid_t pid = (pid_t)xtc_osproc_pid(p);
	xtc_osproc_destroy(p);
	CHECK(kill(pid, 0) == 0);
	int raw = 0;
	CHECK(waitpid(pid, &raw, 0) == pid && WEXITSTATUS(raw) == 3);
}

static void test_call_serve(void)
{
	xtc_osproc_t *p = NULL;
	CHECK(xtc_osproc_isolated_spawn("upper", child_serve, NULL, &p) == XTC_OK);
	for (int i = 0; i < 50; i++) {
		char req[32];
		int n = snprintf(req, sizeof req, "hello %d", i);
		void *rep = NULL;
		size_t rl = 0;
		CHECK(xtc_osproc_call(p, req, (size_t)n, &rep, &rl, 64, 5000 * MS) ==
		      XTC_OK);
		char want[32];
		snprintf(want, sizeof want, "HELLO %d", i);
		CHECK(rep && rl == (size_t)n && memcmp(rep, want, rl) == 0);
		xtc_free(rep);
	}
	/* empty request, empty reply */
	void *rep = NULL;
	size_t rl = 9;
	CHECK(xtc_osproc_call(p, NULL, 0, &rep, &rl, 64, 5000 * MS) == XTC_OK);
	CHECK(rl == 0);
	xtc_free(rep);
	/* reply larger than allowed: RANGE, then the stream is out of sync */
	CHECK(xtc_osproc_call(p, "abcdef", 6, &rep, &rl, 3, 5000 * MS) ==
	      XTC_E_RANGE);
	CHECK(rep == NULL);
	CHECK(xtc_osproc_call(p, "x", 1, &rep, &rl, 64, 5000 * MS) == XTC_E_IO);
	/* EOF on our side makes serve return OK: exit status 0 */
	CHECK(shutdown(xtc_osproc_ctrl_fd(p), SHUT_WR) == 0);
	int st = -1;
	CHECK(xtc_osproc_wait(p, &st, 5000 * MS) == XTC_OK);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	xtc_osproc_destroy(p);
}

/* A fiber waits for a child while a peer keeps running: the wait parks the
 * fiber, not the loop. Ordered by events, not by time: the child exits only
 * once the peer, after ticking 10 times, writes it a byte, so a wait that
 * blocked the loop would never end (and time out after 5 s). */
static volatile int peer_ticks, waiter_done;
static xtc_osproc_t *volatile waited_child;
static int child_wait_byte(int fd, void *arg)
{
	(void)arg;
	char c;
	ssize_t n;
	do
		n = read(fd, &c, 1);
	while (n < 0 && errno == EINTR);
	return 3;
}

static intptr_t waiter(void *arg)
{
	(void)arg;
	xtc_osproc_opts_t o = { .fn = child_wait_byte, .ctrl_socket = 1 };
	xtc_osproc_t *p = NULL;
	if (xtc_osproc_spawn(&o, &p) != XTC_OK)
		return -1;
	waited_child = p;
	int st = -1;
	int rc = xtc_osproc_wait(p, &st, 5000 * MS);
	waited_child = NULL;
	xtc_osproc_destroy(p);
	waiter_done = 1;
	return rc == XTC_OK && WEXITSTATUS(st) == 3 ? 1 : -2;
}

static intptr_t peer(void *arg)
{
	(void)arg;
	int sent = 0;
	while (!waiter_done) {
		peer_ticks++;
		xtc_osproc_t *p = waited_child;
		if (!sent && peer_ticks >= 10 && p != NULL)
			sent = write(xtc_osproc_ctrl_fd(p), "x", 1) == 1;
		xtc__park(1 * MS, -1, 0, NULL);
	}
	return 0;
}

static void test_fiber_wait(void)
{
	xtc_loop_t *l = NULL;
	REQUIRE(xtc_loop_init(&l) == XTC_OK);
	xtc_task_t *a = NULL, *b = NULL;
	CHECK(xtc_async(l, waiter, NULL, &a) == XTC_OK);
	CHECK(xtc_async(l, peer, NULL, &b) == XTC_OK);
	CHECK(xtc_loop_run(l) == XTC_OK);
	intptr_t r = 0;
	CHECK(xtc_await(a, &r) == XTC_OK && r == 1);
	CHECK(peer_ticks >= 10);
	CHECK(xtc_loop_fini(l) == XTC_OK);
}

int main(void)
{
	signal(SIGPIPE, SIG_IGN);
	test_errors();
	test_argv();
	test_fn_child();
	test_call_serve();
	test_fiber_wait();
	if (failures)
		fprintf(stderr, "test_osproc: %d failure(s)\n", failures);
	return failures ? 1 : 0;
}
