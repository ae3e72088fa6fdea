/*
 * sim_int.h - internal contract between the simulator files (sim.c,
 * sim_fault.c).
 */
#ifndef XTC_SIM_INT_H
#define XTC_SIM_INT_H

/* sim_fault.c: forget every buggify decision; xtc_sim_activate calls it so
 * that each run decides its sites afresh from its own seed. */
void xtc__sim_fault_reset(void);

#endif
