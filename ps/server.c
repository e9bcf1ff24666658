// ps/server.c - the parameter server's transport and serving loop, and
// pstrain.h's pt_server: nng REP contexts, connection events, the
// listener, open / serve / stop / close. The request handlers are
// ps/ops.c's, the shard's life and membership ps/shard.c's, the
// consistency rules ps/sync.c's and ps/clock.c's (one ops table per mode,
// ps/policy.h), replies and the wait list ps/reply.c's.
//
// Each of a fixed number of nng contexts receives one request at a time.
// Its callback decodes the request and runs the op's handler under the
// server lock. A handler either builds the reply at once, or parks the
// context on the wait list (a sync pull for the next version): no thread
// per worker, no polling. When a sync step closes, the replies of every
// parked context are built under the lock and sent after unlocking.
#include "ps/server.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <nng/nng.h>
#include <nng/protocol/reqrep0/rep.h>

#include "common/clock.h"
#include "common/err.h"
#include "common/job.h"
#include "common/later.h"
#include "common/mode.h"
#include "common/proto.h"
#include "common/testhook.h"
#include "common/transport.h"
#include "ps/server_impl.h"
#include "ps/shmsrv.h"

volatile sig_atomic_t pti_server_signal;
int pti_server_exit_on_hang;

// pt_server: a served ps_server (pstrain.h), with its own copy of the
// job's options and its process's.
struct pt_server {
	ps_server s;
	pti_jobopt job; // the job's options, the server's own copy
	char listen[PT_PATH_MAX];       // its address
	char ready_file[PT_PATH_MAX];   // "": none
	char gone_workers[PT_PATH_MAX]; // "R,R,...": lost before it started
	nng_listener l;
	int open;      // the socket is open
	char url[PT_PATH_MAX];
	ps_shmsrv shm; // --transport shm's handshakes (fd -1: none)
};
// ---------------------------------------------------------------- serving

static void ctx_recv(ps_ctx *x);

// reply_dropped drops x's reply when the test hook says so
// (pti_server_drop_due); the context goes on receiving.
static int reply_dropped(ps_ctx *x)
{
	if (!pti_server_drop_due(x->s->rank))
		return 0;
	nng_msg_free(nng_aio_get_msg(x->aio));
	nng_aio_set_msg(x->aio, NULL);
	ctx_recv(x);
	return 1;
}

// ctx_send_now sends x's reply; after --send-delay (common/later.h).
static void ctx_send_now(void *arg)
{
	ps_ctx *x = arg;
	nng_ctx_send(x->ctx, x->aio);
}

static void ctx_send(ps_ctx *x, nng_msg *m)
{
	x->state = CTX_SEND;
	nng_aio_set_msg(x->aio, m);
	if (!reply_dropped(x))
		pti_later(ctx_send_now, x);
}

static void ctx_recv(ps_ctx *x)
{
	x->state = CTX_RECV;
	nng_ctx_recv(x->ctx, x->aio);
}

// ctx_reply is an nng context's send (server_impl.h's ps_ctx).
static void ctx_reply(ps_ctx *x, nng_msg *m)
{
	if (m == NULL)
		ctx_recv(x);
	else
		ctx_send(x, m);
}

static void server_stop(ps_server *s)
{
	pthread_mutex_lock(&s->mu);
	s->stop = 1;
	pthread_cond_signal(&s->cv);
	pthread_mutex_unlock(&s->mu);
}


// pipe_cb: a connection closed. If it was a worker's, that worker is lost;
// if that worker had said done, it can no longer finish the job, which
// falls to the next (the workers watch first_live in stats).
static void pipe_cb(nng_pipe p, nng_pipe_ev ev, void *arg)
{
	ps_server *s = arg;
	ps_ctx *wake = NULL;
	uint32_t id = (uint32_t)nng_pipe_id(p);
	char name[sizeof(((ps_peer *)0)->name)];
	if (ev == NNG_PIPE_EV_ADD_PRE) {
		(void)pti_transport_widen(p);
		pti_peer_name(p, name, sizeof(name));
		pthread_mutex_lock(&s->mu);
		ps_peer *q = pti_peer_add(s, id);
		if (q != NULL) {
			snprintf(q->name, sizeof(q->name), "%s", name);
			(void)nng_pipe_get_addr(p, NNG_OPT_REMADDR, &q->addr);
		} else if (pti_note_due(++s->conn_closed)) {
			pti_log(PT_LOG_WARN, "server %u: refusing the connection "
			    "of %s: no slot for it (%llu closed so far)",
			    s->rank, name, (unsigned long long)s->conn_closed);
		}
		if (s->n_evict > 0)
			pthread_cond_signal(&s->cv); // the serve loop closes them
		pthread_mutex_unlock(&s->mu);
		// Closing this pipe here is nng's way to refuse it: never
		// added, never seen. Another pipe is never closed here.
		if (q == NULL)
			nng_pipe_close(p);
		return;
	}
	pthread_mutex_lock(&s->mu);
	pti_server_pipe_removed(s, id, &wake);
	pthread_mutex_unlock(&s->mu);
	pti_server_send_woken(wake);
}
// stop_delay sleeps between the shutdown reply and the stop when the
// test hook PSTRAIN_TEST_STOP_DELAY_MS asks for it: the finishing worker
// has its reply and exits while this server still serves the others.
static void stop_delay(void)
{
	const char *e = pti_test_hook("PSTRAIN_TEST_STOP_DELAY_MS");
	unsigned ms;
	if (e != NULL && sscanf(e, "%u", &ms) == 1)
		usleep((useconds_t)ms * 1000);
}

static void ctx_cb(void *arg)
{
	ps_ctx *x = arg;
	ps_server *s = x->s;
	int rv = nng_aio_result(x->aio);

	if (x->state == CTX_SEND) {
		if (rv != 0)
			nng_msg_free(nng_aio_get_msg(x->aio));
		if (x->stop_after) {
			stop_delay();
			server_stop(s);
			return;
		}
		if (rv == NNG_ECLOSED)
			return;
		ctx_recv(x);
		return;
	}
	if (rv != 0) {
		if (rv != NNG_ECLOSED && rv != NNG_ECANCELED)
			ctx_recv(x);
		return;
	}
	nng_msg *m = nng_aio_get_msg(x->aio);
	nng_aio_set_msg(x->aio, NULL); // parked contexts must hold nothing
	ps_ctx *wake = NULL;
	pthread_mutex_lock(&s->mu);
	nng_msg *reply = pti_server_handle(s, x, m, &wake);
	// Read under the lock: once unlocked, a parked x may be woken, sent
	// and re-armed by another thread at any moment.
	int parked = reply == NULL && x->state == CTX_WAIT;
	pthread_mutex_unlock(&s->mu);
	if (reply != NULL)
		ctx_send(x, reply);
	else if (!parked)
		ctx_recv(x); // no memory for a reply: drop it
	pti_server_send_woken(wake);
}

// server_ready works out the address workers dial (the port chosen for
// ":0"), says it, and writes it to --ready-file when one is set.
static int server_ready(pt_server *ps)
{
	ps_server *s = &ps->s;
	char tmp[PT_PATH_MAX + 8];
	pti_transport_bound_url(ps->l, ps->listen, ps->url, sizeof(ps->url));
	pti_log(PT_LOG_INFO, "server %u: listening on %s, shard [%llu, %llu) of "
	    "%llu parameters, %s, %u workers, steps up to %lld", ps->s.rank,
	    ps->url, (unsigned long long)s->lo, (unsigned long long)s->hi,
	    (unsigned long long)s->layout.n_params, pti_mode_name(ps->job.mode),
	    ps->job.workers, (long long)s->step_max);
	s->ready_s = pti_wall_s() - s->t0;
	if (ps->ready_file[0] == '\0')
		return 0;
	snprintf(tmp, sizeof(tmp), "%s.tmp", ps->ready_file);
	FILE *f = fopen(tmp, "w");
	if (f == NULL || fprintf(f, "%s\n", ps->url) < 0 || fclose(f) != 0 ||
	    rename(tmp, ps->ready_file) != 0)
		return pti_err_set(PT_EIO, "--ready-file %s: %s",
		    ps->ready_file, strerror(errno));
	return 0;
}

// close_watch: nng 1.5's close can wait forever when requests race it
// (nanomsg/nng#1813, seen here when many workers poll as the job ends).
// Everything is written by then, so in `pstrain server`, which sets
// pti_server_exit_on_hang, a close that has not returned in CLOSE_WAIT_S
// seconds ends the process with the status it would have had. A program
// that embeds the server is not ended behind its back: its close waits.
#define CLOSE_WAIT_S 3
typedef struct close_watch {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int done, rv;
	uint32_t rank;
} close_watch;

static void *close_watch_run(void *arg)
{
	close_watch *w = arg;
	pthread_mutex_lock(&w->mu);
	double until = pti_clock_s() + CLOSE_WAIT_S;
	while (!w->done && pti_clock_s() < until)
		pti_cond_wait_ms(&w->cv, &w->mu, 100);
	if (!w->done) {
		pti_log(PT_LOG_WARN, "server %u: closing the socket did not finish "
		    "in %d s; exiting without it", w->rank, CLOSE_WAIT_S);
		_exit(w->rv == 0 ? 0 : 1);
	}
	pthread_mutex_unlock(&w->mu);
	return NULL;
}

// server_close stops every context, whose callback then frees any message
// it held (parked contexts hold none), and closes the socket.
static void server_close(ps_server *s, int rv)
{
	close_watch w = {.done = 0, .rv = rv, .rank = s->rank};
	pti_later_flush(); // the replies still held go before the stop
	for (uint32_t i = 0; s->ctxs != NULL && i < s->n_ctx; i++)
		if (s->ctxs[i].aio != NULL)
			nng_aio_stop(s->ctxs[i].aio);
	pthread_t t;
	pthread_mutex_init(&w.mu, NULL);
	pthread_cond_init(&w.cv, NULL);
	int watching = pti_server_exit_on_hang &&
		       pthread_create(&t, NULL, close_watch_run, &w) == 0;
	nng_close(s->sock);
	if (watching) {
		pthread_mutex_lock(&w.mu);
		w.done = 1;
		pthread_cond_signal(&w.cv);
		pthread_mutex_unlock(&w.mu);
		pthread_join(t, NULL);
	}
	pthread_cond_destroy(&w.cv);
	pthread_mutex_destroy(&w.mu);
}
// ---------------------------------------------------------------- public

// server_listen opens the socket, its contexts and the listener.
static int server_listen(pt_server *ps)
{
	ps_server *s = &ps->s;
	int rv;
	if ((rv = nng_rep0_open(&s->sock)) != 0)
		return pti_err_set(PT_ETRANSPORT, "server %u: %s", ps->s.rank,
		    nng_strerror(rv));
	ps->open = 1;
	// Bound what one peer can make us buffer: the largest legal message
	// of this job is a header and a shard.
	s->recv_max = 4 + PT_HDR_MAX + 4 + (size_t)s->n * sizeof(float);
	// A rows request of a table may be larger than the shard.
	if (s->layout.n_tables > 0 && s->recv_max < PTI_ROWS_BYTES_MAX)
		s->recv_max = PTI_ROWS_BYTES_MAX;
	nng_socket_set_size(s->sock, NNG_OPT_RECVMAXSZ, s->recv_max);
	s->n_ctx = PS_N_CTX(ps->job.workers);
	if ((s->ctxs = calloc(s->n_ctx, sizeof(ps_ctx))) == NULL)
		return pti_err_set(PT_ENOMEM, "server contexts");
	for (uint32_t i = 0; i < s->n_ctx; i++) {
		ps_ctx *x = &s->ctxs[i];
		x->s = s;
		x->send = ctx_reply;
		if ((rv = nng_aio_alloc(&x->aio, ctx_cb, x)) != 0 ||
		    (rv = nng_ctx_open(&x->ctx, s->sock)) != 0)
			return pti_err_set(PT_ETRANSPORT, "server %u: %s",
			    ps->s.rank, nng_strerror(rv));
	}
	if ((rv = pti_transport_listen(&ps->l, s->sock, ps->listen)) != 0)
		return pti_err_set(PT_ETRANSPORT, "server %u: listen on %s: %s",
		    ps->s.rank, ps->listen, nng_strerror(rv));
	nng_pipe_notify(s->sock, NNG_PIPE_EV_ADD_PRE, pipe_cb, s);
	nng_pipe_notify(s->sock, NNG_PIPE_EV_REM_POST, pipe_cb, s);
	int port;
	if (nng_listener_get_int(ps->l, NNG_OPT_TCP_BOUND_PORT, &port) == 0 &&
	    port > 0 && port < 65536)
		s->port = (uint16_t)port; // tcp, tls: see pti_peers_idle
	for (uint32_t i = 0; i < s->n_ctx; i++)
		ctx_recv(&s->ctxs[i]);
	return server_ready(ps);
}

// server_free undoes what open did, however far it got; rv is the
// status the process would exit with, should closing hang.
static void server_free(pt_server *ps, int rv)
{
	pti_shmsrv_stop(&ps->shm);
	pti_box_stop_all(&ps->s); // their requests may wake nng's contexts
	if (ps->open)
		server_close(&ps->s, rv);
	pti_box_free_all(&ps->s);
	pti_server_fini(&ps->s);
	free(ps);
}

// server_check: the job's options, and this server's rank and address
// among them (PT_EINVAL naming what is wrong).
static int server_check(const pti_jobopt *o, const pti_server_proc *p)
{
	int rv;
	if ((rv = pti_jobopt_check(o)) != 0)
		return rv;
	if (!pti_mode_of(o->mode)->servers)
		return pti_err_set(PT_EINVAL, "--mode %s runs no servers: "
		    "start only its workers", pti_mode_name(o->mode));
	if (o->checkpoint_every[0] != '\0' && o->checkpoint_dir[0] == '\0')
		return pti_err_set(PT_EINVAL,
		    "--checkpoint-every needs --checkpoint-dir D");
	return pti_jobopt_check_proc(o, PT_CMD_SERVER, p->rank, p->listen);
}

int pt_server_open(pt_server **out, const pt_job *job, uint32_t rank,
    const char *url)
{
	pti_server_proc p = {rank, url, "", "", 0, 0};
	return pti_server_open(out, job, &p);
}

int pti_server_open(pt_server **out, const pt_job *job,
    const pti_server_proc *p)
{
	pt_server *ps = calloc(1, sizeof(*ps));
	int rv;
	if (ps == NULL)
		return pti_err_set(PT_ENOMEM, "server");
	ps->shm.fd = ps->shm.stop[0] = ps->shm.stop[1] = -1; // none yet
	// The server's own copy: the job's options, with this process's.
	ps->job = job->o;
	if (p->listen == NULL || strlen(p->listen) >= sizeof(ps->listen) ||
	    strlen(p->ready_file) >= sizeof(ps->ready_file) ||
	    strlen(p->gone_workers) >= sizeof(ps->gone_workers)) {
		free(ps);
		return pti_err_set(PT_EINVAL, "server %u: no address, or one "
		    "too long, to listen on", p->rank);
	}
	strcpy(ps->listen, p->listen);
	strcpy(ps->ready_file, p->ready_file);
	strcpy(ps->gone_workers, p->gone_workers);
	pti_server_proc own = {p->rank, ps->listen, ps->ready_file,
	    ps->gone_workers, p->supervised, p->t0};
	if ((rv = server_check(&ps->job, &own)) != 0 ||
	    (rv = pti_server_init(&ps->s, &ps->job, &own, &job->l,
	    job->given)) != 0 ||
	    (rv = server_listen(ps)) != 0 ||
	    (ps->job.shm && (rv = pti_shmsrv_start(&ps->shm, &ps->s,
				 ps->url)) != 0)) {
		server_free(ps, rv);
		return rv;
	}
	*out = ps;
	return 0;
}

int pt_server_url(const pt_server *ps, char *buf, uint64_t size)
{
	if (strlen(ps->url) >= size)
		return pti_err_set(PT_EINVAL, "server %u: address %s does not "
		    "fit %llu bytes", ps->s.rank, ps->url,
		    (unsigned long long)size);
	strcpy(buf, ps->url);
	return 0;
}

int pt_server_serve(pt_server *ps)
{
	ps_server *s = &ps->s;
	double tables_at = 0, memory_at = 0;
	pthread_mutex_lock(&s->mu);
	while (!s->stop && !pti_server_signal) {
		pti_cond_wait_ms(&s->cv, &s->mu, 200);
		if (pti_clock_s() >= tables_at) {
			pti_server_write_tables(s);
			tables_at = pti_clock_s() + PS_TABLES_S;
		}
		ps_ctx *wake = NULL;
		pthread_mutex_unlock(&s->mu);
		pti_peers_idle(s);
		if (pti_clock_s() >= memory_at) { // only this thread writes it
			pti_server_sample_memory(s);
			memory_at = pti_clock_s() + 0.2;
		}
		pthread_mutex_lock(&s->mu);
		pti_server_timeouts(s, &wake);
		pti_server_alone(s, &wake);
		if (wake != NULL) {
			pthread_mutex_unlock(&s->mu);
			pti_server_send_woken(wake);
			pthread_mutex_lock(&s->mu);
		}
	}
	int orphaned = s->orphaned;
	pthread_mutex_unlock(&s->mu);
	if (orphaned)
		return pti_err_set(PT_ECLOSED, "server %u: no worker is left to "
		    "end the job (%u of %u finished)", ps->s.rank, s->n_done,
		    ps->job.workers);
	return 0;
}

void pt_server_stop(pt_server *ps)
{
	pthread_mutex_lock(&ps->s.mu);
	ps->s.stop = 1;
	pthread_cond_broadcast(&ps->s.cv);
	pthread_mutex_unlock(&ps->s.mu);
}

void pt_server_close(pt_server *ps)
{
	if (ps == NULL)
		return;
	ps_server *s = &ps->s;
	// nng reports a send done once the reply is queued, not written:
	// give a shutdown's reply a moment on the wire before closing.
	if (s->shutting)
		usleep(200 * 1000);
	if (pti_server_signal)
		pti_log(PT_LOG_WARN, "server %u: stopping on signal %d", ps->s.rank,
		    (int)pti_server_signal);
	pti_log(PT_LOG_INFO, "server %u: version %lld, %llu updates, %llu "
	    "rejected requests", ps->s.rank, (long long)s->version,
	    (unsigned long long)s->updates, (unsigned long long)s->rejected);
	if (ps->job.out[0] != '\0') {
		pti_server_sample_memory(s);
		pti_server_write_tables(s);
		pti_server_write_stats(s);
	}
	server_free(ps, 0);
}
