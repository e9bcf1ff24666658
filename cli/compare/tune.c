// cli/compare/tune.c - compare's --lr-grid (compare.h): each mode at each
// rate of the grid over the --tune-seeds, into DIR/tune, then each
// mode's rate picked on validation alone; the comparison proper runs
// every mode at its own rate over the fresh --seeds.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/compare/compare.h"
#include "common/err.h"

// tune_grid reads --lr-grid into t->lr, ascending. -1 after saying why.
static int tune_grid(const char *list, pti_cmp_tune *t)
{
	char buf[256], *save = NULL;
	snprintf(buf, sizeof(buf), "%s", list);
	t->n_lr = 0;
	for (char *p = strtok_r(buf, ",", &save); p != NULL;
	     p = strtok_r(NULL, ",", &save)) {
		char *end;
		double v = strtod(p, &end);
		if (*end != '\0' || end == p || !(v > 0) || v > 1e6 ||
		    t->n_lr == PTI_TUNE_LR_MAX) {
			fprintf(stderr, "pstrain compare: --lr-grid %s: '%s' "
			    "is not a rate above 0 (at most %d rates)\n", list,
			    p, PTI_TUNE_LR_MAX);
			return -1;
		}
		int i = t->n_lr++;
		while (i > 0 && t->lr[i - 1] > v) { // insertion, ascending
			t->lr[i] = t->lr[i - 1];
			i--;
		}
		t->lr[i] = v;
	}
	for (int i = 1; i < t->n_lr; i++)
		if (t->lr[i] == t->lr[i - 1]) {
			fprintf(stderr, "pstrain compare: --lr-grid %s: %g "
			    "given twice\n", list, t->lr[i]);
			return -1;
		}
	if (t->n_lr < 2) {
		fprintf(stderr, "pstrain compare: --lr-grid %s: give at least "
		    "two rates\n", list);
		return -1;
	}
	return 0;
}

// tune_seeds writes the tuning seeds into out (size n): N gives
// 1001..1000+N, apart from any --seeds; a list is taken as it is.
static void tune_seeds(const char *arg, char *out, size_t n)
{
	char *end;
	unsigned long k = strtoul(arg, &end, 10);
	if (*end != '\0' || end == arg || strchr(arg, ',') != NULL || k == 0 ||
	    k > PTI_CMP_SEEDS_MAX) {
		snprintf(out, n, "%s", arg);
		return;
	}
	size_t used = 0;
	out[0] = '\0';
	for (unsigned long i = 1; i <= k && used < n; i++)
		used += (size_t)snprintf(out + used, n - used, "%s%lu",
		    i > 1 ? "," : "", 1000 + i);
}

// tune_modes writes compare's tokens, each at each rate of the grid
// (TOKEN:lr=RATE), into out (size n). -1 after saying why.
static int tune_modes(const pti_config *c, const pti_cmp_tune *t,
    char *out, size_t n)
{
	size_t used = 0;
	for (int i = 0; i < t->n_modes; i++) {
		if (strstr(t->token[i], ":lr=") != NULL) {
			fprintf(stderr, "pstrain compare: --lr-grid gives each "
			    "job its --lr: mode '%s' has one of its own\n",
			    t->token[i]);
			return -1;
		}
		for (int k = 0; k < t->n_lr; k++) {
			int w = snprintf(out + used, n - used, "%s%s:lr=%g",
			    used ? "," : "", t->token[i], t->lr[k]);
			if (w < 0 || (size_t)w >= n - used) {
				fprintf(stderr, "pstrain compare: --modes %s "
				    "with --lr-grid: too long\n", c->modes);
				return -1;
			}
			used += (size_t)w;
		}
	}
	return 0;
}

// tune_pick scores every (mode, rate) over the tuning seeds and picks
// each mode's rate: the best mean best_val_acc, a job that did not end
// ok scoring 0; ties go to the lower rate.
static void tune_pick(pti_cmp_tune *t, const pti_cmp_set *ts)
{
	for (int i = 0; i < t->n_modes; i++) {
		t->chosen[i] = 0;
		for (int k = 0; k < t->n_lr; k++) {
			double sum = 0;
			int failed = 0;
			for (int r = 0; r < ts->n_seeds; r++) {
				const pti_cmp_job *j = &ts->jobs[(i * t->n_lr +
				    k) * ts->n_seeds + r];
				double v = j->col[PTI_COL_BEST_VAL];
				if (j->outcome != PTI_OUT_OK || isnan(v))
					failed++;
				else
					sum += v;
			}
			t->score[i][k] = sum / ts->n_seeds;
			t->failed[i][k] = failed;
			if (t->score[i][k] > t->score[i][t->chosen[i]])
				t->chosen[i] = k;
		}
	}
}

int pti_cmp_tune_run(pti_config *c, pti_cmp_tune *t)
{
	static pti_config tc; // large: off the stack
	static pti_cmp_set ts;
	pti_cmp_mode ms[PTI_CMP_MODES_MAX];
	int rv;
	memset(t, 0, sizeof(*t));
	if (tune_grid(c->lr_grid, t) != 0)
		return PTI_EXIT_USAGE;
	// The modes as given, for their tokens and labels.
	if (pti_cmp_modes_parse(c, 0, ms, &t->n_modes) != 0)
		return PTI_EXIT_USAGE;
	if (t->n_modes * t->n_lr > PTI_CMP_MODES_MAX) {
		fprintf(stderr, "pstrain compare: --lr-grid: %d modes at %d "
		    "rates are more than %d jobs a seed\n", t->n_modes, t->n_lr,
		    PTI_CMP_MODES_MAX);
		return PTI_EXIT_USAGE;
	}
	for (int i = 0; i < t->n_modes; i++) {
		memcpy(t->token[i], ms[i].token, sizeof(t->token[i]));
		memcpy(t->label[i], ms[i].label, sizeof(t->label[i]));
	}
	tc = *c;
	tc.baseline[0] = '\0';
	if (tune_modes(c, t, tc.modes, sizeof(tc.modes)) != 0)
		return PTI_EXIT_USAGE;
	tune_seeds(c->tune_seeds, tc.seeds, sizeof(tc.seeds));
	if (strchr(tc.seeds, ',') == NULL) { // one seed: --seed, not N
		char *end;
		tc.job.seed = strtoull(tc.seeds, &end, 10);
		if (*end != '\0' || end == tc.seeds) {
			fprintf(stderr, "pstrain compare: --tune-seeds %s: "
			    "expected N or a list S,S,...\n", c->tune_seeds);
			return PTI_EXIT_USAGE;
		}
		snprintf(t->seeds, sizeof(t->seeds), "%s", tc.seeds);
		tc.seeds[0] = '\0';
	}
	if (snprintf(tc.job.out, sizeof(tc.job.out), "%s/tune", c->job.out) >=
	    (int)sizeof(tc.job.out)) {
		fprintf(stderr, "pstrain compare: --out %s: too long\n",
		    c->job.out);
		return PTI_EXIT_USAGE;
	}
	if (tc.seeds[0] != '\0')
		snprintf(t->seeds, sizeof(t->seeds), "%s", tc.seeds);
	memset(&ts, 0, sizeof(ts));
	ts.tb = "";
	if ((rv = pti_cmp_set_init(&ts, &tc)) >= 0)
		return rv;
	// Fresh seeds for the comparison: none of the tuning's.
	pti_cmp_set fs;
	memset(&fs, 0, sizeof(fs));
	if ((rv = pti_cmp_set_init(&fs, c)) >= 0) {
		pti_cmp_set_fini(&ts);
		return rv;
	}
	// (--seeds auto may go on to seeds up to its cap)
	for (int b = fs.n_seeds; b < fs.auto_cap; b++)
		fs.seeds[fs.n_seeds++] = (uint64_t)b + 1;
	for (int a = 0; a < ts.n_seeds; a++)
		for (int b = 0; b < fs.n_seeds; b++)
			if (ts.seeds[a] == fs.seeds[b]) {
				fprintf(stderr, "pstrain compare: seed %llu is in "
				    "both --tune-seeds and --seeds: the rates "
				    "must be picked on other seeds than those "
				    "compared\n", (unsigned long long)ts.seeds[a]);
				pti_cmp_set_fini(&fs);
				pti_cmp_set_fini(&ts);
				return PTI_EXIT_USAGE;
			}
	pti_cmp_set_fini(&fs);
	printf("pstrain compare: --lr-grid: %d modes x %d rates x %d seeds "
	    "(%s) into %s\n", t->n_modes, t->n_lr, ts.n_seeds, t->seeds,
	    tc.job.out);
	rv = c->report_only ? pti_cmp_set_read(&ts) : pti_cmp_set_run(&ts);
	if (rv == 0) {
		tune_pick(t, &ts);
		// The comparison proper: each mode at its rate.
		size_t used = 0;
		for (int i = 0; i < t->n_modes; i++)
			used += (size_t)snprintf(c->modes + used,
			    sizeof(c->modes) - used, "%s%s:lr=%g", i ? "," : "",
			    t->token[i], t->lr[t->chosen[i]]);
		// --baseline names a mode as given; it is now that mode at
		// its rate.
		for (int i = 0; i < t->n_modes && c->baseline[0] != '\0'; i++)
			if (strcmp(c->baseline, t->token[i]) == 0 ||
			    strcmp(c->baseline, t->label[i]) == 0) {
				snprintf(c->baseline, sizeof(c->baseline),
				    "%s:lr=%g", t->token[i], t->lr[t->chosen[i]]);
				break;
			}
		for (int i = 0; i < t->n_modes; i++)
			printf("pstrain compare: mode %s: lr %g (mean best "
			    "validation accuracy %.4f over %d seeds)\n",
			    t->token[i], t->lr[t->chosen[i]],
			    t->score[i][t->chosen[i]], ts.n_seeds);
		t->n_seeds = ts.n_seeds;
	}
	pti_cmp_set_fini(&ts);
	return rv;
}

void pti_cmp_tune_report(FILE *f, const pti_cmp_tune *t)
{
	fprintf(f, "## Learning rates, picked on validation\n\n"
	    "Each mode ran at each rate of --lr-grid over the tuning seeds "
	    "%s (jobs in tune/LABEL-lr-RATE/seed-S). A cell is the mean "
	    "best_val_acc over those seeds, a job that did not end ok "
	    "counting 0 (\"k failed\"); each mode's rate is the best cell "
	    "(the lower rate on a tie), picked on the validation split "
	    "alone. The comparison below ran each mode at its rate on the "
	    "seeds of --seeds, none of them a tuning seed. Figure: "
	    "lr-grid.png.\n\n| mode |",
	    t->seeds);
	for (int k = 0; k < t->n_lr; k++)
		fprintf(f, " lr %g |", t->lr[k]);
	fprintf(f, " picked |\n| --- |");
	for (int k = 0; k <= t->n_lr; k++)
		fprintf(f, " ---: |");
	fprintf(f, "\n");
	int edge = 0;
	for (int i = 0; i < t->n_modes; i++) {
		fprintf(f, "| %s |", t->label[i]);
		for (int k = 0; k < t->n_lr; k++) {
			const char *b = k == t->chosen[i] ? "**" : "";
			fprintf(f, " %s%.4f%s", b, t->score[i][k], b);
			if (t->failed[i][k] > 0)
				fprintf(f, " (%d failed)", t->failed[i][k]);
			fprintf(f, " |");
		}
		fprintf(f, " %g |\n", t->lr[t->chosen[i]]);
		edge |= t->chosen[i] == 0 || t->chosen[i] == t->n_lr - 1;
	}
	if (edge)
		fprintf(f, "\nA rate picked at an end of the grid may not be "
		    "that mode's best: a better one may lie beyond it. Extend "
		    "the grid that way and run again.\n");
	fprintf(f, "\n");
}
