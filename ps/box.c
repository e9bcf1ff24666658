// ps/box.c - workers' boxes (server_impl.h, common/shm.h's pti_box): a
// step's headers of --transport shm without the ipc socket. A thread per
// box sleeps on its bell; a request in a slot is copied out into a
// message of the worker's connection and handled as one that came on it,
// on the slot's own context, so that parking, waking and refusing work
// as for any other; its reply is written back into the slot.
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "ps/server_impl.h"

struct ps_box {
	ps_server *s;
	uint32_t rank;    // the worker's
	pti_shm_seg seg;  // mapped read-write
	pti_box *b;       // in seg
	ps_ctx x[PTI_BOX_SLOTS];
	// a slot's request is being served: taken until its reply is
	// written. What the worker writes in the slot meanwhile is ignored.
	_Atomic int busy[PTI_BOX_SLOTS];
	_Atomic int stop;
	pthread_t thread;
	int running;
	ps_box *next; // the server's boxes
};

// box_reply is a box context's send (server_impl.h's ps_ctx): the reply
// into its slot, and the worker woken; none (m NULL) leaves the slot
// taken, as a reply dropped on the socket is never seen.
static void box_reply(ps_ctx *x, nng_msg *m)
{
	ps_box *bx = x->box;
	pti_box_slot *sl = &bx->b->slot[x->slot];
	if (m != NULL && pti_server_drop_due(bx->rank)) {
		nng_msg_free(m);
		m = NULL;
	}
	if (m == NULL) { // nobody reads it: the slot stays taken
		x->state = CTX_RECV;
		atomic_store(&bx->busy[x->slot], 0);
		return;
	}
	size_t len = nng_msg_len(m);
	if (len <= PTI_BOX_MSG)
		memcpy(sl->msg, nng_msg_body(m), len);
	else
		len = UINT32_MAX; // cannot happen: the worker says EPROTO
	nng_msg_free(m);
	x->state = CTX_RECV;
	atomic_store(&bx->busy[x->slot], 0);
	atomic_store_explicit(&sl->len, (uint32_t)len, memory_order_relaxed);
	atomic_store_explicit(&sl->state, PTI_BOX_REP, memory_order_release);
	pti_box_wake(&sl->state);
}

// box_take serves slot i's request, if it holds one: handled under the
// lock, it is HELD (the worker may then send on the socket).
static void box_take(ps_box *bx, uint32_t i)
{
	ps_server *s = bx->s;
	pti_box_slot *sl = &bx->b->slot[i];
	ps_ctx *x = &bx->x[i];
	uint32_t want = PTI_BOX_REQ;
	nng_msg *m;
	if (atomic_load(&bx->busy[i]) ||
	    !atomic_compare_exchange_strong_explicit(&sl->state, &want,
		PTI_BOX_TAKEN, memory_order_acquire, memory_order_relaxed))
		return;
	uint32_t len = atomic_load_explicit(&sl->len, memory_order_relaxed);
	if (len > PTI_BOX_MSG)
		len = 0; // refused as malformed by the decoder
	if (nng_msg_alloc(&m, len) != 0)
		return; // no memory: dropped, as the socket's would be
	memcpy(nng_msg_body(m), sl->msg, len);
	atomic_store(&bx->busy[i], 1);
	ps_ctx *wake = NULL;
	pthread_mutex_lock(&s->mu);
	// As if it came on the worker's connection: none (0) when it has
	// none, and the request is refused.
	nng_pipe p = NNG_PIPE_INITIALIZER;
	p.id = s->m[bx->rank].pipe;
	nng_msg_set_pipe(m, p);
	s->box_requests++;
	nng_msg *reply = pti_server_handle(s, x, m, &wake);
	int parked = reply == NULL && x->state == CTX_WAIT;
	want = PTI_BOX_TAKEN; // not when its reply went in already
	if (atomic_compare_exchange_strong(&sl->state, &want, PTI_BOX_HELD))
		pti_box_wake(&sl->state);
	pthread_mutex_unlock(&s->mu);
	if (!parked)
		box_reply(x, reply);
	pti_server_send_woken(wake);
}

// box_rung lists the slots rung (REQ) in *at, in the order of their seq
// (a count that wraps), and returns how many.
static uint32_t box_rung(const ps_box *bx, uint32_t at[PTI_BOX_SLOTS])
{
	uint32_t k = 0;
	for (uint32_t i = 0; i < PTI_BOX_SLOTS; i++) {
		const pti_box_slot *sl = &bx->b->slot[i];
		if (atomic_load_explicit(&sl->state, memory_order_acquire) !=
		    PTI_BOX_REQ)
			continue;
		uint32_t j = k++;
		for (; j > 0 && (int32_t)(bx->b->slot[at[j - 1]].seq -
					  sl->seq) > 0; j--)
			at[j] = at[j - 1];
		at[j] = i;
	}
	return k;
}

static void *box_main(void *arg)
{
	ps_box *bx = arg;
	uint32_t at[PTI_BOX_SLOTS];
	while (!atomic_load(&bx->stop)) {
		uint32_t bell = atomic_load_explicit(&bx->b->bell,
		    memory_order_acquire);
		for (uint32_t i = 0, k = box_rung(bx, at); i < k; i++)
			box_take(bx, at[i]);
		if (!atomic_load(&bx->stop))
			pti_box_wait(&bx->b->bell, bell, 1.0);
	}
	return NULL;
}

static void box_stop(ps_box *bx)
{
	if (bx == NULL || !bx->running)
		return;
	atomic_store(&bx->stop, 1);
	atomic_fetch_add(&bx->b->bell, 1);
	pti_box_wake(&bx->b->bell);
	pthread_join(bx->thread, NULL);
	bx->running = 0;
}

int pti_box_start(ps_server *s, uint32_t rank, pti_shm_seg *seg)
{
	ps_box *bx = calloc(1, sizeof(*bx));
	int rv = 0;
	if (bx == NULL) {
		pti_shm_seg_fini(seg);
		return pti_err_set(PT_ENOMEM, "server %u: worker %u's box",
		    s->rank, rank);
	}
	bx->s = s;
	bx->rank = rank;
	bx->seg = *seg;
	*seg = PTI_SHM_SEG_NONE;
	bx->b = (pti_box *)bx->seg.p;
	for (uint32_t i = 0; i < PTI_BOX_SLOTS && rv == 0; i++) {
		bx->x[i].s = s;
		bx->x[i].box = bx;
		bx->x[i].slot = i;
		bx->x[i].state = CTX_RECV;
		bx->x[i].send = box_reply;
		if (nng_aio_alloc(&bx->x[i].aio, NULL, NULL) != 0)
			rv = PT_ENOMEM;
	}
	if (rv == 0 && pthread_create(&bx->thread, NULL, box_main, bx) != 0)
		rv = PT_EIO;
	bx->running = rv == 0;
	pthread_mutex_lock(&s->mu);
	bx->next = s->boxes; // freed with the server, however far it got
	s->boxes = bx;
	ps_box *old = NULL;
	if (rv == 0) {
		old = s->box_of[rank];
		s->box_of[rank] = bx;
	}
	pthread_mutex_unlock(&s->mu);
	// The replaced box's requests still parked are answered into it
	// (nobody reads them): only its thread ends.
	box_stop(old);
	if (rv != 0)
		return pti_err_set(rv, "server %u: worker %u's box: no %s",
		    s->rank, rank, rv == PT_ENOMEM ? "memory" : "thread");
	return 0;
}

void pti_box_stop_all(ps_server *s)
{
	for (ps_box *bx = s->boxes; bx != NULL; bx = bx->next)
		box_stop(bx);
}

void pti_box_free_all(ps_server *s)
{
	ps_box *bx = s->boxes;
	while (bx != NULL) {
		ps_box *next = bx->next;
		box_stop(bx);
		for (uint32_t i = 0; i < PTI_BOX_SLOTS; i++)
			if (bx->x[i].aio != NULL) {
				nng_msg_free(nng_aio_get_msg(bx->x[i].aio));
				nng_aio_free(bx->x[i].aio);
			}
		pti_shm_seg_fini(&bx->seg);
		free(bx);
		bx = next;
	}
	s->boxes = NULL;
}
