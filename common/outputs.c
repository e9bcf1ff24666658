// common/outputs.c - the job's CSV files, defined once (outputs.h).
#include "common/outputs.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <jansson.h>

#include "common/err.h"
#include "common/jobopt.h"

#define COUNT(a) ((int)(sizeof(a) / sizeof((a)[0])))

static const pti_column worker_cols[] = {
    {"step", "%.0f"}, {"epoch", "%.0f"}, {"wall_s", "%.3f"},
    {"loss", "%.6f"}, {"grad_norm", "%.6f"}, {"step_ms", "%.3f"},
    {"compute_ms", "%.3f"}, {"comm_ms", "%.3f"}, {"staleness", "%.0f"},
    {"lr", "%.6g"}, {"delay_ms", "%.3f"}, {"version", "%.0f"},
    {"minor_faults", "%.0f"}, {"max_rss_mb", "%.1f"},
    {"tx_bytes", "%.0f"}, {"rx_bytes", "%.0f"}, {"rows", "%.0f"},
};
const pti_table pti_csv_worker = {worker_cols, COUNT(worker_cols)};

static const pti_column eval_val_cols[] = {
    {"step", "%.0f"}, {"wall_s", "%.3f"}, {"val_loss", "%.6f"},
    {"val_acc", "%.4f"}, {"worker_step", "%.0f"}, {"eval_s", "%.4f"},
    {"val_auc", "%.4f"},
};
static const pti_column eval_test_cols[] = {
    {"step", "%.0f"}, {"wall_s", "%.3f"}, {"test_loss", "%.6f"},
    {"test_acc", "%.4f"}, {"worker_step", "%.0f"}, {"eval_s", "%.4f"},
    {"test_auc", "%.4f"},
};
const pti_table pti_csv_eval_val = {eval_val_cols, COUNT(eval_val_cols)};
const pti_table pti_csv_eval_test = {eval_test_cols, COUNT(eval_test_cols)};

static const pti_column final_cols[] = {
    {"version", "%.0f"}, {"steps", "%.0f"}, {"train_s", "%.3f"},
    {"train_loss", "%.6f"}, {"train_acc", "%.4f"}, {"test_loss", "%.6f"},
    {"test_acc", "%.4f"}, {"val_loss", "%.6f"}, {"val_acc", "%.4f"},
    {"best_val_acc", "%.4f"}, {"best_val_step", "%.0f"},
    {"best_val_version", "%.0f"}, {"best_val_test_loss", "%.6f"},
    {"best_val_test_acc", "%.4f"}, {"eval_wait_s", "%.3f"},
    {"train_auc", "%.4f"}, {"test_auc", "%.4f"},
    {"best_val_test_auc", "%.4f"}, {"planted_auc", "%.4f"},
};
const pti_table pti_csv_final = {final_cols, COUNT(final_cols)};
_Static_assert(COUNT(final_cols) == PTI_FN_N && PTI_FN_N <= PTI_CSV_COLS,
    "final.csv's columns must all fit one read");

static const pti_column staleness_cols[] = {
    {"staleness", "%.0f"}, {"count", "%.0f"},
};
const pti_table pti_csv_staleness = {staleness_cols, COUNT(staleness_cols)};

void pti_csv_header(FILE *f, const pti_table *t)
{
	for (int i = 0; i < t->n; i++)
		fprintf(f, "%s%s", i ? "," : "", t->cols[i].name);
	fputc('\n', f);
}

FILE *pti_csv_open(const char *dir, const char *name, const pti_table *t,
    int append)
{
	char path[PT_PATH_MAX + 64];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	FILE *f = fopen(path, append ? "a" : "w");
	if (f == NULL) {
		pti_err_set(PT_EIO, "%s: %s", path, strerror(errno));
		return NULL;
	}
	if (ftell(f) == 0)
		pti_csv_header(f, t);
	return f;
}

int pti_csv_sent(FILE *f, const char *dir, const char *name, int close)
{
	int bad = fflush(f) != 0 || ferror(f);
	int e = errno;
	if (close && fclose(f) != 0 && !bad)
		bad = 1, e = errno;
	return bad ? pti_err_set(PT_EIO, "%s/%s: %s", dir, name, strerror(e))
		   : 0;
}

void pti_csv_row(FILE *f, const pti_table *t, const double *v)
{
	for (int i = 0; i < t->n; i++) {
		if (i)
			fputc(',', f);
		fprintf(f, t->cols[i].fmt, v[i]);
	}
	fputc('\n', f);
}

int pti_csv_fields(const char *line, double *v, int n)
{
	const char *p = line;
	for (int i = 0; i < n; i++) {
		char *end;
		v[i] = strtod(p, &end);
		if (end == p || (i + 1 < n && *end != ','))
			return -1;
		p = end + 1;
	}
	return 0;
}

int pti_csv_read_at(const char *path, const char *const *want, int n_want,
    pti_csv_at *at, pti_csv *t)
{
	char *line = NULL;
	size_t cap = 0, room = 0;
	int idx[64], n_idx = 0;
	struct stat sb;
	memset(t, 0, sizeof(*t));
	t->n_cols = n_want;
	at->start = at->next = 0;
	at->more = 0;
	FILE *f = fopen(path, "r");
	if (f == NULL)
		return 0;
	ssize_t len = getline(&line, &cap, f);
	if (len <= 0 || line[len - 1] != '\n' || fstat(fileno(f), &sb) != 0)
		goto out; // no header yet, or one still being written
	long start = (long)len;
	line[strcspn(line, "\r\n")] = '\0';
	// strtok_r: the dashboard reads on nng's threads while the launcher
	// reads on its own.
	for (char *save = NULL, *tok = strtok_r(line, ",", &save);
	    tok != NULL && n_idx < 64; tok = strtok_r(NULL, ",", &save)) {
		idx[n_idx] = -1;
		for (int k = 0; k < n_want; k++)
			if (strcmp(tok, want[k]) == 0) {
				idx[n_idx] = k;
				t->have[k] = 1;
			}
		n_idx++;
	}
	if (at->row_start) {
		// Only where a row starts; else (a file made afresh, a
		// made-up number) from the first row.
		if (at->from > start && at->from <= (long)sb.st_size &&
		    fseek(f, at->from - 1, SEEK_SET) == 0 && fgetc(f) == '\n')
			start = at->from;
	} else if (at->from > 0 && sb.st_size >= at->from) {
		// The rows of the job that began there (a file shorter than
		// it was started afresh: all of it is that job's).
		start = at->from;
	}
	if (fseek(f, start, SEEK_SET) != 0)
		goto out;
	at->start = at->next = start;
	while ((len = getline(&line, &cap, f)) > 0) {
		if (line[len - 1] != '\n')
			break; // a row still being written
		if (t->n_rows == at->max_rows) {
			at->more = 1;
			break;
		}
		if (t->n_rows == room) {
			room = room ? 2 * room : 256;
			double *v = realloc(t->v, room * n_want * sizeof(double));
			if (v == NULL) {
				free(line);
				fclose(f);
				free(t->v);
				t->v = NULL;
				return -1;
			}
			t->v = v;
		}
		double *row = t->v + t->n_rows * n_want;
		for (int k = 0; k < n_want; k++)
			row[k] = NAN;
		char *q = line;
		for (int c = 0; c < n_idx && *q != '\0'; c++) {
			char *end;
			double x = strtod(q, &end);
			if (idx[c] >= 0 && end != q && *end != '\n' &&
			    *end != ',' && *end != '\r')
				x = NAN; // not a number followed by its comma
			if (idx[c] >= 0 && end != q)
				row[idx[c]] = x;
			q += strcspn(q, ",\n");
			if (*q == ',')
				q++;
		}
		t->n_rows++;
		at->next += (long)len;
	}
out:
	free(line);
	fclose(f);
	return 0;
}

int pti_csv_read(const char *path, long from, const char *const *want,
    int n_want, pti_csv *t)
{
	pti_csv_at at = {.from = from, .max_rows = SIZE_MAX};
	return pti_csv_read_at(path, want, n_want, &at, t);
}

int pti_csv_read_table(const char *path, long from, const pti_table *tb,
    pti_csv *t)
{
	const char *names[PTI_CSV_COLS];
	for (int i = 0; i < tb->n && i < PTI_CSV_COLS; i++)
		names[i] = tb->cols[i].name;
	return pti_csv_read(path, from, names,
	    tb->n < PTI_CSV_COLS ? tb->n : PTI_CSV_COLS, t);
}

json_t *pti_json_str(const char *s)
{
	if (s == NULL)
		return json_null();
	json_t *j = json_string(s);
	if (j != NULL)
		return j;
	// Not UTF-8: keep ASCII, mark the rest.
	size_t n = strlen(s);
	char *t = malloc(n + 1);
	if (t == NULL)
		return json_null();
	for (size_t i = 0; i <= n; i++)
		t[i] = (unsigned char)s[i] < 0x80 ? s[i] : '?';
	j = json_string(t);
	free(t);
	return j != NULL ? j : json_null();
}
