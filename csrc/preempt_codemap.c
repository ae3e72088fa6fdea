/*
 * preempt_codemap.c - the map of code a preemption may interrupt: which
 * program counters are preemptible (the handler asks per signal).
 *
 * Model:
 *  - What may be interrupted (preempt.c's design note, "Safety"): under
 *    the default policy only code declared preemptible (preempt_allow.c:
 *    the XTC_PREEMPTIBLE section of every loaded object, found from its
 *    section headers, the objects allowed by name, the ranges declared at
 *    run time); under XTC_PREEMPT_POLICY_PROGRAM the executable's own text
 *    too; under XTC_PREEMPT_POLICY_ANY (the earlier default, an opt-in)
 *    the executable segments of every loaded object except libc, ld.so,
 *    the vDSO and the other system/sanitizer libraries (they take locks:
 *    preempting malloc deadlocks or corrupts the heap).
 *  - The table is built once, and again when the involuntary path is
 *    switched on, the policy or the allowed objects change, or objects
 *    were loaded since. The runtime's own code is denied under every
 *    policy, as the code map records it by construction (rtcode_int.h:
 *    every runtime object brackets its text sections and registers them
 *    in the xtc_rtmap section, so neither file names, nor symbol names,
 *    nor link order, nor a stripped symbol table matter), and so are the
 *    ranges the user declared unsafe. A PC in no known object (code loaded
 *    later, JIT code not declared) is denied. If the map lacks a runtime
 *    function it must contain, the involuntary path declines.
 *
 * Invariants: the map is built and replaced under xtc__preempt_init_mu
 * and published with a release store; the handler reads it with loads and
 * a binary search only (async-signal-safe); a map is never freed while a
 * handler may read it.
 *
 * Rejected: a list of runtime file names (rtcode_int.h says why); deciding
 * per signal with dladdr (takes the loader's lock: not async-signal-safe).
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
#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <unistd.h>

#include "preempt_int.h"

typedef struct prange {
	uintptr_t lo, hi;
	int allow;
	int is_main;       /* a segment (or the static window) of the program */
} prange_t;

typedef struct pmap pmap_t;
struct pmap {
	prange_t *objs;    /* sorted executable segments, allow flag */
	size_t n_objs;
	prange_t *rt;      /* sorted runtime code ranges (deny) */
	size_t n_rt;
	int rt_known;      /* runtime code located */
	int n_files;       /* runtime source files in the code map */
	/* what was declared preemptible (preempt_allow.c), sorted: the
	 * XTC_PREEMPTIBLE sections, the objects allowed by name and, under
	 * XTC_PREEMPT_POLICY_PROGRAM, the program's own text */
	prange_t *allow;
	size_t n_allow;
	int policy;        /* XTC_PREEMPT_POLICY_* the map was built for */
	unsigned cfg;      /* cfg_gen at build */
	unsigned long long adds; /* dl_iterate_phdr's load count at build */
	struct pmap *prev; /* retired maps stay reachable (never freed) */
};

/* Published with release; readers (the handler) load with acquire. Old
 * maps are never freed: a handler may still be reading one. */
static _Atomic(pmap_t *) cur_map;
/* bumped when the policy or the allowed objects change: the next build
 * must not reuse the current map */
static unsigned cfg_gen;

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

static int vec_push_main(vec_t *a, uintptr_t lo, uintptr_t hi, int allow,
                         int is_main)
{
	if (a->n == a->cap) {
		size_t nc = a->cap ? a->cap * 2 : 64;
		prange_t *nv = realloc(a->v, nc * sizeof *nv);
		if (!nv)
			return -1;
		a->v = nv;
		a->cap = nc;
	}
	a->v[a->n++] = (prange_t){ lo, hi, allow, is_main };
	return 0;
}

static int vec_push(vec_t *a, uintptr_t lo, uintptr_t hi, int allow)
{
	return vec_push_main(a, lo, hi, allow, 0);
}

static int cmp_range(const void *a, const void *b)
{
	const prange_t *x = a, *y = b;
	return x->lo < y->lo ? -1 : x->lo > y->lo;
}

struct phdr_ctx {
	vec_t *objs;
	vec_t *allow;        /* declared ranges (sections, allowed objects) */
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
	/* allowed by name: the whole object (the runtime's code is denied
	 * before this map is consulted); a shared libxtc never */
	int named = !vdso && !(holds_rt && !is_main) && name[0] != '\0' &&
	            xtc__preempt_object_allowed(name);
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X))
			continue;
		uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
		if (vec_push_main(c->objs, lo, lo + ph->p_memsz, allow,
		                  is_main) != 0 ||
		    (named && vec_push(c->allow, lo, lo + ph->p_memsz, 1) != 0))
			return 1;
	}
	uintptr_t slo, shi;
	if (!vdso && xtc__preempt_section_of(info, is_main, holds_rt, &slo,
	                                     &shi) == 0 &&
	    vec_push(c->allow, slo, shi, 1) != 0)
		return 1;
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
		if (vec_push_main(objs, entry, rt_lo, 1, 1) != 0 ||
		    vec_push(objs, rt_lo, seg.hi, 0) != 0)
			return -1;
		return 0;
	}
	return -1;
}

static unsigned long long current_adds(void);

/* Caller holds xtc__preempt_init_mu. Rebuilds only when objects were loaded since. */
int xtc__preempt_map_build(void)
{
	pmap_t *old = atomic_load(&cur_map);
	int policy = xtc__preempt_policy();
	if (old != NULL && old->adds == current_adds() && old->cfg == cfg_gen &&
	    old->policy == policy)
		return XTC_OK;
	pmap_t *pm = calloc(1, sizeof *pm);
	if (!pm)
		return XTC_E_NOMEM;
	vec_t objs = { 0 }, rt = { 0 }, allow = { 0 };
	struct phdr_ctx c = { .objs = &objs, .allow = &allow,
	                      .rt_addr = (uintptr_t)&xtc_preempt_arm,
	                      .vdso = (uintptr_t)getauxval(AT_SYSINFO_EHDR) };
	dl_iterate_phdr(phdr_cb, &c);
	pm->rt_known = load_code_map(&rt, &pm->n_files) == 0;
	/* a static program: its own text is the window between its entry
	 * point and the runtime (static_user_range), which only the policies
	 * that allow the program's text need; declared code needs no window */
	if (pm->rt_known && c.main_static &&
	    (!c.rt_is_main || static_user_range(&rt, &objs) != 0) &&
	    policy != XTC_PREEMPT_POLICY_DECLARED)
		pm->rt_known = 0;
	if (!pm->rt_known)
		rt.n = 0;
	if (policy == XTC_PREEMPT_POLICY_PROGRAM)
		for (size_t i = 0; i < objs.n; i++)
			if (objs.v[i].is_main && objs.v[i].allow)
				(void)vec_push(&allow, objs.v[i].lo, objs.v[i].hi, 1);
	qsort(objs.v, objs.n, sizeof *objs.v, cmp_range);
	if (rt.n)
		qsort(rt.v, rt.n, sizeof *rt.v, cmp_range);
	/* sorted and without overlaps (an allowed object's section lies in
	 * its segments): find_range is a binary search */
	if (allow.n) {
		qsort(allow.v, allow.n, sizeof *allow.v, cmp_range);
		size_t w = 0;
		for (size_t i = 0; i < allow.n; i++) {
			if (w > 0 && allow.v[i].lo <= allow.v[w - 1].hi) {
				if (allow.v[i].hi > allow.v[w - 1].hi)
					allow.v[w - 1].hi = allow.v[i].hi;
				continue;
			}
			allow.v[w++] = allow.v[i];
		}
		allow.n = w;
	}
	pm->allow = allow.v;
	pm->n_allow = allow.n;
	pm->policy = policy;
	pm->cfg = cfg_gen;
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
int xtc__preempt_map_allows(uintptr_t pc)
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
	if (pm->policy == XTC_PREEMPT_POLICY_ANY) {
		const prange_t *r = find_range(pm->objs, pm->n_objs, pc);
		return r != NULL && r->allow;
	}
	return find_range(pm->allow, pm->n_allow, pc) != NULL ||
	       xtc__preempt_declared(pc);
}

int xtc__preempt_map_rebuild(void)
{
	pthread_mutex_lock(&xtc__preempt_init_mu);
	cfg_gen++;
	int rc = atomic_load(&cur_map) != NULL ? xtc__preempt_map_build() : XTC_OK;
	pthread_mutex_unlock(&xtc__preempt_init_mu);
	return rc;
}

int xtc_preempt_preemptible(const void *pc)
{
	pthread_mutex_lock(&xtc__preempt_init_mu);
	int rc = xtc__preempt_map_build();
	pthread_mutex_unlock(&xtc__preempt_init_mu);
	return rc == XTC_OK && xtc__preempt_map_allows((uintptr_t)pc);
}

/* Tests: the number of runtime code ranges and of runtime source files in
 * the code map. */
int xtc__preempt_map_info(int *n_rt, int *n_files);
int xtc__preempt_map_info(int *n_rt, int *n_files)
{
	pthread_mutex_lock(&xtc__preempt_init_mu);
	int rc = xtc__preempt_map_build();
	pthread_mutex_unlock(&xtc__preempt_init_mu);
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
	return xtc__preempt_map_allows((uintptr_t)pc);
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
	pthread_mutex_lock(&xtc__preempt_init_mu);
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
	pthread_mutex_unlock(&xtc__preempt_init_mu);
	return rc;
}

int xtc_preempt_undeclare_unsafe(const void *lo, const void *hi)
{
	if (lo == NULL || hi == NULL)
		return XTC_E_INVAL;
	pthread_mutex_lock(&xtc__preempt_init_mu);
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
	pthread_mutex_unlock(&xtc__preempt_init_mu);
	return rc;
}

/* The map knows the runtime's own code (the involuntary path needs it). */
int xtc__preempt_map_rt_known(void)
{
	pmap_t *pm = atomic_load(&cur_map);
	return pm != NULL && pm->rt_known;
}
