// ps/server.h - one parameter-server process: holds one shard of the
// model's flat parameter vector and applies the workers' gradients to it.
#ifndef PT_PS_SERVER_H
#define PT_PS_SERVER_H

#include "config.h"

// pt_server_run builds the shard from c (model, data dims, seed), listens
// on c->listen, serves until a shutdown request or SIGINT/SIGTERM, then
// writes c->out/server-R.json when c->out is set. Blocks; returns 0, or an
// error code with a detail (pt_errmsg) when it could not start.
int pt_server_run(const pt_config *c);

// A server's state and request handler without sockets, driven by calls:
// for the fuzzing harness (tests/fuzz). pti_local_connect and
// pti_local_disconnect stand for a connection's arrival and close;
// pti_local_request runs one request (m stays the caller's) as if it came
// on connection `pipe` and returns the reply (the caller's), or NULL when
// it was parked or every context is.
typedef struct pti_local_server pti_local_server;
struct nng_msg;
int pti_local_open(pti_local_server **out, const pt_config *c);
int pti_local_connect(pti_local_server *s, uint32_t pipe);
void pti_local_disconnect(pti_local_server *s, uint32_t pipe);
struct nng_msg *pti_local_request(pti_local_server *s, uint32_t pipe,
    struct nng_msg *m);
void pti_local_close(pti_local_server *s);

#endif // PT_PS_SERVER_H
