// common/optim.h - the optimizers a server runs beside its shard. Their state
// (velocity, squared-gradient sums, Adam moments) lives with the shard,
// one float per parameter per state vector. Pure functions on caller
// memory; no allocation, safe from any thread on disjoint ranges.
#ifndef PT_COMMON_OPTIM_H
#define PT_COMMON_OPTIM_H

#include <stdint.h>

#include "common/optspec.h"

// pti_lr_rule: the one learning-rate rule of a job, the servers' and
// all-reduce's alike (built by pti_job_lr_rule, common/job.h).
typedef struct pti_lr_rule {
	double base;   // the rate after warm-up
	double warmup; // steps of the linear ramp up to base; 0: none
	double per;    // > 0: a gradient's rate is divided by it (async and
		       // ssp with --matched-lr: the workers)
	int by_stale;  // divide by the staleness when above 1 (--staleness-lr)
} pti_lr_rule;

// pti_lr is the learning rate of a gradient of global step `step`
// (0-based) and staleness `stale`, a pure function: base, ramped
// linearly from base / warmup at step 0 to base over the first `warmup`
// steps, divided by `per` and by the staleness as the rule says.
double pti_lr(const pti_lr_rule *r, int64_t step, int64_t stale);


// pti_optim_apply updates n parameters p from the gradient sum g divided
// by gdiv (the number of gradients summed; 1 for one), with learning rate
// lr. s1 and s2 are the optimizer's state for the same elements (each n
// floats, zero at the start; unused ones may be NULL). t is the 1-based
// count of updates this state has seen, for Adam's bias correction. The
// arrays must not overlap.
void pti_optim_apply(const pti_optim *o, float *restrict p,
    float *restrict s1, float *restrict s2, const float *restrict g,
    uint64_t n, double gdiv, double lr, uint64_t t);

#endif // PT_COMMON_OPTIM_H
