// cli/dash/web.h - the dashboard's page: its files (cli/dash/web/),
// compiled into build/web.c by scripts/embed.sh, and Debian's Chart.js,
// which the page loads from /chart.js. Constant data, safe from any
// thread.
#ifndef PT_CLI_DASH_WEB_H
#define PT_CLI_DASH_WEB_H

#include <stddef.h>

// Debian's Chart.js (libjs-chart.js), served at /chart.js; the Makefile
// may name another file.
#ifndef PT_CHARTJS
#define PT_CHARTJS "/usr/share/javascript/chart.js/chart.min.js"
#endif

// One file of the page, compiled in (build/web.c); the table ends with a
// NULL name.
typedef struct pti_web_file {
	const char *name; // "index.html", "dash.js", ...
	const unsigned char *data;
	size_t len;
} pti_web_file;
extern const pti_web_file pti_web_files[];

#endif // PT_CLI_DASH_WEB_H
