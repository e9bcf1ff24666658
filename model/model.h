// model/model.h - forward and backward passes of the models that
// common/layout.h describes: "softmax" (logits = x w0 + b0),
// "mlp:H1,..." (ReLU hidden layers, then a linear output layer) and
// "cnn:C1,..." (conv layers with ReLU and max-pools, then a dense layer;
// model/cnn.c), with the softmax cross-entropy loss. Parameters and
// gradients are one flat vector of layout n_params floats in the
// layout's order: w_l is row-major at vars[2l].off, b_l follows it at
// vars[2l+1].off; for the MLP w_l is (width[l], width[l+1]) and b_l
// (width[l+1]); for the CNN the shapes are in common/layout.h.
//
// A pt_model holds only shapes and scratch sized once for max_batch rows;
// the parameters stay with the caller. One model serves one thread at a
// time; distinct models are independent.
#ifndef PT_MODEL_MODEL_H
#define PT_MODEL_MODEL_H

#include <stdint.h>

#include "common/layout.h"

typedef struct pt_model pt_model;

// pt_model_alloc makes a model for layout l (copied; l need not outlive
// it) that takes batches of up to max_batch rows. Returns 0 and the model
// in *out, which the caller frees with pt_model_free; PT_EINVAL when
// max_batch is 0, l has no layers or its variables are not w_0, b_0,
// w_1, ... end to end; PT_ENOMEM.
int pt_model_alloc(pt_model **out, const pt_layout *l, uint32_t max_batch);

// pt_model_free releases m; NULL is fine.
void pt_model_free(pt_model *m);

// pt_model_grad runs forward and backward on b examples, 1 <= b <=
// max_batch: the mean cross-entropy over the b examples goes to *loss
// and its gradient with respect to params to grad, which is fully
// overwritten. params and grad are (n_params), x is (b, width[0]), y is
// (b) labels below the class count. Returns 0, or PT_EINVAL (nothing
// written) for a bad b or label. Does not allocate. A non-finite loss is
// reported as such, not as an error: the caller decides. It is
// pt_model_grad_hooked without hooks.
int pt_model_grad(pt_model *m, float *grad, double *loss,
    const float *params, const float *x, const uint8_t *y, uint32_t b);

// pt_model_hooks lets a caller overlap pt_model_grad_hooked with its
// communication: wait for each layer's parameters just before forward
// reads them, and send each piece of the gradient as soon as it is final.
// Any function pointer may be NULL (not called). The hooks run on the
// calling thread, inside the call.
typedef struct pt_model_hooks {
	// ready(arg, l): called right before forward reads layer l's
	// parameters (w_l and b_l), l = 0 .. n_layers-1 in order (for the
	// CNN the conv layers, then the dense one). Nonzero stops the
	// computation: pt_model_grad_hooked returns that code at once, grad
	// and *loss unspecified, done never called after it.
	int (*ready)(void *arg, uint32_t l);
	// done(arg, off, n, loss): grad[off, off + n) (flat offsets in the
	// parameter vector) is final and will not be written again in this
	// call; loss is the batch's mean loss (known before backward starts).
	// The pieces handed over cover the whole gradient exactly once, in
	// ascending order: layer 0's blocks, then [w_l, b_l] of layer 1, 2,
	// ... (one piece each). By the first call params is no longer read.
	void (*done)(void *arg, uint64_t off, uint64_t n, double loss);
	void *arg;
	// blocks: layer 0's weight gradient w_0 (row-major (width[0],
	// width[1])) is computed in this many blocks of whole rows (each a
	// contiguous range of grad), each handed to done as soon as it is
	// written; b_0 goes with the last block's range (w_0 and b_0 are
	// adjacent). 0 or 1: one piece for layer 0. Boundaries fall on
	// multiples of 48 rows (BLAS kernels tile these rows; a ragged cut
	// changes the bits on some): with U = ceil(width[0] / 48) units and
	// n = min(blocks, U) blocks, the blocks take the units in shares of
	// n, n-1, ..., 1 (the last, whose round trip a pipelined step waits
	// for, the smallest): block i starts at row 48 c(i), c(i) =
	// floor(U S(i) / (n (n + 1) / 2)) with S(i) = i n - i (i - 1) / 2,
	// raised to at least i and lowered to at most U - (n - i) so that
	// none is empty; the last ends at width[0]. So a layer 0 of fewer
	// than 48 * blocks rows comes in fewer pieces.
	// The CNN ignores blocks: each layer's [w_l, b_l], layer 0's too, is
	// one piece (and pt_model_blocks_exact says 1).
	uint32_t blocks;
} pt_model_hooks;

// pt_model_grad_hooked is pt_model_grad (the same bits of grad and *loss
// when hk->blocks <= 1; for more, see pt_model_blocks_exact) doing its
// work in this order, calling hk's hooks (hk NULL: no hooks, one block):
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
int pt_model_grad_hooked(pt_model *m, float *grad, double *loss,
    const float *params, const float *x, const uint8_t *y, uint32_t b,
    const pt_model_hooks *hk);

// pt_model_blocks_exact returns 1 when computing layer 0's weight
// gradient in `blocks` row blocks (as pt_model_grad_hooked cuts it) gives
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
int pt_model_blocks_exact(pt_model *m, uint32_t b, uint32_t blocks);

// pt_model_grad_layers is pt_model_grad that calls done(arg, l, loss) as
// soon as backward has written layer l's gradient (w_l and b_l, adjacent
// in grad), last layer first: that range may be sent while the layers
// below are computed. The gradient is the same as pt_model_grad's (the
// same bits, the CNN's too).
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

#endif // PT_MODEL_MODEL_H
