// common/sockwatch.c - this process's TCP connections on one local port
// (see sockwatch.h).
#include "common/sockwatch.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

// sock_port: the port (host order) of an IPv4 or IPv6 address, or 0.
static uint16_t sock_port(const struct sockaddr_storage *a)
{
	if (a->ss_family == AF_INET)
		return ntohs(((const struct sockaddr_in *)(const void *)a)->sin_port);
	if (a->ss_family == AF_INET6)
		return ntohs(((const struct sockaddr_in6 *)(const void *)a)->sin6_port);
	return 0;
}

// sock_read fills c from descriptor fd when it is an established TCP
// connection on local port `port`: 1, else 0.
static int sock_read(int fd, uint16_t port, pti_sock *c)
{
	struct stat sb;
	struct sockaddr_storage me;
	socklen_t len = sizeof(me);
	int listening = 0;
	socklen_t il = sizeof(listening);
	struct tcp_info ti;
	socklen_t tl = sizeof(ti);
	memset(c, 0, sizeof(*c)); // peers compare whole (pti_sock_cut)
	if (fstat(fd, &sb) != 0 || !S_ISSOCK(sb.st_mode) ||
	    getsockname(fd, (struct sockaddr *)&me, &len) != 0 ||
	    sock_port(&me) != port ||
	    getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &il) != 0 ||
	    listening)
		return 0;
	len = sizeof(c->peer);
	if (getpeername(fd, (struct sockaddr *)&c->peer, &len) != 0 ||
	    getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &tl) != 0 ||
	    ti.tcpi_state != 1 /* TCP_ESTABLISHED */)
		return 0;
	c->fd = fd;
	c->ino = (uint64_t)sb.st_ino;
	c->quiet_s = ti.tcpi_last_data_recv / 1e3;
	double sent = ti.tcpi_last_data_sent / 1e3;
	c->idle_s = sent < c->quiet_s ? sent : c->quiet_s;
	return 1;
}

int pti_sock_scan(uint16_t port, pti_sock *out, int max)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	int n = 0;
	if (d == NULL || port == 0) {
		if (d != NULL)
			closedir(d);
		return 0;
	}
	while (n < max && (e = readdir(d)) != NULL) {
		char *end;
		long fd = strtol(e->d_name, &end, 10);
		if (*end != '\0' || end == e->d_name || fd == dirfd(d))
			continue;
		n += sock_read((int)fd, port, &out[n]);
	}
	closedir(d);
	return n;
}

int pti_sock_cut(const pti_sock *c)
{
	pti_sock now;
	struct sockaddr_storage me;
	socklen_t len = sizeof(me);
	if (getsockname(c->fd, (struct sockaddr *)&me, &len) != 0 ||
	    !sock_read(c->fd, sock_port(&me), &now) || now.ino != c->ino ||
	    memcmp(&now.peer, &c->peer, sizeof(now.peer)) != 0)
		return -1;
	return shutdown(c->fd, SHUT_RDWR) == 0 ? 0 : -1;
}

int pti_sock_peer_is(const pti_sock *c, int family, const void *addr,
    uint16_t port)
{
	if (c->peer.ss_family != family)
		return 0;
	if (family == AF_INET) {
		const struct sockaddr_in *a = (const void *)&c->peer;
		return a->sin_port == port && memcmp(&a->sin_addr, addr, 4) == 0;
	}
	const struct sockaddr_in6 *a = (const void *)&c->peer;
	return family == AF_INET6 && a->sin6_port == port &&
	       memcmp(&a->sin6_addr, addr, 16) == 0;
}

void pti_sock_peer_name(const pti_sock *c, char *buf, size_t n)
{
	char host[INET6_ADDRSTRLEN] = "?";
	const void *a = c->peer.ss_family == AF_INET
			    ? (const void *)&((const struct sockaddr_in *)(const void *)&c->peer)->sin_addr
			    : (const void *)&((const struct sockaddr_in6 *)(const void *)&c->peer)->sin6_addr;
	inet_ntop(c->peer.ss_family, a, host, sizeof(host));
	snprintf(buf, n, "%s:%u", host, sock_port(&c->peer));
}
