/*
 * xtc_io.h - the I/O backend: readiness bits and the backend's name
 * (libxtc's header of the same name).
 *
 * The bits are the interest of xtc_task_park_on_fd and xtc_proc_wait_fd
 * and what they report. The backend is chosen at run time, not at
 * configure time as in libxtc: io_uring where the kernel allows it, else
 * epoll (xtc_loop(3), xtc_io(3)).
 */
/* xtc.h first and outside the guard (see xtc_loop.h). */
#include "xtc.h"

#ifndef XTC_IO_H
#define XTC_IO_H

#ifdef __cplusplus
extern "C" {
#endif

#define XTC_IO_READABLE 0x01u
#define XTC_IO_WRITABLE 0x02u
#define XTC_IO_HUP      0x04u
#define XTC_IO_ERR      0x08u
#define XTC_IO_WAKEUP   0x10u /* the loop's own wakeup (never reported) */

/* "uring" or "epoll": the backend this process actually uses (io_uring is
 * preferred; epoll is chosen at run time when io_uring is refused). */
XTC_API const char *xtc_io_backend_name(void);

#ifdef __cplusplus
}
#endif

#endif
