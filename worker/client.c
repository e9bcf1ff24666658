// worker/client.c - parallel requests to every server (see client.h).
#include "client.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nng/nng.h>
#include <nng/protocol/reqrep0/req.h>

#include "clock.h"
#include "config.h"
#include "err.h"
#include "transport.h"

// Pipes one link follows at once: one, or two while a server that came
// back is connected before the old connection's removal is told.
#define LINK_PIPES 4

enum { LINK_IDLE, LINK_SEND, LINK_RECV };

typedef struct client_link {
	pt_client *c;
	uint32_t rank; // the server's
	char url[512];
	nng_socket sock;
	nng_aio *aio;
	int state;
	int rv;
	int up;   // connected pipes: how many ids pipes[] holds
	uint32_t pipes[LINK_PIPES]; // their nng pipe ids
	int lost; // the connection closed while a request was under way
	nng_msg *reply;
	uint64_t lo, hi; // its shard, from hello
	int64_t ver;     // version of the values last received from it
	nng_dialer dialer;
	double dialed;   // when its dialer was started
} client_link;

// A server missing this long gets a new dialer. nng's dialer stops
// redialing for good when a connection attempt ends in NNG_ECLOSED,
// which a server killed mid-handshake can cause: the worker would then
// wait out --rpc-timeout for a server that is back and listening.
#define CLIENT_REDIAL_S 5.0

// A request unanswered this long is reported, and again as often, so
// that a server that hangs (rather than dies) is named while workers wait.
#define CLIENT_NOTE_S 30.0

struct pt_client {
	uint32_t role, rank, n;
	pt_secret secret;
	double timeout_s;
	client_link *links; // (n)
	pthread_mutex_t mu;
	pthread_cond_t cv;
	uint32_t pending;
};

static void link_finish(client_link *k, int rv)
{
	pt_client *c = k->c;
	pthread_mutex_lock(&c->mu);
	k->rv = rv;
	k->state = LINK_IDLE;
	if (--c->pending == 0)
		pthread_cond_broadcast(&c->cv);
	pthread_mutex_unlock(&c->mu);
}

// link_pipe_cb follows the connection to one server. When it closes with
// a request under way, that request can no longer be answered: cancel it
// now rather than wait out the timeout. Pipes are told apart by id: a
// pipe that closes before it was ever added (a dial that met a server
// going down) must not count against the one that is up, or the link
// would wait for a server that is there.
static void link_pipe_cb(nng_pipe p, nng_pipe_ev ev, void *arg)
{
	client_link *k = arg;
	pt_client *c = k->c;
	uint32_t id = (uint32_t)nng_pipe_id(p);
	int cancel = 0, at = -1;
	pthread_mutex_lock(&c->mu);
	for (int i = 0; i < k->up; i++)
		if (k->pipes[i] == id)
			at = i;
	if (ev == NNG_PIPE_EV_ADD_POST) {
		if (at < 0 && k->up < LINK_PIPES)
			k->pipes[k->up++] = id;
	} else if (at >= 0) {
		k->pipes[at] = k->pipes[--k->up];
		cancel = k->state != LINK_IDLE;
		k->lost |= cancel;
	}
	pthread_cond_broadcast(&c->cv);
	pthread_mutex_unlock(&c->mu);
	if (cancel)
		nng_aio_cancel(k->aio);
}

static void link_cb(void *arg)
{
	client_link *k = arg;
	int rv = nng_aio_result(k->aio);
	if (k->state == LINK_SEND) {
		if (rv != 0) {
			nng_msg_free(nng_aio_get_msg(k->aio));
			link_finish(k, rv);
			return;
		}
		k->state = LINK_RECV;
		nng_recv_aio(k->sock, k->aio);
		return;
	}
	if (rv == 0)
		k->reply = nng_aio_get_msg(k->aio);
	link_finish(k, rv);
}

void pt_client_close(pt_client *c)
{
	if (c == NULL)
		return;
	for (uint32_t i = 0; i < c->n && c->links; i++) {
		client_link *k = &c->links[i];
		if (k->aio != NULL) {
			nng_aio_stop(k->aio);
			nng_aio_free(k->aio);
		}
		if (k->reply != NULL)
			nng_msg_free(k->reply);
		nng_close(k->sock);
	}
	free(c->links);
	pthread_mutex_destroy(&c->mu);
	pthread_cond_destroy(&c->cv);
	free(c);
}

int pt_client_open(pt_client **out, const char *urls, uint32_t role,
    uint32_t rank, double timeout_s, const pt_secret *secret)
{
	pt_client *c = calloc(1, sizeof(*c));
	if (c == NULL)
		return pti_err_set(PT_ENOMEM, "client");
	pthread_mutex_init(&c->mu, NULL);
	pthread_cond_init(&c->cv, NULL);
	c->role = role;
	c->rank = rank;
	c->secret = *secret;
	c->timeout_s = timeout_s;
	uint32_t n = 1;
	for (const char *p = urls; *p; p++)
		n += *p == ',';
	c->links = calloc(n, sizeof(client_link));
	if (c->links == NULL) {
		free(c);
		return pti_err_set(PT_ENOMEM, "client");
	}
	const char *p = urls;
	for (uint32_t i = 0; i < n; i++) {
		client_link *k = &c->links[i];
		const char *e = strchr(p, ',');
		size_t len = e ? (size_t)(e - p) : strlen(p);
		int rv;
		c->n = i + 1;
		k->c = c;
		k->rank = i;
		if (len == 0 || len >= sizeof(k->url)) {
			pt_client_close(c);
			return pti_err_set(PT_EINVAL,
			    "--connect: server %u's address is empty or too "
			    "long", i);
		}
		memcpy(k->url, p, len);
		p = e ? e + 1 : p + len;
		if ((rv = nng_req0_open(&k->sock)) != 0 ||
		    (rv = nng_aio_alloc(&k->aio, link_cb, k)) != 0) {
			pt_client_close(c);
			return pti_err_set(PT_ETRANSPORT, "client: %s",
			    nng_strerror(rv));
		}
		// A resent push would be applied twice: requests are sent
		// once, and a lost reply shows as a timeout instead.
		nng_socket_set_ms(k->sock, NNG_OPT_REQ_RESENDTIME,
		    NNG_DURATION_INFINITE);
		nng_aio_set_timeout(k->aio, (nng_duration)(timeout_s * 1000));
		// Redial a server that went away every 50 ms at first, the
		// pause doubling up to 2 s.
		nng_socket_set_ms(k->sock, NNG_OPT_RECONNMINT, 50);
		nng_socket_set_ms(k->sock, NNG_OPT_RECONNMAXT, 2000);
		if ((rv = nng_pipe_notify(k->sock, NNG_PIPE_EV_ADD_POST,
			 link_pipe_cb, k)) != 0 ||
		    (rv = nng_pipe_notify(k->sock, NNG_PIPE_EV_REM_POST,
			 link_pipe_cb, k)) != 0) {
			pt_client_close(c);
			return pti_err_set(PT_ETRANSPORT, "client: %s",
			    nng_strerror(rv));
		}
		k->dialed = pti_clock_s();
		if ((rv = pti_transport_dial(k->sock, k->url, &k->dialer,
			 NNG_FLAG_NONBLOCK)) != 0) {
			pt_client_close(c);
			return pti_err_set(PT_ETRANSPORT,
			    "server %u at %s: %s", i, k->url,
			    nng_strerror(rv));
		}
	}
	*out = c;
	return 0;
}

uint32_t pt_client_servers(const pt_client *c)
{
	return c->n;
}

// client_missing lists the servers not connected into buf; returns how
// many. Called with the lock held.
static uint32_t client_missing(const pt_client *c, char *buf, size_t size)
{
	uint32_t n = 0;
	size_t used = 0;
	buf[0] = '\0';
	for (uint32_t i = 0; i < c->n; i++) {
		if (c->links[i].up > 0)
			continue;
		if (used < size)
			used += (size_t)snprintf(buf + used, size - used,
			    "%sserver %u at %s", n ? ", " : "", i,
			    c->links[i].url);
		n++;
	}
	return n;
}

// client_redial gives every server missing for CLIENT_REDIAL_S since its
// dialer started a new dialer. Called with the lock, which it drops while
// dialing: closing a dialer can run link_pipe_cb.
static void client_redial(pt_client *c)
{
	double now = pti_clock_s();
	for (uint32_t i = 0; i < c->n; i++) {
		client_link *k = &c->links[i];
		if (k->up > 0 || now - k->dialed < CLIENT_REDIAL_S)
			continue;
		k->dialed = now;
		nng_dialer old = k->dialer;
		pthread_mutex_unlock(&c->mu);
		nng_dialer_close(old);
		nng_dialer d;
		int rv = pti_transport_dial(k->sock, k->url, &d,
		    NNG_FLAG_NONBLOCK);
		pthread_mutex_lock(&c->mu);
		if (rv == 0)
			k->dialer = d;
		else
			fprintf(stderr, "client: dialing server %u at %s again: "
			    "%s\n", i, k->url, nng_strerror(rv));
	}
}

int pt_client_wait(pt_client *c, const char *who, double timeout_s)
{
	char missing[1024];
	double start = pti_clock_s(), said = 0;
	pthread_mutex_lock(&c->mu);
	while (client_missing(c, missing, sizeof(missing)) > 0) {
		client_redial(c);
		double waited = pti_clock_s() - start;
		if (waited >= timeout_s) {
			pthread_mutex_unlock(&c->mu);
			return pti_err_set(PT_ETIMEDOUT,
			    "%s gave up after %.0fs waiting for %s", who,
			    waited, missing);
		}
		// Quiet for a normal start-up; then every 5 s.
		if (waited >= said + 5.0 || (said == 0 && waited >= 1.0)) {
			fprintf(stderr, "%s: waiting for %s to come back "
			    "(%.0fs so far, at most %.0fs)\n", who, missing,
			    waited, timeout_s);
			said = waited;
		}
		pti_cond_wait_ms(&c->cv, &c->mu, 100);
	}
	pthread_mutex_unlock(&c->mu);
	if (said > 0)
		fprintf(stderr, "%s: every server is connected again after "
		    "%.1fs\n", who, pti_clock_s() - start);
	return 0;
}

// client_rpc sends msgs[i] to server i, all at once, takes the messages,
// and waits for every reply. It then decodes each into hdrs[i] with its
// payload in pays[i]; on failure every reply is freed.
static int client_rpc(pt_client *c, nng_msg **msgs, pti_hdr *hdrs,
    const void **pays)
{
	pthread_mutex_lock(&c->mu);
	c->pending = c->n;
	for (uint32_t i = 0; i < c->n; i++) {
		client_link *k = &c->links[i];
		k->state = LINK_SEND;
		k->reply = NULL;
		// Not connected: fail at once (the caller waits and rejoins)
		// rather than let nng queue it for a restarted server.
		k->lost = k->up == 0;
	}
	pthread_mutex_unlock(&c->mu);
	for (uint32_t i = 0; i < c->n; i++) {
		client_link *k = &c->links[i];
		nng_aio_set_msg(k->aio, msgs[i]);
		nng_send_aio(k->sock, k->aio);
		if (k->lost)
			nng_aio_cancel(k->aio);
	}
	pthread_mutex_lock(&c->mu);
	double start = pti_clock_s(), note = start + CLIENT_NOTE_S;
	while (c->pending > 0) {
		pti_cond_wait_ms(&c->cv, &c->mu, 1000);
		if (c->pending == 0 || pti_clock_s() < note)
			continue;
		note += CLIENT_NOTE_S;
		for (uint32_t i = 0; i < c->n; i++)
			if (c->links[i].state != LINK_IDLE)
				fprintf(stderr, "%s %u: no answer yet to %s from "
				    "server %u at %s (%.0fs so far, at most "
				    "%.0fs)\n", c->role == PT_ROLE_WORKER ?
				    "worker" : "client", c->rank,
				    pti_op_name(hdrs[i].op), i, c->links[i].url,
				    pti_clock_s() - start, c->timeout_s);
	}
	pthread_mutex_unlock(&c->mu);

	int rv = 0;
	for (uint32_t i = 0; i < c->n && rv == 0; i++) {
		client_link *k = &c->links[i];
		const char *op = pti_op_name(hdrs[i].op);
		if (k->rv != 0 && (k->lost || k->rv == NNG_ECONNRESET)) {
			rv = pti_err_set(PT_ECLOSED,
			    "%s to server %u at %s: the connection closed (the "
			    "server stopped or died)", op, i, k->url);
			break;
		}
		if (k->rv != 0) {
			rv = pti_err_set(k->rv == NNG_ETIMEDOUT ? PT_ETIMEDOUT
								: PT_ETRANSPORT,
			    "%s to server %u at %s: %s", op, i, k->url,
			    nng_strerror(k->rv));
			break;
		}
		uint32_t want = hdrs[i].op;
		if ((rv = pti_msg_decode(&hdrs[i], &pays[i], k->reply)) != 0) {
			rv = pti_err_set(rv, "reply from server %u to %s: %s",
			    i, op, pt_errmsg(rv));
			break;
		}
		if (hdrs[i].status != 0)
			rv = pti_err_set(hdrs[i].status < PT_NERR
					     ? (int)hdrs[i].status
					     : PT_EPROTO,
			    "%s", hdrs[i].msg);
		else if (hdrs[i].op != want)
			rv = pti_err_set(PT_EPROTO,
			    "server %u answered %s with %s", i, op,
			    pti_op_name(hdrs[i].op));
	}
	if (rv != 0)
		for (uint32_t i = 0; i < c->n; i++)
			if (c->links[i].reply != NULL) {
				nng_msg_free(c->links[i].reply);
				c->links[i].reply = NULL;
			}
	return rv;
}

static void client_release(pt_client *c)
{
	for (uint32_t i = 0; i < c->n; i++) {
		nng_msg_free(c->links[i].reply);
		c->links[i].reply = NULL;
	}
}

// client_build makes one request per server; on failure frees the ones
// made. hdrs[i] is left as the template so that replies can be checked.
static int client_build(pt_client *c, nng_msg **msgs, pti_hdr *hdrs,
    const float *grad)
{
	for (uint32_t i = 0; i < c->n; i++) {
		client_link *k = &c->links[i];
		const float *pay = grad ? grad + k->lo : NULL;
		int rv = pti_msg_encode(&msgs[i], &hdrs[i], pay, k->hi - k->lo);
		if (rv != 0) {
			while (i-- > 0)
				nng_msg_free(msgs[i]);
			return rv;
		}
	}
	return 0;
}

int pt_client_simple(pt_client *c, uint32_t op, pti_hdr *replies)
{
	nng_msg *msgs[c->n];
	pti_hdr hdrs[c->n];
	const void *pays[c->n];
	int rv;
	for (uint32_t i = 0; i < c->n; i++)
		pti_hdr_init(&hdrs[i], op, c->role, c->rank);
	if ((rv = client_build(c, msgs, hdrs, NULL)) != 0 ||
	    (rv = client_rpc(c, msgs, hdrs, pays)) != 0)
		return rv;
	if (replies != NULL)
		memcpy(replies, hdrs, c->n * sizeof(pti_hdr));
	client_release(c);
	return 0;
}

// client_prove asks every server for its challenge and fills each hello
// template's proof of the secret: an HMAC over that server's nonce and
// who this client says it is.
static int client_prove(pt_client *c, pti_hdr *hellos)
{
	pti_hdr ch[c->n];
	int rv = pt_client_simple(c, PT_OP_CHALLENGE, ch);
	if (rv != 0)
		return rv;
	for (uint32_t i = 0; i < c->n; i++) {
		if (!(ch[i].has & PTI_H_NONCE))
			return pti_err_set(PT_EPROTO, "server %u at %s sent no "
			    "challenge", i, c->links[i].url);
		hellos[i].has |= PTI_H_MAC;
		pti_auth_mac(&c->secret, ch[i].nonce, c->role, c->rank, i,
		    (hellos[i].has & PTI_H_LAYOUT) ? hellos[i].layout_hash : 0,
		    hellos[i].mac);
	}
	return 0;
}

int pt_client_hello(pt_client *c, const pt_layout *l, int mode,
    uint32_t workers, int64_t step, int64_t *start)
{
	int64_t at = -1;
	nng_msg *msgs[c->n];
	pti_hdr hdrs[c->n];
	const void *pays[c->n];
	int rv = 0;
	for (uint32_t i = 0; i < c->n; i++) {
		pti_hdr_init(&hdrs[i], PT_OP_HELLO, c->role, c->rank);
		hdrs[i].has |= PTI_H_LAYOUT | PTI_H_STEP;
		hdrs[i].step = step;
		hdrs[i].layout_hash = pt_layout_hash(l);
		hdrs[i].n_params = l->n_params;
	}
	if ((rv = client_prove(c, hdrs)) != 0 ||
	    (rv = client_build(c, msgs, hdrs, NULL)) != 0 ||
	    (rv = client_rpc(c, msgs, hdrs, pays)) != 0)
		return rv;
	for (uint32_t i = 0; i < c->n && rv == 0; i++) {
		const pti_hdr *h = &hdrs[i];
		pt_range r = pt_layout_shard(l, i, c->n);
		if (!(h->has & PTI_H_SHARD) || h->server_rank != i ||
		    h->n_servers != c->n || h->lo != r.lo || h->hi != r.hi)
			rv = pti_err_set(PT_EINVAL,
			    "server %u at %s holds [%llu, %llu) as server %u of "
			    "%u; this worker expected [%llu, %llu) of %u "
			    "servers", i, c->links[i].url,
			    (unsigned long long)h->lo, (unsigned long long)h->hi,
			    h->server_rank, h->n_servers,
			    (unsigned long long)r.lo, (unsigned long long)r.hi,
			    c->n);
		else if ((int)h->mode != mode || h->n_workers != workers)
			rv = pti_err_set(PT_EINVAL,
			    "server %u runs %s with %u workers; this worker "
			    "was told %s with %u", i,
			    pt_mode_name((int)h->mode), h->n_workers,
			    pt_mode_name(mode), workers);
		c->links[i].lo = h->lo;
		c->links[i].hi = h->hi;
		c->links[i].ver = h->ver;
		int64_t go = (h->has & PTI_H_STEP) ? h->step : 0;
		// Sync: go on from the lowest open step. A server that has
		// closed it already drops this worker's push for it; one that
		// has not may be waiting for exactly that push, since the
		// hello made this worker live there again, so waiting for the
		// servers to agree could wait forever.
		if (i == 0 || (mode == PT_MODE_SYNC ? go < at : go > at))
			at = go;
	}
	client_release(c);
	if (rv == 0)
		*start = at;
	return rv;
}

// client_take copies each server's values into params and sums up the
// versions and staleness the replies carry.
static int client_take(pt_client *c, float *params, const pti_hdr *hdrs,
    const void **pays, pt_client_step *info)
{
	pt_client_step st = {INT64_MAX, 0, 0.0, hdrs[0].lr};
	for (uint32_t i = 0; i < c->n; i++) {
		client_link *k = &c->links[i];
		const pti_hdr *h = &hdrs[i];
		if (!(h->has & PTI_H_RANGE) || h->off != k->lo ||
		    h->n != k->hi - k->lo || pays[i] == NULL)
			return pti_err_set(PT_EPROTO,
			    "server %u sent values for [%llu, +%llu), not its "
			    "shard [%llu, %llu)", i, (unsigned long long)h->off,
			    (unsigned long long)h->n, (unsigned long long)k->lo,
			    (unsigned long long)k->hi);
		memcpy(params + k->lo, pays[i], h->n * sizeof(float));
		k->ver = h->ver;
		if (h->ver < st.ver_min)
			st.ver_min = h->ver;
		if (h->staleness > st.stale_max)
			st.stale_max = h->staleness;
		st.stale_mean += (double)h->staleness / c->n;
	}
	if (info != NULL)
		*info = st;
	return 0;
}

int pt_client_pull(pt_client *c, float *params, int64_t want_ver,
    pt_client_step *info)
{
	nng_msg *msgs[c->n];
	pti_hdr hdrs[c->n];
	const void *pays[c->n];
	int rv;
	for (uint32_t i = 0; i < c->n; i++) {
		pti_hdr_init(&hdrs[i], PT_OP_PULL, c->role, c->rank);
		hdrs[i].has |= PTI_H_RANGE;
		hdrs[i].off = c->links[i].lo;
		hdrs[i].n = c->links[i].hi - c->links[i].lo;
		if (want_ver >= 0) {
			hdrs[i].has |= PTI_H_VER;
			hdrs[i].ver = want_ver;
		}
	}
	if ((rv = client_build(c, msgs, hdrs, NULL)) != 0 ||
	    (rv = client_rpc(c, msgs, hdrs, pays)) != 0)
		return rv;
	rv = client_take(c, params, hdrs, pays, info);
	client_release(c);
	return rv;
}

int pt_client_pushpull(pt_client *c, float *params, const float *grad,
    int64_t step, pt_client_step *info)
{
	nng_msg *msgs[c->n];
	pti_hdr hdrs[c->n];
	const void *pays[c->n];
	int rv;
	for (uint32_t i = 0; i < c->n; i++) {
		pti_hdr_init(&hdrs[i], PT_OP_PUSHPULL, c->role, c->rank);
		hdrs[i].has |= PTI_H_STEP | PTI_H_VER | PTI_H_RANGE;
		hdrs[i].step = step;
		hdrs[i].ver = c->links[i].ver;
		hdrs[i].off = c->links[i].lo;
	}
	if ((rv = client_build(c, msgs, hdrs, grad)) != 0 ||
	    (rv = client_rpc(c, msgs, hdrs, pays)) != 0)
		return rv;
	rv = client_take(c, params, hdrs, pays, info);
	client_release(c);
	return rv;
}
