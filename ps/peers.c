// ps/peers.c - the server's connections and what each has proven: a
// slot per nng pipe, the challenge and the hello's proof of the job secret
// (docs/PROTOCOL.md, "Authentication"), the binding of a worker's rank to
// its connection, refusals of what a connection has not proven, and the
// limits on connections that prove nothing (server_impl.h).
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/err.h"
#include "common/sockwatch.h"
#include "common/testhook.h"
#include "ps/server_impl.h"

// pti_peer_close closes a connection by id; never with the lock held
// (its removal runs pipe_cb, which takes it).
void pti_peer_close(uint32_t id)
{
	nng_pipe p = NNG_PIPE_INITIALIZER;
	p.id = id;
	nng_pipe_close(p);
}

// pti_note_due: log the first ten of a kind of refusal, then every thousandth,
// so that a flood cannot fill the disk through the log.
int pti_note_due(uint64_t count)
{
	return count <= 10 || count % 1000 == 0;
}

ps_peer *pti_peer_find(ps_server *s, uint32_t pipe)
{
	for (uint32_t i = 0; i < s->n_peers; i++)
		if (s->peers[i].pipe == pipe && pipe != 0)
			return &s->peers[i];
	return NULL;
}

void pti_peer_name(nng_pipe p, char *buf, size_t size)
{
	nng_sockaddr sa;
	uint64_t pid;
	snprintf(buf, size, "an unknown peer");
	if (nng_pipe_get_uint64(p, NNG_OPT_IPC_PEER_PID, &pid) == 0) {
		snprintf(buf, size, "local process %llu",
		    (unsigned long long)pid);
		return;
	}
	if (nng_pipe_get_addr(p, NNG_OPT_REMADDR, &sa) != 0)
		return;
	if (sa.s_family == NNG_AF_INET) {
		char ip[INET_ADDRSTRLEN];
		inet_ntop(AF_INET, &sa.s_in.sa_addr, ip, sizeof(ip));
		snprintf(buf, size, "%s:%u", ip, ntohs(sa.s_in.sa_port));
	} else if (sa.s_family == NNG_AF_INET6) {
		char ip[INET6_ADDRSTRLEN];
		inet_ntop(AF_INET6, sa.s_in6.sa_addr, ip, sizeof(ip));
		snprintf(buf, size, "[%s]:%u", ip, ntohs(sa.s_in6.sa_port));
	}
}

// pti_peer_add takes a slot for a new connection. When the unauthenticated
// ones are at their limit, the oldest of them gives way: its id is queued
// for the serve loop to close. Returns NULL when every slot holds an
// authenticated connection, or the queue is full (the serve loop behind a
// flood): the new one is then refused.
ps_peer *pti_peer_add(ps_server *s, uint32_t pipe)
{
	ps_peer *free_slot = NULL, *oldest = NULL;
	uint32_t unauth = 0;
	for (uint32_t i = 0; i < s->n_peers; i++) {
		ps_peer *p = &s->peers[i];
		if (p->pipe == 0) {
			if (free_slot == NULL)
				free_slot = p;
			continue;
		}
		if (p->authed)
			continue;
		unauth++;
		if (oldest == NULL || p->since < oldest->since)
			oldest = p;
	}
	if (oldest != NULL && (unauth >= s->unauth_max || free_slot == NULL)) {
		if (s->n_evict == s->n_peers)
			return NULL;
		s->evict[s->n_evict++] = oldest->pipe;
		s->conn_closed++;
		if (pti_note_due(s->conn_closed))
			pti_log(PT_LOG_WARN, "server %u: closing the connection of "
			    "%s: %u connections have not authenticated (%llu "
			    "closed so far)", s->rank, oldest->name,
			    s->unauth_max, (unsigned long long)s->conn_closed);
		oldest->pipe = 0; // its removal finds no slot: nothing to do
		if (free_slot == NULL)
			free_slot = oldest;
	}
	if (free_slot == NULL)
		return NULL;
	memset(free_slot, 0, sizeof(*free_slot));
	free_slot->pipe = pipe;
	free_slot->since = pti_clock_s();
	return free_slot;
}

// pti_peer_release takes every request parked by connection `pipe` off the
// wait list: nobody will read its reply. The contexts go to *wake with no
// message, which re-arms them.
void pti_peer_release(ps_server *s, uint32_t pipe, ps_ctx **wake)
{
	ps_ctx **pp = &s->waiting;
	while (*pp != NULL) {
		ps_ctx *x = *pp;
		if (x->r_pipe != pipe) {
			pp = &x->next;
			continue;
		}
		*pp = x->next;
		nng_aio_set_msg(x->aio, NULL);
		x->next = *wake;
		*wake = x;
	}
}

// pti_peer_refuse answers a request from a connection that has not proven
// the secret for what it asks: counted, logged with the peer (rate
// limited), and nothing else changes. The code is PT_ESTATE when a hello
// on this connection would mend it (a worker whose server restarted
// finds a new connection that has proven nothing, and rejoins), PT_EAUTH
// when it cannot (a wrong proof, a rank not proven, a role not allowed).
nng_msg *pti_peer_refuse(ps_server *s, const pti_hdr *h,
    const ps_peer *p, int code, const char *why)
{
	pti_hdr r;
	s->unauth++;
	s->rejected++;
	if (pti_note_due(s->unauth))
		pti_log(PT_LOG_WARN, "server %u: refused %s from %s: %s (%llu "
		    "refused so far)", s->rank, pti_op_name(h->op),
		    p ? p->name : "an unknown peer", why,
		    (unsigned long long)s->unauth);
	pti_hdr_init(&r, h->op, PT_ROLE_SERVER, s->rank);
	r.status = (uint32_t)code;
	snprintf(r.msg, sizeof(r.msg), "server %u: %s: %s", s->rank,
	    pti_op_name(h->op), why);
	return pti_server_reply(s, &r, NULL, 0);
}

// pti_op_challenge gives the connection a fresh nonce, good for one hello.
nng_msg *pti_op_challenge(ps_server *s, ps_ctx *x, const pti_hdr *h,
    const void *pay, ps_ctx **wake)
{
	(void)pay, (void)wake;
	ps_peer *p = pti_peer_find(s, x->r_pipe);
	if (p == NULL)
		return pti_peer_refuse(s, h, NULL, PT_ESTATE, "a connection this server "
		    "does not follow");
	int rv = pti_random(p->nonce, PT_NONCE_LEN);
	if (rv != 0)
		return pti_server_error(s, h, rv, pt_errmsg(rv));
	p->challenged = 1;
	pti_hdr r;
	pti_hdr_init(&r, h->op, PT_ROLE_SERVER, s->rank);
	r.has |= PTI_H_NONCE;
	memcpy(r.nonce, p->nonce, PT_NONCE_LEN);
	return pti_server_reply(s, &r, NULL, 0);
}

const char *pti_role_name(uint32_t role)
{
	return role == PT_ROLE_WORKER ? "worker" : role == PT_ROLE_CONTROL
							? "control client"
							: "peer";
}

// pti_hello_prove checks the hello's proof of the secret against the nonce
// this connection was given (once: a nonce is good for one hello). NULL,
// or the refusal to send.
nng_msg *pti_hello_prove(ps_server *s, ps_peer *p, const pti_hdr *h)
{
	uint8_t mac[PT_MAC_LEN];
	if (p == NULL || !p->challenged || !(h->has & PTI_H_MAC))
		return pti_peer_refuse(s, h, p, PT_ESTATE, "a hello must answer this "
		    "connection's challenge with a proof of the job secret");
	if (h->role != PT_ROLE_WORKER && h->role != PT_ROLE_CONTROL)
		return pti_peer_refuse(s, h, p, PT_EAUTH, "a hello must come "
		    "from a worker or a control client");
	uint64_t lh = h->role == PT_ROLE_WORKER ? h->layout_hash : 0;
	pti_auth_mac(&s->secret, p->nonce, h->role, h->rank, s->rank, lh,
	    mac);
	p->challenged = 0;
	// The test build's impostor: a server that takes any proof, for a
	// test that the worker checks its server's (tests/attack_test.sh).
	if (pti_test_hook("PSTRAIN_TEST_IMPOSTOR") != NULL)
		return NULL;
	if (!pti_auth_equal(mac, h->mac, PT_MAC_LEN)) {
		s->auth_failed++;
		return pti_peer_refuse(s, h, p, PT_EAUTH, "wrong proof of the job secret "
		    "(another job's secret, or none)");
	}
	return NULL;
}

// pti_hello_proof puts the server's own proof of the secret into the
// reply r to hello h: the MAC over the nonce the hello brought, with role
// server (so that it can never pass for a client's proof), the client's
// rank, this server's rank and the layout hash. Only a client that has
// proven the secret gets one.
void pti_hello_proof(const ps_server *s, const pti_hdr *h, pti_hdr *r)
{
	if (!(h->has & PTI_H_NONCE))
		return;
	r->has |= PTI_H_MAC;
	pti_auth_mac(&s->secret, h->nonce, PT_ROLE_SERVER, h->rank, s->rank,
	    h->role == PT_ROLE_WORKER ? h->layout_hash : 0, r->mac);
}

// pti_hello_bind binds the proven role and rank to the connection. A
// worker's rank belongs to one live connection: while another holds it
// (a second process of that rank, or anyone else who holds the secret),
// the hello is refused with PT_ESTATE, logged with both peers and
// counted; a worker restarted after its process died tries again until
// the dead one's connection is seen closed. NULL, or the refusal to send.
nng_msg *pti_hello_bind(ps_server *s, ps_peer *p, const pti_hdr *h,
    ps_ctx **wake)
{
	uint32_t controls = 0;
	(void)wake;
	for (uint32_t i = 0; i < s->n_peers; i++) {
		ps_peer *q = &s->peers[i];
		if (q == p || q->pipe == 0 || !q->authed)
			continue;
		controls += q->role == PT_ROLE_CONTROL;
		if (h->role == PT_ROLE_WORKER && q->role == PT_ROLE_WORKER &&
		    q->rank == h->rank) {
			pti_hdr r;
			s->rank_refused++;
			if (pti_note_due(s->rank_refused))
				pti_log(PT_LOG_WARN, "server %u: worker %u's "
				    "hello from %s refused: the live connection "
				    "of %s holds rank %u (%llu such hellos so "
				    "far)", s->rank, h->rank, p->name, q->name,
				    h->rank, (unsigned long long)s->rank_refused);
			pti_hdr_init(&r, h->op, PT_ROLE_SERVER, s->rank);
			r.status = PT_ESTATE;
			snprintf(r.msg, sizeof(r.msg), "server %u: hello: rank "
			    "%u is held by the live connection of %s (another "
			    "process of this rank?)", s->rank, h->rank, q->name);
			return pti_server_reply(s, &r, NULL, 0);
		}
	}
	if (h->role == PT_ROLE_CONTROL && controls >= PS_CONTROL_MAX)
		return pti_peer_refuse(s, h, p, PT_EAUTH,
		    "too many control connections");
	p->authed = 1;
	p->role = h->role;
	p->rank = h->rank;
	return NULL;
}

// peers_known: whether connection c of the kernel's is one of the
// server's peers. Under the lock.
static int peers_known(const ps_server *s, const pti_sock *c)
{
	for (uint32_t i = 0; i < s->n_peers; i++) {
		const nng_sockaddr *a = &s->peers[i].addr;
		if (s->peers[i].pipe == 0)
			continue;
		if (a->s_family == NNG_AF_INET &&
		    pti_sock_peer_is(c, AF_INET, &a->s_in.sa_addr,
			a->s_in.sa_port))
			return 1;
		if (a->s_family == NNG_AF_INET6 &&
		    pti_sock_peer_is(c, AF_INET6, a->s_in6.sa_addr,
			a->s_in6.sa_port))
			return 1;
	}
	return 0;
}

// peers_unseen shuts down, once a second, the connections to the
// listening port that nng has made no connection of ours (pipe) after
// --auth-timeout seconds of silence: a TLS handshake never begun, whose
// negotiation timeout nng 1.5.2 loses (common/sockwatch.h). Counted
// with the connections closed unauthenticated. Without the lock.
static void peers_unseen(ps_server *s)
{
	double now = pti_clock_s();
	if (s->port == 0 || now - s->scanned < PS_SCAN_S)
		return;
	s->scanned = now;
	if (s->scan == NULL &&
	    (s->scan = calloc(PS_SCAN_MAX, sizeof(pti_sock))) == NULL)
		return;
	int n = pti_sock_scan(s->port, s->scan, PS_SCAN_MAX), cut = 0;
	pthread_mutex_lock(&s->mu);
	for (int i = 0; i < n; i++)
		if (s->scan[i].quiet_s >= s->job->auth_timeout &&
		    !peers_known(s, &s->scan[i]))
			s->scan[cut++] = s->scan[i];
	pthread_mutex_unlock(&s->mu);
	for (int i = 0; i < cut; i++) {
		char name[80];
		if (pti_sock_cut(&s->scan[i]) != 0)
			continue;
		pthread_mutex_lock(&s->mu);
		uint64_t k = ++s->conn_closed;
		pthread_mutex_unlock(&s->mu);
		pti_sock_peer_name(&s->scan[i], name, sizeof(name));
		if (pti_note_due(k))
			pti_log(PT_LOG_WARN, "server %u: closing the connection "
			    "of %s: no handshake after %.0fs (%llu closed so "
			    "far)", s->rank, name, s->scan[i].quiet_s,
			    (unsigned long long)k);
	}
}

// pti_peers_idle closes connections that have not proven the secret within
// --auth-timeout seconds: whatever they hold (a half-sent message) goes with
// them, and those nng made no connection of (peers_unseen). Called without
// the lock.
void pti_peers_idle(ps_server *s)
{
	peers_unseen(s);
	uint32_t close_ids[256], n; // the idle rest go on the next tick
	do { // those that gave way to newer ones: all of them
		pthread_mutex_lock(&s->mu);
		for (n = 0; s->n_evict > 0 && n < 256; n++)
			close_ids[n] = s->evict[--s->n_evict];
		pthread_mutex_unlock(&s->mu);
		for (uint32_t i = 0; i < n; i++)
			pti_peer_close(close_ids[i]);
	} while (n == 256);
	double now = pti_clock_s();
	n = 0;
	pthread_mutex_lock(&s->mu);
	for (uint32_t i = 0; i < s->n_peers && n < 256; i++) {
		ps_peer *q = &s->peers[i];
		if (q->pipe == 0 || q->authed || now - q->since < s->job->auth_timeout)
			continue;
		s->conn_closed++;
		if (pti_note_due(s->conn_closed))
			pti_log(PT_LOG_WARN, "server %u: closing the connection of %s: "
			    "not authenticated after %.0fs (%llu requests, %s)",
			    s->rank, q->name, now - q->since,
			    (unsigned long long)q->requests, q->requests ?
			    "all refused" : "none complete");
		close_ids[n++] = q->pipe;
		q->pipe = 0;
	}
	pthread_mutex_unlock(&s->mu);
	for (uint32_t i = 0; i < n; i++)
		pti_peer_close(close_ids[i]);
}

// pti_peer_removed: connection id closed. One that never finished a
// request was refused by the size limit, gave up, or was a stranger: say
// which connection. What it had parked is released.
void pti_peer_removed(ps_server *s, uint32_t id, ps_ctx **wake)
{
	ps_peer *q = pti_peer_find(s, id);
	if (q != NULL) {
		if (!q->authed && q->requests == 0) {
			s->conn_closed++;
			if (pti_note_due(s->conn_closed))
				pti_log(PT_LOG_WARN, "server %u: %s closed its "
				    "connection after %.1fs without a complete "
				    "request (a message over the limit of %zu "
				    "bytes is refused this way)",
				    s->rank, q->name,
				    pti_clock_s() - q->since, s->recv_max);
		}
		q->pipe = 0;
	}
	pti_peer_release(s, id, wake);
}
