// ps/ops.c - the server's request handlers: one per op in a static
// table (in the spirit of Redis's command table), the checks every
// request passes first (pti_server_handle: decoding, the connection's
// proof, the role and rank it proved), and parking a request whose reply
// must wait (reply.c wakes it). Everything here runs under the server
// lock.
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "common/clock.h"
#include "common/err.h"
#include "ps/policy.h"

static nng_msg *reply_ok(ps_server *s, uint32_t op)
{
	pti_hdr h;
	pti_hdr_init(&h, op, PT_ROLE_SERVER, s->rank);
	h.has |= PTI_H_VER;
	h.ver = s->version;
	return pti_server_reply(s, &h, NULL, 0);
}

// ---------------------------------------------------------------- state

// shard_range resolves the request's range to [*off, *off + *n) relative
// to the shard. Without a range it means the whole shard.
static int shard_range(ps_server *s, const pti_hdr *h, uint64_t *off,
    uint64_t *n)
{
	uint64_t flat, cnt;
	if (!(h->has & PTI_H_RANGE)) {
		*off = 0;
		*n = s->n;
		return 0;
	}
	cnt = h->n;
	flat = h->off;
	if (h->has & PTI_H_VAR && h->var >= 0) {
		if ((uint32_t)h->var >= s->layout.n_vars)
			return pti_err_set(PT_ERANGE,
			    "variable %d does not exist (the model has %u)",
			    h->var, s->layout.n_vars);
		const pti_var *v = &s->layout.vars[h->var];
		if (h->off > v->n || cnt > v->n - h->off)
			return pti_err_set(PT_ERANGE,
			    "range [%llu, +%llu) is outside variable %s of %llu "
			    "elements", (unsigned long long)h->off,
			    (unsigned long long)cnt, v->name,
			    (unsigned long long)v->n);
		flat = v->off + h->off;
	}
	if (cnt == 0 || flat < s->lo || flat > s->hi || cnt > s->hi - flat)
		return pti_err_set(PT_ERANGE,
		    "range [%llu, +%llu) is outside this server's shard "
		    "[%llu, %llu)", (unsigned long long)flat,
		    (unsigned long long)cnt, (unsigned long long)s->lo,
		    (unsigned long long)s->hi);
	*off = flat - s->lo;
	*n = cnt;
	return 0;
}
// ---------------------------------------------------------------- ops

typedef nng_msg *(*op_fn)(ps_server *, ps_ctx *, const pti_hdr *,
    const void *, ps_ctx **);

static nng_msg *op_hello(ps_server *s, ps_ctx *x, const pti_hdr *h,
    const void *pay, ps_ctx **wake)
{
	(void)pay;
	char why[160];
	ps_peer *p = pti_peer_find(s, x->r_pipe);
	nng_msg *no = pti_hello_prove(s, p, h);
	if (no != NULL)
		return no;
	pti_hdr r;
	pti_hdr_init(&r, h->op, PT_ROLE_SERVER, s->rank);
	pti_hello_proof(s, h, &r);
	if (h->role == PT_ROLE_CONTROL) {
		if ((no = pti_hello_bind(s, p, h, wake)) != NULL)
			return no;
		r.has |= PTI_H_VER;
		r.ver = s->version;
		return pti_server_reply(s, &r, NULL, 0);
	}
	if (!(h->has & PTI_H_LAYOUT) ||
	    h->layout_hash != pti_layout_hash(&s->layout) ||
	    h->n_params != s->layout.n_params) {
		snprintf(why, sizeof(why),
		    "worker %u runs another model: this server holds %s with "
		    "%llu parameters", h->rank, s->layout.spec,
		    (unsigned long long)s->layout.n_params);
		return pti_server_error(s, h, PT_EINVAL, why);
	}
	if ((h->has & PTI_H_STEP) && (h->step < 0 || h->step > s->step_max)) {
		snprintf(why, sizeof(why), "a hello's step must be from 0 to "
		    "%lld (--step-max)", (long long)s->step_max);
		return pti_server_error(s, h, PT_ERANGE, why);
	}
	if ((no = pti_hello_bind(s, p, h, wake)) != NULL)
		return no;
	if (!s->m[h->rank].hello) {
		s->m[h->rank].hello = 1;
		s->n_hello++;
	}
	s->m[h->rank].pipe = x->r_pipe;
	// A worker back after it had said done and gone may finish the job
	// again, unless every worker is done: the next one may be finishing
	// it already, and two must not.
	if (s->n_done + s->n_lost < s->job->workers)
		s->m[h->rank].gone = 0;
	int64_t *clock = &s->m[h->rank].clock;
	if (s->m[h->rank].lost) {
		// A restarted worker rejoins at the current version, and in
		// ssp no further behind than the slowest worker.
		s->m[h->rank].lost = 0;
		s->n_lost--;
		s->rejoins++;
		if (*clock < s->min_clock)
			*clock = s->min_clock;
		pti_log(PT_LOG_INFO, "server %u: worker %u rejoined at version "
		    "%lld", s->rank, h->rank, (long long)s->version);
	}
	// A worker that reconnects (this server was restarted from a
	// checkpoint) says how far it got: its clock goes on from there.
	if ((h->has & PTI_H_STEP) && h->step > *clock) {
		*clock = h->step;
		pti_server_clocks(s, wake);
	}
	s->policy->sealed(s, h->rank);
	r.has |= PTI_H_VER | PTI_H_LAYOUT | PTI_H_SHARD | PTI_H_STEP;
	r.ver = s->version;
	// Where the worker's data position goes on: the open step (sync), or
	// the steps it has pushed here (async, ssp; from a checkpoint after
	// a resume).
	r.step = s->policy->start(s, h->rank);
	r.layout_hash = pti_layout_hash(&s->layout);
	r.n_params = s->layout.n_params;
	r.lo = s->lo;
	r.hi = s->hi;
	r.mode = (uint32_t)s->job->mode;
	r.n_workers = s->job->workers;
	r.n_servers = s->job->servers;
	r.server_rank = s->rank;
	return pti_server_reply(s, &r, NULL, 0);
}

static nng_msg *op_pull(ps_server *s, ps_ctx *x, const pti_hdr *h,
    const void *pay, ps_ctx **wake)
{
	(void)pay, (void)wake;
	uint64_t off = 0, n = 0;
	char why[200];
	int rv = shard_range(s, h, &off, &n);
	if (rv != 0)
		return pti_server_error(s, h, rv, pt_errmsg(rv));
	if (s->policy->pull_waits && (h->has & PTI_H_VER) &&
	    h->ver > s->version) {
		// Only workers wait: one request each at a time, so that what
		// is parked stays below the contexts kept for them.
		if (h->ver > s->version + 1 || h->role != PT_ROLE_WORKER) {
			snprintf(why, sizeof(why),
			    "version %lld asked for, server is at %lld: "
			    "only the next one can be waited for",
			    (long long)h->ver, (long long)s->version);
			return pti_server_error(s, h, PT_ESTATE, why);
		}
		if (s->policy->ahead(s, off, n))
			return pti_server_values(s, h->op, off, n, h->ver, -1, 0,
			    x->r_shm);
		if (pti_park_full(s, x->r_pipe))
			return pti_server_error(s, h, PT_ESTATE,
			    "too many requests of this connection wait");
		pti_park(s, x, h->op, h->ver, off, n, -1, 0);
		return NULL;
	}
	return pti_server_values(s, h->op, off, n, s->version, -1, 0,
	    x->r_shm);
}

// push_take validates a gradient and hands it to the policy, which
// applies it (async, ssp) or files it for the open step (sync), then acts
// on what the policy did: t's lr and stale get what was applied, dropped
// is set when a policy dropped it (counted, not an error). Returns 0 or
// an error with a detail.
static int push_take(ps_server *s, const pti_hdr *h, const void *pay,
    uint64_t *off, uint64_t *n, ps_take *t, ps_ctx **wake)
{
	int rv;
	memset(t, 0, sizeof(*t));
	t->clock_to = -1;
	if (!(h->has & PTI_H_RANGE) || pay == NULL)
		return pti_err_set(PT_EPROTO, "a push needs off, n and values");
	if ((rv = shard_range(s, h, off, n)) != 0)
		return rv;
	// Steps and versions from the wire are bounded before any
	// arithmetic on them (step + 1, step - clock) can overflow.
	// The job's planned steps bound a worker's step (--step-max).
	if (((h->has & PTI_H_STEP) && (h->step < 0 || h->step > s->step_max)) ||
	    ((h->has & PTI_H_VER) && (h->ver < 0 || h->ver > PS_STEP_MAX)))
		return pti_err_set(PT_ERANGE, "worker %u pushed step %lld "
		    "version %lld: steps are from 0 to %lld (--step-max), "
		    "versions to %lld", h->rank, (long long)h->step,
		    (long long)h->ver, (long long)s->step_max,
		    (long long)PS_STEP_MAX);
	if ((rv = pti_push_check(s, h, pay, *off, *n)) != 0)
		return rv;
	if ((rv = s->policy->take(s, h, pay, *off, *n, t)) != 0)
		return rv;
	pti_server_act(s, h->rank, t, wake);
	return 0;
}

static nng_msg *op_push(ps_server *s, ps_ctx *x, const pti_hdr *h,
    const void *pay, ps_ctx **wake)
{
	uint64_t off = 0, n = 0;
	ps_take t;
	// A pushpull whose reply might have to wait is refused before its
	// gradient is taken when no more may wait.
	if (h->op == PT_OP_PUSHPULL && pti_park_full(s, x->r_pipe))
		return pti_server_error(s, h, PT_ESTATE,
		    "too many requests of this connection wait");
	int rv = push_take(s, h, pay, &off, &n, &t, wake);
	if (rv != 0)
		return pti_server_error(s, h, rv, pt_errmsg(rv));
	// Applied or copied: the request may carry a reply (h and pay are
	// not read from here on).
	pti_server_spare(s, s->cur);
	s->cur = NULL;
	int64_t after = h->op == PT_OP_PUSHPULL
			    ? s->policy->reply_after(s, h, &t) : -1;
	if (after >= 0) {
		pti_park(s, x, h->op, after, off, n, t.lr, t.stale);
		return NULL;
	}
	if (h->op == PT_OP_PUSH) {
		pti_hdr r;
		pti_hdr_init(&r, h->op, PT_ROLE_SERVER, s->rank);
		r.has |= PTI_H_VER | PTI_H_STALE | PTI_H_LR;
		r.ver = s->version;
		r.staleness = t.stale;
		r.lr = t.lr;
		return pti_server_reply(s, &r, NULL, 0);
	}
	return pti_server_values(s, h->op, off, n, s->version + t.ahead, t.lr,
	    t.stale, x->r_shm);
}

static nng_msg *op_done(ps_server *s, ps_ctx *x, const pti_hdr *h,
    const void *pay, ps_ctx **wake)
{
	(void)x, (void)pay, (void)wake;
	if (!s->m[h->rank].done) {
		s->m[h->rank].done = 1;
		s->n_done++;
	}
	return reply_ok(s, h->op);
}

static nng_msg *op_stats(ps_server *s, ps_ctx *x, const pti_hdr *h,
    const void *pay, ps_ctx **wake)
{
	(void)x, (void)pay, (void)wake;
	pti_hdr r;
	pti_hdr_init(&r, h->op, PT_ROLE_SERVER, s->rank);
	r.has |= PTI_H_VER | PTI_H_STATS;
	r.ver = s->version;
	r.updates = s->updates;
	r.rejected = s->rejected;
	r.dropped = s->dropped;
	r.stale_sum = s->stale_sum;
	r.stale_max = s->stale_max;
	r.n_hello = s->n_hello;
	r.n_done = s->n_done;
	r.n_lost = s->n_lost;
	r.first_live = s->job->workers;
	for (uint32_t w = s->job->workers; w-- > 0;)
		if (!s->m[w].lost && !s->m[w].gone)
			r.first_live = w;
	r.hist = s->hist;
	return pti_server_reply(s, &r, NULL, 0);
}

static nng_msg *op_shutdown(ps_server *s, ps_ctx *x, const pti_hdr *h,
    const void *pay, ps_ctx **wake)
{
	(void)pay, (void)wake;
	ps_peer *p = pti_peer_find(s, x->r_pipe);
	// A worker may end the job only as its finisher: once it and every
	// other worker has said done (or was lost).
	if (h->role == PT_ROLE_WORKER &&
	    (!s->m[h->rank].done || s->n_done + s->n_lost < s->job->workers))
		return pti_peer_refuse(s, h, p, PT_EAUTH, "a worker may stop the servers "
		    "only once every worker is done");
	pti_log(PT_LOG_INFO, "server %u: shutdown asked by %s %u (%s)",
	    s->rank, pti_role_name(h->role), h->rank,
	    p ? p->name : "an unknown peer");
	x->stop_after = 1;
	// From now on a worker that leaves is not one whose place the next
	// worker must take: the finishing worker may exit as soon as it has
	// this reply, before this server has stopped.
	s->shutting = 1;
	return reply_ok(s, h->op);
}

enum { OP_WORKER = 1 }; // only a worker that said hello may send it

static const struct {
	op_fn fn;
	uint32_t flags;
} op_table[PT_OP_MAX] = {
	[PT_OP_HELLO] = {op_hello, 0},
	[PT_OP_PUSH] = {op_push, OP_WORKER},
	[PT_OP_PULL] = {op_pull, 0},
	[PT_OP_PUSHPULL] = {op_push, OP_WORKER},
	[PT_OP_DONE] = {op_done, OP_WORKER},
	[PT_OP_STATS] = {op_stats, 0},
	[PT_OP_SHUTDOWN] = {op_shutdown, 0},
	[PT_OP_CHALLENGE] = {pti_op_challenge, 0},
	[PT_OP_ROWS] = {pti_op_rows, OP_WORKER},
};

// shm_payload: a request whose values are in shared memory (PTI_H_SHM)
// has them where its worker wrote them, in the segment it handed over:
// *pay then points there, for a push's range within the shard. Another
// op's values (a pull's) only come back that way. PT_ESTATE without a
// segment (the worker's handshake did not happen), PT_ERANGE for a range
// outside the shard, with why.
static int shm_payload(ps_server *s, const pti_hdr *h, const void **pay,
    char *why, size_t n_why)
{
	const pti_shm_seg *g = s->shm_of != NULL && h->rank < s->job->workers
				   ? &s->shm_of[h->rank] : NULL;
	if (g == NULL || g->p == NULL) {
		snprintf(why, n_why, "values in shared memory, but worker %u "
		    "handed over none (--transport shm needs the handshake "
		    "after hello)", h->rank);
		return PT_ESTATE;
	}
	if (h->op != PT_OP_PUSH && h->op != PT_OP_PUSHPULL)
		return 0;
	if (!(h->has & PTI_H_RANGE) || h->off < s->lo || h->off > s->hi ||
	    h->n > s->hi - h->off ||
	    g->skip + (h->off - s->lo + h->n) * sizeof(float) > g->bytes) {
		snprintf(why, n_why, "values in shared memory for [%llu, "
		    "+%llu), outside this shard [%llu, %llu)",
		    (unsigned long long)h->off, (unsigned long long)h->n,
		    (unsigned long long)s->lo, (unsigned long long)s->hi);
		return PT_ERANGE;
	}
	*pay = g->p + (h->off - s->lo);
	return 0;
}

// handle runs one request under the lock. NULL means parked.
static nng_msg *handle(ps_server *s, ps_ctx *x, nng_msg *m, ps_ctx **wake)
{
	pti_hdr h;
	const void *pay;
	char why[160];
	x->r_pipe = (uint32_t)nng_pipe_id(nng_msg_get_pipe(m));
	int rv = pti_msg_decode(&h, &pay, m);
	// A proven worker's connection is known from its rank (the hello
	// bound them): the requests of a training step need no search
	// through the connections. Anything else is looked up.
	int proven = rv == 0 && h.role == PT_ROLE_WORKER &&
		     h.rank < s->job->workers && x->r_pipe != 0 &&
		     s->m[h.rank].pipe == x->r_pipe;
	ps_peer *p = proven ? NULL : pti_peer_find(s, x->r_pipe);
	if (p != NULL)
		p->requests++;
	if (rv != 0)
		return pti_server_error(s, &h, rv, pt_errmsg(rv));
	if (h.op >= PT_OP_MAX || op_table[h.op].fn == NULL) {
		snprintf(why, sizeof(why), "unknown op %u", h.op);
		return pti_server_error(s, &h, PT_EPROTO, why);
	}
	if (h.op == PT_OP_CHALLENGE)
		return pti_op_challenge(s, x, &h, pay, wake);
	int worker_op = h.op == PT_OP_HELLO ? h.role != PT_ROLE_CONTROL
					    : (op_table[h.op].flags & OP_WORKER);
	if (worker_op && (h.role != PT_ROLE_WORKER ||
			     h.rank >= s->job->workers)) {
		snprintf(why, sizeof(why),
		    "only workers 0..%u may send it (got role %u rank %u)",
		    s->job->workers - 1, h.role, h.rank);
		return pti_server_error(s, &h, PT_EPROTO, why);
	}
	if (h.op == PT_OP_HELLO)
		return op_hello(s, x, &h, pay, wake);
	// Everything else only on a connection that proved the secret, and
	// only as what it proved.
	if (!proven && (p == NULL || !p->authed))
		return pti_peer_refuse(s, &h, p, PT_ESTATE, "this connection "
		    "has not proven the job secret (say hello first)");
	if (!proven && (h.role != p->role || h.rank != p->rank)) {
		snprintf(why, sizeof(why), "this connection proved %s %u, "
		    "not %s %u", pti_role_name(p->role), p->rank,
		    pti_role_name(h.role), h.rank);
		return pti_peer_refuse(s, &h, p, PT_EAUTH, why);
	}
	if (worker_op && s->m[h.rank].lost) {
		snprintf(why, sizeof(why),
		    "worker %u was given up for dead; say hello again", h.rank);
		return pti_server_error(s, &h, PT_ESTATE, why);
	}
	if (h.role == PT_ROLE_WORKER)
		s->m[h.rank].seen = pti_clock_s();
	x->r_shm = (h.has & PTI_H_SHM) != 0;
	if (x->r_shm && (rv = shm_payload(s, &h, &pay, why, sizeof(why))))
		return pti_server_error(s, &h, rv, why);
	return op_table[h.op].fn(s, x, &h, pay, wake);
}

nng_msg *pti_server_handle(ps_server *s, ps_ctx *x, nng_msg *m, ps_ctx **wake)
{
	s->cur = m; // a handler may keep it (sync_take) or spare it (op_push)
	nng_msg *reply = handle(s, x, m, wake);
	pti_server_ckpt_pending(s); // a table's step may have closed
	nng_msg_free(s->cur);
	s->cur = NULL;
	pti_shard_publish(s); // the values it changed are whole
	return reply;
}
