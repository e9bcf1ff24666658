// train/loop.c - the training loop (see loop.h). A step reads in one
// pass: batch, gradient, send, wait, row. The way of sending decides
// what waits when (train/sender.h); the loop is the same for each.
#include "train/loop.h"

#include "common/blas.h"
#include "common/clock.h"
#include "common/testhook.h"
#include "train/eval.h"
#include "train/record.h"
#include "train/session.h"

// replies runs a sender's flush or wait and records the step it finds
// done: its row of worker-R.csv, even when the call also failed.
static int replies(pti_trainer *w, pti_sender *s,
    int (*op)(void *s, pti_step **done))
{
	pti_step *done;
	int rv = op(s->s, &done);
	int rec = done != NULL ? pti_record_step(w, done) : 0;
	return rv != 0 ? rv : rec;
}

// step runs step t: its batch, its gradient, the replies the step
// before still has under way (--layer-push: they came in as its forward
// needed them), the check, send, and wait, each done step's row written
// as it is found. On success st->next is the step to go on with.
static int step(pti_trainer *w, pti_sender *s, pti_step *st, uint64_t t)
{
	const pti_sender_ops *op = s->ops;
	const float *x;
	const uint8_t *y;
	int rv;
	pti_test_hold_step(w->c->rank, t);
	pti_trainer_batch(w, st, t, &x, &y);
	if ((rv = op->grad(s->s, st, x, y)) != 0 ||
	    (rv = replies(w, s, op->flush)) != 0)
		return rv;
	// A diverged gradient is never sent: the job stops.
	if (pti_trainer_check(w, st)) {
		op->drop(s->s);
		return pti_trainer_diverged(w, st->loss,
		    pti_blas_sumsq(w->grad, w->layout.n_params), t);
	}
	if (pti_test_poison(w->c->rank, t))
		w->grad[0] = 3e38f; // a test's poisoned push
	if ((rv = op->send(s->s, st)) != 0)
		return rv;
	return replies(w, s, op->wait);
}

int pti_train_loop(pti_trainer *w, pti_sender *s)
{
	double t_start = pti_wall_s();
	uint64_t t = 0;
	int rv, rejoins = 0;

	// A resumed or restarted worker starts where the servers say (the
	// data order follows from the step) and keeps the rows so far: steps
	// done again after a rollback show twice.
	w->t_log = t_start;
	if ((rv = pti_session_join(w, &t)) != 0 ||
	    (rv = pti_record_open(w, t > 0)) != 0)
		return rv;
	for (;;) {
		pti_step st;
		if (t >= w->steps) {
			// Done once the last replies are in, unless the servers
			// went back to an earlier step meanwhile (a sync
			// restart from a checkpoint): then go on from there.
			if ((rv = replies(w, s, s->ops->flush)) == 0 &&
			    ((rv = pti_session_finish(w,
				  pti_wall_s() - t_start, &t)) != 0 ||
				t >= w->steps))
				return rv;
		} else if ((rv = step(w, s, &st, t)) == 0) {
			rejoins = 0;
			// Worker 0 evaluates the values the step brought.
			if (!pti_eval_due(w, t) ||
			    ((rv = replies(w, s, s->ops->flush)) == 0 &&
				(rv = pti_eval_row(w, st.ver, t + 1)) == 0)) {
				t = st.next;
				continue;
			}
		}
		if (rv == 0)
			continue;
		// A server went away or came back from a checkpoint: rejoin
		// and go on from the step the servers say (other errors end
		// the job).
		s->ops->drop(s->s);
		if ((rv = pti_session_recover(w, rv, &rejoins, &t)) != 0)
			return rv;
	}
}
