//go:build cgo && linux && !xtc_nouring

package csrc

// io_uring is on by default (liburing from pkg-config; Debian: liburing-dev).
// Build with -tags xtc_nouring for an epoll-only core that needs no
// liburing. Either way the C core falls back to epoll at run time when the
// kernel refuses io_uring.

/*
#cgo pkg-config: liburing
#cgo CFLAGS: -DXTC_HAVE_URING
*/
import "C"

const uringLinkInfo = ", io_uring"
