// ps/sync.c - the sync policy (with backup workers): a step closes once
// the gradients of every live worker but the backups are in, and their
// mean, summed in rank order, is applied; a pushpull's reply carries the
// next step's values. Its state (ps_sync) is its own; what it did goes
// back to the server in a ps_take.
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "ps/pieces.h"
#include "ps/policy.h"

typedef struct ps_sync {
	ps_got got; // the pieces of each worker's gradient received
	// The open step's gradients. A gradient pushed whole stays in its
	// request (held); one pushed in pieces keeps each piece in its
	// request too (pieces), up to PS_HELD_PIECES, or else is copied into
	// its row of grads (allocated then), and src says where that is.
	nng_msg **held;     // (workers) the kept request, or NULL
	const float **src;  // (workers) its values, or NULL
	float *grads;       // (workers, n) rows of pieces, or NULL
	ps_piece *pieces;   // (workers, PS_HELD_PIECES)
	uint32_t *n_pieces; // (workers) how many each has kept
	uint8_t *have;      // (workers) its gradient for the open step is in
	uint32_t n_have;
	// Ranges of the open step applied ahead of its close, once every
	// worker it counts had pushed them ("eager" below): n_eager floats,
	// marked in eager_bits (words(n)).
	uint64_t *eager_bits;
	uint64_t n_eager;
	uint8_t *use;        // (workers) scratch: whose gradient a sum takes
	float acc[PS_CHUNK]; // a chunk of the sum of the step's gradients
} ps_sync;

static ps_sync *state(const ps_server *s)
{
	return s->pol;
}

static int sync_init(ps_server *s)
{
	ps_sync *y = state(s);
	uint32_t w = s->job->workers;
	int rv = pti_got_init(&y->got, s);
	if (rv != 0)
		return rv;
	y->held = calloc(w, sizeof(*y->held));
	y->src = calloc(w, sizeof(*y->src));
	y->pieces = calloc((size_t)w * PS_HELD_PIECES, sizeof(*y->pieces));
	y->n_pieces = calloc(w, sizeof(*y->n_pieces));
	y->have = calloc(w, 1);
	y->eager_bits = calloc((s->n + 63) / 64, sizeof(uint64_t));
	y->use = calloc(w, 1);
	if (!y->held || !y->src || !y->pieces || !y->n_pieces || !y->have ||
	    !y->eager_bits || !y->use)
		return pti_err_set(PT_ENOMEM, "server %u: sync state of %u "
		    "workers", s->rank, w);
	return 0;
}

static void sync_fini(ps_server *s)
{
	ps_sync *y = state(s);
	for (uint32_t r = 0; y->held != NULL && r < s->job->workers; r++)
		nng_msg_free(y->held[r]);
	for (uint32_t r = 0; y->n_pieces != NULL && r < s->job->workers; r++)
		for (uint32_t i = 0; i < y->n_pieces[r]; i++)
			nng_msg_free(y->pieces[r * PS_HELD_PIECES + i].m);
	free(y->held);
	free(y->src);
	free(y->grads);
	free(y->pieces);
	free(y->n_pieces);
	free(y->have);
	free(y->eager_bits);
	free(y->use);
	pti_got_fini(&y->got);
}

static void sum_into(float *restrict a, const float *restrict x,
    const float *restrict y, size_t n)
{
	for (size_t i = 0; i < n; i++)
		a[i] = x[i] + y[i];
}

static void add_into(float *restrict a, const float *restrict x, size_t n)
{
	for (size_t i = 0; i < n; i++)
		a[i] += x[i];
}

// ---------------------------------------------------------------- kept pieces

// A worker's pieces stay in their requests (ps_piece) until the step
// closes or their range is applied ahead: no copy, and no more memory
// than a gradient pushed whole. A worker with more pieces than
// PS_HELD_PIECES, or one whose values are not aligned, has its pieces
// copied into its row of y->grads instead.

static ps_piece *pieces_of(const ps_sync *y, uint32_t r)
{
	return y->pieces + (size_t)r * PS_HELD_PIECES;
}

// grad_at returns where worker r's gradient for element c of the shard
// lies, and in *run how many elements from c on lie there in a row.
static const float *grad_at(const ps_sync *y, uint32_t r, uint64_t c,
    uint64_t *run)
{
	const ps_piece *p = pieces_of(y, r);
	for (uint32_t i = 0; i < y->n_pieces[r]; i++)
		if (c >= p[i].off && c - p[i].off < p[i].n) {
			*run = p[i].n - (c - p[i].off);
			return p[i].g + (c - p[i].off);
		}
	*run = UINT64_MAX; // a whole request, or a row
	return y->src[r] + c;
}

// pieces_drop gives worker r's kept pieces that lie within [lo, hi) to
// the spares (they carry replies next).
static void pieces_drop(ps_server *s, uint32_t r, uint64_t lo, uint64_t hi)
{
	ps_sync *y = state(s);
	ps_piece *p = pieces_of(y, r);
	uint32_t k = 0;
	for (uint32_t i = 0; i < y->n_pieces[r]; i++) {
		if (p[i].off >= lo && p[i].off + p[i].n <= hi)
			pti_server_spare(s, p[i].m);
		else
			p[k++] = p[i];
	}
	y->n_pieces[r] = k;
}

// pieces_to_row copies worker r's kept pieces into its row (allocated by
// the caller) and gives their requests to the spares.
static void pieces_to_row(ps_server *s, uint32_t r, float *row)
{
	ps_sync *y = state(s);
	const ps_piece *p = pieces_of(y, r);
	for (uint32_t i = 0; i < y->n_pieces[r]; i++)
		memcpy(row + p[i].off, p[i].g, p[i].n * sizeof(float));
	pieces_drop(s, r, 0, s->n);
}

// covers: whether worker r's gradient for the open step has all of
// [off, off + n) in.
static int covers(const ps_server *s, uint32_t r, uint64_t off, uint64_t n)
{
	return pti_got_covers(&state(s)->got, s, r, s->version, off, n);
}

// sync_sealed closes worker r's last step to further pieces: after a
// hello (a rejoining worker goes on from its next step) and at start.
static void sync_sealed(ps_server *s, uint32_t r)
{
	ps_sync *y = state(s);
	if (!y->have[r]) {
		y->got.n[r] = 0; // its pieces of the open step are redone
		pieces_drop(s, r, 0, s->n);
		return;
	}
	y->got.step[r] = s->version;
	y->got.n[r] = s->n;
}

// ---------------------------------------------------------------- close

// rank_sum returns the sum over [c, c + len) of the shard of the gradients
// of the workers y->use marks, in rank order, so that the bits do not
// depend on the order they came in: one gradient where it lies, several
// summed into y->acc. Worker cur's gradient lies at `at`, which holds the
// shard's [at_off, ...) (a request not copied); the others' at y->src.
static const float *rank_sum(ps_sync *y, uint32_t w, uint64_t c,
    size_t len, uint32_t cur, const float *at, uint64_t at_off)
{
	const float *g = NULL;
	for (uint32_t r = 0; r < w; r++) {
		if (!y->use[r])
			continue;
		uint64_t run;
		const float *x = r == cur ? at + (c - at_off)
					  : grad_at(y, r, c, &run);
		if (g == NULL)
			g = x;
		else if (g != y->acc)
			sum_into(y->acc, g, x, len), g = y->acc;
		else
			add_into(y->acc, x, len);
	}
	return g;
}

// sum_apply applies the mean of the gradients y->use marks over [lo, hi)
// of the shard, a chunk at a time, each chunk applied while it is in
// cache; worker cur's gradient for [lo, hi) is at `at`. With fill (room
// for [lo, hi) in a request the server owns), each chunk's new values are
// written there once it is applied.
static void sum_apply(ps_server *s, uint64_t lo, uint64_t hi, uint32_t cur,
    const float *at, double gdiv, double lr, float *fill)
{
	ps_sync *y = state(s);
	uint32_t w = s->job->workers;
	uint64_t read = lo; // workers' pages let go up to here
	size_t len;
	for (uint64_t c = lo; c < hi; c += len) {
		len = hi - c < PS_CHUNK ? hi - c : PS_CHUNK;
		// A chunk ends where a kept piece it reads from does.
		for (uint32_t r = 0; r < w; r++) {
			uint64_t run;
			if (y->use[r] && r != cur && y->n_pieces[r] > 0 &&
			    (grad_at(y, r, c, &run), run < len))
				len = (size_t)run;
		}
		const float *g = rank_sum(y, w, c, len, cur, at, lo);
		if (pti_shm_unchanged(s, y->use, cur, c, g, len))
			pti_shard_apply(s, c, g, len, gdiv, lr);
		if (fill != NULL)
			memcpy(fill + (c - lo), s->params + c,
			    len * sizeof(float));
		pti_shard_let_go(s, y->use, cur, &read, c + len, hi);
	}
}

// sync_close applies the mean of the open step's gradients, summed in rank
// order, over what was not applied ahead (sync_eager): one update, and
// the step's close (t->applied, t->moved). One gradient is applied where
// it is. When nothing was applied ahead, the first gradient held in its
// request gets each new chunk written over it once the chunk is applied
// (every rank's chunk is summed by then): that request carries the first
// reply with no further pass (t->fill). Only a request with a header's
// room (pti_msg_roomy) can: a reply's header may be longer than a small
// request's.
static void sync_close(ps_server *s, ps_take *t)
{
	ps_sync *y = state(s);
	uint32_t w = s->job->workers, rc = 0;
	double lr = pti_lr(&s->lr, s->version, 0);
	for (uint32_t r = 0; r < w; r++)
		y->use[r] = y->have[r]; // a backup worker's is still to come
	while (rc < w && !(y->have[rc] && y->held[rc] != NULL))
		rc++;
	// (Not one whose values are in shared memory: the worker's, read
	// only here.)
	nng_msg *fm = y->n_eager == 0 && rc < w && s->shm_mine.p == NULL &&
			      pti_msg_roomy(y->held[rc], s->n)
			  ? y->held[rc]
			  : NULL;
	// The server owns the held request: its values may be overwritten.
	float *fill = fm != NULL ? (float *)y->src[rc] : NULL;
	uint64_t lo = 0, hi = s->n;
	while (y->n_eager == 0
		   ? lo < s->n
		   : pti_bits_gap(y->eager_bits, lo, s->n, &lo, &hi)) {
		// fill is set only when this is the one run, [0, n).
		sum_apply(s, lo, hi, UINT32_MAX, NULL, y->n_have, lr, fill);
		lo = hi;
	}
	for (uint32_t r = 0; r < w; r++) {
		y->have[r] = 0;
		pti_server_spare(s, y->held[r]); // to carry the replies
		y->held[r] = NULL;
		pieces_drop(s, r, 0, s->n);
		y->src[r] = NULL;
	}
	y->n_have = 0;
	if (y->n_eager > 0) {
		memset(y->eager_bits, 0,
		    (s->n + 63) / 64 * sizeof(uint64_t));
		y->n_eager = 0;
	}
	t->applied = 1;
	t->moved = 1;
	if (fill != NULL)
		pti_fill_set(t, fm, fill, 0, s->n, s->version + 1);
}

// ---------------------------------------------------------------- eager

// Sync without backup workers: a range of the open step that every worker
// it counts has pushed is applied at once, ahead of the step's close, and
// its pushpulls are answered then with the next version's values for it.
// The optimizer is elementwise and the sum goes in rank order either way,
// so the parameters get the same bits as at the close; a worker that
// pushes its gradient in pieces as backward makes them gets each piece's
// values back while it computes the rest. The close then applies what is
// left. In a step a worker is lost in, a range applied before the loss
// has its gradient (if it had pushed the range) and the rest does not.

// eager_ready: whether worker cur's piece [off, off + n) may be applied
// now: no backup workers (every live worker counts in the step), none of
// the range applied yet, and every other worker that is not lost has all
// of it in. Marks in y->use whose gradients the sum takes.
static int eager_ready(ps_server *s, uint32_t cur, uint64_t off, uint64_t n)
{
	ps_sync *y = state(s);
	const pti_jobopt *c = s->job;
	if (c->backup_workers > 0 || pti_bits_any(y->eager_bits, off, off + n))
		return 0;
	for (uint32_t r = 0; r < c->workers; r++) {
		y->use[r] = r == cur || covers(s, r, off, n);
		if (!y->use[r] && !s->m[r].lost)
			return 0;
	}
	return 1;
}

// eager applies [off, off + n) from worker cur's request values g and the
// other workers' kept gradients (eager_ready said it may). A pushpull's
// request the server owns gets the new values over g, chunk by chunk,
// and carries its own reply (t->fill); the range is ready (t->ready).
static void eager(ps_server *s, uint32_t cur, const pti_hdr *h,
    const float *g, uint64_t off, uint64_t n, ps_take *t)
{
	ps_sync *y = state(s);
	uint32_t k = 0;
	for (uint32_t r = 0; r < s->job->workers; r++)
		k += y->use[r];
	float *fill = h->op == PT_OP_PUSHPULL && s->cur != NULL &&
			      pti_msg_roomy(s->cur, n)
			  ? (float *)g
			  : NULL;
	sum_apply(s, off, off + n, cur, g, k, t->lr, fill);
	// The others' pieces of the range are read no more: they carry the
	// replies woken then.
	for (uint32_t r = 0; r < s->job->workers; r++)
		if (r != cur && y->n_pieces[r] > 0)
			pieces_drop(s, r, off, off + n);
	pti_bits_set(y->eager_bits, off, off + n);
	y->n_eager += n;
	t->ready = 1;
	if (fill != NULL)
		pti_fill_set(t, s->cur, fill, off, n, s->version);
}

static int sync_ahead(const ps_server *s, uint64_t off, uint64_t n)
{
	const ps_sync *y = state(s);
	return y->n_eager > 0 && pti_bits_all(y->eager_bits, off, off + n);
}

// maybe_close closes the open step once the gradients of every live
// worker but the backups are in: workers that died no longer count.
static void maybe_close(ps_server *s, ps_take *t)
{
	const pti_jobopt *c = s->job;
	uint32_t need = c->workers - c->backup_workers;
	need = need > s->n_lost ? need - s->n_lost : 1;
	if (state(s)->n_have > 0 && state(s)->n_have >= need)
		sync_close(s, t);
}

// sync_settle: a worker was lost, so the open step may close without it.
static void sync_settle(ps_server *s, ps_take *t)
{
	maybe_close(s, t);
	t->clocks = 1;
}

// ---------------------------------------------------------------- take

// sync_take files a gradient, or a piece of one, for the open step; one
// for a step that closed without it is dropped. The worker counts once
// its whole shard is in.
static int sync_take(ps_server *s, const pti_hdr *h, const void *pay,
    uint64_t off, uint64_t n, ps_take *t)
{
	ps_sync *y = state(s);
	if ((h->has & PTI_H_STEP) && h->step >= 0 && h->step < s->version) {
		// Its step closed without it (a backup worker's late
		// gradient, or a rejoining worker one step behind on this
		// shard): the worker carries on from the new parameters.
		t->dropped = 1;
		return 0;
	}
	if (!(h->has & PTI_H_STEP) || h->step != s->version)
		return pti_err_set(PT_ESTATE,
		    "worker %u pushed step %lld, the open step is %lld",
		    h->rank, (long long)h->step, (long long)s->version);
	if (y->have[h->rank])
		return pti_err_set(PT_ESTATE,
		    "worker %u already pushed step %lld", h->rank,
		    (long long)h->step);
	// A whole shard in one request stays there until the step closes;
	// a piece is applied at once when every worker has it in (eager),
	// or else copied into the worker's row.
	uint32_t r = h->rank;
	const float *ga = pti_aligned(pay);
	int keep = n == s->n && ga != NULL && s->cur != NULL;
	int ahead = !keep && ga != NULL && eager_ready(s, r, off, n);
	int hold = !keep && !ahead && ga != NULL && s->cur != NULL &&
		   y->src[r] == NULL && y->n_pieces[r] < PS_HELD_PIECES;
	if (!keep && !ahead && !hold && y->grads == NULL &&
	    (y->grads = malloc((size_t)s->job->workers * s->n *
				sizeof(float))) == NULL)
		return pti_err_set(PT_ENOMEM, "rows for gradients in pieces");
	int whole = pti_got_take(&y->got, s, r, h->step, off, n);
	if (whole < 0)
		return PT_ESTATE;
	t->lr = pti_lr(&s->lr, s->version, 0);
	if (keep) {
		y->held[r] = s->cur;
		s->cur = NULL;
		y->src[r] = pay;
	} else if (ahead) {
		eager(s, r, h, ga, off, n, t);
	} else if (hold) {
		ps_piece *p = &pieces_of(y, r)[y->n_pieces[r]++];
		p->off = off;
		p->n = n;
		p->m = s->cur;
		p->g = ga;
		s->cur = NULL;
	} else {
		float *row = y->grads + (size_t)r * s->n;
		pieces_to_row(s, r, row);
		memcpy(row + off, pay, n * sizeof(float));
		y->src[r] = row;
	}
	if (whole) {
		y->have[h->rank] = 1;
		++y->n_have;
		maybe_close(s, t);
	}
	// Its range may hold the next version now (this piece or the ones
	// before it were applied ahead), unless the step closed meanwhile.
	t->ahead = sync_ahead(s, off, n);
	return 0;
}

// A pushpull's reply carries the values of the step after its own.
static int64_t sync_reply_after(const ps_server *s, const pti_hdr *h,
    const ps_take *t)
{
	return !t->dropped && !t->ahead && s->version <= h->step
		   ? h->step + 1
		   : -1;
}

static int64_t sync_key(const ps_server *s)
{
	return s->version;
}

static int sync_waits_for(const ps_server *s, uint32_t r)
{
	return !state(s)->have[r];
}

static int64_t sync_start(const ps_server *s, uint32_t r)
{
	(void)r;
	return s->version; // the open step
}

// Nothing waits for the clocks in sync.
static int sync_clocks(ps_server *s)
{
	(void)pti_min_clock(s);
	return 0;
}

const ps_policy pti_policy_sync = {
	.name = "sync",
	.size = sizeof(ps_sync),
	.init = sync_init,
	.fini = sync_fini,
	.take = sync_take,
	.reply_after = sync_reply_after,
	.key = sync_key,
	.waits_for = sync_waits_for,
	.start = sync_start,
	.settle = sync_settle,
	.sealed = sync_sealed,
	.ahead = sync_ahead,
	.clocks = sync_clocks,
	.pull_waits = 1,
	.keeps = 1,
};
