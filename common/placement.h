// common/placement.h - where the processes of a job run when it has
// emulated hosts (--placement, --link; the namespaces themselves are
// cli/run/hosts.h's): which host a process is on and its address, and
// what the launcher made, as a job's summary records it.
#ifndef PT_COMMON_PLACEMENT_H
#define PT_COMMON_PLACEMENT_H

#include <stddef.h>
#include <stdint.h>

#include "common/config.h"

#define PTI_HOSTS_MAX 250 // addresses 10.250.0.1 .. .250

typedef struct pti_hosts {
	char prefix[64]; // pstrain-PID-START
	uint32_t n;      // hosts made (0: none, every process here)
	int hub;         // the hub was made
	int userns;      // made in a user namespace (not by root)
	double bps, delay_s; // --link, read
	int netem; // the delay is netem's; else each process's --send-delay
} pti_hosts;

// pti_hosts_count is how many hosts c's placement needs (0 for none):
// dedicated S + W (W for allreduce), colocated W.
uint32_t pti_hosts_count(const pti_config *c);

// pti_hosts_of is the host of a process: dedicated, servers first, then
// workers; colocated, server s and worker s share host s.
uint32_t pti_hosts_of(const pti_config *c, int server, uint32_t rank);

// pti_hosts_addr writes host k's address (10.250.0.k+1) into out.
void pti_hosts_addr(uint32_t k, char *out, size_t n);

#endif // PT_COMMON_PLACEMENT_H
