// train/ring.c - the ring all-reduce (see ring.h).
#include "train/ring.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <nng/nng.h>
#include <nng/protocol/pair1/pair.h>

#include "common/clock.h"
#include "common/config.h"
#include "common/err.h"
#include "common/later.h"
#include "common/proto.h"
#include "common/transport.h"

struct pti_ring {
	uint32_t rank, n, left, right;
	nng_socket in, out; // from the left neighbour; to the right one
	int in_open, out_open;
	nng_pipe admitted; // the left neighbour's proven connection
	nng_dialer dialer; // to the right neighbour
	pti_secret secret;
	uint64_t hash, sent;
	double timeout_s;
	int joined, broken; // the ring formed; a sum failed on it since
	atomic_int later_rv; // a send held by --send-delay failed: nng's error
	char url_in[PT_URLS_MAX], url_out[PT_URLS_MAX];
};

static void ring_widen_cb(nng_pipe p, nng_pipe_ev ev, void *arg)
{
	(void)ev;
	(void)arg;
	(void)pti_transport_widen(p);
}

// ring_url copies the i-th of the comma-separated urls into out (size
// PT_URLS_MAX); PT_EINVAL when there is none.
static int ring_url(char *out, const char *urls, uint32_t i, uint32_t n)
{
	const char *p = urls;
	for (uint32_t k = 0; k < i && p != NULL; k++)
		if ((p = strchr(p, ',')) != NULL)
			p++;
	size_t len = p ? strcspn(p, ",") : 0;
	if (len == 0)
		return pti_err_set(PT_EINVAL, "--connect holds no address for "
		    "worker %u of the ring of %u (it lists every worker's, "
		    "by rank)", i, n);
	snprintf(out, PT_URLS_MAX, "%.*s", (int)len, p);
	return 0;
}

// ring_later is a chunk on the delay line (common/later.h).
typedef struct ring_later {
	pti_ring *g;
	nng_msg *m;
} ring_later;

// ring_send_later sends a chunk held by --send-delay; its error is
// reported by the next send.
static void ring_send_later(void *arg)
{
	ring_later *l = arg;
	int rv = nng_sendmsg(l->g->out, l->m, 0);
	if (rv != 0) {
		nng_msg_free(l->m);
		atomic_store(&l->g->later_rv, rv);
	}
	free(l);
}

// ring_send sends h (with n floats at pay) to the right neighbour; with
// flags NNG_FLAG_NONBLOCK, not yet being connected is no error. With
// --send-delay a chunk (flags 0) waits on the delay line.
static int ring_send(pti_ring *g, pti_hdr *h, const float *pay, uint64_t n,
    int flags)
{
	nng_msg *m;
	ring_later *l;
	int rv = atomic_exchange(&g->later_rv, 0);
	if (rv == 0) {
		if ((rv = pti_msg_encode(&m, h, pay, n)) != 0)
			return rv;
		if (flags == 0 && pti_later_on() &&
		    (l = malloc(sizeof(*l))) != NULL) {
			*l = (ring_later){g, m};
			pti_later(ring_send_later, l);
			g->sent += n * sizeof(float);
			return 0;
		}
		if ((rv = nng_sendmsg(g->out, m, flags)) != 0)
			nng_msg_free(m);
	}
	if (rv != 0) {
		if (rv == NNG_EAGAIN && (flags & NNG_FLAG_NONBLOCK))
			return 0;
		return pti_err_set(rv == NNG_ETIMEDOUT ? PT_ETIMEDOUT
				   : rv == NNG_ECLOSED ? PT_ECLOSED
						       : PT_ETRANSPORT,
		    "ring: worker %u: sending %s to worker %u (%s): %s",
		    g->rank, pti_op_name(h->op), g->right, g->url_out,
		    nng_strerror(rv));
	}
	g->sent += n * sizeof(float);
	return 0;
}

// ring_recv takes the next message from socket s (the neighbour `peer`)
// into *m, decoded into h and *pay; the caller frees *m.
static int ring_recv(pti_ring *g, nng_socket s, uint32_t peer, nng_msg **m,
    pti_hdr *h, const void **pay)
{
	int rv = nng_recvmsg(s, m, 0);
	if (rv != 0)
		return pti_err_set(rv == NNG_ETIMEDOUT ? PT_ETIMEDOUT
				   : rv == NNG_ECLOSED ? PT_ECLOSED
						       : PT_ETRANSPORT,
		    "ring: worker %u: nothing from worker %u in %.0f s: %s",
		    g->rank, peer, g->timeout_s, nng_strerror(rv));
	if ((rv = pti_msg_decode(h, pay, *m)) != 0) {
		nng_msg_free(*m);
		return pti_err_set(rv, "ring: worker %u: from worker %u's "
		    "side: %s", g->rank, peer, pt_errmsg(rv));
	}
	return 0;
}

// ---------------------------------------------------------------- joining

// Each link proves the secret both ways in three messages (PROTOCOL.md):
// the dialer's challenge (its nonce), the listener's answer (its proof
// over that nonce, and a nonce of its own), the dialer's proof over it.
// Each worker says its challenge again (at gaps doubling from
// RING_RETRY_MS to RING_RETRY_MAX_MS) until it is
// answered: the right neighbour may not be connected yet, and a message
// can be lost with a connection that the listener's pair socket turns
// away (it takes one at a time). The listener answers a connection's
// challenges with one nonce, and starts again on a new connection.

// A segment goes in messages of at most RING_CHUNK floats, RING_AHEAD of
// them sent before the first one from the left is taken and one more
// after each taken: the neighbours' sockets carry the next chunks while
// this worker adds the one it took. The sums are elementwise, so the
// chunking changes no bit. The sockets hold RING_AHEAD + 2 messages each
// way (ring_open), so neither end blocks sending while the other does.
#define RING_CHUNK ((uint64_t)256 * 1024)
#define RING_AHEAD 2

#define RING_RETRY_MS 20 // the dialer's challenge, again, this often
// The listening side's receive queue. The sender never runs more than
// RING_AHEAD + 1 chunks ahead of what this side took, so the queue holds
// that many at most while the ring sums; the room beyond is for joining:
// nng 1.5.2's pair1 can crash the receiving thread (SIGSEGV in
// pair1_sock_recv, reading the aio of a pipe already gone) when a
// connection closes while the queue is full, its pipe's receive callback
// marking a message ready after the pipe's stop cleared it. A peer says
// its challenge again while it waits, and the side it says it to may not
// be reading (busy with its own right neighbour's answer): a stranger
// saying it every 20 ms for the 3 s of its --rpc-timeout filled 64 slots,
// and worker 0 died with SIGSEGV in libnng when the stranger went
// (test_ar_stranger_refused). So the gaps between challenges double up
// to RING_RETRY_MAX_MS (ring_pace), and the queue holds 4096: 2,000 s of
// challenges unread, past any join's timeout.
#define RING_RECVBUF 4096
#define RING_RETRY_MAX_MS 500
#define RING_NO_REDIAL_MS (24 * 3600 * 1000) // after joining

static void ring_mac(const pti_ring *g, const uint8_t *nonce,
    uint32_t from, uint32_t to, uint8_t mac[PT_MAC_LEN])
{
	pti_auth_mac(&g->secret, nonce, PT_ROLE_PEER, from, to, g->hash, mac);
}

// ring_pace says when a challenge said again is due: RING_RETRY_MS after
// the first, then at gaps that double up to RING_RETRY_MAX_MS.
typedef struct ring_pace {
	double next, gap; // seconds
} ring_pace;

static int ring_pace_due(ring_pace *p)
{
	double now = pti_clock_s();
	if (p->gap == 0) { // the first call: the gaps start
		p->gap = RING_RETRY_MS / 1e3;
		p->next = now + p->gap;
		return 0;
	}
	if (now < p->next)
		return 0;
	p->gap = p->gap * 2 < RING_RETRY_MAX_MS / 1e3 ? p->gap * 2
						       : RING_RETRY_MAX_MS / 1e3;
	p->next = now + p->gap;
	return 1;
}

// ring_pipe_gone tells whether m came on a connection that has closed
// since: the pair socket may still hold what it received.
static int ring_pipe_gone(nng_msg *m)
{
	nng_sockaddr sa;
	return nng_pipe_get_addr(nng_msg_get_pipe(m), NNG_OPT_REMADDR, &sa) !=
	       0;
}

// ring_refuse closes the connection m came on: not the left neighbour.
static void ring_refuse(pti_ring *g, nng_msg *m, const char *why)
{
	fprintf(stderr, "ring: worker %u: refused a connection on %s: %s\n",
	    g->rank, g->url_in, why);
	if (nng_pipe_id(nng_msg_get_pipe(m)) == nng_pipe_id(g->admitted))
		g->admitted = (nng_pipe)NNG_PIPE_INITIALIZER;
	nng_pipe_close(nng_msg_get_pipe(m));
	nng_msg_free(m);
}

// ring_answer answers challenge h, which came on m's connection.
static int ring_answer(pti_ring *g, nng_msg *m, const pti_hdr *h,
    uint8_t nonce[PT_NONCE_LEN])
{
	nng_pipe p = nng_msg_get_pipe(m);
	int rv;
	nng_msg_free(m);
	if (nng_pipe_id(p) != nng_pipe_id(g->admitted)) {
		if ((rv = pti_random(nonce, PT_NONCE_LEN)) != 0)
			return rv;
		g->admitted = p; // to prove itself over this nonce
	}
	pti_hdr a;
	pti_hdr_init(&a, PT_OP_HELLO, PT_ROLE_PEER, g->rank);
	a.has = PTI_H_NONCE | PTI_H_MAC;
	ring_mac(g, h->nonce, g->rank, g->left, a.mac);
	memcpy(a.nonce, nonce, PT_NONCE_LEN);
	nng_msg *r;
	if ((rv = pti_msg_encode(&r, &a, NULL, 0)) != 0)
		return rv;
	nng_msg_set_pipe(r, p);
	if (nng_sendmsg(g->in, r, NNG_FLAG_NONBLOCK) != 0)
		nng_msg_free(r); // gone meanwhile, or busy: it asks again
	return 0;
}

// ring_listen serves the listening side until the left neighbour has
// proven itself (proof set) or, with proof unset, until a first
// challenge is answered: the left neighbour's, or a stranger's whose
// proof will fail. Meanwhile it says `again` (when not NULL) to the
// right again at ring_pace's gaps.
static int ring_listen(pti_ring *g, double until, int proof,
    uint8_t nonce[PT_NONCE_LEN], pti_hdr *again)
{
	ring_pace pace = {0, 0};
	if (again != NULL)
		(void)ring_pace_due(&pace);
	while (pti_clock_s() < until) {
		nng_msg *m;
		pti_hdr h;
		const void *pay;
		int rv = ring_recv(g, g->in, g->left, &m, &h, &pay);
		if (rv == PT_ETIMEDOUT) { // nothing yet
			if (again != NULL && ring_pace_due(&pace) &&
			    (rv = ring_send(g, again, NULL, 0,
				 NNG_FLAG_NONBLOCK)) != 0)
				return rv;
			continue;
		}
		if (rv == PT_EPROTO)
			continue; // a stranger's garbage: decode said so
		if (rv != 0)
			return rv;
		if (ring_pipe_gone(m)) {
			// Left over from a connection gone (a stranger's, or
			// one turned away): answering it would forget the
			// nonce the live one proves itself over.
			nng_msg_free(m);
			continue;
		}
		uint8_t want[PT_MAC_LEN];
		ring_mac(g, nonce, g->left, g->rank, want);
		if (h.op == PT_OP_CHALLENGE && h.role == PT_ROLE_PEER &&
		    h.rank == g->left && (h.has & PTI_H_NONCE)) {
			if ((rv = ring_answer(g, m, &h, nonce)) != 0 || !proof)
				return rv;
		} else if (h.op == PT_OP_HELLO && h.rank == g->left &&
			   (h.has & PTI_H_MAC) &&
			   nng_pipe_id(nng_msg_get_pipe(m)) ==
			       nng_pipe_id(g->admitted) &&
			   pti_auth_equal(h.mac, want, PT_MAC_LEN)) {
			nng_msg_free(m);
			return 0;
		} else {
			ring_refuse(g, m, h.op == PT_OP_HELLO
					      ? "its proof of the job secret "
						"is wrong"
					      : "not the left neighbour's "
						"challenge");
		}
	}
	return pti_err_set(PT_ETIMEDOUT, "ring: worker %u: worker %u did not "
	    "join on %s in %.0f s", g->rank, g->left, g->url_in,
	    g->timeout_s);
}

// ring_challenge waits for the right neighbour's answer to challenge h
// (into *m, *a), said once already, saying it again at ring_pace's gaps.
static int ring_challenge(pti_ring *g, pti_hdr *h, double until,
    nng_msg **m, pti_hdr *a)
{
	int rv;
	ring_pace pace = {0, 0};
	(void)ring_pace_due(&pace);
	for (;;) {
		const void *pay;
		if (ring_pace_due(&pace) && (rv = ring_send(g, h, NULL, 0,
						  NNG_FLAG_NONBLOCK)) != 0)
			break;
		rv = ring_recv(g, g->out, g->right, m, a, &pay);
		if (rv != PT_ETIMEDOUT)
			break;
		if (pti_clock_s() >= until) {
			rv = pti_err_set(PT_ETIMEDOUT, "ring: worker %u: no "
			    "answer from worker %u at %s in %.0f s", g->rank,
			    g->right, g->url_out, g->timeout_s);
			break;
		}
	}
	return rv;
}

static int ring_join_short(pti_ring *g);

// ring_join runs both links' proofs: this worker's challenge to the
// right, the first challenge from the left answered, the right's answer
// checked and proven, the left's proof checked (a stranger's connection
// is closed, and the left side starts again).
static int ring_join(pti_ring *g)
{
	nng_duration full = (nng_duration)(g->timeout_s * 1000);
	nng_socket_set_ms(g->in, NNG_OPT_RECVTIMEO, RING_RETRY_MS);
	nng_socket_set_ms(g->out, NNG_OPT_RECVTIMEO, RING_RETRY_MS);
	int rv = ring_join_short(g);
	nng_socket_set_ms(g->in, NNG_OPT_RECVTIMEO, full);
	nng_socket_set_ms(g->out, NNG_OPT_RECVTIMEO, full);
	return rv;
}

// ring_join_short is ring_join with RING_RETRY_MS receive timeouts.
static int ring_join_short(pti_ring *g)
{
	double until = pti_clock_s() + g->timeout_s;
	uint8_t mine[PT_NONCE_LEN], theirs[PT_NONCE_LEN];
	pti_hdr h, a;
	nng_msg *m;
	int rv;
	pti_hdr_init(&h, PT_OP_CHALLENGE, PT_ROLE_PEER, g->rank);
	h.has = PTI_H_NONCE;
	if ((rv = pti_random(mine, PT_NONCE_LEN)) != 0)
		return rv;
	memcpy(h.nonce, mine, PT_NONCE_LEN);
	// Said before listening, and again meanwhile (the right neighbour
	// may be listening for its own left first: with W = 2 each is the
	// other's left), and again while waiting for its answer.
	if ((rv = ring_send(g, &h, NULL, 0, NNG_FLAG_NONBLOCK)) != 0 ||
	    (rv = ring_listen(g, until, 0, theirs, &h)) != 0 ||
	    (rv = ring_challenge(g, &h, until, &m, &a)) != 0)
		return rv;
	uint8_t want[PT_MAC_LEN];
	ring_mac(g, mine, g->right, g->rank, want);
	int ok = a.op == PT_OP_HELLO && a.rank == g->right &&
		 (a.has & PTI_H_MAC) && (a.has & PTI_H_NONCE) &&
		 pti_auth_equal(a.mac, want, PT_MAC_LEN);
	nng_msg_free(m);
	if (!ok)
		return pti_err_set(PT_EAUTH, "ring: worker %u: %s does not "
		    "prove the job secret as worker %u", g->rank, g->url_out,
		    g->right);
	pti_hdr_init(&h, PT_OP_HELLO, PT_ROLE_PEER, g->rank);
	h.has = PTI_H_MAC;
	ring_mac(g, a.nonce, g->rank, g->right, h.mac);
	if ((rv = ring_send(g, &h, NULL, 0, 0)) != 0)
		return rv;
	return ring_listen(g, until, 1, theirs, NULL);
}

int pti_ring_listen(pti_ring **out, const char *listen, uint32_t rank,
    uint32_t n, const pti_secret *secret, uint64_t hash, double timeout_s)
{
	pti_ring *g = calloc(1, sizeof(*g));
	int rv = 0;
	if (g == NULL)
		return pti_err_set(PT_ENOMEM, "ring");
	g->rank = rank;
	g->n = n;
	g->left = (rank + n - 1) % n;
	g->right = (rank + 1) % n;
	g->secret = *secret;
	g->hash = hash;
	g->timeout_s = timeout_s;
	snprintf(g->url_in, sizeof(g->url_in), "%s", listen);
	if (n == 1) {
		*out = g;
		return 0;
	}
	nng_duration ms = (nng_duration)(timeout_s * 1000);
	nng_listener l;
	if ((rv = nng_pair1_open(&g->in)) == 0) {
		g->in_open = 1;
		nng_pipe_notify(g->in, NNG_PIPE_EV_ADD_POST, ring_widen_cb, g);
		nng_socket_set_ms(g->in, NNG_OPT_RECVTIMEO, ms);
		nng_socket_set_ms(g->in, NNG_OPT_SENDTIMEO, ms);
		nng_socket_set_int(g->in, NNG_OPT_RECVBUF, RING_RECVBUF);
		rv = pti_transport_listen(&l, g->in, listen);
	}
	if (rv != 0) {
		rv = pti_err_set(PT_ETRANSPORT, "ring: worker %u: %s: %s",
		    rank, listen, nng_strerror(rv));
		pti_ring_close(g);
		return rv;
	}
	// The address the others dial: the port chosen for ":0".
	pti_transport_bound_url(l, listen, g->url_in, sizeof(g->url_in));
	*out = g;
	return 0;
}

const char *pti_ring_addr(const pti_ring *g)
{
	return g->url_in;
}

int pti_ring_join(pti_ring *g, const char *urls)
{
	int rv;
	if (g->n == 1)
		return 0;
	if ((rv = ring_url(g->url_out, urls, g->right, g->n)) != 0)
		return rv;
	nng_duration ms = (nng_duration)(g->timeout_s * 1000);
	if ((rv = nng_pair1_open(&g->out)) == 0) {
		g->out_open = 1;
		nng_pipe_notify(g->out, NNG_PIPE_EV_ADD_POST, ring_widen_cb,
		    g);
		nng_socket_set_ms(g->out, NNG_OPT_RECVTIMEO, ms);
		nng_socket_set_ms(g->out, NNG_OPT_SENDTIMEO, ms);
		nng_socket_set_int(g->out, NNG_OPT_SENDBUF, RING_AHEAD + 2);
		// The neighbours start together: redial soon (nng backs off
		// from 100 ms, a second lost joining).
		nng_socket_set_ms(g->out, NNG_OPT_RECONNMINT, RING_RETRY_MS);
		nng_socket_set_ms(g->out, NNG_OPT_RECONNMAXT,
		    5 * RING_RETRY_MS);
		rv = pti_transport_dial(g->out, g->url_out, &g->dialer,
		    NNG_FLAG_NONBLOCK);
	}
	if (rv != 0)
		return pti_err_set(PT_ETRANSPORT, "ring: worker %u: %s: %s",
		    g->rank, g->url_out, nng_strerror(rv));
	if ((rv = ring_join(g)) != 0)
		return rv;
	g->joined = 1;
	// Joined, the link is not dialed again: a neighbour that goes
	// away has broken the ring (and nng 1.5.2 could hang closing a
	// socket whose dialer is busy redialing a peer that is gone).
	nng_dialer_set_ms(g->dialer, NNG_OPT_RECONNMINT, RING_NO_REDIAL_MS);
	nng_dialer_set_ms(g->dialer, NNG_OPT_RECONNMAXT, RING_NO_REDIAL_MS);
	return 0;
}

int pti_ring_open(pti_ring **out, const char *urls, uint32_t rank,
    uint32_t n, const pti_secret *secret, uint64_t hash, double timeout_s)
{
	char own[PT_URLS_MAX], right[PT_URLS_MAX];
	int rv;
	// Both addresses are checked before anything listens.
	if (n > 1 && ((rv = ring_url(own, urls, rank, n)) != 0 ||
			 (rv = ring_url(right, urls, (rank + 1) % n, n)) != 0))
		return rv;
	if ((rv = pti_ring_listen(out, n > 1 ? own : "", rank, n, secret,
		 hash, timeout_s)) != 0)
		return rv;
	if ((rv = pti_ring_join(*out, urls)) != 0) {
		pti_ring_close(*out);
		*out = NULL;
	}
	return rv;
}

// ring_farewell: nng_close drops the messages a socket still queues, and
// a worker's last chunks may still be queued when its sum returns (it had
// every chunk of its left neighbour's by then, not its right neighbour
// every chunk of its). So before closing, each worker sends a farewell
// after its last chunk, answers its left neighbour's farewell (which came
// after all of that one's chunks) on the same link, and waits for its
// right neighbour's answer: the right neighbour then holds everything.
// Each wait lasts at most RING_FAREWELL_MS; a neighbour already gone (or
// not closing yet) only costs that wait.
#define RING_FAREWELL_MS 2000
#define RING_BYE (-1) // the step a farewell and its answer carry

static int ring_is_bye(const pti_hdr *h, uint32_t from)
{
	return h->op == PT_OP_RING && (h->has & PTI_H_STEP) &&
	    h->step == RING_BYE && h->rank == from;
}

static void ring_farewell(pti_ring *g)
{
	pti_hdr h;
	nng_msg *m;
	const void *pay;
	nng_socket_set_ms(g->in, NNG_OPT_RECVTIMEO, RING_FAREWELL_MS);
	nng_socket_set_ms(g->in, NNG_OPT_SENDTIMEO, RING_FAREWELL_MS);
	nng_socket_set_ms(g->out, NNG_OPT_RECVTIMEO, RING_FAREWELL_MS);
	nng_socket_set_ms(g->out, NNG_OPT_SENDTIMEO, RING_FAREWELL_MS);
	pti_hdr_init(&h, PT_OP_RING, PT_ROLE_PEER, g->rank);
	h.has = PTI_H_STEP;
	h.step = RING_BYE;
	if (ring_send(g, &h, NULL, 0, NNG_FLAG_NONBLOCK) != 0)
		return;
	if (ring_recv(g, g->in, g->left, &m, &h, &pay) == 0) {
		int bye = ring_is_bye(&h, g->left);
		nng_msg_free(m);
		pti_hdr_init(&h, PT_OP_RING, PT_ROLE_PEER, g->rank);
		h.has = PTI_H_STEP;
		h.step = RING_BYE;
		if (bye && pti_msg_encode(&m, &h, NULL, 0) == 0 &&
		    nng_sendmsg(g->in, m, NNG_FLAG_NONBLOCK) != 0)
			nng_msg_free(m);
	}
	if (ring_recv(g, g->out, g->right, &m, &h, &pay) == 0)
		nng_msg_free(m);
}

// ring_shut closes the sockets and frees g.
static void ring_shut(pti_ring *g)
{
	if (g->in_open)
		nng_close(g->in);
	if (g->out_open)
		nng_close(g->out);
	memset(&g->secret, 0, sizeof(g->secret));
	free(g);
}

// A closer: ring_shut on a thread of its own, waited for at most
// RING_CLOSE_S. nng 1.5.2 can hang in nng_close, and every close of the
// process after it: when a pipe closes between the arrival of a
// message's length and its body, its ipc transport resubmits the body's
// read on an aio already closed (nni_aio_begin fails and nothing calls
// back), so the protocol's receive never completes and nng's reaper
// waits for it forever in pair1_pipe_stop (seen with gdb on a hung
// ring_test; later nng reworked aio_begin). A neighbour's message still
// arriving as this worker closes is enough; more likely on a busy
// machine.
#define RING_CLOSE_S 2
typedef struct ring_closer {
	pti_ring *g;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int done, owners; // owners: the waiter and the thread; last frees
} ring_closer;

static void ring_closer_drop(ring_closer *k)
{
	pthread_mutex_lock(&k->mu);
	int last = --k->owners == 0;
	pthread_mutex_unlock(&k->mu);
	if (last) {
		pthread_mutex_destroy(&k->mu);
		pthread_cond_destroy(&k->cv);
		free(k);
	}
}

static void *ring_closer_main(void *arg)
{
	ring_closer *k = arg;
	ring_shut(k->g);
	pthread_mutex_lock(&k->mu);
	k->done = 1;
	pthread_cond_signal(&k->cv);
	pthread_mutex_unlock(&k->mu);
	ring_closer_drop(k);
	return NULL;
}

void pti_ring_close(pti_ring *g)
{
	pthread_t th;
	if (g == NULL)
		return;
	pti_later_flush(); // the chunks still held go before the farewell
	if (g->n > 1 && g->joined && !g->broken)
		ring_farewell(g);
	ring_closer *k = calloc(1, sizeof(*k));
	if (k == NULL)
		return ring_shut(g);
	uint32_t rank = g->rank; // g is the thread's from here on
	k->g = g;
	k->owners = 2;
	pthread_mutex_init(&k->mu, NULL);
	pthread_cond_init(&k->cv, NULL);
	if (pthread_create(&th, NULL, ring_closer_main, k) != 0) {
		k->owners = 1;
		ring_closer_drop(k);
		return ring_shut(g);
	}
	pthread_detach(th);
	double until = pti_clock_s() + RING_CLOSE_S;
	pthread_mutex_lock(&k->mu);
	for (double now; !k->done && (now = pti_clock_s()) < until;)
		pti_cond_wait_ms(&k->cv, &k->mu, (long)((until - now) * 1e3) + 1);
	int done = k->done;
	pthread_mutex_unlock(&k->mu);
	if (!done)
		fprintf(stderr, "ring: worker %u: closing its sockets takes over "
		    "%d s (nng 1.5.2); left to a thread, or to the process's "
		    "exit\n", rank, RING_CLOSE_S);
	ring_closer_drop(k);
}

uint64_t pti_ring_bytes(const pti_ring *g)
{
	return g->sent;
}

// ---------------------------------------------------------------- summing

// ring_seg is segment i of n floats cut in w: [*lo, *hi).
static void ring_seg(uint64_t n, uint32_t w, uint32_t i, uint64_t *lo,
    uint64_t *hi)
{
	*lo = n * i / w;
	*hi = n * (i + 1) / w;
}


// ring_chunks is how many messages carry [lo, hi): one at least, empty
// for an empty segment.
static uint64_t ring_chunks(uint64_t lo, uint64_t hi)
{
	return hi > lo ? (hi - lo + RING_CHUNK - 1) / RING_CHUNK : 1;
}

// ring_chunk is chunk k of [lo, hi): [*a, *b).
static void ring_chunk(uint64_t lo, uint64_t hi, uint64_t k, uint64_t *a,
    uint64_t *b)
{
	*a = lo + k * RING_CHUNK;
	*b = *a + RING_CHUNK < hi ? *a + RING_CHUNK : hi;
}

// ring_send_chunk sends chunk k of buf's [lo, hi).
static int ring_send_chunk(pti_ring *g, const float *buf, uint64_t lo,
    uint64_t hi, uint64_t k, int64_t step, uint32_t round)
{
	pti_hdr h;
	uint64_t a, b;
	ring_chunk(lo, hi, k, &a, &b);
	pti_hdr_init(&h, PT_OP_RING, PT_ROLE_PEER, g->rank);
	h.has = PTI_H_STEP | PTI_H_VER | PTI_H_RANGE;
	h.step = step;
	h.ver = round;
	h.off = a;
	return ring_send(g, &h, buf + a, b - a, 0);
}

// ring_take takes chunk k of [lo, hi) from the left, checks that it is
// that chunk of this step and round, and adds it under buf (the partial
// sum coming round first, then this worker's) when add is set, else
// copies it.
static int ring_take(pti_ring *g, float *buf, uint64_t lo, uint64_t hi,
    uint64_t k, int64_t step, uint32_t round, int add)
{
	nng_msg *m;
	const void *pay;
	pti_hdr h;
	int rv;
	uint64_t a, b;
	ring_chunk(lo, hi, k, &a, &b);
	if ((rv = ring_recv(g, g->in, g->left, &m, &h, &pay)) != 0)
		return rv;
	if (nng_pipe_id(nng_msg_get_pipe(m)) != nng_pipe_id(g->admitted)) {
		nng_msg_free(m);
		return pti_err_set(PT_EAUTH, "ring: worker %u: a message from "
		    "a connection that has not proven the job secret",
		    g->rank);
	}
	if (h.op != PT_OP_RING || h.rank != g->left || h.step != step ||
	    h.ver != round || !(h.has & PTI_H_RANGE) || h.off != a ||
	    h.n != b - a) {
		rv = pti_err_set(PT_EPROTO, "ring: worker %u: expected step "
		    "%lld round %u [%llu, %llu) from worker %u, got %s of "
		    "step %lld round %lld [%llu, +%llu) from worker %u",
		    g->rank, (long long)step, round, (unsigned long long)a,
		    (unsigned long long)b, g->left, pti_op_name(h.op),
		    (long long)h.step, (long long)h.ver,
		    (unsigned long long)h.off, (unsigned long long)h.n, h.rank);
		nng_msg_free(m);
		return rv;
	}
	float *dst = buf + a;
	uint64_t len = b - a;
	if (len == 0) {
		// an empty segment (fewer floats than workers)
	} else if (!add) {
		memcpy(dst, pay, len * sizeof(float));
	} else if ((uintptr_t)pay % _Alignof(float) == 0) {
		const float *x = pay;
		for (uint64_t i = 0; i < len; i++)
			dst[i] = x[i] + dst[i];
	} else {
		const char *x = pay;
		for (uint64_t i = 0; i < len; i++) {
			float v;
			memcpy(&v, x + i * sizeof(float), sizeof(float));
			dst[i] = v + dst[i];
		}
	}
	nng_msg_free(m);
	return 0;
}

// ring_round sends segment `send` of buf to the right and takes segment
// `recv` from the left, round `round` of step, chunk by chunk (above).
static int ring_round(pti_ring *g, float *buf, uint64_t n, int64_t step,
    uint32_t round, uint32_t send, uint32_t recv, int add)
{
	uint64_t slo, shi, rlo, rhi, sent = 0;
	int rv;
	ring_seg(n, g->n, send, &slo, &shi);
	ring_seg(n, g->n, recv, &rlo, &rhi);
	uint64_t ks = ring_chunks(slo, shi), kr = ring_chunks(rlo, rhi);
	for (; sent < ks && sent < RING_AHEAD; sent++)
		if ((rv = ring_send_chunk(g, buf, slo, shi, sent, step,
			 round)) != 0)
			return rv;
	for (uint64_t k = 0; k < kr; k++) {
		if ((rv = ring_take(g, buf, rlo, rhi, k, step, round, add)))
			return rv;
		if (sent < ks && (rv = ring_send_chunk(g, buf, slo, shi,
				      sent++, step, round)) != 0)
			return rv;
	}
	for (; sent < ks; sent++)
		if ((rv = ring_send_chunk(g, buf, slo, shi, sent, step,
			 round)) != 0)
			return rv;
	return 0;
}

int pti_ring_sum(pti_ring *g, float *buf, uint64_t n, int64_t step)
{
	uint32_t w = g->n, r = g->rank;
	int rv;
	// Reduce-scatter: in round s this worker passes on segment r - s
	// and adds its own to segment r - s - 1; segment i starts at i.
	for (uint32_t s = 0; s + 1 < w; s++)
		if ((rv = ring_round(g, buf, n, step, s, (r + w - s) % w,
			 (r + 2 * w - s - 1) % w, 1)) != 0)
			goto broken;
	// All-gather: this worker holds the sum of segment r + 1.
	for (uint32_t s = 0; s + 1 < w; s++)
		if ((rv = ring_round(g, buf, n, step, w - 1 + s,
			 (r + 1 + w - s) % w, (r + w - s) % w, 0)) != 0)
			goto broken;
	return 0;
broken:
	g->broken = 1; // no farewell: the neighbours may be gone
	return rv;
}
