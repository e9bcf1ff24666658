// common/node.c - a scheduler's task: rank, job and host (node.h), and
// pstrain.h's pt_node_* calls over them and common/rendezvous.h.
#include "common/node.h"

#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "common/rendezvous.h"
#include "pstrain.h"

// node_env_u32 reads a whole decimal number from the environment: 0, or
// -1 when the variable is unset, empty or not such a number.
static int node_env_u32(const char *name, uint32_t *out)
{
	const char *v = getenv(name);
	char *end;
	if (v == NULL || *v < '0' || *v > '9')
		return -1;
	errno = 0;
	unsigned long x = strtoul(v, &end, 10);
	if (errno != 0 || *end != '\0' || x > 1u << 20)
		return -1;
	*out = (uint32_t)x;
	return 0;
}

// The launchers whose task rank and count we read, in this order.
static const struct {
	const char *who, *rank, *size;
} node_launchers[] = {
    {"srun", "SLURM_PROCID", "SLURM_NTASKS"},
    {"mpirun", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"},
    {"mpiexec", "PMI_RANK", "PMI_SIZE"},   // MPICH's Hydra
    {"torchrun", "RANK", "WORLD_SIZE"},
};

int pti_node_task(uint32_t *rank, uint32_t *size, const char **from)
{
	size_t n = sizeof(node_launchers) / sizeof(node_launchers[0]);
	for (size_t i = 0; i < n; i++) {
		if (node_env_u32(node_launchers[i].rank, rank) != 0)
			continue;
		if (node_env_u32(node_launchers[i].size, size) != 0 ||
		    *rank >= *size)
			return pti_err_set(PT_EINVAL, "%s is %s but %s is "
			    "'%s'", node_launchers[i].rank,
			    getenv(node_launchers[i].rank),
			    node_launchers[i].size,
			    getenv(node_launchers[i].size) ? getenv(
				node_launchers[i].size) : "unset");
		*from = node_launchers[i].rank;
		return 0;
	}
	return pti_err_set(PT_ENOENT, "no rank: run it under srun, mpirun, "
	    "MPICH's mpiexec or torchrun (SLURM_PROCID, OMPI_COMM_WORLD_RANK, "
	    "PMI_RANK, RANK)");
}

int pti_node_id_check(const char *id)
{
	for (const char *p = id; *p; p++)
		if (*p == '/' || (p == id && *p == '.'))
			return pti_err_set(PT_EINVAL, "job id '%s' would leave "
			    "DIR/nodes", id);
	return 0;
}

int pti_node_job_id(char *out, size_t n)
{
	const char *job = getenv("SLURM_JOB_ID");
	const char *step = getenv("SLURM_STEP_ID");
	const char *ompi = getenv("OMPI_MCA_ess_base_jobid");
	const char *torch = getenv("TORCHELASTIC_RUN_ID");
	if (job != NULL && *job != '\0')
		snprintf(out, n, "slurm-%s.%s", job, step ? step : "0");
	else if (ompi != NULL && *ompi != '\0')
		snprintf(out, n, "ompi-%s", ompi);
	else if (torch != NULL && *torch != '\0' && strcmp(torch, "none") != 0)
		snprintf(out, n, "torchrun-%s", torch);
	else
		return pti_err_set(PT_ENOENT, "no job id: none of SLURM_JOB_ID, "
		    "OMPI_MCA_ess_base_jobid or TORCHELASTIC_RUN_ID (torchrun "
		    "--rdzv-id; its default, none, is every job's) is set");
	return pti_node_id_check(out);
}

void pti_node_address(char *out, size_t n)
{
	struct ifaddrs *ifs, *i;
	snprintf(out, n, "127.0.0.1");
	if (getifaddrs(&ifs) != 0)
		return;
	for (i = ifs; i != NULL; i = i->ifa_next) {
		if (i->ifa_addr == NULL || i->ifa_addr->sa_family != AF_INET ||
		    (i->ifa_flags & IFF_LOOPBACK) || !(i->ifa_flags & IFF_UP))
			continue;
		struct sockaddr_in *a = (struct sockaddr_in *)i->ifa_addr;
		inet_ntop(AF_INET, &a->sin_addr, out, (socklen_t)n);
		break;
	}
	freeifaddrs(ifs);
}

// ---------------------------------------------------------------- pstrain.h

int pt_node_task(uint32_t *rank, uint32_t *size, char *id, uint64_t id_size)
{
	const char *from;
	int rv = pti_node_task(rank, size, &from);
	if (rv != 0)
		return rv;
	return pti_node_job_id(id, (size_t)id_size);
}

int pt_node_address(char *out, uint64_t size)
{
	if (out == NULL || size < 16)
		return pti_err_set(PT_EINVAL, "pt_node_address: room for 16 "
		    "bytes needed");
	pti_node_address(out, (size_t)size);
	return 0;
}

int pt_node_publish(const char *dir, const char *role, uint32_t rank,
    const char *url)
{
	if (dir == NULL || role == NULL || url == NULL)
		return pti_err_set(PT_EINVAL, "pt_node_publish: NULL argument");
	return pti_rdv_publish(dir, role, rank, url);
}

int pt_node_gather(const char *dir, const char *role, uint32_t n,
    double timeout_s, char *out, uint64_t size)
{
	if (dir == NULL || role == NULL || out == NULL || size == 0)
		return pti_err_set(PT_EINVAL, "pt_node_gather: NULL argument");
	return pti_rdv_gather(dir, role, n, timeout_s, out, (size_t)size,
	    role);
}
