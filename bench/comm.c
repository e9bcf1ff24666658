// bench/comm.c - what a parameter server costs over the bare transport:
// round trips of n floats each way, pstrain's pushpull (one server, one
// worker, sync, through pstrain.h) against a raw nng REQ/REP exchange of
// the same bytes, on the same transport, rounds interleaved so that all
// see the same machine. The raw exchange is timed twice over ipc: with
// nng's socket buffers as the system gives them, and with the larger ones
// pstrain asks for (pti_transport_widen), which is the fair measure of
// what pstrain adds; over tcp the two are one exchange, timed once.
// pstrain's pushpull is timed twice: with its values copied into the
// caller's array (pt_wait), and lent (vals NULL, pt_wait_lent: read
// where they arrived, then pt_lent_free, so that the reply carries the
// next request). The raw exchange is also driven as pstrain's client
// drives its requests: an aio with a callback (send, then receive, each
// completion run on nng's task threads) and the caller waiting on a
// condition variable, which shows what that hand-over costs apart
// (`raw_cb`). And as pstrain sends a large pushpull: the raw exchange
// cut into the same pieces (client/api.c's worker_piece: pieces of at
// least 2^19 floats, at most 8), sent at once on a context each and
// answered by a server with as many contexts (`raw_chunks`): the raw
// rate pstrain's pieces could reach. Over ipc, pstrain's pushpull is also
// timed with --transport shm (the job option shm: the values through
// shared memory, only headers on the socket; `ps_shm`, copied into the
// caller's array as the first pstrain column, and `ps_shm_lent`, read
// where the server keeps them). The servers run as threads of this
// process, or with "procs" in a forked process of their own, as in a
// job.
//
//   comm URL_PREFIX N ROUNDS ITERS [procs]   e.g. comm ipc:///tmp/d 4352 7 200
//
// Prints one line per round: "raw_us raw_wide_us ps_us ps_lent_us
// raw_cb_us raw_chunks_us ps_shm_us ps_shm_lent_us" (mean; the shm
// figures are 0 over tcp
// round trip of ITERS exchanges after a warm-up), for bench/run.sh to
// take the medians of.
#include <malloc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <sys/wait.h>

#include <nng/nng.h>
#include <nng/protocol/reqrep0/rep.h>
#include <nng/protocol/reqrep0/req.h>

#include <pstrain.h>

#define BENCH_PROG "comm"
#include "bench/bench.h"

// cb_req: a raw REQ context driven by a callback, as client/client.c
// drives its parts: the send's completion posts the receive, and the
// receive's wakes the caller.
typedef struct cb_req {
	nng_ctx ctx;
	nng_aio *aio;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int receiving, done, rv;
	nng_msg *rep;
} cb_req;

static void cb_req_cb(void *arg)
{
	cb_req *x = arg;
	int rv = nng_aio_result(x->aio);
	if (!x->receiving && rv == 0) {
		x->receiving = 1;
		nng_ctx_recv(x->ctx, x->aio);
		return;
	}
	if (!x->receiving)
		nng_msg_free(nng_aio_get_msg(x->aio));
	pthread_mutex_lock(&x->mu);
	x->rep = rv == 0 ? nng_aio_get_msg(x->aio) : NULL;
	x->rv = rv;
	x->done = 1;
	pthread_cond_broadcast(&x->cv);
	pthread_mutex_unlock(&x->mu);
}

static void cb_req_open(cb_req *x, nng_socket req)
{
	int rv;
	pthread_mutex_init(&x->mu, NULL);
	pthread_cond_init(&x->cv, NULL);
	if ((rv = nng_ctx_open(&x->ctx, req)) != 0 ||
	    (rv = nng_aio_alloc(&x->aio, cb_req_cb, x)) != 0)
		die("raw callback context", rv, 1);
}

static void cb_req_close(cb_req *x)
{
	nng_aio_free(x->aio);
	nng_ctx_close(x->ctx);
	pthread_mutex_destroy(&x->mu);
	pthread_cond_destroy(&x->cv);
}

// cb_post sends m (taken) through x; cb_await waits for its reply and
// frees it (dies naming what on failure).
static void cb_post(cb_req *x, nng_msg *m)
{
	x->receiving = 0;
	x->done = 0;
	nng_aio_set_msg(x->aio, m);
	nng_ctx_send(x->ctx, x->aio);
}

static void cb_await(cb_req *x, const char *what)
{
	pthread_mutex_lock(&x->mu);
	while (!x->done)
		pthread_cond_wait(&x->cv, &x->mu);
	pthread_mutex_unlock(&x->mu);
	if (x->rv != 0)
		die(what, x->rv, 1);
	nng_msg_free(x->rep);
}

// cb_round: raw_round's exchange through x.
static double cb_round(cb_req *x, const float *g, size_t bytes,
    int iters)
{
	double t0 = 0;
	for (int i = -iters / 10 - 1; i < iters; i++) {
		if (i == 0)
			t0 = now_us();
		nng_msg *m;
		int rv;
		if ((rv = nng_msg_alloc(&m, bytes)) != 0)
			die("raw round trip", rv, 1);
		memcpy(nng_msg_body(m), g, bytes);
		cb_post(x, m);
		cb_await(x, "raw round trip (callback)");
	}
	return (now_us() - t0) / iters;
}

// The pieces of a pushpull of n floats, as client/api.c cuts them.
#define PIECE_MIN ((uint64_t)1 << 19)
#define PIECES_MAX RAW_CTXS

static uint64_t piece_of(uint64_t n)
{
	uint64_t k = (n + PIECE_MIN - 1) / PIECE_MIN;
	if (k > PIECES_MAX)
		k = PIECES_MAX;
	return k <= 1 ? n : (n + k - 1) / k;
}

// chunk_round: raw_round's exchange of n floats cut into pieces, each
// sent at once on a context of its own (xs), then every reply waited
// for.
static double chunk_round(cb_req *xs, const float *g, uint64_t n, int iters)
{
	uint64_t piece = piece_of(n);
	int k = (int)((n + piece - 1) / piece);
	double t0 = 0;
	for (int i = -iters / 10 - 1; i < iters; i++) {
		if (i == 0)
			t0 = now_us();
		for (int c = 0; c < k; c++) {
			uint64_t lo = (uint64_t)c * piece;
			uint64_t len = n - lo < piece ? n - lo : piece;
			nng_msg *m;
			int rv;
			if ((rv = nng_msg_alloc(&m, len * sizeof(float))) != 0)
				die("raw pieces", rv, 1);
			memcpy(nng_msg_body(m), g + lo, len * sizeof(float));
			cb_post(&xs[c], m);
		}
		for (int c = 0; c < k; c++)
			cb_await(&xs[c], "raw pieces");
	}
	return (now_us() - t0) / iters;
}

static void *ps_serve(void *arg)
{
	pt_server_serve(arg);
	return NULL;
}

// ps_round times pushpulls of n floats with their values copied into v,
// or with v NULL lent instead: read where they arrived (where the program
// would read them; as the raw side, it does not), the loan given back
// before the next step.
static double ps_round(pt_worker *w, uint64_t n, float *g, float *v,
    int64_t *step, int iters)
{
	double t0 = 0;
	for (int i = -iters / 10 - 1; i < iters; i++) {
		if (i == 0)
			t0 = now_us();
		pt_req *q;
		pt_lent *l = NULL;
		const float *lent;
		int rv;
		if ((rv = pt_pushpull(w, (*step)++, PT_ALL, 0, n, g, v, &q)) != 0 ||
		    (rv = v != NULL ? pt_wait(w, q)
				    : pt_wait_lent(w, q, &lent, &l)) != 0)
			die(v != NULL ? "pushpull" : "lent pushpull", rv, 0);
		pt_lent_free(w, l);
	}
	return (now_us() - t0) / iters;
}

// The serving side: raw REP sockets (nng's buffers, and over ipc widened
// ones; one that answers pieces) and a pstrain server of one n-float
// variable, each served by a thread; their addresses go to url[0] (raw),
// url[1] (raw, widened; "" over tcp), url[2] (pstrain) and url[3] (raw
// pieces, widened over ipc).
typedef struct serving {
	raw_srv rs, rw, rc;
	pt_job *job, *job_shm;
	pt_server *s, *s_shm;
	pthread_t pst, pst_shm;
} serving;

static void serve_open(serving *sv, const char *prefix, uint64_t n,
    char url[5][512])
{
	int rv, tcp = strncmp(prefix, "tcp://", 6) == 0;
	memset(sv, 0, sizeof(*sv));
	// tcp: the ports are picked by the system.
	snprintf(url[0], 512, tcp ? "%s:0" : "%s-raw", prefix);
	snprintf(url[1], 512, tcp ? "" : "%s-raww", prefix);
	snprintf(url[2], 512, tcp ? "%s:0" : "%s-ps", prefix);
	snprintf(url[3], 512, tcp ? "%s:0" : "%s-rawc", prefix);
	raw_open(&sv->rs, url[0], 512, n * sizeof(float), 0);
	raw_open_ctxs(&sv->rc, url[3], 512, 0, !tcp, RAW_CTXS);
	if (!tcp)
		raw_open(&sv->rw, url[1], 512, n * sizeof(float), 1);
	if ((rv = pt_job_alloc(&sv->job)) != 0 ||
	    pt_job_var(sv->job, "v", n, 0.0) < 0 ||
	    (rv = pt_job_set(sv->job, "lr", "0")) != 0 ||
	    (rv = pt_server_open(&sv->s, sv->job, 0, url[2])) != 0 ||
	    (rv = pt_server_url(sv->s, url[2], 512)) != 0)
		die("pstrain server", rv ? rv : PT_EINVAL, 0);
	pthread_create(&sv->pst, NULL, ps_serve, sv->s);
	url[4][0] = '\0';
	if (tcp)
		return;
	// The same server with its values in shared memory (url[4]).
	snprintf(url[4], 512, "%s-shm", prefix);
	if ((rv = pt_job_alloc(&sv->job_shm)) != 0 ||
	    pt_job_var(sv->job_shm, "v", n, 0.0) < 0 ||
	    (rv = pt_job_set(sv->job_shm, "lr", "0")) != 0 ||
	    (rv = pt_job_set(sv->job_shm, "shm", "1")) != 0 ||
	    (rv = pt_server_open(&sv->s_shm, sv->job_shm, 0, url[4])) != 0)
		die("pstrain server (shm)", rv ? rv : PT_EINVAL, 0);
	pthread_create(&sv->pst_shm, NULL, ps_serve, sv->s_shm);
}

static void serve_close(serving *sv)
{
	pt_server_stop(sv->s);
	pthread_join(sv->pst, NULL);
	pt_server_close(sv->s);
	pt_job_free(sv->job);
	if (sv->s_shm != NULL) {
		pt_server_stop(sv->s_shm);
		pthread_join(sv->pst_shm, NULL);
		pt_server_close(sv->s_shm);
		pt_job_free(sv->job_shm);
	}
	raw_close(&sv->rs);
	raw_close(&sv->rc);
	if (sv->rw.n > 0)
		raw_close(&sv->rw);
}

int main(int argc, char **argv)
{
	if (argc != 5 && !(argc == 6 && strcmp(argv[5], "procs") == 0)) {
		fprintf(stderr, "usage: comm URL_PREFIX N ROUNDS ITERS [procs]\n");
		return 2;
	}
	// As bin/pstrain does (cli/main.c): large messages from the heap,
	// kept for the next step. Both sides of the comparison share it.
	mallopt(M_ARENA_MAX, 1);
	mallopt(M_MMAP_THRESHOLD, 32 << 20);
	mallopt(M_TRIM_THRESHOLD, 1 << 30);
	const char *prefix = argv[1];
	uint64_t n = strtoull(argv[2], NULL, 10);
	int rounds = atoi(argv[3]), iters = atoi(argv[4]), rv;
	size_t bytes = n * sizeof(float);
	char url[5][512]; // raw, raw widened ("-" over tcp), pstrain,
			  // pieces, pstrain over shm ("-" over tcp)
	serving sv;
	int procs = argc == 6, up[2], down[2];
	pid_t child = -1;
	if (procs) {
		// "procs": the servers in a process of their own, as in a job
		// (forked before nng starts any thread). They say their
		// addresses on one pipe and stop when the other closes.
		if (pipe(up) != 0 || pipe(down) != 0 || (child = fork()) < 0)
			die("fork", PT_EIO, 0);
		if (child == 0) {
			close(up[0]);
			close(down[1]);
			serve_open(&sv, prefix, n, url);
			dprintf(up[1], "%s\n%s\n%s\n%s\n%s\n", url[0],
			    url[1][0] ? url[1] : "-", url[2], url[3],
			    url[4][0] ? url[4] : "-");
			close(up[1]);
			char c;
			while (read(down[0], &c, 1) > 0)
				;
			serve_close(&sv);
			_exit(0);
		}
		close(up[1]);
		close(down[0]);
		FILE *f = fdopen(up[0], "r");
		if (f == NULL || fscanf(f, "%511s %511s %511s %511s %511s",
				     url[0], url[1], url[2], url[3],
				     url[4]) != 5)
			die("the serving process", PT_EIO, 0);
		fclose(f);
		if (strcmp(url[1], "-") == 0)
			url[1][0] = '\0';
		if (strcmp(url[4], "-") == 0)
			url[4][0] = '\0';
	} else
		serve_open(&sv, prefix, n, url);

	nng_socket req, reqw, reqc;
	pt_job *job;
	pt_worker *w;
	int wide = url[1][0] != '\0'; // ipc: a widened raw exchange too
	raw_dial(&req, url[0], 0);
	if (wide)
		raw_dial(&reqw, url[1], 1);
	raw_dial(&reqc, url[3], wide);
	if ((rv = pt_job_alloc(&job)) != 0 ||
	    pt_job_var(job, "v", n, 0.0) < 0 ||
	    (rv = pt_job_set(job, "lr", "0")) != 0 ||
	    (rv = pt_worker_open(&w, job, 0, url[2])) != 0)
		die("pstrain worker", rv, 0);
	cb_req cr; // on the widened socket over ipc: pstrain's buffers
	cb_req_open(&cr, wide ? reqw : req);
	cb_req pieces[PIECES_MAX];
	for (int c = 0; c < PIECES_MAX; c++)
		cb_req_open(&pieces[c], reqc);
	float *g = calloc(n, sizeof(float)), *v = malloc(bytes);
	int64_t step = pt_worker_start(w), step_shm = 0;
	pt_job *job_shm = NULL;
	pt_worker *w_shm = NULL;
	if (url[4][0] != '\0') {
		if ((rv = pt_job_alloc(&job_shm)) != 0 ||
		    pt_job_var(job_shm, "v", n, 0.0) < 0 ||
		    (rv = pt_job_set(job_shm, "lr", "0")) != 0 ||
		    (rv = pt_job_set(job_shm, "shm", "1")) != 0 ||
		    (rv = pt_worker_open(&w_shm, job_shm, 0, url[4])) != 0)
			die("pstrain worker (shm)", rv, 0);
		step_shm = pt_worker_start(w_shm);
	}
	for (int r = 0; r < rounds; r++) {
		// Turn which goes first (raw, widened, copied, lent, callback,
		// pieces; then widened, copied, ..., raw; ...), so that none
		// always follows another's cache and allocator state.
		double t[8] = {0}; // raw, widened, copied, lent, cb, pieces,
				   // shm copied, shm lent
		for (int k = 0; k < 8; k++) {
			int which = (r + k) % 8;
			if (which == 0)
				t[0] = raw_round(req, g, bytes, iters);
			else if (which == 1 && wide)
				t[1] = raw_round(reqw, g, bytes, iters);
			else if (which == 2)
				t[2] = ps_round(w, n, g, v, &step, iters);
			else if (which == 3)
				t[3] = ps_round(w, n, g, NULL, &step, iters);
			else if (which == 4)
				t[4] = cb_round(&cr, g, bytes, iters);
			else if (which == 5)
				t[5] = chunk_round(pieces, g, n, iters);
			else if (which == 6 && w_shm != NULL)
				t[6] = ps_round(w_shm, n, g, v, &step_shm,
				    iters);
			else if (which == 7 && w_shm != NULL)
				t[7] = ps_round(w_shm, n, g, NULL, &step_shm,
				    iters);
		}
		if (!wide)
			t[1] = t[0]; // tcp: the same exchange
		printf("%.2f %.2f %.2f %.2f %.2f %.2f %.2f %.2f\n", t[0], t[1],
		    t[2], t[3], t[4], t[5], t[6], t[7]);
		fflush(stdout);
	}
	cb_req_close(&cr);
	if (w_shm != NULL) {
		pt_worker_close(w_shm);
		pt_job_free(job_shm);
	}
	for (int c = 0; c < PIECES_MAX; c++)
		cb_req_close(&pieces[c]);
	nng_close(reqc);
	pt_worker_close(w);
	pt_job_free(job);
	nng_close(req);
	if (wide)
		nng_close(reqw);
	if (procs) {
		close(down[1]);
		waitpid(child, NULL, 0);
	} else
		serve_close(&sv);
	free(g), free(v);
	return 0;
}
