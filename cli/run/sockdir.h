// cli/run/sockdir.h - the folder that holds a local job's ipc:// sockets.
// Only `pstrain run` uses it; the servers' own files go to --out.
#ifndef PT_CLI_RUN_SOCKDIR_H
#define PT_CLI_RUN_SOCKDIR_H

#include <stddef.h>

// pti_sockdir_make first removes the socket folders that launchers of
// this user left in the temporary folder when they were killed (kill -9
// leaves no chance to clean up), then creates this launcher's, mode 0700,
// named after its process, and writes its path into out (size size).
// The temporary folder is $TMPDIR, or /tmp when that is unset or too
// long for socket paths. Returns 0, or PT_EIO with a detail.
int pti_sockdir_make(char *out, size_t size);

// pti_proc_start reads the start time of process pid (clock ticks after
// boot) into *start: 0, ESRCH when there is no such process (or only its
// zombie), another errno when it cannot tell.
int pti_proc_start(long pid, unsigned long long *start);

// pti_proc_gone tells whether the process pid that started at `start` no
// longer exists (its pid may be another process's now): what a launcher
// left behind may then be removed.
int pti_proc_gone(long pid, unsigned long long start);

#endif // PT_CLI_RUN_SOCKDIR_H
