/*
 * xtc_errors.h - the one table of error codes.
 *
 * Every consumer is generated from XTC_ERRORS: the C enum (xtc.h), the
 * English text of xtc_strerror (errors.c) and the Go sentinels
 * (errors_gen.go, produced by `go generate` from this file; a Go test fails
 * when they drift). Codes are only ever appended, never renumbered: they are
 * an ABI promise shared with libxtc.
 *
 * X(NAME, value, "text")
 */
#ifndef XTC_ERRORS_H
#define XTC_ERRORS_H

#define XTC_ERRORS(X)                                                        \
	X(OK,        0,  "success")                                            \
	X(INVAL,    -1,  "invalid argument or calling context")                \
	X(NOMEM,    -2,  "out of memory")                                      \
	X(NOSYS,    -3,  "not supported on this platform or build")            \
	X(RANGE,    -4,  "value out of range")                                 \
	X(AGAIN,    -5,  "try again: timeout, full queue or budget exhausted") \
	X(INTERNAL, -6,  "internal error")                                     \
	X(RESOURCE, -7,  "resource cap reached")                               \
	X(DEADLK,   -8,  "deadlock: nothing can make progress")                \
	X(VERSION,  -9,  "version mismatch")                                   \
	X(ABORTED,  -10, "aborted or cancelled")                               \
	X(NOTFOUND, -11, "not found")                                          \
	X(IO,       -12, "I/O error")

#endif
