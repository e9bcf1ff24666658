// tests/model_test.c - the model's backward pass against central finite
// differences of its forward pass, the loss against a plain double
// reference, hand-made cases, argument errors, the hooked gradient (same
// bits, order of the hooks, when params is read) and SGD that learns;
// for the CNN, also its loss against a plain-loop reference of the
// layout's definition, whose double-precision differences check the
// gradient.
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/blas.h"
#include "common/layout.h"
#include "common/rng.h"
#include "model/model.h"
#include "tests/test.h"

#define GRAD_TOL 1e-2 // largest relative error the gradient check allows
// The finite-difference step: float rounding of the loss (~1e-7) is then
// ~1e-4 of the difference, and no ReLU input of these seeded fixtures
// crosses zero within it (at 1e-2 one in mlp:6,5,4 does).
#define GRAD_STEP 3e-3f

// ---------------------------------------------------------------------
// Fixtures
// ---------------------------------------------------------------------

typedef struct fixture {
	pti_layout l;
	pti_model *m;
	uint32_t b;
	float *params, *grad; // (n_params)
	float *x;             // (b, width[0])
	uint8_t *y;           // (b)
} fixture;

// fixture_init builds spec on dim inputs and classes outputs with params
// from pti_layout_init_values and b random normal examples.
static int fixture_init(fixture *f, const char *spec, uint32_t dim,
    uint32_t classes, uint32_t b, uint64_t seed)
{
	memset(f, 0, sizeof(*f));
	int rv = pti_layout_init(&f->l, spec, dim, classes);
	if (rv != 0 || (rv = pti_model_alloc(&f->m, &f->l, b)) != 0)
		return rv;
	f->b = b;
	f->params = malloc(f->l.n_params * sizeof(float));
	f->grad = malloc(f->l.n_params * sizeof(float));
	f->x = malloc((size_t)b * dim * sizeof(float));
	f->y = malloc(b);
	if (!f->params || !f->grad || !f->x || !f->y)
		return PT_ENOMEM;
	pti_layout_init_values(f->params, &f->l, seed, 0, f->l.n_params);
	pti_rng r;
	pti_rng_seed(&r, seed, 99);
	for (size_t i = 0; i < (size_t)b * dim; i++)
		f->x[i] = (float)pti_rng_normal(&r);
	for (uint32_t i = 0; i < b; i++)
		f->y[i] = (uint8_t)pti_rng_below(&r, classes);
	return 0;
}

static void fixture_fini(fixture *f)
{
	pti_model_free(f->m);
	free(f->params);
	free(f->grad);
	free(f->x);
	free(f->y);
}

// mean_loss is the forward-only mean loss of f's batch at f->params.
static double mean_loss(fixture *f)
{
	double sum = 0;
	uint32_t ok;
	PT_TEST_OK(pti_model_eval(f->m, &sum, &ok, f->params, f->x, f->y,
	    f->b));
	return sum / f->b;
}

// ---------------------------------------------------------------------
// Gradient check
// ---------------------------------------------------------------------

// fd_grad writes the central difference of the mean loss with respect to
// every parameter to fd (n_params doubles). The step is the distance
// between the two float parameters actually evaluated, not 2h.
static void fd_grad(double *fd, fixture *f, float h)
{
	for (uint64_t i = 0; i < f->l.n_params; i++) {
		float p = f->params[i], hi = p + h, lo = p - h;
		f->params[i] = hi;
		double l_hi = mean_loss(f);
		f->params[i] = lo;
		double l_lo = mean_loss(f);
		f->params[i] = p;
		fd[i] = (l_hi - l_lo) / ((double)hi - (double)lo);
	}
}

// grad_err is the relative error of g against fd at one parameter; the
// floor keeps near-zero entries from dividing float noise by nothing.
static double grad_err(double g, double fd)
{
	double scale = fabs(g) > fabs(fd) ? fabs(g) : fabs(fd);
	return fabs(g - fd) / (scale > 1e-3 ? scale : 1e-3);
}

// grad_check returns the worst grad_err over all of f's parameters and
// writes the index where it happens.
static double grad_check(const float *grad, const double *fd, uint64_t n,
    uint64_t *worst_at)
{
	double worst = 0;
	*worst_at = 0;
	for (uint64_t i = 0; i < n; i++) {
		double e = grad_err(grad[i], fd[i]);
		if (e > worst) {
			worst = e;
			*worst_at = i;
		}
	}
	return worst;
}

// cnn_ref_loss is the mean loss of f's batch (a CNN) computed in double by
// plain loops straight from the layout's definition (common/layout.h):
// each output pixel of a conv layer is its bias plus the sum over ky, kx,
// c of w[(ky 3 + kx) C_in + c][o] times input pixel (y + ky - 1,
// x + kx - 1) of channel c (0 outside), then ReLU and 2x2 max-pools, the
// dense layer on features (y side + x) C + c. The parameters are f's
// with delta[i] added in double (delta NULL: none), so that finite
// differences can take steps far below float's rounding.
static double cnn_ref_loss(const fixture *f, const double *delta)
{
	const pti_layout *l = &f->l;
	uint32_t n = l->n_conv, top = l->n_layers - 1;
	uint32_t classes = l->width[top + 1];
	size_t big = 0;
	for (uint32_t k = 0; k <= top; k++)
		big = l->width[k] > big ? l->width[k] : big;
	size_t pre = 0; // the largest pre-pool image
	for (uint32_t k = 0; k < n; k++) {
		size_t p = (size_t)l->side[k] * l->side[k] * l->chan[k + 1];
		pre = p > pre ? p : pre;
	}
	double *a = malloc(big * sizeof(double));
	double *z = malloc(pre * sizeof(double));
	double *o = malloc(big * sizeof(double));
	double *par = malloc(l->n_params * sizeof(double));
	for (uint64_t i = 0; i < l->n_params; i++)
		par[i] = f->params[i] + (delta != NULL ? delta[i] : 0);
	double total = 0;
	for (uint32_t i = 0; i < f->b; i++) {
		for (uint32_t j = 0; j < l->width[0]; j++)
			a[j] = f->x[(size_t)i * l->width[0] + j];
		for (uint32_t k = 0; k < n; k++) {
			int s = (int)l->side[k], ci = (int)l->chan[k];
			int co = (int)l->chan[k + 1], so = s / 2;
			const double *w = par + l->vars[2 * k].off;
			const double *bias = par + l->vars[2 * k + 1].off;
			for (int y = 0; y < s; y++)
				for (int x = 0; x < s; x++)
					for (int c = 0; c < co; c++) {
						double v = bias[c];
						for (int t = 0; t < 9; t++) {
							int sy = y + t / 3 - 1;
							int sx = x + t % 3 - 1;
							if (sy < 0 || sx < 0 ||
							    sy >= s || sx >= s)
								continue;
							for (int d = 0; d < ci;
							     d++)
								v += a[(sy * s +
									   sx) *
									  ci +
								      d] *
								     w[(t * ci +
									   d) *
									  co +
								       c];
						}
						z[(y * s + x) * co + c] =
						    v > 0 ? v : 0;
					}
			for (int y = 0; y < so; y++)
				for (int x = 0; x < so; x++)
					for (int c = 0; c < co; c++) {
						double m = 0;
						for (int t = 0; t < 4; t++) {
							int py = 2 * y + t / 2;
							int px = 2 * x + t % 2;
							double v = z[(py * s +
									 px) *
									co +
								    c];
							m = v > m ? v : m;
						}
						o[(y * so + x) * co + c] = m;
					}
			memcpy(a, o, l->width[k + 1] * sizeof(double));
		}
		for (uint32_t k = n; k < top; k++) { // hidden dense, ReLU
			const double *w = par + l->vars[2 * k].off;
			const double *bias = par + l->vars[2 * k + 1].off;
			uint32_t wo = l->width[k + 1];
			for (uint32_t c = 0; c < wo; c++) {
				double v = bias[c];
				for (uint32_t j = 0; j < l->width[k]; j++)
					v += a[j] * w[(size_t)j * wo + c];
				o[c] = v > 0 ? v : 0;
			}
			memcpy(a, o, wo * sizeof(double));
		}
		const double *w = par + l->vars[2 * top].off;
		const double *bias = par + l->vars[2 * top + 1].off;
		double sum = 0, zy = 0;
		for (uint32_t c = 0; c < classes; c++) {
			double v = bias[c];
			for (uint32_t j = 0; j < l->width[top]; j++)
				v += a[j] * w[(size_t)j * classes + c];
			sum += exp(v);
			zy = c == f->y[i] ? v : zy;
		}
		total += log(sum) - zy;
	}
	free(a);
	free(z);
	free(o);
	free(par);
	return total / f->b;
}

// CNN_STEP is the finite-difference step on the double reference: the
// max-pools and ReLUs of these small random fixtures put kinks a few
// 1e-3 apart in some parameters (the float loss's differences at
// GRAD_STEP miss the gradient by half there, while they converge to it
// below 1e-3), and double rounding is ~1e-11 of a difference at 1e-5.
#define CNN_STEP 1e-5
#define CNN_TOL 1e-3 // the relative error allowed against it

// cnn_fd writes the central differences of cnn_ref_loss to fd.
static void cnn_fd(double *fd, const fixture *f)
{
	double *d = calloc(f->l.n_params, sizeof(double));
	for (uint64_t i = 0; i < f->l.n_params; i++) {
		d[i] = CNN_STEP;
		double hi = cnn_ref_loss(f, d);
		d[i] = -CNN_STEP;
		double lo = cnn_ref_loss(f, d);
		d[i] = 0;
		fd[i] = (hi - lo) / (2 * CNN_STEP);
	}
	free(d);
}

// fd_of writes f's finite-difference gradient and returns the tolerance
// to check it at.
static double fd_of(double *fd, fixture *f)
{
	if (f->l.kind == PT_MODEL_CNN) {
		cnn_fd(fd, f);
		return CNN_TOL;
	}
	fd_grad(fd, f, GRAD_STEP);
	return GRAD_TOL;
}

// check_spec_at checks spec's gradient on dim inputs and 3 classes.
static void check_spec_at(const char *spec, uint32_t dim, uint32_t b,
    uint64_t seed)
{
	fixture f;
	double loss;
	uint64_t at;
	PT_TEST_OK(fixture_init(&f, spec, dim, 3, b, seed));
	double *fd = malloc(f.l.n_params * sizeof(double));
	PT_TEST_OK(pti_model_grad(f.m, f.grad, &loss, f.params, f.x, f.y, b));
	double tol = fd_of(fd, &f);
	double e = grad_check(f.grad, fd, f.l.n_params, &at);
	fprintf(stderr, "  %s: %llu params, max rel error %.3g at %llu\n",
	    spec, (unsigned long long)f.l.n_params, e,
	    (unsigned long long)at);
	if (!(e < tol))
		PT_TEST_FAIL_AT("%s: grad[%llu] = %g, finite difference %g",
		    spec, (unsigned long long)at, f.grad[at], fd[at]);
	// Not a vacuous check: most of the gradient is well away from 0.
	uint64_t big = 0;
	for (uint64_t i = 0; i < f.l.n_params; i++)
		big += fabs(fd[i]) > 1e-3;
	PT_TEST_TRUE(big > f.l.n_params / 2);
	free(fd);
	fixture_fini(&f);
}

static void check_spec(const char *spec, uint32_t b, uint64_t seed)
{
	check_spec_at(spec, 7, b, seed);
}

static void test_model_grad_check_softmax(void)
{
	check_spec("softmax", 4, 1);
}

static void test_model_grad_check_mlp(void)
{
	check_spec("mlp:5,4", 4, 2);
	check_spec("mlp:3", 4, 3);
	check_spec("mlp:6,5,4", 5, 4); // a dz buffer per hidden layer
}

// catches_errors checks that grad_check notices a slip in any one entry,
// a gradient of the sum and a flipped sign, for spec on dim inputs.
static void catches_errors(const char *spec, uint32_t dim, uint32_t b,
    uint64_t seed)
{
	fixture f;
	double loss;
	uint64_t at;
	PT_TEST_OK(fixture_init(&f, spec, dim, 3, b, seed));
	double *fd = malloc(f.l.n_params * sizeof(double));
	PT_TEST_OK(pti_model_grad(f.m, f.grad, &loss, f.params, f.x, f.y, b));
	double tol = fd_of(fd, &f);
	PT_TEST_TRUE(grad_check(f.grad, fd, f.l.n_params, &at) < tol);
	// A 5% slip in any one entry of any variable must show.
	for (uint32_t v = 0; v < f.l.n_vars; v++) {
		const pti_var *var = &f.l.vars[v];
		for (uint64_t i = var->off; i < var->off + var->n; i++) {
			float keep = f.grad[i];
			f.grad[i] += 0.05f * fabsf(keep) + 1e-3f;
			double e = grad_check(f.grad, fd, f.l.n_params, &at);
			if (!(e >= tol && at == i))
				PT_TEST_FAIL_AT("%s[%llu] slipped, error %g",
				    var->name,
				    (unsigned long long)(i - var->off), e);
			f.grad[i] = keep;
		}
	}
	// So must a gradient of the sum instead of the mean, or a flipped
	// sign.
	for (uint64_t i = 0; i < f.l.n_params; i++)
		f.grad[i] *= (float)b;
	PT_TEST_TRUE(grad_check(f.grad, fd, f.l.n_params, &at) > 0.5);
	for (uint64_t i = 0; i < f.l.n_params; i++)
		f.grad[i] *= -1.0f / (float)b;
	PT_TEST_TRUE(grad_check(f.grad, fd, f.l.n_params, &at) > 1);
	free(fd);
	fixture_fini(&f);
}

static void test_model_grad_check_catches_errors(void)
{
	catches_errors("mlp:5,4", 7, 4, 2);
}

// ---------------------------------------------------------------------
// Forward values
// ---------------------------------------------------------------------

// ref_loss is the mean loss of f's batch computed in double by plain
// loops, straight from the definitions.
static double ref_loss(const fixture *f)
{
	const pti_layout *l = &f->l;
	double a[64], z[64], total = 0;
	for (uint32_t i = 0; i < f->b; i++) {
		uint32_t n = l->width[0];
		for (uint32_t j = 0; j < n; j++)
			a[j] = f->x[(size_t)i * n + j];
		for (uint32_t k = 0; k < l->n_layers; k++) {
			const float *w = f->params + l->vars[2 * k].off;
			const float *bias = f->params + l->vars[2 * k + 1].off;
			uint32_t n_out = l->width[k + 1];
			for (uint32_t o = 0; o < n_out; o++) {
				const float *col = w + o; // stride n_out
				z[o] = bias[o];
				for (uint32_t j = 0; j < n; j++)
					z[o] += a[j] * col[(size_t)j * n_out];
				if (k + 1 < l->n_layers && z[o] < 0)
					z[o] = 0;
			}
			memcpy(a, z, n_out * sizeof(double));
			n = n_out;
		}
		double sum = 0;
		for (uint32_t o = 0; o < n; o++)
			sum += exp(a[o]);
		total += log(sum) - a[f->y[i]];
	}
	return total / f->b;
}

static void test_model_loss_matches_reference(void)
{
	const char *specs[] = {"softmax", "mlp:5,4", "mlp:9"};
	for (int s = 0; s < 3; s++) {
		fixture f;
		double loss, sum;
		uint32_t ok;
		PT_TEST_OK(fixture_init(&f, specs[s], 7, 3, 6, 10 + s));
		PT_TEST_OK(pti_model_grad(f.m, f.grad, &loss, f.params, f.x,
		    f.y, 6));
		PT_TEST_OK(pti_model_eval(f.m, &sum, &ok, f.params, f.x, f.y,
		    6));
		double want = ref_loss(&f);
		PT_TEST_NEAR(loss, want, 1e-5 * want);
		PT_TEST_NEAR(sum, 6 * loss, 1e-9);
		PT_TEST_TRUE(ok <= 6);
		fixture_fini(&f);
	}
}

static void test_model_uniform_loss_is_log_classes(void)
{
	const char *specs[] = {"softmax", "mlp:5,4"};
	for (int s = 0; s < 2; s++) {
		fixture f;
		double loss;
		PT_TEST_OK(fixture_init(&f, specs[s], 7, 10, 4, 5));
		memset(f.params, 0, f.l.n_params * sizeof(float));
		PT_TEST_OK(pti_model_grad(f.m, f.grad, &loss, f.params, f.x,
		    f.y, 4));
		PT_TEST_NEAR(loss, log(10.0), 1e-6);
		// Output bias gradient: mean over rows of 1/C - onehot.
		const pti_var *bo = &f.l.vars[f.l.n_vars - 1];
		for (uint32_t j = 0; j < 10; j++) {
			double want = 0.1;
			for (uint32_t i = 0; i < 4; i++)
				want -= (f.y[i] == j) / 4.0;
			PT_TEST_NEAR(f.grad[bo->off + j], want, 1e-6);
		}
		fixture_fini(&f);
	}
	// Large equal logits too: the max is subtracted before exp.
	fixture f;
	double loss;
	PT_TEST_OK(fixture_init(&f, "softmax", 7, 3, 4, 5));
	memset(f.params, 0, f.l.n_params * sizeof(float));
	for (uint32_t j = 0; j < 3; j++)
		f.params[f.l.vars[1].off + j] = 1000.0f;
	PT_TEST_OK(pti_model_grad(f.m, f.grad, &loss, f.params, f.x, f.y, 4));
	PT_TEST_NEAR(loss, log(3.0), 1e-6);
	fixture_fini(&f);
}

static void test_model_eval_hand_case(void)
{
	pti_layout l;
	pti_model *m;
	PT_TEST_OK(pti_layout_init(&l, "softmax", 2, 3));
	PT_TEST_OK(pti_model_alloc(&m, &l, 8));
	// w0 (2, 3) picks logit 0 from x0 and 1 from x1; b0 favours 2.
	const float params[9] = {1, 0, 0, 0, 1, 0, 0, 0, 0.5f};
	const float x[8] = {2, 0, 0, 3, 0, 0, 1, 1}; // (4, 2)
	const uint8_t y[4] = {0, 1, 0, 1};
	// Logits (2,0,.5) (0,3,.5) (0,0,.5) (1,1,.5): predictions 0, 1, 2
	// and 0 (the first of a tie), so rows 0 and 1 are right.
	const double z[4][3] = {{2, 0, .5}, {0, 3, .5}, {0, 0, .5},
	    {1, 1, .5}};
	double want = 0;
	for (int i = 0; i < 4; i++)
		want += log(exp(z[i][0]) + exp(z[i][1]) + exp(z[i][2])) -
			z[i][y[i]];
	double sum = -1;
	uint32_t ok = 99;
	PT_TEST_OK(pti_model_eval(m, &sum, &ok, params, x, y, 4));
	PT_TEST_TRUE(ok == 2);
	PT_TEST_NEAR(sum, want, 1e-6);
	// An empty chunk adds nothing.
	PT_TEST_OK(pti_model_eval(m, &sum, &ok, params, x, y, 0));
	PT_TEST_TRUE(ok == 0 && sum == 0);
	pti_model_free(m);
}

// ---------------------------------------------------------------------
// Contracts
// ---------------------------------------------------------------------

static void test_model_grad_overwrites(void)
{
	fixture f;
	double loss, loss2;
	PT_TEST_OK(fixture_init(&f, "mlp:5,4", 7, 3, 4, 6));
	float *again = malloc(f.l.n_params * sizeof(float));
	for (uint64_t i = 0; i < f.l.n_params; i++)
		f.grad[i] = NAN;
	PT_TEST_OK(pti_model_grad(f.m, f.grad, &loss, f.params, f.x, f.y, 4));
	for (uint64_t i = 0; i < f.l.n_params; i++)
		PT_TEST_TRUE(isfinite(f.grad[i]));
	// A bigger batch in between leaves no trace in the next call.
	PT_TEST_OK(pti_model_grad(f.m, again, &loss2, f.params, f.x, f.y, 2));
	for (uint64_t i = 0; i < f.l.n_params; i++)
		again[i] = 1e9f;
	PT_TEST_OK(pti_model_grad(f.m, again, &loss2, f.params, f.x, f.y, 4));
	PT_TEST_TRUE(loss == loss2);
	PT_TEST_TRUE(memcmp(again, f.grad, f.l.n_params * 4) == 0);
	free(again);
	fixture_fini(&f);
}

static void test_model_batch_is_mean(void)
{
	fixture f;
	double l2, l4;
	PT_TEST_OK(fixture_init(&f, "mlp:5,4", 7, 3, 4, 8));
	float *g2 = malloc(f.l.n_params * sizeof(float));
	// Rows 2, 3 repeat rows 0, 1: the mean over 4 equals that over 2.
	memcpy(f.x + 2 * 7, f.x, 2 * 7 * sizeof(float));
	memcpy(f.y + 2, f.y, 2);
	PT_TEST_OK(pti_model_grad(f.m, g2, &l2, f.params, f.x, f.y, 2));
	PT_TEST_OK(pti_model_grad(f.m, f.grad, &l4, f.params, f.x, f.y, 4));
	PT_TEST_NEAR(l4, l2, 1e-6);
	for (uint64_t i = 0; i < f.l.n_params; i++)
		PT_TEST_NEAR(f.grad[i], g2[i], 1e-6);
	free(g2);
	fixture_fini(&f);
}

static void test_model_bad_args(void)
{
	fixture f;
	pti_model *m = NULL;
	double loss = -1;
	uint32_t ok = 7;
	PT_TEST_OK(fixture_init(&f, "mlp:5,4", 7, 3, 4, 9));
	PT_TEST_ERR(pti_model_alloc(&m, &f.l, 0), PT_EINVAL);
	PT_TEST_TRUE(m == NULL);
	PT_TEST_ERR(pti_model_grad(f.m, f.grad, &loss, f.params, f.x, f.y, 5),
	    PT_EINVAL);
	PT_TEST_ERR(pti_model_grad(f.m, f.grad, &loss, f.params, f.x, f.y, 0),
	    PT_EINVAL);
	PT_TEST_ERR(pti_model_eval(f.m, &loss, &ok, f.params, f.x, f.y, 5),
	    PT_EINVAL);
	for (uint64_t i = 0; i < f.l.n_params; i++)
		f.grad[i] = 42.0f;
	f.y[3] = 3;
	PT_TEST_ERR(pti_model_grad(f.m, f.grad, &loss, f.params, f.x, f.y, 4),
	    PT_EINVAL);
	PT_TEST_STR_HAS(pt_errmsg(PT_EINVAL), "label 3");
	PT_TEST_ERR(pti_model_eval(f.m, &loss, &ok, f.params, f.x, f.y, 4),
	    PT_EINVAL);
	PT_TEST_TRUE(loss == -1 && ok == 7);
	for (uint64_t i = 0; i < f.l.n_params; i++)
		PT_TEST_TRUE(f.grad[i] == 42.0f);
	pti_model_free(NULL);
	fixture_fini(&f);
}

// ---------------------------------------------------------------------
// Hooks
// ---------------------------------------------------------------------

// legacy_grad is pti_model_grad as it was before the hooks, kept here as
// the reference of its bits: each layer's gradient then its dz, last
// layer first, with two ping-pong buffers. The same pti_blas_sgemm calls.
static double legacy_grad(float *grad, const fixture *f)
{
	const pti_layout *l = &f->l;
	uint32_t L = l->n_layers, b = f->b, wide = 0;
	float *act[PT_MAX_LAYERS + 1] = {0};
	for (uint32_t i = 1; i <= L; i++) {
		act[i] = malloc((size_t)b * l->width[i] * sizeof(float));
		if (i < L && l->width[i] > wide)
			wide = l->width[i];
	}
	float *delta[2] = {malloc((size_t)b * (wide + 1) * sizeof(float)),
	    malloc((size_t)b * (wide + 1) * sizeof(float))};
	const float *params = f->params;
	for (uint32_t k = 0; k < L; k++) {
		uint32_t n_in = l->width[k], n_out = l->width[k + 1];
		const float *in = k == 0 ? f->x : act[k];
		float *z = act[k + 1];
		for (uint32_t i = 0; i < b; i++)
			memcpy(z + (size_t)i * n_out,
			    params + l->vars[2 * k + 1].off,
			    n_out * sizeof(float));
		pti_blas_sgemm(0, 0, b, n_out, n_in, 1.0f, in, n_in,
		    params + l->vars[2 * k].off, n_out, 1.0f, z, n_out);
		if (k + 1 < L)
			for (size_t i = 0; i < (size_t)b * n_out; i++)
				z[i] = z[i] > 0.0f ? z[i] : 0.0f;
	}
	uint32_t classes = l->width[L];
	double total = 0;
	for (uint32_t i = 0; i < b; i++) {
		float *z = act[L] + (size_t)i * classes;
		float mx = z[0];
		for (uint32_t j = 1; j < classes; j++)
			mx = z[j] > mx ? z[j] : mx;
		double zy = (double)z[f->y[i]] - mx, sum = 0;
		for (uint32_t j = 0; j < classes; j++) {
			z[j] = expf(z[j] - mx);
			sum += z[j];
		}
		total += log(sum) - zy;
		float scale = (float)(1.0 / (sum * b));
		for (uint32_t j = 0; j < classes; j++)
			z[j] *= scale;
		z[f->y[i]] -= 1.0f / (float)b;
	}
	float *dz = act[L];
	int next = 0;
	for (uint32_t k = L; k-- > 0;) {
		uint32_t n_in = l->width[k], n_out = l->width[k + 1];
		const float *in = k == 0 ? f->x : act[k];
		float *gb = grad + l->vars[2 * k + 1].off;
		pti_blas_sgemm(1, 0, n_in, n_out, b, 1.0f, in, n_in, dz, n_out,
		    0.0f, grad + l->vars[2 * k].off, n_out);
		memcpy(gb, dz, n_out * sizeof(float));
		for (uint32_t i = 1; i < b; i++)
			for (uint32_t j = 0; j < n_out; j++)
				gb[j] += dz[(size_t)i * n_out + j];
		if (k == 0)
			break;
		float *da = delta[next];
		pti_blas_sgemm(0, 1, b, n_in, n_out, 1.0f, dz, n_out,
		    params + l->vars[2 * k].off, n_out, 0.0f, da, n_in);
		for (size_t i = 0; i < (size_t)b * n_in; i++)
			da[i] = in[i] > 0.0f ? da[i] : 0.0f;
		dz = da;
		next ^= 1;
	}
	for (uint32_t i = 1; i <= L; i++)
		free(act[i]);
	free(delta[0]);
	free(delta[1]);
	return total / b;
}

// The shapes the hook tests run: small ones, three layers, one layer,
// and the real job's (mlp:256,128 on MNIST at batch 256, ~10 ms).
typedef struct shape {
	const char *spec;
	uint32_t dim, classes, b;
} shape;

static const shape shapes[] = {
    {"mlp:64,32", 200, 10, 16},
    {"mlp:6,5,4", 7, 3, 5},
    {"softmax", 200, 10, 16},
    {"mlp:256,128", 784, 10, 256},
};
#define N_SHAPES (sizeof(shapes) / sizeof(shapes[0]))

// n_blocks is how many pieces layer 0 comes in for `blocks`.
static uint32_t n_blocks(uint32_t rows, uint32_t blocks)
{
	uint32_t units = (rows + 47) / 48;
	return blocks < 1 ? 1 : blocks > units ? units : blocks;
}

// block_start is the first row of block i of `blocks` over rows, as
// model.h documents it (48-row units in shares of n, n-1, ..., 1).
static uint32_t block_start(uint32_t rows, uint32_t blocks, uint32_t i)
{
	uint64_t units = (rows + 47) / 48;
	uint64_t n = n_blocks(rows, blocks);
	if (i >= n)
		return rows;
	uint64_t share = 0; // n + (n - 1) + ... of the blocks before i
	for (uint64_t k = 0; k < i; k++)
		share += n - k;
	uint64_t c = units * share / (n * (n + 1) / 2);
	c = c < i ? i : c > units - (n - i) ? units - (n - i) : c;
	return c * 48 > rows ? rows : (uint32_t)(c * 48);
}

// blas_threads_now is OpenBLAS's thread count per call.
static int blas_threads_now(void)
{
	char core[64];
	return pti_blas_info(core, sizeof(core));
}

// hooked_grad runs pti_model_grad_hooked with only `blocks` set, into a
// grad poisoned with NaN first.
static int hooked_grad(fixture *f, float *g, double *loss, uint32_t blocks)
{
	pti_model_hooks hk = {.blocks = blocks};
	for (uint64_t i = 0; i < f->l.n_params; i++)
		g[i] = NAN;
	return pti_model_grad_hooked(f->m, g, loss, f->params, f->x, f->y,
	    f->b, &hk);
}

// same_bits_at checks one shape at the current BLAS thread count.
static void same_bits_at(const shape *s, uint64_t seed)
{
	fixture f;
	double want_loss, loss;
	PT_TEST_OK(fixture_init(&f, s->spec, s->dim, s->classes, s->b, seed));
	uint64_t n = f.l.n_params;
	size_t bytes = n * sizeof(float);
	float *want = malloc(bytes), *g = malloc(bytes);
	want_loss = legacy_grad(want, &f);

	PT_TEST_OK(pti_model_grad(f.m, f.grad, &loss, f.params, f.x, f.y, f.b));
	PT_TEST_TRUE(memcmp(f.grad, want, bytes) == 0 && loss == want_loss);
	for (uint64_t i = 0; i < n; i++)
		g[i] = NAN;
	PT_TEST_OK(pti_model_grad_hooked(f.m, g, &loss, f.params, f.x, f.y,
	    f.b, NULL));
	PT_TEST_TRUE(memcmp(g, want, bytes) == 0 && loss == want_loss);
	for (uint32_t blocks = 0; blocks <= 1; blocks++) {
		loss = -1;
		PT_TEST_OK(hooked_grad(&f, g, &loss, blocks));
		PT_TEST_TRUE(memcmp(g, want, bytes) == 0);
		PT_TEST_TRUE(loss == want_loss);
	}

	// Blocks: the same bits when the check says so; otherwise only w_0
	// may differ, and by float rounding.
	uint32_t rows = f.l.width[0], cols = f.l.width[1];
	uint64_t nw0 = (uint64_t)rows * cols;
	int exact = pti_model_blocks_exact(f.m, f.b, 4);
	PT_TEST_TRUE(exact == 0 || exact == 1);
	PT_TEST_OK(hooked_grad(&f, g, &loss, 4));
	PT_TEST_TRUE(loss == want_loss);
	int same = memcmp(g, want, bytes) == 0;
	fprintf(stderr, "  %s at %u rows, %d BLAS threads: blocks_exact %d, "
			"4 blocks %s\n",
	    s->spec, s->b, blas_threads_now(), exact,
	    same ? "identical" : "differ");
	if (exact == 1)
		PT_TEST_TRUE(same);
	size_t rest = (n - nw0) * sizeof(float);
	PT_TEST_TRUE(memcmp(g + nw0, want + nw0, rest) == 0);
	double top = 0;
	for (uint64_t i = 0; i < nw0; i++)
		top = fmax(top, fabs(want[i]));
	for (uint64_t i = 0; i < nw0; i++)
		if (!(fabs(g[i] - want[i]) <= 1e-5 * top)) {
			PT_TEST_FAIL_AT("%s: w0[%llu] = %g cut, %g in one",
			    s->spec, (unsigned long long)i, g[i], want[i]);
			break;
		}
	free(want);
	free(g);
	fixture_fini(&f);
}

static void test_model_hooked_same_bits(void)
{
	int threads = blas_threads_now();
	for (size_t s = 0; s < N_SHAPES; s++)
		same_bits_at(&shapes[s], 20 + s);
	// Another thread count cuts the products otherwise (on Haswell's
	// kernel the blocks then differ): still the same bits at blocks 1.
	PT_TEST_OK(pti_blas_threads(threads == 2 ? 1 : 2));
	same_bits_at(&shapes[0], 30);
	same_bits_at(&shapes[3], 33);
	PT_TEST_OK(pti_blas_threads(threads));
}

// A recorder of the hooks' calls. Each done copies its piece to got and
// poisons it in grad, so that a later write to it would show.
#define MAX_EVENTS 64
typedef struct hook_log {
	float *grad, *got;
	uint32_t ready[MAX_EVENTS], n_ready;
	uint64_t off[MAX_EVENTS], n[MAX_EVENTS];
	double loss[MAX_EVENTS];
	uint32_t n_done, ready_after_done;
	uint32_t fail_at; // ready fails at this layer (UINT32_MAX: never)
	int fail_code;
} hook_log;

static int log_ready(void *arg, uint32_t l)
{
	hook_log *h = arg;
	if (h->n_done > 0)
		h->ready_after_done++;
	if (h->n_ready < MAX_EVENTS)
		h->ready[h->n_ready++] = l;
	return l == h->fail_at ? h->fail_code : 0;
}

static void log_done(void *arg, uint64_t off, uint64_t n, double loss)
{
	hook_log *h = arg;
	if (h->n_done < MAX_EVENTS) {
		h->off[h->n_done] = off;
		h->n[h->n_done] = n;
		h->loss[h->n_done] = loss;
	}
	h->n_done++;
	memcpy(h->got + off, h->grad + off, n * sizeof(float));
	for (uint64_t i = 0; i < n; i++)
		h->grad[off + i] = NAN;
}

// order_check runs the hooked gradient of f with `blocks` and checks the
// calls: ready 0..L-1 first, then the pieces in order, tiling the vector.
static void order_check(fixture *f, uint32_t blocks)
{
	const pti_layout *l = &f->l;
	uint64_t np = l->n_params;
	float *want = malloc(np * sizeof(float));
	float *g = malloc(np * sizeof(float));
	float *got = malloc(np * sizeof(float));
	double want_loss = legacy_grad(want, f), loss;
	hook_log h = {.grad = g, .got = got, .fail_at = UINT32_MAX};
	pti_model_hooks hk = {log_ready, log_done, &h, blocks};
	for (uint64_t i = 0; i < np; i++)
		g[i] = got[i] = NAN;
	PT_TEST_OK(pti_model_grad_hooked(f->m, g, &loss, f->params, f->x, f->y,
	    f->b, &hk));
	uint32_t L = l->n_layers, rows = l->width[0], cols = l->width[1];
	uint32_t nb = n_blocks(rows, blocks);
	PT_TEST_TRUE(h.n_ready == L && h.ready_after_done == 0);
	for (uint32_t i = 0; i < h.n_ready; i++)
		PT_TEST_TRUE(h.ready[i] == i);
	if (h.n_done != nb + L - 1) {
		PT_TEST_FAIL_AT("%s, %u blocks: %u pieces, want %u", l->spec,
		    blocks, h.n_done, nb + L - 1);
		goto out;
	}
	// Layer 0: nb blocks of whole rows at the documented boundaries,
	// b_0 with the last; then one [w_l, b_l] piece per layer.
	for (uint32_t i = 0; i < nb; i++) {
		uint64_t r0 = block_start(rows, blocks, i);
		uint64_t r1 = block_start(rows, blocks, i + 1);
		uint64_t want_n = (r1 - r0) * cols + (i + 1 == nb ? cols : 0);
		PT_TEST_TRUE(r1 > r0);
		PT_TEST_TRUE(h.off[i] == l->vars[0].off + r0 * cols);
		PT_TEST_TRUE(h.n[i] == want_n);
	}
	for (uint32_t k = 1; k < L; k++) {
		PT_TEST_TRUE(h.off[nb + k - 1] == l->vars[2 * k].off);
		PT_TEST_TRUE(h.n[nb + k - 1] ==
			     l->vars[2 * k].n + l->vars[2 * k + 1].n);
	}
	// Ascending, no gap, no overlap, all of [0, n_params).
	uint64_t at = 0;
	for (uint32_t i = 0; i < h.n_done; i++) {
		PT_TEST_TRUE(h.off[i] == at && h.n[i] > 0);
		at = h.off[i] + h.n[i];
		PT_TEST_TRUE(h.loss[i] == want_loss);
	}
	PT_TEST_TRUE(at == np);
	// Every piece was final when handed over, and none was written
	// after: grad is still all poison.
	// (A cut w_0 may differ in its last bits where the check says so.)
	uint64_t nw0 = l->vars[0].n;
	int exact = pti_model_blocks_exact(f->m, f->b, blocks);
	PT_TEST_TRUE(memcmp(got + nw0, want + nw0,
			 (np - nw0) * sizeof(float)) == 0);
	if (exact == 1)
		PT_TEST_TRUE(memcmp(got, want, nw0 * sizeof(float)) == 0);
	for (uint64_t i = 0; i < np; i++)
		if (!isnan(g[i])) {
			PT_TEST_FAIL_AT("%s: grad[%llu] written after done",
			    l->spec, (unsigned long long)i);
			break;
		}
	PT_TEST_TRUE(loss == want_loss);
out:
	free(want);
	free(g);
	free(got);
}

static void test_model_hooked_order(void)
{
	fixture f;
	PT_TEST_OK(fixture_init(&f, "mlp:64,32", 200, 10, 16, 40));
	// 200 rows are 5 units of 48: 4 blocks of rows 0, 96, 144, 192.
	PT_TEST_TRUE(n_blocks(200, 4) == 4 && block_start(200, 4, 1) == 96 &&
		     block_start(200, 4, 3) == 192);
	uint32_t blocks[] = {0, 1, 2, 4, 5, 1000};
	for (size_t i = 0; i < sizeof(blocks) / sizeof(blocks[0]); i++)
		order_check(&f, blocks[i]);
	fixture_fini(&f);
	PT_TEST_OK(fixture_init(&f, "mlp:6,5,4", 7, 3, 5, 41));
	order_check(&f, 4); // 7 rows: one block
	fixture_fini(&f);
	PT_TEST_OK(fixture_init(&f, "softmax", 200, 10, 16, 42));
	order_check(&f, 4); // the only layer in blocks, b_0 with the last
	fixture_fini(&f);
	PT_TEST_OK(fixture_init(&f, "mlp:256,128", 784, 10, 256, 43));
	// The real shape: rows 0, 288, 528, 720 (the last block 64 rows).
	PT_TEST_TRUE(block_start(784, 4, 1) == 288 &&
		     block_start(784, 4, 2) == 528 &&
		     block_start(784, 4, 3) == 720);
	order_check(&f, 4);
	fixture_fini(&f);
}

// A params buffer that the hooks fill and poison: layer l's values are
// written in only at ready(l), and everything is NaN from the first done
// on. The gradient comes out right only if forward reads each layer
// after its ready and nothing reads params after the chain.
typedef struct param_gate {
	const pti_layout *l;
	float *params;       // what the model reads
	const float *values; // the true parameters
	int poisoned;
	float *grad;
	const float *want; // the reference gradient, for the first piece
	int first_final;
} param_gate;

static int gate_ready(void *arg, uint32_t k)
{
	param_gate *p = arg;
	uint64_t off = p->l->vars[2 * k].off;
	uint64_t n = p->l->vars[2 * k].n + p->l->vars[2 * k + 1].n;
	memcpy(p->params + off, p->values + off, n * sizeof(float));
	return 0;
}

static void gate_done(void *arg, uint64_t off, uint64_t n, double loss)
{
	param_gate *p = arg;
	(void)loss;
	if (!p->poisoned && memcmp(p->grad + off, p->want + off,
				n * sizeof(float)) == 0)
		p->first_final = 1;
	for (uint64_t i = 0; i < p->l->n_params; i++)
		p->params[i] = NAN;
	p->poisoned = 1;
}

// gate_check runs f's gradient with the gated params; with ready_fills
// set, params starts all NaN and ready fills each layer in.
static void gate_check(fixture *f, uint32_t blocks, int ready_fills)
{
	uint64_t np = f->l.n_params;
	float *want = malloc(np * sizeof(float));
	float *buf = malloc(np * sizeof(float));
	double want_loss = legacy_grad(want, f), loss;
	for (uint64_t i = 0; i < np; i++)
		buf[i] = ready_fills ? NAN : f->params[i];
	for (uint64_t i = 0; i < np; i++)
		f->grad[i] = NAN;
	param_gate p = {.l = &f->l, .params = buf, .values = f->params,
	    .grad = f->grad, .want = want};
	pti_model_hooks hk = {ready_fills ? gate_ready : NULL, gate_done, &p,
	    blocks};
	PT_TEST_OK(pti_model_grad_hooked(f->m, f->grad, &loss, buf, f->x, f->y,
	    f->b, &hk));
	PT_TEST_TRUE(p.poisoned && isnan(buf[0]) && isnan(buf[np - 1]));
	if (blocks <= 1 || pti_model_blocks_exact(f->m, f->b, blocks) == 1) {
		PT_TEST_TRUE(p.first_final);
		PT_TEST_TRUE(memcmp(f->grad, want, np * sizeof(float)) == 0);
	}
	for (uint64_t i = 0; i < np; i++)
		if (!isfinite(f->grad[i])) {
			PT_TEST_FAIL_AT("%s: grad[%llu] = %g", f->l.spec,
			    (unsigned long long)i, f->grad[i]);
			break;
		}
	PT_TEST_TRUE(loss == want_loss);
	free(want);
	free(buf);
}

static void test_model_hooked_params_unread_after_chain(void)
{
	fixture f;
	PT_TEST_OK(fixture_init(&f, "mlp:64,32", 200, 10, 16, 50));
	gate_check(&f, 1, 0);
	gate_check(&f, 4, 0);
	fixture_fini(&f);
	// Three layers: the chain reads w2 and w1, all before the first done.
	PT_TEST_OK(fixture_init(&f, "mlp:6,5,4", 7, 3, 5, 51));
	gate_check(&f, 1, 0);
	fixture_fini(&f);
}

static void test_model_hooked_ready_before_read(void)
{
	fixture f;
	PT_TEST_OK(fixture_init(&f, "mlp:64,32", 200, 10, 16, 52));
	gate_check(&f, 4, 1);
	fixture_fini(&f);
	PT_TEST_OK(fixture_init(&f, "mlp:6,5,4", 7, 3, 5, 53));
	gate_check(&f, 1, 1);
	fixture_fini(&f);
}

static void test_model_hooked_ready_error(void)
{
	fixture f;
	double loss = -1, want_loss;
	PT_TEST_OK(fixture_init(&f, "mlp:6,5,4", 7, 3, 5, 60));
	uint64_t np = f.l.n_params;
	float *want = malloc(np * sizeof(float));
	float *got = malloc(np * sizeof(float));
	want_loss = legacy_grad(want, &f);
	// Fails at layer 1, at layer 0, and at the last one.
	uint32_t at[] = {1, 0, 2};
	int code[] = {PT_ETIMEDOUT, PT_ECLOSED, PT_ETIMEDOUT};
	for (int t = 0; t < 3; t++) {
		hook_log h = {.grad = f.grad, .got = got, .fail_at = at[t],
		    .fail_code = code[t]};
		pti_model_hooks hk = {log_ready, log_done, &h, 4};
		PT_TEST_ERR(pti_model_grad_hooked(f.m, f.grad, &loss, f.params,
				f.x, f.y, f.b, &hk),
		    code[t]);
		PT_TEST_TRUE(h.n_done == 0);
		PT_TEST_TRUE(h.n_ready == at[t] + 1);
		PT_TEST_TRUE(loss == -1);
	}
	// Bad arguments: PT_EINVAL before any hook.
	hook_log h = {.grad = f.grad, .got = got, .fail_at = UINT32_MAX};
	pti_model_hooks hk = {log_ready, log_done, &h, 4};
	PT_TEST_ERR(pti_model_grad_hooked(f.m, f.grad, &loss, f.params, f.x,
			f.y, 0, &hk),
	    PT_EINVAL);
	PT_TEST_ERR(pti_model_grad_hooked(f.m, f.grad, &loss, f.params, f.x,
			f.y, 6, &hk),
	    PT_EINVAL);
	PT_TEST_TRUE(h.n_ready == 0 && h.n_done == 0);
	// An interrupted call leaves nothing behind for the next one.
	PT_TEST_OK(pti_model_grad_hooked(f.m, f.grad, &loss, f.params, f.x,
	    f.y, f.b, NULL));
	PT_TEST_TRUE(memcmp(f.grad, want, np * sizeof(float)) == 0);
	PT_TEST_TRUE(loss == want_loss);
	free(want);
	free(got);
	fixture_fini(&f);
}

// direct_exact is pti_model_blocks_exact done here: layer 0's gradient of
// f's shapes on this test's own data, one product against blocks.
static int direct_exact(const fixture *f, uint32_t blocks)
{
	uint32_t rows = f->l.width[0], cols = f->l.width[1], b = f->b;
	size_t nw = (size_t)rows * cols;
	float *dz = malloc((size_t)b * cols * sizeof(float));
	float *one = malloc(nw * sizeof(float));
	float *cut = malloc(nw * sizeof(float));
	pti_rng r;
	pti_rng_seed(&r, 77, rows);
	for (size_t i = 0; i < (size_t)b * cols; i++)
		dz[i] = (float)pti_rng_normal(&r);
	pti_blas_sgemm(1, 0, rows, cols, b, 1.0f, f->x, rows, dz, cols, 0.0f,
	    one, cols);
	uint32_t nb = n_blocks(rows, blocks);
	for (uint32_t i = 0; i < nb; i++) {
		uint32_t r0 = block_start(rows, blocks, i);
		uint32_t r1 = block_start(rows, blocks, i + 1);
		pti_blas_sgemm(1, 0, r1 - r0, cols, b, 1.0f, f->x + r0, rows,
		    dz, cols, 0.0f, cut + (size_t)r0 * cols, cols);
	}
	int same = memcmp(one, cut, nw * sizeof(float)) == 0;
	free(dz);
	free(one);
	free(cut);
	return same;
}

static void test_model_blocks_exact(void)
{
	char core[64];
	int threads = pti_blas_info(core, sizeof(core));
	for (int pass = 0; pass < 2; pass++) {
		if (pass == 1)
			PT_TEST_OK(pti_blas_threads(threads == 2 ? 1 : 2));
		for (size_t s = 0; s < N_SHAPES; s++) {
			const shape *sh = &shapes[s];
			fixture f;
			PT_TEST_OK(fixture_init(&f, sh->spec, sh->dim,
			    sh->classes, sh->b, 70 + s));
			uint32_t blocks[] = {0, 1, 3, 4, 16};
			for (int i = 0; i < 5; i++) {
				int got = pti_model_blocks_exact(f.m, f.b,
				    blocks[i]);
				int want = direct_exact(&f, blocks[i]);
				PT_TEST_TRUE(got == want);
				if (blocks[i] == 4)
					fprintf(stderr,
					    "  %s, %s, %d threads, batch %u, "
					    "4 blocks: %d\n",
					    core, sh->spec, blas_threads_now(),
					    sh->b, got);
			}
			// One block: nothing to compare.
			PT_TEST_TRUE(pti_model_blocks_exact(f.m, f.b, 1) == 1);
			PT_TEST_TRUE(pti_model_blocks_exact(f.m, f.b, 0) == 1);
			PT_TEST_TRUE(pti_model_blocks_exact(f.m, 0, 4) ==
				     -PT_EINVAL);
			PT_TEST_TRUE(pti_model_blocks_exact(f.m, f.b + 1, 4) ==
				     -PT_EINVAL);
			fixture_fini(&f);
		}
	}
	PT_TEST_OK(pti_blas_threads(threads));
}

// ---------------------------------------------------------------------
// Learning
// ---------------------------------------------------------------------

static void test_model_sgd_lowers_loss(void)
{
	const char *specs[] = {"softmax", "mlp:5,4"};
	for (int s = 0; s < 2; s++) {
		fixture f;
		double first = 0, loss = 0, sum;
		uint32_t ok;
		PT_TEST_OK(fixture_init(&f, specs[s], 7, 3, 30, 12));
		// Three tight clusters around 2 e_k: linearly separable.
		pti_rng r;
		pti_rng_seed(&r, 12, 7);
		for (uint32_t i = 0; i < 30; i++) {
			f.y[i] = (uint8_t)(i % 3);
			for (uint32_t j = 0; j < 7; j++)
				f.x[i * 7 + j] = (float)(0.3 *
				    pti_rng_normal(&r) + 2.0 * (j == f.y[i]));
		}
		for (int step = 0; step < 100; step++) {
			PT_TEST_OK(pti_model_grad(f.m, f.grad, &loss, f.params,
			    f.x, f.y, 30));
			if (step == 0)
				first = loss;
			for (uint64_t i = 0; i < f.l.n_params; i++)
				f.params[i] -= 0.5f * f.grad[i];
		}
		PT_TEST_OK(pti_model_eval(f.m, &sum, &ok, f.params, f.x, f.y,
		    30));
		PT_TEST_TRUE(first > 0.5);
		PT_TEST_TRUE(sum / 30 < 0.1 * first);
		PT_TEST_TRUE(ok == 30);
		fixture_fini(&f);
	}
}

// ---------------------------------------------------------------------
// CNN
// ---------------------------------------------------------------------

// The CNN fixtures: an 8x8 image through two layers (8 -> 4 -> 2), three
// layers down to 1x1, odd sides (7 -> 3 -> 1, floor), a batch of more
// images than one chunk of patches (16), and hidden dense layers.
typedef struct cnn_shape {
	const char *spec;
	uint32_t dim, b;
} cnn_shape;

static const cnn_shape cnn_shapes[] = {
    {"cnn:2,3", 64, 3},
    {"cnn:2,2,3", 64, 3},
    {"cnn:3,2", 49, 4},
    {"cnn:2", 36, 21},
    {"cnn:2,3/5", 64, 3}, // hidden dense layers
    {"cnn:2/4,3", 36, 17},
};
#define N_CNN_SHAPES (sizeof(cnn_shapes) / sizeof(cnn_shapes[0]))

static void test_model_cnn_loss_matches_reference(void)
{
	for (size_t s = 0; s < N_CNN_SHAPES; s++) {
		const cnn_shape *c = &cnn_shapes[s];
		fixture f;
		double loss, sum;
		uint32_t ok;
		PT_TEST_OK(fixture_init(&f, c->spec, c->dim, 3, c->b, 80 + s));
		PT_TEST_OK(pti_model_grad(f.m, f.grad, &loss, f.params, f.x,
		    f.y, f.b));
		PT_TEST_OK(pti_model_eval(f.m, &sum, &ok, f.params, f.x, f.y,
		    f.b));
		double want = cnn_ref_loss(&f, NULL);
		fprintf(stderr, "  %s on %u: loss %.6f, reference %.6f\n",
		    c->spec, c->dim, loss, want);
		PT_TEST_NEAR(loss, want, 1e-5 * want);
		PT_TEST_NEAR(sum, f.b * loss, 1e-9 * f.b);
		PT_TEST_TRUE(ok <= f.b);
		fixture_fini(&f);
	}
	// Not a loss that any model of these shapes gives: a moved weight
	// moves both the same way. w0's top-left tap of channel 0 (row 0)
	// matters here unlike the bottom-right one only at the padding.
	fixture f;
	double before, after;
	PT_TEST_OK(fixture_init(&f, "cnn:2,3", 64, 3, 3, 86));
	before = cnn_ref_loss(&f, NULL);
	f.params[f.l.vars[0].off] += 0.5f;
	after = cnn_ref_loss(&f, NULL);
	PT_TEST_TRUE(fabs(after - before) > 1e-4);
	PT_TEST_NEAR(mean_loss(&f), after, 1e-5 * after);
	fixture_fini(&f);
}

static void test_model_cnn_grad_check(void)
{
	for (size_t s = 0; s < N_CNN_SHAPES; s++)
		check_spec_at(cnn_shapes[s].spec, cnn_shapes[s].dim,
		    cnn_shapes[s].b, 90 + s);
}

static void test_model_cnn_grad_check_catches_errors(void)
{
	catches_errors("cnn:2,3", 64, 3, 90);
}

// A layer's range in the flat vector, [w_k, b_k].
static void layer_range(const pti_layout *l, uint32_t k, uint64_t *off,
    uint64_t *n)
{
	*off = l->vars[2 * k].off;
	*n = l->vars[2 * k].n + l->vars[2 * k + 1].n;
}

// The gradient predicts the loss along itself: a step of -eps g lowers
// the model's own (float) loss by eps |g|^2 to first order, here over a
// step of length 1e-2 that crosses kinks but is dominated by the smooth
// part; and each layer's piece g_k alone predicts the reference loss's
// slope |g_k|^2 along it, so a backward term wrong in a small conv layer
// is not drowned out by the dense layer's larger gradient.
static void test_model_cnn_predicts_loss(void)
{
	for (size_t s = 0; s < N_CNN_SHAPES; s++) {
		const cnn_shape *c = &cnn_shapes[s];
		fixture f;
		double loss;
		// Seeds where no ReLU or max-pool kink lies within these
		// steps along -g (at 100 + s one does, for cnn:2,3/5's
		// hidden dense layer; its gradient checks coordinate by
		// coordinate in test_model_cnn_grad_check).
		PT_TEST_OK(fixture_init(&f, c->spec, c->dim, 3, c->b, 200 + s));
		PT_TEST_OK(pti_model_grad(f.m, f.grad, &loss, f.params, f.x,
		    f.y, f.b));
		uint64_t np = f.l.n_params;
		float *keep = malloc(np * sizeof(float));
		memcpy(keep, f.params, np * sizeof(float));
		double g2 = 0;
		for (uint64_t i = 0; i < np; i++)
			g2 += (double)f.grad[i] * f.grad[i];
		double eps = 1e-2 / sqrt(g2); // a step of length 1e-2
		for (uint64_t i = 0; i < np; i++)
			f.params[i] = keep[i] - (float)(eps * f.grad[i]);
		double lo = mean_loss(&f);
		for (uint64_t i = 0; i < np; i++)
			f.params[i] = keep[i] + (float)(eps * f.grad[i]);
		double hi = mean_loss(&f);
		double want = 2 * eps * g2, got = hi - lo;
		fprintf(stderr, "  %s: along -g %.4g, predicted %.4g\n",
		    c->spec, got, want);
		PT_TEST_NEAR(got, want, 0.02 * want);
		// Each layer alone along its own -g_k, on the reference: a
		// layer's gradient wrong by a term shows in its own line.
		memcpy(f.params, keep, np * sizeof(float));
		double *d = calloc(np, sizeof(double));
		for (uint32_t k = 0; k < f.l.n_layers; k++) {
			uint64_t off, n;
			layer_range(&f.l, k, &off, &n);
			double gk = 0;
			for (uint64_t j = off; j < off + n; j++)
				gk += (double)f.grad[j] * f.grad[j];
			double e = CNN_STEP / sqrt(gk);
			for (uint64_t j = off; j < off + n; j++)
				d[j] = e * f.grad[j];
			hi = cnn_ref_loss(&f, d);
			for (uint64_t j = off; j < off + n; j++)
				d[j] = -e * f.grad[j];
			lo = cnn_ref_loss(&f, d);
			for (uint64_t j = off; j < off + n; j++)
				d[j] = 0;
			got = (hi - lo) / (2 * e);
			if (!(fabs(got - gk) <= CNN_TOL * gk))
				PT_TEST_FAIL_AT("%s: along -g of layer %u: "
						"%.6g, predicted %.6g",
				    c->spec, k, got, gk);
		}
		free(d);
		free(keep);
		fixture_fini(&f);
	}
}

static void test_model_cnn_eval_hand_case(void)
{
	pti_layout l;
	pti_model *m;
	// cnn:1 on 4x4 images into 4 classes: the conv passes the centre
	// tap through, the pool keeps each 2x2 quadrant's largest (ReLU'd)
	// pixel, and the dense layer is the identity: logit k is quadrant
	// k's maximum, quadrants in row-major order.
	PT_TEST_OK(pti_layout_init(&l, "cnn:1", 16, 4));
	PT_TEST_TRUE(l.n_params == 10 + 20);
	PT_TEST_OK(pti_model_alloc(&m, &l, 8));
	float params[30] = {0};
	params[4] = 1; // w0 row 4: (ky, kx) = (1, 1), the centre
	for (int k = 0; k < 4; k++)
		params[10 + 4 * k + k] = 1; // w1 (4, 4) = I, b1 = 0
	float x[5 * 16] = {0};
	const uint8_t y[5] = {0, 3, 1, 2, 2};
	// Row 0: pixel (0, 1) in quadrant 0; row 1: (3, 3) in 3; row 2:
	// (1, 2) in 1; row 3: (2, 0) in 2 but the label is 2 and (0, 3) of
	// quadrant 1 is brighter; row 4: only negative pixels, all logits 0
	// (a tie: class 0 predicted, the label is 2).
	x[0 * 16 + 1] = 2;
	x[1 * 16 + 15] = 3;
	x[2 * 16 + 6] = 1;
	x[3 * 16 + 8] = 1;
	x[3 * 16 + 3] = 2;
	for (int j = 0; j < 16; j++)
		x[4 * 16 + j] = -1;
	const double z[5][4] = {{2, 0, 0, 0}, {0, 0, 0, 3}, {0, 1, 0, 0},
	    {0, 2, 1, 0}, {0, 0, 0, 0}};
	double want = 0;
	for (int i = 0; i < 5; i++)
		want += log(exp(z[i][0]) + exp(z[i][1]) + exp(z[i][2]) +
			    exp(z[i][3])) -
			z[i][y[i]];
	double sum = -1;
	uint32_t ok = 99;
	PT_TEST_OK(pti_model_eval(m, &sum, &ok, params, x, y, 5));
	PT_TEST_TRUE(ok == 3);
	PT_TEST_NEAR(sum, want, 1e-6);
	PT_TEST_OK(pti_model_eval(m, &sum, &ok, params, x, y, 0));
	PT_TEST_TRUE(ok == 0 && sum == 0);
	pti_model_free(m);
}

// cnn_hooked runs f's hooked gradient into g (poisoned first).
static int cnn_hooked(fixture *f, float *g, double *loss,
    const pti_model_hooks *hk)
{
	for (uint64_t i = 0; i < f->l.n_params; i++)
		g[i] = NAN;
	return pti_model_grad_hooked(f->m, g, loss, f->params, f->x, f->y,
	    f->b, hk);
}

static void test_model_cnn_same_bits(void)
{
	for (size_t s = 0; s < N_CNN_SHAPES; s++) {
		const cnn_shape *c = &cnn_shapes[s];
		fixture f;
		double want_loss, loss;
		PT_TEST_OK(fixture_init(&f, c->spec, c->dim, 3, c->b, 110 + s));
		uint64_t np = f.l.n_params;
		size_t bytes = np * sizeof(float);
		float *g = malloc(bytes);
		PT_TEST_OK(pti_model_grad(f.m, f.grad, &want_loss, f.params,
		    f.x, f.y, f.b));
		// Again, after a smaller batch in between.
		PT_TEST_OK(pti_model_grad(f.m, g, &loss, f.params, f.x, f.y, 1));
		PT_TEST_OK(cnn_hooked(&f, g, &loss, NULL));
		PT_TEST_TRUE(memcmp(g, f.grad, bytes) == 0);
		PT_TEST_TRUE(loss == want_loss);
		// Blocks are ignored: one piece per layer, the same bits.
		PT_TEST_TRUE(pti_model_blocks_exact(f.m, f.b, 4) == 1);
		PT_TEST_TRUE(pti_model_blocks_exact(f.m, 0, 4) == -PT_EINVAL);
		for (uint32_t blocks = 0; blocks <= 4; blocks += 2) {
			pti_model_hooks hk = {.blocks = blocks};
			PT_TEST_OK(cnn_hooked(&f, g, &loss, &hk));
			PT_TEST_TRUE(memcmp(g, f.grad, bytes) == 0);
			PT_TEST_TRUE(loss == want_loss);
		}
		// Another model of more scratch: the same bits.
		pti_model *big;
		PT_TEST_OK(pti_model_alloc(&big, &f.l, 3 * f.b));
		PT_TEST_OK(pti_model_grad(big, g, &loss, f.params, f.x, f.y,
		    f.b));
		PT_TEST_TRUE(memcmp(g, f.grad, bytes) == 0);
		PT_TEST_TRUE(loss == want_loss);
		pti_model_free(big);
		free(g);
		fixture_fini(&f);
	}
}

static void test_model_cnn_hooked_order(void)
{
	for (size_t s = 0; s < N_CNN_SHAPES; s++) {
		const cnn_shape *c = &cnn_shapes[s];
		fixture f;
		double want_loss, loss;
		PT_TEST_OK(fixture_init(&f, c->spec, c->dim, 3, c->b, 120 + s));
		const pti_layout *l = &f.l;
		uint64_t np = l->n_params;
		float *g = malloc(np * sizeof(float));
		float *got = malloc(np * sizeof(float));
		PT_TEST_OK(pti_model_grad(f.m, f.grad, &want_loss, f.params,
		    f.x, f.y, f.b));
		for (uint64_t i = 0; i < np; i++)
			got[i] = NAN;
		hook_log h = {.grad = g, .got = got, .fail_at = UINT32_MAX};
		pti_model_hooks hk = {log_ready, log_done, &h, 4};
		PT_TEST_OK(cnn_hooked(&f, g, &loss, &hk));
		uint32_t L = l->n_layers;
		PT_TEST_TRUE(h.n_ready == L && h.ready_after_done == 0);
		for (uint32_t i = 0; i < h.n_ready; i++)
			PT_TEST_TRUE(h.ready[i] == i);
		// One [w_k, b_k] piece per layer, ascending, tiling it all.
		PT_TEST_TRUE(h.n_done == L);
		for (uint32_t k = 0; k < L && k < h.n_done; k++) {
			uint64_t off, n;
			layer_range(l, k, &off, &n);
			PT_TEST_TRUE(h.off[k] == off && h.n[k] == n);
			PT_TEST_TRUE(h.loss[k] == want_loss);
		}
		PT_TEST_TRUE(h.off[L - 1] + h.n[L - 1] == np);
		// Final when handed over, and never written after.
		PT_TEST_TRUE(memcmp(got, f.grad, np * sizeof(float)) == 0);
		for (uint64_t i = 0; i < np; i++)
			if (!isnan(g[i])) {
				PT_TEST_FAIL_AT("%s: grad[%llu] written after "
						"done",
				    c->spec, (unsigned long long)i);
				break;
			}
		PT_TEST_TRUE(loss == want_loss);
		// ready's error stops it at once, before any piece.
		for (uint32_t at = 0; at < L; at++) {
			hook_log e = {.grad = g, .got = got, .fail_at = at,
			    .fail_code = PT_ETIMEDOUT};
			pti_model_hooks ek = {log_ready, log_done, &e, 1};
			PT_TEST_ERR(cnn_hooked(&f, g, &loss, &ek),
			    PT_ETIMEDOUT);
			PT_TEST_TRUE(e.n_ready == at + 1 && e.n_done == 0);
		}
		free(g);
		free(got);
		fixture_fini(&f);
	}
}

// Params filled in only at ready(k) and poisoned from the first done on:
// the gradient comes out the same only if forward reads each layer after
// its ready and nothing reads params after the chain.
static void test_model_cnn_hooked_params_gated(void)
{
	for (size_t s = 0; s < N_CNN_SHAPES; s++) {
		const cnn_shape *c = &cnn_shapes[s];
		fixture f;
		double want_loss, loss;
		PT_TEST_OK(fixture_init(&f, c->spec, c->dim, 3, c->b, 130 + s));
		uint64_t np = f.l.n_params;
		float *want = malloc(np * sizeof(float));
		float *buf = malloc(np * sizeof(float));
		PT_TEST_OK(pti_model_grad(f.m, want, &want_loss, f.params, f.x,
		    f.y, f.b));
		for (uint64_t i = 0; i < np; i++)
			buf[i] = NAN;
		param_gate p = {.l = &f.l, .params = buf, .values = f.params,
		    .grad = f.grad, .want = want};
		pti_model_hooks hk = {gate_ready, gate_done, &p, 1};
		PT_TEST_OK(cnn_hooked(&f, f.grad, &loss, &hk));
		PT_TEST_TRUE(p.poisoned && p.first_final);
		PT_TEST_TRUE(memcmp(f.grad, want, np * sizeof(float)) == 0);
		PT_TEST_TRUE(loss == want_loss);
		free(want);
		free(buf);
		fixture_fini(&f);
	}
}

static void test_model_cnn_bad_args(void)
{
	fixture f;
	double loss = -1;
	uint32_t ok = 7;
	PT_TEST_OK(fixture_init(&f, "cnn:2,3", 64, 3, 3, 140));
	PT_TEST_ERR(pti_model_grad(f.m, f.grad, &loss, f.params, f.x, f.y, 4),
	    PT_EINVAL);
	PT_TEST_ERR(pti_model_grad(f.m, f.grad, &loss, f.params, f.x, f.y, 0),
	    PT_EINVAL);
	PT_TEST_ERR(pti_model_eval(f.m, &loss, &ok, f.params, f.x, f.y, 4),
	    PT_EINVAL);
	for (uint64_t i = 0; i < f.l.n_params; i++)
		f.grad[i] = 42.0f;
	f.y[2] = 3;
	PT_TEST_ERR(pti_model_grad(f.m, f.grad, &loss, f.params, f.x, f.y, 3),
	    PT_EINVAL);
	PT_TEST_STR_HAS(pt_errmsg(PT_EINVAL), "label 3");
	PT_TEST_ERR(pti_model_eval(f.m, &loss, &ok, f.params, f.x, f.y, 3),
	    PT_EINVAL);
	PT_TEST_TRUE(loss == -1 && ok == 7);
	for (uint64_t i = 0; i < f.l.n_params; i++)
		PT_TEST_TRUE(f.grad[i] == 42.0f);
	// A layout whose variables are not the spec's is refused.
	pti_layout bad = f.l;
	pti_model *m = NULL;
	bad.vars[1].off += 1;
	PT_TEST_ERR(pti_model_alloc(&m, &bad, 4), PT_EINVAL);
	PT_TEST_TRUE(m == NULL);
	fixture_fini(&f);
}

static void test_model_cnn_sgd_lowers_loss(void)
{
	// 8x8 images, a bright 2x2 blob in quadrant k is class k (4
	// classes) over noise: the pooling must carry where it was.
	fixture f;
	double first = 0, loss = 0, sum;
	uint32_t ok, b = 32;
	PT_TEST_OK(fixture_init(&f, "cnn:4,4", 64, 4, b, 150));
	pti_rng r;
	pti_rng_seed(&r, 150, 8);
	for (uint32_t i = 0; i < b; i++) {
		uint32_t k = i % 4, y0 = 4 * (k / 2), x0 = 4 * (k % 2);
		uint32_t dy = (uint32_t)pti_rng_below(&r, 3);
		uint32_t dx = (uint32_t)pti_rng_below(&r, 3);
		f.y[i] = (uint8_t)k;
		for (uint32_t j = 0; j < 64; j++)
			f.x[i * 64 + j] = (float)(0.2 * pti_rng_normal(&r));
		for (uint32_t t = 0; t < 4; t++)
			f.x[i * 64 + (y0 + dy + t / 2) * 8 + x0 + dx + t % 2] +=
			    2.0f;
	}
	for (int step = 0; step < 200; step++) {
		PT_TEST_OK(pti_model_grad(f.m, f.grad, &loss, f.params, f.x,
		    f.y, b));
		if (step == 0)
			first = loss;
		for (uint64_t i = 0; i < f.l.n_params; i++)
			f.params[i] -= 0.3f * f.grad[i];
	}
	PT_TEST_OK(pti_model_eval(f.m, &sum, &ok, f.params, f.x, f.y, b));
	fprintf(stderr, "  cnn:4,4: loss %.4f -> %.4f, %u of %u right\n",
	    first, sum / b, ok, b);
	PT_TEST_TRUE(first > 1.0);
	PT_TEST_TRUE(sum / b < 0.1 * first);
	PT_TEST_TRUE(ok == b);
	fixture_fini(&f);
}

static const pti_test_case cases[] = {
    {"test_model_grad_check_softmax", test_model_grad_check_softmax},
    {"test_model_grad_check_mlp", test_model_grad_check_mlp},
    {"test_model_grad_check_catches_errors",
	test_model_grad_check_catches_errors},
    {"test_model_loss_matches_reference", test_model_loss_matches_reference},
    {"test_model_uniform_loss_is_log_classes",
	test_model_uniform_loss_is_log_classes},
    {"test_model_eval_hand_case", test_model_eval_hand_case},
    {"test_model_grad_overwrites", test_model_grad_overwrites},
    {"test_model_batch_is_mean", test_model_batch_is_mean},
    {"test_model_bad_args", test_model_bad_args},
    {"test_model_sgd_lowers_loss", test_model_sgd_lowers_loss},
    {"test_model_hooked_same_bits", test_model_hooked_same_bits},
    {"test_model_hooked_order", test_model_hooked_order},
    {"test_model_hooked_params_unread_after_chain",
	test_model_hooked_params_unread_after_chain},
    {"test_model_hooked_ready_before_read",
	test_model_hooked_ready_before_read},
    {"test_model_hooked_ready_error", test_model_hooked_ready_error},
    {"test_model_blocks_exact", test_model_blocks_exact},
    {"test_model_cnn_loss_matches_reference",
	test_model_cnn_loss_matches_reference},
    {"test_model_cnn_grad_check", test_model_cnn_grad_check},
    {"test_model_cnn_grad_check_catches_errors",
	test_model_cnn_grad_check_catches_errors},
    {"test_model_cnn_predicts_loss", test_model_cnn_predicts_loss},
    {"test_model_cnn_eval_hand_case", test_model_cnn_eval_hand_case},
    {"test_model_cnn_same_bits", test_model_cnn_same_bits},
    {"test_model_cnn_hooked_order", test_model_cnn_hooked_order},
    {"test_model_cnn_hooked_params_gated",
	test_model_cnn_hooked_params_gated},
    {"test_model_cnn_bad_args", test_model_cnn_bad_args},
    {"test_model_cnn_sgd_lowers_loss", test_model_cnn_sgd_lowers_loss},
    {NULL, NULL},
};

int main(int argc, char **argv)
{
	return pti_test_main(argc, argv, cases);
}
