//go:build cgo && !xtc_ucontext

package csrc

const coroLinkInfo = ", assembly switch"
