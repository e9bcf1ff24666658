// ps/rows.h - one server's rows of one embedding table (issue 35): rows
// of dim floats addressed by 64-bit ids, each with its optimizer state
// beside it, created on first touch with initial values that depend only
// on (seed, table, id), so that any placement of rows on servers gives
// the same values.
//
// Storage is dense: row k of the store holds ids[k], its values and its
// state, and an open-addressing index (linear probing, at most 3/4 full,
// backward-shift deletion: no tombstones) maps an id to k. With a
// capacity, a new row past it evicts one: the least recently touched
// (LRU) or the least often touched (LFU) of 16 rows sampled by a seeded
// generator (as Redis approximates both), so the same touches evict the
// same rows. With an admission threshold k > 1, an id becomes a row only
// at its k-th touch; until then a count-min sketch counts its touches
// and it reads as its initial values (a refusal).
//
// Not thread-safe: one server thread owns a store.
#ifndef PT_PS_ROWS_H
#define PT_PS_ROWS_H

#include <stdint.h>

#include "common/jobopt.h" // PTI_EVICT_*
#include "common/optspec.h"

typedef struct pti_rows_opts {
	uint32_t dim;      // floats per row, 1 to 65536
	uint32_t n_state;  // optimizer state vectors per row, 0 to 2
	uint64_t capacity; // rows at most; 0: no limit
	int evict;         // PTI_EVICT_*, with a capacity
	uint32_t admit;    // touches before an id becomes a row (0, 1: first)
	uint64_t seed;     // the job's seed
	uint64_t table;    // the table's number in the job
	float bound;       // initial values uniform in [-bound, bound]
} pti_rows_opts;

// What a store has done, for server-R.json and /metrics.
typedef struct pti_rows_stats {
	uint64_t rows;      // rows now
	uint64_t created;   // rows ever created
	uint64_t evictions; // rows evicted to make room
	uint64_t refusals;  // touches of ids not admitted (yet)
	uint64_t bytes;     // memory the store holds
} pti_rows_stats;

typedef struct pti_rows pti_rows;

// One row, for an update: its values, state vectors (NULL past
// n_state) and the count of updates it has had (1-based once updated).
typedef struct pti_row {
	float *v, *s1, *s2;
	uint64_t *t;
} pti_row;

// pti_rows_new makes an empty store. 0, or PT_EINVAL naming the bad
// option, or PT_ENOMEM.
int pti_rows_new(pti_rows **out, const pti_rows_opts *o);
void pti_rows_free(pti_rows *r);

// pti_rows_init_values writes the initial values of row id (dim floats)
// as every store of (seed, table, bound) makes them.
void pti_rows_init_values(const pti_rows_opts *o, uint64_t id, float *out);

// pti_rows_read writes row id's values to out (dim floats): the row's,
// or its initial values when it is not a row, and returns the updates
// the row has had (0 when it is not a row). Counts no touch.
uint64_t pti_rows_read(const pti_rows *r, uint64_t id, float *out);

// pti_rows_prefetch asks the memory for what a lookup of id will read,
// without waiting: at stage 0 its index slot; at stage 1 (that slot
// asked for some lookups before) its row. A loop of lookups calls both
// ahead of itself, so that the rows' cache misses overlap.
void pti_rows_prefetch(const pti_rows *r, uint64_t id, int stage);

// What pti_rows_touch and pti_rows_apply return for an id below the
// admission threshold (no PT_E* code is negative).
#define PTI_ROWS_REFUSED (-1)

// pti_rows_touch finds or creates row id for an update and fills *row:
// 0. An id below the admission threshold is counted and refused:
// PTI_ROWS_REFUSED, and the caller drops its gradient. PT_ENOMEM when a
// row cannot be made.
int pti_rows_touch(pti_rows *r, uint64_t id, pti_row *row);

// pti_rows_apply applies g (dim floats: the sum of gdiv gradients) to
// row id with optimizer o at rate lr (common/optim.h). The row is
// touched first: created, or refused below the admission threshold
// (PTI_ROWS_REFUSED: nothing applied). Its own update count advances, so
// a row's state moves only when that row is updated (lazy: Adam's bias
// correction counts the row's updates, not the server's); *before (when
// not NULL) gets the count it had (0 for a row created or refused). 0;
// PT_EINVAL when o keeps another number of state vectors than the
// store; PT_ENOMEM.
int pti_rows_apply(pti_rows *r, const pti_optim *o, uint64_t id,
    const float *g, double gdiv, double lr, uint64_t *before);

// pti_rows_ids writes every row's id, ascending, to ids (room for
// pti_rows_stats's rows), for a checkpoint that must not depend on the
// order rows were made in.
void pti_rows_ids(const pti_rows *r, uint64_t *ids);

void pti_rows_stats_of(const pti_rows *r, pti_rows_stats *s);

// pti_rows_dump writes everything the store's future depends on (its
// rows in their order, with their state and counts, the eviction clock
// and generator, the admission sketch, and the counters) to *out, len
// bytes (malloc'd, the caller's), for a checkpoint; pti_rows_undump
// restores it into an empty store of the same options, so that the same
// updates after it do what they would have done. PT_ENOMEM; undump:
// PT_ECORRUPT naming the table when the bytes do not fit its options.
int pti_rows_dump(const pti_rows *r, void **out, uint64_t *len);
int pti_rows_undump(pti_rows *r, const void *buf, uint64_t len);

#endif // PT_PS_ROWS_H
