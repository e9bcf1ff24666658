// train/worker.h - one worker process of pstrain's own trainer: its
// slice of every global batch, gradients pushed to the servers (or
// summed in the ring of --mode allreduce), fresh parameters back.
#ifndef PT_TRAIN_WORKER_H
#define PT_TRAIN_WORKER_H

#include <stdint.h>

#include "common/config.h"
#include "train/eval.h"

// pti_train_run trains for the configured steps, writing
// c->out/worker-R.csv (and, for rank 0, eval.csv). When a server's
// connection closes, the worker waits for it to come back (at most
// --rpc-timeout seconds), says hello again and goes on from the step the
// servers say. At the end every worker waits until all have finished;
// the lowest-ranked worker not lost (worker 0 unless it died) then
// writes final.csv and the --save-model file and shuts the servers down.
// Blocks; returns 0, PT_EDIVERGED when the loss became NaN or infinite,
// or another error with a detail. res (may be NULL) receives what the
// job's summary needs that its files do not say.
typedef struct pti_train_result {
	int finished; // this worker finished the job (wrote final.csv)
	uint64_t steps, spe, n_train, n_val; // global steps, per epoch
	uint32_t classes;
	uint32_t lost; // workers the servers counted lost at the end
	double t0;     // the job's start (seconds since 1970)
	uint64_t n_params; // the model's parameters
} pti_train_result;
int pti_train_run(const pti_config *c, pti_train_result *res);

#endif // PT_TRAIN_WORKER_H
