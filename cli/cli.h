// cli/cli.h - the subcommands of bin/pstrain, each a function that takes
// the arguments after its name and returns the process's exit status.
#ifndef PT_CLI_CLI_H
#define PT_CLI_CLI_H

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

// pti_cli_config parses and checks the flags of cmd into c, printing
// --help or an error. Returns -1 to go on, else the exit status.
struct pt_config;
int pti_cli_config(struct pt_config *c, unsigned cmd, const char *name,
    const char *usage, int argc, char **argv);


// pti_self_exe returns the path to execute to start this same binary as
// a child: "/proc/self/exe", or under valgrind (where that is valgrind's
// tool) the program's own path. Points to a static buffer; call it from
// one thread, e.g. in the child after fork.
const char *pti_self_exe(void);

#endif // PT_CLI_CLI_H
