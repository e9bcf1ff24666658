// ps/local.c - a server without sockets, for the fuzzing harness and the
// in-process policy tests: the same state, the same request handler and
// the same connection bookkeeping as a served one, driven by calls
// (server.h, pti_local_*).
#include <stdio.h>
#include <stdlib.h>

#include "common/err.h"
#include "common/job.h"
#include "ps/server.h"
#include "ps/server_impl.h"

struct pti_local_server {
	ps_server s;
	pti_jobopt job; // the caller's job's options, warm-up included
	char gone_workers[PT_PATH_MAX];
};

int pti_local_open(pti_local_server **out, const pti_config *c,
    const pti_layout *l)
{
	pti_local_server *ls = calloc(1, sizeof(*ls));
	int rv;
	if (ls == NULL)
		return pti_err_set(PT_ENOMEM, "local server");
	ps_server *s = &ls->s;
	pt_job *j;
	if ((rv = pti_job_from_config(&j, c)) != 0) {
		free(ls);
		return rv;
	}
	ls->job = j->o;
	snprintf(ls->gone_workers, sizeof(ls->gone_workers), "%s",
	    c->gone_workers);
	pti_server_proc p = {c->rank, "", "", ls->gone_workers,
	    (int)c->supervised, 0};
	rv = pti_server_init(s, &ls->job, &p, l != NULL ? l : &j->l, NULL);
	pt_job_free(j);
	if (rv != 0)
		goto fail;
	s->n_ctx = PS_N_CTX(c->job.workers);
	if ((s->ctxs = calloc(s->n_ctx, sizeof(ps_ctx))) == NULL) {
		rv = pti_err_set(PT_ENOMEM, "local server");
		goto fail;
	}
	for (uint32_t i = 0; i < s->n_ctx; i++) {
		s->ctxs[i].s = s;
		if (nng_aio_alloc(&s->ctxs[i].aio, NULL, NULL) != 0) {
			rv = pti_err_set(PT_ENOMEM, "local server");
			goto fail;
		}
	}
	*out = ls;
	return 0;
fail:
	pti_server_fini(s);
	free(ls);
	return rv;
}

// local_settle frees what woken or released contexts hold: nobody reads
// those replies here.
static void local_settle(ps_ctx *wake)
{
	while (wake != NULL) {
		ps_ctx *w = wake;
		wake = w->next;
		nng_msg_free(nng_aio_get_msg(w->aio));
		nng_aio_set_msg(w->aio, NULL);
		w->state = CTX_RECV;
	}
}

int pti_local_connect(pti_local_server *ls, uint32_t pipe)
{
	ps_ctx *wake = NULL;
	ps_peer *q = pti_peer_add(&ls->s, pipe);
	// What gave way is closed at once here (the serve loop's work).
	while (ls->s.n_evict > 0)
		pti_server_pipe_removed(&ls->s, ls->s.evict[--ls->s.n_evict],
		    &wake);
	local_settle(wake);
	if (q != NULL)
		snprintf(q->name, sizeof(q->name), "local connection %u", pipe);
	return q != NULL ? 0 : PT_ERANGE;
}

void pti_local_disconnect(pti_local_server *ls, uint32_t pipe)
{
	ps_ctx *wake = NULL;
	pti_server_pipe_removed(&ls->s, pipe, &wake);
	local_settle(wake);
}

nng_msg *pti_local_request(pti_local_server *ls, uint32_t pipe, nng_msg *m)
{
	ps_server *s = &ls->s;
	ps_ctx *x = NULL, *wake = NULL;
	for (uint32_t i = 0; i < s->n_ctx && x == NULL; i++)
		if (s->ctxs[i].state != CTX_WAIT)
			x = &s->ctxs[i];
	if (x == NULL)
		return NULL; // every context parked: nng would queue it
	nng_pipe p = NNG_PIPE_INITIALIZER;
	p.id = pipe;
	nng_msg_set_pipe(m, p);
	x->stop_after = 0;
	nng_msg *mine; // the handler takes its request
	if (nng_msg_dup(&mine, m) != 0)
		return NULL;
	nng_msg *reply = pti_server_handle(s, x, mine, &wake);
	local_settle(wake);
	return reply;
}

uint64_t pti_local_replies_filled(const pti_local_server *ls)
{
	return ls->s.replies_filled;
}

void pti_local_close(pti_local_server *ls)
{
	if (ls == NULL)
		return;
	pti_server_fini(&ls->s); // frees what the contexts still hold
	free(ls);
}
