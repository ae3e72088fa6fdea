/*
 * libs_tail.c - what safe preemption costs short requests when long ones
 * spend their time in a C library: one carrier, long requests (zlib:
 * deflate of 256 KiB in 8 KiB calls; pcre2: interpreter matches over
 * 256 KiB in 8 KiB windows) with the program's own declared kernel between
 * library calls (~15% of their time), short requests (a 2 KiB deflate or a
 * 2 KiB match, ~10-30 us) arriving open-loop from a generator thread on the
 * other CPU; the short requests' latency (completion - scheduled arrival),
 * p50 / p99.
 *
 * Usage: libs_tail zlib|pcre2 none|any|declared|allow [slice_us] [secs]
 *   none      preemption off (the floor: a short waits for a long to end)
 *   any       XTC_PREEMPT_POLICY_ANY: every object but libc preemptible (the
 *             earlier behaviour, with lock tracking)
 *   declared  the default: only the declared kernel is cut, a preemption
 *             landing in the library is deferred
 *   allow     the default plus the library allowed by name
 *             (xtc_preempt_allow_object: zlib and pcre2 take no lock and keep
 *             no thread-local state across calls)
 * Run the variants interleaved (a shell loop) and compare medians: this
 * machine is noisy. LIBS_TAIL_CAL=long_us:short_us fixes the arrival
 * rates instead of calibrating (a calibration under load varies 3-10x, so
 * the variants of one round would not see the same load). Besides the
 * latencies, `chunks_waited` counts the 8 KiB chunks of long work that ran
 * while a short request waited for its first run: what the scheduler gave
 * long work ahead of it, in a unit the machine's speed does not change.
 * Prints `name value unit` lines. Not a test.
 */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "xtc.h"
#include "xtc_exec.h"
#include "xtc_preempt.h"
#include "xtc_proc.h"

#ifdef HAVE_ZLIB
#include <zlib.h>
#endif
#ifdef HAVE_PCRE2
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#endif

enum { BIG = 256 * 1024, CHUNK = 8 * 1024, SMALL = 2 * 1024, MAXS = 200000 };

static int use_pcre;
static unsigned char *input;
static xtc_exec_t *ex;
static int64_t sched_at[MAXS], done_at[MAXS], start_at[MAXS];
/* chunks of long work done so far, and at each short's submission and
 * start: how much long work ran while a short waited, a count the
 * machine's speed does not change */
static _Atomic int64_t chunks;
static int64_t chunks_sub[MAXS], chunks_start[MAXS];
static _Atomic int64_t n_done;
static int64_t n_short;
static _Atomic uint64_t sink;

static int64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* The program's own work between library calls. */
XTC_PREEMPTIBLE static uint64_t kernel(const unsigned char *p, size_t n,
                                       uint64_t h)
{
	for (int r = 0; r < 6; r++)
		for (size_t i = 0; i < n; i++) {
			h = (h ^ p[i]) * 1099511628211ULL;
			__asm__ volatile("" : "+r"(h));
		}
	return h;
}

#ifdef HAVE_ZLIB
static uint64_t z_work(const unsigned char *in, size_t n, int with_kernel)
{
	size_t cap = n + n / 8 + 4096;
	unsigned char *out = malloc(cap);
	z_stream s;
	memset(&s, 0, sizeof s);
	if (out == NULL || deflateInit(&s, 6) != Z_OK) {
		free(out);
		return 0;
	}
	uint64_t h = 1;
	s.next_out = out;
	s.avail_out = (uInt)cap;
	for (size_t off = 0; off < n; off += CHUNK) {
		size_t k = n - off < CHUNK ? n - off : CHUNK;
		s.next_in = (unsigned char *)in + off;
		s.avail_in = (uInt)k;
		deflate(&s, off + k >= n ? Z_FINISH : Z_NO_FLUSH);
		if (with_kernel) {
			h = kernel(in + off, k, h);
			atomic_fetch_add_explicit(&chunks, 1,
			                          memory_order_relaxed);
		}
	}
	h ^= s.total_out;
	deflateEnd(&s);
	free(out);
	return h;
}
#endif

#ifdef HAVE_PCRE2
static pcre2_code *re;
static uint64_t p_work(const unsigned char *in, size_t n, int with_kernel)
{
	pcre2_match_data *md = pcre2_match_data_create_from_pattern(re, NULL);
	uint64_t h = 1;
	for (size_t off = 0; off < n; off += CHUNK) {
		size_t k = n - off < CHUNK ? n - off : CHUNK;
		PCRE2_SIZE at = 0;
		while (at < k) {
			int rc = pcre2_match(re, in + off, k, at, 0, md, NULL);
			if (rc < 0)
				break;
			PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
			h += ov[0];
			at = ov[1] > ov[0] ? ov[1] : ov[0] + 1;
		}
		if (with_kernel) {
			h = kernel(in + off, k, h);
			atomic_fetch_add_explicit(&chunks, 1,
			                          memory_order_relaxed);
		}
	}
	pcre2_match_data_free(md);
	return h;
}
#endif

static uint64_t work(const unsigned char *in, size_t n, int with_kernel)
{
#ifdef HAVE_PCRE2
	if (use_pcre)
		return p_work(in, n, with_kernel);
#endif
#ifdef HAVE_ZLIB
	if (!use_pcre)
		return z_work(in, n, with_kernel);
#endif
	(void)in;
	(void)n;
	(void)with_kernel;
	return 0;
}

static void long_req(void *arg)
{
	(void)arg;
	atomic_fetch_add(&sink, work(input, BIG, 1));
}

static void short_req(void *arg)
{
	int64_t i = (int64_t)(intptr_t)arg;
	start_at[i] = now_ns();
	chunks_start[i] = atomic_load(&chunks);
	atomic_fetch_add(&sink, work(input + (i % 64) * SMALL, SMALL, 0));
	done_at[i] = now_ns();
	atomic_fetch_add(&n_done, 1);
}

static void spawn_long(void *arg)
{
	(void)arg;
	(void)xtc_proc_spawn(xtc_exec_loop(ex, 0), long_req, NULL, NULL, NULL);
}

static void spawn_short(void *arg)
{
	if (xtc_proc_spawn(xtc_exec_loop(ex, 0), short_req, arg, NULL, NULL) !=
	    XTC_OK)
		atomic_fetch_add(&n_done, 1);
}

static void pin(int cpu)
{
	cpu_set_t m;
	if (sysconf(_SC_NPROCESSORS_ONLN) < 2)
		return;
	CPU_ZERO(&m);
	CPU_SET(cpu, &m);
	(void)sched_setaffinity(0, sizeof m, &m);
}

static int64_t long_ns, short_ns, secs = 2;

/* Longs at 40% of the carrier, shorts at 10%: open loop, fixed gaps. */
static void *gen(void *arg)
{
	(void)arg;
	pin(0);
	int64_t t0 = now_ns() + 1000000, end = t0 + secs * 1000000000LL;
	int64_t long_gap = long_ns * 100 / 40, short_gap = short_ns * 100 / 10;
	int64_t next_long = t0, next_short = t0 + short_gap / 2;
	while (n_short < MAXS) {
		int64_t t = next_long < next_short ? next_long : next_short;
		if (t >= end)
			break;
		while (now_ns() < t)
			;
		if (t == next_long) {
			while (xtc_exec_submit(ex, 0, spawn_long, NULL) == XTC_E_AGAIN)
				;
			next_long += long_gap;
		} else {
			int64_t i = n_short++;
			sched_at[i] = t;
			chunks_sub[i] = atomic_load(&chunks);
			while (xtc_exec_submit(ex, 0, spawn_short,
			                       (void *)(intptr_t)i) == XTC_E_AGAIN)
				;
			next_short += short_gap;
		}
	}
	int64_t wait_end = now_ns() + 30 * 1000000000LL;
	while (atomic_load(&n_done) < n_short && now_ns() < wait_end)
		usleep(1000);
	xtc_exec_stop(ex);
	return NULL;
}

static void *runner(void *arg)
{
	(void)arg;
	pin(1);
	xtc_exec_run(ex);
	return NULL;
}

static int cmp64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: libs_tail zlib|pcre2 none|any|declared|allow "
		        "[slice_us] [secs]\n");
		return 2;
	}
	use_pcre = strcmp(argv[1], "pcre2") == 0;
	const char *v = argv[2];
	int64_t slice = (argc > 3 ? atoi(argv[3]) : 100) * 1000LL;
	if (argc > 4)
		secs = atoi(argv[4]);
#ifndef HAVE_ZLIB
	if (!use_pcre)
		return 77;
#endif
#ifndef HAVE_PCRE2
	if (use_pcre)
		return 77;
#else
	int errc;
	PCRE2_SIZE erro;
	re = pcre2_compile((PCRE2_SPTR) "(fiber|slice)\\s+\\w+|q[a-z]+y\\b",
	                   PCRE2_ZERO_TERMINATED, 0, &errc, &erro, NULL);
#endif
	input = malloc(BIG);
	uint64_t x = 88172645463325252ULL;
	static const char *w[] = { "fiber", "carrier", "slice", "xtc", "query",
	                           "lock", "row", "preempt" };
	for (size_t k = 0; k < BIG;) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		for (const char *p = w[x % 8]; *p && k < BIG; p++)
			input[k++] = (unsigned char)*p;
		if (k < BIG)
			input[k++] = ' ';
	}
	/* calibrate on this thread, or take LIBS_TAIL_CAL=long_us:short_us
	 * (the same arrival rates for every variant of an interleaved run:
	 * a calibration under load varies 3-10x) */
	const char *cal = getenv("LIBS_TAIL_CAL");
	double cl = 0, cs = 0;
	if (cal != NULL && sscanf(cal, "%lf:%lf", &cl, &cs) == 2 && cl > 0 &&
	    cs > 0) {
		long_ns = (int64_t)(cl * 1e3);
		short_ns = (int64_t)(cs * 1e3);
	} else {
		int64_t a = now_ns();
		for (int r = 0; r < 3; r++)
			(void)work(input, BIG, 1);
		long_ns = (now_ns() - a) / 3;
		a = now_ns();
		for (int r = 0; r < 100; r++)
			(void)work(input, SMALL, 0);
		short_ns = (now_ns() - a) / 100;
	}

	if (strcmp(v, "any") == 0)
		xtc_preempt_set_policy(XTC_PREEMPT_POLICY_ANY);
	if (strcmp(v, "allow") == 0)
		xtc_preempt_allow_object(use_pcre ? "libpcre2-8.so" : "libz.so");
	if (xtc_exec_init(&ex, 1) != XTC_OK)
		return 1;
	if (strcmp(v, "none") != 0) {
		if (xtc_exec_set_preempt(ex, slice) != XTC_OK ||
		    !xtc_preempt_involuntary_supported()) {
			fprintf(stderr, "libs_tail: no involuntary preemption\n");
			return 77;
		}
		xtc_preempt_set_involuntary(1);
	}
	xtc_exec_set_service_mode(ex, 1);
	struct rusage ru0, ru1;
	getrusage(RUSAGE_SELF, &ru0);
	pthread_t g, r;
	pthread_create(&r, NULL, runner, NULL);
	pthread_create(&g, NULL, gen, NULL);
	pthread_join(g, NULL);
	pthread_join(r, NULL);
	getrusage(RUSAGE_SELF, &ru1);
	int64_t n = atomic_load(&n_done) < n_short ? atomic_load(&n_done) : n_short;
	int64_t *lat = malloc(sizeof(int64_t) * (size_t)(n > 0 ? n : 1));
	int64_t m = 0;
	for (int64_t i = 0; i < n_short; i++)
		if (done_at[i] > 0)
			lat[m++] = done_at[i] - sched_at[i];
	qsort(lat, (size_t)m, sizeof *lat, cmp64);
	/* queueing before a short first ran (arrival to start) */
	int64_t *q = malloc(sizeof(int64_t) * (size_t)(n > 0 ? n : 1)), mq = 0;
	for (int64_t i = 0; i < n_short; i++)
		if (done_at[i] > 0)
			q[mq++] = start_at[i] - sched_at[i];
	qsort(q, (size_t)mq, sizeof *q, cmp64);
	xtc_preempt_stats_t st;
	uint64_t sent = 0;
	xtc_preempt_stats_global(&st, &sent);
	printf("%s_%s_trigger timer_fires %llu direct %llu tick_nets %llu "
	       "monitor %llu\n", argv[1], v,
	       (unsigned long long)st.timer_fires, (unsigned long long)st.direct,
	       (unsigned long long)st.tick_nets, (unsigned long long)sent);
	printf("%s_%s_long_work %.0f us\n", argv[1], v, long_ns / 1e3);
	printf("%s_%s_short_work %.1f us\n", argv[1], v, short_ns / 1e3);
	printf("%s_%s_short_p50 %.1f us\n", argv[1], v,
	       m ? lat[m / 2] / 1e3 : 0.0);
	printf("%s_%s_short_p99 %.1f us\n", argv[1], v,
	       m ? lat[m * 99 / 100] / 1e3 : 0.0);
	for (int64_t i = 0, k = 0; i < n_short; i++)
		if (done_at[i] > 0)
			q[k++] = chunks_start[i] - chunks_sub[i];
	qsort(q, (size_t)mq, sizeof *q, cmp64);
	int64_t csum = 0;
	for (int64_t i = 0; i < mq; i++)
		csum += q[i];
	printf("%s_%s_chunks_waited p50 %lld p99 %lld mean %.2f\n", argv[1], v,
	       mq ? (long long)q[mq / 2] : 0LL,
	       mq ? (long long)q[mq * 99 / 100] : 0LL,
	       mq ? (double)csum / (double)mq : 0.0);
	for (int64_t i = 0, k = 0; i < n_short; i++)
		if (done_at[i] > 0)
			q[k++] = start_at[i] - sched_at[i];
	qsort(q, (size_t)mq, sizeof *q, cmp64);
	printf("%s_%s_short_wait_p50 %.1f us p99 %.1f us\n", argv[1], v,
	       mq ? q[mq / 2] / 1e3 : 0.0, mq ? q[mq * 99 / 100] / 1e3 : 0.0);
	printf("%s_%s_shorts %lld of %lld\n", argv[1], v, (long long)m,
	       (long long)n_short);
	printf("%s_%s_preemptions %llu deferrals %llu signals %llu\n", argv[1],
	       v, (unsigned long long)st.preemptions,
	       (unsigned long long)st.deferrals,
	       (unsigned long long)st.signals);
	printf("%s_%s_refused pc %llu lock %llu ctx %llu honoured %llu "
	       "stale %llu\n", argv[1], v,
	       (unsigned long long)st.refused_pc,
	       (unsigned long long)st.refused_lock,
	       (unsigned long long)st.refused_ctx,
	       (unsigned long long)st.honoured, (unsigned long long)st.stale);
	printf("%s_%s_cost %llu ns overhead %llu us stretches %llu "
	       "stretch_max %llu\n", argv[1], v,
	       (unsigned long long)st.cost_ns,
	       (unsigned long long)(st.overhead_ns / 1000),
	       (unsigned long long)st.stretches,
	       (unsigned long long)st.stretch_max);
	printf("%s_%s_rusage user %.0f ms sys %.0f ms minflt %ld ivcsw %ld\n",
	       argv[1], v,
	       ((ru1.ru_utime.tv_sec - ru0.ru_utime.tv_sec) * 1e6 +
	        (ru1.ru_utime.tv_usec - ru0.ru_utime.tv_usec)) / 1e3,
	       ((ru1.ru_stime.tv_sec - ru0.ru_stime.tv_sec) * 1e6 +
	        (ru1.ru_stime.tv_usec - ru0.ru_stime.tv_usec)) / 1e3,
	       ru1.ru_minflt - ru0.ru_minflt, ru1.ru_nivcsw - ru0.ru_nivcsw);
	xtc_loop_stats_t ls;
	if (xtc_exec_loop_stats(ex, 0, &ls) == XTC_OK)
		printf("%s_%s_loop runs %llu demotions %llu aged %llu\n",
		       argv[1], v, (unsigned long long)ls.tasks_run,
		       (unsigned long long)ls.demotions,
		       (unsigned long long)ls.aged);
	xtc_exec_fini(ex);
	return 0;
}
