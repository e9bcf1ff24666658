// common/optspec.c - reading --optimizer (optspec.h).
#include "common/optspec.h"

#include <stdio.h>
#include <string.h>

#include "common/err.h"

double pti_optim_default_lr(const pti_optim *o)
{
	return o->kind == PT_OPT_ADAM ? 0.001
	       : o->kind == PT_OPT_ADAGRAD ? 0.01
					   : 0.1;
}

int pti_optim_parse(pti_optim *o, const char *spec)
{
	double a = 0, b = 0, c = 0;
	char tail;
	memset(o, 0, sizeof(*o));
	o->b1 = 0.9, o->b2 = 0.999, o->eps = 1e-8;
	if (strcmp(spec, "sgd") == 0) {
		o->kind = PT_OPT_SGD;
	} else if (sscanf(spec, "momentum:%lf%c", &a, &tail) == 1 && a >= 0 &&
		   a < 1) {
		o->kind = PT_OPT_MOMENTUM, o->momentum = a, o->n_state = 1;
	} else if (sscanf(spec, "nesterov:%lf%c", &a, &tail) == 1 && a >= 0 &&
		   a < 1) {
		o->kind = PT_OPT_NESTEROV, o->momentum = a, o->n_state = 1;
	} else if (strcmp(spec, "adagrad") == 0) {
		o->kind = PT_OPT_ADAGRAD, o->eps = 1e-10, o->n_state = 1;
	} else if (strcmp(spec, "adam") == 0) {
		o->kind = PT_OPT_ADAM, o->n_state = 2;
	} else if (sscanf(spec, "adam:%lf,%lf,%lf%c", &a, &b, &c, &tail) == 3 &&
		   a >= 0 && a < 1 && b >= 0 && b < 1 && c > 0) {
		o->kind = PT_OPT_ADAM, o->n_state = 2;
		o->b1 = a, o->b2 = b, o->eps = c;
	} else if (strcmp(spec, "ftrl") == 0) {
		o->kind = PT_OPT_FTRL, o->n_state = 2, o->beta = 1;
	} else if (sscanf(spec, "ftrl:%lf,%lf,%lf%c", &a, &b, &c, &tail) == 3 &&
		   a >= 0 && b >= 0 && c >= 0) {
		o->kind = PT_OPT_FTRL, o->n_state = 2;
		o->beta = a, o->l1 = b, o->l2 = c;
	} else {
		return pti_err_set(PT_EINVAL,
		    "--optimizer %s: expected sgd, momentum:M, nesterov:M, "
		    "adagrad, adam[:B1,B2,EPS] (M, B1, B2 in [0, 1)) or "
		    "ftrl[:BETA,L1,L2] (each >= 0)",
		    spec);
	}
	return 0;
}
