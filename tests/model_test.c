// tests/model_test.c - the model's backward pass against central finite
// differences of its forward pass, the loss against a plain double
// reference, hand-made cases, argument errors, and SGD that learns.
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "layout.h"
#include "model.h"
#include "rng.h"
#include "test.h"

#define GRAD_TOL 1e-2 // largest relative error the gradient check allows
// The finite-difference step: float rounding of the loss (~1e-7) is then
// ~1e-4 of the difference, and no ReLU input of these seeded fixtures
// crosses zero within it (at 1e-2 one in mlp:6,5,4 does).
#define GRAD_STEP 3e-3f

// ---------------------------------------------------------------------
// Fixtures
// ---------------------------------------------------------------------

typedef struct fixture {
	pt_layout l;
	pt_model *m;
	uint32_t b;
	float *params, *grad; // (n_params)
	float *x;             // (b, width[0])
	uint8_t *y;           // (b)
} fixture;

// fixture_init builds spec on dim inputs and classes outputs with params
// from pt_layout_init_values and b random normal examples.
static int fixture_init(fixture *f, const char *spec, uint32_t dim,
    uint32_t classes, uint32_t b, uint64_t seed)
{
	memset(f, 0, sizeof(*f));
	int rv = pt_layout_init(&f->l, spec, dim, classes);
	if (rv != 0 || (rv = pt_model_alloc(&f->m, &f->l, b)) != 0)
		return rv;
	f->b = b;
	f->params = malloc(f->l.n_params * sizeof(float));
	f->grad = malloc(f->l.n_params * sizeof(float));
	f->x = malloc((size_t)b * dim * sizeof(float));
	f->y = malloc(b);
	if (!f->params || !f->grad || !f->x || !f->y)
		return PT_ENOMEM;
	pt_layout_init_values(f->params, &f->l, seed, 0, f->l.n_params);
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
	pt_model_free(f->m);
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
	PT_TEST_OK(pt_model_eval(f->m, &sum, &ok, f->params, f->x, f->y,
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

static void check_spec(const char *spec, uint32_t b, uint64_t seed)
{
	fixture f;
	double loss;
	uint64_t at;
	PT_TEST_OK(fixture_init(&f, spec, 7, 3, b, seed));
	double *fd = malloc(f.l.n_params * sizeof(double));
	PT_TEST_OK(pt_model_grad(f.m, f.grad, &loss, f.params, f.x, f.y, b));
	fd_grad(fd, &f, GRAD_STEP);
	double e = grad_check(f.grad, fd, f.l.n_params, &at);
	fprintf(stderr, "  %s: %llu params, max rel error %.3g at %llu\n",
	    spec, (unsigned long long)f.l.n_params, e,
	    (unsigned long long)at);
	if (!(e < GRAD_TOL))
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

static void test_model_grad_check_softmax(void)
{
	check_spec("softmax", 4, 1);
}

static void test_model_grad_check_mlp(void)
{
	check_spec("mlp:5,4", 4, 2);
	check_spec("mlp:3", 4, 3);
	check_spec("mlp:6,5,4", 5, 4); // both scratch buffers, reused
}

static void test_model_grad_check_catches_errors(void)
{
	fixture f;
	double loss;
	uint64_t at;
	PT_TEST_OK(fixture_init(&f, "mlp:5,4", 7, 3, 4, 2));
	double *fd = malloc(f.l.n_params * sizeof(double));
	PT_TEST_OK(pt_model_grad(f.m, f.grad, &loss, f.params, f.x, f.y, 4));
	fd_grad(fd, &f, GRAD_STEP);
	PT_TEST_TRUE(grad_check(f.grad, fd, f.l.n_params, &at) < GRAD_TOL);
	// A 5% slip in any one entry of any variable must show.
	for (uint32_t v = 0; v < f.l.n_vars; v++) {
		const pt_var *var = &f.l.vars[v];
		for (uint64_t i = var->off; i < var->off + var->n; i++) {
			float keep = f.grad[i];
			f.grad[i] += 0.05f * fabsf(keep) + 1e-3f;
			double e = grad_check(f.grad, fd, f.l.n_params, &at);
			if (!(e >= GRAD_TOL && at == i))
				PT_TEST_FAIL_AT("%s[%llu] slipped, error %g",
				    var->name,
				    (unsigned long long)(i - var->off), e);
			f.grad[i] = keep;
		}
	}
	// So must a gradient of the sum instead of the mean, or a flipped
	// sign.
	for (uint64_t i = 0; i < f.l.n_params; i++)
		f.grad[i] *= 4;
	PT_TEST_TRUE(grad_check(f.grad, fd, f.l.n_params, &at) > 0.5);
	for (uint64_t i = 0; i < f.l.n_params; i++)
		f.grad[i] *= -0.25f;
	PT_TEST_TRUE(grad_check(f.grad, fd, f.l.n_params, &at) > 1);
	free(fd);
	fixture_fini(&f);
}

// ---------------------------------------------------------------------
// Forward values
// ---------------------------------------------------------------------

// ref_loss is the mean loss of f's batch computed in double by plain
// loops, straight from the definitions.
static double ref_loss(const fixture *f)
{
	const pt_layout *l = &f->l;
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
		PT_TEST_OK(pt_model_grad(f.m, f.grad, &loss, f.params, f.x,
		    f.y, 6));
		PT_TEST_OK(pt_model_eval(f.m, &sum, &ok, f.params, f.x, f.y,
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
		PT_TEST_OK(pt_model_grad(f.m, f.grad, &loss, f.params, f.x,
		    f.y, 4));
		PT_TEST_NEAR(loss, log(10.0), 1e-6);
		// Output bias gradient: mean over rows of 1/C - onehot.
		const pt_var *bo = &f.l.vars[f.l.n_vars - 1];
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
	PT_TEST_OK(pt_model_grad(f.m, f.grad, &loss, f.params, f.x, f.y, 4));
	PT_TEST_NEAR(loss, log(3.0), 1e-6);
	fixture_fini(&f);
}

static void test_model_eval_hand_case(void)
{
	pt_layout l;
	pt_model *m;
	PT_TEST_OK(pt_layout_init(&l, "softmax", 2, 3));
	PT_TEST_OK(pt_model_alloc(&m, &l, 8));
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
	PT_TEST_OK(pt_model_eval(m, &sum, &ok, params, x, y, 4));
	PT_TEST_TRUE(ok == 2);
	PT_TEST_NEAR(sum, want, 1e-6);
	// An empty chunk adds nothing.
	PT_TEST_OK(pt_model_eval(m, &sum, &ok, params, x, y, 0));
	PT_TEST_TRUE(ok == 0 && sum == 0);
	pt_model_free(m);
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
	PT_TEST_OK(pt_model_grad(f.m, f.grad, &loss, f.params, f.x, f.y, 4));
	for (uint64_t i = 0; i < f.l.n_params; i++)
		PT_TEST_TRUE(isfinite(f.grad[i]));
	// A bigger batch in between leaves no trace in the next call.
	PT_TEST_OK(pt_model_grad(f.m, again, &loss2, f.params, f.x, f.y, 2));
	for (uint64_t i = 0; i < f.l.n_params; i++)
		again[i] = 1e9f;
	PT_TEST_OK(pt_model_grad(f.m, again, &loss2, f.params, f.x, f.y, 4));
	PT_TEST_TRUE(loss == loss2);
	PT_TEST_TRUE(memcmp(again, f.grad, f.l.n_params * 4) == 0);
	free(again);
	fixture_fini(&f);
}

// pt_model_grad_layers: the same gradient and loss as pt_model_grad, and
// each layer handed over once, last first, with its range already final.
typedef struct seen_layers {
	const float *grad, *want;
	const pt_layout *l;
	uint32_t order[PT_MAX_LAYERS], n;
	int ranges_final;
} seen_layers;

static void seen_layer(void *arg, uint32_t l, double loss)
{
	seen_layers *s = arg;
	(void)loss;
	s->order[s->n++] = l;
	uint64_t off = s->l->vars[2 * l].off;
	uint64_t n = s->l->vars[2 * l].n + s->l->vars[2 * l + 1].n;
	if (memcmp(s->grad + off, s->want + off, n * sizeof(float)) != 0)
		s->ranges_final = 0;
}

static void test_model_grad_layers_same(void)
{
	fixture f;
	double loss, loss2;
	PT_TEST_OK(fixture_init(&f, "mlp:5,4", 7, 3, 4, 6));
	PT_TEST_OK(pt_model_grad(f.m, f.grad, &loss, f.params, f.x, f.y, 4));
	float *g = malloc(f.l.n_params * sizeof(float));
	for (uint64_t i = 0; i < f.l.n_params; i++)
		g[i] = NAN;
	seen_layers s = {.grad = g, .want = f.grad, .l = &f.l,
	    .ranges_final = 1};
	PT_TEST_OK(pt_model_grad_layers(f.m, g, &loss2, f.params, f.x, f.y, 4,
	    seen_layer, &s));
	PT_TEST_TRUE(loss == loss2);
	PT_TEST_TRUE(memcmp(g, f.grad, f.l.n_params * sizeof(float)) == 0);
	PT_TEST_TRUE(s.n == 3 && s.order[0] == 2 && s.order[1] == 1 &&
		     s.order[2] == 0);
	PT_TEST_TRUE(s.ranges_final);
	free(g);
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
	PT_TEST_OK(pt_model_grad(f.m, g2, &l2, f.params, f.x, f.y, 2));
	PT_TEST_OK(pt_model_grad(f.m, f.grad, &l4, f.params, f.x, f.y, 4));
	PT_TEST_NEAR(l4, l2, 1e-6);
	for (uint64_t i = 0; i < f.l.n_params; i++)
		PT_TEST_NEAR(f.grad[i], g2[i], 1e-6);
	free(g2);
	fixture_fini(&f);
}

static void test_model_bad_args(void)
{
	fixture f;
	pt_model *m = NULL;
	double loss = -1;
	uint32_t ok = 7;
	PT_TEST_OK(fixture_init(&f, "mlp:5,4", 7, 3, 4, 9));
	PT_TEST_ERR(pt_model_alloc(&m, &f.l, 0), PT_EINVAL);
	PT_TEST_TRUE(m == NULL);
	PT_TEST_ERR(pt_model_grad(f.m, f.grad, &loss, f.params, f.x, f.y, 5),
	    PT_EINVAL);
	PT_TEST_ERR(pt_model_grad(f.m, f.grad, &loss, f.params, f.x, f.y, 0),
	    PT_EINVAL);
	PT_TEST_ERR(pt_model_eval(f.m, &loss, &ok, f.params, f.x, f.y, 5),
	    PT_EINVAL);
	for (uint64_t i = 0; i < f.l.n_params; i++)
		f.grad[i] = 42.0f;
	f.y[3] = 3;
	PT_TEST_ERR(pt_model_grad(f.m, f.grad, &loss, f.params, f.x, f.y, 4),
	    PT_EINVAL);
	PT_TEST_STR_HAS(pt_errmsg(PT_EINVAL), "label 3");
	PT_TEST_ERR(pt_model_eval(f.m, &loss, &ok, f.params, f.x, f.y, 4),
	    PT_EINVAL);
	PT_TEST_TRUE(loss == -1 && ok == 7);
	for (uint64_t i = 0; i < f.l.n_params; i++)
		PT_TEST_TRUE(f.grad[i] == 42.0f);
	pt_model_free(NULL);
	fixture_fini(&f);
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
			PT_TEST_OK(pt_model_grad(f.m, f.grad, &loss, f.params,
			    f.x, f.y, 30));
			if (step == 0)
				first = loss;
			for (uint64_t i = 0; i < f.l.n_params; i++)
				f.params[i] -= 0.5f * f.grad[i];
		}
		PT_TEST_OK(pt_model_eval(f.m, &sum, &ok, f.params, f.x, f.y,
		    30));
		PT_TEST_TRUE(first > 0.5);
		PT_TEST_TRUE(sum / 30 < 0.1 * first);
		PT_TEST_TRUE(ok == 30);
		fixture_fini(&f);
	}
}

static const pt_test_case cases[] = {
    {"test_model_grad_layers_same", test_model_grad_layers_same},
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
    {NULL, NULL},
};

int main(int argc, char **argv)
{
	return pt_test_main(argc, argv, cases);
}
