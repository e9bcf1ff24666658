// train/worker.c - one worker of pstrain's own trainer (see worker.h):
// its state (trainer.c), then the loop of its mode: a parameter-server
// job's (loop.c), through the way of sending --layer-push asks for
// (pushpull.c, layerpush.c) or a sparse model's (sparse.c), or --mode allreduce's (allreduce.c, over
// ring.c). batch.c gives each step's examples, session.c joins and ends
// the job, eval.c evaluates, record.c writes the rows.
#include "train/worker.h"

#include "common/mode.h"
#include "train/allreduce.h"
#include "train/loop.h"
#include "train/sender.h"
#include "train/sparse.h"
#include "train/trainer.h"

// worker_train runs a parameter-server job's loop through its way of
// sending.
static int worker_train(pti_trainer *w)
{
	pti_sender s = {NULL, NULL};
	int rv = w->sparse != NULL		 ? pti_sparse_open(&s, w)
		 : w->c->layer_push == PT_LP_ON ? pti_layerpush_open(&s, w)
						 : pti_pushpull_open(&s, w);
	if (rv == 0)
		rv = pti_train_loop(w, &s);
	if (s.ops != NULL)
		s.ops->close(s.s);
	return rv;
}

int pti_train_run(const pti_config *c, pti_train_result *res)
{
	pti_trainer w;
	int rv = pti_trainer_init(&w, c);
	if (rv == 0)
		rv = pti_mode_of(c->job.mode)->servers ? worker_train(&w)
						    : pti_train_allreduce(&w);
	if (res != NULL) {
		pti_train_result r = {w.finished, w.steps, w.spe,
		    w.data.train.n, w.data.val.n,
		    w.layout.width[w.layout.n_layers], w.lost, w.t0,
		    w.layout.n_params};
		*res = r;
	}
	pti_trainer_fini(&w);
	return rv;
}
