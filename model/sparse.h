// model/sparse.h - sparse models over embedding rows (issue 35): sparse
// logistic regression (--model lr) and the factorization machine
// (--model fm:K), each example a list of ids, one per field.
//
// A batch's ids are first made unique (pti_sparse_unique): the rows to
// pull are those ids, once each, and every (example, field) names its
// row by slot. Row u holds 1 + K floats: the id's weight, then its K
// factors (K = 0: logistic regression). The model's one dense value is
// the bias. The logit of an example with rows r_1..r_F is
//     bias + sum_i w_i + 1/2 sum_k ((sum_i v_ik)^2 - sum_i v_ik^2),
// its loss the log loss of sigmoid(logit) against the click y, and the
// gradient of the batch's mean loss goes to each unique row once, summed
// over every place its id appears: the rows to push.
//
// Pure functions on the caller's arrays; safe from any thread.
#ifndef PT_MODEL_SPARSE_H
#define PT_MODEL_SPARSE_H

#include <stdint.h>

#include "common/layout.h" // PT_WD_MAX_HIDDEN
#include "common/stats.h"

// pti_sparse_unique writes the distinct values of ids[0..n) ascending to
// uniq and, for each i, the index in uniq of ids[i] to slot[i]; returns
// how many are distinct. scratch holds 4 n words. uniq and slot hold n.
uint32_t pti_sparse_unique(const uint64_t *ids, uint32_t n, uint64_t *uniq,
    uint32_t *slot, uint64_t *scratch);

// pti_fm_grad computes, for b examples of `fields` slots each (slot,
// into rows of 1 + k floats), their logits (out, b floats; may be NULL),
// the mean log loss (*loss) against y, the gradient of that mean for
// every row (grows, like rows: zero where a row appears nowhere) and for
// the bias (*gbias). n_rows is the number of rows. k = 0: logistic
// regression. scratch holds k floats.
void pti_fm_grad(uint32_t k, const float *rows, uint32_t n_rows,
    const uint32_t *slot, uint32_t b, uint32_t fields, float bias,
    const uint8_t *y, float *grows, float *gbias, double *loss,
    float *logits, float *scratch);

// pti_fm_logits is pti_fm_grad's forward pass alone: the logits of b
// examples into logits. scratch holds k floats.
void pti_fm_logits(uint32_t k, const float *rows, const uint32_t *slot,
    uint32_t b, uint32_t fields, float bias, float *logits, float *scratch);

// pti_fm_metrics evaluates n examples (slots into rows, as pti_fm_grad's)
// against clicks y: the mean log loss, the accuracy at probability 0.5
// and the AUC, in the caller's buffers logits and scored (n each).
void pti_fm_metrics(uint32_t k, const float *rows, const uint32_t *slot,
    uint32_t n, uint32_t fields, float bias, const uint8_t *y,
    float *logits, pti_scored *scored, double *loss, double *acc,
    double *auc);

// Sparse softmax regression (--model lr on C > 2 classes): row u holds C
// floats, the id's weight for each class, and the model's C dense values
// are the classes' biases; the logits of an example of rows r_1..r_F are
// bias + sum_i r_i, its loss the cross-entropy of their softmax.
// pti_softmax_rows_grad is pti_fm_grad for it (gbias: C floats; scratch:
// C floats), pti_softmax_rows_metrics pti_fm_metrics (its AUC NaN;
// scratch: C floats).
void pti_softmax_rows_grad(uint32_t c, const float *rows, uint32_t n_rows,
    const uint32_t *slot, uint32_t b, uint32_t fields, const float *bias,
    const uint8_t *y, float *grows, float *gbias, double *loss,
    float *scratch);
void pti_softmax_rows_metrics(uint32_t c, const float *rows,
    const uint32_t *slot, uint32_t n, uint32_t fields, const float *bias,
    const uint8_t *y, float *scratch, double *loss, double *acc);

// The wide & deep model (--model wide-deep:K,H1,...): row u holds O + K
// floats, the id's wide weight for each of the O outputs (1 for a click
// set, C for C > 2 classes) and its K-float embedding. The dense vector
// holds the bias (PT_FM_DENSE floats, the first O used), then each
// layer's weights (in x out, row-major) and biases of an MLP from the
// F embeddings side by side (F K inputs) through ReLU hidden layers of
// h[0..n_hidden) units to O outputs. The logits are the bias plus the
// wide weights plus the MLP's output; the loss the log loss (O = 1) or
// the softmax cross-entropy.
typedef struct pti_wd {
	uint32_t f, k, o;
	uint32_t n_hidden, h[PT_WD_MAX_HIDDEN];
} pti_wd;

// pti_wd_dense: floats of its dense vector; pti_wd_scratch: floats of
// scratch a pass over b examples needs.
uint64_t pti_wd_dense(const pti_wd *s);
uint64_t pti_wd_scratch(const pti_wd *s, uint32_t b);

// pti_wd_grad is pti_fm_grad for it: the mean loss of b examples and its
// gradient for every row (grows) and the dense vector (gdense).
void pti_wd_grad(const pti_wd *s, const float *rows, uint32_t n_rows,
    const uint32_t *slot, uint32_t b, const float *dense, const uint8_t *y,
    float *grows, float *gdense, double *loss, float *scratch);

// pti_wd_metrics evaluates n examples, chunk at a time (scratch for
// chunk): mean loss, accuracy (at 0.5, or of the top class) and AUC (NaN
// for O > 1), in the caller's logits (n x O) and scored (n).
void pti_wd_metrics(const pti_wd *s, const float *rows, const uint32_t *slot,
    uint32_t n, const float *dense, const uint8_t *y, float *scratch,
    uint32_t chunk, float *logits, pti_scored *scored, double *loss,
    double *acc, double *auc);

// pti_softplus is log(1 + exp(z)) without overflow: the log loss of label
// 0 at logit z (of label 1: pti_softplus(z) - z).
double pti_softplus(double z);

#endif // PT_MODEL_SPARSE_H
