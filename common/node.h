// common/node.h - a process of a job whose scheduler starts one process
// per task (srun, mpirun): its rank and the task count, a name of the job
// for its rendezvous folder (common/rendezvous.h), and the address its
// host is reached at. `pstrain node` (cli/proc/node.c) and the library's
// pt_node_* calls (pstrain.h) read them here.
#ifndef PT_COMMON_NODE_H
#define PT_COMMON_NODE_H

#include <stddef.h>
#include <stdint.h>

// pti_node_task reads this task's rank and the task count from the
// scheduler's variables: SLURM_PROCID and SLURM_NTASKS, else
// OMPI_COMM_WORLD_RANK and OMPI_COMM_WORLD_SIZE (Open MPI), else
// PMI_RANK and PMI_SIZE (MPICH), else RANK and WORLD_SIZE (torchrun);
// *from names the rank's variable. PT_ENOENT when none is set, PT_EINVAL naming a variable that
// is not a rank below the count.
int pti_node_task(uint32_t *rank, uint32_t *size, const char **from);

// pti_node_job_id names the job: slurm-JOB.STEP (SLURM_JOB_ID,
// SLURM_STEP_ID), ompi-ID (OMPI_MCA_ess_base_jobid) or torchrun-ID
// (TORCHELASTIC_RUN_ID, unless it is torchrun's default "none"), into
// out (size n). PT_ENOENT when the scheduler gives none (MPICH).
int pti_node_job_id(char *out, size_t n);

// pti_node_id_check refuses (PT_EINVAL) a job id that would leave
// DIR/nodes: a '/' in it, or a leading '.'.
int pti_node_id_check(const char *id);

// pti_node_address is this host's first IPv4 address that is up and not
// loopback, else 127.0.0.1, into out (size n).
void pti_node_address(char *out, size_t n);

#endif // PT_COMMON_NODE_H
