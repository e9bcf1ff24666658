// common/sockwatch.h - this process's TCP connections on one local port,
// as the kernel sees them (/proc/self/fd, getsockname, getpeername,
// TCP_INFO). nng 1.5.2 keeps two kinds of connection out of pstrain's
// reach: a TLS connection whose handshake never starts (its 10 s
// negotiation timeout is lost: the cancel aborts a TCP send that is not
// under way) and the HTTP server's connections (no cap, no idle
// timeout). A server and the dashboard find them here and shut them
// down; nng sees the stream end and closes them itself.
#ifndef PT_COMMON_SOCKWATCH_H
#define PT_COMMON_SOCKWATCH_H

#include <stdint.h>
#include <sys/socket.h>

typedef struct pti_sock {
	int fd;
	uint64_t ino; // the socket's inode: a descriptor reused differs
	struct sockaddr_storage peer;
	double quiet_s; // seconds since data last came in
	double idle_s;  // seconds since data last came in or went out
} pti_sock;

// pti_sock_scan fills out (max entries) with the established TCP
// connections of this process whose local port is `port` (host order),
// listening sockets left out. Returns how many it found (up to max).
int pti_sock_scan(uint16_t port, pti_sock *out, int max);

// pti_sock_cut shuts connection c down both ways when its descriptor
// still is that connection (same inode and peer). 0, or -1 when not.
int pti_sock_cut(const pti_sock *c);

// pti_sock_peer_is: whether c's peer is the IPv4 or IPv6 address `addr`
// (network order, 4 or 16 bytes by family) and port (network order).
int pti_sock_peer_is(const pti_sock *c, int family, const void *addr,
    uint16_t port);

// pti_sock_peer_name writes c's peer as ADDR:PORT into buf (size n).
void pti_sock_peer_name(const pti_sock *c, char *buf, size_t n);

#endif // PT_COMMON_SOCKWATCH_H
