// tests/outputs_test.c - the output files' single definitions: what a
// writer prints from a column table, a reader finds by name, in files of
// this version and of older ones, from a byte offset on.
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "common/outputs.h"
#include "tests/test.h"

static char dir[512], path[600];

static void setup(const char *name)
{
	PT_TEST_TRUE(pti_test_tmpdir(dir, sizeof(dir), "pt-out") == 0);
	snprintf(path, sizeof(path), "%s/%s", dir, name);
}

// A row written from the worker table reads back, column by column, by
// the names of that table, in any order asked.
static void test_outputs_roundtrip_by_name(void)
{
	setup("worker-0.csv");
	FILE *f = fopen(path, "w");
	double v[PTI_WK_N];
	for (int i = 0; i < PTI_WK_N; i++)
		v[i] = i + 0.5;
	v[PTI_WK_STEP] = 7;
	pti_csv_header(f, &pti_csv_worker);
	pti_csv_row(f, &pti_csv_worker, v);
	fclose(f);
	const char *want[] = {PTI_COL(pti_csv_worker, PTI_WK_COMM_MS),
	    PTI_COL(pti_csv_worker, PTI_WK_STEP), "no_such_column"};
	pti_csv t;
	PT_TEST_OK(pti_csv_read(path, 0, want, 3, &t));
	PT_TEST_TRUE(t.n_rows == 1 && t.have[0] && t.have[1] && !t.have[2]);
	PT_TEST_NEAR(t.v[0], v[PTI_WK_COMM_MS], 1e-3);
	PT_TEST_NEAR(t.v[1], 7, 0);
	PT_TEST_TRUE(t.v[2] != t.v[2]); // NaN
	free(t.v);
	pti_csv all;
	PT_TEST_OK(pti_csv_read_table(path, 0, &pti_csv_worker, &all));
	PT_TEST_TRUE(all.n_cols == PTI_WK_N && all.n_rows == 1);
	PT_TEST_NEAR(all.v[PTI_WK_LR], v[PTI_WK_LR], 1e-6);
	free(all.v);
	pti_test_rmdir(dir);
}

// A final.csv of an older version, without the validation columns and in
// another order, reads by name; what it lacks is NaN. A row still being
// written (no newline) is left out.
static void test_outputs_older_file(void)
{
	setup("final.csv");
	FILE *f = fopen(path, "w");
	fprintf(f, "steps,version,train_s,train_loss,train_acc,test_loss,"
		   "test_acc\n40,41,1.5,0.3,0.9,0.4,0.88\n12,13");
	fclose(f);
	pti_csv t;
	PT_TEST_OK(pti_csv_read_table(path, 0, &pti_csv_final, &t));
	PT_TEST_TRUE(t.n_rows == 1);
	PT_TEST_NEAR(t.v[PTI_FN_VERSION], 41, 0);
	PT_TEST_NEAR(t.v[PTI_FN_STEPS], 40, 0);
	PT_TEST_NEAR(t.v[PTI_FN_TEST_ACC], 0.88, 1e-9);
	PT_TEST_TRUE(!t.have[PTI_FN_VAL_ACC]);
	PT_TEST_TRUE(t.v[PTI_FN_VAL_ACC] != t.v[PTI_FN_VAL_ACC]);
	free(t.v);
	pti_test_rmdir(dir);
}

// From a byte offset: only the rows after it (a resumed job's own), the
// header still found at the top; an offset past the end (a file started
// afresh) reads every row.
static void test_outputs_from_offset(void)
{
	setup("eval.csv");
	FILE *f = fopen(path, "w");
	double a[PTI_EV_N] = {1, 1, 1, 0.5, 1, 0.1};
	double b[PTI_EV_N] = {2, 2, 1, 0.6, 2, 0.1};
	pti_csv_header(f, &pti_csv_eval_val);
	pti_csv_row(f, &pti_csv_eval_val, a);
	long mid = ftell(f);
	pti_csv_row(f, &pti_csv_eval_val, b);
	fclose(f);
	const char *want[] = {PTI_COL(pti_csv_eval_val, PTI_EV_VERSION)};
	pti_csv t;
	PT_TEST_OK(pti_csv_read(path, mid, want, 1, &t));
	PT_TEST_TRUE(t.n_rows == 1 && t.v[0] == 2);
	free(t.v);
	PT_TEST_OK(pti_csv_read(path, 100000, want, 1, &t));
	PT_TEST_TRUE(t.n_rows == 2);
	free(t.v);
	pti_test_rmdir(dir);
}

// Strings that are not UTF-8 still make valid JSON.
static void test_outputs_json_str_not_utf8(void)
{
	json_t *j = pti_json_str("runs/caf\xe9");
	PT_TEST_TRUE(json_is_string(j));
	PT_TEST_TRUE(strcmp(json_string_value(j), "runs/caf?") == 0);
	json_decref(j);
	j = pti_json_str(NULL);
	PT_TEST_TRUE(json_is_null(j));
	json_decref(j);
}

static const pti_test_case cases[] = {
    {"test_outputs_roundtrip_by_name", test_outputs_roundtrip_by_name},
    {"test_outputs_older_file", test_outputs_older_file},
    {"test_outputs_from_offset", test_outputs_from_offset},
    {"test_outputs_json_str_not_utf8", test_outputs_json_str_not_utf8},
    {NULL, NULL},
};

int main(int argc, char **argv)
{
	return pti_test_main(argc, argv, cases);
}
