/*
 * links_monitors.c - knowing when another proc ends.
 *
 *  1. A supervisor monitors a worker that fails, reads the DOWN message,
 *     and restarts it until it succeeds.
 *  2. Two linked procs: when one exits with a non-zero reason, the other
 *     receives an EXIT message.
 *  3. xtc_exit_pid asks a sleeping proc to exit; its monitor reports it.
 *  4. Monitoring a proc that has already exited gives an immediate DOWN
 *     with reason XTC_DOWN_NOPROC.
 */
#include <stdio.h>
#include <stdlib.h>

#include <xtc.h>

#define MS (1000 * 1000LL)

static int failures;

static void
expect(int ok, const char *what)
{
	if (!ok) {
		printf("  UNEXPECTED: %s\n", what);
		failures++;
	}
}

/* Wait for the DOWN message of monitor `ref`; return its info. */
static int
await_down(uint64_t ref, xtc_down_info_t *info)
{
	void *msg;
	size_t len;

	for (;;) {
		int rc = xtc_recv(&msg, &len, 1000 * MS);

		if (rc != XTC_OK)
			return rc;
		rc = xtc_down_decode_ex(msg, len, info);
		xtc_free(msg);
		if (rc == XTC_OK && info->ref == ref)
			return XTC_OK;
	}
}

/* 1. supervision ---------------------------------------------------------- */

static void
flaky(void *arg)
{
	int attempt = (int)(intptr_t)arg;

	xtc_proc_sleep(1 * MS);
	if (attempt < 3) {
		printf("  worker attempt %d: failing with reason %d\n", attempt,
		    100 + attempt);
		xtc_exit_self(100 + attempt);
	}
	printf("  worker attempt %d: succeeded\n", attempt);
}

static void
supervisor(void *arg)
{
	xtc_loop_t *loop = arg;
	xtc_down_info_t info;
	xtc_pid_t pid;
	uint64_t ref;
	int attempt;

	printf("1. supervisor restarts a failing worker\n");
	for (attempt = 1; attempt <= 5; attempt++) {
		if (xtc_proc_spawn_monitor(loop, flaky, (void *)(intptr_t)attempt,
		    NULL, &pid, &ref) != XTC_OK ||
		    await_down(ref, &info) != XTC_OK) {
			expect(0, "spawn_monitor / DOWN");
			return;
		}
		expect(xtc_pid_eq(info.pid, pid), "DOWN names the worker");
		printf("  DOWN: reason %d (%s)\n", info.reason,
		    info.kind == XTC_DOWN_KIND_CLEAN ? "clean" : "exit");
		if (info.kind == XTC_DOWN_KIND_CLEAN)
			break;
	}
	expect(attempt == 3, "three attempts");
}

/* 2. links ---------------------------------------------------------------- */

static void
crasher(void *arg)
{
	(void)arg;
	xtc_proc_sleep(1 * MS);
	xtc_exit_self(7);
}

static void
partner(void *arg)
{
	xtc_loop_t *loop = arg;
	xtc_pid_t child, who;
	void *msg;
	size_t len;
	int reason = 0;

	printf("2. a linked proc exits with reason 7\n");
	if (xtc_proc_spawn_link(loop, crasher, NULL, NULL, &child) != XTC_OK) {
		expect(0, "spawn_link");
		return;
	}
	if (xtc_recv(&msg, &len, 1000 * MS) != XTC_OK) {
		expect(0, "EXIT message");
		return;
	}
	expect(xtc_exit_decode(msg, len, &who, &reason) == XTC_OK &&
	    xtc_pid_eq(who, child), "decode EXIT");
	xtc_free(msg);
	printf("  partner got EXIT from %u with reason %d and keeps running\n",
	    who.local_id, reason);
	expect(reason == 7, "reason 7");
}

/* 3. kill and 4. monitor of a dead proc ----------------------------------- */

static void
sleepy(void *arg)
{
	(void)arg;
	for (;;)
		xtc_proc_sleep(1000 * MS);
}

static void
quick(void *arg)
{
	(void)arg;
}

static void
killer(void *arg)
{
	xtc_loop_t *loop = arg;
	xtc_down_info_t info;
	xtc_pid_t pid;
	uint64_t ref;

	printf("3. xtc_exit_pid stops a sleeping proc\n");
	if (xtc_proc_spawn_monitor(loop, sleepy, NULL, NULL, &pid, &ref) !=
	    XTC_OK) {
		expect(0, "spawn_monitor");
		return;
	}
	xtc_proc_sleep(1 * MS);
	expect(xtc_exit_pid(pid, 9) == XTC_OK, "exit_pid");
	expect(await_down(ref, &info) == XTC_OK && info.reason == 9,
	    "DOWN with reason 9");
	printf("  DOWN: reason %d\n", info.reason);
	expect(xtc_exit_pid(pid, 9) == XTC_E_INVAL, "exit_pid on a dead pid");

	printf("4. monitoring a proc that already exited\n");
	if (xtc_proc_spawn(loop, quick, NULL, NULL, &pid) != XTC_OK) {
		expect(0, "spawn");
		return;
	}
	xtc_proc_sleep(1 * MS); /* quick has run and exited */
	expect(xtc_monitor(pid, &ref) == XTC_OK, "monitor");
	expect(await_down(ref, &info) == XTC_OK &&
	    info.reason == XTC_DOWN_NOPROC, "NOPROC");
	printf("  DOWN: reason %d (XTC_DOWN_NOPROC)\n", info.reason);
}

/* Run the scenarios one after another: each is a proc we monitor. */
static void
scenarios(void *arg)
{
	xtc_proc_fn steps[] = {supervisor, partner, killer};
	xtc_down_info_t info;
	uint64_t ref;
	size_t i;

	for (i = 0; i < sizeof steps / sizeof steps[0]; i++)
		if (xtc_proc_spawn_monitor(arg, steps[i], arg, NULL, NULL,
		    &ref) != XTC_OK || await_down(ref, &info) != XTC_OK)
			expect(0, "scenario");
}

int
main(void)
{
	xtc_loop_t *loop;

	if (xtc_loop_init(&loop) != XTC_OK)
		return 1;
	if (xtc_proc_spawn(loop, scenarios, loop, NULL, NULL) != XTC_OK)
		return 1;
	if (xtc_loop_run(loop) != XTC_OK)
		return 1;
	xtc_loop_fini(loop);
	printf("%s\n", failures ? "FAILED" : "ok");
	return failures != 0;
}
