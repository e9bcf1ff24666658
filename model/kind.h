// model/kind.h - what a kind of model provides behind model/model.h's one
// pti_model API, as nng's protocols fill an ops table for its core:
// model/model.c checks the arguments and dispatches through the table of
// the layout's kind; model/mlp.c ("softmax", "mlp:...") and model/cnn.c
// ("cnn:...") each fill one. Internal to model/.
#ifndef PT_MODEL_KIND_H
#define PT_MODEL_KIND_H

#include <stdint.h>

#include "common/layout.h"

// pti_model_hooks lets a caller overlap pti_model_grad_hooked with its
// communication: wait for each layer's parameters just before forward
// reads them, and send each piece of the gradient as soon as it is final.
// Any function pointer may be NULL (not called). The hooks run on the
// calling thread, inside the call.
typedef struct pti_model_hooks {
	// ready(arg, l): called right before forward reads layer l's
	// parameters (w_l and b_l), l = 0 .. n_layers-1 in order (for the
	// CNN the conv layers, then the dense one). Nonzero stops the
	// computation: pti_model_grad_hooked returns that code at once, grad
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
	// one piece (and pti_model_blocks_exact says 1).
	uint32_t blocks;
} pti_model_hooks;

// A kind's operations on its own state (void *), which alloc makes and
// free releases. model.c has checked every argument first: 1 <= b <=
// max_batch, labels below the classes, l's layer count.
typedef struct pti_model_kind {
	// alloc checks that l's variables are this kind's w_0, b_0, w_1, ...
	// end to end and makes its state, with scratch for max_batch rows.
	// 0, PT_EINVAL naming the layer, or PT_ENOMEM.
	int (*alloc)(void **out, const pti_layout *l, uint32_t max_batch);
	void (*free)(void *p); // NULL is fine
	// grad is pti_model_grad_hooked (hk may be NULL).
	int (*grad)(void *p, float *grad, double *loss, const float *params,
	    const float *x, const uint8_t *y, uint32_t b,
	    const pti_model_hooks *hk);
	// logits runs forward and returns the (b, classes) logits, in p's
	// scratch until its next call.
	const float *(*logits)(void *p, const float *params, const float *x,
	    uint32_t b);
	// blocks_exact is pti_model_blocks_exact; NULL for a kind that does
	// not cut its layers (always 1).
	int (*blocks_exact)(void *p, uint32_t b, uint32_t blocks);
} pti_model_kind;

extern const pti_model_kind pti_mlp_kind; // model/mlp.c
extern const pti_model_kind pti_cnn_kind; // model/cnn.c

#endif // PT_MODEL_KIND_H
