package xtc

//go:generate go run ./tools/generrors -in csrc/include/xtc_errors.h -out errors_gen.go

import "strconv"

// ErrNoCgo is returned by every call of a binary built with
// CGO_ENABLED=0 (the package compiles, the C runtime is absent);
// errors.Is(ErrNoCgo, ErrNosys) holds. A cgo build never returns it.
var ErrNoCgo error = &Error{Op: "cgo", Code: ErrNosys,
	Reason: "this binary was built with CGO_ENABLED=0; xtc's C runtime needs CGO_ENABLED=1 and a C compiler"}

// Errno is an xtc error code: 0 or a negative XTC_E_* value of the C
// library. The ErrXxx constants (errors_gen.go, generated from the same
// table as the C enum) are the sentinels to compare with errors.Is.
type Errno int32

// Error returns the text of xtc_strerror for the code.
func (e Errno) Error() string {
	if i := -int(e); i > 0 && i < len(errnoTexts) && errnoTexts[i] != "" {
		return "xtc: " + errnoTexts[i]
	}
	return "xtc: unknown error " + strconv.Itoa(int(e))
}

// Explain returns the longer reading of the code from the error table
// (xtc(3)), or "" when its text (xtc_strerror's, libxtc's) says it all.
// It is the Reason of an *Error whose call site gave none.
func (e Errno) Explain() string {
	if i := -int(e); i >= 0 && i < len(errnoExplains) {
		return errnoExplains[i]
	}
	return ""
}

// Name returns the C name of the code, e.g. "XTC_E_INVAL".
func (e Errno) Name() string {
	if i := -int(e); i >= 0 && i < len(errnoNames) && errnoNames[i] != "" {
		return errnoNames[i]
	}
	return "XTC_E_(" + strconv.Itoa(int(e)) + ")"
}

// Error is what the wrappers return: the operation that failed (the C
// function, or the Go method when the wrapper refused the call itself),
// its code and, when the wrapper knows it, the reason: which argument or
// which calling-context rule. errors.Is(err, xtc.ErrInval) compares the
// code, errors.Is(err, xtc.ErrClosed) tells a closed object; errors.As
// gives the fields.
type Error struct {
	Op     string // e.g. "xtc_loop_init", "xtc.Exec.Go"
	Code   Errno
	Reason string // e.g. "shares must be in 1..1000, got 0"; else Code.Explain()
}

// Error returns "xtc: op: code text (reason)".
func (e *Error) Error() string {
	s := "xtc: " + e.Op + ": " + e.Code.Error()[len("xtc: "):]
	if e.Reason != "" {
		s += " (" + e.Reason + ")"
	}
	return s
}

// Unwrap returns the code, so errors.Is matches the ErrXxx sentinels.
func (e *Error) Unwrap() error { return e.Code }

// Is makes errors.Is(err, ErrClosed) true for a use of a closed object.
func (e *Error) Is(target error) bool { return target == ErrClosed && e.Reason == reasonClosed }

// ErrClosed matches (errors.Is) every use of a nil, closed or finalised
// handle: an Exec after (or during) Close or Shutdown, a Batch after
// Close, Shutdown or BatchClose (new requests) and after it was destroyed
// (every method), a Loop after Fini, a Mailbox, Fn or Quantum after
// Close. Such errors carry code ErrInval too, the C library's code for a
// finalised handle, and never match ErrAgain: retrying cannot succeed.
var ErrClosed error = closedSentinel{}

type closedSentinel struct{}

func (closedSentinel) Error() string { return "xtc: use of a closed handle" }

const reasonClosed = "closed, finalised or nil"

func errReason(op string, code Errno, reason string) error {
	return &Error{Op: op, Code: code, Reason: reason}
}

// mkerr converts a C return code into a Go error (nil for XTC_OK); its
// Reason is the code's longer reading (Errno.Explain).
func mkerr(op string, rc int) error {
	if rc == 0 {
		return nil
	}
	return &Error{Op: op, Code: Errno(rc), Reason: Errno(rc).Explain()}
}
