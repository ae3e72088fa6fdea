/*
 * xtc_sim.h - deterministic simulation of the executor.
 *
 * In a build configured with `meson -Dsim=true` (XTC_SIM), the real executor
 * code runs on the calling thread: every loop of an executor becomes an
 * entity that a seeded scheduler steps one at a time, pollers never block,
 * and the runtime's clock is a virtual clock that does not move while a task
 * runs and jumps to the earliest deadline when no loop is runnable. The same
 * seed replays the same schedule, bit for bit.
 *
 * In other builds every function exists; xtc_sim_exec_run, xtc_sim_check and
 * the clock setters return or do nothing useful (XTC_E_NOSYS / no-op).
 */
#ifndef XTC_SIM_H
#define XTC_SIM_H

#include <stddef.h>
#include <stdint.h>

#include "xtc.h"

#ifdef __cplusplus
extern "C" {
#endif

struct xtc_exec;

/* Independent random streams: a draw on one never shifts another. */
enum xtc_sim_stream {
	XTC_SIM_RNG_SCHED = 0,   /* which loop steps next */
	XTC_SIM_RNG_STEAL = 1,   /* victim choice */
	XTC_SIM_RNG_PLACE = 2,   /* round-robin placement start */
	XTC_SIM_RNG_LOCKVIC = 3, /* reserved (libxtc: lock-manager victim) */
	XTC_SIM_RNG_IO = 4,      /* reserved (libxtc: simulated I/O) */
	XTC_SIM_RNG_FAULT = 5,   /* xtc_sim_fault, fault points */
	XTC_SIM_RNG_APP = 6,     /* free for tests */
	XTC_SIM_RNG_BUGGIFY = 7, /* buggify decisions */
	XTC_SIM_RNG_NSTREAMS
};

XTC_API int      xtc_sim_supported(void); /* 1 in an XTC_SIM build */
XTC_API void     xtc_sim_activate(uint64_t seed);
XTC_API void     xtc_sim_deactivate(void);
XTC_API int      xtc_sim_active(void);
XTC_API uint64_t xtc_sim_rand(int stream); /* 0 when inactive */

/* Runs exec on this thread until quiescence (XTC_OK), every live task
 * parked with no timer and no inbox work (XTC_E_DEADLK), max_steps loop
 * steps taken with work left (XTC_E_AGAIN; <= 0 = unbounded), a stop
 * (XTC_OK) or a failed invariant (XTC_E_INTERNAL). XTC_E_INVAL for NULL or
 * a running executor; XTC_E_NOSYS outside an XTC_SIM build. */
XTC_API int      xtc_sim_exec_run(struct xtc_exec *exec, uint64_t seed,
                                  long max_steps);
/* Loop steps taken by the last xtc_sim_exec_run. */
XTC_API long     xtc_sim_steps(void);
/* Structural invariants of every loop: XTC_OK or XTC_E_INTERNAL. */
XTC_API int      xtc_sim_check(struct xtc_exec *exec);
/* Digest of per-loop logical counters and class state. */
XTC_API uint64_t xtc_sim_state_hash(struct xtc_exec *exec);

/* Bias the scheduler: with probability pct/1000 keep stepping the same
 * loop (adversarial starvation of its peers). */
XTC_API void     xtc_sim_sched_pessimal(unsigned pct_per_1000);

/* ---- fault injection (xtc_sim(3) FAULT INJECTION) ------------------------
 * Every decision is 0 unless a simulation is active (xtc_sim_activate,
 * xtc_sim_exec_run), and drawn from the FAULT or BUGGIFY stream otherwise,
 * so the same seed replays the same faults and the schedule is unchanged.
 * pct_per_1000: probability in thousandths (>= 1000 = always). */
/* A fresh coin per call: 1 with probability pct_per_1000/1000. */
XTC_API int      xtc_sim_fault(unsigned pct_per_1000);
/* Named fault points: once enabled (which resets the counts), each reach
 * of xtc_sim_fault_point(name) flips a coin and returns 1 on a hit (the
 * code there takes its faulty branch); fires counts hits per name since
 * the last enable (0 for an unknown name), seen the distinct names
 * reached (at most 256 are tracked). */
XTC_API void     xtc_sim_fault_points_enable(unsigned pct_per_1000);
XTC_API void     xtc_sim_fault_points_disable(void);
XTC_API int      xtc_sim_fault_point(const char *name);
XTC_API uint64_t xtc_sim_fault_point_fires(const char *name);
XTC_API int      xtc_sim_fault_points_seen(void);
/* Buggify sites: the first reach of a name in a run decides, with
 * probability pct_per_1000/1000, whether the site is buggified, and every
 * later reach in that run returns the same answer (each activation starts
 * a new run). active_count: sites decided 1; reached_count: sites reached
 * (at most 256 are tracked; later ones stay 0). site: name (truncated to
 * buflen - 1 bytes) and decision of the idx-th site reached, XTC_E_INVAL
 * for an idx out of range or NULL buf with buflen > 0. buggify_fault: a
 * fresh coin per call, only while buggify is enabled. */
XTC_API void     xtc_sim_buggify_enable(unsigned pct_per_1000);
XTC_API void     xtc_sim_buggify_disable(void);
XTC_API int      xtc_sim_buggify(const char *name);
XTC_API int      xtc_sim_buggify_fault(unsigned pct_per_1000);
XTC_API int      xtc_sim_buggify_active_count(void);
XTC_API int      xtc_sim_buggify_reached_count(void);
XTC_API int      xtc_sim_buggify_site(int idx, char *buf, size_t buflen,
                                      int *out_activated);
/* Plant points in code: compiled out entirely with XTC_INJECT_DISABLE. */
#if defined(XTC_INJECT_DISABLE)
#define XTC_SIM_FAULT_POINT(name) ((void)0)
#define XTC_SIM_BUGGIFY(name)     (0)
#else
#define XTC_SIM_FAULT_POINT(name) ((void)xtc_sim_fault_point(name))
#define XTC_SIM_BUGGIFY(name)     xtc_sim_buggify(name)
#endif

/* Virtual clock (the runtime's monotonic clock while enabled). */
XTC_API void     xtc_sim_clock_enable(int64_t start_ns);
XTC_API void     xtc_sim_clock_disable(void);
XTC_API int      xtc_sim_clock_enabled(void);
XTC_API void     xtc_sim_clock_advance(int64_t delta_ns);
XTC_API void     xtc_sim_clock_set(int64_t ns);
XTC_API int64_t  xtc_sim_clock_now(void);

#ifdef __cplusplus
}
#endif

#endif
