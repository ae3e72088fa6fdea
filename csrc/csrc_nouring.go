//go:build cgo && (!linux || xtc_nouring)

package csrc

const uringLinkInfo = ", epoll only (xtc_nouring)"
