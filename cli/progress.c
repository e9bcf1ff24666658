// cli/progress.c - the launcher's progress line, read from the CSV of the
// lowest-ranked worker still in the job (run_impl.h).
#include <stdio.h>
#include <string.h>

#include "outputs.h"
#include "run_impl.h"

// run_last_row reads the last complete line of the CSV of the lowest-
// ranked worker still in the job (worker 0 unless it was lost).
int pti_run_last_row(const run_job *j, uint64_t *step, double *wall,
    double *loss)
{
	char path[PT_PATH_MAX + 32], buf[4096];
	uint32_t r = 0;
	while (r + 1 < j->c.workers && j->lost[r])
		r++;
	snprintf(path, sizeof(path), "%s/worker-%u.csv", j->c.out, r);
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

void pti_run_progress(run_job *j, int final)
{
	uint64_t step;
	double wall, loss;
	if (pti_run_last_row(j, &step, &wall, &loss) != 0)
		return;
	double elapsed = pti_run_now() - j->t0;
	double rate = wall > 0 ? (double)step * j->c.batch / wall : 0;
	double eta = rate > 0 ? (double)(j->steps - step) * j->c.batch / rate
			      : 0;
	char line[256];
	snprintf(line, sizeof(line),
	    "step %llu/%llu  epoch %llu  loss %.4f  %.0f samples/s  "
	    "elapsed %.0fs  ETA %.0fs", (unsigned long long)step,
	    (unsigned long long)j->steps,
	    (unsigned long long)(step > 0 ? (step - 1) / j->spe + 1 : 0), loss,
	    rate, elapsed, final ? 0.0 : eta);
	if (j->tty)
		fprintf(stderr, "\r%-100s%s", line, final ? "\n" : "");
	else
		fprintf(stderr, "%s\n", line);
}

