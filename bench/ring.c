// bench/ring.c - the ring all-reduce of --mode allreduce on its own, with
// no training around it, against its byte lower bound measured in the same
// run: 2 workers (this process and a forked one, as in a job) sum n
// floats with pti_ring_sum, and the same two processes time a raw nng
// REQ/REP round trip of n/2 floats each way (one copy at each end, the
// ipc buffers pstrain asks for), rounds interleaved. With 2 workers each
// all-reduce is 2 rounds in which each worker sends n/2 floats and
// receives n/2, so its bound at the raw rate is 2 raw round trips of n/2
// floats; the ring does more only by adding the segment it receives.
//
//   ring DIR N ROUNDS ITERS      e.g. ring /tmp/d 5820000 5 10
//
// Prints one line per round: "ring_us bound_us" (means over ITERS after a
// warm-up), for bench/run.sh to take the medians of.
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <sys/wait.h>

#include <nng/nng.h>
#include <nng/protocol/reqrep0/rep.h>
#include <nng/protocol/reqrep0/req.h>

#include "common/auth.h"
#include "common/err.h"
#include "train/ring.h"
#define BENCH_PROG "ring"
#include "bench/bench.h"

// pair_open: rank 0 dials (REQ), rank 1 listens (REP) on url, with
// pstrain's ipc buffers.
static nng_socket pair_open(const char *url, int rank)
{
	nng_socket s;
	int rv = rank ? nng_rep0_open(&s) : nng_req0_open(&s);
	if (rv != 0 ||
	    (rv = nng_pipe_notify(s, NNG_PIPE_EV_ADD_PRE, widen_cb, NULL)) ||
	    (rv = nng_socket_set_size(s, NNG_OPT_RECVMAXSZ, 0)) != 0 ||
	    (rv = rank ? nng_listen(s, url, NULL, 0)
		       : nng_dial(s, url, NULL, NNG_FLAG_NONBLOCK)) != 0)
		die("raw socket", rv, 1);
	return s;
}

// raw_rounds: k exchanges of `bytes` each way, each side copying the
// values into its message as a sender must.
static void raw_rounds(nng_socket s, int rank, const float *v, size_t bytes,
    int k)
{
	for (int i = 0; i < k; i++) {
		nng_msg *m;
		int rv;
		if (rank == 1 && (rv = nng_recvmsg(s, &m, 0)) != 0)
			die("raw receive", rv, 1);
		if (rank == 1)
			nng_msg_free(m);
		if ((rv = nng_msg_alloc(&m, bytes)) != 0)
			die("raw message", rv, 1);
		memcpy(nng_msg_body(m), v, bytes);
		if ((rv = nng_sendmsg(s, m, 0)) != 0)
			die("raw send", rv, 1);
		if (rank == 0 && (rv = nng_recvmsg(s, &m, 0)) != 0)
			die("raw receive", rv, 1);
		if (rank == 0)
			nng_msg_free(m);
	}
}

static int bench(const char *dir, uint64_t n, int rounds, int iters,
    int rank)
{
	char urls[1024], raw[512];
	pti_secret key;
	pti_ring *g;
	int rv, warm = iters / 5 + 1;
	memset(&key, 7, sizeof(key));
	key.len = 32;
	snprintf(urls, sizeof(urls), "ipc://%s/w0,ipc://%s/w1", dir, dir);
	snprintf(raw, sizeof(raw), "ipc://%s/raw", dir);
	if ((rv = pti_ring_open(&g, urls, (uint32_t)rank, 2, &key, 1, 60)))
		die("ring open", rv, 0);
	nng_socket s = pair_open(raw, rank);
	float *buf = malloc(n * sizeof(float));
	if (buf == NULL)
		die("buffer", PT_ENOMEM, 0);
	int64_t step = 0;
	for (int r = 0; r < rounds; r++) {
		double t0 = 0, ring_us, raw_us;
		for (int i = -warm; i < iters; i++) {
			if (i == 0)
				t0 = now_us();
			// Fresh values each time, as each step's gradient.
			for (uint64_t j = 0; j < n; j += 1024)
				buf[j] = (float)(i + rank);
			if ((rv = pti_ring_sum(g, buf, n, step++)) != 0)
				die("ring sum", rv, 0);
		}
		ring_us = (now_us() - t0) / iters;
		raw_rounds(s, rank, buf, n / 2 * sizeof(float), warm);
		t0 = now_us();
		raw_rounds(s, rank, buf, n / 2 * sizeof(float), iters);
		raw_us = (now_us() - t0) / iters;
		if (rank == 0)
			printf("%.1f %.1f\n", ring_us, 2 * raw_us);
		fflush(stdout);
	}
	// A last request tells worker 1 that worker 0 has every reply: a
	// reply still queued when its process exits would be lost.
	nng_msg *bye;
	if (rank == 0 && nng_msg_alloc(&bye, 0) == 0 &&
	    nng_sendmsg(s, bye, 0) != 0)
		nng_msg_free(bye);
	if (rank == 1 && (rv = nng_recvmsg(s, &bye, 0)) == 0)
		nng_msg_free(bye);
	free(buf);
	nng_close(s);
	pti_ring_close(g);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc != 5) {
		fprintf(stderr, "usage: ring DIR N ROUNDS ITERS\n");
		return 2;
	}
	// The heap as pstrain's processes keep it (cli/main.c), for both
	// sides: large messages reused, not mapped and faulted in afresh.
	mallopt(M_ARENA_MAX, 1);
	mallopt(M_MMAP_THRESHOLD, 32 << 20);
	mallopt(M_TRIM_THRESHOLD, 1 << 30);
	uint64_t n = strtoull(argv[2], NULL, 10);
	int rounds = atoi(argv[3]), iters = atoi(argv[4]);
	if (n < 2 || rounds < 1 || iters < 1) {
		fprintf(stderr, "ring: N >= 2, ROUNDS >= 1, ITERS >= 1\n");
		return 2;
	}
	pid_t kid = fork();
	if (kid < 0) {
		perror("ring: fork");
		return 1;
	}
	if (kid == 0)
		_exit(bench(argv[1], n, rounds, iters, 1));
	int rv = bench(argv[1], n, rounds, iters, 0), st;
	if (waitpid(kid, &st, 0) != kid || !WIFEXITED(st) ||
	    WEXITSTATUS(st) != 0) {
		fprintf(stderr, "ring: worker 1 failed\n");
		return 1;
	}
	return rv;
}
