// cli/dash/overview.h - a worker-R.csv in few rows for the dashboard's
// first look at it: the rows a chart needs to draw the file's lines as
// they are (the lowest and the highest of each drawn column in each of
// `points` / 2 runs of rows, the first and the last row), what the page
// computes from every row (step-time sums, the staleness histogram, the
// dropped gradients) summed over all of them, and each row's index in
// the file. docs/OUTPUTS.md describes the JSON.
#ifndef PT_CLI_DASH_OVERVIEW_H
#define PT_CLI_DASH_OVERVIEW_H

#include <stddef.h>

#include "cli/dash/dbuf.h"
#include "common/outputs.h"

// The worker-R.csv columns /data.json sends, in this order.
enum { PTI_DW_STEP, PTI_DW_WALL, PTI_DW_LOSS, PTI_DW_GRAD_NORM,
    PTI_DW_STEP_MS, PTI_DW_COMPUTE_MS, PTI_DW_COMM_MS, PTI_DW_STALENESS,
    PTI_DW_LR, PTI_DW_VERSION, PTI_DW_N };

#define PTI_DASH_POINTS_MAX 20000 // ?points= at most
#define PTI_DASH_STALE_BINS 64    // staleness 0..62 and "63 and above"

// pti_dash_overview writes every row of t (columns PTI_DW_*, read at at)
// as one part of /data.json, {"from", "next", "more", "drawn", "rows",
// "index", "agg"}. drawn: the page draws this file's lines, so its rows are thinned
// to keep about `points` points of each line; else (a worker whose rows
// only feed the sums) about points / 8 rows at even intervals, which the
// page needs to place the file's rows in time.
void pti_dash_overview(pti_dbuf *b, const pti_csv_at *at, const pti_csv *t,
    size_t points, int drawn);

#endif // PT_CLI_DASH_OVERVIEW_H
