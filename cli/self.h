// cli/self.h - pstrain as a process: the path by which it starts itself
// as a child (the launcher's servers and workers, compare's jobs), and
// the signals that ask it to stop.
#ifndef PT_CLI_SELF_H
#define PT_CLI_SELF_H

// pti_self_exe returns the path to execute to start this same binary as
// a child: "/proc/self/exe", or under valgrind (where that is valgrind's
// tool) the program's own path. Points to a static buffer; call it from
// one thread, e.g. in the child after fork.
const char *pti_self_exe(void);

// pti_on_stop_signals has SIGINT and SIGTERM call handler, without
// SA_RESTART: a blocking call they interrupt returns EINTR.
void pti_on_stop_signals(void (*handler)(int));

#endif // PT_CLI_SELF_H
