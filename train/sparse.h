// train/sparse.h - the sparse models' training and evaluation (--model
// lr, fm:K on --data ctr:...): a way of sending that moves each step's
// rows only (train/sender.h), and the rows evaluations read. See
// train/sparse.c.
#ifndef PT_TRAIN_SPARSE_H
#define PT_TRAIN_SPARSE_H

#include "train/sender.h"
#include "train/trainer.h"

// pti_sparse_init makes w's evaluation views (each set's ids made
// unique) and sets w->n_eval: the bias, then the validation and test
// sets' rows. After the data is loaded and split; pti_sparse_fini frees
// them (NULL is fine).
int pti_sparse_init(pti_trainer *w);
void pti_sparse_fini(pti_trainer *w);

// pti_sparse_open makes the way of sending of a sparse model's job.
int pti_sparse_open(pti_sender *out, pti_trainer *w);

// pti_sparse_fill pulls the validation and test sets' rows into
// w->params behind the bias, for an evaluation (worker 0, between its
// steps); pti_sparse_fill_train the training set's, for the final one.
int pti_sparse_fill(pti_trainer *w);
int pti_sparse_fill_train(pti_trainer *w);

// pti_sparse_save writes the model file of w's sparse model to path: its
// dense vector and every row that exists of its tables (read from the
// servers, ascending by id).
int pti_sparse_save(pti_trainer *w, const char *path);

// pti_sparse_evaluate computes the mean log loss, the accuracy at 0.5
// and the AUC of params (a copy of w->params after pti_sparse_fill) on
// d: w's validation, test or (after pti_sparse_fill_train) training
// set.
int pti_sparse_evaluate(pti_trainer *w, const float *params,
    const pti_dataset *d, double *loss, double *acc, double *auc);

#endif // PT_TRAIN_SPARSE_H
