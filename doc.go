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
// Passing C functions: a C function of your own preamble is passed as a
// [CFunc]. XTC_GO_FUNC(name) (xtc_exec.h) defines a getter name_cfunc()
// after the C compiler checked that name has the executor's shape,
// intptr_t name(void *arg) (another shape fails the build, naming it):
//
//	#include <xtc_exec.h>
//	static intptr_t kernel(void *arg) { ... }
//	XTC_GO_FUNC(kernel)
//
//	k := xtc.CFuncOf(C.kernel_cfunc())
//	v, err := e.CallInt(ctx, k, 1000)
//
// Without xtc's headers in the preamble, pass an unsafe.Pointer to
// [Exec.Go] / [Exec.GoInt]: unsafe.Pointer(C.name) works for a non-static
// function; a static one (the usual style of a preamble) does not link
// that way, so return its address from a getter of your own,
// static void *kernel_fn(void) { return (void *)kernel; }, and call
// e.GoInt(ctx, C.kernel_fn(), 1000). Neither checks the signature.
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
// # Designing a service
//
// The service layer is one executor built with its options, its classes,
// batch groups and mailboxes created before Start, and one Shutdown:
//
//	e, err := xtc.NewExec(1, xtc.WithPreempt(200*time.Microsecond))
//	inter, _ := e.NewClass(300, time.Millisecond) // executor-wide class
//	b, _ := e.NewBatch(xtc.BatchOpts{Capacity: 256, MaxActive: 16,
//		ResourceCapacity: 64, Class: inter, Step: step})
//	e.Start()
//	...
//	v, err := e.GoInt(ctx, C.kernel_fn(), n, xtc.WithClass(inter)) // a handler
//	out, err := b.Do(ctx, req, xtc.WithCharge(4))                 // another
//	...
//	srv.Shutdown(ctx) // stop taking requests
//	e.Shutdown(ctx)   // groups drain, calls finish; the rest is cancelled
//
// examples/go/service is a complete net/http service in this shape, with
// its test (deadlines, batching, C memory, shutdown with work in flight).
//
// What to send to the executor. A call through the executor costs a
// cross-thread hand-off and a wake-up each way: on a 2-vCPU virtual
// machine an Exec.GoInt of an empty C function measured 16-20 µs at the
// median with calls 100 µs apart and 30-55 µs on a loaded machine (the
// front door's benchmark, frontdoor_bench_test.go), against about 50 ns
// for a plain cgo call. Send the executor what needs what a cgo call
// cannot give: work long enough that a deadline must stop it, that must
// not delay short requests (preemption), or that must get a share of the
// CPU (classes); call a few-µs kernel with no such need directly.
//
// Carriers and GOMAXPROCS. Carriers are C threads that Go's scheduler
// does not count: a busy carrier takes a CPU from the goroutines. Give the
// executor the CPUs its C work should have (NewExec(n)); when both C work
// and Go handlers saturate the machine, lower GOMAXPROCS to the CPUs left.
//
// Preemption. WithPreempt(slice) lets the executor cut C code that never
// yields at its slice end, where the code is declared preemptible (see
// the preemption functions of this package and xtc_preempt(3)); one
// preemption costs a signal and two switches, measured at 45-57 µs of the
// carrier's time on a 2-vCPU virtual machine (a few µs on bare metal), so
// a slice much shorter than 100 µs spends the carrier on preemptions.
// Kernels with their own preemption points can use
// WithClockCheckedPreempt instead (no signal). A deadline (ctx) kills the
// call at its next slice.
//
// C memory, one rule: when Exec.Go, Exec.GoInt, Batch.Do or Launch
// return, the C side of that call is gone (no C code of it runs any more
// and nothing of it touches the argument), also when they return a
// context's error: a deadline kills the kernel first, which costs at most
// a slice with WithPreempt (until the kernel's next yield point without
// it). So an argument in C memory is freed right after the call returns,
// exactly once. For GoAsync, the same point is CallResult.Done. A killed
// kernel runs no cleanup of its own: whatever it allocated itself is
// leaked unless it registered cleanup (xtc_proc_at_exit in C).
//
// Errors by object (all *Error, matched with errors.Is):
//
//	object    closed      full                   deadline / cancelled
//	Exec      ErrClosed   -                      ctx.Err(); ErrAborted when killed by Close
//	Batch     ErrClosed   ErrAgain (Submit;      ctx.Err() (Do); ErrAborted for a
//	                      Do waits for room)     cancelled member (Shutdown, Cancel)
//	Mailbox   ErrClosed   ErrAgain (Send)        ctx.Err() (Recv)
//	Fn        ErrClosed   -                      ErrAgain: the slice ended first
//	Loop      ErrClosed   ErrAgain (mailboxes)   -
//	Quantum   ErrClosed   -                      -
//
// ErrClosed errors carry code ErrInval as well (the C library's code for
// a finalised handle); they never match ErrAgain, so a closed object does
// not invite a retry.
//
// Process-wide state. The preemption signal (a real-time signal,
// PreemptSignal; never pass it to signal.Ignore), its handler and the
// involuntary switch (held on while an executor built WithPreempt runs),
// a monitor thread for preemption, one goroutine per executor serving its
// calls' completions and one for the package's other completions, all
// parked in the netpoller while idle; the blocking pool's threads when
// used. Shutdown and Close give back what the executor held.
//
// # Build
//
// The C core is its own cgo package, github.com/xtc-go/xtc/csrc, which
// this package imports (cgo compiles every csrc/*.c; csrc/include and
// csrc/arch are embedded there so that editing them invalidates Go's build
// cache). Build tags:
//
//	xtc_nouring   epoll only, no liburing needed (default: io_uring via
//	              pkg-config liburing, linked statically, so the binary
//	              needs no liburing.so; epoll fallback at run time)
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
