/*
 * xtc_osproc.h - the OS-process tier: run untrusted or never-yielding work
 * in a child process the kernel preempts, with exit notification through a
 * pidfd and an optional framed request/reply control socket.
 *
 * See xtc_osproc(3). Waiting parks the calling fiber (the loop keeps
 * running); off a fiber it blocks the calling thread. No SIGCHLD handler is
 * ever installed.
 */
#ifndef XTC_OSPROC_H
#define XTC_OSPROC_H

#include <stddef.h>
#include <stdint.h>

#include "xtc.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct xtc_osproc xtc_osproc_t;

typedef struct xtc_osproc_opts {
	const char  *name;
	char *const *argv;                   /* exactly one of argv / fn */
	int        (*fn)(int ctrl_fd, void *arg); /* forked callback; exit status
	                                      * = return value & 0xff */
	void        *arg;
	int          ctrl_socket;            /* 1: AF_UNIX SOCK_STREAM pair */
} xtc_osproc_opts_t;

/* A program that does not exist: XTC_E_NOTFOUND; one that cannot be
 * executed: XTC_E_INVAL (the exec failure is the spawn's result). */
XTC_API int  xtc_osproc_spawn(const xtc_osproc_opts_t *opts,
                              xtc_osproc_t **out);
XTC_API long xtc_osproc_pid(const xtc_osproc_t *p);      /* -1 if none */
XTC_API int  xtc_osproc_ctrl_fd(const xtc_osproc_t *p);  /* -1 if none */
XTC_API int  xtc_osproc_signal(const xtc_osproc_t *p, int sig);
XTC_API int  xtc_osproc_try_wait(xtc_osproc_t *p, int *status);
XTC_API int  xtc_osproc_wait(xtc_osproc_t *p, int *status,
                             int64_t timeout_ns);
XTC_API void xtc_osproc_destroy(xtc_osproc_t *p);
XTC_API int  xtc_osproc_isolated_spawn(const char *name,
                                       int (*fn)(int ctrl_fd, void *arg),
                                       void *arg, xtc_osproc_t **out);

/* Framed request/reply over the control socket (4-byte little-endian
 * length, then the bytes). The reply is allocated with xtc_malloc and freed
 * by the caller with xtc_free or free(). */
#define XTC_OSPROC_MAX_FRAME (64u * 1024u * 1024u)
XTC_API int xtc_osproc_call(xtc_osproc_t *p, const void *req, size_t req_len,
                            void **reply, size_t *reply_len, size_t max_reply,
                            int64_t timeout_ns);
typedef int (*xtc_osproc_handler_fn)(const void *req, size_t req_len,
                                     void **reply, size_t *reply_len,
                                     void *arg);
/* Child side: answer requests until the parent closes (XTC_OK). */
XTC_API int xtc_osproc_serve(int ctrl_fd, xtc_osproc_handler_fn handler,
                             void *arg);

#ifdef __cplusplus
}
#endif

#endif
