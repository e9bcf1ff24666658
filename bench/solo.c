// bench/solo.c - the compute floor of a training step: pstrain's own
// model and data order, trained in one process with no servers (the
// gradient computed, then p -= lr * g with the servers' optimizer code).
// What a 1 server x 1 worker sync job adds to this is the parameter
// server's cost.
//
//   solo --model mlp:256,128 --data fashion-mnist --batch 256 --steps N
//        [--lr 0.1] [--seed 1] [--prefetch]
//
// Prints "samples_per_s S train_s T final_loss L" (training only).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/clock.h"
#include "common/config.h"
#include "common/data.h"
#include "common/err.h"
#include "common/layout.h"
#include "common/optim.h"
#include "model/model.h"
#include "train/batch.h"

int main(int argc, char **argv)
{
	pti_config c;
	pti_data d;
	pti_layout l;
	pti_model *m;
	int help, rv;
	pti_config_defaults(&c);
	if ((rv = pti_config_parse(&c, PT_CMD_RUN, argc - 1, argv + 1,
		 &help)) != 0 || help || c.steps == 0) {
		fprintf(stderr, "solo: %s\n", rv ? pt_errmsg(rv)
						 : "give --steps N and the "
						   "job's --model --data "
						   "--batch");
		return 2;
	}
	if ((rv = pti_config_load_data(&c, &d)) != 0 ||
	    (rv = pti_layout_init(&l, c.model, d.train.dim,
		 d.train.classes)) != 0 ||
	    (rv = pti_model_alloc(&m, &l, c.job.batch)) != 0) {
		fprintf(stderr, "solo: %s\n", pt_errmsg(rv));
		return 1;
	}
	uint64_t np = l.n_params;
	float *p = malloc(np * 4), *g = malloc(np * 4);
	pti_batches *bs;
	if ((rv = pti_batches_open(&bs, &d.train, c.job.seed, c.job.batch, 1, 0,
		 (int)c.prefetch)) != 0) {
		fprintf(stderr, "solo: %s\n", pt_errmsg(rv));
		return 1;
	}
	if (c.job.lr == 0) // as pstrain run: the optimizer's usual rate
		c.job.lr = pti_optim_default_lr(&c.job.optim);
	pti_optim opt = c.job.optim;
	opt.weight_decay = c.job.weight_decay;
	if (opt.n_state > 0) {
		fprintf(stderr, "solo: runs optimizers without state only "
				"(--optimizer sgd)\n");
		return 2;
	}
	pti_layout_init_values(p, &l, c.job.seed, 0, np);
	double loss = 0, t0 = pti_clock_s();
	for (uint64_t t = 0; t < c.steps; t++) {
		const float *x;
		const uint8_t *y;
		pti_batches_get(bs, t, &x, &y);
		pti_model_grad(m, g, &loss, p, x, y, c.job.batch);
		pti_optim_apply(&opt, p, NULL, NULL, g, np, 1, c.job.lr, t + 1);
	}
	double secs = pti_clock_s() - t0;
	printf("samples_per_s %.1f train_s %.3f final_loss %.4f\n",
	    (double)c.steps * c.job.batch / secs, secs, loss);
	pti_model_free(m);
	// The prefetch thread may still be gathering step `steps` from d:
	// joined first, then d freed.
	pti_batches_close(bs);
	pti_data_fini(&d);
	free(p), free(g);
	return 0;
}
