// ps/clock.c - the async and ssp policies: each gradient is applied as
// it arrives (unless staler than --max-staleness) and moves its worker's
// clock; ssp holds a pushpull's reply until the slowest worker is within
// --staleness steps. Their state (ps_clocked) is their own; what they did
// goes back to the server in a ps_take.
#include <stdint.h>
#include <string.h>

#include "common/err.h"
#include "ps/pieces.h"
#include "ps/policy.h"

typedef struct ps_clocked {
	ps_got got;          // the pieces of each worker's gradient received
	float acc[PS_CHUNK]; // a chunk of values that were not aligned
} ps_clocked;

static ps_clocked *state(const ps_server *s)
{
	return s->pol;
}

static int clock_init(ps_server *s)
{
	return pti_got_init(&state(s)->got, s);
}

static void clock_fini(ps_server *s)
{
	pti_got_fini(&state(s)->got);
}

// clock_sealed closes worker r's last step to further pieces: after a
// hello and at start.
static void clock_sealed(ps_server *s, uint32_t r)
{
	state(s)->got.step[r] = s->m[r].clock - 1;
	state(s)->got.n[r] = s->n;
}

// clock_take applies a gradient at once, unless it is staler than
// --max-staleness, and moves the worker's clock (t->clock_to).
static int clock_take(ps_server *s, const pti_hdr *h, const void *pay,
    uint64_t off, uint64_t n, ps_take *t)
{
	const pti_jobopt *c = s->job;
	ps_clocked *k = state(s);
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
	    pti_got_take(&k->got, s, h->rank, h->step, off, n) < 0)
		return pti_err_set(PT_ESTATE,
		    "worker %u pushed step %lld, its next step is %lld",
		    h->rank, (long long)h->step,
		    (long long)s->m[h->rank].clock);
	if (h->step - s->min_clock > s->max_lead)
		s->max_lead = h->step - s->min_clock;
	t->stale = s->version - h->ver;
	if (c->max_staleness >= 0 && t->stale > c->max_staleness) {
		t->dropped = 1;
	} else {
		t->lr = pti_lr(&s->lr, h->step, t->stale);
		// A chunk at a time: values that are not aligned are copied
		// first; a pushpull's request gets each chunk's new values
		// over its gradient once applied, and carries its own reply
		// with no further pass (op_push).
		const float *ga = pti_aligned(pay);
		float *fill = ga != NULL && h->op == PT_OP_PUSHPULL &&
				      pti_msg_roomy(s->cur, n)
				  ? (float *)ga // the server owns the request
				  : NULL;
		uint64_t read = off; // its pages let go up to here
		for (uint64_t i = 0; i < n; i += PS_CHUNK) {
			size_t len = n - i < PS_CHUNK ? n - i : PS_CHUNK;
			const float *g = ga != NULL
					     ? ga + i
					     : memcpy(k->acc,
						   (const char *)pay + i * 4,
						   len * sizeof(float));
			if (pti_shm_unchanged(s, NULL, h->rank, off + i, g, len))
				pti_shard_apply(s, off + i, g, len, 1, t->lr);
			if (fill != NULL)
				memcpy(fill + i, s->params + off + i,
				    len * sizeof(float));
			pti_shard_let_go(s, NULL, h->rank, &read, off + i + len,
			    off + n);
		}
		t->applied = 1;
		if (fill != NULL)
			pti_fill_set(t, s->cur, fill, off, n, s->version + 1);
	}
	// The clock moves even for a dropped gradient: the step is done,
	// only its update was refused.
	t->clock_to = h->step + 1; // the same for a later piece
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
	int64_t need = h->step + 1 - (int64_t)s->job->staleness;
	return s->min_clock < need ? need : -1;
}

static int64_t by_version(const ps_server *s)
{
	return s->version;
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

// A lost worker's clock no longer counts.
static void clock_settle(ps_server *s, ps_take *t)
{
	(void)s;
	t->clocks = 1;
}

static int clock_ahead(const ps_server *s, uint64_t off, uint64_t n)
{
	(void)s, (void)off, (void)n;
	return 0;
}

// In async nothing waits for the clocks; in ssp replies do.
static int async_clocks(ps_server *s)
{
	(void)pti_min_clock(s);
	return 0;
}

static int ssp_clocks(ps_server *s)
{
	return pti_min_clock(s);
}

#define CLOCKED(nm, reply, k, clk)                                             \
	{                                                                      \
		.name = nm, .size = sizeof(ps_clocked), .init = clock_init,    \
		.fini = clock_fini, .take = clock_take, .reply_after = reply,  \
		.key = k, .waits_for = clock_waits_for, .start = clock_start,  \
		.settle = clock_settle, .sealed = clock_sealed,                \
		.ahead = clock_ahead, .clocks = clk, .pull_waits = 0,          \
	}

const ps_policy pti_policy_async =
    CLOCKED("async", async_reply_after, by_version, async_clocks);
const ps_policy pti_policy_ssp =
    CLOCKED("ssp", ssp_reply_after, by_clock, ssp_clocks);
