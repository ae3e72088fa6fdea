//go:build cgo

package xtc

// The C core is compiled from csrc/ by the zz_csrc_* shims (see
// internal/shimgen); these flags apply to every C file of the package.
// XTC_GO_BUILD tells the C code it lives inside a Go process (the
// thread rules of the README: Go callbacks only on the carrier stack, no fiber
// switch while one is active).

/*
#cgo CFLAGS: -I${SRCDIR}/csrc/include -I${SRCDIR}/csrc -D_GNU_SOURCE -std=gnu11 -DXTC_GO_BUILD -DXTC_SCHED_POLICY
#cgo CFLAGS: -fvisibility=hidden -Wno-unused-parameter
#cgo LDFLAGS: -lpthread -ldl -lm
*/
import "C"

// LinkInfo says how the C core was linked into this binary.
const LinkInfo = "bundled (cgo shims over csrc/)" + uringLinkInfo + corLinkInfo
