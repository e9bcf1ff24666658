// ps/shmsrv.h - a server's side of --transport shm (common/shm.h): a
// thread that takes workers' handshakes on the socket beside the
// server's ipc address and records each worker's segment in the
// server's state, under its lock.
#ifndef PT_PS_SHMSRV_H
#define PT_PS_SHMSRV_H

#include <pthread.h>

#include "ps/server_impl.h"

typedef struct ps_shmsrv {
	ps_server *s;
	char path[PT_PATH_MAX];
	int fd;      // the listening socket, -1 none
	int stop[2]; // a pipe: closing its write end stops the thread
	pthread_t thread;
	int running;
} ps_shmsrv;

// pti_shmsrv_start listens beside url (ipc://PATH: PATH.shm) and starts
// the thread. PT_EINVAL for an address that is not ipc://, PT_EIO.
int pti_shmsrv_start(ps_shmsrv *t, ps_server *s, const char *url);

// pti_shmsrv_stop stops the thread and removes the socket; a t never
// started (running 0, fd -1) is fine.
void pti_shmsrv_stop(ps_shmsrv *t);

#endif // PT_PS_SHMSRV_H
