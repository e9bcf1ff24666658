// train/sparse.c - training and evaluating the sparse models (--model lr,
// fm:K) on a click set: a way of sending (train/sender.h) that moves only
// the rows of each step's ids, and the rows that evaluations read.
//
// A step's ids are made unique (model/sparse.h); its gradient goes to
// those rows and to the bias. Sending is the bias's pushpull (under way
// while the rows go) and one pushpull of rows: this step's gradients
// pushed, the next step's rows pulled, which in sync mode are those of
// the closed step. So each step's rows are in hand when it begins; the
// first step, or one after a rejoin, pulls its own (counted as
// communication).
//
// Evaluation reads rows as the dense models read their parameters: at
// each evaluation worker 0 pulls the rows of every id of the validation
// and test sets (in sync mode, of the step just closed: no step closes
// without worker 0's part) behind the bias in w->params, and the copy
// the evaluator takes holds them all (w->n_eval floats). The training
// set's rows are pulled once, for the final evaluation.
#include "train/sparse.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/blas.h"
#include "common/clock.h"
#include "common/err.h"
#include "common/modelfile.h"
#include "common/stats.h"
#include "model/sparse.h"
#include "train/sender.h"

// A set of examples' ids made unique: the rows to read, and each
// (example, field)'s row among them.
typedef struct view {
	const pti_dataset *d;
	uint64_t *uniq;
	uint32_t *slot; // (n, fields)
	uint32_t nu;
	uint64_t off;   // where its rows are in an evaluator's copy
} view;

struct pti_sparse {
	uint32_t k, dim; // factors; floats a row
	pti_wd wd;       // wide-deep's shape (kind PT_MODEL_WD)
	view val, test, train; // val.d NULL when there is no validation set
	float *train_rows;     // the training set's, for the final evaluation
	float *logits;         // (the largest set's n, x wd.o)
	pti_scored *scored;
	float *wd_scratch;     // wide-deep: for SPARSE_CHUNK examples
};

#define SPARSE_CHUNK 500 // examples a wide-deep evaluation runs at once

// wd_of is w's wide-deep shape (any layout: its fields are 0 otherwise).
static pti_wd wd_of(const pti_trainer *w)
{
	uint32_t c = w->data.train.classes;
	pti_wd s = {w->data.train.dim, w->layout.fm_k, c > 2 ? c : 1,
	    w->layout.wd_n, {0}};
	memcpy(s.h, w->layout.wd_hidden, sizeof(s.h));
	return s;
}

static int view_make(view *v, const pti_dataset *d, uint64_t off)
{
	uint64_t n = (uint64_t)d->n * d->dim;
	uint64_t *scratch = malloc(4 * n * sizeof(*scratch));
	uint64_t *ids = pti_data_all_ids(d);
	v->d = d;
	v->off = off;
	v->uniq = malloc(n * sizeof(*v->uniq));
	v->slot = malloc(n * sizeof(*v->slot));
	if (!scratch || !ids || !v->uniq || !v->slot) {
		free(scratch);
		free(ids);
		return pti_err_set(PT_ENOMEM, "the ids of %u examples", d->n);
	}
	v->nu = pti_sparse_unique(ids, (uint32_t)n, v->uniq, v->slot, scratch);
	free(scratch);
	free(ids);
	return 0;
}

static void view_free(view *v)
{
	free(v->uniq);
	free(v->slot);
}

int pti_sparse_init(pti_trainer *w)
{
	pti_sparse *sp = calloc(1, sizeof(*sp));
	int rv;
	if (sp == NULL)
		return pti_err_set(PT_ENOMEM, "sparse model");
	w->sparse = sp;
	sp->k = w->layout.fm_k;
	sp->dim = w->layout.tables[0].dim;
	sp->wd = wd_of(w);
	uint64_t at = w->layout.n_params;
	if (w->data.val.n > 0) {
		if ((rv = view_make(&sp->val, &w->data.val, at)) != 0)
			return rv;
		at += (uint64_t)sp->val.nu * sp->dim;
	}
	if ((rv = view_make(&sp->test, &w->data.test, at)) != 0)
		return rv;
	w->n_eval = at + (uint64_t)sp->test.nu * sp->dim;
	uint32_t most = w->data.train.n > w->data.test.n ? w->data.train.n
							 : w->data.test.n;
	if ((sp->logits = malloc((size_t)most * sp->wd.o *
		 sizeof(float))) == NULL ||
	    (sp->scored = malloc(most * sizeof(pti_scored))) == NULL ||
	    (w->layout.kind == PT_MODEL_WD &&
		(sp->wd_scratch = malloc(pti_wd_scratch(&sp->wd,
		     SPARSE_CHUNK) * sizeof(float))) == NULL))
		return pti_err_set(PT_ENOMEM, "sparse evaluation");
	return 0;
}

void pti_sparse_fini(pti_trainer *w)
{
	pti_sparse *sp = w->sparse;
	if (sp == NULL)
		return;
	view_free(&sp->val);
	view_free(&sp->test);
	view_free(&sp->train);
	free(sp->train_rows);
	free(sp->logits);
	free(sp->scored);
	free(sp->wd_scratch);
	free(sp);
	w->sparse = NULL;
}

int pti_sparse_fill(pti_trainer *w)
{
	pti_sparse *sp = w->sparse;
	int rv = 0;
	const view *v[2] = {&sp->val, &sp->test};
	for (int i = 0; i < 2 && rv == 0; i++)
		if (v[i]->d != NULL && v[i]->nu > 0)
			rv = pt_pull_rows(w->pw, 0, v[i]->nu, v[i]->uniq,
			    w->params + v[i]->off);
	return rv;
}

int pti_sparse_fill_train(pti_trainer *w)
{
	pti_sparse *sp = w->sparse;
	int rv;
	if (sp->train.d == NULL &&
	    (rv = view_make(&sp->train, &w->data.train, 0)) != 0)
		return rv;
	if (sp->train_rows == NULL &&
	    (sp->train_rows = malloc((size_t)sp->train.nu * sp->dim *
				     sizeof(float))) == NULL)
		return pti_err_set(PT_ENOMEM, "the training set's rows");
	return pt_pull_rows(w->pw, 0, sp->train.nu, sp->train.uniq,
	    sp->train_rows);
}

int pti_sparse_evaluate(pti_trainer *w, const float *params,
    const pti_dataset *d, double *loss, double *acc, double *auc)
{
	pti_sparse *sp = w->sparse;
	const view *v = d == sp->val.d ? &sp->val : d == sp->test.d ? &sp->test
								  : &sp->train;
	const float *rows = v == &sp->train ? sp->train_rows : params + v->off;
	if (v->d != d || rows == NULL)
		return pti_err_set(PT_EINVAL, "sparse evaluation: no rows of "
		    "that set");
	if (w->layout.kind == PT_MODEL_WD) {
		pti_wd_metrics(&sp->wd, rows, v->slot, d->n, params, d->y,
		    sp->wd_scratch, SPARSE_CHUNK, sp->logits, sp->scored, loss,
		    acc, auc);
		return 0;
	}
	if (d->classes > 2) {
		float scratch[PT_FM_DENSE];
		pti_softmax_rows_metrics(d->classes, rows, v->slot, d->n,
		    d->dim, params, d->y, scratch, loss, acc);
		*auc = NAN;
		return 0;
	}
	pti_fm_metrics(sp->k, rows, v->slot, d->n, d->dim, params[0], d->y,
	    sp->logits, sp->scored, loss, acc, auc);
	return 0;
}

int pti_sparse_save(pti_trainer *w, const char *path)
{
	pti_mrows rows[PT_MAX_TABLES];
	int rv = 0;
	memset(rows, 0, sizeof(rows));
	for (uint32_t t = 0; t < w->layout.n_tables && rv == 0; t++)
		rv = pti_worker_rows_all(w->pw, (int)t, &rows[t].ids,
		    &rows[t].vals, &rows[t].n);
	if (rv == 0)
		rv = pti_modelfile_save_rows(path, &w->layout, w->params,
		    w->c->job.seed, rows);
	pti_mrows_free(rows, PT_MAX_TABLES);
	return rv;
}

// ---------------------------------------------------------------- sending

typedef struct sender {
	pti_trainer *w;
	uint32_t f, k, dim, b;
	// Buffer i holds the rows of step at[i] (-1: none): its unique ids,
	// each example's slots and the rows' values.
	uint64_t *uniq[2];
	uint32_t *slot[2], nu[2];
	float *rows[2];
	int64_t at[2];
	uint64_t *ids, *scratch; // a step's ids; 4 b f words
	uint8_t *y;
	float *grows;            // (b f, dim) the step's rows' gradients
	pti_wd wd;               // wide-deep's shape, and its scratch
	float *wd_scratch;
	pti_step *st;            // the step sent, not yet waited for
	pt_req *req;             // its bias pushpull
	double t_c, pre_s;       // when it was sent; rows pulled before it
} sender;

// take makes step t's ids (ids, b f of them) unique into buffer i.
static void take(sender *p, int i, int64_t t, const uint64_t *ids)
{
	p->nu[i] = pti_sparse_unique(ids, p->b * p->f, p->uniq[i], p->slot[i],
	    p->scratch);
	p->at[i] = t;
}

static int sparse_grad(void *s, pti_step *st, const float *x,
    const uint8_t *y)
{
	(void)x; // a click set has ids, not features
	sender *p = s;
	pti_trainer *w = p->w;
	int i = (int)(st->t % 2), rv;
	p->pre_s = 0;
	if (p->at[i] != (int64_t)st->t) {
		// Not pulled ahead (the first step, or after a rejoin): its
		// rows now, as they are.
		double t0 = pti_wall_s();
		take(p, i, (int64_t)st->t, pti_batches_ids(w->batches, st->t));
		if ((rv = pt_pull_rows(w->pw, 0, p->nu[i], p->uniq[i],
			 p->rows[i])) != 0) {
			p->at[i] = -1;
			return rv;
		}
		p->pre_s = pti_wall_s() - t0;
	}
	float scratch[PT_FM_DENSE > PT_FM_MAX_K ? PT_FM_DENSE : PT_FM_MAX_K];
	uint32_t c = w->data.train.classes;
	if (w->layout.kind == PT_MODEL_WD)
		pti_wd_grad(&p->wd, p->rows[i], p->nu[i], p->slot[i], p->b,
		    w->params, y, p->grows, w->grad, &st->loss, p->wd_scratch);
	else if (c > 2)
		pti_softmax_rows_grad(c, p->rows[i], p->nu[i], p->slot[i],
		    p->b, p->f, w->params, y, p->grows, w->grad, &st->loss,
		    scratch);
	else
		pti_fm_grad(p->k, p->rows[i], p->nu[i], p->slot[i], p->b,
		    p->f, w->params[0], y, p->grows, &w->grad[0], &st->loss,
		    NULL, scratch);
	st->sumsq = pti_blas_sumsq(w->grad, w->layout.n_params) +
		    pti_blas_sumsq(p->grows, (uint64_t)p->nu[i] * p->dim);
	st->rows = p->nu[i];
	return 0;
}

static int sparse_flush(void *s, pti_step **done)
{
	(void)s; // its wait waited for everything
	*done = NULL;
	return 0;
}

// sparse_send: the bias's pushpull under way, then the rows' (this
// step's gradients, the next step's rows), which blocks.
static int sparse_send(void *s, pti_step *st)
{
	sender *p = s;
	pti_trainer *w = p->w;
	int i = (int)(st->t % 2), j = 1 - i, rv;
	p->st = st;
	p->t_c = pti_wall_s();
	if ((rv = pt_pushpull(w->pw, (int64_t)st->t, PT_ALL, 0,
		 w->layout.n_params, w->grad, w->params, &p->req)) != 0)
		return rv;
	pti_batches_ids_of(w->batches, st->t + 1, p->ids, p->y);
	take(p, j, (int64_t)st->t + 1, p->ids);
	rv = pt_pushpull_rows(w->pw, 0, (int64_t)st->t, p->nu[i], p->uniq[i],
	    p->grows, p->nu[j], p->uniq[j], p->rows[j]);
	if (rv != 0)
		p->at[j] = -1;
	return rv;
}

static int sparse_wait(void *s, pti_step **done)
{
	sender *p = s;
	pti_trainer *w = p->w;
	pti_step *st = p->st;
	*done = NULL;
	int rv = p->req != NULL ? pti_wait_info(w->pw, p->req, &st->info) : 0;
	p->req = NULL;
	if (rv != 0)
		return rv;
	pti_step_ended(w, st, p->t_c, p->pre_s);
	*done = st;
	return 0;
}

static void sparse_drop(void *s)
{
	sender *p = s;
	if (p->req != NULL) {
		(void)pt_wait(p->w->pw, p->req);
		p->req = NULL;
	}
	p->at[0] = p->at[1] = -1;
}

static void sparse_close(void *s)
{
	sender *p = s;
	if (p == NULL)
		return;
	for (int i = 0; i < 2; i++) {
		free(p->uniq[i]);
		free(p->slot[i]);
		free(p->rows[i]);
	}
	free(p->ids);
	free(p->scratch);
	free(p->y);
	free(p->grows);
	free(p->wd_scratch);
	free(p);
}

static const pti_sender_ops sparse_ops = {
	.grad = sparse_grad,
	.flush = sparse_flush,
	.send = sparse_send,
	.wait = sparse_wait,
	.drop = sparse_drop,
	.close = sparse_close,
};

int pti_sparse_open(pti_sender *out, pti_trainer *w)
{
	sender *p = calloc(1, sizeof(*p));
	if (p == NULL)
		return pti_err_set(PT_ENOMEM, "worker: sender");
	p->w = w;
	p->f = w->data.train.dim;
	p->k = w->layout.fm_k;
	p->dim = w->layout.tables[0].dim;
	p->b = w->b;
	size_t n = (size_t)p->b * p->f;
	int no = 0;
	for (int i = 0; i < 2; i++) {
		no |= !(p->uniq[i] = malloc(n * sizeof(uint64_t)));
		no |= !(p->slot[i] = malloc(n * sizeof(uint32_t)));
		no |= !(p->rows[i] = malloc(n * p->dim * sizeof(float)));
		p->at[i] = -1;
	}
	no |= !(p->ids = malloc(n * sizeof(uint64_t)));
	no |= !(p->scratch = malloc(4 * n * sizeof(uint64_t)));
	no |= !(p->y = malloc(p->b));
	no |= !(p->grows = malloc(n * p->dim * sizeof(float)));
	p->wd = wd_of(w);
	if (w->layout.kind == PT_MODEL_WD)
		no |= !(p->wd_scratch = malloc(pti_wd_scratch(&p->wd, p->b) *
						sizeof(float)));
	if (no) {
		sparse_close(p);
		return pti_err_set(PT_ENOMEM, "worker: rows of %zu ids", n);
	}
	out->ops = &sparse_ops;
	out->s = p;
	return 0;
}
