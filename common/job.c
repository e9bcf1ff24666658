// common/job.c - pt_job: options and variables (job.h, pstrain.h).
#include "common/job.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/data.h"
#include "common/err.h"
#include "common/mode.h"
#include "common/rng.h"

int pt_job_alloc(pt_job **out)
{
	pt_job *j = calloc(1, sizeof(*j));
	if (j == NULL)
		return pti_err_set(PT_ENOMEM, "job");
	pti_jobopt_defaults(&j->o);
	pti_layout_vars(&j->l);
	*out = j;
	return 0;
}

void pt_job_free(pt_job *j)
{
	if (j == NULL)
		return;
	for (int i = 0; i < PT_MAX_VARS; i++)
		free(j->given[i]);
	free(j);
}

int pt_job_var(pt_job *j, const char *name, uint64_t n, double bound)
{
	if (j->l.kind != PT_MODEL_VARS)
		return -pti_err_set(PT_EINVAL, "variable %s: this job's "
		    "variables come from --model %s", name ? name : "",
		    j->l.spec);
	int rv = pti_layout_add(&j->l, name, n, bound);
	return rv != 0 ? -rv : (int)j->l.n_vars - 1;
}

int pt_job_var_values(pt_job *j, int var, const float *values)
{
	if (var < 0 || (uint32_t)var >= j->l.n_vars)
		return pti_err_set(PT_ERANGE, "variable %d: the job has %u", var,
		    j->l.n_vars);
	const pti_var *v = &j->l.vars[var];
	if (values == NULL)
		return pti_err_set(PT_EINVAL, "variable %s: no values", v->name);
	uint64_t h = pti_mix64(0x9e7a1ULL);
	for (uint64_t i = 0; i < v->n; i++) {
		uint32_t b;
		if (!isfinite(values[i]))
			return pti_err_set(PT_EINVAL, "variable %s: initial "
			    "value %llu is %g", v->name, (unsigned long long)i,
			    (double)values[i]);
		memcpy(&b, &values[i], sizeof(b));
		h = pti_hash3(h, i, b);
	}
	float *copy = malloc(v->n * sizeof(float));
	if (copy == NULL)
		return pti_err_set(PT_ENOMEM, "variable %s: %llu initial values",
		    v->name, (unsigned long long)v->n);
	memcpy(copy, values, v->n * sizeof(float));
	free(j->given[var]);
	j->given[var] = copy;
	j->l.vars[var].given = h | 1; // never 0: 0 says drawn
	return 0;
}

int pt_job_table(pt_job *j, const char *name, uint32_t dim, double init)
{
	int rv = pti_layout_table(&j->l, name, dim, init);
	return rv != 0 ? -rv : (int)j->l.n_tables - 1;
}

int pt_job_model(pt_job *j, const char *spec, uint32_t dim,
    uint32_t classes)
{
	pti_layout l;
	int rv;
	if (j->l.kind != PT_MODEL_VARS || j->l.n_vars > 0)
		return pti_err_set(PT_EINVAL, "model %s: the job has variables "
		    "already", spec ? spec : "");
	if (spec == NULL || strlen(spec) >= sizeof(l.spec))
		return pti_err_set(PT_EINVAL, "model: no spec, or too long");
	if ((rv = pti_layout_init(&l, spec, dim, classes)) != 0)
		return rv;
	// Tables declared before the model stay the job's.
	l.n_tables = j->l.n_tables;
	memcpy(l.tables, j->l.tables, sizeof(l.tables));
	j->l = l;
	return 0;
}

int pt_job_set(pt_job *j, const char *name, const char *value)
{
	if (name == NULL || value == NULL)
		return pti_err_set(PT_EINVAL, "pt_job_set: no option or value");
	if (strcmp(name, "warmup-steps") == 0) {
		char *end;
		double w = strtod(value, &end);
		if (end == value || *end != '\0' || !(w >= 0 && w < 1e15))
			return pti_err_set(PT_EINVAL, "option warmup-steps: "
			    "'%s' is not a number of steps >= 0", value);
		j->o.warmup = w;
		return 0;
	}
	// Switches take true or false here, as 1 or 0 on the command line.
	const char *v = strcmp(value, "true") == 0    ? "1"
			: strcmp(value, "false") == 0 ? "0"
						      : value;
	return pti_jobopt_set(&j->o, name, v);
}

double pti_job_lr(const pti_jobopt *o)
{
	double lr = o->lr > 0 ? o->lr : pti_optim_default_lr(&o->optim);
	return o->lr_scaling == PT_LR_LINEAR ? lr * (o->batch / 256.0) : lr;
}

pti_lr_rule pti_job_lr_rule(const pti_jobopt *o)
{
	const pti_mode *m = pti_mode_of(o->mode);
	int clocked = m != NULL && m->clocked;
	pti_lr_rule r = {pti_job_lr(o), o->warmup,
	    clocked && o->matched_lr ? (double)o->workers : 0,
	    clocked && o->staleness_lr};
	return r;
}

double pti_job_warmup(const pti_config *c, uint32_t n_train)
{
	return c->warmup_epochs * (double)(n_train / c->job.batch);
}

int pti_job_from_config(pt_job **out, const pti_config *c)
{
	uint32_t dim, classes;
	pt_job *j = NULL;
	int rv = pt_job_alloc(&j);
	if (rv != 0)
		return rv;
	j->o = c->job;
	if ((rv = pti_data_dims(c->data, &dim, &classes)) != 0 ||
	    (rv = pti_layout_init(&j->l, c->model, dim, classes)) != 0) {
		pt_job_free(j);
		return rv;
	}
	if (c->warmup_epochs > 0) {
		// The warm-up is given in epochs: count the training set once.
		pti_data d;
		if ((rv = pti_config_load_data(c, &d)) != 0) {
			pt_job_free(j);
			return rv;
		}
		j->o.warmup = pti_job_warmup(c, d.train.n);
		pti_data_fini(&d);
	}
	*out = j;
	return 0;
}
