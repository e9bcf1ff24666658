// train/eval.c - evaluation rows, the best parameters on validation, and
// the job's final evaluation (see eval.h).
#include "train/eval.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/err.h"
#include "common/modelfile.h"
#include "common/outputs.h"
#include "common/stats.h"
#include "common/testhook.h"
#include "train/record.h"
#include "train/sparse.h"

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

// evaluate computes params' loss, accuracy and AUC (a click model's;
// NaN for the others) on d, with model m and the buffers given.
static int evaluate(pti_trainer *w, pti_model *m, float *x, uint8_t *y,
    uint32_t *idx, const float *params, const pti_dataset *d, double *loss,
    double *acc, double *auc)
{
	if (w->sparse != NULL)
		return pti_sparse_evaluate(w, params, d, loss, acc, auc);
	*auc = NAN;
	return pti_train_evaluate(m, params, d, PTI_EVAL_CHUNK > w->b ?
	    PTI_EVAL_CHUNK : w->b, x, y, idx, loss, acc);
}

static int eval_on(pti_trainer *w, const float *params, const pti_dataset *d,
    double *loss, double *acc, double *auc)
{
	return evaluate(w, w->model, w->x, w->y, w->idx, params, d, loss, acc,
	    auc);
}

int pti_eval_due(const pti_trainer *w, uint64_t t)
{
	const pti_config *c = w->c;
	uint64_t k = w->spe / c->evals_per_epoch;
	uint64_t every = c->eval_every ? c->eval_every : k > 0 ? k : 1;
	return c->rank == 0 && (t + 1) % every == 0 && t + 1 < w->steps;
}

// eval_write evaluates params (version ver, after wstep steps, which
// worker 0 had at wall time t) with the model and buffers given, appends
// the row to eval.csv, and keeps params when they are the best on
// validation so far.
static int eval_write(pti_trainer *w, pti_model *m, float *x, uint8_t *y,
    uint32_t *idx, const float *params, int64_t ver, uint64_t wstep,
    double t, double *loss_out, double *acc_out, double *auc_out)
{
	const pti_dataset *d = w->data.val.n > 0 ? &w->data.val : &w->data.test;
	double loss, acc, auc, began = pti_clock_s();
	int rv = evaluate(w, m, x, y, idx, params, d, &loss, &acc, &auc);
	if (rv != 0)
		return rv;
	double row[PTI_EV_N] = {(double)ver, t - w->t0, loss, acc,
	    (double)wstep, pti_clock_s() - began, auc};
	if ((rv = pti_record_eval(w, row)) != 0)
		return rv;
	if (w->data.val.n > 0 && acc > w->best_acc) {
		size_t bytes = w->n_eval * sizeof(float);
		if (w->best == NULL && (w->best = malloc(bytes)) == NULL)
			return pti_err_set(PT_ENOMEM, "best parameters");
		memcpy(w->best, params, bytes);
		w->best_acc = acc;
		w->best_step = wstep;
		w->best_ver = ver;
	}
	if (loss_out != NULL)
		*loss_out = loss;
	if (acc_out != NULL)
		*acc_out = acc;
	if (auc_out != NULL)
		*auc_out = auc;
	return 0;
}

// The evaluator: a thread of worker 0 with a model and buffers of its
// own, evaluating copies of the parameters in the order they were
// posted while training goes on. The thread runs at the lowest priority
// (nice +EVQ_NICE) so that on a busy machine the training processes come
// first: it evaluates in the time they wait, and what it could not is
// left for after the last step. Up to EVQ_MAX copies wait (fewer for a
// model above EVQ_BYTES / EVQ_MAX, at least one), each allocated when
// first needed; a post that finds none free waits for the oldest
// evaluation to end, and that wait is counted.
#define EVQ_MAX 64
#define EVQ_BYTES ((size_t)256 << 20)
#define EVQ_NICE 19

typedef struct evq_slot {
	float *params;
	int64_t ver;
	uint64_t wstep;
	double t;
} evq_slot;

struct pti_evaluator {
	pthread_t thread;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int started, stop, rv;
	pti_model *model;
	float *x;
	uint8_t *y;
	uint32_t *idx;
	evq_slot *slot; // (cap)
	uint32_t cap, head, n; // a ring of n copies from head, the one at
			       // head being evaluated
	double waited_s;
};

static void *evq_main(void *arg)
{
	pti_trainer *w = arg;
	pti_evaluator *e = w->evaluator;
	(void)setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), EVQ_NICE);
	pthread_mutex_lock(&e->mu);
	for (;;) {
		while (e->n == 0 && !e->stop)
			pthread_cond_wait(&e->cv, &e->mu);
		if (e->n == 0)
			break;
		evq_slot *s = &e->slot[e->head];
		pthread_mutex_unlock(&e->mu);
		// With PSTRAIN_TEST_EVAL_HOLD=FILE, no evaluation begins
		// before FILE exists: a test shows so that training does
		// not wait for its evaluations.
		pti_test_hold(PTI_HOLD_EVAL);
		int rv = e->rv ? e->rv : eval_write(w, e->model, e->x, e->y,
		    e->idx, s->params, s->ver, s->wstep, s->t, NULL, NULL,
		    NULL);
		pthread_mutex_lock(&e->mu);
		if (rv != 0 && e->rv == 0)
			e->rv = rv;
		e->head = (e->head + 1) % e->cap;
		e->n--;
		pthread_cond_broadcast(&e->cv);
	}
	pthread_mutex_unlock(&e->mu);
	return NULL;
}

// evq_start makes w's evaluator and starts its thread.
static int evq_start(pti_trainer *w)
{
	size_t bytes = w->n_eval * sizeof(float);
	uint32_t chunk = PTI_EVAL_CHUNK > w->b ? PTI_EVAL_CHUNK : w->b;
	pti_evaluator *e = calloc(1, sizeof(*e));
	int rv;
	if (e == NULL)
		return pti_err_set(PT_ENOMEM, "evaluator");
	w->evaluator = e;
	e->cap = bytes * EVQ_MAX <= EVQ_BYTES ? EVQ_MAX :
	    bytes * 2 <= EVQ_BYTES ? (uint32_t)(EVQ_BYTES / bytes) : 1;
	if ((e->slot = calloc(e->cap, sizeof(*e->slot))) == NULL)
		return pti_err_set(PT_ENOMEM, "evaluator's copies");
	if ((e->x = malloc((size_t)chunk * w->data.train.dim *
		 sizeof(float))) == NULL ||
	    (e->y = malloc(chunk)) == NULL ||
	    (e->idx = malloc(chunk * sizeof(uint32_t))) == NULL)
		return pti_err_set(PT_ENOMEM, "evaluator's buffers");
	if (w->sparse == NULL &&
	    (rv = pti_model_alloc(&e->model, &w->layout, chunk)) != 0)
		return rv;
	pthread_mutex_init(&e->mu, NULL);
	pthread_cond_init(&e->cv, NULL);
	if ((rv = pthread_create(&e->thread, NULL, evq_main, w)) != 0) {
		pthread_mutex_destroy(&e->mu);
		pthread_cond_destroy(&e->cv);
		return pti_err_set(PT_ENOMEM, "evaluator thread: %s",
		    strerror(rv));
	}
	e->started = 1;
	return 0;
}

int pti_eval_row(pti_trainer *w, int64_t ver, uint64_t wstep)
{
	double t = pti_wall_s();
	int rv;
	if (w->evaluator == NULL && (rv = evq_start(w)) != 0)
		return rv;
	// A sparse model's rows to evaluate: read between two steps, their
	// bytes no step's.
	if (w->sparse != NULL) {
		uint64_t tx0, rx0, tx1, rx1;
		pti_client_bytes(w->client, &tx0, &rx0);
		if ((rv = pti_sparse_fill(w)) != 0)
			return rv;
		pti_client_bytes(w->client, &tx1, &rx1);
		w->tx_mark += tx1 - tx0;
		w->rx_mark += rx1 - rx0;
	}
	pti_evaluator *e = w->evaluator;
	pthread_mutex_lock(&e->mu);
	if (e->n == e->cap) {
		double began = pti_clock_s();
		while (e->n == e->cap)
			pthread_cond_wait(&e->cv, &e->mu);
		e->waited_s += pti_clock_s() - began;
	}
	evq_slot *s = &e->slot[(e->head + e->n) % e->cap];
	pthread_mutex_unlock(&e->mu);
	// The slot is the caller's until it is counted in n.
	size_t bytes = w->n_eval * sizeof(float);
	if (s->params == NULL && (s->params = malloc(bytes)) == NULL)
		return pti_err_set(PT_ENOMEM, "a copy of the parameters to "
		    "evaluate");
	memcpy(s->params, w->params, bytes);
	s->ver = ver;
	s->wstep = wstep;
	s->t = t;
	pthread_mutex_lock(&e->mu);
	e->n++;
	rv = e->rv;
	pthread_cond_broadcast(&e->cv);
	pthread_mutex_unlock(&e->mu);
	return rv;
}

int pti_eval_drain(pti_trainer *w, double *waited_s)
{
	pti_evaluator *e = w->evaluator;
	int rv = 0;
	if (waited_s != NULL)
		*waited_s = 0;
	if (e == NULL)
		return 0;
	pthread_mutex_lock(&e->mu);
	while (e->n > 0)
		pthread_cond_wait(&e->cv, &e->mu);
	rv = e->rv;
	if (waited_s != NULL)
		*waited_s = e->waited_s;
	pthread_mutex_unlock(&e->mu);
	return rv;
}

void pti_eval_stop(pti_trainer *w)
{
	pti_evaluator *e = w->evaluator;
	if (e == NULL)
		return;
	if (e->started) {
		pthread_mutex_lock(&e->mu);
		e->stop = 1;
		pthread_cond_broadcast(&e->cv);
		pthread_mutex_unlock(&e->mu);
		pthread_join(e->thread, NULL);
		pthread_mutex_destroy(&e->mu);
		pthread_cond_destroy(&e->cv);
	}
	for (uint32_t i = 0; e->slot != NULL && i < e->cap; i++)
		free(e->slot[i].params);
	free(e->slot);
	pti_model_free(e->model);
	free(e->x);
	free(e->y);
	free(e->idx);
	free(e);
	w->evaluator = NULL;
}

// planted_auc: the AUC of a click set's planted probabilities on d, the
// best any model can reach there; NaN for other data.
static double planted_auc(const pti_dataset *d)
{
	if (d->p == NULL || d->n == 0)
		return NAN;
	pti_scored *s = malloc(d->n * sizeof(*s));
	if (s == NULL)
		return NAN;
	for (uint32_t i = 0; i < d->n; i++)
		s[i] = (pti_scored){d->p[i], d->y[i]};
	double auc = pti_auc(s, d->n);
	free(s);
	return auc;
}

int pti_eval_final(pti_trainer *w, int64_t ver, double train_s)
{
	const pti_config *c = w->c;
	int rv;
	// The last eval.csv row: the final parameters on the validation set
	// (they may be the best; the test set when there is none), then the
	// test set, once, for the final and for the best-validation
	// parameters.
	double row_loss, row_acc, row_auc, tr_loss, tr_acc, tr_auc;
	double te_loss, te_acc, te_auc, bt_auc = NAN;
	double va_loss = NAN, va_acc = NAN, bt_loss = NAN, bt_acc = NAN;
	int val = w->data.val.n > 0;
	double waited;
	if ((rv = pti_eval_drain(w, &waited)) != 0 ||
	    (w->sparse != NULL && ((rv = pti_sparse_fill(w)) != 0 ||
				      (rv = pti_sparse_fill_train(w)) != 0)) ||
	    (rv = eval_write(w, w->model, w->x, w->y, w->idx, w->params, ver,
		 w->steps, pti_wall_s(), &row_loss, &row_acc, &row_auc)) != 0 ||
	    (rv = eval_on(w, w->params, &w->data.train, &tr_loss, &tr_acc,
		 &tr_auc)) != 0)
		return rv;
	if (!val) {
		te_loss = row_loss;
		te_acc = row_acc;
		te_auc = row_auc;
	} else if ((rv = eval_on(w, w->params, &w->data.test, &te_loss,
			&te_acc, &te_auc)) != 0 ||
	    (rv = eval_on(w, w->best, &w->data.test, &bt_loss, &bt_acc,
		 &bt_auc)) != 0) {
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
	    (double)w->best_ver, bt_loss, bt_acc, waited, tr_auc, te_auc,
	    bt_auc, planted_auc(&w->data.test)};
	if ((rv = pti_record_final(w, row)) != 0)
		return rv;
	w->finished = 1;
	if (c->save_model[0] != '\0' &&
	    (rv = w->sparse != NULL ? pti_sparse_save(w, c->save_model)
				    : pti_modelfile_save(c->save_model,
					  &w->layout, w->params)) != 0)
		return rv;
	return 0;
}
