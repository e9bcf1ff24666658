// train/record.h - what a worker writes down: a row of worker-R.csv per
// step (and, every 10 s, a progress line on stderr), worker 0's rows of
// eval.csv and its final.csv, each with the columns of common/outputs.h.
#ifndef PT_TRAIN_RECORD_H
#define PT_TRAIN_RECORD_H

#include "train/trainer.h"

// pti_record_open opens this worker's CSVs once it knows where it
// starts: with append set (a resumed or restarted worker) it adds to the
// rows there. PT_EIO with a detail.
int pti_record_open(pti_trainer *w, int append);

// pti_record_step writes st's row of worker-R.csv (times in seconds).
// Each row is flushed; a write that failed (a full disk) is PT_EIO
// naming the file, here and below.
int pti_record_step(pti_trainer *w, const pti_step *st);

// pti_record_eval appends row (PTI_EV_N values) to eval.csv, opening it
// for appending when it is not open yet (a worker that took over from
// worker 0). PT_EIO.
int pti_record_eval(pti_trainer *w, const double *row);

// pti_record_final writes final.csv: its header and row (PTI_FN_N
// values), and closes it. PT_EIO.
int pti_record_final(pti_trainer *w, const double *row);

#endif // PT_TRAIN_RECORD_H
