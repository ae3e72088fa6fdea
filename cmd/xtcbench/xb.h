/*
 * xb.h - the C side of xtcbench: small drivers that run one xtc workload
 * each inside a single cgo call, timing everything in C.
 *
 * Design: the drivers use only the public API (csrc/include, through
 * xb_api.h); a driver whose feature is off at run time reports "not
 * available" with the reason instead of failing.
 *
 * Each driver returns XB_OK, XB_UNAVAIL (feature missing; `why` says which)
 * or XB_FAIL (an xtc call failed; `why` names it and its error text).
 */
#ifndef XB_H
#define XB_H

#include <stdint.h>

#define XB_OK      0
#define XB_UNAVAIL 1
#define XB_FAIL    2

#define XB_WHY 200

/* Feature bits of xb_features(). */
#define XB_F_CORE     0x01 /* loop, procs, yield, mailboxes */
#define XB_F_EXEC     0x02 /* executor */
#define XB_F_CLASSES  0x04 /* scheduling classes */
#define XB_F_PREEMPT  0x08 /* involuntary preemption with executor slices */
#define XB_F_ADAPTIVE 0x10 /* adaptive quantum controller */

int         xb_features(void);
const char *xb_feature_why(int bit); /* why a bit is missing, "" if present */
const char *xb_xtc_version(void);
const char *xb_io_backend(void);

/* A spin-wait's pause (the generators' waits). */
static inline void xb_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__asm__ volatile("pause");
#elif defined(__aarch64__)
	__asm__ volatile("yield");
#endif
}

/* Busy work shared by every contender that runs C work. */
uint64_t xb_spin(uint64_t iters);
double   xb_calibrate(void); /* iterations per ns of xb_spin */
void     xb_noop(void);      /* the callee of the "C call" micro */
int64_t  xb_now(void);       /* CLOCK_MONOTONIC ns */
/* The busy loop as a call from Go (Exec.GoInt): intptr_t (*)(void *)
 * taking the iteration count; the _coop one also takes a yield-point
 * chunk (iterations | chunk << 40) and calls xtc_yield_if_due. */
void    *xb_spin_call_fn(void);
void    *xb_spin_call_coop_fn(void);

/* Process-wide preemption counters (zeros without xtc_preempt.h):
 * signals, ticks, ring_ticks, preemptions, deferrals, honoured, stale,
 * refused_gocb, signals sent by the monitor. */
void xb_preempt_stats(uint64_t out[9]);

/* ---- memory: n procs parked in a receive (xb_mem.c) ---- */
typedef struct xb_mem {
	int64_t parked;      /* procs that parked */
	int64_t rss_bytes;   /* resident-set growth, first spawn to all parked */
	int64_t spawn_ns;    /* first spawn until all parked */
	int64_t wake_ns;     /* first send until all exited */
	int64_t stack_bytes; /* xtc_stack_size() */
} xb_mem_t;
/* stack_size: xtc_proc_opts_t.stack_size of every parked proc (0 = the
 * default) */
int     xb_mem_park(int64_t n, int64_t stack_size, xb_mem_t *out, char *why);

/* ---- micro: ns per operation in *ns_per_op ---- */
enum {
	XB_MICRO_YIELD = 1,
	XB_MICRO_SPAWN = 2,
	XB_MICRO_PINGPONG = 3,
	XB_MICRO_CROSSLOOP = 4,
	XB_MICRO_CCALL = 5,
	XB_MICRO_FANOUT = 6,
};
int xb_micro(int which, int64_t n, double *ns_per_op, char *why);

/* ---- arrivals for the Go rows, made outside Go (xb_ingress.c) ---- */
/* A generator pthread spins (or, with sleep, sleeps) until each arrival
 * (ns after its base),
 * publishes the count in *xb_gen_tail and, when *xb_gen_armed is set,
 * clears it and rings the eventfd xb_gen_fd (non-blocking; the Go side
 * owns and closes it, after xb_gen_free). xb_gen_free joins the thread and
 * copies the lag of each arrival out. */
typedef struct xb_gen xb_gen_t;
xb_gen_t *xb_gen_new(const int64_t *arrival, int64_t n, int sleep, char *why);
int       xb_gen_fd(xb_gen_t *g);
int64_t   xb_gen_base(xb_gen_t *g);
int64_t  *xb_gen_tail(xb_gen_t *g);
int32_t  *xb_gen_armed(xb_gen_t *g);
int       xb_gen_start(xb_gen_t *g, int64_t start_in_ns, char *why);
void      xb_gen_free(xb_gen_t *g, int64_t *lag_out);

/* ---- tail latency: one open-loop run ---- */
#define XB_INGRESS_SUBMIT 0 /* xtc_exec_submit, callback spawns the proc */
#define XB_INGRESS_POLL   1 /* SPSC ring polled by a dispatcher proc */
#define XB_TRAJ 64
typedef struct xb_tail {
	/* in */
	int64_t         n;
	const int64_t  *arrival;    /* ns offsets from the start, ascending */
	const uint64_t *iters;      /* busy-loop iterations per request */
	int             carriers;
	int64_t         slice_ns;   /* executor preemption slice */
	int             adaptive;   /* use the adaptive quantum controller */
	uint64_t        coop_chunk; /* > 0: clock-checked slices (no signal);
	                               the requests' busy loop passes a
	                               xtc_yield_if_due point every this many
	                               iterations */
	int64_t         adapt_period_ns; /* its update period */
	int             ingress;    /* XB_INGRESS_* */
	int64_t         timeout_ns; /* give up this long after the last arrival */
	/* out */
	int64_t *done; /* completion offset (ns) per request; -1 never ran,
	                  -2 dropped (the spawn was refused) */
	int64_t *lag;  /* spawn time minus scheduled arrival (ns) */
	int64_t  completed;
	int64_t  dropped;
	int      timed_out;
	int64_t  spawn_retries; /* spawns refused with AGAIN/RESOURCE and retried */
	int64_t  final_quantum_ns; /* adaptive: the controller's last quantum */
	double   tail_index;       /* adaptive: its last tail-index estimate */
	uint64_t preemptions;      /* involuntary yields during the run */
	int64_t  cost_ns;          /* measured cost of one preemption */
	uint64_t timer_fires;      /* carrier timer expiries that preempted */
	uint64_t direct;           /* producers that signalled an overdue run */
	uint64_t fallbacks;        /* carriers without a slice timer */
	uint64_t stretches;        /* budget windows that lengthened the slice */
	uint64_t overhead_ns;      /* preemption cost the budget counted */
	/* the carriers' parks and wake-ups (xtc_exec_loop_stats, summed):
	 * a wake-up that came late is the machine's, stated next to the
	 * figures */
	uint64_t parks;
	uint64_t wakes;
	uint64_t slow_wakes;       /* XTC_EXEC_SLOW_WAKE_NS or later */
	int64_t  wake_ns;          /* summed wake-up latency */
	int64_t  wake_max_ns;
	int      n_traj;           /* adaptive: controller updates kept */
	int64_t  traj_q[XB_TRAJ];  /* their quanta */
	double   traj_load[XB_TRAJ];
	double   traj_alpha[XB_TRAJ];
} xb_tail_t;
int xb_tail_run(xb_tail_t *t, char *why);

/* ---- fairness: three classes on one loop ---- */
typedef struct xb_fair {
	/* in */
	int64_t  dur_ns;
	int64_t  window_ns;
	int      shares[3];
	int      preempt;     /* 1: never-yielding workers + preemption slice */
	int64_t  slice_ns;
	uint64_t chunk_iters; /* work between counter updates (and yields) */
	int      max_windows;
	/* out: per window: t_ns, then the three counters (iterations) */
	int64_t *samples; /* max_windows * 4 */
	int      nsamples;
} xb_fair_t;
int xb_fair_run(xb_fair_t *f, char *why);

/* ---- hog: never-yielding kernel + 1 ms-sleep probe on one carrier ---- */
typedef struct xb_hog {
	int      with_hog; /* 0: the probe alone (baseline) */
	int      probes;
	int64_t  sleep_ns;
	int64_t  budget_ns; /* the run ends after this even if probes remain */
	int64_t  slice_ns;
	int64_t *late; /* out: probes entries, ns */
	int      done_probes;
	uint64_t hog_iters;
} xb_hog_t;
int xb_hog_run(xb_hog_t *h, char *why);

/* The Go+cgo hog variant: the same kernel inside one cgo call, spinning
 * from xb_hog_kernel_arm() until xb_hog_kernel_stop(); returns the iterations done. */
void     xb_hog_kernel_arm(void);
uint64_t xb_hog_kernel(void);
void     xb_hog_kernel_stop(void);

/* ---- the machine's preemption floor (xb_floor.c, xb_floor.h) ---- */
#include "xb_floor.h"
int xb_floor(xb_floor_t *out, char *why); /* XB_FLOOR_N samples */

#endif
