// cli/compare/compare.c - `pstrain compare`: `pstrain run` once per mode
// and seed (sync, async, ssp:S with modifiers; seeds 1..N or a list) with
// otherwise identical flags, seed-major so that slow drift of the machine
// spreads over the modes (jobs.c; each mode's rate first with --lr-grid,
// tune.c); then DIR/report.md, mean ± sd, min and max over seeds per
// mode and paired differences (common/stats.c), and plots (plot.c). It
// reads the jobs' files (docs/OUTPUTS.md) and never the jobs' memory, so
// --report-only can re-make everything from a folder.
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/compare/compare.h"
#include "cli/dash/dash.h"
#include "cli/flags.h"
#include "common/jsonio.h"
#include "cli/self.h"
#include "common/afile.h"
#include "common/clock.h"
#include "common/config.h"
#include "common/data.h"
#include "common/err.h"
#include "common/mode.h"
#include "common/proto.h"
#include "common/stats.h"



// Record keys whose disagreement between jobs makes their numbers
// incomparable (another machine, BLAS kernel or build).
static const char *record_must_agree[] = {"openblas_core", "cpu_model",
    "version"};

// The flags of compare.conf: the comparison's own, not how this run of
// it went (where --out is: the file is found there; whether it was
// forced, resumed, or watched).
static const char *const conf_skip[] = {"out", "resume", "add-seeds",
    "force", "report-only", "dashboard", "dashboard-listen", NULL};

// conf_text is c's flags as compare.conf holds them (pti_config_save), in
// a string to free; NULL after saying why.
static char *conf_text(const pti_config *c)
{
	char *text = NULL;
	size_t n = 0;
	FILE *f = open_memstream(&text, &n);
	if (f == NULL) {
		fprintf(stderr, "pstrain compare: out of memory\n");
		return NULL;
	}
	fprintf(f, "# pstrain compare's flags for this folder: pstrain "
	    "compare --resume --out DIR\n# reads them (flags given there "
	    "win), as --config FILE does.\n");
	int rv = pti_config_save(c, PT_CMD_COMPARE, conf_skip, f);
	if (fclose(f) != 0 || rv != 0) {
		fprintf(stderr, "pstrain compare: compare.conf: %s\n",
		    rv != 0 ? pt_errmsg(rv) : "out of memory");
		free(text);
		return NULL;
	}
	return text;
}

// conf_read reads the flags of the comparison in --out again for
// --resume and --report-only: DIR/compare.conf first, where there is
// one, then --config FILE and the command line over it, as
// pti_cli_config reads them; then --add-seeds' seeds. -1 to go on, else
// the exit status.
static int conf_read(pti_config *c, int argc, char **argv)
{
	char conf[PT_PATH_MAX + 16];
	int help, rv;
	if (c->add_seeds > 0 && !c->cmp_resume) {
		fprintf(stderr, "pstrain compare: --add-seeds needs --resume: "
		    "it adds seeds to the comparison in --out\n");
		return PTI_EXIT_USAGE;
	}
	if (c->cmp_resume && (c->force || c->report_only)) {
		fprintf(stderr, "pstrain compare: --resume with --%s: --resume "
		    "keeps the jobs done and runs the others; give one of "
		    "them\n", c->force ? "force" : "report-only");
		return PTI_EXIT_USAGE;
	}
	if (!c->cmp_resume && !c->report_only)
		return -1;
	snprintf(conf, sizeof(conf), "%s/compare.conf", c->job.out);
	if (access(conf, F_OK) == 0) {
		pti_config_defaults(c);
		if ((rv = pti_config_file(c, PT_CMD_COMPARE, conf)) != 0 ||
		    (rv = pti_config_parse(c, PT_CMD_COMPARE, argc, argv,
		    &help)) != 0) {
			fprintf(stderr, "pstrain compare: %s\n", pt_errmsg(rv));
			return PTI_EXIT_USAGE;
		}
		if ((rv = pti_cli_finish(c, PT_CMD_COMPARE, "compare")) >= 0)
			return rv;
		printf("pstrain compare: the comparison's flags from %s, with "
		    "the command line's over them\n", conf);
	} else if (c->cmp_resume) {
		printf("pstrain compare: --resume: no %s (a comparison from "
		    "before compare.conf): the command line's flags alone\n",
		    conf);
	}
	if (c->add_seeds > 0 && pti_cmp_seeds_add(c) != 0)
		return PTI_EXIT_USAGE;
	return -1;
}

// cmp_transport picks --transport auto for every job at once: a
// comparison changes one thing, so the jobs share values in shared
// memory only when every mode has servers to share them with. -1 when
// --modes is wrong (said on stderr), else 0.
static int cmp_transport(pti_config *c)
{
	static pti_cmp_mode ms[PTI_CMP_MODES_MAX];
	int n, served = 1, any = 0;
	if (c->transport != PT_TRANSPORT_AUTO || c->report_only)
		return 0;
	if (pti_cmp_modes_parse(c, 0, ms, &n) != 0)
		return -1;
	for (int i = 0; i < n; i++) {
		served &= pti_mode_of(ms[i].mode)->servers;
		any |= pti_mode_of(ms[i].mode)->servers;
	}
	pti_config_transport_pick(c, served);
	if (!served && any && c->transport == PT_TRANSPORT_IPC)
		printf("pstrain compare: every job over ipc: allreduce has no "
		    "servers to share memory with, and a comparison changes "
		    "one thing\n");
	return 0;
}

// previous tells whether dir already holds a comparison: report.md, or
// any LABEL/seed-S/summary.json.
static int previous(const char *dir)
{
	char path[PT_PATH_MAX + 600];
	struct stat st;
	int found = 0;
	snprintf(path, sizeof(path), "%s/report.md", dir);
	if (stat(path, &st) == 0)
		return 1;
	DIR *d = opendir(dir);
	for (struct dirent *e; d != NULL && !found && (e = readdir(d));) {
		DIR *sub;
		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		if ((sub = opendir(path)) == NULL)
			continue;
		for (struct dirent *s; !found && (s = readdir(sub));) {
			if (strncmp(s->d_name, "seed-", 5) != 0)
				continue;
			snprintf(path, sizeof(path), "%s/%s/%s/summary.json",
			    dir, e->d_name, s->d_name);
			found = stat(path, &st) == 0;
		}
		closedir(sub);
	}
	if (d != NULL)
		closedir(d);
	return found;
}

// ---------------------------------------------------------------------
// The report


static int to_target(int k)
{
	return k == PTI_COL_UPDATES_TO || k == PTI_COL_EXAMPLES_TO ||
	       k == PTI_COL_TRAIN_TO;
}

// col_head_plain prints column k's name, "_A" spelled as the target
// (updates_to_0.8; with --target-auc updates_to_auc_0.78); col_head as a
// table cell.
static void col_head_plain(FILE *f, int k, const pti_config *c)
{
	const char *name = pti_cmp_cols[k].name;
	if (to_target(k) && c->target_auc > 0)
		fprintf(f, "%.*sauc_%.4g", (int)strlen(name) - 1, name,
		    c->target_auc);
	else if (to_target(k))
		fprintf(f, "%.*s%.4g", (int)strlen(name) - 1, name,
		    c->target_acc);
	else
		fprintf(f, "%s", name);
}

static void col_head(FILE *f, int k, const pti_config *c)
{
	fprintf(f, " ");
	col_head_plain(f, k, c);
	fprintf(f, " |");
}

// col_shown: column k is in the tables (an optional one where some job
// has a value).
static int col_shown(const pti_cmp_set *s, int k)
{
	if (!pti_cmp_cols[k].optional)
		return 1;
	for (int j = 0; j < s->n_modes * s->n_seeds; j++)
		if (!isnan(s->jobs[j].col[k]))
			return 1;
	return 0;
}

// table_head prints the header of a table: lead (e.g. "mode | n"), every
// report column shown, then tail (may be "").
static void table_head(FILE *f, const pti_cmp_set *s, const char *lead,
    int n_lead, const char *tail, const pti_config *c)
{
	fprintf(f, "| %s |", lead);
	for (int k = 0; k < PTI_COLS; k++)
		if (col_shown(s, k))
			col_head(f, k, c);
	fprintf(f, "%s%s\n|", tail[0] ? " " : "", tail);
	for (int i = 0; i < n_lead; i++)
		fprintf(f, " --- |");
	for (int k = 0; k < PTI_COLS; k++)
		if (col_shown(s, k))
			fprintf(f, " ---: |");
	fprintf(f, "%s\n", tail[0] ? " --- |" : "");
}

// mode_stats summarises column k over mode i's jobs that have a
// summary; *present is how many do.
static void mode_stats(const pti_cmp_set *s, int i, int k, pti_stats *st,
    uint32_t *present)
{
	double x[PTI_CMP_SEEDS_MAX];
	uint32_t n = 0;
	for (int r = 0; r < s->n_seeds; r++) {
		const pti_cmp_job *j = &s->jobs[i * s->n_seeds + r];
		if (j->outcome != PTI_OUT_MISSING)
			x[n++] = j->col[k];
	}
	pti_stats_of(st, x, n);
	*present = n;
}

// cell_mean: "mean ± sd" ("—" for the sd of one value), then how many
// reached the target, or how many had no value, or entered at chance.
static void cell_mean(char *buf, size_t n, const pti_stats *st,
    uint32_t present, int k, int chance)
{
	int prec = pti_cmp_cols[k].prec, used = 0;
	if (st->n == 0)
		used = snprintf(buf, n, to_target(k) ? "never" : "n/a");
	else if (st->n < 2)
		used = snprintf(buf, n, "%.*f ± —", prec, st->mean);
	else
		used = snprintf(buf, n, "%.*f ± %.*f", prec, st->mean, prec,
		    st->sd);
	if (to_target(k))
		snprintf(buf + used, n - used, " (%u/%u reached)", st->n,
		    present);
	else if (st->n < present)
		used += snprintf(buf + used, n - used, " (%u null)",
		    present - st->n);
	if (chance > 0 && (size_t)used < n)
		snprintf(buf + used, n - used, " (%d at chance)", chance);
}

static void cell_range(char *buf, size_t n, const pti_stats *st, int k)
{
	int prec = pti_cmp_cols[k].prec;
	if (st->n == 0)
		snprintf(buf, n, to_target(k) ? "never" : "n/a");
	else
		snprintf(buf, n, "[%.*f, %.*f]", prec, st->min, prec, st->max);
}

// outcomes_cell counts mode i's outcomes: "ok 4, collapsed 1".
static void outcomes_cell(char *buf, size_t n, const pti_cmp_set *s, int i)
{
	int count[PTI_OUT_N] = {0}, used = 0;
	buf[0] = '\0';
	for (int r = 0; r < s->n_seeds; r++)
		count[s->jobs[i * s->n_seeds + r].outcome]++;
	for (int k = 0; k < PTI_OUT_N; k++)
		if (count[k] > 0 && (size_t)used < n)
			used += snprintf(buf + used, n - used, "%s%s %d",
			    used ? ", " : "", pti_cmp_outcomes[k], count[k]);
}

// ok_final: mode i's final_test_acc over its ok jobs alone, into cell.
static void ok_final(char *buf, size_t n, const pti_cmp_set *s, int i)
{
	double x[PTI_CMP_SEEDS_MAX];
	uint32_t k = 0;
	pti_stats st;
	for (int r = 0; r < s->n_seeds; r++) {
		const pti_cmp_job *j = &s->jobs[i * s->n_seeds + r];
		if (j->outcome == PTI_OUT_OK)
			x[k++] = j->col[PTI_COL_FINAL_TEST];
	}
	pti_stats_of(&st, x, k);
	cell_mean(buf, n, &st, k, PTI_COL_FINAL_TEST, 0);
}

// table_modes prints one row per mode: mean ± sd (range 0) or
// [min, max] (range 1) of every column over the seeds; the first also
// how many jobs failed (ended other than ok) and the final accuracy
// of the ok jobs alone.
static void table_modes(FILE *f, const pti_cmp_set *s, int range)
{
	char cell[96];
	table_head(f, s, range ? "mode" : "mode | n | outcomes | failed | "
	    "final_test_acc of ok jobs", range ? 1 : 5, "", s->c);
	for (int i = 0; i < s->n_modes; i++) {
		pti_stats st;
		uint32_t present;
		int failed = 0, chance = 0;
		for (int r = 0; r < s->n_seeds; r++) {
			failed += s->jobs[i * s->n_seeds + r].outcome != PTI_OUT_OK;
			chance += s->jobs[i * s->n_seeds + r].at_chance;
		}
		mode_stats(s, i, 0, &st, &present);
		fprintf(f, "| %s |", s->ms[i].label);
		if (!range) {
			outcomes_cell(cell, sizeof(cell), s, i);
			fprintf(f, " %u | %s | %d/%d |", present, cell, failed,
			    s->n_seeds);
			ok_final(cell, sizeof(cell), s, i);
			fprintf(f, " %s |", cell);
		}
		for (int k = 0; k < PTI_COLS; k++) {
			if (!col_shown(s, k))
				continue;
			mode_stats(s, i, k, &st, &present);
			if (range)
				cell_range(cell, sizeof(cell), &st, k);
			else
				cell_mean(cell, sizeof(cell), &st, present, k,
				    k == PTI_COL_FINAL_TEST ? chance : 0);
			fprintf(f, " %s |", cell);
		}
		fprintf(f, "\n");
	}
}

// table_jobs prints the appendix: one row per (mode, seed).
static void table_jobs(FILE *f, const pti_cmp_set *s)
{
	table_head(f, s, "mode | seed | outcome", 3, "folder |", s->c);
	for (int i = 0; i < s->n_modes; i++)
		for (int r = 0; r < s->n_seeds; r++) {
			const pti_cmp_job *j = &s->jobs[i * s->n_seeds + r];
			fprintf(f, "| %s | %llu | %s |", s->ms[i].label,
			    (unsigned long long)j->seed,
			    pti_cmp_outcomes[j->outcome]);
			for (int k = 0; k < PTI_COLS; k++)
				if (!col_shown(s, k))
					continue;
				else if (isnan(j->col[k]))
					fprintf(f, " %s |", to_target(k) &&
					    j->outcome != PTI_OUT_MISSING
					    ? "never" : "n/a");
				else
					fprintf(f, " %.*f |", pti_cmp_cols[k].prec,
					    j->col[k]);
			fprintf(f, " %s/seed-%llu |\n", s->ms[i].label,
			    (unsigned long long)j->seed);
		}
}

// first_job is the first job with a summary in run order (seed-major).
static const pti_cmp_job *first_job(const pti_cmp_set *s)
{
	for (int r = 0; r < s->n_seeds; r++)
		for (int i = 0; i < s->n_modes; i++)
			if (s->jobs[i * s->n_seeds + r].json != NULL)
				return &s->jobs[i * s->n_seeds + r];
	return NULL;
}

// record_check prints a loud line to f for each record_must_agree key on
// which a job differs from the first; returns how many keys differ.
static int record_check(FILE *f, const pti_cmp_set *s, const char *prefix)
{
	const pti_cmp_job *a = first_job(s);
	int bad = 0;
	if (a == NULL)
		return 0;
	for (size_t k = 0; k < sizeof(record_must_agree) /
	    sizeof(record_must_agree[0]); k++) {
		const char *key = record_must_agree[k];
		char va[256] = "(none)", vb[256];
		const json_t *ra = json_object_get(a->json, "record");
		if (pti_json_text(ra, key, va, sizeof(va)) != 0)
			snprintf(va, sizeof(va), "(none)");
		for (int i = 0; i < s->n_modes * s->n_seeds; i++) {
			const pti_cmp_job *b = &s->jobs[i];
			if (b->json == NULL)
				continue;
			if (pti_json_text(json_object_get(b->json, "record"), key,
				vb, sizeof(vb)) != 0)
				snprintf(vb, sizeof(vb), "(none)");
			if (strcmp(va, vb) == 0)
				continue;
			fprintf(f, "%sWARNING: the jobs disagree on %s: '%s' "
			    "(%s seed %llu) but '%s' (%s seed %llu); their "
			    "numbers may not be comparable\n", prefix, key, va,
			    a->m->label, (unsigned long long)a->seed, vb,
			    b->m->label, (unsigned long long)b->seed);
			bad++;
			break;
		}
	}
	return bad;
}

// report_record lists the run record of the first job, then any
// disagreement between jobs.
static void report_record(FILE *f, const pti_cmp_set *s)
{
	const pti_cmp_job *a = first_job(s);
	const json_t *rec = a != NULL ? json_object_get(a->json, "record") : NULL;
	const char *key;
	json_t *v;
	char val[512];
	fprintf(f, "## Machine\n\n");
	if (!json_is_object(rec)) {
		fprintf(f, "No job has a run record (\"record\" in "
		    "summary.json).\n\n");
		return;
	}
	fprintf(f, "The run record of %s/seed-%llu/summary.json:\n\n"
	    "| record | value |\n| --- | --- |\n", a->m->label,
	    (unsigned long long)a->seed);
	json_object_foreach((json_t *)rec, key, v) {
		// Each job's own command line stays in its summary.json.
		if (strcmp(key, "command_line") == 0)
			continue;
		int r = pti_json_value_text(v, val, sizeof(val));
		fprintf(f, "| %s | %s |\n", key, r == 0 ? val : "null");
	}
	fprintf(f, "\n");
	if (record_check(f, s, "**") > 0)
		fprintf(f, "\n");
}

// report_note says where selection happened (validation or test set).
static void report_note(FILE *f, const pti_cmp_set *s)
{
	if (s->sel_test)
		fprintf(f, "**Selection was on the TEST set**: some jobs had "
		    "no validation split (--validation 0), so for them "
		    "best_val_acc is the best test accuracy of any "
		    "evaluation, best_val_test_acc that same number, and "
		    "updates, examples and training time to A use test "
		    "accuracy. Such "
		    "numbers are optimistic: they were chosen by looking at "
		    "the test set.\n");
	else
		fprintf(f, "Selection (best_val_acc, updates, examples and "
		    "training time "
		    "to A) used the validation split held out of the training "
		    "set; the test set was evaluated only for final_test_acc "
		    "and best_val_test_acc.\n");
	for (int i = 0; i < s->n_modes; i++) {
		if (s->ms[i].mode != PT_MODE_SSP)
			continue;
		fprintf(f, "\nStaleness and the ssp bound count different "
		    "things: mean_staleness and max_staleness_seen count the "
		    "updates other workers applied between a gradient's pull "
		    "and its push, while ssp:S bounds steps (no worker starts "
		    "step c+1 before every worker has pushed step c-S); each "
		    "step of each other worker is an update, so with W "
		    "workers a gradient may be many more than S updates stale "
		    "while the bound holds.\n");
		break;
	}
}

// report_outcomes states the outcome rule with the accuracy floors the
// jobs' summary.json files name (acc_floor; none from older jobs).
static void report_outcomes(FILE *f, const pti_cmp_set *s)
{
	double floors[8];
	int n = 0;
	for (int k = 0; k < s->n_modes * s->n_seeds; k++) {
		json_t *v = json_object_get(s->jobs[k].json, "acc_floor");
		int seen = !json_is_number(v);
		for (int i = 0; i < n && !seen; i++)
			seen = floors[i] == json_number_value(v);
		if (!seen && n < 8)
			floors[n++] = json_number_value(v);
	}
	fprintf(f, "Outcomes (summary.json, docs/OUTPUTS.md), in this order: "
	    "diverged (a worker's loss became NaN, infinite or ran away; the "
	    "job was stopped), damaged (a worker or server lost or "
	    "restarted, a gradient refused, a record missing), collapsed "
	    "(the final training loss on the whole training set above 0.9 "
	    "ln(classes), or the final training accuracy under the accuracy "
	    "floor, --acc-floor, twice chance unless given), else ok. The "
	    "accuracy floor of these jobs: ");
	for (int i = 0; i < n; i++)
		fprintf(f, "%s%g", i ? ", " : "", floors[i]);
	fprintf(f, "%s.\n\n", n == 0 ? "not recorded (jobs from before "
	    "the floor)" : "");
}

static const char *report_defs =
    "n is the number of seeds whose job left a summary.json; outcomes "
    "counts them by summary.json \"outcome\" (missing: no "
    "summary.json); failed is how many of the seeds' jobs ended other "
    "than ok (diverged, collapsed, damaged or missing), and the next "
    "column the final test accuracy of the ok jobs alone. Each other "
    "cell is the mean ± the sample standard "
    "deviation (n - 1 denominator; — when one value) over those seeds; "
    "a null or missing value is left out and counted as \"(k null)\", "
    "except a diverged job's final_test_acc, which enters as chance "
    "(1 / classes), counted as \"(k at chance)\": a job that failed "
    "does not drop out of the mean. "
    "final_test_acc: the final parameters on the test set. "
    "best_val_acc: the best validation accuracy of any evaluation "
    "(eval.csv); best_val_test_acc: test accuracy of those best-"
    "validation parameters; last5_acc: the mean validation accuracy of "
    "the last 5 evaluations (of all when fewer). best_val_test_acc and "
    "last5_acc are the primary accuracies: final_test_acc is one "
    "evaluation of one set of parameters, which swings by about 0.01 "
    "from one evaluation to the next. A is --target-acc (with "
    "--target-auc, validation AUC A: updates_to_auc_A). At the first "
    "eval.csv "
    "row with validation accuracy (or AUC) >= A: updates_to_A is its "
    "`step` "
    "(updates applied, the parameters' version: a sync step is one "
    "update of B examples, an async update one of B/W); examples_to_A "
    "the examples all workers had computed gradients on by then (their "
    "worker-R.csv rows up to its wall_s, x B/W); train_s_to_A the "
    "seconds from the job's first training step to when worker 0 had "
    "those parameters (its `wall_s` less summary.json's startup_s; "
    "evaluation runs beside training and stops no worker). Each is "
    "averaged over the "
    "seeds that reached A (\"k/n reached\"). "
    "Evaluations happen --evals-per-epoch times per epoch (or every "
    "--eval-every steps), so these are only as fine as that. "
    "samples_per_s, step_ms_median, comm_bound_ms, eval_s, "
    "mean_staleness, max_staleness_seen, "
    "idle_fraction, dropped_gradients and workers_lost are summary.json's "
    "(docs/OUTPUTS.md).\n";

// The paired figures, each with the side that is better: +1 higher
// (accuracy, throughput), -1 lower (examples, seconds, milliseconds).
static const struct {
	int col, better;
} paired_cols[] = {{PTI_COL_BEST_VAL_TEST, 1}, {PTI_COL_LAST_K, 1},
    {PTI_COL_BEST_VAL, 1}, {PTI_COL_FINAL_TEST, 1}, {PTI_COL_EXAMPLES_TO, -1},
    {PTI_COL_TRAIN_TO, -1}, {PTI_COL_SAMPLES, 1}, {PTI_COL_STEP_MS, -1}};

// paired_reading says what the interval of p (mode a minus mode b)
// shows for a figure whose better side is `better`, into buf (size n);
// failed: jobs of either mode that did not end ok.
static void paired_reading(char *buf, size_t n, const pti_paired *p,
    int better, int failed, const char *a, const char *b)
{
	if (failed > 0)
		snprintf(buf, n, "not comparable (%d job%s failed)", failed,
		    failed > 1 ? "s" : "");
	else if (p->d.n < 2)
		snprintf(buf, n, "too few pairs");
	else if (p->lo > 0 || p->hi < 0)
		snprintf(buf, n, "%s better", (p->lo > 0) == (better > 0) ? a : b);
	else
		snprintf(buf, n, "no difference detected");
}

// mode_pair compares column col of mode i with the baseline's, seed by
// seed, into *p, and returns how many jobs of the two modes did not end
// ok.
static int mode_pair(const pti_cmp_set *s, int i, int col, pti_paired *p)
{
	double a[PTI_CMP_SEEDS_MAX], b[PTI_CMP_SEEDS_MAX];
	int failed = 0;
	for (int r = 0; r < s->n_seeds; r++) {
		const pti_cmp_job *x = &s->jobs[i * s->n_seeds + r];
		const pti_cmp_job *y = &s->jobs[s->base * s->n_seeds + r];
		failed += (x->outcome != PTI_OUT_OK) + (y->outcome != PTI_OUT_OK);
		a[r] = x->col[col];
		b[r] = y->col[col];
	}
	pti_paired_of(p, a, b, (uint32_t)s->n_seeds);
	return failed;
}

// paired_open tells whether --seeds auto should add a seed: some mode
// whose jobs all ended ok has an interval of best_val_acc (validation:
// the test set decides nothing) against the baseline that holds 0, or
// fewer than 2 pairs.
static int paired_open(const pti_cmp_set *s)
{
	for (int i = 0; i < s->n_modes; i++) {
		pti_paired p;
		if (i != s->base && mode_pair(s, i, PTI_COL_BEST_VAL, &p) == 0 &&
		    (p.d.n < 2 || (p.lo <= 0 && p.hi >= 0)))
			return 1;
	}
	return 0;
}

// seed_ran tells whether any mode's job of seed `seed` left a
// summary.json in the comparison's folder.
static int seed_ran(const pti_cmp_set *s, int seed)
{
	char path[PT_PATH_MAX + 160];
	for (int i = 0; i < s->n_modes; i++) {
		snprintf(path, sizeof(path), "%s/%s/seed-%d/summary.json",
		    s->c->job.out, s->ms[i].label, seed);
		if (access(path, F_OK) == 0)
			return 1;
	}
	return 0;
}

// report_paired compares every mode with the baseline seed by seed: the
// jobs of one seed share initial values and data order across modes.
static void report_paired(FILE *f, const pti_cmp_set *s)
{
	const char *base = s->ms[s->base].label;
	char mean[48], iv[96], reading[96];
	fprintf(f, "## Paired differences against %s, seed by seed\n\n"
	    "The jobs of one seed share initial values and data order across "
	    "modes, so each figure is compared seed by seed: the mean of MODE "
	    "- %s over the seeds where both have it (pairs), its 95%% t "
	    "interval (n - 1 degrees of freedom), and on how many seeds each "
	    "was better. The reading is MODE or %s \"better\" when the "
	    "interval lies on one side of 0 (higher accuracy and samples/s, "
	    "fewer examples, seconds and ms), \"no difference detected\" when "
	    "it holds 0, and \"not comparable (k jobs failed)\" when a job "
	    "of either mode did not end ok (outcome other than ok: its "
	    "figures are left out or are not the job asked for). The "
	    "intervals assume the differences are roughly normal; with few "
	    "seeds they are wide.\n", base, base, base);
	for (int i = 0; i < s->n_modes; i++) {
		if (i == s->base)
			continue;
		const char *mode = s->ms[i].label;
		fprintf(f, "\n### %s\n\n| figure | pairs | %s - %s | 95%% "
		    "interval | seeds better (%s : %s) | reading |\n| --- | "
		    "---: | ---: | ---: | ---: | --- |\n", mode, mode, base,
		    mode, base);
		for (size_t k = 0; k < sizeof(paired_cols) / sizeof(paired_cols[0]);
		     k++) {
			int col = paired_cols[k].col, better = paired_cols[k].better;
			int prec = pti_cmp_cols[col].prec;
			pti_paired p;
			int failed = mode_pair(s, i, col, &p);
			paired_reading(reading, sizeof(reading), &p, better,
			    failed, mode, base);
			// "seeds better" counts a lower value as better where
			// lower is.
			uint32_t a_wins = better > 0 ? p.a_more : p.b_more;
			uint32_t b_wins = better > 0 ? p.b_more : p.a_more;
			snprintf(mean, sizeof(mean), "n/a");
			snprintf(iv, sizeof(iv), "n/a");
			if (p.d.n > 0)
				snprintf(mean, sizeof(mean), "%.*f", prec,
				    p.d.mean);
			if (p.d.n >= 2)
				snprintf(iv, sizeof(iv), "[%.*f, %.*f]", prec,
				    p.lo, prec, p.hi);
			fprintf(f, "| ");
			col_head_plain(f, col, s->c);
			fprintf(f, " | %u | %s | %s | %u : %u | %s |\n", p.d.n,
			    mean, iv, a_wins, b_wins, reading);
		}
	}
	fprintf(f, "\n");
}

// job_network describes where job j ran into out: its placement and link
// (summary.json's), or "one machine" and its transport (ipc with its
// values in shared memory: shm).
static void job_network(const pti_cmp_job *j, char *out, size_t n)
{
	char place[32] = "none", tr[16] = "?", by[64] = "";
	const json_t *link = json_object_get(j->json, "link");
	(void)pti_json_text(link, "shaped_by", by, sizeof(by));
	double bps = pti_json_num(link, "rate_bits_per_s");
	double delay = pti_json_num(link, "delay_s");
	(void)pti_json_text(j->json, "placement", place, sizeof(place));
	const json_t *conf = json_object_get(j->json, "config");
	(void)pti_json_text(conf, "transport", tr, sizeof(tr));
	if (json_is_true(json_object_get(conf, "shm")))
		snprintf(tr, sizeof(tr), "shm");
	if (strcmp(place, "none") == 0) {
		snprintf(out, n, "every process on this machine, over %s, "
		    "links not shaped", tr);
		return;
	}
	int k = snprintf(out, n, "emulated hosts, placement %s, over %s; "
	    "each host's link ", place, tr);
	if (k < 0 || (size_t)k >= n)
		return;
	if (isnan(bps) && isnan(delay))
		snprintf(out + k, n - (size_t)k, "not shaped");
	else if (isnan(delay))
		snprintf(out + k, n - (size_t)k, "%.4g Mbit/s both ways (tbf)",
		    bps / 1e6);
	else
		snprintf(out + k, n - (size_t)k, "%.4g Mbit/s both ways (tbf), "
		    "%.4g ms one way (%s)", isnan(bps) ? 0 : bps / 1e6,
		    delay * 1e3, strstr(by, "send-delay") != NULL ?
		    "each process's --send-delay" : "netem");
}

// report_network says where the jobs ran (docs/COMPARE.md, "Network"):
// one line when every job ran alike, else one per mode (as when a mode's
// modifiers set --placement or --servers), and loudly a job that ran
// unlike the rest of its mode.
static void report_network(FILE *f, const pti_cmp_set *s)
{
	char line[PTI_CMP_MODES_MAX][256], nb[256];
	int alike = 1, have = 0;
	fprintf(f, "## Network\n\n");
	for (int i = 0; i < s->n_modes; i++) {
		const pti_cmp_job *a = NULL;
		line[i][0] = '\0';
		for (int r = 0; r < s->n_seeds; r++) {
			const pti_cmp_job *b = &s->jobs[i * s->n_seeds + r];
			if (b->json == NULL)
				continue;
			if (a == NULL) {
				a = b;
				job_network(a, line[i], sizeof(line[i]));
				continue;
			}
			job_network(b, nb, sizeof(nb));
			if (strcmp(line[i], nb) != 0)
				fprintf(f, "WARNING: %s seed %llu ran unlike "
				    "seed %llu: %s\n\n", b->m->label,
				    (unsigned long long)b->seed,
				    (unsigned long long)a->seed, nb);
		}
		if (a == NULL)
			continue;
		alike = alike && (!have || strcmp(line[i], line[have - 1]) == 0);
		have = i + 1;
	}
	if (have == 0)
		return;
	if (alike) {
		fprintf(f, "%s (summary.json's placement, link and hosts).\n\n",
		    line[have - 1]);
		return;
	}
	for (int i = 0; i < s->n_modes; i++)
		if (line[i][0] != '\0')
			fprintf(f, "- %s: %s\n", s->ms[i].label, line[i]);
	fprintf(f, "\n(summary.json's placement, link and hosts.)\n\n");
}

static int report_write(const pti_cmp_set *s, int argc, char **argv)
{
	const pti_config *c = s->c;
	char path[PT_PATH_MAX + 32];
	snprintf(path, sizeof(path), "%s/report.md", c->job.out);
	FILE *f = fopen(path, "w");
	if (f == NULL) {
		fprintf(stderr, "pstrain compare: %s: %s\n", path,
		    strerror(errno));
		return -1;
	}
	fprintf(f, "# pstrain compare: %s, seeds", c->modes);
	for (int r = 0; r < s->n_seeds; r++)
		fprintf(f, "%s%llu", r ? "," : " ",
		    (unsigned long long)s->seeds[r]);
	fprintf(f, "\n\nCommand line:\n\n    pstrain compare");
	for (int i = 0; i < argc; i++)
		fprintf(f, " %s", argv[i]);
	if (c->report_only)
		fprintf(f, "\n\nMade with --report-only from the jobs already "
		    "in %s: this command\nran none of them, so the flags above "
		    "need not be theirs (they may have been\nstarted by "
		    "`pstrain run`, `pstrain compare` or `pstrain node`). Each "
		    "job's own\ncommand line is `record.command_line` in its "
		    "LABEL/seed-S/summary.json.\n\n", c->job.out);
	else
		fprintf(f, "\n\nEvery job ran `pstrain run` with these flags "
		    "(and `--validation %s`,\n`--evals-per-epoch %u` unless "
		    "given), then `--mode`, `--staleness`,\n`--backup-workers`, "
		    "its mode's modifiers, `--seed S`, `--out LABEL/seed-S`\nand "
		    "`--save-model LABEL/seed-S/model.bin`, seed by seed: every "
		    "mode for the\nfirst seed, then every mode for the next. "
		    "Folders are relative to\n%s.\n\n", c->validation,
		    c->evals_per_epoch, c->job.out);
	report_record(f, s);
	report_network(f, s);
	if (s->tune != NULL)
		pti_cmp_tune_report(f, s->tune);
	fprintf(f, "## Results: mean ± sd over seeds\n\n");
	report_note(f, s);
	fprintf(f, "\n");
	table_modes(f, s, 0);
	fprintf(f, "\n%s\n", report_defs);
	report_outcomes(f, s);
	if (s->n_modes > 1)
		report_paired(f, s);
	if (s->auto_cap > 0)
		fprintf(f, "Seeds: --seeds auto ran seeds 1 to 3, then one more "
		    "while an interval of best_val_acc (validation) against "
		    "%s held 0 for a mode whose jobs all ended ok, up to %d "
		    "seeds: it stopped at %d, %s.\n\n", s->ms[s->base].label,
		    s->auto_cap, s->n_seeds, s->auto_short ? "the next seed "
		    "not run (the comparison was stopped before its end)" :
		    paired_open(s) ? "the cap, with an interval still holding 0"
		    : "no such interval holding 0");
	fprintf(f, "## Min and max over seeds\n\n");
	table_modes(f, s, 1);
	fprintf(f, "\n## Every job\n\n");
	table_jobs(f, s);
	fprintf(f, "\n## Plots\n\nEach as .png, .svg and .pdf (%s style; "
	    "data, captions and script in plots/; re-plot with `gnuplot "
	    "plots/plot.gp` from this folder): loss-examples, loss-updates, "
	    "loss-wall and loss (the three side by side): training loss of "
	    "worker 0, mean of %d steps; accuracy-examples, "
	    "accuracy-updates, accuracy-wall and accuracy: %s accuracy; "
	    "grad-norm; step-time; staleness. Curves are the mean over seeds "
	    "with a band of ± one sd, the seeds aligned by the x axis's "
	    "value (each seed's curve read on the line between its rows), "
	    "over the range every seed covers.\n", s->c->plot_style,
	    PTI_CMP_SMOOTH, s->sel_test ? "test" : "validation");
	if (fclose(f) != 0) {
		fprintf(stderr, "pstrain compare: %s: write failed\n", path);
		return -1;
	}
	return 0;
}

// ---------------------------------------------------------------------
// The command

// ---------------------------------------------------------------------
// --dashboard: one page of every job, served by this process

// cmp_steps is the global steps a job of mode m will run (pstrain run's
// rule: --steps, else epochs x floor(train examples / its batch)); 0 when
// unknown.
static uint64_t cmp_steps(const pti_cmp_mode *m, uint64_t n_train)
{
	if (m->steps > 0)
		return m->steps;
	return m->batch > 0 && n_train > 0
		   ? m->epochs * (n_train / m->batch)
		   : 0;
}

// cmp_dashboard serves every job of s, each waiting to run. 0, or the
// exit status after saying why.
static int cmp_dashboard(pti_cmp_set *s)
{
	const pti_config *c = s->c;
	uint32_t n = (uint32_t)(s->n_modes * s->n_seeds);
	pti_dash_job *jobs = calloc(n, sizeof(*jobs));
	char url[128], title[2 * PT_PATH_MAX + 256];
	pti_data d;
	uint64_t n_train = 0;
	int rv;
	if (jobs == NULL) {
		fprintf(stderr, "pstrain compare: out of memory\n");
		return 1;
	}
	// The training set's size, for each job's planned steps (its ETA);
	// a bad --data is the jobs' to report.
	int by_epochs = 0;
	for (int i = 0; i < s->n_modes; i++)
		by_epochs |= s->ms[i].steps == 0;
	if (by_epochs && pti_config_load_data(c, &d) == 0) {
		n_train = d.train.n;
		pti_data_fini(&d);
	}
	for (uint32_t i = 0; i < n; i++) {
		const pti_cmp_job *j = &s->jobs[i];
		snprintf(jobs[i].label, sizeof(jobs[i].label), "%s/seed-%llu",
		    j->m->label, (unsigned long long)j->seed);
		snprintf(jobs[i].dir, sizeof(jobs[i].dir), "%s", j->dir);
		snprintf(jobs[i].mode, sizeof(jobs[i].mode), "%s",
		    pti_mode_name(j->m->mode));
		snprintf(jobs[i].ckpt_dir, sizeof(jobs[i].ckpt_dir), "%s",
		    c->job.checkpoint_dir);
		jobs[i].workers = j->m->workers;
		jobs[i].batch = j->m->batch;
		jobs[i].steps = cmp_steps(j->m, n_train);
		jobs[i].state = PTI_DASH_PENDING;
	}
	char net[128];
	pti_config_network(c, net, sizeof(net));
	snprintf(title, sizeof(title), "pstrain compare: %s%s, %s",
	    c->modes, net, c->job.out);
	rv = pti_dash_open(&s->dash, "--dashboard-listen", c->dashboard_listen,
	    title, jobs, n, url, sizeof(url));
	free(jobs);
	if (rv != 0) {
		fprintf(stderr, "pstrain compare: %s\n", pt_errmsg(rv));
		return PTI_EXIT_USAGE;
	}
	fprintf(stderr, "pstrain compare: dashboard at %s (Prometheus metrics "
	    "at %smetrics)\n", url, url);
	return 0;
}

int pti_cmd_compare(int argc, char **argv)
{
	static pti_config c;
	static pti_cmp_set s;
	char plots[PT_PATH_MAX + 16];
	int rv = pti_cli_config(&c, PT_CMD_COMPARE, "compare",
	    "Run `pstrain run` once per mode of --modes and seed of --seeds, "
	    "seed by seed,\nwith every other flag the same, then write "
	    "DIR/report.md (mean ± sd, min\nand max over seeds per mode, and "
	    "every job) and plots (gnuplot).\n\nA mode is "
	    "MODE[:S][:key=value...]: sync, async, ssp:S (S the "
	    "staleness\nbound), allreduce or sgd-small (the small-batch "
	    "control), then modifiers,\neach a flag of "
	    "pstrain run for that mode's jobs alone (:key for a switch),\n"
	    "such as sync:backup=1, async:matched-lr, "
	    "sync:weight-decay=0.0001 or\n"
	    "sync:optimizer=adam:lr=0.001; --mode, --staleness, --seed, "
	    "--out and\nthe like are compare's to set. The job of mode M and "
	    "seed S goes to\nDIR/LABEL/seed-S, LABEL being M with ':' and '=' "
	    "turned into '-'.\n--validation defaults to 10% and "
	    "--evals-per-epoch to 10 here. A diverged job\nis a result; a "
	    "damaged one stops the comparison unless --allow-failures.\nDIR "
	    "must not hold a comparison already unless --force (which runs "
	    "it\nagain) or --resume (which keeps the jobs done with the same "
	    "flags and runs\nthe others; --add-seeds N more seeds). "
	    "DIR/compare.conf keeps the flags, so\n`pstrain compare --resume "
	    "--out DIR` finishes it; --report-only re-makes\nreport and plots "
	    "from DIR (docs/COMPARE.md).\n\nexample:\n"
	    "  pstrain compare --modes sync,async,ssp:4,sync:backup=1 "
	    "--seeds 5 \\\n      --workers 4 --model mlp:128 --epochs 5 "
	    "--target-acc 0.8 --out runs/cmp", argc, argv);
	if (rv >= 0 || (rv = conf_read(&c, argc, argv)) >= 0)
		return rv;
	char *conf = c.report_only ? NULL : conf_text(&c);
	if (!c.report_only && conf == NULL)
		return 1;
	if (cmp_transport(&c) != 0)
		return PTI_EXIT_USAGE;
	pti_config_hosts_imply(&c); // what each job's run is then given
	if (c.job.tensorboard[0] != '\0' && c.report_only) {
		fprintf(stderr, "pstrain compare: --tensorboard with "
		    "--report-only: no job runs to write event files\n");
		return PTI_EXIT_USAGE;
	}
	if (strncmp(c.seeds, "auto", 4) == 0 && c.dashboard) {
		fprintf(stderr, "pstrain compare: --seeds auto with "
		    "--dashboard: not done yet; give --seeds N, or watch the "
		    "folder with pstrain dashboard %s\n", c.job.out);
		return PTI_EXIT_USAGE;
	}
	if (c.dashboard && c.report_only) {
		fprintf(stderr, "pstrain compare: --dashboard with "
		    "--report-only: no job runs; pstrain dashboard %s serves "
		    "the folder\n", c.job.out);
		return PTI_EXIT_USAGE;
	}
	// This process serves the page: the jobs it runs must not. Each
	// job writes its event files into a folder of its own under
	// --tensorboard's (job_argv).
	int dashboard = c.dashboard;
	c.dashboard = 0;
	static char tb[sizeof(c.job.tensorboard)];
	snprintf(tb, sizeof(tb), "%s", c.job.tensorboard);
	c.job.tensorboard[0] = '\0';
	// Selection on a validation split, evaluated often enough to time
	// the target, unless the command line says otherwise.
	if (!pti_config_given(&c, "validation"))
		snprintf(c.validation, sizeof(c.validation), "10%%");
	if (!pti_config_given(&c, "evals-per-epoch") &&
	    !pti_config_given(&c, "eval-every"))
		c.evals_per_epoch = 10;
	s.tb = tb;
	if ((rv = pti_cmp_set_init(&s, &c)) >= 0)
		goto out;
	rv = 2;
	if (!c.report_only && !c.force && !c.cmp_resume &&
	    previous(c.job.out)) {
		fprintf(stderr, "pstrain compare: %s already holds a "
		    "comparison (report.md or LABEL/seed-S/summary.json); "
		    "give --resume to finish it (the jobs done are kept), "
		    "--force to run it all again, or another --out\n",
		    c.job.out);
		goto out;
	}
	rv = 1;
	snprintf(plots, sizeof(plots), "%s/plots", c.job.out);
	if (pti_mkdir_p(plots) != 0) {
		fprintf(stderr, "pstrain compare: %s: %s\n", plots,
		    strerror(errno));
		goto out;
	}
	// Resumed, the file is written once the jobs done are found to
	// agree with it (pti_cmp_set_run): a refused --resume leaves it.
	if (conf != NULL && !c.cmp_resume &&
	    pti_cmp_conf_write(c.job.out, conf) != 0)
		goto out;
	s.conf = c.cmp_resume ? conf : NULL;
	// --lr-grid: each mode's rate first, picked on other seeds; the
	// comparison is then of each mode at its rate.
	static pti_cmp_tune tune;
	if (c.lr_grid[0] != '\0') {
		if ((rv = pti_cmp_tune_run(&c, &tune)) != 0)
			goto out;
		pti_cmp_set_fini(&s);
		memset(&s, 0, sizeof(s));
		s.tb = tb;
		s.conf = c.cmp_resume ? conf : NULL;
		if ((rv = pti_cmp_set_init(&s, &c)) >= 0)
			goto out;
		s.tune = &tune;
		rv = 1;
	}
	if (dashboard && (rv = cmp_dashboard(&s)) != 0)
		goto out;
	if ((rv = c.report_only ? pti_cmp_set_read(&s) : pti_cmp_set_run(&s)) != 0)
		goto out;
	// --seeds auto: one more seed while a pair's interval holds 0.
	// With --report-only, the seeds it ran are read the same way, up to
	// the first it did not run (a comparison stopped early).
	while (s.auto_cap > 0 && s.n_seeds < s.auto_cap && paired_open(&s)) {
		if (c.report_only && !seed_ran(&s, s.n_seeds + 1)) {
			printf("pstrain compare: --seeds auto: seed %d is not in "
			    "%s: the report stops at %d seeds\n", s.n_seeds + 1,
			    c.job.out, s.n_seeds);
			s.auto_short = 1;
			break;
		}
		printf("pstrain compare: --seeds auto: an interval of "
		    "best_val_acc against %s holds 0 after %d seeds: seed %d\n",
		    s.ms[s.base].label, s.n_seeds, s.n_seeds + 1);
		if ((rv = pti_cmp_set_more(&s)) != 0 || (rv = c.report_only ?
		    pti_cmp_set_read(&s) : pti_cmp_set_run(&s)) != 0)
			goto out;
	}
	rv = 1;
	for (int i = 0; i < s.n_modes * s.n_seeds; i++)
		s.sel_test |= s.jobs[i].outcome != PTI_OUT_MISSING &&
		    s.jobs[i].sel_test;
	if (report_write(&s, argc, argv) != 0)
		goto out;
	printf("\n");
	record_check(stderr, &s, "pstrain compare: ");
	report_note(stdout, &s);
	printf("\n");
	table_modes(stdout, &s, 0);
	printf("\nreport: %s/report.md\n", c.job.out);
	fflush(stdout);
	if (pti_cmp_plot(c.job.out, s.ms, s.n_modes, s.jobs, s.n_seeds,
	    s.sel_test, s.tune, strcmp(c.plot_style, "paper") == 0) != 0)
		goto out;
	printf("plots: %s/*.png, *.svg and *.pdf (%s style; captions in "
	    "%s/captions.md, script %s/plot.gp)\n", c.job.out, c.plot_style,
	    plots, plots);
	rv = 0;
out:
	if (s.dash != NULL) {
		fflush(stdout);
		pti_dash_close(s.dash);
		fprintf(stderr, "pstrain compare: dashboard closed (pstrain "
		    "dashboard %s serves it again)\n", c.job.out);
	}
	pti_cmp_set_fini(&s);
	free(conf);
	return rv;
}
