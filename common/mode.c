// common/mode.c - the modes' traits (mode.h).
#include "common/mode.h"

#include <stddef.h>

static const pti_mode modes[] = {
    [PT_MODE_SYNC] = {"sync", 1, 0, 0, 1, 1},
    [PT_MODE_ASYNC] = {"async", 0, 1, 1, 1, 0},
    [PT_MODE_SSP] = {"ssp", 0, 1, 0, 1, 0},
    [PT_MODE_ALLREDUCE] = {"allreduce", 1, 0, 0, 0, 0},
    [PT_MODE_HYBRID] = {"hybrid", 1, 0, 0, 1, 0},
};

const pti_mode *pti_mode_of(int mode)
{
	if (mode < PT_MODE_SYNC || mode > PT_MODE_HYBRID)
		return NULL;
	return &modes[mode];
}
