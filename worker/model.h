// worker/model.h - forward and backward passes of the models that
// common/layout.h describes: "softmax" (logits = x w0 + b0) and
// "mlp:H1,..." (ReLU hidden layers, then a linear output layer), with the
// softmax cross-entropy loss. Parameters and gradients are one flat
// vector of layout n_params floats in the layout's order: w_l is
// row-major (width[l], width[l+1]) at vars[2l].off, b_l is (width[l+1])
// at vars[2l+1].off.
//
// A pt_model holds only shapes and scratch sized once for max_batch rows;
// the parameters stay with the caller. One model serves one thread at a
// time; distinct models are independent.
#ifndef PT_WORKER_MODEL_H
#define PT_WORKER_MODEL_H

#include <stdint.h>

#include "layout.h"

typedef struct pt_model pt_model;

// pt_model_alloc makes a model for layout l (copied; l need not outlive
// it) that takes batches of up to max_batch rows. Returns 0 and the model
// in *out, which the caller frees with pt_model_free; PT_EINVAL when
// max_batch is 0 or l has no layers; PT_ENOMEM.
int pt_model_alloc(pt_model **out, const pt_layout *l, uint32_t max_batch);

// pt_model_free releases m; NULL is fine.
void pt_model_free(pt_model *m);

// pt_model_grad runs forward and backward on b examples, 1 <= b <=
// max_batch: the mean cross-entropy over the b examples goes to *loss
// and its gradient with respect to params to grad, which is fully
// overwritten. params and grad are (n_params), x is (b, width[0]), y is
// (b) labels below the class count. Returns 0, or PT_EINVAL (nothing
// written) for a bad b or label. Does not allocate. A non-finite loss is
// reported as such, not as an error: the caller decides.
int pt_model_grad(pt_model *m, float *grad, double *loss,
    const float *params, const float *x, const uint8_t *y, uint32_t b);

// pt_model_grad_layers is pt_model_grad that calls done(arg, l, loss) as
// soon as backward has written layer l's gradient (w_l and b_l, adjacent
// in grad), last layer first: that range may be sent while the layers
// below are computed. The gradient is the same as pt_model_grad's.
int pt_model_grad_layers(pt_model *m, float *grad, double *loss,
    const float *params, const float *x, const uint8_t *y, uint32_t b,
    void (*done)(void *arg, uint32_t l, double loss), void *arg);

// pt_model_eval runs forward only on b examples, 0 <= b <= max_batch,
// and writes the summed (not mean) cross-entropy to *loss_sum and the
// number of examples whose largest logit (first one on ties) is the label
// to *correct, so callers can add up chunks. Shapes and errors as for
// pt_model_grad. Does not allocate.
int pt_model_eval(pt_model *m, double *loss_sum, uint32_t *correct,
    const float *params, const float *x, const uint8_t *y, uint32_t b);

#endif // PT_WORKER_MODEL_H
