// train/allreduce.h - --mode allreduce: workers without servers, their
// gradients summed in the ring of train/ring.h.
#ifndef PT_TRAIN_ALLREDUCE_H
#define PT_TRAIN_ALLREDUCE_H

#include "train/trainer.h"

// pti_train_allreduce trains w for the configured steps: every worker
// holds the whole model and its optimizer state, starting from the
// values servers would (pti_layout_init_values), sums its gradient with
// the others' in the ring and applies the mean as a sync server does
// (the same update, learning rate and warm-up, common/optim.h): so every
// worker keeps the same parameters, and worker 0 evaluates, writes the
// checkpoints (common/checkpoint.h) and finishes the job alone. A worker that
// fails breaks the ring: its neighbours' next message times out, and the
// launcher ends the job. Blocks; 0 or the error that stopped it.
int pti_train_allreduce(pti_trainer *w);

#endif // PT_TRAIN_ALLREDUCE_H
