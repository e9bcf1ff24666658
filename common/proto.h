// common/proto.h - the wire format between workers, servers and control
// clients (docs/PROTOCOL.md is the specification).
//
// Every message is one nng message: a 4-byte little-endian header length
// H, H bytes of msgpack (a map with string keys), zero padding up to a
// multiple of 4 bytes, then the payload: raw little-endian float32 values,
// as many as the header's "n" says. Requests and replies share the form;
// every request gets exactly one reply, whose "status" is 0 or a PT_E*
// code with a human-readable "msg".
//
// Decoding never trusts the peer: the header is bounded in size, every
// msgpack container count is checked against the bytes that remain before
// msgpack-c sees it, and the payload length must match "n" exactly.
#ifndef PT_COMMON_PROTO_H
#define PT_COMMON_PROTO_H

#include <stddef.h>
#include <stdint.h>

#include <nng/nng.h>

#include "common/auth.h"

#define PT_PROTO_VERSION 2 // 2: challenge, and hello proves the job secret
#define PT_HDR_MAX 4096     // bytes of msgpack header, at most
// Messages of PTI_ROOM_FROM bytes of values or more have headers of
// PTI_HDR_ROOM bytes at least (pti_msg_encode), more than any reply needs.
#define PTI_ROOM_FROM 65536
#define PTI_HDR_ROOM 128
#define PT_MSG_MAX 200      // bytes of an error text
#define PT_STALE_BUCKETS 64 // staleness histogram: 0..62, and 63 = ">= 63"

enum pti_op {
	PT_OP_HELLO = 1,    // a worker joins; reply: layout, shard, version
	PT_OP_PUSH = 2,     // gradient for a range; reply: ack
	PT_OP_PULL = 3,     // values of a range; reply: payload
	PT_OP_PUSHPULL = 4, // push, then pull the next version, one round trip
	PT_OP_DONE = 5,     // a worker has finished its steps
	PT_OP_STATS = 6,    // counters; reply: stats fields
	PT_OP_SHUTDOWN = 7, // stop the server after replying
	PT_OP_CHALLENGE = 8, // reply: a nonce for this connection's hello
	PT_OP_RING = 9,      // allreduce: a segment between ring neighbours
	PT_OP_ROWS = 10,     // rows of an embedding table: push k, pull kp
	PT_OP_MAX
};

enum pti_role {
	PT_ROLE_WORKER = 1,
	PT_ROLE_SERVER = 2,
	PT_ROLE_CONTROL = 3,
	PT_ROLE_PEER = 4, // allreduce: a worker to its ring neighbour
};

enum pti_mode_id {
	PT_MODE_SYNC = 1,
	PT_MODE_ASYNC = 2,
	PT_MODE_SSP = 3,
	PT_MODE_ALLREDUCE = 4, // no servers: workers sum in a ring
	PT_MODE_HYBRID = 5,    // variables as sync, embedding rows as async
};

// Bits of pti_hdr.has: which optional fields the header carries.
enum {
	PTI_H_STEP = 1u << 0,
	PTI_H_VER = 1u << 1,
	PTI_H_VAR = 1u << 2,
	PTI_H_RANGE = 1u << 3, // off and n
	PTI_H_STATUS = 1u << 4, // status and msg
	PTI_H_LAYOUT = 1u << 5, // layout hash and n_params
	PTI_H_SHARD = 1u << 6,  // lo, hi, mode, workers, servers, server rank
	PTI_H_STALE = 1u << 7,  // staleness of the applied update
	PTI_H_STATS = 1u << 8,  // the counters and histogram
	PTI_H_LR = 1u << 9,     // learning rate applied to the push
	PTI_H_NONCE = 1u << 10, // the server's challenge; a hello's own
	PTI_H_MAC = 1u << 11,   // a hello's proof of the job secret, and its
				// reply's (the server's, over the hello's nonce)
	PTI_H_ROWS = 1u << 12,  // table, k rows pushed, kp rows pulled
	PTI_H_SCAN = 1u << 13,  // rows: every row from id `from` on, at
				// most `lim` (a reply: its ids first)
	PTI_H_SHM = 1u << 14,   // the range's values are in shared memory
				// (common/shm.h): a push's in the worker's
				// segment, a reply's in the server's; no
				// payload
};

// A rows request's payload, in 4-byte words (docs/PROTOCOL.md): the k
// pushed rows' ids (8 bytes each), the update count each was read at (4
// bytes: the low bits of the count its pull returned), their gradients
// (k x dim floats), then the kp pulled rows' ids. Its reply: the kp
// rows' update counts (4 bytes each), then their values (kp x dim
// floats). Ids and counts are little-endian, read with memcpy.
#define PTI_ROWS_MAX (1u << 24) // rows of one request, pushed or pulled
#define PTI_ROWS_UNSEEN 0xffffffffu // a pushed row's count: never pulled
#define PTI_ROWS_BYTES_MAX ((size_t)64 << 20) // bytes of a rows message
static inline uint64_t pti_rows_words(uint64_t k, uint64_t kp, uint64_t dim)
{
	return 3 * k + k * dim + 2 * kp;
}

typedef struct pti_hdr {
	uint32_t has; // PTI_H_* bits
	uint32_t pv;  // protocol version
	uint32_t op;  // pti_op
	uint32_t role;
	uint32_t rank;
	int64_t step; // worker's step
	int64_t ver;  // parameter version computed from, or wanted
	int32_t var;  // variable index; absent: off is a flat key
	uint64_t off; // first element
	uint64_t n;   // element count = payload floats
	uint32_t status;
	char msg[PT_MSG_MAX];
	uint64_t layout_hash, n_params;
	uint64_t lo, hi; // the server's shard, flat [lo, hi)
	uint32_t mode, n_workers, n_servers, server_rank;
	int64_t staleness;
	double lr;
	uint8_t nonce[PT_NONCE_LEN];
	uint8_t mac[PT_MAC_LEN];
	uint32_t table, k, kp; // rows: the table, rows pushed, rows pulled
	uint64_t from;         // scan: the lowest id wanted
	uint32_t lim;          // scan: rows at most
	uint32_t shm;          // 1 with PTI_H_SHM
	// stats
	uint64_t updates, rejected, dropped, stale_sum, stale_max;
	uint32_t n_hello, n_done, n_lost;
	uint32_t first_live; // lowest worker rank not lost (finishes the job)
	// The staleness histogram is not kept in the header, which every
	// call puts on the stack by the server: encoding a stats reply sends
	// the PT_STALE_BUCKETS counts hist points at (when not NULL), and
	// pti_msg_hist reads them from a received one.
	const uint64_t *hist;
} pti_hdr;

// pti_hdr_init zeroes h and fills version, op, role and rank.
void pti_hdr_init(pti_hdr *h, uint32_t op, uint32_t role, uint32_t rank);

// pti_msg_encode builds a message from h and n floats at payload (h->n is
// set to n when payload is given). On success *out is the caller's.
// Returns PT_ENOMEM or PT_EINVAL.
int pti_msg_encode(nng_msg **out, const pti_hdr *h, const float *payload,
    uint64_t n);

// pti_msg_encode_in is pti_msg_encode into a message of the caller's (a
// request or reply done with), whose body and header it replaces: while
// its capacity suffices nothing is allocated or zero-filled, which for a
// shard-sized message saves a fresh buffer per step. payload may lie in
// m itself (values written over the request a reply answers): they are
// moved into place, or left where they are already, and PT_EINVAL when m
// would have to grow. m stays the caller's; on failure its contents are
// undefined.
int pti_msg_encode_in(nng_msg *m, const pti_hdr *h, const float *payload,
    uint64_t n);

// pti_msg_roomy tells whether m (may be NULL) takes a message of n values
// through pti_msg_encode_in without growing: n values are PTI_ROOM_FROM
// bytes or more (their header then needs PTI_HDR_ROOM bytes, unless it
// is as large as its own) and m holds that much.
int pti_msg_roomy(nng_msg *m, uint64_t n);

// pti_msg_decode parses m into h and points *payload at its floats (in m's
// body, possibly unaligned: copy them with memcpy). m stays the caller's.
// Returns PT_EPROTO with a detail naming the problem when the message is
// malformed; h is then partly filled (op may be valid).
int pti_msg_decode(pti_hdr *h, const void **payload, nng_msg *m);

// pti_msg_hist reads the staleness histogram of a stats reply m into
// hist (zeros where it has none). Returns PT_EPROTO as pti_msg_decode
// would.
int pti_msg_hist(nng_msg *m, uint64_t hist[PT_STALE_BUCKETS]);

// pti_msgpack_check walks one msgpack object in buf without allocating and
// returns 0 when it is well formed, nested at most max_depth deep, and
// every container count fits in the bytes that remain; *used gets its
// size. PT_EPROTO otherwise.
int pti_msgpack_check(const uint8_t *buf, size_t len, int max_depth,
    size_t *used);

// pti_op_name returns "hello", "push", ... or "unknown".
const char *pti_op_name(uint32_t op);

#endif // PT_COMMON_PROTO_H
