// common/mode.h - what each consistency mode means to both sides, in one
// table: the servers' policies (ps/policy.h) carry out the rules, and the
// client and the trainer read here how to talk to them, rather than
// testing for a mode by name.
#ifndef PT_COMMON_MODE_H
#define PT_COMMON_MODE_H

#include "common/proto.h" // PT_MODE_*

typedef struct pti_mode {
	const char *name; // "sync", "async", "ssp", "allreduce" or "hybrid"
	// lockstep (sync): the servers' version is the open step, and moves
	// once every live worker's gradient for it is in. A pushpull's reply
	// carries the next step's values (a pushpull over part of a shard
	// is a push, then a pull that waits for the next version); a pull
	// may wait for the next version; a reply whose step closed has
	// certainly been sent; a worker goes on from the servers' version
	// (a late one skips to it, a rejoining one takes the lowest open
	// step).
	int lockstep;
	// clocked (async, ssp): each gradient is applied as it comes and
	// counts one step of its worker's clock; the learning-rate rule's
	// --matched-lr and --staleness-lr apply. A worker goes on from its
	// clock.
	int clocked;
	// answered_at_once (async): nothing is ever parked, so a request
	// sent has been answered once the server has moved on at all.
	int answered_at_once;
	int servers; // 0 (allreduce): the workers hold the model themselves
	// rows_lockstep (sync): an embedding table's step closes once every
	// live worker's rows are in; otherwise each worker's rows are
	// applied as they come (hybrid: Persia's, with the variables sync).
	int rows_lockstep;
} pti_mode;

// pti_mode_of returns the traits of mode (PT_MODE_*), or NULL for none.
const pti_mode *pti_mode_of(int mode);

#endif // PT_COMMON_MODE_H
