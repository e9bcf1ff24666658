// cli/run/tee.c - the launcher's copy of its children's output (see tee.h).
#include "cli/run/tee.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/err.h"

#define TEE_READ 65536 // bytes read from a pipe at once

typedef struct tee_slot {
	int in;  // the pipe's read end, -1 once its output ended
	int log; // the log file, -1 once closed
	int err; // the first failed write to the log, or 0
	unsigned long long lost; // bytes that never reached the log
	size_t len;
	char tail[PTI_TEE_TAIL];
} tee_slot;

struct pti_tee {
	pthread_t thread;
	pthread_mutex_t mu;
	pthread_cond_t ended; // a slot's output ended
	int wake[2];          // a byte written here makes the thread look again
	int stop;
	unsigned n, cap;
	tee_slot *slot;
};

// tee_keep appends b (n bytes) to s's log and its tail. Under mu.
static void tee_keep(tee_slot *s, const char *b, size_t n)
{
	size_t done = 0;
	while (done < n && s->err == 0) {
		ssize_t w = write(s->log, b + done, n - done);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			s->err = w < 0 ? errno : EIO;
			break;
		}
		done += (size_t)w;
	}
	s->lost += n - done;
	if (n >= PTI_TEE_TAIL) {
		memcpy(s->tail, b + n - PTI_TEE_TAIL, PTI_TEE_TAIL);
		s->len = PTI_TEE_TAIL;
		return;
	}
	if (s->len + n > PTI_TEE_TAIL) {
		size_t drop = s->len + n - PTI_TEE_TAIL;
		memmove(s->tail, s->tail + drop, s->len - drop);
		s->len -= drop;
	}
	memcpy(s->tail + s->len, b, n);
	s->len += n;
}

// tee_end closes s once its output has ended. Under mu.
static void tee_end(pti_tee *t, tee_slot *s)
{
	close(s->in);
	s->in = -1;
	if (s->log >= 0 && close(s->log) != 0 && s->err == 0)
		s->err = errno; // a full disk may only show here (NFS)
	s->log = -1;
	pthread_cond_broadcast(&t->ended);
}

static void *tee_main(void *arg)
{
	pti_tee *t = arg;
	struct pollfd *pfd = calloc(t->cap + 1, sizeof(*pfd));
	unsigned *which = calloc(t->cap + 1, sizeof(*which));
	char *buf = malloc(TEE_READ);
	if (pfd == NULL || which == NULL || buf == NULL) {
		free(pfd);
		free(which);
		free(buf);
		return NULL;
	}
	for (;;) {
		nfds_t n = 1;
		pfd[0] = (struct pollfd){.fd = t->wake[0], .events = POLLIN};
		pthread_mutex_lock(&t->mu);
		int stop = t->stop;
		for (unsigned i = 0; i < t->n; i++)
			if (t->slot[i].in >= 0) {
				pfd[n] = (struct pollfd){.fd = t->slot[i].in,
				    .events = POLLIN};
				which[n++] = i;
			}
		pthread_mutex_unlock(&t->mu);
		if (stop)
			break;
		if (poll(pfd, n, -1) < 0 && errno != EINTR)
			break;
		if (pfd[0].revents & POLLIN)
			while (read(t->wake[0], buf, TEE_READ) > 0)
				;
		for (nfds_t k = 1; k < n; k++) {
			if (pfd[k].revents == 0)
				continue;
			ssize_t r = read(pfd[k].fd, buf, TEE_READ);
			if (r < 0 && (errno == EINTR || errno == EAGAIN))
				continue;
			pthread_mutex_lock(&t->mu);
			tee_slot *s = &t->slot[which[k]];
			if (r > 0)
				tee_keep(s, buf, (size_t)r);
			else
				tee_end(t, s);
			pthread_mutex_unlock(&t->mu);
		}
	}
	free(pfd);
	free(which);
	free(buf);
	return NULL;
}

int pti_tee_open(pti_tee **tp, unsigned slots)
{
	pti_tee *t = calloc(1, sizeof(*t));
	if (t == NULL || (t->slot = calloc(slots, sizeof(tee_slot))) == NULL) {
		free(t);
		return pti_err_set(PT_ENOMEM, "output of %u processes", slots);
	}
	t->cap = slots;
	if (pipe2(t->wake, O_CLOEXEC | O_NONBLOCK) != 0) {
		int e = errno;
		free(t->slot);
		free(t);
		return pti_err_set(PT_EIO, "pipe: %s", strerror(e));
	}
	pthread_mutex_init(&t->mu, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&t->ended, &ca);
	pthread_condattr_destroy(&ca);
	if (pthread_create(&t->thread, NULL, tee_main, t) != 0) {
		close(t->wake[0]);
		close(t->wake[1]);
		free(t->slot);
		free(t);
		return pti_err_set(PT_EIO, "cannot start a thread");
	}
	*tp = t;
	return 0;
}

int pti_tee_add(pti_tee *t, int log_fd, int *child_fd)
{
	int p[2];
	if (t->n == t->cap) {
		pti_err_set(PT_EINVAL, "more than %u processes", t->cap);
		errno = EINVAL;
		return -1;
	}
	if (pipe2(p, O_CLOEXEC) != 0) {
		int e = errno;
		pti_err_set(PT_EIO, "pipe: %s", strerror(e));
		errno = e;
		return -1;
	}
	pthread_mutex_lock(&t->mu);
	int slot = (int)t->n++;
	tee_slot *s = &t->slot[slot];
	memset(s, 0, sizeof(*s));
	s->in = p[0];
	s->log = log_fd;
	pthread_mutex_unlock(&t->mu);
	(void)!write(t->wake[1], "", 1);
	*child_fd = p[1];
	return slot;
}

static double tee_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

// tee_wait waits until slot's output has ended or `until` (monotonic
// seconds) has passed. Under mu.
static void tee_wait(pti_tee *t, const tee_slot *s, double until)
{
	while (s->in >= 0) {
		if (tee_now() >= until)
			return;
		struct timespec ts;
		ts.tv_sec = (time_t)until;
		ts.tv_nsec = (long)((until - (double)ts.tv_sec) * 1e9);
		pthread_cond_timedwait(&t->ended, &t->mu, &ts);
	}
}

int pti_tee_tail(pti_tee *t, int slot, double wait_s, unsigned lines,
    char *buf, size_t n, unsigned long long *lost)
{
	buf[0] = '\0';
	*lost = 0;
	if (t == NULL || slot < 0 || (unsigned)slot >= t->n)
		return 0;
	pthread_mutex_lock(&t->mu);
	tee_slot *s = &t->slot[slot];
	tee_wait(t, s, tee_now() + wait_s);
	// The last `lines` lines: back from the end, past a final newline.
	size_t from = s->len;
	unsigned seen = 0;
	if (from > 0 && s->tail[from - 1] == '\n')
		from--;
	while (from > 0 && !(s->tail[from - 1] == '\n' && ++seen == lines))
		from--;
	size_t len = s->len - from;
	if (len >= n) {
		from += len - (n - 1);
		len = n - 1;
	}
	memcpy(buf, s->tail + from, len);
	buf[len] = '\0';
	int err = s->err;
	*lost = s->lost;
	pthread_mutex_unlock(&t->mu);
	return err;
}

void pti_tee_close(pti_tee *t, double wait_s)
{
	if (t == NULL)
		return;
	double until = tee_now() + wait_s;
	pthread_mutex_lock(&t->mu);
	for (unsigned i = 0; i < t->n; i++)
		tee_wait(t, &t->slot[i], until);
	t->stop = 1;
	pthread_mutex_unlock(&t->mu);
	(void)!write(t->wake[1], "", 1);
	pthread_join(t->thread, NULL);
	for (unsigned i = 0; i < t->n; i++)
		if (t->slot[i].in >= 0) {
			// Whatever is left in the pipe (a child still running
			// after wait_s), then the pipe itself.
			char b[4096];
			ssize_t r;
			fcntl(t->slot[i].in, F_SETFL, O_NONBLOCK);
			while ((r = read(t->slot[i].in, b, sizeof(b))) > 0)
				tee_keep(&t->slot[i], b, (size_t)r);
			tee_end(t, &t->slot[i]);
		}
	close(t->wake[0]);
	close(t->wake[1]);
	pthread_cond_destroy(&t->ended);
	pthread_mutex_destroy(&t->mu);
	free(t->slot);
	free(t);
}
