// cli/main.c - bin/pstrain: dispatch to a subcommand. Kept thin so that
// tests link the real code of every subcommand.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "cli.h"
#include "version.h"

static const struct {
	const char *name;
	int (*fn)(int, char **);
	const char *what;
} commands[] = {
	{"run", pti_cmd_run, "start S servers and W workers and train"},
	{"server", pti_cmd_server, "run one parameter server"},
	{"worker", pti_cmd_worker, "run one worker"},
	{"eval", pti_cmd_eval, "test loss and accuracy of a saved model"},
	{"compare", pti_cmd_compare, "run one job per mode and compare them"},
	{"secret", pti_cmd_secret, "write a new job secret to a file"},
};

static void usage(FILE *f)
{
	fprintf(f, "usage: pstrain COMMAND [--flag value ...]\n\n"
		   "Parameter-server training: sync or async SGD with sharded "
		   "servers and\nworker processes over nng.\n\ncommands:\n");
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		fprintf(f, "  %-8s %s\n", commands[i].name, commands[i].what);
	fprintf(f, "\n'pstrain COMMAND --help' lists a command's flags; "
		   "'pstrain --version' the build.\n"
		   "Each process uses one OpenBLAS thread unless "
		   "OPENBLAS_NUM_THREADS is set.\n");
}

int main(int argc, char **argv)
{
	// OpenBLAS starts its threads when it loads, before main: if the
	// user did not choose, re-execute with one thread per process.
	if (getenv("OPENBLAS_NUM_THREADS") == NULL) {
		setenv("OPENBLAS_NUM_THREADS", "1", 1);
		execv("/proc/self/exe", argv);
		// Fall through: without /proc we run with OpenBLAS's default.
	}
	if (argc == 2 && strcmp(argv[1], "--version") == 0) {
		printf("pstrain %s\n", PT_VERSION);
		return 0;
	}
	if (argc < 2 || strcmp(argv[1], "--help") == 0 ||
	    strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "help") == 0) {
		usage(argc < 2 ? stderr : stdout);
		return argc < 2 ? 2 : 0;
	}
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		if (strcmp(argv[1], commands[i].name) == 0) {
			// Re-executed through /proc/self/exe, the process
			// would be called "exe": name it for ps and top.
			char name[16];
			snprintf(name, sizeof(name), "pstrain-%s",
			    commands[i].name);
			prctl(PR_SET_NAME, name);
			return commands[i].fn(argc - 2, argv + 2);
		}
	fprintf(stderr, "pstrain: unknown command '%s'\n", argv[1]);
	usage(stderr);
	return 2;
}
