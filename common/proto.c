// common/proto.c - encode and decode pstrain messages (see proto.h).
#include "common/proto.h"

#include <stdlib.h>
#include <string.h>

#include <msgpack.h>

#include "common/err.h"

#define PROTO_MAX_OBJECTS 512 // msgpack objects in one header, at most

static const char *const op_names[PT_OP_MAX] = {
	[PT_OP_HELLO] = "hello",
	[PT_OP_PUSH] = "push",
	[PT_OP_PULL] = "pull",
	[PT_OP_PUSHPULL] = "pushpull",
	[PT_OP_DONE] = "done",
	[PT_OP_STATS] = "stats",
	[PT_OP_SHUTDOWN] = "shutdown",
	[PT_OP_CHALLENGE] = "challenge",
	[PT_OP_RING] = "ring",
	[PT_OP_ROWS] = "rows",
};

const char *pti_op_name(uint32_t op)
{
	return op < PT_OP_MAX && op_names[op] ? op_names[op] : "unknown";
}

void pti_hdr_init(pti_hdr *h, uint32_t op, uint32_t role, uint32_t rank)
{
	memset(h, 0, sizeof(*h));
	h->pv = PT_PROTO_VERSION;
	h->op = op;
	h->role = role;
	h->rank = rank;
}

// ---------------------------------------------------------------- checking

static uint64_t be_read(const uint8_t *p, int bytes)
{
	uint64_t v = 0;
	for (int i = 0; i < bytes; i++)
		v = v << 8 | p[i];
	return v;
}

typedef struct check_state {
	const uint8_t *p, *end;
	int objects;
} check_state;

// check_obj consumes one object; containers recurse with depth - 1.
static int check_obj(check_state *st, int depth)
{
	if (st->p >= st->end)
		return pti_err_set(PT_EPROTO, "header: truncated msgpack");
	if (++st->objects > PROTO_MAX_OBJECTS)
		return pti_err_set(PT_EPROTO, "header: more than %d objects",
		    PROTO_MAX_OBJECTS);
	uint8_t b = *st->p++;
	size_t left = (size_t)(st->end - st->p);
	uint64_t skip = 0, count = 0;
	int width = 0, per = 0; // per: objects per entry (1 array, 2 map)

	if (b <= 0x7f || b >= 0xe0 || b == 0xc0 || b == 0xc2 || b == 0xc3)
		return 0;
	if (b >= 0x80 && b <= 0x8f) {
		count = b & 0x0f, per = 2;
	} else if (b >= 0x90 && b <= 0x9f) {
		count = b & 0x0f, per = 1;
	} else if (b >= 0xa0 && b <= 0xbf) {
		skip = b & 0x1f;
	} else {
		switch (b) {
		case 0xcc: case 0xd0: skip = 1; break;
		case 0xcd: case 0xd1: skip = 2; break;
		case 0xca: case 0xce: case 0xd2: skip = 4; break;
		case 0xcb: case 0xcf: case 0xd3: skip = 8; break;
		case 0xd4: skip = 2; break;
		case 0xd5: skip = 3; break;
		case 0xd6: skip = 5; break;
		case 0xd7: skip = 9; break;
		case 0xd8: skip = 17; break;
		case 0xc4: case 0xd9: width = 1; break;
		case 0xc5: case 0xda: width = 2; break;
		case 0xc6: case 0xdb: width = 4; break;
		case 0xc7: width = 1, skip = 1; break; // ext: length, type
		case 0xc8: width = 2, skip = 1; break;
		case 0xc9: width = 4, skip = 1; break;
		case 0xdc: width = 2, per = 1; break;
		case 0xdd: width = 4, per = 1; break;
		case 0xde: width = 2, per = 2; break;
		case 0xdf: width = 4, per = 2; break;
		default:
			return pti_err_set(PT_EPROTO,
			    "header: invalid msgpack byte 0x%02x", b);
		}
		if (width > 0) {
			if (left < (size_t)width)
				return pti_err_set(PT_EPROTO,
				    "header: truncated msgpack length");
			uint64_t v = be_read(st->p, width);
			st->p += width;
			left -= (size_t)width;
			if (per > 0)
				count = v;
			else
				skip += v;
		}
	}
	if (per > 0) {
		// Every object takes at least one byte: a count larger than
		// what remains is a lie, whatever it claims.
		if (count > left / (uint64_t)per)
			return pti_err_set(PT_EPROTO,
			    "header: container claims %llu entries in %zu "
			    "bytes", (unsigned long long)count, left);
		if (depth <= 0)
			return pti_err_set(PT_EPROTO,
			    "header: nested too deeply");
		for (uint64_t i = 0; i < count * (uint64_t)per; i++) {
			int rv = check_obj(st, depth - 1);
			if (rv != 0)
				return rv;
		}
		return 0;
	}
	if (skip > left)
		return pti_err_set(PT_EPROTO, "header: truncated msgpack value");
	st->p += skip;
	return 0;
}

int pti_msgpack_check(const uint8_t *buf, size_t len, int max_depth,
    size_t *used)
{
	check_state st = {buf, buf + len, 0};
	int rv = check_obj(&st, max_depth);
	if (rv == 0)
		*used = (size_t)(st.p - buf);
	return rv;
}

// ---------------------------------------------------------------- encoding

static void pack_key(msgpack_packer *pk, const char *k)
{
	size_t n = strlen(k);
	msgpack_pack_str(pk, n);
	msgpack_pack_str_body(pk, k, n);
}

static void pack_u(msgpack_packer *pk, const char *k, uint64_t v)
{
	pack_key(pk, k);
	msgpack_pack_uint64(pk, v);
}

static void pack_i(msgpack_packer *pk, const char *k, int64_t v)
{
	pack_key(pk, k);
	msgpack_pack_int64(pk, v);
}

static uint32_t hdr_count(const pti_hdr *h)
{
	static const struct {
		uint32_t bit, keys;
	} extra[] = {
	    {PTI_H_STEP, 1}, {PTI_H_VER, 1}, {PTI_H_VAR, 1},
	    {PTI_H_RANGE, 2}, {PTI_H_STATUS, 2}, {PTI_H_LAYOUT, 2},
	    {PTI_H_SHARD, 6}, {PTI_H_STALE, 1}, {PTI_H_STATS, 9},
	    {PTI_H_LR, 1}, {PTI_H_NONCE, 1}, {PTI_H_MAC, 1}, {PTI_H_ROWS, 3},
	    {PTI_H_SCAN, 2}, {PTI_H_SHM, 1},
	};
	uint32_t n = 4; // pv, op, role, rank
	if ((h->has & PTI_H_STATS) && h->hist != NULL)
		n++;
	for (size_t i = 0; i < sizeof(extra) / sizeof(extra[0]); i++)
		if (h->has & extra[i].bit)
			n += extra[i].keys;
	return n;
}

int pti_msg_encode(nng_msg **out, const pti_hdr *h, const float *payload,
    uint64_t n)
{
	nng_msg *m;
	int rv;
	// A message of many values gets the buffer nng gives one it receives
	// (the frame: a 4-byte REQ/REP id, then the body), so that once freed
	// the heap hands the same buffer to a later receive. Built to size,
	// the buffers of a job's first replies left holes a few bytes short of
	// every later message: a server of mlp:2048,2048 with 8 workers grew
	// its heap by one or two shards that it never used again.
	size_t cap = payload != NULL && n * sizeof(float) >= PTI_ROOM_FROM
			 ? 4 + 4 + PTI_HDR_ROOM + (size_t)n * sizeof(float)
			 : 0;
	if (nng_msg_alloc(&m, cap) != 0)
		return pti_err_set(PT_ENOMEM, "a message of %zu bytes", cap);
	if ((rv = pti_msg_encode_in(m, h, payload, n)) != 0) {
		nng_msg_free(m);
		return rv;
	}
	*out = m;
	return 0;
}

int pti_msg_roomy(nng_msg *m, uint64_t n)
{
	return m != NULL && n * sizeof(float) >= PTI_ROOM_FROM &&
	       nng_msg_capacity(m) >= 4 + PTI_HDR_ROOM + n * sizeof(float);
}

// hdr_buf: a header packed on the stack, so that encoding a message into
// a kept one allocates nothing (msgpack_sbuffer took 8 KiB from the heap
// for every message).
typedef struct hdr_buf {
	size_t size;
	int over; // more than PT_HDR_MAX bytes were written
	char data[PT_HDR_MAX];
} hdr_buf;

static int hdr_write(void *arg, const char *buf, size_t len)
{
	hdr_buf *b = arg;
	if (b->over || len > sizeof(b->data) - b->size) {
		b->over = 1;
		return -1;
	}
	memcpy(b->data + b->size, buf, len);
	b->size += len;
	return 0;
}

int pti_msg_encode_in(nng_msg *m, const pti_hdr *h, const float *payload,
    uint64_t n)
{
	hdr_buf sb;
	msgpack_packer pk;
	pti_hdr hh = *h;

	if (payload != NULL) {
		hh.has |= PTI_H_RANGE;
		hh.n = n;
	}
	// A message of many values gets a header of PTI_HDR_ROOM bytes at
	// least (an ignored "room" key pads it), so that the request that a
	// reply of the same values answers can carry that reply unchanged
	// in size: the server writes its reply into the request, the worker
	// its next request into the reply (pti_msg_encode_in).
	int room = payload != NULL && n * sizeof(float) >= PTI_ROOM_FROM;
	sb.size = 0;
	sb.over = 0;
	msgpack_packer_init(&pk, &sb, hdr_write);
	msgpack_pack_map(&pk, hdr_count(&hh) + (uint32_t)room);
	pack_u(&pk, "pv", hh.pv);
	pack_u(&pk, "op", hh.op);
	pack_u(&pk, "role", hh.role);
	pack_u(&pk, "rank", hh.rank);
	if (hh.has & PTI_H_STEP)
		pack_i(&pk, "step", hh.step);
	if (hh.has & PTI_H_VER)
		pack_i(&pk, "ver", hh.ver);
	if (hh.has & PTI_H_VAR)
		pack_i(&pk, "var", hh.var);
	if (hh.has & PTI_H_RANGE) {
		pack_u(&pk, "off", hh.off);
		pack_u(&pk, "n", hh.n);
	}
	if (hh.has & PTI_H_STATUS) {
		size_t ml = strnlen(hh.msg, sizeof(hh.msg) - 1);
		pack_u(&pk, "status", hh.status);
		pack_key(&pk, "msg");
		msgpack_pack_str(&pk, ml);
		msgpack_pack_str_body(&pk, hh.msg, ml);
	}
	if (hh.has & PTI_H_LAYOUT) {
		pack_u(&pk, "lhash", hh.layout_hash);
		pack_u(&pk, "nparams", hh.n_params);
	}
	if (hh.has & PTI_H_SHARD) {
		pack_u(&pk, "lo", hh.lo);
		pack_u(&pk, "hi", hh.hi);
		pack_u(&pk, "mode", hh.mode);
		pack_u(&pk, "workers", hh.n_workers);
		pack_u(&pk, "servers", hh.n_servers);
		pack_u(&pk, "srank", hh.server_rank);
	}
	if (hh.has & PTI_H_STALE)
		pack_i(&pk, "stale", hh.staleness);
	if (hh.has & PTI_H_LR) {
		pack_key(&pk, "lr");
		msgpack_pack_double(&pk, hh.lr);
	}
	if (hh.has & PTI_H_NONCE) {
		pack_key(&pk, "nonce");
		msgpack_pack_bin(&pk, PT_NONCE_LEN);
		msgpack_pack_bin_body(&pk, hh.nonce, PT_NONCE_LEN);
	}
	if (hh.has & PTI_H_MAC) {
		pack_key(&pk, "mac");
		msgpack_pack_bin(&pk, PT_MAC_LEN);
		msgpack_pack_bin_body(&pk, hh.mac, PT_MAC_LEN);
	}
	if (hh.has & PTI_H_ROWS) {
		pack_u(&pk, "tb", hh.table);
		pack_u(&pk, "k", hh.k);
		pack_u(&pk, "kp", hh.kp);
	}
	if (hh.has & PTI_H_SHM)
		pack_u(&pk, "shm", 1);
	if (hh.has & PTI_H_SCAN) {
		pack_u(&pk, "from", hh.from);
		pack_u(&pk, "lim", hh.lim);
	}
	if (hh.has & PTI_H_STATS) {
		pack_u(&pk, "updates", hh.updates);
		pack_u(&pk, "rejected", hh.rejected);
		pack_u(&pk, "dropped", hh.dropped);
		pack_u(&pk, "ssum", hh.stale_sum);
		pack_u(&pk, "smax", hh.stale_max);
		pack_u(&pk, "nhello", hh.n_hello);
		pack_u(&pk, "ndone", hh.n_done);
		pack_u(&pk, "nlost", hh.n_lost);
		pack_u(&pk, "live0", hh.first_live);
	}
	if ((hh.has & PTI_H_STATS) && hh.hist != NULL) {
		pack_key(&pk, "hist");
		msgpack_pack_array(&pk, PT_STALE_BUCKETS);
		for (int i = 0; i < PT_STALE_BUCKETS; i++)
			msgpack_pack_uint64(&pk, hh.hist[i]);
	}
	if (room) {
		static const uint8_t zeros[PTI_HDR_ROOM];
		// 7 bytes: the key and the bin8 length.
		size_t k = sb.size + 7 < PTI_HDR_ROOM
			       ? PTI_HDR_ROOM - 7 - sb.size
			       : 0;
		pack_key(&pk, "room");
		msgpack_pack_bin(&pk, k);
		msgpack_pack_bin_body(&pk, zeros, k);
	}
	if (sb.over)
		return pti_err_set(PT_EINVAL, "a header of more than %d bytes",
		    PT_HDR_MAX);
	size_t hl = sb.size, pad = (4 - hl % 4) % 4;
	size_t pay = payload != NULL ? (size_t)n * sizeof(float) : 0;
	size_t total = 4 + hl + pad + pay;
	// The values may be m's own already (a reply written into the request
	// it answers, values first). Then m must not grow, which would free
	// them, and they go to their place before the header is written over
	// what may be their start.
	uintptr_t b0 = (uintptr_t)nng_msg_body(m), at = (uintptr_t)payload;
	int own = pay > 0 && at >= b0 && at < b0 + nng_msg_capacity(m);
	if (own && total > nng_msg_capacity(m))
		return pti_err_set(PT_EINVAL, "a message of %zu bytes in place "
		    "of %zu", total, nng_msg_capacity(m));
	// Within the message's capacity nothing is allocated or zeroed, and
	// the body stays where it is (nng clears by length).
	nng_msg_clear(m);
	nng_msg_header_clear(m);
	if (nng_msg_realloc(m, total) != 0)
		return pti_err_set(PT_ENOMEM, "a message of %zu bytes", total);
	uint8_t *body = nng_msg_body(m);
	if (pay > 0 && body + 4 + hl + pad != (const uint8_t *)payload)
		memmove(body + 4 + hl + pad, payload, pay); // host is LE
	body[0] = (uint8_t)hl;
	body[1] = (uint8_t)(hl >> 8);
	body[2] = 0;
	body[3] = 0;
	memcpy(body + 4, sb.data, hl);
	memset(body + 4 + hl, 0, pad);
	return 0;
}

// ---------------------------------------------------------------- decoding

static int get_u(const msgpack_object *o, const char *k, uint64_t max,
    uint64_t *out)
{
	if (o->type != MSGPACK_OBJECT_POSITIVE_INTEGER || o->via.u64 > max)
		return pti_err_set(PT_EPROTO,
		    "header: \"%s\" must be an integer from 0 to %llu", k,
		    (unsigned long long)max);
	*out = o->via.u64;
	return 0;
}

static int get_i(const msgpack_object *o, const char *k, int64_t *out)
{
	if (o->type == MSGPACK_OBJECT_NEGATIVE_INTEGER) {
		*out = o->via.i64;
		return 0;
	}
	if (o->type == MSGPACK_OBJECT_POSITIVE_INTEGER &&
	    o->via.u64 <= (uint64_t)INT64_MAX) {
		*out = (int64_t)o->via.u64;
		return 0;
	}
	return pti_err_set(PT_EPROTO, "header: \"%s\" must be an integer", k);
}

static int key_is(const msgpack_object *k, const char *s)
{
	size_t n = strlen(s);
	return k->via.str.size == n && memcmp(k->via.str.ptr, s, n) == 0;
}

// A field: its key, where it goes, its bound, and the bit it sets.
typedef struct hdr_field {
	const char *key;
	size_t off;
	int kind; // 'u' uint32, 'U' uint64, 'i' int64, 'd' int32
	uint32_t bit;
} hdr_field;

#define F(k, m, kind, bit) {k, offsetof(pti_hdr, m), kind, bit}
static const hdr_field hdr_fields[] = {
    F("pv", pv, 'u', 0), F("op", op, 'u', 0), F("role", role, 'u', 0),
    F("rank", rank, 'u', 0), F("step", step, 'i', PTI_H_STEP),
    F("ver", ver, 'i', PTI_H_VER), F("var", var, 'd', PTI_H_VAR),
    F("off", off, 'U', PTI_H_RANGE), F("n", n, 'U', PTI_H_RANGE),
    F("status", status, 'u', PTI_H_STATUS),
    F("lhash", layout_hash, 'U', PTI_H_LAYOUT),
    F("nparams", n_params, 'U', PTI_H_LAYOUT),
    F("lo", lo, 'U', PTI_H_SHARD), F("hi", hi, 'U', PTI_H_SHARD),
    F("mode", mode, 'u', PTI_H_SHARD),
    F("workers", n_workers, 'u', PTI_H_SHARD),
    F("servers", n_servers, 'u', PTI_H_SHARD),
    F("srank", server_rank, 'u', PTI_H_SHARD),
    F("stale", staleness, 'i', PTI_H_STALE),
    F("tb", table, 'u', PTI_H_ROWS), F("k", k, 'u', PTI_H_ROWS),
    F("kp", kp, 'u', PTI_H_ROWS),
    F("from", from, 'U', PTI_H_SCAN), F("lim", lim, 'u', PTI_H_SCAN),
    F("shm", shm, 'u', PTI_H_SHM),
    F("updates", updates, 'U', PTI_H_STATS),
    F("rejected", rejected, 'U', PTI_H_STATS),
    F("dropped", dropped, 'U', PTI_H_STATS),
    F("ssum", stale_sum, 'U', PTI_H_STATS),
    F("smax", stale_max, 'U', PTI_H_STATS),
    F("nhello", n_hello, 'u', PTI_H_STATS),
    F("ndone", n_done, 'u', PTI_H_STATS),
    F("nlost", n_lost, 'u', PTI_H_STATS),
    F("live0", first_live, 'u', PTI_H_STATS),
};
#undef F

static int hdr_set(pti_hdr *h, uint64_t *hist, const msgpack_object *k,
    const msgpack_object *v, uint32_t *seen)
{
	if (key_is(k, "msg")) {
		if (v->type != MSGPACK_OBJECT_STR)
			return pti_err_set(PT_EPROTO,
			    "header: \"msg\" must be a string");
		size_t n = v->via.str.size < PT_MSG_MAX - 1 ? v->via.str.size
							    : PT_MSG_MAX - 1;
		memcpy(h->msg, v->via.str.ptr, n);
		h->msg[n] = '\0';
		return 0;
	}
	if (key_is(k, "nonce") || key_is(k, "mac")) {
		int nonce = key_is(k, "nonce");
		uint32_t want = nonce ? PT_NONCE_LEN : PT_MAC_LEN;
		if (v->type != MSGPACK_OBJECT_BIN || v->via.bin.size != want)
			return pti_err_set(PT_EPROTO,
			    "header: \"%s\" must be %u bytes of bin",
			    nonce ? "nonce" : "mac", want);
		memcpy(nonce ? h->nonce : h->mac, v->via.bin.ptr, want);
		h->has |= nonce ? PTI_H_NONCE : PTI_H_MAC;
		return 0;
	}
	if (key_is(k, "lr")) {
		if (v->type != MSGPACK_OBJECT_FLOAT64 &&
		    v->type != MSGPACK_OBJECT_FLOAT32)
			return pti_err_set(PT_EPROTO,
			    "header: \"lr\" must be a float");
		h->lr = v->via.f64;
		h->has |= PTI_H_LR;
		return 0;
	}
	if (key_is(k, "hist")) {
		if (v->type != MSGPACK_OBJECT_ARRAY ||
		    v->via.array.size > PT_STALE_BUCKETS)
			return pti_err_set(PT_EPROTO,
			    "header: \"hist\" must be an array of at most %d "
			    "integers", PT_STALE_BUCKETS);
		for (uint32_t i = 0; i < v->via.array.size; i++) {
			uint64_t u = 0;
			int rv = get_u(&v->via.array.ptr[i], "hist",
			    UINT64_MAX, &u);
			if (rv != 0)
				return rv;
			if (hist != NULL)
				hist[i] = u;
		}
		return 0;
	}
	for (size_t i = 0; i < sizeof(hdr_fields) / sizeof(hdr_fields[0]);
	     i++) {
		const hdr_field *f = &hdr_fields[i];
		if (!key_is(k, f->key))
			continue;
		char *dst = (char *)h + f->off;
		uint64_t u = 0;
		int64_t s = 0;
		int rv;
		switch (f->kind) {
		case 'u':
			if ((rv = get_u(v, f->key, UINT32_MAX, &u)) != 0)
				return rv;
			*(uint32_t *)(void *)dst = (uint32_t)u;
			break;
		case 'U':
			if ((rv = get_u(v, f->key, UINT64_MAX, &u)) != 0)
				return rv;
			*(uint64_t *)(void *)dst = u;
			break;
		case 'd':
			if ((rv = get_i(v, f->key, &s)) != 0)
				return rv;
			if (s < -1 || s > INT32_MAX)
				return pti_err_set(PT_EPROTO,
				    "header: \"%s\" out of range", f->key);
			*(int32_t *)(void *)dst = (int32_t)s;
			break;
		default:
			if ((rv = get_i(v, f->key, &s)) != 0)
				return rv;
			*(int64_t *)(void *)dst = s;
			break;
		}
		h->has |= f->bit;
		*seen |= (i < 4) ? 1u << i : 0;
		return 0;
	}
	return 0; // unknown keys are ignored: later versions may add some
}

// rows_shape checks a rows request's counts against its payload: n
// words must be the k pushed rows' ids, counts and whole rows of
// gradient, then the kp pulled ids (pti_rows_words). The server checks
// the row's width against the table's dim.
static int rows_shape(const pti_hdr *h)
{
	uint64_t n = (h->has & PTI_H_RANGE) ? h->n : 0;
	uint64_t k = h->k, kp = h->kp;
	if (!(h->has & PTI_H_ROWS) || k > PTI_ROWS_MAX || kp > PTI_ROWS_MAX)
		return pti_err_set(PT_EPROTO, "rows: needs \"tb\", \"k\" and "
		    "\"kp\", each of k and kp at most %u", PTI_ROWS_MAX);
	uint64_t fixed = pti_rows_words(k, kp, 0);
	if (n < fixed || (k == 0 && n != fixed) ||
	    (k > 0 && (n - fixed) % k != 0))
		return pti_err_set(PT_EPROTO, "rows: %llu words do not hold "
		    "%llu pushed rows and %llu pulled ids",
		    (unsigned long long)n, (unsigned long long)k,
		    (unsigned long long)kp);
	return 0;
}

// msg_parse decodes m into h (see pti_msg_decode) and, when hist is not
// NULL, the staleness histogram into it.
static int msg_parse(pti_hdr *h, uint64_t *hist, const void **payload,
    nng_msg *m)
{
	const uint8_t *body = nng_msg_body(m);
	size_t len = nng_msg_len(m), used;
	int rv;

	memset(h, 0, sizeof(*h));
	if (len < 4)
		return pti_err_set(PT_EPROTO,
		    "message of %zu bytes is shorter than its length prefix",
		    len);
	uint32_t hl = (uint32_t)body[0] | (uint32_t)body[1] << 8 |
		      (uint32_t)body[2] << 16 | (uint32_t)body[3] << 24;
	if (hl == 0 || hl > PT_HDR_MAX || hl > len - 4)
		return pti_err_set(PT_EPROTO,
		    "header length %u does not fit (message %zu bytes, "
		    "limit %d)", hl, len, PT_HDR_MAX);
	if (body[4] < 0x80 || (body[4] > 0x8f && body[4] != 0xde &&
				  body[4] != 0xdf))
		return pti_err_set(PT_EPROTO, "header is not a msgpack map");
	if ((rv = pti_msgpack_check(body + 4, hl, 2, &used)) != 0)
		return rv;
	if (used != hl)
		return pti_err_set(PT_EPROTO,
		    "header: %zu stray bytes after the map", hl - used);

	msgpack_unpacked up;
	size_t off = 0;
	msgpack_unpacked_init(&up);
	if (msgpack_unpack_next(&up, (const char *)body + 4, hl, &off) !=
		MSGPACK_UNPACK_SUCCESS ||
	    up.data.type != MSGPACK_OBJECT_MAP) {
		msgpack_unpacked_destroy(&up);
		return pti_err_set(PT_EPROTO, "header is not a msgpack map");
	}
	uint32_t seen = 0;
	rv = 0;
	for (uint32_t i = 0; i < up.data.via.map.size && rv == 0; i++) {
		const msgpack_object_kv *kv = &up.data.via.map.ptr[i];
		if (kv->key.type != MSGPACK_OBJECT_STR)
			rv = pti_err_set(PT_EPROTO,
			    "header: keys must be strings");
		else
			rv = hdr_set(h, hist, &kv->key, &kv->val, &seen);
	}
	msgpack_unpacked_destroy(&up);
	if (rv != 0)
		return rv;
	if ((seen & 3) != 3)
		return pti_err_set(PT_EPROTO,
		    "header lacks \"pv\" or \"op\"");
	if (h->pv != PT_PROTO_VERSION)
		return pti_err_set(PT_EPROTO,
		    "protocol version %u, this build speaks %d", h->pv,
		    PT_PROTO_VERSION);
	size_t at = 4 + hl + (4 - hl % 4) % 4;
	size_t pay = len > at ? len - at : 0;
	if (len < at && len != 4 + hl)
		return pti_err_set(PT_EPROTO, "header padding is truncated");
	// Values in shared memory come without a payload.
	uint64_t want = (h->has & PTI_H_RANGE) && !(h->has & PTI_H_SHM) ? h->n
									: 0;
	int carries = h->op == PT_OP_PUSH || h->op == PT_OP_PUSHPULL ||
		      h->op == PT_OP_RING || h->op == PT_OP_ROWS ||
		      (h->has & PTI_H_STATUS);
	if (pay % sizeof(float) != 0 ||
	    (carries && pay / sizeof(float) != want) ||
	    (!carries && pay != 0))
		return pti_err_set(PT_EPROTO,
		    "%s: payload of %zu bytes, header says %llu floats",
		    pti_op_name(h->op), pay,
		    (unsigned long long)(carries ? want : 0));
	if (h->op == PT_OP_ROWS && h->role != PT_ROLE_SERVER &&
	    (rv = rows_shape(h)) != 0)
		return rv;
	*payload = pay ? body + at : NULL;
	return 0;
}

int pti_msg_decode(pti_hdr *h, const void **payload, nng_msg *m)
{
	return msg_parse(h, NULL, payload, m);
}

int pti_msg_hist(nng_msg *m, uint64_t hist[PT_STALE_BUCKETS])
{
	pti_hdr h;
	const void *pay;
	memset(hist, 0, PT_STALE_BUCKETS * sizeof(uint64_t));
	return msg_parse(&h, hist, &pay, m);
}
