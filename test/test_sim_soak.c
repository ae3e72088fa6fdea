/*
 * test_sim_soak.c - the simulator seed sweep at soak size (suite slow).
 */
#define SWEEP_SEEDS 20000
#include "test_sim.c"
