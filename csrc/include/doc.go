// Package include holds the public C headers of xtc (xtc.h and the
// xtc_*.h it includes), so that C code in a module that depends on
// github.com/xtc-go/xtc can call the runtime (xtc_yield_if_due,
// xtc_preempt_disable, xtc_dispatch_cancelled, ...) without copying
// prototypes. Nothing is to be imported from it: it is a Go package only so
// that the go command can locate its directory in the module cache.
//
// The recipe, from inside the consuming module (after `go get
// github.com/xtc-go/xtc`):
//
//	export CGO_CFLAGS="$(go env CGO_CFLAGS) -I$(go list -f '{{.Dir}}' github.com/xtc-go/xtc/csrc/include)"
//	go build ./...
//
// and in the cgo preamble:
//
//	#include <xtc.h>
//
// The symbols come from package xtc itself, which the consuming package
// imports anyway (cgo links its C objects into the same binary). A test in
// the xtc repository (TestConsumerModuleUsesHeaders) builds such a module
// from a temporary directory with a replace directive.
package include
