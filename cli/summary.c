// cli/summary.c - a finished job's summary.json and staleness.csv (see
// summary.h), built from its processes' files: server-R.json,
// worker-R.csv, eval.csv and final.csv (docs/OUTPUTS.md).
#include "summary.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <nng/nng.h>

#include "blas.h"
#include "proto.h"
#include "version.h"

// ---------------------------------------------------------------------
// Reading the processes' files
// ---------------------------------------------------------------------

int pti_final_read(const char *dir, pti_final *out)
{
	char path[PT_PATH_MAX + 32], line[1024];
	double v[14];
	snprintf(path, sizeof(path), "%s/final.csv", dir);
	FILE *f = fopen(path, "r");
	if (f == NULL)
		return -1;
	int ok = fgets(line, sizeof(line), f) && fgets(line, sizeof(line), f);
	fclose(f);
	if (!ok)
		return -1;
	int n = 0;
	for (char *p = line, *end; n < 14; p = end + 1) {
		v[n] = strtod(p, &end);
		if (end == p)
			return -1;
		n++;
		if (*end != ',')
			break;
	}
	if (n < 7)
		return -1;
	for (int i = n; i < 14; i++)
		v[i] = NAN; // a row of before the validation columns
	pti_final r = {v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7], v[8],
	    v[9], v[10], v[11], v[12], v[13]};
	*out = r;
	return 0;
}

// A job's staleness, waiting and evaluation time, gathered from the
// servers' and workers' files after every process has stopped.
typedef struct sum_stats {
	uint64_t updates, stale_sum, stale_max, dropped, nonfinite;
	uint64_t unauth, auth_failed, conn_closed; // refused strangers
	uint64_t hist[PT_STALE_BUCKETS];
	uint64_t rows; // gradients the workers computed in this job
	double comm_ms, step_ms;
	double first_s, last_s; // this job's first step began, last ended
	double eval_s;          // every evaluation of this job
	double eval_in_s;       // those between first_s and last_s
} sum_stats;

// find_num finds `"key": NUMBER` in a flat JSON file's text.
static int find_num(const char *text, const char *key, double *out)
{
	char pat[64];
	snprintf(pat, sizeof(pat), "\"%s\":", key);
	const char *p = strstr(text, pat);
	if (p == NULL)
		return -1;
	*out = strtod(p + strlen(pat), NULL);
	return 0;
}

// find_str copies `"key": "STRING"` of a flat JSON file's text, unescaped,
// into out (size n). Returns 0, or -1 when the key is missing or null.
static int find_str(const char *text, const char *key, char *out, size_t n)
{
	char pat[64];
	size_t k = 0;
	snprintf(pat, sizeof(pat), "\"%s\": \"", key);
	const char *p = strstr(text, pat);
	if (p == NULL || n == 0)
		return -1;
	for (p += strlen(pat); *p && *p != '"' && k + 1 < n; p++) {
		unsigned u;
		if (*p != '\\') {
			out[k++] = *p;
		} else if (p[1] == 'u' && sscanf(p + 2, "%4x", &u) == 1) {
			out[k++] = u < 0x80 ? (char)u : '?';
			p += 5;
		} else if (p[1] != '\0') {
			p++;
			out[k++] = *p == 'n' ? '\n' : *p == 't' ? '\t' : *p;
		}
	}
	out[k] = '\0';
	return 0;
}

// server_json reads server s's server-R.json into text (size bytes,
// NUL-terminated). -1 when it is not there (a server that did not stop
// normally writes none).
static int server_json(const pt_config *c, uint32_t s, char *text,
    size_t size)
{
	char path[PT_PATH_MAX + 32];
	snprintf(path, sizeof(path), "%s/server-%u.json", c->out, s);
	FILE *f = fopen(path, "r");
	if (f == NULL)
		return -1;
	size_t got = fread(text, 1, size - 1, f);
	fclose(f);
	text[got] = '\0';
	return 0;
}

void pti_ckpt_report(const pt_config *c, uint64_t *failures, char *last,
    size_t n)
{
	char text[16384], err[PT_PATH_MAX + 128];
	*failures = 0;
	if (n > 0)
		last[0] = '\0';
	for (uint32_t s = 0; s < c->servers; s++) {
		if (server_json(c, s, text, sizeof(text)) != 0)
			continue;
		double k = 0;
		find_num(text, "checkpoint_failures", &k);
		*failures += (uint64_t)k;
		if (find_str(text, "checkpoint_last_error", err,
			sizeof(err)) == 0 && n > 0)
			snprintf(last, n, "server %u: %s", s, err);
	}
}

static void gather_servers(const pt_config *c, sum_stats *st)
{
	char text[16384];
	static const char hist_key[] = "\"staleness_hist\": [";
	for (uint32_t s = 0; s < c->servers; s++) {
		if (server_json(c, s, text, sizeof(text)) != 0)
			continue;
		double u = 0, ss = 0, sm = 0, dr = 0, nf = 0;
		find_num(text, "nonfinite_gradients", &nf);
		st->nonfinite += (uint64_t)nf;
		double ua = 0, af = 0, cc = 0;
		find_num(text, "unauthenticated_requests", &ua);
		find_num(text, "auth_failures", &af);
		find_num(text, "connections_closed", &cc);
		st->unauth += (uint64_t)ua;
		st->auth_failed += (uint64_t)af;
		st->conn_closed += (uint64_t)cc;
		find_num(text, "updates", &u);
		find_num(text, "staleness_sum", &ss);
		find_num(text, "staleness_max", &sm);
		find_num(text, "dropped_gradients", &dr);
		st->updates += (uint64_t)u;
		st->stale_sum += (uint64_t)ss;
		st->dropped += (uint64_t)dr;
		if ((uint64_t)sm > st->stale_max)
			st->stale_max = (uint64_t)sm;
		const char *h = strstr(text, hist_key);
		for (int k = 0; h != NULL && k < PT_STALE_BUCKETS; k++) {
			char *end;
			h += k == 0 ? strlen(hist_key) : 1;
			st->hist[k] += strtoull(h, &end, 10);
			h = *end == ',' ? end : NULL;
		}
	}
}

// open_from opens DIR/name at byte `from` (this job's rows: a resumed
// job appends to its files, whose header is then already behind us; one
// that started afresh wrote a new file, shorter than the old), or past
// its header line, which it copies into header (size n) when from is 0.
static FILE *open_from(const char *dir, const char *name, long from,
    char *header, size_t n)
{
	char path[PT_PATH_MAX + 64];
	struct stat sb;
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	FILE *f = fopen(path, "r");
	header[0] = '\0';
	if (f == NULL)
		return NULL;
	if (from > 0 && fstat(fileno(f), &sb) == 0 && sb.st_size >= from) {
		if (fseek(f, from, SEEK_SET) == 0)
			return f;
	} else if (fgets(header, (int)n, f) != NULL) {
		return f;
	}
	fclose(f);
	return NULL;
}

static void gather_workers(const pti_run_facts *r, sum_stats *st)
{
	const pt_config *c = r->c;
	char name[64], line[1024];
	for (uint32_t w = 0; w < c->workers; w++) {
		snprintf(name, sizeof(name), "worker-%u.csv", w);
		FILE *f = open_from(c->out, name, r->csv_from[w], line,
		    sizeof(line));
		if (f == NULL)
			continue;
		while (fgets(line, sizeof(line), f) != NULL) {
			double v[8];
			unsigned long long step;
			if (sscanf(line, "%llu,%lf,%lf,%lf,%lf,%lf,%lf,%lf",
				&step, &v[0], &v[1], &v[2], &v[3], &v[4], &v[5],
				&v[6]) != 8)
				continue;
			st->step_ms += v[4];
			st->comm_ms += v[6];
			double began = v[1] - v[4] / 1000;
			if (st->rows == 0 || began < st->first_s)
				st->first_s = began;
			if (st->rows == 0 || v[1] > st->last_s)
				st->last_s = v[1];
			st->rows++;
		}
		fclose(f);
	}
}

// gather_evals sums the evaluation time of this job's eval.csv rows, and
// of those that began inside the training span (the final evaluation
// comes after it).
static void gather_evals(const pti_run_facts *r, sum_stats *st)
{
	char header[256], line[512];
	FILE *f = open_from(r->c->out, "eval.csv", r->eval_from, header,
	    sizeof(header));
	if (f == NULL)
		return;
	// Columns: step,wall_s,LOSS,ACC,worker_step,eval_s (docs/OUTPUTS.md);
	// a file of before eval_s has five and adds nothing.
	while (fgets(line, sizeof(line), f) != NULL) {
		double step, wall, loss, acc, wstep, secs;
		if (sscanf(line, "%lf,%lf,%lf,%lf,%lf,%lf", &step, &wall, &loss,
			&acc, &wstep, &secs) != 6)
			continue;
		st->eval_s += secs;
		if (st->rows > 0 && wall >= st->first_s && wall < st->last_s)
			st->eval_in_s += secs;
	}
	fclose(f);
}

// write_staleness writes DIR/staleness.csv: updates of each staleness,
// summed over servers.
static void write_staleness(const char *dir, const sum_stats *st)
{
	char path[PT_PATH_MAX + 32];
	snprintf(path, sizeof(path), "%s/staleness.csv", dir);
	FILE *f = fopen(path, "w");
	if (f == NULL)
		return;
	fprintf(f, "staleness,count\n");
	for (int k = 0; k < PT_STALE_BUCKETS; k++)
		if (st->hist[k] > 0)
			fprintf(f, "%d,%llu\n", k,
			    (unsigned long long)st->hist[k]);
	fclose(f);
}

// ---------------------------------------------------------------------
// The record and the outcome
// ---------------------------------------------------------------------

// cpu_model copies /proc/cpuinfo's first "model name" into out (size n).
static void cpu_model(char *out, size_t n)
{
	char line[512];
	snprintf(out, n, "unknown");
	FILE *f = fopen("/proc/cpuinfo", "r");
	if (f == NULL)
		return;
	while (fgets(line, sizeof(line), f) != NULL) {
		char *colon = strchr(line, ':');
		if (strncmp(line, "model name", 10) != 0 || colon == NULL)
			continue;
		colon += 1 + strspn(colon + 1, " \t");
		colon[strcspn(colon, "\n")] = '\0';
		snprintf(out, n, "%s", colon);
		break;
	}
	fclose(f);
}

static void rec_str(FILE *f, const char *indent, const char *key,
    const char *v, int last)
{
	fprintf(f, "%s  \"%s\": ", indent, key);
	if (v == NULL)
		fprintf(f, "null");
	else
		pti_json_string(f, v);
	fprintf(f, "%s\n", last ? "" : ",");
}

void pti_record_write(FILE *f, const char *cmdline, double t0,
    const char *indent)
{
	char host[256] = "unknown", cpu[256], core[64], when[64];
	gethostname(host, sizeof(host) - 1);
	cpu_model(cpu, sizeof(cpu));
	int threads = pti_blas_info(core, sizeof(core));
	time_t secs = (time_t)t0;
	struct tm tm;
	gmtime_r(&secs, &tm);
	strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm);
	fprintf(f, "{\n");
	rec_str(f, indent, "command_line", cmdline, 0);
	rec_str(f, indent, "version", PT_VERSION, 0);
	rec_str(f, indent, "hostname", host, 0);
	rec_str(f, indent, "cpu_model", cpu, 0);
	fprintf(f, "%s  \"cores\": %ld,\n", indent, sysconf(_SC_NPROCESSORS_ONLN));
	rec_str(f, indent, "openblas_core", core, 0);
	fprintf(f, "%s  \"openblas_threads\": %d,\n", indent, threads);
	rec_str(f, indent, "openblas_coretype_env", getenv("OPENBLAS_CORETYPE"),
	    0);
	rec_str(f, indent, "nng_version", nng_version(), 0);
	rec_str(f, indent, "start_time", when, 1);
	fprintf(f, "%s}", indent);
}

const char *pti_outcome(const pti_run_facts *r, const pti_final *fin)
{
	if (r->diverged || fin == NULL)
		return "diverged";
	if (r->workers_lost || r->worker_restarts || r->server_restarts)
		return "damaged";
	if (!(fin->train_loss < PTI_COLLAPSE_SHARE * log((double)r->classes)))
		return "collapsed";
	return "ok";
}

// ---------------------------------------------------------------------
// summary.json
// ---------------------------------------------------------------------

// num writes `  "key": value,` with %.*g, or null for a NaN.
static void num(FILE *f, const char *key, double v, int digits)
{
	if (isnan(v))
		fprintf(f, "  \"%s\": null,\n", key);
	else
		fprintf(f, "  \"%s\": %.*g,\n", key, digits, v);
}

static void str(FILE *f, const char *key, const char *v)
{
	fprintf(f, "  \"%s\": ", key);
	pti_json_string(f, v);
	fprintf(f, ",\n");
}

int pti_summary_write(const pti_run_facts *r)
{
	const pt_config *c = r->c;
	char path[PT_PATH_MAX + 32];
	pti_final fin;
	sum_stats st;
	int have = pti_final_read(c->out, &fin) == 0;
	if (!have && !r->diverged) {
		fprintf(stderr, "pstrain run: %s/final.csv is missing or "
		    "malformed\n", c->out);
		return -1;
	}
	if (!have) {
		double nan = NAN;
		pti_final none = {nan, nan, nan, nan, nan, nan, nan, nan, nan,
		    nan, nan, nan, nan, nan};
		fin = none;
	}
	memset(&st, 0, sizeof(st));
	gather_servers(c, &st);
	gather_workers(r, &st);
	gather_evals(r, &st);
	write_staleness(c->out, &st);
	uint64_t ck_failures;
	char ck_error[PT_PATH_MAX + 160];
	pti_ckpt_report(c, &ck_failures, ck_error, sizeof(ck_error));
	snprintf(path, sizeof(path), "%s/summary.json", c->out);
	FILE *f = fopen(path, "w");
	if (f == NULL) {
		fprintf(stderr, "pstrain run: %s: %s\n", path, strerror(errno));
		return -1;
	}
	const char *outcome = pti_outcome(r, have ? &fin : NULL);
	double samples = (double)st.rows * (c->batch / c->workers);
	// Training time: from the first step's start to the last step's end
	// over every worker (the finishing worker's own loop time, in
	// final.csv, can be short: it may be a restarted worker), less the
	// evaluations inside that span, which in sync hold every worker up.
	double train_s = (st.rows ? st.last_s - st.first_s : fin.train_s) -
			 st.eval_in_s;
	double rate = train_s > 0 ? samples / train_s : NAN;
	double idle = st.step_ms > 0 ? st.comm_ms / st.step_ms : 0;
	double mean_st = st.updates ? (double)st.stale_sum / st.updates : 0;
	int val = r->n_val > 0;
	fprintf(f, "{\n");
	str(f, "outcome", outcome);
	fprintf(f, "  \"diverged\": %s,\n", r->diverged ? "true" : "false");
	str(f, "mode", pt_mode_name(c->mode));
	num(f, "servers", c->servers, 10);
	num(f, "workers", c->workers, 10);
	str(f, "model", c->model);
	str(f, "data", c->data);
	str(f, "optimizer", c->optimizer);
	num(f, "batch", c->batch, 10);
	num(f, "per_worker_batch", c->batch / c->workers, 10);
	num(f, "lr", c->lr, 10);
	num(f, "seed", (double)c->seed, 20);
	num(f, "epochs", (double)r->steps / r->spe, 6);
	num(f, "steps", (double)r->steps, 20);
	num(f, "steps_per_epoch", (double)r->spe, 20);
	num(f, "train_examples", (double)r->n_train, 20);
	num(f, "validation_examples", (double)r->n_val, 20);
	num(f, "wall_s", r->wall, 6);
	num(f, "train_s", have ? train_s : NAN, 6);
	num(f, "eval_s", st.eval_s, 6);
	num(f, "samples", samples, 20);
	num(f, "samples_per_s", have ? rate : NAN, 7);
	num(f, "mean_staleness", mean_st, 6);
	num(f, "max_staleness_seen", (double)st.stale_max, 20);
	num(f, "dropped_gradients", (double)st.dropped, 20);
	num(f, "nonfinite_gradients", (double)st.nonfinite, 20);
	num(f, "unauthenticated_requests", (double)st.unauth, 20);
	num(f, "auth_failures", (double)st.auth_failed, 20);
	num(f, "connections_closed", (double)st.conn_closed, 20);
	num(f, "checkpoint_failures", (double)ck_failures, 20);
	if (ck_error[0] != '\0')
		str(f, "checkpoint_last_error", ck_error);
	else
		fprintf(f, "  \"checkpoint_last_error\": null,\n");
	num(f, "idle_fraction", idle, 4);
	num(f, "worker_restarts", r->worker_restarts, 10);
	num(f, "workers_lost", r->workers_lost, 10);
	num(f, "server_restarts", r->server_restarts, 10);
	num(f, "steps_redone", (double)r->steps_redone, 20);
	num(f, "time_lost_s", r->time_lost, 6);
	num(f, "resumed_from", r->resumed_from >= 0 ? (double)r->resumed_from
						    : NAN, 20);
	num(f, "final_version", fin.version, 20);
	num(f, "final_train_loss", fin.train_loss, 6);
	num(f, "final_train_acc", fin.train_acc, 4);
	num(f, "final_test_loss", fin.test_loss, 6);
	num(f, "final_test_acc", fin.test_acc, 4);
	num(f, "final_val_loss", val ? fin.val_loss : NAN, 6);
	num(f, "final_val_acc", val ? fin.val_acc : NAN, 4);
	num(f, "best_val_acc", val ? fin.best_val_acc : NAN, 4);
	num(f, "best_val_step", val ? fin.best_val_step : NAN, 20);
	num(f, "best_val_version", val ? fin.best_val_version : NAN, 20);
	num(f, "best_val_test_loss", val ? fin.best_val_test_loss : NAN, 6);
	num(f, "best_val_test_acc", val ? fin.best_val_test_acc : NAN, 4);
	fprintf(f, "  \"config\": ");
	pt_config_json(f, c, PT_CMD_RUN, "  ");
	fprintf(f, ",\n  \"record\": ");
	pti_record_write(f, r->cmdline, r->t0, "  ");
	fprintf(f, "\n}\n");
	if (fclose(f) != 0) {
		fprintf(stderr, "pstrain run: %s: write failed\n", path);
		return -1;
	}
	if (!have) {
		printf("%s: %s job DIVERGED (see worker logs); summary: %s\n",
		    c->out, pt_mode_name(c->mode), path);
		return 0;
	}
	char from[64] = "";
	if (r->resumed_from >= 0)
		snprintf(from, sizeof(from), ", resumed from version %lld",
		    (long long)r->resumed_from);
	printf("%s: %s, %u servers, %u workers, %s on %s: %s\n"
	       "  %llu steps (%.2f epochs%s) in %.1fs, %.0f samples/s "
	       "(%.1fs training, %.1fs evaluating)\n"
	       "  final train loss %.4f, test loss %.4f, test accuracy %.4f\n",
	    c->out, pt_mode_name(c->mode), c->servers, c->workers, c->model,
	    c->data, outcome, (unsigned long long)r->steps,
	    (double)r->steps / r->spe, from, r->wall, rate, train_s, st.eval_s,
	    fin.train_loss, fin.test_loss, fin.test_acc);
	if (val)
		printf("  best validation accuracy %.4f at step %.0f (test "
		       "accuracy there %.4f); final validation accuracy "
		       "%.4f\n", fin.best_val_acc, fin.best_val_step,
		    fin.best_val_test_acc, fin.val_acc);
	printf("  staleness mean %.2f max %llu, dropped gradients %llu, "
	       "idle fraction %.2f\n  summary: %s\n",
	    mean_st, (unsigned long long)st.stale_max,
	    (unsigned long long)st.dropped, idle, path);
	return 0;
}
