/*
 * test_sim_fault_off.c - XTC_INJECT_DISABLE compiles the injection macros
 * out (xtc_sim(3)): XTC_SIM_BUGGIFY is the constant 0 and
 * XTC_SIM_FAULT_POINT reaches nothing, even with a simulation active and
 * every point enabled. (The functions themselves stay available.)
 */
#define XTC_INJECT_DISABLE 1
#include "xtc.h"

#include "test_util.h"

/* a constant expression: nothing is evaluated */
_Static_assert(XTC_SIM_BUGGIFY("off.site") == 0, "XTC_SIM_BUGGIFY not 0");

int main(void)
{
	xtc_sim_activate(1);
	xtc_sim_fault_points_enable(1000);
	xtc_sim_buggify_enable(1000);
	XTC_SIM_FAULT_POINT("off.point");
	CHECK_EQ(XTC_SIM_BUGGIFY("off.site"), 0);
	CHECK_EQ(xtc_sim_fault_points_seen(), 0);
	CHECK_EQ(xtc_sim_buggify_reached_count(), 0);
	/* the functions still work when called directly */
	CHECK_EQ(xtc_sim_fault_point("off.point"), 1);
	CHECK_EQ(xtc_sim_fault_point_fires("off.point"), 1);
	xtc_sim_fault_points_disable();
	xtc_sim_buggify_disable();
	xtc_sim_deactivate();
	if (failures) {
		fprintf(stderr, "test_sim_fault_off: %d failure(s)\n", failures);
		return 1;
	}
	printf("test_sim_fault_off: ok\n");
	return 0;
}
