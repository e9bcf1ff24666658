// cli/run/supervise.c - the launcher's processes: starting servers and
// workers (this same binary as `pstrain server` and `pstrain worker`),
// waiting for a server to be ready, reaping children, stopping one or all.
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

#include "cli/run/run_impl.h"
#include "cli/run/tee.h"
#include "cli/self.h"
#include "common/clock.h"
#include "common/config.h"
#include "common/err.h"
#include "common/proto.h"
#include "common/rendezvous.h"

volatile sig_atomic_t pti_run_signalled;

// run_pin binds the calling process (a child about to exec, whose threads
// inherit it) to the k-th CPU, counted round the CPUs the launcher may
// use: worker r is k = r and server s is k = W + s, so that with as many
// CPUs as processes each has one of its own and the scheduler moves
// none of them (a 1 x 1 job's step took 15% less so on 2 cores).
static void run_pin(uint32_t k)
{
	cpu_set_t all, one;
	if (sched_getaffinity(0, sizeof(all), &all) != 0 ||
	    CPU_COUNT(&all) == 0)
		return;
	k %= (uint32_t)CPU_COUNT(&all);
	for (int cpu = 0; cpu < CPU_SETSIZE; cpu++)
		if (CPU_ISSET(cpu, &all) && k-- == 0) {
			CPU_ZERO(&one);
			CPU_SET(cpu, &one);
			if (sched_setaffinity(0, sizeof(one), &one) != 0)
				fprintf(stderr, "pstrain: --pin: CPU %d: %s\n",
				    cpu, strerror(errno));
			else
				fprintf(stderr, "pstrain: pinned to CPU %d\n",
				    cpu);
			return;
		}
}

// run_argv_free frees argv and its first argc strings.
static void run_argv_free(char **argv, int argc)
{
	for (int i = 0; i < argc; i++)
		free(argv[i]);
	free(argv);
}

static int run_spawn(run_job *j, int server, uint32_t rank, char **extra,
    int n_extra)
{
	const pti_config *c = &j->c;
	// "pstrain server", a "--flag value" pair per flag of the table at
	// most (pti_config_to_argv), "--supervised", the extra words, NULL.
	size_t cap = 2 + 2 * (size_t)pti_config_count() + 1 + 2 +
		     (size_t)n_extra + 1;
	char **argv = calloc(cap, sizeof(*argv));
	int argc = 0, rv;
	run_proc *p = &j->procs[j->n_procs];
	memset(p, 0, sizeof(*p)); // the slot may hold a process of before
	if (argv == NULL)
		return pti_err_set(PT_ENOMEM, "%s %u's command line",
		    server ? "server" : "worker", rank);

	argv[argc++] = strdup("pstrain");
	argv[argc++] = strdup(server ? "server" : "worker");
	if ((rv = pti_config_to_argv(c, PT_CMD_RUN,
		 server ? PT_CMD_SERVER : PT_CMD_WORKER, argv, &argc)) != 0) {
		run_argv_free(argv, argc);
		return rv;
	}
	// This launcher shows progress, writes the summary and stops what
	// is left at the end: not the processes' own work then.
	argv[argc++] = strdup("--supervised");
	// A link's delay without netem: each process holds what it sends.
	if (j->hosts.delay_s > 0 && !j->hosts.netem) {
		char d[32];
		snprintf(d, sizeof(d), "%.0fus", j->hosts.delay_s * 1e6);
		argv[argc++] = strdup("--send-delay");
		argv[argc++] = strdup(d);
	}
	for (int i = 0; i < n_extra; i++)
		argv[argc++] = strdup(extra[i]);
	argv[argc] = NULL;
	snprintf(p->log, sizeof(p->log), "%s/%s-%u.log", c->job.out,
	    server ? "server" : "worker", rank);
	// Out of descriptors (a flood of the dashboard's connections, which
	// it closes within seconds): try again for a while.
	int fd;
	double until = pti_clock_s() + RUN_FD_WAIT_S;
	while ((fd = open(p->log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC,
		    0666)) < 0 && (errno == EMFILE || errno == ENFILE) &&
	       pti_clock_s() < until)
		usleep(50 * 1000);
	if (fd < 0) {
		run_argv_free(argv, argc);
		return pti_err_set(PT_EIO, "%s: %s", p->log, strerror(errno));
	}
	// The child writes into a pipe; the tee copies it into the log and
	// keeps its last lines (a full disk cannot hide why it failed).
	p->tee = -1;
	if (j->tee != NULL) {
		int out;
		while ((p->tee = pti_tee_add(j->tee, fd, &out)) < 0 &&
		       (errno == EMFILE || errno == ENFILE) &&
		       pti_clock_s() < until)
			usleep(50 * 1000);
		if (p->tee < 0) {
			close(fd);
			run_argv_free(argv, argc);
			return PT_EIO;
		}
		fd = out;
	}
	pid_t pid = fork();
	if (pid == 0) {
		// The child dies with the launcher, even on kill -9.
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		dup2(fd, 1);
		dup2(fd, 2);
		close(fd);
		signal(SIGINT, SIG_IGN); // the launcher stops us itself
		int e;
		if (j->hosts.n > 0 && (e = pti_hosts_enter(&j->hosts,
					   pti_hosts_of(c, server, rank))) != 0) {
			fprintf(stderr, "pstrain: cannot enter emulated host "
			    "%u: %s\n", pti_hosts_of(c, server, rank),
			    strerror(e));
			_exit(127);
		}
		if (c->pin)
			run_pin(server ? c->job.workers + rank : rank);
		if (!server && pti_config_given(c, "worker-threads")) {
			char n[16];
			snprintf(n, sizeof(n), "%u", c->worker_threads);
			setenv("OPENBLAS_NUM_THREADS", n, 1);
		}
		execv(pti_self_exe(), argv);
		fprintf(stderr, "pstrain: cannot execute itself: %s\n",
		    strerror(errno));
		_exit(127);
	}
	close(fd);
	run_argv_free(argv, argc);
	if (pid < 0)
		return pti_err_set(PT_EIO, "fork: %s", strerror(errno));
	p->pid = pid;
	p->server = server;
	p->rank = rank;
	j->n_procs++;
	return 0;
}

// pti_run_reap collects exited children up to the first that failed, which
// it returns; the next call goes on from there, so that no failure is
// passed over.
run_proc *pti_run_reap(run_job *j)
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
	double until = pti_wall_s() + 3.0;
	for (;;) {
		pti_run_reap(j);
		uint32_t live = 0;
		for (uint32_t i = 0; i < j->n_procs; i++)
			live += !j->procs[i].exited;
		if (live == 0)
			return;
		if (pti_wall_s() > until)
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

void pti_run_how_ended(const run_proc *p, char *what, size_t n)
{
	if (WIFEXITED(p->status))
		snprintf(what, n, "exit status %d", WEXITSTATUS(p->status));
	else if (WIFSIGNALED(p->status))
		snprintf(what, n, "signal %d, %s", WTERMSIG(p->status),
		    strsignal(WTERMSIG(p->status)));
	else
		snprintf(what, n, "wait status %d", p->status);
}

void pti_run_tell_failure(run_job *j, const run_proc *p)
{
	char what[64];
	pti_run_how_ended(p, what, sizeof(what));
	fprintf(stderr, "\npstrain run: %s %u failed (%s)\n",
	    p->server ? "server" : "worker", p->rank, what);
	pti_run_tell_output(j, p);
}

void pti_run_tell_output(run_job *j, const run_proc *p)
{
	fprintf(stderr, "pstrain run: the last output of %s %u (%s):\n",
	    p->server ? "server" : "worker", p->rank, p->log);
	char tail[PTI_TEE_TAIL];
	unsigned long long lost;
	int err = pti_tee_tail(j->tee, p->tee, 2.0, 8, tail, sizeof(tail),
	    &lost);
	if (tail[0] == '\0')
		fprintf(stderr, "  (it printed nothing)\n");
	for (char *l = tail, *e; *l != '\0'; l = *e ? e + 1 : e) {
		e = l + strcspn(l, "\n");
		fprintf(stderr, "  %.*s\n", (int)(e - l), l);
	}
	if (err != 0)
		fprintf(stderr, "pstrain run: could not write %s: %s (%llu "
		    "bytes of its output lost)\n", p->log, strerror(err), lost);
}

// run_wait_server waits until server s has written its ready file, and
// copies the address it listens on into url (size PT_PATH_MAX).
int pti_run_wait_server(run_job *j, uint32_t s, char *url)
{
	char path[PT_PATH_MAX + 32];
	snprintf(path, sizeof(path), "%s/.server-%u.ready", j->c.job.out, s);
	double until = pti_wall_s() + RUN_READY_S;
	for (;;) {
		FILE *f = fopen(path, "r");
		if (f != NULL) {
			int ok = fgets(url, PT_PATH_MAX, f) != NULL;
			fclose(f);
			if (ok)
				break;
		}
		run_proc *bad = pti_run_reap(j);
		if (bad != NULL) {
			pti_run_tell_failure(j, bad);
			return -1;
		}
		if (pti_run_signalled)
			return -1;
		if (pti_wall_s() > until) {
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
	char t0[64], rank[16], ready[PT_PATH_MAX + 32], rv_s[32], smax[32];
	snprintf(t0, sizeof(t0), "%.6f", j->t0);
	snprintf(rank, sizeof(rank), "%u", s);
	snprintf(ready, sizeof(ready), "%s/.server-%u.ready", j->c.job.out, s);
	snprintf(rv_s, sizeof(rv_s), "%lld", (long long)rver);
	// A worker's step is bounded by the job's plan, and a tenth more
	// (at least 100): a push far beyond it is refused.
	snprintf(smax, sizeof(smax), "%llu", (unsigned long long)(j->steps +
	    (j->steps / 10 > 100 ? j->steps / 10 : 100)));
	char *extra[] = {"--rank", rank, "--listen", (char *)listen,
	    "--ready-file", ready, "--t0", t0, "--resume-version", rv_s,
	    "--step-max", smax, "--gone-workers", (char *)gone};
	if (j->n_procs >= RUN_MAX_PROCS ||
	    run_spawn(j, 1, s, extra, gone[0] ? 14 : 12) != 0) {
		fprintf(stderr, "pstrain run: %s\n", pt_errmsg(PT_EIO));
		return -1;
	}
	return 0;
}

// run_listen is where process `what` (s: a server, w: a worker's ring)
// of rank r listens: its ipc socket in the socket folder, or port 0 on
// the loopback address (or its emulated host's), whose port the process
// then says.
static void run_listen(const run_job *j, const char *what, uint32_t r,
    char *out, size_t n)
{
	char host[32] = "127.0.0.1";
	if (j->hosts.n > 0)
		pti_hosts_addr(pti_hosts_of(&j->c, what[0] == 's', r), host,
		    sizeof(host));
	switch (j->c.transport) {
	case PT_TRANSPORT_TCP:
		snprintf(out, n, "tcp://%s:0", host);
		break;
	case PT_TRANSPORT_TLS:
		snprintf(out, n, "tls+tcp://%s:0", host);
		break;
	default:
		snprintf(out, n, "ipc://%s/%s%u", j->sockdir, what, r);
	}
}

int pti_run_start(run_job *j)
{
	const pti_config *c = &j->c;
	char listen[PT_PATH_MAX + 32], url[PT_PATH_MAX];
	size_t used = 0;
	for (uint32_t s = 0; s < c->job.servers; s++) {
		run_listen(j, "s", s, listen, sizeof(listen));
		if (pti_run_spawn_server(j, s, listen, c->job.resume_version, "") != 0)
			return -1;
	}
	j->urls[0] = '\0';
	// allreduce: each worker publishes its ring's address in the socket
	// folder (train/ring.h); those of a ring before are gone.
	for (uint32_t r = 0; c->job.mode == PT_MODE_ALLREDUCE && r < c->job.workers;
	     r++) {
		pti_rdv_path(url, sizeof(url), j->sockdir, "worker", r);
		unlink(url);
	}
	for (uint32_t s = 0; s < c->job.servers; s++) {
		if (pti_run_wait_server(j, s, url) != 0)
			return -1;
		used += (size_t)snprintf(j->urls + used,
		    sizeof(j->urls) - used, "%s%s", s ? "," : "", url);
		if (used >= sizeof(j->urls)) {
			fprintf(stderr, "pstrain run: too many servers\n");
			return -1;
		}
	}
	for (uint32_t r = 0; r < c->job.workers; r++)
		if (pti_run_spawn_worker(j, r) != 0)
			return -1;
	return 0;
}

int pti_run_spawn_worker(run_job *j, uint32_t r)
{
	char rank[16], t0[64], rver[32], listen[PT_PATH_MAX + 32];
	snprintf(rank, sizeof(rank), "%u", r);
	snprintf(t0, sizeof(t0), "%.6f", j->t0);
	snprintf(rver, sizeof(rver), "%lld", (long long)j->c.job.resume_version);
	run_listen(j, "w", r, listen, sizeof(listen));
	// allreduce: the workers hold the model, and load the checkpoint;
	// each listens for its ring and finds the others' addresses in the
	// socket folder.
	char *extra[10] = {"--rank", rank, "--t0", t0};
	int n = 4;
	if (j->c.job.mode == PT_MODE_ALLREDUCE) {
		extra[n++] = "--resume-version";
		extra[n++] = rver;
		extra[n++] = "--listen";
		extra[n++] = listen;
		extra[n++] = "--ring-dir";
		extra[n++] = j->sockdir;
	} else {
		extra[n++] = "--connect";
		extra[n++] = j->urls;
	}
	if (j->n_procs >= RUN_MAX_PROCS ||
	    run_spawn(j, 0, r, extra, n) != 0) {
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
