// model/cnn.c - the "cnn:C1,...[/H1,...]" model (common/layout.h): 3x3
// same convolutions with bias, ReLU and 2x2 max-pools, then hidden dense
// layers with ReLU, if any, and a dense layer to the logits. Convolutions are matrix products on common/blas.h: im2col
// turns a chunk of images into rows of 3x3 patches, (positions, 9 C_in),
// times w_l (9 C_in, C_out) gives (positions, C_out); backward turns the
// patches' gradient back into the image's with col2im.
//
// Scratch, sized once: per conv layer, for the whole batch, the pooled
// output, where each pooled value came from (its argmax) and, in
// backward, the gradient of the pooled output; per hidden dense layer,
// its output and the gradient before its ReLU; per chunk of CNN_CHUNK images, one patch
// matrix and one pre-pool buffer, reused by every layer and both passes
// (a patch matrix of the whole batch would be tens of MB). Backward runs
// the chain of pooled gradients first (it reads the weights), then each
// layer's weight and bias gradient from the bottom up, scattering the
// pooled gradient to the pre-pool positions again and remaking the
// patches, so that the hooks' contract of model.h holds. Its ops table is
// pti_cnn_kind (model/kind.h).
//
// Every sum runs in a fixed order over fixed chunks (the chunk size does
// not depend on max_batch), so the same inputs give the same bits.
#include <stdlib.h>
#include <string.h>

#include "common/blas.h"
#include "common/err.h"
#include "model/kind.h"
#include "model/xent.h"

#define CNN_CHUNK 16u // images per patch matrix

typedef struct cnn {
	uint32_t n_conv, n_layers, classes, max_batch;
	uint32_t side[PT_MAX_LAYERS + 1], chan[PT_MAX_LAYERS + 1];
	uint32_t width[PT_MAX_LAYERS + 1]; // [l >= n_conv] dense fan-in
	uint64_t w_off[PT_MAX_LAYERS];  // [l] w_l in the flat vector
	uint64_t b_off[PT_MAX_LAYERS];  // [l] b_l; l >= n_conv dense
	float *pool[PT_MAX_LAYERS];     // [l] (max_batch, out_n(l)) outputs
	uint32_t *arg[PT_MAX_LAYERS];   // [l] like pool: argmax in the image
	float *dpool[PT_MAX_LAYERS];    // [l] like pool: dL/dpool
	float *h[PT_MAX_LAYERS];        // [l] hidden dense: relu output
	float *dh[PT_MAX_LAYERS];       // [l] like h: dL/d(pre-ReLU)
	float *logits;                  // (max_batch, classes)
	float *col;                     // (CNN_CHUNK max positions, max 9 C_in)
	float *z;                       // (CNN_CHUNK max positions x C_out)
	float *mem;
	uint32_t *imem;
} cnn;

// Pixels of layer l's input image, and the size of its output per image.
static uint32_t cnn_hw(const cnn *c, uint32_t l)
{
	return c->side[l] * c->side[l];
}

static uint32_t cnn_out_n(const cnn *c, uint32_t l)
{
	return c->side[l + 1] * c->side[l + 1] * c->chan[l + 1];
}

static void cnn_free(void *p)
{
	cnn *c = p;
	if (c == NULL)
		return;
	free(c->mem);
	free(c->imem);
	free(c);
}

static int cnn_alloc(void **out, const pti_layout *l, uint32_t max_batch)
{
	uint32_t n = l->n_conv, top = l->n_layers - 1;
	if (l->kind != PT_MODEL_CNN || n < 1 || n > PT_CNN_MAX_CONV ||
	    top < n || top > n + PT_CNN_MAX_DENSE)
		return pti_err_set(PT_EINVAL, "model %s: not a CNN", l->spec);
	uint64_t at = 0;
	for (uint32_t i = 0; i <= top; i++) {
		uint64_t rows = i < n ? 9ull * l->chan[i] : l->width[i];
		uint64_t cols = i < n ? l->chan[i + 1] : l->width[i + 1];
		if (l->vars[2 * i].off != at || l->vars[2 * i].n != rows * cols ||
		    l->vars[2 * i + 1].off != at + rows * cols ||
		    l->vars[2 * i + 1].n != cols)
			return pti_err_set(PT_EINVAL,
			    "model %s: layer %u not laid out as w, b", l->spec,
			    i);
		at += rows * cols + cols;
	}
	cnn *c = calloc(1, sizeof(*c));
	if (c == NULL)
		return pti_err_set(PT_ENOMEM, "model %s", l->spec);
	c->n_conv = n;
	c->n_layers = l->n_layers;
	c->classes = l->width[top + 1];
	c->max_batch = max_batch;
	memcpy(c->width, l->width, sizeof(c->width));
	memcpy(c->side, l->side, sizeof(c->side));
	memcpy(c->chan, l->chan, sizeof(c->chan));
	for (uint32_t i = 0; i <= top; i++) {
		c->w_off[i] = l->vars[2 * i].off;
		c->b_off[i] = l->vars[2 * i + 1].off;
	}
	// The layout caps each layer at 2^28 features per image and 1024
	// channels, so these stay far inside 64 bits.
	uint64_t per = 0, cols = 0, zs = 0;
	for (uint32_t i = 0; i < n; i++) {
		per += cnn_out_n(c, i);
		uint64_t k = 9ull * c->chan[i] * cnn_hw(c, i);
		uint64_t zz = (uint64_t)c->chan[i + 1] * cnn_hw(c, i);
		cols = k > cols ? k : cols;
		zs = zz > zs ? zz : zs;
	}
	for (uint32_t i = n + 1; i <= top; i++) // hidden dense outputs
		per += c->width[i];
	uint64_t nf = 2 * per * max_batch + (uint64_t)max_batch * c->classes +
		      CNN_CHUNK * (cols + zs);
	uint64_t ni = per * max_batch;
	if (nf > SIZE_MAX / sizeof(float) || ni > SIZE_MAX / sizeof(uint32_t) ||
	    (c->mem = malloc((size_t)nf * sizeof(float))) == NULL ||
	    (c->imem = malloc((size_t)ni * sizeof(uint32_t))) == NULL) {
		cnn_free(c);
		return pti_err_set(PT_ENOMEM, "model %s: scratch for %u images",
		    l->spec, max_batch);
	}
	float *p = c->mem;
	uint32_t *q = c->imem;
	for (uint32_t i = 0; i < n; i++) {
		size_t k = (size_t)max_batch * cnn_out_n(c, i);
		c->pool[i] = p;
		c->dpool[i] = p + k;
		c->arg[i] = q;
		p += 2 * k;
		q += k;
	}
	for (uint32_t i = n; i < top; i++) {
		size_t k = (size_t)max_batch * c->width[i + 1];
		c->h[i] = p;
		c->dh[i] = p + k;
		p += 2 * k;
	}
	c->logits = p;
	p += (size_t)max_batch * c->classes;
	c->col = p;
	p += (size_t)CNN_CHUNK * cols;
	c->z = p;
	*out = c;
	return 0;
}

// ---------------------------------------------------------------------
// Patches and pooling
// ---------------------------------------------------------------------

// im2col writes the 3x3 patches of g images in (g, s, s, ch) to col
// (g s s, 9 ch): row (n s + y) s + x holds pixels (y + ky - 1, x + kx - 1)
// for ky, kx in 0..2, each ch channels, zeros outside the image.
static void im2col(float *col, const float *in, uint32_t g, uint32_t s,
    uint32_t ch)
{
	size_t k = 9 * (size_t)ch;
	for (uint32_t n = 0; n < g; n++) {
		const float *img = in + (size_t)n * s * s * ch;
		for (uint32_t y = 0; y < s; y++)
			for (uint32_t x = 0; x < s; x++) {
				float *row = col + (((size_t)n * s + y) * s + x) * k;
				for (uint32_t t = 0; t < 9; t++) {
					float *dst = row + (size_t)t * ch;
					int64_t sy = (int64_t)y + t / 3 - 1;
					int64_t sx = (int64_t)x + t % 3 - 1;
					if (sy < 0 || sx < 0 || sy >= s ||
					    sx >= s) {
						memset(dst, 0, ch * sizeof(float));
						continue;
					}
					const float *src =
					    img + ((size_t)sy * s + sx) * ch;
					memcpy(dst, src, ch * sizeof(float));
				}
			}
	}
}

// col2im is im2col's adjoint: din (g, s, s, ch) = the sum, over every
// patch entry, of its gradient in dcol (g s s, 9 ch), in patch order.
static void col2im(float *din, const float *dcol, uint32_t g, uint32_t s,
    uint32_t ch)
{
	size_t k = 9 * (size_t)ch;
	memset(din, 0, (size_t)g * s * s * ch * sizeof(float));
	for (uint32_t n = 0; n < g; n++) {
		float *img = din + (size_t)n * s * s * ch;
		for (uint32_t y = 0; y < s; y++)
			for (uint32_t x = 0; x < s; x++) {
				const float *row =
				    dcol + (((size_t)n * s + y) * s + x) * k;
				for (uint32_t t = 0; t < 9; t++) {
					int64_t sy = (int64_t)y + t / 3 - 1;
					int64_t sx = (int64_t)x + t % 3 - 1;
					if (sy < 0 || sx < 0 || sy >= s ||
					    sx >= s)
						continue;
					float *dst =
					    img + ((size_t)sy * s + sx) * ch;
					const float *src = row + (size_t)t * ch;
					for (uint32_t j = 0; j < ch; j++)
						dst[j] += src[j];
				}
			}
	}
}

// relu_pool writes the 2x2 max-pool (stride 2, floor) of relu(z) for g
// images, z (g, s, s, ch), to out (g, s/2, s/2, ch), and where each came
// from to arg: the offset in its image's z, the first of the window's
// largest. relu(max) = max(relu): the ReLU goes after the max.
static void relu_pool(float *out, uint32_t *arg, const float *z, uint32_t g,
    uint32_t s, uint32_t ch)
{
	uint32_t so = s / 2;
	for (uint32_t n = 0; n < g; n++) {
		const float *img = z + (size_t)n * s * s * ch;
		for (uint32_t py = 0; py < so; py++)
			for (uint32_t px = 0; px < so; px++) {
				size_t o = (((size_t)n * so + py) * so + px) * ch;
				uint32_t p0 = (2 * py * s + 2 * px) * ch;
				uint32_t at[4] = {p0, p0 + ch, p0 + s * ch,
				    p0 + (s + 1) * ch};
				for (uint32_t j = 0; j < ch; j++) {
					uint32_t best = at[0] + j;
					float mx = img[best];
					for (int w = 1; w < 4; w++)
						if (img[at[w] + j] > mx) {
							best = at[w] + j;
							mx = img[best];
						}
					out[o + j] = mx > 0.0f ? mx : 0.0f;
					arg[o + j] = best;
				}
			}
	}
}

// unpool writes dz (g, s s ch), the gradient before the pool and the
// ReLU: each pooled gradient goes to its argmax when the pooled value is
// positive (the ReLU's derivative, 0 at 0), zeros elsewhere. The windows
// do not overlap, so each entry gets at most one.
static void unpool(float *dz, const float *dpool, const float *pool,
    const uint32_t *arg, uint32_t g, uint32_t s, uint32_t ch)
{
	size_t per = (size_t)s * s * ch, out = (size_t)(s / 2) * (s / 2) * ch;
	memset(dz, 0, (size_t)g * per * sizeof(float));
	for (uint32_t n = 0; n < g; n++)
		for (size_t q = n * out; q < (n + 1) * out; q++)
			if (pool[q] > 0.0f)
				dz[n * per + arg[q]] = dpool[q];
}

// ---------------------------------------------------------------------
// Forward
// ---------------------------------------------------------------------

// cnn_input is layer l's input for images i0.. : x, or layer l-1's output.
static const float *cnn_input(const cnn *c, const float *x, uint32_t l,
    uint32_t i0)
{
	size_t per = (size_t)cnn_hw(c, l) * c->chan[l];
	return (l == 0 ? x : c->pool[l - 1]) + i0 * per;
}

// dense_input is dense layer l's input: the last pooled output, or the
// hidden dense layer below.
static const float *dense_input(const cnn *c, uint32_t l)
{
	return l == c->n_conv ? c->pool[l - 1] : c->h[l - 1];
}

// conv_forward computes conv layer l for images [i0, i0 + g).
static void conv_forward(cnn *c, const float *params, const float *x,
    uint32_t l, uint32_t i0, uint32_t g)
{
	uint32_t s = c->side[l], ci = c->chan[l], co = c->chan[l + 1];
	uint32_t k = 9 * ci, m = g * cnn_hw(c, l);
	const float *w = params + c->w_off[l];    // (9 ci, co)
	const float *bias = params + c->b_off[l]; // (co)
	im2col(c->col, cnn_input(c, x, l, i0), g, s, ci);
	// Start from the bias so the product adds to it (beta = 1).
	for (uint32_t r = 0; r < m; r++)
		memcpy(c->z + (size_t)r * co, bias, co * sizeof(float));
	pti_blas_sgemm(0, 0, m, co, k, 1.0f, c->col, k, w, co, 1.0f, c->z, co);
	size_t o = (size_t)i0 * cnn_out_n(c, l);
	relu_pool(c->pool[l] + o, c->arg[l] + o, c->z, g, s, co);
}

// cnn_forward fills pool[] and the logits, calling ready (when set)
// before each layer's parameters are read; returns its nonzero code.
static int cnn_forward(cnn *c, const float *params, const float *x,
    uint32_t b, int (*ready)(void *arg, uint32_t l), void *arg)
{
	int rv;
	for (uint32_t l = 0; l < c->n_conv; l++) {
		if (ready != NULL && (rv = ready(arg, l)) != 0)
			return rv;
		for (uint32_t i0 = 0; i0 < b; i0 += CNN_CHUNK)
			conv_forward(c, params, x, l, i0,
			    b - i0 < CNN_CHUNK ? b - i0 : CNN_CHUNK);
	}
	// The dense layers: each output starts from its bias, ReLU on all
	// but the logits.
	uint32_t top = c->n_layers - 1;
	for (uint32_t l = c->n_conv; l <= top; l++) {
		if (ready != NULL && (rv = ready(arg, l)) != 0)
			return rv;
		uint32_t in = c->width[l], o = c->width[l + 1];
		float *y = l < top ? c->h[l] : c->logits;
		const float *bias = params + c->b_off[l];
		for (uint32_t i = 0; i < b; i++)
			memcpy(y + (size_t)i * o, bias, o * sizeof(float));
		pti_blas_sgemm(0, 0, b, o, in, 1.0f, dense_input(c, l), in,
		    params + c->w_off[l], o, 1.0f, y, o);
		if (l < top)
			for (size_t k = 0; k < (size_t)b * o; k++)
				y[k] = y[k] > 0.0f ? y[k] : 0.0f;
	}
	return 0;
}

static const float *cnn_logits(void *p, const float *params,
    const float *x, uint32_t b)
{
	cnn *c = p;
	cnn_forward(c, params, x, b, NULL, NULL);
	return c->logits;
}

// ---------------------------------------------------------------------
// Backward
// ---------------------------------------------------------------------

// dense_dout is the gradient of dense layer l's output before its ReLU
// (the logits' for the top layer: pti_xent_mean leaves it there).
static float *dense_dout(cnn *c, uint32_t l)
{
	return l == c->n_layers - 1 ? c->logits : c->dh[l];
}

// dense_chain runs the dense layers' chain from the top: each layer's
// input gradient dout(l) w_l^T, into dh[l - 1] masked by that layer's
// ReLU, or into dpool[n - 1] for the lowest (reads every dense w).
static void dense_chain(cnn *c, const float *params, uint32_t b)
{
	uint32_t n = c->n_conv;
	for (uint32_t l = c->n_layers - 1; l >= n; l--) {
		uint32_t in = c->width[l], o = c->width[l + 1];
		float *din = l == n ? c->dpool[n - 1] : c->dh[l - 1];
		pti_blas_sgemm(0, 1, b, in, o, 1.0f, dense_dout(c, l), o,
		    params + c->w_off[l], o, 0.0f, din, in);
		if (l == n)
			break;
		for (size_t k = 0; k < (size_t)b * in; k++)
			din[k] = c->h[l - 1][k] > 0.0f ? din[k] : 0.0f;
	}
}

// conv_chain writes dpool[l-1], the gradient of layer l's input, from
// dpool[l], l >= 1 (reads w_l).
static void conv_chain(cnn *c, const float *params, uint32_t l,
    uint32_t b)
{
	uint32_t s = c->side[l], ci = c->chan[l], co = c->chan[l + 1];
	uint32_t k = 9 * ci, out = cnn_out_n(c, l);
	size_t in = (size_t)cnn_hw(c, l) * ci;
	for (uint32_t i0 = 0; i0 < b; i0 += CNN_CHUNK) {
		uint32_t g = b - i0 < CNN_CHUNK ? b - i0 : CNN_CHUNK;
		uint32_t m = g * cnn_hw(c, l);
		size_t o = (size_t)i0 * out;
		unpool(c->z, c->dpool[l] + o, c->pool[l] + o, c->arg[l] + o, g,
		    s, co);
		pti_blas_sgemm(0, 1, m, k, co, 1.0f, c->z, co,
		    params + c->w_off[l], co, 0.0f, c->col, k);
		col2im(c->dpool[l - 1] + i0 * in, c->col, g, s, ci);
	}
}

// conv_wgrad writes dw_l and db_l from dpool[l]: the patch matrix of each
// chunk transposed times its pre-pool gradient, summed chunk by chunk.
static void conv_wgrad(cnn *c, float *grad, const float *x, uint32_t l,
    uint32_t b)
{
	uint32_t s = c->side[l], ci = c->chan[l], co = c->chan[l + 1];
	uint32_t k = 9 * ci, out = cnn_out_n(c, l);
	float *gw = grad + c->w_off[l]; // (9 ci, co)
	float *gb = grad + c->b_off[l]; // (co)
	memset(gb, 0, co * sizeof(float));
	for (uint32_t i0 = 0; i0 < b; i0 += CNN_CHUNK) {
		uint32_t g = b - i0 < CNN_CHUNK ? b - i0 : CNN_CHUNK;
		uint32_t m = g * cnn_hw(c, l);
		size_t o = (size_t)i0 * out;
		unpool(c->z, c->dpool[l] + o, c->pool[l] + o, c->arg[l] + o, g,
		    s, co);
		im2col(c->col, cnn_input(c, x, l, i0), g, s, ci);
		pti_blas_sgemm(1, 0, k, co, m, 1.0f, c->col, k, c->z, co,
		    i0 == 0 ? 0.0f : 1.0f, gw, co);
		for (uint32_t r = 0; r < m; r++) {
			const float *row = c->z + (size_t)r * co;
			for (uint32_t j = 0; j < co; j++)
				gb[j] += row[j];
		}
	}
}

// dense_wgrad writes dense layer l's dw_l = input^T dout(l) and db_l,
// the column sums of dout(l) in row order.
static void dense_wgrad(cnn *c, float *grad, uint32_t l, uint32_t b)
{
	uint32_t in = c->width[l], o = c->width[l + 1];
	const float *d = dense_dout(c, l);
	float *gb = grad + c->b_off[l];
	pti_blas_sgemm(1, 0, in, o, b, 1.0f, dense_input(c, l), in, d, o,
	    0.0f, grad + c->w_off[l], o);
	memcpy(gb, d, o * sizeof(float));
	for (uint32_t i = 1; i < b; i++)
		for (uint32_t j = 0; j < o; j++)
			gb[j] += d[(size_t)i * o + j];
}

// cnn_piece is the length of [w_l, b_l] in the flat vector.
static uint64_t cnn_piece(const cnn *c, uint32_t l)
{
	uint64_t cols = l < c->n_conv ? c->chan[l + 1] : c->width[l + 1];
	return c->b_off[l] + cols - c->w_off[l];
}

static int cnn_grad(void *p, float *grad, double *loss, const float *params,
    const float *x, const uint8_t *y, uint32_t b, const pti_model_hooks *hk)
{
	cnn *c = p;
	int rv;
	void (*done)(void *, uint64_t, uint64_t, double) =
	    hk != NULL ? hk->done : NULL;
	if ((rv = cnn_forward(c, params, x, b, hk ? hk->ready : NULL,
		 hk ? hk->arg : NULL)) != 0)
		return rv;
	double mean = pti_xent_mean(c->logits, y, b, c->classes);
	// The whole chain first: params is not read after it.
	uint32_t n = c->n_conv;
	dense_chain(c, params, b);
	for (uint32_t l = n - 1; l > 0; l--)
		conv_chain(c, params, l, b);
	for (uint32_t l = 0; l < c->n_layers; l++) {
		if (l < n)
			conv_wgrad(c, grad, x, l, b);
		else
			dense_wgrad(c, grad, l, b);
		if (done != NULL)
			done(hk->arg, c->w_off[l], cnn_piece(c, l), mean);
	}
	*loss = mean;
	return 0;
}

const pti_model_kind pti_cnn_kind = {
	.alloc = cnn_alloc,
	.free = cnn_free,
	.grad = cnn_grad,
	.logits = cnn_logits,
	.blocks_exact = NULL, // the CNN does not cut its layers
};
