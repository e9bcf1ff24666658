// common/layout.c - model spec parsing, placement and initial values.
#include "layout.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "rng.h"

#define LAYOUT_MAX_WIDTH 65536u

static int layout_add_layer(pt_layout *l, uint32_t layer)
{
	uint32_t in = l->width[layer], out = l->width[layer + 1];
	uint64_t off = l->n_params;
	pt_var *w = &l->vars[l->n_vars++];
	pt_var *b = &l->vars[l->n_vars++];

	snprintf(w->name, sizeof(w->name), "w%u", layer);
	w->rows = in;
	w->cols = out;
	w->fan_in = in;
	w->bound = 1.0f / sqrtf((float)in);
	w->off = off;
	w->n = (uint64_t)in * out;
	snprintf(b->name, sizeof(b->name), "b%u", layer);
	b->rows = 1;
	b->cols = out;
	b->fan_in = in;
	b->bound = w->bound;
	b->off = off + w->n;
	b->n = out;
	l->n_params = b->off + b->n;
	return 0;
}

int pt_layout_init(pt_layout *l, const char *spec, uint32_t in_dim,
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
	if (strcmp(spec, "softmax") == 0) {
		l->kind = PT_MODEL_SOFTMAX;
	} else if (strncmp(spec, "mlp:", 4) == 0) {
		l->kind = PT_MODEL_MLP;
		const char *p = spec + 4;
		for (;;) {
			char *end;
			errno = 0;
			unsigned long h = strtoul(p, &end, 10);
			if (end == p || errno != 0 || h == 0 ||
			    h > LAYOUT_MAX_WIDTH || *p == '-' || *p == '+')
				return pti_err_set(PT_EINVAL,
				    "--model %s: hidden sizes must be whole "
				    "numbers from 1 to %u, as in mlp:256,128",
				    spec, LAYOUT_MAX_WIDTH);
			if (n_hidden + 1 >= PT_MAX_LAYERS)
				return pti_err_set(PT_EINVAL,
				    "--model %s: at most %d hidden layers", spec,
				    PT_MAX_LAYERS - 1);
			l->width[++n_hidden] = (uint32_t)h;
			if (*end == '\0')
				break;
			if (*end != ',')
				return pti_err_set(PT_EINVAL,
				    "--model %s: expected ',' between sizes",
				    spec);
			p = end + 1;
		}
	} else {
		return pti_err_set(PT_EINVAL,
		    "--model %s: unknown model (use softmax or mlp:H1,H2,...)",
		    spec);
	}
	l->n_layers = n_hidden + 1;
	l->width[l->n_layers] = classes;
	for (uint32_t i = 0; i < l->n_layers; i++)
		layout_add_layer(l, i);
	return 0;
}

void pt_layout_vars(pt_layout *l)
{
	memset(l, 0, sizeof(*l));
	strcpy(l->spec, "vars");
	l->kind = PT_MODEL_VARS;
}

int pt_layout_find(const pt_layout *l, const char *name)
{
	for (uint32_t i = 0; i < l->n_vars; i++)
		if (strcmp(l->vars[i].name, name) == 0)
			return (int)i;
	return -1;
}

#define LAYOUT_MAX_PARAMS ((uint64_t)1 << 40)

int pti_layout_add(pt_layout *l, const char *name, uint64_t n, double bound)
{
	if (name == NULL || name[0] == '\0' || strlen(name) >= PT_VAR_NAME)
		return pti_err_set(PT_EINVAL, "variable name \"%s\": must be "
		    "1 to %d bytes", name ? name : "", PT_VAR_NAME - 1);
	if (pt_layout_find(l, name) >= 0)
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
	pt_var *v = &l->vars[l->n_vars++];
	snprintf(v->name, sizeof(v->name), "%s", name);
	v->rows = 1;
	v->cols = 1;
	v->bound = (float)bound;
	v->off = l->n_params;
	v->n = n;
	l->n_params += n;
	return 0;
}

uint64_t pt_layout_hash(const pt_layout *l)
{
	uint64_t h = pti_mix64(0x1a7007ULL);
	for (const char *p = l->spec; *p; p++)
		h = pti_mix64(h ^ (uint8_t)*p);
	for (uint32_t i = 0; i < l->n_vars; i++) {
		const pt_var *v = &l->vars[i];
		h = pti_hash3(h, v->rows, v->cols);
		if (l->kind != PT_MODEL_VARS)
			continue; // the spec has said every shape already
		// Declared variables: their names, sizes and initial scale.
		uint32_t b;
		memcpy(&b, &v->bound, sizeof(b));
		h = pti_hash3(h, v->n, b);
		for (const char *p = v->name; *p; p++)
			h = pti_mix64(h ^ (uint8_t)*p);
	}
	return h;
}

pt_range pt_layout_shard(const pt_layout *l, uint32_t s, uint32_t n_servers)
{
	// 128-bit-safe: n_params * S stays far below 2^64 for any real model.
	pt_range r = {
	    l->n_params * s / n_servers,
	    l->n_params * (s + 1) / n_servers,
	};
	return r;
}

void pt_layout_init_values(float *out, const pt_layout *l, uint64_t seed,
    uint64_t lo, uint64_t hi)
{
	for (uint32_t v = 0; v < l->n_vars; v++) {
		const pt_var *var = &l->vars[v];
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
