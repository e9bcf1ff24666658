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
	w->off = off;
	w->n = (uint64_t)in * out;
	snprintf(b->name, sizeof(b->name), "b%u", layer);
	b->rows = 1;
	b->cols = out;
	b->fan_in = in;
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

uint64_t pt_layout_hash(const pt_layout *l)
{
	uint64_t h = pti_mix64(0x1a7007ULL);
	for (const char *p = l->spec; *p; p++)
		h = pti_mix64(h ^ (uint8_t)*p);
	for (uint32_t i = 0; i < l->n_vars; i++)
		h = pti_hash3(h, l->vars[i].rows, l->vars[i].cols);
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
		float bound = 1.0f / sqrtf((float)var->fan_in);
		for (uint64_t i = a; i < b; i++) {
			double u = pti_u64_to_unit(
			    pti_hash3(seed, v + 1, i - var->off));
			out[i - lo] = (float)((2.0 * u - 1.0) * bound);
		}
	}
}
