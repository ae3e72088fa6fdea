//go:build cgo && xtc_ucontext

package csrc

// -tags xtc_ucontext selects the portable ucontext context switch instead of
// the assembly one (the assembly is still compiled, as in meson).

// #cgo CFLAGS: -DXTC_CORO_UCONTEXT
import "C"

const coroLinkInfo = ", ucontext switch"
