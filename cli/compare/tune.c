// cli/compare/tune.c - compare's --lr-grid (compare.h): each mode at each
// rate of the grid over the --tune-seeds, into DIR/tune, then each
// mode's rate picked on validation alone; the comparison proper runs
// every mode at its own rate over the fresh --seeds. --lr-grid auto
// starts each mode at --lr / 2, --lr and 2 --lr and goes on by factors of
// 2, a round of jobs at a time, past whichever end its best rate is at.
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

// tune_grow puts the rate v into t->lr at index k (0 or n_lr), moving
// what every mode holds with it. -1 when the grid is full.
static int tune_grow(pti_cmp_tune *t, int k, double v)
{
	if (t->n_lr == PTI_TUNE_LR_MAX)
		return -1;
	if (k == 0) {
		memmove(&t->lr[1], &t->lr[0], (size_t)t->n_lr * sizeof(t->lr[0]));
		for (int i = 0; i < t->n_modes; i++) {
			memmove(&t->score[i][1], &t->score[i][0],
			    (size_t)t->n_lr * sizeof(t->score[i][0]));
			memmove(&t->failed[i][1], &t->failed[i][0],
			    (size_t)t->n_lr * sizeof(t->failed[i][0]));
			memmove(&t->raw[i][1], &t->raw[i][0],
			    (size_t)t->n_lr * sizeof(t->raw[i][0]));
			memmove(&t->ran[i][1], &t->ran[i][0], (size_t)t->n_lr);
			t->score[i][0] = t->raw[i][0] = NAN;
			t->failed[i][0] = 0;
			t->ran[i][0] = 0;
			t->lo[i]++, t->hi[i]++, t->chosen[i]++;
		}
	}
	t->lr[k] = v;
	t->n_lr++;
	return 0;
}

// tune_pick picks mode i's rate among those run: the best mean
// best_val_acc, the lower rate on a tie.
static void tune_pick(pti_cmp_tune *t, int i)
{
	t->chosen[i] = -1;
	for (int k = t->lo[i]; k <= t->hi[i]; k++)
		if (t->ran[i][k] && (t->chosen[i] < 0 ||
		    t->score[i][k] > t->score[i][t->chosen[i]]))
			t->chosen[i] = k;
}

// tune_extend (--lr-grid auto) widens each mode's rates by a factor of 2
// past the end its pick is at, unless it holds PTI_TUNE_SPAN rates. A
// mode whose every rate failed (its pick scored 0) is widened upward
// only when its raw cells rise all the way to its highest rate (the
// rates were too small to learn), else downward (they diverged or
// collapsed). Returns how many modes it widened.
static int tune_extend(pti_cmp_tune *t)
{
	int n = 0;
	for (int i = 0; i < t->n_modes; i++) {
		if (t->hi[i] - t->lo[i] + 1 >= PTI_TUNE_SPAN)
			continue;
		int at = t->chosen[i];
		if (t->score[i][at] == 0) {
			at = t->hi[i];
			for (int k = t->lo[i]; k < t->hi[i]; k++)
				if (!(t->raw[i][k + 1] > t->raw[i][k]))
					at = t->lo[i];
		}
		if (at == t->lo[i]) {
			if (t->lo[i] == 0 && tune_grow(t, 0, t->lr[0] / 2) != 0)
				continue;
			t->lo[i]--;
			n++;
		} else if (at == t->hi[i]) {
			if (t->hi[i] == t->n_lr - 1 &&
			    tune_grow(t, t->n_lr, t->lr[t->n_lr - 1] * 2) != 0)
				continue;
			t->hi[i]++;
			n++;
		}
	}
	return n;
}

// tune_round runs (or, with --report-only, reads) every (mode, rate) of
// t's that is not run yet, over tc's seeds into tc's out, and scores
// them: a job that did not end ok counts 0. 0, or the exit status.
static int tune_round(pti_config *tc, pti_cmp_tune *t)
{
	static pti_cmp_set ts; // large: off the stack
	int pair[PTI_CMP_MODES_MAX][2], n = 0, rv;
	size_t used = 0;
	for (int i = 0; i < t->n_modes; i++)
		for (int k = t->lo[i]; k <= t->hi[i]; k++) {
			if (t->ran[i][k])
				continue;
			int w = snprintf(tc->modes + used, sizeof(tc->modes) -
			    used, "%s%s:lr=%g", used ? "," : "", t->token[i],
			    t->lr[k]);
			if (n == PTI_CMP_MODES_MAX || w < 0 ||
			    (size_t)w >= sizeof(tc->modes) - used) {
				fprintf(stderr, "pstrain compare: --lr-grid: "
				    "more than %d modes at their rates, or too "
				    "long a list of them\n", PTI_CMP_MODES_MAX);
				return PTI_EXIT_USAGE;
			}
			used += (size_t)w;
			pair[n][0] = i;
			pair[n++][1] = k;
		}
	memset(&ts, 0, sizeof(ts));
	ts.tb = "";
	if ((rv = pti_cmp_set_init(&ts, tc)) >= 0)
		return rv;
	t->rounds++;
	printf("pstrain compare: --lr-grid%s: round %d: %s over seeds %s "
	    "into %s\n", t->is_auto ? " auto" : "", t->rounds, tc->modes,
	    t->seeds, tc->job.out);
	rv = tc->report_only ? pti_cmp_set_read(&ts) : pti_cmp_set_run(&ts);
	for (int m = 0; m < n && rv == 0; m++) {
		int i = pair[m][0], k = pair[m][1], failed = 0;
		double sum = 0, raw = 0;
		for (int r = 0; r < ts.n_seeds; r++) {
			const pti_cmp_job *j = &ts.jobs[m * ts.n_seeds + r];
			double v = j->col[PTI_COL_BEST_VAL];
			if (!isnan(v) && j->outcome != PTI_OUT_DIVERGED)
				raw += v;
			if (j->outcome != PTI_OUT_OK || isnan(v))
				failed++;
			else
				sum += v;
		}
		t->score[i][k] = sum / ts.n_seeds;
		t->raw[i][k] = raw / ts.n_seeds;
		t->failed[i][k] = failed;
		t->ran[i][k] = 1;
	}
	t->n_seeds = ts.n_seeds;
	pti_cmp_set_fini(&ts);
	return rv;
}

// tune_apart checks that no tuning seed (tc's) is one of c's --seeds
// (up to --seeds auto's cap). 0, or the exit status after saying why.
static int tune_apart(const pti_config *c, const pti_config *tc)
{
	static pti_cmp_set ts, fs;
	int rv = 0;
	memset(&ts, 0, sizeof(ts));
	memset(&fs, 0, sizeof(fs));
	if ((rv = pti_cmp_set_init(&ts, tc)) >= 0)
		return rv;
	if ((rv = pti_cmp_set_init(&fs, c)) >= 0) {
		pti_cmp_set_fini(&ts);
		return rv;
	}
	rv = 0;
	for (int b = fs.n_seeds; b < fs.auto_cap; b++)
		fs.seeds[fs.n_seeds++] = (uint64_t)b + 1;
	for (int a = 0; a < ts.n_seeds && rv == 0; a++)
		for (int b = 0; b < fs.n_seeds && rv == 0; b++)
			if (ts.seeds[a] == fs.seeds[b]) {
				fprintf(stderr, "pstrain compare: seed %llu is in "
				    "both --tune-seeds and --seeds: the rates "
				    "must be picked on other seeds than those "
				    "compared\n", (unsigned long long)ts.seeds[a]);
				rv = PTI_EXIT_USAGE;
			}
	pti_cmp_set_fini(&fs);
	pti_cmp_set_fini(&ts);
	return rv;
}

int pti_cmp_tune_run(pti_config *c, pti_cmp_tune *t)
{
	static pti_config tc; // large: off the stack
	pti_cmp_mode ms[PTI_CMP_MODES_MAX];
	int rv;
	memset(t, 0, sizeof(*t));
	t->is_auto = strcmp(c->lr_grid, "auto") == 0;
	if (t->is_auto) {
		if (!(c->job.lr > 0)) {
			fprintf(stderr, "pstrain compare: --lr-grid auto starts "
			    "at --lr / 2, --lr and 2 --lr: --lr %g is not above "
			    "0\n", c->job.lr);
			return PTI_EXIT_USAGE;
		}
		t->n_lr = 3;
		t->lr[0] = c->job.lr / 2, t->lr[1] = c->job.lr;
		t->lr[2] = c->job.lr * 2;
	} else if (tune_grid(c->lr_grid, t) != 0) {
		return PTI_EXIT_USAGE;
	}
	// The modes as given, for their tokens and labels.
	if (pti_cmp_modes_parse(c, 0, ms, &t->n_modes) != 0)
		return PTI_EXIT_USAGE;
	for (int i = 0; i < t->n_modes; i++) {
		if (strstr(ms[i].token, ":lr=") != NULL) {
			fprintf(stderr, "pstrain compare: --lr-grid gives each "
			    "job its --lr: mode '%s' has one of its own\n",
			    ms[i].token);
			return PTI_EXIT_USAGE;
		}
		memcpy(t->token[i], ms[i].token, sizeof(t->token[i]));
		memcpy(t->label[i], ms[i].label, sizeof(t->label[i]));
		t->lo[i] = 0;
		t->hi[i] = t->n_lr - 1;
		for (int k = 0; k < PTI_TUNE_LR_MAX; k++)
			t->score[i][k] = NAN;
	}
	tc = *c;
	tc.baseline[0] = '\0';
	tune_seeds(c->tune_seeds, tc.seeds, sizeof(tc.seeds));
	if (strchr(tc.seeds, ',') == NULL) { // one seed: --seed, not N
		char *end;
		tc.job.seed = strtoull(tc.seeds, &end, 10);
		if (*end != '\0' || end == tc.seeds) {
			fprintf(stderr, "pstrain compare: --tune-seeds %s: "
			    "expected N or a list S,S,...\n", c->tune_seeds);
			return PTI_EXIT_USAGE;
		}
	}
	snprintf(t->seeds, sizeof(t->seeds), "%s", tc.seeds);
	if (strchr(tc.seeds, ',') == NULL)
		tc.seeds[0] = '\0';
	if (snprintf(tc.job.out, sizeof(tc.job.out), "%s/tune", c->job.out) >=
	    (int)sizeof(tc.job.out)) {
		fprintf(stderr, "pstrain compare: --out %s: too long\n",
		    c->job.out);
		return PTI_EXIT_USAGE;
	}
	if ((rv = tune_apart(c, &tc)) != 0)
		return rv;
	// Rounds: every rate not run yet, then each mode's pick; auto
	// widens a mode whose pick is at an end, until none is.
	do {
		if ((rv = tune_round(&tc, t)) != 0)
			return rv;
		for (int i = 0; i < t->n_modes; i++)
			tune_pick(t, i);
	} while (t->is_auto && tune_extend(t) > 0);
	// The comparison proper: each mode at its rate.
	size_t used = 0;
	for (int i = 0; i < t->n_modes; i++) {
		int w = snprintf(c->modes + used, sizeof(c->modes) - used,
		    "%s%s:lr=%g", i ? "," : "", t->token[i],
		    t->lr[t->chosen[i]]);
		if (w < 0 || (size_t)w >= sizeof(c->modes) - used) {
			fprintf(stderr, "pstrain compare: --modes with "
			    "--lr-grid: too long a list\n");
			return PTI_EXIT_USAGE;
		}
		used += (size_t)w;
	}
	// --baseline names a mode as given; it is now that mode at its rate.
	for (int i = 0; i < t->n_modes && c->baseline[0] != '\0'; i++)
		if (strcmp(c->baseline, t->token[i]) == 0 ||
		    strcmp(c->baseline, t->label[i]) == 0) {
			snprintf(c->baseline, sizeof(c->baseline), "%s:lr=%g",
			    t->token[i], t->lr[t->chosen[i]]);
			break;
		}
	for (int i = 0; i < t->n_modes; i++)
		printf("pstrain compare: mode %s: lr %g (mean best validation "
		    "accuracy %.4f over %d seeds)\n", t->token[i],
		    t->lr[t->chosen[i]], t->score[i][t->chosen[i]], t->n_seeds);
	return 0;
}

void pti_cmp_tune_report(FILE *f, const pti_cmp_tune *t)
{
	fprintf(f, "## Learning rates, picked on validation\n\n");
	if (t->is_auto)
		fprintf(f, "--lr-grid auto: each mode ran at --lr / 2, --lr "
		    "and 2 --lr, then at one more rate a factor of 2 past "
		    "whichever end its best rate was at, until that rate was "
		    "inside its range or the range held %d rates (%d rounds "
		    "of jobs; \"-\": a rate that mode did not run). ",
		    PTI_TUNE_SPAN, t->rounds);
	else
		fprintf(f, "Each mode ran at each rate of --lr-grid. ");
	fprintf(f, "Tuning seeds %s (jobs in tune/LABEL-lr-RATE/seed-S). A "
	    "cell is the mean best_val_acc over those seeds, a job that did "
	    "not end ok counting 0 (\"k failed\"); each mode's rate is the "
	    "best cell (the lower rate on a tie), picked on the validation "
	    "split alone. The comparison below ran each mode at its rate on "
	    "the seeds of --seeds, none of them a tuning seed. Figure: "
	    "lr-grid.png.\n\n| mode |", t->seeds);
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
			if (!t->ran[i][k]) {
				fprintf(f, " - |");
				continue;
			}
			fprintf(f, " %s%.4f%s", b, t->score[i][k], b);
			if (t->failed[i][k] > 0)
				fprintf(f, " (%d failed)", t->failed[i][k]);
			fprintf(f, " |");
		}
		fprintf(f, " %g |\n", t->lr[t->chosen[i]]);
		edge |= t->chosen[i] == t->lo[i] || t->chosen[i] == t->hi[i];
	}
	if (edge)
		fprintf(f, "\nA rate picked at an end of %s may not be that "
		    "mode's best: a better one may lie beyond it. %s\n",
		    t->is_auto ? "a mode's range" : "the grid",
		    t->is_auto ? "The range reached its cap of rates." :
		    "Extend the grid that way (or give --lr-grid auto) and "
		    "run again.");
	fprintf(f, "\n");
}
