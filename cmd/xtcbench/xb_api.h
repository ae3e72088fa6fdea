/*
 * xb_api.h - the public xtc API as xtcbench's drivers see it: the real
 * headers (the umbrella includes every module). Every module is always
 * built, so XB_HAVE_* are 1 and XB_LINKED is true; they remain only so the
 * drivers' conditionals compile until they are folded away.
 */
#ifndef XB_API_H
#define XB_API_H

#include "xtc.h"

#define XB_HAVE_EXEC 1
#define XB_HAVE_PREEMPT 1
#define XB_HAVE_ADAPTIVE 1
#define XB_LINKED(fn) 1

/* Error text of an xtc return code. */
static inline const char *xb_strerror(int rc)
{
	return xtc_strerror(rc);
}

#endif
