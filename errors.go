package xtc

//go:generate go run ./tools/generrors -in csrc/include/xtc_errors.h -out errors_gen.go

import "strconv"

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

// Name returns the C name of the code, e.g. "XTC_E_INVAL".
func (e Errno) Name() string {
	if i := -int(e); i >= 0 && i < len(errnoNames) && errnoNames[i] != "" {
		return errnoNames[i]
	}
	return "XTC_E_(" + strconv.Itoa(int(e)) + ")"
}

// Error is what the wrappers return: the C function that failed and its
// code. errors.Is(err, xtc.ErrAgain) compares the code; errors.As gives the
// operation.
type Error struct {
	Op   string // C function, e.g. "xtc_loop_init"
	Code Errno
}

func (e *Error) Error() string { return "xtc: " + e.Op + ": " + e.Code.Error()[len("xtc: "):] }

// Unwrap returns the code, so errors.Is matches the ErrXxx sentinels.
func (e *Error) Unwrap() error { return e.Code }

// mkerr converts a C return code into a Go error (nil for XTC_OK).
func mkerr(op string, rc int) error {
	if rc == 0 {
		return nil
	}
	return &Error{Op: op, Code: Errno(rc)}
}
