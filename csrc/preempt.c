/*
 * preempt.c - the preemption seam (xtc_preempt_arm & co), the signal
 * handler with its safety checks, no-preempt regions, deferral accounting,
 * and the map of code that must never be interrupted.
 *
 * Model (see preempt_int.h for the carrier/monitor protocol)
 *  - Arming registers the calling thread with the monitor (preempt_monitor.c): it
 *    gets a slot whose deadline says when its current work overruns. A
 *    plain armed thread ticks every interval; a loop carrier publishes a
 *    deadline per fiber run (xtc__preempt_run_begin/run_end) and nothing
 *    while idle, so idle carriers receive no signal. An executor run with
 *    nothing else to run on its loop is published alone (a soft slice
 *    end, a far hard deadline) until someone contends for the carrier:
 *    preempting it would only dispatch it again, at the price of a signal.
 *  - Who signals (preempt_monitor.c, "the trigger"): an executor carrier's own
 *    slice timer, a producer contending an overdue run, the carrier's
 *    tick net (a timer on its CPU clock that rides the kernel tick: the
 *    safety net of runs producers time, and of alone runs), or the
 *    monitor (plain armed threads, carriers without those timers). The
 *    handler tells the tick net (its si_value) from the slice timer, and
 *    a timer expiry (SI_TIMER) from a queued signal: an
 *    expiry carries no generation, so it is due only if the slot's current
 *    deadline passed, or for a slice end once it is in its window (the
 *    last half of the slice, XTC__SLICE_EARLY_DIV: the timer is left there
 *    for the short runs that start meanwhile, preempt_monitor.c); an early one
 *    re-arms the timer for the current run.
 *  - Batched publication (batch_keeps): runs that producers time back to
 *    back share one publication of deadline and generation while its
 *    slice end is at least half a slice away, and run_end leaves it:
 *    producers read the slot at every submission, and a carrier that
 *    rewrote it per run pulled its cache line back from their CPU every
 *    time (a carrier at saturation with a 50 us slice: requests of no
 *    work 59% dearer than without preemption before this and the tick
 *    net, 14.5% after; 5 us requests 16.7% and 8.5%). A run may then be
 *    cut up to half a slice early (the slice-end window allows that
 *    anyway); a signal between two runs is stale. Only carriers with a
 *    tick net batch: the monitor would take a deadline that outlives its
 *    run for an overrun.
 *  - Clock-checked carriers (xtc_exec_set_preempt_coop) take no part in
 *    any of that: no slot, no timer, no signal, no ring. run_begin keeps
 *    only the run's slice end (ptls coop_due) and the due check compares
 *    the clock with it, so code that passes yield points is sliced and
 *    demoted at the price of a clock read per point, and nothing ever
 *    interrupts the carrier. Where an interrupt costs tens of us (a
 *    software-virtualised guest: ~45 us per expiry) that is the only way
 *    a 50 us slice is worth having. With the involuntary path on, such a
 *    carrier also runs the whole trigger above as a backstop, at
 *    XTC__COOP_BACKSTOP times the slice: code with points is cut at the
 *    slice without an interrupt, code without points at the backstop
 *    slice by one. Rejected: a timer at the slice itself (its expiry's
 *    stall is the cost to avoid); making it the default cooperative path
 *    (code without points would lose the ticks' telemetry and tests rely
 *    on them).
 *  - A preempted fiber yields through xtc__fiber_yield_slice: demoted
 *    (loop_int.h), so new arrivals run before it. Each redirect starts a
 *    cost measurement (lateness + handler-to-next-dispatch) that the next
 *    run start on the carrier closes: xtc__preempt_cost_ewma, the floor of
 *    the adaptive quantum (fn.c). A timer expiry's lateness counts whole
 *    (on a slow hypervisor it is mostly the interrupt's stall of the
 *    carrier); a signal from another CPU counts at most this carrier's
 *    typical expiry lateness (its flight is not carrier time, its stall
 *    is, and the handler cannot see that stall).
 *  - Overhead budget (xtc_preempt_set_budget): each carrier adds up what
 *    preemption cost it per window of XTC_PREEMPT_BUDGET_WINDOW_NS (those
 *    measurements, plus the stall of expiries that found nothing due) and
 *    its idle time. A carrier busy >= 90% of a window on which preemption
 *    spent more than the budget doubles the slice it applies, as many
 *    times as the overrun calls for (cost ~ 1/slice), up to 64x, without
 *    waiting for the window's end once it spent a whole window's budget
 *    or spends at twice its rate, after a tenth of a window at least
 *    (overload builds backlog by the millisecond); it halves back one
 *    step a window once busy plus the cost (what a halving adds) < 75%,
 *    or the cost is under a quarter of the budget: the room a stretch
 *    made is not room for the shorter slice (the oscillation that
 *    halving on busy < 75% alone caused at 50-70% load fed the tail).
 *    Measured on a software-virtualised 2-vCPU
 *    guest (an expiry stalls the carrier ~41 us, a near re-arm 13 us), a
 *    50 us slice cut each 500 us request ten times and A1 at 10-70% load
 *    never drained its backlog (362 ms p99 at 10%); a slice that pays for
 *    itself there is several hundred us. Idle capacity is never budgeted:
 *    at low load the tail is what preemption is for. Timer arms are
 *    counted apart (arm_ns): they follow busy periods, not slices.
 *    Rejected: a fixed floor (cost depends on the machine by 4-5x);
 *    budgeting against wall time regardless of load (at 10% load it
 *    stretched the slice 16x and gave the tail of no preemption).
 *  - The handler (SA_SIGINFO | SA_ONSTACK | SA_RESTART, a real-time signal
 *    >= SIGRTMIN+3, initial-exec TLS only, errno saved) accepts only a
 *    signal queued by the monitor for the carrier's current run generation.
 *    It counts a tick and sets the pending flag. With the involuntary path
 *    on it preempts only when every check passes: a fiber of the current
 *    run is running, its no-preempt count is zero, no Go callback is active,
 *    the SP lies in that fiber's stack with headroom for the save area, and
 *    the PC is in preemptible code. Then it only rewrites the saved context:
 *    RSP skips the red zone and "pushes" the old RIP, RIP points at the
 *    trampoline (arch/preempt_x86_64_sysv_elf.S). The switch happens after
 *    sigreturn, on the fiber's own stack. Never inside the handler: the
 *    alternate stack and the signal mask belong to the handler. On aarch64
 *    (no memory-indirect branch, so no register is free for the return
 *    jump) the handler copies the whole signal frame onto the fiber's stack
 *    and the trampoline resumes with rt_sigreturn on the copy.
 *  - Preemptible code is decided from a table built once (and again when
 *    the involuntary path is switched on): the executable segments of every
 *    loaded object are allowed, except libc, ld.so, the vDSO and the other
 *    system/sanitizer libraries (they take locks: preempting malloc
 *    deadlocks or corrupts the heap); the runtime's own code is denied, as
 *    the code map records it by construction (rtcode_int.h: every runtime
 *    object brackets its text sections and registers them in the
 *    xtc_rtmap section, so neither file names, nor symbol names, nor link
 *    order, nor a stripped symbol table matter), and so are the ranges the
 *    user declared unsafe. A PC in no known object (code loaded later) is
 *    denied. If the map lacks a runtime function it must contain, the
 *    involuntary path declines.
 *  - A refused preemption is deferred: counted by reason, flagged, and the
 *    deadline re-armed a quarter slice (at least twice the measured cost)
 *    later so the trigger asks again; the next yield check, park point or
 *    the end of a no-preempt region honours it. A signal that finds the
 *    carrier in its own scheduler code (between a switch and the run's
 *    bookkeeping) is not a deferral of user code: the carrier reaches a
 *    boundary by itself, so it sets no pending flag; an expiry re-times
 *    the run from its slice end (or half a slice on), a producer's signal
 *    lets the next poll ask again. Re-asking a quarter slice later there
 *    fed an interrupt storm on a slow hypervisor (every expiry stalled the
 *    carrier past the next one: a 50 us slice collapsed at 10% load).
 *
 * Rejected: switching fibers inside the handler (reuses the alternate stack
 * and runs with the signal masked); fxsave (loses the upper halves of the
 * vector registers); preempting anywhere (malloc deadlocks); a whitelist
 * section the user must annotate (user C kernels should just work).
 */
#include "rtcode_int.h" /* first: this file is runtime code */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <limits.h>
#include <link.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#include "preempt_int.h"
#include "loop_int.h"

__thread xtc__ptls_t xtc__ptls XTC__PTLS;

uint32_t xtc__xsave_size;
uint32_t xtc__xsave_mode;
_Atomic int64_t xtc__preempt_adaptive_slice;

static void q_none(int64_t v)
{
	(void)v;
}

static int64_t q_never(void)
{
	return INT64_MAX;
}

xtc__quantum_ops_t xtc__quantum = {
	.tick = q_none, .next = q_never, .idle = q_none, .service = q_none,
	.cost = q_none,
};
_Atomic int64_t xtc__preempt_alone_ns = XTC__PREEMPT_ALONE_NS;
_Atomic int64_t xtc__preempt_net_grace_ns = XTC__PREEMPT_NET_GRACE_NS;
static _Atomic int budget_pct = XTC_PREEMPT_BUDGET_DEFAULT;
/* the slice multiplier's cap, as a shift: 64x */
#define STRETCH_MAX 6
/* busy share of a window from which the budget applies, and below which
 * a lengthened slice shortens again (hysteresis: a stretch that brought the
 * carrier just under the first must not undo itself the next window) */
#define BUDGET_BUSY_PCT 90
#define BUDGET_IDLE_PCT 75

static _Atomic int involuntary_on;
static _Atomic int handler_installed;
static int preempt_signo; /* 0 until fixed by the first arm */
static int requested_signo;
static pid_t self_pid;
static pthread_mutex_t init_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_key_t exit_key;
static pthread_once_t exit_once = PTHREAD_ONCE_INIT;

/* Every thread's counters, summed by xtc_preempt_stats_global. */
#define MAX_STAT_THREADS 1024
static xtc_preempt_stats_t *stat_ptrs[MAX_STAT_THREADS];
static xtc_preempt_stats_t retired;
static int n_stat;

static int64_t now_ns(void)
{
	return xtc__now_ns(); /* base_int.h */
}

/* ------------------------------------------------------------------ */
/* Preemptible-code map                                                 */
/* ------------------------------------------------------------------ */

typedef struct prange {
	uintptr_t lo, hi;
	int allow;
} prange_t;

typedef struct pmap pmap_t;
struct pmap {
	prange_t *objs;    /* sorted executable segments, allow flag */
	size_t n_objs;
	prange_t *rt;      /* sorted runtime code ranges (deny) */
	size_t n_rt;
	int rt_known;      /* runtime code located */
	int n_files;       /* runtime source files in the code map */
	unsigned long long adds; /* dl_iterate_phdr's load count at build */
	struct pmap *prev; /* retired maps stay reachable (never freed) */
};

/* Published with release; readers (the handler) load with acquire. Old
 * maps are never freed: a handler may still be reading one. */
static _Atomic(pmap_t *) cur_map;

static struct {
	_Atomic uintptr_t lo, hi;
} unsafe_ranges[XTC_PREEMPT_MAX_UNSAFE];
static _Atomic int n_unsafe;

static const char *const system_objs[] = {
	"libc.so", "ld-linux", "ld-musl", "linux-vdso", "linux-gate",
	"libpthread", "libdl.so", "librt.so", "libstdc++", "libgcc_s",
	"libasan", "libubsan", "libtsan", "liblsan", "libhwasan", "liburing",
	"libresolv", "libnss", NULL
};

/* The runtime's code, by construction: one record per text section of
 * every runtime object (rtcode_int.h), whatever the file names, the link
 * order or the symbol table. Hidden: each module sees its own records. */
extern const xtc__rtcode_t __start_xtc_rtmap[] __attribute__((visibility("hidden")));
extern const xtc__rtcode_t __stop_xtc_rtmap[] __attribute__((visibility("hidden")));

static int has_substr(const char *s, const char *const *list)
{
	for (int i = 0; list[i]; i++)
		if (strstr(s, list[i]))
			return 1;
	return 0;
}

typedef struct vec {
	prange_t *v;
	size_t n, cap;
} vec_t;

static int vec_push(vec_t *a, uintptr_t lo, uintptr_t hi, int allow)
{
	if (a->n == a->cap) {
		size_t nc = a->cap ? a->cap * 2 : 64;
		prange_t *nv = realloc(a->v, nc * sizeof *nv);
		if (!nv)
			return -1;
		a->v = nv;
		a->cap = nc;
	}
	a->v[a->n++] = (prange_t){ lo, hi, allow };
	return 0;
}

static int cmp_range(const void *a, const void *b)
{
	const prange_t *x = a, *y = b;
	return x->lo < y->lo ? -1 : x->lo > y->lo;
}

struct phdr_ctx {
	vec_t *objs;
	uintptr_t rt_addr;   /* an address inside the runtime */
	uintptr_t vdso;      /* AT_SYSINFO_EHDR (the vDSO may have no name) */
	int rt_is_main;
	int idx;
	int main_static;     /* no PT_INTERP: libc is inside the executable */
	unsigned long long adds;
};

static int in_load_segment(const struct dl_phdr_info *info, uintptr_t a)
{
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
		if (ph->p_type == PT_LOAD && a >= lo && a < lo + ph->p_memsz)
			return 1;
	}
	return 0;
}

static int phdr_cb(struct dl_phdr_info *info, size_t sz, void *arg)
{
	struct phdr_ctx *c = arg;
	const char *name = info->dlpi_name ? info->dlpi_name : "";
	int is_main = c->idx++ == 0;
	if (sz >= offsetof(struct dl_phdr_info, dlpi_adds) + sizeof info->dlpi_adds)
		c->adds = info->dlpi_adds;
	int holds_rt = in_load_segment(info, c->rt_addr);
	if (holds_rt)
		c->rt_is_main = is_main;
	int vdso = c->vdso != 0 && in_load_segment(info, c->vdso);
	/* A shared libxtc is runtime as a whole; in the main program only the
	 * runtime's code is (the code map). A static executable (no program
	 * interpreter; static-pie included) has libc inside it: denied here
	 * as a whole, its user part is allowed by static_user_range. */
	int interp = 0;
	for (int i = 0; i < info->dlpi_phnum; i++)
		if (info->dlpi_phdr[i].p_type == PT_INTERP)
			interp = 1;
	if (is_main)
		c->main_static = !interp;
	int allow = !has_substr(name, system_objs) && !vdso &&
	            !(holds_rt && !is_main) && !(is_main && !interp);
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X))
			continue;
		uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
		if (vec_push(c->objs, lo, lo + ph->p_memsz, allow) != 0)
			return 1;
	}
	return 0;
}

/* The code map's ranges; -1 when it lacks a function it must contain (a
 * runtime file built without rtcode_int.h, or an unexpected toolchain). */
static int load_code_map(vec_t *rt, int *n_files)
{
	const char *last = NULL;
	*n_files = 0;
	for (const xtc__rtcode_t *r = __start_xtc_rtmap; r < __stop_xtc_rtmap; r++) {
		if (r->file != last) {
			last = r->file;
			(*n_files)++;
		}
		if (r->hi > r->lo &&
		    vec_push(rt, (uintptr_t)r->lo, (uintptr_t)r->hi, 0) != 0)
			return -1;
	}
	uintptr_t probes[] = { (uintptr_t)&xtc_preempt_arm,
	                       (uintptr_t)&xtc__preempt_trampoline,
	                       (uintptr_t)&xtc__fiber_init,
	                       (uintptr_t)&xtc__preempt_run_begin };
	for (size_t i = 0; i < sizeof probes / sizeof probes[0]; i++) {
		int in = 0;
		for (size_t k = 0; k < rt->n && !in; k++)
			in = probes[i] >= rt->v[k].lo && probes[i] < rt->v[k].hi;
		if (!in)
			return -1;
	}
	return 0;
}

/*
 * A static executable: the linker lays out the .text of its inputs in
 * command-line order, and the C library comes last (cc adds -lc after the
 * user's objects and -lxtc), so the user's code lies between the entry
 * point (crt1's _start, the first .text input) and the runtime's lowest
 * .text range, and libc, libgcc and the rest above the runtime. The cold,
 * hot and startup text groups (below the entry point) and the PLT stay
 * denied. If a libc function lies in that window the link order is not
 * the usual one and nothing is allowed (the involuntary path declines).
 */
static int static_user_range(const vec_t *rt, vec_t *objs)
{
	uintptr_t entry = (uintptr_t)getauxval(AT_ENTRY), rt_lo = UINTPTR_MAX;
	if (entry == 0)
		return -1;
	for (size_t k = 0; k < rt->n; k++)
		if (rt->v[k].lo >= entry && rt->v[k].lo < rt_lo)
			rt_lo = rt->v[k].lo;
	if (rt_lo == UINTPTR_MAX)
		return -1;
	uintptr_t libc[] = { (uintptr_t)&malloc, (uintptr_t)&free,
	                     (uintptr_t)&pthread_mutex_lock, (uintptr_t)&write,
	                     (uintptr_t)&abort, (uintptr_t)&pthread_create };
	for (size_t i = 0; i < sizeof libc / sizeof libc[0]; i++)
		if (libc[i] >= entry && libc[i] < rt_lo)
			return -1;
	/* Split the executable's (denied) text segment around the window. */
	for (size_t i = 0; i < objs->n; i++) {
		prange_t seg = objs->v[i];
		if (entry < seg.lo || rt_lo > seg.hi)
			continue;
		objs->v[i].hi = entry;
		if (vec_push(objs, entry, rt_lo, 1) != 0 ||
		    vec_push(objs, rt_lo, seg.hi, 0) != 0)
			return -1;
		return 0;
	}
	return -1;
}

static unsigned long long current_adds(void);

/* Caller holds init_mu. Rebuilds only when objects were loaded since. */
static int build_map(void)
{
	pmap_t *old = atomic_load(&cur_map);
	if (old != NULL && old->adds == current_adds())
		return XTC_OK;
	pmap_t *pm = calloc(1, sizeof *pm);
	if (!pm)
		return XTC_E_NOMEM;
	vec_t objs = { 0 }, rt = { 0 };
	struct phdr_ctx c = { .objs = &objs,
	                      .rt_addr = (uintptr_t)&xtc_preempt_arm,
	                      .vdso = (uintptr_t)getauxval(AT_SYSINFO_EHDR) };
	dl_iterate_phdr(phdr_cb, &c);
	pm->rt_known = load_code_map(&rt, &pm->n_files) == 0;
	if (pm->rt_known && c.main_static)
		pm->rt_known = c.rt_is_main && static_user_range(&rt, &objs) == 0;
	if (!pm->rt_known)
		rt.n = 0;
	qsort(objs.v, objs.n, sizeof *objs.v, cmp_range);
	if (rt.n)
		qsort(rt.v, rt.n, sizeof *rt.v, cmp_range);
	pm->objs = objs.v;
	pm->n_objs = objs.n;
	pm->rt = rt.v;
	pm->n_rt = rt.n;
	pm->adds = c.adds;
	pm->prev = old;
	atomic_store_explicit(&cur_map, pm, memory_order_release);
	return XTC_OK;
}

static int adds_cb(struct dl_phdr_info *info, size_t sz, void *arg)
{
	if (sz >= offsetof(struct dl_phdr_info, dlpi_adds) + sizeof info->dlpi_adds)
		*(unsigned long long *)arg = info->dlpi_adds;
	return 1; /* the first object is enough: adds is global */
}

static unsigned long long current_adds(void)
{
	unsigned long long a = 0;
	dl_iterate_phdr(adds_cb, &a);
	return a;
}

static const prange_t *find_range(const prange_t *v, size_t n, uintptr_t pc)
{
	size_t lo = 0, hi = n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (pc < v[mid].lo)
			hi = mid;
		else if (pc >= v[mid].hi)
			lo = mid + 1;
		else
			return &v[mid];
	}
	return NULL;
}

/* Async-signal-safe: loads and a binary search. */
static int pc_preemptible(uintptr_t pc)
{
	pmap_t *pm = atomic_load_explicit(&cur_map, memory_order_acquire);
	if (pm == NULL || !pm->rt_known)
		return 0;
	if (find_range(pm->rt, pm->n_rt, pc))
		return 0;
	int nu = atomic_load_explicit(&n_unsafe, memory_order_acquire);
	for (int i = 0; i < nu; i++) {
		uintptr_t lo = atomic_load_explicit(&unsafe_ranges[i].lo,
		                                    memory_order_relaxed);
		uintptr_t hi = atomic_load_explicit(&unsafe_ranges[i].hi,
		                                    memory_order_relaxed);
		if (pc >= lo && pc < hi)
			return 0;
	}
	const prange_t *r = find_range(pm->objs, pm->n_objs, pc);
	return r != NULL && r->allow;
}

/* Tests: the number of runtime code ranges and of runtime source files in
 * the code map. */
int xtc__preempt_map_info(int *n_rt, int *n_files);
int xtc__preempt_map_info(int *n_rt, int *n_files)
{
	pthread_mutex_lock(&init_mu);
	int rc = build_map();
	pthread_mutex_unlock(&init_mu);
	pmap_t *pm = atomic_load(&cur_map);
	if (rc != XTC_OK || pm == NULL)
		return rc != XTC_OK ? rc : XTC_E_INTERNAL;
	if (n_rt)
		*n_rt = (int)pm->n_rt;
	if (n_files)
		*n_files = pm->n_files;
	return pm->rt_known ? XTC_OK : XTC_E_NOTFOUND;
}

/* Test hook (test_preempt.c): is this PC preemptible? */
int xtc__preempt_pc_ok(const void *pc);
int xtc__preempt_pc_ok(const void *pc)
{
	return pc_preemptible((uintptr_t)pc);
}

/* Test hook: record i of the code map (file name and range); NOTFOUND
 * past the last one. */
int xtc__preempt_codemap_get(int i, const char **file, const void **lo,
                             const void **hi);
int xtc__preempt_codemap_get(int i, const char **file, const void **lo,
                             const void **hi)
{
	if (i < 0 || i >= __stop_xtc_rtmap - __start_xtc_rtmap)
		return XTC_E_NOTFOUND;
	const xtc__rtcode_t *r = &__start_xtc_rtmap[i];
	*file = r->file;
	*lo = r->lo;
	*hi = r->hi;
	return XTC_OK;
}

int xtc_preempt_declare_unsafe(const void *lo, const void *hi)
{
	if (lo == NULL || hi == NULL || (uintptr_t)hi <= (uintptr_t)lo)
		return XTC_E_INVAL;
	pthread_mutex_lock(&init_mu);
	int n = atomic_load(&n_unsafe);
	int rc = XTC_E_RESOURCE;
	for (int i = 0; i < n; i++) {
		if (atomic_load(&unsafe_ranges[i].lo) == 0) {
			atomic_store(&unsafe_ranges[i].hi, (uintptr_t)hi);
			atomic_store(&unsafe_ranges[i].lo, (uintptr_t)lo);
			rc = XTC_OK;
			break;
		}
	}
	if (rc != XTC_OK && n < XTC_PREEMPT_MAX_UNSAFE) {
		atomic_store(&unsafe_ranges[n].lo, (uintptr_t)lo);
		atomic_store(&unsafe_ranges[n].hi, (uintptr_t)hi);
		atomic_store_explicit(&n_unsafe, n + 1, memory_order_release);
		rc = XTC_OK;
	}
	pthread_mutex_unlock(&init_mu);
	return rc;
}

int xtc_preempt_undeclare_unsafe(const void *lo, const void *hi)
{
	if (lo == NULL || hi == NULL)
		return XTC_E_INVAL;
	pthread_mutex_lock(&init_mu);
	int n = atomic_load(&n_unsafe), rc = XTC_E_NOTFOUND;
	for (int i = 0; i < n; i++) {
		if (atomic_load(&unsafe_ranges[i].lo) == (uintptr_t)lo &&
		    atomic_load(&unsafe_ranges[i].hi) == (uintptr_t)hi) {
			/* hi first: a concurrent reader sees an empty range */
			atomic_store(&unsafe_ranges[i].hi, 0);
			atomic_store(&unsafe_ranges[i].lo, 0);
			rc = XTC_OK;
			break;
		}
	}
	pthread_mutex_unlock(&init_mu);
	return rc;
}

/* ------------------------------------------------------------------ */
/* CPU state save size                                                  */
/* ------------------------------------------------------------------ */

static void xsave_probe(void)
{
#if defined(__x86_64__)
	unsigned a, b, c, d;
	__asm__ volatile("cpuid" : "=a"(a), "=b"(b), "=c"(c), "=d"(d)
	                 : "a"(1), "c"(0));
	if (c & (1u << 27)) { /* OSXSAVE: the OS enabled XSAVE */
		__asm__ volatile("cpuid" : "=a"(a), "=b"(b), "=c"(c), "=d"(d)
		                 : "a"(0xd), "c"(0));
		xtc__xsave_size = (b + 63) & ~63u;
		xtc__xsave_mode = 1;
	} else {
		xtc__xsave_size = 512;
		xtc__xsave_mode = 0;
	}
#endif
}

#if (defined(__x86_64__) || defined(__aarch64__)) && defined(__linux__)
#define ARCH_INVOLUNTARY 1
#else
#define ARCH_INVOLUNTARY 0
#endif

/* Truthful: the redirect exists here and the code map was located (a
 * static executable linked in the usual order included). */
int xtc_preempt_involuntary_supported(void)
{
	if (!ARCH_INVOLUNTARY)
		return 0;
	pthread_mutex_lock(&init_mu);
	int rc = build_map();
	pmap_t *pm = atomic_load(&cur_map);
	int ok = rc == XTC_OK && pm != NULL && pm->rt_known;
	pthread_mutex_unlock(&init_mu);
	return ok;
}

/* ------------------------------------------------------------------ */
/* The handler                                                          */
/* ------------------------------------------------------------------ */

_Atomic int64_t xtc__preempt_cost_ewma;

/* Ask again at `at` for the current run: the carrier's timer when it has
 * one, else the monitor. Async-signal-safe (timer_settime, futex wake). */
static void ask_at(xtc__pslot_t *s, int64_t at)
{
	xtc__preempt_set_deadline(at);
	if (atomic_load_explicit(&s->timer, memory_order_relaxed))
		xtc__ctimer_arm(s, at);
	else
		xtc__monitor_kick(at);
}

/* When a refused preemption asks again: never sooner than twice what an
 * expiry costs, so a refusal that keeps recurring (a long libc call) does
 * not turn into an interrupt storm on a machine where one expiry costs
 * tens of microseconds. */
static int64_t reask_ns(int64_t slice)
{
	int64_t d = slice / 4;
	int64_t c2 = 2 * atomic_load_explicit(&xtc__preempt_cost_ewma,
	                                      memory_order_relaxed);
	if (d < c2)
		d = c2;
	return d < 20000 ? 20000 : d;
}

static void rearm_later(int64_t now, int64_t slice)
{
	int64_t d = reask_ns(slice);
	if (xtc__ptls.slot != NULL)
		ask_at(xtc__ptls.slot, now + d);
}

/* A carrier timer expired. 1: the current run is due (treat as a
 * preemption signal); 0: it fired early for a run that ended, or before
 * this run's deadline: re-armed for the run now current, if it is timed
 * by the timer. *due_at: the deadline that was due. */
void xtc__monitor_count_fire(int due);
static int timer_due(xtc__ptls_t *p, xtc__pslot_t *s, int64_t now,
                     int64_t *due_at)
{
	int64_t hard = atomic_load_explicit(&s->deadline, memory_order_relaxed);
	int64_t soft = atomic_load_explicit(&s->soft, memory_order_relaxed);
	int64_t d = hard, early = 0;
	int64_t was = atomic_load_explicit(&s->timer_at, memory_order_relaxed);

	atomic_store_explicit(&s->timer_at, INT64_MAX, memory_order_relaxed);
	/* an expiry's lateness is mostly the interrupt's own cost where the
	 * hypervisor is slow: overhead when it bought nothing (a due one is
	 * counted by its cost measurement, cost_close) */
	int64_t late = 0;
	if (was != INT64_MAX && now > was) {
		late = now - was < 100000 ? now - was : 100000;
		p->fire_late = p->fire_late == 0 ? late :
		               p->fire_late + (late - p->fire_late) / 8;
	}
	if (hard == INT64_MAX || p->fiber == NULL || xtc__gocb_depth > 0) {
		p->ovh_ns += late;
		xtc__monitor_count_fire(0);
		return 0; /* idle, between runs, or in Go code: nothing to do */
	}
	if (atomic_load_explicit(&s->contended, memory_order_relaxed) &&
	    soft < d)
		d = soft;
	/* a slice end is due from its window on (the timer was left armed
	 * there for the short runs that started meanwhile); a loop timer's
	 * hard deadline is exact */
	if (d == soft)
		early = p->early;
	else
		early = p->hard_early;
	*due_at = d;
	if ((p->pend & XTC__PF_WANT) || now >= d - early) {
		xtc__monitor_count_fire(1);
		return 1;
	}
	p->ovh_ns += late;
	xtc__monitor_count_fire(0);
	/* early: keep timing this run unless only the monitor's net does */
	if (d != hard || atomic_load_explicit(&s->net,
	                                      memory_order_relaxed) == INT64_MAX)
		xtc__ctimer_arm(s, d);
	return 0;
}

/* The tick net expired (preempt_monitor.c, trigger 3.): 1 if the current run
 * overran its slice end (contended) or its hard deadline, or a deferred
 * preemption waits; the safety net producers' polls and the slice timer
 * leave behind, at the price of no interrupt of its own. */
static int tick_net_due(xtc__ptls_t *p, xtc__pslot_t *s, int64_t *now,
                        int64_t *due_at)
{
	int64_t d = atomic_load_explicit(&s->deadline, memory_order_relaxed);
	if (d == INT64_MAX || p->fiber == NULL)
		return 0; /* (Go code: the handler paused the net already) */
	if (atomic_load_explicit(&s->contended, memory_order_relaxed)) {
		int64_t soft = atomic_load_explicit(&s->soft,
		                                    memory_order_relaxed);
		if (soft < d)
			d = soft;
	}
	*now = now_ns();
	*due_at = d;
	return *now >= d || (p->pend & XTC__PF_WANT);
}

/* An expiry that landed outside the run's fiber: time the run again
 * without moving its published deadline. */
static void redo_timer(xtc__ptls_t *p, xtc__pslot_t *s, int64_t now)
{
	if (p->fiber == NULL)
		return;
	int64_t soft = atomic_load_explicit(&s->soft, memory_order_relaxed);
	int64_t at = now + (p->slice > 0 ? p->slice / 2 : 20000);
	if (soft > at)
		at = soft;
	if (atomic_load_explicit(&s->timer, memory_order_relaxed))
		xtc__ctimer_arm(s, at);
	else
		xtc__monitor_kick(at);
}

/* Why the handler may not redirect the interrupted point (safe_point). */
enum { SP_OK, SP_GOCB, SP_CTX, SP_NOPREEMPT, SP_STACK, SP_PC };

static void count_refusal(xtc__ptls_t *p, int why)
{
	switch (why) {
	case SP_GOCB:
		p->st.refused_gocb++;
		break;
	case SP_NOPREEMPT:
		p->st.refused_nopreempt++;
		break;
	case SP_STACK:
		p->st.refused_stack++;
		break;
	default:
		p->st.refused_pc++;
	}
}

static void defer(xtc__ptls_t *p, int64_t now)
{
	p->pend |= XTC__PF_WANT;
	p->st.deferrals++;
	rearm_later(now, p->slice);
}

/* Every check of the handler (design note above; xtc_preempt(3)).
 * SP_OK if the interrupted point may be redirected, else why not. */
static int safe_point(xtc__ptls_t *p, const ucontext_t *uc)
{
#if defined(__x86_64__) && defined(__linux__)
	if (xtc__gocb_depth > 0)
		return SP_GOCB;
	xtc__fiber_t *f = xtc__fiber_cur;
	if (f == NULL || f != p->fiber || f->is_root || f->stack.lo == NULL)
		return SP_CTX;
	if (f->nopreempt > 0)
		return SP_NOPREEMPT;
	uintptr_t sp = (uintptr_t)uc->uc_mcontext.gregs[REG_RSP];
	uintptr_t lo = (uintptr_t)f->stack.lo, hi = (uintptr_t)f->stack.hi;
	uintptr_t need = XTC__PREEMPT_HEADROOM + xtc__xsave_size + 256 + 136;
	if (sp > hi || sp < lo + need)
		return SP_STACK;
	return pc_preemptible((uintptr_t)uc->uc_mcontext.gregs[REG_RIP]) ?
	       SP_OK : SP_PC;
#elif defined(__aarch64__) && defined(__linux__)
	if (xtc__gocb_depth > 0)
		return SP_GOCB;
	xtc__fiber_t *f = xtc__fiber_cur;
	if (f == NULL || f != p->fiber || f->is_root || f->stack.lo == NULL)
		return SP_CTX;
	if (f->nopreempt > 0)
		return SP_NOPREEMPT;
	uintptr_t sp = (uintptr_t)uc->uc_mcontext.sp;
	uintptr_t lo = (uintptr_t)f->stack.lo, hi = (uintptr_t)f->stack.hi;
	uintptr_t need = XTC__PREEMPT_HEADROOM + sizeof(siginfo_t) +
	                 sizeof(ucontext_t) + 256;
	if (sp > hi || sp < lo + need)
		return SP_STACK;
	return pc_preemptible((uintptr_t)uc->uc_mcontext.pc) ? SP_OK : SP_PC;
#else
	(void)p;
	(void)uc;
	return SP_CTX;
#endif
}

#if defined(__aarch64__) && defined(__linux__)
/* The frame the kernel built must be siginfo immediately followed by the
 * ucontext, with no record pointing outside it (an SVE extra_context). */
static int frame_copyable(const siginfo_t *si, const ucontext_t *uc)
{
	if ((const char *)uc != (const char *)si + sizeof(siginfo_t))
		return 0;
	const unsigned char *r = (const unsigned char *)uc->uc_mcontext.__reserved;
	size_t off = 0, cap = sizeof uc->uc_mcontext.__reserved;
	while (off + 8 <= cap) {
		uint32_t magic, size;
		memcpy(&magic, r + off, 4);
		memcpy(&size, r + off + 4, 4);
		if (magic == 0)
			return 1;
		if (magic == 0x45585401u /* EXTRA_MAGIC */ || size < 8 ||
		    off + size > cap)
			return 0;
		off += size;
	}
	return 0;
}
#endif

/* 0: redirected; -1: cannot (the caller defers). */
static int redirect(siginfo_t *si, ucontext_t *uc)
{
#if defined(__x86_64__) && defined(__linux__)
	(void)si;
	uintptr_t sp = (uintptr_t)uc->uc_mcontext.gregs[REG_RSP] - 128 - 8;
	*(uintptr_t *)sp = (uintptr_t)uc->uc_mcontext.gregs[REG_RIP];
	uc->uc_mcontext.gregs[REG_RSP] = (greg_t)sp;
	uc->uc_mcontext.gregs[REG_RIP] = (greg_t)(uintptr_t)&xtc__preempt_trampoline;
	return 0;
#elif defined(__aarch64__) && defined(__linux__)
	if (!frame_copyable(si, uc))
		return -1;
	size_t n = sizeof(siginfo_t) + sizeof(ucontext_t);
	uintptr_t sp = ((uintptr_t)uc->uc_mcontext.sp - 128 - n) & ~(uintptr_t)15;
	/* word copy: memcpy is not on every async-signal-safe list */
	const uint64_t *src = (const uint64_t *)(const void *)si;
	uint64_t *dst = (uint64_t *)sp;
	for (size_t i = 0; i < n / 8; i++)
		dst[i] = src[i];
	/* the copy keeps the interrupted state; the live one goes to the
	 * trampoline with sp at the copy */
	uc->uc_mcontext.sp = sp;
	uc->uc_mcontext.pc = (uintptr_t)&xtc__preempt_trampoline;
	return 0;
#else
	(void)si;
	(void)uc;
	return -1;
#endif
}

static void handler(int sig, siginfo_t *si, void *ucv)
{
	(void)sig;
	int saved = errno;
	xtc__ptls_t *p = &xtc__ptls;
	xtc__pslot_t *s = p->slot;
	int64_t now, due_at = 0;
	int tick = 0;
	if (s == NULL)
		goto out;
	if (si->si_code == SI_TIMER &&
	    si->si_value.sival_int == XTC__TICK_NET_SIVAL) {
		/* the tick net: periodic, nothing to re-arm or count when the
		 * run is on time; in Go code it stops until the callback
		 * returns (xtc__tick_net_pause) */
		if (xtc__gocb_depth > 0) {
			xtc__tick_net_pause();
			goto out;
		}
		if (!tick_net_due(p, s, &now, &due_at))
			goto out;
		tick = 1;
		p->st.tick_nets++;
	} else if (si->si_code == SI_TIMER) {
		/* this carrier's own timer (SIGEV_THREAD_ID) */
		if (!atomic_load_explicit(&s->timer, memory_order_relaxed))
			goto out;
		now = now_ns();
		if (!timer_due(p, s, now, &due_at)) {
			p->st.stale++;
			goto out;
		}
	} else {
		if (si->si_code != SI_QUEUE || si->si_pid != self_pid)
			goto out;
		/* a signal for an earlier run, or for a run this handler
		 * already redirected (deadline cleared below; the fiber is on
		 * its way through the trampoline): a producer's poll and the
		 * carrier's expiry both saw the same overrun. Refusing it as
		 * an unsafe point would flag WANT and re-arm (a spurious
		 * expiry later: 15% of the preemptions of a 50 us slice at
		 * 10% A1 load were such duplicates). */
		if ((uint32_t)si->si_value.sival_int !=
		        atomic_load_explicit(&s->gen, memory_order_relaxed) ||
		    atomic_load_explicit(&s->deadline, memory_order_relaxed) ==
		        INT64_MAX) {
			p->st.stale++;
			goto out;
		}
		/* between two runs of a batch (batch_keeps): nothing to cut */
		if (p->fiber == NULL &&
		    atomic_load_explicit(&s->timer, memory_order_relaxed)) {
			p->st.stale++;
			goto out;
		}
		now = now_ns();
		due_at = atomic_load_explicit(&s->soft, memory_order_relaxed);
	}
	p->st.signals++;
	p->st.ticks++;
	p->pend |= XTC__PF_TICK;
	int invol = (atomic_load_explicit(&involuntary_on, memory_order_relaxed) ||
	             p->force_invol) && ARCH_INVOLUNTARY;
	if (!invol || p->fiber == NULL) {
		if (tick)
			goto out; /* the next tick asks again */
		/* seam semantics: tick again one interval later */
		int64_t sl = p->fiber ? p->slice :
		             atomic_load_explicit(&s->slice_ns, memory_order_relaxed);
		ask_at(s, now + sl);
		goto out;
	}
	int why = safe_point(p, ucv);
	switch (why) {
	case SP_OK:
		break;
	case SP_CTX:
		p->st.refused_ctx++;
		if (!atomic_load_explicit(&s->timer, memory_order_relaxed)) {
			/* the monitor's path: it asks again once the deadline
			 * moves (defer), as before the carrier timers */
			defer(p, now);
			goto out;
		}
		/* The carrier is in its own code between a switch and the run's
		 * bookkeeping (run_begin's timer syscall, a fiber's exit): it
		 * reaches a boundary by itself. Not a deferral of user code: no
		 * pending flag (it would make every later expiry "due") and no
		 * re-ask a quarter slice later, which on a slow hypervisor fed
		 * a storm of expiries landing here again (a 50 us slice at 10%
		 * load collapsed). */
		p->st.deferrals++;
		if (tick)
			; /* the next tick asks again */
		else if (si->si_code == SI_TIMER)
			/* the run keeps being timed, from its slice end or half
			 * a slice from now, whichever is later */
			redo_timer(p, s, now);
		else
			/* a producer's (or the net's) signal: the run has ended
			 * (a fiber not switched in yet carries a fresh slice no
			 * poll finds overdue, unless the carrier stalled longer
			 * than a slice in between: the next poll asks again,
			 * 2 -> 1). No syscall. */
			atomic_store_explicit(&s->contended, 1,
			                      memory_order_relaxed);
		goto out;
	default:
		count_refusal(p, why);
		defer(p, now);
		goto out;
	}
	if (redirect(si, ucv) != 0) {
		defer(p, now);
		goto out;
	}
	/* The run ends at the trampoline's yield; the next run re-arms. */
	xtc__preempt_set_deadline(INT64_MAX);
	p->pend = 0;
	/* cost measurement, closed by the next run start on this carrier */
	p->pc_at = now;
	/* a timer expiry's lateness is mostly the interrupt's own stall of
	 * this carrier; a queued signal's is mostly the sender's delay and the
	 * flight across CPUs while the fiber kept running: only its stall is
	 * a cost, estimated by what this carrier's expiries stall it */
	p->pc_late = due_at > 0 && due_at < now ? now - due_at : 0;
	if (si->si_code != SI_TIMER && p->pc_late > p->fire_late)
		p->pc_late = p->fire_late;
	/* the tick net's expiry rides the kernel tick: its lateness is the
	 * tick's period, not a stall of this carrier */
	if (tick)
		p->pc_late = 0;
out:
	errno = saved;
}

/* Called by the trampoline on the fiber's stack, all registers saved. */
static void preempt_yield_now(void)
{
	xtc__ptls_t *p = &xtc__ptls;
	p->pend = 0;
	if (p->yield_hook)
		p->yield_hook(p->yield_arg);
	else
		(void)xtc__fiber_slice_yield(); /* the loop's: fiber_int.h */
}

void xtc__preempt_trampoline_yield(void)
{
	xtc__fiber_t *f = xtc__fiber_cur;
	/* the fiber, not the thread, carries the guard: it may resume on
	 * another carrier */
	f->nopreempt++;
	xtc__ptls.st.preemptions++;
	preempt_yield_now();
	f->nopreempt--;
}

#if defined(__aarch64__) && defined(__linux__)
/* aarch64 trampoline: yield, then make the frame copy fit the thread we
 * resume on (rt_sigreturn installs its mask and alternate stack). */
void xtc__preempt_trampoline_yield_frame(void *frame);
void xtc__preempt_trampoline_yield_frame(void *frame)
{
	xtc__preempt_trampoline_yield();
	ucontext_t *uc = (ucontext_t *)((char *)frame + sizeof(siginfo_t));
	stack_t ss;
	if (sigaltstack(NULL, &ss) == 0) {
		ss.ss_flags &= ~SS_ONSTACK;
		uc->uc_stack = ss;
	}
	sigset_t cur;
	if (pthread_sigmask(SIG_BLOCK, NULL, &cur) == 0)
		uc->uc_sigmask = cur;
}
#endif

/* ------------------------------------------------------------------ */
/* Setup                                                                */
/* ------------------------------------------------------------------ */

int xtc__preempt_signo(void)
{
	return preempt_signo;
}

static int install_handler(void)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_sigaction = handler;
	sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESTART;
	sigemptyset(&sa.sa_mask);
	if (sigaction(preempt_signo, &sa, NULL) != 0)
		return XTC_E_INTERNAL;
	return XTC_OK;
}

/* fork child: the monitor did not survive, nor did the other threads. */
static void after_fork_child(void)
{
	pthread_mutex_init(&init_mu, NULL);
	xtc__monitor_after_fork();
	xtc__ptls.slot = NULL;
	xtc__ptls.fiber = NULL;
	xtc__ptls.pend = 0;
	xtc__ptls.ring = NULL; /* the parent's ring is not ours to use */
	xtc__ptls.ring_tail = NULL;
	xtc__ptls.ring_head = NULL;
	n_stat = 0;
	self_pid = getpid();
}

/* Once per process: signal, handler, save size, code map, monitor. Go may
 * have replaced the handler (signal.Ignore): re-checked at every arm. */
static int global_init(void)
{
	pthread_mutex_lock(&init_mu);
	int rc = XTC_OK;
	if (!atomic_load(&handler_installed)) {
		self_pid = getpid();
		pthread_atfork(NULL, NULL, after_fork_child);
		preempt_signo = requested_signo ? requested_signo : SIGRTMIN + 3;
		xsave_probe();
		if ((rc = build_map()) == XTC_OK && (rc = install_handler()) == XTC_OK)
			atomic_store(&handler_installed, 1);
	} else {
		struct sigaction old;
		if (sigaction(preempt_signo, NULL, &old) == 0 &&
		    (!(old.sa_flags & SA_SIGINFO) || old.sa_sigaction != handler))
			rc = install_handler();
	}
	pthread_mutex_unlock(&init_mu);
	if (rc == XTC_OK)
		rc = xtc__monitor_start();
	return rc;
}

int xtc_preempt_set_signal(int signo)
{
	if (signo < SIGRTMIN + 3 || signo > SIGRTMAX)
		return XTC_E_RANGE;
	pthread_mutex_lock(&init_mu);
	int rc = atomic_load(&handler_installed) ? XTC_E_AGAIN : XTC_OK;
	if (rc == XTC_OK)
		requested_signo = signo;
	pthread_mutex_unlock(&init_mu);
	return rc;
}

int xtc_preempt_signal(void)
{
	return preempt_signo ? preempt_signo :
	       (requested_signo ? requested_signo : SIGRTMIN + 3);
}

int xtc_preempt_supported(void)
{
#if defined(__linux__)
	return 1;
#else
	return 0;
#endif
}

static void stats_register(xtc__ptls_t *p)
{
	static __thread int registered XTC__PTLS;
	if (registered)
		return;
	pthread_mutex_lock(&init_mu);
	int i = 0;
	while (i < n_stat && stat_ptrs[i] != NULL)
		i++;
	if (i < MAX_STAT_THREADS) {
		stat_ptrs[i] = &p->st;
		if (i == n_stat)
			n_stat++;
		registered = 1;
	}
	pthread_mutex_unlock(&init_mu);
}

static void stats_add(xtc_preempt_stats_t *a, const xtc_preempt_stats_t *b)
{
	a->signals += b->signals;
	a->ticks += b->ticks;
	a->ring_ticks += b->ring_ticks;
	a->preemptions += b->preemptions;
	a->deferrals += b->deferrals;
	a->honoured += b->honoured;
	a->stale += b->stale;
	a->refused_gocb += b->refused_gocb;
	a->refused_ctx += b->refused_ctx;
	a->refused_nopreempt += b->refused_nopreempt;
	a->refused_stack += b->refused_stack;
	a->refused_pc += b->refused_pc;
	a->tick_nets += b->tick_nets;
	a->overhead_ns += b->overhead_ns;
	a->arm_ns += b->arm_ns;
	a->own_arms += b->own_arms;
	a->stretches += b->stretches;
	if (b->stretch_max > a->stretch_max)
		a->stretch_max = b->stretch_max;
}

static void thread_exit(void *arg)
{
	(void)arg;
	xtc__ptls_t *p = &xtc__ptls;
	xtc_preempt_disarm();
	xtc__tickring_thread_exit();
	pthread_mutex_lock(&init_mu);
	for (int i = 0; i < n_stat; i++) {
		if (stat_ptrs[i] == &p->st) {
			stats_add(&retired, &p->st);
			stat_ptrs[i] = NULL;
		}
	}
	pthread_mutex_unlock(&init_mu);
}

static void exit_key_init(void)
{
	pthread_key_create(&exit_key, thread_exit);
}

/* Make sure this thread's state is torn down when it exits. */
void xtc__preempt_thread_register(void)
{
	pthread_once(&exit_once, exit_key_init);
	if (pthread_getspecific(exit_key) == NULL)
		pthread_setspecific(exit_key, (void *)1);
	stats_register(&xtc__ptls);
}

int xtc__preempt_register(int64_t interval_ns)
{
	if (interval_ns <= 0)
		return XTC_E_INVAL;
	if (!xtc_preempt_supported())
		return XTC_E_NOSYS;
	if (interval_ns < XTC__PREEMPT_MIN_SLICE_NS)
		interval_ns = XTC__PREEMPT_MIN_SLICE_NS;
	int rc = global_init();
	if (rc != XTC_OK)
		return rc;
	/* A thread that asks to be preempted gets the signal even when it
	 * inherited a mask that blocks it (the sigwait-thread pattern blocks
	 * everything in main before creating threads): without this, ticks
	 * would pend forever and preemption be silently off. Only xtc's own
	 * real-time signal is touched; it is sent per thread (tgkill), so a
	 * sigwait thread never consumes it. */
	sigset_t ps;
	sigemptyset(&ps);
	sigaddset(&ps, preempt_signo);
	if (pthread_sigmask(SIG_UNBLOCK, &ps, NULL) != 0)
		return XTC_E_INTERNAL;
	if (xtc__fiber_thread_init() != 0) /* per-thread sigaltstack */
		return XTC_E_INTERNAL;
	xtc__ptls_t *p = &xtc__ptls;
	xtc__preempt_thread_register();
	if (p->slot == NULL) {
		p->slot = xtc__monitor_slot_get((int)syscall(SYS_gettid),
		                                interval_ns);
		if (p->slot == NULL)
			return XTC_E_RESOURCE;
	}
	atomic_store_explicit(&p->slot->slice_ns, interval_ns,
	                      memory_order_relaxed);
	return XTC_OK;
}

int xtc_preempt_arm(int64_t interval_ns)
{
	int rc = xtc__preempt_register(interval_ns);
	if (rc != XTC_OK)
		return rc;
	xtc__ptls_t *p = &xtc__ptls;
	/* periodic ticks come from the monitor, which does not watch a slot
	 * with a timer: drop the backstop deadline functions left (fn.c) */
	if (atomic_load(&p->slot->timer) == XTC__TIMER_MONO)
		xtc__ctimer_delete(p->slot);
	if (interval_ns < XTC__PREEMPT_MIN_SLICE_NS)
		interval_ns = XTC__PREEMPT_MIN_SLICE_NS;
	if (p->fiber == NULL) {
		atomic_fetch_add_explicit(&p->slot->gen, 1, memory_order_relaxed);
		int64_t d = now_ns() + interval_ns;
		atomic_store_explicit(&p->slot->soft, d, memory_order_relaxed);
		atomic_store_explicit(&p->slot->deadline, d, memory_order_release);
		xtc__monitor_kick(d);
	}
	return XTC_OK;
}

int xtc_preempt_disarm(void)
{
	xtc__ptls_t *p = &xtc__ptls;
	if (p->slot == NULL)
		return XTC_OK;
	xtc__pslot_t *s = p->slot;
	p->slot = NULL; /* the handler ignores signals from here on */
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	xtc__ctimer_delete(s);
	xtc__monitor_slot_put(s);
	p->pend = 0;
	return XTC_OK;
}

uint64_t xtc_preempt_ticks(void)
{
	return xtc__ptls.st.ticks;
}

int xtc_preempt_tick_pending(void)
{
	xtc__ptls_t *p = &xtc__ptls;
	if (p->pend & XTC__PF_TICK) {
		p->pend = 0;
		return 1;
	}
	if (xtc__tickring_due())
		return xtc__tickring_reap();
	return 0;
}

void xtc_preempt_set_involuntary(int on)
{
	if (on) {
		/* objects loaded since the last build become known */
		pthread_mutex_lock(&init_mu);
		if (atomic_load(&handler_installed))
			(void)build_map();
		pthread_mutex_unlock(&init_mu);
	}
	atomic_store(&involuntary_on, on ? 1 : 0);
}

int xtc__preempt_involuntary_on(void);
int xtc__preempt_involuntary_on(void)
{
	return atomic_load_explicit(&involuntary_on, memory_order_relaxed);
}

int xtc_preempt_stats(xtc_preempt_stats_t *out)
{
	if (out == NULL)
		return XTC_E_INVAL;
	*out = xtc__ptls.st;
	return XTC_OK;
}

int xtc_preempt_stats_global(xtc_preempt_stats_t *out, uint64_t *signals_sent)
{
	if (out == NULL)
		return XTC_E_INVAL;
	memset(out, 0, sizeof *out);
	pthread_mutex_lock(&init_mu);
	stats_add(out, &retired);
	for (int i = 0; i < n_stat; i++)
		if (stat_ptrs[i])
			stats_add(out, stat_ptrs[i]);
	pthread_mutex_unlock(&init_mu);
	xtc__monitor_trigger_stats(out);
	out->cost_ns = (uint64_t)atomic_load(&xtc__preempt_cost_ewma);
	if (signals_sent)
		*signals_sent = xtc__monitor_signals_sent();
	return XTC_OK;
}

/* ------------------------------------------------------------------ */
/* No-preempt regions                                                   */
/* ------------------------------------------------------------------ */

static xtc__fiber_t *running_fiber(void)
{
	xtc__fiber_t *f = xtc__fiber_cur;
	return (f == NULL || f->is_root) ? NULL : f;
}

int xtc_preempt_disable(void)
{
	xtc__fiber_t *f = running_fiber();
	if (f == NULL)
		return XTC_E_INVAL;
	f->nopreempt++;
	return XTC_OK;
}

int xtc_preempt_enable(void)
{
	xtc__fiber_t *f = running_fiber();
	if (f == NULL || f->nopreempt <= 0)
		return XTC_E_INVAL;
	if (--f->nopreempt == 0 && (xtc__ptls.pend & XTC__PF_WANT) &&
	    xtc__gocb_depth == 0 &&
	    f == xtc__ptls.fiber) {
		xtc__ptls.st.honoured++;
		f->nopreempt++;
		preempt_yield_now();
		f->nopreempt--;
	}
	return XTC_OK;
}

/* ------------------------------------------------------------------ */
/* Run boundaries                                                       */
/* ------------------------------------------------------------------ */

static void run_begin(xtc__fiber_t *f, int64_t slice_ns, int exact,
                      int64_t now, int64_t until, int lazy);

void xtc__preempt_run_begin(xtc__fiber_t *f, int64_t slice_ns)
{
	run_begin(f, slice_ns, 0, 0, 0, 0);
}

void xtc__preempt_run_begin_at(xtc__fiber_t *f, int64_t slice_ns, int64_t now)
{
	/* the loop's clock is the monotonic clock unless the simulator
	 * replaced it with virtual time */
	run_begin(f, slice_ns, 0, xtc__clock_hook == NULL ? now : 0, 0, 0);
}

void xtc__preempt_run_begin_full(xtc__fiber_t *f, int64_t slice_ns, int64_t now)
{
	run_begin(f, slice_ns, 0, xtc__clock_hook == NULL ? now : 0, 0, 2);
}

void xtc__preempt_run_begin_polled(xtc__fiber_t *f, int64_t slice_ns,
                                   int64_t now)
{
	run_begin(f, slice_ns, 0, xtc__clock_hook == NULL ? now : 0, 0, 3);
}

void xtc__preempt_run_begin_alone(xtc__fiber_t *f, int64_t slice_ns,
                                  int64_t now, int64_t until, int lazy)
{
	run_begin(f, slice_ns, 0, xtc__clock_hook == NULL ? now : 0,
	          until > 0 ? until : 1, lazy);
}

void xtc__preempt_run_begin_exact(xtc__fiber_t *f, int64_t slice_ns)
{
	run_begin(f, slice_ns, 1, 0, 0, 0);
}

/* The slice-end window a producer assumes for the carrier's run: the
 * carrier's slice (or the adaptive one); a latency class's shorter slice
 * only costs an early expiry the handler re-arms. */
static int64_t slot_early(xtc__pslot_t *s)
{
	int64_t q = atomic_load_explicit(&xtc__preempt_adaptive_slice,
	                                 memory_order_relaxed);
	if (q <= 0)
		q = atomic_load_explicit(&s->slice_ns, memory_order_relaxed);
	return q / XTC__SLICE_EARLY_DIV;
}

/* A producer found the carrier's run contended: if it overran its slice,
 * signal it, once per run (contended 1 -> 2; run_begin resets it). The
 * generation is read first and checked again before the signal, so a run
 * that began meanwhile is not signalled for its predecessor's overrun (the
 * handler also drops a signal whose generation is not current). */
static void poll_overdue(xtc__pslot_t *s)
{
	uint32_t g = atomic_load_explicit(&s->gen, memory_order_acquire);
	if (atomic_load_explicit(&s->deadline, memory_order_acquire) == INT64_MAX)
		return;
	int64_t soft = atomic_load_explicit(&s->soft, memory_order_relaxed);
	if (soft == INT64_MAX || now_ns() < soft)
		return;
	int one = 1;
	if (atomic_load_explicit(&s->gen, memory_order_acquire) == g &&
	    atomic_compare_exchange_strong(&s->contended, &one, 2) &&
	    atomic_load_explicit(&s->gen, memory_order_acquire) == g)
		(void)xtc__monitor_signal_run(s);
}

/* The safety net for a run that producers time by polling: if no producer
 * comes back after its slice end, the monitor signals it this much later
 * (a carrier with a tick net is cut by the first tick after its slice end
 * instead: preempt_monitor.c, trigger 3.). */
static int64_t net_grace(xtc__pslot_t *s)
{
	int64_t g = 4 * atomic_load_explicit(&s->slice_ns, memory_order_relaxed);
	int64_t n = atomic_load_explicit(&xtc__preempt_net_grace_ns,
	                                 memory_order_relaxed);
	return g > n ? g : n;
}

static void net_watch(xtc__pslot_t *s, uint32_t g, int64_t soft)
{
	int64_t n = soft + net_grace(s);
	int64_t cur = atomic_load_explicit(&s->net, memory_order_relaxed);
	/* only ever earlier (an alone run's net is its far hard deadline) */
	while (n < cur)
		if (atomic_compare_exchange_weak(&s->net, &cur, n)) {
			if (atomic_load_explicit(&s->gen,
			                         memory_order_acquire) == g)
				xtc__monitor_net(s, n);
			break;
		}
}

void xtc__preempt_contend_polled(xtc__pslot_t *s)
{
	if (s == NULL)
		return;
	uint32_t g = atomic_load_explicit(&s->gen, memory_order_acquire);
	if (atomic_exchange(&s->contended, 1) ||
	    atomic_load(&s->deadline) == INT64_MAX)
		return;
	net_watch(s, g, atomic_load_explicit(&s->soft, memory_order_relaxed));
}

void xtc__preempt_contend(xtc__pslot_t *s)
{
	if (s == NULL)
		return;
	/* the carrier itself (work made ready by its run) arms its own timer:
	 * nobody else will come; any other thread is a producer, who polls */
	int own = xtc__ptls.slot == s;
	if (atomic_load_explicit(&s->contended, memory_order_relaxed)) {
		if (!own)
			poll_overdue(s);
		return;
	}
	if (!atomic_load_explicit(&s->timer, memory_order_relaxed)) {
		atomic_store(&s->contended, 1);
		xtc__monitor_kick(atomic_load_explicit(&s->soft,
		                                       memory_order_relaxed));
		return;
	}
	/* one contender per run acts (seq_cst: pairs with run_begin's
	 * re-check after it armed its own timer) */
	if (atomic_exchange(&s->contended, 1)) {
		if (!own)
			poll_overdue(s);
		return;
	}
	if (atomic_load(&s->deadline) == INT64_MAX)
		return; /* between runs: the next run_begin sees the work */
	int64_t soft = atomic_load_explicit(&s->soft, memory_order_relaxed);
	/* the carrier itself reads no clock (a send or spawn per run made it
	 * a third read per dispatch): its run's start bounds now from below,
	 * so it arms the slice end, and if that has passed already (a run
	 * that overran alone) the timer expires at once */
	int64_t now = own ? xtc__ptls.run_start : now_ns();
	if (soft <= now) {
		int one = 1;
		if (atomic_compare_exchange_strong(&s->contended, &one, 2))
			(void)xtc__monitor_signal_run(s); /* overdue: now */
	} else if (own || now >= soft - slot_early(s)) {
		/* the first contender of a run nobody timed yet that is in its
		 * slice-end window: it may be the only contender (a
		 * closed-loop client waits for its answer), so the slice end
		 * is armed, from the producer's CPU for a producer */
		xtc__ctimer_want(s, soft, slot_early(s), now);
	} else {
		/* a young run (most are short): later producers poll it, the
		 * monitor's net is behind them. Arming here too cost 30-60%
		 * on the 10% A1 tail on a slow hypervisor (interleaved A/B:
		 * 50 us slice p99 249-357 us armed, 184-221 polled, 208-235
		 * with this rule) */
		net_watch(s, atomic_load_explicit(&s->gen, memory_order_acquire),
		          soft);
	}
}

/* The carrier's timer after a run's deadlines were published: soft for a
 * contended run, the hard deadline of an alone run when it is a real one
 * (a loop timer), nothing for an alone run whose only deadline is the
 * safety net (the monitor watches `net`: a lone request costs no timer
 * syscall). Then the Dekker re-check with xtc__preempt_contend: a producer
 * that contended before our arm may have been overwritten by it. */
static void trigger_run(xtc__pslot_t *s, int64_t soft, int64_t hard,
                        int64_t now, int64_t cap, int lazy)
{
	int64_t early = xtc__ptls.early;

	if (!atomic_load_explicit(&s->timer, memory_order_relaxed)) {
		xtc__monitor_kick(hard);
		return;
	}
	if (lazy == 3) {
		/* producers are active (their work waits in the ring or the
		 * inbox): they time this run by polling (xtc__preempt_contend),
		 * the monitor is the safety net; no timer syscall per run */
		int64_t n = soft + net_grace(s);
		atomic_store_explicit(&s->net, n, memory_order_release);
		xtc__monitor_net(s, n);
		/* an expiry left armed by an earlier run that lands before
		 * this run's slice-end window would be an early fire: a
		 * ~40 us stall on a slow hypervisor, against one far
		 * disarm now */
		int64_t at = atomic_load_explicit(&s->timer_at,
		                                  memory_order_relaxed);
		if (at != INT64_MAX && at > now && at < soft - early)
			xtc__ctimer_arm(s, INT64_MAX);
		return;
	}
	if (soft == hard) {
		atomic_store_explicit(&s->net, INT64_MAX, memory_order_relaxed);
		/* work known to run long gets its whole slice (one arm per
		 * slice of it); a fresh run keeps the window */
		xtc__ctimer_want(s, soft, lazy == 2 ? 0 : early, now);
		return;
	}
	if (hard >= cap) {
		atomic_store_explicit(&s->net, hard, memory_order_release);
		xtc__monitor_net(s, hard);
	} else if (lazy == 1) {
		/* long work's turn among demoted work: the turn's end (one
		 * arm per turn). Work that yields by itself starts a turn at
		 * every dispatch: the end armed for an earlier one serves
		 * while it falls in the turn's last half slice (the handler
		 * takes it there: hard_early). Re-arming at each moving end
		 * was a timer syscall per xtc_yield: two fibers yielding to
		 * each other on a preemptive executor paid 4.5 us a yield
		 * instead of 19 ns. */
		atomic_store_explicit(&s->net, INT64_MAX, memory_order_relaxed);
		xtc__ctimer_want(s, hard, early, now);
		return;
	} else if (lazy) {
		/* a fresh run while only demoted work waits, a bound that
		 * moves with every run: no timer syscall per run. New work
		 * comes from producers, who poll the run
		 * (xtc__preempt_contend); the demoted work's bound is the
		 * monitor's, coarsened to the net grace: an arm per short run
		 * cost more than the whole run on a slow hypervisor */
		int64_t n = soft + net_grace(s);
		if (n < hard)
			n = hard;
		atomic_store_explicit(&s->net, n, memory_order_release);
		xtc__monitor_net(s, n);
		return;
	} else {
		/* a loop timer is the deadline: arm it exactly (an earlier
		 * expiry left by a previous run would cost an interrupt and a
		 * re-arm; the next runs of the same wait find it armed) */
		atomic_store_explicit(&s->net, INT64_MAX, memory_order_relaxed);
		if (atomic_load_explicit(&s->timer_at, memory_order_relaxed) != hard)
			xtc__ctimer_arm(s, hard);
	}
	if (atomic_load(&s->contended))
		xtc__ctimer_want(s, soft, early, now);
}

/* Close a cost measurement: lateness plus redirect-to-next-dispatch. */
static void cost_close(xtc__ptls_t *p, int64_t now)
{
	int64_t c = now - p->pc_at + p->pc_late;
	p->pc_at = 0;
	if (c <= 0 || c > 1000000)
		return; /* the carrier did something else meanwhile */
	p->ovh_ns += c < 100000 ? c : 100000;
	int64_t e = atomic_load_explicit(&xtc__preempt_cost_ewma,
	                                 memory_order_relaxed);
	/* a typical cost, not the outliers: a carrier the kernel descheduled
	 * between the signal and the next dispatch (other load on the
	 * machine) moves the estimate by at most a doubling per 16 samples */
	if (c > 100000)
		c = 100000;
	if (e > 0 && c > 2 * e)
		c = 2 * e;
	e = e == 0 ? c : e + (c - e) / 16;
	atomic_store_explicit(&xtc__preempt_cost_ewma, e, memory_order_relaxed);
	xtc__quantum.cost(c);
}

/* The budget's decision for one window of w ns, idle of them idle and
 * ovh of them spent on preemption: the next slice shift. Pure, so the test
 * checks the policy without a machine that makes preemption expensive. */
int xtc__preempt_budget_next(int stretch, int64_t w, int64_t idle,
                             int64_t ovh, int pct)
{
	if (pct <= 0 || w <= 0)
		return 0;
	/* the carrier's busy share of the window: preemption that runs on
	 * idle capacity costs nobody anything, so the slice is only
	 * lengthened while the carrier is nearly saturated */
	int64_t busy = w - idle;
	int hot = busy * 100 >= w * BUDGET_BUSY_PCT;
	if (hot && ovh * 100 > w * pct) {
		/* in one step by the overrun (the overhead is about
		 * proportional to 1 / slice): a window at overload builds a
		 * backlog that takes many more to drain */
		int k = 1;
		while (k < STRETCH_MAX && ovh * 100 > ((w * pct) << k))
			k++;
		stretch += k;
		return stretch > STRETCH_MAX ? STRETCH_MAX : stretch;
	}
	/* a halving doubles the overhead: shorten only where the carrier
	 * stays under the hysteresis mark with that added (a carrier at
	 * 50-70% load that halved from its measured room alone fell back
	 * into overload, built a backlog for a window, and stretched again:
	 * the oscillation was the tail), or the cost stays under half the
	 * budget */
	if (stretch > 0 && ((busy + ovh) * 100 < w * BUDGET_IDLE_PCT ||
	                    ovh * 400 < w * pct))
		return stretch - 1;
	return stretch;
}

/* Whether the window so far already spent the budget of a whole one, or
 * spends at twice the budget's rate, while the carrier was saturated:
 * close it now. At overload every window's worth of waiting builds
 * backlog (a 10 ms window at twice the capacity left ~3 ms of it, most of
 * a short point's p99); the decision on a partial window of at least a
 * tenth is the same ratio. The rate test is what a burst needs: a clump
 * of long requests at 70% load with a 50 us slice on a guest where a
 * preemption costs ~50 us spends ~45% of the carrier on preemption, and
 * waiting for a whole window's budget (4.4 ms of it) kept the carrier
 * overloaded for that long at every clump. xtcbench A1 at 50% load, 50 us
 * slice, 200 ms points, three interleaved rounds of three repetitions:
 * 583-596 -> 470-526 preemptions and 37-38 -> 30-34 ms of overhead per
 * point (the budget's 20% was overrun before, not after); the short p99
 * could not be told apart under the guest's generator stalls. */
int xtc__preempt_budget_early(int64_t w, int64_t idle, int64_t ovh, int pct)
{
	return pct > 0 && w >= XTC_PREEMPT_BUDGET_WINDOW_NS / 10 &&
	       (ovh * 100 > XTC_PREEMPT_BUDGET_WINDOW_NS * pct ||
	        ovh * 100 > 2 * w * pct) &&
	       (w - idle) * 100 >= w * BUDGET_BUSY_PCT;
}

/* Close a budget window (design note: "Overhead budget"). The simulator's
 * virtual clock has no trigger cost: no stretching there. */
static void budget_window(xtc__ptls_t *p, int64_t now)
{
	int64_t w = now - p->ovh_win;

	/* a window that spanned a long park says nothing: restart */
	if (p->ovh_win != 0 && w < 4 * XTC_PREEMPT_BUDGET_WINDOW_NS &&
	    xtc__clock_hook == NULL) {
		int n = xtc__preempt_budget_next(p->stretch, w, p->ovh_idle,
		    p->ovh_ns, atomic_load_explicit(&budget_pct,
		                                    memory_order_relaxed));
		if (n > p->stretch) {
			p->st.stretches++;
			if ((1u << n) > p->st.stretch_max)
				p->st.stretch_max = 1u << n;
		}
		p->stretch = n;
	}
	p->st.overhead_ns += (uint64_t)(p->ovh_ns > 0 ? p->ovh_ns : 0);
	p->ovh_ns = 0;
	p->ovh_idle = 0;
	p->ovh_win = now;
}

int xtc_preempt_set_budget(int percent)
{
	if (percent < 0 || percent > 100)
		return XTC_E_INVAL;
	atomic_store(&budget_pct, percent);
	return XTC_OK;
}

int xtc_preempt_get_budget(void)
{
	return atomic_load(&budget_pct);
}

/* A clock-checked carrier's run (xtc_exec_set_preempt_coop): its slice
 * end is all there is. A run of xtc_fn (exact) is not cut: its deadline is
 * the function's, kept by fn.c. */
static int64_t coop_slice_of(const xtc__ptls_t *p, int64_t slice_ns)
{
	int64_t base = atomic_load_explicit(&xtc__preempt_adaptive_slice,
	                                    memory_order_relaxed);
	if (base <= 0)
		base = p->coop_slice;
	return slice_ns <= 0 || slice_ns > base ? base : slice_ns;
}

static void coop_begin(xtc__ptls_t *p, int64_t slice_ns, int exact,
                       int64_t now)
{
	if (exact) {
		p->coop_due = 0;
		return;
	}
	slice_ns = coop_slice_of(p, slice_ns);
	if (now <= 0)
		now = xtc_clock_mono(); /* the simulator's virtual clock */
	p->run_start = now;
	p->slice = slice_ns;
	p->early = slice_ns / XTC__SLICE_EARLY_DIV;
	p->hard = now + slice_ns;
	p->coop_due = now + slice_ns;
}

/* Batched publication. Back-to-back runs that producers time (lazy 3: their
 * work waits or was just drained) share one publication while its slice
 * end is at least half a slice away: the slot keeps the deadline and
 * generation of the batch's first run, and run_end leaves them. Producers
 * read the slot at every submission; a carrier that rewrote it per run
 * took the line back from their CPU each time (measured: ~80 ns a request
 * on a 2-vCPU guest, a tenth of a 0.5 us request's whole cost). What it
 * changes: a run of the batch may be cut up to half a slice early, which
 * is the slice-end window every trigger already allows (preempt_monitor.c); a
 * signal that lands between two runs is stale (handler); only a carrier
 * with a tick net batches (the monitor, which would see a deadline that
 * outlives its run, leaves such slots alone). Any other writer of the
 * slot (a redirect, a re-ask, a nested run, a Go callback, a producer's
 * signal: contended 2) changes what is checked here and ends the batch. */
static int batch_keeps(xtc__ptls_t *p, xtc__pslot_t *s, int lazy,
                       int64_t soft, int64_t now)
{
	if (!p->batch || lazy != 3)
		return 0;
	int64_t b = p->batch_soft;
	if (b > soft || b - now < p->slice / 2 ||
	    atomic_load_explicit(&s->gen, memory_order_relaxed) != p->batch_gen ||
	    atomic_load_explicit(&s->deadline, memory_order_relaxed) != b ||
	    atomic_load_explicit(&s->contended, memory_order_relaxed) != 1) {
		p->batch = 0;
		return 0;
	}
	p->hard = b;
	return 1;
}

/* A thread with its own slice timer and no tick net: one that runs
 * deadline functions outside any carrier (fn.c). */
static inline int plain_timer(xtc__pslot_t *s)
{
	return atomic_load_explicit(&s->timer, memory_order_relaxed) ==
	       XTC__TIMER_MONO;
}

/* A deadline function's run on such a thread: the monitor signals it at
 * its deadline (net = deadline), and the thread's own timer is the
 * backstop a grace later, for when the monitor is not scheduled in time
 * (an oversubscribed machine woke it 16-250 ms late: a 200 us function
 * then ran 35 ms uncut). The backstop stays armed across runs while it
 * falls within [deadline, deadline + grace] of the new run, so
 * back-to-back functions arm it about once per grace of busy time, and it
 * expires between runs (stale, ignored) at most as often. Rejected: the
 * timer at the deadline itself (an arm per launch whose deadline moved,
 * and an expiry per function that finished early: ~13 and ~40 us each
 * where the hypervisor is slow). */
static void trigger_exact(xtc__pslot_t *s, int64_t hard, int64_t slice_ns)
{
	atomic_store_explicit(&s->net, hard, memory_order_release);
	xtc__monitor_kick(hard);
	int64_t grace = 4 * slice_ns;
	if (grace < XTC__PREEMPT_NET_GRACE_NS)
		grace = XTC__PREEMPT_NET_GRACE_NS;
	int64_t at = atomic_load_explicit(&s->timer_at, memory_order_relaxed);
	if (at < hard || at > hard + grace)
		xtc__ctimer_arm(s, hard + grace);
}

/* until: 0 = a contended run (hard = soft); > 0 see run_begin_alone.
 * lazy: 1 see run_begin_alone, 2 see run_begin_full. */
static void run_begin(xtc__fiber_t *f, int64_t slice_ns, int exact,
                      int64_t now, int64_t until, int lazy)
{
	xtc__ptls_t *p = &xtc__ptls;
	p->fiber = f;
	p->pend = 0;
	if (p->ring)
		xtc__tickring_resume();
	xtc__pslot_t *s = p->slot;
	if (s == NULL) {
		if (p->coop_slice > 0)
			coop_begin(p, slice_ns, exact, now);
		return;
	}
	int64_t asked = slice_ns;
	if (!exact) {
		/* the carrier's slice (or the adaptive one); a class latency
		 * budget may only shorten it */
		int64_t base = atomic_load_explicit(&xtc__preempt_adaptive_slice,
		                                    memory_order_relaxed);
		if (base <= 0)
			base = atomic_load_explicit(&s->slice_ns, memory_order_relaxed);
		if (slice_ns <= 0 || slice_ns > base)
			slice_ns = base;
		if (slice_ns < XTC__PREEMPT_MIN_SLICE_NS)
			slice_ns = XTC__PREEMPT_MIN_SLICE_NS;
	}
	if (now <= 0)
		now = now_ns();
	if (p->pc_at != 0)
		cost_close(p, now);
	if (p->idle_at != 0) {
		/* idle time: the adaptive quantum's load and the budget's (the
		 * spell that ends now belongs to the window it ends in) */
		if (now > p->idle_at) {
			p->ovh_idle += now - p->idle_at;
			if (atomic_load_explicit(&xtc__preempt_adaptive_slice,
			                         memory_order_relaxed) > 0)
				xtc__quantum.idle(now - p->idle_at);
		}
		p->idle_at = 0;
	}
	if (!exact) {
		if (now - p->ovh_win >= XTC_PREEMPT_BUDGET_WINDOW_NS ||
		    xtc__preempt_budget_early(now - p->ovh_win, p->ovh_idle,
		        p->ovh_ns, atomic_load_explicit(&budget_pct,
		                                        memory_order_relaxed)))
			budget_window(p, now);
		slice_ns <<= p->stretch;
	}
	int64_t soft = now + slice_ns, hard = soft;
	int64_t cap = now + atomic_load_explicit(&xtc__preempt_alone_ns,
	                                         memory_order_relaxed);
	if (until > 0) {
		hard = cap;
		if (until < hard)
			hard = until;
		if (hard < soft)
			hard = soft;
	}
	p->run_start = now;
	p->slice = slice_ns;
	p->early = slice_ns / XTC__SLICE_EARLY_DIV;
	/* a turn among demoted work ends within its last half slice (the
	 * timer armed for the turn's first dispatch serves the next ones of
	 * work that yields by itself); a loop timer's deadline is exact */
	p->hard_early = lazy == 1 ? p->early : 0;
	p->hard = hard;
	/* clock-checked with an involuntary backstop: the points cut at the
	 * slice, the interrupts only at the backstop's */
	if (p->coop_slice > 0)
		p->coop_due = exact ? 0 : now + coop_slice_of(p, asked);
	if (batch_keeps(p, s, lazy, soft, now))
		return;
	uint32_t g = atomic_load_explicit(&s->gen, memory_order_relaxed);
	atomic_store_explicit(&s->contended, lazy == 3, memory_order_relaxed);
	atomic_store_explicit(&s->soft, soft, memory_order_relaxed);
	atomic_store_explicit(&s->gen, g + 1, memory_order_relaxed);
	atomic_store_explicit(&s->deadline, hard, memory_order_release);
	/* a run producers time on a carrier with a tick net opens a batch */
	p->batch = lazy == 3 && (atomic_load_explicit(&s->timer,
	    memory_order_relaxed) & XTC__TIMER_TICK);
	p->batch_gen = g + 1;
	p->batch_soft = soft;
	/* an alone run that gets contended kicks the trigger itself */
	if (exact && plain_timer(s))
		trigger_exact(s, hard, slice_ns);
	else
		trigger_run(s, soft, hard, now, cap, lazy);
}

static void run_clear(xtc__ptls_t *p)
{
	xtc__pslot_t *s = p->slot;
	p->batch = 0;
	if (s != NULL) {
		atomic_store_explicit(&s->deadline, INT64_MAX, memory_order_relaxed);
		atomic_store_explicit(&s->net, INT64_MAX, memory_order_relaxed);
	}
}

void xtc__preempt_run_end(void)
{
	xtc__ptls_t *p = &xtc__ptls;
	/* a batch's publication outlives its runs (batch_keeps) */
	if (!p->batch)
		run_clear(p);
	p->fiber = NULL;
	p->coop_due = 0;
}

void xtc__preempt_run_save(xtc__prun_t *out)
{
	xtc__ptls_t *p = &xtc__ptls;
	out->fiber = p->fiber;
	out->start = p->run_start;
	out->slice = p->slice;
	out->hard = p->hard;
	out->contended = p->slot != NULL &&
	                 atomic_load_explicit(&p->slot->contended,
	                                      memory_order_relaxed);
	out->force_invol = p->force_invol;
	out->hook = p->yield_hook;
	out->hook_arg = p->yield_arg;
	out->coop_due = p->coop_due;
}

/* A run continues (after a nested run or a Go callback) with deadlines
 * that may be past: the trigger asks at once then. */
static void republish(xtc__pslot_t *s, int64_t soft, int64_t hard)
{
	int64_t d = atomic_load(&s->contended) ? soft : hard;
	if (!atomic_load_explicit(&s->timer, memory_order_relaxed)) {
		xtc__monitor_kick(d);
		return;
	}
	int64_t now = now_ns();
	int64_t cap = now + atomic_load_explicit(&xtc__preempt_alone_ns,
	                                         memory_order_relaxed);
	if (d == hard && hard >= cap && soft != hard) {
		atomic_store_explicit(&s->net, hard, memory_order_release);
		xtc__monitor_net(s, hard);
		return;
	}
	atomic_store_explicit(&s->net, INT64_MAX, memory_order_relaxed);
	xtc__ctimer_arm(s, d > now ? d : now + 1000);
}

void xtc__preempt_run_restore(const xtc__prun_t *in)
{
	xtc__ptls_t *p = &xtc__ptls;
	p->force_invol = in->force_invol;
	p->yield_hook = in->hook;
	p->yield_arg = in->hook_arg;
	p->fiber = in->fiber;
	p->run_start = in->start;
	p->slice = in->slice;
	p->early = in->slice / XTC__SLICE_EARLY_DIV;
	p->hard_early = 0;
	p->hard = in->hard;
	p->batch = 0;
	xtc__pslot_t *s = p->slot;
	if (p->coop_slice > 0)
		p->coop_due = in->fiber != NULL && in->coop_due != 0 ?
		              in->coop_due : 0;
	if (s == NULL || in->fiber == NULL)
		return;
	uint32_t g = atomic_load_explicit(&s->gen, memory_order_relaxed);
	/* a contention seen before or during the nested run still holds */
	if (in->contended)
		atomic_store_explicit(&s->contended, 1, memory_order_relaxed);
	atomic_store_explicit(&s->soft, in->start + in->slice,
	                      memory_order_relaxed);
	atomic_store_explicit(&s->gen, g + 1, memory_order_relaxed);
	atomic_store_explicit(&s->deadline, in->hard, memory_order_release);
	republish(s, in->start + in->slice, in->hard);
}

void xtc__preempt_gocb_pause(void)
{
	xtc__ptls_t *p = &xtc__ptls;
	xtc__pslot_t *s = p->slot;
	p->batch = 0; /* the run's own publication from here on */
	if (s == NULL)
		return;
	uint32_t g = atomic_load_explicit(&s->gen, memory_order_relaxed);
	atomic_store_explicit(&s->deadline, INT64_MAX, memory_order_relaxed);
	atomic_store_explicit(&s->gen, g + 1, memory_order_release);
	/* no expiry may land while Go code runs on this thread */
	if (atomic_load_explicit(&s->timer, memory_order_relaxed) &&
	    atomic_load_explicit(&s->timer_at, memory_order_relaxed) != INT64_MAX)
		xtc__ctimer_arm(s, INT64_MAX);
}

void xtc__preempt_gocb_resume(void)
{
	xtc__ptls_t *p = &xtc__ptls;
	xtc__pslot_t *s = p->slot;
	xtc__tick_net_resume();
	if (s == NULL || p->fiber == NULL)
		return;
	/* the run continues: its deadline (maybe past: then the monitor asks
	 * at once) under a fresh generation; soft and contended are kept */
	uint32_t g = atomic_load_explicit(&s->gen, memory_order_relaxed);
	atomic_store_explicit(&s->gen, g + 1, memory_order_relaxed);
	atomic_store_explicit(&s->deadline, p->hard, memory_order_release);
	republish(s, p->run_start + p->slice, p->hard);
}

int xtc__preempt_check_due(struct xtc_loop *loop)
{
	(void)loop;
	return xtc__preempt_due();
}

void xtc__preempt_idle(void)
{
	xtc__ptls_t *p = &xtc__ptls;
	xtc__pslot_t *s = p->slot;
	xtc__preempt_run_end();
	run_clear(p); /* an idle carrier publishes nothing, batch or not */
	if (p->ring)
		xtc__tickring_pause();
	/* an idle carrier gets no interrupt: disarm a pending expiry */
	if (s != NULL && atomic_load_explicit(&s->timer, memory_order_relaxed) &&
	    atomic_load_explicit(&s->timer_at, memory_order_relaxed) != INT64_MAX)
		xtc__ctimer_arm(s, INT64_MAX);
	if (p->idle_at == 0)
		p->idle_at = now_ns();
}

void xtc__preempt_idle_from(void)
{
	xtc__ptls_t *p = &xtc__ptls;
	/* the run clock (now_ns), not the loop's: run_begin closes it */
	if (p->slot != NULL && p->idle_at == 0)
		p->idle_at = now_ns();
}

/* ------------------------------------------------------------------ */
/* Executor                                                             */
/* ------------------------------------------------------------------ */

int xtc__preempt_exec_configure(struct xtc_exec *exec, int64_t interval_ns)
{
	if (exec == NULL)
		return XTC_E_INVAL;
	if (interval_ns > 0 && !xtc_preempt_supported())
		return XTC_E_NOSYS;
	return XTC_OK;
}

int xtc__preempt_carrier_start(int64_t interval_ns, int on_uring, int coop)
{
	if (interval_ns <= 0)
		return XTC_OK;
	/* Clock-checked: no slot (the monitor and producers leave the
	 * carrier alone), no timer, no ring: nothing interrupts it. */
	if (coop) {
		xtc__ptls.coop_slice = interval_ns;
		xtc__ptls.coop_due = 0;
		if (!xtc__preempt_involuntary_on())
			return XTC_OK;
		/* the involuntary path as a backstop for code without points:
		 * the usual trigger at a multiple of the slice */
		interval_ns = interval_ns > INT64_MAX / XTC__COOP_BACKSTOP ?
		              INT64_MAX : interval_ns * XTC__COOP_BACKSTOP;
	}
	/* Cooperative on io_uring: the tick ring, no signal. The involuntary
	 * path needs the signal, so it uses the monitor. */
	if (!xtc__preempt_involuntary_on() && on_uring &&
	    xtc_preempt_arm_ring(interval_ns) == XTC_OK)
		return XTC_OK;
	/* no periodic tick: the loop publishes a deadline per run */
	int rc = xtc__preempt_register(interval_ns);
	if (rc != XTC_OK)
		return rc;
	/* the carrier's own slice timer (preempt_monitor.c); without one the carrier
	 * stays on the monitor-driven path, counted */
	xtc__pslot_t *s = xtc__ptls.slot;
	if (!(atomic_load(&s->timer) & XTC__TIMER_TICK) &&
	    xtc__ctimer_create(s, (int)syscall(SYS_gettid), 1) != XTC_OK)
		atomic_fetch_add(&xtc__ctimer_fallbacks, 1);
	/* its parks wake for loop timers: no 50 us coalescing either */
	(void)prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
	return XTC_OK;
}

void xtc__preempt_carrier_stop(void)
{
	xtc__ptls.coop_slice = 0;
	xtc__ptls.coop_due = 0;
	xtc_preempt_disarm();
	xtc_preempt_disarm_ring();
}

/* Go callbacks (xtc__gocb_enter, loop_int.h) reach preemption through the
 * fiber layer's hooks. */
__attribute__((constructor)) static void preempt_upcalls(void)
{
	xtc__gocb_hooks.pause = xtc__preempt_gocb_pause;
	xtc__gocb_hooks.resume = xtc__preempt_gocb_resume;
}
