// cli/compare/jobs.c - compare's jobs (compare.h): a set of modes and
// seeds, each job run as `pstrain run` in a process of its own, one after
// the other, and read back from its folder (summary.json, eval.csv). Both
// the comparison (compare.c) and the lr grid (tune.c) run sets.
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <jansson.h>

#include "cli/cli.h"
#include "cli/compare/compare.h"
#include "cli/dash/dash.h"
#include "cli/flags.h"
#include "common/jsonio.h"
#include "cli/self.h"
#include "common/afile.h"
#include "common/clock.h"
#include "common/config.h"
#include "common/err.h"
#include "common/optspec.h"
#include "common/proto.h"

// The report's columns: the name in the table header ("_A" becomes the
// target), the summary.json key it comes from (NULL: computed from
// eval.csv), the decimals shown, and whether it is shown only where a
// job has it (a click model's AUCs, and the bytes its rows take).
const char *const pti_cmp_outcomes[PTI_OUT_N] = {"ok", "diverged",
    "collapsed", "damaged", "missing"};

const pti_cmp_col pti_cmp_cols[PTI_COLS] = {
    [PTI_COL_FINAL_TEST] = {"final_test_acc", "final_test_acc", 4, 0},
    [PTI_COL_BEST_VAL] = {"best_val_acc", "best_val_acc", 4, 0},
    [PTI_COL_BEST_VAL_TEST] = {"best_val_test_acc", "best_val_test_acc", 4, 0},
    [PTI_COL_LAST_K] = {"last5_acc", NULL, 4, 0},
    [PTI_COL_UPDATES_TO] = {"updates_to_A", NULL, 1, 0},
    [PTI_COL_EXAMPLES_TO] = {"examples_to_A", NULL, 0, 0},
    [PTI_COL_TRAIN_TO] = {"train_s_to_A", NULL, 3, 0},
    [PTI_COL_SAMPLES] = {"samples_per_s", "samples_per_s", 1, 0},
    [PTI_COL_STEP_MS] = {"step_ms_median", "step_ms_median", 2, 0},
    [PTI_COL_BOUND_MS] = {"comm_bound_ms", "comm_bound_ms", 2, 0},
    [PTI_COL_EVAL_S] = {"eval_s", "eval_s", 3, 0},
    [PTI_COL_MEAN_ST] = {"mean_staleness", "mean_staleness", 3, 0},
    [PTI_COL_MAX_ST] = {"max_staleness_seen", "max_staleness_seen", 1, 0},
    [PTI_COL_IDLE] = {"idle_fraction", "idle_fraction", 4, 0},
    [PTI_COL_DROPPED] = {"dropped_gradients", "dropped_gradients", 1, 0},
    [PTI_COL_LOST] = {"workers_lost", "workers_lost", 1, 0},
    [PTI_COL_TEST_AUC] = {"final_test_auc", "final_test_auc", 4, 1},
    [PTI_COL_BEST_VAL_TEST_AUC] = {"best_val_test_auc", "best_val_test_auc",
	4, 1},
    [PTI_COL_PLANTED_AUC] = {"planted_auc", "planted_auc", 4, 1},
    [PTI_COL_PULLED] = {"bytes_pulled_per_step", "bytes_pulled_per_step", 0,
	1},
    [PTI_COL_ROW_STALE] = {"row_staleness_mean", "row_staleness_mean", 3, 1},
    [PTI_COL_ROW_STALE_MAX] = {"row_staleness_max", "row_staleness_max", 1,
	1},
};

// ---------------------------------------------------------------------
// Signals: Ctrl-C goes to the running job, then ends the comparison.

static volatile sig_atomic_t cmp_signalled;
static volatile pid_t cmp_child;

static void cmp_on_signal(int sig)
{
	cmp_signalled = sig;
	if (cmp_child > 0)
		kill(cmp_child, sig);
}

// ---------------------------------------------------------------------
// --seeds (--modes: modes.c)

// seeds_parse reads --seeds: "" gives --seed alone, "N" seeds 1..N,
// "S,S,..." those (distinct), "auto" or "auto:CAP" seeds 1..3 to begin
// with and *cap (else 0) the most seeds to add up to. 0, or prints why
// and returns -1.
static int seeds_parse(const pti_config *c, uint64_t *seeds, int *n,
    int *cap)
{
	char buf[PT_PATH_MAX], *p = buf;
	*n = 0;
	*cap = 0;
	if (c->seeds[0] == '\0') {
		seeds[(*n)++] = c->job.seed;
		return 0;
	}
	if (strncmp(c->seeds, "auto", 4) == 0) {
		char *end;
		long k = c->seeds[4] == '\0' ? PTI_CMP_AUTO_CAP :
			 c->seeds[4] == ':' ? strtol(c->seeds + 5, &end, 10) : -1;
		if (c->seeds[4] == ':' && (*end != '\0' || end == c->seeds + 5))
			k = -1;
		if (k < 3 || k > PTI_CMP_SEEDS_MAX)
			goto bad;
		*cap = (int)k;
		for (*n = 0; *n < 3; (*n)++)
			seeds[*n] = (uint64_t)*n + 1;
		return 0;
	}
	snprintf(buf, sizeof(buf), "%s", c->seeds);
	int list = strchr(buf, ',') != NULL;
	for (char *next; p != NULL; p = next) {
		char *end;
		if ((next = strchr(p, ',')) != NULL)
			*next++ = '\0';
		errno = 0;
		unsigned long long v = strtoull(p, &end, 10);
		if (*p < '0' || *p > '9' || *end != '\0' || errno != 0 ||
		    *n == PTI_CMP_SEEDS_MAX || (!list && (v < 1 ||
		    v > PTI_CMP_SEEDS_MAX)))
			goto bad;
		for (int i = 0; i < *n; i++)
			if (seeds[i] == v)
				goto bad;
		seeds[(*n)++] = v;
	}
	if (!list) { // "N": seeds 1..N
		uint64_t count = seeds[0];
		for (*n = 0; (uint64_t)*n < count; (*n)++)
			seeds[*n] = (uint64_t)*n + 1;
	}
	return 0;
bad:
	fprintf(stderr, "pstrain compare: --seeds: bad value '%s' (expected "
	    "N, 1 to %d, for seeds 1..N, a list S,S,... of at most %d "
	    "distinct seeds, or auto[:CAP], CAP 3 to %d)\n", c->seeds,
	    PTI_CMP_SEEDS_MAX, PTI_CMP_SEEDS_MAX, PTI_CMP_SEEDS_MAX);
	return -1;
}

int pti_cmp_conf_write(const char *dir, const char *text)
{
	char path[PT_PATH_MAX + 16];
	pti_afile a;
	int rv;
	snprintf(path, sizeof(path), "%s/compare.conf", dir);
	if ((rv = pti_afile_open(&a, path)) == 0) {
		pti_afile_write(&a, text, strlen(text));
		rv = pti_afile_commit(&a);
	}
	if (rv != 0)
		fprintf(stderr, "pstrain compare: %s\n", pt_errmsg(rv));
	return rv != 0;
}

int pti_cmp_seeds_add(pti_config *c)
{
	uint64_t seeds[PTI_CMP_SEEDS_MAX], top = 0;
	int n, cap;
	if (seeds_parse(c, seeds, &n, &cap) != 0)
		return -1;
	if (cap > 0) {
		fprintf(stderr, "pstrain compare: --add-seeds with --seeds "
		    "auto: auto picks how many seeds it runs; give --seeds N "
		    "or a list\n");
		return -1;
	}
	if (n + (int)c->add_seeds > PTI_CMP_SEEDS_MAX) {
		fprintf(stderr, "pstrain compare: --add-seeds %u: %d seeds "
		    "and %u more is over %d\n", c->add_seeds, n, c->add_seeds,
		    PTI_CMP_SEEDS_MAX);
		return -1;
	}
	for (int i = 0; i < n; i++)
		top = seeds[i] > top ? seeds[i] : top;
	for (uint32_t i = 1; i <= c->add_seeds; i++)
		seeds[n++] = top + i;
	char list[sizeof(c->seeds)];
	size_t used = 0;
	for (int i = 0; i < n && used < sizeof(list); i++)
		used += (size_t)snprintf(list + used, sizeof(list) - used,
		    "%s%llu", i > 0 ? "," : "", (unsigned long long)seeds[i]);
	c->add_seeds = 0;
	// Given, as if typed: compare.conf keeps the list.
	return pti_config_set(c, "seeds", list) == 0 ? 0 : -1;
}

// ---------------------------------------------------------------------
// Running one job

// The words of job_argv's tail: --mode, --staleness, --backup-workers,
// --seed, --out and --save-model, each with its value, and --force.
enum { JOB_TAIL = 13 };

// job_argv builds `pstrain run` for job j: every run flag of c, then this
// job's mode, seed and folders, then its mode's modifiers, which override
// the same flags given earlier, and with tb (compare's --tensorboard DIR)
// its own TensorBoard folder DIR/LABEL/seed-S, the place of its outputs
// in --out. With --resume each job gets --force: a job run again
// replaces what an interrupted run left. NULL when out of memory
// (printed).
static char **job_argv(const pti_config *c, const pti_cmp_job *j,
    const char *tb)
{
	const pti_cmp_mode *m = j->m;
	// "pstrain run", a "--flag value" pair per flag of the table at most
	// (pti_config_to_argv), the tail, "--layer-push off", the modifiers,
	// "--tensorboard DIR" and the NULL.
	char **argv = calloc(2 + 2 * (size_t)pti_config_count() + JOB_TAIL + 2 +
	    PTI_CMP_EXTRA + 2 + 1, sizeof(char *));
	char save[PT_PATH_MAX + 112], stale[16], backup[16], seed[24];
	int argc = 0, rv;
	if (argv == NULL)
		goto oom;
	argv[argc++] = strdup("pstrain");
	argv[argc++] = strdup("run");
	if ((rv = pti_config_to_argv(c, PT_CMD_RUN, PT_CMD_RUN, argv, &argc)) !=
	    0)
		goto oom;
	// A job of --steps (compare's or its mode's) is not given --epochs
	// too: run refuses the two together.
	for (int i = 2; m->steps > 0 && i + 1 < argc; i++)
		if (strcmp(argv[i], "--epochs") == 0) {
			free(argv[i]);
			free(argv[i + 1]);
			memmove(&argv[i], &argv[i + 2], (size_t)(argc - i - 2) *
			    sizeof(*argv));
			argc -= 2;
			break;
		}
	snprintf(save, sizeof(save), "%s/model.bin", j->dir);
	snprintf(stale, sizeof(stale), "%u", m->staleness);
	snprintf(backup, sizeof(backup), "%u", m->backup);
	snprintf(seed, sizeof(seed), "%llu", (unsigned long long)j->seed);
	const char *tail[] = {"--mode", pti_mode_name(m->mode), "--staleness",
	    stale, "--backup-workers", backup, "--seed", seed, "--out",
	    j->dir, "--save-model", save};
	_Static_assert(sizeof(tail) / sizeof(tail[0]) + 1 == JOB_TAIL,
	    "job_argv's room for the tail");
	for (size_t i = 0; i < sizeof(tail) / sizeof(tail[0]); i++)
		argv[argc++] = strdup(tail[i]);
	if (c->cmp_resume)
		argv[argc++] = strdup("--force");
	// --layer-push auto would be on for some jobs only (sync ones whose
	// processes fit the cores): one thing more than the mode would then
	// differ. Off unless asked for.
	if (c->layer_push == PT_LP_AUTO) {
		argv[argc++] = strdup("--layer-push");
		argv[argc++] = strdup("off");
	}
	for (int i = 0; i < m->n_extra; i++)
		argv[argc++] = strdup(m->extra[i]);
	if (tb[0] != '\0') {
		char dir[2 * PT_PATH_MAX + 96];
		snprintf(dir, sizeof(dir), "%s%s", tb,
		    j->dir + strlen(c->job.out)); // "/LABEL/seed-S"
		argv[argc++] = strdup("--tensorboard");
		argv[argc++] = strdup(dir);
	}
	for (int i = 0; i < argc; i++)
		if (argv[i] == NULL)
			goto oom;
	return argv;
oom:
	fprintf(stderr, "pstrain compare: out of memory\n");
	for (int i = 0; argv != NULL && i < argc; i++)
		free(argv[i]);
	free(argv);
	return NULL;
}

// job_run runs job j; returns its exit status, 128+N when it died of
// signal N, or -1 when it could not start.
static int job_run(const pti_config *c, const pti_cmp_job *j,
    const char *tb)
{
	char **argv = job_argv(c, j, tb);
	int status;
	if (argv == NULL)
		return -1;
	fflush(stdout);
	pid_t pid = fork();
	if (pid == 0) {
		execv(pti_self_exe(), argv);
		fprintf(stderr, "pstrain compare: cannot execute itself: %s\n",
		    strerror(errno));
		_exit(127);
	}
	for (int i = 0; argv[i] != NULL; i++)
		free(argv[i]);
	free(argv);
	if (pid < 0) {
		fprintf(stderr, "pstrain compare: fork: %s\n", strerror(errno));
		return -1;
	}
	cmp_child = pid;
	if (cmp_signalled) // arrived before cmp_child was set
		kill(pid, cmp_signalled);
	while (waitpid(pid, &status, 0) != pid)
		if (errno != EINTR) {
			status = 1 << 8;
			break;
		}
	cmp_child = 0;
	return WIFEXITED(status) ? WEXITSTATUS(status)
				 : 128 + WTERMSIG(status);
}

// ---------------------------------------------------------------------
// Reading a job's files

// job_outcome reads "outcome"; a job written before outcomes existed
// counts as diverged when it says so or exited 3 (status; -1 unknown).
static int job_outcome(const pti_cmp_job *j, int status)
{
	char val[32];
	if (j->json == NULL)
		return PTI_OUT_MISSING;
	if (pti_json_text(j->json, "outcome", val, sizeof(val)) == 0) {
		for (int k = 0; k < PTI_OUT_N; k++)
			if (strcmp(val, pti_cmp_outcomes[k]) == 0)
				return k;
		return PTI_OUT_MISSING; // an outcome we do not know
	}
	if (status == PTI_EXIT_DIVERGED ||
	    json_is_true(json_object_get(j->json, "diverged")))
		return PTI_OUT_DIVERGED;
	return PTI_OUT_OK;
}

// job_eval reads eval.csv: updates, examples and training time to the
// first evaluation at or above c's target (validation accuracy, or with
// --target-auc validation AUC), and with no validation split (no val_acc
// column) the best test accuracy, which then stands for both selection
// columns.
static int job_eval(pti_cmp_job *j, const pti_config *c)
{
	const char *want[] = {PTI_COL(pti_csv_eval_val, PTI_EV_VERSION),
	    PTI_COL(pti_csv_eval_val, PTI_EV_WALL),
	    PTI_COL(pti_csv_eval_val, PTI_EV_ACC),
	    PTI_COL(pti_csv_eval_test, PTI_EV_ACC),
	    PTI_COL(pti_csv_eval_val, PTI_EV_AUC),
	    PTI_COL(pti_csv_eval_test, PTI_EV_AUC)};
	char path[PT_PATH_MAX + 128];
	pti_csv ev;
	snprintf(path, sizeof(path), "%s/eval.csv", j->dir);
	if (pti_csv_read(path, 0, want, 6, &ev) != 0)
		return -1;
	j->sel_test = !ev.have[2];
	int acc = j->sel_test ? 3 : 2;
	int auc = c->target_auc > 0;
	int to = auc ? acc + 2 : acc; // the column the target is read in
	double target = auc ? c->target_auc : c->target_acc;
	double best = NAN, wall_at = NAN, last[PTI_CMP_LAST_K];
	size_t n_last = 0;
	// Training time counts from the job's first step (summary.json's
	// startup_s after t0, where eval.csv's wall_s counts from).
	double startup = pti_json_num(j->json, "startup_s");
	for (size_t i = 0; i < ev.n_rows; i++) {
		const double *row = ev.v + i * 6;
		if (isnan(row[acc]))
			continue;
		if (isnan(best) || row[acc] > best)
			best = row[acc];
		last[n_last++ % PTI_CMP_LAST_K] = row[acc];
		if (isnan(j->col[PTI_COL_UPDATES_TO]) && row[to] >= target) {
			j->col[PTI_COL_UPDATES_TO] = row[0];
			wall_at = row[1];
			j->col[PTI_COL_TRAIN_TO] = row[1] - startup;
		}
	}
	if (j->sel_test)
		j->col[PTI_COL_BEST_VAL] = j->col[PTI_COL_BEST_VAL_TEST] = best;
	// The mean of the last evaluations: an endpoint steadier than one
	// final evaluation, whose trajectory noise is about +-0.01.
	if (n_last > 0) {
		size_t k = n_last < PTI_CMP_LAST_K ? n_last : PTI_CMP_LAST_K;
		double sum = 0;
		for (size_t i = 0; i < k; i++)
			sum += last[i];
		j->col[PTI_COL_LAST_K] = sum / (double)k;
	}
	free(ev.v);
	// Examples rather than updates compare modes fairly: an async
	// update carries B/W examples, a sync step B.
	if (!isnan(wall_at) && !isnan(j->pwb) &&
	    pti_job_examples_at(j->dir, j->pwb, &wall_at,
		&j->col[PTI_COL_EXAMPLES_TO], 1) != 0)
		return -1;
	return 0;
}

// job_read loads job j's summary.json and eval.csv into j; status is the
// run's exit status, -1 when unknown (--report-only). -1 when out of
// memory.
static int job_read(pti_cmp_job *j, int status, const pti_config *c)
{
	char path[PT_PATH_MAX + 128];
	json_decref(j->json);
	snprintf(path, sizeof(path), "%s/summary.json", j->dir);
	j->json = pti_json_load(path);
	j->outcome = job_outcome(j, status);
	j->pwb = pti_json_num(j->json, "per_worker_batch");
	for (int k = 0; k < PTI_COLS; k++)
		j->col[k] = pti_cmp_cols[k].key != NULL
				? pti_json_num(j->json, pti_cmp_cols[k].key)
				: NAN;
	if (j->outcome == PTI_OUT_MISSING)
		return 0;
	// A diverged job has no final parameters worth the name: its final
	// accuracy enters the means as chance (1 / classes), said in the
	// cell, rather than dropping out of them.
	double classes = pti_json_num(j->json, "classes");
	j->at_chance = j->outcome == PTI_OUT_DIVERGED &&
		       isnan(j->col[PTI_COL_FINAL_TEST]) && classes >= 2;
	if (j->at_chance)
		j->col[PTI_COL_FINAL_TEST] = 1.0 / classes;
	return job_eval(j, c);
}

// job_damaged says loudly why job j is damaged and what to do.
static void job_damaged(const pti_cmp_job *j, int going_on)
{
	fprintf(stderr, "\npstrain compare: ******** DAMAGED JOB ********\n"
	    "pstrain compare: mode %s, seed %llu (%s): workers_lost %.0f, "
	    "worker_restarts %.0f, server_restarts %.0f\n",
	    j->m->token, (unsigned long long)j->seed, j->dir,
	    j->col[PTI_COL_LOST], pti_json_num(j->json, "worker_restarts"),
	    pti_json_num(j->json, "server_restarts"));
	fprintf(stderr, going_on
	    ? "pstrain compare: --allow-failures: going on; it counts in "
	      "the report as damaged\n\n"
	    : "pstrain compare: its numbers are not those of an undisturbed "
	      "job: stopping (--allow-failures goes on)\n\n");
}

// set_job makes j the job of mode i and seed index r, not yet run.
static void set_job(const pti_cmp_set *s, pti_cmp_job *j, int i, int r)
{
	memset(j, 0, sizeof(*j));
	j->m = &s->ms[i];
	j->seed = s->seeds[r];
	j->outcome = PTI_OUT_MISSING;
	snprintf(j->dir, sizeof(j->dir), "%s/%s/seed-%llu", s->c->job.out,
	    s->ms[i].label, (unsigned long long)s->seeds[r]);
}

// pti_cmp_set_init fills s from c: modes, seeds, a job per (mode, seed). The
// exit status on failure (2: a bad flag), else -1.
int pti_cmp_set_init(pti_cmp_set *s, const pti_config *c)
{
	s->c = c;
	if (pti_cmp_modes_parse(c, !c->report_only, s->ms, &s->n_modes) != 0 ||
	    seeds_parse(c, s->seeds, &s->n_seeds, &s->auto_cap) != 0)
		return PTI_EXIT_USAGE;
	s->base = c->baseline[0] == '\0' ? 0 : -1;
	for (int i = 0; i < s->n_modes && s->base < 0; i++)
		if (strcmp(s->ms[i].token, c->baseline) == 0 ||
		    strcmp(s->ms[i].label, c->baseline) == 0)
			s->base = i;
	if (s->base < 0) {
		fprintf(stderr, "pstrain compare: --baseline %s: not one of "
		    "--modes %s\n", c->baseline, c->modes);
		return PTI_EXIT_USAGE;
	}
	s->jobs = calloc((size_t)s->n_modes * s->n_seeds, sizeof(*s->jobs));
	if (s->jobs == NULL) {
		fprintf(stderr, "pstrain compare: out of memory\n");
		return 1;
	}
	for (int i = 0; i < s->n_modes; i++)
		for (int r = 0; r < s->n_seeds; r++)
			set_job(s, &s->jobs[i * s->n_seeds + r], i, r);
	return -1;
}

int pti_cmp_set_more(pti_cmp_set *s)
{
	int n = s->n_seeds + 1;
	pti_cmp_job *jobs = calloc((size_t)s->n_modes * n, sizeof(*jobs));
	if (jobs == NULL || n > PTI_CMP_SEEDS_MAX) {
		free(jobs);
		fprintf(stderr, "pstrain compare: out of memory\n");
		return 1;
	}
	s->seeds[s->n_seeds] = (uint64_t)n; // seeds are 1..n under auto
	for (int i = 0; i < s->n_modes; i++) {
		memcpy(&jobs[i * n], &s->jobs[i * s->n_seeds],
		    (size_t)s->n_seeds * sizeof(*jobs));
		set_job(s, &jobs[i * n + s->n_seeds], i, s->n_seeds);
	}
	free(s->jobs);
	s->jobs = jobs;
	s->n_seeds = n;
	return 0;
}

void pti_cmp_set_fini(pti_cmp_set *s)
{
	for (int i = 0; s->jobs != NULL && i < s->n_modes * s->n_seeds; i++)
		json_decref(s->jobs[i].json);
	free(s->jobs);
}

// ---------------------------------------------------------------------
// --resume: the jobs done already

// The keys of a job's "config" that say where its files went or how it
// was watched, not what it trained: a job done is kept whatever they
// were.
static const char *const resume_ignored[] = {"out", "save-model",
    "tensorboard", "force", "resume", "config", "dashboard",
    "dashboard-listen"};

static int resume_ignores(const char *key)
{
	for (size_t i = 0; i < sizeof(resume_ignored) /
	    sizeof(resume_ignored[0]); i++)
		if (strcmp(resume_ignored[i], key) == 0)
			return 1;
	return 0;
}

// job_flags_differ compares the flags job j ran with (its summary.json's
// "config") with those this comparison gives it (job_argv's, settled as
// pstrain run settles them: the optimizer's usual lr for --lr 0, the
// transport the hosts imply, no servers for all-reduce). A flag the job
// has no record of (newer than the version that ran it) is not
// compared, nor --epochs where --steps gives the length. 0 when they
// agree; 1 after writing the first flag that
// differs into why; -1 after printing why it cannot tell.
static int job_flags_differ(const pti_cmp_set *s, const pti_cmp_job *j,
    char *why, size_t n)
{
	static pti_config want;
	const json_t *was = json_object_get(j->json, "config");
	char **argv = job_argv(s->c, j, s->tb);
	int argc = 0, help, rv = -1;
	if (argv == NULL)
		return -1;
	while (argv[argc] != NULL)
		argc++;
	pti_config_defaults(&want);
	if ((rv = pti_config_parse(&want, PT_CMD_RUN, argc - 2, argv + 2,
	    &help)) != 0) {
		fprintf(stderr, "pstrain compare: mode %s: %s\n", j->m->token,
		    pt_errmsg(rv));
		rv = -1;
		goto out;
	}
	if (want.job.lr == 0)
		want.job.lr = pti_optim_default_lr(&want.job.optim);
	pti_config_hosts_imply(&want);
	if (want.job.mode == PT_MODE_ALLREDUCE)
		want.job.servers = 0;
	json_t *now = pti_config_json(&want, PT_CMD_RUN);
	if (now == NULL) {
		fprintf(stderr, "pstrain compare: out of memory\n");
		rv = -1;
		goto out;
	}
	rv = 0;
	if (!json_is_object(was)) {
		snprintf(why, n, "its summary.json records no flags");
		rv = 1;
	}
	const char *key;
	json_t *v;
	json_object_foreach(now, key, v) {
		const json_t *w = json_object_get(was, key);
		// With --steps, --epochs was never used.
		if (rv != 0 || resume_ignores(key) || w == NULL ||
		    json_equal(v, w) || (want.steps > 0 &&
		    strcmp(key, "epochs") == 0))
			continue;
		// Numbers as the flag was typed, unless that hides the
		// difference.
		char *a = NULL, *b = NULL;
		for (int prec = 15; prec <= 17 && (a == NULL || b == NULL ||
		    strcmp(a, b) == 0); prec += 2) {
			free(a);
			free(b);
			a = json_dumps(w, JSON_ENCODE_ANY |
			    JSON_REAL_PRECISION(prec));
			b = json_dumps(v, JSON_ENCODE_ANY |
			    JSON_REAL_PRECISION(prec));
		}
		snprintf(why, n, "--%s was %s there, %s now", key,
		    a != NULL ? a : "?", b != NULL ? b : "?");
		free(a);
		free(b);
		rv = 1;
	}
	json_decref(now);
out:
	for (int i = 0; i < argc; i++)
		free(argv[i]);
	free(argv);
	return rv;
}

// set_keep marks the jobs of s done already in --out (--resume): a
// summary.json from the flags this comparison gives the job, not
// damaged unless --allow-failures. The others run (again). A job done
// with other flags stops the comparison before any job runs. 0, or the
// exit status.
static int set_keep(pti_cmp_set *s)
{
	int kept = 0, todo = 0;
	char why[1024];
	for (int k = 0; k < s->n_modes * s->n_seeds; k++) {
		pti_cmp_job *j = &s->jobs[k];
		if (j->ran)
			continue;
		if (job_read(j, -1, s->c) != 0) {
			fprintf(stderr, "pstrain compare: out of memory\n");
			return 1;
		}
		if (j->outcome == PTI_OUT_MISSING || (j->outcome ==
		    PTI_OUT_DAMAGED && !s->c->allow_failures)) {
			todo++;
			continue;
		}
		int rv = job_flags_differ(s, j, why, sizeof(why));
		if (rv < 0)
			return 1;
		if (rv > 0) {
			fprintf(stderr, "pstrain compare: --resume: %s ran "
			    "with other flags than this comparison gives it: "
			    "%s; give the flags it ran with (%s/compare.conf "
			    "holds the comparison's), or --force to run every "
			    "job again\n", j->dir, why, s->c->job.out);
			return PTI_EXIT_USAGE;
		}
		j->ran = 1;
		kept++;
		pti_dash_state(s->dash, (uint32_t)k, PTI_DASH_FILES, 0);
	}
	printf("pstrain compare: --resume: %d job%s of %s done already, "
	    "kept; %d to run\n", kept, kept == 1 ? "" : "s", s->c->job.out,
	    todo);
	return 0;
}

// pti_cmp_set_run runs every job, seed-major. 0, or the exit status.
int pti_cmp_set_run(pti_cmp_set *s)
{
	const pti_config *c = s->c;
	int total = 0, done = 0, rv;
	if (c->cmp_resume && (rv = set_keep(s)) != 0)
		return rv;
	if (s->conf != NULL && pti_cmp_conf_write(c->job.out, s->conf) != 0)
		return 1;
	s->conf = NULL;
	for (int k = 0; k < s->n_modes * s->n_seeds; k++)
		total += !s->jobs[k].ran;
	pti_on_stop_signals(cmp_on_signal);
	for (int r = 0; r < s->n_seeds; r++)
		for (int i = 0; i < s->n_modes; i++) {
			pti_cmp_job *j = &s->jobs[i * s->n_seeds + r];
			if (j->ran)
				continue; // --seeds auto: an earlier round's
			j->ran = 1;
			printf("pstrain compare: run %d of %d: mode %s, seed "
			    "%llu, output in %s\n", ++done, total, j->m->token,
			    (unsigned long long)j->seed, j->dir);
			uint32_t k = (uint32_t)(i * s->n_seeds + r);
			pti_dash_state(s->dash, k, PTI_DASH_RUNNING,
			    pti_wall_s());
			rv = job_run(c, j, s->tb);
			pti_dash_state(s->dash, k, rv == 0 || rv ==
			    PTI_EXIT_DIVERGED ? PTI_DASH_DONE : PTI_DASH_FAILED,
			    0);
			if (cmp_signalled) {
				fprintf(stderr, "\npstrain compare: stopped on "
				    "signal %d during mode %s, seed %llu\n",
				    (int)cmp_signalled, j->m->token,
				    (unsigned long long)j->seed);
				return PTI_EXIT_SIGNAL + (int)cmp_signalled;
			}
			if (job_read(j, rv, c) != 0) {
				fprintf(stderr, "pstrain compare: out of "
				    "memory\n");
				return 1;
			}
			if (j->outcome == PTI_OUT_DAMAGED) {
				job_damaged(j, c->allow_failures);
				if (!c->allow_failures)
					return 1;
			} else if (rv == PTI_EXIT_DIVERGED) {
				fprintf(stderr, "pstrain compare: mode %s, seed "
				    "%llu diverged; going on\n", j->m->token,
				    (unsigned long long)j->seed);
			} else if (rv != 0) {
				fprintf(stderr, "pstrain compare: mode %s, seed "
				    "%llu failed (%s %d); its output is in %s\n",
				    j->m->token, (unsigned long long)j->seed,
				    rv > 128 ? "signal" : "exit status",
				    rv > 128 ? rv - 128 : rv, j->dir);
				return 1;
			}
		}
	return 0;
}

// pti_cmp_set_read reads every job already in DIR (--report-only). 0, or the
// exit status.
int pti_cmp_set_read(pti_cmp_set *s)
{
	int found = 0;
	for (int r = 0; r < s->n_seeds; r++)
		for (int i = 0; i < s->n_modes; i++) {
			pti_cmp_job *j = &s->jobs[i * s->n_seeds + r];
			if (j->ran)
				continue; // --seeds auto: an earlier round's
			j->ran = 1;
			if (job_read(j, -1, s->c) != 0) {
				fprintf(stderr, "pstrain compare: out of "
				    "memory\n");
				return 1;
			}
			found += j->outcome != PTI_OUT_MISSING;
			if (j->outcome == PTI_OUT_MISSING)
				fprintf(stderr, "pstrain compare: no %s/summary."
				    "json: counted as missing\n", j->dir);
			if (j->outcome == PTI_OUT_DAMAGED) {
				job_damaged(j, s->c->allow_failures);
				if (!s->c->allow_failures)
					return 1;
			}
		}
	if (found == 0) {
		fprintf(stderr, "pstrain compare: --report-only: no job of "
		    "--modes %s and these seeds in %s\n", s->c->modes,
		    s->c->job.out);
		return 1;
	}
	return 0;
}
