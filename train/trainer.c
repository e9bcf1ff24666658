// train/trainer.c - a worker's state and the pieces of a step every way
// of training shares (see trainer.h).
//
// Data order: every epoch the training set is permuted by a generator
// seeded with (seed, epoch) that all workers share. Global step t uses
// block t mod steps_per_epoch of B examples of that permutation, and
// worker r takes the r-th slice of B/W examples of the block; so a sync
// job with W workers performs the same SGD as one worker with batch B.
#include "train/trainer.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/clock.h"
#include "common/err.h"
#include "common/rng.h"
#include "common/testhook.h"
#include "train/eval.h"
#include "train/sparse.h"

void pti_train_sleep_ms(double ms)
{
	if (ms <= 0)
		return;
	struct timespec ts = {(time_t)(ms / 1000),
	    (long)(fmod(ms, 1000.0) * 1e6)};
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

int pti_trainer_init(pti_trainer *w, const pti_config *c)
{
	int rv;
	memset(w, 0, sizeof(*w));
	w->c = c;
	w->t0 = c->job.t0 > 0 ? c->job.t0 : pti_wall_s();
	w->best_acc = -1;
	w->first_loss = -1;
	w->delay = c->delay_spec;
	if ((rv = pti_config_straggler(c, c->rank, &w->straggle_ms)) != 0 ||
	    (rv = pti_config_load_data(c, &w->data)) != 0 ||
	    (rv = pti_layout_init(&w->layout, c->model, w->data.train.dim,
		 w->data.train.classes)) != 0)
		return rv;
	w->b = c->job.batch / c->job.workers;
	w->spe = w->data.train.n / c->job.batch;
	if (w->spe == 0)
		return pti_err_set(PT_EINVAL,
		    "--batch %u is larger than the %u training examples of %s",
		    c->job.batch, w->data.train.n, c->data);
	w->steps = pti_test_steps(c->rank,
	    c->steps ? c->steps : (uint64_t)c->epochs * w->spe);
	uint32_t rows = w->b > PTI_EVAL_CHUNK ? w->b : PTI_EVAL_CHUNK;
	uint64_t np = w->layout.n_params;
	w->n_eval = np;
	if (w->layout.n_tables > 0 && (rv = pti_sparse_init(w)) != 0)
		return rv;
	w->params = w->own_params = calloc(w->n_eval, sizeof(float));
	w->grad = w->own_grad = calloc(np, sizeof(float));
	w->x = malloc((size_t)rows * w->data.train.dim * sizeof(float));
	w->y = malloc(rows);
	w->idx = malloc(rows * sizeof(uint32_t));
	if (!w->params || !w->grad || !w->x || !w->y || !w->idx)
		return pti_err_set(PT_ENOMEM, "worker %u buffers", c->rank);
	if ((rv = pti_batches_open(&w->batches, &w->data.train, c->job.seed,
		 c->job.batch, c->job.workers, c->rank, (int)c->prefetch)) != 0)
		return rv;
	return w->sparse != NULL ? 0 : pti_model_alloc(&w->model, &w->layout,
					   rows);
}

void pti_trainer_fini(pti_trainer *w)
{
	if (w->csv)
		fclose(w->csv);
	if (w->eval)
		fclose(w->eval);
	pti_eval_stop(w); // before the data it reads
	pt_worker_close(w->pw);
	pti_model_free(w->model);
	// The prefetch thread may still be gathering the step after the
	// last from w->data: joined before the data is freed.
	pti_batches_close(w->batches);
	pti_sparse_fini(w);
	pti_data_fini(&w->data);
	free(w->own_params);
	free(w->own_grad);
	free(w->x);
	free(w->y);
	free(w->idx);
	free(w->best);
}

// trainer_delay is the injected delay in ms for this worker at step t:
// its --straggler entries plus a --delay draw that depends only on
// (seed, rank, step), so the same seed gives the same delays.
static double trainer_delay(const pti_trainer *w, uint64_t t)
{
	const pti_config *c = w->c;
	double ms = w->straggle_ms;
	double u = pti_u64_to_unit(pti_hash3(c->job.seed ^ 0xde1a7ULL, c->rank, t));
	if (w->delay.kind == PT_DELAY_EXP)
		ms += -w->delay.a * log(1.0 - u);
	else if (w->delay.kind == PT_DELAY_UNIFORM)
		ms += w->delay.a + (w->delay.b - w->delay.a) * u;
	return ms;
}

void pti_trainer_batch(pti_trainer *w, pti_step *st, uint64_t t,
    const float **x, const uint8_t **y)
{
	memset(st, 0, sizeof(*st));
	st->t = t;
	st->rows = NAN;
	st->t_a = pti_wall_s();
	st->epoch = (uint32_t)(t / w->spe);
	pti_batches_get(w->batches, t, x, y);
	st->delay = trainer_delay(w, t);
	pti_train_sleep_ms(st->delay);
	st->t_b = pti_wall_s();
}

double pti_trainer_limit(const pti_trainer *w)
{
	return w->first_loss < 0
		   ? INFINITY
		   : fmax(10 * w->first_loss,
			 2 * log((double)w->data.train.classes));
}

int pti_trainer_check(pti_trainer *w, const pti_step *st)
{
	if (w->first_loss < 0)
		w->first_loss = st->loss;
	return !isfinite(st->loss) || !isfinite(st->sumsq) ||
	       st->loss > pti_trainer_limit(w);
}

int pti_trainer_diverged(const pti_trainer *w, double loss, double sumsq,
    uint64_t t)
{
	return pti_err_set(PT_EDIVERGED, "worker %u: loss %g, gradient norm %g "
	    "at step %llu (it started at %g): training diverged", w->c->rank,
	    loss, sqrt(sumsq), (unsigned long long)(t + 1), w->first_loss);
}
