// train/eval.h - evaluating the parameters: worker 0's periodic rows of
// eval.csv with the best parameters on validation kept, and the final
// evaluation of the job (final.csv and the --save-model file). Forward
// passes only, in chunks the model's scratch holds; timed apart from the
// steps.
#ifndef PT_TRAIN_EVAL_H
#define PT_TRAIN_EVAL_H

#include <stdint.h>

#include "common/data.h"
#include "model/model.h"
#include "train/trainer.h"

// pti_train_evaluate computes the mean loss and accuracy of params on d,
// in chunks that fit m's scratch (max_batch rows), in the buffers given
// (xbuf (max_batch, dim), ybuf and idxbuf (max_batch)).
int pti_train_evaluate(pti_model *m, const float *params,
    const pti_dataset *d, uint32_t max_batch, float *xbuf, uint8_t *ybuf,
    uint32_t *idxbuf, double *loss, double *acc);

// pti_eval_due says whether worker 0 evaluates after step t: every
// --eval-every steps, or --evals-per-epoch times an epoch (at least every
// step), but not after the last (pti_eval_final does).
int pti_eval_due(const pti_trainer *w, uint64_t t);

// pti_eval_row hands a copy of the current parameters (version ver,
// after wstep steps) to worker 0's evaluator, a thread that evaluates
// them on the validation set (the test set when there is none) while
// training goes on, appends the row to eval.csv, and keeps the
// parameters when they are the best on validation so far. The row's
// wall_s is when the worker had these parameters, eval_s how long the
// evaluation took. It waits only when the evaluator holds as many copies
// as it may (pti_eval_drain says how long in all). Returns an error of
// an evaluation before.
int pti_eval_row(pti_trainer *w, int64_t ver, uint64_t wstep);

// pti_eval_drain waits until every evaluation handed over is written;
// *waited_s (may be NULL) gets the time pti_eval_row waited in all.
// Returns the first evaluation's error.
int pti_eval_drain(pti_trainer *w, double *waited_s);

// pti_eval_stop ends the evaluator, dropping what it has not begun.
void pti_eval_stop(pti_trainer *w);

// pti_eval_final evaluates the final parameters (version ver), writes
// the last eval.csv row and final.csv (train_s: the training time), and
// saves the model when asked; w->finished is then set.
int pti_eval_final(pti_trainer *w, int64_t ver, double train_s);

#endif // PT_TRAIN_EVAL_H
