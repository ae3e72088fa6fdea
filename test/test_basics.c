/* test_basics.c - xtc.h basics: version, error text, allocation helpers,
 * clocks, thread sleep, atomics. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "xtc.h"

#include "test_util.h"

static void test_version(void)
{
	int a = -1, b = -1, c = -1;

	CHECK(strcmp(xtc_version_string(), XTC_VERSION_STRING) == 0);
	CHECK(xtc_version_components(&a, &b, &c) == XTC_OK);
	CHECK(a == XTC_VERSION_MAJOR && b == XTC_VERSION_MINOR &&
	      c == XTC_VERSION_PATCH);
	CHECK(xtc_version_components(NULL, &b, &c) == XTC_E_INVAL);
	CHECK(xtc_version_components(&a, NULL, &c) == XTC_E_INVAL);
	CHECK(xtc_version_components(&a, &b, NULL) == XTC_E_INVAL);
}

static void test_strerror(void)
{
#define X(name, val, text) CHECK(strcmp(xtc_strerror(val), text) == 0); \
	CHECK(XTC_E_##name == (val));
	XTC_ERRORS(X)
#undef X
	CHECK(XTC_OK == 0);
	CHECK(XTC_E_IO == -12);
	CHECK(strcmp(xtc_strerror(-9999), "unknown") == 0);
	CHECK(strcmp(xtc_strerror(1), "unknown") == 0);
}

static void test_alloc(void)
{
	void *p = xtc_malloc(0), *q = xtc_malloc(0), *r;

	CHECK(p != NULL && q != NULL && p != q);
	xtc_free(p);
	xtc_free(q);
	xtc_free(NULL);
	p = xtc_calloc(0, 8);
	CHECK(p != NULL);
	xtc_free(p);
	CHECK(xtc_calloc(SIZE_MAX / 2, 4) == NULL);
	p = xtc_calloc(4, 8);
	CHECK(p != NULL && ((char *)p)[31] == 0);
	r = xtc_realloc(p, 0);
	CHECK(r != NULL);
	xtc_free(r);
	p = xtc_realloc(NULL, 16);
	CHECK(p != NULL);
	xtc_free(p);
	p = xtc_aligned_alloc(64, 100);
	CHECK(p != NULL && ((uintptr_t)p & 63) == 0);
	xtc_aligned_free(p);
	p = xtc_aligned_alloc(4096, 0);
	CHECK(p != NULL && ((uintptr_t)p & 4095) == 0);
	xtc_aligned_free(p);
	CHECK(xtc_aligned_alloc(3, 10) == NULL);
	CHECK(xtc_aligned_alloc(0, 10) == NULL);
	xtc_aligned_free(NULL);
}

static void test_clocks(void)
{
	int64_t a = xtc_clock_mono(), b, t0;

	CHECK(a > 0);
	b = xtc_clock_mono();
	CHECK(b >= a);
	CHECK(xtc_clock_real() > (int64_t)1600000000 * 1000000000);
	CHECK(xtc_sleep_ns(-1) == XTC_E_INVAL);
	CHECK(xtc_sleep_ns(0) == XTC_OK);
	t0 = xtc_clock_mono();
	CHECK(xtc_sleep_ns(2000000) == XTC_OK);
	CHECK(xtc_clock_mono() - t0 >= 2000000);
}

static void test_atomics(void)
{
	int64_t v = 5;

	CHECK(xtc_atomic_i64_load(&v) == 5);
	CHECK(xtc_atomic_i64_add(&v, 3) == 5);
	CHECK(v == 8);
	CHECK(xtc_atomic_i64_add(&v, -10) == 8);
	CHECK(xtc_atomic_i64_load(&v) == -2);
	CHECK(xtc_atomic_i64_load(NULL) == 0);
	CHECK(xtc_atomic_i64_add(NULL, 1) == 0);
}

int main(void)
{
	test_version();
	test_strerror();
	test_alloc();
	test_clocks();
	test_atomics();
	if (failures) {
		fprintf(stderr, "test_basics: %d failure(s)\n", failures);
		return 1;
	}
	printf("test_basics: ok\n");
	return 0;
}
