// cli/run/progress.h - the progress line of a job ("step 120/2340  epoch
// 1 ...") from the last complete row of a worker's CSV: the launcher's
// (run_impl.h has its own pair over a run_job), and that of worker 0 of
// a job started by hand (cli/proc/procs.c). Reads the file, writes
// stderr; from one thread at a time.
#ifndef PT_CLI_RUN_PROGRESS_H
#define PT_CLI_RUN_PROGRESS_H

#include <stdint.h>

typedef struct pti_progress {
	char csv[1024 + 32]; // the worker's CSV (PT_PATH_MAX + a name)
	uint64_t steps, spe; // the job's global steps, steps per epoch
	uint32_t batch;      // global batch
	double t0;           // the job's start, seconds since 1970
	int tty;             // stderr is a terminal: redraw one line
} pti_progress;

// pti_csv_last_row reads the last complete row of the worker CSV at path:
// its step, wall_s and loss. Returns 0, or -1 when there is none yet.
int pti_csv_last_row(const char *path, uint64_t *step, double *wall,
    double *loss);

// pti_progress_print prints p's line as of now (seconds since 1970);
// final: the last one, without an ETA. Nothing when the CSV has no row.
void pti_progress_print(const pti_progress *p, double now, int final);

#endif // PT_CLI_RUN_PROGRESS_H
