// cli/dash/dashjson.h - the dashboard's /data.json, from a view of its
// jobs (view.h) and their files. Reads files only; any thread.
#ifndef PT_CLI_DASH_DASHJSON_H
#define PT_CLI_DASH_DASHJSON_H

#include "cli/dash/dbuf.h"
#include "cli/dash/view.h"

// pti_dash_json writes /data.json of v into b; query is the request's
// query string after '?' (may be NULL). PT_EINVAL naming what in it is
// malformed (the request gets 400); else 0, b->failed telling whether
// memory ran out.
int pti_dash_json(pti_dbuf *b, const pti_dash_view *v, const char *query);

#endif // PT_CLI_DASH_DASHJSON_H
