// model/model.c - forward, softmax cross-entropy and backward of the
// layer stack, on the matrix products of common/blas.h.
//
// Scratch per model: the output of each layer (act[1..n_layers], the last
// one being the logits, which backward turns into dL/dlogits in place)
// and one buffer of dL/dz per hidden layer (dz[0..n_layers-2]): backward
// first runs the whole chain of dz, which reads the weights, and only then
// the weight gradients, which read no parameter. The input x is read
// where the caller keeps it. A CNN layout is handed to model/cnn.c
// after the same argument checks.
#include "model/model.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/blas.h"
#include "common/err.h"
#include "common/rng.h"
#include "model/model_impl.h"

// Layer 0's weight gradient is cut at multiples of this many rows. The
// rows of dW_0 are the dimension OpenBLAS's micro-kernels tile, and a row
// computed at a block's ragged end goes through an edge kernel that sums
// in another order: Haswell's and Zen's sgemm tile it by 12 (16-row
// boundaries still differ there, e.g. 784 rows in 3 blocks), and 48 is
// also a multiple of 16 floats (a 64-byte line). Cooperlake gives the same
// bits at any boundary; pt_model_blocks_exact checks the kernel at hand.
#define BLOCK_ROWS 48

struct pt_model {
	uint32_t n_layers;
	uint32_t width[PT_MAX_LAYERS + 1];
	uint64_t w_off[PT_MAX_LAYERS]; // w_l in the flat vector
	uint64_t b_off[PT_MAX_LAYERS]; // b_l in the flat vector
	uint32_t max_batch;
	float *act[PT_MAX_LAYERS + 1]; // [l] (max_batch, width[l]), l >= 1
	float *dz[PT_MAX_LAYERS];      // [l] (max_batch, width[l + 1]), hidden
	float *mem;                    // the one allocation behind them
	pti_cnn *cnn;                  // a CNN: all of it, the above unused
};

// model_alloc_cnn makes the shell of a CNN model: the shapes that the
// argument checks read, and the CNN itself.
static int model_alloc_cnn(pt_model **out, const pt_layout *l,
    uint32_t max_batch)
{
	pt_model *m = calloc(1, sizeof(*m));
	if (m == NULL)
		return pti_err_set(PT_ENOMEM, "model %s", l->spec);
	m->n_layers = l->n_layers;
	m->max_batch = max_batch;
	memcpy(m->width, l->width, sizeof(m->width));
	int rv = pti_cnn_alloc(&m->cnn, l, max_batch);
	if (rv != 0) {
		free(m);
		return rv;
	}
	*out = m;
	return 0;
}

int pt_model_alloc(pt_model **out, const pt_layout *l, uint32_t max_batch)
{
	if (max_batch == 0 || l->n_layers == 0 || l->n_layers > PT_MAX_LAYERS)
		return pti_err_set(PT_EINVAL,
		    "model %s: batch of %u rows, %u layers", l->spec,
		    max_batch, l->n_layers);
	if (l->kind == PT_MODEL_CNN)
		return model_alloc_cnn(out, l, max_batch);
	// The hooks hand over [w_l, b_l] ranges that must tile the vector.
	uint64_t at = 0;
	for (uint32_t i = 0; i < l->n_layers; i++) {
		uint64_t nw = (uint64_t)l->width[i] * l->width[i + 1];
		if (l->vars[2 * i].off != at || l->vars[2 * i].n != nw ||
		    l->vars[2 * i + 1].off != at + nw ||
		    l->vars[2 * i + 1].n != l->width[i + 1])
			return pti_err_set(PT_EINVAL,
			    "model %s: layer %u not laid out as w, b", l->spec,
			    i);
		at += nw + l->width[i + 1];
	}
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
		if (i < l->n_layers)
			hidden += l->width[i];
	}
	for (uint32_t i = 0; i < l->n_layers; i++) {
		m->w_off[i] = l->vars[2 * i].off;
		m->b_off[i] = l->vars[2 * i + 1].off;
	}
	// Widths are at most 2^16 and there are at most 9, so this product
	// stays far inside 64 bits; malloc refuses what does not fit.
	uint64_t n = (uint64_t)max_batch * (rows + hidden);
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
	for (uint32_t i = 0; i + 1 < m->n_layers; i++) {
		m->dz[i] = p;
		p += (size_t)max_batch * m->width[i + 1];
	}
	// The output layer's dz is the logits' buffer, turned in place.
	m->dz[m->n_layers - 1] = m->act[m->n_layers];
	*out = m;
	return 0;
}

void pt_model_free(pt_model *m)
{
	if (m == NULL)
		return;
	pti_cnn_free(m->cnn);
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

// ---------------------------------------------------------------------
// Forward and loss
// ---------------------------------------------------------------------

// model_forward leaves each layer's output in act[1..n_layers]:
// act[l + 1] = relu(act[l] w_l + b_l), without the ReLU on the last.
// ready, when set, is asked before layer l's parameters are read; its
// nonzero answer is returned at once.
static int model_forward(pt_model *m, const float *params, const float *x,
    uint32_t b, int (*ready)(void *arg, uint32_t l), void *arg)
{
	int rv;
	for (uint32_t l = 0; l < m->n_layers; l++) {
		if (ready != NULL && (rv = ready(arg, l)) != 0)
			return rv;
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
	return 0;
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

// pti_model_xent: subtracting the row's max keeps expf from overflowing;
// the sum and the loss are kept in double.
double pti_model_xent(float *logits, const uint8_t *y, uint32_t b,
    uint32_t classes)
{
	double total = 0;
	for (uint32_t i = 0; i < b; i++) {
		float *z = logits + (size_t)i * classes; // (classes)
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
	return total / b;
}

// ---------------------------------------------------------------------
// Backward
// ---------------------------------------------------------------------

// model_chain writes dz[l - 1] = (dz[l] w_l^T) masked where layer l's
// input (a ReLU output) was 0, l >= 1. The only backward step that reads
// the parameters.
static void model_chain(pt_model *m, const float *params, uint32_t l,
    uint32_t b)
{
	uint32_t n_in = m->width[l], n_out = m->width[l + 1];
	const float *in = m->act[l];           // (b, n_in)
	const float *w = params + m->w_off[l]; // (n_in, n_out)
	float *da = m->dz[l - 1];              // (b, n_in)
	pti_blas_sgemm(0, 1, b, n_in, n_out, 1.0f, m->dz[l], n_out, w, n_out,
	    0.0f, da, n_in);
	for (size_t i = 0; i < (size_t)b * n_in; i++)
		da[i] = in[i] > 0.0f ? da[i] : 0.0f;
}

// wgrad_rows writes rows [r0, r1) of dw = in^T dz: one product of in's
// columns r0.. (row stride still n_in) and dz. dw is (n_in, n_out), in
// (b, n_in), dz (b, n_out). pt_model_blocks_exact runs this very code.
static void wgrad_rows(float *dw, const float *in, const float *dz,
    uint32_t n_in, uint32_t n_out, uint32_t r0, uint32_t r1, uint32_t b)
{
	pti_blas_sgemm(1, 0, r1 - r0, n_out, b, 1.0f, in + r0, n_in, dz, n_out,
	    0.0f, dw + (size_t)r0 * n_out, n_out);
}

// model_wgrad writes rows [r0, r1) of dw_l = a_l^T dz_l, where a_0 is x.
static void model_wgrad(pt_model *m, float *grad, const float *x,
    uint32_t l, uint32_t r0, uint32_t r1, uint32_t b)
{
	wgrad_rows(grad + m->w_off[l], l == 0 ? x : m->act[l], m->dz[l],
	    m->width[l], m->width[l + 1], r0, r1, b);
}

// model_bgrad writes db_l, the column sums of dz_l in row order.
static void model_bgrad(pt_model *m, float *grad, uint32_t l, uint32_t b)
{
	uint32_t n_out = m->width[l + 1];
	const float *dz = m->dz[l];     // (b, n_out)
	float *gb = grad + m->b_off[l]; // (n_out)
	memcpy(gb, dz, n_out * sizeof(float));
	for (uint32_t i = 1; i < b; i++) {
		const float *row = dz + (size_t)i * n_out;
		for (uint32_t j = 0; j < n_out; j++)
			gb[j] += row[j];
	}
}

// block_count is how many row blocks of `rows` rows `blocks` asks for:
// at least 1, at most one per BLOCK_ROWS rows, so that none is empty.
static uint32_t block_count(uint32_t rows, uint32_t blocks)
{
	uint32_t units = (rows + BLOCK_ROWS - 1) / BLOCK_ROWS;
	return blocks < 1 ? 1 : blocks > units ? units : blocks;
}

// block_row is the first row of block i of n (i = n: rows), a multiple
// of BLOCK_ROWS. The blocks share the BLOCK_ROWS-row units in shares of
// n, n-1, ..., 1: the last block's round trip is what the next forward
// waits for (--layer-push), so it is the smallest (mlp:256,128's first
// layer: 288, 240, 192 and 64 rows). None is empty (n <= units).
static uint32_t block_row(uint32_t rows, uint32_t n, uint32_t i)
{
	uint64_t units = (rows + BLOCK_ROWS - 1) / BLOCK_ROWS;
	uint64_t done = (uint64_t)i * n - (uint64_t)i * (i - (i > 0)) / 2;
	uint64_t u = units * done / ((uint64_t)n * (n + 1) / 2);
	if (u < i)
		u = i;
	if (u > units - (n - i))
		u = units - (n - i);
	uint64_t r = u * BLOCK_ROWS;
	return r < rows ? (uint32_t)r : rows;
}

// ---------------------------------------------------------------------
// Gradients
// ---------------------------------------------------------------------

int pt_model_grad(pt_model *m, float *grad, double *loss,
    const float *params, const float *x, const uint8_t *y, uint32_t b)
{
	return pt_model_grad_hooked(m, grad, loss, params, x, y, b, NULL);
}

int pt_model_grad_hooked(pt_model *m, float *grad, double *loss,
    const float *params, const float *x, const uint8_t *y, uint32_t b,
    const pt_model_hooks *hk)
{
	int rv;
	if (b == 0)
		return pti_err_set(PT_EINVAL, "model: empty batch");
	if ((rv = model_check(m, y, b)) != 0)
		return rv;
	if (m->cnn != NULL)
		return pti_cnn_grad(m->cnn, grad, loss, params, x, y, b, hk);
	void (*done)(void *, uint64_t, uint64_t, double) =
	    hk != NULL ? hk->done : NULL;
	if ((rv = model_forward(m, params, x, b, hk ? hk->ready : NULL,
		 hk ? hk->arg : NULL)) != 0)
		return rv;
	uint32_t L = m->n_layers;
	double mean = pti_model_xent(m->act[L], y, b, m->width[L]);

	// The whole chain first: from here on params is not read, so the
	// caller may overwrite it while the gradients below are handed over.
	for (uint32_t l = L - 1; l > 0; l--)
		model_chain(m, params, l, b);

	// Layer 0 first, in row blocks, b_0 (right after w_0) with the last.
	uint32_t rows = m->width[0], n_out = m->width[1];
	uint32_t nb = block_count(rows, hk != NULL ? hk->blocks : 1);
	for (uint32_t i = 0; i < nb; i++) {
		uint32_t r0 = block_row(rows, nb, i);
		uint32_t r1 = block_row(rows, nb, i + 1);
		model_wgrad(m, grad, x, 0, r0, r1, b);
		uint64_t n = (uint64_t)(r1 - r0) * n_out;
		if (i + 1 == nb) {
			model_bgrad(m, grad, 0, b);
			n += n_out;
		}
		if (done != NULL)
			done(hk->arg, m->w_off[0] + (uint64_t)r0 * n_out, n,
			    mean);
	}
	for (uint32_t l = 1; l < L; l++) {
		model_wgrad(m, grad, x, l, 0, m->width[l], b);
		model_bgrad(m, grad, l, b);
		if (done != NULL)
			done(hk->arg, m->w_off[l],
			    (uint64_t)m->width[l] * m->width[l + 1] +
				m->width[l + 1],
			    mean);
	}
	*loss = mean;
	return 0;
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
	if (m->cnn != NULL) {
		pti_cnn_grad_layers(m->cnn, grad, loss, params, x, y, b, done,
		    arg);
		return 0;
	}
	model_forward(m, params, x, b, NULL, NULL);
	uint32_t L = m->n_layers;
	double mean = pti_model_xent(m->act[L], y, b, m->width[L]);
	// Last layer first, each one's chain step after its gradient: the
	// same products as pt_model_grad_hooked's, in another order.
	for (uint32_t l = m->n_layers; l-- > 0;) {
		model_wgrad(m, grad, x, l, 0, m->width[l], b);
		model_bgrad(m, grad, l, b);
		if (done != NULL)
			done(arg, l, mean);
		if (l > 0)
			model_chain(m, params, l, b);
	}
	*loss = mean;
	return 0;
}

// ---------------------------------------------------------------------
// Block check
// ---------------------------------------------------------------------

// fill_normal writes n reproducible normal values: dense, no zeros that
// could hide a different order of the sums.
static void fill_normal(float *v, size_t n, pti_rng *r)
{
	for (size_t i = 0; i < n; i++)
		v[i] = (float)pti_rng_normal(r);
}

int pt_model_blocks_exact(pt_model *m, uint32_t b, uint32_t blocks)
{
	if (b == 0 || b > m->max_batch)
		return -pti_err_set(PT_EINVAL,
		    "model: block check at %u rows, scratch holds %u", b,
		    m->max_batch);
	if (m->cnn != NULL)
		return 1; // the CNN does not cut its layers
	uint32_t rows = m->width[0], n_out = m->width[1];
	uint32_t nb = block_count(rows, blocks);
	if (nb == 1)
		return 1; // one product: the same call as without blocks
	// The scratch cannot hold x and two (width[0], width[1]) products
	// (mlp:256,128 on 784 inputs), so a one-off temporary.
	size_t nx = (size_t)b * rows, nz = (size_t)b * n_out;
	size_t nw = (size_t)rows * n_out;
	float *mem = malloc((nx + nz + 2 * nw) * sizeof(float));
	if (mem == NULL)
		return -pti_err_set(PT_ENOMEM,
		    "model: block check, %zu floats", nx + nz + 2 * nw);
	float *x = mem;        // (b, rows)
	float *dz = x + nx;    // (b, n_out)
	float *one = dz + nz;  // (rows, n_out)
	float *cut = one + nw; // (rows, n_out)
	pti_rng r;
	pti_rng_seed(&r, 0x5b10c5, rows ^ ((uint64_t)n_out << 32));
	fill_normal(x, nx, &r);
	fill_normal(dz, nz, &r);
	// The calls pt_model_grad_hooked makes for layer 0, uncut and cut.
	wgrad_rows(one, x, dz, rows, n_out, 0, rows, b);
	for (uint32_t i = 0; i < nb; i++)
		wgrad_rows(cut, x, dz, rows, n_out, block_row(rows, nb, i),
		    block_row(rows, nb, i + 1), b);
	int same = memcmp(one, cut, nw * sizeof(float)) == 0;
	free(mem);
	return same;
}

// ---------------------------------------------------------------------
// Evaluation
// ---------------------------------------------------------------------

int pt_model_eval(pt_model *m, double *loss_sum, uint32_t *correct,
    const float *params, const float *x, const uint8_t *y, uint32_t b)
{
	int rv;
	if ((rv = model_check(m, y, b)) != 0)
		return rv;
	const float *logits = m->act[m->n_layers];
	if (b > 0 && m->cnn != NULL)
		logits = pti_cnn_logits(m->cnn, params, x, b);
	else if (b > 0)
		model_forward(m, params, x, b, NULL, NULL);
	pti_model_xent_sum(loss_sum, correct, logits, y, b,
	    m->width[m->n_layers]);
	return 0;
}

void pti_model_xent_sum(double *loss_sum, uint32_t *correct, const float *z,
    const uint8_t *y, uint32_t b, uint32_t classes)
{
	uint32_t ok = 0;
	double total = 0;
	for (uint32_t i = 0; i < b; i++) {
		const float *row = z + (size_t)i * classes;
		uint32_t at;
		float mx = row_max(row, classes, &at);
		double sum = 0;
		for (uint32_t j = 0; j < classes; j++)
			sum += expf(row[j] - mx);
		total += log(sum) - ((double)row[y[i]] - mx);
		ok += at == y[i];
	}
	*loss_sum = total;
	*correct = ok;
}
