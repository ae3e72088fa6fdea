#include <stdio.h>
#include <string.h>
#include <stdatomic.h>
#include "xb.h"
#include "xb_api.h"
static _Atomic long dbg_cnt;
static xtc_exec_t *dbg_ex;
static void dbg_nop(void *a) { (void)a; atomic_fetch_add(&dbg_cnt, 1); }
static void dbg_cb(void *a) { (void)a; xtc_proc_spawn(xtc_exec_loop(dbg_ex, 0), dbg_nop, NULL, NULL, NULL); }
static long dbg_n;
static int dbg_mode;
static void dbg_driver(void *a) {
	(void)a;
	int64_t t0 = xb_now();
	for (long i = 0; i < dbg_n; i++) {
		if (dbg_mode == 0) xtc_proc_spawn(xtc_exec_loop(dbg_ex, 0), dbg_nop, NULL, NULL, NULL);
		while (atomic_load(&dbg_cnt) <= i) xtc_yield();
	}
	printf("driver mode: %.1f ns/spawn\n", (double)(xb_now()-t0)/dbg_n);
}
#include <pthread.h>
static void *dbg_gen(void *a) {
	(void)a;
	int64_t t0 = xb_now();
	for (long i = 0; i < dbg_n; i++) {
		if (dbg_mode == 1) while (xtc_exec_submit(dbg_ex, 0, dbg_cb, NULL)) ;
		else while (xtc_proc_spawn(xtc_exec_loop(dbg_ex, 0), dbg_nop, NULL, NULL, NULL));
	}
	while (atomic_load(&dbg_cnt) < dbg_n) ;
	printf("gen mode %d: %.1f ns/req\n", dbg_mode, (double)(xb_now()-t0)/dbg_n);
	xtc_exec_stop(dbg_ex);
	return NULL;
}
void xb_dbg(int mode, long n) {
	dbg_n = n; dbg_mode = mode; atomic_store(&dbg_cnt, 0);
	xtc_exec_init(&dbg_ex, 1);
	if (mode >= 3) { xtc_preempt_set_involuntary(1); xtc_exec_set_preempt(dbg_ex, 50000); mode -= 3; dbg_mode = mode; }
	if (mode == 0) {
		xtc_proc_spawn(xtc_exec_loop(dbg_ex, 0), dbg_driver, NULL, NULL, NULL);
		xtc_exec_run(dbg_ex);
	} else {
		xtc_exec_set_service_mode(dbg_ex, 1);
		pthread_t g; pthread_create(&g, NULL, dbg_gen, NULL);
		xtc_exec_run(dbg_ex);
		pthread_join(g, NULL);
	}
	xtc_exec_fini(dbg_ex);
	fflush(stdout);
}

static _Atomic int dh_stop;
static intptr_t dh_spin(void *a) { (void)a; uint64_t x = 1; int64_t end = xb_now() + 3000000000LL; while (!atomic_load_explicit(&dh_stop, memory_order_relaxed)) { for (int i = 0; i < 100000; i++) x = x * 6364136223846793005ull + 1; if (xb_now() > end) break; } return (intptr_t)(x&1); }
static void dh_spin_proc(void *a) { dh_spin(a); }
static intptr_t dh_probe(void *a) { (void)a; for (int k = 0; k < 100; k++) xtc_proc_sleep(1000000); atomic_store(&dh_stop, 1); return 0; }
static void dh_probe_proc(void *a) { dh_probe(a); }
static intptr_t dh_probe_coro(void *a) { (void)a; int64_t t0 = xb_now(); for (int k = 0; k < 20; k++) { xtc_yield(); } atomic_store(&dh_stop, 1); printf("coro probe yields took %lld us\n", (long long)(xb_now()-t0)/1000); return 0; }
void xb_dbg_hog(int mode) {
	xtc_exec_t *ex; atomic_store(&dh_stop, 0);
	xtc_exec_init(&ex, 1);
	xtc_preempt_set_involuntary(1);
	xtc_exec_set_preempt(ex, 500000);
	uint64_t st0[9], st1[9];
	xb_preempt_stats(st0);
	if (mode == 0) { /* coroutines */
		xtc_exec_async_on(ex, 0, dh_probe_coro, NULL, NULL);
		xtc_exec_async_on(ex, 0, dh_spin, NULL, NULL);
	} else {
		xtc_proc_spawn(xtc_exec_loop(ex, 0), dh_probe_proc, NULL, NULL, NULL);
		xtc_proc_spawn(xtc_exec_loop(ex, 0), dh_spin_proc, NULL, NULL, NULL);
	}
	int64_t t0 = xb_now();
	xtc_exec_run(ex);
	xb_preempt_stats(st1);
	printf("mode %d: %lld ms, preemptions %llu deferrals %llu signals %llu\n", mode, (long long)(xb_now()-t0)/1000000,
	       (unsigned long long)(st1[3]-st0[3]), (unsigned long long)(st1[4]-st0[4]), (unsigned long long)(st1[0]-st0[0]));
	xtc_preempt_set_involuntary(0);
	xtc_exec_fini(ex);
	fflush(stdout);
}
