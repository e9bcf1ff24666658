// tests/proto_test.c - message encoding, and every malformed case the
// decoder must refuse without trusting the peer.
#include <stdlib.h>
#include <string.h>

#include <nng/nng.h>

#include "common/proto.h"
#include "tests/test.h"

static nng_msg *raw_msg(const void *bytes, size_t n)
{
	nng_msg *m;
	if (nng_msg_alloc(&m, 0) != 0 || nng_msg_append(m, bytes, n) != 0)
		abort();
	return m;
}

// hdr_prefixed wraps msgpack bytes in the 4-byte length prefix.
static nng_msg *hdr_prefixed(const uint8_t *mp, uint32_t n)
{
	uint8_t buf[256];
	buf[0] = (uint8_t)n;
	buf[1] = (uint8_t)(n >> 8);
	buf[2] = (uint8_t)(n >> 16);
	buf[3] = (uint8_t)(n >> 24);
	memcpy(buf + 4, mp, n);
	return raw_msg(buf, 4 + n);
}

static int decode(nng_msg *m, pti_hdr *h)
{
	const void *pay;
	int rv = pti_msg_decode(h, &pay, m);
	nng_msg_free(m);
	return rv;
}

static void test_proto_roundtrip(void)
{
	pti_hdr h, g;
	nng_msg *m;
	const void *pay;
	float vals[5] = {1.5f, -2.0f, 0.0f, 3.25f, 1e-30f};
	pti_hdr_init(&h, PT_OP_PUSHPULL, PT_ROLE_WORKER, 3);
	h.has |= PTI_H_STEP | PTI_H_VER | PTI_H_VAR | PTI_H_STATUS |
		 PTI_H_LAYOUT | PTI_H_SHARD | PTI_H_STALE | PTI_H_STATS;
	h.step = 12345678901LL;
	h.ver = -1;
	h.var = 2;
	h.off = 77;
	h.status = 0;
	strcpy(h.msg, "hello there");
	h.layout_hash = 0xfedcba9876543210ULL;
	h.n_params = 235146;
	h.lo = 10, h.hi = 20, h.mode = PT_MODE_ASYNC, h.n_workers = 32;
	h.n_servers = 2, h.server_rank = 1, h.staleness = 7;
	h.updates = 99, h.rejected = 3, h.n_hello = 4, h.n_done = 2;
	uint64_t hist[PT_STALE_BUCKETS] = {0}, got[PT_STALE_BUCKETS];
	hist[0] = 5, hist[63] = 8;
	h.hist = hist;
	PT_TEST_OK(pti_msg_encode(&m, &h, vals, 5));
	PT_TEST_OK(pti_msg_decode(&g, &pay, m));
	PT_TEST_TRUE(g.op == PT_OP_PUSHPULL && g.role == PT_ROLE_WORKER);
	PT_TEST_TRUE(g.rank == 3 && g.step == h.step && g.ver == -1);
	PT_TEST_TRUE(g.var == 2 && g.off == 77 && g.n == 5);
	PT_TEST_TRUE(strcmp(g.msg, "hello there") == 0);
	PT_TEST_TRUE(g.layout_hash == h.layout_hash && g.n_params == 235146);
	PT_TEST_TRUE(g.lo == 10 && g.hi == 20 && g.mode == PT_MODE_ASYNC);
	PT_TEST_TRUE(g.n_workers == 32 && g.n_servers == 2);
	PT_TEST_TRUE(g.server_rank == 1 && g.staleness == 7);
	PT_TEST_TRUE(g.updates == 99 && g.rejected == 3 && g.n_done == 2);
	PT_TEST_OK(pti_msg_hist(m, got));
	PT_TEST_TRUE(got[0] == 5 && got[63] == 8 && got[1] == 0);
	PT_TEST_TRUE(g.hist == NULL);
	PT_TEST_TRUE(g.has == (h.has | PTI_H_RANGE));
	PT_TEST_TRUE(pay != NULL);
	float back[5];
	memcpy(back, pay, sizeof(back));
	PT_TEST_TRUE(memcmp(back, vals, sizeof(vals)) == 0);
	// The payload is raw float32 after a 4-byte-aligned header.
	size_t hl = ((uint8_t *)nng_msg_body(m))[0] |
		    ((uint8_t *)nng_msg_body(m))[1] << 8;
	PT_TEST_TRUE(nng_msg_len(m) == 4 + hl + (4 - hl % 4) % 4 + 20);
	nng_msg_free(m);
}

static void test_proto_minimal(void)
{
	pti_hdr h, g;
	nng_msg *m;
	const void *pay = (void *)1;
	pti_hdr_init(&h, PT_OP_STATS, PT_ROLE_CONTROL, 0);
	PT_TEST_OK(pti_msg_encode(&m, &h, NULL, 0));
	PT_TEST_OK(pti_msg_decode(&g, &pay, m));
	PT_TEST_TRUE(g.op == PT_OP_STATS && g.has == 0 && pay == NULL);
	nng_msg_free(m);
}

static void test_proto_short(void)
{
	pti_hdr h;
	uint8_t b[3] = {1, 0, 0};
	PT_TEST_ERR(decode(raw_msg(b, 0), &h), PT_EPROTO);
	PT_TEST_ERR(decode(raw_msg(b, 3), &h), PT_EPROTO);
}

static void test_proto_bad_length_prefix(void)
{
	pti_hdr h;
	uint8_t b[8] = {0xff, 0xff, 0xff, 0x7f, 0x80, 0, 0, 0};
	PT_TEST_ERR(decode(raw_msg(b, 8), &h), PT_EPROTO);
	PT_TEST_STR_HAS(pt_errmsg(PT_EPROTO), "header length");
	uint8_t z[5] = {0, 0, 0, 0, 0x80};
	PT_TEST_ERR(decode(raw_msg(z, 5), &h), PT_EPROTO);
}

static void test_proto_garbage(void)
{
	pti_hdr h;
	uint8_t b[64];
	srand(7);
	for (int round = 0; round < 2000; round++) {
		size_t n = (size_t)(rand() % 64);
		for (size_t i = 0; i < n; i++)
			b[i] = (uint8_t)rand();
		if (n >= 4) { // make the length prefix plausible half the time
			if (round % 2) {
				b[0] = (uint8_t)(n - 4);
				b[1] = b[2] = b[3] = 0;
			}
		}
		nng_msg *m = raw_msg(b, n);
		const void *pay;
		int rv = pti_msg_decode(&h, &pay, m);
		nng_msg_free(m);
		PT_TEST_TRUE(rv == 0 || rv == PT_EPROTO);
	}
}

static void test_proto_huge_map_claim(void)
{
	// A map that claims 4 billion entries in 7 bytes: msgpack-c alone
	// would try to allocate ~256 GiB.
	pti_hdr h;
	uint8_t mp[7] = {0xdf, 0xff, 0xff, 0xff, 0xff, 0xa1, 'x'};
	PT_TEST_ERR(decode(hdr_prefixed(mp, 7), &h), PT_EPROTO);
	PT_TEST_STR_HAS(pt_errmsg(PT_EPROTO), "claims");
	// The same lie one level down, inside an array value.
	uint8_t mp2[8] = {0x81, 0xa1, 'h', 0xdd, 0xff, 0xff, 0xff, 0xff};
	PT_TEST_ERR(decode(hdr_prefixed(mp2, 8), &h), PT_EPROTO);
	uint8_t mp3[9] = {0x81, 0xa1, 'h', 0xdb, 0x7f, 0xff, 0xff, 0xff, 'a'};
	PT_TEST_ERR(decode(hdr_prefixed(mp3, 9), &h), PT_EPROTO);
}

static void test_proto_deep_nesting(void)
{
	pti_hdr h;
	uint8_t mp[40];
	mp[0] = 0x81, mp[1] = 0xa1, mp[2] = 'k';
	for (int i = 3; i < 39; i++)
		mp[i] = 0x91; // array of one array of one ...
	mp[39] = 0x01;
	PT_TEST_ERR(decode(hdr_prefixed(mp, 40), &h), PT_EPROTO);
}

static void test_proto_not_a_map(void)
{
	pti_hdr h;
	uint8_t mp[2] = {0x92, 0x01};
	PT_TEST_ERR(decode(hdr_prefixed(mp, 1), &h), PT_EPROTO);
	uint8_t s[3] = {0xa2, 'h', 'i'};
	PT_TEST_ERR(decode(hdr_prefixed(s, 3), &h), PT_EPROTO);
}

static void test_proto_truncated_header(void)
{
	pti_hdr h;
	nng_msg *m;
	pti_hdr_init(&h, PT_OP_HELLO, PT_ROLE_WORKER, 1);
	h.has |= PTI_H_LAYOUT;
	PT_TEST_OK(pti_msg_encode(&m, &h, NULL, 0));
	uint8_t *b = nng_msg_body(m);
	uint32_t hl = b[0] | b[1] << 8;
	for (uint32_t cut = 1; cut < hl; cut++) {
		// Claim the full header but deliver fewer bytes of it...
		nng_msg *t = raw_msg(b, 4 + cut);
		PT_TEST_ERR(decode(t, &h), PT_EPROTO);
		// ...or claim and deliver a shortened one.
		uint8_t buf[256];
		memcpy(buf, b, 4 + cut);
		buf[0] = (uint8_t)cut, buf[1] = 0;
		PT_TEST_ERR(decode(raw_msg(buf, 4 + cut), &h), PT_EPROTO);
	}
	nng_msg_free(m);
}

static void test_proto_wrong_version(void)
{
	pti_hdr h;
	nng_msg *m;
	pti_hdr_init(&h, PT_OP_PULL, PT_ROLE_WORKER, 0);
	h.pv = 99;
	PT_TEST_OK(pti_msg_encode(&m, &h, NULL, 0));
	PT_TEST_ERR(decode(m, &h), PT_EPROTO);
	PT_TEST_STR_HAS(pt_errmsg(PT_EPROTO), "protocol version 99");
}

static void test_proto_missing_op(void)
{
	pti_hdr h;
	uint8_t mp[5] = {0x81, 0xa2, 'p', 'v', 0x01};
	PT_TEST_ERR(decode(hdr_prefixed(mp, 5), &h), PT_EPROTO);
}

static void test_proto_wrong_types(void)
{
	pti_hdr h;
	// {"pv": 1, "op": "x"}
	uint8_t mp[] = {0x82, 0xa2, 'p', 'v', 0x01, 0xa2, 'o', 'p', 0xa1, 'x'};
	PT_TEST_ERR(decode(hdr_prefixed(mp, sizeof(mp)), &h), PT_EPROTO);
	PT_TEST_STR_HAS(pt_errmsg(PT_EPROTO), "\"op\"");
	// {"pv": 1, "op": -3}
	uint8_t mp2[] = {0x82, 0xa2, 'p', 'v', 0x01, 0xa2, 'o', 'p', 0xfd};
	PT_TEST_ERR(decode(hdr_prefixed(mp2, sizeof(mp2)), &h), PT_EPROTO);
	// an integer key
	uint8_t mp3[] = {0x82, 0x01, 0x01, 0xa2, 'o', 'p', 0x01};
	PT_TEST_ERR(decode(hdr_prefixed(mp3, sizeof(mp3)), &h), PT_EPROTO);
}

static void test_proto_payload_mismatch(void)
{
	pti_hdr h;
	nng_msg *m;
	float v[4] = {1, 2, 3, 4};
	pti_hdr_init(&h, PT_OP_PUSH, PT_ROLE_WORKER, 0);
	PT_TEST_OK(pti_msg_encode(&m, &h, v, 4));
	PT_TEST_OK(nng_msg_chop(m, 4)); // one float short
	PT_TEST_ERR(decode(m, &h), PT_EPROTO);
	PT_TEST_STR_HAS(pt_errmsg(PT_EPROTO), "payload");
	PT_TEST_OK(pti_msg_encode(&m, &h, v, 4));
	PT_TEST_OK(nng_msg_chop(m, 1)); // not a whole float
	PT_TEST_ERR(decode(m, &h), PT_EPROTO);
	PT_TEST_OK(pti_msg_encode(&m, &h, v, 4));
	PT_TEST_OK(nng_msg_append(m, v, 4)); // one float too many
	PT_TEST_ERR(decode(m, &h), PT_EPROTO);
	// a pull carries no payload
	pti_hdr_init(&h, PT_OP_PULL, PT_ROLE_WORKER, 0);
	PT_TEST_OK(pti_msg_encode(&m, &h, NULL, 0));
	PT_TEST_OK(nng_msg_append(m, v, 8));
	PT_TEST_ERR(decode(m, &h), PT_EPROTO);
}

static void test_proto_rows_shape(void)
{
	pti_hdr h;
	nng_msg *m;
	float w[64] = {0};
	// 2 rows of dim 4 pushed, 3 pulled: 2 (2 + 1 + 4) + 3 x 2 words.
	uint64_t n = pti_rows_words(2, 3, 4);
	PT_TEST_TRUE(n == 20);
	pti_hdr_init(&h, PT_OP_ROWS, PT_ROLE_WORKER, 1);
	h.has |= PTI_H_ROWS | PTI_H_STEP;
	h.table = 1, h.k = 2, h.kp = 3, h.step = 7;
	PT_TEST_OK(pti_msg_encode(&m, &h, w, n));
	pti_hdr d;
	PT_TEST_OK(decode(m, &d));
	PT_TEST_TRUE(d.op == PT_OP_ROWS && d.table == 1 && d.k == 2 &&
		     d.kp == 3 && d.n == 20 && d.step == 7);
	// Pulls only, and an empty request (a sync step's "nothing here").
	h.k = 0;
	PT_TEST_OK(pti_msg_encode(&m, &h, w, 6));
	PT_TEST_OK(decode(m, &d));
	h.kp = 0;
	PT_TEST_OK(pti_msg_encode(&m, &h, NULL, 0));
	PT_TEST_OK(decode(m, &d));
	// Words that are no whole rows, too few, or ids left over.
	h.k = 2, h.kp = 3;
	PT_TEST_OK(pti_msg_encode(&m, &h, w, n + 1));
	PT_TEST_ERR(decode(m, &d), PT_EPROTO);
	PT_TEST_STR_HAS(pt_errmsg(PT_EPROTO), "pulled ids");
	PT_TEST_OK(pti_msg_encode(&m, &h, w, 11));
	PT_TEST_ERR(decode(m, &d), PT_EPROTO);
	h.k = 0;
	PT_TEST_OK(pti_msg_encode(&m, &h, w, 7));
	PT_TEST_ERR(decode(m, &d), PT_EPROTO);
	// Counts past the bound, and a request without them.
	h.k = PTI_ROWS_MAX + 1, h.kp = 0;
	PT_TEST_OK(pti_msg_encode(&m, &h, w, 64));
	PT_TEST_ERR(decode(m, &d), PT_EPROTO);
	pti_hdr_init(&h, PT_OP_ROWS, PT_ROLE_WORKER, 1);
	PT_TEST_OK(pti_msg_encode(&m, &h, NULL, 0));
	PT_TEST_ERR(decode(m, &d), PT_EPROTO);
	PT_TEST_STR_HAS(pt_errmsg(PT_EPROTO), "\"kp\"");
}

static void test_proto_check_walks(void)
{
	size_t used;
	// {"a": [1, 2.0, "xy", nil, true], "b": {"c": -1}} plus a stray byte
	uint8_t mp[] = {0x82, 0xa1, 'a', 0x95, 0x01, 0xcb, 0, 0, 0, 0, 0, 0, 0,
	    0, 0xa2, 'x', 'y', 0xc0, 0xc3, 0xa1, 'b', 0x81, 0xa1, 'c', 0xff,
	    0x00};
	PT_TEST_OK(pti_msgpack_check(mp, sizeof(mp), 3, &used));
	PT_TEST_TRUE(used == sizeof(mp) - 1);
	PT_TEST_ERR(pti_msgpack_check(mp, sizeof(mp), 1, &used), PT_EPROTO);
	PT_TEST_ERR(pti_msgpack_check(mp, 10, 3, &used), PT_EPROTO);
	uint8_t bad[] = {0xc1};
	PT_TEST_ERR(pti_msgpack_check(bad, 1, 3, &used), PT_EPROTO);
}

// big_request encodes worker 3's pushpull of step 7 with n values of g:
// enough values for a header with room.
static void big_request(nng_msg **m, pti_hdr *h, const float *g, int n)
{
	pti_hdr_init(h, PT_OP_PUSHPULL, PT_ROLE_WORKER, 3);
	h->has |= PTI_H_STEP | PTI_H_VER;
	h->step = 7;
	h->ver = 7;
	PT_TEST_OK(pti_msg_encode(m, h, g, (uint64_t)n));
}

// A message of many values carries a header of PTI_HDR_ROOM bytes or
// more, so that the reply of the same values (a bigger header) is
// written into the request it answers, and the next request into that
// reply, without a new buffer; both decode to what was encoded.
static void test_proto_reuse_in_place(void)
{
	enum { N = PTI_ROOM_FROM / 4 + 1 };
	float *g = malloc(N * sizeof(float)), *v = malloc(N * sizeof(float));
	PT_TEST_TRUE(g != NULL && v != NULL);
	for (int i = 0; i < N; i++)
		g[i] = (float)i, v[i] = -(float)i;
	pti_hdr h, r, d;
	const void *pay;
	nng_msg *m;
	big_request(&m, &h, g, N);
	const uint8_t *b = nng_msg_body(m);
	PT_TEST_TRUE(b[0] + 256u * b[1] >= PTI_HDR_ROOM);
	size_t cap = nng_msg_capacity(m);
	// Room for a received frame's 4-byte id too: the buffer nng gives a
	// message it receives, so that the heap can reuse one for the other.
	PT_TEST_TRUE(cap >= nng_msg_len(m) + 4);
	PT_TEST_TRUE(pti_msg_roomy(m, N) && !pti_msg_roomy(m, N + 64) &&
		     !pti_msg_roomy(NULL, N));
	void *body = nng_msg_body(m);
	// The reply: more keys, larger numbers.
	pti_hdr_init(&r, PT_OP_PUSHPULL, PT_ROLE_SERVER, 1);
	r.has |= PTI_H_STATUS | PTI_H_VER | PTI_H_RANGE | PTI_H_LR |
		 PTI_H_STALE;
	r.ver = (int64_t)1 << 49;
	r.off = (uint64_t)1 << 40;
	r.lr = 0.1;
	r.staleness = 1 << 20;
	PT_TEST_OK(pti_msg_encode_in(m, &r, v, N));
	PT_TEST_TRUE(nng_msg_body(m) == body && nng_msg_capacity(m) == cap);
	PT_TEST_OK(pti_msg_decode(&d, &pay, m));
	PT_TEST_TRUE(d.op == PT_OP_PUSHPULL && d.ver == r.ver &&
		     d.off == r.off && d.n == N && d.staleness == 1 << 20);
	PT_TEST_TRUE(memcmp(pay, v, N * sizeof(float)) == 0);
	// And the next request back into it.
	PT_TEST_OK(pti_msg_encode_in(m, &h, g, N));
	PT_TEST_TRUE(nng_msg_body(m) == body);
	PT_TEST_OK(pti_msg_decode(&d, &pay, m));
	PT_TEST_TRUE(d.step == 7 && d.rank == 3 && d.n == N);
	PT_TEST_TRUE(memcmp(pay, g, N * sizeof(float)) == 0);
	nng_msg_free(m);
	// Few values: no padding.
	PT_TEST_OK(pti_msg_encode(&m, &h, g, 4));
	b = nng_msg_body(m);
	PT_TEST_TRUE(b[0] + 256u * b[1] < PTI_HDR_ROOM);
	nng_msg_free(m);
	free(g), free(v);
}

// test_proto_values_already_in_place: a reply whose values are the
// message's own (written over the request's gradient) keeps them byte for
// byte, where the reply's header puts them or 4 bytes past that (moved
// into place, not clobbered by the header), and one that would have to
// grow the message is refused.
static void test_proto_values_already_in_place(void)
{
	enum { N = PTI_ROOM_FROM / 4 + 3 };
	float *g = malloc(N * sizeof(float)), *want = malloc(N * sizeof(float));
	PT_TEST_TRUE(g != NULL && want != NULL);
	for (int i = 0; i < N; i++)
		g[i] = (float)i + 0.5f;
	pti_hdr h, r, d;
	const void *pay;
	nng_msg *m;
	big_request(&m, &h, g, N);
	PT_TEST_OK(pti_msg_decode(&d, &pay, m));
	float *own = (float *)pay; // the request's values, in m
	for (int i = 0; i < N; i++)
		own[i] = want[i] = -(float)i; // the new parameters, in place
	pti_hdr_init(&r, PT_OP_PUSHPULL, PT_ROLE_SERVER, 1);
	r.has |= PTI_H_STATUS | PTI_H_VER | PTI_H_RANGE | PTI_H_LR |
		 PTI_H_STALE;
	r.ver = (int64_t)1 << 49;
	r.lr = 0.1;
	r.staleness = 1 << 20;
	PT_TEST_OK(pti_msg_encode_in(m, &r, own, N));
	PT_TEST_OK(pti_msg_decode(&d, &pay, m));
	PT_TEST_TRUE(d.ver == r.ver && d.n == N && d.staleness == 1 << 20);
	PT_TEST_TRUE(memcmp(pay, want, N * sizeof(float)) == 0);
	// Values that start 4 bytes later than a header puts them: moved.
	own = (float *)pay + 1;
	PT_TEST_OK(pti_msg_encode_in(m, &r, own, N - 1));
	PT_TEST_OK(pti_msg_decode(&d, &pay, m));
	PT_TEST_TRUE(d.n == N - 1 &&
		     memcmp(pay, want + 1, (N - 1) * sizeof(float)) == 0);
	// Its own values and more than it holds: refused, not grown.
	PT_TEST_ERR(pti_msg_encode_in(m, &r, (const float *)pay, N + 64),
	    PT_EINVAL);
	nng_msg_free(m);
	free(g), free(want);
}

static const pti_test_case cases[] = {
    {"test_proto_roundtrip", test_proto_roundtrip},
    {"test_proto_minimal", test_proto_minimal},
    {"test_proto_short", test_proto_short},
    {"test_proto_bad_length_prefix", test_proto_bad_length_prefix},
    {"test_proto_garbage", test_proto_garbage},
    {"test_proto_huge_map_claim", test_proto_huge_map_claim},
    {"test_proto_deep_nesting", test_proto_deep_nesting},
    {"test_proto_not_a_map", test_proto_not_a_map},
    {"test_proto_truncated_header", test_proto_truncated_header},
    {"test_proto_wrong_version", test_proto_wrong_version},
    {"test_proto_missing_op", test_proto_missing_op},
    {"test_proto_wrong_types", test_proto_wrong_types},
    {"test_proto_payload_mismatch", test_proto_payload_mismatch},
    {"test_proto_rows_shape", test_proto_rows_shape},
    {"test_proto_check_walks", test_proto_check_walks},
    {"test_proto_reuse_in_place", test_proto_reuse_in_place},
    {"test_proto_values_already_in_place",
	test_proto_values_already_in_place},
    {NULL, NULL},
};

int main(int argc, char **argv)
{
	return pti_test_main(argc, argv, cases);
}
