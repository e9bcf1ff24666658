// cli/run/tboard.h - TensorBoard event files of a job, written by the launcher
// from the job's own files (worker-R.csv, eval.csv) as they grow: DIR has
// a run per worker (worker-R/) with its loss, gradient norm, step,
// compute and communication times, staleness and learning rate at each
// step, and a run "eval/" with the evaluations' loss and accuracy, so that
// `tensorboard --logdir DIR` shows them. The format (docs/OUTPUTS.md):
// TFRecord framing with masked CRC-32C, Event and Summary protobufs with
// scalar values. Off the servers' and workers' path.
#ifndef PT_CLI_RUN_TBOARD_H
#define PT_CLI_RUN_TBOARD_H

#include <stdint.h>

typedef struct pti_tb pti_tb;

// pti_tb_open makes dir's runs for a job of `workers` workers whose files
// are in out, each an events file holding its first event. Returns 0 and
// *tb (the caller's, to pti_tb_close); PT_EIO naming the file or folder;
// PT_ENOMEM.
// t0 is the job's start (seconds since 1970), which the rows' wall_s
// count from.
int pti_tb_open(pti_tb **tb, const char *dir, const char *out,
    uint32_t workers, double t0);

// pti_tb_update appends the rows the job's files gained since the last
// call, and flushes. PT_EIO naming the events file that failed; PT_ENOMEM.
int pti_tb_update(pti_tb *tb);

// pti_tb_close closes the files and frees tb; NULL is fine.
void pti_tb_close(pti_tb *tb);

#endif // PT_CLI_RUN_TBOARD_H
