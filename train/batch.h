// train/batch.h - the minibatch a worker computes on at each step: its
// B / W rows of block t % spe of epoch t / spe's seeded permutation of the
// training set, the same data whether gathered in place or ahead.
//
// With `ahead` (--prefetch), a thread gathers step t + 1's rows into a
// second buffer while step t computes, as input pipelines do; the rows
// are the same either way, so results do not change.
#ifndef PT_TRAIN_BATCH_H
#define PT_TRAIN_BATCH_H

#include <stdint.h>

struct pti_dataset;
typedef struct pti_batches pti_batches;

// pti_batches_open borrows d: with `ahead`, its thread may read d until
// pti_batches_close has returned, so d must outlive the batches (close
// them first). Returns 0, or PT_ENOMEM.
int pti_batches_open(pti_batches **out, const struct pti_dataset *d,
    uint64_t seed, uint32_t batch, uint32_t workers, uint32_t rank,
    int ahead);

// pti_batches_get points *x and *y at step t's rows, valid until the
// next call: gathered ahead when t follows the last step asked for,
// otherwise now (the first step, a worker that rejoined elsewhere).
void pti_batches_get(pti_batches *bs, uint64_t t, const float **x,
    const uint8_t **y);

// A sparse set's steps (ids, not features: pti_batches_get points *x at
// NULL): pti_batches_ids is step t's ids (b, dim) when pti_batches_get
// last gave step t, else NULL; pti_batches_ids_of gathers step t's ids
// and clicks into the caller's ids (b, dim) and y (b), changing nothing
// pti_batches_get sees (a step ahead: its rows are pulled before it
// begins). One thread at a time.
const uint64_t *pti_batches_ids(const pti_batches *bs, uint64_t t);
void pti_batches_ids_of(pti_batches *bs, uint64_t t, uint64_t *ids,
    uint8_t *y);

void pti_batches_close(pti_batches *bs);

#endif // PT_TRAIN_BATCH_H
