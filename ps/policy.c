// ps/policy.c - the consistency policies: sync (with backup workers),
// async and ssp, as one ops table each (server_impl.h). What a worker's
// gradient does to the shard, when a pushpull's reply may go, what parked
// requests wait for, and which worker a stalled job waits for. Everything
// else about a request (connections, checks, replies) is server.c's.
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "server_impl.h"

// ---------------------------------------------------------------- values

// A request's values are read where they are: pti_msg_encode pads the
// header so that they are aligned in the body; NULL when they are not
// (a peer that pads otherwise), and then they are copied first.
static const float *aligned(const void *pay)
{
	return (uintptr_t)pay % _Alignof(float) == 0 ? pay : NULL;
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

// apply runs the optimizer on [off, off + n) of the shard with gradient g
// divided by gdiv.
static void apply(ps_server *s, uint64_t off, const float *g, uint64_t n,
    double gdiv, double lr)
{
	pti_optim_apply(&s->opt, s->params + off,
	    s->state1 ? s->state1 + off : NULL,
	    s->state2 ? s->state2 + off : NULL, g, n, gdiv, lr,
	    s->updates + 1);
}

// fill_mark records that m's values at pay hold the shard's [off, +n) as
// they are now (the version after this update): m carries their reply
// without a copy (ops.c, pti_server_reply).
static void fill_mark(ps_server *s, nng_msg *m, float *pay, uint64_t off,
    uint64_t n)
{
	s->filled = m;
	s->filled_pay = pay;
	s->filled_off = off;
	s->filled_n = n;
	s->filled_ver = s->version;
}

// ---------------------------------------------------------------- kept pieces

// A sync worker's pieces stay in their requests (ps_piece) until the step
// closes or their range is applied ahead: no copy, and no more memory
// than a gradient pushed whole. A worker with more pieces than
// PS_HELD_PIECES, or one whose values are not aligned, has its pieces
// copied into its row of s->grads instead.

static ps_piece *pieces_of(const ps_server *s, uint32_t r)
{
	return s->pieces + (size_t)r * PS_HELD_PIECES;
}

// grad_at returns where worker r's gradient for element c of the shard
// lies, and in *run how many elements from c on lie there in a row.
static const float *grad_at(const ps_server *s, uint32_t r, uint64_t c,
    uint64_t *run)
{
	const ps_piece *p = pieces_of(s, r);
	for (uint32_t i = 0; i < s->n_pieces[r]; i++)
		if (c >= p[i].off && c - p[i].off < p[i].n) {
			*run = p[i].n - (c - p[i].off);
			return p[i].g + (c - p[i].off);
		}
	*run = UINT64_MAX; // a whole request, or a row
	return s->src[r] + c;
}

// pieces_drop gives worker r's kept pieces that lie within [lo, hi) to
// the spares (they carry replies next).
static void pieces_drop(ps_server *s, uint32_t r, uint64_t lo, uint64_t hi)
{
	ps_piece *p = pieces_of(s, r);
	uint32_t k = 0;
	for (uint32_t i = 0; i < s->n_pieces[r]; i++) {
		if (p[i].off >= lo && p[i].off + p[i].n <= hi)
			pti_server_spare(s, p[i].m);
		else
			p[k++] = p[i];
	}
	s->n_pieces[r] = k;
}

// pieces_to_row copies worker r's kept pieces into its row (allocated by
// the caller) and gives their requests to the spares.
static void pieces_to_row(ps_server *s, uint32_t r, float *row)
{
	const ps_piece *p = pieces_of(s, r);
	for (uint32_t i = 0; i < s->n_pieces[r]; i++)
		memcpy(row + p[i].off, p[i].g, p[i].n * sizeof(float));
	pieces_drop(s, r, 0, s->n);
}

// ---------------------------------------------------------------- pieces

// A worker's gradient for a step may come in pieces (a program that
// pushes one variable at a time), in any order, each range once.

// bits_mask: the mask of bits [i, *e) in the word of bit i, where *e is
// the end of that word or hi, whichever comes first.
static uint64_t bits_mask(uint64_t i, uint64_t hi, uint64_t *e)
{
	uint64_t end = (i / 64 + 1) * 64;
	*e = end < hi ? end : hi;
	return (*e - i == 64 ? ~0ULL : ((1ULL << (*e - i)) - 1)) << (i % 64);
}

static int bits_any(const uint64_t *b, uint64_t lo, uint64_t hi)
{
	for (uint64_t i = lo, e; i < hi; i = e)
		if (b[i / 64] & bits_mask(i, hi, &e))
			return 1;
	return 0;
}

static int bits_all(const uint64_t *b, uint64_t lo, uint64_t hi)
{
	for (uint64_t i = lo, e; i < hi; i = e) {
		uint64_t m = bits_mask(i, hi, &e);
		if ((b[i / 64] & m) != m)
			return 0;
	}
	return 1;
}

static void bits_set(uint64_t *b, uint64_t lo, uint64_t hi)
{
	for (uint64_t i = lo, e; i < hi; i = e)
		b[i / 64] |= bits_mask(i, hi, &e);
}

// bits_claim marks [lo, hi) in b unless any of it is marked already
// (then -1, nothing changed).
static int bits_claim(uint64_t *b, uint64_t lo, uint64_t hi)
{
	if (bits_any(b, lo, hi))
		return -1;
	bits_set(b, lo, hi);
	return 0;
}

// bits_gap finds the first run [*lo, *hi) of unmarked bits at or after
// from, below n; 0 when there is none. Whole words are skipped at once.
static int bits_gap(const uint64_t *b, uint64_t from, uint64_t n,
    uint64_t *lo, uint64_t *hi)
{
	uint64_t i = from;
	while (i < n && (b[i / 64] >> (i % 64) & 1))
		i = i % 64 == 0 && b[i / 64] == ~0ULL ? i + 64 : i + 1;
	if (i >= n)
		return 0;
	*lo = i;
	while (i < n && !(b[i / 64] >> (i % 64) & 1))
		i = i % 64 == 0 && b[i / 64] == 0 ? i + 64 : i + 1;
	*hi = i < n ? i : n;
	return 1;
}

// piece_take records that worker r pushed [off, off + n) of the shard for
// `step`. Returns 1 once the worker's whole shard is in for that step, 0
// while pieces are missing, -1 with a detail for a range pushed already.
static int piece_take(ps_server *s, uint32_t r, int64_t step, uint64_t off,
    uint64_t n)
{
	ps_member *m = &s->m[r];
	uint64_t words = (s->n + 63) / 64;
	uint64_t *bits = s->got_bits + (size_t)r * words;
	if (m->got_step != step) {
		m->got_step = step;
		m->got_n = 0;
	}
	if (m->got_n == 0 && n == s->n) {
		m->got_n = n; // the common case: the whole shard at once
		return 1;
	}
	if (m->got_n == 0)
		memset(bits, 0, words * sizeof(uint64_t));
	if (m->got_n == s->n || bits_claim(bits, off, off + n) != 0) {
		pti_err_set(PT_ESTATE, "worker %u already pushed part of "
		    "[%llu, +%llu) for step %lld", r,
		    (unsigned long long)(s->lo + off), (unsigned long long)n,
		    (long long)step);
		return -1;
	}
	m->got_n += n;
	return m->got_n == s->n;
}

// covers: whether worker r's gradient for the open step has all of
// [off, off + n) in.
static int covers(const ps_server *s, uint32_t r, uint64_t off, uint64_t n)
{
	const ps_member *m = &s->m[r];
	if (m->got_step != s->version || m->got_n == 0)
		return 0;
	if (m->got_n == s->n)
		return 1;
	uint64_t words = (s->n + 63) / 64;
	return bits_all(s->got_bits + (size_t)r * words, off, off + n);
}

// pti_policy_sealed closes worker r's last step to further pieces: after
// a hello (a rejoining worker goes on from its next step) and a resume.
void pti_policy_sealed(ps_server *s, uint32_t r)
{
	if (s->cfg->mode == PT_MODE_SYNC && !s->m[r].have) {
		s->m[r].got_n = 0; // its pieces of the open step are redone
		pieces_drop(s, r, 0, s->n);
		return;
	}
	s->m[r].got_step = s->cfg->mode == PT_MODE_SYNC ? s->version
							: s->m[r].clock - 1;
	s->m[r].got_n = s->n;
}

// ---------------------------------------------------------------- sync

// rank_sum returns the sum over [c, c + len) of the shard of the gradients
// of the workers s->use marks, in rank order, so that the bits do not
// depend on the order they came in: one gradient where it lies, several
// summed into s->acc. Worker cur's gradient lies at `at`, which holds the
// shard's [at_off, ...) (a request not copied); the others' at s->src.
static const float *rank_sum(ps_server *s, uint64_t c, size_t len,
    uint32_t cur, const float *at, uint64_t at_off)
{
	const float *g = NULL;
	for (uint32_t r = 0; r < s->cfg->workers; r++) {
		if (!s->use[r])
			continue;
		uint64_t run;
		const float *x = r == cur ? at + (c - at_off)
					  : grad_at(s, r, c, &run);
		if (g == NULL)
			g = x;
		else if (g != s->acc)
			sum_into(s->acc, g, x, len), g = s->acc;
		else
			add_into(s->acc, x, len);
	}
	return g;
}

// sum_apply applies the mean of the gradients s->use marks over [lo, hi)
// of the shard, a chunk at a time, each chunk applied while it is in
// cache; worker cur's gradient for [lo, hi) is at `at`. With fill (room
// for [lo, hi) in a request the server owns), each chunk's new values are
// written there once it is applied.
static void sum_apply(ps_server *s, uint64_t lo, uint64_t hi, uint32_t cur,
    const float *at, double gdiv, double lr, float *fill)
{
	size_t len;
	for (uint64_t c = lo; c < hi; c += len) {
		len = hi - c < PS_CHUNK ? hi - c : PS_CHUNK;
		// A chunk ends where a kept piece it reads from does.
		for (uint32_t r = 0; r < s->cfg->workers; r++) {
			uint64_t run;
			if (s->use[r] && r != cur && s->n_pieces[r] > 0 &&
			    (grad_at(s, r, c, &run), run < len))
				len = (size_t)run;
		}
		apply(s, c, rank_sum(s, c, len, cur, at, lo), len, gdiv, lr);
		if (fill != NULL)
			memcpy(fill + (c - lo), s->params + c,
			    len * sizeof(float));
	}
}

// sync_close applies the mean of the open step's gradients, summed in rank
// order, over what was not applied ahead (sync_eager), then answers the
// requests that waited for it. One gradient is applied where it is. When
// nothing was applied ahead, the first gradient held in its request gets
// each new chunk written over it once the chunk is applied (every rank's
// chunk is summed by then): that request carries the first reply with no
// further pass. Only a request with a header's room (pti_msg_roomy) can:
// a reply's header may be longer than a small request's.
static void sync_close(ps_server *s, ps_ctx **wake)
{
	uint32_t w = s->cfg->workers, rc = 0;
	double lr = pti_server_lr(s, s->version);
	for (uint32_t r = 0; r < w; r++)
		s->use[r] = s->m[r].have; // a backup worker's is still to come
	while (rc < w && !(s->m[rc].have && s->held[rc] != NULL))
		rc++;
	nng_msg *fm = s->n_eager == 0 && rc < w &&
			      pti_msg_roomy(s->held[rc], s->n)
			  ? s->held[rc]
			  : NULL;
	// The server owns the held request: its values may be overwritten.
	float *fill = fm != NULL ? (float *)s->src[rc] : NULL;
	uint64_t lo = 0, hi = s->n;
	while (s->n_eager == 0 ? lo < s->n
			       : bits_gap(s->eager_bits, lo, s->n, &lo, &hi)) {
		// fill is set only when this is the one run, [0, n).
		sum_apply(s, lo, hi, UINT32_MAX, NULL, s->n_have, lr, fill);
		lo = hi;
	}
	for (uint32_t r = 0; r < w; r++) {
		s->m[r].have = 0;
		pti_server_spare(s, s->held[r]); // to carry the replies
		s->held[r] = NULL;
		pieces_drop(s, r, 0, s->n);
		s->src[r] = NULL;
	}
	s->n_have = 0;
	if (s->n_eager > 0) {
		memset(s->eager_bits, 0,
		    (s->n + 63) / 64 * sizeof(uint64_t));
		s->n_eager = 0;
	}
	pti_server_applied(s, 0);
	if (fill != NULL)
		fill_mark(s, fm, fill, 0, s->n);
	pti_server_wake(s, wake);
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

// sync_eager_ready: whether worker cur's piece [off, off + n) may be
// applied now: no backup workers (every live worker counts in the step),
// none of the range applied yet, and every other worker that is not lost
// has all of it in. Marks in s->use whose gradients the sum takes.
static int sync_eager_ready(ps_server *s, uint32_t cur, uint64_t off,
    uint64_t n)
{
	const pt_config *c = s->cfg;
	if (c->backup_workers > 0 ||
	    bits_any(s->eager_bits, off, off + n))
		return 0;
	for (uint32_t r = 0; r < c->workers; r++) {
		s->use[r] = r == cur || covers(s, r, off, n);
		if (!s->use[r] && !s->m[r].lost)
			return 0;
	}
	return 1;
}

// sync_eager applies [off, off + n) from worker cur's request values g and
// the other workers' kept gradients (sync_eager_ready said it may). A
// pushpull's request the server owns gets the new values over g, chunk by
// chunk, and carries its own reply.
static void sync_eager(ps_server *s, uint32_t cur, const pti_hdr *h,
    const float *g, uint64_t off, uint64_t n, double lr, ps_ctx **wake)
{
	uint32_t k = 0;
	for (uint32_t r = 0; r < s->cfg->workers; r++)
		k += s->use[r];
	float *fill = h->op == PT_OP_PUSHPULL && s->cur != NULL &&
			      pti_msg_roomy(s->cur, n)
			  ? (float *)g
			  : NULL;
	sum_apply(s, off, off + n, cur, g, k, lr, fill);
	// The others' pieces of the range are read no more: they carry the
	// replies woken below.
	for (uint32_t r = 0; r < s->cfg->workers; r++)
		if (r != cur && s->n_pieces[r] > 0)
			pieces_drop(s, r, off, off + n);
	bits_set(s->eager_bits, off, off + n);
	s->n_eager += n;
	s->eager_pieces++;
	if (fill != NULL)
		fill_mark(s, s->cur, fill, off, n);
	pti_server_wake_ahead(s, wake);
}

int pti_policy_ahead(const ps_server *s, uint64_t off, uint64_t n)
{
	return s->n_eager > 0 && bits_all(s->eager_bits, off, off + n);
}

// sync_maybe_close closes the open step once the gradients of every live
// worker but the backups are in: workers that died no longer count.
static void sync_maybe_close(ps_server *s, ps_ctx **wake)
{
	const pt_config *c = s->cfg;
	uint32_t need = c->workers - c->backup_workers;
	need = need > s->n_lost ? need - s->n_lost : 1;
	if (s->n_have > 0 && s->n_have >= need)
		sync_close(s, wake);
}

// sync_settle: a worker was lost, so the open step may close without it.
static void sync_settle(ps_server *s, ps_ctx **wake)
{
	sync_maybe_close(s, wake);
	pti_policy_clocks(s, wake);
}

// sync_take files a gradient, or a piece of one, for the open step; one
// for a step that closed without it is dropped. The worker counts once
// its whole shard is in.
static int sync_take(ps_server *s, const pti_hdr *h, const void *pay,
    uint64_t off, uint64_t n, ps_take *t, ps_ctx **wake)
{
	if ((h->has & PTI_H_STEP) && h->step >= 0 && h->step < s->version) {
		// Its step closed without it (a backup worker's late
		// gradient, or a rejoining worker one step behind on this
		// shard): the worker carries on from the new parameters.
		s->dropped++;
		t->dropped = 1;
		return 0;
	}
	if (!(h->has & PTI_H_STEP) || h->step != s->version)
		return pti_err_set(PT_ESTATE,
		    "worker %u pushed step %lld, the open step is %lld",
		    h->rank, (long long)h->step, (long long)s->version);
	if (s->m[h->rank].have)
		return pti_err_set(PT_ESTATE,
		    "worker %u already pushed step %lld", h->rank,
		    (long long)h->step);
	// A whole shard in one request stays there until the step closes;
	// a piece is applied at once when every worker has it in (eager),
	// or else copied into the worker's row.
	uint32_t r = h->rank;
	const float *ga = aligned(pay);
	int keep = n == s->n && ga != NULL && s->cur != NULL;
	int eager = !keep && ga != NULL && sync_eager_ready(s, r, off, n);
	int hold = !keep && !eager && ga != NULL && s->cur != NULL &&
		   s->src[r] == NULL && s->n_pieces[r] < PS_HELD_PIECES;
	if (!keep && !eager && !hold && s->grads == NULL &&
	    (s->grads = malloc((size_t)s->cfg->workers * s->n *
				sizeof(float))) == NULL)
		return pti_err_set(PT_ENOMEM, "rows for gradients in pieces");
	int whole = piece_take(s, r, h->step, off, n);
	if (whole < 0)
		return PT_ESTATE;
	t->lr = pti_server_lr(s, s->version);
	if (keep) {
		s->held[r] = s->cur;
		s->cur = NULL;
		s->src[r] = pay;
	} else if (eager) {
		sync_eager(s, r, h, ga, off, n, t->lr, wake);
	} else if (hold) {
		ps_piece *p = &pieces_of(s, r)[s->n_pieces[r]++];
		p->off = off;
		p->n = n;
		p->m = s->cur;
		p->g = ga;
		s->cur = NULL;
	} else {
		float *row = s->grads + (size_t)r * s->n;
		pieces_to_row(s, r, row);
		memcpy(row + off, pay, n * sizeof(float));
		s->src[r] = row;
	}
	if (whole) {
		s->m[h->rank].have = 1;
		++s->n_have;
		sync_maybe_close(s, wake);
	}
	// Its range may hold the next version now (this piece or the ones
	// before it were applied ahead), unless the step closed meanwhile.
	t->ahead = pti_policy_ahead(s, off, n);
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

static int64_t by_version(const ps_server *s)
{
	return s->version;
}

static int sync_waits_for(const ps_server *s, uint32_t r)
{
	return !s->m[r].have;
}

static int64_t sync_start(const ps_server *s, uint32_t r)
{
	(void)r;
	return s->version; // the open step
}

// ---------------------------------------------------------------- async, ssp

// clock_take applies a gradient at once (async, ssp), unless it is staler
// than --max-staleness, and moves the worker's clock.
static int clock_take(ps_server *s, const pti_hdr *h, const void *pay,
    uint64_t off, uint64_t n, ps_take *t, ps_ctx **wake)
{
	const pt_config *c = s->cfg;
	if (!(h->has & PTI_H_VER) || h->ver < 0 || h->ver > s->version)
		return pti_err_set(PT_ESTATE,
		    "an %s push needs the version it was computed from "
		    "(0..%lld)", s->policy->name, (long long)s->version);
	// How far ahead of the slowest worker this push is: ssp bounds it by
	// --staleness, async does not. Measured here, where the push lands.
	// A step past the clock is a worker that skipped ahead (it came
	// back to a restarted server, or its own restart resumed later on).
	// A step this worker pushed already is a replay (or a worker
	// confused about where it is): applying it again would count one
	// gradient twice.
	// A piece of the step it pushed last goes on with that step.
	if (!(h->has & PTI_H_STEP) || h->step < s->m[h->rank].clock - 1 ||
	    piece_take(s, h->rank, h->step, off, n) < 0)
		return pti_err_set(PT_ESTATE,
		    "worker %u pushed step %lld, its next step is %lld",
		    h->rank, (long long)h->step,
		    (long long)s->m[h->rank].clock);
	if (h->step - s->min_clock > s->max_lead)
		s->max_lead = h->step - s->min_clock;
	t->stale = s->version - h->ver;
	if (c->max_staleness >= 0 && t->stale > c->max_staleness) {
		s->dropped++;
		t->dropped = 1;
	} else {
		t->lr = pti_server_lr(s, h->step);
		// Sync applies lr x the mean of W gradients per step; one
		// gradient at lr / W moves the parameters as far per example.
		if (c->matched_lr)
			t->lr /= (double)c->workers;
		if (c->staleness_lr && t->stale > 1)
			t->lr /= (double)t->stale;
		// A chunk at a time: values that are not aligned are copied
		// first; a pushpull's request gets each chunk's new values
		// over its gradient once applied, and carries its own reply
		// with no further pass (op_push).
		const float *ga = aligned(pay);
		float *fill = ga != NULL && h->op == PT_OP_PUSHPULL &&
				      pti_msg_roomy(s->cur, n)
				  ? (float *)ga // the server owns the request
				  : NULL;
		for (uint64_t c = 0; c < n; c += PS_CHUNK) {
			size_t len = n - c < PS_CHUNK ? n - c : PS_CHUNK;
			const float *g = ga != NULL
					     ? ga + c
					     : memcpy(s->acc,
						   (const char *)pay + c * 4,
						   len * sizeof(float));
			apply(s, off + c, g, len, 1, t->lr);
			if (fill != NULL)
				memcpy(fill + c, s->params + off + c,
				    len * sizeof(float));
		}
		pti_server_applied(s, t->stale);
		if (fill != NULL)
			fill_mark(s, s->cur, fill, off, n);
	}
	// The clock moves even for a dropped gradient: the step is done,
	// only its update was refused.
	int was_min = s->m[h->rank].clock == s->min_clock;
	s->m[h->rank].clock = h->step + 1; // the same for a later piece
	if (was_min)
		pti_policy_clocks(s, wake);
	return 0;
}

static int64_t async_reply_after(const ps_server *s, const pti_hdr *h,
    const ps_take *t)
{
	(void)s, (void)h, (void)t;
	return -1;
}

// ssp: worker r may start step c+1 only once every worker has pushed
// step c - s, that is when the slowest clock reaches c - s + 1.
static int64_t ssp_reply_after(const ps_server *s, const pti_hdr *h,
    const ps_take *t)
{
	(void)t;
	int64_t need = h->step + 1 - (int64_t)s->cfg->staleness;
	return s->min_clock < need ? need : -1;
}

static int64_t by_clock(const ps_server *s)
{
	return s->min_clock;
}

static int clock_waits_for(const ps_server *s, uint32_t r)
{
	return s->m[r].clock == s->min_clock;
}

// Where the worker's data position goes on: the steps it has pushed here
// (from a checkpoint after a resume).
static int64_t clock_start(const ps_server *s, uint32_t r)
{
	return s->m[r].clock;
}

void pti_policy_clocks(ps_server *s, ps_ctx **wake)
{
	int64_t min = INT64_MAX;
	for (uint32_t r = 0; r < s->cfg->workers; r++)
		if (!s->m[r].lost && s->m[r].clock < min)
			min = s->m[r].clock;
	if (min == INT64_MAX)
		return;
	s->min_clock = min;
	if (s->policy->key == by_clock)
		pti_server_wake(s, wake);
}

// ---------------------------------------------------------------- table

static const ps_policy policies[] = {
    [PT_MODE_SYNC] = {"sync", sync_take, sync_reply_after, by_version,
	sync_waits_for, sync_start, sync_settle, 1},
    [PT_MODE_ASYNC] = {"async", clock_take, async_reply_after, by_version,
	clock_waits_for, clock_start, pti_policy_clocks, 0},
    [PT_MODE_SSP] = {"ssp", clock_take, ssp_reply_after, by_clock,
	clock_waits_for, clock_start, pti_policy_clocks, 0},
};

const ps_policy *pti_policy_of(int mode)
{
	if (mode <= 0 || mode > PT_MODE_SSP)
		return NULL;
	return &policies[mode];
}
