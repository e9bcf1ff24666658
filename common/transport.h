// common/transport.h - listeners and dialers for the addresses a job
// uses: ipc://, tcp:// and tls+tcp://. For tls+tcp:// they apply the
// process's TLS files (--tls-cert, --tls-key, --tls-ca), loaded once at
// start-up: servers require a client certificate signed by the CA, and
// workers check the server's certificate against the CA and the host name
// they dial. Not for the protocol above the sockets (proto.h).
#ifndef PT_COMMON_TRANSPORT_H
#define PT_COMMON_TRANSPORT_H

#include <stdint.h>

#include <nng/nng.h>

#include "common/jobopt.h"

struct pti_config;

// pti_transport_is_tls tells whether url is a TLS address (tls+tcp://,
// tls+tcp4:// or tls+tcp6://).
int pti_transport_is_tls(const char *url);

// pti_transport_is_ipc tells whether url is an ipc:// address.
int pti_transport_is_ipc(const char *url);

// pti_transport_urls_count is how many addresses of the comma-separated
// list urls `is` holds for, in *n_urls how many it has.
uint32_t pti_transport_urls_count(const char *urls, int (*is)(const char *),
    uint32_t *n_urls);

// pti_transport_check checks that the TLS flags of c and the addresses of
// cmd (one PT_CMD_* bit) agree: a TLS address (server --listen, any of a
// worker's --connect, run's --transport tls) needs all three flags, and
// the flags need a TLS address. PT_EINVAL with a detail naming the
// missing or needless flag.
int pti_transport_check(const struct pti_config *c, uint32_t cmd);

// pti_transport_check_addrs is the same for a server (cmd PT_CMD_SERVER,
// addrs its address to listen on) or a worker (PT_CMD_WORKER, addrs its
// comma-separated servers) of a job's options o.
int pti_transport_check_addrs(const pti_jobopt *o, uint32_t cmd,
    const char *addrs);

// pti_transport_tls_load reads o's three TLS files and checks that nng's
// TLS reads them (a certificate, a key that goes with it, a CA), for
// every later pti_transport_listen and pti_transport_dial of this
// process; with no --tls-cert it forgets what an earlier call loaded.
// Call it before any listener or dialer exists: they read what it keeps
// without a lock. Returns PT_EIO or PT_EINVAL with a detail naming the
// flag and the file, PT_ETRANSPORT when nng was built without TLS, or
// PT_ENOMEM.
int pti_transport_tls_load(const pti_jobopt *o);

// pti_transport_listen creates a listener for url on s and starts it, as
// nng_listener_create and nng_listener_start do, with the loaded TLS
// files when url is a TLS address. Returns 0 and *out, or an nng error
// code (NNG_EINVAL for a TLS address with no TLS files loaded), for the
// caller to report with nng_strerror; on failure nothing is left open.
int pti_transport_listen(nng_listener *out, nng_socket s, const char *url);

// pti_transport_bound_url copies the address others dial to reach the
// listener l, started on url, into out (size n): url itself, with the
// port the system chose when url asked for tcp port 0.
void pti_transport_bound_url(nng_listener l, const char *url, char *out,
    size_t n);

// pti_transport_dial dials url from s, as nng_dial(s, url, out, flags)
// does (out may be NULL), with the loaded TLS files when url is a TLS address: the server's
// certificate must name url's host. With NNG_FLAG_NONBLOCK nng goes on
// redialing in the background, and a server that refuses our certificate
// (or whose own the CA did not sign) is never connected. Returns 0 or an
// nng error code, like pti_transport_listen.
int pti_transport_dial(nng_socket s, const char *url, nng_dialer *out,
    int flags);

// PTI_IPC_SOCKBUF: the send buffer asked for on an ipc connection. Linux
// gives a Unix socket 208 KB (net.core.wmem_default), so a 1 MB message
// crosses in five or more wake-ups of both processes; the kernel caps
// what is asked at net.core.wmem_max.
#define PTI_IPC_SOCKBUF (4 << 20)

// pti_transport_widen raises the send and receive buffers of pipe p's
// socket to PTI_IPC_SOCKBUF when p is an ipc:// connection; any other
// transport is left as it is (tcp tunes its own). nng 1.5.2 does not give
// a pipe's descriptor, so this finds it among the process's descriptors:
// the Unix stream sockets whose own or peer address is p's path (every
// connection of that path, which is this job's). Best effort: returns the
// number of sockets widened, and never fails a connection. Call it from
// a pipe callback (NNG_PIPE_EV_ADD_PRE or ADD_POST); any thread.
int pti_transport_widen(nng_pipe p);

#endif // PT_COMMON_TRANSPORT_H
