// ps/optim.c - server-side optimizers (see optim.h).
#include "optim.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "err.h"

void pti_optim_apply(const pti_optim *o, float *p, float *s1, float *s2,
    const float *g, uint64_t n, double gdiv, double lr, uint64_t t)
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
	for (uint64_t i = 0; i < n; i++) {
		float gi = g[i] * inv + wd * p[i];
		switch (o->kind) {
		case PT_OPT_SGD:
			p[i] -= flr * gi;
			break;
		case PT_OPT_MOMENTUM:
			s1[i] = mu * s1[i] + gi;
			p[i] -= flr * s1[i];
			break;
		case PT_OPT_NESTEROV:
			s1[i] = mu * s1[i] + gi;
			p[i] -= flr * (gi + mu * s1[i]);
			break;
		case PT_OPT_ADAGRAD:
			s1[i] += gi * gi;
			p[i] -= flr * gi / (sqrtf(s1[i]) + eps);
			break;
		default: // adam
			s1[i] = b1 * s1[i] + (1 - b1) * gi;
			s2[i] = b2 * s2[i] + (1 - b2) * gi * gi;
			p[i] -= flr * (s1[i] / c1) / (sqrtf(s2[i] / c2) + eps);
			break;
		}
	}
}

double pti_lr_at(double base, double warmup, int64_t step)
{
	if (warmup > 0 && (double)(step + 1) < warmup)
		return base * (double)(step + 1) / warmup;
	return base;
}
