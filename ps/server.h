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

#endif // PT_PS_SERVER_H
