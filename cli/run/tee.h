// cli/run/tee.h - the launcher's copy of its children's output. Each
// child writes its stdout and stderr into a pipe; one thread copies what
// comes through into the child's log file and keeps the last few KiB in
// memory, so that a failed child's last lines can be shown even when its
// log could not be written (a full disk), with the reason it could not.
#ifndef PT_CLI_RUN_TEE_H
#define PT_CLI_RUN_TEE_H

#include <stddef.h>

#define PTI_TEE_TAIL 4096 // bytes of each child's output kept in memory

typedef struct pti_tee pti_tee;

// pti_tee_open starts the copying thread, for at most `slots` children
// over the tee's life. 0 or PT_ENOMEM / PT_EIO with a detail.
int pti_tee_open(pti_tee **t, unsigned slots);

// pti_tee_add takes log_fd (the child's log, opened for writing; the tee
// closes it) and makes a pipe whose write end, *child_fd, the child
// writes to (the caller closes it once the child is forked; both ends
// are close-on-exec). Returns the child's slot, or -1 with an error set
// and errno (log_fd is then still the caller's).
int pti_tee_add(pti_tee *t, int log_fd, int *child_fd);

// pti_tee_tail waits up to wait_s seconds for the end of slot's output
// (its process has ended: everything it wrote is copied), then copies
// its last `lines` lines into buf (size n, NUL-terminated), and returns
// the error of the first failed write to its log (0: none failed);
// *lost gets the bytes that never reached the log.
int pti_tee_tail(pti_tee *t, int slot, double wait_s, unsigned lines,
    char *buf, size_t n, unsigned long long *lost);

// pti_tee_close waits up to wait_s seconds for every child's output to
// end, stops the thread and closes what is left. t may be NULL.
void pti_tee_close(pti_tee *t, double wait_s);

#endif // PT_CLI_RUN_TEE_H
