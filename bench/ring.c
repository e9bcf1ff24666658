// bench/ring.c - the ring all-reduce of --mode allreduce on its own, with
// no training around it, against its byte lower bound measured in the same
// run: 2 workers (this process and a forked one, as in a job) sum n
// floats with pti_ring_sum, and the same two processes time a raw nng
// REQ/REP round trip of n/2 floats each way (one copy at each end, the
// ipc buffers pstrain asks for), rounds interleaved. With 2 workers each
// all-reduce is 2 rounds in which each worker sends n/2 floats and
// receives n/2, so its bound at the raw rate is 2 raw round trips of n/2
// floats; the ring does more only by adding the segment it receives.
// Two bounds that a correct two-way ring can come nearer to: the same
// exchange as raw nng sends it both ways at once (pair sockets, each
// worker sending its n/2 floats in the ring's chunks, as many ahead as
// the ring sends, while it receives the other's: `duplex`), and the
// memory-copy floor, the time to copy 2n floats (what the kernel copies
// of each worker's sends and receives over ipc, which no exchange
// through sockets avoids: `floor`).
//
//   ring DIR N ROUNDS ITERS      e.g. ring /tmp/d 5820000 5 10
//
// Prints one line per round: "ring_us bound_us duplex_us floor_us"
// (means over ITERS after a warm-up), for bench/run.sh to take the
// medians of.
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <sys/wait.h>

#include <nng/nng.h>
#include <nng/protocol/pair1/pair.h>
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

// The ring's chunks (train/ring.c): at most DUPLEX_CHUNK floats a
// message, DUPLEX_AHEAD sent before the first is taken.
#define DUPLEX_CHUNK ((uint64_t)256 * 1024)
#define DUPLEX_AHEAD 2

// duplex_open: a pair socket listening on DIR/duplex-RANK (from the
// other worker) and one dialling the other's, pstrain's ipc buffers.
static void duplex_open(const char *dir, int rank, nng_socket *in,
    nng_socket *out)
{
	char url[600];
	int rv;
	nng_socket *s[2] = {in, out};
	for (int k = 0; k < 2; k++) {
		snprintf(url, sizeof(url), "ipc://%s/duplex-%d", dir,
		    k ? 1 - rank : rank);
		if ((rv = nng_pair1_open(s[k])) != 0 ||
		    (rv = nng_pipe_notify(*s[k], NNG_PIPE_EV_ADD_PRE, widen_cb,
			 NULL)) != 0 ||
		    (rv = nng_socket_set_size(*s[k], NNG_OPT_RECVMAXSZ, 0)) ||
		    (rv = nng_socket_set_int(*s[k], NNG_OPT_RECVBUF,
			 DUPLEX_AHEAD + 2)) != 0 ||
		    (rv = nng_socket_set_int(*s[k], NNG_OPT_SENDBUF,
			 DUPLEX_AHEAD + 2)) != 0 ||
		    (rv = k ? nng_dial(*s[k], url, NULL, NNG_FLAG_NONBLOCK)
			    : nng_listen(*s[k], url, NULL, 0)) != 0)
			die("duplex socket", rv, 1);
	}
}

// duplex_rounds: k all-reduces' exchanges without the sums: twice, n/2
// floats sent to the other worker in chunks while its n/2 are received
// (each copied out, as the ring adds it).
static void duplex_rounds(nng_socket in, nng_socket out, float *v,
    uint64_t n, int k)
{
	uint64_t half = n / 2, chunks = (half + DUPLEX_CHUNK - 1) / DUPLEX_CHUNK;
	for (int i = 0; i < 2 * k; i++) {
		uint64_t sent = 0, got = 0;
		while (got < chunks) {
			while (sent < chunks && sent < got + DUPLEX_AHEAD + 1) {
				uint64_t lo = sent * DUPLEX_CHUNK;
				uint64_t len = half - lo < DUPLEX_CHUNK
						   ? half - lo : DUPLEX_CHUNK;
				nng_msg *m;
				int rv;
				if ((rv = nng_msg_alloc(&m, len * 4)) != 0)
					die("duplex message", rv, 1);
				memcpy(nng_msg_body(m), v + lo, len * 4);
				if ((rv = nng_sendmsg(out, m, 0)) != 0)
					die("duplex send", rv, 1);
				sent++;
			}
			nng_msg *m;
			int rv;
			if ((rv = nng_recvmsg(in, &m, 0)) != 0)
				die("duplex receive", rv, 1);
			memcpy(v + half + got * DUPLEX_CHUNK, nng_msg_body(m),
			    nng_msg_len(m));
			nng_msg_free(m);
			got++;
		}
	}
}

// floor_us: the mean time to copy 2n floats (from v to w, in 4 copies of
// n/2), over iters.
static double floor_us(float *v, float *w, uint64_t n, int iters)
{
	double t0 = now_us();
	for (int i = 0; i < iters; i++)
		for (int k = 0; k < 4; k++) {
			memcpy(w + (k % 2) * (n / 2), v + (k / 2) * (n / 2),
			    n / 2 * sizeof(float));
			v[k] = w[n / 2 + k]; // not optimised away
		}
	return (now_us() - t0) / iters;
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
	nng_socket s = pair_open(raw, rank), din, dout;
	duplex_open(dir, rank, &din, &dout);
	float *buf = calloc(n, sizeof(float)), *copy = calloc(n, sizeof(float));
	if (buf == NULL || copy == NULL)
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
		duplex_rounds(din, dout, buf, n, warm);
		t0 = now_us();
		duplex_rounds(din, dout, buf, n, iters);
		double duplex_us = (now_us() - t0) / iters;
		(void)floor_us(buf, copy, n, warm);
		double fl = floor_us(buf, copy, n, iters);
		if (rank == 0)
			printf("%.1f %.1f %.1f %.1f\n", ring_us, 2 * raw_us,
			    duplex_us, fl);
		fflush(stdout);
	}
	// A last round trip: worker 1 answers it once it has every chunk
	// and reply of worker 0's, which worker 0 waits for before closing
	// (a message still queued when its process exits would be lost).
	// The answer itself may be lost as worker 1 exits: 10 s at most.
	nng_msg *bye;
	nng_socket_set_ms(s, NNG_OPT_RECVTIMEO, 10000);
	if (rank == 0 && nng_msg_alloc(&bye, 0) == 0 &&
	    nng_sendmsg(s, bye, 0) != 0)
		nng_msg_free(bye);
	else if (rank == 0 && nng_recvmsg(s, &bye, 0) == 0)
		nng_msg_free(bye);
	if (rank == 1 && (rv = nng_recvmsg(s, &bye, 0)) == 0 &&
	    nng_sendmsg(s, bye, 0) != 0)
		nng_msg_free(bye);
	free(buf);
	free(copy);
	nng_close(s);
	nng_close(din);
	nng_close(dout);
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
