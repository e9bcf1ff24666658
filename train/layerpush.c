// train/layerpush.c - --layer-push on, a way of sending
// (train/sender.h): backward hands over each piece of the gradient as
// soon as it is written, first layer first (its weights in LP_BLOCKS row
// blocks where this BLAS kernel keeps their bits,
// pti_model_blocks_exact), and a thread of the worker's sends each as a
// pushpull while the rest is computed (copying a piece into its message
// and writing it to the socket would otherwise take the computing
// thread's time); the servers apply a piece once every worker has pushed
// it. Its reply is waited for only when the next step's forward needs
// that layer (pti_model_hooks.ready), so the values come back while this
// worker computes: a step is done once the next step's gradient is
// (flush), and its communication is the time spent waiting for its
// replies.
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/blas.h"
#include "common/clock.h"
#include "common/err.h"
#include "train/sender.h"

#define LP_BLOCKS 4
#define LP_PIECES (PT_MAX_LAYERS + LP_BLOCKS)

typedef struct lp_step {
	pti_step s;                 // the step, its loss, sumsq and info
	pt_req *req[LP_PIECES];     // its pushpulls, by offset
	uint64_t off[LP_PIECES];    // where each starts in the flat vector
	uint64_t len[LP_PIECES];    // and its floats
	uint32_t queued, n, waited; // handed to the sender, sent, waited for
	int rv;                     // the first push or wait that failed
	int nonfinite;              // a piece was not finite: not pushed
	double t_c, t_d;            // compute end, last reply
	double compute_s, wait_s;   // computing; waiting for its replies
} lp_step;

typedef struct layer_push {
	pti_trainer *w;
	lp_step slot[2];
	lp_step *prev, *next; // replies under way; pieces being pushed
	double limit;         // a loss above it is not pushed (diverged)
	double ready_s;       // time this step's forward waited for prev
	int wrv;              // the sends' first error as the gradient ended
	pti_step done;        // the step flush last found done
	pti_model_hooks hk;
	// The sender: mu guards the slots' queued, n, req, rv, s.sumsq and
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
	pti_trainer *w = lp->w;
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
		int64_t t = (int64_t)st->s.t;
		pthread_mutex_unlock(&lp->mu);
		double sq = pti_blas_sumsq(w->grad + off, n);
		pthread_mutex_lock(&lp->mu);
		st->s.sumsq += sq;
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
	double t0 = pti_wall_s();
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
			pti_client_step *o = &st->s.info;
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
	st->t_d = pti_wall_s();
	st->wait_s += st->t_d - t0;
	return rv;
}

static int lp_ready(void *arg, uint32_t l)
{
	layer_push *lp = arg;
	const pti_var *b = &lp->w->layout.vars[2 * l + 1]; // b_l ends layer l
	double t0 = pti_wall_s();
	int rv = lp_wait(lp, lp->prev, b->off + b->n);
	lp->ready_s += pti_wall_s() - t0;
	return rv;
}

static void lp_done(void *arg, uint64_t off, uint64_t n, double loss)
{
	layer_push *lp = arg;
	lp_step *st = lp->next;
	// A loss that diverged is never pushed: the step then fails as
	// diverged (train/loop.c); nor is a gradient that is not finite
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

// lp_drop waits for every piece still under way, whatever came of them
// (a server went away: the worker rejoins).
static void lp_drop(void *s)
{
	layer_push *lp = s;
	for (int i = 0; i < 2; i++) {
		(void)lp_wait(lp, &lp->slot[i], UINT64_MAX);
		lp_reset(lp, &lp->slot[i]);
	}
}

// lp_grad computes st's gradient into the next slot: its forward waits
// for each layer of the step before (prev), its backward hands the
// pieces to the sending thread. The sends' errors so far wait for
// lp_flush; a refused batch returns at once.
static int lp_grad(void *s, pti_step *st, const float *x, const uint8_t *y)
{
	layer_push *lp = s;
	pti_trainer *w = lp->w;
	lp_step *p = lp->next;
	double loss = 0;
	lp_reset(lp, p);
	p->s = *st;
	lp->limit = pti_trainer_limit(w);
	lp->ready_s = 0;
	int rv = pti_model_grad_hooked(w->model, w->grad, &loss, w->params, x,
	    y, w->b, &lp->hk);
	p->t_c = pti_wall_s();
	p->s.loss = st->loss = loss;
	p->compute_s = p->t_c - st->t_b - lp->ready_s;
	st->sumsq = 0; // summed by the sender, checked by lp_flush
	pthread_mutex_lock(&lp->mu);
	int wrv = lp->prev->rv ? lp->prev->rv : p->rv;
	pthread_mutex_unlock(&lp->mu);
	if (rv != 0 && rv != wrv)
		return rv; // the model refused the batch
	lp->wrv = wrv;
	return 0;
}

// lp_flush waits for the replies of the step before (prev; after a
// gradient, the forward has waited for all of them) and empties its
// slot: it is done unless its replies failed, and one with a piece that
// was not finite fails as diverged. Returns the sends' error lp_grad
// saw, else its first error.
static int lp_flush(void *s, pti_step **done)
{
	layer_push *lp = s;
	lp_step *p = lp->prev;
	int rv = lp_wait(lp, p, UINT64_MAX);
	*done = NULL;
	if (p->nonfinite) {
		rv = pti_trainer_diverged(lp->w, p->s.loss, p->s.sumsq, p->s.t);
	} else if (rv == 0 && p->n > 0) {
		lp->done = p->s;
		lp->done.step_s = p->compute_s + p->wait_s +
				  (p->s.t_b - p->s.t_a);
		lp->done.compute_s = p->compute_s;
		lp->done.comm_s = p->wait_s;
		lp->done.t_end = p->t_d;
		*done = &lp->done;
	}
	lp_reset(lp, p);
	int wrv = lp->wrv;
	lp->wrv = 0;
	return wrv ? wrv : rv;
}

// lp_send: the pieces went as backward wrote them; the step's replies
// come back while the next step computes (no backup workers: every
// step is this one's).
static int lp_send(void *s, pti_step *st)
{
	layer_push *lp = s;
	lp_step *done = lp->prev; // flushed, empty
	lp->prev = lp->next;
	lp->next = done;
	st->ver = (int64_t)st->t + 1;
	st->next = st->t + 1;
	return 0;
}

static int lp_wait_none(void *s, pti_step **done)
{
	(void)s; // the next forward waits for each layer (lp_ready)
	*done = NULL;
	return 0;
}

static void lp_close(void *s)
{
	layer_push *lp = s;
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
	free(lp);
}

static const pti_sender_ops layerpush_ops = {
	.grad = lp_grad,
	.flush = lp_flush,
	.send = lp_send,
	.wait = lp_wait_none,
	.drop = lp_drop,
	.close = lp_close,
};

int pti_layerpush_open(pti_sender *out, pti_trainer *w)
{
	layer_push *lp = calloc(1, sizeof(*lp));
	if (lp == NULL)
		return pti_err_set(PT_ENOMEM, "worker: layer push");
	lp->w = w;
	lp->prev = &lp->slot[0];
	lp->next = &lp->slot[1];
	lp->hk.ready = lp_ready;
	lp->hk.done = lp_done;
	lp->hk.arg = lp;
	pthread_mutex_init(&lp->mu, NULL);
	pthread_mutex_init(&lp->pw_mu, NULL);
	pthread_cond_init(&lp->cv, NULL);
	out->ops = &layerpush_ops;
	out->s = lp;
	int exact = pti_model_blocks_exact(w->model, w->b, LP_BLOCKS);
	if (exact < 0)
		return -exact;
	lp->hk.blocks = exact ? LP_BLOCKS : 1;
	if (pthread_create(&lp->sender, NULL, lp_send_main, lp) != 0)
		return pti_err_set(PT_ENOMEM, "worker: the sending thread");
	lp->started = 1;
	return 0;
}
