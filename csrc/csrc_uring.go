//go:build cgo && linux && !xtc_nouring

package csrc

// io_uring is on by default: liburing is found with pkg-config (Debian:
// liburing-dev) and linked statically into the Go binary, so the binary
// needs no liburing.so at run time (a distroless or scratch image works).
// Build with -tags xtc_nouring for an epoll-only core that needs no
// liburing at all. Either way the C core falls back to epoll at run time
// when the kernel refuses io_uring.
//
// The pkg-config lookup goes through a .pc file of this package that
// requires liburing: when liburing.pc is missing, pkg-config's error names
// that file, whose name is the fix (install liburing-dev, or build with
// -tags xtc_nouring); cgo lets a package add nothing else to that error.
//
// Static liburing: pkg-config gives -I/-L and -luring; the -luring before
// it, in -Bstatic mode, resolves every io_uring symbol from liburing.a, and
// --as-needed then drops the later shared -luring (Debian's gcc passes
// --as-needed by default already; the flag makes other toolchains agree).
// Cross builds: point PKG_CONFIG_LIBDIR (or PKG_CONFIG) at the target's
// .pc files, e.g. PKG_CONFIG_LIBDIR=/usr/lib/aarch64-linux-gnu/pkgconfig
// with liburing-dev:arm64 installed, or use -tags xtc_nouring; the host's
// liburing cannot link into another architecture.

/*
#cgo pkg-config: ${SRCDIR}/pkgconfig/install-liburing-dev-or-build-with-tags-xtc_nouring.pc
#cgo LDFLAGS: -Wl,--push-state,-Bstatic -luring -Wl,--pop-state -Wl,--as-needed
#cgo CFLAGS: -DXTC_HAVE_URING
*/
import "C"

const uringLinkInfo = ", io_uring (liburing linked statically)"
