// cli/compare.c - `pstrain compare`: one `pstrain run` per mode (sync,
// async, ssp:S, sync:backup=B) with otherwise identical flags, one after
// the other, then DIR/report.md (a table of the modes side by side) and
// DIR/loss.png and DIR/accuracy.png drawn by gnuplot from DIR/plots/.
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli.h"
#include "config.h"
#include "err.h"
#include "proto.h"

#define CMP_MODES_MAX 32
#define CMP_SMOOTH 20 // steps in the moving average of the loss

typedef struct cmp_mode {
	char token[64]; // as given: "ssp:4"
	char label[64]; // a file name: "ssp-4"
	int mode;       // pt_mode
	uint32_t staleness, backup;
	char extra[12][48]; // further "--flag value" words from modifiers
	int n_extra;
	int diverged;
} cmp_mode;

static volatile sig_atomic_t cmp_signalled;
static volatile pid_t cmp_child;

static void cmp_on_signal(int sig)
{
	cmp_signalled = sig;
	if (cmp_child > 0)
		kill(cmp_child, sig);
}

// whole reads a whole number from all of s.
static int whole(const char *s, uint32_t *v)
{
	char *end;
	if (*s < '0' || *s > '9')
		return -1;
	errno = 0;
	unsigned long n = strtoul(s, &end, 10);
	if (*end != '\0' || errno != 0 || n > 1000000)
		return -1;
	*v = (uint32_t)n;
	return 0;
}

// mode_extra adds one "--flag value" pair (value may be NULL).
static int mode_extra(cmp_mode *m, const char *flag, const char *value)
{
	if (m->n_extra + 2 > 12)
		return -1;
	snprintf(m->extra[m->n_extra++], sizeof(m->extra[0]), "%s", flag);
	if (value != NULL)
		snprintf(m->extra[m->n_extra++], sizeof(m->extra[0]), "%s",
		    value);
	return 0;
}

// mode_parse reads MODE[:S][:MODIFIER...]: MODE is sync, async or ssp
// (whose S comes next); modifiers are backup=B (sync), staleness-lr
// (async, ssp), batch=B, lr-scaling=linear, warmup=E, lr=LR and
// optimizer=sgd|momentum|nesterov|adagrad|adam (momentum and nesterov
// with 0.9), each the run flag of that name for this job alone. An
// optimizer without lr= (and no --lr given) gets its usual lr.
static int mode_parse(const char *tok, cmp_mode *m, int lr_given)
{
	char buf[64], *part, *save = NULL;
	int opt = 0, lr = lr_given;
	memset(m, 0, sizeof(*m));
	if (strlen(tok) >= sizeof(m->token))
		return -1;
	strcpy(m->token, tok);
	strcpy(buf, tok);
	part = strtok_r(buf, ":", &save);
	if (part == NULL)
		return -1;
	if (strcmp(part, "sync") == 0)
		m->mode = PT_MODE_SYNC;
	else if (strcmp(part, "async") == 0)
		m->mode = PT_MODE_ASYNC;
	else if (strcmp(part, "ssp") == 0) {
		m->mode = PT_MODE_SSP;
		part = strtok_r(NULL, ":", &save);
		if (part == NULL || whole(part, &m->staleness) != 0)
			return -1;
	} else
		return -1;
	while ((part = strtok_r(NULL, ":", &save)) != NULL) {
		char *eq = strchr(part, '=');
		uint32_t v;
		if (eq != NULL)
			*eq++ = '\0';
		if (strcmp(part, "backup") == 0 && eq && m->mode == PT_MODE_SYNC &&
		    whole(eq, &m->backup) == 0)
			continue;
		if (strcmp(part, "staleness-lr") == 0 && eq == NULL &&
		    m->mode != PT_MODE_SYNC) {
			if (mode_extra(m, "--staleness-lr", NULL) != 0)
				return -1;
			continue;
		}
		if (strcmp(part, "batch") == 0 && eq && whole(eq, &v) == 0 &&
		    mode_extra(m, "--batch", eq) == 0)
			continue;
		if (strcmp(part, "lr-scaling") == 0 && eq &&
		    strcmp(eq, "linear") == 0 &&
		    mode_extra(m, "--lr-scaling", eq) == 0)
			continue;
		if (strcmp(part, "warmup") == 0 && eq &&
		    mode_extra(m, "--warmup-epochs", eq) == 0)
			continue;
		if (strcmp(part, "lr") == 0 && eq &&
		    mode_extra(m, "--lr", eq) == 0) {
			lr = 1;
			continue;
		}
		if (strcmp(part, "optimizer") == 0 && eq) {
			const char *spec = strcmp(eq, "momentum") == 0
					       ? "momentum:0.9"
					   : strcmp(eq, "nesterov") == 0
					       ? "nesterov:0.9"
					       : eq;
			if (strcmp(spec, "sgd") != 0 &&
			    strcmp(spec, "adagrad") != 0 &&
			    strcmp(spec, "adam") != 0 && strchr(spec, ':') == NULL)
				return -1;
			if (mode_extra(m, "--optimizer", spec) != 0)
				return -1;
			opt = 1;
			continue;
		}
		return -1;
	}
	// "--lr 0" stands for the optimizer's usual rate (pstrain run).
	if (opt && !lr && mode_extra(m, "--lr", "0") != 0)
		return -1;
	for (size_t i = 0; tok[i]; i++)
		m->label[i] = tok[i] == ':' || tok[i] == '=' ? '-' : tok[i];
	return 0;
}

// modes_parse splits --modes into ms; 0, or prints why and returns -1.
static int modes_parse(const char *list, cmp_mode *ms, int *n,
    int lr_given)
{
	char buf[PT_PATH_MAX];
	snprintf(buf, sizeof(buf), "%s", list);
	*n = 0;
	for (char *tok = buf, *next; tok != NULL; tok = next) {
		next = strchr(tok, ',');
		if (next)
			*next++ = '\0';
		if (*n == CMP_MODES_MAX) {
			fprintf(stderr, "pstrain compare: --modes: at most %d "
			    "modes\n", CMP_MODES_MAX);
			return -1;
		}
		if (mode_parse(tok, &ms[*n], lr_given) != 0) {
			fprintf(stderr, "pstrain compare: --modes: bad mode "
			    "'%s' (expected sync, async or ssp:S, then "
			    "optional :backup=B, :staleness-lr, :batch=B, "
			    ":lr-scaling=linear, :warmup=E, :lr=LR, "
			    ":optimizer=sgd|momentum|nesterov|adagrad|adam)\n",
			    tok);
			return -1;
		}
		for (int i = 0; i < *n; i++)
			if (strcmp(ms[i].label, ms[*n].label) == 0) {
				fprintf(stderr, "pstrain compare: --modes: "
				    "'%s' given twice\n", tok);
				return -1;
			}
		(*n)++;
	}
	return 0;
}

// cmp_run runs `pstrain run` for one mode; returns its exit status, 128+N
// when it died of signal N, or -1 when it could not start.
static int cmp_run(const pt_config *c, const cmp_mode *m)
{
	char **argv = calloc(2 * (size_t)pt_config_count() + 16,
	    sizeof(char *));
	char out[PT_PATH_MAX + 80], save[PT_PATH_MAX + 96], num[32];
	int argc = 0, rv, status;

	if (argv == NULL) {
		fprintf(stderr, "pstrain compare: out of memory\n");
		return -1;
	}
	argv[argc++] = strdup("pstrain");
	argv[argc++] = strdup("run");
	if ((rv = pt_config_to_argv(c, PT_CMD_RUN, PT_CMD_RUN, argv, &argc)) !=
	    0) {
		fprintf(stderr, "pstrain compare: %s\n", pt_errmsg(rv));
		return -1;
	}
	snprintf(out, sizeof(out), "%s/%s", c->out, m->label);
	snprintf(save, sizeof(save), "%s/model.bin", out);
	argv[argc++] = strdup("--mode");
	argv[argc++] = strdup(pt_mode_name(m->mode));
	argv[argc++] = strdup("--staleness");
	snprintf(num, sizeof(num), "%u", m->staleness);
	argv[argc++] = strdup(num);
	argv[argc++] = strdup("--backup-workers");
	snprintf(num, sizeof(num), "%u", m->backup);
	argv[argc++] = strdup(num);
	for (int i = 0; i < m->n_extra; i++)
		argv[argc++] = strdup(m->extra[i]);
	argv[argc++] = strdup("--out");
	argv[argc++] = strdup(out);
	argv[argc++] = strdup("--save-model");
	argv[argc++] = strdup(save);
	argv[argc] = NULL;
	for (int i = 0; i < argc; i++)
		if (argv[i] == NULL) {
			fprintf(stderr, "pstrain compare: out of memory\n");
			return -1;
		}
	printf("pstrain compare: mode %s, output in %s\n", m->token, out);
	fflush(stdout);
	pid_t pid = fork();
	if (pid == 0) {
		execv("/proc/self/exe", argv);
		fprintf(stderr, "pstrain compare: cannot execute itself: %s\n",
		    strerror(errno));
		_exit(127);
	}
	for (int i = 0; i < argc; i++)
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

// json_get copies the value of "key" from a flat JSON file (one
// `"key": value` per line) into buf, quotes stripped; "n/a" when the file
// or key is missing or the value is null.
static void json_get(const char *path, const char *key, char *buf, size_t n)
{
	char line[1024], want[128];
	snprintf(buf, n, "n/a");
	snprintf(want, sizeof(want), "\"%s\":", key);
	FILE *f = fopen(path, "r");
	if (f == NULL)
		return;
	while (fgets(line, sizeof(line), f) != NULL) {
		char *p = line + strspn(line, " \t");
		if (strncmp(p, want, strlen(want)) != 0)
			continue;
		p += strlen(want);
		p += strspn(p, " \t");
		size_t len = strcspn(p, "\r\n");
		while (len > 0 && (p[len - 1] == ',' || p[len - 1] == ' '))
			len--;
		if (len >= 2 && p[0] == '"' && p[len - 1] == '"') {
			p++;
			len -= 2;
		}
		if (len > 0 && !(len == 4 && strncmp(p, "null", 4) == 0))
			snprintf(buf, n, "%.*s", (int)len, p);
		break;
	}
	fclose(f);
}

typedef struct cmp_csv {
	double *v;     // n_rows x n_cols, row-major
	int have[8];   // per wanted column: found in the header
	size_t n_rows; // rows read
	int n_cols;
} cmp_csv;

// csv_read reads the columns named in want (found by header name) from a
// CSV with a header line. A missing file gives no rows; a missing column
// has have[i] == 0 and reads as NAN. Returns -1 only when out of memory.
static int csv_read(const char *path, const char **want, int n_want,
    cmp_csv *t)
{
	char *line = NULL;
	size_t cap = 0, room = 0;
	int idx[64], n_idx = 0;
	memset(t, 0, sizeof(*t));
	t->n_cols = n_want;
	FILE *f = fopen(path, "r");
	if (f == NULL)
		return 0;
	if (getline(&line, &cap, f) < 0)
		goto out;
	line[strcspn(line, "\r\n")] = '\0';
	for (char *tok = strtok(line, ","); tok && n_idx < 64;
	    tok = strtok(NULL, ",")) {
		idx[n_idx] = -1;
		for (int k = 0; k < n_want; k++)
			if (strcmp(tok, want[k]) == 0) {
				idx[n_idx] = k;
				t->have[k] = 1;
			}
		n_idx++;
	}
	while (getline(&line, &cap, f) > 0) {
		if (strchr(line, '\n') == NULL)
			break; // a row still being written
		if (t->n_rows == room) {
			room = room ? 2 * room : 256;
			double *v = realloc(t->v, room * n_want * sizeof(double));
			if (v == NULL) {
				free(line);
				fclose(f);
				return -1;
			}
			t->v = v;
		}
		double *row = t->v + t->n_rows * n_want;
		for (int k = 0; k < n_want; k++)
			row[k] = NAN;
		char *p = line;
		for (int col = 0; col < n_idx && *p; col++) {
			char *end;
			double x = strtod(p, &end);
			if (idx[col] >= 0 && end != p)
				row[idx[col]] = x;
			p += strcspn(p, ",");
			if (*p == ',')
				p++;
		}
		t->n_rows++;
	}
out:
	free(line);
	fclose(f);
	return 0;
}

typedef struct cmp_result {
	char final_acc[32], samples[32], mean_st[32], max_st[32], idle[32],
	    dropped[32], diverged[32];
	char best[32], steps_to[32], wall_to[32];
	size_t n_loss, n_acc; // points written to the plot data files
} cmp_result;

// cmp_collect reads one mode's outputs, writes its plot data files and
// fills r.
static int cmp_collect(const pt_config *c, const char *plots,
    const cmp_mode *m, cmp_result *r)
{
	char dir[PT_PATH_MAX + 80], path[PT_PATH_MAX + 160];
	static const char *ev_cols[] = {"step", "worker_step", "wall_s",
	    "test_acc"};
	static const char *w_cols[] = {"step", "wall_s", "loss"};
	cmp_csv ev, w;
	int rv = 0;

	memset(r, 0, sizeof(*r));
	snprintf(dir, sizeof(dir), "%s/%s", c->out, m->label);
	snprintf(path, sizeof(path), "%s/summary.json", dir);
	json_get(path, "final_test_acc", r->final_acc, sizeof(r->final_acc));
	json_get(path, "samples_per_s", r->samples, sizeof(r->samples));
	json_get(path, "mean_staleness", r->mean_st, sizeof(r->mean_st));
	json_get(path, "max_staleness", r->max_st, sizeof(r->max_st));
	json_get(path, "idle_fraction", r->idle, sizeof(r->idle));
	json_get(path, "dropped_gradients", r->dropped, sizeof(r->dropped));
	json_get(path, "diverged", r->diverged, sizeof(r->diverged));
	if (m->diverged && strcmp(r->diverged, "n/a") == 0)
		snprintf(r->diverged, sizeof(r->diverged), "true");

	snprintf(path, sizeof(path), "%s/eval.csv", dir);
	if (csv_read(path, ev_cols, 4, &ev) != 0)
		return -1;
	snprintf(path, sizeof(path), "%s/worker-0.csv", dir);
	if (csv_read(path, w_cols, 3, &w) != 0) {
		free(ev.v);
		return -1;
	}
	snprintf(r->best, sizeof(r->best), "n/a");
	snprintf(r->steps_to, sizeof(r->steps_to), "never");
	snprintf(r->wall_to, sizeof(r->wall_to), "never");
	double best = -1;
	int reached = 0;
	snprintf(path, sizeof(path), "%s/acc-%s.dat", plots, m->label);
	FILE *f = fopen(path, "w");
	if (f == NULL)
		goto fail;
	fprintf(f, "# %s: worker-0 step, wall_s, test_acc (eval.csv)\n",
	    m->token);
	for (size_t i = 0; i < ev.n_rows; i++) {
		const double *row = ev.v + i * 4;
		double step = ev.have[1] && !isnan(row[1]) ? row[1] : row[0];
		if (isnan(row[3]))
			continue;
		fprintf(f, "%.0f %.3f %.6g\n", step, row[2], row[3]);
		r->n_acc++;
		if (row[3] > best)
			best = row[3];
		if (!reached && row[3] >= c->target_acc) {
			reached = 1;
			snprintf(r->steps_to, sizeof(r->steps_to), "%.0f", step);
			snprintf(r->wall_to, sizeof(r->wall_to), "%.2f", row[2]);
		}
	}
	fclose(f);
	if (best >= 0)
		snprintf(r->best, sizeof(r->best), "%.4f", best);

	snprintf(path, sizeof(path), "%s/loss-%s.dat", plots, m->label);
	if ((f = fopen(path, "w")) == NULL)
		goto fail;
	fprintf(f, "# %s: worker-0 step, wall_s, loss (mean of the last %d "
	    "steps, worker-0.csv)\n", m->token, CMP_SMOOTH);
	double sum = 0;
	for (size_t i = 0; i < w.n_rows; i++) {
		const double *row = w.v + i * 3;
		sum += row[2];
		if (i >= CMP_SMOOTH)
			sum -= w.v[(i - CMP_SMOOTH) * 3 + 2];
		size_t k = i + 1 < CMP_SMOOTH ? i + 1 : CMP_SMOOTH;
		double mean = sum / (double)k;
		if (!isfinite(mean))
			continue;
		fprintf(f, "%.0f %.3f %.6g\n", row[0], row[1], mean);
		r->n_loss++;
	}
	fclose(f);
out:
	free(ev.v);
	free(w.v);
	return rv;
fail:
	fprintf(stderr, "pstrain compare: %s: %s\n", path, strerror(errno));
	rv = -1;
	goto out;
}

static void cmp_table(FILE *f, const cmp_mode *ms, const cmp_result *rs,
    int n, double target)
{
	fprintf(f, "| mode | final_test_acc | best_test_acc | "
		   "steps_to_%.4g | wall_s_to_%.4g | samples_per_s | "
		   "mean_staleness | max_staleness | idle_fraction | "
		   "dropped_gradients | diverged |\n",
	    target, target);
	fprintf(f, "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | "
		   "---: | ---: | --- |\n");
	for (int i = 0; i < n; i++) {
		const cmp_result *r = &rs[i];
		fprintf(f, "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s "
			   "| %s |\n",
		    ms[i].label, r->final_acc, r->best, r->steps_to,
		    r->wall_to, r->samples, r->mean_st, r->max_st, r->idle,
		    r->dropped, r->diverged);
	}
}

// panel writes one gnuplot plot command: column x against column y of
// each mode's file, skipping modes with no points.
static void panel(FILE *f, const char *plots, const char *kind,
    const cmp_mode *ms, const cmp_result *rs, int n, int x, int loss)
{
	int first = 1;
	for (int i = 0; i < n; i++) {
		if ((loss ? rs[i].n_loss : rs[i].n_acc) == 0)
			continue;
		fprintf(f, "%s'%s/%s-%s.dat' using %d:%d with %s lw 2 title "
			   "'%s'", first ? "plot " : ", \\\n     ", plots,
		    kind, ms[i].label, x, 3,
		    loss ? "lines" : "linespoints", ms[i].token);
		first = 0;
	}
	if (first) // no mode has data: an empty frame
		fprintf(f, "set label 1 'no data' at graph 0.5,0.5 center\n"
			   "plot [0:1] [0:1] -1 notitle\nunset label 1");
	fprintf(f, "\n");
}

static int cmp_plot(const char *out, const cmp_mode *ms,
    const cmp_result *rs, int n)
{
	char abs_out[PATH_MAX], plots[PATH_MAX + 8], gp[PATH_MAX + 16];
	if (realpath(out, abs_out) == NULL)
		snprintf(abs_out, sizeof(abs_out), "%s", out);
	snprintf(plots, sizeof(plots), "%s/plots", abs_out);
	snprintf(gp, sizeof(gp), "%s/plot.gp", plots);
	FILE *f = fopen(gp, "w");
	if (f == NULL) {
		fprintf(stderr, "pstrain compare: %s: %s\n", gp,
		    strerror(errno));
		return -1;
	}
	fprintf(f, "# written by pstrain compare; re-plot with: gnuplot %s\n"
		   "if (strstrt(GPVAL_TERMINALS, 'pngcairo') > 0) {\n"
		   "    set terminal pngcairo size 1400,500 noenhanced\n"
		   "} else {\n"
		   "    set terminal png size 1400,500 noenhanced\n"
		   "}\n"
		   "set grid\nset key top right\n\n", gp);
	const char *what[2][3] = {{"loss", "loss", "training loss of worker "
	    "0 (mean of the last 20 steps)"}, {"accuracy", "acc",
	    "test accuracy"}};
	for (int k = 0; k < 2; k++) {
		fprintf(f, "set output '%s/%s.png'\n"
			   "set multiplot layout 1,2 title '%s'\n"
			   "set xlabel 'worker-0 step'\nset ylabel '%s'\n",
		    abs_out, what[k][0], what[k][2], what[k][0]);
		if (k == 1)
			fprintf(f, "set key bottom right\n");
		panel(f, plots, what[k][1], ms, rs, n, 1, k == 0);
		fprintf(f, "set xlabel 'wall time (s)'\n");
		panel(f, plots, what[k][1], ms, rs, n, 2, k == 0);
		fprintf(f, "unset multiplot\nset output\n\n");
	}
	fclose(f);

	pid_t pid = fork();
	if (pid == 0) {
		execlp("gnuplot", "gnuplot", gp, (char *)NULL);
		_exit(127);
	}
	int status = 0;
	if (pid < 0 || waitpid(pid, &status, 0) != pid) {
		fprintf(stderr, "pstrain compare: cannot run gnuplot\n");
		return -1;
	}
	if (WIFEXITED(status) && WEXITSTATUS(status) == 127) {
		fprintf(stderr, "pstrain compare: gnuplot not found: install "
		    "gnuplot-nox (the plot script is %s)\n", gp);
		return -1;
	}
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		fprintf(stderr, "pstrain compare: gnuplot %s failed\n", gp);
		return -1;
	}
	return 0;
}

static int cmp_report(const pt_config *c, int argc, char **argv,
    const cmp_mode *ms, const cmp_result *rs, int n)
{
	char path[PT_PATH_MAX + 32];
	snprintf(path, sizeof(path), "%s/report.md", c->out);
	FILE *f = fopen(path, "w");
	if (f == NULL) {
		fprintf(stderr, "pstrain compare: %s: %s\n", path,
		    strerror(errno));
		return -1;
	}
	fprintf(f, "# pstrain compare: %s\n\nCommand line:\n\n    pstrain "
		   "compare", c->modes);
	for (int i = 0; i < argc; i++)
		fprintf(f, " %s", argv[i]);
	fprintf(f, "\n\nEvery mode ran `pstrain run` with these flags, then "
		   "`--mode`, `--staleness`,\n`--backup-workers`, `--out "
		   "%s/LABEL` and `--save-model %s/LABEL/model.bin`.\n"
		   "Steps and wall time to target are where eval.csv first "
		   "reached test accuracy %.4g\n(steps of worker 0).\n\n",
	    c->out, c->out, c->target_acc);
	cmp_table(f, ms, rs, n, c->target_acc);
	fprintf(f, "\nPlots: loss.png (training loss of worker 0, smoothed) "
		   "and accuracy.png (test accuracy), each against steps "
		   "and against wall time; data and script in plots/.\n");
	if (fclose(f) != 0) {
		fprintf(stderr, "pstrain compare: %s: write failed\n", path);
		return -1;
	}
	return 0;
}

int pti_cmd_compare(int argc, char **argv)
{
	static pt_config c;
	static cmp_mode ms[CMP_MODES_MAX];
	static cmp_result rs[CMP_MODES_MAX];
	char plots[PT_PATH_MAX + 16];
	int n, rv = pti_cli_config(&c, PT_CMD_COMPARE, "compare",
	    "Run one `pstrain run` job per mode of --modes, one after the "
	    "other, with every\nother flag the same, then write DIR/report.md "
	    "(one table row per mode) and\nDIR/loss.png and DIR/accuracy.png "
	    "(gnuplot). Mode M's job goes to DIR/LABEL,\nLABEL being M with "
	    "':' and '=' turned into '-' (docs/COMPARE.md).\n\nexample:\n"
	    "  pstrain compare --modes sync,async,ssp:4,sync:backup=1 "
	    "--workers 4 \\\n      --model mlp:128 --epochs 5 --target-acc "
	    "0.8 --out runs/cmp", argc, argv);
	if (rv >= 0)
		return rv;
	if (modes_parse(c.modes, ms, &n, pt_config_given(&c, "lr")) != 0)
		return 2;
	snprintf(plots, sizeof(plots), "%s/plots", c.out);
	if (pti_mkdir_p(plots) != 0) {
		fprintf(stderr, "pstrain compare: %s: %s\n", plots,
		    strerror(errno));
		return 1;
	}
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = cmp_on_signal;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	for (int i = 0; i < n; i++) {
		rv = cmp_run(&c, &ms[i]);
		if (cmp_signalled) {
			fprintf(stderr, "\npstrain compare: stopped on signal "
			    "%d during mode %s\n", (int)cmp_signalled,
			    ms[i].token);
			return 130;
		}
		if (rv == 3) {
			fprintf(stderr, "pstrain compare: mode %s diverged; "
			    "going on\n", ms[i].token);
			ms[i].diverged = 1;
		} else if (rv != 0) {
			fprintf(stderr, "pstrain compare: mode %s failed (%s "
			    "%d); its output is in %s/%s\n", ms[i].token,
			    rv > 128 ? "signal" : "exit status",
			    rv > 128 ? rv - 128 : rv, c.out, ms[i].label);
			return 1;
		}
	}
	for (int i = 0; i < n; i++)
		if (cmp_collect(&c, plots, &ms[i], &rs[i]) != 0)
			return 1;
	if (cmp_report(&c, argc, argv, ms, rs, n) != 0)
		return 1;
	printf("\n");
	cmp_table(stdout, ms, rs, n, c.target_acc);
	printf("\nreport: %s/report.md\n", c.out);
	fflush(stdout);
	if (cmp_plot(c.out, ms, rs, n) != 0)
		return 1;
	printf("plots: %s/loss.png %s/accuracy.png (script %s/plot.gp)\n",
	    c.out, c.out, plots);
	return 0;
}
