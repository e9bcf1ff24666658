// train/sender.h - the ways a step's gradient goes to the parameter
// servers and their values come back, behind one interface that the
// training loop (train/loop.c) calls in the same order for each:
//   grad   computes the step's gradient into w->grad;
//   flush  waits for what is still under way from the steps before;
//   send   hands the step's gradient over;
//   wait   waits for what the next step's gradient needs.
// train/pushpull.c: one pushpull of the whole vector, then its wait.
// train/layerpush.c (--layer-push on): each piece of the gradient is
// pushed as backward finishes it, and the next step's forward waits for
// each layer's values just before it reads them.
#ifndef PT_TRAIN_SENDER_H
#define PT_TRAIN_SENDER_H

#include <stdint.h>

#include "common/clock.h"
#include "common/mode.h"
#include "train/trainer.h"

// Each operation takes the way's state (pti_sender.s). A step is done
// once its replies are all in: flush and wait then point *done at it,
// with its row's fields filled (NULL: no step is done), valid until the
// next call; a step whose replies failed is not done.
typedef struct pti_sender_ops {
	// grad sets st->loss (and st->sumsq when known then; the pushes
	// check it otherwise). Nonzero: the model refused the batch.
	int (*grad)(void *s, pti_step *st, const float *x, const uint8_t *y);
	int (*flush)(void *s, pti_step **done);
	// send sets st->ver and st->next when they are known then.
	int (*send)(void *s, pti_step *st);
	int (*wait)(void *s, pti_step **done);
	// drop forgets whatever is under way once it has ended (a server
	// went away: the worker rejoins).
	void (*drop)(void *s);
	void (*close)(void *s); // frees the state
} pti_sender_ops;

typedef struct pti_sender {
	const pti_sender_ops *ops;
	void *s;
} pti_sender;

// pti_step_ended fills st's times and the step to go on with once its
// replies (st->info) are in: it was sent at t_c, and pre_s seconds of its
// compute time before that were communication (rows pulled for it). In
// sync mode the servers' version is the next step; with backup workers
// a late worker skips to it.
static inline void pti_step_ended(const pti_trainer *w, pti_step *st,
    double t_c, double pre_s)
{
	st->t_end = pti_wall_s();
	st->step_s = st->t_end - st->t_a;
	st->compute_s = t_c - st->t_b - pre_s;
	st->comm_s = st->t_end - t_c + pre_s;
	st->ver = st->info.ver_min;
	uint64_t next = pti_mode_of(w->c->job.mode)->lockstep &&
				st->info.ver_min > 0
			    ? (uint64_t)st->info.ver_min
			    : st->t + 1;
	st->next = next > st->t ? next : st->t + 1;
}

// pti_pushpull_open and pti_layerpush_open make a way of sending for w,
// which must outlive it; *out is then the caller's, to out->ops->close.
// PT_ENOMEM; pti_layerpush_open also fails as pti_model_blocks_exact.
int pti_pushpull_open(pti_sender *out, pti_trainer *w);
int pti_layerpush_open(pti_sender *out, pti_trainer *w);

#endif // PT_TRAIN_SENDER_H
