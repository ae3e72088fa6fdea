//go:build cgo && (!linux || xtc_nouring)

package xtc

const uringLinkInfo = ", epoll only (xtc_nouring)"
