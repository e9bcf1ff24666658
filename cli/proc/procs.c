// cli/proc/procs.c - the server, worker, eval and secret subcommands
// (procs.h has the server and the worker that pstrain node runs too).
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/flags.h"
#include "cli/proc/procs.h"
#include "cli/run/progress.h"
#include "common/summary.h"
#include "common/afile.h"
#include "common/auth.h"
#include "common/blas.h"
#include "common/clock.h"
#include "common/config.h"
#include "common/data.h"
#include "common/err.h"
#include "common/job.h"
#include "common/later.h"
#include "common/mode.h"
#include "common/modelfile.h"
#include "common/optim.h"
#include "common/proto.h"
#include "common/rendezvous.h"
#include "common/transport.h"
#include "model/model.h"
#include "model/sparse.h"
#include "ps/rows.h"
#include "ps/server.h"
#include "train/worker.h"

// procs_steps fills the progress line's steps from the data set's size,
// the way the worker counts them (0, and no line, when it cannot load).
static void procs_steps(const pti_config *c, pti_progress *p)
{
	pti_data d;
	if (pti_config_load_data(c, &d) != 0)
		return;
	p->spe = d.train.n / c->job.batch;
	p->steps = c->steps ? c->steps : (uint64_t)c->epochs * p->spe;
	pti_data_fini(&d);
	if (p->spe == 0)
		p->steps = 0;
}

static void server_on_signal(int sig)
{
	pti_server_signal = sig;
}

// procs_out creates --out for a process started by hand (pstrain run
// makes it for its own). PTI_EXIT_USAGE after saying why not.
static int procs_out(const pti_config *c, const char *who)
{
	if (c->supervised || c->job.out[0] == '\0' || pti_mkdir_p(c->job.out) == 0)
		return 0;
	fprintf(stderr, "pstrain %s: --out %s: %s\n", who, c->job.out,
	    strerror(errno));
	return PTI_EXIT_USAGE;
}

// procs_later starts the line of --send-delay (common/later.h) for
// process who of rank r. PTI_EXIT_USAGE after saying why not.
static int procs_later(const pti_config *c, const char *who)
{
	double s;
	int rv;
	if ((rv = pti_config_send_delay(c, &s)) != 0 ||
	    (rv = pti_later_start(s)) != 0) {
		fprintf(stderr, "pstrain %s %u: %s\n", who, c->rank,
		    pt_errmsg(rv));
		return PTI_EXIT_USAGE;
	}
	if (s > 0)
		fprintf(stderr, "pstrain %s %u: each message it sends waits "
		    "%s first (--send-delay)\n", who, c->rank, c->send_delay);
	return 0;
}

// procs_publish writes url as the file path (and its folder), whole or
// not at all, for the workers of pstrain node to read.
static int procs_publish(const char *path, const char *url)
{
	char dir[PT_PATH_MAX + 256];
	snprintf(dir, sizeof(dir), "%s", path);
	char *slash = strrchr(dir, '/');
	if (slash != NULL) {
		*slash = '\0';
		if (pti_mkdir_p(dir) != 0)
			return pti_err_set(PT_EIO, "%s: %s", dir,
			    strerror(errno));
	}
	pti_afile a;
	int rv = pti_afile_open(&a, path);
	if (rv != 0)
		return rv;
	pti_afile_write(&a, url, strlen(url));
	pti_afile_write(&a, "\n", 1);
	return pti_afile_commit(&a);
}

int pti_serve(pti_config *c, const char *publish)
{
	if (procs_out(c, "server") != 0 || procs_later(c, "server") != 0)
		return PTI_EXIT_USAGE;
	// The server of the library, with this process's signals: SIGINT
	// and SIGTERM end the serving loop, and the statistics are written.
	pt_job *job;
	pt_server *s = NULL;
	int rv;
	if ((rv = pti_job_from_config(&job, c)) == 0) {
		pti_server_proc p = {c->rank, c->listen, c->ready_file,
		    c->gone_workers, (int)c->supervised, c->job.t0};
		rv = pti_server_open(&s, job, &p);
		pt_job_free(job);
	}
	if (rv != 0) {
		fprintf(stderr, "pstrain server %u: %s\n", c->rank,
		    pt_errmsg(rv));
		return 1;
	}
	char url[PT_PATH_MAX];
	if (publish != NULL && ((rv = pt_server_url(s, url, sizeof(url))) !=
				   0 || (rv = procs_publish(publish, url)) != 0)) {
		fprintf(stderr, "pstrain server %u: %s\n", c->rank,
		    pt_errmsg(rv));
		pt_server_close(s);
		return 1;
	}
	signal(SIGINT, server_on_signal);
	signal(SIGTERM, server_on_signal);
	pti_server_exit_on_hang = 1;
	rv = pt_server_serve(s);
	if (rv != 0)
		fprintf(stderr, "pstrain server %u: %s\n", c->rank,
		    pt_errmsg(rv));
	pt_server_close(s);
	pti_later_stop();
	return rv != 0 ? 1 : 0;
}

int pti_cmd_server(int argc, char **argv)
{
	pti_config c;
	int rv = pti_cli_config(&c, PT_CMD_SERVER, "server",
	    "Serve one shard of the model's parameters. Every server and "
	    "worker of a job\ncan be given the same flags (the job's, as for "
	    "pstrain run): each uses those\nthat concern it. It serves only "
	    "processes that prove the job secret\n(--secret-file, or "
	    "PSTRAIN_SECRET). It stops on a shutdown request (sent by\nthe "
	    "finishing worker when training ends), on SIGINT or SIGTERM, or "
	    "once no\nworker is left (--alone-timeout), and writes "
	    "DIR/server-R.json when --out\nis set. A server restarted after a "
	    "failure takes --resume-version V (its\ncheckpoint in "
	    "--checkpoint-dir) and --gone-workers (workers that had left);\n"
	    "its workers reconnect.",
	    argc, argv);
	return rv >= 0 ? rv : pti_serve(&c, NULL);
}

// A hand-started worker 0 prints the progress line, as pstrain run does.
typedef struct procs_progress {
	pti_progress p;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int stop;
} procs_progress;

static void *procs_progress_main(void *arg)
{
	procs_progress *pp = arg;
	double every = pp->p.tty ? 0.5 : 10.0;
	pthread_mutex_lock(&pp->mu);
	while (!pp->stop) {
		pti_cond_wait_ms(&pp->cv, &pp->mu, (long)(every * 1e3));
		pti_progress_print(&pp->p, pti_wall_s(), pp->stop);
	}
	pthread_mutex_unlock(&pp->mu);
	return NULL;
}

// procs_as_run makes c say how a worker started by hand ran, for its
// summary: the transport of its addresses (--transport is run's flag, so
// a worker's says ipc whatever it dialed), and no servers in a mode that
// has none (--servers keeps its default of 1 there), and the addresses
// (allreduce: the ring's, also when found through --ring-dir).
static void procs_as_run(pti_config *c)
{
	if (!pti_mode_of(c->job.mode)->servers)
		c->job.servers = 0;
	// An allreduce worker of --ring-dir: the ring's addresses are there.
	if (c->connect[0] == '\0' && c->ring_dir[0] != '\0' &&
	    pti_rdv_gather(c->ring_dir, "worker", c->job.workers, 0,
		c->connect, sizeof(c->connect), "worker") != 0)
		c->connect[0] = '\0';
	c->transport = pti_transport_is_tls(c->connect)	? PT_TRANSPORT_TLS
		       : strncmp(c->connect, "tcp", 3) == 0 ? PT_TRANSPORT_TCP
							: PT_TRANSPORT_IPC;
}

int pti_work(pti_config *c, const char *cmdline)
{
	if (c->job.out[0] == '\0') {
		fprintf(stderr, "pstrain worker: needs --out DIR\n");
		return PTI_EXIT_USAGE;
	}
	if (procs_out(c, "worker") != 0 || procs_later(c, "worker") != 0)
		return PTI_EXIT_USAGE;
	// One thread is the rule (cli/main.c); more are said in the log.
	char core[64];
	int threads = pti_blas_info(core, sizeof(core));
	if (threads > 1)
		fprintf(stderr, "worker %u: %d OpenBLAS threads\n", c->rank,
		    threads);
	double t0 = c->job.t0 > 0 ? c->job.t0 : pti_wall_s();
	c->job.t0 = t0; // the wall_s columns and the summary count from here
	procs_progress pp;
	pthread_t th;
	int progress = !c->supervised && c->rank == 0;
	if (progress) {
		memset(&pp, 0, sizeof(pp));
		snprintf(pp.p.csv, sizeof(pp.p.csv), "%s/worker-0.csv", c->job.out);
		pp.p.batch = c->job.batch;
		pp.p.t0 = t0;
		pp.p.tty = isatty(2);
		pp.p.steps = 0; // set below, once known; 0 prints nothing
		pthread_mutex_init(&pp.mu, NULL);
		pthread_cond_init(&pp.cv, NULL);
		procs_steps(c, &pp.p);
		progress = pthread_create(&th, NULL, procs_progress_main,
		    &pp) == 0;
	}
	pti_train_result res;
	int rv = pti_train_run(c, &res);
	pti_later_stop();
	if (progress) {
		pthread_mutex_lock(&pp.mu);
		pp.stop = 1;
		pthread_cond_signal(&pp.cv);
		pthread_mutex_unlock(&pp.mu);
		pthread_join(th, NULL);
	}
	if (rv != 0)
		fprintf(stderr, "pstrain worker %u: %s\n", c->rank,
		    pt_errmsg(rv));
	int diverged = rv == PT_EDIVERGED;
	if (!c->supervised && ((rv == 0 && res.finished) ||
				  (diverged && c->rank == 0))) {
		long from[1024] = {0};
		if (c->job.mode != PT_MODE_ALLREDUCE &&
		    pti_summary_wait_servers(c, t0) != 0)
			fprintf(stderr, "pstrain worker %u: not every "
			    "server-R.json of this job is in %s after 30 s "
			    "(hosts that do not share it keep their own): the "
			    "summary's server counts are unknown\n", c->rank,
			    c->job.out);
		procs_as_run(c);
		pti_run_facts r = {c, cmdline, res.steps, res.spe, res.n_train,
		    res.n_val, res.classes, 0, res.lost, 0, 0, 0, -1, from, 0,
		    t0, pti_wall_s() - t0, diverged, c->connect, res.n_params,
		    NULL, 0};
		if (c->job.resume_version >= 0)
			r.resumed_from = c->job.resume_version;
		if (pti_summary_write(&r) != 0 && rv == 0)
			rv = PT_EIO;
	}
	if (rv != 0)
		return diverged ? PTI_EXIT_DIVERGED : PTI_EXIT_FAIL;
	return 0;
}

int pti_cmd_worker(int argc, char **argv)
{
	pti_config c;
	int rv = pti_cli_config(&c, PT_CMD_WORKER, "worker",
	    "Train on this worker's slice of every global batch, pushing "
	    "gradients to the\nservers listed by --connect (or --cluster) "
	    "and pulling parameters back.\nEvery server and worker of a job "
	    "can be given the same flags (the job's, as\nfor pstrain run): "
	    "each uses those that concern it. Writes DIR/worker-R.csv\n(DIR "
	    "created if missing); worker 0 also writes eval.csv and prints "
	    "the\nprogress. At the end the lowest-ranked worker not lost "
	    "(worker 0 unless it\ndied) writes final.csv and summary.json, "
	    "saves --save-model and shuts the\nservers down. A worker whose "
	    "server goes away waits for it (at most\n--rpc-timeout seconds) "
	    "and reconnects; one never reached is waited for at\nmost "
	    "--connect-timeout seconds. --out is required. The job secret "
	    "comes from\n--secret-file or PSTRAIN_SECRET.",
	    argc, argv);
	if (rv >= 0)
		return rv;
	char cmdline[8192];
	pti_cmdline(cmdline, sizeof(cmdline), "worker", argc, argv);
	return pti_work(&c, cmdline);
}

int pti_cmd_secret(int argc, char **argv)
{
	pti_secret k;
	int rv;
	if (argc != 1 || argv[0][0] == '-') {
		FILE *f = argc == 1 && strcmp(argv[0], "--help") == 0 ? stdout
								   : stderr;
		fprintf(f, "usage: pstrain secret FILE\n\nWrite a new random "
			   "job secret to FILE (created with mode 0600; an "
			   "existing\nfile is not overwritten), for servers and "
			   "workers started by hand with\n--secret-file FILE. "
			   "'pstrain run' makes its own.\n");
		return f == stdout ? 0 : 2;
	}
	if ((rv = pti_secret_make(&k)) != 0 ||
	    (rv = pti_secret_save(&k, argv[0])) != 0) {
		fprintf(stderr, "pstrain secret: %s\n", pt_errmsg(rv));
		return 1;
	}
	return 0;
}

// eval_sparse evaluates a click model's file (l, params, rows of table
// 0, the job's seed) on d: rows not in the file read as their initial
// values, as on the servers.
static int eval_sparse(const pti_layout *l, const float *params,
    const pti_mrows *rows, uint64_t seed, const pti_dataset *d,
    double *loss, double *acc, double *auc)
{
	uint32_t dim = l->tables[0].dim;
	uint64_t n = (uint64_t)d->n * d->dim;
	uint64_t *uniq = malloc(n * 8), *scratch = malloc(4 * n * 8);
	uint64_t *ids = pti_data_all_ids(d);
	uint32_t *slot = malloc(n * 4);
	float *vals = malloc(n * dim * sizeof(float));
	pti_wd wd = {d->dim, l->fm_k, d->classes > 2 ? d->classes : 1,
	    l->wd_n, {0}};
	memcpy(wd.h, l->wd_hidden, sizeof(wd.h));
	float *logits = malloc((size_t)d->n * wd.o * sizeof(float));
	float *wds = l->kind == PT_MODEL_WD
			 ? malloc(pti_wd_scratch(&wd, 500) * sizeof(float))
			 : NULL;
	pti_scored *scored = malloc(d->n * sizeof(*scored));
	int rv = 0;
	if (!uniq || !scratch || !ids || !slot || !vals || !logits || !scored ||
	    (l->kind == PT_MODEL_WD && !wds))
		rv = pti_err_set(PT_ENOMEM, "evaluating %u examples", d->n);
	if (rv == 0) {
		pti_rows_opts o = {.dim = dim, .seed = seed, .table = 0,
		    .bound = l->tables[0].bound};
		uint32_t nu = pti_sparse_unique(ids, (uint32_t)n, uniq, slot,
		    scratch);
		for (uint32_t u = 0, j = 0; u < nu; u++) {
			while (j < rows->n && rows->ids[j] < uniq[u])
				j++;
			if (j < rows->n && rows->ids[j] == uniq[u])
				memcpy(vals + (uint64_t)u * dim,
				    rows->vals + (uint64_t)j * dim, dim * 4);
			else
				pti_rows_init_values(&o, uniq[u],
				    vals + (uint64_t)u * dim);
		}
		if (l->kind == PT_MODEL_WD) {
			pti_wd_metrics(&wd, vals, slot, d->n, params, d->y, wds,
			    500, logits, scored, loss, acc, auc);
		} else if (d->classes > 2) {
			float sc[PT_FM_DENSE];
			pti_softmax_rows_metrics(d->classes, vals, slot, d->n,
			    d->dim, params, d->y, sc, loss, acc);
			*auc = NAN;
		} else {
			pti_fm_metrics(l->fm_k, vals, slot, d->n, d->dim,
			    params[0], d->y, logits, scored, loss, acc, auc);
		}
	}
	free(ids);
	free(wds);
	free(uniq);
	free(scratch);
	free(slot);
	free(vals);
	free(logits);
	free(scored);
	return rv;
}

int pti_cmd_eval(int argc, char **argv)
{
	pti_config c;
	pti_layout l;
	pti_data d;
	float *params = NULL;
	pti_model *m = NULL;
	memset(&d, 0, sizeof(d));
	int rv = pti_cli_config(&c, PT_CMD_EVAL, "eval",
	    "Print the test loss and accuracy of a model saved with "
	    "--save-model, on the\ntest set of --data.", argc, argv);
	if (rv >= 0)
		return rv;
	const uint32_t rows = 500;
	float *x = NULL;
	uint8_t *y = NULL;
	uint32_t *idx = NULL;
	double loss, acc, auc;
	uint64_t seed = 0;
	pti_mrows mrows[PT_MAX_TABLES];
	if ((rv = pti_modelfile_load_rows(c.model_file, &l, &params, &seed,
		 mrows)) != 0 ||
	    (rv = pti_data_load(&d, c.data, c.job.seed)) != 0)
		goto out;
	if (d.test.dim != l.width[0] || d.test.classes != l.width[l.n_layers]) {
		rv = pti_err_set(PT_EINVAL,
		    "%s takes %u features and %u classes; --data %s has %u "
		    "and %u", c.model_file, l.width[0], l.width[l.n_layers],
		    c.data, d.test.dim, d.test.classes);
		goto out;
	}
	if (l.n_tables > 0) {
		if ((rv = eval_sparse(&l, params, &mrows[0], seed, &d.test,
			 &loss, &acc, &auc)) == 0)
			printf("model %s (%s, %llu rows) on %s: %u test "
			       "examples\ntest_loss %.6f\ntest_acc %.4f\n"
			       "test_auc %.4f\n", c.model_file, l.spec,
			    (unsigned long long)mrows[0].n, c.data, d.test.n,
			    loss, acc, auc);
		goto out;
	}
	x = malloc((size_t)rows * l.width[0] * sizeof(float));
	y = malloc(rows);
	idx = malloc(rows * sizeof(uint32_t));
	if (x == NULL || y == NULL || idx == NULL) {
		rv = pti_err_set(PT_ENOMEM, "eval buffers");
		goto out;
	}
	if ((rv = pti_model_alloc(&m, &l, rows)) != 0 ||
	    (rv = pti_train_evaluate(m, params, &d.test, rows, x, y, idx,
		 &loss, &acc)) != 0)
		goto out;
	printf("model %s (%s, %llu parameters) on %s: %u test examples\n"
	       "test_loss %.6f\ntest_acc %.4f\n", c.model_file, l.spec,
	    (unsigned long long)l.n_params, c.data, d.test.n, loss, acc);
out:
	if (rv != 0)
		fprintf(stderr, "pstrain eval: %s\n", pt_errmsg(rv));
	free(x);
	free(y);
	free(idx);
	free(params);
	pti_mrows_free(mrows, PT_MAX_TABLES);
	pti_model_free(m);
	pti_data_fini(&d);
	return rv != 0 ? 1 : 0;
}
