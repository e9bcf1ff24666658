// ps/pieces.h - what the consistency policies share, below them all: the
// pieces of each worker's gradient received for a step, the bit sets
// they are marked in, the shard's optimizer step, and the slowest clock.
// Nothing here calls back up into the server's shell.
#ifndef PT_PS_PIECES_H
#define PT_PS_PIECES_H

#include <stdint.h>

#include "ps/policy.h"

// ps_got: the pieces of each worker's gradient received for its last
// step: n[r] floats of step[r], marked in worker r's row of bits (a
// whole-shard piece marks nothing: any other piece then overlaps it).
typedef struct ps_got {
	uint64_t *bits; // (workers, words)
	int64_t *step;  // (workers)
	uint64_t *n;    // (workers)
	uint64_t words; // (shard + 63) / 64
} ps_got;

// pti_got_init sizes g for the workers and the shard of s (zeroed);
// pti_got_fini frees it (also a half-built one).
int pti_got_init(ps_got *g, const ps_server *s);
void pti_got_fini(ps_got *g);

// pti_got_take records that worker r pushed [off, off + n) of the shard
// for `step`. Returns 1 once the worker's whole shard is in for that
// step, 0 while pieces are missing, -1 with a detail for a range pushed
// already.
int pti_got_take(ps_got *g, const ps_server *s, uint32_t r, int64_t step,
    uint64_t off, uint64_t n);

// pti_got_covers: whether worker r's gradient for `step` has all of
// [off, off + n) in.
int pti_got_covers(const ps_got *g, const ps_server *s, uint32_t r,
    int64_t step, uint64_t off, uint64_t n);

// Bit sets of the shard's elements: whether any or all of [lo, hi) are
// marked; mark them; the first unmarked run [*lo, *hi) at or after
// `from`, below n (0 when none).
int pti_bits_any(const uint64_t *b, uint64_t lo, uint64_t hi);
int pti_bits_all(const uint64_t *b, uint64_t lo, uint64_t hi);
void pti_bits_set(uint64_t *b, uint64_t lo, uint64_t hi);
int pti_bits_gap(const uint64_t *b, uint64_t from, uint64_t n,
    uint64_t *lo, uint64_t *hi);

// pti_first_nonfinite is 1 + the index of the first NaN or infinity of
// the n floats at pay (which need not be aligned), or 0.
uint64_t pti_first_nonfinite(const void *pay, uint64_t n);

// pti_aligned: a request's values where they lie (pti_msg_encode pads
// the header so that they are aligned), or NULL when they are not (a
// peer that pads otherwise): they are then copied first.
const float *pti_aligned(const void *pay);

// pti_shard_apply runs the optimizer on [off, off + n) of the shard with
// gradient g divided by gdiv, at learning rate lr, as the shard's next
// update (s->updates + 1). With --transport shm the values are in a
// segment workers read: the first change marks them changing, and
// pti_shard_publish (server_impl.h) says they are whole again.
void pti_shard_apply(ps_server *s, uint64_t off, const float *g,
    uint64_t n, double gdiv, double lr);

// pti_shard_let_go: a pass over the shard that reads workers' pushes
// where they lie has read [*from, to) of them for good (summed or
// applied); hi ends the pass. With --transport shm, every PS_LET_GO
// floats and at the pass's end, the server lets go of its view of those
// pages in the segments of the workers `use` marks (NULL: none) and of
// worker cur (UINT32_MAX: none), past the first worker's, in a job of
// more than PS_KEEP_WORKERS workers: madvise MADV_DONTNEED on a shared
// mapping drops the server's page-table entries, never the contents,
// which are the worker's and map back in when read again. The server's
// RSS then holds at most two workers' gradients whatever their number.
// Moves *from to `to` when it let go; nothing without shared memory.
void pti_shard_let_go(ps_server *s, const uint8_t *use, uint32_t cur,
    uint64_t *from, uint64_t to, uint64_t hi);

// pti_shm_unchanged: with --transport shm a gradient is read where its
// worker wrote it, after the checks (bound.c) read it there, so a worker
// that writes its segment meanwhile could slip a NaN or an infinity past
// them. 1 when the len values of g (the sum over [off, off + len) of
// the shard of the gradients of the workers `use` marks (NULL: none)
// and of worker cur (UINT32_MAX: none)) are finite, or without shared
// memory. Else 0: the chunk is not to be applied; the workers whose
// values there are no longer finite are named in the log and counted as
// refused (s->nonfinite), or an overflowing sum is.
int pti_shm_unchanged(ps_server *s, const uint8_t *use, uint32_t cur,
    uint64_t off, const float *g, size_t len);

// pti_min_clock sets s->min_clock to the slowest clock of the live
// workers; 0 when every worker is lost (then unchanged), else 1.
int pti_min_clock(ps_server *s);

// pti_fill_set fills t->fill: request m holds at pay the shard's values
// [off, off + n) as they are at version ver, so that it can carry their
// reply without a copy.
void pti_fill_set(ps_take *t, nng_msg *m, float *pay, uint64_t off,
    uint64_t n, int64_t ver);

#endif // PT_PS_PIECES_H
