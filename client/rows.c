// client/rows.c - pstrain.h's rows of embedding tables: a worker pushes
// the gradients of some rows and pulls the values of others, each row on
// the server a hash of its id picks (common/layout.h). Ids are made
// unique first: the gradients of a pushed id are summed (in the order
// given), a pulled id is asked for once and copied to every place it
// was asked for. One request goes to each server concerned (in sync
// mode, where a push is a worker's part of a table's step, to every
// server), all under way at once (docs/PROTOCOL.md, "Rows").
#include <stdlib.h>
#include <string.h>

#include "client/worker.h"
#include "common/err.h"
#include "common/sort.h"

// A row of the caller's arrays: its id and where it was given.
typedef struct id_at {
	uint64_t id;
	uint64_t at;
} id_at;

// sorted: ids[n] with their places, by id then place; NULL when n is 0
// or there is no memory (*rv then says).
static id_at *sorted(const uint64_t *ids, uint64_t n, int *rv)
{
	*rv = 0;
	if (n == 0)
		return NULL;
	id_at *s = malloc(2 * n * sizeof(*s)); // the second half: scratch
	if (s == NULL) {
		*rv = pti_err_set(PT_ENOMEM, "rows: %llu ids",
		    (unsigned long long)n);
		return NULL;
	}
	for (uint64_t i = 0; i < n; i++)
		s[i] = (id_at){ids[i], i};
	pti_sort_pairs((uint64_t *)s, n, (uint64_t *)(s + n)); // stable
	return s;
}

// memo_since is the update count the worker last read row id at, or
// PTI_ROWS_UNSEEN when it has not pulled it.
static uint32_t memo_since(const pti_row_memo *m, uint64_t id)
{
	uint64_t lo = 0, hi = m->n;
	while (lo < hi) {
		uint64_t mid = lo + (hi - lo) / 2;
		if (m->ids[mid] < id)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < m->n && m->ids[lo] == id ? m->count[lo] : PTI_ROWS_UNSEEN;
}

static int memo_room(pti_row_memo *m, uint64_t n)
{
	if (n <= m->room)
		return 0;
	uint64_t *ids = realloc(m->ids, n * sizeof(*ids));
	if (ids == NULL)
		return pti_err_set(PT_ENOMEM, "rows: %llu ids",
		    (unsigned long long)n);
	m->ids = ids;
	uint32_t *count = realloc(m->count, n * sizeof(*count));
	if (count == NULL)
		return pti_err_set(PT_ENOMEM, "rows: %llu ids",
		    (unsigned long long)n);
	m->count = count;
	m->room = n;
	return 0;
}

void pti_worker_rows_free(pt_worker *w)
{
	for (int i = 0; i < PT_MAX_TABLES; i++) {
		free(w->memo[i].ids);
		free(w->memo[i].count);
	}
}

// One server's request: its rows in the order they go.
typedef struct rows_part {
	uint32_t k, kp;  // unique ids pushed, pulled
	float *words;    // the payload (pti_rows_words)
	uint64_t n;
} rows_part;

static void put_u64(float *words, uint64_t i, uint64_t v)
{
	memcpy((uint8_t *)words + 8 * i, &v, 8);
}

// rows_call runs one rows request of table tb against every server
// concerned. push: the k unique ids pushed (ascending, with summed
// gradients g, k x dim); pull: the kp unique ids pulled (ascending), whose
// counts and values go to cnt and val (kp and kp x dim) in that order.
static int rows_call(pt_worker *w, uint32_t tb, int64_t step,
    const uint64_t *push, const float *g, uint64_t k, const uint64_t *pull,
    uint32_t *cnt, float *val, uint64_t kp)
{
	uint32_t S = w->job.servers, dim = w->l.tables[tb].dim;
	const pti_row_memo *m = &w->memo[tb];
	rows_part *p = calloc(S, sizeof(*p));
	uint32_t *home = malloc((k + kp + 1) * sizeof(*home));
	pt_req *q = NULL;
	int rv = 0;
	if (p == NULL || home == NULL) {
		rv = pti_err_set(PT_ENOMEM, "rows");
		goto out;
	}
	for (uint64_t i = 0; i < k + kp; i++) {
		uint64_t id = i < k ? push[i] : pull[i - k];
		home[i] = pti_layout_row_server(id, S);
		if (i < k)
			p[home[i]].k++;
		else
			p[home[i]].kp++;
	}
	for (uint32_t s = 0; s < S; s++) {
		rows_part *r = &p[s];
		if (r->k > PTI_ROWS_MAX || r->kp > PTI_ROWS_MAX) {
			rv = pti_err_set(PT_EINVAL, "rows: more than %u rows "
			    "of one server in one request", PTI_ROWS_MAX);
			goto out;
		}
		r->n = pti_rows_words(r->k, r->kp, dim);
		if (r->n > 0 && (r->words = malloc(r->n * 4)) == NULL) {
			rv = pti_err_set(PT_ENOMEM, "rows");
			goto out;
		}
	}
	// Each server's rows in the order given (ascending): the ids, the
	// counts they were read at, the gradients, then the pulled ids.
	// fill counts what each server has so far: pushed, then pulled.
	uint64_t *fill = calloc(S, sizeof(*fill));
	if (fill == NULL) {
		rv = pti_err_set(PT_ENOMEM, "rows");
		goto out;
	}
	for (uint64_t i = 0; i < k + kp; i++) {
		rows_part *r = &p[home[i]];
		uint64_t at = fill[home[i]]++;
		if (i >= k) {
			put_u64(r->words + pti_rows_words(r->k, 0, dim),
			    at - r->k, pull[i - k]);
			continue;
		}
		uint32_t since = memo_since(m, push[i]);
		put_u64(r->words, at, push[i]);
		memcpy(r->words + 2 * (uint64_t)r->k + at, &since, 4);
		memcpy(r->words + 3 * (uint64_t)r->k + at * dim, g + i * dim,
		    (size_t)dim * 4);
	}
	free(fill);
	int lockstep = w->mode->rows_lockstep && step >= 0;
	uint32_t *sent = calloc(S, sizeof(*sent)); // part index + 1
	if (sent == NULL || (rv = pti_call_new(w->client, &q)) != 0) {
		free(sent);
		rv = rv != 0 ? rv : pti_err_set(PT_ENOMEM, "rows");
		goto out;
	}
	uint32_t parts = 0;
	for (uint32_t s = 0; s < S && rv == 0; s++) {
		rows_part *r = &p[s];
		if (!lockstep && r->k == 0 && r->kp == 0)
			continue;
		pti_hdr h;
		pti_hdr_init(&h, PT_OP_ROWS, PT_ROLE_WORKER, w->rank);
		h.has |= PTI_H_ROWS;
		h.table = tb;
		h.k = r->k;
		h.kp = r->kp;
		if (step >= 0) {
			h.has |= PTI_H_STEP;
			h.step = step;
		}
		rv = pti_call_send(q, s, &h, r->words, r->n, NULL);
		sent[s] = ++parts;
	}
	if (rv == 0)
		rv = pti_call_wait(q, NULL);
	// Each server's pulled rows, in the order its ids were sent: the
	// ascending order of pull, split by server.
	uint64_t *next = rv == 0 ? calloc(S, sizeof(*next)) : NULL;
	if (rv == 0 && next == NULL)
		rv = pti_err_set(PT_ENOMEM, "rows");
	for (uint32_t s = 0; s < S && rv == 0; s++) {
		if (sent[s] == 0 || p[s].kp == 0)
			continue;
		const pti_hdr *h = pti_call_reply(q, sent[s] - 1);
		if (!(h->has & PTI_H_ROWS) || h->kp != p[s].kp ||
		    h->n != (uint64_t)p[s].kp * (1 + dim))
			rv = pti_err_set(PT_EPROTO, "server %u sent %u rows of "
			    "table %s, not %u", s, h->kp, w->l.tables[tb].name,
			    p[s].kp);
	}
	for (uint64_t i = 0; i < kp && rv == 0; i++) {
		uint32_t s = home[k + i];
		const uint8_t *b = pti_call_payload(q, sent[s] - 1);
		uint64_t j = next[s]++;
		memcpy(&cnt[i], b + 4 * j, 4);
		memcpy(val + i * dim, b + 4 * ((uint64_t)p[s].kp + j * dim),
		    (size_t)dim * 4);
	}
	free(next);
	free(sent);
out:
	pti_call_free(q);
	for (uint32_t s = 0; p != NULL && s < S; s++)
		free(p[s].words);
	free(p);
	free(home);
	return rv;
}

// rows_table checks table tb of w.
static int rows_table(const pt_worker *w, int table)
{
	if (table < 0 || (uint32_t)table >= w->l.n_tables)
		return pti_err_set(PT_ERANGE, "table %d does not exist (the "
		    "job has %u)", table, w->l.n_tables);
	return 0;
}

int pt_pushpull_rows(pt_worker *w, int table, int64_t step, uint64_t n,
    const uint64_t *ids, const float *grads, uint64_t n_pull,
    const uint64_t *pull_ids, float *vals)
{
	int rv = rows_table(w, table);
	if (rv != 0)
		return rv;
	if ((n > 0 && (ids == NULL || grads == NULL)) ||
	    (n_pull > 0 && (pull_ids == NULL || vals == NULL)))
		return pti_err_set(PT_EINVAL, "rows: ids and their rows must "
		    "be given");
	if (n > 0 && step < 0)
		return pti_err_set(PT_EINVAL, "rows: a push needs its step "
		    "(>= 0)");
	uint32_t dim = w->l.tables[table].dim;
	id_at *ps = sorted(ids, n, &rv), *qs = NULL;
	if (rv == 0)
		qs = sorted(pull_ids, n_pull, &rv);
	uint64_t *push = NULL, *pull = NULL, k = 0, kp = 0;
	float *g = NULL, *val = NULL;
	uint32_t *cnt = NULL;
	if (rv == 0 && ((n > 0 && ((push = malloc(n * 8)) == NULL ||
				      (g = malloc(n * dim * 4)) == NULL)) ||
			   (n_pull > 0 &&
			       ((pull = malloc(n_pull * 8)) == NULL ||
				   (val = malloc(n_pull * dim * 4)) == NULL ||
				   (cnt = malloc(n_pull * 4)) == NULL))))
		rv = pti_err_set(PT_ENOMEM, "rows");
	// Unique ids; a pushed id's gradients summed in the order given.
	for (uint64_t i = 0; i < n && rv == 0; i++) {
		const float *gi = grads + ps[i].at * dim;
		if (i > 0 && ps[i].id == ps[i - 1].id) {
			for (uint32_t e = 0; e < dim; e++)
				g[(k - 1) * dim + e] += gi[e];
			continue;
		}
		push[k] = ps[i].id;
		memcpy(g + k * dim, gi, (size_t)dim * 4);
		k++;
	}
	for (uint64_t i = 0; i < n_pull && rv == 0; i++)
		if (i == 0 || qs[i].id != qs[i - 1].id)
			pull[kp++] = qs[i].id;
	if (rv == 0)
		rv = rows_call(w, (uint32_t)table, step, push, g, k, pull, cnt,
		    val, kp);
	// The values to every place each id was asked for, and what this
	// worker read them at to the memo.
	pti_row_memo *m = &w->memo[table];
	if (rv == 0 && kp > 0 && (rv = memo_room(m, kp)) == 0) {
		memcpy(m->ids, pull, kp * 8);
		memcpy(m->count, cnt, kp * 4);
		m->n = kp;
		for (uint64_t i = 0, u = 0; i < n_pull; i++) {
			if (i > 0 && qs[i].id != qs[i - 1].id)
				u++;
			memcpy(vals + qs[i].at * dim, val + u * dim,
			    (size_t)dim * 4);
		}
	}
	free(ps);
	free(qs);
	free(push);
	free(pull);
	free(g);
	free(val);
	free(cnt);
	return rv;
}

int pt_pull_rows(pt_worker *w, int table, uint64_t n, const uint64_t *ids,
    float *vals)
{
	return pt_pushpull_rows(w, table, -1, 0, NULL, NULL, n, ids, vals);
}

int pt_push_rows(pt_worker *w, int table, int64_t step, uint64_t n,
    const uint64_t *ids, const float *grads)
{
	return pt_pushpull_rows(w, table, step, n, ids, grads, 0, NULL, NULL);
}

// ---------------------------------------------------------------- all rows

#define SCAN_PAGE 65536 // rows a scan asks a server for at a time

// scan_server appends server s's rows of table tb to the arrays of *got
// (rows), grown as needed.
static int scan_server(pt_worker *w, uint32_t tb, uint32_t s, uint64_t **ids,
    float **vals, uint64_t *got, uint64_t *room)
{
	uint32_t dim = w->l.tables[tb].dim;
	uint64_t from = 0;
	for (;;) {
		pti_hdr h;
		pt_req *q = NULL;
		pti_hdr_init(&h, PT_OP_ROWS, PT_ROLE_WORKER, w->rank);
		h.has |= PTI_H_ROWS | PTI_H_SCAN;
		h.table = tb;
		h.from = from;
		h.lim = SCAN_PAGE;
		int rv = pti_call_new(w->client, &q);
		if (rv == 0)
			rv = pti_call_send(q, s, &h, NULL, 0, NULL);
		if (rv == 0)
			rv = pti_call_wait(q, NULL);
		const pti_hdr *r = rv == 0 ? pti_call_reply(q, 0) : NULL;
		const uint8_t *b = rv == 0 ? pti_call_payload(q, 0) : NULL;
		uint64_t k = r != NULL ? r->kp : 0;
		if (rv == 0 && (!(r->has & PTI_H_SCAN) || k > SCAN_PAGE ||
				   r->n != k * (3 + dim) || (k > 0 && !b)))
			rv = pti_err_set(PT_EPROTO, "server %u sent a scan of "
			    "%llu rows of table %s that does not add up", s,
			    (unsigned long long)k, w->l.tables[tb].name);
		if (rv == 0 && *got + k > *room) {
			uint64_t want = 2 * (*got + k);
			uint64_t *i2 = realloc(*ids, want * sizeof(**ids));
			if (i2 != NULL)
				*ids = i2;
			float *v2 = i2 != NULL ? realloc(*vals, want * dim *
						     sizeof(float)) : NULL;
			if (v2 != NULL) {
				*vals = v2;
				*room = want;
			} else {
				rv = pti_err_set(PT_ENOMEM, "rows of table %s",
				    w->l.tables[tb].name);
			}
		}
		for (uint64_t i = 0; rv == 0 && i < k; i++) {
			memcpy(*ids + *got + i, b + 8 * i, 8);
			memcpy(*vals + (*got + i) * dim, b + 4 * (3 * k + i * dim),
			    (size_t)dim * 4);
		}
		int more = rv == 0 && r->lim != 0;
		from = r != NULL ? r->from : 0;
		*got += rv == 0 ? k : 0;
		pti_call_free(q);
		if (rv != 0 || !more)
			return rv;
	}
}

int pti_worker_rows_all(pt_worker *w, int table, uint64_t **ids,
    float **vals, uint64_t *n)
{
	int rv = rows_table(w, table);
	uint64_t got = 0, room = 0;
	*ids = NULL;
	*vals = NULL;
	*n = 0;
	for (uint32_t s = 0; rv == 0 && s < w->job.servers; s++)
		rv = scan_server(w, (uint32_t)table, s, ids, vals, &got, &room);
	// The servers' rows, each ascending, merged into one order.
	uint32_t dim = rv == 0 ? w->l.tables[table].dim : 0;
	id_at *order = rv == 0 ? sorted(*ids, got, &rv) : NULL;
	float *by_id = order != NULL ? malloc(got * dim * sizeof(float)) : NULL;
	if (rv == 0 && got > 0 && by_id == NULL)
		rv = pti_err_set(PT_ENOMEM, "rows of table %d", table);
	if (rv == 0 && got > 0) {
		for (uint64_t i = 0; i < got; i++) {
			(*ids)[i] = order[i].id;
			memcpy(by_id + i * dim, *vals + order[i].at * dim,
			    (size_t)dim * 4);
		}
		free(*vals);
		*vals = by_id;
		by_id = NULL;
	}
	free(order);
	free(by_id);
	if (rv != 0) {
		free(*ids);
		free(*vals);
		*ids = NULL;
		*vals = NULL;
		return rv;
	}
	*n = got;
	return 0;
}
