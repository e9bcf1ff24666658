// model/mlp.c - the layer stack of "softmax" (logits = x w0 + b0) and
// "mlp:H1,..." (ReLU hidden layers, then a linear output layer): forward,
// backward and the row-block check, on the matrix products of
// common/blas.h. Its ops table is pti_mlp_kind (model/kind.h).
//
// Scratch per model: the output of each layer (act[1..n_layers], the last
// one being the logits, which backward turns into dL/dlogits in place)
// and one buffer of dL/dz per hidden layer (dz[0..n_layers-2]): backward
// first runs the whole chain of dz, which reads the weights, and only then
// the weight gradients, which read no parameter. The input x is read
// where the caller keeps it.
#include <stdlib.h>
#include <string.h>

#include "common/blas.h"
#include "common/err.h"
#include "common/rng.h"
#include "model/kind.h"
#include "model/xent.h"

// Layer 0's weight gradient is cut at multiples of this many rows. The
// rows of dW_0 are the dimension OpenBLAS's micro-kernels tile, and a row
// computed at a block's ragged end goes through an edge kernel that sums
// in another order: Haswell's and Zen's sgemm tile it by 12 (16-row
// boundaries still differ there, e.g. 784 rows in 3 blocks), and 48 is
// also a multiple of 16 floats (a 64-byte line). Cooperlake gives the same
// bits at any boundary; pti_model_blocks_exact checks the kernel at hand.
#define BLOCK_ROWS 48

typedef struct mlp {
	uint32_t n_layers;
	uint32_t width[PT_MAX_LAYERS + 1];
	uint64_t w_off[PT_MAX_LAYERS]; // w_l in the flat vector
	uint64_t b_off[PT_MAX_LAYERS]; // b_l in the flat vector
	float *act[PT_MAX_LAYERS + 1]; // [l] (max_batch, width[l]), l >= 1
	float *dz[PT_MAX_LAYERS];      // [l] (max_batch, width[l + 1]), hidden
	float *mem;                    // the one allocation behind them
} mlp;

static int mlp_alloc(void **out, const pti_layout *l, uint32_t max_batch)
{
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
	mlp *m = calloc(1, sizeof(*m));
	if (m == NULL)
		return pti_err_set(PT_ENOMEM, "model %s", l->spec);
	m->n_layers = l->n_layers;
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

static void mlp_free(void *p)
{
	mlp *m = p;
	if (m == NULL)
		return;
	free(m->mem);
	free(m);
}

// ---------------------------------------------------------------------
// Forward
// ---------------------------------------------------------------------

// mlp_forward leaves each layer's output in act[1..n_layers]:
// act[l + 1] = relu(act[l] w_l + b_l), without the ReLU on the last.
// ready, when set, is asked before layer l's parameters are read; its
// nonzero answer is returned at once.
static int mlp_forward(mlp *m, const float *params, const float *x,
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

static const float *mlp_logits(void *p, const float *params, const float *x,
    uint32_t b)
{
	mlp *m = p;
	mlp_forward(m, params, x, b, NULL, NULL);
	return m->act[m->n_layers];
}

// ---------------------------------------------------------------------
// Backward
// ---------------------------------------------------------------------

// mlp_chain writes dz[l - 1] = (dz[l] w_l^T) masked where layer l's
// input (a ReLU output) was 0, l >= 1. The only backward step that reads
// the parameters.
static void mlp_chain(mlp *m, const float *params, uint32_t l, uint32_t b)
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
// (b, n_in), dz (b, n_out). mlp_blocks_exact runs this very code.
static void wgrad_rows(float *dw, const float *in, const float *dz,
    uint32_t n_in, uint32_t n_out, uint32_t r0, uint32_t r1, uint32_t b)
{
	pti_blas_sgemm(1, 0, r1 - r0, n_out, b, 1.0f, in + r0, n_in, dz, n_out,
	    0.0f, dw + (size_t)r0 * n_out, n_out);
}

// mlp_wgrad writes rows [r0, r1) of dw_l = a_l^T dz_l, where a_0 is x.
static void mlp_wgrad(mlp *m, float *grad, const float *x, uint32_t l,
    uint32_t r0, uint32_t r1, uint32_t b)
{
	wgrad_rows(grad + m->w_off[l], l == 0 ? x : m->act[l], m->dz[l],
	    m->width[l], m->width[l + 1], r0, r1, b);
}

// mlp_bgrad writes db_l, the column sums of dz_l in row order.
static void mlp_bgrad(mlp *m, float *grad, uint32_t l, uint32_t b)
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

static int mlp_grad(void *p, float *grad, double *loss, const float *params,
    const float *x, const uint8_t *y, uint32_t b, const pti_model_hooks *hk)
{
	mlp *m = p;
	int rv;
	void (*done)(void *, uint64_t, uint64_t, double) =
	    hk != NULL ? hk->done : NULL;
	if ((rv = mlp_forward(m, params, x, b, hk ? hk->ready : NULL,
		 hk ? hk->arg : NULL)) != 0)
		return rv;
	uint32_t L = m->n_layers;
	double mean = pti_xent_mean(m->act[L], y, b, m->width[L]);

	// The whole chain first: from here on params is not read, so the
	// caller may overwrite it while the gradients below are handed over.
	for (uint32_t l = L - 1; l > 0; l--)
		mlp_chain(m, params, l, b);

	// Layer 0 first, in row blocks, b_0 (right after w_0) with the last.
	uint32_t rows = m->width[0], n_out = m->width[1];
	uint32_t nb = block_count(rows, hk != NULL ? hk->blocks : 1);
	for (uint32_t i = 0; i < nb; i++) {
		uint32_t r0 = block_row(rows, nb, i);
		uint32_t r1 = block_row(rows, nb, i + 1);
		mlp_wgrad(m, grad, x, 0, r0, r1, b);
		uint64_t n = (uint64_t)(r1 - r0) * n_out;
		if (i + 1 == nb) {
			mlp_bgrad(m, grad, 0, b);
			n += n_out;
		}
		if (done != NULL)
			done(hk->arg, m->w_off[0] + (uint64_t)r0 * n_out, n,
			    mean);
	}
	for (uint32_t l = 1; l < L; l++) {
		mlp_wgrad(m, grad, x, l, 0, m->width[l], b);
		mlp_bgrad(m, grad, l, b);
		if (done != NULL)
			done(hk->arg, m->w_off[l],
			    (uint64_t)m->width[l] * m->width[l + 1] +
				m->width[l + 1],
			    mean);
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

static int mlp_blocks_exact(void *p, uint32_t b, uint32_t blocks)
{
	mlp *m = p;
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
	// The calls mlp_grad makes for layer 0, uncut and cut.
	wgrad_rows(one, x, dz, rows, n_out, 0, rows, b);
	for (uint32_t i = 0; i < nb; i++)
		wgrad_rows(cut, x, dz, rows, n_out, block_row(rows, nb, i),
		    block_row(rows, nb, i + 1), b);
	int same = memcmp(one, cut, nw * sizeof(float)) == 0;
	free(mem);
	return same;
}

const pti_model_kind pti_mlp_kind = {
	.alloc = mlp_alloc,
	.free = mlp_free,
	.grad = mlp_grad,
	.logits = mlp_logits,
	.blocks_exact = mlp_blocks_exact,
};
