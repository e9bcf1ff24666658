// common/jobopt.h - a job's options as the library owns them: what every
// server and worker of one job must agree on, or needs to run it, and
// nothing of pstrain's own trainer, data, launcher or processes
// (pstrain.h's pt_job_set names them). pt_job holds one; the command
// line's pti_config (common/config.h) embeds one as c->job, never the
// other way round. The flag table sets them either way: pt_job_set takes
// the flags whose field lies here, by their flag names.
#ifndef PT_COMMON_JOBOPT_H
#define PT_COMMON_JOBOPT_H

#include <stdint.h>

#include "common/optspec.h"

#define PT_PATH_MAX 1024

// jobopt.shm of a worker whose --transport auto found every server at an
// ipc:// address: shared memory when every one of them offers it (a
// server started with --transport ipc offers none), else ipc.
#define PTI_SHM_TRY 2

typedef struct pti_jobopt {
	int mode; // PT_MODE_* (common/proto.h), traits in common/mode.h
	uint32_t servers, workers;
	uint32_t batch; // global batch
	double lr;      // 0: the optimizer's usual rate (pti_job_lr)
	uint64_t seed;  // initial values
	char out[PT_PATH_MAX]; // where each server writes server-R.json
	double rpc_timeout;    // seconds a worker waits for a reply
	double t0;             // the job's start, seconds since 1970: wall_s
			       // columns count from it; 0: the process's
	char tensorboard[PT_PATH_MAX]; // TensorBoard event files' folder,
				       // or "" (common/tboard.h)
	double auth_timeout;   // seconds to prove the secret after connecting
	// TLS for tls+tcp:// addresses (common/transport.h): PEM files
	char tls_cert[PT_PATH_MAX]; // this process's certificate
	char tls_key[PT_PATH_MAX];  // its private key
	char tls_ca[PT_PATH_MAX];   // the CA that signs every peer's
	char secret_file[PT_PATH_MAX];
	uint32_t shm; // 1: dense values through shared memory with the
		      // processes of this host (common/shm.h), over ipc;
		      // PTI_SHM_TRY: a worker's, when its servers offer it
	// consistency and staleness policies (servers)
	uint32_t staleness;      // ssp bound s
	uint32_t backup_workers; // sync: a step closes with W - b gradients
	uint32_t staleness_lr;   // 1: lr / max(1, staleness)
	int64_t max_staleness;   // -1: no limit; else drop staler gradients
	uint32_t matched_lr;     // async/ssp: lr / W per applied gradient
	int lr_scaling;          // PT_LR_NONE or PT_LR_LINEAR
	double warmup;           // steps of the learning rate's ramp; 0 none
	char optimizer[64];      // sgd, momentum:M, nesterov:M, adagrad, adam
	pti_optim optim;         // --optimizer, read (weight_decay 0)
	double weight_decay;
	// checkpoints
	char checkpoint_dir[PT_PATH_MAX];
	char checkpoint_every[32]; // "N" steps or "Ns" seconds; "" never
	uint64_t ckpt_every;       // --checkpoint-every, read: N; 0 never
	int ckpt_seconds;          // 1: N is seconds, 0: versions
	int64_t resume_version;    // server: the checkpoint to load; -1 none
	// membership
	double worker_timeout; // server: seconds of silence = dead; 0 off
	double alone_timeout;  // server not under pstrain run: seconds; 0
			       // waits for workers forever
	double connect_timeout; // worker: seconds for a server never reached
	int64_t step_max;       // server: the highest step a worker may say
				// (push, hello); 0: 2^50
	double grad_bound; // server: a push's gradient RMS over this many
			   // times its range's recent median is refused; 0 off
	// embedding tables (ps/rows.h), each server's rows of each table
	uint64_t table_capacity; // rows at most; 0: no limit
	int table_evict;         // PTI_EVICT_*: which row makes room
	uint32_t table_admit;    // touches before an id becomes a row
} pti_jobopt;

// Which row a table at its capacity evicts for a new one.
enum {
	PTI_EVICT_LRU = 1, // the least recently touched
	PTI_EVICT_LFU,     // the least often touched
};

#endif // PT_COMMON_JOBOPT_H
