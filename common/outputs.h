// common/outputs.h - the CSV files a job writes (docs/OUTPUTS.md), each
// defined once: its columns in order, by name, with the printf format of
// each value. Writers print the header and rows from the table; readers
// find the columns by name in the file's header, so a file of an older
// version, without a column added since, still reads (as NaN there).
#ifndef PT_COMMON_OUTPUTS_H
#define PT_COMMON_OUTPUTS_H

#include <stddef.h>
#include <stdio.h>

typedef struct pti_column {
	const char *name;
	const char *fmt; // of one double
} pti_column;

typedef struct pti_table {
	const pti_column *cols;
	int n;
} pti_table;

// worker-R.csv: one row per step a worker computed.
enum {
	PTI_WK_STEP, PTI_WK_EPOCH, PTI_WK_WALL, PTI_WK_LOSS, PTI_WK_GRAD_NORM,
	PTI_WK_STEP_MS, PTI_WK_COMPUTE_MS, PTI_WK_COMM_MS, PTI_WK_STALENESS,
	PTI_WK_LR, PTI_WK_DELAY_MS, PTI_WK_VERSION, PTI_WK_FAULTS,
	PTI_WK_RSS_MB, PTI_WK_TX_BYTES, PTI_WK_RX_BYTES, PTI_WK_ROWS, PTI_WK_N
};
extern const pti_table pti_csv_worker;

// eval.csv: one row per evaluation, on the validation set (val_loss,
// val_acc, val_auc) or, without one, on the test set (test_loss,
// test_acc, test_auc). AUCs are a click model's; nan for the others.
enum {
	PTI_EV_VERSION, PTI_EV_WALL, PTI_EV_LOSS, PTI_EV_ACC, PTI_EV_WSTEP,
	PTI_EV_EVAL_S, PTI_EV_AUC, PTI_EV_N
};
extern const pti_table pti_csv_eval_val, pti_csv_eval_test;

// final.csv: the finishing worker's last evaluation, one row.
enum {
	PTI_FN_VERSION, PTI_FN_STEPS, PTI_FN_TRAIN_S, PTI_FN_TRAIN_LOSS,
	PTI_FN_TRAIN_ACC, PTI_FN_TEST_LOSS, PTI_FN_TEST_ACC, PTI_FN_VAL_LOSS,
	PTI_FN_VAL_ACC, PTI_FN_BEST_VAL_ACC, PTI_FN_BEST_VAL_STEP,
	PTI_FN_BEST_VAL_VERSION, PTI_FN_BEST_VAL_TEST_LOSS,
	PTI_FN_BEST_VAL_TEST_ACC, PTI_FN_EVAL_WAIT_S, PTI_FN_TRAIN_AUC,
	PTI_FN_TEST_AUC, PTI_FN_BEST_VAL_TEST_AUC, PTI_FN_PLANTED_AUC, PTI_FN_N
};
extern const pti_table pti_csv_final;

// staleness.csv: updates applied at each staleness, over every server.
enum { PTI_ST_STALENESS, PTI_ST_COUNT, PTI_ST_N };
extern const pti_table pti_csv_staleness;

// PTI_COL(t, i) is table t's name of column i, for a reader's want list.
#define PTI_COL(t, i) ((t).cols[i].name)

// pti_csv_header writes t's header line; pti_csv_row one row of values
// v (t->n of them, in column order), each in its column's format.
void pti_csv_header(FILE *f, const pti_table *t);
void pti_csv_row(FILE *f, const pti_table *t, const double *v);

// pti_csv_open starts dir/name with the header of table t or, with
// append set (a resumed or restarted worker), adds to what is there.
// NULL with PT_EIO naming the file when it cannot be opened.
FILE *pti_csv_open(const char *dir, const char *name, const pti_table *t,
    int append);

// pti_csv_sent flushes f, dir/name, and closes it when close is set:
// 0, or PT_EIO naming the file and the system's error when a write
// failed (a full disk), so that no record goes missing unsaid.
int pti_csv_sent(FILE *f, const char *dir, const char *name, int close);

#define PTI_CSV_COLS 24 // columns one read may want, at most

typedef struct pti_csv {
	double *v;              // n_rows x n_cols, row-major
	int have[PTI_CSV_COLS]; // per wanted column: found in the header
	size_t n_rows;
	int n_cols;
} pti_csv;

// pti_csv_read reads the columns named in want (at most PTI_CSV_COLS) of
// a CSV file with a header line into t, from byte offset `from` on (0:
// every row; a later offset skips the rows before it, as long as the
// file is that long, else every row is read). The caller frees t->v. A
// missing file gives no rows; a missing column has have[i] == 0 and reads
// as NaN, as does a cell that is not a number; a header or a last row
// without its newline (still being written) is left out. Returns 0, or -1 only when
// out of memory.
int pti_csv_read(const char *path, long from, const char *const *want,
    int n_want, pti_csv *t);

// Where pti_csv_read_at reads from, how much, and where it got to.
typedef struct pti_csv_at {
	long from;       // byte offset to read from, as pti_csv_read's
	int row_start;   // take `from` only where a row starts there, else
			 // read from the first row (for offsets handed out)
	size_t max_rows; // at most this many rows (SIZE_MAX: all)
	long start, next; // out: the rows read begin and end here (0, 0
			  // when there is no file or no header yet)
	int more;         // out: complete rows were left past max_rows
} pti_csv_at;

// pti_csv_read_at is pti_csv_read with the choices and results of *at:
// the dashboard hands out next and takes it back as from.
int pti_csv_read_at(const char *path, const char *const *want, int n_want,
    pti_csv_at *at, pti_csv *t);

// pti_csv_read_table reads every column of table tb, by name, into t
// (n_cols = tb->n, in tb's order). As pti_csv_read.
int pti_csv_read_table(const char *path, long from, const pti_table *tb,
    pti_csv *t);

// pti_csv_fields reads one row, written from a table of n columns, into
// v. Returns 0, or -1 when it has fewer than n numbers.
int pti_csv_fields(const char *line, double *v, int n);

// pti_json_str is s as a JSON string for jansson (which takes UTF-8
// only): bytes that are not valid UTF-8 (a path in another encoding)
// become '?'. NULL s gives JSON null.
struct json_t;
struct json_t *pti_json_str(const char *s);

#endif // PT_COMMON_OUTPUTS_H
