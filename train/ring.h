// train/ring.h - the ring all-reduce of --mode allreduce: W workers,
// each holding the whole model, sum their gradients with no servers.
//
// Worker r listens for its left neighbour (r - 1 mod W) and dials its
// right one (r + 1 mod W), one nng pair socket each way. The two ends of
// each link prove the job secret to each other before anything else
// (docs/PROTOCOL.md, "Ring"): a stranger's connection is closed. The sum
// is bandwidth-optimal: the vector is cut into W segments; W - 1 rounds
// of reduce-scatter leave each worker the whole sum of one segment, and
// W - 1 rounds of all-gather hand those on, so each worker sends
// 2 (W - 1) / W of the vector per call. Segment i's sum is taken in ring
// order starting at worker i, ((g_i + g_{i+1}) + ...) + g_{i-1}, and
// only there, so every worker ends with the same bits and two runs with
// the same gradients give the same sums. With W = 2 that is the rank
// order a sync server sums in (float addition commutes).
//
// A pti_ring is used by one thread at a time.
#ifndef PT_TRAIN_RING_H
#define PT_TRAIN_RING_H

#include <stdint.h>

#include "common/auth.h"

typedef struct pti_ring pti_ring;

// pti_ring_listen starts worker `rank`'s end of the ring of n workers:
// it listens on `listen` (ipc://, tcp:// or tls+tcp://; port 0: any free
// one) for its left neighbour; the secret (copied) and layout hash `hash`
// are what both links prove. Waits at most timeout_s seconds for the
// neighbours later, and for every message. Returns 0 and *out (the
// caller's, to pti_ring_close); PT_ETRANSPORT naming the address nng
// refused; PT_ENOMEM. With n = 1 there is no socket at all.
int pti_ring_listen(pti_ring **out, const char *listen, uint32_t rank,
    uint32_t n, const pti_secret *secret, uint64_t hash, double timeout_s);

// pti_ring_addr is the address the left neighbour dials: --listen with
// the port it got.
const char *pti_ring_addr(const pti_ring *r);

// pti_ring_join dials the right neighbour, whose address is in urls (the
// n workers', comma-separated, by rank), and both links prove the
// secret. PT_EINVAL when urls does not hold n addresses; PT_ETRANSPORT;
// PT_ETIMEDOUT naming the neighbour that did not come; PT_EAUTH.
int pti_ring_join(pti_ring *r, const char *urls);

// pti_ring_open is pti_ring_listen on this worker's address in urls,
// then pti_ring_join.
int pti_ring_open(pti_ring **out, const char *urls, uint32_t rank,
    uint32_t n, const pti_secret *secret, uint64_t hash, double timeout_s);

// pti_ring_close closes the sockets and frees r; NULL is fine. It
// returns within 2 s: should nng take longer to close them (nng 1.5.2
// can hang so), a thread of its own goes on with it, for as long as
// the process lives.
void pti_ring_close(pti_ring *r);

// pti_ring_sum replaces buf (n floats, the same n on every worker) by
// the sum of every worker's buf, as above; step tags the messages, and a
// message of another step, round or range is refused. Returns 0;
// PT_ETIMEDOUT naming the neighbour that sent nothing in time; PT_EPROTO
// or PT_EAUTH naming what was wrong with a neighbour's message;
// PT_ECLOSED; PT_ENOMEM. On failure buf is partly summed: the ring is
// broken, and the job cannot go on from it.
int pti_ring_sum(pti_ring *r, float *buf, uint64_t n, int64_t step);

// pti_ring_bytes is what this worker has sent so far: payload bytes.
uint64_t pti_ring_bytes(const pti_ring *r);

#endif // PT_TRAIN_RING_H
