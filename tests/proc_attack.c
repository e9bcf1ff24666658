// tests/proc_attack.c - a hostile local process against a running job:
// it speaks the real protocol (and raw SP-over-TCP where nng would not
// misbehave) to every server of a job started with `pstrain run
// --transport tcp`, without the job's secret, and checks that each
// request is refused while the servers keep serving.
//
// usage: proc_attack URL[,URL...] [ROUNDS]
//   URL: tcp://HOST:PORT of each server. Each round runs every attack
//   against every server. Prints one line per attack; exits 0 when every
//   attack was refused (or could not connect because the job had ended),
//   1 when a server accepted one, 2 on bad usage.
#include <arpa/inet.h>
#include <errno.h>
#include <math.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <nng/nng.h>
#include <nng/protocol/reqrep0/req.h>

#include "common/auth.h"
#include "common/proto.h"

#define FLOOD 40     // connections each flood opens
#define HELD 120     // connections held open at once (the limit is 64
		     // more than the job has workers)
#define PUSH_N 64    // floats in an impersonated push

static int accepted, refused, ended;

static int dial(const char *url, nng_socket *k)
{
	if (nng_req0_open(k) != 0)
		return -1;
	nng_socket_set_ms(*k, NNG_OPT_RECVTIMEO, 3000);
	nng_socket_set_ms(*k, NNG_OPT_SENDTIMEO, 3000);
	nng_socket_set_ms(*k, NNG_OPT_REQ_RESENDTIME, NNG_DURATION_INFINITE);
	if (nng_dial(*k, url, NULL, 0) != 0) {
		nng_close(*k);
		return -1;
	}
	return 0;
}

// ask sends h (with n floats of pay) on k; the reply's status, -1 when
// no reply came.
static int ask(nng_socket k, const pti_hdr *h, const float *pay, uint64_t n,
    pti_hdr *r)
{
	nng_msg *m, *rep;
	const void *p;
	if (pti_msg_encode(&m, h, pay, n) != 0)
		return -1;
	if (nng_sendmsg(k, m, 0) != 0) {
		nng_msg_free(m);
		return -1;
	}
	if (nng_recvmsg(k, &rep, 0) != 0)
		return -1;
	int rv = pti_msg_decode(r, &p, rep);
	nng_msg_free(rep);
	return rv != 0 ? -1 : (int)r->status;
}

// expect: an attack's reply must be a refusal. No reply at all counts as
// the job having ended only when the server no longer accepts
// connections (checked by the caller).
static void expect(const char *url, const char *what, int status,
    const pti_hdr *r)
{
	if (status > 0) {
		refused++;
		printf("refused: %s at %s: %s\n", what, url, r->msg);
	} else if (status == 0) {
		accepted++;
		printf("ACCEPTED: %s at %s\n", what, url);
	} else {
		ended++;
		printf("no answer: %s at %s\n", what, url);
	}
}

static void attack_requests(const char *url)
{
	nng_socket k;
	pti_hdr h, r;
	float g[PUSH_N];
	if (dial(url, &k) != 0) {
		ended++;
		return;
	}
	// anonymous shutdown and stats, as a control client and as worker 0
	pti_hdr_init(&h, PT_OP_SHUTDOWN, PT_ROLE_CONTROL, 0);
	expect(url, "anonymous shutdown", ask(k, &h, NULL, 0, &r), &r);
	pti_hdr_init(&h, PT_OP_SHUTDOWN, PT_ROLE_WORKER, 0);
	expect(url, "shutdown as worker 0", ask(k, &h, NULL, 0, &r), &r);
	pti_hdr_init(&h, PT_OP_STATS, PT_ROLE_CONTROL, 0);
	expect(url, "anonymous stats", ask(k, &h, NULL, 0, &r), &r);
	// impersonated pushes, with INT64 steps, NaN and infinity
	int64_t steps[] = {0, 1, INT64_MAX, INT64_MIN};
	float vals[] = {1.0f, NAN, INFINITY, -INFINITY};
	for (int i = 0; i < 4; i++) {
		for (int j = 0; j < PUSH_N; j++)
			g[j] = vals[i];
		pti_hdr_init(&h, i % 2 ? PT_OP_PUSH : PT_OP_PUSHPULL,
		    PT_ROLE_WORKER, (uint32_t)i % 2);
		h.has |= PTI_H_STEP | PTI_H_VER | PTI_H_RANGE;
		h.step = steps[i];
		h.ver = steps[i];
		h.off = 0;
		char what[96];
		snprintf(what, sizeof(what), "push as worker %d, step %lld, "
		    "value %g", i % 2, (long long)steps[i], (double)vals[i]);
		expect(url, what, ask(k, &h, g, PUSH_N, &r), &r);
	}
	// a hello with a wrong secret, and a hello replayed from another
	// connection's challenge
	pti_secret bad;
	pti_secret_make(&bad);
	pti_hdr_init(&h, PT_OP_CHALLENGE, PT_ROLE_WORKER, 0);
	if (ask(k, &h, NULL, 0, &r) == 0) {
		pti_hdr_init(&h, PT_OP_HELLO, PT_ROLE_WORKER, 0);
		h.has |= PTI_H_MAC;
		pti_auth_mac(&bad, r.nonce, PT_ROLE_WORKER, 0, 0, 0, h.mac);
		expect(url, "hello with another secret",
		    ask(k, &h, NULL, 0, &r), &r);
		nng_socket k2;
		if (dial(url, &k2) == 0) {
			expect(url, "hello replayed on another connection",
			    ask(k2, &h, NULL, 0, &r), &r);
			nng_close(k2);
		}
	}
	// a pull for a future version (one would park a context)
	pti_hdr_init(&h, PT_OP_PULL, PT_ROLE_WORKER, 1);
	h.has |= PTI_H_VER;
	h.ver = 1 << 20;
	expect(url, "pull of a future version", ask(k, &h, NULL, 0, &r), &r);
	nng_close(k);
}

// raw_connect opens a TCP connection to a tcp:// URL and does the SP
// handshake as a REQ peer. -1 when it cannot.
static int raw_connect(const char *url)
{
	char host[64];
	unsigned port;
	if (sscanf(url, "tcp://%63[^:]:%u", host, &port) != 2)
		return -1;
	struct sockaddr_in a = {.sin_family = AF_INET,
	    .sin_port = htons((uint16_t)port)};
	if (inet_pton(AF_INET, host, &a.sin_addr) != 1)
		return -1;
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	if (fd < 0)
		return -1;
	uint8_t hs[8] = {0, 'S', 'P', 0, 0, 48, 0, 0}, got[8]; // REQ = 48
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0 ||
	    write(fd, hs, 8) != 8 || read(fd, got, 8) != 8) {
		close(fd);
		return -1;
	}
	return fd;
}

// raw_announce sends a message header announcing len bytes, then `sent`
// bytes of them.
static int raw_announce(int fd, uint64_t len, size_t sent)
{
	uint8_t b[8 + 256] = {0};
	for (int i = 0; i < 8; i++)
		b[i] = (uint8_t)(len >> (56 - 8 * i));
	b[8] = 0x80; // a REQ request id
	if (sent > 256)
		sent = 256;
	return write(fd, b, 8 + sent) == (ssize_t)(8 + sent) ? 0 : -1;
}

// closed_within: 1 when the server closes fd within ms milliseconds.
static int closed_within(int fd, int ms)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};
	char b[64];
	while (poll(&p, 1, ms) == 1) {
		ssize_t n = read(fd, b, sizeof(b));
		if (n <= 0)
			return 1;
	}
	return 0;
}

// raw_send sends one whole request message (an SP request id, then
// body) on fd.
static int raw_send(int fd, const void *body, size_t n)
{
	uint8_t h[12];
	uint64_t len = n + 4;
	for (int i = 0; i < 8; i++)
		h[i] = (uint8_t)(len >> (56 - 8 * i));
	h[8] = 0x80, h[9] = 0, h[10] = 0, h[11] = 1; // request id
	return write(fd, h, 12) == 12 &&
		       write(fd, body, n) == (ssize_t)n ? 0 : -1;
}

// attack_flood: many connections, each asking a sync pull of the next
// version and closing at once, which must not leave contexts taken.
// Over raw TCP: nng 1.5's close can hang with a request under way.
static void attack_flood(const char *url)
{
	int n = 0;
	for (int i = 0; i < FLOOD; i++) {
		nng_msg *m;
		pti_hdr h;
		int fd = raw_connect(url);
		if (fd < 0)
			break;
		pti_hdr_init(&h, PT_OP_PULL, PT_ROLE_WORKER, (uint32_t)i % 2);
		h.has |= PTI_H_VER;
		h.ver = 1;
		if (pti_msg_encode(&m, &h, NULL, 0) == 0) {
			n += raw_send(fd, nng_msg_body(m), nng_msg_len(m)) == 0;
			nng_msg_free(m);
		}
		close(fd);
	}
	printf("flood: %d pulls sent on %d connections closed at once, at "
	    "%s\n", n, FLOOD, url);
}

static void attack_raw(const char *url, double idle_s)
{
	// oversized: a message announced far above the job's largest legal
	// one is refused by closing the connection
	int fd = raw_connect(url);
	if (fd < 0) {
		ended++;
		return;
	}
	raw_announce(fd, (uint64_t)1 << 34, 16);
	if (closed_within(fd, 3000)) {
		refused++;
		printf("refused: a 16 GiB message at %s (connection closed)\n",
		    url);
	} else {
		accepted++;
		printf("ACCEPTED: a 16 GiB message at %s\n", url);
	}
	close(fd);
	// half-sent: messages that are never finished, on more connections
	// than the server keeps for strangers, must all be closed: the
	// oldest as newer ones come, the rest once idle too long
	int fds[HELD], n = 0;
	for (int i = 0; i < HELD; i++)
		if ((fds[n] = raw_connect(url)) >= 0 &&
		    raw_announce(fds[n], 4000, 100) == 0)
			n++;
	int closed = 0;
	for (int i = 0; i < n; i++) {
		closed += closed_within(fds[i], (int)(idle_s * 1000) + 3000);
		close(fds[i]);
	}
	if (n > 0 && closed == n) {
		refused++;
		printf("refused: %d half-sent messages at %s (all closed)\n",
		    n, url);
	} else if (n > 0) {
		accepted++;
		printf("ACCEPTED: %d of %d half-sent messages still open at "
		    "%s\n", n - closed, n, url);
	}
}

int main(int argc, char **argv)
{
	if (argc < 2 || argc > 4) {
		fprintf(stderr, "usage: proc_attack URL[,URL...] [ROUNDS] "
				"[IDLE_S]\n");
		return 2;
	}
	int rounds = argc > 2 ? atoi(argv[2]) : 1;
	double idle = argc > 3 ? atof(argv[3]) : 10;
	char urls[4096];
	snprintf(urls, sizeof(urls), "%s", argv[1]);
	for (int round = 0; round < rounds; round++) {
		char buf[4096], *save = NULL;
		snprintf(buf, sizeof(buf), "%s", urls);
		for (char *u = strtok_r(buf, ",", &save); u != NULL;
		     u = strtok_r(NULL, ",", &save)) {
			attack_requests(u);
			attack_flood(u);
			attack_raw(u, idle);
		}
		fflush(stdout);
	}
	printf("%d refused, %d accepted, %d unanswered\n", refused, accepted,
	    ended);
	return accepted > 0 ? 1 : 0;
}
