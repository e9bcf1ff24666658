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

#endif // PT_CLI_RUN_SOCKDIR_H
