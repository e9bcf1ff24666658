// ps/policy.c - which policy a mode's servers run (policy.h).
#include "ps/policy.h"

const ps_policy *pti_policy_of(int mode)
{
	switch (mode) {
	case PT_MODE_SYNC:
	case PT_MODE_HYBRID: // its variables; tables.c its rows
		return &pti_policy_sync;
	case PT_MODE_ASYNC:
		return &pti_policy_async;
	case PT_MODE_SSP:
		return &pti_policy_ssp;
	}
	return NULL;
}
