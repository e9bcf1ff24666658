// train/record.c - a worker's CSV files and progress lines (see
// record.h).
#include "train/record.h"

#include <errno.h>
#include <math.h>
#include <string.h>
#include <sys/resource.h>

#include "common/err.h"
#include "common/outputs.h"

// record_csv starts DIR/name (pti_csv_open).
static FILE *record_csv(const pti_config *c, const char *name,
    const pti_table *t, int append)
{
	return pti_csv_open(c->job.out, name, t, append);
}

// record_sent flushes f, DIR/name (NULL: this worker's worker-R.csv),
// and closes it when close is set (pti_csv_sent).
static int record_sent(const pti_config *c, FILE *f, const char *name,
    int close)
{
	char own[64];
	snprintf(own, sizeof(own), "worker-%u.csv", c->rank);
	return pti_csv_sent(f, c->job.out, name != NULL ? name : own, close);
}

// eval.csv: the periodic evaluations are on the validation set when
// there is one, else on the test set, and the header says which.
static const pti_table *record_eval_table(const pti_trainer *w)
{
	return w->data.val.n > 0 ? &pti_csv_eval_val : &pti_csv_eval_test;
}

int pti_record_open(pti_trainer *w, int append)
{
	const pti_config *c = w->c;
	char name[64];
	snprintf(name, sizeof(name), "worker-%u.csv", c->rank);
	// The bytes of joining are no step's.
	if (w->client != NULL)
		pti_client_bytes(w->client, &w->tx_mark, &w->rx_mark);
	w->csv = record_csv(c, name, &pti_csv_worker, append);
	if (w->csv == NULL)
		return PT_EIO;
	if (c->rank == 0 && (w->eval = record_csv(c, "eval.csv",
				 record_eval_table(w), append)) == NULL)
		return PT_EIO;
	return 0;
}

int pti_record_step(pti_trainer *w, const pti_step *st)
{
	const pti_client_step *info = &st->info;
	struct rusage ru; // the process's page faults and memory
	getrusage(RUSAGE_SELF, &ru);
	// The bytes this worker's messages took since its last row (a ring
	// worker has no client: NaN).
	double tx = NAN, rx = NAN;
	if (w->client != NULL) {
		uint64_t t, r;
		pti_client_bytes(w->client, &t, &r);
		tx = (double)(t - w->tx_mark);
		rx = (double)(r - w->rx_mark);
		w->tx_mark = t;
		w->rx_mark = r;
	}
	double row[PTI_WK_N] = {(double)(st->t + 1), st->epoch,
	    st->t_end - w->t0, st->loss, sqrt(st->sumsq), st->step_s * 1e3,
	    st->compute_s * 1e3, st->comm_s * 1e3, (double)info->stale_max,
	    info->lr, st->delay, (double)info->ver_min, (double)ru.ru_minflt,
	    (double)ru.ru_maxrss / 1024, tx, rx, st->rows};
	pti_csv_row(w->csv, &pti_csv_worker, row);
	if (st->t_end - w->t_log >= 10.0) {
		fprintf(stderr, "worker %u: step %llu/%llu loss %.4f\n",
		    w->c->rank, (unsigned long long)(st->t + 1),
		    (unsigned long long)w->steps, st->loss);
		w->t_log = st->t_end;
	}
	return record_sent(w->c, w->csv, NULL, 0);
}

int pti_record_eval(pti_trainer *w, const double *row)
{
	if (w->eval == NULL && (w->eval = record_csv(w->c, "eval.csv",
				    record_eval_table(w), 1)) == NULL)
		return PT_EIO;
	pti_csv_row(w->eval, record_eval_table(w), row);
	return record_sent(w->c, w->eval, "eval.csv", 0);
}

int pti_record_final(pti_trainer *w, const double *row)
{
	FILE *f = record_csv(w->c, "final.csv", &pti_csv_final, 0);
	if (f == NULL)
		return PT_EIO;
	pti_csv_row(f, &pti_csv_final, row);
	return record_sent(w->c, f, "final.csv", 1);
}
