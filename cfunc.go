package xtc

// A typed handle for the C functions a Go program hands to the executor,
// in both builds (the calls report ErrNoCgo without cgo).

import (
	"context"
	"unsafe"
)

// CFunc is a C function of the shape the executor calls,
//
//	intptr_t fn(void *arg)
//
// taken from your own cgo preamble. Go cannot check a C function's
// signature, so the check is the C compiler's: XTC_GO_FUNC(name)
// (xtc_exec.h) defines a getter name_cfunc() after asserting at compile
// time that name has exactly that shape (a wrong shape fails the build,
// naming the function), and CFuncOf wraps what it returns:
//
//	#include <xtc_exec.h>
//	static intptr_t kernel(void *arg) { ... }
//	XTC_GO_FUNC(kernel)
//
//	k := xtc.CFuncOf(C.kernel_cfunc())
//	v, err := e.CallInt(ctx, k, 1000)
//
// A CFunc is a plain value (copy it, keep it in a package variable); the
// zero CFunc is no function and every call with it fails with ErrInval.
// The untyped forms (Exec.Go, GoInt, GoAsync taking an unsafe.Pointer)
// stay for code that has no xtc headers in its preamble.
type CFunc struct {
	p unsafe.Pointer
}

// CFuncOf wraps the address of a C function of the shape
// `intptr_t fn(void *arg)`, as an XTC_GO_FUNC getter returns it. A nil p
// gives the zero CFunc.
func CFuncOf(p unsafe.Pointer) CFunc { return CFunc{p: p} }

// Valid reports whether f holds a function (false for the zero CFunc).
func (f CFunc) Valid() bool { return f.p != nil }

// Pointer returns the function's address, for the thin wrappers that call
// the same shape (Dispatch, Launch); nil for the zero CFunc.
func (f CFunc) Pointer() unsafe.Pointer { return f.p }

func (f CFunc) check(op string) error {
	if f.p == nil {
		return errReason(op, ErrInval, "zero CFunc (make one with xtc.CFuncOf)")
	}
	return nil
}

// Call is Go for a typed function: it runs f(arg) on the executor and
// returns its result, with Go's options, errors and C-memory rule. ErrInval
// for the zero CFunc.
func (e *Exec) Call(ctx context.Context, f CFunc, arg unsafe.Pointer, opts ...CallOption) (int64, error) {
	if err := f.check("xtc.Exec.Call"); err != nil {
		return 0, err
	}
	return e.Go(ctx, f.p, arg, opts...)
}

// CallInt is GoInt for a typed function: f receives n itself as its
// `void *`. ErrInval for the zero CFunc.
func (e *Exec) CallInt(ctx context.Context, f CFunc, n int64, opts ...CallOption) (int64, error) {
	if err := f.check("xtc.Exec.CallInt"); err != nil {
		return 0, err
	}
	return e.GoInt(ctx, f.p, n, opts...)
}

// CallAsync is GoAsync for a typed function. ErrInval for the zero CFunc.
func (e *Exec) CallAsync(f CFunc, arg unsafe.Pointer, opts ...CallOption) (*CallResult, error) {
	if err := f.check("xtc.Exec.CallAsync"); err != nil {
		return nil, err
	}
	return e.GoAsync(f.p, arg, opts...)
}
