// train/pushpull.c - the plain way of sending (train/sender.h): the whole
// gradient in one pushpull once it is computed, then its wait; the
// values come back into w->params before the next step.
#include <stdlib.h>

#include "common/blas.h"
#include "common/clock.h"
#include "common/err.h"
#include "train/sender.h"

typedef struct pushpull {
	pti_trainer *w;
	pti_step *st; // the step sent, not yet waited for
	pt_req *req;  // its pushpull
	double t_c;   // when it was sent
} pushpull;

static int pushpull_grad(void *s, pti_step *st, const float *x,
    const uint8_t *y)
{
	pti_trainer *w = ((pushpull *)s)->w;
	int rv = pti_model_grad(w->model, w->grad, &st->loss, w->params, x, y,
	    w->b);
	st->sumsq = pti_blas_sumsq(w->grad, w->layout.n_params);
	return rv;
}

static int pushpull_flush(void *s, pti_step **done)
{
	(void)s; // its wait waited for everything
	*done = NULL;
	return 0;
}

static int pushpull_send(void *s, pti_step *st)
{
	pushpull *p = s;
	pti_trainer *w = p->w;
	p->st = st;
	p->t_c = pti_wall_s();
	return pt_pushpull(w->pw, (int64_t)st->t, PT_ALL, 0,
	    w->layout.n_params, w->grad, w->params, &p->req);
}

// pushpull_wait waits for the step's values.
static int pushpull_wait(void *s, pti_step **done)
{
	pushpull *p = s;
	pti_trainer *w = p->w;
	pti_step *st = p->st;
	*done = NULL;
	int rv = pti_wait_info(w->pw, p->req, &st->info);
	p->req = NULL;
	if (rv != 0)
		return rv;
	pti_step_ended(w, st, p->t_c, 0);
	*done = st;
	return 0;
}

static void pushpull_drop(void *s)
{
	(void)s; // a failed wait has ended its pushpull
}

static void pushpull_close(void *s)
{
	free(s);
}

static const pti_sender_ops pushpull_ops = {
	.grad = pushpull_grad,
	.flush = pushpull_flush,
	.send = pushpull_send,
	.wait = pushpull_wait,
	.drop = pushpull_drop,
	.close = pushpull_close,
};

int pti_pushpull_open(pti_sender *out, pti_trainer *w)
{
	pushpull *p = calloc(1, sizeof(*p));
	if (p == NULL)
		return pti_err_set(PT_ENOMEM, "worker: sender");
	p->w = w;
	out->ops = &pushpull_ops;
	out->s = p;
	return 0;
}
