// common/layout.c - model spec parsing, placement and initial values.
#include "common/layout.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "common/rng.h"

#define LAYOUT_MAX_WIDTH 65536u
#define LAYOUT_MAX_CHANNELS 1024u
#define LAYOUT_MAX_FEATURES (1u << 24) // a CNN layer's values per image

// layout_add_layer appends w_layer (rows, cols) and b_layer (cols), their
// initial bound 1/sqrt(rows), the layer's fan-in.
static void layout_add_layer(pti_layout *l, uint32_t layer, uint32_t rows,
    uint32_t cols)
{
	uint64_t off = l->n_params;
	pti_var *w = &l->vars[l->n_vars++];
	pti_var *b = &l->vars[l->n_vars++];

	snprintf(w->name, sizeof(w->name), "w%u", layer);
	w->rows = rows;
	w->cols = cols;
	w->fan_in = rows;
	w->bound = 1.0f / sqrtf((float)rows);
	w->off = off;
	w->n = (uint64_t)rows * cols;
	snprintf(b->name, sizeof(b->name), "b%u", layer);
	b->rows = 1;
	b->cols = cols;
	b->fan_in = rows;
	b->bound = w->bound;
	b->off = off + w->n;
	b->n = cols;
	l->n_params = b->off + b->n;
}

// layout_sizes parses the list "N1,N2,..." at p into out[0..*n), each
// from 1 to max, at most max_n of them; what, layers and example word
// the errors.
static int layout_sizes(const char *spec, const char *p, uint32_t *out,
    uint32_t *n, uint32_t max_n, uint32_t max, const char *what,
    const char *layers, const char *example)
{
	*n = 0;
	for (;;) {
		char *end;
		errno = 0;
		unsigned long h = strtoul(p, &end, 10);
		if (end == p || errno != 0 || h == 0 || h > max || *p == '-' ||
		    *p == '+')
			return pti_err_set(PT_EINVAL,
			    "--model %s: %s must be whole numbers from 1 to "
			    "%u, as in %s",
			    spec, what, max, example);
		if (*n >= max_n)
			return pti_err_set(PT_EINVAL,
			    "--model %s: at most %u %s", spec, max_n,
			    layers);
		out[(*n)++] = (uint32_t)h;
		if (*end == '\0')
			return 0;
		if (*end != ',')
			return pti_err_set(PT_EINVAL,
			    "--model %s: expected ',' between sizes", spec);
		p = end + 1;
	}
}

// layout_cnn lays out conv layers of chan[1..n] channels over the square
// image of l->width[0] pixels, then the m hidden dense layers of
// hidden[0..m) units and the dense layer to classes.
static int layout_cnn(pti_layout *l, uint32_t n, const uint32_t *hidden,
    uint32_t m, uint32_t classes)
{
	uint32_t dim = l->width[0], s = 0;
	while ((uint64_t)(s + 1) * (s + 1) <= dim)
		s++;
	if ((uint64_t)s * s != dim)
		return pti_err_set(PT_EINVAL,
		    "--model %s: the data's %u features are not a square "
		    "image of one channel (such as 784 = 28 x 28)",
		    l->spec, dim);
	l->chan[0] = 1;
	l->side[0] = s;
	for (uint32_t i = 0; i < n; i++) {
		l->side[i + 1] = l->side[i] / 2;
		if (l->side[i + 1] == 0)
			return pti_err_set(PT_EINVAL,
			    "--model %s: a %u x %u image (dim %u) is too small "
			    "for %u 2x2 poolings",
			    l->spec, s, s, dim, n);
		// The patches and the pre-pool outputs of an image, which
		// bound every buffer and product of the layer.
		uint64_t hw = (uint64_t)l->side[i] * l->side[i];
		uint64_t ci = l->chan[i], co = l->chan[i + 1];
		uint64_t big = hw * (9 * ci > co ? 9 * ci : co);
		if (big > LAYOUT_MAX_FEATURES)
			return pti_err_set(PT_EINVAL,
			    "--model %s: conv layer %u needs %llu values per "
			    "image (dim %u), at most %u",
			    l->spec, i, (unsigned long long)big, dim,
			    LAYOUT_MAX_FEATURES);
		uint64_t f = (uint64_t)l->side[i + 1] * l->side[i + 1] * co;
		l->width[i + 1] = (uint32_t)f;
	}
	l->n_conv = n;
	l->n_layers = n + m + 1;
	for (uint32_t j = 0; j < m; j++)
		l->width[n + 1 + j] = hidden[j];
	l->width[n + m + 1] = classes;
	for (uint32_t i = 0; i < n; i++)
		layout_add_layer(l, i, 9 * l->chan[i], l->chan[i + 1]);
	for (uint32_t i = n; i <= n + m; i++)
		layout_add_layer(l, i, l->width[i], l->width[i + 1]);
	return 0;
}

int pti_layout_sparse(const char *spec)
{
	return spec != NULL &&
	       (strcmp(spec, "lr") == 0 || strncmp(spec, "fm:", 3) == 0 ||
		   strncmp(spec, "wide-deep:", 10) == 0);
}

// layout_wd lays out "wide-deep:K,H1,..." (pti_layout_sparse).
static int layout_wd(pti_layout *l, const char *spec, uint32_t in_dim,
    uint32_t classes)
{
	uint32_t v[1 + PT_WD_MAX_HIDDEN], n = 0;
	int rv;
	l->kind = PT_MODEL_WD;
	if ((rv = layout_sizes(spec, spec + 10, v, &n, 1 + PT_WD_MAX_HIDDEN,
		 LAYOUT_MAX_WIDTH, "the embedding size and hidden sizes",
		 "sizes", "wide-deep:8,64,32")) != 0)
		return rv;
	if (n < 2)
		return pti_err_set(PT_EINVAL, "--model %s: give the embedding "
		    "size, then 1 to %d hidden sizes (wide-deep:8,64)", spec,
		    PT_WD_MAX_HIDDEN);
	if (classes > PT_FM_DENSE)
		return pti_err_set(PT_EINVAL, "--model %s: %u classes, at most "
		    "%d", spec, classes, PT_FM_DENSE);
	uint32_t o = classes > 2 ? classes : 1;
	l->fm_k = v[0];
	l->wd_n = n - 1;
	memcpy(l->wd_hidden, v + 1, (n - 1) * sizeof(uint32_t));
	l->n_layers = 1; // so that width[n_layers] is the classes
	l->width[1] = classes;
	if ((uint64_t)in_dim * v[0] > LAYOUT_MAX_WIDTH * 16ULL)
		return pti_err_set(PT_EINVAL, "--model %s: %u fields of %u "
		    "floats is too wide an input", spec, in_dim, v[0]);
	if ((rv = pti_layout_add(l, "bias", PT_FM_DENSE, 0)) != 0)
		return rv;
	for (uint32_t i = 0; i <= l->wd_n; i++)
		layout_add_layer(l, i, i == 0 ? in_dim * v[0] : v[i],
		    i == l->wd_n ? o : v[i + 1]);
	return pti_layout_table(l, "emb", o + v[0], 0.01);
}

// layout_fm lays out "lr" or "fm:K" (pti_layout_sparse).
static int layout_fm(pti_layout *l, const char *spec, uint32_t classes)
{
	uint32_t k = 0, n = 0;
	int rv;
	l->kind = PT_MODEL_FM;
	if (spec[0] == 'f' && (rv = layout_sizes(spec, spec + 3, &k, &n, 1,
				   PT_FM_MAX_K, "factor count", "factor counts",
				   "fm:8")) != 0)
		return rv;
	if (k > 0 && classes != 2)
		return pti_err_set(PT_EINVAL, "--model %s: a factorization "
		    "machine needs a click set (--data ctr:N,F,V), not %u "
		    "classes (lr takes more)", spec, classes);
	if (classes > PT_FM_DENSE)
		return pti_err_set(PT_EINVAL, "--model %s: %u classes, at most "
		    "%d", spec, classes, PT_FM_DENSE);
	l->fm_k = k;
	l->n_layers = 1; // so that width[n_layers] is the classes
	l->width[1] = classes;
	// A row: the id's weight and its factors; on C > 2 classes (lr)
	// its weight for each class.
	uint32_t dim = classes > 2 ? classes : 1 + k;
	if ((rv = pti_layout_add(l, "bias", PT_FM_DENSE, 0)) != 0 ||
	    (rv = pti_layout_table(l, "emb", dim, k > 0 ? 0.01 : 0)) != 0)
		return rv;
	return 0;
}

int pti_layout_init(pti_layout *l, const char *spec, uint32_t in_dim,
    uint32_t classes)
{
	memset(l, 0, sizeof(*l));
	if (spec == NULL || strlen(spec) >= PT_SPEC_MAX)
		return pti_err_set(PT_EINVAL, "--model: spec too long");
	if (in_dim == 0 || classes < 2)
		return pti_err_set(PT_EINVAL,
		    "--model %s: data has %u features and %u classes", spec,
		    in_dim, classes);
	strcpy(l->spec, spec);
	l->width[0] = in_dim;
	uint32_t n_hidden = 0;
	int rv;
	if (strcmp(spec, "softmax") == 0) {
		l->kind = PT_MODEL_SOFTMAX;
	} else if (strncmp(spec, "mlp:", 4) == 0) {
		l->kind = PT_MODEL_MLP;
		if ((rv = layout_sizes(spec, spec + 4, l->width + 1, &n_hidden,
			 PT_MAX_LAYERS - 1, LAYOUT_MAX_WIDTH, "hidden sizes",
			 "hidden layers", "mlp:256,128")) != 0)
			return rv;
	} else if (strncmp(spec, "cnn:", 4) == 0) {
		char conv[PT_SPEC_MAX], *dense = NULL;
		uint32_t n, m = 0, hidden[PT_CNN_MAX_DENSE];
		l->kind = PT_MODEL_CNN;
		snprintf(conv, sizeof(conv), "%s", spec + 4);
		if ((dense = strchr(conv, '/')) != NULL)
			*dense++ = '\0';
		if ((rv = layout_sizes(spec, conv, l->chan + 1, &n,
			 PT_CNN_MAX_CONV, LAYOUT_MAX_CHANNELS,
			 "channel counts", "conv layers", "cnn:32,64")) != 0 ||
		    (dense != NULL && (rv = layout_sizes(spec, dense, hidden,
			 &m, PT_CNN_MAX_DENSE, LAYOUT_MAX_WIDTH,
			 "dense sizes after '/'", "hidden dense layers",
			 "cnn:32,64/1024")) != 0) ||
		    (rv = layout_cnn(l, n, hidden, m, classes)) != 0)
			return rv;
		return 0;
	} else if (strncmp(spec, "wide-deep:", 10) == 0) {
		return layout_wd(l, spec, in_dim, classes);
	} else if (pti_layout_sparse(spec)) {
		return layout_fm(l, spec, classes);
	} else {
		return pti_err_set(PT_EINVAL,
		    "--model %s: unknown model (use softmax, mlp:H1,H2,..., "
		    "cnn:C1,C2,...[/H1,...], lr, fm:K or wide-deep:K,H1,...)",
		    spec);
	}
	l->n_layers = n_hidden + 1;
	l->width[l->n_layers] = classes;
	for (uint32_t i = 0; i < l->n_layers; i++)
		layout_add_layer(l, i, l->width[i], l->width[i + 1]);
	return 0;
}

void pti_layout_vars(pti_layout *l)
{
	memset(l, 0, sizeof(*l));
	strcpy(l->spec, "vars");
	l->kind = PT_MODEL_VARS;
}

int pti_layout_find(const pti_layout *l, const char *name)
{
	for (uint32_t i = 0; i < l->n_vars; i++)
		if (strcmp(l->vars[i].name, name) == 0)
			return (int)i;
	return -1;
}

#define LAYOUT_MAX_PARAMS ((uint64_t)1 << 40)
#define SALT_SERVER 0x73727672ULL // keeps the row's server hash apart

static int table_find(const pti_layout *l, const char *name)
{
	for (uint32_t i = 0; i < l->n_tables; i++)
		if (strcmp(l->tables[i].name, name) == 0)
			return (int)i;
	return -1;
}

int pti_layout_table(pti_layout *l, const char *name, uint32_t dim,
    double bound)
{
	if (name == NULL || name[0] == '\0' || strlen(name) >= PT_VAR_NAME)
		return pti_err_set(PT_EINVAL, "table name \"%s\": must be 1 to "
		    "%d bytes", name ? name : "", PT_VAR_NAME - 1);
	if (pti_layout_find(l, name) >= 0 || table_find(l, name) >= 0)
		return pti_err_set(PT_EINVAL, "table %s: the name is taken",
		    name);
	if (l->n_tables >= PT_MAX_TABLES)
		return pti_err_set(PT_ERANGE, "table %s: at most %d tables",
		    name, PT_MAX_TABLES);
	if (dim == 0 || dim > PT_TABLE_MAX_DIM)
		return pti_err_set(PT_EINVAL, "table %s: dim %u (1 to %d)",
		    name, dim, PT_TABLE_MAX_DIM);
	if (!(bound >= 0 && bound < 1e30))
		return pti_err_set(PT_EINVAL, "table %s: initial bound %g "
		    "(must be finite and >= 0)", name, bound);
	pti_emb_table *t = &l->tables[l->n_tables++];
	snprintf(t->name, sizeof(t->name), "%s", name);
	t->dim = dim;
	t->bound = (float)bound;
	return 0;
}

uint32_t pti_layout_row_server(uint64_t id, uint32_t n)
{
	return (uint32_t)(((pti_mix64(id ^ SALT_SERVER) >> 32) * n) >> 32);
}

int pti_layout_add(pti_layout *l, const char *name, uint64_t n, double bound)
{
	if (name == NULL || name[0] == '\0' || strlen(name) >= PT_VAR_NAME)
		return pti_err_set(PT_EINVAL, "variable name \"%s\": must be "
		    "1 to %d bytes", name ? name : "", PT_VAR_NAME - 1);
	if (pti_layout_find(l, name) >= 0 || table_find(l, name) >= 0)
		return pti_err_set(PT_EINVAL, "variable %s: declared twice",
		    name);
	if (l->n_vars >= PT_MAX_VARS)
		return pti_err_set(PT_ERANGE, "variable %s: at most %d "
		    "variables", name, PT_MAX_VARS);
	if (n == 0 || n > LAYOUT_MAX_PARAMS - l->n_params)
		return pti_err_set(PT_EINVAL, "variable %s: %llu floats (the "
		    "job may hold 1 to 2^40 in all)", name,
		    (unsigned long long)n);
	if (!(bound >= 0 && bound < 1e30))
		return pti_err_set(PT_EINVAL, "variable %s: initial bound %g "
		    "(must be finite and >= 0)", name, bound);
	pti_var *v = &l->vars[l->n_vars++];
	snprintf(v->name, sizeof(v->name), "%s", name);
	v->rows = 1;
	v->cols = 1;
	v->bound = (float)bound;
	v->off = l->n_params;
	v->n = n;
	l->n_params += n;
	return 0;
}

uint64_t pti_layout_hash(const pti_layout *l)
{
	uint64_t h = pti_mix64(0x1a7007ULL);
	for (const char *p = l->spec; *p; p++)
		h = pti_mix64(h ^ (uint8_t)*p);
	for (uint32_t i = 0; i < l->n_vars; i++) {
		const pti_var *v = &l->vars[i];
		h = pti_hash3(h, v->rows, v->cols);
		if (l->kind != PT_MODEL_VARS)
			continue; // the spec has said every shape already
		// Declared variables: their names, sizes and initial scale.
		uint32_t b;
		memcpy(&b, &v->bound, sizeof(b));
		h = pti_hash3(h, v->n, b);
		h = pti_hash3(h, v->given, 0);
		for (const char *p = v->name; *p; p++)
			h = pti_mix64(h ^ (uint8_t)*p);
	}
	for (uint32_t i = 0; i < l->n_tables; i++) {
		const pti_emb_table *t = &l->tables[i];
		uint32_t b;
		memcpy(&b, &t->bound, sizeof(b));
		h = pti_hash3(h, t->dim, b);
		for (const char *p = t->name; *p; p++)
			h = pti_mix64(h ^ (uint8_t)*p);
	}
	return h;
}

pti_range pti_layout_shard(const pti_layout *l, uint32_t s, uint32_t n_servers)
{
	// 128-bit-safe: n_params * S stays far below 2^64 for any real model.
	pti_range r = {
	    l->n_params * s / n_servers,
	    l->n_params * (s + 1) / n_servers,
	};
	return r;
}

void pti_layout_init_values(float *out, const pti_layout *l, uint64_t seed,
    uint64_t lo, uint64_t hi)
{
	for (uint32_t v = 0; v < l->n_vars; v++) {
		const pti_var *var = &l->vars[v];
		uint64_t a = var->off > lo ? var->off : lo;
		uint64_t b = var->off + var->n < hi ? var->off + var->n : hi;
		float bound = var->bound;
		for (uint64_t i = a; i < b; i++) {
			double u = pti_u64_to_unit(
			    pti_hash3(seed, v + 1, i - var->off));
			out[i - lo] = (float)((2.0 * u - 1.0) * bound);
		}
	}
}
