// train/trainer.h - the state of one worker of pstrain's own trainer, and
// the pieces of a step that every way of training shares: its examples
// and injected delay, the divergence check, the clock. The files of
// train/ each do one job over this state (train/worker.c lists them);
// nothing here talks to a server.
#ifndef PT_TRAIN_TRAINER_H
#define PT_TRAIN_TRAINER_H

#include <stdint.h>
#include <stdio.h>

#include "client/api.h"
#include "common/config.h"
#include "common/data.h"
#include "common/layout.h"
#include "model/model.h"
#include "train/batch.h"

#define PTI_EVAL_CHUNK 500u // examples per forward pass when evaluating

typedef struct pti_evaluator pti_evaluator; // worker 0's (train/eval.c)
typedef struct pti_sparse pti_sparse; // a sparse model's (train/sparse.c)

typedef struct pti_trainer {
	const pti_config *c;
	pti_data data;
	pti_layout layout;
	pti_model *model;
	pt_worker *pw;         // the library's worker, once it has joined
	pti_client *client;    // its connection to the servers
	float *params, *grad;  // (n_params); params (n_eval): own_params
			       // and own_grad, or where the servers'
			       // shared memory holds them (session.c)
	float *own_params, *own_grad;
	uint64_t n_eval;       // floats an evaluation reads: n_params, and a
			       // sparse model's rows behind them
	pti_sparse *sparse;    // a sparse model's views, or NULL
	float *x;              // (max(b, PTI_EVAL_CHUNK), dim)
	uint8_t *y;
	uint32_t *idx;
	pti_batches *batches;  // each step's examples (--prefetch: ahead)
	pti_evaluator *evaluator; // its evaluator thread, or NULL
	float *best;           // (n_eval) best-validation parameters, or NULL
	double best_acc;       // their validation accuracy; -1: none yet
	uint64_t best_step;    // worker steps done when they were evaluated
	int64_t best_ver;      // their version
	FILE *csv, *eval;      // worker-R.csv, eval.csv (worker 0)
	uint32_t b, spe;       // per-worker batch, steps per epoch
	uint64_t steps;
	double straggle_ms;    // --straggler's delay for this worker, per step
	pti_delay delay;        // --delay
	double t0;             // the job's start (seconds since 1970)
	double t_log;          // when the last progress line was said
	double first_loss;     // the first step's loss; -1 before it
	int finished;          // this worker finished the job (pti_eval_final)
	uint32_t lost;         // the workers lost then, by server 0's count
	uint64_t tx_mark, rx_mark; // the client's bytes when the last row
				   // was written, less those of evaluations
} pti_trainer;

// One step, as its row of worker-R.csv says it. The loop fills t and the
// batch's fields, the gradient loss and sumsq, and the way it was sent
// (train/sender.h) the rest once its replies are all in.
typedef struct pti_step {
	uint64_t t;         // the step
	uint32_t epoch;
	double delay;       // injected (ms)
	double t_a, t_b;    // its start; its gradient's start (after the delay)
	double loss, sumsq; // mean loss; the gradient's squared norm
	double step_s, compute_s, comm_s; // the row's times
	double t_end;       // when its last reply came
	pti_client_step info; // its replies, summed up
	int64_t ver;        // the version its values are (worker 0 evaluates)
	uint64_t next;      // the step to go on with
	double rows;        // embedding rows its batch touched (NaN: none)
} pti_step;

// pti_trainer_init loads the data and sizes every buffer once; on failure
// too, pti_trainer_fini undoes what was done. Errors with a detail.
int pti_trainer_init(pti_trainer *w, const pti_config *c);
void pti_trainer_fini(pti_trainer *w);

// pti_trainer_batch starts step t in *st: its examples to *x and *y (see
// batch.h) and the step's injected delay, slept before it returns.
void pti_trainer_batch(pti_trainer *w, pti_step *st, uint64_t t,
    const float **x, const uint8_t **y);

// pti_trainer_limit: a loss above it has diverged. Far above its start:
// ten times the first step's loss, and at least twice chance level (a
// resumed job starts low); none before the first step.
double pti_trainer_limit(const pti_trainer *w);

// pti_trainer_check takes st's loss as the first one when there was none
// yet, and returns 1 when st's loss or sumsq is not finite or the loss
// went past the limit, else 0.
int pti_trainer_check(pti_trainer *w, const pti_step *st);

// pti_trainer_diverged is the PT_EDIVERGED error of step t, whose loss or
// squared gradient norm is not finite, or whose loss went past the limit.
int pti_trainer_diverged(const pti_trainer *w, double loss, double sumsq,
    uint64_t t);

// pti_train_sleep_ms sleeps ms milliseconds (<= 0: not at all). The
// rows' times are common/clock.h's pti_wall_s.
void pti_train_sleep_ms(double ms);

#endif // PT_TRAIN_TRAINER_H
