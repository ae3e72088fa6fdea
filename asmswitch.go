//go:build cgo && !xtc_ucontext

package xtc

const corLinkInfo = ", assembly switch"
