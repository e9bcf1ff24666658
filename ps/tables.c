// ps/tables.c - the server's embedding tables (issue 35): the rows op,
// which pushes the gradients of k rows and pulls the values of kp rows of
// one table (docs/PROTOCOL.md, "Rows"), and the rule that applies them.
//
// In sync mode a table moves in lockstep: each worker's rows request of
// step t, empty or not, is its part of the table's step t; the step
// closes when every live worker's part is in (less the backup workers),
// and then every pushed row is updated once with the mean of its
// gradients, summed in rank order (the same bits whatever server holds
// the row, and however the requests arrived). The requests wait, each in
// its own message, and their replies carry the pulled rows of the closed
// step. In the other modes (hybrid too, whose variables are sync) each
// request is applied as it arrives and answered at once. Either way a row's staleness is the updates it had
// between the pull a worker read it from and the push of that worker's
// gradient (the count the worker sends back).
//
// Everything here runs under the server lock.
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "common/mode.h"
#include "common/sort.h"
#include "ps/policy.h"
#include "ps/rows.h"

// The parts of a rows request's payload (pti_rows_words).
typedef struct rows_req {
	const uint8_t *ids;   // (k) u64 ids pushed
	const uint8_t *since; // (k) u32 update counts they were read at
	const uint8_t *grad;  // (k x dim) f32
	const uint8_t *pull;  // (kp) u64 ids pulled
	uint32_t k, kp, dim;
} rows_req;

static uint64_t u64_at(const uint8_t *p, uint64_t i)
{
	uint64_t v;
	memcpy(&v, p + 8 * i, 8);
	return v;
}

static uint32_t u32_at(const uint8_t *p, uint64_t i)
{
	uint32_t v;
	memcpy(&v, p + 4 * i, 4);
	return v;
}

static void req_parts(rows_req *q, const pti_hdr *h, const void *pay,
    uint32_t dim)
{
	const uint8_t *b = pay;
	q->k = h->k;
	q->kp = h->kp;
	q->dim = dim;
	q->ids = b;
	q->since = b + 8 * (uint64_t)h->k;
	q->grad = q->since + 4 * (uint64_t)h->k;
	q->pull = q->grad + 4 * (uint64_t)h->k * dim;
}

int pti_tables_init(ps_server *s)
{
	uint32_t n = s->layout.n_tables;
	if (n == 0)
		return 0;
	if ((s->tables = calloc(n, sizeof(*s->tables))) == NULL)
		return pti_err_set(PT_ENOMEM, "server %u: tables", s->rank);
	for (uint32_t i = 0; i < n; i++) {
		const pti_emb_table *t = &s->layout.tables[i];
		pti_rows_opts o = {
		    .dim = t->dim,
		    .n_state = (uint32_t)s->opt.n_state,
		    .capacity = s->job->table_capacity,
		    .evict = s->job->table_evict,
		    .admit = s->job->table_admit,
		    .seed = s->job->seed,
		    .table = i,
		    .bound = t->bound,
		};
		int rv = pti_rows_new(&s->tables[i].rows, &o);
		if (rv != 0)
			return rv;
		s->tables[i].held = calloc(s->job->workers, sizeof(nng_msg *));
		if (s->tables[i].held == NULL)
			return pti_err_set(PT_ENOMEM, "server %u: tables",
			    s->rank);
	}
	return 0;
}

void pti_tables_fini(ps_server *s)
{
	for (uint32_t i = 0; s->tables != NULL && i < s->layout.n_tables;
	     i++) {
		ps_table *t = &s->tables[i];
		for (uint32_t r = 0; t->held != NULL && r < s->job->workers;
		     r++)
			nng_msg_free(t->held[r]);
		free(t->held);
		pti_rows_free(t->rows);
	}
	free(s->tables);
	s->tables = NULL;
}

// ---------------------------------------------------------------- checkpoints

int pti_tables_behind(const ps_server *s)
{
	if (s->tables == NULL || !pti_mode_of(s->job->mode)->rows_lockstep)
		return 0;
	for (uint32_t i = 0; i < s->layout.n_tables; i++)
		if (s->tables[i].ver < s->version)
			return 1;
	return 0;
}

// The tables' bytes: for each, its version and its store's dump
// (pti_rows_dump), each preceded by its length.
int pti_tables_dump(const ps_server *s, void **out, uint64_t *len)
{
	uint32_t n = s->layout.n_tables;
	void **blob = calloc(n, sizeof(*blob));
	uint64_t *size = calloc(n, sizeof(*size)), total = 4;
	int rv = blob && size ? 0 : pti_err_set(PT_ENOMEM, "tables' dump");
	for (uint32_t i = 0; i < n && rv == 0; i++) {
		rv = pti_rows_dump(s->tables[i].rows, &blob[i], &size[i]);
		total += 16 + size[i];
	}
	uint8_t *b = rv == 0 ? malloc(total) : NULL, *p = b;
	if (rv == 0 && b == NULL)
		rv = pti_err_set(PT_ENOMEM, "tables' dump");
	if (rv == 0) {
		memcpy(p, &n, 4);
		p += 4;
		for (uint32_t i = 0; i < n; i++) {
			memcpy(p, &s->tables[i].ver, 8);
			memcpy(p + 8, &size[i], 8);
			memcpy(p + 16, blob[i], size[i]);
			p += 16 + size[i];
		}
		*out = b;
		*len = total;
	}
	for (uint32_t i = 0; blob != NULL && i < n; i++)
		free(blob[i]);
	free(blob);
	free(size);
	return rv;
}

int pti_tables_undump(ps_server *s, const void *buf, uint64_t len,
    int64_t ver)
{
	const uint8_t *p = buf, *end = p + len;
	uint32_t n;
	if (len < 4 || (memcpy(&n, p, 4), n != s->layout.n_tables))
		return pti_err_set(PT_ECORRUPT, "no rows of this job's %u "
		    "tables", s->layout.n_tables);
	p += 4;
	for (uint32_t i = 0; i < n; i++) {
		int64_t tv;
		uint64_t size;
		if (end - p < 16)
			return pti_err_set(PT_ECORRUPT, "truncated tables");
		memcpy(&tv, p, 8);
		memcpy(&size, p + 8, 8);
		p += 16;
		if (size > (uint64_t)(end - p))
			return pti_err_set(PT_ECORRUPT, "truncated table %s",
			    s->layout.tables[i].name);
		int rv = pti_rows_undump(s->tables[i].rows, p, size);
		if (rv != 0)
			return rv;
		p += size;
		// A sync table goes on from the variables' version, an async
		// one counts on from its own.
		s->tables[i].ver = pti_mode_of(s->job->mode)->rows_lockstep
				       ? ver
				       : tv;
	}
	return p == end ? 0 : pti_err_set(PT_ECORRUPT, "bytes after the "
	    "tables");
}

// ---------------------------------------------------------------- replies

// rows_ahead prefetches what the lookups of the (i + ROWS_AHEAD)-th and,
// a stage before, the (i + 2 ROWS_AHEAD)-th of n ids will read (the ids
// stride bytes apart from ids; a loop over them calls it at each i):
// random rows of a large table miss the cache, and their misses overlap
// instead of following one another.
#define ROWS_AHEAD 8
static void rows_ahead(const pti_rows *r, const void *ids, size_t stride,
    uint64_t i, uint64_t n)
{
	const uint8_t *p = ids;
	uint64_t id;
	if (i + 2 * ROWS_AHEAD < n) {
		memcpy(&id, p + stride * (i + 2 * ROWS_AHEAD), 8);
		pti_rows_prefetch(r, id, 0);
	}
	if (i + ROWS_AHEAD < n) {
		memcpy(&id, p + stride * (i + ROWS_AHEAD), 8);
		pti_rows_prefetch(r, id, 1);
	}
}

// rows_reply answers q with its pulled rows of table tb as they are now:
// their update counts, then their values.
static nng_msg *rows_reply(ps_server *s, uint32_t tb, const rows_req *q)
{
	ps_table *t = &s->tables[tb];
	uint64_t n = (uint64_t)q->kp * (1 + q->dim);
	float *pay = n > 0 ? malloc(n * sizeof(float)) : NULL;
	if (n > 0 && pay == NULL)
		return NULL; // the worker times out, as for any reply
	float *vals = pay + q->kp;
	for (uint32_t i = 0; i < q->kp; i++) {
		rows_ahead(t->rows, q->pull, 8, i, q->kp);
		uint32_t cnt = (uint32_t)pti_rows_read(t->rows,
		    u64_at(q->pull, i), vals + (uint64_t)i * q->dim);
		memcpy(pay + i, &cnt, 4);
	}
	t->pulled += q->kp;
	pti_hdr h;
	pti_hdr_init(&h, PT_OP_ROWS, PT_ROLE_SERVER, s->rank);
	h.has |= PTI_H_VER | PTI_H_ROWS;
	h.ver = t->ver;
	h.table = tb;
	h.kp = q->kp;
	nng_msg *m = pti_server_reply(s, &h, pay, n);
	free(pay);
	return m;
}

// rows_scan answers a scan: the rows of table tb with ids from h->from
// on, ascending, at most h->lim: their ids, update counts and values.
// The reply's from is the id to ask for next, its lim 1 while more rows
// follow.
static nng_msg *rows_scan(ps_server *s, const pti_hdr *h)
{
	ps_table *t = &s->tables[h->table];
	uint32_t dim = s->layout.tables[h->table].dim;
	pti_rows_stats st;
	pti_rows_stats_of(t->rows, &st);
	uint64_t *ids = malloc((st.rows + 1) * sizeof(*ids));
	if (ids == NULL)
		return pti_server_error(s, h, PT_ENOMEM, "a scan of rows");
	pti_rows_ids(t->rows, ids);
	uint64_t lo = 0, hi = st.rows;
	while (lo < hi) { // the first id >= from
		uint64_t mid = lo + (hi - lo) / 2;
		if (ids[mid] < h->from)
			lo = mid + 1;
		else
			hi = mid;
	}
	uint64_t lim = h->lim < PTI_ROWS_MAX ? h->lim : PTI_ROWS_MAX;
	uint64_t n = st.rows - lo < lim ? st.rows - lo : lim;
	float *pay = malloc((n * (3 + dim) + 1) * sizeof(float));
	if (pay == NULL) {
		free(ids);
		return pti_server_error(s, h, PT_ENOMEM, "a scan of rows");
	}
	float *vals = pay + 3 * n;
	for (uint64_t i = 0; i < n; i++) {
		uint64_t id = ids[lo + i];
		uint32_t cnt = (uint32_t)pti_rows_read(t->rows, id,
		    vals + i * dim);
		memcpy((uint8_t *)pay + 8 * i, &id, 8);
		memcpy(pay + 2 * n + i, &cnt, 4);
	}
	pti_hdr r;
	pti_hdr_init(&r, PT_OP_ROWS, PT_ROLE_SERVER, s->rank);
	r.has |= PTI_H_VER | PTI_H_ROWS | PTI_H_SCAN;
	r.ver = t->ver;
	r.table = h->table;
	r.kp = (uint32_t)n;
	r.lim = lo + n < st.rows;
	r.from = r.lim ? ids[lo + n] : 0;
	nng_msg *m = pti_server_reply(s, &r, pay, n * (3 + dim));
	free(pay);
	free(ids);
	return m;
}

// reply_kept answers the parked request whose message it kept.
static nng_msg *reply_kept(ps_server *s, nng_msg *m)
{
	pti_hdr h;
	const void *pay;
	rows_req q;
	if (pti_msg_decode(&h, &pay, m) != 0)
		return NULL; // decoded once already: cannot happen
	req_parts(&q, &h, pay, s->layout.tables[h.table].dim);
	return rows_reply(s, h.table, &q);
}

// ---------------------------------------------------------------- updates

// count_stale counts a pushed row's staleness: the updates it had (now:
// its count before this update) since the count the worker read it at
// (since: that count's low 32 bits). An evicted row that came back
// counts from 0 again, and then counts as not stale.
static void count_stale(ps_table *t, uint64_t now, uint32_t since)
{
	if (since == PTI_ROWS_UNSEEN)
		return; // the worker never read it: no staleness to count
	int32_t d = (int32_t)((uint32_t)now - since);
	uint64_t stale = d > 0 ? (uint64_t)d : 0;
	t->stale_n++;
	t->stale_sum += stale;
	if (stale > t->stale_max)
		t->stale_max = stale;
}

// apply_at_once applies q's rows one by one (async, ssp, hybrid). In
// hybrid mode a worker's rows move by 1/W of its gradient (the rate is
// that of the variables' sync steps, whose updates take the mean of W):
// the W workers' pushes of a step move a row as a sync step would.
static int apply_at_once(ps_server *s, uint32_t tb, const pti_hdr *h,
    const rows_req *q)
{
	ps_table *t = &s->tables[tb];
	double lr = pti_lr(&s->lr, (h->has & PTI_H_STEP) ? h->step : 0, 0);
	double gdiv = s->job->mode == PT_MODE_HYBRID ? s->job->workers : 1;
	float *g = malloc((size_t)q->dim * sizeof(float));
	if (g == NULL)
		return pti_err_set(PT_ENOMEM, "rows");
	int rv = 0;
	for (uint32_t i = 0; i < q->k && rv == 0; i++) {
		uint64_t id = u64_at(q->ids, i);
		uint64_t now;
		rows_ahead(t->rows, q->ids, 8, i, q->k);
		memcpy(g, q->grad + 4 * (uint64_t)i * q->dim,
		    (size_t)q->dim * sizeof(float));
		rv = pti_rows_apply(t->rows, &s->opt, id, g, gdiv, lr, &now);
		if (rv == PTI_ROWS_REFUSED)
			rv = 0; // not admitted yet: its gradient is dropped
		if (rv == 0)
			count_stale(t, now, u32_at(q->since, i));
	}
	free(g);
	t->pushed += q->k;
	t->ver++;
	return rv;
}

// One pushed row of a held request, for the sum in rank order.
// close_step closes table tb's open step: every pushed row updated once
// with the mean of the gradients held for it (summed in rank order, over
// the workers whose parts are in), the parked requests answered, the
// held messages freed.
static int close_step(ps_server *s, uint32_t tb, ps_ctx **wake)
{
	ps_table *t = &s->tables[tb];
	uint32_t dim = s->layout.tables[tb].dim, workers = s->job->workers;
	uint64_t total = 0;
	rows_req q;
	pti_hdr h;
	const void *pay;
	for (uint32_t r = 0; r < workers; r++)
		if (t->held[r] != NULL &&
		    pti_msg_decode(&h, &pay, t->held[r]) == 0)
			total += h.k;
	// ref: (id, j) pairs of the pushed rows, j counting them in rank
	// order (g[j]: the gradient, since[j]: the count the worker read the
	// row at), then as much room to sort them in.
	uint64_t *ref = total > 0 ? malloc(4 * total * sizeof(*ref)) : NULL;
	const uint8_t **g = total > 0 ? malloc(total * sizeof(*g)) : NULL;
	uint32_t *since = total > 0 ? malloc(total * sizeof(*since)) : NULL;
	float *sum = malloc((size_t)dim * sizeof(float));
	int rv = 0;
	if ((total > 0 && (ref == NULL || g == NULL || since == NULL)) ||
	    sum == NULL)
		rv = pti_err_set(PT_ENOMEM, "rows of a sync step");
	uint64_t j = 0;
	for (uint32_t r = 0; r < workers && rv == 0; r++) {
		if (t->held[r] == NULL ||
		    pti_msg_decode(&h, &pay, t->held[r]) != 0)
			continue;
		req_parts(&q, &h, pay, dim);
		for (uint32_t i = 0; i < q.k; i++, j++) {
			ref[2 * j] = u64_at(q.ids, i);
			ref[2 * j + 1] = j;
			g[j] = q.grad + 4 * (uint64_t)i * dim;
			since[j] = u32_at(q.since, i);
		}
	}
	if (rv == 0) {
		// By id; one id's gradients stay in rank order (stable).
		pti_sort_pairs(ref, total, ref + 2 * total);
		double lr = pti_lr(&s->lr, t->ver, 0);
		for (uint64_t a = 0; a < total && rv == 0;) {
			uint64_t b = a, id = ref[2 * a];
			rows_ahead(t->rows, ref, 16, a, total);
			memcpy(sum, g[ref[2 * a + 1]], (size_t)dim * sizeof(float));
			while (++b < total && ref[2 * b] == id)
				for (uint32_t e = 0; e < dim; e++) {
					float v;
					memcpy(&v, g[ref[2 * b + 1]] + 4 * e, 4);
					sum[e] += v;
				}
			uint64_t now;
			rv = pti_rows_apply(t->rows, &s->opt, id, sum, t->n_in,
			    lr, &now);
			if (rv == PTI_ROWS_REFUSED)
				rv = 0; // not admitted yet: dropped
			for (uint64_t c = a; c < b && rv == 0; c++)
				count_stale(t, now, since[ref[2 * c + 1]]);
			a = b;
		}
		t->pushed += total;
	}
	free(g);
	free(since);
	free(ref);
	free(sum);
	t->ver++;
	t->n_in = 0;
	// The parked parts are answered with the closed step's rows.
	ps_ctx **pp = &s->waiting;
	while (*pp != NULL) {
		ps_ctx *x = *pp;
		if (x->r_op != PT_OP_ROWS || x->r_table != tb ||
		    x->wait_ver > t->ver) {
			pp = &x->next;
			continue;
		}
		*pp = x->next;
		nng_aio_set_msg(x->aio, x->r_keep != NULL
					    ? reply_kept(s, x->r_keep)
					    : rows_reply(s, tb, &(rows_req){0}));
		x->r_keep = NULL;
		x->next = *wake;
		*wake = x;
	}
	for (uint32_t r = 0; r < workers; r++) {
		nng_msg_free(t->held[r]);
		t->held[r] = NULL;
	}
	return rv;
}

// need: the parts a sync step of a table closes with, as sync.c's.
static uint32_t need(const ps_server *s)
{
	const pti_jobopt *c = s->job;
	uint32_t n = c->workers - c->backup_workers;
	return n > s->n_lost ? n - s->n_lost : 1;
}

// unkeep: a parked request whose kept message m leaves the step (its
// worker was lost while it waited) is answered with no rows.
static void unkeep(ps_server *s, const nng_msg *m)
{
	for (ps_ctx *x = s->waiting; x != NULL; x = x->next)
		if (x->r_op == PT_OP_ROWS && x->r_keep == m)
			x->r_keep = NULL;
}

void pti_tables_settle(ps_server *s, ps_ctx **wake)
{
	if (!pti_mode_of(s->job->mode)->rows_lockstep)
		return;
	for (uint32_t tb = 0; tb < s->layout.n_tables; tb++) {
		ps_table *t = &s->tables[tb];
		// A lost worker's part leaves the step: the job goes on
		// without it.
		for (uint32_t r = 0; r < s->job->workers; r++)
			if (t->held[r] != NULL && s->m[r].lost) {
				unkeep(s, t->held[r]);
				nng_msg_free(t->held[r]);
				t->held[r] = NULL;
				t->n_in--;
			}
		if (t->n_in > 0 && t->n_in >= need(s))
			(void)close_step(s, tb, wake);
	}
}

// ---------------------------------------------------------------- the op

// rows_check refuses what no rule may take: a table that does not exist,
// a row of another width, an id another server holds, an id pushed
// twice, a gradient that is not finite.
static int rows_check(ps_server *s, const pti_hdr *h, const void *pay,
    rows_req *q)
{
	if (h->table >= s->layout.n_tables)
		return pti_err_set(PT_ERANGE, "table %u does not exist (the "
		    "job has %u)", h->table, s->layout.n_tables);
	const pti_emb_table *tab = &s->layout.tables[h->table];
	uint64_t n = (h->has & PTI_H_RANGE) ? h->n : 0;
	if (n != pti_rows_words(h->k, h->kp, tab->dim))
		return pti_err_set(PT_EINVAL, "table %s has rows of %u floats, "
		    "not %llu", tab->name, tab->dim, h->k > 0
			? (unsigned long long)((n - pti_rows_words(h->k, h->kp,
			      0)) / h->k)
			: 0ULL);
	req_parts(q, h, pay, tab->dim);
	uint32_t S = s->job->servers;
	for (uint32_t i = 0; i < q->k + q->kp; i++) {
		uint64_t id = i < q->k ? u64_at(q->ids, i)
				       : u64_at(q->pull, i - q->k);
		uint32_t home = pti_layout_row_server(id, S);
		if (home != s->rank)
			return pti_err_set(PT_ERANGE, "row %llu of table %s "
			    "lives on server %u", (unsigned long long)id,
			    tab->name, home);
	}
	if (q->k == 0)
		return 0;
	uint64_t *ids = malloc(2 * (size_t)q->k * sizeof(*ids));
	if (ids == NULL)
		return pti_err_set(PT_ENOMEM, "rows");
	for (uint32_t i = 0; i < q->k; i++)
		ids[i] = u64_at(q->ids, i);
	pti_sort_u64(ids, q->k, ids + q->k);
	uint64_t twice = 0;
	int dup = 0;
	for (uint32_t i = 1; i < q->k && !dup; i++)
		if (ids[i] == ids[i - 1])
			dup = 1, twice = ids[i];
	free(ids);
	if (dup)
		return pti_err_set(PT_EINVAL, "row %llu of table %s pushed "
		    "twice in one request (sum its gradients first)",
		    (unsigned long long)twice, tab->name);
	return pti_push_finite(s, h, q->grad, (uint64_t)q->k * q->dim);
}

nng_msg *pti_op_rows(ps_server *s, ps_ctx *x, const pti_hdr *h,
    const void *pay, ps_ctx **wake)
{
	rows_req q;
	char why[200];
	int rv = rows_check(s, h, pay, &q);
	if (rv != 0)
		return pti_server_error(s, h, rv, pt_errmsg(rv));
	ps_table *t = &s->tables[h->table];
	int lockstep = pti_mode_of(s->job->mode)->rows_lockstep;
	if (h->has & PTI_H_SCAN) {
		if (q.k > 0 || q.kp > 0 || (h->has & PTI_H_STEP))
			return pti_server_error(s, h, PT_EPROTO, "a scan of "
			    "rows pushes and pulls nothing else");
		return rows_scan(s, h);
	}
	if (!(h->has & PTI_H_STEP)) {
		// A read: no part of a step. In sync it may wait for the
		// next step's rows, as a pull may.
		if (q.k > 0)
			return pti_server_error(s, h, PT_EPROTO,
			    "a push of rows needs its step");
		if (lockstep && (h->has & PTI_H_VER) && h->ver > t->ver) {
			if (h->ver > t->ver + 1 || h->role != PT_ROLE_WORKER) {
				snprintf(why, sizeof(why), "rows of step %lld "
				    "asked for, table %s is at %lld: only the "
				    "next one can be waited for",
				    (long long)h->ver,
				    s->layout.tables[h->table].name,
				    (long long)t->ver);
				return pti_server_error(s, h, PT_ESTATE, why);
			}
			if (pti_park_rows(s, x, h->table, h->ver, NULL) != 0)
				return pti_server_error(s, h, PT_ESTATE,
				    "too many requests of this connection "
				    "wait");
			return NULL;
		}
		return rows_reply(s, h->table, &q);
	}
	if (h->step < 0 || h->step > s->step_max)
		return pti_server_error(s, h, PT_ERANGE, "steps are from 0 to "
		    "--step-max");
	if (!lockstep) {
		if ((rv = apply_at_once(s, h->table, h, &q)) != 0)
			return pti_server_error(s, h, rv, pt_errmsg(rv));
		return rows_reply(s, h->table, &q);
	}
	if (h->step < t->ver) {
		// Its step closed without it (a backup worker's late part):
		// dropped, and answered with the rows as they are.
		s->dropped++;
		return rows_reply(s, h->table, &q);
	}
	if (h->step > t->ver || t->held[h->rank] != NULL) {
		snprintf(why, sizeof(why), "worker %u sent rows of step %lld "
		    "for table %s, whose open step is %lld%s", h->rank,
		    (long long)h->step, s->layout.tables[h->table].name,
		    (long long)t->ver,
		    t->held[h->rank] != NULL ? " and has its part already"
					     : "");
		return pti_server_error(s, h, PT_ESTATE, why);
	}
	if (pti_park_rows(s, x, h->table, t->ver + 1, s->cur) != 0)
		return pti_server_error(s, h, PT_ESTATE,
		    "too many requests of this connection wait");
	t->held[h->rank] = s->cur;
	s->cur = NULL;
	t->n_in++;
	if (t->n_in >= need(s) && (rv = close_step(s, h->table, wake)) != 0)
		pti_log(PT_LOG_ERR, "server %u: table %s: %s", s->rank,
		    s->layout.tables[h->table].name, pt_errmsg(rv));
	return NULL;
}
