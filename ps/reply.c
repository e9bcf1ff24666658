// ps/reply.c - replies and the wait list: a reply encoded into a kept
// request where one can carry it (a spare, or the one whose values are
// the shard's already), an error reply that names the server and the
// op, requests parked on the wait list, and woken with their replies
// once the policy allows, then sent. Everything here but the sending
// (pti_server_send_woken) runs under the server lock.
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "common/testhook.h"
#include "ps/policy.h"

#define SERVER_LOG_ERRORS 20 // rejected requests logged in full, at most

// ---------------------------------------------------------------- replies

void pti_server_spare(ps_server *s, nng_msg *m)
{
	if (m != NULL && s->n_spare < s->job->workers + 1) {
		s->spare[s->n_spare++] = m;
		return;
	}
	if (m != NULL && m == s->filled)
		s->filled = NULL;
	nng_msg_free(m);
}

// spare_filled takes out of the spares the one whose values are already
// pay[0, n) of the shard as they are now (a policy's fill, pti_server_act), with
// where they lie in it in *own; NULL when no spare is.
static nng_msg *spare_filled(ps_server *s, const float *pay, uint64_t n,
    float **own)
{
	nng_msg *m = s->filled;
	if (m == NULL || s->filled_ver != s->version || s->filled_n != n ||
	    pay != s->params + s->filled_off)
		return NULL;
	s->filled = NULL;
	for (uint32_t i = 0; i < s->n_spare; i++)
		if (s->spare[i] == m) {
			s->spare[i] = s->spare[--s->n_spare];
			*own = s->filled_pay;
			return m;
		}
	return NULL;
}

nng_msg *pti_server_reply(ps_server *s, pti_hdr *h, const float *pay,
    uint64_t n)
{
	nng_msg *m = NULL;
	float *own;
	h->has |= PTI_H_STATUS;
	// A request that holds these values already carries them as they
	// are: only its header is written.
	if (pay != NULL && (m = spare_filled(s, pay, n, &own)) != NULL) {
		if (pti_msg_encode_in(m, h, own, n) == 0) {
			s->replies_filled++;
			return m;
		}
		nng_msg_free(m);
		m = NULL;
	}
	// Many values go in a kept request that holds them without growing
	// (its header had PTI_HDR_ROOM bytes: room for any reply's).
	if (pay != NULL && s->n_spare > 0 &&
	    pti_msg_roomy(s->spare[s->n_spare - 1], n)) {
		m = s->spare[--s->n_spare];
		if (m == s->filled)
			s->filled = NULL; // its values are written over
		if (pti_msg_encode_in(m, h, pay, n) == 0)
			return m;
		nng_msg_free(m);
		m = NULL;
	}
	if (pti_msg_encode(&m, h, pay, n) != 0)
		return NULL; // out of memory: the peer times out
	return m;
}

nng_msg *pti_server_error(ps_server *s, const pti_hdr *req, int code,
    const char *what)
{
	pti_hdr h;
	pti_hdr_init(&h, req->op, PT_ROLE_SERVER, s->rank);
	h.status = (uint32_t)code;
	snprintf(h.msg, sizeof(h.msg), "server %u: %s: %s", s->rank,
	    pti_op_name(req->op), what);
	s->rejected++;
	if (s->rejected <= SERVER_LOG_ERRORS)
		pti_log(PT_LOG_WARN, "%s (from %s %u)", h.msg,
		    req->role == PT_ROLE_WORKER ? "worker" : "peer",
		    req->rank);
	return pti_server_reply(s, &h, NULL, 0);
}

// pti_server_values answers with the shard's values in [off, off + n), of
// version ver (the shard's, or the next one for a range that holds it
// already: policy->ahead); lr >= 0 also reports the learning rate and
// staleness of the push it follows.
nng_msg *pti_server_values(ps_server *s, uint32_t op, uint64_t off,
    uint64_t n, int64_t ver, double lr, int64_t stale, int shm)
{
	pti_hdr h;
	pti_hdr_init(&h, op, PT_ROLE_SERVER, s->rank);
	h.has |= PTI_H_VER | PTI_H_RANGE;
	h.ver = ver;
	h.off = s->lo + off;
	if (lr >= 0) {
		h.has |= PTI_H_LR | PTI_H_STALE;
		h.lr = lr;
		h.staleness = stale;
	}
	if (shm && s->shm_mine.p != NULL) {
		h.has |= PTI_H_SHM; // where the worker reads them: no payload
		h.shm = 1;
		h.n = n;
		return pti_server_reply(s, &h, NULL, 0);
	}
	return pti_server_reply(s, &h, s->params + off, n);
}
// wake_when moves the parked requests that may be answered to *wake:
// those key() allows, or with `ahead` those whose range holds the next
// version already while the step is open.
static void wake_when(ps_server *s, ps_ctx **wake, int ahead)
{
	int64_t key = s->policy->key(s), ver = s->version + (ahead != 0);
	ps_ctx **pp = &s->waiting;
	while (*pp != NULL) {
		ps_ctx *x = *pp;
		if (x->r_op == PT_OP_ROWS || // their tables wake them
		    (ahead ? x->wait_ver != ver ||
				 !s->policy->ahead(s, x->r_off, x->r_n)
			   : x->wait_ver > key)) {
			pp = &x->next;
			continue;
		}
		*pp = x->next;
		nng_aio_set_msg(x->aio, pti_server_values(s, x->r_op, x->r_off,
					    x->r_n, ver, x->r_lr, x->r_stale,
					    x->r_shm));
		x->next = *wake;
		*wake = x;
	}
}

void pti_server_wake(ps_server *s, ps_ctx **wake)
{
	wake_when(s, wake, 0);
}

void pti_server_wake_ahead(ps_server *s, ps_ctx **wake)
{
	wake_when(s, wake, 1);
}

void pti_server_send_woken(ps_ctx *wake)
{
	while (wake != NULL) {
		ps_ctx *w = wake;
		wake = w->next;
		nng_msg *m = nng_aio_get_msg(w->aio);
		nng_aio_set_msg(w->aio, NULL);
		w->send(w, m);
	}
}

static long drop_nth; // 0: none
static atomic_long replies_sent;
static pthread_once_t drop_once = PTHREAD_ONCE_INIT;

static void drop_read(void)
{
	const char *e = pti_test_hook("PSTRAIN_TEST_DROP_REPLY");
	drop_nth = e != NULL ? atol(e) : 0;
}

int pti_server_drop_due(uint32_t rank)
{
	pthread_once(&drop_once, drop_read);
	long drop = drop_nth;
	if (drop <= 0 || atomic_fetch_add(&replies_sent, 1) + 1 != drop)
		return 0;
	pti_log(PT_LOG_WARN, "server %u: test hook: dropping reply %ld", rank,
	    drop);
	return 1;
}

// ---------------------------------------------------------------- parking

// pti_park_full: whether connection pipe has PS_PARK_MAX requests parked, as
// many as the contexts kept for each worker allow (a worker that asks for
// more is refused rather than let stop the server receiving).
int pti_park_full(const ps_server *s, uint32_t pipe)
{
	uint32_t k = 0;
	for (const ps_ctx *x = s->waiting; x != NULL; x = x->next)
		k += x->r_pipe == pipe;
	return k >= PS_PARK_MAX;
}

void pti_park(ps_server *s, ps_ctx *x, uint32_t op, int64_t ver,
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

int pti_park_rows(ps_server *s, ps_ctx *x, uint32_t tb, int64_t ver,
    nng_msg *m)
{
	if (pti_park_full(s, x->r_pipe))
		return PT_ESTATE;
	pti_park(s, x, PT_OP_ROWS, ver, 0, 0, -1, 0);
	x->r_table = tb;
	x->r_keep = m;
	return 0;
}
