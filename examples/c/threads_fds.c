/*
 * threads_fds.c - another thread feeding a proc, two ways at once.
 *
 * A plain pthread (not a loop thread) writes lines into a pipe and sends
 * mailbox messages to a proc. The proc waits for either with
 * xtc_proc_wait_fd, which returns when the fd is readable or a message has
 * arrived, and parks only its fiber: the loop thread stays free for other
 * work. xtc_send is one of the calls that are safe from any thread.
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <xtc.h>

#define MS (1000 * 1000LL)

struct shared {
	int fds[2];        /* pipe: [0] read end (proc), [1] write end (thread) */
	xtc_pid_t reader;  /* published before the thread starts */
	int lines, msgs;
};

static void
reader(void *arg)
{
	struct shared *sh = arg;
	char buf[128];

	for (;;) {
		uint32_t rev = 0;
		int rc = xtc_proc_wait_fd(sh->fds[0], XTC_IO_READABLE, 1000 * MS,
		    &rev);

		if (rc == XTC_E_AGAIN) {
			printf("reader: nothing for 1 s, giving up\n");
			return;
		}
		if (rc != XTC_OK) {
			printf("reader: wait_fd: %s\n", xtc_strerror(rc));
			return;
		}
		if (rev & XTC_IO_READABLE) {
			ssize_t n = read(sh->fds[0], buf, sizeof buf - 1);

			/* A pipe is a byte stream: one read may carry several
			 * lines, so count newlines, not reads. */
			for (ssize_t i = 0; i < n; i++)
				sh->lines += buf[i] == '\n';
			if (n > 0) {
				buf[n] = '\0';
				printf("reader: pipe: %s", buf);
			}
		}
		if (rev & XTC_WAIT_MAILBOX) {
			void *msg;
			size_t len;

			while (xtc_recv(&msg, &len, 0) == XTC_OK) {
				int stop = len == 0;

				if (!stop) {
					printf("reader: mailbox: %.*s\n", (int)len,
					    (char *)msg);
					sh->msgs++;
				}
				xtc_free(msg);
				if (stop) {
					printf("reader: stop message\n");
					return;
				}
			}
		}
	}
}

static void *
feeder(void *arg)
{
	struct shared *sh = arg;
	char line[64], msg[64];
	int i;

	for (i = 1; i <= 3; i++) {
		snprintf(line, sizeof line, "line %d\n", i);
		if (write(sh->fds[1], line, strlen(line)) < 0)
			perror("write");
		xtc_sleep_ns(5 * MS); /* a plain thread may block */
		snprintf(msg, sizeof msg, "message %d", i);
		if (xtc_send(sh->reader, msg, strlen(msg)) != XTC_OK)
			printf("feeder: send failed\n");
		xtc_sleep_ns(5 * MS);
	}
	xtc_send(sh->reader, NULL, 0); /* an empty message: stop */
	return NULL;
}

int
main(void)
{
	xtc_loop_t *loop;
	struct shared sh = {0};
	pthread_t thr;

	if (pipe(sh.fds) != 0 || xtc_loop_init(&loop) != XTC_OK)
		return 1;
	if (xtc_proc_spawn(loop, reader, &sh, NULL, &sh.reader) != XTC_OK)
		return 1;
	if (pthread_create(&thr, NULL, feeder, &sh) != 0)
		return 1;
	if (xtc_loop_run(loop) != XTC_OK) /* returns when the reader exits */
		return 1;
	pthread_join(thr, NULL);
	xtc_loop_fini(loop);
	close(sh.fds[0]);
	close(sh.fds[1]);
	printf("%d lines, %d messages\n", sh.lines, sh.msgs);
	return sh.lines == 3 && sh.msgs == 3 ? 0 : 1;
}
