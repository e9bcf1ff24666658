// cli/compare/modes.c - compare's --modes (compare.h): a comma-separated
// list of MODE[:S][:key=value...], each token one mode of the comparison.
// MODE is sync, async, ssp (its staleness bound S next), allreduce or
// sgd-small (the small-batch control: sync with modifiers of its own); a
// modifier is a flag of pstrain run for that mode's jobs alone, looked up
// and checked by the flag table (common/config.c) as on run's command
// line, so that every flag of the table is a modifier without code here.
#include "cli/compare/compare.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "common/proto.h"

// Shorter names of a few flags, kept from when modifiers were a list of
// their own.
static const struct {
	const char *key, *flag;
} mode_alias[] = {{"backup", "backup-workers"}, {"warmup", "warmup-epochs"}};

// The flags compare sets for every job itself, and how.
static const struct {
	const char *flag, *how;
} mode_owned[] = {{"mode", "the token's first word"},
    {"staleness", "ssp:S gives it"}, {"seed", "from --seeds"},
    {"out", "DIR/LABEL/seed-S"}, {"save-model", "model.bin in --out"},
    {"tensorboard", "a folder of compare's --tensorboard"},
    {"dashboard", "compare's --dashboard serves every job"},
    {"dashboard-listen", "compare's --dashboard serves every job"}};

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

// mode_word adds one word of command line to m's modifiers.
static void mode_word(pti_cmp_mode *m, const char *w)
{
	size_t len = strlen(w);
	memcpy(m->extra[m->n_extra++], w, len + 1);
}

// mode_extra adds one "--flag value" pair (value may be NULL); -1 when
// m has no room for it.
static int mode_extra(pti_cmp_mode *m, const char *flag, const char *value)
{
	if (m->n_extra + 2 > PTI_CMP_EXTRA ||
	    strlen(flag) >= sizeof(m->extra[0]) ||
	    (value != NULL && strlen(value) >= sizeof(m->extra[0])))
		return -1;
	mode_word(m, flag);
	if (value != NULL)
		mode_word(m, value);
	return 0;
}

// mode_bad says what is wrong with token tok, and returns -1.
static int mode_bad(const char *tok, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static int mode_bad(const char *tok, const char *fmt, ...)
{
	va_list ap;
	fprintf(stderr, "pstrain compare: --modes: '%s': ", tok);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\n");
	return -1;
}

// mode_set applies the modifier part ("key=value", or "key" for a
// switch) to job, the flags of this mode's jobs, as run's command line
// would, and keeps it as words for their command line in m. *opt is set
// when it sets the optimizer.
static int mode_set(const char *tok, char *part, pti_config *job,
    pti_cmp_mode *m, int *opt)
{
	char *eq = strchr(part, '=');
	const char *flag = part, *value = NULL;
	char arg[2 * sizeof(m->token)], name[sizeof(m->token) + 2];
	int help, rv;
	if (eq != NULL) {
		*eq = '\0';
		value = eq + 1;
	}
	for (size_t i = 0; i < sizeof(mode_alias) / sizeof(mode_alias[0]); i++)
		if (strcmp(flag, mode_alias[i].key) == 0)
			flag = mode_alias[i].flag;
	for (size_t i = 0; i < sizeof(mode_owned) / sizeof(mode_owned[0]); i++)
		if (strcmp(flag, mode_owned[i].flag) == 0)
			return mode_bad(tok, "--%s is compare's to set for "
			    "each job (%s)", flag, mode_owned[i].how);
	if (strcmp(flag, "optimizer") == 0 && value != NULL) {
		// The momentum of momentum and nesterov, which a ':' would
		// give but cannot here (it ends the modifier).
		if (strcmp(value, "momentum") == 0)
			value = "momentum:0.9";
		else if (strcmp(value, "nesterov") == 0)
			value = "nesterov:0.9";
		*opt = 1;
	}
	snprintf(name, sizeof(name), "--%s", flag);
	snprintf(arg, sizeof(arg), "%s%s%s", name, value ? "=" : "",
	    value ? value : "");
	char *argv[] = {arg};
	if ((rv = pti_config_parse(job, PT_CMD_RUN, 1, argv, &help)) != 0)
		return mode_bad(tok, "%s", pt_errmsg(rv));
	if (help)
		return mode_bad(tok, "'%s' is not a flag of pstrain run", flag);
	// backup-workers is in every job's command line already (the tail
	// of compare.c's job_argv): the modifier gives its value.
	if (strcmp(flag, "backup-workers") == 0)
		return 0;
	if (mode_extra(m, name, value) != 0)
		return mode_bad(tok, "too many modifiers (at most %d words of "
		    "command line)", PTI_CMP_EXTRA);
	return 0;
}

// mode_small gives sgd-small, the small-batch control, its modifiers:
// one worker at the others' per-worker batch B/W, at --lr / W (unless
// --lr-scaling linear already scales the rate with the batch), and W
// times --steps when --steps is given, so that it learns from the same
// examples with the same step per example, without staleness: what an
// async job's small updates do, without asynchrony.
static int mode_small(const char *tok, const pti_config *c, pti_config *job,
    pti_cmp_mode *m, int *opt)
{
	uint32_t w = c->job.workers;
	char part[4][64];
	int n = 0;
	// (compare's --batch is a multiple of --workers: checked already)
	snprintf(part[n++], sizeof(part[0]), "workers=1");
	snprintf(part[n++], sizeof(part[0]), "batch=%u", c->job.batch / w);
	if (c->job.lr_scaling != PT_LR_LINEAR) // lr: --lr, or the default
		snprintf(part[n++], sizeof(part[0]), "lr=%.10g",
		    c->job.lr / w);
	if (c->steps > 0)
		snprintf(part[n++], sizeof(part[0]), "steps=%llu",
		    (unsigned long long)c->steps * w);
	for (int i = 0; i < n; i++)
		if (mode_set(tok, part[i], job, m, opt) != 0)
			return -1;
	return 0;
}

// mode_parse reads token tok into m, with c's flags for all that the
// token does not set; check: check each job's flags together, as pstrain
// run will. 0, or -1 after saying why. job is scratch space.
static int mode_parse(const pti_config *c, int check, const char *tok,
    pti_cmp_mode *m, pti_config *job)
{
	char buf[sizeof(m->token)], *part, *save = NULL;
	int opt = 0, rv, small = 0;
	memset(m, 0, sizeof(*m));
	if (strlen(tok) >= sizeof(m->token))
		return mode_bad(tok, "longer than %zu characters",
		    sizeof(m->token) - 1);
	if (strchr(tok, '/') != NULL)
		return mode_bad(tok, "a mode names its jobs' folder: no '/'");
	strcpy(m->token, tok);
	strcpy(buf, tok);
	part = strtok_r(buf, ":", &save);
	if (part != NULL && strcmp(part, "sync") == 0)
		m->mode = PT_MODE_SYNC;
	else if (part != NULL && strcmp(part, "async") == 0)
		m->mode = PT_MODE_ASYNC;
	else if (part != NULL && strcmp(part, "allreduce") == 0)
		m->mode = PT_MODE_ALLREDUCE;
	else if (part != NULL && strcmp(part, "ssp") == 0)
		m->mode = PT_MODE_SSP;
	else if (part != NULL && strcmp(part, "hybrid") == 0)
		m->mode = PT_MODE_HYBRID;
	else if (part != NULL && strcmp(part, "sgd-small") == 0)
		m->mode = PT_MODE_SYNC, small = 1;
	else
		return mode_bad(tok, "bad mode (expected sync, async, ssp:S, "
		    "allreduce, hybrid or sgd-small, then :key=value modifiers, :key "
		    "alone for a switch, each a flag of pstrain run for this "
		    "mode's jobs; docs/COMPARE.md)");
	if (m->mode == PT_MODE_SSP &&
	    ((part = strtok_r(NULL, ":", &save)) == NULL ||
		whole(part, &m->staleness) != 0))
		return mode_bad(tok, "ssp takes its staleness bound next, a "
		    "whole number up to 1000000 (ssp:4)");
	// What job_argv gives this mode's jobs before the modifiers.
	*job = *c;
	job->job.mode = m->mode;
	job->job.staleness = m->staleness;
	job->job.backup_workers = 0;
	if (job->layer_push == PT_LP_AUTO)
		job->layer_push = PT_LP_OFF;
	if (small && mode_small(tok, c, job, m, &opt) != 0)
		return -1;
	while ((part = strtok_r(NULL, ":", &save)) != NULL)
		if (mode_set(tok, part, job, m, &opt) != 0)
			return -1;
	m->backup = job->job.backup_workers;
	// "--lr 0" stands for the optimizer's usual rate (pstrain run),
	// unless the command line or the mode gives --lr.
	if (opt && !pti_config_given(job, "lr") &&
	    mode_extra(m, "--lr", "0") != 0)
		return mode_bad(tok, "too many modifiers (at most %d words of "
		    "command line)", PTI_CMP_EXTRA);
	if (check && (rv = pti_config_check(job, PT_CMD_RUN)) != 0)
		return mode_bad(tok, "%s", pt_errmsg(rv));
	m->workers = job->job.workers;
	m->batch = job->job.batch;
	m->epochs = job->epochs;
	m->steps = job->steps;
	for (size_t i = 0; tok[i]; i++)
		m->label[i] = tok[i] == ':' || tok[i] == '=' ? '-' : tok[i];
	return 0;
}

// mode_twice tells whether ms[n] names the folder of an earlier mode.
static int mode_twice(const pti_cmp_mode *ms, int n)
{
	for (int i = 0; i < n; i++)
		if (strcmp(ms[i].label, ms[n].label) == 0)
			return 1;
	return 0;
}

int pti_cmp_modes_parse(const pti_config *c, int check, pti_cmp_mode *ms,
    int *n)
{
	char buf[PT_PATH_MAX];
	pti_config *job = malloc(sizeof(*job)); // large: off the stack
	int rv = 0;
	if (job == NULL) {
		fprintf(stderr, "pstrain compare: out of memory\n");
		return -1;
	}
	snprintf(buf, sizeof(buf), "%s", c->modes);
	*n = 0;
	for (char *tok = buf, *next; tok != NULL; tok = next) {
		next = strchr(tok, ',');
		if (next)
			*next++ = '\0';
		if (*n == PTI_CMP_MODES_MAX) {
			fprintf(stderr, "pstrain compare: --modes: at most %d "
			    "modes\n", PTI_CMP_MODES_MAX);
			rv = -1;
			break;
		}
		if ((rv = mode_parse(c, check, tok, &ms[*n], job)) != 0)
			break;
		if (mode_twice(ms, *n)) {
			fprintf(stderr, "pstrain compare: --modes: '%s' given "
			    "twice\n", tok);
			rv = -1;
			break;
		}
		(*n)++;
	}
	free(job);
	return rv;
}
