//go:build cgo && xtc_ucontext

package xtc

// The preambles of this package include internal headers whose struct
// layouts depend on the context-switch substrate, so they see the same
// define as package csrc (csrc/csrc_ucontext.go).

// #cgo CFLAGS: -DXTC_CORO_UCONTEXT
import "C"
