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
	float *x[2];                  // (b, dim) each; NULL for a sparse set
	uint64_t *ids[2];             // (b, dim) a sparse set's, or NULL
	uint8_t *y[2];                // (b)
	uint32_t *perm2;              // pti_batches_ids's own permutation
	uint32_t epoch2;              // of this epoch (UINT32_MAX: none)
	uint64_t step[2];             // the step buffer i holds; UINT64_MAX:
				      // none
	int ahead;                    // a thread gathers the next step
	pthread_t th;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	uint64_t want;  // the step the thread is to gather; UINT64_MAX: none
	int busy, stop; // the thread is gathering; it is to end
};

// slice is this worker's part of step t's global batch: block t % spe of
// epoch t / spe's seeded permutation, kept in perm (of *epoch).
static const uint32_t *slice(const pti_batches *bs, uint32_t *perm,
    uint32_t *epoch, uint64_t t)
{
	uint32_t e = (uint32_t)(t / bs->spe);
	if (e != *epoch) {
		pti_data_perm(perm, bs->d->n, bs->seed, e);
		*epoch = e;
	}
	return perm + (size_t)(t % bs->spe) * bs->batch +
	       (size_t)bs->rank * bs->b;
}

// gather fills buffer i with step t's examples.
static void gather(pti_batches *bs, int i, uint64_t t)
{
	const uint32_t *s = slice(bs, bs->perm, &bs->epoch, t);
	if (pti_dataset_sparse(bs->d))
		pti_data_gather_ids(bs->ids[i], bs->y[i], bs->d, s, bs->b);
	else
		pti_data_gather(bs->x[i], bs->y[i], bs->d, s, bs->b);
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
	bs->epoch2 = UINT32_MAX;
	bs->perm = malloc((size_t)d->n * sizeof(uint32_t));
	int sparse = pti_dataset_sparse(d), no = 0;
	for (int i = 0; i < 2; i++) {
		if (sparse)
			no |= !(bs->ids[i] = malloc((size_t)bs->b * d->dim *
						    sizeof(uint64_t)));
		else
			no |= !(bs->x[i] = malloc((size_t)bs->b * d->dim *
						  sizeof(float)));
		no |= !(bs->y[i] = malloc(bs->b));
		bs->step[i] = UINT64_MAX;
	}
	if (sparse)
		no |= !(bs->perm2 = malloc((size_t)d->n * sizeof(uint32_t)));
	if (!bs->perm || no) {
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

const uint64_t *pti_batches_ids(const pti_batches *bs, uint64_t t)
{
	int i = (int)(t % 2);
	return bs->step[i] == t ? bs->ids[i] : NULL;
}

void pti_batches_ids_of(pti_batches *bs, uint64_t t, uint64_t *ids,
    uint8_t *y)
{
	pti_data_gather_ids(ids, y, bs->d, slice(bs, bs->perm2, &bs->epoch2, t),
	    bs->b);
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
	free(bs->perm2);
	for (int i = 0; i < 2; i++) {
		free(bs->x[i]);
		free(bs->ids[i]);
		free(bs->y[i]);
	}
	free(bs);
}
