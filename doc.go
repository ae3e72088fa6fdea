// Package xtc drives the xtc C fiber runtime from Go: event loops, stackless
// tasks and timers whose bodies are Go functions, and processes (stackful
// fibers with a pid and a bounded mailbox) that run C functions.
//
// The wrappers keep the shape of the C API and its man pages (xtc(3),
// xtc_loop(3), xtc_proc(3), ...): xtc_loop_init becomes [LoopInit],
// xtc_proc_spawn becomes [ProcSpawn], durations are [time.Duration], and
// every error is an *[Error] wrapping one of the ErrXxx sentinels generated
// from csrc/include/xtc_errors.h, so
//
//	if errors.Is(err, xtc.ErrAgain) { ... } // mailbox full
//
// # What runs where
//
// A [Loop] belongs to one OS thread: LoopInit starts an owner goroutine
// locked to its own thread for the loop's whole life, and Run, Fini, timers
// and the yield budget execute there (one logical operation = one cgo
// call). [Loop.Run] blocks only the calling goroutine. Calls from other
// goroutines while the loop runs are posted to it; spawns, [Send],
// [Loop.Stop], [Loop.Wake] and wakers are thread-safe C calls.
//
// Task bodies ([TaskSpawn]) and timer callbacks ([TimerSet]) are Go
// functions passed to C as runtime/cgo handles. The loop calls them on its
// own thread stack, never on a fiber stack, with the Go-callback guard
// raised: no fiber switch or preemption happens on that thread until they
// return, so they must be short. A panic inside one stops the loop and is
// re-raised by Run.
//
// Procs ([ProcSpawn]) run C code on fiber stacks: a Go program supplies a
// `void (*)(void *)` from its own cgo preamble (see examples/go/proc) or
// from a C library. Go code never runs on a proc, so the functions that act
// for "the calling proc" (Monitor, Link, ...) return ErrInval from Go.
//
// # Build
//
// The C core is compiled by cgo from csrc/ through the one-line zz_csrc_*
// shims (regenerate with `make shims`; a test fails when they drift), and
// csrc/ is embedded so that editing C invalidates Go's build cache. Build
// tags:
//
//	xtc_nouring   epoll only, no liburing needed (default: io_uring via
//	              pkg-config liburing, epoll fallback at run time)
//	xtc_ucontext  the portable ucontext context switch instead of assembly
//
// With CGO_ENABLED=0 the package still compiles and every call returns
// ErrNoCgo (errors.Is(err, xtc.ErrNosys) holds).
//
// # Tests
//
// Test-only C proc bodies live in internal/ctest (cgo is not allowed in
// _test.go files). Go-runtime counterparts of the C microbenchmarks live in
// internal/gobench; `make bench` prints both side by side.
package xtc
