// cli/main.c - bin/pstrain: dispatch to a subcommand. Kept thin so that
// tests link the real code of every subcommand.
#include <malloc.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <unistd.h>

#include "cli/cli.h"
#include "pstrain.h"

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
	{"node", pti_cmd_node, "run one process of a job under srun/mpirun"},
	{"secret", pti_cmd_secret, "write a new job secret to a file"},
	{"dashboard", pti_cmd_dashboard,
	    "serve the dashboard of finished runs and comparisons"},
};

static void usage(FILE *f)
{
	fprintf(f, "usage: pstrain COMMAND [--flag value ...]\n\n"
		   "Parameter-server training in sync, async or bounded-"
		   "staleness (ssp) mode,\nor a ring all-reduce, with sharded "
		   "servers and worker processes over nng.\n\ncommands:\n");
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		fprintf(f, "  %-9s %s\n", commands[i].name, commands[i].what);
	fprintf(f, "\n'pstrain COMMAND --help' lists a command's flags; "
		   "'pstrain --version' the build.\n"
		   "Each process uses one OpenBLAS thread unless "
		   "OPENBLAS_NUM_THREADS is set.\n");
}

// ---------------------------------------------------------------- threads
// OpenBLAS starts a pool of busy-waiting threads, one per usable core, in
// its library constructor, before main. Many processes on a few cores
// crawl that way, so each process gets one thread unless the user set
// OPENBLAS_NUM_THREADS. Re-executing /proc/self/exe with the variable set
// broke `valgrind bin/pstrain` (there it names valgrind's tool), and the
// variable cannot be set early enough in-process: glibc runs an
// executable's .preinit_array before any library constructor, but libc's
// own constructor then resets the environment to the one the process was
// started with. OpenBLAS sizes its pool by the CPUs in the affinity mask,
// though, so the preinit function below pins the process to one of its
// CPUs while the libraries load, and main gives the mask back before any
// other thread exists. Then it sets the variable, for the children.

static cpu_set_t main_cpus; // the affinity mask the process started with
static int main_pinned;

static void main_pin_one_cpu(int argc, char **argv, char **envp)
{
	(void)argc, (void)argv;
	// getenv does not work yet: libc's constructor has not run.
	for (char **e = envp; e != NULL && *e != NULL; e++)
		if (strncmp(*e, "OPENBLAS_NUM_THREADS=", 21) == 0)
			return;
	cpu_set_t one;
	if (sched_getaffinity(0, sizeof(main_cpus), &main_cpus) != 0)
		return; // over CPU_SETSIZE CPUs: OpenBLAS's default, then
	CPU_ZERO(&one);
	for (int i = 0; i < CPU_SETSIZE; i++)
		if (CPU_ISSET(i, &main_cpus)) {
			CPU_SET(i, &one);
			break;
		}
	main_pinned = sched_setaffinity(0, sizeof(one), &one) == 0;
}
__attribute__((used, section(".preinit_array"))) static void (
    *const main_preinit)(int, char **, char **) = main_pin_one_cpu;

// malloc_keep: every training step allocates and frees messages of the
// model's size (nng's receive, each reply). By default glibc maps large
// ones fresh and gives freed memory back to the system, so each step pays
// page faults and the kernel's zeroing again. Served from the heap and
// kept, the same memory is reused step after step. One arena: nng's
// threads allocate and free those messages on whichever thread runs, and
// an arena per thread would keep a copy of each in every one of them.
static void malloc_keep(void)
{
	mallopt(M_ARENA_MAX, 1);
	mallopt(M_MMAP_THRESHOLD, 32 << 20); // glibc's largest
	mallopt(M_TRIM_THRESHOLD, 1 << 30);
}

// main_files raises the soft limit on open files to the hard one: a
// server under a flood of connections, or a launcher that opens its
// children's logs, must not run out at a usual soft limit of 1024
// (processes of a job inherit it).
static void main_files(void)
{
	struct rlimit r;
	if (getrlimit(RLIMIT_NOFILE, &r) == 0 && r.rlim_cur < r.rlim_max) {
		r.rlim_cur = r.rlim_max;
		(void)setrlimit(RLIMIT_NOFILE, &r);
	}
}

int main(int argc, char **argv)
{
	main_files();
	if (main_pinned)
		sched_setaffinity(0, sizeof(main_cpus), &main_cpus);
	if (getenv("OPENBLAS_NUM_THREADS") == NULL)
		setenv("OPENBLAS_NUM_THREADS", "1", 1);
	malloc_keep();
	pt_log_set(pt_log_stderr, NULL); // the library's messages: stderr
	if (argc == 2 && strcmp(argv[1], "--version") == 0) {
		printf("pstrain %s\n", pt_version());
		return 0;
	}
	if (argc < 2 || strcmp(argv[1], "--help") == 0 ||
	    strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "help") == 0) {
		usage(argc < 2 ? stderr : stdout);
		return argc < 2 ? PTI_EXIT_USAGE : PTI_EXIT_OK;
	}
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		if (strcmp(argv[1], commands[i].name) == 0) {
			// The launcher starts its children through
			// /proc/self/exe, so they would be called "exe":
			// name every process by its command for ps and top
			// (15 bytes at most: "pstrain-dashboa").
			char name[16];
			snprintf(name, sizeof(name), "pstrain-%.7s",
			    commands[i].name);
			prctl(PR_SET_NAME, name);
			return commands[i].fn(argc - 2, argv + 2);
		}
	fprintf(stderr, "pstrain: unknown command '%s'\n", argv[1]);
	usage(stderr);
	return PTI_EXIT_USAGE;
}
