// model/net.c - pstrain.h's pt_net: the loss and gradient of a job's
// pstrain model (pt_job_model) for a program of its own, over the model
// code pstrain's workers run (model.h). Not for jobs whose variables were
// declared one by one: those models are the program's.
#include <stdlib.h>

#include "common/err.h"
#include "common/job.h"
#include "model/model.h"
#include "pstrain.h"

struct pt_net {
	pti_model *m;
	uint64_t size; // parameters
};

int pt_net_alloc(pt_net **out, const pt_job *job, uint32_t max_batch)
{
	if (job == NULL || job->l.kind == PT_MODEL_VARS)
		return pti_err_set(PT_EINVAL, "net: the job has no pstrain "
		    "model (declare one with pt_job_model)");
	if (max_batch == 0)
		return pti_err_set(PT_EINVAL, "net: max_batch is 0");
	pt_net *n = calloc(1, sizeof(*n));
	if (n == NULL)
		return pti_err_set(PT_ENOMEM, "net");
	int rv = pti_model_alloc(&n->m, &job->l, max_batch);
	if (rv != 0) {
		free(n);
		return rv;
	}
	n->size = job->l.n_params;
	*out = n;
	return 0;
}

void pt_net_free(pt_net *n)
{
	if (n == NULL)
		return;
	pti_model_free(n->m);
	free(n);
}

uint64_t pt_net_size(const pt_net *n)
{
	return n->size;
}

int pt_net_grad(pt_net *n, float *grad, double *loss, const float *params,
    const float *x, const uint8_t *y, uint32_t b)
{
	return pti_model_grad(n->m, grad, loss, params, x, y, b);
}

int pt_net_eval(pt_net *n, double *loss_sum, uint32_t *correct,
    const float *params, const float *x, const uint8_t *y, uint32_t b)
{
	return pti_model_eval(n->m, loss_sum, correct, params, x, y, b);
}
