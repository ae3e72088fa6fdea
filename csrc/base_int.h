/*
 * base_int.h - internal interface of the base layer (basics.c): what the
 * layers above register with it. Nothing here depends on another layer.
 *
 * Allocation region: one allocator of a higher layer (mailbox.c's message
 * arena) may own an address range whose pointers reach users as ordinary
 * xtc_malloc memory; xtc_free and xtc_realloc hand them back to it. The
 * registration replaces a direct call from basics.c into mailbox.c, which
 * made the bottom layer depend on the proc layer (tools/layers.txt).
 *
 * Primitives every layer uses, written once: the initial-exec TLS model
 * (the signal handler and the switch path read TLS; no lazy allocation)
 * and the spin-wait CPU hint.
 */
#ifndef XTC_BASE_INT_H
#define XTC_BASE_INT_H

#include <stddef.h>

#define XTC__TLS_IE __attribute__((tls_model("initial-exec")))

#if defined(__x86_64__) || defined(__i386__)
#define XTC__CPU_RELAX() __builtin_ia32_pause()
#elif defined(__aarch64__)
#define XTC__CPU_RELAX() __asm__ __volatile__("yield" ::: "memory")
#else
#define XTC__CPU_RELAX() ((void)0)
#endif

/* Once, before the first pointer of [lo, lo + len) exists; any thread. */
void xtc__alloc_region_set(void *lo, size_t len, void (*free_fn)(void *),
                           void *(*realloc_fn)(void *, size_t));

#endif
