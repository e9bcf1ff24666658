// cli/run.c - `pstrain run`: the local launcher. It starts S server and W
// worker processes (this same binary as `pstrain server` and `pstrain
// worker`), shows progress (progress.c), hands failed processes to
// recovery.c, stops every child when the job cannot go on or on Ctrl-C,
// and writes DIR/summary.json at the end.
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "auth.h"
#include "config.h"
#include "data.h"
#include "err.h"
#include "layout.h"
#include "checkpoint.h"
#include "proto.h"
#include "sockdir.h"
#include "summary.h"
#include "run_impl.h"

static volatile sig_atomic_t run_signalled;

static void run_on_signal(int sig)
{
	run_signalled = sig;
}

double pti_run_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

int pti_mkdir_p(const char *path)
{
	char buf[PT_PATH_MAX + 16];
	snprintf(buf, sizeof(buf), "%s", path);
	for (char *p = buf + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(buf, 0777) != 0 && errno != EEXIST)
			return -1;
		*p = '/';
	}
	return mkdir(buf, 0777) != 0 && errno != EEXIST ? -1 : 0;
}

static int run_spawn(run_job *j, int server, uint32_t rank, char **extra,
    int n_extra)
{
	const pt_config *c = &j->c;
	char *argv[2 * 64 + 16];
	int argc = 0, rv;
	run_proc *p = &j->procs[j->n_procs];
	memset(p, 0, sizeof(*p)); // the slot may hold a process of before

	argv[argc++] = strdup("pstrain");
	argv[argc++] = strdup(server ? "server" : "worker");
	if ((rv = pt_config_to_argv(c, PT_CMD_RUN,
		 server ? PT_CMD_SERVER : PT_CMD_WORKER, argv, &argc)) != 0)
		return rv;
	for (int i = 0; i < n_extra; i++)
		argv[argc++] = strdup(extra[i]);
	argv[argc] = NULL;
	snprintf(p->log, sizeof(p->log), "%s/%s-%u.log", c->out,
	    server ? "server" : "worker", rank);
	int fd = open(p->log, O_WRONLY | O_CREAT | O_TRUNC, 0666);
	if (fd < 0)
		return pti_err_set(PT_EIO, "%s: %s", p->log, strerror(errno));
	pid_t pid = fork();
	if (pid == 0) {
		// The child dies with the launcher, even on kill -9.
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		dup2(fd, 1);
		dup2(fd, 2);
		close(fd);
		signal(SIGINT, SIG_IGN); // the launcher stops us itself
		execv(pti_self_exe(), argv);
		fprintf(stderr, "pstrain: cannot execute itself: %s\n",
		    strerror(errno));
		_exit(127);
	}
	close(fd);
	for (int i = 0; i < argc; i++)
		free(argv[i]);
	if (pid < 0)
		return pti_err_set(PT_EIO, "fork: %s", strerror(errno));
	p->pid = pid;
	p->server = server;
	p->rank = rank;
	j->n_procs++;
	return 0;
}

// run_reap collects exited children up to the first that failed, which
// it returns; the next call goes on from there, so that no failure is
// passed over.
static run_proc *run_reap(run_job *j)
{
	for (uint32_t i = 0; i < j->n_procs; i++) {
		run_proc *p = &j->procs[i];
		if (p->exited)
			continue;
		if (waitpid(p->pid, &p->status, WNOHANG) == p->pid) {
			p->exited = 1;
			if (!WIFEXITED(p->status) || WEXITSTATUS(p->status))
				return p;
		}
	}
	return NULL;
}

void pti_run_kill_all(run_job *j)
{
	for (uint32_t i = 0; i < j->n_procs; i++)
		if (!j->procs[i].exited)
			kill(j->procs[i].pid, SIGTERM);
	double until = pti_run_now() + 3.0;
	for (;;) {
		run_reap(j);
		uint32_t live = 0;
		for (uint32_t i = 0; i < j->n_procs; i++)
			live += !j->procs[i].exited;
		if (live == 0)
			return;
		if (pti_run_now() > until)
			break;
		usleep(20 * 1000);
	}
	for (uint32_t i = 0; i < j->n_procs; i++)
		if (!j->procs[i].exited) {
			kill(j->procs[i].pid, SIGKILL);
			waitpid(j->procs[i].pid, &j->procs[i].status, 0);
			j->procs[i].exited = 1;
		}
}

static void run_tell_failure(const run_proc *p)
{
	char what[64];
	if (WIFEXITED(p->status))
		snprintf(what, sizeof(what), "exit status %d",
		    WEXITSTATUS(p->status));
	else
		snprintf(what, sizeof(what), "signal %d", WTERMSIG(p->status));
	fprintf(stderr, "\npstrain run: %s %u failed (%s); the end of %s:\n",
	    p->server ? "server" : "worker", p->rank, what, p->log);
	FILE *f = fopen(p->log, "r");
	if (f == NULL)
		return;
	char lines[8][512];
	int n = 0;
	while (fgets(lines[n % 8], sizeof(lines[0]), f) != NULL)
		n++;
	fclose(f);
	for (int i = n > 8 ? n - 8 : 0; i < n; i++)
		fprintf(stderr, "  %s", lines[i % 8]);
}

// run_wait_server waits until server s has written its ready file, and
// copies the address it listens on into url (size PT_PATH_MAX).
int pti_run_wait_server(run_job *j, uint32_t s, char *url)
{
	char path[PT_PATH_MAX + 32];
	snprintf(path, sizeof(path), "%s/.server-%u.ready", j->c.out, s);
	double until = pti_run_now() + RUN_READY_S;
	for (;;) {
		FILE *f = fopen(path, "r");
		if (f != NULL) {
			int ok = fgets(url, PT_PATH_MAX, f) != NULL;
			fclose(f);
			if (ok)
				break;
		}
		run_proc *bad = run_reap(j);
		if (bad != NULL) {
			run_tell_failure(bad);
			return -1;
		}
		if (run_signalled)
			return -1;
		if (pti_run_now() > until) {
			fprintf(stderr, "pstrain run: server %u did not start "
			    "listening within %.0fs\n", s, RUN_READY_S);
			return -1;
		}
		usleep(10 * 1000);
	}
	unlink(path);
	url[strcspn(url, "\n")] = '\0';
	return 0;
}

// run_server_url copies server s's address, from the list the workers
// were given, into url (size PT_PATH_MAX): a restarted server listens
// where its workers dial.
void pti_run_server_url(const run_job *j, uint32_t s, char *url)
{
	const char *p = j->urls;
	for (uint32_t i = 0; i < s && p != NULL; i++)
		if ((p = strchr(p, ',')) != NULL)
			p++;
	size_t n = p ? strcspn(p, ",") : 0;
	snprintf(url, PT_PATH_MAX, "%.*s", (int)n, p ? p : "");
}

// run_spawn_server starts server s listening on listen, from checkpoint
// version rver (-1: initial values), not waiting for the workers in gone.
int pti_run_spawn_server(run_job *j, uint32_t s, const char *listen,
    int64_t rver, const char *gone)
{
	char t0[64], rank[16], ready[PT_PATH_MAX + 32], rv_s[32];
	snprintf(t0, sizeof(t0), "%.6f", j->t0);
	snprintf(rank, sizeof(rank), "%u", s);
	snprintf(ready, sizeof(ready), "%s/.server-%u.ready", j->c.out, s);
	snprintf(rv_s, sizeof(rv_s), "%lld", (long long)rver);
	char *extra[] = {"--rank", rank, "--listen", (char *)listen,
	    "--ready-file", ready, "--t0", t0, "--resume-version", rv_s,
	    "--gone-workers", (char *)gone};
	if (j->n_procs >= RUN_MAX_PROCS ||
	    run_spawn(j, 1, s, extra, gone[0] ? 12 : 10) != 0) {
		fprintf(stderr, "pstrain run: %s\n", pt_errmsg(PT_EIO));
		return -1;
	}
	return 0;
}

static int run_start(run_job *j)
{
	const pt_config *c = &j->c;
	char listen[PT_PATH_MAX + 32], url[PT_PATH_MAX];
	size_t used = 0;
	for (uint32_t s = 0; s < c->servers; s++) {
		// Port 0: each server takes a free port and says which in
		// its ready file.
		if (c->transport == PT_TRANSPORT_TCP)
			snprintf(listen, sizeof(listen), "tcp://127.0.0.1:0");
		else if (c->transport == PT_TRANSPORT_TLS)
			snprintf(listen, sizeof(listen),
			    "tls+tcp://127.0.0.1:0");
		else
			snprintf(listen, sizeof(listen), "ipc://%s/s%u",
			    j->sockdir, s);
		if (pti_run_spawn_server(j, s, listen, c->resume_version, "") != 0)
			return -1;
	}
	j->urls[0] = '\0';
	for (uint32_t s = 0; s < c->servers; s++) {
		if (pti_run_wait_server(j, s, url) != 0)
			return -1;
		used += (size_t)snprintf(j->urls + used,
		    sizeof(j->urls) - used, "%s%s", s ? "," : "", url);
		if (used >= sizeof(j->urls)) {
			fprintf(stderr, "pstrain run: too many servers\n");
			return -1;
		}
	}
	for (uint32_t r = 0; r < c->workers; r++)
		if (pti_run_spawn_worker(j, r) != 0)
			return -1;
	return 0;
}

int pti_run_spawn_worker(run_job *j, uint32_t r)
{
	char rank[16], t0[64];
	snprintf(rank, sizeof(rank), "%u", r);
	snprintf(t0, sizeof(t0), "%.6f", j->t0);
	char *extra[] = {"--rank", rank, "--connect", j->urls, "--t0", t0};
	if (j->n_procs >= RUN_MAX_PROCS ||
	    run_spawn(j, 0, r, extra, 6) != 0) {
		fprintf(stderr, "pstrain run: %s\n", pt_errmsg(PT_EIO));
		return -1;
	}
	return 0;
}

// run_stop_proc kills a live child and waits for it: it is being
// replaced.
void pti_run_stop_proc(run_proc *p)
{
	if (!p->exited) {
		kill(p->pid, SIGKILL);
		waitpid(p->pid, &p->status, 0);
	}
	p->exited = 2;
}

// run_watch waits for every child; 0 when all exited cleanly.
static int run_watch(run_job *j)
{
	double next = 0, stopped = 0;
	for (;;) {
		run_proc *bad = run_reap(j);
		if (bad != NULL && !bad->server && pti_run_worker_failed(j, bad) == 0)
			continue;
		if (bad != NULL) {
			if (j->tty)
				fprintf(stderr, "\n");
			run_tell_failure(bad);
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
		if (run_signalled) {
			fprintf(stderr, "\npstrain run: stopping on signal "
			    "%d\n", (int)run_signalled);
			return PTI_EXIT_SIGNAL;
		}
		uint32_t live = 0, servers = 0;
		for (uint32_t i = 0; i < j->n_procs; i++) {
			live += !j->procs[i].exited;
			servers += !j->procs[i].exited && j->procs[i].server;
		}
		double t = pti_run_now();
		// Servers exit cleanly only when the finishing worker stops
		// them, so the job is over; a worker still running then is
		// one the servers counted as lost (stopped, or hung past
		// --worker-timeout). With every worker gone, a server still
		// running hangs (a dead one would have been noticed): no one
		// is left to stop it. Either way, give it a moment, then kill
		// it; final.csv then says whether the job was done.
		int ending = live > 0 && (servers == 0 || servers == live);
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
				    "the servers stopped");
				j->workers_lost += !p->server;
			}
			pti_run_kill_all(j);
			pti_final fin;
			if (servers > 0 && pti_final_read(j->c.out, &fin) != 0) {
				fprintf(stderr, "pstrain run: the job did not "
				    "finish (no %s/final.csv)\n", j->c.out);
				return 1;
			}
			live = 0;
		}
		if (live == 0) {
			pti_run_progress(j, 1);
			return 0;
		}
		if (t >= next) {
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
static int run_check_out(const pt_config *c)
{
	DIR *d = opendir(c->out);
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
			snprintf(path, sizeof(path), "%s/%s", c->out, e->d_name);
			unlink(path);
		}
	}
	closedir(d);
	if (n == 0 || c->force || c->resume[0] != '\0')
		return 0;
	return pti_err_set(PT_EINVAL, "--out %s holds a previous run (%s and "
	    "%u more files); give another folder, or --force to replace it",
	    c->out, first, n - 1);
}

static int run_prepare(run_job *j)
{
	pt_config *c = &j->c;
	pt_data d;
	pt_layout *l = &j->layout;
	int rv;
	// --optimizer was checked with every other flag (pti_cli_config).
	// Load the data once here so that a bad file is reported before any
	// process starts.
	if ((rv = pt_config_load_data(c, &d)) != 0)
		return rv;
	j->n_train = d.train.n;
	j->n_val = d.val.n;
	rv = pt_layout_init(l, c->model, d.train.dim, d.train.classes);
	pt_data_fini(&d);
	if (rv != 0)
		return rv;
	j->classes = l->width[l->n_layers];
	j->spe = j->n_train / c->batch;
	if (j->spe == 0)
		return pti_err_set(PT_EINVAL,
		    "--batch %u is larger than the %llu training examples of %s",
		    c->batch, (unsigned long long)j->n_train, c->data);
	if (l->n_params < c->servers)
		return pti_err_set(PT_EINVAL,
		    "--servers %u is more than the model's %llu parameters",
		    c->servers, (unsigned long long)l->n_params);
	j->steps = c->steps ? c->steps : (uint64_t)c->epochs * j->spe;
	if (c->resume[0] != '\0') {
		int64_t v = pti_run_find_resume(c, c->resume, l, 0, c->servers);
		if (v < 0)
			return pti_err_set(PT_EINVAL, "--resume %s: no checkpoint "
			    "that every one of the %u servers completed",
			    c->resume, c->servers);
		fprintf(stderr, "pstrain run: resuming from version %lld in "
		    "%s\n", (long long)v, c->resume);
		c->resume_version = v;
		if (c->checkpoint_dir[0] == '\0')
			snprintf(c->checkpoint_dir, sizeof(c->checkpoint_dir),
			    "%s", c->resume);
	}
	if (c->checkpoint_dir[0] != '\0' && pti_mkdir_p(c->checkpoint_dir) != 0)
		return pti_err_set(PT_EIO, "--checkpoint-dir %s: %s",
		    c->checkpoint_dir, strerror(errno));
	if ((rv = run_check_out(c)) != 0)
		return rv;
	if (pti_mkdir_p(c->out) != 0)
		return pti_err_set(PT_EIO, "--out %s: %s", c->out,
		    strerror(errno));
	if (c->servers + c->workers > RUN_MAX_PROCS)
		return pti_err_set(PT_EINVAL, "at most %d processes",
		    RUN_MAX_PROCS);
	// The sockets' folder, removed by run_cleanup; one that a launcher
	// killed with kill -9 left is removed by the next (cli/sockdir.c).
	if (c->transport == PT_TRANSPORT_IPC &&
	    (rv = pti_sockdir_make(j->sockdir, sizeof(j->sockdir))) != 0) {
		j->sockdir[0] = '\0';
		return rv;
	}
	return 0;
}

static void run_cleanup(run_job *j)
{
	if (j->sockdir[0] == '\0')
		return;
	char path[PT_PATH_MAX + 32];
	for (uint32_t s = 0; s < j->c.servers; s++) {
		snprintf(path, sizeof(path), "%s/s%u", j->sockdir, s);
		unlink(path);
	}
	rmdir(j->sockdir);
}

// run_write_summary hands what the launcher knows to summary.c.
static int run_write_summary(const run_job *j, int diverged)
{
	pti_run_facts r = {&j->c, j->cmdline, j->steps, j->spe, j->n_train,
	    j->n_val, j->classes, j->worker_restarts, j->workers_lost,
	    j->server_restarts, j->steps_redone, j->time_lost,
	    j->resumed_from, j->csv_from, j->eval_from, j->t0,
	    pti_run_now() - j->t0, diverged};
	return pti_summary_write(&r);
}

// run_cmdline writes "pstrain run ARGS" into out (size n), quoting each
// argument that a shell would split or expand.
static void run_cmdline(char *out, size_t n, int argc, char **argv)
{
	size_t used = (size_t)snprintf(out, n, "pstrain run");
	for (int i = 0; i < argc && used < n; i++) {
		const char *a = argv[i];
		int plain = a[0] != '\0' &&
			    strspn(a, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMN"
				      "OPQRSTUVWXYZ0123456789-_=.,:/+%@") ==
				strlen(a);
		used += (size_t)snprintf(out + used, n - used, " %s", plain
								     ? a
								     : "'");
		for (const char *p = a; !plain && *p && used < n; p++)
			used += (size_t)snprintf(out + used, n - used,
			    *p == '\'' ? "'\\''" : "%c", *p);
		if (!plain && used < n)
			used += (size_t)snprintf(out + used, n - used, "'");
	}
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
	if ((rv = run_prepare(&j)) != 0) {
		fprintf(stderr, "pstrain run: %s\n", pt_errmsg(rv));
		return PTI_EXIT_USAGE;
	}
	// A new secret for every job, handed to its processes in the
	// environment (not on a command line, where ps shows it): only they
	// can act on this job's servers.
	pt_secret key;
	char hex[2 * PT_SECRET_MAX + 1];
	if ((rv = pt_secret_make(&key)) != 0) {
		fprintf(stderr, "pstrain run: %s\n", pt_errmsg(rv));
		return 1;
	}
	pt_secret_hex(&key, hex, sizeof(hex));
	setenv(PT_SECRET_ENV, hex, 1);
	run_cmdline(j.cmdline, sizeof(j.cmdline), argc, argv);
	j.tty = isatty(2);
	j.t0 = pti_run_now();
	j.resumed_from = j.c.resume[0] != '\0' ? j.c.resume_version : -1;
	for (uint32_t r = 0; r < j.c.workers; r++) {
		char path[PT_PATH_MAX + 32];
		struct stat sb;
		snprintf(path, sizeof(path), "%s/worker-%u.csv", j.c.out, r);
		j.csv_from[r] = j.resumed_from > 0 && stat(path, &sb) == 0 ?
		    (long)sb.st_size : 0;
	}
	{
		char path[PT_PATH_MAX + 32];
		struct stat sb;
		snprintf(path, sizeof(path), "%s/eval.csv", j.c.out);
		j.eval_from = j.resumed_from > 0 && stat(path, &sb) == 0 ?
		    (long)sb.st_size : 0;
	}
	signal(SIGINT, run_on_signal);
	signal(SIGTERM, run_on_signal);
	signal(SIGHUP, run_on_signal);
	fprintf(stderr, "pstrain run: %s, %u servers, %u workers, %s, batch "
	    "%u (%u per worker), %llu steps, output in %s\n",
	    pt_mode_name(j.c.mode), j.c.servers, j.c.workers, j.c.model,
	    j.c.batch, j.c.batch / j.c.workers, (unsigned long long)j.steps,
	    j.c.out);
	for (;;) {
		if (run_start(&j) != 0) {
			// run_start has said what went wrong.
			rv = run_signalled ? PTI_EXIT_SIGNAL : PTI_EXIT_FAIL;
			break;
		}
		if ((rv = run_watch(&j)) != RUN_RESTART)
			break;
		if (pti_run_rollback(&j) != 0) {
			rv = 1;
			break;
		}
	}
	pti_run_kill_all(&j);
	run_cleanup(&j);
	// A diverged job is a result, not a crash: it still gets a summary,
	// and exit status 3 says what happened.
	if ((rv == 0 || rv == PTI_EXIT_DIVERGED) &&
	    run_write_summary(&j, rv == PTI_EXIT_DIVERGED) != 0)
		rv = 1;
	pti_run_tell_checkpoints(&j);
	return rv;
}
