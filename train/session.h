// train/session.h - a worker's membership of a parameter-server job:
// joining (again, after a server went away or came back from a
// checkpoint) and the end of the job, through the library's worker
// (client/api.h).
#ifndef PT_TRAIN_SESSION_H
#define PT_TRAIN_SESSION_H

#include <stdint.h>

#include "train/trainer.h"

// pti_session_join joins the job (the first time through the library's
// pt_worker_open) and pulls the parameters; *t, the step this worker is
// at, becomes the step to go on from (sync: the servers' version).
// Joining retries the errors a restarting server causes for at most
// --rpc-timeout seconds; a pull that meets one joins again.
int pti_session_join(pti_trainer *w, uint64_t *t);

// pti_session_recover: after error rv at step *t, rejoin and go on from
// the step the servers say (*t), when rv is what a restarting server
// causes (a closed connection, a server that does not know this worker
// yet, servers at different versions for a moment) and this is not the
// 50th rejoin in a row (*rejoins counts them). Else returns rv.
int pti_session_recover(pti_trainer *w, int rv, int *rejoins, uint64_t *t);

// pti_session_finish says done and waits until every worker has said
// done (or been lost) on every server. The lowest-ranked worker not lost
// (worker 0 unless it died) then takes the final parameters, evaluates
// and saves them (pti_eval_final, train_s the training time), and stops
// the servers. The others wait for that: should the finishing worker die
// first, the next one takes over; once the servers stop, they return.
// When the servers went back to an earlier step meanwhile (a sync job
// restarted from a checkpoint), *t is set to it and training goes on.
int pti_session_finish(pti_trainer *w, double train_s, uint64_t *t);

#endif // PT_TRAIN_SESSION_H
