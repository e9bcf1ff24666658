// model/model.c - the one pti_model API of model.h over the kinds of
// model/kind.h: checks every argument, then dispatches through the
// layout's kind (model/mlp.c, model/cnn.c). Evaluation is the kind's
// logits and the summed cross-entropy (model/xent.c).
#include "model/model.h"

#include <stdlib.h>

#include "common/err.h"
#include "model/kind.h"
#include "model/xent.h"

struct pti_model {
	const pti_model_kind *kind;
	void *impl; // the kind's state
	uint32_t classes, max_batch;
};

int pti_model_alloc(pti_model **out, const pti_layout *l, uint32_t max_batch)
{
	if (l->n_tables > 0)
		return pti_err_set(PT_EINVAL, "model %s: a sparse model has no "
		    "dense net (model/sparse.h computes it)", l->spec);
	if (max_batch == 0 || l->n_layers == 0 || l->n_layers > PT_MAX_LAYERS)
		return pti_err_set(PT_EINVAL,
		    "model %s: batch of %u rows, %u layers", l->spec,
		    max_batch, l->n_layers);
	const pti_model_kind *kind =
	    l->kind == PT_MODEL_CNN ? &pti_cnn_kind : &pti_mlp_kind;
	void *impl;
	int rv = kind->alloc(&impl, l, max_batch);
	if (rv != 0)
		return rv;
	pti_model *m = calloc(1, sizeof(*m));
	if (m == NULL) {
		kind->free(impl);
		return pti_err_set(PT_ENOMEM, "model %s", l->spec);
	}
	m->kind = kind;
	m->impl = impl;
	m->classes = l->width[l->n_layers];
	m->max_batch = max_batch;
	*out = m;
	return 0;
}

void pti_model_free(pti_model *m)
{
	if (m == NULL)
		return;
	m->kind->free(m->impl);
	free(m);
}

// model_check refuses what the shapes cannot take, before anything is
// written.
static int model_check(const pti_model *m, const uint8_t *y, uint32_t b)
{
	if (b > m->max_batch)
		return pti_err_set(PT_EINVAL,
		    "model: batch of %u rows, scratch holds %u", b,
		    m->max_batch);
	for (uint32_t i = 0; i < b; i++)
		if (y[i] >= m->classes)
			return pti_err_set(PT_EINVAL,
			    "model: label %u of row %u, only %u classes", y[i],
			    i, m->classes);
	return 0;
}

int pti_model_grad(pti_model *m, float *grad, double *loss,
    const float *params, const float *x, const uint8_t *y, uint32_t b)
{
	return pti_model_grad_hooked(m, grad, loss, params, x, y, b, NULL);
}

int pti_model_grad_hooked(pti_model *m, float *grad, double *loss,
    const float *params, const float *x, const uint8_t *y, uint32_t b,
    const pti_model_hooks *hk)
{
	int rv;
	if (b == 0)
		return pti_err_set(PT_EINVAL, "model: empty batch");
	if ((rv = model_check(m, y, b)) != 0)
		return rv;
	return m->kind->grad(m->impl, grad, loss, params, x, y, b, hk);
}

int pti_model_blocks_exact(pti_model *m, uint32_t b, uint32_t blocks)
{
	if (b == 0 || b > m->max_batch)
		return -pti_err_set(PT_EINVAL,
		    "model: block check at %u rows, scratch holds %u", b,
		    m->max_batch);
	if (m->kind->blocks_exact == NULL)
		return 1; // the kind does not cut its layers
	return m->kind->blocks_exact(m->impl, b, blocks);
}

int pti_model_eval(pti_model *m, double *loss_sum, uint32_t *correct,
    const float *params, const float *x, const uint8_t *y, uint32_t b)
{
	int rv;
	if ((rv = model_check(m, y, b)) != 0)
		return rv;
	const float *logits = NULL;
	if (b > 0)
		logits = m->kind->logits(m->impl, params, x, b);
	pti_xent_sum(loss_sum, correct, logits, y, b, m->classes);
	return 0;
}
