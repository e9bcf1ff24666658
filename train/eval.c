// train/eval.c - evaluation rows, the best parameters on validation, and
// the job's final evaluation (see eval.h).
#include "train/eval.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/err.h"
#include "common/modelfile.h"
#include "common/outputs.h"
#include "train/record.h"

int pti_train_evaluate(pti_model *m, const float *params,
    const pti_dataset *d, uint32_t max_batch, float *xbuf, uint8_t *ybuf,
    uint32_t *idxbuf, double *loss, double *acc)
{
	double sum = 0;
	uint64_t correct = 0;
	for (uint32_t at = 0; at < d->n; at += max_batch) {
		uint32_t b = d->n - at < max_batch ? d->n - at : max_batch;
		double ls;
		uint32_t ok;
		for (uint32_t i = 0; i < b; i++)
			idxbuf[i] = at + i;
		pti_data_gather(xbuf, ybuf, d, idxbuf, b);
		int rv = pti_model_eval(m, &ls, &ok, params, xbuf, ybuf, b);
		if (rv != 0)
			return rv;
		sum += ls;
		correct += ok;
	}
	*loss = sum / d->n;
	*acc = (double)correct / d->n;
	return 0;
}

static int eval_on(pti_trainer *w, const float *params, const pti_dataset *d,
    double *loss, double *acc)
{
	return pti_train_evaluate(w->model, params, d,
	    PTI_EVAL_CHUNK > w->b ? PTI_EVAL_CHUNK : w->b, w->x, w->y, w->idx,
	    loss, acc);
}

int pti_eval_due(const pti_trainer *w, uint64_t t)
{
	const pti_config *c = w->c;
	uint64_t k = w->spe / c->evals_per_epoch;
	uint64_t every = c->eval_every ? c->eval_every : k > 0 ? k : 1;
	return c->rank == 0 && (t + 1) % every == 0 && t + 1 < w->steps;
}

int pti_eval_row(pti_trainer *w, int64_t ver, uint64_t wstep,
    double *loss_out, double *acc_out)
{
	const pti_dataset *d = w->data.val.n > 0 ? &w->data.val : &w->data.test;
	double loss, acc, t = pti_wall_s();
	int rv = eval_on(w, w->params, d, &loss, &acc);
	if (rv != 0)
		return rv;
	double row[PTI_EV_N] = {(double)ver, t - w->t0, loss, acc,
	    (double)wstep, pti_wall_s() - t};
	if ((rv = pti_record_eval(w, row)) != 0)
		return rv;
	if (w->data.val.n > 0 && acc > w->best_acc) {
		size_t bytes = w->layout.n_params * sizeof(float);
		if (w->best == NULL && (w->best = malloc(bytes)) == NULL)
			return pti_err_set(PT_ENOMEM, "best parameters");
		memcpy(w->best, w->params, bytes);
		w->best_acc = acc;
		w->best_step = wstep;
		w->best_ver = ver;
	}
	if (loss_out != NULL)
		*loss_out = loss;
	if (acc_out != NULL)
		*acc_out = acc;
	return 0;
}

int pti_eval_final(pti_trainer *w, int64_t ver, double train_s)
{
	const pti_config *c = w->c;
	int rv;
	// The last eval.csv row: the final parameters on the validation set
	// (they may be the best; the test set when there is none), then the
	// test set, once, for the final and for the best-validation
	// parameters.
	double row_loss, row_acc, tr_loss, tr_acc, te_loss, te_acc;
	double va_loss = NAN, va_acc = NAN, bt_loss = NAN, bt_acc = NAN;
	int val = w->data.val.n > 0;
	if ((rv = pti_eval_row(w, ver, w->steps, &row_loss, &row_acc)) != 0 ||
	    (rv = eval_on(w, w->params, &w->data.train, &tr_loss,
		 &tr_acc)) != 0)
		return rv;
	if (!val) {
		te_loss = row_loss;
		te_acc = row_acc;
	} else if ((rv = eval_on(w, w->params, &w->data.test, &te_loss,
			&te_acc)) != 0 ||
	    (rv = eval_on(w, w->best, &w->data.test, &bt_loss, &bt_acc)) != 0) {
		return rv;
	} else {
		va_loss = row_loss;
		va_acc = row_acc;
	}
	// A finishing worker that took over from a lost worker 0 saw only
	// the final parameters: its best is theirs.
	double row[PTI_FN_N] = {(double)ver, (double)w->steps,
	    train_s, tr_loss, tr_acc, te_loss, te_acc, va_loss, va_acc,
	    w->best ? w->best_acc : NAN, (double)w->best_step,
	    (double)w->best_ver, bt_loss, bt_acc};
	if ((rv = pti_record_final(w, row)) != 0)
		return rv;
	w->finished = 1;
	if (c->save_model[0] != '\0' &&
	    (rv = pti_modelfile_save(c->save_model, &w->layout, w->params)) != 0)
		return rv;
	return 0;
}
