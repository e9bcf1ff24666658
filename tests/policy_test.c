// tests/policy_test.c - the servers' consistency policies, in-process:
// requests go straight to a server without sockets (pti_local_*), on
// connections proven as workers 0..W-1, so each rule of sync (with backup
// workers and lost workers), async (staleness, --max-staleness) and ssp
// (the staleness bound) is checked step by step without processes.
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <nng/nng.h>

#include "common/auth.h"
#include "common/config.h"
#include "common/layout.h"
#include "common/proto.h"
#include "ps/server.h"
#include "tests/test.h"

#define SPEC "mlp:4"
#define DATA "synthetic:100" // 64 features, 10 classes
#define LR 0.5
#define MAXW 4

typedef struct job {
	pti_config c;
	pti_layout l;
	pti_local_server *s;
	uint64_t n;
	float *g; // a gradient of ones
} job;

// ask runs h on connection pipe (connection r + 1 is worker r's, MAXW + 1
// the control client's); the reply's header goes to *r. Returns the
// reply's status, or -1 when the request was parked (no reply yet).
static int ask(job *j, uint32_t pipe, const pti_hdr *h, const float *pay,
    uint64_t n, pti_hdr *r)
{
	nng_msg *m, *rep;
	const void *p;
	PT_TEST_OK(pti_msg_encode(&m, h, pay, n));
	rep = pti_local_request(j->s, pipe, m);
	nng_msg_free(m);
	if (rep == NULL)
		return -1;
	PT_TEST_OK(pti_msg_decode(r, &p, rep));
	nng_msg_free(rep);
	return (int)r->status;
}

static void prove(job *j, uint32_t pipe, uint32_t role, uint32_t rank)
{
	pti_hdr h, r;
	pti_secret key;
	uint64_t lh = role == PT_ROLE_WORKER ? pti_layout_hash(&j->l) : 0;
	PT_TEST_OK(pti_secret_load(&key, NULL));
	pti_hdr_init(&h, PT_OP_CHALLENGE, role, rank);
	PT_TEST_TRUE(ask(j, pipe, &h, NULL, 0, &r) == 0);
	pti_hdr_init(&h, PT_OP_HELLO, role, rank);
	if (lh != 0) {
		h.has |= PTI_H_LAYOUT;
		h.layout_hash = lh;
		h.n_params = j->l.n_params;
	}
	h.has |= PTI_H_MAC;
	pti_auth_mac(&key, r.nonce, role, rank, 0, lh, h.mac);
	PT_TEST_TRUE(ask(j, pipe, &h, NULL, 0, &r) == 0);
}

// job_open_spec starts a one-shard server of model spec and mode for
// `workers` workers, with flags (e.g. "--backup-workers=1") applied over
// the defaults, and proves every worker's connection and the control
// client's.
static void job_open_spec(job *j, const char *mode, uint32_t workers,
    const char *flag, const char *spec)
{
	char w[16], lr[16];
	int help;
	snprintf(w, sizeof(w), "%u", workers);
	snprintf(lr, sizeof(lr), "%g", LR);
	char *argv[] = {"--mode", (char *)mode, "--workers", w, "--batch", w,
	    "--model", (char *)spec, "--data", DATA, "--lr", lr, "--seed", "3",
	    (char *)flag, NULL};
	int argc = flag ? 15 : 14;
	memset(j, 0, sizeof(*j));
	pti_config_defaults(&j->c);
	PT_TEST_OK(pti_config_parse(&j->c, PT_CMD_SERVER, argc, argv, &help));
	PT_TEST_OK(pti_layout_init(&j->l, spec, 64, 10));
	PT_TEST_OK(pti_local_open(&j->s, &j->c, NULL));
	j->n = j->l.n_params;
	j->g = malloc(j->n * sizeof(float));
	for (uint64_t i = 0; i < j->n; i++)
		j->g[i] = 1.0f;
	for (uint32_t r = 0; r <= MAXW; r++)
		PT_TEST_OK(pti_local_connect(j->s, r + 1));
	for (uint32_t r = 0; r < workers; r++)
		prove(j, r + 1, PT_ROLE_WORKER, r);
	prove(j, MAXW + 1, PT_ROLE_CONTROL, 0);
}

static void job_open(job *j, const char *mode, uint32_t workers,
    const char *flag)
{
	job_open_spec(j, mode, workers, flag, SPEC);
}

static void job_close(job *j)
{
	pti_local_close(j->s);
	free(j->g);
}

// push sends worker r's gradient (ones) for step, computed from ver, as
// a push or a pushpull.
static int push(job *j, uint32_t op, uint32_t r, int64_t step, int64_t ver,
    pti_hdr *rep)
{
	pti_hdr h;
	pti_hdr_init(&h, op, PT_ROLE_WORKER, r);
	h.has |= PTI_H_STEP | PTI_H_VER | PTI_H_RANGE;
	h.step = step;
	h.ver = ver;
	h.off = 0;
	return ask(j, r + 1, &h, j->g, j->n, rep);
}

// push_range sends worker r's gradient g's [off, off + n) for step,
// computed from ver, as a push.
static int push_range(job *j, uint32_t r, int64_t step, int64_t ver,
    uint64_t off, uint64_t n, const float *g)
{
	pti_hdr h, rep;
	pti_hdr_init(&h, PT_OP_PUSH, PT_ROLE_WORKER, r);
	h.has |= PTI_H_STEP | PTI_H_VER | PTI_H_RANGE;
	h.step = step;
	h.ver = ver;
	h.off = off;
	return ask(j, r + 1, &h, g + off, n, &rep);
}

// piece sends worker r's gradient (ones) for [off, off + n) of step.
static int piece(job *j, uint32_t r, int64_t step, int64_t ver,
    uint64_t off, uint64_t n)
{
	return push_range(j, r, step, ver, off, n, j->g); // all ones
}

static pti_hdr stats(job *j)
{
	pti_hdr h, r;
	pti_hdr_init(&h, PT_OP_STATS, PT_ROLE_CONTROL, 0);
	PT_TEST_TRUE(ask(j, MAXW + 1, &h, NULL, 0, &r) == 0);
	return r;
}

// hist reads the staleness histogram of a stats reply into out.
static void hist(job *j, uint64_t out[PT_STALE_BUCKETS])
{
	pti_hdr h;
	nng_msg *m, *rep;
	pti_hdr_init(&h, PT_OP_STATS, PT_ROLE_CONTROL, 0);
	PT_TEST_OK(pti_msg_encode(&m, &h, NULL, 0));
	rep = pti_local_request(j->s, MAXW + 1, m);
	nng_msg_free(m);
	PT_TEST_TRUE(rep != NULL);
	if (rep != NULL)
		PT_TEST_OK(pti_msg_hist(rep, out));
	nng_msg_free(rep);
}

// test_policy_sync_waits_for_all: a sync step closes only once every
// worker has pushed; a pushpull waits for it (parked), and one version
// comes of W gradients.
static void test_policy_sync_waits_for_all(void)
{
	job j;
	pti_hdr r;
	job_open(&j, "sync", 3, NULL);
	PT_TEST_TRUE(push(&j, PT_OP_PUSHPULL, 0, 0, 0, &r) == -1);
	PT_TEST_TRUE(push(&j, PT_OP_PUSH, 1, 0, 0, &r) == 0);
	PT_TEST_TRUE(stats(&j).ver == 0);
	PT_TEST_TRUE(push(&j, PT_OP_PUSH, 2, 0, 0, &r) == 0);
	pti_hdr st = stats(&j);
	PT_TEST_TRUE(st.ver == 1 && st.updates == 1);
	// the next step is open; a push for the old one is dropped
	PT_TEST_TRUE(push(&j, PT_OP_PUSH, 1, 0, 0, &r) == 0);
	PT_TEST_TRUE(stats(&j).dropped == 1);
	job_close(&j);
}

// test_policy_sync_backup_workers: with one backup worker a step closes
// with the first W-1 gradients; the last one is dropped, counted, and
// changes nothing.
static void test_policy_sync_backup_workers(void)
{
	job j;
	pti_hdr r;
	job_open(&j, "sync", 3, "--backup-workers=1");
	PT_TEST_TRUE(push(&j, PT_OP_PUSH, 2, 0, 0, &r) == 0);
	PT_TEST_TRUE(push(&j, PT_OP_PUSH, 0, 0, 0, &r) == 0);
	pti_hdr st = stats(&j);
	PT_TEST_TRUE(st.ver == 1 && st.dropped == 0);
	PT_TEST_TRUE(push(&j, PT_OP_PUSH, 1, 0, 0, &r) == 0);
	st = stats(&j);
	PT_TEST_TRUE(st.ver == 1 && st.dropped == 1 && st.updates == 1);
	job_close(&j);
}

// test_policy_sync_lost_worker: a worker whose connection closes no longer
// holds the step back: the others close it, and its parked pull is let go.
static void test_policy_sync_lost_worker(void)
{
	job j;
	pti_hdr r, h;
	job_open(&j, "sync", 2, NULL);
	pti_hdr_init(&h, PT_OP_PULL, PT_ROLE_WORKER, 1);
	h.has |= PTI_H_VER;
	h.ver = 1;
	PT_TEST_TRUE(ask(&j, 2, &h, NULL, 0, &r) == -1); // parked
	PT_TEST_TRUE(push(&j, PT_OP_PUSH, 0, 0, 0, &r) == 0);
	PT_TEST_TRUE(stats(&j).ver == 0);
	pti_local_disconnect(j.s, 2);
	pti_hdr st = stats(&j);
	PT_TEST_TRUE(st.ver == 1 && st.n_lost == 1);
	PT_TEST_TRUE(push(&j, PT_OP_PUSHPULL, 0, 1, 1, &r) == 0 && r.ver == 2);
	job_close(&j);
}

// test_policy_async_staleness: async applies each gradient as it comes;
// its staleness is the versions applied since the one it was computed
// from; --max-staleness drops staler ones (counted, not applied).
static void test_policy_async_staleness(void)
{
	job j;
	pti_hdr r;
	job_open(&j, "async", 2, "--max-staleness=1");
	PT_TEST_TRUE(push(&j, PT_OP_PUSHPULL, 0, 0, 0, &r) == 0);
	PT_TEST_TRUE(r.ver == 1 && r.staleness == 0);
	PT_TEST_TRUE(push(&j, PT_OP_PUSHPULL, 1, 0, 0, &r) == 0);
	PT_TEST_TRUE(r.ver == 2 && r.staleness == 1);
	PT_TEST_TRUE(push(&j, PT_OP_PUSHPULL, 0, 1, 0, &r) == 0);
	PT_TEST_TRUE(r.ver == 2); // staleness 2 > 1: dropped
	pti_hdr st = stats(&j);
	PT_TEST_TRUE(st.updates == 2 && st.dropped == 1 && st.stale_max == 1);
	uint64_t hs[PT_STALE_BUCKETS];
	hist(&j, hs);
	PT_TEST_TRUE(hs[0] == 1 && hs[1] == 1 && hs[2] == 0);
	job_close(&j);
}

// test_policy_ssp_bound: with --staleness 1 a worker may start step c+1
// only once every worker has pushed step c-1: worker 0's pushpull of step
// 1 waits until worker 1 pushes step 0, and is then answered.
static void test_policy_ssp_bound(void)
{
	job j;
	pti_hdr r;
	job_open(&j, "ssp", 2, "--staleness=1");
	PT_TEST_TRUE(push(&j, PT_OP_PUSHPULL, 0, 0, 0, &r) == 0);
	PT_TEST_TRUE(push(&j, PT_OP_PUSHPULL, 0, 1, 1, &r) == -1); // waits
	pti_hdr st = stats(&j);
	PT_TEST_TRUE(st.updates == 2); // applied; only the reply waits
	PT_TEST_TRUE(push(&j, PT_OP_PUSHPULL, 1, 0, 0, &r) == 0);
	PT_TEST_TRUE(r.staleness == 2);
	// worker 0 could go on now: a pushpull of its step 2 needs worker
	// 1's step 1, which has not come
	PT_TEST_TRUE(push(&j, PT_OP_PUSHPULL, 0, 2, 3, &r) == -1);
	PT_TEST_TRUE(push(&j, PT_OP_PUSH, 1, 1, 3, &r) == 0);
	PT_TEST_TRUE(stats(&j).updates == 5);
	job_close(&j);
}

// Sync: a worker's gradient may come in pieces, in any order; the step
// closes once every worker's pieces cover the shard, and a range pushed
// twice is refused without changing anything.
static void test_policy_sync_pieces(void)
{
	job j;
	job_open(&j, "sync", 2, NULL);
	uint64_t n = j.n, h = n / 2;
	PT_TEST_TRUE(piece(&j, 0, 0, 0, h, n - h) == 0);  // upper half first
	PT_TEST_TRUE(piece(&j, 0, 0, 0, h - 1, 2) == PT_ESTATE); // overlaps
	PT_TEST_TRUE(piece(&j, 1, 0, 0, 0, n) == 0);      // worker 1: whole
	PT_TEST_TRUE(stats(&j).ver == 0); // worker 0's lower half missing
	PT_TEST_TRUE(piece(&j, 0, 0, 0, 0, h) == 0);
	pti_hdr st = stats(&j);
	PT_TEST_TRUE(st.ver == 1 && st.updates == 1 && st.rejected == 1);
	// Worker 1's whole gradient then any piece of the same step: refused.
	PT_TEST_TRUE(piece(&j, 1, 1, 1, 0, n) == 0);
	PT_TEST_TRUE(piece(&j, 1, 1, 1, 3, 1) == PT_ESTATE);
	PT_TEST_TRUE(stats(&j).ver == 1);
	job_close(&j);
}

// Async: pieces of a step are applied as they come; a piece of the step
// a worker pushed last goes with it, once, and an older step is refused.
static void test_policy_async_pieces(void)
{
	job j;
	job_open(&j, "async", 2, NULL);
	uint64_t n = j.n, h = n / 2;
	PT_TEST_TRUE(piece(&j, 0, 0, 0, 0, h) == 0);
	PT_TEST_TRUE(piece(&j, 0, 0, 1, h, n - h) == 0);  // the same step
	PT_TEST_TRUE(piece(&j, 0, 0, 2, 0, 1) == PT_ESTATE); // again
	PT_TEST_TRUE(piece(&j, 0, 1, 2, 0, n) == 0);      // the next step
	PT_TEST_TRUE(piece(&j, 0, 0, 3, h, 1) == PT_ESTATE); // an old one
	pti_hdr st = stats(&j);
	PT_TEST_TRUE(st.updates == 3 && st.rejected == 2);
	job_close(&j);
}

// ask_vals is ask, with the reply's values copied to vals when it
// carries the whole shard.
static int ask_vals(job *j, uint32_t pipe, const pti_hdr *h,
    const float *pay, uint64_t n, float *vals)
{
	nng_msg *m, *rep;
	const void *p;
	pti_hdr r;
	PT_TEST_OK(pti_msg_encode(&m, h, pay, n));
	rep = pti_local_request(j->s, pipe, m);
	nng_msg_free(m);
	if (rep == NULL)
		return -1;
	PT_TEST_OK(pti_msg_decode(&r, &p, rep));
	PT_TEST_TRUE(r.status != 0 || (p != NULL && r.n == j->n));
	if (r.status == 0 && p != NULL && r.n == j->n)
		memcpy(vals, p, j->n * sizeof(float));
	nng_msg_free(rep);
	return (int)r.status;
}

// pull_all reads the whole shard as the control client.
static void pull_all(job *j, float *vals)
{
	pti_hdr h;
	pti_hdr_init(&h, PT_OP_PULL, PT_ROLE_CONTROL, 0);
	PT_TEST_TRUE(ask_vals(j, MAXW + 1, &h, NULL, 0, vals) == 0);
}

// test_policy_replies_in_place: a shard of 76.8 KB (a request with a
// header's room) gets a pushpull's reply written into its request as the
// update goes, sync (one worker, two steps) and async (two workers):
// each reply holds exactly the parameters a later pull reads, the old
// ones minus lr x each step's mean gradient (ones).
static void test_policy_replies_in_place(void)
{
	for (int sync = 1; sync >= 0; sync--) {
		job j;
		uint32_t w = sync ? 1 : 2;
		job_open_spec(&j, sync ? "sync" : "async", w, NULL, "mlp:256");
		uint64_t n = j.n;
		PT_TEST_TRUE(n * sizeof(float) >= PTI_ROOM_FROM);
		float *p0 = malloc(n * sizeof(float));
		float *rep = malloc(n * sizeof(float));
		float *now = malloc(n * sizeof(float));
		pull_all(&j, p0);
		for (int64_t step = 0; step < 2; step++) {
			uint32_t r = (uint32_t)step % w;
			pti_hdr h;
			pti_hdr_init(&h, PT_OP_PUSHPULL, PT_ROLE_WORKER, r);
			h.has |= PTI_H_STEP | PTI_H_VER | PTI_H_RANGE;
			h.step = sync ? step : 0;
			h.ver = step;
			h.off = 0;
			PT_TEST_TRUE(ask_vals(&j, r + 1, &h, j.g, n, rep) == 0);
			pull_all(&j, now);
			PT_TEST_TRUE(memcmp(rep, now, n * sizeof(float)) == 0);
		}
		int moved = 1;
		float by = 2 * (float)LR; // two steps of ones
		for (uint64_t i = 0; i < n; i++)
			moved &= fabsf(now[i] - (p0[i] - by)) < 1e-5f;
		PT_TEST_TRUE(moved);
		PT_TEST_TRUE(pti_local_replies_filled(j.s) == 2);
		free(p0), free(rep), free(now);
		job_close(&j);
	}
}

// pp sends worker r's pushpull of g[off, off + n) for step (computed from
// version step); a reply's values go to out[off, ...) and its version to
// *ver. Returns the status, or -1 when the reply was parked.
static int pp(job *j, uint32_t r, int64_t step, uint64_t off, uint64_t n,
    const float *g, float *out, int64_t *ver)
{
	nng_msg *m, *rep;
	const void *p;
	pti_hdr h, rh;
	pti_hdr_init(&h, PT_OP_PUSHPULL, PT_ROLE_WORKER, r);
	h.has |= PTI_H_STEP | PTI_H_VER | PTI_H_RANGE;
	h.step = step;
	h.ver = step;
	h.off = off;
	PT_TEST_OK(pti_msg_encode(&m, &h, g + off, n));
	rep = pti_local_request(j->s, r + 1, m);
	nng_msg_free(m);
	if (rep == NULL)
		return -1;
	PT_TEST_OK(pti_msg_decode(&rh, &p, rep));
	if (rh.status == 0) {
		PT_TEST_TRUE(p != NULL && rh.n == n && rh.off == off);
		memcpy(out + off, p, n * sizeof(float));
		*ver = rh.ver;
	}
	nng_msg_free(rep);
	return (int)rh.status;
}

// test_policy_sync_eager: in sync, a range every worker has pushed is
// applied before the step closes, and the pushpull that completes it is
// answered at once with the next version's values for it; a pull waiting
// for that version is answered at once for such a range and parked for
// the rest. The parameters end with the same bits as when every worker
// pushes its gradient whole. With backup workers nothing goes ahead.
static void test_policy_sync_eager(void)
{
	job a, b;
	job_open_spec(&a, "sync", 2, NULL, "mlp:256");
	job_open_spec(&b, "sync", 2, NULL, "mlp:256");
	uint64_t n = a.n, h = n / 3;
	float *g[2], *out = calloc(n, sizeof(float));
	float *pa = malloc(n * sizeof(float)), *pb = malloc(n * sizeof(float));
	for (int r = 0; r < 2; r++) {
		g[r] = malloc(n * sizeof(float));
		for (uint64_t i = 0; i < n; i++)
			g[r][i] = (float)(r ? cos(0.7 * i) : sin(0.3 * i)) / 3;
	}
	int64_t ver = -1;
	for (int64_t step = 0; step < 2; step++) {
		// a: pieces [0, h) then [h, n), worker 0 first each time.
		PT_TEST_TRUE(pp(&a, 0, step, 0, h, g[0], out, &ver) == -1);
		PT_TEST_TRUE(pp(&a, 1, step, 0, h, g[1], out, &ver) == 0);
		PT_TEST_TRUE(ver == step + 1 && stats(&a).ver == step);
		// The range's values are the next version's: a pull for it
		// is answered, one for the rest waits.
		pti_hdr q, r;
		pti_hdr_init(&q, PT_OP_PULL, PT_ROLE_WORKER, 0);
		q.has |= PTI_H_VER | PTI_H_RANGE;
		q.ver = step + 1;
		q.off = 0;
		q.n = h;
		PT_TEST_TRUE(ask(&a, 1, &q, NULL, 0, &r) == 0 &&
			     r.ver == step + 1);
		q.off = h;
		q.n = n - h;
		PT_TEST_TRUE(ask(&a, 1, &q, NULL, 0, &r) == -1);
		PT_TEST_TRUE(pp(&a, 1, step, h, n - h, g[1], out, &ver) == -1);
		PT_TEST_TRUE(pp(&a, 0, step, h, n - h, g[0], out, &ver) == 0);
		PT_TEST_TRUE(ver == step + 1 && stats(&a).ver == step + 1);
		// b: the same gradients whole.
		PT_TEST_TRUE(pp(&b, 1, step, 0, n, g[1], out, &ver) == -1);
		PT_TEST_TRUE(pp(&b, 0, step, 0, n, g[0], out, &ver) == 0);
	}
	pull_all(&a, pa);
	pull_all(&b, pb);
	PT_TEST_TRUE(memcmp(pa, pb, n * sizeof(float)) == 0);
	PT_TEST_TRUE(memcmp(out, pb, n * sizeof(float)) == 0);
	job_close(&a);
	job_close(&b);
	// Backup workers: a step's set of gradients is not known until it
	// closes, so a piece waits like the whole.
	job_open_spec(&a, "sync", 2, "--backup-workers=1", "mlp:256");
	PT_TEST_TRUE(pp(&a, 0, 0, 0, h, g[0], out, &ver) == -1);
	PT_TEST_TRUE(pp(&a, 1, 0, 0, h, g[1], out, &ver) == -1);
	job_close(&a);
	free(g[0]), free(g[1]), free(out), free(pa), free(pb);
}

// test_policy_sync_kept_pieces: pieces kept in their requests, cut at
// other places by each worker, are summed right: step 0 has worker 0's
// gradient in 20 pieces (past the 16 kept: into its row), worker 1's in
// two kept ones, and worker 2's in two that each apply a range ahead,
// reading worker 1's pieces across their edge; step 1 has workers 0 and
// 1 in kept pieces with different edges and worker 2 whole, which closes
// the step over both. The parameters and the reply end with the bits of
// the same gradients pushed whole.
static void test_policy_sync_kept_pieces(void)
{
	job a, b;
	job_open_spec(&a, "sync", 3, NULL, "mlp:256");
	job_open_spec(&b, "sync", 3, NULL, "mlp:256");
	uint64_t n = a.n, h = n / 3, h2 = n / 2, h3 = 5 * n / 12;
	float *g[3], *out = calloc(n, sizeof(float));
	float *pa = malloc(n * sizeof(float)), *pb = malloc(n * sizeof(float));
	for (int r = 0; r < 3; r++) {
		g[r] = malloc(n * sizeof(float));
		for (uint64_t i = 0; i < n; i++)
			g[r][i] = (float)sin(0.3 * i + r) / (float)(r + 2);
	}
	int64_t ver = -1;
	for (uint64_t k = 0; k < 20; k++)
		PT_TEST_TRUE(push_range(&a, 0, 0, 0, k * n / 20,
				 (k + 1) * n / 20 - k * n / 20, g[0]) == 0);
	PT_TEST_TRUE(push_range(&a, 1, 0, 0, 0, h2, g[1]) == 0);
	PT_TEST_TRUE(push_range(&a, 1, 0, 0, h2, n - h2, g[1]) == 0);
	PT_TEST_TRUE(stats(&a).ver == 0);
	PT_TEST_TRUE(push_range(&a, 2, 0, 0, 0, h3, g[2]) == 0);
	PT_TEST_TRUE(pp(&a, 2, 0, h3, n - h3, g[2], out, &ver) == 0);
	PT_TEST_TRUE(ver == 1 && stats(&a).ver == 1);
	PT_TEST_TRUE(push_range(&a, 0, 1, 1, 0, h, g[0]) == 0);
	PT_TEST_TRUE(push_range(&a, 0, 1, 1, h, n - h, g[0]) == 0);
	PT_TEST_TRUE(push_range(&a, 1, 1, 1, h2, n - h2, g[1]) == 0);
	PT_TEST_TRUE(push_range(&a, 1, 1, 1, 0, h2, g[1]) == 0);
	PT_TEST_TRUE(push_range(&a, 2, 1, 1, 0, n, g[2]) == 0);
	PT_TEST_TRUE(stats(&a).ver == 2);
	for (int64_t step = 0; step < 2; step++)
		for (uint32_t r = 0; r < 3; r++)
			PT_TEST_TRUE(push_range(&b, r, step, step, 0, n, g[r]) == 0);
	pull_all(&a, pa);
	pull_all(&b, pb);
	PT_TEST_TRUE(memcmp(pa, pb, n * sizeof(float)) == 0);
	job_close(&a);
	job_close(&b);
	// The reply of step 0 (its [h3, n)): step 1 of b undone is not at
	// hand, so check it against a job of step 0 alone.
	job_open_spec(&b, "sync", 3, NULL, "mlp:256");
	for (uint32_t r = 0; r < 3; r++)
		PT_TEST_TRUE(push_range(&b, r, 0, 0, 0, n, g[r]) == 0);
	pull_all(&b, pb);
	PT_TEST_TRUE(memcmp(out + h3, pb + h3, (n - h3) * sizeof(float)) == 0);
	job_close(&b);
	for (int r = 0; r < 3; r++)
		free(g[r]);
	free(out), free(pa), free(pb);
}

static const pti_test_case cases[] = {
    {"test_policy_sync_waits_for_all", test_policy_sync_waits_for_all},
    {"test_policy_sync_backup_workers", test_policy_sync_backup_workers},
    {"test_policy_sync_lost_worker", test_policy_sync_lost_worker},
    {"test_policy_async_staleness", test_policy_async_staleness},
    {"test_policy_ssp_bound", test_policy_ssp_bound},
    {"test_policy_sync_pieces", test_policy_sync_pieces},
    {"test_policy_sync_kept_pieces", test_policy_sync_kept_pieces},
    {"test_policy_async_pieces", test_policy_async_pieces},
    {"test_policy_replies_in_place", test_policy_replies_in_place},
    {"test_policy_sync_eager", test_policy_sync_eager},
    {NULL, NULL},
};

int main(int argc, char **argv)
{
	// The job secret the cases' servers and connections share.
	setenv(PT_SECRET_ENV, "0123456789abcdef0123456789abcdef", 1);
	return pti_test_main(argc, argv, cases);
}
