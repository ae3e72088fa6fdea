//go:build cgo

package xtc

// The C runtime is package csrc (csrc/), which cgo compiles on its own; this
// package only wraps it. The flags below apply to the C in this package's
// preambles, which include the public headers and one internal header,
// csrc/gobridge_int.h: out-of-line functions, no struct layout of the core,
// so no substrate define (xtc_ucontext) has to be mirrored here.

/*
#cgo CFLAGS: -I${SRCDIR}/csrc/include -I${SRCDIR}/csrc -D_GNU_SOURCE -std=gnu11 -DXTC_GO_BUILD -DXTC_SCHED_POLICY
#cgo CFLAGS: -fvisibility=hidden -Wno-unused-parameter
#cgo LDFLAGS: -lpthread -ldl -lm
*/
import "C"

import "github.com/xtc-go/xtc/csrc"

// LinkInfo says how the C core was linked into this binary.
const LinkInfo = csrc.LinkInfo
