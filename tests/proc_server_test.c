// tests/proc_server_test.c - a real `pstrain server` process, spoken to
// over a real nng socket: the SGD it applies, and the garbage, truncated,
// hostile and out-of-turn requests it must refuse while serving on with
// its variables unchanged. The binary is $PSTRAIN (default bin/pstrain).
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <nng/nng.h>
#include <nng/protocol/reqrep0/req.h>

#include "common/layout.h"
#include "common/proto.h"
#include "common/shm.h"
#include "tests/test.h"

#define SPEC "mlp:8"
#define DATA "synthetic:100" // 64 features, 10 classes
#define SEED 5
#define LR 0.5
#define SRV_CONNS 8 // worker connections a case may open
// The job secret of every server these cases start (set in main).
#define SECRET "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"

// Each server is spoken to over several connections, as a job would: a
// stranger's (`sock`, which proves nothing), a control client's that has
// proven the secret, and one per worker rank once it says hello. rpc
// picks the connection from the request's own role and rank.
typedef struct srv {
	pid_t pid;
	char dir[64], url[128];
	nng_socket sock, ctl;
	nng_socket w[SRV_CONNS];
	int w_open[SRV_CONNS];
	pti_layout l;
	pti_range shard;
	uint32_t rank;
	int64_t step; // push_from's next step (each async push a new one)
} srv;

static nng_socket srv_dial(srv *s)
{
	nng_socket k;
	PT_TEST_OK(nng_req0_open(&k));
	nng_socket_set_ms(k, NNG_OPT_RECVTIMEO, 5000);
	nng_socket_set_ms(k, NNG_OPT_SENDTIMEO, 5000);
	PT_TEST_OK(nng_dial(k, s->url, NULL, 0));
	return k;
}

// rpc_on sends m (taken) on k and decodes the reply into h; values (if
// any) are copied to vals. Returns the reply's status, or -1 on
// transport failure.
static int rpc_on(nng_socket k, nng_msg *m, pti_hdr *h, float *vals)
{
	nng_msg *r;
	const void *pay;
	if (nng_sendmsg(k, m, 0) != 0) {
		nng_msg_free(m);
		return -1;
	}
	if (nng_recvmsg(k, &r, 0) != 0)
		return -1;
	int rv = pti_msg_decode(h, &pay, r);
	if (rv == 0 && vals != NULL && pay != NULL)
		memcpy(vals, pay, h->n * sizeof(float));
	nng_msg_free(r);
	return rv != 0 ? -1 : (int)h->status;
}

// prove asks k's challenge and says hello as role/rank with a proof of
// the secret (of a wrong one when `wrong`); the worker's layout hash and
// step are sent when lhash is not 0. The reply goes to *r when given.
static int prove_as(srv *s, nng_socket k, uint32_t role, uint32_t rank,
    uint64_t lhash, int64_t step, pti_hdr *r, int wrong)
{
	pti_hdr h, rr;
	nng_msg *m;
	pti_secret key;
	PT_TEST_OK(pti_secret_load(&key, NULL));
	key.key[0] ^= (uint8_t)wrong;
	pti_hdr_init(&h, PT_OP_CHALLENGE, role, rank);
	pti_msg_encode(&m, &h, NULL, 0);
	int rv = rpc_on(k, m, &rr, NULL);
	if (rv != 0)
		return rv;
	pti_hdr_init(&h, PT_OP_HELLO, role, rank);
	if (lhash != 0) {
		h.has |= PTI_H_LAYOUT | PTI_H_STEP;
		h.layout_hash = lhash;
		h.n_params = s->l.n_params;
		h.step = step;
	}
	h.has |= PTI_H_MAC;
	pti_auth_mac(&key, rr.nonce, role, rank, s->rank, lhash, h.mac);
	pti_msg_encode(&m, &h, NULL, 0);
	return rpc_on(k, m, r != NULL ? r : &rr, NULL);
}

// prove is prove_as with the right secret, trying again (for 30 s at
// most) while the rank is held by a connection the server has not yet
// seen close, as a worker does.
static int prove(srv *s, nng_socket k, uint32_t role, uint32_t rank,
    uint64_t lhash, int64_t step, pti_hdr *r)
{
	int rv;
	for (int i = 0; i < 3000; i++) {
		if ((rv = prove_as(s, k, role, rank, lhash, step, r, 0)) !=
		    PT_ESTATE)
			return rv;
		usleep(10 * 1000);
	}
	return rv;
}

static const char *srv_extra; // one more server flag, or NULL
static const char *self_exe;  // this program, for park_main

static const char *bin(void)
{
	const char *b = getenv("PSTRAIN");
	return b && *b ? b : "bin/pstrain";
}

// srv_start runs server `rank` of `servers` for `workers` workers.
static void srv_start(srv *s, const char *mode, int workers, int servers,
    int rank)
{
	char w[16], ns[16], r[16], ready[128], lr[32], seed[16];
	memset(s, 0, sizeof(*s));
	snprintf(s->dir, sizeof(s->dir), "/tmp/pt-srvtest-XXXXXX");
	if (mkdtemp(s->dir) == NULL)
		abort();
	snprintf(s->url, sizeof(s->url), "ipc://%s/sock", s->dir);
	snprintf(ready, sizeof(ready), "%s/ready", s->dir);
	snprintf(w, sizeof(w), "%d", workers);
	snprintf(ns, sizeof(ns), "%d", servers);
	snprintf(r, sizeof(r), "%d", rank);
	snprintf(lr, sizeof(lr), "%g", LR);
	snprintf(seed, sizeof(seed), "%d", SEED);
	s->pid = fork();
	if (s->pid == 0) {
		char *argv[] = {"pstrain", "server", "--mode", (char *)mode,
		    "--workers", w, "--servers", ns, "--rank", r, "--model",
		    SPEC, "--data", DATA, "--seed", seed, "--lr", lr, "--batch",
		    w, "--listen", s->url, "--ready-file", ready,
		    (char *)srv_extra, NULL};
		execv(bin(), argv);
		_exit(127);
	}
	for (int i = 0; i < 1000 && access(ready, F_OK) != 0; i++)
		usleep(10000);
	PT_TEST_TRUE(access(ready, F_OK) == 0);
	PT_TEST_OK(nng_req0_open(&s->sock));
	nng_socket_set_ms(s->sock, NNG_OPT_RECVTIMEO, 5000);
	// A server that died must fail the case, not hang it.
	nng_socket_set_ms(s->sock, NNG_OPT_SENDTIMEO, 5000);
	PT_TEST_OK(nng_dial(s->sock, s->url, NULL, 0));
	PT_TEST_OK(pti_layout_init(&s->l, SPEC, 64, 10));
	s->shard = pti_layout_shard(&s->l, (uint32_t)rank, (uint32_t)servers);
	s->rank = (uint32_t)rank;
	s->ctl = srv_dial(s);
	PT_TEST_TRUE(prove(s, s->ctl, PT_ROLE_CONTROL, 0, 0, 0, NULL) == 0);
}

// srv_start_flag starts a one-shard server for `workers` workers with one
// more server flag.
static void srv_start_flag(srv *s, const char *flag, const char *mode,
    int workers)
{
	srv_extra = flag;
	srv_start(s, mode, workers, 1, 0);
	srv_extra = NULL;
}

static int srv_exit_status(srv *s)
{
	int st = -1;
	for (int i = 0; i < 500; i++) {
		if (waitpid(s->pid, &st, WNOHANG) == s->pid)
			return st;
		usleep(10000);
	}
	kill(s->pid, SIGKILL);
	waitpid(s->pid, &st, 0);
	return -1;
}

static void srv_stop(srv *s)
{
	char path[128];
	nng_close(s->sock);
	nng_close(s->ctl);
	for (int i = 0; i < SRV_CONNS; i++)
		if (s->w_open[i])
			nng_close(s->w[i]);
	if (s->pid > 0 && waitpid(s->pid, NULL, WNOHANG) == 0) {
		kill(s->pid, SIGTERM);
		waitpid(s->pid, NULL, 0);
	}
	snprintf(path, sizeof(path), "%s/ready", s->dir);
	unlink(path);
	snprintf(path, sizeof(path), "%s/sock", s->dir);
	unlink(path);
	rmdir(s->dir);
}

// rpc sends m (taken) on the connection of the role and rank it claims:
// a worker's once it said hello, the control client's, else the
// stranger's.
static int rpc(srv *s, nng_msg *m, pti_hdr *h, float *vals)
{
	pti_hdr q;
	const void *pay;
	nng_socket k = s->sock;
	if (pti_msg_decode(&q, &pay, m) == 0) {
		if (q.role == PT_ROLE_WORKER && q.rank < SRV_CONNS &&
		    s->w_open[q.rank])
			k = s->w[q.rank];
		else if (q.role == PT_ROLE_CONTROL)
			k = s->ctl;
	}
	return rpc_on(k, m, h, vals);
}

// worker_conn opens worker rank's own connection.
static nng_socket worker_conn(srv *s, uint32_t rank)
{
	if (!s->w_open[rank]) {
		s->w[rank] = srv_dial(s);
		s->w_open[rank] = 1;
	}
	return s->w[rank];
}

static int send_hdr(srv *s, pti_hdr *req, const float *pay, uint64_t n,
    float *vals)
{
	nng_msg *m;
	pti_hdr h;
	if (pti_msg_encode(&m, req, pay, n) != 0)
		return -1;
	return rpc(s, m, &h, vals);
}

static int send_raw(srv *s, const void *b, size_t n, pti_hdr *h)
{
	nng_msg *m;
	nng_msg_alloc(&m, 0);
	nng_msg_append(m, b, n);
	return rpc(s, m, h, NULL);
}

// hello_step says hello as worker rank at step `step` on its own
// connection; the reply's step (where the worker is to go on) goes to *at.
static int hello_step(srv *s, uint32_t rank, int64_t step, int64_t *at)
{
	pti_hdr r;
	memset(&r, 0, sizeof(r));
	int rv = prove(s, worker_conn(s, rank), PT_ROLE_WORKER, rank,
	    pti_layout_hash(&s->l), step, &r);
	*at = (r.has & PTI_H_STEP) ? r.step : -1;
	return rv;
}

static int hello(srv *s, uint32_t rank)
{
	int64_t at;
	return hello_step(s, rank, 0, &at);
}

static int stats(srv *s, pti_hdr *h)
{
	pti_hdr req;
	nng_msg *m;
	pti_hdr_init(&req, PT_OP_STATS, PT_ROLE_CONTROL, 0);
	pti_msg_encode(&m, &req, NULL, 0);
	return rpc(s, m, h, NULL);
}

static int pull(srv *s, float *vals)
{
	pti_hdr h;
	pti_hdr_init(&h, PT_OP_PULL, PT_ROLE_CONTROL, 0);
	return send_hdr(s, &h, NULL, 0, vals);
}

static int push(srv *s, uint32_t op, uint32_t rank, int64_t step,
    const float *g, uint64_t off, uint64_t n, float *vals)
{
	pti_hdr h;
	pti_hdr_init(&h, op, PT_ROLE_WORKER, rank);
	h.has |= PTI_H_STEP | PTI_H_VER;
	h.step = step;
	h.ver = step;
	h.off = off;
	return send_hdr(s, &h, g, n, vals);
}

static uint64_t rejected(srv *s)
{
	pti_hdr h, req;
	nng_msg *m;
	pti_hdr_init(&req, PT_OP_STATS, PT_ROLE_CONTROL, 0);
	pti_msg_encode(&m, &req, NULL, 0);
	if (rpc(s, m, &h, NULL) != 0)
		return UINT64_MAX;
	return h.rejected;
}

static void test_server_initial_values(void)
{
	srv s;
	srv_start(&s, "sync", 1, 2, 1);
	uint64_t n = s.shard.hi - s.shard.lo;
	float *got = calloc(n, sizeof(float)), *want = calloc(n, 4);
	PT_TEST_TRUE(pull(&s, got) == 0);
	pti_layout_init_values(want, &s.l, SEED, s.shard.lo, s.shard.hi);
	PT_TEST_TRUE(memcmp(got, want, n * sizeof(float)) == 0);
	free(got);
	free(want);
	srv_stop(&s);
}

static void test_server_sync_sgd_mean(void)
{
	// Two workers; the step closes when both have pushed, applying
	// p - lr * (g0 + g1) / 2, and both pulls see version 1.
	srv s;
	srv_start(&s, "sync", 2, 1, 0);
	uint64_t n = s.l.n_params;
	float *p0 = malloc(n * 4), *g0 = malloc(n * 4), *g1 = malloc(n * 4);
	float *got = malloc(n * 4);
	PT_TEST_TRUE(pull(&s, p0) == 0);
	for (uint64_t i = 0; i < n; i++) {
		g0[i] = (float)(i % 7) * 0.25f;
		g1[i] = -(float)(i % 3);
	}
	PT_TEST_TRUE(hello(&s, 0) == 0 && hello(&s, 1) == 0);
	PT_TEST_TRUE(push(&s, PT_OP_PUSH, 1, 0, g1, 0, n, NULL) == 0);
	// Before the step closes, values are unchanged.
	PT_TEST_TRUE(pull(&s, got) == 0);
	PT_TEST_TRUE(memcmp(got, p0, n * 4) == 0);
	PT_TEST_TRUE(push(&s, PT_OP_PUSHPULL, 0, 0, g0, 0, n, got) == 0);
	int bad = 0;
	for (uint64_t i = 0; i < n; i++) {
		float want = p0[i] - (float)(LR / 2) * (g0[i] + g1[i]);
		bad += fabsf(got[i] - want) > 1e-6f * (1 + fabsf(want));
	}
	PT_TEST_TRUE(bad == 0);
	free(p0), free(g0), free(g1), free(got);
	srv_stop(&s);
}

static void test_server_async_applies_each(void)
{
	srv s;
	srv_start(&s, "async", 2, 1, 0);
	uint64_t n = s.l.n_params;
	float *p0 = malloc(n * 4), *g = malloc(n * 4), *got = malloc(n * 4);
	PT_TEST_TRUE(pull(&s, p0) == 0);
	for (uint64_t i = 0; i < n; i++)
		g[i] = 1.0f;
	PT_TEST_TRUE(hello(&s, 0) == 0 && hello(&s, 1) == 0);
	pti_hdr h, r;
	nng_msg *m;
	pti_hdr_init(&h, PT_OP_PUSHPULL, PT_ROLE_WORKER, 1);
	h.has |= PTI_H_VER | PTI_H_STEP;
	h.ver = 0;
	h.step = 0;
	pti_msg_encode(&m, &h, g, n);
	PT_TEST_TRUE(rpc(&s, m, &r, got) == 0);
	PT_TEST_TRUE(r.staleness == 0 && r.ver == 1);
	h.step = 1; // the next step, still from version 0: staleness 1
	pti_msg_encode(&m, &h, g, n);
	PT_TEST_TRUE(rpc(&s, m, &r, got) == 0);
	PT_TEST_TRUE(r.staleness == 1 && r.ver == 2);
	PT_TEST_NEAR(got[3], p0[3] - 2 * LR, 1e-6);
	// The same push again is a replay: refused, nothing applied.
	uint64_t before = rejected(&s);
	pti_msg_encode(&m, &h, g, n);
	PT_TEST_TRUE(rpc(&s, m, &r, NULL) == PT_ESTATE);
	PT_TEST_TRUE(rejected(&s) == before + 1);
	PT_TEST_TRUE(pull(&s, p0) == 0);
	PT_TEST_TRUE(memcmp(p0, got, n * 4) == 0);
	free(p0), free(g), free(got);
	srv_stop(&s);
}

// push_from sends an async pushpull of g computed from version ver and
// returns the reply's staleness and lr.
static int push_from(srv *s, int64_t ver, const float *g, float *vals,
    pti_hdr *r)
{
	pti_hdr h;
	nng_msg *m;
	pti_hdr_init(&h, PT_OP_PUSHPULL, PT_ROLE_WORKER, 0);
	h.has |= PTI_H_VER | PTI_H_STEP;
	h.ver = ver;
	h.step = s->step++;
	pti_msg_encode(&m, &h, g, s->l.n_params);
	return rpc(s, m, r, vals);
}

static void test_server_staleness_lr(void)
{
	// --staleness-lr: each update uses lr / max(1, staleness).
	srv s;
	pti_hdr r;
	srv_start_flag(&s, "--staleness-lr", "async", 1);
	uint64_t n = s.l.n_params;
	float *p0 = malloc(n * 4), *g = malloc(n * 4), *got = malloc(n * 4);
	PT_TEST_TRUE(pull(&s, p0) == 0);
	for (uint64_t i = 0; i < n; i++)
		g[i] = 0.5f + (float)(i % 5);
	PT_TEST_TRUE(hello(&s, 0) == 0);
	double want_lr[4] = {LR, LR, LR / 2, LR / 3}; // staleness 0, 1, 2, 3
	double sum = 0;
	for (int k = 0; k < 4; k++) {
		PT_TEST_TRUE(push_from(&s, 0, g, got, &r) == 0);
		PT_TEST_TRUE(r.staleness == k);
		PT_TEST_NEAR(r.lr, want_lr[k], 1e-12);
		sum += want_lr[k];
	}
	int bad = 0;
	for (uint64_t i = 0; i < n; i++) {
		// The server applies in float, one update at a time.
		float p = p0[i];
		for (int k = 0; k < 4; k++)
			p -= (float)want_lr[k] * g[i];
		bad += got[i] != p;
	}
	PT_TEST_TRUE(bad == 0);
	PT_TEST_TRUE(sum > 0);
	free(p0), free(g), free(got);
	srv_stop(&s);
}

static void test_server_max_staleness_drops(void)
{
	srv s;
	pti_hdr r, st, req;
	nng_msg *m;
	srv_start_flag(&s, "--max-staleness=1", "async", 1);
	uint64_t n = s.l.n_params;
	float *g = calloc(n, 4), *a = malloc(n * 4), *b = malloc(n * 4);
	g[0] = 1;
	PT_TEST_TRUE(hello(&s, 0) == 0);
	PT_TEST_TRUE(push_from(&s, 0, g, a, &r) == 0 && r.ver == 1);
	PT_TEST_TRUE(push_from(&s, 0, g, a, &r) == 0 && r.ver == 2);
	// staleness 2 > 1: dropped, counted, values unchanged
	PT_TEST_TRUE(push_from(&s, 0, g, b, &r) == 0 && r.ver == 2);
	PT_TEST_TRUE(memcmp(a, b, n * 4) == 0);
	pti_hdr_init(&req, PT_OP_STATS, PT_ROLE_CONTROL, 0);
	pti_msg_encode(&m, &req, NULL, 0);
	PT_TEST_TRUE(rpc(&s, m, &st, NULL) == 0);
	PT_TEST_TRUE(st.dropped == 1 && st.updates == 2);
	free(g), free(a), free(b);
	srv_stop(&s);
}

// test_server_step_max: with --step-max 50 a worker's push at step 50
// is applied and one at 51 (or far beyond) is refused, naming the bound,
// and changes nothing; a hello beyond it is refused too.
// step_push pushes worker 0's gradient g for step `step`, computed from
// version 0, on its own connection; the reply goes to *r.
static int step_push(srv *s, int64_t step, const float *g, pti_hdr *r)
{
	pti_hdr h;
	nng_msg *m;
	pti_hdr_init(&h, PT_OP_PUSH, PT_ROLE_WORKER, 0);
	h.has |= PTI_H_STEP | PTI_H_VER | PTI_H_RANGE;
	h.step = step;
	h.ver = 0;
	h.n = s->l.n_params;
	pti_msg_encode(&m, &h, g, h.n);
	return rpc_on(s->w[0], m, r, NULL);
}

static void test_server_step_max(void)
{
	srv s;
	pti_hdr h, r;
	srv_start_flag(&s, "--step-max=50", "async", 1);
	uint64_t n = s.l.n_params;
	float *g = calloc(n, 4), *a = malloc(n * 4), *b = malloc(n * 4);
	g[0] = 1;
	PT_TEST_TRUE(hello(&s, 0) == 0);
	PT_TEST_TRUE(step_push(&s, 50, g, &r) == 0 && r.ver == 1);
	PT_TEST_TRUE(pull(&s, a) == 0);
	PT_TEST_TRUE(step_push(&s, 51, g, &r) == PT_ERANGE);
	PT_TEST_STR_HAS(r.msg, "steps are from 0 to 50 (--step-max)");
	PT_TEST_TRUE(step_push(&s, (int64_t)1 << 40, g, &r) == PT_ERANGE);
	PT_TEST_TRUE(pull(&s, b) == 0 && memcmp(a, b, n * 4) == 0);
	PT_TEST_TRUE(hello_step(&s, 0, 51, &h.step) == PT_ERANGE);
	free(g), free(a), free(b);
	srv_stop(&s);
}

// test_server_grad_bound: with --grad-bound 10, once a range has 32
// pushes, a push 20 times their median RMS is refused, naming the bound,
// and changes nothing, while one 5 times it is applied; a window of
// zeros (a dead layer) has the floor 1e-4 as its median, so a gradient
// of RMS 1e-4 passes and one of 0.01 does not; by default (1e4) 3e38 is
// refused.
static int grad_push(srv *s, float v, pti_hdr *r)
{
	uint64_t n = s->l.n_params;
	float *g = malloc(n * 4);
	for (uint64_t i = 0; i < n; i++)
		g[i] = v;
	int rv = push_from(s, 0, g, NULL, r);
	free(g);
	return rv;
}

static void test_server_grad_bound(void)
{
	srv s;
	pti_hdr r;
	srv_start_flag(&s, "--grad-bound=10", "async", 1);
	uint64_t n = s.l.n_params;
	float *a = malloc(n * 4), *b = malloc(n * 4);
	PT_TEST_TRUE(hello(&s, 0) == 0);
	for (int i = 0; i < 32; i++)
		PT_TEST_TRUE(grad_push(&s, 1e-3f, &r) == 0);
	PT_TEST_TRUE(pull(&s, a) == 0);
	uint64_t before = rejected(&s);
	PT_TEST_TRUE(grad_push(&s, 2e-2f, &r) == PT_ERANGE);
	PT_TEST_STR_HAS(r.msg, "(--grad-bound 10)");
	PT_TEST_TRUE(rejected(&s) == before + 1);
	PT_TEST_TRUE(pull(&s, b) == 0 && memcmp(a, b, n * 4) == 0);
	PT_TEST_TRUE(grad_push(&s, 5e-3f, &r) == 0);
	PT_TEST_TRUE(pull(&s, b) == 0 && memcmp(a, b, n * 4) != 0);
	srv_stop(&s);

	srv_start_flag(&s, "--grad-bound=10", "async", 1);
	PT_TEST_TRUE(hello(&s, 0) == 0);
	for (int i = 0; i < 32; i++)
		PT_TEST_TRUE(grad_push(&s, 0.0f, &r) == 0);
	PT_TEST_TRUE(grad_push(&s, 1e-4f, &r) == 0);
	PT_TEST_TRUE(grad_push(&s, 1e-2f, &r) == PT_ERANGE);
	srv_stop(&s);

	srv_start(&s, "async", 1, 1, 0);
	PT_TEST_TRUE(hello(&s, 0) == 0);
	for (int i = 0; i < 32; i++)
		PT_TEST_TRUE(grad_push(&s, 1e-2f, &r) == 0);
	PT_TEST_TRUE(pull(&s, a) == 0);
	PT_TEST_TRUE(grad_push(&s, 3e38f, &r) == PT_ERANGE);
	PT_TEST_STR_HAS(r.msg, "(--grad-bound 10000)");
	PT_TEST_TRUE(pull(&s, b) == 0 && memcmp(a, b, n * 4) == 0);
	free(a), free(b);
	srv_stop(&s);
}

static void test_server_momentum_state(void)
{
	// The optimizer runs on the server with its state beside the shard:
	// momentum 0.9, gradient 0.5, lr 0.5: p0 - 0.25, then - 0.5 * 0.95.
	srv s;
	pti_hdr r;
	srv_start_flag(&s, "--optimizer=momentum:0.9", "sync", 1);
	uint64_t n = s.l.n_params;
	float *p0 = malloc(n * 4), *g = malloc(n * 4), *got = malloc(n * 4);
	PT_TEST_TRUE(pull(&s, p0) == 0);
	for (uint64_t i = 0; i < n; i++)
		g[i] = 0.5f;
	PT_TEST_TRUE(hello(&s, 0) == 0);
	PT_TEST_TRUE(push(&s, PT_OP_PUSHPULL, 0, 0, g, 0, n, got) == 0);
	PT_TEST_NEAR(got[7], p0[7] - 0.25, 1e-6);
	PT_TEST_TRUE(push(&s, PT_OP_PUSHPULL, 0, 1, g, 0, n, got) == 0);
	PT_TEST_NEAR(got[7], p0[7] - 0.25 - 0.475, 1e-6);
	PT_TEST_NEAR(got[n - 1], p0[n - 1] - 0.725, 1e-6);
	(void)r;
	free(p0), free(g), free(got);
	srv_stop(&s);
}

static void test_server_refuses_bad_requests(void)
{
	srv s;
	pti_hdr h, r;
	srv_start(&s, "sync", 2, 2, 1);
	uint64_t n = s.shard.hi - s.shard.lo, lo = s.shard.lo;
	float *before = malloc(n * 4), *after = malloc(n * 4);
	float *g = calloc(s.l.n_params, 4);
	for (uint64_t i = 0; i < s.l.n_params; i++)
		g[i] = 100.0f;
	PT_TEST_TRUE(pull(&s, before) == 0);
	int expect = 0;

	// garbage, a short message, a lying length prefix, a huge map claim
	uint8_t junk[37];
	for (size_t i = 0; i < sizeof(junk); i++)
		junk[i] = (uint8_t)(i * 73 + 11);
	PT_TEST_TRUE(send_raw(&s, junk, sizeof(junk), &r) == PT_EPROTO); expect++;
	PT_TEST_STR_HAS(r.msg, "server 1");
	PT_TEST_TRUE(send_raw(&s, junk, 2, &r) == PT_EPROTO); expect++;
	uint8_t huge[11] = {7, 0, 0, 0, 0xdf, 0xff, 0xff, 0xff, 0xff, 0xa1,
	    'x'};
	PT_TEST_TRUE(send_raw(&s, huge, 11, &r) == PT_EPROTO); expect++;
	PT_TEST_STR_HAS(r.msg, "claims");
	uint8_t lie[8] = {0xf0, 0, 0, 0, 0x80, 0, 0, 0};
	PT_TEST_TRUE(send_raw(&s, lie, 8, &r) == PT_EPROTO); expect++;

	// a truncated push: header and part of its payload
	nng_msg *m;
	pti_hdr_init(&h, PT_OP_PUSH, PT_ROLE_WORKER, 0);
	h.has |= PTI_H_STEP;
	h.off = lo;
	pti_msg_encode(&m, &h, g, n);
	nng_msg_chop(m, 40);
	PT_TEST_TRUE(rpc(&s, m, &r, NULL) == PT_EPROTO); expect++;
	PT_TEST_STR_HAS(r.msg, "payload");

	// wrong protocol version, unknown op
	pti_hdr_init(&h, PT_OP_PULL, PT_ROLE_WORKER, 0);
	h.pv = 9;
	PT_TEST_TRUE(send_hdr(&s, &h, NULL, 0, NULL) == PT_EPROTO); expect++;
	pti_hdr_init(&h, 42, PT_ROLE_WORKER, 0);
	pti_msg_encode(&m, &h, NULL, 0);
	PT_TEST_TRUE(rpc(&s, m, &r, NULL) == PT_EPROTO); expect++;
	PT_TEST_STR_HAS(r.msg, "unknown op 42");

	// out of turn: push before hello (on a connection that has proven
	// nothing); rank out of range
	PT_TEST_TRUE(push(&s, PT_OP_PUSH, 0, 0, g, lo, n, NULL) == PT_ESTATE); expect++;
	PT_TEST_TRUE(push(&s, PT_OP_PUSH, 9, 0, g, lo, n, NULL) == PT_EPROTO); expect++;
	// another model's hello, with a good proof of the secret: refused,
	// and the connection is not bound to worker 0
	PT_TEST_TRUE(prove(&s, worker_conn(&s, 0), PT_ROLE_WORKER, 0, 1234, 0,
			 &r) == PT_EINVAL); expect++;
	PT_TEST_STR_HAS(r.msg, "another model");
	PT_TEST_TRUE(push(&s, PT_OP_PUSH, 0, 0, g, lo, n, NULL) == PT_ESTATE); expect++;

	PT_TEST_TRUE(hello(&s, 0) == 0);
	// a range outside the shard (server 1 holds the upper half)
	PT_TEST_TRUE(push(&s, PT_OP_PUSH, 0, 0, g, 0, n, NULL) == PT_ERANGE); expect++;
	PT_TEST_TRUE(push(&s, PT_OP_PUSH, 0, 0, g, lo + 1, n, NULL) ==
		     PT_ERANGE); expect++;
	pti_hdr_init(&h, PT_OP_PULL, PT_ROLE_WORKER, 0);
	h.has |= PTI_H_RANGE;
	h.off = UINT64_MAX - 2;
	h.n = 5;
	PT_TEST_TRUE(send_hdr(&s, &h, NULL, 0, NULL) == PT_ERANGE); expect++;
	h.has |= PTI_H_VAR;
	h.var = 17;
	h.off = 0;
	PT_TEST_TRUE(send_hdr(&s, &h, NULL, 0, NULL) == PT_ERANGE); expect++;
	// a step that is not the open one; a piece of a sync step, then
	// part of it again
	PT_TEST_TRUE(push(&s, PT_OP_PUSH, 0, 3, g, lo, n, NULL) == PT_ESTATE); expect++;
	PT_TEST_TRUE(push(&s, PT_OP_PUSH, 0, 0, g, lo, n - 1, NULL) == 0);
	PT_TEST_TRUE(push(&s, PT_OP_PUSH, 0, 0, g, lo + n - 2, 2, NULL) ==
		     PT_ESTATE); expect++;
	// a pull for a version two ahead
	pti_hdr_init(&h, PT_OP_PULL, PT_ROLE_WORKER, 0);
	h.has |= PTI_H_VER;
	h.ver = 2;
	PT_TEST_TRUE(send_hdr(&s, &h, NULL, 0, NULL) == PT_ESTATE); expect++;
	// the last piece completes worker 0's gradient; a second push of
	// the same step by the same worker is refused
	PT_TEST_TRUE(push(&s, PT_OP_PUSH, 0, 0, g, lo + n - 1, 1, NULL) == 0);
	PT_TEST_TRUE(push(&s, PT_OP_PUSH, 0, 0, g, lo, n, NULL) == PT_ESTATE); expect++;

	// Still serving; the one valid gradient is filed, not applied.
	PT_TEST_TRUE(pull(&s, after) == 0);
	PT_TEST_TRUE(memcmp(before, after, n * 4) == 0);
	PT_TEST_TRUE(rejected(&s) == (uint64_t)expect);
	// and the step still closes normally once worker 1 pushes
	PT_TEST_TRUE(hello(&s, 1) == 0);
	PT_TEST_TRUE(push(&s, PT_OP_PUSHPULL, 1, 0, g, lo, n, after) == 0);
	PT_TEST_NEAR(after[0], before[0] - LR * 100.0, 1e-4);
	free(before), free(after), free(g);
	srv_stop(&s);
}

static void test_server_fuzz_keeps_serving(void)
{
	srv s;
	pti_hdr r;
	srv_start(&s, "async", 1, 1, 0);
	uint64_t n = s.l.n_params;
	float *before = malloc(n * 4), *after = malloc(n * 4);
	PT_TEST_TRUE(pull(&s, before) == 0);
	uint8_t b[300];
	srand(11);
	int answered = 0;
	for (int i = 0; i < 300; i++) {
		size_t len = (size_t)(rand() % (int)sizeof(b));
		for (size_t k = 0; k < len; k++)
			b[k] = (uint8_t)rand();
		if (len > 8 && i % 2) { // a valid prefix, a random map body
			b[0] = (uint8_t)(len - 4), b[1] = b[2] = b[3] = 0;
			b[4] = 0x80 | (uint8_t)(rand() % 16);
		}
		answered += send_raw(&s, b, len, &r) > 0;
	}
	PT_TEST_TRUE(answered == 300);
	PT_TEST_TRUE(pull(&s, after) == 0);
	PT_TEST_TRUE(memcmp(before, after, n * 4) == 0);
	free(before), free(after);
	srv_stop(&s);
}

static void test_server_gone_worker_not_waited(void)
{
	// A restarted server told that worker 1 has left closes sync steps
	// with worker 0's gradient alone, and counts worker 1 as lost.
	srv s;
	pti_hdr st;
	int64_t at;
	srv_start_flag(&s, "--gone-workers=1", "sync", 2);
	uint64_t n = s.l.n_params;
	float *p0 = malloc(n * 4), *g = malloc(n * 4), *got = malloc(n * 4);
	PT_TEST_TRUE(pull(&s, p0) == 0);
	for (uint64_t i = 0; i < n; i++)
		g[i] = (float)(i % 5) - 2;
	PT_TEST_TRUE(hello_step(&s, 0, 0, &at) == 0 && at == 0);
	PT_TEST_TRUE(push(&s, PT_OP_PUSHPULL, 0, 0, g, 0, n, got) == 0);
	int bad = 0;
	for (uint64_t i = 0; i < n; i++)
		bad += fabsf(got[i] - (p0[i] - (float)LR * g[i])) > 1e-6f;
	PT_TEST_TRUE(bad == 0);
	PT_TEST_TRUE(stats(&s, &st) == 0 && st.n_lost == 1 &&
	    st.first_live == 0 && st.ver == 1);
	free(p0), free(g), free(got);
	srv_stop(&s);
}

static void test_server_ssp_clock_from_hello(void)
{
	// A worker that comes back to a restarted server says how far it
	// got; its clock goes on from there, a later step is a skip ahead,
	// and an earlier one is refused as out of turn.
	srv s;
	int64_t at;
	srv_start_flag(&s, "--gone-workers=1", "ssp", 2);
	uint64_t n = s.l.n_params;
	float *g = calloc(n, 4);
	pti_hdr h;
	pti_hdr_init(&h, PT_OP_PUSH, PT_ROLE_WORKER, 0);
	h.has |= PTI_H_STEP | PTI_H_VER;
	h.ver = 0; // computed from the first version: always acceptable
	PT_TEST_TRUE(hello_step(&s, 0, 4, &at) == 0 && at == 4);
	h.step = 4;
	PT_TEST_TRUE(send_hdr(&s, &h, g, n, NULL) == 0);
	h.step = 7;
	PT_TEST_TRUE(send_hdr(&s, &h, g, n, NULL) == 0);
	h.step = 6;
	PT_TEST_TRUE(send_hdr(&s, &h, g, n, NULL) == PT_ESTATE);
	PT_TEST_TRUE(hello_step(&s, 0, 0, &at) == 0 && at == 8);
	free(g);
	srv_stop(&s);
}

static void test_server_shutdown_op(void)
{
	srv s;
	pti_hdr h;
	srv_start(&s, "sync", 1, 1, 0);
	pti_hdr_init(&h, PT_OP_SHUTDOWN, PT_ROLE_CONTROL, 0);
	PT_TEST_TRUE(send_hdr(&s, &h, NULL, 0, NULL) == 0);
	int st = srv_exit_status(&s);
	PT_TEST_TRUE(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0);
	s.pid = 0;
	srv_stop(&s);
}

// test_server_wire_values: an async push claiming step or version
// INT64_MAX, or a negative one, is refused (no overflow in step + 1: the
// sanitizer build aborts on one); a push holding a NaN or an infinity is
// refused in sync and in async and leaves every value as it was; the
// server then applies a good push as usual.
static void test_server_wire_values(void)
{
	const char *modes[] = {"async", "sync"};
	for (int k = 0; k < 2; k++) {
		srv s;
		srv_start(&s, modes[k], 1, 1, 0);
		uint64_t n = s.l.n_params;
		float *p0 = malloc(n * 4), *g = calloc(n, 4), *got = malloc(n * 4);
		PT_TEST_TRUE(pull(&s, p0) == 0 && hello(&s, 0) == 0);
		int64_t bad_steps[] = {INT64_MAX, INT64_MAX - 1, -1, INT64_MIN};
		for (int i = 0; i < 4; i++) {
			pti_hdr h, r;
			nng_msg *m;
			pti_hdr_init(&h, PT_OP_PUSHPULL, PT_ROLE_WORKER, 0);
			h.has |= PTI_H_VER | PTI_H_STEP;
			h.step = bad_steps[i];
			h.ver = i == 1 ? bad_steps[i] : 0;
			pti_msg_encode(&m, &h, g, n);
			PT_TEST_TRUE(rpc(&s, m, &r, NULL) != 0);
		}
		float bad[] = {NAN, INFINITY, -INFINITY};
		for (int i = 0; i < 3; i++) {
			g[n / 2] = bad[i];
			PT_TEST_TRUE(push(&s, PT_OP_PUSHPULL, 0, 0, g, 0, n,
					 NULL) == PT_EINVAL);
		}
		PT_TEST_TRUE(pull(&s, got) == 0);
		PT_TEST_TRUE(memcmp(got, p0, n * 4) == 0);
		PT_TEST_TRUE(rejected(&s) == 7);
		g[n / 2] = 1.0f;
		PT_TEST_TRUE(push(&s, PT_OP_PUSHPULL, 0, 0, g, 0, n, got) == 0);
		PT_TEST_NEAR(got[n / 2], p0[n / 2] - LR, 1e-6);
		free(p0), free(g), free(got);
		srv_stop(&s);
	}
}

// test_server_parked_released: a worker's sync pull of the next version
// parks a context; when its connection closes, the context is free
// again. Forty workers in turn (more than the server's contexts) prove
// the secret, park a pull and die without a word; the server must still
// answer, and close the step once both workers push.
static void test_server_parked_released(void)
{
	srv s;
	pti_hdr st;
	srv_start(&s, "sync", 2, 1, 0);
	uint64_t n = s.l.n_params;
	for (int i = 0; i < 40; i++) {
		// A process of its own (this program again, see main): nng
		// cannot be used in a child forked from a threaded parent.
		pid_t pid = fork();
		if (pid == 0) {
			char rank[16];
			snprintf(rank, sizeof(rank), "%d", i % 2);
			execl(self_exe, self_exe, "--park", s.url, rank,
			    (char *)NULL);
			_exit(127);
		}
		int wst;
		waitpid(pid, &wst, 0);
		PT_TEST_TRUE(WIFEXITED(wst) && WEXITSTATUS(wst) == 0);
	}
	PT_TEST_TRUE(stats(&s, &st) == 0 && st.ver == 0);
	float *g = calloc(n, 4), *got = malloc(n * 4);
	PT_TEST_TRUE(hello(&s, 0) == 0 && hello(&s, 1) == 0);
	PT_TEST_TRUE(push(&s, PT_OP_PUSH, 1, 0, g, 0, n, NULL) == 0);
	PT_TEST_TRUE(push(&s, PT_OP_PUSHPULL, 0, 0, g, 0, n, got) == 0);
	PT_TEST_TRUE(stats(&s, &st) == 0 && st.ver == 1);
	free(g), free(got);
	srv_stop(&s);
}

// test_server_roles: a connection acts only as what it proved. Worker 0
// cannot push as worker 1 or stop the job before every worker is done;
// a stranger gets neither stats nor shutdown; a control client proven
// with another secret is refused.
static void test_server_roles(void)
{
	srv s;
	pti_hdr h, r;
	srv_start(&s, "async", 2, 1, 0);
	uint64_t n = s.l.n_params;
	float *g = calloc(n, 4);
	PT_TEST_TRUE(hello(&s, 0) == 0);
	pti_hdr_init(&h, PT_OP_PUSH, PT_ROLE_WORKER, 1);
	h.has |= PTI_H_STEP | PTI_H_VER;
	nng_msg *m;
	pti_msg_encode(&m, &h, g, n);
	PT_TEST_TRUE(rpc_on(s.w[0], m, &r, NULL) == PT_EAUTH);
	PT_TEST_STR_HAS(r.msg, "proved worker 0, not worker 1");
	pti_hdr_init(&h, PT_OP_SHUTDOWN, PT_ROLE_WORKER, 0);
	pti_msg_encode(&m, &h, NULL, 0);
	PT_TEST_TRUE(rpc_on(s.w[0], m, &r, NULL) == PT_EAUTH);
	// a stranger: "say hello first" (ESTATE, as a worker whose server
	// restarted is told on its new connection)
	pti_hdr_init(&h, PT_OP_STATS, PT_ROLE_CONTROL, 0);
	pti_msg_encode(&m, &h, NULL, 0);
	PT_TEST_TRUE(rpc_on(s.sock, m, &r, NULL) == PT_ESTATE);
	PT_TEST_STR_HAS(r.msg, "has not proven the job secret");
	pti_hdr_init(&h, PT_OP_SHUTDOWN, PT_ROLE_CONTROL, 0);
	pti_msg_encode(&m, &h, NULL, 0);
	PT_TEST_TRUE(rpc_on(s.sock, m, &r, NULL) == PT_ESTATE);
	PT_TEST_TRUE(prove_as(&s, s.sock, PT_ROLE_CONTROL, 0, 0, 0, &r, 1) ==
		     PT_EAUTH);
	PT_TEST_STR_HAS(r.msg, "wrong proof");
	// the stranger's connection still proves nothing
	pti_hdr_init(&h, PT_OP_STATS, PT_ROLE_CONTROL, 0);
	pti_msg_encode(&m, &h, NULL, 0);
	PT_TEST_TRUE(rpc_on(s.sock, m, &r, NULL) == PT_ESTATE);
	// worker 1 done, then worker 0 done: now worker 0 may stop it
	PT_TEST_TRUE(hello(&s, 1) == 0);
	for (uint32_t w = 0; w < 2; w++) {
		pti_hdr_init(&h, PT_OP_DONE, PT_ROLE_WORKER, w);
		PT_TEST_TRUE(send_hdr(&s, &h, NULL, 0, NULL) == 0);
	}
	pti_hdr st;
	PT_TEST_TRUE(stats(&s, &st) == 0 && st.n_done == 2 &&
		     st.updates == 0);
	pti_hdr_init(&h, PT_OP_SHUTDOWN, PT_ROLE_WORKER, 0);
	PT_TEST_TRUE(send_hdr(&s, &h, NULL, 0, NULL) == 0);
	int es = srv_exit_status(&s);
	PT_TEST_TRUE(es != -1 && WIFEXITED(es) && WEXITSTATUS(es) == 0);
	s.pid = 0;
	free(g);
	srv_stop(&s);
}

// test_server_hello_proofs: a rank belongs to one live connection, and
// the server proves the secret over a hello's nonce.
static void test_server_hello_proofs(void)
{
	srv s;
	pti_hdr h, r, ch;
	nng_msg *m;
	pti_secret key;
	uint8_t mac[PT_MAC_LEN];
	srv_start(&s, "sync", 2, 1, 0);
	uint64_t lh = pti_layout_hash(&s.l);
	PT_TEST_OK(pti_secret_load(&key, NULL));
	PT_TEST_TRUE(hello(&s, 0) == 0);
	// Worker 0's rank, proven again on another connection while the
	// first is open: refused, naming the holder; worker 0 still works.
	PT_TEST_TRUE(prove_as(&s, s.sock, PT_ROLE_WORKER, 0, lh, 0, &r, 0) ==
		     PT_ESTATE);
	PT_TEST_STR_HAS(r.msg, "rank 0 is held by the live connection of");
	pti_hdr st;
	PT_TEST_TRUE(stats(&s, &st) == 0);
	// A hello with a nonce of its own: the reply proves the secret over
	// it, as the server (role 2), for this rank, layout and server.
	pti_hdr_init(&h, PT_OP_CHALLENGE, PT_ROLE_WORKER, 1);
	pti_msg_encode(&m, &h, NULL, 0);
	PT_TEST_TRUE(rpc_on(s.sock, m, &ch, NULL) == 0);
	pti_hdr_init(&h, PT_OP_HELLO, PT_ROLE_WORKER, 1);
	h.has |= PTI_H_LAYOUT | PTI_H_STEP | PTI_H_MAC | PTI_H_NONCE;
	h.layout_hash = lh;
	h.n_params = s.l.n_params;
	memset(h.nonce, 0x5a, PT_NONCE_LEN);
	pti_auth_mac(&key, ch.nonce, PT_ROLE_WORKER, 1, s.rank, lh, h.mac);
	pti_msg_encode(&m, &h, NULL, 0);
	PT_TEST_TRUE(rpc_on(s.sock, m, &r, NULL) == 0);
	pti_auth_mac(&key, h.nonce, PT_ROLE_SERVER, 1, s.rank, lh, mac);
	PT_TEST_TRUE((r.has & PTI_H_MAC) &&
		     pti_auth_equal(mac, r.mac, PT_MAC_LEN));
	// not the worker's own proof over the same nonce
	pti_auth_mac(&key, h.nonce, PT_ROLE_WORKER, 1, s.rank, lh, mac);
	PT_TEST_TRUE(!pti_auth_equal(mac, r.mac, PT_MAC_LEN));
	srv_stop(&s);
}

// park_main: proves the secret as worker RANK, sends a sync pull of the
// next version (which parks) and exits without closing anything.
static int park_main(const char *url, uint32_t rank)
{
	srv s;
	memset(&s, 0, sizeof(s));
	snprintf(s.url, sizeof(s.url), "%s", url);
	PT_TEST_OK(pti_layout_init(&s.l, SPEC, 64, 10));
	nng_socket k = srv_dial(&s);
	nng_msg *m;
	pti_hdr h;
	if (prove(&s, k, PT_ROLE_WORKER, rank, pti_layout_hash(&s.l), 0,
		NULL) != 0)
		return 1;
	pti_hdr_init(&h, PT_OP_PULL, PT_ROLE_WORKER, rank);
	h.has |= PTI_H_VER;
	h.ver = 1;
	pti_msg_encode(&m, &h, NULL, 0);
	if (nng_sendmsg(k, m, 0) != 0)
		return 1;
	usleep(20 * 1000); // parked by now
	_exit(0);          // the kernel closes the connection
}

// shm_seg_raw: a memfd of `bytes` (not rounded up), sealed or not, as a
// segment to hand over (not mapped).
static pti_shm_seg shm_seg_raw(size_t bytes, int seal)
{
	int fd = memfd_create("t", MFD_ALLOW_SEALING);
	PT_TEST_TRUE(fd >= 0 && ftruncate(fd, (off_t)bytes) == 0);
	if (seal)
		PT_TEST_TRUE(fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW |
				  F_SEAL_SEAL) == 0);
	return (pti_shm_seg){NULL, bytes, 0, fd, -1};
}

// --shm: values in shared memory only after the handshake, which takes
// only the job secret's proof and a sealed segment large enough; then a
// pushpull reads the gradient in the worker's segment and leaves the new
// values in the server's, equal to what a pull over the socket gets; a
// range outside the shard is refused. The server serves on after every
// refusal.
// The block of a server's segment (common/shm.h): a copy waits while a
// change is under way and gives up, naming why, when it stays under way
// (a server that died mid-change): at once when the segment's maker is
// known to have ended (here a child, not reaped yet), else after its
// timeout; once the change ends it copies the values with the version the
// server gave.
static void test_shm_seqlock(void)
{
	pti_shm_seg g;
	float v[8];
	int64_t ver = -1;
	PT_TEST_OK(pti_shm_seg_create(&g, PTI_SHM_SERVER_BYTES(0, 8), 0, "t"));
	pti_shm_ctl *c = pti_shm_ctl_of(&g, 8);
	PT_TEST_TRUE(c != NULL);
	PT_TEST_TRUE(pti_shm_ctl_of(&g, (uint64_t)g.bytes) == NULL);
	pti_shm_write_begin(c);
	for (int i = 0; i < 8; i++)
		g.p[i] = (float)i;
	PT_TEST_ERR(pti_shm_read(c, v, g.p, 8, 0.2, -1, &ver), PT_ETIMEDOUT);
	PT_TEST_STR_HAS(pt_errmsg(0), "mid-change");
	pid_t kid = fork();
	if (kid == 0) {
		pause();
		_exit(0);
	}
	int owner = (int)syscall(SYS_pidfd_open, kid, 0);
	PT_TEST_TRUE(kid > 0 && owner >= 0);
	PT_TEST_ERR(pti_shm_read(c, v, g.p, 8, 0.2, owner, &ver),
	    PT_ETIMEDOUT); // alive: it may still finish
	kill(kid, SIGKILL);
	PT_TEST_ERR(pti_shm_read(c, v, g.p, 8, 600, owner, &ver), PT_ECLOSED);
	PT_TEST_STR_HAS(pt_errmsg(0), "the server is gone");
	waitpid(kid, NULL, 0);
	close(owner);
	PT_TEST_TRUE(ver == -1);
	pti_shm_write_end(c, 7);
	PT_TEST_OK(pti_shm_read(c, v, g.p, 8, 0.2, -1, &ver));
	PT_TEST_TRUE(ver == 7 && v[7] == 7.0f);
	pti_shm_seg_fini(&g);
}

// view_seg: a server's segment for [lo, hi) of a model whose element i
// holds i * k.
static void view_seg(pti_shm_seg *g, uint64_t lo, uint64_t hi, float k)
{
	size_t skip = pti_shm_skip(lo);
	PT_TEST_OK(pti_shm_seg_create(g, PTI_SHM_SERVER_BYTES(skip, hi - lo),
	    skip, "t"));
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	PT_TEST_TRUE((uintptr_t)g->p % page == lo * 4 % page);
	for (uint64_t i = lo; i < hi; i++)
		g->p[i - lo] = (float)i * k;
	PT_TEST_TRUE(pti_shm_ctl_of(g, hi - lo) != NULL);
}

// A worker's view of the model out of three servers' segments (common/
// shm.h), cut as pti_layout_shard cuts 10,000 values: each server's pages
// that hold only its values show them in place (a change it makes is seen
// there), the values where two shards share a page are the worker's to
// copy, and a segment that replaces one (a restarted server) maps over
// it.
static void test_shm_view(void)
{
	enum { N = 10000, S = 3 };
	pti_shm_seg g[S], again;
	pti_shm_view v;
	uint64_t lo[S], hi[S], own_lo[S], own_hi[S], owned = 0;
	PT_TEST_OK(pti_shm_view_init(&v, N));
	for (uint32_t s = 0; s < S; s++) {
		lo[s] = (uint64_t)N * s / S;
		hi[s] = (uint64_t)N * (s + 1) / S;
		view_seg(&g[s], lo[s], hi[s], 1.0f);
		PT_TEST_OK(pti_shm_view_map(&v, &g[s], lo[s], hi[s], N,
		    &own_lo[s], &own_hi[s]));
		PT_TEST_TRUE(lo[s] <= own_lo[s] && own_lo[s] <= own_hi[s] &&
		    own_hi[s] <= hi[s]);
		owned += own_hi[s] - own_lo[s];
		for (uint64_t i = own_lo[s]; i < own_hi[s]; i++)
			PT_TEST_TRUE(v.p[i] == (float)i);
	}
	if (sysconf(_SC_PAGESIZE) == 4096) // [0, 3072), [4096, 6144), [7168, N)
		PT_TEST_TRUE(owned == 3072 + 2048 + 2832 && own_lo[1] == 4096 &&
		    own_hi[2] == N);
	PT_TEST_TRUE(v.p[3500] == 0.0f); // a shared page: not copied yet
	for (uint32_t s = 0; s < S; s++) {
		memcpy(v.p + lo[s], g[s].p, (own_lo[s] - lo[s]) * 4);
		memcpy(v.p + own_hi[s], g[s].p + (own_hi[s] - lo[s]),
		    (hi[s] - own_hi[s]) * 4);
	}
	for (uint64_t i = 0; i < N; i++)
		PT_TEST_TRUE(v.p[i] == (float)i);
	g[1].p[5000 - lo[1]] = -1.0f; // the server's change, seen in place
	PT_TEST_TRUE(v.p[5000] == -1.0f || sysconf(_SC_PAGESIZE) != 4096);
	view_seg(&again, lo[1], hi[1], 2.0f);
	PT_TEST_OK(pti_shm_view_map(&v, &again, lo[1], hi[1], N, &own_lo[1],
	    &own_hi[1]));
	for (uint64_t i = own_lo[1]; i < own_hi[1]; i++)
		PT_TEST_TRUE(v.p[i] == 2.0f * (float)i);
	PT_TEST_TRUE(v.p[3500] == 3500.0f); // the worker's copy, kept
	pti_shm_view_fini(&v);
	PT_TEST_TRUE(v.p == NULL);
	pti_shm_seg_fini(&again);
	for (uint32_t s = 0; s < S; s++)
		pti_shm_seg_fini(&g[s]);
}

static void test_server_shm(void)
{
	srv s;
	pti_hdr h, r;
	pti_secret key, bad;
	char path[256];
	pti_shm_seg mine, theirs, small, loose;
	uint64_t lo = 0, hi = 0;
	srv_start_flag(&s, "--shm", "sync", 1);
	uint64_t n = s.shard.hi - s.shard.lo;
	float *v = malloc(n * 4), *v2 = malloc(n * 4);
	PT_TEST_TRUE(hello(&s, 0) == 0);
	PT_TEST_OK(pti_secret_load(&key, NULL));
	PT_TEST_OK(pti_shm_path(s.url, path, sizeof(path)));
	pti_hdr_init(&h, PT_OP_PUSHPULL, PT_ROLE_WORKER, 0);
	h.has |= PTI_H_STEP | PTI_H_VER | PTI_H_RANGE | PTI_H_SHM;
	h.shm = 1;
	h.off = s.shard.lo;
	h.n = n;
	PT_TEST_TRUE(send_hdr(&s, &h, NULL, 0, NULL) == PT_ESTATE);
	bad = key;
	bad.key[0] ^= 1;
	PT_TEST_OK(pti_shm_seg_create(&mine, n * 4, 0, "t"));
	PT_TEST_TRUE(pti_shm_offer(path, &bad, 0, 0, &mine, NULL, 5, &theirs, &lo,
			 &hi) == PT_EAUTH);
	small = shm_seg_raw(n * 4 - 4, 1);
	loose = shm_seg_raw(n * 4, 0);
	PT_TEST_TRUE(pti_shm_offer(path, &key, 0, 0, &small, NULL, 5, &theirs, &lo,
			 &hi) == PT_EPROTO);
	PT_TEST_TRUE(pti_shm_offer(path, &key, 0, 0, &loose, NULL, 5, &theirs, &lo,
			 &hi) == PT_EPROTO);
	PT_TEST_TRUE(send_hdr(&s, &h, NULL, 0, NULL) == PT_ESTATE);
	PT_TEST_OK(pti_shm_offer(path, &key, 0, 0, &mine, NULL, 5, &theirs, &lo,
	    &hi));
	PT_TEST_TRUE(lo == s.shard.lo && hi == s.shard.hi);
	PT_TEST_TRUE(pull(&s, v) == 0);
	PT_TEST_TRUE(memcmp(v, theirs.p, n * 4) == 0);
	for (uint64_t i = 0; i < n; i++)
		mine.p[i] = 1.0f;
	nng_msg *m;
	PT_TEST_OK(pti_msg_encode(&m, &h, NULL, 0));
	PT_TEST_TRUE(rpc(&s, m, &r, NULL) == 0);
	PT_TEST_TRUE((r.has & PTI_H_SHM) && r.off == s.shard.lo && r.n == n);
	PT_TEST_TRUE(pull(&s, v2) == 0);
	PT_TEST_TRUE(memcmp(v2, theirs.p, n * 4) == 0);
	PT_TEST_TRUE(v2[0] != v[0]);
	h.step = h.ver = 1;
	h.n = n + 1;
	PT_TEST_TRUE(send_hdr(&s, &h, NULL, 0, NULL) == PT_ERANGE);
	PT_TEST_TRUE(pull(&s, v2) == 0);
	free(v);
	free(v2);
	pti_shm_seg_fini(&mine);
	pti_shm_seg_fini(&theirs);
	pti_shm_seg_fini(&small);
	pti_shm_seg_fini(&loose);
	srv_stop(&s);
}

// shm_workers makes k raw workers of s say hello and hand over their
// segments of the shard's size, holding ones, and a box each when box
// is not NULL (else none: their headers go over the socket).
static void shm_workers(srv *s, uint32_t k, pti_shm_seg *mine,
    pti_shm_seg *theirs, pti_shm_seg *box)
{
	pti_secret key;
	char path[256];
	uint64_t lo = 0, hi = 0, n = s->shard.hi - s->shard.lo;
	PT_TEST_OK(pti_secret_load(&key, NULL));
	PT_TEST_OK(pti_shm_path(s->url, path, sizeof(path)));
	for (uint32_t w = 0; w < k; w++) {
		PT_TEST_TRUE(hello(s, w) == 0);
		PT_TEST_OK(pti_shm_seg_create(&mine[w], n * 4, 0, "t"));
		if (box != NULL)
			PT_TEST_OK(pti_shm_seg_create(&box[w], sizeof(pti_box),
			    0, "t"));
		PT_TEST_OK(pti_shm_offer(path, &key, w, 0, &mine[w],
		    box != NULL ? &box[w] : NULL, 5, &theirs[w], &lo, &hi));
		for (uint64_t i = 0; i < n; i++)
			mine[w].p[i] = 1.0f;
	}
}

// --shm, sync, two workers: worker 1's gradient passes its checks, then
// worker 1 writes a NaN in its segment before worker 0's push closes the
// step (the server reads it in place again to sum). The chunk holding it
// is not applied, every value stays finite, the rest of the step is,
// and the server serves on.
static void test_server_shm_changed_after_check(void)
{
	srv s;
	pti_shm_seg mine[2], theirs[2];
	srv_start_flag(&s, "--shm", "sync", 2);
	uint64_t n = s.shard.hi - s.shard.lo;
	float *p0 = malloc(n * 4), *v = malloc(n * 4);
	PT_TEST_TRUE(pull(&s, p0) == 0);
	shm_workers(&s, 2, mine, theirs, NULL);
	for (uint32_t w = 2; w-- > 0;) { // worker 1's push, then worker 0's
		pti_hdr h;
		pti_hdr_init(&h, PT_OP_PUSH, PT_ROLE_WORKER, w);
		h.has |= PTI_H_STEP | PTI_H_VER | PTI_H_RANGE | PTI_H_SHM;
		h.shm = 1;
		h.off = s.shard.lo;
		h.n = n;
		PT_TEST_TRUE(send_hdr(&s, &h, NULL, 0, NULL) == 0);
		if (w == 1)
			mine[1].p[n - 1] = NAN; // after its checks, before the sum
	}
	PT_TEST_TRUE(pull(&s, v) == 0);
	int finite = 1;
	for (uint64_t i = 0; i < n; i++)
		finite &= isfinite(v[i]) != 0;
	PT_TEST_TRUE(finite);
	PT_TEST_TRUE(v[n - 1] == p0[n - 1]); // its chunk not applied
	PT_TEST_TRUE(n <= 2048 || v[0] != p0[0]); // the others were
	pti_hdr st;
	PT_TEST_TRUE(stats(&s, &st) == 0 && st.ver == 1); // the step closed
	free(p0);
	free(v);
	for (uint32_t w = 0; w < 2; w++) {
		pti_shm_seg_fini(&mine[w]);
		pti_shm_seg_fini(&theirs[w]);
	}
	srv_stop(&s);
}

// box_put writes the n bytes of msg into slot i of box b, saying len,
// and rings; box_get waits (10 s at most) for slot i's
// reply and decodes it into *r: 0, -1 when none came.
static void box_put(pti_box *b, uint32_t i, const void *msg, size_t n,
    uint32_t len)
{
	pti_box_slot *sl = &b->slot[i];
	memcpy(sl->msg, msg, n);
	atomic_store(&sl->len, len);
	atomic_store(&sl->state, PTI_BOX_REQ);
	atomic_fetch_add(&b->bell, 1);
	pti_box_wake(&b->bell);
}

static int box_get(pti_box *b, uint32_t i, pti_hdr *r)
{
	pti_box_slot *sl = &b->slot[i];
	const void *pay;
	nng_msg *m;
	for (int t = 0; t < 100; t++) {
		uint32_t v = atomic_load(&sl->state);
		if (v != PTI_BOX_REP) {
			pti_box_wait(&sl->state, v, 0.1);
			continue;
		}
		uint32_t len = atomic_load(&sl->len);
		if (len > PTI_BOX_MSG || nng_msg_alloc(&m, len) != 0)
			return -1;
		memcpy(nng_msg_body(m), sl->msg, len);
		atomic_store(&sl->state, PTI_BOX_FREE);
		int rv = pti_msg_decode(r, &pay, m);
		nng_msg_free(m);
		return rv;
	}
	return -1;
}

static void box_put_hdr(pti_box *b, uint32_t i, const pti_hdr *h)
{
	nng_msg *m;
	PT_TEST_OK(pti_msg_encode(&m, h, NULL, 0));
	box_put(b, i, nng_msg_body(m), nng_msg_len(m),
	    (uint32_t)nng_msg_len(m));
	nng_msg_free(m);
}

// --shm, sync, two raw workers with boxes (common/shm.h, pti_box): what
// they write in their boxes is served as if it came on their
// connections. Too long a message, bytes that are not a header, and a
// rank the box's worker did not prove are refused with an error reply,
// each in its slot; worker 1's pushpull parks in its slot (HELD: handled,
// its reply waits), a second ring of that slot while it is parked is
// ignored, and worker 0's pushpull
// through its box answers both with the next version; the server
// serves on.
static void test_server_box(void)
{
	srv s;
	pti_shm_seg mine[2], theirs[2], box[2];
	pti_hdr r, st;
	srv_start_flag(&s, "--shm", "sync", 2);
	uint64_t n = s.shard.hi - s.shard.lo;
	float *p0 = malloc(n * 4), *v = malloc(n * 4);
	PT_TEST_TRUE(pull(&s, p0) == 0);
	shm_workers(&s, 2, mine, theirs, box);
	pti_box *b[2] = {(pti_box *)box[0].p, (pti_box *)box[1].p};
	uint8_t junk[64];
	memset(junk, 0xc1, sizeof(junk)); // msgpack's never-used byte
	box_put(b[0], 0, junk, sizeof(junk), PTI_BOX_MSG + 100);
	PT_TEST_TRUE(box_get(b[0], 0, &r) == 0 && r.status == PT_EPROTO);
	box_put(b[0], 1, junk, sizeof(junk), sizeof(junk));
	PT_TEST_TRUE(box_get(b[0], 1, &r) == 0 && r.status == PT_EPROTO);
	pti_hdr h;
	pti_hdr_init(&h, PT_OP_PUSHPULL, PT_ROLE_WORKER, 1); // in 0's box
	h.has |= PTI_H_STEP | PTI_H_VER | PTI_H_RANGE | PTI_H_SHM;
	h.shm = 1;
	h.off = s.shard.lo;
	h.n = n;
	box_put_hdr(b[0], 2, &h);
	PT_TEST_TRUE(box_get(b[0], 2, &r) == 0 && r.status == PT_EAUTH);
	box_put_hdr(b[1], 3, &h); // worker 1's own: parked for the step
	pti_box_slot *parked = &b[1]->slot[3];
	for (int t = 0; t < 100 && atomic_load(&parked->state) != PTI_BOX_HELD;
	     t++)
		pti_box_wait(&parked->state, atomic_load(&parked->state), 0.1);
	PT_TEST_TRUE(atomic_load(&parked->state) == PTI_BOX_HELD);
	box_put_hdr(b[1], 3, &h); // rung again while parked: ignored
	h.rank = 0;
	box_put_hdr(b[0], 4, &h);
	PT_TEST_TRUE(box_get(b[0], 4, &r) == 0 && r.status == 0 &&
		     r.ver == 1 && (r.has & PTI_H_SHM));
	PT_TEST_TRUE(box_get(b[1], 3, &r) == 0 && r.status == 0 &&
		     r.ver == 1);
	PT_TEST_TRUE(pull(&s, v) == 0);
	PT_TEST_TRUE(v[0] != p0[0] && memcmp(v, theirs[0].p, n * 4) == 0);
	PT_TEST_TRUE(stats(&s, &st) == 0 && st.ver == 1);
	free(p0);
	free(v);
	for (uint32_t w = 0; w < 2; w++) {
		pti_shm_seg_fini(&mine[w]);
		pti_shm_seg_fini(&theirs[w]);
		pti_shm_seg_fini(&box[w]);
	}
	srv_stop(&s);
}

// --shm, async: two pushes rung at once, step 1 in slot 0 (seq 1) and
// step 0 in slot 1 (seq 0), are served in the order they were rung:
// both applied (taken by slot, step 0 would be refused as a replay).
static void test_server_box_order(void)
{
	srv s;
	pti_shm_seg mine[1], theirs[1], box[1];
	pti_hdr h, r0, r1;
	srv_start_flag(&s, "--shm", "async", 1);
	shm_workers(&s, 1, mine, theirs, box);
	pti_box *b = (pti_box *)box[0].p;
	pti_hdr_init(&h, PT_OP_PUSH, PT_ROLE_WORKER, 0);
	h.has |= PTI_H_STEP | PTI_H_VER | PTI_H_RANGE | PTI_H_SHM;
	h.shm = 1;
	h.off = s.shard.lo;
	h.n = s.shard.hi - s.shard.lo;
	for (uint32_t i = 0; i < 2; i++) {
		nng_msg *m;
		h.step = 1 - i;
		PT_TEST_OK(pti_msg_encode(&m, &h, NULL, 0));
		memcpy(b->slot[i].msg, nng_msg_body(m), nng_msg_len(m));
		atomic_store(&b->slot[i].len, (uint32_t)nng_msg_len(m));
		b->slot[i].seq = 1 - i;
		nng_msg_free(m);
	}
	atomic_store(&b->slot[0].state, PTI_BOX_REQ);
	atomic_store(&b->slot[1].state, PTI_BOX_REQ);
	atomic_fetch_add(&b->bell, 1);
	pti_box_wake(&b->bell);
	PT_TEST_TRUE(box_get(b, 1, &r1) == 0 && r1.status == 0);
	PT_TEST_TRUE(box_get(b, 0, &r0) == 0 && r0.status == 0);
	PT_TEST_TRUE(r1.ver == 1 && r0.ver == 2);
	pti_shm_seg_fini(&mine[0]);
	pti_shm_seg_fini(&theirs[0]);
	pti_shm_seg_fini(&box[0]);
	srv_stop(&s);
}

static const pti_test_case cases[] = {
    {"test_server_shm", test_server_shm},
    {"test_server_box", test_server_box},
    {"test_server_box_order", test_server_box_order},
    {"test_server_shm_changed_after_check",
	test_server_shm_changed_after_check},
    {"test_shm_seqlock", test_shm_seqlock},
    {"test_shm_view", test_shm_view},
    {"test_server_parked_released", test_server_parked_released},
    {"test_server_roles", test_server_roles},
    {"test_server_hello_proofs", test_server_hello_proofs},
    {"test_server_initial_values", test_server_initial_values},
    {"test_server_wire_values", test_server_wire_values},
    {"test_server_sync_sgd_mean", test_server_sync_sgd_mean},
    {"test_server_async_applies_each", test_server_async_applies_each},
    {"test_server_refuses_bad_requests", test_server_refuses_bad_requests},
    {"test_server_staleness_lr", test_server_staleness_lr},
    {"test_server_momentum_state", test_server_momentum_state},
    {"test_server_max_staleness_drops", test_server_max_staleness_drops},
    {"test_server_step_max", test_server_step_max},
    {"test_server_grad_bound", test_server_grad_bound},
    {"test_server_fuzz_keeps_serving", test_server_fuzz_keeps_serving},
    {"test_server_shutdown_op", test_server_shutdown_op},
    {"test_server_gone_worker_not_waited", test_server_gone_worker_not_waited},
    {"test_server_ssp_clock_from_hello", test_server_ssp_clock_from_hello},
    {NULL, NULL},
};

int main(int argc, char **argv)
{
	signal(SIGPIPE, SIG_IGN);
	setenv(PT_SECRET_ENV, SECRET, 1); // the servers inherit it
	self_exe = argv[0];
	if (argc == 4 && strcmp(argv[1], "--park") == 0)
		return park_main(argv[2], (uint32_t)atoi(argv[3]));
	return pti_test_main(argc, argv, cases);
}
