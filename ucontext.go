//go:build cgo && xtc_ucontext

package xtc

// -tags xtc_ucontext selects the portable ucontext context switch instead of
// the assembly one (the zz_csrc_arch_switch_* shims are excluded).

// #cgo CFLAGS: -DXTC_CORO_UCONTEXT
import "C"

const corLinkInfo = ", ucontext switch"
