// cli/dash/dashprom.h - the dashboard's /metrics, from a view of its
// jobs (view.h) and their files. Reads files only; any thread.
#ifndef PT_CLI_DASH_DASHPROM_H
#define PT_CLI_DASH_DASHPROM_H

#include "cli/dash/dbuf.h"
#include "cli/dash/view.h"

// pti_dash_prom writes /metrics of v into b (Prometheus's text format);
// b->failed tells whether memory ran out.
void pti_dash_prom(pti_dbuf *b, const pti_dash_view *v);

#endif // PT_CLI_DASH_DASHPROM_H
