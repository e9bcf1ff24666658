// cli/compare/plot.c - the plots of `pstrain compare`: per mode, curves
// averaged over seeds point by point (common/stats.c) with a band of ± one
// sd, step time per worker and the staleness histogram, written as data
// files and one gnuplot script in DIR/plots/ with paths relative to DIR,
// then drawn as PNG and SVG by gnuplot run from DIR. Reads the jobs'
// CSV files (docs/OUTPUTS.md); knows nothing of how they were run.
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli/compare/compare.h"
#include "common/jsonio.h"
#include "common/proto.h"
#include "common/stats.h"

#define PLOT_WORKERS_MAX 256
#define PLOT_STALE_MAX 100000 // staleness buckets kept (beyond: dropped)
#define PLOT_EVAL_COLS 4      // examples, updates, wall_s, accuracy
#define PLOT_W0_COLS 5        // ... then loss and grad_norm (smoothed)
#define PLOT_POINTS_EVAL 200  // points of x an accuracy curve is read at
#define PLOT_POINTS_W0 400    // and a loss or gradient-norm curve

// The x columns of a curve, as its data files name them.
static const char *const x_files[] = {"examples", "updates", "train_s"};

// One seed's curve: columns side by side, the x columns first.
typedef struct curve {
	double *col[PLOT_W0_COLS];
	size_t n;
} curve;

// Per mode: how many points each data file got, and step times.
typedef struct plot_mode {
	size_t n_eval, n_w0, n_stale;
	double x_hi[3]; // the largest x its curves reach, per x axis
	size_t stale_max; // the highest staleness seen
	int n_workers;
} plot_mode;

typedef struct plot_set {
	const pti_cmp_mode *ms;
	int n_modes, sel_test;
	int paper; // --plot-style paper: print sizes, captions apart
	plot_mode pm[PTI_CMP_MODES_MAX];
} plot_set;

// ---------------------------------------------------------------------
// Reading one job

static void curve_free(curve *cv)
{
	for (int k = 0; k < PLOT_W0_COLS; k++)
		free(cv->col[k]);
	memset(cv, 0, sizeof(*cv));
}

// curve_alloc gives cv n_cols columns of n points; -1 out of memory.
static int curve_alloc(curve *cv, int n_cols, size_t n)
{
	memset(cv, 0, sizeof(*cv));
	cv->n = n;
	for (int k = 0; k < n_cols; k++)
		if ((cv->col[k] = calloc(n ? n : 1, sizeof(double))) == NULL) {
			curve_free(cv);
			return -1;
		}
	return 0;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

// examples is how many examples all workers had processed by wall time
// t: the worker rows (walls, sorted) with wall_s <= t, times the
// per-worker batch.
// first_past is the first index i of v[0..n) (ascending) with v[i] > t,
// or with v[i] >= t when `at` is set; n when there is none.
static size_t first_past(const double *v, size_t n, double t, int at)
{
	size_t lo = 0, hi = n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (v[mid] < t || (!at && v[mid] == t))
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static double examples(const double *walls, size_t n, double t, double pwb)
{
	return isnan(t) ? NAN : (double)first_past(walls, n, t, 0) * pwb;
}

// StepSum: per worker, sums over rows of step_ms, compute_ms, comm_ms.
typedef struct step_sum {
	double ms[3];
	double rows;
} step_sum;

// job_workers reads every worker-R.csv of dir: their wall_s values,
// sorted, into *walls, and step times added to sums. Returns the number
// of workers found, or -1 when out of memory.
static int job_workers(const char *dir, double **walls, size_t *n_walls,
    step_sum *sums)
{
	const char *want[] = {PTI_COL(pti_csv_worker, PTI_WK_WALL),
	    PTI_COL(pti_csv_worker, PTI_WK_STEP_MS),
	    PTI_COL(pti_csv_worker, PTI_WK_COMPUTE_MS),
	    PTI_COL(pti_csv_worker, PTI_WK_COMM_MS)};
	char path[PT_PATH_MAX + 160];
	int r;
	*walls = NULL;
	*n_walls = 0;
	for (r = 0; r < PLOT_WORKERS_MAX; r++) {
		pti_csv t;
		snprintf(path, sizeof(path), "%s/worker-%d.csv", dir, r);
		if (access(path, R_OK) != 0)
			break;
		if (pti_csv_read(path, 0, want, 4, &t) != 0)
			return -1;
		double *w = realloc(*walls, (*n_walls + t.n_rows + 1) *
		    sizeof(double));
		if (w == NULL) {
			free(t.v);
			return -1;
		}
		*walls = w;
		for (size_t i = 0; i < t.n_rows; i++) {
			const double *row = t.v + i * 4;
			if (!isnan(row[0]))
				w[(*n_walls)++] = row[0];
			if (isnan(row[1]))
				continue;
			for (int k = 0; k < 3; k++)
				sums[r].ms[k] += isnan(row[k + 1]) ? 0 : row[k + 1];
			sums[r].rows++;
		}
		free(t.v);
	}
	if (*n_walls > 0)
		qsort(*walls, *n_walls, sizeof(double), cmp_double);
	return r;
}

int pti_job_examples_at(const char *dir, double pwb, const double *t,
    double *at, size_t n)
{
	static step_sum sums[PLOT_WORKERS_MAX];
	double *walls;
	size_t n_walls;
	if (job_workers(dir, &walls, &n_walls, sums) < 0)
		return -1;
	for (size_t i = 0; i < n; i++)
		at[i] = examples(walls, n_walls, t[i], pwb);
	free(walls);
	return 0;
}

// job_eval_curve: eval.csv as examples, updates (`step`), seconds since
// the job's first step (its wall_s less first, summary.json's startup_s)
// and accuracy (val_acc, else test_acc).
static int job_eval_curve(const char *dir, const double *walls,
    size_t n_walls, double pwb, double first, curve *cv)
{
	const char *want[] = {PTI_COL(pti_csv_eval_val, PTI_EV_VERSION),
	    PTI_COL(pti_csv_eval_val, PTI_EV_WALL),
	    PTI_COL(pti_csv_eval_val, PTI_EV_ACC),
	    PTI_COL(pti_csv_eval_test, PTI_EV_ACC)};
	char path[PT_PATH_MAX + 160];
	pti_csv t;
	snprintf(path, sizeof(path), "%s/eval.csv", dir);
	if (pti_csv_read(path, 0, want, 4, &t) != 0 ||
	    curve_alloc(cv, PLOT_EVAL_COLS, t.n_rows) != 0) {
		free(t.v);
		return -1;
	}
	int acc = t.have[2] ? 2 : 3;
	for (size_t i = 0; i < t.n_rows; i++) {
		const double *row = t.v + i * 4;
		cv->col[0][i] = examples(walls, n_walls, row[1], pwb);
		cv->col[1][i] = row[0];
		cv->col[2][i] = row[1] - first;
		cv->col[3][i] = row[acc];
	}
	free(t.v);
	return 0;
}

// job_w0_curve: worker-0.csv as examples, updates (`version`; `step` in
// files from before the version column), seconds since the job's first
// step (as job_eval_curve's), and loss and grad_norm each smoothed over
// PTI_CMP_SMOOTH steps.
static int job_w0_curve(const char *dir, const double *walls,
    size_t n_walls, double pwb, double first, curve *cv)
{
	const char *want[] = {PTI_COL(pti_csv_worker, PTI_WK_VERSION),
	    PTI_COL(pti_csv_worker, PTI_WK_STEP),
	    PTI_COL(pti_csv_worker, PTI_WK_WALL),
	    PTI_COL(pti_csv_worker, PTI_WK_LOSS),
	    PTI_COL(pti_csv_worker, PTI_WK_GRAD_NORM)};
	char path[PT_PATH_MAX + 160];
	pti_csv t;
	double *raw = NULL;
	snprintf(path, sizeof(path), "%s/worker-0.csv", dir);
	if (pti_csv_read(path, 0, want, 5, &t) != 0 ||
	    curve_alloc(cv, PLOT_W0_COLS, t.n_rows) != 0 ||
	    (raw = malloc((t.n_rows + 1) * sizeof(double))) == NULL) {
		free(t.v);
		curve_free(cv);
		return -1;
	}
	int upd = t.have[0] ? 0 : 1;
	for (size_t i = 0; i < t.n_rows; i++) {
		const double *row = t.v + i * 5;
		cv->col[0][i] = examples(walls, n_walls, row[2], pwb);
		cv->col[1][i] = row[upd];
		cv->col[2][i] = row[2] - first;
	}
	for (int k = 3; k < 5; k++) {
		for (size_t i = 0; i < t.n_rows; i++)
			raw[i] = t.v[i * 5 + k];
		pti_stats_smooth(cv->col[k], raw, t.n_rows, PTI_CMP_SMOOTH);
	}
	free(raw);
	free(t.v);
	return 0;
}

// job_staleness adds staleness.csv's counts into hist[0..*n) (grown).
static int job_staleness(const char *dir, double **hist, size_t *n)
{
	const char *want[] = {PTI_COL(pti_csv_staleness, PTI_ST_STALENESS),
	    PTI_COL(pti_csv_staleness, PTI_ST_COUNT)};
	char path[PT_PATH_MAX + 160];
	pti_csv t;
	snprintf(path, sizeof(path), "%s/staleness.csv", dir);
	if (pti_csv_read(path, 0, want, 2, &t) != 0)
		return -1;
	for (size_t i = 0; i < t.n_rows; i++) {
		double s = t.v[i * 2], count = t.v[i * 2 + 1];
		if (isnan(s) || isnan(count) || s < 0 || s >= PLOT_STALE_MAX)
			continue;
		size_t k = (size_t)s;
		if (k >= *n) {
			double *h = realloc(*hist, (k + 1) * sizeof(double));
			if (h == NULL) {
				free(t.v);
				return -1;
			}
			for (size_t z = *n; z <= k; z++)
				h[z] = 0;
			*hist = h;
			*n = k + 1;
		}
		(*hist)[k] += count;
	}
	free(t.v);
	return 0;
}

// ---------------------------------------------------------------------
// Data files

// One seed's (x, y) points of one curve: rows where both are numbers,
// x never decreasing (a row that goes back is left out).
typedef struct xy {
	double *x, *y;
	size_t n;
} xy;

static int xy_make(xy *p, const curve *cv, int xc, int yc)
{
	p->n = 0;
	p->x = malloc((cv->n + 1) * sizeof(double));
	p->y = malloc((cv->n + 1) * sizeof(double));
	if (p->x == NULL || p->y == NULL)
		return -1;
	for (size_t i = 0; i < cv->n; i++) {
		double x = cv->col[xc][i], y = cv->col[yc][i];
		if (!isfinite(x) || !isfinite(y) ||
		    (p->n > 0 && x < p->x[p->n - 1]))
			continue;
		p->x[p->n] = x;
		p->y[p->n++] = y;
	}
	return 0;
}

// xy_at is p's y at x = g, on the straight line between the points
// around g; NaN outside p's range.
static double xy_at(const xy *p, double g)
{
	if (p->n == 0 || g < p->x[0] || g > p->x[p->n - 1])
		return NAN;
	size_t lo = first_past(p->x, p->n, g, 1); // the first x >= g
	if (lo == 0 || p->x[lo] == g)
		return p->y[lo];
	double t = (g - p->x[lo - 1]) / (p->x[lo] - p->x[lo - 1]);
	return p->y[lo - 1] + t * (p->y[lo] - p->y[lo - 1]);
}

// curves_write writes the curves of the seeds' cvs (jobs[s]'s, missing
// ones skipped) against x column xc to path: the mean and sample sd over
// seeds of each y column ycs[0..n_y) at `points` values of x spread
// evenly over the range every seed covers, each seed's y there read on
// the straight line between its rows around it, so that seeds are
// aligned by x (examples, updates or seconds), never by row. Where the
// seeds share no range, over the range any covers, n saying how many
// seeds each point averages. Rows "x n y sd ...", sd 0 with one seed.
static int curves_write(const char *path, const char *what,
    const char *x_name, const pti_cmp_job *jobs, const curve *cvs,
    int n_seeds, int xc, const int *ycs, int n_y, const char *y_names,
    size_t points, double *x_hi)
{
	static xy p[PTI_CMP_SEEDS_MAX][PLOT_W0_COLS];
	double lo_all = INFINITY, hi_all = -INFINITY, lo = -INFINITY,
	       hi = INFINITY;
	int rv = -1, used = 0;
	FILE *f = fopen(path, "w");
	memset(p, 0, sizeof(p));
	if (f == NULL)
		return -1;
	fprintf(f, "# %s against %s: per seed, x from .. to (rows):", what,
	    x_name);
	for (int s = 0; s < n_seeds; s++) {
		if (jobs[s].outcome == PTI_OUT_MISSING)
			continue;
		for (int k = 0; k < n_y; k++)
			if (xy_make(&p[s][k], &cvs[s], xc, ycs[k]) != 0)
				goto out;
		const xy *q = &p[s][0];
		if (q->n == 0) {
			fprintf(f, " seed %llu: none;", (unsigned long long)
			    jobs[s].seed);
			continue;
		}
		fprintf(f, " seed %llu: %g .. %g (%zu);", (unsigned long long)
		    jobs[s].seed, q->x[0], q->x[q->n - 1], cvs[s].n);
		lo_all = fmin(lo_all, q->x[0]);
		hi_all = fmax(hi_all, q->x[q->n - 1]);
		lo = fmax(lo, q->x[0]);
		hi = fmin(hi, q->x[q->n - 1]);
		used++;
	}
	fprintf(f, "\n");
	if (used > 0 && lo <= hi) {
		fprintf(f, "# mean and sample sd over the %d seeds at %zu "
		    "points of the range every seed covers,\n# each seed's "
		    "value there on the line between its rows around it\n",
		    used, points);
	} else if (used > 0) {
		fprintf(f, "# the seeds share no range of x: the range any "
		    "covers, n seeds at each point\n");
		lo = lo_all;
		hi = hi_all;
	}
	fprintf(f, "# %s n %s\n", x_name, y_names);
	if (used > 0 && hi >= lo && hi > *x_hi)
		*x_hi = hi;
	if (used == 0 || hi < lo)
		points = 0;
	else if (hi == lo)
		points = 1;
	for (size_t i = 0; i < points; i++) {
		double g = points > 1 ? lo + (hi - lo) * (double)i /
		    (double)(points - 1) : lo, ys[PTI_CMP_SEEDS_MAX];
		pti_stats st[PLOT_W0_COLS];
		for (int k = 0; k < n_y; k++) {
			for (int s = 0; s < n_seeds; s++)
				ys[s] = xy_at(&p[s][k], g);
			pti_stats_of(&st[k], ys, (uint32_t)n_seeds);
		}
		fprintf(f, "%.6g %u", g, st[0].n);
		for (int k = 0; k < n_y; k++)
			fprintf(f, " %.6g %.6g", st[k].mean, st[k].n > 1 ?
			    st[k].sd : 0.0);
		fprintf(f, "\n");
	}
	rv = 0;
out:
	for (int s = 0; s < n_seeds; s++)
		for (int k = 0; k < n_y; k++) {
			free(p[s][k].x);
			free(p[s][k].y);
		}
	if (fclose(f) != 0)
		rv = -1;
	return rv;
}

// mode_data reads mode i's jobs and writes plots/LABEL-eval.dat,
// plots/LABEL-worker0.dat, plots/LABEL-staleness.dat and mode i's block
// of step-time.dat (open in steps).
static int mode_data(plot_set *p, const char *dir, int i,
    const pti_cmp_job *jobs, int n_seeds, FILE *steps)
{
	static step_sum sums[PLOT_WORKERS_MAX];
	curve ev[PTI_CMP_SEEDS_MAX], w0[PTI_CMP_SEEDS_MAX];
	char path[PT_PATH_MAX + 160];
	const char *label = p->ms[i].label;
	double *walls = NULL, *hist = NULL;
	size_t n_walls, n_hist = 0;
	int rv = -1, seeds = 0;
	plot_mode *pm = &p->pm[i];

	memset(sums, 0, sizeof(sums));
	memset(ev, 0, sizeof(ev));
	memset(w0, 0, sizeof(w0));
	for (int s = 0; s < n_seeds; s++) {
		const pti_cmp_job *j = &jobs[s];
		int w;
		if (j->outcome == PTI_OUT_MISSING)
			continue;
		// Time axes start at the job's first step (a summary of
		// before startup_s: at its start).
		double first = pti_json_num(j->json, "startup_s");
		first = isnan(first) ? 0 : first;
		if ((w = job_workers(j->dir, &walls, &n_walls, sums)) < 0 ||
		    job_eval_curve(j->dir, walls, n_walls, j->pwb, first,
			&ev[s]) ||
		    job_w0_curve(j->dir, walls, n_walls, j->pwb, first,
			&w0[s]) ||
		    job_staleness(j->dir, &hist, &n_hist))
			goto out;
		pm->n_workers = w > pm->n_workers ? w : pm->n_workers;
		free(walls);
		walls = NULL;
		seeds++;
	}
	// Per x axis, the evaluations' accuracy and worker 0's smoothed
	// loss and gradient norm.
	static const int acc_col[] = {3}, w0_cols[] = {3, 4};
	for (int x = 0; x < 3; x++) {
		snprintf(path, sizeof(path), "%s/plots/%s-eval-%s.dat", dir,
		    label, x_files[x]);
		if (curves_write(path, p->ms[i].token, x_files[x], jobs, ev,
		    n_seeds, x, acc_col, 1, "acc acc_sd",
		    PLOT_POINTS_EVAL, &pm->x_hi[x]) != 0)
			goto out;
		snprintf(path, sizeof(path), "%s/plots/%s-worker0-%s.dat",
		    dir, label, x_files[x]);
		if (curves_write(path, p->ms[i].token, x_files[x], jobs, w0,
		    n_seeds, x, w0_cols, 2, "loss loss_sd grad_norm "
		    "grad_norm_sd (worker 0's, each smoothed over its steps "
		    "first)", PLOT_POINTS_W0, &pm->x_hi[x]) != 0)
			goto out;
	}
	for (int s = 0; s < n_seeds; s++) {
		pm->n_eval = ev[s].n > pm->n_eval ? ev[s].n : pm->n_eval;
		pm->n_w0 = w0[s].n > pm->n_w0 ? w0[s].n : pm->n_w0;
	}
	snprintf(path, sizeof(path), "%s/plots/%s-staleness.dat", dir, label);
	FILE *f = fopen(path, "w");
	if (f == NULL)
		goto out;
	fprintf(f, "# %s: staleness, count (staleness.csv summed over %d "
	    "seeds)\n", p->ms[i].token, seeds);
	for (size_t k = 0; k < n_hist; k++)
		if (hist[k] > 0) {
			fprintf(f, "%zu %.0f\n", k, hist[k]);
			pm->n_stale++;
			pm->stale_max = k;
		}
	fclose(f);
	// One block per mode (gnuplot's `index`), one row per worker.
	fprintf(steps, "%s# %s\n", i ? "\n\n" : "", p->ms[i].token);
	for (int r = 0; r < pm->n_workers; r++) {
		double d = sums[r].rows > 0 ? sums[r].rows : 1;
		double other = (sums[r].ms[0] - sums[r].ms[1] -
		    sums[r].ms[2]) / d;
		fprintf(steps, "w%d %.4f %.4f %.4f\n", r, sums[r].ms[1] / d,
		    sums[r].ms[2] / d, other > 0 ? other : 0);
	}
	if (pm->n_workers == 0) // an empty block would merge with the next
		fprintf(steps, "- 0 0 0\n");
	rv = 0;
out:
	for (int s = 0; s < n_seeds; s++) {
		curve_free(&ev[s]);
		curve_free(&w0[s]);
	}
	free(walls);
	free(hist);
	return rv;
}

// ---------------------------------------------------------------------
// The gnuplot script

enum { X_EXAMPLES, X_UPDATES, X_WALL, N_X };
enum { Y_LOSS, Y_ACC, Y_GRAD };
enum { FIG_CURVE, FIG_PANELS, FIG_STEPS, FIG_STALE };

static const char *x_labels[N_X] = {"examples processed (all workers)",
    "updates applied (parameter version)",
    "training time: seconds since the first step"};
static const char *x_short[N_X] = {"examples", "updates",
    "seconds of training"};

// A curve's y: data file, mean column (sd next to it) and axis label
// (NULL: accuracy, whose label depends on the split).
// brief: the label of a paper figure, whose caption says the rest.
static const struct plot_y {
	const char *file;
	int col;
	const char *label, *brief;
} plot_ys[] = {
    [Y_LOSS] = {"worker0", 3, "training loss of worker 0 (mean of 20 "
	"steps)", "training loss"},
    [Y_ACC] = {"eval", 3, NULL, NULL},
    [Y_GRAD] = {"worker0", 5, "gradient norm of worker 0 (mean of 20 "
	"steps)", "gradient norm"},
};

// Each figure is written as NAME.png, NAME.svg and NAME.pdf in DIR: in
// pixels on screen (the PDF at 100 per inch), in inches for paper.
static const struct figure {
	const char *name;
	int kind, y, x, width, height;
} figures[] = {
    {"loss-examples", FIG_CURVE, Y_LOSS, X_EXAMPLES, 900, 600},
    {"loss-updates", FIG_CURVE, Y_LOSS, X_UPDATES, 900, 600},
    {"loss-wall", FIG_CURVE, Y_LOSS, X_WALL, 900, 600},
    {"accuracy-examples", FIG_CURVE, Y_ACC, X_EXAMPLES, 900, 600},
    {"accuracy-updates", FIG_CURVE, Y_ACC, X_UPDATES, 900, 600},
    {"accuracy-wall", FIG_CURVE, Y_ACC, X_WALL, 900, 600},
    {"loss", FIG_PANELS, Y_LOSS, 0, 1800, 600},
    {"accuracy", FIG_PANELS, Y_ACC, 0, 1800, 600},
    {"grad-norm", FIG_CURVE, Y_GRAD, X_EXAMPLES, 900, 600},
    {"step-time", FIG_STEPS, 0, 0, 1000, 600},
    {"staleness", FIG_STALE, 0, 0, 900, 600},
};

// Mode k's line: colour, dash type and point type all differ between
// neighbouring modes, so curves stay apart in grey print too.
static const char *colours[] = {"#1f77b4", "#d62728", "#2ca02c",
    "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf"};
static const int points[] = {7, 5, 9, 11, 13, 4, 6, 8, 10, 12};

static void gp_styles(FILE *f, int n_modes)
{
	for (int k = 0; k < n_modes; k++)
		fprintf(f, "set style line %d lc rgb '%s' dt %d pt %d ps 1.2 "
		    "lw 2\n", k + 1, colours[k % 8], 1 + k % 5,
		    points[k % 10]);
}

// gp_none ends a plot command that had no curve: an empty frame.
static void gp_none(FILE *f)
{
	fprintf(f, "unset logscale\nset label 1 'no data' at graph 0.5,0.5 "
	    "center\nplot [0:1] [0:1] -1 notitle\nunset label 1\n");
}

static const char *y_label(const plot_set *p, int y)
{
	if (plot_ys[y].label != NULL)
		return plot_ys[y].label;
	return p->sel_test ? "test accuracy (no validation split)"
			   : "validation accuracy";
}

// y_axis is y's axis label: on paper the short one.
static const char *y_axis(const plot_set *p, int y)
{
	if (!p->paper)
		return y_label(p, y);
	if (plot_ys[y].brief != NULL)
		return plot_ys[y].brief;
	return p->sel_test ? "test accuracy" : "validation accuracy";
}

// nice_step is the tick step of 1, 2 or 5 times a power of ten that
// gives at most `ticks` intervals over [0, hi].
static double nice_step(double hi, int ticks)
{
	double v = hi / ticks, e = pow(10, floor(log10(v)));
	return v <= e ? e : v <= 2 * e ? 2 * e : v <= 5 * e ? 5 * e : 10 * e;
}

// gp_curves writes one plot: per mode with points, its band (mean ± sd)
// and its mean line, y against x. The key goes under the axes, off the
// data; large numbers of examples and updates are written 200k, 1.5M,
// so that tick labels keep apart in a third of a figure's width.
static void gp_curves(FILE *f, const plot_set *p, int y, int x)
{
	const struct plot_y *py = &plot_ys[y];
	int first = 1;
	// Large x in thousands or millions: short tick labels.
	double hi = 0, scale = 1;
	for (int i = 0; i < p->n_modes; i++)
		hi = fmax(hi, p->pm[i].x_hi[x]);
	if (x != X_WALL && hi >= 2e6)
		scale = 1e6;
	else if (x != X_WALL && hi >= 2e4)
		scale = 1e3;
	fprintf(f, "set xlabel '%s%s'\nset ylabel '%s'\nset key below "
	    "horizontal\n", p->paper ? x_short[x] : x_labels[x], scale ==
	    1e6 ? ", millions" : scale == 1e3 ? ", thousands" : "",
	    y_axis(p, y));
	if (hi > 0) // few enough ticks for a third of a figure
		fprintf(f, "set xtics %g\n", nice_step(hi / scale,
		    p->paper ? 4 : 6));
	if (y == Y_ACC) // a band past 0 or 1 is cut there
		fprintf(f, "set yrange [0 < * : * < 1]\n");
	for (int i = 0; i < p->n_modes; i++) {
		size_t n = y == Y_ACC ? p->pm[i].n_eval : p->pm[i].n_w0;
		size_t pts = y == Y_ACC ? PLOT_POINTS_EVAL : PLOT_POINTS_W0;
		if (n == 0)
			continue;
		fprintf(f, "%s'plots/%s-%s-%s.dat' using ($1/%g):($%d-$%d):"
		    "($%d+$%d) with filledcurves fs transparent solid 0.2 "
		    "noborder ls %d notitle, \\\n     '' using ($1/%g):%d with "
		    "linespoints ls %d pi %zu title '%s'", first ? "plot " :
		    ", \\\n     ", p->ms[i].label, py->file, x_files[x], scale,
		    py->col, py->col + 1, py->col, py->col + 1, i + 1, scale,
		    py->col, i + 1, pts / 12, p->ms[i].token);
		first = 0;
	}
	if (first)
		gp_none(f);
	else
		fprintf(f, "\n");
}

// gp_steps writes the step-time chart: per mode (a group) a bar per
// worker, stacked compute, communication and the rest of the step.
static void gp_steps(FILE *f, const plot_set *p)
{
	static const char *parts[3][3] = {{"#4c72b0", "solid 0.85",
	    "compute"}, {"#dd8452", "pattern 4", "communication (push, "
	    "pull, waiting)"}, {"#8c8c8c", "pattern 2", "other"}};
	fprintf(f, "set style data histograms\nset style histogram "
	    "rowstacked title offset 0,-1\nset boxwidth 0.8\nset xlabel "
	    "' ' offset 0,-1\nset ylabel 'mean step time per worker (ms)'\n"
	    "set key above horizontal\nset grid noxtics\nplot ");
	for (int i = 0; i < p->n_modes; i++) {
		fprintf(f, "%snewhistogram '%s'", i ? ", \\\n     " : "",
		    p->ms[i].token);
		for (int k = 0; k < 3; k++)
			fprintf(f, ", \\\n     '%s' index %d using %d%s lc rgb "
			    "'%s' fs %s border -1 %s%s%s", k == 0 && i == 0
			    ? "plots/step-time.dat" : "", i, k + 2, k == 0
			    ? ":xtic(1)" : "", parts[k][0], parts[k][1], i
			    ? "notitle" : "title '", i ? "" : parts[k][2], i
			    ? "" : "'");
	}
	fprintf(f, "\n");
}

// gp_stale writes the staleness histogram, one line per mode, log y. A
// mode whose every gradient had one staleness (sync: 0) is one point,
// drawn large and last so that no line hides it, its title saying where;
// the servers' last bucket, PT_STALE_BUCKETS - 1, counts that staleness
// and above, and its tick says so.
static void gp_stale(FILE *f, const plot_set *p)
{
	int first = 1;
	fprintf(f, "set logscale y\nset xlabel 'staleness (updates applied "
	    "between the pull and the push of a gradient)'\nset ylabel "
	    "'gradients (summed over seeds)'\nset key below horizontal\n"
	    "set xrange [-0.5:*]\nset offsets 0, 0.5, 0, 0\n");
	size_t most = 0;
	for (int i = 0; i < p->n_modes; i++)
		most = p->pm[i].stale_max > most ? p->pm[i].stale_max : most;
	if (most >= PT_STALE_BUCKETS - 1)
		fprintf(f, "set xtics 0, 10, %d\nset xtics add ('%d+' %d)\n",
		    PT_STALE_BUCKETS - 4, PT_STALE_BUCKETS - 1,
		    PT_STALE_BUCKETS - 1);
	else if (most <= 20) // else gnuplot's own tics: whole numbers anyway
		fprintf(f, "set xtics 1\n");
	for (int pass = 0; pass < 2; pass++)
		for (int i = 0; i < p->n_modes; i++) {
			int one = p->pm[i].n_stale == 1;
			if (p->pm[i].n_stale == 0 || one != pass)
				continue;
			fprintf(f, "%s'plots/%s-staleness.dat' using 1:2 with "
			    "linespoints ls %d%s title '%s", first ? "plot " :
			    ", \\\n     ", p->ms[i].label, i + 1, one ?
			    " ps 2.5" : "", p->ms[i].token);
			if (one)
				fprintf(f, " (every gradient at %zu)",
				    p->pm[i].stale_max);
			fprintf(f, "'");
			first = 0;
		}
	if (first)
		gp_none(f);
	else
		fprintf(f, "\n");
}

// The output formats: each figure as PNG, SVG and PDF.
enum { OUT_PNG, OUT_SVG, OUT_PDF, N_OUT };
static const char *const out_ext[N_OUT] = {"png", "svg", "pdf"};

// gp_terminal sets the terminal and output for format t of a figure of
// w x h (screen pixels; paper: a one-column figure, 3.4 x 2.6 inches,
// or twice as wide for panels, w >= 1800, with fonts for print).
static void gp_terminal(FILE *f, const plot_set *p, const char *name,
    int t, int w, int h)
{
	double in_w = p->paper ? (w >= 1800 ? 7.0 : 3.4) : w / 100.0,
	       in_h = p->paper ? 2.6 : h / 100.0;
	if (t == OUT_PNG && p->paper) // 300 dots per inch
		fprintf(f, "eval('set terminal '.png_term.' size %d,%d "
		    "fontscale 1.9 linewidth 3 noenhanced')\n",
		    (int)(in_w * 300), (int)(in_h * 300));
	else if (t == OUT_PNG)
		fprintf(f, "eval('set terminal '.png_term.' size %d,%d "
		    "noenhanced')\n", w, h);
	else if (t == OUT_SVG)
		fprintf(f, "set terminal svg size %d,%d%s noenhanced\n",
		    (int)(in_w * 100), (int)(in_h * 100), p->paper ?
		    " font 'sans,9'" : "");
	else
		fprintf(f, "set terminal pdfcairo size %.2fin,%.2fin font "
		    "'sans,%d' noenhanced\n", in_w, in_h, p->paper ? 7 : 9);
	fprintf(f, "set output '%s.%s'\n", name, out_ext[t]);
}

// fig_caption writes figure g's caption into cap (size n): the title on
// screen, the caption in plots/captions.md.
static void fig_caption(const plot_set *p, const struct figure *g,
    char *cap, size_t n)
{
	switch (g->kind) {
	case FIG_CURVE:
	case FIG_PANELS:
		snprintf(cap, n, "%s, mean ± sd over seeds%s", y_label(p, g->y),
		    g->kind == FIG_PANELS ? " (against examples, updates and "
		    "seconds)" : "");
		break;
	case FIG_STEPS:
		snprintf(cap, n, "step time per worker, mean over steps of "
		    "every seed");
		break;
	default:
		snprintf(cap, n, "staleness of applied gradients");
	}
}

// gp_figure writes figure g once per output format.
static void gp_figure(FILE *f, const plot_set *p, const struct figure *g)
{
	char cap[256];
	fig_caption(p, g, cap, sizeof(cap));
	for (int t = 0; t < N_OUT; t++) {
		fprintf(f, "\nreset\n");
		gp_terminal(f, p, g->name, t, g->width, g->height);
		fprintf(f, "set grid\n");
		gp_styles(f, p->n_modes);
		if (!p->paper && g->kind != FIG_PANELS)
			fprintf(f, "set title '%s'\n", cap);
		switch (g->kind) {
		case FIG_CURVE:
			gp_curves(f, p, g->y, g->x);
			break;
		case FIG_PANELS:
			if (p->paper)
				fprintf(f, "set multiplot layout 1,3\n");
			else
				fprintf(f, "set multiplot layout 1,3 title "
				    "'%s'\n", cap);
			for (int x = 0; x < N_X; x++)
				gp_curves(f, p, g->y, x);
			fprintf(f, "unset multiplot\n");
			break;
		case FIG_STEPS:
			gp_steps(f, p);
			break;
		case FIG_STALE:
			gp_stale(f, p);
			break;
		}
		fprintf(f, "set output\n");
	}
}

// grid_data writes DIR/plots/lr-grid.dat: one block per mode of the lr
// grid, a row per rate it ran (rate, mean best_val_acc, failed jobs,
// picked).
static int grid_data(const char *dir, const pti_cmp_tune *t)
{
	char path[PT_PATH_MAX + 64];
	snprintf(path, sizeof(path), "%s/plots/lr-grid.dat", dir);
	FILE *f = fopen(path, "w");
	if (f == NULL)
		return -1;
	fprintf(f, "# --lr-grid: lr, mean best_val_acc over the tuning seeds "
	    "(a failed job counts 0),\n# failed jobs, picked (1); one block "
	    "per mode\n");
	for (int i = 0; i < t->n_modes; i++) {
		fprintf(f, "# %s\n", t->label[i]);
		for (int k = 0; k < t->n_lr; k++)
			if (t->ran[i][k])
				fprintf(f, "%g %.6f %d %d\n", t->lr[k],
				    t->score[i][k], t->failed[i][k],
				    k == t->chosen[i]);
		fprintf(f, "\n\n");
	}
	return fclose(f);
}

// gp_grid writes the figure lr-grid: each mode's mean best validation
// accuracy against the rate, failed rates ringed, each pick starred.
static void gp_grid(FILE *f, const plot_set *p, const pti_cmp_tune *t)
{
	for (int fm = 0; fm < N_OUT; fm++) {
		fprintf(f, "\nreset\n");
		gp_terminal(f, p, "lr-grid", fm, 900, 550);
		fprintf(f, "set grid\n");
		gp_styles(f, t->n_modes);
		if (!p->paper)
			fprintf(f, "set title 'the lr grid, over the tuning "
			    "seeds'\n");
		fprintf(f, "set logscale x 2\nset xlabel 'learning rate "
		    "(--lr)'\nset ylabel 'mean best validation accuracy'\n"
		    "set key below horizontal\nset xtics (");
		for (int k = 0; k < t->n_lr; k++)
			fprintf(f, "%s'%g' %g", k ? ", " : "", t->lr[k], t->lr[k]);
		fprintf(f, ")\nset offsets graph 0.05, graph 0.05, 0, 0\n"
		    "plot ");
		for (int i = 0; i < t->n_modes; i++)
			fprintf(f, "'plots/lr-grid.dat' index %d using 1:2 with "
			    "linespoints ls %d title '%s', '' index %d using "
			    "1:($3 > 0 ? $2 : 1/0) with points pt 6 ps 2.5 lc "
			    "rgb 'black' notitle, '' index %d using 1:($4 > 0 ? "
			    "$2 : 1/0) with points pt 3 ps 3 lc rgb 'black' "
			    "notitle, ", i, i + 1, t->label[i], i, i);
		fprintf(f, "1/0 with points pt 6 ps 2.5 lc rgb 'black' title "
		    "'a tuning job failed (counts 0)', 1/0 with points pt 3 "
		    "ps 3 lc rgb 'black' title 'the rate picked'\n"
		    "set output\n");
	}
}

// captions_write writes DIR/plots/captions.md: each figure's caption,
// the title it has on screen (paper figures have none).
static int captions_write(const char *dir, const plot_set *p, int grid)
{
	char path[PT_PATH_MAX + 64], cap[256];
	snprintf(path, sizeof(path), "%s/plots/captions.md", dir);
	FILE *f = fopen(path, "w");
	if (f == NULL)
		return -1;
	fprintf(f, "# Figures of this comparison (.png, .svg, .pdf)\n\n");
	for (size_t g = 0; g < sizeof(figures) / sizeof(figures[0]); g++) {
		fig_caption(p, &figures[g], cap, sizeof(cap));
		fprintf(f, "- **%s**: %s.\n", figures[g].name, cap);
	}
	if (grid)
		fprintf(f, "- **lr-grid**: the lr grid, over the tuning "
		    "seeds.\n");
	return fclose(f);
}

// gp_run runs gnuplot on plots/plot.gp from dir.
static int gp_run(const char *dir)
{
	int status = 0;
	fflush(stdout);
	pid_t pid = fork();
	if (pid == 0) {
		if (chdir(dir) != 0)
			_exit(126);
		execlp("gnuplot", "gnuplot", "plots/plot.gp", (char *)NULL);
		_exit(127);
	}
	if (pid < 0 || waitpid(pid, &status, 0) != pid) {
		fprintf(stderr, "pstrain compare: cannot run gnuplot\n");
		return -1;
	}
	if (WIFEXITED(status) && WEXITSTATUS(status) == 127) {
		fprintf(stderr, "pstrain compare: gnuplot not found: install "
		    "it (e.g. apt-get install gnuplot-nox), then re-plot with "
		    "`cd %s && gnuplot plots/plot.gp`\n", dir);
		return -1;
	}
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		fprintf(stderr, "pstrain compare: gnuplot plots/plot.gp failed "
		    "(run from %s)\n", dir);
		return -1;
	}
	return 0;
}

int pti_cmp_plot(const char *dir, const pti_cmp_mode *ms, int n_modes,
    const pti_cmp_job *jobs, int n_seeds, int sel_test,
    const pti_cmp_tune *tune, int paper)
{
	static plot_set p;
	char path[PT_PATH_MAX + 64];
	memset(&p, 0, sizeof(p));
	p.ms = ms;
	p.n_modes = n_modes;
	p.sel_test = sel_test;
	p.paper = paper;
	snprintf(path, sizeof(path), "%s/plots/step-time.dat", dir);
	FILE *steps = fopen(path, "w");
	if (steps == NULL)
		goto fail;
	fprintf(steps, "# worker, compute_ms, comm_ms, rest of step_ms: "
	    "means over the steps of every seed\n# (worker-R.csv), one "
	    "block per mode\n");
	for (int i = 0; i < n_modes; i++)
		if (mode_data(&p, dir, i, jobs + (size_t)i * n_seeds, n_seeds,
		    steps) != 0) {
			fclose(steps);
			goto fail;
		}
	if (fclose(steps) != 0)
		goto fail;
	snprintf(path, sizeof(path), "%s/plots/plot.gp", dir);
	FILE *f = fopen(path, "w");
	if (f == NULL)
		goto fail;
	fprintf(f, "# written by pstrain compare. Every path is relative to "
	    "the comparison's\n# folder: re-plot with `cd DIR && gnuplot "
	    "plots/plot.gp`.\npng_term = strstrt(GPVAL_TERMINALS, "
	    "'pngcairo') > 0 ? 'pngcairo' : 'png'\n");
	for (size_t g = 0; g < sizeof(figures) / sizeof(figures[0]); g++)
		gp_figure(f, &p, &figures[g]);
	if (captions_write(dir, &p, tune != NULL) != 0) {
		fclose(f);
		goto fail;
	}
	if (tune != NULL)
		gp_grid(f, &p, tune);
	if (fclose(f) != 0 || (tune != NULL && grid_data(dir, tune) != 0))
		goto fail;
	return gp_run(dir);
fail:
	fprintf(stderr, "pstrain compare: %s: %s\n", path,
	    errno ? strerror(errno) : "out of memory");
	return -1;
}
