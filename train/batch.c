// train/batch.c - a worker's minibatch of each step, gathered in place or
// ahead in a thread of its own (--prefetch). See batch.h.
#include "train/batch.h"

#include <pthread.h>
#include <stdlib.h>

#include "common/data.h"
#include "common/err.h"

struct pti_batches {
	const pti_dataset *d;
	uint64_t seed;
	uint32_t spe, batch, rank, b; // steps per epoch, B, rank, B / W
	uint32_t *perm;               // the permutation of epoch `epoch`
	uint32_t epoch;               // UINT32_MAX: none yet
	float *x[2];                  // (b, dim) each
	uint8_t *y[2];                // (b)
	uint64_t step[2];             // the step buffer i holds; UINT64_MAX:
				      // none
	int ahead;                    // a thread gathers the next step
	pthread_t th;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	uint64_t want;  // the step the thread is to gather; UINT64_MAX: none
	int busy, stop; // the thread is gathering; it is to end
};

// gather fills buffer i with step t's slice of the global batch: block
// t % spe of epoch t / spe's seeded permutation, this worker's part.
static void gather(pti_batches *bs, int i, uint64_t t)
{
	uint32_t e = (uint32_t)(t / bs->spe);
	if (e != bs->epoch) {
		pti_data_perm(bs->perm, bs->d->n, bs->seed, e);
		bs->epoch = e;
	}
	const uint32_t *slice = bs->perm + (size_t)(t % bs->spe) * bs->batch +
				(size_t)bs->rank * bs->b;
	pti_data_gather(bs->x[i], bs->y[i], bs->d, slice, bs->b);
	bs->step[i] = t;
}

static void *ahead_main(void *arg)
{
	pti_batches *bs = arg;
	pthread_mutex_lock(&bs->mu);
	for (;;) {
		while (!bs->stop && bs->want == UINT64_MAX)
			pthread_cond_wait(&bs->cv, &bs->mu);
		if (bs->stop)
			break;
		uint64_t t = bs->want;
		bs->want = UINT64_MAX;
		bs->busy = 1;
		pthread_mutex_unlock(&bs->mu);
		gather(bs, (int)(t % 2), t); // the buffer the caller is not in
		pthread_mutex_lock(&bs->mu);
		bs->busy = 0;
		pthread_cond_broadcast(&bs->cv);
	}
	pthread_mutex_unlock(&bs->mu);
	return NULL;
}

int pti_batches_open(pti_batches **out, const pti_dataset *d, uint64_t seed,
    uint32_t batch, uint32_t workers, uint32_t rank, int ahead)
{
	pti_batches *bs = calloc(1, sizeof(*bs));
	if (bs == NULL)
		return pti_err_set(PT_ENOMEM, "batches");
	pthread_mutex_init(&bs->mu, NULL);
	pthread_cond_init(&bs->cv, NULL);
	bs->d = d;
	bs->seed = seed;
	bs->batch = batch;
	bs->rank = rank;
	bs->b = batch / workers;
	bs->spe = d->n / batch;
	bs->epoch = UINT32_MAX;
	bs->want = UINT64_MAX;
	bs->perm = malloc((size_t)d->n * sizeof(uint32_t));
	for (int i = 0; i < 2; i++) {
		bs->x[i] = malloc((size_t)bs->b * d->dim * sizeof(float));
		bs->y[i] = malloc(bs->b);
		bs->step[i] = UINT64_MAX;
	}
	if (!bs->perm || !bs->x[0] || !bs->x[1] || !bs->y[0] || !bs->y[1]) {
		pti_batches_close(bs);
		return pti_err_set(PT_ENOMEM, "batches of %u rows", bs->b);
	}
	if (ahead && pthread_create(&bs->th, NULL, ahead_main, bs) == 0)
		bs->ahead = 1;
	else if (ahead) {
		pti_batches_close(bs);
		return pti_err_set(PT_ENOMEM, "the prefetch thread");
	}
	*out = bs;
	return 0;
}

void pti_batches_get(pti_batches *bs, uint64_t t, const float **x,
    const uint8_t **y)
{
	int i = (int)(t % 2);
	if (bs->ahead) {
		pthread_mutex_lock(&bs->mu);
		// Step t may be under way, or asked for and not begun.
		while (bs->busy || bs->want != UINT64_MAX) {
			if (!bs->busy && bs->want != t)
				bs->want = UINT64_MAX; // another step: drop it
			else
				pthread_cond_wait(&bs->cv, &bs->mu);
		}
		pthread_mutex_unlock(&bs->mu);
	}
	if (bs->step[i] != t)
		gather(bs, i, t); // not prefetched (the first step, a rejoin)
	*x = bs->x[i];
	*y = bs->y[i];
	if (bs->ahead) {
		// Step t + 1 goes into the other buffer while t computes.
		pthread_mutex_lock(&bs->mu);
		bs->want = t + 1;
		pthread_cond_signal(&bs->cv);
		pthread_mutex_unlock(&bs->mu);
	}
}

void pti_batches_close(pti_batches *bs)
{
	if (bs == NULL)
		return;
	if (bs->ahead) {
		pthread_mutex_lock(&bs->mu);
		bs->stop = 1;
		pthread_cond_broadcast(&bs->cv);
		pthread_mutex_unlock(&bs->mu);
		pthread_join(bs->th, NULL);
	}
	pthread_mutex_destroy(&bs->mu);
	pthread_cond_destroy(&bs->cv);
	free(bs->perm);
	for (int i = 0; i < 2; i++) {
		free(bs->x[i]);
		free(bs->y[i]);
	}
	free(bs);
}
