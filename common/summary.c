// common/summary.c - a finished job's summary.json and staleness.csv (see
// summary.h), built from its processes' files: server-R.json,
// worker-R.csv, eval.csv and final.csv (docs/OUTPUTS.md).
#include "common/summary.h"

#include <errno.h>
#include <stdarg.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <nng/nng.h>

#include "common/blas.h"
#include "common/clock.h"
#include "common/err.h"
#include "common/job.h"
#include "common/jsonio.h"
#include "common/mode.h"
#include "common/outputs.h"
#include "common/placement.h"
#include "common/proto.h"
#include "common/tboard.h"
#include "pstrain.h"

// ---------------------------------------------------------------------
// Reading the processes' files
// ---------------------------------------------------------------------

int pti_final_read(const char *dir, pti_final *out)
{
	char path[PT_PATH_MAX + 32];
	pti_csv t;
	snprintf(path, sizeof(path), "%s/final.csv", dir);
	if (pti_csv_read_table(path, 0, &pti_csv_final, &t) != 0)
		return -1;
	// One row; the columns it must have (a file of before the
	// validation columns reads as NaN there).
	const double *v = t.v;
	int ok = t.n_rows == 1 && t.have[PTI_FN_TEST_ACC];
	if (ok) {
		pti_final r = {v[PTI_FN_VERSION], v[PTI_FN_STEPS],
		    v[PTI_FN_TRAIN_S], v[PTI_FN_TRAIN_LOSS],
		    v[PTI_FN_TRAIN_ACC], v[PTI_FN_TEST_LOSS],
		    v[PTI_FN_TEST_ACC], v[PTI_FN_VAL_LOSS], v[PTI_FN_VAL_ACC],
		    v[PTI_FN_BEST_VAL_ACC], v[PTI_FN_BEST_VAL_STEP],
		    v[PTI_FN_BEST_VAL_VERSION], v[PTI_FN_BEST_VAL_TEST_LOSS],
		    v[PTI_FN_BEST_VAL_TEST_ACC], v[PTI_FN_EVAL_WAIT_S],
		    v[PTI_FN_TRAIN_AUC], v[PTI_FN_TEST_AUC],
		    v[PTI_FN_BEST_VAL_TEST_AUC], v[PTI_FN_PLANTED_AUC]};
		*out = r;
	}
	free(t.v);
	return ok ? 0 : -1;
}

// A job's staleness, waiting and evaluation time, gathered from the
// servers' and workers' files after every process has stopped.
typedef struct sum_stats {
	uint64_t updates, stale_sum, stale_max, dropped, nonfinite;
	double row_stale_n, row_stale_sum, row_stale_max; // embedding tables
	uint64_t bound_refused; // pushes refused over --grad-bound
	double grad_ratio;      // the largest gradient RMS / median a
				// server saw (--grad-bound compares it)
	uint64_t unauth, auth_failed, conn_closed; // refused strangers
	uint64_t rank_refused; // hellos for a rank a live connection held
	uint64_t losses, rejoins; // workers the servers lost, and took back
	json_t *srv_missing;   // names of the server-R.json not there
	json_t *steps_by;      // "worker-R" to its rows of this job (or null)
	int short_rank;        // a worker of a fresh job that computed fewer
	uint64_t short_rows;   // steps than planned (its rows), or -1
	uint64_t hist[PT_STALE_BUCKETS];
	uint64_t rows; // gradients the workers computed in this job
	double *step_ms; // each of those rows' step time (n_step of them)
	size_t n_step, cap_step;
	double comm_ms, step_ms_sum;
	double first_s, last_s; // this job's first step began, last ended
	double eval_s;          // every evaluation of this job
	json_t *startups;       // each process's start-up: "server-S",
				// "worker-R" to seconds (or null)
	// The processes' own resource use (getrusage): page faults and CPU
	// time in the steady state, summed with the updates or steps they
	// span, and the largest resident size.
	double srv_faults, srv_cpu_s, srv_updates, srv_rss_mb, srv_private_mb;
	double wk_faults, wk_steps, wk_rss_mb;
	double tx_bytes, rx_bytes, n_bytes; // over the rows that have them
	double emb_rows, n_emb;             // embedding rows a step touched
} sum_stats;

// Steps after which a worker's steady state is taken to begin (as the
// servers' PS_STEADY_FROM).
#define SUM_STEADY_FROM 20

// server_json reads server s's server-R.json; NULL when it is not there
// (a server that did not stop normally writes none) or is damaged (said
// on stderr). The caller frees it with json_decref.
static json_t *server_json(const pti_config *c, uint32_t s)
{
	char path[PT_PATH_MAX + 32];
	snprintf(path, sizeof(path), "%s/server-%u.json", c->job.out, s);
	return pti_json_load(path);
}

// server_count: a counter of server-R.json, 0 when missing.
static uint64_t server_count(const json_t *j, const char *key)
{
	double x = pti_json_num(j, key);
	return x >= 0 ? (uint64_t)x : 0;
}

void pti_ckpt_report(const pti_config *c, uint64_t *failures, char *last,
    size_t n)
{
	char err[PT_PATH_MAX + 128];
	*failures = 0;
	if (n > 0)
		last[0] = '\0';
	for (uint32_t s = 0; s < c->job.servers; s++) {
		json_t *j = server_json(c, s);
		if (j == NULL)
			continue;
		*failures += server_count(j, "checkpoint_failures");
		if (pti_json_text(j, "checkpoint_last_error", err,
			sizeof(err)) == 0 && n > 0)
			snprintf(last, n, "server %u: %s", s, err);
		json_decref(j);
	}
}

// sum_startup records process `role`-rank's start-up, NaN as null.
static void sum_startup(sum_stats *st, const char *role, uint32_t rank,
    double secs)
{
	char key[32];
	snprintf(key, sizeof(key), "%s-%u", role, rank);
	json_object_set_new(st->startups, key, isnan(secs) ? json_null() :
	    json_real(round(secs * 1e6) / 1e6));
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

// summary_median is the median of v[0..n) (sorted in place); NaN for none.
static double summary_median(double *v, size_t n)
{
	if (n == 0)
		return NAN;
	qsort(v, n, sizeof(double), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// summary_bound_ms is the least time in ms a step's exchange can take on
// emulated links of bps bits per second (NaN without a rate): the most
// bytes one host sends in a step (links are full duplex, and each
// direction carries as much), over the rate. M is the model's bytes.
// All-reduce: 2 (W - 1) / W x M from every host. Parameter servers, one
// host each: a server's shard to and from W workers, W M / S, or a
// worker's M. Colocated (server s on worker s's host): that host sends
// (S - 1) / S of M to the other servers and (W - 1) / S of M to the
// other workers.
static double summary_bound_ms(const pti_config *c, uint64_t n_params)
{
	double bps, delay, m = (double)n_params * 4;
	double w = c->job.workers, s = c->job.servers, k;
	if (c->placement == PT_PLACE_NONE ||
	    pti_config_link(c, &bps, &delay) != 0 || bps <= 0 || m <= 0)
		return NAN;
	if (!pti_mode_of(c->job.mode)->servers)
		k = 2 * (w - 1) / w;
	else if (c->placement == PT_PLACE_COLOCATED)
		k = fmax((s - 1 + w - 1) / s, 1);
	else
		k = fmax(w / s, 1);
	return k * m * 8 / bps * 1e3;
}

// summary_hosts records the emulated hosts h (cli/run/hosts.h): the
// placement, the link as shaped, who made the namespaces, and each
// process's host address; null without them.
static void summary_hosts(json_t *f, const pti_config *c, const pti_hosts *h)
{
	static const char *const places[] = {"none", "dedicated", "colocated"};
	double bps, delay;
	json_t *link = json_null(), *hosts = json_null();
	if (c->placement != PT_PLACE_NONE &&
	    pti_config_link(c, &bps, &delay) == 0) {
		char key[32], addr[32];
		link = json_object();
		json_object_set_new(link, "rate_bits_per_s",
		    bps > 0 ? json_real(bps) : json_null());
		json_object_set_new(link, "delay_s",
		    delay > 0 ? json_real(delay) : json_null());
		char by[96];
		const char *d = h != NULL && !h->netem ?
		    "each process's --send-delay" : "netem";
		snprintf(by, sizeof(by), "%s%s%s", bps > 0 ? "tbf both ways" :
		    "", bps > 0 && delay > 0 ? ", " : "", delay > 0 ? d : "");
		json_object_set_new(link, "shaped_by", json_string(by[0] ? by :
		    "none (hosts only)"));
		json_object_set_new(link, "namespaces", json_string(h != NULL &&
		    h->userns ? "user namespace" : "root"));
		hosts = json_object();
		uint32_t ns = pti_mode_of(c->job.mode)->servers ? c->job.servers : 0;
		for (uint32_t i = 0; i < ns + c->job.workers; i++) {
			int server = i < ns;
			uint32_t r = server ? i : i - ns;
			snprintf(key, sizeof(key), "%s-%u",
			    server ? "server" : "worker", r);
			pti_hosts_addr(pti_hosts_of(c, server, r), addr,
			    sizeof(addr));
			json_object_set_new(hosts, key, json_string(addr));
		}
	}
	json_object_set_new(f, "placement", json_string(places[c->placement]));
	json_object_set_new(f, "link", link);
	json_object_set_new(f, "hosts", hosts);
}

// summary_warn says a warning: on stderr, or for a program's job in the
// library's log.
static void summary_warn(const pti_run_facts *r, const char *fmt, ...)
{
	char msg[PT_PATH_MAX * 3];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (r->program)
		pti_log(PT_LOG_WARN, "summary: %s", msg);
	else
		fprintf(stderr, "pstrain run: warning: %s\n", msg);
}

// summary_last_line copies the last line of file path that is not empty
// into out (size n); "(no log)" when it cannot be read.
static void summary_last_line(const char *path, char *out, size_t n)
{
	char line[512];
	FILE *f = fopen(path, "r");
	snprintf(out, n, "%s", f ? "(an empty log)" : "(no log)");
	while (f != NULL && fgets(line, sizeof(line), f) != NULL) {
		line[strcspn(line, "\n")] = '\0';
		if (line[0] != '\0')
			snprintf(out, n, "%s", line);
	}
	if (f != NULL)
		fclose(f);
}

// gather_servers sums the servers' counters. A server-R.json that is not
// there (the server did not stop normally, or could not write it) is
// named in st->srv_missing, and said on stderr with the end of that
// server's log: its counts are unknown, not zero.
static void gather_servers(const pti_run_facts *r, sum_stats *st)
{
	const pti_config *c = r->c;
	for (uint32_t s = 0; s < c->job.servers; s++) {
		json_t *j = server_json(c, s);
		if (j == NULL) {
			char name[32], path[PT_PATH_MAX + 32], last[512];
			snprintf(name, sizeof(name), "server-%u.json", s);
			snprintf(path, sizeof(path), "%s/server-%u.log",
			    c->job.out, s);
			summary_last_line(path, last, sizeof(last));
			summary_warn(r, "%s/%s is missing: summary.json's "
			    "server counts are null and its outcome "
			    "\"damaged\"; %s ends: %s", c->job.out, name, path,
			    last);
			json_array_append_new(st->srv_missing,
			    json_string(name));
			continue;
		}
		st->nonfinite += server_count(j, "nonfinite_gradients");
		st->bound_refused += server_count(j, "bound_refusals");
		st->grad_ratio = fmax(st->grad_ratio,
		    pti_json_num(j, "grad_ratio_max"));
		st->unauth += server_count(j, "unauthenticated_requests");
		st->auth_failed += server_count(j, "auth_failures");
		st->conn_closed += server_count(j, "connections_closed");
		st->rank_refused += server_count(j, "rank_refusals");
		st->losses += server_count(j, "worker_losses");
		st->rejoins += server_count(j, "worker_rejoins");
		st->updates += server_count(j, "updates");
		st->stale_sum += server_count(j, "staleness_sum");
		st->dropped += server_count(j, "dropped_gradients");
		st->srv_faults += server_count(j, "steady_minor_faults");
		st->srv_updates += server_count(j, "steady_updates");
		st->srv_cpu_s += fmax(pti_json_num(j, "steady_cpu_s"), 0);
		st->srv_rss_mb = fmax(st->srv_rss_mb,
		    pti_json_num(j, "max_rss_mb"));
		st->srv_private_mb = fmax(st->srv_private_mb,
		    pti_json_num(j, "max_private_mb"));
		sum_startup(st, "server", s, pti_json_num(j, "ready_s"));
		uint64_t sm = server_count(j, "staleness_max");
		if (sm > st->stale_max)
			st->stale_max = sm;
		const json_t *tb = json_object_get(j, "tables");
		for (size_t k = 0; k < json_array_size(tb); k++) {
			const json_t *t = json_array_get(tb, k);
			st->row_stale_n += pti_json_num(t, "row_staleness_rows");
			st->row_stale_sum += pti_json_num(t,
			    "row_staleness_sum");
			st->row_stale_max = fmax(st->row_stale_max,
			    pti_json_num(t, "row_staleness_max"));
		}
		const json_t *h = json_object_get(j, "staleness_hist");
		for (size_t k = 0; k < json_array_size(h) &&
		    k < PT_STALE_BUCKETS; k++) {
			const json_t *x = json_array_get(h, k);
			if (json_is_integer(x) && json_integer_value(x) > 0)
				st->hist[k] += (uint64_t)json_integer_value(x);
		}
		json_decref(j);
	}
}

static void gather_workers(const pti_run_facts *r, sum_stats *st)
{
	const pti_config *c = r->c;
	char path[PT_PATH_MAX + 64];
	const char *want[] = {PTI_COL(pti_csv_worker, PTI_WK_WALL),
	    PTI_COL(pti_csv_worker, PTI_WK_STEP_MS),
	    PTI_COL(pti_csv_worker, PTI_WK_COMM_MS),
	    PTI_COL(pti_csv_worker, PTI_WK_FAULTS),
	    PTI_COL(pti_csv_worker, PTI_WK_RSS_MB),
	    PTI_COL(pti_csv_worker, PTI_WK_TX_BYTES),
	    PTI_COL(pti_csv_worker, PTI_WK_RX_BYTES),
	    PTI_COL(pti_csv_worker, PTI_WK_ROWS)};
	enum { K = sizeof(want) / sizeof(want[0]) };
	for (uint32_t w = 0; w < c->job.workers; w++) {
		pti_csv t;
		snprintf(path, sizeof(path), "%s/worker-%u.csv", c->job.out, w);
		// This job's rows: a resumed job appends to its files.
		char key[32];
		snprintf(key, sizeof(key), "worker-%u", w);
		int read = pti_csv_read(path, r->csv_from[w], want, K, &t) == 0;
		// A fresh job's worker computes every planned step (a
		// restarted one may not: the job is damaged anyway), but
		// with backup workers, where a worker the steps closed
		// without skips to the open one by design.
		if (r->resumed_from < 0 && c->job.backup_workers == 0 &&
		    st->short_rank < 0 &&
		    (!read || t.n_rows < r->steps)) {
			st->short_rank = (int)w;
			st->short_rows = read ? t.n_rows : 0;
		}
		if (!read) {
			sum_startup(st, "worker", w, NAN);
			json_object_set_new(st->steps_by, key, json_null());
			continue;
		}
		json_object_set_new(st->steps_by, key,
		    json_integer((json_int_t)t.n_rows));
		double own = NAN; // this worker's first step began
		// Page faults from the steady state's first row to the last
		// (a file of before these columns has NaN there).
		size_t last = t.n_rows - 1;
		if (t.n_rows > SUM_STEADY_FROM + 1 &&
		    !isnan(t.v[K * last + 3]) &&
		    !isnan(t.v[K * SUM_STEADY_FROM + 3])) {
			st->wk_faults += t.v[K * last + 3] -
					 t.v[K * SUM_STEADY_FROM + 3];
			st->wk_steps += (double)(last - SUM_STEADY_FROM);
		}
		for (size_t i = 0; i < t.n_rows; i++) {
			double wall = t.v[K * i], step_ms = t.v[K * i + 1];
			double comm_ms = t.v[K * i + 2];
			if (!isnan(t.v[K * i + 4]))
				st->wk_rss_mb = fmax(st->wk_rss_mb,
				    t.v[K * i + 4]);
			if (!isnan(t.v[K * i + 5]) && !isnan(t.v[K * i + 6])) {
				st->tx_bytes += t.v[K * i + 5];
				st->rx_bytes += t.v[K * i + 6];
				st->n_bytes++;
			}
			if (!isnan(t.v[K * i + 7])) {
				st->emb_rows += t.v[K * i + 7];
				st->n_emb++;
			}
			if (isnan(wall) || isnan(step_ms) || isnan(comm_ms))
				continue;
			st->step_ms_sum += step_ms;
			st->comm_ms += comm_ms;
			if (st->n_step == st->cap_step) {
				size_t cap = st->cap_step ? 2 * st->cap_step
							  : 1024;
				double *grown = realloc(st->step_ms,
				    cap * sizeof(double));
				if (grown == NULL)
					continue; // the median of fewer
				st->step_ms = grown;
				st->cap_step = cap;
			}
			st->step_ms[st->n_step++] = step_ms;
			double began = wall - step_ms / 1000;
			if (isnan(own) || began < own)
				own = began;
			if (st->rows == 0 || began < st->first_s)
				st->first_s = began;
			if (st->rows == 0 || wall > st->last_s)
				st->last_s = wall;
			st->rows++;
		}
		sum_startup(st, "worker", w, own);
		free(t.v);
	}
}

// gather_evals sums the evaluation time of this job's eval.csv rows. A
// file of before eval_s adds nothing.
static void gather_evals(const pti_run_facts *r, sum_stats *st)
{
	char path[PT_PATH_MAX + 64];
	const char *want[] = {PTI_COL(pti_csv_eval_val, PTI_EV_EVAL_S)};
	pti_csv t;
	snprintf(path, sizeof(path), "%s/eval.csv", r->c->job.out);
	if (pti_csv_read(path, r->eval_from, want, 1, &t) != 0)
		return;
	for (size_t i = 0; i < t.n_rows; i++) {
		double secs = t.v[i];
		if (isnan(secs))
			continue;
		st->eval_s += secs;
	}
	free(t.v);
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
	pti_csv_header(f, &pti_csv_staleness);
	for (int k = 0; k < PT_STALE_BUCKETS; k++) {
		double v[PTI_ST_N] = {k, (double)st->hist[k]};
		if (st->hist[k] > 0)
			pti_csv_row(f, &pti_csv_staleness, v);
	}
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

json_t *pti_record_json(const char *cmdline, double t0)
{
	char host[256] = "unknown", cpu[256], core[64], when[64];
	const char *ct = getenv("OPENBLAS_CORETYPE");
	gethostname(host, sizeof(host) - 1);
	cpu_model(cpu, sizeof(cpu));
	int threads = pti_blas_info(core, sizeof(core));
	time_t secs = (time_t)t0;
	struct tm tm;
	gmtime_r(&secs, &tm);
	strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm);
	json_t *o = json_object();
	json_object_set_new(o, "command_line", pti_json_str(cmdline));
	json_object_set_new(o, "version", pti_json_str(pt_version()));
	json_object_set_new(o, "hostname", pti_json_str(host));
	json_object_set_new(o, "cpu_model", pti_json_str(cpu));
	json_object_set_new(o, "cores",
	    json_integer(sysconf(_SC_NPROCESSORS_ONLN)));
	json_object_set_new(o, "openblas_core", pti_json_str(core));
	json_object_set_new(o, "openblas_threads", json_integer(threads));
	json_object_set_new(o, "openblas_coretype_env",
	    pti_json_str(ct));
	json_object_set_new(o, "nng_version", pti_json_str(nng_version()));
	json_object_set_new(o, "start_time", pti_json_str(when));
	return o;
}

double pti_acc_floor(const pti_run_facts *r)
{
	// Twice chance; none for 2 classes (a click set), where it would be
	// 1 and the base rate's accuracy says more than chance's.
	if (r->c->acc_floor > 0)
		return r->c->acc_floor;
	return r->classes > 2 ? 2.0 / r->classes : 0;
}

const char *pti_outcome(const pti_run_facts *r, const pti_final *fin)
{
	if (r->diverged || fin == NULL)
		return "diverged";
	if (r->workers_lost || r->worker_restarts || r->server_restarts)
		return "damaged";
	if (r->program)
		return "ok";
	if (!(fin->train_loss < PTI_COLLAPSE_SHARE * log((double)r->classes)) ||
	    !(fin->train_acc >= pti_acc_floor(r)))
		return "collapsed";
	return "ok";
}

// ---------------------------------------------------------------------
// summary.json
// ---------------------------------------------------------------------

// num sets o's key to v with `digits` significant digits (a whole number
// as an integer), or null for a NaN.
static void num(json_t *o, const char *key, double v, int digits)
{
	char b[64];
	json_t *j;
	snprintf(b, sizeof(b), "%.*g", digits, v);
	double r = strtod(b, NULL);
	if (isnan(v))
		j = json_null();
	else if (r == floor(r) && fabs(r) < 9007199254740992.0)
		j = json_integer((json_int_t)r);
	else
		j = json_real(r);
	json_object_set_new(o, key, j);
}

static void str(json_t *o, const char *key, const char *v)
{
	json_object_set_new(o, key, pti_json_str(v));
}

int pti_summary_write(const pti_run_facts *r)
{
	const pti_config *c = r->c;
	char path[PT_PATH_MAX + 32];
	pti_final fin;
	sum_stats st;
	int have = pti_final_read(c->job.out, &fin) == 0;
	if (!have && !r->diverged && !r->program) {
		fprintf(stderr, "pstrain run: %s/final.csv is missing or "
		    "malformed\n", c->job.out);
		return -1;
	}
	if (!have) {
		double nan = NAN;
		pti_final none = {nan, nan, nan, nan, nan, nan, nan, nan, nan,
		    nan, nan, nan, nan, nan, nan, nan, nan, nan, nan};
		fin = none;
	}
	memset(&st, 0, sizeof(st));
	st.startups = json_object();
	st.srv_missing = json_array();
	st.steps_by = json_object();
	st.short_rank = -1;
	gather_servers(r, &st);
	gather_workers(r, &st);
	gather_evals(r, &st);
	write_staleness(c->job.out, &st);
	uint64_t ck_failures;
	char ck_error[PT_PATH_MAX + 160];
	pti_ckpt_report(c, &ck_failures, ck_error, sizeof(ck_error));
	snprintf(path, sizeof(path), "%s/summary.json", c->job.out);
	json_t *f = json_object();
	const char *outcome = pti_outcome(r, have || r->program ? &fin : NULL);
	// What the servers counted, unknown (null) when a server's record
	// is missing; the job then cannot be called sound.
	int lost_rec = json_array_size(st.srv_missing) > 0;
	double srv = lost_rec ? NAN : 0; // added to each server count
	// A worker a server lost (the sync steps closed without it) damages
	// the job, whether or not the launcher saw that process go; so does
	// a gradient a server refused (non-finite, or over --grad-bound).
	if ((lost_rec || st.losses > 0 || st.nonfinite > 0 ||
		st.bound_refused > 0) && strcmp(outcome, "diverged") != 0)
		outcome = "damaged";
	// So does a worker that stopped short of the plan, unlost.
	if (st.short_rank >= 0 && strcmp(outcome, "diverged") != 0) {
		if (strcmp(outcome, "damaged") != 0)
			summary_warn(r, "worker %d computed %llu of the %llu "
			    "steps planned; the outcome is \"damaged\"",
			    st.short_rank, (unsigned long long)st.short_rows,
			    (unsigned long long)r->steps);
		outcome = "damaged";
	}
	double samples = (double)st.rows * (c->job.batch / c->job.workers);
	// Training time: from the first step's start to the last step's end
	// over every worker (the finishing worker's own loop time, in
	// final.csv, can be short: it may be a restarted worker). Worker 0's
	// evaluator runs beside the training (train/eval.h): nothing of it
	// is left out, as nothing of it stops a worker, but the time worker
	// 0 waited for it is in eval_wait_s.
	double train_s = st.rows ? st.last_s - st.first_s : fin.train_s;
	have = have || (r->program && st.rows > 0);
	double rate = train_s > 0 ? samples / train_s : NAN;
	double idle = st.step_ms_sum > 0 ? st.comm_ms / st.step_ms_sum : 0;
	double mean_st = st.updates ? (double)st.stale_sum / st.updates : 0;
	int val = r->n_val > 0 || (r->program && !isnan(fin.val_acc));
	str(f, "outcome", outcome);
	json_object_set_new(f, "diverged", json_boolean(r->diverged));
	str(f, "mode", pti_mode_name(c->job.mode));
	num(f, "servers", c->job.servers, 10);
	num(f, "workers", c->job.workers, 10);
	str(f, "model", c->model);
	str(f, "data", c->data);
	// Where the job ran: the servers' addresses (allreduce: the ring's).
	json_t *addrs = json_array();
	for (const char *a = r->addresses ? r->addresses : ""; *a != '\0';) {
		size_t len = strcspn(a, ",");
		json_array_append_new(addrs, json_stringn(a, len));
		a += len + (a[len] == ',');
	}
	json_object_set_new(f, "addresses", addrs);
	summary_hosts(f, c, r->hosts);
	str(f, "optimizer", c->job.optimizer);
	num(f, "batch", c->job.batch, 10);
	num(f, "per_worker_batch", c->job.batch / c->job.workers, 10);
	num(f, "classes", r->program ? NAN : r->classes, 10);
	num(f, "acc_floor", pti_acc_floor(r), 6);
	num(f, "lr", c->job.lr, 10);
	num(f, "seed", (double)c->job.seed, 20);
	num(f, "epochs", r->spe > 0 ? (double)r->steps / r->spe : NAN, 6);
	num(f, "steps", (double)r->steps, 20);
	num(f, "steps_per_epoch", (double)r->spe, 20);
	num(f, "train_examples", (double)r->n_train, 20);
	num(f, "validation_examples", (double)r->n_val, 20);
	num(f, "wall_s", r->t0 > 0 ? r->wall : NAN, 6);
	// Start-up, apart from training: to the first step of any worker.
	num(f, "startup_s", st.rows && r->t0 > 0 ? st.first_s : NAN, 6);
	json_object_set_new(f, "startup_by_process", st.startups);
	json_object_set_new(f, "steps_by_worker", st.steps_by);
	num(f, "train_s", have ? train_s : NAN, 6);
	num(f, "eval_s", st.eval_s, 6);
	num(f, "eval_wait_s", fin.eval_wait_s, 6);
	num(f, "samples", samples, 20);
	num(f, "samples_per_s", have ? rate : NAN, 7);
	num(f, "step_ms_median", summary_median(st.step_ms, st.n_step), 6);
	num(f, "comm_bound_ms", summary_bound_ms(c, r->n_params), 6);
	free(st.step_ms);
	st.step_ms = NULL;
	num(f, "mean_staleness", mean_st + srv, 6);
	num(f, "max_staleness_seen", (double)st.stale_max + srv, 20);
	num(f, "dropped_gradients", (double)st.dropped + srv, 20);
	num(f, "nonfinite_gradients", (double)st.nonfinite + srv, 20);
	num(f, "bound_refusals", (double)st.bound_refused + srv, 20);
	num(f, "grad_ratio_max", st.grad_ratio + srv, 4);
	num(f, "unauthenticated_requests", (double)st.unauth + srv, 20);
	num(f, "auth_failures", (double)st.auth_failed + srv, 20);
	num(f, "connections_closed", (double)st.conn_closed + srv, 20);
	num(f, "rank_refusals", (double)st.rank_refused + srv, 20);
	num(f, "server_worker_losses", (double)st.losses + srv, 20);
	num(f, "server_worker_rejoins", (double)st.rejoins + srv, 20);
	num(f, "checkpoint_failures", (double)ck_failures + srv, 20);
	json_object_set_new(f, "server_records_missing", st.srv_missing);
	str(f, "checkpoint_last_error", ck_error[0] ? ck_error : NULL);
	num(f, "idle_fraction", idle, 4);
	num(f, "server_faults_per_update", st.srv_updates > 0
	    ? st.srv_faults / st.srv_updates : NAN, 4);
	num(f, "server_cpu_ms_per_update", st.srv_updates > 0
	    ? st.srv_cpu_s * 1e3 / st.srv_updates : NAN, 4);
	num(f, "server_max_rss_mb", st.srv_rss_mb > 0 ? st.srv_rss_mb : NAN,
	    5);
	num(f, "server_max_private_mb", st.srv_private_mb > 0
	    ? st.srv_private_mb : NAN, 5);
	num(f, "worker_faults_per_step", st.wk_steps > 0
	    ? st.wk_faults / st.wk_steps : NAN, 4);
	num(f, "worker_max_rss_mb", st.wk_rss_mb > 0 ? st.wk_rss_mb : NAN, 5);
	num(f, "row_staleness_mean", st.row_stale_n > 0 ? st.row_stale_sum /
	    st.row_stale_n : NAN, 4);
	num(f, "row_staleness_max", st.row_stale_n > 0 ? st.row_stale_max : NAN,
	    10);
	num(f, "rows_per_step", st.n_emb > 0 ? st.emb_rows / st.n_emb : NAN, 6);
	num(f, "bytes_pushed_per_step", st.n_bytes > 0 ? st.tx_bytes /
	    st.n_bytes : NAN, 10);
	num(f, "bytes_pulled_per_step", st.n_bytes > 0 ? st.rx_bytes /
	    st.n_bytes : NAN, 10);
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
	num(f, "final_train_auc", fin.train_auc, 4);
	num(f, "final_test_auc", fin.test_auc, 4);
	num(f, "best_val_test_auc", val ? fin.best_val_test_auc : NAN, 4);
	num(f, "planted_auc", fin.planted_auc, 4);
	json_object_set_new(f, "config", pti_config_json(c, PT_CMD_RUN));
	json_object_set_new(f, "record", pti_record_json(r->cmdline, r->t0));
	// Each number was rounded above to its digits: 15 significant
	// digits print it as rounded.
	int bad = json_dump_file(f, path, JSON_INDENT(2) | JSON_REAL_PRECISION(15));
	json_decref(f);
	if (bad && r->program)
		return pti_err_set(PT_EIO, "%s: %s", path, strerror(errno));
	if (bad) {
		fprintf(stderr, "pstrain run: %s: %s\n", path, strerror(errno));
		return -1;
	}
	if (r->program) {
		pti_log(PT_LOG_INFO, "summary: %s (%s)", path, outcome);
		return 0;
	}
	if (!have) {
		printf("%s: %s job DIVERGED (see worker logs); summary: %s\n",
		    c->job.out, pti_mode_name(c->job.mode), path);
		return 0;
	}
	char from[64] = "";
	if (r->resumed_from >= 0)
		snprintf(from, sizeof(from), ", resumed from version %lld",
		    (long long)r->resumed_from);
	printf("%s: %s, %u servers, %u workers, %s on %s: %s\n"
	       "  %llu steps (%.2f epochs%s) in %.1fs, %.0f samples/s "
	       "(%.1fs start-up, %.1fs training; %.1fs evaluating beside "
	       "it)\n"
	       "  final train loss %.4f, test loss %.4f, test accuracy %.4f\n",
	    c->job.out, pti_mode_name(c->job.mode), c->job.servers, c->job.workers, c->model,
	    c->data, outcome, (unsigned long long)r->steps,
	    (double)r->steps / r->spe, from, r->wall, rate,
	    st.rows ? st.first_s : NAN, train_s, st.eval_s,
	    fin.train_loss, fin.test_loss, fin.test_acc);
	if (!isnan(fin.test_auc))
		printf("  test AUC %.4f (the planted model's %.4f), train AUC "
		       "%.4f\n", fin.test_auc, fin.planted_auc, fin.train_auc);
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

// ---------------------------------------------------------------------
// A program's job (pstrain.h)
// ---------------------------------------------------------------------

// program_cmdline is this process's command line, its words joined by
// spaces, for the run record.
static void program_cmdline(char *out, size_t n)
{
	FILE *f = fopen("/proc/self/cmdline", "r");
	size_t k = f != NULL ? fread(out, 1, n - 1, f) : 0;
	if (f != NULL)
		fclose(f);
	out[k] = '\0';
	for (size_t i = 0; k > 0 && i + 1 < k; i++)
		if (out[i] == '\0')
			out[i] = ' ';
}

int pti_summary_wait_servers(const pti_config *c, double t0)
{
	char path[PT_PATH_MAX + 32];
	for (int tries = 0; tries < 300; tries++) {
		uint32_t have = 0;
		for (uint32_t s = 0; s < c->job.servers; s++) {
			struct stat sb;
			snprintf(path, sizeof(path), "%s/server-%u.json",
			    c->job.out, s);
			have += stat(path, &sb) == 0 &&
				(double)sb.st_mtime >= floor(t0);
		}
		if (have == c->job.servers)
			return 0;
		usleep(100 * 1000);
	}
	return -1;
}

int pt_job_summary(const pt_job *job)
{
	static const char *const want[] = {"step"};
	char cmdline[4096];
	pti_config *c = calloc(1, sizeof(*c));
	long *from = calloc(job->o.workers + 1, sizeof(long));
	int rv = 0;
	if (c == NULL || from == NULL) {
		rv = pti_err_set(PT_ENOMEM, "pt_job_summary");
		goto out;
	}
	if (job->o.out[0] == '\0') {
		rv = pti_err_set(PT_EINVAL, "pt_job_summary: the job has no "
		    "option out, where its files are");
		goto out;
	}
	pti_config_defaults(c);
	c->job = job->o;
	snprintf(c->model, sizeof(c->model), "program");
	snprintf(c->data, sizeof(c->data), "program");
	if (!pti_mode_of(c->job.mode)->servers)
		c->job.servers = 0;
	if (pti_summary_wait_servers(c, c->job.t0) != 0)
		pti_log(PT_LOG_WARN, "summary: not every server-R.json is in %s "
		    "after 30 s: the servers' counts are unknown", c->job.out);
	// The steps planned: the most any worker recorded.
	uint64_t steps = 0;
	for (uint32_t w = 0; w < c->job.workers; w++) {
		char path[PT_PATH_MAX + 32];
		pti_csv t;
		snprintf(path, sizeof(path), "%s/worker-%u.csv", c->job.out, w);
		if (pti_csv_read(path, 0, want, 1, &t) != 0)
			continue;
		if (t.n_rows > steps)
			steps = t.n_rows;
		free(t.v);
	}
	program_cmdline(cmdline, sizeof(cmdline));
	double t0 = c->job.t0;
	pti_run_facts r = {c, cmdline, steps, 0, 0, 0, 0, 0, 0, 0, 0, 0, -1,
	    from, 0, t0, t0 > 0 ? pti_wall_s() - t0 : NAN, 0, "",
	    job->l.n_params, NULL, 1};
	if (c->job.resume_version >= 0)
		r.resumed_from = c->job.resume_version;
	rv = pti_summary_write(&r);
	// With option tensorboard, the event files from the same files.
	int tb_rv;
	if (c->job.tensorboard[0] != '\0' &&
	    (tb_rv = pti_tb_write(c, rv == 0, steps)) != 0 && rv == 0)
		rv = tb_rv;
out:
	free(c);
	free(from);
	return rv;
}

