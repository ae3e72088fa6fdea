/*
 * preempt_allow.c - what the program declared preemptible: the policy
 * (xtc_preempt_set_policy), the XTC_PREEMPTIBLE section of every loaded
 * object, the objects allowed by name (xtc_preempt_allow_object) and the
 * ranges declared at run time (xtc_preempt_declare_preemptible: JIT code,
 * anonymous executable memory). The code map (preempt_codemap.c) asks
 * this file, when it builds, which ranges of each loaded object are
 * allowed, and the handler asks it, per signal, about declared ranges.
 *
 * Model (the SAFETY section of xtc_preempt(3) is the user's view)
 *  - Deny by default. Library code assumes nothing else runs on its thread
 *    until a call returns: its locks, its pthread_once initialisers and
 *    its thread-local state (an error queue, a DRBG, an error handler)
 *    break when another fiber of the same carrier runs in the middle of a
 *    call (measured: sqlite3, OpenSSL, libxml2, pcre2's JIT compiler,
 *    jemalloc and tcmalloc deadlock, crash or hand two requests the same
 *    random bytes). So under the default policy a fiber is interrupted
 *    only while its PC is in code declared preemptible:
 *      1. functions marked XTC_PREEMPTIBLE: the compiler puts them in the
 *         section "xtc_ptext" of whatever object they are linked into (an
 *         executable, a shared library, a Go binary's cgo code); the map
 *         finds that section in each loaded object's section headers
 *         (read from its file when the map is built; the object that
 *         holds the runtime also through the linker's __start_/__stop_
 *         symbols, so a program without /proc still works);
 *      2. whole objects allowed by name (xtc_preempt_allow_object: a
 *         library the user knows to be safe, e.g. zlib);
 *      3. ranges declared at run time (JIT code: pcre2, LuaJIT, ...),
 *         checked by the handler from a fixed table (no allocation, no
 *         lock: async-signal-safe).
 *    XTC_PREEMPT_POLICY_PROGRAM adds the executable's own text (what the
 *    runtime's earlier versions allowed there); XTC_PREEMPT_POLICY_ANY is
 *    today's deny-list: every object except libc, ld.so, the vDSO and the
 *    other system and sanitizer libraries. The runtime's own code and the
 *    ranges declared unsafe are denied under every policy, and so is a
 *    fiber that holds a lock (preempt_locks.c) or is in a no-preempt
 *    region.
 *  - A preemption that arrives outside preemptible code is deferred: the
 *    trigger asks again later, sooner at first and then less and less
 *    often the longer the same run refuses (preempt.c), so a fiber that
 *    returns from a library call to its kernel is cut soon after, and a
 *    carrier blocked in a lock wait is not signalled thousands of times a
 *    second.
 *  - The environment variable XTC_PREEMPT_POLICY (declared, program, any)
 *    sets the policy at the first build of the map, for a program that
 *    cannot be changed; a call of xtc_preempt_set_policy wins over it.
 *
 * Rejected: allowing the executable's text by default and relying on lock
 * tracking alone (a Go binary links its cgo libraries' C code into the
 * executable: sqlite's amalgamation is tracked by its mutexes, but a
 * statically linked OpenSSL keeps its DRBG and error queue per thread,
 * which no lock tracks); a list of known-safe libraries (a guess that
 * ages with every release of each library); symbol names (stripped
 * binaries, static functions).
 */
#include "rtcode_int.h" /* first: this file is runtime code */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "preempt_int.h"

/* The XTC_PREEMPTIBLE section of the object that holds the runtime (weak:
 * absent when no function there is declared). */
extern const char __start_xtc_ptext[] __attribute__((weak, visibility("hidden")));
extern const char __stop_xtc_ptext[] __attribute__((weak, visibility("hidden")));

static _Atomic int policy = -1; /* -1: not chosen yet (environment) */
static pthread_mutex_t allow_mu = PTHREAD_MUTEX_INITIALIZER;

static struct {
	_Atomic uintptr_t lo, hi;
} declared[XTC_PREEMPT_MAX_DECLARED];
static _Atomic int n_declared;

static char *objects[XTC_PREEMPT_MAX_OBJECTS];
static int n_objects;

int xtc__preempt_policy(void)
{
	int p = atomic_load_explicit(&policy, memory_order_relaxed);
	if (p >= 0)
		return p;
	const char *e = getenv("XTC_PREEMPT_POLICY");
	p = XTC_PREEMPT_POLICY_DECLARED;
	if (e != NULL && strcmp(e, "program") == 0)
		p = XTC_PREEMPT_POLICY_PROGRAM;
	else if (e != NULL && strcmp(e, "any") == 0)
		p = XTC_PREEMPT_POLICY_ANY;
	int none = -1;
	atomic_compare_exchange_strong(&policy, &none, p);
	return atomic_load(&policy);
}

int xtc_preempt_set_policy(int p)
{
	if (p != XTC_PREEMPT_POLICY_DECLARED && p != XTC_PREEMPT_POLICY_PROGRAM &&
	    p != XTC_PREEMPT_POLICY_ANY)
		return XTC_E_INVAL;
	atomic_store(&policy, p);
	return xtc__preempt_map_rebuild();
}

int xtc_preempt_get_policy(void)
{
	return xtc__preempt_policy();
}

/* Async-signal-safe: a load per declared range. */
int xtc__preempt_declared(uintptr_t pc)
{
	int n = atomic_load_explicit(&n_declared, memory_order_acquire);
	for (int i = 0; i < n; i++) {
		uintptr_t lo = atomic_load_explicit(&declared[i].lo,
		                                    memory_order_relaxed);
		uintptr_t hi = atomic_load_explicit(&declared[i].hi,
		                                    memory_order_relaxed);
		if (pc >= lo && pc < hi)
			return 1;
	}
	return 0;
}

int xtc_preempt_declare_preemptible(const void *lo, const void *hi)
{
	if (lo == NULL || hi == NULL || (uintptr_t)hi <= (uintptr_t)lo)
		return XTC_E_INVAL;
	pthread_mutex_lock(&allow_mu);
	int n = atomic_load(&n_declared), rc = XTC_E_RESOURCE;
	for (int i = 0; i < n && rc != XTC_OK; i++)
		if (atomic_load(&declared[i].lo) == 0) {
			/* lo last: a reader never sees a half-written range */
			atomic_store(&declared[i].hi, (uintptr_t)hi);
			atomic_store(&declared[i].lo, (uintptr_t)lo);
			rc = XTC_OK;
		}
	if (rc != XTC_OK && n < XTC_PREEMPT_MAX_DECLARED) {
		atomic_store(&declared[n].lo, (uintptr_t)lo);
		atomic_store(&declared[n].hi, (uintptr_t)hi);
		atomic_store_explicit(&n_declared, n + 1, memory_order_release);
		rc = XTC_OK;
	}
	pthread_mutex_unlock(&allow_mu);
	return rc;
}

int xtc_preempt_undeclare_preemptible(const void *lo, const void *hi)
{
	if (lo == NULL || hi == NULL)
		return XTC_E_INVAL;
	pthread_mutex_lock(&allow_mu);
	int n = atomic_load(&n_declared), rc = XTC_E_NOTFOUND;
	for (int i = 0; i < n && rc != XTC_OK; i++)
		if (atomic_load(&declared[i].lo) == (uintptr_t)lo &&
		    atomic_load(&declared[i].hi) == (uintptr_t)hi) {
			/* hi first: a concurrent reader sees an empty range */
			atomic_store(&declared[i].hi, 0);
			atomic_store(&declared[i].lo, 0);
			rc = XTC_OK;
		}
	pthread_mutex_unlock(&allow_mu);
	/* a handler that loaded the range before the store may still take
	 * one preemption there: the caller frees JIT code only after its
	 * fibers left it (xtc_preempt(3)) */
	return rc;
}

int xtc_preempt_allow_object(const char *name)
{
	if (name == NULL || name[0] == '\0' || strlen(name) > 255)
		return XTC_E_INVAL;
	pthread_mutex_lock(&allow_mu);
	int rc = XTC_OK;
	for (int i = 0; i < n_objects; i++)
		if (strcmp(objects[i], name) == 0)
			goto out; /* idempotent */
	if (n_objects == XTC_PREEMPT_MAX_OBJECTS) {
		rc = XTC_E_RESOURCE;
		goto out;
	}
	if ((objects[n_objects] = strdup(name)) == NULL) {
		rc = XTC_E_NOMEM;
		goto out;
	}
	n_objects++;
out:
	pthread_mutex_unlock(&allow_mu);
	return rc == XTC_OK ? xtc__preempt_map_rebuild() : rc;
}

/* Whether the object at `path` was allowed by name: the name is matched
 * against the file's base name, as a prefix ("libz.so" matches
 * /usr/lib/x86_64-linux-gnu/libz.so.1). */
int xtc__preempt_object_allowed(const char *path)
{
	const char *base = strrchr(path, '/');
	base = base ? base + 1 : path;
	pthread_mutex_lock(&allow_mu);
	int hit = 0;
	for (int i = 0; i < n_objects && !hit; i++)
		hit = strncmp(base, objects[i], strlen(objects[i])) == 0;
	pthread_mutex_unlock(&allow_mu);
	return hit;
}

/* ------------------------------------------------------------------ */
/* The XTC_PREEMPTIBLE section of a loaded object                       */
/* ------------------------------------------------------------------ */

static int read_at(int fd, void *buf, size_t n, off_t off)
{
	char *p = buf;
	while (n > 0) {
		ssize_t r = pread(fd, p, n, off);
		if (r <= 0)
			return -1;
		p += r;
		n -= (size_t)r;
		off += r;
	}
	return 0;
}

/* The section's link-time address range in the file at path (a 64- or
 * 32-bit ELF of this machine's class); 0 if found. */
static int section_in_file(const char *path, uintptr_t *lo, uintptr_t *hi)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	int rc = -1;
	ElfW(Ehdr) eh;
	ElfW(Shdr) *sh = NULL;
	char *names = NULL;
	if (read_at(fd, &eh, sizeof eh, 0) != 0 ||
	    memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 ||
	    eh.e_shentsize != sizeof(ElfW(Shdr)) || eh.e_shnum == 0 ||
	    eh.e_shstrndx >= eh.e_shnum)
		goto out;
	sh = malloc((size_t)eh.e_shnum * sizeof *sh);
	if (sh == NULL ||
	    read_at(fd, sh, (size_t)eh.e_shnum * sizeof *sh, (off_t)eh.e_shoff))
		goto out;
	const ElfW(Shdr) *st = &sh[eh.e_shstrndx];
	if (st->sh_size == 0 || st->sh_size > (1u << 24))
		goto out;
	names = malloc(st->sh_size + 1);
	if (names == NULL || read_at(fd, names, st->sh_size, (off_t)st->sh_offset))
		goto out;
	names[st->sh_size] = '\0';
	for (int i = 0; i < eh.e_shnum; i++) {
		if (sh[i].sh_name >= st->sh_size ||
		    strcmp(names + sh[i].sh_name, XTC_PREEMPT_SECTION) != 0)
			continue;
		if (!(sh[i].sh_flags & SHF_ALLOC) ||
		    !(sh[i].sh_flags & SHF_EXECINSTR) || sh[i].sh_size == 0)
			break;
		*lo = (uintptr_t)sh[i].sh_addr;
		*hi = (uintptr_t)(sh[i].sh_addr + sh[i].sh_size);
		rc = 0;
		break;
	}
out:
	free(names);
	free(sh);
	close(fd);
	return rc;
}

static int in_exec_segment(const struct dl_phdr_info *info, uintptr_t lo,
                           uintptr_t hi)
{
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		uintptr_t a = info->dlpi_addr + ph->p_vaddr;
		if (ph->p_type == PT_LOAD && (ph->p_flags & PF_X) && lo >= a &&
		    hi <= a + ph->p_memsz)
			return 1;
	}
	return 0;
}

int xtc__preempt_section_of(const struct dl_phdr_info *info, int is_main,
                            int holds_rt, uintptr_t *lo, uintptr_t *hi)
{
	uintptr_t s0 = (uintptr_t)__start_xtc_ptext;
	uintptr_t s1 = (uintptr_t)__stop_xtc_ptext;
	if (holds_rt && s0 != 0 && s1 > s0) {
		*lo = s0;
		*hi = s1;
		return 0;
	}
	const char *path = info->dlpi_name;
	if (is_main)
		path = "/proc/self/exe";
	if (path == NULL || path[0] != '/')
		return -1; /* the vDSO, or an object without a file */
	uintptr_t a, b;
	if (section_in_file(path, &a, &b) != 0)
		return -1;
	a += info->dlpi_addr;
	b += info->dlpi_addr;
	/* the file on disk must be the one that was loaded */
	if (!in_exec_segment(info, a, b))
		return -1;
	*lo = a;
	*hi = b;
	return 0;
}
