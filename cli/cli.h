// cli/cli.h - the subcommands of bin/pstrain, each a function that takes
// the arguments after its name and returns the process's exit status.
#ifndef PT_CLI_CLI_H
#define PT_CLI_CLI_H

// Exit statuses of every subcommand (docs/USAGE.md, "Exit status").
enum {
	PTI_EXIT_OK = 0,
	PTI_EXIT_FAIL = 1,      // a process failed, or the job could not run
	PTI_EXIT_USAGE = 2,     // a bad flag or value, named on stderr
	PTI_EXIT_DIVERGED = 3,  // training diverged: a result, with a summary
	PTI_EXIT_SIGNAL = 128,  // + the signal's number: stopped by SIGINT
				// (130) or SIGTERM (143), as a shell says
};

int pti_cmd_run(int argc, char **argv);       // cli/run/run.c
int pti_cmd_server(int argc, char **argv);    // cli/proc/procs.c
int pti_cmd_worker(int argc, char **argv);    // cli/proc/procs.c
int pti_cmd_eval(int argc, char **argv);      // cli/proc/procs.c
int pti_cmd_compare(int argc, char **argv);   // cli/compare/compare.c
int pti_cmd_secret(int argc, char **argv);    // cli/proc/procs.c
int pti_cmd_node(int argc, char **argv);      // cli/proc/node.c
int pti_cmd_dashboard(int argc, char **argv); // cli/dash/dashcmd.c

#endif // PT_CLI_CLI_H
