//go:build cgo

package csrc

// cgo compiles every csrc/*.c of this directory, and the one-line
// zz_arch_*.S shims pull in csrc/arch/ for the build's GOARCH. meson
// compiles the same files (meson.build's core_src; build_test.go keeps the
// two sets equal).
//
// XTC_GO_BUILD tells the C code it lives inside a Go process (the thread
// rules of csrc/HACKING.md: Go callbacks only on the carrier stack, no fiber
// switch while one is active).

/*
#cgo CFLAGS: -I${SRCDIR}/include -I${SRCDIR} -D_GNU_SOURCE -std=gnu11 -DXTC_GO_BUILD -DXTC_SCHED_POLICY
#cgo CFLAGS: -fvisibility=hidden -Wno-unused-parameter -fno-plt
#cgo LDFLAGS: -lpthread -ldl -lm -Wl,-z,now
*/
import "C"

import "embed"

// headers exists for its side effect: go:embed makes every file under
// include/ and arch/ an input of this package, so editing a public header
// or an assembly file (reached by #include, which Go's build cache does
// not follow outside the package directory) invalidates the cached build
// (golang/go#24355). The *_int.h files of this directory are package
// files already.
//
//go:embed include arch
var headers embed.FS

// LinkInfo says how the C core was linked into this binary.
const LinkInfo = "bundled (package csrc)" + uringLinkInfo + coroLinkInfo
