// cli/compare/compare.h - what `pstrain compare`'s files share:
// compare.c (the command and the report), jobs.c (a set of modes and
// seeds: running the jobs, reading their files), modes.c (--modes),
// tune.c (--lr-grid) and plot.c (the CSV reader, curves across seeds,
// the gnuplot script).
// Internal to the pstrain binary; nothing here is thread-safe.
#ifndef PT_CLI_COMPARE_COMPARE_H
#define PT_CLI_COMPARE_COMPARE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "common/config.h"
#include "common/outputs.h"

#define PTI_CMP_MODES_MAX 32
#define PTI_CMP_EXTRA 16 // words of command line a mode's modifiers add
#define PTI_CMP_SEEDS_MAX 64
#define PTI_CMP_AUTO_CAP 10 // --seeds auto: seeds at most, unless given
#define PTI_CMP_SMOOTH 20 // steps in the moving average of loss curves
#define PTI_CMP_LAST_K 5  // evaluations the lastK_acc column averages

// One token of --modes (modes.c): a mode and its modifiers.
typedef struct pti_cmp_mode {
	char token[64]; // as given: "ssp:4"
	char label[64]; // a file name: "ssp-4"
	int mode;       // PT_MODE_*
	uint32_t staleness, backup;
	char extra[PTI_CMP_EXTRA][64]; // "--flag value" words of modifiers
	int n_extra;
	// The jobs' own, after the modifiers (their planned steps).
	uint32_t workers, batch, epochs;
	uint64_t steps;
} pti_cmp_mode;

// pti_cmp_modes_parse reads c->modes into ms[0..*n) (at most
// PTI_CMP_MODES_MAX): tokens MODE[:S][:key=value...], MODE sync, async,
// ssp (S its staleness bound) or allreduce, each modifier --key=value
// (key alone: the switch --key) of pstrain run for that mode's jobs,
// read by the flag table over c's flags. backup=B and warmup=E stand for
// backup-workers and warmup-epochs; optimizer=momentum and =nesterov for
// momentum:0.9 and nesterov:0.9, and an optimizer without --lr given
// runs at its usual lr. Flags compare sets per job (mode, staleness,
// seed, out, save-model, tensorboard, dashboard) are refused. check:
// also check each mode's flags together as pstrain run will (off for
// --report-only, whose jobs ran with flags of their own). Returns 0, or
// -1 after naming the token and what in it is wrong on stderr.
int pti_cmp_modes_parse(const pti_config *c, int check, pti_cmp_mode *ms,
    int *n);

// What became of one job (summary.json "outcome"; MISSING: no summary).
enum {
	PTI_OUT_OK,
	PTI_OUT_DIVERGED,
	PTI_OUT_COLLAPSED,
	PTI_OUT_DAMAGED,
	PTI_OUT_MISSING,
	PTI_OUT_N,
};
// pti_cmp_outcomes names them as summary.json does (jobs.c).
extern const char *const pti_cmp_outcomes[PTI_OUT_N];

// The report's numeric columns, in table order (compare.c names them).
enum {
	PTI_COL_FINAL_TEST,
	PTI_COL_BEST_VAL,
	PTI_COL_BEST_VAL_TEST,
	PTI_COL_LAST_K,
	PTI_COL_UPDATES_TO,
	PTI_COL_EXAMPLES_TO,
	PTI_COL_TRAIN_TO,
	PTI_COL_SAMPLES,
	PTI_COL_STEP_MS,
	PTI_COL_BOUND_MS,
	PTI_COL_EVAL_S,
	PTI_COL_MEAN_ST,
	PTI_COL_MAX_ST,
	PTI_COL_IDLE,
	PTI_COL_DROPPED,
	PTI_COL_LOST,
	// Shown only where a job has them (a click model's):
	PTI_COL_TEST_AUC,
	PTI_COL_BEST_VAL_TEST_AUC,
	PTI_COL_PLANTED_AUC,
	PTI_COL_PULLED,
	PTI_COL_ROW_STALE,
	PTI_COL_ROW_STALE_MAX,
	PTI_COLS,
};

// One (mode, seed) job: its folder and what compare read from it.
typedef struct pti_cmp_job {
	const pti_cmp_mode *m;
	uint64_t seed;
	char dir[PT_PATH_MAX + 96]; // DIR/LABEL/seed-S
	struct json_t *json;        // summary.json; NULL if missing
	int outcome;                // PTI_OUT_*
	int sel_test;        // eval.csv has no val_acc: selection on test
	double pwb;          // per_worker_batch; NaN when unknown
	int at_chance;       // diverged: final_test_acc entered as chance
	int ran;             // run or read by pti_cmp_set_run / _read
	double col[PTI_COLS]; // NaN: null or missing
} pti_cmp_job;

// --lr-grid (tune.c): each mode at each rate over the tuning seeds, and
// the rate picked for each (the index in lr of the best mean
// best_val_acc, a failed job counting 0). With --lr-grid auto each mode
// runs at the rates lr[lo[i]..hi[i]] only, at most PTI_TUNE_SPAN of
// them, ran[i][k] saying which were run; raw is the mean best_val_acc
// with failed jobs at theirs (a diverged one at 0): where every rate of
// a mode failed, auto widens its range upward only if raw rises to its
// highest rate, else downward.
#define PTI_TUNE_LR_MAX 16
#define PTI_TUNE_SPAN 8
typedef struct pti_cmp_tune {
	double lr[PTI_TUNE_LR_MAX]; // ascending
	int n_lr, n_modes, n_seeds;
	int is_auto, rounds; // --lr-grid auto; rounds of jobs it took
	char token[PTI_CMP_MODES_MAX][64], label[PTI_CMP_MODES_MAX][64];
	double score[PTI_CMP_MODES_MAX][PTI_TUNE_LR_MAX];
	double raw[PTI_CMP_MODES_MAX][PTI_TUNE_LR_MAX]; // failed jobs too
	int failed[PTI_CMP_MODES_MAX][PTI_TUNE_LR_MAX];
	unsigned char ran[PTI_CMP_MODES_MAX][PTI_TUNE_LR_MAX];
	int lo[PTI_CMP_MODES_MAX], hi[PTI_CMP_MODES_MAX];
	int chosen[PTI_CMP_MODES_MAX];
	char seeds[PT_PATH_MAX]; // the tuning seeds, as a list
} pti_cmp_tune;

// pti_cmp_tune_run runs (or, with --report-only, reads) the grid of c's
// --lr-grid into DIR/tune, picks each mode's rate and rewrites c->modes
// (and c->baseline) with each token at its rate (TOKEN:lr=RATE). 0, or
// the exit status after saying why. pti_cmp_tune_report writes the
// grid's table into report.md.
int pti_cmp_tune_run(pti_config *c, pti_cmp_tune *t);
void pti_cmp_tune_report(FILE *f, const pti_cmp_tune *t);

// The report's columns (jobs.c): the name in the table header ("_A"
// becomes the target), the summary.json key it comes from (NULL:
// computed from eval.csv) and the decimals shown.
typedef struct pti_cmp_col {
	const char *name, *key;
	int prec;
	int optional; // shown only when some job has a value
} pti_cmp_col;
extern const pti_cmp_col pti_cmp_cols[PTI_COLS];

// The whole comparison: modes, seeds and their jobs (jobs.c). The lr
// grid (tune.c) runs one of its own before the comparison.
typedef struct pti_cmp_set {
	const pti_config *c;
	pti_cmp_mode ms[PTI_CMP_MODES_MAX];
	int n_modes;
	uint64_t seeds[PTI_CMP_SEEDS_MAX];
	int n_seeds;
	pti_cmp_job *jobs; // jobs[mode * n_seeds + seed index]
	int sel_test;      // some job had no validation split
	struct pti_dash *dash; // --dashboard's server, or NULL
	const char *tb;    // --tensorboard DIR, or ""
	int base;          // --baseline's index in ms
	int auto_cap;      // --seeds auto: at most this many seeds; 0 not auto
	int auto_short;    // --report-only found fewer seeds than auto ran to
	const struct pti_cmp_tune *tune; // the lr grid's result, or NULL
	const char *conf; // --resume: compare.conf's text, written by
			  // pti_cmp_set_run once the jobs done agree
} pti_cmp_set;

// pti_cmp_conf_write writes text as DIR/compare.conf, whole or not at
// all (jobs.c). 0, or 1 after saying why.
int pti_cmp_conf_write(const char *dir, const char *text);

// pti_cmp_seeds_add turns --seeds into the list of its seeds and
// c->add_seeds more after the largest (--add-seeds), then zeroes
// add_seeds. 0, or -1 after saying why (a bad --seeds, auto, too many).
int pti_cmp_seeds_add(pti_config *c);

// pti_cmp_set_init fills s from c (its modes, seeds and out): a job per
// (mode, seed); the exit status on failure (2: a bad flag), else -1.
// pti_cmp_set_run runs every job, seed-major (with --resume, those not
// done already in c's out with the same flags); pti_cmp_set_read reads
// those already in c's out (--report-only): 0, or the exit status.
// pti_cmp_set_fini frees what s holds.
int pti_cmp_set_init(pti_cmp_set *s, const pti_config *c);
int pti_cmp_set_run(pti_cmp_set *s);
// pti_cmp_set_more adds the next seed (--seeds auto: n + 1) to s, its
// jobs not yet run; 0, or 1 after saying why.
int pti_cmp_set_more(pti_cmp_set *s);
int pti_cmp_set_read(pti_cmp_set *s);
void pti_cmp_set_fini(pti_cmp_set *s);

// pti_job_examples_at writes into at[i], for each of the n wall times
// t[i] (seconds since the job started), how many examples all workers of
// the job in dir had computed gradients on by then: their worker-R.csv
// rows with wall_s <= t[i], times pwb (the per-worker batch). Returns 0,
// or -1 when out of memory.
int pti_job_examples_at(const char *dir, double pwb, const double *t,
    double *at, size_t n);

// pti_cmp_plot writes DIR/plots/*.dat, DIR/plots/captions.md and
// DIR/plots/plot.gp (with the figure lr-grid when tune is not NULL) from
// the jobs (jobs[mode * n_seeds + seed], MISSING ones skipped), then runs
// gnuplot with DIR as its working directory, so every path in the script
// is relative and DIR can be moved: each figure as PNG, SVG and PDF.
// sel_test: accuracy curves are test accuracy. paper: --plot-style
// paper (print sizes and fonts, no titles in the figures). Returns 0, or
// -1 after printing why (gnuplot missing: how to install it).
int pti_cmp_plot(const char *dir, const pti_cmp_mode *ms, int n_modes,
    const pti_cmp_job *jobs, int n_seeds, int sel_test,
    const pti_cmp_tune *tune, int paper);

#endif // PT_CLI_COMPARE_COMPARE_H
