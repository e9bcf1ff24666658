// worker/model.c - forward, softmax cross-entropy and backward of the
// layer stack, on the matrix products of common/blas.h.
//
// Scratch per model: the output of each layer (act[1..n_layers], the last
// one being the logits, which backward turns into dL/dlogits in place)
// and two ping-pong buffers for dL/dz of the hidden layers. The input x
// is read where the caller keeps it.
#include "model.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "blas.h"
#include "err.h"

struct pt_model {
	uint32_t n_layers;
	uint32_t width[PT_MAX_LAYERS + 1];
	uint64_t w_off[PT_MAX_LAYERS]; // w_l in the flat vector
	uint64_t b_off[PT_MAX_LAYERS]; // b_l in the flat vector
	uint32_t max_batch;
	float *act[PT_MAX_LAYERS + 1]; // [l] (max_batch, width[l]), l >= 1
	float *delta[2];               // (max_batch, widest hidden layer)
	float *mem;                    // the one allocation behind them
};

int pt_model_alloc(pt_model **out, const pt_layout *l, uint32_t max_batch)
{
	if (max_batch == 0 || l->n_layers == 0 || l->n_layers > PT_MAX_LAYERS)
		return pti_err_set(PT_EINVAL,
		    "model %s: batch of %u rows, %u layers", l->spec,
		    max_batch, l->n_layers);
	pt_model *m = calloc(1, sizeof(*m));
	if (m == NULL)
		return pti_err_set(PT_ENOMEM, "model %s", l->spec);
	m->n_layers = l->n_layers;
	m->max_batch = max_batch;
	uint64_t rows = 0, hidden = 0;
	for (uint32_t i = 0; i <= l->n_layers; i++) {
		m->width[i] = l->width[i];
		if (i == 0)
			continue;
		rows += l->width[i];
		if (i < l->n_layers && l->width[i] > hidden)
			hidden = l->width[i];
	}
	for (uint32_t i = 0; i < l->n_layers; i++) {
		m->w_off[i] = l->vars[2 * i].off;
		m->b_off[i] = l->vars[2 * i + 1].off;
	}
	// Widths are at most 2^16 and there are at most 9, so this product
	// stays far inside 64 bits; malloc refuses what does not fit.
	uint64_t n = (uint64_t)max_batch * (rows + 2 * hidden);
	if (n > SIZE_MAX / sizeof(float) ||
	    (m->mem = malloc((size_t)n * sizeof(float))) == NULL) {
		free(m);
		return pti_err_set(PT_ENOMEM, "model %s: scratch for %u rows",
		    l->spec, max_batch);
	}
	float *p = m->mem;
	for (uint32_t i = 1; i <= m->n_layers; i++) {
		m->act[i] = p;
		p += (size_t)max_batch * m->width[i];
	}
	m->delta[0] = p;
	m->delta[1] = p + (size_t)max_batch * hidden;
	*out = m;
	return 0;
}

void pt_model_free(pt_model *m)
{
	if (m == NULL)
		return;
	free(m->mem);
	free(m);
}

// model_check refuses what the shapes cannot take, before anything is
// written.
static int model_check(const pt_model *m, const uint8_t *y, uint32_t b)
{
	uint32_t classes = m->width[m->n_layers];
	if (b > m->max_batch)
		return pti_err_set(PT_EINVAL,
		    "model: batch of %u rows, scratch holds %u", b,
		    m->max_batch);
	for (uint32_t i = 0; i < b; i++)
		if (y[i] >= classes)
			return pti_err_set(PT_EINVAL,
			    "model: label %u of row %u, only %u classes", y[i],
			    i, classes);
	return 0;
}

// model_forward leaves each layer's output in act[1..n_layers]:
// act[l + 1] = relu(act[l] w_l + b_l), without the ReLU on the last.
static void model_forward(pt_model *m, const float *params, const float *x,
    uint32_t b)
{
	for (uint32_t l = 0; l < m->n_layers; l++) {
		uint32_t n_in = m->width[l], n_out = m->width[l + 1];
		const float *in = l == 0 ? x : m->act[l]; // (b, n_in)
		const float *w = params + m->w_off[l];    // (n_in, n_out)
		const float *bias = params + m->b_off[l]; // (n_out)
		float *z = m->act[l + 1];                 // (b, n_out)
		// Start from the bias so the product adds to it (beta = 1).
		for (uint32_t i = 0; i < b; i++)
			memcpy(z + (size_t)i * n_out, bias,
			    n_out * sizeof(float));
		pti_blas_sgemm(0, 0, b, n_out, n_in, 1.0f, in, n_in, w, n_out,
		    1.0f, z, n_out);
		if (l + 1 < m->n_layers)
			for (size_t i = 0; i < (size_t)b * n_out; i++)
				z[i] = z[i] > 0.0f ? z[i] : 0.0f;
	}
}

// row_max returns the largest of z[0..n) and writes its first index.
static float row_max(const float *z, uint32_t n, uint32_t *at)
{
	float mx = z[0];
	uint32_t j_max = 0;
	for (uint32_t j = 1; j < n; j++)
		if (z[j] > mx) {
			mx = z[j];
			j_max = j;
		}
	*at = j_max;
	return mx;
}

int pt_model_grad(pt_model *m, float *grad, double *loss,
    const float *params, const float *x, const uint8_t *y, uint32_t b)
{
	return pt_model_grad_layers(m, grad, loss, params, x, y, b, NULL,
	    NULL);
}

int pt_model_grad_layers(pt_model *m, float *grad, double *loss,
    const float *params, const float *x, const uint8_t *y, uint32_t b,
    void (*done)(void *arg, uint32_t l, double loss), void *arg)
{
	int rv;
	if (b == 0)
		return pti_err_set(PT_EINVAL, "model: empty batch");
	if ((rv = model_check(m, y, b)) != 0)
		return rv;
	model_forward(m, params, x, b);

	// Softmax cross-entropy, turning the logits into dL/dlogits of the
	// mean loss: (softmax - onehot) / b. Subtracting the row's max keeps
	// expf from overflowing; the sum and the loss are kept in double.
	uint32_t L = m->n_layers, classes = m->width[L];
	double total = 0;
	for (uint32_t i = 0; i < b; i++) {
		float *z = m->act[L] + (size_t)i * classes; // (classes)
		uint32_t at;
		float mx = row_max(z, classes, &at);
		double zy = (double)z[y[i]] - mx, sum = 0;
		for (uint32_t j = 0; j < classes; j++) {
			z[j] = expf(z[j] - mx);
			sum += z[j];
		}
		total += log(sum) - zy;
		float scale = (float)(1.0 / (sum * b));
		for (uint32_t j = 0; j < classes; j++)
			z[j] *= scale;
		z[y[i]] -= 1.0f / (float)b;
	}

	// Backward: dw_l = a_l^T dz_l, db_l = column sums of dz_l, and for
	// hidden layers dz_{l-1} = (dz_l w_l^T) masked where relu was 0.
	float *dz = m->act[L]; // (b, width[l + 1])
	int next = 0;
	for (uint32_t l = L; l-- > 0;) {
		uint32_t n_in = m->width[l], n_out = m->width[l + 1];
		const float *in = l == 0 ? x : m->act[l]; // (b, n_in)
		const float *w = params + m->w_off[l];    // (n_in, n_out)
		float *gb = grad + m->b_off[l];           // (n_out)
		pti_blas_sgemm(1, 0, n_in, n_out, b, 1.0f, in, n_in, dz, n_out,
		    0.0f, grad + m->w_off[l], n_out);
		memcpy(gb, dz, n_out * sizeof(float));
		for (uint32_t i = 1; i < b; i++) {
			const float *row = dz + (size_t)i * n_out;
			for (uint32_t j = 0; j < n_out; j++)
				gb[j] += row[j];
		}
		if (done != NULL)
			done(arg, l, total / b);
		if (l == 0)
			break;
		float *da = m->delta[next]; // (b, n_in)
		pti_blas_sgemm(0, 1, b, n_in, n_out, 1.0f, dz, n_out, w, n_out,
		    0.0f, da, n_in);
		for (size_t i = 0; i < (size_t)b * n_in; i++)
			da[i] = in[i] > 0.0f ? da[i] : 0.0f;
		dz = da;
		next ^= 1;
	}
	*loss = total / b;
	return 0;
}

int pt_model_eval(pt_model *m, double *loss_sum, uint32_t *correct,
    const float *params, const float *x, const uint8_t *y, uint32_t b)
{
	int rv;
	if ((rv = model_check(m, y, b)) != 0)
		return rv;
	if (b > 0)
		model_forward(m, params, x, b);
	uint32_t classes = m->width[m->n_layers], ok = 0;
	double total = 0;
	for (uint32_t i = 0; i < b; i++) {
		const float *z = m->act[m->n_layers] + (size_t)i * classes;
		uint32_t at;
		float mx = row_max(z, classes, &at);
		double sum = 0;
		for (uint32_t j = 0; j < classes; j++)
			sum += expf(z[j] - mx);
		total += log(sum) - ((double)z[y[i]] - mx);
		ok += at == y[i];
	}
	*loss_sum = total;
	*correct = ok;
	return 0;
}
