// ps/server.c - the parameter server: shard state, connections and who
// they proved to be, a static table of request handlers, and the serving
// loop over nng REP contexts. The consistency rules (what a gradient does,
// when a reply may go) are ps/policy.c's, one ops table per mode.
//
// Each of a fixed number of nng contexts receives one request at a time.
// Its callback decodes the request and runs the op's handler under the
// server lock. A handler either builds the reply at once, or parks the
// context on the wait list (a sync pull for the next version): no thread
// per worker, no polling. When a sync step closes, the replies of every
// parked context are built under the lock and sent after unlocking.
#include "server.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <nng/nng.h>
#include <nng/protocol/reqrep0/rep.h>

#include "clock.h"
#include "job.h"
#include "err.h"
#include "layout.h"
#include "checkpoint.h"
#include "optim.h"
#include "proto.h"
#include "server_impl.h"
#include "transport.h"

#define SERVER_LOG_ERRORS 20 // rejected requests logged in full, at most
// Connections that have not proven the job secret: at most this many
// more than the job's workers at once (a new one beyond it closes the
// oldest: all of a job's workers may be connecting at the same moment),
// each for at most --auth-timeout seconds. A worker proves the secret
// within a round trip of connecting; what stays longer is a stranger, or
// a message that is never finished.
#define PS_UNAUTH_MAX 64

volatile sig_atomic_t pti_server_signal;

// pt_server: a served ps_server (pstrain.h), with its own copy of the
// job's options.
struct pt_server {
	ps_server s;
	pt_config cfg;
	nng_listener l;
	int open;      // the socket is open
	char url[PT_PATH_MAX];
};

// ---------------------------------------------------------------- replies

nng_msg *pti_server_reply(ps_server *s, pti_hdr *h, const float *pay,
    uint64_t n)
{
	nng_msg *m = NULL;
	h->has |= PTI_H_STATUS;
	if (pti_msg_encode(&m, h, pay, n) != 0)
		return NULL; // out of memory: the peer times out
	(void)s;
	return m;
}

nng_msg *pti_server_error(ps_server *s, const pti_hdr *req, int code,
    const char *what)
{
	pti_hdr h;
	pti_hdr_init(&h, req->op, PT_ROLE_SERVER, s->cfg->rank);
	h.status = (uint32_t)code;
	snprintf(h.msg, sizeof(h.msg), "server %u: %s: %s", s->cfg->rank,
	    pti_op_name(req->op), what);
	s->rejected++;
	if (s->rejected <= SERVER_LOG_ERRORS)
		fprintf(stderr, "%s (from %s %u)\n", h.msg,
		    req->role == PT_ROLE_WORKER ? "worker" : "peer",
		    req->rank);
	return pti_server_reply(s, &h, NULL, 0);
}

// reply_values answers with the shard's values in [off, off + n); lr >= 0
// also reports the learning rate and staleness of the push it follows.
static nng_msg *reply_values(ps_server *s, uint32_t op, uint64_t off,
    uint64_t n, double lr, int64_t stale)
{
	pti_hdr h;
	pti_hdr_init(&h, op, PT_ROLE_SERVER, s->cfg->rank);
	h.has |= PTI_H_VER | PTI_H_RANGE;
	h.ver = s->version;
	h.off = s->lo + off;
	if (lr >= 0) {
		h.has |= PTI_H_LR | PTI_H_STALE;
		h.lr = lr;
		h.staleness = stale;
	}
	return pti_server_reply(s, &h, s->params + off, n);
}

// server_lr is the learning rate for a gradient of global step `step`:
// --lr, times B/256 with --lr-scaling linear, ramped linearly from 0 over
// the warm-up steps.
double pti_server_lr(const ps_server *s, int64_t step)
{
	return pti_lr_at(s->lr_base, s->warmup, step);
}

static nng_msg *reply_ok(ps_server *s, uint32_t op)
{
	pti_hdr h;
	pti_hdr_init(&h, op, PT_ROLE_SERVER, s->cfg->rank);
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
		const pt_var *v = &s->layout.vars[h->var];
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

static pti_ckpt_meta server_ckpt_meta(const ps_server *s)
{
	pti_ckpt_meta m = {s->cfg->rank, s->cfg->servers,
	    pt_layout_hash(&s->layout), s->lo, s->hi, s->version, s->updates,
	    (uint32_t)s->opt.kind, (uint32_t)s->opt.n_state, s->cfg->workers};
	return m;
}

// server_checkpoint writes the shard when one is due, after an update.
// It runs under the lock, so that values, state and version agree. A
// failed write is logged, counted and its error kept for server-R.json,
// from which the launcher tells the user at the end; training goes on.
static void server_checkpoint(ps_server *s)
{
	if (!pti_ckpt_due(&s->ckpt, s->version, pti_clock_s()))
		return;
	pti_ckpt_meta m = server_ckpt_meta(s);
	const float *vecs[3] = {s->params, s->state1, s->state2};
	for (uint32_t r = 0; r < s->cfg->workers; r++)
		s->clocks[r] = s->m[r].clock;
	int rv = pti_ckpt_save(s->cfg->checkpoint_dir, &m, s->clocks, vecs);
	if (rv != 0) {
		s->ckpt_failures++;
		snprintf(s->ckpt_error, sizeof(s->ckpt_error), "%s",
		    pt_errmsg(rv));
		fprintf(stderr, "server %u: checkpoint failed: %s\n",
		    s->cfg->rank, s->ckpt_error);
	}
}

static void stale_record(ps_server *s, int64_t st)
{
	uint64_t u = st > 0 ? (uint64_t)st : 0;
	s->stale_sum += u;
	if (u > s->stale_max)
		s->stale_max = u;
	s->hist[u < PT_STALE_BUCKETS - 1 ? u : PT_STALE_BUCKETS - 1]++;
}

void pti_server_applied(ps_server *s, int64_t stale)
{
	stale_record(s, stale);
	s->version++;
	s->updates++;
	server_checkpoint(s);
}

void pti_server_wake(ps_server *s, ps_ctx **wake)
{
	int64_t key = s->policy->key(s);
	ps_ctx **pp = &s->waiting;
	while (*pp != NULL) {
		ps_ctx *x = *pp;
		if (x->wait_ver > key) {
			pp = &x->next;
			continue;
		}
		*pp = x->next;
		nng_aio_set_msg(x->aio, reply_values(s, x->r_op, x->r_off,
					    x->r_n, x->r_lr, x->r_stale));
		x->next = *wake;
		*wake = x;
	}
}

// worker_lost: worker r died or went silent. The job goes on without it:
// sync steps close with the others, ssp stops waiting for its clock.
static void worker_lost(ps_server *s, uint32_t r, const char *why,
    ps_ctx **wake)
{
	if (!s->m[r].hello || s->m[r].lost || s->m[r].done)
		return;
	s->m[r].lost = 1;
	s->n_lost++;
	fprintf(stderr, "server %u: worker %u %s at version %lld; going on "
	    "with %u workers\n", s->cfg->rank, r, why, (long long)s->version,
	    s->cfg->workers - s->n_lost);
	s->policy->settle(s, wake);
}

static void park(ps_server *s, ps_ctx *x, uint32_t op, int64_t ver,
    uint64_t off, uint64_t n, double lr, int64_t stale)
{
	x->state = CTX_WAIT;
	x->r_op = op;
	x->r_lr = lr;
	x->r_stale = stale;
	x->wait_ver = ver;
	x->r_off = off;
	x->r_n = n;
	x->next = s->waiting;
	s->waiting = x;
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
	if (h->role == PT_ROLE_CONTROL)
		return (no = pti_hello_bind(s, p, h, wake)) ? no
							: reply_ok(s, h->op);
	if (!(h->has & PTI_H_LAYOUT) ||
	    h->layout_hash != pt_layout_hash(&s->layout) ||
	    h->n_params != s->layout.n_params) {
		snprintf(why, sizeof(why),
		    "worker %u runs another model: this server holds %s with "
		    "%llu parameters", h->rank, s->layout.spec,
		    (unsigned long long)s->layout.n_params);
		return pti_server_error(s, h, PT_EINVAL, why);
	}
	if ((h->has & PTI_H_STEP) && (h->step < 0 || h->step > PS_STEP_MAX))
		return pti_server_error(s, h, PT_ERANGE, "a hello's step must be "
		    "from 0 to 2^50");
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
	if (s->n_done + s->n_lost < s->cfg->workers)
		s->m[h->rank].gone = 0;
	int64_t *clock = &s->m[h->rank].clock;
	if (s->m[h->rank].lost) {
		// A restarted worker rejoins at the current version, and in
		// ssp no further behind than the slowest worker.
		s->m[h->rank].lost = 0;
		s->n_lost--;
		if (*clock < s->min_clock)
			*clock = s->min_clock;
		fprintf(stderr, "server %u: worker %u rejoined at version "
		    "%lld\n", s->cfg->rank, h->rank, (long long)s->version);
	}
	// A worker that reconnects (this server was restarted from a
	// checkpoint) says how far it got: its clock goes on from there.
	if ((h->has & PTI_H_STEP) && h->step > *clock) {
		*clock = h->step;
		pti_policy_clocks(s, wake);
	}
	pti_policy_sealed(s, h->rank);
	pti_hdr r;
	pti_hdr_init(&r, h->op, PT_ROLE_SERVER, s->cfg->rank);
	r.has |= PTI_H_VER | PTI_H_LAYOUT | PTI_H_SHARD | PTI_H_STEP;
	r.ver = s->version;
	// Where the worker's data position goes on: the open step (sync), or
	// the steps it has pushed here (async, ssp; from a checkpoint after
	// a resume).
	r.step = s->policy->start(s, h->rank);
	r.layout_hash = pt_layout_hash(&s->layout);
	r.n_params = s->layout.n_params;
	r.lo = s->lo;
	r.hi = s->hi;
	r.mode = (uint32_t)s->cfg->mode;
	r.n_workers = s->cfg->workers;
	r.n_servers = s->cfg->servers;
	r.server_rank = s->cfg->rank;
	return pti_server_reply(s, &r, NULL, 0);
}

static nng_msg *op_pull(ps_server *s, ps_ctx *x, const pti_hdr *h,
    const void *pay, ps_ctx **wake)
{
	(void)pay, (void)wake;
	uint64_t off, n;
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
		park(s, x, h->op, h->ver, off, n, -1, 0);
		return NULL;
	}
	return reply_values(s, h->op, off, n, -1, 0);
}

// push_take validates a gradient and applies it (async, ssp) or files it
// for the open step (sync). *lr and *stale get what was applied; *dropped
// is set when a policy dropped it (counted, not an error). Returns 0 or an
// error with a detail.
// push_finite refuses a gradient with a NaN or infinite value: one would
// make every parameter it touches non-finite for good. The refusals are
// counted, and logged (the first ten, then every thousandth).
static int push_finite(ps_server *s, const pti_hdr *h, const void *pay,
    uint64_t n)
{
	const unsigned char *b = pay;
	for (uint64_t i = 0; i < n; i++) {
		float v;
		memcpy(&v, b + i * sizeof(float), sizeof(float)); // unaligned
		if (isfinite(v))
			continue;
		s->nonfinite++;
		if (s->nonfinite <= 10 || s->nonfinite % 1000 == 0)
			fprintf(stderr, "server %u: refused a push of worker %u "
			    "with a non-finite value (%g at offset %llu); %llu "
			    "so far\n", s->cfg->rank, h->rank, (double)v,
			    (unsigned long long)(h->off + i),
			    (unsigned long long)s->nonfinite);
		return pti_err_set(PT_EINVAL, "worker %u pushed a non-finite "
		    "gradient value at offset %llu", h->rank,
		    (unsigned long long)(h->off + i));
	}
	return 0;
}

static int push_take(ps_server *s, const pti_hdr *h, const void *pay,
    uint64_t *off, uint64_t *n, ps_take *t, ps_ctx **wake)
{
	int rv;
	memset(t, 0, sizeof(*t));
	if (!(h->has & PTI_H_RANGE) || pay == NULL)
		return pti_err_set(PT_EPROTO, "a push needs off, n and values");
	if ((rv = shard_range(s, h, off, n)) != 0)
		return rv;
	// Steps and versions from the wire are bounded before any
	// arithmetic on them (step + 1, step - clock) can overflow.
	if (((h->has & PTI_H_STEP) && (h->step < 0 || h->step > PS_STEP_MAX)) ||
	    ((h->has & PTI_H_VER) && (h->ver < 0 || h->ver > PS_STEP_MAX)))
		return pti_err_set(PT_ERANGE, "worker %u pushed step %lld "
		    "version %lld: outside [0, %lld]", h->rank,
		    (long long)h->step, (long long)h->ver,
		    (long long)PS_STEP_MAX);
	if ((rv = push_finite(s, h, pay, *n)) != 0)
		return rv;
	return s->policy->take(s, h, pay, *off, *n, t, wake);
}

static nng_msg *op_push(ps_server *s, ps_ctx *x, const pti_hdr *h,
    const void *pay, ps_ctx **wake)
{
	uint64_t off, n;
	ps_take t;
	int rv = push_take(s, h, pay, &off, &n, &t, wake);
	if (rv != 0)
		return pti_server_error(s, h, rv, pt_errmsg(rv));
	int64_t after = h->op == PT_OP_PUSHPULL
			    ? s->policy->reply_after(s, h, &t) : -1;
	if (after >= 0) {
		park(s, x, h->op, after, off, n, t.lr, t.stale);
		return NULL;
	}
	if (h->op == PT_OP_PUSH) {
		pti_hdr r;
		pti_hdr_init(&r, h->op, PT_ROLE_SERVER, s->cfg->rank);
		r.has |= PTI_H_VER | PTI_H_STALE | PTI_H_LR;
		r.ver = s->version;
		r.staleness = t.stale;
		r.lr = t.lr;
		return pti_server_reply(s, &r, NULL, 0);
	}
	return reply_values(s, h->op, off, n, t.lr, t.stale);
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
	pti_hdr_init(&r, h->op, PT_ROLE_SERVER, s->cfg->rank);
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
	r.first_live = s->cfg->workers;
	for (uint32_t w = s->cfg->workers; w-- > 0;)
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
	    (!s->m[h->rank].done || s->n_done + s->n_lost < s->cfg->workers))
		return pti_peer_refuse(s, h, p, PT_EAUTH, "a worker may stop the servers "
		    "only once every worker is done");
	fprintf(stderr, "server %u: shutdown asked by %s %u (%s)\n",
	    s->cfg->rank, pti_role_name(h->role), h->rank,
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
};

// handle runs one request under the lock. NULL means parked.
nng_msg *pti_server_handle(ps_server *s, ps_ctx *x, nng_msg *m, ps_ctx **wake)
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
		     h.rank < s->cfg->workers && x->r_pipe != 0 &&
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
			     h.rank >= s->cfg->workers)) {
		snprintf(why, sizeof(why),
		    "only workers 0..%u may send it (got role %u rank %u)",
		    s->cfg->workers - 1, h.role, h.rank);
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
	return op_table[h.op].fn(s, x, &h, pay, wake);
}

// ---------------------------------------------------------------- serving

static void ctx_send(ps_ctx *x, nng_msg *m)
{
	x->state = CTX_SEND;
	nng_aio_set_msg(x->aio, m);
	nng_ctx_send(x->ctx, x->aio);
}

static void ctx_recv(ps_ctx *x)
{
	x->state = CTX_RECV;
	nng_ctx_recv(x->ctx, x->aio);
}

static void server_stop(ps_server *s)
{
	pthread_mutex_lock(&s->mu);
	s->stop = 1;
	pthread_cond_signal(&s->cv);
	pthread_mutex_unlock(&s->mu);
}

static void send_woken(ps_ctx *wake);

// pipe_cb: a connection closed. If it was a worker's, that worker is lost;
// if that worker had said done, it can no longer finish the job, which
// falls to the next (the workers watch first_live in stats).
static void pipe_cb(nng_pipe p, nng_pipe_ev ev, void *arg)
{
	ps_server *s = arg;
	ps_ctx *wake = NULL;
	uint32_t id = (uint32_t)nng_pipe_id(p), evict = 0;
	char name[sizeof(((ps_peer *)0)->name)];
	if (ev == NNG_PIPE_EV_ADD_PRE) {
		pti_peer_name(p, name, sizeof(name));
		pthread_mutex_lock(&s->mu);
		ps_peer *q = pti_peer_add(s, id, &evict);
		if (q != NULL)
			snprintf(q->name, sizeof(q->name), "%s", name);
		pthread_mutex_unlock(&s->mu);
		if (q == NULL)
			nng_pipe_close(p); // before it is added: never seen
		if (evict != 0)
			pti_peer_close(evict);
		return;
	}
	pthread_mutex_lock(&s->mu);
	pti_server_pipe_removed(s, id, &wake);
	pthread_mutex_unlock(&s->mu);
	send_woken(wake);
}

// pipe_removed: connection id closed. Called with the lock.
void pti_server_pipe_removed(ps_server *s, uint32_t id, ps_ctx **wake)
{
	pti_peer_removed(s, id, wake);
	for (uint32_t r = 0; r < s->cfg->workers; r++) {
		if (s->m[r].pipe != id)
			continue;
		if (!s->m[r].done)
			worker_lost(s, r, "disconnected", wake);
		else if (!s->m[r].gone && !s->stop && !s->shutting) {
			s->m[r].gone = 1;
			fprintf(stderr, "server %u: worker %u disconnected "
			    "after it was done\n", s->cfg->rank, r);
		}
	}
}

// check_timeouts: a worker silent past --worker-timeout while the open
// sync step (or the ssp clock) waits for it is lost. Called with the lock.
static void check_timeouts(ps_server *s, ps_ctx **wake)
{
	const pt_config *c = s->cfg;
	double now = pti_clock_s();
	for (uint32_t r = 0; r < c->workers; r++) {
		int waited_for = s->policy->waits_for(s, r);
		if (c->worker_timeout > 0 && s->m[r].hello && waited_for &&
		    now - s->m[r].seen > c->worker_timeout)
			worker_lost(s, r, "went silent", wake);
	}
}

// stop_delay sleeps between the shutdown reply and the stop when the
// test hook PSTRAIN_TEST_STOP_DELAY_MS asks for it: the finishing worker
// has its reply and exits while this server still serves the others.
static void stop_delay(void)
{
	const char *e = getenv("PSTRAIN_TEST_STOP_DELAY_MS");
	unsigned ms;
	if (e != NULL && sscanf(e, "%u", &ms) == 1)
		usleep((useconds_t)ms * 1000);
}

static void ctx_cb(void *arg)
{
	ps_ctx *x = arg;
	ps_server *s = x->s;
	int rv = nng_aio_result(x->aio);

	if (x->state == CTX_SEND) {
		if (rv != 0)
			nng_msg_free(nng_aio_get_msg(x->aio));
		if (x->stop_after) {
			stop_delay();
			server_stop(s);
			return;
		}
		if (rv == NNG_ECLOSED)
			return;
		ctx_recv(x);
		return;
	}
	if (rv != 0) {
		if (rv != NNG_ECLOSED && rv != NNG_ECANCELED)
			ctx_recv(x);
		return;
	}
	nng_msg *m = nng_aio_get_msg(x->aio);
	nng_aio_set_msg(x->aio, NULL); // parked contexts must hold nothing
	ps_ctx *wake = NULL;
	pthread_mutex_lock(&s->mu);
	nng_msg *reply = pti_server_handle(s, x, m, &wake);
	// Read under the lock: once unlocked, a parked x may be woken, sent
	// and re-armed by another thread at any moment.
	int parked = reply == NULL && x->state == CTX_WAIT;
	pthread_mutex_unlock(&s->mu);
	nng_msg_free(m);
	if (reply != NULL)
		ctx_send(x, reply);
	else if (!parked)
		ctx_recv(x); // no memory for a reply: drop it
	send_woken(wake);
}

// send_woken sends the replies of woken requests; only after unlocking.
static void send_woken(ps_ctx *wake)
{
	while (wake != NULL) {
		ps_ctx *w = wake;
		wake = w->next;
		nng_msg *wm = nng_aio_get_msg(w->aio);
		if (wm == NULL) {
			ctx_recv(w);
			continue;
		}
		w->state = CTX_SEND;
		nng_ctx_send(w->ctx, w->aio);
	}
}

static void server_write_stats(const ps_server *s)
{
	const pt_config *c = s->cfg;
	char path[PT_PATH_MAX + 32];
	snprintf(path, sizeof(path), "%s/server-%u.json", c->out, c->rank);
	FILE *f = fopen(path, "w");
	if (f == NULL) {
		fprintf(stderr, "server %u: cannot write %s: %s\n", c->rank,
		    path, strerror(errno));
		return;
	}
	fprintf(f,
	    "{\n  \"rank\": %u,\n  \"mode\": \"%s\",\n  \"lo\": %llu,\n"
	    "  \"hi\": %llu,\n  \"version\": %lld,\n  \"updates\": %llu,\n"
	    "  \"rejected_requests\": %llu,\n  \"unauthenticated_requests\": "
	    "%llu,\n  \"auth_failures\": %llu,\n  \"connections_closed\": "
	    "%llu,\n  \"nonfinite_gradients\": %llu,\n"
	    "  \"dropped_gradients\": %llu,\n"
	    "  \"staleness_sum\": %llu,\n  \"staleness_max\": %llu,\n"
	    "  \"max_lead\": %lld,\n  \"staleness_hist\": [",
	    c->rank, pt_mode_name(c->mode), (unsigned long long)s->lo,
	    (unsigned long long)s->hi, (long long)s->version,
	    (unsigned long long)s->updates, (unsigned long long)s->rejected,
	    (unsigned long long)s->unauth, (unsigned long long)s->auth_failed,
	    (unsigned long long)s->conn_closed,
	    (unsigned long long)s->nonfinite, (unsigned long long)s->dropped, (unsigned long long)s->stale_sum,
	    (unsigned long long)s->stale_max, (long long)s->max_lead);
	for (int i = 0; i < PT_STALE_BUCKETS; i++)
		fprintf(f, "%s%llu", i ? ", " : "",
		    (unsigned long long)s->hist[i]);
	fprintf(f, "],\n  \"checkpoint_failures\": %llu,\n"
	    "  \"checkpoint_last_error\": ",
	    (unsigned long long)s->ckpt_failures);
	if (s->ckpt_error[0] != '\0')
		pti_json_string(f, s->ckpt_error);
	else
		fprintf(f, "null");
	fprintf(f, "\n}\n");
	fclose(f);
}

// server_ready works out the address workers dial (the port chosen for
// ":0"), says it, and writes it to --ready-file when one is set.
static int server_ready(pt_server *ps)
{
	const pt_config *c = &ps->cfg;
	ps_server *s = &ps->s;
	char tmp[PT_PATH_MAX + 8];
	nng_sockaddr sa;
	snprintf(ps->url, sizeof(ps->url), "%s", c->listen);
	const char *tls = pti_transport_is_tls(c->listen) ? "tls+" : "";
	if (strncmp(c->listen + strlen(tls), "tcp://", 6) == 0 &&
	    nng_listener_get_addr(ps->l, NNG_OPT_LOCADDR, &sa) == 0 &&
	    sa.s_family == NNG_AF_INET) {
		char ip[INET_ADDRSTRLEN];
		inet_ntop(AF_INET, &sa.s_in.sa_addr, ip, sizeof(ip));
		snprintf(ps->url, sizeof(ps->url), "%stcp://%s:%u", tls, ip,
		    ntohs(sa.s_in.sa_port));
	}
	fprintf(stderr, "server %u: listening on %s, shard [%llu, %llu) of "
	    "%llu parameters, %s, %u workers\n", c->rank, ps->url,
	    (unsigned long long)s->lo, (unsigned long long)s->hi,
	    (unsigned long long)s->layout.n_params, pt_mode_name(c->mode),
	    c->workers);
	if (c->ready_file[0] == '\0')
		return 0;
	snprintf(tmp, sizeof(tmp), "%s.tmp", c->ready_file);
	FILE *f = fopen(tmp, "w");
	if (f == NULL || fprintf(f, "%s\n", ps->url) < 0 || fclose(f) != 0 ||
	    rename(tmp, c->ready_file) != 0)
		return pti_err_set(PT_EIO, "--ready-file %s: %s",
		    c->ready_file, strerror(errno));
	return 0;
}

// close_watch: nng 1.5's close can wait forever when requests race it
// (nanomsg/nng#1813, seen here when many workers poll as the job ends).
// Everything is written by then, so a close that has not returned in
// CLOSE_WAIT_S seconds ends the process with the status it would have had.
#define CLOSE_WAIT_S 3
typedef struct close_watch {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int done, rv;
	uint32_t rank;
} close_watch;

static void *close_watch_run(void *arg)
{
	close_watch *w = arg;
	pthread_mutex_lock(&w->mu);
	double until = pti_clock_s() + CLOSE_WAIT_S;
	while (!w->done && pti_clock_s() < until)
		pti_cond_wait_ms(&w->cv, &w->mu, 100);
	if (!w->done) {
		fprintf(stderr, "server %u: closing the socket did not finish "
		    "in %d s; exiting without it\n", w->rank, CLOSE_WAIT_S);
		_exit(w->rv == 0 ? 0 : 1);
	}
	pthread_mutex_unlock(&w->mu);
	return NULL;
}

// server_close stops every context, whose callback then frees any message
// it held (parked contexts hold none), and closes the socket.
static void server_close(ps_server *s, int rv)
{
	close_watch w = {.done = 0, .rv = rv, .rank = s->cfg->rank};
	for (uint32_t i = 0; s->ctxs != NULL && i < s->n_ctx; i++)
		if (s->ctxs[i].aio != NULL)
			nng_aio_stop(s->ctxs[i].aio);
	pthread_t t;
	pthread_mutex_init(&w.mu, NULL);
	pthread_cond_init(&w.cv, NULL);
	int watching = pthread_create(&t, NULL, close_watch_run, &w) == 0;
	nng_close(s->sock);
	if (watching) {
		pthread_mutex_lock(&w.mu);
		w.done = 1;
		pthread_cond_signal(&w.cv);
		pthread_mutex_unlock(&w.mu);
		pthread_join(t, NULL);
	}
	pthread_cond_destroy(&w.cv);
	pthread_mutex_destroy(&w.mu);
}

void pti_server_fini(ps_server *s)
{
	// server_close has stopped every aio (none exist before it could).
	// A reply that a callback handed to nng_ctx_send after its aio was
	// stopped was refused without a callback: it is still ours.
	for (uint32_t i = 0; s->ctxs != NULL && i < s->n_ctx; i++)
		if (s->ctxs[i].aio != NULL) {
			nng_msg_free(nng_aio_get_msg(s->ctxs[i].aio));
			nng_aio_free(s->ctxs[i].aio);
		}
	free(s->ctxs);
	free(s->params);
	free(s->acc);
	free(s->grads);
	free(s->got_bits);
	free(s->m);
	free(s->clocks);
	free(s->peers);
	free(s->state1);
	free(s->state2);
	pthread_mutex_destroy(&s->mu);
	pthread_cond_destroy(&s->cv);
}

// server_gone marks the workers of --gone-workers as lost: they left the
// job before this server (a restarted one) started, so no step or clock
// waits for them. One that comes back says hello and rejoins.
static int server_gone(ps_server *s)
{
	const pt_config *c = s->cfg;
	for (const char *p = c->gone_workers; *p;) {
		unsigned r;
		int used = 0;
		if (sscanf(p, "%u%n", &r, &used) != 1 || r >= c->workers)
			return pti_err_set(PT_EINVAL,
			    "--gone-workers %s: expected ranks below --workers "
			    "%u, separated by commas", c->gone_workers,
			    c->workers);
		if (!s->m[r].lost) {
			s->m[r].hello = s->m[r].lost = 1;
			s->n_hello++;
			s->n_lost++;
		}
		p += used + (p[used] == ',');
	}
	return 0;
}

int pti_server_init(ps_server *s, const pt_config *c, const pt_layout *l,
    double warmup)
{
	int rv;

	memset(s, 0, sizeof(*s));
	s->cfg = c;
	if ((s->policy = pti_policy_of(c->mode)) == NULL)
		return pti_err_set(PT_EINVAL, "mode %d has no policy", c->mode);
	if ((rv = pt_secret_load(&s->secret, c->secret_file)) != 0)
		return rv;
	pthread_mutex_init(&s->mu, NULL);
	pthread_cond_init(&s->cv, NULL);
	if (l->n_vars == 0)
		return pti_err_set(PT_EINVAL, "server %u: the job declares no "
		    "variables", c->rank);
	s->layout = *l;
	pt_range r = pt_layout_shard(&s->layout, c->rank, c->servers);
	s->lo = r.lo;
	s->hi = r.hi;
	s->n = r.hi - r.lo;
	if (s->n == 0)
		return pti_err_set(PT_EINVAL,
		    "server %u would hold no parameters: %llu parameters "
		    "over %u servers", c->rank,
		    (unsigned long long)s->layout.n_params, c->servers);
	s->params = malloc(s->n * sizeof(float));
	s->acc = malloc(s->n * sizeof(float));
	if (c->mode == PT_MODE_SYNC)
		s->grads = malloc((size_t)c->workers * s->n * sizeof(float));
	s->got_bits = malloc((size_t)c->workers * ((s->n + 63) / 64) *
	    sizeof(uint64_t));
	s->m = calloc(c->workers, sizeof(ps_member));
	s->clocks = calloc(c->workers, sizeof(int64_t));
	s->unauth_max = c->workers + PS_UNAUTH_MAX;
	s->n_peers = c->workers + PS_CONTROL_MAX + s->unauth_max;
	s->peers = calloc(s->n_peers, sizeof(ps_peer));
	if (!s->params || !s->acc || !s->m || !s->clocks ||
	    !s->peers || !s->got_bits ||
	    (c->mode == PT_MODE_SYNC && !s->grads))
		return pti_err_set(PT_ENOMEM, "server %u: shard of %llu floats",
		    c->rank, (unsigned long long)s->n);
	pt_layout_init_values(s->params, &s->layout, c->seed, s->lo, s->hi);
	if ((rv = pti_optim_parse(&s->opt, c->optimizer, c->weight_decay)) != 0)
		return rv;
	if (s->opt.n_state >= 1 &&
	    (s->state1 = calloc(s->n, sizeof(float))) == NULL)
		return pti_err_set(PT_ENOMEM, "optimizer state");
	if (s->opt.n_state >= 2 &&
	    (s->state2 = calloc(s->n, sizeof(float))) == NULL)
		return pti_err_set(PT_ENOMEM, "optimizer state");
	if ((rv = pt_config_ckpt_every(c, &s->ckpt.every,
		 &s->ckpt.seconds)) != 0)
		return rv;
	s->ckpt.last = pti_clock_s();
	if (s->ckpt.every != 0) {
		if (mkdir(c->checkpoint_dir, 0777) != 0 && errno != EEXIST)
			return pti_err_set(PT_EIO, "--checkpoint-dir %s: %s",
			    c->checkpoint_dir, strerror(errno));
	}
	if (c->resume_version >= 0) {
		char path[PT_PATH_MAX + 64];
		pti_ckpt_meta want = server_ckpt_meta(s), got;
		float *vecs[3] = {s->params, s->state1, s->state2};
		pti_ckpt_path(path, sizeof(path), c->checkpoint_dir, c->rank,
		    c->resume_version);
		if ((rv = pti_ckpt_load(path, &want, s->clocks, vecs, &got)) != 0)
			return rv;
		for (uint32_t w = 0; w < c->workers; w++)
			s->m[w].clock = s->clocks[w];
		if (c->mode != PT_MODE_SYNC && got.n_workers != c->workers)
			return pti_err_set(PT_EINVAL,
			    "%s: written for %u workers, this job has %u: the "
			    "workers' data positions do not carry over", path,
			    got.n_workers, c->workers);
		s->version = got.version;
		s->updates = got.updates;
		fprintf(stderr, "server %u: resumed from %s at version %lld\n",
		    c->rank, path, (long long)s->version);
	}
	if ((rv = server_gone(s)) != 0)
		return rv;
	for (uint32_t w = 0; w < c->workers; w++)
		pti_policy_sealed(s, w);
	ps_ctx *none = NULL; // nothing is parked yet
	pti_policy_clocks(s, &none);
	s->lr_base = c->lr;
	if (c->lr_scaling == PT_LR_LINEAR)
		s->lr_base *= c->batch / 256.0;
	s->warmup = warmup;
	return 0;
}

// ---------------------------------------------------------------- public

// server_listen opens the socket, its contexts and the listener.
static int server_listen(pt_server *ps)
{
	ps_server *s = &ps->s;
	const pt_config *c = &ps->cfg;
	int rv;
	if ((rv = nng_rep0_open(&s->sock)) != 0)
		return pti_err_set(PT_ETRANSPORT, "server %u: %s", c->rank,
		    nng_strerror(rv));
	ps->open = 1;
	// Bound what one peer can make us buffer: the largest legal message
	// of this job is a header and a shard.
	s->recv_max = 4 + PT_HDR_MAX + 4 + (size_t)s->n * sizeof(float);
	nng_socket_set_size(s->sock, NNG_OPT_RECVMAXSZ, s->recv_max);
	s->n_ctx = c->workers + 8;
	if ((s->ctxs = calloc(s->n_ctx, sizeof(ps_ctx))) == NULL)
		return pti_err_set(PT_ENOMEM, "server contexts");
	for (uint32_t i = 0; i < s->n_ctx; i++) {
		ps_ctx *x = &s->ctxs[i];
		x->s = s;
		if ((rv = nng_aio_alloc(&x->aio, ctx_cb, x)) != 0 ||
		    (rv = nng_ctx_open(&x->ctx, s->sock)) != 0)
			return pti_err_set(PT_ETRANSPORT, "server %u: %s",
			    c->rank, nng_strerror(rv));
	}
	if ((rv = pti_transport_listen(&ps->l, s->sock, c->listen)) != 0)
		return pti_err_set(PT_ETRANSPORT, "server %u: listen on %s: %s",
		    c->rank, c->listen, nng_strerror(rv));
	nng_pipe_notify(s->sock, NNG_PIPE_EV_ADD_PRE, pipe_cb, s);
	nng_pipe_notify(s->sock, NNG_PIPE_EV_REM_POST, pipe_cb, s);
	for (uint32_t i = 0; i < s->n_ctx; i++)
		ctx_recv(&s->ctxs[i]);
	return server_ready(ps);
}

// server_free undoes what open did, however far it got; rv is the
// status the process would exit with, should closing hang.
static void server_free(pt_server *ps, int rv)
{
	if (ps->open)
		server_close(&ps->s, rv);
	pti_server_fini(&ps->s);
	free(ps);
}

int pt_server_open(pt_server **out, const pt_job *job, uint32_t rank,
    const char *url)
{
	pt_server *ps = calloc(1, sizeof(*ps));
	int rv;
	if (ps == NULL)
		return pti_err_set(PT_ENOMEM, "server");
	ps->cfg = job->c;
	ps->cfg.rank = rank;
	if (url == NULL || strlen(url) >= sizeof(ps->cfg.listen)) {
		free(ps);
		return pti_err_set(PT_EINVAL, "server %u: no address, or one "
		    "too long, to listen on", rank);
	}
	strcpy(ps->cfg.listen, url);
	if ((rv = pt_config_check(&ps->cfg, PT_CMD_SERVER)) != 0 ||
	    (rv = pti_server_init(&ps->s, &ps->cfg, &job->l,
		 job->warmup)) != 0 ||
	    (rv = server_listen(ps)) != 0) {
		server_free(ps, rv);
		return rv;
	}
	*out = ps;
	return 0;
}

int pt_server_url(const pt_server *ps, char *buf, uint64_t size)
{
	if (strlen(ps->url) >= size)
		return pti_err_set(PT_EINVAL, "server %u: address %s does not "
		    "fit %llu bytes", ps->cfg.rank, ps->url,
		    (unsigned long long)size);
	strcpy(buf, ps->url);
	return 0;
}

int pt_server_serve(pt_server *ps)
{
	ps_server *s = &ps->s;
	pthread_mutex_lock(&s->mu);
	while (!s->stop && !pti_server_signal) {
		pti_cond_wait_ms(&s->cv, &s->mu, 200);
		ps_ctx *wake = NULL;
		pthread_mutex_unlock(&s->mu);
		pti_peers_idle(s);
		pthread_mutex_lock(&s->mu);
		check_timeouts(s, &wake);
		if (wake != NULL) {
			pthread_mutex_unlock(&s->mu);
			send_woken(wake);
			pthread_mutex_lock(&s->mu);
		}
	}
	pthread_mutex_unlock(&s->mu);
	return 0;
}

void pt_server_stop(pt_server *ps)
{
	pthread_mutex_lock(&ps->s.mu);
	ps->s.stop = 1;
	pthread_cond_broadcast(&ps->s.cv);
	pthread_mutex_unlock(&ps->s.mu);
}

void pt_server_close(pt_server *ps)
{
	if (ps == NULL)
		return;
	ps_server *s = &ps->s;
	const pt_config *c = &ps->cfg;
	// nng reports a send done once the reply is queued, not written:
	// give a shutdown's reply a moment on the wire before closing.
	if (s->shutting)
		usleep(200 * 1000);
	if (pti_server_signal)
		fprintf(stderr, "server %u: stopping on signal %d\n", c->rank,
		    (int)pti_server_signal);
	fprintf(stderr, "server %u: version %lld, %llu updates, %llu "
	    "rejected requests\n", c->rank, (long long)s->version,
	    (unsigned long long)s->updates, (unsigned long long)s->rejected);
	if (c->out[0] != '\0')
		server_write_stats(s);
	server_free(ps, 0);
}
