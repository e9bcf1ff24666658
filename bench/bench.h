// bench/bench.h - what the benchmark programs that time nng share: the
// clock, dying with a message, the ipc buffers pstrain's own connections
// get, and the raw nng REQ/REP exchange pstrain is measured against.
// Static functions: each program takes what it uses.
#ifndef PT_BENCH_BENCH_H
#define PT_BENCH_BENCH_H

#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nng/nng.h>
#include <nng/protocol/reqrep0/rep.h>
#include <nng/protocol/reqrep0/req.h>

#include "common/clock.h"
#include "common/err.h" // pt_errmsg
#include "common/transport.h" // pti_transport_widen

static inline double now_us(void)
{
	return pti_clock_s() * 1e6;
}

// die says "PROG: what: the error" (nng's when nng is set, else
// pstrain's) and exits 1. BENCH_PROG names the program.
static inline void die(const char *what, int rv, int nng)
{
	fprintf(stderr, "%s: %s: %s\n", BENCH_PROG, what,
	    nng ? nng_strerror(rv) : pt_errmsg(rv));
	exit(1);
}

// widen_cb gives a raw socket's ipc connections the buffers pstrain's
// own get (a pipe-notify callback).
static inline void widen_cb(nng_pipe p, nng_pipe_ev ev, void *arg)
{
	(void)ev, (void)arg;
	(void)pti_transport_widen(p);
}

// The raw side: a REP socket that answers every request with a reply of
// `bytes` (comm: the request's size, as a server answers a pushpull with
// the values; rows: the rows' bytes, as it answers their ids; 0: as long
// as the request, for requests in chunks). It is served the way nng
// serves best (and as pstrain's server is): contexts whose aio callback
// receives, answers and receives again on nng's own threads, with no
// hand-over to a thread of ours; one context answers one request at a
// time, RAW_CTXS answer as many at once (as pstrain's server takes a
// worker's pieces).
#define RAW_CTXS 8

typedef struct raw_ctx {
	nng_ctx ctx;
	nng_aio *aio;
	size_t bytes;
	int sending;
} raw_ctx;

typedef struct raw_srv {
	nng_socket sock;
	raw_ctx c[RAW_CTXS];
	int n;
} raw_srv;

static inline void raw_cb(void *arg)
{
	raw_ctx *r = arg;
	if (nng_aio_result(r->aio) != 0) {
		if (r->sending)
			nng_msg_free(nng_aio_get_msg(r->aio));
		return; // closed
	}
	if (r->sending) {
		r->sending = 0;
		nng_ctx_recv(r->ctx, r->aio);
		return;
	}
	nng_msg *m = nng_aio_get_msg(r->aio), *rep;
	size_t bytes = r->bytes ? r->bytes : nng_msg_len(m);
	if (nng_msg_alloc(&rep, bytes) != 0) {
		nng_msg_free(m);
		return;
	}
	memcpy(nng_msg_body(rep), nng_msg_body(m),
	    nng_msg_len(m) < bytes ? nng_msg_len(m) : bytes);
	nng_msg_free(m);
	r->sending = 1;
	nng_aio_set_msg(r->aio, rep);
	nng_ctx_send(r->ctx, r->aio);
}

// raw_round: the bytes come from the caller's buffer, as a sender's must
// (one copy at each end: into the request here, into the reply there).
static inline double raw_round(nng_socket req, const float *g, size_t bytes,
    int iters)
{
	double t0 = 0;
	for (int i = -iters / 10 - 1; i < iters; i++) {
		if (i == 0)
			t0 = now_us();
		nng_msg *m, *rep;
		int rv;
		if ((rv = nng_msg_alloc(&m, bytes)) != 0)
			die("raw round trip", rv, 1);
		memcpy(nng_msg_body(m), g, bytes);
		if ((rv = nng_sendmsg(req, m, 0)) != 0 ||
		    (rv = nng_recvmsg(req, &rep, 0)) != 0)
			die("raw round trip", rv, 1);
		nng_msg_free(rep);
	}
	return (now_us() - t0) / iters;
}

// raw_open_ctxs starts a raw REP server of `bytes` replies on url (a
// tcp ":0" port is resolved into url) with n contexts (at most
// RAW_CTXS), its ipc connections widened when `widen` is set.
static inline void raw_open_ctxs(raw_srv *r, char *url, size_t cap,
    size_t bytes, int widen, int n)
{
	nng_listener l;
	int rv;
	memset(r, 0, sizeof(*r));
	r->n = n < RAW_CTXS ? n : RAW_CTXS;
	if ((rv = nng_rep0_open(&r->sock)) != 0 ||
	    (widen && (rv = nng_pipe_notify(r->sock, NNG_PIPE_EV_ADD_PRE,
			   widen_cb, NULL)) != 0) ||
	    (rv = nng_listener_create(&l, r->sock, url)) != 0 ||
	    (rv = nng_socket_set_size(r->sock, NNG_OPT_RECVMAXSZ, 0)) != 0 ||
	    (rv = nng_listener_start(l, 0)) != 0)
		die("raw listen", rv, 1);
	if (strncmp(url, "tcp://", 6) == 0) {
		nng_sockaddr sa;
		nng_listener_get_addr(l, NNG_OPT_LOCADDR, &sa);
		snprintf(url, cap, "tcp://127.0.0.1:%u",
		    (unsigned)ntohs(sa.s_in.sa_port));
	}
	for (int i = 0; i < r->n; i++) {
		raw_ctx *c = &r->c[i];
		c->bytes = bytes;
		if ((rv = nng_ctx_open(&c->ctx, r->sock)) != 0 ||
		    (rv = nng_aio_alloc(&c->aio, raw_cb, c)) != 0)
			die("raw context", rv, 1);
		nng_ctx_recv(c->ctx, c->aio);
	}
}

// raw_open: raw_open_ctxs with one context.
static inline void raw_open(raw_srv *r, char *url, size_t cap, size_t bytes,
    int widen)
{
	raw_open_ctxs(r, url, cap, bytes, widen, 1);
}

static inline void raw_close(raw_srv *r)
{
	// A reply handed to nng_ctx_send after the aio was stopped is
	// refused without a callback: it is still ours.
	for (int i = 0; i < r->n; i++)
		nng_aio_stop(r->c[i].aio);
	nng_close(r->sock);
	for (int i = 0; i < r->n; i++) {
		if (r->c[i].sending)
			nng_msg_free(nng_aio_get_msg(r->c[i].aio));
		nng_aio_free(r->c[i].aio);
	}
}

// raw_dial connects a REQ socket to a raw server, widened as it is.
static inline void raw_dial(nng_socket *req, const char *url, int widen)
{
	int rv;
	if ((rv = nng_req0_open(req)) != 0 ||
	    (widen && (rv = nng_pipe_notify(*req, NNG_PIPE_EV_ADD_POST,
			   widen_cb, NULL)) != 0) ||
	    (rv = nng_socket_set_size(*req, NNG_OPT_RECVMAXSZ, 0)) != 0 ||
	    (rv = nng_dial(*req, url, NULL, 0)) != 0)
		die("raw dial", rv, 1);
}

#endif // PT_BENCH_BENCH_H
