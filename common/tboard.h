// common/tboard.h - TensorBoard event files of a job (option tensorboard
// DIR), written from the job's own files (worker-R.csv, eval.csv): by
// pstrain run's launcher as they grow, by pt_job_summary for a program's
// job once it has ended (pti_tb_write). DIR has
// a run per worker (worker-R/) with its loss, gradient norm, step,
// compute and communication times, staleness and learning rate at each
// step, a run "eval/" with the evaluations' loss and accuracy, and DIR's
// own run with the job's hparams and final scores, so that
// `tensorboard --logdir DIR` shows them. The format (docs/OUTPUTS.md):
// TFRecord framing with masked CRC-32C, Event and Summary protobufs with
// scalar values. Off the servers' and workers' path.
#ifndef PT_COMMON_TBOARD_H
#define PT_COMMON_TBOARD_H

#include <stdint.h>

typedef struct pti_tb pti_tb;
struct pti_config;

// pti_tb_open makes dir's runs for a job of `workers` workers whose files
// are in out, each an events file holding its first event, and the
// session run, dir itself, with the hparams plugin's session start: c's
// flags that shape training (mode, servers, workers, model, data, batch,
// lr, optimizer, staleness, seed, ...) and as group name all of them but
// the seed, so that TensorBoard's HParams tab groups a configuration's
// seeds. t0 is the job's start (seconds since 1970), which the rows'
// wall_s count from. Returns 0 and *tb (the caller's, to pti_tb_close);
// PT_EIO naming the file or folder; PT_ENOMEM.
int pti_tb_open(pti_tb **tb, const char *dir, const char *out,
    uint32_t workers, double t0, const struct pti_config *c);

// pti_tb_update appends the rows the job's files gained since the last
// call, and flushes. PT_EIO naming the events file that failed; PT_ENOMEM.
int pti_tb_update(pti_tb *tb);

// pti_tb_finish ends the session run: with done (summary.json written),
// the job's final scores from it (final and best-validation accuracy and
// loss, training time, samples/s, ...) as scalars at step `steps`, then
// the session's end, successful when done, failed otherwise. PT_EIO
// naming the events file.
int pti_tb_finish(pti_tb *tb, int done, uint64_t steps);

// pti_tb_close closes the files and frees tb; NULL is fine.
void pti_tb_close(pti_tb *tb);

// pti_tb_write writes c's job's event files into c->job.tensorboard at
// once, from the files in c->job.out, ending the session as
// pti_tb_finish does (done: its summary.json was written). 0, or the
// error of pti_tb_open, pti_tb_update or pti_tb_finish.
int pti_tb_write(const struct pti_config *c, int done, uint64_t steps);

#endif // PT_COMMON_TBOARD_H
