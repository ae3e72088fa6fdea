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
