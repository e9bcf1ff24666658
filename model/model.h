// model/model.h - forward and backward passes of the models that
// common/layout.h describes: "softmax" (logits = x w0 + b0),
// "mlp:H1,..." (ReLU hidden layers, then a linear output layer) and
// "cnn:C1,..." (conv layers with ReLU and max-pools, then a dense layer),
// with the softmax cross-entropy loss; one API over the kinds of
// model/kind.h (model/mlp.c, model/cnn.c). Parameters and gradients are
// one flat vector of layout n_params floats in the layout's order: w_l
// is row-major at vars[2l].off, b_l follows it at vars[2l+1].off; for
// the MLP w_l is (width[l], width[l+1]) and b_l (width[l+1]); for the
// CNN the shapes are in common/layout.h.
//
// A pti_model holds only shapes and scratch sized once for max_batch rows;
// the parameters stay with the caller. One model serves one thread at a
// time; distinct models are independent.
#ifndef PT_MODEL_MODEL_H
#define PT_MODEL_MODEL_H

#include <stdint.h>

#include "common/layout.h"
#include "model/kind.h"

typedef struct pti_model pti_model;

// pti_model_alloc makes a model for layout l (copied; l need not outlive
// it) that takes batches of up to max_batch rows. Returns 0 and the model
// in *out, which the caller frees with pti_model_free; PT_EINVAL when
// max_batch is 0, l has no layers or its variables are not w_0, b_0,
// w_1, ... end to end; PT_ENOMEM.
int pti_model_alloc(pti_model **out, const pti_layout *l, uint32_t max_batch);

// pti_model_free releases m; NULL is fine.
void pti_model_free(pti_model *m);

// pti_model_grad runs forward and backward on b examples, 1 <= b <=
// max_batch: the mean cross-entropy over the b examples goes to *loss
// and its gradient with respect to params to grad, which is fully
// overwritten. params and grad are (n_params), x is (b, width[0]), y is
// (b) labels below the class count. Returns 0, or PT_EINVAL (nothing
// written) for a bad b or label. Does not allocate. A non-finite loss is
// reported as such, not as an error: the caller decides. It is
// pti_model_grad_hooked without hooks.
int pti_model_grad(pti_model *m, float *grad, double *loss,
    const float *params, const float *x, const uint8_t *y, uint32_t b);

// pti_model_grad_hooked is pti_model_grad (the same bits of grad and *loss
// when hk->blocks <= 1; for more, see pti_model_blocks_exact) doing its
// work in this order, calling hk's hooks (model/kind.h, pti_model_hooks;
// hk NULL: no hooks, one block):
//   1. forward, layer 0 to n_layers-1, ready(l) before each;
//   2. the softmax cross-entropy (the loss is then known);
//   3. the chain of dL/dz for every layer, last to first, which reads
//      w_{n_layers-1} .. w_1 (the CNN: dL/d of each conv layer's pooled
//      output, through its unpooling and col2im); params is not read
//      after this step;
//   4. the weight and bias gradients, layer 0 first in hk->blocks row
//      blocks (done after each, b_0 with the last), then layers 1, 2, ...
//      (done once each, after its [w_l, b_l] is written).
// The caller may therefore overwrite params (with the next step's
// values) from the first done call on, but not before. grad and params
// must not overlap. Returns 0, PT_EINVAL (nothing written, no hook
// called) for a bad b or label, or ready's nonzero code. Does not
// allocate.
int pti_model_grad_hooked(pti_model *m, float *grad, double *loss,
    const float *params, const float *x, const uint8_t *y, uint32_t b,
    const pti_model_hooks *hk);

// pti_model_blocks_exact returns 1 when computing layer 0's weight
// gradient in `blocks` row blocks (as pti_model_grad_hooked cuts it) gives
// the same bits as one product on this machine's BLAS kernel for this
// model's shapes at batch b, 0 when not, or a negative PT_E* code:
// -PT_EINVAL for b = 0 or above max_batch, -PT_ENOMEM. It computes both
// on reproducible random data of those shapes, the same calls with the
// same boundaries and strides, in a temporary of b * (width[0] +
// width[1]) + 2 * width[0] * width[1] floats: call it once at start-up,
// not per step. 1 without computing when there would be one block, and
// for a CNN (whose layers are not cut). The
// answer holds for OpenBLAS's kernel and its thread count at the time
// (pti_blas_threads; on Haswell's kernel 2 threads differ where 1 does
// not): check again after changing the count. Does not touch m's
// scratch, so it may run while m computes elsewhere.
int pti_model_blocks_exact(pti_model *m, uint32_t b, uint32_t blocks);

// pti_model_eval runs forward only on b examples, 0 <= b <= max_batch,
// and writes the summed (not mean) cross-entropy to *loss_sum and the
// number of examples whose largest logit (first one on ties) is the label
// to *correct, so callers can add up chunks. Shapes and errors as for
// pti_model_grad. Does not allocate.
int pti_model_eval(pti_model *m, double *loss_sum, uint32_t *correct,
    const float *params, const float *x, const uint8_t *y, uint32_t b);

#endif // PT_MODEL_MODEL_H
