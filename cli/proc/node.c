// cli/proc/node.c - pstrain node: one process of a job whose role and
// rank come from the scheduler that started it (srun, mpirun) or from
// --node-rank, so that one command line, run on every task, starts the
// whole job.
//
// Ranks 0..S-1 serve, S..S+W-1 work (worker rank = node rank - S). With
// --cluster the servers' addresses are the file's; without it each server
// listens on --advertise (port --port + R, or any free one) and publishes
// its address as DIR/nodes/ID/server-R.url, written whole by a rename, and
// the workers wait for those files: DIR must be a folder every host sees,
// as a cluster's home or scratch file system is. ID names this job (the
// Slurm job and step, or Open MPI's job id), so that a folder reused by
// an earlier job never hands out that job's addresses. With --mode
// allreduce every task is a worker, and each publishes its ring's address
// there (worker-R.url) for the others. Not for: starting processes (the
// scheduler does).
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/flags.h"
#include "cli/proc/procs.h"
#include "common/afile.h"
#include "common/clock.h"
#include "common/config.h"
#include "common/err.h"
#include "common/node.h"
#include "common/proto.h"
#include "common/rendezvous.h"

// node_rank finds this process's rank and the job's process count: from
// --node-rank (count S+W), else from the launcher's variables
// (common/node.h). *from says which, for messages.
static int node_rank(const pti_config *c, uint32_t *rank, uint32_t *size,
    const char **from)
{
	if (c->node_rank >= 0) {
		*rank = (uint32_t)c->node_rank;
		*size = 0; // S+W, once known
		*from = "--node-rank";
		return 0;
	}
	int rv = pti_node_task(rank, size, from);
	if (rv == PT_ENOENT)
		return pti_err_set(PT_EINVAL, "%s, or give --node-rank N",
		    pt_errmsg(rv));
	return rv;
}

// node_job_id names the job for its rendezvous folder: --job-id, else the
// launcher's (common/node.h).
static int node_job_id(const pti_config *c, char *out, size_t n)
{
	if (c->job_id[0] == '\0')
		return pti_node_job_id(out, n) == 0 ? 0 :
		    pti_err_set(PT_EINVAL, "no job id for DIR/nodes/ID: give "
			"--job-id ID (one a later job will not reuse), or "
			"--cluster FILE");
	snprintf(out, n, "%s", c->job_id);
	return pti_node_id_check(out);
}

// node_advertise is the address this host is reached at: --advertise,
// else pti_node_address's.
static void node_advertise(const pti_config *c, char *out, size_t n)
{
	if (c->advertise[0] != '\0')
		snprintf(out, n, "%s", c->advertise);
	else
		pti_node_address(out, n);
}

// node_dir is DIR/nodes/ID, where this job's processes publish their
// addresses (common/rendezvous.h).
static int node_dir(char *out, size_t n, const pti_config *c,
    const char *id)
{
	int k = snprintf(out, n, "%s/nodes/%s", c->job.out, id);
	if (k < 0 || (size_t)k >= n)
		return pti_err_set(PT_EINVAL, "--out %s: too long a path",
		    c->job.out);
	return 0;
}

// node_roles sets --servers and --workers from the cluster file or the
// process count, and the role of this rank; *server is 1 to serve.
static int node_roles(pti_config *c, uint32_t rank, uint32_t size,
    const char *from, int *server)
{
	int rv;
	if (c->cluster[0] != '\0' &&
	    (rv = pti_config_cluster(c, PT_CMD_NODE)) != 0)
		return rv;
	if (c->cluster[0] == '\0' && size > 0 &&
	    !pti_config_given(c, "workers")) {
		if (size <= c->job.servers)
			return pti_err_set(PT_EINVAL, "%u processes leave no "
			    "worker beside --servers %u", size, c->job.servers);
		c->job.workers = size - c->job.servers;
	}
	uint32_t total = c->job.servers + c->job.workers;
	if (size > 0 && size != total)
		return pti_err_set(PT_EINVAL, "the launcher started %u "
		    "processes, but the job has %u servers and %u workers",
		    size, c->job.servers, c->job.workers);
	if (rank >= total)
		return pti_err_set(PT_EINVAL, "%s %u is not below the job's "
		    "%u servers + %u workers", from, rank, c->job.servers,
		    c->job.workers);
	*server = rank < c->job.servers;
	c->rank = *server ? rank : rank - c->job.servers;
	return 0;
}

int pti_cmd_node(int argc, char **argv)
{
	pti_config c;
	int help, rv, server = 0;
	uint32_t rank = 0, size = 0;
	const char *from = "";
	char id[256] = "", where[300], path[PT_PATH_MAX + 512];
	char dir[PT_PATH_MAX];

	pti_config_defaults(&c);
	if ((rv = pti_config_parse(&c, PT_CMD_NODE, argc, argv, &help)) != 0) {
		fprintf(stderr, "pstrain node: %s\n", pt_errmsg(rv));
		return PTI_EXIT_USAGE;
	}
	if (help) {
		printf("usage: pstrain node [flags]\n\nOne process of a job "
		       "started by a scheduler on every task: srun pstrain "
		       "node ...\nor mpirun pstrain node ... Its rank "
		       "(SLURM_PROCID, OMPI_COMM_WORLD_RANK, MPICH's\nPMI_RANK, "
		       "torchrun's RANK, or --node-rank) "
		       "picks its role: ranks below --servers S serve, the "
		       "rest work,\nso the job has S servers and as many "
		       "workers as the other tasks. Takes\nevery flag of "
		       "pstrain run, server and worker. Without --cluster, "
		       "each server\nlistens on tcp://--advertise:PORT and "
		       "publishes that address as\nDIR/nodes/ID/server-R.url, "
		       "where the workers read it: --out DIR must be a\nfolder "
		       "every host shares. With --mode allreduce every task "
		       "is a worker,\nand each publishes its ring's address "
		       "there as worker-R.url for the others.\nWith --cluster "
		       "FILE the addresses are the file's.\nThe job then runs "
		       "as one started by "
		       "hand (pstrain worker --help).\n\nflags:\n");
		pti_config_help(stdout, PT_CMD_NODE);
		return 0;
	}
	// allreduce: every task is a worker of the ring.
	int ar = c.job.mode == PT_MODE_ALLREDUCE;
	if (ar && pti_config_given(&c, "servers") && c.job.servers > 0) {
		fprintf(stderr, "pstrain node: --mode allreduce runs no "
		    "servers: every task is a worker (--servers %u)\n",
		    c.job.servers);
		return PTI_EXIT_USAGE;
	}
	if (ar)
		c.job.servers = 0;
	// The job's options are checked again with the worker count the
	// tasks give (a batch W does not divide): every task refuses at once,
	// the workers before they wait for a server that already refused.
	if ((rv = pti_config_length_check(&c)) != 0 ||
	    (rv = node_rank(&c, &rank, &size, &from)) != 0 ||
	    (rv = node_roles(&c, rank, size, from, &server)) != 0 ||
	    (rv = pti_jobopt_check(&c.job)) != 0 ||
	    (c.cluster[0] == '\0' &&
		(rv = node_job_id(&c, id, sizeof(id))) != 0)) {
		fprintf(stderr, "pstrain node: %s\n", pt_errmsg(rv));
		return PTI_EXIT_USAGE;
	}
	snprintf(where, sizeof(where), "node %u (%s %u)", rank,
	    server ? "server" : "worker", c.rank);
	if (c.job.out[0] == '\0') {
		fprintf(stderr, "pstrain %s: needs --out DIR\n", where);
		return PTI_EXIT_USAGE;
	}
	// Without a cluster file, servers (allreduce: workers, for their
	// ring) listen on this host's address and publish it in
	// DIR/nodes/ID, where the workers (the other workers) find it.
	if (c.cluster[0] == '\0' &&
	    (rv = node_dir(dir, sizeof(dir), &c, id)) != 0) {
		fprintf(stderr, "pstrain %s: %s\n", where, pt_errmsg(rv));
		return PTI_EXIT_USAGE;
	}
	if ((server || ar) && c.cluster[0] == '\0') {
		char host[256];
		node_advertise(&c, host, sizeof(host));
		snprintf(c.listen, sizeof(c.listen), "%s://%s:%u",
		    c.transport == PT_TRANSPORT_TLS ? "tls+tcp" : "tcp", host,
		    c.port ? c.port + c.rank : 0);
	}
	if (ar && c.cluster[0] == '\0') {
		memcpy(c.ring_dir, dir, sizeof(dir));
		if (pti_mkdir_p(dir) != 0) {
			fprintf(stderr, "pstrain %s: %s: %s\n", where, dir,
			    strerror(errno));
			return PTI_EXIT_FAIL;
		}
	} else if (!server && c.cluster[0] == '\0' &&
	    (rv = pti_rdv_gather(dir, "server", c.job.servers,
		 c.job.connect_timeout, c.connect, sizeof(c.connect),
		 where)) != 0) {
		fprintf(stderr, "pstrain %s: %s\n", where, pt_errmsg(rv));
		return PTI_EXIT_FAIL;
	}
	// From here on this is a server or a worker started by hand.
	if ((rv = pti_cli_finish(&c, server ? PT_CMD_SERVER : PT_CMD_WORKER,
		 where)) >= 0)
		return rv;
	if (server) {
		const char *publish = NULL;
		if (c.cluster[0] == '\0') {
			pti_rdv_path(path, sizeof(path), dir, "server",
			    c.rank);
			publish = path;
		}
		return pti_serve(&c, publish);
	}
	char cmdline[8192];
	pti_cmdline(cmdline, sizeof(cmdline), "node", argc, argv);
	return pti_work(&c, cmdline);
}
