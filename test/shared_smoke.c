/*
 * shared_smoke.c - links against the shared libxtc with the public headers
 * only: every public function used here must be exported (XTC_API; the
 * library is built with -fvisibility=hidden), and the version macros must
 * agree with what the library reports.
 */
#include <stdio.h>
#include <string.h>

#include "xtc.h"

int main(void)
{
	int maj = -1, min = -1, pat = -1;
	xtc_loop_t *loop = NULL;

	if (xtc_version_components(&maj, &min, &pat) != XTC_OK ||
	    maj != XTC_VERSION_MAJOR || min != XTC_VERSION_MINOR ||
	    pat != XTC_VERSION_PATCH ||
	    strcmp(xtc_version_string(), XTC_VERSION_STRING) != 0) {
		fprintf(stderr, "version mismatch: %s\n", xtc_version_string());
		return 1;
	}
	if (xtc_strerror(XTC_E_INVAL) == NULL || xtc_loop_init(NULL) != XTC_E_INVAL)
		return 1;
	if (xtc_loop_init(&loop) != XTC_OK || xtc_loop_run(loop) != XTC_OK ||
	    xtc_loop_fini(loop) != XTC_OK)
		return 1;
	printf("shared libxtc %s, io %s\n", xtc_version_string(),
	       xtc_io_backend_name());
	return 0;
}
