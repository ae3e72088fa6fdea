/*
 * gobridge.c - out-of-line forms of the internals the Go package's
 * preambles use (gobridge_int.h says why they are out of line).
 *
 * Invariant: each function is exactly the inline it wraps; nothing here
 * has behaviour of its own, so the C tests of loop_int.h cover it.
 */
#include "rtcode_int.h" /* first: this file is runtime code (preempt_codemap.c) */
#include "gobridge_int.h"
#include "loop_int.h"

void xtc__gobridge_cb_enter(void) { xtc__gocb_enter(); }
void xtc__gobridge_cb_leave(void) { xtc__gocb_leave(); }
xtc_loop_t *xtc__gobridge_loop_current(void) { return xtc__loop_current(); }
xtc_exec_t *xtc__gobridge_loop_exec(const xtc_loop_t *loop)
{
	return loop != NULL ? xtc__loop_exec(loop) : NULL;
}
