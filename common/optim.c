// common/optim.c - server-side optimizers (see optim.h).
#include "common/optim.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "common/err.h"

// One loop per optimizer, each free of branches so that it vectorizes;
// every element is computed as the scalar formula says, in the same
// order of operations, so the result is the same either way.
void pti_optim_apply(const pti_optim *o, float *restrict p,
    float *restrict s1, float *restrict s2, const float *restrict g,
    uint64_t n, double gdiv, double lr, uint64_t t)
{
	const float wd = (float)o->weight_decay;
	if (o->kind == PT_OPT_SGD && wd == 0) {
		// The plain SGD step, kept as one multiply-add so that it
		// matches p - lr/W * sum exactly.
		const float a = (float)(lr / gdiv);
		for (uint64_t i = 0; i < n; i++)
			p[i] -= a * g[i];
		return;
	}
	const float inv = (float)(1.0 / gdiv), flr = (float)lr;
	const float mu = (float)o->momentum, eps = (float)o->eps;
	const float b1 = (float)o->b1, b2 = (float)o->b2;
	// Adam's bias corrections, in double: b^t underflows gracefully.
	const float c1 = (float)(1.0 - pow(o->b1, (double)t));
	const float c2 = (float)(1.0 - pow(o->b2, (double)t));
#define GI (g[i] * inv + wd * p[i])
	switch (o->kind) {
	case PT_OPT_SGD:
		for (uint64_t i = 0; i < n; i++)
			p[i] -= flr * GI;
		break;
	case PT_OPT_MOMENTUM:
		for (uint64_t i = 0; i < n; i++) {
			s1[i] = mu * s1[i] + GI;
			p[i] -= flr * s1[i];
		}
		break;
	case PT_OPT_NESTEROV:
		for (uint64_t i = 0; i < n; i++) {
			float gi = GI;
			s1[i] = mu * s1[i] + gi;
			p[i] -= flr * (gi + mu * s1[i]);
		}
		break;
	case PT_OPT_ADAGRAD:
		for (uint64_t i = 0; i < n; i++) {
			float gi = GI;
			s1[i] += gi * gi;
			p[i] -= flr * gi / (sqrtf(s1[i]) + eps);
		}
		break;
	case PT_OPT_ADAM:
		for (uint64_t i = 0; i < n; i++) {
			float gi = GI;
			s1[i] = b1 * s1[i] + (1 - b1) * gi;
			s2[i] = b2 * s2[i] + (1 - b2) * gi * gi;
			p[i] -= flr * (s1[i] / c1) / (sqrtf(s2[i] / c2) + eps);
		}
		break;
	default: { // ftrl: z in s1, n in s2; lr is alpha
		const float beta = (float)o->beta, l1 = (float)o->l1;
		const float l2 = (float)o->l2;
		for (uint64_t i = 0; i < n; i++) {
			float gi = GI, nn = s2[i] + gi * gi;
			float sigma = (sqrtf(nn) - sqrtf(s2[i])) / flr;
			s1[i] += gi - sigma * p[i];
			s2[i] = nn;
			float z = s1[i], shrunk = z - copysignf(l1, z);
			p[i] = fabsf(z) <= l1 ? 0.0f :
			       -shrunk / ((beta + sqrtf(nn)) / flr + l2);
		}
		break;
	}
	}
#undef GI
}

// lr_at: base, ramped linearly from base / warmup at step 0 (0-based) to
// base over the first `warmup` steps (0: no ramp).
static double lr_at(double base, double warmup, int64_t step)
{
	if (warmup > 0 && (double)(step + 1) < warmup)
		return base * (double)(step + 1) / warmup;
	return base;
}

double pti_lr(const pti_lr_rule *r, int64_t step, int64_t stale)
{
	double lr = lr_at(r->base, r->warmup, step);
	// Sync applies lr x the mean of W gradients per step; one gradient
	// at lr / W moves the parameters as far per example.
	if (r->per > 0)
		lr /= r->per;
	if (r->by_stale && stale > 1)
		lr /= (double)stale;
	return lr;
}
