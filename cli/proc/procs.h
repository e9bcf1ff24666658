// cli/proc/procs.h - one server or one worker of a job, as `pstrain
// server`, `pstrain worker` and `pstrain node` run it in this process.
#ifndef PT_CLI_PROC_PROCS_H
#define PT_CLI_PROC_PROCS_H

struct pti_config;

// pti_serve and pti_work run this process as one server or one worker
// of the job that c (parsed and checked) describes; each returns the
// exit status. Without --supervised they do what pstrain run would
// have: --out created, worker 0's progress line, the finishing worker's
// summary.json (docs/OUTPUTS.md).
// publish (may be NULL) is a file to write the server's address to once
// it listens (pstrain node's rendezvous).
int pti_serve(struct pti_config *c, const char *publish);
int pti_work(struct pti_config *c, const char *cmdline);

#endif // PT_CLI_PROC_PROCS_H
