// cli/cli.h - the subcommands of bin/pstrain, each a function that takes
// the arguments after its name and returns the process's exit status.
#ifndef PT_CLI_CLI_H
#define PT_CLI_CLI_H

#include <stddef.h>
#include <stdint.h>

// Exit statuses of every subcommand (README, "Exit status").
enum {
	PTI_EXIT_OK = 0,
	PTI_EXIT_FAIL = 1,      // a process failed, or the job could not run
	PTI_EXIT_USAGE = 2,     // a bad flag or value, named on stderr
	PTI_EXIT_DIVERGED = 3,  // training diverged: a result, with a summary
	PTI_EXIT_SIGNAL = 130,  // stopped by SIGINT or SIGTERM
};

int pti_cmd_run(int argc, char **argv);
int pti_cmd_server(int argc, char **argv);
int pti_cmd_worker(int argc, char **argv);
int pti_cmd_eval(int argc, char **argv);
int pti_cmd_compare(int argc, char **argv);
int pti_cmd_secret(int argc, char **argv);
int pti_cmd_node(int argc, char **argv);
int pti_cmd_dashboard(int argc, char **argv); // cli/dash/dashcmd.c

// pti_cli_config parses and checks the flags of cmd into c, printing
// --help or an error. Returns -1 to go on, else the exit status.
struct pt_config;
int pti_cli_config(struct pt_config *c, unsigned cmd, const char *name,
    const char *usage, int argc, char **argv);
// pti_cli_finish is the part after parsing: the cluster file, the checks
// of cmd's flags, defaults that depend on others, the TLS files. Returns
// -1 to go on, else the exit status (after saying why as `name`).
int pti_cli_finish(struct pt_config *c, unsigned cmd, const char *name);


// progress.c: the progress line of a job ("step 120/2340  epoch 1 ...")
// from the last complete row of a worker's CSV. pti_csv_last_row reads
// that row's step, wall_s and loss (-1 when there is none yet).
typedef struct pti_progress {
	char csv[1024 + 32]; // the worker's CSV (PT_PATH_MAX + a name)
	uint64_t steps, spe; // the job's global steps, steps per epoch
	uint32_t batch;      // global batch
	double t0;           // the job's start, seconds since 1970
	int tty;             // stderr is a terminal: redraw one line
} pti_progress;
int pti_csv_last_row(const char *path, uint64_t *step, double *wall,
    double *loss);
void pti_progress_print(const pti_progress *p, double now, int final);

// pti_cmdline writes "pstrain CMD ARGS" into out (size n), quoting each
// argument that a shell would split or expand: the run record's.
void pti_cmdline(char *out, size_t n, const char *cmd, int argc,
    char **argv);

// pti_serve and pti_work run this process as one server or one worker
// of the job that c (parsed and checked) describes; each returns the
// exit status. Without --supervised they do what pstrain run would
// have: --out created, worker 0's progress line, the finishing worker's
// summary.json (docs/OUTPUTS.md).
// publish (may be NULL) is a file to write the server's address to once
// it listens (pstrain node's rendezvous).
int pti_serve(struct pt_config *c, const char *publish);
int pti_work(struct pt_config *c, const char *cmdline);

// pti_self_exe returns the path to execute to start this same binary as
// a child: "/proc/self/exe", or under valgrind (where that is valgrind's
// tool) the program's own path. Points to a static buffer; call it from
// one thread, e.g. in the child after fork.
const char *pti_self_exe(void);

// pti_on_stop_signals has SIGINT and SIGTERM call handler, without
// SA_RESTART: a blocking call they interrupt returns EINTR.
void pti_on_stop_signals(void (*handler)(int));

#endif // PT_CLI_CLI_H
