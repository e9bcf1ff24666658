// model/model_impl.h - what model/model.c and model/cnn.c share behind
// the one pt_model API of model/model.h: the softmax cross-entropy of a
// batch of logits, and the CNN's passes (model.c checks the arguments and
// dispatches on the layout's kind). Internal to the worker.
#ifndef PT_MODEL_MODEL_IMPL_H
#define PT_MODEL_MODEL_IMPL_H

#include <stdint.h>

#include "common/layout.h"
#include "model/model.h"

// pti_model_xent returns the mean cross-entropy of the b rows of logits z
// (b, classes), labels y below classes, and turns z into dL/dlogits of
// that mean: (softmax - onehot) / b.
double pti_model_xent(float *z, const uint8_t *y, uint32_t b,
    uint32_t classes);

// pti_model_xent_sum writes the summed cross-entropy of the b rows of z
// (b, classes) to *loss_sum and how many rows have their largest logit
// (first on ties) at the label to *correct. z is not changed.
void pti_model_xent_sum(double *loss_sum, uint32_t *correct, const float *z,
    const uint8_t *y, uint32_t b, uint32_t classes);

typedef struct pti_cnn pti_cnn;

// pti_cnn_alloc makes the CNN of layout l (kind PT_MODEL_CNN, variables
// checked to be w_0, b_0, ... end to end) with scratch for max_batch
// images. Returns 0, PT_EINVAL or PT_ENOMEM.
int pti_cnn_alloc(pti_cnn **out, const pt_layout *l, uint32_t max_batch);

// pti_cnn_free releases c; NULL is fine.
void pti_cnn_free(pti_cnn *c);

// pti_cnn_grad is pt_model_grad_hooked for the CNN, its arguments already
// checked (1 <= b <= max_batch, labels below the classes). hk's blocks are
// ignored: one piece [w_l, b_l] per layer.
int pti_cnn_grad(pti_cnn *c, float *grad, double *loss, const float *params,
    const float *x, const uint8_t *y, uint32_t b, const pt_model_hooks *hk);

// pti_cnn_grad_layers is pt_model_grad_layers for the CNN, arguments
// checked.
void pti_cnn_grad_layers(pti_cnn *c, float *grad, double *loss,
    const float *params, const float *x, const uint8_t *y, uint32_t b,
    void (*done)(void *arg, uint32_t l, double loss), void *arg);

// pti_cnn_logits runs forward on b >= 1 checked images and returns the
// (b, classes) logits, in c's scratch until its next call.
const float *pti_cnn_logits(pti_cnn *c, const float *params, const float *x,
    uint32_t b);

#endif // PT_MODEL_MODEL_IMPL_H
