// cli/dash/dashcmd.c - `pstrain dashboard [--listen HOST:PORT] DIR...`: the
// dashboard (dash.h) of folders already written: a run's --out (it has
// worker-0.csv or summary.json) or a comparison's (LABEL/seed-S/ folders
// of runs), read at each request, so a job still running elsewhere moves
// too. Serves until SIGINT or SIGTERM, then exits 0.
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "cli/cli.h"
#include "cli/dash/dash.h"
#include "cli/self.h"
#include "common/err.h"

#define DC_JOBS_MAX 2048 // jobs in all the folders given (compare: 32 x 64)

static volatile sig_atomic_t dc_signalled;

static void dc_on_signal(int sig)
{
	dc_signalled = sig;
}

static const char dc_usage[] =
    "usage: pstrain dashboard [--listen HOST:PORT] DIR...\n\n"
    "Serve the dashboard of finished (or still running) jobs from their "
    "folders: each DIR\nis a run's --out (it holds worker-0.csv or "
    "summary.json) or a comparison's\n--out (LABEL/seed-S/ folders of "
    "runs), shown side by side. The page, its\ndata (/data.json) and "
    "Prometheus metrics (/metrics) are read from the files\nat each "
    "request; nothing is written. Stops on Ctrl-C (SIGINT) or SIGTERM.\n\n"
    "flags:\n"
    "  --listen HOST:PORT  where to serve (default 127.0.0.1:0: this "
    "machine only,\n                      a free port; the address is "
    "printed)\n  --help              this text\n\n"
    "example:\n  pstrain dashboard runs/cmp runs/sync\n";

// dc_is_run tells whether dir holds a run's files.
static int dc_is_run(const char *dir)
{
	char path[PT_PATH_MAX + 700];
	struct stat sb;
	snprintf(path, sizeof(path), "%s/worker-0.csv", dir);
	if (stat(path, &sb) == 0)
		return 1;
	snprintf(path, sizeof(path), "%s/summary.json", dir);
	return stat(path, &sb) == 0;
}

// dc_job fills job from the run in dir: what its summary.json says, if it
// has one (the rest is read at each request).
static void dc_job(pti_dash_job *job, const char *dir, const char *label)
{
	char path[PT_PATH_MAX + 160];
	memset(job, 0, sizeof(*job));
	snprintf(job->dir, sizeof(job->dir), "%s", dir);
	snprintf(job->label, sizeof(job->label), "%s", label);
	job->state = PTI_DASH_FILES;
	snprintf(path, sizeof(path), "%s/summary.json", dir);
	json_t *s = json_load_file(path, 0, NULL);
	const json_t *w = json_object_get(s, "workers");
	if (json_is_integer(w) && json_integer_value(w) >= 1 &&
	    json_integer_value(w) <= 1024)
		job->workers = (uint32_t)json_integer_value(w);
	json_decref(s);
}

static int dc_name_cmp(const void *a, const void *b)
{
	const char *x = *(const char *const *)a, *y = *(const char *const *)b;
	// seed-10 after seed-9: compare the numbers after "seed-".
	if (strncmp(x, "seed-", 5) == 0 && strncmp(y, "seed-", 5) == 0) {
		unsigned long long p = strtoull(x + 5, NULL, 10);
		unsigned long long q = strtoull(y + 5, NULL, 10);
		if (p != q)
			return p < q ? -1 : 1;
	}
	return strcmp(x, y);
}

// dc_names lists the subfolders of dir (not hidden), sorted; the caller
// frees each and the array. -1 when dir cannot be read.
static int dc_names(const char *dir, char ***out, size_t *n)
{
	DIR *d = opendir(dir);
	char **v = NULL, path[PT_PATH_MAX + 300];
	size_t room = 0;
	struct stat sb;
	*n = 0;
	if (d == NULL)
		return -1;
	for (struct dirent *e; (e = readdir(d)) != NULL;) {
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		if (e->d_name[0] == '.' || stat(path, &sb) != 0 ||
		    !S_ISDIR(sb.st_mode))
			continue;
		if (*n == room) {
			room = room ? 2 * room : 16;
			char **q = realloc(v, room * sizeof(*v));
			if (q == NULL)
				break;
			v = q;
		}
		if ((v[*n] = strdup(e->d_name)) == NULL)
			break;
		(*n)++;
	}
	closedir(d);
	if (*n > 0)
		qsort(v, *n, sizeof(*v), dc_name_cmp);
	*out = v;
	return 0;
}

static void dc_names_free(char **v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(v[i]);
	free(v);
}

// dc_order puts labels (n of them, sorted) in the order of --modes as
// dir/report.md's first line gives it ("# pstrain compare: MODES, seeds
// ..."), a mode's label being its token with ':' and '=' as '-'; labels
// it does not name stay last, sorted. Without report.md (a comparison
// still running) they stay sorted.
static void dc_order(const char *dir, char **labels, size_t n)
{
	char path[PT_PATH_MAX + 32], line[4096];
	snprintf(path, sizeof(path), "%s/report.md", dir);
	FILE *f = fopen(path, "r");
	if (f == NULL)
		return;
	int got = fgets(line, sizeof(line), f) != NULL;
	fclose(f);
	const char *head = "# pstrain compare: ";
	char *end = got ? strstr(line, ", seeds") : NULL;
	if (end == NULL || strncmp(line, head, strlen(head)) != 0)
		return;
	*end = '\0';
	size_t placed = 0;
	char *save = NULL;
	for (char *tok = strtok_r(line + strlen(head), ",", &save);
	    tok != NULL && placed < n; tok = strtok_r(NULL, ",", &save)) {
		for (char *p = tok; *p; p++)
			if (*p == ':' || *p == '=')
				*p = '-';
		for (size_t i = placed; i < n; i++)
			if (strcmp(labels[i], tok) == 0) {
				// Move it to `placed`, the rest keeping
				// their order.
				char *t = labels[i];
				memmove(&labels[placed + 1], &labels[placed],
				    (i - placed) * sizeof(*labels));
				labels[placed++] = t;
				break;
			}
	}
}

// dc_compare adds the runs LABEL/seed-S of the comparison in dir to
// jobs; prefix goes before each label (several folders given). Returns
// how many it added.
static uint32_t dc_compare(const char *dir, const char *prefix,
    pti_dash_job *jobs, uint32_t n)
{
	char **labels, **seeds, path[PT_PATH_MAX + 600], label[600];
	size_t nl, ns;
	uint32_t added = 0;
	if (dc_names(dir, &labels, &nl) != 0)
		return 0;
	dc_order(dir, labels, nl);
	for (size_t i = 0; i < nl; i++) {
		snprintf(path, sizeof(path), "%s/%s", dir, labels[i]);
		if (dc_names(path, &seeds, &ns) != 0)
			continue;
		for (size_t k = 0; k < ns && n + added < DC_JOBS_MAX; k++) {
			if (strncmp(seeds[k], "seed-", 5) != 0)
				continue;
			snprintf(path, sizeof(path), "%s/%s/%s", dir, labels[i],
			    seeds[k]);
			if (!dc_is_run(path))
				continue;
			snprintf(label, sizeof(label), "%s%s/%s", prefix,
			    labels[i], seeds[k]);
			dc_job(&jobs[n + added++], path, label);
		}
		dc_names_free(seeds, ns);
	}
	dc_names_free(labels, nl);
	return added;
}

int pti_cmd_dashboard(int argc, char **argv)
{
	const char *listen = "127.0.0.1:0";
	const char *dirs[256];
	int n_dirs = 0, rv;
	for (int i = 0; i < argc; i++) {
		if (strcmp(argv[i], "--help") == 0 ||
		    strcmp(argv[i], "-h") == 0) {
			fputs(dc_usage, stdout);
			return PTI_EXIT_OK;
		}
		if (strcmp(argv[i], "--listen") == 0) {
			if (i + 1 == argc) {
				fprintf(stderr, "pstrain dashboard: --listen "
				    "needs HOST:PORT\n");
				return PTI_EXIT_USAGE;
			}
			listen = argv[++i];
		} else if (strncmp(argv[i], "--listen=", 9) == 0) {
			listen = argv[i] + 9;
		} else if (argv[i][0] == '-') {
			fprintf(stderr, "pstrain dashboard: unknown flag %s "
			    "(--listen HOST:PORT, --help)\n", argv[i]);
			return PTI_EXIT_USAGE;
		} else if (n_dirs == 256) {
			fprintf(stderr, "pstrain dashboard: at most 256 "
			    "folders\n");
			return PTI_EXIT_USAGE;
		} else {
			dirs[n_dirs++] = argv[i];
		}
	}
	if (n_dirs == 0) {
		fprintf(stderr, "pstrain dashboard: give a run's or a "
		    "comparison's folder\n\n%s", dc_usage);
		return PTI_EXIT_USAGE;
	}
	pti_dash_job *jobs = calloc(DC_JOBS_MAX, sizeof(*jobs));
	uint32_t n = 0;
	if (jobs == NULL) {
		fprintf(stderr, "pstrain dashboard: out of memory\n");
		return PTI_EXIT_FAIL;
	}
	for (int i = 0; i < n_dirs; i++) {
		struct stat sb;
		char prefix[PT_PATH_MAX + 2] = "";
		if (stat(dirs[i], &sb) != 0 || !S_ISDIR(sb.st_mode)) {
			fprintf(stderr, "pstrain dashboard: %s: %s\n", dirs[i],
			    stat(dirs[i], &sb) != 0 ? strerror(errno) :
			    "not a folder");
			free(jobs);
			return PTI_EXIT_USAGE;
		}
		if (n_dirs > 1)
			snprintf(prefix, sizeof(prefix), "%s/", dirs[i]);
		uint32_t added = 0;
		if (dc_is_run(dirs[i])) {
			if (n < DC_JOBS_MAX)
				dc_job(&jobs[n], dirs[i],
				    n_dirs > 1 ? dirs[i] : "");
			added = n < DC_JOBS_MAX;
		} else {
			added = dc_compare(dirs[i], prefix, jobs, n);
		}
		if (added == 0) {
			fprintf(stderr, "pstrain dashboard: %s: neither a "
			    "run's folder (worker-0.csv, summary.json) nor a "
			    "comparison's (LABEL/seed-S/ with them)\n",
			    dirs[i]);
			free(jobs);
			return PTI_EXIT_USAGE;
		}
		n += added;
	}
	char title[256], url[128];
	snprintf(title, sizeof(title), "pstrain dashboard: %s%s", dirs[0],
	    n_dirs > 1 ? " and more" : "");
	pti_dash *d;
	if ((rv = pti_dash_open(&d, "--listen", listen, title, jobs, n, url,
	    sizeof(url))) != 0) {
		fprintf(stderr, "pstrain dashboard: %s\n", pt_errmsg(rv));
		free(jobs);
		return PTI_EXIT_USAGE;
	}
	free(jobs);
	pti_on_stop_signals(dc_on_signal);
	fprintf(stderr, "pstrain dashboard: %u job%s at %s (Prometheus metrics "
	    "at %smetrics); Ctrl-C stops it\n", n, n == 1 ? "" : "s", url, url);
	while (!dc_signalled)
		usleep(100 * 1000);
	pti_dash_close(d);
	fprintf(stderr, "pstrain dashboard: stopped on signal %d\n",
	    (int)dc_signalled);
	return PTI_EXIT_OK;
}
