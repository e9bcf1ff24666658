// cli/dash.h - a running job seen over HTTP, served by the launcher with
// nng's HTTP server: /metrics in Prometheus's text format, read from the
// job's files (worker-R.csv, eval.csv) at each request, plus the
// launcher's counts of lost and restarted processes. Read-only, and off
// the servers' and workers' path. Not yet: the page with charts, and
// compare's view (issue "Watching a job live").
#ifndef PT_CLI_DASH_H
#define PT_CLI_DASH_H

#include <stddef.h>
#include <stdint.h>

typedef struct pti_dash pti_dash;

// pti_dash_open serves the job whose files are in dir (workers of them)
// on http://listen ("HOST:PORT"; port 0 picks a free one) and writes
// the address it serves at into url (size n). Returns 0 and *out (the
// caller's, to pti_dash_close); PT_EINVAL naming listen when it is not
// HOST:PORT; PT_ETRANSPORT naming it when nng cannot serve there;
// PT_ENOMEM.
int pti_dash_open(pti_dash **out, const char *listen, const char *dir,
    uint32_t workers, char *url, size_t n);

// pti_dash_counts sets the launcher's counts that /metrics reports;
// from the launcher's thread, while requests are served on nng's.
void pti_dash_counts(pti_dash *d, uint32_t workers_lost,
    uint32_t worker_restarts, uint32_t server_restarts);

// pti_dash_close stops serving and frees d; NULL is fine.
void pti_dash_close(pti_dash *d);

#endif // PT_CLI_DASH_H
