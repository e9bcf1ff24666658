// cli/run/run.c - `pstrain run`: the local launcher. It prepares the job,
// has supervise.c start S server and W worker processes, watches them,
// shows progress (progress.c), hands failed processes to recovery.c,
// stops every child when the job cannot go on or on Ctrl-C, and writes
// DIR/summary.json at the end.
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/dash/dash.h"
#include "cli/flags.h"
#include "cli/run/run_impl.h"
#include "cli/run/sockdir.h"
#include "common/summary.h"
#include "common/tboard.h"
#include "cli/run/tee.h"
#include "common/afile.h"
#include "common/auth.h"
#include "common/checkpoint.h"
#include "common/clock.h"
#include "common/blas.h"
#include "common/config.h"
#include "common/data.h"
#include "common/err.h"
#include "common/layout.h"
#include "common/optspec.h" // PT_OPT_*
#include "common/proto.h"
#include "common/rendezvous.h"

static void run_on_signal(int sig)
{
	pti_run_signalled = sig;
}

// run_tensorboard appends the job's new rows to --tensorboard's files;
// after a failure it says why and writes no more.
static void run_tensorboard(run_job *j)
{
	int rv;
	if (j->tb != NULL && (rv = pti_tb_update(j->tb)) != 0) {
		fprintf(stderr, "%spstrain run: %s; no more TensorBoard "
		    "events\n", j->tty ? "\n" : "", pt_errmsg(rv));
		pti_tb_close(j->tb);
		j->tb = NULL;
	}
}

// run_dashboard serves --dashboard: this one job, running.
static int run_dashboard(run_job *j)
{
	static pti_dash_job job; // large: keep it off the stack
	char url[128], title[PT_PATH_MAX + PT_SPEC_MAX + 256];
	int rv;
	snprintf(job.dir, sizeof(job.dir), "%s", j->c.job.out);
	snprintf(job.mode, sizeof(job.mode), "%s", pti_mode_name(j->c.job.mode));
	snprintf(job.ckpt_dir, sizeof(job.ckpt_dir), "%s",
	    j->c.job.checkpoint_dir);
	job.workers = j->c.job.workers;
	job.steps = j->steps;
	job.batch = j->c.job.batch;
	job.t0 = j->t0;
	job.state = PTI_DASH_RUNNING;
	char net[128];
	pti_config_network(&j->c, net, sizeof(net));
	snprintf(title, sizeof(title), "pstrain run: %s, %u x %u, %s%s, %s",
	    pti_mode_name(j->c.job.mode), j->c.job.servers, j->c.job.workers, j->c.model,
	    net, j->c.job.out);
	if ((rv = pti_dash_open(&j->dash, "--dashboard-listen",
	    j->c.dashboard_listen, title, &job, 1, url, sizeof(url))) != 0) {
		fprintf(stderr, "pstrain run: %s\n", pt_errmsg(rv));
		return PTI_EXIT_USAGE;
	}
	pti_dash_counts(j->dash, 0, 0, 0, 0);
	fprintf(stderr, "pstrain run: dashboard at %s (Prometheus metrics at "
	    "%smetrics)\n", url, url);
	return 0;
}

// run_watch waits for every child; 0 when all exited cleanly.
static int run_watch(run_job *j)
{
	double next = 0, stopped = 0;
	for (;;) {
		run_proc *bad = pti_run_reap(j);
		int wr = bad != NULL && !bad->server
			     ? pti_run_worker_failed(j, bad)
			     : -1;
		if (wr == 0)
			continue;
		if (wr == RUN_RESTART) // allreduce: every worker again
			return wr;
		if (bad != NULL) {
			if (j->tty)
				fprintf(stderr, "\n");
			pti_run_tell_failure(j, bad);
			int rv = bad->server ? pti_run_server_failed(j, bad) : -1;
			if (rv == 0)
				continue;
			if (rv == RUN_RESTART)
				return rv;
			return WIFEXITED(bad->status) &&
					   WEXITSTATUS(bad->status) ==
					       PTI_EXIT_DIVERGED
				   ? PTI_EXIT_DIVERGED
				   : PTI_EXIT_FAIL;
		}
		if (pti_run_signalled) {
			fprintf(stderr, "\npstrain run: stopping on signal "
			    "%d\n", (int)pti_run_signalled);
			return PTI_EXIT_SIGNAL + (int)pti_run_signalled;
		}
		uint32_t live = 0, servers = 0, finished = 0;
		for (uint32_t i = 0; i < j->n_procs; i++) {
			live += !j->procs[i].exited;
			servers += !j->procs[i].exited && j->procs[i].server;
			finished += j->procs[i].exited == 1 &&
				    !j->procs[i].server && j->procs[i].rank == 0 &&
				    WIFEXITED(j->procs[i].status) &&
				    WEXITSTATUS(j->procs[i].status) == 0;
		}
		double t = pti_wall_s();
		// Servers exit cleanly only when the finishing worker stops
		// them, so the job is over; a worker still running then is
		// one the servers counted as lost (stopped, or hung past
		// --worker-timeout). With every worker gone, a server still
		// running hangs (a dead one would have been noticed): no one
		// is left to stop it. Either way, give it a moment, then kill
		// it; final.csv then says whether the job was done.
		// allreduce: worker 0 finishes last (the final evaluation);
		// a worker still running a while after it is stuck.
		int ending = j->c.job.mode != PT_MODE_ALLREDUCE
				 ? live > 0 && (servers == 0 || servers == live)
				 : live > 0 && finished > 0;
		if (!ending)
			stopped = 0;
		else if (stopped == 0)
			stopped = t;
		if (ending && t - stopped > RUN_DONE_GRACE) {
			for (uint32_t i = 0; i < j->n_procs; i++) {
				run_proc *p = &j->procs[i];
				if (p->exited)
					continue;
				fprintf(stderr, "%spstrain run: %s %u still "
				    "running %.0f s after %s; killing it\n",
				    j->tty ? "\n" : "",
				    p->server ? "server" : "worker", p->rank,
				    RUN_DONE_GRACE, p->server ?
				    "every worker exited" :
				    j->c.job.mode == PT_MODE_ALLREDUCE ?
				    "worker 0 finished" :
				    "the servers stopped");
				j->workers_lost += !p->server;
			}
			pti_run_kill_all(j);
			pti_final fin;
			if ((servers > 0 || j->c.job.mode == PT_MODE_ALLREDUCE) &&
			    pti_final_read(j->c.job.out, &fin) != 0) {
				fprintf(stderr, "pstrain run: the job did not "
				    "finish (no %s/final.csv)\n", j->c.job.out);
				return 1;
			}
			live = 0;
		}
		if (live == 0) {
			pti_run_progress(j, 1);
			return 0;
		}
		pti_dash_counts(j->dash, 0, j->workers_lost, j->worker_restarts,
		    j->server_restarts);
		if (t >= next) {
			run_tensorboard(j);
			pti_run_progress(j, 0);
			next = t + (j->tty ? 0.5 : 10.0);
		}
		usleep(50 * 1000);
	}
}

// run_old_output tells whether name is a file a pstrain job writes.
static int run_old_output(const char *name)
{
	static const char *const exact[] = {"summary.json", "final.csv",
	    "eval.csv", "staleness.csv"};
	static const char *const pat[][2] = {{"worker-", ".csv"},
	    {"worker-", ".log"}, {"server-", ".json"}, {"server-", ".log"},
	    {".server-", ".ready"}};
	size_t n = strlen(name);
	for (size_t i = 0; i < sizeof(exact) / sizeof(exact[0]); i++)
		if (strcmp(name, exact[i]) == 0)
			return 1;
	for (size_t i = 0; i < sizeof(pat) / sizeof(pat[0]); i++) {
		size_t a = strlen(pat[i][0]), b = strlen(pat[i][1]);
		if (n > a + b && strncmp(name, pat[i][0], a) == 0 &&
		    strcmp(name + n - b, pat[i][1]) == 0)
			return 1;
	}
	return 0;
}

// run_check_out refuses an --out folder that holds a previous job's
// files, unless --force (which removes them, and only them, first) or
// --resume (which goes on with them).
static int run_check_out(const pti_config *c)
{
	DIR *d = opendir(c->job.out);
	struct dirent *e;
	char path[PT_PATH_MAX + 300], first[256] = "";
	uint32_t n = 0;
	if (d == NULL)
		return 0; // created next
	while ((e = readdir(d)) != NULL) {
		if (!run_old_output(e->d_name))
			continue;
		if (n++ == 0)
			snprintf(first, sizeof(first), "%s", e->d_name);
		if (c->force && c->resume[0] == '\0') {
			snprintf(path, sizeof(path), "%s/%s", c->job.out, e->d_name);
			unlink(path);
		}
	}
	closedir(d);
	if (n == 0 || c->force || c->resume[0] != '\0')
		return 0;
	return pti_err_set(PT_EINVAL, "--out %s holds a previous run (%s and "
	    "%u more files); give another folder, or --force to replace it",
	    c->job.out, first, n - 1);
}

// run_layer_push settles --layer-push auto: on for a sync job without
// backup workers whose processes are no more than the CPUs this launcher
// may use, off otherwise. Its blocks give the bits of one pushpull (or it
// uses one block), so only time changes; but it is a thread more per
// worker, which slowed a 2 x 4 job on 2 cores (docs/PERFORMANCE.md).
// compare passes off: async and ssp cannot push by layer, and a
// comparison of modes changes one thing.
static void run_layer_push(pti_config *c)
{
	cpu_set_t cpus;
	if (c->layer_push != PT_LP_AUTO)
		return;
	int n = sched_getaffinity(0, sizeof(cpus), &cpus) == 0 ?
	    CPU_COUNT(&cpus) : 1;
	c->layer_push = c->job.mode == PT_MODE_SYNC && c->job.backup_workers == 0 &&
		!pti_layout_sparse(c->model) &&
		c->job.servers + c->job.workers <= (uint32_t)n ? PT_LP_ON : PT_LP_OFF;
}

static int run_prepare(run_job *j)
{
	pti_config *c = &j->c;
	pti_data d;
	pti_layout *l = &j->layout;
	int rv;
	run_layer_push(c);
	// ssp's bound is the experiment's variable: never taken silently.
	if (c->job.mode == PT_MODE_SSP && !pti_config_given(c, "staleness"))
		return pti_err_set(PT_EINVAL, "--mode ssp needs --staleness S, "
		    "the steps a worker may run ahead of the slowest (0 keeps "
		    "every worker in step, as sync does)");
	// --optimizer was checked with every other flag (pti_cli_config).
	// Load the data once here so that a bad file is reported before any
	// process starts.
	if ((rv = pti_config_load_data(c, &d)) != 0)
		return rv;
	pti_config_hosts_imply(c);
	if (c->job.mode == PT_MODE_ALLREDUCE && c->job.servers > 0) {
		if (pti_config_given(c, "servers"))
			fprintf(stderr, "pstrain run: --mode allreduce runs no "
			    "servers; --servers %u is ignored\n", c->job.servers);
		c->job.servers = 0;
	}
	// --matched-lr is SGD's per-example match (docs/USAGE.md, "--matched-lr").
	if (c->job.matched_lr && (c->job.optim.kind == PT_OPT_ADAGRAD ||
				     c->job.optim.kind == PT_OPT_ADAM))
		fprintf(stderr, "pstrain run: note: --matched-lr divides the "
		    "rate by W, which matches sync per example for sgd, "
		    "momentum and nesterov; --optimizer %s scales each step "
		    "by the gradients' own size, so async at lr / W moves a "
		    "parameter 1/W to 1/sqrt(W) as far (docs/EXPERIMENTS.md "
		    "(i))\n", c->job.optimizer);
	char blas[512];
	if (pti_blas_kernel_note(blas, sizeof(blas)))
		fprintf(stderr, "pstrain run: note: %s (docs/PERFORMANCE.md)\n",
		    blas);
	j->n_train = d.train.n;
	j->n_val = d.val.n;
	rv = pti_layout_init(l, c->model, d.train.dim, d.train.classes);
	pti_data_fini(&d);
	if (rv != 0)
		return rv;
	j->classes = l->width[l->n_layers];
	j->spe = j->n_train / c->job.batch;
	if (j->spe == 0)
		return pti_err_set(PT_EINVAL,
		    "--batch %u is larger than the %llu training examples of %s",
		    c->job.batch, (unsigned long long)j->n_train, c->data);
	if (l->n_params < c->job.servers)
		return pti_err_set(PT_EINVAL,
		    "--servers %u is more than the model's %llu parameters",
		    c->job.servers, (unsigned long long)l->n_params);
	j->steps = c->steps ? c->steps : (uint64_t)c->epochs * j->spe;
	if (c->resume[0] != '\0') {
		uint32_t ns = pti_run_ckpt_ranks(c);
		int64_t v = pti_run_find_resume(c, c->resume, l, 0, ns);
		if (v < 0)
			return pti_err_set(PT_EINVAL, "--resume %s: no checkpoint "
			    "that every one of the %u servers completed",
			    c->resume, ns);
		fprintf(stderr, "pstrain run: resuming from version %lld in "
		    "%s\n", (long long)v, c->resume);
		c->job.resume_version = v;
		if (c->job.checkpoint_dir[0] == '\0')
			snprintf(c->job.checkpoint_dir, sizeof(c->job.checkpoint_dir),
			    "%s", c->resume);
	}
	if (c->job.checkpoint_dir[0] != '\0' && pti_mkdir_p(c->job.checkpoint_dir) != 0)
		return pti_err_set(PT_EIO, "--checkpoint-dir %s: %s",
		    c->job.checkpoint_dir, strerror(errno));
	if ((rv = run_check_out(c)) != 0)
		return rv;
	struct stat sb;
	j->out_made = stat(c->job.out, &sb) != 0;
	if (pti_mkdir_p(c->job.out) != 0)
		return pti_err_set(PT_EIO, "--out %s: %s", c->job.out,
		    strerror(errno));
	if (c->job.servers + c->job.workers > RUN_MAX_PROCS)
		return pti_err_set(PT_EINVAL, "at most %d processes",
		    RUN_MAX_PROCS);
	// The sockets' folder, removed by run_cleanup; one that a launcher
	// killed with kill -9 left is removed by the next (cli/run/sockdir.c).
	// allreduce's workers publish their ring's addresses there too.
	if ((c->transport == PT_TRANSPORT_IPC ||
		c->job.mode == PT_MODE_ALLREDUCE) &&
	    (rv = pti_sockdir_make(j->sockdir, sizeof(j->sockdir))) != 0) {
		j->sockdir[0] = '\0';
		return rv;
	}
	return 0;
}

static void run_cleanup(run_job *j)
{
	pti_hosts_down(&j->hosts);
	if (j->sockdir[0] == '\0')
		return;
	char path[PT_PATH_MAX + 32];
	for (uint32_t s = 0; s < j->c.job.servers; s++) {
		snprintf(path, sizeof(path), "%s/s%u", j->sockdir, s);
		unlink(path);
	}
	for (uint32_t r = 0; j->c.job.mode == PT_MODE_ALLREDUCE &&
			     r < j->c.job.workers; r++) {
		snprintf(path, sizeof(path), "%s/w%u", j->sockdir, r);
		unlink(path);
		pti_rdv_path(path, sizeof(path), j->sockdir, "worker", r);
		unlink(path);
	}
	rmdir(j->sockdir);
}

// run_abandon undoes a start that failed before any process ran: the
// sockets' folder and hosts, and --out when this run made it and nothing
// is in it, so that a failed start leaves no empty folder behind.
static void run_abandon(run_job *j)
{
	run_cleanup(j);
	if (j->out_made)
		rmdir(j->c.job.out);
}

// run_write_summary hands what the launcher knows to summary.c.
static int run_write_summary(const run_job *j, int diverged)
{
	pti_run_facts r = {&j->c, j->cmdline, j->steps, j->spe, j->n_train,
	    j->n_val, j->classes, j->worker_restarts, j->workers_lost,
	    j->server_restarts, j->steps_redone, j->time_lost,
	    j->resumed_from, j->csv_from, j->eval_from, j->t0,
	    pti_wall_s() - j->t0, diverged, j->urls, j->layout.n_params,
	    &j->hosts, 0};
	return pti_summary_write(&r);
}

int pti_cmd_run(int argc, char **argv)
{
	static run_job j; // large: keep it off the stack
	int rv = pti_cli_config(&j.c, PT_CMD_RUN, "run",
	    "Start S parameter servers and W workers as separate processes "
	    "on this machine\nand train. Sync and async differ only in "
	    "--mode. Progress goes to stderr;\nDIR holds summary.json, "
	    "eval.csv, final.csv, worker-R.csv, server-R.json and\none log "
	    "per process (docs/OUTPUTS.md).\n\nexample:\n  pstrain run "
	    "--mode sync --servers 2 --workers 4 --model mlp:256,128 \\\n"
	    "      --data fashion-mnist --epochs 40 --batch 256 --lr 0.1 "
	    "--out runs/sync", argc, argv);
	if (rv >= 0)
		return rv;
	// Emulated hosts for a user other than root: the job runs in a
	// user namespace of its own, in a child (cli/run/hosts.h).
	int status;
	pti_config_hosts_imply(&j.c);
	if ((rv = pti_hosts_userns(&j.c, &status)) != 0) {
		fprintf(stderr, "pstrain run: %s\n", pt_errmsg(rv));
		return rv == PT_EINVAL ? PTI_EXIT_USAGE : PTI_EXIT_FAIL;
	}
	if (status >= 0)
		return status;
	if ((rv = run_prepare(&j)) != 0) {
		fprintf(stderr, "pstrain run: %s\n", pt_errmsg(rv));
		run_abandon(&j);
		return PTI_EXIT_USAGE;
	}
	if ((rv = pti_hosts_up(&j.hosts, &j.c)) != 0) {
		fprintf(stderr, "pstrain run: %s\n", pt_errmsg(rv));
		run_abandon(&j);
		return rv == PT_EINVAL ? PTI_EXIT_USAGE : PTI_EXIT_FAIL;
	}
	if (j.hosts.n > 0) {
		char net[128];
		pti_config_network(&j.c, net, sizeof(net));
		fprintf(stderr, "pstrain run: %u emulated hosts%s\n",
		    j.hosts.n, net);
	}
	// A new secret for every job, handed to its processes in the
	// environment (not on a command line, where ps shows it): only they
	// can act on this job's servers.
	pti_secret key;
	char hex[2 * PT_SECRET_MAX + 1];
	if ((rv = pti_secret_make(&key)) != 0) {
		fprintf(stderr, "pstrain run: %s\n", pt_errmsg(rv));
		run_abandon(&j);
		return PTI_EXIT_FAIL;
	}
	pti_secret_hex(&key, hex, sizeof(hex));
	setenv(PT_SECRET_ENV, hex, 1);
	pti_cmdline(j.cmdline, sizeof(j.cmdline), "run", argc, argv);
	j.tty = isatty(2);
	j.t0 = pti_wall_s();
	j.resumed_from = j.c.resume[0] != '\0' ? j.c.job.resume_version : -1;
	for (uint32_t r = 0; r < j.c.job.workers; r++) {
		char path[PT_PATH_MAX + 32];
		struct stat sb;
		snprintf(path, sizeof(path), "%s/worker-%u.csv", j.c.job.out, r);
		j.csv_from[r] = j.resumed_from > 0 && stat(path, &sb) == 0 ?
		    (long)sb.st_size : 0;
	}
	{
		char path[PT_PATH_MAX + 32];
		struct stat sb;
		snprintf(path, sizeof(path), "%s/eval.csv", j.c.job.out);
		j.eval_from = j.resumed_from > 0 && stat(path, &sb) == 0 ?
		    (long)sb.st_size : 0;
	}
	signal(SIGINT, run_on_signal);
	signal(SIGTERM, run_on_signal);
	signal(SIGHUP, run_on_signal);
	// The transport too: it moves the time figures, never the values.
	const char *over = j.c.job.shm ? "shm"
			   : j.c.transport == PT_TRANSPORT_TCP ? "tcp"
			   : j.c.transport == PT_TRANSPORT_TLS ? "tls" : "ipc";
	fprintf(stderr, "pstrain run: %s, %u server%s, %u worker%s, %s, batch "
	    "%u (%u per worker), %llu steps over %s, output in %s\n",
	    pti_mode_name(j.c.job.mode), j.c.job.servers,
	    j.c.job.servers == 1 ? "" : "s", j.c.job.workers,
	    j.c.job.workers == 1 ? "" : "s", j.c.model,
	    j.c.job.batch, j.c.job.batch / j.c.job.workers, (unsigned long long)j.steps,
	    over, j.c.job.out);
	if (j.c.job.tensorboard[0] != '\0' &&
	    (rv = pti_tb_open(&j.tb, j.c.job.tensorboard, j.c.job.out, j.c.job.workers,
		 j.t0, &j.c)) != 0) {
		fprintf(stderr, "pstrain run: %s\n", pt_errmsg(rv));
		run_abandon(&j);
		return PTI_EXIT_USAGE;
	}
	if (j.c.dashboard && (rv = run_dashboard(&j)) != 0) {
		pti_tb_close(j.tb);
		run_abandon(&j);
		return rv;
	}
	if ((rv = pti_tee_open(&j.tee, RUN_MAX_PROCS)) != 0) {
		fprintf(stderr, "pstrain run: %s\n", pt_errmsg(rv));
		pti_dash_close(j.dash);
		pti_tb_close(j.tb);
		run_abandon(&j);
		return PTI_EXIT_FAIL;
	}
	for (;;) {
		if (pti_run_start(&j) != 0) {
			// pti_run_start has said what went wrong.
			rv = pti_run_signalled ? PTI_EXIT_SIGNAL +
			    (int)pti_run_signalled : PTI_EXIT_FAIL;
			break;
		}
		if ((rv = run_watch(&j)) != RUN_RESTART)
			break;
		if (pti_run_rollback(&j) != 0) {
			rv = 1;
			break;
		}
	}
	// allreduce: the ring's addresses, for the record, as the workers
	// published them in the socket folder (gone after run_cleanup).
	if (j.c.job.mode == PT_MODE_ALLREDUCE &&
	    pti_rdv_gather(j.sockdir, "worker", j.c.job.workers, 0, j.urls,
		sizeof(j.urls), "pstrain run") != 0)
		j.urls[0] = '\0';
	pti_run_kill_all(&j);
	pti_tee_close(j.tee, 5.0);
	run_tensorboard(&j);
	pti_dash_close(j.dash);
	run_cleanup(&j);
	// A diverged job is a result, not a crash: it still gets a summary,
	// and exit status 3 says what happened.
	if ((rv == 0 || rv == PTI_EXIT_DIVERGED) &&
	    run_write_summary(&j, rv == PTI_EXIT_DIVERGED) != 0)
		rv = 1;
	// TensorBoard's session ends with the summary's final scores.
	int tb_rv;
	if (j.tb != NULL && (tb_rv = pti_tb_finish(j.tb, rv == 0 || rv ==
	    PTI_EXIT_DIVERGED, j.steps)) != 0)
		fprintf(stderr, "pstrain run: %s\n", pt_errmsg(tb_rv));
	pti_tb_close(j.tb);
	pti_run_tell_checkpoints(&j);
	return rv;
}
