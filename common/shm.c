// common/shm.c - segments and their handshake (shm.h).
#include "common/shm.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>

#include "common/clock.h"
#include "common/err.h"
#include "common/proto.h"

#define SHM_SEALS (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL)

static size_t page_size(void)
{
	return (size_t)sysconf(_SC_PAGESIZE);
}

int pti_shm_seg_create(pti_shm_seg *g, size_t bytes, size_t skip,
    const char *name)
{
	*g = PTI_SHM_SEG_NONE;
	size_t page = page_size();
	bytes = bytes ? (bytes + page - 1) / page * page : page;
	if (skip >= bytes)
		return pti_err_set(PT_EINVAL, "shared memory %s: values %zu "
		    "bytes into %zu", name, skip, bytes);
	int fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0)
		return pti_err_set(PT_EIO, "shared memory %s: memfd_create: %s",
		    name, strerror(errno));
	void *p = MAP_FAILED;
	if (ftruncate(fd, (off_t)bytes) != 0 ||
	    fcntl(fd, F_ADD_SEALS, SHM_SEALS) != 0 ||
	    (p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
		 0)) == MAP_FAILED) {
		int e = errno;
		close(fd);
		return pti_err_set(PT_EIO, "shared memory %s of %zu bytes: %s",
		    name, bytes, strerror(e));
	}
	*g = (pti_shm_seg){(float *)((char *)p + skip), bytes, skip, fd, -1};
	return 0;
}

size_t pti_shm_skip(uint64_t lo)
{
	return (size_t)(lo * sizeof(float) % page_size());
}

void pti_shm_seg_fini(pti_shm_seg *g)
{
	if (g->p != NULL)
		munmap((char *)g->p - g->skip, g->bytes);
	if (g->fd >= 0)
		close(g->fd);
	if (g->owner >= 0)
		close(g->owner);
	*g = PTI_SHM_SEG_NONE;
}

pti_shm_ctl *pti_shm_ctl_of(const pti_shm_seg *g, uint64_t n)
{
	if (g->p == NULL || g->bytes < PTI_SHM_SERVER_BYTES(g->skip, n))
		return NULL;
	return (pti_shm_ctl *)((char *)g->p - g->skip +
			       pti_shm_ctl_at(g->skip, n));
}

int pti_shm_view_init(pti_shm_view *v, uint64_t n)
{
	size_t page = page_size();
	size_t bytes = ((size_t)n * sizeof(float) + page - 1) / page * page;
	void *p = mmap(NULL, bytes ? bytes : page, PROT_READ | PROT_WRITE,
	    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (p == MAP_FAILED)
		return pti_err_set(PT_EIO, "shared memory: a view of %llu "
		    "values: %s", (unsigned long long)n, strerror(errno));
	*v = (pti_shm_view){p, bytes ? bytes : page};
	return 0;
}

int pti_shm_view_map(pti_shm_view *v, const pti_shm_seg *g, uint64_t lo,
    uint64_t hi, uint64_t n, uint64_t *own_lo, uint64_t *own_hi)
{
	size_t page = page_size(), per = page / sizeof(float);
	// The pages wholly within [lo, hi), and the last page of the model
	// when this shard ends it (nothing else lies there).
	uint64_t first = (lo + per - 1) / per;
	uint64_t last = hi == n ? (hi + per - 1) / per : hi / per;
	*own_lo = *own_hi = lo;
	if (first >= last)
		return 0; // every value of it is copied
	// Element i is 4 i - 4 lo + skip bytes into g's file.
	size_t base = (size_t)lo * sizeof(float) - g->skip;
	size_t at = (size_t)first * page, len = (size_t)(last - first) * page;
	if (mmap((char *)v->p + at, len, PROT_READ, MAP_SHARED | MAP_FIXED,
		g->fd, (off_t)(at - base)) == MAP_FAILED)
		return pti_err_set(PT_EIO, "shared memory: mapping [%llu, %llu) "
		    "into the view: %s", (unsigned long long)lo,
		    (unsigned long long)hi, strerror(errno));
	*own_lo = first * per > lo ? first * per : lo;
	*own_hi = last * per < hi ? last * per : hi;
	return 0;
}

void pti_shm_view_fini(pti_shm_view *v)
{
	if (v->p != NULL)
		munmap(v->p, v->bytes);
	*v = (pti_shm_view){NULL, 0};
}

void pti_shm_write_begin(pti_shm_ctl *c)
{
	uint64_t s = atomic_load_explicit(&c->seq, memory_order_relaxed);
	atomic_store_explicit(&c->seq, s + 1, memory_order_relaxed);
	// the odd count is seen before any value changes
	atomic_thread_fence(memory_order_release);
}

void pti_shm_write_end(pti_shm_ctl *c, int64_t ver)
{
	uint64_t s = atomic_load_explicit(&c->seq, memory_order_relaxed);
	atomic_store_explicit(&c->ver, ver, memory_order_relaxed);
	// every change is seen before the even count
	atomic_store_explicit(&c->seq, s + 1, memory_order_release);
}

// gone: whether the process of pidfd `owner` has ended.
static int gone(int owner)
{
	struct pollfd pf = {owner, POLLIN, 0};
	return owner >= 0 && poll(&pf, 1, 0) > 0;
}

int pti_shm_read(const pti_shm_ctl *c, float *dst, const float *src,
    uint64_t n, double timeout_s, int owner, int64_t *ver)
{
	double until = 0;
	for (unsigned tries = 0;; tries++) {
		uint64_t a = atomic_load_explicit(&c->seq,
		    memory_order_acquire);
		if (a & 1) { // a change under way: let the server finish
			if (tries < 16)
				continue;
			sched_yield();
			if (tries % 256 != 0)
				continue;
			if (gone(owner))
				return pti_err_set(PT_ECLOSED, "shared memory: "
				    "the server's values stayed mid-change and "
				    "the server is gone (it died changing "
				    "them)");
			if (until == 0)
				until = pti_clock_s() + timeout_s;
			else if (pti_clock_s() > until)
				return pti_err_set(PT_ETIMEDOUT, "shared memory: "
				    "the server's values stayed mid-change "
				    "%.0f s (did it die?)", timeout_s);
			continue;
		}
		memcpy(dst, src, n * sizeof(float));
		int64_t v = atomic_load_explicit(&c->ver, memory_order_relaxed);
		atomic_thread_fence(memory_order_acquire);
		if (atomic_load_explicit(&c->seq, memory_order_relaxed) == a) {
			*ver = v;
			return 0;
		}
	}
}

int pti_shm_seg_replace(pti_shm_seg *cur, pti_shm_seg *g, pti_shm_seg **old,
    uint32_t *n_old)
{
	if (cur->p != NULL) {
		pti_shm_seg *o = realloc(*old, (*n_old + 1) * sizeof(*o));
		if (o == NULL) {
			pti_shm_seg_fini(g);
			return pti_err_set(PT_ENOMEM, "shared memory: a segment "
			    "replaced");
		}
		*old = o;
		o[(*n_old)++] = *cur;
	}
	*cur = *g;
	*g = PTI_SHM_SEG_NONE;
	return 0;
}

void pti_shm_segs_free(pti_shm_seg *segs, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++)
		pti_shm_seg_fini(&segs[i]);
	free(segs);
}

// The futexes live in segments two processes map: not FUTEX_PRIVATE.
void pti_box_wait(_Atomic uint32_t *w, uint32_t v, double timeout_s)
{
	struct timespec ts = {(time_t)timeout_s,
	    (long)((timeout_s - (double)(time_t)timeout_s) * 1e9)};
	(void)syscall(SYS_futex, w, FUTEX_WAIT, v, &ts, NULL, 0);
}

void pti_box_wake(_Atomic uint32_t *w)
{
	(void)syscall(SYS_futex, w, FUTEX_WAKE, INT32_MAX, NULL, NULL, 0);
}

// seg_map maps the window [from, to) bytes of a peer's segment fd
// (kept in g; p at byte from) read-only (prot PROT_READ, or read-write),
// once it is sealed against shrinking and at least `to` bytes long.
static int seg_map(pti_shm_seg *g, int fd, size_t from, size_t to, int prot,
    const char *whose)
{
	struct stat st;
	size_t page = page_size();
	int seals = fcntl(fd, F_GET_SEALS);
	*g = PTI_SHM_SEG_NONE;
	if (seals < 0 || (seals & (F_SEAL_SHRINK | F_SEAL_SEAL)) !=
			     (F_SEAL_SHRINK | F_SEAL_SEAL)) {
		close(fd);
		return pti_err_set(PT_EPROTO, "shared memory from %s: not "
		    "sealed against shrinking", whose);
	}
	if (fstat(fd, &st) != 0 || st.st_size < 0 ||
	    (size_t)st.st_size < to || st.st_size == 0 || to <= from) {
		close(fd);
		return pti_err_set(PT_EPROTO, "shared memory from %s: %lld "
		    "bytes, %zu wanted", whose, (long long)st.st_size, to);
	}
	size_t at = from / page * page;
	size_t len = (to + page - 1) / page * page - at;
	void *p = mmap(NULL, len, prot, MAP_SHARED, fd, (off_t)at);
	if (p == MAP_FAILED) {
		int e = errno;
		close(fd);
		return pti_err_set(PT_EIO, "shared memory from %s: mmap: %s",
		    whose, strerror(e));
	}
	*g = (pti_shm_seg){(float *)((char *)p + (from - at)), len,
	    from - at, fd, -1};
	return 0;
}

int pti_shm_path(const char *url, char *out, size_t n)
{
	struct sockaddr_un sa;
	if (strncmp(url, "ipc://", 6) != 0)
		return pti_err_set(PT_EINVAL, "%s: shared memory needs an "
		    "ipc:// address (processes of one host)", url);
	if (strlen(url + 6) + 5 > sizeof(sa.sun_path) - 1 ||
	    strlen(url + 6) + 5 > n - 1)
		return pti_err_set(PT_EINVAL, "%s: too long a path for the "
		    "shared memory's socket (%zu bytes at most with .shm)",
		    url, sizeof(sa.sun_path) - 1);
	snprintf(out, n, "%s.shm", url + 6);
	return 0;
}

static int addr_of(const char *path, struct sockaddr_un *sa)
{
	memset(sa, 0, sizeof(*sa));
	sa->sun_family = AF_UNIX;
	if (strlen(path) >= sizeof(sa->sun_path))
		return pti_err_set(PT_EINVAL, "%s: too long", path);
	strcpy(sa->sun_path, path);
	return 0;
}

int pti_shm_listen(const char *path, int *fd)
{
	struct sockaddr_un sa;
	int rv = addr_of(path, &sa);
	if (rv != 0)
		return rv;
	int s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (s < 0)
		return pti_err_set(PT_EIO, "%s: socket: %s", path,
		    strerror(errno));
	(void)unlink(path); // one a dead server left
	if (bind(s, (struct sockaddr *)&sa, sizeof(sa)) != 0 ||
	    listen(s, 64) != 0) {
		int e = errno;
		close(s);
		return pti_err_set(PT_EIO, "%s: %s", path, strerror(e));
	}
	*fd = s;
	return 0;
}

// ---------------------------------------------------------------- messages

// The handshake's messages, little-endian on one host: the server's
// nonce; the worker's rank, nonce and proof, with its segment; the
// server's status, shard and proof, with its segment.
typedef struct shm_hello {
	uint32_t rank;
	uint8_t nonce[PT_NONCE_LEN];
	uint8_t mac[PT_MAC_LEN];
} shm_hello;

typedef struct shm_answer {
	uint32_t status; // 0, else the PT_E* that refused
	uint64_t lo, hi;
	uint8_t mac[PT_MAC_LEN];
} shm_answer;

// send_fds sends len bytes and, with them, the descriptors of fd[0..2)
// that are >= 0 (fd[1] only with fd[0]); send_fd one.
static int send_fds(int s, const void *buf, size_t len, const int fd[2])
{
	union {
		char b[CMSG_SPACE(2 * sizeof(int))];
		struct cmsghdr align;
	} u;
	struct iovec io = {(void *)buf, len};
	struct msghdr mh = {0};
	int k = fd[0] < 0 ? 0 : fd[1] < 0 ? 1 : 2;
	mh.msg_iov = &io;
	mh.msg_iovlen = 1;
	if (k > 0) {
		memset(&u, 0, sizeof(u));
		mh.msg_control = u.b;
		mh.msg_controllen = CMSG_SPACE((size_t)k * sizeof(int));
		struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN((size_t)k * sizeof(int));
		memcpy(CMSG_DATA(c), fd, (size_t)k * sizeof(int));
	}
	ssize_t n = sendmsg(s, &mh, MSG_NOSIGNAL);
	return n == (ssize_t)len ? 0 : -1;
}

static int send_fd(int s, const void *buf, size_t len, int fd)
{
	int two[2] = {fd, -1};
	return send_fds(s, buf, len, two);
}

// recv_fds receives one message of exactly len bytes into buf, and the
// first two descriptors that came with it into fd[0], fd[1] (-1 when
// none; any others are closed). PT_ETIMEDOUT, PT_ECLOSED or PT_EPROTO.
// recv_fd takes one.
static int recv_fds(int s, void *buf, size_t len, int fd[2],
    double timeout_s)
{
	union {
		char b[CMSG_SPACE(4 * sizeof(int))];
		struct cmsghdr align;
	} u;
	char extra;
	struct iovec io[2] = {{buf, len}, {&extra, 1}};
	struct msghdr mh = {0};
	struct pollfd pf = {s, POLLIN, 0};
	fd[0] = fd[1] = -1;
	int r = poll(&pf, 1, (int)(timeout_s * 1000));
	if (r == 0)
		return PT_ETIMEDOUT;
	if (r < 0)
		return PT_EIO;
	mh.msg_iov = io;
	mh.msg_iovlen = 2;
	mh.msg_control = u.b;
	mh.msg_controllen = sizeof(u.b);
	ssize_t n = recvmsg(s, &mh, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); n >= 0 && c != NULL;
	     c = CMSG_NXTHDR(&mh, c)) {
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t i = 0; i < k; i++) {
			int f;
			memcpy(&f, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
			if (fd[0] < 0)
				fd[0] = f;
			else if (fd[1] < 0)
				fd[1] = f;
			else
				close(f);
		}
	}
	if (n == 0)
		return PT_ECLOSED;
	if (n != (ssize_t)len || (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC))) {
		for (int i = 0; i < 2; i++)
			if (fd[i] >= 0)
				close(fd[i]);
		fd[0] = fd[1] = -1;
		return n < 0 ? PT_EIO : PT_EPROTO;
	}
	return 0;
}

static int recv_fd(int s, void *buf, size_t len, int *fd, double timeout_s)
{
	int two[2];
	int rv = recv_fds(s, buf, len, two, timeout_s);
	if (two[1] >= 0)
		close(two[1]);
	*fd = two[0];
	return rv;
}

// peer_pidfd: a pidfd of the process at the other end of unix socket s,
// or -1 (the kernel does not say, or has no pidfds): a worker then
// waits out its --rpc-timeout for a server that died changing values.
static int peer_pidfd(int s)
{
	struct ucred cr;
	socklen_t len = sizeof(cr);
	if (getsockopt(s, SOL_SOCKET, SO_PEERCRED, &cr, &len) != 0 ||
	    cr.pid <= 0)
		return -1;
	long fd = syscall(SYS_pidfd_open, (pid_t)cr.pid, 0);
	if (fd >= 0)
		(void)fcntl((int)fd, F_SETFD, FD_CLOEXEC);
	return fd >= 0 ? (int)fd : -1;
}

int pti_shm_offer(const char *path, const pti_secret *key, uint32_t rank,
    uint32_t server, const pti_shm_seg *mine, const pti_shm_seg *box,
    double timeout_s, pti_shm_seg *theirs, uint64_t *lo, uint64_t *hi)
{
	struct sockaddr_un sa;
	uint8_t nonce_s[PT_NONCE_LEN], mac[PT_MAC_LEN];
	shm_hello hi_w;
	shm_answer an;
	int rv, fd = -1;
	*theirs = PTI_SHM_SEG_NONE;
	if ((rv = addr_of(path, &sa)) != 0)
		return rv;
	int s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (s < 0)
		return pti_err_set(PT_EIO, "%s: socket: %s", path,
		    strerror(errno));
	if (connect(s, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
		rv = pti_err_set(PT_ECLOSED, "shared memory with server %u at "
		    "%s: %s", server, path, strerror(errno));
		goto out;
	}
	if ((rv = recv_fd(s, nonce_s, sizeof(nonce_s), &fd, timeout_s)) != 0)
		goto said;
	if (fd >= 0) {
		close(fd);
		fd = -1;
	}
	memset(&hi_w, 0, sizeof(hi_w));
	hi_w.rank = rank;
	if ((rv = pti_random(hi_w.nonce, sizeof(hi_w.nonce))) != 0)
		goto out;
	pti_auth_mac_shm(key, nonce_s, PT_ROLE_WORKER, rank, server,
	    hi_w.mac);
	int fds[2] = {mine->fd, box != NULL ? box->fd : -1};
	if (send_fds(s, &hi_w, sizeof(hi_w), fds) != 0) {
		rv = PT_ECLOSED;
		goto said;
	}
	if ((rv = recv_fd(s, &an, sizeof(an), &fd, timeout_s)) != 0)
		goto said;
	if (an.status != 0) {
		rv = pti_err_set(an.status < PT_NERR ? (int)an.status
						     : PT_EPROTO,
		    "shared memory with server %u at %s: refused (error %u; "
		    "the server's log says why)", server, path, an.status);
		goto out;
	}
	pti_auth_mac_shm(key, hi_w.nonce, PT_ROLE_SERVER, rank, server, mac);
	if (!pti_auth_equal(mac, an.mac, sizeof(mac))) {
		rv = pti_err_set(PT_EAUTH, "shared memory with server %u at "
		    "%s: its proof of the job secret is wrong", server, path);
		goto out;
	}
	if (fd < 0 || an.hi < an.lo) {
		rv = pti_err_set(PT_EPROTO, "shared memory with server %u at "
		    "%s: no segment, or a shard [%llu, %llu)", server, path,
		    (unsigned long long)an.lo, (unsigned long long)an.hi);
		goto out;
	}
	char whose[64];
	snprintf(whose, sizeof(whose), "server %u", server);
	size_t skip = pti_shm_skip(an.lo);
	rv = seg_map(theirs, fd, skip,
	    PTI_SHM_SERVER_BYTES(skip, an.hi - an.lo), PROT_READ, whose);
	fd = -1; // seg_map's now
	if (rv == 0) {
		*lo = an.lo;
		*hi = an.hi;
		theirs->owner = peer_pidfd(s);
	}
	goto out;
said:
	rv = pti_err_set(rv, "shared memory with server %u at %s: %s", server,
	    path, rv == PT_ETIMEDOUT ? "no answer in time"
		  : rv == PT_ECLOSED ? "it closed the connection"
				     : "an answer not in the protocol");
out:
	if (fd >= 0)
		close(fd);
	close(s);
	return rv;
}

// take_status answers the worker with status code (its refusal).
static void take_status(int s, int code)
{
	shm_answer an;
	memset(&an, 0, sizeof(an));
	an.status = (uint32_t)code;
	(void)send_fd(s, &an, sizeof(an), -1);
}

// take_refuse answers the worker with status code and returns the error
// naming why.
static int take_refuse(int s, int code, const char *why, uint32_t rank)
{
	take_status(s, code);
	return pti_err_set(code, "shared memory from worker %u: %s", rank,
	    why);
}

int pti_shm_take(int cfd, const pti_secret *key, uint32_t server,
    uint32_t workers, const pti_shm_seg *mine, uint64_t lo, uint64_t hi,
    double timeout_s, pti_shm_keep_fn keep, void *arg, uint32_t *rank)
{
	uint8_t nonce[PT_NONCE_LEN], mac[PT_MAC_LEN];
	shm_hello hw;
	shm_answer an;
	int rv, fd = -1, fds[2] = {-1, -1};
	pti_shm_seg seg = PTI_SHM_SEG_NONE, *theirs = &seg;
	pti_shm_seg box = PTI_SHM_SEG_NONE;
	if ((rv = pti_random(nonce, sizeof(nonce))) != 0)
		goto out;
	if (send_fd(cfd, nonce, sizeof(nonce), -1) != 0) {
		rv = pti_err_set(PT_ECLOSED, "shared memory: the peer went");
		goto out;
	}
	rv = recv_fds(cfd, &hw, sizeof(hw), fds, timeout_s);
	fd = fds[0];
	if (rv != 0) {
		rv = pti_err_set(rv, "shared memory: the peer's hello: %s",
		    rv == PT_ETIMEDOUT ? "not in time"
		    : rv == PT_ECLOSED ? "it closed the connection"
				       : "not in the protocol");
		goto out;
	}
	if (hw.rank >= workers) {
		rv = take_refuse(cfd, PT_EAUTH, "no such worker", hw.rank);
		goto out;
	}
	pti_auth_mac_shm(key, nonce, PT_ROLE_WORKER, hw.rank, server, mac);
	if (!pti_auth_equal(mac, hw.mac, sizeof(mac))) {
		rv = take_refuse(cfd, PT_EAUTH, "its proof of the job secret "
		    "is wrong", hw.rank);
		goto out;
	}
	if (fd < 0) {
		rv = take_refuse(cfd, PT_EPROTO, "no segment came", hw.rank);
		goto out;
	}
	char whose[64];
	snprintf(whose, sizeof(whose), "worker %u", hw.rank);
	rv = seg_map(theirs, fd, (size_t)lo * sizeof(float),
	    (size_t)hi * sizeof(float), PROT_READ, whose);
	fd = -1;
	if (rv == 0 && fds[1] >= 0) {
		snprintf(whose, sizeof(whose), "worker %u's box", hw.rank);
		rv = seg_map(&box, fds[1], 0, sizeof(pti_box),
		    PROT_READ | PROT_WRITE, whose);
		fds[1] = -1;
	}
	if (rv == 0 && (rv = keep(arg, hw.rank, theirs, &box)) != 0)
		pti_shm_seg_fini(theirs);
	pti_shm_seg_fini(&box); // none when kept
	if (rv != 0) {
		take_status(cfd, rv); // seg_map's or keep's message says why
		goto out;
	}
	memset(&an, 0, sizeof(an));
	an.lo = lo;
	an.hi = hi;
	pti_auth_mac_shm(key, hw.nonce, PT_ROLE_SERVER, hw.rank, server,
	    an.mac);
	if (send_fd(cfd, &an, sizeof(an), mine->fd) != 0) {
		// kept: a worker that comes back hands over another
		rv = pti_err_set(PT_ECLOSED, "shared memory: worker %u went",
		    hw.rank);
		goto out;
	}
	*rank = hw.rank;
out:
	if (fd >= 0)
		close(fd);
	if (fds[1] >= 0)
		close(fds[1]);
	close(cfd);
	return rv;
}
