/*
 * osproc.c - the OS-process tier (xtc_osproc(3)).
 *
 * Model: a child process is the kernel's answer to "preempt code I cannot
 * trust to yield". The parent keeps a handle with the pid, a pidfd (Linux
 * >= 5.3) that becomes readable when the child exits, and the parent end of
 * an optional AF_UNIX stream socketpair (non-blocking, close-on-exec). Every
 * wait is "wait for an fd, with a deadline": inside a fiber it parks the
 * fiber on the loop (xtc__park with the fd), elsewhere it blocks the thread
 * in poll(2). Without pidfd the exit is found by polling waitpid(WNOHANG)
 * with a growing sleep (fiber park or nanosleep), never with SIGCHLD.
 *
 * Invariants: the child is reaped at most once (status cached); destroy
 * closes the fds and reaps only an already-exited child (it never kills);
 * everything the child needs between fork and exec (path, argv, envp) is
 * prepared in the parent, so the child only calls async-signal-safe
 * functions (fcntl, execve, _exit), which a fork from a multi-threaded
 * process (a Go program) requires.
 *
 * A failed execve is reported, not hidden in an exit status: a
 * close-on-exec pipe carries the child's errno back (end of file = the exec
 * happened), so a missing or non-executable program fails the spawn with
 * XTC_E_NOTFOUND or XTC_E_INVAL and the child is reaped at once.
 *
 * Control protocol: frames of a 4-byte little-endian length and that many
 * bytes; one reply frame per request frame. After a timeout or an I/O error
 * mid-frame the stream is out of sync: the handle refuses further calls
 * (XTC_E_IO).
 *
 * Rejected: SIGCHLD handlers (process-wide, collide with the host program
 * and with Go); posix_spawn (cannot run a forked callback and cannot clear
 * close-on-exec on exactly one fd portably); blocking the carrier in
 * waitpid.
 */
#include "rtcode_int.h" /* first: this file is runtime code */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "loop_int.h"
#include "xtc_osproc.h"

extern char **environ;

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif

struct xtc_osproc {
	pid_t pid;
	int pidfd;      /* -1: no pidfd, poll waitpid */
	int ctrl;       /* parent end, -1 if none */
	int reaped;
	int status;     /* raw waitpid status once reaped */
	int broken;     /* control stream out of sync */
	char name[32];
};

static int64_t now_ns(void)
{
	return xtc__now_ns(); /* base_int.h */
}

static int64_t deadline_of(int64_t timeout_ns)
{
	return timeout_ns < 0 ? INT64_MAX
	                      : xtc__deadline_after(now_ns(), timeout_ns);
}

/* Wait until fd is ready for events or the deadline passes.
 * 0 ready, XTC_E_AGAIN timeout, other negative on error. */
static int wait_fd(int fd, short events, int64_t deadline)
{
	for (;;) {
		int64_t left = deadline == INT64_MAX ? -1 : deadline - now_ns();
		if (deadline != INT64_MAX && left <= 0)
			left = 0;
		if (xtc__in_fiber() && xtc__gocb_depth == 0) {
			uint32_t rev = 0;
			uint32_t want = (events & POLLIN) ? XTC_IO_READABLE :
			                                    XTC_IO_WRITABLE;
			int rc = xtc__park(left, fd, want, &rev);
			if (rc == XTC_OK && rev != 0)
				return XTC_OK;
			if (rc == XTC_E_AGAIN)
				return XTC_E_AGAIN;
			if (rc != XTC_OK)
				return rc;
			continue; /* spurious wake */
		}
		struct pollfd pfd = { .fd = fd, .events = events };
		int ms = left < 0 ? -1 : (int)((left + 999999) / 1000000);
		int n = poll(&pfd, 1, ms);
		if (n > 0)
			return XTC_OK;
		if (n == 0 && deadline != INT64_MAX && now_ns() >= deadline)
			return XTC_E_AGAIN;
		if (n < 0 && errno != EINTR)
			return XTC_E_INTERNAL;
	}
}

/* Sleep a little (fallback without pidfd). */
static void nap(int64_t ns)
{
	if (xtc__in_fiber() && xtc__gocb_depth == 0) {
		(void)xtc__park(ns, -1, 0, NULL);
		return;
	}
	struct timespec ts = { .tv_sec = ns / 1000000000, .tv_nsec = ns % 1000000000 };
	nanosleep(&ts, NULL);
}

/* Resolve argv[0] against PATH in the parent (execvp is not
 * async-signal-safe). Returns a malloc'd path or NULL. */
static char *resolve(const char *file)
{
	if (strchr(file, '/'))
		return strdup(file);
	const char *path = getenv("PATH");
	if (path == NULL)
		path = "/usr/local/bin:/usr/bin:/bin";
	size_t fl = strlen(file);
	while (*path) {
		const char *end = strchr(path, ':');
		size_t dl = end ? (size_t)(end - path) : strlen(path);
		char *cand = malloc(dl + fl + 2);
		if (cand == NULL)
			return NULL;
		memcpy(cand, dl ? path : ".", dl ? dl : 1);
		size_t off = dl ? dl : 1;
		cand[off] = '/';
		memcpy(cand + off + 1, file, fl + 1);
		if (access(cand, X_OK) == 0)
			return cand;
		free(cand);
		if (!end)
			break;
		path = end + 1;
	}
	return NULL;
}

static char **env_with_ctrl(int fd, char *buf, size_t buflen)
{
	size_t n = 0;
	while (environ && environ[n])
		n++;
	char **env = malloc((n + 2) * sizeof *env);
	if (env == NULL)
		return NULL;
	size_t k = 0;
	for (size_t i = 0; i < n; i++)
		if (strncmp(environ[i], "XTC_CTRL_FD=", 12) != 0)
			env[k++] = environ[i];
	if (fd >= 0) {
		snprintf(buf, buflen, "XTC_CTRL_FD=%d", fd);
		env[k++] = buf;
	}
	env[k] = NULL;
	return env;
}

static pthread_mutex_t exec_pipe_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t fork_once = PTHREAD_ONCE_INIT;

/* A fork by another thread while a spawn holds the lock: the child's copy
 * would stay locked forever (its holder does not exist there). */
static void fork_child(void)
{
	pthread_mutex_init(&exec_pipe_lock, NULL);
}

static void fork_register(void)
{
	(void)pthread_atfork(NULL, NULL, fork_child);
}

/* The exec-status pipe (close-on-exec): end of file means execve
 * succeeded; otherwise the child wrote execve's errno and exits 127, and is
 * reaped here so a failed spawn leaves no zombie. Closes both ends. */
static int exec_result(int ep[2], pid_t pid)
{
	int err = 0;
	ssize_t n;

	close(ep[1]);
	ep[1] = -1;
	pthread_mutex_unlock(&exec_pipe_lock);
	do
		n = read(ep[0], &err, sizeof err);
	while (n < 0 && errno == EINTR);
	close(ep[0]);
	ep[0] = -1;
	if (n == 0)
		return XTC_OK;
	while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
		;
	if (n != (ssize_t)sizeof err)
		return XTC_E_INTERNAL;
	switch (err) {
	case ENOENT:
	case ENOTDIR:
		return XTC_E_NOTFOUND;
	case EACCES:
	case EPERM:
	case ENOEXEC:
	case EISDIR:
	case ELOOP:
	case ENAMETOOLONG:
		return XTC_E_INVAL;
	case E2BIG:
		return XTC_E_RANGE;
	case ENOMEM:
		return XTC_E_NOMEM;
	default:
		return XTC_E_INTERNAL;
	}
}

static int spawn_impl(const xtc_osproc_opts_t *o, int isolate,
                      xtc_osproc_t **out)
{
	if (out == NULL)
		return XTC_E_INVAL;
	*out = NULL;
	if (o == NULL || (o->argv == NULL) == (o->fn == NULL) ||
	    (o->argv && o->argv[0] == NULL))
		return XTC_E_INVAL;
	xtc_osproc_t *p = calloc(1, sizeof *p);
	if (p == NULL)
		return XTC_E_NOMEM;
	p->pidfd = p->ctrl = -1;
	p->pid = -1;
	snprintf(p->name, sizeof p->name, "%s", o->name ? o->name : "");
	int sv[2] = { -1, -1 }, ep[2] = { -1, -1 };
	char *path = NULL, **env = NULL, envbuf[32];
	int rc = XTC_E_INTERNAL;
	if (o->ctrl_socket &&
	    socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
		goto fail;
	if (o->argv) {
		rc = XTC_E_NOMEM;
		path = resolve(o->argv[0]);
		env = env_with_ctrl(sv[1], envbuf, sizeof envbuf);
		if (env == NULL)
			goto fail;
		rc = XTC_E_NOTFOUND;
		if (path == NULL)
			goto fail;
		rc = XTC_E_INTERNAL;
		/* Held until the parent closed the write end: a concurrent xtc
		 * fork (a fn child never execs) must not inherit it, or the read
		 * below would wait for that child's exit. */
		pthread_once(&fork_once, fork_register);
		pthread_mutex_lock(&exec_pipe_lock);
		if (pipe2(ep, O_CLOEXEC) != 0) {
			pthread_mutex_unlock(&exec_pipe_lock);
			goto fail;
		}
	}
	pid_t parent = getpid();
	pid_t pid = fork();
	if (pid < 0) {
		if (ep[0] >= 0)
			pthread_mutex_unlock(&exec_pipe_lock);
		goto fail;
	}
	if (pid == 0) {
		/* child: async-signal-safe calls only */
		if (sv[0] >= 0)
			close(sv[0]);
		if (isolate) {
			setpgid(0, 0);
			prctl(PR_SET_PDEATHSIG, SIGKILL);
			if (getppid() != parent)
				_exit(127);
		}
		if (o->name && o->name[0])
			prctl(PR_SET_NAME, o->name);
		sigset_t none;
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		if (o->fn)
			_exit(o->fn(sv[1], o->arg) & 0xff);
		if (sv[1] >= 0)
			fcntl(sv[1], F_SETFD, 0); /* survives exec */
		execve(path, o->argv, env);
		int err = errno;
		while (write(ep[1], &err, sizeof err) < 0 && errno == EINTR)
			;
		_exit(127);
	}
	p->pid = pid;
	free(path);
	free(env);
	path = NULL;
	env = NULL;
	if (ep[0] >= 0) {
		rc = exec_result(ep, pid);
		if (rc != XTC_OK)
			goto fail;
	}
	if (sv[1] >= 0)
		close(sv[1]);
	if (sv[0] >= 0) {
		int fl = fcntl(sv[0], F_GETFL);
		fcntl(sv[0], F_SETFL, fl | O_NONBLOCK);
		p->ctrl = sv[0];
	}
	int pfd = (int)syscall(SYS_pidfd_open, pid, 0);
	if (pfd >= 0) {
		fcntl(pfd, F_SETFD, FD_CLOEXEC);
		p->pidfd = pfd;
	}
	*out = p;
	return XTC_OK;
fail:
	for (int i = 0; i < 2; i++)
		if (ep[i] >= 0)
			close(ep[i]);
	if (sv[0] >= 0)
		close(sv[0]);
	if (sv[1] >= 0)
		close(sv[1]);
	free(path);
	free(env);
	free(p);
	return rc;
}

int xtc_osproc_spawn(const xtc_osproc_opts_t *opts, xtc_osproc_t **out)
{
	return spawn_impl(opts, 0, out);
}

int xtc_osproc_isolated_spawn(const char *name, int (*fn)(int, void *),
                              void *arg, xtc_osproc_t **out)
{
	if (fn == NULL) {
		if (out)
			*out = NULL;
		return XTC_E_INVAL;
	}
	xtc_osproc_opts_t o = { .name = name, .fn = fn, .arg = arg,
	                        .ctrl_socket = 1 };
	return spawn_impl(&o, 1, out);
}

long xtc_osproc_pid(const xtc_osproc_t *p)
{
	return p ? (long)p->pid : -1;
}

int xtc_osproc_ctrl_fd(const xtc_osproc_t *p)
{
	return p ? p->ctrl : -1;
}

int xtc_osproc_signal(const xtc_osproc_t *p, int sig)
{
	if (p == NULL || sig < 0 || sig >= NSIG)
		return XTC_E_INVAL;
	if (p->reaped)
		return XTC_E_NOTFOUND;
	int r;
	if (p->pidfd >= 0)
		r = (int)syscall(SYS_pidfd_send_signal, p->pidfd, sig, NULL, 0);
	else
		r = kill(p->pid, sig);
	if (r == 0)
		return XTC_OK;
	return errno == ESRCH ? XTC_E_NOTFOUND : XTC_E_INTERNAL;
}

int xtc_osproc_try_wait(xtc_osproc_t *p, int *status)
{
	if (p == NULL)
		return XTC_E_INVAL;
	if (!p->reaped) {
		int st = 0;
		pid_t r = waitpid(p->pid, &st, WNOHANG);
		if (r == 0)
			return XTC_E_AGAIN;
		if (r < 0)
			return errno == EINTR ? XTC_E_AGAIN : XTC_E_INTERNAL;
		p->reaped = 1;
		p->status = st;
	}
	if (status)
		*status = p->status;
	return XTC_OK;
}

int xtc_osproc_wait(xtc_osproc_t *p, int *status, int64_t timeout_ns)
{
	if (p == NULL)
		return XTC_E_INVAL;
	int64_t deadline = deadline_of(timeout_ns);
	int64_t backoff = 100000;
	for (;;) {
		int rc = xtc_osproc_try_wait(p, status);
		if (rc != XTC_E_AGAIN)
			return rc;
		if (timeout_ns == 0 || now_ns() >= deadline)
			return XTC_E_AGAIN;
		if (p->pidfd >= 0) {
			rc = wait_fd(p->pidfd, POLLIN, deadline);
			if (rc != XTC_OK && rc != XTC_E_AGAIN)
				return rc;
			continue;
		}
		int64_t left = deadline - now_ns();
		nap(backoff < left ? backoff : left);
		if (backoff < 10000000)
			backoff *= 2;
	}
}

void xtc_osproc_destroy(xtc_osproc_t *p)
{
	if (p == NULL)
		return;
	if (!p->reaped)
		(void)xtc_osproc_try_wait(p, NULL);
	if (p->pidfd >= 0)
		close(p->pidfd);
	if (p->ctrl >= 0)
		close(p->ctrl);
	free(p);
}

/* ------------------------------------------------------------------ */
/* Control frames                                                       */
/* ------------------------------------------------------------------ */

/* Move len bytes; blocking fds block, non-blocking ones wait with the
 * deadline. 0, XTC_E_AGAIN (timeout), XTC_E_IO (EOF / error). */
static int io_full(int fd, void *buf, size_t len, int writing, int64_t deadline)
{
	char *b = buf;
	size_t done = 0;
	while (done < len) {
		ssize_t n = writing ? send(fd, b + done, len - done, MSG_NOSIGNAL) :
		                      read(fd, b + done, len - done);
		if (n > 0) {
			done += (size_t)n;
			continue;
		}
		if (n == 0 && !writing)
			return XTC_E_IO;
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			int rc = wait_fd(fd, writing ? POLLOUT : POLLIN, deadline);
			if (rc != XTC_OK)
				return rc;
			continue;
		}
		return XTC_E_IO;
	}
	return XTC_OK;
}

static void put_le32(unsigned char *b, uint32_t v)
{
	b[0] = (unsigned char)v;
	b[1] = (unsigned char)(v >> 8);
	b[2] = (unsigned char)(v >> 16);
	b[3] = (unsigned char)(v >> 24);
}

static uint32_t get_le32(const unsigned char *b)
{
	return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 |
	       (uint32_t)b[3] << 24;
}

static int send_frame(int fd, const void *data, size_t len, int64_t deadline)
{
	unsigned char hdr[4];
	put_le32(hdr, (uint32_t)len);
	int rc = io_full(fd, hdr, 4, 1, deadline);
	if (rc == XTC_OK && len)
		rc = io_full(fd, (void *)data, len, 1, deadline);
	return rc;
}

int xtc_osproc_call(xtc_osproc_t *p, const void *req, size_t req_len,
                    void **reply, size_t *reply_len, size_t max_reply,
                    int64_t timeout_ns)
{
	if (reply)
		*reply = NULL;
	if (reply_len)
		*reply_len = 0;
	if (p == NULL || reply == NULL || reply_len == NULL ||
	    (req == NULL && req_len > 0))
		return XTC_E_INVAL;
	if (p->ctrl < 0)
		return XTC_E_INVAL;
	if (req_len > XTC_OSPROC_MAX_FRAME)
		return XTC_E_RANGE;
	if (p->broken)
		return XTC_E_IO;
	int64_t deadline = deadline_of(timeout_ns);
	int rc = send_frame(p->ctrl, req, req_len, deadline);
	unsigned char hdr[4];
	if (rc == XTC_OK)
		rc = io_full(p->ctrl, hdr, 4, 0, deadline);
	if (rc != XTC_OK) {
		p->broken = 1;
		return rc;
	}
	size_t len = get_le32(hdr);
	if (len > max_reply || len > XTC_OSPROC_MAX_FRAME) {
		p->broken = 1;
		return XTC_E_RANGE;
	}
	char *buf = xtc_malloc(len + 1);
	if (buf == NULL) {
		p->broken = 1;
		return XTC_E_NOMEM;
	}
	rc = len ? io_full(p->ctrl, buf, len, 0, deadline) : XTC_OK;
	if (rc != XTC_OK) {
		xtc_free(buf);
		p->broken = 1;
		return rc;
	}
	buf[len] = 0;
	*reply = buf;
	*reply_len = len;
	return XTC_OK;
}

int xtc_osproc_serve(int ctrl_fd, xtc_osproc_handler_fn handler, void *arg)
{
	if (ctrl_fd < 0 || handler == NULL)
		return XTC_E_INVAL;
	for (;;) {
		unsigned char hdr[4];
		/* End of stream is a clean close only between frames: inside one
		 * (a torn header or body) the stream is broken, XTC_E_IO. */
		int rc = io_full(ctrl_fd, hdr, 1, 0, INT64_MAX);
		if (rc == XTC_E_IO)
			return XTC_OK; /* parent closed */
		if (rc == XTC_OK)
			rc = io_full(ctrl_fd, hdr + 1, 3, 0, INT64_MAX);
		if (rc != XTC_OK)
			return rc;
		size_t len = get_le32(hdr);
		if (len > XTC_OSPROC_MAX_FRAME)
			return XTC_E_RANGE;
		char *req = malloc(len + 1);
		if (req == NULL)
			return XTC_E_NOMEM;
		if (len && (rc = io_full(ctrl_fd, req, len, 0, INT64_MAX)) != XTC_OK) {
			free(req);
			return rc;
		}
		req[len] = 0;
		void *rep = NULL;
		size_t rep_len = 0;
		rc = handler(req, len, &rep, &rep_len, arg);
		free(req);
		if (rc != XTC_OK) {
			free(rep);
			return rc;
		}
		if (rep == NULL)
			rep_len = 0;
		rc = send_frame(ctrl_fd, rep, rep_len, INT64_MAX);
		free(rep);
		if (rc != XTC_OK)
			return rc == XTC_E_IO ? XTC_OK : rc;
	}
}
