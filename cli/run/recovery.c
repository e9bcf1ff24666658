// cli/run/recovery.c - what a failed process costs the job: a worker is
// restarted or the job goes on without it; a server is restarted from a
// checkpoint, or the whole sync job rolls back to one (run_impl.h).
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "cli/cli.h"
#include "cli/run/run_impl.h"
#include "common/summary.h"
#include "common/checkpoint.h"
#include "common/clock.h"
#include "common/err.h"
#include "common/mode.h"
#include "common/optim.h"
#include "common/proto.h"

// run_worker_failed decides what a failed worker costs: restart it while
// --restart-workers allows, else go on without it (when worker 0 is
// lost, the lowest-ranked worker left finishes the job). Returns 0 when
// the job goes on.
int pti_run_worker_failed(run_job *j, run_proc *p)
{
	char what[64];
	if (WIFEXITED(p->status) && WEXITSTATUS(p->status) == PTI_EXIT_DIVERGED)
		return -1; // divergence ends the job
	pti_run_how_ended(p, what, sizeof(what));
	if (j->c.job.mode == PT_MODE_ALLREDUCE) {
		// The ring cannot go on without it: every worker starts
		// again from the newest checkpoint (pti_run_rollback).
		if (j->worker_restarts < j->c.restart_workers) {
			j->worker_restarts++;
			fprintf(stderr, "\npstrain run: worker %u failed (%s); "
			    "restarting every worker (%u of %u restarts)\n",
			    p->rank, what, j->worker_restarts,
			    j->c.restart_workers);
			pti_run_tell_output(j, p);
			return RUN_RESTART;
		}
		fprintf(stderr, "\npstrain run: worker %u failed (%s); the ring "
		    "of --mode allreduce cannot go on without it\n", p->rank,
		    what);
		return -1;
	}
	if (j->worker_restarts < j->c.restart_workers) {
		j->worker_restarts++;
		fprintf(stderr, "\npstrain run: worker %u failed (%s); "
		    "restarting it (%u of %u restarts)\n", p->rank, what,
		    j->worker_restarts, j->c.restart_workers);
		pti_run_tell_output(j, p);
		p->exited = 2; // replaced: not counted again
		return pti_run_spawn_worker(j, p->rank) == 0 ? 0 : -1;
	}
	uint32_t left = 0;
	for (uint32_t r = 0; r < j->c.job.workers; r++)
		left += !j->lost[r] && r != p->rank;
	if (left == 0)
		return -1;
	j->lost[p->rank] = 1;
	j->workers_lost++;
	fprintf(stderr, "\npstrain run: worker %u failed (%s); the job goes "
	    "on without it\n", p->rank, what);
	pti_run_tell_output(j, p);
	p->exited = 2;
	return 0;
}

// run_gone lists, comma-separated in out (size PT_PATH_MAX), the workers
// whose process has ended (finished or lost); returns how many finished.
uint32_t pti_run_gone(const run_job *j, char *out)
{
	uint32_t finished = 0;
	size_t used = 0;
	out[0] = '\0';
	for (uint32_t r = 0; r < j->c.job.workers; r++) {
		const run_proc *last = NULL;
		for (uint32_t i = 0; i < j->n_procs; i++)
			if (!j->procs[i].server && j->procs[i].rank == r)
				last = &j->procs[i];
		if (last == NULL || !last->exited)
			continue;
		finished += !j->lost[r];
		if (used + 16 < PT_PATH_MAX)
			used += (size_t)snprintf(out + used, PT_PATH_MAX - used,
			    "%s%u", used ? "," : "", r);
	}
	return finished;
}

// run_server_failed restarts a dead server while --restart-servers
// allows. Async and ssp: that server alone, from its own newest complete
// checkpoint. Sync: every server, from the newest checkpoint they all
// completed, so that every shard is at the same step again. The workers
// notice, wait, reconnect and go on. Returns 0 when the job goes on,
// RUN_RESTART when only a restart of the whole job will do (a sync
// worker has already finished), -1 when the job ends.
int pti_run_server_failed(run_job *j, run_proc *p)
{
	pti_config *c = &j->c;
	char gone[PT_PATH_MAX], url[PT_PATH_MAX], got[PT_PATH_MAX];
	uint64_t step = 0;
	double wall = 0, loss, t_fail = pti_wall_s();
	if (j->server_restarts >= c->restart_servers)
		return -1;
	j->server_restarts++;
	p->exited = 2;
	pti_run_last_row(j, &step, &wall, &loss);
	uint32_t finished = pti_run_gone(j, gone);
	int all = pti_mode_of(c->job.mode)->lockstep;
	if (all && finished > 0)
		return RUN_RESTART;
	uint32_t lo = all ? 0 : p->rank, hi = all ? c->job.servers : p->rank + 1;
	int64_t v = pti_run_find_resume(c, c->job.checkpoint_dir, &j->layout, lo, hi);
	fprintf(stderr, "pstrain run: restarting %s from %s%lld (server "
	    "restart %u of %u); the workers reconnect\n",
	    all ? "every server" : "it",
	    v < 0 ? "its initial values, no complete checkpoint being "
		    "there, version " : "checkpoint version ",
	    (long long)(v < 0 ? 0 : v), j->server_restarts,
	    c->restart_servers);
	for (uint32_t i = 0; all && i < j->n_procs; i++)
		if (j->procs[i].server)
			pti_run_stop_proc(&j->procs[i]);
	for (uint32_t s = lo; s < hi; s++) {
		pti_run_server_url(j, s, url);
		if (pti_run_spawn_server(j, s, url, v, gone) != 0)
			return -1;
	}
	for (uint32_t s = lo; s < hi; s++)
		if (pti_run_wait_server(j, s, got) != 0)
			return -1;
	if (all) {
		// Sync: the steps since the checkpoint are done again; the
		// time they took so far is lost, at the job's pace.
		uint64_t from = v < 0 ? 0 : (uint64_t)v;
		uint64_t redo = step > from ? step - from : 0;
		j->steps_redone += redo;
		if (step > 0)
			j->time_lost += wall * (double)redo / step;
	}
	j->time_lost += pti_wall_s() - t_fail; // the servers were down
	return 0;
}

// run_find_resume picks the newest checkpoint version in dir that every
// server of ranks [lo, hi) completed and that checks out whole; refused
// files are named with their reason. Returns the version, or -1.
uint32_t pti_run_ckpt_ranks(const pti_config *c)
{
	return c->job.mode == PT_MODE_ALLREDUCE ? 1 : c->job.servers;
}

int64_t pti_run_find_resume(const pti_config *c, const char *dir,
    const pti_layout *l, uint32_t lo, uint32_t hi)
{
	uint32_t ns = pti_run_ckpt_ranks(c);
	DIR *d = opendir(dir);
	int64_t best = -1, tried[256];
	int n = 0;
	struct dirent *e;
	if (d == NULL) {
		fprintf(stderr, "pstrain run: %s: %s\n", dir, strerror(errno));
		return -1;
	}
	while ((e = readdir(d)) != NULL && n < 256) {
		int64_t v;
		int kind = pti_ckpt_name(e->d_name, lo, &v);
		if (kind == PTI_CKPT_FILE)
			tried[n++] = v;
		else if (kind == PTI_CKPT_TMP)
			fprintf(stderr, "pstrain run: ignoring %s/%s: an "
			    "unfinished write (its server was stopped while "
			    "writing it)\n", dir, e->d_name);
	}
	closedir(d);
	for (;;) {
		int64_t v = -1;
		for (int i = 0; i < n; i++)
			if (tried[i] > v)
				v = tried[i];
		if (v < 0)
			break;
		int ok = 1;
		for (uint32_t r = lo; r < hi && ok; r++) {
			pti_range sh = pti_layout_shard(l, r, ns);
			pti_ckpt_meta want = {r, ns, pti_layout_hash(l),
			    sh.lo, sh.hi, v, 0, (uint32_t)c->job.optim.kind,
			    (uint32_t)c->job.optim.n_state, c->job.workers,
			    NULL, 0}, got;
			size_t bytes = (sh.hi - sh.lo) * sizeof(float);
			float *vecs[3] = {malloc(bytes), malloc(bytes),
			    malloc(bytes)};
			char path[PT_PATH_MAX + 64];
			pti_ckpt_path(path, sizeof(path), dir, r, v);
			int rv = vecs[0] && vecs[1] && vecs[2]
				     ? pti_ckpt_load(path, &want, NULL, vecs,
					   &got)
				     : pti_err_set(PT_ENOMEM, "checkpoint");
			if (rv == 0)
				free(got.extra); // checked whole; not needed
			if (rv == 0 && got.version != v)
				rv = pti_err_set(PT_ECORRUPT,
				    "%s: holds version %lld", path,
				    (long long)got.version);
			if (rv != 0) {
				fprintf(stderr, "pstrain run: refusing "
				    "checkpoint %lld: %s\n", (long long)v,
				    pt_errmsg(rv));
				ok = 0;
			}
			free(vecs[0]), free(vecs[1]), free(vecs[2]);
		}
		if (ok) {
			best = v;
			break;
		}
		for (int i = 0; i < n; i++)
			if (tried[i] == v)
				tried[i] = -1;
	}
	return best;
}

// run_rollback: a server of a sync job died after a worker had finished,
// so the workers cannot all go back to an earlier step. Stop every
// process and start the whole job again from the newest checkpoint that
// every server completed, counting the steps and time thrown away.
int pti_run_rollback(run_job *j)
{
	uint64_t step = 0;
	double wall = 0, loss;
	pti_run_last_row(j, &step, &wall, &loss);
	pti_run_kill_all(j);
	j->n_procs = 0;
	memset(j->lost, 0, sizeof(j->lost));
	pti_config *c = &j->c;
	int ar = c->job.mode == PT_MODE_ALLREDUCE;
	int64_t v = c->job.checkpoint_dir[0] == '\0'
			? -1
			: pti_run_find_resume(c, c->job.checkpoint_dir,
			      &j->layout, 0, pti_run_ckpt_ranks(c));
	uint64_t from = v < 0 ? 0 : (uint64_t)v;
	c->job.resume_version = v;
	j->steps_redone += step > from ? step - from : 0;
	// Time lost: from the checkpoint's step to the failure, at the
	// job's pace so far.
	if (step > from)
		j->time_lost += wall * (double)(step - from) / step;
	fprintf(stderr, "pstrain run: restarting the whole job from version "
	    "%llu (%s restart %u of %u; steps %llu..%llu are done "
	    "again)\n", (unsigned long long)from, ar ? "worker" : "server",
	    ar ? j->worker_restarts : j->server_restarts,
	    ar ? c->restart_workers : c->restart_servers,
	    (unsigned long long)from + 1, (unsigned long long)step);
	return 0;
}

// run_tell_checkpoints says at the end of the job, after the summary,
// that checkpoint writes failed, if any did (the servers only log each
// one), and which checkpoint a --resume would now start from.
void pti_run_tell_checkpoints(const run_job *j)
{
	const pti_config *c = &j->c;
	uint64_t failed;
	char last[PT_PATH_MAX + 160];
	if (c->job.checkpoint_dir[0] == '\0')
		return;
	pti_ckpt_report(c, &failed, last, sizeof(last));
	if (failed == 0)
		return;
	int64_t v = pti_run_find_resume(c, c->job.checkpoint_dir, &j->layout, 0,
	    c->job.servers);
	fflush(stdout); // after the summary, also when both go to one file
	fprintf(stderr, "pstrain run: %llu checkpoint write%s failed (%s); ",
	    (unsigned long long)failed, failed == 1 ? "" : "s", last);
	if (v >= 0)
		fprintf(stderr, "the newest good checkpoint is version %lld, in "
		    "%s\n", (long long)v, c->job.checkpoint_dir);
	else
		fprintf(stderr, "no checkpoint that every server completed is "
		    "left in %s\n", c->job.checkpoint_dir);
}

