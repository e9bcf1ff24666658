// ps/server.h - what pstrain's own commands and tests use of the server
// beyond pstrain.h's pt_server_open / serve / stop / close.
#ifndef PT_PS_SERVER_H
#define PT_PS_SERVER_H

#include <signal.h>

#include "common/config.h"

// pti_server_signal: a signal handler of the program (pstrain server)
// sets it to the signal's number; pt_server_serve then returns within
// 200 ms. The library itself installs no handler.
extern volatile sig_atomic_t pti_server_signal;

// pti_server_exit_on_hang: set by a program that is only a server
// (pstrain server): should closing the socket hang (nng 1.5's close can
// wait forever when requests race it), the process exits with the status
// it would have had instead. The library leaves it 0.
extern int pti_server_exit_on_hang;

// pti_server_proc: what pstrain's own server process adds to a job's
// options (pt_job): its rank and address, the file that says it listens,
// the workers a restarted server does not wait for, whether pstrain run
// supervises it, and the job's start (server-R.json's ready_s counts
// from it). pti_server_open is pt_server_open with them; a
// program of its own gives a rank and an address only.
typedef struct pti_server_proc {
	uint32_t rank;
	const char *listen;       // the address to listen on
	const char *ready_file;   // "": none
	const char *gone_workers; // "R,R,...": lost before it started
	int supervised;           // under pstrain run, which does the rest
	double t0; // the job's start (seconds since 1970); 0: this call's
} pti_server_proc;
typedef struct pt_job pt_job;
typedef struct pt_server pt_server;
int pti_server_open(pt_server **out, const pt_job *job,
    const pti_server_proc *p);

// A server's state and request handler without sockets, driven by calls:
// for the fuzzing harness (tests/fuzz). pti_local_connect and
// pti_local_disconnect stand for a connection's arrival and close;
// pti_local_request runs one request (m stays the caller's) as if it came
// on connection `pipe` and returns the reply (the caller's), or NULL when
// it was parked or every context is. pti_local_open serves layout l (NULL:
// the config's model; a program's own, with tables, otherwise).
typedef struct pti_local_server pti_local_server;
struct nng_msg;
int pti_local_open(pti_local_server **out, const pti_config *c,
    const pti_layout *l);
int pti_local_connect(pti_local_server *s, uint32_t pipe);
void pti_local_disconnect(pti_local_server *s, uint32_t pipe);
struct nng_msg *pti_local_request(pti_local_server *s, uint32_t pipe,
    struct nng_msg *m);
void pti_local_close(pti_local_server *s);
// pti_local_replies_filled: replies sent with the values written into
// their request as the update went (sync.c, clock.c), for tests.
uint64_t pti_local_replies_filled(const pti_local_server *s);

#endif // PT_PS_SERVER_H
