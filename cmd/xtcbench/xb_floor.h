/*
 * xb_floor.h - the machine's preemption floor (xb_floor.c), shared by
 * cmd/xtcbench and bench/bench_preempt: getppid; tgkill to self with
 * handler and return; a timer armed 50 us ahead by the spinning thread it
 * signals (lateness, and the largest clock-read gap around the expiry);
 * timer_settime to the CPU's earliest expiry and to a later one; tgkill
 * from another CPU to a spinning thread (only when two CPUs are allowed:
 * cross = 1). Medians (and the timer's p99) over `samples` samples.
 */
#ifndef XB_FLOOR_H
#define XB_FLOOR_H

#define XB_FLOOR_N    300  /* xtcbench's sample count */
#define XB_FLOOR_NMAX 1000 /* the most a measurement takes */

typedef struct xb_floor {
	int    samples;
	int    signo; /* the real-time signal used */
	double syscall_ns;
	double self_signal_us;
	double timer_late_p50_us;
	double timer_late_p99_us;
	double timer_stall_p50_us;
	double arm_near_us;
	double arm_far_us;
	int    cross;
	double cross_signal_p50_us;
	double cross_stall_p50_us;
} xb_floor_t;

/* Measures with n samples (1..XB_FLOOR_NMAX): NULL, or what failed. */
const char *xb_floor_measure(xb_floor_t *out, int n);

#endif
