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
// return, so they must be short. Every Go callback the runtime makes (task
// bodies, timers, Submit functions, stall, lane-policy and batch
// callbacks) goes through one recovering trampoline: a panic inside one
// stops the loop or executor and is re-raised by Run, Wait or Close in the
// goroutine that drives it; it never unwinds through C.
//
// Procs ([ProcSpawn]) run C code on fiber stacks: a Go program supplies a
// `void (*)(void *)` from its own cgo preamble (see examples/go/proc) or
// from a C library. Go code never runs on a proc, so the functions that act
// for "the calling proc" (Monitor, Link, ...) return ErrInval from Go.
//
// # Calls with a class, a result and a deadline
//
// [Exec.Go] runs a C function `intptr_t (*)(void *)` as a proc of an
// executor and returns its result to the calling goroutine; with a
// [Class] (Exec.NewClass, executor-wide shares and latency bound), and a
// context whose end kills the proc at its next slice. [NewExec] makes an
// executor that serves until [Exec.Close] or [Exec.Shutdown]; later calls
// return errors matching [ErrClosed]. See examples/go/service for a
// complete net/http service.
//
// Passing C functions: a C function of your own preamble is passed as an
// unsafe.Pointer. For a non-static function, unsafe.Pointer(C.name) works;
// for a static one (the usual style of a preamble) it does not link, so
// return its address from a getter:
//
//	static intptr_t kernel(void *arg) { ... }
//	static void *kernel_fn(void) { return (void *)kernel; }
//
//	v, err := e.GoInt(ctx, C.kernel_fn(), 1000)
//
// Declaring kernels preemptible: involuntary preemption interrupts only C
// code declared safe to cut (see [PreemptPolicy]), so a C library is never
// interrupted in the middle of a call. Mark the kernels of your preamble
// with XTC_PREEMPTIBLE (xtc_preempt.h), or, without xtc's headers:
//
//	__attribute__((section("xtc_ptext"), noinline))
//	static intptr_t kernel(void *arg) { ... }
//
// [PreemptPreemptible] checks a kernel; [PreemptAllowObject] allows a whole
// library that is safe to cut anywhere.
//
// To include the xtc headers from C code in another module, see package
// github.com/xtc-go/xtc/csrc/include (a CGO_CFLAGS recipe).
//
// # Build
//
// The C core is its own cgo package, github.com/xtc-go/xtc/csrc, which
// this package imports (cgo compiles every csrc/*.c; csrc/include and
// csrc/arch are embedded there so that editing them invalidates Go's build
// cache). Build tags:
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
