// cli/run/progress.c - the progress line, read from the CSV of the lowest-
// ranked worker still in the job: the launcher's (run_impl.h), and that
// of worker 0 of a job started by hand (progress.h).
#include "cli/run/progress.h"

#include <stdio.h>
#include <string.h>

#include "cli/run/run_impl.h"
#include "common/clock.h"
#include "common/outputs.h"

int pti_csv_last_row(const char *path, uint64_t *step, double *wall,
    double *loss)
{
	char buf[4096];
	FILE *f = fopen(path, "r");
	if (f == NULL)
		return -1;
	fseek(f, 0, SEEK_END);
	long size = ftell(f);
	long from = size > (long)sizeof(buf) - 1 ? size - (long)sizeof(buf) + 1
						 : 0;
	fseek(f, from, SEEK_SET);
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	if (n == 0 || buf[n - 1] != '\n')
		return -1;
	buf[n - 1] = '\0';
	char *last = strrchr(buf, '\n');
	last = last ? last + 1 : buf;
	double v[PTI_WK_LOSS + 1];
	if (pti_csv_fields(last, v, PTI_WK_LOSS + 1) != 0 || !(v[0] >= 0))
		return -1;
	*step = (uint64_t)v[PTI_WK_STEP];
	*wall = v[PTI_WK_WALL];
	*loss = v[PTI_WK_LOSS];
	return 0;
}

void pti_progress_print(const pti_progress *p, double now, int final)
{
	uint64_t step;
	double wall, loss;
	if (pti_csv_last_row(p->csv, &step, &wall, &loss) != 0)
		return;
	double rate = wall > 0 ? (double)step * p->batch / wall : 0;
	double eta = rate > 0 ? (double)(p->steps - step) * p->batch / rate
			      : 0;
	char line[256];
	snprintf(line, sizeof(line),
	    "step %llu/%llu  epoch %llu  loss %.4f  %.0f samples/s  "
	    "elapsed %.0fs  ETA %.0fs", (unsigned long long)step,
	    (unsigned long long)p->steps,
	    (unsigned long long)(step > 0 ? (step - 1) / p->spe + 1 : 0), loss,
	    rate, now - p->t0, final ? 0.0 : eta);
	if (p->tty)
		fprintf(stderr, "\r%-100s%s", line, final ? "\n" : "");
	else
		fprintf(stderr, "%s\n", line);
}

// run_csv is the CSV of the lowest-ranked worker still in the job (worker
// 0 unless it was lost).
static void run_csv(const run_job *j, char *path, size_t n)
{
	uint32_t r = 0;
	while (r + 1 < j->c.job.workers && j->lost[r])
		r++;
	snprintf(path, n, "%s/worker-%u.csv", j->c.job.out, r);
}

int pti_run_last_row(const run_job *j, uint64_t *step, double *wall,
    double *loss)
{
	char path[PT_PATH_MAX + 32];
	run_csv(j, path, sizeof(path));
	return pti_csv_last_row(path, step, wall, loss);
}

void pti_run_progress(run_job *j, int final)
{
	pti_progress p = {"", j->steps, j->spe, j->c.job.batch, j->t0, j->tty};
	run_csv(j, p.csv, sizeof(p.csv));
	pti_progress_print(&p, pti_wall_s(), final);
}
