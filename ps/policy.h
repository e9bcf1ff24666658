// ps/policy.h - the consistency policies (sync, async, ssp) as ops
// tables, in the spirit of nng's protocols: the server allocates each
// policy's state (size, zeroed) at s->pol, init and fini build and free
// it, and every operation runs under the server lock and returns what it
// did in a ps_take; the server (shard.c, pti_server_act) then counts the
// update, moves the version and clocks, writes a checkpoint when due and
// wakes what waited. A policy calls down only: pieces.c, the optimizer,
// the learning-rate rule and pti_server_spare (reply.c).
#ifndef PT_PS_POLICY_H
#define PT_PS_POLICY_H

#include <stddef.h>
#include <stdint.h>

#include "ps/server_impl.h"

// ps_take: what a policy did with one gradient (take) or with a lost
// worker (settle).
struct ps_take {
	// For the push's reply:
	double lr;     // learning rate applied (sync: that the step will use)
	int64_t stale; // its staleness
	int dropped;   // a rule dropped it (counted, not an error)
	int ahead;     // sync: its range holds the next version already
	// For the server to act on, in this order:
	struct {
		nng_msg *m; // NULL, or a request that holds at pay the
		float *pay; // shard's [off, off + n) of version ver, to
		uint64_t off, n; // carry their reply without a copy
		int64_t ver;
	} fill;
	int ready;        // ranges of the open step were applied ahead
	int applied;      // one update was applied, of staleness `stale`
	int moved;        // the step closed: the version moved
	int64_t clock_to; // >= 0: the pushing worker's clock moves there
	int clocks;       // the slowest clock may have moved
};

struct ps_policy {
	const char *name;
	size_t size; // bytes of its state, at s->pol
	// init builds the state (zeroed) for the server's shard and
	// workers; fini frees it, also a half-built one.
	int (*init)(ps_server *s);
	void (*fini)(ps_server *s);
	// take files or applies a worker's gradient for [off, off + n) of
	// the shard, already checked for range, bounds and finiteness.
	// Returns 0, or an error with a detail (the request changes nothing).
	int (*take)(ps_server *s, const pti_hdr *h, const void *pay,
	    uint64_t off, uint64_t n, ps_take *t);
	// reply_after: the key a pushpull's reply must wait for (parked
	// until key() reaches it), or -1 to answer at once.
	int64_t (*reply_after)(const ps_server *s, const pti_hdr *h,
	    const ps_take *t);
	// key: what parked requests are compared with (version or clock).
	int64_t (*key)(const ps_server *s);
	// waits_for: whether the job waits for worker r now (its silence
	// past --worker-timeout then makes it lost).
	int (*waits_for)(const ps_server *s, uint32_t r);
	// start: the step worker r goes on from, told in the hello reply.
	int64_t (*start)(const ps_server *s, uint32_t r);
	// settle: the set of live workers changed; close what no longer
	// waits for the lost.
	void (*settle)(ps_server *s, ps_take *t);
	// sealed closes worker r's last step to further pieces of its
	// gradient (after its hello, and at start).
	void (*sealed)(ps_server *s, uint32_t r);
	// ahead: whether the shard's [off, off + n) holds the next version's
	// values already (sync: applied ahead of the open step's close), so
	// that a pushpull or a pull waiting for that version may be answered
	// now.
	int (*ahead)(const ps_server *s, uint64_t off, uint64_t n);
	// clocks recomputes the slowest clock over the live workers; 1 when
	// parked requests wait on it (then woken).
	int (*clocks)(ps_server *s);
	int pull_waits; // a pull may wait for the next version
	// keeps: a gradient is read again after the request that brought
	// it (summed at its step's close), so the checks on its values let
	// go of its pages in shared memory as they read them (bound.c);
	// without, the update that follows at once does.
	int keeps;
};

extern const ps_policy pti_policy_sync;  // sync.c
extern const ps_policy pti_policy_async; // clock.c
extern const ps_policy pti_policy_ssp;   // clock.c

// pti_policy_of returns the rules of mode (PT_MODE_*), never NULL for a
// mode the config accepts.
const ps_policy *pti_policy_of(int mode);

#endif // PT_PS_POLICY_H
