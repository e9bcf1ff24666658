// client/record.c - a program's worker writes the CSV files pstrain's
// own workers write (pstrain.h, pt_worker_step and pt_worker_eval;
// docs/OUTPUTS.md): the columns the program cannot know come from the
// worker's own requests and replies.
#include <math.h>
#include <stdint.h>
#include <sys/resource.h>

#include "client/worker.h"
#include "common/clock.h"
#include "common/err.h"
#include "common/outputs.h"

void pti_rec_sent(pt_worker *w)
{
	if (w->rec.first_send == 0)
		w->rec.first_send = pti_clock_s();
}

void pti_rec_reply(pt_worker *w, const pti_client_step *st)
{
	pti_client_step *a = &w->rec.acc;
	if (st->ver_min != INT64_MAX)
		w->rec.pulled = st->ver_min;
	if (st->ver_min != INT64_MAX && (w->rec.versions++ == 0 ||
	    st->ver_min < a->ver_min))
		a->ver_min = st->ver_min;
	if (st->stale_max > a->stale_max)
		a->stale_max = st->stale_max;
	if (st->lr != 0)
		a->lr = st->lr;
}

void pti_rec_close(pt_worker *w)
{
	if (w->rec.csv != NULL)
		fclose(w->rec.csv);
	if (w->rec.eval != NULL)
		fclose(w->rec.eval);
}

// rec_wall is the wall_s of monotonic time now: since the job's
// start (option t0, seconds since 1970) when it is set, as in pstrain's
// own jobs, else since this worker's first step (0 before it).
static double rec_wall(const pt_worker *w, double now)
{
	if (w->job.t0 > 0)
		return pti_wall_s() - w->job.t0 - (pti_clock_s() - now);
	return w->rec.t0 > 0 ? now - w->rec.t0 : 0;
}

int pt_worker_step(pt_worker *w, int64_t step, double loss, double grad_norm,
    double compute_ms)
{
	pti_worker_rec *r = &w->rec;
	char name[64];
	if (step < 0 || !(compute_ms >= 0))
		return pti_err_set(PT_EINVAL, "worker %u: pt_worker_step: step "
		    "%lld, compute_ms %g (both must be >= 0)", w->rank,
		    (long long)step, compute_ms);
	if (w->job.out[0] == '\0')
		return 0;
	snprintf(name, sizeof(name), "worker-%u.csv", w->rank);
	if (r->csv == NULL) {
		// A worker that went on from a later step adds to its file.
		r->csv = pti_csv_open(w->job.out, name, &pti_csv_worker,
		    w->start > 0);
		if (r->csv == NULL)
			return PT_EIO;
	}
	double now = pti_clock_s();
	double begin = r->last > 0 ? r->last
		       : (r->first_send > 0 ? r->first_send : now) -
			     compute_ms / 1e3;
	if (r->t0 == 0)
		r->t0 = begin;
	double wall = rec_wall(w, now);
	double step_ms = (now - begin) * 1e3;
	uint64_t tx, rx;
	pti_client_bytes(w->client, &tx, &rx);
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	double row[PTI_WK_N] = {(double)(step + 1), NAN, wall, loss,
	    grad_norm, step_ms, compute_ms, fmax(step_ms - compute_ms, 0),
	    (double)r->acc.stale_max, r->acc.lr != 0 ? r->acc.lr : NAN, 0,
	    r->versions > 0 ? (double)r->acc.ver_min : NAN,
	    (double)ru.ru_minflt,
	    (double)ru.ru_maxrss / 1024, (double)(tx - r->tx),
	    (double)(rx - r->rx), NAN};
	pti_csv_row(r->csv, &pti_csv_worker, row);
	r->tx = tx;
	r->rx = rx;
	r->last = now;
	r->first_send = 0;
	r->acc = (pti_client_step){0};
	r->versions = 0;
	r->steps = step + 1;
	r->loss = loss;
	return pti_csv_sent(r->csv, w->job.out, name, 0);
}

int pt_worker_eval(pt_worker *w, int64_t version, double loss, double acc,
    double eval_s)
{
	pti_worker_rec *r = &w->rec;
	if (w->job.out[0] == '\0')
		return 0;
	if (r->eval == NULL && (r->eval = pti_csv_open(w->job.out, "eval.csv",
				    &pti_csv_eval_val, w->start > 0)) == NULL)
		return PT_EIO;
	double ver = (double)(version >= 0 ? version : r->pulled);
	if (r->evals++ == 0 || acc > r->best_acc) {
		r->best_acc = acc;
		r->best_step = (double)r->steps;
		r->best_ver = ver;
	}
	r->val_loss = loss;
	r->val_acc = acc;
	double row[PTI_EV_N] = {ver,
	    rec_wall(w, pti_clock_s()), loss, acc, (double)r->steps,
	    eval_s, NAN};
	pti_csv_row(r->eval, &pti_csv_eval_val, row);
	return pti_csv_sent(r->eval, w->job.out, "eval.csv", 0);
}

int pt_worker_final(pt_worker *w, double test_loss, double test_acc)
{
	const pti_worker_rec *r = &w->rec;
	if (w->job.out[0] == '\0')
		return 0;
	FILE *f = pti_csv_open(w->job.out, "final.csv", &pti_csv_final, 0);
	if (f == NULL)
		return PT_EIO;
	double none = NAN, ev = r->evals > 0 ? 1 : NAN; // NaN without evals
	double row[PTI_FN_N] = {(double)r->pulled, (double)r->steps,
	    r->t0 > 0 ? r->last - r->t0 : 0, r->steps > 0 ? r->loss : none,
	    none, test_loss, test_acc, ev * r->val_loss, ev * r->val_acc,
	    ev * r->best_acc, ev * r->best_step, ev * r->best_ver, none, none,
	    none, none, none, none, none};
	pti_csv_row(f, &pti_csv_final, row);
	return pti_csv_sent(f, w->job.out, "final.csv", 1);
}
