// common/job.h - a job as the public API sees it (pstrain.h's pt_job):
// the job's options (common/jobopt.h, the library's own, with their
// defaults) and the key space of variables. pstrain's own commands build
// one from their pti_config (pti_job_from_config); a program of its own
// declares variables and sets options one by one.
#ifndef PT_COMMON_JOB_H
#define PT_COMMON_JOB_H

#include "common/config.h"
#include "common/layout.h"
#include "common/optim.h"
#include "pstrain.h"

struct pt_job {
	pti_jobopt o; // the options
	pti_layout l; // the variables
	float *given[PT_MAX_VARS]; // per variable: initial values the
				   // program gave (pt_job_var_values), or NULL
};

// pti_job_from_config builds the job of c for pstrain's own trainer: its
// layout from --model and the data's dimensions (pti_data_dims), the
// warm-up from --warmup-epochs and the training set's size. Returns
// their errors; on success *out is the caller's, to pt_job_free.
int pti_job_from_config(pt_job **out, const pti_config *c);

// pti_job_lr is the learning rate before warm-up: --lr (0, unset: the
// optimizer's usual rate, pti_optim_default_lr), times B/256 with
// --lr-scaling linear. The servers and all-reduce read it, so a job built
// through the library gets the same default as pstrain's command line.
double pti_job_lr(const pti_jobopt *o);

// pti_job_lr_rule is the job's learning-rate rule (pti_lr): pti_job_lr,
// ramped over o->warmup steps; in async and ssp divided by the workers
// with --matched-lr and by the staleness with --staleness-lr.
pti_lr_rule pti_job_lr_rule(const pti_jobopt *o);

// pti_job_warmup is the warm-up in steps: --warmup-epochs epochs of
// n_train training examples in batches of --batch.
double pti_job_warmup(const pti_config *c, uint32_t n_train);

#endif // PT_COMMON_JOB_H
