// ps/shmsrv.c - the server's shared-memory handshakes (shmsrv.h).
#include "ps/shmsrv.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <string.h>
#include <unistd.h>

#include <sys/socket.h>

#include "common/err.h"

// shm_keep makes g worker rank's segment, and box its box
// (pti_shm_keep_fn), before the worker hears the handshake is done; the
// segment it replaces stays mapped (a gradient held for the open step
// may point into it) until the server ends.
static int shm_keep(void *arg, uint32_t rank, pti_shm_seg *g,
    pti_shm_seg *box)
{
	ps_server *s = arg;
	int rv = box->p != NULL ? pti_box_start(s, rank, box) : 0;
	if (rv != 0)
		return rv;
	pthread_mutex_lock(&s->mu);
	rv = pti_shm_seg_replace(&s->shm_of[rank], g, &s->shm_old,
	    &s->n_shm_old);
	pthread_mutex_unlock(&s->mu);
	if (rv == 0)
		pti_log(PT_LOG_INFO, "server %u: worker %u's pushes are read "
		    "in shared memory", s->rank, rank);
	return rv;
}

static void *shm_serve(void *arg)
{
	ps_shmsrv *t = arg;
	ps_server *s = t->s;
	double timeout = s->job->auth_timeout > 0 ? s->job->auth_timeout : 10;
	for (;;) {
		struct pollfd pf[2] = {{t->fd, POLLIN, 0}, {t->stop[0], POLLIN,
		    0}};
		if (poll(pf, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (pf[1].revents != 0)
			break; // stopped
		int c = accept4(t->fd, NULL, NULL, SOCK_CLOEXEC);
		if (c < 0)
			continue;
		uint32_t rank;
		int rv = pti_shm_take(c, &s->secret, s->rank, s->job->workers,
		    &s->shm_mine, s->lo, s->hi, timeout, shm_keep, s, &rank);
		if (rv != 0)
			pti_log(PT_LOG_WARN, "server %u: %s", s->rank,
			    pt_errmsg(rv));
	}
	return NULL;
}

int pti_shmsrv_start(ps_shmsrv *t, ps_server *s, const char *url)
{
	int rv;
	memset(t, 0, sizeof(*t));
	t->s = s;
	t->fd = -1;
	t->stop[0] = t->stop[1] = -1;
	if ((rv = pti_shm_path(url, t->path, sizeof(t->path))) != 0 ||
	    (rv = pti_shm_listen(t->path, &t->fd)) != 0)
		return rv;
	if (pipe2(t->stop, O_CLOEXEC) != 0 ||
	    pthread_create(&t->thread, NULL, shm_serve, t) != 0) {
		rv = pti_err_set(PT_EIO, "server %u: shared memory's thread: %s",
		    s->rank, strerror(errno));
		pti_shmsrv_stop(t);
		return rv;
	}
	t->running = 1;
	return 0;
}

void pti_shmsrv_stop(ps_shmsrv *t)
{
	if (t->running) {
		close(t->stop[1]);
		t->stop[1] = -1;
		pthread_join(t->thread, NULL);
		t->running = 0;
	}
	for (int i = 0; i < 2; i++)
		if (t->stop[i] >= 0)
			close(t->stop[i]);
	t->stop[0] = t->stop[1] = -1;
	if (t->fd >= 0) {
		close(t->fd);
		unlink(t->path);
	}
	t->fd = -1;
}
