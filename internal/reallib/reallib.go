//go:build cgo && xtc_reallibs

package reallib

/*
#cgo pkg-config: sqlite3
#include <stdint.h>
#include <string.h>
#include <sqlite3.h>

// The program's own kernel between library calls, declared preemptible
// (xtc_preempt(3) SAFETY); the sqlite calls around it are not.
__attribute__((section("xtc_ptext"), noinline))
static uint64_t rl_kernel(uint64_t x, int iters)
{
	for (int i = 0; i < iters; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		__asm__ volatile("" : "+r"(x));
	}
	return x;
}

static uint64_t rl_fnv(uint64_t h, const void *p, size_t n)
{
	const unsigned char *c = p;
	for (size_t i = 0; i < n; i++)
		h = (h ^ c[i]) * 1099511628211ULL;
	return h;
}

// One request: a private connection, 150 rows, an aggregate query; the
// digest of its result (negative: the request's own failure).
static intptr_t rl_request(void *arg)
{
	intptr_t i = (intptr_t)arg;
	sqlite3 *db;
	sqlite3_stmt *st;
	uint64_t h = 1469598103934665603ULL, k = (uint64_t)i + 7;
	intptr_t rc = -1;
	if (sqlite3_open(":memory:", &db) != SQLITE_OK)
		return -1;
	if (sqlite3_exec(db, "CREATE TABLE t(a INTEGER, b TEXT)", 0, 0, 0) != SQLITE_OK ||
	    sqlite3_prepare_v2(db, "INSERT INTO t VALUES(?1, ?2)", -1, &st, 0) != SQLITE_OK)
		goto out;
	for (int r = 0; r < 150; r++) {
		char b[32];
		k = rl_kernel(k, 400);
		sqlite3_snprintf(sizeof b, b, "r%d-%d", (int)i, (int)(k % 1000));
		sqlite3_bind_int64(st, 1, (sqlite3_int64)(k % 100000));
		sqlite3_bind_text(st, 2, b, -1, SQLITE_TRANSIENT);
		if (sqlite3_step(st) != SQLITE_DONE) {
			sqlite3_finalize(st);
			goto out;
		}
		sqlite3_reset(st);
	}
	sqlite3_finalize(st);
	if (sqlite3_prepare_v2(db, "SELECT a % 31, count(*), sum(a), group_concat(b) "
	                       "FROM t GROUP BY 1 ORDER BY 1", -1, &st, 0) != SQLITE_OK)
		goto out;
	while (sqlite3_step(st) == SQLITE_ROW) {
		for (int c = 0; c < 3; c++) {
			sqlite3_int64 v = sqlite3_column_int64(st, c);
			h = rl_fnv(h, &v, sizeof v);
		}
		const unsigned char *t = sqlite3_column_text(st, 3);
		h = rl_fnv(h, t, strlen((const char *)t));
	}
	sqlite3_finalize(st);
	rc = (intptr_t)(h >> 2);
out:
	sqlite3_close(db);
	return rc;
}

// Runs until killed: sqlite calls that take its static mutexes (the
// allocator's, the PRNG's) with the kernel in between.
static intptr_t rl_forever(void *arg)
{
	(void)arg;
	sqlite3 *db;
	if (sqlite3_open(":memory:", &db) != SQLITE_OK)
		return -1;
	sqlite3_exec(db, "CREATE TABLE t(a, b)", 0, 0, 0);
	uint64_t k = 1;
	for (;;) {
		sqlite3_exec(db, "INSERT INTO t VALUES(randomblob(64), hex(randomblob(32)))",
		             0, 0, 0);
		sqlite3_exec(db, "DELETE FROM t WHERE rowid % 7 = 0", 0, 0, 0);
		k = rl_kernel(k, 3000);
	}
	return (intptr_t)k;
}

// A plain call on a fresh connection (the PRNG and the allocator).
static int rl_plain(void)
{
	sqlite3 *db;
	sqlite3_stmt *st;
	int ok = 0;
	if (sqlite3_open(":memory:", &db) != SQLITE_OK)
		return 0;
	if (sqlite3_prepare_v2(db, "SELECT length(randomblob(100))", -1, &st, 0) == SQLITE_OK) {
		ok = sqlite3_step(st) == SQLITE_ROW && sqlite3_column_int(st, 0) == 100;
		sqlite3_finalize(st);
	}
	sqlite3_close(db);
	return ok;
}

static intptr_t rl_direct(intptr_t i) { return rl_request((void *)i); }
static void *rl_request_fn(void) { return (void *)rl_request; }
static void *rl_forever_fn(void) { return (void *)rl_forever; }
*/
import "C"

import "unsafe"

// Request is the C request `intptr_t rl_request(void *i)`.
func Request() unsafe.Pointer { return C.rl_request_fn() }

// Forever is a C kernel calling sqlite until it is killed.
func Forever() unsafe.Pointer { return C.rl_forever_fn() }

// Direct runs request i with a plain cgo call (the reference).
func Direct(i int64) int64 {
	return int64(C.rl_direct(C.intptr_t(i)))
}

// Plain makes a plain cgo call into sqlite on a fresh connection.
func Plain() bool { return C.rl_plain() != 0 }
