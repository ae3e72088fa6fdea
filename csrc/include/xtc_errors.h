/*
 * xtc_errors.h - the one table of error codes.
 *
 * Every consumer is generated from XTC_ERRORS: the C enum (xtc.h), the
 * English text of xtc_strerror (base.c) and the Go sentinels (errors_gen.go,
 * produced by `go generate` from this file; a Go test fails when they
 * drift). Codes are only ever appended, never renumbered: they are an ABI
 * promise shared with libxtc.
 *
 * X(NAME, value, "text"): the text is what xtc_strerror returns, libxtc's
 * own where libxtc defines one (programs and tests compare them).
 */
#ifndef XTC_ERRORS_H
#define XTC_ERRORS_H

#define XTC_ERRORS(X)                                                        \
	X(OK,        0,  "ok")                                                 \
	X(INVAL,    -1,  "invalid argument")                                   \
	X(NOMEM,    -2,  "out of memory")                                      \
	X(NOSYS,    -3,  "not implemented on this platform")                   \
	X(RANGE,    -4,  "numeric out of range")                               \
	X(AGAIN,    -5,  "resource temporarily unavailable")                   \
	X(INTERNAL, -6,  "internal invariant violation")                       \
	X(RESOURCE, -7,  "resource cap reached")                               \
	X(DEADLK,   -8,  "deadlock: nothing can make progress")                \
	X(VERSION,  -9,  "version mismatch")                                   \
	X(ABORTED,  -10, "aborted or cancelled")                               \
	X(NOTFOUND, -11, "not found")                                          \
	X(IO,       -12, "I/O error")

/* The longer reading of the codes whose text does not say it all, for
 * xtc(3) and Go (errors_gen.go: Errno.Explain, the Reason of an *Error
 * whose call site gave none). E(NAME, "explanation") */
#define XTC_ERRORS_EXPLAIN(E)                                                \
	E(OK,       "success")                                                 \
	E(INVAL,    "invalid argument or calling context")                     \
	E(NOSYS,    "not supported on this platform or build")                 \
	E(AGAIN,    "try again: timeout, full queue or budget exhausted")      \
	E(INTERNAL, "a runtime invariant failed or the platform failed unexpectedly")

#endif
