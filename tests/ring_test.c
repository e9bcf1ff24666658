// tests/ring_test.c - the ring all-reduce (train/ring.h) over real nng
// ipc sockets, one thread per worker: sums of every size against the
// ring order ring.h promises, the same bits on every worker, messages of
// another step refused, and a stranger whose proof is wrong shut out
// while the ring still forms.
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <nng/nng.h>
#include <nng/protocol/pair1/pair.h>

#include "common/auth.h"
#include "common/proto.h"
#include "tests/test.h"
#include "train/ring.h"

#define RT_MAX 4

typedef struct rt_member {
	const char *urls;
	uint32_t rank, n;
	const pti_secret *secret;
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
    const int64_t *steps, const pti_secret *secret, char *dir)
{
	static char urls[4096];
	static pthread_barrier_t all;
	pthread_t th[RT_MAX];
	rt_urls(urls, sizeof(urls), dir, n);
	pthread_barrier_init(&all, NULL, n);
	for (uint32_t r = 0; r < n; r++) {
		m[r] = (rt_member){urls, r, n, secret, NULL, len,
		    steps ? steps[r] : 7, 0, 0, "", steps ? 10.0 : 60.0, &all};
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
	pti_secret sec;
	char dir[256];
	PT_TEST_OK(pti_secret_make(&sec));
	for (uint32_t n = 2; n <= RT_MAX; n++)
		for (size_t k = 0; k < sizeof(lens) / sizeof(lens[0]); k++) {
			rt_member m[RT_MAX];
			PT_TEST_TRUE(pti_test_tmpdir(dir, sizeof(dir), "ring") ==
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
			pti_test_rmdir(dir);
		}
}

static void test_ring_one_worker_is_identity(void)
{
	pti_secret sec;
	pti_ring *r;
	float v[3] = {1, 2, 3};
	PT_TEST_OK(pti_secret_make(&sec));
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
	pti_secret sec;
	char dir[256];
	rt_member m[3];
	int64_t steps[3] = {7, 8, 7};
	PT_TEST_OK(pti_secret_make(&sec));
	PT_TEST_TRUE(pti_test_tmpdir(dir, sizeof(dir), "ring") == 0);
	rt_ring(m, 3, 30, steps, &sec, dir);
	PT_TEST_TRUE(m[0].rv_open == 0 && m[1].rv_open == 0 &&
		     m[2].rv_open == 0);
	PT_TEST_ERR(m[2].rv_sum, PT_EPROTO); // worker 1 is its left
	PT_TEST_STR_HAS(m[2].err, "expected step 7");
	rt_free(m, 3);
	pti_test_rmdir(dir);
}

static void test_ring_bad_urls(void)
{
	pti_secret sec;
	pti_ring *r = NULL;
	PT_TEST_OK(pti_secret_make(&sec));
	PT_TEST_ERR(pti_ring_open(&r, "ipc:///nowhere/w0", 0, 2, &sec, 42,
			1.0),
	    PT_EINVAL);
	PT_TEST_STR_HAS(pt_errmsg(PT_EINVAL), "worker 1 of the ring of 2");
	PT_TEST_TRUE(r == NULL);
}

// A stranger (another secret) that connects to worker 0 as its left
// neighbour, takes worker 0's answer and sends a made-up proof. It runs
// as a process of its own (this program again, `--stranger URL`), so the
// ring's process never closes the stranger's socket: a close in nng 1.5.2
// can wedge the process's reaper (train/ring.c says when), and with it
// every later join.
// The stranger prints "sent" once its proof went out and "refused" when
// worker 0 closed the connection on it, then ends without closing (the
// kernel does).
static volatile int rt_refused;

static void rt_closed_cb(nng_pipe p, nng_pipe_ev ev, void *arg)
{
	(void)p;
	(void)ev;
	(void)arg;
	rt_refused = 1;
}

static int rt_send(nng_socket sk, pti_hdr *h)
{
	nng_msg *m;
	if (pti_msg_encode(&m, h, NULL, 0) != 0)
		return -1;
	if (nng_sendmsg(sk, m, 0) != 0) {
		nng_msg_free(m);
		return -1;
	}
	return 0;
}

static int rt_stranger_main(const char *url)
{
	nng_socket sk;
	nng_dialer d;
	nng_msg *m;
	pti_hdr h;
	if (nng_pair1_open(&sk) != 0)
		_exit(1);
	nng_socket_set_ms(sk, NNG_OPT_RECVTIMEO, 60000);
	nng_socket_set_ms(sk, NNG_OPT_SENDTIMEO, 60000);
	nng_socket_set_ms(sk, NNG_OPT_RECONNMINT, 20);
	nng_socket_set_ms(sk, NNG_OPT_RECONNMAXT, 100);
	nng_pipe_notify(sk, NNG_PIPE_EV_REM_POST, rt_closed_cb, NULL);
	if (nng_dial(sk, url, &d, NNG_FLAG_NONBLOCK) != 0)
		_exit(1);
	pti_hdr_init(&h, PT_OP_CHALLENGE, PT_ROLE_PEER, 1); // worker 1
	h.has = PTI_H_NONCE;
	memset(h.nonce, 9, PT_NONCE_LEN);
	if (rt_send(sk, &h) != 0 || nng_recvmsg(sk, &m, 0) != 0)
		_exit(1); // no answer from worker 0
	nng_msg_free(m);
	// Connected: once refused, it is not to come back.
	nng_dialer_set_ms(d, NNG_OPT_RECONNMINT, 24 * 3600 * 1000);
	nng_dialer_set_ms(d, NNG_OPT_RECONNMAXT, 24 * 3600 * 1000);
	pti_hdr_init(&h, PT_OP_HELLO, PT_ROLE_PEER, 1);
	h.has = PTI_H_MAC;
	memset(h.mac, 5, PT_MAC_LEN);
	if (rt_send(sk, &h) != 0)
		_exit(1);
	printf("sent\n");
	fflush(stdout);
	for (int i = 0; i < 60000 && !rt_refused; i++)
		usleep(1000);
	printf("%s\n", rt_refused ? "refused" : "not refused in 60 s");
	fflush(stdout);
	_exit(0);
}

// rt_line reads the stranger's next line from fd into out (size n),
// waiting up to 60 s; 0, or -1 on its end or the deadline.
static int rt_line(int fd, char *out, size_t n)
{
	size_t used = 0;
	while (used + 1 < n) {
		struct pollfd p = {fd, POLLIN, 0};
		if (poll(&p, 1, 60000) <= 0 || read(fd, out + used, 1) != 1)
			return -1;
		if (out[used] == '\n')
			break;
		used++;
	}
	out[used] = '\0';
	return 0;
}

static void test_ring_stranger_shut_out(void)
{
	// The stranger connects first, and has sent its proof when worker 1
	// starts: worker 0 closes the stranger's connection, worker 1 joins
	// then, and the sum is right.
	pti_secret sec;
	char dir[256], url[300], said[64] = "", end[64] = "";
	static char urls[1024];
	rt_member m[2];
	float b0[3], b1[3];
	int fds[2];
	PT_TEST_OK(pti_secret_make(&sec));
	PT_TEST_TRUE(pti_test_tmpdir(dir, sizeof(dir), "ring") == 0);
	rt_urls(urls, sizeof(urls), dir, 2);
	snprintf(url, sizeof(url), "ipc://%s/w0", dir);
	for (int i = 0; i < 3; i++) {
		b0[i] = rt_value(0, i);
		b1[i] = rt_value(1, i);
	}
	m[0] = (rt_member){urls, 0, 2, &sec, b0, 3, 7, 0, 0, "", 60, NULL};
	m[1] = (rt_member){urls, 1, 2, &sec, b1, 3, 7, 0, 0, "", 60, NULL};
	PT_TEST_TRUE(pipe(fds) == 0);
	fflush(NULL);
	pid_t st = fork();
	if (st == 0) {
		dup2(fds[1], 1);
		close(fds[0]);
		execl("/proc/self/exe", "ring_test", "--stranger", url,
		    (char *)NULL);
		_exit(127);
	}
	close(fds[1]);
	pthread_t t0, t1;
	pthread_create(&t0, NULL, rt_main, &m[0]);
	int sent = rt_line(fds[0], said, sizeof(said)) == 0 &&
		   strcmp(said, "sent") == 0;
	pthread_create(&t1, NULL, rt_main, &m[1]);
	if (sent)
		rt_line(fds[0], end, sizeof(end));
	kill(st, SIGKILL);
	waitpid(st, NULL, 0);
	close(fds[0]);
	pthread_join(t0, NULL);
	pthread_join(t1, NULL);
	PT_TEST_TRUE(sent);
	if (strcmp(end, "refused") != 0)
		PT_TEST_FAIL_AT("the stranger said \"%s\", not refused", end);
	if (m[0].rv_open || m[0].rv_sum || m[1].rv_open || m[1].rv_sum)
		PT_TEST_FAIL_AT("the ring failed: %s / %s", m[0].err,
		    m[1].err);
	for (int i = 0; i < 3; i++) {
		float e = rt_value(0, i) + rt_value(1, i);
		PT_TEST_TRUE(b0[i] == e && b1[i] == e);
	}
	pti_test_rmdir(dir);
}

static const pti_test_case cases[] = {
    {"test_ring_sums_every_size", test_ring_sums_every_size},
    {"test_ring_one_worker_is_identity", test_ring_one_worker_is_identity},
    {"test_ring_other_step_refused", test_ring_other_step_refused},
    {"test_ring_bad_urls", test_ring_bad_urls},
    {"test_ring_stranger_shut_out", test_ring_stranger_shut_out},
    {NULL, NULL},
};

int main(int argc, char **argv)
{
	if (argc == 3 && strcmp(argv[1], "--stranger") == 0)
		return rt_stranger_main(argv[2]);
	return pti_test_main_isolated(argc, argv, cases);
}
