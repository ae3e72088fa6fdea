/*
 * test_h5.h - the executor, class, stall and simulator tests' name for the
 * shared check harness (test_util.h).
 */
#ifndef TEST_H5_H
#define TEST_H5_H

#include "test_util.h"

#endif
