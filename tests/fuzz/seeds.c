// tests/fuzz/seeds.c - writes the seed corpora of the fuzzing harnesses:
// one valid message of each kind (decode), and short request sequences
// that train a step, pull, refuse and reconnect (server). Run by
// `make fuzz-seeds`; the output is kept in tests/fuzz/corpus.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nng/nng.h>

#include "common/layout.h"
#include "common/proto.h"
#include "tests/fuzz/fuzz.h"

static const char *dir;
static int count;

static void put(const char *kind, const void *b, size_t n)
{
	char path[512];
	snprintf(path, sizeof(path), "%s/%s/seed-%02d", dir, kind, count++);
	FILE *f = fopen(path, "wb");
	if (f == NULL || fwrite(b, 1, n, f) != n || fclose(f) != 0) {
		perror(path);
		exit(1);
	}
}

static nng_msg *enc(const pti_hdr *h, const float *pay, uint64_t n)
{
	nng_msg *m;
	if (pti_msg_encode(&m, h, pay, n) != 0)
		exit(1);
	return m;
}

// A server input being built: mode byte, then records.
static uint8_t seq[1 << 16];
static size_t seq_n;

static void seq_start(int mode)
{
	seq[0] = (uint8_t)(mode - 1);
	seq_n = 1;
}

static void seq_add(uint8_t conn, const pti_hdr *h, const float *pay,
    uint64_t n)
{
	nng_msg *m = enc(h, pay, n);
	size_t len = nng_msg_len(m);
	seq[seq_n++] = conn;
	seq[seq_n++] = (uint8_t)len;
	seq[seq_n++] = (uint8_t)(len >> 8);
	memcpy(seq + seq_n, nng_msg_body(m), len);
	seq_n += len;
	nng_msg_free(m);
}

// rows_add adds worker r's rows request of table 0: a read of two rows
// (push 0), or its part of step 0 that pushes and pulls them.
static void rows_add(uint32_t r, int push)
{
	uint64_t ids[2][2] = {{1, 2}, {2, 3}};
	float w[64] = {0};
	pti_hdr h;
	pti_hdr_init(&h, PT_OP_ROWS, PT_ROLE_WORKER, r);
	h.has |= PTI_H_ROWS | (push ? PTI_H_STEP : 0);
	h.k = push ? 2 : 0;
	h.kp = 2;
	uint64_t nw = pti_rows_words(h.k, h.kp, FUZZ_TABLE_DIM);
	for (uint32_t i = 0; i < h.k; i++)
		memcpy(w + 2 * i, &ids[r][i], 8);
	for (uint32_t i = 0; i < h.k * FUZZ_TABLE_DIM; i++)
		w[3 * h.k + i] = 0.25f * (float)i;
	memcpy(w + nw - 4, ids[r], 16);
	seq_add((uint8_t)(1 + r), &h, w, nw);
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: seeds DIR (makes DIR/decode, "
				"DIR/server)\n");
		return 2;
	}
	dir = argv[1];
	pti_layout l;
	if (fuzz_layout(&l) != 0)
		return 1;
	uint64_t n = l.n_params;
	float *g = calloc(n, sizeof(float));
	for (uint64_t i = 0; i < n; i++)
		g[i] = (float)(i % 7) * 0.125f - 0.25f;

	pti_hdr h;
	for (uint32_t op = 1; op < PT_OP_MAX; op++) {
		pti_hdr_init(&h, op, PT_ROLE_WORKER, op % 2);
		h.has |= PTI_H_STEP | PTI_H_VER;
		h.step = op;
		h.ver = op - 1;
		nng_msg *m = op == PT_OP_PUSH || op == PT_OP_PUSHPULL
				 ? enc(&h, g, 16) : enc(&h, NULL, 0);
		put("decode", nng_msg_body(m), nng_msg_len(m));
		nng_msg_free(m);
	}
	pti_hdr_init(&h, PT_OP_STATS, PT_ROLE_SERVER, 0);
	h.has |= PTI_H_STATS | PTI_H_STATUS | PTI_H_SHARD | PTI_H_LAYOUT |
		 PTI_H_LR | PTI_H_STALE | PTI_H_NONCE | PTI_H_MAC | PTI_H_VAR;
	snprintf(h.msg, sizeof(h.msg), "server 0: stats: an error text");
	uint64_t hist[PT_STALE_BUCKETS] = {[3] = 7};
	h.hist = hist;
	nng_msg *m = enc(&h, NULL, 0);
	put("decode", nng_msg_body(m), nng_msg_len(m));
	nng_msg_free(m);

	for (int mode = 1; mode <= 3; mode++) {
		// both workers push step 0 (worker 0 waits for the values),
		// then the control client reads stats and a variable
		seq_start(mode);
		for (uint32_t w = 0; w < 2; w++) {
			pti_hdr_init(&h, w ? PT_OP_PUSH : PT_OP_PUSHPULL,
			    PT_ROLE_WORKER, w);
			h.has |= PTI_H_STEP | PTI_H_VER | PTI_H_RANGE;
			h.off = 0;
			seq_add((uint8_t)(1 + w), &h, g, n);
		}
		pti_hdr_init(&h, PT_OP_STATS, PT_ROLE_CONTROL, 0);
		seq_add(3, &h, NULL, 0);
		pti_hdr_init(&h, PT_OP_PULL, PT_ROLE_CONTROL, 0);
		h.has |= PTI_H_VAR | PTI_H_RANGE;
		h.var = 1;
		h.off = 2;
		h.n = 4;
		seq_add(3, &h, NULL, 0);
		put("server", seq, seq_n);
		// a parked pull, then worker 1's connection closes and a
		// stranger asks for shutdown; then both say done and worker
		// 0 shuts the server down
		seq_start(mode);
		pti_hdr_init(&h, PT_OP_PULL, PT_ROLE_WORKER, 1);
		h.has |= PTI_H_VER;
		h.ver = 1;
		seq_add(2, &h, NULL, 0);
		seq[seq_n++] = 5, seq[seq_n++] = 0, seq[seq_n++] = 0;
		pti_hdr_init(&h, PT_OP_SHUTDOWN, PT_ROLE_CONTROL, 0);
		seq_add(0, &h, NULL, 0);
		for (uint32_t w = 0; w < 2; w++) {
			pti_hdr_init(&h, PT_OP_DONE, PT_ROLE_WORKER, w);
			seq_add((uint8_t)(1 + w), &h, NULL, 0);
		}
		pti_hdr_init(&h, PT_OP_SHUTDOWN, PT_ROLE_WORKER, 0);
		seq_add(1, &h, NULL, 0);
		put("server", seq, seq_n);
		// connection events: a flood of 200 unproven connections,
		// worker 0 reconnects and proves itself again, worker 1 says
		// hello again on its live connection, then a push
		seq_start(mode);
		seq[seq_n++] = 6, seq[seq_n++] = 200, seq[seq_n++] = 0;
		seq[seq_n++] = 8, seq[seq_n++] = 0, seq[seq_n++] = 0;
		seq[seq_n++] = 7, seq[seq_n++] = 0, seq[seq_n++] = 0;
		seq[seq_n++] = 7, seq[seq_n++] = 1, seq[seq_n++] = 0;
		pti_hdr_init(&h, PT_OP_PUSH, PT_ROLE_WORKER, 1);
		h.has |= PTI_H_STEP | PTI_H_VER | PTI_H_RANGE;
		h.off = 0;
		seq_add(2, &h, g, n);
		put("server", seq, seq_n);
		// rows of table 0: worker 0 reads, both push a step's part
		// (ids 1 and 2, then 2 and 3) and pull them back, then a
		// control client asks for stats
		seq_start(mode);
		for (uint32_t r = 0; r < 2; r++) {
			if (r == 0)
				rows_add(0, 0);
			rows_add(r, 1);
		}
		pti_hdr_init(&h, PT_OP_STATS, PT_ROLE_CONTROL, 0);
		seq_add(3, &h, NULL, 0);
		put("server", seq, seq_n);
	}
	free(g);
	return 0;
}
