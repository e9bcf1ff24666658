// tests/ring_test.c - the ring all-reduce (worker/ring.h) over real nng
// ipc sockets, one thread per worker: sums of every size against the
// ring order ring.h promises, the same bits on every worker, messages of
// another step refused, and a stranger whose proof is wrong shut out
// while the ring still forms.
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

#include <nng/nng.h>
#include <nng/protocol/pair1/pair.h>

#include "auth.h"
#include "proto.h"
#include "ring.h"
#include "test.h"

#define RT_MAX 4

typedef struct rt_member {
	const char *urls;
	uint32_t rank, n;
	const pt_secret *secret;
	float *buf; // (len)
	uint64_t len;
	int64_t step; // this member's step tag
	int rv_open, rv_sum;
	char err[256];
	double timeout_s;
	pthread_barrier_t *all; // every member done before any closes
} rt_member;

static void *rt_main(void *arg)
{
	rt_member *m = arg;
	pti_ring *r = NULL;
	m->rv_open = pti_ring_open(&r, m->urls, m->rank, m->n, m->secret, 42,
	    m->timeout_s > 0 ? m->timeout_s : 5.0);
	if (m->rv_open == 0)
		m->rv_sum = pti_ring_sum(r, m->buf, m->len, m->step);
	if (m->rv_open || m->rv_sum)
		snprintf(m->err, sizeof(m->err), "%s",
		    pt_errmsg(m->rv_open ? m->rv_open : m->rv_sum));
	// nng 1.5.2 can hang closing a socket while a peer socket of the
	// same process is in a receive on the link: close once all are out.
	if (m->all != NULL)
		pthread_barrier_wait(m->all);
	pti_ring_close(r);
	return NULL;
}

static void rt_urls(char *out, size_t size, const char *dir, uint32_t n)
{
	size_t used = 0;
	for (uint32_t i = 0; i < n; i++)
		used += (size_t)snprintf(out + used, size - used,
		    "%sipc://%s/w%u", i ? "," : "", dir, i);
}

// rt_value: worker r's element i, varied so that the order of a sum
// shows in its bits.
static float rt_value(uint32_t r, uint64_t i)
{
	return (float)((r + 1) * 0.1 + (double)i * 1e-3 + 1.0 / (3 + r + i));
}

// rt_ring runs n members on vectors of len elements (steps as given);
// they are left in m[].
static void rt_ring(rt_member *m, uint32_t n, uint64_t len,
    const int64_t *steps, const pt_secret *secret, char *dir)
{
	static char urls[4096];
	static pthread_barrier_t all;
	pthread_t th[RT_MAX];
	rt_urls(urls, sizeof(urls), dir, n);
	pthread_barrier_init(&all, NULL, n);
	for (uint32_t r = 0; r < n; r++) {
		m[r] = (rt_member){urls, r, n, secret, NULL, len,
		    steps ? steps[r] : 7, 0, 0, "", steps ? 1.0 : 5.0, &all};
		m[r].buf = malloc((len ? len : 1) * sizeof(float));
		for (uint64_t i = 0; i < len; i++)
			m[r].buf[i] = rt_value(r, i);
		pthread_create(&th[r], NULL, rt_main, &m[r]);
	}
	for (uint32_t r = 0; r < n; r++)
		pthread_join(th[r], NULL);
	pthread_barrier_destroy(&all);
}

static void rt_free(rt_member *m, uint32_t n)
{
	for (uint32_t r = 0; r < n; r++)
		free(m[r].buf);
}

// The sum of element i as ring.h says: segment s = the one i lies in,
// summed from worker s round the ring.
static float rt_expect(uint32_t n, uint64_t len, uint64_t i)
{
	uint32_t s = 0;
	while (len * (s + 1) / n <= i)
		s++;
	float acc = rt_value(s, i);
	for (uint32_t k = 1; k < n; k++)
		acc = acc + rt_value((s + k) % n, i);
	return acc;
}

static void test_ring_sums_every_size(void)
{
	// Past 65537 the segments go in several messages (ring.c's chunks
	// of 256Ki floats): 524289 at W = 2 cuts one segment in 1 and the
	// other in 2; 2100001 gives 3 to 5 a segment.
	static const uint64_t lens[] = {1, 2, 5, 1000, 65537, 524289,
	    2100001};
	pt_secret sec;
	char dir[256];
	PT_TEST_OK(pt_secret_make(&sec));
	for (uint32_t n = 2; n <= RT_MAX; n++)
		for (size_t k = 0; k < sizeof(lens) / sizeof(lens[0]); k++) {
			rt_member m[RT_MAX];
			PT_TEST_TRUE(pt_test_tmpdir(dir, sizeof(dir), "ring") ==
				     0);
			rt_ring(m, n, lens[k], NULL, &sec, dir);
			uint64_t bad = 0;
			for (uint32_t r = 0; r < n; r++) {
				if (m[r].rv_open || m[r].rv_sum)
					PT_TEST_FAIL_AT("W=%u n=%llu worker "
					    "%u: %s", n,
					    (unsigned long long)lens[k], r,
					    m[r].err);
				for (uint64_t i = 0; i < lens[k]; i++) {
					float e = rt_expect(n, lens[k], i);
					bad += memcmp(&m[r].buf[i], &e,
					    sizeof(e)) != 0;
				}
			}
			PT_TEST_TRUE(bad == 0);
			rt_free(m, n);
			pt_test_rmdir(dir);
		}
}

static void test_ring_one_worker_is_identity(void)
{
	pt_secret sec;
	pti_ring *r;
	float v[3] = {1, 2, 3};
	PT_TEST_OK(pt_secret_make(&sec));
	PT_TEST_OK(pti_ring_open(&r, "", 0, 1, &sec, 42, 1.0));
	PT_TEST_OK(pti_ring_sum(r, v, 3, 0));
	PT_TEST_TRUE(v[0] == 1 && v[1] == 2 && v[2] == 3);
	PT_TEST_TRUE(pti_ring_bytes(r) == 0);
	pti_ring_close(r);
}

static void test_ring_other_step_refused(void)
{
	// Worker 1 is a step ahead: its neighbours refuse its segments,
	// naming what they expected.
	pt_secret sec;
	char dir[256];
	rt_member m[3];
	int64_t steps[3] = {7, 8, 7};
	PT_TEST_OK(pt_secret_make(&sec));
	PT_TEST_TRUE(pt_test_tmpdir(dir, sizeof(dir), "ring") == 0);
	rt_ring(m, 3, 30, steps, &sec, dir);
	PT_TEST_TRUE(m[0].rv_open == 0 && m[1].rv_open == 0 &&
		     m[2].rv_open == 0);
	PT_TEST_ERR(m[2].rv_sum, PT_EPROTO); // worker 1 is its left
	PT_TEST_STR_HAS(m[2].err, "expected step 7");
	rt_free(m, 3);
	pt_test_rmdir(dir);
}

static void test_ring_bad_urls(void)
{
	pt_secret sec;
	pti_ring *r = NULL;
	PT_TEST_OK(pt_secret_make(&sec));
	PT_TEST_ERR(pti_ring_open(&r, "ipc:///nowhere/w0", 0, 2, &sec, 42,
			1.0),
	    PT_EINVAL);
	PT_TEST_STR_HAS(pt_errmsg(PT_EINVAL), "worker 1 of the ring of 2");
	PT_TEST_TRUE(r == NULL);
}

// A stranger (another secret) that connects to worker 0 as its left
// neighbour, takes worker 0's answer and sends a made-up proof.
typedef struct rt_stranger {
	char url[300];
	volatile int sent;    // its made-up proof went out
	volatile int closing; // it closes its own socket
	volatile int refused; // its connection was closed on it before
	volatile int closed;  // its nng_close returned
} rt_stranger;

static void rt_closed_cb(nng_pipe p, nng_pipe_ev ev, void *arg)
{
	rt_stranger *s = arg;
	(void)p;
	(void)ev;
	if (!s->closing)
		s->refused = 1;
}

static void *rt_stranger_main(void *arg)
{
	rt_stranger *s = arg;
	nng_socket sk;
	nng_msg *m;
	pti_hdr h;
	if (nng_pair1_open(&sk) != 0)
		return NULL;
	nng_socket_set_ms(sk, NNG_OPT_RECVTIMEO, 3000);
	nng_socket_set_ms(sk, NNG_OPT_SENDTIMEO, 3000);
	nng_pipe_notify(sk, NNG_PIPE_EV_REM_POST, rt_closed_cb, s);
	if (nng_dial(sk, s->url, NULL, NNG_FLAG_NONBLOCK) != 0)
		goto done;
	pti_hdr_init(&h, PT_OP_CHALLENGE, PT_ROLE_PEER, 1); // worker 1
	h.has = PTI_H_NONCE;
	memset(h.nonce, 9, PT_NONCE_LEN);
	if (pti_msg_encode(&m, &h, NULL, 0) != 0)
		goto done;
	if (nng_sendmsg(sk, m, 0) != 0) {
		nng_msg_free(m);
		goto done;
	}
	if (nng_recvmsg(sk, &m, 0) != 0) // worker 0's answer
		goto done;
	nng_msg_free(m);
	pti_hdr_init(&h, PT_OP_HELLO, PT_ROLE_PEER, 1);
	h.has = PTI_H_MAC;
	memset(h.mac, 5, PT_MAC_LEN);
	if (pti_msg_encode(&m, &h, NULL, 0) != 0)
		goto done;
	if (nng_sendmsg(sk, m, 0) != 0) {
		nng_msg_free(m);
		goto done;
	}
	s->sent = 1;
	// Worker 0 closes the connection on us.
	for (int i = 0; i < 500 && !s->refused; i++)
		usleep(10 * 1000);
done:
	s->sent = 1;
	s->closing = 1;
	nng_close(sk);
	s->closed = 1;
	return NULL;
}

// stranger_round runs test_ring_stranger_shut_out's scene once with the
// stranger st; the members and their buffers are left in m, b0 and b1.
// Returns 0 when nng 1.5.2 did not return from the stranger's nng_close
// within 20 s (its poller thread spinning on the closed link, seen about
// once in 10 runs here): the stranger is then left to its thread, as the
// ring's own closes are (pti_ring_close), and st must outlive it.
static int stranger_round(rt_stranger *st, const pt_secret *sec,
    rt_member m[2], float b0[3], float b1[3], char *dir, size_t size)
{
	static char urls[1024];
	if (pt_test_tmpdir(dir, size, "ring") != 0)
		return 1;
	rt_urls(urls, sizeof(urls), dir, 2);
	for (int i = 0; i < 3; i++) {
		b0[i] = rt_value(0, i);
		b1[i] = rt_value(1, i);
	}
	m[0] = (rt_member){urls, 0, 2, sec, b0, 3, 7, 0, 0, "", 5, NULL};
	m[1] = (rt_member){urls, 1, 2, sec, b1, 3, 7, 0, 0, "", 5, NULL};
	snprintf(st->url, sizeof(st->url), "ipc://%s/w0", dir);
	pthread_t t0, t1, ts;
	pthread_create(&t0, NULL, rt_main, &m[0]);
	pthread_create(&ts, NULL, rt_stranger_main, st);
	for (int i = 0; i < 500 && !st->sent; i++)
		usleep(10 * 1000);
	pthread_create(&t1, NULL, rt_main, &m[1]);
	for (int i = 0; i < 2000 && !st->closed; i++)
		usleep(10 * 1000);
	int closed = st->closed;
	if (closed)
		pthread_join(ts, NULL);
	else
		pthread_detach(ts);
	pthread_join(t0, NULL);
	pthread_join(t1, NULL);
	return closed;
}

static void test_ring_stranger_shut_out(void)
{
	// The stranger connects first, and has sent its proof when worker 1
	// starts: worker 0 closes the stranger's connection, worker 1 joins
	// then, and the sum is right. When nng's close of the stranger hangs,
	// the ring fails with it and so does a second round in the same
	// process (both seen): the case says skip, why, and checks nothing.
	static rt_stranger st; // a hung stranger's callback may read it
	pt_secret sec;
	char dir[256];
	rt_member m[2];
	float b0[3], b1[3];
	PT_TEST_OK(pt_secret_make(&sec));
	if (!stranger_round(&st, &sec, m, b0, b1, dir, sizeof(dir))) {
		pt_test_skip = "nng 1.5.2 did not return from closing the "
			       "stranger's socket in 20 s (its poller spinning)";
		return;
	}
	PT_TEST_TRUE(st.refused);
	PT_TEST_TRUE(m[0].rv_open == 0 && m[0].rv_sum == 0);
	PT_TEST_TRUE(m[1].rv_open == 0 && m[1].rv_sum == 0);
	for (int i = 0; i < 3; i++) {
		float e = rt_value(0, i) + rt_value(1, i);
		PT_TEST_TRUE(b0[i] == e && b1[i] == e);
	}
	pt_test_rmdir(dir);
}

static const pt_test_case cases[] = {
    {"test_ring_sums_every_size", test_ring_sums_every_size},
    {"test_ring_one_worker_is_identity", test_ring_one_worker_is_identity},
    {"test_ring_other_step_refused", test_ring_other_step_refused},
    {"test_ring_bad_urls", test_ring_bad_urls},
    {"test_ring_stranger_shut_out", test_ring_stranger_shut_out},
    {NULL, NULL},
};

int main(int argc, char **argv)
{
	return pt_test_main(argc, argv, cases);
}
