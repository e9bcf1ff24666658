// train/loop.h - the training loop of a worker of a parameter-server job
// (sync, async, ssp): one pass per step, through a way of sending
// (train/sender.h).
#ifndef PT_TRAIN_LOOP_H
#define PT_TRAIN_LOOP_H

#include "train/sender.h"
#include "train/trainer.h"

// pti_train_loop joins the job, trains until the configured steps are
// done, rejoining when a server went away or came back from a
// checkpoint, and finishes the job (train/session.h). Blocks; 0, or the
// error that stopped it (PT_EDIVERGED: the loss or gradient diverged).
int pti_train_loop(pti_trainer *w, pti_sender *s);

#endif // PT_TRAIN_LOOP_H
