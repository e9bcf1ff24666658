// model/xent.h - the softmax cross-entropy of a batch of logits, the loss
// every model kind ends with (model/mlp.c, model/cnn.c). Pure functions,
// no allocation, safe from any thread.
#ifndef PT_MODEL_XENT_H
#define PT_MODEL_XENT_H

#include <stdint.h>

// pti_xent_mean returns the mean cross-entropy of the b rows of logits z
// (b, classes), labels y (b) below classes, and turns z into dL/dlogits
// of that mean: (softmax - onehot) / b.
double pti_xent_mean(float *z, const uint8_t *y, uint32_t b,
    uint32_t classes);

// pti_xent_sum writes the summed cross-entropy of the b rows of z
// (b, classes) to *loss_sum and how many rows have their largest logit
// (first on ties) at the label to *correct. z is not changed; it may be
// NULL when b is 0.
void pti_xent_sum(double *loss_sum, uint32_t *correct, const float *z,
    const uint8_t *y, uint32_t b, uint32_t classes);

#endif // PT_MODEL_XENT_H
