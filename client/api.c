// client/api.c - pstrain.h's worker: ranged push, pull and pushpull on a
// job's variables, over the client's calls (client.h). A range is cut at
// the servers' shard edges, one part per server it touches.
#include "client/api.h"
#include "client/worker.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/clock.h"
#include "common/err.h"
#include "common/job.h"
#include "common/mode.h"

int pt_worker_open(pt_worker **out, const pt_job *job, uint32_t rank,
    const char *urls)
{
	pt_worker *w = calloc(1, sizeof(*w));
	pti_secret key;
	int64_t start;
	int rv;
	if (w == NULL)
		return pti_err_set(PT_ENOMEM, "worker");
	w->job = job->o;
	w->l = job->l;
	w->rank = rank;
	if (urls == NULL || strlen(urls) >= sizeof(w->connect)) {
		free(w);
		return pti_err_set(PT_EINVAL, "worker %u: no server addresses, "
		    "or too long a list", rank);
	}
	strcpy(w->connect, urls);
	if ((rv = pti_jobopt_check(&w->job)) != 0 ||
	    (rv = pti_jobopt_check_proc(&w->job, PT_CMD_WORKER, rank,
		 urls)) != 0 ||
	    (rv = pti_secret_load(&key, w->job.secret_file)) != 0) {
		free(w);
		return rv;
	}
	if (!(w->mode = pti_mode_of(w->job.mode))->servers) {
		rv = pti_err_set(PT_EINVAL, "worker %u: mode %s has no "
		    "servers to talk to", rank, w->mode->name);
		free(w);
		return rv;
	}
	rv = pti_client_open(&w->client, w->connect, PT_ROLE_WORKER, rank,
	    w->job.rpc_timeout, &key);
	memset(&key, 0, sizeof(key));
	if (rv == 0 && pti_client_servers(w->client) != w->job.servers)
		rv = pti_err_set(PT_EINVAL, "worker %u: %u server addresses "
		    "given, the job has %u servers", rank,
		    pti_client_servers(w->client), w->job.servers);
	if (rv == 0)
		rv = pti_worker_join(w, 0, &start);
	if (rv != 0) {
		pt_worker_close(w);
		return rv;
	}
	// The bytes of joining are no step's (pt_worker_step).
	pti_client_bytes(w->client, &w->rec.tx, &w->rec.rx);
	*out = w;
	return 0;
}

void pt_worker_close(pt_worker *w)
{
	if (w == NULL)
		return;
	pti_client_close(w->client);
	pti_worker_rows_free(w);
	pti_rec_close(w);
	free(w);
}

pti_client *pti_worker_client(pt_worker *w)
{
	return w->client;
}

int64_t pt_worker_start(const pt_worker *w)
{
	return w->start;
}

static void worker_sleep(double s)
{
	struct timespec ts = {(time_t)s, (long)(fmod(s, 1.0) * 1e9)};
	nanosleep(&ts, NULL);
}

int pti_worker_join(pt_worker *w, int64_t step, int64_t *start)
{
	char who[32];
	double until = pti_clock_s() + w->job.rpc_timeout, pause = 0.05;
	snprintf(who, sizeof(who), "worker %u", w->rank);
	for (;;) {
		int rv = pti_client_wait(w->client, who,
		    until - pti_clock_s(), w->job.connect_timeout);
		if (rv == 0)
			rv = pti_client_hello(w->client, &w->l, w->job.mode,
			    w->job.workers, step, start);
		const char *url;
		if (rv == 0 && w->job.shm == PTI_SHM_TRY &&
		    !pti_client_shm_offered(w->client, &url)) {
			pti_log(PT_LOG_INFO, "worker %u: the server at %s offers "
			    "no shared memory (--transport ipc); values go over "
			    "ipc", w->rank, url);
			w->job.shm = 0;
		}
		// Values stay still while read in sync without backup
		// workers only (docs/PROTOCOL.md "Shared memory").
		if (rv == 0 && w->job.shm)
			rv = pti_client_shm(w->client,
			    pti_mode_of(w->job.mode)->lockstep &&
				w->job.backup_workers == 0);
		if (rv == 0) {
			w->start = w->next_ver = *start;
			return 0;
		}
		// A closed connection, a server that does not know this
		// worker yet, servers at different versions for a moment:
		// a restarting server causes them, and trying again mends it.
		if ((rv != PT_ECLOSED && rv != PT_ESTATE) ||
		    pti_clock_s() + pause > until)
			return rv;
		pti_log(PT_LOG_WARN, "worker %u: %s; trying again in %.2fs",
		    w->rank, pt_errmsg(rv), pause);
		worker_sleep(pause);
		pause = fmin(pause * 2, 2.0);
	}
}

// range_flat resolves (var, off, n) to flat [*lo, *lo + n).
static int range_flat(const pt_worker *w, int var, uint64_t off, uint64_t n,
    uint64_t *lo)
{
	uint64_t base = 0, size = w->l.n_params;
	const char *what = "the key space";
	if (var != PT_ALL) {
		if (var < 0 || (uint32_t)var >= w->l.n_vars)
			return pti_err_set(PT_ERANGE, "variable %d does not "
			    "exist (the job has %u)", var, w->l.n_vars);
		base = w->l.vars[var].off;
		size = w->l.vars[var].n;
		what = w->l.vars[var].name;
	}
	if (n == 0 || off > size || n > size - off)
		return pti_err_set(PT_ERANGE, "range [%llu, +%llu) is outside "
		    "%s of %llu floats", (unsigned long long)off,
		    (unsigned long long)n, what, (unsigned long long)size);
	*lo = base + off;
	return 0;
}

enum { SEND_PUSH = 1, SEND_PULL = 2 };

// worker_lendable checks that flat [lo, lo + n) lies within one
// server's shard, as a range whose values are lent must.
static int worker_lendable(const pt_worker *w, uint64_t lo, uint64_t n)
{
	uint32_t ns = pti_client_servers(w->client), first = ns, last = 0;
	for (uint32_t i = 0; i < ns; i++) {
		uint64_t slo, shi;
		pti_client_shard(w->client, i, &slo, &shi);
		if (lo < shi && lo + n > slo) {
			first = i < first ? i : first;
			last = i;
		}
	}
	if (first == last)
		return 0;
	return pti_err_set(PT_EINVAL, "flat range [%llu, +%llu) spans "
	    "servers %u to %u: values are lent (vals NULL) only for a range "
	    "within one server's shard, since each server's reply is a "
	    "message of its own", (unsigned long long)lo,
	    (unsigned long long)n, first, last);
}

// A sync pushpull of more than WORKER_PIECE floats to one server goes in
// pieces of at least that many, at most WORKER_PIECES of them (the
// server parks at most PS_PARK_MAX requests of a connection). 2 MiB: in
// bench/comm's 17.4 MB exchange over ipc, 4 MiB pieces gained less.
#define WORKER_PIECE ((uint64_t)1 << 19)
#define WORKER_PIECES 8

static uint64_t worker_piece(uint64_t n)
{
	uint64_t k = (n + WORKER_PIECE - 1) / WORKER_PIECE;
	if (k > WORKER_PIECES)
		k = WORKER_PIECES;
	return k <= 1 ? n : (n + k - 1) / k;
}

// worker_send cuts flat [lo, lo + n) at the shard edges and sends each
// server its part: a push of grad (what = SEND_PUSH), a pull into vals
// (SEND_PULL), or both; a pull with vals NULL lends the reply's values
// (the range then lies within one shard). A pushpull is one request per
// server, except in sync mode for a part short of the server's whole
// shard: its reply could only come once the step closes, which the
// worker's later parts may be needed for, so it goes as a push and a
// pull that waits. A sync pushpull of a large whole shard goes in
// pieces (worker_piece), sent at once: the server applies and answers
// each as soon as every worker has pushed it, while the next is on its
// way, and pti_call_wait takes each reply's values as it comes. Not with
// backup workers (a late piece would be dropped and counted on its own)
// nor for a loan (one reply).
static int worker_send(pt_worker *w, int what, int64_t step, uint64_t lo,
    uint64_t n, const float *grad, float *vals, pt_req **out)
{
	pti_client *cl = w->client;
	pt_req *q = NULL;
	int rv, lend = (what & SEND_PULL) && vals == NULL;
	if ((what & SEND_PUSH) && (step < 0 || step > ((int64_t)1 << 50)))
		return pti_err_set(PT_EINVAL, "step %lld: must be from 0 to "
		    "2^50", (long long)step);
	if ((what & SEND_PUSH) && grad == NULL)
		return pti_err_set(PT_EINVAL, "step %lld: no gradient (grad "
		    "is NULL)", (long long)step);
	if (lend && (rv = worker_lendable(w, lo, n)) != 0)
		return rv;
	if ((rv = pti_call_new(cl, &q)) != 0)
		return rv;
	pti_rec_sent(w);
	uint32_t ns = pti_client_servers(cl);
	for (uint32_t i = 0; i < ns && rv == 0; i++) {
		uint64_t slo, shi;
		pti_client_shard(cl, i, &slo, &shi);
		uint64_t a = lo > slo ? lo : slo;
		uint64_t b = lo + n < shi ? lo + n : shi;
		if (a >= b)
			continue;
		int whole = a == slo && b == shi;
		int split = what == (SEND_PUSH | SEND_PULL) &&
			    w->mode->lockstep && !whole;
		pti_hdr h;
		uint32_t op = what == SEND_PUSH ? PT_OP_PUSH
			      : what == SEND_PULL ? PT_OP_PULL
						  : PT_OP_PUSHPULL;
		if (split)
			op = PT_OP_PUSH;
		pti_hdr_init(&h, op, PT_ROLE_WORKER, w->rank);
		h.has |= PTI_H_RANGE;
		h.off = a;
		h.n = b - a;
		if (op != PT_OP_PULL) {
			h.has |= PTI_H_STEP | PTI_H_VER;
			h.step = step;
			h.ver = pti_client_ver(cl, i);
		} else if (w->mode->lockstep) {
			h.has |= PTI_H_VER;
			h.ver = w->next_ver;
		}
		// A large sync pushpull: in pieces (worker_piece), each its
		// range of the same request (not through shared memory,
		// where nothing crosses a socket).
		uint64_t piece = b - a;
		if (op == PT_OP_PUSHPULL && w->mode->lockstep &&
		    w->job.backup_workers == 0 && !lend && !w->job.shm)
			piece = worker_piece(b - a);
		for (uint64_t pa = a; pa < b && rv == 0 && piece < b - a;
		     pa += piece) {
			pti_hdr ph = h;
			ph.off = pa;
			ph.n = b - pa < piece ? b - pa : piece;
			rv = pti_call_send(q, i, &ph, grad + (pa - lo), ph.n,
			    vals + (pa - lo));
		}
		if (piece < b - a)
			continue;
		const float *g = op == PT_OP_PULL ? NULL : grad + (a - lo);
		if (lend && op != PT_OP_PUSH)
			rv = pti_call_send_lent(q, i, &h, g, b - a);
		else
			rv = pti_call_send(q, i, &h, g, b - a,
			    op == PT_OP_PUSH ? NULL : vals + (a - lo));
		if (rv == 0 && split) {
			pti_hdr_init(&h, PT_OP_PULL, PT_ROLE_WORKER, w->rank);
			h.has |= PTI_H_RANGE | PTI_H_VER;
			h.off = a;
			h.n = b - a;
			h.ver = step + 1;
			rv = lend ? pti_call_send_lent(q, i, &h, NULL, b - a)
				  : pti_call_send(q, i, &h, NULL, b - a,
					vals + (a - lo));
		}
	}
	if (rv != 0) {
		pti_call_free(q);
		return rv;
	}
	if ((what & SEND_PUSH) && step + 1 > w->next_ver)
		w->next_ver = step + 1;
	*out = q;
	return 0;
}

int pt_push(pt_worker *w, int64_t step, int var, uint64_t off, uint64_t n,
    const float *grad, pt_req **req)
{
	uint64_t lo = 0;
	int rv = range_flat(w, var, off, n, &lo);
	return rv ? rv : worker_send(w, SEND_PUSH, step, lo, n, grad, NULL, req);
}

int pt_pull(pt_worker *w, int var, uint64_t off, uint64_t n, float *vals,
    pt_req **req)
{
	uint64_t lo = 0;
	int rv = range_flat(w, var, off, n, &lo);
	return rv ? rv : worker_send(w, SEND_PULL, 0, lo, n, NULL, vals, req);
}

int pt_pushpull(pt_worker *w, int64_t step, int var, uint64_t off,
    uint64_t n, const float *grad, float *vals, pt_req **req)
{
	uint64_t lo = 0;
	int rv = range_flat(w, var, off, n, &lo);
	return rv ? rv : worker_send(w, SEND_PUSH | SEND_PULL, step, lo, n,
				 grad, vals, req);
}

int pti_wait_info(pt_worker *w, pt_req *req, pti_client_step *info)
{
	pti_client_step st;
	int rv = pti_call_wait(req, &st);
	pti_call_free(req);
	if (rv == 0) {
		pti_rec_reply(w, &st);
		if (info != NULL)
			*info = st;
	}
	return rv;
}

int pt_wait(pt_worker *w, pt_req *req)
{
	return pti_wait_info(w, req, NULL);
}

int pt_wait_lent(pt_worker *w, pt_req *req, const float **vals,
    pt_lent **lent)
{
	if (req == NULL)
		return pti_err_set(PT_EINVAL, "pt_wait_lent: no request");
	if (!pti_call_lends(req) || vals == NULL || lent == NULL) {
		// Still waited for and freed, as the header says: cancelling
		// it could leave a push applied or not.
		int lends = pti_call_lends(req);
		pti_wait_info(w, req, NULL);
		return pti_err_set(PT_EINVAL, "pt_wait_lent: %s (it was "
		    "waited for as pt_wait does)", lends ? "vals or lent is "
		    "NULL" : "the request lends no values: it was made with "
		    "a buffer for them (use pt_wait), or is a push");
	}
	int rv = pti_call_wait(req, NULL);
	if (rv == 0)
		rv = pti_call_lend(req, vals, lent);
	pti_call_free(req);
	return rv;
}

void pt_lent_free(pt_worker *w, pt_lent *lent)
{
	pti_lent_free(w->client, lent);
}

// worker_stats asks every server for its counters: their sum into *st,
// whether every worker is done or lost on every server into *all, and
// server 0's lowest live rank into *first_live (each may be NULL).
static int worker_stats(pt_worker *w, pt_stats *st, int *all,
    uint32_t *first_live)
{
	uint32_t n = pti_client_servers(w->client);
	pti_hdr *r = calloc(n, sizeof(pti_hdr));
	if (r == NULL)
		return pti_err_set(PT_ENOMEM, "stats");
	int rv = pti_client_simple(w->client, PT_OP_STATS, r);
	if (rv == 0) {
		pt_stats s = {INT64_MAX, 0, 0, 0, 0, 0.0, r[0].n_done,
		    r[0].n_lost};
		uint64_t stale_sum = 0;
		int every = 1;
		for (uint32_t i = 0; i < n; i++) {
			if (r[i].ver < s.version)
				s.version = r[i].ver;
			s.updates += r[i].updates;
			s.dropped += r[i].dropped;
			s.rejected += r[i].rejected;
			stale_sum += r[i].stale_sum;
			if (r[i].stale_max > s.stale_max)
				s.stale_max = r[i].stale_max;
			every &= r[i].n_done + r[i].n_lost >= w->job.workers;
		}
		s.stale_mean = s.updates ? (double)stale_sum / s.updates : 0;
		if (st != NULL)
			*st = s;
		if (all != NULL)
			*all = every;
		if (first_live != NULL)
			*first_live = r[0].first_live;
	}
	free(r);
	return rv;
}

int pt_worker_stats(pt_worker *w, pt_stats *st)
{
	return worker_stats(w, st, NULL, NULL);
}

int pti_worker_all_done(pt_worker *w, uint32_t *first_live)
{
	int all = 0, rv = worker_stats(w, NULL, &all, first_live);
	return rv != 0 ? -rv : all;
}

int pt_worker_done(pt_worker *w)
{
	uint32_t first = 0;
	int rv = pti_client_simple(w->client, PT_OP_DONE, NULL), all;
	if (rv != 0)
		return rv;
	// Every worker's done (or loss) on every server; then the lowest
	// live rank stops the servers.
	while ((all = pti_worker_all_done(w, &first)) == 0)
		worker_sleep(0.02);
	if (all < 0)
		return -all;
	return first == w->rank ? pti_worker_shutdown(w) : 0;
}

int pti_worker_shutdown(pt_worker *w)
{
	int rv = pti_client_simple(w->client, PT_OP_SHUTDOWN, NULL);
	if (rv == PT_ETRANSPORT || rv == PT_ECLOSED) {
		// A server that closed its connection while answering has
		// stopped, which is what was asked.
		pti_log(PT_LOG_WARN, "worker %u: %s (taken as stopped)",
		    w->rank, pt_errmsg(rv));
		rv = 0;
	}
	return rv;
}
