// ps/optim.h - the optimizers a server runs beside its shard. Their state
// (velocity, squared-gradient sums, Adam moments) lives with the shard,
// one float per parameter per state vector. Pure functions on caller
// memory; no allocation, safe from any thread on disjoint ranges.
#ifndef PT_PS_OPTIM_H
#define PT_PS_OPTIM_H

#include <stdint.h>

#include "optspec.h"

// pti_lr_at is the learning-rate schedule, a pure function: `base` for a
// gradient of global step `step` (0-based), ramped linearly from base /
// warmup at step 0 to base over the first `warmup` steps (0: no ramp).
double pti_lr_at(double base, double warmup, int64_t step);

// pti_optim_apply updates n parameters p from the gradient sum g divided
// by gdiv (the number of gradients summed; 1 for one), with learning rate
// lr. s1 and s2 are the optimizer's state for the same elements (each n
// floats, zero at the start; unused ones may be NULL). t is the 1-based
// count of updates this state has seen, for Adam's bias correction. The
// arrays must not overlap.
void pti_optim_apply(const pti_optim *o, float *restrict p,
    float *restrict s1, float *restrict s2, const float *restrict g,
    uint64_t n, double gdiv, double lr, uint64_t t);

#endif // PT_PS_OPTIM_H
