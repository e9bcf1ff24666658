// train/session.c - joining, rejoining and finishing a parameter-server
// job (see session.h).
#include "train/session.h"

#include <stdio.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/err.h"
#include "common/job.h"
#include "common/mode.h"
#include "common/proto.h"
#include "train/eval.h"

#define SESSION_REJOIN_MAX 50 // rejoins in a row without a step done

// session_open joins the job through the library's worker (pstrain.h):
// the job is this config's options and the model's variables.
static int session_open(pti_trainer *w)
{
	pt_job *job;
	int rv = pt_job_alloc(&job);
	if (rv != 0)
		return rv;
	job->o = w->c->job;
	job->l = w->layout;
	rv = pt_worker_open(&w->pw, job, w->c->rank, w->c->connect);
	pt_job_free(job);
	if (rv == 0)
		w->client = pti_worker_client(w->pw);
	return rv;
}

// session_recoverable: errors a restarting server causes (a closed
// connection, a server that does not know this worker yet, servers at
// different versions for a moment), which rejoining mends.
static int session_recoverable(int rv)
{
	return rv == PT_ECLOSED || rv == PT_ESTATE;
}

// session_bind points w->grad and w->params into shared memory
// (--transport shm, sync without backup workers): the gradient is
// computed in this worker's segment, where every server sums its shard's,
// and the forward reads the values in the client's view of the servers'
// segments, where they write them, no copy made either way but the few
// values where two shards share a page (the model reads no value after
// it hands over the gradient's first piece, and in that mode the servers
// write none before every worker has: model/model.h). Otherwise the
// trainer's own buffers, which pulls copy into. After every join: a
// rejoin may move the segments.
static void session_bind(pti_trainer *w)
{
	float *g;
	const float *v;
	w->grad = w->own_grad;
	w->params = w->own_params;
	if (w->sparse == NULL &&
	    pti_client_shm_view(w->client, 0, w->layout.n_params, &g, &v)) {
		w->grad = g;
		w->params = (float *)v; // read-only: pulls write nothing
		fprintf(stderr, "worker %u: computes in shared memory (its "
		    "gradient and the servers' values, no copy)\n",
		    w->c->rank);
	}
}

int pti_session_join(pti_trainer *w, uint64_t *t)
{
	const pti_config *c = w->c;
	double until = pti_wall_s() + c->job.rpc_timeout;
	pti_client_step info;
	for (;;) {
		int64_t start;
		int rv = w->pw == NULL ? session_open(w)
				       : pti_worker_join(w->pw, (int64_t)*t,
					     &start);
		if (rv == 0) {
			session_bind(w);
			rv = pti_client_pull(w->client, w->params, -1, &info);
		}
		if (rv == 0) {
			*t = (uint64_t)(pti_mode_of(c->job.mode)->lockstep
					    ? info.ver_min
					    : pt_worker_start(w->pw));
			return 0;
		}
		if (!session_recoverable(rv) || pti_wall_s() > until)
			return rv;
		pti_train_sleep_ms(50);
	}
}

int pti_session_recover(pti_trainer *w, int rv, int *rejoins, uint64_t *t)
{
	if (!session_recoverable(rv) || ++*rejoins > SESSION_REJOIN_MAX)
		return rv;
	fprintf(stderr, "worker %u: step %llu: %s; rejoining\n", w->c->rank,
	    (unsigned long long)(*t + 1), pt_errmsg(rv));
	return pti_session_join(w, t);
}

int pti_session_finish(pti_trainer *w, double train_s, uint64_t *t)
{
	const pti_config *c = w->c;
	pti_client_step info;
	uint32_t first = 0;
	int rv, tries = 0;

	for (;;) {
		int all = 0;
		rv = pti_client_simple(w->client, PT_OP_DONE, NULL);
		while (rv == 0 &&
		    (all = pti_worker_all_done(w->pw, &first)) == 0)
			usleep(20 * 1000);
		if (rv == 0 && all < 0)
			rv = -all;
		if (rv == 0)
			break;
		if (!session_recoverable(rv) || ++tries > SESSION_REJOIN_MAX)
			return rv;
		fprintf(stderr, "worker %u: finishing: %s; rejoining\n",
		    c->rank, pt_errmsg(rv));
		uint64_t at = *t;
		if ((rv = pti_session_join(w, &at)) != 0)
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
	    (rv = pti_eval_final(w, info.ver_min, train_s)) != 0 ||
	    (rv = pt_worker_stats(w->pw, &st)) != 0)
		return rv;
	w->lost = st.lost;
	return pti_worker_shutdown(w->pw);
}
