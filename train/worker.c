// train/worker.c - the training loop of one worker.
//
// Data order: every epoch the training set is permuted by a generator
// seeded with (seed, epoch) that all workers share. Global step t uses
// block t mod steps_per_epoch of B examples of that permutation, and
// worker r takes the r-th slice of B/W examples of the block; so a sync
// job with W workers performs the same SGD as one worker with batch B.
#include "train/worker.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "client/api.h"
#include "client/client.h"
#include "common/blas.h"
#include "common/clock.h"
#include "common/data.h"
#include "common/err.h"
#include "common/job.h"
#include "common/layout.h"
#include "common/modelfile.h"
#include "common/outputs.h"
#include "common/proto.h"
#include "common/rng.h"
#include "model/model.h"
#include "ps/checkpoint.h"
#include "ps/optim.h"
#include "train/batch.h"
#include "train/ring.h"

#define EVAL_CHUNK 500u // examples per forward pass when evaluating
#define WORKER_REJOIN_MAX 50 // rejoins in a row without a step done

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

int pt_worker_evaluate(struct pti_model *m, const float *params,
    const struct pt_dataset *d, uint32_t max_batch, float *xbuf,
    uint8_t *ybuf, uint32_t *idxbuf, double *loss, double *acc)
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

typedef struct worker {
	const pt_config *c;
	pt_data data;
	pt_layout layout;
	struct pti_model *model;
	pt_worker *pw;      // the library's worker, once it has joined
	pti_client *client;  // its connection to the servers
	float *params, *grad; // (n_params)
	float *x;             // (max(b, EVAL_CHUNK), dim)
	uint8_t *y;
	uint32_t *idx;
	pti_batches *batches; // each step's examples (--prefetch: ahead)
	float *best;          // (n_params) best-validation parameters, or NULL
	double best_acc;      // their validation accuracy; -1: none yet
	uint64_t best_step;   // worker steps done when they were evaluated
	int64_t best_ver;     // their version
	FILE *csv, *eval;
	uint32_t b, spe; // per-worker batch, steps per epoch
	uint64_t steps;
	double straggle_ms; // --straggler's delay for this worker, per step
	pt_delay delay;     // --delay
	double t0;
	int finished;  // this worker finished the job (worker_final)
	uint32_t lost; // the workers lost then, by server 0's count
} worker;

// worker_open_csv starts DIR/name with the header of table t, or with
// append set (a resumed or restarted worker) adds to what is there.
static FILE *worker_open_csv(const pt_config *c, const char *name,
    const pti_table *t, int append)
{
	char path[PT_PATH_MAX + 64];
	snprintf(path, sizeof(path), "%s/%s", c->out, name);
	FILE *f = fopen(path, append ? "a" : "w");
	if (f == NULL) {
		pti_err_set(PT_EIO, "%s: %s", path, strerror(errno));
		return NULL;
	}
	if (ftell(f) == 0)
		pti_csv_header(f, t);
	return f;
}

// eval.csv: the periodic evaluations are on the validation set when
// there is one, else on the test set, and the header says which.
static const pti_table *worker_eval_table(const worker *w)
{
	return w->data.val.n > 0 ? &pti_csv_eval_val : &pti_csv_eval_test;
}

// worker_open_logs opens this worker's CSVs once it knows where it starts.
static int worker_open_logs(worker *w, int append)
{
	const pt_config *c = w->c;
	char name[64];
	snprintf(name, sizeof(name), "worker-%u.csv", c->rank);
	w->csv = worker_open_csv(c, name, &pti_csv_worker, append);
	if (w->csv == NULL)
		return PT_EIO;
	if (c->rank == 0 && (w->eval = worker_open_csv(c, "eval.csv",
				 worker_eval_table(w), append)) == NULL)
		return PT_EIO;
	return 0;
}

static void worker_fini(worker *w)
{
	if (w->csv)
		fclose(w->csv);
	if (w->eval)
		fclose(w->eval);
	pt_worker_close(w->pw);
	pti_model_free(w->model);
	// The prefetch thread may still be gathering the step after the
	// last from w->data: joined before the data is freed.
	pti_batches_close(w->batches);
	pt_data_fini(&w->data);
	free(w->params);
	free(w->grad);
	free(w->x);
	free(w->y);
	free(w->idx);
	free(w->best);
}

static int worker_init(worker *w, const pt_config *c)
{
	int rv;
	memset(w, 0, sizeof(*w));
	w->c = c;
	w->t0 = c->t0 > 0 ? c->t0 : now_s();
	w->best_acc = -1;
	w->delay = c->delay_spec;
	if ((rv = pt_config_straggler(c, c->rank, &w->straggle_ms)) != 0 ||
	    (rv = pt_config_load_data(c, &w->data)) != 0 ||
	    (rv = pt_layout_init(&w->layout, c->model, w->data.train.dim,
		 w->data.train.classes)) != 0)
		return rv;
	w->b = c->batch / c->workers;
	w->spe = w->data.train.n / c->batch;
	if (w->spe == 0)
		return pti_err_set(PT_EINVAL,
		    "--batch %u is larger than the %u training examples of %s",
		    c->batch, w->data.train.n, c->data);
	w->steps = c->steps ? c->steps : (uint64_t)c->epochs * w->spe;
	uint32_t rows = w->b > EVAL_CHUNK ? w->b : EVAL_CHUNK;
	uint64_t np = w->layout.n_params;
	w->params = malloc(np * sizeof(float));
	w->grad = malloc(np * sizeof(float));
	w->x = malloc((size_t)rows * w->data.train.dim * sizeof(float));
	w->y = malloc(rows);
	w->idx = malloc(rows * sizeof(uint32_t));
	if (!w->params || !w->grad || !w->x || !w->y || !w->idx)
		return pti_err_set(PT_ENOMEM, "worker %u buffers", c->rank);
	if ((rv = pti_batches_open(&w->batches, &w->data.train, c->seed,
		 c->batch, c->workers, c->rank, (int)c->prefetch)) != 0)
		return rv;
	return pti_model_alloc(&w->model, &w->layout, rows);
}

// worker_open joins the job through the library's worker (pstrain.h):
// the job is this config's options and the model's variables.
static int worker_open(worker *w)
{
	pt_job *job;
	int rv = pt_job_alloc(&job);
	if (rv != 0)
		return rv;
	job->c = *w->c;
	job->l = w->layout;
	rv = pt_worker_open(&w->pw, job, w->c->rank, w->c->connect);
	pt_job_free(job);
	if (rv == 0)
		w->client = pti_worker_client(w->pw);
	return rv;
}

static int worker_eval(worker *w, const float *params,
    const pt_dataset *d, double *loss, double *acc)
{
	return pt_worker_evaluate(w->model, params, d,
	    EVAL_CHUNK > w->b ? EVAL_CHUNK : w->b, w->x, w->y, w->idx, loss,
	    acc);
}

// worker_eval_row evaluates the current parameters on the validation set
// (the test set when there is none), appends the row to eval.csv, and
// keeps the parameters when they are the best on validation so far. The
// row's wall_s is when the evaluation began, eval_s how long it took, so
// that training time can leave evaluation out. *loss and *acc get the
// result.
static int worker_eval_row(worker *w, int64_t ver, uint64_t wstep,
    double *loss_out, double *acc_out)
{
	const pt_dataset *d = w->data.val.n > 0 ? &w->data.val : &w->data.test;
	double loss, acc, t = now_s();
	int rv = worker_eval(w, w->params, d, &loss, &acc);
	if (rv != 0)
		return rv;
	if (w->eval == NULL && (w->eval = worker_open_csv(w->c, "eval.csv",
				    worker_eval_table(w), 1)) == NULL)
		return PT_EIO;
	double row[PTI_EV_N] = {(double)ver, t - w->t0, loss, acc,
	    (double)wstep, now_s() - t};
	pti_csv_row(w->eval, worker_eval_table(w), row);
	fflush(w->eval);
	if (w->data.val.n > 0 && acc > w->best_acc) {
		size_t bytes = w->layout.n_params * sizeof(float);
		if (w->best == NULL && (w->best = malloc(bytes)) == NULL)
			return pti_err_set(PT_ENOMEM, "best parameters");
		memcpy(w->best, w->params, bytes);
		w->best_acc = acc;
		w->best_step = wstep;
		w->best_ver = ver;
	}
	*loss_out = loss;
	*acc_out = acc;
	return 0;
}

// worker_recoverable: errors a restarting server causes (a closed
// connection, a server that does not know this worker yet, servers at
// different versions for a moment), which rejoining mends.
static int worker_recoverable(int rv)
{
	return rv == PT_ECLOSED || rv == PT_ESTATE;
}

static void sleep_ms(double ms);

// worker_join joins the job (the first time through worker_open) and
// pulls the parameters; *t, the step this worker is at, becomes the step
// to go on from (sync: the servers' version). Joining retries the errors
// a restarting server causes for at most --rpc-timeout seconds; a pull
// that meets one joins again.
static int worker_join(worker *w, uint64_t *t)
{
	const pt_config *c = w->c;
	double until = now_s() + c->rpc_timeout;
	pti_client_step info;
	for (;;) {
		int64_t start;
		int rv = w->pw == NULL ? worker_open(w)
				       : pti_worker_join(w->pw, (int64_t)*t,
					     &start);
		if (rv == 0)
			rv = pti_client_pull(w->client, w->params, -1, &info);
		if (rv == 0) {
			*t = (uint64_t)(c->mode == PT_MODE_SYNC
					    ? info.ver_min
					    : pt_worker_start(w->pw));
			return 0;
		}
		if (!worker_recoverable(rv) || now_s() > until)
			return rv;
		sleep_ms(50);
	}
}

// worker_finish says done and waits until every worker has said done (or
// been lost) on every server. The lowest-ranked worker not lost (worker
// 0 unless it died) then takes the final parameters, evaluates and saves
// them, and stops the servers. The others wait for that: should the
// finishing worker die first, the next one takes over; once the servers
// stop, they return. When the servers went back to an earlier step
// meanwhile (a sync job restarted from a checkpoint), *t is set to it and
// training goes on.
static int worker_final(worker *w, int64_t ver, double train_s);

static int worker_finish(worker *w, double train_s, uint64_t *t)
{
	const pt_config *c = w->c;
	pti_client_step info;
	uint32_t first = 0;
	int rv, tries = 0;

	for (;;) {
		int all = 0;
		rv = pti_client_simple(w->client, PT_OP_DONE, NULL);
		while (rv == 0 && (all = pti_worker_all_done(w->pw, &first)) == 0)
			usleep(20 * 1000);
		if (rv == 0 && all < 0)
			rv = -all;
		if (rv == 0)
			break;
		if (!worker_recoverable(rv) || ++tries > WORKER_REJOIN_MAX)
			return rv;
		fprintf(stderr, "worker %u: finishing: %s; rejoining\n",
		    c->rank, pt_errmsg(rv));
		uint64_t at = *t;
		if ((rv = worker_join(w, &at)) != 0)
			return rv;
		if (at < w->steps) {
			*t = at;
			return 0;
		}
	}
	while (first != c->rank) {
		usleep(50 * 1000);
		// Failing now means the servers stopped (or one died, which
		// the launcher handles): the job is done with this worker.
		if (pti_worker_all_done(w->pw, &first) < 0)
			return 0;
	}
	if (c->rank != 0)
		fprintf(stderr, "worker %u: worker 0 was lost; this worker "
		    "finishes the job\n", c->rank);
	pt_stats st;
	if ((rv = pti_client_pull(w->client, w->params, -1, &info)) != 0 ||
	    (rv = worker_final(w, info.ver_min, train_s)) != 0 ||
	    (rv = pt_worker_stats(w->pw, &st)) != 0)
		return rv;
	w->lost = st.lost;
	return pti_worker_shutdown(w->pw);
}

// worker_final evaluates the final parameters (version ver), writes the
// last eval.csv row and final.csv, and saves the model when asked.
static int worker_final(worker *w, int64_t ver, double train_s)
{
	const pt_config *c = w->c;
	int rv;
	// The last eval.csv row: the final parameters on the validation set
	// (they may be the best; the test set when there is none), then the
	// test set, once, for the final and for the best-validation
	// parameters.
	double row_loss, row_acc, tr_loss, tr_acc, te_loss, te_acc;
	double va_loss = NAN, va_acc = NAN, bt_loss = NAN, bt_acc = NAN;
	int val = w->data.val.n > 0;
	if ((rv = worker_eval_row(w, ver, w->steps, &row_loss,
		 &row_acc)) != 0 ||
	    (rv = worker_eval(w, w->params, &w->data.train, &tr_loss,
		 &tr_acc)) != 0)
		return rv;
	if (!val) {
		te_loss = row_loss;
		te_acc = row_acc;
	} else if ((rv = worker_eval(w, w->params, &w->data.test, &te_loss,
			&te_acc)) != 0 ||
	    (rv = worker_eval(w, w->best, &w->data.test, &bt_loss,
		 &bt_acc)) != 0) {
		return rv;
	} else {
		va_loss = row_loss;
		va_acc = row_acc;
	}
	FILE *f = worker_open_csv(c, "final.csv", &pti_csv_final, 0);
	if (f == NULL)
		return PT_EIO;
	// A finishing worker that took over from a lost worker 0 saw only
	// the final parameters: its best is theirs.
	double row[PTI_FN_N] = {(double)ver, (double)w->steps,
	    train_s, tr_loss, tr_acc, te_loss, te_acc, va_loss, va_acc,
	    w->best ? w->best_acc : NAN, (double)w->best_step,
	    (double)w->best_ver, bt_loss, bt_acc};
	pti_csv_row(f, &pti_csv_final, row);
	fclose(f);
	w->finished = 1;
	if (c->save_model[0] != '\0' &&
	    (rv = pt_modelfile_save(c->save_model, &w->layout, w->params)) != 0)
		return rv;
	return 0;
}

// worker_delay is the injected delay in ms for this worker at step t:
// its --straggler entries plus a --delay draw that depends only on
// (seed, rank, step), so the same seed gives the same delays.
static double worker_delay(const worker *w, uint64_t t)
{
	const pt_config *c = w->c;
	double ms = w->straggle_ms;
	double u = pti_u64_to_unit(pti_hash3(c->seed ^ 0xde1a7ULL, c->rank, t));
	if (w->delay.kind == PT_DELAY_EXP)
		ms += -w->delay.a * log(1.0 - u);
	else if (w->delay.kind == PT_DELAY_UNIFORM)
		ms += w->delay.a + (w->delay.b - w->delay.a) * u;
	return ms;
}

static void sleep_ms(double ms)
{
	if (ms <= 0)
		return;
	struct timespec ts = {(time_t)(ms / 1000),
	    (long)(fmod(ms, 1000.0) * 1e6)};
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

// --layer-push: backward hands over each piece of the gradient as soon as
// it is written, first layer first (its weights in LP_BLOCKS row blocks
// where this BLAS kernel keeps their bits, pti_model_blocks_exact), and a
// thread of the worker's sends each as a pushpull while the rest is
// computed (copying a piece into its message and writing it to the socket
// would otherwise take the computing thread's time); the servers apply a
// piece once every worker has pushed it. Its reply is waited for only
// when the next step's forward needs that layer (pti_model_hooks.ready),
// so the values come back while this worker computes. A step's row is
// written once all its replies are in: its communication is the time
// spent waiting for them.
#define LP_BLOCKS 4
#define LP_PIECES (PT_MAX_LAYERS + LP_BLOCKS)

typedef struct lp_step {
	uint64_t t;                 // the step
	uint32_t epoch;
	pt_req *req[LP_PIECES];     // its pushpulls, by offset
	uint64_t off[LP_PIECES];    // where each starts in the flat vector
	uint64_t len[LP_PIECES];    // and its floats
	uint32_t queued, n, waited; // handed to the sender, sent, waited for
	int rv;                     // the first push or wait that failed
	int nonfinite;              // a piece was not finite: not pushed
	double sumsq, loss, delay;  // the gradient's squared norm
	double t_a, t_b, t_c, t_d;  // start, compute start and end, last reply
	double compute_s, wait_s;   // computing; waiting for its replies
	pti_client_step info;        // its replies, summed up
} lp_step;

typedef struct layer_push {
	worker *w;
	lp_step slot[2];
	lp_step *prev, *next; // replies under way; pieces being pushed
	double limit;         // a loss above it is not pushed (diverged)
	double first_loss;    // the first step's (worker_diverged)
	double ready_s;       // time this step's forward waited for prev
	pti_model_hooks hk;
	// The sender: mu guards the slots' queued, n, req, rv, sumsq and
	// nonfinite, and cv says that one changed; pw_mu lets one thread at
	// a time use w->pw.
	pthread_t sender;
	int started, stop;
	pthread_mutex_t mu, pw_mu;
	pthread_cond_t cv;
} layer_push;

// lp_send_main sends the queued pieces in order, one step at a time (a
// step's pieces are all sent before the next step's are queued: its
// forward waits for them). It sums the gradient's squared norm as it
// goes (off the computing thread, which reads it when the step's
// replies are in: lp_flush). A piece that is not finite is never pushed,
// nor the rest of its step, nor the next step (computed from a step
// half applied): the step fails as diverged.
static void *lp_send_main(void *arg)
{
	layer_push *lp = arg;
	worker *w = lp->w;
	pthread_mutex_lock(&lp->mu);
	for (;;) {
		lp_step *st = NULL;
		for (int i = 0; i < 2; i++)
			if (lp->slot[i].queued > lp->slot[i].n)
				st = &lp->slot[i];
		if (st == NULL) {
			if (lp->stop)
				break;
			pthread_cond_wait(&lp->cv, &lp->mu);
			continue;
		}
		lp_step *before = st == &lp->slot[0] ? &lp->slot[1]
						     : &lp->slot[0];
		uint32_t i = st->n;
		uint64_t off = st->off[i], n = st->len[i];
		int64_t t = (int64_t)st->t;
		pthread_mutex_unlock(&lp->mu);
		double sq = pti_blas_sumsq(w->grad + off, n);
		pthread_mutex_lock(&lp->mu);
		st->sumsq += sq;
		if (!isfinite(sq) || before->nonfinite) {
			st->nonfinite = 1;
			st->rv = st->rv ? st->rv : PT_EDIVERGED;
			st->queued = st->n; // the rest is not sent
			pthread_cond_broadcast(&lp->cv);
			continue;
		}
		pthread_mutex_unlock(&lp->mu);
		pt_req *req = NULL;
		pthread_mutex_lock(&lp->pw_mu);
		int rv = pt_pushpull(w->pw, t, PT_ALL, off, n, w->grad + off,
		    w->params + off, &req);
		pthread_mutex_unlock(&lp->pw_mu);
		pthread_mutex_lock(&lp->mu);
		if (rv == 0) {
			st->req[i] = req;
			st->n++;
		} else {
			fprintf(stderr, "worker %u: step %lld: %s\n",
			    w->c->rank, (long long)t + 1, pt_errmsg(rv));
			st->rv = st->rv ? st->rv : rv;
			st->queued = st->n; // the rest is not sent
		}
		pthread_cond_broadcast(&lp->cv);
	}
	pthread_mutex_unlock(&lp->mu);
	return NULL;
}

// lp_wait waits for the pieces of st that start before `end` (all of them
// for UINT64_MAX), in order, summing up their replies; their values are
// then in w->params. Returns st's first error.
static int lp_wait(layer_push *lp, lp_step *st, uint64_t end)
{
	double t0 = now_s();
	pthread_mutex_lock(&lp->mu);
	for (;;) {
		if (st->waited < st->n && st->off[st->waited] < end) {
			pt_req *req = st->req[st->waited++];
			pti_client_step in;
			pthread_mutex_unlock(&lp->mu);
			pthread_mutex_lock(&lp->pw_mu);
			int r = pti_wait_info(lp->w->pw, req, &in);
			pthread_mutex_unlock(&lp->pw_mu);
			pthread_mutex_lock(&lp->mu);
			pti_client_step *o = &st->info;
			if (r != 0)
				st->rv = st->rv ? st->rv : r;
			else {
				if (st->waited == 1 || in.ver_min < o->ver_min)
					o->ver_min = in.ver_min;
				if (in.stale_max > o->stale_max)
					o->stale_max = in.stale_max;
				if (in.lr > o->lr)
					o->lr = in.lr;
				o->stale_mean = in.stale_mean;
			}
		} else if (st->waited == st->n && st->n < st->queued &&
			   st->off[st->n] < end) {
			pthread_cond_wait(&lp->cv, &lp->mu); // not sent yet
		} else {
			break;
		}
	}
	int rv = st->rv;
	pthread_mutex_unlock(&lp->mu);
	st->t_d = now_s();
	st->wait_s += st->t_d - t0;
	return rv;
}

static int lp_ready(void *arg, uint32_t l)
{
	layer_push *lp = arg;
	const pt_var *b = &lp->w->layout.vars[2 * l + 1]; // b_l ends layer l
	double t0 = now_s();
	int rv = lp_wait(lp, lp->prev, b->off + b->n);
	lp->ready_s += now_s() - t0;
	return rv;
}

static void lp_done(void *arg, uint64_t off, uint64_t n, double loss)
{
	layer_push *lp = arg;
	lp_step *st = lp->next;
	// A loss that diverged is never pushed: the step then fails as
	// diverged (worker_loop); nor is a gradient that is not finite
	// (lp_send_main).
	if (!isfinite(loss) || loss > lp->limit)
		return;
	pthread_mutex_lock(&lp->mu);
	if (st->rv == 0 && st->queued == LP_PIECES) // beyond the hooks' count
		st->rv = pti_err_set(PT_EINVAL, "worker: a step of over %d "
		    "pieces", LP_PIECES);
	if (st->rv == 0) {
		st->off[st->queued] = off;
		st->len[st->queued++] = n;
		pthread_cond_broadcast(&lp->cv);
	}
	pthread_mutex_unlock(&lp->mu);
}

// lp_reset empties a slot whose pieces are all sent and waited for.
static void lp_reset(layer_push *lp, lp_step *st)
{
	pthread_mutex_lock(&lp->mu);
	memset(st, 0, sizeof(*st));
	pthread_mutex_unlock(&lp->mu);
}

static int lp_init(layer_push *lp, worker *w)
{
	memset(lp, 0, sizeof(*lp));
	lp->w = w;
	lp->prev = &lp->slot[0];
	lp->next = &lp->slot[1];
	lp->hk.ready = lp_ready;
	lp->hk.done = lp_done;
	lp->hk.arg = lp;
	pthread_mutex_init(&lp->mu, NULL);
	pthread_mutex_init(&lp->pw_mu, NULL);
	pthread_cond_init(&lp->cv, NULL);
	if (w->c->layer_push != PT_LP_ON)
		return 0;
	int exact = pti_model_blocks_exact(w->model, w->b, LP_BLOCKS);
	if (exact < 0)
		return -exact;
	lp->hk.blocks = exact ? LP_BLOCKS : 1;
	if (pthread_create(&lp->sender, NULL, lp_send_main, lp) != 0)
		return pti_err_set(PT_ENOMEM, "worker: the sending thread");
	lp->started = 1;
	return 0;
}

static void lp_fini(layer_push *lp)
{
	if (lp->started) {
		pthread_mutex_lock(&lp->mu);
		lp->stop = 1;
		pthread_cond_broadcast(&lp->cv);
		pthread_mutex_unlock(&lp->mu);
		pthread_join(lp->sender, NULL);
	}
	pthread_cond_destroy(&lp->cv);
	pthread_mutex_destroy(&lp->mu);
	pthread_mutex_destroy(&lp->pw_mu);
}

// lp_drop waits for every piece still under way, whatever came of them
// (a server went away: the worker rejoins).
static void lp_drop(layer_push *lp)
{
	for (int i = 0; i < 2; i++) {
		(void)lp_wait(lp, &lp->slot[i], UINT64_MAX);
		lp_reset(lp, &lp->slot[i]);
	}
}

// worker_row writes step t's row of worker-R.csv (times in seconds) and,
// every 10 s, a progress line.
static void worker_row(worker *w, double *t_log, uint64_t t, uint32_t epoch,
    double loss, double norm, double step_s, double compute_s,
    double comm_s, const pti_client_step *info, double delay, double t_d)
{
	struct rusage ru; // the process's page faults and memory
	getrusage(RUSAGE_SELF, &ru);
	double row[PTI_WK_N] = {(double)(t + 1), epoch, t_d - w->t0, loss,
	    sqrt(norm), step_s * 1e3, compute_s * 1e3, comm_s * 1e3,
	    (double)info->stale_max, info->lr, delay, (double)info->ver_min,
	    (double)ru.ru_minflt, (double)ru.ru_maxrss / 1024};
	pti_csv_row(w->csv, &pti_csv_worker, row);
	fflush(w->csv);
	if (t_d - *t_log >= 10.0) {
		fprintf(stderr, "worker %u: step %llu/%llu loss %.4f\n",
		    w->c->rank, (unsigned long long)(t + 1),
		    (unsigned long long)w->steps, loss);
		*t_log = t_d;
	}
}

static int worker_diverged(const worker *w, double loss, double norm,
    uint64_t t, double first_loss);

// lp_flush waits for the last step's replies and writes its row; a step
// whose replies failed writes none, and one with a piece that was not
// finite fails as diverged. Returns its first error.
static int lp_flush(layer_push *lp, double *t_log)
{
	lp_step *p = lp->prev;
	int rv = lp_wait(lp, p, UINT64_MAX);
	if (p->nonfinite)
		rv = worker_diverged(lp->w, p->loss, p->sumsq, p->t,
		    lp->first_loss);
	else if (rv == 0 && p->n > 0)
		worker_row(lp->w, t_log, p->t, p->epoch, p->loss, p->sumsq,
		    p->compute_s + p->wait_s + (p->t_b - p->t_a),
		    p->compute_s, p->wait_s, &p->info, p->delay, p->t_d);
	lp_reset(lp, p);
	return rv;
}

// worker_recover: a server went away or came back from a checkpoint:
// rejoin and go on from the step the servers say (*t). Returns rv when
// it cannot be mended.
static int worker_recover(worker *w, int rv, int *rejoins, uint64_t *t)
{
	if (!worker_recoverable(rv) || ++*rejoins > WORKER_REJOIN_MAX)
		return rv;
	fprintf(stderr, "worker %u: step %llu: %s; rejoining\n", w->c->rank,
	    (unsigned long long)(*t + 1), pt_errmsg(rv));
	return worker_join(w, t);
}

// worker_loss_limit: a loss above it has diverged. Far above its start:
// ten times the first step's loss, and at least twice chance level (a
// resumed job starts low); none before the first step.
static double worker_loss_limit(const worker *w, double first_loss)
{
	return first_loss < 0 ? INFINITY
			      : fmax(10 * first_loss,
				    2 * log((double)w->data.train.classes));
}

// worker_diverged is the error of a step t whose loss or squared
// gradient norm is not finite, or whose loss went past the limit.
static int worker_diverged(const worker *w, double loss, double norm,
    uint64_t t, double first_loss)
{
	return pti_err_set(PT_EDIVERGED, "worker %u: loss %g, gradient norm %g "
	    "at step %llu (it started at %g): training diverged", w->c->rank,
	    loss, sqrt(norm), (unsigned long long)(t + 1), first_loss);
}

// worker_begin hands step t's examples to *x, *y and sleeps the step's
// injected delay, which it returns (ms).
static double worker_begin(worker *w, uint64_t t, const float **x,
    const uint8_t **y)
{
	pti_batches_get(w->batches, t, x, y);
	double delay = worker_delay(w, t);
	sleep_ms(delay);
	return delay;
}

// worker_eval_every: steps between worker 0's evaluations, --eval-every
// or --evals-per-epoch's share of an epoch (at least 1).
static uint64_t worker_eval_every(const worker *w)
{
	const pt_config *c = w->c;
	uint64_t k = w->spe / c->evals_per_epoch;
	return c->eval_every ? c->eval_every : k > 0 ? k : 1;
}

static int worker_loop(worker *w, layer_push *lpp)
{
	const pt_config *c = w->c;
	uint64_t eval_every = worker_eval_every(w);
	pti_client_step info;
	layer_push *lp = lpp;
	double t_start = now_s(), t_log = t_start, first_loss = -1;
	uint64_t t = 0;
	int rv, rejoins = 0;

	// A resumed or restarted worker starts where the servers say: the
	// data order follows from the step, so it goes on where it stopped.
	if ((rv = worker_join(w, &t)) != 0)
		return rv;
	// Joining a job under way (resumed, restarted): keep the rows so far;
	// steps done again after a rollback show twice.
	if ((rv = worker_open_logs(w, t > 0)) != 0)
		return rv;
	for (;;) {
		if (t >= w->steps) {
			// --layer-push: the last step's replies first.
			if (c->layer_push == PT_LP_ON &&
			    (rv = lp_flush(lp, &t_log)) != 0) {
				lp_drop(lp);
				if ((rv = worker_recover(w, rv, &rejoins, &t)))
					return rv;
				continue;
			}
			// Done: finish, unless the servers went back to an
			// earlier step meanwhile (a sync restart); then go on.
			if ((rv = worker_finish(w, now_s() - t_start, &t)) != 0 ||
			    t >= w->steps)
				return rv;
			continue;
		}
		double t_a = now_s();
		uint32_t epoch = (uint32_t)(t / w->spe);
		const float *x;
		const uint8_t *y;
		double delay = worker_begin(w, t, &x, &y);
		double t_b = now_s(), loss, norm;
		// A non-finite gradient is never pushed: servers refuse it.
		double limit = worker_loss_limit(w, first_loss);
		if (c->layer_push == PT_LP_ON) {
			lp_step *st = lp->next;
			lp_reset(lp, st);
			st->t = t;
			st->epoch = epoch;
			st->t_a = t_a;
			st->t_b = t_b;
			st->delay = delay;
			lp->limit = limit;
			lp->ready_s = 0;
			rv = pti_model_grad_hooked(w->model, w->grad, &loss,
			    w->params, x, y, w->b, &lp->hk);
			st->t_c = now_s();
			st->loss = loss;
			st->compute_s = st->t_c - t_b - lp->ready_s;
			norm = 0; // summed by the sender, checked by lp_flush
			pthread_mutex_lock(&lp->mu);
			int wrv = lp->prev->rv ? lp->prev->rv : st->rv;
			pthread_mutex_unlock(&lp->mu);
			if (rv != 0 && rv != wrv)
				return rv; // the model refused the batch
			// The step before's replies are all in (the forward
			// needed every layer): its row.
			int prv = lp_flush(lp, &t_log);
			if (wrv == 0 && prv != 0)
				wrv = prv;
			if (wrv != 0) {
				lp_drop(lp);
				if ((rv = worker_recover(w, wrv, &rejoins, &t)))
					return rv;
				continue;
			}
		} else {
			rv = pti_model_grad(w->model, w->grad, &loss,
			    w->params, x, y, w->b);
			norm = pti_blas_sumsq(w->grad, w->layout.n_params);
		}
		if (rv != 0)
			return rv;
		if (first_loss < 0)
			lp->first_loss = first_loss = loss;
		if (!isfinite(loss) || !isfinite(norm) ||
		    loss > worker_loss_limit(w, first_loss)) {
			if (c->layer_push == PT_LP_ON) {
				lp_drop(lp); // what was sent is done with
				norm = pti_blas_sumsq(w->grad,
				    w->layout.n_params); // never pushed
			}
			return worker_diverged(w, loss, norm, t, first_loss);
		}
		if (c->layer_push == PT_LP_ON) {
			// Its replies come back while the next step starts.
			lp_step *done = lp->prev; // flushed, empty
			lp->prev = lp->next;
			lp->next = done;
			rejoins = 0;
			if (c->rank == 0 && (t + 1) % eval_every == 0 &&
			    t + 1 < w->steps) {
				if ((rv = lp_flush(lp, &t_log)) != 0) {
					lp_drop(lp);
					if ((rv = worker_recover(w, rv, &rejoins,
						 &t)))
						return rv;
					continue;
				}
				double ev_loss, ev_acc;
				if ((rv = worker_eval_row(w, (int64_t)t + 1,
					 t + 1, &ev_loss, &ev_acc)) != 0)
					return rv;
			}
			t++; // no backup workers: every step is this one's
			continue;
		}
		double t_c = now_s();
		pt_req *req;
		if ((rv = pt_pushpull(w->pw, (int64_t)t, PT_ALL, 0,
			 w->layout.n_params, w->grad, w->params, &req)) == 0)
			rv = pti_wait_info(w->pw, req, &info);
		if (rv != 0) {
			if ((rv = worker_recover(w, rv, &rejoins, &t)) != 0)
				return rv;
			continue;
		}
		rejoins = 0;
		double t_d = now_s();
		worker_row(w, &t_log, t, epoch, loss, norm, t_d - t_a, t_c - t_b,
		    t_d - t_c, &info, delay, t_d);
		double ev_loss, ev_acc;
		if (c->rank == 0 && (t + 1) % eval_every == 0 &&
		    t + 1 < w->steps &&
		    (rv = worker_eval_row(w, info.ver_min, t + 1, &ev_loss,
			 &ev_acc)) != 0)
			return rv;
		// In sync mode the servers' version is the next step; with
		// backup workers a late worker skips to it.
		uint64_t next = c->mode == PT_MODE_SYNC && info.ver_min > 0
				    ? (uint64_t)info.ver_min
				    : t + 1;
		t = next > t ? next : t + 1;
	}
}

// ar_ckpt_meta: an allreduce job's checkpoint is the whole model as the
// one shard of one server would hold it, version v after v updates; its
// clocks say every worker has done v steps.
static pti_ckpt_meta ar_ckpt_meta(const worker *w, const pti_optim *o,
    int64_t v)
{
	pti_ckpt_meta m = {0, 1, pt_layout_hash(&w->layout), 0,
	    w->layout.n_params, v, (uint64_t)v, (uint32_t)o->kind,
	    (uint32_t)o->n_state, w->c->workers};
	return m;
}

// ar_resume loads --resume-version's checkpoint into the parameters and
// the optimizer's state; *t becomes its version (the steps done).
static int ar_resume(worker *w, const pti_optim *o, float *s1, float *s2,
    uint64_t *t)
{
	const pt_config *c = w->c;
	char path[PT_PATH_MAX + 64];
	pti_ckpt_meta want = ar_ckpt_meta(w, o, c->resume_version), got;
	float *vecs[3] = {w->params, s1, s2};
	pti_ckpt_path(path, sizeof(path), c->checkpoint_dir, 0,
	    c->resume_version);
	int rv = pti_ckpt_load(path, &want, NULL, vecs, &got);
	if (rv != 0)
		return rv;
	*t = (uint64_t)got.version;
	fprintf(stderr, "worker %u: resumed from %s at step %lld\n", c->rank,
	    path, (long long)got.version);
	return 0;
}

// ar_checkpoint: worker 0 writes the model when one is due after step
// version v. A failed write is said and training goes on.
static void ar_checkpoint(worker *w, pti_ckpt_sched *sc, const pti_optim *o,
    const float *s1, const float *s2, int64_t v, int64_t *clocks)
{
	const pt_config *c = w->c;
	if (c->rank != 0 || !pti_ckpt_due(sc, v, pti_clock_s()))
		return;
	pti_ckpt_meta m = ar_ckpt_meta(w, o, v);
	const float *vecs[3] = {w->params, s1, s2};
	for (uint32_t r = 0; r < c->workers; r++)
		clocks[r] = v;
	int rv = pti_ckpt_save(c->checkpoint_dir, &m, clocks, vecs);
	if (rv != 0)
		fprintf(stderr, "worker 0: checkpoint failed: %s\n",
		    pt_errmsg(rv));
}

// --mode allreduce: every worker holds the whole model and its optimizer
// state, starting from the values servers would (pt_layout_init_values),
// sums its gradient with the others' in the ring (train/ring.h) and
// applies the mean as a sync server does (the same update, learning rate
// and warm-up): so every worker keeps the same parameters, and worker 0
// evaluates and finishes the job alone. A worker that fails breaks the
// ring: its neighbours' next message times out, and the launcher ends
// the job.
static int worker_allreduce(worker *w)
{
	const pt_config *c = w->c;
	uint64_t n = w->layout.n_params;
	uint64_t eval_every = worker_eval_every(w);
	pti_optim opt = c->optim;
	opt.weight_decay = c->weight_decay;
	double lr_base = pti_job_lr(c);
	double warmup = pti_job_warmup(c, w->data.train.n);
	float *s1 = NULL, *s2 = NULL; // the optimizer's state, (n)
	int64_t *clocks = NULL;       // (workers), for checkpoints
	pti_ckpt_sched sc = {c->ckpt_every, c->ckpt_seconds, pti_clock_s()};
	uint64_t t0 = 0;
	pti_ring *ring = NULL;
	pt_secret secret;
	double t_log = now_s(), t_start = t_log, first_loss = -1;
	int rv;

	pt_layout_init_values(w->params, &w->layout, c->seed, 0, n);
	if ((opt.n_state >= 1 && (s1 = calloc(n, sizeof(float))) == NULL) ||
	    (opt.n_state >= 2 && (s2 = calloc(n, sizeof(float))) == NULL) ||
	    (clocks = calloc(c->workers, sizeof(int64_t))) == NULL) {
		rv = pti_err_set(PT_ENOMEM, "worker %u: optimizer state",
		    c->rank);
		goto done;
	}
	if (c->rank == 0 && c->ckpt_every != 0 &&
	    mkdir(c->checkpoint_dir, 0777) != 0 && errno != EEXIST) {
		rv = pti_err_set(PT_EIO, "--checkpoint-dir %s: %s",
		    c->checkpoint_dir, strerror(errno));
		goto done;
	}
	// A resumed job goes on from its checkpoint's step, appending to
	// the rows so far (the data order follows from the step).
	if ((c->resume_version >= 0 &&
		(rv = ar_resume(w, &opt, s1, s2, &t0)) != 0) ||
	    (rv = pt_secret_load(&secret, c->secret_file)) != 0 ||
	    (rv = pti_ring_open(&ring, c->connect, c->rank, c->workers,
		 &secret, pt_layout_hash(&w->layout), c->rpc_timeout)) != 0 ||
	    (rv = worker_open_logs(w, t0 > 0)) != 0)
		goto done;
	for (uint64_t t = t0; t < w->steps; t++) {
		double t_a = now_s(), loss, norm;
		uint32_t epoch = (uint32_t)(t / w->spe);
		const float *x;
		const uint8_t *y;
		double delay = worker_begin(w, t, &x, &y);
		double t_b = now_s();
		if ((rv = pti_model_grad(w->model, w->grad, &loss, w->params, x,
			 y, w->b)) != 0)
			goto done;
		norm = pti_blas_sumsq(w->grad, n);
		if (first_loss < 0)
			first_loss = loss;
		if (!isfinite(loss) || !isfinite(norm) ||
		    loss > worker_loss_limit(w, first_loss)) {
			rv = worker_diverged(w, loss, norm, t, first_loss);
			goto done;
		}
		double t_c = now_s();
		if ((rv = pti_ring_sum(ring, w->grad, n, (int64_t)t)) != 0)
			goto done;
		double t_d = now_s();
		pti_client_step info = {(int64_t)t + 1, 0, 0,
		    pti_lr_at(lr_base, warmup, (int64_t)t)};
		pti_optim_apply(&opt, w->params, s1, s2, w->grad, n,
		    c->workers, info.lr, t + 1);
		ar_checkpoint(w, &sc, &opt, s1, s2, (int64_t)t + 1, clocks);
		double t_e = now_s();
		worker_row(w, &t_log, t, epoch, loss, norm, t_e - t_a,
		    t_c - t_b, t_d - t_c, &info, delay, t_e);
		double ev_loss, ev_acc;
		if (c->rank == 0 && (t + 1) % eval_every == 0 &&
		    t + 1 < w->steps &&
		    (rv = worker_eval_row(w, (int64_t)t + 1, t + 1, &ev_loss,
			 &ev_acc)) != 0)
			goto done;
	}
	if (c->rank == 0)
		rv = worker_final(w, (int64_t)w->steps, now_s() - t_start);
done:
	pti_ring_close(ring);
	memset(&secret, 0, sizeof(secret));
	free(s1);
	free(s2);
	free(clocks);
	return rv;
}

int pt_worker_run(const pt_config *c, pt_worker_result *res)
{
	worker w;
	layer_push lp;
	int rv = worker_init(&w, c);
	if (rv == 0 && c->mode == PT_MODE_ALLREDUCE) {
		rv = worker_allreduce(&w);
	} else if (rv == 0) {
		if ((rv = lp_init(&lp, &w)) == 0)
			rv = worker_loop(&w, &lp);
		lp_fini(&lp);
	}
	if (res != NULL) {
		pt_worker_result r = {w.finished, w.steps, w.spe,
		    w.data.train.n, w.data.val.n, w.layout.width[
		    w.layout.n_layers], w.lost, w.t0};
		*res = r;
	}
	worker_fini(&w);
	return rv;
}
