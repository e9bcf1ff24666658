// client/api.h - what pstrain's own trainer (worker.c) uses of the public
// worker (pstrain.h) beyond its calls: rejoining, and the end of a job.
#ifndef PT_CLIENT_API_H
#define PT_CLIENT_API_H

#include "client/client.h"
#include "pstrain.h"

// pti_worker_join waits (at most --rpc-timeout) until every server is
// connected and says hello as a worker at `step`; *start gets the step
// to go on from (client.h, pti_client_hello). Errors a restarting server
// causes are retried after a pause that doubles up to 2 s.
int pti_worker_join(pt_worker *w, int64_t step, int64_t *start);

// pti_wait_info is pt_wait that also sums up the replies into *info
// (versions, staleness, learning rate; may be NULL).
int pti_wait_info(pt_worker *w, pt_req *req, pti_client_step *info);

// pti_worker_all_done asks every server whether every worker has said
// done or been lost: 1 yes, 0 not yet, or a negated error code.
// *first_live gets the lowest rank not lost (server 0's view).
int pti_worker_all_done(pt_worker *w, uint32_t *first_live);

// pti_worker_shutdown stops every server (the job is over); a server
// that closed its connection while answering counts as stopped.
int pti_worker_shutdown(pt_worker *w);

// pti_worker_rows_all reads every row that exists of table `table` on
// every server, ascending by id: *n of them, their ids in *ids and values
// in *vals (n x dim), both malloc'd, the caller's (NULL when n is 0). For
// a model file. PT_ENOMEM, or an error of a server.
int pti_worker_rows_all(pt_worker *w, int table, uint64_t **ids,
    float **vals, uint64_t *n);

// pti_worker_client is the worker's connection to the servers.
pti_client *pti_worker_client(pt_worker *w);

#endif // PT_CLIENT_API_H
