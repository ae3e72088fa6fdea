/*
 * base_int.h - internal interface of the base layer (base.c): what the
 * layers above register with it. Nothing here depends on another layer.
 *
 * Recycler: one allocator of a higher layer (proc_mailbox.c's message
 * cache) takes back, through xtc_free, the malloc blocks of its size that
 * users release, instead of the C library. Every buffer the API hands out
 * stays an ordinary malloc block, so free() works on it too (libxtc
 * programs call it). The registration replaces a direct call from base.c
 * into proc_mailbox.c, which made the bottom layer depend on the proc
 * layer (tools/layers.txt).
 *
 * Primitives every layer uses, written once: the initial-exec TLS model
 * (the signal handler and the switch path read TLS; no lazy allocation),
 * the spin-wait CPU hint, the raw monotonic clock and the futex calls.
 */
#ifndef XTC_BASE_INT_H
#define XTC_BASE_INT_H

#include <linux/futex.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define XTC__TLS_IE __attribute__((tls_model("initial-exec")))
#define XTC__LIKELY(x)   __builtin_expect(!!(x), 1)
#define XTC__UNLIKELY(x) __builtin_expect(!!(x), 0)

#if defined(__x86_64__) || defined(__i386__)
#define XTC__CPU_RELAX() __builtin_ia32_pause()
#elif defined(__aarch64__)
#define XTC__CPU_RELAX() __asm__ __volatile__("yield" ::: "memory")
#else
#define XTC__CPU_RELAX() ((void)0)
#endif

/* The raw monotonic clock in ns: the vDSO read, async-signal-safe and
 * never the simulator's clock (xtc_clock_mono follows a hook; preemption,
 * the monitor, deadlines of OS waits and cost figures must not). */
static inline int64_t xtc__now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* A deadline from a time and a duration: now + d, saturated at
 * INT64_MAX (and INT64_MIN), never a signed overflow. Every "now + d" of
 * the runtime goes through it: a caller's INT64_MAX timeout ("as good as
 * forever") once wrapped to a deadline in the past (xtc_launch killed its
 * child at once, xtc_exec_submit_wait refused a full ring at once, a
 * preemption interval of INT64_MAX re-armed a timer at a negative time
 * forever). Whether a negative d means "forever" is the caller's rule:
 * this helper only adds. (The Go wrappers do no deadline arithmetic of
 * their own: they pass time.Duration values down to these calls.) */
static inline int64_t xtc__deadline_after(int64_t now, int64_t d)
{
	int64_t r;
	if (__builtin_add_overflow(now, d, &r))
		return d > 0 ? INT64_MAX : INT64_MIN;
	return r;
}

/* Process-private futex on a 32-bit word w (any 32-bit atomic: the
 * callers' words are uint32_t or int). wait: sleep while *w == val, for
 * at most rel (NULL: no bound); returns on a wake, a signal, a timeout or
 * at once when *w != val, so callers re-check their word in a loop.
 * wait_abs: the same up to the absolute CLOCK_MONOTONIC time abs_ns.
 * wake: wake up to n waiters. */
static inline void xtc__futex_wait(void *w, uint32_t val,
                                   const struct timespec *rel)
{
	syscall(SYS_futex, (uint32_t *)w, FUTEX_WAIT_PRIVATE, val, rel, NULL, 0);
}

static inline void xtc__futex_wait_abs(void *w, uint32_t val, int64_t abs_ns)
{
	struct timespec ts = { .tv_sec = abs_ns / 1000000000,
	                       .tv_nsec = abs_ns % 1000000000 };
	syscall(SYS_futex, (uint32_t *)w, FUTEX_WAIT_BITSET_PRIVATE, val, &ts,
	        NULL, FUTEX_BITSET_MATCH_ANY);
}

static inline void xtc__futex_wake(void *w, int n)
{
	syscall(SYS_futex, (uint32_t *)w, FUTEX_WAKE_PRIVATE, n, NULL, NULL, 0);
}

/*
 * The upcall table: every call a lower layer makes into a higher one, in
 * one place. A lower layer never names a function of a higher one; it
 * calls through an entry here, which the higher layer fills from a
 * constructor in its own file (before main: read without atomics). An
 * entry whose layer is not linked keeps its default, defined in base.c
 * (a no-op, or what the caller needs without that layer). The per-loop
 * half of the wiring, the scheduler's hooks, is loop->hooks (loop_int.h);
 * csrc/HACKING.md ("Upcalls") lists both with their callers.
 */
struct xtc_loop;
struct xtc_task;
typedef struct xtc__upcalls {
	/* base <- sim.c. The clock of the runtime's loops (timers, budgets,
	 * run times): xtc_clock_mono() returns clock() instead of the
	 * monotonic clock while the simulator runs (one predictable branch).
	 * NULL: the monotonic clock. Set only while no loop runs. */
	int64_t (*clock)(void);
	/* fiber <- loop.c: how the running fiber gives up the CPU when its
	 * slice ended (the loop's demoting yield; the preemption trampoline
	 * calls it). Default XTC_E_INVAL: no loop, no fiber task to yield. */
	int (*slice_yield)(void);
	/* fiber <- preempt_run.c: the outermost xtc__gocb_enter/leave (a Go
	 * callback on a carrier) withdraws / restores the run's deadline. */
	void (*gocb_pause)(void);
	void (*gocb_resume)(void);
	/* preempt, sched <- fn_quantum.c: the adaptive quantum controller.
	 * tick (preempt_monitor.c, every wake): run it when its period came;
	 * next (preempt_monitor.c): when that is (INT64_MAX: none attached);
	 * idle (preempt_run.c): a carrier's idle wall time; service (sched.c):
	 * one completed service (a task's runs since it parked); cost
	 * (preempt_run.c): what one involuntary preemption cost the carrier.
	 * Without fn_quantum.c linked no controller can be attached, and the
	 * defaults do what its functions do with none attached. */
	void (*quantum_tick)(int64_t now);
	int64_t (*quantum_next)(void);
	void (*quantum_idle)(int64_t idle_ns);
	void (*quantum_service)(int64_t svc_ns);
	void (*quantum_cost)(int64_t cost_ns);
	/* loop <- proc.c: a fiber resumed with a kill pending (it may
	 * longjmp to the proc's entry frame); a loop is finalised. */
	void (*proc_resumed)(void);
	void (*proc_loop_fini)(struct xtc_loop *loop);
	/* sched <- proc.c: the packed pid (loop_id << 48 | local_id << 32 |
	 * gen, 0: none) and name (NULL: none) of the proc whose task's
	 * t->proc is proc: the stall watchdog's report. */
	uint64_t (*proc_label)(const void *proc, const char **name);
	/* loop <- sched.c: a loop is finalised. */
	void (*sched_loop_fini)(struct xtc_loop *loop);
	/* loop <- exec_lane.c: a producer found the carrier running alone
	 * (XTC__SLEEP_RUN): make the run preemptible; a preempted migratable
	 * task may go to an idle peer instead of the demoted level (1: it
	 * did). */
	void (*exec_ring_run)(struct xtc_loop *loop);
	int (*exec_offer)(struct xtc_loop *loop, struct xtc_task *t);
} xtc__upcalls_t;
extern xtc__upcalls_t xtc__up;

/* Recycler of freed blocks (one, registered once; any thread): xtc_free
 * hands it every block whose malloc_usable_size is in [lo, hi] instead of
 * freeing it (mailbox.c's message cache). */
void xtc__alloc_recycler_set(size_t lo, size_t hi, void (*put)(void *));

/* The stack size to ask for a runtime thread whose own frames need
 * `frames` bytes: glibc carves a new thread's static TLS out of its stack,
 * so a program with large __thread data made small fixed stacks fail
 * (EINVAL). Adds the TLS segments of the objects loaded now and glibc's
 * surplus for ones loaded later, page-rounded. Callers still fall back to
 * the default attributes when the size is refused. */
size_t xtc__thread_stack_size(size_t frames);

/* A fault handler's hand-off to the disposition it replaced (`old`, saved
 * at install): call it if it was a handler, else restore the default and
 * return, so the faulting instruction runs again and the process dies of
 * the signal. Async-signal-safe. */
#include <signal.h>
void xtc__sig_chain(const struct sigaction *old, int sig, siginfo_t *si,
                    void *uctx);

#endif
