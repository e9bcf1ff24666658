// cli/self.c - pstrain as a process: the path by which it starts its own
// subcommands as child processes (the launcher's servers and workers,
// compare's jobs), and the signals that ask it to stop (self.h).
#include "cli/self.h"

#include <limits.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

const char *pti_self_exe(void)
{
	// /proc/self/exe runs this very file even after a rebuild replaced
	// it during a long job, so it is the default. Under valgrind it
	// names valgrind's tool instead, while valgrind answers readlink of
	// it with the program it runs: the link then leads to another file
	// than the one the kernel runs, and that path is the one to take.
	static char path[PATH_MAX];
	struct stat kernel, link;
	ssize_t n = readlink("/proc/self/exe", path, sizeof(path) - 1);
	if (n <= 0 || (size_t)n >= sizeof(path) - 1)
		return "/proc/self/exe";
	path[n] = '\0';
	if (stat("/proc/self/exe", &kernel) != 0 || stat(path, &link) != 0 ||
	    (kernel.st_dev == link.st_dev && kernel.st_ino == link.st_ino))
		return "/proc/self/exe";
	return path;
}

void pti_on_stop_signals(void (*handler)(int))
{
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = handler;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
}
