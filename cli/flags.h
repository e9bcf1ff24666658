// cli/flags.h - a subcommand's flags, read through the one flag table
// (common/config.h) with --help and errors said as `pstrain NAME`, and
// its command line written back for the run record. What `pstrain run`,
// compare, server, worker, eval and node share; from one thread.
#ifndef PT_CLI_FLAGS_H
#define PT_CLI_FLAGS_H

#include <stddef.h>

struct pti_config;

// pti_cli_config parses and checks the flags of cmd into c, printing
// --help or an error. Returns -1 to go on, else the exit status.
int pti_cli_config(struct pti_config *c, unsigned cmd, const char *name,
    const char *usage, int argc, char **argv);

// pti_cli_finish is the part after parsing: the cluster file, the checks
// of cmd's flags, defaults that depend on others, the TLS files. Returns
// -1 to go on, else the exit status (after saying why as `name`).
int pti_cli_finish(struct pti_config *c, unsigned cmd, const char *name);

// pti_cmdline writes "pstrain CMD ARGS" into out (size n), quoting each
// argument that a shell would split or expand: the run record's.
void pti_cmdline(char *out, size_t n, const char *cmd, int argc,
    char **argv);

#endif // PT_CLI_FLAGS_H
