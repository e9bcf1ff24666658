// common/placement.c - the hosts of a job's processes (placement.h).
#include "common/placement.h"

#include <stdio.h>

#include "common/mode.h"

uint32_t pti_hosts_count(const pti_config *c)
{
	uint32_t s = pti_mode_of(c->job.mode)->servers ? c->job.servers : 0;
	switch (c->placement) {
	case PT_PLACE_DEDICATED:
		return s + c->job.workers;
	case PT_PLACE_COLOCATED:
		return c->job.workers;
	}
	return 0;
}

uint32_t pti_hosts_of(const pti_config *c, int server, uint32_t rank)
{
	if (c->placement == PT_PLACE_COLOCATED || server)
		return rank;
	return (pti_mode_of(c->job.mode)->servers ? c->job.servers : 0) + rank;
}

void pti_hosts_addr(uint32_t k, char *out, size_t n)
{
	snprintf(out, n, "10.250.0.%u", k + 1);
}
