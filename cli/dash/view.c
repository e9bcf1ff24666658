// cli/dash/view.c - what both of the dashboard's responses read from a
// job the same way (view.h).
#include "cli/dash/view.h"

#include <stdio.h>
#include <sys/stat.h>

#include "common/config.h"

uint32_t pti_dash_workers(const pti_dash_jobrt *j)
{
	if (j->cfg.workers > 0)
		return j->cfg.workers;
	char path[PT_PATH_MAX + 160];
	struct stat sb;
	uint32_t r = 0;
	for (; r < PTI_DASH_WORKERS; r++) {
		snprintf(path, sizeof(path), "%s/worker-%u.csv", j->cfg.dir, r);
		if (stat(path, &sb) != 0)
			break;
	}
	return r;
}
