// common/tboard.c - TensorBoard event files from a job's files (tboard.h).
//
// A record is: its length (uint64, little-endian), the masked CRC-32C of
// those 8 bytes, the data, the masked CRC-32C of the data; masked is
// ((crc >> 15) | (crc << 17)) + 0xa282ead8. The data is an Event
// protobuf: wall_time (field 1, double), step (2, int64), then either
// file_version (3, "brain.Event:2", the first record) or a Summary (5)
// of Values (1), each a tag (1, string) and a simple_value (2, float).
// The session run (DIR itself) holds the hparams plugin's records: a
// Value whose metadata (9) is a SummaryMetadata with plugin_data (1) of
// plugin_name "hparams" (1) and content (2) an HParamsPluginData
// (version 0, then session_start_info (3): hparams (1) as map entries of
// a key and a google.protobuf.Value, number (2), string (3) or bool (4);
// group_name (4), start_time_secs (5); or session_end_info (4): status
// (1), end_time_secs (2)), and a tensor (8) of no floats, as
// tensorboard/plugins/hparams/metadata.py writes them; then the job's
// final scores as scalars.
// No C library of Debian's offers CRC-32C (Castagnoli) alone, so it is
// the table-driven loop below.
#include "common/tboard.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "common/afile.h"
#include "common/clock.h"
#include "common/config.h"
#include "common/err.h"
#include "common/jsonio.h"
#include "common/outputs.h"

// ---------------------------------------------------------------- CRC-32C

static uint32_t crc_table[256];

static void crc_init(void)
{
	for (uint32_t i = 0; i < 256; i++) {
		uint32_t c = i;
		for (int k = 0; k < 8; k++)
			c = c & 1 ? (c >> 1) ^ 0x82f63b78u : c >> 1;
		crc_table[i] = c;
	}
}

static uint32_t crc32c_masked(const uint8_t *p, size_t n)
{
	uint32_t c = 0xffffffffu;
	for (size_t i = 0; i < n; i++)
		c = crc_table[(c ^ p[i]) & 0xff] ^ (c >> 8);
	c = ~c;
	return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

// ---------------------------------------------------------------- protobuf

#define PB_MAX 4096 // an event of a few scalars, or of the hparams

typedef struct pb {
	uint8_t b[PB_MAX];
	size_t n;
} pb;

static void pb_varint(pb *p, uint64_t v)
{
	while (v >= 0x80 && p->n < PB_MAX) {
		p->b[p->n++] = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	if (p->n < PB_MAX)
		p->b[p->n++] = (uint8_t)v;
}

// pb_le writes the n low bytes of v, little-endian (protobuf's fixed64
// and fixed32 on any host).
static void pb_le(pb *p, uint64_t v, int n)
{
	for (int i = 0; i < n && p->n < PB_MAX; i++)
		p->b[p->n++] = (uint8_t)(v >> (8 * i));
}

static void pb_double(pb *p, int field, double v)
{
	uint64_t u;
	memcpy(&u, &v, sizeof(u));
	pb_varint(p, (uint64_t)field << 3 | 1);
	pb_le(p, u, 8);
}

static void pb_float(pb *p, int field, float v)
{
	uint32_t u;
	memcpy(&u, &v, sizeof(u));
	pb_varint(p, (uint64_t)field << 3 | 5);
	pb_le(p, u, 4);
}

static void pb_bytes(pb *p, int field, const void *s, size_t n)
{
	pb_varint(p, (uint64_t)field << 3 | 2);
	pb_varint(p, n);
	if (p->n + n <= PB_MAX) {
		memcpy(p->b + p->n, s, n);
		p->n += n;
	} else {
		p->n = PB_MAX; // too long: caught by the caller's check
	}
}

// ---------------------------------------------------------------- runs

typedef struct tb_run {
	FILE *f;
	char path[PT_PATH_MAX + 128];
	size_t rows; // rows of its CSV written so far
	int err;     // errno of a failed write
} tb_run;

struct pti_tb {
	char out[PT_PATH_MAX];
	uint32_t workers;
	double t0; // the job's start, seconds since 1970
	tb_run *runs; // (workers + 2): the workers', eval's, the session's
};

static void tb_record(tb_run *r, const pb *e)
{
	uint8_t len[8];
	uint32_t c;
	for (int i = 0; i < 8; i++)
		len[i] = (uint8_t)((uint64_t)e->n >> (8 * i));
	c = crc32c_masked(len, 8);
	uint8_t cb[4] = {(uint8_t)c, (uint8_t)(c >> 8), (uint8_t)(c >> 16),
	    (uint8_t)(c >> 24)};
	uint32_t d = crc32c_masked(e->b, e->n);
	uint8_t db[4] = {(uint8_t)d, (uint8_t)(d >> 8), (uint8_t)(d >> 16),
	    (uint8_t)(d >> 24)};
	if (fwrite(len, 8, 1, r->f) != 1 || fwrite(cb, 4, 1, r->f) != 1 ||
	    fwrite(e->b, 1, e->n, r->f) != e->n || fwrite(db, 4, 1, r->f) != 1)
		r->err = errno ? errno : EIO;
}

// tb_event writes an event of Summary sum at step.
static void tb_event(tb_run *r, double wall, int64_t step, const pb *sum)
{
	static pb ev;
	ev.n = 0;
	pb_double(&ev, 1, wall);
	pb_varint(&ev, 2 << 3 | 0);
	pb_varint(&ev, (uint64_t)step);
	pb_bytes(&ev, 5, sum->b, sum->n);
	if (ev.n < PB_MAX && sum->n < PB_MAX)
		tb_record(r, &ev);
}

// tb_scalars writes one event of the n scalars tags[i] = v[i] at step
// (NaN values, from columns a file lacks, left out).
static void tb_scalars(tb_run *r, double wall, int64_t step,
    const char *const *tags, const double *v, int n)
{
	pb sum = {{0}, 0};
	for (int i = 0; i < n; i++) {
		if (isnan(v[i]))
			continue;
		pb val = {{0}, 0};
		pb_bytes(&val, 1, tags[i], strlen(tags[i]));
		pb_float(&val, 2, (float)v[i]);
		pb_bytes(&sum, 1, val.b, val.n);
	}
	tb_event(r, wall, step, &sum);
}

// tb_hparams writes an event of the hparams plugin's data (an
// HParamsPluginData holding field `which` = msg) under tag.
static void tb_hparams(tb_run *r, double wall, const char *tag, int which,
    const pb *msg)
{
	static pb data, plugin, meta, val, sum;
	static const uint8_t no_floats[] = {0x08, 0x01, 0x12, 0x02, 0x12, 0x00};
	data.n = plugin.n = meta.n = val.n = sum.n = 0;
	pb_varint(&data, 1 << 3 | 0); // version 0
	pb_varint(&data, 0);
	pb_bytes(&data, which, msg->b, msg->n);
	pb_bytes(&plugin, 1, "hparams", 7);
	pb_bytes(&plugin, 2, data.b, data.n);
	pb_bytes(&meta, 1, plugin.b, plugin.n);
	pb_bytes(&val, 1, tag, strlen(tag));
	pb_bytes(&val, 9, meta.b, meta.n);
	pb_bytes(&val, 8, no_floats, sizeof(no_floats));
	pb_bytes(&sum, 1, val.b, val.n);
	tb_event(r, wall, 0, &sum);
}

// The flags a TensorBoard session shows as its hparams. A session's
// group is all of them but the seed, so that the seeds of one
// configuration are one group.
static const char *const tb_hparam_flags[] = {"mode", "servers", "workers",
    "model", "data", "batch", "lr", "optimizer", "staleness",
    "backup-workers", "epochs", "steps", "lr-scaling", "warmup-epochs",
    "weight-decay", "matched-lr", "staleness-lr", "max-staleness",
    "straggler", "delay", "transport", "placement", "link", "layer-push",
    "validation", "seed"};

// tb_session_start writes the session's start: c's hparams, its group
// and start time.
static void tb_session_start(tb_run *r, const pti_config *c, double t0)
{
	static pb start, entry, value;
	char group[PB_MAX / 2], num[64];
	size_t used = 0;
	json_t *cfg = pti_config_json(c, PT_CMD_RUN);
	start.n = 0;
	group[0] = '\0';
	for (size_t i = 0; cfg != NULL && i < sizeof(tb_hparam_flags) /
	    sizeof(tb_hparam_flags[0]); i++) {
		const char *key = tb_hparam_flags[i];
		json_t *v = json_object_get(cfg, key);
		const char *text = NULL;
		entry.n = value.n = 0;
		if (json_is_number(v)) {
			pb_double(&value, 2, json_number_value(v));
			snprintf(num, sizeof(num), "%.10g", json_number_value(v));
			text = num;
		} else if (json_is_boolean(v)) {
			pb_varint(&value, 4 << 3 | 0);
			pb_varint(&value, json_is_true(v));
			text = json_is_true(v) ? "true" : "false";
		} else if (json_is_string(v) && json_string_length(v) > 0) {
			text = json_string_value(v);
			pb_bytes(&value, 3, text, strlen(text));
		} else {
			continue;
		}
		pb_bytes(&entry, 1, key, strlen(key));
		pb_bytes(&entry, 2, value.b, value.n);
		pb_bytes(&start, 1, entry.b, entry.n);
		if (strcmp(key, "seed") != 0 && used < sizeof(group))
			used += (size_t)snprintf(group + used, sizeof(group) -
			    used, "%s%s=%s", used > 0 ? " " : "", key, text);
	}
	json_decref(cfg);
	pb_bytes(&start, 4, group, strlen(group));
	pb_double(&start, 5, t0);
	tb_hparams(r, t0, "_hparams_/session_start_info", 3, &start);
}

// tb_run_open starts run name (the session's: "") under dir.
static int tb_run_open(tb_run *r, const char *dir, const char *name,
    double now)
{
	char folder[PT_PATH_MAX + 64];
	snprintf(folder, sizeof(folder), "%s%s%s", dir, name[0] ? "/" : "",
	    name);
	if (pti_mkdir_p(folder) != 0)
		return pti_err_set(PT_EIO, "--tensorboard %s: %s", folder,
		    strerror(errno));
	snprintf(r->path, sizeof(r->path),
	    "%s/events.out.tfevents.%.0f.pstrain.%ld", folder, floor(now),
	    (long)getpid());
	if ((r->f = fopen(r->path, "wb")) == NULL)
		return pti_err_set(PT_EIO, "--tensorboard %s: %s", r->path,
		    strerror(errno));
	pb ev = {{0}, 0};
	static const char version[] = "brain.Event:2";
	pb_double(&ev, 1, now);
	pb_bytes(&ev, 3, version, sizeof(version) - 1);
	tb_record(r, &ev);
	return 0;
}

int pti_tb_open(pti_tb **out, const char *dir, const char *job_out,
    uint32_t workers, double t0, const pti_config *c)
{
	crc_init();
	pti_tb *tb = calloc(1, sizeof(*tb));
	if (tb == NULL || (tb->runs = calloc(workers + 2,
			       sizeof(*tb->runs))) == NULL) {
		free(tb);
		return pti_err_set(PT_ENOMEM, "--tensorboard");
	}
	snprintf(tb->out, sizeof(tb->out), "%s", job_out);
	tb->workers = workers;
	tb->t0 = t0;
	for (uint32_t r = 0; r <= workers + 1; r++) {
		char name[32];
		if (r < workers)
			snprintf(name, sizeof(name), "worker-%u", r);
		else
			snprintf(name, sizeof(name), r == workers ? "eval" : "");
		int rv = tb_run_open(&tb->runs[r], dir, name, t0);
		if (rv != 0) {
			pti_tb_close(tb);
			return rv;
		}
	}
	tb_session_start(&tb->runs[workers + 1], c, t0);
	*out = tb;
	return 0;
}

// Worker runs: these columns of worker-R.csv, after step and wall_s.
static const char *const tb_worker_cols[] = {"step", "wall_s", "loss",
    "grad_norm", "step_ms", "compute_ms", "comm_ms", "staleness", "lr"};
#define TB_WCOLS 9
// The eval run: eval.csv's validation columns, or its test ones, on the
// workers' step axis (worker 0's steps at the evaluation, worker_step:
// in async and ssp eval.csv's step is the parameters' version, about W
// times as far along).
static const char *const tb_eval_cols[] = {"worker_step", "wall_s",
    "val_loss", "val_acc", "test_loss", "test_acc"};
#define TB_ECOLS 6

// tb_flush flushes run r: PT_EIO naming its file when a write failed.
static int tb_flush(tb_run *r)
{
	if (fflush(r->f) != 0 && r->err == 0)
		r->err = errno;
	if (r->err != 0)
		return pti_err_set(PT_EIO, "--tensorboard %s: %s", r->path,
		    strerror(r->err));
	return 0;
}

// tb_rows appends the rows of path past those written (cols[0] the
// step, cols[1] wall_s, the rest scalars named as their columns).
static int tb_rows(pti_tb *tb, tb_run *r, const char *path,
    const char *const *cols, int n)
{
	pti_csv t;
	if (pti_csv_read(path, 0, cols, n, &t) != 0)
		return pti_err_set(PT_ENOMEM, "--tensorboard");
	for (size_t i = r->rows; i < t.n_rows; i++) {
		const double *v = t.v + i * (size_t)n;
		if (isnan(v[0]))
			continue;
		tb_scalars(r, tb->t0 + (isnan(v[1]) ? 0 : v[1]),
		    (int64_t)v[0], cols + 2, v + 2, n - 2);
	}
	if (t.n_rows > r->rows)
		r->rows = t.n_rows;
	free(t.v);
	return tb_flush(r);
}

int pti_tb_update(pti_tb *tb)
{
	char path[PT_PATH_MAX + 32];
	int rv;
	for (uint32_t r = 0; r < tb->workers; r++) {
		snprintf(path, sizeof(path), "%s/worker-%u.csv", tb->out, r);
		if ((rv = tb_rows(tb, &tb->runs[r], path, tb_worker_cols,
			 TB_WCOLS)) != 0)
			return rv;
	}
	snprintf(path, sizeof(path), "%s/eval.csv", tb->out);
	return tb_rows(tb, &tb->runs[tb->workers], path, tb_eval_cols,
	    TB_ECOLS);
}

// The job's final scores (summary.json keys) the session run ends with.
static const char *const tb_final_keys[] = {"final_test_acc",
    "final_test_loss", "final_train_acc", "final_train_loss",
    "final_val_acc", "best_val_acc", "best_val_test_acc", "final_test_auc",
    "best_val_test_auc", "train_s", "samples_per_s", "step_ms_median",
    "idle_fraction", "mean_staleness"};
#define TB_FINALS (sizeof(tb_final_keys) / sizeof(tb_final_keys[0]))

int pti_tb_finish(pti_tb *tb, int done, uint64_t steps)
{
	char path[PT_PATH_MAX + 32];
	tb_run *r = &tb->runs[tb->workers + 1];
	double v[TB_FINALS], now = pti_wall_s();
	snprintf(path, sizeof(path), "%s/summary.json", tb->out);
	json_t *sum = done ? pti_json_load(path) : NULL;
	for (size_t i = 0; i < TB_FINALS; i++)
		v[i] = pti_json_num(sum, tb_final_keys[i]);
	if (sum != NULL)
		tb_scalars(r, now, (int64_t)steps, tb_final_keys, v,
		    (int)TB_FINALS);
	json_decref(sum);
	static pb end;
	end.n = 0;
	pb_varint(&end, 1 << 3 | 0);
	pb_varint(&end, done ? 1 : 2); // STATUS_SUCCESS, STATUS_FAILURE
	pb_double(&end, 2, now);
	tb_hparams(r, now, "_hparams_/session_end_info", 4, &end);
	return tb_flush(r);
}

int pti_tb_write(const pti_config *c, int done, uint64_t steps)
{
	pti_tb *tb;
	double t0 = c->job.t0 > 0 ? c->job.t0 : pti_wall_s();
	int rv = pti_tb_open(&tb, c->job.tensorboard, c->job.out,
	    c->job.workers, t0, c);
	if (rv != 0)
		return rv;
	if ((rv = pti_tb_update(tb)) == 0)
		rv = pti_tb_finish(tb, done, steps);
	pti_tb_close(tb);
	return rv;
}

void pti_tb_close(pti_tb *tb)
{
	if (tb == NULL)
		return;
	for (uint32_t r = 0; tb->runs != NULL && r <= tb->workers + 1; r++)
		if (tb->runs[r].f != NULL)
			fclose(tb->runs[r].f);
	free(tb->runs);
	free(tb);
}
