// common/shm.h - shared memory between a server and the workers of one
// host (--transport shm, docs/PROTOCOL.md "Shared memory"). A worker
// writes a push's values into a segment of its own that the server maps
// read-only, and the server answers a pull with its shard's values where
// they live, in a segment of its own that the worker maps read-only. The
// requests and replies are headers only, in the worker's box (below)
// with futex wake-ups, or on the ipc connection when no slot is free.
// No payload crosses the kernel.
//
// Segments are memfds, sealed against shrinking and growing before they
// are handed over (so a peer cannot make the other's reads fault), and
// handed over with SCM_RIGHTS on a unix socket beside the ipc address
// (PATH.shm), only to a peer that proves the job secret: each side
// answers the other's nonce with an HMAC under the secret.
#ifndef PT_COMMON_SHM_H
#define PT_COMMON_SHM_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "common/auth.h"

// A segment: a memfd and its mapping, or a window of it (read-write for
// its maker, read-only for the peer it was handed to). p is the first
// value, `skip` bytes into the mapping, which is `bytes` long from
// there (p - skip is page-aligned). owner: a pidfd of the process that
// made it, when known (a server's, mapped by a worker), else -1. {NULL,
// 0, 0, -1, -1} when none.
//
// Values sit in segments at their place in the model, so that one
// mapping can show several segments side by side (pti_shm_view): a
// worker's segment holds the whole model, element i at byte 4 i (each
// server maps the window of its shard), and a server's segment holding
// [lo, hi) starts its values at byte pti_shm_skip(lo), so that element i
// lies at the same offset in its page as in the model.
typedef struct pti_shm_seg {
	float *p;
	size_t bytes;
	size_t skip;
	int fd;
	int owner;
} pti_shm_seg;

#define PTI_SHM_SEG_NONE ((pti_shm_seg){NULL, 0, 0, -1, -1})

// pti_shm_seg_create makes a zeroed segment of `bytes` (rounded up to
// whole pages, at least one), mapped read-write and sealed, whose values
// start `skip` bytes in (skip < bytes). PT_EIO naming what failed.
int pti_shm_seg_create(pti_shm_seg *g, size_t bytes, size_t skip,
    const char *name);

// pti_shm_skip is where the values of a server's segment start when its
// shard starts at element lo: 4 lo modulo the page size.
size_t pti_shm_skip(uint64_t lo);

// pti_shm_seg_fini unmaps g and closes its descriptor; g becomes none.
void pti_shm_seg_fini(pti_shm_seg *g);

// pti_shm_seg_replace makes *g the current segment *cur (g becomes
// none). The one it replaces stays mapped, appended to (*old)[0..*n_old)
// (a gradient held or a value lent may still point into it), until
// pti_shm_segs_free. PT_ENOMEM when the list cannot grow: then *g is
// unmapped and *cur kept.
int pti_shm_seg_replace(pti_shm_seg *cur, pti_shm_seg *g, pti_shm_seg **old,
    uint32_t *n_old);

// pti_shm_segs_free unmaps segs[0..n) and frees segs.
void pti_shm_segs_free(pti_shm_seg *segs, uint32_t n);

// A server's segment ends with this block, after its n values at
// pti_shm_ctl_at(n): seq is odd while the server changes values and even
// once they are whole again, ver then the version they are of. Where
// values change while workers read them (async, ssp, sync with backup
// workers), a worker copies them out under it, as a seqlock: it retries
// a copy during which seq moved. In sync without backup workers no
// value changes while a worker may read it, and the block goes unread.
typedef struct pti_shm_ctl {
	_Atomic uint64_t seq;
	_Atomic int64_t ver;
} pti_shm_ctl;

// pti_shm_ctl_at: where the block starts in a segment whose n values
// start `skip` bytes in (the first 64-byte boundary after them);
// PTI_SHM_SERVER_BYTES(skip, n) such a server's segment's size.
static inline size_t pti_shm_ctl_at(size_t skip, uint64_t n)
{
	return (skip + (size_t)n * sizeof(float) + 63) / 64 * 64;
}
#define PTI_SHM_SERVER_BYTES(skip, n) (pti_shm_ctl_at(skip, n) + 64)

// pti_shm_ctl_of is the block of segment g holding n values (mapped from
// its start), NULL when g is too small to hold one.
pti_shm_ctl *pti_shm_ctl_of(const pti_shm_seg *g, uint64_t n);

// A worker's picture of the whole model's values out of the servers'
// segments, side by side (sync without backup workers: the values do not
// change while it reads them): each server's pages that hold only its
// shard's values are its segment's own, mapped in place; a page that
// holds values of two servers (where a shard starts or ends inside a
// page) is the worker's, and pti_shm_view_map says which values of the
// shard lie outside its own pages, to be copied there after each pull.
typedef struct pti_shm_view {
	float *p;     // n values
	size_t bytes; // the mapping's length
} pti_shm_view;

// pti_shm_view_init reserves a view of n values (zeroed, read-write
// until segments are mapped into it). PT_EIO naming what failed.
int pti_shm_view_init(pti_shm_view *v, uint64_t n);

// pti_shm_view_map maps the pages of server segment g (holding [lo, hi)
// of the n values) that hold nothing else into v, read-only, over
// whatever was there (a segment a rejoin replaced), and says in
// [*own_lo, *own_hi) which of its values they hold (the others are
// copied). PT_EIO naming what failed.
int pti_shm_view_map(pti_shm_view *v, const pti_shm_seg *g, uint64_t lo,
    uint64_t hi, uint64_t n, uint64_t *own_lo, uint64_t *own_hi);

// pti_shm_view_fini unmaps v; v becomes {NULL, 0}.
void pti_shm_view_fini(pti_shm_view *v);

// The server's side, under the one lock its values are changed under:
// pti_shm_write_begin before the first change (seq odd),
// pti_shm_write_end once they are whole, of version ver (seq even).
void pti_shm_write_begin(pti_shm_ctl *c);
void pti_shm_write_end(pti_shm_ctl *c, int64_t ver);

// pti_shm_read copies src[0..n) (in the segment of c) to dst as they
// were between two changes, with *ver the version they are of. 0, or
// PT_ECLOSED when a change stays under way and owner (the segment's
// maker's pidfd, -1: not known) has ended, or PT_ETIMEDOUT when it stayed
// under way timeout_s seconds (a server that died changing values leaves
// seq odd for good).
int pti_shm_read(const pti_shm_ctl *c, float *dst, const float *src,
    uint64_t n, double timeout_s, int owner, int64_t *ver);

// A worker's box (common/shm.c): a segment it makes at each handshake
// and hands over with its own, which the server maps read-write: each of
// its slots carries one request of the worker's, written whole with
// state REQ, and the server's reply in its place with state REP, and a
// futex wakes whoever waits, instead of the ipc socket's threads (a
// step's headers of --transport shm go this way; PROTOCOL.md "Shared
// memory"). The worker rings bell (adds one and wakes it) after each
// request; the server's thread for the box waits on it, and serves the
// slots rung in the order of their seq. A request is HELD once the
// server has handled it under its lock (its reply may wait): a worker
// sends on the socket only once its requests in the box are, so that a
// server sees a worker's requests in the order they were made. Neither
// side trusts what the other wrote: a length beyond PTI_BOX_MSG is
// refused, a message is copied out of the slot before it is decoded.
#define PTI_BOX_SLOTS 16 // requests under way at once: PS_PARK_MAX
#define PTI_BOX_MSG 1012 // bytes of one message, at most
enum { PTI_BOX_FREE, PTI_BOX_REQ, PTI_BOX_TAKEN, PTI_BOX_HELD, PTI_BOX_REP,
	PTI_BOX_GONE };  // GONE: given up by the worker (its wait failed)
typedef struct pti_box_slot {
	_Atomic uint32_t state;
	_Atomic uint32_t len; // bytes of msg
	uint32_t seq;         // the worker's count of the requests it rang
	uint8_t msg[PTI_BOX_MSG];
} pti_box_slot;
typedef struct pti_box {
	_Atomic uint32_t bell;
	uint8_t pad[60];
	pti_box_slot slot[PTI_BOX_SLOTS];
} pti_box;

// pti_box_wait sleeps while *w is v, timeout_s seconds at most (woken by
// pti_box_wake on the same word, in either process, or at once when *w
// is not v); pti_box_wake wakes every sleeper on w.
void pti_box_wait(_Atomic uint32_t *w, uint32_t v, double timeout_s);
void pti_box_wake(_Atomic uint32_t *w);

// pti_shm_path is the handshake socket's path for an ipc:// address
// (its path with ".shm"). PT_EINVAL when url is not ipc:// or the path
// is too long for a unix socket.
int pti_shm_path(const char *url, char *out, size_t n);

// pti_shm_listen listens on path (replacing a socket file left there).
// PT_EIO naming it.
int pti_shm_listen(const char *path, int *fd);

// pti_shm_offer is the worker's side: on path, prove the secret as
// worker `rank` to server `server`, hand it `mine` (the whole model's
// values) and `box` (NULL: no box, the headers go over the ipc socket)
// and map the server's segment into *theirs (p its shard's first value),
// with the shard [*lo, *hi) it holds. PT_EAUTH
// when the server's proof fails, PT_ECLOSED or PT_ETIMEDOUT when it does
// not answer, PT_EPROTO for an answer not in the protocol.
int pti_shm_offer(const char *path, const pti_secret *key, uint32_t rank,
    uint32_t server, const pti_shm_seg *mine, const pti_shm_seg *box,
    double timeout_s, pti_shm_seg *theirs, uint64_t *lo, uint64_t *hi);

// pti_shm_keep_fn takes worker rank's mapped segment *g, and its box
// *box mapped read-write (none when it handed over no box), for its own
// (both then none) before the worker hears the handshake is done, so that
// the worker's first request through it finds it kept; 0, or an error
// that refuses the handshake (*g is then unmapped by the caller).
typedef int (*pti_shm_keep_fn)(void *arg, uint32_t rank, pti_shm_seg *g,
    pti_shm_seg *box);

// pti_shm_take is the server's side on an accepted connection cfd
// (closed here): check the worker's proof (rank below workers), map the
// window of its segment that holds the shard [lo, hi) (sealed, at least
// 4 hi bytes; p is element lo), give it to keep, then answer with `mine`
// and the shard. A box handed over must be sizeof(pti_box) long. *rank
// is the worker's. PT_EAUTH, PT_EPROTO or PT_ETIMEDOUT naming what was
// wrong, or keep's error.
int pti_shm_take(int cfd, const pti_secret *key, uint32_t server,
    uint32_t workers, const pti_shm_seg *mine, uint64_t lo, uint64_t hi,
    double timeout_s, pti_shm_keep_fn keep, void *arg, uint32_t *rank);

#endif // PT_COMMON_SHM_H
