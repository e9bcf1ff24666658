// model/widedeep.c - the wide & deep model over embedding rows
// (--model wide-deep:K,H1,...; model/sparse.h): each row holds the id's
// wide weights (one per output) and its K-float embedding; the wide part
// sums an example's weights, the deep part is an MLP (ReLU hidden layers,
// OpenBLAS products) on its fields' embeddings laid side by side, and
// the logits are their sum plus the bias. Its backward pass gives the
// MLP's gradients and, through the MLP's input, each embedding's.
#include "model/sparse.h"

#include <math.h>
#include <string.h>

#include "common/blas.h"
#include "common/layout.h" // PT_FM_DENSE

// The dense vector: the bias (PT_FM_DENSE floats, the first o used),
// then each layer's weights (in x out) and biases (out).
static uint32_t layer_in(const pti_wd *s, uint32_t l)
{
	return l == 0 ? s->f * s->k : s->h[l - 1];
}

static uint32_t layer_out(const pti_wd *s, uint32_t l)
{
	return l == s->n_hidden ? s->o : s->h[l];
}

static uint64_t layer_off(const pti_wd *s, uint32_t l)
{
	uint64_t off = PT_FM_DENSE;
	for (uint32_t i = 0; i < l; i++)
		off += (uint64_t)layer_in(s, i) * layer_out(s, i) +
		       layer_out(s, i);
	return off;
}

uint64_t pti_wd_dense(const pti_wd *s)
{
	return layer_off(s, s->n_hidden + 1);
}

// widest: the most floats a layer's output or input takes a row.
static uint32_t widest(const pti_wd *s)
{
	uint32_t w = s->f * s->k > s->o ? s->f * s->k : s->o;
	for (uint32_t i = 0; i < s->n_hidden; i++)
		w = s->h[i] > w ? s->h[i] : w;
	return w;
}

uint64_t pti_wd_scratch(const pti_wd *s, uint32_t b)
{
	// X, each layer's Z and A (A_0 is X), two gradient buffers.
	uint64_t n = (uint64_t)b * s->f * s->k;
	for (uint32_t l = 0; l <= s->n_hidden; l++)
		n += 2 * (uint64_t)b * layer_out(s, l);
	return n + 2 * (uint64_t)b * widest(s) + s->o;
}

// forward runs the net on b examples: the logits to z (b x o); the
// layers' pre-activations and activations stay in scratch for backward
// (za[l]: Z_l, then A_{l+1} = relu(Z_l)).
static void forward(const pti_wd *s, const float *rows, const uint32_t *slot,
    uint32_t b, const float *dense, float *scratch, float **za, float *z)
{
	uint32_t dim = s->o + s->k, fk = s->f * s->k;
	float *x = scratch;
	for (uint32_t e = 0; e < b; e++)
		for (uint32_t f = 0; f < s->f; f++)
			memcpy(x + (uint64_t)e * fk + f * s->k,
			    rows + (uint64_t)slot[e * s->f + f] * dim + s->o,
			    s->k * sizeof(float));
	float *at = x + (uint64_t)b * fk;
	const float *a = x;
	for (uint32_t l = 0; l <= s->n_hidden; l++) {
		uint32_t in = layer_in(s, l), out = layer_out(s, l);
		const float *w = dense + layer_off(s, l), *bl = w + in * out;
		float *zl = at, *al = at + (uint64_t)b * out;
		for (uint32_t e = 0; e < b; e++)
			memcpy(zl + (uint64_t)e * out, bl, out * sizeof(float));
		pti_blas_sgemm(0, 0, b, out, in, 1, a, in, w, out, 1, zl, out);
		for (uint64_t i = 0; i < (uint64_t)b * out; i++)
			al[i] = zl[i] > 0 ? zl[i] : 0;
		za[2 * l] = zl;
		za[2 * l + 1] = al;
		a = al;
		at = al + (uint64_t)b * out;
	}
	// The logits: the bias, the wide weights, the deep output.
	const float *y = za[2 * s->n_hidden];
	for (uint32_t e = 0; e < b; e++)
		for (uint32_t o = 0; o < s->o; o++) {
			double v = dense[o] + y[(uint64_t)e * s->o + o];
			for (uint32_t f = 0; f < s->f; f++)
				v += rows[(uint64_t)slot[e * s->f + f] * dim + o];
			z[(uint64_t)e * s->o + o] = (float)v;
		}
}

// loss_grad: the loss of example e's logits z (o of them) against label
// y, and d(loss)/dz scaled by `scale` into g.
static double loss_grad(uint32_t o, const float *z, uint8_t y, double scale,
    float *g)
{
	if (o == 1) {
		double p = 1 / (1 + exp(-(double)z[0]));
		if (g != NULL)
			g[0] = (float)((p - (y ? 1 : 0)) * scale);
		return pti_softplus(z[0]) - (y ? z[0] : 0);
	}
	double top = z[0], sum = 0;
	for (uint32_t j = 1; j < o; j++)
		top = z[j] > top ? z[j] : top;
	for (uint32_t j = 0; j < o; j++)
		sum += exp(z[j] - top);
	double lse = top + log(sum);
	for (uint32_t j = 0; g != NULL && j < o; j++)
		g[j] = (float)((exp(z[j] - lse) - (j == y)) * scale);
	return lse - z[y];
}

void pti_wd_grad(const pti_wd *s, const float *rows, uint32_t n_rows,
    const uint32_t *slot, uint32_t b, const float *dense, const uint8_t *y,
    float *grows, float *gdense, double *loss, float *scratch)
{
	uint32_t dim = s->o + s->k, fk = s->f * s->k, L = s->n_hidden + 1;
	float *za[2 * PT_WD_MAX_HIDDEN + 2];
	uint64_t used = (uint64_t)b * fk;
	for (uint32_t l = 0; l < L; l++)
		used += 2 * (uint64_t)b * layer_out(s, l);
	float *dz = scratch + used, *da = dz + (uint64_t)b * widest(s);
	memset(grows, 0, (uint64_t)n_rows * dim * sizeof(float));
	memset(gdense, 0, pti_wd_dense(s) * sizeof(float));
	double total = 0;
	// The logits into da, their loss's gradient into dz (dZ of the
	// output layer).
	forward(s, rows, slot, b, dense, scratch, za, da);
	for (uint32_t e = 0; e < b; e++)
		total += loss_grad(s->o, da + (uint64_t)e * s->o, y[e], 1.0 / b,
		    dz + (uint64_t)e * s->o);
	*loss = b > 0 ? total / b : 0;
	// Bias and wide weights: the logits' gradient itself.
	for (uint32_t e = 0; e < b; e++)
		for (uint32_t o = 0; o < s->o; o++) {
			float g = dz[(uint64_t)e * s->o + o];
			gdense[o] += g;
			for (uint32_t f = 0; f < s->f; f++)
				grows[(uint64_t)slot[e * s->f + f] * dim + o] += g;
		}
	// The MLP backward, layer by layer; dz holds dZ_l.
	for (uint32_t l = L; l-- > 0;) {
		uint32_t in = layer_in(s, l), out = layer_out(s, l);
		const float *a = l == 0 ? scratch : za[2 * (l - 1) + 1];
		const float *w = dense + layer_off(s, l);
		float *gw = gdense + layer_off(s, l), *gb = gw + in * out;
		pti_blas_sgemm(1, 0, in, out, b, 1, a, in, dz, out, 0, gw, out);
		for (uint32_t e = 0; e < b; e++)
			for (uint32_t j = 0; j < out; j++)
				gb[j] += dz[(uint64_t)e * out + j];
		// dA_l = dZ_l W_l^T: the input's gradient (dX for l = 0).
		pti_blas_sgemm(0, 1, b, in, out, 1, dz, out, w, out, 0, da, in);
		if (l > 0) {
			const float *zp = za[2 * (l - 1)];
			for (uint64_t i = 0; i < (uint64_t)b * in; i++)
				dz[i] = zp[i] > 0 ? da[i] : 0;
		}
	}
	// dX to the embeddings it came from.
	for (uint32_t e = 0; e < b; e++)
		for (uint32_t f = 0; f < s->f; f++) {
			float *gr = grows + (uint64_t)slot[e * s->f + f] * dim +
				    s->o;
			const float *dx = da + (uint64_t)e * fk + f * s->k;
			for (uint32_t j = 0; j < s->k; j++)
				gr[j] += dx[j];
		}
}

void pti_wd_metrics(const pti_wd *s, const float *rows, const uint32_t *slot,
    uint32_t n, const float *dense, const uint8_t *y, float *scratch,
    uint32_t chunk, float *logits, pti_scored *scored, double *loss,
    double *acc, double *auc)
{
	float *za[2 * PT_WD_MAX_HIDDEN + 2];
	double total = 0;
	uint64_t right = 0;
	for (uint32_t at = 0; at < n; at += chunk) {
		uint32_t b = n - at < chunk ? n - at : chunk;
		float *z = logits + (uint64_t)at * s->o;
		forward(s, rows, slot + (uint64_t)at * s->f, b, dense, scratch,
		    za, z);
		for (uint32_t e = 0; e < b; e++) {
			const float *ze = z + (uint64_t)e * s->o;
			uint8_t ye = y[at + e];
			total += loss_grad(s->o, ze, ye, 0, NULL);
			uint32_t best = 0;
			for (uint32_t j = 1; j < s->o; j++)
				best = ze[j] > ze[best] ? j : best;
			right += s->o == 1 ? (ze[0] > 0) == (ye != 0)
					   : best == ye;
			if (s->o == 1)
				scored[at + e] = (pti_scored){ze[0], ye};
		}
	}
	*loss = n > 0 ? total / n : NAN;
	*acc = n > 0 ? (double)right / n : NAN;
	*auc = s->o == 1 ? pti_auc(scored, n) : NAN;
}
