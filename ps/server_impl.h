// ps/server_impl.h - what the server's own files share (server.c: the
// transport and serving loop; ops.c: the request handlers; shard.c: the
// shard's life and membership, and the shell that acts on what a policy
// did; policy.h: the consistency rules, sync.c and clock.c; peers.c:
// connections; reply.c: replies and the wait list; bound.c: the
// gradient norm bound). Not for anything
// outside ps/.
#ifndef PT_PS_SERVER_IMPL_H
#define PT_PS_SERVER_IMPL_H

#include <pthread.h>
#include <stdint.h>
#include <sys/resource.h>

#include <nng/nng.h>

#include "common/auth.h"
#include "common/checkpoint.h"
#include "common/config.h"
#include "common/layout.h"
#include "common/optim.h"
#include "common/proto.h"
#include "common/shm.h"
#include "ps/server.h"

#define PS_CONTROL_MAX 8 // authenticated control connections at once
#define PS_SCAN_MAX 8192 // kernel connections a scan looks at
#define PS_SCAN_S 1.0    // seconds between scans
// The largest step or version a push may carry: far beyond any job (a
// million steps a second for 30 years), far below where step + 1 or a
// difference of two steps could overflow.
#define PS_STEP_MAX ((int64_t)1 << 50)

typedef struct ps_server ps_server;

// The gradient norm bound (bound.c): pushes of a range whose median
// gradient RMS it is taken over, and ranges with a window of their own.
#define PS_BOUND_WINDOW 32
#define PS_BOUND_SLOTS 512
#define PS_BOUND_FLOOR 1e-4 // the median's floor: an RMS of K x 1e-4 passes
typedef struct ps_bound ps_bound;

// Floats summed and applied at a time: a chunk of the sum of a sync step's
// gradients stays in the first level of cache while the update reads it.
#define PS_CHUNK 2048
// Floats of the workers' segments a pass reads before the server lets
// go of their pages (pieces.h, pti_shard_let_go): 1 MiB. Up to
// PS_KEEP_WORKERS workers it lets go of none: their gradients fit in
// that many shards, and pages read again cost faults (5% of a step of
// mlp:2048,2048's sync 2 x 2, measured).
#define PS_LET_GO (1u << 18)
#define PS_KEEP_WORKERS 2

// Requests one connection may have parked at once (a sync worker's
// pushpulls of a step's pieces, each waiting for its range): the server
// keeps that many contexts per worker, so that parked requests never
// stop it receiving the pieces that would answer them.
#define PS_PARK_MAX 16
#define PS_N_CTX(workers) ((workers) * PS_PARK_MAX + 8)

// Pieces of one worker's sync gradient kept in their requests at once;
// past that its pieces go to its row of gradients (sync.c).
#define PS_HELD_PIECES PS_PARK_MAX

// ps_piece: a piece of a worker's gradient for the open sync step, kept
// in the request it came in, as a whole gradient is.
typedef struct ps_piece {
	uint64_t off, n; // the shard's [off, off + n)
	nng_msg *m;      // the request, the server's
	const float *g;  // (n) its values, in m
} ps_piece;

// Updates after which a server's steady state is taken to begin.
#define PS_STEADY_FROM 20
typedef struct ps_ctx ps_ctx;
typedef struct ps_box ps_box;
typedef struct ps_policy ps_policy;
typedef struct ps_take ps_take;

enum { CTX_RECV, CTX_SEND, CTX_WAIT };

// ps_peer: one connection (nng pipe) and what it has proven. A request is
// served only on a connection authenticated for the role and rank it
// claims; the binding is made by hello and undone when the connection
// closes or another one proves the same rank.
typedef struct ps_peer {
	uint32_t pipe;       // nng pipe id; 0: a free slot
	int authed;
	uint32_t role, rank; // what it proved
	int challenged;
	uint8_t nonce[PT_NONCE_LEN];
	double since;        // when it connected
	uint64_t requests;   // complete requests received
	char name[80];       // the peer's address, for logs
	nng_sockaddr addr;   // the peer's address (tcp, tls), to match the
			     // kernel's connections with (sockwatch.h)
} ps_peer;

struct ps_ctx {
	ps_server *s;
	nng_ctx ctx;      // none for a box's (box.c)
	nng_aio *aio;     // holds the reply; a box's never goes to nng
	ps_box *box;      // the worker's box whose slot it serves, or NULL
	uint32_t slot;
	// send sends its reply m, or with m NULL none (it receives again):
	// over nng (server.c) or into its box's slot (box.c). Any thread,
	// unlocked.
	void (*send)(ps_ctx *x, nng_msg *m);
	int state;
	int stop_after; // signal the main thread once this reply is sent
	// while parked on the wait list:
	int64_t wait_ver; // sync: the version; ssp: the slowest worker's clock
	uint64_t r_off, r_n; // reply range, relative to the shard
	uint32_t r_pipe;     // the connection it came on
	uint32_t r_op;
	int r_shm;           // the request's values in shared memory: so
			     // are the reply's (PTI_H_SHM)
	double r_lr;      // learning rate applied to the parked push
	int64_t r_stale;  // its staleness
	uint32_t r_table;  // rows: the table
	nng_msg *r_keep;   // rows: the request, held by its table's step
	struct ps_ctx *next; // wait list, then wake list
};

// ps_member: what the server knows of one worker.
typedef struct ps_member {
	uint8_t hello; // it said hello
	uint8_t done;  // it said done
	uint8_t lost;  // said hello, then died or went silent
	uint8_t gone;  // said done, then closed before shutdown
	uint32_t pipe; // the nng pipe id its rank is bound to
	double seen;   // when it was last heard from
	int64_t clock; // async, ssp: the steps it has pushed
} ps_member;

// ps_table: one embedding table's rows on this server (tables.c).
typedef struct ps_table {
	struct pti_rows *rows;
	int64_t ver;    // sync: steps closed; else requests applied
	nng_msg **held; // (workers) sync: each worker's part of the open step
	uint32_t n_in;  // parts held
	uint64_t pushed, pulled;     // rows moved
	uint64_t stale_sum, stale_max; // row staleness of the rows pushed
	uint64_t stale_n;              // the pushed rows it was counted for
} ps_table;

struct ps_server {
	const pti_jobopt *job;    // the job's options
	uint32_t rank;            // this server's
	int supervised;           // under pstrain run, which stops it
	const char *gone_workers; // "R,R,...": lost before it started
	const ps_policy *policy; // the consistency rules of job->mode
	void *pol;               // (policy->size) the policy's state
	pti_layout layout;
	uint64_t lo, hi, n; // shard [lo, hi) of the flat vector, n = hi - lo
	float *params;      // (n): in shm_mine with --transport shm
	// --transport shm (common/shm.h, ps/shmsrv.c): the shard's values
	// in a segment the workers map; worker r's pushes read in shm_of[r]
	// (none until its handshake); segments replaced by a later
	// handshake stay mapped until fini (a held gradient may point in).
	pti_shm_seg shm_mine;
	pti_shm_ctl *shm_ctl; // its block: seq odd while values change
	int shm_writing;      // seq is odd (pti_shard_apply): publish
	pti_shm_seg *shm_of;  // (workers)
	pti_shm_seg *shm_old; // (n_shm_old) replaced
	uint32_t n_shm_old;
	ps_box **box_of;      // (workers) each worker's box (box.c), or NULL
	ps_box *boxes;        // every box, replaced ones too, until fini
	nng_msg *cur;        // the request being handled; a handler that
			     // keeps it sets this to NULL
	// Requests done with, kept to carry replies with values (a sync
	// step's gradients become the values sent back), so that a step
	// allocates and zero-fills no fresh shard-sized buffer.
	nng_msg **spare;     // (workers + 1)
	uint32_t n_spare;
	// One spare may hold the shard's values [filled_off, +filled_n) of
	// version filled_ver already, at filled_pay: written chunk by chunk
	// as the update went, while each chunk was in cache, so that its
	// reply copies nothing (policy.h, ps_take's fill). NULL when none does.
	nng_msg *filled;
	float *filled_pay;
	uint64_t filled_off, filled_n;
	int64_t filled_ver;
	uint64_t replies_filled; // replies that went out that way
	uint64_t box_requests;   // requests taken from workers' boxes
	uint64_t eager_pieces; // sync: pieces applied ahead of their step's
			       // close, over the job (policy.h, ready)
	ps_member *m;       // (workers) who they are and where they are
	uint32_t n_hello, n_done, n_lost;
	double t_start;     // when the server started (pti_clock_s)
	double alone_since; // since when no worker is left; 0: some are
	int orphaned;       // it stopped for want of workers
	int64_t version;
	int64_t *clocks;   // (workers) the clocks as checkpoints hold them
	int64_t min_clock; // ssp: the slowest worker's clock
	int64_t max_lead;  // async, ssp: the most steps a push was ahead of
			   // the slowest worker's clock
	pti_optim opt;
	float *state1, *state2; // (n) the optimizer's state, or NULL
	ps_table *tables;       // (layout.n_tables) or NULL
	pti_ckpt_sched ckpt; // when checkpoints are due
	int ckpt_pending;    // one is due, and waits for the tables' step
	uint64_t ckpt_failures;  // checkpoint writes that failed
	char ckpt_error[PT_PATH_MAX + 128]; // the last one's error, or ""
	double t0, ready_s; // the job's start; from it to listening
	double private_mb_max; // the largest RssAnon sampled (MiB): memory
			       // of this process's own, shared pages not
			       // counted (pti_server_sample_memory)
	pti_lr_rule lr;    // the learning rate of a gradient
	// counters
	uint64_t updates, rejected, dropped, stale_sum, stale_max;
	uint64_t nonfinite; // pushes refused for a NaN or infinite value
	ps_bound *bound;       // (PS_BOUND_SLOTS) windows, or NULL
	uint64_t grad_refused; // pushes refused over the gradient bound
	double grad_ratio_max; // the largest RMS / median a push had
	uint64_t unauth;    // requests refused: not authenticated (or beyond
			    // the role the connection proved)
	uint64_t auth_failed; // hellos whose proof of the secret was wrong
	uint64_t conn_closed; // connections closed unauthenticated: too many,
			      // idle, or a message over the size limit
	pti_secret secret;
	ps_peer *peers;
	uint32_t n_peers;     // slots
	// Connections that gave way to newer ones, for the serve loop to
	// close (pti_peers_idle): a pipe callback must not close another
	// pipe (under a flood that hangs nng 1.5.2's reaper for good).
	uint32_t *evict, n_evict; // n_peers slots
	// Connections to the listening port nng has made no pipe of (a TLS
	// handshake never begun): found through the kernel, shut down after
	// --auth-timeout (pti_peers_unseen).
	uint16_t port;          // the listening tcp or tls port; 0 (ipc) none
	struct pti_sock *scan;  // (PS_SCAN_MAX) the last scan, or NULL
	double scanned;         // when (pti_clock_s)
	uint64_t rank_refused; // worker hellos for a rank a live connection
			       // holds
	int64_t step_max; // a worker's step, at most (job step_max, or
			  // PS_STEP_MAX)
	uint64_t losses, rejoins; // workers lost (pti_server_lost), and
				  // lost workers that said hello again
	size_t recv_max;      // bytes: the largest legal message of this job
	uint32_t unauth_max;  // connections not yet authenticated, at most
	uint64_t hist[PT_STALE_BUCKETS];
	// The process's resource use once PS_STEADY_FROM updates are done:
	// what the rest of the job adds is its steady state (server-R.json).
	struct rusage ru_steady;

	nng_socket sock;
	ps_ctx *ctxs;
	uint32_t n_ctx;
	ps_ctx *waiting;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int stop;
	int shutting; // a shutdown was asked: the job is over
};


// The server's shell acting on what a policy did (policy.h), under the
// lock. pti_server_act (shard.c), for the request of worker `rank`, in
// this order: marks the request that carries new values (t->fill),
// answers what the ranges applied ahead make answerable (t->ready),
// counts the update, moves the version on and writes a checkpoint when
// one is due (t->applied), wakes what the closed step makes answerable
// (t->moved), moves the worker's clock (t->clock_to) and recomputes the
// slowest clock (t->clocks). pti_server_clocks recomputes the slowest
// clock and wakes what waited for it where the policy waits on clocks.
void pti_server_act(ps_server *s, uint32_t rank, const ps_take *t,
    ps_ctx **wake);
void pti_server_clocks(ps_server *s, ps_ctx **wake);

// The wait list (reply.c): pti_server_wake moves every parked request
// that the policy's key() now allows to *wake, with its reply built;
// pti_server_wake_ahead those whose range holds the version they wait
// for already (policy->ahead).
void pti_server_wake(ps_server *s, ps_ctx **wake);
void pti_server_wake_ahead(ps_server *s, ps_ctx **wake);

// The server's life (shard.c) and its handler (ops.c), for local.c too:
// pti_server_init builds the shard of layout l, its state and the
// connection slots from the job's options and the process's (no
// sockets; both must outlive s), the learning rate ramped over
// job->warmup steps, and the variables' initial values drawn or, where
// given[v] is not NULL (given itself may be), copied from given[v]; pti_server_fini frees what init made and what the
// contexts still hold; pti_server_handle runs one request under the lock
// and returns its reply, or NULL when parked (m is its to free, or to
// keep: a sync gradient stays in its request until the step closes); pti_server_pipe_removed:
// connection id closed (a worker's is then lost).
int pti_server_init(ps_server *s, const pti_jobopt *job,
    const pti_server_proc *p, const pti_layout *l, float *const *given);
void pti_server_fini(ps_server *s);
nng_msg *pti_server_handle(ps_server *s, ps_ctx *x, nng_msg *m,
    ps_ctx **wake);
void pti_server_pipe_removed(ps_server *s, uint32_t id, ps_ctx **wake);

// Workers' boxes (box.c, common/shm.h's pti_box), --transport shm: a
// thread per box takes the requests in its slots, each on the slot's
// context, as if it came on the worker's connection (refused when the
// worker has none), and the reply goes back into the slot.
// pti_box_start makes seg worker rank's box (seg then none), replacing
// (and stopping the thread of) the one before; not under the lock.
// pti_box_stop_all ends every box's thread (before the socket closes:
// a request they take may wake nng's contexts); pti_box_free_all frees
// the boxes, once the socket is closed (a reply of nng's callbacks may
// go into one till then).
int pti_box_start(ps_server *s, uint32_t rank, pti_shm_seg *seg);
void pti_box_stop_all(ps_server *s);
void pti_box_free_all(ps_server *s);

// reply.c: pti_server_send_woken sends the replies of woken requests
// (each context's send), after unlocking; pti_server_drop_due says
// whether the test hook PSTRAIN_TEST_DROP_REPLY=N drops this reply, the
// N-th this server sends, as a reply lost on the way would be
// (tests/mp_test.sh: the worker must notice and rejoin).
void pti_server_send_woken(ps_ctx *wake);
int pti_server_drop_due(uint32_t rank);

// pti_shard_publish: the shard's values, changed under the lock since the
// last call (pieces.c, pti_shard_apply), are whole again, of version
// s->version (--transport shm: the segment's block says so,
// common/shm.h). What may change values calls it before the lock goes:
// pti_server_handle, and the settling after a worker is lost or never
// came (shard.c).
void pti_shard_publish(ps_server *s);

// Membership and output (shard.c), under the lock but the last:
// pti_server_lost: worker r died or went silent (`why`); the job goes on
// without it. pti_server_timeouts: workers silent past --worker-timeout
// while the job waits for them are lost. pti_server_write_stats writes
// job->out/server-R.json.
void pti_server_lost(ps_server *s, uint32_t r, const char *why,
    ps_ctx **wake);
void pti_server_timeouts(ps_server *s, ps_ctx **wake);
// pti_server_ckpt_pending writes the checkpoint that waited for the
// tables, once they have caught up (ops.c, after each request; shard.c,
// after a loss).
void pti_server_ckpt_pending(ps_server *s);
// pti_server_alone: a server not under pstrain run (no --supervised)
// counts a worker that has not arrived --alone-timeout seconds after it
// started as lost, and stops (s->stop, s->orphaned) once no worker is
// connected and every one has finished or been lost: no one else would
// stop it. Called with the lock.
void pti_server_alone(ps_server *s, ps_ctx **wake);
void pti_server_write_stats(const ps_server *s);
// pti_server_sample_memory reads the process's anonymous resident memory
// (/proc/self/status RssAnon: its own, not the shared segments of
// --transport shm it maps) into s->private_mb_max when larger. The serve
// loop calls it about every 0.2 s, and the stats' writer once more.
void pti_server_sample_memory(ps_server *s);
// pti_server_write_tables writes job->out/server-R-tables.json: the
// tables' counters of server-R.json while the job runs (the serve loop,
// every PS_TABLES_S seconds, and at the end), for the dashboard's
// /metrics. Nothing without tables or --out. Under the lock.
#define PS_TABLES_S 2.0
void pti_server_write_tables(const ps_server *s);

// Replies (reply.c): pti_server_reply encodes h (status set)
// with n floats of pay; pti_server_error answers req with code and a
// text naming the server, the op and what was wrong, counted as rejected.
// NULL when out of memory (the peer times out).
nng_msg *pti_server_reply(ps_server *s, pti_hdr *h, const float *pay,
    uint64_t n);
// pti_server_values answers with the shard's values in [off, off + n),
// of version ver (the shard's, or the next one for a range that holds it
// already: policy->ahead); lr >= 0 also reports the learning rate and
// staleness of the push it follows.
// shm: the values stay in the shard's segment, the reply says where
// (the request came with PTI_H_SHM).
nng_msg *pti_server_values(ps_server *s, uint32_t op, uint64_t off,
    uint64_t n, int64_t ver, double lr, int64_t stale, int shm);
// pti_server_spare keeps m, a request done with, to carry a later reply
// (freed when enough are kept already).
void pti_server_spare(ps_server *s, nng_msg *m);
nng_msg *pti_server_error(ps_server *s, const pti_hdr *req, int code,
    const char *what);

// Connections and what they proved (peers.c). All but pti_peer_close,
// pti_peer_name and pti_peers_idle run under the lock.
//
// pti_peer_find: the slot of connection pipe, or NULL.
// pti_peer_add: a slot for a new connection; when the unauthenticated
//   ones are at their limit the oldest gives way, its id queued on
//   s->evict for the serve loop to close. NULL when every slot holds a
//   proven connection, or the queue is full: the caller then refuses
//   the new one (closes it in its own NNG_PIPE_EV_ADD_PRE).
// pti_peer_removed: connection id closed: its slot freed, what it parked
//   released (to *wake, with no message).
// pti_peer_release: takes the requests parked by pipe off the wait list.
// pti_peer_refuse: the reply to a request its connection has not proven
//   the right to make (PT_ESTATE: a hello would mend it; PT_EAUTH: it
//   cannot); counted and logged with the peer, rate-limited.
// pti_op_challenge: the challenge op: a fresh nonce for one hello.
// pti_hello_prove: checks a hello's proof of the secret against the
//   connection's nonce (good once); NULL, or the refusal to send.
// pti_hello_proof: the server's proof of the secret over the hello's
//   nonce, into its reply (mutual authentication).
// pti_hello_bind: binds the proven role and rank to the connection. A
//   worker's rank held by another live connection is refused
//   (PT_ESTATE: the worker tries again until that one closes), logged
//   with both peers and counted.
// pti_peers_idle: closes the connections queued on s->evict, then those
//   that have not proven the secret within --auth-timeout (with any
//   half-sent message). Takes the lock.
// pti_peer_close: closes connection id; never with the lock held.
// pti_peer_name: a connection's peer (address, or pid over ipc) for logs.
// pti_note_due: whether the count-th refusal of a kind is logged (the
//   first ten, then every thousandth).
// pti_role_name: "worker", "control client" or "peer".
ps_peer *pti_peer_find(ps_server *s, uint32_t pipe);
ps_peer *pti_peer_add(ps_server *s, uint32_t pipe);
void pti_peer_removed(ps_server *s, uint32_t id, ps_ctx **wake);
void pti_peer_release(ps_server *s, uint32_t pipe, ps_ctx **wake);
nng_msg *pti_peer_refuse(ps_server *s, const pti_hdr *h, const ps_peer *p,
    int code, const char *why);
nng_msg *pti_op_challenge(ps_server *s, ps_ctx *x, const pti_hdr *h,
    const void *pay, ps_ctx **wake);
nng_msg *pti_hello_prove(ps_server *s, ps_peer *p, const pti_hdr *h);
nng_msg *pti_hello_bind(ps_server *s, ps_peer *p, const pti_hdr *h,
    ps_ctx **wake);
void pti_hello_proof(const ps_server *s, const pti_hdr *h, pti_hdr *r);
void pti_peers_idle(ps_server *s);
void pti_peer_close(uint32_t id);
void pti_peer_name(nng_pipe p, char *buf, size_t size);
int pti_note_due(uint64_t count);
const char *pti_role_name(uint32_t role);

// The embedding tables (tables.c): pti_tables_init makes this server's
// empty stores of the layout's tables (refused with checkpoints, which do
// not hold them yet); pti_tables_fini frees them and the parts they hold;
// pti_tables_settle closes the sync steps that no longer wait for a lost
// worker (whose part leaves them); pti_op_rows is the rows op.
int pti_tables_init(ps_server *s);
void pti_tables_fini(ps_server *s);
// pti_tables_behind: a sync table has not closed the step the variables
// have (a checkpoint waits for it). pti_tables_dump writes every table's
// rows and version to *out (len bytes, malloc'd), for a checkpoint;
// pti_tables_undump restores them into the empty tables of a server
// resuming from version ver (PT_ECORRUPT when they do not fit).
int pti_tables_behind(const ps_server *s);
int pti_tables_dump(const ps_server *s, void **out, uint64_t *len);
int pti_tables_undump(ps_server *s, const void *buf, uint64_t len,
    int64_t ver);
void pti_tables_settle(ps_server *s, ps_ctx **wake);
nng_msg *pti_op_rows(ps_server *s, ps_ctx *x, const pti_hdr *h,
    const void *pay, ps_ctx **wake);

// Parking (reply.c): pti_park puts x on the wait list until the
// policy's key reaches ver, with the reply's op, range, and the learning
// rate and staleness of the push it follows; pti_park_full tells whether
// connection pipe has PS_PARK_MAX requests parked already; pti_park_rows
// parks rows request x until its table tb reaches ver, keeping m (NULL:
// none) to answer from, or PT_ESTATE when its connection has as many
// parked as it may.
void pti_park(ps_server *s, ps_ctx *x, uint32_t op, int64_t ver,
    uint64_t off, uint64_t n, double lr, int64_t stale);
int pti_park_full(const ps_server *s, uint32_t pipe);
int pti_park_rows(ps_server *s, ps_ctx *x, uint32_t tb, int64_t ver,
    nng_msg *m);

// bound.c: pti_push_finite refuses (PT_EINVAL, counted and logged) n
// gradient values at pay with a NaN or an infinity.
int pti_push_finite(ps_server *s, const pti_hdr *h, const void *pay,
    uint64_t n);

// bound.c: pti_push_check refuses a push of worker h->rank (n floats at
// pay, range off of the shard) with a non-finite value (PT_EINVAL), as
// pti_push_finite, or whose gradient is over the job's --grad-bound
// (PT_ERANGE, counted and logged), and else enters it in its range's
// window. One pass, a PS_LET_GO granule at a time, each let go once
// read where the policy keeps gradients (policy.h, keeps; pieces.h,
// pti_shard_let_go). 0 when it may be applied.
int pti_push_check(ps_server *s, const pti_hdr *h, const void *pay,
    uint64_t off, uint64_t n);

#endif // PT_PS_SERVER_IMPL_H
