// client/client.c - parallel requests to every server (see client.h).
#include "client/client.h"

#include <pthread.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sys/stat.h>

#include <nng/nng.h>
#include <nng/protocol/reqrep0/req.h>

#include "common/clock.h"
#include "common/later.h"
#include "common/config.h"
#include "common/err.h"
#include "common/mode.h"
#include "common/shm.h"
#include "common/testhook.h"
#include "common/transport.h"

// Pipes one link follows at once: one, or two while a server that came
// back is connected before the old connection's removal is told.
#define LINK_PIPES 4

enum { PART_SEND, PART_RECV, PART_DONE };

typedef struct client_link client_link;

// client_part: one request to one server, on an nng REQ context of its
// own, so that a link carries any number at once (a pull parked by the
// server does not hold back a push behind it). Parts are kept on their
// link's free list for reuse, and freed with the client.
typedef struct client_part {
	struct client_part *next; // the link's free or in-flight list
	struct client_part *all_next; // every part the link made
	client_link *k;
	pt_req *call;
	nng_ctx ctx;
	nng_aio *aio;
	nng_aio *try_aio; // a send tried without waiting (call_send)
	int state;
	int rv;
	int lost;        // the connection closed while it was under way
	int unanswered;  // the server answered it, the reply never came
	nng_msg *reply;
	nng_msg *spare;  // the last reply, to carry the next request
	pti_hdr hdr;     // the request sent, then the reply decoded
	const void *pay; // the reply's values, in reply
	float *dst;      // where they go (dst[0] is element hdr.off), or NULL
	int lend;        // the reply's values are lent (pti_call_lend)
	uint64_t want_n; // how many values the request asked for
	int slot;        // its slot in the link's box, -1: sent over nng
	double sent;     // when it went into the box
} client_part;

struct client_link {
	pti_client *c;
	uint32_t rank; // the server's
	char url[512];
	nng_socket sock;
	int up;   // connected pipes: how many ids pipes[] holds
	int ever; // it has been connected (else: not started yet?)
	uint32_t pipes[LINK_PIPES]; // their nng pipe ids
	client_part *free, *busy, *all;
	uint64_t lo, hi; // its shard, from hello
	int64_t ver;     // version of the values last received from it
	// --transport shm (common/shm.h): the server's segment, where this
	// worker reads its pulls' values (read-only; the worker writes its
	// pushes' in the client's), none before the handshake. A server's
	// segment replaced by a later handshake stays mapped until close (a
	// lent value may point in). [own_lo, own_hi): its values that the
	// client's view maps in place (the others are copied there).
	pti_shm_seg theirs, *old;
	uint32_t n_old;
	uint64_t own_lo, own_hi;
	// Its box (common/shm.h's pti_box), made at each handshake: a
	// request through shared memory goes into a free slot of it instead
	// of onto the socket. Given up (dead) once a request in it failed:
	// its slot may still be the server's. Replaced ones go to old.
	pti_shm_seg box;
	uint32_t box_used; // slots under way, a bit each
	uint32_t box_seq;  // requests rung
	int box_dead;
	nng_dialer dialer;
	double dialed;   // when its dialer was started
};

// pt_req: one call, a part per server it touches (two for a sync
// pushpull split into a push and a pull).
struct pt_req {
	pti_client *c;
	uint32_t n, cap, pending;
	client_part **parts; // (cap)
	client_part *lent;   // the part whose reply's values it lends, or NULL
};

// pt_lent: a reply taken out of its call, whose values the program reads
// in place. Kept on the client's list until given back, so that closing
// the client frees the loans still out.
struct pt_lent {
	pt_lent *prev, *next; // the client's loans
	client_part *p;  // the part it came on: it carries its next request
	nng_msg *m;      // the reply
	float *copy;     // (n) the values, when the reply's were not aligned
};

// A server missing this long gets a new dialer. nng's dialer stops
// redialing for good when a connection attempt ends in NNG_ECLOSED,
// which a server killed mid-handshake can cause: the worker would then
// wait out --rpc-timeout for a server that is back and listening.
#define CLIENT_REDIAL_S 5.0

// A request unanswered this long is reported, and again as often, so
// that a server that hangs (rather than dies) is named while workers wait
// (the test hook PSTRAIN_TEST_NOTE_S shortens it).
#define CLIENT_NOTE_S 30.0

static double client_note_s(void)
{
	const char *e = pti_test_hook("PSTRAIN_TEST_NOTE_S");
	double s = e != NULL ? atof(e) : 0;
	return s > 0 ? s : CLIENT_NOTE_S;
}

// The test hook PSTRAIN_TEST_LEND_SKEW=1 moves each lent reply into a
// message whose body starts one byte past alignment, as a transport that
// places bodies differently would leave it: the unaligned path of
// pti_call_lend, which pstrain's own replies never take.
static int client_skew(void)
{
	const char *e = pti_test_hook("PSTRAIN_TEST_LEND_SKEW");
	return e != NULL && atoi(e) > 0;
}

struct pti_client {
	uint32_t role, rank, n;
	pti_secret secret;
	double timeout_s;
	client_link *links; // (n)
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int probing; // a wait's probe of a silent server is under way
	int mode;    // the job's mode, from the hello (0 before)
	double note_s; // a silent request is reported after this long
	pt_lent *loans; // lent replies not given back yet
	uint64_t reused; // requests written into a kept reply
	uint64_t copied; // loans whose values had to be copied (unaligned)
	uint64_t tx, rx; // bytes of the messages sent and received
	int skew; // test hook: lent replies are moved to an unaligned body
	int shm;  // dense values through shared memory (pti_client_shm)
	int shm_still; // and no server changes one a worker may be reading
	// This worker's segment, where it writes its pushes' values (the
	// whole model's, at their places: every server maps its shard's),
	// and with shm_still its view of the servers' values side by side.
	pti_shm_seg mine;
	pti_shm_view view;
};

// ---------------------------------------------------------------- boxes

// part_slot: box part p's slot.
static pti_box_slot *part_slot(const client_part *p)
{
	return &((pti_box *)p->k->box.p)->slot[p->slot];
}

// part_unbusy takes p off its link's list of parts under way.
static void part_unbusy(client_part *p)
{
	client_part **pp = &p->k->busy;
	while (*pp != p)
		pp = &(*pp)->next;
	*pp = p->next;
}

// box_done ends box part p with nng's status rv (0: its reply is in
// p->reply), as part_cb ends the others. A part that failed leaves its
// slot to the server for good: the box is given up, and whoever sleeps
// on the slot is woken. Under the lock.
static void box_done(client_part *p, int rv)
{
	client_link *k = p->k;
	pti_box_slot *sl = part_slot(p);
	p->rv = rv;
	p->state = PART_DONE;
	part_unbusy(p);
	p->call->pending--;
	if (rv != 0) {
		k->box_dead = 1;
		atomic_store(&sl->state, PTI_BOX_GONE);
		pti_box_wake(&sl->state);
	} else {
		k->box_used &= ~(1u << p->slot);
	}
	pthread_cond_broadcast(&k->c->cv);
}

// box_fail_all fails k's box parts under way as lost (the connection
// closed, or the box is replaced). Under the lock.
static void box_fail_all(client_link *k)
{
	client_part *q = k->busy, *next;
	for (; q != NULL; q = next) {
		next = q->next;
		if (q->slot >= 0 && q->state != PART_DONE) {
			q->lost = 1;
			box_done(q, NNG_ECLOSED);
		}
	}
}

// box_poll takes box part p's reply once it is in. Under the lock.
static void box_poll(client_part *p)
{
	pti_box_slot *sl = part_slot(p);
	nng_msg *m;
	if (p->state == PART_DONE ||
	    atomic_load_explicit(&sl->state, memory_order_acquire) !=
		PTI_BOX_REP)
		return;
	uint32_t len = atomic_load_explicit(&sl->len, memory_order_relaxed);
	if (len > PTI_BOX_MSG)
		len = 0; // decoded as malformed
	if (nng_msg_alloc(&m, len) != 0) {
		box_done(p, NNG_ENOMEM);
		return;
	}
	memcpy(nng_msg_body(m), sl->msg, len);
	atomic_store_explicit(&sl->state, PTI_BOX_FREE, memory_order_relaxed);
	p->reply = m;
	p->k->c->rx += len;
	box_done(p, 0);
}

// slot_sleep sleeps while slot sl's state is v, a second at most and
// not past `until` (the lock let go meanwhile); 0 without sleeping once
// until has passed. Under the lock.
static int slot_sleep(pti_client *c, pti_box_slot *sl, uint32_t v,
    double until)
{
	double left = until - pti_clock_s();
	if (left <= 0)
		return 0;
	pthread_mutex_unlock(&c->mu);
	pti_box_wait(&sl->state, v, left < 1.0 ? left : 1.0);
	pthread_mutex_lock(&c->mu);
	return 1;
}

// box_wait sleeps until box part p's reply is in, a second at most, and
// fails it once --rpc-timeout has passed since it was sent. Under the
// lock, which it lets go while it sleeps.
static void box_wait(pti_client *c, client_part *p)
{
	pti_box_slot *sl = part_slot(p);
	uint32_t v = atomic_load_explicit(&sl->state, memory_order_acquire);
	if (p->state == PART_DONE)
		return;
	if (v != PTI_BOX_REP && !slot_sleep(c, sl, v, p->sent + c->timeout_s)) {
		box_done(p, NNG_ETIMEDOUT);
		return;
	}
	box_poll(p);
}

// box_send puts request m of part p into a free slot of k's box and
// rings it; 0 when there was none (or m does not fit): m is then still
// the caller's. Under the lock.
static int box_send(client_link *k, client_part *p, nng_msg *m)
{
	pti_box *b = (pti_box *)k->box.p;
	size_t len = nng_msg_len(m);
	uint32_t i = 0;
	if (b == NULL || k->box_dead || len > PTI_BOX_MSG ||
	    k->box_used == (1u << PTI_BOX_SLOTS) - 1)
		return 0;
	// Behind a request on the socket it goes there too: the server
	// would otherwise see them in either order.
	for (const client_part *q = k->busy; q != NULL; q = q->next)
		if (q != p && q->slot < 0 && q->state != PART_DONE)
			return 0;
	while (k->box_used & (1u << i))
		i++;
	pti_box_slot *sl = &b->slot[i];
	memcpy(sl->msg, nng_msg_body(m), len);
	sl->seq = k->box_seq++;
	atomic_store_explicit(&sl->len, (uint32_t)len, memory_order_relaxed);
	atomic_store_explicit(&sl->state, PTI_BOX_REQ, memory_order_release);
	k->box_used |= 1u << i;
	p->slot = (int)i;
	p->sent = pti_clock_s();
	p->state = PART_RECV;
	atomic_fetch_add_explicit(&b->bell, 1, memory_order_release);
	pti_box_wake(&b->bell);
	if (p->spare == NULL)
		p->spare = m; // to carry a later request
	else
		nng_msg_free(m);
	return 1;
}

// box_order waits (the lock let go meanwhile) until the server has
// handled every request of k's box still under way (HELD), so that
// what goes on the socket next comes after them; --rpc-timeout at
// most, after which the box is given up. Under the lock.
static void box_order(pti_client *c, client_link *k)
{
	double until = pti_clock_s() + c->timeout_s;
	for (;;) {
		client_part *q = k->busy;
		uint32_t v = 0;
		for (; q != NULL; q = q->next)
			if (q->slot >= 0 && q->state != PART_DONE &&
			    ((v = atomic_load(&part_slot(q)->state)) ==
				    PTI_BOX_REQ ||
				v == PTI_BOX_TAKEN))
				break;
		if (q == NULL || k->box_dead)
			return;
		if (!slot_sleep(c, part_slot(q), v, until)) {
			box_fail_all(k);
			return;
		}
	}
}

// link_pipe_cb follows the connection to one server. When it closes, the
// requests under way on it can no longer be answered: cancel them now
// rather than wait out the timeout (nng finishes a cancelled aio on its
// own threads, so this may hold the lock). Pipes are told apart by id: a
// pipe that closes before it was ever added (a dial that met a server
// going down) must not count against the one that is up, or the link
// would wait for a server that is there.
static void link_pipe_cb(nng_pipe p, nng_pipe_ev ev, void *arg)
{
	client_link *k = arg;
	pti_client *c = k->c;
	uint32_t id = (uint32_t)nng_pipe_id(p);
	int at = -1;
	if (ev == NNG_PIPE_EV_ADD_POST)
		(void)pti_transport_widen(p);
	pthread_mutex_lock(&c->mu);
	for (int i = 0; i < k->up; i++)
		if (k->pipes[i] == id)
			at = i;
	if (ev == NNG_PIPE_EV_ADD_POST) {
		if (at < 0 && k->up < LINK_PIPES)
			k->pipes[k->up++] = id;
		k->ever = 1;
	} else if (at >= 0) {
		k->pipes[at] = k->pipes[--k->up];
		box_fail_all(k);
		for (client_part *q = k->busy; q != NULL; q = q->next) {
			q->lost = 1;
			nng_aio_cancel(q->aio);
		}
	}
	pthread_cond_broadcast(&c->cv);
	pthread_mutex_unlock(&c->mu);
}

static void part_cb(void *arg)
{
	client_part *p = arg;
	pti_client *c = p->k->c;
	int rv = nng_aio_result(p->aio);
	if (p->state == PART_SEND && rv == 0) {
		p->state = PART_RECV;
		nng_ctx_recv(p->ctx, p->aio);
		return;
	}
	if (p->state == PART_SEND)
		nng_msg_free(nng_aio_get_msg(p->aio));
	else if (rv == 0)
		p->reply = nng_aio_get_msg(p->aio);
	pthread_mutex_lock(&c->mu);
	if (rv == 0 && p->state == PART_RECV)
		c->rx += nng_msg_len(p->reply);
	p->rv = rv;
	p->state = PART_DONE;
	part_unbusy(p);
	// Every part, not only the call's last: the waiter takes each
	// reply's values while the others are still on their way.
	p->call->pending--;
	pthread_mutex_unlock(&c->mu);
	// Woken after the unlock, the waiter need not wait for the lock
	// (the client, and so its condition, outlives every callback).
	pthread_cond_broadcast(&c->cv);
}

// part_send_later sends p after --send-delay (common/later.h); a link
// that went down meanwhile fails it at once, as call_send does.
static void part_send_later(void *arg)
{
	client_part *p = arg;
	pti_client *c = p->k->c;
	pthread_mutex_lock(&c->mu);
	nng_ctx_send(p->ctx, p->aio);
	if (p->lost)
		nng_aio_cancel(p->aio);
	pthread_mutex_unlock(&c->mu);
}

static void part_free(client_part *p)
{
	if (p->aio != NULL) {
		nng_aio_stop(p->aio);
		nng_aio_free(p->aio);
	}
	nng_aio_free(p->try_aio); // never left under way
	nng_msg_free(p->reply);
	nng_msg_free(p->spare);
	free(p);
}

// part_get takes a part of link k from its free list, or makes one.
// Called with the lock held.
static int part_get(client_link *k, client_part **out)
{
	client_part *p = k->free;
	int rv;
	if (p != NULL) {
		k->free = p->next;
		*out = p;
		return 0;
	}
	if ((p = calloc(1, sizeof(*p))) == NULL)
		return pti_err_set(PT_ENOMEM, "client request");
	p->k = k;
	p->all_next = k->all;
	k->all = p;
	if ((rv = nng_ctx_open(&p->ctx, k->sock)) != 0 ||
	    (rv = nng_aio_alloc(&p->aio, part_cb, p)) != 0 ||
	    (rv = nng_aio_alloc(&p->try_aio, NULL, NULL)) != 0) {
		return pti_err_set(PT_ETRANSPORT, "client: %s",
		    nng_strerror(rv)); // freed with the client
	}
	// A resent push would be applied twice: requests are sent once,
	// and a lost reply shows as a timeout instead.
	nng_ctx_set_ms(p->ctx, NNG_OPT_REQ_RESENDTIME, NNG_DURATION_INFINITE);
	nng_aio_set_timeout(p->aio, (nng_duration)(k->c->timeout_s * 1000));
	nng_aio_set_timeout(p->try_aio, NNG_DURATION_ZERO);
	*out = p;
	return 0;
}

void pti_client_close(pti_client *c)
{
	if (c == NULL)
		return;
	pti_later_flush(); // the requests still held go before the stop
	// Every part is stopped before its socket closes: a callback may be
	// inside nng_ctx_recv while the reply completes on another thread,
	// and nng 1.5.2 then lets nng_close free the protocol's state under
	// that call's last reference (nni_ctx_rele wakes the closer before
	// ctx_fini locks the state: a panic on a destroyed mutex, seen about
	// once in 30 jobs). nng_aio_stop waits for the callback to return.
	// Then each part the link ever made is freed, waited for or not,
	// and the loans still out (their values go with them).
	for (uint32_t i = 0; i < c->n && c->links; i++)
		for (client_part *p = c->links[i].all; p != NULL;
		     p = p->all_next)
			if (p->aio != NULL)
				nng_aio_stop(p->aio);
	for (uint32_t i = 0; i < c->n && c->links; i++) {
		client_link *k = &c->links[i];
		nng_close(k->sock);
		pti_shm_seg_fini(&k->theirs);
		pti_shm_seg_fini(&k->box);
		pti_shm_segs_free(k->old, k->n_old);
		while (k->all != NULL) {
			client_part *p = k->all;
			k->all = p->all_next;
			part_free(p);
		}
	}
	while (c->loans != NULL) {
		pt_lent *l = c->loans;
		c->loans = l->next;
		nng_msg_free(l->m);
		free(l->copy);
		free(l);
	}
	free(c->links);
	pti_shm_view_fini(&c->view);
	pti_shm_seg_fini(&c->mine);
	pthread_mutex_destroy(&c->mu);
	pthread_cond_destroy(&c->cv);
	free(c);
}

int pti_client_open(pti_client **out, const char *urls, uint32_t role,
    uint32_t rank, double timeout_s, const pti_secret *secret)
{
	pti_client *c = calloc(1, sizeof(*c));
	if (c == NULL)
		return pti_err_set(PT_ENOMEM, "client");
	pthread_mutex_init(&c->mu, NULL);
	pthread_cond_init(&c->cv, NULL);
	c->role = role;
	c->rank = rank;
	c->secret = *secret;
	c->timeout_s = timeout_s;
	c->note_s = client_note_s(); // read once, not on every call
	c->skew = client_skew();
	uint32_t n = 1;
	for (const char *p = urls; *p; p++)
		n += *p == ',';
	c->links = calloc(n, sizeof(client_link));
	if (c->links == NULL) {
		free(c);
		return pti_err_set(PT_ENOMEM, "client");
	}
	c->mine = PTI_SHM_SEG_NONE;
	for (uint32_t i = 0; i < n; i++)
		c->links[i].theirs = c->links[i].box = PTI_SHM_SEG_NONE;
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
			pti_client_close(c);
			return pti_err_set(PT_EINVAL,
			    "--connect: server %u's address is empty or too "
			    "long", i);
		}
		memcpy(k->url, p, len);
		p = e ? e + 1 : p + len;
		if ((rv = nng_req0_open(&k->sock)) != 0) {
			pti_client_close(c);
			return pti_err_set(PT_ETRANSPORT, "client: %s",
			    nng_strerror(rv));
		}
		// Redial a server that went away every 50 ms at first, the
		// pause doubling up to 2 s.
		nng_socket_set_ms(k->sock, NNG_OPT_RECONNMINT, 50);
		nng_socket_set_ms(k->sock, NNG_OPT_RECONNMAXT, 2000);
		if ((rv = nng_pipe_notify(k->sock, NNG_PIPE_EV_ADD_POST,
			 link_pipe_cb, k)) != 0 ||
		    (rv = nng_pipe_notify(k->sock, NNG_PIPE_EV_REM_POST,
			 link_pipe_cb, k)) != 0) {
			pti_client_close(c);
			return pti_err_set(PT_ETRANSPORT, "client: %s",
			    nng_strerror(rv));
		}
		k->dialed = pti_clock_s();
		if ((rv = pti_transport_dial(k->sock, k->url, &k->dialer,
			 NNG_FLAG_NONBLOCK)) != 0) {
			pti_client_close(c);
			return pti_err_set(PT_ETRANSPORT,
			    "server %u at %s: %s", i, k->url,
			    nng_strerror(rv));
		}
	}
	*out = c;
	return 0;
}

uint32_t pti_client_servers(const pti_client *c)
{
	return c->n;
}

// client_missing lists the servers not connected into buf; returns how
// many, and in *never how many of them were never connected. Called with
// the lock held.
static uint32_t client_missing(const pti_client *c, char *buf, size_t size,
    uint32_t *never)
{
	uint32_t n = 0;
	size_t used = 0;
	buf[0] = '\0';
	*never = 0;
	for (uint32_t i = 0; i < c->n; i++) {
		if (c->links[i].up > 0)
			continue;
		*never += !c->links[i].ever;
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
static void client_redial(pti_client *c)
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
			pti_log(PT_LOG_WARN, "client: dialing server %u at %s again: "
			    "%s", i, k->url, nng_strerror(rv));
	}
}

int pti_client_wait(pti_client *c, const char *who, double timeout_s,
    double never_s)
{
	char missing[1024];
	double start = pti_clock_s(), said = 0;
	uint32_t never, n;
	pthread_mutex_lock(&c->mu);
	while ((n = client_missing(c, missing, sizeof(missing), &never)) > 0) {
		client_redial(c);
		double waited = pti_clock_s() - start;
		// A server never reached may not have started at all: that
		// is said as such, and waited for at most never_s.
		double limit = never > 0 && never_s < timeout_s ? never_s
								 : timeout_s;
		const char *what = never == n ? "to start (or to be reachable "
						"from here)"
				   : never > 0 ? "to start or come back"
					       : "to come back";
		if (waited >= limit) {
			pthread_mutex_unlock(&c->mu);
			return pti_err_set(PT_ETIMEDOUT,
			    "%s gave up after %.0fs waiting for %s %s", who,
			    waited, missing, what);
		}
		// Quiet for a normal start-up; then every 5 s.
		if (waited >= said + 5.0 || (said == 0 && waited >= 1.0)) {
			pti_log(PT_LOG_WARN, "%s: waiting for %s %s (%.0fs so far, "
			    "at most %.0fs)", who, missing, what, waited,
			    limit);
			said = waited;
		}
		pti_cond_wait_ms(&c->cv, &c->mu, 100);
	}
	pthread_mutex_unlock(&c->mu);
	if (said > 0)
		pti_log(PT_LOG_INFO, "%s: every server is connected again after "
		    "%.1fs", who, pti_clock_s() - start);
	return 0;
}


// ---------------------------------------------------------------- calls

int pti_call_new(pti_client *c, pt_req **out)
{
	pt_req *q = calloc(1, sizeof(*q));
	if (q == NULL || (q->parts = calloc(2 * c->n,
			      sizeof(client_part *))) == NULL) {
		free(q);
		return pti_err_set(PT_ENOMEM, "client request");
	}
	q->c = c;
	q->cap = 2 * c->n;
	*out = q;
	return 0;
}

// call_send is pti_call_send, and pti_call_send_lent when lend is set.
// link_shm: whether request h of n values to k goes through shared
// memory: a push, pushpull or pull of a range within k's shard, once k's
// segments were handed over; but not a push whose range overlaps one
// still under way in k's segment (the server may not have read that
// one yet: this one's values go in its message). Under c->mu.
static int link_shm(const client_link *k, const pti_hdr *h, uint64_t n)
{
	if (k->theirs.p == NULL || k->c->mine.p == NULL ||
	    (h->op != PT_OP_PUSH && h->op != PT_OP_PUSHPULL &&
		h->op != PT_OP_PULL) ||
	    !(h->has & PTI_H_RANGE) || h->off < k->lo || h->off > k->hi ||
	    n > k->hi - h->off)
		return 0;
	for (const client_part *b = k->busy; h->op != PT_OP_PULL && b != NULL;
	     b = b->next)
		if (b->state != PART_DONE && (b->hdr.has & PTI_H_SHM) &&
		    b->hdr.op != PT_OP_PULL && b->hdr.off < h->off + n &&
		    h->off < b->hdr.off + b->hdr.n)
			return 0;
	return 1;
}

static int call_send(pt_req *q, uint32_t server, const pti_hdr *h,
    const float *pay, uint64_t n, float *dst, int lend)
{
	pti_client *c = q->c;
	client_link *k = &c->links[server];
	client_part *p = NULL;
	nng_msg *m;
	int rv, reused = 0;
	if (q->n == q->cap) {
		client_part **pp = realloc(q->parts,
		    2 * q->cap * sizeof(*pp));
		if (pp == NULL)
			return pti_err_set(PT_ENOMEM, "client request");
		q->parts = pp;
		q->cap *= 2;
	}
	if (lend && q->lent != NULL)
		return pti_err_set(PT_EINVAL, "a call lends one reply");
	pthread_mutex_lock(&c->mu);
	rv = part_get(k, &p);
	int shm = rv == 0 && link_shm(k, h, n);
	pthread_mutex_unlock(&c->mu);
	if (rv != 0)
		return rv;
	// Shared memory: the values go where the server reads them, the
	// request says so (and that the reply's values stay in the
	// server's segment).
	pti_hdr hs;
	if (shm) {
		hs = *h;
		hs.has |= PTI_H_SHM | PTI_H_RANGE;
		hs.shm = 1;
		hs.n = n;
		float *at = c->mine.p + h->off;
		if (pay != NULL && pay != at) // else computed in place
			memcpy(at, pay, n * sizeof(float));
		h = &hs;
		pay = NULL;
	}
	// The part's last reply carries the request when it holds it
	// without growing (a pushpull's values, step after step).
	if (pay != NULL && pti_msg_roomy(p->spare, n) &&
	    pti_msg_encode_in(p->spare, h, pay, n) == 0) {
		m = p->spare;
		p->spare = NULL;
		reused = 1;
	} else if ((rv = pti_msg_encode(&m, h, pay, pay ? n : 0)) != 0) {
		pthread_mutex_lock(&c->mu);
		p->next = k->free; // back, unused
		k->free = p;
		pthread_mutex_unlock(&c->mu);
		return rv;
	}
	pthread_mutex_lock(&c->mu);
	p->call = q;
	p->hdr = *h;
	p->state = PART_SEND;
	p->rv = 0;
	p->reply = NULL;
	p->pay = NULL;
	p->dst = dst;
	p->lend = lend;
	p->want_n = n;
	p->unanswered = 0;
	p->slot = -1;
	c->reused += (uint64_t)reused;
	c->tx += nng_msg_len(m);
	if (lend)
		q->lent = p;
	// Not connected: fail at once (the caller waits and rejoins) rather
	// than let nng queue it for a restarted server.
	int lost = p->lost = k->up == 0;
	p->next = k->busy;
	k->busy = p;
	q->parts[q->n++] = p;
	q->pending++;
	// Through shared memory, the header goes into the box when a slot
	// is free: a futex wakes the server, and it the waiter, instead of
	// nng's threads. Not with a send delay, which the socket's path
	// emulates.
	if (shm && !lost && !pti_later_on() && box_send(k, p, m)) {
		pthread_mutex_unlock(&c->mu);
		return 0;
	}
	box_order(c, k); // may let the lock go: the link may be down now
	lost = p->lost = p->lost || k->up == 0;
	// When the connection is idle, REQ puts the request on it at once:
	// a send that may not wait (the zero timeout) then finishes here,
	// in this thread, and the receive follows. Sent by callback, each
	// request would cost a hand-over to nng's task thread just to post
	// its receive (a tenth of a tiny round trip). A send that would wait
	// (the connection busy with an earlier request, or gone) fails at
	// once and is made by callback instead. With a send delay the
	// request waits on the delay line first.
	if (!lost && pti_later_on()) {
		nng_aio_set_msg(p->aio, m);
		pthread_mutex_unlock(&c->mu);
		pti_later(part_send_later, p);
		return 0;
	}
	if (!lost) {
		nng_aio_set_msg(p->try_aio, m);
		nng_ctx_send(p->ctx, p->try_aio);
		nng_aio_wait(p->try_aio);
		if (nng_aio_result(p->try_aio) == 0) {
			p->state = PART_RECV;
			nng_ctx_recv(p->ctx, p->aio);
			pthread_mutex_unlock(&c->mu);
			return 0;
		}
		m = nng_aio_get_msg(p->try_aio);
		nng_aio_set_msg(p->try_aio, NULL);
	}
	nng_aio_set_msg(p->aio, m);
	nng_ctx_send(p->ctx, p->aio);
	if (lost)
		nng_aio_cancel(p->aio);
	pthread_mutex_unlock(&c->mu);
	return 0;
}

int pti_call_send(pt_req *q, uint32_t server, const pti_hdr *h,
    const float *pay, uint64_t n, float *dst)
{
	return call_send(q, server, h, pay, n, dst, 0);
}

int pti_call_send_lent(pt_req *q, uint32_t server, const pti_hdr *h,
    const float *pay, uint64_t n)
{
	return call_send(q, server, h, pay, n, NULL, 1);
}

// call_check decodes part p's reply and checks it answers the request:
// status, op, and the values asked for.
static int call_check(client_part *p)
{
	client_link *k = p->k;
	const char *op = pti_op_name(p->hdr.op);
	uint32_t want = p->hdr.op;
	uint64_t off = p->hdr.off;
	int rv;
	if (p->rv != 0 && p->unanswered)
		return pti_err_set(PT_ECLOSED,
		    "%s to server %u at %s: the server answered it (it is at "
		    "version %lld) but the reply never arrived", op, k->rank,
		    k->url, (long long)p->hdr.ver);
	if (p->rv != 0 && (p->lost || p->rv == NNG_ECONNRESET))
		return pti_err_set(PT_ECLOSED,
		    "%s to server %u at %s: the connection closed (the server "
		    "stopped or died)", op, k->rank, k->url);
	if (p->rv != 0)
		return pti_err_set(p->rv == NNG_ETIMEDOUT ? PT_ETIMEDOUT
							  : PT_ETRANSPORT,
		    "%s to server %u at %s: %s", op, k->rank, k->url,
		    nng_strerror(p->rv));
	if ((rv = pti_msg_decode(&p->hdr, &p->pay, p->reply)) != 0)
		return pti_err_set(rv, "reply from server %u to %s: %s",
		    k->rank, op, pt_errmsg(rv));
	// Values left in the server's segment: read them there.
	if (p->hdr.status == 0 && (p->hdr.has & PTI_H_SHM)) {
		const pti_hdr *r = &p->hdr;
		if (k->theirs.p == NULL || !(r->has & PTI_H_RANGE) ||
		    r->off < k->lo || r->off > k->hi || r->n > k->hi - r->off ||
		    k->theirs.skip + (r->off - k->lo + r->n) * sizeof(float) >
			k->theirs.bytes)
			return pti_err_set(PT_EPROTO, "server %u answered %s "
			    "with values in shared memory at [%llu, +%llu), "
			    "outside what it handed over", k->rank, op,
			    (unsigned long long)r->off,
			    (unsigned long long)r->n);
		p->pay = k->theirs.p + (r->off - k->lo);
	}
	if (p->hdr.status != 0)
		return pti_err_set(p->hdr.status < PT_NERR ? (int)p->hdr.status
							   : PT_EPROTO,
		    "%s", p->hdr.msg);
	if (p->hdr.op != want)
		return pti_err_set(PT_EPROTO, "server %u answered %s with %s",
		    k->rank, op, pti_op_name(p->hdr.op));
	if ((p->dst != NULL || p->lend) &&
	    (!(p->hdr.has & PTI_H_RANGE) || p->hdr.off != off ||
		p->hdr.n != p->want_n || p->pay == NULL))
		return pti_err_set(PT_EPROTO,
		    "server %u sent values for [%llu, +%llu), not [%llu, "
		    "+%llu)", k->rank, (unsigned long long)p->hdr.off,
		    (unsigned long long)p->hdr.n, (unsigned long long)off,
		    (unsigned long long)p->want_n);
	return 0;
}

// client_answered tells whether server k, now at version ver, has
// certainly answered part p: in lockstep (sync) a pushpull once its step
// has closed and a pull once its version is there; where nothing is ever
// parked (async) any request. A parked ssp reply cannot be told apart:
// never (common/mode.h).
static int client_answered(const pti_client *c, const client_part *p,
    int64_t ver)
{
	const pti_hdr *h = &p->hdr;
	const pti_mode *m = pti_mode_of(c->mode);
	if (m != NULL && m->answered_at_once)
		return 1;
	if (m == NULL || !m->lockstep)
		return 0;
	if (h->op == PT_OP_PUSHPULL)
		return ver > h->step;
	if (h->op == PT_OP_PULL)
		return !(h->has & PTI_H_VER) || ver >= h->ver;
	return h->op == PT_OP_PUSH;
}

// client_probe asks server k for its version (a stats request, on a
// context of its own); not itself probed should it hang.
static int client_probe(pti_client *c, client_link *k, int64_t *ver)
{
	pti_hdr h;
	pt_req *q = NULL;
	pti_hdr_init(&h, PT_OP_STATS, c->role, c->rank);
	c->probing = 1;
	int rv = pti_call_new(c, &q);
	if (rv == 0 && (rv = pti_call_send(q, k->rank, &h, NULL, 0, NULL)) == 0)
		rv = pti_call_wait(q, NULL);
	if (rv == 0)
		*ver = pti_call_reply(q, 0)->ver;
	pti_call_free(q);
	c->probing = 0;
	return rv;
}

// call_await waits until part `want` of q is done (want NULL: every
// part), saying every c->note_s seconds which parts are still unanswered.
// `start` is when the wait began. Called with the lock held.
static void call_await(pt_req *q, const client_part *want, double start)
{
	pti_client *c = q->c;
	double every = c->note_s, note = start + every;
	while (note <= pti_clock_s())
		note += every;
	while (want != NULL ? want->state != PART_DONE : q->pending > 0) {
		// A box's part is waited for on its slot; the others' are
		// told by their callbacks, on the condition.
		const client_part *bp = want;
		for (uint32_t i = 0; bp == NULL && i < q->n; i++)
			if (q->parts[i]->state != PART_DONE &&
			    q->parts[i]->slot >= 0)
				bp = q->parts[i];
		if (bp != NULL && bp->slot >= 0)
			box_wait(c, (client_part *)bp);
		else
			pti_cond_wait_ms(&c->cv, &c->mu, 1000);
		if ((want != NULL ? want->state == PART_DONE
				  : q->pending == 0) ||
		    pti_clock_s() < note)
			continue;
		note += every;
		for (uint32_t i = 0; i < q->n; i++) {
			client_part *p = q->parts[i];
			if (p->state == PART_DONE)
				continue;
			// Say where the server is, so that a request the
			// server answered but whose reply never came shows
			// as such. Asked on a context of its own, unlocked.
			char where[96] = "";
			int64_t ver = -1;
			pthread_mutex_unlock(&c->mu);
			if (!c->probing && client_probe(c, p->k, &ver) == 0)
				snprintf(where, sizeof(where), "; the server is "
				    "at version %lld", (long long)ver);
			pthread_mutex_lock(&c->mu);
			if (p->state == PART_DONE)
				continue;
			// Answered, and still no reply: it was lost on the
			// way (seen once with nng 1.5 under load). Fail it
			// as a closed connection, which the worker mends by
			// rejoining, rather than wait out the timeout.
			if (where[0] != '\0' && client_answered(c, p, ver)) {
				p->unanswered = 1;
				p->hdr.ver = ver;
				if (p->slot >= 0)
					box_done(p, NNG_ECANCELED);
				else
					nng_aio_cancel(p->aio);
			}
			pti_log(PT_LOG_WARN, "%s %u: no answer yet to %s (step %lld, "
			    "version %lld) from server %u at %s (%.0fs so far, "
			    "at most %.0fs)%s", c->role == PT_ROLE_WORKER ?
			    "worker" : "client", c->rank,
			    pti_op_name(p->hdr.op), (long long)p->hdr.step,
			    (long long)p->hdr.ver, p->k->rank, p->k->url,
			    pti_clock_s() - start, c->timeout_s, where);
		}
	}
}

// shm_moving: part p's reply left its values in the server's segment,
// where they may change while read (pti_client_shm's still unset): they
// are copied out under the segment's seqlock. shm_ctl: k's block.
static int shm_moving(const pti_client *c, const client_part *p)
{
	return !c->shm_still && (p->hdr.has & PTI_H_SHM);
}

static const pti_shm_ctl *shm_ctl(const client_link *k)
{
	return pti_shm_ctl_of(&k->theirs, k->hi - k->lo);
}

// in_view: part p's values go to their own place in the client's view
// (pti_client_shm_view), where the server's own pages already show them.
static int in_view(const pti_client *c, const client_part *p,
    const float *dst)
{
	return c->view.p != NULL && dst == c->view.p + p->hdr.off;
}

// view_edges copies into the view part p's values (src: the reply's,
// element p->hdr.off first) that lie outside its server's own pages:
// where its shard starts or ends inside a page. A reply whose values
// came in its message cannot be put there (the view's pages are the
// server's, read-only): PT_EPROTO naming the server.
static int view_edges(const pti_client *c, const client_part *p,
    const float *src)
{
	const client_link *k = p->k;
	uint64_t a = p->hdr.off, b = a + p->hdr.n;
	uint64_t cut[2][2] = {{a, k->own_lo < b ? k->own_lo : b},
	    {k->own_hi > a ? k->own_hi : a, b}};
	if (!(p->hdr.has & PTI_H_SHM))
		return pti_err_set(PT_EPROTO, "server %u at %s answered a "
		    "pull through shared memory with values in its message",
		    k->rank, k->url);
	for (int i = 0; i < 2; i++)
		if (cut[i][0] < cut[i][1])
			memcpy(c->view.p + cut[i][0], src + (cut[i][0] - a),
			    (cut[i][1] - cut[i][0]) * sizeof(float));
	return 0;
}

// part_copy copies part p's values from src into dst: under the
// segment's seqlock where the server may change them while read
// (shm_moving), with *ver the version they are of, which may be newer
// than the reply's; into the view, only those outside the server's own
// pages; else as they are (*ver untouched). Errors name the server.
static int part_copy(const pti_client *c, const client_part *p, float *dst,
    const void *src, int64_t *ver)
{
	int rv;
	if (in_view(c, p, dst))
		return view_edges(c, p, src);
	if (!shm_moving(c, p)) {
		memcpy(dst, src, p->hdr.n * sizeof(float));
		return 0;
	}
	if ((rv = pti_shm_read(shm_ctl(p->k), dst, src, p->hdr.n,
		 c->timeout_s, p->k->theirs.owner, ver)) != 0)
		return pti_err_set(rv, "server %u at %s: %s", p->k->rank,
		    p->k->url, pt_errmsg(rv));
	return 0;
}

int pti_call_wait(pt_req *q, pti_client_step *info)
{
	pti_client *c = q->c;
	pti_client_step st = {INT64_MAX, 0, 0.0, 0.0};
	uint32_t n_vals = 0, have_lr = 0;
	int rv = 0;
	double start = pti_clock_s();
	// Each part is checked, and its values copied, as soon as it is
	// answered, while the later parts are still on their way (a large
	// range goes in pieces, worker_send). A failed one still waits for
	// the rest: a push given up on could be applied or not.
	for (uint32_t i = 0; i < q->n && rv == 0; i++) {
		client_part *p = q->parts[i];
		pthread_mutex_lock(&c->mu);
		call_await(q, p, start);
		pthread_mutex_unlock(&c->mu);
		// Bytes may be unaligned in the message body: copy. A lent
		// reply's stay where they are (pti_call_lend), and values
		// read in the server's segment by a caller pointed there
		// (pti_client_shm_view) are already in place.
		if ((rv = call_check(p)) == 0 && p->dst != NULL &&
		    p->dst != p->pay)
			rv = part_copy(c, p, p->dst, p->pay, &p->hdr.ver);
		if (rv != 0) {
			pthread_mutex_lock(&c->mu);
			call_await(q, NULL, start);
			pthread_mutex_unlock(&c->mu);
			break;
		}
		const pti_hdr *h = &p->hdr;
		if ((h->has & PTI_H_LR) && !have_lr++)
			st.lr = h->lr; // the first server's, as it is told
		if (p->dst == NULL && !p->lend)
			continue;
		p->k->ver = h->ver;
		if (h->ver < st.ver_min)
			st.ver_min = h->ver;
		if (h->staleness > st.stale_max)
			st.stale_max = h->staleness;
		st.stale_mean += (double)h->staleness;
		n_vals++;
	}
	if (n_vals > 0)
		st.stale_mean /= n_vals;
	if (rv == 0 && info != NULL)
		*info = st;
	return rv;
}

pti_hdr *pti_call_reply(pt_req *q, uint32_t i)
{
	return i < q->n ? &q->parts[i]->hdr : NULL;
}

const void *pti_call_payload(pt_req *q, uint32_t i)
{
	return i < q->n ? q->parts[i]->pay : NULL;
}

int pti_call_lends(const pt_req *q)
{
	return q->lent != NULL;
}

// lent_skew moves *m into a message whose body is one byte past where
// the allocator aligns it (the test hook, client_skew); *pay follows.
// Left as it is when that fails.
static void lent_skew(nng_msg **m, const void **pay)
{
	nng_msg *s;
	size_t len = nng_msg_len(*m);
	const uint8_t *body = nng_msg_body(*m);
	size_t at = (size_t)((const uint8_t *)*pay - body);
	// The byte trimmed off the front stays as headroom (nng 1.5 moves
	// the body back only when it empties).
	if (nng_msg_alloc(&s, len + 1) != 0)
		return;
	if (nng_msg_trim(s, 1) != 0) {
		nng_msg_free(s);
		return;
	}
	memcpy(nng_msg_body(s), body, len);
	nng_msg_free(*m);
	*m = s;
	*pay = (const uint8_t *)nng_msg_body(s) + at;
}

int pti_call_lend(pt_req *q, const float **vals, pt_lent **out)
{
	pti_client *c = q->c;
	client_part *p = q->lent;
	if (p == NULL || p->reply == NULL || p->pay == NULL)
		return pti_err_set(PT_EINVAL, "the request lends no values");
	pt_lent *l = calloc(1, sizeof(*l));
	if (l == NULL)
		return pti_err_set(PT_ENOMEM, "a loan");
	const void *pay = p->pay;
	uint64_t n = p->hdr.n;
	if (c->skew)
		lent_skew(&p->reply, &pay);
	// The values start a multiple of 4 bytes into the body, so they are
	// aligned where the body is; a float pointer cannot be handed out
	// where it is not: the loan carries an aligned copy then.
	// Values the server may change while they are read are copied
	// out too.
	int moving = shm_moving(c, p);
	if ((uintptr_t)pay % alignof(float) != 0 || moving) {
		if ((l->copy = malloc(n * sizeof(float))) == NULL) {
			free(l);
			return pti_err_set(PT_ENOMEM, "a loan of %llu values",
			    (unsigned long long)n);
		}
		int64_t ver;
		int rv = part_copy(c, p, l->copy, pay, &ver);
		if (rv != 0) {
			free(l->copy);
			free(l);
			return rv;
		}
	}
	l->p = p;
	l->m = p->reply;
	p->reply = NULL;
	p->pay = NULL;
	pthread_mutex_lock(&c->mu);
	c->copied += l->copy != NULL;
	l->next = c->loans;
	if (c->loans != NULL)
		c->loans->prev = l;
	c->loans = l;
	pthread_mutex_unlock(&c->mu);
	*vals = l->copy != NULL ? l->copy : (const float *)pay;
	*out = l;
	return 0;
}

void pti_lent_free(pti_client *c, pt_lent *l)
{
	if (l == NULL)
		return;
	pthread_mutex_lock(&c->mu);
	if (l->prev != NULL)
		l->prev->next = l->next;
	else
		c->loans = l->next;
	if (l->next != NULL)
		l->next->prev = l->prev;
	// Back to the part it came on, to carry that part's next request,
	// unless the part has kept another reply since (a request made
	// while this one was lent): then one is enough.
	client_part *p = l->p;
	nng_msg *drop = l->m;
	if (p->spare == NULL) {
		p->spare = l->m;
		drop = NULL;
	}
	pthread_mutex_unlock(&c->mu);
	nng_msg_free(drop);
	free(l->copy);
	free(l);
}

void pti_client_bytes(pti_client *c, uint64_t *tx, uint64_t *rx)
{
	pthread_mutex_lock(&c->mu);
	*tx = c->tx;
	*rx = c->rx;
	pthread_mutex_unlock(&c->mu);
}

void pti_client_counts(pti_client *c, uint64_t *reused, uint64_t *copied)
{
	pthread_mutex_lock(&c->mu);
	*reused = c->reused;
	*copied = c->copied;
	pthread_mutex_unlock(&c->mu);
}

void pti_call_free(pt_req *q)
{
	if (q == NULL)
		return;
	pti_client *c = q->c;
	pthread_mutex_lock(&c->mu);
	for (uint32_t i = 0; i < q->n; i++) {
		client_part *p = q->parts[i];
		if (p->state != PART_DONE && p->slot >= 0) {
			box_done(p, NNG_ECANCELED); // the box is given up
		} else if (p->state != PART_DONE) {
			// Freed before it was answered: let it finish first.
			pthread_mutex_unlock(&c->mu);
			nng_aio_cancel(p->aio);
			nng_aio_wait(p->aio);
			pthread_mutex_lock(&c->mu);
		}
		// The reply is kept to carry the part's next request. A lent
		// one comes back with pt_lent_free; till then the part keeps
		// what it has.
		if (p->reply != NULL) {
			nng_msg_free(p->spare);
			p->spare = p->reply;
			p->reply = NULL;
		}
		p->next = p->k->free;
		p->k->free = p;
	}
	pthread_mutex_unlock(&c->mu);
	free(q->parts);
	free(q);
}

// ---------------------------------------------------------------- collective calls

uint32_t pti_client_shard(const pti_client *c, uint32_t i, uint64_t *lo,
    uint64_t *hi)
{
	*lo = c->links[i].lo;
	*hi = c->links[i].hi;
	return c->n;
}

int64_t pti_client_ver(const pti_client *c, uint32_t i)
{
	return c->links[i].ver;
}

// client_all sends h (op and fields; the range set per server when vals
// is given) to every server, the reply's values into vals when that is
// given. On success *out holds the answered call, the caller's to
// pti_call_free.
static int client_all(pti_client *c, const pti_hdr *h, float *vals,
    pt_req **out, pti_client_step *info)
{
	pt_req *q = NULL;
	int rv = pti_call_new(c, &q);
	for (uint32_t i = 0; i < c->n && rv == 0; i++) {
		client_link *k = &c->links[i];
		pti_hdr r = *h;
		uint64_t n = 0;
		if (vals) {
			r.has |= PTI_H_RANGE;
			r.off = k->lo;
			n = r.n = k->hi - k->lo;
		}
		rv = pti_call_send(q, i, &r, NULL, n,
		    vals ? vals + k->lo : NULL);
	}
	if (rv == 0)
		rv = pti_call_wait(q, info);
	if (rv != 0) {
		pti_call_free(q); // waits for what was sent
		return rv;
	}
	*out = q;
	return 0;
}

int pti_client_simple(pti_client *c, uint32_t op, pti_hdr *replies)
{
	pti_hdr h;
	pt_req *q;
	pti_hdr_init(&h, op, c->role, c->rank);
	int rv = client_all(c, &h, NULL, &q, NULL);
	if (rv != 0)
		return rv;
	for (uint32_t i = 0; replies != NULL && i < c->n; i++)
		replies[i] = *pti_call_reply(q, i);
	pti_call_free(q);
	return 0;
}

// client_prove asks every server for its challenge and fills each hello
// template's proof of the secret: an HMAC over that server's nonce and
// who this client says it is.
static int client_prove(pti_client *c, pti_hdr *hellos)
{
	pti_hdr h;
	pt_req *q;
	pti_hdr_init(&h, PT_OP_CHALLENGE, c->role, c->rank);
	int rv = client_all(c, &h, NULL, &q, NULL);
	if (rv != 0)
		return rv;
	for (uint32_t i = 0; i < c->n && rv == 0; i++) {
		const pti_hdr *ch = pti_call_reply(q, i);
		if (!(ch->has & PTI_H_NONCE)) {
			rv = pti_err_set(PT_EPROTO, "server %u at %s sent no "
			    "challenge", i, c->links[i].url);
			break;
		}
		hellos[i].has |= PTI_H_MAC;
		pti_auth_mac(&c->secret, ch->nonce, c->role, c->rank, i,
		    (hellos[i].has & PTI_H_LAYOUT) ? hellos[i].layout_hash : 0,
		    hellos[i].mac);
	}
	pti_call_free(q);
	return rv;
}

int pti_client_hello(pti_client *c, const pti_layout *l, int mode,
    uint32_t workers, int64_t step, int64_t *start)
{
	int64_t at = -1;
	const pti_mode *m = pti_mode_of(mode);
	int lockstep = m != NULL && m->lockstep;
	pti_hdr *hellos = calloc(c->n, sizeof(pti_hdr));
	pt_req *q = NULL;
	uint8_t nonce[PT_NONCE_LEN], mac[PT_MAC_LEN];
	int rv = hellos ? pti_random(nonce, sizeof(nonce))
			: pti_err_set(PT_ENOMEM, "hello");
	for (uint32_t i = 0; i < c->n && rv == 0; i++) {
		// The hello brings this worker's own nonce: the reply must
		// prove the secret over it (mutual authentication).
		pti_hdr_init(&hellos[i], PT_OP_HELLO, c->role, c->rank);
		hellos[i].has |= PTI_H_LAYOUT | PTI_H_STEP | PTI_H_NONCE;
		memcpy(hellos[i].nonce, nonce, PT_NONCE_LEN);
		hellos[i].step = step;
		hellos[i].layout_hash = pti_layout_hash(l);
		hellos[i].n_params = l->n_params;
	}
	if (rv == 0)
		rv = client_prove(c, hellos);
	if (rv == 0)
		rv = pti_call_new(c, &q);
	for (uint32_t i = 0; i < c->n && rv == 0; i++)
		rv = pti_call_send(q, i, &hellos[i], NULL, 0, NULL);
	if (q != NULL) {
		int w = pti_call_wait(q, NULL);
		rv = rv ? rv : w;
	}
	for (uint32_t i = 0; i < c->n && rv == 0; i++) {
		const pti_hdr *h = pti_call_reply(q, i);
		pti_range r = pti_layout_shard(l, i, c->n);
		pti_auth_mac(&c->secret, nonce, PT_ROLE_SERVER, c->rank, i,
		    hellos[i].layout_hash, mac);
		if (!(h->has & PTI_H_MAC) ||
		    !pti_auth_equal(mac, h->mac, PT_MAC_LEN))
			rv = pti_err_set(PT_EAUTH, "server %u at %s did not "
			    "prove the job secret in its hello reply: it is "
			    "not this job's server (another job's, or an "
			    "impostor); no gradient went to it", i,
			    c->links[i].url);
		else if (!(h->has & PTI_H_SHARD) || h->server_rank != i ||
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
			    pti_mode_name((int)h->mode), h->n_workers,
			    pti_mode_name(mode), workers);
		c->mode = (int)h->mode;
		c->links[i].lo = h->lo;
		c->links[i].hi = h->hi;
		c->links[i].ver = h->ver;
		int64_t go = (h->has & PTI_H_STEP) ? h->step : 0;
		// Sync: go on from the lowest open step. A server that has
		// closed it already drops this worker's push for it; one that
		// has not may be waiting for exactly that push, since the
		// hello made this worker live there again, so waiting for the
		// servers to agree could wait forever.
		if (i == 0 || (lockstep ? go < at : go > at))
			at = go;
	}
	pti_call_free(q);
	free(hellos);
	if (rv == 0)
		*start = at;
	return rv;
}

int pti_client_shm_offered(const pti_client *c, const char **url)
{
	for (uint32_t i = 0; i < c->n; i++) {
		char path[PT_PATH_MAX];
		struct stat st;
		if (pti_shm_path(c->links[i].url, path, sizeof(path)) != 0 ||
		    stat(path, &st) != 0 || !S_ISSOCK(st.st_mode)) {
			*url = c->links[i].url;
			return 0;
		}
	}
	return 1;
}

int pti_client_shm(pti_client *c, int still)
{
	// The shards tile the model: the last one ends it.
	uint64_t n = c->links[c->n - 1].hi;
	int rv;
	if (c->mine.p == NULL &&
	    (rv = pti_shm_seg_create(&c->mine, (size_t)n * sizeof(float), 0,
		 "pstrain-worker")) != 0)
		return rv;
	if (still && c->view.p == NULL &&
	    (rv = pti_shm_view_init(&c->view, n)) != 0)
		return rv;
	for (uint32_t i = 0; i < c->n; i++) {
		client_link *k = &c->links[i];
		char path[PT_PATH_MAX];
		uint64_t lo, hi;
		pti_shm_seg theirs;
		if ((rv = pti_shm_path(k->url, path, sizeof(path))) != 0)
			return rv;
		pti_shm_seg box;
		if ((rv = pti_shm_seg_create(&box, sizeof(pti_box), 0,
			 "pstrain-box")) != 0)
			return rv;
		if ((rv = pti_shm_offer(path, &c->secret, c->rank, k->rank,
			 &c->mine, &box, c->timeout_s, &theirs, &lo, &hi)) != 0) {
			pti_shm_seg_fini(&box);
			return rv;
		}
		if (pti_shm_ctl_of(&theirs, hi - lo) == NULL) {
			size_t got = theirs.bytes;
			pti_shm_seg_fini(&theirs);
			pti_shm_seg_fini(&box);
			return pti_err_set(PT_EPROTO, "server %u at %s handed "
			    "over a segment of %zu bytes: no room for the "
			    "block after its %llu values", k->rank, k->url,
			    got, (unsigned long long)(hi - lo));
		}
		if (lo != k->lo || hi != k->hi) {
			pti_shm_seg_fini(&theirs);
			pti_shm_seg_fini(&box);
			return pti_err_set(PT_EPROTO, "server %u at %s handed "
			    "over [%llu, %llu) in shared memory; its hello "
			    "said [%llu, %llu)", k->rank, k->url,
			    (unsigned long long)lo, (unsigned long long)hi,
			    (unsigned long long)k->lo,
			    (unsigned long long)k->hi);
		}
		if (still && (rv = pti_shm_view_map(&c->view, &theirs, lo, hi, n,
				  &k->own_lo, &k->own_hi)) != 0) {
			pti_shm_seg_fini(&theirs);
			pti_shm_seg_fini(&box);
			return rv;
		}
		pthread_mutex_lock(&c->mu);
		rv = pti_shm_seg_replace(&k->theirs, &theirs, &k->old,
		    &k->n_old);
		// The new box replaces the old, whose parts still under way
		// (of a connection gone) fail; it stays mapped until close.
		box_fail_all(k);
		if (rv == 0)
			rv = pti_shm_seg_replace(&k->box, &box, &k->old,
			    &k->n_old);
		else
			pti_shm_seg_fini(&box);
		k->box_used = 0;
		k->box_dead = 0;
		pthread_mutex_unlock(&c->mu);
		if (rv != 0)
			return rv;
	}
	c->shm = 1;
	c->shm_still = still;
	return 0;
}

int pti_client_shm_view(const pti_client *c, uint64_t off, uint64_t n,
    float **grad, const float **vals)
{
	uint64_t all = c->links[c->n - 1].hi;
	if (!c->shm || !c->shm_still || c->view.p == NULL ||
	    c->mine.p == NULL || off > all || n > all - off)
		return 0;
	*grad = c->mine.p + off;
	*vals = c->view.p + off;
	return 1;
}

int pti_client_pull(pti_client *c, float *params, int64_t want_ver,
    pti_client_step *info)
{
	pti_hdr h;
	pt_req *q;
	pti_hdr_init(&h, PT_OP_PULL, c->role, c->rank);
	if (want_ver >= 0) {
		h.has |= PTI_H_VER;
		h.ver = want_ver;
	}
	int rv = client_all(c, &h, params, &q, info);
	if (rv == 0)
		pti_call_free(q);
	return rv;
}
