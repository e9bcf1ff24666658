// train/allreduce.c - the training loop of --mode allreduce (see
// allreduce.h), its checkpoints and its resumption from one.
#include "train/allreduce.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/auth.h"
#include "common/blas.h"
#include "common/checkpoint.h"
#include "common/clock.h"
#include "common/err.h"
#include "common/job.h"
#include "common/optim.h"
#include "common/rendezvous.h"
#include "train/eval.h"
#include "train/record.h"
#include "train/ring.h"

// What every step updates: the optimizer and its state, and the clocks
// a checkpoint says.
typedef struct allreduce_state {
	pti_optim opt;
	pti_lr_rule lr;   // the job's one rule, as the servers apply it
	float *s1, *s2;   // the optimizer's state, (n_params)
	int64_t *clocks;  // (workers), for checkpoints
	pti_ckpt_sched *sc;
} allreduce_state;

// ar_ckpt_meta: an allreduce job's checkpoint is the whole model as the
// one shard of one server would hold it, version v after v updates; its
// clocks say every worker has done v steps.
static pti_ckpt_meta ar_ckpt_meta(const pti_trainer *w, const pti_optim *o,
    int64_t v)
{
	pti_ckpt_meta m = {0, 1, pti_layout_hash(&w->layout), 0,
	    w->layout.n_params, v, (uint64_t)v, (uint32_t)o->kind,
	    (uint32_t)o->n_state, w->c->job.workers, NULL, 0};
	return m;
}

// ar_resume loads --resume-version's checkpoint into the parameters and
// the optimizer's state; *t becomes its version (the steps done).
static int ar_resume(pti_trainer *w, const pti_optim *o, float *s1, float *s2,
    uint64_t *t)
{
	const pti_config *c = w->c;
	char path[PT_PATH_MAX + 64];
	pti_ckpt_meta want = ar_ckpt_meta(w, o, c->job.resume_version), got;
	float *vecs[3] = {w->params, s1, s2};
	pti_ckpt_path(path, sizeof(path), c->job.checkpoint_dir, 0,
	    c->job.resume_version);
	int rv = pti_ckpt_load(path, &want, NULL, vecs, &got);
	if (rv != 0)
		return rv;
	free(got.extra); // a ring has no tables
	*t = (uint64_t)got.version;
	fprintf(stderr, "worker %u: resumed from %s at step %lld\n", c->rank,
	    path, (long long)got.version);
	return 0;
}

// ar_checkpoint: worker 0 writes the model when one is due after step
// version v. A failed write is said and training goes on.
static void ar_checkpoint(pti_trainer *w, pti_ckpt_sched *sc,
    const pti_optim *o, const float *s1, const float *s2, int64_t v,
    int64_t *clocks)
{
	const pti_config *c = w->c;
	if (c->rank != 0 || !pti_ckpt_due(sc, v, pti_clock_s()))
		return;
	pti_ckpt_meta m = ar_ckpt_meta(w, o, v);
	const float *vecs[3] = {w->params, s1, s2};
	for (uint32_t r = 0; r < c->job.workers; r++)
		clocks[r] = v;
	int rv = pti_ckpt_save(c->job.checkpoint_dir, &m, clocks, vecs);
	if (rv != 0)
		fprintf(stderr, "worker 0: checkpoint failed: %s\n",
		    pt_errmsg(rv));
}

// ar_ring joins the ring: at this worker's address in --connect, or at
// --listen, published in --ring-dir, where the others' are found.
static int ar_ring(pti_trainer *w, const pti_secret *secret, pti_ring **out)
{
	const pti_config *c = w->c;
	char who[32], *urls = NULL;
	int rv;
	uint64_t hash = pti_layout_hash(&w->layout);
	if (c->ring_dir[0] == '\0')
		return pti_ring_open(out, c->connect, c->rank, c->job.workers,
		    secret, hash, c->job.rpc_timeout);
	snprintf(who, sizeof(who), "worker %u", c->rank);
	if ((rv = pti_ring_listen(out, c->listen, c->rank, c->job.workers,
		 secret, hash, c->job.rpc_timeout)) != 0)
		return rv;
	if ((urls = malloc(PT_URLS_MAX)) == NULL)
		rv = pti_err_set(PT_ENOMEM, "ring addresses");
	else if ((rv = pti_rdv_publish(c->ring_dir, "worker", c->rank,
		      pti_ring_addr(*out))) == 0 &&
	    (rv = pti_rdv_gather(c->ring_dir, "worker", c->job.workers,
		 c->job.connect_timeout, urls, PT_URLS_MAX, who)) == 0)
		rv = pti_ring_join(*out, urls);
	free(urls);
	return rv;
}

// allreduce_step runs step st->t: batch, gradient, sum in the ring,
// update (and the checkpoint when one is due), row.
static int allreduce_step(pti_trainer *w, pti_ring *ring, pti_step *st,
    uint64_t t, const allreduce_state *a)
{
	const pti_config *c = w->c;
	uint64_t n = w->layout.n_params;
	const float *x;
	const uint8_t *y;
	int rv;
	pti_trainer_batch(w, st, t, &x, &y);
	if ((rv = pti_model_grad(w->model, w->grad, &st->loss, w->params, x,
		 y, w->b)) != 0)
		return rv;
	st->sumsq = pti_blas_sumsq(w->grad, n);
	if (pti_trainer_check(w, st))
		return pti_trainer_diverged(w, st->loss, st->sumsq, t);
	double t_c = pti_wall_s();
	if ((rv = pti_ring_sum(ring, w->grad, n, (int64_t)t)) != 0)
		return rv;
	double t_d = pti_wall_s();
	pti_client_step info = {(int64_t)t + 1, 0, 0,
	    pti_lr(&a->lr, (int64_t)t, 0)};
	st->info = info;
	pti_optim_apply(&a->opt, w->params, a->s1, a->s2, w->grad, n,
	    c->job.workers, info.lr, t + 1);
	ar_checkpoint(w, a->sc, &a->opt, a->s1, a->s2, (int64_t)t + 1,
	    a->clocks);
	st->t_end = pti_wall_s();
	st->step_s = st->t_end - st->t_a;
	st->compute_s = t_c - st->t_b;
	st->comm_s = t_d - t_c;
	return pti_record_step(w, st);
}

int pti_train_allreduce(pti_trainer *w)
{
	const pti_config *c = w->c;
	uint64_t n = w->layout.n_params;
	pti_ckpt_sched sc = {c->job.ckpt_every, c->job.ckpt_seconds, pti_clock_s()};
	pti_jobopt o = c->job; // with the warm-up in steps of this data
	o.warmup = pti_job_warmup(c, w->data.train.n);
	allreduce_state a = {c->job.optim, pti_job_lr_rule(&o), NULL, NULL,
	    NULL, &sc};
	uint64_t t0 = 0;
	pti_ring *ring = NULL;
	pti_secret secret;
	int rv;

	a.opt.weight_decay = c->job.weight_decay;
	w->t_log = pti_wall_s();
	double t_start = w->t_log;
	pti_layout_init_values(w->params, &w->layout, c->job.seed, 0, n);
	if ((a.opt.n_state >= 1 &&
		(a.s1 = calloc(n, sizeof(float))) == NULL) ||
	    (a.opt.n_state >= 2 &&
		(a.s2 = calloc(n, sizeof(float))) == NULL) ||
	    (a.clocks = calloc(c->job.workers, sizeof(int64_t))) == NULL) {
		rv = pti_err_set(PT_ENOMEM, "worker %u: optimizer state",
		    c->rank);
		goto done;
	}
	if (c->rank == 0 && c->job.ckpt_every != 0 &&
	    mkdir(c->job.checkpoint_dir, 0777) != 0 && errno != EEXIST) {
		rv = pti_err_set(PT_EIO, "--checkpoint-dir %s: %s",
		    c->job.checkpoint_dir, strerror(errno));
		goto done;
	}
	// A resumed job goes on from its checkpoint's step, appending to
	// the rows so far (the data order follows from the step).
	if ((c->job.resume_version >= 0 &&
		(rv = ar_resume(w, &a.opt, a.s1, a.s2, &t0)) != 0) ||
	    (rv = pti_secret_load(&secret, c->job.secret_file)) != 0 ||
	    (rv = ar_ring(w, &secret, &ring)) != 0 ||
	    (rv = pti_record_open(w, t0 > 0)) != 0)
		goto done;
	for (uint64_t t = t0; t < w->steps; t++) {
		pti_step st;
		if ((rv = allreduce_step(w, ring, &st, t, &a)) != 0 ||
		    (pti_eval_due(w, t) &&
			(rv = pti_eval_row(w, (int64_t)t + 1, t + 1)) != 0))
			goto done;
	}
	if (c->rank == 0)
		rv = pti_eval_final(w, (int64_t)w->steps,
		    pti_wall_s() - t_start);
done:
	pti_ring_close(ring);
	memset(&secret, 0, sizeof(secret));
	free(a.s1);
	free(a.s2);
	free(a.clocks);
	return rv;
}
