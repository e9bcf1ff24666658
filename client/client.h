// client/client.h - a worker's (or a control tool's) connection to every
// parameter server. A call sends one request to each server it concerns
// at once, each on an nng REQ context of its own, and waits for all the
// replies: the servers work in parallel, and a request parked by a server
// does not hold back the next. One thread per client at a time.
//
// A server that goes away (its connection closes) fails the call under
// way at once with PT_ECLOSED naming it, instead of leaving it to time
// out. nng keeps dialing it, with a growing pause between attempts;
// pti_client_wait waits until every server is connected again, and a new
// pti_client_hello rejoins them.
#ifndef PT_CLIENT_CLIENT_H
#define PT_CLIENT_CLIENT_H

#include <stdint.h>

#include "common/layout.h"
#include "common/proto.h"

typedef struct pti_client pti_client;

// What the servers said about one push or pull.
typedef struct pti_client_step {
	int64_t ver_min;    // lowest parameter version among the replies
	int64_t stale_max;  // largest staleness the servers recorded
	double stale_mean;  // mean over servers
	double lr;          // learning rate server 0 applied (push replies)
} pti_client_step;

// pti_client_open dials every server in urls (comma-separated, in server
// rank order) as role/rank, with replies awaited at most timeout_s
// seconds, proving the job secret (copied) in each hello. Dialing goes on
// in the background until a server is up. On success *out is the
// caller's, to pti_client_close.
int pti_client_open(pti_client **out, const char *urls, uint32_t role,
    uint32_t rank, double timeout_s, const pti_secret *secret);

void pti_client_close(pti_client *c);

uint32_t pti_client_servers(const pti_client *c);

// pti_client_wait blocks until every server is connected, at most
// timeout_s seconds, saying on stderr (as `who`) which servers it waits
// for when that takes a while; a server never connected yet is said to
// be not started and waited for at most never_s seconds. PT_ETIMEDOUT
// naming the missing servers.
int pti_client_wait(pti_client *c, const char *who, double timeout_s,
    double never_s);

// pti_client_shm hands each server this worker's shared-memory segment
// and maps the server's (common/shm.h), after a hello (the shards are
// known then); from then on pushes, pushpulls and pulls of a shard's
// ranges carry their values through them. Called again after a later
// hello (a server that restarted has a new segment). still: the job's
// mode changes no value while a worker may read it (sync without backup
// workers): values are read in place; otherwise they are copied out
// under the segment's seqlock (common/shm.h, pti_shm_read). PT_EINVAL
// for an address that is not ipc://, else pti_shm_offer's errors.
int pti_client_shm(pti_client *c, int still);

// pti_client_shm_offered tells whether every server offers shared memory
// (its handshake's socket is there, beside its ipc:// address); when one
// does not, *url is its address.
int pti_client_shm_offered(const pti_client *c, const char **url);

// pti_client_shm_view: after pti_client_shm with still set, points
// *grad at [off, off + n) of this worker's segment, where it writes its
// pushes' values, and *vals at the same range of its view of the
// servers' segments (common/shm.h's pti_shm_view), where it reads
// theirs, and returns 1; else 0, nothing written (also when values may
// change while read). A push of grad from there, or a pull or pushpull
// into vals, copies nothing but the values where two shards share a page:
// a trainer computes in place. Both stay valid until pti_client_close
// (a rejoin maps the new segments at the same places).
int pti_client_shm_view(const pti_client *c, uint64_t off, uint64_t n,
    float **grad, const float **vals);

// pti_client_hello joins every server and checks that each holds the shard
// that l and the server count say, in `mode` with `workers` workers.
// `step` is the worker's next step (0 at the start); *start receives
// where it goes on: in sync mode the lowest open step among the servers
// (they differ while a step closes on one before another: a server that
// closed it drops the push), else the furthest any server has seen this
// worker get. PT_EINVAL with a
// detail naming the server that disagrees about the job.
int pti_client_hello(pti_client *c, const pti_layout *l, int mode,
    uint32_t workers, int64_t step, int64_t *start);

// pti_client_pull writes every server's shard into params (n_params).
// want_ver >= 0 waits (sync) for that version; -1 takes the latest.
int pti_client_pull(pti_client *c, float *params, int64_t want_ver,
    pti_client_step *info);

// Calls: one request to each of some servers, all under way at once (a
// link carries any number), answered together. pti_call_new makes an
// empty call; pti_call_send encodes h with n floats of pay (NULL: none)
// and sends it to server i: dst, when not NULL, receives the n values the
// reply must carry for h's range (dst[0] is element h->off); a call holds
// at most two parts per server. pti_call_wait blocks until every part is
// answered or failed, checks each reply (status, op, range) and copies
// the values; *info (may be NULL) sums up versions and staleness. It
// returns the first part's error. pti_call_reply is part i's decoded
// reply, after a wait. pti_call_free waits for what is still under way and
// frees q (NULL is fine). pt_req is pstrain.h's handle.
typedef struct pt_req pt_req;
int pti_call_new(pti_client *c, pt_req **out);
int pti_call_send(pt_req *q, uint32_t i, const pti_hdr *h, const float *pay,
    uint64_t n, float *dst);
int pti_call_wait(pt_req *q, pti_client_step *info);
pti_hdr *pti_call_reply(pt_req *q, uint32_t i);
// pti_call_payload is part i's reply's payload (pti_call_reply's n
// words, possibly unaligned), after a wait; NULL when it has none. It
// lives until pti_call_free.
const void *pti_call_payload(pt_req *q, uint32_t i);
void pti_call_free(pt_req *q);

// Lent values (pstrain.h, pt_wait_lent): a call may lend one reply's
// values instead of copying them. pti_call_send_lent is pti_call_send of
// that part, with no dst: pti_call_wait checks its reply's range as for a
// dst, and writes nothing. pti_call_lends tells whether q has such a
// part. After a wait that returned 0, pti_call_lend takes that reply out
// of q: *vals points at its n values, in the reply, or in a copy the
// loan owns when they are not aligned for floats (then counted, see
// pti_client_counts); *out is the caller's, to pti_lent_free. PT_EINVAL
// when q lends nothing, PT_ENOMEM; the reply stays in q then.
// pti_lent_free gives the reply back to the part it came on, to carry
// that part's next request (NULL is fine); pti_client_close frees the
// loans still out. The loan list is under the client's lock.
typedef struct pt_lent pt_lent;
int pti_call_send_lent(pt_req *q, uint32_t i, const pti_hdr *h,
    const float *pay, uint64_t n);
int pti_call_lends(const pt_req *q);
int pti_call_lend(pt_req *q, const float **vals, pt_lent **out);
void pti_lent_free(pti_client *c, pt_lent *l);

// pti_client_counts: requests written into a kept reply instead of a new
// message (*reused), and loans that had to copy their values (*copied),
// since the client opened. For tests and statistics.
void pti_client_counts(pti_client *c, uint64_t *reused, uint64_t *copied);

// pti_client_bytes: bytes of the messages this client has sent (*tx)
// and received (*rx) since it opened, pstrain's headers and payloads
// (nng adds a 4-byte request id, and tcp and ipc an 8-byte length, to
// each message).
void pti_client_bytes(pti_client *c, uint64_t *tx, uint64_t *rx);

// pti_client_shard gives server i's shard [*lo, *hi) as its hello said,
// and returns the server count. pti_client_ver: the version of the values
// last received from server i.
uint32_t pti_client_shard(const pti_client *c, uint32_t i, uint64_t *lo,
    uint64_t *hi);
int64_t pti_client_ver(const pti_client *c, uint32_t i);

// pti_client_simple sends op (done, stats, shutdown) with no payload to
// every server; when replies is not NULL it receives one header a server.
int pti_client_simple(pti_client *c, uint32_t op, pti_hdr *replies);

#endif // PT_CLIENT_CLIENT_H
