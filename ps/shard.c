// ps/shard.c - the shard's life: built from the job (initial values, or
// a checkpoint), the learning rate, updates counted and checkpoints
// written when due, the workers' membership (lost, gone, silent), and the
// statistics written at the end.
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <jansson.h>

#include "common/afile.h"
#include "common/clock.h"
#include "common/err.h"
#include "common/job.h"
#include "common/mode.h"
#include "common/outputs.h"
#include "ps/policy.h"
#include "ps/rows.h"

// Connections that have not proven the job secret: at most this many
// more than the job's workers at once (a new one beyond it closes the
// oldest: all of a job's workers may be connecting at the same moment),
// each for at most --auth-timeout seconds. A worker proves the secret
// within a round trip of connecting; what stays longer is a stranger, or
// a message that is never finished.
#define PS_UNAUTH_MAX 64

// ---------------------------------------------------------------- updates

static pti_ckpt_meta server_ckpt_meta(const ps_server *s)
{
	pti_ckpt_meta m = {s->rank, s->job->servers,
	    pti_layout_hash(&s->layout), s->lo, s->hi, s->version, s->updates,
	    (uint32_t)s->opt.kind, (uint32_t)s->opt.n_state, s->job->workers,
	    NULL, 0};
	return m;
}

// server_ckpt_write writes the shard, and this server's rows of every
// table, now. It runs under the lock, so that values, state and version
// agree. A failed write is logged, counted and its error kept for
// server-R.json, from which the launcher tells the user at the end;
// training goes on.
static void server_ckpt_write(ps_server *s)
{
	pti_ckpt_meta m = server_ckpt_meta(s);
	const float *vecs[3] = {s->params, s->state1, s->state2};
	for (uint32_t r = 0; r < s->job->workers; r++)
		s->clocks[r] = s->m[r].clock;
	int rv = s->tables != NULL
		     ? pti_tables_dump(s, &m.extra, &m.extra_len)
		     : 0;
	if (rv == 0)
		rv = pti_ckpt_save(s->job->checkpoint_dir, &m, s->clocks,
		    vecs);
	free(m.extra);
	if (rv != 0) {
		s->ckpt_failures++;
		snprintf(s->ckpt_error, sizeof(s->ckpt_error), "%s",
		    pt_errmsg(rv));
		pti_log(PT_LOG_ERR, "server %u: checkpoint failed: %s",
		    s->rank, s->ckpt_error);
	}
}

// server_checkpoint writes the shard when one is due, after an update.
// A sync job's tables close each step apart from its variables (a
// worker's rows follow its variables' push): the checkpoint of version V
// waits until every table has closed its step V - 1 too, so that it
// holds one step of everything (pti_server_ckpt_pending writes it then).
static void server_checkpoint(ps_server *s)
{
	if (!pti_ckpt_due(&s->ckpt, s->version, pti_clock_s()))
		return;
	if (pti_tables_behind(s)) {
		s->ckpt_pending = 1;
		return;
	}
	server_ckpt_write(s);
}

void pti_server_ckpt_pending(ps_server *s)
{
	if (s->ckpt_pending && !pti_tables_behind(s)) {
		s->ckpt_pending = 0;
		server_ckpt_write(s);
	}
}

static void stale_record(ps_server *s, int64_t st)
{
	uint64_t u = st > 0 ? (uint64_t)st : 0;
	s->stale_sum += u;
	if (u > s->stale_max)
		s->stale_max = u;
	s->hist[u < PT_STALE_BUCKETS - 1 ? u : PT_STALE_BUCKETS - 1]++;
}

// server_applied counts one update of staleness `stale`, moves the
// version on and writes a checkpoint when one is due.
static void server_applied(ps_server *s, int64_t stale)
{
	stale_record(s, stale);
	s->version++;
	s->updates++;
	if (s->updates == PS_STEADY_FROM)
		getrusage(RUSAGE_SELF, &s->ru_steady);
	server_checkpoint(s);
}

void pti_server_clocks(ps_server *s, ps_ctx **wake)
{
	if (s->policy->clocks(s))
		pti_server_wake(s, wake);
}

void pti_server_act(ps_server *s, uint32_t rank, const ps_take *t,
    ps_ctx **wake)
{
	if (t->fill.m != NULL) {
		s->filled = t->fill.m;
		s->filled_pay = t->fill.pay;
		s->filled_off = t->fill.off;
		s->filled_n = t->fill.n;
		s->filled_ver = t->fill.ver;
	}
	if (t->ready) {
		s->eager_pieces++;
		pti_server_wake_ahead(s, wake);
	}
	s->dropped += t->dropped != 0;
	if (t->applied)
		server_applied(s, t->stale);
	if (t->moved)
		pti_server_wake(s, wake);
	int clocks = t->clocks;
	if (t->clock_to >= 0) {
		clocks |= s->m[rank].clock == s->min_clock;
		s->m[rank].clock = t->clock_to;
	}
	if (clocks)
		pti_server_clocks(s, wake);
}

void pti_shard_publish(ps_server *s)
{
	if (s->shm_writing) {
		pti_shm_write_end(s->shm_ctl, s->version);
		s->shm_writing = 0;
	}
}

// settle asks the policy to close what no longer waits for the workers
// lost, and acts on what it did.
static void settle(ps_server *s, ps_ctx **wake)
{
	ps_take t;
	memset(&t, 0, sizeof(t));
	t.clock_to = -1;
	s->policy->settle(s, &t);
	pti_server_act(s, UINT32_MAX, &t, wake);
	pti_tables_settle(s, wake);
	pti_server_ckpt_pending(s);
	pti_shard_publish(s); // a step it closed changed values
}
// ---------------------------------------------------------------- members

// pti_server_lost: worker r died or went silent. The job goes on without it:
// sync steps close with the others, ssp stops waiting for its clock.
void pti_server_lost(ps_server *s, uint32_t r, const char *why,
    ps_ctx **wake)
{
	if (!s->m[r].hello || s->m[r].lost || s->m[r].done)
		return;
	s->m[r].lost = 1;
	s->n_lost++;
	s->losses++;
	pti_log(PT_LOG_WARN, "server %u: worker %u %s at version %lld; going on "
	    "with %u workers", s->rank, r, why, (long long)s->version,
	    s->job->workers - s->n_lost);
	settle(s, wake);
}
// pipe_removed: connection id closed. Called with the lock.
void pti_server_pipe_removed(ps_server *s, uint32_t id, ps_ctx **wake)
{
	pti_peer_removed(s, id, wake);
	for (uint32_t r = 0; r < s->job->workers; r++) {
		if (s->m[r].pipe != id)
			continue;
		s->m[r].pipe = 0; // not connected (nng's ids are never 0)
		if (!s->m[r].done)
			pti_server_lost(s, r, "disconnected", wake);
		else if (!s->m[r].gone && !s->stop && !s->shutting) {
			s->m[r].gone = 1;
			pti_log(PT_LOG_WARN, "server %u: worker %u disconnected "
			    "after it was done", s->rank, r);
		}
	}
}

// pti_server_timeouts: a worker silent past --worker-timeout while the open
// sync step (or the ssp clock) waits for it is lost. Called with the lock.
void pti_server_timeouts(ps_server *s, ps_ctx **wake)
{
	const pti_jobopt *c = s->job;
	double now = pti_clock_s();
	for (uint32_t r = 0; r < c->workers; r++) {
		int waited_for = s->policy->waits_for(s, r);
		if (c->worker_timeout > 0 && s->m[r].hello && waited_for &&
		    now - s->m[r].seen > c->worker_timeout)
			pti_server_lost(s, r, "went silent", wake);
	}
}
// The seconds a server with no worker left waits before it stops: time
// for a worker whose connection dropped to dial again.
#define ALONE_GRACE_S 5.0

void pti_server_alone(ps_server *s, ps_ctx **wake)
{
	const pti_jobopt *c = s->job;
	if (s->supervised || c->alone_timeout <= 0 || s->stop || s->shutting)
		return;
	double now = pti_clock_s();
	uint32_t open = 0, left = 0;
	for (uint32_t r = 0; r < c->workers; r++) {
		ps_member *m = &s->m[r];
		if (!m->hello && !m->lost &&
		    now - s->t_start >= c->alone_timeout) {
			m->lost = 1;
			s->n_lost++;
			pti_log(PT_LOG_WARN, "server %u: worker %u has not arrived "
			    "%.0fs after this server started; going on with "
			    "%u workers", s->rank, r, c->alone_timeout,
			    c->workers - s->n_lost);
			settle(s, wake);
		}
		open += m->pipe != 0;
		left += !m->done && !m->lost;
	}
	if (open > 0 || left > 0) {
		s->alone_since = 0;
		return;
	}
	if (s->alone_since == 0)
		s->alone_since = now;
	if (now - s->alone_since < ALONE_GRACE_S)
		return;
	pti_log(PT_LOG_WARN, "server %u: no worker is left (%u of %u arrived, %u "
	    "finished, %u lost) and none stopped the job; stopping",
	    s->rank, s->n_hello, c->workers, s->n_done, s->n_lost);
	s->stop = 1;
	s->orphaned = 1;
}

// ---------------------------------------------------------------- life

static double cpu_s(const struct rusage *ru)
{
	return (double)ru->ru_utime.tv_sec + ru->ru_utime.tv_usec * 1e-6 +
	       (double)ru->ru_stime.tv_sec + ru->ru_stime.tv_usec * 1e-6;
}

// tables_json: each embedding table's rows on this server, what evicting
// and admitting did, the rows moved and their staleness.
static json_t *tables_json(const ps_server *s)
{
	json_t *a = json_array();
	for (uint32_t i = 0; s->tables != NULL && i < s->layout.n_tables;
	     i++) {
		const ps_table *t = &s->tables[i];
		pti_rows_stats st;
		pti_rows_stats_of(t->rows, &st);
		json_t *o = json_object();
		json_object_set_new(o, "name",
		    pti_json_str(s->layout.tables[i].name));
		json_object_set_new(o, "dim",
		    json_integer(s->layout.tables[i].dim));
		const struct {
			const char *key;
			uint64_t v;
		} f[] = {
		    {"version", (uint64_t)t->ver},
		    {"rows", st.rows},
		    {"rows_created", st.created},
		    {"evictions", st.evictions},
		    {"admission_refusals", st.refusals},
		    {"bytes", st.bytes},
		    {"rows_pushed", t->pushed},
		    {"rows_pulled", t->pulled},
		    {"row_staleness_rows", t->stale_n},
		    {"row_staleness_sum", t->stale_sum},
		    {"row_staleness_max", t->stale_max},
		};
		for (size_t j = 0; j < sizeof(f) / sizeof(f[0]); j++)
			json_object_set_new(o, f[j].key,
			    json_integer((json_int_t)f[j].v));
		json_array_append_new(a, o);
	}
	return a;
}

void pti_server_write_tables(const ps_server *s)
{
	char path[PT_PATH_MAX + 32];
	if (s->tables == NULL || s->job->out[0] == '\0')
		return;
	json_t *o = json_object();
	json_object_set_new(o, "rank", json_integer(s->rank));
	json_object_set_new(o, "tables", tables_json(s));
	snprintf(path, sizeof(path), "%s/server-%u-tables.json", s->job->out,
	    s->rank);
	char *text = json_dumps(o, JSON_INDENT(2));
	pti_afile a;
	if (text != NULL && pti_afile_open(&a, path) == 0) {
		pti_afile_write(&a, text, strlen(text));
		pti_afile_write(&a, "\n", 1);
		(void)pti_afile_commit(&a); // the next write tries again
	}
	free(text);
	json_decref(o);
}

void pti_server_sample_memory(ps_server *s)
{
	char line[256];
	FILE *f = fopen("/proc/self/status", "r");
	if (f == NULL)
		return;
	while (fgets(line, sizeof(line), f) != NULL) {
		unsigned long kb;
		if (sscanf(line, "RssAnon: %lu kB", &kb) == 1) {
			if (kb / 1024.0 > s->private_mb_max)
				s->private_mb_max = kb / 1024.0;
			break;
		}
	}
	fclose(f);
}

void pti_server_write_stats(const ps_server *s)
{
	const pti_jobopt *c = s->job;
	char path[PT_PATH_MAX + 32];
	const struct {
		const char *key;
		json_int_t v;
	} counts[] = {
	    {"lo", (json_int_t)s->lo},
	    {"hi", (json_int_t)s->hi},
	    {"version", s->version},
	    {"updates", (json_int_t)s->updates},
	    {"rejected_requests", (json_int_t)s->rejected},
	    {"unauthenticated_requests", (json_int_t)s->unauth},
	    {"auth_failures", (json_int_t)s->auth_failed},
	    {"connections_closed", (json_int_t)s->conn_closed},
	    {"rank_refusals", (json_int_t)s->rank_refused},
	    {"worker_losses", (json_int_t)s->losses},
	    {"worker_rejoins", (json_int_t)s->rejoins},
	    {"nonfinite_gradients", (json_int_t)s->nonfinite},
	    {"bound_refusals", (json_int_t)s->grad_refused},
	    {"dropped_gradients", (json_int_t)s->dropped},
	    {"pieces_applied_ahead", (json_int_t)s->eager_pieces},
	    {"box_requests", (json_int_t)s->box_requests},
	    {"staleness_sum", (json_int_t)s->stale_sum},
	    {"staleness_max", (json_int_t)s->stale_max},
	    {"max_lead", s->max_lead},
	};
	json_t *o = json_object(), *hist = json_array();
	json_object_set_new(o, "rank", json_integer(s->rank));
	json_object_set_new(o, "mode", pti_json_str(pti_mode_name(c->mode)));
	for (size_t i = 0; i < sizeof(counts) / sizeof(counts[0]); i++)
		json_object_set_new(o, counts[i].key, json_integer(counts[i].v));
	for (int i = 0; i < PT_STALE_BUCKETS; i++)
		json_array_append_new(hist, json_integer((json_int_t)s->hist[i]));
	json_object_set_new(o, "staleness_hist", hist);
	json_object_set_new(o, "tables", tables_json(s));
	json_object_set_new(o, "grad_ratio_max", json_real(s->grad_ratio_max));
	json_object_set_new(o, "ready_s", isnan(s->ready_s) ? json_null() :
	    json_real(s->ready_s));
	// The process's page faults, memory and CPU time: in all, and in
	// the steady state after the first PS_STEADY_FROM updates.
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	json_object_set_new(o, "minor_faults", json_integer(ru.ru_minflt));
	json_object_set_new(o, "max_rss_mb", json_real(ru.ru_maxrss / 1024.0));
	json_object_set_new(o, "max_private_mb", s->private_mb_max > 0
	    ? json_real(s->private_mb_max) : json_null());
	json_object_set_new(o, "cpu_s", json_real(cpu_s(&ru)));
	int steady = s->updates > PS_STEADY_FROM;
	json_object_set_new(o, "steady_updates", json_integer(steady
	    ? (json_int_t)(s->updates - PS_STEADY_FROM) : 0));
	json_object_set_new(o, "steady_minor_faults", json_integer(steady
	    ? ru.ru_minflt - s->ru_steady.ru_minflt : 0));
	json_object_set_new(o, "steady_cpu_s", json_real(steady
	    ? cpu_s(&ru) - cpu_s(&s->ru_steady) : 0));
	json_object_set_new(o, "checkpoint_failures",
	    json_integer((json_int_t)s->ckpt_failures));
	json_object_set_new(o, "checkpoint_last_error",
	    pti_json_str(s->ckpt_error[0] ? s->ckpt_error : NULL));
	// Whole or not at all (common/afile.h): a worker started by hand
	// reads it for its summary as soon as it is there.
	snprintf(path, sizeof(path), "%s/server-%u.json", c->out, s->rank);
	char *text = json_dumps(o, JSON_INDENT(2));
	pti_afile a;
	int rv = text == NULL ? pti_err_set(PT_ENOMEM, "%s", path)
			      : pti_afile_open(&a, path);
	if (rv == 0) {
		pti_afile_write(&a, text, strlen(text));
		pti_afile_write(&a, "\n", 1);
		rv = pti_afile_commit(&a);
	}
	if (rv != 0)
		pti_log(PT_LOG_ERR, "server %u: cannot write %s: %s", s->rank,
		    path, pt_errmsg(rv));
	free(text);
	json_decref(o);
}

void pti_server_fini(ps_server *s)
{
	// server_close has stopped every aio (none exist before it could).
	// A reply that a callback handed to nng_ctx_send after its aio was
	// stopped was refused without a callback: it is still ours.
	for (uint32_t i = 0; s->ctxs != NULL && i < s->n_ctx; i++)
		if (s->ctxs[i].aio != NULL) {
			nng_msg_free(nng_aio_get_msg(s->ctxs[i].aio));
			nng_aio_free(s->ctxs[i].aio);
		}
	free(s->ctxs);
	if (s->shm_mine.p != NULL)
		pti_shm_seg_fini(&s->shm_mine);
	else
		free(s->params);
	for (uint32_t r = 0; s->shm_of != NULL && r < s->job->workers; r++)
		pti_shm_seg_fini(&s->shm_of[r]);
	pti_shm_segs_free(s->shm_old, s->n_shm_old);
	free(s->shm_of);
	free(s->box_of); // the boxes are server.c's to free
	if (s->pol != NULL)
		s->policy->fini(s);
	free(s->pol);
	for (uint32_t i = 0; i < s->n_spare; i++)
		nng_msg_free(s->spare[i]);
	free(s->spare);
	free(s->m);
	free(s->clocks);
	free(s->peers);
	free(s->evict);
	free(s->bound);
	free(s->scan);
	free(s->state1);
	free(s->state2);
	pti_tables_fini(s);
	pthread_mutex_destroy(&s->mu);
	pthread_cond_destroy(&s->cv);
}

// server_gone marks the workers of --gone-workers as lost: they left the
// job before this server (a restarted one) started, so no step or clock
// waits for them. One that comes back says hello and rejoins.
static int server_gone(ps_server *s)
{
	const pti_jobopt *c = s->job;
	for (const char *p = s->gone_workers; *p;) {
		unsigned r;
		int used = 0;
		if (sscanf(p, "%u%n", &r, &used) != 1 || r >= c->workers)
			return pti_err_set(PT_EINVAL,
			    "--gone-workers %s: expected ranks below --workers "
			    "%u, separated by commas", s->gone_workers,
			    c->workers);
		if (!s->m[r].lost) {
			s->m[r].hello = s->m[r].lost = 1;
			s->n_hello++;
			s->n_lost++;
		}
		p += used + (p[used] == ',');
	}
	return 0;
}

int pti_server_init(ps_server *s, const pti_jobopt *c,
    const pti_server_proc *p, const pti_layout *l, float *const *given)
{
	int rv;

	memset(s, 0, sizeof(*s));
	s->job = c;
	s->rank = p->rank;
	s->supervised = p->supervised;
	s->gone_workers = p->gone_workers;
	s->t_start = pti_clock_s();
	s->t0 = p->t0 > 0 ? p->t0 : pti_wall_s();
	s->ready_s = NAN; // a server of pti_local_open never listens
	if ((s->policy = pti_policy_of(c->mode)) == NULL)
		return pti_err_set(PT_EINVAL, "mode %d has no policy", c->mode);
	if ((rv = pti_secret_load(&s->secret, c->secret_file)) != 0)
		return rv;
	pthread_mutex_init(&s->mu, NULL);
	pthread_cond_init(&s->cv, NULL);
	if (l->n_vars == 0)
		return pti_err_set(PT_EINVAL, "server %u: the job declares no "
		    "variables", s->rank);
	s->layout = *l;
	pti_range r = pti_layout_shard(&s->layout, s->rank, c->servers);
	s->lo = r.lo;
	s->hi = r.hi;
	s->n = r.hi - r.lo;
	if (s->n == 0)
		return pti_err_set(PT_EINVAL,
		    "server %u would hold no parameters: %llu parameters "
		    "over %u servers", s->rank,
		    (unsigned long long)s->layout.n_params, c->servers);
	s->shm_mine = PTI_SHM_SEG_NONE;
	if (c->shm) {
		// Its values where they lie in their pages in the model,
		// so a worker may map the segment beside its neighbours'.
		size_t skip = pti_shm_skip(s->lo);
		if ((rv = pti_shm_seg_create(&s->shm_mine,
			 PTI_SHM_SERVER_BYTES(skip, s->n), skip,
			 "pstrain-shard")) != 0)
			return rv;
		s->params = s->shm_mine.p;
		s->shm_ctl = pti_shm_ctl_of(&s->shm_mine, s->n);
		s->shm_of = calloc(c->workers, sizeof(*s->shm_of));
		s->box_of = calloc(c->workers, sizeof(*s->box_of));
		for (uint32_t r = 0; s->shm_of != NULL && r < c->workers; r++)
			s->shm_of[r] = PTI_SHM_SEG_NONE;
	} else {
		s->params = malloc(s->n * sizeof(float));
	}
	s->spare = calloc(c->workers + 1, sizeof(*s->spare));
	s->m = calloc(c->workers, sizeof(ps_member));
	s->clocks = calloc(c->workers, sizeof(int64_t));
	s->unauth_max = c->workers + PS_UNAUTH_MAX;
	s->step_max = c->step_max > 0 && c->step_max < PS_STEP_MAX ?
	    c->step_max : PS_STEP_MAX;
	s->n_peers = c->workers + PS_CONTROL_MAX + s->unauth_max;
	s->peers = calloc(s->n_peers, sizeof(ps_peer));
	s->evict = calloc(s->n_peers, sizeof(*s->evict));
	if (!s->params || !s->spare || !s->m || !s->clocks || !s->peers ||
	    !s->evict || (c->shm && (!s->shm_of || !s->box_of)))
		return pti_err_set(PT_ENOMEM, "server %u: shard of %llu floats",
		    s->rank, (unsigned long long)s->n);
	if ((s->pol = calloc(1, s->policy->size)) == NULL)
		return pti_err_set(PT_ENOMEM, "server %u: %s state", s->rank,
		    s->policy->name);
	if ((rv = s->policy->init(s)) != 0)
		return rv;
	pti_layout_init_values(s->params, &s->layout, c->seed, s->lo, s->hi);
	for (uint32_t v = 0; given != NULL && v < s->layout.n_vars; v++) {
		const pti_var *var = &s->layout.vars[v];
		uint64_t a = var->off > s->lo ? var->off : s->lo;
		uint64_t b = var->off + var->n < s->hi ? var->off + var->n : s->hi;
		if (given[v] != NULL && a < b)
			memcpy(s->params + (a - s->lo), given[v] + (a - var->off),
			    (b - a) * sizeof(float));
	}
	s->opt = c->optim;
	s->opt.weight_decay = c->weight_decay;
	if (s->opt.n_state >= 1 &&
	    (s->state1 = calloc(s->n, sizeof(float))) == NULL)
		return pti_err_set(PT_ENOMEM, "optimizer state");
	if (s->opt.n_state >= 2 &&
	    (s->state2 = calloc(s->n, sizeof(float))) == NULL)
		return pti_err_set(PT_ENOMEM, "optimizer state");
	if ((rv = pti_tables_init(s)) != 0)
		return rv;
	s->ckpt.every = c->ckpt_every;
	s->ckpt.seconds = c->ckpt_seconds;
	s->ckpt.last = pti_clock_s();
	if (s->ckpt.every != 0) {
		if (mkdir(c->checkpoint_dir, 0777) != 0 && errno != EEXIST)
			return pti_err_set(PT_EIO, "--checkpoint-dir %s: %s",
			    c->checkpoint_dir, strerror(errno));
	}
	if (c->resume_version >= 0) {
		char path[PT_PATH_MAX + 64];
		pti_ckpt_meta want = server_ckpt_meta(s), got;
		float *vecs[3] = {s->params, s->state1, s->state2};
		pti_ckpt_path(path, sizeof(path), c->checkpoint_dir, s->rank,
		    c->resume_version);
		if ((rv = pti_ckpt_load(path, &want, s->clocks, vecs, &got)) != 0)
			return rv;
		rv = s->tables != NULL ? pti_tables_undump(s, got.extra,
					     got.extra_len, got.version)
				       : 0;
		free(got.extra);
		if (rv != 0)
			return pti_err_set(rv, "%s: %s", path, pt_errmsg(rv));
		for (uint32_t w = 0; w < c->workers; w++)
			s->m[w].clock = s->clocks[w];
		if (!pti_mode_of(c->mode)->lockstep &&
		    got.n_workers != c->workers)
			return pti_err_set(PT_EINVAL,
			    "%s: written for %u workers, this job has %u: the "
			    "workers' data positions do not carry over", path,
			    got.n_workers, c->workers);
		s->version = got.version;
		s->updates = got.updates;
		pti_log(PT_LOG_INFO, "server %u: resumed from %s at version %lld",
		    s->rank, path, (long long)s->version);
	}
	if ((rv = server_gone(s)) != 0)
		return rv;
	for (uint32_t w = 0; w < c->workers; w++)
		s->policy->sealed(s, w);
	ps_ctx *none = NULL; // nothing is parked yet
	pti_server_clocks(s, &none);
	s->lr = pti_job_lr_rule(c);
	if (s->shm_ctl != NULL) { // the version of the values as they start
		pti_shm_write_begin(s->shm_ctl);
		pti_shm_write_end(s->shm_ctl, s->version);
	}
	return 0;
}
